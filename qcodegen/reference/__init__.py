"""Numpy reference execution of a Schedule (the oracle the generated C must match bit for bit)."""

from .executor import run_reference

__all__ = ["run_reference"]
