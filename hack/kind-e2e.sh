#!/usr/bin/env bash
# hack/kind-e2e.sh [--name NAME] [--keep] [--no-build] [--expect-qdiscs auto|full]
# The end-to-end test on kind, for users with Docker (CI runs the same
# assertions, test/e2e/assert.py, against a real kubelet + containerd without
# Docker: make e2e). Steps:
#   1. hack/kind-up.sh (a cluster with one worker; an existing one is reused)
#   2. docker build -f agent/Containerfile -t aiqos:e2e .  (skipped with
#      --no-build: then aiqos:e2e must exist in Docker)
#   3. kind load docker-image aiqos:e2e
#   4. test/e2e/assert.py on the worker through `docker exec`: install with
#      manifests/ (image aiqos:e2e, pull policy Never), chaining, a kindnet-like
#      rewrite, annotated pods and their tuning, Events, mode changes,
#      metrics, a TCP check between the pods, uninstall
#   5. the cluster is deleted if this script created it (kept with --keep)
# Ends with "N passed, N failed"; exit status 1 on any failure.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
name=${KIND_CLUSTER_NAME:-aiqos}
keep=0 build=1 expect=auto
image=aiqos:e2e

die() { echo "kind-e2e: error: $*" >&2; exit 1; }

while [ $# -gt 0 ]; do
	case $1 in
	--name) name=$2; shift 2 ;;
	--keep) keep=1; shift ;;
	--no-build) build=0; shift ;;
	--expect-qdiscs) expect=$2; shift 2 ;;
	-h | --help) sed -n '2,17p' "$0"; exit 0 ;;
	*) die "unknown argument '$1' (see --help)" ;;
	esac
done
for c in docker kind kubectl python3; do
	command -v "$c" >/dev/null || die "'$c' not found"
done

created=0
if ! kind get clusters 2>/dev/null | grep -qx "$name"; then
	created=1
fi
teardown() {
	if [ "$created" -eq 1 ] && [ "$keep" -eq 0 ]; then
		echo "kind-e2e: deleting cluster $name" >&2
		kind delete cluster --name "$name" >&2 || true
	fi
}
trap teardown EXIT

context=$(bash "$top/hack/kind-up.sh" --name "$name")
worker=$(kubectl --context "$context" get nodes -l '!node-role.kubernetes.io/control-plane' \
	-o jsonpath='{.items[0].metadata.name}')
[ -n "$worker" ] || die "cluster $name has no worker node"

if [ "$build" -eq 1 ]; then
	docker build -f "$top/agent/Containerfile" -t "$image" "$top"
fi
kind load docker-image "$image" --name "$name"

extra=()
[ "$keep" -eq 1 ] && extra+=(--keep)
set +e
python3 "$top/test/e2e/assert.py" \
	--repo "$top" \
	--kubectl "kubectl --context $context" \
	--node "$worker" \
	--node-exec "docker exec -i $worker" \
	--image "$image" \
	--pull-policy Never \
	--expect-qdiscs "$expect" \
	--traffic \
	${extra[@]+"${extra[@]}"}
rc=$?
set -e
exit "$rc"
