"""The AArch64 NEON kernels with the dot-product extension (target aarch64-dotprod): choice.py with SDOT."""

from functools import partial

from . import choice
from .choice import LAYOUTS, STEP_ATTRIBUTES

choose = partial(choice.choose, sdot=True)

__all__ = ["LAYOUTS", "STEP_ATTRIBUTES", "choose"]
