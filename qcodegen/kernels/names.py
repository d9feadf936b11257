"""C names of a model's constant arrays (every symbol of a generated model starts with its prefix)."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

import numpy as np

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

    def by_value(self, role: str, values: np.ndarray) -> str:
        """An array made for a step (a primitive's per-step constant, or a kernel's), named by its role and its values:
        the steps one layer is cut into (patches, plan/memory.py), which have the same constants, read one copy, and
        their step functions, alike then, compile to one."""
        flat = np.ascontiguousarray(values)
        digest = hashlib.sha1(flat.dtype.str.encode() + flat.tobytes()).hexdigest()[:10]
        return f"{self.prefix}_v_{c_identifier(role)}_{digest}"
