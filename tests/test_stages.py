"""Composed ops as a user declares them: stages (declared and automatic), reverse mode over
them, bound indices renamed apart, the no-Jacobian bound and `derive`'s own verification."""

from __future__ import annotations

import importlib.util
import textwrap
from pathlib import Path

import numpy as np
import pytest

from symgrad.errors import DeclarationError, VerificationError
from symgrad.generate import SymgradErrors, generate
from symgrad.load import load_op_file
from symgrad.runtime_module import import_generated
from symgrad.verify.selfcheck import verify_generated
from conftest import ROOT
from test_cli import snapshot, symgrad

HEADER = (
    "import sympy as sp\n"
    "from symgrad import dims, indices, maximum, op, stage, stop_gradient, tensor\n\n"
    "M, N, D, H, O = dims('M N D H O')\n"
    "i, j, k, l, d, h = indices('i j k l d h')\n"
)

# the declarations that broke the single-stage engine (issue 11), written the natural way
NATURAL = """
@op("LayerNormNatural")
def layer_norm_natural():
    x = tensor("x", (..., N))
    mean = sp.Sum(x[..., k], (k, 0, N - 1)) / N
    variance = sp.Sum((x[..., k] - mean) ** 2, (k, 0, N - 1)) / N
    return {"y": ((..., i), (x[..., i] - mean) / sp.sqrt(variance + sp.Rational(1, 10)))}


@op("LayerNormShadowed")
def layer_norm_shadowed():
    # the mean's k is bound again inside the variance's Sum over k: two indices
    x = tensor("x", (..., N))
    variance = sp.Sum((x[..., k] - sp.Sum(x[..., k], (k, 0, N - 1)) / N) ** 2, (k, 0, N - 1)) / N
    return {"y": ((..., i), x[..., i] / sp.sqrt(variance + 1))}


@op("LayerNormMomentsNatural")
def layer_norm_moments_natural():
    x = tensor("x", (..., N))
    mean = sp.Sum(x[..., k], (k, 0, N - 1)) / N
    variance = sp.Sum(x[..., k] ** 2, (k, 0, N - 1)) / N - mean**2
    return {"y": ((..., i), (x[..., i] - mean) / sp.sqrt(variance + 1))}


@op("BatchNormNatural")
def batch_norm_natural():
    # statistics over two axes: the mean's gradient through the variance sums x - mean over
    # both, identically zero
    x = tensor("x", (M, N, D))
    over_both = lambda f: sp.Sum(f, (i, 0, M - 1), (j, 0, N - 1))
    mean = stage("mean", (d,), over_both(x[i, j, d]) / (M * N))
    variance = stage("variance", (d,), over_both((x[i, j, d] - mean[d]) ** 2) / (M * N))
    return {"y": ((i, j, d), (x[i, j, d] - mean[d]) / sp.sqrt(variance[d] + 1))}


@op("AttentionScores")
def attention_scores():
    q = tensor("q", (M, D))
    kk = tensor("k", (N, D))
    s = lambda a, b: sp.Sum(q[a, d] * kk[b, d], (d, 0, D - 1)) / sp.sqrt(D)
    m = stop_gradient(maximum(s(i, l), (l, 0, N - 1)))
    return {"p": ((i, j), sp.exp(s(i, j) - m) / sp.Sum(sp.exp(s(i, l) - m), (l, 0, N - 1)))}


@op("AttentionNatural")
def attention_natural():
    # softmax(q k.T) v with nothing staged: the weights of the sum over j are a stage
    q = tensor("q", (M, D))
    kk = tensor("k", (N, D))
    v = tensor("v", (N, H))
    s = lambda a, b: sp.Sum(q[a, d] * kk[b, d], (d, 0, D - 1))
    m = stop_gradient(maximum(s(i, l), (l, 0, N - 1)))
    weights = sp.exp(s(i, j) - m) / sp.Sum(sp.exp(s(i, l) - m), (l, 0, N - 1))
    return {"y": ((i, h), sp.Sum(weights * v[j, h], (j, 0, N - 1)))}


@op("TanhMlp")
def tanh_mlp():
    x = tensor("x", (M, D))
    w1 = tensor("w1", (D, H))
    w2 = tensor("w2", (H, O))
    return {"y": ((i, j), sp.Sum(sp.tanh(sp.Sum(x[i, d] * w1[d, h], (d, 0, D - 1))) * w2[h, j], (h, 0, H - 1)))}


@op("Bilinear")
def bilinear():
    x = tensor("x", (..., D))
    w = tensor("w", (D, H))
    z = tensor("z", (..., H))
    return {"y": ((...,), sp.Sum(x[..., d] * w[d, h] * z[..., h], (d, 0, D - 1), (h, 0, H - 1)))}


@op("TanhMlpStaged")
def tanh_mlp_staged():
    x = tensor("x", (M, D))
    w1 = tensor("w1", (D, H))
    w2 = tensor("w2", (H, O))
    hidden = stage("hidden", (i, h), sp.tanh(sp.Sum(x[i, d] * w1[d, h], (d, 0, D - 1))))
    return {"y": ((i, j), sp.Sum(hidden[i, h] * w2[h, j], (h, 0, H - 1)))}


# a reduction over every axis inside a function: a scalar stage (found by the random ops)
@op("ScaledByVariance")
def scaled_by_variance():
    x = tensor("x", (N,))
    z = tensor("z", (M,))
    variance = sp.Sum((z[j] - sp.Sum(z[k], (k, 0, M - 1)) / M) ** 2, (j, 0, M - 1)) / M
    return {"y": ((i,), x[i] / (1 + variance))}


@op("CenteredRatio")
def centered_ratio():
    x = tensor("x", (M, N))
    z = tensor("z", (M,))
    return {"y": ((i, j), x[i, j] / (1 + (z[i] - sp.Sum(z[l], (l, 0, M - 1)) / M) ** 2))}


@op("InverseSquaredSpread")
def inverse_squared_spread():
    z = tensor("z", (M,))
    spread = sp.Sum((z[j] - sp.Sum(z[k], (k, 0, M - 1)) / M) ** 2, (j, 0, M - 1))
    return {"y": ((), 1 / (1 + spread ** 2))}


# a Sum whose summand (or one of its terms) does not read its index: a count
@op("SummedTotal")
def summed_total():
    x = tensor("x", (N,))
    return {"y": ((), sp.Sum(sp.Sum(x[l], (l, 0, N - 1)), (k, 0, N - 1)))}


@op("RowSumPlusBias")
def row_sum_plus_bias():
    x = tensor("x", (M, N))
    b = tensor("b", (M,))
    return {"y": ((i,), sp.Sum(x[i, k] + b[i], (k, 0, N - 1)))}


@op("OverSumOfSquaresPlusOne")
def over_sum_of_squares_plus_one():
    x = tensor("x", (N,))
    # expanded, the Sum is Sum(x[k]**2 * exp(-x[i])) + Sum(exp(-x[i])): the second a count
    return {"y": ((i,), x[i] / sp.Sum((x[k] ** 2 + 1) * sp.exp(-x[i]), (k, 0, N - 1)))}


# a stage equal to one (a softmax's column sums): the forward names temporaries apart
@op("CenteredSoftmaxProduct")
def centered_softmax_product():
    x = tensor("x", (D, N))
    s = tensor("s", (N, N))
    column = lambda r, c: sp.exp(s[r, c]) / sp.Sum(sp.exp(s[d, c]), (d, 0, N - 1))
    centered = column(i, k) - sp.Sum(column(l, k), (l, 0, N - 1)) / N
    return {"y": ((i, j), sp.Sum(x[j, k] * centered, (k, 0, N - 1)))}


@op("ComplexScaledByEnergy", complex=True)
def complex_scaled_by_energy():
    x = tensor("x", (..., N))
    energy = sp.Sum(x[..., k] ** 2, (k, 0, N - 1))  # a stage: the gradient reads it
    return {"y": ((..., i), x[..., i] * sp.exp(energy / N))}
"""

SHAPES = {
    "layer_norm_natural": {"x": (2, 3, 5)},
    "layer_norm_shadowed": {"x": (3, 4)},
    "layer_norm_moments_natural": {"x": (2, 6)},
    "attention_scores": {"q": (3, 4), "k": (5, 4)},
    "tanh_mlp": {"x": (3, 4), "w1": (4, 5), "w2": (5, 2)},
    "attention_natural": {"q": (3, 4), "k": (5, 4), "v": (5, 2)},
    "bilinear": {"x": (2, 3, 4), "w": (4, 5), "z": (2, 3, 5)},
    "tanh_mlp_staged": {"x": (3, 4), "w1": (4, 5), "w2": (5, 2)},
    "scaled_by_variance": {"x": (3,), "z": (4,)},
    "centered_ratio": {"x": (4, 3), "z": (4,)},
    "inverse_squared_spread": {"z": (5,)},
    "summed_total": {"x": (4,)},
    "over_sum_of_squares_plus_one": {"x": (4,)},
    "row_sum_plus_bias": {"x": (3, 4), "b": (3,)},
    "centered_softmax_product": {"x": (2, 4), "s": (4, 4)},
    "complex_scaled_by_energy": {"x": (2, 4)},
    "batch_norm_natural": {"x": (3, 4, 2)},
}


def _import(path: Path):
    return import_generated(path, f"_stages_{path.stem}_{id(path)}")


@pytest.fixture(scope="module")
def natural(tmp_path_factory):
    """The declarations above, derived (and verified by `generate`), modules imported."""
    folder = tmp_path_factory.mktemp("natural")
    (folder / "natural.py").write_text(HEADER + textwrap.dedent(NATURAL))
    files = generate([folder / "natural.py"], ("numpy", "tensorflow"))
    for name, text in files.items():
        (folder / name).write_text(text)
    return files, _import(folder / "natural_numpy.py"), folder


def _vjp_by_differences(forward, inputs: dict, upstream, name, rng):
    """Central differences of sum(upstream * forward) along random directions of `name`."""
    pairs = []
    for _ in range(3):
        v = rng.standard_normal(inputs[name].shape)
        plus = forward(**{**inputs, name: inputs[name] + 1e-6 * v})
        minus = forward(**{**inputs, name: inputs[name] - 1e-6 * v})
        pairs.append((v, np.sum(upstream * (plus - minus)) / 2e-6))
    return pairs


@pytest.mark.parametrize("func", sorted(SHAPES))
def test_natural_declarations_derive_exact_gradients(natural, func):
    _, module, _ = natural
    rng = np.random.default_rng(5)
    inputs = {n: rng.standard_normal(s) for n, s in SHAPES[func].items()}
    forward = getattr(module, func)
    upstream = rng.standard_normal(np.shape(forward(**inputs)))
    grads = dict(zip(inputs, getattr(module, f"{func}_grad")(upstream, *inputs.values())))
    for name in inputs:
        for v, expected in _vjp_by_differences(forward, inputs, upstream, name, rng):
            assert np.sum(grads[name] * v) == pytest.approx(expected, rel=1e-6, abs=1e-8), name


@pytest.mark.parametrize("func", ["bilinear", "layer_norm_natural", "attention_scores", "scaled_by_variance",
                                  "centered_softmax_product", "summed_total", "row_sum_plus_bias"])
def test_tensorflow_gradients_of_natural_declarations(natural, tf, func):
    """The generated TF gradient runs (the bilinear form's `...` summed away by an einsum
    TensorFlow refuses unless it keeps `...`) and agrees with the numpy one."""
    _, module, folder = natural
    tf_module = _import(folder / "natural_tf.py")
    rng = np.random.default_rng(6)
    inputs = {n: rng.standard_normal(s) for n, s in SHAPES[func].items()}
    upstream = rng.standard_normal(np.shape(getattr(module, func)(**inputs)))
    expected = getattr(module, f"{func}_grad")(upstream, *inputs.values())
    tensors = [tf.constant(x) for x in inputs.values()]
    with tf.GradientTape() as tape:
        tape.watch(tensors)
        y = getattr(tf_module, func)(*tensors)
    got = tape.gradient(y, tensors, output_gradients=tf.constant(upstream))
    for want, have in zip(expected, got):
        np.testing.assert_allclose(have.numpy(), want, rtol=1e-10, atol=1e-12)


def test_nested_reductions_become_stages_and_the_gradient_reads_them(natural):
    files, _, _ = natural
    text = files["natural_numpy.py"]
    attention = text[text.index("def attention_scores_grad(") :].split("\n\n\n")[0]
    assert "sum1 = q @ k.T" in text  # the scores, staged once for both places they occur
    assert "grad_sum1 @ k" in attention and "grad_sum1.T @ q" in attention
    mlp = text[text.index("def tanh_mlp_grad(") :].split("\n\n\n")[0]
    assert "einsum" not in mlp and "grad_sum1 @ w1.T" in mlp


def test_normalised_weights_of_a_weighted_sum_are_a_stage(natural):
    """Attention written with nothing staged: its softmax weights, which read the row sum over
    j, are one stage `weights1`; the gradient goes through it (`grad @ v.T`, softmax's
    gradient, `weights1.T @ grad`), with no product of three tensors. TanhMlp's
    `tanh(sum1[i, h])` reads no sum over h and stays in place."""
    files, _, _ = natural
    text = files["natural_numpy.py"]
    grad = text[text.index("def attention_natural_grad(") :].split("\n\n\n")[0]
    code = grad.split('"""')[2]
    assert "grad_weights1 = grad @ v.T" in code and "weights1.T @ grad" in code
    assert "einsum" not in code
    assert "weights1" not in text[text.index("def tanh_mlp(") :].split("\n\n\n")[0]


def test_a_reduction_over_every_axis_inside_a_function_is_a_scalar_stage(natural):
    files, _, _ = natural
    text = files["natural_numpy.py"]
    grad = text[text.index("def scaled_by_variance_grad(") :].split("\n\n\n")[0]
    assert "sum1 = np.sum(z, axis=-1)" in grad  # the mean, once, a scalar
    # its gradient a scalar too: the variance's, read once, inline; the mean's through the
    # variance, sum_j (z[j] - sum1 / M), is identically zero and not computed at all
    assert "einsum" not in grad and "np.sum(grad * y, axis=-1)" in grad
    code = grad.split('"""')[2]
    assert "grad_sum1" not in code and code.count("np.sum(z") == 1


def test_a_centred_sum_over_several_indices_vanishes(natural):
    """Batch norm's statistics over two axes: the term of x's gradient through the mean and
    the variance that sums x - mean over both is zero and left out, so x is summed once (the
    mean, when not given), and the sums over the rows the gradients share are computed once."""
    files, _, _ = natural
    text = files["natural_numpy.py"]
    grad = text[text.index("def batch_norm_natural_grad(") :].split("\n\n\n")[0]
    code = grad.split('"""')[2]
    assert code.count("np.sum(x") == 1 and code.count("np.sum(grad * ") == 1, code
    assert "transpose" not in code, code


def test_a_sum_of_what_its_index_does_not_read_is_a_count(natural):
    files, _, _ = natural
    text = files["natural_numpy.py"]
    total = text[text.index("def summed_total(") :].split("\n\n\n")[0]
    assert "builtins" not in text and total.count("np.sum(") == 1


def test_inverse_entry_peels_invertible_layers_only():
    import sympy as sp

    from symgrad.reuse import _inverse

    x, y, s = sp.IndexedBase("x")[sp.Symbol("i", integer=True)], sp.Symbol("y"), sp.Symbol("s")
    assert _inverse(x - sp.log(s), x, y) == y + sp.log(s)  # LogSoftmax's output, solved for x
    assert sp.simplify(_inverse(1 / (1 + sp.exp(-x)), x, y) - (-sp.log(1 / y - 1))) == 0
    assert _inverse(sp.sqrt(x) * 3, x, y) == y ** 2 / 9
    assert _inverse(x ** 2, x, y) is None  # two roots
    assert _inverse(sp.tanh(sp.tanh(x)), x, y) is None  # not peeled: no search
    assert _inverse(x * sp.exp(x), x, y) is None  # read twice


def test_a_declared_stage_and_an_automatic_one_give_one_gradient(natural):
    _, module, _ = natural
    rng = np.random.default_rng(7)
    inputs = {n: rng.standard_normal(s) for n, s in SHAPES["tanh_mlp"].items()}
    upstream = rng.standard_normal((3, 2))
    automatic = module.tanh_mlp_grad(upstream, *inputs.values())
    declared = module.tanh_mlp_staged_grad(upstream, *inputs.values())
    for a, b in zip(automatic, declared):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_a_stage_without_a_size_is_a_declaration_error(tmp_path):
    (tmp_path / "bad.py").write_text(HEADER + textwrap.dedent("""
        @op("Unsized")
        def unsized():
            x = tensor("x", (N,))
            s = stage("s", (i, j), x[i] * 2)
            return {"y": ((i,), s[i, 0])}
    """))
    (decl,) = load_op_file(tmp_path / "bad.py").ops
    from symgrad.instantiate import instantiate

    with pytest.raises(DeclarationError, match=r"stage 's': index j subscripts no tensor axis"):
        instantiate(decl, ())


COUPLED = """
@op("Coupled")
def coupled():
    x = tensor("x", (M, D))
    y = tensor("y", (D, N))
    return {"z": ((i, j), sp.Sum(sp.exp(x[i, d] + y[d, j]), (d, 0, D - 1)))}
"""


def test_a_jacobian_sized_gradient_is_an_error_naming_the_term(tmp_path):
    ops = tmp_path / "coupled.py"
    ops.write_text(HEADER + textwrap.dedent(COUPLED))
    out = tmp_path / "gen"
    out.mkdir()
    (out / "keep.txt").write_text("untouched")
    before = snapshot(out)
    result = symgrad("derive", ops, "-o", out)
    assert result.returncode == 2, result.stderr
    assert "Coupled" in result.stderr and "coupled.py:" in result.stderr
    assert "intermediate of 3 axes" in result.stderr and "exp(" in result.stderr
    assert snapshot(out) == before
    allowed = symgrad("derive", ops, "-o", out, "--allow-large-intermediates")
    assert allowed.returncode == 0, allowed.stderr
    assert "warning:" in allowed.stderr and (out / "coupled_numpy.py").exists()


def _tampered(tmp_path, replace):
    """MatMul's generated files with `replace` applied to the numpy module's gradient."""
    ops = tmp_path / "mm.py"
    ops.write_text(HEADER + textwrap.dedent("""
        @op("TinyMatMul")
        def tiny_mat_mul():
            a = tensor("a", (M, D))
            b = tensor("b", (D, N))
            return {"c": ((i, j), sp.Sum(a[i, d] * b[d, j], (d, 0, D - 1)))}
    """))
    files = generate([ops], ("numpy", "tensorflow"), verify=False)
    files["mm_numpy.py"] = replace(files["mm_numpy.py"])
    return load_op_file(ops), files


def test_verification_finds_a_wrong_gradient(tmp_path):
    op_file, files = _tampered(tmp_path, lambda t: t.replace("grad_a = grad @ b.T", "grad_a = 2 * (grad @ b.T)"))
    (error,) = verify_generated([op_file], files, jobs=1)
    assert isinstance(error, VerificationError) and error.op == "TinyMatMul"
    assert "numpy" in str(error) and "a[" in str(error) and "expected" in str(error)


def test_verification_finds_a_gradient_that_raises(tmp_path):
    op_file, files = _tampered(tmp_path, lambda t: t.replace("grad_a = grad @ b.T", "grad_a = grad @ b"))
    errors = verify_generated([op_file], files, jobs=1)
    assert errors and all(e.op == "TinyMatMul" for e in errors)
    assert any("raise" in str(e) or "error" in str(e) for e in errors), [str(e) for e in errors]


def test_generate_writes_nothing_it_could_not_verify(tmp_path, monkeypatch):
    import symgrad.generate as generate_module

    monkeypatch.setattr(
        generate_module, "verify_generated",
        lambda op_files, files, jobs, targets, progress: [VerificationError("wrong", "TinyMatMul", "mm.py:5")],
    )
    ops = tmp_path / "mm.py"
    ops.write_text(HEADER + "@op('TinyMatMul')\ndef t():\n    a = tensor('a', (M, D))\n"
                   "    return {'c': ((i, d), a[i, d] * 2)}\n")
    with pytest.raises(SymgradErrors, match="verification failed for TinyMatMul"):
        generate([ops], ("numpy",))


def test_verification_leaves_no_gradient_registered(tmp_path, tf, monkeypatch):
    """`generate()` in a user's process, then the user imports what it wrote: the written
    module registers its gradient, not the copy verification imported."""
    from tensorflow.python.framework import ops as tf_ops

    ops = tmp_path / "registered.py"
    ops.write_text(HEADER + "@op('RegisteredTwiceScale')\ndef t():\n    a = tensor('a', (M, D))\n"
                   "    return {'c': ((i, d), a[i, d] * 3)}\n")
    files = generate([ops], ("numpy", "tensorflow"))  # verifies in this process
    with pytest.raises(LookupError):
        tf_ops._gradient_registry.lookup("SymgradRegisteredTwiceScale")
    for name in ("registered_tf.py", "_symgrad_tf.py"):  # the module and its runtime, as written
        (tmp_path / name).write_text(files[name])
    monkeypatch.syspath_prepend(str(tmp_path))  # as a user imports them
    spec = importlib.util.spec_from_file_location("registered_tf_user_copy", tmp_path / "registered_tf.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.REGISTERED["RegisteredTwiceScale"] == ("RegisteredTwiceScale", "SymgradRegisteredTwiceScale")
    registered = tf_ops._gradient_registry.lookup("SymgradRegisteredTwiceScale")
    assert registered.__module__ == "registered_tf_user_copy"



def test_verification_names_the_exception_of_a_forward_that_always_raises(tmp_path):
    op_file, files = _tampered(tmp_path, lambda t: t.replace("    c = a @ b\n", "    c = a @ b.T\n"))
    assert "c = a @ b.T" in files["mm_numpy.py"]
    errors = verify_generated([op_file], files, jobs=1)
    numpy_errors = [str(e) for e in errors if "numpy" in str(e)]
    assert numpy_errors and all("raised ValueError" in e and "matmul" in e for e in numpy_errors), numpy_errors


# --- stages passed to the gradient, not computed again ------------------------------------


def _ops_taking_stages(folder):
    import inspect

    from symgrad.verify.ops_under_test import load_derived

    ops = load_derived([ROOT / "ops"], folder)
    return [op for op in ops if "return_stages" in inspect.signature(op.function("numpy")).parameters]


def test_the_library_has_gradients_that_take_stages(derived):
    names = {op.name for op in _ops_taking_stages(derived[0])}
    assert {"ScaledDotProductAttention", "LayerNorm", "MlpBlock", "SoftmaxCrossEntropyWithLogits"} <= names


def test_a_gradient_given_the_forward_stages_equals_one_that_computes_them(derived, tf):
    """Every op whose gradient takes stages, every variant and dtype (complex ones conjugate
    the stages passed): numpy `<op>_grad(..., **stages)` and TensorFlow `<op>_vjp` given the
    stages equal the same functions computing the stages themselves."""
    from symgrad.verify.cases import case_groups

    checked = 0
    for op in _ops_taking_stages(derived[0]):
        grad_np, vjp_tf = op.function("numpy", "_grad"), op.function("tensorflow", "_vjp")
        for variant, dtype, cases in case_groups(op, None, quick=True):
            attrs = {k: v for k, v in variant.attrs.items()}
            for case in cases:
                outputs, stages = op.function("numpy")(*case.inputs, **attrs, return_stages=True)
                outputs = outputs if isinstance(outputs, tuple) else (outputs,)
                given = {k: v for k, v in stages.items() if v is not None}
                recomputed = grad_np(*case.upstream, *case.inputs, **attrs)
                passed = grad_np(*case.upstream, *case.inputs, **attrs, **given)
                rtol = 1e-10 if dtype in ("float64", "complex128") else 1e-4
                _assert_same(recomputed, passed, rtol, f"{op.name} numpy [{variant.label}] {dtype} {case.label}")
                tensors = [tf.constant(x) for x in (*case.upstream, *case.inputs, *outputs)]
                recomputed = vjp_tf(*tensors, **attrs)
                passed = vjp_tf(*tensors, **attrs, **{k: tf.constant(v) for k, v in given.items()})
                _assert_same(recomputed, passed, rtol, f"{op.name} tensorflow [{variant.label}] {dtype} {case.label}")
                checked += 1
    assert checked > 20


def _assert_same(expected, got, rtol: float, where: str) -> None:
    for e, g in zip(expected, got):
        if e is None or g is None:
            assert e is None and g is None, where
            continue
        np.testing.assert_allclose(np.asarray(g), np.asarray(e), rtol=rtol, atol=rtol / 100, err_msg=where)


def test_a_complex_gradient_conjugates_the_stages_it_is_given(natural, tf):
    """A complex op's gradient recomputes its stages from conjugated inputs; a stage passed
    to it (by the wrapper's forward, or `return_stages`) is conjugated instead: both paths
    agree, and the wrapper's gradient is TensorFlow's autodiff of the same forward."""
    files, module, folder = natural
    grad_text = files["natural_numpy.py"].split("def complex_scaled_by_energy_grad(")[1]
    assert "else:\n        sum1 = _conj(sum1)" in grad_text
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 4)) + 1j * rng.standard_normal((2, 4))
    upstream = rng.standard_normal((2, 4)) + 1j * rng.standard_normal((2, 4))
    y, stages = module.complex_scaled_by_energy(x, return_stages=True)
    (recomputed,) = module.complex_scaled_by_energy_grad(upstream, x)
    (passed,) = module.complex_scaled_by_energy_grad(upstream, x, y=y, **stages)
    np.testing.assert_allclose(passed, recomputed, rtol=1e-12)
    tf_module = _import(folder / "natural_tf.py")
    xt = tf.constant(x)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(xt)
        ours = tf_module.complex_scaled_by_energy(xt)
        theirs = xt * tf.exp(tf.reduce_sum(xt**2, axis=-1, keepdims=True) / 4)
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-12)
    wrapper = tape.gradient(ours, xt, output_gradients=tf.constant(upstream)).numpy()
    autodiff = tape.gradient(theirs, xt, output_gradients=tf.constant(upstream)).numpy()
    np.testing.assert_allclose(wrapper, autodiff, rtol=1e-10)
    np.testing.assert_allclose(recomputed, autodiff, rtol=1e-10)
