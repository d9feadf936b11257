"""Memory below the layer-wise bound (docs/semantics.md §10): views and in-place writes over any dying input in the
memory planner (qcodegen/plan/memory.py), patch-based execution (qcodegen/plan/patches.py) and the memory goal.

Patch-based execution changes which steps run, never what they compute: every configuration's reference outputs
equal the layer-wise schedule's on random inputs, and the generated C equals the reference of the transformed
schedule."""

import json
import os
from pathlib import Path

import numpy as np
import pytest

from qcodegen import primitives
from qcodegen.cli import main
from qcodegen.codegen import load_target
from qcodegen.compiler import plan
from qcodegen.errors import QcError
from qcodegen.frontends.builder import GraphBuilder
from qcodegen.ir.dtypes import dtype
from qcodegen.ir.schedule import CONST, INPUT, OUTPUT, TEMP, Buffer, MemoryGoal, Schedule, Step
from qcodegen.plan.fuse import execution_order
from qcodegen.plan.patches import chains, streamable
from qcodegen.reference import run_reference
from qcodegen.testing import assert_bit_exact, verify_planned
from qcodegen.verify.check import random_inputs
from qcodegen.verify.runners import unavailable


def _scale(src: str, dst: str, shift: int = 30) -> Step:
    return Step("RESCALE", [src], [dst], dict(multiplier=[1 << 30], shift=[shift], input_zp=0, output_zp=0,
                                              scale32=True, rounding="single_round"))


def _rows(src: str, dst: str, start: int, rows: int) -> Step:
    return Step("SLICE", [src], [dst], dict(start=[0, start, 0, 0], size=[1, rows, 4, 8]))


def views_schedule() -> Schedule:
    """x -> two row halves (SLICE of an input: copies) -> i32 -> CONCAT (views) -> ADD with a buffer still needed
    later (written over its other, dying input) -> a SLICE of the sum (a view) -> outputs."""
    s = Schedule("views")
    s.add_buffer(Buffer("x", (1, 4, 4, 8), dtype("i8"), INPUT))
    s.inputs = ["x"]
    for name, rows, dt in (("top", 2, "i8"), ("bot", 2, "i8"), ("a", 2, "i32"), ("b", 2, "i32"), ("c", 4, "i32"),
                           ("d", 4, "i32"), ("e", 4, "i32"), ("f", 2, "i32"), ("g", 4, "i32")):
        s.add_buffer(Buffer(name, (1, rows, 4, 8), dtype(dt), TEMP))
    for name, rows in (("y1", 2), ("y2", 4)):
        s.add_buffer(Buffer(name, (1, rows, 4, 8), dtype("i8"), OUTPUT))
    s.outputs = ["y1", "y2"]
    s.steps = [_rows("x", "top", 0, 2), _rows("x", "bot", 2, 2), _scale("top", "a"), _scale("bot", "b"),
               Step("CONCAT", ["a", "b"], ["c"], {"axis": 1}), _scale("x", "d"), Step("ADD", ["d", "c"], ["e"]),
               _rows("e", "f", 1, 2), _scale("f", "y1"), Step("ADD", ["d", "d"], ["g"]), _scale("g", "y2")]
    return s


def test_concat_inputs_and_slices_are_views_and_add_writes_over_its_dying_input():
    s = views_schedule()
    assert_bit_exact(s, samples=3)
    off = {n: b.offset for n, b in s.buffers.items() if b.kind == TEMP}
    row = 4 * 8 * 4  # bytes of one i32 row
    assert off["a"] == off["c"] and off["b"] == off["c"] + 2 * row  # producers write into the CONCAT output
    assert off["e"] == off["c"]  # ADD over input 1 (c dies there; d is read again later)
    assert off["f"] == off["e"] + row  # the SLICE reads the sum where it is
    for step in s.steps:
        if step.op in ("CONCAT",) or step.inputs == ["e"]:
            assert primitives.get(step.op).copies(s.io(step)) == []  # nothing left to copy
    assert s.arena_lower_bound <= s.arena_size


def test_a_view_is_not_kept_over_bytes_an_in_place_step_rewrites():
    # s views rows of x2; y = RESCALE(x2) could write over x2 (x2 dies there), but s is read after y
    s = Schedule("clash")
    s.add_buffer(Buffer("x", (1, 4, 4, 8), dtype("i8"), INPUT))
    s.inputs = ["x"]
    for name, rows in (("x2", 4), ("v", 2), ("w", 4)):
        s.add_buffer(Buffer(name, (1, rows, 4, 8), dtype("i8"), TEMP))
    for name, rows in (("y", 2), ("z", 4)):
        s.add_buffer(Buffer(name, (1, rows, 4, 8), dtype("i8"), OUTPUT))
    s.outputs = ["y", "z"]
    s.steps = [_scale("x", "x2"), _rows("x2", "v", 2, 2), _scale("x2", "w", 31), _scale("v", "y"),
               _scale("w", "z")]
    assert_bit_exact(s, samples=3)
    off = {n: b.offset for n, b in s.buffers.items() if b.kind == TEMP}
    view = off["v"] == off["x2"] + 2 * 4 * 8
    assert not (view and off["w"] == off["x2"])  # not both: w would overwrite what v reads


def chain_graph(seed: int = 0) -> GraphBuilder:
    """A chain of window steps over rows (strides 2, SAME padding on even and odd sizes, a dilated convolution,
    pools) ending in a global average pool."""
    rng = np.random.default_rng(seed)

    def w(*shape: int) -> np.ndarray:
        return rng.integers(-127, 128, shape)

    b = GraphBuilder("chain", rescale_rounding="double_round")
    y = b.input("x", (1, 20, 6, 3), "i8", scale=0.05, zero_point=-3)
    y = b.conv2d(y, w(8, 3, 3, 3), 0.02, 0.15, -5, rng.integers(-600, 600, 8), stride=2, padding="SAME",
                 activation="relu")
    y = b.depthwise_conv2d(y, w(1, 3, 3, 8), 0.02, 0.1, 3, rng.integers(-600, 600, 8), padding="SAME",
                           activation="relu6")
    y = b.conv2d(y, w(12, 1, 1, 8), 0.01, 0.1, 0, rng.integers(-600, 600, 12))
    y = b.max_pool2d(y, 2, 1, padding="SAME")
    y = b.depthwise_conv2d(y, w(1, 3, 3, 12), 0.02, 0.1, -2, None, stride=2, padding="SAME")
    y = b.conv2d(y, w(8, 3, 3, 12), 0.01, 0.1, 1, rng.integers(-600, 600, 8), dilation=2, padding="SAME")
    y = b.avg_pool2d(y, 3, 1, padding="SAME")
    b.output(b.avg_pool2d(y, (5, 2)))
    return b


def test_every_patch_configuration_computes_what_the_layer_wise_schedule_computes():
    graph = chain_graph()
    layer_wise = plan(graph.build(), memory=MemoryGoal("speed"))
    assert layer_wise.patching is None and layer_wise.arena_lower_bound == layer_wise.layer_bound
    rng = np.random.default_rng(1)
    batches = [random_inputs(layer_wise, rng) for _ in range(3)]
    want = [run_reference(layer_wise, batch)[layer_wise.outputs[0]] for batch in batches]
    chain = max(chains(plan(graph.build(), memory=MemoryGoal("speed"))), key=len)
    tried = 0
    for steps in (n for n in range(1, len(chain) + 1) if streamable(chain, n)):
        for rows in (1, 3):
            patched = plan(graph.build(), memory=MemoryGoal(stage=(steps, rows)))
            if patched.patching is None or patched.patching.bands < 2:
                continue
            tried += 1
            assert patched.patching.recomputed_macs == 0
            for batch, expected in zip(batches, want, strict=True):
                np.testing.assert_array_equal(run_reference(patched, batch)[patched.outputs[0]], expected)
    assert tried >= 12


def test_patched_c_is_bit_exact_and_below_the_layer_wise_bound():
    patched = plan(chain_graph().build(), memory=MemoryGoal("min"))
    assert patched.patching is not None and patched.arena_size < patched.layer_bound
    result = verify_planned(patched, samples=3)
    assert result.bit_exact, result.first_mismatch


def test_the_global_pool_sums_band_by_band():
    graph = chain_graph()
    whole = len(max(chains(plan(graph.build(), memory=MemoryGoal("speed"))), key=len))
    patched = plan(graph.build(), memory=MemoryGoal(stage=(whole, 2)))
    ops = [s.op for _, s in execution_order(patched)]
    assert "AVG_POOL2D" not in ops[-2:]  # the pool's sum is the band sums, its scaling one RESCALE
    ones = [b for b in patched.buffers.values() if b.kind == CONST and b.name.startswith("pool_ones")]
    assert ones and all((b.data == 1).all() for b in ones)
    result = verify_planned(patched, samples=2)
    assert result.bit_exact, result.first_mismatch


@pytest.mark.skipif(bool(unavailable(load_target("cortex-m4"))), reason="needs the Cortex-M4 toolchain and QEMU")
def test_patched_c_is_bit_exact_on_cortex_m4():
    patched = plan(chain_graph().build(), memory=MemoryGoal(stage=(6, 1)))
    result = verify_planned(patched, samples=2, target="cortex-m4")
    assert result.bit_exact, result.first_mismatch


def test_memory_goals():
    graph = chain_graph()
    speed = plan(graph.build(), memory=MemoryGoal("speed"))
    smallest = plan(graph.build(), memory=MemoryGoal("min"))
    assert smallest.arena_size < speed.arena_size == plan(graph.build(), memory=MemoryGoal("speed")).arena_size
    limit = (smallest.arena_size + speed.arena_size) // 2
    fitted = plan(graph.build(), memory=MemoryGoal(arena_limit=limit))
    assert fitted.arena_size <= limit
    roomy = plan(graph.build(), memory=MemoryGoal(arena_limit=speed.arena_size))
    assert roomy.patching is None  # the layer-wise plan fits: nothing extra to pay
    with pytest.raises(QcError, match="no plan fits an arena of 16 B"):
        plan(graph.build(), memory=MemoryGoal(arena_limit=16))
    pool_only = GraphBuilder("pool")
    pool_only.output(pool_only.avg_pool2d(pool_only.input("x", (1, 6, 4, 8), "i8", scale=0.1), (6, 4)))
    assert plan(pool_only.build(), memory=MemoryGoal("min")).patching is None  # a global pool alone: one band


def test_inspect_reports_both_bounds_and_the_cli_takes_the_goal(tmp_path, capsys):
    path = tmp_path / "chain.json"
    chain_graph().to_json(path)
    assert main(["inspect", str(path), "--memory", "min", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["memory_goal"] == {"policy": "min", "arena_limit": None}
    assert report["arena_lower_bound_bytes"] < report["arena_layer_bound_bytes"]
    assert report["arena_bytes"] >= report["arena_lower_bound_bytes"]
    assert report["patching"]["bands"] >= 2 and report["recomputed_macs"] == 0
    assert main(["inspect", str(path), "--memory", "speed"]) == 0
    assert "layer-wise bound" in capsys.readouterr().out
    assert main(["inspect", str(path), "--arena-limit", "16"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("qcodegen: error: no plan fits an arena of 16 B") and err.count("\n") == 1


def test_the_search_cuts_stages_into_at_most_the_step_limit(monkeypatch):
    """Planning time grows with a patched stage's layers x bands: the search skips stages and band heights above
    MAX_PATCH_STEPS (a damaged model with a huge image would otherwise take minutes)."""
    from qcodegen.frontends import load_model
    from qcodegen.plan import patches

    shared = Path(os.environ.get("QC_SHARED_DIR", Path(__file__).resolve().parents[1].parent / "shared"))
    path = shared / "testdata" / "tflite" / "models" / "person_detect.tflite"
    if not path.exists():
        pytest.skip(f"the shared models are not at {shared} (QC_SHARED_DIR)")
    graph = load_model(path)
    unlimited = plan(graph, memory=MemoryGoal("min")).patching
    assert unlimited is not None and len(unlimited.sources) * unlimited.bands > 50
    monkeypatch.setattr(patches, "MAX_PATCH_STEPS", 50)
    limited = plan(load_model(path), memory=MemoryGoal("min")).patching
    assert limited is None or len(limited.sources) * limited.bands <= 50
