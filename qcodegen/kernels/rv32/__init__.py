"""The scalar RISC-V RV32IM kernel family: choice (choice.py) and weight layouts (layouts.py)."""

from .choice import STEP_ATTRIBUTES, choose

LAYOUTS = ("compact",)  # the re-laid weights take the int8 weights' flash: no faster layout

__all__ = ["LAYOUTS", "STEP_ATTRIBUTES", "choose"]
