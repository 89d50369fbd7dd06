"""What every generated module may call: vectorised numpy/scipy.special, public TensorFlow."""

from __future__ import annotations

import ast
import re

import numpy as np
import pytest

from conftest import OPS, ROOT, import_altered, import_path

STEMS = sorted(p.stem for p in OPS.glob("*.py") if not p.name.startswith("_"))


def _code(text: str) -> ast.Module:
    """A generated module's syntax tree but its import of the runtime module (`if __package__:
    ... else: ...`, the standard library's `importlib.util` and `sys` finding the file beside
    it: `templates/runtime_import.j2`, whose names tests/test_runtime.py checks)."""
    tree = ast.parse(text)
    tree.body = [n for n in tree.body if not _is_runtime_import(n)]
    return tree


def _is_runtime_import(node) -> bool:
    return isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "__package__"


def test_the_runtime_import_is_the_only_code_left_out():
    text = (ROOT / "generated" / "matmul_numpy.py").read_text()
    left_out = [n for n in ast.parse(text).body if _is_runtime_import(n)]
    assert len(left_out) == 1 and len(_code(text).body) == len(ast.parse(text).body) - 1
    assert _imports_in(left_out[0]) == {"importlib.util", "sys"}


def _modules_called(text: str) -> set[str]:
    """The module prefixes of every dotted call target, e.g. {"np", "tf.math"}."""
    prefixes = set()
    for node in ast.walk(_code(text)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            prefix = ast.unparse(node.func.value)
            if "(" not in prefix:  # a method of a call's result (`np.asarray(x).reshape`): not a module
                prefixes.add(prefix)
    return prefixes


def _numpy_ufunc(prefix: str) -> bool:
    return prefix.startswith("np.") and isinstance(getattr(np, prefix[3:], None), np.ufunc)


def _imports(text: str) -> set[str]:
    return _imports_in(_code(text))


def _imports_in(tree) -> set[str]:
    return {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}


@pytest.mark.parametrize("stem", STEMS)
def test_numpy_modules_are_vectorised(derived, stem):
    text = derived[1][f"{stem}_numpy.py"]
    # scipy.sparse: the scatter-add's one-hot matrix (never dense), in the `_scatter_add` helper
    assert _imports(text) <= {"numpy", "scipy.special", "scipy.sparse"}
    called = {p for p in _modules_called(text) if not p.isidentifier() or p in {"np", "math", "scipy"}}
    called = {p for p in called if not _numpy_ufunc(p)}  # `np.logaddexp.accumulate`: a ufunc's method
    assert called <= {"np", "scipy.special", "scipy.sparse"}, called
    assert "math." not in text.replace("np.", "")


@pytest.mark.parametrize("stem", STEMS)
def test_tensorflow_modules_use_the_public_api(derived, stem):
    text = derived[1][f"{stem}_tf.py"]
    assert _imports(text) == {"tensorflow"}
    tf_calls = {p for p in _modules_called(text) if p == "tf" or p.startswith("tf.")}
    assert tf_calls <= {"tf", "tf.math", "tf.math.special", "tf.linalg", "tf.nest", "tf.raw_ops"}, tf_calls
    for private in ("tensorflow.python", "gen_", "_gradient_registry", "math_ops"):
        assert private not in text


def _op_types(tf, fn, *specs):
    return {op.type for op in tf.function(fn, autograph=False).get_concrete_function(*specs).graph.get_operations()}


def test_tf_wrapper_forward_is_tensorflows_kernel_where_it_has_one(tf, derived, tmp_path):
    """The `tf.custom_gradient` wrapper's forward is `tf.raw_ops.<OpType>` where TensorFlow runs
    it on the inputs, the declared formula elsewhere; the derived vjp is the backward in both."""
    counted = (  # the module's max_pool_vjp counts its calls before the wrapper is made of it
        "\nCALLS = []\n_derived_vjp = max_pool_vjp\n"
        "max_pool_vjp = lambda *args, **kwargs: CALLS.append(1) or _derived_vjp(*args, **kwargs)\n"
        "_max_pool_custom_gradient = "
    )
    conv = import_altered(derived[0] / "conv_tf.py", "\n_max_pool_custom_gradient = ", counted, tmp_path)
    calls = conv.CALLS
    pool = dict(padding="VALID", ksize=(1, 2, 2, 1), strides=(1, 2, 2, 1))
    x = tf.TensorSpec([None, 8, 8, 3], tf.float32)
    types = _op_types(tf, lambda x: conv.max_pool(x, **pool), x)
    assert "MaxPool" in types and "GatherV2" not in types, types

    def with_gradient(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = conv.max_pool(x, **pool)
        return tape.gradient(y, x)

    types = _op_types(tf, with_gradient, x)
    assert calls and "MaxPoolGrad" in types, types  # the derived vjp, lowered to the pooling kernel
    # TensorFlow registers no float64 kernel of AvgPool3D: the formula
    pool3d = dict(padding="VALID", ksize=(1, 2, 2, 2, 1), strides=(1, 2, 2, 2, 1))
    for dtype, kernel in ((tf.float32, True), (tf.float64, False)):
        spec = tf.TensorSpec([1, 4, 4, 4, 2], dtype)
        assert ("AvgPool3D" in _op_types(tf, lambda v: conv.avg_pool3d(v, **pool3d), spec)) == kernel
    # DepthwiseConv2dNative's CPU kernel refuses unequal strides, which the declaration covers
    attrs = dict(padding="VALID", strides=(1, 2, 3, 1), dilations=(1, 1, 1, 1), explicit_paddings=())
    value = tf.random.normal([2, 9, 11, 3], seed=1)
    filter = tf.random.normal([3, 2, 3, 2], seed=2)
    expected = tf.nn.depthwise_conv2d(value, filter, (1, 2, 2, 1), "VALID")  # at equal strides
    got = conv.depthwise_conv2d_native(value, filter, **dict(attrs, strides=(1, 2, 2, 1)))
    tf.debugging.assert_near(got, expected, atol=1e-5)
    assert conv.depthwise_conv2d_native(value, filter, **attrs).shape == (2, 4, 4, 6)
    # a composed op has no TensorFlow op type: the formula
    composed = import_path(derived[0] / "composed_tf.py")
    tf_kernel = composed._custom_gradient.__globals__["_tf_kernel"]  # of its runtime module
    assert tf_kernel("LayerNorm", 1, {"x": tf.ones([2, 3])}, {}) is None


def test_softmax_cross_entropy_gradient_reads_its_backprop_output(tf, tf_module):
    """The features' gradient is written with the op's `backprop` output (`softmax - labels`,
    as TensorFlow's hand-written one is), not with `exp(features)` again: finite where that
    overflows (float32 logits of 89), as TensorFlow's."""
    nn = tf_module("nn")
    features = tf.constant([[89.0, 0.0, -1.0], [0.5, -0.25, 2.0]], tf.float32)
    labels = tf.constant([[0.0, 1.0, 0.0], [0.2, 0.3, 0.5]], tf.float32)
    grads = []
    for loss_of in (lambda: nn.softmax_cross_entropy_with_logits(features, labels)[0],
                    lambda: tf.nn.softmax_cross_entropy_with_logits(labels=labels, logits=features)):
        with tf.GradientTape() as tape:
            tape.watch(features)
            loss = loss_of()
        grads.append(tape.gradient(loss, features).numpy())
    assert np.isfinite(grads[0]).all(), grads[0]
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(grads[0][0], [1.0, -1.0, 0.0], atol=1e-6)


def _function_lines(text: str, name: str) -> int:
    node = next(n for n in ast.walk(ast.parse(text)) if isinstance(n, ast.FunctionDef) and n.name == name)
    return node.end_lineno - node.lineno + 1


def test_a_sum_elementwise_over_one_entry_stays_one_factor(derived):
    """GELU of x + bias: its derivative's `1 + tanh(u)` and `x + bias` are not multiplied out
    into monomials, each repeating tanh(u) (the second order was 388 lines, the first order
    called tanh 10 times), and what the statements repeat is computed once: tanh(u) once,
    read by grad_x and by the summand of grad_bias, in every target (in PyTorch's, inside its
    own GELU kernel, `gelu_backward`, called once: `lowering/pointwise_kernels.py`)."""
    _, files = derived
    text = files["composed_numpy.py"]
    assert _function_lines(text, "bias_gelu_grad_grad") <= 80
    for module, name, tanh in [("numpy", "bias_gelu_grad", "np.tanh("), ("tf", "bias_gelu_vjp", "tf.math.tanh("),
                               ("torch", "bias_gelu_vjp", "torch.ops.aten.gelu_backward(")]:
        code = files[f"composed_{module}.py"].split(f"def {name}(", 1)[1].split("\ndef ", 1)[0]
        body = code.split('"""', 2)[-1]
        assert body.count(tanh) == 1 and (module != "torch" or "torch.tanh(" not in body), code


def test_no_temporary_in_generated_code_copies_another_or_goes_unread():
    """`t4 = t3` (a copy, of an array or of a size) reads t3 where t4 was read; a temporary
    nothing reads is not computed. Over every function of generated/."""
    found = []
    for path in sorted((ROOT / "generated").glob("*.py")):
        for function in ast.walk(ast.parse(path.read_text())):
            if not isinstance(function, ast.FunctionDef):
                continue
            read = {n.id for n in ast.walk(function) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
            for node in ast.walk(function):
                if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
                    continue
                target = node.targets[0].id
                if re.fullmatch(r"t\d+", target) and (isinstance(node.value, ast.Name) or target not in read):
                    found.append((path.name, function.name, ast.unparse(node)))
    assert not found
