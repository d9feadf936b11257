"""onnxruntime's float paths that BINARY_F32 and RESIZE_F32 emulate, against their numpy references, run by hand
(docs/onnx.md "QDQ models"):

    python bench/onnx_float_path_sweep.py [--sets 150]

DequantizeLinear -> Add / Sub / Mul -> QuantizeLinear on int16 / uint16 data (random scales 1e-7 .. 10, zero points,
20,000 operand pairs per scale set, every fourth set near cancellation), and DequantizeLinear -> Resize linear /
cubic (cubic_coeff_a -0.75 / -0.5 / -0.6, exclude_outside 0 / 1) -> QuantizeLinear (random sizes up and down, every
coordinate mode, int8 / uint8 / int16 / uint16, 20 inputs per set) in onnxruntime's CPU execution provider, every
element compared with qcodegen's reference (the weights from the importer's bilinear_taps / bicubic_taps). The C
equals the references (tests/test_binary_f32.py, tests/test_resize_f32.py).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from qcodegen.frontends.onnx_ops_gather import bicubic_taps, bilinear_taps  # noqa: E402
from qcodegen.ir.dtypes import dtype  # noqa: E402
from qcodegen.primitives.binary_f32 import BinaryF32Params, binary_f32  # noqa: E402
from qcodegen.primitives.resize_f32 import ResizeF32Params, resize_f32  # noqa: E402

F32 = np.float32
_ONNX_TYPES = {"i8": 3, "u8": 2, "i16": 5, "u16": 4}  # TensorProto element types
_MODES = ("half_pixel", "pytorch_half_pixel", "asymmetric", "align_corners", "tf_half_pixel_for_nn")


def _session(nodes: list, inputs: dict[str, tuple[str, list[int]]], scalars: dict[str, tuple[str, float]],
             extra: list | None = None):
    import onnxruntime
    from onnx import TensorProto, helper

    inits = [helper.make_tensor(n, TensorProto.FLOAT if t == "f32" else _ONNX_TYPES[t], [], [v])
             for n, (t, v) in scalars.items()] + (extra or [])
    graph = helper.make_graph(nodes, "sweep", [helper.make_tensor_value_info(n, _ONNX_TYPES[t], s)
                                                for n, (t, s) in inputs.items()],
                              [helper.make_tensor_value_info("y", _ONNX_TYPES[next(iter(inputs.values()))[0]], None)],
                              inits)
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    return onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def binary_sweep(rng: np.random.Generator, sets: int, n: int = 20000) -> tuple[int, int]:
    from onnx import helper

    differ = total = 0
    for t in range(sets):
        op, dt = ("add", "sub", "mul")[t % 3], ("i16", "u16")[(t // 3) % 2]
        d = dtype(dt)
        zps = [int(rng.integers(d.min, d.max, endpoint=True)) if t % 5 else (d.min + d.max + 1) // 2
               for _ in range(3)]
        scales = [float(F32(10 ** rng.uniform(-7, 1))) for _ in range(3)]
        if op == "mul":
            scales[2] = float(F32(scales[0] * scales[1] * 10 ** rng.uniform(0, 5)))
        nodes = [helper.make_node("DequantizeLinear", ["a", "sa", "za"], ["fa"]),
                 helper.make_node("DequantizeLinear", ["b", "sb", "zb"], ["fb"]),
                 helper.make_node(op.capitalize(), ["fa", "fb"], ["fy"]),
                 helper.make_node("QuantizeLinear", ["fy", "sy", "zy"], ["y"])]
        scalars = {**{f"s{k}": ("f32", s) for k, s in zip("aby", scales, strict=True)},
                   **{f"z{k}": (dt, z) for k, z in zip("aby", zps, strict=True)}}
        session = _session(nodes, {"a": (dt, [n]), "b": (dt, [n])}, scalars)
        a = rng.integers(d.min, d.max, n, endpoint=True)
        b = rng.integers(d.min, d.max, n, endpoint=True)
        if t % 4 == 0:
            b = np.clip(a + rng.integers(-3, 4, n), d.min, d.max)
        y = session.run(None, {"a": a.astype(d.numpy), "b": b.astype(d.numpy)})[0].astype(np.int64)
        p = BinaryF32Params(op, F32(scales[0]), zps[0], F32(scales[1]), zps[1], F32(scales[2]), zps[2], d.min, d.max)
        differ += int(np.count_nonzero(binary_f32(p, a, b) != y))
        total += y.size
    return differ, total


def _weights(form: str, mode: str, n_out: int, n_in: int, a: np.float32, exclude: bool):
    scale = F32(n_out) / F32(n_in)
    if form == "bilinear":
        return (*bilinear_taps(mode, n_out, n_in, scale), np.ones(n_out, F32))
    return bicubic_taps(mode, n_out, n_in, scale, a, exclude)


def resize_sweep(rng: np.random.Generator, sets: int, form: str, inputs: int = 20) -> tuple[int, int]:
    from onnx import TensorProto, helper

    differ = total = 0
    for t in range(sets):
        dt, mode = ("u8", "i8", "u16", "i16")[t % 4], _MODES[(t // 4) % len(_MODES)]
        a, exclude = F32((-0.75, -0.5, -0.6)[t % 3]), t % 2 == 1
        d = dtype(dt)
        h, w, oh, ow = (int(v) for v in (*rng.integers(1 if form == "bilinear" else 2, 9, 2), *rng.integers(1, 20, 2)))
        if (oh, ow) == (h, w):
            ow += 1
        zps = [int(rng.integers(d.min, d.max, endpoint=True)) for _ in range(2)]
        scales = [float(F32(10 ** rng.uniform(-5, 0))) for _ in range(2)]
        attrs = {} if form == "bilinear" else {"cubic_coeff_a": float(a), "exclude_outside": int(exclude)}
        nodes = [helper.make_node("DequantizeLinear", ["x", "s", "z"], ["fx"]),
                 helper.make_node("Resize", ["fx", "", "", "sizes"], ["fy"], mode="linear" if form == "bilinear"
                                  else "cubic", coordinate_transformation_mode=mode, **attrs),
                 helper.make_node("QuantizeLinear", ["fy", "s2", "z2"], ["y"])]
        sizes = helper.make_tensor("sizes", TensorProto.INT64, [4], [2, 3, oh, ow])
        session = _session(nodes, {"x": (dt, [2, 3, h, w])}, {"s": ("f32", scales[0]), "s2": ("f32", scales[1]),
                                                               "z": (dt, zps[0]), "z2": (dt, zps[1])}, [sizes])
        (ys, wy, y_div), (xs, wx, x_div) = (_weights(form, mode, o, i, a, exclude) for o, i in ((oh, h), (ow, w)))
        p = ResizeF32Params(2, form, ys, xs, wy, (wx / x_div[:, None]).astype(F32), y_div, F32(scales[0]), zps[0],
                            F32(scales[1]), zps[1], d.min, d.max)
        for _ in range(inputs):
            x = rng.integers(d.min, d.max, (2, 3, h, w), endpoint=True)
            y = session.run(None, {"x": x.astype(d.numpy)})[0].astype(np.int64)
            differ += int(np.count_nonzero(resize_f32(p, x) != y))
            total += y.size
    return differ, total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", type=int, default=150)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(2026)
    differ, total = binary_sweep(rng, args.sets)
    print(f"BINARY_F32 (int16 / uint16 Add, Sub, Mul): {differ} of {total} elements differ from onnxruntime")
    for form in ("bilinear", "bicubic"):
        differ, total = resize_sweep(rng, args.sets, form)
        print(f"RESIZE_F32 {form} (8 / 16 bits, {len(_MODES)} coordinate modes): {differ} of {total} elements differ "
              "from onnxruntime")
    return 0


if __name__ == "__main__":
    sys.exit(main())
