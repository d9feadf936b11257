"""Memory vs instructions of patch-based execution (issue 18 item 1; docs/semantics.md §10.2).

Run by hand (not a test; progress goes to stderr):

    python bench/memory_bench.py                                    # every model, Cortex-M4 and generic
    python bench/memory_bench.py --models ds_cnn --targets cortex-m4
    python bench/memory_bench.py --write bench/MEMORY.md --svg bench/memory_tradeoff.svg --fit

Per model (bench/models.py) it plans the layer-wise schedule and every patch configuration the planner's search
visits (qcodegen/plan/patches.py: stage length in primitive steps of the chain, output rows per band), then for
each: the arena and the live-set bound of the executed schedule next to the layer-wise bound; on Cortex-M4 the
instructions of one inference and the estimated cycles (`verify -t cortex-m4 --json`), .text and .rodata; on
generic the instructions of one inference of the harness under valgrind callgrind (`--toggle-collect=<name>_run`);
bit-exactness of the C against the numpy reference of the same (transformed) schedule on each target, and, for
the configurations the policies pick, against TFLite Micro. `--fit` fits the cost model's constants (extra
Cortex-M4 instructions against the counts of qcodegen.plan.patches.Cost) by least squares and prints them.

Time (2-core machine shared with other jobs): about 1-2 minutes per model and target (qemu-system-arm counts
MobileNetV1 in ~4 s per configuration, callgrind the generic harness in ~5 s).
Needs tflite-micro (bench/models.py builds the models with its model builder) and valgrind for the generic rows.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.models import ALL, model_path  # noqa: E402
from bench.tflite_bench import callgrind  # noqa: E402
from qcodegen.codegen import generate, load_target  # noqa: E402
from qcodegen.compiler import check_schedule, plan  # noqa: E402
from qcodegen.frontends import load_model  # noqa: E402
from qcodegen.ir.schedule import MemoryGoal  # noqa: E402
from qcodegen.lower import lower_graph  # noqa: E402
from qcodegen.plan import patches  # noqa: E402
from qcodegen.plan.memory import memory_plan  # noqa: E402
from qcodegen.plan.passes import PASSES  # noqa: E402
from qcodegen.verify import get_runner, verify_schedule  # noqa: E402
from qcodegen.verify.check import random_inputs  # noqa: E402
from qcodegen.verify.runners import HarnessRunner, write_raw  # noqa: E402
from qcodegen.verify.tflm_oracle import verify_against_tflm  # noqa: E402

POLICIES = ("balanced", "min")


@dataclass
class Row:
    model: str
    config: str  # "layer-wise" or "<steps>x<rows>"
    picked_by: list[str] = field(default_factory=list)  # policies that choose this configuration
    arena: int = 0
    bound: int = 0
    layer_bound: int = 0
    bands: int = 0
    macs: int = 0
    counts: dict[str, int] = field(default_factory=dict)  # qcodegen.plan.patches.Cost
    estimated_overhead: float = 0.0
    m4_instructions: int | None = None
    m4_cycles: int | None = None
    text_bytes: int | None = None
    rodata_bytes: int | None = None
    generic_instructions: int | None = None
    bit_exact: dict[str, bool] = field(default_factory=dict)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def configurations(path: Path) -> list[tuple[int, int]]:
    """(steps, rows) of every configuration of the first chain the planner's search visits."""
    graph = load_model(path)
    graph.validate()
    schedule = lower_graph(graph)
    check_schedule(schedule)
    for p in PASSES[:PASSES.index(patches.patch_based_execution)]:
        p(schedule)
    search = patches._Search(schedule)
    for policy in POLICIES:
        search.explore(MemoryGoal(policy))
    return sorted({(c.steps, c.rows) for c in search.found.values() if c.chain == 0})


def measure(name: str, path: Path, goal: MemoryGoal, targets: list[str], workdir: Path, tflm: bool) -> Row:
    schedule = plan(load_model(path), memory=goal)
    p = schedule.patching
    row = Row(name, "layer-wise" if p is None else f"{p.steps}x{p.rows}", arena=schedule.arena_size,
              bound=schedule.arena_lower_bound, layer_bound=schedule.layer_bound, bands=p.bands if p else 0,
              estimated_overhead=p.estimated_overhead if p else 0.0)
    counts = patches.cost(schedule, memory_plan(schedule, place=False))
    row.counts = {k: v for k, v in asdict(counts).items() if k != "macs"}
    row.macs = counts.macs
    for target_name in targets:
        target = load_target(target_name)
        outdir = workdir / f"{name}_{row.config}_{target_name}"
        model = generate(schedule, outdir, target, name=name, harness=True)
        if target_name == "generic":
            runner = HarnessRunner(target)
            result = verify_schedule(schedule, model, get_runner(target), samples=1)
            inputs = random_inputs(schedule, np.random.default_rng(0))
            files = []
            for i, (buf, arr) in enumerate(zip(model.inputs, inputs, strict=True)):
                files.append(outdir / f"in{i}.bin")
                write_raw(files[-1], arr, buf.dtype.is_packed)
            files += [outdir / f"out{i}.bin" for i in range(len(model.outputs))]
            row.generic_instructions = callgrind([str(runner.executable(model)), "-n", "1", *map(str, files)],
                                                 f"{name}_run", outdir / "cg.out")
        else:
            runner = get_runner(target, measure=True)
            result = verify_schedule(schedule, model, runner, samples=1)
            m = runner.measurements(model)
            row.m4_instructions, row.m4_cycles = m.get("instructions"), m.get("cycles_estimate")
            row.text_bytes, row.rodata_bytes = m.get("text_bytes"), m.get("rodata_bytes")
        row.bit_exact[target_name] = result.bit_exact
        if tflm and target_name == targets[0] and path.suffix == ".tflite":
            oracle = verify_against_tflm(path, schedule, model, get_runner(target), samples=2)
            row.bit_exact[f"{target_name} vs TFLM"] = oracle.bit_exact
    return row


def _n(value: int | None) -> str:
    return "" if value is None else f"{value:,}"


def _pct(value: int | None, base: int | None) -> str:
    return "" if value is None or not base else f"{100 * (value - base) / base:+.1f}%"


def table(rows: list[Row]) -> str:
    head = ("| model | config (steps x rows) | bands | picked by | arena B | / layer-wise bound | executed bound B | "
            "Cortex-M4 instr | vs layer-wise | est. cycles | model estimate | generic instr | vs layer-wise | "
            ".text B | .rodata B | bit-exact |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    base: dict[str, Row] = {}
    for r in rows:
        base.setdefault(r.model, r)
        b = base[r.model]
        exact = ", ".join(f"{k} {'yes' if v else 'NO'}" for k, v in r.bit_exact.items())
        lines.append(
            f"| {r.model} | {r.config} | {r.bands or ''} | {', '.join(r.picked_by)} | {r.arena:,} | "
            f"{r.arena / r.layer_bound:.2f} | {r.bound:,} | {_n(r.m4_instructions)} | "
            f"{_pct(r.m4_instructions, b.m4_instructions)} | {_n(r.m4_cycles)} | "
            f"{100 * r.estimated_overhead:+.1f}% | {_n(r.generic_instructions)} | "
            f"{_pct(r.generic_instructions, b.generic_instructions)} | {_n(r.text_bytes)} | "
            f"{_n(r.rodata_bytes)} | {exact} |")
    return "\n".join(lines)


def _panel(model: str, pts: list[Row], x0: float, y0: float, w: float, h: float) -> list[str]:
    """One model's points: arena (x) against Cortex-M4 instructions relative to the layer-wise plan (y)."""
    base = pts[0]
    xmax = max(r.layer_bound for r in pts) * 1.05
    ys = [100 * (r.m4_instructions - base.m4_instructions) / base.m4_instructions for r in pts]
    ylo, yhi = min(min(ys), 0.0) - 1, max(max(ys), 10.0) + 1

    def sx(v: float) -> float:
        return x0 + w * v / xmax

    def sy(v: float) -> float:
        return y0 + h * (1 - (v - ylo) / (yhi - ylo))

    out = [f'<rect x="{x0}" y="{y0}" width="{w}" height="{h}" fill="#fbfcfe" stroke="#99a"/>',
           f'<text x="{x0 + w / 2}" y="{y0 - 6}" text-anchor="middle" font-size="12">{model}</text>']
    for v in (0, 10):
        out.append(f'<line x1="{x0}" x2="{x0 + w}" y1="{sy(v):.1f}" y2="{sy(v):.1f}" stroke="#ccd" '
                   f'stroke-dasharray="{"" if v == 0 else "4 3"}"/><text x="{x0 - 4}" y="{sy(v) + 4:.1f}" '
                   f'text-anchor="end">{v:+d}%</text>')
    for frac, label in ((1.0, "layer-wise bound"), (0.5, "0.5x")):
        at = sx(base.layer_bound * frac)
        out.append(f'<line x1="{at:.1f}" x2="{at:.1f}" y1="{y0}" y2="{y0 + h}" stroke="#c0392b" '
                   f'stroke-dasharray="5 3"/><text x="{at - 3:.1f}" y="{y0 + 12}" text-anchor="end" '
                   f'fill="#c0392b">{label}</text>')
    for r, v in zip(pts, ys, strict=True):
        color = "#2c7a3f" if r.picked_by else ("#555" if r.config == "layer-wise" else "#4a7bd0")
        picked = f" ({', '.join(r.picked_by)})" if r.picked_by else ""
        out.append(f'<circle cx="{sx(r.arena):.1f}" cy="{sy(v):.1f}" r="{4 if r.picked_by else 3}" fill="{color}">'
                   f'<title>{model} {r.config}: arena {r.arena:,} B, {v:+.1f}% instructions{picked}</title></circle>')
    out.append(f'<text x="{x0 + w / 2}" y="{y0 + h + 28}" text-anchor="middle">arena (bytes)</text>'
               f'<text x="{x0 - 40}" y="{y0 + h / 2}" transform="rotate(-90 {x0 - 40} {y0 + h / 2})" '
               f'text-anchor="middle">instructions vs layer-wise</text>')
    for v in (0, xmax / 2, xmax):
        out.append(f'<text x="{sx(v):.1f}" y="{y0 + h + 13}" text-anchor="middle">{v:,.0f}</text>')
    return out


def svg(rows: list[Row]) -> str:
    """One panel per model (_panel), two per line."""
    models = list(dict.fromkeys(r.model for r in rows if r.m4_instructions))
    pw, ph, cols = 360, 250, 2
    width, height = pw * cols, ph * ((len(models) + cols - 1) // cols) + 30
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
           f'<text x="{width / 2}" y="18" text-anchor="middle" font-size="14">Arena vs Cortex-M4 instructions '
           f'per patch configuration (qcodegen, bench/memory_bench.py)</text>']
    for i, model in enumerate(models):
        pts = [r for r in rows if r.model == model and r.m4_instructions]
        out += _panel(model, pts, (i % cols) * pw + 55, (i // cols) * ph + 40, pw - 75, ph - 70)
    out.append(f'<text x="10" y="{height - 8}" fill="#555">grey: layer-wise plan; green: chosen by a memory policy '
               f'(balanced, min); blue: other configurations the planner\'s search visits</text></svg>')
    return "\n".join(out) + "\n"


def fit(rows: list[Row]) -> dict[str, float]:
    """Least squares with non-negative constants (the best subset of counts): extra Cortex-M4 instructions =
    sum of constants x extra counts, each configuration weighted by 1 / its model's layer-wise instructions (the
    relative error counts)."""
    keys = ["calls", "channels", "copied_bytes"]
    base = {r.model: r for r in rows if r.config == "layer-wise" and r.m4_instructions}
    a, b = [], []
    for r in rows:
        if r.config == "layer-wise" or r.m4_instructions is None or r.model not in base:
            continue
        weight = 1.0 / base[r.model].m4_instructions
        a.append([weight * (r.counts[k] - base[r.model].counts[k]) for k in keys])
        b.append(weight * (r.m4_instructions - base[r.model].m4_instructions))
    if not a:
        return {}
    am, bm = np.array(a), np.array(b)
    best: tuple[float, dict[str, float]] | None = None
    for mask in range(1, 1 << len(keys)):
        cols = [i for i in range(len(keys)) if mask >> i & 1]
        x = np.linalg.lstsq(am[:, cols], bm, rcond=None)[0]
        if (x < 0).any():
            continue
        residual = float(np.abs(am[:, cols] @ x - bm).max())
        if best is None or residual < best[0]:
            best = (residual, {keys[i]: float(v) for i, v in zip(cols, x, strict=True)})
    assert best is not None
    return {**{k: 0.0 for k in keys}, **best[1], "max_error_fraction": best[0]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=list(ALL), choices=ALL)
    ap.add_argument("--targets", nargs="+", default=["cortex-m4", "generic"])
    ap.add_argument("--write", type=Path, help="write the markdown results here")
    ap.add_argument("--svg", type=Path, help="write the trade-off plot here")
    ap.add_argument("--json", type=Path, help="write the rows as JSON here")
    ap.add_argument("--from-json", type=Path, help="read the rows from a --json file instead of measuring")
    ap.add_argument("--fit", action="store_true", help="fit the cost model's constants")
    args = ap.parse_args(argv)
    rows: list[Row] = []
    if args.from_json:
        rows = [Row(**r) for r in json.loads(args.from_json.read_text())]
    with tempfile.TemporaryDirectory(prefix="qc-membench-") as tmp:
        work = Path(tmp)
        for name in [] if args.from_json else args.models:
            path = model_path(name, work)
            picks: dict[tuple[int, int], list[str]] = {}
            for policy in POLICIES:
                chosen = plan(load_model(path), memory=MemoryGoal(policy)).patching
                picks.setdefault((chosen.steps, chosen.rows) if chosen else (0, 0), []).append(policy)
            configs = [(0, 0), *(c for c in configurations(path) if c[0])]
            for steps, rows_ in configs:
                log(f"{name}: {'layer-wise' if not steps else f'{steps} steps x {rows_} rows'}")
                goal = MemoryGoal("speed") if not steps else MemoryGoal(stage=(steps, rows_))
                row = measure(name, path, goal, args.targets, work, tflm=(steps, rows_) in picks and steps > 0)
                row.picked_by = picks.get((steps, rows_), [])
                rows.append(row)
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in rows], indent=1) + "\n")
    text = table(rows)
    print(text)
    constants = fit(rows) if args.fit else {}
    if constants:
        print("cost model fit (instructions per unit):", json.dumps(constants))
    if args.svg:
        args.svg.write_text(svg(rows))
    if args.write:
        stamp = datetime.date.today().isoformat()
        args.write.write_text(f"# Memory: patch-based execution (measured {stamp}, `python bench/memory_bench.py"
                              f" --write {args.write}`)\n\n{text}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
