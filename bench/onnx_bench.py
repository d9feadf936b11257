"""Benchmark the ONNX front end on the full-shape MLPerf-Tiny models (bench/onnx_models.py), run by hand:

    python bench/onnx_bench.py                                     # every model and configuration
    python bench/onnx_bench.py --models resnet8 --targets generic cortex-m4 --samples 5
    python bench/onnx_bench.py --write bench/ONNX.md

Per model (DS-CNN, MobileNetV1-0.25, ResNet-8, FC autoencoder; float models with random weights quantized by
onnxruntime's quantize_static in the operator format or the QDQ format) and configuration (per tensor / per channel
weights, uint8 / int8 activations, 8-bit weights with --full-range, else reduce_range's 7 bits) and target:
- for QDQ models, how many float ops onnxruntime still runs after fusing node groups into QLinear kernels;
- compile time: import + plan (qcodegen.compiler.plan) and C generation, in seconds;
- bit-exactness against onnxruntime's CPU execution provider on --samples seeded inputs (mismatching elements);
- on targets whose runner counts them, instructions of one inference and .text / .rodata bytes; for Cortex-M4 also
  the same network's TFLite counterpart from bench/models.py (same shapes, TFLite Micro's arithmetic), for the
  cost of reproducing onnxruntime (RESCALE_F32 runs after the convolution instead of inside it, and QLinearAdd
  uses a 64 KB table).
Also the QLinearAveragePool / QLinearSigmoid difference counts (C vs onnxruntime) over random 8-bit inputs.
Needs onnx, onnxruntime (and tflite-micro for the TFLite rows).
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import onnx_models  # noqa: E402
from qcodegen.codegen import generate, load_target  # noqa: E402
from qcodegen.compiler import plan  # noqa: E402
from qcodegen.frontends import load_model  # noqa: E402
from qcodegen.frontends.onnx import import_onnx_bytes  # noqa: E402
from qcodegen.verify import get_runner  # noqa: E402
from qcodegen.verify.onnx_oracle import compare_with_oracle, onnxruntime_oracle  # noqa: E402
from qcodegen.verify.runners import cannot_count, unavailable  # noqa: E402

CONFIGS = {"per_tensor_uint8": (False, "uint8", False), "per_channel_int8": (True, "int8", False),
           "per_channel_uint8": (True, "uint8", False), "per_tensor_int8": (False, "int8", False),
           "qdq_per_tensor_uint8": (False, "uint8", True), "qdq_per_channel_int8": (True, "int8", True),
           "qdq_per_channel_uint8": (True, "uint8", True), "qdq_per_tensor_int8": (False, "int8", True)}
# the float ops onnxruntime can leave between DequantizeLinear and QuantizeLinear when it does not fuse a group
_FLOAT_OPS = {"Conv", "MatMul", "Gemm", "Add", "Mul", "Sigmoid", "Softmax", "GlobalAveragePool", "AveragePool",
              "Relu", "Clip", "MaxPool", "Concat"}
TFLITE = {"ds_cnn": "ds_cnn", "mobilenet_v1": "mobilenet_v1_025", "resnet8": "resnet8",
          "autoencoder": "fc_autoencoder"}


def _row(name: str, config: str, raw: bytes, target_name: str, samples: int) -> dict:
    target = load_target(target_name)
    start = time.perf_counter()
    schedule = plan(import_onnx_bytes(raw, name, name))
    planned = time.perf_counter() - start
    row = dict(model=name, config=config, target=target_name, plan_s=planned)
    with tempfile.TemporaryDirectory(prefix="qc-onnx-bench-") as tmp:
        start = time.perf_counter()
        generated = generate(schedule, Path(tmp), target, harness=target.runner == "harness")
        row["generate_s"] = time.perf_counter() - start
        runner = get_runner(target, measure=True)
        result = compare_with_oracle(onnxruntime_oracle(raw), schedule, generated, runner, samples=samples, seed=1,
                                     name="onnxruntime")
        row.update(mismatches=result.mismatches, elements=sum(schedule.buffers[o].size for o in schedule.outputs)
                   * samples, **runner.measurements(generated))
    return row


def _unfused(raw: bytes) -> int:
    """How many float ops onnxruntime's CPU execution provider runs in a QDQ model after its graph optimizations
    (the groups it did not fuse into QLinear kernels)."""
    import onnx
    import onnxruntime as ort

    with tempfile.TemporaryDirectory(prefix="qc-onnx-opt-") as tmp:
        options = ort.SessionOptions()
        options.optimized_model_filepath = str(Path(tmp) / "optimized.onnx")
        ort.InferenceSession(raw, options, providers=["CPUExecutionProvider"])
        return sum(n.op_type in _FLOAT_OPS for n in onnx.load(options.optimized_model_filepath).graph.node)


def _tflite_instructions(name: str) -> int | None:
    """Instructions of the TFLite counterpart (bench/models.py) on Cortex-M4, or None without tflite-micro."""
    try:
        from bench.models import model_path
    except ImportError:
        return None
    target = load_target("cortex-m4")
    with tempfile.TemporaryDirectory(prefix="qc-onnx-bench-tfl-") as tmp:
        schedule = plan(load_model(model_path(TFLITE[name], Path(tmp))))
        generated = generate(schedule, Path(tmp) / "c", target, harness=True)
        runner = get_runner(target, measure=True)
        from qcodegen.verify.check import random_inputs
        runner.run(generated, random_inputs(schedule, np.random.default_rng(0)))
        return runner.measurements(generated).get("instructions")


def _element_wise_counts(samples: int) -> list[str]:
    """C vs onnxruntime on QLinearAveragePool and QLinearSigmoid with random scales (ties / MLAS's logistic)."""
    sys.path.insert(0, str(ROOT / "tests"))
    from onnx_cases import Models

    lines = []
    rng = np.random.default_rng(0)
    for op in ("QLinearAveragePool", "QLinearSigmoid"):
        differing = total = 0
        for _ in range(samples):
            m = Models(seed=int(rng.integers(1 << 30)))
            x = m.input((1, 16, 8, 8) if op == "QLinearAveragePool" else (4, 256), "i8")
            s = [float(np.float32(v)) for v in rng.uniform(0.005, 0.1, 2)]
            z = [int(v) for v in rng.integers(-128, 128, 2)]
            attrs = dict(kernel_shape=[3, 3], strides=[1, 1]) if op == "QLinearAveragePool" else {}
            y = m.node(op, [x, *m.qparams(s[0], z[0], "i8"), *m.qparams(s[1], z[1], "i8")], ms=True, **attrs)
            m.output(y, None, "i8")
            raw = m.model()
            schedule = plan(import_onnx_bytes(raw, "op", "op"))
            target = load_target("generic")
            with tempfile.TemporaryDirectory() as tmp:
                generated = generate(schedule, Path(tmp), target)
                result = compare_with_oracle(onnxruntime_oracle(raw), schedule, generated, get_runner(target),
                                             samples=4, seed=int(rng.integers(1 << 30)))
            differing += result.mismatches
            total += 4 * schedule.buffers[schedule.outputs[0]].size
        lines.append(f"| {op} | {samples} random scale sets | {differing} of {total} elements differ |")
    return lines


def main() -> int:
    logging.disable(logging.WARNING)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="*", default=list(onnx_models.MODELS))
    parser.add_argument("--configs", nargs="*", default=list(CONFIGS))
    parser.add_argument("--targets", nargs="*", default=["generic", "x86-avx2", "cortex-m4"])
    parser.add_argument("--samples", type=int, default=3)
    parser.add_argument("--full-range", action="store_true", help="8-bit weights (needs a VNNI CPU for onnxruntime "
                                                                 "to be exact on x86)")
    parser.add_argument("--write", type=Path)
    args = parser.parse_args()
    lines = ["| model | config | onnxruntime float ops | target | plan s | generate s | mismatches / elements | "
             "instructions | .text | .rodata | TFLite instructions |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name in args.models:
        float_model = onnx_models.MODELS[name]()
        tflite = None
        for config in args.configs:
            per_channel, activations, qdq = CONFIGS[config]
            raw = onnx_models.quantize(float_model, per_channel, activations, reduce_range=not args.full_range,
                                       qdq=qdq)
            unfused = _unfused(raw) if qdq else ""
            for target_name in args.targets:
                target = load_target(target_name)
                if unavailable(target):
                    print(f"{target_name}: {unavailable(target)}", file=sys.stderr)
                    continue
                row = _row(name, config, raw, target_name, args.samples)
                if target_name == "cortex-m4" and cannot_count(target) is None and tflite is None:
                    tflite = _tflite_instructions(name)
                tfl = tflite if target_name == "cortex-m4" else None
                line = (f"| {name} | {config} | {unfused} | {target_name} | {row['plan_s']:.2f} | "
                        f"{row['generate_s']:.2f} | "
                        f"{row['mismatches']} / {row['elements']} | {row.get('instructions', '')} | "
                        f"{row.get('text_bytes', '')} | {row.get('rodata_bytes', '')} | {tfl or ''} |")
                print(line, file=sys.stderr)
                lines.append(line)
    lines += ["", "| op | inputs | C vs onnxruntime |", "|---|---|---|", *_element_wise_counts(args.samples)]
    text = "\n".join(lines) + "\n"
    if args.write:
        args.write.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
