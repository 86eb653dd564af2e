# brrr_probe_package(NAME RESULT_VAR): whether find_package(NAME CONFIG REQUIRED) succeeds, tried in a
# separate configure so that a broken package config (oneDNN's needs OpenCL when Debian builds it
# with the OpenCL GPU runtime) degrades to "not found" with one clear message instead of stopping
# brrr's configure. The reason, when it fails, goes into RESULT_VAR_REASON.
function(brrr_probe_package name result_var)
  set(dir "${CMAKE_BINARY_DIR}/package-probe/${name}")
  file(MAKE_DIRECTORY "${dir}/src")
  # Languages and compiler as brrr's own configure has them, so the probe sees what it would.
  file(WRITE "${dir}/src/CMakeLists.txt"
    "cmake_minimum_required(VERSION 3.22)\nproject(probe_${name} LANGUAGES CXX)\n"
    "find_package(${name} CONFIG REQUIRED)\n")
  # The probe looks where find_package will: <name>_DIR / <name>_ROOT when the user set them.
  set(hints "")
  foreach(var ${name}_DIR ${name}_ROOT)
    if(DEFINED ${var} AND ${var})
      list(APPEND hints "-D${var}=${${var}}")
    endif()
  endforeach()
  execute_process(
    COMMAND ${CMAKE_COMMAND} -S "${dir}/src" -B "${dir}/build" -G "${CMAKE_GENERATOR}"
            "-DCMAKE_PREFIX_PATH=${CMAKE_PREFIX_PATH}" ${hints}
            "-DCMAKE_CXX_COMPILER=${CMAKE_CXX_COMPILER}"
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(rc EQUAL 0)
    set(${result_var} TRUE PARENT_SCOPE)
    set(${result_var}_REASON "" PARENT_SCOPE)
    return()
  endif()
  # The first informative line of CMake's error, e.g. "Could NOT find OpenCL (missing: ...)".
  set(reason "its CMake config failed")
  string(REGEX MATCH "Could NOT find [^\n]*" missing "${err}")
  if(missing)
    set(reason "${missing}")
  elseif(err MATCHES "Could not find a package configuration file")
    set(reason "not installed")
  endif()
  set(${result_var} FALSE PARENT_SCOPE)
  set(${result_var}_REASON "${reason}" PARENT_SCOPE)
endfunction()
