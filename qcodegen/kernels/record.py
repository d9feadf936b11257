"""The records of the kernel-choice pass: what a target's kernels do for each step, decided before rendering.

A KernelChoice says which kernel a step runs, which weight layout it reads, the constant arrays made for it (already
re-laid, typed), why (the predicate that held, as text), and the typed parameters its call site renders. A KernelPlan
holds the choices of every step of a schedule and every constant array the model's `<name>_weights.c` holds: the
renderer writes exactly these arrays, and the reports count exactly these bytes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .names import ArrayNames

# the C element types of constant arrays, by numpy dtype (the array's values are stored in that dtype)
CTYPES = {np.dtype(np.int8): "int8_t", np.dtype(np.int16): "int16_t", np.dtype(np.int32): "int32_t",
          np.dtype(np.int64): "int64_t", np.dtype(np.uint8): "uint8_t", np.dtype(np.uint16): "uint16_t",
          np.dtype(np.uint32): "uint32_t", np.dtype(np.float32): "float"}
NUMPY_OF = {ctype: dtype for dtype, ctype in CTYPES.items()}


@dataclass(frozen=True, eq=False)
class ConstArray:
    """One constant array of `<name>_weights.c`: its C name, C element type and values (flat, in a numpy dtype of
    the C type's width; 4-bit data already packed two per byte)."""

    name: str
    ctype: str
    values: np.ndarray

    @property
    def size(self) -> int:
        """Elements written (an empty array is written as one 0)."""
        return max(int(self.values.size), 1)

    @property
    def nbytes(self) -> int:
        return self.size * self.values.dtype.itemsize


def const_array(name: str, values: np.ndarray, ctype: str | None = None) -> ConstArray:
    """A ConstArray of `values` (flattened), its C type from their dtype unless given (e.g. uintptr_t)."""
    flat = np.ascontiguousarray(np.asarray(values).reshape(-1))
    return ConstArray(name, ctype or CTYPES[flat.dtype], flat)


def step_array(names: ArrayNames, role: str, values: np.ndarray, ctype: str | None = None) -> ConstArray:
    """An array made for a step (a kernel's constants, a primitive's per-step constant), named by its role and its
    values (`ArrayNames.by_value`): steps with the same constants share one copy."""
    flat = np.ascontiguousarray(np.asarray(values).reshape(-1))
    return const_array(names.by_value(role, flat), flat, ctype)


@dataclass(frozen=True)
class RequantStore:
    """How the C a template writes for a step stores a requantized accumulator (FUSED_CONV), when the target has a
    cheaper exact form than the portable one (templates/generic/_window.c.j2 `requantized`): the C call
    fn(acc, multiplier, shift, zp2p1, dbl), then max(., lo) when `floor` is set, or clamped to `clamp`."""

    fn: str
    zp2p1: int
    dbl: int
    floor: int | None = None
    clamp: tuple[int, int] | None = None


@dataclass(frozen=True)
class EwPart:
    """One part of an element-wise chain as a vector family's template calls it: fn(operands..., constants...) on
    one vector of int32 lanes (Cortex-M55 MVE, Hexagon HVX)."""

    fn: str
    constants: tuple[int, ...] = ()


@dataclass(frozen=True)
class KernelChoice:
    """What one step runs on a target.

    kernel: the kernel's name: a runtime C function (e.g. qc_dsp_conv_3px_s8x2_double_pc_g4) or "c:<template>"
        (the portable loops of that template);
    reason: why (the predicate that held, as text);
    layout: the weight layout it reads ("int8": the schedule's constant as it is; else a re-layout's name);
    form: the call site the target's templates render ("portable": the generic loops);
    arrays: role -> the constant arrays made for this step (re-laid weights, accumulator starts, requantization
        pairs, tap offsets);
    params: the form's typed parameters (a dataclass; None for "portable");
    unread: positions of the step's constant operands it does not read (passed as NULL, left out of the weights
        unless another step reads them);
    step_constants: whether it reads the primitive's own per-step constant arrays (Primitive.constants);
    requantize: the store form of its requantized outputs written by template C (None: the portable form);
    window_length: the length a convolution's gathered window is padded to with zeros (0: as it is);
    window_rows: the kernel reads a convolution's window as its KH rows of KW * C elements (the taps of a row
    contiguous: dilation 1 across), "in_place" (an interior window in the input, one reading padding gathered with
    the input's row stride) or "padded" (every window in a copy of the image with its padding;
    templates/generic/conv2d.c.j2), "" for the gathered window;
    files: the runtime files (relative to runtime/) its C needs;
    stack_scratch: the bytes of the arrays sized at generation time that the step's C declares on the stack for its
        kernel (gathered windows, copies of padded rows or images, widened inputs or weights, planes of sums),
        computed from the expressions its template sizes them with (0: none; arrays of a few words not counted);
    inlined: the step function is left to the compiler to inline into <name>_run (the family's step attributes,
        e.g. noinline, not applied): a step whose calls move data, with no kernel asm to share registers with."""

    kernel: str
    reason: str
    layout: str = "int8"
    form: str = "portable"
    arrays: Mapping[str, ConstArray] = field(default_factory=dict)
    params: Any = None
    unread: frozenset[int] = frozenset()
    step_constants: bool = True
    requantize: RequantStore | None = None
    window_length: int = 0
    window_rows: str = ""
    files: tuple[str, ...] = ()
    stack_scratch: int = 0
    inlined: bool = False


@dataclass
class StepKernel:
    """A step of the execution order (qcodegen/plan/fuse.py) with its choice and the names of the weights-file
    arrays it reads (its constant operands, its primitive's constants, its kernel's arrays)."""

    index: int
    op: str
    source: str
    choice: KernelChoice
    arrays: tuple[str, ...] = ()


@dataclass
class KernelPlan:
    """The kernel choices of a schedule on a target with a weight layout, and every constant array of the model.

    family: the target's kernel family (qcodegen/kernels/<family>); files: the runtime files to copy into the
        output folder; headers: those model.c includes; attributes: C attributes of every step function."""

    family: str
    layout: str
    steps: list[StepKernel]
    arrays: list[ConstArray]
    files: tuple[str, ...] = ()
    attributes: str = ""

    @property
    def headers(self) -> tuple[str, ...]:
        return tuple(f.rsplit("/", 1)[-1] for f in self.files if f.endswith(".h"))

    @property
    def sources(self) -> tuple[str, ...]:
        return tuple(f for f in self.files if f.endswith(".c"))

    @property
    def weights_bytes(self) -> int:
        return sum(a.nbytes for a in self.arrays)
