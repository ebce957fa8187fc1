#!/usr/bin/env bash
# Coverage-guided fuzzing of the parsers of hostile bytes (libFuzzer through Swift's
# -sanitize=fuzzer, with AddressSanitizer; the C shim built with
# -fsanitize=fuzzer-no-link,address). One binary holds every target (Fuzz/Sources/FuzzTargets).
#
#   Benchmarks/fuzz.sh TARGET SECONDS   fuzz one target (render inspect exif progressive png strip wire job tiff gif video jxl entropy raw)
#   Benchmarks/fuzz.sh replay           run every committed seed and regression input once (CI)
#   FUZZ_KEEP_GOING=1 Benchmarks/fuzz.sh TARGET SECONDS   record findings and go on (long unattended runs)
#
# Seeds: Fuzz/corpus/TARGET (committed, made by Fuzz/seeds.py and the binary's
# FUZZ_WRITE_SEEDS), plus the small images of ../shared/corpus when present. The corpus a run
# grows is kept in Fuzz/.corpus/TARGET; findings (crash-*, timeout-*, oom-*) land in
# Fuzz/.findings/TARGET; once fixed, each becomes Fuzz/regressions/TARGET/NAME (committed).
set -euo pipefail
cd "$(dirname "$0")/../Fuzz"
targets=(render inspect exif progressive png strip wire job tiff gif video jxl entropy raw)
mode=${1:-render}
# shellcheck disable=SC2054 # the commas separate sanitizers, not array elements
# The main package is a path dependency: without --disable-build-manifest-caching SwiftPM may
# keep its old list of source files and miss a new one.
flags=(-c release --disable-build-manifest-caching -Xswiftc -enable-testing -Xswiftc -sanitize=fuzzer,address
       -Xcc -fsanitize=fuzzer-no-link,address)
swift build "${flags[@]}" --product FuzzTargets >&2
bin="$(swift build "${flags[@]}" --show-bin-path)/FuzzTargets"
[ -d corpus/wire ] || FUZZ_WRITE_SEEDS=corpus/wire "$bin"  # committed once; the record has a timestamp
[ -d corpus/raw ] || FUZZ_WRITE_RAW_SEEDS=corpus/raw "$bin"  # small DNGs; the corpus's raw stubs are added below

dictionary() {  # the dictionary file of target $1 (concatenated into Fuzz/.dict/)
    local parts
    case "$1" in
        render) parts="jpeg png modern" ;; inspect|strip) parts="jpeg png" ;;
        exif|progressive|entropy) parts="jpeg" ;; png) parts="png" ;; wire) parts="wire" ;; job) parts="job" ;; tiff) parts="tiff" ;; gif) parts="gif" ;; video) parts="video" ;; jxl) parts="jxl jpeg" ;; raw) parts="tiff raw" ;;
    esac
    mkdir -p .dict
    for p in $parts; do cat "dict/$p.dict"; done > ".dict/$1.dict"
    echo ".dict/$1.dict"
}

# Limits: > 1 s per input is a hang, > 512 MB allocated at once an
# over-allocation (RSS of the fuzzer process, which also holds the corpus and ASan's shadow: 1 GB).
limits=(-timeout=1 -rss_limit_mb=1024 -malloc_limit_mb=512 -max_len=65536)

if [ "$mode" = replay ]; then
    for t in "${targets[@]}"; do
        dirs=("corpus/$t")
        [ -d "regressions/$t" ] && dirs+=("regressions/$t")
        n=$(find "${dirs[@]}" -type f | wc -l)
        start=$(date +%s.%N)
        FUZZ_TARGET=$t "$bin" "${limits[@]}" -runs=0 "${dirs[@]}" > ".replay-$t.log" 2>&1 \
            || { cat ".replay-$t.log" >&2; echo "fuzz replay: $t FAILED" >&2; exit 1; }
        printf 'fuzz replay: %-12s %4d inputs  %.1f s\n' "$t" "$n" "$(echo "$(date +%s.%N) - $start" | bc)"
    done
    exit 0
fi

target=$mode
seconds=${2:-60}
[[ " ${targets[*]} " == *" $target "* ]] || { echo "unknown target $target (${targets[*]})" >&2; exit 2; }
work=".corpus/$target" extra=".seeds/$target" findings=".findings/$target"
mkdir -p "$work" "$extra" "$findings"
case "$target" in
    render|inspect|strip|png|progressive|entropy)
        find ../../shared/corpus ../examples/images -type f -size -60k \
            \( -iname '*.jpg' -o -iname '*.jpeg' -o -iname '*.png' -o -iname '*.webp' -o -iname '*.heic' -o -iname '*.avif' \) \
            -exec cp {} "$extra/" \; 2>/dev/null || true ;;
    tiff)
        find ../../shared/corpus -type f -size -60k \( -iname '*.tif' -o -iname '*.tiff' \) \
            -exec cp {} "$extra/" \; 2>/dev/null || true ;;
    gif)
        find ../../shared/corpus -type f -size -60k -iname '*.gif' -exec cp {} "$extra/" \; 2>/dev/null || true ;;
    jxl)
        find ../../shared/corpus -type f -size -60k -iname '*.jxl' -exec cp {} "$extra/" \; 2>/dev/null || true ;;
    raw)
        find ../../shared/corpus/raw -type f -size -64k ! -name '*.tsv' ! -name '*.md' ! -name '*.py' \
            -exec cp {} "$extra/" \; 2>/dev/null || true ;;
esac
dirs=("$work" "corpus/$target" "$extra")
[ -d "regressions/$target" ] && dirs+=("regressions/$target")
keep_going=()
[ "${FUZZ_KEEP_GOING:-0}" = 1 ] && keep_going=(-fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1)
FUZZ_TARGET=$target "$bin" "${dirs[@]}" -dict="$(dictionary "$target")" -artifact_prefix="$findings/" \
    -max_total_time="$seconds" "${limits[@]}" -print_final_stats=1 "${keep_going[@]}"
