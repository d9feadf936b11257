"""Integer primitives (TOSA 1.0 semantics): one module each, with shape rules, the numpy reference,
range analysis, cost, and the name of its C template. Modules register themselves on import."""

import importlib
import pkgutil

from .base import REGISTRY, Primitive, get

for _module in pkgutil.iter_modules(__path__):
    if _module.name != "base":
        importlib.import_module(f"{__name__}.{_module.name}")

__all__ = ["REGISTRY", "Primitive", "get"]
