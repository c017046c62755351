#!/bin/bash -eu
# Builds every fuzz target for ClusterFuzzLite (and OSS-Fuzz) with the
# compiler, flags and engine they pass: $CC, $CXX, $CFLAGS, $CXXFLAGS,
# $LIB_FUZZING_ENGINE, $SRC, $WORK, $OUT. Each target goes to $OUT with its
# seed corpus (<target>_seed_corpus.zip) and, where there is one, its
# dictionary (<target>.dict).
#
# Tried outside the image with the variables set by hand, e.g.
#   CC=clang CXX=clang++ CFLAGS= LIB_FUZZING_ENGINE=-fsanitize=fuzzer \
#   CXXFLAGS="-O1 -gline-tables-only -fsanitize=address,fuzzer-no-link" \
#   SRC=$PWD/.. WORK=/tmp/cfl-work OUT=/tmp/cfl-out .clusterfuzzlite/build.sh
set -eu

project="$SRC/varlen"
[ -d "$project" ] || project="$(cd "$(dirname "$0")/.." && pwd)"
deps="$WORK/deps"

# Dependencies the image carries as sources are built with the same flags,
# so that sanitizers see their code too; otherwise the installed ones serve.
if [ -d "$SRC/abseil-cpp" ] && [ ! -f "$deps/.abseil" ]; then
  cmake -S "$SRC/abseil-cpp" -B "$WORK/abseil" -G Ninja -DCMAKE_BUILD_TYPE=None \
    -DCMAKE_C_COMPILER="$CC" -DCMAKE_CXX_COMPILER="$CXX" -DCMAKE_CXX_FLAGS="$CXXFLAGS" \
    -DCMAKE_CXX_STANDARD=20 -DABSL_PROPAGATE_CXX_STD=ON -DABSL_BUILD_TESTING=OFF \
    -DCMAKE_INSTALL_PREFIX="$deps"
  cmake --build "$WORK/abseil" && cmake --install "$WORK/abseil" && touch "$deps/.abseil"
fi
if [ -d "$SRC/nlohmann-json" ] && [ ! -f "$deps/.json" ]; then
  cmake -S "$SRC/nlohmann-json" -B "$WORK/nlohmann-json" -G Ninja -DJSON_BuildTests=OFF \
    -DCMAKE_INSTALL_PREFIX="$deps"
  cmake --install "$WORK/nlohmann-json" && touch "$deps/.json"
fi

# No build type: the flags are exactly the engine's. Warnings stay warnings
# under a compiler the project does not pin.
cmake -S "$project" -B "$WORK/varlen" -G Ninja -DCMAKE_BUILD_TYPE=None \
  -DCMAKE_C_COMPILER="$CC" -DCMAKE_CXX_COMPILER="$CXX" -DCMAKE_CXX_FLAGS="$CXXFLAGS" \
  -DCMAKE_PREFIX_PATH="$deps" -DVARLEN_LIBFUZZER=ON -DVARLEN_FUZZING_ENGINE="$LIB_FUZZING_ENGINE" \
  -DVARLEN_BUILD_TESTS=OFF -DVARLEN_BUILD_CLI=OFF -DVARLEN_INSTALL=OFF -DVARLEN_WERROR=OFF
targets=$(cd "$project/fuzz" && ls ./*_fuzzer.cc | sed 's|^\./||; s|\.cc$||')
# shellcheck disable=SC2086
cmake --build "$WORK/varlen" --target $targets

mkdir -p "$OUT"
for target in $targets; do
  cp "$WORK/varlen/fuzz/$target" "$OUT/"
  name="${target%_fuzzer}"
  seeds=("$project/corpus/fuzz/$name")
  case "$name" in contract | case_json | differential) seeds+=("$project/corpus/regressions") ;; esac
  rm -f "$OUT/${target}_seed_corpus.zip"
  (cd "$project" && find "${seeds[@]}" -type f -print0 2>/dev/null |
    xargs -0 -r zip -q -j "$OUT/${target}_seed_corpus.zip")
  if [ -f "$project/corpus/fuzz/$name.dict" ]; then
    cp "$project/corpus/fuzz/$name.dict" "$OUT/$target.dict"
  fi
done
