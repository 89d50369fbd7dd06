"""Padding, slicing, reversing and permuting: index sums with per-axis affine maps.

An entry read at a mapped subscript (`x[i - before]`) is zero outside the tensor: that is
the padding, and what makes each gradient a gather of the upstream gradient. Ops whose
constant inputs hold one entry per axis (Pad's `paddings`, Slice's `begin`) are declared once
per rank, 1 to 4; ReverseV2 and Transpose once per value of their constant input.
"""

import itertools

import sympy as sp

from symgrad import Axis, Input, Ints, RankOf, attr, dims, indices, integer_function, op, tensor

SIZES = dims("D0 D1 D2 D3")
AXES = indices("i0 i1 i2 i3")
RANK = attr((1, 2, 3, 4), RankOf("input"))


def per_axis(*rows):
    """Sample values of a constant input holding one entry per axis: each row's first `rank`
    entries (verification calls the op with them, on axes of 2 to 5 entries)."""
    return lambda rank: tuple(list(row[:rank]) for row in rows)


@op(
    "Pad",
    attrs={"rank": RANK, "paddings": attr(Ints(), Input(1))},
    samples={"paddings": per_axis([[1, 2], [0, 1], [2, 0], [1, 1]], [[0, 0]] * 4)},
)
def pad(rank, paddings):
    """Zeros around the input: `paddings[k]` holds (before, after) for axis k."""
    input = tensor("input", SIZES[:rank])
    out = tuple((AXES[k], SIZES[k] + paddings[k][0] + paddings[k][1]) for k in range(rank))
    return {"output": (out, input[tuple(AXES[k] - paddings[k][0] for k in range(rank))])}


@op(
    "PadV2",
    attrs={"rank": RANK, "paddings": attr(Ints(), Input(1)), "constant_values": attr(float, Input(2))},
    samples={"paddings": per_axis([[1, 2], [0, 1], [2, 0], [1, 1]], [[0, 0]] * 4), "constant_values": (0.5,)},
)
def pad_v2(rank, paddings, constant_values):
    """Pad with `constant_values` around the input instead of zeros: a number read at run
    time, without a gradient, as TensorFlow's."""
    input = tensor("input", SIZES[:rank])
    out = tuple((AXES[k], SIZES[k] + paddings[k][0] + paddings[k][1]) for k in range(rank))
    inside = sp.And(*[(AXES[k] >= paddings[k][0]) & (AXES[k] < paddings[k][0] + SIZES[k]) for k in range(rank)])
    read = input[tuple(AXES[k] - paddings[k][0] for k in range(rank))]
    return {"output": (out, sp.Piecewise((read, inside), (constant_values, True)))}


@op(
    "Slice",
    attrs={"rank": RANK, "begin": attr(Ints(), Input(1)), "size": attr(Ints(), Input(2))},
    samples={"begin": per_axis([1, 0, 1, 0], [0, 1, 0, 1]), "size": per_axis([1, -1, 2, 2], [-1] * 4)},
)
def slice(rank, begin, size):
    """`size[k]` entries from `begin[k]` along each axis k (-1: to the end)."""
    input = tensor("input", SIZES[:rank])
    sizes = [sp.Piecewise((SIZES[k] - begin[k], sp.Eq(size[k], -1)), (size[k], True)) for k in range(rank)]
    out = tuple((AXES[k], sizes[k]) for k in range(rank))
    return {"output": (out, input[tuple(AXES[k] + begin[k] for k in range(rank))])}


# the axes reversed, as sorted negative axes: the last three, in any combination
REVERSED = tuple(c for n in (1, 2, 3) for c in itertools.combinations((-1, -2, -3), n))
REVERSED = tuple(tuple(sorted(c)) for c in REVERSED)


@op("ReverseV2", attrs={"axis": attr(Axis("tensor", REVERSED), Input(1))})
def reverse_v2(axis):
    """The input with the order of entries along each axis of `axis` reversed."""
    depth = -min(axis)
    x = tensor("tensor", (...,) + SIZES[-depth:])
    trailing = range(len(SIZES) - depth, len(SIZES))
    subscript = tuple(SIZES[n] - 1 - AXES[n] if n - len(SIZES) in axis else AXES[n] for n in trailing)
    return {"output": ((...,) + tuple((AXES[n], SIZES[n]) for n in trailing), x[(...,) + subscript])}


# which of 2 or 3 axes are reversed, True for each one that is: one, two and three axes (which
# ones does not change the code's shape: one branch each)
FLIPS = ((True, False), (True, True), (True, True, True))


@op("Reverse", attrs={"dims": attr(FLIPS, Input(1))}, complex=True)
def reverse(dims):
    """ReverseV2 with the axes given as a bool per axis: entries reversed along each axis
    whose entry of `dims` is True."""
    rank = len(dims)
    x = tensor("tensor", SIZES[:rank])
    read = tuple(SIZES[k] - 1 - AXES[k] if flip else AXES[k] for k, flip in enumerate(dims))
    return {"output": (tuple(zip(AXES[:rank], SIZES[:rank])), x[read])}


# every permutation of 2 and 3 axes, and NHWC <-> NCHW
PERMS = tuple(p for n in (2, 3) for p in itertools.permutations(range(n)) if p != tuple(range(n)))
PERMS += ((0, 3, 1, 2), (0, 2, 3, 1))


@op("Transpose", attrs={"perm": attr(PERMS, Input(1))})
def transpose(perm):
    """Axis n of the output is axis `perm[n]` of the input."""
    x = tensor("x", SIZES[: len(perm)])
    inverse = [perm.index(k) for k in range(len(perm))]
    return {"y": (tuple(AXES[: len(perm)]), x[tuple(AXES[inverse[k]] for k in range(len(perm)))])}


@integer_function
def bit(mask, k):
    """Bit k of the integer `mask`, 0 or 1."""
    return sp.Mod(sp.floor(mask / 2**k), 2)


def _clamped(size, x, stride, masked, at_mask):
    """`x` (a begin or end) as a position of the axis, or `at_mask` where masked."""
    forward = stride > 0
    low, high = sp.Piecewise((0, forward), (-1, True)), sp.Piecewise((size, forward), (size - 1, True))
    from_end = sp.Piecewise((x + size, x < 0), (x, True))
    return sp.Piecewise((at_mask, sp.Eq(masked, 1)), (sp.Min(sp.Max(from_end, low), high), True))


@integer_function
def slice_start(size, begin, stride, masked):
    """The first position a strided slice of an axis of `size` entries takes, as TensorFlow
    computes it: `begin` counted from the end when negative, then clamped to the axis (to
    -1 .. size - 1 going backwards); the axis's start when the begin mask bit is set."""
    return _clamped(size, begin, stride, masked, sp.Piecewise((0, stride > 0), (size - 1, True)))


@integer_function
def slice_length(size, begin, end, stride, begin_masked, end_masked):
    """The number of entries a strided slice takes, from `slice_start` up to `end` (excluded,
    clamped as `begin` is; the axis's end when the end mask bit is set)."""
    last = _clamped(size, end, stride, end_masked, sp.Piecewise((size, stride > 0), (-1, True)))
    return sp.Max(sp.ceiling((last - slice_start(size, begin, stride, begin_masked)) / stride), 0)


SLICE_ATTRS = {
    "begin": attr(Ints(), Input(1)),
    "end": attr(Ints(), Input(2)),
    "strides": attr(Ints(), Input(3)),
    "begin_mask": int,
    "end_mask": int,
    "shrink_axis_mask": (0, 1),
    "ellipsis_mask": (0,),
    "new_axis_mask": (0,),
}
SLICE_SAMPLES = {
    # whole axes backwards, every other entry, ends beyond the axis (clamped), from the end
    "begin": per_axis([-1, 0, 5, -3], [0, -2, 1, 0]),
    "end": per_axis([-100, 10, -100, 100], [0, 2, 0, -1]),
    # a shrunk axis takes stride 1 only
    "strides": lambda rank, shrink_axis_mask: ([1 if shrink_axis_mask else -1, 2, -2, 1][:rank],),
    "begin_mask": lambda rank: (0, 1 << (rank - 1)),
    "end_mask": (0, 1),
}


@op("StridedSlice", attrs={"rank": RANK, **SLICE_ATTRS}, defaults={"begin_mask": 0, "end_mask": 0}, samples=SLICE_SAMPLES)
def strided_slice(rank, begin, end, strides, begin_mask, end_mask, shrink_axis_mask, ellipsis_mask, new_axis_mask):
    """Every `strides[k]`-th entry from `begin[k]` up to `end[k]` (excluded) along each axis k,
    strides negative going backwards; `shrink_axis_mask` 1 takes entry `begin[0]` of axis 0."""
    input = tensor("input", SIZES[:rank])
    out, subscript = [], []
    for k in range(rank):
        if k == 0 and shrink_axis_mask:
            subscript.append(sp.Piecewise((begin[0] + SIZES[0], begin[0] < 0), (begin[0], True)))
            continue
        masks = bit(begin_mask, k), bit(end_mask, k)
        out.append((AXES[k], slice_length(SIZES[k], begin[k], end[k], strides[k], *masks)))
        subscript.append(slice_start(SIZES[k], begin[k], strides[k], masks[0]) + strides[k] * AXES[k])
    return {"output": (tuple(out), input[tuple(subscript)])}


# --- StridedSlice's gradient op, and an update of a strided slice ----------------------------

SLICED = indices("s0 s1 s2 s3")


def _axes(samples):
    """`samples` (a function of the rank) for the output's axes: dy's, and the one shrunk."""
    return lambda rank, shrink_axis_mask: samples(rank + shrink_axis_mask)


GRAD_SAMPLES = {name: _axes(sample) if callable(sample) else sample for name, sample in SLICE_SAMPLES.items()}
GRAD_SAMPLES["strides"] = lambda rank, shrink_axis_mask: SLICE_SAMPLES["strides"](rank + shrink_axis_mask, shrink_axis_mask)


def _placed(sizes, axes, begin, end, strides, begin_mask, end_mask):
    """(the slice's sizes, the Kronecker deltas placing slice entry `SLICED[k]` at position
    `AXES[k]`, the sums over the slice) along `axes` of a tensor of `sizes`."""
    lengths, at, summed = [], sp.S.One, []
    for k in axes:
        masks = bit(begin_mask, k), bit(end_mask, k)
        length = slice_length(sizes[k], begin[k], end[k], strides[k], *masks)
        lengths.append(length)
        at *= sp.KroneckerDelta(AXES[k], slice_start(sizes[k], begin[k], strides[k], masks[0]) + strides[k] * SLICED[k])
        summed.append((SLICED[k], 0, length - 1))
    return tuple(lengths), at, summed


@op(
    "StridedSliceGrad",
    attrs={"rank": attr((1, 2, 3), RankOf("dy")), "shape": attr(Ints(), Input(0)), **SLICE_ATTRS},
    defaults={"begin_mask": 0, "end_mask": 0},
    samples={"shape": lambda rank, shrink_axis_mask: ([5, 4, 3, 2][: rank + shrink_axis_mask],), **GRAD_SAMPLES},
)
def strided_slice_backprop(rank, shape, begin, end, strides, begin_mask, end_mask, shrink_axis_mask, ellipsis_mask, new_axis_mask):
    """StridedSlice's gradient: `dy` placed at the entries the slice takes of a zero array of
    shape `shape` (the output's rank is dy's, plus the axis shrunk)."""
    rank = rank + shrink_axis_mask
    lengths, at, summed = _placed(shape, range(shrink_axis_mask, rank), begin, end, strides, begin_mask, end_mask)
    if shrink_axis_mask:
        at *= sp.KroneckerDelta(AXES[0], sp.Piecewise((begin[0] + shape[0], begin[0] < 0), (begin[0], True)))
    dy = tensor("dy", lengths)
    read = dy[tuple(s for s, _, _ in summed)]
    return {"output": (tuple((AXES[k], shape[k]) for k in range(rank)), sp.Sum(at * read, *summed))}


@op(
    "TensorStridedSliceUpdate",
    attrs={"rank": RANK, **SLICE_ATTRS, "shrink_axis_mask": (0,)},
    defaults={"begin_mask": 0, "end_mask": 0},
    samples=SLICE_SAMPLES,
)
def tensor_strided_slice_update(rank, begin, end, strides, begin_mask, end_mask, shrink_axis_mask, ellipsis_mask, new_axis_mask):
    """`input` with the entries StridedSlice would take replaced by `value`'s."""
    input = tensor("input", SIZES[:rank])
    lengths, at, summed = _placed(SIZES, range(rank), begin, end, strides, begin_mask, end_mask)
    value = tensor("value", lengths)
    placed = sp.Sum(at * value[SLICED[:rank]], *summed)
    replaced = sp.Sum(at, *summed)  # 1 where the slice takes the entry
    out = tuple(AXES[:rank])
    return {"output": (out, input[out] * (1 - replaced) + placed)}
