"""StableHLO's quantized binary element-wise ops against their float definition (qcodegen/lower/stablehlo/binary.py):
the plan-time proof over every pair of 8-bit operands, the forms it chooses, the verdicts it records, and the
generated C equal to the float definition on every element (verify --against float, tolerance 0)."""

# ruff: noqa: E501  (the MLIR program keeps one op per line)
from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import numpy as np
import pytest

from qcodegen.cli import main
from qcodegen.compiler import plan
from qcodegen.frontends import load_model
from qcodegen.ir.quant import QuantType
from qcodegen.lower.stablehlo import binary
from qcodegen.semantics import stablehlo as sem


def _q(scale: float, zp: int, storage: str = "i8") -> QuantType:
    return QuantType.per_tensor(storage, scale, zp)


A, B, Y = _q(0.02, -5), _q(0.03, 7), _q(0.05, 1)  # the unrelated scales of the report


def test_rounding_each_operand_is_off_a_fifth_of_the_time() -> None:
    """Why one rounding: mapping each operand to output units and rounding each before the add (the interpreter's
    integer form) differs from the float definition for 15,656 of the 65,536 pairs (e.g. 74.8 + 1 = 75.8 -> 76);
    the solved tables at 2^4 output units differ for none."""
    grid = np.arange(-128, 128)
    wanted = binary.definition("add", grid[:, None], grid[None, :], A, B, Y)
    per_operand = [np.rint((grid - q.zero_point) * binary._ratio(q, Y)) for q in (A, B)]
    twice = np.clip(per_operand[0][:, None] + per_operand[1][None, :] + Y.zero_point, -128, 127)
    assert np.count_nonzero(twice != wanted) == 15656
    a, b = 11, 121  # (11 + 5) 0.4 = 6.4 -> 6 and (121 - 7) 0.6 = 68.4 -> 68 output units: 75; exact 74.8 + 1 -> 76
    assert wanted[a + 128, b + 128] == 76 and twice[a + 128, b + 128] == 75
    plan = binary.plan_binary("add", A, B, Y, binary.EXACT)
    assert plan.form.name.startswith("sum of two 256-entry tables at 2^4 ")
    assert (plan.method, plan.cases, plan.off, plan.ties) == ("enumeration", 65536, 0, 0)


def test_nice_scales_fall_back_to_the_table() -> None:
    """0.05 + 0.1 -> 0.2: exact ties (a / 4 + b / 2 = k + 1/2) that the float32 evaluation resolves one way or the
    other depending on the pair: no sum of two tables reproduces that (the constraints are infeasible), the rounded
    terms differ on 2,967 pairs, all f32 ties. exact: the 65,536-entry table; compact: the sum, with its count."""
    qa, qb, qy = _q(0.05, 0), _q(0.1, 0), _q(0.2, 0)
    exact = binary.plan_binary("add", qa, qb, qy, binary.EXACT)
    assert exact.form.name == "65,536-entry table of the definition" and exact.off == 0
    assert "differs on 2,967 pairs (2,967 f32 ties)" in exact.detail and "no k <= 21 is exact" in exact.detail
    compact = binary.plan_binary("add", qa, qb, qy, binary.COMPACT)
    assert compact.form.name.startswith("sum of two 256-entry tables at 2^21 ")
    assert (compact.off, compact.ties) == (2967, 2967)


def test_multiply_product_form_and_its_ties() -> None:
    """(a - zp_a)(b - zp_b) exact, one RESCALE half to even: equal to the exactly rounded product, which the float32
    definition differs from on 110 pairs of these decimal scales (0.02 * 0.03 / 0.05 = 0.012: near-ties)."""
    compact = binary.plan_binary("multiply", A, B, Y, binary.COMPACT)
    assert compact.form.name == "exact product, one RESCALE half to even" and (compact.off, compact.ties) == (110, 110)
    grid = np.arange(-128, 128)
    got = binary.run_form(compact.form, A, B, Y, grid[:, None], grid[None, :])
    assert np.array_equal(got, sem.exact_binary("multiply", grid[:, None], grid[None, :], A, B, Y))
    unrelated = binary.plan_binary("multiply", _q(0.0173, 3), _q(0.0291, -9), _q(0.0611, 4), binary.EXACT)
    assert unrelated.form.name == compact.form.name and unrelated.off == 0


def test_solver_is_exact_where_rounded_terms_are_not() -> None:
    """Scales whose rounded terms keep 2 f32 ties at every k: the difference constraints still have a solution."""
    qa, qb, qy = _q(0.0011732, 4), _q(0.0023419, -3), _q(0.0035871, 2)
    plan = binary.plan_binary("subtract", qa, qb, qy, binary.EXACT)
    assert plan.form.name.startswith("sum of two 256-entry tables") and plan.off == 0
    k = int(plan.form.name.split("2^")[1].split()[0])
    grid = np.arange(-128, 128)
    wanted = binary.definition("subtract", grid[:, None], grid[None, :], qa, qb, qy)
    rounded = [np.rint((grid - q.zero_point) * binary._ratio(q, qy) * 2.0 ** k) for q in (qa, qb)]
    terms = rounded[0][:, None] - rounded[1][None, :]
    assert np.count_nonzero(np.clip(np.rint(terms / 2.0 ** k) + qy.zero_point, -128, 127) != wanted) > 0


def test_sixteen_bit_operands_are_sampled() -> None:
    plan = binary.plan_binary("add", _q(0.0002, -5, "i16"), _q(0.0003, 0, "i16"), _q(0.0005, 0, "i16"),
                              binary.EXACT)
    assert plan.method == "sample" and plan.cases == binary.SAMPLE and plan.off == 0
    assert plan.form.name == "operands rescaled to 2^13 output units, one rounding"


PROGRAM = """
!a = !quant.uniform<i8:f32, 0.02:-5>
!b = !quant.uniform<i8:f32, 0.03:7>
!y = !quant.uniform<i8:f32, 0.05:1>
!u = !quant.uniform<u8:f32, 0.04:128>
!v = !quant.uniform<u8:f32, 0.07:120>
!s = !quant.uniform<i16:f32, 0.0007:3>
!t = !quant.uniform<i16:f32, 0.0011:-20>
func.func @main(%x: tensor<32x64x!a>, %z: tensor<32x64x!b>, %w: tensor<32x64x!u>, %h: tensor<32x64x!s>) -> (tensor<32x64x!y>, tensor<32x64x!v>, tensor<32x64x!y>, tensor<32x64x!y>, tensor<32x64xi1>, tensor<32x64x!t>) {
  %s = stablehlo.add %x, %z : (tensor<32x64x!a>, tensor<32x64x!b>) -> tensor<32x64x!y>
  %d = stablehlo.subtract %w, %w : (tensor<32x64x!u>, tensor<32x64x!u>) -> tensor<32x64x!v>
  %m = stablehlo.multiply %x, %z : (tensor<32x64x!a>, tensor<32x64x!b>) -> tensor<32x64x!y>
  %n = stablehlo.maximum %z, %x : (tensor<32x64x!b>, tensor<32x64x!a>) -> tensor<32x64x!y>
  %c = stablehlo.compare GT, %x, %z : (tensor<32x64x!a>, tensor<32x64x!b>) -> tensor<32x64xi1>
  %e = stablehlo.add %h, %h : (tensor<32x64x!s>, tensor<32x64x!s>) -> tensor<32x64x!t>
  func.return %s, %d, %m, %n, %c, %e : tensor<32x64x!y>, tensor<32x64x!v>, tensor<32x64x!y>, tensor<32x64x!y>, tensor<32x64xi1>, tensor<32x64x!t>
}
"""


def _cli(*argv: str) -> tuple[int, dict]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(list(argv))
    return code, json.loads(out.getvalue())


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("binary") / "binary.mlir"
    path.write_text(PROGRAM)
    return path


def test_every_element_equals_the_float_definition(program: Path) -> None:
    """add, subtract (u8), multiply, maximum, compare of 8-bit operands and an i16 add: the generated C equals the
    float definition on every element of 4 x 2,048 random inputs per output (tolerance 0)."""
    code, out = _cli("verify", str(program), "--against", "float", "--samples", "4", "--json")
    assert code == 0 and out["elements_off"] == 0 and out["pass"], out
    code, out = _cli("verify", str(program), "--samples", "2", "--json")
    assert code == 0 and out["bit_exact"]


def test_inspect_shows_the_verdicts(program: Path) -> None:
    code, out = _cli("inspect", str(program), "--json")
    records = {r["op"]: r for r in out["exactness"]}
    assert set(records) == {"stablehlo.add", "stablehlo.subtract", "stablehlo.multiply", "stablehlo.maximum",
                            "stablehlo.compare"}
    assert [r["method"] for r in out["exactness"]] == ["enumeration"] * 5 + ["sample"]
    assert all(r["off"] == 0 for r in out["exactness"])
    assert records["stablehlo.multiply"]["form"] == "65,536-entry table of the definition"
    assert "exact product, one RESCALE half to even differs on 110 pairs" in records["stablehlo.multiply"]["detail"]
    assert out["exactness"][0]["types"] == "i8:0.02:-5 x i8:0.03:7 -> i8:0.05:1"


def test_compact_option_keeps_the_product(program: Path) -> None:
    """The graph option binary_ops = "compact": the multiply keeps its product form, whose 110 pairs that differ
    from the definition are f32 ties; the other ops keep their (exact) forms."""
    graph = load_model(program)
    graph.options[binary.OPTION] = binary.COMPACT
    records = {r.op: r for r in plan(graph).exactness}
    multiply = records["stablehlo.multiply"]
    assert multiply.form == "exact product, one RESCALE half to even" and multiply.off == multiply.ties == 110
    assert all(r.exact for op, r in records.items() if op != "stablehlo.multiply")
