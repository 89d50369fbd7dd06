"""Bool inputs (masks, conditions) in index and elementwise ops: drawn as bools, no gradient,
and the generated code takes real bool arrays in every target (TensorFlow's ops refuse a float
condition), against numpy's where and mean, and against finite differences at both orders."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import import_path, require_tf
from hypothesis import given, settings, strategies as st

from symgrad.generate import to_temp_folder
from symgrad.testing import (
    assert_gradients_close_to_finite_differences,
    assert_second_order_close_to_finite_differences,
)
from symgrad.verify.cases import bound_forward, make_cases
from symgrad.verify.ops_under_test import load_derived, variants_of
from test_computed_positions import brute_vjp

OPS = Path(__file__).parent / "fixtures" / "bool_input_ops.py"


@pytest.fixture(scope="module")
def generated() -> Path:
    return to_temp_folder([OPS])


@pytest.fixture(scope="module")
def module(generated):
    return import_path(generated / "bool_input_ops_numpy.py")


def masked_mean(x, mask):
    return np.sum(np.where(mask, x, 0.0), axis=-1) / np.maximum(np.sum(mask, axis=-1), 1)


@settings(max_examples=30, deadline=None)
@given(rows=st.integers(1, 3), size=st.integers(1, 6), seed=st.integers(0, 2**16))
def test_a_masked_mean_is_numpys_and_the_mask_gets_no_gradient(module, rows, size, seed):
    rng = np.random.default_rng(seed)
    x, grad, mask = rng.standard_normal((rows, size)), rng.standard_normal(rows), rng.random((rows, size)) < 0.5
    np.testing.assert_allclose(module.masked_mean(x, mask), masked_mean(x, mask), rtol=1e-12)
    grad_x, grad_mask = module.masked_mean_grad(grad, x, mask)
    assert grad_mask is None
    np.testing.assert_allclose(grad_x, brute_vjp(lambda v: masked_mean(v, mask), x, grad), atol=1e-12)
    grad_x, grad_mask = module.masked_fill_grad(np.ones_like(x), x, mask)
    np.testing.assert_array_equal(grad_x, mask.astype(float))


def test_cases_draw_bools_holding_both_values(generated):
    for op in load_derived([OPS], generated):
        for variant in variants_of(op):
            for case in make_cases(variant, bound_forward(variant), False):
                condition = [x for name, x in zip(variant.inputs, case.inputs) if name in variant.booleans]
                assert condition and all(np.asarray(c).dtype == np.bool_ for c in condition), case.label
                if np.size(condition[0]) > 1:
                    assert np.any(condition[0]) and not np.all(condition[0]), case.label


def test_tensorflow_takes_a_bool_condition_and_matches_tf_where(generated):
    tf = require_tf()
    module = import_path(generated / "bool_input_ops_tf.py")
    condition = tf.constant([True, False, True])
    x = tf.constant([1.5, -2.0, 3.0], tf.float32)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = module.where_or_square(condition, x)
    grad = tape.gradient(y, x)
    with tf.GradientTape() as tape:
        tape.watch(x)
        expected = tf.where(condition, x, x**2)
    np.testing.assert_allclose(y.numpy(), expected.numpy())
    np.testing.assert_allclose(grad.numpy(), tape.gradient(expected, x).numpy())
    assert grad.dtype == tf.float32


def test_first_and_second_order_agree_with_finite_differences_in_every_target(generated):
    assert_gradients_close_to_finite_differences(OPS, generated=generated)
    assert_second_order_close_to_finite_differences(OPS, generated=generated)
