"""With SYMGRAD_REQUIRE_TF=1 (_JAX=1, _TORCH=1) a missing TensorFlow (JAX, PyTorch) fails the tests
that need it instead of skipping them."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import ROOT

PROBE = """
def test_needs_it({fixture}):
    assert {fixture} is not None
"""

PROBE_CONFTEST = """
import importlib.util

spec = importlib.util.spec_from_file_location("symgrad_tests_conftest", {path!r})
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
{fixture} = module.{fixture}
"""

FRAMEWORKS = [  # (package, fixture, switch, name in the message)
    pytest.param("tensorflow", "tf", "SYMGRAD_REQUIRE_TF", "TensorFlow", id="tensorflow"),
    pytest.param("jax", "jax", "SYMGRAD_REQUIRE_JAX", "JAX", id="jax"),
    pytest.param("torch", "torch", "SYMGRAD_REQUIRE_TORCH", "PyTorch", id="torch"),
]


def _run_probe(tmp_path, package: str, fixture: str, switch: str, require: str):
    hidden = tmp_path / "hidden"
    (hidden / package).mkdir(parents=True)
    (hidden / package / "__init__.py").write_text("raise ImportError('hidden for this test')\n")
    (tmp_path / "test_probe.py").write_text(PROBE.format(fixture=fixture))
    conftest = PROBE_CONFTEST.format(path=str(ROOT / "tests" / "conftest.py"), fixture=fixture)
    (tmp_path / "conftest.py").write_text(conftest)
    env = {**os.environ, "PYTHONPATH": f"{hidden}{os.pathsep}{ROOT}", switch: require}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path / "test_probe.py")],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300,
    )


@pytest.mark.parametrize("package, fixture, switch, name", FRAMEWORKS)
def test_missing_framework_fails_when_required(tmp_path, package, fixture, switch, name):
    result = _run_probe(tmp_path, package, fixture, switch, "1")
    assert result.returncode == 1, result.stdout
    assert f"{switch}=1 but {name} cannot be imported" in result.stdout


@pytest.mark.parametrize("package, fixture, switch, name", FRAMEWORKS)
def test_missing_framework_skips_otherwise(tmp_path, package, fixture, switch, name):
    result = _run_probe(tmp_path, package, fixture, switch, "0")
    assert result.returncode == 0, result.stdout
    assert "1 skipped" in result.stdout
