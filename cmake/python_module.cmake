# brrr's Python package (python/): the nanobind extension brrr._brrr next to the package's Python
# files in ${CMAKE_BINARY_DIR}/python/brrr, so that PYTHONPATH=build/python imports the build
# tree's brrr and the pytest suite (tests/python) runs against it as a ctest test. `pip install .`
# (pyproject.toml, scikit-build-core) builds the same target and installs the package alone.
#
# Optional: built when a Python with its development headers and nanobind is found (the
# project's .venv, made by scripts/setup.sh, else scikit-build-core's Python, else the system's);
# otherwise one status line and no Python package.
option(BRRR_WITH_PYTHON "Build the Python package (nanobind) when nanobind is found" ON)
if(NOT BRRR_WITH_PYTHON)
  message(STATUS "brrr: Python package disabled (BRRR_WITH_PYTHON=OFF)")
  return()
endif()
if(BRRR_SANITIZE OR BRRR_FUZZ)
  # An instrumented extension cannot load into an uninstrumented Python interpreter.
  message(STATUS "brrr: no Python package in a sanitizer or fuzz build")
  return()
endif()
if(NOT DEFINED Python_EXECUTABLE AND EXISTS "${PROJECT_SOURCE_DIR}/.venv/bin/python")
  set(Python_EXECUTABLE "${PROJECT_SOURCE_DIR}/.venv/bin/python")
endif()
find_package(Python 3.8 COMPONENTS Interpreter Development.Module QUIET)
if(NOT Python_FOUND)
  message(STATUS "brrr: no Python with development headers (python3-dev); no Python package")
  return()
endif()
execute_process(COMMAND "${Python_EXECUTABLE}" -m nanobind --cmake_dir
  OUTPUT_VARIABLE nanobind_ROOT OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE nb_rc ERROR_QUIET)
if(NOT nb_rc EQUAL 0)
  message(STATUS "brrr: ${Python_EXECUTABLE} has no nanobind (scripts/setup.sh installs it); "
    "no Python package")
  return()
endif()
find_package(nanobind CONFIG REQUIRED)

# The extension is a shared object, so the static library it links must be position-independent.
# -fno-semantic-interposition keeps calls within libbrrr direct, as in the non-PIC build.
set_target_properties(brrr PROPERTIES POSITION_INDEPENDENT_CODE ON)
target_compile_options(brrr PRIVATE -fno-semantic-interposition)

file(GLOB BRRR_PYTHON_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/python/src/*.cpp)
nanobind_add_module(_brrr NB_STATIC ${BRRR_PYTHON_SOURCES})
target_include_directories(_brrr PRIVATE ${PROJECT_SOURCE_DIR}/src)
target_link_libraries(_brrr PRIVATE brrr)
target_compile_options(_brrr PRIVATE -Wall -Wextra -Wno-unused-parameter)
set(BRRR_PYTHON_DIR ${CMAKE_BINARY_DIR}/python)
set_target_properties(_brrr PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${BRRR_PYTHON_DIR}/brrr
  INSTALL_RPATH_USE_LINK_PATH TRUE)

# The package's Python files beside the extension (copied when they change).
file(GLOB BRRR_PYTHON_FILES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/python/brrr/*)
add_custom_target(brrr_python_files ALL
  COMMAND ${CMAKE_COMMAND} -E make_directory ${BRRR_PYTHON_DIR}/brrr
  COMMAND ${CMAKE_COMMAND} -E copy_if_different ${BRRR_PYTHON_FILES} ${BRRR_PYTHON_DIR}/brrr
  COMMENT "brrr: Python package files into ${BRRR_PYTHON_DIR}/brrr")
add_dependencies(_brrr brrr_python_files)
message(STATUS "brrr: Python ${Python_VERSION} with nanobind; building the Python package "
  "(${BRRR_PYTHON_DIR}/brrr)")

if(SKBUILD)
  # `pip install .`: the package alone (pyproject.toml installs only this component).
  install(TARGETS _brrr LIBRARY DESTINATION brrr COMPONENT python)
  install(FILES ${BRRR_PYTHON_FILES} DESTINATION brrr COMPONENT python)
endif()

# The pytest suite against the build tree (tests/python); it needs pytest in that Python.
execute_process(COMMAND "${Python_EXECUTABLE}" -c "import pytest" RESULT_VARIABLE pytest_rc
  OUTPUT_QUIET ERROR_QUIET)
if(pytest_rc EQUAL 0)
  add_test(NAME python_tests
    COMMAND ${CMAKE_COMMAND} -E env PYTHONPATH=${BRRR_PYTHON_DIR}
            "${Python_EXECUTABLE}" -m pytest -q -p no:cacheprovider ${PROJECT_SOURCE_DIR}/tests/python)
  set_tests_properties(python_tests PROPERTIES TIMEOUT 600)
else()
  message(STATUS "brrr: ${Python_EXECUTABLE} has no pytest (scripts/setup.sh installs it); the "
    "Python tests are not registered")
endif()
