#!/usr/bin/env bash
# The imaging tests under AddressSanitizer (Swift and C) and UndefinedBehaviorSanitizer
# (the C shim: setjmp guards, SIMD resampling kernels, PNG/JPEG glue), in a separate
# debug build (.build-sanitize). Any sanitizer report fails the run. Part of scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
# Swift has no UBSan on Linux: -fsanitize=undefined applies to the C targets, its runtime is linked.
flags=(--scratch-path .build-sanitize --sanitize=address -Xcc -fsanitize=undefined -Xcc -fno-sanitize-recover=undefined
       -Xswiftc -Xclang-linker -Xswiftc -fsanitize=undefined)
swift build --build-tests "${flags[@]}"
export ASAN_OPTIONS=halt_on_error=1:detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export LSAN_OPTIONS="suppressions=$PWD/scripts/lsan.supp:print_suppressions=0"
# One test is left to the release run: which DCT scale 12-megapixel sources decode at (the
# planner's Swift; the same libjpeg and resampling paths run here on smaller images), 77 s of a
# CI run in this debug ASan build.
swift test --skip-build "${flags[@]}" --filter TesseraImagingTests --skip GeometryTests.testThumbnailsUseScaledDecoding
