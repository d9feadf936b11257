"""QDQ graphs -> quantized ops (`fold_qdq`, a Graph -> Graph rewrite run by the StableHLO front end before
constant folding; docs/schemes.md "QDQ graphs").

A QDQ program computes in float with `uniform_quantize` -> `uniform_dequantize` pairs around the float ops (as
PyTorch PT2E, JAX and ONNX QDQ export them). Its meaning is the float computation; each float op whose operands are
dequantized values and whose result is quantized is exactly the quantized op of StableHLO's per-op definition
(dequantize operands, float op, quantize), so folding keeps the meaning:

1. a float constant followed by `uniform_quantize` becomes a quantized constant (the interpreter's formula at
   compile time; per tensor, per axis, sub-channel) -- in programs with arguments (test programs without arguments
   keep their constants as fed inputs);
2. data movement (reshape, transpose, broadcast_in_dim, slice, reverse, pad, concatenate of one type) of a
   dequantized per-tensor value (transpose: also per-axis) moves the stored values instead: the dequantize sinks
   below it;
3. a float op (dot_general, convolution, reduce, reduce_window, add, subtract, multiply, maximum, minimum, clamp,
   concatenate, the interpreter's unary ops) whose operands are dequantized values and whose result is only
   quantized, to one type T, becomes the same op on the quantized operands with result T. Float constant operands
   of element-wise ops are quantized to T, init values of reductions to the operand's type. A chain of ops that
   commute with quantization between the op and the quantize folds too, the constants quantized to T: monotone
   activations with constant bounds (maximum / minimum / clamp: ReLU, ReLU6; quantize is monotone, so
   quantize(max(v, c)) = max(quantize(v), quantize(c))), data movement (T per tensor; pad's value quantized), and
   multiply / divide by a positive constant c, a change of scale (quantize_T(v / c) = quantize_T'(v), s_T' = c s_T):
   the op before gets T', the multiply / divide becomes a retyping bitcast_convert (average pooling, global mean);
   a dot_general / convolution of a float lhs that is not dequantized with dequantized constant weights (weight-only
   QDQ) becomes the hybrid op (float lhs, quantized constant rhs, float result);
4. PT2E bias: `add(dot_general|convolution, bias)` with a constant bias (float, or a dequantized i32 constant) is
   the op with an i32 accumulator type (scale s_x * s_w per output channel, zero point 0), an i32 add of the bias
   quantized to that type (round half to even, |error| <= 0.5 s_x s_w), and a requantization to T;
5. the remaining dequantize -> quantize pairs become a requantization (quantized -> quantized uniform_quantize).

Float graph inputs stay float and are quantized in C; final dequantizes stay (float outputs): the signature is kept.
A float compute op left between quantized values after folding is an UnsupportedError naming the op and why it did
not fold.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..errors import UnsupportedError
from ..ir.graph import Graph, Op, Tensor
from ..ir.quant import QuantType
from ..semantics import stablehlo as sem

QUANTIZE, DEQUANTIZE = "stablehlo.uniform_quantize", "stablehlo.uniform_dequantize"
_QUANTIZES = (QUANTIZE, "quant.qcast")
_DEQUANTIZES = (DEQUANTIZE, "quant.dcast")
_SINK = {"stablehlo.reshape", "stablehlo.transpose", "stablehlo.broadcast_in_dim", "stablehlo.slice",
         "stablehlo.reverse", "stablehlo.pad", "stablehlo.concatenate"}
_CONTRACT = {"stablehlo.dot_general", "stablehlo.convolution"}
_REDUCE = {"stablehlo.reduce", "stablehlo.reduce_window"}
_ELEMENTWISE = {f"stablehlo.{n}" for n in (*sem.UNARY, "add", "subtract", "multiply", "maximum", "minimum",
                                           "clamp", "concatenate")}
_ACTIVATIONS = {"stablehlo.maximum", "stablehlo.minimum", "stablehlo.clamp"}
_SCALINGS = {"stablehlo.multiply", "stablehlo.divide"}  # by a positive constant: a change of scale
_COMMUTING = _ACTIVATIONS | _SCALINGS | _SINK - {"stablehlo.concatenate"}  # quantize(op(v, c)) = op(quantize(v), c')
_RETYPE = "stablehlo.bitcast_convert"  # stored values unchanged, another quantized type
_I32 = 2 ** 31


class _Folder:
    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.reasons: dict[int, str] = {}
        self.values: dict[str, np.ndarray | None] = {}  # const_value cache (folding never changes these)

    # -- graph helpers

    def producer(self, name: str) -> Op | None:
        return next((op for op in self.graph.ops if name in op.outputs), None)

    def users(self, name: str) -> list[Op]:
        return [op for op in self.graph.ops if name in op.inputs]

    def new_tensor(self, base: str, shape: tuple[int, ...], q: QuantType, data: np.ndarray | None = None) -> str:
        name = base
        while name in self.graph.tensors:
            name += "_"
        self.graph.tensors[name] = Tensor(name, shape, q.storage, q, data)
        return name

    def retype(self, name: str, q: QuantType) -> None:
        t = self.graph.tensors[name]
        self.graph.tensors[name] = Tensor(name, t.shape, q.storage, q)

    def insert_after(self, anchor: Op, op: Op) -> None:
        self.graph.ops.insert(self.graph.ops.index(anchor) + 1, op)

    def const_value(self, name: str) -> np.ndarray | None:
        """The value of a tensor computed from constants only (None if it depends on an input)."""
        if name not in self.values:
            self.values[name] = self._evaluate(name)
        return self.values[name]

    def _evaluate(self, name: str) -> np.ndarray | None:
        t = self.graph.tensors[name]
        if t.is_const:
            return t.data
        op = self.producer(name)
        if op is None or len(op.outputs) != 1:
            return None
        args = [self.const_value(n) for n in op.inputs]
        if any(a is None for a in args):
            return None
        from .stablehlo_float import evaluate_op  # stablehlo_float imports the front end, which imports us
        try:
            return evaluate_op(self.graph, op, args)
        except UnsupportedError:
            return None

    def quantized_const(self, name: str, q: QuantType, base: str) -> str | None:
        """A new constant: float tensor `name` (computed from constants) quantized to q, or None."""
        value = self.const_value(name)
        if value is None or self.graph.tensors[name].quant is not None:
            return None
        shape = self.graph.tensors[name].shape
        return self.new_tensor(base, shape, q, sem.quantize(np.broadcast_to(value, shape), q))

    def source(self, name: str) -> str | None:
        """The quantized tensor whose dequantization is the float tensor `name`, if any."""
        op = self.producer(name)
        return op.inputs[0] if op is not None and op.kind in _DEQUANTIZES else None

    # -- passes

    def quantize_constants(self) -> None:
        for op in list(self.graph.ops):
            if op.kind in _QUANTIZES and self.graph.tensors[op.inputs[0]].quant is None:
                value = self.const_value(op.inputs[0])
                out = self.graph.tensors[op.outputs[0]]
                if value is not None:
                    self.graph.ops.remove(op)
                    out.data = sem.quantize(value, out.quant).astype(out.dtype.numpy)

    def sink(self, op: Op) -> None:
        """Data movement of dequantized values: move the stored values, dequantize after."""
        if len(op.outputs) != 1:
            return
        sources = [self.source(n) for n in op.inputs[:1 if op.kind == "stablehlo.pad" else None]]
        if any(s is None for s in sources):
            return
        types = [self.graph.tensors[s].quant for s in sources]
        q = types[0]
        if q.kind == "per_axis" and op.kind == "stablehlo.transpose":  # PT2E's transposed per-channel weights
            q = QuantType(q.storage, q.scales, q.zero_points, axis=list(op.attrs["permutation"]).index(q.axis),
                          storage_min=q.storage_min, storage_max=q.storage_max)
        elif q.kind != "per_tensor" or any(not sem.same_type(q, t) for t in types):
            return
        inputs = list(sources)
        if op.kind == "stablehlo.pad":
            fill = self.quantized_const(op.inputs[1], q, f"{op.outputs[0]}_pad_value")
            if fill is None:
                return
            inputs.append(fill)
        out = op.outputs[0]
        moved = self.new_tensor(f"{out}_q", self.graph.tensors[out].shape, q)
        op.inputs, op.outputs = inputs, [moved]
        self.insert_after(op, Op(DEQUANTIZE, [moved], [out], {}, op.name))

    def result_type(self, name: str) -> tuple[QuantType, list[tuple[Op, QuantType]]] | None:
        """The type every use of float `name` quantizes to (directly or through a chain of ops that commute with
        quantization), and that chain: (op, the type of its result)."""
        users = self.users(name)
        if name in self.graph.outputs or not users:
            return None
        if all(u.kind in _QUANTIZES for u in users):
            types = [self.graph.tensors[u.outputs[0]].quant for u in users]
            return (types[0], []) if all(sem.same_type(types[0], t) for t in types) else None
        act = users[0]
        if len(users) != 1 or act.kind not in _COMMUTING or len(act.outputs) != 1 or act.inputs.count(name) != 1:
            return None
        position = 1 if act.kind == "stablehlo.clamp" else act.inputs.index(name)
        others = [self.const_value(n) for i, n in enumerate(act.inputs) if i != position]
        if any(v is None for v in others) or (act.kind in _SINK | {"stablehlo.divide"} and position != 0):
            return None
        found = self.result_type(act.outputs[0])
        if found is None or (act.kind in _SINK and found[0].kind != "per_tensor"):
            return None
        q = found[0]
        if act.kind in _SCALINGS:
            c = np.unique(np.asarray(others[0], np.float64))
            if c.size != 1 or not c[0] > 0:
                return None
            factor = float(c[0]) if act.kind == "stablehlo.divide" else 1 / float(c[0])
            q = QuantType(q.storage, q.scales * factor, q.zero_points, axis=q.axis, block_sizes=q.block_sizes,
                          storage_min=q.storage_min, storage_max=q.storage_max)
        return q, [(act, found[0]), *found[1]]

    def operands(self, op: Op, q: QuantType) -> list[str]:
        """Quantized operands for a folded op (checked by `fold`): dequantized values' sources, constants quantized
        to q (element-wise ops) or to the first operand's type (reduction init values)."""
        out: list[str] = []
        for name in op.inputs:
            src = self.source(name)
            target = self.graph.tensors[out[0]].quant if op.kind in _REDUCE and out else q
            out.append(src if src is not None else self.quantized_const(name, target, f"{name}_q"))
        return out

    def finish(self, current: str, chain: list[tuple[Op, QuantType]]) -> None:
        """Fold the chain after `current` (already of the chain's input type; result_type) and drop the final
        quantizes. A multiply / divide by a positive constant only changes the scale: the stored values are kept
        (a retyping bitcast)."""
        for act, q in chain:
            if act.kind in _SCALINGS:
                act.kind, act.inputs, act.attrs = _RETYPE, [current], {}
            else:
                position = 1 if act.kind == "stablehlo.clamp" else next(
                    i for i, n in enumerate(act.inputs) if self.const_value(n) is None)
                act.inputs = [current if i == position else self.quantized_const(n, q, f"{n}_q")
                              for i, n in enumerate(act.inputs)]
            self.retype(act.outputs[0], q)
            current = act.outputs[0]
        quantizes = self.users(current)
        keep = quantizes[0].outputs[0]
        producer = self.producer(current)
        producer.outputs[producer.outputs.index(current)] = keep
        del self.graph.tensors[current]
        for qop in quantizes:
            self.graph.ops.remove(qop)
            if qop.outputs[0] != keep:
                self.rename(qop.outputs[0], keep)

    def rename(self, old: str, new: str) -> None:
        for op in self.graph.ops:
            op.inputs = [new if n == old else n for n in op.inputs]
            op.outputs = [new if n == old else n for n in op.outputs]
        self.graph.outputs = [new if n == old else n for n in self.graph.outputs]
        del self.graph.tensors[old]

    def fold(self, op: Op) -> None:
        if len(op.outputs) != 1 or self.graph.tensors[op.outputs[0]].quant is not None:
            return
        if op.kind == "stablehlo.add" and self.fold_bias(op):
            return
        if op.kind in _CONTRACT and self.hybrid(op):
            return
        for i, name in enumerate(op.inputs):
            if self.source(name) is None and (op.kind in _CONTRACT or self.const_value(name) is None):
                self.reasons[id(op)] = (f"operand {i} ({name!r}) is not a uniform_dequantize result" + (
                    "" if op.kind in _CONTRACT else " or a constant"))
                return
        found = self.result_type(op.outputs[0])
        if found is None:
            self.reasons.setdefault(id(op), "its result is not only quantized (to one type), directly or through "
                                            "data movement, maximum/minimum/clamp with constant bounds and "
                                            "multiply/divide by a positive constant")
            return
        q, chain = found
        op.inputs = self.operands(op, q)
        self.retype(op.outputs[0], q)
        self.finish(op.outputs[0], chain)

    def hybrid(self, op: Op) -> bool:
        """Weight-only QDQ: a float lhs that is not dequantized and dequantized constant weights become a hybrid op
        (float lhs, quantized constant rhs, float result; docs/schemes.md "Hybrid weight-only ops")."""
        lhs, rhs = op.inputs
        weights = self.source(rhs)
        if self.source(lhs) is not None or weights is None or not self.graph.tensors[weights].is_const:
            return False
        op.inputs = [lhs, weights]
        return True

    def accumulator(self, op: Op) -> QuantType | None:
        """The i32 type of a dot_general / convolution's exact sum: scale s_x * s_w per output channel."""
        x, w = (self.graph.tensors[self.source(n)].quant for n in op.inputs)
        y = self.graph.tensors[op.outputs[0]]
        if x.kind != "per_tensor" or w.kind == "sub_channel":
            return None
        if op.kind == "stablehlo.convolution":
            d = op.attrs["dimension_numbers"]
            if w.kind == "per_axis" and w.axis != d.kernel_output_feature_dimension:
                return None
            axis = d.output_feature_dimension
        elif w.kind == "per_axis":
            d = op.attrs["dot_dimension_numbers"]
            rb, rc = list(d.rhs_batching_dimensions), list(d.rhs_contracting_dimensions)
            rf = [i for i in range(len(self.graph.tensors[op.inputs[1]].shape)) if i not in rb + rc]
            if w.axis not in rf:
                return None
            axis = len(y.shape) - len(rf) + rf.index(w.axis)
        else:
            axis = len(y.shape) - 1
        scales = x.scale * np.broadcast_to(w.scales, (y.shape[axis],))
        return QuantType.per_axis("i32", scales, 0, axis=axis)

    def fold_bias(self, add: Op) -> bool:
        """PT2E's dot/conv + constant bias (module docstring, 4.)."""
        for k in (0, 1):
            contract = self.producer(add.inputs[k])
            bias = self.const_value(add.inputs[1 - k])
            if (contract is None or contract.kind not in _CONTRACT or bias is None
                    or self.users(add.inputs[k]) != [add] or len(contract.outputs) != 1):
                continue
            found = self.result_type(add.outputs[0])
            if found is None:
                return False
            if any(self.source(n) is None for n in contract.inputs):
                return False
            acc = self.accumulator(contract)
            if acc is None:
                self.reasons[id(contract)] = ("its bias add needs a per-tensor lhs and per-tensor or "
                                              "per-output-channel weights")
                return False
            shape = self.graph.tensors[add.outputs[0]].shape
            scales, _ = acc.expand(shape)
            values = np.rint(np.broadcast_to(np.asarray(bias, np.float64), shape) / scales)
            if np.any(np.abs(values) >= _I32):
                self.reasons[id(contract)] = "its bias quantized to the accumulator scale overflows int32"
                return False
            contract.inputs = [self.source(n) for n in contract.inputs]
            self.retype(contract.outputs[0], acc)
            bias_name = self.new_tensor(f"{add.outputs[0]}_bias", shape, acc, values.astype(np.int64))
            add.inputs = [contract.outputs[0], bias_name]
            self.retype(add.outputs[0], acc)
            q, chain = found
            requant = self.new_tensor(f"{add.outputs[0]}_q", shape, q)
            for user in self.users(add.outputs[0]):  # the chain's first op, or the quantizes
                user.inputs = [requant if n == add.outputs[0] else n for n in user.inputs]
            self.insert_after(add, Op(QUANTIZE, [add.outputs[0]], [requant], {}, add.name))
            self.finish(requant, chain)
            return True
        return False

    def requantize_pairs(self) -> None:
        """dq(a) -> q(T): a requantization of a, or a itself (renamed to the quantize's result) when its type is T
        and an op produces it."""
        for op in list(self.graph.ops):
            src = self.source(op.inputs[0]) if op.kind in _QUANTIZES else None
            if src is None:
                continue
            out = op.outputs[0]
            if sem.same_type(self.graph.tensors[src].quant, self.graph.tensors[out].quant) and self.producer(src):
                self.graph.ops.remove(op)
                self.rename(src, out)
            else:
                op.inputs = [src]

    def check(self) -> None:
        """No float compute op may remain between quantized values."""
        dequantized = {n for op in self.graph.ops if op.kind in _DEQUANTIZES for n in op.outputs}
        for op in self.graph.ops:
            ins = [self.graph.tensors[n] for n in op.inputs]
            if op.kind in _QUANTIZES or op.kind in _DEQUANTIZES or op.kind in _SINK or any(
                    t.quant is not None for t in ins):
                continue
            if any(n in dequantized for n in op.inputs):
                dequantized.update(op.outputs)
                if all(self.graph.tensors[n].dtype.is_float for n in op.outputs):
                    reason = self.reasons.get(id(op), "it is not an op qcodegen folds (dot_general, convolution, "
                                              "reduce, reduce_window, element-wise ops, data movement)")
                    raise UnsupportedError(f"{self.graph.op_label(op)}: float {op.kind.split('.', 1)[1]} between "
                                           f"quantized values could not be folded into a quantized op: {reason}")

    def prune_dead(self) -> None:
        used = {n for op in self.graph.ops for n in op.inputs} | set(self.graph.outputs)
        while True:
            dead = [op for op in self.graph.ops if op.kind in _DEQUANTIZES and not set(op.outputs) & used]
            if not dead:
                return
            for op in dead:
                self.graph.ops.remove(op)
                for n in op.outputs:
                    del self.graph.tensors[n]
            used = {n for op in self.graph.ops for n in op.inputs} | set(self.graph.outputs)


def is_qdq(graph: Graph) -> bool:
    """Whether a float op (other than a quantize) reads a dequantized value."""
    dequantized = {n for op in graph.ops if op.kind in _DEQUANTIZES for n in op.outputs}
    return any(op.kind not in _QUANTIZES and set(op.inputs) & dequantized for op in graph.ops)


def fold_qdq(graph: Graph) -> Graph:
    """Fold the QDQ patterns of `graph` in place (module docstring); a graph without them is returned unchanged."""
    if not is_qdq(graph):
        return graph
    f = _Folder(graph)
    if graph.inputs:
        f.quantize_constants()
    passes: list[tuple[set[str], Callable[[Op], None]]] = [
        (_SINK, f.sink), (_CONTRACT | _REDUCE | _ELEMENTWISE, f.fold)]
    for kinds, apply in passes:
        for op in list(graph.ops):
            if op.kind in kinds and op in graph.ops:
                apply(op)
    f.requantize_pairs()
    f.prune_dead()
    f.check()
    return graph
