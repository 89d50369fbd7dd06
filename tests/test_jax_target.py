"""The JAX target: generated `custom_vjp` ops under jax.grad, jit and vmap, differentiated again,
JAX's complex convention, the runtime helpers against numpy's, and the whole library against
finite differences and against JAX's own autodiff of the generated forward (CLI subprocesses)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import ROOT, import_altered, numpy_runtime
from verify_support import run_symgrad

from symgrad.verify.verdict import BOTH_RIGHT, BOTH_WRONG, REFERENCE_WRONG, UNDECIDED

RNG = np.random.default_rng(0)
# ops JAX cannot express: jax.scipy.special has no Bessel K or Y functions, and its J (bessel_jn)
# is wrong beyond small arguments
NOT_IN_JAX = {"BesselK0", "BesselK0e", "BesselK1", "BesselK1e", "BesselY0", "BesselY1", "BesselJ0", "BesselJ1"}


@pytest.fixture(scope="module")
def runtime(jax):
    """The JAX runtime helpers (imported once JAX is known to be there)."""
    from symgrad.backends.jax import runtime

    return runtime


def _close(a, b, tol=1e-10):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


def test_matmul_gradient_is_the_derived_one_under_grad_jit_and_vmap(jax, jax_module):
    mm = jax_module("matmul")
    a, b = RNG.normal(size=(3, 4)), RNG.normal(size=(5, 4))
    upstream = RNG.normal(size=(3, 5))

    def loss(a, b):
        return (mm.matmul(a, b, transpose_b=True) * upstream).sum()

    derived = mm.matmul_vjp(upstream, a, b, transpose_b=True)
    eager = jax.grad(loss, argnums=(0, 1))(a, b)
    jitted = jax.jit(jax.grad(loss, argnums=(0, 1)))(a, b)
    for got in (eager, jitted):
        _close(got[0], derived[0])
        _close(got[1], derived[1])
        _close(got[0], upstream @ b)  # by hand: d(a b^T)/da
    batched = jax.vmap(jax.grad(loss), in_axes=(0, None))(np.stack([a, 2 * a]), b)
    _close(batched[1], upstream @ b)


def test_a_gradient_nobody_asked_for_is_never_computed(jax, jax_module):
    """`custom_vjp`'s symbolic zeros reach the derived vjp: differentiated in b alone, MatMul's
    backward traces one matrix product (two with a too), and its gradient is the derived one;
    an output nobody differentiates (SparseSoftmaxCrossEntropyWithLogits's backprop) is a
    symbolic zero made zeros."""
    mm, nn = jax_module("matmul"), jax_module("nn")
    a, b = RNG.normal(size=(3, 4)), RNG.normal(size=(4, 5))
    loss = lambda a, b: mm.matmul(a, b).sum()
    for argnums, products in ((1, 2), ((0, 1), 3)):
        traced = str(jax.make_jaxpr(jax.grad(loss, argnums=argnums))(a, b))
        assert traced.count("dot_general[") == products, traced
    _close(jax.grad(loss, argnums=1)(a, b), a.T @ np.ones((3, 5)))
    features, labels = RNG.normal(size=(4, 6)), np.array([0, 5, 2, 2])
    mean_loss = lambda f: nn.sparse_softmax_cross_entropy_with_logits(f, labels)[0].mean()
    softmax = np.exp(features) / np.exp(features).sum(-1, keepdims=True)
    _close(jax.grad(mean_loss)(features), (softmax - np.eye(6)[labels]) / 4)


def test_custom_vjp_calls_the_derived_vjp_not_jax_autodiff(jax, derived, tmp_path):
    """A wrong `<op>_vjp` must show in jax.grad: the wrapper is not JAX's own derivative."""
    wrong = "    return 0 * a + 7.0, 0 * b\n"
    mm = import_altered(derived[0] / "matmul_jax.py", "    return grad_a, grad_b\n", wrong, tmp_path)
    got = jax.grad(lambda a, b: mm.matmul(a, b).sum())(np.ones((2, 2)), np.ones((2, 2)))
    _close(got, np.full((2, 2), 7.0))


def test_second_order_through_the_derived_gradient(jax, jax_module):
    """jax.hessian of a composed op (LayerNorm) through its derived gradient equals JAX's
    second derivative of the formula itself."""
    composed = jax_module("composed")
    x = RNG.normal(size=(2, 5))
    gamma, beta = RNG.normal(size=5), RNG.normal(size=5)
    weights = RNG.normal(size=(2, 5))

    def through(f):
        return lambda x: (f(x, gamma, beta) * weights).sum()

    # one epsilon for both: the wrapper's default is jax.nn.standardize's (1e-5), the forward's TensorFlow's
    derived = jax.hessian(through(lambda *a: composed.layer_norm(*a, epsilon=1e-3)))(x)
    reference = jax.hessian(through(lambda *a: composed.layer_norm_forward(*a, epsilon=1e-3)))(x)
    _close(derived, reference, 1e-8)
    assert np.abs(derived).max() > 0.1  # not a second derivative that silently comes out zero


def test_second_order_of_a_select_is_finite(jax, jax_module):
    """The derived gradient's selects are guarded (double where): JAX's second derivative of
    Xlogy at x = 0, where log(y) of the untaken branch is NaN for y < 0, is finite."""
    binary = jax_module("binary")
    x, y = np.array([0.0, 0.0, 1.5]), np.array([-1.0, 2.0, 3.0])
    second = jax.grad(lambda x: jax.grad(lambda x: binary.xlogy(x, y).sum())(x).sum())(x)
    assert np.isfinite(np.asarray(second)).all(), second
    expected = jax.grad(lambda x: jax.grad(lambda x: binary.xlogy_forward(x, y).sum())(x).sum())(np.array([1.5]))
    _close(second[2:], expected)


def test_complex_cotangents_follow_jax_convention(jax, jax_module):
    """For a holomorphic op JAX's vjp is `ct * f'(z)` (TensorFlow's, which the derived
    `<op>_vjp` follows, is `ct * conj(f'(z))`): the wrapper converts."""
    unary = jax_module("unary")
    z = np.array([0.3 + 0.7j, -1.2 + 0.4j])
    ct = np.array([1.0 + 0.5j, -0.25 + 2.0j])
    _, vjp = jax.vjp(unary.exp, z)
    _close(vjp(ct)[0], ct * np.exp(z))
    _close(unary.exp_vjp(ct, z)[0], ct * np.conj(np.exp(z)))


# --- runtime helpers, against the numpy modules' (which the library checks against TensorFlow) ---


def test_gather_and_scatter_add_against_numpy(jax, numpy_module, runtime):
    reference = numpy_module("gather")
    x = RNG.normal(size=(3, 6, 2))
    positions = np.array([[0, 5, -1], [7, 2, 2]])  # -1 and 7 outside the axis
    for fill in (0, -np.inf):
        _close(runtime._gather(x, positions, -2, fill), reference._gather(x, positions, -2, fill))
    values = RNG.normal(size=(3, 2, 3, 2))
    _close(runtime._scatter_add(values, positions, 1, 6), reference._scatter_add(values, positions, 1, 6))
    jitted = jax.jit(runtime._scatter_add, static_argnums=(2, 3))
    _close(jitted(values, positions, 1, 6), reference._scatter_add(values, positions, 1, 6))


@pytest.mark.parametrize("strides, dilations, pads", [((1, 1), (1, 1), (0, 0)), ((2, 1), (1, 2), (1, 2)), ((2, 2), (1, 1), (-1, 1))])
def test_convolution_helpers_against_numpy(jax, numpy_module, strides, dilations, pads, runtime):
    reference = numpy_module("conv")
    x, f = RNG.normal(size=(2, 9, 8, 3)), RNG.normal(size=(3, 2, 3, 4))
    counts = [(h + 2 * p - ((k - 1) * d + 1)) // s + 1 for h, k, s, d, p in zip((9, 8), (3, 2), strides, dilations, pads)]
    geometry = dict(strides=strides, dilations=dilations, pads=pads)
    y = runtime._conv(x, f, sizes=counts, **geometry)
    _close(y, reference._conv(x, f, sizes=counts, **geometry))
    g = RNG.normal(size=np.shape(y))
    _close(runtime._conv_backprop_input(g, f, sizes=(9, 8), **geometry),
           reference._conv_backprop_input(g, f, sizes=(9, 8), **geometry))
    _close(runtime._conv_backprop_filter(x, g, sizes=(3, 2), **geometry),
           reference._conv_backprop_filter(x, g, sizes=(3, 2), **geometry))
    depthwise = RNG.normal(size=(3, 2, 3, 2))
    yd = runtime._depthwise_conv(x, depthwise, sizes=counts, **geometry)
    _close(yd, reference._depthwise_conv(x, depthwise, sizes=counts, **geometry))
    gd = RNG.normal(size=np.shape(yd))
    _close(runtime._depthwise_conv_backprop_input(gd, depthwise, sizes=(9, 8), **geometry),
           reference._depthwise_conv_backprop_input(gd, depthwise, sizes=(9, 8), **geometry))
    _close(runtime._depthwise_conv_backprop_filter(x, gd, sizes=(3, 2), **geometry),
           reference._depthwise_conv_backprop_filter(x, gd, sizes=(3, 2), **geometry))


def test_max_pool_backprop_against_numpy(jax, numpy_module, runtime):
    reference = numpy_runtime(numpy_module("conv"))
    x = np.round(RNG.normal(size=(2, 7, 6, 3)), 1)  # ties inside windows
    geometry = dict(window=(3, 2), strides=(2, 2), pads=(1, 0), sizes=(7, 6))
    spans = reference._window_span(x, (1, 0), reference._conv_spans((2, 2), (1, 1), (4, 3), (3, 2)), fill=-np.inf)
    y = np.empty((2, 4, 3, 3))  # each window's maximum, by a loop over the windows
    for u in range(4):
        for v in range(3):
            y[:, u, v] = spans[:, 2 * u : 2 * u + 3, 2 * v : 2 * v + 2].max(axis=(1, 2))
    g = RNG.normal(size=y.shape)
    _close(runtime._max_pool_backprop(x, y, g, **geometry), reference._max_pool_backprop(x, y, g, **geometry))


# --- against JAX's own autodiff of the generated formula, through the CLI (the finite
# differences of every op in the JAX target: tests/test_library.py) ---

# ops whose lowering covers most kinds of array operation the JAX printer emits (matmuls,
# reductions, gathers and scatter-adds, convolutions, pooling, list outputs, stages, complex
# conjugation, selects): the default run; `-m exhaustive` diffs the library
SPREAD = ("MatMul", "BatchMatMulV2", "Softmax", "LayerNorm", "ScaledDotProductAttention", "Conv2D",
          "MaxPool", "GatherV2", "Unpack", "Xlogy", "Exp")
# where JAX's autodiff and the derived gradient both differ from finite differences: float32
# kernels of JAX's at large arguments (x**2 loses the digits cos(pi x**2 / 2) needs)
BOTH_OFF_IN_FLOAT32 = {"FresnelCos"}


def _against_jax(derived, folder, *args):
    out = folder / "diff.json"
    result = run_symgrad("diff", "ops", "--against", "jax", "--target", "jax", "--generated", str(derived[0]),
                         "-j", "2", "--json", str(out), *args, cwd=ROOT)
    assert out.exists(), result.stdout[-3000:] + result.stderr[-3000:]
    return result, json.loads(out.read_text())


def _check_against_jax(report):
    """Every row matches JAX's autodiff of the formula, or differs where finite differences say
    JAX's is wrong (NaN from a select's untaken branch: the double-where problem; a complex
    branch cut), or where they cannot tell the two apart (ties, kinks); never where they side
    with JAX's."""
    rows = report["results"]
    for r in rows:
        where = (r["op"], r["variant"], r["dtype"], r["message"][:200], r["verdict"])
        if r["status"] == "mismatch" and r["verdict"] == BOTH_WRONG:
            assert r["op"] in BOTH_OFF_IN_FLOAT32 and r["dtype"] == "float32", where
        elif r["status"] == "mismatch":
            assert r["verdict"] in (REFERENCE_WRONG, BOTH_RIGHT, UNDECIDED), where
        elif r["status"] == "no-reference":
            assert r["op"] in NOT_IN_JAX and "cannot print bessel" in r["message"], where
        else:
            assert r["status"] == "match", where
    return rows


@pytest.fixture(scope="module")
def spread_against_jax(jax, derived, tmp_path_factory):
    args = [a for op in SPREAD for a in ("--op", op)]
    return _against_jax(derived, tmp_path_factory.mktemp("jax_spread"), *args, "--sample", "1")


def test_spread_against_jax(spread_against_jax):
    """The derived gradient through the `custom_vjp` wrapper against JAX's own function's rules
    (jnp.matmul, jax.nn.softmax, lax.conv_general_dilated, ...), float32, float64 and the
    complex dtypes (JAX's convention)."""
    result, report = spread_against_jax
    rows = _check_against_jax(report)
    assert {r["op"] for r in rows} == set(SPREAD)
    assert {r["dtype"] for r in rows if r["status"] == "match"} == {"float32", "float64", "complex64", "complex128"}
    from symgrad.backends.jax.functions import FUNCTIONS

    assert set(SPREAD) <= set(FUNCTIONS)
    # jax.scipy.special.xlogy's gradient in x is NaN at x = 0, y < 0 (the untaken log(y)); ours 0
    wrong = {r["op"]: r["message"] for r in rows if r["verdict"] == REFERENCE_WRONG}
    assert "JAX's own Xlogy" in wrong["Xlogy"]
    # jax.nn.dot_product_attention computes its logits in float32, float64 inputs too
    assert "JAX's own ScaledDotProductAttention" in wrong["ScaledDotProductAttention"]


def _diff_in_process(derived, name: str, dtype: str = "float64"):
    from symgrad.verify.ops_under_test import load_derived
    from symgrad.verify.diff import make_reference, run_diff

    ops = [op for op in load_derived([ROOT / "ops"], generated=derived[0]) if op.name == name]
    return run_diff(ops, make_reference("jax"), (dtype,), ("jax",), sample=1)


def test_a_table_entry_computing_another_function_is_a_forward_mismatch(jax, derived, monkeypatch):
    """The reference's outputs are checked against the declaration's: a table entry that is
    not the op (here 1.5 exp(x), whose gradient is consistent with its own forward) is found
    by its forward, not blamed on JAX."""
    from symgrad.backends.jax import functions

    monkeypatch.setitem(functions.FUNCTIONS, "Exp", lambda x: 1.5 * jax.numpy.exp(x))
    (row,) = _diff_in_process(derived, "Exp")
    assert row.status == "mismatch"
    assert "the forward output y of JAX's own Exp" in row.message, row.message


def test_norm_gradient_at_zero_is_nan_in_jax(jax, derived):
    """TensorFlow issue 12071's bug, in JAX: jnp.linalg.norm's gradient at 0 is NaN; the
    derived gradient is 0 there, as finite differences of the (finite) norm say."""
    assert np.isnan(jax.grad(lambda x: jax.numpy.linalg.norm(x))(jax.numpy.zeros(2))).all()
    (row,) = _diff_in_process(derived, "EuclideanNorm")
    assert row.status == "mismatch" and row.verdict == REFERENCE_WRONG, row.message
    assert "JAX's own EuclideanNorm" in row.message


@pytest.mark.exhaustive
def test_library_against_jax_autodiff(jax, derived, tmp_path_factory):
    """Every op in ops/ (its first variant: every variant's finite differences are
    tests/test_library.py's), as above; the ones JAX cannot express are the Bessel J, K and Y
    functions, each with its reason."""
    result, report = _against_jax(derived, tmp_path_factory.mktemp("jax_library"), "--sample", "1")
    rows = _check_against_jax(report)
    assert {r["op"] for r in rows if r["status"] == "no-reference"} == NOT_IN_JAX
    # every other op compared (some differ in every row: JAX's NaN for Pow's, Xlogy's, ...)
    assert len({r["op"] for r in rows if r["status"] in ("match", "mismatch")}) >= 160


NOT_TWICE = {}  # op -> the case labels where JAX's second order may disagree, and why: none


# selects (Xlogy, Pow), stages (LayerNorm), kernels (Conv2D, MaxPool), gathers, lists, scans, complex
TWICE = ("Xlogy", "Pow", "LayerNorm", "Conv2D", "MaxPool", "GatherV2", "Unpack", "Cumprod")


@pytest.mark.exhaustive  # the default run: test_second_order_through_the_derived_gradient
def test_second_order_of_the_spread_against_finite_differences(jax, derived, tmp_path):
    """`symgrad check --order 2 --target jax`: JAX differentiating the derived gradient (through
    the `custom_vjp` op) agrees with finite differences of the derived gradient, float64 and
    complex128, selects included (Xlogy, Pow: guarded, no NaN from an untaken branch)."""
    out = tmp_path / "second.json"
    ops = [a for op in TWICE for a in ("--op", op)]
    result = run_symgrad("check", "ops", "--order", "2", "--target", "jax", "--generated", str(derived[0]),
                         *ops, "--sample", "1", "-j", "2", "--json", str(out), cwd=ROOT)
    assert out.exists(), result.stdout[-3000:] + result.stderr[-3000:]
    rows = json.loads(out.read_text())["results"]
    failing = [r for r in rows if r["status"] != "match" or not r["cases"]]
    assert {r["op"] for r in failing} <= set(NOT_TWICE), failing[:3]
    for r in failing:  # only where the first order's form is not twice differentiable
        assert all(case.startswith(NOT_TWICE[r["op"]]) for case in r["detail"]["failing_cases"]), r
    assert {r["op"] for r in rows} == set(TWICE)
    assert {r["dtype"] for r in rows} == {"float64", "complex128"}


# ops `jax.jit` cannot trace: their output's shape depends on input values, which JAX's
# tracing does not know (verification runs them eagerly)
NOT_JITTABLE = {
    name: "its output has max(segment_ids) + 1 rows: a value, not a shape"
    for name in ("SegmentSum", "SegmentMax", "SegmentMin", "SegmentMean", "SegmentProd",
                 "SparseSegmentSum", "SparseSegmentMean", "SparseSegmentSqrtN")
}


@pytest.mark.exhaustive
def test_every_op_runs_under_jit(jax, derived):
    """Each op's gradient under `jax.jit` (as users run it), on the first case of its first
    variant: no size or axis is left a traced value, but where the output's shape depends on
    the inputs' values."""
    from symgrad.backends.jax.verify import JaxFunction
    from symgrad.verify.compare import GradientCallError
    from symgrad.verify.ops_under_test import load_derived
    from symgrad.verify.cases import case_groups

    failing = {}
    for op in load_derived([ROOT / "ops"], generated=derived[0]):
        if op.name in NOT_IN_JAX:
            continue
        source = JaxFunction.derived(op)
        source.eager_fallback = False
        for variant, _, cases in case_groups(op, ("float64",), quick=True, sample=1):
            outcome = source.run(variant, cases[:1])[0]
            if isinstance(outcome, GradientCallError):
                failing[op.name] = str(outcome)
    assert set(failing) == set(NOT_JITTABLE), failing


def _reversed_values(np_array):
    """The same values in the reverse order (in the op's domain, as the first were)."""
    return np.asarray(np_array).reshape(-1)[::-1].reshape(np.shape(np_array))


@pytest.mark.exhaustive
def test_every_op_runs_under_vmap(jax, derived):
    """Each op's gradient under `jax.vmap` over a batch of two cases (the first case of its
    first variant, and its values reversed), equal to the two computed one at a time; the
    segment ops too (their ids, which set the output's shape, are not batched)."""
    from symgrad.backends.jax.verify import JaxFunction, import_jax
    from symgrad.verify.cases import case_groups
    from symgrad.verify.ops_under_test import load_derived

    import_jax()
    failing = {}
    for op in load_derived([ROOT / "ops"], generated=derived[0]):
        if op.name in NOT_IN_JAX:
            continue
        source = JaxFunction.derived(op)
        variant, _, cases = case_groups(op, ("float64",), quick=True, sample=1)[0]
        case = cases[0]
        inputs = [jax.numpy.asarray(x) for x in case.inputs]
        free, gradients, _ = source._gradients(variant, inputs)
        pair = [([np.asarray(case.inputs[k]) for k in free], [np.asarray(u) for u in case.upstream]),
                ([_reversed_values(case.inputs[k]) for k in free], [_reversed_values(u) for u in case.upstream])]
        try:
            batched = jax.vmap(gradients)(*(jax.tree_util.tree_map(lambda *xs: np.stack(xs), *[p[n] for p in pair])
                                            for n in range(2)))
            for n, (xs, ups) in enumerate(pair):
                one = gradients(xs, ups)
                jax.tree_util.tree_map(lambda b, o: np.testing.assert_allclose(np.asarray(b)[n], o, rtol=1e-10,
                                                                               atol=1e-10), batched, one)
        except Exception as exc:  # noqa: BLE001 - each failure is reported with its op
            failing[op.name] = str(exc).strip().splitlines()[0][:200]
    assert failing == {}
