"""The output folder of `compile`: a manifest of what qcodegen wrote there, so that recompiling into the folder first
removes what the previous compile wrote (a switch of target leaves no stale start-up code or Makefile behind), and a
folder holding files qcodegen did not write is refused unless forced."""

from __future__ import annotations

import json
from pathlib import Path

from . import __version__
from .errors import QcError

MANIFEST = "qcodegen_manifest.json"


class OutputFolder:
    def __init__(self, path: Path, force: bool = False) -> None:
        self.path = path
        self.force = force

    def _previous(self) -> list[str]:
        manifest = self.path / MANIFEST
        if not manifest.is_file():
            return []
        try:
            files = json.loads(manifest.read_text())["files"]
        except (ValueError, KeyError, TypeError, OSError, UnicodeDecodeError):
            raise QcError(f"{manifest}: unreadable manifest; remove the folder or pass --force") from None
        if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
            raise QcError(f"{manifest}: unreadable manifest; remove the folder or pass --force")
        return files

    def prepare(self) -> None:
        """Create the folder, or empty it of the previous compile's files (refusing foreign files unless forced)."""
        if self.path.exists() and not self.path.is_dir():
            raise QcError(f"{self.path}: exists and is not a folder")
        if self.path.is_dir():
            previous = self._previous()
            ours = set(previous) | {MANIFEST}
            foreign = sorted(p.name for p in self.path.iterdir() if p.name not in ours)
            if foreign and not self.force:
                shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
                raise QcError(f"{self.path}: holds files qcodegen did not write ({shown}); choose another folder "
                              "or pass --force")
            for name in previous:
                target = self.path / name
                if target.parent == self.path and target.is_file():
                    target.unlink()
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise QcError(f"{self.path}: cannot create the output folder ({exc.strerror or exc})") from None

    def commit(self, files: list[Path], info: dict[str, str]) -> Path:
        """Record the files this compile wrote; returns the manifest's path."""
        names = sorted({f.name for f in files})
        manifest = self.path / MANIFEST
        manifest.write_text(json.dumps({"qcodegen": __version__, **info, "files": names}, indent=1) + "\n")
        return manifest
