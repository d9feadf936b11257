"""The Cortex-M55 Helium (MVE) kernel family: choice (choice.py) and weight layouts (layouts.py)."""

from .choice import STEP_ATTRIBUTES, choose

LAYOUTS = ("compact",)  # no layout trades flash for instructions here

__all__ = ["LAYOUTS", "STEP_ATTRIBUTES", "choose"]
