"""C names of a model's constant arrays (every symbol of a generated model starts with its prefix)."""

from __future__ import annotations

import re
from dataclasses import dataclass

_C_KEYWORDS = {"auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else",
               "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long", "register",
               "restrict", "return", "short", "signed", "sizeof", "static", "struct", "switch", "typedef",
               "union", "unsigned", "void", "volatile", "while", "main"}


def c_identifier(text: str) -> str:
    ident = re.sub(r"[^0-9A-Za-z_]", "_", text).strip("_") or "model"
    if ident[0].isdigit():
        ident = "m_" + ident
    if ident in _C_KEYWORDS:
        ident += "_"
    return ident


@dataclass(frozen=True)
class ArrayNames:
    """Names of the constant arrays of the model with symbol prefix `prefix`."""

    prefix: str

    def const(self, buffer: str) -> str:
        """A schedule constant's array."""
        return f"{self.prefix}_c_{c_identifier(buffer)}"

    def relaid(self, buffer: str, layout: str) -> str:
        """A schedule constant's values re-laid as `layout` (one array however many steps read it)."""
        return f"{self.const(buffer)}_{layout}"

    def step(self, index: int, role: str) -> str:
        """An array made for step `index` (a primitive's per-step constant, or a kernel's)."""
        return f"{self.prefix}_s{index}_{c_identifier(role)}"
