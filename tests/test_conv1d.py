"""Convolutions over one spatial axis, declared as users declare them (an affine index map,
a stride attribute, SAME padding by an integer function), in TensorFlow too: its kernels are
2-D and 3-D, so the generated module runs them over a unit height. Against TensorFlow's own
`tf.nn.conv1d` and its registered gradient, and verified against finite differences in every
target when generated."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import import_path

from symgrad.generate import generate

OPS = '''import sympy as sp

from symgrad import dims, indices, integer_function, op, tensor

N, W, C, O, K, M = dims("N W C O K M")
n, i, a, c, o, m = indices("n i a c o m")


@integer_function
def same_before(size, kernel, stride):
    """TensorFlow's SAME padding before an axis."""
    return sp.floor(sp.Max((sp.ceiling(size / stride) - 1) * stride + kernel - size, 0) / 2)


@op("Conv1D", attrs={"stride": int, "padding": ("VALID", "SAME")}, defaults={"stride": 1, "padding": "VALID"},
    samples={"stride": (1, 2)})
def conv1d(stride, padding):
    """NWC input, (K, C, O) filter."""
    x = tensor("x", (N, W, C))
    f = tensor("filter", (K, C, O))
    if padding == "VALID":
        size, pad = sp.floor((W - K) / stride) + 1, 0
    else:
        size, pad = sp.ceiling(W / stride), same_before(W, K, stride)
    total = sp.Sum(x[n, i * stride + a - pad, c] * f[a, c, o], (a, 0, K - 1), (c, 0, C - 1))
    return {"y": ((n, (i, size), o), total)}


@op("DepthwiseConv1D", attrs={"stride": int}, defaults={"stride": 1}, samples={"stride": (1, 2)})
def depthwise_conv1d(stride):
    """Each channel with its own M filters."""
    x = tensor("x", (N, W, C))
    f = tensor("filter", (K, C, M))
    total = sp.Sum(x[n, i * stride + a, c] * f[a, c, m], (a, 0, K - 1))
    return {"y": ((n, (i, sp.floor((W - K) / stride) + 1), c, m), total)}
'''
RNG = np.random.default_rng(11)


@pytest.fixture(scope="module")
def modules(tmp_path_factory):
    folder = tmp_path_factory.mktemp("conv1d")
    (folder / "conv1d_ops.py").write_text(OPS)
    for name, text in generate([folder / "conv1d_ops.py"], ("numpy", "tensorflow")).items():
        (folder / name).write_text(text)
    return lambda target: import_path(folder / f"conv1d_ops_{target}.py")


@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize("padding", ["VALID", "SAME"])
def test_conv1d_matches_tensorflows_conv1d_and_its_gradient(tf, modules, stride, padding):
    x, f = RNG.normal(size=(2, 9, 3)), RNG.normal(size=(3, 3, 4))
    tx, tfilter = tf.constant(x), tf.constant(f)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch([tx, tfilter])
        ours = modules("tf").conv1d(tx, tfilter, stride=stride, padding=padding)
        theirs = tf.nn.conv1d(tx, tfilter, stride=stride, padding=padding)
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-12)
    upstream = tf.constant(RNG.normal(size=theirs.shape))
    want = tape.gradient(theirs, [tx, tfilter], output_gradients=upstream)
    got = tape.gradient(ours, [tx, tfilter], output_gradients=upstream)
    numpy_grads = modules("numpy").conv1d_grad(upstream.numpy(), x, f, stride=stride, padding=padding)
    for g, n, w in zip(got, numpy_grads, want):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-10)
        np.testing.assert_allclose(n, w.numpy(), rtol=1e-10)


@pytest.mark.parametrize("stride", [1, 2])
def test_depthwise_conv1d_matches_tensorflows_depthwise_conv(tf, modules, stride):
    x, f = RNG.normal(size=(2, 9, 3)), RNG.normal(size=(3, 3, 2))
    tx, tfilter = tf.constant(x), tf.constant(f)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch([tx, tfilter])
        ours = modules("tf").depthwise_conv1d(tx, tfilter, stride=stride)
        theirs = tf.nn.depthwise_conv2d(tx[:, None], tfilter[None], [1, stride, stride, 1], "VALID")[:, 0]
    np.testing.assert_allclose(np.reshape(ours.numpy(), theirs.shape), theirs.numpy(), rtol=1e-12)
    upstream = tf.constant(RNG.normal(size=ours.shape))
    want = tape.gradient(theirs, [tx, tfilter], output_gradients=tf.reshape(upstream, theirs.shape))
    got = tape.gradient(ours, [tx, tfilter], output_gradients=upstream)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-10)
