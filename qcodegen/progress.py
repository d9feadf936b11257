"""Progress of long runs on a terminal: one live line on stderr, updated in place. Silent when stderr is not a
terminal (pipes, CI logs) and in --json mode."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    def __init__(self, what: str, enabled: bool = True, stream: TextIO | None = None) -> None:
        self.what = what
        self.stream = stream or sys.stderr
        self.enabled = enabled and self.stream.isatty()
        self.start = time.monotonic()
        self.shown = False

    def update(self, done: int, total: int) -> None:
        if not self.enabled or total < 2:
            return
        elapsed = time.monotonic() - self.start
        width = 30
        filled = width * done // total
        eta = f", {elapsed / done * (total - done):.0f} s left" if done else ""
        self.stream.write(f"\r  [{'#' * filled}{'.' * (width - filled)}] {done}/{total} {self.what}{eta}   ")
        self.stream.flush()
        self.shown = True

    def close(self) -> None:
        if self.shown:
            self.stream.write("\r" + " " * 79 + "\r")
            self.stream.flush()
