"""AST of a parsed MLIR module: attributes, operations, blocks, regions, functions.

Pretty (custom) op forms are normalised to the attribute names of the generic form, so ``stablehlo.transpose %x,
dims = [1, 0]`` and ``"stablehlo.transpose"(%x) <{permutation = array<i64: 1, 0>}>`` give the same attribute
``permutation``; ``Operation.attr`` looks in properties and attributes alike.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...ir.limits import element_count
from .types import TensorType, Type

Scalar = int | float | bool | complex


@dataclass(frozen=True)
class IntegerAttr:
    value: int
    type: Type | None = None  # None: untyped literal (MLIR reads it as i64)


@dataclass(frozen=True)
class FloatAttr:
    value: float
    text: str  # the literal as written (decimal or 0x bit pattern), sign included
    type: Type | None = None


@dataclass(frozen=True)
class BoolAttr:
    value: bool


@dataclass(frozen=True)
class StringAttr:
    value: str


@dataclass(frozen=True)
class UnitAttr:
    pass


@dataclass(frozen=True)
class ArrayAttr:
    elements: tuple[Attribute, ...]


@dataclass(frozen=True)
class DenseArrayAttr:
    """``array<i64: 1, 2>``."""

    element_type: Type
    values: tuple[Scalar, ...]


@dataclass(frozen=True)
class DictAttr:
    entries: dict[str, Attribute]


@dataclass(frozen=True)
class DenseElementsAttr:
    """``dense<...> : tensor<...>``; ``values`` are row-major, a single value when ``splat``.

    Integers (and quantized storage values) are Python ints (signless types read as two's complement), i1 are
    bools, floats are ``float(decimal text)`` or the value of a 0x bit pattern, complex numbers are ``complex``.
    """

    type: TensorType
    values: tuple[Scalar, ...]
    splat: bool = False

    @property
    def shape(self) -> tuple[int, ...]:
        return self.type.shape

    def flat(self) -> list[Scalar]:
        """All elements in row-major order (a splat expanded, up to the element limit of qcodegen/ir/limits.py)."""
        if not self.splat:
            return list(self.values)
        return list(self.values) * element_count(self.type.shape, f"splat dense<> of {self.type}")


@dataclass(frozen=True)
class TypeAttr:
    type: Type


@dataclass(frozen=True)
class SymbolRefAttr:
    path: tuple[str, ...]  # @a::@b -> ("a", "b")


@dataclass(frozen=True)
class EnumAttr:
    """A bare keyword (``SINGLE_ROUND``, ``?``) or a dialect enum such as ``#stablehlo<comparison_direction LT>``."""

    value: str
    dialect: str = ""
    kind: str = ""


@dataclass(frozen=True)
class DialectAttr:
    """Any other ``#dialect.name<...>`` attribute: ``key = value`` fields and/or positional arguments."""

    dialect: str
    name: str
    fields: dict[str, Attribute]
    args: tuple[Attribute, ...] = ()


@dataclass(frozen=True)
class DotDimensionNumbers:
    lhs_batching_dimensions: tuple[int, ...] = ()
    rhs_batching_dimensions: tuple[int, ...] = ()
    lhs_contracting_dimensions: tuple[int, ...] = ()
    rhs_contracting_dimensions: tuple[int, ...] = ()


@dataclass(frozen=True)
class GatherDimensionNumbers:
    offset_dims: tuple[int, ...] = ()
    collapsed_slice_dims: tuple[int, ...] = ()
    operand_batching_dims: tuple[int, ...] = ()
    start_indices_batching_dims: tuple[int, ...] = ()
    start_index_map: tuple[int, ...] = ()
    index_vector_dim: int = 0  # omitted from the text when 0


@dataclass(frozen=True)
class ScatterDimensionNumbers:
    update_window_dims: tuple[int, ...] = ()
    inserted_window_dims: tuple[int, ...] = ()
    input_batching_dims: tuple[int, ...] = ()
    scatter_indices_batching_dims: tuple[int, ...] = ()
    scatter_dims_to_operand_dims: tuple[int, ...] = ()
    index_vector_dim: int = 0


@dataclass(frozen=True)
class ConvDimensionNumbers:
    """Positions of each logical dimension, e.g. ``[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]`` is NHWC/HWIO/NHWC."""

    input_batch_dimension: int
    input_feature_dimension: int
    input_spatial_dimensions: tuple[int, ...]
    kernel_input_feature_dimension: int
    kernel_output_feature_dimension: int
    kernel_spatial_dimensions: tuple[int, ...]
    output_batch_dimension: int
    output_feature_dimension: int
    output_spatial_dimensions: tuple[int, ...]


Attribute = (IntegerAttr | FloatAttr | BoolAttr | StringAttr | UnitAttr | ArrayAttr | DenseArrayAttr | DictAttr
             | DenseElementsAttr | TypeAttr | SymbolRefAttr | EnumAttr | DialectAttr | DotDimensionNumbers
             | GatherDimensionNumbers | ScatterDimensionNumbers | ConvDimensionNumbers)


def int_list(attr: Attribute) -> tuple[int, ...]:
    """Integers of an ``array<i64: ...>``, an integer ``dense<...>`` or an array of integer attributes."""
    if isinstance(attr, DenseArrayAttr):
        values = attr.values
    elif isinstance(attr, DenseElementsAttr):
        values = tuple(attr.flat())
    elif isinstance(attr, ArrayAttr) and all(isinstance(e, IntegerAttr) for e in attr.elements):
        values = tuple(e.value for e in attr.elements)
    else:
        raise TypeError(f"not a list of integers: {attr!r}")
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        raise TypeError(f"not a list of integers: {attr!r}")
    return values


@dataclass(frozen=True)
class ValueRef:
    """An SSA value: ``%x`` is (``"%x"``, 0), ``%x#1`` is (``"%x"``, 1). Positions do not take part in equality."""

    name: str
    index: int = 0
    line: int = field(default=0, compare=False)
    col: int = field(default=0, compare=False)

    def __str__(self) -> str:
        return f"{self.name}#{self.index}" if self.index else self.name


@dataclass
class Argument:
    """A function or block argument."""

    name: str
    type: Type
    attributes: dict[str, Attribute] = field(default_factory=dict)
    line: int = 0
    col: int = 0

    @property
    def value(self) -> ValueRef:
        return ValueRef(self.name, 0, self.line, self.col)


@dataclass
class Operation:
    name: str  # full name: "stablehlo.add", "func.return" (for a bare "return"), "tosa.rescale", ...
    line: int
    col: int
    results: list[ValueRef] = field(default_factory=list)  # %a:2 gives (%a, 0), (%a, 1)
    operands: list[ValueRef] = field(default_factory=list)
    attributes: dict[str, Attribute] = field(default_factory=dict)
    properties: dict[str, Attribute] = field(default_factory=dict)  # generic form <{...}>
    regions: list[Region] = field(default_factory=list)
    operand_types: list[Type] = field(default_factory=list)
    result_types: list[Type] = field(default_factory=list)
    successors: list[str] = field(default_factory=list)

    def attr(self, name: str) -> Attribute | None:
        """A property or attribute by name (pretty forms store what the generic form keeps in properties)."""
        return self.properties.get(name, self.attributes.get(name))


@dataclass
class Block:
    label: str | None  # "^bb0", None for an unlabelled entry block
    arguments: list[Argument] = field(default_factory=list)
    operations: list[Operation] = field(default_factory=list)


@dataclass
class Region:
    blocks: list[Block] = field(default_factory=list)


@dataclass
class Func:
    name: str
    arguments: list[Argument]
    result_types: list[Type]
    line: int
    col: int
    result_attributes: list[dict[str, Attribute]] = field(default_factory=list)
    visibility: str = "public"
    attributes: dict[str, Attribute] = field(default_factory=dict)
    body: Region | None = None  # None for a declaration

    @property
    def operations(self) -> list[Operation]:
        """Operations of the entry block."""
        return self.body.blocks[0].operations if self.body and self.body.blocks else []


@dataclass
class Module:
    filename: str
    line_offset: int  # lines before this chunk in the file (positions in the AST are file positions)
    name: str | None = None
    attributes: dict[str, Attribute] = field(default_factory=dict)
    functions: list[Func] = field(default_factory=list)
    operations: list[Operation] = field(default_factory=list)  # top-level operations other than func.func

    def function(self, name: str) -> Func:
        for func in self.functions:
            if func.name == name:
                return func
        raise KeyError(name)
