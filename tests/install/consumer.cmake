# cmake -DBUILD=<brrr build> -DSRC=<brrr source> -DWORK=<scratch dir> -DGEN=<generator>
#       -DMODEL=<example model folder> -P consumer.cmake
# What a user of the C++ library does: install brrr into a fresh prefix, configure and build
# examples/cpp against it with find_package(brrr), and run it on a copy of an example model with
# an empty kernel cache (so the generated kernels are compiled from the embedded headers). Fails
# at the first step that does not work, naming it.
function(step name)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${name} failed (${rc}):\n${out}\n${err}")
  endif()
  set(OUT "${out}" PARENT_SCOPE)
endfunction()

set(prefix "${WORK}/prefix")
file(REMOVE_RECURSE "${WORK}")
step(install ${CMAKE_COMMAND} --install "${BUILD}" --prefix "${prefix}")
foreach(f lib/libbrrr.a include/brrr/session.hpp include/brrr/onnx.hpp include/brrr/scalar_ops.h
    lib/cmake/brrr/brrrConfig.cmake lib/cmake/brrr/brrrConfigVersion.cmake
    lib/cmake/brrr/brrrTargets.cmake bin/brrr)
  if(NOT EXISTS "${prefix}/${f}")
    message(FATAL_ERROR "install: ${prefix}/${f} is missing")
  endif()
endforeach()

set(consumer "${WORK}/consumer")
step(configure ${CMAKE_COMMAND} -S "${SRC}/examples/cpp" -B "${consumer}" -G "${GEN}"
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_EXPORT_COMPILE_COMMANDS=ON)
# The package found must be the one just installed, and the consumer must see brrr's headers
# only through the prefix, never from the source tree.
file(STRINGS "${consumer}/CMakeCache.txt" brrr_dir REGEX "^brrr_DIR:")
if(NOT brrr_dir STREQUAL "brrr_DIR:PATH=${prefix}/lib/cmake/brrr")
  message(FATAL_ERROR "configure: found ${brrr_dir}, not the package in ${prefix}")
endif()
file(READ "${consumer}/compile_commands.json" cc)
foreach(tree "${SRC}/include" "${SRC}/src")
  string(FIND "${cc}" "${tree}" at)
  if(NOT at EQUAL -1)
    message(FATAL_ERROR "configure: the consumer compiles with ${tree}:\n${cc}")
  endif()
endforeach()
step(build ${CMAKE_COMMAND} --build "${consumer}")

get_filename_component(model_name "${MODEL}" NAME)
file(COPY "${MODEL}" DESTINATION "${WORK}/models")
step(run ${CMAKE_COMMAND} -E env XDG_CACHE_HOME=${WORK}/cache
  "${consumer}/brrr_example" "${WORK}/models/${model_name}")
message(STATUS "${OUT}")
if(NOT OUT MATCHES "matches the reference" OR NOT OUT MATCHES "profile \\(cpu\\): ")
  message(FATAL_ERROR "run: no matched output or no profile in:\n${OUT}")
endif()
file(GLOB_RECURSE built "${WORK}/cache/brrr/*.so")
if(NOT built)
  message(FATAL_ERROR "run: no kernels were compiled into the empty cache ${WORK}/cache/brrr")
endif()
