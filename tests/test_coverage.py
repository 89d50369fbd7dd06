"""The coverage table: from a report, with the op types not declared listed by why; the table of
docs/coverage.md names every declared op type, and the reasons name none."""

from __future__ import annotations

import re

from conftest import OPS, ROOT
from symgrad.verify.coverage import END, NOT_DECLARED, START, coverage_markdown
from symgrad.load import load_op_file, op_file_paths

DECLARED = {d.name for path in op_file_paths([OPS]) for d in load_op_file(path).ops}


def _row(op, target, status, variant="v", dtype="float64", **extra):
    return {"op": op, "variant": variant, "dtype": dtype, "target": target, "status": status,
            "message": extra.pop("message", ""), **extra}


def test_table_counts_and_missing_op_types_by_reason():
    report = {
        "results": [
            _row("Mul", "numpy", "match"),
            _row("Mul", "tensorflow", "match"),
            _row("Cumprod", "numpy", "mismatch", message="differs", verdict="reference wrong"),
            _row("Cumprod", "tensorflow", "match"),
        ],
        "summary": {"match": 3, "mismatch": 1, "error": 0, "no-reference": 0},
    }
    table = coverage_markdown(report, {"math_grad": ["Mul", "Cumprod", "TopKV2", "AddN"]})
    assert "| Mul | 1 | match (1) | match (1) |  |" in table
    assert re.search(r"\| Cumprod \| 1 \| mismatch \(1: float64\) \| match \(1\) \| \*\*reference wrong\*\*: differs \|", table)
    assert "2 op types, 4 results: 3 match, 1 mismatch" in table
    assert "2 of their op types are declared. The 2 others, by why:" in table
    assert "* a selection by sorting, by an optimisation or by random regions, not an index sum (1): TopKV2" in table
    assert "* not declared yet, no obstacle known (1): AddN" in table


def test_reasons_name_no_declared_op_type():
    listed = {op for ops in NOT_DECLARED.values() for op in ops.split()}
    assert listed and not listed & DECLARED, listed & DECLARED


def test_docs_table_names_every_declared_op_type():
    text = (ROOT / "docs" / "coverage.md").read_text()
    table = text.split(START, 1)[1].split(END, 1)[0]
    rows = set(re.findall(r"^\| (\w+) \| (?:\d+|-) \|", table, re.MULTILINE))
    assert DECLARED <= rows, f"regenerate the coverage table of docs/coverage.md: {sorted(DECLARED - rows)}"
