"""Import op files and collect their declarations, in source order, with file:line for errors."""

from __future__ import annotations

import importlib.util
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from symgrad.declare import declared
from symgrad.declaration import OpDecl
from symgrad.errors import LoadError, SymgradError

# an @op("Name") or @elementwise("Name") decorator line, to name the op a syntax error is in
_DECORATOR = re.compile(r"\s*@\s*(?:\w+\.)?(?:op|elementwise)\(\s*[\"']([^\"']+)")


@dataclass(frozen=True)
class OpFile:
    """The declarations of one op file."""

    path: Path  # the op file
    ops: tuple[OpDecl, ...]  # its declarations, in source order

    @property
    def stem(self) -> str:
        return self.path.stem


def op_file_paths(paths: list[str | Path]) -> list[Path]:
    """Expand folders into their `*.py` files (sorted; `_`-prefixed files skipped).

    Raises:
        LoadError: a path is missing, a file that is not `.py`, or a folder with no op file.
    """
    result = []
    for path in map(Path, paths):
        if path.is_dir():
            found = [p for p in sorted(path.glob("*.py")) if not p.name.startswith("_")]
            if not found:
                raise LoadError(f"no op files (*.py) in the folder {path}")
            result.extend(found)
        elif path.is_file() and path.suffix == ".py":
            result.append(path)
        elif path.is_file():
            raise LoadError(f"{path} is not an op file: op files are Python files (*.py)")
        else:
            raise LoadError(f"no such op file or folder: {path}")
    return result


def load_op_file(path: Path) -> OpFile:
    """Execute one op file and collect the `OpDecl` objects it defines.

    Raises:
        LoadError: on a syntax error or an exception while importing the file.
    """
    token = declared.set([])
    try:
        _import(path)
        decls = [d for d in declared.get() if d.location.file == str(path)]
    finally:
        declared.reset(token)
    if not decls:
        raise LoadError(f"{path} declares no ops (use @symgrad.op or @symgrad.elementwise)")
    _check_generated_names(decls)
    return OpFile(path, tuple(sorted(decls, key=lambda d: d.location.line)))


GENERATED_SUFFIXES = ("_grad", "_vjp", "_grad_grad")  # the functions generated per op


def _check_generated_names(decls) -> None:
    """No op's Python name may be a function generated for another op of the same file (an op
    `avg_pool_grad` beside AvgPool's gradient `avg_pool_grad`): one module holds both."""
    names = {d.func_name + suffix: d for d in decls for suffix in GENERATED_SUFFIXES}
    for decl in decls:
        other = names.get(decl.func_name)
        if other is not None:
            raise LoadError(
                f"Python name {decl.func_name!r} is the name of a function generated for "
                f"{other.name} (declared at {other.location}); declare one of them in another "
                "file, or rename its function",
                decl.name,
                decl.location,
            )


def _import(path: Path):
    try:
        source = path.read_text()
        code = compile(source, str(path), "exec")
    except SyntaxError as exc:
        op = _op_declared_before(source, exc.lineno or 0)
        raise LoadError(f"syntax error: {exc.msg}", op, f"{path}:{exc.lineno}") from None
    module_name = f"_symgrad_ops_{path.stem}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.parent))
    try:
        exec(code, module.__dict__)
    except SymgradError:
        raise
    except Exception as exc:
        raise LoadError(f"{type(exc).__name__}: {exc}", location=f"{path}:{_line_in(exc, path)}") from None
    finally:
        sys.path.remove(str(path.parent))


def _op_declared_before(source: str, line: int) -> str | None:
    """The op whose declaration a broken line most likely belongs to (for the message)."""
    found = None
    for text in source.splitlines()[:line]:
        match = _DECORATOR.match(text)
        if match:
            found = match.group(1)
    return found


def _line_in(exc: BaseException, path: Path) -> int:
    line, tb = 0, exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == str(path):
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def check_unique(decls) -> None:
    """Op names and Python names must be unique across all op files of a run.

    Args:
        decls: objects with `name`, `func_name` and `location` (declarations, cache records).
    """
    for key, what in ((lambda d: d.name, "op name"), (lambda d: d.func_name, "Python name")):
        seen = {}
        for decl in decls:
            first = seen.setdefault(key(decl), decl)
            if first is not decl:
                raise LoadError(
                    f"{what} {key(decl)!r} declared twice, first at {first.location}",
                    decl.name,
                    decl.location,
                )
