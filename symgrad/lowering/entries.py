"""Tensor entries, aligned: read directly, or through index maps with gathers (`x[i*s + k]`,
`x[indices[i]]`, a piece of a concatenation read off its axis), diagonals, transposes.
"""

from __future__ import annotations

import sympy as sp

from symgrad.declare import BATCH
from symgrad.functions import at_position, exact_div, read_outside
from symgrad.ir import DiagPart, Flip, Gather, IndexArith, IntArray, IntSize, MergeAxes, Squeeze, Transpose, Value
from symgrad.lowering.matmul import as_einsum
from symgrad.lowering.symbols import free_indices, is_index, is_map, map_indices, spans_axis


def aligned_entry(lowering, entry: sp.Indexed, axes, fill=0) -> sp.Expr:
    """A tensor entry aligned to `axes`: selected, gathered, diagonal, squeezed, transposed."""
    name, idx, shape = _selected(lowering, str(entry.base.label), tuple(entry.indices), getattr(entry.base, "shape", None))
    narrowed = _off_axis(lowering, idx, shape)
    idx = _kept_axes_aligned(idx, axes)
    if narrowed or any(is_map(i) for i in idx):
        name, idx = gathered(lowering, name, idx, axes, fill, narrowed, shape)
    if len(set(idx)) < len(idx):  # a diagonal: x[..., i, i]
        name, idx = _diagonal(lowering, name, idx)
    kept = [n - len(idx) for n, i in enumerate(idx) if not isinstance(i, sp.Symbol)]
    if kept:  # literal 0: a size-1 axis kept by a reduction, with nothing to stand for
        name = lowering.temp(Squeeze(name, tuple(kept)))
        idx = tuple(i for i in idx if isinstance(i, sp.Symbol))
    if len(set(idx)) != len(idx) or not all(i in axes for i in idx):
        lowering.fail(f"cannot align {entry} to axes {axes}")
    order = tuple(a for a in axes if a in idx)
    if idx != order:
        name = lowering.temp(_permutation(name, idx, order))
    return sp.Symbol(lowering.expand(name, order, axes))


def read_outside_entry(lowering, expr: read_outside, axes) -> sp.Expr:
    """A tensor entry read with `fill` where its subscripts are outside the tensor."""
    entry, fill = expr.args
    if not isinstance(entry, sp.Indexed) or fill.free_symbols:
        lowering.fail(f"{expr}: read_outside takes a tensor entry and a number")
    return aligned_entry(lowering, entry, axes, fill)


def _selected(lowering, name: str, idx: tuple, shape) -> tuple[str, tuple, tuple | None]:
    """Literal subscripts along axes longer than 1 (a column of GatherNd's indices, an
    unstacked tensor's entry): the entries there, that axis gone (a literal 0 along a
    size-1 axis is a kept axis). (variable, subscripts, shape) of what is left."""
    for n in reversed(range(len(idx))):
        if idx[n].is_Integer and shape is not None and sp.sympify(shape[n]) != 1:
            name = lowering.gather(Gather(name, lowering.int_value(idx[n]), n - len(idx)))
            idx, shape = idx[:n] + idx[n + 1 :], tuple(shape[:n]) + tuple(shape[n + 1 :])
    return name, idx, shape


def _off_axis(lowering, idx: tuple, shape) -> frozenset:
    """The axes subscripted by a plain index whose range is not the axis (a piece of a
    concatenation, read at the joined axis's positions, zero outside): read as maps, each
    position it names."""
    found = set()
    for n, i in enumerate(idx):
        if shape is None or not isinstance(i, sp.Symbol) or i not in lowering.ranges:
            continue
        low, high = lowering.ranges[i]
        if free_indices(sp.sympify(low) + high):
            continue  # a range ending at another index: a cumulative sum's, not a piece's
        if not spans_axis(i, shape[n], lowering.ranges):
            found.add(n)
    return frozenset(found)


def gathered(lowering, name: str, idx: tuple, axes: tuple, fill=0, off_axis=frozenset(), shape=None) -> tuple[str, tuple]:
    """Read each mapped subscript (`i*s + k - p`, `indices[i]`, a plain index off its
    axis) with a gather, last axis first: (variable, plain indices), the map's indices in
    place of each mapped axis; a whole axis read backwards (`x[N - 1 - i]`, where `shape`
    says the axis has N entries) with a flip."""
    key = ("gather", name, idx, axes, fill, off_axis, shape)
    return lowering.once(key, lambda: _gathered_once(lowering, name, idx, axes, fill, off_axis, shape))


def _gathered_once(lowering, name: str, idx: tuple, axes: tuple, fill, off_axis, shape) -> tuple[str, tuple]:
    result = list(idx)
    n = len(idx) - 1
    while n >= 0:
        backwards = _read_backwards(lowering, idx[n], shape[n] if shape is not None else None)
        if backwards is not None and n not in off_axis:
            name, result[n] = lowering.temp(Flip(name, n - len(result))), backwards
        elif is_map(idx[n]) or n in off_axis:
            group = map_indices(idx[n], axes)
            joint = _joint_start(idx, n, group, axes, off_axis)
            first, last = (joint, n)
            if idx[n].has(sp.Indexed):  # positions read from a tensor may depend on the row
                first, last = _carried_block(result, joint, n, group, axes)
            if last > first:  # several axes read at once: GatherNd's positions, or axes the map reads
                components = [idx[k] if joint <= k <= n else result[k] for k in range(first, last + 1)]
                carried = set(result[first:joint]) | set(result[n + 1 : last + 1])
                group = tuple(a for a in axes if a in set(group) | carried)
                name, positions = _merged_for_joint(lowering, name, result, (first, last), group, components, carried)
            else:
                positions = positions_of(lowering, idx[n], group)
            name = lowering.gather(Gather(name, positions, first - len(result) + (last - first), fill))
            result[first : last + 1] = group
            n = first
        n -= 1
    return name, tuple(result)


def _read_backwards(lowering, subscript, size):
    """The index `i` where `subscript` is `size - 1 - i` and `i` runs over the whole axis of
    `size` entries (the axis read backwards), else None."""
    if size is None or not is_map(subscript):
        return None
    indices = [s for s in free_indices(subscript) if s in lowering.ranges]
    if len(indices) != 1 or subscript.has(sp.Indexed):
        return None
    (i,) = indices
    if not spans_axis(i, size, lowering.ranges) or sp.expand(subscript - (size - 1 - i)) != 0:
        return None
    return i


def _carried_block(result: list, first: int, last: int, group: tuple, axes: tuple) -> tuple[int, int]:
    """Axes `first..last` widened to the plain indices next to them up to the farthest that
    the map reads (a gather in the same row, `x[i, labels[i]]`): read there jointly, each its
    own position, the axes between carried along (each index once, an axis here). An affine
    map reading a plain index (`x[i + a, a]`) is gathered, then its diagonal taken."""
    symbols = [s for s in result if isinstance(s, sp.Symbol)]
    if len(set(symbols)) < len(symbols) or BATCH in group:
        return first, last  # a diagonal as well, or rows of any rank: gathered, then the diagonal taken
    plain = lambda k: isinstance(result[k], sp.Symbol) and result[k] != BATCH and result[k] in axes
    start, end = first, last
    for k in range(first - 1, -1, -1):
        if not plain(k):
            break
        if result[k] in group:
            start = k
    for k in range(last + 1, len(result)):
        if not plain(k):
            break
        if result[k] in group:
            end = k
    return start, end


def _merged_for_joint(lowering, name, result, block, group, components, carried) -> tuple[str, str]:
    """Axes first..last (`block`) of `name` merged into one, and the positions there of the
    entries that `components` (a subscript per axis; `carried`: plain indices on their own
    axes) name: a gather along several axes jointly."""
    first, last = block
    leading = BATCH in result[:first]  # any number of axes before: kept as they are
    start = first if leading else 0
    sizes = tuple(lowering.temp(IntSize(name, k - len(result))) for k in range(start, len(result)))
    merged = lowering.temp(MergeAxes(name, sizes, ((first - start, last - first + 1),), leading=leading))
    positions = [sp.Symbol(positions_of(lowering, c, group)) for c in components]
    carried = [p for p, c in zip(positions, components) if c in carried]
    return merged, linear_positions(lowering, positions, [sp.Symbol(s) for s in sizes[first - start : last - start + 1]], carried)


def linear_positions(lowering, components: list, sizes: list, carried=()) -> str:
    """Row-major positions in the merged axes (sizes `sizes`) of the positions
    `components`, -1 (outside) where a component is outside its own axis; a component in
    `carried` (an axis's own positions) is never outside."""
    # positions read from an integer tensor (int32) meet sizes (int64): cast them
    cast = [sp.Symbol(lowering.temp(IntArray(str(c)))) for c in components]
    linear, inside = cast[0], []
    for position, size, component in zip(cast[1:], sizes[1:], components[1:]):
        linear = linear * size + position
        if component not in carried:
            inside += [position >= 0, position < size]
    return lowering.temp(IndexArith(sp.Piecewise((linear, sp.And(*inside)), (-1, True))))


def positions_of(lowering, expr, group: tuple) -> str:
    """An integer array aligned to `group` holding the position `expr` names."""
    return lowering.once(("positions", expr, group), lambda: _positions_once(lowering, expr, group))


def _positions_once(lowering, expr, group: tuple) -> str:
    if isinstance(expr, sp.Indexed):  # an integer tensor's entries: the positions as given
        return str(aligned_entry(lowering, expr, group))
    entries = {e: sp.Symbol(lowering.temp(IntArray(str(aligned_entry(lowering, e, group))))) for e in expr.atoms(sp.Indexed)}
    values = {i: sp.Symbol(lowering.expand(lowering.index_values(i), (i,), group)) for i in group}
    expr = lowering.int_scalars(expr.xreplace(entries)).xreplace(values)
    if expr.is_Symbol:  # a plain index read off its axis: its positions as they are
        return str(expr)
    if expr.is_Integer:  # one position, as a 0-d integer array: the axis is dropped
        return lowering.temp(IntArray(str(expr)))
    expr = expr.replace(
        lambda e: isinstance(e, exact_div) and not e.args[0].is_Symbol,
        lambda e: exact_div(sp.Symbol(lowering.temp(IndexArith(e.args[0]))), e.args[1]),
    )
    return lowering.temp(IndexArith(expr))


def _diagonal(lowering, name: str, idx: tuple) -> tuple[str, tuple]:
    """Take the diagonal of repeated subscripts: (variable, its distinct indices)."""
    if len(idx) >= 2 and idx[-1] == idx[-2] and len(set(idx[:-1])) == len(idx) - 1:
        return lowering.temp(DiagPart(name)), idx[:-1]
    distinct = tuple(dict.fromkeys(idx))
    return lowering.temp(as_einsum([(name, idx)], distinct)), distinct


def _permutation(name: str, idx: tuple, order: tuple) -> Value:
    if BATCH in idx:
        return as_einsum([(name, idx)], order)
    return Transpose(name, tuple(idx.index(i) for i in order))


def _kept_axes_aligned(idx: tuple, axes: tuple) -> tuple:
    """Let a literal 0 subscript (a kept size-1 axis) stand for the index at its place in
    `axes`, counted from the last, when that index is not used otherwise: it broadcasts."""
    result = list(idx)
    for n, i in enumerate(idx):
        place = n - len(idx) + len(axes)
        if i.is_Integer and 0 <= place and axes[place] not in idx and is_index(axes[place]):
            result[n] = axes[place]
    return tuple(result)


def _joint_start(idx: tuple, last: int, group: tuple, axes: tuple, off_axis=frozenset()) -> int:
    """The first of the adjacent subscripts ending at `last` that are maps over the same
    indices `group`: entries of integer tensors (GatherNd's `indices[k, 0], indices[k, 1]`),
    or positions computed from them (an offset diagonal's `x[i + 1, i]`)."""
    mapped = lambda k: is_map(idx[k]) or k in off_axis
    first = last
    while (
        mapped(last)
        and first > 0
        and mapped(first - 1)
        and isinstance(idx[first - 1], sp.Indexed) == isinstance(idx[last], sp.Indexed)
        and map_indices(idx[first - 1], axes) == group
    ):
        first -= 1
    return first


def at_position_entry(lowering, expr: at_position, axes) -> sp.Expr:
    """`expr` at `index` = `position`: computed over `index`'s axis (and its other indices),
    then read there as a tensor entry, a gather at the positions."""
    value, index, position, low, high = expr.args
    lowering.ranges.setdefault(index, (low, high))
    if free_indices(value) & free_indices(position) - {index}:
        return lowering.array(expr.doit(), axes)  # also varying along the positions' indices
    inner = (index,) + tuple(a for a in axes if a in free_indices(value) and a != index)
    array = lowering.array(value, inner)
    if array.is_number:  # a Sum of zeros: the same at every position
        return array
    name = lowering.variable(array)
    read = sp.IndexedBase(name)[(position,) + inner[1:]]
    return aligned_entry(lowering, read, axes)
