"""aarch64 kernel family (not yet migrated to a choice module: see qcodegen/kernels/legacy.py)."""
