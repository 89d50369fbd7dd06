"""Padding, slicing, reversing and permuting: index sums with per-axis affine maps.

An entry read at a mapped subscript (`x[i - before]`) is zero outside the tensor: that is
the padding, and what makes each gradient a gather of the upstream gradient. Ops whose
constant inputs hold one entry per axis (Pad's `paddings`, Slice's `begin`) are declared once
per rank, 1 to 4; ReverseV2 and Transpose once per value of their constant input.
"""

import itertools

import sympy as sp

from symgrad import const_input, const_ints, dims, indices, op, rank_of, tensor

SIZES = dims("D0 D1 D2 D3")
AXES = indices("i0 i1 i2 i3")
RANK = rank_of("input", (1, 2, 3, 4))


@op("Pad", attrs={"rank": RANK, "paddings": const_ints(1)})
def pad(rank, paddings):
    """Zeros around the input: `paddings[k]` holds (before, after) for axis k."""
    input = tensor("input", SIZES[:rank])
    out = tuple((AXES[k], SIZES[k] + paddings[k][0] + paddings[k][1]) for k in range(rank))
    return {"output": (out, input[tuple(AXES[k] - paddings[k][0] for k in range(rank))])}


@op("Slice", attrs={"rank": RANK, "begin": const_ints(1), "size": const_ints(2)})
def slice(rank, begin, size):
    """`size[k]` entries from `begin[k]` along each axis k (-1: to the end)."""
    input = tensor("input", SIZES[:rank])
    sizes = [sp.Piecewise((SIZES[k] - begin[k], sp.Eq(size[k], -1)), (size[k], True)) for k in range(rank)]
    out = tuple((AXES[k], sizes[k]) for k in range(rank))
    return {"output": (out, input[tuple(AXES[k] + begin[k] for k in range(rank))])}


# the axes reversed, as sorted negative axes: the last three, in any combination
REVERSED = tuple(c for n in (1, 2, 3) for c in itertools.combinations((-1, -2, -3), n))
REVERSED = tuple(tuple(sorted(c)) for c in REVERSED)


@op("ReverseV2", attrs={"axis": const_input(1, REVERSED, axis_of="tensor")})
def reverse_v2(axis):
    """The input with the order of entries along each axis of `axis` reversed."""
    depth = -min(axis)
    x = tensor("tensor", (...,) + SIZES[-depth:])
    trailing = range(len(SIZES) - depth, len(SIZES))
    subscript = tuple(SIZES[n] - 1 - AXES[n] if n - len(SIZES) in axis else AXES[n] for n in trailing)
    return {"output": ((...,) + tuple((AXES[n], SIZES[n]) for n in trailing), x[(...,) + subscript])}


# every permutation of 2 and 3 axes, and NHWC <-> NCHW
PERMS = tuple(p for n in (2, 3) for p in itertools.permutations(range(n)) if p != tuple(range(n)))
PERMS += ((0, 3, 1, 2), (0, 2, 3, 1))


@op("Transpose", attrs={"perm": const_input(1, PERMS)})
def transpose(perm):
    """Axis n of the output is axis `perm[n]` of the input."""
    x = tensor("x", SIZES[: len(perm)])
    inverse = [perm.index(k) for k in range(len(perm))]
    return {"y": (tuple(AXES[: len(perm)]), x[tuple(AXES[inverse[k]] for k in range(len(perm)))])}
