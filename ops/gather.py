"""Gathers and scatters: tensors indexed by an integer tensor (which gets no gradient).

`params[indices[i], j]` reads row `indices[i]`; differentiating it gives a scatter-add of the
upstream gradient into the rows named (repeated indices accumulate). A sum over entries
with `KroneckerDelta(s, segment_ids[i])` is a segment sum, and is lowered as a scatter-add.
"""

import sympy as sp

from symgrad import Input, Ints, SizeOf, attr, dims, indices, op, tensor

N, P, Q, K = dims("N P Q K")
i, p, q, s = indices("i p q s")


@op("GatherV2", attrs={"axis": attr((0,), Input(2))})
def gather_v2(axis):
    """Rows of a matrix at indices of any rank (axis 0, batch_dims 0): an embedding lookup."""
    params = tensor("params", (N, P))
    positions = tensor("indices", (...,), integer=True)
    return {"output": ((..., p), params[positions[...], p])}


@op("Gather")
def gather():
    """Rows of a matrix at indices of any rank: the legacy op GatherV2 replaced."""
    params = tensor("params", (N, P))
    positions = tensor("indices", (...,), integer=True)
    return {"output": ((..., p), params[positions[...], p])}


@op("GatherNd", attrs={"depth": attr((1, 2), SizeOf("indices", -1))})
def gather_nd(depth):
    """Entries (depth 2) or rows (depth 1) of `params` at the positions along its leading axes
    that each row of `indices` holds (batch_dims 0)."""
    params = tensor("params", (N, P, Q))
    positions = tensor("indices", (..., depth), integer=True)
    at = tuple(positions[..., d] for d in range(depth))
    rest = (p, q)[depth - 1 :]
    return {"output": ((...,) + rest, params[at + rest])}


@op("ScatterNd", attrs={"shape": attr(Ints(), Input(2))}, samples={"shape": ((5, 3),)})
def scatter_nd(shape):
    """Rows of `updates` summed into zeros of `shape` at `indices` (depth 1), repeats adding up."""
    positions = tensor("indices", (K, 1), integer=True)
    updates = tensor("updates", (K, P))
    total = sp.Sum(sp.KroneckerDelta(s, positions[i, 0]) * updates[i, p], (i, 0, K - 1))
    return {"output": (((s, shape[0]), p), total)}


@op("UnsortedSegmentSum", attrs={"num_segments": attr(int, Input(2))}, samples={"num_segments": (4,)})
def unsorted_segment_sum(num_segments):
    """Sums of the rows of `data` with equal `segment_ids`, into `num_segments` rows."""
    data = tensor("data", (K, P))
    segment_ids = tensor("segment_ids", (K,), integer=True)
    total = sp.Sum(sp.KroneckerDelta(s, segment_ids[i]) * data[i, p], (i, 0, K - 1))
    return {"output": (((s, num_segments), p), total)}


@op("SegmentSum")
def segment_sum():
    """Sums of the rows of `data` with equal `segment_ids` (ascending), one row per id up to
    the last: the number of rows is known from the ids' values only."""
    data = tensor("data", (K, P))
    segment_ids = tensor("segment_ids", (K,), integer=True, ascending=True)
    total = sp.Sum(sp.KroneckerDelta(s, segment_ids[i]) * data[i, p], (i, 0, K - 1))
    return {"output": (((s, segment_ids[K - 1] + 1), p), total)}
