"""Convolution kernels: what the recogniser matches and what it leaves to gathers, and the
generated Conv2D gradients that call the kernels against TensorFlow's registered gradient."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import sympy as sp

from symgrad.conv_kernels import find_convolution
from symgrad.functions import exact_div
from symgrad.generate import compile_op
from symgrad.load import load_op_file
from symgrad.lower_tensor import is_index
from symgrad.render import render_module

from conftest import OPS, import_path

n, i, j, a, b, c, o, h, w = sp.symbols("n i j a b c o h w", integer=True)
s, d, p = sp.symbols("s d p", integer=True, positive=True)
x, f, g = (sp.IndexedBase(name) for name in ("x", "f", "g"))

# (entries, result indices, summed indices) -> kernel name, or None where no kernel computes it
CASES = [
    ((x[n, i * s + a * d - p, j + b, c], f[a, b, c, o]), (n, i, j, o), (a, b, c), "conv"),
    ((f[a, b, c, o], x[n, i * s + a * d - p, j + b, c]), (n, i, j, o), (a, b, c), "conv"),
    ((x[n, i * s + a * d - p, c], g[n, i, o]), (a, c, o), (n, i), "conv_backprop_filter"),
    ((g[n, exact_div(h + p - a * d, s), w - b, o], f[a, b, c, o]), (n, h, w, c), (a, b, o), "conv_backprop_input"),
    # a flipped window (a true convolution, not a correlation): no kernel computes it as is
    ((x[n, i - a, c], f[a, c, o]), (n, i, o), (a, c), None),
    # the result's axes in another order than the kernel's
    ((x[n, i + a, c], f[a, c, o]), (n, o, i), (a, c), None),
    # a depthwise filter: the channel is not summed
    ((x[n, i + a, j + b, c], f[a, b, c, o]), (n, i, j, c, o), (a, b), None),
    # the window index read by the filter is not the one in the map
    ((x[n, i + a, c], f[b, c, o]), (n, i, o), (b, c), None),
]


@pytest.mark.parametrize("entries, out, summed, expected", CASES)
def test_recognised_by_what_it_computes(entries, out, summed, expected):
    found = find_convolution(entries, out, summed, is_index)
    assert (found.kernel.name if found else None) == expected


def test_geometry_of_a_windowed_read():
    found = find_convolution((x[n, i * s + a * d - p, j + b, c], f[a, b, c, o]), (n, i, j, o), (a, b, c), is_index)
    assert (found.strides, found.dilations, found.pads) == ((s, 1), (d, 1), (p, 0))


@pytest.fixture(scope="module")
def conv2d(tmp_path_factory):
    """Conv2D's generated numpy and TensorFlow modules: (numpy module, TF module, TF source)."""
    decl = next(op for op in load_op_file(OPS / "conv.py").ops if op.name == "Conv2D")
    code = compile_op(decl)
    folder = tmp_path_factory.mktemp("conv_kernels")
    modules = []
    for target, suffix in (("numpy", "numpy"), ("tensorflow", "tf")):
        path = folder / f"conv2d_{suffix}.py"
        path.write_text(render_module(target, "ops/conv.py", [code]))
        modules.append(import_path(path, f"_symgrad_conv_kernels_{suffix}"))
    return modules[0], modules[1], (folder / "conv2d_tf.py").read_text()


def test_gradients_call_the_kernels(conv2d):
    _, _, source = conv2d
    body = source[source.index("def conv2d_vjp") : source.index("def conv2d_grad")]
    assert "_conv_backprop_input(" in body and "_conv_backprop_filter(" in body
    assert "_gather" not in body and "einsum" not in body
    assert "tf.raw_ops.Conv2DBackpropInput(" in source and "tf.raw_ops.Conv2DBackpropFilter(" in source


VARIANTS = list(
    itertools.product(("VALID", "SAME", "EXPLICIT"), ((1, 1, 1, 1), (1, 2, 3, 1)), ((2, 9, 11, 3), (1, 7, 8, 2)))
)


@pytest.mark.parametrize("padding, strides, shape", VARIANTS)
def test_against_tensorflows_registered_gradient(tf, conv2d, padding, strides, shape):
    numpy_module, tf_module, _ = conv2d
    rng = np.random.default_rng(sum(shape))
    attrs = {"padding": padding, "strides": strides, "dilations": (1, 1, 1, 1)}
    attrs["explicit_paddings"] = (0, 0, 1, 2, 2, 0, 0, 0) if padding == "EXPLICIT" else ()
    x_value, f_value = rng.normal(size=shape), rng.normal(size=(3, 2, shape[-1], 4))
    x_t, f_t = tf.constant(x_value), tf.constant(f_value)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch([x_t, f_t])
        y = tf.raw_ops.Conv2D(input=x_t, filter=f_t, **attrs)  # TensorFlow's registered gradient
    upstream = tf.constant(rng.normal(size=y.shape))
    expected = tape.gradient(y, [x_t, f_t], output_gradients=upstream)

    @tf.function  # a graph, where the sizes are known while tracing
    def in_graph(*args):
        return tf_module.conv2d_vjp(*args, **attrs)

    results = {
        "numpy": numpy_module.conv2d_grad(upstream.numpy(), x_value, f_value, output=y.numpy(), **attrs),
        "eager": tf_module.conv2d_vjp(upstream, x_t, f_t, y, **attrs),
        "graph": in_graph(upstream, x_t, f_t, y),
    }
    for where, got in results.items():
        for name, actual, reference in zip(("input", "filter"), got, expected):
            np.testing.assert_allclose(np.asarray(actual), reference.numpy(), rtol=1e-10, atol=1e-10, err_msg=f"{where} {name}")
