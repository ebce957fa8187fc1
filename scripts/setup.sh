#!/usr/bin/env bash
# One command for a new machine: install the libraries, build Tessera (release),
# and render the bundled sample images to the thumbnail, favicon and widget presets.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
swift build -c release
rm -rf out/samples
.build/release/tessera render examples/images -p thumbnail -p favicon -p widget -o out/samples
echo
echo "outputs in out/samples; try: .build/release/tessera inspect examples/images/mei_Apple_iPhone_5.jpg"
