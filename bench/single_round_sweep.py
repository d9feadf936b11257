"""Sweep every accumulator of every RESCALE_F32 the planner replaces by a single-rounding RESCALE
(qcodegen/plan/single_round.py, docs/semantics.md §14.5) in the full-shape ONNX models of bench/onnx_models.py:
over the accumulator range range analysis proves, on every channel, the RESCALE's reference must equal the
RESCALE_F32 reference (the float32 definition, numpy float32). Run by hand; prints the counts."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import onnx_models  # noqa: E402
from qcodegen import primitives  # noqa: E402
from qcodegen.frontends.onnx import import_onnx_bytes  # noqa: E402
from qcodegen.ir.schedule import StepIO  # noqa: E402
from qcodegen.lower import lower_graph  # noqa: E402
from qcodegen.plan.passes import PASSES  # noqa: E402
from qcodegen.plan.ranges import analyse_ranges  # noqa: E402
from qcodegen.plan.single_round import single_round_f32_rescales  # noqa: E402

CHUNK = 1 << 16


def sweep(f32: StepIO, rescale: StepIO) -> tuple[int, int]:
    """(accumulator x channel pairs compared, of them differing) over f32's input range."""
    lo, hi = f32.ins[0].value_range
    channels = primitives.get("RESCALE_F32").scales(f32).size
    axis = 1 if channels > 1 else None
    compared = differing = 0
    for start in range(lo, hi + 1, CHUNK):
        a = np.arange(start, min(start + CHUNK, hi + 1), dtype=np.int64)
        x = np.repeat(a[:, None], channels, axis=1) if axis else a
        want = primitives.get("RESCALE_F32")._apply(f32, x, axis)
        got = primitives.get("RESCALE")._apply(rescale, x, axis)
        compared += x.size
        differing += int(np.count_nonzero(want != got))
    return compared, differing


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--models", nargs="*", default=list(onnx_models.MODELS))
    ap.add_argument("--full-range", action="store_true", help="8-bit weights (default: reduce_range, 7 bits)")
    args = ap.parse_args()
    start = time.perf_counter()
    for model in args.models:
        for per_channel, activations in ((False, "uint8"), (True, "int8"), (False, "int8"), (True, "uint8")):
            raw = onnx_models.quantize(onnx_models.MODELS[model](), per_channel, activations,
                                       reduce_range=not args.full_range)
            graph = import_onnx_bytes(raw, model, model)
            graph.validate()
            schedule = lower_graph(graph)
            for p in PASSES[:PASSES.index(single_round_f32_rescales)]:
                p(schedule)
            analyse_ranges(schedule)
            f32 = {i: StepIO(s, *map(list, (schedule.io(s).ins, schedule.io(s).outs)))
                   for i, s in enumerate(schedule.steps) if s.op == "RESCALE_F32"}
            single_round_f32_rescales(schedule)
            replaced = {i: io for i, io in f32.items() if schedule.steps[i].op == "RESCALE"}
            compared = differing = 0
            for i, io in replaced.items():
                c, d = sweep(io, StepIO(schedule.steps[i], io.ins, io.outs))
                compared, differing = compared + c, differing + d
            print(f"{model} {'per-channel' if per_channel else 'per-tensor'} {activations}: {len(replaced)} of "
                  f"{len(f32)} RESCALE_F32 replaced; {compared:,} accumulator x channel pairs, {differing} differ "
                  f"({time.perf_counter() - start:.1f} s)", flush=True)


if __name__ == "__main__":
    main()
