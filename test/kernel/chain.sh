#!/bin/sh
# test/kernel/chain.sh — the plugin chained after the reference ptp/bridge +
# host-local plugins, on a kernel with every tc kind, pedit/csum and DCTCP
# (the VM of hack/test-kernel.sh). Each profile's full path must apply: the
# state records every item as applied (nothing degraded), CHECK passes, and
# the kernel read back with tc -j and /proc/sys has exactly the qdiscs,
# parameters, DSCP rewrite and sysctls of the profile. Ends with
# "N passed, N failed, N skipped".
# shellcheck shell=sh
# shellcheck source=test/kernel/lib.sh
. "$(dirname "$0")/lib.sh"

INFERENCE='{"ai.workload":"inference"}'
TRAINING='{"ai.workload":"training"}'
DCTCP='{"ai.workload":"training","ai.workload/profile":"training-dctcp"}'
STRICT='{"ai.workload":"inference","ai.workload/profile":"inference-strict"}'

# the egress DSCP filters on the pod's eth0: pedit (+ csum for IPv4)
expect_dscp_filters() { # DS_BYTE_HEX (e.g. b8)
	f=$(ip netns exec "$POD_NS" tc -j filter show dev eth0 egress)
	v4=$(echo "$f" | jq -c '[.[] | select(.protocol == "ip" and .options.actions != null)][0].options.actions
		| map(.kind + ":" + (if .kind == "pedit" then .keys[0].val + "/" + .keys[0].mask else .csum // "" end))')
	expect_eq "IPv4 DSCP actions" "$v4" "[\"pedit:${1}0000/ff03ffff\",\"csum:iph\"]"
	v6=$(echo "$f" | jq -c '[.[] | select(.protocol == "ipv6" and .options.actions != null)][0].options.actions
		| map(.kind + ":" + (if .kind == "pedit" then .keys[0].val + "/" + .keys[0].mask else "" end))')
	expect_eq "IPv6 DSCP actions" "$v6" "[\"pedit:${1}00000/f03fffff\"]"
}

# Packets leaving the pod carry the DS byte: a counting filter on the host
# veth's ingress sees them, and the host answers (valid IPv4 checksum).
expect_dscp_on_wire() { # DS_BYTE_HEX
	tc qdisc add dev "$POD_HOST" clsact &&
		tc filter add dev "$POD_HOST" ingress prio 1 protocol ip u32 match ip tos "0x$1" 0xfc action pass || {
		fail "cannot add the counting filter on $POD_HOST"
		return
	}
	ip netns exec "$POD_NS" ping -c 3 -W 2 "$POD_GW" >/dev/null || fail "ping from the pod to $POD_GW failed (checksum after pedit?)"
	hits=$(tc -s -j filter show dev "$POD_HOST" ingress | jq '[.[] | .options.actions // [] | .[] | .stats.packets] | add // 0')
	[ "${hits:-0}" -ge 3 ] || fail "host saw $hits packets with DS byte 0x$1 from the pod, want >= 3"
	echo "  host veth ingress: $hits packets with DS byte 0x$1"
	tc qdisc del dev "$POD_HOST" clsact
}

expect_drift_detected() { # CHECK fails with 101 once someone changes the qdisc
	out=$(echo "$POD_CONF" | cni_exec "$PLUGIN" CHECK "$POD_CID" "$POD_NETNS")
	rc=$?
	[ "$rc" -ne 0 ] || fail "CHECK passed after a change behind aiqos's back"
	expect_eq "CHECK error code on drift" "$(echo "$out" | jq -r .code)" 101
	echo "  CHECK on drift: $(echo "$out" | jq -r .details | head -n 3)"
}

test_inference_unshaped() {
	pod_add ptp "$INFERENCE" '{}' || return
	state_expect_all_applied
	expect_eq "egress.root effective kind" "$(state_kind egress.root)" fq_codel
	expect_eq "tcp_ecn" "$(sysctl_in "$POD_NS" net.ipv4.tcp_ecn)" 1
	expect_eq "congestion control" "$(sysctl_in "$POD_NS" net.ipv4.tcp_congestion_control)" bbr
	expect_eq "tcp_notsent_lowat" "$(sysctl_in "$POD_NS" net.ipv4.tcp_notsent_lowat)" 16384
	q=$(qdisc_json "$POD_NS" eth0 1:)
	expect_eq "root qdisc" "$(echo "$q" | jq -r '.kind + " root=" + (.root | tostring)')" "fq_codel root=true"
	# the kernel keeps codel times in 1024 ns units: 1 ms reads back as 999 us
	expect_eq "fq_codel limit/ecn" "$(echo "$q" | jq -c '[.options.limit, .options.ecn]')" "[1024,true]"
	expect "fq_codel target ~1ms (have $(echo "$q" | jq .options.target))" \
		test "$(echo "$q" | jq '.options.target >= 990 and .options.target <= 1000')" = true
	expect "fq_codel interval ~10ms (have $(echo "$q" | jq .options.interval))" \
		test "$(echo "$q" | jq '.options.interval >= 9900 and .options.interval <= 10000')" = true
	expect_dscp_filters b8
	pod_check
	expect_dscp_on_wire b8
	# drift: another target behind aiqos's back is reported by CHECK
	ip netns exec "$POD_NS" tc qdisc change dev eth0 root handle 1: fq_codel target 5ms || fail "tc qdisc change"
	expect_drift_detected
	pod_del_aiqos
	expect_eq "pod root qdisc after DEL" "$(root_kind "$POD_NS" eth0)" noqueue
	expect_eq "pod egress filters after DEL" "$(ip netns exec "$POD_NS" tc filter show dev eth0 egress)" ""
	pod_del_base
}

test_training_unshaped() {
	pod_add ptp "$TRAINING" '{}' || return
	state_expect_all_applied
	expect_eq "egress.root effective kind" "$(state_kind egress.root)" fq
	expect_eq "congestion control" "$(sysctl_in "$POD_NS" net.ipv4.tcp_congestion_control)" bbr
	# the buffers stay the kernel's (the training profile raises none)
	expect_eq "tcp_rmem" "$(sysctl_in "$POD_NS" net.ipv4.tcp_rmem)" "$(tr -s '\t ' ' ' </proc/sys/net/ipv4/tcp_rmem)"
	expect_eq "tcp_wmem" "$(sysctl_in "$POD_NS" net.ipv4.tcp_wmem)" "$(tr -s '\t ' ' ' </proc/sys/net/ipv4/tcp_wmem)"
	q=$(qdisc_json "$POD_NS" eth0 1:)
	expect_eq "root fq" "$(echo "$q" | jq -c '[.kind, .root, .options.limit, .options.ce_threshold]')" \
		'["fq",true,10000,null]'
	expect_dscp_filters 28
	pod_check
	pod_del_aiqos
	expect_eq "pod root qdisc after DEL" "$(root_kind "$POD_NS" eth0)" noqueue
	pod_del_base
}

# training-dctcp with both limits: HTB shapers with fq leaves that mark CE
# above 1 ms, DCTCP chosen in its netns, and the host-global
# tcp_allowed_congestion_control left as it was (aiqos allows dctcp only for
# the moment of the pod's write).
test_training_dctcp_shaped() {
	allowed_before=$(cat /proc/sys/net/ipv4/tcp_allowed_congestion_control)
	pod_add ptp "$DCTCP" '{"egressRate":20000000,"ingressRate":10000000}' || return
	state_expect_all_applied
	expect_eq "congestion control" "$(sysctl_in "$POD_NS" net.ipv4.tcp_congestion_control)" dctcp
	expect_eq "host's allowed congestion controls" "$(cat /proc/sys/net/ipv4/tcp_allowed_congestion_control)" \
		"$allowed_before"
	expect_eq "tcp_ecn" "$(sysctl_in "$POD_NS" net.ipv4.tcp_ecn)" 1
	for side in "$POD_NS eth0 20Mbit" "- $POD_HOST 10Mbit"; do
		# shellcheck disable=SC2086
		set -- $side
		ns=$1
		[ "$ns" = - ] && ns=
		expect_eq "root on $2" "$(qdisc_json "$ns" "$2" 1: | jq -c '[.kind, .root, .options.default]')" \
			'["htb",true,"0x10"]'
		cl=$(class_line "$ns" "$2" 1:10)
		case $cl in
		*"leaf 10:"*"rate $3 ceil $3 "*) ;;
		*) fail "class 1:10 on $2: '$cl', want leaf 10: rate $3 ceil $3" ;;
		esac
		expect_eq "fq leaf on $2" "$(qdisc_json "$ns" "$2" 10: | jq -c '[.kind, .parent, .options.limit, .options.ce_threshold]')" \
			'["fq","1:10",10000,1000]'
	done
	expect_dscp_filters 28
	pod_check
	expect_dscp_on_wire 28
	pod_del_aiqos
	expect_eq "host veth root after DEL" "$(root_kind "" "$POD_HOST")" noqueue
	expect_eq "pod root qdisc after DEL" "$(root_kind "$POD_NS" eth0)" noqueue
	pod_del_base
}

# inference-strict on a bridge: ingress shaped on the pod's veth (not the
# bridge), egress root fq_codel with the strict target and limit.
test_inference_strict_bridge() {
	pod_add bridge "$STRICT" '{"ingressRate":10000000}' || return
	state_expect_all_applied
	expect_eq "tcp_notsent_lowat" "$(sysctl_in "$POD_NS" net.ipv4.tcp_notsent_lowat)" 8192
	q=$(qdisc_json "$POD_NS" eth0 1:)
	expect_eq "root fq_codel limit/ecn" "$(echo "$q" | jq -c '[.kind, .options.limit, .options.ecn]')" '["fq_codel",256,true]'
	expect "fq_codel target ~500us (have $(echo "$q" | jq .options.target))" \
		test "$(echo "$q" | jq '.options.target >= 490 and .options.target <= 500')" = true
	expect_eq "bridge untouched" "$(root_kind "" "$POD_BRIDGE")" noqueue
	expect_eq "host veth root" "$(root_kind "" "$POD_HOST")" htb
	l=$(qdisc_json "" "$POD_HOST" 10:)
	expect_eq "host veth leaf" "$(echo "$l" | jq -c '[.kind, .parent, .options.limit, .options.ecn]')" \
		'["fq_codel","1:10",256,true]'
	pod_check
	pod_del_aiqos
	expect_eq "host veth root after DEL" "$(root_kind "" "$POD_HOST")" noqueue
	expect_eq "bridge still untouched" "$(root_kind "" "$POD_BRIDGE")" noqueue
	pod_del_base
}

# A pod without a class but with a limit: shaped, with an ECN fq_codel leaf
# (no longer a byte FIFO), sysctls left alone.
test_default_shaped() {
	before=$(sysctl_in "$(ip netns add aqk-ref && echo aqk-ref)" net.ipv4.tcp_ecn)
	pod_add ptp '{"app":"web"}' '{"egressRate":10000000}' || return
	state_expect_all_applied
	expect_eq "class" "$(jq -r .class "$(state_file)")" default
	expect_eq "tcp_ecn untouched" "$(sysctl_in "$POD_NS" net.ipv4.tcp_ecn)" "$before"
	expect_eq "leaf" "$(qdisc_json "$POD_NS" eth0 10: | jq -c '[.kind, .parent, .options.ecn]')" '["fq_codel","1:10",true]'
	expect_eq "no DSCP filters" "$(ip netns exec "$POD_NS" tc filter show dev eth0 egress)" ""
	pod_check
	pod_del
}

# classify "dscp": the agent hands the plugin a default
# profile that marks 0. A pod without a class that sets IP_TOS 0xb8 (EF)
# itself leaves the pod with DS byte 0: only aiqos's marks count.
test_default_remarked_to_zero() {
	# shellcheck disable=SC2034 # read by aiqos_conf (lib.sh)
	POD_PROFILES='{"default":{"dscp":0}}'
	pod_add ptp '{"app":"web"}' '{}' || {
		unset POD_PROFILES
		return
	}
	unset POD_PROFILES
	state_expect_all_applied
	expect_eq "class" "$(jq -r .class "$(state_file)")" default
	# the rewrite to DSCP 0 (tc prints a zero value as "0")
	f=$(ip netns exec "$POD_NS" tc -j filter show dev eth0 egress)
	expect_eq "IPv4 DSCP actions" "$(echo "$f" | jq -c '[.[] | select(.protocol == "ip" and .options.actions != null)][0].options.actions
		| map(.kind + ":" + (if .kind == "pedit" then .keys[0].val + "/" + .keys[0].mask else .csum // "" end))')" \
		'["pedit:0/ff03ffff","csum:iph"]'
	expect_eq "IPv6 DSCP actions" "$(echo "$f" | jq -c '[.[] | select(.protocol == "ipv6" and .options.actions != null)][0].options.actions
		| map(.kind + ":" + (if .kind == "pedit" then .keys[0].val + "/" + .keys[0].mask else "" end))')" \
		'["pedit:0/f03fffff"]'
	tc qdisc add dev "$POD_HOST" clsact &&
		tc filter add dev "$POD_HOST" ingress prio 1 protocol ip u32 match ip tos 0xb8 0xfc action pass &&
		tc filter add dev "$POD_HOST" ingress prio 2 protocol ip u32 match ip tos 0x00 0xfc match ip protocol 17 0xff \
			action pass || {
		fail "cannot add the counting filters on $POD_HOST"
		return
	}
	ip netns exec "$POD_NS" tos_send "$POD_GW" 0xb8 50 || fail "tos_send from the pod"
	ef=$(tc -s -j filter show dev "$POD_HOST" ingress | jq '[.[] | select(.pref == 1) | .options.actions // [] | .[] | .stats.packets] | add // 0')
	zero=$(tc -s -j filter show dev "$POD_HOST" ingress | jq '[.[] | select(.pref == 2) | .options.actions // [] | .[] | .stats.packets] | add // 0')
	echo "  host veth ingress: $ef packets with DS byte 0xb8, $zero UDP packets with DS byte 0"
	expect_eq "EF-marked packets arriving from a default pod" "${ef:-x}" 0
	[ "${zero:-0}" -ge 50 ] || fail "host saw $zero re-marked UDP packets from the pod, want >= 50"
	tc qdisc del dev "$POD_HOST" clsact
	pod_check
	pod_del
}

# ADD killed after it applied everything but before it recorded it (a test
# failpoint): from the intent record DEL removes every object anyway.
test_killed_after_apply() {
	pod_add ptp "$DCTCP" '{"egressRate":20000000,"ingressRate":10000000}' || return
	export AIQOS_TEST_FAILPOINTS=add-after-apply=kill
	echo "$POD_CONF" | cni_exec "$PLUGIN" ADD "$POD_CID" "$POD_NETNS" >/dev/null
	rc=$?
	unset AIQOS_TEST_FAILPOINTS
	expect_eq "ADD killed at the failpoint (128 + SIGKILL)" "$rc" 137
	expect_eq "intent record left pending" "$(jq -r .pending "$(state_file)")" true
	expect_eq "pod root before DEL" "$(root_kind "$POD_NS" eth0)" htb
	pod_del_aiqos
	expect_eq "host veth root after DEL" "$(root_kind "" "$POD_HOST")" noqueue
	expect_eq "pod root qdisc after DEL" "$(root_kind "$POD_NS" eth0)" noqueue
	expect_eq "pod egress filters after DEL" "$(ip netns exec "$POD_NS" tc filter show dev eth0 egress)" ""
	pod_del_base
}

run_test test_inference_unshaped
run_test test_training_unshaped
run_test test_training_dctcp_shaped
run_test test_inference_strict_bridge
run_test test_default_shaped
run_test test_default_remarked_to_zero
run_test test_killed_after_apply
summary
