"""The TOSA conformance suite of tosa-tools with qcodegen as the system under test (qcodegen.conformance.tosa_sut).

A seeded, small-dimension subset of PRO-INT and the extensions EXT-INT16, EXT-INT4, EXT-DOUBLEROUND and
EXT-INEXACTROUND is generated at test time with tosa_verif_build_tests (dimensions 1..4, one random permutation,
positive and negative tests) and a test-selection config derived from the official CTS
config (conformance/cts-config_v1.0.json): the convolutions, pools, PAD and RESCALE get one test for each
combination of the official "permutes" parameters (data types, ranks, output types, rounding modes, ...), every
other operator all its tests, and each operator one test per ERROR_IF. The generated suite is
cached in the qcodegen cache directory, keyed by the generator command. tosa_verif_run_tests then runs the reference
model and qcodegen on every test; all must pass, and every positive qcodegen result must equal the reference
model's bit for bit. The SUT's classification (TOSA_ERROR / TOSA_UNPREDICTABLE / OTHER_ERROR) is tested directly.
"""

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path
from xml.etree import ElementTree

import numpy as np
import pytest

pytest.importorskip("tosa_reference_model", reason="needs tosa-tools (pip install '.[oracles]')")
pytest.importorskip("runner.tosa_test_runner", reason="needs tosa-tools (pip install '.[oracles]')")
if shutil.which("tosa_verif_build_tests") is None or shutil.which("tosa_verif_run_tests") is None:
    pytest.skip("tosa-tools' tosa_verif_build_tests / tosa_verif_run_tests are not on PATH", allow_module_level=True)

import conformance  # noqa: E402
import tosa_reference_model  # noqa: E402
import tosa_serializer as ts  # noqa: E402

from qcodegen.conformance.tosa_sut import REFERENCE, SUT, Options, Outcome, collect, run_test, summary  # noqa: E402
from qcodegen.verify.build import cache_dir  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
EXTENSIONS = ["tosa-ext-int16", "tosa-ext-int4", "tosa-ext-doubleround", "tosa-ext-inexactround"]
GENERATE = ["--seed", "42", "--profile", "tosa-pro-int", "--extension", *EXTENSIONS, "--tensor-dim-range", "1,4",
            "--num-rand-permutations", "1", "--test-type", "both",
            "--target-dtype", "bool", "int4", "int8", "int16", "int32"]
# TOSA operators (as desc.json names them) the subset must contain, each with at least one positive test
OPERATORS = """abs add add_shape argmax arithmetic_right_shift assert_equal_shape avg_pool2d avg_pool2d_adaptive
bitwise_and bitwise_not bitwise_or bitwise_xor cast clamp clz concat concat_shape const conv2d conv3d
depthwise_conv2d dim div_ceil_shape div_floor_shape equal exp2_shape gather greater greater_equal identity intdiv
log2_ceil_shape log2_floor_shape logical_and logical_left_shift logical_not logical_or logical_right_shift
logical_xor matmul matmul_t max_pool2d max_pool2d_adaptive max_shape maximum min_shape minimum mod_shape mul
mul_shape negate pad reduce_all reduce_any reduce_max reduce_min reduce_sum rescale reshape reshape_block_scaled
resize reverse row_gather row_gather_block_scaled scatter select slice slice_shape sub sub_shape table tile
transpose transpose_conv2d""".split()


# generated positive tests that are invalid: the reference model rejects them too (TOSA_ERROR), as does qcodegen
INVALID = {"assert_equal_shape_1x2_b_bcast1"}  # its RESHAPE shape operand [2, 2] does not fit the [1, 2] input

# operators with many parameter combinations: one test per combination of the official "permutes" parameters;
# every other operator keeps all its (small-dimension) tests
SAMPLED = {"conv2d", "conv3d", "depthwise_conv2d", "transpose_conv2d", "avg_pool2d", "avg_pool2d_adaptive",
           "max_pool2d", "max_pool2d_adaptive", "pad", "rescale"}


def selection_config() -> dict:
    """A test selection per operator, from the official CTS config (its PRO-INT or default criteria)."""
    official = json.loads((Path(next(iter(conformance.__path__))) / "cts-config_v1.0.json").read_text())
    config = {}
    for op, entry in official.items():
        criteria = entry.get("selection", {}) if isinstance(entry, dict) else {}
        chosen = criteria.get("tosa-pro-int") or criteria.get("default") or {}
        keep = {k: v for k, v in chosen.items() if k in ("permutes", "full_params", "specifics", "groups")}
        config[op] = {"selection": {"default": dict(keep, maximum=1) if op in SAMPLED else {"all": True}}}
    return config


def _generate(out: Path, config: Path) -> None:
    lib = Path(tosa_reference_model.__file__).parent / "libtosa_reference_generate_lib.so"
    subprocess.run(["tosa_verif_build_tests", "-o", str(out), *GENERATE, "--test-selection-config", str(config),
                    "--generate-lib-path", str(lib)], check=True, capture_output=True, text=True)


def cached_suite() -> Path:
    """The generated subset, cached under a key of the generator command, selection config and tosa-tools."""
    config = json.dumps(selection_config(), sort_keys=True)
    key = hashlib.sha256("\0".join([*GENERATE, config, version("tosa-tools")]).encode()).hexdigest()[:16]
    root = cache_dir() / "tosa-cts"
    root.mkdir(parents=True, exist_ok=True)
    suite = root / key
    with open(root / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one generator at a time (pytest-xdist workers)
        if not suite.is_dir():
            work = root / f"{key}.tmp{os.getpid()}"
            shutil.rmtree(work, ignore_errors=True)
            work.mkdir()
            (work / "selection.json").write_text(config)
            _generate(work / "tests", work / "selection.json")
            work.rename(suite)
    return suite / "tests"


def run_suite(work: Path) -> Path:
    """The subset run by tosa_verif_run_tests with the reference model and qcodegen; the xunit file."""
    tests = work / "tests"
    shutil.copytree(cached_suite(), tests)  # the runner writes its results into the test folders
    xunit = work / "result.xml"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run(["tosa_verif_run_tests", "-r", "-t", str(tests), "-j", "2", "--sut-module", SUT, REFERENCE,
                           "--xunit-file", str(xunit)], env=env, capture_output=True, text=True)
    assert proc.returncode == 0 and xunit.is_file(), proc.stdout[-2000:] + proc.stderr[-2000:]
    return xunit


def test_conformance_subset(tmp_path):
    """One test (one run of the suite, also under pytest-xdist): the reference model passes every valid test;
    qcodegen passes every positive and negative test, its results equal the reference model's; every operator and
    extension is covered."""
    xunit = run_suite(tmp_path)
    cases = [c for c in ElementTree.parse(xunit).iter("testcase") if c.get("classname") == REFERENCE]
    failed = {Path(c.get("name", "")).name for c in cases if c.find("failure") is not None}
    assert cases and failed <= INVALID, f"the reference model fails {len(failed)} tests: {sorted(failed)[:5]}"

    outcomes = [o for o in collect(xunit) if o.test.name not in INVALID]
    assert outcomes and all(o.passed for o in outcomes), summary(outcomes)
    positive = {o.operator for o in outcomes if o.positive}
    assert not set(OPERATORS) - positive, f"no positive test for {sorted(set(OPERATORS) - positive)}"
    assert len({o.operator for o in outcomes if not o.positive}) >= 60
    casts = {tuple(o.test.name.split("_")[-2:]) for o in outcomes if o.operator == "cast" and o.positive}
    assert len(casts) == 12  # every CAST pair among bool, i8, i16, i32 (cast_<shape>_<in>_out<out>)
    for ext in EXTENSIONS:
        assert any(ext in o.extensions for o in outcomes if o.positive), f"no test needs {ext}"

    proc = subprocess.run([sys.executable, "-m", "qcodegen.conformance.tosa_sut", str(xunit)], cwd=ROOT,
                          capture_output=True, text=True)
    assert "positive: " in proc.stdout and "negative: " in proc.stdout and "per operator" in proc.stdout


# ---- the SUT's graph results, one test folder each ---------------------------------------------------------------

def _test_folder(path: Path, graph: bytes, inputs: dict[str, np.ndarray], outputs: list[str],
                 expected_failure: bool = False) -> tuple[Path, dict]:
    path.mkdir()
    (path / "test.tosa").write_bytes(graph)
    for name, arr in inputs.items():
        np.save(path / f"{name}.npy", arr)
    desc = {"tosa_file": "test.tosa", "ifm_name": list(inputs), "ifm_file": [f"{n}.npy" for n in inputs],
            "ofm_name": outputs, "ofm_file": [f"out-{n}.npy" for n in outputs], "expected_failure": expected_failure}
    return path, desc


def _add_graph(shape: list[int], out_shape: list[int]) -> bytes:
    ser = ts.TosaSerializer("", ts.ConstMode.EMBED, 1, 0, 0, False)
    for name in ("a", "b"):
        ser.addInputTensor(ts.TosaSerializerTensor(name, shape, ts.DType.INT32))
    out = ser.addOutput(out_shape, ts.DType.INT32)
    attr = ts.TosaSerializerAttribute()
    attr.AddAttribute()
    ser.addOperator(ts.Op.ADD, ["a", "b"], [out.name], attr)
    return bytes(ser.serialize())


def test_sut_valid_graph_writes_the_result(tmp_path):
    a, b = np.array([1, -(1 << 30)], np.int32), np.array([5, -(1 << 30)], np.int32)
    folder, desc = _test_folder(tmp_path / "t", _add_graph([2], [2]), {"a": a, "b": b}, ["result-0"])
    result, message = run_test(folder, desc)
    assert result.name == "TOSA_VALID" and message is None
    assert np.load(folder / "out-result-0.npy").tolist() == [6, -(1 << 31)]


def test_sut_error_if_is_tosa_error(tmp_path):
    a = np.zeros([2], np.int32)
    folder, desc = _test_folder(tmp_path / "t", _add_graph([2], [3]), {"a": a, "b": a}, ["result-0"], True)
    result, message = run_test(folder, desc)
    assert result.name == "TOSA_ERROR" and "output shapes" in message
    assert not (folder / "out-result-0.npy").exists()


def test_sut_overflow_is_unpredictable(tmp_path):
    a = np.array([(1 << 31) - 1], np.int32)
    folder, desc = _test_folder(tmp_path / "t", _add_graph([1], [1]), {"a": a, "b": a}, ["result-0"])
    result, message = run_test(folder, desc)
    assert result.name == "TOSA_UNPREDICTABLE" and "leaves int32" in message  # the REQUIRE fails on this data


def test_sut_full_type_ranges(tmp_path):
    a = np.array([1, 2], np.int32)
    folder, desc = _test_folder(tmp_path / "t", _add_graph([2], [2]), {"a": a, "b": a}, ["result-0"])
    assert run_test(folder, desc)[0].name == "TOSA_VALID"
    # full i32 operands: the planner widens the ADD (int64, saturated) instead of refusing it
    assert run_test(folder, desc, Options(ranges="type")) == (Outcome.TOSA_VALID, None)
    assert np.load(folder / "out-result-0.npy").tolist() == [2, 4]


def test_sut_options():
    assert Options.parse(["target=generic", "ranges=type"]) == Options("generic", "type")
    assert Options.parse(["generic"]).target == "generic"
    with pytest.raises(Exception, match="unknown argument"):
        Options.parse(["colour=red"])

