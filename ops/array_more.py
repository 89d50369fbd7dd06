"""Tiling, mirror padding (and its gradient op), sequence reversal and selection: index sums whose output axis
enumerates an index group, or whose entries read the input at a computed position (a gather,
scattered back by the gradient); SelectV2, an elementwise choice on a bool input, and Select,
whose condition may also be a vector choosing whole rows.

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


READ = indices("p0 p1 p2 p3")


@op(
    "MirrorPadGrad",
    attrs={"rank": RANK, "paddings": attr(Ints(), Input(1)), "mode": ("REFLECT", "SYMMETRIC")},
    samples={"paddings": _per_axis([[1, 0], [0, 1], [1, 1], [0, 0]], [[1, 1], [1, 0], [0, 0], [0, 1]])},
)
def mirror_pad_backprop(rank, paddings, mode):
    """MirrorPad's gradient: each entry of the padded `input` added to the entry it mirrors
    of the unpadded output (a Kronecker delta at a computed position: a scatter-add)."""
    input = tensor("input", SIZES[:rank])
    edge = 1 if mode == "REFLECT" else 0
    sizes = [SIZES[k] - paddings[k][0] - paddings[k][1] for k in range(rank)]
    at = sp.Mul(*[sp.KroneckerDelta(AXES[k], mirrored(READ[k] - paddings[k][0], sizes[k], edge)) for k in range(rank)])
    total = sp.Sum(at * input[READ[:rank]], *[(READ[k], 0, SIZES[k] - 1) for k in range(rank)])
    return {"output": (tuple((AXES[k], sizes[k]) for k in range(rank)), total)}


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


@op("Select", attrs={"rank": attr((1, 2), RankOf("condition"))}, complex=True)
def select(rank):
    """output = x where condition, else y, of one shape; a vector condition chooses whole rows
    (no broadcasting otherwise, unlike SelectV2)."""
    P = SIZES[1]
    i, p = AXES[:2]
    condition = tensor("condition", (SIZES[0], P) if rank == 2 else (SIZES[0],), boolean=True)
    x = tensor("x", (SIZES[0], P))
    y = tensor("y", (SIZES[0], P))
    chosen = condition[i, p] if rank == 2 else condition[i]
    return {"output": ((i, p), sp.Piecewise((x[i, p], chosen), (y[i, p], True)))}
