"""TFLite Micro's MEAN and SUM (QuantizedMeanOrSum) and REDUCE_MAX / REDUCE_MIN: the generated C equals TFLM
over shapes, axes (negative, repeated, several), keep_dims and extreme inputs; the 1/N multiplier folding by
hand."""


import numpy as np
import pytest

from qcodegen.compiler import plan
from qcodegen.errors import GraphError
from qcodegen.frontends.tflite import load_tflite
from qcodegen.lower.tflite.reduce import mean_multiplier
from qcodegen.testing import tflm_vs_c
from qcodegen.verify import tflm_oracle as tflm

pytest.importorskip("tflite_micro", reason="TFLM oracle tests need tflite-micro (pip install 'qcodegen[tflite]')")
T, OpSpec = tflm.TensorSpec, tflm.OpSpec
QUANT = {"int8": ((0.05, -3), (0.03, 7)), "int16": ((0.001, 0), (0.0007, 0))}


def reducer(opcode: str, shape: tuple[int, ...], axes: list[int], keep: bool, dtype: str,
            quant: tuple[tuple[float, int], tuple[float, int]]) -> tuple[T, OpSpec]:
    """A reducer op over a fresh input tensor, with TFLite's output shape."""
    x = T(shape, dtype, *quant[0])
    resolved = {a % len(shape) for a in axes}
    kept = [1 if i in resolved else d for i, d in enumerate(shape)]
    out_shape = kept if keep else [d for i, d in enumerate(shape) if i not in resolved]
    axis = T((len(axes),), "int32", data=np.array(axes, np.int32))
    y = T(tuple(out_shape), dtype, *quant[1])
    return x, OpSpec(opcode, [x, axis], [y], {"keepDims": keep}, options_type="ReducerOptions")


def extremes(shape: tuple[int, ...], dtype: str, rng: np.random.Generator) -> list[np.ndarray]:
    info = np.iinfo(dtype)
    return [rng.integers(info.min, info.max, shape, endpoint=True).astype(dtype), np.full(shape, info.max, dtype),
            np.full(shape, info.min, dtype)]


def test_mean_multiplier_by_hand():
    # N = 3: sh = floor(log2 3) = 1, m' = (2^30 << 1) // 3 = 715827882, s' = s - 1
    assert mean_multiplier((1 << 30, 0), 3) == (715827882, -1)
    # N = 2^35: sh = min(35, 32, 31 + s) = 26 for s = -5
    assert mean_multiplier((1 << 30, -5), 1 << 35) == (1 << 21, -31)
    # N = 1: nothing changes
    assert mean_multiplier((123456789, 2), 1) == (123456789, 2)


# (shape, axes, keep_dims): several axes, negative and repeated axes, a global average pool, all axes, a
# reduction of 1 element, the same axis twice
SHAPES = [((2, 3, 4, 5), [1, 2], True), ((2, 3, 4, 5), [-1], False), ((2, 3, 4, 5), [0, 3, 1, -1], False),
          ((1, 7, 7, 64), [1, 2], True), ((3, 5), [0, 1], False), ((4, 1, 6), [1], False), ((3, 4), [1, -1], True),
          ((1, 255, 3), [1], True)]


@pytest.mark.parametrize("dtype", ["int8", "int16"])
@pytest.mark.parametrize("opcode", ["MEAN", "SUM"])
def test_mean_sum_equal_tflm(tmp_path, opcode, dtype):
    rng = np.random.default_rng(11)
    pairs = [reducer(opcode, shape, axes, keep, dtype, QUANT[dtype]) for shape, axes, keep in SHAPES]
    model = tflm.build_model([op for _, op in pairs], [x for x, _ in pairs], [op.outputs[0] for _, op in pairs])
    per_input = [extremes(x.shape, dtype, rng) for x, _ in pairs]
    tflm_vs_c(tmp_path, model, [list(batch) for batch in zip(*per_input, strict=True)])


@pytest.mark.parametrize("scales", [((0.05, 4), (0.5, -2)), ((0.5, -128), (0.004, 100)), ((0.01, 0), (0.01, 0))])
def test_mean_scale_ratios(tmp_path, scales):
    """Scale ratios below and above 1 (the 1/N folding meets TFLM's min(log2 N, 32, 31 + s) clamp)."""
    rng = np.random.default_rng(5)
    x, op = reducer("MEAN", (2, 6, 6, 3), [1, 2], True, "int8", scales)
    tflm_vs_c(tmp_path, tflm.build_model([op], [x], op.outputs), [[b] for b in extremes(x.shape, "int8", rng)])


@pytest.mark.parametrize("opcode", ["REDUCE_MAX", "REDUCE_MIN"])
def test_reduce_extremes_equal_tflm(tmp_path, opcode):
    rng = np.random.default_rng(2)
    same = ((0.05, -3), (0.05, -3))
    pairs = [reducer(opcode, shape, axes, keep, "int8", same) for shape, axes, keep in SHAPES]
    model = tflm.build_model([op for _, op in pairs], [x for x, _ in pairs], [op.outputs[0] for _, op in pairs])
    per_input = [extremes(x.shape, "int8", rng) for x, _ in pairs]
    tflm_vs_c(tmp_path, model, [list(batch) for batch in zip(*per_input, strict=True)])


@pytest.mark.parametrize("opcode, shape, axes, quant, error", [
    ("MEAN", (2, 3), [2], QUANT["int8"], GraphError),  # axis out of range
    ("REDUCE_MAX", (2, 3), [1], QUANT["int8"], GraphError),  # quantization must not change
])
def test_rejected(tmp_path, opcode, shape, axes, quant, error):
    x, op = reducer(opcode, shape, axes, True, "int8", quant)
    path = tmp_path / "bad.tflite"
    path.write_bytes(tflm.build_model([op], [x], op.outputs))
    with pytest.raises(error):
        plan(load_tflite(path))


def test_sum_beyond_int32_is_widened(tmp_path):
    """2^24 * 255 can leave the int32 accumulator: the REDUCE_SUM step is widened (int64), not refused."""
    x, op = reducer("SUM", (1, 1 << 24, 1), [1], True, "int8", QUANT["int8"])
    path = tmp_path / "sum.tflite"
    path.write_bytes(tflm.build_model([op], [x], op.outputs))
    widened = {s.op: s.widened for s in plan(load_tflite(path)).steps if s.widened}
    assert "int32 accumulator" in widened["REDUCE_SUM"].reason
