#!/bin/sh
# A broken backend fails the suite, the shrunk case lands in the failures
# folder, and both `varlen repro` and the binary's own --repro replay it to
# the same failure.
#
#   broken.sh BROKEN_BINARY VARLEN_BINARY SCRATCH_DIR
set -u
broken=$1 varlen=$2 scratch=$3
rm -rf "$scratch" && mkdir -p "$scratch"
VARLEN_FAILURES_DIR="$scratch" "$broken" --gtest_filter='Conformance.Numerics/*' >"$scratch/suite.log" 2>&1
status=$?
[ "$status" -eq 1 ] || { echo "suite exited $status, expected 1"; cat "$scratch/suite.log"; exit 1; }
case_file="$scratch/flash_nan_to_zero-Numerics.json"
[ -f "$case_file" ] || { echo "no $case_file"; cat "$scratch/suite.log"; exit 1; }
grep -q "reproduce: $broken --repro=$case_file" "$scratch/suite.log" ||
  { echo "no reproduce line"; cat "$scratch/suite.log"; exit 1; }
for replay in "$varlen repro $case_file --backend=flash_nan_to_zero" "$broken --repro=$case_file"; do
  $replay >"$scratch/replay.log" 2>&1
  status=$?
  [ "$status" -eq 1 ] || { echo "$replay exited $status, expected 1"; cat "$scratch/replay.log"; exit 1; }
  grep -q "elements not NaN/Inf (or of another kind) where the reference is" "$scratch/replay.log" ||
    { echo "$replay: not the same failure"; cat "$scratch/replay.log"; exit 1; }
done
# A manifest that expects the failure turns it into XFAIL; in a strict run an
# entry for a property that passes is XPASS, a failure.
cat >"$scratch/expected.json" <<'JSON'
{"backend": "flash_nan_to_zero", "entries": [
  {"test": "Conformance.Numerics", "expect": "fail", "reason": "NaN swallowed", "issue": "#1"}]}
JSON
VARLEN_EXPECTATIONS="$scratch/expected.json" VARLEN_FAILURES_DIR="$scratch" \
  "$broken" --gtest_filter='Conformance.Numerics/*:Expectations.*' >"$scratch/xfail.log" 2>&1 ||
  { echo "an expected failure failed the run"; cat "$scratch/xfail.log"; exit 1; }
grep -q "XFAIL   \] expected failure: fail: NaN swallowed (#1)" "$scratch/xfail.log" ||
  { echo "no XFAIL line"; cat "$scratch/xfail.log"; exit 1; }
cat >"$scratch/strict.json" <<'JSON'
{"strict": true, "entries": [
  {"test": "Conformance.SequencePermutation", "expect": "fail", "reason": "thought broken"}]}
JSON
VARLEN_EXPECTATIONS="$scratch/strict.json" VARLEN_FAILURES_DIR="$scratch" \
  "$broken" --gtest_filter='Conformance.SequencePermutation/*' >"$scratch/xpass.log" 2>&1 &&
  { echo "an unexpected pass did not fail a strict run"; cat "$scratch/xpass.log"; exit 1; }
grep -q "XPASS: passed, but the expectations manifest says fail: thought broken" "$scratch/xpass.log" ||
  { echo "no XPASS failure"; cat "$scratch/xpass.log"; exit 1; }
echo "ok: $case_file replays to the same failure; XFAIL and XPASS reported"
