"""Compile generated C with a content-hash cache."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

from ..errors import BuildError


def cache_dir() -> Path:
    root = os.environ.get("QC_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "qcodegen")
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


def compile_cached(sources: list[Path], command: list[str], suffix: str, libs: list[str] | None = None,
                   headers: list[Path] | None = None) -> Path:
    """Run `command + sources + libs + [-o OUT]` unless an artefact with the same inputs exists; return OUT. The
    inputs are the command, the sources and `headers` (default: every .h beside the sources)."""
    libs = libs or []
    digest = hashlib.sha256()
    for part in command + ["|"] + libs:
        digest.update(part.encode() + b"\0")
    for src in sorted(sources):
        digest.update(src.name.encode() + b"\0" + src.read_bytes() + b"\0")
    if headers is None:
        headers = [h for s in sources for h in s.parent.glob("*.h")]
    for header in sorted(set(headers)):
        digest.update(header.name.encode() + b"\0" + header.read_bytes() + b"\0")
    out = cache_dir() / f"{digest.hexdigest()[:32]}{suffix}"
    if out.exists():
        return out
    tmp = out.with_name(out.name + f".{os.getpid()}.tmp")
    cmd = command + [str(s) for s in sources] + libs + ["-o", str(tmp)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        tmp.unlink(missing_ok=True)
        first = (proc.stderr.strip().splitlines() or ["(no output)"])
        detail = next((ln for ln in first if "error" in ln.lower()), first[0])  # the assembler's are "Error:"
        raise BuildError(f"C compilation failed ({' '.join(command[:1])}): {detail}")
    os.replace(tmp, out)
    return out
