"""Where gradients come from: a numpy gradient function, or another target's derived source
(TensorFlow's gradient functions and registered gradients: `symgrad.verify.tf_sources`).

Each source runs a list of cases and gives, per case, `Gradients` (one array per tensor input),
`Skipped` (the op does not take those inputs) or a `GradientCallError` (the function raised or
returned the wrong number of gradients); and the lines of a snippet that call it.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from symgrad.targets import REGISTRY
from symgrad.verify.cases import Case, call_forward
from symgrad.verify.compare import GradientCallError, upstream_names
from symgrad.verify.ops_under_test import DerivedOp, Variant
from symgrad.verify.report import Result


@dataclass(frozen=True)
class Gradients:
    """A source's result for one case."""

    grads: list  # one array (or None: no gradient) per tensor input
    forward: tuple | None = None  # the op's outputs, where the source computes them


@dataclass(frozen=True)
class Skipped:
    """The source's op does not take this case's inputs (a shape TensorFlow's kernel rejects)."""

    reason: str


@dataclass(frozen=True)
class FrameworkLimit(Skipped):
    """The framework computes no such value itself: a derivative it does not implement
    (PyTorch's of `zeta`), a kernel it lacks for these attributes (TensorFlow's CPU
    convolutions differentiate no dilated backprop again). Not the derived gradient's fault: a
    row with nothing else to compare is `unavailable`, saying why."""


# how PyTorch, TensorFlow and JAX say they do not implement something
_NOT_IMPLEMENTED = ("is not implemented", "not yet support", "Unimplemented")


def call_failed(exc: BaseException, what: str = "") -> "Skipped | GradientCallError":
    """The outcome of a gradient function that raised `exc` (in `what`, a derivative): a
    `FrameworkLimit` where the framework says it does not implement it, else an error."""
    text = f"raised{f', in {what},' if what else ''} {_error_text(exc)}"
    limit = isinstance(exc, NotImplementedError) or any(p in f"{type(exc).__name__}: {exc}" for p in _NOT_IMPLEMENTED)
    return FrameworkLimit(text) if limit else GradientCallError(text)


@dataclass(frozen=True)
class Unavailable:
    """A target that cannot express the op (JAX has no Bessel K): no source, a row saying why."""

    reason: str


def _error_text(exc: BaseException, limit: int = 200) -> str:
    """`Type: first line of the message`, cut at `limit` characters."""
    message = re.sub(r"\{\{[^}]*\}\}\s*", "", str(exc)).strip()  # TensorFlow's node names
    message = re.sub(r"\s*name:\s*$", "", message, flags=re.M)  # an eager op's empty name
    lines = message.splitlines()
    text = f"{type(exc).__name__}: {lines[0] if lines else ''}"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def accepted_kwargs(fn, names) -> list[str]:
    """Those of `names` that `fn` takes as keyword arguments (all of them with **kwargs)."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return list(names)
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return list(names)
    keyword = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return [n for n in names if n in params and params[n].kind in keyword]


def is_tf_gradient_function(fn) -> bool:
    """A TensorFlow gradient function's first parameter is the op: `fn(op, *grads)`."""
    try:
        params = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return False
    return bool(params) and params[0] == "op"


def _as_list(result) -> list:
    return list(result) if isinstance(result, (list, tuple)) else [result]


def import_lines(fn, label: str, derived_from: str | None = None) -> list[str]:
    """How a snippet imports `fn`: from its file's folder, or, for a module derived into a
    temporary folder from op file `derived_from`, from where `symgrad derive` writes it. The
    paths are absolute, so that the snippet runs wherever it is pasted."""
    module = inspect.getmodule(fn)
    path = Path(getattr(module, "__file__", "") or ".")
    folder = str(path.parent.resolve())
    lines = [f"# {label}"]
    if derived_from is not None:
        folder = str(Path("generated").resolve())
        lines.append(f"# (written by `symgrad derive {Path(derived_from).resolve()} -o {folder}`)")
    return lines + [
        f"import sys; sys.path.insert(0, {folder!r})",
        f"from {path.stem} import {fn.__name__}",
    ]


def derived_import_lines(op, fn, label: str) -> list[str]:
    """`import_lines` of the generated function `fn` of derived op `op`: from where `symgrad
    derive` writes it when `op` was derived into a temporary folder."""
    return import_lines(fn, label, derived_from=op.source if op.temporary else None)


# --- numpy -------------------------------------------------------------------------------------


class NumpyFunction:
    """A numpy gradient `fn(grads..., inputs..., *, outputs=None, attrs...)` -> one per input."""

    def __init__(self, fn, label: str, imports: list[str], pass_outputs: bool):
        self.fn = fn  # the gradient function
        self.label = label  # how reports name it
        self.imports = imports  # snippet lines that import it
        self.pass_outputs = pass_outputs  # give it the forward outputs, where it takes them

    def run(self, variant: Variant, cases: list[Case]) -> list:
        return [self._run_one(variant, case) for case in cases]

    def run_many(self, groups: list[tuple[Variant, list[Case]]]) -> list[list]:
        return [self.run(variant, cases) for variant, cases in groups]

    def _kwargs(self, variant: Variant, case: Case) -> dict:
        kwargs = {k: variant.attrs[k] for k in accepted_kwargs(self.fn, variant.attrs)}
        if self.pass_outputs:
            names = accepted_kwargs(self.fn, variant.outputs)
            if names:
                forward = variant.op.function("numpy")
                outs = call_forward(lambda *xs: forward(*xs, **variant.attrs), case.inputs)
                kwargs.update({n: o for n, o in zip(variant.outputs, outs or ()) if n in names})
        return kwargs

    def _run_one(self, variant: Variant, case: Case):
        try:
            with np.errstate(all="ignore"):
                inputs = _input_args(variant, case.inputs)
                result = self.fn(*_upstream_args(variant, case.upstream), *inputs, **self._kwargs(variant, case))
        except Exception as exc:  # the function under test failed: report it, go on
            return call_failed(exc)
        if isinstance(result, np.ndarray) and len(variant.inputs) == 1:
            result = [result]
        if not isinstance(result, (list, tuple)):
            return GradientCallError(
                f"returned a {type(result).__name__}, not one gradient per input"
            )
        return Gradients([None if g is None else np.asarray(g) for g in result])

    def call_lines(self, variant: Variant) -> list[str]:
        ups = upstream_names(variant)
        args = ([f"[{', '.join(ups)}]"] if variant.list_output else ups) + _input_args(variant, variant.inputs, str)
        kwargs = [f"{k}=attrs[{k!r}]" for k in accepted_kwargs(self.fn, variant.attrs)]
        call = f"{self.fn.__name__}({', '.join(args + kwargs)})"
        return self.imports + [f"print({self.label!r}, {call})"]


def _input_args(variant: Variant, inputs, source=None) -> list:
    """The inputs as a numpy function takes them: the first `variant.listed` as one list (as
    source text, with `source`)."""
    n = variant.listed
    if not n:
        return list(inputs)
    listed = f"[{', '.join(inputs[:n])}]" if source else list(inputs[:n])
    return [listed] + list(inputs[n:])


def _upstream_args(variant: Variant, upstream) -> list:
    """The upstream gradients as a numpy gradient takes them: a list output's as one list."""
    return [list(upstream)] if variant.list_output else list(upstream)


# --- TensorFlow ---------------------------------------------------------------------------------


def derived_source(op: DerivedOp, target: str, stand_in: bool = False):
    """The derived gradient of `target`, as a source (its backend's `derived_source`), or
    `Unavailable` where the target cannot express the op; `stand_in`: a TensorFlow one is
    called on a stand-in op, not on TensorFlow's (which may not exist or take these inputs)."""
    return REGISTRY[target].backend.derived_source(op, stand_in)


def derived_sources(op: DerivedOp, targets, reference: str, stand_in: bool = False) -> tuple[dict, list[Result]]:
    """{target: source} of the targets that have the op, and an `unavailable` row for each
    that does not."""
    sources, rows = {}, []
    for target in targets:
        source = derived_source(op, target, stand_in)
        if isinstance(source, Unavailable):
            rows.append(Result(op.name, None, None, target, reference, "unavailable", message=source.reason))
        else:
            sources[target] = source
    return sources, rows
