"""The pipeline: op files -> declarations -> derivations -> IR -> generated module texts.

Op files whose generated texts are cached are not even imported; the ops of the others are
derived in parallel worker processes, one task per op.
"""

from __future__ import annotations

import dataclasses
import functools
import multiprocessing
import os
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from symgrad.cache import Cache, CachedOp, cache_key, default_cache_dir
from symgrad.declaration import OpDecl
from symgrad.instantiate import instantiate
from symgrad.derive import derive
from symgrad.errors import LoweringError, SymgradError
from symgrad.functions import restart_fresh_indices
from symgrad.ir import LinearSecondOrder, OpCode
from symgrad.load import OpFile, check_unique, load_op_file, op_file_paths
from symgrad.lowering.op import lower_op
from symgrad.lowering.signature import OpSignature
from symgrad.notation import with_formulas
from symgrad.processes import start_method
from symgrad.progress import QUIET, Progress
from symgrad.render import render_module
from symgrad.runtime_module import runtime_files
from symgrad.second_order import PREFIX, complex_form, derive_second_order, linear_inputs
from symgrad.simplify import simplify
from symgrad.targets import MODULE_SUFFIX, TARGETS, default_jobs
from symgrad.verify.selfcheck import verify_generated
from symgrad.wirtinger import uses_wirtinger


class SymgradErrors(SymgradError):
    """Every error found in one run, so that all are reported at once."""

    def __init__(self, errors: list[SymgradError]):
        self.errors = errors
        Exception.__init__(self, errors)

    def __str__(self) -> str:
        return "\n".join(map(str, self.errors))


def compile_op(decl: OpDecl) -> OpCode:
    """Derive, simplify and lower every attribute variant of one op, and its gradient op
    (`second_order`) where that derives."""
    restart_fresh_indices()
    raw = [derive(instantiate(decl, v)) for v in decl.variants()]
    simplified = [simplify(d) for d in raw]
    code = lower_op(OpSignature.of(decl), simplified)
    return dataclasses.replace(code, vjp=with_formulas(code.vjp, simplified), second_order=_second_order(raw))


def _second_order(raw: list) -> OpCode | LinearSecondOrder | None:
    """The gradient op's code, for every variant or none (see `symgrad.second_order`); where
    it does not derive, an op linear in each input has its second order composed of its own
    functions."""
    if all(v is None for d in raw for v in d.vjp.values()):  # piecewise constant (Floor, Sign):
        return LinearSecondOrder(())  # no gradient, so a zero second order: linear in nothing
    code = _gradient_op_code(raw)
    if code is None:
        linear = {linear_inputs(d) for d in raw}
        return LinearSecondOrder(linear.pop()) if len(linear) == 1 and None not in linear else None
    if raw[0].variant.decl.complex_ok and not uses_wirtinger(raw[0].variant):  # a Wirtinger
        code = complex_form(code, raw[0].grad_names)  # gradient op's is in TensorFlow's convention
    # a cotangent per input of the op, as `<op>_grad` returns a gradient per input (unused
    # where that is None: positions, inputs declared without a gradient)
    variadic = raw[0].variant.decl.variadic  # `<op>_grad` returns its list's gradients as one
    names = (variadic,) if variadic else tuple(t.name for t in raw[0].variant.inputs)
    return dataclasses.replace(code, grads=tuple(f"grad_{PREFIX}{name}" for name in names))


def _gradient_op_code(raw: list) -> OpCode | None:
    """The gradient op's derivations lowered, None where any variant does not derive."""
    seconds = [derive_second_order(d) for d in raw]
    if any(d is None for d in seconds):
        return None
    try:
        return lower_op(OpSignature.of(seconds[0].variant.decl), seconds)
    except SymgradError:
        return None


def _cached_or_loaded(paths: list[Path], cache: Cache, key_parts: tuple) -> tuple[dict, list]:
    """The cached texts of the op files the cache has, and the others loaded, with their
    keys; every op's name checked unique across them all."""
    _check_stems(paths)
    files, fresh, records = {}, [], []
    for path in paths:
        key = cache_key(path, display_path(path), key_parts)
        hit = cache.get(key)
        if hit is None:
            op_file = load_op_file(path)
            fresh.append((op_file, key))
            records += op_file.ops
        else:
            records += hit[0]
            files.update(hit[1])
    check_unique(records)
    return files, fresh


def generate(
    paths: list[str | Path],
    targets: tuple[str, ...],
    cache: Cache | None = None,
    jobs: int = 1,
    verify: bool = True,
    allow_large: bool = False,
    progress: Progress = QUIET,
) -> dict[str, str]:
    """Generated file name -> text, for every op file under `paths` and the runtime module of
    each of `targets` (`symgrad.runtime_module`); each freshly derived
    file verified first (`selfcheck`): only verified texts are returned or cached. A gradient
    with an intermediate larger than the op's inputs, outputs and stages (a Jacobian) is an
    error, or with `allow_large` a warning. Each stage's progress goes to `progress`.

    Raises:
        SymgradErrors: every op that failed, after trying them all.
    """
    cache = cache or Cache(None)
    files, fresh = _cached_or_loaded(op_file_paths(paths), cache, targets + (("allow large",) if allow_large else ()))
    compiled = _compile_all([f for f, _ in fresh], jobs, progress)
    oversized = [e for (f, _), codes in zip(fresh, compiled) for d, c in zip(f.ops, codes) for e in oversized_intermediates(d, c)]
    if oversized and not allow_large:
        raise SymgradErrors(oversized)
    for error in oversized:
        print(f"warning: {error}", file=sys.stderr)
    # numpy's module always: verification differences its forward
    rendered = _render_all([f for f, _ in fresh], compiled, tuple(dict.fromkeys(("numpy",) + targets)), jobs, progress)
    if verify:
        everything = {name: text for r in rendered for name, text in r.items()} | runtime_files(("numpy",) + targets)
        errors = verify_generated([f for f, _ in fresh], everything, jobs, targets, progress)
        if errors:
            raise SymgradErrors(errors)
    for (op_file, key), texts in zip(fresh, rendered):
        wanted = {name: texts[name] for name in (op_file.stem + MODULE_SUFFIX[t] for t in targets)}
        if verify:  # the cache holds verified texts only
            cache.put(key, [CachedOp(d.name, d.func_name, str(d.location)) for d in op_file.ops], wanted)
        files.update(wanted)
    return dict(sorted((files | runtime_files(targets)).items()))


def oversized_intermediates(decl: OpDecl, code: OpCode) -> list[LoweringError]:
    """An error per gradient branch with an intermediate of more axes than `rank_bound`."""
    errors = []
    for branch in code.vjp.branches:
        if branch.rank_bound and branch.largest_rank > branch.rank_bound:
            variant = f" [attributes {dict(branch.attr_values)}]" if branch.attr_values else ""
            errors.append(LoweringError(
                f"the gradient{variant} needs an intermediate of {branch.largest_rank} axes, more "
                f"than the op's largest input, output or stage ({branch.rank_bound}): "
                f"{branch.largest_term}. Naming an intermediate with `stage()` may avoid it; "
                f"--allow-large-intermediates makes this a warning",
                decl.name,
                decl.location,
            ))
    return errors


def to_temp_folder(
    paths: list[str | Path], jobs: int | None = None, use_cache: bool = True, progress: Progress = QUIET
) -> Path:
    """Every op file under `paths` derived (verified) and written to a temporary folder, kept
    until the process exits: what `symgrad check` and `diff` compare without `--generated`."""
    cache = Cache(default_cache_dir() if use_cache else None)
    files = generate(list(paths), TARGETS, cache=cache, jobs=jobs or default_jobs(), progress=progress)
    temp = tempfile.TemporaryDirectory(prefix="symgrad-derived-")
    _temp_dirs.append(temp)
    folder = Path(temp.name)
    for name, text in files.items():
        (folder / name).write_text(text)
    return folder


_temp_dirs: list[tempfile.TemporaryDirectory] = []  # kept alive while their modules are in use


def _compile_all(op_files: list[OpFile], jobs: int, progress: Progress) -> list[list[OpCode]]:
    """Every op of every file compiled, in order; all errors collected before raising."""
    tasks = [(str(f.path), n) for f in op_files for n in range(len(f.ops))]
    names = [decl.name for f in op_files for decl in f.ops]
    if jobs > 1 and len(tasks) > 1:
        results = _in_workers(_compile_in_worker, tasks, jobs, progress.stage("compiling ops", names))
    else:
        decls = [decl for f in op_files for decl in f.ops]
        results = progress.each("compiling ops", names, _compile_or_error, decls)
    errors = [r for r in results if isinstance(r, SymgradError)]
    if errors:
        raise SymgradErrors(errors)
    grouped, position = [], 0
    for op_file in op_files:
        grouped.append(results[position : position + len(op_file.ops)])
        position += len(op_file.ops)
    return grouped


def _render_all(
    op_files: list[OpFile], compiled: list[list[OpCode]], targets: tuple[str, ...], jobs: int, progress: Progress
) -> list[dict[str, str]]:
    """Each op file's generated texts for `targets`, name -> text, rendered (and formatted) in
    workers."""
    tasks = [(display_path(f.path), target, codes) for f, codes in zip(op_files, compiled) for target in targets]
    names = [f.stem + MODULE_SUFFIX[target] for f in op_files for target in targets]
    if jobs > 1 and len(tasks) > 1:
        texts = _in_workers(_render_in_worker, tasks, jobs, progress.stage("rendering modules", names))
    else:
        texts = progress.each("rendering modules", names, _render_in_worker, tasks)
    errors = [t for t in texts if isinstance(t, SymgradError)]
    if errors:
        raise errors[0]
    in_order = iter(texts)
    return [{f.stem + MODULE_SUFFIX[target]: next(in_order) for target in targets} for f in op_files]


def _in_workers(function, tasks: list, jobs: int, stage) -> list:
    """`function` of each task, in order, in `jobs` worker processes (new for each call), each
    counted by the progress `stage` as it finishes."""
    context = multiprocessing.get_context(start_method())
    with ProcessPoolExecutor(min(jobs, len(tasks)), mp_context=context) as pool:
        return stage.gather([pool.submit(function, task) for task in tasks])


def _compile_in_worker(task: tuple[str, int]) -> OpCode | SymgradError:
    """In a worker process (new for each run): load the op file once, compile one op."""
    path, index = task
    return _compile_or_error(_load_once(path).ops[index])


def _compile_or_error(decl: OpDecl) -> OpCode | SymgradError:
    try:
        return compile_op(decl)
    except SymgradError as exc:
        return exc if exc.op else type(exc)(exc.what, decl.name, decl.location)


@functools.lru_cache(maxsize=None)
def _load_once(path: str) -> OpFile:
    return load_op_file(Path(path))


def _render_in_worker(task: tuple) -> str | SymgradError:
    """One generated module's text; an error (a printer that cannot print a value) returned."""
    source, target, codes = task
    try:
        return render_module(target, source, codes)
    except SymgradError as exc:
        return type(exc)(exc.what, exc.op, exc.location or source)


def _check_stems(paths: list[Path]) -> None:
    """Two op files with one name (in different folders) would write the same modules; one
    named `_symgrad` would write the runtime modules'."""
    seen: dict[str, Path] = {}
    for path in paths:
        if path.stem == "_symgrad":
            raise SymgradError(f"op file {path}: its modules would be named as the runtime modules symgrad writes beside them (_symgrad_*.py); rename it")
        first = seen.setdefault(path.stem, path)
        if first != path:
            raise SymgradError(f"op files {first} and {path} would both generate {path.stem}_*.py")


def display_path(path: Path) -> str:
    """`path` relative to the working directory where possible, with forward slashes."""
    try:
        return Path(os.path.relpath(path)).as_posix()
    except ValueError:  # another drive on Windows
        return path.as_posix()
