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
echo "ok: $case_file replays to the same failure"
