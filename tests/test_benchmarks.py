"""benchmarks/run.py runs and writes the documented JSON; no timing is checked.

Smoke mode: tiny inputs, one repeat, the committed generated/ modules (CI checks they are
fresh). jax, autograd and matplotlib are benchmark-only: where they are missing (as in CI) the
run skips them and says so, which the second test forces by hiding them.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

from conftest import ROOT, require_tf

RUN = ROOT / "benchmarks" / "run.py"
ROW_KEYS = {"op", "variant", "target", "reference", "ratio", "ours_s", "reference_s"}
HIDDEN = ("jax", "autograd", "matplotlib")


def run_smoke(tmp_path, *args, env=None) -> tuple[str, dict]:
    """Run the benchmark in smoke mode; its stdout and its JSON report."""
    out = tmp_path / "results.json"
    command = [sys.executable, str(RUN), "--smoke", "--use-generated", "--json", str(out), *args]
    done = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=300, env=env or os.environ.copy()
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout, json.loads(out.read_text())


def check_rows(report: dict) -> None:
    rows = report["results"]
    assert rows
    for row in rows:
        assert ROW_KEYS <= row.keys(), row
        assert row["target"] in ("numpy", "tensorflow")
        assert row["ours_s"] > 0 and row["reference_s"] > 0
        assert row["ratio"] == row["ours_s"] / row["reference_s"]
        assert row["agrees"] in (True, None), row  # the contenders computed the same gradient


def test_smoke_run_covers_every_case_and_writes_the_json(tmp_path):
    require_tf()
    stdout, report = run_smoke(tmp_path, "--png", str(tmp_path / "ratios.png"))
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
    if importlib.util.find_spec("matplotlib") is not None:
        assert (tmp_path / "ratios.png").stat().st_size > 0


def test_missing_benchmark_dependencies_are_skipped_and_said(tmp_path):
    require_tf()
    hide = tmp_path / "hide"
    for name in HIDDEN:  # a package that fails to import shadows the installed one
        (hide / name).mkdir(parents=True)
        (hide / name / "__init__.py").write_text(
            f"raise ImportError('{name} hidden by the test')\n"
        )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(hide), os.environ.get("PYTHONPATH")])),
    }
    stdout, report = run_smoke(
        tmp_path, "--only", "Sigmoid", "--png", str(tmp_path / "x.png"), env=env
    )
    check_rows(report)
    for name in HIDDEN:
        assert f"{name} is not installed: skipping" in stdout
    assert {row["reference"] for row in report["results"]} == {"tf-registered", "forward"}
    assert not (tmp_path / "x.png").exists()
