"""Results of `symgrad diff` and `symgrad check`: one per op x variant x dtype x target, as a
text table with a pinpointed report per failure, as JSON, and as an exit status.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from symgrad.verify.compare import ArrayDiff, Finding, scalar_text

# "non-finite": a gradient NaN or infinite where finite differences of a finite forward are
# not (symgrad.verify.extremes), a mismatch of its own kind; "wrong-dtype": a gradient whose dtype is
# not its input's (`compare.wrong_dtypes`), another; "unstable forward": a gradient that
# differences of the float64 forward fail and those of the same forward in extended precision
# pass (`check.unstable_forward`): the forward is at fault
UNSTABLE_FORWARD = "unstable forward"
STATUSES = ("match", "mismatch", "non-finite", "wrong-dtype", UNSTABLE_FORWARD, "error", "no-reference", "unavailable")
FAILING = ("mismatch", "non-finite", "wrong-dtype", UNSTABLE_FORWARD, "error")
MISMATCHES = ("mismatch", "non-finite", "wrong-dtype", UNSTABLE_FORWARD)
EXIT_MATCH, EXIT_MISMATCH, EXIT_ERROR = 0, 1, 2


@dataclass
class Result:
    """One row: an op variant on one dtype and target, against one reference."""

    op: str  # op type
    variant: str | None  # enumerated attributes, e.g. "transpose_a=True, transpose_b=False"
    dtype: str | None  # "float32", "float64", "complex64", "complex128"
    target: str | None  # the derived code compared: "numpy" or "tensorflow"
    reference: str  # what it is compared with: "tensorflow", a module, "finite differences"
    status: str  # one of STATUSES
    max_abs_err: float | None = None  # largest |got - expected| over every case and input
    max_rel_err: float | None = None  # largest |got - expected| / |expected| (expected != 0)
    cases: int = 0  # cases compared
    skipped: int = 0  # cases the reference cannot run, or elements no difference can test
    verdict: str | None = None  # for a diff mismatch: which side finite differences agree with
    message: str = ""  # one line: the finding, or why there is no reference
    detail: dict = field(default_factory=dict)  # for a failure: input, index, values, snippet

    def to_json(self) -> dict:
        row = {k: _json_value(v) for k, v in self.__dict__.items() if k != "detail"}
        if self.detail:
            row["detail"] = {k: _json_value(v) for k, v in self.detail.items()}
        return row


def _json_value(value):
    """Plain JSON: NaN and infinities as the strings "nan", "inf", "-inf"; complex as text."""
    if isinstance(value, dict):
        return {k: _json_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_value(v) for v in value]
    if isinstance(value, (np.generic, np.ndarray)):
        value = value.tolist() if isinstance(value, np.ndarray) else value.item()
        return _json_value(value)
    if isinstance(value, complex):
        return scalar_text(value).replace("np.", "")
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return value


def summarize(
    row: Result, diffs: list[ArrayDiff], findings: list[Finding], compared: int, skipped: int
) -> Finding | None:
    """Fill in `row`'s status, errors and report from its comparisons; the finding reported:
    the first mismatch in case order (random values first), else the first error."""
    row.cases, row.skipped = compared, skipped
    row.max_abs_err = max((d.max_abs for d in diffs), default=None)
    row.max_rel_err = max((d.max_rel for d in diffs), default=None)
    values = [f for f in findings if f.status in ("mismatch", "non-finite")]
    values += [f for f in findings if f.status == UNSTABLE_FORWARD]  # a gradient's own fault first
    dtypes = [f for f in findings if f.status == "wrong-dtype"]
    errors = [f for f in findings if f.status == "error"]
    chosen = (values or dtypes or errors or [None])[0]
    if chosen is None:
        row.status = "match"
        return None
    row.status = chosen.status
    row.message = chosen.message
    row.detail = finding_detail(chosen)
    row.detail["failing_cases"] = sorted({f.case.label for f in findings})
    return chosen


def finding_detail(finding: Finding) -> dict:
    detail = {"case": finding.case.label}
    if finding.input is not None:
        detail["input"] = finding.input
    if finding.index is not None:
        detail.update(
            index=list(finding.index),
            expected=finding.expected,
            got=finding.got,
            bad_elements=finding.bad,
            elements=finding.total,
        )
    if finding.note:
        detail["note"] = finding.note
    return detail


def summary(results: list[Result]) -> dict[str, int]:
    return {status: sum(r.status == status for r in results) for status in STATUSES}


def exit_status(results: list[Result]) -> int:
    """2 on any error, else 1 on any mismatch (or non-finite gradient, or one of the wrong
    dtype), else 0 (no-reference rows do not fail a run)."""
    statuses = {r.status for r in results}
    if "error" in statuses:
        return EXIT_ERROR
    return EXIT_MISMATCH if statuses & set(MISMATCHES) else EXIT_MATCH


UNCOMPARED = ("no-reference", "unavailable")  # rows where nothing was compared


def nothing_compared(results: list[Result]) -> str | None:
    """When no row compared anything (every op without a reference, or missing from its
    target): one line saying what was looked for, from the rows' reasons; else None."""
    if any(r.status not in UNCOMPARED for r in results):
        return None
    reasons = list(dict.fromkeys(f"{r.op}: {r.message}" for r in results))
    shown = "; ".join(reasons[:3]) + (f" (and {len(reasons) - 3} more)" if len(reasons) > 3 else "")
    return f"nothing was compared against {references_text(r.reference for r in results)}: {shown or 'no op was selected'}"


def write_json(results: list[Result], path: str | Path) -> None:
    document = {"results": [r.to_json() for r in results], "summary": summary(results)}
    Path(path).write_text(json.dumps(document, indent=1) + "\n")


# --- text ----------------------------------------------------------------------------------------

COLUMNS = ("op", "variant", "dtype", "target", "status", "max abs err", "max rel err", "cases")


def format_report(results: list[Result], verbose: bool = False) -> str:
    """The table (failures only unless `verbose`), each failure's report, and the summary."""
    shown = results if verbose else [r for r in results if r.status in FAILING]
    parts = []
    if shown:
        parts.append(format_table(shown))
    failing: dict[str, list[Result]] = {}
    for row in results:
        if row.status in FAILING:
            failing.setdefault(row.op, []).append(row)
    for rows in failing.values():  # one full report per op; its other failures in a line each
        parts.append(
            "\n".join(
                [format_failure(rows[0])]
                + [f"  also {r.status} in {_where(r)}: {r.message}" for r in rows[1:]]
            )
        )
    reasons = dict.fromkeys(f"  {r.op}: {r.message}" for r in results if r.status == "no-reference")
    if reasons:
        parts.append("no reference:\n" + "\n".join(reasons))
    missing = dict.fromkeys(f"  {r.op} ({r.target}): {r.message}" for r in results if r.status == "unavailable")
    if missing:
        parts.append("not in a target's module (the target lacks what the op needs):\n" + "\n".join(missing))
    counts = summary(results)
    parts.append(
        f"{len(results)} result(s) against {references_text(r.reference for r in results)}: "
        + ", ".join(f"{n} {status}" for status, n in counts.items())
    )
    return "\n\n".join(parts)


def references_text(references) -> str:
    """The references rows were compared with, each named once: "finite differences" and
    "finite differences, extreme inputs" read "finite differences, extreme inputs included"."""
    qualified: dict[str, list[str]] = {}
    for reference in references:
        base, _, qualifier = reference.partition(", ")
        qualified.setdefault(base, [])
        if qualifier not in qualified[base]:
            qualified[base].append(qualifier)
    texts = []
    for base, qualifiers in qualified.items():
        named = " and ".join(q for q in qualifiers if q)
        plain = "" in qualifiers
        texts.append(f"{base}, {named} included" if named and plain else f"{base}, {named}" if named else base)
    return " and ".join(texts) or "-"


def format_table(rows: list[Result]) -> str:
    with_verdict = any(r.verdict for r in rows)
    columns = COLUMNS + (("verdict",) if with_verdict else ())
    cells = [columns] + [
        (
            r.op,
            r.variant or "-",
            r.dtype or "-",
            r.target or "-",
            r.status,
            _number(r.max_abs_err),
            _number(r.max_rel_err),
            str(r.cases) + (f" (+{r.skipped} skipped)" if r.skipped else ""),
        )
        + ((r.verdict or "-",) if with_verdict else ())
        for r in rows
    ]
    widths = [max(len(row[n]) for row in cells) for n in range(len(columns))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells)


def _number(value) -> str:
    return "-" if value is None else f"{value:.3g}"


def _where(row: Result) -> str:
    variant = f"[{row.variant}] " if row.variant else ""
    return f"{variant}{row.dtype} {row.target}"


def format_failure(row: Result) -> str:
    """The pinpointed report of one failing row."""
    lines = [f"{row.status.upper()}: {row.op} {_where(row)} against {row.reference}: {row.message}"]
    d = row.detail
    if "index" in d:
        lines.append(
            f"  worst element: {d['input']}{list(d['index'])} in case {d['case']!r}: "
            f"expected {_text(d['expected'])}, got {_text(d['got'])}"
        )
        if d.get("values"):
            lines.append(
                "  inputs there: " + ", ".join(f"{k} = {_text(v)}" for k, v in d["values"].items())
            )
    elif "case" in d:
        lines.append(f"  in case {d['case']!r}")
    if d.get("expected_from"):
        lines.append(f"  expected: {d['expected_from']}; got: {d['got_from']}")
    if row.verdict:
        lines.append(f"  verdict: {row.verdict}")
    if d.get("note"):
        lines.append(f"  note: {d['note']}")
    if len(d.get("failing_cases", ())) > 1:
        lines.append(f"  failing cases: {'; '.join(d['failing_cases'])}")
    if d.get("snippet"):
        lines.append("  smallest failing case, to paste:")
        lines += ["    " + line if line else "" for line in d["snippet"].splitlines()]
    return "\n".join(lines)


def _text(value) -> str:
    return (
        scalar_text(value).replace("np.", "")
        if isinstance(value, (int, float, complex, np.generic))
        else str(value)
    )
