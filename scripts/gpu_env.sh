#!/usr/bin/env bash
# Sourced by the device scripts (scripts/gpu_build.sh first): extracts brrr's Debian build
# dependencies (.devdeps/*.deb, made here by scripts/gpu_devdeps.sh and carried to the device) into
# /opt/deps once, and exports the library and include paths the build and brrr's runs need, with
# pip's cuDNN. A script that runs brrr after another script built it sources this again: exports
# do not come back from a child shell.
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
