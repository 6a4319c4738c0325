#!/usr/bin/env bash
# hack/lib/example-image.sh OUT_FILE [--bench]
# The example pods' image of the e2e runs (no registry can give us
# Kubernetes' agnhost here): busybox-static + test/e2e/agnhost-lite.sh as
# /agnhost, an OCI archive named localhost/aiqos-e2e/agnhost:e2e
# (test/e2e/mkimage.py). With --bench it is localhost/aiqos-e2e/bench:e2e and
# also holds Debian's sockperf and iperf3 with every shared library they load
# (the kind Flannel run's latency-under-load measurement). Prints the name.
set -euo pipefail

top=$(cd "$(dirname "$0")/../.." && pwd)
die() { echo "example-image: error: $*" >&2; exit 1; }
[ $# -ge 1 ] || die "usage: $0 OUT_FILE [--bench]"
out=$1 bench=0
[ "${2:-}" = --bench ] && bench=1
busybox=$(command -v busybox) || die "busybox not found (package busybox-static)"
! ldd "$busybox" >/dev/null 2>&1 || die "$busybox is not static (package busybox-static)"

root=$(mktemp -d "${TMPDIR:-/tmp}/aiqos-example.XXXXXX")
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/bin" "$root/www" "$root/tmp" "$root/etc"
cp "$busybox" "$root/bin/busybox"
ln -s busybox "$root/bin/sh"
install -m 0755 "$top/test/e2e/agnhost-lite.sh" "$root/agnhost"
echo "aiqos e2e" >"$root/www/index.html"
chmod 1777 "$root/tmp"
printf 'root:x:0:0:root:/:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/sh\n' >"$root/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
name=localhost/aiqos-e2e/agnhost:e2e
if [ "$bench" -eq 1 ]; then
	name=localhost/aiqos-e2e/bench:e2e
	for p in sockperf iperf3; do
		b=$(command -v "$p") || die "$p not found (hack/install-deps.sh installs it)"
		mkdir -p "$root/usr/bin"
		cp -L "$b" "$root/usr/bin/$p"
		# Every library at the path the loader searches (as hack/image-rootfs.sh does).
		for lib in $(ldd "$b" | awk '/=> \// { print $3 } /^[[:space:]]*\/[^ ]*ld-linux/ { print $1 }'); do
			mkdir -p "$root$(dirname "$lib")"
			cp -L "$lib" "$root$lib"
		done
	done
	for d in lib lib64; do [ -L "/$d" ] && [ ! -e "$root/$d" ] && ln -s "$(readlink "/$d")" "$root/$d"; done
	chroot "$root" /usr/bin/sockperf --version >/dev/null 2>&1 || die "sockperf does not run in the image root"
fi
python3 "$top/test/e2e/mkimage.py" --rootfs "$root" --name "$name" --entrypoint '["/agnhost"]' --cmd '["pause"]' \
	--out "$out"
