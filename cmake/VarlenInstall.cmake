# Installs the libraries, their public headers and a CMake package, so that
# consumers can `find_package(varlen CONFIG)` and link varlen::cases,
# varlen::backends, ... exactly as with add_subdirectory or FetchContent.

include(CMakePackageConfigHelpers)

set(_varlen_targets varlen_core varlen_contract varlen_backend varlen_oracle varlen_gpu_reference varlen_flash
    varlen_cuda_plan varlen_cudnn_graph_cache varlen_cases varlen_backends varlen_run)
set(VARLEN_EXPORTS_CUDA ${VARLEN_ENABLE_CUDA})
if(VARLEN_ENABLE_CUDA)
  list(APPEND _varlen_targets varlen_cuda_kernels)
endif()
if(VARLEN_ENABLE_CUDNN)
  list(APPEND _varlen_targets varlen_cudnn_sdpa)
endif()
set(VARLEN_EXPORTS_CONFORMANCE ${VARLEN_BUILD_CONFORMANCE})
if(VARLEN_BUILD_CONFORMANCE)
  list(APPEND _varlen_targets varlen_conformance varlen_rapidcheck)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/conformance/include/varlen
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  # The regression corpus that VARLEN_CONFORMANCE_MAIN replays.
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/corpus/regressions
          DESTINATION ${CMAKE_INSTALL_DATADIR}/varlen/corpus)
endif()
install(TARGETS ${_varlen_targets} EXPORT varlenTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/lib/include/varlen DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
if(TARGET varlen)
  install(TARGETS varlen RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

install(EXPORT varlenTargets NAMESPACE varlen:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/varlen)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/varlenConfig.cmake.in
  ${PROJECT_BINARY_DIR}/varlenConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/varlen)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/varlenConfigVersion.cmake
  COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/varlenConfig.cmake ${PROJECT_BINARY_DIR}/varlenConfigVersion.cmake
              ${PROJECT_SOURCE_DIR}/cmake/VarlenPlugin.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/varlen)
