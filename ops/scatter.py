"""Sparse segment reductions and tensor scatters: TensorFlow hand-writes their gradients.

`SparseSegmentSum` reads the rows of `data` at `indices` (a gather) and sums those with equal
`segment_ids` (a segment sum): `Sum_i KroneckerDelta(s, segment_ids[i]) * data[indices[i], p]`,
whose gradient is the upstream gradient read at each entry's id and scattered back into the
rows of `data` it came from. The mean and the square-root variants divide by the segment's
count. `TensorScatterAdd` and its kin change the rows of `tensor` that `indices` names by the
rows of `updates`; `TensorScatterMax` keeps the largest of each entry of `tensor` and the
updates placed there, `maximum(..., where=..., initial=tensor[n, p])`.
"""

import sympy as sp

from symgrad import Input, SizeOf, attr, dims, indices, maximum, minimum, op, tensor

N, P, K = dims("N P K")
i, n, p, s = indices("i n p s")


def _sparse_segments(num_segments, scale):
    """The rows of `data` at `indices`, summed per ascending `segment_ids`, each segment's sum
    times `scale(count)`; one row per id up to the last, or `num_segments` rows."""
    data = tensor("data", (N, P))
    positions = tensor("indices", (K,), integer=True)
    segment_ids = tensor("segment_ids", (K,), integer=True, ascending=True)
    rows = segment_ids[K - 1] + 1 if num_segments is None else num_segments
    total = sp.Sum(sp.KroneckerDelta(s, segment_ids[i]) * data[positions[i], p], (i, 0, K - 1))
    count = sp.Sum(sp.KroneckerDelta(s, segment_ids[i]), (i, 0, K - 1))
    return {"output": (((s, rows), p), total * scale(count))}


def _sum(count):
    return sp.S.One


def _mean(count):
    return 1 / sp.Max(count, 1)


def _sqrt_n(count):
    return 1 / sp.sqrt(sp.Max(count, 1))


NUM_SEGMENTS = attr(int, Input(3))


@op("SparseSegmentSum")
def sparse_segment_sum():
    """Sums of the rows of `data` at `indices`, per ascending `segment_ids` (one row per id up
    to the last, 0 where a segment has none)."""
    return _sparse_segments(None, _sum)


@op("SparseSegmentMean")
def sparse_segment_mean():
    """Means of the rows of `data` at `indices`, per ascending `segment_ids` (0 where none)."""
    return _sparse_segments(None, _mean)


@op("SparseSegmentSqrtN")
def sparse_segment_sqrt_n():
    """Sums of the rows of `data` at `indices`, per ascending `segment_ids`, each divided by
    the square root of its segment's count (0 where none)."""
    return _sparse_segments(None, _sqrt_n)


@op("SparseSegmentSumWithNumSegments", attrs={"num_segments": NUM_SEGMENTS}, samples={"num_segments": (4,)})
def sparse_segment_sum_with_num_segments(num_segments):
    """SparseSegmentSum into `num_segments` rows (0 where a segment has none)."""
    return _sparse_segments(num_segments, _sum)


@op("SparseSegmentMeanWithNumSegments", attrs={"num_segments": NUM_SEGMENTS}, samples={"num_segments": (4,)})
def sparse_segment_mean_with_num_segments(num_segments):
    """SparseSegmentMean into `num_segments` rows (0 where a segment has none)."""
    return _sparse_segments(num_segments, _mean)


@op("SparseSegmentSqrtNWithNumSegments", attrs={"num_segments": NUM_SEGMENTS}, samples={"num_segments": (4,)})
def sparse_segment_sqrt_n_with_num_segments(num_segments):
    """SparseSegmentSqrtN into `num_segments` rows (0 where a segment has none)."""
    return _sparse_segments(num_segments, _sqrt_n)


DEPTH = attr((1, 2), SizeOf("indices", -1))


def _scattered(depth, name="tensor", distinct=False):
    """(the entry of `name`, the sum of the `updates` each position of it receives, the number
    of updates it receives) for `indices` of `depth` 1 (rows of `updates` into rows of the
    matrix) or 2 (entries of `updates` into entries); `distinct`: no position repeated."""
    base = tensor(name, (N, P))
    positions = tensor("indices", (K, depth), integer=True, distinct=distinct)
    updates = tensor("updates", (K, P) if depth == 1 else (K,))
    hits = sp.KroneckerDelta(n, positions[i, 0])
    if depth == 2:
        hits *= sp.KroneckerDelta(p, positions[i, 1])
    update = updates[i, p] if depth == 1 else updates[i]
    return base[n, p], sp.Sum(hits * update, (i, 0, K - 1)), sp.Sum(hits, (i, 0, K - 1))


@op("TensorScatterAdd", attrs={"depth": DEPTH})
def tensor_scatter_add(depth):
    """`tensor` with the `updates` added at `indices` (rows at depth 1, entries at depth 2),
    repeated positions adding up."""
    entry, added, _ = _scattered(depth)
    return {"output": ((n, p), entry + added)}


@op("TensorScatterSub", attrs={"depth": DEPTH})
def tensor_scatter_sub(depth):
    """`tensor` with the `updates` subtracted at `indices`, repeated positions adding up."""
    entry, added, _ = _scattered(depth)
    return {"output": ((n, p), entry - added)}


@op("ScatterNdNonAliasingAdd", attrs={"depth": DEPTH})
def scatter_nd_non_aliasing_add(depth):
    """`input` with the `updates` added at `indices`, repeated positions adding up: the
    TensorScatterAdd of ref-variable days."""
    entry, added, _ = _scattered(depth, "input")
    return {"output": ((n, p), entry + added)}


@op("TensorScatterUpdate", attrs={"depth": DEPTH})
def tensor_scatter_update(depth):
    """`tensor` with the `updates` in place of its entries at `indices` (rows at depth 1,
    entries at depth 2): no position named twice, where TensorFlow leaves the result undefined."""
    entry, placed, count = _scattered(depth, distinct=True)
    return {"output": ((n, p), sp.Piecewise((placed, count > 0), (entry, True)))}


def _scattered_extremum(extremum, depth):
    """Each entry of `tensor` and the `updates` that `indices` places there (rows at depth 1,
    entries at depth 2), reduced by `extremum` (ties share the gradient, as TensorFlow's)."""
    base = tensor("tensor", (N, P))
    positions = tensor("indices", (K, depth), integer=True)
    updates = tensor("updates", (K, P) if depth == 1 else (K,))
    where = sp.Eq(positions[i, 0], n)
    if depth == 2:
        where = sp.And(where, sp.Eq(positions[i, 1], p))
    update = updates[i, p] if depth == 1 else updates[i]
    return {"output": ((n, p), extremum(update, (i, 0, K - 1), where=where, initial=base[n, p]))}


@op("TensorScatterMax", attrs={"depth": DEPTH})
def tensor_scatter_max(depth):
    """`tensor` with each entry `indices` names replaced by its maximum with the `updates`
    placed there (rows at depth 1, entries at depth 2)."""
    return _scattered_extremum(maximum, depth)


@op("TensorScatterMin", attrs={"depth": DEPTH})
def tensor_scatter_min(depth):
    """`tensor` with each entry `indices` names replaced by its minimum with the `updates`
    placed there (rows at depth 1, entries at depth 2)."""
    return _scattered_extremum(minimum, depth)
