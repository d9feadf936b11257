"""The generated folder as a drop-in: two models in one firmware build with CMake and with Make, the metadata and
report JSON against their schemas, the folder manifest, and the header's quantize/dequantize helpers against the
source formats' own definitions."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
from pathlib import Path

import cffi
import jsonschema
import numpy as np
import pytest

from qcodegen import api
from qcodegen.cli import main
from qcodegen.errors import QcError
from qcodegen.semantics.tflite import quantize_values

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
SCHEMAS = ROOT / "docs" / "schemas"
SHARED = ROOT.parent / "shared" / "testdata" / "tflite" / "models"
MODELS = ("kws_like", "mobilenet_like")


def _schema(name: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(json.loads((SCHEMAS / f"{name}.schema.json").read_text()))


def _ramp(n: int) -> np.ndarray:
    """Float inputs with ties, saturating values and zeros (the C program computes the same float32 values)."""
    i = np.arange(n, dtype=np.float32)
    return (np.sin(i * np.float32(0.37)) * np.float32(40.0)).astype(np.float32)


def _quantize_half_even(x: np.ndarray, scale: float, zp: int, lo: int, hi: int) -> np.ndarray:
    """JSON/StableHLO quantization: round half to even of f32(x / scale) + f32(zp), saturated."""
    v = (x.astype(np.float32) / np.float32(scale)).astype(np.float32) + np.float32(zp)
    return np.clip(np.rint(v.astype(np.float32)), lo, hi).astype(np.int64)


_MAIN = r"""
#include <stdio.h>
#include <math.h>
#include "kws_like.h"
#include "mobilenet_like.h"

static unsigned char arena[KWS_LIKE_ARENA_SIZE > MOBILENET_LIKE_ARENA_SIZE ? KWS_LIKE_ARENA_SIZE
                                                                           : MOBILENET_LIKE_ARENA_SIZE]
    __attribute__((aligned(16)));
static kws_like_input0_t a_in[KWS_LIKE_INPUT0_SIZE];
static kws_like_output0_t a_out[KWS_LIKE_OUTPUT0_SIZE];
static mobilenet_like_input0_t b_in[MOBILENET_LIKE_INPUT0_SIZE];
static mobilenet_like_output0_t b_out[MOBILENET_LIKE_OUTPUT0_SIZE];

static float ramp(int i) { return (float)(sinf((float)i * 0.37f) * 40.0f); }

int main(void) {
  int i;
  for (i = 0; i < KWS_LIKE_INPUT0_SIZE; ++i) a_in[i] = kws_like_quantize_input0(ramp(i));
  for (i = 0; i < MOBILENET_LIKE_INPUT0_SIZE; ++i) b_in[i] = mobilenet_like_quantize_input0(ramp(i));
  if (kws_like_run(a_in, a_out, arena) != KWS_LIKE_OK) return 1;
  if (mobilenet_like_run(b_in, b_out, arena) != MOBILENET_LIKE_OK) return 1;
  if (kws_like_run(a_in, a_out, arena + 1) != KWS_LIKE_ERROR_ARENA) return 1;
  for (i = 0; i < KWS_LIKE_OUTPUT0_SIZE; ++i) printf("%d ", (int)a_out[i]);
  printf("\n");
  for (i = 0; i < MOBILENET_LIKE_OUTPUT0_SIZE; ++i) printf("%d ", (int)b_out[i]);
  printf("\n");
  return 0;
}
"""


@pytest.fixture(scope="module")
def two_models(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("firmware")
    for name in MODELS:
        api.compile(EXAMPLES / f"{name}.json", root / name)
    (root / "main.c").write_text(_MAIN)
    return root


def _expected_outputs(two_models: Path) -> list[list[int]]:
    """Each model run (through qcodegen) on its input quantized in numpy from the same float ramp."""
    rows = []
    for name in MODELS:
        meta = json.loads((two_models / name / f"{name}.json").read_text())
        tin = meta["inputs"][0]
        q = tin["quantization"]
        info = np.iinfo(np.dtype(tin["ctype"].replace("_t", "")))
        x = _quantize_half_even(_ramp(math.prod(tin["shape"])), q["scale"], q["zero_point"], info.min, info.max)
        (y,) = api.run(EXAMPLES / f"{name}.json", [x.reshape(tin["shape"]).astype(info.dtype)])
        rows.append([int(v) for v in y.reshape(-1)])
    return rows


def _run_app(exe: Path) -> list[list[int]]:
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
    return [[int(v) for v in line.split()] for line in out.strip().splitlines()]


@pytest.mark.skipif(shutil.which("cmake") is None, reason="needs cmake")
def test_two_models_in_one_cmake_firmware(two_models, tmp_path):
    project = two_models / "cmake_app"
    project.mkdir()
    (project / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.13)\nproject(app C)\n"
        + "".join(f"add_subdirectory(../{n} {n})\n" for n in MODELS)
        + "add_executable(app ../main.c)\n"
        + f"target_link_libraries(app PRIVATE {' '.join(MODELS)} m)\n")
    build = tmp_path / "build"
    subprocess.run(["cmake", "-S", str(project), "-B", str(build), "-DCMAKE_C_COMPILER=gcc"], check=True,
                   capture_output=True)
    subprocess.run(["cmake", "--build", str(build), "-j", "2"], check=True, capture_output=True)
    assert _run_app(build / "app") == _expected_outputs(two_models)


def test_two_models_in_one_make_firmware(two_models, tmp_path):
    makefile = tmp_path / "Makefile"
    makefile.write_text(
        "".join(f"include {two_models}/{n}/{n}.mk\n" for n in MODELS)
        + "CC = gcc\n"
        + "app: $(KWS_LIKE_SRCS) $(MOBILENET_LIKE_SRCS) $(QC_RUNTIME_SRCS)\n"
        + f"\t$(CC) $(KWS_LIKE_CFLAGS) $(MOBILENET_LIKE_CFLAGS) -std=c99 -Werror -pedantic -o $@ {two_models}/main.c "
          "$^ -lm\n")
    subprocess.run(["make", "-C", str(tmp_path), "app"], check=True, capture_output=True)
    assert _run_app(tmp_path / "app") == _expected_outputs(two_models)


@pytest.mark.skipif(shutil.which("arm-none-eabi-gcc") is None or shutil.which("cmake") is None,
                    reason="needs arm-none-eabi-gcc and cmake (scripts/install_toolchains.sh)")
def test_cortex_m4_libraries_build_with_cmake(tmp_path):
    """The fragments' flags are the target's: two Cortex-M4 model libraries cross-compile in one project."""
    for name in MODELS:
        api.compile(EXAMPLES / f"{name}.json", tmp_path / name, target="cortex-m4")
    (tmp_path / "toolchain.cmake").write_text(
        "set(CMAKE_SYSTEM_NAME Generic)\nset(CMAKE_C_COMPILER arm-none-eabi-gcc)\n"
        "set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)\n")
    (tmp_path / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.13)\nproject(fw C)\n" + "".join(f"add_subdirectory({n})\n" for n in MODELS))
    build = tmp_path / "build"
    subprocess.run(["cmake", "-S", str(tmp_path), "-B", str(build),
                    f"-DCMAKE_TOOLCHAIN_FILE={tmp_path}/toolchain.cmake"], check=True, capture_output=True)
    proc = subprocess.run(["cmake", "--build", str(build), "--verbose"], check=True, capture_output=True, text=True)
    assert "-mcpu=cortex-m4" in proc.stdout
    assert all((build / n / f"lib{n}.a").is_file() for n in MODELS)


def test_metadata_reports_and_json_outputs_follow_their_schemas(tmp_path, capsys):
    for name in MODELS:
        result = api.compile(EXAMPLES / f"{name}.json", tmp_path / name)
        meta = json.loads((result.outdir / f"{name}.json").read_text())
        _schema("model-metadata").validate(meta)
        assert meta["arena"]["bytes"] == result.arena_bytes and meta["rom"]["weights_bytes"] == result.weights_bytes
        _schema("inspect").validate(json.loads((result.outdir / f"{name}_report.json").read_text()))
        _schema("graph").validate(json.loads((EXAMPLES / f"{name}.json").read_text()))
    assert main(["inspect", str(EXAMPLES / "kws_like.json"), "--json"]) == 0
    _schema("inspect").validate(json.loads(capsys.readouterr().out))
    assert main(["verify", str(EXAMPLES / "kws_like.json"), "--json", "--samples", "2"]) == 0
    _schema("verify").validate(json.loads(capsys.readouterr().out))


def test_recompiling_replaces_what_the_previous_compile_wrote(tmp_path, capsys):
    out = tmp_path / "out"
    if shutil.which("arm-none-eabi-gcc"):
        api.compile(EXAMPLES / "kws_like.json", out, target="cortex-m4", harness=True)
        assert (out / "qc_cortex_m_startup.c").is_file()
    api.compile(EXAMPLES / "kws_like.json", out)
    assert not (out / "qc_cortex_m_startup.c").exists() and not (out / "Makefile").exists()
    written = json.loads((out / "qcodegen_manifest.json").read_text())["files"]
    assert sorted(p.name for p in out.iterdir()) == sorted(written + ["qcodegen_manifest.json"])
    subprocess.run(["gcc", "-std=c99", "-Wall", "-Werror", "-c", *map(str, out.glob("*.c"))], cwd=tmp_path,
                   check=True)
    (out / "notes.txt").write_text("mine")
    with pytest.raises(QcError, match=r"holds files qcodegen did not write \(notes.txt\)"):
        api.compile(EXAMPLES / "kws_like.json", out)
    assert main(["compile", str(EXAMPLES / "kws_like.json"), "-o", str(out), "--force"]) == 0
    assert (out / "notes.txt").read_text() == "mine"
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1].startswith(f"wrote {len(written) + 1} files to ")  # the manifest too


def _helpers(outdir: Path, name: str, tmp_path: Path) -> object:
    """The header's helpers of input 0 and output 0 as C functions callable through cffi."""
    shim = tmp_path / "shim.c"
    shim.write_text(f'#include "{name}.h"\n'
                    f"int32_t q_in(float x) {{ return {name}_quantize_input0(x); }}\n"
                    f"float dq_out(int32_t q) {{ return {name}_dequantize_output0(({name}_output0_t)q); }}\n"
                    f"float dq_in(int32_t q) {{ return {name}_dequantize_input0(({name}_input0_t)q); }}\n")
    lib = tmp_path / "shim.so"
    subprocess.run(["gcc", "-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-pedantic", "-ffp-contract=off",
                    "-shared", "-fPIC", f"-I{outdir}", str(shim), "-o", str(lib)], check=True)
    ffi = cffi.FFI()
    ffi.cdef("int32_t q_in(float x); float dq_out(int32_t q); float dq_in(int32_t q);")
    return ffi.dlopen(str(lib))


def _probe_floats(scale: float, rng: np.random.Generator) -> np.ndarray:
    """Exact ties k * scale / 2 (as float32), their neighbours, random values over and beyond the range."""
    k = np.arange(-600, 601)
    ties = (k.astype(np.float64) * scale / 2).astype(np.float32)
    near = np.concatenate([np.nextafter(ties, np.float32(np.inf)), np.nextafter(ties, np.float32(-np.inf))])
    rand = rng.uniform(-300 * scale, 300 * scale, 4000).astype(np.float32)
    extremes = np.array([0.0, -0.0, 1e30, -1e30, np.inf, -np.inf, 1e-40, -1e-40], np.float32)
    return np.concatenate([ties, near, rand, extremes])


@pytest.mark.skipif(not (SHARED / "person_detect.tflite").is_file(), reason="needs the shared TFLite models")
def test_header_helpers_quantize_as_tflite_does(tmp_path):
    result = api.compile(SHARED / "person_detect.tflite", tmp_path / "pd")
    lib = _helpers(result.outdir, result.name, tmp_path)
    meta = json.loads((result.outdir / f"{result.name}.json").read_text())
    qi, qo = meta["inputs"][0]["quantization"], meta["outputs"][0]["quantization"]
    from qcodegen.ir.dtypes import dtype
    from qcodegen.ir.quant import QuantType

    q = QuantType.per_tensor("i8", qi["scale"], qi["zero_point"])
    x = _probe_floats(qi["scale"], np.random.default_rng(0))
    want = quantize_values(x, q, dtype("i8")).astype(np.int64)
    got = np.array([lib.q_in(float(v)) for v in x])
    assert np.array_equal(got, want), np.flatnonzero(got != want)[:5]
    assert lib.q_in(float("nan")) == -128
    for store, qq, fn in ((np.arange(-128, 128), qo, lib.dq_out), (np.arange(-128, 128), qi, lib.dq_in)):
        want_f = (np.float64(np.float32(qq["scale"])) * (store - qq["zero_point"])).astype(np.float32)
        got_f = np.array([fn(int(v)) for v in store], np.float32)
        assert np.array_equal(got_f.view(np.uint32), want_f.view(np.uint32))


def test_header_helpers_quantize_as_the_json_format_does(tmp_path):
    result = api.compile(EXAMPLES / "kws_like.json", tmp_path / "kws")
    lib = _helpers(result.outdir, result.name, tmp_path)
    qi = json.loads((result.outdir / "kws_like.json").read_text())["inputs"][0]["quantization"]
    x = _probe_floats(qi["scale"], np.random.default_rng(1))
    finite = np.isfinite(x) | np.isinf(x)
    want = _quantize_half_even(x[finite], qi["scale"], qi["zero_point"], -128, 127)
    got = np.array([lib.q_in(float(v)) for v in x[finite]])
    assert np.array_equal(got, want)
    assert lib.q_in(float("nan")) == -128


def test_harness_prints_outputs_and_timing_only_when_asked(tmp_path):
    result = api.compile(EXAMPLES / "kws_like.json", tmp_path / "h", harness=True)
    subprocess.run(["make", "-s", "-C", str(result.outdir)], check=True, capture_output=True)
    x = np.random.default_rng(3).integers(-128, 128, 490, dtype=np.int8)
    (tmp_path / "in.bin").write_bytes(x.tobytes())
    exe, out = str(result.outdir / "model"), str(tmp_path / "out.bin")
    quiet = subprocess.run([exe, str(tmp_path / "in.bin"), out], capture_output=True, text=True, check=True)
    assert quiet.stdout == ""
    shown = subprocess.run([exe, "-n", "5", "-p", str(tmp_path / "in.bin"), out], capture_output=True, text=True,
                           check=True).stdout.splitlines()
    values = np.fromfile(out, np.int8)
    assert shown[0] == "output0 (logits, 1x12 i8): " + " ".join(str(v) for v in values)
    assert shown[1].startswith("5 run(s), ") and shown[1].endswith(" us per inference (processor time)")
