"""Write generated files all-or-nothing, or report which ones are stale."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def stale_files(out_dir: Path, files: dict[str, str]) -> list[Path]:
    """Generated files whose text on disk differs from `files` (or that are missing)."""
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
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    staged, mode = [], _mode_by_umask()  # mkstemp makes 0600: give the mode `open` would
    try:
        for path in stale_files(out_dir, files):
            handle, temp = tempfile.mkstemp(dir=out_dir, prefix=f".{path.name}.", suffix=".tmp")
            os.chmod(temp, mode)
            with os.fdopen(handle, "w") as stream:
                stream.write(files[path.name])
            staged.append((Path(temp), path))
    except BaseException:
        for temp, _ in staged:
            temp.unlink(missing_ok=True)
        raise
    for temp, path in staged:
        os.replace(temp, path)
    return [path for _, path in staged]


def _mode_by_umask() -> int:
    """0666 less the process's umask, as a file created with `open` gets."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask
