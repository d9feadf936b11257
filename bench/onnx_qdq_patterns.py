"""The QDQ patterns of issue 17 end to end, run by hand (docs/onnx.md "QDQ models"):

    python bench/onnx_qdq_patterns.py [--samples 300] [--targets generic x86-avx2]

Per pattern, a small float model built with onnx.helper (a Conv producing the quantized activation the pattern
reads, random weights; or the quantized input itself) is quantized by onnxruntime's quantize_static in the QDQ
format (per tensor and per channel weights, uint8 and int8 activations; patterns without a product also int16 and
uint16 activations), compiled, and every output element of --samples seeded inputs compared with
onnxruntime's CPU execution provider. Also printed: the ops onnxruntime runs after its QDQ fusions (a float op
between DequantizeLinear and QuantizeLinear is its float path). Needs onnx and onnxruntime.
--section sixteen: products with int16 / uint16 activations and int8 / int4 weights; --section blockwise:
hand-built MatMul / Gemm models with blockwise (opset 21 block_size) weights, each cell also compared with the
real-number product rounded once (float64 of the stored values: "real"). Cells: differing / compared elements
and the largest difference in output LSBs. --ort-config passes onnxruntime session configuration entries.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import onnx_models  # noqa: E402
from qcodegen.codegen import generate, load_target  # noqa: E402
from qcodegen.compiler import plan  # noqa: E402
from qcodegen.errors import QcError  # noqa: E402
from qcodegen.frontends.onnx import import_onnx_bytes  # noqa: E402
from qcodegen.verify import get_runner  # noqa: E402
from qcodegen.verify.check import random_inputs  # noqa: E402
from qcodegen.verify.onnx_oracle import onnxruntime_oracle  # noqa: E402


def _model(nodes: list, inits: dict[str, np.ndarray], x_shape: list[int], y_shape: list[int]) -> bytes:
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(nodes, "pattern", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)],
                              [numpy_helper.from_array(v, k) for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def patterns(seed: int = 0) -> dict[str, bytes]:
    from onnx import helper

    rng = np.random.default_rng(seed)

    def normal(*shape: int) -> np.ndarray:
        return rng.normal(size=shape).astype(np.float32)

    def conv(out: str = "c") -> object:  # the quantized activation a pattern reads: [1, 8, 12, 12]
        return helper.make_node("Conv", ["x", "cw"], [out], pads=[1, 1, 1, 1])

    def offset() -> object:  # x + k: a quantized activation without a product
        return helper.make_node("Add", ["x", "k"], ["a0"])

    base = {"cw": normal(8, 3, 3, 3)}
    k = {"k": normal(1, 3, 1, 1)}
    node = helper.make_node
    return {
        "ConvTranspose": _model([conv(), node("ConvTranspose", ["c", "tw", "tb"], ["y"], strides=[2, 2],
                                              pads=[1, 1, 0, 0], output_padding=[1, 1])],
                                {**base, "tw": normal(8, 6, 3, 3), "tb": normal(6)}, [1, 3, 12, 12], [1, 6, 25, 25]),
        "Resize nearest": _model([conv(), node("Resize", ["c", "", "sc"], ["y"], mode="nearest")],
                                 {**base, "sc": np.array([1, 1, 2, 2], np.float32)}, [1, 3, 12, 12], [1, 8, 24, 24]),
        "ReduceMean (H, W) -> Gemm": _model(
            [conv(), node("ReduceMean", ["c"], ["m"], axes=[2, 3], keepdims=0), node("Gemm", ["m", "gw"], ["y"])],
            {**base, "gw": normal(8, 10)}, [1, 3, 12, 12], [1, 10]),
        "Split -> Add": _model([conv(), node("Split", ["c", "parts"], ["a", "b"], axis=1),
                                node("Add", ["a", "b"], ["y"])],
                               {**base, "parts": np.array([4, 4], np.int64)}, [1, 3, 12, 12], [1, 4, 12, 12]),
        "Gather (constant indices)": _model([conv(), node("Gather", ["c", "idx"], ["y"], axis=1)],
                                            {**base, "idx": np.array([5, 0, 7, 2, 2], np.int64)}, [1, 3, 12, 12],
                                            [1, 5, 12, 12]),
        "MatMul + bias Add": _model([node("Flatten", ["x"], ["f"]), node("MatMul", ["f", "mw"], ["m"]),
                                     node("Add", ["m", "mb"], ["y"])],
                                    {"mw": normal(432, 16), "mb": normal(16)}, [1, 3, 12, 12], [1, 16]),
        # on an Add of a constant (quantize_static quantizes no op reading the graph input alone): no product,
        # also with 16-bit activations
        "Resize linear x2 (half_pixel)": _model([offset(), node("Resize", ["a0", "", "sc"], ["y"], mode="linear")],
                                                {**k, "sc": np.array([1, 1, 2, 2], np.float32)}, [1, 3, 12, 12],
                                                [1, 3, 24, 24]),
        "Resize linear to 17 x 9 (align_corners)": _model(
            [offset(), node("Resize", ["a0", "", "", "sz"], ["y"], mode="linear",
                            coordinate_transformation_mode="align_corners")],
            {**k, "sz": np.array([1, 3, 17, 9], np.int64)}, [1, 3, 12, 12], [1, 3, 17, 9]),
        "Resize linear x1.5 (asymmetric)": _model(
            [offset(), node("Resize", ["a0", "", "sc"], ["y"], mode="linear",
                            coordinate_transformation_mode="asymmetric")],
            {**k, "sc": np.array([1, 1, 1.5, 1.5], np.float32)}, [1, 3, 12, 12], [1, 3, 18, 18]),
        "Resize cubic x1.5 (exclude_outside)": _model(
            [offset(), node("Resize", ["a0", "", "sc"], ["y"], mode="cubic", exclude_outside=1)],
            {**k, "sc": np.array([1, 1, 1.5, 1.5], np.float32)}, [1, 3, 12, 12], [1, 3, 18, 18]),
        "Resize cubic to 17 x 9 (align_corners, a -0.5)": _model(
            [offset(), node("Resize", ["a0", "", "", "sz"], ["y"], mode="cubic", cubic_coeff_a=-0.5,
                            coordinate_transformation_mode="align_corners")],
            {**k, "sz": np.array([1, 3, 17, 9], np.int64)}, [1, 3, 12, 12], [1, 3, 17, 9]),
        "Split -> Add / Sub / Mul": _model(
            [offset(), node("Split", ["a0", "parts3"], ["a", "b", "c"], axis=1), node("Add", ["a", "b"], ["s"]),
             node("Sub", ["s", "c"], ["d"]), node("Mul", ["d", "a"], ["y"])],
            {**k, "parts3": np.array([1, 1, 1], np.int64)}, [1, 3, 12, 12], [1, 1, 12, 12]),
        "MaxPool, Gather, Resize nearest": _model(
            [offset(), node("MaxPool", ["a0"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             node("Gather", ["p", "idx3"], ["g"], axis=1), node("Resize", ["g", "", "sc"], ["y"], mode="nearest")],
            {**k, "idx3": np.array([2, 0, 1, 2], np.int64), "sc": np.array([1, 1, 2, 1.5], np.float32)},
            [1, 3, 12, 12], [1, 4, 12, 9]),
        "HardSwish, LeakyRelu, HardSigmoid, Sigmoid": _model(
            [offset(), node("HardSwish", ["a0"], ["h"]), node("LeakyRelu", ["h"], ["r"], alpha=0.1),
             node("HardSigmoid", ["r"], ["s"], alpha=0.4, beta=0.5), node("Sigmoid", ["s"], ["y"])], k,
            [1, 3, 12, 12], [1, 3, 12, 12]),
    }


def sixteen_bit_products(seed: int = 0) -> dict[str, bytes]:
    """Products whose activations quantize_static makes 16-bit (docs/onnx.md "16-bit activations into products")."""
    from onnx import helper

    rng = np.random.default_rng(seed)

    def normal(*shape: int) -> np.ndarray:
        return rng.normal(size=shape).astype(np.float32)

    node = helper.make_node
    flat = node("Flatten", ["x"], ["f"])
    return {
        "Conv": _model([node("Conv", ["x", "cw", "cb"], ["y"], pads=[1, 1, 1, 1])],
                       {"cw": normal(8, 3, 3, 3), "cb": normal(8)}, [1, 3, 12, 12], [1, 8, 12, 12]),
        "Conv depthwise": _model([node("Conv", ["x", "dw", "db"], ["y"], pads=[1, 1, 1, 1], group=3)],
                                 {"dw": normal(3, 1, 3, 3), "db": normal(3)}, [1, 3, 12, 12], [1, 3, 12, 12]),
        "Gemm": _model([flat, node("Gemm", ["f", "gw", "gb"], ["y"])], {"gw": normal(432, 10), "gb": normal(10)},
                       [1, 3, 12, 12], [1, 10]),
        "MatMul": _model([flat, node("MatMul", ["f", "mw"], ["y"])], {"mw": normal(432, 16)}, [1, 3, 12, 12],
                         [1, 16]),
        "ConvTranspose": _model([node("ConvTranspose", ["x", "tw", "tb"], ["y"], strides=[2, 2], pads=[1, 1, 0, 0],
                                      output_padding=[1, 1])], {"tw": normal(3, 6, 3, 3), "tb": normal(6)},
                                [1, 3, 12, 12], [1, 6, 25, 25]),
    }


def blockwise_matmul(op: str, weights: str, block: int, activations: str, k: int = 256, n: int = 16,
                     seed: int = 0) -> bytes:
    """x [4, k] -> Q/DQ (activations "uint8" / "int8") -> MatMul or Gemm with B [k, n] dequantized blockwise
    (opset 21 block_size along K, `weights` "int8" / "int4" / "uint4", random scales, zero points 0 / 8) -> Q/DQ."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    act = {"uint8": (TensorProto.UINT8, np.uint8, 128), "int8": (TensorProto.INT8, np.int8, 0)}[activations]
    lo, hi, zp, wtype = {"int8": (-127, 128, 0, TensorProto.INT8), "int4": (-8, 8, 0, TensorProto.INT4),
                         "uint4": (0, 16, 8, TensorProto.UINT4)}[weights]
    values = rng.integers(lo, hi, (k, n))
    inits = [helper.make_tensor("wq", wtype, [k, n], values.reshape(-1).tolist()),
             helper.make_tensor("wz", wtype, [k // block, n], [zp] * (k // block * n)),
             numpy_helper.from_array(rng.uniform(0.002, 0.03, (k // block, n)).astype(np.float32), "ws")]
    for name, scale, offset in (("x", 0.031, 3), ("y", 0.71, -5)):
        inits += [numpy_helper.from_array(np.float32(scale), f"{name}_s"),
                  numpy_helper.from_array(np.array(act[2] + offset, act[1]), f"{name}_z")]
    node = helper.make_node
    nodes = [node("QuantizeLinear", ["x", "x_s", "x_z"], ["xq"]),
             node("DequantizeLinear", ["xq", "x_s", "x_z"], ["xd"]),
             node("DequantizeLinear", ["wq", "ws", "wz"], ["w"], axis=0, block_size=block),
             node(op, ["xd", "w"], ["p"]), node("QuantizeLinear", ["p", "y_s", "y_z"], ["yq"]),
             node("DequantizeLinear", ["yq", "y_s", "y_z"], ["y"])]
    graph = helper.make_graph(nodes, "blockwise", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, k])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, n])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)]).SerializeToString()


def blockwise_real(raw: bytes) -> Callable[[np.ndarray], np.ndarray]:
    """x -> the blockwise_matmul model's result from the real-number product of the stored values (float64, exact
    up to 2^-52 relative), quantized once (half to even, clamped) and dequantized as its last DequantizeLinear."""
    import onnx
    from onnx import numpy_helper

    c = {t.name: numpy_helper.to_array(t) for t in onnx.load_from_string(raw).graph.initializer}
    f64 = {k: np.float64(c[k]) for k in ("x_s", "y_s")}
    block = c["wq"].shape[0] // c["ws"].shape[0]
    w = ((c["wq"].astype(np.float64) - np.repeat(c["wz"].astype(np.float64), block, axis=0))
         * np.repeat(c["ws"].astype(np.float64), block, axis=0))
    info = np.iinfo(c["x_z"].dtype)

    def real(x: np.ndarray) -> np.ndarray:
        xq = np.clip(np.rint(x.astype(np.float32) / np.float32(c["x_s"])) + int(c["x_z"]), info.min, info.max)
        y = (xq - int(c["x_z"])) * f64["x_s"] @ w / f64["y_s"]
        yq = np.clip(np.rint(y) + int(c["y_z"]), info.min, info.max)
        return ((yq - int(c["y_z"])) * np.float32(c["y_s"])).astype(np.float32)

    return real


def _has_product(raw: bytes) -> bool:
    import onnx

    return any(n.op_type in ("Conv", "ConvTranspose", "MatMul", "Gemm") for n in onnx.load_from_string(raw).graph.node)


def _ort_ops(raw: bytes, config: dict[str, str]) -> list[str]:
    import onnx
    import onnxruntime

    with tempfile.TemporaryDirectory(prefix="qc-onnx-opt-") as tmp:
        options = onnxruntime.SessionOptions()
        options.optimized_model_filepath = str(Path(tmp) / "opt.onnx")
        options.log_severity_level = 3
        for key, value in config.items():
            options.add_session_config_entry(key, value)
        onnxruntime.InferenceSession(raw, options, providers=["CPUExecutionProvider"])
        return [n.op_type for n in onnx.load(options.optimized_model_filepath).graph.node]


def _output_scales(raw: bytes) -> dict[str, float]:
    """The scale of each graph output's DequantizeLinear (one LSB of the quantized result)."""
    import onnx
    from onnx import numpy_helper

    graph = onnx.load_model_from_string(raw).graph
    consts = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    producers = {n.output[0]: n for n in graph.node}
    return {o.name: float(np.max(consts[producers[o.name].input[1]])) for o in graph.output}


def _differences(raw: bytes, schedule, target_name: str, samples: int, config: dict[str, str],
                 real: bool = False) -> tuple[int, int, int]:
    """(differing elements, compared elements, largest difference in output LSBs) vs onnxruntime, or with `real`
    (a blockwise_matmul model) vs the real-number product rounded once (blockwise_real); target_name
    "onnxruntime": onnxruntime itself vs that product."""
    rng = np.random.default_rng(1)
    ort = onnxruntime_oracle(raw, config)
    product = blockwise_real(raw) if real else None
    oracle = (lambda batch: [product(batch[0])]) if product else ort
    scales = _output_scales(raw)
    count = total = worst = 0
    with tempfile.TemporaryDirectory(prefix="qc-onnx-pat-") as tmp:
        if target_name == "onnxruntime":
            run = ort
        else:
            target = load_target(target_name)
            generated = generate(schedule, Path(tmp), target, harness=target.runner == "harness")
            runner = get_runner(target)
            run = lambda batch: runner.run(generated, batch)[0]  # noqa: E731
        for _ in range(samples):
            batch = random_inputs(schedule, rng)
            got = run(batch)
            for name, want, have in zip(schedule.outputs, oracle(batch), got, strict=True):
                lsb = np.rint(np.abs(want.astype(np.float64) - have.astype(np.float64)) / scales[name])
                count, total = count + int(np.count_nonzero(want != have)), total + want.size
                worst = max(worst, int(lsb.max()))
    return count, total, worst


def _row(name: str, config: str, raw: bytes, args: argparse.Namespace, real: bool = False) -> None:
    ort_config = dict(entry.split("=", 1) for entry in args.ort_config)
    ops = [op for op in _ort_ops(raw, ort_config) if op not in ("QuantizeLinear", "DequantizeLinear", "Transpose")]
    try:
        schedule = plan(import_onnx_bytes(raw, name, "pattern"))
    except QcError as exc:
        print(f"| {name} | {config} | {', '.join(ops)} | refused: {exc} |", flush=True)
        return
    cells = []
    columns = [(t, False) for t in args.targets] + ([(args.targets[0], True), ("onnxruntime", True)] if real else [])
    for target_name, vs_real in columns:
        count, total, worst = _differences(raw, schedule, target_name, args.samples, ort_config, vs_real)
        cells.append(f"{count} / {total}" + (f" (max {worst} LSB)" if count else ""))
    print(f"| {name} | {config} | {', '.join(ops)} | {' | '.join(cells)} |", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--targets", nargs="+", default=["generic", "x86-avx2"])
    parser.add_argument("--section", choices=("patterns", "sixteen", "blockwise"), default="patterns")
    parser.add_argument("--only", nargs="*", default=None, help="patterns whose name contains one of these")
    parser.add_argument("--ort-config", nargs="*", default=[], metavar="KEY=VALUE",
                        help="onnxruntime session configuration entries, e.g. "
                             "session.qdq_matmulnbits_accuracy_level=1")
    args = parser.parse_args(argv)
    logging.getLogger().setLevel(logging.ERROR)
    blockwise = args.section == "blockwise"
    real = [f"{args.targets[0]} vs real", "onnxruntime vs real"] if blockwise else []
    print(f"| pattern | config | onnxruntime runs | {' | '.join(args.targets + real)} |")
    print(f"|---|---|---|{'---|' * (len(args.targets) + len(real))}")
    if blockwise:
        for op in ("MatMul", "Gemm"):
            for weights in ("int8", "int4", "uint4"):
                for block in (16, 32, 64, 128):
                    for activations in ("uint8", "int8"):
                        raw = blockwise_matmul(op, weights, block, activations)
                        _row(op, f"{weights} block {block}, {activations}", raw, args, real=True)
        return 0
    sixteen = args.section == "sixteen"
    for name, float_model in (sixteen_bit_products() if sixteen else patterns()).items():
        if args.only and not any(word in name for word in args.only):
            continue
        product = sixteen or _has_product(float_model)
        eight = ("uint8", "int8")
        for per_channel in (False, True) if product else (False,):
            for activations in ("int16", "uint16") if sixteen else eight if product else (*eight, "uint16", "int16"):
                for weights in ("int8", "int4") if sixteen else ("int8",):
                    raw = onnx_models.quantize(float_model, per_channel, activations, qdq=True, weights=weights)
                    config = (f"{'per-channel' if per_channel else 'per-tensor'} {activations}"
                              f"{f' {weights} weights' if sixteen else ''}")
                    _row(name, config, raw, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
