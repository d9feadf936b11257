"""Schedules and the passes that build them: lowering output -> optimized, range-checked, memory-planned."""

# the pass modules register in passes.py's order, whichever plan module is imported first
from . import passes  # noqa: F401
