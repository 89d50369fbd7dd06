"""Worker processes: how to start them.

`symgrad derive` compiles and renders ops in worker processes, and `symgrad check` and
`symgrad diff` compare them in others (`symgrad.verify.runner`).
"""

from __future__ import annotations

import sys


def start_method() -> str:
    """Fork where that is safe (workers then start warm, with SymPy imported); spawn in a
    process that has imported TensorFlow, whose threads a fork would leave broken."""
    if sys.platform == "linux" and "tensorflow" not in sys.modules:
        return "fork"
    return "spawn"
