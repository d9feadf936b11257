"""Export a lowered Schedule as a TOSA 1.0 graph and run it with the TOSA reference model.

The TOSA reference model (PyPI `tosa-tools`) is qcodegen's independent oracle for its numpy primitives
(`verify --against tosa-ref`). Each Step becomes the TOSA 1.0 operator of the same name; zero points,
multipliers, shifts, pad constants and the MUL shift are constant *input tensors*, as TOSA 1.0 wants.

Mapping notes:
- Containers: u8/u16 buffers are TOSA INT8/INT16 tensors holding the bit pattern. As in TOSA, only RESCALE
  interprets them as unsigned (input_unsigned/output_unsigned); data movement copies the bits; any other
  operator on an unsigned buffer is unsupported.
- i4 constants are exported as INT8 constants with the same values: the tosa-tools 2026.8.0 Python
  serializer cannot store INT4 data (`addConst` fails on packed bytes) and the reference-model binding
  rejects INT4 inputs. CONV2D, DEPTHWISE_CONV2D and MATMUL define the same integer sum for both.
- i48 tensors may be intermediates (the CONV2D/MATMUL accumulators of i16 data) but not graph inputs or
  outputs: the reference-model binding cannot convert INT48 arrays.
- qcodegen extensions are expressed with plain TOSA operators: a RESCALE fused clamp (out_min/out_max)
  becomes RESCALE + CLAMP (MAXIMUM + MINIMUM for i32; for unsigned outputs the clamp runs on the signed
  value, shifted by half the range, between two exact RESCALEs); a per-channel RESCALE on an axis other
  than the last is wrapped in TRANSPOSEs; CONV2D/DEPTHWISE_CONV2D with pad_value != input_zp becomes PAD +
  convolution; CLAMP on i32 becomes MAXIMUM + MINIMUM; a CAST from u8/u16 zero-extends through i32 (CAST +
  BITWISE_AND). RESCALE rounding half_even, QUANTIZE and DEQUANTIZE have no TOSA equivalent and raise
  UnsupportedError.
- RESCALE inexact_round is exported as SINGLE_ROUND, which is how qcodegen defines it: TOSA only bounds the
  error of INEXACT_ROUND, and the reference model computes it in float32 (off by several units on large
  values), so it cannot serve as a bit-exact oracle for that mode.
"""

from __future__ import annotations

import ctypes
import os
import re
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

import numpy as np

from .. import primitives
from ..errors import QcError, UnsupportedError, install_hint
from ..fixedpoint import Rounding
from ..ir.dtypes import DType
from ..ir.rescale import RescaleParams
from ..ir.schedule import CONST, INPUT, Schedule, StepIO
from ..primitives.base import axis_attr
from ..primitives.rescale import type_range
from ..reference.executor import check_inputs

_NEEDS = f"needs the TOSA reference model: {install_hint('oracles')}"
_TOSA_VERSION = (1, 0, 0, False)  # major, minor, patch, draft: the graphs are TOSA 1.0

# qcodegen element type -> TOSA container type
_CONTAINER = {"i4": "INT8", "i8": "INT8", "u8": "INT8", "i16": "INT16", "u16": "INT16", "i32": "INT32",
              "i48": "INT48", "f32": "FP32"}
_NUMPY = {"INT8": np.int8, "INT16": np.int16, "INT32": np.int32, "INT48": np.int64, "FP32": np.float32,
          "SHAPE": np.int64}
_BITS = {"INT8": 8, "INT16": 16, "INT32": 32, "INT48": 48}
# operators that may touch u8/u16 buffers: data movement copies the bits; RESCALE and CAST handle them
_UNSIGNED_AWARE = {"RESHAPE", "TRANSPOSE", "SLICE", "CONCAT", "PAD", "RESCALE", "CAST"}
_ATTRIBUTE_NAMES = {"MATMUL": "MatMul", "ARGMAX": "ArgMax"}
# INEXACT_ROUND only promises a result within a tolerance of the exact scale; qcodegen fixes it as SINGLE_ROUND,
# while the reference model (2026.8.0) evaluates it in float32. The oracle checks qcodegen's definition.
_ROUNDING = {Rounding.SINGLE: "SINGLE_ROUND", Rounding.DOUBLE: "DOUBLE_ROUND", Rounding.INEXACT: "SINGLE_ROUND"}
_UNITY = ([1 << 30], [30])  # RESCALE multiplier/shift of scale 1.0 (exact for |v| < 2^29)


def tosa_modules() -> tuple[ModuleType, ModuleType]:
    """(tosa_serializer, tosa_reference_model), imported on first use."""
    try:
        import tosa_reference_model
        import tosa_serializer
    except ImportError as exc:
        raise QcError(f"the TOSA oracle {_NEEDS} ({exc})") from None
    return tosa_serializer, tosa_reference_model


def container(dtype: DType) -> str:
    """The TOSA type that stores elements of `dtype`."""
    try:
        return _CONTAINER[dtype.name]
    except KeyError:
        raise UnsupportedError(f"TOSA export: no TOSA type holds {dtype} data") from None


def _is_unsigned(dtype: DType) -> bool:
    return not dtype.signed and not dtype.is_float


def _wrap(value: int, bits: int) -> int:
    """`value` as the two's-complement integer with the same low `bits` bits (unsigned -> container)."""
    half = 1 << (bits - 1)
    return (int(value) + half) % (1 << bits) - half


def _stored(value: int, bits: int, unsigned: bool) -> int:
    return _wrap(value, bits) if unsigned else int(value)


def to_container(arr: np.ndarray, dtype: DType) -> np.ndarray:
    """A qcodegen buffer value as the array the reference model stores (unsigned -> signed bits)."""
    arr = np.require(arr, requirements="C")  # (np.ascontiguousarray would turn rank 0 into rank 1)
    if _is_unsigned(dtype):
        return arr.view(_NUMPY[container(dtype)])
    return arr.astype(_NUMPY[container(dtype)], copy=False)


def from_container(arr: np.ndarray, dtype: DType, shape: tuple[int, ...]) -> np.ndarray:
    """A reference-model output (typed array or raw bytes) as a qcodegen buffer value."""
    store = np.dtype(_NUMPY[container(dtype)])
    arr = np.ascontiguousarray(arr).reshape(-1)
    if arr.dtype != store:
        arr = arr.view(store)
    arr = arr.reshape(shape)
    return arr.view(dtype.numpy) if _is_unsigned(dtype) else arr.astype(dtype.numpy, copy=False)


class _Builder:
    """Builds one TOSA graph; buffer names map to TOSA tensor names."""

    def __init__(self, ts: ModuleType, schedule: Schedule):
        self.ts = ts
        self.ser = ts.TosaSerializer("", ts.ConstMode.EMBED, *_TOSA_VERSION)
        self.schedule = schedule
        self.tensors: dict[str, str] = {}
        self.declared: set[str] = set()  # graph outputs not yet written by an operator
        self._consts = 0

    # ---- tensors
    def input(self, name: str) -> None:
        buf = self.schedule.buffers[name]
        tname = f"qc.in.{name}"
        self.ser.addInputTensor(self.ts.TosaSerializerTensor(tname, list(buf.shape), self.tosa_type(buf.dtype)))
        self.tensors[name] = tname

    def output(self, name: str) -> None:
        """Declare buffer `name` a graph output (in call order); the step computing it writes to it."""
        buf = self.schedule.buffers[name]
        tensor = self.ser.addOutput(list(buf.shape), self.tosa_type(buf.dtype)).name
        if buf.kind in (INPUT, CONST):  # an output that no step computes
            self.emit("IDENTITY", [self.tensor(name)], tensor)
            return
        self.tensors[name] = tensor
        self.declared.add(name)

    def tensor(self, name: str) -> str:
        """The tensor holding buffer `name` (constants are added on first use)."""
        if name not in self.tensors:
            buf = self.schedule.buffers[name]
            if buf.kind != CONST or buf.data is None:
                raise QcError(f"TOSA export: buffer {name!r} is read before any step writes it")
            self.tensors[name] = self.const(to_container(buf.data, buf.dtype), container(buf.dtype), name)
        return self.tensors[name]

    def result(self, name: str) -> str:
        """The tensor a step writes buffer `name` to."""
        if name in self.declared:
            self.declared.discard(name)
            return self.tensors[name]
        if name in self.tensors:
            raise UnsupportedError(f"TOSA export: buffer {name!r} is written twice")
        buf = self.schedule.buffers[name]
        self.tensors[name] = self.temp(buf.shape, container(buf.dtype))
        return self.tensors[name]

    def target(self, dest: str | None, shape: tuple[int, ...], ttype: str) -> str:
        """The buffer `dest`'s tensor for the last operator of a sequence, else a fresh intermediate."""
        return self.result(dest) if dest is not None else self.temp(shape, ttype)

    def temp(self, shape: tuple[int, ...], ttype: str) -> str:
        return self.ser.addIntermediate(list(shape), getattr(self.ts.DType, ttype)).name

    def const(self, values: Any, ttype: str, label: str) -> str:
        arr = np.asarray(values)
        store = _NUMPY[ttype]
        if ttype in _BITS and arr.size:
            lo, hi = -(1 << (_BITS[ttype] - 1)), (1 << (_BITS[ttype] - 1)) - 1
            if int(arr.min()) < lo or int(arr.max()) > hi:
                raise QcError(f"TOSA export: {label} values [{arr.min()}, {arr.max()}] do not fit {ttype}")
        name = f"qc.c{self._consts}.{label}"
        self._consts += 1
        self.ser.addConst(list(arr.shape), getattr(self.ts.DType, ttype), arr.astype(store), name=name)
        return name

    def scalar(self, value: int, ttype: str, label: str) -> str:
        """A [1] tensor (zero points, pad constants, MUL shift)."""
        return self.const([value], ttype, label)

    def shape(self, values: list[int] | tuple[int, ...], label: str) -> str:
        return self.const(np.asarray(values, np.int64).reshape(-1), "SHAPE", label)

    def tosa_type(self, dtype: DType) -> Any:
        return getattr(self.ts.DType, container(dtype))

    # ---- operators
    def emit(self, op: str, inputs: list[str], output: str, *attr_args: Any) -> None:
        attr = self.ts.TosaSerializerAttribute()
        kind = _ATTRIBUTE_NAMES.get(op) or "".join(part.capitalize() for part in op.split("_"))
        getattr(attr, f"{kind}Attribute")(*attr_args)
        self.ser.addOperator(getattr(self.ts.Op, op), inputs, [output], attr)

    @property
    def propagate(self) -> Any:
        return self.ts.NanPropagationMode.PROPAGATE

    def rescale(self, src: str, shape: tuple[int, ...], in_type: str, out_type: str, scale: tuple[list, list],
                zps: tuple[int, int], *, scale32: bool = True, rounding: Rounding = Rounding.SINGLE,
                per_channel: bool = False, unsigned: tuple[bool, bool] = (False, False),
                dest: str | None = None) -> str:
        """RESCALE; zero points are given in the interpreted domain and stored as the container's bits."""
        mult, shift = scale
        out = self.target(dest, shape, out_type)
        inputs = [src, self.const(np.asarray(mult, np.int64), "INT32" if scale32 else "INT16", "multiplier"),
                  self.const(np.asarray(shift, np.int64), "INT8", "shift"),
                  self.scalar(_stored(zps[0], _BITS[in_type], unsigned[0]), in_type, "input_zp"),
                  self.scalar(_stored(zps[1], _BITS[out_type], unsigned[1]), out_type, "output_zp")]
        self.emit("RESCALE", inputs, out, scale32, getattr(self.ts.RoundingMode, _ROUNDING[rounding]),
                  per_channel, *unsigned)
        return out

    def clamp(self, src: str, shape: tuple[int, ...], dtype: DType, bounds: tuple[Any, Any],
              dest: str | None = None, unsigned: bool = False) -> str:
        """min(max(x, lo), hi) in the interpreted domain of `dtype` (unsigned: of its container's bits)."""
        lo, hi = bounds
        ttype = container(dtype)
        if unsigned:  # TOSA clamps signed values: shift by half the range between two exact RESCALEs
            off = 1 << (_BITS[ttype] - 1)
            s = self.rescale(src, shape, ttype, ttype, _UNITY, (off, 0), unsigned=(True, False))
            c = self.clamp(s, shape, dtype, (lo - off, hi - off))
            return self.rescale(c, shape, ttype, ttype, _UNITY, (0, off), unsigned=(False, True), dest=dest)
        if ttype == "INT32":  # TOSA CLAMP has no i32 form
            ones = [1] * len(shape)
            low = self.temp(shape, ttype)
            self.emit("MAXIMUM", [src, self.const(np.full(ones, lo), ttype, "min_val")], low, self.propagate)
            out = self.target(dest, shape, ttype)
            self.emit("MINIMUM", [low, self.const(np.full(ones, hi), ttype, "max_val")], out, self.propagate)
            return out
        to_bytes = self.ts.TosaSerializer.convertDataToUint8Vec
        tdt = getattr(self.ts.DType, ttype)
        out = self.target(dest, shape, ttype)
        self.emit("CLAMP", [src], out, _padded8(to_bytes(tdt, [lo])), _padded8(to_bytes(tdt, [hi])),
                  self.propagate)
        return out

    def convert(self, src: str, shape: tuple[int, ...], src_type: str, dst_type: str,
                dest: str | None = None) -> str:
        """CAST between containers (IDENTITY when they are the same: the bits do not change)."""
        out = self.target(dest, shape, dst_type)
        self.emit("CAST" if src_type != dst_type else "IDENTITY", [src], out)
        return out

    def transpose(self, src: str, shape: tuple[int, ...], ttype: str, perm: list[int],
                  dest: str | None = None) -> str:
        out = self.target(dest, tuple(shape[p] for p in perm), ttype)
        self.emit("TRANSPOSE", [src], out, perm)
        return out

    def pad(self, src: str, shape: tuple[int, ...], dtype: DType, padding: list[int], value: int,
            dest: str | None = None) -> str:
        """PAD with `padding` = [lo0, hi0, lo1, hi1, ...] and the constant `value` (interpreted domain)."""
        ttype = container(dtype)
        out_shape = tuple(d + padding[2 * k] + padding[2 * k + 1] for k, d in enumerate(shape))
        out = self.target(dest, out_shape, ttype)
        stored = _stored(value, _BITS[ttype], _is_unsigned(dtype)) if ttype in _BITS else value
        self.emit("PAD", [src, self.shape(padding, "padding"), self.scalar(stored, ttype, "pad_const")], out)
        return out


def _padded8(data: list[int]) -> list[int]:
    """CLAMP bounds are little-endian bytes, padded to 8 as the serializer's own generator does."""
    return list(data) + [0] * (-len(data) % 8)


def _ints(values: Any) -> list[int]:
    return [int(v) for v in np.asarray(values).reshape(-1)]


def _axis(io: StepIO) -> int:
    rank = len(io.ins[0].shape)
    return axis_attr(io) % rank if rank else 0


# ---- one emitter per primitive

def _rescale(b: _Builder, io: StepIO) -> None:
    p = primitives.get("RESCALE").params(io)
    if p["rounding"] not in _ROUNDING:
        raise UnsupportedError(f"rounding {p['rounding'].value!r} is a qcodegen extension TOSA lacks")
    if RescaleParams.from_attrs(io.attrs).exceptions:
        raise UnsupportedError("exceptions to single rounding (a float32 requantization) are a qcodegen extension "
                               "TOSA lacks")
    x, y = io.ins[0], io.outs[0]
    rank = len(x.shape)
    moved = p["per_channel"] and p["axis"] != rank - 1
    clamped = (p["lo"], p["hi"]) != type_range(p["out_bits"], p["out_unsigned"])
    src, shape, in_type, out_type = b.tensor(x.name), x.shape, container(x.dtype), container(y.dtype)
    perm = [d for d in range(rank) if d != p["axis"]] + [p["axis"]]
    if moved:
        if in_type == "INT48":
            raise UnsupportedError(f"per-channel axis {p['axis']} is not the last, and TOSA cannot TRANSPOSE i48 "
                                   f"data to make it so")
        src = b.transpose(src, shape, in_type, perm)
        shape = tuple(shape[d] for d in perm)
    last = None if moved else y.name
    t = RescaleParams.from_attrs(io.attrs)
    r = b.rescale(src, shape, in_type, out_type, (list(t.multiplier), list(t.shift)),
                  (t.input_zp, t.output_zp), scale32=p["scale32"], rounding=p["rounding"],
                  per_channel=p["per_channel"], unsigned=(p["in_unsigned"], p["out_unsigned"]),
                  dest=None if clamped else last)
    if clamped:
        r = b.clamp(r, shape, y.dtype, (p["lo"], p["hi"]), dest=last, unsigned=p["out_unsigned"])
    if moved:
        b.transpose(r, shape, out_type, [perm.index(d) for d in range(rank)], dest=y.name)


def _convolution(b: _Builder, io: StepIO) -> None:
    x, w, bias = io.ins
    y = io.outs[0]
    prim = primitives.get(io.step.op)
    p, win = prim.params(io), prim.window(io)
    pad = list(win.pad)
    src = b.tensor(x.name)
    if p.pad_value != p.izp and any(pad):  # out-of-bounds taps read pad_value: pad explicitly
        src = b.pad(src, x.shape, x.dtype, [0, 0, *pad, 0, 0], p.pad_value)
        pad = [0, 0, 0, 0]
    inputs = [src, b.tensor(w.name), b.tensor(bias.name), b.scalar(p.izp, container(x.dtype), "input_zp"),
              b.scalar(p.wzp, container(w.dtype), "weight_zp")]
    b.emit(io.step.op, inputs, b.result(y.name), pad, list(win.stride), list(win.dilation), False,
           b.tosa_type(y.dtype))


def _matmul(b: _Builder, io: StepIO) -> None:
    x, w = io.ins
    a_zp, b_zp = primitives.get("MATMUL").zero_points(io)
    inputs = [b.tensor(x.name), b.tensor(w.name), b.scalar(a_zp, container(x.dtype), "a_zp"),
              b.scalar(b_zp, container(w.dtype), "b_zp")]
    b.emit("MATMUL", inputs, b.result(io.outs[0].name))


def _avg_pool(b: _Builder, io: StepIO) -> None:
    x, pool = io.ins[0], primitives.get("AVG_POOL2D")
    ttype = container(x.dtype)
    izp, ozp = pool.zero_points(io)
    win = pool.window(io)
    inputs = [b.tensor(x.name), b.scalar(izp, ttype, "input_zp"), b.scalar(ozp, ttype, "output_zp")]
    b.emit("AVG_POOL2D", inputs, b.result(io.outs[0].name), list(win.kernel), list(win.stride), list(win.pad),
           b.ts.DType.INT32)


def _max_pool(b: _Builder, io: StepIO) -> None:
    win = primitives.get("MAX_POOL2D").window(io)
    b.emit("MAX_POOL2D", [b.tensor(io.ins[0].name)], b.result(io.outs[0].name), list(win.kernel),
           list(win.stride), list(win.pad), b.propagate)


def _plain(b: _Builder, io: StepIO) -> None:
    """Operators whose inputs are the step's inputs and whose attribute takes no arguments."""
    b.emit(io.step.op, [b.tensor(n) for n in io.step.inputs], b.result(io.outs[0].name))


def _mul(b: _Builder, io: StepIO) -> None:
    shift = b.scalar(primitives.get("MUL").shift(io), "INT8", "shift")
    b.emit("MUL", [b.tensor(io.ins[0].name), b.tensor(io.ins[1].name), shift], b.result(io.outs[0].name))


def _clamp(b: _Builder, io: StepIO) -> None:
    x = io.ins[0]
    bounds = primitives.get("CLAMP").bounds(io)
    b.clamp(b.tensor(x.name), x.shape, x.dtype, bounds, dest=io.outs[0].name)


def _reduce(b: _Builder, io: StepIO) -> None:
    extra = [] if io.step.op == "REDUCE_SUM" else [b.propagate]
    b.emit(io.step.op, [b.tensor(io.ins[0].name)], b.result(io.outs[0].name), _axis(io), *extra)


def _argmax(b: _Builder, io: StepIO) -> None:
    b.emit("ARGMAX", [b.tensor(io.ins[0].name)], b.result(io.outs[0].name), _axis(io), b.propagate)


def _concat(b: _Builder, io: StepIO) -> None:
    b.emit("CONCAT", [b.tensor(n) for n in io.step.inputs], b.result(io.outs[0].name), _axis(io))


def _pad(b: _Builder, io: StepIO) -> None:
    x = io.ins[0]
    b.pad(b.tensor(x.name), x.shape, x.dtype, _ints(io.attrs["padding"]), primitives.get("PAD").pad_const(io),
          dest=io.outs[0].name)


def _cast(b: _Builder, io: StepIO) -> None:
    """TOSA CAST is signed only. Narrowing keeps the low bits, which are also the bits of the unsigned
    result; an unsigned source is zero-extended through i32 (CAST, then BITWISE_AND with its mask)."""
    x, y = io.ins[0], io.outs[0]
    src, src_type, dst_type = b.tensor(x.name), container(x.dtype), container(y.dtype)
    if _is_unsigned(x.dtype) and src_type != dst_type:
        wide = b.convert(src, x.shape, src_type, "INT32")
        src, src_type = b.temp(x.shape, "INT32"), "INT32"
        mask = b.const(np.full([1] * len(x.shape), x.dtype.max), "INT32", "mask")
        b.emit("BITWISE_AND", [wide, mask], src)
    b.convert(src, x.shape, src_type, dst_type, dest=y.name)


def _reshape(b: _Builder, io: StepIO) -> None:
    y = io.outs[0]
    b.emit("RESHAPE", [b.tensor(io.ins[0].name), b.shape(y.shape, "shape")], b.result(y.name))


def _transpose(b: _Builder, io: StepIO) -> None:
    x = io.ins[0]
    b.transpose(b.tensor(x.name), x.shape, container(x.dtype), _ints(io.attrs["perms"]), dest=io.outs[0].name)


def _slice(b: _Builder, io: StepIO) -> None:
    inputs = [b.tensor(io.ins[0].name), b.shape(_ints(io.attrs["start"]), "start"),
              b.shape(_ints(io.attrs["size"]), "size")]
    b.emit("SLICE", inputs, b.result(io.outs[0].name))


def _float_defined(b: _Builder, io: StepIO) -> None:
    raise UnsupportedError("float quantization is a qcodegen extension TOSA's integer profile lacks")


_EMITTERS: dict[str, Callable[[_Builder, StepIO], None]] = {
    "RESCALE": _rescale, "CONV2D": _convolution, "DEPTHWISE_CONV2D": _convolution, "MATMUL": _matmul,
    "AVG_POOL2D": _avg_pool, "MAX_POOL2D": _max_pool, "ADD": _plain, "SUB": _plain, "MUL": _mul,
    "CLAMP": _clamp, "TABLE": _plain, "REDUCE_SUM": _reduce, "REDUCE_MAX": _reduce, "REDUCE_MIN": _reduce,
    "ARGMAX": _argmax, "CAST": _cast, "CONCAT": _concat, "PAD": _pad, "RESHAPE": _reshape,
    "TRANSPOSE": _transpose, "SLICE": _slice, "QUANTIZE": _float_defined, "DEQUANTIZE": _float_defined,
}


def _emit_step(b: _Builder, schedule: Schedule, k: int) -> None:
    step = schedule.steps[k]
    io = schedule.io(step)
    where = f"step {k} {step.op}" + (f" ({step.source})" if step.source else "")
    try:
        emitter = _EMITTERS.get(step.op)
        if emitter is None:
            raise UnsupportedError("a qcodegen primitive with no TOSA operator")
        if step.op not in _UNSIGNED_AWARE and any(
                _is_unsigned(buf.dtype) for buf in io.ins + io.outs):
            raise UnsupportedError("TOSA has unsigned data only in RESCALE")
        emitter(b, io)
    except QcError as exc:
        raise type(exc)(f"TOSA export of {where}: {exc}") from None


def export_graph(schedule: Schedule, trace: bool = False) -> tuple[bytes, list[str]]:
    """The serialized graph and the buffer names of its outputs, in order: the model outputs, then (with
    `trace`) every other step output the reference model can return (all but i48), in step order."""
    ts, _ = tosa_modules()
    b = _Builder(ts, schedule)
    for name in schedule.inputs:
        if schedule.buffers[name].dtype.name == "i48":
            raise UnsupportedError(f"TOSA export: input {name!r} is i48, which the reference model cannot take")
        b.input(name)
    names = list(schedule.outputs)
    for name in names:
        if schedule.buffers[name].dtype.name == "i48":
            raise UnsupportedError(f"TOSA export: output {name!r} is i48, which the reference model cannot "
                                   f"return")
    if trace:
        names += [n for step in schedule.steps for n in step.outputs
                  if n not in names and schedule.buffers[n].dtype.name != "i48"]
    for name in names:
        b.output(name)
    for k in range(len(schedule.steps)):
        _emit_step(b, schedule, k)
    if b.declared:
        raise QcError(f"TOSA export: no step computes output(s) {sorted(b.declared)}")
    return bytes(b.ser.serialize()), names


def schedule_to_tosa(schedule: Schedule) -> bytes:
    """The schedule as a serialized TOSA 1.0 flatbuffer: model inputs and outputs in schedule order."""
    return export_graph(schedule)[0]


@contextmanager
def _captured_stdio() -> Iterator[list[str]]:
    """Redirect file descriptors 1 and 2 (the reference model prints warnings, and on invalid graphs a
    debugger backtrace) into a log, so `--json` output stays clean. The text is in log[0] afterwards."""
    log: list[str] = []
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 1)
        os.dup2(tmp.fileno(), 2)
        try:
            yield log
        finally:
            _flush_c_stdio()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
            tmp.seek(0)
            log.append(tmp.read().decode("utf-8", "replace"))


def _flush_c_stdio() -> None:
    try:
        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError, TypeError):  # no C runtime handle on this platform: nothing buffered
        pass


def _diagnostic(text: str) -> str:
    """The reference model's own explanation: its ERROR_IF/REQUIRE lines, without debugger noise."""
    keep = [line.strip() for line in text.splitlines()
            if re.search(r"ERROR_IF|REQUIRE|fails AT|Unsupported|could not allocate|Invalid TOSA|[Uu]nable to", line)]
    return "; ".join(dict.fromkeys(keep[:6]))[:600]


def run_graph(graph: bytes, schedule: Schedule, names: list[str], inputs: list[np.ndarray]
              ) -> list[np.ndarray]:
    """Run an exported graph; outputs as arrays of the buffers `names` (their qcodegen dtypes and shapes)."""
    _, trm = tosa_modules()
    args = [to_container(arr, schedule.buffers[n].dtype)
            for n, arr in zip(schedule.inputs, check_inputs(schedule, inputs), strict=True)]
    try:
        with _captured_stdio() as log:
            outs, status = trm.run(graph, args)
    except ValueError as exc:
        detail = _diagnostic(f"{exc}\n{log[0] if log else ''}") or " ".join(str(exc).split())[:600]
        raise QcError(f"the TOSA reference model rejected the graph (TOSA_ERROR): {detail}") from None
    if status != trm.GraphStatus.TOSA_VALID:
        raise QcError(f"the TOSA reference model returned {status.name}: {_diagnostic(log[0]) or 'no detail'}")
    if len(outs) != len(names):
        raise QcError(f"the TOSA reference model returned {len(outs)} outputs, expected {len(names)}")
    return [from_container(o, schedule.buffers[n].dtype, schedule.buffers[n].shape)
            for o, n in zip(outs, names, strict=True)]


def run_tosa_reference(schedule: Schedule, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """The schedule's outputs computed by the TOSA reference model (raises QcError on TOSA_ERROR or
    TOSA_UNPREDICTABLE, with the model's reason)."""
    graph, names = export_graph(schedule)
    return run_graph(graph, schedule, names, inputs)
