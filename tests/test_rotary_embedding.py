"""A rotary position embedding as users declare it (ops/composed.py RotaryEmbedding): an
output axis enumerating two indices (c, d) after `...`, the other half read at `1 - c`, and
the index c used as a number, `2*c - 1`. Against JAX's autodiff of the hand-written rotate-half
formula, at batch ranks 0 to 2, in every target's float32 (an index as a value takes the
computation's dtype: TensorFlow refuses int64 beside float32)."""

from __future__ import annotations

import numpy as np
import pytest

N, D = 3, 2
BATCHES = [(), (4,), (2, 5)]


def rotate_half(jnp, x, cos, sin):
    first, second = x[..., :D], x[..., D:]
    return x * cos + jnp.concatenate([-second, first], -1) * sin


def inputs(batch, dtype, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape).astype(dtype) for shape in (batch + (N, 2 * D), (N, 2 * D), (N, 2 * D))]


def reference(jax, values, grad):
    """The hand-written formula's value and JAX's vector-Jacobian product of it."""
    f = lambda *v: rotate_half(jax.numpy, *v)
    out, vjp = jax.vjp(f, *map(jax.numpy.asarray, values))
    return np.asarray(out), [np.asarray(g) for g in vjp(jax.numpy.asarray(grad))]


@pytest.mark.parametrize("batch", BATCHES)
def test_numpy_against_jax_autodiff_of_rotate_half(numpy_module, jax, batch):
    module = numpy_module("composed")
    values = inputs(batch, np.float64)
    grad = np.random.default_rng(1).standard_normal(batch + (N, 2 * D))
    out, expected = reference(jax, values, grad)
    np.testing.assert_allclose(module.rotary_embedding(*values), out, rtol=1e-12)
    for got, want in zip(module.rotary_embedding_grad(grad, *values), expected):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("batch", BATCHES)
def test_every_target_in_float32(tf_module, jax_module, torch_module, tf, jax, torch, batch):
    values = inputs(batch, np.float32)
    grad = np.random.default_rng(2).standard_normal(batch + (N, 2 * D)).astype(np.float32)
    _, expected = reference(jax, [v.astype(np.float64) for v in values], grad.astype(np.float64))
    tf_values = list(map(tf.constant, values))
    tf_out = tf_module("composed").rotary_embedding(*tf_values)
    tf_grads = tf_module("composed").rotary_embedding_vjp(tf.constant(grad), *tf_values, tf_out)
    jax_grads = jax_module("composed").rotary_embedding_vjp(grad, *values)
    torch_grads = torch_module("composed").rotary_embedding_vjp(torch.tensor(grad), *map(torch.tensor, values))
    for target, grads in (("tensorflow", tf_grads), ("jax", jax_grads), ("torch", torch_grads)):
        for got, want in zip(grads, expected):
            got = np.asarray(got)
            assert got.dtype == np.float32, target
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=target)
