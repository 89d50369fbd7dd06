"""Dilation2D as ops/conv.py declares it: the maximum over each window of input + filter,
padding never the maximum, the gradient of a window going to its first maximum (row-major),
as TensorFlow's Dilation2DBackpropInput and Dilation2DBackpropFilter kernels route ties.
Against a loop, and against TensorFlow's gradient on tied values."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings, strategies as st


def dilation_by_loop(x, f, strides, rates, padding):
    """(output, gradient of input, gradient of filter for an upstream `grad`) by loops."""
    (_, height, width, _), (kh, kw, _) = x.shape, f.shape
    sizes, pads = [], []
    for size, k, s, r in ((height, kh, strides[1], rates[1]), (width, kw, strides[2], rates[2])):
        reach = r * (k - 1) + 1
        out = (size - reach) // s + 1 if padding == "VALID" else math.ceil(size / s)
        sizes.append(out)
        pads.append(0 if padding == "VALID" else max((out - 1) * s + reach - size, 0) // 2)
    output = np.full((x.shape[0], *sizes, x.shape[3]), -np.inf)
    first = {}
    for n, i, j, c in np.ndindex(output.shape):
        for a, b in np.ndindex(kh, kw):
            row, col = i * strides[1] + a * rates[1] - pads[0], j * strides[2] + b * rates[2] - pads[1]
            if 0 <= row < height and 0 <= col < width and x[n, row, col, c] + f[a, b, c] > output[n, i, j, c]:
                output[n, i, j, c] = x[n, row, col, c] + f[a, b, c]
                first[n, i, j, c] = (row, col, a, b)
    return output, first


@settings(max_examples=25, deadline=None)
@given(
    height=st.integers(2, 6), width=st.integers(2, 6), kh=st.integers(1, 2), kw=st.integers(1, 3),
    stride=st.integers(1, 2), rate=st.integers(1, 2), padding=st.sampled_from(["VALID", "SAME"]),
    tied=st.booleans(), seed=st.integers(0, 2**16),
)
def test_dilation_against_a_loop_ties_to_the_first(numpy_module, height, width, kh, kw, stride, rate, padding, tied, seed):
    module = numpy_module("conv")
    rng = np.random.default_rng(seed)
    if (rate * (kh - 1) + 1 > height or rate * (kw - 1) + 1 > width) and padding == "VALID":
        return
    x = rng.integers(-1, 2, (2, height, width, 2)).astype(float) if tied else rng.standard_normal((2, height, width, 2))
    f = rng.integers(-1, 2, (kh, kw, 2)).astype(float) if tied else rng.standard_normal((kh, kw, 2))
    strides, rates = (1, stride, 1, 1), (1, rate, rate, 1)
    expected, first = dilation_by_loop(x, f, strides, rates, padding)
    attrs = dict(strides=strides, rates=rates, padding=padding)
    np.testing.assert_array_equal(module.dilation2d(x, f, **attrs), expected)
    grad = rng.standard_normal(expected.shape)
    grad_x, grad_f = np.zeros_like(x), np.zeros_like(f)
    for (n, i, j, c), (row, col, a, b) in first.items():
        grad_x[n, row, col, c] += grad[n, i, j, c]
        grad_f[a, b, c] += grad[n, i, j, c]
    got_x, got_f = module.dilation2d_grad(grad, x, f, **attrs)
    np.testing.assert_allclose(got_x, grad_x, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got_f, grad_f, rtol=1e-12, atol=1e-12)


def test_ties_are_routed_as_tensorflows_kernels(tf_module, tf):
    module = tf_module("conv")
    rng = np.random.default_rng(3)
    x = tf.constant(rng.integers(-1, 2, (2, 5, 4, 3)).astype(np.float64))
    f = tf.constant(rng.integers(-1, 2, (2, 2, 3)).astype(np.float64))
    for padding in ("VALID", "SAME"):
        attrs = dict(strides=[1, 2, 1, 1], rates=[1, 1, 2, 1], padding=padding)
        with tf.GradientTape(persistent=True) as tape:
            tape.watch([x, f])
            ours = module.dilation2d(x, f, **attrs)
            theirs = tf.raw_ops.Dilation2D(input=x, filter=f, **attrs)
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
        for got, want in zip(tape.gradient(ours, [x, f]), tape.gradient(theirs, [x, f])):
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)
