"""The AArch64 NEON kernel family (runtime/aarch64/, templates/neon/): choice.py decides, layouts.py makes the
arrays. Two ISA levels, each a module named by its targets' TOML (`kernels = "aarch64.neon"`, `"aarch64.dotprod"`):
neon.py (Armv8-A) and dotprod.py (with the dot-product extension: SDOT)."""
