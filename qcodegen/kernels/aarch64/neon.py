"""The AArch64 NEON kernels of Armv8-A (target aarch64-neon): choice.py without SDOT."""

from functools import partial

from . import choice
from .choice import LAYOUTS, STEP_ATTRIBUTES

choose = partial(choice.choose, sdot=False)

__all__ = ["LAYOUTS", "STEP_ATTRIBUTES", "choose"]
