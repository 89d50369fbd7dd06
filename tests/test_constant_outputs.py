"""An output that reads no input (FusedBatchNormV3's empty reserve_space_3) is never read into
another output's partial derivatives (where a partial equals the constant, 0 or 1): the
gradient against central differences of a numpy forward written apart, and in every target
against finite differences at both orders."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import import_path

from symgrad.generate import to_temp_folder
from symgrad.testing import (
    assert_gradients_close_to_finite_differences,
    assert_second_order_close_to_finite_differences,
)
from test_variant_inputs import central_differences

OPS = Path(__file__).parent / "fixtures" / "constant_outputs.py"


@pytest.fixture(scope="module")
def generated() -> Path:
    return to_temp_folder([OPS])


def test_the_gradient_is_the_other_outputs(generated):
    module = import_path(generated / "constant_outputs_numpy.py")
    rng = np.random.default_rng(1)
    x, b, grad, grad_copy = rng.normal(size=(2, 3)), rng.normal(size=3), rng.normal(size=(2, 3)), rng.normal(size=(2, 3))
    y, copy, empty = module.with_empty_output(x, b)
    np.testing.assert_allclose(y, x * b)
    np.testing.assert_allclose(copy, x)
    assert empty.shape == (0,) and empty.dtype == x.dtype
    grads = module.with_empty_output_grad(grad, grad_copy, np.zeros(0), x, b)
    loss = lambda x, b: grad * x * b + grad_copy * x  # summed by central_differences
    for k in (0, 1):
        np.testing.assert_allclose(grads[k], central_differences(loss, [x, b], k, 1.0), atol=1e-7)
    y, ones = module.with_ones_output(x, b)
    np.testing.assert_allclose(y, x + b)
    np.testing.assert_array_equal(ones, np.ones(3))
    grads = module.with_ones_output_grad(grad, rng.normal(size=3), x, b)
    for k in (0, 1):
        np.testing.assert_allclose(grads[k], central_differences(lambda x, b: x + b, [x, b], k, grad), atol=1e-7)


def test_first_and_second_order_agree_with_finite_differences_in_every_target(generated):
    assert_gradients_close_to_finite_differences(OPS, generated=generated)
    assert_second_order_close_to_finite_differences(OPS, generated=generated)
