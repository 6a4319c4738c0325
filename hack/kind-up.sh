#!/usr/bin/env bash
# hack/kind-up.sh [--name NAME] [--image NODE_IMAGE]
# A kind cluster to try aiqos in (needs Docker and kind): one control-plane
# node and one worker, kind's default CNI (kindnet: 10-kindnet.conflist with
# ptp + portmap, cniVersion 0.3.1, which aiqos chains into). Idempotent: an
# existing cluster of that name is kept. Prints the kubectl context.
#
# Then: docker build -f agent/Containerfile -t aiqos:0.1.0 .
#       kind load docker-image aiqos:0.1.0 --name NAME
#       kubectl --context kind-NAME apply -k manifests/
# or all of it, with the checks: hack/kind-e2e.sh
set -euo pipefail

name=${KIND_CLUSTER_NAME:-aiqos}
image=${KIND_NODE_IMAGE:-}

die() { echo "kind-up: error: $*" >&2; exit 1; }

while [ $# -gt 0 ]; do
	case $1 in
	--name) name=$2; shift 2 ;;
	--image) image=$2; shift 2 ;;
	-h | --help) sed -n '2,13p' "$0"; exit 0 ;;
	*) die "unknown argument '$1' (see --help)" ;;
	esac
done
for c in docker kind kubectl; do
	command -v "$c" >/dev/null || die "'$c' not found"
done
docker info >/dev/null 2>&1 || die "docker is not running (or not reachable by this user)"

if kind get clusters 2>/dev/null | grep -qx "$name"; then
	echo "kind-up: cluster '$name' exists, kept" >&2
else
	config=$(mktemp "${TMPDIR:-/tmp}/aiqos-kind.XXXXXX")
	trap 'rm -f "$config"' EXIT
	cat >"$config" <<YAML
kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
name: $name
nodes:
  - role: control-plane
  - role: worker
YAML
	args=(create cluster --name "$name" --config "$config" --wait 180s)
	[ -n "$image" ] && args+=(--image "$image")
	kind "${args[@]}" >&2
fi
kubectl --context "kind-$name" wait --for=condition=Ready node --all --timeout=180s >/dev/null
echo "kind-$name"
