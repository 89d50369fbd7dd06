"""The adjoint of a gather: a Sum over a delta at mapped positions, as a scatter-add.
"""

from __future__ import annotations

import sympy as sp

from symgrad.ir import Elementwise, IndexArith, ScatterAdd, SplitAxis
from symgrad.lowering.entries import linear_positions, positions_of
from symgrad.lowering.symbols import free_indices, is_map


def scatter(lowering, expr: sp.Sum, axes) -> sp.Expr | None:
    """`Sum(KroneckerDelta(u, E) * rest, ...)` for an index map E with no inverse here:
    `rest` over E's indices (in u's place), summed into the slots E names; else None."""
    summed = tuple(lim[0] for lim in expr.limits)
    delta = next((d for d in _scatter_deltas(expr.function, axes, summed)), None)
    if delta is None:
        return None
    u, positions_expr = (delta.args if delta.args[0] in axes else delta.args[::-1])
    summed = [lim[0] for lim in expr.limits]
    group = tuple(i for i in summed if i in free_indices(positions_expr))
    # deltas of adjacent axes at positions of the same indices: one scatter (ScatterNd's)
    joint = _joint_deltas(expr.function, axes, summed, u, group)
    us = [d_u for d_u, _, _ in joint]
    place, last = axes.index(us[0]), axes.index(us[-1])
    inner_axes = axes[:place] + group + axes[last + 1 :]
    rest = sp.Mul(*[a for a in sp.Mul.make_args(expr.function) if a not in [d for _, _, d in joint]])
    remaining = tuple(lim for lim in expr.limits if lim[0] not in group)
    if set(us) & free_indices(rest):
        lowering.fail(f"{expr}: {u} is both a scattered position and an index of the summand")
    values = lowering.array(sp.Sum(rest, *remaining) if remaining else rest, inner_axes)
    values = str(values) if values.is_Symbol else lowering.temp(Elementwise(values))
    sizes = [lowering.size_of(d_u) for d_u in us]
    trailing = len(axes) - last - 1
    if len(joint) == 1:
        positions, size = positions_of(lowering, positions_expr, group), sizes[0]
    else:
        components = [sp.Symbol(positions_of(lowering, e, group)) for _, e, _ in joint]
        positions = linear_positions(lowering, components, [sp.Symbol(s) for s in sizes])
        size = lowering.temp(IndexArith(sp.Mul(*[sp.Symbol(s) for s in sizes])))
    scattered = lowering.temp(ScatterAdd(values, positions, trailing, size))
    if len(joint) > 1:
        scattered = lowering.temp(SplitAxis(scattered, -trailing - 1, tuple(sizes[1:])))
    return sp.Symbol(scattered)


def _scatter_deltas(function, axes: tuple, summed: tuple) -> list:
    """`KroneckerDelta(u, E)` factors with u an axis and E a map of summed indices."""
    found = []
    for delta in sp.Mul.make_args(function):
        if isinstance(delta, sp.KroneckerDelta):
            a, b = delta.args
            u, e = (a, b) if a in axes and is_map(b) else (b, a) if b in axes and is_map(a) else (None, None)
            if u is not None and free_indices(e) and free_indices(e) <= set(summed):
                found.append(delta)
    return found


def _joint_deltas(function, axes: tuple, summed, u, group: tuple) -> list[tuple]:
    """(axis, positions, delta) of u's scatter delta and of those of the axes next to it whose
    positions are, as u's, entries of integer tensors over the indices `group` (ScatterNd's)."""
    deltas = {}
    for delta in _scatter_deltas(function, axes, summed):
        a, b = delta.args
        d_u, e = (a, b) if a in axes else (b, a)
        deltas[axes.index(d_u)] = (d_u, e, delta)
    grouped = lambda e: tuple(i for i in summed if i in free_indices(e)) == group
    jointly = lambda k: k in deltas and isinstance(deltas[k][1], sp.Indexed) and grouped(deltas[k][1])
    first = last = axes.index(u)
    if not jointly(first):
        return [deltas[first]]
    while jointly(first - 1):
        first -= 1
    while jointly(last + 1):
        last += 1
    return [deltas[k] for k in range(first, last + 1)]
