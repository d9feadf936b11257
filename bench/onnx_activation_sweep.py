"""onnxruntime's Sigmoid / Tanh / LeakyRelu / HardSigmoid / HardSwish between DequantizeLinear and QuantizeLinear,
against qcodegen's plan-time tables, at every stored input, run by hand (docs/onnx.md "QDQ models"):

    python bench/onnx_activation_sweep.py [--sets 6]

For int8 / uint8 / int16 / uint16 data and random scale / zero-point sets (input scales 1e-4 .. 0.5 of the
type's range, output scales fitting the op's range), a model DQ -> op -> Q with integer input and output runs in
onnxruntime's CPU execution provider (default optimizations: the 8-bit Sigmoid and LeakyRelu become its
QLinearSigmoid / QLinearLeakyRelu, the rest its float kernels) over all 256 or 65,536 stored values; every result
is compared with qcodegen's table (qcodegen/semantics/onnxruntime.py unary_table, uint data rebased to signed
storage as the importer stores it). Prints the differing count per op and type.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from qcodegen.ir.quant import QuantType  # noqa: E402
from qcodegen.semantics.onnxruntime import (  # noqa: E402
    hard_sigmoid,
    hard_swish,
    leaky_relu,
    sigmoid,
    tanh,
    unary_table,
)

F32 = np.float32
_ONNX_TYPES = {"i8": 3, "u8": 2, "i16": 5, "u16": 4}  # TensorProto element types
_NUMPY = {"i8": np.int8, "u8": np.uint8, "i16": np.int16, "u16": np.uint16}
_OPS = {"Sigmoid": ({}, (0.0, 1.0)), "Tanh": ({}, (-1.0, 1.0)), "LeakyRelu": ({"alpha": 0.13}, (-1.5, 6.0)),
        "HardSigmoid": ({"alpha": 0.3, "beta": 0.4}, (0.0, 1.0)), "HardSwish": ({}, (-0.5, 6.0))}


def _function(op: str, attrs: dict):
    if op == "LeakyRelu":
        return leaky_relu(attrs["alpha"])
    if op == "HardSigmoid":
        return hard_sigmoid(attrs["alpha"], attrs["beta"])
    return {"Sigmoid": sigmoid, "Tanh": tanh, "HardSwish": hard_swish}[op]


def _run(op: str, attrs: dict, dt: str, sx: float, zx: int, sy: float, zy: int, x: np.ndarray) -> np.ndarray:
    import onnxruntime
    from onnx import TensorProto, helper

    t = _ONNX_TYPES[dt]
    inits = [helper.make_tensor("sx", TensorProto.FLOAT, [], [sx]), helper.make_tensor("zx", t, [], [zx]),
             helper.make_tensor("sy", TensorProto.FLOAT, [], [sy]), helper.make_tensor("zy", t, [], [zy])]
    nodes = [helper.make_node("DequantizeLinear", ["x", "sx", "zx"], ["xf"]),
             helper.make_node(op, ["xf"], ["yf"], **attrs),
             helper.make_node("QuantizeLinear", ["yf", "sy", "zy"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", t, [None])],
                              [helper.make_tensor_value_info("y", t, [None])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    session = onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


def sweep(rng: np.random.Generator, op: str, dt: str, sets: int) -> tuple[int, int]:
    """(differing, total) over `sets` random scale sets, every stored input each."""
    attrs, (lo, hi) = _OPS[op]
    info = np.iinfo(_NUMPY[dt])
    levels = info.max - info.min
    offset = 0 if info.min < 0 else (info.max + 1) // 2  # uint: the importer stores q - offset
    stored = np.arange(info.min, info.max + 1, dtype=np.int64)
    differing = total = 0
    for _ in range(sets):
        zx = int(rng.integers(info.min + levels // 4, info.max - levels // 4))
        sx = float(F32(10 ** rng.uniform(-4, np.log10(0.5)) * 12 / levels))  # inputs up to about +-6 .. +-12
        sy = float(F32((hi - lo) / levels * rng.uniform(1.0, 1.3)))
        zy = int(np.clip(round(info.min - lo / sy), info.min, info.max))
        got = _run(op, attrs, dt, sx, zx, sy, zy, stored.astype(_NUMPY[dt])).astype(np.int64)
        storage = "i8" if info.bits == 8 else "i16"
        qx, qy = (QuantType.per_tensor(storage, s, z - offset) for s, z in ((sx, zx), (sy, zy)))
        table = unary_table(qx, qy, _function(op, attrs))
        differing += int(np.count_nonzero(got - offset != table))
        total += stored.size
    return differing, total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", type=int, default=6, help="random scale sets per op and type")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(17)
    failed = 0
    for op in _OPS:
        for dt in _ONNX_TYPES:
            differing, total = sweep(rng, op, dt, args.sets)
            failed += differing
            print(f"{op:12s} {dt:4s}: {differing} of {total:,} differ")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
