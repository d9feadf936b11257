"""The Cortex-M4/M7 DSP kernel family: choice (choice.py) and weight layouts (layouts.py)."""

from .choice import STEP_ATTRIBUTES, choose

LAYOUTS = ("compact", "fast")  # "fast": the convolutions' weights as SMLAD's int16 pairs

__all__ = ["LAYOUTS", "STEP_ATTRIBUTES", "choose"]
