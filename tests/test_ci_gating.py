"""With SYMGRAD_REQUIRE_TF=1 a missing TensorFlow fails the TensorFlow tests instead of skipping."""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import ROOT

PROBE = """
def test_needs_tf(tf):
    assert tf is not None
"""

PROBE_CONFTEST = """
import importlib.util

spec = importlib.util.spec_from_file_location("symgrad_tests_conftest", {path!r})
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
tf = module.tf
"""


def _run_probe(tmp_path, require: str):
    hidden = tmp_path / "hide_tf"
    (hidden / "tensorflow").mkdir(parents=True)
    (hidden / "tensorflow" / "__init__.py").write_text("raise ImportError('hidden for this test')\n")
    (tmp_path / "test_probe.py").write_text(PROBE)
    (tmp_path / "conftest.py").write_text(PROBE_CONFTEST.format(path=str(ROOT / "tests" / "conftest.py")))
    env = {**os.environ, "PYTHONPATH": f"{hidden}{os.pathsep}{ROOT}", "SYMGRAD_REQUIRE_TF": require}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path / "test_probe.py")],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300,
    )


def test_missing_tensorflow_fails_when_required(tmp_path):
    result = _run_probe(tmp_path, "1")
    assert result.returncode == 1, result.stdout
    assert "SYMGRAD_REQUIRE_TF=1 but TensorFlow cannot be imported" in result.stdout


def test_missing_tensorflow_skips_otherwise(tmp_path):
    result = _run_probe(tmp_path, "0")
    assert result.returncode == 0, result.stdout
    assert "1 skipped" in result.stdout
