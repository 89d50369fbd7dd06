"""Tiling, mirror padding, sequence reversal and selection: index sums whose output axis
enumerates an index group, or whose entries read the input at a computed position (a gather,
scattered back by the gradient); SelectV2, an elementwise choice on a bool input.

Tile and MirrorPad are declared once per rank of the input, 1 to 4, like ops/array.py's Pad.
"""

import sympy as sp

from symgrad import Input, Ints, RankOf, attr, dims, elementwise, indices, integer_function, op, tensor

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
    edge = 1 if mode == "REFLECT" else 0
    out = tuple((AXES[k], SIZES[k] + paddings[k][0] + paddings[k][1]) for k in range(rank))
    return {"output": (out, input[tuple(mirrored(AXES[k] - paddings[k][0], SIZES[k], edge) for k in range(rank))])}


@integer_function
def mirrored(position, size, edge):
    """The position read for `position` of an axis of `size` entries mirrored at both ends,
    the edge entry left out of the mirror image (`edge` 1) or repeated (0)."""
    return sp.Piecewise(
        (edge - 1 - position, position < 0), (2 * size - 1 - edge - position, position >= size), (position, True)
    )


@op("ReverseSequence", attrs={"seq_dim": (1, 2), "batch_dim": (0,)})
def reverse_sequence(seq_dim, batch_dim):
    """The first `seq_lengths[b]` entries of each sequence `b` reversed, the rest as they are:
    a position computed from an entry read in the same row (rank 3, batch axis first)."""
    B, T, C = dims("B T C")
    b, t, c = indices("b t c")
    shape, out = [B, C, C], [b, c, c]
    shape[seq_dim], out[seq_dim] = T, (t, T)
    input = tensor("input", tuple(shape))
    lengths = tensor("seq_lengths", (B,), integer=True)
    read = [b, c, c]
    read[seq_dim] = sp.Piecewise((lengths[b] - 1 - t, t < lengths[b]), (t, True))
    return {"output": (tuple(out), input[tuple(read)])}


@elementwise("SelectV2", complex=True, outputs=("output",), boolean=("condition",))
def select_v2(condition, t, e):
    """output = t where condition, else e (numpy's where).

    The condition is a bool input: it broadcasts with `t` and `e`, and has no gradient."""
    return sp.Piecewise((t, condition), (e, True))
