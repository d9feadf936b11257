"""Type AST of the MLIR subset: builtin integer/float/tensor/tuple/function types, !quant.uniform and opaque types.

Also the storage facts a parser needs to read literals: integer ranges and the little-endian layout of dense hex
blobs (one element per ceil(width/8) bytes, complex numbers as (real, imaginary) pairs).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .ast import Attribute

_SIGNEDNESS_PREFIX = {"signless": "i", "signed": "si", "unsigned": "ui"}


@dataclass(frozen=True)
class IntegerType:
    width: int
    signedness: str = "signless"  # "signless" (read as two's complement), "signed" or "unsigned"

    @property
    def unsigned(self) -> bool:
        return self.signedness == "unsigned"

    @property
    def min_value(self) -> int:
        return 0 if self.unsigned else -(1 << (self.width - 1))

    @property
    def max_value(self) -> int:
        return (1 << self.width) - 1 if self.unsigned else (1 << (self.width - 1)) - 1

    def __str__(self) -> str:
        return f"{_SIGNEDNESS_PREFIX[self.signedness]}{self.width}"


FLOAT_WIDTHS = {
    "f16": 16, "bf16": 16, "f32": 32, "f64": 64, "f80": 80, "f128": 128, "tf32": 19,
    "f4E2M1FN": 4, "f6E2M3FN": 6, "f6E3M2FN": 6, "f8E3M4": 8, "f8E4M3": 8, "f8E4M3FN": 8, "f8E4M3FNUZ": 8,
    "f8E4M3B11FNUZ": 8, "f8E5M2": 8, "f8E5M2FNUZ": 8, "f8E8M0FNU": 8,
}


@dataclass(frozen=True)
class FloatType:
    name: str  # one of FLOAT_WIDTHS

    @property
    def width(self) -> int:
        return FLOAT_WIDTHS[self.name]

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class IndexType:
    def __str__(self) -> str:
        return "index"


@dataclass(frozen=True)
class NoneType:
    def __str__(self) -> str:
        return "none"


@dataclass(frozen=True)
class ComplexType:
    element: Type

    def __str__(self) -> str:
        return f"complex<{self.element}>"


@dataclass(frozen=True)
class TensorType:
    shape: tuple[int | None, ...] | None  # None: unranked (tensor<*x...>); a None dimension is dynamic ("?")
    element: Type
    encoding: Attribute | None = None  # e.g. #stablehlo.bounds<4, ?>

    @property
    def ranked(self) -> bool:
        return self.shape is not None

    @property
    def is_dynamic(self) -> bool:
        return self.shape is None or None in self.shape

    @property
    def num_elements(self) -> int | None:
        if self.is_dynamic:
            return None
        count = 1
        for dim in self.shape:
            count *= dim
        return count

    def __str__(self) -> str:
        dims = "*x" if self.shape is None else "".join(f"{'?' if d is None else d}x" for d in self.shape)
        return f"tensor<{dims}{self.element}>"


@dataclass(frozen=True)
class TupleType:
    elements: tuple[Type, ...]

    def __str__(self) -> str:
        return f"tuple<{', '.join(map(str, self.elements))}>"


@dataclass(frozen=True)
class FunctionType:
    inputs: tuple[Type, ...]
    results: tuple[Type, ...]

    def __str__(self) -> str:
        return f"({', '.join(map(str, self.inputs))}) -> ({', '.join(map(str, self.results))})"


@dataclass(frozen=True)
class UniformQuantType:
    """``!quant.uniform``: per-tensor (axis None, no block sizes), per-axis (axis set) or sub-channel (block sizes).

    ``scales``/``zero_points``/``scale_texts`` are flat in row-major order of ``scales_shape``: () per tensor, (n,) per
    axis, the nesting of the ``{{...}}`` list for sub-channel. A scale is read as MLIR reads it: a double, a ``0x``
    literal being the bit pattern of a double (``0x3FF0000000000000`` is 1.0).
    """

    storage: IntegerType  # signedness "signless" (i8, two's complement), "signed" (si8) or "unsigned" (u8, ui8)
    expressed: FloatType
    scales: tuple[float, ...]
    zero_points: tuple[int, ...]
    scale_texts: tuple[str, ...]
    storage_min: int
    storage_max: int
    axis: int | None = None
    block_sizes: tuple[tuple[int, int], ...] = ()  # sub-channel: (dimension, block size) pairs
    scales_shape: tuple[int, ...] = ()

    @property
    def per_axis(self) -> bool:
        return self.axis is not None

    @property
    def sub_channel(self) -> bool:
        return bool(self.block_sizes)

    def __str__(self) -> str:
        types = f"{'u' if self.storage.unsigned else _SIGNEDNESS_PREFIX[self.storage.signedness]}{self.storage.width}"
        if (self.storage_min, self.storage_max) != (self.storage.min_value, self.storage.max_value):
            types += f"<{self.storage_min}:{self.storage_max}>"
        types += f":{self.expressed}"
        if self.axis is not None:
            types += f":{self.axis}"
        elif self.block_sizes:
            types += ":{" + ", ".join(f"{d}:{b}" for d, b in self.block_sizes) + "}"
        params = [f"{t}:{z}" for t, z in zip(self.scale_texts, self.zero_points, strict=True)]
        for size in reversed(self.scales_shape):
            params = ["{" + ", ".join(params[i:i + size]) + "}" for i in range(0, len(params), size)]
        return f"!quant.uniform<{types}, {params[0]}>"


@dataclass(frozen=True)
class OpaqueType:
    """A dialect type kept as text, e.g. ``!stablehlo.token`` or ``!tosa.shape<4>`` (body ``"4"``)."""

    dialect: str
    name: str
    body: str = ""

    def __str__(self) -> str:
        return f"!{self.dialect}.{self.name}" + (f"<{self.body}>" if self.body else "")


Type = (IntegerType | FloatType | IndexType | NoneType | ComplexType | TensorType | TupleType | FunctionType
        | UniformQuantType | OpaqueType)

INDEX_STORAGE = IntegerType(64)


def storage_type(element: Type) -> Type:
    """The type whose values a dense literal of ``element`` holds: the storage type of quantized elements."""
    if isinstance(element, UniformQuantType):
        return element.storage
    if isinstance(element, IndexType):
        return INDEX_STORAGE
    return element


_FLOAT_FORMATS = {"f16": "e", "f32": "f", "f64": "d"}


def float_from_bits(element: FloatType, bits: int) -> float | None:
    """The value of a float bit pattern (hex literal) of type ``element``; None if the format is not supported."""
    if bits >> element.width:
        return None
    if element.name == "bf16":
        return struct.unpack("<f", struct.pack("<I", bits << 16))[0]
    fmt = _FLOAT_FORMATS.get(element.name)
    if fmt is None:
        return None
    return struct.unpack("<" + fmt, bits.to_bytes(element.width // 8, "little"))[0]


def element_bytes(element: Type) -> int | None:
    """Bytes per element in a dense hex blob, or None where the layout is not supported (i1, f8, ...)."""
    element = storage_type(element)
    if isinstance(element, IntegerType):
        return None if element.width == 1 else (element.width + 7) // 8
    if isinstance(element, FloatType):
        return element.width // 8 if element.name in _FLOAT_FORMATS or element.name == "bf16" else None
    if isinstance(element, ComplexType):
        part = element_bytes(element.element)
        return None if part is None else 2 * part
    return None


def decode_elements(element: Type, data: bytes) -> list[int | float | complex]:
    """Decode a little-endian buffer of whole elements (``element_bytes(element)`` must not be None)."""
    element = storage_type(element)
    if isinstance(element, ComplexType):
        parts = decode_elements(element.element, data)
        return [complex(re, im) for re, im in zip(parts[0::2], parts[1::2], strict=True)]
    if isinstance(element, FloatType):
        if element.name == "bf16":
            halves = struct.unpack(f"<{len(data) // 2}H", data)
            return list(struct.unpack(f"<{len(halves)}f", struct.pack(f"<{len(halves)}I", *(h << 16 for h in halves))))
        return list(struct.unpack(f"<{len(data) // (element.width // 8)}{_FLOAT_FORMATS[element.name]}", data))
    assert isinstance(element, IntegerType)
    size = (element.width + 7) // 8
    mask = (1 << element.width) - 1
    sign = 0 if element.unsigned else 1 << (element.width - 1)
    values = []
    for offset in range(0, len(data), size):
        raw = int.from_bytes(data[offset:offset + size], "little") & mask
        values.append(raw - (raw & sign) * 2)
    return values
