"""Sums weighted by running products: a cumulative product's gradient, division-free.

The gradient of out[i] = prod_{k <= i} x[k] at x[m] is prod_{k < m} x[k] (an exclusive
cumulative product) times s[m] = sum_{i >= m} grad[i] * prod_{m < k <= i} x[k]. No cumulative
sum or product gives s without dividing by x[m], which is 0 somewhere. s is the linear
recurrence s[m] = grad[m] + x[m + 1] * s[m + 1]: a scan of its own (`ir.Scan(kind="linear")`),
computed in log2(n) steps of whole-array products and sums, so that it is exact at zeros and
its own derivative (the second order) is too.
"""

from __future__ import annotations

import sympy as sp

from symgrad.functions import indicator, product
from symgrad.ir import Elementwise, Scan
from symgrad.lowering.symbols import free_indices


def running_product_sum(lowering, expr: sp.Sum, axes) -> sp.Expr | None:
    """`Sum_{i = m + d}^{end} c[i] * prod_{k = m + p}^{i + q} f(k)` (or the mirror image,
    `Sum_{i = 0}^{m - d} c[i] * prod_{k = i + p}^{m + q} f(k)`), with no factor between the
    endpoints: y[m + d] (y[m - d]) of the recurrence y[m] = c[m] + f(m + q + 1) * y[m + 1]
    (y[m] = c[m] + f(m + p - 1) * y[m - 1]). None for any other sum."""
    if len(expr.limits) != 1:
        return None
    i, low, high = expr.limits[0]
    factors = _decays_as_products(i, low, high, sp.Mul.make_args(expr.function), lambda: lowering.fresh(i, axes))
    running = [f for f in factors if isinstance(f, product) and i in free_indices(f)]
    weight = sp.Mul(*[f for f in factors if not (isinstance(f, product) and i in free_indices(f))])
    shape = _recurrence(i, low, high, running)
    if shape is None:
        return None
    m, step, reverse, exclusive = shape
    if m not in axes or m in free_indices(weight):
        return None
    k = running[0].limits[0][0]  # both read along m's axis, whose whole range m has
    if m not in free_indices(weight.subs(i, m)):  # a constant summed: made an array along m's axis
        weight = weight * indicator(m >= lowering.ranges.get(m, (0,))[0])
        if m not in free_indices(weight.subs(i, m)):
            return None
    by = lowering.array(running[0].function.subs(k, m + step), axes)
    scanned = lowering.array(weight.subs(i, m), axes)
    axis = axes.index(m) - len(axes)
    return sp.Symbol(lowering.temp(Scan("linear", Elementwise(scanned), axis, exclusive, reverse, Elementwise(by))))


def _decays_as_products(i, low, high, factors: tuple, fresh) -> tuple:
    """`factors` with a decay `a**(m - i + c)` (a constant along i and the range's bounding
    index m, and c a whole number: an exponential moving average's, a discounted return's)
    as `a**c * prod_k a` over the entries strictly between i and m, as a running product
    weighs them (`a**(i - m + c)` as a product of 1/a), k a `fresh()` index; the others as
    they are."""
    end = _range_end(i, low, high)
    if end is None:
        return factors
    m, reverse, shift, count = end
    found = []
    for f in factors:
        base, exponent = f.as_base_exp()
        if i in free_indices(exponent) and not free_indices(base) & {i, m}:
            for sign in (1, -1):  # SymPy writes (1/2)**(m - i) as 2**(i - m)
                c = sp.expand(exponent - sign * count)
                if c.is_Integer:
                    k = fresh()
                    f = base**c * product(base**sign, (k, m + shift, i - 1) if reverse else (k, i + 1, m - shift))
                    break
        found.append(f)
    return tuple(found)


def _range_end(i, low, high) -> tuple | None:
    """(m, reverse, shift, count) where i's range ends (`reverse`: starts) at the one index
    m, `shift` (1) short of it, with `count` entries strictly between i and m; else None."""
    reverse = bool(free_indices(sp.sympify(low)))  # i runs from m (or m + 1) to the end
    bound = sp.sympify(low if reverse else high)
    if len(free_indices(bound)) != 1:
        return None
    (m,) = free_indices(bound)
    shift = (bound - m) * (1 if reverse else -1)  # 1: the range stops one short of m
    return m, reverse, shift, (i - m - shift) if reverse else (m - shift - i)


def _recurrence(i, low, high, running) -> tuple | None:
    """(m, step, reverse, exclusive) of the recurrence, or None: a single running product
    over the entries strictly between the summation index i and the range's bounding index m
    (one short of m when exclusive), read `step` entries off: f(k + step) for entry k."""
    if len(running) != 1 or len(running[0].limits) != 1 or len(running[0].limits[0]) != 3:
        return None
    _, first, last = running[0].limits[0]
    bounds = _range_end(i, low, high)
    if bounds is None:
        return None
    m, reverse, shift, count = bounds
    end = high if reverse else low
    if free_indices(sp.sympify(end)) or (not reverse and end != 0):
        return None
    far = last if reverse else first  # the product's end at i
    step = far - i + (1 if reverse else -1)
    if shift not in (0, 1) or not sp.sympify(step).is_Integer or sp.expand(last - first + 1 - count) != 0:
        return None
    return m, step, reverse, shift == 1
