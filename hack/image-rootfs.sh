#!/usr/bin/env bash
# hack/image-rootfs.sh BIN_DIR OUT_DIR
# Assembles the root filesystem of the aiqos image from local files, with no
# base image: the three programs (BIN_DIR/aiqos, aiqos-agent, aiqosctl) in
# /usr/local/bin, every shared library they load (ldd, symlinks resolved,
# kept at the path the dynamic loader searches), the loader itself, the
# host's merged-/usr top-level symlinks (lib -> usr/lib, ...), the mount
# points the manifests use, and /var/run -> ../run. No shell, no package
# manager, no /etc/passwd (the agent runs as uid 0 by number).
#
# Used by agent/Containerfile (inside its build stage) and by
# hack/build-image.sh (an OCI archive without Docker), so both images are
# the same. As root it also runs `aiqos VERSION` chrooted into the result, to
# prove the loader finds every library. OUT_DIR must not exist or be empty.
set -euo pipefail

die() { echo "image-rootfs: error: $*" >&2; exit 1; }

[ $# -eq 2 ] || die "usage: $0 BIN_DIR OUT_DIR"
bin_dir=$1 out=$2
PROGRAMS=(aiqos aiqos-agent aiqosctl)

for p in "${PROGRAMS[@]}"; do
	[ -x "$bin_dir/$p" ] || die "$bin_dir/$p: missing or not executable (run make first)"
done
if [ -e "$out" ] && [ -n "$(ls -A "$out")" ]; then
	die "$out: exists and is not empty"
fi
command -v ldd >/dev/null || die "ldd not found"
mkdir -p "$out"
out=$(cd "$out" && pwd)

# Top-level symlinks of a merged-/usr host (Debian 12: /lib -> usr/lib, ...):
# the loader path in the ELF header (/lib64/ld-linux-x86-64.so.2) and the
# library paths ldd prints go through them.
for d in lib lib32 lib64 libx32; do
	if [ -L "/$d" ]; then
		ln -s "$(readlink "/$d")" "$out/$d"
	fi
done

# Copy one file to the same path in the rootfs, dereferenced, keeping its name
# (the soname the loader looks for), below the real dir of that path.
copy_lib() {
	local path=$1 dir name real_dir
	dir=$(dirname "$path")
	name=$(basename "$path")
	real_dir=$(cd "$dir" && pwd -P)
	mkdir -p "$out$real_dir"
	if [ ! -e "$out$real_dir/$name" ]; then
		cp -L "$path" "$out$real_dir/$name"
		chmod 0755 "$out$real_dir/$name"
	fi
}

libs=()
for p in "${PROGRAMS[@]}"; do
	install -D -m 0755 "$bin_dir/$p" "$out/usr/local/bin/$p"
	# "libx.so.1 => /lib/.../libx.so.1 (0x...)", "/lib64/ld-linux-x86-64.so.2 (0x...)";
	# "not found" is fatal, linux-vdso has no file.
	if ldd "$bin_dir/$p" | grep -q 'not found'; then
		ldd "$bin_dir/$p" >&2
		die "$bin_dir/$p: a shared library is not found"
	fi
	while read -r lib; do
		libs+=("$lib")
	done < <(ldd "$bin_dir/$p" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }')
done
[ ${#libs[@]} -gt 0 ] || die "ldd listed no libraries (static binaries are not expected)"
for lib in $(printf '%s\n' "${libs[@]}" | sort -u); do
	copy_lib "$lib"
done

# Mount points and dirs the manifests and the systemd-less container use.
mkdir -p "$out/etc/aiqos" "$out/run/aiqos" "$out/run/netns" "$out/var/lib/aiqos" \
	"$out/host/opt/cni/bin" "$out/host/etc/cni/net.d" "$out/host/proc/sys/net" "$out/tmp"
chmod 1777 "$out/tmp"
chmod 0700 "$out/run/aiqos"
ln -s ../run "$out/var/run"
# glibc >= 2.34 has the files and dns NSS modules built in; say which to use.
printf 'hosts: files dns\n' >"$out/etc/nsswitch.conf"

if [ "$(id -u)" -eq 0 ] && command -v chroot >/dev/null; then
	v=$(CNI_COMMAND=VERSION chroot "$out" /usr/local/bin/aiqos </dev/null) ||
		die "aiqos VERSION failed inside the rootfs (a library or the loader is missing)"
	case $v in
	*cniVersion*) ;;
	*) die "aiqos VERSION inside the rootfs printed: $v" ;;
	esac
fi
echo "image-rootfs: $out: ${#PROGRAMS[@]} programs, $(printf '%s\n' "${libs[@]}" | sort -u | wc -l) libraries"
