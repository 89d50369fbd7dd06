"""The `symgrad` command, run as a subprocess: writing, --check, determinism, bad input."""

from __future__ import annotations

import os
import signal
import shutil
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT, import_path

from symgrad.targets import TARGETS

HEADER = "import sympy as sp\nfrom symgrad import dims, elementwise, indicator, indices, op, tensor\n\n"


def symgrad(*args, cwd=ROOT, env=None, cache: Path | None = None):
    """Run `python -m symgrad ARGS` and return the completed process: without the cache, or
    with the cache in folder `cache`."""
    if cache is None:
        args = args[:1] + ("--no-cache",) + args[1:]
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    if cache is not None:
        full_env["SYMGRAD_CACHE_DIR"] = str(cache)
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


@dataclass(frozen=True)
class Derived:
    op_file: Path  # GOOD
    output: Path  # what `symgrad derive` wrote for it
    cache: Path  # a cache holding it: a second derivation of the op file is a lookup


@pytest.fixture(scope="module")
def good_derived(tmp_path_factory) -> Derived:
    """GOOD written and derived once by the CLI (verified), into a cache of this module's."""
    folder = tmp_path_factory.mktemp("good")
    good = write_ops(folder, "good.py", GOOD)
    result = symgrad("derive", good, "-o", folder / "gen", cache=folder / "cache")
    assert result.returncode == 0, result.stderr
    return Derived(good, folder / "gen", folder / "cache")


def copy_of(derived: Derived, folder: Path) -> Path:
    shutil.copytree(derived.output, folder)
    return folder


def test_derive_writes_modules_that_import_and_run(tmp_path):
    ops = write_ops(tmp_path, "cube.py", GOOD)
    result = symgrad("derive", ops, "-o", tmp_path / "gen")
    assert result.returncode == 0, result.stderr
    runtimes = ["_symgrad_jax.py", "_symgrad_numpy.py", "_symgrad_tf.py", "_symgrad_torch.py"]
    modules = ["cube_jax.py", "cube_numpy.py", "cube_tf.py", "cube_torch.py"]
    assert sorted(p.name for p in (tmp_path / "gen").iterdir()) == runtimes + modules
    (grad_x,) = import_path(tmp_path / "gen" / "cube_numpy.py").cube_grad(2.0, 3.0)
    assert grad_x == 2.0 * 3 * 3.0**2


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o027, 0o640)])
def test_files_are_written_with_the_umasks_mode(tmp_path, umask, mode, good_derived):
    previous = os.umask(umask)  # the subprocess inherits it
    try:
        result = symgrad("derive", good_derived.op_file, "-o", tmp_path / "gen", cache=good_derived.cache)
    finally:
        os.umask(previous)
    assert result.returncode == 0, result.stderr
    for written in (tmp_path / "gen").iterdir():
        assert written.stat().st_mode & 0o777 == mode, written


def test_target_option_limits_output(tmp_path):
    ops = write_ops(tmp_path, "cube.py", GOOD)
    result = symgrad("derive", ops, "-o", tmp_path / "gen", "--target", "numpy")
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in (tmp_path / "gen").iterdir()) == ["_symgrad_numpy.py", "cube_numpy.py"]


def test_check_passes_when_fresh_and_writes_nothing(tmp_path, good_derived):
    gen = copy_of(good_derived, tmp_path / "gen")
    before = snapshot(gen)
    result = symgrad("derive", good_derived.op_file, "-o", gen, "--check", cache=good_derived.cache)
    assert result.returncode == 0, result.stderr
    assert snapshot(gen) == before


def test_check_names_stale_and_missing_files_and_exits_1(tmp_path, good_derived):
    gen = copy_of(good_derived, tmp_path / "gen")
    (gen / "good_numpy.py").write_text("# edited by hand\n")
    (gen / "good_tf.py").unlink()
    before = snapshot(gen)
    result = symgrad("derive", good_derived.op_file, "-o", gen, "--check", cache=good_derived.cache)
    assert result.returncode == 1
    assert "good_numpy.py" in result.stderr and "good_tf.py" in result.stderr
    assert snapshot(gen) == before


def test_unchanged_files_are_not_rewritten_and_the_summary_says_so_once(tmp_path, good_derived):
    gen = copy_of(good_derived, tmp_path / "gen")
    (gen / "good_tf.py").write_text("# edited by hand\n")
    before = snapshot(gen)
    result = symgrad("derive", good_derived.op_file, "-o", gen, cache=good_derived.cache)
    assert result.returncode == 0, result.stderr
    after = snapshot(gen)
    assert after["good_numpy.py"] == before["good_numpy.py"]  # not rewritten: same bytes and time
    assert after["good_tf.py"][0] == (good_derived.output / "good_tf.py").read_bytes()
    assert result.stdout.splitlines() == [f"wrote {gen / 'good_tf.py'}", f"{gen}: 1 file(s) written, 7 unchanged"]


# op files whose derivations hold the most ordering choices (stages, index maps, variants)
BYTE_IDENTITY_SAMPLE = ("ops/composed.py", "ops/gather.py")


@pytest.mark.parametrize(
    "paths",
    [
        pytest.param(BYTE_IDENTITY_SAMPLE, id="sampled"),
        pytest.param(("ops",), id="exhaustive", marks=pytest.mark.exhaustive),
    ],
)
def test_output_is_byte_identical_across_runs_and_hash_seeds(tmp_path, derived, paths):
    """The CLI with PYTHONHASHSEED=1 writes what the suite's own derivation (this process,
    a random hash seed) produced, byte for byte: the library (or a sample of its op files)
    derived once more, not twice."""
    out = tmp_path / "gen"
    result = symgrad("derive", *paths, "-o", out, env={"PYTHONHASHSEED": "1"})
    assert result.returncode == 0, result.stderr
    written = {p.name: p.read_bytes() for p in sorted(out.iterdir())}
    assert os.environ.get("PYTHONHASHSEED") != "1"  # two seeds compared
    stems = {Path(path).stem for path in paths} if paths != ("ops",) else None
    expected = {
        name: text.encode()
        for name, text in sorted(derived[1].items())
        if stems is None or name.rsplit("_", 1)[0] in stems | {"_symgrad"}  # and the runtime modules
    }
    assert written == expected and len(written) >= 2 * len(stems or (1,))


@pytest.mark.parametrize(
    "stems",
    [
        pytest.param(("composed", "gather", "conv"), id="sampled"),
        pytest.param(None, id="exhaustive", marks=pytest.mark.exhaustive),
    ],
)
def test_generated_files_are_black_formatted(derived, stems):
    black = pytest.importorskip("black")
    _, files = derived
    checked = [name for name in files if stems is None or name.rsplit("_", 1)[0] in stems]
    assert stems is None or len(checked) == len(TARGETS) * len(stems)  # every target of each
    for name in checked:
        assert black.format_str(files[name], mode=black.Mode(line_length=100)) == files[name], name


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
    "sum_range_disagrees_with_a_batched_shape": (  # behind `...`, axes are counted from the end
        """
        (N,) = dims("N")
        i, k = indices("i k")

        @op("BadNorm")
        def bad_norm():
            x = tensor("x", (..., N))
            return {"y": ((..., i), x[..., i] / sp.Sum(x[..., k], (k, 0, N - 2)))}
        """,
        ["BadNorm", ":{@op}", "Sum over k from 0 to N - 2", "disagrees with the last axis of x, of size N"],
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
    "index_in_a_condition_only": (  # issue 41: the index t is read by the mask alone
        """
        (T,) = dims("T")
        t, s = indices("t s")

        @op("MaskedCumsum")
        def masked_cumsum():
            x = tensor("x", (..., T))
            return {"y": ((..., t), sp.Sum(indicator(s <= t) * x[..., s], (s, 0, T - 1)))}
        """,
        ["MaskedCumsum", ":{@op}", "index t appears only outside subscripts and Sum limits (in indicator(s <= t))",
         "declare it with its size, (t, <size>)"],
    ),
    "not_differentiable": (
        """
        f = sp.Function("f")

        @elementwise("Opaque")
        def opaque(x):
            return f(x)
        """,
        ["Opaque", ":{@elementwise}", "cannot differentiate f(x)", "`stop_gradient(...)`", "`Piecewise`"],
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
    "name_of_a_generated_function": (
        """
        @elementwise("Square")
        def square(x):
            return x**2

        @elementwise("SquareGrad")
        def square_grad(x, y):
            return 2 * x * y
        """,
        ["SquareGrad", ":{def square_grad}", "'square_grad' is the name of a function generated for Square", ":{def square}"],
    ),
    "scalars_not_inputs": (
        """
        @elementwise("Scaled", scalars=("scale",))
        def scaled(x):
            return 2 * x
        """,
        ["Scaled", ":{@elementwise}", "scalars names inputs of the op"],
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
        ["Spread", ":{@elementwise}", "broadcast_to names an attr(Ints(), Input(position)) attribute, got 'shape'"],
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_is_reported_and_leaves_output_untouched(tmp_path, case, good_derived):
    body, expected = BAD_INPUTS[case]
    good, derived_once = good_derived.op_file, good_derived.output
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


def test_a_failed_write_is_one_error_and_leaves_no_staged_file(tmp_path):
    """An OSError while writing (here a folder where a generated file goes, so the rename
    fails; a read-only file system alike) is an OutputError, and no temporary file stays."""
    from symgrad.errors import OutputError
    from symgrad.output import write_files

    out = tmp_path / "gen"
    (out / "b_numpy.py").mkdir(parents=True)
    with pytest.raises(OutputError, match=r"cannot write to the output folder .*gen: Is a directory"):
        write_files(out, {"a_numpy.py": "a = 1\n", "b_numpy.py": "b = 2\n"})
    assert not [p.name for p in out.iterdir() if p.name.endswith(".tmp")]


def test_missing_op_file_is_an_error(tmp_path):
    result = symgrad("derive", tmp_path / "nowhere.py", "-o", tmp_path / "gen")
    assert result.returncode == 2 and "no such op file" in result.stderr
    assert not (tmp_path / "gen").exists()


def _paths(tmp_path: Path, case: str) -> tuple[list, str]:
    """The arguments of a `symgrad derive` with a bad path, and what its message must say."""
    good = write_ops(tmp_path, "cube.py", GOOD)
    (tmp_path / "notes.txt").write_text("not an op file\n")
    (tmp_path / "empty").mkdir()
    (tmp_path / "a_file").write_text("")
    return {
        "not_python": ([tmp_path / "notes.txt", "-o", tmp_path / "gen"], "notes.txt is not an op file"),
        "empty_folder": ([tmp_path / "empty", "-o", tmp_path / "gen"], "no op files (*.py) in the folder"),
        "output_is_a_file": ([good, "-o", tmp_path / "a_file"], "a_file is a file"),
        "output_under_a_file": ([good, "-o", tmp_path / "a_file" / "gen"], "a_file is a file"),
        "check_generated_is_a_file": ([good, "--generated", tmp_path / "a_file"], "a_file is a file"),
    }[case]


@pytest.mark.parametrize(
    "case", ["not_python", "empty_folder", "output_is_a_file", "output_under_a_file", "check_generated_is_a_file"]
)
def test_a_bad_path_is_one_line_and_exit_2(tmp_path, case):
    args, expected = _paths(tmp_path, case)
    before = sorted(p.name for p in tmp_path.rglob("*"))
    result = symgrad("check" if case.startswith("check_") else "derive", *args)
    assert result.returncode == 2, result.stdout + result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("error: ") and expected in line, line
    assert sorted(p.name for p in tmp_path.rglob("*")) == before  # nothing written or created


# --- start-up ----------------------------------------------------------------------------------


def test_version_is_the_packages():
    import symgrad

    result = subprocess.run(
        [sys.executable, "-m", "symgrad", "--version"], capture_output=True, text=True, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert result.returncode == 0 and result.stdout == f"symgrad {symgrad.__version__}\n"


@pytest.mark.parametrize("argv", [["--help"], ["--version"], ["derive", "--help"], ["diff", "--help"]])
def test_help_and_version_import_nothing_heavy(argv):
    """What makes `symgrad --help` start at once: SymPy, numpy, jinja2, black and TensorFlow are
    imported only by the commands that use them."""
    code = (
        "import sys\nfrom symgrad import cli\n"
        f"try:\n    cli.main({argv!r})\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in ('sympy', 'numpy', 'jinja2', 'black', 'tensorflow') if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "[]"


# --- help ----------------------------------------------------------------------------------


def _help(*command) -> str:
    """`symgrad COMMAND --help`, its lines joined as argparse wrapped them."""
    result = subprocess.run(
        [sys.executable, "-m", "symgrad", *command, "--help"], capture_output=True, text=True, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert result.returncode == 0, result.stderr
    return " ".join(result.stdout.split())


def test_help_names_every_target_and_derive_has_a_description_and_examples():
    assert "derive gradients and write numpy, TensorFlow, JAX and PyTorch modules" in _help()
    derive = _help("derive")
    assert "Derive the gradient of every op declared in the op files" in derive
    assert "examples: symgrad derive my_ops.py -o generated" in derive and "--check" in derive


def test_each_verify_commands_help_speaks_of_that_command():
    diff, check = _help("diff"), _help("check")
    for text in (diff, check):  # the --sample help is a whole sentence
        assert "spread over them (the first and last included); every dtype and target is still compared" in text
    assert "Compare each derived gradient with a hand-written one" in diff
    assert "with TensorFlow's own (float64; --against tensorflow only)" in diff
    assert "Compare each derived gradient with central finite differences" in check
    order = check.split("--order {1,2} ")[-1].split(" --generated")[0]
    assert order == (
        "2: check the second-order gradients, each target's path, against finite differences of "
        "the derived gradient (float64)"
    )


# --- progress ------------------------------------------------------------------------------

TWO_OPS = GOOD + '''

@elementwise("Square")
def square(x):
    """x squared."""
    return x**2
'''


def _on_a_terminal(args: list, cwd: Path) -> tuple[int, str]:
    """`python -m symgrad ARGS` with stderr a terminal (a pty) and stdout a pipe: its exit
    status and everything it wrote to the terminal."""
    import pty
    import select

    controller, terminal = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "symgrad", *map(str, args)], stdout=subprocess.DEVNULL, stderr=terminal,
        cwd=cwd, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    os.close(terminal)
    written = b""
    while True:  # read as it writes (a pty's buffer is small), until the child closes it
        ready, _, _ = select.select([controller], [], [], 1.0)
        try:
            chunk = os.read(controller, 4096) if ready else b""
        except OSError:  # EIO: every end of the terminal closed
            break
        if ready and not chunk:
            break
        written += chunk
        if not ready and process.poll() is not None:
            break
    os.close(controller)
    return process.wait(timeout=600), written.decode(errors="replace")


def test_derive_shows_progress_on_a_terminal_and_nothing_elsewhere(tmp_path):
    ops = write_ops(tmp_path, "two.py", TWO_OPS)
    args = ["derive", "--no-cache", ops, "-o", tmp_path / "gen", "--target", "numpy", "-j", "1"]
    status, terminal = _on_a_terminal(args, tmp_path)
    assert status == 0, terminal
    assert "symgrad derive: compiling ops 0/2, in hand: Cube" in terminal
    assert "symgrad derive: compiling ops 1/2, in hand: Square, about " in terminal and " left" in terminal
    assert "symgrad derive: rendering modules 0/1, in hand: two_numpy.py" in terminal
    assert "symgrad derive: verifying ops 0/2, in hand: Cube" in terminal
    piped = symgrad(*args[:1], *args[2:], cwd=tmp_path)
    assert piped.returncode == 0 and piped.stderr == "", piped.stderr
    forced = symgrad(*args[:1], *args[2:], "--progress", cwd=tmp_path)
    assert "symgrad derive: compiling ops 1/2, in hand: Square" in forced.stderr


CUBE_GRAD = "def cube_grad(grad, x, *, y=None):\n    return (3 * x**2 * grad,)\n"


@pytest.mark.parametrize("command", ["check", "diff"])
def test_diff_and_check_show_progress_on_a_terminal_and_nothing_elsewhere(tmp_path, good_derived, command):
    (tmp_path / "cube_grads.py").write_text(CUBE_GRAD)
    against = ["--against", tmp_path / "cube_grads.py"] if command == "diff" else []
    args = [command, good_derived.op_file, *against, "--generated", good_derived.output, "--target", "numpy", "-j", "1"]
    status, terminal = _on_a_terminal(args, tmp_path)
    assert status == 0, terminal
    assert f"symgrad {command}: comparing ops 0/1, in hand: Cube" in terminal, terminal
    piped = symgrad(*args, cache=tmp_path / "cache")
    assert piped.returncode == 0 and f"symgrad {command}:" not in piped.stderr, piped.stderr


# --- derive --watch ----------------------------------------------------------------------------


def _interruptible() -> None:
    """In the child, before Python starts: SIGINT's default action (a process started in the
    background of a shell inherits SIGINT ignored, and Python then installs no handler)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Watcher:
    """`python -m symgrad derive ... --watch` running, its output (stdout and stderr) read
    line by line as it comes."""

    def __init__(self, args: list, cwd: Path, cache: Path):
        import queue
        import threading

        env = {**os.environ, "PYTHONPATH": str(ROOT), "SYMGRAD_CACHE_DIR": str(cache)}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "symgrad", *map(str, args)], cwd=cwd, env=env,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            preexec_fn=_interruptible,  # Ctrl-C stops it, even where this process ignores SIGINT
        )
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=lambda: [self.lines.put(line) for line in self.process.stdout], daemon=True).start()

    def next_run(self, timeout: float = 300) -> str:
        """Everything printed up to the end of the next derivation (its "derived in" line)."""
        import queue

        printed = ""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no derivation ended in {timeout} s; printed:\n{printed}") from None
            printed += line
            if line.startswith("derived in "):
                return printed

    def interrupt(self) -> int:
        self.process.send_signal(signal.SIGINT)
        return self.process.wait(timeout=60)


def test_watch_derives_again_on_each_save_and_keeps_watching_after_an_error(tmp_path):
    """Each save derives and verifies again (the frameworks stay imported: seconds, not the
    first run's tens); a broken save prints its error, writes nothing and keeps watching;
    Ctrl-C ends it with status 0."""
    ops, out = write_ops(tmp_path, "powers.py", GOOD), tmp_path / "gen"
    watcher = Watcher(["derive", ops, "-o", out, "--watch"], tmp_path, tmp_path / "cache")
    try:
        first = watcher.next_run()
        assert "exit status 0" in first and "watching 1 op file" in first, first
        assert "wrote " in first and "x**3" in (out / "powers_numpy.py").read_text()
        time.sleep(0.05)  # a later modification time, on file systems that keep coarse ones
        ops.write_text(ops.read_text().replace("x**3", "x**4"))
        second = watcher.next_run()
        assert "exit status 0" in second and f"wrote {out / 'powers_numpy.py'}" in second, second
        assert "y = x**4" in (out / "powers_numpy.py").read_text()
        module = import_path(out / "powers_numpy.py")
        assert module.cube_grad(np.ones(1), np.array([2.0]))[0][0] == pytest.approx(32.0)  # 4 x**3
        before = snapshot(out)
        ops.write_text(ops.read_text() + "\ndef broken(:\n")
        third = watcher.next_run()
        assert "exit status 2" in third and "error: loading failed" in third and "syntax error" in third, third
        assert snapshot(out) == before
        ops.write_text(ops.read_text().replace("\ndef broken(:\n", ""))
        assert "exit status 0" in watcher.next_run()
    finally:
        status = watcher.interrupt()
    assert status == 0


def test_watch_and_check_are_one_error(tmp_path):
    result = symgrad("derive", write_ops(tmp_path, "ops.py", GOOD), "--watch", "--check", cwd=tmp_path)
    assert result.returncode == 2 and "give one of them" in result.stderr
