"""The adjoint of a gather: a delta placing values at mapped positions, as a scatter-add.

`KroneckerDelta(u, E)` with u an axis and E a map with no inverse here places each value at
position E along u. E reads summed indices (a gather's rows: `params[indices[i], p]`) and
may read other axes too (an offset diagonal `x[i, i + 1]`, a gather by a per-row index
`x[i, labels[i]]`, a per-row length): those axes are *carried*, each its own position, and
the axes from the first carried or placed one to the last are scattered into as one merged
axis, then split again. Never a one-hot matrix.
"""

from __future__ import annotations

import sympy as sp

from symgrad.declare import BATCH
from symgrad.ir import Constant, IndexArith, ScatterAdd, SplitAxis
from symgrad.lowering.entries import linear_positions, positions_of
from symgrad.deltas import read_at
from symgrad.functions import product, selected
from symgrad.lowering.symbols import free_indices, has_dependent_range, is_map


def scatter(lowering, expr: sp.Sum, axes) -> sp.Expr | None:
    """`Sum(KroneckerDelta(u, E) * rest, ...)`: `rest` summed into the slots E names, else None."""
    return _scatter(lowering, expr.function, expr.limits, axes)


def scatter_term(lowering, expr, axes) -> sp.Expr | None:
    """A term (no sum) with `KroneckerDelta(u, E)`, E reading other axes: the same, else None."""
    return _scatter(lowering, expr, (), axes)


def _scatter(lowering, function, limits: tuple, axes: tuple) -> sp.Expr | None:
    summed = tuple(lim[0] for lim in limits)
    deltas = _scatter_deltas(function, axes, summed)
    if not deltas:
        return None
    placed = _placed(deltas, axes, summed, next(iter(deltas.values())))
    first, last = _block(placed, axes)
    block = axes[first : last + 1]
    if BATCH in block:
        lowering.fail(
            f"{function}: positions that depend on the leading axes `...` are not scattered yet; "
            "declare those axes with names"
        )
    carried = tuple(a for a in block if a not in placed)
    group = carried + tuple(i for i in summed if any(i in free_indices(e) for e, _ in placed.values()))
    rest = sp.Mul(*[a for a in sp.Mul.make_args(function) if a not in [d for _, d in placed.values()]])
    for u, (e, _) in placed.items() if limits else ():  # where the delta holds, u is its position
        rest = read_at(rest, u, e, lowering.ranges[u])
    if set(placed) & (free_indices(rest) | set().union(*(free_indices(e) for e, _ in placed.values()))):
        if not limits:  # a mask on what is there already (`(1 - delta(j, i + 1)) * x[i, j]`)
            return None
        lowering.fail(f"{function}: an axis is both a scattered position and an index of what is scattered")
    remaining = tuple(lim for lim in limits if lim[0] not in group)
    inner_axes = axes[:first] + group + axes[last + 1 :]
    values = lowering.array(sp.Sum(rest, *remaining) if remaining else rest, inner_axes)
    if values.is_number:  # a one-hot's ones: in the arrays' dtype
        values = lowering.temp(Constant(values, lowering.like()))
    else:
        values = lowering.variable(values)
    return _scattered(lowering, values, block, placed, carried, group, len(axes) - last - 1)


def _scattered(lowering, values: str, block: tuple, placed: dict, carried: tuple, group: tuple, trailing: int) -> sp.Symbol:
    """`values` scatter-added into the axes `block` (before `trailing` axes), merged into one
    axis and split again: each at its position, a placed axis's map, a carried axis's own."""
    components = [placed[a][0] if a in placed else a for a in block]
    sizes = [lowering.size_of(a) for a in block]
    if len(block) == 1:
        positions, size = positions_of(lowering, components[0], group), sizes[0]
    else:
        symbols = [sp.Symbol(positions_of(lowering, c, group)) for c in components]
        carried_positions = [p for p, c in zip(symbols, components) if c in carried]
        positions = linear_positions(lowering, symbols, [sp.Symbol(s) for s in sizes], carried_positions)
        size = lowering.temp(IndexArith(sp.Mul(*[sp.Symbol(s) for s in sizes])))
    scattered = lowering.temp(ScatterAdd(values, positions, trailing, size))
    if len(block) > 1:
        scattered = lowering.temp(SplitAxis(scattered, -trailing - 1, tuple(sizes[1:])))
    return sp.Symbol(scattered)


def _scatter_deltas(function, axes: tuple, summed: tuple) -> dict:
    """axis -> (E, delta) for each `KroneckerDelta(u, E)` factor with u an axis and E a map
    of summed indices and other axes (at least one summed index, or one axis)."""
    found = {}
    for delta in sp.Mul.make_args(function):
        if isinstance(delta, sp.KroneckerDelta):
            a, b = delta.args
            u, e = (a, b) if a in axes and is_map(b) else (b, a) if b in axes and is_map(a) else (None, None)
            if u is None or u in found:
                continue
            reads = free_indices(e)
            if reads and reads <= set(summed) | set(axes) - {u}:
                found[u] = (e, delta)
    return found


def _placed(deltas: dict, axes: tuple, summed: tuple, chosen: tuple) -> dict:
    """The deltas scattered at once: the chosen one, and those of the axes next to it whose
    positions are, as its, maps over the same summed indices and axes: entries of integer
    tensors (ScatterNd's rows of positions), or positions computed from the same indices (a
    band of diagonals' row and column)."""
    u = next(a for a, d in deltas.items() if d == chosen)
    reads = lambda e: free_indices(e) & (set(summed) | set(axes))
    indexed = isinstance(chosen[0], sp.Indexed)
    jointly = lambda k: (
        0 <= k < len(axes) and axes[k] in deltas and isinstance(deltas[axes[k]][0], sp.Indexed) == indexed
        and reads(deltas[axes[k]][0]) == reads(chosen[0])
    )
    first = last = axes.index(u)
    while jointly(first - 1):
        first -= 1
    while jointly(last + 1):
        last += 1
    return {axes[k]: deltas[axes[k]] for k in range(first, last + 1)}


def _block(placed: dict, axes: tuple) -> tuple[int, int]:
    """The first and last axis scattered into: the placed ones and the axes their positions read."""
    used = set(placed).union(*(free_indices(e) for e, _ in placed.values()))
    positions = [axes.index(a) for a in used if a in axes]
    return min(positions), max(positions)


def segment_extremum(lowering, expr, axes) -> sp.Expr | None:
    """`maximum(value, (i, ...), where=sp.Eq(ids[i], s))` for an axis s: the values reduced
    into the slots their ids name (a segment maximum, minimum or product, TensorFlow's
    unsorted segment max), never a (segment, entry) array; with `sp.And` of such equalities
    for adjacent axes (a position's row and column), into those axes merged; else None."""
    if not isinstance(expr.function, selected):
        return None
    summed = tuple(lim[0] for lim in expr.limits)
    placed = _segment_positions(expr.function.args[0], axes)
    if not placed or any(set(summed) != free_indices(e) for e in placed.values()) or has_dependent_range(expr):
        return None
    block = sorted(axes.index(u) for u in placed)
    first, last = block[0], block[-1]
    if block != list(range(first, last + 1)):
        return None
    values = lowering.variable(lowering.array(expr.function.value, axes[:first] + summed + axes[last + 1 :]))
    sizes = [lowering.size_of(a) for a in axes[first : last + 1]]
    components = [sp.Symbol(positions_of(lowering, placed[a], summed)) for a in axes[first : last + 1]]
    if len(components) == 1:
        positions, size = str(components[0]), sizes[0]
    else:
        positions = linear_positions(lowering, components, [sp.Symbol(z) for z in sizes])
        size = lowering.temp(IndexArith(sp.Mul(*[sp.Symbol(z) for z in sizes])))
    trailing = len(axes) - last - 1
    kind = "prod" if isinstance(expr, product) else expr.kind
    scattered = lowering.temp(ScatterAdd(values, positions, trailing, size, kind))
    if len(components) > 1:
        scattered = lowering.temp(SplitAxis(scattered, -trailing - 1, tuple(sizes[1:])))
    return sp.Symbol(scattered)


def _segment_positions(condition, axes) -> dict:
    """axis -> the map it equals, for `sp.Eq(map, axis)` or an `sp.And` of them; else {}."""
    equalities = condition.args if isinstance(condition, sp.And) else (condition,)
    placed = {}
    for equality in equalities:
        if not isinstance(equality, sp.Eq):
            return {}
        a, b = equality.args
        u, e = (a, b) if a in axes else (b, a)
        if u not in axes or not is_map(e) or u in placed:
            return {}
        placed[u] = e
    return placed
