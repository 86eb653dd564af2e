#!/usr/bin/env bash
# Run here (no GPU): copy this worktree into the lead's checkout as .gpu_stage/ (ignored there),
# plus fmt headers and GoogleTest sources for the standalone fallback build. Then call `run` with
# carry=[".gpu_stage"] and `cd .gpu_stage && bash scripts/gpu_run.sh`.
set -euo pipefail
SRC="$(cd "$(dirname "$0")/.." && pwd)"
DST=${1:-/work/main/.gpu_stage}
grep -qx '/.gpu_stage/' /work/main/.git/info/exclude 2>/dev/null ||
  echo /.gpu_stage/ >> /work/main/.git/info/exclude
rm -rf "$DST"
mkdir -p "$DST/.third_party/fmt/include"
tar -C "$SRC" --exclude=./build --exclude=./.git --exclude=./.third_party -cf - . | tar -C "$DST" -xf -
cp -a /usr/include/fmt "$DST/.third_party/fmt/include/"
cp -a /usr/src/googletest "$DST/.third_party/googletest"
du -sh "$DST"
