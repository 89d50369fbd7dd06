"""A window's gradient routed to its first maximum: the pooling kernel lowering picks for it
(`symgrad.lowering.pooling`) and the indicators it falls back to, with ties, against a loop
and TensorFlow's MaxPoolGrad."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from conftest import OPS, ROOT, import_path
from verify_support import derived_folder

POOLS = ROOT / "tests" / "fixtures" / "pools.py"
GEOMETRIES = [  # (padding, window, strides): apart, overlapping, 3 by 2
    ("VALID", (2, 2), (2, 2)),
    ("SAME", (2, 2), (2, 2)),
    ("VALID", (3, 2), (1, 2)),
    ("SAME", (3, 2), (1, 2)),
]


def tied(shape, seed):
    """Entries of three values: most windows hold their maximum more than once."""
    return np.random.default_rng(seed).integers(0, 3, size=shape).astype(np.float64)


def same_pads(size, window, stride):
    """TensorFlow's SAME padding before the first entry, and the output's size."""
    count = -(-size // stride)
    return max((count - 1) * stride + window - size, 0) // 2, count


def first_maximum_loop(x, g, window, strides, pads):
    """Each window's gradient added at its first maximum (row-major), padding never one."""
    dx = np.zeros_like(x)
    for index in np.ndindex(g.shape):
        n, u, c = index[0], index[1:-1], index[-1]
        best = None
        for k in itertools.product(*(range(w) for w in window)):
            h = tuple(q * s + kk - p for q, s, kk, p in zip(u, strides, k, pads))
            if all(0 <= e < size for e, size in zip(h, x.shape[1:-1])):
                if best is None or x[(n, *h, c)] > x[(n, *best, c)]:
                    best = h
        dx[(n, *best, c)] += g[index]
    return dx


def geometry(x, padding, window, strides):
    """(pads, output shape) of a 2-D NHWC pool."""
    if padding == "VALID":
        pads = (0, 0)
        counts = [(size - w) // s + 1 for size, w, s in zip(x.shape[1:3], window, strides)]
    else:
        pads, counts = zip(*(same_pads(size, w, s) for size, w, s in zip(x.shape[1:3], window, strides)))
    return pads, (x.shape[0], *counts, x.shape[-1])


@pytest.mark.parametrize("padding, window, strides", GEOMETRIES)
def test_numpy_gradient_goes_to_the_first_maximum(numpy_module, padding, window, strides):
    conv = numpy_module("conv")
    x = tied((2, 7, 6, 3), seed=1)
    pads, shape = geometry(x, padding, window, strides)
    g = np.random.default_rng(2).normal(size=shape)
    attrs = dict(padding=padding, ksize=(1, *window, 1), strides=(1, *strides, 1))
    expected = first_maximum_loop(x, g, window, strides, pads)
    (dx,) = conv.max_pool_grad(g, x, **attrs)
    np.testing.assert_allclose(dx, expected, rtol=1e-12)
    as_inputs = dict(padding=padding, ksize=np.array(attrs["ksize"]), strides=np.array(attrs["strides"]))
    (dx,) = conv.max_pool_v2_grad(g, x, **as_inputs)  # window and strides read at run time
    np.testing.assert_allclose(dx, expected, rtol=1e-12)


@pytest.mark.parametrize("padding, window, strides", GEOMETRIES)
def test_tensorflow_gradient_is_max_pool_grad_on_every_path(tf_module, tf, padding, window, strides):
    """Attributes known (MaxPoolGrad), window and strides read from tensors in a graph
    (MaxPoolGradV2) and shapes unknown while tracing (padding -inf spanned first)."""
    conv = tf_module("conv")
    x = tf.constant(tied((2, 7, 6, 3), seed=3))
    ksize, stride_list = [1, *window, 1], [1, *strides, 1]
    y = tf.nn.max_pool2d(x, window, strides, padding)
    g = tf.constant(np.random.default_rng(4).normal(size=y.shape))
    expected = tf.raw_ops.MaxPoolGrad(orig_input=x, orig_output=y, grad=g, ksize=ksize, strides=stride_list, padding=padding)
    pads, _ = geometry(x.numpy(), padding, window, strides)
    np.testing.assert_array_equal(expected, first_maximum_loop(x.numpy(), g.numpy(), window, strides, pads))

    unknown = [tf.TensorSpec(None, tf.float64)] * 3
    results = {
        "eager": conv.max_pool_vjp(g, x, y, padding=padding, ksize=ksize, strides=stride_list),
        "shapes unknown": tf.function(
            lambda g, x, y: conv.max_pool_vjp(g, x, y, padding=padding, ksize=ksize, strides=stride_list),
            input_signature=unknown,
        )(g, x, y),
        "window a tensor": tf.function(
            lambda g, x, y, k, s: conv.max_pool_v2_vjp(g, x, y, padding=padding, ksize=k, strides=s)
        )(g, x, y, tf.constant(ksize), tf.constant(stride_list)),
    }
    for path, (dx,) in results.items():
        np.testing.assert_array_equal(dx, expected, err_msg=path)


def test_max_pool_gradient_is_one_kernel_call_per_variant():
    from symgrad import ir
    from symgrad.generate import compile_op
    from symgrad.load import load_op_file

    (decl,) = [d for d in load_op_file(OPS / "conv.py").ops if d.name == "MaxPool"]
    code = compile_op(decl)
    for branch in code.vjp.branches:
        values = [type(s.value) for s in ir.statements(branch.body) if isinstance(s, ir.Assign)]
        assert values == [ir.MaxPoolBackprop], values


@pytest.mark.parametrize("window, stride", [(2, 2), (3, 1), (3, 2)])
def test_a_pool_no_kernel_takes_goes_through_the_indicators(window, stride):
    """One spatial axis: no kernel matches, and the derived indicators route ties alike."""
    folder = derived_folder(POOLS)
    module = import_path(folder / "pools_numpy.py", "_symgrad_pools_numpy")
    assert "_max_pool_backprop" not in (folder / "pools_numpy.py").read_text()
    x = tied((2, 9, 3), seed=window * 10 + stride)
    count = (x.shape[1] + 1 - window) // stride + 1
    g = np.random.default_rng(5).normal(size=(2, count, 3))
    expected = first_maximum_loop(x, g, (window,), (stride,), (1,))
    (dx,) = module.max_pool1d_grad(g, x, window=window, stride=stride)
    np.testing.assert_allclose(dx, expected, rtol=1e-12)


def test_jacobian_and_second_order_through_the_wrapper(tf_module, tf):
    """`tf.GradientTape.jacobian` over the wrapper (it once failed on a 6-D broadcast) agrees
    with stock MaxPool's, and the gradient can be differentiated again."""
    conv = tf_module("conv")
    x = tf.constant(np.random.default_rng(6).normal(size=(2, 4, 4, 2)))
    pool = dict(padding="VALID", ksize=(1, 2, 2, 1), strides=(1, 2, 2, 1))
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        ours, stock = conv.max_pool(x, **pool), tf.nn.max_pool2d(x, 2, 2, "VALID")
    np.testing.assert_array_equal(tape.jacobian(ours, x), tape.jacobian(stock, x))
    second = []
    for pool_of in (lambda v: conv.max_pool(v, **pool), lambda v: tf.nn.max_pool2d(v, 2, 2, "VALID")):
        with tf.GradientTape() as outer:
            outer.watch(x)
            with tf.GradientTape() as inner:
                inner.watch(x)
                loss = tf.reduce_sum(pool_of(x) ** 2)
            grad = inner.gradient(loss, x)
            total = tf.reduce_sum(grad * x)
        second.append(outer.gradient(total, x))
    np.testing.assert_allclose(second[0], second[1], rtol=1e-12)
