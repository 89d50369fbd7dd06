"""Branches that apply partial functions, guarded (the double-where idiom).

A branch of a `Piecewise` that applies a partial function (a division, a logarithm) must be
computed where the branch is taken only, or its untaken values send NaN through an autodiff
framework's gradient of the select: each tensor it reads goes through `safe_where`, 1 where
the branch is not taken. Which functions need no guard: `TOTAL_FUNCTIONS`.
"""

from __future__ import annotations

import sympy as sp


# Functions finite and differentiable wherever their arguments are finite: a branch reading
# tensors only through these (and through sums, products and integer powers) needs no guard.
# Not exp, sinh, cosh: they overflow (Elu's untaken grad * exp(features) at features = 1000).
TOTAL_FUNCTIONS = (
    sp.sin, sp.cos, sp.tanh, sp.atan, sp.asinh, sp.erf, sp.erfc,
    sp.Abs, sp.sign, sp.conjugate, sp.re, sp.im, sp.Max, sp.Min, sp.floor, sp.ceiling,
    sp.Piecewise,  # its branches are guarded where it is printed
)


class safe_where(sp.Function):
    """`where(mask, 1, x)`: x where a branch is taken, else a value safe for it. Printed as
    that select by a target whose code is differentiated (TensorFlow's), as x by one whose
    code is not (numpy's)."""

    nargs = 2
    is_commutative = True  # as x: SymPy would not otherwise print `a / safe_where(x, m)` as a quotient

    def _eval_is_real(self):
        return self.args[0].is_real

    def sort_key(self, order=None):  # and ordered as x among factors and terms
        return self.args[0].sort_key(order)


class SafePiecewise(sp.Piecewise):
    """A `Piecewise` already `guarded`: printed as it is."""


def guarded(piecewise: sp.Piecewise, read=safe_where) -> sp.Piecewise:
    """`piecewise` with each branch that applies a partial function reading every symbol x
    as `read(x, mask)` (`safe_where`), the mask true where the branch is not taken: the
    double-where idiom. A select's untaken values are discarded, but the gradient through
    them is zero times the branch's derivative there, NaN where that is infinite or NaN
    (Xlogy's log(y) for y < 0, DivNoNan's 1/y at y = 0), and so at second order. Every
    symbol, not only the partial function's arguments: the value at 1 may not be finite
    either (-log(1 - s) / s), and the select then sends the gradient to the constant, never
    to a tensor. A Piecewise without a last `True` branch is left as it is."""
    *branches, (last, otherwise) = piecewise.args
    if isinstance(piecewise, SafePiecewise) or otherwise != sp.true:
        return piecewise
    conditions = [c for _, c in branches]

    def safe(value, mask):
        return _read_safely(value, mask, read) if has_partial_function(value) else value

    # the negation evaluated (`x < 0`, not `~(x >= 0)`): a later step that rebuilds the mask
    # evaluates it, and whether one does must not change the generated code
    pairs = [
        (safe(v, sp.Or(sp.Not(c), *conditions[:k], evaluate=False)), c)
        for k, (v, c) in enumerate(branches)
    ]
    pairs.append((safe(last, sp.Or(*conditions, evaluate=False)), sp.true))
    return SafePiecewise(*pairs, evaluate=False)


def _read_safely(expr: sp.Expr, mask, read) -> sp.Expr:
    """`expr` with each symbol x read as `read(x, mask)`, but inside a `safe_where`."""
    if isinstance(expr, sp.Symbol):
        return read(expr, mask)
    if isinstance(expr, (safe_where, sp.logic.boolalg.BooleanFunction)) or not expr.args:
        return expr  # a bool tensor in a condition (a mask's `~m`, `m & c`) is not a number to guard
    if isinstance(expr, sp.Piecewise):  # a condition that is a bool tensor itself: likewise
        return expr.func(*[(_read_safely(v, mask, read), c if c.is_Symbol else _read_safely(c, mask, read)) for v, c in expr.args])
    return expr.func(*[_read_safely(a, mask, read) for a in expr.args])


def has_partial_function(expr) -> bool:
    """Whether `expr` applies a function outside `TOTAL_FUNCTIONS` to a tensor, or a power
    whose exponent is not a non-negative integer (a division, a square root)."""
    for node in sp.preorder_traversal(expr):
        if not node.free_symbols:
            continue
        if isinstance(node, sp.Pow) and not (node.exp.is_Integer and node.exp >= 0):
            return True
        if isinstance(node, sp.Function) and not isinstance(node, TOTAL_FUNCTIONS):
            return True
    return False
