"""Simplification passes: forward-output reuse read off the generated source, and the rewrites
that keep gradients finite where SymPy's raw derivative is not."""

from __future__ import annotations

import ast
import types

import numpy as np
import pytest
import scipy.special
import sympy as sp

from symgrad import elementwise
from symgrad.instantiate import instantiate
from symgrad.derive import derive
from symgrad.functions import recomputed_or_reused, sigmoid
from symgrad.guards import has_partial_function, safe_where
from symgrad.fused import KERNELS
from symgrad.simplify import share_subexpressions, simplify

# op -> (gradient in terms of the output y, as TensorFlow's hand-written gradient has it)
REUSED = {
    "sigmoid": lambda grad, y: grad * y * (1 - y),
    "tanh": lambda grad, y: grad * (1 - y**2),
    "exp": lambda grad, y: grad * y,
    "sqrt": lambda grad, y: 0.5 * grad / y,
    "rsqrt": lambda grad, y: -0.5 * grad * y**3,
    "reciprocal": lambda grad, y: -grad * y**2,
}
# what the stability rules write, as numpy evaluates them
STABLE_FUNCTIONS = {"sigmoid": scipy.special.expit, "softplus": lambda x: np.logaddexp(0, x)}
GRAD_FUNCTION = {"unary_numpy.py": "{}_grad", "unary_tf.py": "{}_vjp"}


def function_def(source: str, name: str) -> ast.FunctionDef:
    return next(
        n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef) and n.name == name
    )


def names_loaded(node) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def fused_call_operands(node) -> list[ast.AST] | None:
    """The operands of a `tf.raw_ops.<fused kernel>(...)` call (tests/test_fused.py checks
    those kernels), else None."""
    if isinstance(node, ast.Call) and ast.unparse(node.func).startswith("tf.raw_ops."):
        return [k.value for k in node.keywords]
    return None


def _kernel_as_formula(entry):
    formula = sp.lambdify(entry.params, entry.formula, "numpy")
    return lambda **operands: formula(*(operands[str(p)] for p in entry.params))


# `tf` for evaluating a printed TensorFlow gradient on numpy arrays
TF_STAND_IN = types.SimpleNamespace(
    raw_ops=types.SimpleNamespace(**{k.name: _kernel_as_formula(k) for k in KERNELS})
)


@pytest.mark.parametrize("file", sorted(GRAD_FUNCTION))
@pytest.mark.parametrize("op", sorted(REUSED))
def test_generated_gradient_reuses_the_forward_output(derived, file, op):
    """`grad_x` reads only grad and y, calls nothing (but a fused kernel), and equals
    TensorFlow's formula."""
    _, files = derived
    function = function_def(files[file], GRAD_FUNCTION[file].format(op))
    assigns = [s for s in function.body if isinstance(s, ast.Assign)]
    assert all("x" not in names_loaded(s) for s in assigns), ast.unparse(function)
    (grad_x,) = [s.value for s in assigns if s.targets[0].id == "grad_x"]
    text = ast.unparse(grad_x)
    operands = fused_call_operands(grad_x) or [grad_x]
    assert set().union(*map(names_loaded, operands)) == {"grad", "y"} and not any(
        isinstance(n, ast.Call) for o in operands for n in ast.walk(o)
    ), text
    rng = np.random.default_rng(0)
    grad, y = rng.uniform(0.5, 2.0, 5), rng.uniform(0.1, 0.9, 5)
    namespace = {"grad": grad, "y": y, "tf": TF_STAND_IN}
    actual = eval(compile(ast.Expression(grad_x), text, "eval"), namespace)
    np.testing.assert_allclose(actual, REUSED[op](grad, y), rtol=1e-14)


def vjp(fn, outputs=("y",)):
    """The simplified vector-Jacobian product of an elementwise declaration, input -> expr."""
    decl = elementwise("Test", outputs=outputs)(fn)
    return simplify(derive(instantiate(decl, ()))).vjp


def value(expr, **values) -> float:
    return float(expr.subs({sp.Symbol(k, real=True): v for k, v in values.items()}))


def test_power_gradient_is_finite_where_the_base_is_zero():
    # SymPy's d(x**y)/dx is x**y*y/x, and reusing z = x**y gives z*y/x: NaN at x = 0
    grads = vjp(lambda x, y: x**y, outputs=("z",))
    assert value(grads["x"], x=0, y=2, grad=1) == 0
    assert value(grads["x"], x=0, y=3, grad=1) == 0


def test_exp_ratio_does_not_overflow():
    # d log(1 + exp(x)) / dx is exp(x)/(exp(x) + 1): inf/inf for large x; the stability rules
    # write the forward as softplus(x), whose derivative is sigmoid(x)
    (grad_x,) = vjp(lambda x: sp.log(1 + sp.exp(x))).values()
    assert grad_x == sp.Symbol("grad", real=True) * sigmoid(sp.Symbol("x", real=True))
    f = sp.lambdify(sorted(grad_x.free_symbols, key=str), grad_x, [STABLE_FUNCTIONS, "numpy"])
    with np.errstate(all="raise"):
        np.testing.assert_allclose(f(1.0, np.array([-800.0, 0.0, 800.0])), [0.0, 0.5, 1.0])


def test_branches_of_one_function_merge():
    """Softplus in two overflow-free branches has one derivative: no Piecewise left."""
    from sympy.codegen.cfunctions import log1p

    (grad_x,) = vjp(
        lambda x: sp.Piecewise((x + log1p(sp.exp(-x)), x > 0), (log1p(sp.exp(x)), True))
    ).values()
    assert not grad_x.has(sp.Piecewise), grad_x


def test_branches_that_differ_stay():
    (grad_x,) = vjp(lambda x: sp.Piecewise((x, x > 0), (0, True))).values()
    assert grad_x.has(sp.Piecewise)
    assert value(grad_x, x=0, grad=1) == 0 and value(grad_x, x=1, grad=1) == 1


def gelu_erf(x):
    return x / 2 * (1 + sp.erf(x / sp.sqrt(2)))


def spelling(expr, which: str) -> sp.Expr:
    """`expr` with each value of two spellings spelled `which` ("recomputed" or "reused")."""
    return expr.replace(lambda n: isinstance(n, recomputed_or_reused), lambda n: getattr(n, which))


def test_quotient_of_the_output_replaces_a_recomputed_erf():
    """GELU, y = x * h(x): the gradient may read h = y / x instead of computing erf again."""
    (both,) = vjp(gelu_erf).values()
    grad_x = spelling(both, "reused")
    assert not grad_x.has(sp.erf) and sp.Symbol("y", real=True) in grad_x.free_symbols, grad_x
    assert spelling(both, "recomputed").has(sp.erf)
    x, y, grad = sp.symbols("x y grad", real=True)
    exact = sp.diff(gelu_erf(x), x)
    for point in (-2.5, -0.3, 0.7, 1.9):
        forward = gelu_erf(x).subs(x, point)
        assert abs(value(grad_x, x=point, y=forward, grad=1) - exact.subs(x, point)) < 1e-14


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_quotient_of_the_output_is_exact_at_and_near_zero(dtype):
    """The guard: 1/2 at x == 0 (not 0/0), and no subnormal `y / x` either."""
    from scipy.special import erf

    grad_x = spelling(*vjp(gelu_erf).values(), "reused")
    gradient = sp.lambdify(sp.symbols("grad x y", real=True), grad_x, "numpy")
    tiny = np.finfo(dtype).tiny
    x = np.array([0.0, -0.0, tiny / 8, -tiny, tiny, 1e-31, -1e-29, 1e-10, 1e-3, -1e-3], dtype=dtype)
    y = (x / 2 * (1 + erf(x / np.sqrt(2)))).astype(dtype)
    with np.errstate(all="ignore"):  # np.where evaluates the branch it does not select
        actual = gradient(np.ones_like(x), x, y)
    x64 = x.astype(np.float64)
    expected = 0.5 * (1 + erf(x64 / np.sqrt(2))) + x64 * np.exp(-x64**2 / 2) / np.sqrt(2 * np.pi)
    np.testing.assert_allclose(actual, expected, rtol=4 * np.finfo(dtype).eps)


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x**2 * sp.erf(x),  # h(0) == 0: no limit to stand in for y / x near 0
        lambda x: x * sp.log(x**2 + 1) + sp.erf(x),  # not x * h(x)
    ],
    ids=["h(0) is 0", "not x*h(x)"],
)
def test_quotient_is_not_used_where_its_limit_does_not_stand_in(fn):
    (grad_x,) = vjp(fn).values()
    assert not grad_x.has(sp.Piecewise, recomputed_or_reused), grad_x


def test_each_backend_prints_its_cheaper_spelling(tmp_path):
    """numpy reads GELU's output (scipy's erf is slow); TensorFlow recomputes (its erf is not)."""
    from symgrad.generate import generate

    op_file = tmp_path / "gelu.py"
    op_file.write_text(
        "import sympy as sp\nfrom symgrad import elementwise\n\n"
        '@elementwise("GeluErf", outputs=("activations",))\n'
        "def gelu_erf(features):\n    return features / 2 * (1 + sp.erf(features / sp.sqrt(2)))\n"
    )
    files = generate([op_file], ("numpy", "tensorflow"))
    numpy_grad = function_def(files["gelu_numpy.py"], "gelu_erf_grad")
    tf_grad = function_def(files["gelu_tf.py"], "gelu_erf_vjp")
    assert "erf" not in ast.unparse(numpy_grad).split("activations = gelu_erf(features)")[-1]
    assert "activations" in names_loaded(numpy_grad)
    assert "tf.math.erf" in ast.unparse(tf_grad) and "activations" not in names_loaded(tf_grad)


def _library_vjp(stem: str, name: str) -> dict:
    from conftest import OPS
    from symgrad.load import load_op_file

    (decl,) = [d for d in load_op_file(OPS / f"{stem}.py").ops if d.name == name]
    return simplify(derive(instantiate(decl, decl.variants()[0]))).vjp


def test_an_output_read_entry_for_entry_is_reused_though_the_gradient_lacks_a_tensor_it_reads():
    """SoftmaxCrossEntropy's `backprop = exp(features) / S - labels`: the features' gradient
    holds `exp(features) / S` but not `labels`, and is written with `backprop + labels`."""
    vjp = _library_vjp("nn", "SoftmaxCrossEntropyWithLogits")
    gradient = sum((t.factor for t in vjp["features"].terms), sp.S.Zero)
    assert not gradient.has(sp.exp), gradient
    assert "backprop" in {str(e.base) for e in gradient.atoms(sp.Indexed)}


def test_a_reuse_that_would_divide_by_an_input_entry_is_not_taken():
    """LayerNorm's `y = scale * normalised + offset` solved for x divides by `scale`: its
    scale gradient would be infinite where `scale` is 0, and keeps the normalised input."""
    vjp = _library_vjp("composed", "LayerNorm")
    for term in vjp["scale"].terms:
        assert not any(p.exp.is_negative and p.base.has(sp.Indexed) and "scale" in str(p.base)
                       for p in term.factor.atoms(sp.Pow)), term


def test_a_partial_function_shared_by_branches_is_computed_on_safe_inputs():
    """Pow's `y * x**(y - 1)` in its branches x > 0 and x <= 0: `cse` shares it between them,
    and computed before the select it is NaN at x = y = 0, where the branch taken is 0, and
    TensorFlow's gradient through the select is NaN too. Guarded first, each branch reads its
    inputs through its own mask: whatever `cse` hoists, what a branch computes applies a
    partial function to safe reads only."""
    x, y, g = sp.symbols("x y g", real=True)
    value = g * y * x ** (y - 1)
    expr = sp.Piecewise((value, x > 0), (0, sp.Eq(y, 0)), (value, True)) + g * sp.log(x)
    temps, (reduced,) = share_subexpressions([expr], prefix="tmp", guard=True)
    written = reduced
    for symbol, temp in reversed(temps):  # what is computed, temporaries written out
        written = written.xreplace({symbol: temp})
    (piecewise,) = written.atoms(sp.Piecewise)
    for v, _ in piecewise.args:
        assert not has_partial_function(v.replace(safe_where, lambda *args: sp.S.One)), v
    masks = [{w.args[1] for w in v.atoms(safe_where)} for v, _ in piecewise.args]
    assert len(masks[0]) == len(masks[2]) == 1 and masks[0] != masks[2] and not masks[1]
    assert sp.log(x) in written.atoms(sp.log)  # outside any branch: computed as it is
    assert sp.simplify(written.replace(safe_where, lambda v, mask: v) - expr) == 0
    # SymPy's cse alone shares the unguarded value between the branches
    plain, (reduced,) = sp.cse([expr])
    assert any(has_partial_function(t) for _, t in plain) and reduced.atoms(sp.Piecewise)
