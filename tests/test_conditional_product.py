"""Products over the entries a condition selects (`product(..., where=condition)`): forward a
product of the selected entries (a reduction, or a scatter-multiply into the segments ids
name, never a (segment, entry) array), gradient the product of the other selected entries,
exact at zeros (one zero, two, none), as TensorFlow's segment product gradient. Against a
loop that multiplies the others, and finite differences in every target."""

from __future__ import annotations

import inspect
from pathlib import Path

import numpy as np
import pytest
from conftest import import_path
from hypothesis import given, settings, strategies as st

from symgrad.generate import to_temp_folder
from symgrad.testing import assert_gradients_close_to_finite_differences

OPS = Path(__file__).parent / "fixtures" / "conditional_product_ops.py"


@pytest.fixture(scope="module")
def generated() -> Path:
    return to_temp_folder([OPS])


@pytest.fixture(scope="module")
def module(generated):
    return import_path(generated / "conditional_product_ops_numpy.py")


def with_zeros(rng, shape):
    """Values from -2 to 2 with about a third of them 0 (segments with one zero, several)."""
    values = rng.uniform(-2, 2, shape)
    return np.where(rng.random(shape) < 0.35, 0.0, values)


def segment_products_by_loop(data, ids, count):
    """(products, gradient of sum(grad * products)) for a given grad, each entry's the product
    of the other entries of its segment, multiplied out: no division."""
    products = np.stack([np.prod(data[ids == s], axis=0) for s in range(count)])
    others = np.stack([np.prod(data[(ids == ids[r]) & (np.arange(len(ids)) != r)], axis=0) for r in range(len(ids))])
    return products, others


@settings(max_examples=40, deadline=None)
@given(rows=st.integers(1, 7), columns=st.integers(1, 3), seed=st.integers(0, 2**16))
def test_segment_products_are_exact_at_zeros(numpy_module, rows, columns, seed):
    module = numpy_module("gather")
    rng = np.random.default_rng(seed)
    data, ids = with_zeros(rng, (rows, columns)), rng.integers(0, 4, rows).astype(np.int32)
    products, others = segment_products_by_loop(data, ids, 4)
    np.testing.assert_allclose(module.unsorted_segment_prod(data, ids, num_segments=4), products, rtol=1e-12)
    grad = rng.standard_normal((4, columns))
    (grad_data, grad_ids) = module.unsorted_segment_prod_grad(grad, data, ids, num_segments=4)
    assert grad_ids is None
    np.testing.assert_allclose(grad_data, grad[ids] * others, rtol=1e-12, atol=1e-15)
    ids = np.sort(ids)
    count = ids[-1] + 1
    products, others = segment_products_by_loop(data, ids, count)
    np.testing.assert_allclose(module.segment_prod(data, ids), products, rtol=1e-12)
    (grad_data, _) = module.segment_prod_grad(grad[:count], data, ids)
    np.testing.assert_allclose(grad_data, grad[ids] * others, rtol=1e-12, atol=1e-15)


@settings(max_examples=40, deadline=None)
@given(rows=st.integers(1, 4), columns=st.integers(1, 5), seed=st.integers(0, 2**16))
def test_masked_row_product_against_a_loop(module, rows, columns, seed):
    rng = np.random.default_rng(seed)
    x, mask = with_zeros(rng, (rows, columns)), rng.random((rows, columns)) < 0.6
    expected = np.array([np.prod(x[r][mask[r]]) for r in range(rows)])
    np.testing.assert_allclose(module.masked_row_prod(x, mask), expected, rtol=1e-12)
    grad = rng.standard_normal(rows)
    grad_x, grad_mask = module.masked_row_prod_grad(grad, x, mask)
    assert grad_mask is None
    others = np.array([[np.prod(x[r][mask[r] & (np.arange(columns) != c)]) if mask[r, c] else 0.0 for c in range(columns)] for r in range(rows)])
    np.testing.assert_allclose(grad_x, grad[:, None] * others, rtol=1e-12, atol=1e-15)


def test_segment_product_of_squares_with_two_zeros_and_one(module):
    data = np.array([[0.0], [3.0], [0.0], [0.0], [2.0], [5.0]])
    ids = np.array([0, 0, 0, 1, 1, 2], np.int32)
    (grad_data, _) = module.segment_square_prod_grad(np.array([[1.0], [1.0], [1.0]]), data, ids, num_segments=3)
    np.testing.assert_allclose(grad_data[:, 0], [0.0, 0.0, 0.0, 0.0, 0.0, 10.0])
    data[3, 0] = 0.5  # segment 1 without a zero: d/dx of (0.5 * 2)**2
    (grad_data, _) = module.segment_square_prod_grad(np.array([[1.0], [1.0], [1.0]]), data, ids, num_segments=3)
    np.testing.assert_allclose(grad_data[3:5, 0], [2 * 0.5 * 4.0, 2 * 2.0 * 0.25])


def test_segments_are_multiplied_by_a_scatter_never_paired(module, numpy_module):
    library = numpy_module("gather")
    for function in (module.segment_square_prod, module.segment_square_prod_grad, library.unsorted_segment_prod_grad):
        code = inspect.getsource(function).split('"""')[-1]
        assert "ids ==" not in code and "np.arange" not in code, function.__name__
        assert "_scatter_product" in code, function.__name__


def test_first_order_agrees_with_finite_differences_in_every_target(generated):
    assert_gradients_close_to_finite_differences(OPS, generated=generated)


def test_tensorflow_kernels_agree_on_values_and_gradients(tf_module, tf):
    module = tf_module("gather")
    data = tf.constant([[1.0, 0.0], [3.0, 0.5], [0.0, 4.0], [2.0, 0.0]], tf.float64)
    ids = tf.constant([0, 0, 2, 0], tf.int32)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(data)
        y = module.unsorted_segment_prod(data, ids, num_segments=3)
        expected = tf.raw_ops.UnsortedSegmentProd(data=data, segment_ids=ids, num_segments=3)
    np.testing.assert_array_equal(y.numpy(), expected.numpy())
    np.testing.assert_allclose(tape.gradient(y, data).numpy(), tape.gradient(expected, data).numpy())


def second_derivatives_by_loop(data, ids, grad, direction):
    """d/dt of the gradient of sum(grad * unsorted segment products) at data + t * direction:
    for entry r, the sum over the other entries q of its segment of grad[ids[r]] times the
    product of the entries but r and q, times direction[q]; multiplied out, no division."""
    rows = np.arange(len(ids))
    out = np.zeros_like(data)
    for r in rows:
        for q in rows[(ids == ids[r]) & (rows != r)]:
            rest = (ids == ids[r]) & (rows != r) & (rows != q)
            out[r] += grad[ids[r]] * np.prod(data[rest], axis=0) * direction[q]
    return out


# a segment of two zeros (whose gradient is 0, its derivative not), one of one zero, one without
DATA = np.array([[0.0, 1.5], [2.0, 0.0], [0.0, -1.0], [0.7, 0.0], [1.2, 3.0], [-0.4, 2.0]])
IDS = np.array([0, 0, 0, 1, 1, 2], np.int32)


def test_second_order_of_segment_products_in_jax_is_exact_at_zeros(jax_module, jax):
    """JAX differentiating the derived gradient (and the forward, through the runtime's
    scatter-multiply, which JAX cannot differentiate by itself at repeated positions)."""
    jnp, module = jax.numpy, jax_module("gather")
    rng = np.random.default_rng(3)
    grad, direction = rng.standard_normal((3, 2)), rng.standard_normal(DATA.shape)
    first = lambda d: jax.vjp(lambda v: module.unsorted_segment_prod(v, IDS, num_segments=3), d)[1](jnp.asarray(grad))[0]
    _, second = jax.jvp(first, (jnp.asarray(DATA),), (jnp.asarray(direction),))
    np.testing.assert_allclose(np.asarray(second), second_derivatives_by_loop(DATA, IDS, grad, direction), atol=1e-12)
    formula = lambda d: jax.vjp(lambda v: module.unsorted_segment_prod_forward(v, IDS, num_segments=3), d)[1](jnp.asarray(grad))[0]
    np.testing.assert_allclose(np.asarray(formula(jnp.asarray(DATA))), np.asarray(first(jnp.asarray(DATA))), atol=1e-12)


def test_second_order_of_segment_products_in_torch_is_exact_at_zeros(torch_module, torch):
    """PyTorch's double backward through the derived gradient: no NaN from the division's
    untaken branch, and the derivative of a two-zero segment's 0."""
    module = torch_module("gather")
    rng = np.random.default_rng(4)
    grad, direction = rng.standard_normal((3, 2)), rng.standard_normal(DATA.shape)
    data = torch.tensor(DATA, requires_grad=True)
    products = module.unsorted_segment_prod(data, torch.tensor(IDS), num_segments=3)
    (first,) = torch.autograd.grad(products, data, torch.tensor(grad), create_graph=True)
    (second,) = torch.autograd.grad(first, data, torch.tensor(direction))
    # the Hessian is symmetric: its product with `direction` is the loop's
    np.testing.assert_allclose(second.numpy(), second_derivatives_by_loop(DATA, IDS, grad, direction), atol=1e-12)
