#!/usr/bin/env bash
# The test suite: the import check (scripts/check-imports.py), the Swift tests (release build; the multi-host test needs root for
# network namespaces and is reported as skipped without it), the Python client package's pytest
# suite against the release binary (scripts/test-python-client.sh), the imaging tests again under
# AddressSanitizer and UndefinedBehaviorSanitizer, a replay of every fuzz target's seeds and
# regression inputs in the sanitizer-instrumented fuzz build, the container image built from
# Debian packages and run (root only), then the offline checks of deploy/ (Kubernetes
# schemas, systemd-analyze, shellcheck, hadolint).
set -euo pipefail
cd "$(dirname "$0")/.."
# The layering in Package.swift is the one the code has: imports match declared dependencies.
scripts/check-imports.py
swift test -c release "$@"
if [ $# -eq 0 ]; then  # the whole suite (scripts/test.sh --filter X runs only X)
    scripts/test-python-client.sh
    scripts/sanitize.sh
    Benchmarks/fuzz.sh replay
    scripts/test-container.sh
    scripts/test-systemd.sh
fi
scripts/validate-deploy.sh
