"""Padding, slicing and reversing: index sums with per-axis affine maps, one derivation per
rank (1 to 4) where the op's constant inputs hold one entry per axis.

An entry read at a mapped subscript (`x[i - before]`) is zero outside the tensor: that is
the padding, and what makes each gradient a gather of the upstream gradient.
"""

import sympy as sp

from symgrad import const_ints, dims, indices, op, rank_of, tensor

SIZES = dims("D0 D1 D2 D3")
AXES = indices("i0 i1 i2 i3")
RANK = rank_of("input", (1, 2, 3, 4))


@op("Pad", attrs={"rank": RANK, "paddings": const_ints(1)})
def pad(rank, paddings):
    """Zeros around the input: `paddings[k]` holds (before, after) for axis k."""
    input = tensor("input", SIZES[:rank])
    before = [paddings[k][0] for k in range(rank)]
    out = tuple((AXES[k], SIZES[k] + before[k] + paddings[k][1]) for k in range(rank))
    return {"output": (out, input[tuple(AXES[k] - before[k] for k in range(rank))])}
