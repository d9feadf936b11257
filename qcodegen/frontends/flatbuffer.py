"""Bounds-checked reading of flatbuffer tables, on top of the `flatbuffers` runtime package.

The runtime reads wherever an offset points, so a damaged file makes it fail with `struct.error`, `IndexError` or
`TypeError`, or read a wrong value from elsewhere in the buffer. `FlatTable` checks each table header, vtable,
field, offset, vector length and string against the size of the buffer before the runtime reads it, and raises
`FlatbufferError` (a GraphError) saying what is damaged and where; nothing outside the buffer is ever read.

Wire format (flatbuffers' documented binary layout): the buffer starts with the uoffset (u32) of the root table and
a 4-byte file identifier. A table starts with an soffset (i32) back to its vtable; the vtable holds its own size,
the table's inline size and one u16 offset per field slot (0: absent, the default applies). A field holding a
string, vector or table stores a u32 offset relative to the field's own position; a vector (and a string, which
also has a NUL after its bytes) starts with a u32 element count. All numbers are little-endian.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import GraphError, QcError, install_hint

try:
    from flatbuffers import encode
    from flatbuffers import number_types as N
    from flatbuffers.table import Table
except ImportError:  # checked when a file is read: the core imports without the extra
    encode = N = Table = None

_OFFSET = 4  # bytes of a uoffset / soffset / vector length


class FlatbufferError(GraphError):
    """The flatbuffer is damaged: an offset, length or table points outside the buffer or is malformed."""


def runtime_missing(extra: str) -> QcError | None:
    """The error to raise when the flatbuffers runtime is not installed (None if it is)."""
    if Table is None:
        return QcError(f"reading this format needs the flatbuffers runtime: {install_hint(extra)}")
    return None


class FlatTable:
    """One table of a flatbuffer, its header and vtable checked; fields are read by slot number (0-based)."""

    def __init__(self, buf: bytes, pos: int, what: str) -> None:
        self.buf, self.what = buf, what
        size = len(buf)
        self._require(0 <= pos <= size - _OFFSET, f"table at byte {pos} is outside the {size}-byte buffer")
        table = Table(buf, pos)
        vtable = pos - table.Get(N.SOffsetTFlags, pos)
        self._require(0 <= vtable <= size - 4, f"vtable at byte {vtable} is outside the buffer")
        vtable_size = table.Get(N.VOffsetTFlags, vtable)
        inline_size = table.Get(N.VOffsetTFlags, vtable + 2)
        self._require(vtable_size >= 4 and vtable_size % 2 == 0 and vtable + vtable_size <= size,
                      f"vtable at byte {vtable} has a bad size {vtable_size}")
        self._require(_OFFSET <= inline_size and pos + inline_size <= size,
                      f"table at byte {pos} has a bad size {inline_size}")
        self.table, self.slots, self.inline_size = table, (vtable_size - 4) // 2, inline_size

    def _require(self, condition: bool, message: str) -> None:
        if not condition:
            raise FlatbufferError(f"damaged flatbuffer: {self.what}: {message}")

    def _field(self, slot: int, width: int) -> int | None:
        """Position of field `slot` (`width` bytes inline), None when absent."""
        if slot >= self.slots:
            return None
        offset = self.table.Offset(4 + 2 * slot)
        if offset == 0:
            return None
        self._require(_OFFSET <= offset <= self.inline_size - width, f"field {slot} lies outside its table")
        return self.table.Pos + offset

    def _target(self, slot: int, kind: str) -> int | None:
        """Where the offset stored in field `slot` points (a string, vector or table), None when absent."""
        pos = self._field(slot, _OFFSET)
        if pos is None:
            return None
        target = pos + self.table.Get(N.UOffsetTFlags, pos)
        self._require(target <= len(self.buf) - _OFFSET, f"{kind} of field {slot} is outside the buffer")
        return target

    def _vector(self, slot: int, width: int) -> tuple[int, int]:
        """(position of the first element, element count) of vector field `slot`; (0, 0) when absent."""
        start = self._target(slot, "vector")
        if start is None:
            return 0, 0
        count = self.table.Get(N.UOffsetTFlags, start)
        self._require(count * width <= len(self.buf) - start - _OFFSET,
                      f"vector of field {slot} ({count} elements) runs past the end of the buffer")
        return start + _OFFSET, count

    def scalar(self, slot: int, flags: Any, default: Any = 0) -> Any:
        pos = self._field(slot, flags.bytewidth)
        return default if pos is None else self.table.Get(flags, pos)

    def numbers(self, slot: int, flags: Any) -> np.ndarray:
        """A vector of scalars as a read-only little-endian numpy view (empty when absent)."""
        start, count = self._vector(slot, flags.bytewidth)
        return encode.GetVectorAsNumpy(N.to_numpy_type(flags), self.buf, count, start)

    def string(self, slot: int) -> str:
        """A string field decoded as UTF-8 (undecodable bytes replaced); "" when absent."""
        target = self._target(slot, "string")
        return "" if target is None else self._string_at(target)

    def _string_at(self, target: int) -> str:
        length = self.table.Get(N.UOffsetTFlags, target)
        start = target + _OFFSET
        self._require(length <= len(self.buf) - start, f"string at byte {target} runs past the end of the buffer")
        return bytes(self.buf[start:start + length]).decode("utf-8", "replace")

    def _element_targets(self, slot: int, kind: str) -> list[int]:
        start, count = self._vector(slot, _OFFSET)
        targets = []
        for k in range(count):
            element = start + _OFFSET * k
            target = element + self.table.Get(N.UOffsetTFlags, element)
            self._require(target <= len(self.buf) - _OFFSET, f"{kind} {k} of field {slot} is outside the buffer")
            targets.append(target)
        return targets

    def strings(self, slot: int) -> list[str]:
        return [self._string_at(t) for t in self._element_targets(slot, "string")]

    def child(self, slot: int, what: str) -> FlatTable | None:
        target = self._target(slot, "table")
        return None if target is None else FlatTable(self.buf, target, what)

    def children(self, slot: int, what: str) -> list[FlatTable]:
        return [FlatTable(self.buf, t, f"{what} {k}") for k, t in enumerate(self._element_targets(slot, what))]


def root_table(buf: bytes, identifier: bytes, what: str) -> FlatTable:
    """The root table of a flatbuffer with file identifier `identifier`."""
    if len(buf) < 8 or buf[4:8] != identifier:
        raise FlatbufferError(f"not a {what} flatbuffer (file identifier {bytes(buf[4:8])!r}, expected "
                              f"{identifier!r})")
    return FlatTable(buf, Table(buf, 0).Get(N.UOffsetTFlags, 0), what)
