# Helpers that give every varlen target the same shape: a real target named
# varlen_<name>, an alias varlen::<name>, the project's warning flags, and
# (for tests) a ctest registration with labels and a timeout.

option(VARLEN_WERROR "Treat warnings in varlen's own code as errors" ${PROJECT_IS_TOP_LEVEL})

set(VARLEN_WARNING_FLAGS -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
    -Wimplicit-fallthrough)
# nvcc's own warnings, and the host compiler's on the host side of .cu files.
set(VARLEN_CUDA_WARNING_FLAGS -Xcompiler=-Wall,-Wextra)
if(VARLEN_WERROR)
  list(APPEND VARLEN_WARNING_FLAGS -Werror)
  list(APPEND VARLEN_CUDA_WARNING_FLAGS -Werror=all-warnings -Xcompiler=-Werror)
endif()

option(VARLEN_LIBFUZZER "Link fuzz targets to a fuzzing engine (libFuzzer unless told otherwise)" OFF)
# How fuzz targets link their engine. ClusterFuzzLite passes its own
# ($LIB_FUZZING_ENGINE, see .clusterfuzzlite/build.sh) together with the
# instrumentation flags in CXXFLAGS; libFuzzer's own needs
# -fsanitize=fuzzer-no-link on every object.
set(VARLEN_FUZZING_ENGINE "-fsanitize=fuzzer" CACHE STRING "Link flags of the fuzzing engine")
if(VARLEN_LIBFUZZER)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "VARLEN_LIBFUZZER needs clang (the \"fuzz\" preset sets it)")
  endif()
  if(VARLEN_FUZZING_ENGINE STREQUAL "-fsanitize=fuzzer")
    add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-fsanitize=fuzzer-no-link>)
  endif()
endif()

# varlen_arithmetic_sources(file...): the attention, data-synthesis and
# judging loops. Under clang they keep their coverage edges but lose
# comparison tracing (part of -fsanitize=fuzzer), which otherwise takes most
# of a numerical fuzz target's time in loop-bound compares that teach the
# fuzzer nothing. Harmless where coverage is off.
function(varlen_arithmetic_sources)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    set_property(SOURCE ${ARGN} APPEND PROPERTY COMPILE_OPTIONS -fno-sanitize-coverage=trace-cmp)
  endif()
endfunction()

# A deliberately broken resolver (hardened mode accepts token offsets that
# end before the last token), so that the nightly fuzz driver can be shown
# to find, minimize and report a real contract violation. Test builds only:
# such a build cannot be installed.
option(VARLEN_BROKEN_RESOLVER "Test only: build a hardened resolver with a known bug" OFF)
if(VARLEN_BROKEN_RESOLVER)
  if(VARLEN_INSTALL OR CMAKE_BUILD_TYPE STREQUAL "Release")
    message(FATAL_ERROR "VARLEN_BROKEN_RESOLVER is for test builds only: it needs "
                        "-DVARLEN_INSTALL=OFF and no Release build type (the \"fuzz-broken\" preset)")
  endif()
  add_compile_definitions(VARLEN_BROKEN_RESOLVER=1)
endif()

if(VARLEN_SANITIZE)
  # Sanitizer builds keep assert(): REQUIRES checks must fire in tests.
  add_compile_options(-UNDEBUG)
  set(_varlen_san -fsanitize=address,undefined -fno-sanitize-recover=all
      -fno-omit-frame-pointer)
  # nvcc takes its host compiler's flags through -Xcompiler; device code is
  # not instrumented (the CUDA objects link into sanitized binaries as is).
  add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:${_varlen_san}>")
  add_link_options(${_varlen_san})
endif()

# varlen_cc_library(NAME name SRCS ... [INCLUDES dir...] [DEPS ...] [PRIVATE_DEPS ...])
# INCLUDES and DEPS are public usage requirements; C++20 is one too.
function(varlen_cc_library)
  cmake_parse_arguments(ARG "" "NAME" "SRCS;DEPS;PRIVATE_DEPS;INCLUDES" ${ARGN})
  set(target varlen_${ARG_NAME})
  add_library(${target} ${ARG_SRCS})
  add_library(varlen::${ARG_NAME} ALIAS ${target})
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${ARG_NAME})
  target_compile_options(${target} PRIVATE
    "$<$<COMPILE_LANGUAGE:CXX>:${VARLEN_WARNING_FLAGS}>"
    "$<$<COMPILE_LANGUAGE:CUDA>:${VARLEN_CUDA_WARNING_FLAGS}>")
  target_compile_features(${target} PUBLIC cxx_std_20)
  target_include_directories(${target} PUBLIC ${ARG_INCLUDES})
  target_link_libraries(${target} PUBLIC ${ARG_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
endfunction()

# varlen_cc_test(NAME name SRCS ... DEPS ... [LABELS ...] [TIMEOUT seconds])
# One GoogleTest binary; its tests are discovered at test time (PRE_TEST),
# so nothing runs during the build.
function(varlen_cc_test)
  cmake_parse_arguments(ARG "" "NAME;TIMEOUT" "SRCS;DEPS;LABELS" ${ARGN})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  set(target varlen_${ARG_NAME})
  add_executable(${target} ${ARG_SRCS})
  target_compile_options(${target} PRIVATE ${VARLEN_WARNING_FLAGS})
  target_link_libraries(${target} PRIVATE ${ARG_DEPS} GTest::gmock GTest::gtest_main)
  target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR}/tests)
  gtest_discover_tests(${target}
    DISCOVERY_MODE PRE_TEST
    PROPERTIES LABELS "${ARG_LABELS}" TIMEOUT ${ARG_TIMEOUT}
    ENVIRONMENT "VARLEN_SOURCE_DIR=${PROJECT_SOURCE_DIR}")
endfunction()

include(GNUInstallDirs)
if(VARLEN_BUILD_TESTS)
  include(GoogleTest)
endif()

include(${CMAKE_CURRENT_LIST_DIR}/VarlenPlugin.cmake)

# CUDA in the calling directory (a language is enabled per directory): nvcc,
# the C++20 flag that CMake 3.25 does not know for it (targets ask for the
# dialect through cxx_std_20), and the toolkit's targets (CUDA::cudart_static).
macro(varlen_enable_cuda)
  enable_language(CUDA)
  if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
  endif()
  find_package(CUDAToolkit REQUIRED)
endmacro()
