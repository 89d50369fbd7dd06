"""Linear recurrences: a cumulative product's gradient, and sums weighted by running products
declared directly (a discounted return), lowered to scans (`symgrad/lowering/recurrences.py`),
never a pairwise (i, k) array, and derived again for the second order."""

from __future__ import annotations

import inspect
from pathlib import Path

import numpy as np
import pytest
from conftest import import_path, require_jax

from symgrad.generate import to_temp_folder
from symgrad.testing import (
    assert_gradients_close_to_finite_differences,
    assert_second_order_close_to_finite_differences,
)

OPS = Path(__file__).parent / "fixtures" / "recurrence_ops.py"


@pytest.fixture(scope="module")
def generated() -> Path:
    return to_temp_folder([OPS])


@pytest.fixture(scope="module")
def module(generated):
    return import_path(generated / "recurrence_ops_numpy.py", "recurrence_ops_numpy")


def _discounted_by_loop(reward, gamma):
    ret, running = np.zeros_like(reward), np.zeros_like(reward[..., 0])
    for t in reversed(range(reward.shape[-1])):
        next_gamma = gamma[..., t + 1] if t + 1 < reward.shape[-1] else 0.0
        running = reward[..., t] + next_gamma * running
        ret[..., t] = running
    return ret


def test_a_declared_recurrence_is_a_scan_of_its_own(module):
    rng = np.random.default_rng(0)
    reward, gamma = rng.normal(size=(3, 9)), rng.uniform(0.5, 1.0, size=(3, 9))
    np.testing.assert_allclose(module.discounted_return(reward, gamma), _discounted_by_loop(reward, gamma), rtol=1e-12)
    for function in (module.discounted_return, module.discounted_return_grad, module.discounted_return_grad_grad,
                     module.survival_grad, module.survival_grad_grad):
        source = inspect.getsource(function)
        assert "_linear_scan(" in source and " / " not in source, function.__name__


def test_the_gradient_matches_jax_autodiff_of_the_loop(module):
    """Against something symgrad did not write: JAX differentiating a `lax.scan` loop."""
    jax = require_jax()
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    def by_scan(reward, gamma):
        next_gamma = jnp.concatenate([gamma[..., 1:], jnp.zeros_like(gamma[..., :1])], axis=-1)
        step = lambda running, rg: (rg[0] + rg[1] * running,) * 2
        _, ret = jax.lax.scan(step, jnp.zeros(reward.shape[:-1]), (reward.T[::-1], next_gamma.T[::-1]))
        return ret[::-1].T

    rng = np.random.default_rng(1)
    reward, gamma, grad = rng.normal(size=(4, 7)), rng.uniform(0.0, 1.0, size=(4, 7)), rng.normal(size=(4, 7))
    gamma[:, 3] = 0.0  # a step that discounts everything after it away
    _, vjp = jax.vjp(by_scan, reward, gamma)
    for derived, expected in zip(module.discounted_return_grad(grad, reward, gamma), vjp(grad)):
        np.testing.assert_allclose(derived, np.asarray(expected), rtol=1e-10, atol=1e-12)


def test_first_and_second_order_agree_with_finite_differences_in_every_target(generated):
    assert_gradients_close_to_finite_differences(OPS, generated=generated)
    assert_second_order_close_to_finite_differences(OPS, generated=generated)
