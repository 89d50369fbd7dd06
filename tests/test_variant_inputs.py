"""An input that some attribute variants do not read (BatchNormWithGlobalNormalization's gamma
without scale_after_normalization) has a gradient in the variants that read it, and None in
the others: against central differences of a numpy forward written apart, and in every target
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

OPS = Path(__file__).parent / "fixtures" / "variant_inputs.py"


@pytest.fixture(scope="module")
def generated() -> Path:
    return to_temp_folder([OPS])


def central_differences(f, arrays, k, grad, step=1e-6):
    """d sum(grad * f(arrays)) / d arrays[k], entry by entry."""
    out = np.zeros_like(arrays[k])
    for index in np.ndindex(arrays[k].shape):
        moved = [a.copy() for a in arrays]
        moved[k][index] += step
        up = np.sum(grad * f(*moved))
        moved[k][index] -= 2 * step
        out[index] = (up - np.sum(grad * f(*moved))) / (2 * step)
    return out


@pytest.mark.parametrize("scaled", [False, True])
def test_an_input_read_in_one_variant_has_its_gradient_there_only(generated, scaled):
    module = import_path(generated / "variant_inputs_numpy.py")
    rng = np.random.default_rng(0)
    x, gamma, beta, grad = rng.normal(size=(2, 3)), rng.normal(size=3), rng.normal(size=3), rng.normal(size=(2, 3))
    forward = (lambda x, gamma, beta: x * gamma + beta) if scaled else (lambda x, gamma, beta: x + beta)
    grads = module.maybe_scaled_grad(grad, x, gamma, beta, scaled=scaled)
    assert len(grads) == 3
    for k in (0, 2):
        np.testing.assert_allclose(grads[k], central_differences(forward, [x, gamma, beta], k, grad), atol=1e-7)
    if scaled:
        np.testing.assert_allclose(grads[1], central_differences(forward, [x, gamma, beta], 1, grad), atol=1e-7)
    else:
        assert grads[1] is None


def test_first_and_second_order_agree_with_finite_differences_in_every_target(generated):
    assert_gradients_close_to_finite_differences(OPS, generated=generated)
    assert_second_order_close_to_finite_differences(OPS, generated=generated)
