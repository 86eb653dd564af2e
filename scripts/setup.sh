#!/usr/bin/env bash
# Sets up a fresh clone: Debian packages (chromium renders the doctor's HTML in a test; clang
# builds the sanitizer and fuzz targets, with libomp-dev for OpenMP under clang; Debian's oneDNN is built with its OpenCL GPU runtime, so
# its CMake config needs the OpenCL headers and ICD loader, which libdnnl-dev only recommends), the pinned Python venv (.venv, for generating test data),
# and the build in build/. Idempotent: each step is skipped when already done.
#   BRRR_JOBS=N  build parallelism (default: number of cores)
set -euo pipefail
cd "$(dirname "$0")/.."
T0=$(date +%s)
since() { echo "$(( $(date +%s) - T0 )) s"; }

PACKAGES=(g++ cmake ninja-build python3-venv python3-dev libprotobuf-dev protobuf-compiler libonnx-dev
  libdnnl-dev ocl-icd-opencl-dev opencl-c-headers libsleef-dev libfmt-dev libcli11-dev nlohmann-json3-dev libgtest-dev libgmock-dev
  libbenchmark-dev clang libclang-rt-14-dev libomp-dev chromium)
ONNX_VERSION=1.23.2
NUMPY_VERSION=2.4.6
# The Python package's build (nanobind; scikit-build-core for `pip install .`) and its tests.
NANOBIND_VERSION=3.1.0
SCIKIT_BUILD_CORE_VERSION=1.1.2
PYTEST_VERSION=9.2.0

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing Debian packages: ${missing[*]}"
  SUDO=""
  [[ $(id -u) -ne 0 ]] && SUDO=sudo
  $SUDO apt-get update
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
  echo "setup: Debian packages installed at $(since)"
fi

# The venv generates the ONNX node tests and CLI fixtures, builds the Python package and runs its
# tests; brrr's C++ library and CLI do not need Python.
want="onnx $ONNX_VERSION numpy $NUMPY_VERSION"
have=$(.venv/bin/python -c 'import onnx, numpy; print("onnx", onnx.__version__, "numpy", numpy.__version__)' 2>/dev/null || true)
if [[ "$have" != "$want" ]]; then
  echo "setup: creating .venv with $want"
  PY=/usr/bin/python3
  [[ -x $PY ]] || PY=python3
  rm -rf .venv
  "$PY" -m venv .venv
  .venv/bin/python -m pip install --quiet --disable-pip-version-check \
    "onnx==$ONNX_VERSION" "numpy==$NUMPY_VERSION"
  echo "setup: .venv ready at $(since)"
fi

# Checked apart from the venv itself, so an existing .venv gains them without being remade.
want="$NANOBIND_VERSION $SCIKIT_BUILD_CORE_VERSION $PYTEST_VERSION"
have=$(.venv/bin/python -c 'import nanobind, scikit_build_core, pytest
print(nanobind.__version__, scikit_build_core.__version__, pytest.__version__)' 2>/dev/null || true)
if [[ "$have" != "$want" ]]; then
  echo "setup: installing nanobind, scikit-build-core and pytest into .venv"
  .venv/bin/python -m pip install --quiet --disable-pip-version-check \
    "nanobind==$NANOBIND_VERSION" "scikit-build-core==$SCIKIT_BUILD_CORE_VERSION" \
    "pytest==$PYTEST_VERSION"
  echo "setup: .venv has the Python package's build and test tools at $(since)"
fi

[[ -f build/build.ninja ]] || cmake -S . -B build -G Ninja
ninja -C build -j"${BRRR_JOBS:-$(nproc)}"
echo "setup: done at $(since); the CLI is ./build/brrr"
