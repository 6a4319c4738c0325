#!/usr/bin/env bash
# hack/kind-up.sh [--name NAME] [--image NODE_IMAGE | --offline] [--cni kindnet|flannel]
# A kind cluster to try aiqos in (needs Docker and kind): one control-plane
# node and one worker. Idempotent: an existing cluster of that name is kept.
# Prints the kubectl context on stdout.
#
#   node image  by default the released kindest/node that this kind release
#               pins (pulled from Docker Hub); --image NODE_IMAGE (or
#               KIND_NODE_IMAGE) takes another; --offline builds and uses the
#               local one (hack/kind-node-image.sh: Debian + local builds, no
#               registry).
#   --cni kindnet  kind's default CNI (kindnetd writes 10-kindnet.conflist:
#               ptp + portmap, cniVersion 0.3.1, which aiqos chains into).
#   --cni flannel  kind's disableDefaultCNI, then Flannel's own manifest
#               (kube-flannel.yml, VXLAN backend) from its release on GitHub
#               (AIQOS_FLANNEL_MANIFEST: another file or URL); --offline takes it
#               from the flannel module built by hack/build-kind.sh and loads the
#               locally built flannel images with `kind load image-archive`.
#               Flannel's CNI config delegates to the `bridge` plugin, which
#               kindest/node lacks: it is copied into every node from
#               /usr/lib/cni/bridge (Debian's containernetworking-plugins).
#
# Then: hack/build-image.sh --name aiqos:0.1.0 --out aiqos.tar
#       kind load image-archive aiqos.tar --name NAME
#       kubectl --context kind-NAME apply -k manifests/
# or all of it, with the checks: hack/kind-e2e.sh
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
name=${KIND_CLUSTER_NAME:-aiqos}
image=${KIND_NODE_IMAGE:-}
offline=0 cni=kindnet
cache=${AIQOS_CACHE:-/var/cache/aiqos}/kind

die() { echo "kind-up: error: $*" >&2; exit 1; }
log() { echo "kind-up: $*" >&2; }

while [ $# -gt 0 ]; do
	case $1 in
	--name) name=$2; shift 2 ;;
	--image) image=$2; shift 2 ;;
	--offline) offline=1; shift ;;
	--cni) cni=$2; shift 2 ;;
	-h | --help) sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown argument '$1' (see --help)" ;;
	esac
done
case $cni in kindnet | flannel) ;; *) die "--cni '$cni' is not kindnet or flannel" ;; esac
for c in docker kind kubectl; do
	command -v "$c" >/dev/null || die "'$c' not found"
done
docker info >/dev/null 2>&1 || die "docker is not running (or not reachable by this user; DOCKER_HOST=${DOCKER_HOST:-})"
if [ "$offline" -eq 1 ] && [ -z "$image" ]; then
	image=$(bash "$top/hack/kind-node-image.sh" --print-image) || die "hack/kind-node-image.sh failed"
fi
context=kind-$name

install_flannel() {
	local manifest=${AIQOS_FLANNEL_MANIFEST:-} tmp
	tmp=$(mktemp "${TMPDIR:-/tmp}/aiqos-flannel.XXXXXX")
	if [ "$offline" -eq 1 ]; then
		local src
		src=$(ls -d "$cache"/src/flannel-v* 2>/dev/null | tail -n 1)
		[ -f "$src/Documentation/kube-flannel.yml" ] || die "no flannel source in $cache/src (hack/build-kind.sh)"
		# The images are the ones built here: their names replace the manifest's.
		ref_of() {
			tar -xOf "$cache/images/$1.tar" index.json |
				python3 -c 'import json,sys; print(json.load(sys.stdin)["manifests"][0]["annotations"]["io.containerd.image.name"])'
		}
		sed -e "s|image: ghcr.io/flannel-io/flannel-cni-plugin:.*|image: $(ref_of flannel-cni-plugin)|" \
			-e "s|image: ghcr.io/flannel-io/flannel:.*|image: $(ref_of flannel)|" \
			"$src/Documentation/kube-flannel.yml" >"$tmp"
		local i
		for i in flannel flannel-cni-plugin; do
			kind load image-archive "$cache/images/$i.tar" --name "$name" >&2 || die "kind load image-archive $i.tar failed"
		done
	else
		manifest=${manifest:-https://github.com/flannel-io/flannel/releases/latest/download/kube-flannel.yml}
		case $manifest in
		http*://*) curl -fsSL "$manifest" -o "$tmp" || die "cannot download $manifest" ;;
		*) cp "$manifest" "$tmp" ;;
		esac
	fi
	local n
	for n in $(kind get nodes --name "$name"); do
		if ! docker exec "$n" test -x /opt/cni/bin/bridge; then
			[ -x /usr/lib/cni/bridge ] || die "$n has no /opt/cni/bin/bridge and /usr/lib/cni/bridge is missing (containernetworking-plugins)"
			docker cp /usr/lib/cni/bridge "$n:/opt/cni/bin/bridge" >&2
		fi
	done
	kubectl --context "$context" apply -f "$tmp" >&2
	rm -f "$tmp"
	kubectl --context "$context" -n kube-flannel rollout status daemonset/kube-flannel-ds --timeout=180s >&2
}

if kind get clusters 2>/dev/null | grep -qx "$name"; then
	log "cluster '$name' exists, kept"
else
	config=$(mktemp "${TMPDIR:-/tmp}/aiqos-kind.XXXXXX")
	trap 'rm -f "$config"' EXIT
	{
		echo "kind: Cluster"
		echo "apiVersion: kind.x-k8s.io/v1alpha4"
		echo "name: $name"
		if [ "$cni" = flannel ]; then
			echo "networking:"
			echo "  disableDefaultCNI: true"
		fi
		echo "nodes:"
		echo "  - role: control-plane"
		echo "  - role: worker"
	} >"$config"
	args=(create cluster --name "$name" --config "$config")
	# Without a CNI no node gets Ready: wait after installing Flannel instead.
	[ "$cni" = flannel ] || args+=(--wait 180s)
	[ -n "$image" ] && args+=(--image "$image")
	log "kind ${args[*]}"
	kind "${args[@]}" >&2
	[ "$cni" = kindnet ] || install_flannel
fi
kubectl --context "$context" wait --for=condition=Ready node --all --timeout=180s >/dev/null
echo "$context"
