"""qcodegen compile | run | verify | inspect | targets."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

from .codegen import generate, list_targets, load_target
from .codegen.relayout import WEIGHT_LAYOUTS
from .codegen.render import c_identifier
from .compiler import HYBRID_MODES, plan
from .errors import QcError
from .frontends import load_model
from .ir.schedule import Schedule
from .reference.executor import check_inputs
from .report import inspect_dict, inspect_text
from .verify import get_runner, verify_schedule
from .verify.runners import cannot_count, unavailable

EXIT_OK, EXIT_MISMATCH, EXIT_USAGE = 0, 1, 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # usage errors exit 2 with one line
        self.exit(EXIT_USAGE, f"qcodegen: error: {message}\n")


def _schedule(path: str, args: argparse.Namespace) -> Schedule:
    return plan(load_model(path), hybrid=args.hybrid)


def _compile(args: argparse.Namespace) -> int:
    target = load_target(args.target, args.weight_layout)
    schedule = _schedule(args.model, args)
    name = c_identifier(args.name or schedule.name)
    outdir = Path(args.output or name)
    model = generate(schedule, outdir, target, name=name, harness=args.harness)
    (outdir / f"{name}_report.json").write_text(json.dumps(inspect_dict(schedule), indent=1) + "\n")
    (outdir / f"{name}_report.txt").write_text(inspect_text(schedule) + "\n")
    print(f"wrote {len(model.files)} files to {outdir}/ ({name}_run, arena {schedule.arena_size} B, "
          f"lower bound {schedule.arena_lower_bound} B)")
    return EXIT_OK


def _load_npy(path: str) -> np.ndarray:
    try:
        return np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise QcError(f"{path}: no such file") from None
    except (ValueError, OSError) as exc:
        raise QcError(f"{path}: not a .npy array ({exc})") from None


def _run(args: argparse.Namespace) -> int:
    target = load_target(args.target, args.weight_layout)
    schedule = _schedule(args.model, args)
    inputs = check_inputs(schedule, [_load_npy(p) for p in args.input])
    if len(args.output) != len(schedule.outputs):
        raise QcError(f"model has {len(schedule.outputs)} output(s); got {len(args.output)} -o file(s)")
    with tempfile.TemporaryDirectory(prefix="qc-run-") as tmp:
        model = generate(schedule, Path(tmp), target, harness=target.runner == "harness")
        outputs, _ = get_runner(target).run(model, inputs)
    for path, arr in zip(args.output, outputs, strict=True):
        np.save(path, arr)
    return EXIT_OK


def _verify_golden(args: argparse.Namespace) -> int:
    """The check ops of a StableHLO test program, evaluated on the C of each of its functions."""
    from .verify.golden import verify_golden
    result, functions = verify_golden(args.model, args.target)
    if args.json:
        print(json.dumps(result.as_json()))
    else:
        for f in functions:
            print(f.describe())
        counts = result.extra["summary"]
        print(f"{counts['functions']} function(s): {counts['pass']} pass, {counts['fail']} fail, "
              f"{counts['error']} error, {counts['skip']} skipped (not quantized)")
    return EXIT_OK if result.bit_exact else EXIT_MISMATCH


def _verify(args: argparse.Namespace) -> int:
    if args.samples < 1:
        raise QcError("--samples must be at least 1")
    if args.against == "golden":
        return _verify_golden(args)
    target = load_target(args.target, args.weight_layout)
    if args.against == "float":  # StableHLO only: checked before compiling
        from .verify.float_accuracy import float_definition, verify_against_float
        definition = float_definition(args.model, load_model(args.model))
    schedule = _schedule(args.model, args)

    def progress(done: int, total: int) -> None:
        if not args.json and total >= 20 and done % max(1, total // 10) == 0:
            print(f"  {done}/{total} samples", file=sys.stderr)

    if args.against == "tosa-ref":
        from .verify.tosa_oracle import verify_against_tosa
        result = verify_against_tosa(schedule, samples=args.samples, seed=args.seed, progress=progress)
        oracle = "the TOSA reference model (numpy reference of the schedule)"
    else:
        with tempfile.TemporaryDirectory(prefix="qc-verify-") as tmp:
            model = generate(schedule, Path(tmp), target, harness=target.runner == "harness")
            runner = get_runner(target, measure=True)
            if args.against == "reference":
                result = verify_schedule(schedule, model, runner, samples=args.samples, seed=args.seed,
                                         progress=progress)
                oracle = "the numpy reference"
            elif args.against == "tflm":
                if Path(args.model).suffix.lower() != ".tflite":
                    raise QcError("--against tflm needs a .tflite model")
                from .verify.tflm_oracle import verify_against_tflm
                result = verify_against_tflm(args.model, schedule, model, runner, samples=args.samples,
                                             seed=args.seed)
                oracle = "TFLite Micro"
            else:
                result = verify_against_float(definition, schedule, model, runner, samples=args.samples,
                                              seed=args.seed, tolerance_lsb=args.max_error_lsb, progress=progress)
            result.extra.update(runner.measurements(model))
    if args.against == "float":  # accuracy, never "bit-exact" (docs/schemes.md)
        print(json.dumps(result.as_json()) if args.json else result.describe())
        return EXIT_OK if result.passed else EXIT_MISMATCH
    if args.json:
        print(json.dumps(result.as_json()))
    elif result.bit_exact:
        print(f"bit-exact against {oracle}: {result.samples} samples, target {target.name}, 0 mismatches")
        if result.extra:
            print(", ".join(f"{k}: {v}" for k, v in result.extra.items()))
    else:
        fm = result.first_mismatch or {}
        print(f"MISMATCH against {oracle}: {result.mismatches} differing elements over {result.samples} samples; "
              f"first at step {fm.get('step')} ({fm.get('source', '')}) tensor {fm.get('tensor')!r} index "
              f"{fm.get('index')}: expected {fm.get('expected')}, got {fm.get('got')}")
    return EXIT_OK if result.bit_exact else EXIT_MISMATCH


def _inspect(args: argparse.Namespace) -> int:
    schedule = _schedule(args.model, args)
    if args.json:
        print(json.dumps(inspect_dict(schedule)))
    else:
        print(inspect_text(schedule))
    return EXIT_OK


def _targets(args: argparse.Namespace) -> int:
    """One line per target: ready (can be built and run here), with or without instruction counts, or why not."""
    for t in sorted(list_targets(), key=lambda t: t.name != "generic"):  # the default target first
        reason = unavailable(t)
        if reason:
            status = f"unavailable: {reason}"
        elif t.runner == "host":
            status = "ready"
        else:
            no_count = cannot_count(t)
            status = "ready, counts instructions" if no_count is None else f"ready, no counts ({no_count})"
        print(f"{t.name:<16} {status:<36} {t.description}")
    return EXIT_OK


def _weight_layout_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--weight-layout", choices=WEIGHT_LAYOUTS, default=None,
                   help="compact (default): weights stay int8 in flash; fast: also re-lay them where the target's "
                        "kernels gain from more flash (Cortex-M4/M7: int16 pairs for SMLAD, twice the bytes)")


def _hybrid_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--hybrid", choices=HYBRID_MODES, default=None,
                   help="kernel of hybrid ops (float lhs, quantized weights): weight-only (default) or "
                        "dynamic-range (lhs quantized per row at run time, integer dot)")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="qcodegen", description="Quantized graphs to integer-only C, verified bit for bit.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    c = sub.add_parser("compile", help="generate C for a model")
    c.add_argument("model")
    c.add_argument("-t", "--target", default="generic")
    c.add_argument("-o", "--output", help="output folder (default: the model name)")
    c.add_argument("--name", help="symbol prefix and file names (sanitised to a C identifier)")
    c.add_argument("--harness", action="store_true", help="also emit main.c and a Makefile")
    _hybrid_option(c)
    _weight_layout_option(c)
    c.set_defaults(func=_compile)

    r = sub.add_parser("run", help="run the generated C on .npy inputs")
    r.add_argument("model")
    r.add_argument("-t", "--target", default="generic")
    r.add_argument("-i", "--input", action="append", default=[], required=True)
    r.add_argument("-o", "--output", action="append", default=[], required=True)
    _hybrid_option(r)
    _weight_layout_option(r)
    r.set_defaults(func=_run)

    v = sub.add_parser("verify", help="check the generated C against an oracle, bit for bit")
    v.add_argument("model")
    v.add_argument("-t", "--target", default="generic")
    v.add_argument("--against", default="reference", choices=["reference", "tflm", "tosa-ref", "golden", "float"])
    v.add_argument("--samples", type=int, default=10)
    v.add_argument("--seed", type=int, default=0)
    v.add_argument("--json", action="store_true")
    v.add_argument("--max-error-lsb", type=float, default=1.0,
                   help="--against float: pass when every output is within this many LSB (default 1)")
    _hybrid_option(v)
    _weight_layout_option(v)
    v.set_defaults(func=_verify)

    i = sub.add_parser("inspect", help="show the schedule, fixed-point parameters and memory plan")
    i.add_argument("model")
    i.add_argument("--json", action="store_true")
    _hybrid_option(i)
    i.set_defaults(func=_inspect)

    t = sub.add_parser("targets", help="list targets and whether this machine can build and run them")
    t.set_defaults(func=_targets)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except QcError as exc:
        print(f"qcodegen: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
