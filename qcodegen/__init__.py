"""qcodegen: quantized graphs to integer-only C, proved bit-exact against a numpy reference."""

__version__ = "0.1.0"
