"""Every StableHLO quantized op's integer lowering against its float definition, measured on random inputs: the
numbers of docs/stablehlo.md "Exactness, measured".

    PYTHONPATH=. python scripts/stablehlo_exactness.py [--elements 1000000] [--configs 20] [--seed 0] [--c]

For each op, `--configs` random type configurations (a quarter with "nice" scales, powers of two times 0.05 or
1/255, whose exact ties the float32 definition resolves one way or the other) are compiled as single-op programs;
seeded random inputs (qcodegen.verify.check.random_inputs) are run until `--elements` output elements are compared.
Per op: elements off the float definition (the interpreter's float32 evaluation, verify --against float) and, of
them, elements on f32 ties (where that evaluation differs from the exactly rounded definition); and the plan-time
verdicts of the 8-bit binary ops (qcodegen/lower/stablehlo/binary.py). The integer results are the numpy reference
of each schedule, which the generated C equals bit for bit (`--c` also checks that on generic C for the first
configuration of each op).
"""

from __future__ import annotations

import argparse
import tempfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from qcodegen.codegen import generate, load_target
from qcodegen.compiler import plan
from qcodegen.frontends import load_model
from qcodegen.reference import run_reference
from qcodegen.verify import get_runner, verify_schedule
from qcodegen.verify.float_accuracy import float_definition, verify_against_float

ROWS, COLS = 50, 1000  # 50,000 elements per output and sample
Program = Callable[[np.random.Generator, bool], str]


def _scale(rng: np.random.Generator, nice: bool, lo: float = 1e-3, hi: float = 1e-1) -> float:
    if nice:
        return float(rng.choice([0.05, 1 / 255]) * 2.0 ** int(rng.integers(-2, 3)))
    return float(10 ** rng.uniform(np.log10(lo), np.log10(hi)))


def _type(storage: str, scale: float, zp: int = 0) -> str:
    return f"!quant.uniform<{storage}:f32, {scale!r}:{zp}>"


def _zp(rng: np.random.Generator) -> int:
    return int(rng.integers(-20, 21))


def _dense(values: np.ndarray) -> str:
    return np.array2string(values, separator=", ", threshold=10 ** 9).replace("\n", "")


def _binary(op: str, out_scale: Callable[[float, float], float], storage: str = "i8", zps: bool = True,
            scales: tuple[float, float] = (1e-3, 1e-1)) -> Program:
    def program(rng: np.random.Generator, nice: bool) -> str:
        zp = (lambda: _zp(rng)) if zps else (lambda: 0)
        sa, sb = _scale(rng, nice, *scales), _scale(rng, nice, *scales)
        sy = out_scale(sa, sb) * rng.uniform(0.5, 2) if not nice else _scale(rng, nice, *scales)
        a, b, y = _type(storage, sa, zp()), _type(storage, sb, zp()), _type(storage, sy, zp())
        result = "i1" if op.startswith("compare") else y
        call = f"stablehlo.compare {op.split()[1]}, %a, %b" if op.startswith("compare") else f"stablehlo.{op} %a, %b"
        return (f"func.func @main(%a: tensor<{ROWS}x{COLS}x{a}>, %b: tensor<{ROWS}x{COLS}x{b}>) -> "
                f"tensor<{ROWS}x{COLS}x{result}> {{\n"
                f"  %r = {call} : (tensor<{ROWS}x{COLS}x{a}>, tensor<{ROWS}x{COLS}x{b}>) -> "
                f"tensor<{ROWS}x{COLS}x{result}>\n"
                f"  func.return %r : tensor<{ROWS}x{COLS}x{result}>\n}}\n")
    return program


def _unary(op: str, in_scale: tuple[float, float], out_scale: tuple[float, float]) -> Program:
    def program(rng: np.random.Generator, nice: bool) -> str:
        x = _type("i8", _scale(rng, nice, *in_scale), _zp(rng))
        y = _type("i8", _scale(rng, nice, *out_scale), _zp(rng))
        return (f"func.func @main(%a: tensor<{ROWS}x{COLS}x{x}>) -> tensor<{ROWS}x{COLS}x{y}> {{\n"
                f"  %r = stablehlo.{op} %a : (tensor<{ROWS}x{COLS}x{x}>) -> tensor<{ROWS}x{COLS}x{y}>\n"
                f"  func.return %r : tensor<{ROWS}x{COLS}x{y}>\n}}\n")
    return program


def _requantize(storage: str, in_range: tuple[float, float]) -> Program:
    def program(rng: np.random.Generator, nice: bool) -> str:
        zp = 0 if storage == "i32" else _zp(rng)
        x = _type(storage, _scale(rng, nice, *in_range), zp)
        y = _type("i8", _scale(rng, nice), _zp(rng))
        return (f"func.func @main(%a: tensor<{ROWS}x{COLS}x{x}>) -> tensor<{ROWS}x{COLS}x{y}> {{\n"
                f"  %r = stablehlo.uniform_quantize %a : (tensor<{ROWS}x{COLS}x{x}>) -> tensor<{ROWS}x{COLS}x{y}>\n"
                f"  func.return %r : tensor<{ROWS}x{COLS}x{y}>\n}}\n")
    return program


def _dot(via_i32: bool) -> Program:
    """[ROWS, K] x constant [K, COLS] weights -> i8: per-tensor weights directly, or per-column weights through the
    i32 accumulator type (scale s_x * s_w per column) and a requantization, the interpreter's usual form."""
    def program(rng: np.random.Generator, nice: bool) -> str:
        k = 32
        sx = _scale(rng, nice)
        sw = np.array([_scale(rng, nice, 2e-3, 2e-2) for _ in range(COLS if via_i32 else 1)])
        x = _type("i8", sx, _zp(rng))
        w = (f"!quant.uniform<i8:f32:1, {{{', '.join(repr(float(s)) for s in sw)}}}>" if via_i32
             else _type("i8", float(sw[0])))
        sy = float(sx * np.median(sw) * 12 * rng.uniform(0.5, 2))
        y = _type("i8", sy if not nice else _scale(rng, nice), _zp(rng))
        weights = _dense(rng.integers(-127, 128, (k, COLS)))
        head = (f"func.func @main(%a: tensor<{ROWS}x{k}x{x}>) -> tensor<{ROWS}x{COLS}x{y}> {{\n"
                f"  %c = stablehlo.constant dense<{weights}> : tensor<{k}x{COLS}xi8>\n"
                f"  %w = stablehlo.bitcast_convert %c : (tensor<{k}x{COLS}xi8>) -> tensor<{k}x{COLS}x{w}>\n")
        if not via_i32:
            return head + (f"  %r = stablehlo.dot_general %a, %w, contracting_dims = [1] x [0] : "
                           f"(tensor<{ROWS}x{k}x{x}>, tensor<{k}x{COLS}x{w}>) -> tensor<{ROWS}x{COLS}x{y}>\n"
                           f"  func.return %r : tensor<{ROWS}x{COLS}x{y}>\n}}\n")
        acc = f"!quant.uniform<i32:f32:1, {{{', '.join(repr(float(sx * s)) for s in sw)}}}>"
        return head + (f"  %d = stablehlo.dot_general %a, %w, contracting_dims = [1] x [0] : "
                       f"(tensor<{ROWS}x{k}x{x}>, tensor<{k}x{COLS}x{w}>) -> tensor<{ROWS}x{COLS}x{acc}>\n"
                       f"  %r = stablehlo.uniform_quantize %d : (tensor<{ROWS}x{COLS}x{acc}>) -> "
                       f"tensor<{ROWS}x{COLS}x{y}>\n  func.return %r : tensor<{ROWS}x{COLS}x{y}>\n}}\n")
    return program


def _convolution(rng: np.random.Generator, nice: bool) -> str:
    """NHWC [4, 52, 52, 8] (*) 3x3x8x20 constant per-tensor weights, VALID: [4, 50, 50, 20] = 200,000 elements."""
    sx, sw = _scale(rng, nice), _scale(rng, nice, 2e-3, 2e-2)
    x, w = _type("i8", sx, _zp(rng)), _type("i8", sw, 0)
    y = _type("i8", sx * sw * 40 * rng.uniform(0.5, 2) if not nice else _scale(rng, nice), _zp(rng))
    weights = _dense(rng.integers(-127, 128, (3, 3, 8, 20)))
    xs, ws, ys = f"tensor<4x52x52x8x{x}>", f"tensor<3x3x8x20x{w}>", f"tensor<4x50x50x20x{y}>"
    return (f"func.func @main(%a: {xs}) -> {ys} {{\n"
            f"  %c = stablehlo.constant dense<{weights}> : tensor<3x3x8x20xi8>\n"
            f"  %w = stablehlo.bitcast_convert %c : (tensor<3x3x8x20xi8>) -> {ws}\n"
            f"  %r = stablehlo.convolution(%a, %w) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], "
            f"window = {{}} {{batch_group_count = 1 : i64, feature_group_count = 1 : i64}} : ({xs}, {ws}) -> {ys}\n"
            f"  func.return %r : {ys}\n}}\n")


def _reduce(rng: np.random.Generator, nice: bool) -> str:
    """Sums of 16 along the middle axis: [ROWS, 16, COLS] -> [ROWS, COLS]."""
    zx = _zp(rng)
    sx = _scale(rng, nice)
    x, y = _type("i8", sx, zx), _type("i8", sx * 4 * rng.uniform(0.5, 2) if not nice else _scale(rng, nice), _zp(rng))
    return (f"func.func @main(%a: tensor<{ROWS}x16x{COLS}x{x}>) -> tensor<{ROWS}x{COLS}x{y}> {{\n"
            f"  %c = stablehlo.constant dense<{zx}> : tensor<i8>\n"
            f"  %z = \"quant.scast\"(%c) : (tensor<i8>) -> tensor<{x}>\n"
            f"  %r = stablehlo.reduce(%a init: %z) applies stablehlo.add across dimensions = [1] : "
            f"(tensor<{ROWS}x16x{COLS}x{x}>, tensor<{x}>) -> tensor<{ROWS}x{COLS}x{y}>\n"
            f"  func.return %r : tensor<{ROWS}x{COLS}x{y}>\n}}\n")


def _qdq(body: str, float_out: str) -> Program:
    """A float program between quantize / dequantize pairs (folded to integer ops)."""
    def program(rng: np.random.Generator, nice: bool) -> str:
        qa, qb = _type("i8", _scale(rng, nice), _zp(rng)), _type("i8", _scale(rng, nice), _zp(rng))
        qy = _type("i8", _scale(rng, nice, 5e-3, 2e-1), _zp(rng))
        return body.format(qa=qa, qb=qb, qy=qy, out=float_out, R=ROWS, C=COLS)
    return program


QDQ_ADD = """func.func @main(%x: tensor<{R}x{C}xf32>, %u: tensor<{R}x{C}xf32>) -> tensor<{R}x{C}xf32> {{
  %xq = stablehlo.uniform_quantize %x : (tensor<{R}x{C}xf32>) -> tensor<{R}x{C}x{qa}>
  %xd = stablehlo.uniform_dequantize %xq : (tensor<{R}x{C}x{qa}>) -> tensor<{R}x{C}xf32>
  %uq = stablehlo.uniform_quantize %u : (tensor<{R}x{C}xf32>) -> tensor<{R}x{C}x{qb}>
  %ud = stablehlo.uniform_dequantize %uq : (tensor<{R}x{C}x{qb}>) -> tensor<{R}x{C}xf32>
  %s = stablehlo.add %xd, %ud : tensor<{R}x{C}xf32>
  %zero = stablehlo.constant dense<0.0> : tensor<{R}x{C}xf32>
  %relu = stablehlo.maximum %s, %zero : tensor<{R}x{C}xf32>
  %yq = stablehlo.uniform_quantize %relu : (tensor<{R}x{C}xf32>) -> tensor<{R}x{C}x{qy}>
  %y = stablehlo.uniform_dequantize %yq : (tensor<{R}x{C}x{qy}>) -> tensor<{R}x{C}xf32>
  func.return %y : tensor<{R}x{C}xf32>
}}
"""
QDQ_MEAN = """func.func @main(%x: tensor<{R}x16x{C}xf32>) -> tensor<{R}x{C}xf32> {{
  %xq = stablehlo.uniform_quantize %x : (tensor<{R}x16x{C}xf32>) -> tensor<{R}x16x{C}x{qa}>
  %xd = stablehlo.uniform_dequantize %xq : (tensor<{R}x16x{C}x{qa}>) -> tensor<{R}x16x{C}xf32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %s = stablehlo.reduce(%xd init: %zero) applies stablehlo.add across dimensions = [1]
    : (tensor<{R}x16x{C}xf32>, tensor<f32>) -> tensor<{R}x{C}xf32>
  %n = stablehlo.constant dense<0.0625> : tensor<{R}x{C}xf32>
  %m = stablehlo.multiply %s, %n : tensor<{R}x{C}xf32>
  %yq = stablehlo.uniform_quantize %m : (tensor<{R}x{C}xf32>) -> tensor<{R}x{C}x{qy}>
  %y = stablehlo.uniform_dequantize %yq : (tensor<{R}x{C}x{qy}>) -> tensor<{R}x{C}xf32>
  func.return %y : tensor<{R}x{C}xf32>
}}
"""

OPS: dict[str, Program] = {
    "add": _binary("add", lambda a, b: a + b),
    "subtract": _binary("subtract", lambda a, b: a + b),
    "multiply": _binary("multiply", lambda a, b: a * b * 64),
    "maximum": _binary("maximum", max),
    "minimum": _binary("minimum", max),
    "compare GT": _binary("compare GT", max),
    "divide": _binary("divide", lambda a, b: a / b / 16),
    "add i16": _binary("add", lambda a, b: a + b, "i16", scales=(1e-5, 1e-3)),
    "multiply i16": _binary("multiply", lambda a, b: a * b * 8192, "i16", zps=False, scales=(1e-5, 1e-3)),
    "tanh": _unary("tanh", (1e-2, 5e-2), (1 / 128, 1 / 100)),
    "exponential": _unary("exponential", (1e-3, 2e-2), (1e-2, 3e-2)),
    "logistic": _unary("logistic", (1e-2, 1e-1), (1 / 256, 1 / 200)),
    "requantize i8": _requantize("i8", (1e-3, 1e-1)),
    "requantize i16": _requantize("i16", (1e-5, 1e-3)),
    "requantize i32": _requantize("i32", (1e-8, 1e-6)),
    "dot_general": _dot(via_i32=False),
    "dot_general via i32": _dot(via_i32=True),
    "convolution": _convolution,
    "reduce (sum)": _reduce,
    "qdq add + relu": _qdq(QDQ_ADD, "f32"),
    "qdq mean (sum * 1/16)": _qdq(QDQ_MEAN, "f32"),
}


class ReferenceRunner:
    """The numpy reference of the schedule in place of a compiled model (the C equals it bit for bit)."""

    def __init__(self, schedule) -> None:
        self.schedule = schedule

    def run(self, model, batch):
        values = run_reference(self.schedule, batch)
        return [values[n] for n in self.schedule.outputs], None


@dataclass
class Tally:
    elements: int = 0
    off: int = 0
    ties: int = 0
    configs_off: int = 0
    verdicts: Counter = field(default_factory=Counter)


def measure(name: str, program: Program, configs: int, elements: int, rng: np.random.Generator, with_c: bool,
            workdir: Path) -> Tally:
    tally = Tally()
    per_config = max(1, elements // configs)
    for k in range(configs):
        path = workdir / f"op{len(list(workdir.iterdir()))}.mlir"
        path.write_text(program(rng, nice=k % 4 == 3))
        schedule = plan(load_model(path))
        for record in schedule.exactness:
            verdict = "exact" if record.exact else f"{record.off} off ({record.ties} ties)"
            tally.verdicts[f"{record.form} [{record.method}]: {verdict}"] += 1
        size = sum(schedule.buffers[n].size for n in schedule.outputs)
        samples = max(1, -(-per_config // size))
        result = verify_against_float(float_definition(path, load_model(path)), schedule, None,
                                      ReferenceRunner(schedule), samples=samples, seed=int(rng.integers(1 << 30)))
        tally.elements += samples * size
        off = sum(o.elements_off for o in result.outputs)
        tally.off += off
        tally.ties += sum(o.elements_on_ties for o in result.outputs)
        tally.configs_off += off > 0
        if with_c and k == 0:
            target = load_target("generic")
            with tempfile.TemporaryDirectory() as tmp:
                model = generate(schedule, Path(tmp), target)
                assert verify_schedule(schedule, model, get_runner(target), samples=1).bit_exact, name
    return tally


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--elements", type=int, default=1_000_000)
    parser.add_argument("--configs", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--c", action="store_true", help="also check the generated C (generic) per op")
    parser.add_argument("--ops", nargs="*", default=list(OPS), help="a subset of the ops")
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    print("| op | configs (nice) | elements | off | on f32 ties | configs with off |")
    print("|---|---:|---:|---:|---:|---:|")
    verdicts = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.ops:
            t = measure(name, OPS[name], args.configs, args.elements, rng, args.c, Path(tmp))
            print(f"| {name} | {args.configs} ({args.configs // 4}) | {t.elements:,} | {t.off:,} | {t.ties:,} | "
                  f"{t.configs_off} |", flush=True)
            verdicts[name] = t.verdicts
    print("\nplan-time verdicts (form [method]: result -> configurations)")
    for name, counter in verdicts.items():
        for verdict, count in sorted(counter.items()):
            print(f"  {name}: {verdict} -> {count}")


if __name__ == "__main__":
    main()
