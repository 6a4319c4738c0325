#!/usr/bin/env bash
# hack/e2e-node.sh [--keep-logs DIR] [--shell | --hold] [BUILD_DIR]
# The kind-less node e2e (`make e2e`, suite "e2e" of test/run.sh): a real
# kubelet + Debian's containerd and runc + the control plane of
# hack/control-plane.sh, on this machine, then test/e2e/assert.py — the same
# assertions hack/kind-e2e.sh runs on a kind node — with `--node-exec ''`.
#
#   1. Kubernetes binaries (hack/build-k8s.sh, cached), helm (hack/build-helm.sh)
#      and four OCI archives built from local files: aiqos:e2e
#      (hack/build-image.sh from BUILD_DIR/bin), a pause image (test/e2e/pause.c,
#      static), an agnhost-compatible example image (busybox +
#      test/e2e/agnhost-lite.sh) and a kubectl image (the static kubectl of
#      build-k8s.sh alone: the chart's uninstall hook Jobs run it, no shell),
#      test/e2e/mkimage.py.
#   2. hack/lib/e2e-sandbox.sh as PID 1 of new mount, network, PID, UTS and
#      IPC namespaces (the node: what a kind node's container is), which starts
#      containerd, the control plane and the kubelet, imports the images and
#      runs assert.py: `helm install` of manifests/helm/aiqos (image, pull
#      policy and uninstall.kubectlImage set), its assertions, then
#      `helm uninstall` (the chart's pre-delete hooks) and the node checked.
#   3. Teardown, whatever happened: the namespaces end with their PID 1 (every
#      process, mount, netns, veth and iptables rule of the node goes with
#      them), the cgroups below /sys/fs/cgroup/*/aiqos-e2e-ID are removed,
#      then checked: no cgroup, mount or process of the run is left.
#
# Ends with "e2e: N passed, N failed" (setup steps + assert.py + teardown);
# exit 1 on any failure. Root. --keep-logs DIR: copy the logs (containerd,
# kubelet, control plane, pods) there. Instead of the assertions, --shell
# opens a shell in the node, --hold keeps it up until this script is killed
# (enter it with nsenter -a -t <containerd's pid>). AIQOS_E2E_TIMEOUT (s,
# default 1500) bounds the whole run; AIQOS_E2E_WAIT (s, default 120) each
# wait of assert.py. test/e2e/README.md describes the node.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/build
mode="test"
keep_logs=""

# Before the work dir exists nothing else prints the result line.
die() {
	echo "e2e-node: error: $*" >&2
	[ -n "${work:-}" ] || echo "e2e: 0 passed, 1 failed"
	exit 1
}
log() { echo "e2e-node: $*"; }

while [ $# -gt 0 ]; do
	case $1 in
	--shell) mode=shell; shift ;;
	--hold) mode=hold; shift ;;
	--keep-logs) keep_logs=$2; shift 2 ;;
	-h | --help) sed -n '2,32p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	-*) die "unknown option '$1' (see --help)" ;;
	*) build=$1; shift ;;
	esac
done
build=$(cd "$build" && pwd) || die "build dir missing"
[ "$(id -u)" -eq 0 ] || die "needs root (namespaces, cgroups, containerd)"
timeout_s=${AIQOS_E2E_TIMEOUT:-1500}
[[ $timeout_s =~ ^[0-9]+$ ]] || die "AIQOS_E2E_TIMEOUT '$timeout_s' is not a number of seconds"

for c in containerd containerd-shim-runc-v2 runc ctr unshare nsenter ip tc iptables jq curl busybox cc ldd python3 timeout; do
	command -v "$c" >/dev/null || die "'$c' not found (hack/install-deps.sh installs it)"
done
for p in ptp host-local portmap loopback; do
	[ -x "/usr/lib/cni/$p" ] || die "/usr/lib/cni/$p missing (package containernetworking-plugins)"
done
for p in aiqos aiqos-agent aiqosctl; do
	[ -x "$build/bin/$p" ] || die "$build/bin/$p missing (make all)"
done
busybox=$(command -v busybox)
! ldd "$busybox" >/dev/null 2>&1 || die "$busybox is not static (package busybox-static)"
grep -q '^nodev[[:space:]]*overlay$' /proc/filesystems || die "the kernel has no overlayfs (containerd's snapshotter)"

t_start=$SECONDS
bin=$("$top/hack/build-k8s.sh" --print-bin-dir) || die "hack/build-k8s.sh failed"
# The agent is installed and uninstalled with helm (assert.py --helm).
helm_dir=$("$top/hack/build-helm.sh" --print-bin-dir) || die "hack/build-helm.sh failed"
export AIQOS_E2E_HELM=$helm_dir/helm
t_k8s=$((SECONDS - t_start))

# Short: containerd's shim sockets live below it (sun_path is 108 bytes).
work=$(mktemp -d /tmp/aqe2e.XXXXXX)
id=${work##*.}
cgparent=aiqos-e2e-$id
sandbox_pid=""
tail_pid=""
t0_node=""
out=$work/logs/e2e.out
torn_down=0
setup_pass=0 setup_fail=0 assert_pass=0 assert_fail=0 td_pass=0 td_fail=0

cgroup_dirs() { # every cgroup dir of this run, deepest first
	local h
	for h in /sys/fs/cgroup/*/; do
		[ -d "$h$cgparent" ] && find "$h$cgparent" -depth -type d
	done
	return 0
}

node_processes() { # PIDs whose command line names the work dir
	local f
	for f in /proc/[0-9]*/cmdline; do
		case $(tr '\0' ' ' <"$f" 2>/dev/null) in
		*"$work/"*) f=${f#/proc/}; printf '%s ' "${f%/cmdline}" ;;
		esac
	done
}

teardown() {
	[ "$torn_down" -eq 0 ] || return 0
	torn_down=1
	local t0=$SECONDS i d left problems=()
	# The sandbox's PID 1 takes every process of the node with it.
	if [ -n "$sandbox_pid" ] && kill -0 "$sandbox_pid" 2>/dev/null; then
		kill -KILL "$sandbox_pid" 2>/dev/null || true
	fi
	for ((i = 0; i < 100; i++)); do
		left=$(cgroup_dirs | while read -r d; do cat "$d/cgroup.procs" 2>/dev/null; done | wc -l)
		[ "$left" -eq 0 ] && break
		sleep 0.2
	done
	[ "$left" -eq 0 ] || problems+=("$left processes still in cgroups $cgparent after 20s")
	for ((i = 0; i < 50; i++)); do
		cgroup_dirs | while read -r d; do rmdir "$d" 2>/dev/null || true; done
		[ -z "$(cgroup_dirs)" ] && break
		sleep 0.2
	done
	[ -z "$(cgroup_dirs)" ] || problems+=("cgroups left: $(cgroup_dirs | tr '\n' ' ')")
	if awk -v d="$work/" 'index($5, d) == 1 { found = 1 } END { exit !found }' /proc/self/mountinfo; then
		problems+=("mounts below $work in the host's mount namespace")
	fi
	# Every process of the node names the work dir on its command line.
	for ((i = 0; i < 50; i++)); do
		left=$(node_processes)
		[ -z "$left" ] && break
		sleep 0.2
	done
	[ -z "$left" ] || problems+=("processes of the node still running: $left")
	if [ -n "$keep_logs" ]; then
		mkdir -p "$keep_logs"
		cp -r "$work/logs/." "$keep_logs/" 2>/dev/null || true
		[ ! -d "$work/cp/logs" ] || cp -r "$work/cp/logs" "$keep_logs/control-plane" 2>/dev/null || true
		log "logs kept in $keep_logs"
	fi
	if [ ${#problems[@]} -eq 0 ]; then
		rm -rf --one-file-system "$work" || problems+=("cannot remove $work")
	fi
	if [ ${#problems[@]} -eq 0 ]; then
		td_pass=1
		echo "ok   teardown ($((SECONDS - t0))s): no process, mount or cgroup ($cgparent) of the node left, $work removed"
	else
		td_fail=1
		echo "FAIL teardown: ${problems[*]} (kept $work)"
	fi
}

summary() {
	local p=$((setup_pass + assert_pass + td_pass)) f=$((setup_fail + assert_fail + td_fail))
	log "wall time $((SECONDS - t_start))s (Kubernetes binaries ${t_k8s}s, images ${t_images:-?}s, node + assertions ${t_sandbox:-?}s)"
	echo "e2e: $p passed, $f failed"
	[ "$f" -eq 0 ]
}

# setup_* and assert_* from the node's output; a run that ended without
# assert.py's result line (a failed setup, a timeout, a signal) counts what it
# printed plus one failure.
count_results() { # EXIT_STATUS_OF_THE_NODE
	local rc=$1 line
	setup_pass=0 setup_fail=0 assert_pass=0 assert_fail=0
	[ -f "$out" ] || { setup_fail=1; return 0; }
	line=$(grep -E '^setup: [0-9]+ passed, [0-9]+ failed$' "$out" | tail -n 1 || true)
	if [ -n "$line" ]; then
		setup_pass=$(sed -E 's/^setup: ([0-9]+) passed.*/\1/' <<<"$line")
		setup_fail=$(sed -E 's/.* ([0-9]+) failed$/\1/' <<<"$line")
	else
		setup_pass=$(grep -c '^ok   setup: ' "$out" || true)
		setup_fail=1
	fi
	line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$out" | tail -n 1 || true)
	if [ -n "$line" ]; then
		assert_pass=$(sed -E 's/^([0-9]+) passed.*/\1/' <<<"$line")
		assert_fail=$(sed -E 's/.* ([0-9]+) failed$/\1/' <<<"$line")
	elif grep -q '^setup: [0-9]* passed, 0 failed$' "$out"; then
		assert_pass=$(grep -c '^ok   ' "$out" | awk -v s="$setup_pass" '{ print $1 - s }')
		assert_fail=$(($(grep -c '^FAIL ' "$out" || true) + 1))
		log "assert.py printed no result line (exit status $rc): its steps so far and 1 failure counted"
	fi
	if [ "$rc" -ne 0 ] && [ $((setup_fail + assert_fail)) -eq 0 ]; then
		log "the node exited $rc with no failure counted"
		assert_fail=1
	fi
}

on_exit() {
	local rc=$?
	trap - EXIT INT TERM
	if [ "$torn_down" -eq 0 ]; then
		[ -z "$tail_pid" ] || kill "$tail_pid" 2>/dev/null || true
		if [ -n "$t0_node" ]; then
			t_sandbox=$((SECONDS - t0_node))
			count_results "$rc"
			[ "$rc" -eq 0 ] || [ $((setup_fail + assert_fail)) -gt 0 ] || setup_fail=1
		else
			setup_fail=1
		fi
		teardown
		summary || rc=1
	fi
	exit "$rc"
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- images -------------------------------------------------------------------------
t0=$SECONDS
mkdir -p "$work/images" "$work/logs"
bash "$top/hack/build-image.sh" --bin-dir "$build/bin" --name aiqos:e2e --out "$work/images/aiqos.tar" >/dev/null ||
	die "hack/build-image.sh failed"
pause_root=$work/rootfs/pause
mkdir -p "$pause_root"
cc -static -Os -s -Wall -Wextra -o "$pause_root/pause" "$top/test/e2e/pause.c" || die "cannot build test/e2e/pause.c"
python3 "$top/test/e2e/mkimage.py" --rootfs "$pause_root" --name localhost/aiqos-e2e/pause:e2e \
	--entrypoint '["/pause"]' --user 65535:65535 --out "$work/images/pause.tar" >/dev/null
bash "$top/hack/lib/example-image.sh" "$work/images/example.tar" >/dev/null || die "hack/lib/example-image.sh failed"
# The uninstall hook Jobs' image: kubectl is their entrypoint (args only).
kubectl_root=$work/rootfs/kubectl
mkdir -p "$kubectl_root/tmp"
chmod 1777 "$kubectl_root/tmp"
cp "$bin/kubectl" "$kubectl_root/kubectl"
! ldd "$kubectl_root/kubectl" >/dev/null 2>&1 || die "$bin/kubectl is not static: the kubectl image has no libraries"
python3 "$top/test/e2e/mkimage.py" --rootfs "$kubectl_root" --name localhost/aiqos-e2e/kubectl:e2e \
	--entrypoint '["/kubectl"]' --user 65534:65534 --gzip-level 0 --out "$work/images/kubectl.tar" >/dev/null
rm -rf "$work/rootfs"
t_images=$((SECONDS - t0))
log "images built in ${t_images}s: aiqos:e2e, localhost/aiqos-e2e/pause:e2e, localhost/aiqos-e2e/agnhost:e2e," \
	"localhost/aiqos-e2e/kubectl:e2e"

# --- cgroups: the parent of everything the kubelet and runc create --------------------
for h in /sys/fs/cgroup/*/; do
	[ "$(stat -f -c %T "$h")" = cgroupfs ] || continue # v1 hierarchies (cgroup2fs: the unified one)
	mkdir -p "$h$cgparent"
	if [ -f "$h/cpuset.cpus" ]; then
		cat "$h/cpuset.cpus" >"$h$cgparent/cpuset.cpus"
		cat "$h/cpuset.mems" >"$h$cgparent/cpuset.mems"
	fi
done

# --- the node -------------------------------------------------------------------------
t0=$SECONDS
t0_node=$t0
sandbox=(unshare --mount --net --pid --uts --ipc --fork --mount-proc --propagation private --kill-child
	bash "$top/hack/lib/e2e-sandbox.sh" "$work" "$top" "$bin" "$cgparent" "$mode")
if [ "$mode" = shell ]; then
	"${sandbox[@]}" || true
	exit 0
fi
: >"$out"
"${sandbox[@]}" >>"$out" 2>&1 </dev/null &
sandbox_pid=$!
# tail follows the output until the node's PID 1 is gone; timeout bounds it.
# In the background, so that a signal to this script is handled at once.
timeout "$timeout_s" tail -n +1 -f --pid="$sandbox_pid" "$out" &
tail_pid=$!
trc=0
wait "$tail_pid" || trc=$?
tail_pid=""
if [ "$trc" -eq 124 ]; then
	log "timed out after ${timeout_s}s (AIQOS_E2E_TIMEOUT): stopping the node"
	kill -TERM "$(cat "/proc/$sandbox_pid/task/$sandbox_pid/children" 2>/dev/null)" 2>/dev/null || true
	sleep 5
	kill -KILL "$sandbox_pid" 2>/dev/null || true
fi
rc=0
wait "$sandbox_pid" || rc=$?
sandbox_pid=""
[ "$trc" -ne 124 ] || rc=124
t_sandbox=$((SECONDS - t0))
count_results "$rc"
teardown
summary
