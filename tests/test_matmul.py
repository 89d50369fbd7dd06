"""The seed case: MatMul derived from its declaration, against TensorFlow's hand-written gradient."""

from __future__ import annotations

import itertools
import re
import subprocess
import sys

import numpy as np
import pytest

from conftest import GENERATED, ROOT

A = np.array([[1.0, 2.0], [3.0, 4.0]])
B = np.array([[6.0, 7.0, 8.0], [9.0, 10.0, 11.0]])
SUM_C = [[21, 30], [21, 30]]
SUM_C_TIMES_C = [[573, 816], [1295, 1844]]
VARIANTS = list(itertools.product([False, True], repeat=2))


def _operands(rng, transpose_a, transpose_b, dtype=np.float64, m=3, k=4, n=5):
    def draw(shape):
        x = rng.standard_normal(shape)
        return x + 1j * rng.standard_normal(shape) if np.issubdtype(dtype, np.complexfloating) else x

    a = draw((k, m) if transpose_a else (m, k)).astype(dtype)
    b = draw((n, k) if transpose_b else (k, n)).astype(dtype)
    return a, b


def _tf_registry_gradient(tf, a, b, upstream, transpose_a, transpose_b):
    """TensorFlow's own registered MatMul gradient, through a GradientTape."""
    a, b = tf.constant(a), tf.constant(b)
    with tf.GradientTape() as tape:
        tape.watch([a, b])
        c = tf.raw_ops.MatMul(a=a, b=b, transpose_a=transpose_a, transpose_b=transpose_b)
    return [g.numpy() for g in tape.gradient(c, [a, b], output_gradients=tf.constant(upstream))]


def _generated_registered_gradient(tf, module, a, b, upstream, transpose_a, transpose_b):
    """The generated `matmul_grad(op, grad)` called on a real MatMul op in a graph."""

    @tf.function
    def run(a, b, upstream):
        c = tf.raw_ops.MatMul(a=a, b=b, transpose_a=transpose_a, transpose_b=transpose_b)
        return module.matmul_grad(c.op, upstream)

    return [g.numpy() for g in run(tf.constant(a), tf.constant(b), tf.constant(upstream))]


# --- the seed's numbers --------------------------------------------------------------------


def test_seed_numbers_numpy(numpy_module):
    mm = numpy_module("matmul")
    c = mm.matmul(A, B)
    assert mm.matmul_grad(np.ones_like(c), A, B)[0].tolist() == SUM_C
    assert mm.matmul_grad(c, A, B)[0].tolist() == SUM_C_TIMES_C


@pytest.mark.parametrize("mode", ["eager", "tf.function"])
def test_seed_numbers_tf_custom_gradient(tf, tf_module, mode):
    mm = tf_module("matmul")

    def grads():
        a, b = tf.constant(A), tf.constant(B)
        with tf.GradientTape(persistent=True) as tape:
            tape.watch(a)
            c = mm.matmul(a, b)
            plain = tf.reduce_sum(c)
            weighted = tf.reduce_sum(c * tf.stop_gradient(c))
        return tape.gradient(plain, a), tape.gradient(weighted, a)

    plain, weighted = tf.function(grads)() if mode == "tf.function" else grads()
    assert plain.numpy().tolist() == SUM_C
    assert weighted.numpy().tolist() == SUM_C_TIMES_C


def test_seed_numbers_tf_gradient_override_map(tf, tf_module):
    mm = tf_module("matmul")
    assert "SymgradMatMul" in mm.REGISTERED["MatMul"]
    graph = tf.Graph()
    with graph.as_default():
        a, b = tf.constant(A), tf.constant(B)
        with graph.gradient_override_map({"MatMul": "SymgradMatMul"}):
            c = tf.linalg.matmul(a, b)
        grads = [tf.compat.v1.gradients(loss, [a])[0] for loss in
                 (tf.reduce_sum(c), tf.reduce_sum(c * tf.stop_gradient(c)))]
        with tf.compat.v1.Session(graph=graph) as session:
            plain, weighted = session.run(grads)
    assert plain.tolist() == SUM_C
    assert weighted.tolist() == SUM_C_TIMES_C


def test_gradient_override_map_calls_the_generated_function(tf, tf_module):
    """The override really routes MatMul's gradient to `matmul_grad` (not TensorFlow's)."""
    mm = tf_module("matmul")
    calls = []
    original = mm.matmul_vjp
    mm.matmul_vjp = lambda *args, **kwargs: calls.append(kwargs) or original(*args, **kwargs)
    try:
        graph = tf.Graph()
        with graph.as_default():
            a, b = tf.constant(A), tf.constant(B)
            with graph.gradient_override_map({"MatMul": "SymgradMatMul"}):
                c = tf.linalg.matmul(a, b, transpose_b=False)
            tf.compat.v1.gradients(tf.reduce_sum(c), [a])
    finally:
        mm.matmul_vjp = original
    assert calls == [{"transpose_a": False, "transpose_b": False}]


def test_seed_example_prints_the_numbers():
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "matmul_seed.py")],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert sum(str(SUM_C) in line and line.endswith("same") for line in lines) == 8
    assert sum(str(SUM_C_TIMES_C) in line and line.endswith("same") for line in lines) == 8
    assert sum("symgrad JAX" in line for line in lines) == 4
    assert sum("symgrad PyTorch" in line for line in lines) == 2
    assert "DIFFERENT" not in result.stdout


# --- all four transpose variants against TensorFlow's registered gradient ------------------


@pytest.mark.parametrize("dtype", [np.float64, np.complex128], ids=["float64", "complex128"])
@pytest.mark.parametrize("transpose_a,transpose_b", VARIANTS)
def test_variants_match_tensorflow(tf, tf_module, numpy_module, transpose_a, transpose_b, dtype):
    rng = np.random.default_rng(7)
    a, b = _operands(rng, transpose_a, transpose_b, dtype)
    flags = dict(transpose_a=transpose_a, transpose_b=transpose_b)
    upstream = numpy_module("matmul").matmul(a, b, **flags)
    upstream = upstream + rng.standard_normal(upstream.shape)  # not proportional to c
    expected = _tf_registry_gradient(tf, a, b, upstream, **flags)
    got_tf = _generated_registered_gradient(tf, tf_module("matmul"), a, b, upstream, **flags)
    got_np = numpy_module("matmul").matmul_grad(upstream, a, b, **flags)
    for exp, tf_got, np_got in zip(expected, got_tf, got_np):
        np.testing.assert_allclose(tf_got, exp, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(np_got, exp, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("transpose_a,transpose_b", VARIANTS)
def test_variants_match_finite_differences(numpy_module, transpose_a, transpose_b):
    mm = numpy_module("matmul")
    rng = np.random.default_rng(3)
    a, b = _operands(rng, transpose_a, transpose_b)
    flags = dict(transpose_a=transpose_a, transpose_b=transpose_b)
    upstream = rng.standard_normal(mm.matmul(a, b, **flags).shape)
    grads = mm.matmul_grad(upstream, a, b, **flags)
    for which, (x, grad) in enumerate(zip((a, b), grads)):
        numeric = np.zeros_like(x)
        for idx in np.ndindex(x.shape):
            step = np.zeros_like(x)
            step[idx] = 1e-6
            args = [a, b]
            args[which] = x + step
            plus = np.sum(upstream * mm.matmul(*args, **flags))
            args[which] = x - step
            minus = np.sum(upstream * mm.matmul(*args, **flags))
            numeric[idx] = (plus - minus) / 2e-6
        np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-8)


# --- what the generated code looks like ----------------------------------------------------


@pytest.mark.parametrize("name", ["matmul_numpy.py", "matmul_tf.py"])
def test_generated_matmul_matches_golden(derived, name):
    _, files = derived
    golden = ROOT / "tests" / "golden" / name
    assert files[name] == golden.read_text(), f"regenerate with: symgrad derive ops/matmul.py -o tests/golden"


def test_each_branch_is_two_matmuls_with_transpose_flags(derived):
    _, files = derived
    source = files["matmul_tf.py"]
    vjp = source[source.index("def matmul_vjp"): source.index("def matmul_grad")]
    branches = vjp.split("if ")[1:]
    assert len(branches) == 4
    for branch in branches:
        assert branch.count("tf.linalg.matmul(") == 2
    assert "einsum" not in source and "conj" in vjp


def test_committed_generated_modules_are_fresh(derived):
    _, files = derived
    for name, text in files.items():
        assert (GENERATED / name).read_text() == text, f"generated/{name} is stale: run symgrad derive ops/"


@pytest.mark.parametrize("adj_x, adj_y", list(itertools.product([False, True], repeat=2)))
def test_batch_matmul_adjoints_of_complex_inputs_match_tensorflow(tf, tf_module, numpy_module, adj_x, adj_y):
    """adj_x, adj_y conjugate as well as transpose: against TensorFlow's registered gradient of
    BatchMatMulV2 on complex128 inputs with broadcast batch axes, in numpy and TensorFlow; the
    numpy second order (composed of the op's own forward and gradient) against differences."""
    rng = np.random.default_rng(7)
    complex_normal = lambda *shape: rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
    x = complex_normal(2, *((4, 3) if adj_x else (3, 4)))
    y = complex_normal(*((5, 4) if adj_y else (4, 5)))
    grad = complex_normal(2, 3, 5)
    tx, ty = tf.constant(x), tf.constant(y)
    with tf.GradientTape() as tape:
        tape.watch([tx, ty])
        out = tf.raw_ops.BatchMatMulV2(x=tx, y=ty, adj_x=adj_x, adj_y=adj_y)
    want = tape.gradient(out, [tx, ty], output_gradients=tf.constant(grad))
    module = numpy_module("batch_matmul")
    np.testing.assert_allclose(module.batch_mat_mul_v2(x, y, adj_x=adj_x, adj_y=adj_y), out.numpy(), rtol=1e-12)
    for got in (module.batch_mat_mul_v2_grad(grad, x, y, adj_x=adj_x, adj_y=adj_y),
                tf_module("batch_matmul").batch_mat_mul_v2_vjp(tf.constant(grad), tx, ty, out, adj_x=adj_x, adj_y=adj_y)):
        for g, w in zip(got, want):
            np.testing.assert_allclose(np.asarray(g), w.numpy(), rtol=1e-12)
    cotangents = [complex_normal(*np.shape(v)) for v in (x, y)]
    second = module.batch_mat_mul_v2_grad_grad(*cotangents, grad, x, y, adj_x=adj_x, adj_y=adj_y)
    loss = lambda g, a, b: sum(np.real(np.vdot(c, v)) for c, v in zip(cotangents, module.batch_mat_mul_v2_grad(g, a, b, adj_x=adj_x, adj_y=adj_y)))
    step = 1e-6
    for k, value in enumerate((grad, x, y)):  # TensorFlow's convention: d/dRe + i d/dIm
        direction = complex_normal(*value.shape)
        moved = lambda s: [v + s * direction if n == k else v for n, v in enumerate((grad, x, y))]
        slope = (loss(*moved(step)) - loss(*moved(-step))) / (2 * step)
        np.testing.assert_allclose(np.real(np.vdot(second[k], direction)), slope, rtol=1e-6)


def test_an_adjoint_reads_its_input_as_it_is_not_conjugated_twice(derived):
    """The derived gradient reads x and y conjugated, except where adj_x / adj_y conjugate
    them again: a branch reads them as they are there, instead of the gradient conjugating
    them before the branches and again inside one; each branch conjugates at most grad and
    the inputs it reads conjugated."""
    _, files = derived
    source = files["batch_matmul_tf.py"]
    vjp = source[source.index("def batch_mat_mul_v2_vjp"): source.index("def batch_mat_mul_v2_grad")]
    body = vjp.split('"""')[2]
    conjugated = {branch.split(":", 1)[0]: sorted(re.findall(r"tf\.math\.conj\((\w+)\)", branch))
                  for branch in re.split(r"\n    (?:el)?if ", body)[1:]}
    assert conjugated == {
        "not adj_x and not adj_y": ["x", "y"],
        "not adj_x and adj_y": ["grad"],
        "adj_x and not adj_y": ["grad"],
        "adj_x and adj_y": ["grad", "x", "y"],
    }
