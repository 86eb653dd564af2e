#!/usr/bin/env bash
# Sets up (idempotent) and runs every test: unit tests, CLI error tests, ONNX node conformance.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
ctest --test-dir build --output-on-failure -j"${BRRR_JOBS:-$(nproc)}"
