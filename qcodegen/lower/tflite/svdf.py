"""TFLite SVDF (int8 input, int8 or int16 activation state), bit for bit with TFLM's EvalIntegerSvdfReference
(svdf_common.cc), and READ_VARIABLE's copy.

SVDF's state S [B, F*M] (type T of the time weights, F filters of M steps) is the op's input 4; the front end
(qcodegen/frontends/tflite_state.py) gives the op its next value as output 1. One invocation:
1. shift: every filter's history moves one step left (TFLM moves the whole buffer by one element and then
   overwrites each filter's last step, the same thing);
2. feature: d[b, f] = sum_i w_f[f, i] * (x[b, i] - zp_x) in int32 (the weights' zero point is ignored), then
   clamp(MBQM(d, scale_1), T) + zp_S, stored as T: the sum is not clamped again, so it wraps for an int8 state
   with a zero point (CAST); it becomes the last step of filter f;
3. time: t[b, f] = sum_j w_t[f, j] * (S'[b, f, j] - zp_S) in int32; with the rank reduction (unit u sums its R
   filters) this is one dot product per unit over R*M values: MATMUL over the units, A = S' as [U, B, R*M];
4. y = clamp(MBQM(bias[u] + sum, scale_2) + zp_y) to int8. The fused activation is not applied (TFLM's integer
   kernel ignores it).
Primitives: STRIDED_COPY (shift), CONV2D (feature, a 1x1 convolution as FULLY_CONNECTED), RESCALE (+ ADD and CAST
for a state zero point), CONCAT (new history, written as the next state), MATMUL, ADD, RESCALE.
scale_1 = s_x * s_wf / s_S and scale_2 = s_S * s_wt / s_y are formed in double (see _effective_scales).
"""

from __future__ import annotations

import numpy as np

from ...errors import UnsupportedError
from ...ir.graph import Op, Tensor
from ...ir.rescale import RescaleParams
from ...semantics.tflite import Pair, quantize_multiplier_exponent
from ..base import Lowerer, rule
from ..common import reshape
from .common import operands, quantized
from .quant import emit_mbqm


def _effective_scales(x: Tensor, wf: Tensor, wt: Tensor, state: Tensor, y: Tensor) -> tuple[Pair, Pair]:
    """PrepareSvdf's multipliers. The TFLM source multiplies the float32 scales in float32 before widening; the
    tflite-micro oracle matches the products in double (as for SUB, RELU and FULLY_CONNECTED)."""
    s_x, s_wf, s_wt, s_s, s_y = (float(t.quant.scale) for t in (x, wf, wt, state, y))
    return quantize_multiplier_exponent(s_x * s_wf / s_s), quantize_multiplier_exponent(s_s * s_wt / s_y)


def _check(lw: Lowerer, x: Tensor, wf: Tensor, wt: Tensor, bias: Tensor | None, state: Tensor, y: Tensor,
           nxt: Tensor) -> tuple[int, int, int, int, int]:
    """(B, I, F, M, R) after TFLM's PrepareSvdf checks."""
    quantized(lw, x, ("i8",))
    quantized(lw, y, ("i8",))
    if state.dtype != wt.dtype or state.dtype.name not in ("i8", "i16"):
        raise UnsupportedError(f"{lw.label}: time weights {wt.dtype} with state {state.dtype} are not supported "
                               f"(int8/int8 or int16/int16)")
    q_state = state.quant
    if q_state is None or q_state.kind != "per_tensor":
        raise lw.error(f"state {state.name!r} must be quantized per tensor")
    if state.dtype.name == "i16" and q_state.zero_point != 0:
        raise UnsupportedError(f"{lw.label}: int16 state {state.name!r} with zero point {q_state.zero_point} is not "
                               f"supported")
    for w in (wf, wt):
        if not w.is_const or len(w.shape) != 2 or w.quant is None or w.quant.kind != "per_tensor":
            raise lw.error(f"weights {w.name!r} must be a constant 2-D tensor quantized per tensor")
    if wf.dtype.name != "i8":
        raise lw.error(f"feature weights {wf.name!r} must be int8, got {wf.dtype}")
    if len(x.shape) != 2:
        raise lw.error(f"input {x.name!r} must be [batch, input_size], got {list(x.shape)}")
    (b, i), (f, m) = x.shape, wt.shape
    rank = int(lw.attr("rank"))
    if rank < 1 or f % rank or wf.shape != (f, i):
        raise lw.error(f"feature weights {list(wf.shape)}, time weights {list(wt.shape)} and rank {rank} do not fit "
                       f"input {list(x.shape)}")
    units = f // rank
    if y.shape != (b, units) or state.shape != (b, f * m) or nxt.shape != state.shape:
        raise lw.error(f"output {list(y.shape)} or state {list(state.shape)} do not fit batch {b}, {units} units, "
                       f"{f} filters of {m} steps")
    if bias is not None and (not bias.is_const or bias.dtype.name != "i32" or bias.shape != (units,)):
        raise lw.error(f"bias {bias.name!r} must be a constant int32 tensor of shape [{units}]")
    return b, i, f, m, rank


def _feature(lw: Lowerer, x: Tensor, wf: Tensor, state: Tensor, pair: Pair, column: tuple[int, ...]) -> str:
    """Each filter's new last step: clamp(MBQM(w_f . (x - zp_x)), T) + zp_S, wrapped to T; shaped `column`."""
    (b, i), f = x.shape, wf.shape[0]
    t, zp = state.dtype, state.quant.zero_point
    acc = lw.temp(f"{state.name}_feature", (b, 1, 1, f), "i32")
    weights = lw.const(f"{wf.name}_o11i", wf.data.reshape(f, 1, 1, i), "i8")
    lw.emit("CONV2D", [reshape(lw, x.name, (b, 1, 1, i)), weights, lw.const(f"{wf.name}_nobias", np.zeros(f), "i32")],
            [acc],
            pad=[0, 0, 0, 0], stride=[1, 1], dilation=[1, 1], input_zp=x.quant.zero_point, weight_zp=0,
            acc_type="i32")
    x_max = max(x.quant.zero_point - x.dtype.min, x.dtype.max - x.quant.zero_point)
    bound = int(np.abs(wf.data.astype(np.int64)).sum(axis=1).max(initial=0)) * x_max
    col = lw.temp(f"{state.name}_new", (b, 1, 1, f), t)
    if zp == 0:
        emit_mbqm(lw, acc, col, [pair], bounds=(t.min, t.max), value_bound=bound)
    else:
        clamped = lw.temp(f"{state.name}_clamped", (b, 1, 1, f), "i32")
        emit_mbqm(lw, acc, clamped, [pair], bounds=(t.min, t.max), value_bound=bound)
        shifted = lw.temp(f"{state.name}_zp", (b, 1, 1, f), "i32")
        lw.emit("ADD", [clamped, lw.const(f"{state.name}_zp", np.full((1, 1, 1, 1), zp), "i32")], [shifted])
        lw.emit("CAST", [shifted], [col])
    return reshape(lw, col, column)


@rule("tfl.svdf")
def lower_svdf(lw: Lowerer, op: Op) -> None:
    (x, wf, wt, *rest), (y, nxt) = operands(lw, op, (4, 5), n_out=2)
    bias, state = (rest[0], rest[1]) if len(rest) == 2 else (None, rest[0])
    b, _, f, m, rank = _check(lw, x, wf, wt, bias, state, y, nxt)
    units, t = f // rank, state.dtype
    pair_1, pair_2 = _effective_scales(x, wf, wt, state, y)
    single = b == 1  # the history as [F, 1, M]: the MATMUL's A operand without a transpose

    def history(steps: int) -> tuple[int, ...]:
        return (f, 1, steps) if single else (b, f, steps)

    parts = []
    if m > 1:  # S[b, f, 1:], read before the next state overwrites S
        parts.append(lw.temp(f"{state.name}_kept", history(m - 1), t))
        lw.emit("STRIDED_COPY", [state.name], [parts[-1]], offset=1,
                strides=[m, 0, 1] if single else [f * m, m, 1])
    parts.append(_feature(lw, x, wf, state, pair_1, history(1)))
    shifted = lw.temp(f"{state.name}_shifted", history(m), t)
    lw.emit("CONCAT", parts, [shifted], axis=2)

    if single:
        a = reshape(lw, shifted, (units, 1, rank * m))
    else:
        a = lw.temp(f"{state.name}_units", (units, b, rank * m), t)
        lw.emit("TRANSPOSE", [reshape(lw, shifted, (b, units, rank * m))], [a], perms=[1, 0, 2])
    acc_type = "i32" if t.name == "i8" else "i48"
    time = lw.temp(f"{y.name}_time", (units, b, 1), acc_type)
    lw.emit("MATMUL", [a, lw.const(f"{wt.name}_u", wt.data.reshape(units, rank * m, 1), t)], [time],
            a_zp=state.quant.zero_point, b_zp=0)
    if acc_type == "i48":  # TFLM's int32 sum: narrowed exactly (range analysis proves it fits)
        narrow = lw.temp(f"{y.name}_time32", (units, b, 1), "i32")
        lw.emit_rescale(time, narrow, RescaleParams(multiplier=[1 << 14], shift=[14], input_zp=0, output_zp=0,
                                                    scale32=False))
        time = narrow
    if bias is not None:
        biased = lw.temp(f"{y.name}_biased", (units, b, 1), "i32")
        lw.emit("ADD", [time, lw.const(f"{bias.name}_u11", bias.data.reshape(units, 1, 1), "i32")], [biased])
        time = biased
    if not single:
        by_batch = lw.temp(f"{y.name}_by_batch", (b, units, 1), "i32")
        lw.emit("TRANSPOSE", [time], [by_batch], perms=[1, 0, 2])
        time = by_batch
    emit_mbqm(lw, reshape(lw, time, (b, units)), y.name, [pair_2], output_zp=y.quant.zero_point,
              bounds=(y.dtype.min, y.dtype.max))
    lw.emit("RESHAPE", [shifted], [nxt.name], shape=list(nxt.shape))  # last: the history becomes the next state


@rule("tfl.read_variable")
def lower_read_variable(lw: Lowerer, op: Op) -> None:
    """A resource variable's value as a model output (other reads alias the value; tflite_state.py)."""
    (x,), (y,) = operands(lw, op, (1,))
    lw.emit("RESHAPE", [x.name], [y.name], shape=list(y.shape))
