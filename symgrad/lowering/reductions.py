"""Reductions (sum, product, maximum, minimum over whole axes, keepdims where it saves a
transpose) and scans (cumulative sums, products and log-sum-exps).
"""

from __future__ import annotations

import sympy as sp

from symgrad.declare import BATCH, BATCH_DIM
from symgrad.functions import indicator, logsumexp, product
from symgrad.ir import Elementwise, Reduce, Scan
from symgrad.lowering.recurrences import running_product_sum
from symgrad.lowering.symbols import free_indices, has_dependent_range, laid_out, layout


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


def dependent_range_first(lowering, expr: sp.Sum, axes) -> sp.Expr | None:
    """A Sum over several indices, one of whose ranges ends (starts) at an index k that the
    summand reads too (no scan of the whole), where the factors reading the summed index do
    not read k (but for a decay, `a**(k - i)`): that index summed first over them (a
    cumulative sum, a recurrence), the others
    after: `sum_{i >= k, j} g[i, j] * w[k, j]` is `sum_j w[k, j] * (sum_{i >= k} g[i, j])`,
    never a product over (k, i, j)."""
    if len(expr.limits) < 2:
        return None
    for i, low, high, others in _limits_apart(expr):
        bound = free_indices(sp.sympify(low)) | free_indices(sp.sympify(high))
        if not bound & free_indices(expr.function):
            continue
        factors = sp.Mul.make_args(expr.function)
        along = sp.Mul(*[f for f in factors if i in free_indices(f)])
        rest = sp.Mul(*[f for f in factors if i not in free_indices(f)])
        reading = [f for f in sp.Mul.make_args(along) if bound & free_indices(f)]
        if all(isinstance(f, sp.Pow) and not free_indices(f.base) for f in reading):  # none, or a decay
            return summed_first(lowering, sp.Sum(along, (i, low, high)), rest, others, axes)
    return None


def _limits_apart(expr: sp.Sum):
    """(index, lowest, highest, the other limits) for each limit of `expr` that no other
    limit's range reads: one that can be summed before the others or after them."""
    for n, (index, low, high) in enumerate(expr.limits):
        others = expr.limits[:n] + expr.limits[n + 1 :]
        if not any(index in free_indices(sp.sympify(b)) for limit in others for b in limit[1:]):
            yield index, low, high, others


def summed_first(lowering, first: sp.Sum, outside: sp.Expr, outer: tuple, axes) -> sp.Expr:
    """`Sum(outside * first, *outer)` with `first` summed first: where SymPy would merge the
    two Sums back into one (`outside` is 1), `first` as an array of its own."""
    if len(sp.Sum(outside * first, *outer).limits) != len(outer):
        idx = laid_out(first, tuple(axes) + tuple(limit[0] for limit in outer))
        first = sp.IndexedBase(lowering.variable(lowering.array(first, idx)))[idx]
    return lowering.array(sp.Sum(outside * first, *outer), axes)


def triangular_sum(lowering, expr: sp.Sum, axes) -> sp.Expr | None:
    """A Sum over k whose range ends (or starts) at an index i that its summand reads too (a
    causal softmax's normaliser, sum_{k <= i} exp(s[i, k])): no scan along i, but a sum over
    k's whole axis under a mask of the range, `indicator(k <= i)` (a triangular one)."""
    if not has_dependent_range(expr):
        return None
    function, limits, masks = expr.function, [], []
    for k, low, high in expr.limits:
        bound = free_indices(sp.sympify(low)) | free_indices(sp.sympify(high))
        size = _axis_size(function, k) if bound & free_indices(function) else None
        if size is None:
            limits.append((k, low, high))
            continue
        whole = lowering.fresh(k, axes)  # k's range is recorded as the triangle's: a new name for the axis
        function = function.xreplace({k: whole})
        limits.append((whole, 0, size - 1))
        masks += [indicator(whole >= low)] if low != 0 else []
        masks += [indicator(whole <= high)] if sp.simplify(high - (size - 1)) != 0 else []
    if not masks:
        return None
    return lowering.array(sp.Sum(function * sp.Mul(*masks), *limits), axes)


def masked_cumulative_sum(lowering, expr: sp.Sum, axes) -> sp.Expr | None:
    """A Sum over k's whole range under `indicator(k <= m)` (k < m, k >= m, k > m), m an
    axis of the same range: the cumulative sum up to (from) m, a scan, where it was a T x T
    mask (a masked cumulative sum, the gradient of a sum up to m), or a linear recurrence
    where the summand decays from m (`a**(m - k)`). Factors without k are moved out of the
    Sum, and the Sum's other indices summed first."""
    for k, low, high, others in _limits_apart(expr):
        other_indices = {limit[0] for limit in others}
        factors = sp.Mul.make_args(expr.function)
        outer = [f for f in factors if not free_indices(f) & other_indices]  # summed over k alone
        for mask in outer:
            m, limits = _limits_of_mask(mask, k, low, high)
            if m not in axes or lowering.ranges.get(m) != (low, high):
                continue
            inner = sp.Mul(*[f for f in factors if f not in outer])
            inner = sp.Sum(inner, *others) if others else inner
            along = [f for f in outer if f is not mask and k in free_indices(f)] + [inner]
            apart = sp.Mul(*[f for f in outer if f is not mask and k not in free_indices(f)])
            limited = sp.Sum(sp.Mul(*along), (k, *limits))
            if m not in free_indices(sp.Mul(*along)):
                return lowering.array(apart * limited, axes)
            # the summand reads m too: a scan still where it decays from m (else a mask it stays)
            scanned = running_product_sum(lowering, limited, axes) or cumulative_exp_sum(lowering, limited, axes)
            if scanned is not None:
                return lowering.array(apart, axes) * scanned if apart != 1 else scanned
    return None


def _limits_of_mask(factor, k, low, high) -> tuple:
    """(m, k's range cut at m) where `factor` is `indicator(k <= m)` (or <, >=, >; either
    side), m another index; (None, None) otherwise."""
    if not isinstance(factor, indicator) or not isinstance(factor.args[0], (sp.Le, sp.Lt, sp.Ge, sp.Gt)):
        return None, None
    condition = factor.args[0]
    if condition.rhs == k:
        condition = condition.reversed
    m = condition.rhs
    if condition.lhs != k or not (isinstance(m, sp.Symbol) and m != k and m.is_integer):
        return None, None
    return m, {sp.Le: (low, m), sp.Lt: (low, m - 1), sp.Ge: (m, high), sp.Gt: (m + 1, high)}[type(condition)]


def _axis_size(function: sp.Expr, k) -> sp.Expr | None:
    """The size of an axis of a tensor that `function` reads at `k`."""
    for entry in sorted(function.atoms(sp.Indexed), key=sp.default_sort_key):
        for axis, sub in enumerate(entry.indices):
            if sub == k and entry.base.shape is not None and axis < len(entry.base.shape):
                return entry.base.shape[axis]
    return None


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
