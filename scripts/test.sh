#!/usr/bin/env bash
# Sets up (idempotent) and runs every test: unit tests, CLI error tests, ONNX node conformance,
# the doctor's truth tests; then the sanitizer build (clang, ASan + UBSan) runs the unit tests, the
# sanitizer canaries, the saved fuzz crashes and a one-minute fuzz run.
#   BRRR_SKIP_SANITIZERS=1  skip the sanitizer build (e.g. for a quick local run)
#   BRRR_FUZZ_SECONDS=N     length of the fuzz run (default 60)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
jobs="${BRRR_JOBS:-$(nproc)}"
ctest --test-dir build --output-on-failure -j"$jobs"

if [[ "${BRRR_SKIP_SANITIZERS:-0}" == 1 ]]; then
  echo "test: sanitizer build skipped (BRRR_SKIP_SANITIZERS=1)"
  exit 0
fi
# The CUDA backend is left out here: its host code is covered by the main build, and the
# sanitizer build only needs the code that reads untrusted models.
if [[ ! -f build-san/build.ninja ]]; then
  CC=clang CXX=clang++ cmake -S . -B build-san -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DBRRR_SANITIZE=ON -DBRRR_FUZZ=ON -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON \
    -DBRRR_FUZZ_SECONDS="${BRRR_FUZZ_SECONDS:-60}"
fi
ninja -C build-san -j"$jobs" brrr_tests brrr_cli brrr_fuzz_model brrr_fuzz_attributes brrr_fuzz_tensor_pb \
  brrr_sanitizer_canary
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:${ASAN_OPTIONS:-}"
export LSAN_OPTIONS="suppressions=$PWD/tests/sanitizer/lsan.supp:${LSAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
ctest --test-dir build-san --output-on-failure -j"$jobs" \
  -E "onnx_node|doctor_truth|Cuda|Gpu"
