#!/usr/bin/env bash
# Run the TOSA conformance suite of tosa-tools 2026.8.0 with qcodegen as the system under test.
#
#   scripts/tosa_conformance.sh OUT_DIR [extra tosa_verif_build_tests arguments...]
#
# 1. generates the suite into OUT_DIR/tests (tosa_verif_build_tests, seed 42; generation is skipped when
#    OUT_DIR/tests already holds tests),
# 2. runs the reference model (runner.tosa_refmodel_sut_run, plus the compliance runner the runner adds itself)
#    and qcodegen (qcodegen.conformance.tosa_sut) on every test,
# 3. prints the totals and qcodegen's summary: pass rate, per-operator counts, failure reasons; a passing positive
#    test must also match the reference model's results bit for bit. Exit status 0 when every test passes.
#
# Environment: PROFILE (tosa-pro-int), EXTENSION (none, or a space-separated list such as "tosa-ext-int16
# tosa-ext-int4": the generator then also writes the tests of those extensions, and only the tests that need one of
# them are run), TEST_TYPE (positive | negative | both; default positive), JOBS (2), TARGET (qcodegen target,
# generic), RANGES (data | type, see qcodegen/conformance/tosa_sut.py).
# Examples:
#   scripts/tosa_conformance.sh cts-pro-int                                   # full PRO-INT positive suite
#   EXTENSION="tosa-ext-int16 tosa-ext-int4 tosa-ext-doubleround tosa-ext-inexactround" \
#     scripts/tosa_conformance.sh cts-extensions
#   TEST_TYPE=both scripts/tosa_conformance.sh cts-small --tensor-dim-range 1,4 --num-rand-permutations 1
set -euo pipefail

OUT=${1:?usage: $0 OUT_DIR [extra tosa_verif_build_tests arguments...]}
shift
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-python3}
PROFILE=${PROFILE:-tosa-pro-int}
EXTENSION=${EXTENSION:-none}
TEST_TYPE=${TEST_TYPE:-positive}
JOBS=${JOBS:-2}
TARGET=${TARGET:-generic}
RANGES=${RANGES:-data}
GEN_LIB=$("$PYTHON" -c 'import os, tosa_reference_model as m; print(os.path.dirname(m.__file__))')/libtosa_reference_generate_lib.so

mkdir -p "$OUT"
if [ -z "$(find "$OUT/tests" -name desc.json -print -quit 2>/dev/null)" ]; then
  echo "generating: profile $PROFILE, extension $EXTENSION, $TEST_TYPE tests $*"
  # shellcheck disable=SC2086  # (EXTENSION is a list)
  time tosa_verif_build_tests -o "$OUT/tests" --seed 42 --profile "$PROFILE" --extension $EXTENSION \
    --test-type "$TEST_TYPE" --generate-lib-path "$GEN_LIB" "$@" > "$OUT/generate.log" 2>&1
fi
echo "$(find "$OUT/tests" -name desc.json | wc -l) tests in $OUT/tests"

# the tests to run: all of them, or with EXTENSION only those that need one of the extensions
find "$OUT/tests" -name desc.json | sort | EXTENSION="$EXTENSION" "$PYTHON" -c '
import json, os, sys
wanted = set(os.environ["EXTENSION"].split()) - {"none"}
for line in sys.stdin:
    desc = json.load(open(line.strip()))
    needs = set(desc.get("test_requirements", {}).get("extensions_required", []))
    if not wanted or needs & wanted:
        print(os.path.dirname(line.strip()))' > "$OUT/tests.txt"
echo "running $(wc -l < "$OUT/tests.txt") of them"
time PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" tosa_verif_run_tests -T "$OUT/tests.txt" -j "$JOBS" \
  --test-type "$TEST_TYPE" \
  --sut-module qcodegen.conformance.tosa_sut runner.tosa_refmodel_sut_run \
  --sut-module-args "qcodegen.conformance.tosa_sut:target=$TARGET" "qcodegen.conformance.tosa_sut:ranges=$RANGES" \
  --xunit-file "$OUT/result.xml" > "$OUT/run.log" 2>&1 || true
grep '^Totals' "$OUT/run.log"
PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" -m qcodegen.conformance.tosa_sut "$OUT/result.xml" \
  | tee "$OUT/summary.txt"
