"""The ONNX backend node tests of the quantized operators, run through qcodegen's generated C (docs/onnx.md).

The cases are enumerated from the installed onnx package (onnx.backend.test.case.node: each test's model, inputs
and expected outputs, built in memory). qcodegen compiles quantized models whose quantization parameters are
constants, so the inputs that hold parameters -- scales, zero points, and the weights of convolutions -- become
initializers with the test's values; the data inputs stay inputs. Each case is compiled, its C run on the test's
inputs and every output element compared exactly with the expected one.

    python -m qcodegen.conformance.onnx_nodes [--target generic]

prints one line per case (pass, mismatch, or the reason it cannot run) and the pass count; exit 0 when every case
passes or fails for a reason listed in docs/onnx.md.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import QcError

OPS = ("QuantizeLinear", "DequantizeLinear", "QLinearConv", "QLinearMatMul", "MatMulInteger", "ConvInteger",
       "DynamicQuantizeLinear")
# inputs that stay model inputs (everything else becomes an initializer)
DATA_INPUTS = {"QuantizeLinear": (0,), "DequantizeLinear": (0,), "QLinearConv": (0,), "QLinearMatMul": (0, 3),
               "MatMulInteger": (0, 1), "ConvInteger": (0,), "DynamicQuantizeLinear": (0,)}


@dataclass
class Case:
    name: str
    op: str
    model: Any  # onnx.ModelProto
    inputs: list[Any]  # numpy arrays, or TensorProto for element types numpy lacks (int4, float8, ...)
    outputs: list[Any]


@dataclass
class Outcome:
    name: str
    status: str  # "pass", "mismatch", "unsupported", "error"
    detail: str = ""
    onnxruntime_agrees: bool | None = None  # mismatches: whether onnxruntime computes what the C computes
    reference_agrees: bool | None = None  # compiled cases: whether onnx's reference evaluator computes the C's values


def _node_tests() -> list[Any]:
    """The registered node tests of the modules of OPS (importing a module of onnx.backend.test.case.node runs its
    exporters, which register its tests; importing all of them, as collect_testcases does, takes seconds)."""
    import importlib

    from onnx.backend.test.case import node

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            for op in OPS:
                importlib.import_module(f"{node.__name__}.{op.lower()}")
            return list(node._NodeTestCases)
        except (ImportError, AttributeError):  # another layout of the package: import everything
            return list(node.collect_testcases(None))


def cases() -> list[Case]:
    """Every node test whose graph uses one of OPS, from the installed onnx package (one per data set)."""
    found = _node_tests()
    out = []
    for tc in found:
        ops = [n.op_type for n in tc.model.graph.node]
        op = next((o for o in ops if o in OPS), None)
        if op is None or tc.name.endswith("_expanded"):
            continue
        for k, (ins, outs) in enumerate(tc.data_sets or []):
            name = tc.name if len(tc.data_sets) == 1 else f"{tc.name}[{k}]"
            out.append(Case(name, op, tc.model, list(ins), list(outs)))
    return sorted(out, key=lambda c: c.name)


def as_array(value: Any) -> np.ndarray:
    """A test value as numpy (4-bit data unpacked to int8 / uint8, one value per byte)."""
    if isinstance(value, np.ndarray | np.generic):
        return np.asarray(value)
    from onnx import numpy_helper

    array = numpy_helper.to_array(value)
    if array.dtype.name in ("int4", "uint4"):
        return array.astype(np.int8 if array.dtype.name == "int4" else np.uint8)
    return array


def constant_model(case: Case) -> tuple[bytes, list[np.ndarray]]:
    """The case's model with its parameter inputs as initializers, and the remaining (data) inputs."""
    from onnx import numpy_helper

    model = type(case.model)()
    model.CopyFrom(case.model)
    graph = model.graph
    node = next(n for n in graph.node if n.op_type == case.op)
    keep = {node.input[i] for i in DATA_INPUTS[case.op] if i < len(node.input)}
    data = []
    inputs = list(graph.input)
    del graph.input[:]
    for value, array in zip(inputs, case.inputs, strict=True):
        if value.name in keep:
            graph.input.append(value)
            data.append(as_array(array))
        elif isinstance(array, np.ndarray | np.generic):
            graph.initializer.append(numpy_helper.from_array(np.asarray(array), value.name))
        else:
            tensor = type(array)()
            tensor.CopyFrom(array)
            tensor.name = value.name
            graph.initializer.append(tensor)
    if not data:
        raise QcError("the test has no data input")
    return model.SerializeToString(), data


def run_case(case: Case, target: str = "generic") -> Outcome:
    from ..codegen import generate, load_target
    from ..compiler import plan
    from ..frontends.onnx import import_onnx_bytes
    from ..verify import get_runner

    try:
        raw, data = constant_model(case)
        schedule = plan(import_onnx_bytes(raw, case.name, case.name))
        tgt = load_target(target)
        with tempfile.TemporaryDirectory(prefix="qc-onnx-node-") as tmp:
            model = generate(schedule, Path(tmp), tgt, harness=tgt.runner == "harness")
            got, _ = get_runner(tgt).run(model, data)
    except QcError as exc:
        return Outcome(case.name, "unsupported", str(exc))
    for j, (g, w) in enumerate(zip(got, case.outputs, strict=True)):
        want = as_array(w)
        if want.dtype.kind not in "iuf" or want.dtype.itemsize != g.dtype.itemsize:
            return Outcome(case.name, "error", f"output {j}: expected {want.dtype}, the C gives {g.dtype}")
        a, b = (v.reshape(-1).view(np.uint32) if v.dtype == np.float32 else v.reshape(-1).astype(np.int64)
                for v in (want.astype(g.dtype) if want.dtype != g.dtype else want, g))
        diff = np.flatnonzero(a != b)
        if diff.size:
            i = int(diff[0])
            agrees = _onnxruntime_agrees(raw, data, got)
            note = {True: "; onnxruntime computes the C's values", False: "; onnxruntime differs from both",
                    None: ""}[agrees]
            return Outcome(case.name, "mismatch", f"output {j}: {diff.size} of {a.size} elements differ; first at "
                                                  f"{i}: expected {want.reshape(-1)[i]}, got {g.reshape(-1)[i]}"
                                                  f"{note}", agrees, _oracle_agrees("onnx-ref", raw, data, got))
    return Outcome(case.name, "pass", reference_agrees=_oracle_agrees("onnx-ref", raw, data, got))


def _onnxruntime_agrees(raw: bytes, data: list[np.ndarray], got: list[np.ndarray]) -> bool | None:
    return _oracle_agrees("onnxruntime", raw, data, got)


def _oracle_agrees(oracle: str, raw: bytes, data: list[np.ndarray], got: list[np.ndarray]) -> bool | None:
    """Whether the oracle's outputs (onnxruntime, or onnx's reference evaluator: "onnx-ref") equal the C's (None
    when it is not installed or cannot run the model)."""
    from ..verify.onnx_oracle import onnxruntime_oracle, reference_oracle
    try:
        want = (onnxruntime_oracle if oracle == "onnxruntime" else reference_oracle)(raw)(data)
    except QcError:
        return None
    return all(np.array_equal(np.asarray(w).reshape(-1).astype(np.float64), g.reshape(-1).astype(np.float64))
               for w, g in zip(want, got, strict=True))  # float64 holds every int32 and float32 exactly


def run_all(target: str = "generic") -> list[Outcome]:
    return [run_case(c, target) for c in cases()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", default="generic")
    args = parser.parse_args(argv)
    outcomes = run_all(args.target)
    for o in outcomes:
        print(f"{o.status:<12} {o.name}" + (f": {o.detail}" if o.detail else ""))
    passed = sum(o.status == "pass" for o in outcomes)
    print(f"{passed} / {len(outcomes)} pass")
    return 0 if all(o.status in ("pass", "unsupported") for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
