#!/bin/sh
# test/kernel/overlay.sh — pods behind an overlay, classified at the uplink
# by the inner header, on Debian's kernel (the CI kernel has only vxlan):
# for IPIP (Calico's tunl0), Geneve (UDP 6081, an Ethernet frame inside,
# as OVN/Antrea/Cilium) and VXLAN (Flannel's 8472, Calico's 4789), a node netns whose pods
# (10.75.0.10 inference, 10.75.0.20 training) reach a remote pod CIDR
# through the tunnel over the uplink up0. aiqos's classifiers
# (overlay_cls: the agent's loaders, the HTB plan's class ids) on up0's
# egress and, for the download, on its ingress ahead of a redirect to an
# ifb: each pod's packets must land in its class of up0's HTB (upload) and
# of the ifb's (download), counted by the classes' packet counters; the
# packets crossed the uplink encapsulated (the peer's tunnel counters).
# AQK_OVERLAY_KINDS picks kinds (default "ipip geneve", what this machine's
# kernel lacks; "vxlan vxlan4789" run here too, and in test_agent_overlay.py
# with the agent).
# Ends with "N passed, N failed, N skipped".
# shellcheck shell=sh
# shellcheck source=test/kernel/lib.sh
. "$(dirname "$0")/lib.sh"

NODE=aqk-ovnode PEER=aqk-ovpeer
INF_IP=10.75.0.10 TRAIN_IP=10.75.0.20 REMOTE=10.76.0.5
N=60

in_node() { ip netns exec "$NODE" "$@"; }
in_peer() { ip netns exec "$PEER" "$@"; }

# class_pkts NETNS DEV CLASSID: packets sent by an HTB class (iproute2 6.1
# prints htb classes as text only)
class_pkts() {
	ip netns exec "$1" tc -s class show dev "$2" |
		awk -v c="$3" '$1 == "class" { this = ($3 == c) } this && $1 == "Sent" { print $4; exit }'
}

htb_tree() { # NETNS DEV
	ip netns exec "$1" tc qdisc add dev "$2" root handle 1: htb default 20
	ip netns exec "$1" tc class add dev "$2" parent 1: classid 1:1 htb rate 1gbit quantum 1514
	for c in 10 20 30; do
		ip netns exec "$1" tc class add dev "$2" parent 1:1 classid "1:$c" htb rate 100mbit ceil 1gbit quantum 1514
	done
}

# a pod: its own netns, a /32 behind a veth, routed by the node (ptp-like)
pod() { # NAME IP
	ip netns add "aqk-ov$1"
	ip link add "v$1" netns "$NODE" type veth peer name eth0 netns "aqk-ov$1"
	ip -n "aqk-ov$1" link set lo up
	ip -n "aqk-ov$1" link set eth0 mtu 1400 up
	ip -n "aqk-ov$1" addr add "$2/32" dev eth0
	ip -n "aqk-ov$1" route add 169.254.1.1 dev eth0
	ip -n "aqk-ov$1" route add default via 169.254.1.1 dev eth0
	ip -n "$NODE" link set "v$1" up
	ip -n "$NODE" route add "$2/32" dev "v$1"
	# the gateway: the node's side of the veth, a permanent neighbour (Calico answers by proxy ARP)
	mac=$(ip -n "$NODE" -j link show "v$1" | jq -r '.[0].address')
	ip -n "aqk-ov$1" neigh add 169.254.1.1 lladdr "$mac" dev eth0 nud permanent
}

# the overlay of KIND between the node (192.168.50.1) and the peer (.2);
# sets TUN_PEER, the peer's tunnel device
overlay() { # KIND
	case $1 in
	ipip) # Calico: the fallback tunl0 of each netns, routes via the other node onlink
		for ns in "$NODE" "$PEER"; do ip -n "$ns" link set tunl0 up; done
		ip -n "$NODE" route add 10.76.0.0/24 via 192.168.50.2 dev tunl0 onlink
		ip -n "$PEER" route add 10.75.0.0/24 via 192.168.50.1 dev tunl0 onlink
		TUN_PEER=tunl0
		;;
	geneve | vxlan | vxlan4789) # an L2 tunnel as Flannel builds it: a /32 on it, a permanent neighbour
		if [ "$1" = geneve ]; then
			ip -n "$NODE" link add tun0 address 0e:00:00:00:00:01 type geneve id 42 remote 192.168.50.2
			ip -n "$PEER" link add tun0 address 0e:00:00:00:01:01 type geneve id 42 remote 192.168.50.1
		else
			[ "$1" = vxlan ] && port=8472 || port=4789 # Flannel's, Calico's (vxlan.calico)
			ip -n "$NODE" link add tun0 address 0e:00:00:00:00:01 type vxlan id 42 dev up0 dstport "$port" \
				remote 192.168.50.2
			ip -n "$PEER" link add tun0 address 0e:00:00:00:01:01 type vxlan id 42 dev up0p dstport "$port" \
				remote 192.168.50.1
		fi
		ip -n "$NODE" link set tun0 mtu 1450 up
		ip -n "$PEER" link set tun0 mtu 1450 up
		ip -n "$NODE" addr add 10.98.0.0/32 dev tun0
		ip -n "$PEER" addr add 10.98.1.0/32 dev tun0
		ip -n "$NODE" neigh add 10.98.1.0 lladdr 0e:00:00:00:01:01 dev tun0 nud permanent
		ip -n "$PEER" neigh add 10.98.0.0 lladdr 0e:00:00:00:00:01 dev tun0 nud permanent
		ip -n "$NODE" route add 10.76.0.0/24 via 10.98.1.0 dev tun0 onlink
		ip -n "$PEER" route add 10.75.0.0/24 via 10.98.0.0 dev tun0 onlink
		TUN_PEER=tun0
		;;
	esac
}

setup() { # KIND
	ip netns add "$NODE"
	ip netns add "$PEER"
	ip -n "$NODE" link set lo up
	ip -n "$PEER" link set lo up
	ip link add up0 netns "$NODE" type veth peer name up0p netns "$PEER"
	ip -n "$NODE" addr add 192.168.50.1/24 dev up0
	ip -n "$PEER" addr add 192.168.50.2/24 dev up0p
	ip -n "$NODE" link set up0 up
	ip -n "$PEER" link set up0p up
	ip -n "$PEER" addr add "$REMOTE/32" dev lo
	in_node sysctl -q -w net.ipv4.ip_forward=1
	in_node sysctl -q -w net.ipv4.conf.all.rp_filter=0
	in_peer sysctl -q -w net.ipv4.conf.all.rp_filter=0
	pod inf "$INF_IP"
	pod train "$TRAIN_IP"
	overlay "$1"
	# aiqos's classifiers (pinned once, below) on up0, the HTB trees whose classes they name
	htb_tree "$NODE" up0
	in_node tc qdisc add dev up0 clsact
	in_node tc filter add dev up0 egress pref 1 bpf da object-pinned "$PIN/cls" ||
		fail "attach the upload classifier"
	in_node ip link add ifb0 type ifb
	in_node ip link set ifb0 up
	htb_tree "$NODE" ifb0
	in_node tc filter add dev up0 ingress pref 1 bpf da object-pinned "$PIN/dcls" ||
		fail "attach the download classifier"
	in_node tc filter add dev up0 ingress pref 2 protocol all u32 match u32 0 0 action mirred egress redirect dev ifb0 ||
		fail "redirect to the ifb"
}

teardown() {
	for ns in "$NODE" "$PEER" aqk-ovinf aqk-ovtrain; do ip netns del "$ns" 2>/dev/null; done
}

# N datagrams from a pod to the remote pod CIDR: all in its class of up0
upload() { # POD CLASSID
	b=$(class_pkts "$NODE" up0 "$2")
	ip netns exec "aqk-ov$1" tos_send "$REMOTE" 0 "$N" || fail "$1: send"
	a=$(class_pkts "$NODE" up0 "$2")
	echo "  upload $1: up0 class $2 +$((a - b))"
	[ $((a - b)) -ge "$N" ] || fail "upload: $N of the $1 pod's packets in $2 of up0, counted $((a - b))"
}

# N datagrams from the peer to a pod: all in its class of the ifb
download() { # POD CLASSID POD_IP
	b=$(class_pkts "$NODE" ifb0 "$2")
	in_peer tos_send "$3" 0 "$N" || fail "peer: send to $3"
	sleep 0.2
	a=$(class_pkts "$NODE" ifb0 "$2")
	echo "  download $1: ifb0 class $2 +$((a - b))"
	[ $((a - b)) -ge "$N" ] || fail "download: $N packets to the $1 pod in $2 of the ifb, counted $((a - b))"
}

both_directions() { # KIND
	setup "$1"
	rx0=$(in_peer cat "/sys/class/net/$TUN_PEER/statistics/rx_packets")
	upload inf 1:10
	upload train 1:30
	rx1=$(in_peer cat "/sys/class/net/$TUN_PEER/statistics/rx_packets")
	[ $((rx1 - rx0)) -ge $((2 * N)) ] || fail "the peer's $TUN_PEER received $((rx1 - rx0)) packets: not encapsulated"
	download inf 1:10 "$INF_IP"
	download train 1:30 "$TRAIN_IP"
	echo "  default class (1:20): up0 $(class_pkts "$NODE" up0 1:20), ifb0 $(class_pkts "$NODE" ifb0 1:20) packets"
	teardown
}

# the classifiers, loaded once (the verifier is slow under TCG), pinned in
# a bpffs of their own (`ip netns exec` mounts a fresh /sys, without
# /sys/fs/bpf); the maps hold the two pods' classes for every kind
PIN=/run/aqk-ovbpf
mkdir -p "$PIN"
if ! mount -t bpf bpf "$PIN" || ! overlay_cls "$PIN" "$INF_IP" "$TRAIN_IP"; then
	echo "FAIL overlay_cls (load and pin the classifiers)"
	echo "0 passed, 1 failed, 0 skipped"
	exit 1
fi
for k in ${AQK_OVERLAY_KINDS:-ipip geneve}; do
	eval "test_overlay_$k() { both_directions $k; }"
	run_test "test_overlay_$k"
	teardown
done
umount "$PIN" && rmdir "$PIN"
summary
