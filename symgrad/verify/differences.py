"""Finite differences of a forward along a direction, and a gradient judged against them.

Steps h = STEP * max(1, |x|) and 2h. An element passes when |g - d| <= RTOL * |d| + ATOL *
max(1, max |d|) + 2 |d(h) - d(2h)| + roundoff, d the central difference and |d(h) - d(2h)|
its truncation error's estimate; or (real dtypes) when g lies between the one-sided
differences, a subgradient at a kink. What is skipped is said at `judge`.
"""

from __future__ import annotations

import numpy as np

from symgrad.verify.cases import Case, call_forward
from symgrad.verify.compare import ArrayDiff

STEP = 1e-6
RTOL = 1e-6
ATOL = 1e-8


def unit(x: np.ndarray, k: tuple) -> np.ndarray:
    """A step along element k alone, of its size (at least 1)."""
    v = np.zeros(np.shape(x))
    v[k] = max(1.0, abs(np.asarray(x)[k]))
    return v


def differences(forward, boundary, case: Case, n: int, v, divisor, per_element: bool) -> dict:
    """Central and one-sided differences of L along v (real and imaginary parts for complex x),
    divided by `divisor` (the step's size, for a derivative per element), with an error
    estimate and which elements cannot be tested."""
    x = case.inputs[n]
    parts = [v, 1j * v] if np.iscomplexobj(x) else [v]
    results = [_along(forward, case, n, direction, per_element) for direction in parts]
    central = sum(r[0] * (1 if k == 0 else 1j) for k, r in enumerate(results)) / divisor
    error = sum(r[1] for r in results) / np.abs(divisor)
    left, right = (
        (results[0][2] / divisor, results[0][3] / divisor)
        if len(results) == 1
        else (central, central)
    )
    finite = np.logical_and.reduce([r[4] for r in results])
    points = [_replaced(case.inputs, n, x + t * STEP * v) for t in (-1, 0, 1)]
    on_boundary = boundary.changes(points)
    if not per_element:
        on_boundary = bool(np.any(on_boundary))
    return {
        "central": central,
        "error": error,
        "left": left,
        "right": right,
        "finite": finite,
        "boundary": on_boundary,
    }


def _along(forward, case: Case, n: int, v, per_element: bool):
    """(central, error estimate, left, right, finite) of L along v."""
    losses, magnitude = {}, 0.0
    for t in (-2, -1, 0, 1, 2):
        outs = call_forward(forward, _replaced(case.inputs, n, case.inputs[n] + t * STEP * v))
        with np.errstate(all="ignore"):  # not finite near a pole, or overflowing: told by `finite` below
            terms = [np.conj(u) * o for u, o in zip(case.upstream, outs or ())]
            if outs is None or not terms:
                terms = [np.full(np.shape(case.inputs[n]), np.nan)]
            total = sum(terms) if per_element else sum(np.sum(term) for term in terms)
            losses[t] = np.real(total)
            magnitude = magnitude + sum(
                np.abs(term) if per_element else np.sum(np.abs(term)) for term in terms
            )
    with np.errstate(all="ignore"):
        central = (losses[1] - losses[-1]) / (2 * STEP)
        wide = (losses[2] - losses[-2]) / (4 * STEP)
        error = 2 * np.abs(central - wide) + 8 * np.finfo(float).eps * magnitude / STEP  # + roundoff
        left, right = (losses[0] - losses[-1]) / STEP, (losses[1] - losses[0]) / STEP
    finite = np.logical_and.reduce([np.isfinite(value) for value in losses.values()])
    return central, error, left, right, finite


def _replaced(inputs: tuple, n: int, value) -> tuple:
    return inputs[:n] + (value,) + inputs[n + 1 :]


def stacked(items: list[dict], shape: tuple) -> dict:
    """Per-direction differences as arrays of `shape`."""
    return {key: np.reshape(np.array([item[key] for item in items]), shape) for key in items[0]}


def judge(got: np.ndarray, d: dict, undecided_at_kinks: bool = False, rounding: float = 0.0) -> tuple[ArrayDiff, int]:
    """The difference of `got` from the differences `d`, and how many elements were skipped.

    With `undecided_at_kinks` (a case of values tied on purpose), an element where the forward
    is not differentiable and `got` is not between the one-sided differences is skipped, not
    failed: at tied maxima in windows weighted by upstream gradients of either sign, the
    subgradients (MaxPool's split of a tie, TensorFlow's first maximum) reach beyond them, and
    along a random direction the one-sided differences may even nearly agree (hence the finer
    test of a kink than elsewhere).

    `rounding`: the relative error `got` may carry besides, computed in a narrower dtype.
    """
    central = np.asarray(d["central"])
    got = np.broadcast_to(np.asarray(got), central.shape)
    err, allowed, unsettled = _errors(got, d, central)
    if rounding:
        with np.errstate(all="ignore"):  # an infinite allowance passes nothing that is not finite
            allowed = allowed + rounding * (np.abs(central) + max(1.0, float(np.max(np.abs(np.where(d["finite"], central, 0)), initial=0.0))))
    # on a branch boundary any finite value may be the declared convention; NaN or inf is not
    skip = ~np.asarray(d["finite"]) | (np.asarray(d["boundary"]) & (err > allowed) & np.isfinite(got))
    if undecided_at_kinks:  # a kink is told by one-sided differences 1e-4 apart (1 step)
        kink = np.abs(d["left"] - d["right"]) > 1e-4 * np.abs(central) + allowed
        skip = skip | (kink & (err > allowed) & np.isfinite(got))
    skip = np.broadcast_to(skip | (unsettled & ~np.isfinite(got)), central.shape)
    return _array_diff(err, allowed, central, ~skip), int(np.count_nonzero(skip))


def _errors(got, d: dict, central) -> tuple:
    """(error, error allowed, unsettled) per element."""
    with np.errstate(all="ignore"):
        scale = max(1.0, float(np.max(np.abs(np.where(d["finite"], central, 0)), initial=0.0)))
        allowed = RTOL * np.abs(central) + ATOL * scale + d["error"]
        err = np.where(np.isfinite(got), np.abs(got - central), np.inf)
        if not np.iscomplexobj(central):  # a value between the one-sided differences passes
            low, high = np.minimum(d["left"], d["right"]), np.maximum(d["left"], d["right"])
            outside = np.where(np.isfinite(got), np.maximum(low - got, got - high), np.inf)
            err = np.minimum(err, np.maximum(outside, 0.0))
        # no derivative to judge by: the central differences do not settle (Atan2 at the
        # origin); a NaN or inf there is no error. Where they settle, one is, at a kink too:
        # a norm's at zero, where every subgradient is finite (as `symgrad.verify.extremes` judges)
        unsettled = d["error"] > 0.5 * np.abs(central) + ATOL * scale
    return err, allowed, unsettled


def _array_diff(err, allowed, central, checked) -> ArrayDiff:
    """The summary of the errors of the elements `checked`."""
    bad_mask = (err > allowed) & checked
    nonzero = checked & (np.abs(central) > allowed)  # a relative error of noise means nothing
    with np.errstate(all="ignore"):
        ratio = np.where(bad_mask, err / np.maximum(allowed, np.finfo(float).tiny), 0.0)
        rel = np.where(nonzero, err / np.where(nonzero, np.abs(central), 1.0), 0.0)
    bad = int(np.count_nonzero(bad_mask))
    worst = np.unravel_index(int(np.argmax(ratio)), ratio.shape) if bad else None
    return ArrayDiff(
        max_abs=float(np.max(np.where(checked, err, 0.0), initial=0.0)),
        max_rel=float(np.max(rel, initial=0.0)),
        bad=bad,
        total=int(np.count_nonzero(checked)),
        worst=None if worst is None else tuple(int(i) for i in worst),
    )
