"""The CLI contract: spellings, exit codes, one-line errors (never tracebacks), JSON shapes."""

import json
import subprocess
import sys

import numpy as np
import pytest

from qcodegen.cli import main

GRAPH = {
    "name": "rq",
    "tensors": [
        {"name": "x", "shape": [2, 5], "dtype": "i8", "quant": {"scale": 0.05, "zero_point": -128}},
        {"name": "y", "shape": [2, 5], "dtype": "i8", "quant": {"scale": 0.03, "zero_point": 7}},
    ],
    "inputs": ["x"], "outputs": ["y"],
    "ops": [{"op": "requantize", "inputs": ["x"], "outputs": ["y"]}],
}


@pytest.fixture
def model(tmp_path):
    path = tmp_path / "rq.json"
    path.write_text(json.dumps(GRAPH))
    return path


def run_cli(capsys, *args):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def test_verify_json(model, capsys):
    code, out, _ = run_cli(capsys, "verify", model, "--samples", 3, "--seed", 5, "--json")
    result = json.loads(out)
    assert code == 0 and result["bit_exact"] is True and result["samples"] == 3 and result["mismatches"] == 0
    assert result["first_mismatch"] is None


def test_inspect_json(model, capsys):
    code, out, _ = run_cli(capsys, "inspect", model, "--json")
    d = json.loads(out)
    assert code == 0
    for key in ("arena_bytes", "arena_lower_bound_bytes", "weights_bytes", "macs", "steps"):
        assert key in d
    step = d["steps"][0]
    assert step["op"] == "RESCALE" and step["shift"] == 30
    # scale 0.05 / 0.03 = 5/3 = 1.666..: mantissa 0.8333.. * 2^31 rounded, shift 31 - 1
    assert step["multiplier"] == int(np.floor(5 / 3 / 2 * 2**31 + 0.5))


def test_compile_names_and_files(model, tmp_path, capsys):
    out_dir = tmp_path / "gen"
    code, out, _ = run_cli(capsys, "compile", model, "-o", out_dir, "--name", "my-net 1", "--harness")
    assert code == 0
    names = {p.name for p in out_dir.iterdir()}
    assert {"my_net_1.h", "my_net_1.c", "my_net_1_weights.c", "qc_runtime.h", "main.c", "Makefile"} <= names
    assert "int my_net_1_run(" in (out_dir / "my_net_1.h").read_text()


def test_run_roundtrip_and_type_checks(model, tmp_path, capsys):
    x = np.arange(-5, 5, dtype=np.int8).reshape(2, 5)
    np.save(tmp_path / "x.npy", x)
    code, _, _ = run_cli(capsys, "run", model, "-i", tmp_path / "x.npy", "-o", tmp_path / "y.npy")
    assert code == 0
    y = np.load(tmp_path / "y.npy")
    assert y.dtype == np.int8 and y.shape == (2, 5)
    np.save(tmp_path / "xf.npy", x.astype(np.float32))
    code, _, err = run_cli(capsys, "run", model, "-i", tmp_path / "xf.npy", "-o", tmp_path / "y.npy")
    assert code == 2 and "must be int8" in err and err.count("\n") == 1
    np.save(tmp_path / "xs.npy", x.reshape(10))
    code, _, err = run_cli(capsys, "run", model, "-i", tmp_path / "xs.npy", "-o", tmp_path / "y.npy")
    assert code == 2 and "shape" in err


@pytest.mark.parametrize("content, message", [
    (None, "no such file"),
    ("{not json", "malformed JSON"),
    (json.dumps({**GRAPH, "outputs": ["nope"]}), "unknown tensor"),
    (json.dumps({**GRAPH, "tensors": [GRAPH["tensors"][0], {**GRAPH["tensors"][1],
                 "quant": {"scale": -1.0, "zero_point": 0}}]}), "scale"),
    (json.dumps({**GRAPH, "tensors": [GRAPH["tensors"][0], {**GRAPH["tensors"][1],
                 "quant": {"scale": 0.1, "zero_point": 300}}]}), "zero point 300"),
    (json.dumps({**GRAPH, "ops": [{"op": "frobnicate", "inputs": ["x"], "outputs": ["y"]}]}), "frobnicate"),
    (json.dumps([1, 2]), "must be an object"),
])
def test_bad_input_one_line_errors(tmp_path, capsys, content, message):
    path = tmp_path / "bad.json"
    if content is not None:
        path.write_text(content)
    for command in ("compile", "verify", "inspect"):
        code, _, err = run_cli(capsys, command, path)
        assert code == 2, command
        assert err.startswith("qcodegen: error:") and err.count("\n") == 1 and message in err, err


def test_unknown_target_and_usage(model, capsys):
    code, _, err = run_cli(capsys, "verify", model, "-t", "nosuch")
    assert code == 2 and "unknown target" in err
    with pytest.raises(SystemExit) as exc:
        main(["verify"])
    assert exc.value.code == 2


def test_targets_lists_generic(capsys):
    code, out, _ = run_cli(capsys, "targets")
    assert code == 0 and out.startswith("generic")


def test_entry_point_subprocess(model):
    proc = subprocess.run([sys.executable, "-m", "qcodegen", "inspect", str(model) + ".missing"],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1


def test_verify_against_tosa_reference_model(model, capsys):
    pytest.importorskip("tosa_reference_model", reason="the TOSA reference model (tosa-tools) is not installed")
    code, out, _ = run_cli(capsys, "verify", model, "--against", "tosa-ref", "--samples", 2, "--json")
    assert code == 0 and json.loads(out)["bit_exact"] is True


def test_verify_against_tflm_needs_tflite(model, capsys):
    code, _, err = run_cli(capsys, "verify", model, "--against", "tflm")
    assert code == 2 and ".tflite" in err


# --- rough edges users hit: each is one clear line (exit 2) or works -------------------------------------------
def _one_line_error(code: int, err: str, *fragments: str) -> None:
    assert code == 2 and err.count("\n") == 1 and err.startswith("qcodegen: error: ") and "Traceback" not in err
    for fragment in fragments:
        assert fragment in err, err


def test_output_paths_that_cannot_be_written(model, tmp_path, capsys):
    afile = tmp_path / "afile"
    afile.write_text("x")
    _one_line_error(*run_cli(capsys, "compile", model, "-o", afile)[::2], "exists and is not a folder")
    _one_line_error(*run_cli(capsys, "compile", model, "-o", "/proc/qcodegen-x")[::2], "/proc/qcodegen-x")
    x = tmp_path / "x.npy"
    np.save(x, np.zeros((2, 5), np.int8))
    _one_line_error(*run_cli(capsys, "run", model, "-i", x, "-o", tmp_path / "no" / "dir" / "o.npy")[::2],
                    "does not exist")


def test_run_takes_several_files_after_one_option(tmp_path, capsys):
    doc = dict(GRAPH, tensors=GRAPH["tensors"] + [{"name": "z", "shape": [2, 5], "dtype": "i8",
                                                   "quant": {"scale": 0.05, "zero_point": -128}}],
               inputs=["x", "z"], outputs=["y", "w"],
               ops=GRAPH["ops"] + [{"op": "requantize", "inputs": ["z"], "outputs": ["w"]}])
    doc["tensors"].append({"name": "w", "shape": [2, 5], "dtype": "i8", "quant": {"scale": 0.03, "zero_point": 7}})
    path = tmp_path / "two.json"
    path.write_text(json.dumps(doc))
    a, b = tmp_path / "a.npy", tmp_path / "b.npy"
    np.save(a, np.full((2, 5), -100, np.int8))
    np.save(b, np.full((2, 5), 100, np.int8))
    assert run_cli(capsys, "run", path, "-i", a, b, "-o", tmp_path / "y.npy", tmp_path / "w.npy")[0] == 0
    assert run_cli(capsys, "run", path, "-i", a, "-i", b, "-o", tmp_path / "y2.npy", "-o", tmp_path / "w2.npy")[0] == 0
    assert np.array_equal(np.load(tmp_path / "w.npy"), np.load(tmp_path / "w2.npy"))
    assert not np.array_equal(np.load(tmp_path / "y.npy"), np.load(tmp_path / "w.npy"))


def test_help_version_and_targets_json(capsys):
    for command in ("compile", "run", "verify", "inspect"):
        with pytest.raises(SystemExit) as info:
            main([command, "--help"])
        text = capsys.readouterr().out
        assert info.value.code == 0 and "exit codes: 0" in text and ".tflite" in text
        if command != "inspect":
            assert "qcodegen targets" in text and "(default: generic)" in text
    with pytest.raises(SystemExit):
        main(["verify", "--help"])
    assert "(default: 10)" in capsys.readouterr().out
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0 and capsys.readouterr().out.startswith("qcodegen 0.")
    code, out, _ = run_cli(capsys, "targets", "--json")
    targets = json.loads(out)
    assert code == 0 and targets[0]["name"] == "generic" and targets[0]["ready"] is True


def test_oracle_and_graph_mistakes_are_named(model, tmp_path, capsys):
    tfl = tmp_path / "m.tflite"
    tfl.write_bytes(b"\0" * 64)
    _one_line_error(*run_cli(capsys, "verify", tfl, "--against", "golden")[::2], "StableHLO test program")
    for key, value, fragment in (("attrs", {"strides": 2}, "unknown attribute 'strides'"),
                                 ("op", "requantise", "requantise (did you mean 'requantize'?)")):
        doc = json.loads(json.dumps(GRAPH))
        doc["ops"][0][key] = value
        bad = tmp_path / f"{key}.json"
        bad.write_text(json.dumps(doc))
        _one_line_error(*run_cli(capsys, "inspect", bad)[::2], fragment)


def test_progress_only_on_a_terminal(capsys):
    import io

    from qcodegen.progress import Progress

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    tty, pipe = Tty(), io.StringIO()
    for stream in (tty, pipe):
        progress = Progress("samples", stream=stream)
        for done in range(1, 4):
            progress.update(done, 3)
        progress.close()
    assert "3/3 samples" in tty.getvalue() and pipe.getvalue() == ""
    quiet = Progress("samples", enabled=False, stream=Tty())
    quiet.update(1, 3)
    assert quiet.stream.getvalue() == ""
