"""Indices used as values: an axis's positions (iota), conditions on indices (a window's
mask), Kronecker deltas as identities and one-hots, a sum of deltas at every position as a
stack.
"""

from __future__ import annotations

import sympy as sp

from symgrad.ir import AsValues, Eye, IndexArith, Stack
from symgrad.lowering.symbols import free_indices, is_index


def iota(lowering, index, axes) -> sp.Expr:
    """An index used as a value (MatrixBandPart's `i - j`): 0, 1, ..., aligned."""
    if index not in axes:
        lowering.fail(f"cannot use index {index} as a value: it is not an axis here")
    values = lowering.once(
        ("index as values", index), lambda: lowering.temp(AsValues(lowering.index_values(index), lowering.like()))
    )
    return sp.Symbol(lowering.expand(values, (index,), axes))


def index_condition(lowering, condition, axes) -> sp.Symbol:
    """A condition on indices alone (a window inside the input), in integer arithmetic."""
    indices = tuple(a for a in axes if a in free_indices(condition))
    values = {i: sp.Symbol(lowering.expand(lowering.index_values(i), (i,), indices)) for i in indices}
    mask = lowering.temp(IndexArith(lowering.int_scalars(condition).xreplace(values)))
    return sp.Symbol(lowering.expand(mask, indices, axes))


def delta(lowering, delta: sp.KroneckerDelta, axes) -> sp.Expr:
    """A Kronecker delta: a one-hot when one side is free of indices, an identity between two
    axes, else a mask where an axis meets a position the others name (an offset diagonal
    `delta(j, i + 1)`, `delta(j, labels[i])`) on an array that has those axes already."""
    if any(not free_indices(a) for a in delta.args):
        return _one_hot(lowering, delta, axes)
    if not all(is_index(a) for a in delta.args):
        return lowering.array(sp.Piecewise((1, sp.Eq(*delta.args)), (0, True)), axes)
    return _identity(lowering, delta, axes)


def _one_hot(lowering, delta: sp.KroneckerDelta, axes) -> sp.Expr:
    """KroneckerDelta(u, position) with the position free of indices (an axis StridedSlice
    shrinks away): 1 where the axis u is at that position, else 0."""
    u, position = delta.args if free_indices(delta.args[0]) else delta.args[::-1]
    if not is_index(u) or u not in axes:
        lowering.fail(f"cannot lower {delta}: not an axis at a position")
    position = sp.Symbol(lowering.temp(IndexArith(lowering.int_scalars(position))))
    return lowering.array(sp.Piecewise((1, sp.Eq(u, position)), (0, True)), axes)


def _identity(lowering, delta: sp.KroneckerDelta, axes) -> sp.Expr:
    """KroneckerDelta(p, q) of two axes: an identity matrix, aligned."""
    p, q = delta.args
    source = lowering.axis_source(p)
    if p not in axes or q not in axes or source is None:
        lowering.fail(f"cannot lower {delta}: not a diagonal over two axes of known size")
    name = lowering.temp(Eye(*source))
    order = tuple(a for a in axes if a in (p, q))
    return sp.Symbol(lowering.expand(name, order, axes))


def stacked(lowering, expr: sp.Add, axes) -> sp.Symbol | None:
    """`Sum_k KroneckerDelta(b, k) * T_k` over every position k of axis b (a stack, an
    unstack's gradient): the T_k stacked along b, not each times a one-hot; else None."""
    pieces, axis = {}, None
    for term in sp.Add.make_args(expr):
        deltas = [f for f in sp.Mul.make_args(term) if isinstance(f, sp.KroneckerDelta)]
        b, k = _axis_at_position(deltas[0]) if len(deltas) == 1 else (None, None)
        if b is None or b not in axes or axis not in (None, b) or k in pieces:
            return None
        axis, pieces[k] = b, term / deltas[0]
    low, high = lowering.ranges.get(axis, (None, None))
    if low != 0 or high != len(pieces) - 1 or sorted(pieces) != list(range(len(pieces))):
        return None  # not every position of a known number of them
    rest = tuple(a for a in axes if a != axis)
    if any(free_indices(piece) != set(rest) for piece in pieces.values()):
        return None  # a piece broadcast along an axis: not one shape
    names = []
    for k in range(len(pieces)):
        array = lowering.array(pieces[k], rest)
        names.append(lowering.variable(array))
    return sp.Symbol(lowering.temp(Stack(tuple(names), axes.index(axis) - len(axes))))


def _axis_at_position(delta: sp.KroneckerDelta) -> tuple:
    """(b, k) for `KroneckerDelta(b, k)` with b an index and k a literal position, else
    (None, None)."""
    a, b = delta.args
    if is_index(a) and b.is_Integer:
        return a, int(b)
    if is_index(b) and a.is_Integer:
        return b, int(a)
    return None, None
