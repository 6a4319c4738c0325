#!/bin/sh
# test/kernel/ecn.sh — functional ECN through the AQM leaves aiqos installs,
# in the full-kernel VM: a pod (ptp + aiqos) with an egress limit sends one
# bulk TCP flow (ecn_flow) to a receiver (another pod or the VM's root
# netns). Between two training-dctcp pods the sender's fq leaf marks CE above
# its 1 ms ce_threshold, and the DCTCP sender must see the marks echoed and
# cut ssthresh and cwnd while the path drops nothing (an ECN reaction, not a
# loss one); against a non-DCTCP peer DCTCP negotiates no ECN at all. For
# inference the fq_codel leaf (ECN, low target) must mark CE instead of
# dropping. The receiver's IpExt InCEPkts must grow. Functional only: under
# TCG emulation rates and timing mean nothing. Ends with
# "N passed, N failed, N skipped".
# shellcheck shell=sh
# shellcheck source=test/kernel/lib.sh
. "$(dirname "$0")/lib.sh"

PORT=5201
SECONDS_SEND=${AQK_ECN_SECONDS:-4}
SSTHRESH_INFINITE=2147483647
DCTCP='{"ai.workload":"training","ai.workload/profile":"training-dctcp"}'

# bulk_flow RECV_NS DEST SEND_NS: the receiver in RECV_NS ("" = the VM's
# root netns), the sender in SEND_NS connecting to DEST. Leaves
# $AQK_DIR/send.out and CE_DELTA (CE-marked packets received in RECV_NS).
bulk_flow() {
	ce0=$(netstat_get "$1" IpExt InCEPkts)
	if [ -n "$1" ]; then
		ip netns exec "$1" ecn_flow recv "$PORT" >"$AQK_DIR/recv.out" 2>&1 &
	else
		ecn_flow recv "$PORT" >"$AQK_DIR/recv.out" 2>&1 &
	fi
	rpid=$!
	ip netns exec "$3" ecn_flow send "$2" "$PORT" "$SECONDS_SEND" >"$AQK_DIR/send.out" 2>&1 ||
		fail "sender failed: $(cat "$AQK_DIR/send.out")"
	wait "$rpid" || fail "receiver failed: $(cat "$AQK_DIR/recv.out")"
	ce1=$(netstat_get "$1" IpExt InCEPkts)
	CE_DELTA=$((ce1 - ce0))
	echo "  sender: $(tr '\n' ' ' <"$AQK_DIR/send.out")"
	echo "  receiver: $(tr '\n' ' ' <"$AQK_DIR/recv.out") InCEPkts +$CE_DELTA"
	[ "$(kv "$AQK_DIR/recv.out" recv_bytes)" = "$(kv "$AQK_DIR/send.out" sent_bytes)" ] ||
		fail "receiver got $(kv "$AQK_DIR/recv.out" recv_bytes) bytes, sender sent $(kv "$AQK_DIR/send.out" sent_bytes)"
}

# Two training-dctcp pods on one node (ptp, routed by the host): the sender's
# egress is limited, so its fq leaf queues and marks CE above 1 ms; the
# receiver runs DCTCP too (its netns default), so ECN is negotiated.
test_dctcp_reacts_to_fq_ce_threshold() {
	pod_add ptp "$DCTCP" '{}' || return
	rx_ns=$POD_NS rx_ip=$POD_IP
	expect_eq "receiver pod congestion control" "$(sysctl_in "$rx_ns" net.ipv4.tcp_congestion_control)" dctcp
	pod_add ptp "$DCTCP" '{"egressRate":20000000}' || return
	expect_eq "fq leaf ce_threshold" "$(qdisc_json "$POD_NS" eth0 10: | jq -c '[.kind, .options.ce_threshold]')" '["fq",1000]'
	bulk_flow "$rx_ns" "$rx_ip" "$POD_NS"
	s=$AQK_DIR/send.out
	expect_eq "sender congestion control" "$(kv "$s" cc)" dctcp
	expect_eq "ECN negotiated" "$(kv "$s" ecn_negotiated)" 1
	expect_eq "DCTCP enabled on the socket" "$(kv "$s" dctcp_enabled)" 1
	[ "$(kv "$s" delivered_ce)" -gt 0 ] || fail "no CE deliveries echoed to the sender (delivered_ce 0)"
	[ "$(kv "$s" ssthresh_min)" -lt "$SSTHRESH_INFINITE" ] || fail "ssthresh never reduced: no congestion reaction"
	[ "$(kv "$s" cwnd_min_after_max)" -lt "$(kv "$s" cwnd_max)" ] || fail "cwnd never came down from its maximum"
	[ "$CE_DELTA" -gt 0 ] || fail "receiver saw no CE-marked packets"
	marks=$(qdisc_json "$POD_NS" eth0 10: | jq '.ce_mark // 0')
	drops=$(qdisc_json "$POD_NS" eth0 10: | jq '.drops // 0')
	echo "  fq leaf: ce_mark $marks, drops $drops; sender retransmissions $(kv "$s" total_retrans)"
	[ "${marks:-0}" -gt 0 ] || fail "fq leaf marked nothing (ce_mark 0)"
	# The path lost nothing, so the reduction is DCTCP's answer to the marks.
	# (Retransmissions are not asserted: under TCG a stalled vCPU fires
	# spurious RTOs and tail-loss probes; they are printed above.)
	expect_eq "fq leaf drops (the path must not lose packets)" "$drops" 0
}

# RFC 8257 / Documentation/networking/dctcp.rst: both ends must run DCTCP.
# A DCTCP SYN carries ECT, which a non-DCTCP listener takes as a broken path:
# no ECN, and the sender runs as "dctcp-reno". What the README states.
test_dctcp_needs_a_dctcp_peer() {
	pod_add ptp "$DCTCP" '{"egressRate":20000000}' || return
	bulk_flow "" "$POD_GW" "$POD_NS" # the VM's root netns: cubic
	s=$AQK_DIR/send.out
	expect_eq "sender congestion control against a cubic peer" "$(kv "$s" cc)" dctcp-reno
	expect_eq "ECN negotiated against a cubic peer" "$(kv "$s" ecn_negotiated)" 0
}

# The inference leaf: fq_codel with a low target and ECN marks the pod's
# (bbr, ECN-requesting) bulk flow instead of dropping it.
test_fq_codel_marks_instead_of_dropping() {
	pod_add ptp '{"ai.workload":"inference"}' '{"egressRate":20000000}' || return
	expect_eq "fq_codel leaf with ECN" "$(qdisc_json "$POD_NS" eth0 10: | jq -c '[.kind, .options.ecn]')" '["fq_codel",true]'
	bulk_flow "" "$POD_GW" "$POD_NS"
	s=$AQK_DIR/send.out
	expect_eq "sender congestion control" "$(kv "$s" cc)" bbr
	expect_eq "ECN negotiated (tcp_ecn=1 in the pod)" "$(kv "$s" ecn_negotiated)" 1
	[ "$(kv "$s" delivered_ce)" -gt 0 ] || fail "no CE deliveries echoed to the sender (delivered_ce 0)"
	[ "$CE_DELTA" -gt 0 ] || fail "receiver saw no CE-marked packets"
	marks=$(qdisc_json "$POD_NS" eth0 10: | jq '.ecn_mark // 0')
	drops=$(qdisc_json "$POD_NS" eth0 10: | jq '.drops // 0')
	echo "  fq_codel leaf: ecn_mark $marks, drops $drops"
	[ "${marks:-0}" -gt 0 ] || fail "fq_codel leaf marked nothing (ecn_mark 0)"
	expect_eq "fq_codel leaf drops (ECT packets are marked, not dropped)" "$drops" 0
}

run_test test_dctcp_reacts_to_fq_ce_threshold
run_test test_dctcp_needs_a_dctcp_peer
run_test test_fq_codel_marks_instead_of_dropping
summary
