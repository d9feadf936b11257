"""QDQ graphs -> quantized ops: one folding for every input format (`fold_qdq(graph, fmt)`, a Graph -> Graph
rewrite a front end runs before constant folding; docs/schemes.md "QDQ graphs").

A QDQ graph computes in float with quantize -> dequantize pairs ("fake quantization") around the float ops, as
PyTorch PT2E, JAX and ONNX QDQ export them. Its meaning is the float computation; each float op whose operands are
dequantized values and whose result is quantized is exactly the quantized op of the per-op definition (dequantize
the operands, float op, quantize), so folding keeps the meaning:

1. a float constant followed by a quantize becomes a quantized constant (the format's quantize formula at compile
   time; per tensor, per axis, sub-channel) -- in graphs with inputs (test programs without inputs keep their
   constants as fed inputs);
2. data movement of a dequantized per-tensor value (a transpose also of a per-axis one, the axis permuted) moves
   the stored values instead: the dequantize sinks below it;
3. a float op (contraction, reduction, element-wise op) whose operands are dequantized values and whose result is
   only quantized, to one type T, becomes the same op on the quantized operands with result T. Float constant
   operands of element-wise ops are quantized to T, init values of reductions to the operand's type. A chain of
   ops that commute with quantization between the op and the quantize folds too, the constants quantized to T:
   monotone activations with constant bounds (quantize is monotone, so quantize(max(v, c)) = max(quantize(v),
   quantize(c))), data movement (T per tensor; fill values quantized), and multiply / divide by a positive
   constant c, a change of scale (quantize_T(v / c) = quantize_T'(v), s_T' = c s_T): the op before gets T', the
   multiply / divide becomes a retyping op (stored values unchanged: average pooling, global mean);
   a contraction of a float lhs that is not dequantized with dequantized constant weights (weight-only QDQ)
   becomes the hybrid op (float lhs, quantized constant rhs, float result) where the format has one;
4. bias: `add(contraction, bias)` with a constant bias (float, or a dequantized i32 constant) is the contraction
   with an i32 accumulator type (scale s_x * s_w per output channel, zero point 0), an i32 add of the bias
   quantized to that type (round half to even in float64, |error| <= 0.5 s_x s_w; or, in a format whose runtime
   adds the stored integers of a dequantized i32 bias, those integers), and a requantization to T;
5. the remaining dequantize -> quantize pairs become a requantization (quantized -> quantized).

Float graph inputs stay float and final dequantizes stay (float outputs): the signature is kept. A float compute op
left between quantized values after folding is an UnsupportedError naming the op and why it did not fold.

**The per-format table** (`QdqFormat`). The folding works on Graph ops and knows a format only through its table;
StableHLO's is `STABLEHLO` in qcodegen/frontends/stablehlo_qdq.py. What a format's importer must provide:

- Quantization lives in the tensor types: the result of a quantize op (and the operand of a dequantize op) is a
  Tensor with a QuantType. A quantize / dequantize op's data is its operand 0; further operands (ONNX's scale and
  zero-point inputs) are ignored by the folding, so the importer must have put them into the types.
- `quantize` / `dequantize`: the op kinds of float -> quantized (also quantized -> quantized) and quantized ->
  float. `requantize_kind`, `dequantize_kind`, `retype_kind`: the kinds the folding creates, each with one
  operand and a typed result: a quantized -> quantized requantization, a dequantization below moved values, and a
  retyping that keeps the stored values (the format's lowering must accept these forms). The requantizations carry
  attrs["from_qdq"] = True: they stand for the QDQ program's dequantize -> quantize, which a format's own
  requantization may round differently (StableHLO's interpreter merges the two scales into one float32 multiplier).
- `movement`: data movement kinds -> positions of fill-value operands (a pad value, quantized to the moved type);
  the other operands that are not static are moved values. `transpose_axis(op, axis)`: where a transpose moves a
  per-axis quantization axis (None: the op is not a transpose).
- `contractions` (operands lhs, rhs), `reductions` (operand 0 the data, the other non-static operands init values,
  quantized to operand 0's type), `elementwise` (every non-static operand a dequantized value or a constant).
- `activations`: monotone ops with constant bounds -> the position of the value operand (None: any position).
  `scalings`: multiply / divide kinds -> whether the kind divides (the constant must then be operand 1).
- `static_operands`: kinds -> operand positions that are not values at all (shapes, axes, pads as tensors): passed
  through untouched.
- `bias_add`: the add kind of the bias pattern; `output_channel_axis(graph, op, weight_axis)`: the output axis of
  a contraction's per-channel accumulator for weights quantized per tensor (None) or along `weight_axis`, or None
  when that granularity cannot carry a bias; `hybrid`: whether weight-only contractions become hybrid ops;
  `integer_bias`: whether a bias that is a dequantized i32 constant (through data movement) is its stored
  integers (onnxruntime's fused QLinearConv / QGemm add them as they are) rather than its float value requantized.
- `quantize_values(values, q)`: the format's quantize formula (storage integers); `evaluate(graph, op, args)`: the
  float value of an op on constant operands (raises UnsupportedError when it cannot).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from ..errors import UnsupportedError
from ..ir.graph import Graph, Op, Tensor
from ..ir.quant import QuantType, same_type

_I32 = 2 ** 31
FROM_QDQ = {"from_qdq": True}  # the attribute of the requantizations the folding creates (module docstring)


@dataclass(frozen=True)
class QdqFormat:
    """How one input format spells the ops the QDQ folding needs (module docstring)."""

    name: str
    quantize: frozenset[str]
    dequantize: frozenset[str]
    requantize_kind: str
    dequantize_kind: str
    retype_kind: str
    movement: Mapping[str, tuple[int, ...]]
    contractions: frozenset[str]
    reductions: frozenset[str]
    elementwise: frozenset[str]
    activations: Mapping[str, int | None]
    scalings: Mapping[str, bool]
    bias_add: str
    output_channel_axis: Callable[[Graph, Op, int | None], int | None]
    quantize_values: Callable[[np.ndarray, QuantType], np.ndarray]
    evaluate: Callable[[Graph, Op, list[np.ndarray]], np.ndarray]
    transpose_axis: Callable[[Op, int], int | None] = lambda op, axis: None
    static_operands: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    hybrid: bool = False
    integer_bias: bool = False

    def data_operands(self, op: Op) -> list[int]:
        """Positions of the operands that carry values (not static, not fill values)."""
        skip = set(self.static_operands.get(op.kind, ())) | set(self.movement.get(op.kind, ()))
        return [i for i in range(len(op.inputs)) if i not in skip]

    def commutes(self, op: Op) -> bool:
        """Whether op can sit between a folded op and its quantize: quantize(op(v, c)) = op(quantize(v), c')."""
        return (op.kind in self.activations or op.kind in self.scalings
                or (op.kind in self.movement and len(self.data_operands(op)) == 1))


class _Folder:
    def __init__(self, graph: Graph, fmt: QdqFormat) -> None:
        self.graph = graph
        self.fmt = fmt
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
        try:
            return self.fmt.evaluate(self.graph, op, args)
        except UnsupportedError:
            return None

    def quantized_const(self, name: str, q: QuantType, base: str) -> str | None:
        """A new constant: float tensor `name` (computed from constants) quantized to q, or None."""
        value = self.const_value(name)
        if value is None or self.graph.tensors[name].quant is not None:
            return None
        shape = self.graph.tensors[name].shape
        return self.new_tensor(base, shape, q, self.fmt.quantize_values(np.broadcast_to(value, shape), q))

    def source(self, name: str) -> str | None:
        """The quantized tensor whose dequantization is the float tensor `name`, if any."""
        op = self.producer(name)
        return op.inputs[0] if op is not None and op.kind in self.fmt.dequantize else None

    def static(self, op: Op) -> set[int]:
        return set(self.fmt.static_operands.get(op.kind, ()))

    # -- passes

    def quantize_constants(self) -> None:
        for op in list(self.graph.ops):
            if op.kind in self.fmt.quantize and self.graph.tensors[op.inputs[0]].quant is None:
                value = self.const_value(op.inputs[0])
                out = self.graph.tensors[op.outputs[0]]
                if value is not None:
                    self.graph.ops.remove(op)
                    out.data = self.fmt.quantize_values(value, out.quant).astype(out.dtype.numpy)

    def sink(self, op: Op) -> None:
        """Data movement of dequantized values: move the stored values, dequantize after."""
        if len(op.outputs) != 1:
            return
        moved = self.fmt.data_operands(op)
        sources = [self.source(op.inputs[i]) for i in moved]
        if not sources or any(s is None for s in sources):
            return
        types = [self.graph.tensors[s].quant for s in sources]
        q = types[0]
        axis = self.fmt.transpose_axis(op, q.axis) if q.kind == "per_axis" and len(types) == 1 else None
        if axis is not None:  # PT2E's transposed per-channel weights
            q = QuantType(q.storage, q.scales, q.zero_points, axis=axis, storage_min=q.storage_min,
                          storage_max=q.storage_max)
        elif q.kind != "per_tensor" or any(not same_type(q, t) for t in types):
            return
        inputs = list(op.inputs)
        for i, src in zip(moved, sources, strict=True):
            inputs[i] = src
        for i in self.fmt.movement[op.kind]:
            fill = self.quantized_const(op.inputs[i], q, f"{op.outputs[0]}_fill")
            if fill is None:
                return
            inputs[i] = fill
        out = op.outputs[0]
        result = self.new_tensor(f"{out}_q", self.graph.tensors[out].shape, q)
        op.inputs, op.outputs = inputs, [result]
        self.insert_after(op, Op(self.fmt.dequantize_kind, [result], [out], {}, op.name))

    def result_type(self, name: str) -> tuple[QuantType, list[tuple[Op, QuantType]]] | None:
        """The type every use of float `name` quantizes to (directly or through a chain of ops that commute with
        quantization), and that chain: (op, the type of its result)."""
        users = self.users(name)
        if name in self.graph.outputs or not users:
            return None
        if all(u.kind in self.fmt.quantize for u in users):
            types = [self.graph.tensors[u.outputs[0]].quant for u in users]
            return (types[0], []) if all(same_type(types[0], t) for t in types) else None
        act = users[0]
        if len(users) != 1 or not self.fmt.commutes(act) or len(act.outputs) != 1 or act.inputs.count(name) != 1:
            return None
        position = act.inputs.index(name)
        movement = act.kind in self.fmt.movement
        wanted = self.fmt.activations.get(act.kind)
        if (movement and self.fmt.data_operands(act) != [position]) or (wanted is not None and position != wanted):
            return None
        if self.fmt.scalings.get(act.kind) and position != 0:
            return None
        others = [self.const_value(n) for i, n in enumerate(act.inputs) if i != position and i not in self.static(act)]
        if any(v is None for v in others):
            return None
        found = self.result_type(act.outputs[0])
        if found is None or (movement and found[0].kind != "per_tensor"):
            return None
        q = found[0]
        if act.kind in self.fmt.scalings:
            c = np.unique(np.asarray(others[0], np.float64))
            if c.size != 1 or not c[0] > 0:
                return None
            factor = float(c[0]) if self.fmt.scalings[act.kind] else 1 / float(c[0])
            q = QuantType(q.storage, q.scales * factor, q.zero_points, axis=q.axis, block_sizes=q.block_sizes,
                          storage_min=q.storage_min, storage_max=q.storage_max)
        return q, [(act, found[0]), *found[1]]

    def operands(self, op: Op, q: QuantType) -> list[str]:
        """Quantized operands for a folded op (checked by `fold`): dequantized values' sources, constants quantized
        to q (element-wise ops) or to the first operand's type (reduction init values); static operands as they
        are."""
        out: list[str] = []
        static = self.static(op)
        for i, name in enumerate(op.inputs):
            if i in static:
                out.append(name)
                continue
            src = self.source(name)
            target = self.graph.tensors[out[0]].quant if op.kind in self.fmt.reductions and out else q
            out.append(src if src is not None else self.quantized_const(name, target, f"{name}_q"))
        return out

    def finish(self, current: str, chain: list[tuple[Op, QuantType]]) -> None:
        """Fold the chain after `current` (already of the chain's input type; result_type) and drop the final
        quantizes. A multiply / divide by a positive constant only changes the scale: the stored values are kept
        (a retyping op)."""
        for act, q in chain:
            if act.kind in self.fmt.scalings:
                act.kind, act.inputs, act.attrs = self.fmt.retype_kind, [current], {}
            else:
                static = self.static(act)
                position = next(i for i, n in enumerate(act.inputs) if i not in static and self.const_value(n) is None)
                act.inputs = [n if i in static else current if i == position
                              else self.quantized_const(n, q, f"{n}_q") for i, n in enumerate(act.inputs)]
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
        if op.kind == self.fmt.bias_add and self.fold_bias(op):
            return
        contraction = op.kind in self.fmt.contractions
        if contraction and self.hybrid(op):
            return
        static = self.static(op)
        for i, name in enumerate(op.inputs):
            if i not in static and self.source(name) is None and (contraction or self.const_value(name) is None):
                dequantize = self.fmt.dequantize_kind.split(".", 1)[-1]
                self.reasons[id(op)] = (f"operand {i} ({name!r}) is not a {dequantize} result" + (
                    "" if contraction else " or a constant"))
                return
        found = self.result_type(op.outputs[0])
        if found is None:
            self.reasons.setdefault(id(op), "its result is not only quantized (to one type), directly or through "
                                            "data movement, monotone activations with constant bounds and "
                                            "multiply/divide by a positive constant")
            return
        q, chain = found
        op.inputs = self.operands(op, q)
        self.retype(op.outputs[0], q)
        self.finish(op.outputs[0], chain)

    def hybrid(self, op: Op) -> bool:
        """Weight-only QDQ: a float lhs that is not dequantized and dequantized constant weights become a hybrid op
        (float lhs, quantized constant rhs, float result; docs/schemes.md "Hybrid weight-only ops")."""
        if not self.fmt.hybrid:
            return False
        lhs, rhs = op.inputs[:2]
        weights = self.source(rhs)
        if self.source(lhs) is not None or weights is None or not self.graph.tensors[weights].is_const:
            return False
        op.inputs = [lhs, weights, *op.inputs[2:]]
        return True

    def accumulator(self, op: Op) -> QuantType | None:
        """The i32 type of a contraction's exact sum: scale s_x * s_w per output channel."""
        x, w = (self.graph.tensors[self.source(n)].quant for n in op.inputs[:2])
        y = self.graph.tensors[op.outputs[0]]
        if x.kind != "per_tensor" or w.kind == "sub_channel":
            return None
        axis = self.fmt.output_channel_axis(self.graph, op, w.axis if w.kind == "per_axis" else None)
        if axis is None:
            return None
        scales = x.scale * np.broadcast_to(w.scales, (y.shape[axis],))
        return QuantType.per_axis("i32", scales, 0, axis=axis)

    def fold_bias(self, add: Op) -> bool:
        """dot/conv + constant bias (module docstring, 4.)."""
        for k in (0, 1):
            contract = self.producer(add.inputs[k])
            bias = self.const_value(add.inputs[1 - k])
            if (contract is None or contract.kind not in self.fmt.contractions or bias is None
                    or self.users(add.inputs[k]) != [add] or len(contract.outputs) != 1):
                continue
            found = self.result_type(add.outputs[0])
            if found is None:
                return False
            if any(self.source(n) is None for n in contract.inputs[:2]):
                return False
            acc = self.accumulator(contract)
            if acc is None:
                self.reasons[id(contract)] = ("its bias add needs a per-tensor lhs and per-tensor or "
                                              "per-output-channel weights")
                return False
            shape = self.graph.tensors[add.outputs[0]].shape
            scales, _ = acc.expand(shape)
            stored = self.stored_integers(add.inputs[1 - k], acc) if self.fmt.integer_bias else None
            values = (np.rint(np.broadcast_to(np.asarray(bias, np.float64), shape) / scales) if stored is None
                      else np.broadcast_to(stored, shape).astype(np.float64))
            if np.any(np.abs(values) >= _I32):
                self.reasons[id(contract)] = "its bias quantized to the accumulator scale overflows int32"
                return False
            contract.inputs = [self.source(n) for n in contract.inputs[:2]] + contract.inputs[2:]
            self.retype(contract.outputs[0], acc)
            bias_name = self.new_tensor(f"{add.outputs[0]}_bias", shape, acc, values.astype(np.int64))
            add.inputs = [contract.outputs[0], bias_name]
            self.retype(add.outputs[0], acc)
            q, chain = found
            requant = self.new_tensor(f"{add.outputs[0]}_q", shape, q)
            for user in self.users(add.outputs[0]):  # the chain's first op, or the quantizes
                user.inputs = [requant if n == add.outputs[0] else n for n in user.inputs]
            self.insert_after(add, Op(self.fmt.requantize_kind, [add.outputs[0]], [requant], dict(FROM_QDQ), add.name))
            self.finish(requant, chain)
            return True
        return False

    def stored_integers(self, name: str, acc: QuantType) -> np.ndarray | None:
        """The stored values of a dequantized i32 constant that float tensor `name` is (through data movement of
        one operand) when its scales are the accumulator's rounded to float32 (zero points 0), or None."""
        op = self.producer(name)
        if op is None:
            return None
        if op.kind in self.fmt.dequantize:
            t, value = self.graph.tensors[op.inputs[0]], self.const_value(op.inputs[0])
            q = t.quant
            if value is None or t.dtype.name != "i32" or q.kind == "sub_channel" or np.any(q.zero_points != 0):
                return None
            wanted = np.unique(acc.scales.astype(np.float32))
            have = np.unique(q.scales.astype(np.float32))
            same = (have.size == 1 and wanted.size == 1 and have[0] == wanted[0]) or (
                q.kind == "per_axis" and np.array_equal(q.scales.astype(np.float32),
                                                        np.broadcast_to(acc.scales, q.scales.shape).astype(np.float32)))
            return value if same else None
        moved = self.fmt.data_operands(op) if op.kind in self.fmt.movement else []
        if len(moved) != 1 or len(op.outputs) != 1:
            return None
        inner = self.stored_integers(op.inputs[moved[0]], acc)
        if inner is None:
            return None
        args = [inner if i == moved[0] else self.const_value(n) for i, n in enumerate(op.inputs)]
        try:
            return self.fmt.evaluate(self.graph, op, args)
        except UnsupportedError:
            return None

    def requantize_pairs(self) -> None:
        """dq(a) -> q(T): a requantization of a, or a itself (renamed to the quantize's result) when its type is T
        and an op produces it."""
        for op in list(self.graph.ops):
            src = self.source(op.inputs[0]) if op.kind in self.fmt.quantize else None
            if src is None:
                continue
            out = op.outputs[0]
            if same_type(self.graph.tensors[src].quant, self.graph.tensors[out].quant) and self.producer(src):
                self.graph.ops.remove(op)
                self.rename(src, out)
            else:
                op.kind, op.inputs, op.attrs = self.fmt.requantize_kind, [src], dict(FROM_QDQ)

    def check(self) -> None:
        """No float compute op may remain between quantized values."""
        fmt = self.fmt
        dequantized = {n for op in self.graph.ops if op.kind in fmt.dequantize for n in op.outputs}
        for op in self.graph.ops:
            ins = [self.graph.tensors[n] for n in op.inputs]
            if op.kind in fmt.quantize or op.kind in fmt.dequantize or op.kind in fmt.movement or any(
                    t.quant is not None for t in ins):
                continue
            if any(n in dequantized for n in op.inputs):
                dequantized.update(op.outputs)
                if all(self.graph.tensors[n].dtype.is_float for n in op.outputs):
                    reason = self.reasons.get(id(op), "it is not an op qcodegen folds (contractions, reductions, "
                                              "element-wise ops, data movement)")
                    raise UnsupportedError(f"{self.graph.op_label(op)}: float {op.kind.split('.', 1)[-1]} between "
                                           f"quantized values could not be folded into a quantized op: {reason}")

    def prune_dead(self) -> None:
        prune_dead_ops(self.graph, lambda op: op.kind in self.fmt.dequantize)


def is_qdq(graph: Graph, fmt: QdqFormat) -> bool:
    """Whether a float op (other than a quantize) reads a dequantized value."""
    dequantized = {n for op in graph.ops if op.kind in fmt.dequantize for n in op.outputs}
    return any(op.kind not in fmt.quantize and set(op.inputs) & dequantized for op in graph.ops)


def prune_dead_ops(graph: Graph, removable: Callable[[Op], bool] = lambda op: True) -> None:
    """Drop the removable ops nothing reads (graph outputs are read), and their outputs, until none is left."""
    while True:
        used = {n for op in graph.ops for n in op.inputs} | set(graph.outputs)
        dead = [op for op in graph.ops if removable(op) and not set(op.outputs) & used]
        if not dead:
            return
        for op in dead:
            graph.ops.remove(op)
            for n in op.outputs:
                del graph.tensors[n]


def fold_qdq(graph: Graph, fmt: QdqFormat) -> Graph:
    """Fold the QDQ patterns of `graph` in place (module docstring); a graph without them is returned unchanged."""
    if not is_qdq(graph, fmt):
        return graph
    f = _Folder(graph, fmt)
    if graph.inputs:
        f.quantize_constants()
    folded = fmt.contractions | fmt.reductions | fmt.elementwise
    passes: list[tuple[Callable[[Op], bool], Callable[[Op], None]]] = [
        (lambda op: op.kind in fmt.movement, f.sink), (lambda op: op.kind in folded, f.fold)]
    for selected, apply in passes:
        for op in list(graph.ops):
            if selected(op) and op in graph.ops:
                apply(op)
    f.requantize_pairs()
    f.prune_dead()
    f.check()
    return graph
