"""The Hexagon HVX (128-byte vectors) kernel family: choice (choice.py), weight layouts (layouts.py)."""

from .choice import STEP_ATTRIBUTES, choose

# both with the rows32 weights (layouts.py); "fast": the conv / depthwise kernels inlined into each step with its
# constant params (specialized: more .text, fewer instructions), "compact": one shared copy of each
LAYOUTS = ("compact", "fast")

__all__ = ["LAYOUTS", "STEP_ATTRIBUTES", "choose"]
