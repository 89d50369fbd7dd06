"""Tiling and mirror padding: index sums whose output axis enumerates an index group, or
whose entries read the input at several affine maps (each zero outside the tensor).

Declared once per rank of the input, 1 to 4, like ops/array.py's Pad.
"""

import sympy as sp

from symgrad import Input, Ints, RankOf, attr, dims, indicator, indices, op, tensor

SIZES = dims("D0 D1 D2 D3")
AXES = indices("i0 i1 i2 i3")
COPIES = indices("r0 r1 r2 r3")
RANK = attr((1, 2, 3, 4), RankOf("input"))


def _per_axis(*rows):
    """Sample values, one entry per axis: each row's first `rank` (axes of 2 to 5 entries)."""
    return lambda rank: tuple(list(row[:rank]) for row in rows)


@op("Tile", attrs={"rank": RANK, "multiples": attr(Ints(), Input(1))}, samples={"multiples": _per_axis([2, 1, 3, 1], [1, 3, 1, 2])})
def tile(rank, multiples):
    """`multiples[k]` copies of the input along axis k, which enumerates (copy, position)."""
    input = tensor("input", SIZES[:rank])
    out = tuple(((COPIES[k], multiples[k]), AXES[k]) for k in range(rank))
    return {"output": (out, input[tuple(AXES[:rank])])}


@op(
    "MirrorPad",
    attrs={"rank": RANK, "paddings": attr(Ints(), Input(1)), "mode": ("REFLECT", "SYMMETRIC")},
    samples={"paddings": _per_axis([[1, 0], [0, 1], [1, 1], [0, 0]], [[1, 1], [1, 0], [0, 0], [0, 1]])},
)
def mirror_pad(rank, paddings, mode):
    """The input padded by its mirror image, `paddings[k]` (before, after) along axis k.

    REFLECT leaves the edge out of the mirror image, SYMMETRIC repeats it.
    """
    input = tensor("input", SIZES[:rank])
    value = input[tuple(AXES[:rank])]
    for k in range(rank):
        value = _mirrored(value, k, paddings[k][0], mode)
    out = tuple((AXES[k], SIZES[k] + paddings[k][0] + paddings[k][1]) for k in range(rank))
    return {"output": (out, value)}


def _mirrored(value, k, before, mode):
    """`value` (entries read at position p along axis k) read at output position i instead:
    at p = i - before inside, and at its mirror images before and after the axis."""
    i, size = AXES[k], SIZES[k]
    edge = 1 if mode == "REFLECT" else 0
    inside = i - before
    left = before - i - 1 + edge  # mirror image before position 0 (zero beyond)
    right = 2 * size - 1 - edge - inside  # mirror image after position size - 1
    read = lambda p: value.replace(lambda e: isinstance(e, sp.Indexed), lambda e: _at(e, k, p))
    if not edge:  # the mirror images read outside the input wherever they do not apply
        return read(inside) + read(left) + read(right)
    # REFLECT's images reach the edge entries at i = before and i = before + size - 1
    return read(inside) + indicator(i < before) * read(left) + indicator(i >= before + size) * read(right)


def _at(entry, k, position):
    """`entry` with its subscript along axis k read at `position` (composed with its map)."""
    subscripts = list(entry.indices)
    subscripts[k] = subscripts[k].subs(AXES[k], position)
    return entry.base[tuple(subscripts)]
