"""TensorFlow's fused gradient kernels, each with the formula it computes, and how to find one.

An elementwise gradient that equals a kernel's formula is evaluated by that kernel in one pass
(`tf.raw_ops.SigmoidGrad(y=y, dy=grad)`) instead of one kernel per operation. The table holds
formulas, never op names: a gradient is matched by what it computes, wherever it comes from.

Left out, because their semantics differ from the plain formula: `SqrtGrad`, `RsqrtGrad` and
`ReciprocalGrad` conjugate `y` themselves and return 0 wherever `dy == 0` (the formula is NaN
there at `y == 0`); `EluGrad` and `SeluGrad` select on the output, `LeakyReluGrad` and
`Relu6Grad` need their attribute as a Python float.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import sympy as sp

from symgrad.functions import sigmoid

# not analytic: an identity of real expressions built with these need not hold for complex ones
NON_ANALYTIC = (sp.Abs, sp.sign, sp.conjugate, sp.re, sp.im, sp.Piecewise, sp.Heaviside, sp.Max, sp.Min)


@dataclass(frozen=True)
class FusedKernel:
    """One TensorFlow kernel computing an elementwise formula of same-shaped operands."""

    name: str  # op type: called as `tf.raw_ops.<name>(**operands)`
    params: tuple[sp.Symbol, ...]  # its inputs, named as TensorFlow names them, in order
    formula: sp.Expr  # what it computes, in `params`
    complex: bool  # also supports complex dtypes, computing `formula` as written (no conjugate)

    def __str__(self) -> str:
        return f"{self.name}({', '.join(map(str, self.params))}) = {self.formula}"

    def pattern(self) -> tuple[sp.Expr, dict]:
        """`formula` with a Wild per parameter, and the parameter each Wild stands for."""
        wilds = {p: sp.Wild(f"{p}_") for p in self.params}
        return self.formula.xreplace(wilds), {w: p for p, w in wilds.items()}


def kernel(name: str, params: str, formula, complex: bool) -> FusedKernel:
    """A table entry: `formula(*symbols)` over real symbols named by `params`."""
    symbols = sp.symbols(params, real=True, seq=True)
    return FusedKernel(name, tuple(symbols), formula(*symbols), complex)


# Each formula checked against the kernel on float32, float64 and (where `complex`) complex128
# in tests/test_fused.py.
KERNELS = (
    kernel("SigmoidGrad", "y dy", lambda y, dy: dy * y * (1 - y), complex=True),
    kernel("TanhGrad", "y dy", lambda y, dy: dy * (1 - y**2), complex=True),
    kernel("SoftplusGrad", "gradients features", lambda g, f: g * sigmoid(f), complex=False),
    kernel("ReluGrad", "gradients features", lambda g, f: sp.Piecewise((g, f > 0), (0, True)), complex=False),
    kernel("SoftsignGrad", "gradients features", lambda g, f: g / (1 + sp.Abs(f)) ** 2, complex=False),
)


@dataclass(frozen=True)
class KernelMatch:
    """A kernel found for an expression: the kernel, and the operand for each parameter."""

    kernel: FusedKernel  # the table entry
    operands: tuple[tuple[str, sp.Expr], ...]  # (parameter name, operand expression), in order


def find_kernel(expr: sp.Expr, arrays: set[str], complex_ok: bool, kernels=KERNELS) -> KernelMatch | None:
    """The first kernel of `kernels` whose formula `expr` equals, with operands taken from `expr`.

    Args:
        expr: an elementwise expression whose array symbols all have one shape.
        arrays: the names of the symbols of `expr` that are arrays (not numeric attributes).
        complex_ok: `expr` is also evaluated on complex dtypes.
    """
    if complex_ok and expr.has(*NON_ANALYTIC):
        return None  # its identities were checked on reals only
    parts = _parts(expr)
    for candidate in kernels:
        if complex_ok and not candidate.complex:
            continue
        match = _match(expr, candidate, parts, arrays)
        if match is not None:
            return match
    return None


def _match(expr, candidate: FusedKernel, parts: set, arrays: set) -> KernelMatch | None:
    """`candidate` applied to parts of `expr`, when it matches structurally and equals `expr`."""
    pattern, params = candidate.pattern()
    found = expr.match(pattern)
    if not found or set(found) != set(params):
        return None
    operands = {params[w]: value for w, value in found.items()}
    # SymPy's match solves for its wilds (`grad*(1 - y**2)` "is" `dy*y*(1 - y)` with `y = y**2`,
    # `dy = grad/y**2`): an operand must be a part of `expr` holding an array, or the kernel
    # would add work, or a division
    if not all(v in parts and {str(s) for s in v.free_symbols} & arrays for v in operands.values()):
        return None
    if sp.simplify(candidate.formula.xreplace(operands) - expr) != 0:
        return None
    return KernelMatch(candidate, tuple((str(p), operands[p]) for p in candidate.params))


def _parts(expr) -> set:
    """Every subexpression of `expr`, and every product of some factors of one of its products."""
    parts = set(sp.preorder_traversal(expr))
    for node in [n for n in parts if isinstance(n, sp.Mul) and len(n.args) <= 6]:
        for r in range(2, len(node.args)):
            parts.update(sp.Mul(*c) for c in itertools.combinations(node.args, r))
    return parts
