#!/usr/bin/env bash
# hack/lib/e2e-sandbox.sh — the inside of the node e2e (hack/e2e-node.sh starts
# it as PID 1 of new mount, network, PID, UTS and IPC namespaces): a Kubernetes
# node that looks like a kind node to aiqos, then test/e2e/assert.py on it.
#
#   e2e-sandbox.sh WORK TOP K8S_BIN CGROUP_PARENT MODE
#
# MODE: "test" runs assert.py; "shell" starts an interactive shell instead;
# "hold" keeps the node up until killed (nsenter -a -t <containerd's pid>).
# The namespaces are the node's isolation (what a kind node's container gives
# it), and their end is the teardown: when this script exits the kernel kills
# every process left in the PID namespace, and the mounts, the netns files,
# the veths and the iptables rules go with the namespaces. Nothing here writes
# to the host: /etc, /opt and /var are overlays whose upper dirs are in WORK,
# /run is a fresh tmpfs; the only host-wide state are the cgroups below
# CGROUP_PARENT, which hack/e2e-node.sh creates and removes.
#
# The node:
#   eth0 10.250.0.2/24, a veth whose peer (10.250.0.1, the default gateway)
#     is in the netns "aqe-gw": the uplink the agent shapes, as kind's eth0;
#   10.96.0.1, the ClusterIP of the "kubernetes" Service, as a local address
#     (on lo; kube-proxy's IPVS mode puts it on a dummy device, which this
#     kernel lacks), on which kube-apiserver listens (port 443): what
#     kube-proxy provides on a real node, so pods' in-cluster config
#     (KUBERNETES_SERVICE_HOST/PORT) works with the unmodified manifests;
#   etcd, kube-apiserver, kube-controller-manager, kube-scheduler from
#     hack/control-plane.sh (the apiserver bound to 0.0.0.0:443 of this netns,
#     advertising 10.250.0.2, so the Service also gets a real endpoint);
#   containerd (Debian) + runc with its own root, state and socket in WORK,
#     the CRI plugin's CNI dirs /etc/cni/net.d and /opt/cni/bin (the paths the
#     DaemonSet mounts), the reference plugins ptp, host-local, portmap,
#     loopback (what kind's node image ships) and kindnet's conflist;
#   the kubelet, cgroupfs driver below CGROUP_PARENT, its root dir in WORK;
#   the images, imported from the OCI archives in WORK/images (with the
#     kubectl image of the chart's uninstall hooks).
set -euo pipefail

[ $# -eq 5 ] || { echo "usage: $0 WORK TOP K8S_BIN CGROUP_PARENT test|shell|hold" >&2; exit 2; }
W=$1 TOP=$2 KBIN=$3 CGPARENT=$4 MODE=$5

NODE=aiqos-e2e-node
NODE_IP=10.250.0.2
GW_IP=10.250.0.1
SVC_IP=10.96.0.1
POD_SUBNET=10.244.0.0/24
PAUSE_IMAGE=localhost/aiqos-e2e/pause:e2e
EXAMPLE_IMAGE=localhost/aiqos-e2e/agnhost:e2e
KUBECTL_IMAGE=localhost/aiqos-e2e/kubectl:e2e
AIQOS_IMAGE=aiqos:e2e
SOCK=$W/containerd/containerd.sock
LOGS=$W/logs
KUBECTL=("$KBIN/kubectl" --kubeconfig "$W/cp/admin.kubeconfig")
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

# Result lines the driver counts: "ok   setup: ..." / "FAIL setup: ..." and
# "setup: N passed, N failed" once the node is up (or failed).
setup_pass=0
log() { echo "e2e-node: $*"; }
ok() { setup_pass=$((setup_pass + 1)); echo "ok   setup: $*"; }
fail() {
	echo "FAIL setup: $*"
	for f in "$LOGS"/*.log; do
		[ -f "$f" ] || continue
		echo "--- last lines of $f"
		tail -n 30 "$f"
	done
	echo "setup: $setup_pass passed, 1 failed"
	exit 1
}

wait_until() { # SECONDS DESCRIPTION CMD...
	local secs=$1 what=$2 i
	shift 2
	for ((i = 0; i < secs * 5; i++)); do
		if "$@" >/dev/null 2>&1; then return 0; fi
		sleep 0.2
	done
	fail "$what: not within ${secs}s"
}

# --- mounts: our own copies of the paths the node writes to -------------------

setup_mounts() {
	# Copies of other tests' netns files would keep their namespaces alive.
	awk '$9 == "nsfs" { print $5 }' /proc/self/mountinfo | sort -r | while read -r m; do
		umount -l "$m" 2>/dev/null || true
	done
	# Mount events in this namespace reach the containers (HostToContainer
	# propagation of /run/netns in the agent pod); the host is not a peer.
	mount --make-rshared /
	local d
	for d in etc opt var; do
		mkdir -p "$W/overlay/$d/upper" "$W/overlay/$d/work"
		mount -t overlay "aiqos-e2e-$d" \
			-o "lowerdir=/$d,upperdir=$W/overlay/$d/upper,workdir=$W/overlay/$d/work" "/$d"
	done
	mount -t tmpfs -o mode=0755,nosuid,nodev aiqos-e2e-run /run
	mkdir -p /run/netns /etc/cni/net.d /opt/cni/bin /var/lib/cni
	hostname "$NODE"
	# The node's name resolves locally; a lookup of anything else fails at once
	# (the "gateway" netns answers with ICMP port unreachable): nothing leaves
	# this netns anyway, and no query waits for a timeout.
	printf '127.0.0.1 localhost\n%s %s\n' "$NODE_IP" "$NODE" >/etc/hosts
	printf 'nameserver %s\noptions timeout:1 attempts:1\n' "$GW_IP" >/etc/resolv.conf
}

# --- the node's network ---------------------------------------------------------

setup_network() {
	ip link set lo up
	sysctl -qw net.ipv4.ip_forward=1
	ip netns add aqe-gw
	# the uplink as a multi-queue NIC has it (mq, a default child per tx
	# queue): a bare veth is noqueue, which aiqos leaves alone unshaped
	ip link add eth0 numtxqueues 2 numrxqueues 2 type veth peer name gw0 netns aqe-gw
	tc qdisc replace dev eth0 root mq
	ip addr add "$NODE_IP/24" dev eth0
	ip link set eth0 up
	ip -n aqe-gw link set lo up
	ip -n aqe-gw addr add "$GW_IP/24" dev gw0
	ip -n aqe-gw link set gw0 up
	ip route add default via "$GW_IP" dev eth0
	ip addr add "$SVC_IP/32" dev lo
}

# --- CNI: kind's plugins and kindnet's config -------------------------------------

setup_cni() {
	local p
	for p in ptp host-local portmap loopback; do
		install -m 0755 "/usr/lib/cni/$p" "/opt/cni/bin/$p"
	done
	# kindnetd's template (kind pkg/build/nodeimage, cmd/kindnetd), one node's range.
	cat >/etc/cni/net.d/10-kindnet.conflist <<EOF
{
	"cniVersion": "0.3.1",
	"name": "kindnet",
	"plugins": [
	{
		"type": "ptp",
		"ipMasq": false,
		"ipam": {
			"type": "host-local",
			"dataDir": "/run/cni-ipam-state",
			"routes": [
				{ "dst": "0.0.0.0/0" }
			],
			"ranges": [
				[ { "subnet": "$POD_SUBNET" } ]
			]
		}
		,
		"mtu": 1500
	},
	{
		"type": "portmap",
		"capabilities": {
			"portMappings": true
		}
	}
	]
}
EOF
}

# --- containerd ---------------------------------------------------------------------

start_containerd() {
	mkdir -p "$W/containerd/root" "$W/containerd/state" "$W/containerd/opt"
	cat >"$W/containerd/config.toml" <<EOF
version = 2
root = "$W/containerd/root"
state = "$W/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "$SOCK"

[ttrpc]
  address = "$SOCK.ttrpc"

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = "$W/containerd/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  disable_apparmor = true
  # no CAP_SYS_RESOURCE in some CI sandboxes: a negative oom_score_adj (-998
  # for sandboxes, -997 for critical pods) would fail runc; clamp to ours
  restrict_oom_score_adj = true

[plugins."io.containerd.grpc.v1.cri".containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
  SystemdCgroup = false
  BinaryName = "$(command -v runc)"

[plugins."io.containerd.grpc.v1.cri".cni]
  bin_dir = "/opt/cni/bin"
  conf_dir = "/etc/cni/net.d"
  max_conf_num = 1
EOF
	setsid containerd --config "$W/containerd/config.toml" --log-level info \
		>>"$LOGS/containerd.log" 2>&1 </dev/null &
	echo $! >"$W/containerd.pid"
	wait_until 30 "containerd answering on $SOCK" ctr -a "$SOCK" version
	ok "containerd $(ctr -a "$SOCK" version 2>/dev/null | awk '/Version:/ { print $2; exit }') ($(runc --version | head -n 1))"
	local f out
	for f in "$W"/images/*.tar; do
		out=$(ctr -a "$SOCK" -n k8s.io images import "$f" 2>&1) ||
			fail "ctr images import $f: $out"
	done
	local have img
	have=$(ctr -a "$SOCK" -n k8s.io images ls -q)
	for img in "$PAUSE_IMAGE" "docker.io/library/$AIQOS_IMAGE" "$EXAMPLE_IMAGE" "$KUBECTL_IMAGE"; do
		grep -qx "$img" <<<"$have" || fail "image $img not in containerd after import (have: $have)"
	done
	ok "images imported: $PAUSE_IMAGE, $AIQOS_IMAGE, $EXAMPLE_IMAGE, $KUBECTL_IMAGE"
}

# --- the control plane ------------------------------------------------------------------

start_control_plane() {
	local out
	export AIQOS_CP_DIR=$W/cp AIQOS_K8S_BIN=$KBIN AIQOS_CP_APISERVER_PORT=443
	export AIQOS_CP_SERVICE_CIDR=10.96.0.0/16
	# kubeadm's address order: the apiserver reaches the kubelet (exec, logs)
	# at the node's InternalIP, not through a DNS lookup of its name
	export AIQOS_CP_APISERVER_ARGS="--bind-address=0.0.0.0 --advertise-address=$NODE_IP --endpoint-reconciler-type=lease --kubelet-preferred-address-types=InternalIP,Hostname"
	if ! out=$("$TOP/hack/control-plane.sh" start --with-controllers 2>&1); then
		echo "$out"
		cp -r "$W/cp/logs" "$LOGS/cp" 2>/dev/null || true
		fail "hack/control-plane.sh start"
	fi
	ok "control plane: etcd, kube-apiserver ($SVC_IP:443 and 127.0.0.1:443), controller manager, scheduler"
}

# --- the kubelet ------------------------------------------------------------------------

start_kubelet() {
	local k=$W/kubelet
	mkdir -p "$k/root" "$k/pki"
	"$TOP/hack/control-plane.sh" node-kubeconfig "$NODE" "$k/kubeconfig" >/dev/null ||
		fail "node-kubeconfig $NODE"
	cat >"$k/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# containerd 1.6 has no RuntimeConfig RPC: the kubelet's own driver must match it
cgroupDriver: cgroupfs
cgroupRoot: /$CGPARENT
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://$SOCK
address: 0.0.0.0
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: $W/cp/pki/ca.crt
authorization:
  mode: Webhook
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
staticPodPath: ""
serializeImagePulls: false
# imported images must never be collected: nothing could pull them back
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: "1Mi"
  nodefs.available: "1%"
  imagefs.available: "1%"
  nodefs.inodesFree: "1%"
# the ConfigMap volume follows an edit within seconds
syncFrequency: 10s
nodeStatusReportFrequency: 10s
EOF
	setsid "$KBIN/kubelet" --config="$k/config.yaml" --kubeconfig="$k/kubeconfig" \
		--root-dir="$k/root" --cert-dir="$k/pki" --hostname-override="$NODE" --node-ip="$NODE_IP" \
		--pod-infra-container-image="$PAUSE_IMAGE" --v=2 >>"$LOGS/kubelet.log" 2>&1 </dev/null &
	echo $! >"$W/kubelet.pid"
	wait_until 60 "kubelet healthz" curl -sf http://127.0.0.1:10248/healthz
	wait_until 120 "node $NODE Ready" node_ready
	ok "kubelet $("$KBIN/kubelet" --version | awk '{ print $2 }'): node $NODE Ready"
}

node_ready() {
	[ "$("${KUBECTL[@]}" get node "$NODE" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ] &&
		[ -z "$("${KUBECTL[@]}" get node "$NODE" -o jsonpath='{.spec.taints}')" ]
}

# --- checks of our own, around assert.py ------------------------------------------------

# The agent's identity has no permission before the manifests' RBAC is applied:
# whatever works later comes from manifests/ (a missing rule fails the test).
check_no_ambient_rbac() {
	local sa=system:serviceaccount:aiqos-system:aiqos-agent v r ans
	for v in "list pods" "watch pods" "create events" "patch events"; do
		# shellcheck disable=SC2086 # verb and resource
		ans=$("${KUBECTL[@]}" auth can-i $v --all-namespaces --as="$sa" 2>/dev/null || true)
		[ "$ans" = no ] || fail "before install, $sa can already $v ($ans): the test could not catch a missing rule"
	done
	r=$("${KUBECTL[@]}" get clusterrolebindings,rolebindings -A -o json |
		jq -r '.items[] | select(.metadata.labels["kubernetes.io/bootstrapping"] != "rbac-defaults")
			| select(.subjects[]? | (.kind == "ServiceAccount" and .name == "aiqos-agent")
			or (.kind == "Group" and (.name == "system:serviceaccounts" or .name == "system:serviceaccounts:aiqos-system")))
			| .metadata.name')
	[ -z "$r" ] || fail "bindings (besides Kubernetes' defaults) grant the agent's identity something before install: $r"
	ok "no RBAC for system:serviceaccount:aiqos-system:aiqos-agent before install (kubectl auth can-i)"
}

# The kubelet removes a pod's logs with the pod: keep copies for --keep-logs.
collect_pod_logs() {
	mkdir -p "$LOGS/pods"
	while :; do
		cp -rpu /var/log/pods/. "$LOGS/pods/" 2>/dev/null || true
		sleep 2
	done
}

# The DaemonSets the test installs, as kustomize renders them: no privileged
# container, no host PID or IPC namespace, no capability beyond the agent's two.
check_unprivileged() {
	local d bad
	for d in "$TOP/manifests" "$TOP/manifests/uninstall"; do
		bad=$("${KUBECTL[@]}" kustomize "$d" | "${KUBECTL[@]}" create --dry-run=client -o json -f - | jq -r '
			(if .kind == "List" then .items[] else . end) | select(.kind == "DaemonSet")
			| .metadata.name as $ds | .spec.template.spec as $s
			| (if $s.hostPID or $s.hostIPC then "\($ds): host PID/IPC namespace" else empty end),
			  (($s.initContainers // []) + $s.containers | .[]
			   | "\($ds)/\(.name)" as $n | (.securityContext // {}) as $c
			   | (if $c.privileged then "\($n): privileged" else empty end),
			     (if $c.allowPrivilegeEscalation != false then "\($n): allowPrivilegeEscalation" else empty end),
			     ((($c.capabilities.add // []) - ["NET_ADMIN", "SYS_ADMIN"])[] | "\($n): capability \(.)"))') ||
			fail "cannot render $d"
		[ -z "$bad" ] || fail "not unprivileged: $bad"
	done
	ok "DaemonSets not privileged (manifests, uninstall): no host PID/IPC, capabilities at most NET_ADMIN, SYS_ADMIN"
}

run_assertions() {
	local rc
	set +e
	/usr/bin/python3 "$TOP/test/e2e/assert.py" \
		--repo "$TOP" \
		--kubectl "${KUBECTL[*]}" \
		--node "$NODE" \
		--node-exec '' \
		--image "$AIQOS_IMAGE" \
		--pull-policy Never \
		--example-image "$EXAMPLE_IMAGE" \
		--traffic \
		${AIQOS_E2E_HELM:+--helm "$AIQOS_E2E_HELM" --kubeconfig "$W/cp/admin.kubeconfig"} \
		${AIQOS_E2E_HELM:+--kubectl-image "$KUBECTL_IMAGE"} \
		--timeout "${AIQOS_E2E_WAIT:-120}"
	rc=$?
	set -e
	return "$rc"
}

# PID 1 gets only the signals it handles: stop on TERM/INT (the driver's timeout, Ctrl-C).
trap 'exit 143' TERM
trap 'exit 130' INT
mkdir -p "$LOGS"
setup_mounts
setup_network
ok "namespaces: node netns (eth0 $NODE_IP via $GW_IP, $SVC_IP on lo), private /etc /opt /var /run"
setup_cni
start_containerd
start_control_plane
start_kubelet
check_no_ambient_rbac
check_unprivileged
echo "setup: $setup_pass passed, 0 failed"

if [ "$MODE" = hold ]; then
	log "holding the node for debugging: nsenter -a -t <containerd pid> (kill this script's PID 1 to end)"
	while :; do sleep 3600 & wait $!; done
fi
if [ "$MODE" = shell ]; then
	log "interactive shell in the node (exit to tear everything down)"
	log "  export KUBECONFIG=$W/cp/admin.kubeconfig; $KBIN/kubectl get pods -A"
	KUBECONFIG=$W/cp/admin.kubeconfig PATH=$KBIN:$PATH bash -i </dev/tty >/dev/tty 2>&1 || true
	exit 0
fi
collect_pod_logs &
run_assertions
