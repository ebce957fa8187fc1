#!/usr/bin/env bash
# Runs one coverage-guided fuzz target (libFuzzer through Swift's -sanitize=fuzzer, with
# AddressSanitizer; the C shim built with -fsanitize=fuzzer-no-link,address) for SECONDS.
# Seeds: the small images of ../shared/corpus (if present) and examples/images; the corpus
# it grows is kept in Fuzz/.corpus/TARGET; findings (crash-*, timeout-*, oom-*) land in
# Fuzz/.findings/TARGET.
# usage: Benchmarks/fuzz.sh TARGET SECONDS      (TARGET: render)
set -euo pipefail
cd "$(dirname "$0")/../Fuzz"
target=${1:-render}
seconds=${2:-60}
case "$target" in
    render) product=FuzzRender ;;
    *) echo "unknown target $target (render)" >&2; exit 2 ;;
esac
# shellcheck disable=SC2054 # the commas separate sanitizers, not array elements
flags=(-c release -Xswiftc -sanitize=fuzzer,address -Xcc -fsanitize=fuzzer-no-link,address)
swift build "${flags[@]}" --product "$product" >&2
bin="$(swift build "${flags[@]}" --show-bin-path)/$product"
corpus=".corpus/$target" seeds=".seeds/$target" findings=".findings/$target"
mkdir -p "$corpus" "$seeds" "$findings"
find ../../shared/corpus ../examples/images -type f -size -60k \
    \( -iname '*.jpg' -o -iname '*.jpeg' -o -iname '*.png' -o -iname '*.webp' -o -iname '*.heic' -o -iname '*.avif' \) \
    -exec cp {} "$seeds/" \; 2>/dev/null || true
# Limits as the issue sets them: > 1 s per input is a hang, > 512 MB an over-allocation
# (RSS of the fuzzer process, which also holds the corpus and ASan's shadow: 1 GB).
"$bin" "$corpus" "$seeds" -artifact_prefix="$findings/" -max_total_time="$seconds" -timeout=1 \
    -rss_limit_mb=1024 -malloc_limit_mb=512 -max_len=65536 -print_final_stats=1
