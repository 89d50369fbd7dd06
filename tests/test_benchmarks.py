"""benchmarks/run.py runs and writes the documented JSON; no timing is checked.

Smoke mode: tiny inputs, one repeat, the committed generated/ modules (CI checks they are
fresh; an op file with none there is derived). jax, autograd and matplotlib are
benchmark-only: where they are missing (as in CI) the run skips them and says so, which the
second test forces by hiding them. Every reference is checked against the declared op before
it is timed; the last tests check that check.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import sys

import pytest

from conftest import ROOT, import_path, require_tf

RUN = ROOT / "benchmarks" / "run.py"
ROW_KEYS = {"op", "group", "variant", "target", "reference", "ratio", "ours_s", "reference_s"}
HIDDEN = ("jax", "autograd", "matplotlib", "torch")
COMPOSED = {"ScaledDotProductAttention", "LayerNorm", "MlpBlock"}


def _hidden(folder):
    """An environment in which jax, autograd and matplotlib fail to import: a package that
    fails to import shadows the installed one."""
    hide = folder / "hide"
    for name in HIDDEN:
        (hide / name).mkdir(parents=True)
        (hide / name / "__init__.py").write_text(f"raise ImportError('{name} hidden by the test')\n")
    return {"PYTHONPATH": str(hide)}


SMOKE = (RUN, "--smoke", "--use-generated", "--json", lambda folder: folder / "results.json")
# the smoke runs, started in the background as the session starts (conftest.benchmark_runs):
# name -> (arguments of python, a function or a value each; the environment they add)
SMOKE_RUNS = {
    "all": ((*SMOKE, "--png", lambda folder: folder / "ratios.png"), None),
    "hidden": ((*SMOKE, "--only", "Sigmoid", "--png", lambda folder: folder / "x.png"), _hidden),
    "training": ((ROOT / "benchmarks" / "training_step.py", "--smoke", "--json", lambda folder: folder / "training.json"), None),
    "causal": ((ROOT / "benchmarks" / "causal_attention.py", "--repeats", "1", "--json", lambda folder: folder / "causal.json"), None),
}


def smoke_run(benchmark_runs, name: str):
    """A smoke run's folder and stdout, once it ran (and succeeded)."""
    require_tf()
    folder, process = benchmark_runs[name]
    done = process.wait()
    assert done.returncode == 0, done.stdout + done.stderr
    return folder, done.stdout


def check_rows(report: dict) -> None:
    rows = report["results"]
    assert rows
    for row in rows:
        assert ROW_KEYS <= row.keys(), row
        assert row["target"] in ("numpy", "tensorflow", "jax", "torch")
        assert row["ours_s"] > 0 and row["reference_s"] > 0
        assert row["ratio"] == row["ours_s"] / row["reference_s"]
        assert row["agrees"] in (True, None), row  # the contenders computed the same gradient
        # a reference's forward and gradient were checked against the declared op's
        assert row["reference_checked"] is (None if row["reference"] == "forward" else True), row


def test_smoke_run_covers_every_case_and_writes_the_json(benchmark_runs):
    tmp_path, stdout = smoke_run(benchmark_runs, "all")
    report = json.loads((tmp_path / "results.json").read_text())
    check_rows(report)
    ops = {row["op"] for row in report["results"]}
    assert {"MatMul", "Sigmoid", "Tanh", "Softplus", "GeluErf", "Mul", "RealDiv"} <= ops
    comparisons = {(row["target"], row["reference"]) for row in report["results"]}
    assert {
        ("tensorflow", "tf-registered"),
        ("tensorflow", "forward"),
        ("numpy", "forward"),
    } <= comparisons
    for name, reference in (("autograd", "autograd"), ("jax", "jax.jit")):
        if importlib.util.find_spec(name) is None:
            assert f"{name} is not installed: skipping" in stdout
        else:
            assert ("numpy", reference) in comparisons
    if importlib.util.find_spec("jax") is not None:  # the JAX target, against jax.vjp of JAX code
        assert ("jax", "jax.jit") in comparisons
    if importlib.util.find_spec("torch") is not None:  # the PyTorch target, against PyTorch's own
        assert ("torch", "torch") in comparisons
    if importlib.util.find_spec("matplotlib") is not None:
        assert (tmp_path / "ratios.png").stat().st_size > 0
    check_composed(stdout, report)


def check_composed(stdout: str, report: dict) -> None:
    """The composed ops' rows: against their forwards written by hand, under autodiff."""
    rows = [row for row in report["results"] if row["group"] == "composed"]
    assert {row["op"] for row in rows} == COMPOSED
    for op in COMPOSED:
        comparisons = {(row["target"], row["reference"]) for row in rows if row["op"] == op}
        expected = {
            ("tensorflow", "tf-autodiff+forward"),
            ("tensorflow", "forward"),
            ("numpy", "forward"),
        }
        if importlib.util.find_spec("autograd") is not None:
            expected |= {("numpy", "autograd"), ("numpy", "autograd+forward")}
        if importlib.util.find_spec("jax") is not None:
            expected |= {("numpy", "jax.jit"), ("jax", "jax.jit")}
        if importlib.util.find_spec("torch") is not None and op in _torch_functions():
            expected |= {("torch", "torch")}
        assert comparisons == expected, op
    names = {target["target"] for target in report["targets"]}
    assert {
        "composed: TF gradient / TF autodiff (both with forward)",
        "composed: gradient / its forward",
    } <= names
    assert "composed: gradient / its forward" in stdout


def _torch_functions():
    from symgrad.backends.torch.functions import FUNCTIONS

    return FUNCTIONS


def test_missing_benchmark_dependencies_are_skipped_and_said(benchmark_runs):
    tmp_path, stdout = smoke_run(benchmark_runs, "hidden")
    report = json.loads((tmp_path / "results.json").read_text())
    check_rows(report)
    for name in HIDDEN:
        assert f"{name} is not installed: skipping" in stdout
    assert {row["reference"] for row in report["results"]} == {"tf-registered", "forward"}
    assert not (tmp_path / "x.png").exists()


# --- the check of the references ---------------------------------------------------------


@pytest.fixture(scope="module")
def bench(tf, numpy_module, tf_module):
    """benchmarks/'s modules, the libraries installed, and the generated Sigmoid (the suite's
    fresh derivation: a second copy of a TF module imported would find its gradients taken)."""
    run = import_path(RUN, "_symgrad_bench_run")  # puts benchmarks/ on sys.path
    bench_cases, bench_measure = sys.modules["bench_cases"], sys.modules["bench_measure"]
    libs = run.load_libraries()
    gen = bench_measure.Generated("sigmoid", numpy_module("unary"), tf_module("unary"))
    case = next(case for case in bench_cases.CASES if case.op == "Sigmoid")
    return bench_measure, libs, gen, case


def test_the_references_are_checked_against_the_declared_op(bench):
    measure, libs, gen, case = bench
    checked = measure.check_references(case, gen, libs)
    assert "tf-registered" in checked
    for name, lib in (("autograd", libs.autograd), ("jax.jit", libs.jax)):
        assert (name in checked) == (lib is not None)


def test_a_reference_that_computes_another_op_fails_loudly(bench):
    """1e-4 of the forward too much: within the float32 agreement of the timed gradients, but
    not within the float64 check."""
    measure, libs, gen, case = bench
    off = 1 + 1e-4
    wrong = dataclasses.replace(
        case,
        tf_op=lambda tf, x: tf.math.sigmoid(x) * off,
        autograd=lambda m, x: m.special.expit(x) * off,
        jax=lambda m, x: m.nn.sigmoid(x) * off,
    )
    with pytest.raises(measure.ReferenceMismatch) as raised:
        measure.check_references(wrong, gen, libs)
    message = str(raised.value)
    assert "REFERENCE MISMATCH in Sigmoid" in message
    assert "tf-registered forward" in message and "tf-registered gradient" in message
    for name, lib in (("autograd", libs.autograd), ("jax.jit", libs.jax)):
        assert (f"{name} forward" in message) == (lib is not None)
    assert "generated TensorFlow" not in message  # the generated modules agree


def test_training_step_smoke_run_checks_the_same_math_and_writes_the_json(benchmark_runs):
    """benchmarks/training_step.py --smoke: both models built, checked to agree, timed, trained."""
    folder, stdout = smoke_run(benchmark_runs, "training")
    assert "same math: mlp: losses agree" in stdout and "same math: cnn: losses agree" in stdout
    report = json.loads((folder / "training.json").read_text())
    for kind in ("mlp", "cnn"):
        assert report["step"][kind]["ours_ms"] > 0 and report["step"][kind]["stock_ms"] > 0
        assert abs(report["accuracy"][f"{kind}_ours"] - report["accuracy"][f"{kind}_stock"]) <= 0.01


def test_causal_attention_benchmark_derives_the_example_and_times_every_form(benchmark_runs):
    """benchmarks/causal_attention.py --repeats 1: examples/causal_attention.py derived, and the
    four forms timed beside the additive-bias op, autograd and PyTorch's own causal SDPA."""
    folder, stdout = smoke_run(benchmark_runs, "causal")
    report = json.loads((folder / "causal.json").read_text())
    assert len(report["ms"]) == 7 and all(ms > 0 for ms in report["ms"].values())
    assert {"derived, limits", "derived, apart", "derived, mask", "derived, unstaged"} <= report["ms"].keys()
    assert "F.scaled_dot_product_attention(is_causal=True)" in stdout
