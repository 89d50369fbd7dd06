"""Reductions (sum, product, maximum, minimum over whole axes, keepdims where it saves a
transpose) and scans (cumulative sums, products and log-sum-exps).
"""

from __future__ import annotations

import sympy as sp

from symgrad.declare import BATCH, BATCH_DIM
from symgrad.functions import logsumexp, product
from symgrad.ir import Elementwise, Reduce, Scan
from symgrad.lowering.symbols import free_indices, has_dependent_range, layout


def reduction(lowering, expr, axes) -> sp.Expr:
    """A product, maximum or minimum over a whole axis, or a cumulative product or
    log-sum-exp (a scan)."""
    kind = "prod" if isinstance(expr, product) else "logsumexp" if isinstance(expr, logsumexp) else expr.kind
    if has_dependent_range(expr):
        if kind not in ("prod", "logsumexp"):
            lowering.fail(f"{expr}: only sums, products and log-sum-exps may have a range that depends on an index")
        return scan(lowering, kind, expr, axes)
    if kind == "logsumexp":
        lowering.fail(f"{expr}: a log-sum-exp over a whole axis is declared with its maximum subtracted")
    return reduce(lowering, kind, expr.function, tuple(lim[0] for lim in expr.limits), axes)


def position(lowering, expr, axes) -> sp.Expr:
    """The first position of a maximum or minimum along one whole axis (argmax, argmin)."""
    return reduce(lowering, expr.kind, expr.function, (expr.limits[0][0],), axes, keepdims=False)


def reduce(lowering, kind, body, summed, axes, keepdims=True) -> sp.Expr:
    """Reduce `body` over `summed`, each taking the place of an axis `body` does not vary
    along (keepdims, unless told not to), or else laid out as `body`'s own tensors are (no
    transpose)."""
    body, summed, axes = _batch_read_again(lowering, body, summed, axes)
    # a slot before the body's first axis would not exist in its (broadcast) array
    first = min((n for n, a in enumerate(axes) if a in free_indices(body)), default=len(axes))
    unused = [n for n, a in enumerate(axes) if a not in free_indices(body) and a != BATCH and n > first]
    if keepdims and BATCH not in summed and len(unused) >= len(summed):
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


def _batch_read_again(lowering, body, summed: tuple, axes: tuple) -> tuple:
    """A summed index the leading `...` axes were renamed to (a sum over every axis inside an
    expression that keeps them, `x[...] / sqrt(all_entries(x[...]**2))`, or its gradient)
    read as `...` again: one array has one set of leading axes, so such a sum reduces them all,
    and its result broadcasts against the free `...` instead of holding it."""
    renamed = [i for i in summed if i != BATCH and lowering.ranges.get(i) == (sp.S.Zero, BATCH_DIM - 1)]
    if not renamed:
        return body, summed, axes
    if len(renamed) > 1 or BATCH in free_indices(body):
        lowering.fail(f"{sp.Sum(body, *((i,) for i in summed))}: sums the leading axes `...` against themselves")
    body = body.xreplace({renamed[0]: BATCH})
    return body, tuple(BATCH if i == renamed[0] else i for i in summed), tuple(a for a in axes if a != BATCH)


LOG_OF_ZERO = sp.Float(-1e30)  # log(0) in a log-space scan: finite, so no inf - inf in it or its gradient


def cumulative_exp_sum(lowering, expr: sp.Sum, axes) -> sp.Expr | None:
    """A cumulative sum over k of c * exp(a + b), `a` varying along the bounding index i and
    `b` and `c` along k: exp(a + logsumexp(b + log(c))), a log-space scan for each sign of c
    (TensorFlow's hand-written CumulativeLogsumexp gradient). A log-sum-exp's gradient
    exp(x[i]) * sum_{k >= i} g[k] exp(-out[k]) is a product of an overflow and an underflow
    otherwise."""
    if not has_dependent_range(expr) or len(expr.limits) != 1:
        return None
    k, low, high = expr.limits[0]
    bound = free_indices(sp.sympify(low) - sp.sympify(high))
    factors = sp.Mul.make_args(expr.function)
    exponent = sp.Add(*[f.args[0] for f in factors if isinstance(f, sp.exp)])
    c = sp.Mul(*[f for f in factors if not isinstance(f, sp.exp)])
    a = sp.Add(*[t for t in sp.Add.make_args(exponent) if bound & free_indices(t)])
    b = exponent - a
    if len(bound) != 1 or a == 0 or k in free_indices(a) or bound & free_indices(b + c):
        return None
    signs = (1,) if c.is_positive else (1, -1)
    terms = [sign * sp.exp(a + logsumexp(b + _log_of_positive(sign * c), (k, low, high))) for sign in signs]
    return lowering.array(sp.Add(*terms), axes)


def _log_of_positive(c: sp.Expr) -> sp.Expr:
    """log(c) where c > 0, else `LOG_OF_ZERO`."""
    return sp.log(c) if c.is_positive else sp.Piecewise((sp.log(c), c > 0), (LOG_OF_ZERO, True))


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
    # the summand along i's axis: k named i there, so it spans i's whole range (k's own
    # range ends at i, no size)
    inner = lowering.array(function.xreplace({k: i}), axes)
    axis = axes.index(i) - len(axes)
    return sp.Symbol(lowering.temp(Scan(kind, Elementwise(inner), axis, offset == 1, reverse)))
