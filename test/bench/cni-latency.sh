#!/usr/bin/env bash
# test/bench/cni-latency.sh BUILD_DIR — P1 of docs/benchmarks.md (`make bench-cni`): wall
# time of each CNI exec of aiqos vs the reference bandwidth/tuning plugins and
# the exec floor, sequential and concurrent, in scratch netns (root).
# Env: N (samples per row, default 200), CONC (concurrent execs, default 10),
# STATE_PARENT (aiqos's stateDir under this directory instead of the lab's).
# Also builds test/bench/cni_kernel_floor.c against the library (the kernel's
# own share of ADD/DEL, measured in-process); skipped if that cannot be built.
set -euo pipefail
build=${1:-build}
if [ "$(id -u)" -ne 0 ]; then
	echo "cni-latency: needs root (network namespaces, qdiscs)" >&2
	exit 1
fi
here=$(dirname "$0")
floor="$build/bench/cni_kernel_floor"
mkdir -p "$build/bench"
# shellcheck disable=SC2046 # pkg-config output is a list of flags
if ! ${CC:-cc} -O2 -std=gnu11 -I"$here/../../shared" $(pkg-config --cflags libnl-3.0 libcjson) \
	-o "$floor" "$here/cni_kernel_floor.c" "$build/lib/libaiqos.a" $(pkg-config --libs libnl-3.0 libcjson) 2>"$floor.log"; then
	echo "cni-latency: kernel floor tool not built (see $floor.log)" >&2
	rm -f "$floor"
fi
exec /usr/bin/python3 "$here/cni_latency.py" "$build"
