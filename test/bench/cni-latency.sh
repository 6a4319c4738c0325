#!/usr/bin/env bash
# test/bench/cni-latency.sh BUILD_DIR — DESIGN §6 P1 (`make bench-cni`): wall
# time of each CNI exec of aiqos vs the reference bandwidth/tuning plugins and
# the exec floor, sequential and concurrent, in scratch netns (root).
# Env: N (samples per row, default 200), CONC (concurrent execs, default 10).
set -euo pipefail
build=${1:-build}
if [ "$(id -u)" -ne 0 ]; then
	echo "cni-latency: needs root (network namespaces, qdiscs)" >&2
	exit 1
fi
exec /usr/bin/python3 "$(dirname "$0")/cni_latency.py" "$build"
