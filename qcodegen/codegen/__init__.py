"""C code generation from a Schedule with Jinja templates (per-target overrides over `generic`)."""

from .render import GeneratedModel, generate
from .targets import Target, list_targets, load_target

__all__ = ["GeneratedModel", "generate", "Target", "list_targets", "load_target"]
