"""StableHLO's verifier tests on quantized types (openxla/stablehlo tests/ops_stablehlo_quantized.mlir): every
`expected-error` case must be rejected with a GraphError by the front end (also those of ops qcodegen does not
compile: verification comes before support), and every valid function must pass verification (it may still be
unsupported)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from qcodegen.errors import GraphError, QcError
from qcodegen.frontends import stablehlo as shlo
from qcodegen.frontends.mlir import parse_file
from qcodegen.lower import RULES

SHARED = Path(os.environ.get("QC_SHARED_DIR", Path(__file__).resolve().parents[2] / "shared"))
FILE = SHARED / "testdata" / "stablehlo" / "ops_stablehlo_quantized.mlir"

pytestmark = pytest.mark.skipif(not FILE.is_file(), reason=f"shared test data not found: {FILE} (set QC_SHARED_DIR)")

_EXPECTED = re.compile(r"expected-error(?:-re)?@[+-]\d+\s*\{\{(.*?)\}\}")
_OP = re.compile(r'"?(stablehlo\.\w+|func\.func)')


def _cases() -> tuple[list, list]:
    """(expected-error cases, valid functions) as (id, function, op, message)."""
    if not FILE.is_file():
        return [], []
    chunks = re.split(r"^// -----.*$", FILE.read_text(), flags=re.M)
    modules = parse_file(FILE)
    assert len(chunks) == len(modules)
    errors, valid = [], []
    for chunk, module in zip(chunks, modules, strict=True):
        match = _EXPECTED.search(chunk)
        for func in module.functions:
            fn = shlo.Function(func, module.filename)
            case = (f"{func.name}:{func.line}", fn)
            if match is None:
                valid.append(case)
            else:
                op = _OP.search(chunk[match.end():]).group(1)
                errors.append((*case, op, match.group(1)))
    return errors, valid


ERRORS, VALID = _cases()


def _error_params() -> list:
    return [pytest.param(fn, op, message, id=name) for name, fn, op, message in ERRORS]


@pytest.mark.parametrize(("fn", "op", "message"), _error_params())
def test_expected_error_is_rejected(fn: shlo.Function, op: str, message: str) -> None:
    with pytest.raises(GraphError):
        shlo.convert(fn)


@pytest.mark.parametrize("fn", [pytest.param(fn, id=name) for name, fn in VALID])
def test_valid_function_passes_verification(fn: shlo.Function) -> None:
    try:
        program = shlo.convert(fn)
    except GraphError as exc:
        pytest.fail(f"valid function rejected: {exc}")
    except QcError:
        return  # unsupported (dynamic shapes, tokens, ...): not a verification error
    assert program.graph.name == fn.name


def test_counts() -> None:
    """102 expected-error cases, 81 of them on ops qcodegen lowers (or on function types); all rejected."""
    assert len(ERRORS) == 102
    supported = [c for c in ERRORS if c[2] == "func.func" or c[2] in RULES]
    assert len(supported) == 81
    rejected = 0
    for _, fn, _, _ in ERRORS:
        try:
            shlo.convert(fn)
        except GraphError:
            rejected += 1
    assert rejected == 102


def test_messages_name_the_position() -> None:
    name, fn, _, message = next(c for c in ERRORS if c[0].startswith("transpose_c4"))
    with pytest.raises(GraphError, match=r"ops_stablehlo_quantized\.mlir:\d+:\d+: 'stablehlo\.transpose' op "
                                         r"operand quantization_dimension 0 is not same as permutation\[1\] = 2"):
        shlo.convert(fn)
    assert "operand quantization_dimension 0 is not same as permutation[1] = 2" in message
