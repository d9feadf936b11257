"""The lowering driver and the helpers rules use to emit steps."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from ..errors import GraphError, QcError, UnsupportedError, in_context, shorten
from ..fixedpoint import Rounding, scale_to_multiplier_shift
from ..ir.dtypes import DType, dtype
from ..ir.graph import Graph, Op, Tensor
from ..ir.quant import QuantType
from ..ir.rescale import RescaleParams
from ..ir.schedule import CONST, INPUT, OUTPUT, STATE, TEMP, Buffer, Schedule, Step

Rule = Callable[["Lowerer", Op], None]
RULES: dict[str, Rule] = {}


def rule(*kinds: str) -> Callable[[Rule], Rule]:
    def register(fn: Rule) -> Rule:
        for kind in kinds:
            RULES[kind] = fn
        return fn
    return register


class Lowerer:
    """State while lowering one graph: the schedule under construction and the current op."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.schedule = Schedule(graph.name)
        self.op: Op | None = None
        self.attrs_read: set[str] = set()  # the attributes of the current op its rule asked for
        self.rounding = Rounding.parse(graph.options.get("rescale_rounding", "single_round"))
        for t in graph.tensors.values():
            if t.is_const:
                self.schedule.add_buffer(Buffer(t.name, t.shape, t.dtype, CONST, t.data, t.quant))
        for n in graph.inputs:
            t = graph.tensors[n]
            self.schedule.add_buffer(Buffer(n, t.shape, t.dtype, INPUT, quant=t.quant))
        self.schedule.inputs = list(graph.inputs)
        for v in graph.state:
            t = graph.tensors[v.name]
            self.schedule.add_buffer(Buffer(v.name, t.shape, t.dtype, STATE, quant=t.quant))

    # --- access to the source op -------------------------------------------------------------
    @property
    def label(self) -> str:
        assert self.op is not None
        return self.graph.op_label(self.op)

    def error(self, message: str) -> GraphError:
        return GraphError(f"{self.label}: {message}")

    def tensor_in(self, i: int) -> Tensor:
        assert self.op is not None
        if i >= len(self.op.inputs):
            raise self.error(f"expects at least {i + 1} inputs, got {len(self.op.inputs)}")
        return self.graph.tensors[self.op.inputs[i]]

    def tensor_out(self, i: int = 0) -> Tensor:
        assert self.op is not None
        if i >= len(self.op.outputs):
            raise self.error(f"expects at least {i + 1} outputs, got {len(self.op.outputs)}")
        return self.graph.tensors[self.op.outputs[i]]

    def attr(self, key: str, default: Any = ...) -> Any:
        assert self.op is not None
        self.attrs_read.add(key)
        if key in self.op.attrs:
            return self.op.attrs[key]
        if default is ...:
            raise self.error(f"missing attribute {key!r}")
        return default

    def quant_in(self, i: int, per_tensor: bool = True) -> QuantType:
        t = self.tensor_in(i)
        if t.quant is None:
            raise self.error(f"input {t.name!r} must be quantized")
        if per_tensor and t.quant.kind != "per_tensor":
            raise self.error(f"input {t.name!r} must be quantized per tensor, got {t.quant.kind}")
        return t.quant

    def quant_out(self, i: int = 0, per_tensor: bool = True) -> QuantType:
        t = self.tensor_out(i)
        if t.quant is None:
            raise self.error(f"output {t.name!r} must be quantized")
        if per_tensor and t.quant.kind != "per_tensor":
            raise self.error(f"output {t.name!r} must be quantized per tensor, got {t.quant.kind}")
        return t.quant

    # --- emitting ---------------------------------------------------------------------------------
    def buffer(self, name: str) -> Buffer:
        """The schedule buffer of a graph tensor, created on first use as the op's output."""
        if name not in self.schedule.buffers:
            t = self.graph.tensors[name]
            self.schedule.add_buffer(Buffer(name, t.shape, t.dtype, TEMP, quant=t.quant))
        return self.schedule.buffers[name]

    def temp(self, base: str, shape: tuple[int, ...], dt: str | DType) -> str:
        name = self.schedule.fresh_name(base)
        self.schedule.add_buffer(Buffer(name, tuple(shape), dtype(dt), TEMP))
        return name

    def const(self, base: str, values: np.ndarray, dt: str | DType) -> str:
        d = dtype(dt)
        values = np.asarray(values)
        if not d.is_float and values.size and (values.min() < d.min or values.max() > d.max):
            raise self.error(f"constant {base!r} does not fit {d}")
        name = self.schedule.fresh_name(base)
        self.schedule.add_buffer(Buffer(name, tuple(values.shape), d, CONST, values.astype(d.numpy)))
        return name

    def emit(self, prim: str, inputs: list[str], outputs: list[str], **attrs: Any) -> Step:
        for n in inputs + outputs:
            if n not in self.schedule.buffers:
                self.buffer(n)
        step = Step(prim, list(inputs), list(outputs), attrs, source=self.label)
        self.schedule.steps.append(step)
        return step

    def rescale(self, src: str, dst: str, scale: float | np.ndarray, input_zp: int = 0, output_zp: int = 0,
                axis: int = -1, rounding: Rounding | None = None, scale32: bool = True, **extra: Any) -> Step:
        """Emit a RESCALE by a real scale (scalar, or one per channel along `axis`).

        scale32=False (needed for i48 inputs) uses 16-bit multipliers and TOSA's only 16-bit rounding,
        SINGLE_ROUND, whatever the graph's rescale_rounding option says."""
        scales = np.atleast_1d(np.asarray(scale, np.float64))
        pairs = [scale_to_multiplier_shift(float(s), bits=32 if scale32 else 16) for s in scales]
        mode = (rounding or self.rounding) if scale32 else Rounding.SINGLE
        params = RescaleParams(multiplier=[m for m, _ in pairs], shift=[s for _, s in pairs], input_zp=input_zp,
                               output_zp=output_zp, scale32=scale32, rounding=mode, per_channel=np.ndim(scale) > 0,
                               axis=axis, **extra)
        return self.emit_rescale(src, dst, params)

    def emit_rescale(self, src: str, dst: str, params: RescaleParams) -> Step:
        return self.emit("RESCALE", [src], [dst], **params.to_attrs())


def _with_suggestion(name: str, known: Iterable[str], quote: bool = True) -> str:
    close = difflib.get_close_matches(name, list(known), n=1)
    return (shorten(name) if quote else name) + (f" (did you mean {close[0]!r}?)" if close else "")


def _unsupported(kind: str) -> str:
    """An unsupported op kind; for JSON/builder ops (no "<format>." prefix: written by hand) the nearest known one."""
    if "." in kind:
        return kind
    return _with_suggestion(kind, [k for k in RULES if "." not in k], quote=False)


def lower_graph(graph: Graph) -> Schedule:
    lowerer = Lowerer(graph)
    missing = sorted({op.kind for op in graph.ops if op.kind not in RULES})
    if missing:
        raise UnsupportedError("unsupported operators: "
                               + ", ".join(_unsupported(k) for k in missing))
    for op in graph.ops:
        lowerer.op = op
        lowerer.attrs_read = set()
        try:
            RULES[op.kind](lowerer, op)
        except QcError as exc:
            # name the op and its output where the message does not (e.g. a scale out of RESCALE's range, from the
            # format's arithmetic)
            if str(exc).startswith(lowerer.label):
                raise
            output = f" (output {shorten(op.outputs[0])})" if op.outputs and op.outputs[0] != op.name else ""
            raise in_context(exc, lowerer.label + output) from None
        unknown = sorted(set(op.attrs) - lowerer.attrs_read)
        # JSON/builder ops (no "<format>." prefix) are written by hand: an attribute their rule never reads is a
        # mistake (front ends of other formats pass every attribute of their ops, used or not)
        if unknown and "." not in op.kind:
            raise lowerer.error(f"unknown attribute {_with_suggestion(unknown[0], lowerer.attrs_read)}")
        for n in op.outputs:
            lowerer.buffer(n)
    sched = lowerer.schedule
    sched.outputs = list(graph.outputs)
    sched.source_format = str(graph.options.get("source", ""))
    for n in graph.outputs:
        buf = sched.buffers[n]
        if buf.kind == TEMP:
            buf.kind = OUTPUT
        elif buf.kind in (INPUT, CONST, STATE):
            raise UnsupportedError(f"graph output {n!r} is a graph input, constant or state; nothing to compute")
    for v in graph.state:
        lowerer.buffer(v.next)
    sched.state = list(graph.state)
    return sched
