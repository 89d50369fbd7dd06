"""Shared fixtures: generated modules imported from a fresh derivation, TensorFlow gating."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

ROOT = Path(__file__).resolve().parent.parent
OPS = ROOT / "ops"
GENERATED = ROOT / "generated"


def require_tf():
    """Import TensorFlow, or skip; with SYMGRAD_REQUIRE_TF=1 a missing TensorFlow fails."""
    try:
        import tensorflow as tf
    except ImportError:
        if os.environ.get("SYMGRAD_REQUIRE_TF") == "1":
            pytest.fail("SYMGRAD_REQUIRE_TF=1 but TensorFlow cannot be imported")
        pytest.skip("TensorFlow is not installed (pip install '.[tensorflow]')")
    return tf


def import_path(path: Path, name: str | None = None):
    """Import a Python file as a module (once per name)."""
    name = name or f"_symgrad_test_{path.parent.name}_{path.stem}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def tf():
    return require_tf()


@pytest.fixture(scope="session")
def derived(tmp_path_factory):
    """Derive every op file in ops/ afresh into a temp folder: (folder, {name: text})."""
    from symgrad.generate import generate
    from symgrad.render import TARGETS

    out = tmp_path_factory.mktemp("generated")
    cwd = os.getcwd()
    os.chdir(ROOT)  # headers name the op file relative to the working directory
    try:
        files = generate(["ops"], TARGETS, verify=False)  # `symgrad check ops` runs in the suite
    finally:
        os.chdir(cwd)
    for name, text in files.items():
        (out / name).write_text(text)
    return out, files


@pytest.fixture(scope="session")
def numpy_module(derived):
    """`numpy_module("matmul")` imports the freshly generated numpy module of ops/matmul.py."""
    out, _ = derived
    return lambda stem: import_path(out / f"{stem}_numpy.py")


@pytest.fixture(scope="session")
def tf_module(derived, tf):
    """`tf_module("matmul")` imports the freshly generated TensorFlow module of ops/matmul.py."""
    out, _ = derived
    return lambda stem: import_path(out / f"{stem}_tf.py")


@pytest.fixture(scope="session")
def library_runs(derived, tmp_path_factory):
    """`symgrad diff ops --against tensorflow` and `symgrad check ops` on the fresh derivation,
    started in the background: (JSON path, process) by command."""
    from verify_support import start_symgrad

    require_tf()
    folder = tmp_path_factory.mktemp("library")
    common = ("--generated", derived[0], "--target", "numpy", "--target", "tensorflow")
    diff = ("diff", "ops", "--against", "tensorflow", "-j", "2", *common, "--json", folder / "diff.json")
    check = ("check", "ops", "-j", "1", *common, "--json", folder / "check.json")
    return {
        "diff": (folder / "diff.json", start_symgrad(*diff)),
        "check": (folder / "check.json", start_symgrad(*check)),
    }


@pytest.fixture(scope="session", autouse=True)
def _library_runs_start_first(request):
    """Start the library-wide diff and check as the session starts, when a collected test
    needs them: the rest of the suite runs meanwhile, on the other core."""
    wanted = {"library_report", "fd_report"}
    if any(wanted & set(item.fixturenames) for item in request.session.items):
        if importlib.util.find_spec("tensorflow") is not None:
            request.getfixturevalue("library_runs")


def _finished(library_runs, command: str):
    from verify_support import read_json

    path, background = library_runs[command]
    result = background.wait()
    assert path.exists(), result.stdout[-3000:] + result.stderr[-3000:]
    return result, read_json(path)


@pytest.fixture(scope="session")
def library_report(library_runs):
    """`symgrad diff ops --against tensorflow` on the fresh derivation: (process, JSON report)."""
    return _finished(library_runs, "diff")


@pytest.fixture(scope="session")
def fd_report(library_runs):
    """`symgrad check ops` (numpy and TensorFlow targets) on the fresh derivation: JSON report."""
    return _finished(library_runs, "check")[1]
