#!/bin/sh
# Runs a command and checks its exit status and output.
#   expect.sh STATUS [--line TEXT | --contains TEXT | --lacks TEXT]... -- COMMAND [ARGS...]
# --line: some output line equals TEXT exactly; --contains: the output
# contains TEXT; --lacks: it does not. stdout and stderr are checked together.
set -u
want_status=$1
shift
checks_file=$(mktemp)
trap 'rm -f "$checks_file" "$checks_file.out"' EXIT
while [ "$1" != "--" ]; do
  printf '%s\n%s\n' "$1" "$2" >> "$checks_file"
  shift 2
done
shift
"$@" > "$checks_file.out" 2>&1
status=$?
failed=0
if [ "$status" -ne "$want_status" ]; then
  echo "exit status $status, expected $want_status"
  failed=1
fi
while IFS= read -r kind && IFS= read -r text; do
  case "$kind" in
    --line) grep -Fqx -- "$text" "$checks_file.out" || { echo "no line equal to: $text"; failed=1; } ;;
    --contains) grep -Fq -- "$text" "$checks_file.out" || { echo "output lacks: $text"; failed=1; } ;;
    --lacks) ! grep -Fq -- "$text" "$checks_file.out" || { echo "output holds: $text"; failed=1; } ;;
    *) echo "unknown check $kind"; failed=1 ;;
  esac
done < "$checks_file"
if [ "$failed" -ne 0 ]; then
  echo "--- output of: $*"
  cat "$checks_file.out"
fi
exit "$failed"
