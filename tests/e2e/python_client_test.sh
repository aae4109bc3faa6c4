#!/bin/sh
# The Python package (python/) against a real tracker and agent: installs it
# the way a user does (pip builds the gRPC stubs from proto/ with
# grpcio-tools), into the build folder, and runs its pytest suite.
# Usage: python_client_test.sh BUILD_DIR SOURCE_DIR
set -eu
bin=$1
src=$2
site="$bin/python-site"
rm -rf "$site"
python3 -m pip install -q --no-deps --target "$site" "$src/python"
cd "$bin"
PYTHONPATH="$site" KILN_BIN_DIR="$bin" KILN_RUNTIME="$bin/deploy/libkiln_runtime.so" \
  exec python3 -m pytest -v -p no:cacheprovider "$src/python/tests"
