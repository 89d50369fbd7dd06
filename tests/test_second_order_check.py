"""Second order (`symgrad check --order 2`, `symgrad/verify/second_order.py`): the gradient op G of an
op, its second-order paths per target, and the check of them against finite differences of
the derived first-order gradient, on real TensorFlow."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from conftest import OPS as OP_LIBRARY
from symgrad.verify.gradient_op import gradient_groups, gradient_variant
from symgrad.verify.ops_under_test import load_derived, variants_of
from symgrad.verify.second_order import (
    GRAPH_TARGET,
    GraphGradients,
    registered_tapes,
    run_second_order_check,
    wrapper_tapes,
)
from symgrad.testing import assert_second_order_close_to_finite_differences
from verify_support import OPS as FIXTURE_OPS, derived_folder, read_json, run_symgrad

# Representative: a guarded division and a log whose untaken branches are not finite (the
# double where), a reused output (Tanh), an index op (MatMul), integer positions (GatherV2),
# a composed op with stages (Softmax)
REPRESENTATIVE = ["Xlogy", "DivNoNan", "Tanh", "MatMul", "GatherV2", "Softmax"]


def _op(derived, name):
    (op,) = [op for op in load_derived([OP_LIBRARY], derived[0]) if op.name == name]
    return op


def _mul_case(tf, derived):
    """Mul's G on a small case: z = x * y, so G(g, x, y) = (g y, g x)."""
    op = _op(derived, "Mul")
    variant = gradient_variant(variants_of(op)[0])
    rng = np.random.default_rng(0)
    g, x, y, vx, vy = (rng.normal(size=3) for _ in range(5))
    from symgrad.verify.cases import Case

    return op, variant, Case("test", (g, x, y), (vx, vy))


def _expected_mul_second_order(case):
    (g, x, y), (vx, vy) = case.inputs, case.upstream
    return [vx * y + vy * x, vy * g, vx * g]  # w.r.t. g, x, y


def test_gradient_variant_is_the_op_one_derivative_on(derived):
    variant = variants_of(_op(derived, "Xlogy"))[0]
    g = gradient_variant(variant)
    assert g.inputs == ("grad", "x", "y") and g.outputs == ("grad_x", "grad_y")
    assert g.op.decl.func_name == "xlogy_grad" and g.first is variant
    # the forward of G is the derived numpy gradient
    x, y, grad = np.array([0.0, 2.0]), np.array([3.0, 0.5]), np.array([1.5, -1.0])
    got = g.op.function("numpy")(grad, x, y)
    np.testing.assert_allclose(got[0], [0.0, -1.0 * np.log(0.5)])
    np.testing.assert_allclose(got[1], [0.0, -1.0 * 2.0 / 0.5])


def test_gradient_cases_take_the_upstream_as_inputs(derived):
    op = _op(derived, "GatherV2")
    (variant, dtype, cases), *_ = gradient_groups(op, ("float64",))
    first = variant.first
    assert variant.inputs[: len(first.outputs)] == ("grad",)
    for case in cases:
        assert len(case.upstream) == len(first.inputs)  # one cotangent per input of the op
        for x, v in zip(case.inputs[1:], case.upstream):
            assert np.shape(x) == np.shape(v)
        # G's output for the integer positions is zeros, not None
        outputs = variant.op.function("numpy")(*case.inputs, **variant.attrs)
        positions = first.inputs.index("indices")
        assert not np.any(outputs[positions])


def test_nested_tapes_over_the_wrapper_give_the_second_order(tf, derived):
    op, variant, case = _mul_case(tf, derived)
    (outcome,) = wrapper_tapes(op).run(variant, [case])
    for got, expected in zip(outcome.grads, _expected_mul_second_order(case)):
        np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_tf_gradients_twice_apply_the_registered_gradient(tf, derived):
    """The graph path differentiates the generated gradient, not TensorFlow's: a gradient
    function doubled is seen doubled at second order."""
    op, variant, case = _mul_case(tf, derived)
    grad_fn = op.function("tensorflow", "_grad")
    expected = _expected_mul_second_order(case)
    for fn, factor in ((grad_fn, 1.0), (lambda o, g: [2 * d for d in grad_fn(o, g)], 2.0)):
        (outcome,) = GraphGradients(fn, "test", []).run(variant, [case])
        for got, want in zip(outcome.grads, expected):
            np.testing.assert_allclose(got, factor * want, rtol=1e-12)


def test_tensorflow_own_second_derivative(tf, derived):
    op, variant, case = _mul_case(tf, derived)
    (outcome,) = registered_tapes("Mul").run(variant, [case])
    for got, expected in zip(outcome.grads, _expected_mul_second_order(case)):
        np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_double_where_second_order_is_finite(tf, tf_module):
    """Xlogy at x = 0, y < 0 and DivNoNan at y = 0: the untaken branch's log(y) and 1/y are
    not finite, and once made TensorFlow's second derivative NaN through them. Pow at x = 0,
    y in (0, 1): its branches x > 0 and x <= 0 share `y * x**(y - 1)` (inf there), which the
    gradient once computed before the select, where no double where could guard it."""
    binary = tf_module("binary")
    cases = [(binary.xlogy, [0.0, 2.0], [-2.0, 3.0]), (binary.div_no_nan, [1.0, 2.0], [0.0, 3.0])]
    for fn, x, y in cases + [(binary.power, [0.0, 0.0, 2.0], [0.0, 1.0, 3.0])]:
        x, y = tf.constant(x, tf.float64), tf.constant(y, tf.float64)
        with tf.GradientTape() as outer:
            outer.watch([x, y])
            with tf.GradientTape() as inner:
                inner.watch([x, y])
                z = fn(x, y)
            grads = inner.gradient(z, [x, y])
        second = outer.gradient(grads, [x, y])
        assert all(np.isfinite(s.numpy()).all() for s in second), (fn.__name__, second)


def test_check_order_2_through_the_cli(derived, tmp_path):
    args = ["check", OP_LIBRARY, "--order", "2", "--generated", derived[0], "--target", "tensorflow"]
    args += [a for name in REPRESENTATIVE for a in ("--op", name)] + ["--sample", "1", "-j", "1"]
    result = run_symgrad(*args, "--json", tmp_path / "order2.json")
    report = read_json(tmp_path / "order2.json")
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert {r["op"] for r in report["results"]} == set(REPRESENTATIVE)
    assert {r["status"] for r in report["results"]} == {"match"}
    assert {r["target"] for r in report["results"]} == {"tensorflow", GRAPH_TARGET}
    assert all(r["cases"] > 0 for r in report["results"])
    assert report["results"][0]["reference"] == "finite differences of the derived gradient"


def test_diff_order_2_against_tensorflow(derived, tmp_path):
    """In float64: in complex128, TensorFlow's own second derivative of Xlogy disagrees with
    finite differences (the report's verdict), where the derived one agrees."""
    args = ["diff", OP_LIBRARY, "--against", "tensorflow", "--order", "2", "--generated", derived[0], "--dtype", "float64"]
    args += ["--target", "tensorflow", "--op", "Xlogy", "--op", "Tanh", "--op", "MatMul", "--sample", "1", "-j", "1"]
    result = run_symgrad(*args, "--json", tmp_path / "diff2.json")
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    statuses = {r["status"] for r in read_json(tmp_path / "diff2.json")["results"]}
    assert statuses == {"match"}


def test_testing_api_second_order(derived):
    results = assert_second_order_close_to_finite_differences(
        OP_LIBRARY, ops=["Xlogy", "Tanh"], targets=("tensorflow",), generated=derived[0]
    )
    assert {(r.op, r.target) for r in results} == {
        (op, target) for op in ("Xlogy", "Tanh") for target in ("tensorflow", GRAPH_TARGET)
    }


# --- numpy: the generated `<op>_grad_grad`, where the module has it ---------------------------

SUB_GRAD_GRAD = '''

def subtract_grad_grad(grad_grad_x, grad_grad_y, grad, x, y):
    """Sub's second order, by hand: G(g, x, y) = (g, -g) is linear in g alone."""
    return grad_grad_x - grad_grad_y{fault}, None, None
'''


def _fixture_folder(tmp_path, fault: str | None):
    """The fixture ops derived, with Sub's `subtract_grad_grad` replaced (None: removed)."""
    folder = tmp_path / "generated"
    shutil.copytree(derived_folder(FIXTURE_OPS), folder)
    module = folder / "ops_numpy.py"
    extra = '\nglobals().pop("subtract_grad_grad", None)\n' if fault is None else SUB_GRAD_GRAD.format(fault=fault)
    module.write_text(module.read_text() + extra)
    return folder


def test_numpy_second_order_not_generated_is_an_unavailable_row(tmp_path):
    ops = [op for op in load_derived([FIXTURE_OPS], _fixture_folder(tmp_path, None)) if op.name == "Sub"]
    results = run_second_order_check(ops, ("numpy",))
    assert [(r.target, r.status) for r in results] == [("numpy", "unavailable")]
    assert "has no subtract_grad_grad" in results[0].message and "not generated" in results[0].message


def test_numpy_second_order_is_checked_when_generated(tmp_path):
    folder = _fixture_folder(tmp_path, "")
    results = assert_second_order_close_to_finite_differences(
        FIXTURE_OPS, ops=["Sub"], targets=("numpy",), generated=folder
    )
    assert [(r.target, r.status) for r in results] == [("numpy", "match")]


def test_numpy_second_order_of_list_inputs_and_outputs(derived):
    """ConcatV2 and Einsum take a list, Unpack and SplitV return one: their `<op>_grad_grad`
    takes the cotangents of a list input's gradients as one list (ConcatV2's), and a list
    output's upstream gradients as one list (Unpack's), as `<op>_grad` does."""
    ops = ["ConcatV2", "Einsum", "Unpack", "SplitV"]
    results = assert_second_order_close_to_finite_differences(OP_LIBRARY, ops=ops, targets=("numpy",), generated=derived[0])
    assert {r.op for r in results} == set(ops) and {r.status for r in results} == {"match"}


def test_numpy_second_order_fault_is_pinpointed(tmp_path):
    folder = _fixture_folder(tmp_path, " + 0.5 * grad")
    with pytest.raises(AssertionError) as raised:
        assert_second_order_close_to_finite_differences(
            FIXTURE_OPS, ops=["Sub"], targets=("numpy",), generated=folder
        )
    report = str(raised.value)
    assert "MISMATCH: Sub float64 numpy against finite differences of the derived gradient" in report
    assert "the gradient of grad differs" in report
    assert "from ops_numpy import subtract_grad" in report and "subtract_grad_grad(" in report


def test_a_piecewise_constant_op_has_a_zero_second_order(derived, numpy_module):
    """Floor and Sign have no gradient, so their second order is zero: a generated
    `<op>_grad_grad` returning None for each, checked, not an error row (issue 41)."""
    unary = numpy_module("unary")
    assert unary.floor_grad_grad(np.ones(3), np.ones(3), np.array([0.5, 1.5, -2.0])) == (None, None)
    ops = ["Floor", "Ceil", "Rint", "Round", "Sign"]
    results = assert_second_order_close_to_finite_differences(OP_LIBRARY, ops=ops, targets=("numpy",), generated=derived[0])
    assert {r.op for r in results} == set(ops) and {r.status for r in results} == {"match"}


def test_sigmoid_second_order_is_finite_at_extremes_in_every_target(derived, jax, torch):
    """Sigmoid, declared `1 / (1 + exp(-x))` and complex: its forward is one sigmoid (the
    `logistic` rewrite, an identity for complex values too), so JAX's second order through it
    is finite at x = -1000 (it was NaN); torch's complex sigmoid, NaN there, is not used."""
    results = assert_second_order_close_to_finite_differences(
        OP_LIBRARY, ops=["Sigmoid"], targets=("numpy", "jax", "torch"), generated=derived[0]
    )
    assert {r.target for r in results} == {"numpy", "jax", "torch"} and {r.status for r in results} == {"match"}
    assert {r.dtype for r in results} == {"float64", "complex128"}


def test_a_derivative_the_framework_does_not_implement_is_unavailable(derived, torch):
    """PyTorch implements no derivative of `zeta`, which Zeta's derived torch gradient calls:
    its second order through torch is an `unavailable` row saying so, not an error."""
    ops = [op for op in load_derived([OP_LIBRARY], derived[0]) if op.name == "Zeta"]
    results = run_second_order_check(ops, ("torch",))
    assert [(r.target, r.status) for r in results] == [("torch", "unavailable")]
    assert "the derivative for 'zeta' is not implemented" in results[0].message


def test_only_a_framework_saying_it_does_not_implement_something_is_a_limit():
    from symgrad.verify.compare import GradientCallError
    from symgrad.verify.sources import FrameworkLimit, call_failed

    assert isinstance(call_failed(NotImplementedError("the derivative for 'zeta' is not implemented.")), FrameworkLimit)
    limit = call_failed(RuntimeError("Current CPU implementations do not yet support dilation rates larger than 1."), "the second derivative")
    assert isinstance(limit, FrameworkLimit) and limit.reason.startswith("raised, in the second derivative, RuntimeError")
    assert isinstance(call_failed(ValueError("operands could not be broadcast")), GradientCallError)


# --- the whole library ---------------------------------------------------------------------------


# Where the library's TensorFlow second order does not agree with finite differences, and why
NOT_TWICE_IN_TENSORFLOW = {  # unavailable rows, but FresnelSin's
    **dict.fromkeys(("Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter"),
                    "dilated variants: TensorFlow's CPU kernels cannot differentiate a dilated convolution's "
                    "backprop again (InvalidArgumentError: not yet support dilations)"),
    "ExtractVolumePatches": "under tf.gradients twice, TensorFlow raises UnimplementedError",
    "FresnelSin": "at x = 1000 the finite differences' step is the period of sin(pi x**2 / 2)",
}


@pytest.mark.second_order_library
def test_library_second_order_tensorflow(derived, tmp_path):
    """`symgrad check ops --order 2 --target tensorflow`: every op, variant and path; the ops
    that disagree are the ones listed, for the reasons listed."""
    args = ["check", OP_LIBRARY, "--order", "2", "--generated", derived[0], "--target", "tensorflow"]
    result = run_symgrad(*args, "-j", "2", "--json", tmp_path / "library2.json")
    failing = [r for r in read_json(tmp_path / "library2.json")["results"] if r["status"] != "match"]
    assert {r["op"] for r in failing} == set(NOT_TWICE_IN_TENSORFLOW), result.stdout[-6000:]


NOT_TWICE_IN_NUMPY = {  # op type -> why its numpy second order is not a match
    "IdentityN": "a list input and a list output: no numpy second order generated",
    "FresnelSin": NOT_TWICE_IN_TENSORFLOW["FresnelSin"],
    **dict.fromkeys(("SegmentProd", "UnsortedSegmentProd"), "no numpy second order generated (test_second_order.py's NOT_DERIVED_AGAIN says why)"),
}


@pytest.mark.exhaustive
def test_library_second_order_numpy(derived, tmp_path):
    """`symgrad check ops --order 2 --target numpy`: every op's generated `<op>_grad_grad`,
    every variant, against finite differences of its `<op>_grad` (found BroadcastTo's at an
    input of fewer axes, MaxPool's naming an unbound window index, Sigmoid's on complex)."""
    args = ["check", OP_LIBRARY, "--order", "2", "--generated", derived[0], "--target", "numpy"]
    result = run_symgrad(*args, "-j", "2", "--json", tmp_path / "numpy2.json")
    failing = [r for r in read_json(tmp_path / "numpy2.json")["results"] if r["status"] != "match"]
    assert {r["op"] for r in failing} == set(NOT_TWICE_IN_NUMPY), result.stdout[-6000:]
