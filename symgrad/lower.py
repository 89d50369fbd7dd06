"""Lower derivations to IR: recognise the array operation each term is, never a Jacobian.

A term `Sum(x[..] * y[..], summed)` becomes, in order of preference: the variable itself, an
elementwise product, a transpose or a sum over axes (one operand), a matmul with transpose
flags (a matrix product), and only otherwise an einsum.
"""

from __future__ import annotations

import sympy as sp

from symgrad.declare import ELEMENTWISE, OpDecl
from symgrad.derive import Derivation, TensorValue, Term
from symgrad.errors import LoweringError
from symgrad.ir import (
    Assign,
    Branch,
    Conj,
    Einsum,
    Elementwise,
    Function,
    MatMul,
    OpCode,
    ReduceSum,
    SumToShape,
    Transpose,
    Value,
)
from symgrad.simplify import share_subexpressions


def lower_op(decl: OpDecl, derivations: list[Derivation]) -> OpCode:
    """All variants of one op -> its forward and vector-Jacobian-product functions."""
    first = derivations[0]
    inputs = tuple(t.name for t in first.variant.inputs)
    outputs = tuple(o.name for o in first.variant.outputs)
    forward = Function(
        params=inputs,
        prologue=(),
        branches=tuple(_lower_forward(decl, d) for d in derivations),
        results=outputs,
    )
    vjp_branches = tuple(_lower_vjp(decl, d) for d in derivations)
    used = _outputs_used(outputs, vjp_branches)
    conj = tuple(Assign(n, Conj(n)) for n in inputs + used) if decl.complex_ok else ()
    vjp = Function(
        params=first.grad_names + inputs + outputs,
        prologue=conj,
        branches=vjp_branches,
        results=tuple(None if first.vjp[n] is None else f"grad_{n}" for n in inputs),
    )
    return OpCode(
        name=decl.name,
        func_name=decl.func_name,
        doc=decl.doc,
        inputs=inputs,
        outputs=outputs,
        grads=first.grad_names,
        enumerated_attrs=tuple((a.name, a.default) for a in decl.enumerated_attrs),
        numeric_attrs=tuple((a.name, a.default) for a in decl.numeric_attrs),
        forward=forward,
        vjp=vjp,
        outputs_used=used,
        location=str(decl.location),
    )


def _outputs_used(outputs, branches) -> tuple[str, ...]:
    names = set()
    for branch in branches:
        for statement in branch.body:
            if isinstance(statement.value, (Elementwise, SumToShape)):
                expr = getattr(statement.value, "value", statement.value).expr
                names |= {str(s) for s in expr.free_symbols}
    return tuple(o for o in outputs if o in names)


def _lower_forward(decl: OpDecl, derivation: Derivation) -> Branch:
    body = []
    for name, value in derivation.forward.items():
        if decl.kind == ELEMENTWISE:
            body.append(Assign(name, Elementwise(value)))
        else:
            body += lower_tensor_value(decl, name, value)
    return Branch(derivation.variant.attr_values, tuple(body))


def _lower_vjp(decl: OpDecl, derivation: Derivation) -> Branch:
    if decl.kind == ELEMENTWISE:
        body = _lower_elementwise_vjp(derivation)
    else:
        body = []
        for name, value in derivation.vjp.items():
            if value is not None:
                body += lower_tensor_value(decl, f"grad_{name}", value)
    return Branch(derivation.variant.attr_values, tuple(body))


def _lower_elementwise_vjp(derivation: Derivation) -> list[Assign]:
    names = [n for n, e in derivation.vjp.items() if e is not None]
    temps, reduced = share_subexpressions([derivation.vjp[n] for n in names], prefix="tmp")
    body = [Assign(str(symbol), Elementwise(expr)) for symbol, expr in temps]
    broadcasting = len(derivation.variant.inputs) > 1
    for name, expr in zip(names, reduced):
        value = SumToShape(Elementwise(expr), name) if broadcasting else Elementwise(expr)
        body.append(Assign(f"grad_{name}", value))
    return body


# --- index summation -----------------------------------------------------------------------


def lower_tensor_value(decl: OpDecl, target: str, value: TensorValue) -> list[Assign]:
    """Statements computing `target[value.indices] = sum(value.terms)`."""
    lowered = [_lower_term(decl, term, value.indices) for term in value.terms]
    if len(lowered) == 1 and lowered[0][0] == 1:
        return [Assign(target, lowered[0][1])]
    body, total = [], sp.S.Zero
    for n, (coefficient, term_value) in enumerate(lowered):
        temp = f"{target}_{n}"
        body.append(Assign(temp, term_value))
        total += coefficient * sp.Symbol(temp)
    return body + [Assign(target, Elementwise(total))]


def _lower_term(decl: OpDecl, term: Term, out: tuple) -> tuple[sp.Expr, Value]:
    """(scalar coefficient, array value) for one term."""
    coefficient, operands = sp.S.One, []
    for factor in sp.Mul.make_args(term.factor):
        if isinstance(factor, sp.Indexed) and all(isinstance(i, sp.Symbol) for i in factor.indices):
            operands.append((str(factor.base.label), tuple(factor.indices)))
        elif not factor.atoms(sp.Indexed):
            coefficient *= factor
        else:
            raise LoweringError(
                f"cannot lower {factor} in {term}: only products of tensor entries are supported yet",
                decl.name,
                decl.location,
            )
    summed = tuple(s[0] for s in term.sums)
    missing = set(out) - {i for _, idx in operands for i in idx}
    if missing or not operands:
        raise LoweringError(
            f"cannot lower {term}: output indices {sorted(map(str, missing))} need broadcasting, not supported yet",
            decl.name,
            decl.location,
        )
    return coefficient, lower_contraction(operands, out, summed)


def lower_contraction(operands: list[tuple[str, tuple]], out: tuple, summed: tuple) -> Value:
    """The plainest array operation computing `Sum(prod(operands), summed)` indexed by `out`."""
    distinct = all(len(set(idx)) == len(idx) for _, idx in operands)
    if len(operands) == 1 and distinct:
        return _lower_single(operands[0], out)
    if not summed and distinct and all(idx == tuple(out) for _, idx in operands):
        return Elementwise(sp.Mul(*[sp.Symbol(name) for name, _ in operands]))
    matmul = _as_matmul(operands, out, summed)
    return matmul if matmul is not None else _as_einsum(operands, out)


def _lower_single(operand, out) -> Value:
    name, idx = operand
    kept = [i for i in idx if i in out]
    value: Value = Elementwise(sp.Symbol(name))
    if len(kept) < len(idx):
        value = ReduceSum(name, tuple(n for n, i in enumerate(idx) if i not in out))
        if list(kept) == list(out):
            return value
        return _as_einsum([operand], out)
    if tuple(idx) == tuple(out):
        return value
    return Transpose(name, tuple(idx.index(i) for i in out))


def _as_matmul(operands, out, summed) -> MatMul | None:
    """`MatMul` when this is a product of two matrices contracting exactly one index."""
    if len(operands) != 2 or len(summed) != 1 or len(out) != 2:
        return None
    (x, xi), (y, yi) = operands
    (k,) = summed
    if len(xi) != 2 or len(yi) != 2 or k not in xi or k not in yi or xi[0] == xi[1] or yi[0] == yi[1]:
        return None
    x_free, y_free = _other(xi, k), _other(yi, k)
    if (x_free, y_free) == tuple(out):
        return MatMul(x, y, xi[0] == k, yi[1] == k)
    if (y_free, x_free) == tuple(out):
        return MatMul(y, x, yi[0] == k, xi[1] == k)
    return None


def _other(pair, k):
    return pair[1] if pair[0] == k else pair[0]


def _as_einsum(operands, out) -> Einsum:
    letters: dict = {}
    for _, idx in operands:
        for i in idx:
            letters.setdefault(i, "abcdefghijklmnopqrstuvwxyz"[len(letters)])
    spec = ",".join("".join(letters[i] for i in idx) for _, idx in operands)
    spec += "->" + "".join(letters[i] for i in out)
    return Einsum(spec, tuple(name for name, _ in operands))
