#!/usr/bin/env bash
# Sourced by the device scripts: extracts brrr's Debian build dependencies (.devdeps/*.deb, made
# here by scripts/gpu_devdeps.sh and carried to the device) into /opt/deps, points the build at
# pip's cuDNN headers, then configures and builds the full tree into $B.
#   B=build folder (default /tmp/brrr_build)  BUILD_TYPE (default Release)
#   EXTRA_CMAKE=extra cmake arguments  TARGETS (default: brrr_cli brrr_tests)
# shellcheck source=scripts/gpu_env.sh
source scripts/gpu_env.sh
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
