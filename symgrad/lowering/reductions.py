"""Reductions (sum, product, maximum, minimum over whole axes, keepdims where it saves a
transpose) and scans (cumulative sums and products).
"""

from __future__ import annotations

import sympy as sp

from symgrad.declare import BATCH
from symgrad.functions import product
from symgrad.ir import Elementwise, Reduce, Scan
from symgrad.lowering.symbols import free_indices, has_dependent_range, layout


def reduction(lowering, expr, axes) -> sp.Expr:
    """A product, maximum or minimum: over a whole axis, or cumulative (products only)."""
    kind = "prod" if isinstance(expr, product) else expr.kind
    if has_dependent_range(expr):
        if kind != "prod":
            lowering.fail(f"{expr}: only sums and products may have a range that depends on an index")
        return scan(lowering, kind, expr, axes)
    return reduce(lowering, kind, expr.function, tuple(lim[0] for lim in expr.limits), axes)


def reduce(lowering, kind, body, summed, axes) -> sp.Expr:
    """Reduce `body` over `summed`, each taking the place of an axis `body` does not vary
    along (keepdims), or else laid out as `body`'s own tensors are (no transpose)."""
    # a slot before the body's first axis would not exist in its (broadcast) array
    first = min((n for n, a in enumerate(axes) if a in free_indices(body)), default=len(axes))
    unused = [n for n, a in enumerate(axes) if a not in free_indices(body) and a != BATCH and n > first]
    if BATCH not in summed and len(unused) >= len(summed):
        extended = list(axes)
        for index, slot in zip(summed, reversed(unused)):
            extended[slot] = index
        positions, keepdims = [extended.index(i) for i in summed], True
    else:
        extended, keepdims = layout(body, axes, summed), False
        positions = [extended.index(i) for i in summed if i != BATCH]
    inner = Elementwise(lowering.array(body, tuple(extended)))
    negative = tuple(sorted(p - len(extended) for p in positions))
    if extended == [BATCH]:  # every axis: a reduction to a scalar
        return sp.Symbol(lowering.temp(Reduce(kind, inner, ())))
    if BATCH in summed:  # every leading axis too: the reduction needs the array's rank
        inner = str(inner.expr) if inner.expr.is_Symbol else lowering.temp(inner)
        return sp.Symbol(lowering.temp(Reduce(kind, inner, negative, False, len(extended) - 1)))
    return sp.Symbol(lowering.temp(Reduce(kind, inner, negative, keepdims)))


def cumulative_sum(lowering, expr: sp.Sum, axes) -> sp.Expr | None:
    """A Sum whose range starts or ends at another index, as a scan."""
    return scan(lowering, "sum", expr, axes) if has_dependent_range(expr) else None


def scan(lowering, kind, expr, axes) -> sp.Expr:
    """A sum or product over k whose range starts or ends at another index i: cumulative
    along i (exclusive when the range stops one short of i)."""
    dependent = [lim for lim in expr.limits if free_indices(sp.sympify(lim[1]) - sp.sympify(lim[2]))]
    if len(dependent) != 1:
        lowering.fail(f"{expr}: only one summation index may have a range that depends on another")
    k, low, high = dependent[0]
    others = [lim for lim in expr.limits if lim is not dependent[0]]
    function = sp.Sum(expr.function, *others) if others else expr.function  # summed first
    bound = free_indices(sp.sympify(low) - sp.sympify(high)) or {None}
    (i,) = bound if len(bound) == 1 else (None,)
    if i is None or i not in axes or i in free_indices(function):
        lowering.fail(f"{expr}: a cumulative sum needs exactly one bounding index, not in the summand")
    reverse = bool(low.has(i))
    offset = (low - i) if reverse else (i - high)
    if offset not in (0, 1) or (reverse and high.has(i)) or (not reverse and low != 0):
        lowering.fail(f"{expr}: range {low}..{high} is not a (reverse) cumulative range over {i}")
    extended = tuple(k if a == i else a for a in axes)
    inner = lowering.array(function, extended)
    axis = axes.index(i) - len(axes)
    return sp.Symbol(lowering.temp(Scan(kind, Elementwise(inner), axis, offset == 1, reverse)))
