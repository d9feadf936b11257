"""Benchmark qcodegen's generic C against TFLite Micro's reference kernels on int8 TFLite models.

Run by hand (not a test):

    python bench/tflite_bench.py                       # all models, table on stdout
    python bench/tflite_bench.py --models ds_cnn resnet8 --runs 50
    python bench/tflite_bench.py --write bench/RESULTS.md

Per model it reports:
- bit-exactness against TFLM (qcodegen.verify.tflm_oracle.verify_against_tflm, seeded inputs);
- time per inference: the generated C (harness executable, `-n N`, generic target flags) and TFLM's
  `invoke()` in this process (tflite_micro.runtime), on the same input;
- instructions of ONE inference with valgrind callgrind: `--toggle-collect=<name>_run` on the harness, and
  `--toggle-collect='tflite::micro::MicroInterpreter::Invoke()'` on a Python child running TFLM once
  (the wheel's _runtime.so is not stripped, so the demangled symbol is there);
- instructions per MAC, arena bytes (ours, TFLM's RecordingMicroAllocator total and its tensor "head",
  the live-set lower bound from `inspect`), weights bytes, and `qcodegen compile` wall time (the CLI in a
  fresh process, generating the C files; building them is not included).

Models: bench/models.py (person_detect.tflite from $QC_SHARED_DIR/testdata/tflite/models and MLPerf-Tiny-shaped
models with random int8 weights: DS-CNN KWS, MobileNetV1-0.25, ResNet-8, FC autoencoder).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.models import ALL, MLPERF, model_path  # noqa: E402
from qcodegen.codegen import generate, load_target  # noqa: E402
from qcodegen.compiler import plan  # noqa: E402
from qcodegen.frontends import load_model  # noqa: E402
from qcodegen.report import inspect_dict  # noqa: E402
from qcodegen.verify import random_inputs  # noqa: E402
from qcodegen.verify.runners import HarnessRunner, write_raw  # noqa: E402
from qcodegen.verify.tflm_oracle import TflmModel, verify_against_tflm  # noqa: E402

TFLM_INVOKE = "tflite::micro::MicroInterpreter::Invoke()"


# --- measurements ---------------------------------------------------------------------------------
@dataclass
class Row:
    model: str
    macs: int = 0
    bit_exact: bool | None = None
    samples: int = 0
    ours_us: float = 0.0
    tflm_us: float = 0.0
    ours_instr: int | None = None
    tflm_instr: int | None = None
    arena: int = 0
    io_bytes: int = 0  # model inputs and outputs (caller buffers; TFLM keeps them in its arena)
    lower_bound: int = 0
    tflm_arena: int = 0
    tflm_head: int = 0
    weights: int = 0
    compile_s: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def ratio(self) -> float | None:
        return self.ours_instr / self.tflm_instr if self.ours_instr and self.tflm_instr else None

    def per_mac(self, instructions: int | None) -> float | None:
        return None if instructions is None else instructions / self.macs


def compile_time(path: Path, outdir: Path, repeats: int) -> float:
    """Best wall time of `qcodegen compile MODEL --harness` in a fresh process."""
    best = float("inf")
    for _ in range(repeats):
        shutil.rmtree(outdir, ignore_errors=True)
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "qcodegen", "compile", str(path), "-o", str(outdir), "--harness"],
                       check=True, capture_output=True, cwd=ROOT)
        best = min(best, time.perf_counter() - start)
    return best


def harness_seconds(exe: Path, files: list[Path], runs: int) -> float:
    """Seconds per inference of the harness: (time of -n N+1 minus time of -n 1) / N, best of 3, with N at least
    `runs` and large enough for about half a second of inferences."""
    def timed(n: int) -> float:
        start = time.perf_counter()
        subprocess.run([str(exe), "-n", str(n), *map(str, files)], check=True)
        return time.perf_counter() - start
    n = max(runs, 1)
    while timed(n + 1) < 0.5 and n < 1 << 24:  # double N until a run takes half a second (robust under load)
        n *= 2
    return max(min(timed(n + 1) - timed(1) for _ in range(3)), 0.0) / n


def tflm_seconds(tflm: TflmModel, inputs: list[np.ndarray], runs: int) -> float:
    """Seconds per `invoke()` (same input every time), best of 3 batches of at least `runs` (about 0.5 s)."""
    it = tflm.interpreter
    for i, arr in enumerate(inputs):
        it.set_input(np.ascontiguousarray(arr), i)
    start = time.perf_counter()
    it.invoke()
    n = max(runs, int(0.5 / max(time.perf_counter() - start, 1e-6)))
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(n):
            it.invoke()
        best = min(best, (time.perf_counter() - start) / n)
    return best


def callgrind(cmd: list[str], toggle: str, out: Path) -> int:
    """Instructions executed inside `toggle` (callees included) while running cmd under callgrind."""
    subprocess.run(["valgrind", "--tool=callgrind", f"--toggle-collect={toggle}", f"--callgrind-out-file={out}",
                    *cmd], check=True, capture_output=True)
    match = re.search(r"^summary:\s*(\d+)", out.read_text(), re.MULTILINE)
    if not match:
        raise RuntimeError(f"no callgrind summary in {out}")
    return int(match.group(1))


_TFLM_CHILD = """
import sys
import numpy as np
from tflite_micro import runtime
it = runtime.Interpreter.from_file(sys.argv[1], arena_size=int(sys.argv[2]))
for i, f in enumerate(sys.argv[3:]):
    it.set_input(np.load(f), i)
if sys.argv[2] == "0":
    it.print_allocations()
it.invoke()
"""


def tflm_child(args: list[str]) -> list[str]:
    return [sys.executable, "-c", _TFLM_CHILD, *args]


def tflm_arena(path: Path, arena_size: int) -> tuple[int, int]:
    """(total, head) of TFLM's RecordingMicroAllocator (what arena_used_bytes reports; head = tensor data)."""
    script = ("import sys\nfrom tflite_micro import runtime\n"
              "runtime.Interpreter.from_file(sys.argv[1], arena_size=int(sys.argv[2])).print_allocations()\n")
    proc = subprocess.run([sys.executable, "-c", script, str(path), str(arena_size)], capture_output=True,
                          text=True, check=True)
    text = proc.stdout + proc.stderr
    total = re.search(r"Arena allocation total (\d+) bytes", text)
    head = re.search(r"Arena allocation head (\d+) bytes", text)
    if not total or not head:
        raise RuntimeError(f"no allocation report from TFLM: {text[:300]}")
    return int(total.group(1)), int(head.group(1))


def measure(name: str, workdir: Path, args: argparse.Namespace) -> Row:
    row = Row(name)
    path = model_path(name, workdir)
    schedule = plan(load_model(path))
    info = inspect_dict(schedule)
    row.macs, row.arena, row.lower_bound, row.weights = (info["macs"], info["arena_bytes"],
                                                         info["arena_lower_bound_bytes"], info["weights_bytes"])
    row.io_bytes = sum(schedule.buffers[n].nbytes for n in schedule.inputs + schedule.outputs)
    row.compile_s = compile_time(path, workdir / f"{name}_cli", args.compile_repeats)

    target = load_target("generic")
    model = generate(schedule, workdir / f"{name}_c", target, name=name, harness=True)
    runner = HarnessRunner(target)
    exe = runner.executable(model)
    if args.samples:
        result = verify_against_tflm(path, schedule, model, runner, samples=args.samples, seed=args.seed)
        row.bit_exact, row.samples = result.bit_exact, result.samples
        if not result.bit_exact:
            row.notes.append(f"{result.mismatches} mismatches, first {result.first_mismatch}")

    inputs = random_inputs(schedule, np.random.default_rng(args.seed))
    files = []
    for i, (buf, arr) in enumerate(zip(model.inputs, inputs, strict=True)):
        files.append(workdir / f"{name}_in{i}.bin")
        write_raw(files[-1], arr, buf.dtype.is_packed)
        np.save(workdir / f"{name}_in{i}.npy", arr)
    files += [workdir / f"{name}_out{i}.bin" for i in range(len(model.outputs))]
    row.ours_us = harness_seconds(exe, files, args.runs) * 1e6

    tflm = TflmModel(path.read_bytes())
    row.tflm_us = tflm_seconds(tflm, inputs, args.runs) * 1e6
    row.tflm_arena, row.tflm_head = tflm_arena(path, 1 << 22)
    if args.callgrind:
        row.ours_instr = callgrind([str(exe), "-n", "1", *map(str, files)], f"{name}_run", workdir / f"{name}.cg")
        npys = [str(workdir / f"{name}_in{i}.npy") for i in range(len(inputs))]
        row.tflm_instr = callgrind(tflm_child([str(path), str(1 << 22), *npys]), TFLM_INVOKE,
                                   workdir / f"{name}_tflm.cg")
    return row


# --- output ---------------------------------------------------------------------------------------
def _fmt(v: float | int | None, spec: str) -> str:
    return "n/a" if v is None else format(v, spec)


COLUMNS: list[tuple[str, Callable[[Row], str]]] = [
    ("model", lambda r: r.model),
    ("MACs", lambda r: f"{r.macs:,}"),
    ("bit-exact vs TFLM", lambda r: "n/a" if r.bit_exact is None else
     (f"yes ({r.samples} inputs)" if r.bit_exact else "**NO**")),
    ("TFLM instr", lambda r: _fmt(r.tflm_instr, ",")),
    ("ours instr", lambda r: _fmt(r.ours_instr, ",")),
    ("ours / TFLM", lambda r: _fmt(r.ratio, ".3f")),
    ("TFLM instr/MAC", lambda r: _fmt(r.per_mac(r.tflm_instr), ".2f")),
    ("ours instr/MAC", lambda r: _fmt(r.per_mac(r.ours_instr), ".2f")),
    ("TFLM µs", lambda r: f"{r.tflm_us:,.0f}"),
    ("ours µs", lambda r: f"{r.ours_us:,.1f}"),
    ("arena ours", lambda r: f"{r.arena:,}"),
    ("ours + I/O", lambda r: f"{r.arena + r.io_bytes:,}"),
    ("TFLM arena total / head", lambda r: f"{r.tflm_arena:,} / {r.tflm_head:,}"),
    ("live-set lower bound", lambda r: f"{r.lower_bound:,}"),
    ("ours / bound", lambda r: f"{r.arena / r.lower_bound:.3f}" if r.lower_bound else "n/a"),
    ("weights B", lambda r: f"{r.weights:,}"),
    ("compile s", lambda r: f"{r.compile_s:.2f}"),
]


def table(rows: list[Row]) -> str:
    lines = ["| " + " | ".join(name for name, _ in COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(cell(r) for _, cell in COLUMNS) + " |" for r in rows]
    return "\n".join(lines)


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    cc = subprocess.run(["cc", "--version"], capture_output=True, text=True).stdout.splitlines()[:1]
    return f"{cpu}, {os.cpu_count()} cores, {platform.system()} {platform.release()}, {' '.join(cc)}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", nargs="+", default=list(ALL), choices=ALL)
    p.add_argument("--runs", type=int, default=20, help="inferences per timing (default 20)")
    p.add_argument("--samples", type=int, default=3, help="inputs checked against TFLM (0: skip)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--compile-repeats", type=int, default=2, help="qcodegen compile runs (best is kept)")
    p.add_argument("--no-callgrind", dest="callgrind", action="store_false", help="skip the instruction counts")
    p.add_argument("--json", help="also write the rows as JSON to this file")
    p.add_argument("--write", help="write a markdown report (e.g. bench/RESULTS.md)")
    args = p.parse_args(argv)
    if args.callgrind and shutil.which("valgrind") is None:
        raise SystemExit("valgrind not found (apt-get install valgrind) or pass --no-callgrind")

    rows = []
    with tempfile.TemporaryDirectory(prefix="qc-bench-") as tmp:
        for name in args.models:
            print(f"{name} ...", file=sys.stderr, flush=True)
            rows.append(measure(name, Path(tmp), args))
    text = table(rows)
    print(text)
    for line in targets(rows):
        print(line)
    for r in rows:
        for note in r.notes:
            print(f"{r.model}: {note}")
    if args.json:
        Path(args.json).write_text(json.dumps([vars(r) for r in rows], indent=1) + "\n")
    if args.write:
        command = "python bench/tflite_bench.py " + " ".join(argv if argv is not None else sys.argv[1:])
        Path(args.write).write_text(report(rows, text, command.strip()))
    return 0 if all(r.bit_exact is not False for r in rows) else 1


def targets(rows: list[Row]) -> list[str]:
    """Issue 3's targets, each with whether these rows meet it."""
    mlperf = [r for r in rows if r.model in MLPERF]

    def verdict(ok: bool) -> str:
        return "met" if ok else "**missed**"

    ratios = [r.ratio for r in mlperf if r.ratio is not None]
    return [
        f"bit-exact with TFLM on every model: {verdict(all(r.bit_exact for r in rows))}",
        f"generic C at most 1/3 of TFLM's instructions on every MLPerf-Tiny-shaped model: "
        f"{verdict(len(ratios) == len(mlperf) and max(ratios, default=1) <= 1 / 3)} "
        f"(worst {max(ratios, default=float('nan')):.3f})",
        f"arena <= TFLM's arena: {verdict(all(r.arena <= r.tflm_arena for r in rows))}; within 10% of the live-set "
        f"lower bound: {verdict(all(r.arena <= 1.1 * r.lower_bound for r in rows))}",
        f"`qcodegen compile` under 2 s per model: {verdict(all(r.compile_s < 2 for r in rows))} "
        f"(slowest {max(r.compile_s for r in rows):.2f} s)",
    ]


def report(rows: list[Row], text: str, command: str) -> str:
    date = datetime.date.today().isoformat()
    return (f"# TFLite benchmark: generated generic C vs TFLite Micro\n\n"
            f"- date: {date}\n- machine: {machine()}\n- command: `{command}`\n"
            f"- TFLM: tflite-micro {_tflm_version()} reference kernels, `invoke()` from Python\n"
            f"- ours: target `generic` ({' '.join(load_target('generic').cflags)}), harness executable\n\n"
            f"{text}\n\nTargets (issue 3):\n" + "".join(f"- {t}\n" for t in targets(rows)) + f"\n{LEGEND}")


def _tflm_version() -> str:
    try:
        from importlib.metadata import version
        return version("tflite-micro")
    except Exception:  # noqa: BLE001 (any metadata problem: just say unknown)
        return "(unknown version)"


LEGEND = """\
Columns: instructions of one inference counted by valgrind callgrind (ours: `--toggle-collect=<name>_run` on the
harness; TFLM: `--toggle-collect='tflite::micro::MicroInterpreter::Invoke()'` in a Python child that invokes once:
the wheel's `_runtime.so` is not stripped and the interpreter lives in namespace `tflite::micro` in this version,
mangled `_ZN6tflite5micro16MicroInterpreter6InvokeEv`); ratio = ours / TFLM; MACs from `qcodegen inspect` (full
windows, padding taps included); µs = wall time per inference on this machine (ours: harness `-n N`; TFLM:
`invoke()` from Python); arena ours = `<NAME>_ARENA_SIZE` (model inputs and outputs are caller buffers, not in the
arena; ours + I/O adds them); TFLM arena = the RecordingMicroAllocator total (arena_used_bytes: tensors + persistent
data) / its head (non-persistent tensor data, inputs and outputs included); lower bound = `inspect`'s live-set lower
bound (max over steps of the bytes of the temporaries live across the step, a buffer written in place over its input
counted once); weights = constant bytes in flash; compile s = wall time of `qcodegen compile MODEL --harness` in a
fresh process (best of the runs).
"""


if __name__ == "__main__":
    sys.exit(main())
