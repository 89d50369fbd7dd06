"""benchmarks/transformer_step.py --smoke: a small transformer built from the generated PyTorch
ops trains as the same model from stock PyTorch ops does, eager and compiled; no time is checked.

Like the other benchmarks' smoke runs (tests/test_benchmarks.py), it reads the committed
generated/ modules, which CI checks are fresh. Under 20 s on two busy cores: torch.compile's
aot_eager backend traces the forward and the derived backward (inductor's code generation is
left to the full run)."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import ROOT, require_torch

SCRIPT = ROOT / "benchmarks" / "transformer_step.py"


def test_smoke_run_agrees_with_stock_pytorch(tmp_path):
    require_torch()
    report_path = tmp_path / "transformer.json"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--smoke", "--json", str(report_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "gradients agree: True (float64" in done.stdout, done.stdout
    report = json.loads(report_path.read_text())
    assert report["gradients_agree"] is True
    assert report["gradient_max_rel_diff"] <= 1e-10
    assert report["loss_max_rel_diff"] <= 1e-5
    assert report["dynamo"]["graph_breaks"] == 0, report["dynamo"]["reasons"]
    assert set(report["step"]) == {"eager", "compiled"}
    assert report["saved_bytes"]["generated"] > 0 and report["saved_bytes"]["stock"] > 0
