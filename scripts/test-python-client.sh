#!/usr/bin/env bash
# The Python package clients/python (tessera-client) against a real coordinator and worker:
# installed into .build-pyclient-venv/ with pytest, run with the release binary; pytest's
# summary line and exit code are this script's.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=$PWD/.build-pyclient-venv
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --upgrade ./clients/python pytest
binary=${TESSERA_BIN:-$PWD/.build/release/tessera}
[ -x "$binary" ] || swift build -c release --product tessera >/dev/null
TESSERA_BIN=$binary "$venv/bin/pytest" -q clients/python/tests
