"""`symgrad check` at extreme inputs (`symgrad.verify.extremes`): a gradient that is NaN or infinite
where finite differences of a finite forward are not is a row of its own kind, "non-finite",
per real dtype; the library's rewritten activations pass there."""

from __future__ import annotations

import functools

import numpy as np

from symgrad.verify.ops_under_test import load_derived
from symgrad.verify.check import available_targets
from symgrad.verify.cases import bound_forward
from symgrad.verify.ops_under_test import variants_of
from symgrad.verify.extremes import MAGNITUDES, REFERENCE, extreme_cases, nonfinite_findings

from conftest import ROOT
from verify_support import derived_folder, read_json, rows, run_symgrad

FIXTURES = ROOT / "tests" / "fixtures"


def test_cli_reports_a_gradient_that_overflows_where_the_value_is_finite(tmp_path):
    report = tmp_path / "report.json"
    result = run_symgrad("check", str(FIXTURES / "nonfinite.py"), "--json", str(report))
    assert result.returncode == 1, result.stdout + result.stderr
    # float64's ordinary probes (|x| up to 1e3) already find it: that row's report comes first
    assert "also non-finite in float32 numpy: the gradient of x is nan" in result.stdout
    found = rows(read_json(report), "RawTwoTermLogistic", reference=REFERENCE)
    assert {(r["dtype"], r["target"]) for r in found if r["status"] == "non-finite"} == {
        (dtype, target) for dtype in ("float32", "float64") for target in available_targets()
    }
    worst = found[0]["detail"]
    assert worst["input"] == "x" and worst["got"] == "nan" and abs(worst["expected"]) < 1e-6
    kink = rows(read_json(report), "Magnitude", reference=REFERENCE)  # NaN at 0: no derivative there
    assert len(kink) == 2 * len(available_targets()) and all(r["status"] == "match" for r in kink), kink


def test_rewritten_activations_are_finite_at_extremes(tmp_path):
    # numpy alone: tests/test_stability.py runs the same activations through TensorFlow
    report = tmp_path / "report.json"
    result = run_symgrad("check", str(FIXTURES / "stable.py"), "--target", "numpy", "--json", str(report))
    assert result.returncode == 0, result.stdout + result.stderr
    extremes = [r for r in read_json(report)["results"] if r["reference"] == REFERENCE]
    assert len(extremes) == 6 * 2  # ops x real dtypes
    assert all(r["status"] == "match" and r["cases"] >= 1 for r in extremes), extremes


@functools.cache
def raw_two_term_logistic():
    """The variant of RawTwoTermLogistic and its derived numpy forward (derived once)."""
    ops = load_derived([FIXTURES / "nonfinite.py"], derived_folder(FIXTURES / "nonfinite.py"))
    (variant,) = variants_of(next(op for op in ops if op.name == "RawTwoTermLogistic"))
    return variant, bound_forward(variant)


def test_cases_straddle_each_dtypes_exp_overflow():
    variant, forward = raw_two_term_logistic()
    for dtype, overflow in (("float32", 88.72), ("float64", 709.78)):
        (case,) = extreme_cases(variant, forward, dtype)
        (x,) = case.inputs
        assert x.dtype == np.dtype(dtype)
        assert (np.abs(x) < overflow).any() and (np.abs(x) > overflow).any()
        assert max(MAGNITUDES[dtype]) in np.abs(x)


def test_findings_only_where_the_gradient_is_not_finite():
    variant, forward = raw_two_term_logistic()
    (case,) = extreme_cases(variant, forward, "float64")
    nan_everywhere = [np.full_like(case.inputs[0], np.nan)]
    (finding,) = nonfinite_findings(variant, forward, case, nan_everywhere, "float64")
    assert finding.status == "non-finite" and finding.input == "x"
    finite = [np.zeros_like(case.inputs[0])]
    assert nonfinite_findings(variant, forward, case, finite, "float64") == []
