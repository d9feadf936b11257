"""Tokenizer for the MLIR textual subset.

The lexer is lazy (one token at a time from a character offset) so that the type parser can re-scan a shape such as
``2x0x3x`` at character level, which a context-free tokenizer would split wrongly (``0x3`` looks like a hex literal).
"""

from __future__ import annotations

import bisect
import re
from typing import NamedTuple

from ...errors import GraphError


class MlirSyntaxError(GraphError):
    """The MLIR text is malformed or uses syntax outside the supported subset; the message starts with file:line:col."""

    def __init__(self, filename: str, line: int, col: int, message: str) -> None:
        super().__init__(f"{filename}:{line}:{col}: {message}")
        self.filename = filename
        self.line = line
        self.col = col


class Token(NamedTuple):
    """``kind`` is one of the group names of ``_TOKEN`` or, for punctuation, the punctuation text itself."""

    kind: str
    text: str
    start: int
    end: int


_ID = r"(?:[0-9]+|[A-Za-z_$.\-][A-Za-z0-9_$.\-]*)"
_STRING = r'"(?:[^"\\\n]|\\.)*"'
_TOKEN = re.compile(rf"""
    (?P<float>[0-9]+\.[0-9]*(?:[eE][-+]?[0-9]+)?)
  | (?P<int>0x[0-9a-fA-F]+|[0-9]+)
  | (?P<string>{_STRING})
  | (?P<value>%{_ID}(?:\#[0-9]+)?)
  | (?P<caret>\^{_ID})
  | (?P<symbol>@(?:[A-Za-z_$.\-][A-Za-z0-9_$.\-]*|{_STRING}))
  | (?P<hash>\#{_ID})
  | (?P<bang>![A-Za-z_$.\-][A-Za-z0-9_$.\-]*)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_$.]*)
  | (?P<punct>->|::|[()\[\]{{}}<>,:=?*\-])
""", re.VERBOSE | re.ASCII)
_SKIP = re.compile(r"(?:\s+|//[^\n]*)*")


class Source:
    """A whole input text with its file name; maps character offsets to 1-based (line, column)."""

    def __init__(self, text: str, filename: str) -> None:
        self.text = text
        self.filename = filename
        self._line_starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def position(self, offset: int) -> tuple[int, int]:
        index = bisect.bisect_right(self._line_starts, offset) - 1
        return index + 1, offset - self._line_starts[index] + 1

    def error(self, offset: int, message: str) -> MlirSyntaxError:
        line, col = self.position(offset)
        return MlirSyntaxError(self.filename, line, col, message)


class Lexer:
    """Produces tokens from ``source.text[start:end]``; ``pos`` may be moved by the parser to re-scan."""

    def __init__(self, source: Source, start: int, end: int) -> None:
        self.source = source
        self.pos = start
        self.end = end

    def skip_space(self) -> None:
        self.pos = _SKIP.match(self.source.text, self.pos, self.end).end()

    def next(self) -> Token:
        self.skip_space()
        if self.pos >= self.end:
            return Token("eof", "", self.end, self.end)
        m = _TOKEN.match(self.source.text, self.pos, self.end)
        if m is None:
            char = self.source.text[self.pos]
            what = "unterminated string" if char == '"' else f"unexpected character {char!r}"
            raise self.source.error(self.pos, what)
        self.pos = m.end()
        kind = m.lastgroup
        text = m.group()
        return Token(text if kind == "punct" else kind, text, m.start(), m.end())

    def scan(self, pattern: re.Pattern[str]) -> re.Match[str] | None:
        """Match ``pattern`` at the current offset (after blanks); advance past it on success."""
        self.skip_space()
        m = pattern.match(self.source.text, self.pos, self.end)
        if m is not None:
            self.pos = m.end()
        return m
