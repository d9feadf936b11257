"""The x86 kernels at the VNNI level (targets x86-avxvnni, x86-avx512vnni: VPDPBUSD / VPDPWSSD, VEX or EVEX by the
compiler's flags; qcodegen/kernels/x86/choice.py)."""

from .choice import STEP_ATTRIBUTES, VNNI, chooser

choose = chooser(VNNI)
LAYOUTS = ("compact",)

__all__ = ["LAYOUTS", "STEP_ATTRIBUTES", "choose"]
