"""The float definition of a quantized StableHLO graph: `decompose` and a numpy evaluator of float graphs.

`decompose(graph)` rewrites every op on quantized tensors into `uniform_dequantize` of each quantized operand, the
same op on float32 tensors, and `uniform_quantize` of the result to its quantized type (the StableHLO
interpreter's per-op meaning, which is also what a QDQ program means). A quantized -> quantized `uniform_quantize`
stays a requantization, evaluated with the interpreter's merged formula -- except those the QDQ folding made
(attrs["from_qdq"]), which become dequantize -> quantize again; a wide reduction's accumulator type
(attrs["accumulator"]) is dropped: the float sum is the RFC's intended value. Hybrid ops (float lhs, quantized
weights) dequantize the weights.

`evaluate(graph, inputs)` runs such a float graph: quantize / dequantize with the interpreter's float32 formulas
(qcodegen/semantics/stablehlo.py), element-wise ops in float32 as the interpreter does, dot_general,
convolution and add-reductions (reduce, reduce_window) summed in float64 and rounded once to float32 (the exact
value of the float definition, correctly rounded), data movement exactly. Other ops raise UnsupportedError naming
the op. `float_reference(graph, inputs)` = evaluate(decompose(graph), inputs): the oracle of
`qcodegen verify --against float` (qcodegen/verify/float_accuracy.py).

With `arith=EXACT` the same graph is evaluated as real arithmetic would (float64 values, the exact dequantization,
the ops and sums in float64, one rounding half to even at each quantize, float64 values within 2^-40 of a tie taken
as ties): the exactly rounded definition. Where the two differ, the float32 evaluation's own rounding errors
straddle a rounding boundary: `verify --against float` reports such elements as f32 ties.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from itertools import product

import numpy as np

from ..errors import UnsupportedError
from ..ir.graph import Graph, Op, Tensor
from ..ir.quant import QuantType
from ..semantics import stablehlo as sem
from .stablehlo import _FOLDERS

F32 = np.float32
QUANTIZE, DEQUANTIZE = "stablehlo.uniform_quantize", "stablehlo.uniform_dequantize"
_CASTS = {QUANTIZE, DEQUANTIZE, "quant.qcast", "quant.dcast", "quant.scast", "stablehlo.bitcast_convert"}
_MOVEMENT = ("stablehlo.reshape", "stablehlo.transpose", "stablehlo.broadcast_in_dim", "stablehlo.concatenate",
             "stablehlo.slice", "stablehlo.reverse")
_COMBINERS: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "stablehlo.add": np.add, "stablehlo.maximum": np.maximum, "stablehlo.minimum": np.minimum}


# ------------------------------------------------------------------------------------------ decompose


def _float_twin(graph: Graph, t: Tensor, suffix: str) -> str:
    name = f"{t.name}_{suffix}"
    while name in graph.tensors:
        name += "_"
    graph.tensors[name] = Tensor(name, t.shape, "f32")
    return name


def decompose(graph: Graph) -> Graph:
    """A copy of `graph` in which every op on quantized tensors is dequantize -> float op -> quantize."""
    out = Graph(graph.name, dict(graph.tensors), [], list(graph.inputs), list(graph.outputs), dict(graph.options))
    dequantized: dict[str, str] = {}

    def as_float(name: str) -> str:
        t = out.tensors[name]
        if t.quant is None:
            return name
        if name not in dequantized:
            dequantized[name] = _float_twin(out, t, "f")
            out.ops.append(Op(DEQUANTIZE, [name], [dequantized[name]], {}, "decompose"))
        return dequantized[name]

    for op in graph.ops:
        ins = [out.tensors[n] for n in op.inputs]
        res = [out.tensors[n] for n in op.outputs]
        if op.kind in _CASTS and not (op.kind in (QUANTIZE, "quant.qcast") and ins[0].quant is not None
                                      and op.attrs.get("from_qdq")):
            out.ops.append(op)
            continue
        if not any(t.quant is not None for t in ins + res):
            out.ops.append(op)
            continue
        if op.kind in (QUANTIZE, "quant.qcast"):  # a folded QDQ pair: dequantize -> quantize again
            out.ops.append(Op(QUANTIZE, [as_float(ins[0].name)], list(op.outputs), {}, op.name))
            continue
        inputs = [as_float(n) for n in op.inputs]
        outputs = [_float_twin(out, t, "fr") if t.quant is not None else t.name for t in res]
        attrs = {k: v for k, v in op.attrs.items() if k != "accumulator"}
        out.ops.append(Op(op.kind, inputs, outputs, attrs, op.name))
        for t, f in zip(res, outputs, strict=True):
            if t.quant is not None:
                out.ops.append(Op(QUANTIZE, [f], [t.name], {}, op.name))
    return out


# ------------------------------------------------------------------------------------------ evaluation


def _f64(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, np.float64)


def _volume(x: np.ndarray, dims: list[int]) -> int:
    return int(np.prod([x.shape[i] for i in dims], dtype=np.int64))


def _dot_general(op: Op, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    d = op.attrs["dot_dimension_numbers"]
    lb, rb = list(d.lhs_batching_dimensions), list(d.rhs_batching_dimensions)
    lc, rc = list(d.lhs_contracting_dimensions), list(d.rhs_contracting_dimensions)
    lf = [i for i in range(a.ndim) if i not in lb + lc]
    rf = [i for i in range(b.ndim) if i not in rb + rc]
    lhs = np.transpose(_f64(a), lb + lf + lc).reshape(_volume(a, lb), _volume(a, lf), _volume(a, lc))
    rhs = np.transpose(_f64(b), rb + rc + rf).reshape(_volume(b, rb), _volume(b, rc), _volume(b, rf))
    shape = [a.shape[i] for i in lb + lf] + [b.shape[i] for i in rf]
    return np.matmul(lhs, rhs).reshape(shape)


def _dilate(x: np.ndarray, axis: int, factor: int, fill: float) -> np.ndarray:
    if factor == 1 or x.shape[axis] == 0:
        return x
    shape = list(x.shape)
    shape[axis] = (shape[axis] - 1) * factor + 1
    out = np.full(shape, fill, x.dtype)
    index = [slice(None)] * x.ndim
    index[axis] = slice(None, None, factor)
    out[tuple(index)] = x
    return out


def _pad(x: np.ndarray, low: Sequence[int], high: Sequence[int], interior: Sequence[int], fill: float
         ) -> np.ndarray:
    """StableHLO pad: interior padding, then edge padding (negative values crop)."""
    for axis, k in enumerate(interior):
        x = _dilate(x, axis, int(k) + 1, fill)
    x = np.pad(x, [(max(int(lo), 0), max(int(hi), 0)) for lo, hi in zip(low, high, strict=True)],
               constant_values=fill)
    return x[tuple(slice(max(-int(lo), 0), x.shape[k] - max(-int(hi), 0))
                   for k, (lo, hi) in enumerate(zip(low, high, strict=True)))]


def _windows(x: np.ndarray, dims: Sequence[int], strides: Sequence[int], dilations: Sequence[int]
             ) -> Iterator[tuple[tuple[int, ...], np.ndarray]]:
    """(kernel index, strided view of x for that window tap) for every tap; views have the output shape."""
    out = [(n - (k - 1) * dl - 1) // s + 1 for n, k, s, dl in zip(x.shape, dims, strides, dilations, strict=True)]
    if any(o <= 0 for o in out):
        raise UnsupportedError("window larger than the padded operand")
    for tap in product(*(range(k) for k in dims)):
        yield tap, x[tuple(slice(t * dl, t * dl + (o - 1) * s + 1, s)
                           for t, dl, o, s in zip(tap, dilations, out, strides, strict=True))]


def _convolution(op: Op, lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    a = op.attrs
    d = a["dimension_numbers"]
    k = len(d.input_spatial_dimensions)
    ones = [1] * k
    if int(a.get("batch_group_count", 1)) != 1:
        raise UnsupportedError(f"{op.name}: float convolution with batch_group_count > 1")
    groups = int(a.get("feature_group_count", 1))
    x = np.transpose(_f64(lhs), [d.input_batch_dimension, *d.input_spatial_dimensions, d.input_feature_dimension])
    w = np.transpose(_f64(rhs), [*d.kernel_spatial_dimensions, d.kernel_input_feature_dimension,
                                 d.kernel_output_feature_dimension])
    reversal = [bool(v) for v in np.asarray(a.get("window_reversal", [False] * k)).reshape(-1)]
    w = np.flip(w, axis=[i for i, r in enumerate(reversal) if r]) if any(reversal) else w
    padding = np.asarray(a.get("padding", np.zeros((k, 2), np.int64))).reshape(k, 2)
    x = _pad(x, [0, *padding[:, 0], 0], [0, *padding[:, 1], 0], [0, *(int(v) - 1 for v in a.get("lhs_dilation", ones)),
                                                               0], 0.0)
    spatial = w.shape[:k]
    ig, o = w.shape[k], w.shape[k + 1]
    acc = None
    for tap, view in _windows(x, [1, *spatial, 1], [1, *a.get("window_strides", ones), 1],
                              [1, *a.get("rhs_dilation", ones), 1]):
        slab = view.reshape(*view.shape[:-1], groups, ig)
        term = np.einsum("...gi,igo->...go", slab, w[tap[1:-1]].reshape(ig, groups, o // groups))
        acc = term if acc is None else acc + term
    acc = acc.reshape(*acc.shape[:-2], o)
    perm = [0] * (k + 2)
    perm[d.output_batch_dimension] = 0
    for i, dim in enumerate(d.output_spatial_dimensions):
        perm[dim] = 1 + i
    perm[d.output_feature_dimension] = k + 1
    return np.transpose(acc, perm)


def _combiner(op: Op) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    body = op.attrs.get("body")
    if body not in _COMBINERS:
        raise UnsupportedError(f"{op.name}: float {op.kind} with body {body!r} (add, maximum or minimum)")
    return _COMBINERS[body]


def _reduce(op: Op, x: np.ndarray, init: np.ndarray) -> np.ndarray:
    fn = _combiner(op)
    axes = tuple(int(v) for v in op.attrs["dimensions"])
    return fn(fn.reduce(_f64(x), axis=axes), _f64(init).reshape(()))


def _reduce_window(op: Op, x: np.ndarray, init: np.ndarray) -> np.ndarray:
    a = op.attrs
    fn = _combiner(op)
    rank = x.ndim
    ones = [1] * rank
    padding = np.asarray(a.get("padding", np.zeros((rank, 2), np.int64))).reshape(rank, 2)
    base = [int(v) - 1 for v in a.get("base_dilations", ones)]
    start = _f64(init).reshape(())
    x = _pad(_f64(x), padding[:, 0], padding[:, 1], base, float(start))
    acc = None
    for _, view in _windows(x, [int(v) for v in a["window_dimensions"]], a.get("window_strides", ones),
                            a.get("window_dilations", ones)):
        acc = view if acc is None else fn(acc, view)
    return fn(acc, start)


@dataclass(frozen=True)
class Arithmetic:
    """How `evaluate` computes: the interpreter's float32 operations, or exactly (float64, rounded once at each
    quantize)."""

    float_type: type
    quantize: Callable[[np.ndarray, QuantType], np.ndarray]
    dequantize: Callable[[np.ndarray, QuantType], np.ndarray]
    requantize: Callable[[np.ndarray, QuantType, QuantType], np.ndarray]
    unary: dict[str, sem.FloatFn]
    binary: dict[str, sem.FloatFn]


FLOAT32 = Arithmetic(F32, sem.quantize, sem.dequantize, sem.requantize, sem.UNARY, sem.BINARY)
EXACT = Arithmetic(np.float64, sem.quantize_exact, sem.dequantize_exact, sem.requantize_exact, sem.UNARY_EXACT,
                   sem.BINARY_EXACT)


def _elementwise(op: Op, args: list[np.ndarray], arith: Arithmetic) -> np.ndarray:
    short = op.kind.split(".", 1)[-1]
    args = [np.asarray(v, arith.float_type) for v in args]
    with np.errstate(all="ignore"):
        if short in arith.unary and len(args) == 1:
            return arith.unary[short](args[0])
        if short in arith.binary and len(args) == 2:
            return np.asarray(arith.binary[short](args[0], args[1]), arith.float_type)
        if short == "clamp":
            return np.minimum(np.maximum(args[1], args[0]), args[2])
    raise UnsupportedError(f"{op.name}: the float evaluator has no {op.kind} (supported: quantize, dequantize, "
                           "dot_general, convolution, reduce, reduce_window, data movement, pad, select, compare, "
                           "clamp and the element-wise ops of the interpreter's QDQ fallback)")


def _apply(op: Op, args: list[np.ndarray], ins: list[Tensor], outs: list[Tensor], arith: Arithmetic
           ) -> np.ndarray:
    kind = op.kind
    if kind in (QUANTIZE, "quant.qcast"):
        if ins[0].quant is None:
            return arith.quantize(args[0], outs[0].quant)
        return arith.requantize(args[0], ins[0].quant, outs[0].quant)
    if kind in (DEQUANTIZE, "quant.dcast"):
        return arith.dequantize(args[0], ins[0].quant)
    if any(t.quant is not None for t in ins + outs) and kind not in _CASTS | set(_MOVEMENT):
        raise UnsupportedError(f"{op.name}: {kind} on quantized tensors; decompose the graph first")
    if kind == "stablehlo.dot_general":
        return _dot_general(op, *args)
    if kind == "stablehlo.convolution":
        return _convolution(op, *args)
    if kind == "stablehlo.reduce":
        return _reduce(op, *args)
    if kind == "stablehlo.reduce_window":
        return _reduce_window(op, *args)
    if kind == "stablehlo.pad":
        a = op.attrs
        return _pad(args[0], a["edge_padding_low"], a["edge_padding_high"],
                    a.get("interior_padding", [0] * args[0].ndim), args[1].reshape(()).item())
    if kind == "stablehlo.select":
        return np.where(args[0] != 0, args[1], args[2])
    if kind == "stablehlo.compare":
        return sem.COMPARE[str(op.attrs["comparison_direction"])](args[0], args[1])
    if kind in _FOLDERS:
        return _FOLDERS[kind](op, args, ins, outs)
    return _elementwise(op, args, arith)


def evaluate_op(graph: Graph, op: Op, args: list[np.ndarray], arith: Arithmetic = FLOAT32) -> np.ndarray:
    """One op's float value (storage integers for quantized results) from its operands' values."""
    ins = [graph.tensors[n] for n in op.inputs]
    outs = [graph.tensors[n] for n in op.outputs]
    if len(outs) != 1:
        raise UnsupportedError(f"{op.name}: the float evaluator handles single-result ops only ({op.kind})")
    value = np.asarray(_apply(op, args, ins, outs, arith)).reshape(outs[0].shape)
    return value.astype(arith.float_type if outs[0].dtype.is_float else outs[0].dtype.numpy)


def evaluate(graph: Graph, inputs: Sequence[np.ndarray], arith: Arithmetic = FLOAT32) -> dict[str, np.ndarray]:
    """Every tensor's value for `inputs` (one array per graph input, in order)."""
    if len(inputs) != len(graph.inputs):
        raise UnsupportedError(f"{len(graph.inputs)} input(s) expected, got {len(inputs)}")
    values = {n: t.data for n, t in graph.tensors.items() if t.is_const}
    values.update(zip(graph.inputs, (np.asarray(v) for v in inputs), strict=True))
    for op in graph.ops:
        values[op.outputs[0]] = evaluate_op(graph, op, [values[n] for n in op.inputs], arith)
    return values


def float_reference(graph: Graph, inputs: Sequence[np.ndarray], arith: Arithmetic = FLOAT32
                    ) -> list[np.ndarray]:
    """The graph's outputs under its float definition (decompose, then evaluate): float32 as the interpreter
    (default), or EXACT."""
    values = evaluate(decompose(graph), inputs, arith)
    return [values[n] for n in graph.outputs]
