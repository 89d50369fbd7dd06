"""Fused TensorFlow gradient kernels: the table's formulas against the kernels, what is matched
and what is not, and the generated gradients that call them against TensorFlow's own gradients
and finite differences."""

from __future__ import annotations

import ast

import numpy as np
import pytest
import sympy as sp

from symgrad.functions import sigmoid
from symgrad.fused import KERNELS, find_kernel, kernel
from symgrad.load import load_op_file

from conftest import OPS

# op type -> the kernel its TensorFlow gradient is expected to call: the ops whose derived
# gradient is, term for term, what TensorFlow's fused kernel computes
FUSED_OPS = {"Sigmoid": "SigmoidGrad", "Tanh": "TanhGrad", "Softplus": "SoftplusGrad", "Relu": "ReluGrad"}
DTYPES = ["float32", "float64", "complex128"]
TOLERANCE = {"float32": 2e-6, "float64": 1e-12, "complex128": 1e-12}

g, y, x, f = sp.symbols("grad y x features", real=True)
ARRAYS = {"grad", "y", "x", "features"}


@pytest.fixture(scope="module")
def decls():
    return {d.name: d for d in load_op_file(OPS / "unary.py").ops}


def sample(rng, dtype, shape=(64,)) -> np.ndarray:
    values = rng.uniform(-4.0, 4.0, shape)
    if dtype.startswith("complex"):
        values = values + 1j * rng.uniform(-1.0, 1.0, shape)
    return np.concatenate([values, [0.0, -0.0, 1.0, -1.0]]).astype(dtype)


# --- the table is what the kernels compute ------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("entry", KERNELS, ids=lambda k: k.name)
def test_formula_is_what_the_kernel_computes(tf, entry, dtype):
    if dtype.startswith("complex") and not entry.complex:
        pytest.skip(f"{entry.name} takes real dtypes only")
    rng = np.random.default_rng(len(entry.name))
    operands = {str(p): sample(rng, dtype) for p in entry.params}
    actual = getattr(tf.raw_ops, entry.name)(**{k: tf.constant(v) for k, v in operands.items()})
    formula = sp.lambdify(entry.params, entry.formula.rewrite(sp.exp), "numpy")  # sigmoid: 1/(1 + exp(-x))
    with np.errstate(all="ignore"):
        expected = formula(*operands.values())
    np.testing.assert_allclose(actual.numpy(), expected, rtol=TOLERANCE[dtype], atol=1e-30)


# --- what is matched, and what merely looks similar -----------------------------------------------


@pytest.mark.parametrize(
    "expr, expected",
    [
        (g * y * (1 - y), ("SigmoidGrad", {"y": y, "dy": g})),
        (2 * g * y * (1 - y), ("SigmoidGrad", {"y": y, "dy": 2 * g})),  # a factor of a product
        (g * (1 - y**2), ("TanhGrad", {"y": y, "dy": g})),
        # softplus' as the stability rules write it (`symgrad.stability`: 1/(1 + exp(-f)))
        (g * sigmoid(f), ("SoftplusGrad", {"gradients": g, "features": f})),
        (g * sigmoid(x * y), ("SoftplusGrad", {"gradients": g, "features": x * y})),
        (sp.Piecewise((g, f > 0), (0, True)), ("ReluGrad", {"gradients": g, "features": f})),
    ],
)
def test_gradient_equal_to_a_kernel_is_matched(expr, expected):
    found = find_kernel(expr, ARRAYS, complex_ok=False)
    assert found is not None, expr
    assert (found.kernel.name, dict(found.operands)) == expected


@pytest.mark.parametrize(
    "expr",
    [
        g * y * (1 + y),  # SigmoidGrad(-y, -grad) for SymPy's match: two negations more
        g * x * (1 - y),  # input and output mixed
        g * y * (1 - y) + y,  # more than the kernel computes
        g * y**2 * (1 - y),
        g * (1 - y**3),
        g * (1 + y**2),  # Tan's: SymPy matches TanhGrad with y -> I*|y|
        g / (1 - x**2),  # SymPy matches TanhGrad with y -> sqrt(1 - 1/(1 - x**2))
        g / (1 + sp.exp(f)),  # the sign: SoftplusGrad(gradients, -features) would be new work
        g / (2 + sp.exp(-f)),
        sp.Piecewise((g, f >= 0), (0, True)),  # another tie than ReluGrad's
        sp.Piecewise((g, f > 0), (g / 2, True)),
    ],
)
def test_similar_looking_gradient_is_not_matched(expr):
    assert find_kernel(expr, ARRAYS, complex_ok=False) is None


def test_sympy_solving_for_operands_is_refused():
    """`grad*(1 - y**2)` "is" SigmoidGrad(y**2, grad/y**2) for SymPy's match; not for us."""
    sigmoid_grad = next(k for k in KERNELS if k.name == "SigmoidGrad")
    assert (g * (1 - y**2)).match(sigmoid_grad.pattern()[0])
    assert find_kernel(g * (1 - y**2), ARRAYS, complex_ok=False, kernels=(sigmoid_grad,)) is None


def test_operands_must_hold_an_array():
    alpha = sp.Symbol("alpha", real=True)  # a numeric attribute, a scalar
    assert find_kernel(g * alpha * (1 - alpha), ARRAYS, complex_ok=False) is None


def test_complex_needs_a_kernel_computing_the_same_on_complex():
    real_only = kernel("RealOnly", "y dy", lambda y, dy: dy * y * (1 - y), complex=False)
    assert find_kernel(g * y * (1 - y), ARRAYS, complex_ok=False, kernels=(real_only,)) is not None
    assert find_kernel(g * y * (1 - y), ARRAYS, complex_ok=True, kernels=(real_only,)) is None
    assert find_kernel(g * y * (1 - y), ARRAYS, complex_ok=True).kernel.name == "SigmoidGrad"
    # |f| is not analytic: an identity checked on reals says nothing about complex values
    assert find_kernel(g / (1 + sp.Abs(f)) ** 2, ARRAYS, complex_ok=True) is None


# --- the generated gradients --------------------------------------------------------------------


def test_only_the_tensorflow_gradients_call_fused_kernels(derived):
    _, files = derived
    for name, text in files.items():
        called = {k for k in (e.name for e in KERNELS) if f"tf.raw_ops.{k}(" in text}
        if name == "unary_tf.py":
            assert called == set(FUSED_OPS.values())
        else:
            assert not called, name


@pytest.mark.parametrize("op_type", sorted(FUSED_OPS))
def test_generated_tf_gradient_calls_the_fused_kernel(derived, decls, op_type):
    _, files = derived
    decl = decls[op_type]
    tree = ast.parse(files["unary_tf.py"])
    function = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == f"{decl.func_name}_vjp")
    calls = [ast.unparse(n.func) for n in ast.walk(function) if isinstance(n, ast.Call)]
    assert f"tf.raw_ops.{FUSED_OPS[op_type]}" in calls, ast.unparse(function)


def _dtypes(decl):
    return [d for d in DTYPES if decl.complex_ok or not d.startswith("complex")]


@pytest.mark.parametrize(
    "op_type, dtype", [(op, d) for op in sorted(FUSED_OPS) for d in DTYPES], ids=lambda v: str(v)
)
def test_fused_gradient_matches_tensorflow_and_finite_differences(tf, tf_module, decls, op_type, dtype):
    decl = decls[op_type]
    if dtype not in _dtypes(decl):
        pytest.skip(f"{op_type} is real only")
    rng = np.random.default_rng(len(op_type))
    x = sample(rng, dtype)
    if op_type == "Relu":
        x = np.where(np.abs(x) < 0.01, 0.5, x)  # a difference across the kink means nothing
    upstream = sample(rng, dtype)
    raw = getattr(tf.raw_ops, op_type)

    @tf.function
    def gradients(upstream, x):
        op = raw(**{decl.inputs[0]: x}).op
        ours = getattr(tf_module("unary"), f"{decl.func_name}_grad")(op, upstream)[0]
        reference = tf.gradients(op.outputs[0], [x], grad_ys=upstream)[0]
        return ours, reference

    ours, reference = (t.numpy() for t in gradients(tf.constant(upstream), tf.constant(x)))
    assert ours.dtype == np.dtype(dtype)
    np.testing.assert_allclose(ours, reference, rtol=TOLERANCE[dtype], atol=1e-30)

    # central differences in float64/complex128 (`f` is holomorphic where complex): grad * conj(f')
    wide = x.astype(np.complex128 if dtype.startswith("complex") else np.float64)
    forward = lambda v: raw(**{decl.inputs[0]: tf.constant(v)}).numpy()  # noqa: E731
    h = 1e-6
    derivative = (forward(wide + h) - forward(wide - h)) / (2 * h)
    expected = upstream * np.conj(derivative)
    np.testing.assert_allclose(ours, expected, rtol=1e-5 if dtype == "float32" else 1e-7, atol=1e-6)
