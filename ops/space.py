"""Rearranging blocks of an NHWC image between its spatial axes and its depth, or its batch.

Each is a relabelling of entries: an axis declared as a group of sizes, `(H, block_size)`, is
indexed as two axes, and an output axis enumerates a group of indices, so the forward and its
gradient are reshapes and a transpose.

SpaceToBatchND pads the spatial axes (a read zero outside) and moves each position in a block to
a batch entry: its output's spatial size divides exactly (`exact_div`, none where it does not).
BatchToSpaceND places batch entry (a, b, n) at position i * block + a of the spatial axes, a
Kronecker delta solved for the block i (a gather per position and offset in the block).
"""

import sympy as sp

from symgrad import Input, Ints, attr, dims, exact_div, indices, op, tensor

N, H, W, C = dims("N H W C")
n, i, j, c, a, b, h, w = indices("n i j c a b h w")
BLOCK = {"block_size": int, "data_format": ("NHWC",)}
BLOCK_SAMPLES = {"block_size": (2, 3)}


@op("SpaceToDepth", attrs=BLOCK, samples=BLOCK_SAMPLES)
def space_to_depth(block_size, data_format):
    """Each block_size x block_size block of pixels as one pixel of depth block_size**2 * C,
    ordered (row in the block, column in the block, channel)."""
    input = tensor("input", (N, (H, block_size), (W, block_size), C))
    return {"output": ((n, i, j, (a, b, c)), input[n, i, a, j, b, c])}


@op("DepthToSpace", attrs=BLOCK, samples=BLOCK_SAMPLES)
def depth_to_space(block_size, data_format):
    """The inverse of SpaceToDepth: depth (row in the block, column in the block, channel)
    spread over block_size x block_size blocks of pixels."""
    input = tensor("input", (N, H, W, (block_size, block_size, C)))
    return {"output": ((n, (i, a), (j, b), c), input[n, i, j, a, b, c])}


def _space_to_batch(block, paddings):
    """SpaceToBatchND's sum, for a block of (rows, columns) `block`."""
    input = tensor("input", (N, H, W, C))
    oh = exact_div(H + paddings[0][0] + paddings[0][1], block[0])
    ow = exact_div(W + paddings[1][0] + paddings[1][1], block[1])
    x = input[n, i * block[0] + a - paddings[0][0], j * block[1] + b - paddings[1][0], c]
    return {"output": ((((a, block[0]), (b, block[1]), n), (i, oh), (j, ow), c), x)}


def _batch_to_space(block, crops):
    """BatchToSpaceND's sum, for a block of (rows, columns) `block`."""
    input = tensor("input", ((block[0], block[1], N), H, W, C))
    at = sp.KroneckerDelta(h, i * block[0] + a - crops[0][0]) * sp.KroneckerDelta(w, j * block[1] + b - crops[1][0])
    out_h = H * block[0] - crops[0][0] - crops[0][1]
    out_w = W * block[1] - crops[1][0] - crops[1][1]
    total = sp.Sum(at * input[a, b, n, i, j, c], (a, 0, block[0] - 1), (b, 0, block[1] - 1), (i, 0, H - 1), (j, 0, W - 1))
    return {"output": ((n, (h, out_h), (w, out_w), c), total)}


@op(
    "SpaceToBatchND",
    attrs={"block_shape": attr(Ints(), Input(1)), "paddings": attr(Ints(), Input(2))},
    samples={"block_shape": ([2, 2], [1, 3]), "paddings": ([[1, 0], [0, 1]], [[0, 0], [2, 1]])},
)
def space_to_batch_nd(block_shape, paddings):
    """The zero-padded spatial axes cut into blocks of block_shape; position (a, b) in a block
    moves to batch entry (a * block_shape[1] + b) * N + n."""
    return _space_to_batch(block_shape, paddings)


@op(
    "BatchToSpaceND",
    attrs={"block_shape": attr(Ints(), Input(1)), "crops": attr(Ints(), Input(2))},
    samples={"block_shape": ([2, 2], [1, 3]), "crops": ([[1, 0], [0, 1]], [[0, 0], [2, 1]])},
)
def batch_to_space_nd(block_shape, crops):
    """SpaceToBatchND's inverse: batch entry (a * block_shape[1] + b) * N + n to position
    (a, b) of each block, then `crops` cut from the spatial axes."""
    return _batch_to_space(block_shape, crops)


@op(
    "SpaceToBatch",
    attrs={"paddings": attr(Ints(), Input(1)), "block_size": int},
    samples={"paddings": ([[1, 0], [0, 1]], [[0, 0], [2, 1]]), "block_size": (2, 3)},
)
def space_to_batch(paddings, block_size):
    """SpaceToBatchND with one block size for both spatial axes."""
    return _space_to_batch((block_size, block_size), paddings)


@op(
    "BatchToSpace",
    attrs={"crops": attr(Ints(), Input(1)), "block_size": int},
    samples={"crops": ([[1, 0], [0, 1]], [[0, 0], [2, 1]]), "block_size": (2, 3)},
)
def batch_to_space(crops, block_size):
    """BatchToSpaceND with one block size for both spatial axes."""
    return _batch_to_space((block_size, block_size), crops)
