"""Two gradients compared element by element, with tolerances per dtype, and where they differ.

An element passes when |got - expected| <= rtol * |expected| + atol * scale, where `scale` is
1 or the largest finite |value| of either gradient of that input in that case, whichever is
larger: entries that cancel to about zero are judged against the size of the gradient (and
of its O(1) upstream gradient and inputs), not against their own size. NaN and
infinity pass only where both sides have the same one (NaN against NaN, +inf against +inf).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from symgrad.verify.cases import Case, discrete
from symgrad.verify.ops_under_test import Variant


@dataclass(frozen=True)
class Tolerance:
    """How far two gradients may differ and still match."""

    rtol: float  # relative to the expected element
    atol: float  # relative to `scale`: 1, or the largest |element| of either gradient


# Two implementations of one formula differ by rounding: a few ulps per operation, more where
# a formula is rearranged (grad * y * (1 - y) against grad * exp(-x) / (1 + exp(-x))**2).
TOLERANCES = {
    "float64": Tolerance(rtol=1e-9, atol=1e-11),
    "complex128": Tolerance(rtol=1e-9, atol=1e-11),
    "float32": Tolerance(rtol=2e-4, atol=2e-5),
    "complex64": Tolerance(rtol=2e-4, atol=2e-5),
}


@dataclass(frozen=True)
class ArrayDiff:
    """How two arrays of one shape differ."""

    max_abs: float  # largest |got - expected| (inf where one side alone is NaN or inf)
    max_rel: float  # largest |got - expected| / |expected| where |expected| > atol * scale
    bad: int  # elements out of tolerance
    total: int  # elements compared
    worst: tuple | None  # index of the element furthest out of tolerance


@dataclass(frozen=True)
class Finding:
    """What went wrong in one case: a gradient that differs, or one that could not be compared."""

    status: str  # "mismatch" or "error"
    case: Case  # the case, cast to the dtype compared
    message: str  # one line saying what was wrong
    input: str | None = None  # the input whose gradient is wrong (None: the call itself failed)
    index: tuple | None = None  # the element furthest out of tolerance
    expected: Any = None  # its value on the trusted side
    got: Any = None  # its value on the side under test
    bad: int = 0  # elements out of tolerance
    total: int = 0  # elements compared
    note: str = ""  # a diagnosis, e.g. that the partials are not conjugated


class GradientCallError(Exception):
    """A gradient function failed: raised, or returned the wrong number of gradients."""


def diff_arrays(expected: np.ndarray, got: np.ndarray, tol: Tolerance) -> ArrayDiff:
    """Compare two arrays of one shape (complex or real)."""
    e, g = np.asarray(expected), np.asarray(got)
    e, g = np.broadcast_arrays(
        e.astype(np.result_type(e, g, np.float64)), g.astype(np.result_type(e, g, np.float64))
    )
    finite = np.isfinite(e) & np.isfinite(g)
    same = _same_nonfinite(e, g)
    with np.errstate(all="ignore"):
        err = np.where(finite, np.abs(g - e), np.where(same, 0.0, np.inf))
        scale = max(1.0, _max_abs(e[finite]), _max_abs(g[finite]))
        allowed = tol.rtol * np.abs(np.where(finite, e, 0)) + tol.atol * scale
        ratio = np.where(err > allowed, err / np.maximum(allowed, np.finfo(float).tiny), 0.0)
        nonzero = finite & (np.abs(e) > tol.atol * scale)  # not of values that cancelled to ~0
        rel = np.where(nonzero, err / np.where(nonzero, np.abs(e), 1.0), 0.0)
    bad = int(np.count_nonzero(ratio))
    worst = (
        tuple(int(i) for i in np.unravel_index(int(np.argmax(ratio)), ratio.shape)) if bad else None
    )
    return ArrayDiff(_max_abs(err), _max_abs(rel), bad, int(err.size), worst)


def _same_nonfinite(e: np.ndarray, g: np.ndarray) -> np.ndarray:
    def same(a, b):
        return (a == b) | (np.isnan(a) & np.isnan(b))

    return same(e.real, g.real) & same(np.imag(e), np.imag(g))


def _max_abs(values: np.ndarray) -> float:
    return float(np.max(np.abs(values))) if np.size(values) else 0.0


def malformed(variant: Variant, case: Case, got: list) -> list[Finding]:
    """Errors in the form of `got`: not one gradient per input, or one of the wrong shape."""
    names = variant.inputs
    if len(got) != len(names):
        message = f"returned {len(got)} gradient(s) for {len(names)} input(s) ({', '.join(names)})"
        return [Finding("error", case, message)]
    findings = []
    for name, x, g in zip(names, case.inputs, got):
        if g is not None and np.shape(g) != np.shape(x):
            message = f"the gradient of {name} has shape {np.shape(g)}, but {name} has shape {np.shape(x)}"
            findings.append(Finding("error", case, message, input=name))
    return findings


def wrong_dtypes(variant: Variant, case: Case, got: list) -> list[Finding]:
    """A finding per gradient whose dtype is not its input's (a float32 input's float64
    gradient: a count or a Python float promoted it), a mismatch of its own kind."""
    findings = []
    for name, x, g in zip(variant.inputs, case.inputs, got):
        if g is not None and np.asarray(g).dtype != np.asarray(x).dtype:
            message = f"the gradient of {name} is {np.asarray(g).dtype}, but {name} is {np.asarray(x).dtype}"
            findings.append(Finding("wrong-dtype", case, message, input=name))
    return findings


def compare_gradients(
    variant: Variant, case: Case, expected: list, got: list, tol: Tolerance
) -> tuple[list[ArrayDiff], list[Finding]]:
    """Per input: the difference of `got` from `expected`, and findings for each bad one.

    `got` must hold one gradient per input, each of the input's shape (None counts as zeros).
    """
    findings = malformed(variant, case, got)
    if findings and findings[0].input is None:
        return [], findings
    bad_shapes = {f.input for f in findings}
    findings += wrong_dtypes(variant, case, got)
    diffs = []
    for name, x, e, g in zip(variant.inputs, case.inputs, expected, got):
        if name in bad_shapes:
            continue
        e = np.zeros_like(x) if e is None else np.asarray(e)
        g = np.zeros_like(x) if g is None else np.asarray(g)
        d = diff_arrays(e, g, tol)
        diffs.append(d)
        if d.bad:
            findings.append(
                Finding(
                    "mismatch",
                    case,
                    f"the gradient of {name} differs at {d.bad} of {d.total} element(s)",
                    input=name,
                    index=d.worst,
                    expected=e[d.worst],
                    got=g[d.worst],
                    bad=d.bad,
                    total=d.total,
                )
            )
    return diffs, findings


# --- snippets ----------------------------------------------------------------------------------


def upstream_names(variant: Variant) -> list[str]:
    """The upstream gradients' names, as the generated functions name them."""
    outs = variant.outputs
    # a gradient op's inputs are upstream gradients (`grad`, `grad_<output>`): its own upstream
    # is then named by its output, as `derive.grad_names` names it
    upstream = any(n == "grad" or n.startswith("grad_") for n in variant.inputs)
    return ["grad"] if len(outs) == 1 and not upstream else [f"grad_{o}" for o in outs]


def case_snippet(variant: Variant, case: Case, calls: list[str]) -> str:
    """Python that rebuilds `case` (inputs, upstream gradients, attributes), then `calls`."""
    floats = [x for x in map(np.asarray, case.inputs) if not discrete(x)]
    dtype = floats[0].dtype.name if floats else "float64"
    lines = ["import numpy as np", ""]
    for name, x in zip(variant.inputs, case.inputs):
        lines.append(f"{name} = {literal(x, dtype)}")
    for name, u in zip(upstream_names(variant), case.upstream):
        lines.append(f"{name} = {literal(u, dtype)}")
    lines.append(f"attrs = {variant.attrs!r}")
    return "\n".join(lines + calls)


def literal(x, dtype: str) -> str:
    """`np.array(...)` source for `x`, NaN and infinities included (integers in their own
    dtype: positions)."""
    x = np.asarray(x)
    dtype = x.dtype.name if discrete(x) else dtype
    return f"np.array({_nested(x.tolist())}, dtype=np.{dtype})"


def _nested(value) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_nested(v) for v in value) + "]"
    return scalar_text(value)


def scalar_text(value) -> str:
    """A scalar as Python source: `1.5`, `(1+2j)`, `np.nan`, `-np.inf`, `complex(np.nan, 1.0)`."""
    if isinstance(value, (complex, np.complexfloating)):
        value = complex(value)
        if np.isfinite(value.real) and np.isfinite(value.imag):
            return repr(value)
        return f"complex({scalar_text(value.real)}, {scalar_text(value.imag)})"
    value = float(value)
    if np.isnan(value):
        return "np.nan"
    if np.isinf(value):
        return "np.inf" if value > 0 else "-np.inf"
    return repr(value)


def values_at(variant: Variant, case: Case, finding: Finding) -> dict:
    """The inputs at the reported element: every input of its shape for an elementwise op
    (those meet there), the input itself for an index op."""
    shape = np.shape(case.inputs[variant.inputs.index(finding.input)])
    return {
        n: x[finding.index]
        for n, x in zip(variant.inputs, case.inputs)
        if n == finding.input or (variant.shapes is None and np.shape(x) == shape)
    }
