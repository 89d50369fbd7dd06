"""Extrema with an initial value (`maximum(..., initial=value)`, with or without `where=`):
forward an elementwise maximum of the initial value and the reduction (a reduce or a scatter
of values into segments, never a (segment, entry) array), gradient split equally among the
initial value and the entries that attain the result, as TensorFlow's TensorScatterMax
gradient splits it. Against a loop, finite differences, and TensorFlow's TensorScatterMax."""

from __future__ import annotations

import inspect
from pathlib import Path

import numpy as np
import pytest
from conftest import import_path
from hypothesis import given, settings, strategies as st

from symgrad.generate import to_temp_folder
from symgrad.testing import (
    assert_gradients_close_to_finite_differences,
    assert_second_order_close_to_finite_differences,
)
from test_segments import brute_vjp, distinct

OPS = Path(__file__).parent / "fixtures" / "initial_extremum_ops.py"


@pytest.fixture(scope="module")
def generated() -> Path:
    return to_temp_folder([OPS])


@pytest.fixture(scope="module")
def module(generated):
    return import_path(generated / "initial_extremum_ops_numpy.py")


def capped_by_loop(data, ids, cap, count):
    return np.stack([np.min(np.vstack([cap[None], data[ids == s]]), axis=0) for s in range(count)])


@settings(max_examples=30, deadline=None)
@given(rows=st.integers(1, 6), columns=st.integers(1, 4), seed=st.integers(0, 2**16))
def test_floored_row_max_against_a_loop(module, rows, columns, seed):
    rng = np.random.default_rng(seed)
    values = distinct(rng, (rows, columns + 1))
    x, floor = values[:, :-1], values[:, -1]
    expected = np.array([max(floor[r], *x[r]) for r in range(rows)])
    np.testing.assert_array_equal(module.floored_row_max(x, floor), expected)
    grad = rng.standard_normal(rows)
    grad_x, grad_floor = module.floored_row_max_grad(grad, x, floor)
    np.testing.assert_allclose(grad_x, brute_vjp(lambda v: module.floored_row_max(v, floor), x, grad), atol=1e-8)
    np.testing.assert_allclose(grad_floor, brute_vjp(lambda v: module.floored_row_max(x, v), floor, grad), atol=1e-8)


@settings(max_examples=30, deadline=None)
@given(rows=st.integers(1, 7), columns=st.integers(1, 3), seed=st.integers(0, 2**16))
def test_capped_segment_min_against_a_loop(module, rows, columns, seed):
    rng = np.random.default_rng(seed)
    values = distinct(rng, (rows + 1, columns))
    data, cap = values[:-1], values[-1]
    ids = rng.integers(0, 3, rows).astype(np.int32)
    forward = lambda d, c: module.capped_segment_min(d, ids, c, num_segments=3)
    np.testing.assert_array_equal(forward(data, cap), capped_by_loop(data, ids, cap, 3))
    grad = rng.standard_normal((3, columns))
    grad_data, grad_ids, grad_cap = module.capped_segment_min_grad(grad, data, ids, cap, num_segments=3)
    assert grad_ids is None
    np.testing.assert_allclose(grad_data, brute_vjp(lambda v: forward(v, cap), data, grad), atol=1e-8)
    np.testing.assert_allclose(grad_cap, brute_vjp(lambda v: forward(data, v), cap, grad), atol=1e-8)


def test_ties_with_the_initial_value_share_the_gradient(module):
    x = np.array([[1.0, 3.0, 3.0], [0.0, -1.0, 2.0]])
    floor = np.array([3.0, 5.0])
    grad_x, grad_floor = module.floored_row_max_grad(np.array([6.0, 1.0]), x, floor)
    np.testing.assert_allclose(grad_x, [[0.0, 2.0, 2.0], [0.0, 0.0, 0.0]])
    np.testing.assert_allclose(grad_floor, [2.0, 1.0])


def test_segments_are_scattered_never_paired(module):
    for function in ("capped_segment_min", "capped_segment_min_grad"):
        code = inspect.getsource(getattr(module, function)).split('"""')[-1]
        assert "ids ==" not in code and "np.arange" not in code, function


def test_first_and_second_order_agree_with_finite_differences_in_every_target(generated):
    assert_gradients_close_to_finite_differences(OPS, generated=generated)
    assert_second_order_close_to_finite_differences(OPS, generated=generated)


def test_tensor_scatter_max_and_min_are_tensorflows(tf_module, tf):
    module = tf_module("scatter")
    tensor = tf.constant([[1.0, 5.0], [2.0, 0.0], [3.0, 3.0]], tf.float64)
    indices = tf.constant([[0], [2], [0]], tf.int32)
    updates = tf.constant([[4.0, 5.0], [3.0, -1.0], [4.0, 2.0]], tf.float64)
    for name in ("TensorScatterMax", "TensorScatterMin"):
        ours = getattr(module, f"tensor_scatter_{name[-3:].lower()}")
        with tf.GradientTape(persistent=True) as tape:
            tape.watch([tensor, updates])
            y = ours(tensor, indices, updates)
            expected = getattr(tf.raw_ops, name)(tensor=tensor, indices=indices, updates=updates)
        np.testing.assert_array_equal(y.numpy(), expected.numpy())
        for got, want in zip(tape.gradient(y, [tensor, updates]), tape.gradient(expected, [tensor, updates])):
            np.testing.assert_allclose(got.numpy(), want.numpy())


def scattered_extremum_by_loop(tensor, indices, updates, reduce):
    out = tensor.copy()
    for position, update in zip(indices, updates):
        out[tuple(position)] = reduce(out[tuple(position)], update)
    return out


@settings(max_examples=30, deadline=None)
@given(rows=st.integers(1, 4), columns=st.integers(1, 3), count=st.integers(1, 6), depth=st.integers(1, 2), seed=st.integers(0, 2**16))
def test_tensor_scatter_max_and_min_against_a_loop(numpy_module, rows, columns, count, depth, seed):
    """Rows (depth 1) or entries (depth 2, `where=sp.And` of two equalities: a scatter into
    the two axes merged), repeated positions reduced together with the tensor's entry."""
    module = numpy_module("scatter")
    rng = np.random.default_rng(seed)
    shape = (count, columns) if depth == 1 else (count,)
    values = distinct(rng, (rows * columns + int(np.prod(shape)),))
    tensor, updates = values[: rows * columns].reshape(rows, columns), values[rows * columns :].reshape(shape)
    indices = np.stack([rng.integers(0, rows, count), rng.integers(0, columns, count)][:depth], axis=-1).astype(np.int32)
    grad = rng.standard_normal((rows, columns))
    for name, reduce in (("max", np.maximum), ("min", np.minimum)):
        forward = getattr(module, f"tensor_scatter_{name}")
        np.testing.assert_array_equal(forward(tensor, indices, updates), scattered_extremum_by_loop(tensor, indices, updates, reduce))
        grad_tensor, grad_indices, grad_updates = getattr(module, f"tensor_scatter_{name}_grad")(grad, tensor, indices, updates)
        assert grad_indices is None
        np.testing.assert_allclose(grad_tensor, brute_vjp(lambda v: forward(v, indices, updates), tensor, grad), atol=1e-8)
        np.testing.assert_allclose(grad_updates, brute_vjp(lambda v: forward(tensor, indices, v), updates, grad), atol=1e-8)
