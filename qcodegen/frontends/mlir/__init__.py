"""MLIR text front end: a dependency-free lexer/parser for the subset used by quantized StableHLO and TOSA programs.

``parse_file(path)`` returns one ``ast.Module`` per ``// -----`` chunk; malformed text raises MlirSyntaxError.
"""

from .lexer import MlirSyntaxError
from .parser import parse_chunks, parse_file, parse_module

__all__ = ["MlirSyntaxError", "parse_chunks", "parse_file", "parse_module"]
