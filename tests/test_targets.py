"""Cross targets (targets/*.toml other than generic): each builds with its toolchain and runs the bit-exactness
checks under its emulator (QEMU user mode, or a bare-metal board with semihosting), with deterministic
instruction counts and code size. A target whose tools are missing here is skipped with the reason."""

import dataclasses
import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from qcodegen.cli import main
from qcodegen.codegen import generate, list_targets, load_target
from qcodegen.codegen.targets import Target
from qcodegen.compiler import plan
from qcodegen.frontends import load_model
from qcodegen.kernels import plan_kernels
from qcodegen.report import inspect_dict
from qcodegen.testing import Const, Var, c_vs_reference, step_schedule
from qcodegen.verify.check import random_inputs
from qcodegen.verify.runners import cannot_count, get_runner, unavailable

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ["kws_like", "mobilenet_like"]
CROSS = [t.name for t in list_targets() if t.runner != "host"]
I32 = (-(1 << 31), (1 << 31) - 1)


@pytest.fixture(params=CROSS)
def target(request) -> Target:
    tgt = load_target(request.param)
    reason = unavailable(tgt)
    if reason:
        pytest.skip(f"{tgt.name}: {reason}")
    return tgt


@pytest.fixture
def counting(target) -> Target:
    reason = cannot_count(target)
    if reason:
        pytest.skip(f"{target.name}: no instruction counts ({reason})")
    return target


def conv(op, x, w, bias, out, x_dtype="i8", acc="i32", **attrs):
    attrs = dict(dict(pad=[0, 0, 0, 0], stride=[1, 1], dilation=[1, 1], input_zp=0, weight_zp=0, acc_type=acc),
                 **attrs)
    return step_schedule(op, [Var(x, x_dtype), Const(np.asarray(w), "i8"), Const(np.asarray(bias), acc)],
                         [(out, acc)], **attrs)


# Single-primitive schedules that stress what differs between ISAs: 64-bit products and rounding shifts
# (rescale, MUL), int48 accumulators on 32-bit cores, signed shifts and index arithmetic, 16-bit tables.
CASES = {
    "rescale-i32-i8-double-round": lambda: step_schedule(
        "RESCALE", [Var((5, 3), "i32")], [((5, 3), "i8")], multiplier=[1 << 30, 7, (1 << 31) - 1],
        shift=[33, 62, 40], input_zp=0, output_zp=-5, scale32=True, rounding="double_round", per_channel=True),
    "conv-i8-pad-stride-zp": lambda: conv(
        "CONV2D", (1, 5, 6, 3), np.arange(-36, 36).reshape(4, 2, 3, 3) * 3, np.arange(4) * 100 - 150,
        (1, 3, 2, 4), pad=[1, 0, 1, 0], stride=[2, 2], dilation=[1, 2], input_zp=-128, pad_value=5),
    "dw-i16-i48": lambda: conv(
        "DEPTHWISE_CONV2D", (1, 7, 7, 3), np.arange(27).reshape(3, 3, 3, 1) - 13, [1 << 40], (1, 4, 4, 3),
        x_dtype="i16", acc="i48", pad=[1, 1, 2, 0], stride=[2, 2], weight_zp=-3),
    "mul-i32-shift33": lambda: step_schedule(
        "MUL", [Var((2, 5), "i32", *I32), Var((2, 5), "i32", *I32)], [((2, 5), "i32")], shift=33),
    "table-i16": lambda: step_schedule(
        "TABLE", [Var((4, 9), "i16"), Const(np.arange(513) * 37 - 9000, "i16")], [((4, 9), "i32")]),
    "avg-pool-i8-pad": lambda: step_schedule(
        "AVG_POOL2D", [Var((1, 5, 5, 3), "i8")], [((1, 3, 3, 3), "i8")], kernel=[3, 3], stride=[2, 2],
        pad=[1, 1, 1, 1], input_zp=-3, output_zp=4),
}


@pytest.mark.parametrize("case", list(CASES))
def test_primitive_bit_exact(target, case):
    sched = CASES[case]()
    result = c_vs_reference(sched, samples=2, target=target)
    assert result.bit_exact, f"{target.name} {case}: {result.mismatches} mismatches, {result.first_mismatch}"


@pytest.mark.parametrize("example", EXAMPLES)
def test_example_verify_json(target, example, capsys):
    code = main(["verify", str(ROOT / "examples" / f"{example}.json"), "-t", target.name, "--samples", "2",
                 "--json"])
    result = json.loads(capsys.readouterr().out)
    assert code == 0 and result["bit_exact"] is True and result["samples"] == 2 and result["mismatches"] == 0
    assert result["text_bytes"] > 0 and result["rodata_bytes"] > 0
    assert (result.get("instructions", 0) > 0) == (cannot_count(target) is None)


def _example_model(example: str, outdir: Path, target: Target):
    schedule = plan(load_model(ROOT / "examples" / f"{example}.json"))
    return schedule, generate(schedule, outdir, target, harness=True)


def test_instruction_count_deterministic_and_per_inference(counting, tmp_path):
    schedule, model = _example_model("kws_like", tmp_path, counting)
    batch = random_inputs(schedule, np.random.default_rng(1))
    counts = []
    for repeat in (1, 1, 3):
        runner = get_runner(counting, measure=True)
        runner.run(model, batch, repeat=repeat)
        counts.append(runner.measurements(model)["instructions"])
    assert counts[0] > 0 and counts == [counts[0]] * 3  # -n 3: three windows, the same count per inference


def test_count_includes_callees(counting, tmp_path):
    """With -fno-inline <name>_run only calls the step functions: the count covers the work done in them (no
    instruction of these targets does more than 64 MACs: VPDPBUSD on zmm, the widest)."""
    schedule, model = _example_model("kws_like", tmp_path, counting)
    runner = get_runner(counting, extra_cflags=("-fno-inline",), measure=True)
    runner.run(model, random_inputs(schedule, np.random.default_rng(2)))
    assert runner.measurements(model)["instructions"] > inspect_dict(schedule)["macs"] // 64


def test_harness_contract_under_emulation(target, tmp_path):
    """A wrong input size: message on stderr, exit status 2, nothing on stdout -- through the emulator."""
    schedule, model = _example_model("kws_like", tmp_path, target)
    runner = get_runner(target)
    exe = runner.executable(model)
    (tmp_path / "short.bin").write_bytes(b"\0" * 3)
    size = schedule.buffers[schedule.inputs[0]].size
    cmd = runner.command(list(target.emulator), exe, [str(tmp_path / "short.bin"), str(tmp_path / "out.bin")])
    proc = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120)
    assert proc.returncode == 2 and f"has 3 bytes, expected {size}" in proc.stderr and proc.stdout == ""


def test_makefile_builds(target, tmp_path):
    if not shutil.which("make"):
        pytest.skip("make is not installed")
    _example_model("mobilenet_like", tmp_path, target)
    proc = subprocess.run(["make", "-s", "-C", str(tmp_path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (tmp_path / "model").exists()


@pytest.mark.parametrize("level", ["-O0", "-Og", "-Os", "-O1"])
def test_debug_builds(target, level, tmp_path):
    """Other optimization levels of a firmware build (-Og, -Os, -O1: GCC's register allocation around the kernels'
    asm differs per level; -O0): the model compiles with the target's other flags, or (-O0, Cortex-M: the kernels'
    asm needs every core register) stops at the message naming the levels to use."""
    _, model = _example_model("mobilenet_like", tmp_path, target)
    flags = [f for f in target.cflags if not f.startswith("-O")] + [level]
    sources = [str(f) for f in model.sources]  # the model's and its runtime kernel files
    proc = subprocess.run(target.cc.split() + flags + ["-c", *sources], capture_output=True, text=True, cwd=tmp_path)
    if level == "-O0" and target.name.startswith("cortex-m"):
        assert proc.returncode != 0 and "compile the Cortex-M kernels with optimization" in proc.stderr
    else:
        assert proc.returncode == 0, proc.stderr[-2000:]


def test_template_override_falls_back_to_generic(tmp_path):
    """A target's own template folder overrides one kernel; everything else comes from generic/ (and the
    harness files from the target's folders), still bit-exact under the emulator."""
    tgt = load_target("cortex-m4" if "cortex-m4" in CROSS else CROSS[0])
    if unavailable(tgt):
        pytest.skip(f"{tgt.name}: {unavailable(tgt)}")
    override = tmp_path / "override"
    override.mkdir()
    generic = (ROOT / "templates" / "generic" / "rescale.c.j2").read_text()
    (override / "rescale.c.j2").write_text("/* rescale: test override */\n" + generic)
    tgt = dataclasses.replace(tgt, templates=(str(override), *tgt.templates))
    sched = CASES["rescale-i32-i8-double-round"]()
    assert c_vs_reference(sched, samples=1, target=tgt).bit_exact
    model = generate(sched, tmp_path / "out", tgt, harness=True)
    assert "/* rescale: test override */" in (model.outdir / f"{model.name}.c").read_text()


def test_unavailable_reasons():
    base = load_target("generic")
    missing = Target(name="t", description="", cc="nosuch-gcc", cflags=())
    assert unavailable(missing) == "missing nosuch-gcc"
    lacking = Target(name="t", description="", cc=base.cc, cflags=(), extra={"requires_cpu": ["nosuchflag"]})
    assert unavailable(lacking) == "this CPU lacks nosuchflag"
    assert cannot_count(base) == "no QEMU emulator for the target"


def test_targets_command_lists_every_target(capsys):
    assert main(["targets"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [ln.split()[0] for ln in lines] == ["generic"] + sorted(t.name for t in list_targets()
                                                                    if t.name != "generic")
    for line in lines:
        name = line.split()[0]
        reason = unavailable(load_target(name))
        assert ("unavailable: " + reason in line) if reason else "ready" in line


def test_template_dirs_exist():
    for tgt in list_targets():
        for d in tgt.template_dirs():
            assert d.is_dir(), f"{tgt.name}: template folder {d} does not exist"



def test_weight_layout_trades_flash_for_instructions(capsys):
    """cortex-m4: the default "compact" layout keeps the 1x1 weights int8 (rodata ~ the model's weights and the
    depthwise kernels' int16 weight pairs, the same in both layouts); "fast" adds their int16 SMLAD pairs (more
    rodata, fewer instructions); both bit-exact. An unknown layout: exit 2."""
    tgt = load_target("cortex-m4")
    reason = unavailable(tgt) or cannot_count(tgt)
    if reason:
        pytest.skip(f"cortex-m4: {reason}")
    model = str(ROOT / "examples" / "kws_like.json")
    schedule = plan(load_model(model))
    planes = sum(s.choice.arrays["w"].values.nbytes for s in plan_kernels(schedule, tgt, "kws").steps
                 if s.choice.form == "dw_rows")
    assert planes == 3 * 16 * 28  # kws_like's 3 depthwise steps of 16 channels, 7 words each
    weights = inspect_dict(schedule)["weights_bytes"] + planes
    measured = {}
    for layout in ("compact", "fast"):
        code = main(["verify", model, "-t", "cortex-m4", "--samples", "1", "--json", "--weight-layout", layout])
        measured[layout] = json.loads(capsys.readouterr().out)
        assert code == 0 and measured[layout]["bit_exact"] is True
    assert measured["compact"]["rodata_bytes"] < weights * 1.3 < measured["fast"]["rodata_bytes"]
    assert measured["fast"]["instructions"] < measured["compact"]["instructions"]
    with pytest.raises(SystemExit) as exc:
        main(["verify", model, "-t", "cortex-m4", "--weight-layout", "bogus"])
    assert exc.value.code == 2
