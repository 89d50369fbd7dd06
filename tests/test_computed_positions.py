"""Positions computed from indices (a modulo, a clamp, a mirror image): gathers forward,
scatter-adds back, against brute force (numpy's roll and pad, a loop) and, in every target,
against finite differences at first and second order."""

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

OPS = Path(__file__).parent / "fixtures" / "computed_position_ops.py"


@pytest.fixture(scope="module")
def generated() -> Path:
    return to_temp_folder([OPS])


@pytest.fixture(scope="module")
def module(generated):
    return import_path(generated / "computed_position_ops_numpy.py")


def brute_vjp(forward, x: np.ndarray, upstream: np.ndarray) -> np.ndarray:
    """The gradient of the linear map `forward` at `upstream`, one unit input at a time."""
    grad = np.zeros_like(x)
    for n in np.ndindex(x.shape):
        unit = np.zeros_like(x)
        unit[n] = 1.0
        grad[n] = np.sum(upstream * forward(unit))
    return grad


def circular_by_loop(x, w):
    n = x.shape[-1]
    return np.stack([sum(x[..., (i + k) % n] * w[k] for k in range(len(w))) for i in range(n)], axis=-1)


@settings(max_examples=40, deadline=None)
@given(size=st.integers(1, 7), shift=st.integers(-9, 9), seed=st.integers(0, 2**16))
def test_roll_is_numpy_roll_and_its_gradient_rolls_back(module, size, shift, seed):
    rng = np.random.default_rng(seed)
    x, grad = rng.standard_normal((2, size)), rng.standard_normal((2, size))
    np.testing.assert_array_equal(module.roll_by(x, shift=shift), np.roll(x, shift, axis=-1))
    (grad_x,) = module.roll_by_grad(grad, x, shift=shift)
    np.testing.assert_allclose(grad_x, brute_vjp(lambda v: np.roll(v, shift, axis=-1), x, grad), atol=1e-12)


@settings(max_examples=40, deadline=None)
@given(size=st.integers(1, 6), before=st.integers(0, 4), after=st.integers(0, 4), seed=st.integers(0, 2**16))
def test_edge_padding_is_numpy_pad_and_its_gradient_adds_the_copies(module, size, before, after, seed):
    rng = np.random.default_rng(seed)
    x, grad = rng.standard_normal((3, size)), rng.standard_normal((3, size + before + after))
    pad = lambda v: np.pad(v, [(0, 0), (before, after)], mode="edge")
    np.testing.assert_array_equal(module.edge_pad(x, before=before, after=after), pad(x))
    (grad_x,) = module.edge_pad_grad(grad, x, before=before, after=after)
    np.testing.assert_allclose(grad_x, brute_vjp(pad, x, grad), atol=1e-12)


@settings(max_examples=30, deadline=None)
@given(size=st.integers(1, 6), taps=st.integers(1, 8), seed=st.integers(0, 2**16))
def test_circular_correlation_wraps_around_in_both_directions(module, size, taps, seed):
    """More taps than entries: a window wraps past the start more than once."""
    rng = np.random.default_rng(seed)
    x, w, grad = rng.standard_normal((2, size)), rng.standard_normal(taps), rng.standard_normal((2, size))
    np.testing.assert_allclose(module.circular_correlation(x, w), circular_by_loop(x, w), atol=1e-12)
    grad_x, grad_w = module.circular_correlation_grad(grad, x, w)
    np.testing.assert_allclose(grad_x, brute_vjp(lambda v: circular_by_loop(v, w), x, grad), atol=1e-12)
    np.testing.assert_allclose(grad_w, brute_vjp(lambda v: circular_by_loop(x, v), w, grad), atol=1e-12)


def test_each_position_is_a_gather_and_a_scatter_never_a_one_hot(module):
    for forward, gradient in ((module.roll_by, module.roll_by_grad), (module.edge_pad, module.edge_pad_grad)):
        assert "_gather(" in inspect.getsource(forward)
        source = inspect.getsource(gradient)
        assert "_scatter_add(" in source and "np.eye" not in source and "==" not in source


def test_first_and_second_order_agree_with_finite_differences_in_every_target(generated):
    assert_gradients_close_to_finite_differences(OPS, generated=generated)
    assert_second_order_close_to_finite_differences(OPS, generated=generated)


def test_a_stage_may_read_at_a_computed_position(module):
    """Stages' subscripts are kept as outputs' are: the sum of squares of a roll is the input's."""
    x = np.random.default_rng(3).standard_normal((2, 5))
    y, stages = module.roll_squared_sum(x, return_stages=True)
    np.testing.assert_allclose(stages["rolled"], np.roll(x, 1, axis=-1))
    np.testing.assert_allclose(y, x * np.sum(x**2, axis=-1, keepdims=True), rtol=1e-12)
