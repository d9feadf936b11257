"""The generated state struct of a streaming model: one array member per state variable, largest elements first
(no padding between members), an explicit trailing pad so that sizeof equals <NAME>_STATE_SIZE on every ABI, the
initial values (<name>_init) and the copies of next values the memory planner left in the arena."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..ir.schedule import Buffer, Schedule


@dataclass
class StateField:
    member: str  # C member name
    buffer: Buffer  # the STATE buffer
    offset: int  # bytes from the start of the struct
    initial: np.ndarray

    @property
    def nbytes(self) -> int:
        return self.buffer.nbytes

    @property
    def fill(self) -> int | None:
        """The value every element starts with, or None when the values differ (copied from flash)."""
        flat = np.asarray(self.initial).reshape(-1)
        return int(flat[0]) if flat.size and bool(np.all(flat == flat[0])) else None


@dataclass
class StateLayout:
    fields: list[StateField]
    size: int  # sizeof the struct, trailing pad included
    pad: int  # bytes of the trailing pad member

    def decode(self, raw: bytes | np.ndarray) -> dict[str, np.ndarray]:
        """The state variables' values from the bytes of a state struct."""
        data = np.frombuffer(bytes(raw), np.uint8)
        return {f.buffer.name: data[f.offset:f.offset + f.nbytes].view(f.buffer.dtype.numpy.newbyteorder("<"))
                .astype(f.buffer.dtype.numpy).reshape(f.buffer.shape) for f in self.fields}


def state_layout(schedule: Schedule, identifier: Callable[[str], str]) -> StateLayout:
    """The struct of `schedule.state`; `identifier` sanitises a buffer name into a C identifier."""
    order = sorted(schedule.state, key=lambda v: -schedule.buffers[v.name].dtype.container_bytes)
    fields, offset, taken = [], 0, set()
    for v in order:
        buf = schedule.buffers[v.name]
        member = base = identifier(v.name)
        while member in taken or member == "reserved":
            member = f"{base}_{len(taken)}"
        taken.add(member)
        fields.append(StateField(member, buf, offset, np.asarray(v.initial)))
        offset += buf.nbytes
    align = max((f.buffer.dtype.container_bytes for f in fields), default=1)
    pad = -offset % align
    return StateLayout(fields, offset + pad, pad)
