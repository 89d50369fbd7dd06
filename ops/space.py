"""Rearranging blocks of an NHWC image between its spatial axes and its depth.

Each is a relabelling of entries: an axis declared as a group of sizes, `(H, block_size)`, is
indexed as two axes, and an output axis enumerates a group of indices, so the forward and its
gradient are reshapes and a transpose.
"""

from symgrad import dims, indices, op, tensor

N, H, W, C = dims("N H W C")
n, i, j, c, a, b = indices("n i j c a b")
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
