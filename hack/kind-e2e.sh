#!/usr/bin/env bash
# hack/kind-e2e.sh [--name NAME] [--keep] [--offline | --image NODE_IMAGE]
#                  [--cni kindnet|flannel] [--no-build] [--expect-qdiscs auto|full]
#                  [--bench-seconds N] [--uplink-rate RATE]
# The end-to-end test on a kind cluster (needs Docker, kind, kubectl; CI runs
# the same assertions, test/e2e/assert.py, against a real kubelet + containerd
# without Docker: make e2e; `make kind-e2e` runs this script offline with
# kindnet and with Flannel, hack/kind-ci.sh). Steps:
#   1. hack/kind-up.sh: a control plane and a worker (an existing cluster of
#      that name is reused); the released kindest/node by default, the local
#      node image with --offline; kind's kindnet or Flannel (VXLAN) with --cni
#   2. the aiqos image from build/bin without Docker (hack/build-image.sh;
#      --no-build: build/image/aiqos.oci.tar as it is) and the example pods'
#      image (hack/lib/example-image.sh), each `kind load image-archive`
#   3. test/e2e/assert.py against the worker through `docker exec`: install
#      with manifests/ (image aiqos:e2e, pull policy Never), chaining, a
#      kindnet-like rewrite, annotated pods and their tuning, Events, mode
#      changes, metrics, TCP between the pods on the worker and both ways to a
#      pod on the control-plane node (across nodes, through the CNI), uninstall
#   4. with --cni flannel: test/e2e/kind_overlay.py, an inference pod's
#      request/response p99 (sockperf, 1000 req/s) against a training pod's
#      bulk flows (iperf3, 4 streams) from the worker to the control-plane node
#      through the VXLAN overlay, with the worker's uplink at RATE (default
#      200mbit): no aiqos (the same rate with a deep FIFO) vs aiqos
#      (uplinkRate RATE); printed, and checked (aiqos's p99 below the FIFO's)
#   5. the cluster is deleted if this script created it (kept with --keep)
# Ends with "N passed, N failed"; exit status 1 on any failure.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
name=${KIND_CLUSTER_NAME:-aiqos}
keep=0 build=1 expect=auto offline=0 cni=kindnet node_image="" bench_s=20 rate=200mbit
image=aiqos:e2e

die() { echo "kind-e2e: error: $*" >&2; echo "0 passed, 1 failed"; exit 1; }
log() { echo "kind-e2e: $*" >&2; }

while [ $# -gt 0 ]; do
	case $1 in
	--name) name=$2; shift 2 ;;
	--keep) keep=1; shift ;;
	--no-build) build=0; shift ;;
	--offline) offline=1; shift ;;
	--image) node_image=$2; shift 2 ;;
	--cni) cni=$2; shift 2 ;;
	--expect-qdiscs) expect=$2; shift 2 ;;
	--bench-seconds) bench_s=$2; shift 2 ;;
	--uplink-rate) rate=$2; shift 2 ;;
	-h | --help) sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown argument '$1' (see --help)" ;;
	esac
done
case $cni in kindnet | flannel) ;; *) die "--cni '$cni' is not kindnet or flannel" ;; esac
[[ $bench_s =~ ^[0-9]+$ ]] && [ "$bench_s" -ge 5 ] || die "--bench-seconds '$bench_s' is not a number >= 5"
[[ $rate =~ ^[0-9]+(kbit|mbit|gbit)$ ]] || die "--uplink-rate '$rate' is not NUMBER{kbit,mbit,gbit}"
for c in docker kind kubectl python3; do
	command -v "$c" >/dev/null || die "'$c' not found"
done

created=0
if ! kind get clusters 2>/dev/null | grep -qx "$name"; then
	created=1
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/aiqos-kind-e2e.XXXXXX")
teardown() {
	if [ "$created" -eq 1 ] && [ "$keep" -eq 0 ]; then
		log "deleting cluster $name"
		kind delete cluster --name "$name" >&2 || true
	fi
	rm -rf "$work"
}
trap teardown EXIT

up=(--name "$name" --cni "$cni")
[ "$offline" -eq 0 ] || up+=(--offline)
[ -z "$node_image" ] || up+=(--image "$node_image")
t0=$SECONDS
context=$(bash "$top/hack/kind-up.sh" "${up[@]}") || die "hack/kind-up.sh failed"
log "cluster $context up in $((SECONDS - t0)) s"
kubectl="kubectl --context $context"
worker=$($kubectl get nodes -l '!node-role.kubernetes.io/control-plane' -o jsonpath='{.items[0].metadata.name}')
peer=$($kubectl get nodes -l 'node-role.kubernetes.io/control-plane' -o jsonpath='{.items[0].metadata.name}')
[ -n "$worker" ] || die "cluster $name has no worker node"
[ -n "$peer" ] || die "cluster $name has no control-plane node"

archive=$top/build/image/aiqos.oci.tar
if [ "$build" -eq 1 ]; then
	archive=$work/aiqos.tar
	bash "$top/hack/build-image.sh" --name "$image" --out "$archive" >&2 || die "hack/build-image.sh failed (make all first)"
fi
[ -f "$archive" ] || die "$archive missing (hack/build-image.sh)"
example=$(bash "$top/hack/lib/example-image.sh" "$work/example.tar") || die "hack/lib/example-image.sh failed"
kind load image-archive "$archive" --name "$name" >&2 || die "kind load image-archive $archive failed"
kind load image-archive "$work/example.tar" --name "$name" >&2 || die "kind load image-archive (example) failed"

extra=()
[ "$keep" -eq 1 ] && extra+=(--keep)
set +e
python3 "$top/test/e2e/assert.py" \
	--repo "$top" \
	--kubectl "$kubectl" \
	--node "$worker" \
	--node-exec "docker exec -i $worker" \
	--image "$image" \
	--pull-policy Never \
	--example-image "$example" \
	--expect-qdiscs "$expect" \
	--traffic --peer-node "$peer" \
	${extra[@]+"${extra[@]}"} | tee "$work/assert.out"
rc=${PIPESTATUS[0]}
set -e
summary=$(tail -n 1 "$work/assert.out")
if [ "$cni" = flannel ]; then
	bench=$(bash "$top/hack/lib/example-image.sh" "$work/bench.tar" --bench) || die "hack/lib/example-image.sh --bench failed"
	kind load image-archive "$work/bench.tar" --name "$name" >&2 || die "kind load image-archive (bench) failed"
	set +e
	python3 "$top/test/e2e/kind_overlay.py" \
		--repo "$top" --kubectl "$kubectl" --node "$worker" --peer-node "$peer" \
		--node-exec "docker exec -i $worker" --image "$image" --bench-image "$bench" \
		--seconds "$bench_s" --rate "$rate" | tee "$work/bench.out"
	brc=${PIPESTATUS[0]}
	set -e
	[ "$brc" -eq 0 ] || rc=1
	# One result line for the run: assert.py's and the overlay checks' counts added.
	summary=$(python3 - "$summary" "$(tail -n 1 "$work/bench.out")" <<'EOF'
import re, sys
p = f = 0
for line in sys.argv[1:]:
    m = re.search(r"(\d+) passed, (\d+) failed", line)
    if m:
        p += int(m.group(1)); f += int(m.group(2))
    else:
        f += 1
print("%d passed, %d failed" % (p, f))
EOF
	)
	echo "$summary"
fi
[[ $summary =~ ,\ 0\ failed$ ]] || rc=1
exit "$rc"
