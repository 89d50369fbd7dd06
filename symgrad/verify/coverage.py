"""The coverage table of a `symgrad diff ... --against tensorflow --json` report, in Markdown.

    python -m symgrad.verify.coverage report.json                  # print the table
    python -m symgrad.verify.coverage report.json --write docs/coverage.md  # replace it between the markers

Per op type: its variants and, per derived target, the status over every variant and dtype.
Then the op types whose gradients TensorFlow hand-writes in math_grad.py, nn_grad.py and
array_grad.py (read from TensorFlow's gradient registry at run time) that are not covered.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from symgrad.verify.ops_under_test import import_tf

TF_GRAD_MODULES = ("math_grad", "nn_grad", "array_grad")
START, END = "<!-- coverage:start -->", "<!-- coverage:end -->"


def coverage_markdown(report: dict, tf_gradients: dict[str, list[str]] | None = None) -> str:
    """The table (and, given TensorFlow's hand-written gradients by module, what is missing)."""
    rows = report["results"]
    ops = list(dict.fromkeys(r["op"] for r in rows))
    targets = sorted({r["target"] for r in rows if r["target"]}) or ["numpy", "tensorflow"]
    lines = [
        "| op type | variants | " + " | ".join(targets) + " | notes |",
        "| --- | --- | " + " | ".join("---" for _ in targets) + " | --- |",
    ]
    for op in ops:
        mine = [r for r in rows if r["op"] == op]
        variants = len({r["variant"] for r in mine if r["variant"] is not None}) or "-"
        cells = [_status_cell([r for r in mine if r["target"] in (t, None)]) for t in targets]
        lines.append(f"| {op} | {variants} | " + " | ".join(cells) + f" | {_notes(mine)} |")
    counts = ", ".join(f"{n} {status}" for status, n in report["summary"].items())
    lines += ["", f"{len(ops)} op types, {len(rows)} results: {counts}."]
    verdicts = {}
    for r in rows:
        if r["status"] == "mismatch":
            verdict = r.get("verdict") or "no verdict"
            verdicts[verdict] = verdicts.get(verdict, 0) + 1
    if verdicts:
        lines[-1] += " Mismatches, by what finite differences say: " + ", ".join(
            f"{verdict} ({n})" for verdict, n in verdicts.items()
        ) + "."
    if tf_gradients is not None:
        lines += ["", *_missing(set(ops), tf_gradients)]
    return "\n".join(lines)


def _status_cell(rows: list[dict]) -> str:
    """`match (8)`, or each other status with the dtypes (and variants) it occurs in."""
    if rows and all(r["status"] == "no-reference" and r["dtype"] is None for r in rows):
        return "no reference"
    if {r["status"] for r in rows} == {"match"}:
        return f"match ({len(rows)})"
    variants = {r["variant"] for r in rows}
    parts = []
    for status in ("mismatch", "error", "no-reference"):
        bad = [r for r in rows if r["status"] == status]
        if bad:
            where = sorted({r["dtype"] for r in bad if r["dtype"]})
            bad_variants = sorted({r["variant"] for r in bad})
            if len(variants) > 1 and len(bad_variants) < len(variants):
                where += [f"`{v}`" for v in bad_variants]
            parts.append(f"{status} ({len(bad)}: {', '.join(where)})")
    matched = sum(r["status"] == "match" for r in rows)
    return "; ".join(parts + ([f"match ({matched})"] if matched else []))


def _notes(rows: list[dict]) -> str:
    """The first message (or diagnosis) of each status other than match."""
    notes = {}
    for r in rows:
        if r["status"] != "match" and r["status"] not in notes:
            note = ((r.get("detail") or {}).get("note") or r["message"]).replace("|", "/")
            if r.get("verdict"):  # which side finite differences agree with, first
                note = f"**{r['verdict']}**: {note}"
            notes[r["status"]] = note if len(note) <= 160 else note[:157] + "..."
    return "; ".join(notes.values())


# Why an op type TensorFlow hand-writes a gradient for is not declared in ops/; the op types
# listed nowhere here are not declared yet, with no obstacle known.
NOT_DECLARED = {
    "a selection by sorting, by an optimisation or by random regions, not an index sum":
        "ApproxTopK FractionalAvgPool FractionalMaxPool IsotonicRegression NthElement TopK TopKV2",
    "the derivative in the parameter has no closed form SymPy can print for numpy or TensorFlow "
    "(TensorFlow uses a dedicated kernel, or no gradient)": "Betainc Igamma Igammac",
    "not a derivative: the gradient blocked (an error), an op on TF1 reference tensors, or an internal op":
        "PreventGradient RefIdentity _EagerConst",
    "an input that is a resource variable, not a tensor": "ResourceGatherNd",
    "a window's argmax as a flat position in the input: `argmax` takes one index range, a "
    "window has two": "MaxPoolWithArgmax",
    "a relabelling of the flat index: declared with floor and mod of the ravelled position it "
    "lowers to a gather per variant (about 1,000 generated lines), not one reshape; lowering "
    "does not recognise it yet": "Reshape",
}


def _missing(covered: set[str], tf_gradients: dict[str, list[str]]) -> list[str]:
    total = sum(len(names) for names in tf_gradients.values())
    done = sum(name in covered for names in tf_gradients.values() for name in names)
    missing = sorted({n for names in tf_gradients.values() for n in names} - covered)
    reasons = {op: why for why, ops in NOT_DECLARED.items() for op in ops.split()}
    lines = [
        f"TensorFlow hand-writes {total} gradients in {', '.join(f'{m}.py' for m in tf_gradients)}; "
        f"{done} of their op types are declared. The {len(missing)} others, by why:",
        "",
    ]
    for why in NOT_DECLARED:
        ops = [n for n in missing if reasons.get(n) == why]
        if ops:
            lines.append(f"* {why} ({len(ops)}): " + ", ".join(ops))
    rest = [n for n in missing if n not in reasons]
    if rest:
        lines.append(f"* not declared yet, no obstacle known ({len(rest)}): " + ", ".join(rest))
    return lines


def tf_hand_written_gradients() -> dict[str, list[str]]:
    """Op types with a gradient function defined in TensorFlow's math_grad, nn_grad and
    array_grad modules, from its gradient registry (NotDifferentiable ones left out)."""
    import_tf()
    from tensorflow.python.framework import ops as tf_ops

    found: dict[str, list[str]] = {m: [] for m in TF_GRAD_MODULES}
    for name in sorted(tf_ops._gradient_registry.list()):
        fn = tf_ops._gradient_registry.lookup(name)
        module = getattr(fn, "__module__", "") or ""
        if (
            fn is not None
            and module.rsplit(".", 1)[-1] in found
            and module.startswith("tensorflow.")
        ):
            found[module.rsplit(".", 1)[-1]].append(name)
    return found


def replace_between_markers(text: str, table: str) -> str:
    """`text` with what lies between START and END replaced by `table`."""
    if START not in text or END not in text:
        raise SystemExit(f"error: the file has no {START} ... {END} section to replace")
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{START}\n{table}\n{END}{tail}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m symgrad.verify.coverage", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "report", help="JSON written by `symgrad diff ops/ --against tensorflow --json FILE`"
    )
    parser.add_argument(
        "--write", metavar="FILE", help=f"replace the text between {START} and {END} in FILE"
    )
    parser.add_argument(
        "--no-tensorflow",
        action="store_true",
        help="leave out the list of TensorFlow's gradients not covered (needs no TensorFlow)",
    )
    args = parser.parse_args(argv)
    report = json.loads(Path(args.report).read_text())
    table = coverage_markdown(report, None if args.no_tensorflow else tf_hand_written_gradients())
    if args.write:
        path = Path(args.write)
        path.write_text(replace_between_markers(path.read_text(), table))
    else:
        print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
