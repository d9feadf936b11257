"""qcodegen compile | run | verify | inspect | targets: a thin layer over qcodegen.api."""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from pathlib import Path

import numpy as np

from . import __version__, api
from .compiler import HYBRID_MODES
from .errors import QcError, one_line
from .ir.schedule import MEMORY_POLICIES
from .kernels import WEIGHT_LAYOUTS
from .progress import Progress
from .report import inspect_text, stack_scratch_text

EXIT_OK, EXIT_MISMATCH, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3
DEBUG_ENV = "QC_DEBUG"  # set to 1: an internal error also prints its traceback
FORMATS = (".tflite (TFLite), .tosa (TOSA flatbuffer), .mlir (StableHLO or TOSA MLIR text), .onnx (ONNX operator "
           "format), .json (qcodegen graph)")
EXIT_CODES = ("exit codes: 0 success (verify: every check passed), 1 verify found a mismatch, 2 bad input or usage "
              "(one line on stderr), 3 internal error (a bug; QC_DEBUG=1 prints the traceback)")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # usage errors exit 2 with one line
        self.exit(EXIT_USAGE, f"qcodegen: error: {message}\n")


def _compile(args: argparse.Namespace) -> int:
    result = api.compile(args.model, args.output, target=args.target, name=args.name, harness=args.harness,
                         weight_layout=args.weight_layout, hybrid=args.hybrid, force=args.force,
                         profile=args.profile, **_memory_args(args))
    rom = f", ROM {result.rom_bytes:,} B (code {result.code_bytes:,} + weights {result.weights_bytes:,})" \
        if result.rom_bytes is not None else f", weights {result.weights_bytes:,} B"
    print(f"wrote {len(result.files)} files to {result.outdir}/ ({result.name}_run for {result.target}, arena "
          f"{result.arena_bytes:,} B, lower bound {result.arena_lower_bound_bytes:,} B{rom}, "
          f"{stack_scratch_text(result.report['kernel_stack_scratch'])}); report: "
          f"{result.outdir / (result.name + '_report.html')}")
    return EXIT_OK


def _load_npy(path: str) -> np.ndarray:
    try:
        return np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise QcError(f"{path}: no such file") from None
    except (ValueError, OSError, EOFError) as exc:
        raise QcError(f"{path}: not a .npy array ({exc})") from None


def _run(args: argparse.Namespace) -> int:
    inputs = [_load_npy(p) for p in args.input]
    for path in args.output:
        parent = Path(path).resolve().parent
        if not parent.is_dir():
            raise QcError(f"{path}: the folder {parent} does not exist")
    outputs = api.run(args.model, inputs, target=args.target, weight_layout=args.weight_layout, hybrid=args.hybrid,
                      **_memory_args(args))
    if len(args.output) != len(outputs):
        raise QcError(f"model has {len(outputs)} output(s); got {len(args.output)} -o file(s)")
    for path, arr in zip(args.output, outputs, strict=True):
        np.save(path, arr)
    return EXIT_OK


def _verify(args: argparse.Namespace) -> int:
    progress = Progress("samples", enabled=not args.json)
    try:
        result = api.verify(args.model, target=args.target, against=args.against, samples=args.samples,
                            seed=args.seed, weight_layout=args.weight_layout, hybrid=args.hybrid,
                            max_error_lsb=args.max_error_lsb, progress=progress.update,
                            float_model=args.float_model, **_memory_args(args))
    finally:
        progress.close()
    if args.json:
        print(json.dumps(result.as_json()))
    elif hasattr(result, "describe"):  # --against float, golden: their own summary
        print(result.describe())
    elif result.bit_exact:
        print(f"bit-exact against {api.ORACLES[args.against][0]}: {result.samples} samples, target "
              f"{args.target}, 0 mismatches")
        if result.extra:
            print(", ".join(f"{k}: {v}" for k, v in result.extra.items()))
    else:
        fm = result.first_mismatch or {}
        print(f"MISMATCH against {api.ORACLES[args.against][0]}: {result.mismatches} differing elements "
              f"over {result.samples} samples; first at step {fm.get('step')} ({fm.get('source', '')}) tensor "
              f"{fm.get('tensor')!r} index {fm.get('index')}: expected {fm.get('expected')}, got {fm.get('got')}")
    return EXIT_OK if result.passed else EXIT_MISMATCH


def _profile(args: argparse.Namespace) -> int:
    from .codegen import load_target
    from .verify.profile import as_json, table

    rows = api.profile(args.model, target=args.target, weight_layout=args.weight_layout, hybrid=args.hybrid,
                       seed=args.seed, **_memory_args(args))
    target = load_target(args.target, args.weight_layout)
    print(json.dumps(as_json(rows, target)) if args.json else table(rows))
    return EXIT_OK


def _inspect(args: argparse.Namespace) -> int:
    report = api.inspect(args.model, hybrid=args.hybrid, target=args.target, weight_layout=args.weight_layout,
                         **_memory_args(args))
    print(json.dumps(report) if args.json else inspect_text(report))
    return EXIT_OK


def _targets(args: argparse.Namespace) -> int:
    """One line per target: ready (can be built and run here), with or without instruction counts, or why not."""
    found = api.targets()
    if args.json:
        print(json.dumps([t.as_json() for t in found]))
        return EXIT_OK
    for t in found:
        if not t.ready:
            status = f"unavailable: {t.reason}"
        elif t.counts_instructions:
            status = "ready, counts instructions"
        else:
            status = "ready" if t.reason is None else f"ready, no counts ({t.reason})"
        print(f"{t.name:<16} {status:<36} {t.description}")
    return EXIT_OK


def _model_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help=f"the model file: {FORMATS}")


def _target_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--target", default="generic", metavar="TARGET",
                   help="target to generate for (default: generic, portable C99); `qcodegen targets` lists them")


def _weight_layout_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--weight-layout", choices=WEIGHT_LAYOUTS, default=None,
                   help="compact (default): weights stay int8 in flash; fast: also re-lay them where the target's "
                        "kernels gain from more flash (Cortex-M4/M7: int16 pairs for SMLAD, twice the bytes)")


def _memory_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--memory", choices=MEMORY_POLICIES, default=None,
                   help="memory goal (docs/semantics.md §10.2): speed: the layer-wise plan, no patch-based "
                        "execution; balanced (default): the smallest arena whose estimated extra instructions "
                        "stay within 3%%; min: the smallest arena found")
    p.add_argument("--arena-limit", type=int, default=None, metavar="BYTES",
                   help="instead of --memory: the plan with the fewest estimated extra instructions whose arena "
                        "fits BYTES (an error when none does)")


def _memory_args(args: argparse.Namespace) -> dict:
    return {"memory": args.memory, "arena_limit": args.arena_limit}


def _hybrid_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--hybrid", choices=HYBRID_MODES, default=None,
                   help="kernel of hybrid ops (float lhs, quantized weights): weight-only (default) or "
                        "dynamic-range (lhs quantized per row at run time, integer dot)")


def _command(sub: argparse._SubParsersAction, name: str, help_text: str) -> argparse.ArgumentParser:
    return sub.add_parser(name, help=help_text, description=help_text, epilog=EXIT_CODES,
                          formatter_class=argparse.ArgumentDefaultsHelpFormatter)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="qcodegen", description="Quantized graphs to integer-only C, verified bit for bit.",
                epilog=EXIT_CODES)
    p.add_argument("--version", action="version", version=f"qcodegen {__version__}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser, metavar="COMMAND")

    c = _command(sub, "compile", "generate the C folder of a model, its reports and build files")
    _model_argument(c)
    _target_option(c)
    c.add_argument("-o", "--output", metavar="DIR", help="output folder (default: the model name)")
    c.add_argument("--name", help="symbol prefix and file names, sanitised to a C identifier (default: the model "
                                  "name)")
    c.add_argument("--harness", action="store_true", help="also emit main.c and a Makefile (a command-line harness)")
    c.add_argument("--force", action="store_true",
                   help="write into a folder that holds files qcodegen did not write (they are kept)")
    c.add_argument("--profile", action="store_true",
                   help="run one inference on the target (QEMU) and add instructions per layer to the reports")
    _hybrid_option(c)
    _memory_options(c)
    _weight_layout_option(c)
    c.set_defaults(func=_compile)

    r = _command(sub, "run", "run the generated C on .npy inputs")
    _model_argument(r)
    _target_option(r)
    r.add_argument("-i", "--input", action="extend", nargs="+", default=[], required=True, metavar="IN.npy",
                   help="input arrays in model order, of the model's exact types and shapes (repeat -i or list "
                        "several after one -i)")
    r.add_argument("-o", "--output", action="extend", nargs="+", default=[], required=True, metavar="OUT.npy",
                   help="where to write the outputs, in model order (repeat -o or list several)")
    _hybrid_option(r)
    _memory_options(r)
    _weight_layout_option(r)
    r.set_defaults(func=_run)

    v = _command(sub, "verify", "check the generated C against an oracle, bit for bit")
    _model_argument(v)
    _target_option(v)
    v.add_argument("--against", default="reference", choices=list(api.ORACLES),
                   help="reference: numpy reference of the same schedule; tflm: TFLite Micro (.tflite); tosa-ref: "
                        "TOSA reference model; golden: a StableHLO test program's check ops; float: accuracy "
                        "against the float definition (StableHLO); onnxruntime: onnxruntime's CPU execution provider "
                        "(.onnx); onnx-ref: onnx's reference evaluator (.onnx)")
    v.add_argument("--samples", type=int, default=10, help="seeded random input sets")
    v.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    v.add_argument("--json", action="store_true", help="print one JSON object (docs/schemas/verify.schema.json)")
    v.add_argument("--max-error-lsb", type=float, default=None, metavar="E",
                   help="--against float: pass when every output is within E LSB (default 0 for the float "
                        "definition: every element equal; none with --float-model: report only)")
    v.add_argument("--float-model", metavar="FLOAT.tflite|FLOAT.onnx",
                   help="--against float: the float model the quantized model was made from; reports RMSE, MAE, "
                        "max error, L2 relative error and cosine similarity per output and per layer")
    _hybrid_option(v)
    _memory_options(v)
    _weight_layout_option(v)
    v.set_defaults(func=_verify)

    pr = _command(sub, "profile", "instructions (and estimated cycles) per layer of one inference on a target")
    _model_argument(pr)
    pr.add_argument("-t", "--target", required=True, metavar="TARGET",
                    help="a target that counts instructions (`qcodegen targets`: 'counts instructions')")
    pr.add_argument("--seed", type=int, default=0, help="seed of the random input")
    pr.add_argument("--json", action="store_true", help="print one JSON object")
    _hybrid_option(pr)
    _memory_options(pr)
    _weight_layout_option(pr)
    pr.set_defaults(func=_profile)

    i = _command(sub, "inspect", "show the schedule, fixed-point parameters, memory plan and the kernels")
    _model_argument(i)
    _target_option(i)
    i.add_argument("--json", action="store_true", help="print one JSON object (docs/schemas/inspect.schema.json)")
    _hybrid_option(i)
    _weight_layout_option(i)
    _memory_options(i)
    i.set_defaults(func=_inspect)

    t = _command(sub, "targets", "list targets and whether this machine can build and run them")
    t.add_argument("--json", action="store_true", help="print a JSON list")
    t.set_defaults(func=_targets)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except QcError as exc:
        print(one_line(f"qcodegen: error: {exc}"), file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # the reader of stdout went away (`| head`): not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except OSError as exc:  # a file or folder the user named
        where = f"{exc.filename}: " if exc.filename else ""
        print(one_line(f"qcodegen: error: {where}{exc.strerror or exc}"), file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # a bug in qcodegen, not the user's input: one line, its own exit code
        if os.environ.get(DEBUG_ENV):
            traceback.print_exc()
        print(one_line(f"qcodegen: internal error (please report it; {DEBUG_ENV}=1 shows the traceback): "
                       f"{type(exc).__name__}: {exc}"), file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
