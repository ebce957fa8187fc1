#!/usr/bin/env bash
# One command for a new machine: install the libraries, build Tessera (release), and
# run the main job on the bundled sample images with the embedded default: a
# coordinator and local worker processes in one command.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
swift build -c release
.build/release/tessera run jobs/widget-thumbnails.yaml
echo
echo "outputs in out/widget; more examples in jobs/, e.g.: .build/release/tessera run jobs/favicons.yaml"
