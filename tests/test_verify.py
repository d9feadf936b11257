"""The verifier must fail on wrong C and name the first differing step, tensor, index and values."""

from qcodegen.codegen.targets import Target, load_target
from qcodegen.ir.dtypes import dtype
from qcodegen.ir.schedule import INPUT, OUTPUT, TEMP, Buffer, Schedule, Step
from qcodegen.testing import c_vs_reference


def two_step_schedule():
    sched = Schedule("two")
    sched.add_buffer(Buffer("x", (4, 4), dtype("i8"), INPUT))
    sched.add_buffer(Buffer("t", (4, 4), dtype("i32"), TEMP))
    sched.add_buffer(Buffer("y", (4, 4), dtype("i8"), OUTPUT))
    sched.inputs, sched.outputs = ["x"], ["y"]
    common = dict(input_zp=0, output_zp=0, scale32=True, rounding="single_round")
    sched.steps = [Step("RESCALE", ["x"], ["t"], dict(multiplier=[1 << 30], shift=[20], **common)),
                   Step("RESCALE", ["t"], ["y"], dict(multiplier=[1 << 30], shift=[40], **common))]
    return sched


def broken_target(tmp_path):
    """A target whose RESCALE template is off by one at element 5 of step 1 only."""
    override = tmp_path / "broken"
    override.mkdir()
    generic = load_target("generic")
    original = (generic.template_dirs()[0] / "rescale.c.j2").read_text()
    assert "qc_clamp64(r," in original
    override.joinpath("rescale.c.j2").write_text(
        original.replace("qc_clamp64(r,", "qc_clamp64(r + ({{ 1 if index == 1 else 0 }} && i == 5),"))
    return Target("broken", "", generic.cc, generic.cflags, generic.ldflags, (str(override), "generic"))


def test_correct_c_is_bit_exact():
    assert c_vs_reference(two_step_schedule(), samples=3).bit_exact


def test_mismatch_is_located(tmp_path):
    result = c_vs_reference(two_step_schedule(), samples=2, target=broken_target(tmp_path))
    assert not result.bit_exact
    assert 1 <= result.mismatches <= 2  # element 5 of each sample, unless saturation hides it
    fm = result.first_mismatch
    assert fm["step"] == 1 and fm["tensor"] == "y" and fm["index"] == 5
    assert fm["got"] - fm["expected"] == 1
