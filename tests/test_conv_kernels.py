"""Convolution kernels: what the recogniser matches and what it leaves to gathers, and the
generated Conv2D and DepthwiseConv2dNative gradients that call the kernels against
TensorFlow's registered gradient."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import sympy as sp

from symgrad.conv_kernels import KERNELS, find_convolution
from symgrad.functions import exact_div
from symgrad.generate import compile_op
from symgrad.load import load_op_file
from symgrad.lowering.symbols import is_index
from symgrad.render import render_module
from symgrad.runtime_module import runtime_files, runtime_text

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
    # a depthwise filter: the channel is not summed (no plain kernel: see PLAIN_ONLY)
    ((x[n, i + a, j + b, c], f[a, b, c, o]), (n, i, j, c, o), (a, b), "depthwise_conv"),
    ((x[n, i * s + a * d - p, c], g[n, i, c, o]), (a, c, o), (n, i), "depthwise_conv_backprop_filter"),
    ((g[n, exact_div(h + p - a * d, s), w - b, c, o], f[a, b, c, o]), (n, h, w, c), (a, b, o),
     "depthwise_conv_backprop_input"),
    ((f[a, b, c, o], g[n, exact_div(h + p - a * d, s), w - b, c, o]), (n, h, w, c), (a, b, o),
     "depthwise_conv_backprop_input"),
    # depthwise, but the channel pair in the other order, or the channel summed too
    ((x[n, i + a, c], f[a, c, o]), (n, i, o, c), (a,), None),
    ((x[n, i + a, c], g[n, i, c, o]), (a, o), (n, i, c), None),
    # the upstream's channel is not the filter's
    ((g[n, h - a, o, c], f[a, c, o]), (n, h, c), (a, o), None),
    # the window index read by the filter is not the one in the map
    ((x[n, i + a, c], f[b, c, o]), (n, i, o), (b, c), None),
]


@pytest.mark.parametrize("entries, out, summed, expected", CASES)
def test_recognised_by_what_it_computes(entries, out, summed, expected):
    found = find_convolution(entries, out, summed, is_index)
    assert (found.kernel.name if found else None) == expected


@pytest.mark.parametrize("entries, out, summed, expected", CASES)
def test_plain_kernels_only_plain_convolutions(entries, out, summed, expected):
    """The plain kernels' table alone matches no depthwise formula (the channel not summed)."""
    found = find_convolution(entries, out, summed, is_index, kernels=KERNELS)
    plain = None if expected is None or expected.startswith("depthwise_") else expected
    assert (found.kernel.name if found else None) == plain


def test_geometry_of_a_windowed_read():
    found = find_convolution((x[n, i * s + a * d - p, j + b, c], f[a, b, c, o]), (n, i, j, o), (a, b, c), is_index)
    assert (found.strides, found.dilations, found.pads) == ((s, 1), (d, 1), (p, 0))


def generated_modules(folder, op_name, stem, file="conv.py"):
    """An op of ops/conv.py's (or `file`'s) generated numpy and TensorFlow modules: (numpy, TF,
    TF source)."""
    decl = next(op for op in load_op_file(OPS / file).ops if op.name == op_name)
    code = compile_op(decl)
    modules = []
    for name, text in runtime_files(("numpy", "tensorflow")).items():  # the helpers they import
        (folder / name).write_text(text)
    for target, suffix in (("numpy", "numpy"), ("tensorflow", "tf")):
        path = folder / f"{stem}_{suffix}.py"
        path.write_text(render_module(target, f"ops/{file}", [code]))
        modules.append(import_path(path, f"_symgrad_conv_kernels_{stem}_{suffix}"))
    return modules[0], modules[1], (folder / f"{stem}_tf.py").read_text()


@pytest.fixture(scope="module")
def conv2d(tmp_path_factory):
    """Conv2D's generated numpy and TensorFlow modules: (numpy module, TF module, TF source)."""
    return generated_modules(tmp_path_factory.mktemp("conv_kernels"), "Conv2D", "conv2d")


@pytest.fixture(scope="module")
def depthwise(tmp_path_factory):
    """DepthwiseConv2dNative's generated modules: (numpy module, TF module, TF source)."""
    return generated_modules(tmp_path_factory.mktemp("depthwise_kernels"), "DepthwiseConv2dNative", "depthwise")


def test_gradients_call_the_kernels(conv2d):
    _, _, source = conv2d
    body = source[source.index("def conv2d_vjp") : source.index("def conv2d_grad")]
    assert "_conv_backprop_input(" in body and "_conv_backprop_filter(" in body
    assert "_gather" not in body and "einsum" not in body
    runtime = runtime_text("tensorflow")  # what the helpers called are
    assert "tf.raw_ops.Conv2DBackpropInput(" in runtime and "tf.raw_ops.Conv2DBackpropFilter(" in runtime


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


def test_depthwise_calls_the_depthwise_kernels(depthwise):
    _, _, source = depthwise
    vjp = source[source.index("def depthwise_conv2d_native_vjp") : source.index("def depthwise_conv2d_native_grad")]
    assert "_depthwise_conv_backprop_input(" in vjp and "_depthwise_conv_backprop_filter(" in vjp
    assert "_gather" not in vjp and "einsum" not in vjp
    forward = source[source.index("def depthwise_conv2d_native(") :]
    assert "_depthwise_conv(" in forward and "_gather" not in forward and "einsum" not in forward
    for kernel in ("DepthwiseConv2dNative", "DepthwiseConv2dNativeBackpropInput", "DepthwiseConv2dNativeBackpropFilter"):
        assert f"tf.raw_ops.{kernel}(" in runtime_text("tensorflow")


def _block_diagonal(tf, f):
    """A depthwise filter (KH, KW, C, M) as the Conv2D filter (KH, KW, C, C*M) it equals."""
    kh, kw, channels, m = f.shape
    eye = tf.eye(channels, dtype=f.dtype)[None, None, :, :, None]
    return tf.reshape(f[:, :, :, None, :] * eye, (kh, kw, channels, channels * m))


def _depthwise_reference(tf, x, f, attrs):
    """DepthwiseConv2dNative, recorded on a tape, as TensorFlow computes it where its CPU
    kernel takes the attributes; else Conv2D with a block-diagonal filter (unequal strides)
    or the dilated `tf.nn.depthwise_conv2d` at stride 1, subsampled (SAME: stride 1 only)."""
    strides, dilations = attrs["strides"], attrs["dilations"]
    if dilations == (1, 1, 1, 1):
        if strides[1] == strides[2]:
            return tf.raw_ops.DepthwiseConv2dNative(input=x, filter=f, **attrs)
        return tf.raw_ops.Conv2D(input=x, filter=_block_diagonal(tf, f), **attrs)
    padding = attrs["padding"]
    if padding == "EXPLICIT":
        pads = attrs["explicit_paddings"]
        x, padding = tf.pad(x, [pads[n : n + 2] for n in range(0, 8, 2)]), "VALID"
    y = tf.nn.depthwise_conv2d(x, f, (1, 1, 1, 1), padding, dilations=dilations[1:3])
    return y[:, :: strides[1], :: strides[2], :]


DEPTHWISE_VARIANTS = [
    (padding, strides, dilations, shape)
    for padding, strides, shape in itertools.product(
        ("VALID", "SAME", "EXPLICIT"), ((1, 1, 1, 1), (1, 2, 2, 1)), ((2, 9, 11, 3), (1, 7, 8, 2))
    )
    for dilations in ((1, 1, 1, 1),)
] + [
    # what the CPU's depthwise kernels do not take: the helpers' fallbacks
    ("VALID", (1, 2, 3, 1), (1, 1, 1, 1), (2, 9, 11, 3)),
    ("EXPLICIT", (1, 3, 1, 1), (1, 1, 1, 1), (1, 10, 8, 2)),
    ("VALID", (1, 1, 1, 1), (1, 2, 3, 1), (2, 9, 11, 3)),
    ("SAME", (1, 1, 1, 1), (1, 2, 2, 1), (1, 7, 8, 2)),
    ("EXPLICIT", (1, 2, 1, 1), (1, 1, 2, 1), (2, 9, 11, 3)),
]


@pytest.mark.parametrize("padding, strides, dilations, shape", DEPTHWISE_VARIANTS)
def test_depthwise_against_tensorflows_registered_gradient(tf, depthwise, padding, strides, dilations, shape):
    """Against DepthwiseConv2dNative's registered gradient where TensorFlow's CPU kernel takes
    the attributes, else against the registered gradients of what computes the same."""
    numpy_module, tf_module, _ = depthwise
    rng = np.random.default_rng(sum(shape) + sum(strides) + sum(dilations))
    attrs = {"padding": padding, "strides": strides, "dilations": dilations}
    attrs["explicit_paddings"] = (0, 0, 1, 2, 2, 0, 0, 0) if padding == "EXPLICIT" else ()
    x_value, f_value = rng.normal(size=shape), rng.normal(size=(3, 2, shape[-1], 2))
    x_t, f_t = tf.constant(x_value), tf.constant(f_value)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch([x_t, f_t])
        y = _depthwise_reference(tf, x_t, f_t, attrs)
    upstream = tf.constant(rng.normal(size=y.shape))
    expected = tape.gradient(y, [x_t, f_t], output_gradients=upstream)

    @tf.function  # a graph, where the sizes are known while tracing
    def in_graph(*args):
        return tf_module.depthwise_conv2d_native_vjp(*args, **attrs)

    forward = {
        "numpy": numpy_module.depthwise_conv2d_native(x_value, f_value, **attrs),
        "tensorflow": tf_module.depthwise_conv2d_native(x_t, f_t, **attrs),
    }
    for where, got in forward.items():
        np.testing.assert_allclose(np.asarray(got), y.numpy(), rtol=1e-10, atol=1e-10, err_msg=f"{where} forward")
    results = {
        "numpy": numpy_module.depthwise_conv2d_native_grad(upstream.numpy(), x_value, f_value, output=y.numpy(), **attrs),
        "eager": tf_module.depthwise_conv2d_native_vjp(upstream, x_t, f_t, y, **attrs),
        "graph": in_graph(upstream, x_t, f_t, y),
    }
    for where, got in results.items():
        for name, actual, reference in zip(("input", "filter"), got, expected):
            np.testing.assert_allclose(np.asarray(actual), reference.numpy(), rtol=1e-10, atol=1e-10, err_msg=f"{where} {name}")


# TensorFlow's backprop kernels declared as the sums they compute (ops/conv_grads.py): the
# input's, a product placed by a Kronecker delta at the position its window read
BACKPROP_OPS = {
    "Conv2DBackpropInput": ("conv2d_backprop_input", "_conv_backprop_input(", ("_conv_backprop_filter(", "_conv(")),
    "Conv2DBackpropFilter": ("conv2d_backprop_filter", "_conv_backprop_filter(", ("_conv_backprop_input(", "_conv(")),
    "DepthwiseConv2dNativeBackpropInput": (
        "depthwise_conv2d_native_backprop_input",
        "_depthwise_conv_backprop_input(",
        ("_depthwise_conv_backprop_filter(", "_depthwise_conv("),
    ),
    "DepthwiseConv2dNativeBackpropFilter": (
        "depthwise_conv2d_native_backprop_filter",
        "_depthwise_conv_backprop_filter(",
        ("_depthwise_conv_backprop_input(", "_depthwise_conv("),
    ),
}


@pytest.mark.parametrize("op_name", sorted(BACKPROP_OPS))
def test_backprop_ops_are_kernels_with_kernel_gradients(tmp_path, op_name):
    """A backprop op's forward is its kernel, and its gradients are the other two kernels, as
    TensorFlow's hand-written gradients of these ops: no window is gathered or scattered."""
    stem, forward_kernel, gradient_kernels = BACKPROP_OPS[op_name]
    numpy_module, _, _ = generated_modules(tmp_path, op_name, stem, "conv_grads.py")
    source = (tmp_path / f"{stem}_numpy.py").read_text()
    forward = source[source.index(f"def {stem}(") : source.index(f"def {stem}_grad(")]
    gradient = source[source.index(f"def {stem}_grad(") :]
    gradient = gradient[: gradient.index(f"def {stem}_grad_grad(")]
    assert forward_kernel in forward
    assert all(kernel in gradient for kernel in gradient_kernels)
    for body in (forward, gradient):
        assert "_gather(" not in body and "_scatter_add(" not in body and "einsum" not in body


def test_conv2d_backprop_input_against_tensorflow(tf, tmp_path):
    """Conv2DBackpropInput's forward against TensorFlow's kernel: the declared sum is the op."""
    numpy_module, _, _ = generated_modules(tmp_path, "Conv2DBackpropInput", "conv2d_backprop_input", "conv_grads.py")
    rng = np.random.default_rng(7)
    for padding, strides in itertools.product(("VALID", "SAME"), ((1, 1, 1, 1), (1, 2, 3, 1))):
        sizes = (2, 9, 11, 3)
        f = rng.normal(size=(3, 2, 3, 4))
        out = tf.raw_ops.Conv2D(input=tf.zeros(sizes, tf.float64), filter=f, strides=strides, padding=padding)
        g = rng.normal(size=out.shape)
        expected = tf.raw_ops.Conv2DBackpropInput(input_sizes=sizes, filter=f, out_backprop=g, strides=strides, padding=padding)
        got = numpy_module.conv2d_backprop_input(f, g, input_sizes=sizes, strides=strides, padding=padding)
        np.testing.assert_allclose(got, expected.numpy(), rtol=1e-10, atol=1e-10, err_msg=f"{padding} {strides}")
