"""Streaming (stateful) TFLite models: SVDF's variable tensors and resource variables (VAR_HANDLE, READ_VARIABLE,
ASSIGN_VARIABLE, CALL_ONCE) become state the generated code owns (<name>_state_t, <name>_init). Every output of
every invocation of a sequence, and the final state, is bit-exact with TFLite Micro (one interpreter, its
state carried) and with the numpy reference; on the host, in the harness under qemu, and through the C API with
several streams of two models in one binary."""

import dataclasses
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from qcodegen.cli import main
from qcodegen.codegen import generate, load_target
from qcodegen.compiler import plan
from qcodegen.errors import UnsupportedError
from qcodegen.reference import initial_state, next_state, run_reference
from qcodegen.report import inspect_dict
from qcodegen.semantics.tflite import f32, quantize_multiplier_exponent
from qcodegen.semantics.tflm_fixedpoint import multiply_by_quantized_multiplier
from qcodegen.testing import SANITIZE_FLAGS, tflm_vs_c
from qcodegen.verify import get_runner, random_inputs, verify_schedule
from qcodegen.verify.runners import HarnessRunner, unavailable

pytest.importorskip("tflite_micro", reason="needs tflite-micro (pip install 'qcodegen[tflite]')")
from qcodegen.frontends.tflite import load_tflite  # noqa: E402
from qcodegen.verify.tflm_oracle import (  # noqa: E402
    OpSpec,
    SubgraphSpec,
    TensorSpec,
    TflmModel,
    build_model,
    verify_against_tflm,
)

# the shared data dir as tests/conftest.py defines it (QC_SHARED_DIR, default ../shared from the project root)
SHARED = Path(os.environ.get("QC_SHARED_DIR", Path(__file__).resolve().parent.parent.parent / "shared"))
KWS = SHARED / "testdata" / "tflite" / "models" / "keyword_scrambled_8bit.tflite"
needs_kws = pytest.mark.skipif(not KWS.is_file(), reason=f"shared test data not found at {KWS}")
STEPS = 24  # invocations per sequence


def streaming_model(seed: int = 0, reread: bool = False) -> bytes:
    """A sliding window over the last 4 frames (int8 resource variable) feeding a FULLY_CONNECTED, and a running
    int16 sum of its outputs (a second variable, also a model output); CALL_ONCE's init subgraph assigns both
    non-uniform initial values. reread: one more output computed from the window's old value after the new
    one (the next value cannot be computed in the state's memory)."""
    rng = np.random.default_rng(seed)

    def q8(shape, name, zp=3):
        return TensorSpec(shape, "int8", 0.05, zp, name=name)

    def q16(name):
        return TensorSpec((1, 3), "int16", 0.002, 0, name=name)

    x, old, kept, new = q8((1, 4), "x"), q8((1, 16), "window_old"), q8((1, 12), "kept"), q8((1, 16), "window_new")
    begin = TensorSpec((2,), "int32", data=np.array([0, 4]), name="begin")
    size = TensorSpec((2,), "int32", data=np.array([1, 12]), name="size")
    weights = TensorSpec((3, 16), "int8", 0.01, 0, data=rng.integers(-127, 128, (3, 16)), name="w")
    bias = TensorSpec((3,), "int32", 0.0005, 0, data=rng.integers(-2000, 2000, 3), name="b")
    y = TensorSpec((1, 3), "int8", 0.1, -5, name="y")
    e_old, y16, e_new = q16("energy_old"), q16("y16"), q16("energy")
    handles = [TensorSpec((), "resource", name=f"h_{v}") for v in ("window", "energy")]
    main = [OpSpec("CALL_ONCE", [], [], {"initSubgraphIndex": 1}),
            OpSpec("VAR_HANDLE", [], [handles[0]], {"sharedName": "window"}),
            OpSpec("READ_VARIABLE", [handles[0]], [old]),
            OpSpec("SLICE", [old, begin, size], [kept]),
            OpSpec("CONCATENATION", [kept, x], [new], {"axis": 1}),
            OpSpec("ASSIGN_VARIABLE", [handles[0], new], []),
            OpSpec("FULLY_CONNECTED", [new, weights, bias], [y]),
            OpSpec("VAR_HANDLE", [], [handles[1]], {"sharedName": "energy"}),
            OpSpec("READ_VARIABLE", [handles[1]], [e_old]),
            OpSpec("QUANTIZE", [y], [y16]),
            OpSpec("ADD", [e_old, y16], [e_new]),
            OpSpec("ASSIGN_VARIABLE", [handles[1], e_new], [])]
    outputs = [y, e_new]
    if reread:
        diff = q8((1, 16), "change")
        main.append(OpSpec("SUB", [new, old], [diff]))
        outputs.append(diff)
    init_handles = [TensorSpec((), "resource", name=f"init_{v}") for v in ("window", "energy")]
    init = SubgraphSpec([
        OpSpec("VAR_HANDLE", [], [init_handles[0]], {"sharedName": "window"}),
        OpSpec("ASSIGN_VARIABLE", [init_handles[0], TensorSpec((1, 16), "int8", 0.05, 3, name="window_init",
                                                               data=rng.integers(-128, 128, (1, 16)))], []),
        OpSpec("VAR_HANDLE", [], [init_handles[1]], {"sharedName": "energy"}),
        OpSpec("ASSIGN_VARIABLE", [init_handles[1], TensorSpec((1, 3), "int16", 0.002, 0, name="energy_init",
                                                               data=np.array([[100, -200, 300]]))], [])])
    return build_model(main, [x], outputs, [init])


def svdf_model(rng: np.random.Generator, batch: int, inputs: int, filters: int, memory: int, rank: int,
               state_type: str, bias: str = "random", scales: tuple[float, ...] | None = None,
               activation: int = 1) -> bytes:
    """One SVDF over an int8 input; bias "random", "zero" or "none"; scales (x, feature weights, time weights,
    state, output) random if None."""
    s_x, s_wf, s_wt, s_s, s_y = scales or [float(np.float32(10 ** rng.uniform(lo, hi))) for lo, hi in
                                           ((-2, -1), (-3, -2), (-3, -2), (-2, -0.5), (-2, -0.5))]
    units, lim = filters // rank, 127 if state_type == "int8" else 2000
    zp = int(rng.integers(-60, 60)) if state_type == "int8" else 0
    x = TensorSpec((batch, inputs), "int8", s_x, int(rng.integers(-20, 20)), name="x")
    wf = TensorSpec((filters, inputs), "int8", s_wf, 0, data=rng.integers(-127, 128, (filters, inputs)), name="wf")
    wt = TensorSpec((filters, memory), state_type, s_wt, 0, data=rng.integers(-lim, lim + 1, (filters, memory)),
                    name="wt")
    values = rng.integers(-3000, 3000, units) * (bias == "random")
    b = TensorSpec((units,), "int32", s_s * s_wt, 0, data=values, name="bias") if bias != "none" else None
    state = TensorSpec((batch, filters * memory), state_type, s_s, zp, name="state", variable=True)
    y = TensorSpec((batch, units), "int8", s_y, int(rng.integers(-20, 20)), name="y")
    op = OpSpec("SVDF", [x, wf, wt, b, state], [y], {"rank": rank, "fusedActivationFunction": activation})
    return build_model([op], [x], [y])


def frames(schedule, seed: int = 0, steps: int = STEPS) -> list:
    rng = np.random.default_rng(seed)
    return [random_inputs(schedule, rng) for _ in range(steps)]


def reference_sequence(schedule, sequence: list) -> tuple[list, dict]:
    """The numpy reference's outputs per invocation and final state."""
    state, outputs = initial_state(schedule), []
    for frame in sequence:
        values = run_reference(schedule, frame, state)
        state = next_state(schedule, values)
        outputs.append([values[n] for n in schedule.outputs])
    return outputs, state


@needs_kws
def test_keyword_model_bit_exact_with_tflm_over_a_sequence(tmp_path):
    """7 SVDF layers (int8 state with zero points), FULLY_CONNECTED, int8 -> int16 SOFTMAX, int16 -> int32
    QUANTIZE; TFLM's variable tensors are compared after the last invocation too."""
    schedule = tflm_vs_c(tmp_path, KWS.read_bytes(), frames(plan(load_tflite(KWS)), seed=1))
    assert len(schedule.state) == 7 and all(v.source.startswith("variable tensor") for v in schedule.state)
    report = inspect_dict(schedule)
    assert report["state_bytes"] == 4 * 512 + 3 * 1024 and all(v["in_place"] for v in report["state"])


def test_streaming_model_bit_exact_and_state_checked(tmp_path):
    path = tmp_path / "stream.tflite"
    path.write_bytes(streaming_model())
    schedule = tflm_vs_c(tmp_path, path.read_bytes(), frames(plan(load_tflite(path))))
    states = {v["source"]: v for v in inspect_dict(schedule)["state"]}
    assert states["resource variable 'window'"]["in_place"]  # CONCAT writes the state's memory
    assert not states["resource variable 'energy'"]["in_place"]  # also a model output: copied at the end
    # the init subgraph's values, then a state the C does not start from: the final-state comparison fails
    window = schedule.state[0]
    assert window.source == "resource variable 'window'" and len(set(window.initial.reshape(-1).tolist())) > 1
    model = generate(schedule, tmp_path / "c2", load_target("generic"))
    window.initial = window.initial + np.int8(1)
    result = verify_schedule(schedule, model, get_runner(load_target("generic")), inputs=frames(schedule))
    assert not result.bit_exact and result.mismatches > 0


def test_state_read_after_its_next_value_is_copied_at_the_end(tmp_path):
    schedule = tflm_vs_c(tmp_path, streaming_model(reread=True), frames(plan(load_tflite(
        _write(tmp_path / "m.tflite", streaming_model(reread=True)))), seed=2))
    assert not any(v["in_place"] for v in inspect_dict(schedule)["state"])


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("kind", ["int16-rank2", "batch2-rank3", "memory1"])
def test_svdf_variants_bit_exact_with_tflm(tmp_path, kind):
    rng = np.random.default_rng(len(kind))
    if kind == "int16-rank2":
        model = svdf_model(rng, 1, 11, 6, 5, 2, "int16")
    elif kind == "batch2-rank3":
        model = svdf_model(rng, 2, 7, 9, 4, 3, "int8", activation=0)
    else:
        model = svdf_model(rng, 1, 5, 4, 1, 1, "int8", activation=3)
    tflm_vs_c(tmp_path, model, frames(plan(load_tflite(_write(tmp_path / "svdf.tflite", model)))))


def test_svdf_multiplier_is_the_double_product(tmp_path):
    """Scales (found by a search) where the feature multiplier s_x * s_wf / s_state differs between float32
    products (the TFLM source) and double products, and the difference reaches an output: every int8 input
    value through a 1-filter SVDF whose output is its state; TFLM agrees with the double product."""
    s_x, s_wf, s_state, w = 0.34343796968460083, 0.008569720201194286, 0.3340550363063812, 121
    x = TensorSpec((1, 1), "int8", s_x, 0, name="x")
    wf = TensorSpec((1, 1), "int8", s_wf, 0, data=np.array([[w]]), name="wf")
    wt = TensorSpec((1, 1), "int8", 1 / 64, 0, data=np.array([[1]]), name="wt")
    bias = TensorSpec((1,), "int32", s_state / 64, 0, data=np.array([0]), name="bias")
    state = TensorSpec((1, 1), "int8", s_state, 0, name="state", variable=True)
    y = TensorSpec((1, 1), "int8", s_state / 64, 0, name="y")  # scale_2 = 1
    model = build_model([OpSpec("SVDF", [x, wf, wt, bias, state], [y], {"rank": 1})], [x], [y])
    every = [[np.array([[v]], np.int8)] for v in range(-128, 128)]
    tflm_vs_c(tmp_path, model, every)
    d = w * np.arange(-128, 128)
    as_float = quantize_multiplier_exponent(float(f32(f32(f32(s_x) * f32(s_wf)) / f32(s_state))))
    as_double = quantize_multiplier_exponent(s_x * s_wf / s_state)
    assert np.any(multiply_by_quantized_multiplier(d, *as_float) != multiply_by_quantized_multiplier(d, *as_double))


def test_svdf_without_bias_is_the_zero_bias(tmp_path):
    """TFLM dereferences a missing SVDF bias (PrepareSvdf); qcodegen adds nothing: the C of the bias-less model
    gives the outputs TFLM gives for the same model with a zero bias."""
    zero, none = (svdf_model(np.random.default_rng(3), 1, 6, 4, 3, 1, "int8", bias=b) for b in ("zero", "none"))
    schedule = plan(load_tflite(_write(tmp_path / "nobias.tflite", none)))
    sequence = frames(schedule)
    got, _ = get_runner(load_target("generic")).run_sequence(generate(schedule, tmp_path / "c",
                                                                      load_target("generic")), sequence)
    tflm = TflmModel(zero)
    tflm.interpreter.reset()
    for frame, outputs in zip(sequence, got, strict=True):
        assert np.array_equal(tflm.invoke(frame, 1)[0], outputs[0])


def test_front_end_refusals(tmp_path):
    x = TensorSpec((1, 4), "int8", 0.05, 0, name="x")
    state = TensorSpec((1, 4), "int8", 0.05, 0, name="s", variable=True)
    y = TensorSpec((1, 4), "int8", 0.05, 0, name="y")
    add = build_model([OpSpec("ADD", [x, state], [y])], [x], [y])
    handle, value = TensorSpec((), "resource", name="h"), TensorSpec((1, 4), "int8", 0.1, 0, name="v")
    mixed = build_model([OpSpec("VAR_HANDLE", [], [handle], {"sharedName": "v"}),
                         OpSpec("READ_VARIABLE", [handle], [value]),
                         OpSpec("ASSIGN_VARIABLE", [handle, x], []),
                         OpSpec("ADD", [value, x], [y])], [x], [y])
    refused = ((add, r"tfl\.add.*variable tensor 's'.*SVDF"), (mixed, r"another shape, type or quantization"))
    for data, message in refused:
        with pytest.raises(UnsupportedError, match=message) as exc:
            load_tflite(_write(tmp_path / "m.tflite", data))
        assert "\n" not in str(exc.value)


def _planned(tmp_path: Path, name: str, data: bytes):
    return plan(load_tflite(_write(tmp_path / f"{name}.tflite", data)))


@pytest.mark.parametrize("which", ["keyword", "streaming"])
def test_harness_sequence_on_cortex_m4(tmp_path, which):
    """The bare-metal harness (qemu-system-arm, semihosting) runs the sequence from files of STEPS frames and
    writes the final state (-S); TFLM and the numpy reference agree with every output and the state."""
    target = load_target("cortex-m4")
    if unavailable(target):
        pytest.skip(f"cortex-m4: {unavailable(target)}")
    if which == "keyword" and not KWS.is_file():
        pytest.skip(f"shared test data not found at {KWS}")
    path = KWS if which == "keyword" else _write(tmp_path / "stream.tflite", streaming_model())
    schedule = plan(load_tflite(path))
    model = generate(schedule, tmp_path / "c", target, harness=True)
    sequence, runner = frames(schedule, seed=3), get_runner(target)
    for result in (verify_against_tflm(path, schedule, model, runner, inputs=sequence),
                   verify_schedule(schedule, model, runner, inputs=sequence)):
        assert result.bit_exact and result.samples == STEPS, result.first_mismatch


@pytest.mark.skipif(shutil.which("clang") is None, reason="clang is not installed")
def test_harness_repeats_the_sequence_on_one_state_under_sanitizers(tmp_path):
    """-n 2: the sequence runs twice without a reset (the outputs of the second pass are written); clang with
    -Werror, ASan and UBSan."""
    schedule = _planned(tmp_path, "stream", streaming_model())
    target = dataclasses.replace(load_target("generic"), cc="clang")
    model = generate(schedule, tmp_path / "c", target, harness=True)
    sequence = frames(schedule, seed=4, steps=8)
    got, raw = HarnessRunner(target, SANITIZE_FLAGS).run_sequence(model, sequence, repeat=2)
    want, state = reference_sequence(schedule, sequence + sequence)
    assert all(np.array_equal(g, w) for gs, ws in zip(got, want[8:], strict=True) for g, w in zip(gs, ws, strict=True))
    assert all(np.array_equal(model.state.decode(raw)[k], v) for k, v in state.items())


def test_run_takes_a_sequence(tmp_path, capsys):
    """`qcodegen run` on a streaming model: inputs with a leading sequence axis, outputs stacked the same way."""
    path = _write(tmp_path / "stream.tflite", streaming_model())
    schedule = plan(load_tflite(path))
    sequence = frames(schedule, seed=5, steps=6)
    np.save(tmp_path / "x.npy", np.stack([f[0] for f in sequence]))
    assert main(["run", str(path), "-i", str(tmp_path / "x.npy"), "-o", str(tmp_path / "y.npy"),
                 "-o", str(tmp_path / "e.npy")]) == 0
    want, _ = reference_sequence(schedule, sequence)
    for j, name in enumerate(("y", "e")):
        assert np.array_equal(np.load(tmp_path / f"{name}.npy"), np.stack([w[j] for w in want]))


DRIVER = """#include <stdio.h>
#include "stream.h"
#include "svdf.h"
#if defined(__GNUC__) || defined(__clang__)
#define ALIGN16 __attribute__((aligned(16)))
#else
#define ALIGN16
#endif
#define T %(steps)d
static const int8_t xa[T][4] = {%(xa)s};
static const int8_t xb[T][4] = {%(xb)s};
static const int8_t xc[T][5] = {%(xc)s};
static unsigned char arena[STREAM_ARENA_SIZE > SVDF_ARENA_SIZE ? STREAM_ARENA_SIZE : SVDF_ARENA_SIZE] ALIGN16;

static void show(const char *label, const int8_t *y, int n, const int16_t *e) {
  int i;
  printf("%%s", label);
  for (i = 0; i < n; ++i) printf(" %%d", y[i]);
  for (i = 0; e && i < 3; ++i) printf(" %%d", e[i]);
  printf("\\n");
}

int main(void) {
  stream_state_t a, b;
  svdf_state_t c;
  int8_t y[3], z[4];
  int16_t e[3];
  int t, rc = 0;
  stream_init(&a);
  stream_init(&b);
  svdf_init(&c);
  for (t = 0; t < T; ++t) {
    rc |= stream_run(xa[t], y, e, &a, arena);
    show("a", y, 3, e);
    rc |= stream_run(xb[t], y, e, &b, arena);
    show("b", y, 3, e);
    rc |= svdf_run(xc[t], z, &c, arena);
    show("c", z, 4, NULL);
  }
  stream_init(&a); /* a new stream on the same state */
  for (t = 0; t < T; ++t) {
    rc |= stream_run(xa[t], y, e, &a, arena);
    show("a", y, 3, e);
  }
  return rc | (sizeof(stream_state_t) != STREAM_STATE_SIZE) | (sizeof(svdf_state_t) != SVDF_STATE_SIZE);
}
"""


@pytest.mark.parametrize("cc", [cc for cc in ("gcc", "clang") if shutil.which(cc)])
def test_c_api_streams_of_two_models_in_one_binary(tmp_path, cc):
    """Two streams of one model and a stream of another in one binary (no globals, prefixed symbols), states on
    the stack, one shared arena, -Wall -Wextra -Werror -pedantic; <name>_init restarts a stream."""
    stream = _planned(tmp_path, "stream", streaming_model())
    svdf = _planned(tmp_path, "svdf", svdf_model(np.random.default_rng(6), 1, 5, 8, 3, 2, "int8"))
    src = tmp_path / "c"
    for schedule, name in ((stream, "stream"), (svdf, "svdf")):
        generate(schedule, src, load_target("generic"), name=name)
    xa, xb, xc = frames(stream, 7), frames(stream, 8), frames(svdf, 9)

    def literal(seq):
        return ", ".join("{" + ", ".join(str(int(v)) for v in f[0].reshape(-1)) + "}" for f in seq)

    (src / "driver.c").write_text(DRIVER % dict(steps=STEPS, xa=literal(xa), xb=literal(xb), xc=literal(xc)))
    exe = tmp_path / "driver"
    subprocess.run([cc, "-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-O1", *map(str, src.glob("*.c")),
                    "-o", str(exe)], check=True, capture_output=True)
    lines = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.splitlines()
    got = {label: [] for label in "abc"}
    for line in lines:
        label, *values = line.split()
        got[label].append([int(v) for v in values])
    for label, schedule, seq in (("a", stream, xa + xa), ("b", stream, xb), ("c", svdf, xc)):
        want, _ = reference_sequence(schedule, seq[:STEPS])
        expected = [np.concatenate([o.reshape(-1) for o in w]).tolist() for w in want]
        assert got[label] == expected * (2 if label == "a" else 1)
