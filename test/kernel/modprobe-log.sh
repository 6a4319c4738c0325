#!/bin/sh
# test/kernel/modprobe-log.sh — /proc/sys/kernel/modprobe of the test VM:
# loads what the kernel asks for with busybox modprobe and logs the requests
# for tc kinds, actions, classifiers and congestion controls (a module
# hack/mkinitramfs-test.sh did not preload). Device-name lookups
# ("netdev-eth0" for a missing device) pass silently.
# shellcheck shell=sh
for a in "$@"; do
	case $a in
	sch_* | act_* | cls_* | tcp_* | em_* | net-sch-* | net-act-* | net-cls-* | net-em-*)
		echo "AIQOS-MODPROBE: $*" >/dev/console
		;;
	esac
done
exec /usr/bin/busybox modprobe "$@"
