"""Kernel choice for FUSED_ELEMENTWISE on Hexagon HVX (runtime/hexagon/qc_hvx_ew.h, call site in
templates/hvx/_dot.c.j2): 128 elements an iteration in four vectors of 32 int32 lanes when every operand is a
signed 8, 16 or 32-bit integer and every part has an exact vector form (RESCALE per tensor with a 32-bit scale and
SINGLE_ROUND or DOUBLE_ROUND: shifts 31..62 with a multiplier in [0, 2^31), or a power-of-two multiplier with a shift
of 1..30; CLAMP; int32 ADD, SUB). TFLite's int8 ADD / SUB are such chains (docs/semantics.md, TFLite ADD)."""

from __future__ import annotations

from dataclasses import dataclass

from ...ir.schedule import StepIO
from ...primitives.fused import part_context
from ..generic import vector_parts
from ..record import EwPart, KernelChoice

FILES = ("hexagon/qc_hvx.h", "hexagon/qc_hvx_ew.h")
BYTES = {"int8_t": 1, "int16_t": 2, "int32_t": 4}
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
# the RESCALE functions whose rounding the vector forms compute (HALF_EVEN and 16-bit scales keep the scalar loop)
EXACT_FNS = ("qc_scale32_single", "qc_scale32_double", "qc_scale32_double_gt31")


@dataclass(frozen=True)
class Elementwise:
    """form "ew_vector": `size` elements, 128 an iteration; ins / out: the operands' bytes per element
    (qc_hvx_ew_load / qc_hvx_ew_store); the parts in order, the last one's value stored."""

    size: int
    ins: tuple[int, ...]
    out: int
    parts: tuple[EwPart, ...]


def _int32(*values: int) -> bool:
    return all(INT32_MIN <= v <= INT32_MAX for v in values)


def _rescale(ctx: dict) -> EwPart | None:
    rq = ctx["rq"]
    m, s = rq.multiplier, rq.shift
    if not (rq.scale32 and not rq.per_channel and rq.fn in EXACT_FNS and 0 <= m < 1 << 31
            and _int32(rq.input_zp, rq.output_zp, rq.lo, rq.hi)):
        return None
    clamp = (rq.output_zp, rq.lo, rq.hi)
    if 31 <= s <= 62:
        single = rq.fn == "qc_scale32_single"
        rnd = 0 if single and s > 31 else 1
        return EwPart("qc_hvx_ew_rescale", (rq.input_zp, m, s - 31, rnd, *clamp))
    if 1 <= s <= 30 and m > 0 and m & (m - 1) == 0:
        return EwPart("qc_hvx_ew_rescale_pow2", (rq.input_zp, m.bit_length() - 1 - s, *clamp))
    return None


def _part(part: StepIO) -> EwPart | None:
    ctx = part_context(part)
    op = ctx["op"]
    if op == "RESCALE":
        return _rescale(ctx)
    if op == "CLAMP":
        return EwPart("qc_hvx_ew_clamp", (ctx["lo"], ctx["hi"])) if _int32(ctx["lo"], ctx["hi"]) else None
    if op in ("ADD", "SUB") and ctx["out_ctype"] == "int32_t":
        return EwPart(f"qc_hvx_ew_{op.lower()}")
    return None


def choose(io: StepIO) -> KernelChoice:
    parts = vector_parts(io, BYTES, _part, "RESCALE: per tensor, 32-bit scale, shifts 31..62 or a power-of-two "
                         "multiplier with a shift of 1..30; CLAMP; int32 ADD, SUB")
    if isinstance(parts, KernelChoice):
        return parts
    params = Elementwise(io.outs[0].size, tuple(BYTES[b.dtype.ctype] for b in io.ins), BYTES[io.outs[0].dtype.ctype],
                         parts)
    return KernelChoice("qc_hvx_ew", "exact vector forms of every part, 128 elements an iteration (4 x 32 int32 "
                        "lanes)", form="ew_vector", params=params, files=FILES)
