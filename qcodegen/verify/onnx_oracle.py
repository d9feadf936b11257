"""ONNX oracles of .onnx models: onnxruntime's CPU execution provider (`--against onnxruntime`, PyPI onnxruntime,
the [oracles] extra) and onnx's reference evaluator (`--against onnx-ref`, onnx.reference.ReferenceEvaluator, the
[onnx] extra). The same seeded inputs go through the oracle and the generated C; every output element must be
identical (float outputs bit for bit). Same result contract as the other oracles (VerifyResult)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ..codegen.render import GeneratedModel
from ..errors import QcError
from ..ir.schedule import Schedule
from .check import VerifyResult, random_inputs
from .runners import HarnessRunner, HostRunner

Oracle = Callable[[list[np.ndarray]], list[np.ndarray]]
ORACLES = ("onnxruntime", "onnx-ref")


def _inputs(raw: bytes) -> list[tuple[str, np.dtype]]:
    """The graph inputs that are not initializers: name and numpy element type (onnx's int4 / uint4 types for
    4-bit inputs, which the reference evaluator checks and the C's int8 buffers do not carry)."""
    import onnx
    from onnx.helper import tensor_dtype_to_np_dtype

    model = onnx.load_model_from_string(raw)
    initializers = {t.name for t in model.graph.initializer}
    return [(v.name, tensor_dtype_to_np_dtype(v.type.tensor_type.elem_type)) for v in model.graph.input
            if v.name not in initializers]


def onnxruntime_oracle(raw: bytes, config: dict[str, str] | None = None) -> Oracle:
    """onnxruntime's CPU execution provider, one thread; `config`: session configuration entries (e.g.
    session.qdq_matmulnbits_accuracy_level)."""
    try:
        import onnxruntime
    except ImportError:
        raise QcError("--against onnxruntime needs onnxruntime: pip install 'qcodegen[oracles]'") from None
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.log_severity_level = 3
    for key, value in (config or {}).items():
        options.add_session_config_entry(key, value)
    try:
        session = onnxruntime.InferenceSession(raw, options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime raises its own exception types
        raise QcError(f"onnxruntime cannot load the model: {str(exc).strip()[:300]}") from None
    names = [i.name for i in session.get_inputs()]

    def run(inputs: list[np.ndarray]) -> list[np.ndarray]:
        try:
            return [np.asarray(v) for v in session.run(None, dict(zip(names, inputs, strict=True)))]
        except Exception as exc:
            raise QcError(f"onnxruntime failed to run the model: {str(exc).strip()[:300]}") from None
    return run


def _older_opset_kernels(raw: bytes) -> list[type]:
    """Kernels for op versions the reference evaluator lacks. onnx 1.21's evaluator implements DequantizeLinear
    from version 19 only, so a model of default opset 10..18 (DequantizeLinear-10 / -13) does not load. Version
    19 only adds float8 inputs and float16 / bfloat16 scales; for the types those opsets allow (8-bit and int32
    data, float32 scales; axis 1 by default, as in 13) it computes the same, so it stands in for them."""
    import onnx
    import onnx.defs
    from onnx.reference.ops.op_dequantize_linear import DequantizeLinear_19

    opsets = {o.domain: o.version for o in onnx.load_model_from_string(raw).opset_import}
    if opsets.get("", opsets.get("ai.onnx", 19)) >= 19:
        return []
    kernel = type("DequantizeLinear", (DequantizeLinear_19,),
                  {"op_domain": "", "op_schema": onnx.defs.get_schema("DequantizeLinear", 19)})
    return [kernel]


def reference_oracle(raw: bytes) -> Oracle:
    try:
        from onnx.reference import ReferenceEvaluator
    except ImportError:
        raise QcError("--against onnx-ref needs onnx: pip install 'qcodegen[onnx]'") from None
    try:
        evaluator = ReferenceEvaluator(raw, new_ops=_older_opset_kernels(raw))
    except Exception as exc:  # e.g. com.microsoft operators, which the reference does not implement
        raise QcError(f"the ONNX reference evaluator cannot load the model: {str(exc).strip()[:300]}") from None
    declared = _inputs(raw)

    def run(inputs: list[np.ndarray]) -> list[np.ndarray]:
        feeds = {name: np.asarray(x).astype(dt) for (name, dt), x in zip(declared, inputs, strict=True)}
        try:
            return [np.asarray(v) for v in evaluator.run(None, feeds)]
        except Exception as exc:
            raise QcError(f"the ONNX reference evaluator failed: {str(exc).strip()[:300]}") from None
    return run


def _bits(arr: np.ndarray) -> np.ndarray:
    return arr.view(np.uint32) if arr.dtype == np.float32 else arr.astype(np.int64)


def _scalar(v: np.generic) -> int | float:
    return float(v) if np.issubdtype(type(v), np.floating) else int(v)


def compare_with_oracle(oracle: Oracle, schedule: Schedule, model: GeneratedModel,
                        runner: HostRunner | HarnessRunner, samples: int = 10, seed: int = 0,
                        inputs: list[list[np.ndarray]] | None = None, name: str = "the oracle") -> VerifyResult:
    """Run seeded inputs (random_inputs over the schedule) through `oracle` and the C; compare every element.
    first_mismatch: {sample, tensor, index, expected (oracle), got (C)}."""
    rng = np.random.default_rng(seed)
    batches = inputs if inputs is not None else [random_inputs(schedule, rng) for _ in range(samples)]
    mismatches = 0
    first: dict[str, Any] | None = None
    for n, batch in enumerate(batches):
        want = oracle(batch)
        got, _ = runner.run(model, batch)
        for j, out in enumerate(schedule.outputs):
            w, g = want[j], got[j]
            if w.size != g.size or np.dtype(w.dtype).itemsize != g.dtype.itemsize:
                raise QcError(f"output {j} ({out!r}): {name} gives {w.dtype} {list(w.shape)}, the C {g.dtype} "
                              f"{list(g.shape)}")
            diff = np.flatnonzero(_bits(w).reshape(-1) != _bits(g).reshape(-1))
            mismatches += int(diff.size)
            if diff.size and first is None:
                i = int(diff[0])
                first = {"sample": n, "tensor": out, "index": i, "expected": _scalar(w.reshape(-1)[i]),
                         "got": _scalar(g.reshape(-1)[i])}
    return VerifyResult(mismatches == 0, len(batches), mismatches, first)


def verify_against_onnx(path: str | Path, against: str, schedule: Schedule, model: GeneratedModel,
                        runner: HostRunner | HarnessRunner, samples: int = 10, seed: int = 0,
                        inputs: list[list[np.ndarray]] | None = None) -> VerifyResult:
    """`against`: "onnxruntime" or "onnx-ref"."""
    if Path(path).suffix.lower() != ".onnx":
        raise QcError(f"--against {against} needs a .onnx model")
    raw = Path(path).read_bytes()
    oracle = onnxruntime_oracle(raw) if against == "onnxruntime" else reference_oracle(raw)
    name = "onnxruntime" if against == "onnxruntime" else "the ONNX reference evaluator"
    return compare_with_oracle(oracle, schedule, model, runner, samples, seed, inputs, name)
