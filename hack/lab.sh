#!/usr/bin/env bash
# hack/lab.sh — entry point of the aiqos lab (test/bench/lab.py):
#   hack/lab.sh demo [BUILD]       `make demo`: the workload without and with aiqos, table + plot
#   hack/lab.sh bench [BUILD]      `make bench`: every benchmark, regenerates docs/benchmarks.md
#   hack/lab.sh bench-lab [BUILD]  `make bench-lab`: only the P4 workload matrix (CELLS=... a subset)
#   hack/lab.sh up [BUILD]         a lab to explore by hand (Ctrl-C tears it down)
#   hack/lab.sh down               remove what killed runs left (netns aqt-lab-*, their processes)
# Root. Whatever happens, the run's namespaces and processes are removed on exit.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cmd=${1:-}
build=${2:-$top/build}
py=/usr/bin/python3

case "$cmd" in
demo | bench | bench-lab | up | down) ;;
*)
	sed -n '2,8p' "$0" >&2
	exit 2
	;;
esac
if [ "$(id -u)" -ne 0 ]; then
	echo "lab: $cmd needs root (network namespaces, qdiscs)" >&2
	exit 1
fi
if [ "$cmd" = down ]; then
	exec "$py" "$top/test/bench/lab.py" down --all
fi

tag=$(od -An -N2 -tx1 /dev/urandom | tr -d ' \n')
export AQT_LAB_TAG=$tag
cleanup() {
	"$py" "$top/test/bench/lab.py" down --tag "$tag" >/dev/null 2>&1 || true
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# the matrix's HTTP client (cached in /var/cache/aiqos/vegeta: a no-op when
# built) and the token streams' HTTP/SSE stack (a venv in /var/cache/aiqos/sse)
case "$cmd" in
bench | bench-lab | up)
	bash "$top/hack/build-vegeta.sh"
	bash "$top/hack/install-sse.sh"
	;;
esac

case "$cmd" in
up) "$py" "$top/test/bench/lab.py" up --build "$build" --tag "$tag" ;;
*) "$py" "$top/test/bench/bench.py" "$cmd" "$build" ;;
esac
