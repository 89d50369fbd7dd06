"""Write generated files all-or-nothing, or report which ones are stale."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from symgrad.errors import OutputError


def stale_files(out_dir: Path, files: dict[str, str]) -> list[Path]:
    """Generated files whose text on disk differs from `files` (or that are missing).

    Raises:
        OutputError: `out_dir` is a file.
    """
    _require_not_a_file(out_dir)
    stale = []
    for name, text in sorted(files.items()):
        path = out_dir / name
        if not path.is_file() or path.read_text() != text:
            stale.append(path)
    return stale


def write_files(out_dir: Path, files: dict[str, str]) -> list[Path]:
    """Write every file atomically: each is staged beside its target, then renamed over it.

    All texts exist before the first rename, so a failure in derivation never touches
    `out_dir`; unchanged files are not rewritten. Returns the paths written.

    Raises:
        OutputError: `out_dir` is a file, or cannot be created or written to.
    """
    require_writable_folder(out_dir)
    staged, mode = [], _mode_by_umask()  # mkstemp makes 0600: give the mode `open` would
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        for path in stale_files(out_dir, files):
            handle, temp = tempfile.mkstemp(dir=out_dir, prefix=f".{path.name}.", suffix=".tmp")
            os.chmod(temp, mode)
            with os.fdopen(handle, "w") as stream:
                stream.write(files[path.name])
            staged.append((Path(temp), path))
        for temp, path in staged:
            os.replace(temp, path)
    except OSError as exc:
        raise OutputError(f"cannot write to the output folder {out_dir}: {exc.strerror or exc}") from None
    finally:
        for temp, _ in staged:
            temp.unlink(missing_ok=True)  # renamed already, unless something failed
    return [path for _, path in staged]


def require_writable_folder(out_dir: Path) -> None:
    """Raise OutputError unless `out_dir` is a folder this process may write to, or one it may
    create."""
    _require_not_a_file(out_dir)
    existing = next(p for p in (out_dir, *out_dir.parents) if p.exists())
    if existing != out_dir and not existing.is_dir():
        raise OutputError(f"cannot create the output folder {out_dir}: {existing} is a file")
    if not os.access(existing, os.W_OK):
        raise OutputError(f"cannot write to the output folder {out_dir}: {existing} is not writable")


def _require_not_a_file(out_dir: Path) -> None:
    if out_dir.exists() and not out_dir.is_dir():
        raise OutputError(f"the output folder {out_dir} is a file")


def _mode_by_umask() -> int:
    """0666 less the process's umask, as a file created with `open` gets."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask
