"""qcodegen: quantized graphs to integer-only C, proved bit-exact against a numpy reference.

The Python API: `from qcodegen import api` (docs/python-api.md)."""

__version__ = "0.1.0"
