"""`symgrad diff`: derived gradients against hand-written ones.

The reference is TensorFlow's registered gradient for the op type (`against="tensorflow"`), or
a user's module of gradient functions: numpy functions with the generated signature
`fn(grads..., inputs..., *, outputs=None, attrs...)`, or TensorFlow functions `fn(op, *grads)`
(told apart per function: a TensorFlow one's first parameter is named `op`). Both derived
targets, numpy and TensorFlow, are compared with it on every attribute variant, in float32
and float64, and in complex64 and complex128 where the op is declared `complex=True`.

In a report, "expected" is symgrad's derived gradient and "got" the hand-written one.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from types import ModuleType

import numpy as np

from symgrad.errors import SymgradError
from symgrad.targets import REGISTRY, TARGETS
from symgrad.verify.cases import Case, bound_forward, call_forward, case_groups
from symgrad.verify.compare import (
    TOLERANCES,
    Finding,
    GradientCallError,
    case_snippet,
    compare_gradients,
    diff_arrays,
    values_at,
)
from symgrad.verify.ops_under_test import DerivedOp, Variant, import_tf
from symgrad.verify.report import Result, summarize
from symgrad.verify.sources import (
    FrameworkLimit,
    Gradients,
    NumpyFunction,
    Skipped,
    derived_sources,
    import_lines,
    is_tf_gradient_function,
)
from symgrad.verify.tf_sources import TfGradientFunction, TfRegistered
from symgrad.verify.verdict import fd_verdict


class DiffError(SymgradError):
    stage = "diff"


@dataclass(frozen=True)
class NoReference:
    """Why an op has nothing to be compared with."""

    reason: str


# --- references ----------------------------------------------------------------------------------


# Op types whose TensorFlow gradient breaks ties by another convention than the derived one:
# cases with values tied on purpose are not compared with it (both are subgradients there, and
# differences of the forward cannot tell them apart), with this reason.
_POOL_3D_TIES = (
    "TensorFlow's 3-D max-pooling gradient kernels give each entry within 1e-5 of its window's maximum the "
    "window's whole gradient (k tied entries pass on k times it); declared as MaxPool, to the first maximum"
)
TIE_CONVENTIONS: dict[str, str] = dict.fromkeys(("MaxPool3D", "MaxPool3DGrad", "MaxPool3DGradGrad"), _POOL_3D_TIES)
# (MaxPool and its gradient ops follow TensorFlow's, to the first maximum)


class TensorFlowReference:
    """TensorFlow's registered gradient of the op type, where TensorFlow has one of its own."""

    name = "tensorflow"

    def source_for(self, op: DerivedOp):
        tf = import_tf()
        from tensorflow.python.framework import ops as tf_ops

        if not hasattr(tf.raw_ops, op.name):
            return NoReference(f"TensorFlow has no op type {op.name}")
        try:
            fn = tf_ops._gradient_registry.lookup(op.name)
        except LookupError:
            return NoReference(f"TensorFlow registers no gradient for {op.name}")
        if fn is None:
            return NoReference(f"TensorFlow declares {op.name} not differentiable")
        if not fn.__module__.startswith("tensorflow."):
            return NoReference(
                f"TensorFlow registers no gradient of its own for {op.name} "
                f"(the one registered is {fn.__module__}.{fn.__name__})"
            )
        return TfRegistered(op.name, ties=TIE_CONVENTIONS.get(op.name))


class ModuleReference:
    """A user's module of hand-written gradient functions, matched to ops by name."""

    def __init__(self, module: str | ModuleType, mapping: dict[str, str] | None = None):
        self.module = module if isinstance(module, ModuleType) else load_module(module)
        self.name = module if isinstance(module, str) else module.__name__
        self.mapping = dict(mapping or {})  # our op type or Python name -> their function name

    def candidates(self, op: DerivedOp) -> list[str]:
        """The function names looked for, in order."""
        for key in (op.name, op.decl.func_name):
            if key in self.mapping:
                return [self.mapping[key]]
        return [f"{op.decl.func_name}_grad", f"_{op.name}Grad", f"{op.name}Grad"]

    def source_for(self, op: DerivedOp):
        names = self.candidates(op)
        found = [n for n in names if callable(getattr(self.module, n, None))]
        if not found:
            if op.name in self.mapping or op.decl.func_name in self.mapping:
                raise DiffError(
                    f"--map names {names[0]}, which {self.name} does not define", op.name
                )
            return NoReference(f"{self.name} defines none of {', '.join(names)}")
        fn = getattr(self.module, found[0])
        short = Path(self.name).stem if self.name.endswith(".py") else self.name
        label = f"hand-written {short}.{found[0]}"
        if is_tf_gradient_function(fn):
            return TfGradientFunction(fn, label, import_lines(fn, label))
        return NumpyFunction(fn, label, import_lines(fn, label), pass_outputs=True)


def load_module(spec: str) -> ModuleType:
    """A module by file path (`my_grads.py`) or by dotted name (`mypackage.grads`)."""
    path = Path(spec)
    if spec.endswith(".py") or path.is_file():
        if not path.is_file():
            raise DiffError(f"no such module file: {spec}")
        name = f"_symgrad_reference_{path.stem}"
        module_spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[name] = module
        _exec(module_spec, module, spec)
        return module
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        return importlib.import_module(spec)
    except ImportError as exc:
        raise DiffError(f"cannot import {spec}: {exc}") from None


def _exec(module_spec, module, spec: str) -> None:
    try:
        module_spec.loader.exec_module(module)
    except Exception as exc:  # the user's module is broken: say so, as one line
        raise DiffError(f"importing {spec} raised {type(exc).__name__}: {exc}") from None


@dataclass(frozen=True)
class FrameworkReference:
    """A framework's own function of the op type (`symgrad.backends.<name>.functions`) under
    its autodiff, its hand-written derivative rules, the function's outputs checked against
    the declaration's too; for an op type the framework has none of, its autodiff of the
    generated formula `<op>_forward`."""

    name: str  # the target: "jax", "torch"
    title: str  # as a label names the framework
    autodiff: str  # as a label names its autodiff
    under: str  # the call that takes the gradient
    source: str  # the class of `symgrad.backends.<name>.verify` that runs it

    def source_for(self, op: DerivedOp):
        package = f"symgrad.backends.{self.name}"
        table = importlib.import_module(f"{package}.functions").FUNCTIONS
        reason = REGISTRY[self.name].backend.unavailable_reason(op)
        if reason and op.name not in table:
            return NoReference(f"the {self.title} module has no {op.name}: {reason}")
        source = getattr(importlib.import_module(f"{package}.verify"), self.source)
        if op.name not in table:
            label = f"{self.title}'s {self.autodiff} of {op.stem}_{self.name}.{op.decl.func_name}_forward"
            return source.derived(op, "_forward", label)
        label = f"{self.title}'s own {op.name} ({package}.functions) under {self.under}"
        imports = [f"from {package}.functions import FUNCTIONS", f"{op.decl.func_name} = FUNCTIONS[{op.name!r}]"]
        return source(table[op.name], label, imports, call_name=op.decl.func_name, reference=True)


NAMED_REFERENCES = {  # else a module
    "tensorflow": TensorFlowReference(),
    "jax": FrameworkReference("jax", "JAX", "autodiff", "jax.vjp", "JaxFunction"),
    "torch": FrameworkReference("torch", "PyTorch", "autograd", "torch.autograd.grad", "TorchGradient"),
}


def make_reference(against: str, mapping: dict[str, str] | None = None):
    return NAMED_REFERENCES.get(against) or ModuleReference(against, mapping)


# --- the comparison ------------------------------------------------------------------------------


def run_diff(
    ops: list[DerivedOp],
    reference,
    dtypes: tuple[str, ...] | None = None,
    targets: tuple[str, ...] = TARGETS,
    sample: int | None = None,
) -> list[Result]:
    """One result per op x variant x dtype x target (one per op without a reference; `sample`:
    at most that many variants per op, see `sampled`)."""
    results = []
    for op in ops:
        try:
            results += _diff_op(op, reference, dtypes, targets, sample)
        except Exception as exc:  # one op's failure is its row; the others still run
            message = str(exc) if isinstance(exc, SymgradError) else f"{type(exc).__name__}: {exc}"
            results.append(
                Result(op.name, None, None, None, reference.name, "error", message=message)
            )
    return results


def _diff_op(op: DerivedOp, reference, dtypes, targets, sample) -> list[Result]:
    source = reference.source_for(op)
    if isinstance(source, NoReference):
        return [
            Result(op.name, None, None, None, reference.name, "no-reference", message=source.reason)
        ]
    groups = case_groups(op, dtypes, sample=sample)
    ours, unavailable = derived_sources(op, targets, reference.name)
    return diff_groups(op.name, reference.name, groups, ours, source) + unavailable


def diff_groups(name: str, reference: str, groups: list, ours: dict, source) -> list[Result]:
    """One row per (variant, dtype, cases) group x derived source ({target: source}): its
    gradients against `source`'s."""
    work = [(variant, cases) for variant, _, cases in groups]
    theirs = source.run_many(work)
    mine = {target: our.run_many(work) for target, our in ours.items()}  # each target at once
    return [
        _compare(
            Result(name, variant.label, dtype, target, reference, "match"),
            variant,
            cases,
            ours[target],
            mine[target][k],
            source,
            theirs[k],
        )
        for k, (variant, dtype, cases) in enumerate(groups)
        for target in ours
    ]


def _compare(
    row: Result, variant: Variant, cases: list[Case], our, mine: list, their, theirs: list
) -> Result:
    tol = TOLERANCES[row.dtype]
    diffs, findings, compared, skips = [], [], 0, []
    limits = [o for o in mine if isinstance(o, FrameworkLimit)]
    for case, o, t in zip(cases, mine, theirs):
        if isinstance(o, Skipped) or isinstance(t, Skipped):
            skips.append((o if isinstance(o, Skipped) else t).reason)
            continue
        if isinstance(o, GradientCallError) or len(o.grads) != len(variant.inputs):
            what = o if isinstance(o, GradientCallError) else f"returned {len(o.grads)} gradient(s)"
            findings.append(Finding("error", case, f"{our.label} {what}"))
            continue
        if isinstance(t, GradientCallError):
            findings.append(Finding("error", case, f"{their.label} {t}"))
            continue
        compared += 1
        findings += _forward_findings(variant, case, t, their.label, tol)
        d, f = compare_gradients(variant, case, o.grads, t.grads, tol)
        diffs += d
        findings += [replace(x, message=f"{their.label}: {x.message}") for x in f]
    if not compared and not findings and limits:  # the framework computes none of ours
        row.status, row.skipped, row.message = "unavailable", len(skips), f"{our.label} {limits[0].reason}"
        return row
    if not compared and not findings:
        row.status, row.skipped = "no-reference", len(skips)
        why = skips[0] if skips else "there are no inputs in its domain"
        row.message = f"{their.label} runs on none of the {len(cases)} case(s): {why}"
        return row
    chosen = summarize(row, diffs, findings, compared, len(skips))
    if chosen is not None and chosen.status == "mismatch":
        row.verdict = _verdict(variant, findings, our, their)
    if chosen is not None:
        smallest = min(
            (f for f in findings if f.status == chosen.status), key=lambda f: f.case.size
        )
        _pinpoint(
            row, chosen, smallest.case, variant, our, their, dict(zip(map(id, cases), theirs)), tol
        )
    return row


def _verdict(variant: Variant, findings: list[Finding], our, their) -> str | None:
    """Which side finite differences agree with, on the cases where a gradient differs."""
    failing = {
        id(f.case): f.case
        for f in findings
        if f.status == "mismatch" and f.input in variant.inputs
    }
    return fd_verdict(variant, list(failing.values()), our, their) if failing else None


def _forward_findings(variant: Variant, case: Case, theirs: Gradients, label: str, tol) -> list[Finding]:
    """Where the reference computes the op too (TensorFlow's kernel, a framework's own
    function), its outputs must be the declaration's."""
    if theirs.forward is None:
        return []
    ours = call_forward(bound_forward(variant, widened=False), case.inputs) or ()
    findings = []
    for name, o, t in zip(variant.outputs, ours, theirs.forward):
        what = f"the forward output {name} of {label} differs from the declaration's"
        if np.shape(o) != np.shape(t):
            message = f"{what}: shape {np.shape(t)}, declared {np.shape(o)}"
            findings.append(Finding("mismatch", case, message, input=f"{name} (forward)"))
            continue
        d = diff_arrays(o, t, tol)
        if d.bad:
            message = f"{what}: they are not the same op"
            findings.append(
                Finding(
                    "mismatch",
                    case,
                    message,
                    input=f"{name} (forward)",
                    index=d.worst,
                    expected=o[d.worst],
                    got=t[d.worst],
                    bad=d.bad,
                    total=d.total,
                )
            )
    return findings


def _pinpoint(row: Result, chosen: Finding, smallest: Case, variant, our, their, theirs: dict, tol):
    """Add the inputs at the worst element, a diagnosis, and the smallest failing case (the
    smallest case that fails, or the reported element alone) as a snippet."""
    row.detail.update(expected_from=our.label, got_from=their.label)
    if chosen.index is not None and chosen.input in variant.inputs:
        case = chosen.case
        row.detail["values"] = values_at(variant, case, chosen)
        note = _conjugate_note(chosen, variant, our, their, theirs.get(id(case)), tol)
        if note:
            row.detail["note"] = note
        shrunk = _shrink(chosen, variant, our, their, tol)
        if shrunk is not None and shrunk.size < smallest.size:
            smallest = shrunk
    row.detail["smallest_case"] = smallest.label
    calls = [""] + our.call_lines(variant) + [""] + their.call_lines(variant)
    row.detail["snippet"] = case_snippet(variant, smallest, calls)


def _shrink(finding: Finding, variant, our, their, tol) -> Case | None:
    """The reported element of an aligned case alone, if it fails there too."""
    case = finding.case
    if not case.aligned or finding.index is None:
        return None
    small = case.take(np.array([finding.index[0]]))
    o, t = our.run(variant, [small])[0], their.run(variant, [small])[0]
    if isinstance(o, Gradients) and isinstance(t, Gradients):
        _, findings = compare_gradients(variant, small, o.grads, t.grads, tol)
        if any(f.input == finding.input for f in findings):
            return replace(small, label=f"{case.label}, element {list(finding.index)}")
    return None


def _conjugate_note(finding: Finding, variant, our, their, theirs, tol) -> str:
    """For complex dtypes: whether the hand-written gradient is grad * J instead of grad * conj(J)."""
    case = finding.case
    if not np.iscomplexobj(case.inputs[0]) or not isinstance(theirs, Gradients):
        return ""
    flipped = replace(case, upstream=tuple(np.conj(u) for u in case.upstream))
    o = our.run(variant, [flipped])[0]
    if not isinstance(o, Gradients):
        return ""
    unconjugated = [None if g is None else np.conj(g) for g in o.grads]
    _, findings = compare_gradients(variant, case, unconjugated, theirs.grads, tol)
    if findings:
        return ""
    return (
        f"{their.label} is grad * J where the convention is grad * conj(J), "
        "J the partial derivatives: it does not conjugate them"
    )
