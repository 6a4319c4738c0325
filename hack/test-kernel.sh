#!/usr/bin/env bash
# hack/test-kernel.sh [BUILD_DIR] — the full-kernel suite (`make test-kernel`,
# and the "kernel" suite of `make test`). Boots Debian's stock kernel
# (linux-image-amd64, every tc kind and DCTCP as modules) in
# qemu-system-x86_64 with TCG, runs the kernel-facing tests inside with AIQOS_EXPECT_FULL_KERNEL=1 (a fallback is a failure
# there), reads the results from a second serial port and ends with
# "kernel: N passed, N failed, N skipped". Exit 1 on any failure, or when the
# VM never reported (timeout AIQOS_KERNEL_TIMEOUT_S, default 900 s).
#
# The kernel package is fetched with `apt-get download` and unpacked into a
# cache (AIQOS_KERNEL_CACHE, default /var/cache/aiqos/kernel) instead of being
# installed: installing it would pull initramfs-tools and udev and run their
# maintainer scripts on this machine for a kernel it never boots. A Debian
# 6.1 kernel that is installed (/boot/vmlinuz-6.1.*-amd64 + /lib/modules) is
# used as it is. AIQOS_KERNEL_ROOT=DIR (DIR/boot/vmlinuz-*, DIR/lib/modules/*)
# picks another one. The initramfs is rebuilt on every run.
# AIQOS_KERNEL_OMIT_MODULES="sch_fq act_pedit tcp_dctcp" leaves modules out of
# the VM, to watch the full-kernel assertions fail on a fallback.
#
# The VM's one NIC is a 2-queue virtio-net (the guest's eth0, AIQOS_MQ_NIC for
# test_apply's node_mq_mixed_backlog): a multi-queue device that holds a
# backlog. Its emulated tx is paced (tx=timer, one packet per queue every
# 4 ms: ~250 packets/s per queue, far below what the guest sends), so its
# qdiscs queue. Its backend is a tap in a network namespace this script
# creates for the run and deletes after (qemu runs inside it): the guest's
# packets end there, nothing reaches the host's network.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$top/build}" && pwd)
out=$build/kernel-vm
cache=${AIQOS_KERNEL_CACHE:-/var/cache/aiqos/kernel}
timeout_s=${AIQOS_KERNEL_TIMEOUT_S:-900}
host_pass=0 host_fail=0

say() { echo "test-kernel: $*"; }
die() {
	echo "test-kernel: $*" >&2
	echo "kernel: 0 passed, 1 failed, 0 skipped"
	exit 1
}

# --- host packages: qemu, a static busybox, kmod (modprobe -d / depmod -b)
need_pkgs=()
command -v qemu-system-x86_64 >/dev/null || need_pkgs+=(qemu-system-x86)
{ [ -x /bin/busybox ] && ! ldd /bin/busybox >/dev/null 2>&1; } || need_pkgs+=(busybox-static)
command -v depmod >/dev/null || need_pkgs+=(kmod)
if [ ${#need_pkgs[@]} -gt 0 ]; then
	[ "$(id -u)" -eq 0 ] || die "missing packages ${need_pkgs[*]}; run as root to install them"
	say "installing ${need_pkgs[*]}"
	export DEBIAN_FRONTEND=noninteractive
	if ! apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" >"$build/apt-kernel.log" 2>&1; then
		apt-get update -qq >/dev/null 2>&1 || true
		apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" >"$build/apt-kernel.log" 2>&1 ||
			die "apt-get install ${need_pkgs[*]} failed: $(tail -n 5 "$build/apt-kernel.log")"
	fi
fi

# --- the kernel: KROOT/boot/vmlinuz-KVER and KROOT/lib/modules/KVER
kernel_in() { # ROOT [PATTERN] -> KVER of a usable kernel in ROOT, newest first
	local root=$1 pattern=${2:-*} d v
	for v in $(for d in "$root"/lib/modules/$pattern; do [ -d "$d" ] && basename "$d"; done | sort -rV); do
		[ -f "$root/boot/vmlinuz-$v" ] && [ -f "$root/lib/modules/$v/modules.dep" ] && {
			echo "$v"
			return 0
		}
	done
	return 1
}

fetch_kernel() { # unpack the candidate of linux-image-amd64 into the cache; sets kroot
	local pkg ver dir tmp deb
	pkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-/ {print $2; exit}')
	if [ -z "$pkg" ]; then
		apt-get update -qq >/dev/null 2>&1 || true
		pkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-/ {print $2; exit}')
	fi
	[ -n "$pkg" ] || die "apt knows no linux-image-amd64 (Debian sources?); or set AIQOS_KERNEL_ROOT"
	command -v dpkg-deb >/dev/null || die "dpkg-deb missing: fetching the kernel needs Debian (or AIQOS_KERNEL_ROOT)"
	ver=${pkg#linux-image-}
	dir=$cache/$ver
	kroot=$dir
	kernel_in "$dir" >/dev/null && return 0
	say "fetching $pkg into $dir"
	mkdir -p "$cache"
	tmp=$(mktemp -d "$cache/.fetch.XXXXXX")
	if ! (cd "$tmp" && apt-get download -q "$pkg" >download.log 2>&1); then
		apt-get update -qq >/dev/null 2>&1 || true
		(cd "$tmp" && apt-get download -q "$pkg" >download.log 2>&1) ||
			die "apt-get download $pkg failed: $(tail -n 3 "$tmp/download.log")"
	fi
	deb=$(ls "$tmp"/*.deb)
	mkdir -p "$tmp/root"
	dpkg-deb -x "$deb" "$tmp/root"
	depmod -b "$tmp/root" "$ver"
	rm -rf "$dir"
	mv "$tmp/root" "$dir"
	rm -rf "$tmp"
	# older kernels of the cache are superseded (~400 MB each)
	for old in "$cache"/*; do
		[ "$old" = "$dir" ] || rm -rf "$old"
	done
}

if [ -n "${AIQOS_KERNEL_ROOT:-}" ]; then
	kroot=$AIQOS_KERNEL_ROOT
	kver=$(kernel_in "$kroot") || die "no kernel with modules.dep under AIQOS_KERNEL_ROOT=$kroot"
elif v=$(kernel_in / '6.1.*-amd64'); then
	kroot=/ kver=$v
else
	fetch_kernel
	kver=$(kernel_in "$kroot") || die "unpacked kernel in $kroot is incomplete"
fi
say "kernel $kver from $kroot"

# --- host side: the Kernel support table (docs/concepts.md) against the code and this kernel
for b in "$build/bin/aiqos" "$build/test/test_nl" "$build/test/test_apply" "$build/test/test_bpf" "$build/kernel/features" \
	"$build/kernel/ecn_flow"; do
	[ -x "$b" ] || die "$b is not built: run \`make test-kernel\` (or \`make test\`)"
done
mkdir -p "$out"
readme_out=$out/readme-check.txt
bash "$top/test/kernel/check-readme.sh" "$top/docs/concepts.md" "$build/kernel/features" "$kroot" "$kver" \
	>"$readme_out" 2>&1 || true
sed 's/^/host| /' "$readme_out"
line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$readme_out" | tail -n 1 || true)
if [ -n "$line" ]; then
	host_pass=$(sed -n 's/^\([0-9]*\) passed.*/\1/p' <<<"$line")
	host_fail=$(sed -n 's/.* \([0-9]*\) failed.*/\1/p' <<<"$line")
else
	host_fail=1
fi

# --- the initramfs (always rebuilt: it carries the current binaries)
bash "$top/hack/mkinitramfs-test.sh" "$kroot" "$kver" "$build" "$out/initramfs.cpio.gz"

# --- boot
accel=${AIQOS_QEMU_ACCEL:-tcg}
console=$out/console.log
results=$out/results.txt
rm -f "$console" "$results"
say "booting qemu-system-x86_64 (accel $accel, timeout ${timeout_s}s); console: $console"
# the multi-queue NIC's backend: a tap in a netns of this run only
netns=aqt-kvm-$$
[ "$(id -u)" -eq 0 ] || die "the VM's multi-queue NIC needs root (a netns and a tap)"
ip netns add "$netns" || die "cannot create netns $netns"
trap 'ip netns del "$netns" 2>/dev/null || true' EXIT
ip -n "$netns" link set lo up
nic=(-netdev "tap,id=mq0,ifname=aqtap0,script=no,downscript=no,queues=2"
	-device "virtio-net-pci,netdev=mq0,mq=on,vectors=6,tx=timer,x-txtimer=4000000,x-txburst=1")
start=$(date +%s)
set +e
ip netns exec "$netns" timeout -k 10 "$timeout_s" qemu-system-x86_64 \
	-accel "$accel" -cpu max -smp 2 -m 1024 \
	-display none -monitor none -no-reboot "${nic[@]}" \
	-kernel "$kroot/boot/vmlinuz-$kver" -initrd "$out/initramfs.cpio.gz" \
	-append "console=ttyS0 panic=-1 loglevel=4 AIQOS_EXPECT_FULL_KERNEL=1 AIQOS_MQ_NIC=eth0" \
	-serial "file:$console" -serial "file:$results" </dev/null
qrc=$?
set -e
elapsed=$(($(date +%s) - start))
tr -d '\r' <"$console" | sed 's/^/vm| /'
[ -f "$results" ] || : >"$results"
tr -d '\r' <"$results" >"$results.clean"

pass=0 fail=0 skip=0
if ! grep -q '^AIQOS-DONE' "$results.clean"; then
	if [ "$qrc" -eq 124 ] || [ "$qrc" -eq 137 ]; then
		say "the VM did not finish within ${timeout_s}s (qemu killed)"
	else
		say "the VM stopped without reporting (qemu exit $qrc); see $console"
	fi
	fail=1
fi
grep '^AIQOS-TEST: ' "$results.clean" | sed 's/^AIQOS-TEST: /  /' || true
grep '^AIQOS-SUITE: ' "$results.clean" | sed 's/^AIQOS-SUITE: /  suite /' || true
final=$(grep '^AIQOS-RESULT: ' "$results.clean" | tail -n 1 || true)
if [ -n "$final" ]; then
	pass=$(sed -n 's/.* \([0-9]*\) passed.*/\1/p' <<<"$final")
	fail=$((fail + $(sed -n 's/.* \([0-9]*\) failed.*/\1/p' <<<"$final")))
	skip=$(sed -n 's/.* \([0-9]*\) skipped.*/\1/p' <<<"$final")
fi
say "VM run took ${elapsed}s (qemu exit $qrc); logs in $out"
pass=$((pass + host_pass))
fail=$((fail + host_fail))
echo "kernel: $pass passed, $fail failed, ${skip:-0} skipped"
[ "$fail" -eq 0 ]
