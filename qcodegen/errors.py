"""Exceptions that the CLI turns into one-line messages (never tracebacks), and the helper that quotes untrusted text.

Every message is one line of at most MAX_MESSAGE characters: names and bytes read from a model file are quoted with
`shorten` (escaped, cut); a message still longer than that (e.g. a long list of real tensor names) has its long
quoted parts cut, then its end.
"""

from __future__ import annotations

import re

MAX_MESSAGE = 300
NAME_LIMIT = 60  # characters of an untrusted name kept in a message
_LONG = NAME_LIMIT + 1
_QUOTED = re.compile("|".join(rf"{q}(?:[^{q}\\\s]|\\.){{{_LONG},}}{q}" for q in "'\""))  # a long quoted name


def shorten(value: object, limit: int = NAME_LIMIT) -> str:
    """`value` (a name or bytes from an untrusted file) quoted for a message as `repr` quotes it (control characters
    escaped; undecodable bytes as U+FFFD), cut to about `limit` characters with '…' marking the cut."""
    if isinstance(value, bytes | bytearray | memoryview):
        value = bytes(value).decode("utf-8", "replace")
    return _cut(repr(str(value)), limit)


def _cut(quoted: str, limit: int = NAME_LIMIT) -> str:
    if len(quoted) <= limit + 2:
        return quoted
    return quoted[:limit + 1].rstrip("\\") + "…" + quoted[-1]


def one_line(message: str) -> str:
    if "\n" in message or "\r" in message:
        message = " ".join(message.splitlines())
    if len(message) <= MAX_MESSAGE:
        return message
    message = _QUOTED.sub(lambda m: _cut(m[0]), message)
    return message if len(message) <= MAX_MESSAGE else message[:MAX_MESSAGE - 1] + "…"


class QcError(Exception):
    """Base of every error a user can cause; the message is one line and names the culprit."""

    def __init__(self, *args: object) -> None:
        if len(args) == 1 and isinstance(args[0], str):
            args = (one_line(args[0]),)
        super().__init__(*args)


class GraphError(QcError):
    """The input graph is invalid (bad quantization, shapes, dtypes, structure)."""


class UnsupportedError(QcError):
    """The graph is valid but uses something qcodegen cannot compile."""


class PlanError(QcError):
    """Planning failed, e.g. an accumulator could overflow and cannot be widened."""


class BuildError(QcError):
    """The generated C failed to compile or run."""


def install_hint(extra: str) -> str:
    """How to install an optional extra, for installs from PyPI and from a source folder."""
    return f"pip install 'qcodegen[{extra}]' (from a qcodegen source folder: pip install '.[{extra}]')"


class LimitError(GraphError):
    """The model declares more data than the resource limits allow (qcodegen/ir/limits.py)."""


def in_context(exc: QcError, context: str) -> QcError:
    """`exc` (same class) with "`context`: " in front of its message."""
    message = str(exc)
    try:
        return type(exc)(f"{context}: {message}")
    except TypeError:  # a subclass with another constructor
        return QcError(f"{context}: {message}")
