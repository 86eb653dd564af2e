# cmake -DSRC=<brrr source> -DWORK=<scratch dir> -DGEN=<generator> -P optional_deps.cmake
# Configures brrr with each optional dependency missing or pointed at a broken path: configure
# must succeed, say so in one 'brrr:' line per dependency, and leave its BRRR_HAVE_* undefined.
function(configure_case name)
  set(dir "${WORK}/${name}")
  file(REMOVE_RECURSE "${dir}")
  execute_process(COMMAND ${CMAKE_COMMAND} -S "${SRC}" -B "${dir}" -G "${GEN}" ${ARGN}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${name}: configure failed (${rc}):\n${out}\n${err}")
  endif()
  file(READ "${dir}/compile_commands.json" cc)
  set(OUT "${out}" PARENT_SCOPE)
  set(CC "${cc}" PARENT_SCOPE)
endfunction()

# `pattern` occurs exactly once among the configure's 'brrr:' lines.
function(expect_one_line name pattern)
  string(REGEX MATCHALL "-- brrr: [^\n]*" lines "${OUT}")
  set(n 0)
  foreach(l IN LISTS lines)
    if(l MATCHES "${pattern}")
      math(EXPR n "${n} + 1")
    endif()
  endforeach()
  if(NOT n EQUAL 1)
    message(FATAL_ERROR "${name}: ${n} 'brrr:' lines match '${pattern}', want 1:\n${OUT}")
  endif()
endfunction()

function(expect_undefined name define)
  if(CC MATCHES "${define}")
    message(FATAL_ERROR "${name}: ${define} is still defined (compile_commands.json)")
  endif()
endfunction()

# Stale paths, as a moved or half-removed install leaves them, and a oneDNN config that fails.
file(WRITE "${WORK}/broken-dnnl/dnnlConfig.cmake" "message(FATAL_ERROR \"broken dnnl config\")\n")
configure_case(broken_paths -DSLEEF_LIB=/nonexistent/libsleef.so -DCUDNN_INCLUDE_DIR=/nonexistent
  -Ddnnl_DIR=${WORK}/broken-dnnl -DPython_EXECUTABLE=/nonexistent/python3)
expect_one_line(broken_paths "brrr: oneDNN not usable")
expect_one_line(broken_paths "brrr: no Python with development headers")
expect_one_line(broken_paths "brrr: no libsleef")
expect_undefined(broken_paths BRRR_HAVE_DNNL)
expect_undefined(broken_paths BRRR_HAVE_SLEEF)
if(OUT MATCHES "brrr: CUDA toolkit [^\n]* found; CUDA backend enabled")
  expect_one_line(broken_paths "brrr: no cudnn.h")
  expect_undefined(broken_paths BRRR_HAVE_CUDNN)
endif()

# Everything optional turned off: oneDNN, SLEEF, cuDNN, the CUDA toolkit, the Python package.
configure_case(all_off -DBRRR_WITH_DNNL=OFF -DBRRR_WITH_SLEEF=OFF -DBRRR_WITH_CUDNN=OFF
  -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON -DBRRR_WITH_PYTHON=OFF)
expect_one_line(all_off "brrr: oneDNN disabled")
expect_one_line(all_off "brrr: Python package disabled")
expect_one_line(all_off "brrr: SLEEF disabled")
expect_one_line(all_off "brrr: no CUDA toolkit")
foreach(d BRRR_HAVE_DNNL BRRR_HAVE_SLEEF BRRR_HAVE_CUDNN BRRR_HAVE_CUDA)
  expect_undefined(all_off ${d})
endforeach()
message(STATUS "optional dependencies: both configures degrade with one line each")
