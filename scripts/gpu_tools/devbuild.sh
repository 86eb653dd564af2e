#!/usr/bin/env bash
# A brrr built here, carried to the device so that a call need not build it there (a build of
# brrr_cli took 150-250 s of a call's device time, and with the tests once all of a 560 s call).
#   here:  bash scripts/gpu_tools/devbuild.sh make [BUILD_DIR]   (default build/; a CUDA build)
#          strips BUILD_DIR/brrr into .devbuild/brrr and records the hash of the sources it was
#          built from; carry [".devdeps", ".devbuild"].
#   there: source scripts/gpu_tools/devbuild.sh use
#          sets B=$PWD/.devbuild and returns 0 when .devbuild/brrr was built from these very
#          sources and runs on this machine (its libraries: source scripts/gpu_env.sh first);
#          returns 1 otherwise, and the caller builds as before (scripts/gpu_build.sh).
# The device's image is not this machine's (device/H200.md: "a binary built on this machine's
# image may not run on that one's"), so `use` runs the binary before it trusts it.
devbuild_hash() {
  find src include cmake CMakeLists.txt -type f -print0 | LC_ALL=C sort -z | xargs -0 sha1sum | sha1sum | cut -c1-40
}
case "${1:-}" in
  make)
    d=${2:-build}
    [ -x "$d/brrr" ] || { echo "devbuild: no $d/brrr" >&2; exit 1; }
    "$d/brrr" --version | grep -q "backends:.*cuda" || { echo "devbuild: $d/brrr has no cuda backend" >&2; exit 1; }
    # Built from this tree as it is: its commit is HEAD's, not dirty, and the tree has no changes.
    want="commit: $(git rev-parse --short=12 HEAD)"
    if [ "$("$d/brrr" --version | grep '^commit:')" != "$want" ] ||
      [ -n "$(git status --porcelain -- src include cmake CMakeLists.txt)" ]; then
      echo "devbuild: $d/brrr was not built from HEAD's sources ($want, clean)" >&2
      exit 1
    fi
    mkdir -p .devbuild
    strip -o .devbuild/brrr "$d/brrr"
    devbuild_hash >.devbuild/src.sha1
    echo "devbuild: .devbuild/brrr ($(du -h .devbuild/brrr | cut -f1)), sources $(cat .devbuild/src.sha1)"
    ;;
  use)
    if [ -x .devbuild/brrr ] && [ "$(cat .devbuild/src.sha1 2>/dev/null)" = "$(devbuild_hash)" ] &&
      .devbuild/brrr --version >/dev/null 2>&1; then
      export B=$PWD/.devbuild
      echo "devbuild: the carried brrr ($(.devbuild/brrr --version | head -2 | tail -1))"
      return 0 2>/dev/null || exit 0
    fi
    echo "devbuild: no usable carried brrr (absent, other sources, or it does not run here)"
    return 1 2>/dev/null || exit 1
    ;;
  *)
    echo "usage: devbuild.sh make [BUILD_DIR] | source devbuild.sh use" >&2
    return 2 2>/dev/null || exit 2
    ;;
esac
