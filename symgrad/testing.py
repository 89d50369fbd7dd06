"""Assertions for a project's own test suite (pytest or any other): `symgrad diff` and
`symgrad check` in-process, raising AssertionError with the same pinpointed report.

    from symgrad.testing import assert_gradients_match

    def test_my_gradients_match_the_derived_ones():
        assert_gradients_match("ops/my_ops.py", against="my_project/grads.py",
                               map={"Xlogy": "xlogy_backward"})
"""

from __future__ import annotations

import types
from pathlib import Path
from types import ModuleType
from typing import Callable

from symgrad.generate import to_temp_folder
from symgrad.verify.check import available_targets, run_check
from symgrad.verify.diff import TARGETS, ModuleReference, make_reference, run_diff
from symgrad.verify.extremes import run_extremes
from symgrad.verify.ops_under_test import load_derived
from symgrad.verify.report import FAILING, Result, format_report
from symgrad.verify.second_order import run_second_order_check


def assert_gradients_match(
    decls: str | Path | list,
    against: str | ModuleType | dict[str, Callable] = "tensorflow",
    *,
    map: dict[str, str] | None = None,  # noqa: A002 - the CLI's --map
    ops: list[str] | None = None,
    dtypes: tuple[str, ...] | None = None,
    targets: tuple[str, ...] = TARGETS,
    generated: str | Path | None = None,
) -> list[Result]:
    """Every derived gradient of the ops in `decls` matches the hand-written one.

    Args:
        decls: op files or folders, as `symgrad diff` takes them.
        against: "tensorflow", a module (object, file path or dotted name) of gradient
            functions, or {op type: gradient function}.
        map: op type (or Python name) -> function name in the module, where they differ.
        ops: only these op types.
        dtypes, targets: only these dtypes ("float32", ...) and derived targets.
        generated: a folder `symgrad derive` wrote, instead of deriving afresh.

    Raises:
        AssertionError: the report of every mismatch and error; also when nothing was
            compared (no op has a reference).
    """
    reference = _reference(against, map)
    results = run_diff(_ops(decls, ops, generated), reference, dtypes, targets)
    _raise_on_failures(results, f"symgrad diff against {reference.name}")
    return results


def assert_gradients_close_to_finite_differences(
    decls: str | Path | list,
    *,
    ops: list[str] | None = None,
    dtypes: tuple[str, ...] | None = None,
    targets: tuple[str, ...] | None = None,
    generated: str | Path | None = None,
) -> list[Result]:
    """Every derived gradient of the ops in `decls` agrees with central finite differences,
    and is finite at extreme inputs wherever they are (`symgrad.verify.extremes`).

    Raises:
        AssertionError: the report of every mismatch and error.
    """
    found, targets = _ops(decls, ops, generated), targets or available_targets()
    results = run_check(found, targets, dtypes) + run_extremes(found, targets, dtypes)
    _raise_on_failures(results, "symgrad check")
    return results


def assert_second_order_close_to_finite_differences(
    decls: str | Path | list,
    *,
    ops: list[str] | None = None,
    dtypes: tuple[str, ...] | None = None,
    targets: tuple[str, ...] | None = None,
    generated: str | Path | None = None,
) -> list[Result]:
    """Every derived second-order gradient of the ops in `decls` (each target's path, as
    `symgrad check --order 2` runs them) agrees with central finite differences of the derived
    first-order gradient, in float64 (and complex128).

    Raises:
        AssertionError: the report of every mismatch and error.
    """
    found = _ops(decls, ops, generated)
    results = run_second_order_check(found, targets or available_targets(), dtypes)
    _raise_on_failures(results, "symgrad check --order 2")
    return results


def _ops(decls, names, generated):
    paths = list(decls) if isinstance(decls, (list, tuple)) else [decls]
    folder = generated if generated is not None else to_temp_folder(paths, jobs=1)
    found = load_derived(paths, folder, temporary=generated is None)
    return [op for op in found if names is None or op.name in names]


def _reference(against, mapping):
    if isinstance(against, dict):
        module = types.ModuleType("gradients")
        for name, fn in against.items():
            setattr(module, name, fn)
        return ModuleReference(module, {name: name for name in against})
    if isinstance(against, ModuleType):
        return ModuleReference(against, mapping)
    return make_reference(str(against), mapping)


def _raise_on_failures(results: list[Result], what: str) -> None:
    failures = [r for r in results if r.status in FAILING]
    if failures:
        raise AssertionError(f"{what}:\n\n{format_report(failures)}")
    if not any(r.status == "match" for r in results):
        raise AssertionError(
            f"{what}: nothing was compared\n\n{format_report(results, verbose=True)}"
        )
