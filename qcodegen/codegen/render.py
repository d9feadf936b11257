"""Render a Schedule to a self-contained C99 folder: <name>.h, <name>.c, <name>_weights.c, qc_runtime.h,
and with the harness, main.c and a Makefile."""

from __future__ import annotations

import functools
import hashlib
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import jinja2
import numpy as np

from .. import primitives
from ..errors import QcError
from ..ir.dtypes import DType
from ..ir.schedule import CONST, INPUT, OUTPUT, STATE, TEMP, Buffer, Schedule
from ..plan.fuse import execution_order
from ..resources import data_path
from ..semantics.edge import edge_quantization
from .relayout import FAST_ONLY, RELAYOUTS, WEIGHT_LAYOUTS
from .state import StateLayout, state_layout
from .targets import Target

_C_KEYWORDS = {"auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else",
               "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long", "register",
               "restrict", "return", "short", "signed", "sizeof", "static", "struct", "switch", "typedef",
               "union", "unsigned", "void", "volatile", "while", "main"}


def c_identifier(text: str) -> str:
    ident = re.sub(r"[^0-9A-Za-z_]", "_", text).strip("_") or "model"
    if ident[0].isdigit():
        ident = "m_" + ident
    if ident in _C_KEYWORDS:
        ident += "_"
    return ident


@dataclass
class Operand:
    """A step operand as the templates see it."""

    name: str  # C parameter name inside the step function: in0, out0
    buffer: Buffer

    @property
    def dtype(self) -> DType:
        return self.buffer.dtype

    @property
    def shape(self) -> tuple[int, ...]:
        return self.buffer.shape

    @property
    def size(self) -> int:
        return self.buffer.size

    @property
    def packed(self) -> bool:
        return self.buffer.kind == CONST and self.buffer.dtype.is_packed

    @property
    def ctype(self) -> str:
        return "uint8_t" if self.packed else self.buffer.dtype.ctype

    @property
    def strides(self) -> list[int]:
        strides, acc = [], 1
        for d in reversed(self.shape):
            strides.append(acc)
            acc *= d
        return list(reversed(strides))

    @property
    def abs_max(self) -> int | None:
        """The largest magnitude of a constant's values (a Python int: no wrap-around), or None if not constant."""
        data = self.buffer.data
        return None if data is None else int(np.max(np.abs(np.asarray(data, np.int64)), initial=0))

    def load(self, index: str) -> str:
        """C expression reading element `index` (as int32_t for packed 4-bit data)."""
        if self.packed:
            fn = "qc_i4_get" if self.dtype.signed else "qc_u4_get"
            return f"{fn}({self.name}, {index})"
        return f"{self.name}[{index}]"


@dataclass
class ConstArray:
    name: str
    ctype: str
    values: np.ndarray  # flat, already packed for 4-bit data

    def literal(self) -> str:
        flat = self.values.reshape(-1)
        if flat.dtype.kind == "f":
            items = [_float_literal(v) for v in flat.astype(np.float32)]
        else:
            items = [_int_literal(int(v), self.ctype) for v in flat]
        if not items:
            items = ["0"]
        lines = [", ".join(items[i:i + 16]) for i in range(0, len(items), 16)]
        return "{\n  " + ",\n  ".join(lines) + "\n}"


def _int_literal(v: int, ctype: str) -> str:
    if ctype in ("int32_t",) and v == -(1 << 31):
        return "(-2147483647 - 1)"
    if ctype in ("int64_t",):
        return f"INT64_C({v})" if v != -(1 << 63) else "INT64_MIN"
    return str(v)


def _float_literal(v: np.float32) -> str:
    if np.isnan(v):
        return "(0.0f/0.0f)"
    if np.isinf(v):
        return "(1.0f/0.0f)" if v > 0 else "(-1.0f/0.0f)"
    if v == 0:
        return "-0.0f" if np.signbit(v) else "0.0f"
    return f"{float(v).hex()}f"


def _float_decimal(v: float) -> str:
    """A readable C float literal that reads back as the float32 value of `v` (9 significant digits)."""
    text = f"{float(np.float32(v)):.9g}"
    return (text if any(c in text for c in ".en") else text + ".0") + "f"


def pack4(values: np.ndarray) -> np.ndarray:
    """Pack 4-bit values two per byte, low nibble first (the harness and constant layout)."""
    flat = values.reshape(-1).astype(np.int64) & 0xF
    if flat.size % 2:
        flat = np.append(flat, 0)
    return (flat[0::2] | (flat[1::2] << 4)).astype(np.uint8)


@dataclass
class GeneratedModel:
    name: str
    outdir: Path
    files: list[Path]
    inputs: list[Buffer]
    outputs: list[Buffer]
    arena_size: int
    step_functions: list[str] = field(default_factory=list)
    state: StateLayout | None = None  # streaming models: the <name>_state_t struct

    def prototype(self) -> str:
        """The C prototype of <name>_run."""
        params = [f"const {b.dtype.ctype} *" for b in self.inputs]
        params += [f"{b.dtype.ctype} *" for b in self.outputs]
        params += [f"{self.name}_state_t *"] if self.state is not None else []
        return f"int {self.name}_run({', '.join(params + ['void *'])});"

    def init_prototype(self) -> str | None:
        """The C prototype of <name>_init (streaming models)."""
        return None if self.state is None else f"void {self.name}_init({self.name}_state_t *);"

    def cdef(self) -> str:
        """The declarations a binding (cffi) needs: the state struct as an opaque type, the functions."""
        if self.state is None:
            return self.prototype()
        return f"typedef struct {self.name}_state {self.name}_state_t;\n{self.prototype()}\n{self.init_prototype()}"


_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
_VOIDED = re.compile(r"\(void\)\s*(\w+)\s*;")


def _reads(body: str, name: str) -> bool:
    """Whether the C of a step body uses the parameter `name` other than in `(void)name;`."""
    return re.search(rf"\b{name}\b", re.sub(rf"\(void\)\s*{name}\s*;", "", body)) is not None


class _Relayout:
    """The step templates' `relayout(operand, kind, rows)`: the name of the constant array of `operand`'s values
    re-laid by RELAYOUTS[kind] (made once, added to the weights); `relayout.allows(kind)`: whether the target's
    weight layout permits that kind (FAST_ONLY kinds need "fast"); `relayout.array(label, ctype, values)`: a
    kernel's own constant array."""

    def __init__(self, prefix: str, const_arrays: list[ConstArray], layout: str) -> None:
        if layout not in WEIGHT_LAYOUTS:
            raise QcError(f"unknown weight layout {layout!r} (known: {', '.join(WEIGHT_LAYOUTS)})")
        self.prefix, self.const_arrays, self.layout = prefix, const_arrays, layout
        self.made: dict[tuple[str, str, int], str] = {}

    def allows(self, kind: str) -> bool:
        return kind not in FAST_ONLY or self.layout == "fast"

    def array(self, label: str, ctype: str, values: list[int]) -> str:
        """The name of a constant array of `values` made for a kernel (e.g. its requantization parameters in
        the order it reads them), added to the weights once per label."""
        key = ("array", label, 0)
        if key not in self.made:
            self.made[key] = f"{self.prefix}_c_{c_identifier(label)}"
            self.const_arrays.append(ConstArray(self.made[key], ctype, np.asarray(values, np.int64)))
        return self.made[key]

    def __call__(self, operand: Operand, kind: str, rows: int, *extra: Operand | int | list[int]) -> str:
        """`extra`: more inputs of the kind's function (constant Operands, passed as their values; ints; lists of
        ints, named in the array's name by a digest)."""
        if not self.allows(kind):
            raise QcError(f"internal: re-layout {kind} used with weight layout {self.layout!r}")
        tags = [e.buffer.name if isinstance(e, Operand) else
                hashlib.sha1(repr([int(v) for v in e]).encode()).hexdigest()[:8] if isinstance(e, list) else str(int(e))
                for e in extra]
        key = (operand.buffer.name, kind, rows, *tags)
        if key not in self.made:
            ctype, fn = RELAYOUTS[kind]
            self.made[key] = c_identifier("_".join([f"{self.prefix}_c_{operand.buffer.name}_{kind}", *tags]))
            args = [e.buffer.data if isinstance(e, Operand) else list(e) if isinstance(e, list) else int(e)
                    for e in extra]
            self.const_arrays.append(ConstArray(self.made[key], ctype, fn(operand.buffer.data, rows, *args)))
        return self.made[key]


def _environment(target: Target) -> jinja2.Environment:
    # the templates root last: an override may import another folder's file by path ("avx2/_dot.c.j2")
    return _environment_for(tuple(str(p) for p in target.template_dirs()) + (str(data_path("templates")),))


@functools.lru_cache(maxsize=16)
def _environment_for(template_dirs: tuple[str, ...]) -> jinja2.Environment:
    """One Jinja environment (and its compiled-template cache) per template search path."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(list(template_dirs)),
        undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
    )
    env.filters["cint"] = lambda v: _int_literal(int(v), "int64_t" if abs(int(v)) >= 1 << 31 else "int")
    env.filters["f32"] = lambda v: _float_literal(np.float32(v))
    env.filters["f32_decimal"] = _float_decimal
    return env


def _harness_files(env: jinja2.Environment, target: Target, ctx: dict, outdir: Path) -> list[Path]:
    """The target's extra harness files (start-up code, linker script, ...): `<file>.j2` rendered from the
    target's template path, or else `<file>` copied from runtime/ (a path under it: into the folder by its name)."""
    written = []
    for fname in target.extra.get("harness_files", ()):
        path = outdir / Path(fname).name
        try:
            path.write_text(env.get_template(fname + ".j2").render(**ctx))
        except jinja2.TemplateNotFound as exc:
            if exc.name != fname + ".j2":
                raise
            shutil.copyfile(data_path("runtime") / fname, path)
        written.append(path)
    return written


def generate(schedule: Schedule, outdir: Path, target: Target, name: str | None = None,
             harness: bool = False, profiling: bool = False) -> GeneratedModel:
    """Write the C folder. `profiling`: every step function stays a function (noinline), so that the instructions
    of each step can be counted at the return sites of its call (qcodegen/verify/profile.py)."""
    name = c_identifier(name or schedule.name)
    prefix = name
    outdir.mkdir(parents=True, exist_ok=True)
    env = _environment(target)
    bufs = schedule.buffers
    produced = {n for s in schedule.steps for n in s.outputs}
    for out in schedule.outputs:
        if out not in produced:
            raise QcError(f"output {out!r} is not computed by any step")

    const_arrays: list[ConstArray] = []
    c_names: dict[str, str] = {}
    for buf in bufs.values():
        if buf.kind == CONST:
            arr_name = f"{prefix}_c_{c_identifier(buf.name)}"
            data = pack4(buf.data) if buf.dtype.is_packed else buf.data
            const_arrays.append(ConstArray(arr_name, "uint8_t" if buf.dtype.is_packed else buf.dtype.ctype,
                                           np.asarray(data)))
            c_names[buf.name] = arr_name

    api_in = [bufs[n] for n in schedule.inputs]
    api_out = [bufs[n] for n in schedule.outputs]
    for i, b in enumerate(api_in):
        c_names[b.name] = f"input{i}"
    for i, b in enumerate(api_out):
        c_names.setdefault(b.name, f"output{i}")

    layout = state_layout(schedule, c_identifier) if schedule.state else None
    members = {f.buffer.name: f.member for f in layout.fields} if layout else {}

    def pointer(buf: Buffer) -> str:
        if buf.kind == STATE:
            return f"state->{members[buf.name]}"
        if buf.kind == TEMP and buf.home is not None:  # a state's next value, computed in the state's memory
            return f"({buf.dtype.ctype} *)(void *)state->{members[buf.home]}"
        if buf.kind == TEMP:
            return f"({buf.dtype.ctype} *)(void *)(arena_bytes + {buf.offset})"
        return c_names[buf.name]

    relayout = _Relayout(prefix, const_arrays, target.extra.get("weight_layout", "compact"))

    steps = []
    for k, step in execution_order(schedule):  # fused groups (qcodegen/plan/fuse.py) as one step
        prim = primitives.get(step.op)
        io = schedule.io(step)
        consts = {}
        for key, values in prim.constants(io).items():
            arr_name = f"{prefix}_s{k}_{key}"
            ctype = {np.dtype(np.int8): "int8_t", np.dtype(np.int16): "int16_t", np.dtype(np.int32): "int32_t",
                     np.dtype(np.int64): "int64_t", np.dtype(np.uint8): "uint8_t", np.dtype(np.uint16): "uint16_t",
                     np.dtype(np.float32): "float"}[values.dtype]
            const_arrays.append(ConstArray(arr_name, ctype, values))
            consts[key] = arr_name
        ins = [Operand(f"in{i}", b) for i, b in enumerate(io.ins)]
        outs = [Operand(f"out{i}", b) for i, b in enumerate(io.outs)]
        body = env.get_template(prim.template).render(step=step, ins=ins, outs=outs, consts=consts,
                                                     ctx=prim.template_context(io), index=k, relayout=relayout)
        params = [f"const {o.ctype} *{o.name}" for o in ins] + [f"{o.ctype} *{o.name}" for o in outs]
        # a constant the body does not read (a re-laid copy is read instead) is passed as NULL, so that its array
        # is left out of the weights below
        unread = {o.name for o, b in zip(ins, io.ins, strict=True) if b.kind == CONST and not _reads(body, o.name)}
        args = ["NULL" if o.name in unread else pointer(b) for o, b in zip(ins, io.ins, strict=True)]
        body = "".join(f"(void){n};\n" for n in sorted(unread - set(_VOIDED.findall(body)))) + body
        steps.append(dict(
            index=k, step=step, fn=f"{prefix}_step{k}", params=", ".join(params), body=body.rstrip(),
            args=", ".join(args + [pointer(b) for b in io.outs]),
            outputs=[(pointer(b), b.size * b.dtype.container_bytes) for b in io.outs],
        ))

    state_ctx = _state_context(schedule, layout, prefix, pointer, const_arrays) if layout else None
    used = set(_IDENTIFIER.findall("\n".join(f"{s['body']}\n{s['args']}" for s in steps)))
    if state_ctx:
        used |= {f["array"] for f in state_ctx["init"] if f["array"]}
        used |= set(_IDENTIFIER.findall(" ".join(c["source"] for c in state_ctx["copies"])))
    const_arrays[:] = [c for c in const_arrays if c.name in used]
    consumed = {n for s in schedule.steps for n in s.inputs}
    unused_inputs = [i for i, b in enumerate(api_in) if b.name not in consumed]
    edges = {b.name: edge_quantization(b.quant, schedule.source_format) for b in api_in + api_out}
    ctx = dict(name=name, NAME=name.upper(), schedule=schedule, steps=steps, inputs=api_in, outputs=api_out,
               unused_inputs=unused_inputs, edges=edges, state=state_ctx,
               consts=const_arrays, arena_size=schedule.arena_size, c_names=c_names, target=target,
               profiling=profiling)
    files = {
        f"{name}.h": "model.h.j2",
        f"{name}.c": "model.c.j2",
        f"{name}_weights.c": "weights.c.j2",
    }
    if harness:
        files["main.c"] = "main.c.j2"
        files["Makefile"] = "Makefile.j2"
    written = []
    for fname, tmpl in files.items():
        path = outdir / fname
        path.write_text(env.get_template(tmpl).render(**ctx))
        written.append(path)
    runtime = data_path("runtime") / "qc_runtime.h"
    shutil.copyfile(runtime, outdir / runtime.name)
    written.append(outdir / runtime.name)
    if harness:
        written += _harness_files(env, target, ctx, outdir)
    return GeneratedModel(name, outdir, written, api_in, api_out, schedule.arena_size,
                          [s["fn"] for s in steps], layout)


def _state_context(schedule: Schedule, layout: StateLayout, prefix: str, pointer: Callable[[Buffer], str],
                   const_arrays: list[ConstArray]) -> dict:
    """What the templates need for the state struct: members, initial values (a fill value or a constant
    array added to the weights) and the next values to copy into the state at the end of a run."""
    init = []
    for f in layout.fields:
        array = None
        if f.fill is None:
            array = f"{prefix}_init_{f.member}"
            const_arrays.append(ConstArray(array, f.buffer.dtype.ctype, f.initial.reshape(-1)))
        init.append(dict(member=f.member, size=f.buffer.size, fill=f.fill, array=array))
    members = {f.buffer.name: f.member for f in layout.fields}
    copies = []
    for v in schedule.state:
        nxt = schedule.buffers[v.next]
        if v.next != v.name and nxt.home != v.name:
            copies.append(dict(member=members[v.name], source=pointer(nxt), size=nxt.size, ctype=nxt.dtype.ctype))
    return dict(fields=layout.fields, size=layout.size, pad=layout.pad, init=init, copies=copies)


__all__ = ["generate", "GeneratedModel", "c_identifier", "pack4", "INPUT", "OUTPUT"]
