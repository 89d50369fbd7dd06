"""Sparse segment reductions and tensor scatters: TensorFlow hand-writes their gradients.

`SparseSegmentSum` reads the rows of `data` at `indices` (a gather) and sums those with equal
`segment_ids` (a segment sum): `Sum_i KroneckerDelta(s, segment_ids[i]) * data[indices[i], p]`,
whose gradient is the upstream gradient read at each entry's id and scattered back into the
rows of `data` it came from. The mean and the square-root variants divide by the segment's
count. `TensorScatterAdd` and its kin change the rows of `tensor` that `indices` names by the
rows of `updates`.
"""

import sympy as sp

from symgrad import Input, attr, dims, indices, op, tensor

N, P, K = dims("N P K")
i, p, s = indices("i p s")


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
