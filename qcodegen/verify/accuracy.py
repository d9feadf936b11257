"""Accuracy against the float model a quantized model was made from (`verify --against float --float-model F`):
error metrics per output and per layer where the two models' tensors correspond (same name and shape).

This measures quantization error, not the correctness of the generated C: the C equals the numpy reference of its
schedule bit for bit (`verify --against reference`), and the per-layer values of the quantized model are that
reference's. Metrics per tensor, over every sample: RMSE, MAE, max |error|, L2 relative error
(||q - f|| / ||f||) and cosine similarity in float units, and RMSE / MAE / max |error| in LSB of the quantized
tensor (error / scale, per channel for per-axis types).

Float models: `.tflite` (run with LiteRT's reference kernels, `pip install ai-edge-litert`); `.onnx` (run with
onnxruntime, graph optimizations off, every node output kept): a QDQ model's tensor `t_QuantizeLinear_Output`, as
quantize_static names the quantization of float tensor `t`, corresponds to the float model's `t`, channels-last
buffers to NCHW tensors (transposed; skipped where the shape cannot tell). Operator-format models compare their
outputs only: their QLinear ops' results carry the name of the op before a fused activation, not its value."""

from __future__ import annotations

import math
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..codegen.render import GeneratedModel
from ..errors import QcError, install_hint
from ..ir.quant import QuantType
from ..ir.schedule import TEMP, Schedule
from ..reference import run_reference
from ..semantics.tflite import quantize_values
from .check import float_input_range
from .runners import HarnessRunner, HostRunner

STATEMENT = ("accuracy of the quantized model against its float original (quantization error); not a bit-exactness "
             "check: the generated C equals its numpy reference bit for bit (verify --against reference)")


@dataclass
class TensorError:
    name: str
    elements: int
    rmse: float
    mae: float
    max_abs: float
    l2_relative: float | None  # None when the float tensor is all zeros
    cosine: float | None
    rmse_lsb: float | None  # None for tensors without a quantized type
    mae_lsb: float | None
    max_abs_lsb: float | None


def tensor_error(name: str, got: np.ndarray, want: np.ndarray, lsb: np.ndarray | None) -> TensorError:
    """Metrics of `got` (the quantized model, dequantized) against `want` (the float model), flat arrays of equal
    size; `lsb`: per element, the real value of one step of the quantized tensor (None: not quantized)."""
    g, w = got.astype(np.float64), want.astype(np.float64)
    e = g - w
    norm_w, norm_g = float(np.linalg.norm(w)), float(np.linalg.norm(g))
    steps = None if lsb is None else np.abs(e) / lsb
    return TensorError(
        name, int(e.size), math.sqrt(float(np.mean(e * e))), float(np.mean(np.abs(e))),
        float(np.max(np.abs(e), initial=0.0)), float(np.linalg.norm(e)) / norm_w if norm_w else None,
        float(np.dot(g, w)) / (norm_g * norm_w) if norm_g and norm_w else None,
        None if steps is None else math.sqrt(float(np.mean(steps * steps))),
        None if steps is None else float(np.mean(steps)),
        None if steps is None else float(np.max(steps, initial=0.0)))


class _Pairs:
    """Per tensor, the flat values of both models over every sample (and the LSB of each element)."""

    def __init__(self) -> None:
        self.got: dict[str, list[np.ndarray]] = {}
        self.want: dict[str, list[np.ndarray]] = {}
        self.lsb: dict[str, list[np.ndarray] | None] = {}

    def add(self, key: str, q: QuantType | None, stored: np.ndarray, want: np.ndarray) -> None:
        if q is None:
            got, lsb = stored.astype(np.float64), None
        else:
            scales, zps = q.expand(stored.shape)
            got = (stored.astype(np.float64) - zps) * scales
            lsb = np.broadcast_to(np.asarray(scales, np.float64), stored.shape).reshape(-1)
        self.got.setdefault(key, []).append(got.reshape(-1))
        self.want.setdefault(key, []).append(np.asarray(want, np.float64).reshape(-1))
        if lsb is None:
            self.lsb[key] = None
        elif self.lsb.get(key, []) is not None:
            self.lsb.setdefault(key, []).append(lsb)

    def errors(self) -> dict[str, TensorError]:
        return {k: tensor_error(k.removeprefix("output:"), np.concatenate(self.got[k]), np.concatenate(self.want[k]),
                                None if self.lsb[k] is None else np.concatenate(self.lsb[k])) for k in self.got}


@dataclass
class AccuracyResult:
    samples: int
    outputs: list[TensorError]
    layers: list[TensorError]
    tolerance_lsb: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def max_error_lsb(self) -> float | None:
        values = [o.max_abs_lsb for o in self.outputs if o.max_abs_lsb is not None]
        return max(values) if values else None

    @property
    def passed(self) -> bool:
        """Without a tolerance this only reports; with one, every output is within it (in LSB)."""
        worst = self.max_error_lsb
        return self.tolerance_lsb is None or worst is None or worst <= self.tolerance_lsb

    def as_json(self) -> dict[str, Any]:
        return {"bit_exact": None, "statement": STATEMENT, "samples": self.samples,
                "mismatches": 0 if self.passed else 1, "first_mismatch": None, "pass": self.passed,
                "max_error_lsb": self.max_error_lsb, "tolerance_lsb": self.tolerance_lsb,
                "per_output": [asdict(o) for o in self.outputs], "per_layer": [asdict(x) for x in self.layers],
                **self.extra}

    def describe(self) -> str:
        head = ["tensor", "elements", "RMSE", "MAE", "max|err|", "L2 rel", "cosine", "RMSE LSB", "max LSB"]
        rows = [[f"output {o.name}", *_cells(o)] for o in self.outputs]
        rows += [[f"layer {x.name}", *_cells(x)] for x in self.layers]
        widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
        lines = [f"Accuracy against the float model, {self.samples} samples ({STATEMENT}).",
                 "  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True))]
        lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
        if self.tolerance_lsb is not None:
            lines.append(f"{'PASS' if self.passed else 'FAIL'}: max output error {self.max_error_lsb} LSB, tolerance "
                         f"{self.tolerance_lsb:g}")
        return "\n".join(lines)


def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.4g}"


def _cells(t: TensorError) -> list[str]:
    return [str(t.elements), _fmt(t.rmse), _fmt(t.mae), _fmt(t.max_abs), _fmt(t.l2_relative), _fmt(t.cosine),
            _fmt(t.rmse_lsb), _fmt(t.max_abs_lsb)]


class LiteRTFloatModel:
    """A float .tflite run with LiteRT's reference kernels, every intermediate tensor kept."""

    def __init__(self, path: Path) -> None:
        try:
            from ai_edge_litert.interpreter import Interpreter, OpResolverType
        except ImportError:
            raise QcError(f"--float-model with a .tflite needs LiteRT: {install_hint('oracles')}") from None
        with warnings.catch_warnings():  # keeping every tensor is what this is for, not a debugging accident
            warnings.filterwarnings("ignore", message=".*experimental_preserve_all_tensors")
            self.interpreter = Interpreter(model_path=str(path), experimental_preserve_all_tensors=True,
                                           experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
        self.interpreter.allocate_tensors()
        self.inputs = self.interpreter.get_input_details()
        self.outputs = self.interpreter.get_output_details()

    def run(self, inputs: list[np.ndarray]) -> dict[str, np.ndarray]:
        """Every named tensor's value after one invocation."""
        for detail, x in zip(self.inputs, inputs, strict=True):
            self.interpreter.set_tensor(detail["index"], x.astype(detail["dtype"]).reshape(detail["shape"]))
        self.interpreter.invoke()
        values = {}
        for detail in self.interpreter.get_tensor_details():
            try:
                values[detail["name"]] = np.array(self.interpreter.get_tensor(detail["index"]))
            except ValueError:  # tensors without data (unused, or freed scratch)
                continue
        return values

    def output_names(self) -> list[str]:
        return [d["name"] for d in self.outputs]

    def layer(self, values: dict[str, np.ndarray], name: str, shape: tuple[int, ...]) -> np.ndarray | None:
        """The float tensor of the same name and shape as a quantized model's buffer, if any."""
        value = values.get(name)
        return value if value is not None and value.shape == shape else None


class OnnxFloatModel:
    """A float .onnx run with onnxruntime's CPU execution provider (graph optimizations off, so that every node's
    output exists and is kept)."""

    SUFFIX = "_QuantizeLinear_Output"  # quantize_static's name of a QDQ model's quantized tensor

    def __init__(self, path: Path) -> None:
        try:
            import onnx
            import onnxruntime
        except ImportError:
            raise QcError(f"--float-model with a .onnx needs onnx and onnxruntime: {install_hint('oracles')}") from None
        model = onnx.load(str(path))
        self.outputs = [o.name for o in model.graph.output]
        self.inputs = [i.name for i in model.graph.input if i.name not in {t.name for t in model.graph.initializer}]
        kept = set(self.outputs)
        for node in model.graph.node:
            for name in node.output:
                if name and name not in kept:
                    model.graph.output.append(onnx.helper.make_empty_tensor_value_info(name))
                    kept.add(name)
        options = onnxruntime.SessionOptions()
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
        options.log_severity_level = 3
        try:
            self.session = onnxruntime.InferenceSession(model.SerializeToString(), options,
                                                        providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own exception types
            raise QcError(f"{path}: onnxruntime cannot load the float model: {str(exc).strip()[:300]}") from None

    def run(self, inputs: list[np.ndarray]) -> dict[str, np.ndarray]:
        names = [o.name for o in self.session.get_outputs()]
        values = self.session.run(None, dict(zip(self.inputs, inputs, strict=True)))
        return {n: np.asarray(v) for n, v in zip(names, values, strict=True)}

    def output_names(self) -> list[str]:
        return self.outputs

    def layer(self, values: dict[str, np.ndarray], name: str, shape: tuple[int, ...]) -> np.ndarray | None:
        """The float tensor a quantized buffer stands for (module docstring): same shape, or NCHW for a
        channels-last buffer when only the transposition matches."""
        value = values.get(name.removesuffix(self.SUFFIX)) if name.endswith(self.SUFFIX) else None
        if value is None or value.dtype != np.float32:
            return None
        nhwc = value.transpose(0, 2, 3, 1) if value.ndim == 4 else None
        if value.shape == shape:
            return value if nhwc is None or nhwc.shape != shape else None
        return nhwc if nhwc is not None and nhwc.shape == shape else None


def _float_inputs(schedule: Schedule, rng: np.random.Generator) -> list[np.ndarray]:
    """Float inputs spread over each quantized input's real range (its storage range dequantized); a float input
    (an ONNX model's, quantized inside) over its QuantizeLinear's range."""
    arrays = []
    for name in schedule.inputs:
        q = schedule.buffers[name].quant
        if schedule.buffers[name].dtype.is_float:
            lo, hi = float_input_range(schedule, name)
            arrays.append(rng.uniform(lo, hi, schedule.buffers[name].shape).astype(np.float32))
            continue
        if q is None or q.kind != "per_tensor":
            raise QcError(f"input {name!r}: float validation needs per-tensor quantized inputs")
        lo, hi = (q.storage_min - q.zero_point) * q.scale, (q.storage_max - q.zero_point) * q.scale
        arrays.append(rng.uniform(lo, hi, schedule.buffers[name].shape).astype(np.float32))
    return arrays


def verify_against_float_model(float_path: Path, schedule: Schedule, model: GeneratedModel,
                               runner: HostRunner | HarnessRunner, samples: int = 10, seed: int = 0,
                               tolerance_lsb: float | None = None) -> AccuracyResult:
    """Run seeded float inputs through the float model and (quantized as TFLite quantizes them) through the
    generated C; compare outputs, and layers whose tensor names and shapes match."""
    suffix = float_path.suffix.lower()
    if suffix not in (".tflite", ".onnx"):
        raise QcError(f"{float_path}: float models are read from .tflite and .onnx files")
    reference = LiteRTFloatModel(float_path) if suffix == ".tflite" else OnnxFloatModel(float_path)
    if len(reference.inputs) != len(schedule.inputs) or len(reference.outputs) != len(schedule.outputs):
        raise QcError(f"{float_path}: has {len(reference.inputs)} input(s) and {len(reference.outputs)} output(s), "
                      f"the quantized model {len(schedule.inputs)} and {len(schedule.outputs)}")
    rng = np.random.default_rng(seed)
    pairs = _Pairs()
    out_keys = [f"output:{n}" for n in schedule.outputs]
    for _ in range(samples):
        xs = _float_inputs(schedule, rng)
        quantized = [x if schedule.buffers[n].dtype.is_float else
                     quantize_values(x, schedule.buffers[n].quant, schedule.buffers[n].dtype)
                     for x, n in zip(xs, schedule.inputs, strict=True)]
        float_values = reference.run(xs)
        got, _ = runner.run(model, quantized)
        ours = run_reference(schedule, quantized)
        for n, key, fname, value in zip(schedule.outputs, out_keys, reference.output_names(), got, strict=True):
            pairs.add(key, schedule.buffers[n].quant, value, float_values[fname])
        for name, buf in schedule.buffers.items():
            want = reference.layer(float_values, name, buf.shape) if buf.kind == TEMP and buf.quant else None
            if want is not None:
                pairs.add(name, buf.quant, ours[name], want)
    errors = pairs.errors()
    return AccuracyResult(samples, [errors[k] for k in out_keys], [e for k, e in errors.items()
                                                                   if not k.startswith("output:")], tolerance_lsb)
