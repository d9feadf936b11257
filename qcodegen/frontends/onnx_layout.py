"""Channels-last layout for ONNX graphs (a Graph -> Graph rewrite after import).

ONNX data is NCHW; qcodegen's convolution and pooling primitives are NHWC. Instead of transposing around every
convolution, each rank-4 tensor gets the layout its producer and consumers prefer: convolutions and pools compute
in NHWC ("layout" attribute), element-wise and data-movement ops follow their inputs (axes, pads, permutations and
per-axis quantization remapped), and a TRANSPOSE is inserted only where a consumer needs the other layout: the
matrix products, reshapes that would reorder elements, mixed operands, and the graph outputs (which keep ONNX's
layout and names). Graph inputs stay NCHW. A tensor may exist in both layouts (one TRANSPOSE between them).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..ir.graph import Graph, Op, Tensor
from ..ir.quant import QuantType

LOGICAL, NHWC = "logical", "nhwc"
TO_NHWC, TO_NCHW = (0, 2, 3, 1), (0, 3, 1, 2)
PHYSICAL_AXIS = (0, 3, 1, 2)  # NCHW axis -> NHWC axis
_SPATIAL = {"onnx.QLinearConv", "onnx.QLinearConvTranspose", "onnx.ConvInteger", "onnx.MaxPool",
            "onnx.QLinearAveragePool", "onnx.QLinearGlobalAveragePool"}
_FOLLOW = {"onnx.QuantizeLinear", "onnx.DequantizeLinear", "onnx.QLinearSigmoid", "onnx.QLinearLeakyRelu",
           "onnx.Requantize", "onnx.Tanh", "onnx.HardSigmoid", "onnx.HardSwish"}
_BINARY = {"onnx.QLinearAdd", "onnx.QLinearMul", "onnx.Sub"}
_CONCAT = {"onnx.Concat", "onnx.QLinearConcat"}


def _nhwc_quant(q: QuantType | None) -> QuantType | None:
    if q is None or q.kind == "per_tensor":
        return q
    if q.kind == "per_axis":
        return QuantType.per_axis(q.storage, q.scales, q.zero_points, PHYSICAL_AXIS[q.axis],
                                  storage_min=q.storage_min, storage_max=q.storage_max)
    return None  # blocked: no channels-last form


class _Layout:
    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.variants: dict[str, dict[str, str]] = {n: {LOGICAL: n} for n in graph.tensors}
        self.ops: list[Op] = []
        self.outputs = set(graph.outputs)

    # --- variants of a tensor -------------------------------------------------------------------
    def tensor(self, name: str) -> Tensor:
        return self.graph.tensors[name]

    def has(self, name: str, layout: str) -> bool:
        return layout in self.variants[name]

    def get(self, name: str, layout: str) -> str:
        """The graph tensor holding ONNX tensor `name` in `layout` (a TRANSPOSE from the other one if needed)."""
        have = self.variants[name]
        if layout in have:
            return have[layout]
        src = next(iter(have.values()))
        t = self.tensor(src)
        perm = TO_NHWC if layout == NHWC else TO_NCHW
        target = name if layout == LOGICAL and name not in self.graph.tensors else self._fresh(f"{name}__{layout}")
        quant = _nhwc_quant(t.quant) if layout == NHWC else self._logical_quant(name)
        self.graph.tensors[target] = Tensor(target, tuple(t.shape[p] for p in perm), t.dtype, quant)
        self.ops.append(Op("onnx.Transpose", [src], [target], {"perm": list(perm)}, name=f"{name} to {layout}"))
        have[layout] = target
        return target

    def _logical_quant(self, name: str) -> QuantType | None:
        return self.logical_types[name].quant

    def _fresh(self, base: str) -> str:
        name = base
        while name in self.graph.tensors:
            name += "_"
        return name

    def set_output(self, op: Op, j: int, layout: str) -> None:
        """Record op output j as computed in `layout` (renamed when a graph output must stay NCHW)."""
        name = op.outputs[j]
        t = self.tensor(name)
        if layout == LOGICAL:
            self.variants[name] = {LOGICAL: name}
            return
        physical = name
        if name in self.outputs:
            physical = self._fresh(f"{name}__nhwc")
            del self.graph.tensors[name]
            op.outputs[j] = physical
        self.graph.tensors[physical] = Tensor(physical, tuple(t.shape[p] for p in TO_NHWC), t.dtype,
                                              _nhwc_quant(t.quant))
        self.variants[name] = {NHWC: physical}

    # --- the rewrite ----------------------------------------------------------------------------
    def run(self) -> None:
        self.logical_types = dict(self.graph.tensors)
        rules: dict[str, Callable[[Op], str]] = {}
        for kind in _SPATIAL:
            rules[kind] = self.spatial
        for kind in _FOLLOW:
            rules[kind] = self.follow
        for kind in _BINARY:
            rules[kind] = self.binary
        for kind in _CONCAT:
            rules[kind] = self.concat
        rules.update({"onnx.QLinearSoftmax": self.softmax, "onnx.Pad": self.pad, "onnx.Slice": self.slice,
                      "onnx.Transpose": self.transpose, "onnx.Reshape": self.reshape, "onnx.Gather": self.gather,
                      "onnx.ResizeInterpolate": self.gather})  # an axis (H; W follows it in both layouts)
        for op in self.graph.ops:
            layout = rules.get(op.kind, self.logical)(op)
            self.ops.append(op)
            for j in range(len(op.outputs)):
                self.set_output(op, j, layout)
        for name in self.graph.outputs:
            self.get(name, LOGICAL)
        self.graph.ops = self.ops
        used = {n for op in self.ops for n in op.inputs + op.outputs} | set(self.graph.inputs) | self.outputs
        self.graph.tensors = {n: t for n, t in self.graph.tensors.items() if n in used}

    def inputs_to(self, op: Op, layout: str) -> None:
        op.inputs = [self.get(n, layout) for n in op.inputs]

    def logical(self, op: Op) -> str:
        self.inputs_to(op, LOGICAL)
        return LOGICAL

    def _rank4_nhwc(self, name: str) -> bool:
        return len(self.logical_types[name].shape) == 4 and self.has(name, NHWC)

    def spatial(self, op: Op) -> str:
        if op.attrs.get("layout") != "NCHW":  # channels_last pools: already NHWC in ONNX
            return self.logical(op)
        x = op.inputs[0]
        op.inputs = [self.get(x, NHWC)] + [self.get(n, LOGICAL) for n in op.inputs[1:]]
        op.attrs["layout"] = "NHWC"
        return NHWC

    def follow(self, op: Op) -> str:
        x = op.inputs[0]
        quants = [self.logical_types[n].quant for n in op.inputs + op.outputs]
        if self._rank4_nhwc(x) and all(q is None or _nhwc_quant(q) is not None for q in quants):
            op.inputs = [self.get(x, NHWC)]
            return NHWC
        return self.logical(op)

    def binary(self, op: Op) -> str:
        shapes = [self.logical_types[n].shape for n in op.inputs]
        if not any(self._rank4_nhwc(n) for n in op.inputs):
            return self.logical(op)
        new_inputs = []
        for name, shape in zip(op.inputs, shapes, strict=True):
            t = self.logical_types[name]
            if len(shape) == 4:
                new_inputs.append(self.get(name, NHWC))
            elif t.size == 1 or t.is_const:
                new_inputs.append(self._nhwc_const(name) if t.is_const and t.size > 1 else name)
            else:
                return self.logical(op)
        op.inputs = new_inputs
        return NHWC

    def _nhwc_const(self, name: str) -> str:
        """A constant operand of lower rank broadcast against NCHW data, as its channels-last equivalent."""
        t = self.logical_types[name]
        data = np.asarray(t.data).reshape((1,) * (4 - len(t.shape)) + t.shape).transpose(TO_NHWC)
        target = self._fresh(f"{name}__nhwc")
        self.graph.tensors[target] = Tensor(target, data.shape, t.dtype, t.quant, np.ascontiguousarray(data))
        self.variants[name][NHWC] = target
        return target

    def concat(self, op: Op) -> str:
        if all(len(self.logical_types[n].shape) == 4 for n in op.inputs) and any(self.has(n, NHWC)
                                                                              for n in op.inputs):
            self.inputs_to(op, NHWC)
            op.attrs["axis"] = PHYSICAL_AXIS[op.attrs["axis"]]
            return NHWC
        return self.logical(op)

    def softmax(self, op: Op) -> str:
        x = op.inputs[0]
        axis, opset = op.attrs["axis"], op.attrs["opset"]
        if self._rank4_nhwc(x) and opset >= 13:  # before 13 a row spans several axes, summed in NCHW order
            op.inputs = [self.get(x, NHWC)]
            op.attrs["axis"] = PHYSICAL_AXIS[axis]
            return NHWC
        return self.logical(op)

    def pad(self, op: Op) -> str:
        x = op.inputs[0]
        if not self._rank4_nhwc(x):
            return self.logical(op)
        pads = op.attrs["pads"]
        op.attrs["pads"] = [pads[p] for p in TO_NHWC] + [pads[4 + p] for p in TO_NHWC]
        op.inputs = [self.get(x, NHWC)]
        return NHWC

    def slice(self, op: Op) -> str:
        x = op.inputs[0]
        if not self._rank4_nhwc(x):
            return self.logical(op)
        for key in ("begin", "steps"):
            op.attrs[key] = [op.attrs[key][p] for p in TO_NHWC]
        op.inputs = [self.get(x, NHWC)]
        return NHWC

    def gather(self, op: Op) -> str:
        x = op.inputs[0]
        if not self._rank4_nhwc(x):
            return self.logical(op)
        op.attrs["axis"] = PHYSICAL_AXIS[op.attrs["axis"]]
        op.inputs = [self.get(x, NHWC)]
        return NHWC

    def transpose(self, op: Op) -> str:
        """A transpose of NHWC data reads the physical axes: perm'[j] = physical axis of logical perm[j]."""
        x = op.inputs[0]
        if self._rank4_nhwc(x) and not self.has(x, LOGICAL):
            op.attrs["perm"] = [PHYSICAL_AXIS[p] for p in op.attrs["perm"]]
            op.inputs = [self.get(x, NHWC)]
            return LOGICAL
        return self.logical(op)

    def reshape(self, op: Op) -> str:
        """A reshape only sees the flat order: NHWC data with one channel or one pixel has NCHW's order."""
        x = op.inputs[0]
        shape = self.logical_types[x].shape
        if self._rank4_nhwc(x) and not self.has(x, LOGICAL) and (shape[1] == 1 or shape[2] * shape[3] == 1):
            op.inputs = [self.get(x, NHWC)]
            return LOGICAL
        return self.logical(op)


def to_channels_last(graph: Graph) -> None:
    """Rewrite `graph` (ONNX ops in NCHW, in topological order) in place, see the module docstring."""
    _Layout(graph).run()
