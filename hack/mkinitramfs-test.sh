#!/usr/bin/env bash
# hack/mkinitramfs-test.sh KERNEL_ROOT KVER BUILD_DIR OUT.cpio.gz
# Builds the initramfs of the full-kernel test VM from local files only:
# busybox-static, dash (/bin/sh), iproute2 (ip, tc, ss), jq, the reference
# CNI plugins, the plugin and test binaries of BUILD_DIR with every shared
# library ldd names,
# the in-VM scripts of test/kernel/, and the kernel modules the tests need
# with their dependencies (resolved from KERNEL_ROOT/lib/modules/KVER by
# modprobe --show-depends, loaded in that order by /init). Rebuilt on every
# run (a few seconds) so it always carries the current binaries.
set -euo pipefail

if [ $# -ne 4 ]; then
	echo "usage: $0 KERNEL_ROOT KVER BUILD_DIR OUT.cpio.gz" >&2
	exit 2
fi
kroot=$(cd "$1" && pwd)
kver=$2
build=$(cd "$3" && pwd)
out=$4
top=$(cd "$(dirname "$0")/.." && pwd)

# Modules the in-VM tests use. Built-ins (sch_fq_codel, sch_fifo, ...) are
# reported as such by modprobe and need nothing.
MODULES=(
	sch_fq sch_fq_codel sch_codel sch_prio sch_red sch_ets sch_cake sch_netem
	sch_htb sch_tbf sch_ingress sch_sfq sch_mqprio
	act_pedit act_csum act_skbedit act_gact act_mirred act_police
	cls_u32 cls_flower cls_matchall cls_bpf cls_basic
	tcp_dctcp tcp_bbr
	veth ifb bridge
	ipip geneve vxlan
	virtio_pci virtio_net
)
# AIQOS_KERNEL_OMIT_MODULES="sch_fq act_pedit": leave these out (not even
# autoloadable), to see the in-VM tests fail when a full path falls back.
if [ -n "${AIQOS_KERNEL_OMIT_MODULES:-}" ]; then
	kept=()
	for m in "${MODULES[@]}"; do
		case " $AIQOS_KERNEL_OMIT_MODULES " in
		*" $m "*) echo "mkinitramfs-test: leaving out module $m (AIQOS_KERNEL_OMIT_MODULES)" ;;
		*) kept+=("$m") ;;
		esac
	done
	MODULES=("${kept[@]}")
fi
# Binaries from the host, with their libraries.
# dash is /bin/sh: busybox's own shell runs its applets before PATH
# (FEATURE_SH_STANDALONE), so `ip`/`tc` in system() would be busybox's.
HOST_BINS=(/usr/bin/dash /usr/bin/ip /usr/sbin/tc /usr/bin/ss /usr/bin/jq)
CNI_PLUGINS=(ptp host-local bridge loopback)
CNI_DIR=/usr/lib/cni
# Project binaries: the plugin, the unit tests that touch the kernel, the
# test/kernel helpers.
UNIT_TESTS=(test_nl test_apply test_bpf)

die() {
	echo "mkinitramfs-test: $*" >&2
	exit 1
}

file_is_static() { ! ldd "$1" >/dev/null 2>&1; }
[ -x /bin/busybox ] || die "/bin/busybox missing (Debian package busybox-static)"
file_is_static /bin/busybox || die "/bin/busybox is not static (install busybox-static)"
[ -d "$kroot/lib/modules/$kver" ] || die "no modules in $kroot/lib/modules/$kver"
[ -f "$kroot/lib/modules/$kver/modules.dep" ] || die "$kroot/lib/modules/$kver/modules.dep missing (depmod -b)"

stage=$(mktemp -d /tmp/aqt-initramfs.XXXXXX)
trap 'rm -rf "$stage"' EXIT

# merged-/usr layout like the host, so ldd's paths work unchanged
mkdir -p "$stage"/usr/{bin,sbin,lib,lib64} "$stage"/{dev,proc,sys,run,tmp,etc,root,var} "$stage$CNI_DIR" \
	"$stage"/aiqos/{bin,test,kernel}
ln -s usr/bin "$stage/bin"
ln -s usr/sbin "$stage/sbin"
ln -s usr/lib "$stage/lib"
ln -s usr/lib64 "$stage/lib64"
ln -s ../run "$stage/var/run"
chmod 1777 "$stage/tmp"

# copy FILE to the same path under the stage (dereferencing links)
copy_same() {
	local f=$1
	[ -e "$stage$f" ] && return 0
	mkdir -p "$stage$(dirname "$f")"
	cp -L "$f" "$stage$f"
}

# copy the shared libraries a binary needs (as ldd resolves them)
copy_libs() {
	local bin=$1 lib
	file_is_static "$bin" && return 0
	while read -r lib; do
		[ -n "$lib" ] || continue
		copy_same "$lib"
	done < <(ldd "$bin" | awk '/=>/ && $3 ~ /^\// {print $3} /^[[:space:]]*\/[^ ]*ld-linux/ {print $1}')
}

add_bin() { # SRC DEST
	mkdir -p "$stage$(dirname "$2")"
	cp -L "$1" "$stage$2"
	chmod 0755 "$stage$2"
	copy_libs "$1"
}

# busybox: every applet, except the ones iproute2 provides for real
cp /bin/busybox "$stage/usr/bin/busybox"
for applet in $(/bin/busybox --list); do
	case $applet in
	busybox | sh | ip | tc | ss | modprobe) continue ;;
	esac
	[ -e "$stage/usr/bin/$applet" ] || ln -s busybox "$stage/usr/bin/$applet"
done

for b in "${HOST_BINS[@]}"; do
	[ -x "$b" ] || die "$b missing (iproute2, jq: hack/install-deps.sh)"
	add_bin "$b" "$b"
done
ln -s dash "$stage/usr/bin/sh"
[ -d /etc/iproute2 ] && cp -r /etc/iproute2 "$stage/etc/"

for p in "${CNI_PLUGINS[@]}"; do
	[ -x "$CNI_DIR/$p" ] || die "$CNI_DIR/$p missing (containernetworking-plugins)"
	add_bin "$CNI_DIR/$p" "$CNI_DIR/$p"
done

[ -x "$build/bin/aiqos" ] || die "$build/bin/aiqos not built (make)"
add_bin "$build/bin/aiqos" /aiqos/bin/aiqos
for t in "${UNIT_TESTS[@]}"; do
	[ -x "$build/test/$t" ] || die "$build/test/$t not built (make test-kernel)"
	add_bin "$build/test/$t" "/aiqos/test/$t"
done
for src in "$top"/test/kernel/*.c; do
	name=$(basename "$src" .c)
	[ -x "$build/kernel/$name" ] || die "$build/kernel/$name not built (make test-kernel)"
	add_bin "$build/kernel/$name" "/aiqos/bin/$name"
done
for s in "$top"/test/kernel/*.sh; do
	install -m 0755 "$s" "$stage/aiqos/kernel/$(basename "$s")"
done
install -m 0755 "$top/test/kernel/init.sh" "$stage/init"

# kernel modules in load order (dependencies first), and what is built in
moddir=/lib/modules/$kver
mkdir -p "$stage$moddir"
: >"$stage/etc/aiqos-modules"
: >"$stage/etc/aiqos-builtin"
while read -r kind path _; do
	case $kind in
	insmod)
		rel=${path#"$kroot"}
		if [ ! -e "$stage$rel" ]; then
			mkdir -p "$stage$(dirname "$rel")"
			cp "$path" "$stage$rel"
			echo "$rel" >>"$stage/etc/aiqos-modules"
		fi
		;;
	builtin) echo "$path" >>"$stage/etc/aiqos-builtin" ;;
	*) die "modprobe --show-depends: unexpected line '$kind $path'" ;;
	esac
done < <(modprobe -d "$kroot" -S "$kver" --show-depends -a "${MODULES[@]}")
# let the kernel's own autoload (request_module) work for anything else the
# copied modules provide; /init logs each request
for f in modules.dep modules.alias modules.builtin modules.symbols modules.order; do
	[ -f "$kroot$moddir/$f" ] && cp "$kroot$moddir/$f" "$stage$moddir/"
done

cat >"$stage/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/bin/sh
EOF
cat >"$stage/etc/group" <<'EOF'
root:x:0:
EOF
printf '127.0.0.1 localhost\n::1 localhost\n' >"$stage/etc/hosts"
echo aiqos-kvm >"$stage/etc/hostname"

mkdir -p "$(dirname "$out")"
(cd "$stage" && find . -mindepth 1 | LC_ALL=C sort | /bin/busybox cpio -o -H newc 2>/dev/null) | gzip -1 >"$out.tmp"
mv "$out.tmp" "$out"
echo "mkinitramfs-test: $out ($(du -h "$out" | cut -f1), $(wc -l <"$stage/etc/aiqos-modules") modules)"
