# `cmake --install build --prefix P`: libbrrr.a, include/brrr/*, the `brrr` CLI and a CMake package
# (lib/cmake/brrr) so that another project does find_package(brrr) and links brrr::brrr.
#
# libbrrr stays static: the tests and the CLI link brrr's internal (src/) functions, which a shared
# library would have to export one by one or all at once, and the hand-written kernels would turn
# position-independent with interposable calls, a speed change to measure first. The price is that
# a consumer links brrr's own dependencies too, so the package config finds every one of them
# (all are system packages with CMake support, installed by scripts/setup.sh). Nothing is read from
# the source or build tree at run time: the headers generated kernels include are embedded in the
# library (src/backend/embedded_headers.hpp).
include(CMakePackageConfigHelpers)

set(BRRR_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/brrr)
install(TARGETS brrr EXPORT brrrTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS brrr_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# The installed CLI keeps the run paths of the shared libraries it linked (a CUDA toolkit outside
# the loader's default folders), as the build tree's copy has them.
set_target_properties(brrr_cli PROPERTIES INSTALL_RPATH_USE_LINK_PATH TRUE)
install(DIRECTORY include/brrr DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT brrrTargets NAMESPACE brrr:: DESTINATION ${BRRR_INSTALL_CMAKEDIR})

# The dependencies this build linked, one find_dependency each: public ones (headers include fmt
# and nlohmann/json; plans run on OpenMP threads) and, since libbrrr is static, the private ones
# its objects call into. Optional ones appear only when this build used them.
set(BRRR_CONFIG_DEPENDENCIES "")
foreach(dep fmt nlohmann_json OpenMP Protobuf ONNX)
  string(APPEND BRRR_CONFIG_DEPENDENCIES "find_dependency(${dep})\n")
endforeach()
if(dnnl_FOUND)
  string(APPEND BRRR_CONFIG_DEPENDENCIES "find_dependency(dnnl CONFIG)\n")
endif()
if(BRRR_CUDA_USABLE AND BRRR_CUDA_SOURCES)
  string(APPEND BRRR_CONFIG_DEPENDENCIES "find_dependency(CUDAToolkit)\n")
endif()
configure_package_config_file(cmake/brrrConfig.cmake.in
  ${CMAKE_BINARY_DIR}/generated/brrrConfig.cmake INSTALL_DESTINATION ${BRRR_INSTALL_CMAKEDIR})
# 0.x: a minor release may change the API, so only the same minor version matches.
write_basic_package_version_file(${CMAKE_BINARY_DIR}/generated/brrrConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/generated/brrrConfig.cmake
  ${CMAKE_BINARY_DIR}/generated/brrrConfigVersion.cmake DESTINATION ${BRRR_INSTALL_CMAKEDIR})
