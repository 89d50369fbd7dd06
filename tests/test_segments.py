"""Segment reductions as ops/gather.py declares them: a maximum or minimum over the entries an
id selects (`maximum(..., where=sp.Eq(segment_ids[i], s))`) and a mean by a count of equal
ids. Forward a scatter of values (max, min or add) into the segments, gradient a gather back:
never a (segment, entry) or (entry, entry) array. Against a loop, ties split as TensorFlow
splits them, and against TensorFlow's own segment ops."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st


def segments_by_loop(data, ids, count, reduce, empty):
    return np.stack([reduce(data[ids == s], axis=0) if np.any(ids == s) else np.full(data.shape[1:], empty) for s in range(count)])


def distinct(rng, shape):
    """Values at least 1 apart: no tie within reach of the differences' step (ties: below)."""
    return rng.permutation(np.prod(shape)).reshape(shape) - np.prod(shape) / 2.0


def brute_vjp(forward, x, upstream):
    grad = np.zeros_like(x)
    for n in np.ndindex(x.shape):
        unit = np.zeros_like(x)
        unit[n] = 1.0
        grad[n] = np.sum(upstream * (forward(x + 1e-3 * unit) - forward(x - 1e-3 * unit)) / 2e-3)
    return grad


@settings(max_examples=30, deadline=None)
@given(rows=st.integers(1, 7), columns=st.integers(1, 3), segments=st.integers(1, 4), seed=st.integers(0, 2**16))
def test_unsorted_segment_max_and_min_against_a_loop(numpy_module, rows, columns, segments, seed):
    module = numpy_module("gather")
    rng = np.random.default_rng(seed)
    data = distinct(rng, (rows, columns))
    ids = rng.integers(0, segments, rows).astype(np.int32)
    for name, reduce, empty in (("max", np.max, np.finfo(np.float64).min), ("min", np.min, np.finfo(np.float64).max)):
        forward = lambda v: getattr(module, f"unsorted_segment_{name}")(v, ids, num_segments=segments)
        np.testing.assert_array_equal(forward(data), segments_by_loop(data, ids, segments, reduce, empty))
        grad = rng.standard_normal((segments, columns))
        (grad_data, grad_ids) = getattr(module, f"unsorted_segment_{name}_grad")(grad, data, ids, num_segments=segments)
        assert grad_ids is None
        np.testing.assert_allclose(grad_data, brute_vjp(forward, data, grad), atol=1e-8)


def test_ties_share_the_gradient_equally_as_tensorflows(numpy_module):
    module = numpy_module("gather")
    data = np.array([[1.0], [3.0], [3.0], [2.0], [3.0]])
    ids = np.array([0, 0, 0, 1, 0], np.int32)
    grad = np.array([[6.0], [1.0]])
    (grad_data, _) = module.unsorted_segment_max_grad(grad, data, ids, num_segments=2)
    np.testing.assert_allclose(grad_data[:, 0], [0.0, 2.0, 2.0, 1.0, 2.0])


@settings(max_examples=30, deadline=None)
@given(rows=st.integers(1, 7), segments=st.integers(1, 4), seed=st.integers(0, 2**16))
def test_sorted_segments_are_zero_where_empty(numpy_module, rows, segments, seed):
    module = numpy_module("gather")
    rng = np.random.default_rng(seed)
    data = distinct(rng, (rows, 2))
    ids = np.sort(rng.integers(0, segments, rows)).astype(np.int32)
    count = ids[-1] + 1
    np.testing.assert_array_equal(module.segment_max(data, ids), segments_by_loop(data, ids, count, np.max, 0.0))
    np.testing.assert_array_equal(module.segment_min(data, ids), segments_by_loop(data, ids, count, np.min, 0.0))
    np.testing.assert_allclose(module.segment_mean(data, ids), segments_by_loop(data, ids, count, np.mean, 0.0), rtol=1e-12)
    grad = rng.standard_normal((count, 2))
    for name in ("segment_max", "segment_min", "segment_mean"):
        forward = lambda v: getattr(module, name)(v, ids)
        (grad_data, _) = getattr(module, f"{name}_grad")(grad, data, ids)
        np.testing.assert_allclose(grad_data, brute_vjp(forward, data, grad), atol=1e-8, err_msg=name)


def test_segments_scatter_and_gather_never_pair_entries(numpy_module):
    """No comparison of ids with ids (an (entry, entry) array) and no iota of segments."""
    module = numpy_module("gather")
    for name in ("unsorted_segment_max", "segment_max", "segment_min", "segment_mean"):
        for function in (name, f"{name}_grad", f"{name}_grad_grad"):
            code = inspect.getsource(getattr(module, function)).split('"""')[-1]
            assert "segment_ids ==" not in code and "np.arange" not in code, function


def test_tensorflow_kernels_agree_on_values_and_gradients(tf_module, tf):
    module = tf_module("gather")
    data = tf.constant([[1.0, -2.0], [3.0, 0.5], [3.0, 4.0], [2.0, 4.0]], tf.float64)
    ids = tf.constant([0, 0, 2, 0], tf.int32)
    for name in ("UnsortedSegmentMax", "UnsortedSegmentMin"):
        ours = getattr(module, f"unsorted_segment_{name[-3:].lower()}")
        with tf.GradientTape(persistent=True) as tape:
            tape.watch(data)
            y = ours(data, ids, num_segments=3)
            expected = getattr(tf.raw_ops, name)(data=data, segment_ids=ids, num_segments=3)
        np.testing.assert_array_equal(y.numpy(), expected.numpy())
        np.testing.assert_allclose(tape.gradient(y, data).numpy(), tape.gradient(expected, data).numpy())
