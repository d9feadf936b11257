"""Recursive-descent parser for the MLIR textual subset of StableHLO and TOSA programs.

Entry points: ``parse_file`` / ``parse_chunks`` (``// -----`` separated inputs, one Module per chunk, positions are
file positions) and ``parse_module`` (one chunk). Every malformed input raises MlirSyntaxError ("file:line:col:
expected ..., found ..."); nesting depth is bounded so hostile input cannot exhaust the Python stack.

Both the generic op form (``"dialect.op"(%a) <{props}> ({regions}) {attrs} : (types) -> types``) and the custom
("pretty") forms printed by StableHLO are accepted; custom forms are normalised to the generic attribute names.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from ...errors import QcError
from .ast import (
    Argument,
    ArrayAttr,
    Attribute,
    Block,
    BoolAttr,
    ConvDimensionNumbers,
    DenseArrayAttr,
    DenseElementsAttr,
    DialectAttr,
    DictAttr,
    DotDimensionNumbers,
    EnumAttr,
    FloatAttr,
    Func,
    GatherDimensionNumbers,
    IntegerAttr,
    Module,
    Operation,
    Region,
    ScatterDimensionNumbers,
    StringAttr,
    SymbolRefAttr,
    TypeAttr,
    UnitAttr,
    ValueRef,
)
from .lexer import Lexer, MlirSyntaxError, Source, Token
from .types import (
    FLOAT_WIDTHS,
    ComplexType,
    FloatType,
    FunctionType,
    IndexType,
    IntegerType,
    NoneType,
    OpaqueType,
    TensorType,
    TupleType,
    Type,
    UniformQuantType,
    decode_elements,
    element_bytes,
    float_from_bits,
    storage_type,
)

MAX_DEPTH = 64  # nested brackets/regions/types; each level costs a few Python frames
_MAX_INT_WIDTH = (1 << 24) - 1  # MLIR's limit
_MAX_RESULTS = 1 << 16
_SPLIT = re.compile(r"^[ \t]*// -----[^\n]*$", re.MULTILINE)
_DIMS = re.compile(r"(\*x)|((?:(?:[0-9]+|\?)x)*)")
_INT_TYPE = re.compile(r"(si|ui|i)([0-9]+)")
_QUANT_STORAGE = re.compile(r"(si|ui|i|u)([0-9]+)")
_HEX_BLOB = re.compile(r"0x(?:[0-9a-fA-F]{2})*")
_ESCAPE = re.compile(r"\\(?:([0-9a-fA-F]{2})|(.))")
_ESCAPES = {"n": b"\n", "t": b"\t", '"': b'"', "\\": b"\\"}
_SIGNEDNESS = {"i": "signless", "si": "signed", "ui": "unsigned"}
_TYPE_WORDS = {"tensor", "tuple", "complex", "index", "none", *FLOAT_WIDTHS}
_UNSUPPORTED_ATTRS = {"dense_resource", "sparse", "affine_map", "affine_set", "strided", "opaque", "distinct"}
_BARE_OPS = {"return": "func.return", "call": "func.call"}  # the func dialect is the default inside functions
_DIRECTIONS = ("EQ", "NE", "GE", "GT", "LE", "LT")
_COMPARE_TYPES = ("NOTYPE", "FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED")
_WINDOW_ARRAYS = {"stride": "window_strides", "lhs_dilate": "lhs_dilation", "rhs_dilate": "rhs_dilation"}
_STRUCTS: dict[tuple[str, str], type] = {
    ("stablehlo", "dot"): DotDimensionNumbers,
    ("stablehlo", "gather"): GatherDimensionNumbers,
    ("stablehlo", "scatter"): ScatterDimensionNumbers,
}
_I64 = IntegerType(64)
_I32 = IntegerType(32)
_I1 = IntegerType(1)

RawElement = tuple  # (Token, negative) for a scalar, (open Token, real, imaginary) for a complex literal


def _describe(tok: Token) -> str:
    if tok.kind == "eof":
        return "end of input"
    text = tok.text if len(tok.text) <= 40 else tok.text[:37] + "..."
    return f"'{text}'"


_F64 = FloatType("f64")


class _Parser:
    def __init__(self, source: Source, start: int, end: int) -> None:
        self.src = source
        self.lexer = Lexer(source, start, end)
        self._ahead: list[Token] = []
        self._depth = 0
        self.type_aliases: dict[str, Type] = {}
        self.attr_aliases: dict[str, Attribute] = {}
        self.tok = self.lexer.next()

    # ----------------------------------------------------------------- tokens and errors

    def _advance(self) -> Token:
        tok = self.tok
        self.tok = self._ahead.pop() if self._ahead else self.lexer.next()
        return tok

    def _peek(self) -> Token:
        if not self._ahead:
            self._ahead.append(self.lexer.next())
        return self._ahead[0]

    def _rescan(self, offset: int) -> None:
        """Forget the lookahead and continue lexing at ``offset``."""
        self._ahead.clear()
        self.lexer.pos = offset

    def _fail(self, message: str, tok: Token | None = None) -> NoReturn:
        raise self.src.error((tok or self.tok).start, message)

    def _expected(self, what: str, tok: Token | None = None) -> NoReturn:
        self._fail(f"expected {what}, found {_describe(tok or self.tok)}", tok)

    def _accept(self, kind: str) -> Token | None:
        return self._advance() if self.tok.kind == kind else None

    def _expect(self, kind: str, what: str | None = None) -> Token:
        if self.tok.kind != kind:
            self._expected(what or f"'{kind}'")
        return self._advance()

    def _at_word(self, word: str) -> bool:
        return self.tok.kind == "ident" and self.tok.text == word

    def _accept_word(self, word: str) -> bool:
        if self._at_word(word):
            self._advance()
            return True
        return False

    def _expect_word(self, word: str) -> Token:
        if not self._at_word(word):
            self._expected(f"'{word}'")
        return self._advance()

    def _enter(self) -> None:
        self._depth += 1
        if self._depth > MAX_DEPTH:
            self._fail(f"nesting deeper than {MAX_DEPTH} levels")

    def _position(self, tok: Token) -> tuple[int, int]:
        return self.src.position(tok.start)

    # ----------------------------------------------------------------- literals

    def _int_value(self, tok: Token, text: str | None = None) -> int:
        text = tok.text if text is None else text
        try:
            return int(text, 16) if text.startswith("0x") else int(text)
        except ValueError:  # beyond Python's limit on decimal digits
            self._fail("integer literal is too long", tok)

    def _signed_int(self, what: str = "integer") -> int:
        negative = self._accept("-") is not None
        value = self._int_value(self._expect("int", what))
        return -value if negative else value

    def _int_list(self) -> tuple[int, ...]:
        self._expect("[")
        values: list[int] = []
        if not self._accept("]"):
            values.append(self._signed_int())
            while self._accept(","):
                values.append(self._signed_int())
            self._expect("]")
        return tuple(values)

    def _bool(self) -> bool:
        if self.tok.kind == "ident" and self.tok.text in ("true", "false"):
            return self._advance().text == "true"
        self._expected("'true' or 'false'")

    def _string(self, tok: Token) -> str:
        body = tok.text[1:-1]
        if "\\" not in body:
            return body
        out = bytearray()
        last = 0
        for m in _ESCAPE.finditer(body):
            out += body[last:m.start()].encode()
            if m[1]:
                out.append(int(m[1], 16))
            elif m[2] in _ESCAPES:
                out += _ESCAPES[m[2]]
            else:
                self._fail(f"unknown escape '\\{m[2]}' in string", tok)
            last = m.end()
        out += body[last:].encode()
        return out.decode("utf-8", errors="replace")

    def _symbol_name(self, tok: Token) -> str:
        return self._string(Token("string", tok.text[1:], tok.start, tok.end)) if tok.text[1] == '"' else tok.text[1:]

    def _float_value(self, tok: Token, negative: bool, element: FloatType | None) -> float:
        """A float literal, an integer literal read as a float, or (with a float type) a 0x bit pattern."""
        if tok.kind == "float" or (tok.kind == "ident" and tok.text in ("inf", "nan")):
            value = float(tok.text)
        elif tok.kind == "int" and tok.text.startswith("0x") and element is not None:
            if negative:
                self._fail("a hexadecimal float literal cannot have a leading '-'", tok)
            value = float_from_bits(element, self._int_value(tok))
            if value is None:
                self._fail(f"hexadecimal literal {tok.text} is not a {element} bit pattern", tok)
        elif tok.kind == "int":
            try:
                value = float(self._int_value(tok))
            except OverflowError:
                self._fail("integer literal is too large for a float", tok)
        else:
            self._expected(f"{element or 'float'} literal", tok)
        return -value if negative else value

    def _check_int(self, value: int, element: IntegerType, tok: Token) -> int:
        """Range-check an integer literal; signless values may be written unsigned and read as two's complement."""
        low = element.min_value
        high = (1 << element.width) - 1 if element.signedness == "signless" else element.max_value
        if not low <= value <= high:
            self._fail(f"integer {value} does not fit {element}", tok)
        if element.width == 1 and element.signedness == "signless":
            return value & 1
        return value - (1 << element.width) if value > element.max_value else value

    # ----------------------------------------------------------------- types

    def _type(self) -> Type:
        self._enter()
        try:
            return self._type_inner()
        finally:
            self._depth -= 1

    def _type_inner(self) -> Type:
        tok = self.tok
        if tok.kind == "(":
            return self._function_type()
        if tok.kind == "bang":
            return self._dialect_type()
        if tok.kind == "ident":
            word = tok.text
            if word == "tensor":
                return self._tensor_type()
            if word in FLOAT_WIDTHS:
                self._advance()
                return FloatType(word)
            m = _INT_TYPE.fullmatch(word)
            if m:
                self._advance()
                width = self._int_value(tok, m[2])
                if not 1 <= width <= _MAX_INT_WIDTH:
                    self._fail(f"integer width must be between 1 and {_MAX_INT_WIDTH}", tok)
                return IntegerType(width, _SIGNEDNESS[m[1]])
            if word in ("index", "none"):
                self._advance()
                return IndexType() if word == "index" else NoneType()
            if word == "complex":
                self._advance()
                self._expect("<")
                element = self._type()
                self._expect(">")
                return ComplexType(element)
            if word == "tuple":
                self._advance()
                self._expect("<")
                return TupleType(tuple(self._types_until(">")))
        self._expected("type")

    def _types_until(self, close: str) -> list[Type]:
        if self._accept(close):
            return []
        types = [self._type()]
        while self._accept(","):
            types.append(self._type())
        self._expect(close)
        return types

    def _function_type(self) -> FunctionType:
        self._expect("(")
        inputs = self._types_until(")")
        self._expect("->")
        results = self._types_until(")") if self._accept("(") else [self._type()]
        return FunctionType(tuple(inputs), tuple(results))

    def _tensor_type(self) -> TensorType:
        self._advance()
        lt = self._expect("<")
        self._rescan(lt.end)  # shapes like 2x0x3x need character-level scanning
        m = self.lexer.scan(_DIMS)
        shape = None
        if not m[1]:
            shape = tuple(None if d == "?" else self._int_value(lt, d) for d in m[2].split("x")[:-1])
        self.tok = self.lexer.next()
        element = self._type()
        encoding = self._attribute() if self._accept(",") else None
        self._expect(">")
        return TensorType(shape, element, encoding)

    def _dialect_type(self) -> Type:
        tok = self._advance()
        if tok.text in self.type_aliases:
            return self.type_aliases[tok.text]
        dialect, _, name = tok.text[1:].partition(".")
        if not name:
            self._fail(f"undefined type alias '{tok.text}'", tok)
        if (dialect, name) == ("quant", "uniform"):
            return self._quant_uniform()
        return OpaqueType(dialect, name, self._opaque_body() if self.tok.kind == "<" else "")

    def _opaque_body(self) -> str:
        lt = self._advance()
        depth = 1
        while depth:
            tok = self._advance()
            if tok.kind == "eof":
                self._fail("unterminated '<'", lt)
            depth += (tok.kind == "<") - (tok.kind == ">")
        return self.src.text[lt.end:tok.start].strip()

    def _quant_uniform(self) -> UniformQuantType:
        self._expect("<")
        tok = self._expect("ident", "quantized storage type (i8, u8, ...)")
        m = _QUANT_STORAGE.fullmatch(tok.text)
        if m is None:
            self._expected("quantized storage type (i8, u8, ...)", tok)
        width = self._int_value(tok, m[2])
        if not 1 <= width <= 64:
            self._fail("quantized storage width must be between 1 and 64", tok)
        storage = IntegerType(width, {"si": "signed", "i": "signless"}.get(m[1], "unsigned"))
        low, high = storage.min_value, storage.max_value
        if self.tok.kind == "<":
            at = self._advance()
            low = self._signed_int("storage minimum")
            self._expect(":")
            high = self._signed_int("storage maximum")
            self._expect(">")
            if not storage.min_value <= low < high <= storage.max_value:
                self._fail(f"storage range {low}:{high} is not a range within {m[0]}", at)
        self._expect(":")
        at = self.tok
        expressed = self._type()
        if not isinstance(expressed, FloatType):
            self._expected("float expressed type", at)
        axis, blocks = self._quant_dimension()
        self._expect(",")
        at = self.tok
        params: list[tuple[Token, float, int]] = []
        if self.tok.kind == "{":
            shape = self._scale_list(params)
        else:
            params.append(self._scale_zero_point())
            shape = ()
        if axis is not None and len(shape) != 1:
            self._fail("per-axis quantization needs a flat {scale:zero_point, ...} list", at)
        if blocks and not shape:
            self._fail("sub-channel quantization needs a {{scale:zero_point, ...}, ...} list", at)
        if axis is None and not blocks and shape:
            self._fail("a list of scales needs a quantized dimension (':axis' after the expressed type)", at)
        self._expect(">")
        return UniformQuantType(storage, expressed, tuple(p[1] for p in params), tuple(p[2] for p in params),
                                tuple(p[0].text for p in params), low, high, axis, blocks, shape)

    def _quant_dimension(self) -> tuple[int | None, tuple[tuple[int, int], ...]]:
        """Optional ``:axis`` (per axis) or ``:{dim:block_size, ...}`` (sub-channel) after the expressed type."""
        if not self._accept(":"):
            return None, ()
        if not self._accept("{"):
            return self._signed_int("quantized dimension"), ()
        blocks = []
        while True:
            dim = self._signed_int("quantized dimension")
            self._expect(":")
            blocks.append((dim, self._signed_int("block size")))
            if not self._accept(","):
                break
        self._expect("}")
        return None, tuple(blocks)

    def _scale_zero_point(self) -> tuple[Token, float, int]:
        """``scale[:zero_point]`` as MLIR reads it: the scale a double (a 0x literal is the bit pattern of a double,
        as in MLIR's parseFloat; the range of the expressed type is checked by the StableHLO verifier), the zero
        point an i64."""
        tok = self.tok
        if tok.kind not in ("float", "int"):
            self._expected("scale")
        self._advance()
        scale = self._float_value(tok, False, _F64)
        zero_point = self._signed_int("zero point") if self._accept(":") else 0
        if not -(1 << 63) <= zero_point < 1 << 63:
            self._fail(f"zero point {zero_point} does not fit i64", tok)
        return tok, scale, zero_point

    def _scale_list(self, params: list[tuple[Token, float, int]]) -> tuple[int, ...]:
        self._enter()
        try:
            self._expect("{")
            if self.tok.kind == "{":
                inner = self._scale_list(params)
                count = 1
                while self._accept(","):
                    at = self.tok
                    if self._scale_list(params) != inner:
                        self._fail("scale lists have different lengths", at)
                    count += 1
            else:
                inner = ()
                params.append(self._scale_zero_point())
                count = 1
                while self._accept(","):
                    params.append(self._scale_zero_point())
                    count += 1
            self._expect("}")
            return (count, *inner)
        finally:
            self._depth -= 1

    # ----------------------------------------------------------------- attributes

    def _attribute(self) -> Attribute:
        self._enter()
        try:
            return self._attribute_inner()
        finally:
            self._depth -= 1

    def _attribute_inner(self) -> Attribute:
        tok = self.tok
        kind = tok.kind
        if kind in ("int", "float", "-"):
            return self._number_attr()
        if kind == "string":
            return StringAttr(self._string(self._advance()))
        if kind == "[":
            self._advance()
            elements: list[Attribute] = []
            if not self._accept("]"):
                elements.append(self._attribute())
                while self._accept(","):
                    elements.append(self._attribute())
                self._expect("]")
            return ArrayAttr(tuple(elements))
        if kind == "{":
            return DictAttr(self._dict_attr())
        if kind == "symbol":
            return self._symbol_ref()
        if kind == "hash":
            return self._hash_attr()
        if kind in ("bang", "("):
            return TypeAttr(self._type())
        if kind == "ident":
            word = tok.text
            if word in ("true", "false"):
                return BoolAttr(self._bool())
            if word == "unit":
                self._advance()
                return UnitAttr()
            if word == "dense":
                return self._dense()
            if word == "array":
                return self._dense_array()
            if word in _UNSUPPORTED_ATTRS:
                self._fail(f"'{word}' attributes are not supported")
            if word in _TYPE_WORDS or _INT_TYPE.fullmatch(word):
                return TypeAttr(self._type())
            self._advance()
            return EnumAttr(word)
        self._expected("attribute value")

    def _number_attr(self, typed: bool = True) -> IntegerAttr | FloatAttr:
        """A number with an optional ``: type`` (not looked for when ``typed`` is false: a custom form's
        ``keyword = number`` before the op's ``: types``)."""
        negative = self._accept("-") is not None
        tok = self.tok
        if tok.kind not in ("int", "float"):
            self._expected("number")
        self._advance()
        at = self.tok
        element = self._type() if typed and self._accept(":") else None
        text = ("-" if negative else "") + tok.text
        if tok.kind == "float" or isinstance(element, FloatType):
            if element is not None and not isinstance(element, FloatType):
                self._fail(f"float literal with non-float type {element}", at)
            return FloatAttr(self._float_value(tok, negative, element), text, element)
        value = self._int_value(tok)
        value = -value if negative else value
        if isinstance(element, IntegerType):
            value = self._check_int(value, element, tok)
        return IntegerAttr(value, element)

    def _dict_attr(self) -> dict[str, Attribute]:
        self._expect("{")
        entries: dict[str, Attribute] = {}
        if self._accept("}"):
            return entries
        while True:
            tok = self.tok
            if tok.kind == "ident":
                key = tok.text
            elif tok.kind == "string":
                key = self._string(tok)
            else:
                self._expected("attribute name")
            if key in entries:
                self._fail(f"duplicate attribute '{key}'", tok)
            self._advance()
            entries[key] = self._attribute() if self._accept("=") else UnitAttr()
            if not self._accept(","):
                break
        self._expect("}")
        return entries

    def _symbol_ref(self) -> SymbolRefAttr:
        path = [self._symbol_name(self._expect("symbol", "symbol @name"))]
        while self._accept("::"):
            path.append(self._symbol_name(self._expect("symbol", "nested symbol @name")))
        return SymbolRefAttr(tuple(path))

    def _hash_attr(self) -> Attribute:
        tok = self._advance()
        if tok.text in self.attr_aliases:
            return self.attr_aliases[tok.text]
        if self.tok.kind != "<":
            self._fail(f"undefined attribute alias '{tok.text}'", tok)
        self._advance()
        dialect, _, name = tok.text[1:].partition(".")
        if not name:  # #stablehlo<comparison_direction LT>
            kind = self._expect("ident", "enum kind").text
            value = EnumAttr(self._expect("ident", f"{kind} value").text, dialect, kind)
        elif (dialect, name) == ("stablehlo", "conv"):
            value = self._conv_attr_body(tok)
        else:
            fields, args = self._struct_body()
            cls = _STRUCTS.get((dialect, name))
            value = DialectAttr(dialect, name, fields, tuple(args)) if cls is None else self._struct(cls, fields, args,
                                                                                                      tok)
        self._expect(">")
        return value

    def _struct_body(self) -> tuple[dict[str, Attribute], list[Attribute]]:
        """``key = value`` fields and positional values of a ``#dialect.name<...>`` body, up to the ``>``."""
        fields: dict[str, Attribute] = {}
        args: list[Attribute] = []
        if self.tok.kind == ">":
            return fields, args
        while True:
            if self.tok.kind == "ident" and self._peek().kind == "=":
                key = self._advance()
                self._advance()
                if key.text in fields:
                    self._fail(f"duplicate field '{key.text}'", key)
                fields[key.text] = self._attribute()
            elif self._accept("?"):
                args.append(EnumAttr("?"))
            else:
                args.append(self._attribute())
            if not self._accept(","):
                return fields, args

    def _struct(self, cls: type, fields: dict[str, Attribute], args: list[Attribute], at: Token) -> Any:
        """Build a dimension-numbers dataclass from parsed fields (int fields from integers, others from lists)."""
        if args:
            self._fail(f"expected 'name = value' fields in {at.text}", at)
        values: dict[str, Any] = {}
        for field in dataclasses.fields(cls):
            attr = fields.pop(field.name, None)
            if attr is None:
                if field.default is dataclasses.MISSING:
                    self._fail(f"{at.text} lacks field '{field.name}'", at)
                continue
            if field.type == "int":
                if not isinstance(attr, IntegerAttr):
                    self._fail(f"field '{field.name}' of {at.text} must be an integer", at)
                values[field.name] = attr.value
            else:
                if not isinstance(attr, ArrayAttr) or not all(isinstance(e, IntegerAttr) for e in attr.elements):
                    self._fail(f"field '{field.name}' of {at.text} must be a list of integers", at)
                values[field.name] = tuple(e.value for e in attr.elements)
        if fields:
            self._fail(f"unknown field '{next(iter(fields))}' in {at.text}", at)
        return cls(**values)

    def _dense_array(self) -> DenseArrayAttr:
        self._advance()
        self._expect("<")
        at = self.tok
        element = self._type()
        if not isinstance(element, IntegerType | FloatType):
            self._fail(f"array<> needs an integer or float element type, found {element}", at)
        values: list[Any] = []
        if self._accept(":"):
            convert = self._element_converter(element, at)
            values.append(convert(self._dense_element()))
            while self._accept(","):
                values.append(convert(self._dense_element()))
        self._expect(">")
        return DenseArrayAttr(element, tuple(values))

    def _dense(self) -> DenseElementsAttr:
        self._advance()
        self._expect("<")
        blob = self._accept("string")
        raw: list[RawElement] = []
        shape = None if blob or self.tok.kind == ">" else self._dense_literal(raw)
        self._expect(">")
        self._expect(":", "':' and the type of the dense literal")
        at = self.tok
        tensor = self._type()
        if not isinstance(tensor, TensorType) or tensor.is_dynamic:
            self._fail("a dense literal needs a statically shaped tensor type", at)
        if blob:
            return self._dense_blob(blob, tensor)
        count = tensor.num_elements
        if shape is None:
            if count:
                self._fail(f"empty dense literal for {count} elements", at)
            return DenseElementsAttr(tensor, ())
        if shape and shape != tensor.shape:
            self._fail(f"dense literal of shape {list(shape)} does not match {list(tensor.shape)}", at)
        convert = self._element_converter(tensor.element, at)
        return DenseElementsAttr(tensor, tuple(map(convert, raw)), not shape and count != 1)

    def _dense_literal(self, raw: list[RawElement]) -> tuple[int, ...]:
        """Append the elements of a (nested) literal to ``raw``; return its shape (() for a single value)."""
        if self.tok.kind != "[":
            raw.append(self._dense_element())
            return ()
        self._enter()
        try:
            self._advance()
            if self._accept("]"):
                return (0,)
            inner = self._dense_literal(raw)
            count = 1
            while self._accept(","):
                at = self.tok
                if self._dense_literal(raw) != inner:
                    self._fail("dense literal rows have different shapes", at)
                count += 1
            self._expect("]")
            return (count, *inner)
        finally:
            self._depth -= 1

    def _dense_element(self) -> RawElement:
        if self.tok.kind == "(":
            open_tok = self._advance()
            real = self._dense_scalar()
            self._expect(",")
            imaginary = self._dense_scalar()
            self._expect(")")
            return open_tok, real, imaginary
        return self._dense_scalar()

    def _dense_scalar(self) -> tuple[Token, bool]:
        negative = self._accept("-") is not None
        tok = self.tok
        if tok.kind in ("int", "float") or (tok.kind == "ident" and tok.text in ("true", "false", "inf", "nan")):
            self._advance()
            return tok, negative
        self._expected("element literal")

    def _element_converter(self, element: Type, at: Token) -> Callable[[RawElement], Any]:
        """A function turning a raw literal into the Python value of an ``element`` (storage) value."""
        target = storage_type(element)
        if isinstance(target, ComplexType):
            part = self._element_converter(target.element, at)

            def complex_value(raw: RawElement) -> complex:
                if len(raw) != 3:
                    self._expected(f"(real, imaginary) literal for {target}", raw[0])
                return complex(part(raw[1]), part(raw[2]))
            return complex_value
        if isinstance(target, FloatType):
            def float_value(raw: RawElement) -> float:
                if len(raw) != 2 or (raw[0].kind == "ident" and raw[0].text in ("true", "false")):
                    self._expected(f"{target} literal", raw[0])
                return self._float_value(raw[0], raw[1], target)
            return float_value
        if isinstance(target, IntegerType):
            def int_value(raw: RawElement) -> int | bool:
                tok = raw[0]
                if len(raw) == 2 and tok.kind == "ident" and tok.text in ("true", "false") and target.width == 1:
                    value = int(tok.text == "true")
                elif len(raw) == 2 and tok.kind == "int":
                    value = self._int_value(tok)
                else:
                    self._expected(f"{target} literal", tok)
                value = self._check_int(-value if raw[1] else value, target, tok)
                return bool(value) if target.width == 1 else value
            return int_value
        self._fail(f"dense literals of {element} are not supported", at)

    def _dense_blob(self, tok: Token, tensor: TensorType) -> DenseElementsAttr:
        text = self._string(tok)
        if not _HEX_BLOB.fullmatch(text):
            self._fail("expected a hex blob \"0x...\" with whole bytes", tok)
        size = element_bytes(tensor.element)
        if size is None:
            self._fail(f"hex blobs of {tensor.element} elements are not supported", tok)
        data = bytes.fromhex(text[2:])
        count = tensor.num_elements
        splat = len(data) == size and count != 1
        if not splat and len(data) != size * count:
            self._fail(f"hex blob has {len(data)} bytes, {tensor} needs {size * count}", tok)
        return DenseElementsAttr(tensor, tuple(decode_elements(tensor.element, data)), splat)

    def _conv_attr_body(self, at: Token) -> ConvDimensionNumbers:
        if self._accept_word("raw"):
            fields, args = self._struct_body()
            return self._struct(ConvDimensionNumbers, fields, args, at)
        return self._conv_dims()

    def _conv_dims(self) -> ConvDimensionNumbers:
        """``[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]``."""
        at = self.tok
        lhs = self._conv_layout("b", "f")
        self._expect_word("x")
        rhs = self._conv_layout("i", "o")
        self._expect("->")
        out = self._conv_layout("b", "f")
        if not len(lhs[2]) == len(rhs[2]) == len(out[2]):
            self._fail("input, kernel and output layouts have different numbers of spatial dimensions", at)
        return ConvDimensionNumbers(*lhs, *rhs, *out)

    def _conv_layout(self, first: str, second: str) -> tuple[int, int, tuple[int, ...]]:
        at = self._expect("[")
        positions: dict[str | int, int] = {}
        while not self._accept("]"):
            tok = self.tok
            if tok.kind == "int" and not tok.text.startswith("0x"):
                key: str | int = self._int_value(tok)
            elif tok.kind == "ident" and tok.text in (first, second):
                key = tok.text
            else:
                self._expected(f"'{first}', '{second}' or a spatial dimension number")
            if key in positions:
                self._fail(f"dimension '{key}' appears twice", tok)
            positions[key] = len(positions)
            self._advance()
            if self.tok.kind != "]":
                self._expect(",")
        spatial = len(positions) - 2
        if first not in positions or second not in positions or any(i not in positions for i in range(spatial)):
            self._fail(f"a layout needs '{first}', '{second}' and spatial dimensions 0..n-1", at)
        return positions[first], positions[second], tuple(positions[i] for i in range(spatial))

    # ----------------------------------------------------------------- operations

    def _value(self) -> ValueRef:
        tok = self._expect("value", "SSA value")
        name, _, index = tok.text.partition("#")
        line, col = self._position(tok)
        return ValueRef(name, self._int_value(tok, index) if index else 0, line, col)

    def _values_until(self, close: str) -> list[ValueRef]:
        if self._accept(close):
            return []
        values = [self._value()]
        while self._accept(","):
            values.append(self._value())
        self._expect(close)
        return values

    def _value_name(self) -> Token:
        tok = self._expect("value", "SSA value name")
        if "#" in tok.text:
            self._fail("a defined value cannot carry '#'", tok)
        return tok

    def _result_defs(self) -> list[ValueRef]:
        results: list[ValueRef] = []
        while True:
            tok = self._value_name()
            count = 1
            if self._accept(":"):
                at = self.tok
                count = self._int_value(self._expect("int", "result count"))
                if not 1 <= count <= _MAX_RESULTS:
                    self._fail(f"result count must be between 1 and {_MAX_RESULTS}", at)
            line, col = self._position(tok)
            results.extend(ValueRef(tok.text, i, line, col) for i in range(count))
            if not self._accept(","):
                break
        self._expect("=")
        return results

    def _operation(self) -> Operation:
        line, col = self._position(self.tok)
        results = self._result_defs() if self.tok.kind == "value" else []
        op = Operation("", line, col, results)
        if self.tok.kind == "string":
            self._generic_op(op)
        elif self.tok.kind == "ident":
            tok = self._advance()
            op.name = _BARE_OPS.get(tok.text, tok.text)
            if "." not in op.name:
                self._fail(f"unknown operation '{tok.text}'", tok)
            form = _FORMS.get(op.name)
            if form is None:
                self._default_form(op, _KEYWORDS.get(op.name, {}))
            else:
                form(self, op)
        else:
            self._expected("operation")
        self._skip_location()
        return op

    def _generic_op(self, op: Operation) -> None:
        tok = self._advance()
        op.name = self._string(tok)
        if not op.name:
            self._fail("empty operation name is invalid", tok)
        self._expect("(")
        op.operands = self._values_until(")")
        if self._accept("["):
            while not self._accept("]"):
                op.successors.append(self._expect("caret", "block label").text)
                if self.tok.kind != "]":
                    self._expect(",")
        if self._accept("<"):
            op.properties = self._dict_attr()
            self._expect(">")
        if self._accept("("):
            op.regions.append(self._region())
            while self._accept(","):
                op.regions.append(self._region())
            self._expect(")")
        if self.tok.kind == "{":
            op.attributes = self._dict_attr()
        at = self._expect(":")
        self._apply_signature(op, self._function_type(), at)

    def _apply_signature(self, op: Operation, signature: FunctionType | list[Type], at: Token) -> None:
        """Set operand/result types from ``: (ins) -> outs`` or from a custom form's short type list."""
        operands = len(op.operands)
        if isinstance(signature, FunctionType):
            inputs, outputs = list(signature.inputs), list(signature.results)
            if len(inputs) != operands:
                self._fail(f"'{op.name}' has {operands} operands but {len(inputs)} operand types", at)
        elif len(signature) == 1:  # all operands and results share the type
            inputs, outputs = signature * operands, signature * len(op.results)
        elif op.name == "stablehlo.select" and len(signature) == 2 and operands == 3:  # pred type, value type
            inputs, outputs = [signature[0], signature[1], signature[1]], [signature[1]]
        elif len(signature) == operands and len(op.results) in (0, operands):  # e.g. return, optimization_barrier
            inputs, outputs = signature, signature if op.results else []
        else:
            self._fail(f"cannot match {len(signature)} types to the {operands} operands of '{op.name}'; "
                       "expected a function type", at)
        op.operand_types, op.result_types = inputs, outputs
        self._check_result_count(op, at)

    def _check_result_count(self, op: Operation, at: Token) -> None:
        if op.results and len(op.results) != len(op.result_types):
            self._fail(f"'{op.name}' has {len(op.result_types)} results but {len(op.results)} are bound", at)

    def _signature(self) -> FunctionType | list[Type]:
        if self.tok.kind == "(":
            return self._function_type()
        types = [self._type()]
        while self._accept(","):
            types.append(self._type())
        return types

    def _skip_location(self) -> None:
        if not (self._at_word("loc") and self._peek().kind == "("):
            return
        self._advance()
        open_tok = self._advance()
        depth = 1
        while depth:
            tok = self._advance()
            if tok.kind == "eof":
                self._fail("unterminated loc(", open_tok)
            depth += (tok.kind == "(") - (tok.kind == ")")

    # ----------------------------------------------------------------- custom op forms

    def _finish(self, op: Operation) -> None:
        """Trailing ``<{properties}>``, ``{attributes}`` and ``: types`` of a custom form."""
        if self._accept("<"):
            op.properties.update(self._dict_attr())
            self._expect(">")
        if self.tok.kind == "{":
            op.attributes.update(self._dict_attr())
        if self.tok.kind == ":":
            at = self._advance()
            self._apply_signature(op, self._signature(), at)
        elif op.operands or op.results:
            self._expected(f"':' and the types of '{op.name}'")

    def _default_form(self, op: Operation, keywords: dict[str, Callable[[_Parser], dict[str, Any]]]) -> None:
        """``op %a, %b, keyword = value, ... {attrs} : types``."""
        self._operand_items(op, keywords, op.attributes)
        self._finish(op)

    def _operand_items(self, op: Operation, keywords: dict[str, Callable[[_Parser], dict[str, Any]]],
                       into: dict[str, Any]) -> None:
        if self.tok.kind != "value" and not self._at_keyword(keywords):
            return
        while True:
            if self.tok.kind == "value":
                op.operands.append(self._value())
            elif self._at_keyword(keywords):
                word = self._advance().text
                self._advance()
                into.update(keywords[word](self))
            else:
                alternatives = "".join(f" or '{k} ='" for k in keywords)
                self._expected(f"SSA value{alternatives} in '{op.name}'")
            if not self._accept(","):
                return

    def _at_keyword(self, keywords: dict[str, Any]) -> bool:
        return self.tok.kind == "ident" and self.tok.text in keywords and self._peek().kind == "="

    def _constant_form(self, op: Operation) -> None:
        if self._accept("("):  # stablehlo.constant() {value = ...} : () -> type (printed for quantized values)
            self._expect(")")
            self._finish(op)
            return
        if self.tok.kind == "{":
            op.attributes.update(self._dict_attr())
        at = self.tok
        value = self._attribute()
        if not isinstance(value, DenseElementsAttr | IntegerAttr | FloatAttr) or value.type is None:
            self._fail("expected a typed constant value such as dense<...> : tensor<...>", at)
        op.attributes["value"] = value
        op.result_types = [value.type]
        self._check_result_count(op, at)

    def _check_const_form(self, op: Operation) -> None:
        """``check.expect_eq_const %x, dense<...> : tensor<...>``."""
        op.operands.append(self._value())
        self._expect(",")
        at = self.tok
        value = self._attribute()
        if not isinstance(value, DenseElementsAttr):
            self._fail("expected dense<...> : tensor<...>", at)
        op.attributes["value"] = value
        op.operand_types = [value.type]
        if self._accept(","):
            self._expect_word("tolerance")
            self._expect("=")
            op.attributes["tolerance"] = self._number_attr(typed=False)
        if self.tok.kind == "{":
            op.attributes.update(self._dict_attr())

    def _cast_form(self, op: Operation) -> None:
        """``quant.qcast %x : tensor<4xf32> to tensor<4x!quant.uniform<...>>`` (also dcast, scast)."""
        op.operands.append(self._value())
        if self.tok.kind == "{":
            op.attributes.update(self._dict_attr())
        at = self._expect(":")
        op.operand_types = [self._type()]
        self._expect_word("to")
        op.result_types = [self._type()]
        self._check_result_count(op, at)

    def _compare_form(self, op: Operation) -> None:
        """``stablehlo.compare GT, %a, %b[, FLOAT] : types``."""
        op.attributes["comparison_direction"] = self._enum(_DIRECTIONS, "comparison_direction")
        self._expect(",")
        op.operands.append(self._value())
        while self._accept(","):
            if self.tok.kind == "ident":
                op.attributes["compare_type"] = self._enum(_COMPARE_TYPES, "comparison_type")
                break
            op.operands.append(self._value())
        self._finish(op)

    def _enum(self, allowed: tuple[str, ...], kind: str) -> EnumAttr:
        if self.tok.kind != "ident" or self.tok.text not in allowed:
            self._expected(f"{kind} ({', '.join(allowed)})")
        return EnumAttr(self._advance().text, "stablehlo", kind)

    def _call_form(self, op: Operation) -> None:
        """``func.call @f(%a) : ...`` and ``stablehlo.custom_call @target(%a) {attrs} : ...``."""
        symbol = self._symbol_ref()
        if op.name == "func.call":
            op.attributes["callee"] = symbol
        else:
            op.attributes["call_target_name"] = StringAttr("::".join(symbol.path))
        self._expect("(")
        op.operands = self._values_until(")")
        self._finish(op)

    def _composite_form(self, op: Operation) -> None:
        """``stablehlo.composite "name" %a, %b {decomposition = @impl} : ...``."""
        op.attributes["name"] = StringAttr(self._string(self._expect("string", "composite name")))
        self._default_form(op, {})

    def _slice_form(self, op: Operation) -> None:
        """``stablehlo.slice %x [0:2, 1:4:2] : ...``."""
        op.operands.append(self._value())
        self._expect("[")
        starts: list[int] = []
        limits: list[int] = []
        strides: list[int] = []
        while not self._accept("]"):
            starts.append(self._signed_int("slice start"))
            self._expect(":")
            limits.append(self._signed_int("slice limit"))
            strides.append(self._signed_int("slice stride") if self._accept(":") else 1)
            if self.tok.kind != "]":
                self._expect(",")
        for name, values in (("start_indices", starts), ("limit_indices", limits), ("strides", strides)):
            op.attributes[name] = DenseArrayAttr(_I64, tuple(values))
        self._finish(op)

    def _dot_general_form(self, op: Operation) -> None:
        """``stablehlo.dot_general %a, %b, batching_dims = [0] x [0], contracting_dims = [2] x [1], ...``."""
        dims: dict[str, Any] = {}
        self._operand_items(op, _DOT_GENERAL_KEYWORDS, dims)
        for name in ("precision_config", "algorithm"):
            if name in dims:
                op.attributes[name] = dims.pop(name)
        op.attributes["dot_dimension_numbers"] = DotDimensionNumbers(**dims)
        self._finish(op)

    def _dims_pair(self, kind: str) -> dict[str, tuple[int, ...]]:
        lhs = self._int_list()
        self._expect_word("x")
        return {f"lhs_{kind}_dimensions": lhs, f"rhs_{kind}_dimensions": self._int_list()}

    def _precision(self) -> dict[str, Attribute]:
        self._expect("[")
        values: list[Attribute] = []
        while not self._accept("]"):
            values.append(EnumAttr(self._expect("ident", "precision").text, "stablehlo", "precision"))
            if self.tok.kind != "]":
                self._expect(",")
        return {"precision_config": ArrayAttr(tuple(values))}

    def _algorithm(self) -> dict[str, Attribute]:
        self._expect("<")
        fields, args = self._struct_body()
        self._expect(">")
        return {"algorithm": DialectAttr("stablehlo", "dot_algorithm", fields, tuple(args))}

    def _float_format(self) -> dict[str, Attribute]:
        """``format = e8m10`` of reduce_precision."""
        tok = self._expect("ident", "float format eNmM")
        m = re.fullmatch(r"e([0-9]+)m([0-9]+)", tok.text)
        if m is None:
            self._expected("float format eNmM", tok)
        return {"exponent_bits": IntegerAttr(self._int_value(tok, m[1]), _I32),
                "mantissa_bits": IntegerAttr(self._int_value(tok, m[2]), _I32)}

    def _convolution_form(self, op: Operation) -> None:
        """``stablehlo.convolution(%a, %w) dim_numbers = ..., window = {...} {attrs} : ...``."""
        self._expect("(")
        op.operands = self._values_until(")")
        self._expect_word("dim_numbers")
        self._expect("=")
        op.attributes["dimension_numbers"] = self._conv_dims()
        if self._accept(","):
            self._expect_word("window")
            self._expect("=")
            self._window(op.attributes)
        self._finish(op)

    def _window(self, into: dict[str, Attribute]) -> None:
        self._expect("{")
        while not self._accept("}"):
            key = self._expect("ident", "window attribute (stride, pad, lhs_dilate, rhs_dilate, reverse)")
            self._expect("=")
            if key.text in _WINDOW_ARRAYS:
                into[_WINDOW_ARRAYS[key.text]] = DenseArrayAttr(_I64, self._int_list())
            elif key.text == "pad":
                into["padding"] = self._padding()
            elif key.text == "reverse":
                into["window_reversal"] = DenseArrayAttr(_I1, self._bool_list())
            else:
                self._fail(f"unknown window attribute '{key.text}'", key)
            if self.tok.kind != "}":
                self._expect(",")

    def _padding(self) -> DenseElementsAttr:
        self._expect("[")
        values: list[int] = []
        while not self._accept("]"):
            self._expect("[")
            values.append(self._signed_int("low padding"))
            self._expect(",")
            values.append(self._signed_int("high padding"))
            self._expect("]")
            if self.tok.kind != "]":
                self._expect(",")
        return DenseElementsAttr(TensorType((len(values) // 2, 2), _I64), tuple(values))

    def _bool_list(self) -> tuple[bool, ...]:
        self._expect("[")
        values: list[bool] = []
        while not self._accept("]"):
            if self.tok.kind == "int" and self.tok.text in ("0", "1"):
                values.append(self._advance().text == "1")
            else:
                values.append(self._bool())
            if self.tok.kind != "]":
                self._expect(",")
        return tuple(values)

    def _reduce_form(self, op: Operation) -> None:
        """``stablehlo.reduce(%x init: %c) applies stablehlo.add across dimensions = [1] : ...`` or the same
        without ``applies`` followed by ``reducer(%a: T, %b: T) { ... }``."""
        inputs: list[ValueRef] = []
        inits: list[ValueRef] = []
        while True:
            self._expect("(")
            inputs.append(self._value())
            self._expect_word("init")
            self._expect(":")
            inits.append(self._value())
            self._expect(")")
            if not self._accept(","):
                break
        op.operands = inputs + inits
        body = None
        if self._accept_word("applies"):
            if self.tok.kind != "ident" or "." not in self.tok.text:
                self._expected("operation name after 'applies'")
            body = self._advance()
        self._expect_word("across")
        self._expect_word("dimensions")
        self._expect("=")
        op.attributes["dimensions"] = DenseArrayAttr(_I64, self._int_list())
        self._finish(op)
        op.regions = [self._reducer(len(inputs)) if body is None else self._applied_body(body, op)]

    def _applied_body(self, tok: Token, op: Operation) -> Region:
        """The region that ``applies stablehlo.add`` stands for: (lhs, rhs) -> add -> return."""
        if len(op.operands) != 2 or len(op.operand_types) != 2:
            self._fail("'applies' needs one input, one init value and a function type", tok)
        scalar = op.operand_types[1]
        line, col = self._position(tok)
        lhs = Argument("%^lhs", scalar, line=line, col=col)
        rhs = Argument("%^rhs", scalar, line=line, col=col)
        result = ValueRef("%^result", 0, line, col)
        body = Operation(tok.text, line, col, [result], [lhs.value, rhs.value], operand_types=[scalar, scalar],
                         result_types=[scalar])
        ret = Operation("stablehlo.return", line, col, operands=[result], operand_types=[scalar])
        return Region([Block(None, [lhs, rhs], [body, ret])])

    def _reducer(self, count: int) -> Region:
        at = self._expect_word("reducer")
        pairs: list[tuple[Argument, Argument]] = []
        while self._accept("("):
            lhs = self._block_argument()
            self._expect(",")
            pairs.append((lhs, self._block_argument()))
            self._expect(")")
        if len(pairs) != count:
            self._fail(f"expected {count} reducer argument pairs, found {len(pairs)}", at)
        return self._region([lhs for lhs, _ in pairs] + [rhs for _, rhs in pairs])

    def _while_form(self, op: Operation) -> None:
        """``stablehlo.while(%iterArg = %x) : types [attributes {...}] cond { ... } do { ... }``."""
        self._expect("(")
        names: list[Token] = []
        while not self._accept(")"):
            names.append(self._value_name())
            self._expect("=")
            op.operands.append(self._value())
            if self.tok.kind != ")":
                self._expect(",")
        at = self._expect(":")
        types = self._signature()
        if isinstance(types, FunctionType) or len(types) != len(names):
            self._fail(f"expected {len(names)} loop-carried types", at)
        op.operand_types, op.result_types = types, list(types)
        self._check_result_count(op, at)
        if self._accept_word("attributes"):
            op.attributes.update(self._dict_attr())
        positions = [self._position(tok) for tok in names]
        for word in ("cond", "do"):
            self._expect_word(word)
            arguments = [Argument(tok.text, t, line=line, col=col)
                         for tok, t, (line, col) in zip(names, types, positions, strict=True)]
            op.regions.append(self._region(arguments))

    # ----------------------------------------------------------------- regions, functions, modules

    def _region(self, entry: list[Argument] | None = None) -> Region:
        self._enter()
        try:
            self._expect("{")
            region = Region()
            if self.tok.kind != "caret":
                block = Block(None, list(entry or []))
                self._block_operations(block)
                if block.operations or block.arguments:
                    region.blocks.append(block)
            while self.tok.kind == "caret":
                region.blocks.append(self._labelled_block(entry if not region.blocks else None))
            self._expect("}")
            return region
        finally:
            self._depth -= 1

    def _labelled_block(self, entry: list[Argument] | None) -> Block:
        label = self._advance()
        block = Block(label.text)
        if self._accept("("):
            while not self._accept(")"):
                block.arguments.append(self._block_argument())
                if self.tok.kind != ")":
                    self._expect(",")
        if entry is not None:
            if block.arguments:
                self._fail("the entry block's arguments are already defined", label)
            block.arguments = list(entry)
        self._expect(":")
        self._block_operations(block)
        return block

    def _block_operations(self, block: Block) -> None:
        while self.tok.kind not in ("}", "caret", "eof"):
            block.operations.append(self._operation())

    def _block_argument(self) -> Argument:
        tok = self._value_name()
        self._expect(":")
        line, col = self._position(tok)
        argument = Argument(tok.text, self._type(), line=line, col=col)
        if self.tok.kind == "{":
            argument.attributes = self._dict_attr()
        self._skip_location()
        return argument

    def _func(self) -> Func:
        keyword = self._advance()
        line, col = self._position(keyword)
        visibility = "public"
        if self.tok.kind == "ident" and self.tok.text in ("public", "private", "nested"):
            visibility = self._advance().text
        name = self._symbol_name(self._expect("symbol", "function name @name"))
        self._expect("(")
        arguments: list[Argument] = []
        while not self._accept(")"):
            if self.tok.kind == "value":
                arguments.append(self._block_argument())
            else:  # declaration: types only
                arg_line, arg_col = self._position(self.tok)
                arguments.append(Argument("", self._type(), line=arg_line, col=arg_col))
                if self.tok.kind == "{":
                    arguments[-1].attributes = self._dict_attr()
            if self.tok.kind != ")":
                self._expect(",")
        func = Func(name, arguments, [], line, col, visibility=visibility)
        if self._accept("->"):
            self._func_results(func)
        if self._accept_word("attributes"):
            func.attributes = self._dict_attr()
        if self.tok.kind == "{":
            if any(not a.name for a in arguments):
                self._fail(f"function @{name} has a body, so its arguments need names", keyword)
            func.body = self._region(arguments)
        self._skip_location()
        return func

    def _func_results(self, func: Func) -> None:
        if not self._accept("("):
            func.result_types.append(self._type())
            func.result_attributes.append({})
            return
        while not self._accept(")"):
            func.result_types.append(self._type())
            func.result_attributes.append(self._dict_attr() if self.tok.kind == "{" else {})
            if self.tok.kind != ")":
                self._expect(",")

    def _alias_definition(self) -> bool:
        """``#name = attribute`` / ``!name = type`` (location aliases are skipped)."""
        if self.tok.kind not in ("hash", "bang") or self._peek().kind != "=":
            return False
        name = self._advance()
        self._advance()
        if name.kind == "bang":
            self.type_aliases[name.text] = self._type()
        elif self._at_word("loc") and self._peek().kind == "(":
            self._skip_location()
        else:
            self.attr_aliases[name.text] = self._attribute()
        return True

    def _module_items(self, module: Module, end: str) -> None:
        while self.tok.kind not in (end, "eof"):
            if self._alias_definition():
                continue
            if self._at_word("func.func"):
                module.functions.append(self._func())
            elif self._at_word("module"):
                self._fail("nested modules are not supported")
            else:
                module.operations.append(self._operation())

    def module(self, line_offset: int) -> Module:
        module = Module(self.src.filename, line_offset)
        while self._alias_definition():
            pass
        if self._accept_word("module"):
            if self.tok.kind == "symbol":
                module.name = self._symbol_name(self._advance())
            if self._accept_word("attributes"):
                module.attributes = self._dict_attr()
            self._expect("{")
            self._module_items(module, "}")
            self._expect("}")
            self._skip_location()
            while self._alias_definition():
                pass
        else:
            self._module_items(module, "eof")
        self._expect("eof", "end of input")
        self._check_values(module)
        return module

    # ----------------------------------------------------------------- SSA value checks

    def _check_values(self, module: Module) -> None:
        for func in module.functions:
            if func.body is not None:
                self._check_region(func.body, ())
        self._check_region(Region([Block(None, [], module.operations)]), ())

    def _check_region(self, region: Region, outer: tuple[dict[ValueRef, Type | None], ...]) -> None:
        """Every use names a value of this region or an enclosing one, with the type the value was defined with;
        no value is defined twice in a region."""
        own: dict[ValueRef, Type | None] = {}
        for block in region.blocks:
            defined = [(a.value, a.type) for a in block.arguments]
            for op in block.operations:
                types = op.result_types if len(op.result_types) == len(op.results) else [None] * len(op.results)
                defined += zip(op.results, types, strict=True)
            for value, t in defined:
                if value in own:
                    raise MlirSyntaxError(self.src.filename, value.line, value.col, f"redefinition of {value}")
                own[value] = t
        scopes = (own, *outer)
        for block in region.blocks:
            for op in block.operations:
                uses = op.operand_types if len(op.operand_types) == len(op.operands) else [None] * len(op.operands)
                for value, used in zip(op.operands, uses, strict=True):
                    scope = next((scope for scope in scopes if value in scope), None)
                    if scope is None:
                        raise MlirSyntaxError(self.src.filename, value.line, value.col, f"use of undefined {value}")
                    if used is not None and scope[value] is not None and used != scope[value]:
                        raise MlirSyntaxError(self.src.filename, value.line, value.col,
                                              f"use of {value} as {used}, defined as {scope[value]}")
                for nested in op.regions:
                    self._check_region(nested, scopes)


def _i64_array(name: str) -> Callable[[_Parser], dict[str, Attribute]]:
    return lambda p: {name: DenseArrayAttr(_I64, p._int_list())}


def _i64(name: str) -> Callable[[_Parser], dict[str, Attribute]]:
    return lambda p: {name: IntegerAttr(p._signed_int(), _I64)}


_FORMS: dict[str, Callable[[_Parser, Operation], None]] = {
    "stablehlo.constant": _Parser._constant_form,
    "check.expect_eq_const": _Parser._check_const_form,
    "check.expect_almost_eq_const": _Parser._check_const_form,
    "stablehlo.compare": _Parser._compare_form,
    "stablehlo.custom_call": _Parser._call_form,
    "func.call": _Parser._call_form,
    "stablehlo.composite": _Parser._composite_form,
    "stablehlo.slice": _Parser._slice_form,
    "stablehlo.dot_general": _Parser._dot_general_form,
    "stablehlo.convolution": _Parser._convolution_form,
    "stablehlo.reduce": _Parser._reduce_form,
    "stablehlo.while": _Parser._while_form,
    **{f"quant.{cast}": _Parser._cast_form for cast in ("qcast", "dcast", "scast")},
}
_KEYWORDS: dict[str, dict[str, Callable[[_Parser], dict[str, Any]]]] = {
    "stablehlo.transpose": {"dims": _i64_array("permutation")},
    "stablehlo.broadcast_in_dim": {"dims": _i64_array("broadcast_dimensions")},
    "stablehlo.dynamic_broadcast_in_dim": {"dims": _i64_array("broadcast_dimensions")},
    "stablehlo.reverse": {"dims": _i64_array("dimensions")},
    "stablehlo.broadcast": {"sizes": _i64_array("broadcast_sizes")},
    "stablehlo.dynamic_slice": {"sizes": _i64_array("slice_sizes")},
    "stablehlo.pad": {"low": _i64_array("edge_padding_low"), "high": _i64_array("edge_padding_high"),
                      "interior": _i64_array("interior_padding")},
    "stablehlo.concatenate": {"dim": _i64("dimension")},
    "stablehlo.get_dimension_size": {"dim": _i64("dimension")},
    "stablehlo.set_dimension_size": {"dim": _i64("dimension")},
    "stablehlo.iota": {"dim": _i64("iota_dimension")},
    "stablehlo.dynamic_iota": {"dim": _i64("iota_dimension")},
    "stablehlo.cholesky": {"lower": lambda p: {"lower": BoolAttr(p._bool())}},
    "stablehlo.reduce_precision": {"format": _Parser._float_format},
    "stablehlo.dot": {"precision": _Parser._precision},
    "check.expect_almost_eq": {"tolerance": lambda p: {"tolerance": p._number_attr(typed=False)}},
}
_DOT_GENERAL_KEYWORDS: dict[str, Callable[[_Parser], dict[str, Any]]] = {
    "batching_dims": lambda p: p._dims_pair("batching"),
    "contracting_dims": lambda p: p._dims_pair("contracting"),
    "precision": _Parser._precision,
    "algorithm": _Parser._algorithm,
}


def parse_module(text: str, filename: str = "<string>") -> Module:
    """Parse ``text`` as one module (no ``// -----`` splitting)."""
    return _Parser(Source(text, filename), 0, len(text)).module(0)


def parse_chunks(text: str, filename: str = "<string>") -> list[Module]:
    """Parse each ``// -----`` separated chunk of ``text`` as a module; positions stay positions in ``text``."""
    source = Source(text, filename)
    bounds = [0]
    for m in _SPLIT.finditer(text):
        bounds += [m.start(), m.end()]
    bounds.append(len(text))
    return [_Parser(source, start, end).module(source.position(start)[0] - 1)
            for start, end in zip(bounds[0::2], bounds[1::2], strict=True)]


def parse_file(path: str | Path) -> list[Module]:
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise QcError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        col = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise MlirSyntaxError(str(path), line, col, "expected UTF-8 text, found an invalid byte") from exc
    return parse_chunks(text, str(path))
