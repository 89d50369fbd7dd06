"""`symgrad check` as a subprocess: derived gradients against finite differences, on kinks and
declared conventions, complex values, several outputs and large inputs; and faults injected
into a derived module, found at the right input and element."""

from __future__ import annotations

import shutil
import textwrap

import numpy as np
import pytest

from verify_support import derived_folder, read_json, rows, run_symgrad

from symgrad.verify.check import available_targets

CHECK_OPS = '''
"""Ops that exercise finite differences: kinks, a declared convention, complex, large inputs."""

import sympy as sp

from symgrad import dims, elementwise, indices, op, tensor

A, B, C, D, N = dims("A B C D N")
a, b, c, d, i = indices("a b c d i")



@elementwise("Hinge")
def hinge(x):
    """2x where positive, else -x: a kink at 0, where the declared -1 is a one-sided derivative."""
    return sp.Piecewise((2 * x, x > 0), (-x, True))


@elementwise("AbsPlus")
def abs_plus(x):
    """|x| + x: a kink at 0, where sign(0) + 1 = 1 lies between the one-sided derivatives."""
    return sp.Abs(x) + x


@elementwise("GuardedLog", outputs=("z",))
def guarded_log(x, y):
    """x * log(y), and 0 where x == 0: a convention finite differences cannot see."""
    return sp.Piecewise((0, sp.Eq(x, 0)), (x * sp.log(y), True))


@elementwise("SinCos", outputs=("s", "c"), complex=True)
def sin_cos(x):
    """Sine and cosine: two outputs, complex values."""
    return sp.sin(x), sp.cos(x)


@op("WeightedSum")
def weighted_sum():
    """y[a, b] = sum over c, d of x[a, b, c, d] * w[c, d]: x is large (random directions)."""
    x = tensor("x", (A, B, C, D))
    w = tensor("w", (C, D))
    return {"y": ((a, b), sp.Sum(x[a, b, c, d] * w[c, d], (c, 0, C - 1), (d, 0, D - 1)))}


@op("SquaredNorm")
def squared_norm():
    """Sum of squares over the last axis, for any leading axes."""
    x = tensor("x", (..., N))
    return {"y": ((...,), sp.Sum(x[..., i] ** 2, (i, 0, N - 1)))}
'''

# Appended to the derived numpy module: each wraps a derived gradient with a fault.
FAULTS = '''

_derived_hinge_grad = hinge_grad
_derived_sin_cos_grad = sin_cos_grad
_derived_weighted_sum_grad = weighted_sum_grad
_derived_squared_norm_grad = squared_norm_grad


def hinge_grad(grad, x, *, y=None):
    """Wrong where x == 1 only."""
    (g,) = _derived_hinge_grad(grad, x, y=y)
    return (np.where(x == 1.0, g + 0.5, g),)


def sin_cos_grad(grad_s, grad_c, x, *, s=None, c=None):
    """A sign error."""
    (g,) = _derived_sin_cos_grad(grad_s, grad_c, x, s=s, c=c)
    return (-g,)


def weighted_sum_grad(grad, x, w, *, y=None):
    """The gradient of x off by 0.1 percent."""
    gx, gw = _derived_weighted_sum_grad(grad, x, w, y=y)
    return gx * 1.001, gw


def squared_norm_grad(grad, x, *, y=None):
    """Right values, in float64 whatever x is: a count or a constant array promoted them."""
    (g,) = _derived_squared_norm_grad(grad, x, y=y)
    return (g.astype(np.float64),)
'''


@pytest.fixture(scope="module")
def check_ops(tmp_path_factory):
    path = tmp_path_factory.mktemp("check") / "check_ops.py"
    path.write_text(textwrap.dedent(CHECK_OPS))
    return path, derived_folder(path)


def test_derived_gradients_pass(check_ops, tmp_path):
    path, folder = check_ops
    report_path = tmp_path / "report.json"
    result = run_symgrad("check", path, "--generated", folder, "--json", report_path, "-v")
    assert result.returncode == 0, result.stdout + result.stderr
    report = read_json(report_path)
    assert report["summary"]["match"] == len(report["results"]) > 0
    assert {r["target"] for r in report["results"]} == set(available_targets())  # numpy, tensorflow, jax
    # ordinary inputs, then extreme ones (symgrad.verify.extremes: finiteness in each real dtype)
    assert {r["reference"] for r in report["results"]} == {"finite differences", "finite differences, extreme inputs"}
    assert {r["dtype"] for r in rows(report, "SinCos", reference="finite differences")} == {"float64", "complex128"}
    assert {r["dtype"] for r in rows(report, "SinCos", reference="finite differences, extreme inputs")} == {"float32", "float64"}
    # x == 0 probes: the declared gradient 0 there is not what differences see; skipped, counted
    assert all(r["skipped"] > 0 for r in rows(report, "GuardedLog", reference="finite differences"))
    assert "WeightedSum" in result.stdout and "SquaredNorm" in result.stdout
    summary_line = result.stdout.strip().splitlines()[-1]
    assert f"{len(report['results'])} result(s) against finite differences, extreme inputs included: " in summary_line


@pytest.fixture(scope="module")
def faulty_check(check_ops, tmp_path_factory):
    path, folder = check_ops
    broken = tmp_path_factory.mktemp("broken")
    for module in folder.iterdir():
        shutil.copy(module, broken / module.name)
    numpy_module = broken / "check_ops_numpy.py"
    numpy_module.write_text(numpy_module.read_text() + FAULTS)
    report_path = broken / "report.json"
    result = run_symgrad(
        "check", path, "--generated", broken, "--target", "numpy", "--json", report_path
    )
    return result, read_json(report_path)


def test_faults_exit_1(faulty_check):
    result, report = faulty_check
    assert result.returncode == 1, result.stderr
    assert {r["op"] for r in report["results"] if r["status"] == "mismatch"} == {
        "Hinge",
        "SinCos",
        "WeightedSum",
    }
    assert "smallest failing case, to paste:" in result.stdout


def test_a_gradient_of_another_dtype_is_a_finding_of_its_own_kind(faulty_check):
    result, report = faulty_check
    (row,) = rows(report, "SquaredNorm", dtype="float32", reference="finite differences, extreme inputs")
    assert row["status"] == "wrong-dtype" and row["detail"]["input"] == "x"
    assert row["message"] == "the gradient of x is float64, but x is float32"
    # float64 is float64: right values, right dtype
    assert {r["status"] for r in rows(report, "SquaredNorm", dtype="float64")} == {"match"}
    assert report["summary"]["wrong-dtype"] == 1 and "WRONG-DTYPE: SquaredNorm" in result.stdout


def test_wrong_value_at_one_point_is_found_there(faulty_check):
    (row,) = rows(faulty_check[1], "Hinge", reference="finite differences")
    detail = row["detail"]
    assert row["status"] == "mismatch" and detail["input"] == "x"
    assert detail["values"]["x"] == 1.0
    assert detail["got"] == pytest.approx(detail["expected"] + 0.5, abs=1e-6)
    assert "x = np.array([1.0]" in detail["snippet"]


@pytest.mark.parametrize("dtype", ["float64", "complex128"])
def test_sign_error_in_a_two_output_op(faulty_check, dtype):
    (row,) = rows(faulty_check[1], "SinCos", dtype=dtype, reference="finite differences")
    detail = row["detail"]
    assert row["status"] == "mismatch" and detail["input"] == "x"
    assert complex(detail["got"]) == pytest.approx(-complex(detail["expected"]), rel=1e-5)


def test_large_input_checked_along_random_directions(faulty_check):
    (row,) = rows(faulty_check[1], "WeightedSum", reference="finite differences")
    assert row["status"] == "mismatch" and row["detail"]["input"] == "x"
    assert "random direction" in row["message"]


# the op library against finite differences, op by op and on both targets: tests/test_library.py


def test_finite_differences_that_overflow_warn_nothing():
    """A forward whose loss overflows (a large output times its upstream gradient) is told by
    the differences' `finite`, not by a RuntimeWarning leaking into derive's output."""
    import warnings

    from symgrad.verify.cases import Case
    from symgrad.verify.differences import differences, unit

    x = np.array([10.0, 1.0])
    case = Case("large", (x,), upstream=(np.array([1e10, 1.0]),))
    forward = lambda x: (x * 1e300,)  # noqa: E731 - finite, but 1e301 * 1e10 is not

    class NoBoundary:
        def changes(self, points):
            return np.zeros(np.shape(x), bool)

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        found = differences(forward, NoBoundary(), case, 0, unit(x, (0,)), 1.0, per_element=False)
    assert not found["finite"]


UNSTABLE_FORWARD_OPS = '''
"""A forward that loses its digits in float64 where its gradient does not."""

import sympy as sp

from symgrad import elementwise


@elementwise("LogOneMinusSigmoidCubed")
def log_one_minus_sigmoid_cubed(x):
    """log(1 - sigmoid(x)**3): 1 - sigmoid(30)**3 keeps 3 digits in float64, and its
    differences at x = 30 are 0 where the derivative is -1."""
    return sp.log(1 - 1 / (1 + sp.exp(-x)) ** 3)
'''

UNSTABLE_FORWARD_FAULT = '''

_derived_grad = log_one_minus_sigmoid_cubed_grad


def log_one_minus_sigmoid_cubed_grad(grad, x, *, y=None):
    """Off by one percent everywhere."""
    (g,) = _derived_grad(grad, x, y=y)
    return (g * 1.01,)
'''


@pytest.fixture(scope="module")
def unstable_forward(tmp_path_factory):
    path = tmp_path_factory.mktemp("unstable") / "unstable_ops.py"
    path.write_text(textwrap.dedent(UNSTABLE_FORWARD_OPS))
    return path, derived_folder(path)


@pytest.mark.skipif(np.finfo(np.longdouble).eps >= np.finfo(np.float64).eps, reason="no float wider than float64 here")
def test_a_forward_that_loses_precision_is_blamed_not_the_gradient(unstable_forward, tmp_path):
    """Differences of the float64 forward at x = 30 are 0; those of the same forward in
    extended precision agree with the derived gradient: the row says the forward is at fault
    (and still fails), where it said the gradient was."""
    path, folder = unstable_forward
    report_path = tmp_path / "report.json"
    result = run_symgrad("check", path, "--generated", folder, "--target", "numpy", "--json", report_path)
    assert result.returncode == 1, result.stdout + result.stderr
    report = read_json(report_path)
    (row,) = rows(report, "LogOneMinusSigmoidCubed", dtype="float64", reference="finite differences")
    assert row["status"] == "unstable forward", row
    assert row["message"].startswith("the forward loses precision in float64 here")
    assert row["detail"]["values"]["x"] == 30.0 and row["detail"]["expected"] == 0.0
    assert report["summary"]["mismatch"] == 0 and report["summary"]["unstable forward"] == 1
    assert "UNSTABLE FORWARD: LogOneMinusSigmoidCubed" in result.stdout


def test_a_wrong_gradient_of_an_unstable_forward_is_still_a_mismatch(unstable_forward, tmp_path):
    path, folder = unstable_forward
    for module in folder.iterdir():
        shutil.copy(module, tmp_path / module.name)
    numpy_module = tmp_path / "unstable_ops_numpy.py"
    numpy_module.write_text(numpy_module.read_text() + UNSTABLE_FORWARD_FAULT)
    report_path = tmp_path / "report.json"
    result = run_symgrad("check", path, "--generated", tmp_path, "--target", "numpy", "--json", report_path)
    assert result.returncode == 1
    (row,) = rows(read_json(report_path), "LogOneMinusSigmoidCubed", dtype="float64", reference="finite differences")
    assert row["status"] == "mismatch"
