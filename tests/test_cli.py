"""The `symgrad` command, run as a subprocess: writing, --check, determinism, bad input."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import ROOT

HEADER = "import sympy as sp\nfrom symgrad import dims, elementwise, indices, op, tensor\n\n"


def symgrad(*args, cwd=ROOT, env=None):
    """Run `python -m symgrad ARGS` (without the cache) and return the completed process."""
    args = args[:1] + ("--no-cache",) + args[1:]
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "symgrad", *map(str, args)],
        capture_output=True, text=True, cwd=cwd, env=full_env, timeout=600,
    )


def write_ops(folder: Path, name: str, body: str) -> Path:
    path = folder / name
    path.write_text(HEADER + textwrap.dedent(body))
    return path


GOOD = """
@elementwise("Cube")
def cube(x):
    \"\"\"x cubed.\"\"\"
    return x**3
"""


def snapshot(folder: Path) -> dict:
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(folder.iterdir())}


# --- writing and --check -------------------------------------------------------------------


def test_derive_writes_modules_that_import_and_run(tmp_path):
    ops = write_ops(tmp_path, "cube.py", GOOD)
    result = symgrad("derive", ops, "-o", tmp_path / "gen")
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in (tmp_path / "gen").iterdir()) == ["cube_numpy.py", "cube_tf.py"]
    namespace = {}
    exec((tmp_path / "gen" / "cube_numpy.py").read_text(), namespace)
    (grad_x,) = namespace["cube_grad"](2.0, 3.0)
    assert grad_x == 2.0 * 3 * 3.0**2


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o027, 0o640)])
def test_files_are_written_with_the_umasks_mode(tmp_path, umask, mode):
    ops = write_ops(tmp_path, "cube.py", GOOD)
    previous = os.umask(umask)  # the subprocess inherits it
    try:
        result = symgrad("derive", ops, "-o", tmp_path / "gen", "--target", "numpy")
    finally:
        os.umask(previous)
    assert result.returncode == 0, result.stderr
    written = tmp_path / "gen" / "cube_numpy.py"
    assert written.stat().st_mode & 0o777 == mode


def test_target_option_limits_output(tmp_path):
    ops = write_ops(tmp_path, "cube.py", GOOD)
    result = symgrad("derive", ops, "-o", tmp_path / "gen", "--target", "numpy")
    assert result.returncode == 0, result.stderr
    assert [p.name for p in (tmp_path / "gen").iterdir()] == ["cube_numpy.py"]


def test_check_passes_when_fresh_and_writes_nothing(tmp_path):
    ops = write_ops(tmp_path, "cube.py", GOOD)
    assert symgrad("derive", ops, "-o", tmp_path / "gen").returncode == 0
    before = snapshot(tmp_path / "gen")
    result = symgrad("derive", ops, "-o", tmp_path / "gen", "--check")
    assert result.returncode == 0, result.stderr
    assert snapshot(tmp_path / "gen") == before


def test_check_names_stale_and_missing_files_and_exits_1(tmp_path):
    ops = write_ops(tmp_path, "cube.py", GOOD)
    gen = tmp_path / "gen"
    assert symgrad("derive", ops, "-o", gen).returncode == 0
    (gen / "cube_numpy.py").write_text("# edited by hand\n")
    (gen / "cube_tf.py").unlink()
    before = snapshot(gen)
    result = symgrad("derive", ops, "-o", gen, "--check")
    assert result.returncode == 1
    assert "cube_numpy.py" in result.stderr and "cube_tf.py" in result.stderr
    assert snapshot(gen) == before


def test_unchanged_files_are_not_rewritten(tmp_path):
    ops = write_ops(tmp_path, "cube.py", GOOD)
    gen = tmp_path / "gen"
    assert symgrad("derive", ops, "-o", gen).returncode == 0
    before = snapshot(gen)
    assert symgrad("derive", ops, "-o", gen).returncode == 0
    assert snapshot(gen) == before


def test_output_is_byte_identical_across_runs_and_hash_seeds(tmp_path, derived):
    """The CLI with PYTHONHASHSEED=1 writes what the suite's own derivation (this process,
    a random hash seed) produced, byte for byte: the whole library derived once more, not twice."""
    out = tmp_path / "gen"
    result = symgrad("derive", "ops", "-o", out, env={"PYTHONHASHSEED": "1"})
    assert result.returncode == 0, result.stderr
    written = {p.name: p.read_bytes() for p in sorted(out.iterdir())}
    assert os.environ.get("PYTHONHASHSEED") != "1"  # two seeds compared
    assert written == {name: text.encode() for name, text in sorted(derived[1].items())} and len(written) >= 2


def test_generated_files_are_black_formatted(derived):
    black = pytest.importorskip("black")
    _, files = derived
    for name, text in files.items():
        assert black.format_str(text, mode=black.Mode(line_length=100)) == text, name


# --- bad input: one clear message, non-zero exit, generated files untouched ----------------

BAD_INPUTS = {
    "syntax_error": (
        """
        @elementwise("Broken")
        def broken(x):
            return x +* 2
        """,
        ["syntax error", "Broken", ":{x +* 2}"],
    ),
    "index_without_range": (
        """
        N = dims("N")[0]
        i = indices("i")[0]

        @op("Strided")
        def strided():
            x = tensor("x", (N,))
            return {"y": ((i,), x[2 * i])}
        """,
        ["Strided", ":{@op}", "index i", "without a range"],
    ),
    "sum_range_disagrees_with_shape": (
        """
        M, K, N = dims("M K N")
        i, j, k = indices("i j k")

        @op("BadMatMul")
        def bad_matmul():
            a = tensor("a", (M, K))
            b = tensor("b", (K, N))
            return {"c": ((i, j), sp.Sum(a[i, k] * b[k, j], (k, 0, N - 1)))}
        """,
        ["BadMatMul", ":{@op}", "Sum over k from 0 to N - 1", "axis 1 of a, of size K"],
    ),
    "free_indices_differ": (
        """
        M, N = dims("M N")
        i, j = indices("i j")

        @op("BadRowSum")
        def bad_row_sum():
            x = tensor("x", (M, N))
            return {"y": ((i,), x[i, j])}
        """,
        ["BadRowSum", ":{@op}", "declares free indices (i)", "has free indices (i, j)"],
    ),
    "not_differentiable": (
        """
        f = sp.Function("f")

        @elementwise("Opaque")
        def opaque(x):
            return f(x)
        """,
        ["Opaque", ":{@elementwise}", "cannot differentiate f(x)"],
    ),
    "same_name_twice": (
        """
        @elementwise("Twice")
        def first(x):
            return x**2

        @elementwise("Twice")
        def second(x):
            return x**3
        """,
        ["Twice", ":{def second}", "declared twice", ":{def first}"],
    ),
    "ascending_values": (
        """
        K = dims("K")[0]
        k = indices("k")[0]

        @op("SortedCopy")
        def sorted_copy():
            ids = tensor("ids", (K,), ascending=True)
            return {"out": ((k,), ids[k])}
        """,
        ["SortedCopy", ':{ids = tensor(}', "only an integer tensor can be ascending"],
    ),
    "group_without_one_dimension": (
        """
        i, a = indices("i a")

        @op("Blocks")
        def blocks():
            x = tensor("x", ((2, 3),))
            return {"out": ((i, a), x[i, a])}
        """,
        ["Blocks", ':{x = tensor(}', "exactly one"],
    ),
    "broadcast_to_not_a_shape": (
        """
        @elementwise("Spread", broadcast_to="shape")
        def spread(x):
            return x
        """,
        ["Spread", ":{@elementwise}", "broadcast_to names a const_ints attribute, got 'shape'"],
    ),
}


@pytest.fixture(scope="module")
def good_derived(tmp_path_factory):
    """GOOD written and derived once by the CLI: (op file, output folder)."""
    folder = tmp_path_factory.mktemp("good")
    good = write_ops(folder, "good.py", GOOD)
    assert symgrad("derive", good, "-o", folder / "gen").returncode == 0
    return good, folder / "gen"


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_is_reported_and_leaves_output_untouched(tmp_path, case, good_derived):
    body, expected = BAD_INPUTS[case]
    good, derived_once = good_derived
    gen = tmp_path / "gen"
    shutil.copytree(derived_once, gen)
    before = snapshot(gen)
    assert before and before == snapshot(derived_once)
    bad = write_ops(tmp_path, f"{case}.py", body)
    result = symgrad("derive", good, bad, "-o", gen)
    assert result.returncode == 2
    message = result.stderr.strip()
    assert message.count("\n") == 0, f"expected one message, got:\n{message}"
    assert str(bad) in message
    for fragment in expected:
        fragment = _with_line_numbers(fragment, bad.read_text())
        assert fragment in message, f"{fragment!r} not in {message!r}"
    assert "Traceback" not in message
    assert snapshot(gen) == before


def _with_line_numbers(fragment: str, source: str) -> str:
    """Replace ":{text}" by ":N", N the line of the first line containing `text`; for "def f"
    the line of the decorator above it."""
    if ":{" not in fragment:
        return fragment
    needle = fragment[fragment.index(":{") + 2 : -1]
    lines = source.splitlines()
    number = next(n for n, line in enumerate(lines, 1) if needle in line)
    if needle.startswith("def "):
        number -= 1
    return fragment[: fragment.index(":{")] + f":{number}"


def test_missing_op_file_is_an_error(tmp_path):
    result = symgrad("derive", tmp_path / "nowhere.py", "-o", tmp_path / "gen")
    assert result.returncode == 2 and "no such op file" in result.stderr
    assert not (tmp_path / "gen").exists()
