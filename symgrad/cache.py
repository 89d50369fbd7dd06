"""A cache of generated files per op file, so unchanged declarations are not derived again.

An entry is keyed by the op file's bytes, the path its modules name, the path as given (which
its declarations' locations name: `ops/x.py:3` or `/abs/ops/x.py:3`), the targets, and a
fingerprint of symgrad itself (its source and templates), so editing either invalidates it.
It stores the generated texts and the op names, which is all a warm run needs.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class CachedOp:
    """What the cache remembers of one declaration, to check names stay unique."""

    name: str  # op type
    func_name: str  # Python name
    location: str  # "file:line"


def default_cache_dir() -> Path:
    """$SYMGRAD_CACHE_DIR, else $XDG_CACHE_HOME/symgrad, else ~/.cache/symgrad."""
    if os.environ.get("SYMGRAD_CACHE_DIR"):
        return Path(os.environ["SYMGRAD_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "symgrad"


@functools.lru_cache(maxsize=1)
def symgrad_fingerprint() -> str:
    """A hash of symgrad's own source files and templates."""
    from symgrad.render import templates_dir  # jinja2 and SymPy: only once a key is needed

    digest = hashlib.sha256()
    files = sorted(PACKAGE.rglob("*.py")) + sorted(templates_dir().glob("*.j2"))
    for path in files:
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def cache_key(op_file: Path, source: str, targets: tuple[str, ...]) -> str:
    digest = hashlib.sha256()
    for part in (symgrad_fingerprint(), source, str(op_file), ",".join(targets)):
        digest.update(part.encode() + b"\0")
    digest.update(op_file.read_bytes())
    return digest.hexdigest()


class Cache:
    """Entries stored as JSON files named by key; a missing or unreadable entry is a miss."""

    def __init__(self, folder: Path | None):
        self.folder = folder  # None: caching disabled

    def get(self, key: str) -> tuple[list[CachedOp], dict[str, str]] | None:
        if self.folder is None:
            return None
        try:
            entry = json.loads((self.folder / f"{key}.json").read_text())
            return [CachedOp(**op) for op in entry["ops"]], entry["files"]
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def put(self, key: str, ops: list[CachedOp], files: dict[str, str]) -> None:
        if self.folder is None:
            return
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            entry = {"ops": [op.__dict__ for op in ops], "files": files}
            handle, temp = tempfile.mkstemp(dir=self.folder, suffix=".tmp")
            with os.fdopen(handle, "w") as stream:
                json.dump(entry, stream)
            os.replace(temp, self.folder / f"{key}.json")
        except OSError:
            pass  # a cache that cannot be written only costs time
