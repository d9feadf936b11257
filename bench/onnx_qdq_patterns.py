"""The QDQ patterns of issue 17 end to end, run by hand (docs/onnx.md "QDQ models"):

    python bench/onnx_qdq_patterns.py [--samples 300] [--targets generic x86-avx2]

Per pattern, a small float model built with onnx.helper (a Conv producing the quantized activation the pattern
reads, random weights; or the quantized input itself) is quantized by onnxruntime's quantize_static in the QDQ
format (per tensor and per channel weights, uint8 and int8 activations; patterns without a product also int16 and
uint16 activations), compiled, and every output element of --samples seeded inputs compared with
onnxruntime's CPU execution provider. Also printed: the ops onnxruntime runs after its QDQ fusions (a float op
between DequantizeLinear and QuantizeLinear is its float path). Needs onnx and onnxruntime.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import onnx_models  # noqa: E402
from qcodegen.codegen import generate, load_target  # noqa: E402
from qcodegen.compiler import plan  # noqa: E402
from qcodegen.frontends.onnx import import_onnx_bytes  # noqa: E402
from qcodegen.verify import get_runner  # noqa: E402
from qcodegen.verify.onnx_oracle import compare_with_oracle, onnxruntime_oracle  # noqa: E402


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
                                {**base, "tw": normal(8, 6, 3, 3), "tb": normal(6)}, [1, 3, 12, 12], [1, 6, 24, 24]),
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
    }


def _has_product(raw: bytes) -> bool:
    import onnx

    return any(n.op_type in ("Conv", "ConvTranspose", "MatMul", "Gemm") for n in onnx.load_from_string(raw).graph.node)


def _ort_ops(raw: bytes) -> list[str]:
    import onnx
    import onnxruntime

    with tempfile.TemporaryDirectory(prefix="qc-onnx-opt-") as tmp:
        options = onnxruntime.SessionOptions()
        options.optimized_model_filepath = str(Path(tmp) / "opt.onnx")
        options.log_severity_level = 3
        onnxruntime.InferenceSession(raw, options, providers=["CPUExecutionProvider"])
        return [n.op_type for n in onnx.load(options.optimized_model_filepath).graph.node]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--targets", nargs="+", default=["generic", "x86-avx2"])
    parser.add_argument("--only", nargs="*", default=None, help="patterns whose name contains one of these")
    args = parser.parse_args(argv)
    logging.getLogger().setLevel(logging.ERROR)
    print(f"| pattern | config | onnxruntime runs | {' | '.join(args.targets)} |")
    print(f"|---|---|---|{'---|' * len(args.targets)}")
    for name, float_model in patterns().items():
        if args.only and not any(word in name for word in args.only):
            continue
        product = _has_product(float_model)
        for per_channel in (False, True) if product else (False,):
            for activations in ("uint8", "int8") if product else ("uint8", "int8", "uint16", "int16"):
                raw = onnx_models.quantize(float_model, per_channel, activations, qdq=True)
                ops = [op for op in _ort_ops(raw) if op not in ("QuantizeLinear", "DequantizeLinear", "Transpose")]
                schedule = plan(import_onnx_bytes(raw, name, "pattern"))
                cells = []
                for target_name in args.targets:
                    target = load_target(target_name)
                    with tempfile.TemporaryDirectory(prefix="qc-onnx-pat-") as tmp:
                        generated = generate(schedule, Path(tmp), target, harness=target.runner == "harness")
                        result = compare_with_oracle(onnxruntime_oracle(raw), schedule, generated, get_runner(target),
                                                     samples=args.samples, seed=1)
                    total = args.samples * sum(int(np.prod(schedule.buffers[o].shape)) for o in schedule.outputs)
                    cells.append(f"{result.mismatches} / {total}")
                config = f"{'per-channel' if per_channel else 'per-tensor'} {activations}"
                print(f"| {name} | {config} | {', '.join(ops)} | {' | '.join(cells)} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
