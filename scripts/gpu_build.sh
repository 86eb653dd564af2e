#!/usr/bin/env bash
# Sourced by the device scripts: extracts brrr's Debian build dependencies (.devdeps/*.deb, made
# here by scripts/gpu_devdeps.sh and carried to the device) into /opt/deps, points the build at
# pip's cuDNN headers, then configures and builds the full tree into $B.
#   B=build folder (default /tmp/brrr_build)  BUILD_TYPE (default Release)
#   EXTRA_CMAKE=extra cmake arguments  TARGETS (default: brrr_cli brrr_tests)
P=/opt/deps
if [ ! -d $P/usr ]; then mkdir -p $P && for f in .devdeps/*.deb; do dpkg -x "$f" $P; done; fi
L=$P/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$L:${LD_LIBRARY_PATH:-} LIBRARY_PATH=$L:${LIBRARY_PATH:-}
export CPATH=$P/usr/include/x86_64-linux-gnu:$P/usr/include
# cuDNN from pip (nvidia-cudnn-cu13) when the toolkit has none: headers for the build, the
# library for dlopen at run time.
CUDNN_DIR=$(python3 -c "import nvidia.cudnn as m; print(list(m.__path__)[0])" 2>/dev/null)
if [ -n "$CUDNN_DIR" ] && [ -f "$CUDNN_DIR/include/cudnn.h" ]; then
  export CUDNN_INCLUDE_DIR=$CUDNN_DIR/include LD_LIBRARY_PATH=$CUDNN_DIR/lib:$LD_LIBRARY_PATH
fi
# The cuDNN frontend's headers (scripts/gpu_devdeps.sh puts them in .devdeps).
[ -f .devdeps/cudnn_frontend/include/cudnn_frontend.h ] &&
  export CUDNN_FRONTEND_INCLUDE_DIR=$PWD/.devdeps/cudnn_frontend/include
B=${B:-/tmp/brrr_build}
GT=$(dirname "$(find $P -name GTestConfig.cmake | head -1)")
# shellcheck disable=SC2086
cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-Release} -DCMAKE_PREFIX_PATH=$P/usr \
  -DCMAKE_LIBRARY_PATH=$L -DCMAKE_INCLUDE_PATH="$P/usr/include;$P/usr/include/x86_64-linux-gnu" \
  -DProtobuf_INCLUDE_DIR=$P/usr/include -DProtobuf_LIBRARY=$L/libprotobuf.so \
  -DGTest_DIR=$GT $([ -d /usr/local/cuda ] && echo -DCUDAToolkit_ROOT=/usr/local/cuda) \
  ${EXTRA_CMAKE:-} >"$OUT/cmake.log" 2>&1 || { tail -40 "$OUT/cmake.log"; exit 1; }
grep -E "brrr: " "$OUT/cmake.log"
# shellcheck disable=SC2086
ninja -C $B -j16 ${TARGETS:-brrr_cli brrr_tests} >"$OUT/build.log" 2>&1 ||
  { grep -B2 -A10 -m10 'error' "$OUT/build.log"; exit 1; }
