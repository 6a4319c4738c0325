# test/kernel/lib.sh — helpers of the in-VM shell tests (chain.sh, ecn.sh):
# a tiny harness (run_test prints "ok  NAME"/"FAIL NAME", summary prints
# "N passed, N failed, N skipped" like the unit tests), running CNI plugins
# the way libcni does (env + JSON on stdin, prevResult chaining), and readers
# of the kernel state (tc -j, /proc/sys, /proc/net/netstat) that never ask
# the plugin. Sourced, not run. Everything lives under $AQK_DIR and in
# network namespaces named aqk-*, removed after every test.
# shellcheck shell=sh

AQK_DIR=/tmp/aqk
STATE_DIR=$AQK_DIR/state
PLUGIN=/aiqos/bin/aiqos
CNI_DIR=/usr/lib/cni
export PATH="$PATH:/aiqos/bin"

t_pass=0 t_fail=0 t_skip=0 T_BAD=0 pod_n=0

# --- harness

fail() {
	echo "  FAIL: $*"
	T_BAD=1
}

expect_eq() { # DESCRIPTION GOT WANT
	[ "$2" = "$3" ] || fail "$1: got '$2', want '$3'"
}

expect() { # DESCRIPTION CMD...
	d=$1
	shift
	"$@" || fail "$d"
}

# true when AIQOS_EXPECT_FULL_KERNEL=1: nothing may fall back
expect_full() {
	[ "${AIQOS_EXPECT_FULL_KERNEL:-}" = 1 ]
}

cleanup() {
	for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep '^aqk-'); do
		ip netns del "$ns" 2>/dev/null
	done
	for l in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' | grep -E '^(aqkbr|veth)'); do
		ip link del "$l" 2>/dev/null
	done
	rm -rf "$AQK_DIR"
	mkdir -p "$AQK_DIR"
}

run_test() { # FUNCTION: runs in a subshell, a fail() inside makes it fail
	cleanup
	echo "--- $1"
	(
		T_BAD=0
		"$1"
		exit "$T_BAD"
	)
	rc=$?
	if [ "$rc" -eq 0 ]; then
		echo "ok  $1"
		t_pass=$((t_pass + 1))
	else
		[ -f "$AQK_DIR/aiqos.log" ] && sed 's/^/  log| /' "$AQK_DIR/aiqos.log" | tail -n 40
		echo "FAIL $1"
		t_fail=$((t_fail + 1))
	fi
	cleanup
}

summary() {
	echo "$t_pass passed, $t_fail failed, $t_skip skipped"
	[ "$t_fail" -eq 0 ]
}

# --- CNI

# cni_exec BINARY COMMAND CONTAINERID NETNS  (config JSON on stdin)
cni_exec() {
	CNI_COMMAND=$2 CNI_CONTAINERID=$3 CNI_NETNS=$4 CNI_IFNAME=eth0 CNI_ARGS="IgnoreUnknown=1" \
		CNI_PATH="/aiqos/bin:$CNI_DIR" "$1"
}

# The aiqos entry of the conflist as libcni hands it over: runtimeConfig with
# the pod annotations and bandwidth, prevResult.
# aiqos_conf PREV ANNOTATIONS_JSON BANDWIDTH_JSON
aiqos_conf() {
	# POD_PROFILES (optional): a "profiles" object for the entry, as the
	# agent's chain would write it
	jq -cn --argjson prev "$1" --argjson ann "$2" --argjson bw "$3" --arg st "$STATE_DIR" \
		--argjson prof "${POD_PROFILES:-null}" \
		--arg log "$AQK_DIR/aiqos.log" --arg sock "$AQK_DIR/no-agent.sock" '{
		cniVersion: "1.0.0", name: "aqk", type: "aiqos",
		capabilities: {"io.kubernetes.cri.pod-annotations": true, bandwidth: true},
		runtimeConfig: ({"io.kubernetes.cri.pod-annotations": $ann}
			+ (if $bw == {} then {} else {bandwidth: $bw} end)),
		stateDir: $st, logFile: $log, logLevel: "debug", agentSocket: $sock,
		prevResult: $prev} + (if $prof == null then {} else {profiles: $prof} end)'
}

# pod_add BASE ANNOTATIONS_JSON BANDWIDTH_JSON: a pod netns attached by the
# base plugin (ptp or bridge, host-local IPAM) and then aiqos. Sets POD_NS,
# POD_NETNS, POD_CID, POD_IP, POD_GW, POD_HOST (host-side veth), POD_BRIDGE,
# POD_BASE_CONF, POD_RESULT and POD_CONF (the aiqos config with the chain's
# result, for CHECK and DEL). Returns non-zero (after fail()) when a step fails.
pod_add() {
	pod_n=$((pod_n + 1))
	POD_NS=aqk-p$pod_n
	POD_NETNS=/run/netns/$POD_NS
	POD_CID=aqkcontainer$pod_n
	POD_BRIDGE=
	ip netns add "$POD_NS" && ip -n "$POD_NS" link set lo up || {
		fail "ip netns add $POD_NS"
		return 1
	}
	ipam="{\"type\":\"host-local\",\"dataDir\":\"$AQK_DIR/ipam\",\"ranges\":[[{\"subnet\":\"10.198.$pod_n.0/24\"}]],\"routes\":[{\"dst\":\"0.0.0.0/0\"}]}"
	case $1 in
	ptp) POD_BASE_CONF="{\"cniVersion\":\"1.0.0\",\"name\":\"aqk\",\"type\":\"ptp\",\"ipMasq\":false,\"mtu\":1500,\"ipam\":$ipam}" ;;
	bridge)
		POD_BRIDGE=aqkbr$pod_n
		POD_BASE_CONF="{\"cniVersion\":\"1.0.0\",\"name\":\"aqk\",\"type\":\"bridge\",\"bridge\":\"$POD_BRIDGE\",\"isGateway\":true,\"ipMasq\":false,\"ipam\":$ipam}"
		;;
	*)
		fail "pod_add: unknown base plugin $1"
		return 1
		;;
	esac
	base=$(echo "$POD_BASE_CONF" | cni_exec "$CNI_DIR/$1" ADD "$POD_CID" "$POD_NETNS") || {
		fail "$1 ADD: $base"
		return 1
	}
	POD_CONF=$(aiqos_conf "$base" "$2" "$3")
	POD_RESULT=$(echo "$POD_CONF" | cni_exec "$PLUGIN" ADD "$POD_CID" "$POD_NETNS") || {
		fail "aiqos ADD failed: $POD_RESULT"
		return 1
	}
	expect_eq "aiqos ADD passes prevResult through" "$(echo "$POD_RESULT" | jq -cS .)" "$(echo "$base" | jq -cS .)"
	POD_CONF=$(aiqos_conf "$POD_RESULT" "$2" "$3")
	POD_IP=$(echo "$POD_RESULT" | jq -r '.ips[0].address' | cut -d/ -f1)
	POD_GW=$(echo "$POD_RESULT" | jq -r '.ips[0].gateway')
	POD_HOST=$(echo "$POD_RESULT" | jq -r '[.interfaces[] | select(.sandbox == null and (.name | startswith("veth")))][0].name')
	echo "  pod $POD_NS: ip $POD_IP gw $POD_GW host veth $POD_HOST${POD_BRIDGE:+ bridge $POD_BRIDGE}"
	return 0
}

pod_check() { # CHECK must pass
	out=$(echo "$POD_CONF" | cni_exec "$PLUGIN" CHECK "$POD_CID" "$POD_NETNS") || fail "aiqos CHECK failed: $out"
}

pod_del_aiqos() { # aiqos DEL (the chain's DEL runs it first); the veth stays
	out=$(echo "$POD_CONF" | cni_exec "$PLUGIN" DEL "$POD_CID" "$POD_NETNS") || fail "aiqos DEL failed: $out"
	[ -e "$STATE_DIR/$POD_CID@eth0.json" ] && fail "aiqos DEL left its state file"
}

pod_del_base() { # then the base plugin's DEL (removes the veth)
	echo "$POD_BASE_CONF" | cni_exec "$CNI_DIR/$(echo "$POD_BASE_CONF" | jq -r .type)" DEL "$POD_CID" "$POD_NETNS" >/dev/null ||
		fail "base plugin DEL failed"
}

pod_del() {
	pod_del_aiqos
	pod_del_base
}

# --- state file

state_file() { echo "$STATE_DIR/$POD_CID@eth0.json"; }

# Every item the kernel should have taken is "applied", nothing is degraded,
# no failure: on the full kernel, anything else is a fallback.
state_expect_all_applied() {
	f=$(state_file)
	[ -f "$f" ] || {
		fail "no state file $f"
		return
	}
	bad=$(jq -r '.choices[] | select(.status != "applied") | "\(.id)=\(.status) err \(.err) \(.errText // "")"' "$f")
	[ -z "$bad" ] || fail "items not applied as desired: $bad"
	expect_eq "state: degraded list" "$(jq -c '.degraded' "$f")" "[]"
	expect_eq "state: failure" "$(jq -r '.failure' "$f")" ""
}

state_kind() { # ITEM_ID -> the effective kind recorded
	jq -r --arg id "$1" '.choices[] | select(.id == $id) | .kind // .value' "$(state_file)"
}

# --- kernel readers

sysctl_in() { # NETNS KEY(dotted)
	ip netns exec "$1" cat "/proc/sys/$(echo "$2" | tr . /)" | tr -s '\t ' ' '
}

# tc -j of a qdisc by handle ("1:", "10:") in a netns ("" = here)
qdisc_json() { # NETNS DEV HANDLE
	if [ -n "$1" ]; then
		ip netns exec "$1" tc -s -j qdisc show dev "$2"
	else
		tc -s -j qdisc show dev "$2"
	fi | jq -c --arg h "$3" '[.[] | select(.handle == $h)][0] // {}'
}

root_kind() { # NETNS DEV
	if [ -n "$1" ]; then
		ip netns exec "$1" tc -j qdisc show dev "$2"
	else
		tc -j qdisc show dev "$2"
	fi | jq -r '[.[] | select(.root == true)][0].kind // "none"'
}

class_line() { # NETNS DEV CLASSID: the `tc class show` line (iproute2 6.1 prints htb as text)
	if [ -n "$1" ]; then
		ip netns exec "$1" tc class show dev "$2"
	else
		tc class show dev "$2"
	fi | grep "^class htb $3 "
}

# A counter of /proc/net/netstat (SECTION FIELD), in netns NETNS ("" = here).
netstat_get() { # NETNS SECTION FIELD
	if [ -n "$1" ]; then
		ip netns exec "$1" cat /proc/net/netstat
	else
		cat /proc/net/netstat
	fi | awk -v sec="$2:" -v key="$3" '
		$1 == sec && !seen { for (i = 2; i <= NF; i++) idx[$i] = i; seen = 1; next }
		$1 == sec && seen { print (key in idx) ? $(idx[key]) : "missing"; exit }'
}

# value of KEY in a key=value file
kv() { sed -n "s/^$2=//p" "$1" | head -n 1; }
