"""The Hexagon HVX (128-byte vectors) kernel family: choice (choice.py), weight layouts (layouts.py)."""

from .choice import STEP_ATTRIBUTES, choose

LAYOUTS = ("compact",)  # one layout: rows32 (layouts.py)

__all__ = ["LAYOUTS", "STEP_ATTRIBUTES", "choose"]
