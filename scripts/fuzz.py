#!/usr/bin/env python3
"""Seeded, structure-aware mutation fuzzing of qcodegen's importers (hostile input, issue 14).

Each case takes a seed model of one importer, mutates it and runs `qcodegen compile MUTANT --harness` (load ->
plan -> generate) in a forked process with a timeout of 20 s of CPU time (RLIMIT_CPU; ten times that of wall-clock
time as a backstop, so a machine busy with other work does not turn slow cases into hangs) and a 3 GiB
address-space cap (RLIMIT_AS), and classifies the end:

  accepted  exit 0
  error     exit 2 and exactly one line `qcodegen: error: ...` of at most 300 characters on stderr
  defect    any other end of a process that returned: an internal error (exit 3), a traceback, another exit code,
            a message that is not one short line
  hang      killed at the timeout
  crash     killed by a signal otherwise (segmentation fault, abort, the kernel's out-of-memory killer)

Commands:

  python scripts/fuzz.py                          # the full campaign: 10,000 mutants per importer
  python scripts/fuzz.py --cases 300 --quick      # what tests/test_fuzz.py runs (small seeds)
  python scripts/fuzz.py --importers json,tosa --cases 2000 --seed 7 --save-dir fuzz-out
  python scripts/fuzz.py --replay tosa:1234       # regenerate one case and run it in-process (shows a traceback)
  python scripts/fuzz.py --sanitize 40            # also: 40 accepted mutants per importer built with
                                                  # -fsanitize=address,undefined and verified bit for bit

Case k of importer I with seed S is fully determined by (S, I, k): the seed model and every mutation come from
`random.Random(f"{S}/{I}/{k}")`, so a case is reproduced with `--replay I:k --seed S`.

Seeds: the shared models (`QC_SHARED_DIR`, default ../shared from the project root: TFLite models, StableHLO
programs) and `examples/`. TOSA seeds are the lowered schedules of those models exported as TOSA flatbuffers
(qcodegen.verify.tosa_export, needs tosa-tools' serializer); TOSA MLIR seeds are those files printed by
`tosa-opt --tosa-deserialize`. Every seed is compiled once unmutated; seeds that do not compile are left out.

ONNX seeds are small QOperator models of bench/onnx_models.py quantized by onnxruntime (int8 and uint8
activations, per tensor and per channel); their mutator edits the protobuf itself (dimensions, attributes, element
types, names, node order, initializer data, the opset) and, one case in four, its bytes.

Adding an importer: write a seed function `(shared: Path, quick: bool, work: Path) -> list[Path]` (an
empty list, or raise `Unavailable("why")`, when a tool is missing) and add `Importer(name, suffix, seeds, mutator)` to
IMPORTERS; `mutate_bytes` (byte flips, truncations, 4-byte overwrites of plausible offsets and
lengths, splices) suits any binary format, and a structure-aware mutator `(rng, data, other seeds) -> bytes` (as
`mutate_onnx`) can be combined with it via `mixed(...)`.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import random
import re
import resource
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # one thread per forked case (and less address space)
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from qcodegen import cli  # noqa: E402  (imported once here: the forked cases never read the sources again)

CLASSES = ("accepted", "error", "defect", "hang", "crash")
MAX_LINE = 300
Mutator = Callable[[random.Random, bytes, list[bytes]], bytes]


class Unavailable(Exception):
    """An importer cannot be fuzzed here (a tool to make its seeds is missing); the message says why."""


# ---------------------------------------------------------------------------------------------- mutators

_U32_VALUES = (0, 1, 2, 3, 4, 7, 8, 0x7F, 0x80, 0xFF, 0x100, 0x7FFF, 0x8000, 0xFFFF, 0x10000, 0x7FFFFFFF,
               0x80000000, 0xFFFFFFFF, 0x10000000)


def _offset_positions(data: bytes) -> list[int]:
    """4-aligned positions holding a plausible flatbuffer offset or length (a u32 pointing inside the buffer)."""
    size = len(data)
    return [p for p in range(0, size - 3, 4) if 0 < struct.unpack_from("<I", data, p)[0] < size - p]


def _u32_value(rng: random.Random, data: bytes, pos: int) -> int:
    old = struct.unpack_from("<I", data, pos)[0]
    choice = rng.randrange(4)
    if choice == 0:
        return rng.choice(_U32_VALUES)
    if choice == 1:
        return (old + rng.choice((-8, -4, -1, 1, 4, 8))) & 0xFFFFFFFF
    if choice == 2:
        return rng.choice((len(data), len(data) - pos, len(data) - pos - 4, old * 2, old * 1000)) & 0xFFFFFFFF
    return rng.getrandbits(32)


def mutate_bytes(rng: random.Random, data: bytes, others: list[bytes]) -> bytes:
    """1-3 binary mutations: bit flips, random bytes, truncation, 4-byte overwrites aimed at offsets and lengths,
    2-byte overwrites (vtable entries), chunk deletion/duplication, a splice from another seed."""
    buf = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        if not buf:
            break
        kind = rng.randrange(9)
        i = rng.randrange(len(buf))
        if kind == 0:
            for _ in range(rng.randint(1, 8)):
                buf[rng.randrange(len(buf))] ^= 1 << rng.randrange(8)
        elif kind == 1:
            buf[i] = rng.randrange(256)
        elif kind == 2:
            del buf[rng.randrange(len(buf)):]
        elif kind in (3, 4, 5):  # the structure: offsets and lengths
            positions = _offset_positions(bytes(buf)) if kind != 5 else []
            pos = rng.choice(positions) if positions else (i & ~3)
            if pos + 4 <= len(buf):
                struct.pack_into("<I", buf, pos, _u32_value(rng, bytes(buf), pos))
        elif kind == 6:
            pos = i & ~1
            if pos + 2 <= len(buf):
                struct.pack_into("<H", buf, pos, rng.choice((0, 2, 4, 6, 0x7FFF, 0xFFFF, rng.getrandbits(16))))
        elif kind == 7:
            j = min(len(buf), i + rng.randint(1, 64))
            if rng.random() < 0.5:
                del buf[i:j]
            else:
                buf[i:i] = buf[i:j]
        else:
            other = rng.choice(others)
            if other:
                a = rng.randrange(len(other))
                chunk = other[a:a + rng.randint(1, 256)]
                buf[i:i + len(chunk)] = chunk
    return bytes(buf)


_JSON_VALUES: list[object] = [
    -1, 0, 1, 2, 3, 255, 2**31 - 1, 2**31, 2**32, 2**63 - 1, 2**63, -(2**63) - 1, 10**30, 0.5, -0.5, 1e-300,
    1e308, -1e308, float("inf"), float("-inf"), float("nan"), True, False, None, "", "x" * 5000,
    "\u0000\u202e\ufffd", "i8", "i4", "u8", "i16", "i32", "i48", "f32", "bool", "double_round", "SAME", [], {},
    [-1], [0], [2147483647], [1, 1, 1, 1, 1, 1, 1, 1], [2**40, 2**40], {"random": {"seed": 1, "min": 100,
                                                                                   "max": -100}},
    {"random": {"seed": -1}}, {"base64": "////"}, {"base64": 5}, [1.5, "a", None], [[1], [2, 3]],
]


def _json_paths(node: object, path: tuple = ()) -> list[tuple]:
    paths = [path]
    if isinstance(node, dict):
        for k, v in node.items():
            paths += _json_paths(v, path + (k,))
    elif isinstance(node, list):
        for k, v in enumerate(node):
            paths += _json_paths(v, path + (k,))
    return paths


def _json_get(doc: object, path: tuple) -> object:
    for key in path:
        doc = doc[key]  # type: ignore[index]
    return doc


def _strings(node: object) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        return [s for v in node.values() for s in _strings(v)]
    if isinstance(node, list):
        return [s for v in node for s in _strings(v)]
    return []


def _json_edit(rng: random.Random, doc: object, others: list[object]) -> object:
    paths = _json_paths(doc)
    path = rng.choice(paths)
    if not path:
        return rng.choice(_JSON_VALUES) if rng.random() < 0.05 else doc
    parent, key = _json_get(doc, path[:-1]), path[-1]
    value = parent[key]  # type: ignore[index]
    kind = rng.randrange(8)
    if kind == 0:
        new: object = rng.choice(_JSON_VALUES)
    elif kind == 1 and isinstance(value, bool | int | float):
        new = rng.choice((value + 1, value - 1, -value, value * 2, value * 1000, value * 2**20)) \
            if not isinstance(value, float) or math.isfinite(value) else 0
    elif kind == 2:  # a name from elsewhere in the document: cross references (tensors, ops)
        names = _strings(doc)
        new = rng.choice(names) if names else value
    elif kind == 3:  # a subtree of another seed
        other = rng.choice(others)
        new = _json_get(other, rng.choice(_json_paths(other)))
    elif kind == 4 and isinstance(parent, list):
        parent.insert(rng.randrange(len(parent) + 1), value)  # duplicate
        return doc
    elif kind == 5:
        del parent[key]  # type: ignore[arg-type]
        return doc
    elif kind == 6 and isinstance(parent, list) and len(parent) > 1:
        j = rng.randrange(len(parent))
        parent[key], parent[j] = parent[j], parent[key]  # type: ignore[index]
        return doc
    elif kind == 7 and isinstance(parent, dict):
        parent[rng.choice(("extra", "shape", "quant", "data", "attrs", "axis", "scales"))] = value
        return doc
    else:
        new = rng.choice(_JSON_VALUES)
    parent[key] = new  # type: ignore[index]
    return doc


def mutate_json(rng: random.Random, data: bytes, others: list[bytes]) -> bytes:
    """Structural edits of the JSON tree (values, types, deletions, duplications, cross-references, subtrees of
    other seeds); one case in eight also gets a byte-level edit of the text."""
    doc = json.loads(data)
    trees = [json.loads(o) for o in others]
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        doc = _json_edit(rng, doc, trees)
    text = json.dumps(doc).encode()
    return mutate_bytes(rng, text, others) if rng.random() < 0.125 else text


_MLIR_TOKEN = re.compile(rb"\s+|0x[0-9a-fA-F]+|[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?|\w+|.", re.DOTALL)
_MLIR_NUMBERS = (b"0", b"1", b"-1", b"2", b"255", b"2147483648", b"4294967296", b"9223372036854775808",
                 b"99999999999999999999", b"0x7FF0000000000000", b"0x0000000000000001", b"0x7FC00000", b"1.0e309",
                 b"1.0e-320", b"3.4e39", b"0.0", b"-0.0", b"nan", b"inf", b"65536")
_MLIR_WORDS = (b"tensor<", b"dense<", b"!quant.uniform<i8:f32, 0.5:3>", b"x", b"?", b"i1", b"i4", b"i8", b"i16",
               b"i32", b"i64", b"ui8", b"f16", b"f32", b"bf16", b"index", b"{", b"}", b"(", b")", b"<", b">", b"[",
               b"]", b",", b":", b"=", b"->", b"%0", b"%arg0", b"\"", b"// -----\n", b"stablehlo.add", b"tosa.add",
               b"return", b"loc(", b"#loc", b"array<i64: 1, 2>", b"0x", b"\n")


def mutate_mlir(rng: random.Random, data: bytes, others: list[bytes]) -> bytes:
    """Token edits of MLIR text: numbers replaced by extreme literals (dimensions, scales, zero points, attributes),
    tokens deleted, duplicated, swapped or inserted, lines deleted or duplicated, truncation."""
    tokens = _MLIR_TOKEN.findall(data)
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        if not tokens:
            break
        kind = rng.randrange(8)
        k = rng.randrange(len(tokens))
        if kind in (0, 1):
            numbers = [i for i, t in enumerate(tokens) if t[:1].isdigit()]
            if numbers:
                tokens[rng.choice(numbers)] = rng.choice(_MLIR_NUMBERS)
        elif kind == 2:
            del tokens[k]
        elif kind == 3:
            tokens.insert(k, tokens[rng.randrange(len(tokens))])
        elif kind == 4:
            m = rng.randrange(len(tokens))
            tokens[k], tokens[m] = tokens[m], tokens[k]
        elif kind == 5:
            tokens.insert(k, rng.choice(_MLIR_WORDS))
        elif kind == 6:
            lines = b"".join(tokens).split(b"\n")
            j = rng.randrange(len(lines))
            if rng.random() < 0.5:
                del lines[j]
            else:
                lines.insert(j, lines[rng.randrange(len(lines))])
            tokens = _MLIR_TOKEN.findall(b"\n".join(lines))
        else:
            tokens = tokens[:k]
    return b"".join(tokens)


_ONNX_INTS = (-(2**63), -(2**31) - 1, -2, -1, 0, 1, 2, 3, 4, 7, 255, 256, 2**15, 2**31 - 1, 2**31, 2**40, 2**63 - 1)


def _onnx_edit(rng: random.Random, model: object) -> None:
    """One structural edit of an onnx ModelProto in place: a dimension, an attribute, an element type, a node's
    input or output name, a node deleted, duplicated or moved, initializer data cut or grown, the opset."""
    g = model.graph  # type: ignore[attr-defined]
    nodes, inits = g.node, g.initializer
    values = list(g.input) + list(g.output) + list(g.value_info)
    kind = rng.randrange(11)
    if kind == 0 and inits:  # an initializer's dimensions
        t = rng.choice(inits)
        if t.dims and rng.random() < 0.7:
            t.dims[rng.randrange(len(t.dims))] = rng.choice(_ONNX_INTS)
        else:
            t.dims.append(rng.choice((1, 2, 0, 2**31)))
    elif kind == 1 and values:  # a graph input's or output's dimensions
        dims = rng.choice(values).type.tensor_type.shape.dim
        if len(dims):
            dims[rng.randrange(len(dims))].dim_value = rng.choice(_ONNX_INTS[:-1])
    elif kind == 2 and nodes:  # an attribute value
        attrs = [a for n in nodes for a in n.attribute]
        if attrs:
            a = rng.choice(attrs)
            if len(a.ints):
                a.ints[rng.randrange(len(a.ints))] = rng.choice(_ONNX_INTS)
            elif len(a.floats):
                a.floats[rng.randrange(len(a.floats))] = rng.choice((0.0, -1.0, 1e30, float("nan"), float("inf")))
            else:
                a.i = rng.choice(_ONNX_INTS)
                a.f = rng.choice((0.0, -1.0, 1e-30, 1e30, float("nan")))
                a.type = rng.choice((a.type, a.type, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 13, 14))
    elif kind == 3 and (inits or values):  # an element type
        target = rng.choice(list(inits) + values)
        elem = rng.choice((0, 1, 2, 3, 5, 6, 7, 8, 9, 10, 11, 12, 16, 21, 22, 26, 99))
        if hasattr(target, "data_type"):
            target.data_type = elem
        else:
            target.type.tensor_type.elem_type = elem
    elif kind == 4 and nodes:  # a name: cross references between nodes, initializers and graph values
        n = rng.choice(nodes)
        names = [x for m in nodes for x in list(m.input) + list(m.output)] + [t.name for t in inits]
        field_ = n.input if (rng.random() < 0.7 and len(n.input)) or not len(n.output) else n.output
        if len(field_):
            field_[rng.randrange(len(field_))] = rng.choice(names + ["", "x" * 500, "\u202e"])
    elif kind == 5 and nodes:
        del nodes[rng.randrange(len(nodes))]
    elif kind == 6 and nodes:
        nodes.add().CopyFrom(rng.choice(nodes))
    elif kind == 7 and len(nodes) > 1:  # a node moved (topological order)
        i, j = rng.randrange(len(nodes)), rng.randrange(len(nodes))
        a, b = type(nodes[i])(), type(nodes[j])()
        a.CopyFrom(nodes[i])
        b.CopyFrom(nodes[j])
        nodes[i].CopyFrom(b)
        nodes[j].CopyFrom(a)
    elif kind == 8 and inits:  # initializer data cut, grown or moved to another field
        t = rng.choice(inits)
        if t.raw_data and rng.random() < 0.7:
            t.raw_data = t.raw_data[:rng.randrange(len(t.raw_data) + 1)] if rng.random() < 0.5 else \
                t.raw_data + bytes(rng.randrange(1, 64))
        else:
            t.int64_data.extend([rng.choice(_ONNX_INTS)] * rng.randint(1, 4))
    elif kind == 9 and nodes:  # the operator
        n = rng.choice(nodes)
        n.op_type = rng.choice([m.op_type for m in nodes] + ["Loop", "If", "Constant", "Reshape", "Expand", "",
                                                             "QLinearConv", "ConstantOfShape", "Tile"])
        if rng.random() < 0.2:
            n.domain = rng.choice(("", "com.microsoft", "ai.onnx.ml", "x"))
    else:
        model.opset_import[0].version = rng.choice((1, 9, 10, 13, 17, 21, 25, 26, 2**31))  # type: ignore[attr-defined]


def mutate_onnx(rng: random.Random, data: bytes, others: list[bytes]) -> bytes:
    """1-3 structural edits of the protobuf (`_onnx_edit`); one case in eight also gets a byte-level edit."""
    import onnx

    model = onnx.ModelProto()
    model.ParseFromString(data)
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        _onnx_edit(rng, model)
    raw = model.SerializeToString()
    return mutate_bytes(rng, raw, others) if rng.random() < 0.125 else raw


def mixed(*mutators: Mutator) -> Mutator:
    """One of `mutators`, chosen per case."""
    def mutate(rng: random.Random, data: bytes, others: list[bytes]) -> bytes:
        return rng.choice(mutators)(rng, data, others)
    return mutate


# ---------------------------------------------------------------------------------------------- seeds

def _small(paths: list[Path], quick: bool, limit: int = 4096) -> list[Path]:
    return [p for p in sorted(paths) if not quick or p.stat().st_size <= limit]


def tflite_seeds(shared: Path, quick: bool, work: Path) -> list[Path]:
    models = shared / "testdata" / "tflite"
    if not models.is_dir():
        raise Unavailable(f"no TFLite models at {models} (set QC_SHARED_DIR)")
    try:
        import tflite_micro  # noqa: F401
    except ImportError:
        raise Unavailable("tflite-micro is not installed (pip install '.[tflite]')") from None
    seeds = _small(list(models.glob("models/*.tflite")) + list(models.glob("seanet/*/*.tflite")), quick, 2048)
    return seeds[::4] if quick else seeds


def _builder_seed(path: Path) -> Path:
    """A small JSON graph with the ops the examples lack (quantize, dequantize, sub, mul, max_pool2d, relu, relu6,
    clamp, transpose, pad, slice; i16 and per-axis types)."""
    from qcodegen.frontends.builder import GraphBuilder, Random

    b = GraphBuilder("ops")
    x = b.quantize(b.input("x", (1, 6, 6, 4), "f32"), "i8", 0.05, -3)
    y = b.conv2d(x, Random((4, 3, 3, 4), seed=1), [0.01, 0.02, 0.03, 0.04], 0.1, 2, bias=Random((4,), seed=2),
                 padding="SAME", activation="relu")
    z = b.max_pool2d(b.relu6(b.sub(y, x, 0.1, 1, activation="relu"), 0.05, -128), (2, 2), 2)
    z = b.pad(b.transpose(b.clamp(z, -1.0, 2.0), (0, 2, 1, 3)), [0, 0, 1, 1, 0, 1, 0, 0])
    z = b.mul(b.slice(z, (0, 0, 0, 0), (1, 3, 3, 4)), b.const("k", Random((1, 1, 1, 4), seed=3), "i8", 0.02), 0.2)
    w = b.requantize(b.quantize(b.input("v", (2, 8), "f32"), "i16", 0.001), 0.002, 0, "i16")
    b.output(b.dequantize(z), b.fully_connected(w, Random((3, 8), seed=4), 0.01, 0.5))
    b.to_json(path)
    return path


def json_seeds(shared: Path, quick: bool, work: Path) -> list[Path]:
    return sorted((ROOT / "examples").glob("*.json")) + [_builder_seed(work / "ops.json")]


_CHECK = re.compile(r"^\s*(%\w+) = stablehlo\.custom_call @check\.\w+\((%\w+), (%\w+)\)[^:]*: \([^,]+, (.+)\) "
                    r"-> tensor<i1>\s*$", re.M)


def _golden_as_model(text: str) -> str:
    """A StableHLO test program that returns the result of its check op (`check.eq(%expected, %actual)`) made into
    a model returning the checked value, so that `qcodegen compile` reaches its operators."""
    m = _CHECK.search(text)
    if m is None:
        return text
    result, _, actual, actual_type = m.groups()
    text = text[:m.start()] + text[m.end():]
    text = text.replace(f"return {result} : tensor<i1>", f"return {actual} : {actual_type}")
    return text.replace("-> tensor<i1> {", f"-> {actual_type} {{", 1)


def stablehlo_seeds(shared: Path, quick: bool, work: Path) -> list[Path]:
    programs = shared / "testdata" / "stablehlo" / "quantized"
    if not programs.is_dir():
        raise Unavailable(f"no StableHLO programs at {programs} (set QC_SHARED_DIR)")
    folder = work / "stablehlo-seeds"
    folder.mkdir(parents=True, exist_ok=True)
    seeds = []
    for source in _small(list(programs.glob("*.mlir")), quick, 3072)[::4 if quick else 1]:
        seeds.append(folder / source.name)
        seeds[-1].write_text(_golden_as_model(source.read_text()))
    return seeds + _small(list((ROOT / "examples").glob("*.mlir")), quick)


def _tosa_sources(shared: Path, quick: bool) -> list[Path]:
    """Models whose lowered schedules become TOSA seeds."""
    tflite = shared / "testdata" / "tflite"
    sources = [ROOT / "examples" / "kws_like.json", ROOT / "examples" / "wide_reduce.mlir"]
    sources += sorted(tflite.glob("seanet/*/*0.tflite")) + sorted(tflite.glob("models/*.tflite"))
    return sources[:6] if quick else sources


def tosa_seeds(shared: Path, quick: bool, work: Path) -> list[Path]:
    try:
        import tosa_serializer  # noqa: F401

        from qcodegen.verify.tosa_export import schedule_to_tosa
    except ImportError:
        raise Unavailable("TOSA seeds are written with tosa-tools' serializer (pip install '.[test]')") from None
    from qcodegen.compiler import plan
    from qcodegen.errors import QcError
    from qcodegen.frontends import load_model

    seeds = []
    for source in _tosa_sources(shared, quick):
        try:
            raw = schedule_to_tosa(plan(load_model(source)))
        except (QcError, ImportError):  # (an operator with no TOSA equivalent, or a missing extra)
            continue
        path = work / "tosa-seeds" / f"{source.stem}.tosa"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(raw)
        seeds.append(path)
    return seeds


def tosa_mlir_seeds(shared: Path, quick: bool, work: Path) -> list[Path]:
    tosa_opt = shutil.which("tosa-opt") or shutil.which("tosa-opt", path=str(Path(sys.executable).parent))
    if tosa_opt is None:
        raise Unavailable("tosa-opt (tosa-tools) is not on PATH")
    empty = work / "empty.mlir"
    empty.write_text("module {}\n")
    seeds = []
    for source in tosa_seeds(shared, quick, work):
        proc = subprocess.run([tosa_opt, f"--tosa-deserialize=tosa-flatbuffer-filename={source}", str(empty)],
                              capture_output=True, text=True)
        if proc.returncode == 0:
            path = work / "tosa-mlir-seeds" / f"{source.stem}.mlir"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("\n".join(ln for ln in proc.stdout.splitlines() if not ln.startswith("WARNING")))
            seeds.append(path)
    return seeds


def onnx_seeds(shared: Path, quick: bool, work: Path) -> list[Path]:
    """Small QOperator models of bench/onnx_models.py (quantized by onnxruntime: Conv, depthwise Conv, MatMul,
    Add, global average pool, Softmax; int8 and uint8 activations, per tensor and per channel), and QDQ models of
    bench/onnx_qdq_patterns.py (ConvTranspose, Resize, ReduceMean, Split, Gather, MatMul + bias Add)."""
    try:
        import onnx  # noqa: F401
        import onnxruntime.quantization  # noqa: F401
    except ImportError:
        raise Unavailable("ONNX seeds are quantized with onnxruntime (pip install '.[onnx,oracles]')") from None
    from bench import onnx_models as m
    from bench.onnx_qdq_patterns import patterns

    variants = [("ds_cnn", m.ds_cnn(4, 1, 12), False, "int8"), ("resnet8", m.resnet8(8, (4, 4, 4)), True, "uint8"),
                ("autoencoder", m.autoencoder(16, 8, 4, 1), False, "uint8"),
                ("mobilenet", m.mobilenet_v1(16, 2), True, "int8")]
    if not quick:
        variants += [("ds_cnn_u8", m.ds_cnn(8, 2, 20), True, "uint8"),
                     ("resnet8_i8", m.resnet8(12, (8, 8, 8)), False, "int8"),
                     ("autoencoder_pc", m.autoencoder(32, 16, 4, 2), True, "int8"),
                     ("mobilenet_u8", m.mobilenet_v1(24, 4), False, "uint8")]
    folder = work / "onnx-seeds"
    folder.mkdir(parents=True, exist_ok=True)
    seeds = []
    logging.getLogger().setLevel(logging.ERROR)  # (quantize_static's advice on the QDQ format)
    qdq = list(patterns().items())[:2 if quick else None]
    for name, float_model, per_channel, activations in variants:
        seeds.append(folder / f"{name}.onnx")
        seeds[-1].write_bytes(m.quantize(float_model, per_channel, activations, samples=2))
    for k, (_, float_model) in enumerate(qdq):
        seeds.append(folder / f"qdq{k}.onnx")
        seeds[-1].write_bytes(m.quantize(float_model, k % 2 == 0, ("int8", "uint8")[k % 2], samples=2, qdq=True))
    return seeds

@dataclass(frozen=True)
class Importer:
    name: str
    suffix: str
    seeds: Callable[[Path, bool, Path], list[Path]]
    mutate: Mutator


IMPORTERS = (
    Importer("tflite", ".tflite", tflite_seeds, mutate_bytes),
    Importer("tosa", ".tosa", tosa_seeds, mutate_bytes),
    Importer("tosa-mlir", ".mlir", tosa_mlir_seeds, mutate_mlir),
    Importer("stablehlo", ".mlir", stablehlo_seeds, mutate_mlir),
    Importer("json", ".json", json_seeds, mutate_json),
    Importer("onnx", ".onnx", onnx_seeds, mixed(mutate_onnx, mutate_onnx, mutate_onnx, mutate_bytes)),
)


# ---------------------------------------------------------------------------------------------- running cases

@dataclass
class Outcome:
    importer: str
    case: int
    kind: str
    stderr: str
    peak_kib: int
    cpu_seconds: float


def classify(status: int, stderr: str, cpu_seconds: float, timeout: float) -> str:
    if os.WIFSIGNALED(status):
        return "hang" if cpu_seconds >= timeout or os.WTERMSIG(status) == signal.SIGXCPU else "crash"
    code = os.WEXITSTATUS(status)
    lines = stderr.splitlines()
    if code == 0 and not lines:
        return "accepted"
    if code == 2 and len(lines) == 1 and lines[0].startswith("qcodegen: error: ") and len(lines[0]) <= MAX_LINE:
        return "error"
    return "defect"


def _child(path: Path, outdir: Path, stderr_path: Path, memory_bytes: int, cpu_seconds: float) -> None:
    """The forked case: memory and CPU caps, stdout to /dev/null, stderr to a file, then the CLI; never returns."""
    code = 4
    try:
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
        resource.setrlimit(resource.RLIMIT_CPU, (math.ceil(cpu_seconds), math.ceil(cpu_seconds) + 1))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        err = os.open(stderr_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(err, 2)
        sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
        code = cli.main(["compile", str(path), "-o", str(outdir), "--harness"])
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:  # the CLI lets nothing escape; anything here is a defect, shown as a traceback
        traceback.print_exc()
        sys.stderr.flush()
    finally:
        os._exit(code if isinstance(code, int) else 4)


@dataclass
class _Running:
    importer: str
    case: int
    folder: Path
    start: float


class Pool:
    """Forked cases, `jobs` at a time, each stopped after `timeout` seconds of CPU time (or ten times that of
    wall-clock time)."""

    def __init__(self, jobs: int, timeout: float, memory_bytes: int, work: Path) -> None:
        self.jobs, self.timeout, self.memory_bytes, self.work = jobs, timeout, memory_bytes, work
        self.running: dict[int, _Running] = {}

    def submit(self, importer: Importer, case: int, mutant: bytes) -> list[Outcome]:
        """Start a case (waiting for a free slot first); the outcomes of cases that ended meanwhile."""
        done = []
        while len(self.running) >= self.jobs:
            done += self.poll(block=True)
        folder = Path(tempfile.mkdtemp(prefix=f"{importer.name}-{case}-", dir=self.work))
        path = folder / f"mutant{importer.suffix}"
        path.write_bytes(mutant)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _child(path, folder / "out", folder / "stderr", self.memory_bytes, self.timeout)
        self.running[pid] = _Running(importer.name, case, folder, time.monotonic())
        return done

    def poll(self, block: bool = False) -> list[Outcome]:
        done = []
        while self.running:
            pid, status, usage = os.wait4(-1, os.WNOHANG)
            if pid in self.running:
                done.append(self._finish(pid, status, usage))
                continue
            now = time.monotonic()
            for pid, run in list(self.running.items()):
                if now - run.start > 10 * self.timeout:
                    os.kill(pid, signal.SIGKILL)
                    _, _, usage = os.wait4(pid, 0)
                    done.append(self._finish(pid, None, usage))
            if done or not block:
                return done
            time.sleep(0.003)
        return done

    def _finish(self, pid: int, status: int | None, usage: resource.struct_rusage) -> Outcome:
        run = self.running.pop(pid)
        stderr_path = run.folder / "stderr"
        stderr = stderr_path.read_text(errors="replace") if stderr_path.exists() else ""
        cpu = usage.ru_utime + usage.ru_stime
        kind = "hang" if status is None else classify(status, stderr, cpu, self.timeout)
        shutil.rmtree(run.folder, ignore_errors=True)
        return Outcome(run.importer, run.case, kind, stderr, usage.ru_maxrss, cpu)

    def drain(self) -> list[Outcome]:
        done = []
        while self.running:
            done += self.poll(block=True)
        return done


# ---------------------------------------------------------------------------------------------- campaign

@dataclass
class Report:
    counts: dict[str, Counter] = field(default_factory=dict)
    seeds: dict[str, int] = field(default_factory=dict)
    unavailable: dict[str, str] = field(default_factory=dict)
    longest_error: tuple[int, str, str] = (0, "", "")  # (length, case, line)
    peak: tuple[int, str] = (0, "")  # (KiB, case)
    slowest: tuple[float, str] = (0.0, "")  # (CPU seconds, case)
    failures: list[Outcome] = field(default_factory=list)  # defects, hangs, crashes
    accepted: dict[str, list[int]] = field(default_factory=dict)  # the cases, per importer
    samples: dict[str, list[tuple[int, bytes]]] = field(default_factory=dict)  # accepted mutants to sanitize
    seconds: float = 0.0

    def add(self, outcome: Outcome) -> None:
        self.counts.setdefault(outcome.importer, Counter())[outcome.kind] += 1
        name = f"{outcome.importer}:{outcome.case}"
        if outcome.kind == "error":
            line = outcome.stderr.splitlines()[0]
            if len(line) > self.longest_error[0]:
                self.longest_error = (len(line), name, line)
        if outcome.peak_kib > self.peak[0]:
            self.peak = (outcome.peak_kib, name)
        if outcome.cpu_seconds > self.slowest[0]:
            self.slowest = (outcome.cpu_seconds, name)
        if outcome.kind in ("defect", "hang", "crash"):
            self.failures.append(outcome)
        elif outcome.kind == "accepted":
            self.accepted.setdefault(outcome.importer, []).append(outcome.case)

    def problems(self) -> int:
        return sum(c[k] for c in self.counts.values() for k in ("defect", "hang", "crash"))

    def as_json(self) -> dict[str, object]:
        return {"counts": {k: dict(v) for k, v in self.counts.items()}, "seeds": self.seeds,
                "unavailable": self.unavailable, "longest_error_line": self.longest_error[0],
                "longest_error_case": self.longest_error[1], "peak_rss_kib": self.peak[0],
                "peak_case": self.peak[1], "slowest_cpu_seconds": round(self.slowest[0], 2),
                "slowest_case": self.slowest[1], "seconds": round(self.seconds, 1),
                "failures": [{"case": f"{f.importer}:{f.case}", "class": f.kind, "stderr": f.stderr[-2000:]}
                             for f in sorted(self.failures, key=lambda f: (f.importer, f.case))]}

    def describe(self) -> str:
        lines = [f"{'importer':<10} {'seeds':>5} " + " ".join(f"{k:>9}" for k in CLASSES)]
        for name, counts in self.counts.items():
            lines.append(f"{name:<10} {self.seeds.get(name, 0):>5} " + " ".join(f"{counts[k]:>9}" for k in CLASSES))
        lines += [f"{name:<10} unavailable: {why}" for name, why in self.unavailable.items()]
        lines.append(f"longest error line: {self.longest_error[0]} characters ({self.longest_error[1]}): "
                     f"{self.longest_error[2][:160]}")
        lines.append(f"peak memory of one case: {self.peak[0] / 1024:.0f} MiB ({self.peak[1]}); slowest case: "
                     f"{self.slowest[0]:.2f} s CPU ({self.slowest[1]}); {self.seconds:.0f} s in all")
        for f in sorted(self.failures, key=lambda f: (f.importer, f.case))[:20]:
            lines.append(f"  {f.kind} {f.importer}:{f.case}: {f.stderr.strip().splitlines()[-1:] or ['(no output)']}")
        return "\n".join(lines)


def case_rng(seed: int, importer: str, case: int) -> random.Random:
    return random.Random(f"{seed}/{importer}/{case}")


def make_mutant(importer: Importer, seeds: list[bytes], seed: int, case: int) -> bytes:
    rng = case_rng(seed, importer.name, case)
    return importer.mutate(rng, rng.choice(seeds), seeds)


def compiles(path: Path) -> bool:
    """Whether a seed compiles unmutated (in this process: it also imports what the forked cases use)."""
    from qcodegen.codegen import generate, load_target
    from qcodegen.compiler import plan
    from qcodegen.errors import QcError
    from qcodegen.frontends import load_model
    try:
        with tempfile.TemporaryDirectory() as tmp:
            generate(plan(load_model(path)), Path(tmp), load_target("generic"), harness=True)
        return True
    except QcError:
        return False


def load_seeds(importer: Importer, shared: Path, quick: bool, work: Path) -> list[bytes]:
    return [p.read_bytes() for p in importer.seeds(shared, quick, work) if compiles(p)]


def campaign(importers: list[Importer], cases: int, seed: int = 0, quick: bool = False, jobs: int = 2,
             timeout: float = 20.0, memory_gib: float = 3.0, keep_accepted: int = 0,
             save_dir: Path | None = None, progress: bool = False) -> Report:
    shared = Path(os.environ.get("QC_SHARED_DIR", ROOT.parent / "shared"))
    report = Report()
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="qc-fuzz-") as tmp:
        work = Path(tmp)
        pool = Pool(jobs, timeout, int(memory_gib * 2**30), work)
        for importer in importers:
            try:
                seeds = load_seeds(importer, shared, quick, work)
            except Unavailable as exc:
                report.unavailable[importer.name] = str(exc)
                continue
            report.seeds[importer.name] = len(seeds)
            if not seeds:
                report.unavailable[importer.name] = "no seed compiles"
                continue
            report.counts[importer.name] = Counter()
            for case in range(cases + 1):
                ended = pool.submit(importer, case, make_mutant(importer, seeds, seed, case)) if case < cases \
                    else pool.drain()
                for outcome in ended:  # (mutants are made again where needed: the parent keeps no data)
                    report.add(outcome)
                    if save_dir is not None and outcome.kind in ("defect", "hang", "crash"):
                        save_dir.mkdir(parents=True, exist_ok=True)
                        (save_dir / f"{importer.name}-{outcome.case}{importer.suffix}").write_bytes(
                            make_mutant(importer, seeds, seed, outcome.case))
                if progress and case % 500 == 499:
                    print(f"  {importer.name}: {case + 1}/{cases}", file=sys.stderr)
            chosen = sorted(report.accepted.get(importer.name, []))[:keep_accepted]
            report.samples[importer.name] = [(case, make_mutant(importer, seeds, seed, case)) for case in chosen]
    report.seconds = time.monotonic() - start
    return report


# ---------------------------------------------------------------------------------------------- sanitizers

def sanitized_check(path: Path, samples: int = 2) -> str:
    """Compile an accepted mutant with clang -fsanitize=address,undefined, run its harness on random inputs and
    compare with the numpy reference: "exact", "unpredictable" (a data-dependent REQUIRE fails on the random
    inputs: TOSA defines no result), "wrong code" or "sanitizer: ..."."""
    import dataclasses

    from qcodegen.codegen import generate, load_target
    from qcodegen.compiler import plan
    from qcodegen.errors import BuildError
    from qcodegen.fixedpoint import Unpredictable
    from qcodegen.frontends import load_model
    from qcodegen.testing import SANITIZE_FLAGS
    from qcodegen.verify import verify_schedule
    from qcodegen.verify.runners import HarnessRunner

    schedule = plan(load_model(path))
    target = dataclasses.replace(load_target("generic"), cc="clang")
    with tempfile.TemporaryDirectory() as tmp:
        model = generate(schedule, Path(tmp), target, harness=True)
        try:
            result = verify_schedule(schedule, model, HarnessRunner(target, SANITIZE_FLAGS), samples=samples)
        except Unpredictable:
            return "unpredictable"
        except BuildError as exc:
            return f"sanitizer: {str(exc)[:200]}"
    return "exact" if result.bit_exact else "wrong code"


def sanitize_sample(report: Report, importers: dict[str, Importer], timeout: float) -> Counter:
    """Run `sanitized_check` on the kept accepted mutants, each in a forked process."""
    results: Counter = Counter()
    with tempfile.TemporaryDirectory(prefix="qc-fuzz-asan-") as tmp:
        for name, kept in report.samples.items():
            for case, mutant in kept:
                path = Path(tmp) / f"{name}-{case}{importers[name].suffix}"
                path.write_bytes(mutant)
                read, write = os.pipe()
                pid = os.fork()
                if pid == 0:
                    os.close(read)
                    try:
                        verdict = sanitized_check(path)
                    except BaseException as exc:  # noqa: BLE001 (reported, never hidden)
                        verdict = f"failed: {type(exc).__name__}: {exc}"[:300]
                    os.write(write, verdict.encode())
                    os._exit(0)
                os.close(write)
                deadline = time.monotonic() + timeout
                while os.waitpid(pid, os.WNOHANG)[0] == 0:
                    if time.monotonic() > deadline:
                        os.kill(pid, signal.SIGKILL)
                        os.waitpid(pid, 0)
                        break
                    time.sleep(0.05)
                verdict = os.read(read, 4096).decode() or "timeout"
                os.close(read)
                results[(name, verdict.split(":")[0])] += 1
                if verdict not in ("exact", "unpredictable"):
                    print(f"  {name}:{case}: {verdict}", file=sys.stderr)
    return results


# ---------------------------------------------------------------------------------------------- command line

def replay(spec: str, seed: int, quick: bool) -> int:
    name, _, case = spec.partition(":")
    importer = next(i for i in IMPORTERS if i.name == name)
    shared = Path(os.environ.get("QC_SHARED_DIR", ROOT.parent / "shared"))
    with tempfile.TemporaryDirectory(prefix="qc-fuzz-") as tmp:
        seeds = load_seeds(importer, shared, quick, Path(tmp))
        mutant = make_mutant(importer, seeds, seed, int(case))
        path = Path(f"replay-{name}-{case}{importer.suffix}")
        path.write_bytes(mutant)
        print(f"wrote {path}; running qcodegen compile on it in-process", file=sys.stderr)
        os.environ["QC_DEBUG"] = "1"
        return cli.main(["compile", str(path), "-o", str(Path(tmp) / "out"), "--harness"])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--importers", default=",".join(i.name for i in IMPORTERS))
    p.add_argument("--cases", type=int, default=10_000, help="mutants per importer (default 10,000)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true", help="small seeds only (the CI slice)")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--timeout", type=float, default=20.0, help="CPU seconds per case (default 20)")
    p.add_argument("--memory-gib", type=float, default=3.0, help="address-space cap per case (default 3)")
    p.add_argument("--sanitize", type=int, default=0, metavar="N",
                   help="also build N accepted mutants per importer with ASan/UBSan and verify them")
    p.add_argument("--save-dir", type=Path, help="write the mutants of defects, hangs and crashes here")
    p.add_argument("--replay", metavar="IMPORTER:CASE")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    if args.replay:
        return replay(args.replay, args.seed, args.quick)
    wanted = args.importers.split(",")
    importers = [i for i in IMPORTERS if i.name in wanted]
    report = campaign(importers, args.cases, args.seed, args.quick, args.jobs, args.timeout, args.memory_gib,
                      args.sanitize, args.save_dir, progress=not args.json)
    sanitized = sanitize_sample(report, {i.name: i for i in importers}, 300.0) if args.sanitize else Counter()
    if args.json:
        print(json.dumps({**report.as_json(), "sanitized": {f"{k[0]}:{k[1]}": v for k, v in sanitized.items()}}))
    else:
        print(report.describe())
        for (name, verdict), n in sorted(sanitized.items()):
            print(f"sanitized {name}: {verdict} {n}")
    wrong = sum(n for (_, verdict), n in sanitized.items() if verdict not in ("exact", "unpredictable"))
    return 1 if report.problems() or wrong else 0


if __name__ == "__main__":
    sys.exit(main())
