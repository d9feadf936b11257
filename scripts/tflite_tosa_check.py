"""TOSA graphs made by the TFLite -> TOSA converter, compiled by qcodegen and compared with TFLite Micro.

    python scripts/tflite_tosa_check.py [--samples N] [--seed S] [--target T] [--keep DIR] [MODEL.tflite ...]

Each TFLite model (default: the shared models in $QC_SHARED_DIR/testdata/tflite/models, the MLPerf-Tiny-shaped
models of bench/models.py, their int16x8 DS-CNN KWS and a tanh/sigmoid/softmax graph) goes through
tosa-converter-for-tflite (TOSA MLIR text) and `tosa-opt --tosa-serialize` (a .tosa flatbuffer, tosa-tools); qcodegen
plans the .tosa graph, generates C for the target and runs it on seeded random inputs, and TFLite Micro runs the
.tflite model on the same inputs. Per model it prints whether the graph compiles, the steps range analysis widened
(Step.widened), the output elements compared and how many differ from TFLM, and on how many samples qcodegen's
numpy reference finds a TOSA REQUIRE violated by the data (the graph's result is then unpredictable in TOSA's
terms, whatever TFLM computes). Exit status 0 when every model compiles and every output element equals TFLM's.

Models whose TFLite tensors declare a dynamic batch (shape_signature -1) get their static shape pinned before the
conversion: the converter then writes static TOSA shapes.

Needs tosa-converter-for-tflite, tosa-tools and tflite-micro (pip install '.[test]').
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from qcodegen.codegen import generate, load_target  # noqa: E402
from qcodegen.compiler import plan  # noqa: E402
from qcodegen.errors import QcError  # noqa: E402
from qcodegen.fixedpoint import Unpredictable  # noqa: E402
from qcodegen.frontends import load_model  # noqa: E402
from qcodegen.reference import run_reference  # noqa: E402
from qcodegen.verify import get_runner, random_inputs  # noqa: E402
from qcodegen.verify.tflm_oracle import OpSpec, TensorSpec, TflmModel  # noqa: E402

SHARED = Path(os.environ.get("QC_SHARED_DIR", ROOT.parent / "shared"))


def bench_models() -> ModuleType:
    """bench/models.py (the benchmarks' model builders; not part of the installed package)."""
    spec = importlib.util.spec_from_file_location("qc_bench_models", ROOT / "bench" / "models.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def activations_model(models: ModuleType) -> bytes:
    """An int8 graph of the LUT activations: FC 32 -> TANH -> FC 32 -> LOGISTIC -> FC 10 -> SOFTMAX, their inputs
    spread over the activations' unsaturated ranges (about 1.5, 3 and 2 real units)."""
    net = models.Net(5, (1, 48), scale=0.05, zero_point=3)
    x = net.fully_connected(net.input, 32, act=models.NONE)
    net.spread_reals(x, 1.5)
    tanh = TensorSpec(x.shape, scale=1.0 / 128, zero_point=0, name="tanh")
    net.ops.append(OpSpec("TANH", [x], [tanh]))
    net.spread[id(tanh)] = 80.0
    y = net.fully_connected(tanh, 32, act=models.NONE)
    net.spread_reals(y, 3.0)
    sigmoid = TensorSpec(y.shape, scale=1.0 / 256, zero_point=-128, name="sigmoid")
    net.ops.append(OpSpec("LOGISTIC", [y], [sigmoid]))
    net.spread[id(sigmoid)] = 60.0
    z = net.fully_connected(sigmoid, 10, act=models.NONE)
    return net.build(net.softmax(z, logits_std=2.0))


def default_models(workdir: Path) -> list[Path]:
    """The shared .tflite models, the bench models (built into workdir; DS-CNN also with logits spread over about 2
    real units, as a trained classifier's: the bench builds' logits are so wide that their softmax is one-hot),
    the 16x8 DS-CNN (both ways) and the activations graph."""
    paths = sorted((SHARED / "testdata" / "tflite" / "models").glob("*.tflite"))
    models = bench_models()
    built = dict(models.BUILT)
    built["ds_cnn_logits2"] = lambda: models.ds_cnn(logits_std=2.0)  # a softmax over logits of a trained net's
    built["ds_cnn_16x8"] = lambda: models.ds_cnn(activations="int16")
    built["ds_cnn_16x8_logits2"] = lambda: models.ds_cnn(activations="int16", logits_std=2.0)
    built["ds_cnn_16x8_logits8"] = lambda: models.ds_cnn(activations="int16", logits_std=8.0)
    built["activations"] = lambda: activations_model(models)
    for name, builder in built.items():
        path = workdir / f"{name}.tflite"
        path.write_bytes(builder())
        paths.append(path)
    return paths


def pin_dynamic_shapes(model: bytes) -> bytes:
    """The model with every shape_signature dropped (a -1 there marks a dynamic dimension; `shape` holds the
    static one)."""
    import flatbuffers
    from tflite_micro.tensorflow.lite.micro.python import schema_py_generated as schema

    m = schema.ModelT.InitFromPackedBuf(model, 0)
    dynamic = False
    for sg in m.subgraphs or []:
        for t in sg.tensors or []:
            if t.shapeSignature is not None and -1 in list(t.shapeSignature):
                dynamic = True
            t.shapeSignature = None
    if not dynamic:
        return model
    builder = flatbuffers.Builder(len(model))
    builder.Finish(m.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def _tool(name: str) -> str:
    """An executable of the Python environment (tosa-opt, ...): beside the interpreter, or on PATH."""
    local = Path(sys.executable).parent / name
    found = str(local) if local.is_file() else shutil.which(name)
    if found is None:
        raise QcError(f"{name} not found (pip install tosa-tools)")
    return found


def convert(tflite: Path, outdir: Path) -> Path:
    """tflite -> TOSA MLIR text (tosa-converter-for-tflite) -> .tosa flatbuffer (tosa-opt --tosa-serialize)."""
    from tosa_converter_for_tflite import TosaConverterOutputFormat, tflite_flatbuffer_to_tosa_mlir

    outdir.mkdir(parents=True, exist_ok=True)
    pinned = outdir / f"{tflite.stem}.pinned.tflite"
    pinned.write_bytes(pin_dynamic_shapes(tflite.read_bytes()))
    mlir, tosa = outdir / f"{tflite.stem}.mlir", outdir / f"{tflite.stem}.tosa"
    try:
        tflite_flatbuffer_to_tosa_mlir(str(pinned), str(mlir), TosaConverterOutputFormat.Text)
    except Exception as exc:  # the converter raises its own RuntimeError types
        raise QcError(f"the converter failed: {str(exc).strip().splitlines()[-1][:200]}") from None
    proc = subprocess.run([_tool("tosa-opt"), "--tosa-serialize", f"--tosa-flatbuffer-filename={tosa}", str(mlir),
                           "-o", os.devnull], capture_output=True, text=True)
    if proc.returncode != 0 or not tosa.is_file():
        raise QcError(f"tosa-opt --tosa-serialize failed: {proc.stderr.strip()[:200]}")
    return tosa


@dataclass
class Result:
    model: str
    error: str = ""  # why it does not compile (or convert)
    widened: list[str] = field(default_factory=list)  # "step k (source)"
    samples: int = 0
    elements: int = 0  # output elements compared
    mismatches: int = 0  # of them, differing from TFLM
    max_diff: int = 0
    unpredictable: int = 0  # samples on which the numpy reference finds a TOSA REQUIRE violated
    first: str = ""  # the first differing element
    refmodel_mismatches: int = 0  # output elements where qcodegen differs from the TOSA reference model
    refmodel_unpredictable: int = 0  # samples on which the reference model reports TOSA_UNPREDICTABLE

    @property
    def ok(self) -> bool:
        return not self.error and self.mismatches == 0


def check(tflite: Path, workdir: Path, samples: int = 5, seed: int = 0, target: str = "generic") -> Result:
    """Convert, compile and run `tflite` through TOSA, and compare every output element with TFLM's (and with the
    TOSA reference model's, which runs the same .tosa graph)."""
    import tosa_reference_model

    result = Result(tflite.stem)
    try:
        tosa = convert(tflite, workdir / tflite.stem)
        schedule = plan(load_model(str(tosa)))
    except QcError as exc:
        result.error = f"{type(exc).__name__}: {exc}"
        return result
    result.widened = [f"step {k} ({s.source or s.op})" for k, s in enumerate(schedule.steps) if s.widened]
    tgt = load_target(target)
    tflm = TflmModel(pin_dynamic_shapes(tflite.read_bytes()))
    rng = np.random.default_rng(seed)
    with tempfile.TemporaryDirectory(prefix="qc-tosa-tflm-") as tmp:
        model = generate(schedule, Path(tmp), tgt, harness=tgt.runner == "harness")
        runner = get_runner(tgt)
        for n in range(samples):
            batch = random_inputs(schedule, rng)
            try:
                run_reference(schedule, batch)
            except Unpredictable:
                result.unpredictable += 1
            got, _ = runner.run(model, batch)
            want = tflm.run(batch, len(schedule.outputs))
            refmodel, status = tosa_reference_model.run(tosa.read_bytes(), batch)
            if status.name == "TOSA_VALID":
                result.refmodel_mismatches += sum(int(np.count_nonzero(r.reshape(-1).astype(np.int64) !=
                                                                       g.reshape(-1).astype(np.int64)))
                                                  for r, g in zip(refmodel, got, strict=True))
            else:
                result.refmodel_unpredictable += 1
            for j, (w, g) in enumerate(zip(want, got, strict=True)):
                w, g = w.reshape(-1).astype(np.int64), g.reshape(-1).astype(np.int64)
                diff = np.flatnonzero(w != g)
                result.elements += w.size
                result.mismatches += diff.size
                if diff.size:
                    result.max_diff = max(result.max_diff, int(np.abs(w - g).max()))
                    if not result.first:
                        i = int(diff[0])
                        result.first = f"sample {n} output {j} index {i}: TFLM {int(w[i])}, qcodegen {int(g[i])}"
            result.samples += 1
    return result


def report(results: list[Result]) -> str:
    """One line per model: compiles, widened steps, output elements equal to TFLM's, samples on which qcodegen's
    reference / the TOSA reference model find a REQUIRE violated, elements differing from the reference model."""
    lines = [f"{'model':<22} {'compiles':<8} {'widened':>7} {'equal to TFLM':<27} {'unpredictable':>13} "
             f"{'refmodel':>9} {'!= refmodel':>11}"]
    for r in results:
        if r.error:
            lines.append(f"{r.model:<22} {'no':<8} {r.error[:160]}")
            continue
        exact = f"{r.elements - r.mismatches}/{r.elements}" + (f" (max |diff| {r.max_diff})" if r.mismatches else "")
        lines.append(f"{r.model:<22} {'yes':<8} {len(r.widened):>7} {exact:<27} {r.unpredictable:>8}/{r.samples:<4} "
                     f"{r.refmodel_unpredictable:>4}/{r.samples:<4} {r.refmodel_mismatches:>11}")
    for r in results:
        if r.widened:
            lines.append(f"{r.model}: widened {', '.join(r.widened)}")
        if r.first:
            lines.append(f"{r.model}: first difference at {r.first}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="*", type=Path, help=".tflite files (default: see the module docstring)")
    ap.add_argument("--samples", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--target", default="generic")
    ap.add_argument("--keep", type=Path, help="keep the built, converted and serialized models in this folder")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="qc-tflite-tosa-") as tmp:
        workdir = args.keep or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        paths = args.models or default_models(workdir)
        results = []
        for path in paths:
            results.append(check(path, workdir, args.samples, args.seed, args.target))
            print(report(results[-1:]).splitlines()[1], flush=True)
        print(report(results))
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
