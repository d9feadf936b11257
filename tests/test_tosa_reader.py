"""qcodegen's own .tosa reader (qcodegen/frontends/flatbuffer.py + tosa_schema.py): TOSA flatbuffers written here
with the flatbuffers runtime's Builder (no tosa-tools needed) are read into the expected graph; every truncation
and every damaged offset or length of such a file is a GraphError (never struct.error, IndexError, a read outside
the buffer or a wrong value); the schema tables agree with tosa-tools' generated code where that is installed."""

import importlib
import inspect
import re
import struct

import numpy as np
import pytest

flatbuffers = pytest.importorskip("flatbuffers", reason="the .tosa reader needs the flatbuffers runtime")

from qcodegen.compiler import plan  # noqa: E402
from qcodegen.errors import GraphError, LimitError, QcError  # noqa: E402
from qcodegen.frontends import tosa_schema as S  # noqa: E402
from qcodegen.frontends.flatbuffer import FlatbufferError, FlatTable  # noqa: E402
from qcodegen.frontends.tosa import graph_from_tosa  # noqa: E402
from qcodegen.reference.executor import run_reference  # noqa: E402

DTYPE = {name: i for i, name in enumerate(S.DTYPE)}
OP = {name: i for i, name in enumerate(S.OPS)}


class TosaWriter:
    """One basic block of a TOSA graph, written table by table in the schema's field slots."""

    def __init__(self) -> None:
        self.b = flatbuffers.Builder(1024)
        self.tensors: list[int] = []
        self.operators: list[int] = []

    def _strings(self, names: list[str]) -> int:
        offsets = [self.b.CreateString(n) for n in names]
        self.b.StartVector(4, len(offsets), 4)
        for o in reversed(offsets):
            self.b.PrependUOffsetTRelative(o)
        return self.b.EndVector()

    def _tables(self, offsets: list[int]) -> int:
        self.b.StartVector(4, len(offsets), 4)
        for o in reversed(offsets):
            self.b.PrependUOffsetTRelative(o)
        return self.b.EndVector()

    def tensor(self, name: str, shape: list[int], dtype: str, data: bytes | None = None) -> str:
        b = self.b
        n = b.CreateString(name)
        s = b.CreateNumpyVector(np.asarray(shape, np.int32))
        d = b.CreateByteVector(data) if data is not None else None
        b.StartObject(14)
        b.PrependUOffsetTRelativeSlot(S.TENSOR_NAME, n, 0)
        b.PrependUOffsetTRelativeSlot(S.TENSOR_SHAPE, s, 0)
        b.PrependUint32Slot(S.TENSOR_TYPE, DTYPE[dtype], 0)
        if d is not None:
            b.PrependUOffsetTRelativeSlot(S.TENSOR_DATA, d, 0)
        self.tensors.append(b.EndObject())
        return name

    def const(self, name: str, values: list[int], dtype: str, store: str) -> str:
        self.tensor(name, [len(values)], dtype, np.asarray(values, store).tobytes())
        self.operator("CONST", [], [name])
        return name

    def operator(self, kind: str, inputs: list[str], outputs: list[str], attributes: dict | None = None,
                 table: str | None = None) -> None:
        """`attributes`: the fields of the attribute table (None: no table) of operator `table` (default `kind`)."""
        b = self.b
        table = table or kind
        attribute = self._attribute(table, attributes) if attributes is not None else None
        ins, outs = self._strings(inputs), self._strings(outputs)
        b.StartObject(6)
        b.PrependUint32Slot(S.OPERATOR_OP, OP[kind], 0)
        if attribute is not None:
            b.PrependUint8Slot(S.OPERATOR_ATTRIBUTE_TYPE, OP[table], 0)
            b.PrependUOffsetTRelativeSlot(S.OPERATOR_ATTRIBUTE, attribute, 0)
        b.PrependUOffsetTRelativeSlot(S.OPERATOR_INPUTS, ins, 0)
        b.PrependUOffsetTRelativeSlot(S.OPERATOR_OUTPUTS, outs, 0)
        self.operators.append(b.EndObject())

    def _attribute(self, kind: str, values: dict) -> int:
        b = self.b
        fields = S.ATTRIBUTES.get(kind, ())
        vectors = {f: b.CreateNumpyVector(np.asarray(values[f], np.int32 if t == "[int32]" else np.uint8))
                   for f, t in fields if t.startswith("[") and f in values}
        b.StartObject(len(fields))
        for slot, (field, kind_of_field) in enumerate(fields):
            if field not in values:
                continue
            if field in vectors:
                b.PrependUOffsetTRelativeSlot(slot, vectors[field], 0)
            elif kind_of_field == "bool":
                b.PrependBoolSlot(slot, values[field], False)
            elif kind_of_field == "int32":
                b.PrependInt32Slot(slot, values[field], 0)
            else:  # an enum, by name
                b.PrependUint32Slot(slot, S.ENUMS[kind_of_field].index(values[field]), 0)
        return b.EndObject()

    def finish(self, inputs: list[str], outputs: list[str]) -> bytes:
        b = self.b
        ops, tensors = self._tables(self.operators), self._tables(self.tensors)
        ins, outs = self._strings(inputs), self._strings(outputs)
        b.StartObject(6)
        b.PrependUOffsetTRelativeSlot(S.BLOCK_OPERATORS, ops, 0)
        b.PrependUOffsetTRelativeSlot(S.BLOCK_TENSORS, tensors, 0)
        b.PrependUOffsetTRelativeSlot(S.BLOCK_INPUTS, ins, 0)
        b.PrependUOffsetTRelativeSlot(S.BLOCK_OUTPUTS, outs, 0)
        blocks = self._tables([b.EndObject()])
        b.StartObject(2)
        b.PrependUOffsetTRelativeSlot(S.REGION_BLOCKS, blocks, 0)
        regions = self._tables([b.EndObject()])
        b.StartObject(4)
        b.PrependInt32Slot(0, 1, -1)  # Version: 1.0
        b.PrependInt32Slot(1, 0, -1)
        version = b.EndObject()
        b.StartObject(4)
        b.PrependUOffsetTRelativeSlot(0, version, 0)
        b.PrependUOffsetTRelativeSlot(S.GRAPH_REGIONS, regions, 0)
        b.Finish(b.EndObject(), file_identifier=S.FILE_IDENTIFIER)
        return bytes(b.Output())


def rescale_clamp_graph(name: str = "x") -> bytes:
    """x (i8 [2, 3]) -> RESCALE by 2^30 / 2^31 (shift 31), zero points -1 / 4, SINGLE_ROUND -> CLAMP [-20, 20]."""
    w = TosaWriter()
    w.tensor(name, [2, 3], "INT8")
    multiplier = w.const("m", [1 << 30], "INT32", "<i4")
    shift = w.const("s", [31], "INT8", "i1")
    zp_in, zp_out = w.const("zi", [-1], "INT8", "i1"), w.const("zo", [4], "INT8", "i1")
    w.tensor("r", [2, 3], "INT8")
    w.tensor("y", [2, 3], "INT8")
    w.operator("RESCALE", [name, multiplier, shift, zp_in, zp_out], ["r"],
               {"scale32": True, "rounding_mode": "SINGLE_ROUND", "per_channel": False})
    w.operator("CLAMP", ["r"], ["y"], {"min_val": [0xEC], "max_val": [20], "nan_mode": "PROPAGATE"})
    return w.finish([name], ["y"])


def test_reads_tensors_constants_and_attributes():
    graph = graph_from_tosa(rescale_clamp_graph())
    assert [op.kind for op in graph.ops] == ["tosa.rescale", "tosa.clamp"]
    assert graph.ops[0].attrs == {"scale32": True, "rounding_mode": "SINGLE_ROUND", "per_channel": False,
                                  "input_unsigned": False, "output_unsigned": False}
    assert graph.ops[1].attrs == {"min_val": -20, "max_val": 20, "nan_mode": "PROPAGATE"}
    assert graph.tensors["m"].data.tolist() == [1 << 30] and graph.tensors["zi"].data.tolist() == [-1]
    assert graph.inputs == ["x"] and graph.outputs == ["y"] and graph.tensors["x"].shape == (2, 3)
    x = np.array([[-128, -1, 0], [5, 40, 127]], np.int8)
    y = run_reference(plan(graph), [x])["y"]
    # (x + 1) * 2^30 / 2^31, rounded half up, + 4, clamped to [-20, 20]
    assert np.array_equal(y, np.clip(np.floor((x.astype(np.int64) + 1) / 2 + 0.5) + 4, -20, 20))


def test_every_truncation_is_a_graph_error():
    raw = rescale_clamp_graph()
    assert raw.endswith(b"x\0\0\0")  # the last string written first: its NUL and padding are never read
    for size in range(len(raw) - 3):
        with pytest.raises(GraphError):
            graph_from_tosa(raw[:size])


def _u32_positions(raw: bytes) -> list[int]:
    return list(range(0, len(raw) - 3, 4))


@pytest.mark.parametrize("value", [0, 1, 3, 0x7FFFFFFF, 0xFFFFFFFF, 0xFFFFFFF0])
def test_every_damaged_word_is_an_error_or_a_graph(value):
    """Each 4-byte word (root offset, soffsets, vtable entries, offsets, vector and string lengths, data) replaced:
    the reader gives a graph or a QcError, nothing else."""
    raw = rescale_clamp_graph()
    outcomes = {"graph": 0, "error": 0}
    for pos in _u32_positions(raw):
        damaged = bytearray(raw)
        struct.pack_into("<I", damaged, pos, value)
        try:
            graph_from_tosa(bytes(damaged))
            outcomes["graph"] += 1
        except QcError as exc:
            assert len(str(exc)) <= 300
            outcomes["error"] += 1
    assert outcomes["error"] > 0, outcomes


def test_damaged_tables_name_what_is_wrong():
    raw = bytearray(rescale_clamp_graph())
    root = struct.unpack_from("<I", raw, 0)[0]
    struct.pack_into("<i", raw, root, -0x10000)  # the root table's vtable far outside the buffer
    with pytest.raises(FlatbufferError, match="damaged flatbuffer: TOSA: vtable at byte .* outside the buffer"):
        graph_from_tosa(bytes(raw))
    with pytest.raises(FlatbufferError, match="table at byte 100000 is outside"):
        FlatTable(bytes(64), 100000, "t")


def test_long_damaged_name_is_shortened():
    raw = rescale_clamp_graph(name="n" * 6000)
    graph = graph_from_tosa(raw)  # a long name is fine
    assert graph.inputs == ["n" * 6000]
    w = TosaWriter()
    w.tensor("\x00\x1b[31m" + "x" * 6000, [2, 2], "INT8")
    w.tensor("\x00\x1b[31m" + "x" * 6000, [2, 2], "INT8")
    with pytest.raises(GraphError) as info:
        graph_from_tosa(w.finish([], []))
    message = str(info.value)
    assert len(message) <= 300 and "\\x1b" in message and "\x1b" not in message and "…" in message


def test_declared_size_is_limited_before_any_data_is_read():
    w = TosaWriter()
    w.tensor("big", [65536, 65536, 16], "INT32", b"\0" * 16)
    with pytest.raises(LimitError, match="QC_MAX_TENSOR_ELEMENTS"):
        graph_from_tosa(w.finish([], []))


def test_attribute_table_of_another_operator_is_an_error():
    w = TosaWriter()
    w.tensor("a", [2], "INT32")
    w.tensor("b", [2], "INT32")
    w.operator("ADD", ["a", "a"], ["b"], {"axis": 0}, table="CONCAT")
    with pytest.raises(GraphError, match=r"operator 0 \(ADD\): its attribute table is the one of CONCAT"):
        graph_from_tosa(w.finish(["a"], ["b"]))


def _generated_enum(name: str) -> dict[int, str]:
    cls = getattr(importlib.import_module(f"tosa.{name}"), name)
    return {v: k for k, v in vars(cls).items() if not k.startswith("_") and isinstance(v, int)}


def test_schema_tables_agree_with_tosa_tools():
    """The enums and every attribute table's field slots, against the code tosa-tools generated from tosa.fbs."""
    pytest.importorskip("tosa.Op", reason="tosa-tools is not installed (only this cross-check needs it)")
    assert _generated_enum("Op") == dict(enumerate(S.OPS))
    assert _generated_enum("DType") == dict(enumerate(S.DTYPE))
    assert _generated_enum("RoundingMode") == dict(enumerate(S.ROUNDING_MODE))
    assert _generated_enum("ResizeMode") == dict(enumerate(S.RESIZE_MODE))
    assert _generated_enum("NanPropagationMode") == dict(enumerate(S.NAN_MODE))
    assert _generated_enum("BlockSize") == S.BLOCK_SIZE
    accessor = re.compile(r"def (\w+)\(self[^)]*\):\s*\n\s*o = flatbuffers.number_types.UOffsetTFlags.py_type\("
                          r"self._tab.Offset\((\d+)\)\)")
    for value, table in _generated_enum("Attribute").items():
        if value == 0:
            continue
        source = inspect.getsource(getattr(importlib.import_module(f"tosa.{table}"), table))
        slots: dict[int, str] = {}
        for method, offset in accessor.findall(source):
            slots.setdefault((int(offset) - 4) // 2, re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", method).lower())
        assert slots == {k: f for k, (f, _) in enumerate(S.ATTRIBUTES.get(S.OPS[value], ()))}, table
