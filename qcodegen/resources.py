"""Locate the data folders (templates, runtime, targets) in a wheel or in a source checkout."""

from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent


def data_path(name: str) -> Path:
    installed = _PACKAGE_DIR / "_data" / name
    if installed.is_dir():
        return installed
    return _PACKAGE_DIR.parent / name
