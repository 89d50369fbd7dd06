"""When a derived gradient and a hand-written one disagree: which of them central finite
differences of the declared forward agree with.

A mismatch stays a mismatch; the verdict says which side is wrong, so that a fault in a
reference (TensorFlow's own gradient) is reported as such, not waived. Each failing case is
re-run in float64 (complex128) and both gradients are judged as `symgrad check` judges one.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from symgrad.verify.cases import Case, bound_forward
from symgrad.verify.check import BranchConditions, check_case
from symgrad.verify.ops_under_test import Variant
from symgrad.verify.report import UNSTABLE_FORWARD
from symgrad.verify.sources import Gradients

REFERENCE_WRONG = "reference disagrees with finite differences"
DERIVED_WRONG = "derived disagrees with finite differences"
BOTH_WRONG = "both disagree with finite differences"
BOTH_RIGHT = "both agree with finite differences"  # e.g. a convention where no derivative exists
# a gradient NaN or inf where the differences are not finite either: nothing to judge it by
UNDECIDED = "finite differences cannot tell (not finite where a gradient is not)"
VERDICTS = {
    (True, False): REFERENCE_WRONG,
    (False, True): DERIVED_WRONG,
    (False, False): BOTH_WRONG,
    (True, True): BOTH_RIGHT,
}
MAX_CASES = 3  # failing cases differenced, smallest first


def fd_verdict(variant: Variant, failing: list[Case], our, their) -> str | None:
    """The verdict on `failing` cases (None when neither gradient runs on any of them)."""
    forward, boundary = bound_forward(variant), BranchConditions(variant)
    cases = [_widened(c) for c in sorted(failing, key=lambda c: c.size)[:MAX_CASES]]
    ours, theirs = our.run(variant, cases), their.run(variant, cases)
    agree, finite = {"ours": True, "theirs": True}, True
    compared = 0
    for case, o, t in zip(cases, ours, theirs):
        if not (isinstance(o, Gradients) and isinstance(t, Gradients)):
            continue
        compared += 1
        for side, grads in (("ours", o.grads), ("theirs", t.grads)):
            _, findings, _ = check_case(variant, forward, boundary, case, grads)
            agree[side] = agree[side] and _agrees(findings)
            finite = finite and _finite(grads)
    if not compared:  # a gradient that runs in the failing dtype only (TensorFlow's float32-only ops)
        narrow = sorted(failing, key=lambda c: c.size)[:MAX_CASES]
        # its inputs are the widened case's exactly; its rounding is the narrow dtype's
        rounding = float(np.sqrt(np.finfo(_real_dtype(narrow[0])).eps))
        sides = {"ours": (ours, our.run(variant, narrow)), "theirs": (theirs, their.run(variant, narrow))}
        for k, case in enumerate(cases):
            judged = {}
            for side, (wide, small) in sides.items():
                if isinstance(wide[k], Gradients):
                    judged[side] = (wide[k].grads, 0.0)
                elif isinstance(small[k], Gradients):
                    grads = [None if g is None else np.asarray(g).astype(np.result_type(g, np.float64)) for g in small[k].grads]
                    judged[side] = (grads, rounding)
            if len(judged) < 2:
                continue
            compared += 1
            for side, (grads, loose) in judged.items():
                _, findings, _ = check_case(variant, forward, boundary, case, grads, rounding=loose)
                agree[side] = agree[side] and _agrees(findings)
                finite = finite and _finite(grads)
    if not compared:
        return None
    # differences skip what they cannot judge: two gradients agreeing with them there, one of
    # them NaN or inf, were not both confirmed
    return UNDECIDED if agree["ours"] and agree["theirs"] and not finite else VERDICTS[(agree["ours"], agree["theirs"])]


def _agrees(findings) -> bool:
    """No finding, or only where the forward, not the gradient, loses precision."""
    return all(f.status == UNSTABLE_FORWARD for f in findings)


def _finite(grads) -> bool:
    return all(g is None or np.all(np.isfinite(np.asarray(g))) for g in grads)


def _real_dtype(case: Case):
    """The float dtype of a case's first non-integer input (float32 for complex64)."""
    x = next((np.asarray(x) for x in case.inputs if np.issubdtype(np.asarray(x).dtype, np.inexact)), np.zeros(1))
    return np.finfo(x.dtype).dtype


def _widened(case: Case) -> Case:
    """The case in float64, or complex128 for complex values."""

    def wide(x):
        x = np.asarray(x)
        return x.astype(np.complex128 if np.iscomplexobj(x) else np.float64)

    return replace(
        case, inputs=tuple(map(wide, case.inputs)), upstream=tuple(map(wide, case.upstream))
    )
