"""RESCALE_F32 -> a single-rounding RESCALE where a plan-time enumeration proves them equal over the accumulator
range that range analysis gives (qcodegen/semantics/f32_single_rounding.py; docs/semantics.md §14.5). The RESCALE
then takes every target's fused requantization (FUSED_CONV, the Cortex-M kernels' SMLAL stores) instead of the
integer emulation of float32 (qc_scale_f32). Where a convolution computes the accumulators (the RESCALE will be
fused into its stores), a few exceptions per channel are allowed: the RESCALE lists them (enumerated, so exact)
and the stores compare each accumulator with its channel's."""

from __future__ import annotations

from .. import primitives
from ..ir.rescale import RescaleParams
from ..ir.schedule import Schedule, Step, StepIO
from ..semantics.f32_single_rounding import MAX_EXCEPTIONS
from .passes import schedule_pass
from .ranges import analyse_ranges

_OUT_TYPES = ("i8", "i16")  # RESCALE takes no unsigned output of an i32 input
_CONVS = ("CONV2D", "DEPTHWISE_CONV2D")  # whose stores take the exceptions (qcodegen/plan/fuse.py fuses them)


def as_rescale(io: StepIO, max_exceptions: int = 0) -> tuple[RescaleParams, int, int] | None:
    """The RESCALE equal to RESCALE_F32 step `io` over its input's value range (but at most `max_exceptions`
    accumulators per channel, which it lists), the accumulators checked and those a multiplier adjustment
    corrected; None when no single-rounding multiplier fits some channel (or the form does not apply)."""
    prim = primitives.get("RESCALE_F32")
    zp = int(io.attrs.get("output_zp", 0))
    if io.outs[0].dtype.name not in _OUT_TYPES or (io.outs[0].dtype.name == "i16" and zp != 0):
        return None
    found = prim.single_roundings(io, max_exceptions)
    if found is None:
        return None
    lo, hi = prim.bounds(io)
    exceptions = [(c, a, r + zp) for c, f in enumerate(found) for a, r in f.exceptions]
    params = RescaleParams(multiplier=[f.multiplier for f in found], shift=[f.shift for f in found], input_zp=0,
                           output_zp=zp, rounding="single_round", per_channel=prim.per_channel(io),
                           axis=prim.axis(io), out_min=lo, out_max=hi, exceptions=exceptions)
    return params, sum(f.candidates for f in found), sum(f.corrected for f in found)


def _convolution_accumulators(schedule: Schedule, step: Step) -> bool:
    """The step's input is the accumulator of a convolution read by this step alone (fused into its stores)."""
    producers = [s for s in schedule.steps if step.inputs[0] in s.outputs]
    return (len(producers) == 1 and producers[0].op in _CONVS
            and len(schedule.consumers(step.inputs[0])) == 1 and step.inputs[0] not in schedule.live_out())


@schedule_pass
def single_round_f32_rescales(schedule: Schedule) -> None:
    indices = [i for i, s in enumerate(schedule.steps) if s.op == "RESCALE_F32"]
    if not indices:
        return
    notes = list(schedule.notes)
    analyse_ranges(schedule)  # the accumulators' ranges now (computed again, and reported, after the passes)
    schedule.notes[:] = notes
    converted, checked, corrected, excepted, exceptions = 0, 0, 0, 0, 0
    for i in indices:
        step = schedule.steps[i]
        io = schedule.io(step)
        found = as_rescale(io)
        if found is None and _convolution_accumulators(schedule, step):
            found = as_rescale(io, MAX_EXCEPTIONS)
        if found is None:
            continue
        params, candidates, fixed = found
        schedule.steps[i] = Step("RESCALE", step.inputs, step.outputs, params.to_attrs(), step.source)
        converted += 1
        checked += candidates
        corrected += fixed
        excepted += bool(params.exceptions)
        exceptions += len(params.exceptions)
    schedule.notes.append(
        f"float32 requantization: {converted} of {len(indices)} RESCALE_F32 step(s) proved equal to a single-rounding "
        f"RESCALE over their accumulators' range ({checked:,} accumulators near a rounding boundary enumerated, "
        f"{corrected:,} of them by an adjusted multiplier; {excepted} step(s) with {exceptions} listed exceptions "
        f"that their convolution's stores compare; docs/semantics.md §14.5); the others keep the float32 "
        f"emulation")
