"""`symgrad explain`, run as a subprocess: the derivation as Markdown, and bad input."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from conftest import OPS, ROOT
from test_cli import GOOD, write_ops


def explain(*args):
    """`python -m symgrad explain ARGS` (explain has no cache: it derives one variant)."""
    return subprocess.run(
        [sys.executable, "-m", "symgrad", "explain", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=600,
    )


def section(markdown: str, title: str) -> str:
    """The text of `## title` up to the next heading."""
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^#)", markdown + "\n#", re.S | re.M)
    assert match, f"no section {title!r} in:\n{markdown}"
    return match.group(1)


def test_matmul_is_explained_step_by_step():
    result = explain(OPS / "matmul.py", "--op", "MatMul")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.startswith("# MatMul\n\nDeclared at ")
    assert re.findall(r"^#+ .*", out, re.M) == [
        "# MatMul",
        "## Forward",
        "## Partial derivatives",
        "## Contraction with the upstream gradient",
        "## Kronecker deltas eliminated",
        "## Contracted gradient",
        "## Lowering",
    ]  # SparseMatMul, declared in the same file, is not explained
    assert (
        "Explained for transpose_a=False, transpose_b=False, the defaults; the 3 other variants"
        in out
    )
    assert "product[i, j] = sum_k a[i, k] * b[k, j]" in section(out, "Forward")
    partials = section(out, "Partial derivatives")
    assert (
        "d product[i, j] / d a[a_0, a_1] = sum_k delta(a_0, i) * delta(a_1, k) * b[k, j]"
        in partials
    )
    contraction = section(out, "Contraction with the upstream gradient")
    assert (
        "grad_a[a_0, a_1] = sum_{i, j, k} grad[i, j] * delta(a_0, i) * delta(a_1, k) * b[k, j]"
        in contraction
    )
    deltas = section(out, "Kronecker deltas eliminated")
    assert (
        "- `delta(a_0, i): i := a_0, delta(a_1, k): k := a_1` summed out:\n"
        "  `grad_a[a_0, a_1] = sum_j grad[a_0, j] * b[a_1, j]`"
    ) in deltas
    gradient = section(out, "Contracted gradient")
    assert (
        "grad_a[i, k] = sum_j grad[i, j] * conj(b[k, j])\ngrad_b[k, j] = sum_i grad[i, j] * conj(a[i, k])"
        in gradient
    )
    assert (
        "```python\na = _conj(a)\nb = _conj(b)\ngrad_a = grad @ b.T\ngrad_b = a.T @ grad\n```"
        in section(out, "Lowering")
    )


def test_an_elementwise_op_has_no_delta_to_eliminate(tmp_path):
    result = explain(write_ops(tmp_path, "cube.py", GOOD))
    assert result.returncode == 0, result.stderr
    assert "d y / d x = 3 * x**2" in section(result.stdout, "Partial derivatives")
    assert "None: an elementwise op" in section(result.stdout, "Kronecker deltas eliminated")
    assert "grad_x = 3 * grad * x**2" in section(result.stdout, "Contracted gradient")


def test_a_composed_op_is_explained_stage_by_stage():
    result = explain(OPS / "composed.py", "--op", "layer_norm")  # its Python name names it too
    assert result.returncode == 0, result.stderr
    assert re.findall(r"^# .*", result.stdout, re.M) == ["# LayerNorm"]
    assert "sum1[batch] = sum_{k_1} x[batch, k_1]" in section(result.stdout, "Forward")
    contraction = section(result.stdout, "Contraction with the upstream gradient")
    assert (
        "grad_x[x_0, x_1] += sum_{batch, k_1} grad_sum1[batch] * delta(batch, x_0) * delta(k_1, x_1)"
        in contraction
    )
    assert "grad_offset[i] = sum_batch grad[batch, i]" in section(
        result.stdout, "Contracted gradient"
    )


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ("ops/matmul.py", "--op", "MatMull"),
            "error: --op MatMull: no op MatMull is declared in ops/matmul.py (did you mean MatMul?)\n",
        ),
        (
            ("ops/no_such_file.py",),
            "error: loading failed: no such op file or folder: ops/no_such_file.py\n",
        ),
    ],
)
def test_an_unknown_op_or_file_is_one_error_and_exit_2(args, message):
    result = explain(*args)
    assert (result.returncode, result.stdout, result.stderr) == (2, "", message)


def test_a_file_that_fails_to_load_is_one_error_and_exit_2(tmp_path):
    path = write_ops(tmp_path, "broken.py", "@op('Broken')\ndef broken(:\n    pass\n")
    result = explain(path)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith("error: loading failed") and f"{path}:5" in result.stderr
