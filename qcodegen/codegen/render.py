"""Render a Schedule to a self-contained C99 folder: <name>.h, <name>.c, <name>_weights.c, qc_runtime.h, the runtime
kernel files the model uses (qcodegen/kernels plan), and with the harness, main.c and a Makefile.

Rendering decides nothing: the kernel plan (qcodegen/kernels.plan_kernels) says which kernel each step runs and
which constant arrays exist; the templates turn each choice into C, and `<name>_weights.c` holds exactly the plan's
arrays."""

from __future__ import annotations

import dataclasses
import functools
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
from ..kernels import KernelPlan, pack4, plan_kernels
from ..kernels.conv import PATCH_LIMIT
from ..kernels.names import ArrayNames, c_identifier
from ..kernels.record import ConstArray, const_array, step_array
from ..plan.fuse import execution_order
from ..resources import data_path
from ..semantics.edge import edge_quantization
from .state import StateLayout, state_layout
from .targets import Target


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


def c_literal(array: ConstArray) -> str:
    """The C initializer of a constant array."""
    flat = array.values.reshape(-1)
    if flat.dtype.kind == "f":
        items = [_float_literal(v) for v in flat.astype(np.float32)]
    else:
        items = [_int_literal(int(v), array.ctype) for v in flat]
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
    plan: KernelPlan | None = None
    kernel_sources: list[Path] = field(default_factory=list)  # the runtime kernel .c files the model calls

    @property
    def own_sources(self) -> list[Path]:
        """<name>.c and <name>_weights.c."""
        return [self.outdir / f"{self.name}.c", self.outdir / f"{self.name}_weights.c"]

    @property
    def sources(self) -> list[Path]:
        """The C files of the model (its own, then the kernels'), without the harness."""
        return [*self.own_sources, *self.kernel_sources]

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


@dataclass
class RenderedModel:
    """The files of a generated model, not yet written: texts by file name, runtime files to copy (file name ->
    source path), and the plan they were rendered from."""

    name: str
    texts: dict[str, str]
    copies: dict[str, Path]
    plan: KernelPlan
    inputs: list[Buffer]
    outputs: list[Buffer]
    step_functions: list[str]
    state: StateLayout | None


def _environment(target: Target) -> jinja2.Environment:
    # the templates root last: an override may import another folder's file by path ("<isa>/_dot.c.j2")
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
    env.globals["conv_patch_limit"] = PATCH_LIMIT
    return env


def _harness_texts(env: jinja2.Environment, target: Target, ctx: dict) -> tuple[dict[str, str], dict[str, Path]]:
    """The target's extra harness files (start-up code, linker script, ...): `<file>.j2` rendered from the
    target's template path, or else `<file>` copied from runtime/ (a path under it: into the folder by its name)."""
    texts, copies = {}, {}
    for fname in target.extra.get("harness_files", ()):
        try:
            texts[Path(fname).name] = env.get_template(fname + ".j2").render(**ctx)
        except jinja2.TemplateNotFound as exc:
            if exc.name != fname + ".j2":
                raise
            copies[Path(fname).name] = data_path("runtime") / fname
    return texts, copies


def render_model(schedule: Schedule, target: Target, name: str | None = None, harness: bool = False,
                 profiling: bool = False) -> RenderedModel:
    """The model's files as texts, rendered from its kernel plan. `profiling`: every step function stays a function
    (noinline), so that the instructions of each step can be counted at the return sites of its call
    (qcodegen/verify/profile.py)."""
    name = c_identifier(name or schedule.name)
    env = _environment(target)
    bufs = schedule.buffers
    produced = {n for s in schedule.steps for n in s.outputs}
    for out in schedule.outputs:
        if out not in produced:
            raise QcError(f"output {out!r} is not computed by any step")
    plan = plan_kernels(schedule, target, name)
    names = ArrayNames(name)

    api_in = [bufs[n] for n in schedule.inputs]
    api_out = [bufs[n] for n in schedule.outputs]
    c_names = {b.name: names.const(b.name) for b in bufs.values() if b.kind == CONST}
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

    steps = []
    for sk, (k, step) in zip(plan.steps, execution_order(schedule), strict=True):
        prim = primitives.get(step.op)
        io = schedule.io(step)
        consts = {key: step_array(names, key, values).name for key, values in prim.constants(io).items()}
        ins = [Operand(f"in{i}", b) for i, b in enumerate(io.ins)]
        outs = [Operand(f"out{i}", b) for i, b in enumerate(io.outs)]
        context = dict(step=step, ins=ins, outs=outs, consts=consts, ctx=prim.template_context(io), index=k,
                       kernel=sk.choice)
        body = env.get_template(prim.template).render(**context)
        unread = sk.choice.unread
        voids = [ins[i].name for i in sorted(unread)]
        params = [f"const {o.ctype} *{o.name}" for o in ins] + [f"{o.ctype} *{o.name}" for o in outs]
        args = ["NULL" if i in unread else pointer(b) for i, b in enumerate(io.ins)]
        body = "".join(f"(void){n};\n" for n in voids) + body
        steps.append(dict(
            index=k, step=step, fn=f"{name}_step{k}", params=", ".join(params), body=body.rstrip(),
            args=", ".join(args + [pointer(b) for b in io.outs]), kernel=sk.choice,
            outputs=[(pointer(b), b.size * b.dtype.container_bytes) for b in io.outs],
        ))
    prelude = "".join(f'#include "{h}"\n' for h in plan.headers)
    attributes = plan.attributes
    state_ctx = None
    if layout:
        state_ctx, state_arrays = _state_context(schedule, layout, name, pointer)
        known = {a.name for a in plan.arrays}
        plan = dataclasses.replace(plan, arrays=plan.arrays + [a for a in state_arrays if a.name not in known])
    consumed = {n for s in schedule.steps for n in s.inputs}
    unused_inputs = [i for i, b in enumerate(api_in) if b.name not in consumed]
    edges = {b.name: edge_quantization(b.quant, schedule.source_format) for b in api_in + api_out}
    ctx = dict(name=name, NAME=name.upper(), schedule=schedule, steps=steps, inputs=api_in, outputs=api_out,
               unused_inputs=unused_inputs, edges=edges, state=state_ctx, consts=plan.arrays,
               literals={a.name: c_literal(a) for a in plan.arrays}, arena_size=schedule.arena_size,
               c_names=c_names, target=target, profiling=profiling, prelude=prelude, attributes=attributes,
               kernel_sources=[Path(f).name for f in plan.sources], kernel_headers=list(plan.headers))
    files = {f"{name}.h": "model.h.j2", f"{name}.c": "model.c.j2", f"{name}_weights.c": "weights.c.j2"}
    if harness:
        files["main.c"] = "main.c.j2"
        files["Makefile"] = "Makefile.j2"
    texts = {fname: env.get_template(tmpl).render(**ctx) for fname, tmpl in files.items()}
    copies = {"qc_runtime.h": data_path("runtime") / "qc_runtime.h"}
    copies.update({Path(f).name: data_path("runtime") / f for f in plan.files})
    if harness:
        extra_texts, extra_copies = _harness_texts(env, target, ctx)
        texts.update(extra_texts)
        copies.update(extra_copies)
    return RenderedModel(name, texts, copies, plan, api_in, api_out, [s["fn"] for s in steps], layout)


def _state_context(schedule: Schedule, layout: StateLayout, prefix: str, pointer: Callable[[Buffer], str]
                   ) -> tuple[dict, list[ConstArray]]:
    """What the templates need for the state struct: members, initial values (a fill value or a constant array
    of the weights) and the next values to copy into the state at the end of a run; and the constant arrays this
    reads besides the steps' (the initial values; a constant copied into a state)."""
    names = ArrayNames(prefix)
    init, arrays = [], []
    for f in layout.fields:
        array = None
        if f.fill is None:
            array = f"{prefix}_init_{f.member}"
            arrays.append(const_array(array, f.initial.reshape(-1).astype(f.buffer.dtype.numpy), f.buffer.dtype.ctype))
        init.append(dict(member=f.member, size=f.buffer.size, fill=f.fill, array=array))
    members = {f.buffer.name: f.member for f in layout.fields}
    copies = []
    for v in schedule.state:
        nxt = schedule.buffers[v.next]
        if v.next != v.name and nxt.home != v.name:
            copies.append(dict(member=members[v.name], source=pointer(nxt), size=nxt.size, ctype=nxt.dtype.ctype))
            if nxt.kind == CONST:
                arrays.append(const_array(names.const(nxt.name), np.asarray(nxt.data), nxt.dtype.ctype))
    return dict(fields=layout.fields, size=layout.size, pad=layout.pad, init=init, copies=copies), arrays


def generate(schedule: Schedule, outdir: Path, target: Target, name: str | None = None,
             harness: bool = False, profiling: bool = False) -> GeneratedModel:
    """Render the model and write its folder (several models may share one: the runtime files are the same);
    `profiling` as render_model."""
    rendered = render_model(schedule, target, name, harness, profiling)
    outdir.mkdir(parents=True, exist_ok=True)
    written = []
    for fname, text in rendered.texts.items():
        (outdir / fname).write_text(text)
        written.append(outdir / fname)
    for fname, source in rendered.copies.items():
        shutil.copyfile(source, outdir / fname)
        written.append(outdir / fname)
    kernels = [outdir / Path(f).name for f in rendered.plan.sources]
    return GeneratedModel(rendered.name, outdir, written, rendered.inputs, rendered.outputs, schedule.arena_size,
                          rendered.step_functions, rendered.state, rendered.plan, kernels)


__all__ = ["generate", "render_model", "GeneratedModel", "RenderedModel", "c_identifier", "pack4", "INPUT",
           "OUTPUT"]
