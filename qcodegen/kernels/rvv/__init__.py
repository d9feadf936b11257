"""The RISC-V RVV 1.0 kernel family: choice (choice.py); the kernels read the schedule's int8 weights as they are."""

from .choice import STEP_ATTRIBUTES, choose

LAYOUTS = ("compact",)  # no weight re-layout

__all__ = ["LAYOUTS", "STEP_ATTRIBUTES", "choose"]
