"""Numpy reference execution of a Schedule (the oracle the generated C must match bit for bit)."""

from .executor import initial_state, next_state, run_reference

__all__ = ["initial_state", "next_state", "run_reference"]
