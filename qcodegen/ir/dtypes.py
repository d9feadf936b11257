"""Element types. i48 exists only as an accumulator; i4/u4 are stored packed in constant data; bool (TOSA BOOL,
MLIR i1) is one byte holding 0 or 1."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import GraphError, shorten


@dataclass(frozen=True)
class DType:
    name: str
    bits: int
    signed: bool
    is_float: bool = False

    @property
    def min(self) -> int:
        if self.is_float:
            raise TypeError(f"{self.name} has no integer range")
        return -(1 << (self.bits - 1)) if self.signed else 0

    @property
    def max(self) -> int:
        if self.is_float:
            raise TypeError(f"{self.name} has no integer range")
        return (1 << (self.bits - 1)) - 1 if self.signed else (1 << self.bits) - 1

    @property
    def numpy(self) -> np.dtype:
        """The numpy dtype that holds one unpacked element."""
        return np.dtype(_NUMPY[self.name])

    @property
    def ctype(self) -> str:
        """The C type that holds one unpacked element."""
        return _CTYPE[self.name]

    @property
    def container_bytes(self) -> int:
        """Bytes one unpacked element occupies in memory (arena and harness files use this)."""
        return self.numpy.itemsize

    @property
    def is_packed(self) -> bool:
        """i4/u4 are packed two per byte (low nibble first) in constant data and harness files."""
        return self.bits == 4

    def __str__(self) -> str:
        return self.name


_NUMPY = {
    "bool": "bool", "i4": "int8", "u4": "uint8", "i8": "int8", "u8": "uint8", "i16": "int16", "u16": "uint16",
    "i32": "int32", "i48": "int64", "i64": "int64", "f32": "float32",
}
_CTYPE = {
    "bool": "uint8_t", "i4": "int8_t", "u4": "uint8_t", "i8": "int8_t", "u8": "uint8_t", "i16": "int16_t",
    "u16": "uint16_t", "i32": "int32_t", "i48": "int64_t", "i64": "int64_t", "f32": "float",
}

BOOL = DType("bool", 1, False)
I4 = DType("i4", 4, True)
U4 = DType("u4", 4, False)
I8 = DType("i8", 8, True)
U8 = DType("u8", 8, False)
I16 = DType("i16", 16, True)
U16 = DType("u16", 16, False)
I32 = DType("i32", 32, True)
I48 = DType("i48", 48, True)
I64 = DType("i64", 64, True)
F32 = DType("f32", 32, True, is_float=True)

DTYPES: dict[str, DType] = {d.name: d for d in (BOOL, I4, U4, I8, U8, I16, U16, I32, I48, I64, F32)}
DTYPES["i1"] = BOOL  # MLIR spelling


def dtype(name: str | DType) -> DType:
    if isinstance(name, DType):
        return name
    if not isinstance(name, str) or name not in DTYPES:
        raise GraphError(f"unknown dtype {shorten(name)} (known: {', '.join(DTYPES)})")
    return DTYPES[name]

def wrap_to(values: np.ndarray, dt: DType) -> np.ndarray:
    """The value of the low `dt.bits` bits of `values` (int64) read as `dt`."""
    low = values & ((1 << dt.bits) - 1)
    if not dt.signed:
        return low
    sign = 1 << (dt.bits - 1)
    return (low ^ sign) - sign
