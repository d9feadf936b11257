"""Target descriptions: one TOML file per target under targets/."""

from __future__ import annotations

import shutil
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import QcError
from ..resources import data_path


@dataclass(frozen=True)
class Target:
    name: str
    description: str
    cc: str
    cflags: tuple[str, ...]
    ldflags: tuple[str, ...] = ()
    templates: tuple[str, ...] = ("generic",)
    runner: str = "host"  # "host" (cffi, in-process) or "harness" (executable, maybe under an emulator)
    emulator: tuple[str, ...] = ()  # command prefix that runs a harness executable
    extra: dict = field(default_factory=dict)

    def template_dirs(self) -> list[Path]:
        root = data_path("templates")
        dirs = [Path(t) if Path(t).is_absolute() else root / t for t in self.templates]
        if "generic" not in self.templates:
            dirs.append(root / "generic")
        return dirs

    def missing_tools(self) -> list[str]:
        tools = [self.cc.split()[0]] + ([self.emulator[0]] if self.emulator else []) + list(self.extra.get("tools", ()))
        return [t for t in tools if shutil.which(t) is None]


_KNOWN = {"name", "description", "cc", "cflags", "ldflags", "templates", "runner", "emulator"}


def load_target(name: str, weight_layout: str | None = None) -> Target:
    """The target `name` (targets/<name>.toml); weight_layout (qcodegen/kernels WEIGHT_LAYOUTS)
    overrides the file's `weight_layout` (default "compact")."""
    path = data_path("targets") / f"{name}.toml"
    if not path.is_file():
        raise QcError(f"unknown target {name!r} (known: {', '.join(t.name for t in list_targets())})")
    with path.open("rb") as f:
        raw = tomllib.load(f)
    if weight_layout is not None:
        raw["weight_layout"] = weight_layout
    return Target(
        name=raw["name"], description=raw.get("description", ""), cc=raw.get("cc", "cc"),
        cflags=tuple(raw.get("cflags", ())), ldflags=tuple(raw.get("ldflags", ())),
        templates=tuple(raw.get("templates", ("generic",))), runner=raw.get("runner", "host"),
        emulator=tuple(raw.get("emulator", ())), extra={k: v for k, v in raw.items() if k not in _KNOWN},
    )


def list_targets() -> list[Target]:
    return [load_target(p.stem) for p in sorted(data_path("targets").glob("*.toml"))]
