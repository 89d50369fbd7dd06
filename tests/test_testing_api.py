"""`symgrad.testing`: the assertions a project puts in its own test suite."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from symgrad.testing import assert_gradients_close_to_finite_differences, assert_gradients_match
from verify_support import CORRECT, FAULTY, OPS, derived_folder

NUMPY_OPS = ["Sub", "Sigmoid", "ProdThree", "Xlogy", "Xdivy"]  # hand-written in numpy


def load(path):
    spec = importlib.util.spec_from_file_location(f"_api_test_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_correct_module_passes_and_returns_the_results():
    results = assert_gradients_match(
        OPS, against=CORRECT, ops=NUMPY_OPS, targets=("numpy",), generated=derived_folder(OPS)
    )
    assert {r.op for r in results} == set(NUMPY_OPS)
    assert {r.status for r in results} == {"match"}


def test_module_object_and_map():
    results = assert_gradients_match(
        OPS,
        against=load(CORRECT),
        map={"MatMul": "matmul_numpy_grad"},
        ops=["MatMul"],
        dtypes=("float64", "complex128"),
        targets=("numpy",),
        generated=derived_folder(OPS),
    )
    assert len(results) == 8 and {r.status for r in results} == {"match"}


def test_fault_raises_with_the_pinpointed_report():
    with pytest.raises(AssertionError) as raised:
        assert_gradients_match(
            OPS,
            against=FAULTY,
            ops=["ProdThree"],
            dtypes=("float64",),
            targets=("numpy",),
            generated=derived_folder(OPS),
        )
    report = str(raised.value)
    assert "MISMATCH: ProdThree" in report
    assert "the gradient of x differs" in report
    assert "inputs there: x = 0.0" in report
    assert "smallest failing case, to paste:" in report and "x = np.array([0.0]" in report


def test_dict_of_functions():
    def sigmoid_grad(grad, x, *, y=None):
        y = 1 / (1 + np.exp(-x)) if y is None else y
        return (grad * y * (1 - y),)

    def wrong_sigmoid_grad(grad, x, *, y=None):
        return (grad * x * (1 - x),)

    kwargs = dict(ops=["Sigmoid"], targets=("numpy",), generated=derived_folder(OPS))
    assert_gradients_match(OPS, against={"Sigmoid": sigmoid_grad}, **kwargs)
    with pytest.raises(AssertionError, match="the gradient of x differs"):
        assert_gradients_match(OPS, against={"Sigmoid": wrong_sigmoid_grad}, **kwargs)


def test_nothing_to_compare_fails():
    with pytest.raises(AssertionError, match="nothing was compared"):
        assert_gradients_match(
            OPS,
            against={"NoSuchOp": lambda grad, x: (grad,)},
            ops=["Sigmoid"],
            targets=("numpy",),
            generated=derived_folder(OPS),
        )


def test_finite_differences_pass():
    results = assert_gradients_close_to_finite_differences(
        OPS, ops=["Sigmoid", "Xlogy", "MatMul"], targets=("numpy",), generated=derived_folder(OPS)
    )
    ordinary = [r for r in results if r.reference == "finite differences"]
    assert {r.dtype for r in ordinary} == {"float64", "complex128"}
    extreme = [r for r in results if r.reference == "finite differences, extreme inputs"]
    assert {r.dtype for r in extreme} == {"float32", "float64"} and all(r.status == "match" for r in extreme)


def test_finite_differences_fault_raises(tmp_path):
    folder = tmp_path / "generated"
    folder.mkdir()
    for module in derived_folder(OPS).iterdir():
        (folder / module.name).write_text(module.read_text())
    numpy_module = folder / "ops_numpy.py"
    numpy_module.write_text(
        numpy_module.read_text()
        + (
            "\n\n_derived = subtract_grad\n\n\n"
            "def subtract_grad(grad, x, y, *, z=None):\n"
            "    gx, gy = _derived(grad, x, y, z=z)\n"
            "    return gx, -gy\n"
        )
    )
    with pytest.raises(AssertionError) as raised:
        assert_gradients_close_to_finite_differences(
            OPS, ops=["Sub"], targets=("numpy",), generated=folder
        )
    assert "MISMATCH: Sub" in str(raised.value) and "the gradient of y differs" in str(raised.value)
