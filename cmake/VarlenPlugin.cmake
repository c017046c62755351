# varlen_add_backend_plugin(NAME SRCS...): a backend as a shared library that
# `varlen check --load=NAME.so` and `varlen repro --load=` run
# (varlen/backend/plugin.h). It compiles against varlen's headers and links
# none of varlen's libraries: the varlen program that loads it provides them.
# Installed with the CMake package, so `find_package(varlen CONFIG)` brings it.
function(varlen_add_backend_plugin name)
  add_library(${name} MODULE ${ARGN})
  target_include_directories(${name} PRIVATE
    $<TARGET_PROPERTY:varlen::backend,INTERFACE_INCLUDE_DIRECTORIES>
    $<TARGET_PROPERTY:absl::status,INTERFACE_INCLUDE_DIRECTORIES>
    $<TARGET_PROPERTY:nlohmann_json::nlohmann_json,INTERFACE_INCLUDE_DIRECTORIES>)
  target_compile_options(${name} PRIVATE "$<$<COMPILE_LANGUAGE:CXX>:${VARLEN_WARNING_FLAGS}>")
  set_target_properties(${name} PROPERTIES PREFIX "" CXX_VISIBILITY_PRESET hidden
                                           VISIBILITY_INLINES_HIDDEN ON)
endfunction()
