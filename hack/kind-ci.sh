#!/usr/bin/env bash
# hack/kind-ci.sh [--cni kindnet|flannel|both] [BUILD_DIR]   (make kind-e2e)
# The kind e2e offline, from this machine's own builds (root, Debian 12):
#   1. hack/install-deps.sh --kind (Debian's docker.io, mmdebstrap, git)
#   2. hack/kind-docker.sh start: a dockerd with its data under
#      ${AIQOS_CACHE:-/var/cache/aiqos}/kind/docker and kind-runc as its runtime
#      (stopped at the end if this script started it)
#   3. hack/build-kind.sh: kind, coredns, kindnetd, flanneld, the flannel CNI
#      plugin, crictl, kubeadm, kube-proxy (Go, cached)
#   4. hack/kind-node-image.sh: the node image (cached in that dockerd)
#   5. hack/kind-e2e.sh --offline --cni kindnet, then --cni flannel (a new
#      two-node cluster each, deleted afterwards)
# Host settings kind needs, put back at the end: fs.inotify.max_user_instances
# >= 512 and max_user_watches >= 524288 (systemd and the kubelet of every node
# share the host's limits), and /lib/modules (kind bind-mounts it into every
# node; a monolithic kernel has none: an empty one is created and removed).
# Prints each phase's time; ends with "kind-e2e: N passed, N failed".
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/build
cnis=(kindnet flannel)
while [ $# -gt 0 ]; do
	case $1 in
	--cni)
		case $2 in
		both) cnis=(kindnet flannel) ;;
		kindnet | flannel) cnis=("$2") ;;
		*) echo "kind-ci: --cni '$2' is not kindnet, flannel or both" >&2; exit 2 ;;
		esac
		shift 2
		;;
	-h | --help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) build=$1; shift ;;
	esac
done
passed=0 failed=0
t_all=$SECONDS

log() { echo "kind-ci: $*" >&2; }
fail() {
	log "error: $*"
	failed=$((failed + 1))
	exit 1
}
phase() { # NAME START
	log "phase $1: $((SECONDS - $2)) s"
	times+=("$1 $((SECONDS - $2))s")
}
times=()

[ "$(id -u)" -eq 0 ] || { echo "kind-ci: needs root"; echo "kind-e2e: 0 passed, 1 failed"; exit 1; }
[ -x "$build/bin/aiqos" ] || { echo "kind-ci: $build/bin/aiqos missing (make all)"; echo "kind-e2e: 0 passed, 1 failed"; exit 1; }

started_docker=0 made_modules=0
old_instances=$(sysctl -n fs.inotify.max_user_instances)
old_watches=$(sysctl -n fs.inotify.max_user_watches)
finish() {
	local rc=$?
	[ "$started_docker" -eq 0 ] || bash "$top/hack/kind-docker.sh" stop || true
	if [ "$made_modules" -eq 1 ]; then rmdir /lib/modules 2>/dev/null || true; fi
	sysctl -qw fs.inotify.max_user_instances="$old_instances" fs.inotify.max_user_watches="$old_watches" || true
	log "times: ${times[*]} total $((SECONDS - t_all))s"
	echo "kind-e2e: $passed passed, $failed failed"
	[ "$failed" -eq 0 ] && [ "$rc" -eq 0 ] || exit 1
}
trap finish EXIT

t=$SECONDS
bash "$top/hack/install-deps.sh" --kind >&2 || fail "hack/install-deps.sh --kind failed"
[ "$old_instances" -ge 512 ] || sysctl -qw fs.inotify.max_user_instances=512
[ "$old_watches" -ge 524288 ] || sysctl -qw fs.inotify.max_user_watches=524288
if [ ! -e /lib/modules ]; then
	mkdir /lib/modules
	made_modules=1
fi
bash "$top/hack/kind-docker.sh" status || started_docker=1
bash "$top/hack/kind-docker.sh" start || fail "hack/kind-docker.sh start failed"
eval "$(bash "$top/hack/kind-docker.sh" env)"
phase engine "$t"

t=$SECONDS
kind_bin=$(bash "$top/hack/build-kind.sh" --print-bin-dir) || fail "hack/build-kind.sh failed"
export PATH=$kind_bin:$PATH
phase go-builds "$t"

t=$SECONDS
bash "$top/hack/kind-node-image.sh" >&2 || fail "hack/kind-node-image.sh failed"
phase node-image "$t"

for cni in "${cnis[@]}"; do
	t=$SECONDS
	out=$(mktemp)
	set +e
	bash "$top/hack/kind-e2e.sh" --offline --cni "$cni" --name "aiqos-$cni" 2>&1 | tee "$out"
	set -e
	line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$out" | tail -n 1 || true)
	rm -f "$out"
	if [[ $line =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed$ ]]; then
		passed=$((passed + BASH_REMATCH[1]))
		failed=$((failed + BASH_REMATCH[2]))
	else
		failed=$((failed + 1))
	fi
	log "$cni: ${line:-no result line}"
	phase "cluster-$cni" "$t"
done
