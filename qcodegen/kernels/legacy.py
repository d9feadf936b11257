"""TRANSITIONAL (issue 15 stage A): the adapter that keeps the kernel families not yet migrated to a choice module
(x86 avx2/avxvnni/avx512vnni, aarch64 neon/dotprod, the shared vector/ skeleton from those) working as
before. Their templates (templates/<isa>/_dot.c.j2) still choose their kernels and call `relayout(operand, kind,
rows, ...)` (Relayout below) to re-lay weights while they render; `finish` then reads the rendered step bodies for
the constant operands no step reads (passed as NULL) and keeps only the arrays some C names, so that the plan, and
through it the weights file and the reports, hold what was written. A family leaves this module when it gets a
choice module (docs/targets.md "Adding a target"); when none is left, this module and the `relayout` argument of
the templates go."""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import pkgutil
import re
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from ..ir.schedule import Buffer, StepIO
from . import layouts
from .names import ArrayNames, c_identifier
from .record import NUMPY_OF, ConstArray, KernelChoice, KernelPlan, const_array


def _relayouts() -> dict[str, tuple[str, Callable[..., np.ndarray]]]:
    """Re-layout kind -> (C type, function(values, rows, *extra)): `row_sums`, and the LEGACY_RELAYOUTS of every
    family's layouts module (qcodegen/kernels/<family>/layouts.py), so that a family migrating off this adapter
    only edits its own files."""
    found: dict[str, tuple[str, Callable[..., np.ndarray]]] = {"row_sums": ("int32_t", layouts.row_sums)}
    for family in pkgutil.iter_modules([str(Path(__file__).parent)]):
        if family.ispkg:
            module = importlib.import_module(f"{__package__}.{family.name}.layouts")
            found.update(getattr(module, "LEGACY_RELAYOUTS", {}))
    return found


RELAYOUTS = _relayouts()


def chooser(target) -> Callable[[StepIO, int, ArrayNames, str], KernelChoice]:
    """The choice of every step of a legacy target: whatever its template folders' hooks render."""
    folders = ",".join(t for t in target.templates if t != "generic")
    choice = KernelChoice(f"templates:{folders}", f"chosen while rendering by the hooks of templates/{folders} "
                          "(family not yet migrated to qcodegen/kernels)", form="legacy")
    return lambda io, index, names, layout: choice


class Relayout:
    """The legacy templates' `relayout(operand, kind, rows, *extra)`: the name of the constant array of `operand`'s
    values re-laid by RELAYOUTS[kind] (made once); `relayout.array(label, ctype, values)`: a kernel's own constant
    array. `operand` is a template Operand (its `buffer`); extra: more inputs of the kind's function (constant
    Operands, passed as their values; ints; lists of ints, named in the array's name by a digest)."""

    def __init__(self, names: ArrayNames) -> None:
        self.names = names
        self.arrays: dict[str, ConstArray] = {}
        self.step = -1  # the step being rendered (set by the renderer)
        self.made: dict[int, dict[str, ConstArray]] = {}  # step -> the arrays it asked for

    def _made(self, name: str, make: Callable[[], ConstArray]) -> str:
        if name not in self.arrays:
            self.arrays[name] = make()
        self.made.setdefault(self.step, {})[name] = self.arrays[name]
        return name

    def array(self, label: str, ctype: str, values: Sequence[int]) -> str:
        name = f"{self.names.prefix}_c_{c_identifier(label)}"
        return self._made(name, lambda: const_array(name, np.asarray(values, np.int64).astype(NUMPY_OF[ctype]),
                                                    ctype))

    def __call__(self, operand, kind: str, rows: int, *extra) -> str:
        tags = [e.buffer.name if hasattr(e, "buffer") else
                hashlib.sha1(repr([int(v) for v in e]).encode()).hexdigest()[:8] if isinstance(e, list) else str(int(e))
                for e in extra]
        name = c_identifier("_".join([self.names.relaid(operand.buffer.name, kind), *tags]))
        ctype, fn = RELAYOUTS[kind]
        args = [e.buffer.data if hasattr(e, "buffer") else list(e) if isinstance(e, list) else int(e) for e in extra]
        return self._made(name, lambda: const_array(name, fn(operand.buffer.data, rows, *args).astype(NUMPY_OF[ctype]),
                                                    ctype))


_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")


def unread_operands(body: str, ins: list[Buffer], names: list[str]) -> frozenset[int]:
    """Positions of the constant operands (C parameter names `names`) that the step body does not read other than
    in `(void)name;`."""
    return frozenset(i for i, (b, n) in enumerate(zip(ins, names, strict=True)) if b.kind == "const" and
                     re.search(rf"\b{n}\b", re.sub(rf"\(void\)\s*{n}\s*;", "", body)) is None)


def voided(body: str) -> set[str]:
    return set(re.findall(r"\(void\)\s*(\w+)\s*;", body))


def finish(plan: KernelPlan, unread: dict[int, frozenset[int]], relayout: Relayout) -> KernelPlan:
    """The plan of what was rendered: each step's unread operands and the arrays it asked `relayout` for (then
    kernels.with_arrays with keep=named(code) keeps the arrays the C names)."""
    steps = [dataclasses.replace(s, choice=dataclasses.replace(s.choice, unread=unread[s.index],
                                                               arrays=relayout.made.get(s.index, {})))
             for s in plan.steps]
    return dataclasses.replace(plan, steps=steps)


def named(code: str) -> set[str]:
    """The identifiers of C code (the step bodies and the calls)."""
    return set(_IDENTIFIER.findall(code))
