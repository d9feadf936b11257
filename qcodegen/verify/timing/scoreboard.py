"""An in-order issue scoreboard for the cores that overlap instructions (Cortex-M7 dual issue, Cortex-M55 MVE beats
and 16-bit dual issue): an instruction issues when the instruction stream allows (the cycle after the last one,
or beside it when the core pairs them), its source registers are ready and its pipeline is free."""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass, field
from typing import ClassVar

from .base import Core
from .disasm import Insn, is_store


@dataclass(frozen=True)
class Timing:
    """How one instruction uses the pipeline."""
    occupancy: int = 1                 # cycles it holds the issue stage (LDM: one per transfer)
    latency: int = 1                   # cycles from its issue until its results can be read
    unit: str = "alu"                  # the pipeline it needs ...
    busy: int = 1                      # ... for this many cycles (MVE on a dual-beat core: 2)
    early: tuple[str, ...] = ()        # registers it reads a cycle before issue (address generation, shifter)
    late: tuple[str, ...] = ()         # registers it reads a cycle after issue (store data, accumulator)
    base_latency: int = 1              # latency of the base register a load / store writes back
    forwards_to_stores: bool = False   # stores may read its results a cycle early
    single: bool = False               # issues alone (never paired)


@dataclass
class Scoreboard:
    free: int = 0                          # first cycle an instruction may issue in a new group
    group: int = -1                        # cycle of the last issue group
    opener: Insn | None = None             # the group's first instruction while its second slot is free
    ready: dict[str, int] = field(default_factory=dict)
    store_ready: dict[str, int] = field(default_factory=dict)
    units: dict[str, int] = field(default_factory=dict)

    def _operands_ready(self, insn: Insn, t: Timing, store: bool) -> int:
        cycle, written = 0, self.store_ready if store else self.ready
        for reg in insn.reads:
            if reg in written:  # (a register nothing in the stream wrote is ready)
                cycle = max(cycle, written[reg] + (reg in t.early) - (reg in t.late))
        return cycle

    def issue(self, insn: Insn, t: Timing, pairs: bool = False, store: bool = False) -> int:
        """Issue `insn`; `pairs`: the core lets it issue beside the open group's first instruction (the core's
        pairing rules account for the pipelines). `store`: it reads its data as a store (forwarding). Returns the
        cycles it adds to the stream (0 when it issues beside the previous instruction)."""
        ready = self._operands_ready(insn, t, store)
        if pairs and self.opener is not None and ready <= self.group:
            self.opener = None
            self._record(insn, t, self.group)
            return 0
        start = max(ready, self.units.get(t.unit, 0), self.free)
        before, self.free, self.group = self.free, start + t.occupancy, start
        self.opener = None if t.single or t.occupancy > 1 else insn
        self._record(insn, t, start)
        return self.free - before

    def _record(self, insn: Insn, t: Timing, start: int) -> None:
        self.units[t.unit] = start + t.busy
        base = insn.address[:1] if insn.address and insn.address[0] in insn.writes else ()
        for reg in insn.writes:
            latency = t.base_latency if reg in base else t.latency
            self.ready[reg] = start + max(latency, t.occupancy)
            self.store_ready[reg] = self.ready[reg] - (t.forwards_to_stores and reg not in base)


class ScoreboardCore(Core[Scoreboard]):
    """A core modelled by a Scoreboard: a subclass gives each instruction's Timing and the rule for issuing two
    instructions in one cycle."""

    stores_read_forwarded: ClassVar[bool] = False  # stores may read results forwarded to them (Timing)

    def fresh(self) -> Scoreboard:
        return Scoreboard()

    @abstractmethod
    def timing(self, insn: Insn) -> Timing:
        """How `insn` uses the pipeline."""

    @abstractmethod
    def pairs(self, first: Insn, second: Insn) -> bool:
        """Whether `second` may issue in the same cycle as `first`."""

    def issue(self, state: Scoreboard, insn: Insn) -> int:
        t = self.timing(insn)
        pairs = state.opener is not None and not t.single and self.pairs(state.opener, insn)
        return state.issue(insn, t, pairs, store=self.stores_read_forwarded and is_store(insn.op))
