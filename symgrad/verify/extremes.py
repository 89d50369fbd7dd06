"""`symgrad check` at extreme inputs: gradients that are NaN or infinite where the math is not.

Per real dtype, inputs around where `exp` overflows in it (88.7 in float32, 709.8 in float64),
at 1e4, 0 and the tiny: elementwise ops every combination of those values over their inputs,
index ops their first shape case with entries of those magnitudes (random signs, the first
at the peak a softmax has), and all tiny (zeros are probed by the rows of ordinary inputs). Each case is kept where the derived numpy forward is finite in the dtype, as
everywhere. The target's gradient runs in the dtype; an element that is NaN, or infinite
though the derivative is below the dtype's largest value, where central differences of the
forward in float64 are finite and settle (the one-sided differences agree: not a kink, not a
pole) is a finding of its own kind, "non-finite". Finite values are compared by the rows of
ordinary inputs, not here: at these magnitudes float32 keeps a few digits only.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from symgrad.verify import check, differences
from symgrad.verify.cases import (
    Case, as_conditions, bound_forward, discrete, dtypes_of, for_dtype, grid_case, make_cases, sampled, upstream_dtypes, values_only,
)
from symgrad.verify.compare import Finding, GradientCallError, case_snippet, wrong_dtypes
from symgrad.verify.ops_under_test import DerivedOp, Variant, variants_of
from symgrad.verify.report import Result, summarize
from symgrad.verify.sources import Gradients, derived_sources

REFERENCE = "finite differences, extreme inputs"
STATUS = "non-finite"
MAGNITUDES = {  # beside each dtype's exp overflow point, well beyond it, and large
    "float32": (80.0, 88.0, 89.0, 100.0, 1e4),
    "float64": (700.0, 709.0, 710.0, 1e4),
}
TINY = {"float32": 1e-37, "float64": 1e-300}
ORDINARY = (1.0, -1.0)  # beside an extreme value in another input
MOST_DIFFERENCED = 8  # elements differenced per input and case (those with a non-finite gradient)


def run_extremes(ops: list[DerivedOp], targets, dtypes=None, sample: int | None = None) -> list[Result]:
    """One row per op x variant x real dtype x target."""
    return [row for op in ops for row in _op_rows(op, targets, dtypes, sample)]


def _op_rows(op: DerivedOp, targets, dtypes, sample) -> list[Result]:
    real = [d for d in dtypes_of(op, dtypes) if not d.startswith("complex")]
    groups = []
    for variant in sampled(variants_of(op), sample):
        forward = bound_forward(variant)
        for dtype in real:
            groups.append((variant, dtype, forward, extreme_cases(variant, forward, dtype)))
    work = [(variant, cases) for variant, _, _, cases in groups]
    sources, unavailable = derived_sources(op, targets, REFERENCE, stand_in=True)
    outcomes = {target: source.run_many(work) for target, source in sources.items()}
    return [
        _row(Result(op.name, variant.label, dtype, target, REFERENCE, "match"), variant, forward, cases, outcomes[target][k])
        for k, (variant, dtype, forward, cases) in enumerate(groups)
        for target in sources
    ] + unavailable


def extreme_cases(variant: Variant, forward, dtype: str) -> list[Case]:
    """The extreme cases of `variant` in `dtype`, where its forward is finite."""
    values = (0.0, TINY[dtype], -TINY[dtype], *ORDINARY) + tuple(s * m for m in MAGNITUDES[dtype] for s in (1, -1))
    seed = f"{variant.op.name}|{variant.label}|extremes|{dtype}"
    if variant.shapes is None:
        n = len(variant.inputs)
        grid = grid_case(f"extreme values for {dtype}", [list(values)] * n, lambda c: any(abs(v) > 10 for v in c))
        cases = [replace(grid, inputs=as_conditions(variant, grid.inputs))]
    else:
        cases = _index_extremes(variant, forward, dtype, np.random.default_rng(len(seed)))
    return for_dtype(cases, np.dtype(dtype), forward, seed, upstream_dtypes(variant, dtype))


def _index_extremes(variant: Variant, forward, dtype: str, rng) -> list[Case]:
    ordinary = make_cases(variant, forward, False)[:1]
    if not ordinary:
        return []
    base, label = ordinary[0].inputs, ordinary[0].label.split("; ", 1)[-1]
    signs = lambda x: np.sign(rng.standard_normal(np.shape(x)))
    large = lambda x: _one_large(signs(x) * rng.choice(MAGNITUDES[dtype], np.shape(x)), dtype)
    peak = f"{MAGNITUDES[dtype][-2]:g}"
    return [
        Case(f"magnitudes near exp overflow in {dtype}, the first {peak}; {label}", values_only(variant, base, large)),
        Case(f"tiny values ({TINY[dtype]:g}); {label}", values_only(variant, base, lambda x: np.sign(x) * TINY[dtype])),
    ]


def _one_large(x, dtype: str) -> np.ndarray:
    """`x` with its first entry at the dtype's largest probe magnitude (a softmax's peak)."""
    x = np.array(x, dtype=float)
    if x.size:
        x.flat[0] = MAGNITUDES[dtype][-2]
    return x


def _row(row: Result, variant: Variant, forward, cases: list[Case], outcomes: list) -> Result:
    findings, compared = [], 0
    for case, outcome in zip(cases, outcomes):
        if isinstance(outcome, GradientCallError):
            findings.append(Finding("error", case, f"{row.target} {outcome}"))
        elif isinstance(outcome, Gradients):
            compared += 1
            findings += nonfinite_findings(variant, forward, case, outcome.grads, row.dtype)
            findings += wrong_dtypes(variant, case, outcome.grads)
    chosen = summarize(row, [], findings, compared, 0)
    row.max_abs_err = row.max_rel_err = None  # finiteness only: no values are compared
    if chosen is not None and chosen.status == STATUS:
        row.detail.update(expected_from=REFERENCE, got_from=row.target)
        row.detail["snippet"] = case_snippet(variant, chosen.case, [""] + check.difference_lines(variant, chosen.input))
    return row


def nonfinite_findings(variant: Variant, forward, case: Case, grads: list, dtype: str) -> list[Finding]:
    """A finding per input whose gradient is not finite where the derivative is."""
    as64 = replace(case, inputs=tuple(_float64(x) for x in case.inputs), upstream=tuple(_float64(u) for u in case.upstream))
    boundary = check.BranchConditions(variant)
    stopped = check.stopped_inputs(variant)
    findings = []
    for n, (name, g) in enumerate(zip(variant.inputs, grads)):
        if g is None or name in stopped or name in variant.integers:
            continue
        g = np.broadcast_to(np.asarray(g), np.shape(case.inputs[n]))
        suspects = [tuple(k) for k in np.argwhere(~np.isfinite(g))[:MOST_DIFFERENCED]]
        if not suspects:
            continue
        central = _derivative_at(forward, boundary, as64, n, suspects)
        limit = np.finfo(dtype).max / 2
        wrong = [
            (k, c) for k, c in zip(suspects, central)
            if np.isfinite(c) and (np.isnan(g[k]) or abs(c) < limit)
        ]
        if wrong:
            findings.append(_finding(case, name, wrong, g, len(suspects)))
    return findings


def _derivative_at(forward, boundary, case: Case, n: int, elements: list) -> list[float]:
    """The derivative of the loss at each of `elements` of input n, by central differences in
    float64; NaN where the forward is not finite within the steps or they do not settle."""
    if case.aligned:
        steps = np.maximum(1.0, np.abs(case.inputs[n]))
        d = differences.differences(forward, boundary, case, n, steps, steps, per_element=True)
        return [_settled(d, k) for k in elements]
    x = case.inputs[n]
    results = []
    for k in elements:
        unit = differences.unit(x, k)
        results.append(_settled(differences.differences(forward, boundary, case, n, unit, np.max(unit), False), ()))
    return results


def _settled(d: dict, k: tuple) -> float:
    """The central difference at k where it is one: finite, the one-sided differences agreeing
    (not a kink) and the error estimate small (not a pole)."""
    pick = lambda key: np.asarray(d[key])[k] if np.ndim(d[key]) else d[key]
    central, left, right, error = (complex(pick(key)).real for key in ("central", "left", "right", "error"))
    allowed = differences.RTOL * abs(central) + differences.ATOL * max(1.0, abs(central)) + error
    agrees = abs(left - right) <= 1e-2 * abs(central) + allowed and error <= 0.5 * abs(central) + differences.ATOL
    finite = bool(np.all(pick("finite"))) and np.isfinite(central)
    return central if finite and agrees else float("nan")


def _finding(case: Case, name: str, wrong: list, g, suspects: int) -> Finding:
    k, central = wrong[0]
    message = (
        f"the gradient of {name} is {g[k]} at {len(wrong)} of {suspects} non-finite element(s) where "
        f"{REFERENCE.split(',')[0]} of the finite forward give {central:.6g}"
    )
    return Finding(STATUS, case, message, input=name, index=tuple(int(i) for i in k), expected=central, got=g[k], bad=len(wrong), total=int(np.size(g)))


def _float64(x) -> np.ndarray:
    x = np.asarray(x)
    return x if discrete(x) else x.astype(np.float64)

