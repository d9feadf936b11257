"""Seeded random mutations of MLIR text: the parser returns modules or raises MlirSyntaxError, nothing else, and
never hangs (each case runs under a 2 s alarm)."""

import os
import random
import re
import signal
from collections import Counter
from pathlib import Path

import pytest

from qcodegen.frontends.mlir import MlirSyntaxError, parse_chunks

SHARED = Path(os.environ.get("QC_SHARED_DIR", Path(__file__).resolve().parents[2] / "shared"))

CORPUS = SHARED / "testdata" / "stablehlo"
MAX_CHUNK = 4000  # characters; larger chunks only add more of the same syntax and slow every case down
CASES = 3000  # per corpus seed; half as many per PRETTY seed (those inputs are larger)
# Forms the corpus lacks (pretty reduce/while/slice/pad/iota, TOSA, aliases, sub-channel types, hex blobs, locations).
PRETTY = """
!q = !quant.uniform<i8<-127:127>:f32:{0:1, 1:2}, {{2.0:10, 3.0}, {4.0:30, 5.0:-1}}>
#d = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>
module @m attributes {mhlo.num_partitions = 1 : i32} {
  func.func public @main(%a: tensor<2x3xf32> {jax.arg_info = "a"}, %s: tensor<f32>, %p: tensor<2x3xi1>,
                         %n: tensor<i32>) -> (tensor<2xf32> {jax.result_info = ""}) {
    %0 = stablehlo.reduce(%a init: %s) applies stablehlo.add across dimensions = [1] :
        (tensor<2x3xf32>, tensor<f32>) -> tensor<2xf32> loc("f.py":1:2)
    %1 = stablehlo.reduce(%a init: %s) across dimensions = [0] : (tensor<2x3xf32>, tensor<f32>) -> tensor<3xf32>
     reducer(%x: tensor<f32>, %y: tensor<f32>) {
      %r = stablehlo.maximum %x, %y : tensor<f32>
      stablehlo.return %r : tensor<f32>
    }
    %2:2 = stablehlo.while(%i = %n, %v = %s) : tensor<i32>, tensor<f32>
     cond {
      %c = stablehlo.compare LT, %i, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %c : tensor<i1>
    } do {
      stablehlo.return %i, %v : tensor<i32>, tensor<f32>
    }
    %3 = stablehlo.slice %a [0:2, 1:3:2] : (tensor<2x3xf32>) -> tensor<2x1xf32>
    %4 = stablehlo.pad %a, %s, low = [0, 1], high = [1, 0], interior = [0, 0] :
        (tensor<2x3xf32>, tensor<f32>) -> tensor<3x4xf32>
    %5 = stablehlo.iota dim = 0 : tensor<4xi32>
    %6 = stablehlo.select %p, %a, %a : tensor<2x3xi1>, tensor<2x3xf32>
    %7 = stablehlo.dot_general %a, %a, batching_dims = [0] x [0], contracting_dims = [1] x [1],
        precision = [DEFAULT, HIGH] : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2xf32>
    %8 = stablehlo.convolution(%a, %a) dim_numbers = [b, 0, f]x[0, i, o]->[b, 0, f], window = {stride = [1],
        pad = [[0, 0]], lhs_dilate = [1], rhs_dilate = [1], reverse = [false]} {feature_group_count = 1 : i64} :
        (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
    %9 = stablehlo.constant dense<"0x0000803F0000004000004040000080400000A0400000C040"> : tensor<2x3xf32>
    %10 = stablehlo.constant dense<[(1.0, 2.0), (3.0, -4.0)]> : tensor<2xcomplex<f32>>
    %11 = "stablehlo.reduce_window"(%a, %s) <{padding = dense<[[0, 0], [1, 1]]> : tensor<2x2xi64>,
        window_dimensions = array<i64: 1, 2>}> ({
    ^bb0(%l: tensor<f32>, %r: tensor<f32>):
      %m = stablehlo.maximum %l, %r : tensor<f32>
      stablehlo.return %m : tensor<f32>
    }) : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x4xf32>
    %12 = "x.y"() {dims = #d, c = #stablehlo<comparison_direction EQ>, e = 0x7F800000 : f32} : () -> tensor<4x!q>
    %13 = call @g(%a) : (tensor<2x3xf32>) -> tensor<2x3xf32>
    return %0 : tensor<2xf32>
  }
  func.func private @g(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
    %m = "tosa.const"() <{values = dense<1073741824> : tensor<1xi32>}> : () -> tensor<1xi32>
    %z = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
    %0 = tosa.rescale %x, %m, %z, %z, %z {rounding_mode = SINGLE_ROUND, scale32 = true} :
        (tensor<2x3xf32>, tensor<1xi32>, tensor<1xi8>, tensor<1xi8>, tensor<1xi8>) -> tensor<2x3xf32>
    %shape = tosa.const_shape {values = dense<[3, 2]> : tensor<2xindex>} : () -> !tosa.shape<2>
    return %0 : tensor<2x3xf32>
  }
}
#loc1 = loc("x")
"""
VOCABULARY = [
    "dense<", "0x7F", "0x", "i0", "i99999999", "tensor<", "tensor<*x", "!quant.uniform<", "#stablehlo<",
    "#stablehlo.conv<", "#stablehlo.dot<", "loc(", "{", "}", "(", ")", "[", "]", "<", ">", ",", ":", "=", "->", "::",
    "x", "?", "-", "0", "1.5e-3", "99999999999999999999", "%0#5", "%0:3 =", "@\"x\"", "^bb1", "array<i1:", "inf",
    "f16", "bf16", "f8E4M3FN", "ui4", "u8", "complex<", "tuple<", "true", '"0x0102"', '"', "unit", "applies",
    "reducer", "init", "dims", "across", "dimensions", "window", "pad", "cond", "do", "attributes", "module",
    "func.func", "return", "stablehlo.reduce", "stablehlo.while", "stablehlo.slice", "stablehlo.constant", "!q", "#d",
    "!a = i8", "#a = 1", "dense_resource<", "raw", "// -----\n",
]
CHARACTERS = "%@#!^\"<>()[]{},:=-x0123456789.abcdefi_ \n?*'"
TOKEN = re.compile(r"\s+|\w+|.", re.DOTALL)


class Hang(Exception):
    pass


def _alarm(signum, frame):
    raise Hang("parsing took longer than 2 s")


def mutate(rng: random.Random, text: str) -> str:
    for _ in range(rng.randint(1, 4)):
        if not text:
            break
        i = rng.randrange(len(text))
        j = min(len(text), i + rng.randint(1, 40))
        kind = rng.randrange(9)
        if kind == 0:
            text = text[:i] + text[i + 1:]
        elif kind == 1:
            text = text[:i] + rng.choice(CHARACTERS) + text[i:]
        elif kind == 2:
            text = text[:j] + text[i:j] + text[j:]
        elif kind == 3:
            text = text[:i] + text[i + 1:i + 2] + text[i:i + 1] + text[i + 2:]
        elif kind == 4:
            text = text[:i]
        elif kind == 5:
            text = text[:i] + f" {rng.choice(VOCABULARY)} " + text[i:]
        else:
            tokens = TOKEN.findall(text)
            k, m = rng.randrange(len(tokens)), rng.randrange(len(tokens))
            if kind == 6:
                del tokens[k]
            elif kind == 7:
                tokens.insert(k, tokens[m])
            else:
                tokens[k], tokens[m] = tokens[m], tokens[k]
            text = "".join(tokens)
    return text


def run_mutations(seed: int, sources: list[str], cases: int) -> Counter:
    rng = random.Random(seed)
    outcomes: Counter = Counter()
    previous = signal.signal(signal.SIGALRM, _alarm)
    try:
        for case in range(cases):
            text = mutate(rng, rng.choice(sources))
            signal.setitimer(signal.ITIMER_REAL, 2.0)
            try:
                parse_chunks(text, "fuzz.mlir")
                outcomes["parsed"] += 1
            except MlirSyntaxError:
                outcomes["syntax error"] += 1
            except Exception as exc:
                pytest.fail(f"seed {seed}, case {case}: {type(exc).__name__}: {exc}\n--- input ---\n{text[:3000]}")
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
    finally:
        signal.signal(signal.SIGALRM, previous)
    return outcomes


def corpus_chunks() -> list[str]:
    files = sorted(CORPUS.glob("*.mlir")) + sorted(CORPUS.glob("quantized/*.mlir"))
    chunks = [c for path in files for c in re.split(r"(?m)^// -----.*$", path.read_text())]
    return [c for c in chunks if len(c) <= MAX_CHUNK]


@pytest.mark.skipif(not CORPUS.is_dir(), reason=f"StableHLO corpus not found at {CORPUS} (set QC_SHARED_DIR)")
@pytest.mark.parametrize("seed", range(4))
def test_mutated_corpus_parses_or_raises_syntax_error(seed):
    outcomes = run_mutations(seed, corpus_chunks(), CASES)
    assert outcomes["parsed"] > CASES // 20 and outcomes["syntax error"] > CASES // 2, outcomes


@pytest.mark.parametrize("seed", range(2))
def test_mutated_pretty_forms_parse_or_raise_syntax_error(seed):
    assert parse_chunks(PRETTY)[0].function("main").operations[0].name == "stablehlo.reduce"
    outcomes = run_mutations(100 + seed, [PRETTY], CASES // 2)
    assert outcomes["parsed"] > 0 and outcomes["syntax error"] > CASES // 4, outcomes
