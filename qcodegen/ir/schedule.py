"""The Schedule: ordered integer-primitive steps over named buffers. Shared by the numpy reference,
the code generator and the reports."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .dtypes import DType
from .quant import QuantType
from .state import StateVar

# STATE: a value kept across invocations (qcodegen/ir/state.py), read by steps like an input, in its own memory
INPUT, OUTPUT, CONST, TEMP, STATE = "input", "output", "const", "temp", "state"


@dataclass
class Buffer:
    name: str
    shape: tuple[int, ...]
    dtype: DType
    kind: str = TEMP
    data: np.ndarray | None = None  # constants only: unpacked values in dtype.numpy
    quant: QuantType | None = None  # for reports and the I/O macros
    offset: int | None = None  # arena offset (temps only), set by the memory planner
    live: tuple[int, int] | None = None  # arena temps: first and last position in execution order (memory planner)
    home: str | None = None  # temps stored in a state buffer's memory (its next value), set by the memory planner
    value_range: tuple[int, int] | None = None  # set by range analysis (integer buffers)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        """Bytes in memory: arena bytes for temps, flash bytes (packed for 4-bit) for constants."""
        if self.kind == CONST and self.dtype.is_packed:
            return (self.size + 1) // 2
        return self.size * self.dtype.container_bytes


@dataclass(frozen=True)
class Widening:
    """A planner decision of range analysis: the bounds of the step's inputs do not prove that its arithmetic
    stays in its integer type (an int32 or i48 accumulator or result, or a RESCALE value REQUIRE), so the C
    computes the step in int64 and saturates what it stores to the output type. The stored values equal TOSA's
    wherever TOSA defines a result; an actual overflow is a TOSA REQUIRE violation (unpredictable), which the
    numpy reference reports on the data that causes it."""

    reason: str  # what could not be proven, e.g. "ADD: inputs in [..] and [..] give results in [..]"
    bound: tuple[int, int]  # the proven bound of the exact value (before saturation)


MEMORY_POLICIES = ("speed", "balanced", "min")


@dataclass(frozen=True)
class MemoryGoal:
    """What the memory planner aims at (docs/semantics.md §10.2). `policy`: "speed" (no patch-based execution),
    "balanced" (the smallest arena whose estimated extra instructions stay within a few percent), "min" (the
    smallest arena); `arena_limit`: instead, the cheapest plan whose arena fits that many bytes. `stage`: run
    exactly this patch configuration, (steps of the chain, output rows per band), for measurements."""

    policy: str = "balanced"
    arena_limit: int | None = None
    stage: tuple[int, int] | None = None


@dataclass(frozen=True)
class Patching:
    """A planner decision (qcodegen/plan/patches.py): the leading `steps` of a chain of window and row-wise steps
    run band by band, `rows` rows of `output` at a time; each band computes only rows no earlier band computed,
    the rows a window still needs from the band before (its halo) are carried over."""

    sources: tuple[str, ...]  # the source ops of the streamed steps, in order
    steps: int  # primitive steps streamed
    output: str  # the stage's output buffer, assembled band by band
    rows: int  # rows of `output` per band
    bands: int
    recomputed_macs: int  # MACs computed more than once (halos are carried, not recomputed)
    copied_bytes: int  # bytes the band windows and carried halos copy (what views do not cover)
    extra_steps: int  # steps the generated code runs beyond the layer-wise schedule's
    estimated_overhead: float  # extra instructions of the cost model, as a fraction of the layer-wise plan's


@dataclass
class Step:
    op: str  # primitive name, e.g. "CONV2D"
    inputs: list[str]
    outputs: list[str]
    attrs: dict[str, Any] = field(default_factory=dict)
    source: str = ""  # which source op this step implements (for reports and mismatch messages)
    acc_bound: tuple[int, int] | None = None  # set by range analysis for reductions
    widened: Widening | None = None  # set by range analysis where int32/i48 arithmetic is not proven


@dataclass(frozen=True)
class Exactness:
    """A planner decision: how one source op's integer form relates to the source format's definition, and how
    that was established (e.g. every 8-bit operand pair enumerated against the float definition)."""

    source: str  # the source op (its label)
    op: str  # the source op's kind, e.g. "stablehlo.add"
    types: str  # operand and result types
    form: str  # the integer form chosen
    method: str  # "enumeration", "sample", "construction" or "bound"
    cases: int  # operand combinations checked (0: none, by construction or by a bound)
    off: int  # of those, the combinations whose result differs from the definition
    ties: int  # of `off`, the combinations where the definition's own float rounding straddles a rounding boundary
    detail: str = ""  # why: the parameters chosen, the bound, the alternative not taken

    @property
    def exact(self) -> bool:
        return self.off == 0

    def describe(self) -> str:
        head = f"{self.source}: {self.op.split('.', 1)[-1]} {self.types} -> {self.form}"
        if self.method in ("enumeration", "sample"):
            what = "every pair" if self.method == "enumeration" else "a seeded sample"
            verdict = (f"exact on {what} ({self.cases:,})" if self.exact else
                       f"{self.off:,} of {self.cases:,} pairs ({what}) differ, {self.ties:,} of them f32 ties")
        else:
            verdict = "exact by construction" if self.method == "construction" else "bounded"
        return f"{head}: {verdict}" + (f"; {self.detail}" if self.detail else "")


@dataclass
class StepIO:
    """A step together with its operand buffers: what primitives see."""

    step: Step
    ins: list[Buffer]
    outs: list[Buffer]

    @property
    def attrs(self) -> dict[str, Any]:
        return self.step.attrs


@dataclass
class Schedule:
    name: str
    buffers: dict[str, Buffer] = field(default_factory=dict)
    steps: list[Step] = field(default_factory=list)
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    arena_size: int = 0
    arena_lower_bound: int = 0
    notes: list[str] = field(default_factory=list)  # planner decisions worth reporting
    source_format: str = ""  # the front end's format ("tflite", "stablehlo", ...; "" for JSON/builder graphs)
    exactness: list[Exactness] = field(default_factory=list)  # per source op: its form against the definition
    # fusion (qcodegen/plan/fuse.py): index of the last step of a group -> one fused step computing the group
    fused: dict[int, Step] = field(default_factory=dict)
    state: list[StateVar] = field(default_factory=list)  # in the order of the generated state struct
    memory_goal: MemoryGoal = field(default_factory=MemoryGoal)
    # the live-set bound of the layer-wise schedule (every step's whole operands live at once), before patching
    layer_bound: int = 0
    patching: Patching | None = None

    def live_out(self) -> set[str]:
        """Buffers whose values outlive the run: the outputs and the next values of the state (never fused away)."""
        return set(self.outputs) | {v.next for v in self.state}

    def io(self, step: Step) -> StepIO:
        return StepIO(step, [self.buffers[n] for n in step.inputs], [self.buffers[n] for n in step.outputs])

    def add_buffer(self, buf: Buffer) -> Buffer:
        if buf.name in self.buffers:
            raise ValueError(f"buffer {buf.name!r} already exists")
        self.buffers[buf.name] = buf
        return buf

    def fresh_name(self, base: str) -> str:
        name, i = base, 1
        while name in self.buffers:
            name = f"{base}_{i}"
            i += 1
        return name

    def consumers(self, name: str) -> list[int]:
        return [i for i, s in enumerate(self.steps) if name in s.inputs]

    def producer(self, name: str) -> int | None:
        for i, s in enumerate(self.steps):
            if name in s.outputs:
                return i
        return None
