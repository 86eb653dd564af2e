#!/usr/bin/env bash
# Run here (Debian, network to its archive): downloads brrr's Debian build dependencies into
# .devdeps/ (ignored) for the device machine, which has CUDA and PyTorch but not these; carry
# .devdeps in the device call and scripts/gpu_build.sh extracts them there.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .devdeps
cd .devdeps
apt-get download libprotobuf-dev libprotobuf32 libprotobuf-lite32 libprotoc32 protobuf-compiler \
  libonnx-dev libonnx1 libonnxifi libdnnl-dev libdnnl2 libsleef-dev libsleef3 libfmt-dev libfmt9 \
  libcli11-dev nlohmann-json3-dev libgtest-dev libgmock-dev googletest ocl-icd-opencl-dev \
  ocl-icd-libopencl1 opencl-c-headers opencl-clhpp-headers
ls | wc -l
# The cuDNN frontend's C++ headers (header-only; the attention step's cuDNN SDPA path), from PyPI.
rm -rf cudnn_frontend && mkdir -p cudnn_frontend && (cd cudnn_frontend &&
  python3 -m pip download --quiet --no-deps --disable-pip-version-check nvidia-cudnn-frontend &&
  python3 -m zipfile -e ./*.whl x && mv x/include . && rm -rf x ./*.whl)
ls cudnn_frontend/include/cudnn_frontend.h
