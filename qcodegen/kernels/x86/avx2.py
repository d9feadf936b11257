"""The x86 kernels at the AVX2 level (target x86-avx2; qcodegen/kernels/x86/choice.py)."""

from .choice import AVX2, STEP_ATTRIBUTES, chooser

choose = chooser(AVX2)
LAYOUTS = ("compact",)

__all__ = ["LAYOUTS", "STEP_ATTRIBUTES", "choose"]
