#!/usr/bin/env bash
# hack/build-vegeta.sh [--force] [--print-bin-dir] [--check]
# Builds vegeta (github.com/tsenart/vegeta/v12, an open-loop HTTP load
# generator: constant-rate attacks, latencies from the real send time) from its
# Go module at a pinned version into a cache outside the repository, like
# hack/build-k8s.sh:
#
#   ${AIQOS_CACHE:-/var/cache/aiqos}/vegeta/<version>/bin/vegeta
#
# Rebuilt only when missing, when its stamp (version, Go version, flags)
# differs or when `vegeta -version` does not report the pinned version; a
# second run costs a few milliseconds. Concurrent runs serialize on a lock.
# --print-bin-dir prints the bin directory on stdout (everything else goes to
# stderr); --check builds nothing: exit 0 if vegeta is built and current, 1 if
# not. Used by the lab's HTTP client (test/bench/httpload.py, `make bench`).
set -euo pipefail
# shellcheck source=hack/lib/go-tool.sh
. "$(dirname "$0")/lib/go-tool.sh"

TOOL=vegeta
TOOL_VERSION=${AIQOS_VEGETA_VERSION:-v12.13.0}
TOOL_MODULE=github.com/tsenart/vegeta/v12
TOOL_PKG=github.com/tsenart/vegeta/v12
TOOL_GO=1.22
[[ $TOOL_VERSION =~ ^v12\.[0-9]+\.[0-9]+$ ]] || go_tool_die "AIQOS_VEGETA_VERSION '$TOOL_VERSION' is not v12.MINOR.PATCH (v12.13.0)"

tool_reports_version() { "$1" -version 2>/dev/null | grep -qx "Version: $TOOL_VERSION"; }
tool_ldflags() { echo "-s -w -X main.Version=$TOOL_VERSION"; }

go_tool_build "$@"
