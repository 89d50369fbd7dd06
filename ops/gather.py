"""Gathers and scatters: tensors indexed by an integer tensor (which gets no gradient).

`params[indices[i], j]` reads row `indices[i]`; differentiating it gives a scatter-add of the
upstream gradient into the rows named (repeated indices accumulate). A sum over entries
with `KroneckerDelta(s, segment_ids[i])` is a segment sum, and is lowered as a scatter-add;
`maximum(data[i, p], (i, 0, K - 1), where=sp.Eq(segment_ids[i], s))` a segment maximum, as
TensorFlow's unsorted segment max (its gradient split among ties, as TensorFlow's), and
`product(..., where=...)` a segment product (its gradient the product of the others, exact
at zeros).
"""

import sympy as sp

from symgrad import Input, Ints, SizeOf, attr, dims, indices, maximum, minimum, op, product, tensor

N, P, Q, K = dims("N P Q K")
i, p, q, s = indices("i p q s")


@op(
    "GatherV2",
    attrs={"axis": attr((0, 1), Input(2)), "batch_dims": (0, 1)},
    valid=lambda axis, batch_dims: batch_dims <= axis,
)
def gather_v2(axis, batch_dims):
    """Slices of `params` along `axis` at `indices`: rows of a matrix at indices of any rank
    (axis 0, an embedding lookup), or along the middle axis of rank-3 params; with batch_dims 1
    each batch entry its own indices (`params[b, indices[b, q], p]`, a gather in the row)."""
    if axis == 0:
        params = tensor("params", (N, P))
        positions = tensor("indices", (...,), integer=True)
        return {"output": ((..., p), params[positions[...], p])}
    sizes, axes = dims("D0 D1 D2"), indices("a0 a1 a2")
    params = tensor("params", sizes)
    positions = tensor("indices", (sizes[0], K) if batch_dims else (K,), integer=True)
    q = indices("q")[0]
    at = positions[axes[0], q] if batch_dims else positions[q]
    read = axes[:axis] + (at,) + axes[axis + 1 :]
    return {"output": (axes[:axis] + ((q, K),) + axes[axis + 1 :], params[read])}


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


SEGMENTS = attr(int, Input(2))


def _segment_extremum(extremum, num_segments):
    data = tensor("data", (K, P))
    segment_ids = tensor("segment_ids", (K,), integer=True)
    largest = extremum(data[i, p], (i, 0, K - 1), where=sp.Eq(segment_ids[i], s))
    return {"output": (((s, num_segments), p), largest)}


@op("UnsortedSegmentMax", attrs={"num_segments": SEGMENTS}, samples={"num_segments": (4,)})
def unsorted_segment_max(num_segments):
    """The maximum of the rows of `data` with equal `segment_ids` (the dtype's lowest value
    where a segment has none)."""
    return _segment_extremum(maximum, num_segments)


@op("UnsortedSegmentMin", attrs={"num_segments": SEGMENTS}, samples={"num_segments": (4,)})
def unsorted_segment_min(num_segments):
    """The minimum of the rows of `data` with equal `segment_ids` (the dtype's highest value
    where a segment has none)."""
    return _segment_extremum(minimum, num_segments)


@op("UnsortedSegmentProd", attrs={"num_segments": SEGMENTS}, samples={"num_segments": (4,)})
def unsorted_segment_prod(num_segments):
    """The product of the rows of `data` with equal `segment_ids` (1 where a segment has none)."""
    data = tensor("data", (K, P))
    segment_ids = tensor("segment_ids", (K,), integer=True)
    total = product(data[i, p], (i, 0, K - 1), where=sp.Eq(segment_ids[i], s))
    return {"output": (((s, num_segments), p), total)}


def _sorted_segments(reduce):
    """One row per id up to the last (ascending ids), `reduce(data, ids, count)` of each,
    0 where a segment has no row."""
    data = tensor("data", (K, P))
    segment_ids = tensor("segment_ids", (K,), integer=True, ascending=True)
    count = sp.Sum(sp.KroneckerDelta(s, segment_ids[i]), (i, 0, K - 1))
    return {"output": (((s, segment_ids[K - 1] + 1), p), reduce(data, segment_ids, count))}


@op("SegmentMax")
def segment_max():
    """The maximum of the rows of `data` with equal ascending `segment_ids` (0 where none)."""
    largest = lambda data, ids, count: maximum(data[i, p], (i, 0, K - 1), where=sp.Eq(ids[i], s))
    return _sorted_segments(lambda *args: sp.Piecewise((largest(*args), args[2] > 0), (0, True)))


@op("SegmentMin")
def segment_min():
    """The minimum of the rows of `data` with equal ascending `segment_ids` (0 where none)."""
    smallest = lambda data, ids, count: minimum(data[i, p], (i, 0, K - 1), where=sp.Eq(ids[i], s))
    return _sorted_segments(lambda *args: sp.Piecewise((smallest(*args), args[2] > 0), (0, True)))


@op("SegmentMean")
def segment_mean():
    """The mean of the rows of `data` with equal ascending `segment_ids` (0 where none)."""
    total = lambda data, ids: sp.Sum(sp.KroneckerDelta(s, ids[i]) * data[i, p], (i, 0, K - 1))
    return _sorted_segments(lambda data, ids, count: total(data, ids) / sp.Max(count, 1))


@op("SegmentProd")
def segment_prod():
    """The product of the rows of `data` with equal ascending `segment_ids` (1 where none)."""
    total = lambda data, ids, count: product(data[i, p], (i, 0, K - 1), where=sp.Eq(ids[i], s))
    return _sorted_segments(total)
