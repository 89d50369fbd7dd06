"""The pre-commit hook (`.pre-commit-hooks.yaml`): what pre-commit reads of it, and its entry
run as pre-commit runs it, with a user's args, on a tiny op folder: it passes while the
generated modules are fresh and fails, naming the stale one, once an op file changed."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import ROOT

CUBE = '''from symgrad import elementwise


@elementwise("Cube")
def cube(x):
    """x cubed."""
    return x**{power}
'''


@pytest.fixture(scope="module")
def hook() -> dict:
    (only,) = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    return only


def test_the_hook_is_what_pre_commit_expects(hook):
    assert hook["id"] == "symgrad-derive-check" and hook["name"] and hook["description"]
    assert hook["language"] == "python"  # pre-commit installs this repository, symgrad with it
    assert hook["pass_filenames"] is False  # the op folder comes from the user's args
    assert hook["entry"] == "symgrad derive --check"
    scripts = (ROOT / "pyproject.toml").read_text().split("[project.scripts]\n")[1].split("\n\n")[0]
    assert scripts.splitlines() == ['symgrad = "symgrad.cli:main"']  # the entry's executable, once installed


def run_entry(hook: dict, args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """The hook's entry with `args`, as pre-commit runs it (no file names): its executable,
    the console script `symgrad` (symgrad.cli:main), as `python -m symgrad`, which is the same."""
    executable, *entry = shlex.split(hook["entry"])
    assert executable == "symgrad"
    return subprocess.run(
        [sys.executable, "-m", "symgrad", *entry, *args], capture_output=True, text=True, cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=600,
    )


def test_the_entry_passes_when_fresh_and_fails_when_an_op_file_changed(hook, tmp_path):
    ops = tmp_path / "ops"
    ops.mkdir()
    (ops / "cube.py").write_text(CUBE.format(power=3))
    args = ["ops/", "-o", "mypkg/grads", "--target", "numpy"]  # as a user's `args:` names them
    derive = subprocess.run(
        [sys.executable, "-m", "symgrad", "derive", *args], capture_output=True, text=True, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=600,
    )
    assert derive.returncode == 0, derive.stderr
    fresh = run_entry(hook, args, tmp_path)
    assert fresh.returncode == 0, fresh.stderr
    assert fresh.stdout == "all 2 generated file(s) are up to date\n"
    (ops / "cube.py").write_text(CUBE.format(power=4))
    stale = run_entry(hook, args, tmp_path)
    assert stale.returncode == 1
    assert stale.stderr == "stale: mypkg/grads/cube_numpy.py (run `symgrad derive` to regenerate it)\n"
