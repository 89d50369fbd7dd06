"""Integer inputs declared `distinct`: verification draws their positions without repeats (rows
of a (K, depth) tensor pairwise different), within the axis they index (also where they meet it
in a `KroneckerDelta`, not a subscript), with a position left over; and a staged forward whose
stage the gradient op does not read derives at second order. Against numpy's fancy-index
assignment, a loop of finite differences, and finite differences at both orders."""

from __future__ import annotations

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
from symgrad.verify.cases import bound_forward, make_cases
from symgrad.verify.positions import positions
from symgrad.verify.ops_under_test import load_derived, variants_of
from test_segments import brute_vjp  # central differences

OPS = Path(__file__).parent / "fixtures" / "distinct_position_ops.py"


@pytest.fixture(scope="module")
def generated() -> Path:
    return to_temp_folder([OPS])


@pytest.fixture(scope="module")
def module(generated):
    return import_path(generated / "distinct_position_ops_numpy.py")


def replaced(x, positions, rows):
    y = x**2
    y[positions] = rows
    return y


@settings(max_examples=30, deadline=None)
@given(size=st.integers(1, 6), columns=st.integers(1, 3), seed=st.integers(0, 2**16), data=st.data())
def test_replace_rows_is_numpys_assignment(module, size, columns, seed, data):
    rng = np.random.default_rng(seed)
    count = data.draw(st.integers(1, size))
    positions = rng.permutation(size)[:count].astype(np.int32)
    x, rows, grad = rng.standard_normal((size, columns)), rng.standard_normal((count, columns)), rng.standard_normal((size, columns))
    np.testing.assert_allclose(module.replace_rows(x, positions, rows), replaced(x, positions, rows), rtol=1e-12)
    grad_x, grad_positions, grad_rows = module.replace_rows_grad(grad, x, positions, rows)
    assert grad_positions is None
    np.testing.assert_allclose(grad_x, brute_vjp(lambda v: replaced(v, positions, rows), x, grad), atol=1e-8)
    np.testing.assert_allclose(grad_rows, brute_vjp(lambda v: replaced(x, positions, v), rows, grad), atol=1e-8)


@pytest.mark.parametrize("shape,size", [((5,), 6), ((4, 2), 3), ((9, 2), 3), ((1, 3), 1)])
def test_distinct_positions_never_repeat_a_row(shape, size):
    values = positions(np.random.default_rng(0), shape, size, distinct=True)
    rows = values.reshape(shape[0], -1)
    assert len(np.unique(rows, axis=0)) == shape[0]
    assert values.min() >= 0 and values.max() < size


def test_cases_draw_distinct_positions_within_the_axis_with_one_left(generated):
    for op in load_derived([OPS], generated):
        for variant in variants_of(op):
            cases = make_cases(variant, bound_forward(variant), False)
            assert cases
            for case in cases:
                x, positions, _ = case.inputs
                assert len(np.unique(positions)) == len(positions), case.label
                assert positions.max() < x.shape[0], case.label
                assert len(positions) == 1 or len(positions) < x.shape[0], case.label


def test_first_and_second_order_agree_with_finite_differences_in_every_target(generated):
    assert_gradients_close_to_finite_differences(OPS, generated=generated)
    assert_second_order_close_to_finite_differences(OPS, generated=generated)
