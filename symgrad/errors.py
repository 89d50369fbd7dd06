"""One error family for every stage, each message naming the op, its file and line."""

from __future__ import annotations


class SymgradError(Exception):
    """A user-facing failure: `<stage> failed for <op> (<file>:<line>): <what was wrong>`."""

    stage = "symgrad"

    def __init__(self, what: str, op: str | None = None, location: object = None):
        self.what = what
        self.op = op
        self.location = location
        super().__init__(what, op, location)  # args rebuild the error when unpickled

    def __str__(self) -> str:
        subject = f" for {self.op}" if self.op else ""
        where = f" ({self.location})" if self.location else ""
        return f"{self.stage} failed{subject}{where}: {self.what}"


class LoadError(SymgradError):
    stage = "loading"


class DeclarationError(SymgradError):
    stage = "declaration"


class DerivationError(SymgradError):
    stage = "derivation"


class LoweringError(SymgradError):
    stage = "lowering"


class VerificationError(SymgradError):
    stage = "verification"


class OutputError(SymgradError):
    stage = "writing"
