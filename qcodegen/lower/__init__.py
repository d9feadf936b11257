"""Lowering: source-level quantized ops -> integer primitives (TOSA semantics). One rule per op kind;
rule modules register themselves on import. Rules are grouped by source format (builder/ for the JSON and
builder ops, tflite/, stablehlo/, tosa/); base.py and common.py are the helpers they share."""

import importlib
import pkgutil

from .base import RULES, Lowerer, lower_graph, rule

for _module in pkgutil.walk_packages(__path__, prefix=f"{__name__}."):
    importlib.import_module(_module.name)

__all__ = ["RULES", "Lowerer", "lower_graph", "rule"]
