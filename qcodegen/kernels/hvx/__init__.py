"""The Hexagon HVX (128-byte vectors) kernel family: choice (choice.py), weight layouts (layouts.py)."""

from .choice import STEP_ATTRIBUTES, choose

LAYOUTS = ("compact", "fast")  # fast: also the convolutions whose rows32 blocks are padded with zeros

__all__ = ["LAYOUTS", "STEP_ATTRIBUTES", "choose"]
