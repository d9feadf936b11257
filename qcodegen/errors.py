"""Exceptions that the CLI turns into one-line messages (never tracebacks)."""


class QcError(Exception):
    """Base of every error a user can cause; the message is one line and names the culprit."""


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
