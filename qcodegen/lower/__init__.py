"""Lowering: source-level quantized ops -> integer primitives (TOSA semantics). One rule per op kind;
rule modules register themselves on import."""

import importlib
import pkgutil

from .base import RULES, Lowerer, lower_graph, rule

for _module in pkgutil.iter_modules(__path__):
    if _module.name != "base":
        importlib.import_module(f"{__name__}.{_module.name}")

__all__ = ["RULES", "Lowerer", "lower_graph", "rule"]
