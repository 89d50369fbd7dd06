"""Index maps that read other output indices (a gather by a per-row index, an offset
diagonal, a per-row length): one gather forward, one scatter-add back (never a one-hot or a
pairwise matrix), against brute force (numpy's own indexing, a loop) and, in every target,
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
from test_computed_positions import brute_vjp

OPS = Path(__file__).parent / "fixtures" / "row_map_ops.py"


@pytest.fixture(scope="module")
def generated() -> Path:
    return to_temp_folder([OPS])


@pytest.fixture(scope="module")
def module(generated):
    return import_path(generated / "row_map_ops_numpy.py")


def reverse_prefix_by_loop(x, lengths):
    y = x.copy()
    for b, n in enumerate(lengths):
        y[b, :n] = x[b, :n][::-1]
    return y


@settings(max_examples=30, deadline=None)
@given(rows=st.integers(1, 5), columns=st.integers(1, 6), seed=st.integers(0, 2**16))
def test_an_entry_per_row_is_numpys_take_along_axis(module, rows, columns, seed):
    rng = np.random.default_rng(seed)
    x, grad = rng.standard_normal((rows, columns)), rng.standard_normal(rows)
    labels = rng.integers(0, columns, rows)
    pick = lambda v: np.take_along_axis(v, labels[:, None], axis=1)[:, 0]
    np.testing.assert_array_equal(module.pick_per_row(x, labels), pick(x))
    grad_x, grad_labels = module.pick_per_row_grad(grad, x, labels)
    assert grad_labels is None
    np.testing.assert_allclose(grad_x, brute_vjp(pick, x, grad), atol=1e-12)


@settings(max_examples=30, deadline=None)
@given(rows=st.integers(1, 4), middle=st.integers(1, 3), columns=st.integers(1, 5), seed=st.integers(0, 2**16))
def test_an_axis_between_the_row_and_the_position_is_carried(module, rows, middle, columns, seed):
    rng = np.random.default_rng(seed)
    x, grad = rng.standard_normal((rows, middle, columns)), rng.standard_normal((rows, middle))
    labels = rng.integers(0, columns, rows)
    pick = lambda v: v[np.arange(rows), :, labels] ** 2
    np.testing.assert_allclose(module.pick_across_middle_axis(x, labels), pick(x), rtol=1e-12)
    grad_x, _ = module.pick_across_middle_axis_grad(grad, x, labels)
    expected = np.zeros_like(x)
    expected[np.arange(rows), :, labels] = 2 * x[np.arange(rows), :, labels] * grad
    np.testing.assert_allclose(grad_x, expected, atol=1e-12)


@settings(max_examples=30, deadline=None)
@given(rows=st.integers(1, 5), columns=st.integers(1, 6), seed=st.integers(0, 2**16))
def test_a_position_before_its_axis_and_repeated_positions(module, rows, columns, seed):
    """Several outputs may not read one entry here, but rows[i] repeats: each column its own."""
    rng = np.random.default_rng(seed)
    x, grad = rng.standard_normal((rows, columns)), rng.standard_normal(columns)
    picked = rng.integers(0, rows, columns)
    pick = lambda v: v[picked, np.arange(columns)]
    np.testing.assert_array_equal(module.pick_row_of_column(x, picked), pick(x))
    grad_x, _ = module.pick_row_of_column_grad(grad, x, picked)
    np.testing.assert_allclose(grad_x, brute_vjp(pick, x, grad), atol=1e-12)


@settings(max_examples=30, deadline=None)
@given(size=st.integers(3, 6), k=st.sampled_from([1, -2]), seed=st.integers(0, 2**16))
def test_an_offset_diagonal_is_numpys_diagonal(module, size, k, seed):
    rng = np.random.default_rng(seed)
    x, grad = rng.standard_normal((2, size, size)), rng.standard_normal((2, size - abs(k)))
    diagonal = lambda v: np.diagonal(v, offset=k, axis1=-2, axis2=-1)
    np.testing.assert_array_equal(module.offset_diagonal(x, k=k), diagonal(x))
    (grad_x,) = module.offset_diagonal_grad(grad, x, k=k)
    np.testing.assert_allclose(grad_x, brute_vjp(diagonal, x, grad), atol=1e-12)


@settings(max_examples=30, deadline=None)
@given(rows=st.integers(1, 4), length=st.integers(1, 6), seed=st.integers(0, 2**16))
def test_a_per_row_length_reverses_each_prefix(module, rows, length, seed):
    rng = np.random.default_rng(seed)
    x, grad = rng.standard_normal((rows, length)), rng.standard_normal((rows, length))
    lengths = rng.integers(0, length + 1, rows)
    reverse = lambda v: reverse_prefix_by_loop(v, lengths)
    np.testing.assert_array_equal(module.reverse_prefix(x, lengths), reverse(x))
    grad_x, _ = module.reverse_prefix_grad(grad, x, lengths)
    np.testing.assert_allclose(grad_x, brute_vjp(reverse, x, grad), atol=1e-12)


def test_each_is_one_gather_forward_and_one_scatter_back(module):
    """Never a one-hot, an identity or an (i, i') matrix: no comparison, no eye, no einsum."""
    for name in ("pick_per_row", "pick_across_middle_axis", "pick_row_of_column", "offset_diagonal", "reverse_prefix"):
        forward = inspect.getsource(getattr(module, name)).split('"""')[-1]
        code = inspect.getsource(getattr(module, name + "_grad")).split('"""')[-1]
        branches = [b for b in forward.split("if k ==") if "_gather(" in b or "_scatter_add(" in b]
        assert forward.count("_gather(") == len(branches) and "einsum" not in forward and "diagonal(" not in forward, name
        assert code.count("_scatter_add(") == len(branches) and "np.eye" not in code, name
        assert "==" not in code.replace("if k ==", "").replace("elif k ==", ""), name


def test_first_and_second_order_agree_with_finite_differences_in_every_target(generated):
    assert_gradients_close_to_finite_differences(OPS, generated=generated)
    assert_second_order_close_to_finite_differences(OPS, generated=generated)
