"""A framework's fused elementwise kernels where a function computes exactly what one does: a
GELU forward `u/2 * (1 + tanh(sqrt(2/pi) * (u + 0.044715 u**3)))` one `gelu_tanh(u)` (PyTorch's
`F.gelu(u, approximate="tanh")`, one pass instead of nine), its gradient `g * gelu'(u)` one
`gelu_tanh_backward(g, u)` (`aten.gelu_backward`, one pass instead of twelve).

Found by the form of the statements, never by the op's name: a statement's expression, with
the single-assignment elementwise temporaries it reads written out (lowering's `cse` spreads a
GELU gradient over five of them), equals a constant times the kernel's formula of one of
those temporaries or inputs `u` (and, for a gradient, times another, `g`). Equal means equal
as functions: the two agree at random points to 1e-12, so a GELU written with other constants
(0.0447) is no GELU, and one written in another order still is. The temporaries left unread
go. Applied to an op's functions just before they are printed, for a target whose printer
prints the kernels (PyTorch's); the IR it reads is left as it is.
"""

from __future__ import annotations

import dataclasses
import random
import re
from typing import Callable

import sympy as sp

from symgrad import ir
from symgrad.lowering.shared import unread_temporaries_dropped


class gelu_tanh(sp.Function):
    """GELU, its tanh approximation: `F.gelu(u, approximate="tanh")`."""

    nargs = 1


class gelu_tanh_backward(sp.Function):
    """`g` times the derivative of `gelu_tanh` at `u`: `aten.gelu_backward(g, u, approximate="tanh")`."""

    nargs = 2


class gelu_erf(sp.Function):
    """GELU, exact: `F.gelu(u)`."""

    nargs = 1


class gelu_erf_backward(sp.Function):
    """`g` times the derivative of `gelu_erf` at `u`: `aten.gelu_backward(g, u)`."""

    nargs = 2


@dataclasses.dataclass(frozen=True)
class Kernel:
    """A fused elementwise kernel: the formula it computes of `u`, the function every
    expression computing it holds (a quick test), and the IR functions standing for it and for
    `g` times its derivative."""

    formula: Callable[[sp.Expr], sp.Expr]
    holds: type
    forward: type
    backward: type


_u = sp.Symbol("u", real=True)
KERNELS = (
    Kernel(lambda u: u / 2 * (1 + sp.tanh(sp.sqrt(2 / sp.pi) * (u + sp.Rational(44715, 1000000) * u**3))),
           sp.tanh, gelu_tanh, gelu_tanh_backward),
    Kernel(lambda u: u / 2 * (1 + sp.erf(u / sp.sqrt(2))), sp.erf, gelu_erf, gelu_erf_backward),
)
_TEMPORARY = re.compile(r"(t|tmp|_shared)\d+")  # the names lowering gives its temporaries


def with_pointwise_kernels(op: ir.OpCode) -> ir.OpCode:
    """`op` with each kernel found in its forward's and gradient's branches one call."""
    return dataclasses.replace(op, forward=_function_with_kernels(op.forward), vjp=_function_with_kernels(op.vjp))


def _function_with_kernels(function: ir.Function) -> ir.Function:
    kept = {r for r in function.results if r}
    branches = tuple(dataclasses.replace(b, body=_body_with_kernels(b.body, kept),
                                         guarded_body=b.guarded_body and _body_with_kernels(b.guarded_body, kept))
                     for b in function.branches)
    return dataclasses.replace(function, branches=branches)


def _body_with_kernels(body: tuple, kept: set) -> tuple:
    if not any(_elementwise(s) is not None and _elementwise(s).has(*(k.holds for k in KERNELS)) for s in body):
        return body  # no kernel's function anywhere: nothing to find (most bodies)
    assigned = [s.target for s in ir.statements(body)]
    definitions, result, changed = {}, [], False
    for statement in body:
        expr = _elementwise(statement)
        found = None if expr is None else _kernel_form(expr, definitions)
        if found is not None:
            statement, changed = _with_elementwise(statement, found), True
        if isinstance(statement, ir.Assign) and isinstance(statement.value, ir.Elementwise) \
                and assigned.count(statement.target) == 1:
            definitions[statement.target] = statement.value.expr
        result.append(statement)
    return tuple(unread_temporaries_dropped(result, _TEMPORARY.fullmatch, set(kept))) if changed else body


def _kernel_form(expr: sp.Expr, definitions: dict) -> sp.Expr | None:
    """`expr` as a constant times a kernel call, where it is one (`definitions`: each
    temporary's name and value). Compared with everything written out: `x/2 + t0/2 * tanh(...)`
    with `t0 = x + b` is a GELU of `t0` although `x` stands apart."""
    whole, reached = _written_out(expr, definitions, keep=set())
    variables = reached[::-1] + sorted(whole.free_symbols, key=str)  # the latest temporary first
    values = {v: _written_out(v, definitions, keep=set())[0] for v in variables}
    for kernel in (k for k in KERNELS if whole.has(k.holds)):
        derivative = sp.diff(kernel.formula(_u), _u)
        for u in variables:
            factor = _constant_ratio(whole, kernel.formula(values[u]))
            if factor is not None:
                return factor * kernel.forward(u)
            for g in (v for v in variables if v != u):
                factor = _constant_ratio(whole, values[g] * derivative.xreplace({_u: values[u]}))
                if factor is not None:
                    return factor * kernel.backward(g, u)
    return None


def _written_out(expr: sp.Expr, definitions: dict, keep: set) -> tuple[sp.Expr, list]:
    """(`expr` with the temporaries it reads, but those named in `keep`, replaced by their
    values, and theirs, until none is left; the temporaries replaced, in the order assigned)."""
    reached = {}
    for _ in range(len(definitions) + 1):
        replacing = {s: definitions[s.name] for s in expr.free_symbols if s.name in definitions and s.name not in keep}
        if not replacing:
            break
        reached.update((s.name, s) for s in replacing)
        expr = expr.xreplace(replacing)
    return expr, [reached[name] for name in definitions if name in reached]


def _constant_ratio(expr: sp.Expr, formula: sp.Expr) -> sp.Expr | None:
    """The rational constant c with `expr == c * formula` as functions of their variables
    (checked at random points), else None."""
    if not formula.free_symbols <= expr.free_symbols:
        return None
    variables = sorted(expr.free_symbols, key=str)
    draw, ratios = random.Random(0), []
    for _ in range(3):
        point = {v: sp.Float(draw.uniform(-1.5, 1.5), 30) for v in variables}
        try:
            a, b = complex(expr.xreplace(point).evalf(30)), complex(formula.xreplace(point).evalf(30))
        except (TypeError, ValueError):  # a function with no numeric value here (a select)
            return None
        if abs(b) < 1e-6:
            return None
        ratios.append(a / b)
    if any(abs(r - ratios[0]) > 1e-12 * max(1.0, abs(ratios[0])) for r in ratios) or abs(ratios[0].imag) > 1e-12:
        return None
    constant = sp.nsimplify(ratios[0].real, rational=True, tolerance=1e-12)
    return constant if constant != 0 else None


def _elementwise(statement):
    if isinstance(statement, ir.Assign) and isinstance(statement.value, ir.Elementwise):
        return statement.value.expr
    if isinstance(statement, ir.Assign) and isinstance(statement.value, ir.Reduce) and isinstance(statement.value.x, ir.Elementwise):
        return statement.value.x.expr
    return None


def _with_elementwise(statement: ir.Assign, expr: sp.Expr) -> ir.Assign:
    if isinstance(statement.value, ir.Elementwise):
        return ir.Assign(statement.target, ir.Elementwise(expr))
    return ir.Assign(statement.target, dataclasses.replace(statement.value, x=ir.Elementwise(expr)))
