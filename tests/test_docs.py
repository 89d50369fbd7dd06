"""Every code block of README.md and docs/ runs, as a reader would run it.

Each page in a working folder of its own (a docs page with the project's `ops/` and
`generated/` beside it; the README's tutorial from nothing): a `python` block whose first line is `# file: NAME` is written to NAME; a page's other `python`
blocks run in order as one script, and the `test_*` functions they define are called; a page
that declares ops has them derived and verified too; each line of a `bash` block is run
(`symgrad` as `python -m symgrad`), and must exit 0 unless it ends with `# exits N`. `text`
blocks are output and synopses; `json` blocks must parse. A block not run says why in an HTML
comment above it, naming what runs it instead: the README's Quick start is run by `.ci/run`
verbatim (`python tests/test_docs.py --quick-start` prints it), the slow ones by a named test.
A `text` block under `<!-- excerpt of PATH -->` is lines of the file PATH the page's commands
wrote, as they are (a last line `...` standing for the rest).

    python tests/test_docs.py --quick-start   # the README's Quick start commands
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"(?:<!-- (?P<note>[^\n]*?) -->\n)?^```(?P<lang>\w*)\n(?P<body>.*?)^```$", re.S | re.M)
NOT_RUN = "not run by the tests: "
EXCERPT = "excerpt of "  # the file, relative to the page's working folder
QUICK_START = "run by .ci/run, verbatim"


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    lang: str
    body: str
    note: str | None  # the HTML comment just above the block

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    @property
    def file_name(self) -> str | None:
        first = self.body.splitlines()[0] if self.body else ""
        return first[len("# file: "):].strip() if first.startswith("# file: ") else None


def blocks(page: Path) -> list[Block]:
    text = page.read_text()
    return [
        Block(page, text[: m.start("lang")].count("\n") + 1, m.group("lang"), m.group("body"), m.group("note"))
        for m in BLOCK.finditer(text)
    ]


def quick_start() -> str:
    (block,) = [b for b in blocks(ROOT / "README.md") if b.note == QUICK_START]
    return block.body


def commands(body: str) -> list[tuple[str, int]]:
    """A bash block's command lines, with the exit status each must give (`# exits N`)."""
    found = []
    for line in body.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        status = re.search(r"#\s*exits (\d+)", line)
        found.append((line.split("  #")[0].strip(), int(status.group(1)) if status else 0))
    return found


ALL = [block for page in PAGES for block in blocks(page)]


def test_every_block_is_labelled_and_the_ones_not_run_say_why():
    for block in ALL:
        assert block.lang in ("python", "bash", "text", "json"), f"{block.where}: label the block"
        if block.note == QUICK_START:
            assert block.page.name == "README.md"
        elif block.note is not None and block.note.startswith(EXCERPT):
            assert block.lang == "text", f"{block.where}: an excerpt is a text block"
        elif block.note is not None and block.note.startswith(NOT_RUN):
            runner = re.search(r"tests/\w+\.py", block.note)
            assert runner and (ROOT / runner.group()).is_file(), f"{block.where}: name the test that runs it"


def test_ci_runs_the_quick_start_verbatim():
    assert "python tests/test_docs.py --quick-start" in (ROOT / ".ci" / "run").read_text()
    assert "python -m pytest" in quick_start() and "symgrad derive ops/" in quick_start()


def test_json_blocks_parse():
    for block in (b for b in ALL if b.lang == "json"):
        json.loads(block.body)


def _workdir(page: Path, tmp_path: Path) -> Path:
    """Where a reader of `page` works: the README's tutorial starts from an empty folder, the
    docs pages in a checkout (the op library and its generated modules beside them)."""
    if page.name != "README.md":
        for name in ("ops", "generated"):
            (tmp_path / name).symlink_to(ROOT / name)
    return tmp_path


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "3"}
    return subprocess.run(args, capture_output=True, text=True, cwd=cwd, env=env, timeout=600)


def _script(page_blocks: list[Block]) -> str:
    """The page's python blocks as one script that then calls the `test_*` functions defined."""
    code = "\n\n".join(b.body for b in page_blocks)
    return code + (
        "\n\nfor _name, _value in list(globals().items()):\n"
        "    if _name.startswith('test_') and callable(_value):\n"
        "        _value()\n"
    )


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_page_runs(page, tmp_path):
    workdir = _workdir(page, tmp_path)
    page_blocks = [b for b in blocks(page) if b.note is None]
    for block in page_blocks:  # in reading order: a file, then the commands that use it
        if block.lang == "python" and block.file_name:
            (workdir / block.file_name).write_text(block.body)
        elif block.lang == "bash":
            for command, status in commands(block.body):
                args = shlex.split(command)
                args = [sys.executable, "-m", "symgrad", *args[1:]] if args[0] == "symgrad" else args
                result = _run(args, workdir)
                assert result.returncode == status, f"{block.where}: {command}\n{result.stderr[-2000:]}"
    for block in (b for b in blocks(page) if b.note and b.note.startswith(EXCERPT)):
        _check_excerpt(block, workdir / block.note[len(EXCERPT):].strip())
    scripts = [b for b in page_blocks if b.lang == "python" and not b.file_name]
    if not scripts:
        return
    path = workdir / f"_{page.stem}_blocks.py"
    path.write_text(_script(scripts))
    result = _run([sys.executable, str(path)], workdir)
    assert result.returncode == 0, f"{page.name}: {result.stderr[-3000:]}"
    if re.search(r"^@(op|elementwise)\(", path.read_text(), re.M):
        _derive_declarations(page, scripts, workdir)


def _check_excerpt(block: Block, path: Path) -> None:
    """The block's lines (but a last `...`) are consecutive lines of `path`, as written."""
    lines = block.body.splitlines()
    if lines and lines[-1].strip() == "...":
        lines = lines[:-1]
    assert path.is_file(), f"{block.where}: the page's commands wrote no {path.name}"
    written = path.read_text().splitlines()
    starts = [n for n, line in enumerate(written) if line == lines[0]]
    assert any(written[n : n + len(lines)] == lines for n in starts), (
        f"{block.where}: not what {path.name} holds; it has:\n"
        + "\n".join(written[starts[0] : starts[0] + len(lines)] if starts else written[:20])
    )


def _derive_declarations(page: Path, scripts: list[Block], workdir: Path) -> None:
    """A page that declares ops: its declarations, as one op file, derive and verify."""
    op_file = workdir / f"{page.stem}_ops.py"
    op_file.write_text("\n\n".join(b.body for b in scripts))
    result = _run([sys.executable, "-m", "symgrad", "derive", op_file.name, "-o", "page_generated"], workdir)
    assert result.returncode == 0, f"{page.name}: {result.stderr[-3000:]}"


if __name__ == "__main__" and sys.argv[1:] == ["--quick-start"]:
    print(quick_start(), end="")


# --- the README's figures ------------------------------------------------------------------


def _figure(pattern: str) -> int:
    """The number the README states where `pattern` (a regex with one group) matches it."""
    text = " ".join((ROOT / "README.md").read_text().split())
    found = re.findall(pattern, text)
    assert len(found) == 1, f"the README states {pattern!r} {len(found)} times"
    return int(found[0].replace(",", ""))


def test_the_readmes_counts_of_the_library_are_true(jax, torch):
    from symgrad.backends.jax.functions import FUNCTIONS as JAX_FUNCTIONS
    from symgrad.backends.torch.functions import FUNCTIONS as TORCH_FUNCTIONS
    from symgrad.load import load_op_file, op_file_paths

    decls = [d for path in op_file_paths([ROOT / "ops"]) for d in load_op_file(path).ops]
    numpy_modules = "".join(p.read_text() for p in sorted((ROOT / "generated").glob("*_numpy.py")))
    second_order = set(re.findall(r"^def (\w+)_grad_grad\(", numpy_modules, re.M))
    assert _figure(r"The first derives (\d+) op types") == len(decls)
    assert _figure(r"of the library's (\d+) ops;") == len(decls)
    assert _figure(r"through their own forward and gradient: (\d+) of the library's") == len(
        [d for d in decls if d.func_name in second_order]
    )
    assert _figure(r"the (\d+) op types `symgrad/backends/jax/functions.py` maps") == len(JAX_FUNCTIONS)
    assert _figure(r"the (\d+) op types `symgrad/backends/torch/functions.py` maps") == len(TORCH_FUNCTIONS)


def test_the_readmes_count_of_tests_is_within_five_percent_of_what_runs():
    """The README's test command runs the tests `pytest` collects by default (`exhaustive`
    deselected): their number, measured with its time, must stay near the one it states."""
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"],
        capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=600,
    )
    collected = re.search(r"^(\d+)(?:/\d+)? tests collected", result.stdout, re.M)
    assert collected, result.stdout[-2000:] + result.stderr[-2000:]
    stated = _figure(r"([\d,]+) tests \(")
    assert abs(int(collected.group(1)) - stated) <= 0.05 * stated, (
        f"the README states {stated} tests, pytest collects {collected.group(1)}: measure the run again"
    )
