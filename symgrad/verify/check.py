"""`symgrad check`: derived gradients against central finite differences of the derived forward.

In float64, and complex128 for ops declared `complex=True`. With a random upstream gradient u
the loss is L(x) = Re(sum(conj(u) * f(x))) over every output; the gradient of an input is
dL/dRe(x) + i dL/dIm(x) (TensorFlow's convention: u * conj(f'(x)) for holomorphic f).

How each input is differenced, with steps h = STEP * max(1, |x|) and 2h:
* an aligned elementwise case (inputs of one 1-D shape): every element at once, since output
  element k depends on input element k alone;
* up to FULL_JACOBIAN_MAX elements: each element in turn (the Jacobian contracted with u);
* beyond: PROJECTIONS random directions v, the directional derivative against <g, v>.

An element passes when |g - d| <= RTOL * |d| + ATOL * max(1, max |d|) + 2 |d(h) - d(2h)| +
roundoff, where d is the central difference and |d(h) - d(2h)| estimates its truncation error;
or (real dtypes) when g lies between the one-sided differences, which admits a subgradient at
a kink (Relu at 0, tied maxima). Skipped, and counted: elements where the forward is not
finite within 2h; failing elements on a declared branch boundary (a `Piecewise` condition
changes within h: the declaration's convention decides there, e.g. Xlogy's gradient at
x = 0); NaN or infinite gradients where the op is not differentiable (the one-sided
differences disagree, or the central ones do not settle: a norm at 0, Atan2 at the origin).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import sympy as sp

from symgrad.declare import stop_gradient
from symgrad.declaration import ELEMENTWISE
from symgrad.errors import SymgradError
from symgrad.targets import CHECK_DTYPES, REGISTRY
from symgrad.verify.cases import Case, bound_forward, case_groups, make_cases
from symgrad.verify.compare import (
    ArrayDiff,
    Finding,
    GradientCallError,
    case_snippet,
    malformed,
    upstream_names,
    values_at,
    wrong_dtypes,
)
from symgrad.verify.ops_under_test import DerivedOp, Variant
from symgrad.verify.differences import STEP, differences, judge, stacked, unit
from symgrad.verify.report import UNSTABLE_FORWARD, Result, summarize
from symgrad.verify.sources import FrameworkLimit, Gradients, Skipped, derived_sources

FULL_JACOBIAN_MAX = 64
PROJECTIONS = 6
QUICK_FULL_MAX = PROJECTIONS  # `quick` (derive's own verification): directions beyond that
REFERENCE = "finite differences"


def available_targets() -> tuple[str, ...]:
    """The targets whose framework is installed (numpy's always is)."""
    return tuple(name for name, target in REGISTRY.items() if target.installed())


def run_check(
    ops: list[DerivedOp],
    targets: tuple[str, ...] = ("numpy",),
    dtypes: tuple[str, ...] | None = None,
    quick: bool = False,
    sample: int | None = None,
) -> list[Result]:
    """One result per op x variant x dtype x target (`quick`: on each variant's first case
    alone, as `symgrad derive` verifies what it writes; `sample`: of at most that many variants
    per op)."""
    results = []
    for op in ops:
        try:
            results += _check_op(op, targets, dtypes, quick, sample)
        except Exception as exc:  # one op's failure is its row; the others still run
            message = str(exc) if isinstance(exc, SymgradError) else f"{type(exc).__name__}: {exc}"
            results.append(Result(op.name, None, None, None, REFERENCE, "error", message=message))
    return results


def check_dtypes(dtypes: tuple[str, ...] | None) -> tuple[str, ...]:
    """The dtypes checked against finite differences, of those requested (None: all)."""
    return tuple(d for d in CHECK_DTYPES if dtypes is None or d in dtypes)


def _check_op(op: DerivedOp, targets, dtypes, quick: bool = False, sample: int | None = None) -> list[Result]:
    groups = case_groups(op, check_dtypes(dtypes), quick, sample)
    sources, unavailable = derived_sources(op, targets, REFERENCE, stand_in=True)
    rows = check_groups(op.name, groups, sources, REFERENCE, quick)
    for row, (variant, _, _) in zip(rows, [g for g in groups for _ in sources]):
        if row.status == "match" and not row.cases:
            row.message = _why_no_case(variant, bound_forward(variant))
    return rows + unavailable


def check_groups(
    name: str, groups: list[tuple[Variant, str, list[Case]]], sources: dict, reference: str = REFERENCE,
    quick: bool = False,
) -> list[Result]:
    """One row per (variant, dtype, cases) group x source ({target: source}): each source's
    gradients of the variant's inputs against differences of `bound_forward(variant)`."""
    work = [(variant, cases) for variant, _, cases in groups]
    outcomes = {target: source.run_many(work) for target, source in sources.items()}
    conditions = {id(variant): BranchConditions(variant) for variant, _ in work}
    memos = [[{} for _ in cases] for _, _, cases in groups]  # per case, shared by the targets
    return [
        _check_row(
            Result(name, variant.label, dtype, target, reference, "match"),
            variant,
            bound_forward(variant),
            conditions[id(variant)],
            cases,
            sources[target],
            outcomes[target][k],
            quick,
            memos[k],
        )
        for k, (variant, dtype, cases) in enumerate(groups)
        for target in sources
    ]


def _check_row(
    row: Result, variant, forward, boundary, cases: list[Case], source, outcomes, quick: bool = False,
    memos: list[dict] | None = None,
) -> Result:
    diffs, findings, compared, skipped, limits = [], [], 0, 0, []
    for case, outcome, memo in zip(cases, outcomes, memos or [None] * len(cases)):
        if isinstance(outcome, Skipped):
            limits += [outcome] if isinstance(outcome, FrameworkLimit) else []
            continue
        if isinstance(outcome, GradientCallError):
            findings.append(Finding("error", case, f"{source.label} {outcome}"))
            continue
        bad_form = malformed(variant, case, outcome.grads)
        if bad_form:
            findings += [replace(f, message=f"{source.label} {f.message}") for f in bad_form]
            continue
        findings += [replace(f, message=f"{source.label} {f.message}") for f in wrong_dtypes(variant, case, outcome.grads)]
        compared += 1
        # quick: along random directions; where they disagree, element by element (as always)
        full_max = QUICK_FULL_MAX if quick else FULL_JACOBIAN_MAX
        d, f, s = check_case(variant, forward, boundary, case, outcome.grads, full_max, memo)
        if quick and f:
            d, f, s = check_case(variant, forward, boundary, case, outcome.grads, FULL_JACOBIAN_MAX, memo)
        diffs, findings, skipped = diffs + d, findings + f, skipped + s
    if limits and not compared and not findings:  # the framework computes none of them
        row.status, row.skipped, row.message = "unavailable", len(limits), f"{source.label} {limits[0].reason}"
        return row
    chosen = summarize(row, diffs, findings, compared, skipped + len(limits))
    if chosen is not None:
        row.detail.update(expected_from=row.reference, got_from=source.label)
        _pinpoint(row, chosen, variant, forward, boundary, source)
    return row


def _why_no_case(variant, forward) -> str:
    """What the derived forward does on the first generated cases, when none could be checked."""
    for case in make_cases(variant, forward, False)[:3]:
        try:
            with np.errstate(all="ignore"):
                forward(*case.inputs)
        except Exception as exc:
            return f"the derived forward raised {type(exc).__name__}: {exc} (case '{case.label}')"
    return "the derived forward is not finite on any generated case"


def _pinpoint(row: Result, chosen: Finding, variant, forward, boundary, source) -> None:
    case = chosen.case
    if chosen.index is not None and chosen.input in variant.inputs:
        row.detail["values"] = values_at(variant, case, chosen)
        if case.aligned:
            small = case.take(np.array([chosen.index[0]]))
            outcome = source.run(variant, [small])[0]
            if isinstance(outcome, Gradients):
                _, findings, _ = check_case(variant, forward, boundary, small, outcome.grads)
                if findings:
                    case = replace(small, label=f"{case.label}, element {list(chosen.index)}")
    row.detail["smallest_case"] = case.label
    lines = [""] + source.call_lines(variant) + [""] + difference_lines(variant, chosen.input)
    row.detail["snippet"] = case_snippet(variant, case, lines)


def difference_lines(variant: Variant, name: str | None) -> list[str]:
    """Snippet lines that difference the derived numpy forward for input `name`."""
    name = name if name in variant.inputs else variant.inputs[0]
    func, args = variant.op.decl.func_name, ", ".join(variant.inputs)
    ups = ", ".join(upstream_names(variant))
    return [
        f"# central differences of the derived forward, for {name} (real parts)",
        f"from {variant.op.stem}_numpy import {func}",
        f"def loss({args}):",
        f"    outs = {func}({args}, **attrs)",
        "    outs = outs if isinstance(outs, tuple) else (outs,)",
        f"    return sum(np.real(np.sum(np.conj(u) * o)) for u, o in zip(({ups},), outs) if o is not None)",
        f"fd = np.zeros_like({name})",
        f"for k in np.ndindex({name}.shape):",
        f"    step = np.zeros_like({name}); step[k] = {STEP} * max(1.0, abs({name}[k]))",
        f"    plus = dict({', '.join(f'{n}={n}' for n in variant.inputs)}); plus[{name!r}] = {name} + step",
        f"    minus = dict(plus); minus[{name!r}] = {name} - step",
        "    fd[k] = (loss(**plus) - loss(**minus)) / (2 * step[k])",
        f"print({REFERENCE!r}, fd)",
    ]


# --- differences ---------------------------------------------------------------------------------


class BranchConditions:
    """The declaration's `Piecewise` conditions as numpy functions of the inputs (elementwise
    ops): where one changes value within a step, the derivative is the declared convention."""

    def __init__(self, variant: Variant):
        self.functions = []
        if variant.shapes is not None:
            return
        symbols = [sp.Symbol(n, real=True) for n in variant.inputs]
        for expr in variant.exprs:
            for piecewise in expr.subs(variant.symbols).atoms(sp.Piecewise):
                for _, condition in piecewise.args:
                    if condition not in (sp.true, sp.false):
                        self.functions.append(sp.lambdify(symbols, condition, "numpy"))

    def changes(self, points: list[tuple[np.ndarray, ...]]) -> np.ndarray | bool:
        """Per element (broadcast), whether any condition differs between the points."""
        if not self.functions or np.iscomplexobj(points[0][0]):
            return False
        changed = False
        try:
            for fn in self.functions:
                values = [np.asarray(fn(*p), dtype=bool) for p in points]
                changed = changed | np.logical_or.reduce([v != values[0] for v in values[1:]])
        except Exception:  # a condition numpy cannot evaluate: no boundary is known
            return False
        return changed


def stopped_inputs(variant: Variant) -> set[str]:
    """Inputs the declaration uses only inside `stop_gradient`: declared without a gradient
    (Zeta's x, as TensorFlow's), so differences of the forward do not judge theirs."""
    def names(expr) -> set[str]:
        found = {s.name for s in expr.free_symbols if isinstance(s, sp.Symbol)}
        return found | {str(b.label) for b in expr.atoms(sp.IndexedBase)}

    used = set().union(*(names(e) for e in variant.exprs))
    live = set().union(
        *(names(e.replace(lambda a: isinstance(a, stop_gradient), lambda a: sp.S.Zero)) for e in variant.exprs)
    )
    return {n for n in variant.inputs if n in used and n not in live}


def held_forward(variant: Variant, case: Case, forward, stopped: set[str]):
    """`forward` with each `stop_gradient(e)` held at its value at `case`'s inputs, where `e`
    reads an input that is also used outside it: the function whose derivative the
    declaration states. A straight-through estimator, `x + stop_gradient(q(x) - x)`, has the
    derivative 1 (its forward, a staircase, has 0 almost everywhere); FloorMod's
    `x - y*stop_gradient(floor(x/y))`, -floor(x/y) in y. Elementwise declarations, evaluated
    by `sp.lambdify`; elsewhere, or where that cannot evaluate them, `forward` itself.
    `stopped`: the variant's `stopped_inputs`, which the caller has."""
    if not variant.op.holds_stop_gradient or variant.op.decl.kind != ELEMENTWISE:
        return forward
    held = sorted({h for e in variant.exprs for h in e.atoms(stop_gradient)}, key=sp.default_sort_key)
    live = set(variant.inputs) - stopped
    if not any({s.name for s in h.free_symbols} & live for h in held):
        return forward
    by_name = {s.name: s for e in variant.exprs for s in e.free_symbols}
    inputs = [by_name.get(name, sp.Symbol(name)) for name in variant.inputs]
    attrs, attr_values = list(variant.symbols), list(variant.symbols.values())  # numeric attributes
    values = [sp.Dummy(f"held{k}") for k in range(len(held))]
    try:
        with np.errstate(all="ignore"):
            base = np.broadcast_arrays(*case.inputs)
            at_base = [np.asarray(sp.lambdify(inputs + attrs, h.args[0], "numpy")(*base, *attr_values)) for h in held]
            functions = [sp.lambdify(inputs + attrs + values, e.xreplace(dict(zip(held, values))), "numpy") for e in variant.exprs]
            _evaluated(functions, case.inputs, attr_values, at_base)
    except Exception:  # a function lambdify cannot print for numpy: differences of the forward
        return forward
    return lambda *xs: _evaluated(functions, xs, attr_values, at_base, single=len(functions) == 1)


def _evaluated(functions, inputs, attr_values, held_values, single: bool = False):
    """The outputs of the lambdified `functions` at `inputs` (broadcast against each other)."""
    with np.errstate(all="ignore"):
        outputs = tuple(np.asarray(f(*np.broadcast_arrays(*inputs), *attr_values, *held_values)) for f in functions)
    return outputs[0] if single else outputs


def check_case(
    variant, forward, boundary, case: Case, grads: list, full_max: int = FULL_JACOBIAN_MAX, memo: dict | None = None,
    rounding: float = 0.0,
) -> tuple[list, list, int]:
    """(diffs, findings, skipped elements) of one case's gradients against differences: of
    each element for inputs of at most `full_max` elements, else along random directions.
    `memo` keeps the case's differences for the next target's gradients."""
    diffs, findings, skipped, memo = [], [], 0, {} if memo is None else memo
    stopped = stopped_inputs(variant)
    forward = held_forward(variant, case, forward, stopped)
    for n, (name, x, g) in enumerate(zip(variant.inputs, case.inputs, grads)):
        if name in stopped:
            skipped += int(np.size(x))
            continue
        if name in variant.fixed or np.size(x) == 0:  # positions, tied, or no entry: nothing to difference
            continue
        g = np.zeros_like(x) if g is None else np.asarray(g)
        key = (n, full_max)  # the differences are the forward's: the same for every target
        if key not in memo:
            memo[key] = _input_differences(forward, boundary, case, n, full_max)
        d, directions = memo[key]
        projected = directions is not None
        got = np.array([projection(g, v, np.iscomplexobj(x)) for v in directions]) if projected else g
        diff, skips = judge(got, d, undecided_at_kinks=case.ties, rounding=rounding)
        diffs.append(diff)
        skipped += skips
        if diff.bad:
            finding = _finding(case, name, got, d, diff, projected)
            if _agrees_in_extended_precision(forward, boundary, case, n, full_max, got, memo):
                finding = unstable_forward(finding)
            findings.append(finding)
    return diffs, findings, skipped


def _agrees_in_extended_precision(forward, boundary, case: Case, n: int, full_max: int, got, memo: dict) -> bool:
    """Whether `got`, which differences of the float64 forward fail, passes against those of
    the same forward run in extended precision (`np.longdouble`, 11 more bits on x86): then
    the forward loses precision there (1 - sigmoid(30) keeps 3 digits), not the gradient.
    False where there is no wider float, or for complex inputs."""
    wide = np.longdouble
    if np.finfo(wide).eps >= np.finfo(np.float64).eps or any(np.iscomplexobj(x) for x in case.inputs):
        return False
    key = (n, full_max, "extended")
    if key not in memo:
        widened = lambda *xs: forward(*(x.astype(wide) if x.dtype == np.float64 else x for x in map(np.asarray, xs)))
        memo[key] = _input_differences(widened, boundary, case, n, full_max)
    d, _ = memo[key]
    diff, _ = judge(got, d, undecided_at_kinks=case.ties)
    return diff.total > 0 and not diff.bad


def unstable_forward(finding: Finding) -> Finding:
    """`finding` (a mismatch) blamed on the forward: its float64 values lose the precision
    finite differences need."""
    message = (
        f"the forward loses precision in float64 here: its finite differences disagree with the gradient "
        f"of {finding.input}, those of the same forward in extended precision agree (write the forward "
        "in a stable form)"
    )
    return replace(finding, status=UNSTABLE_FORWARD, message=message)


def projection(g, v, complex_input: bool):
    """The derivative along v that gradient g gives: Re <g, v>, and for a complex input, as
    `differences` takes them, plus i times the derivative along i v."""
    along = lambda u: np.real(np.sum(np.conj(g) * u))
    return along(v) + 1j * along(1j * v) if complex_input else along(v)


def _input_differences(forward, boundary, case: Case, n: int, full_max: int) -> tuple[dict, list | None]:
    """Differences of the loss for input `n`: per element, or (for inputs of more than
    `full_max` elements) along random directions, returned with them."""
    x = case.inputs[n]
    if case.aligned:
        steps = np.maximum(1.0, np.abs(x))
        return differences(forward, boundary, case, n, steps, steps, per_element=True), None
    if np.size(x) <= full_max:
        units = [unit(x, k) for k in np.ndindex(np.shape(x))]
        return stacked([differences(forward, boundary, case, n, v, np.max(v), False) for v in units], np.shape(x)), None
    rng = np.random.default_rng(n)
    directions = [rng.standard_normal(np.shape(x)) * np.maximum(1.0, np.abs(x)) for _ in range(PROJECTIONS)]
    d = stacked([differences(forward, boundary, case, n, v, 1.0, False) for v in directions], (PROJECTIONS,))
    return d, directions


def _finding(case, name, got, d, diff: ArrayDiff, projected: bool) -> Finding:
    worst = diff.worst
    if projected:
        message = (
            f"the gradient of {name} differs from {REFERENCE} along {diff.bad} of {diff.total} "
            f"random direction(s): along direction {worst[0]}, {d['central'][worst]:.6g} "
            f"expected, {got[worst]:.6g} got"
        )
        return Finding("mismatch", case, message, input=name, bad=diff.bad, total=diff.total)
    message = (
        f"the gradient of {name} differs from {REFERENCE} at {diff.bad} of {diff.total} element(s)"
    )
    return Finding(
        "mismatch",
        case,
        message,
        input=name,
        index=worst,
        expected=d["central"][worst],
        got=got[worst],
        bad=diff.bad,
        total=diff.total,
    )
