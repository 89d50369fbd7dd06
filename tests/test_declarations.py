"""Declarations beyond the op library: several outputs, ops TensorFlow has no gradient for."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import ROOT, import_path

FIXTURES = ROOT / "tests" / "fixtures"


@pytest.fixture(scope="module")
def multi_output(tmp_path_factory):
    from symgrad.generate import generate

    out = tmp_path_factory.mktemp("multi")
    for name, text in generate([FIXTURES / "multi_output.py"], ("numpy", "tensorflow")).items():
        (out / name).write_text(text)
    return out


def test_two_output_elementwise_sums_both_upstreams(multi_output):
    module = import_path(multi_output / "multi_output_numpy.py")
    rng = np.random.default_rng(0)
    x, g_s, g_c = rng.standard_normal((3, 4))
    s, c = module.sin_cos(x)
    np.testing.assert_allclose((s, c), (np.sin(x), np.cos(x)))
    (grad_x,) = module.sin_cos_grad(g_s, g_c, x)
    np.testing.assert_allclose(grad_x, g_s * np.cos(x) - g_c * np.sin(x), rtol=1e-13)


def test_two_output_index_op_sums_both_upstreams(multi_output):
    module = import_path(multi_output / "multi_output_numpy.py")
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((2, 3)), rng.standard_normal((3, 4))
    product, transposed = module.product_and_transpose(a, b)
    np.testing.assert_allclose(transposed, (a @ b).T)
    g_p, g_t = rng.standard_normal((2, 4)), rng.standard_normal((4, 2))
    grad_a, grad_b = module.product_and_transpose_grad(g_p, g_t, a, b)
    np.testing.assert_allclose(grad_a, (g_p + g_t.T) @ b.T, rtol=1e-13)
    np.testing.assert_allclose(grad_b, a.T @ (g_p + g_t.T), rtol=1e-13)


def test_two_output_tf_custom_gradient_matches_tf_autodiff(tf, multi_output):
    module = import_path(multi_output / "multi_output_tf.py")
    rng = np.random.default_rng(2)
    a, b = tf.constant(rng.standard_normal((2, 3))), tf.constant(rng.standard_normal((3, 4)))
    g_p, g_t = tf.constant(rng.standard_normal((2, 4))), tf.constant(rng.standard_normal((4, 2)))

    def gradient(fn):
        with tf.GradientTape() as tape:
            tape.watch([a, b])
            product, transposed = fn(a, b)
        return tape.gradient([product, transposed], [a, b], output_gradients=[g_p, g_t])

    ours = gradient(module.product_and_transpose)
    reference = gradient(lambda a, b: (a @ b, tf.transpose(a @ b)))
    for got, expected in zip(ours, reference):
        np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-13)


# --- an op TensorFlow has no gradient for: registered under its own type --------------------


@pytest.fixture(scope="module")
def tf_gaps(tf, tf_module):
    return tf_module("tf_gaps")


def _softsign_grad_inputs():
    rng = np.random.default_rng(4)
    return rng.standard_normal((3, 4)), rng.standard_normal((3, 4)) * 2, rng.standard_normal((3, 4))


def test_registered_under_the_op_type_when_tensorflow_has_none(tf_gaps):
    assert tf_gaps.REGISTERED["SoftsignGrad"] == ("SoftsignGrad", "SymgradSoftsignGrad")


@pytest.mark.parametrize("mode", ["eager", "tf.function"])
def test_raw_op_uses_the_registered_gradient(tf, tf_gaps, mode):
    gradients, features, upstream = (tf.constant(v) for v in _softsign_grad_inputs())

    def tape_gradients(fn):
        with tf.GradientTape() as tape:
            tape.watch([gradients, features])
            out = fn(gradients, features)
        return tape.gradient(out, [gradients, features], output_gradients=upstream)

    def raw(g, f):
        return tf.raw_ops.SoftsignGrad(gradients=g, features=f)

    def composite(g, f):  # the same function from ops TensorFlow differentiates itself
        return g / (1 + tf.abs(f)) ** 2

    run = tf.function(tape_gradients) if mode == "tf.function" else tape_gradients
    for got, expected in zip(run(raw), run(composite)):
        np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-13)


def test_softsign_grad_numpy_matches_finite_differences(numpy_module):
    module = numpy_module("tf_gaps")
    gradients, features, upstream = _softsign_grad_inputs()
    got = module.softsign_grad_grad(upstream, gradients, features)
    step = 1e-6
    for n, x in enumerate((gradients, features)):
        numeric = np.zeros_like(x)
        for idx in np.ndindex(x.shape):
            args = [gradients.copy(), features.copy()]
            args[n][idx] += step
            plus = np.sum(upstream * module.softsign_grad(*args))
            args[n][idx] -= 2 * step
            minus = np.sum(upstream * module.softsign_grad(*args))
            numeric[idx] = (plus - minus) / (2 * step)
        np.testing.assert_allclose(got[n], numeric, rtol=1e-6, atol=1e-9)


def test_a_kink_plus_abs_derives(tmp_path):
    """SymPy trips ("Invalid NaN comparison") rewriting relu(x) + |x| with its output: the
    reuse pass then keeps the plain gradient instead of stopping the derivation."""
    from symgrad.generate import generate

    (tmp_path / "hinge.py").write_text(
        "import sympy as sp\nfrom symgrad import elementwise\n\n@elementwise('Hinge')\n"
        "def hinge(x):\n    return sp.Piecewise((x, x > 0), (0, True)) + sp.Abs(x)\n"
    )
    (tmp_path / "gen").mkdir()
    for name, text in generate([tmp_path / "hinge.py"], ("numpy",)).items():
        (tmp_path / "gen" / name).write_text(text)
    module = import_path(tmp_path / "gen" / "hinge_numpy.py")
    (grad,) = module.hinge_grad(np.array([2.0, 3.0, 5.0]), np.array([-1.5, 0.0, 2.0]))
    np.testing.assert_array_equal(grad, [-2.0, 0.0, 10.0])


def test_gelu_tanh_form_derives_and_is_right(tmp_path):
    """SymPy's solve ran for minutes trying to invert this forward for output reuse; large
    forwards are no longer inverted. Checked against finite differences."""
    from symgrad.generate import generate

    (tmp_path / "gelu.py").write_text(
        "import sympy as sp\nfrom symgrad import elementwise\n\n@elementwise('GeluTanh')\n"
        "def gelu_tanh(x):\n"
        "    return x * (1 + sp.tanh(sp.sqrt(2 / sp.pi) * (x + sp.Rational(44715, 10**6) * x**3))) / 2\n"
    )
    (tmp_path / "gen").mkdir()
    for name, text in generate([tmp_path / "gelu.py"], ("numpy",)).items():
        (tmp_path / "gen" / name).write_text(text)
    module = import_path(tmp_path / "gen" / "gelu_numpy.py")
    x = np.linspace(-3, 3, 13)
    (grad,) = module.gelu_tanh_grad(np.ones_like(x), x)
    numeric = (module.gelu_tanh(x + 1e-6) - module.gelu_tanh(x - 1e-6)) / 2e-6
    np.testing.assert_allclose(grad, numeric, rtol=1e-7, atol=1e-9)


VALID_OPS = '''import sympy as sp
from symgrad import dims, indices, op, tensor

N = dims("N")[0]
i = indices("i")[0]


@op("Scaled", attrs={"a": (1, 2, 3), "b": (1, 2)}, valid=lambda a, b: b < a)
def scaled(a, b):
    x = tensor("x", (N,))
    return {"y": ((i,), a * x[i] / b)}
'''


def test_valid_keeps_the_combinations_it_accepts_and_the_rest_is_unsupported(tmp_path):
    from symgrad.generate import generate
    from symgrad.load import load_op_file

    (tmp_path / "valid_ops.py").write_text(VALID_OPS)
    (decl,) = load_op_file(tmp_path / "valid_ops.py").ops
    assert [dict(v) for v in decl.variants()] == [{"a": 2, "b": 1}, {"a": 3, "b": 1}, {"a": 3, "b": 2}]
    for name, text in generate([tmp_path / "valid_ops.py"], ("numpy",)).items():
        (tmp_path / name).write_text(text)
    module = import_path(tmp_path / "valid_ops_numpy.py")
    np.testing.assert_allclose(module.scaled(np.ones(2), a=3, b=2), [1.5, 1.5])
    with pytest.raises(ValueError, match="unsupported attributes a=1, b=1"):
        module.scaled(np.ones(2), a=1, b=1)


def test_valid_accepting_nothing_is_a_declaration_error(tmp_path):
    from symgrad.errors import DeclarationError
    from symgrad.load import load_op_file

    (tmp_path / "none_ops.py").write_text(VALID_OPS.replace("b < a", "b > 5"))
    with pytest.raises(DeclarationError, match=r"Scaled .*valid\(\) accepts none"):
        load_op_file(tmp_path / "none_ops.py")


def test_a_stage_named_like_an_output_is_an_error_naming_the_op(tmp_path):
    """A layer norm that also returns its mean stage under the stage's name would generate a
    signature with `mean=None` twice: derive refuses it, naming the op and its line."""
    from symgrad.generate import SymgradErrors, generate

    (tmp_path / "stats_ops.py").write_text('''import sympy as sp
from symgrad import dims, indices, op, stage, tensor

(N,) = dims("N")
i, k = indices("i k")


@op("NormStats")
def norm_stats():
    x = tensor("x", (..., N))
    mean = stage("mean", (...,), sp.Sum(x[..., k], (k, 0, N - 1)) / N)
    return {"y": ((..., i), (x[..., i] - mean[...]) ** 2), "mean": ((...,), mean[...])}
''')
    with pytest.raises(SymgradErrors, match=r"NormStats \(.*stats_ops.py:8\): names \['mean'\] are used for more than one"):
        generate([tmp_path / "stats_ops.py"], ("numpy",))
