"""Shared fixtures: generated modules imported from a fresh derivation, TensorFlow gating."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from symgrad.runtime_module import import_generated
from symgrad.targets import REGISTRY

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# TensorFlow's __init__ imports Keras 3 eagerly, 4 of its 12 s of import, in this process and in
# each of the suite's symgrad subprocesses and workers; nothing here uses Keras, and with this
# TensorFlow looks for `tf_keras` instead, and skips it where it is not installed
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

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


def require_jax():
    """Import JAX with 64-bit arrays (compiling as verification does), or skip; with
    SYMGRAD_REQUIRE_JAX=1 a missing JAX fails."""
    try:
        from symgrad.backends.jax.verify import import_jax

        jax = import_jax()
    except ImportError:
        if os.environ.get("SYMGRAD_REQUIRE_JAX") == "1":
            pytest.fail("SYMGRAD_REQUIRE_JAX=1 but JAX cannot be imported")
        pytest.skip("JAX is not installed (pip install '.[jax]')")
    return jax


def require_torch():
    """Import PyTorch, or skip; with SYMGRAD_REQUIRE_TORCH=1 a missing PyTorch fails."""
    try:
        import torch
    except ImportError:
        if os.environ.get("SYMGRAD_REQUIRE_TORCH") == "1":
            pytest.fail("SYMGRAD_REQUIRE_TORCH=1 but PyTorch cannot be imported")
        pytest.skip("PyTorch is not installed (see the README: a CPU build, then pip install '.[torch]')")
    return torch


def import_path(path: Path, name: str | None = None):
    """Import a Python file as a module (once per name); a generated module's runtime import
    reads the runtime module of its own folder."""
    name = name or f"_symgrad_test_{path.parent.name}_{path.stem}"
    if name in sys.modules:
        return sys.modules[name]
    return import_generated(path, name)


def import_altered(path: Path, old: str, new: str, folder: Path):
    """The Python file `path` imported from a copy in `folder` with each `old` replaced by
    `new`: a fault injected into generated code, which must show where that code is called.
    The runtime module beside it is copied too, and altered instead where `old` is in it."""
    runtime = next(path.with_name(t.runtime_module + ".py") for t in REGISTRY.values() if path.name.endswith(t.suffix))
    texts = {p: p.read_text() for p in (path, runtime) if p.is_file()}
    assert any(old in text for text in texts.values()), f"{old!r} is not in {path} or {runtime.name}"
    for original, text in texts.items():
        (folder / original.name).write_text(text.replace(old, new))
    return import_path(folder / path.name, f"_symgrad_altered_{folder.name}_{path.stem}")


def numpy_runtime(module) -> SimpleNamespace:
    """The runtime module a generated numpy module imports its helpers from, as that module
    reads it (its helpers' globals), with the helpers it does not import itself."""
    helper = next(v for k, v in vars(module).items() if k.startswith("_") and getattr(v, "__module__", None) == "_symgrad_numpy")
    return SimpleNamespace(**helper.__globals__)


@pytest.fixture(scope="session")
def tf():
    return require_tf()


@pytest.fixture(scope="session")
def jax():
    return require_jax()


@pytest.fixture(scope="session")
def torch():
    return require_torch()


@pytest.fixture(scope="session")
def derived(tmp_path_factory):
    """Derive every op file in ops/, verified, into a temp folder: (folder, {name: text}).

    Through symgrad's cache, as `symgrad derive ops/` does: after the README's first command
    (or CI's `symgrad derive ops/ --check`) the derivation is a second; the cache's key holds
    symgrad's own source, so a change to symgrad derives afresh. Byte identity with a derivation
    that bypasses the cache is tested in test_cli.py (the whole library with -m exhaustive)."""
    from symgrad.cache import Cache, default_cache_dir
    from symgrad.generate import generate
    from symgrad.targets import TARGETS, default_jobs

    out = tmp_path_factory.mktemp("generated")
    cwd = os.getcwd()
    os.chdir(ROOT)  # headers name the op file relative to the working directory
    try:
        files = generate(["ops"], TARGETS, cache=Cache(default_cache_dir()), jobs=default_jobs())
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
def jax_module(derived, jax):
    """`jax_module("matmul")` imports the freshly generated JAX module of ops/matmul.py."""
    out, _ = derived
    return lambda stem: import_path(out / f"{stem}_jax.py")


@pytest.fixture(scope="session")
def torch_module(derived, torch):
    """`torch_module("matmul")` imports the freshly generated PyTorch module of ops/matmul.py."""
    out, _ = derived
    return lambda stem: import_path(out / f"{stem}_torch.py")


# The library-wide runs (`symgrad diff ops` against TensorFlow, `symgrad check ops` against
# finite differences): `pytest -m exhaustive` (which .ci/run runs too) checks every variant of
# every op; `-m library_sample` the first variant of each (every op, dtype and target). Neither
# is in the default run, which stays under 10 minutes on two cores: the ops' own tests and each
# target's run there.
SAMPLED_VARIANTS = 1  # per op, the first
LIBRARY_SCOPES = [
    pytest.param("sampled", id="sampled", marks=pytest.mark.library_sample),
    pytest.param("exhaustive", id="exhaustive", marks=pytest.mark.exhaustive),
]
LIBRARY_FIXTURES = ("library_report", "fd_report")


@pytest.fixture(scope="session")
def library_runs(derived, tmp_path_factory):
    """`start(command, scope)`: `symgrad diff ops --against tensorflow` or `symgrad check ops` on
    the fresh derivation, started in the background once: (JSON path, process)."""
    from verify_support import start_symgrad

    require_tf()
    started = {}

    def start(command: str, scope: str):
        if (command, scope) not in started:
            folder = tmp_path_factory.mktemp(f"{command}_{scope}")
            args = ["--generated", derived[0], "--target", "numpy", "--target", "tensorflow"]
            if command == "check" and importlib.util.find_spec("jax") is not None:
                args += ["--target", "jax"]  # its diff, against JAX's autodiff: test_jax_target.py
            args += ["--json", folder / f"{command}.json"]
            if scope == "sampled":
                args += ["--sample", str(SAMPLED_VARIANTS)]
            if command == "diff":
                args = ["diff", "ops", "--against", "tensorflow", "-j", "2", *args]
            else:
                args = ["check", "ops", "-j", "1", *args]
            # below the suite's priority: the tests run first, the library runs in their gaps
            started[command, scope] = (folder / f"{command}.json", start_symgrad(*args, niceness=10))
        return started[command, scope]

    return start


def _library_params(item) -> set[tuple[str, str]]:
    """(library fixture, scope) pairs a collected test is parametrised with."""
    callspec = getattr(item, "callspec", None)
    params = callspec.params if callspec else {}
    return {(fixture, params[fixture]) for fixture in LIBRARY_FIXTURES if fixture in params}


BACKGROUND_FIXTURES = ("benchmark_runs", "random_composed_runs", "no_jacobian_runs")  # started with the session too


def _reads_a_background_run(item) -> bool:
    return bool(_library_params(item)) or any(f in getattr(item, "fixturenames", ()) for f in BACKGROUND_FIXTURES)


def pytest_collection_modifyitems(session, config, items):
    """The tests that read a run started in the background last (in their order): the runs
    start with the session, and the rest of the suite runs meanwhile instead of waiting."""
    items.sort(key=_reads_a_background_run)


@pytest.fixture(scope="session", autouse=True)
def _library_runs_start_first(request):
    """Start the library-wide diffs and checks the collected tests need as the session starts,
    the benchmarks' smoke runs, the random composed ops' derivations and the index ops'
    compilation for their ranks: the rest of the suite runs meanwhile, on the other core."""
    needed = set().union(*map(_library_params, request.session.items))
    if importlib.util.find_spec("tensorflow") is None:
        return
    if needed:
        start = request.getfixturevalue("library_runs")
        for fixture, scope in sorted(needed):
            start("diff" if fixture == "library_report" else "check", scope)
    for background in BACKGROUND_FIXTURES:
        if any(background in getattr(item, "fixturenames", ()) for item in request.session.items):
            request.getfixturevalue(background)


@pytest.fixture(scope="session")
def random_composed_runs(request, tmp_path_factory):
    """tests/test_random_composed.py's examples, their derivation started in the background
    once: (folder, example numbers, worker processes)."""
    from test_random_composed import collected_numbers, start_workers

    folder = tmp_path_factory.mktemp("random_composed")
    numbers = collected_numbers(request.session)
    return folder, numbers, start_workers(folder, numbers)


@pytest.fixture(scope="session")
def no_jacobian_runs(tmp_path_factory):
    """tests/test_no_jacobian.py's compilation of every index op, started in the background
    once: (its JSON path, the process)."""
    from verify_support import Background

    out = tmp_path_factory.mktemp("no_jacobian") / "ranks.json"
    code = f"import test_no_jacobian as t; t.measure({str(out)!r})"
    env = {"PYTHONPATH": str(ROOT / "tests")}
    return out, Background(("-c", code), ROOT, niceness=10, env=env)


@pytest.fixture(scope="session")
def benchmark_runs(tmp_path_factory):
    """The benchmarks' smoke runs (tests/test_benchmarks.py), started in the background once:
    name -> (its folder, the process)."""
    from test_benchmarks import SMOKE_RUNS
    from verify_support import Background

    runs = {}
    for name, (args, env) in SMOKE_RUNS.items():
        folder = tmp_path_factory.mktemp(f"benchmark_{name}")
        extra = env(folder) if env else None
        command = [a(folder) if callable(a) else a for a in args]
        runs[name] = (folder, Background(command, ROOT, niceness=10, env=extra))
    return runs


def _finished(library_runs, command: str, scope: str):
    from verify_support import read_json

    path, background = library_runs(command, scope)
    result = background.wait()
    assert path.exists(), result.stdout[-3000:] + result.stderr[-3000:]
    return result, read_json(path)


@pytest.fixture(scope="session")
def library_report(library_runs, request):
    """`symgrad diff ops --against tensorflow` on the fresh derivation, sampled or exhaustive
    (the parameter: use `LIBRARY_SCOPES` with `indirect=True`): (process, JSON report)."""
    return _finished(library_runs, "diff", request.param)


@pytest.fixture(scope="session")
def fd_report(library_runs, request):
    """`symgrad check ops` (numpy and TensorFlow targets) on the fresh derivation, sampled or
    exhaustive (as `library_report`): the JSON report."""
    return _finished(library_runs, "check", request.param)[1]
