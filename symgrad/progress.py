"""Progress of long work on a terminal: one line on stderr, rewritten in place, saying what
stage a command is in, how many of its items are done, the item in hand and the time left:

    symgrad derive: compiling 12/247 ops, in hand: MatMul, about 2 min 10 s left

Quiet where stderr is not a terminal (a log, CI, a pipe), unless asked for (`--progress`),
so that what a command prints stays what it reports.
"""

from __future__ import annotations

import sys
import time
from concurrent.futures import FIRST_COMPLETED, Future, wait
from typing import Callable, TextIO


class Progress:
    """Where a command's progress goes: `stream`, or nowhere when None."""

    def __init__(self, command: str, stream: TextIO | None):
        self.command = command  # "derive", "diff", "check"
        self.stream = stream
        self._width = 0  # of the line last written, to blank what a shorter one leaves

    @classmethod
    def for_command(cls, command: str, forced: bool | None) -> Progress:
        """On stderr when it is a terminal (or `forced` True); quiet when `forced` is False."""
        shown = sys.stderr.isatty() if forced is None else forced
        return cls(command, sys.stderr if shown else None)

    def stage(self, what: str, names: list[str]) -> Stage:
        """A stage of the command over items named `names`, counted as `what`."""
        return Stage(self, what, names)

    def each(self, what: str, names: list[str], function: Callable, items: list) -> list:
        """`function` of each of `items` in this process, in order, counted as `what`."""
        return self.stage(what, names).each(function, items)

    def write(self, line: str) -> None:
        if self.stream is None:
            return
        self.stream.write("\r" + line.ljust(self._width))
        self.stream.flush()
        self._width = len(line)

    def clear(self) -> None:
        if self.stream is not None and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
            self._width = 0


class Stage:
    """One stage's count, its item in hand, and the time left at the rate so far."""

    def __init__(self, progress: Progress, what: str, names: list[str]):
        self.progress, self.what, self.names = progress, what, names
        self.done: set[int] = set()
        self.started = time.monotonic()

    def each(self, function: Callable, items: list) -> list:
        """`function` of each of `items` in this process, in order."""
        results = []
        try:
            for n, item in enumerate(items):
                self.show(n)
                results.append(function(item))
                self.done.add(n)
        finally:
            self.progress.clear()
        return results

    def gather(self, futures: list[Future]) -> list:
        """The results of `futures` (running in workers), in order, counted as they finish."""
        position = {future: n for n, future in enumerate(futures)}
        pending = set(futures)
        try:
            while pending:
                self.show(min(position[f] for f in pending))  # the oldest still running
                finished, pending = wait(pending, timeout=1.0, return_when=FIRST_COMPLETED)
                self.done.update(position[f] for f in finished)
        finally:
            self.progress.clear()
        return [future.result() for future in futures]

    def show(self, in_hand: int) -> None:
        if self.progress.stream is None:
            return
        total, done = len(self.names), len(self.done)
        line = f"symgrad {self.progress.command}: {self.what} {done}/{total}, in hand: {self.names[in_hand]}"
        if done:
            line += f", {time_left((time.monotonic() - self.started) / done * (total - done))}"
        self.progress.write(line)


def time_left(seconds: float) -> str:
    """`about 2 min 10 s left`, to the 10 s above a minute."""
    if seconds < 60:
        return f"about {max(1, round(seconds))} s left"
    minutes, rest = divmod(int(round(seconds / 10) * 10), 60)
    return f"about {minutes} min {rest} s left" if rest else f"about {minutes} min left"


QUIET = Progress("", None)  # for callers outside the CLI (symgrad.testing, the tests)
