#!/usr/bin/env bash
# The test suite: the Swift tests (release build; the multi-host test needs root for
# network namespaces and is reported as skipped without it), then the offline checks of
# deploy/ (Kubernetes schemas, systemd-analyze, shellcheck, hadolint).
set -euo pipefail
cd "$(dirname "$0")/.."
swift test -c release "$@"
scripts/validate-deploy.sh
