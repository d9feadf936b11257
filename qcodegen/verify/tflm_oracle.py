"""TFLite Micro as the oracle of .tflite models: the same seeded inputs go through TFLM's reference kernels
(PyPI tflite-micro) and through the generated C, and every output element must be identical.

Also a small builder of .tflite flatbuffers (tests and experiments build single-op models with it, on top of
tflite-micro's model_editor; no TensorFlow needed).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from ..codegen.render import GeneratedModel
from ..errors import QcError, install_hint
from ..ir.schedule import Schedule
from .check import Tally, VerifyResult, compare_state, random_inputs
from .runners import HarnessRunner, HostRunner

_NEEDS = f"the TFLM oracle needs the TFLite extra: {install_hint('tflite')}"


def _runtime() -> ModuleType:
    try:
        from tflite_micro import runtime
    except ImportError:
        raise QcError(_NEEDS) from None
    return runtime


class TflmModel:
    """A TFLM interpreter over one model; `run` resets it, so every call starts from the initial state.
    preserve=True keeps every tensor readable after an invocation (`tensor`: a streaming model's state)."""

    def __init__(self, model: bytes, preserve: bool = False) -> None:
        runtime = _runtime()
        config = runtime.InterpreterConfig.kPreserveAllTensors if preserve else \
            runtime.InterpreterConfig.kAllocationRecording
        try:
            self.interpreter = runtime.Interpreter.from_bytes(bytes(model), arena_size=max(1 << 20, 16 * len(model)),
                                                              intrepreter_config=config)
        except (RuntimeError, ValueError) as exc:
            raise QcError(f"TFLM cannot load the model: {str(exc).strip().splitlines()[-1:]}") from None

    def run(self, inputs: list[np.ndarray], outputs: int) -> list[np.ndarray]:
        self.interpreter.reset()
        return self.invoke(inputs, outputs)

    def invoke(self, inputs: list[np.ndarray], outputs: int) -> list[np.ndarray]:
        """One invocation on the interpreter's current state. Every input is set again: TFLM kernels may
        overwrite an input tensor in place."""
        for i, arr in enumerate(inputs):
            self.interpreter.set_input(np.ascontiguousarray(arr), i)
        try:
            self.interpreter.invoke()
        except RuntimeError as exc:
            raise QcError(f"TFLM failed to run the model: {str(exc).strip()[:300]}") from None
        return [np.array(self.interpreter.get_output(i)) for i in range(outputs)]

    def tensor(self, index: int) -> np.ndarray:
        """The values of tensor `index` of subgraph 0 (needs preserve=True)."""
        return np.array(self.interpreter.GetTensor(index, 0)["tensor_data"])


def verify_against_tflm(path: str | Path, schedule: Schedule, model: GeneratedModel,
                        runner: HostRunner | HarnessRunner, samples: int = 10, seed: int = 0,
                        inputs: list[list[np.ndarray]] | None = None, progress: Any = None) -> VerifyResult:
    """Run seeded inputs (qcodegen.verify.random_inputs over the schedule) through TFLM and the generated C;
    compare every output element exactly. first_mismatch: {sample, tensor, index, expected (TFLM), got (C)}.

    A streaming model runs the inputs as one sequence on one fresh interpreter and one C state (samples = the
    number of invocations); then the final state is compared too, for every state variable TFLM keeps in a
    tensor it exposes (variable tensors; the value last assigned to a resource variable)."""
    rng = np.random.default_rng(seed)
    batches = inputs if inputs is not None else [random_inputs(schedule, rng) for _ in range(samples)]
    stateful = bool(schedule.state)
    tflm = TflmModel(Path(path).read_bytes(), preserve=stateful)
    if stateful:
        tflm.interpreter.reset()  # variable tensors to TFLM's initial values
        got, got_state = runner.run_sequence(model, batches)
    tally = Tally()
    for n, batch in enumerate(batches):
        if stateful:
            want, outs = tflm.invoke(batch, len(schedule.outputs)), got[n]
        else:
            want, outs = tflm.run(batch, len(schedule.outputs)), runner.run(model, batch)[0]
        for j, name in enumerate(schedule.outputs):
            w, g = want[j], outs[j]
            if w.size != g.size or w.dtype != g.dtype:
                raise QcError(f"output {j} ({name!r}): TFLM gives {w.dtype} {list(w.shape)}, the C {g.dtype} "
                              f"{list(g.shape)}")
            tally.compare(w, g, {"sample": n, "tensor": name})
        if progress is not None:
            progress(n + 1, len(batches))
    if stateful:
        compare_state(tally, {v.name: tflm.tensor(v.source_index) for v in schedule.state
                              if v.source_index is not None}, model, got_state, len(batches))
    return tally.result(len(batches))


def check_tflite(path: str | Path, samples: int = 3, seed: int = 0, target: str = "generic",
                 inputs: list[list[np.ndarray]] | None = None) -> VerifyResult:
    """Compile a .tflite model (qcodegen.compiler.plan), generate C for `target` and verify it against TFLM."""
    from ..codegen import generate, load_target
    from ..compiler import plan
    from ..frontends import load_model
    from . import get_runner

    schedule = plan(load_model(path))
    tgt = load_target(target)
    with tempfile.TemporaryDirectory(prefix="qc-tflm-") as tmp:
        model = generate(schedule, Path(tmp), tgt, harness=tgt.runner == "harness")
        return verify_against_tflm(path, schedule, model, get_runner(tgt), samples=samples, seed=seed,
                                   inputs=inputs)


# --- building .tflite models ----------------------------------------------------------------------
@dataclass(eq=False)
class TensorSpec:
    """A tensor of a model under construction: `data` makes it a constant; `scale` quantizes it (a list with
    `axis` for per-channel)."""

    shape: tuple[int, ...]
    dtype: str = "int8"  # numpy name, or "int4" (stored packed)
    scale: float | list[float] | None = None
    zero_point: int | list[int] = 0
    axis: int | None = None
    data: np.ndarray | None = None
    name: str | None = None
    variable: bool = False  # a variable tensor (state an op updates in place, e.g. SVDF's)


@dataclass
class OpSpec:
    """One operator: builtin name (e.g. "CONV_2D"), input specs (None = absent optional), outputs, and the
    builtin options as camelCase fields of the schema's <Name>Options table (options_type picks the table
    when it is not the op's usual one)."""

    opcode: str
    inputs: list[TensorSpec | None]
    outputs: list[TensorSpec]
    options: dict[str, Any] = field(default_factory=dict)
    options_type: str | None = None


_OPTION_TABLES = {
    "CONV_2D": "Conv2DOptions", "DEPTHWISE_CONV_2D": "DepthwiseConv2DOptions", "AVERAGE_POOL_2D": "Pool2DOptions",
    "MAX_POOL_2D": "Pool2DOptions", "FULLY_CONNECTED": "FullyConnectedOptions", "ADD": "AddOptions",
    "SUB": "SubOptions", "MUL": "MulOptions", "CONCATENATION": "ConcatenationOptions",
    "RESHAPE": "ReshapeOptions", "SQUEEZE": "SqueezeOptions", "STRIDED_SLICE": "StridedSliceOptions",
    "TRANSPOSE_CONV": "TransposeConvOptions", "ARG_MAX": "ArgMaxOptions", "SOFTMAX": "SoftmaxOptions",
    "MAXIMUM": "MaximumMinimumOptions", "MINIMUM": "MaximumMinimumOptions", "PAD": "PadOptions",
    "PADV2": "PadV2Options", "TRANSPOSE": "TransposeOptions", "SLICE": "SliceOptions",
    "LEAKY_RELU": "LeakyReluOptions", "MEAN": "ReducerOptions", "SVDF": "SVDFOptions",
    "VAR_HANDLE": "VarHandleOptions", "READ_VARIABLE": "ReadVariableOptions",
    "ASSIGN_VARIABLE": "AssignVariableOptions", "CALL_ONCE": "CallOnceOptions",
}


@dataclass
class SubgraphSpec:
    """A subgraph after the first (e.g. the init subgraph of CALL_ONCE)."""

    ops: list[OpSpec]
    inputs: list[TensorSpec] = field(default_factory=list)
    outputs: list[TensorSpec] = field(default_factory=list)


def _schema() -> tuple[ModuleType, ModuleType]:
    try:
        from tflite_micro.tensorflow.lite.micro.compression import model_editor
        from tflite_micro.tensorflow.lite.micro.python import schema_py_generated
    except ImportError:
        raise QcError(_NEEDS) from None
    return schema_py_generated, model_editor


def _tensor(schema: ModuleType, me: ModuleType, spec: TensorSpec, index: int) -> Any:
    quant = None
    if spec.scale is not None:
        quant = me.Quantization(scales=spec.scale, zero_points=spec.zero_point, axis=spec.axis)
    type_name = spec.dtype.upper()
    data = None
    if spec.data is not None:
        values = np.asarray(spec.data)
        if spec.dtype == "int4":
            flat = values.reshape(-1).astype(np.int64) & 0xF
            flat = np.append(flat, 0) if flat.size % 2 else flat
            data = (flat[0::2] | (flat[1::2] << 4)).astype(np.uint8).tobytes()
        else:
            data = values.astype(np.dtype(spec.dtype).newbyteorder("<")).tobytes()
    tensor = me.Tensor(shape=tuple(spec.shape), dtype=getattr(schema.TensorType, type_name), data=data,
                       quantization=quant, name=spec.name or f"t{index}")
    tensor._fb.isVariable = spec.variable
    return tensor


def build_model(ops: list[OpSpec], inputs: list[TensorSpec], outputs: list[TensorSpec],
                subgraphs: list[SubgraphSpec] = ()) -> bytes:
    """A .tflite flatbuffer: subgraph 0 holds `ops` in order, `subgraphs` follow (dtype "resource" makes a
    resource-variable handle)."""
    schema, me = _schema()
    model = me.Model()
    for spec in [SubgraphSpec(ops, inputs, outputs), *subgraphs]:
        _add_subgraph(schema, me, model, spec)
    return bytes(model.build())


def _add_subgraph(schema: ModuleType, me: ModuleType, model: Any, spec: SubgraphSpec) -> None:
    made: dict[int, Any] = {}  # tensors belong to one subgraph

    def get(t: TensorSpec | None) -> Any:
        if t is None:
            return None
        if id(t) not in made:
            made[id(t)] = _tensor(schema, me, t, len(made))
        return made[id(t)]

    sg = model.add_subgraph()
    for op in spec.ops:
        fb = schema.OperatorT()
        table = op.options_type or _OPTION_TABLES.get(op.opcode)
        if table is not None:
            fb.builtinOptionsType = getattr(schema.BuiltinOptions, table)
            options = getattr(schema, f"{table}T")()
            for key, value in op.options.items():
                if not hasattr(options, key):
                    raise QcError(f"{table} has no field {key!r}")
                setattr(options, key, value)
            fb.builtinOptions = options
        sg.add_operator(opcode=getattr(schema.BuiltinOperator, op.opcode), inputs=[get(t) for t in op.inputs],
                        outputs=[get(t) for t in op.outputs], _fb=fb)
    sg.inputs = [get(t) for t in spec.inputs]
    sg.outputs = [get(t) for t in spec.outputs]


def single_op_model(opcode: str, inputs: list[TensorSpec | None], outputs: list[TensorSpec],
                    **options: Any) -> bytes:
    """A model with one operator; its non-constant inputs are the model inputs."""
    op = OpSpec(opcode, inputs, outputs, options)
    model_inputs = list({id(t): t for t in inputs if t is not None and t.data is None}.values())
    return build_model([op], model_inputs, outputs)
