"""Generated C as a firmware engineer gets it: warning-free on gcc and clang, sanitizer-clean, prefixed
symbols (two models in one binary), the harness contract."""

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from qcodegen.codegen import generate, load_target
from qcodegen.codegen.targets import Target
from qcodegen.testing import Var, assert_bit_exact, prepare, step_schedule
from qcodegen.verify.runners import HarnessRunner, read_raw, write_raw

STRICT = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-ffp-contract=off"]
SANITIZE = ("-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-g")


def rescale_chain(name: str):
    sched = step_schedule("RESCALE", [Var((3, 4), "i8")], [((3, 4), "i32")], name=name,
                          multiplier=[1 << 30], shift=[10], input_zp=-128, output_zp=0, scale32=True,
                          rounding="single_round")
    return prepare(sched)


def compilers() -> list[str]:
    return [cc for cc in ("gcc", "clang") if shutil.which(cc)]


@pytest.mark.parametrize("cc", compilers())
def test_two_models_link_into_one_binary(tmp_path, cc):
    for name in ("alpha", "beta"):
        generate(rescale_chain(name), tmp_path, load_target("generic"), name=name)
    main = tmp_path / "both.c"
    main.write_text(
        '#include "alpha.h"\n#include "beta.h"\n'
        "int main(void) {\n"
        "  static unsigned char arena[ALPHA_ARENA_SIZE + BETA_ARENA_SIZE + 1] __attribute__((aligned(16)));\n"
        "  int8_t x[12] = {0}; int32_t ya[12], yb[12];\n"
        "  return alpha_run(x, ya, arena) | beta_run(x, yb, arena) | (ya[0] != yb[0]);\n}\n")
    exe = tmp_path / "both"
    srcs = [str(p) for p in sorted(tmp_path.glob("*.c"))]
    subprocess.run([cc, *STRICT, "-O2", *srcs, "-o", str(exe), "-lm"], check=True, capture_output=True)
    assert subprocess.run([str(exe)]).returncode == 0


@pytest.mark.parametrize("cc", compilers())
def test_strict_warnings_and_sanitizers(cc):
    target = Target(name=f"{cc}-san", description="", cc=cc, cflags=tuple(STRICT + ["-O1"]), ldflags=("-lm",))
    sched = step_schedule("RESCALE", [Var((5, 3), "i32")], [((5, 3), "i8")], multiplier=[1 << 30, 7, (1 << 31) - 1],
                          shift=[33, 62, 40], input_zp=0, output_zp=-5, scale32=True, rounding="double_round",
                          per_channel=True)
    assert_bit_exact(sched, samples=2, runner="harness", extra_cflags=SANITIZE, target=target)
    assert_bit_exact(sched, samples=1, runner="host", target=target)


def test_harness_contract(tmp_path):
    sched = rescale_chain("h")
    model = generate(sched, tmp_path, load_target("generic"), harness=True)
    exe = HarnessRunner(load_target("generic")).executable(model)
    x = np.arange(-6, 6, dtype=np.int8).reshape(3, 4)
    write_raw(tmp_path / "in.bin", x, packed=False)
    ok = subprocess.run([str(exe), "-n", "3", str(tmp_path / "in.bin"), str(tmp_path / "out.bin")],
                        capture_output=True, text=True)
    assert ok.returncode == 0 and ok.stdout == ""
    y = read_raw(tmp_path / "out.bin", (3, 4), np.int32, packed=False)
    assert y.tolist() == ((x.astype(np.int64) + 128) << 20).tolist()
    (tmp_path / "short.bin").write_bytes(b"\0" * 11)
    bad = subprocess.run([str(exe), str(tmp_path / "short.bin"), str(tmp_path / "o.bin")], capture_output=True,
                         text=True)
    assert bad.returncode == 2 and "11 bytes, expected 12" in bad.stderr and bad.stdout == ""
    usage = subprocess.run([str(exe)], capture_output=True, text=True)
    assert usage.returncode == 2 and "usage" in usage.stderr


def test_makefile_builds(tmp_path):
    if not shutil.which("make"):
        pytest.skip("make is not installed")
    generate(rescale_chain("mk"), tmp_path, load_target("generic"), harness=True)
    subprocess.run(["make", "-s", "-C", str(tmp_path)], check=True, capture_output=True)
    assert (tmp_path / "model").exists()


def test_header_api(tmp_path):
    generate(rescale_chain("api"), tmp_path, load_target("generic"))
    header = (Path(tmp_path) / "api.h").read_text()
    assert "#define API_ARENA_ALIGN 16" in header
    assert "int api_run(const int8_t *input0, int32_t *output0, void *arena);" in header
    assert "#define API_INPUT0_SHAPE { 3, 4 }" in header
    assert "malloc" not in (Path(tmp_path) / "api.c").read_text()


def test_constants_read_only_through_a_relayout_are_left_out(tmp_path):
    """aarch64-dotprod reads the convolution weights of kws_like only through their SDOT re-layout: the step gets
    NULL for the original array, which is not in the weights file (flash holds one copy)."""
    import re

    from qcodegen.compiler import plan
    from qcodegen.frontends import load_model

    model = generate(plan(load_model(str(Path(__file__).resolve().parents[1] / "examples" / "kws_like.json"))),
                     tmp_path, load_target("aarch64-dotprod"))
    weights = (tmp_path / f"{model.name}_weights.c").read_text()
    defined = set(re.findall(r"^const \w+ (\w+)\[", weights, flags=re.M))
    relaid = {name.removesuffix("_sdot_4x4") for name in defined if name.endswith("_sdot_4x4")}
    left_out = relaid - defined  # (the fully-connected layer's 12 rows: 4 are read from the original array)
    assert left_out == {f"{model.name}_c_conv2d{k}_w" for k in ("", "_1", "_2", "_3")}
    calls = (tmp_path / f"{model.name}.c").read_text()
    assert len(re.findall(r"_step\d+\([^;{]*\bNULL\b", calls)) == len(left_out)
