#!/bin/sh
# Installs this build tree into a scratch prefix, then configures, builds and
# runs conformance/examples/toy_backend against it with find_package(varlen),
# exactly as an out-of-tree backend would (smoke tier, at a quarter of its
# counts: this checks the installed package, the toy backend's own suite
# runs in full in the build tree), then the same backend as a plugin of the
# installed `varlen` program.
#
#   example_from_install.sh BUILD_DIR SOURCE_DIR CXX "CXX_FLAGS" "LINK_FLAGS"
set -eu
build=$1 source=$2 cxx=$3 cxx_flags=$4 link_flags=$5
scratch="$build/install-test"
rm -rf "$scratch"
cmake --install "$build" --prefix "$scratch/prefix" >/dev/null
cmake -S "$source/conformance/examples/toy_backend" -B "$scratch/build" -G Ninja \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER="$cxx" \
  -DCMAKE_CXX_FLAGS="$cxx_flags" -DCMAKE_EXE_LINKER_FLAGS="$link_flags" \
  -DCMAKE_PREFIX_PATH="$scratch/prefix" >/dev/null
cmake --build "$scratch/build" >/dev/null
# The installed corpus is the one replayed: its path comes from the package.
test -d "$scratch/prefix/share/varlen/corpus/regressions"
cd "$scratch/build"
VARLEN_BUDGET_SCALE=0.25 VARLEN_FAILURES_DIR="$scratch/failures" ./toy_backend_conformance --gtest_brief=1
# The same backend as a plugin of the installed varlen program.
"$scratch/prefix/bin/varlen" check --load="$scratch/build/toy_backend_plugin.so" --backends=toy \
  --budget_scale=0.1 --report="$scratch/plugin-report" >"$scratch/plugin-check.txt" 2>&1 ||
  { cat "$scratch/plugin-check.txt"; exit 1; }
tail -n 2 "$scratch/plugin-check.txt"
