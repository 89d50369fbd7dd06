"""The pipeline: op files -> declarations -> derivations -> IR -> generated module texts."""

from __future__ import annotations

import os
from pathlib import Path

from symgrad.declare import OpDecl, instantiate
from symgrad.derive import derive
from symgrad.errors import SymgradError
from symgrad.ir import OpCode
from symgrad.load import OpFile, load_op_files
from symgrad.lower import lower_op
from symgrad.render import MODULE_SUFFIX, render_module
from symgrad.simplify import simplify


class SymgradErrors(SymgradError):
    """Every error found in one run, so that all are reported at once."""

    def __init__(self, errors: list[SymgradError]):
        self.errors = errors
        Exception.__init__(self, "\n".join(map(str, errors)))

    def __str__(self) -> str:
        return "\n".join(map(str, self.errors))


def compile_op(decl: OpDecl) -> OpCode:
    """Derive, simplify and lower every attribute variant of one op."""
    derivations = [simplify(derive(instantiate(decl, v))) for v in decl.variants()]
    return lower_op(decl, derivations)


def generate(paths: list[str | Path], targets: tuple[str, ...]) -> dict[str, str]:
    """Generated file name -> text, for every op file under `paths`.

    Raises:
        SymgradErrors: every op that failed, after trying them all.
    """
    op_files = load_op_files(paths)
    files: dict[str, str] = {}
    errors: list[SymgradError] = []
    for op_file in op_files:
        codes = []
        for decl in op_file.ops:
            try:
                codes.append(compile_op(decl))
            except SymgradError as exc:
                errors.append(exc if exc.op else type(exc)(exc.what, decl.name, decl.location))
        if not errors:
            files.update(_render_file(op_file, codes, targets))
    if errors:
        raise SymgradErrors(errors)
    return files


def _render_file(op_file: OpFile, codes: list[OpCode], targets) -> dict[str, str]:
    source = display_path(op_file.path)
    result = {}
    for target in targets:
        name = op_file.stem + MODULE_SUFFIX[target]
        try:
            result[name] = render_module(target, source, codes)
        except SymgradError as exc:
            raise type(exc)(exc.what, exc.op, exc.location or source) from None
    return result


def display_path(path: Path) -> str:
    """`path` relative to the working directory where possible, with forward slashes."""
    try:
        return Path(os.path.relpath(path)).as_posix()
    except ValueError:  # another drive on Windows
        return path.as_posix()
