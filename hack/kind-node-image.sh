#!/usr/bin/env bash
# hack/kind-node-image.sh [--print-image]
# Builds a kind node image with no registry and no base image, what
# `kind build node-image` makes from kindest/base, from local parts only:
#
#   rootfs   Debian bookworm from Debian's archive (mmdebstrap): systemd,
#            Debian's containerd and runc, iptables/nftables, iproute2 ...,
#            kind's own base files (entrypoint, containerd config, kubelet
#            units: images/base/files of the kind module) and the Dockerfile's
#            systemd trimming; CNI plugins host-local, loopback, ptp, portmap
#            (kind's set) and bridge (Flannel delegates to it) from Debian's
#            containernetworking-plugins
#   bins     kubeadm, kubelet, kubectl (hack/build-k8s.sh), crictl (build-kind)
#   /kind    version, manifests/default-cni.yaml and default-storage.yaml (the
#            kind module's constants, hack/lib/kind-manifest.py)
#   images   preloaded in containerd (namespace k8s.io, pinned), each built
#            here (test/e2e/mkimage.py): kube-apiserver, kube-controller-manager,
#            kube-scheduler, kube-proxy (v1.34.4), etcd 3.6.5-0, coredns
#            v1.12.1, pause 3.10.1 (test/e2e/pause.c), kindnetd; tagged with
#            the names kubeadm and kind's manifest use
#
# and imports it into the Docker engine of hack/kind-docker.sh (DOCKER_HOST) as
# aiqos.local/kind-node:<k8s version>-<input hash>. The image archives of
# kube-proxy, kindnetd, flanneld and the flannel CNI plugin (an iptables base:
# Debian's iptables, conntrack, ipset) stay in the cache for `kind load
# image-archive`. Everything is cached under ${AIQOS_CACHE:-/var/cache/aiqos}/kind:
# a second run with unchanged inputs finds the image and only prints its name.
# --print-image prints the image reference on stdout (everything else: stderr).
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${AIQOS_CACHE:-/var/cache/aiqos}
K8S_VERSION=${AIQOS_K8S_VERSION:-v1.34.4}
cache=$CACHE/kind
MIRROR=${AIQOS_DEBIAN_MIRROR:-http://deb.debian.org/debian}
SECURITY=${AIQOS_DEBIAN_SECURITY:-http://deb.debian.org/debian-security}
NODE_PKGS=systemd,conntrack,iptables,nftables,iproute2,ethtool,util-linux,mount,kmod,libseccomp2,pigz,bash,ca-certificates,curl,jq,procps,containerd,runc,containernetworking-plugins
NET_PKGS=iptables,conntrack,ipset,iproute2
PAUSE_VERSION=3.10.1
ETCD_IMAGE_TAG=3.6.5-0
COREDNS_VERSION=v1.12.1

print=0
for a in "$@"; do
	case $a in
	--print-image) print=1 ;;
	-h | --help) sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "kind-node-image: unknown argument '$a'" >&2; exit 2 ;;
	esac
done

log() { echo "kind-node-image: $*" >&2; }
die() { log "error: $*"; exit 1; }

[ "$(id -u)" -eq 0 ] || die "needs root (mmdebstrap --mode=root, chroot, containerd)"
for c in mmdebstrap docker containerd ctr jq python3 cc sha256sum flock; do
	command -v "$c" >/dev/null || die "'$c' not found (hack/install-deps.sh --kind)"
done
docker info >/dev/null 2>&1 || die "no Docker engine at ${DOCKER_HOST:-the default socket} (hack/kind-docker.sh start)"

k8s_bin=$(AIQOS_BUILD_JOBS=${AIQOS_BUILD_JOBS:-1} "$top/hack/build-k8s.sh" --extra kubeadm --extra kube-proxy --print-bin-dir) ||
	die "hack/build-k8s.sh failed"
kind_bin=$("$top/hack/build-kind.sh" --print-bin-dir) || die "hack/build-kind.sh failed"
kind_src=$(ls -d "$cache/src/kind-"v* | tail -n 1)
[ -d "$kind_src/images/base/files" ] || die "no kind source in $cache/src (hack/build-kind.sh)"

mkdir -p "$cache/node" "$cache/images"
exec 8>"$cache/node/.lock"
flock 8

# --- Debian root filesystems (cached by package list) ------------------------
debian_rootfs() { # NAME VARIANT PACKAGES
	local dir
	dir=$cache/node/$1-$(echo "$2 $3 $MIRROR" | sha256sum | cut -c1-12)
	if [ ! -f "$dir/.complete" ]; then
		log "mmdebstrap $1 ($2: $3) from $MIRROR"
		rm -rf "$dir" "$dir.tmp"
		mmdebstrap --variant="$2" --mode=root --format=directory --include="$3" \
			--dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
			--dpkgopt='path-include=/usr/share/doc/*/copyright' --dpkgopt='path-exclude=/usr/share/locale/*' \
			bookworm "$dir.tmp" "deb $MIRROR bookworm main" "deb $MIRROR bookworm-updates main" \
			"deb $SECURITY bookworm-security main" >&2 || die "mmdebstrap $1 failed"
		mv "$dir.tmp" "$dir"
		touch "$dir/.complete"
	fi
	echo "$dir"
}
node_base=$(debian_rootfs node-base minbase "$NODE_PKGS")
net_base=$(debian_rootfs net-base essential "$NET_PKGS")

# --- Component images (OCI archives; rebuilt when their inputs change) ----------
image_archive() { # FILE REF ROOTFS_FN ARGS... : builds FILE unless its stamp matches
	local file=$1 ref=$2 fn=$3 stamp
	shift 3
	stamp=$({
		printf '%s\n' "$ref" "$*"
		declare -f "$fn" net_rootfs static_rootfs
		sha256sum "$top/test/e2e/mkimage.py" "${inputs[@]}" | cut -d' ' -f1
	} | sha256sum | cut -d' ' -f1)
	if [ -f "$file" ] && [ "$(cat "$file.stamp" 2>/dev/null)" = "$stamp" ]; then
		return
	fi
	log "image $ref"
	local root
	root=$(mktemp -d "$cache/images/.root.XXXXXX")
	"$fn" "$root"
	python3 "$top/test/e2e/mkimage.py" --rootfs "$root" --name "$ref" --out "$file" "$@" >/dev/null ||
		die "mkimage $ref failed"
	rm -rf "$root"
	echo "$stamp" >"$file.stamp"
}

# The iptables base of kube-proxy, kindnetd and flannel (upstream: distroless-iptables,
# alpine): Debian's iptables with the mode chosen at first use like
# kubernetes-sigs/iptables-wrappers (the backend holding the kubelet's rules).
net_rootfs() { # DIR
	cp -a "$net_base/." "$1/"
	rm -rf "${1:?}/dev" "$1/.complete" "$1/var/cache/apt" "$1/var/lib/apt/lists"
	mkdir -p "$1/dev" "$1/run" "$1/tmp"
	chmod 1777 "$1/tmp"
	install -m 0755 "$top/hack/lib/iptables-wrapper" "$1/usr/sbin/iptables-wrapper"
	local t
	for t in iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore; do
		ln -sfn iptables-wrapper "$1/usr/sbin/$t"
	done
}
static_rootfs() { # DIR (the binaries in $static_bins, to /usr/local/bin)
	mkdir -p "$1/usr/local/bin" "$1/etc" "$1/tmp" "$1/var/run"
	chmod 1777 "$1/tmp"
	local b
	for b in "${static_bins[@]}"; do install -m 0755 "$b" "$1/usr/local/bin/"; done
	echo 'root:x:0:0:root:/root:/sbin/nologin' >"$1/etc/passwd"
	echo 'nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin' >>"$1/etc/passwd"
	echo 'root:x:0:' >"$1/etc/group"
}
net_with_bins() { net_rootfs "$1"; static_rootfs "$1"; }
pause_rootfs() { cc -static -Os -s -Wall -Wextra -o "$1/pause" "$top/test/e2e/pause.c" || die "cannot build pause"; }
coredns_rootfs() { install -m 0755 "$kind_bin/coredns" "$1/coredns"; mkdir -p "$1/etc" "$1/tmp"; }
flannel_rootfs() {
	net_rootfs "$1"
	mkdir -p "$1/opt/bin"
	install -m 0755 "$kind_bin/flanneld" "$kind_bin/install-conf" "$1/opt/bin/"
}
flannel_cni_rootfs() { net_rootfs "$1"; install -m 0755 "$kind_bin/flannel" "$1/flannel"; }

PATHENV=PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
img=$cache/images
for c in kube-apiserver kube-controller-manager kube-scheduler; do
	static_bins=("$k8s_bin/$c") inputs=("$k8s_bin/$c")
	image_archive "$img/$c.tar" "registry.k8s.io/$c:$K8S_VERSION" static_rootfs --env "$PATHENV" --entrypoint "[\"/usr/local/bin/$c\"]"
done
static_bins=("$k8s_bin/etcd") inputs=("$k8s_bin/etcd")
image_archive "$img/etcd.tar" "registry.k8s.io/etcd:$ETCD_IMAGE_TAG" static_rootfs --env "$PATHENV"
static_bins=("$k8s_bin/kube-proxy") inputs=("$k8s_bin/kube-proxy" "$top/hack/lib/iptables-wrapper")
image_archive "$img/kube-proxy.tar" "registry.k8s.io/kube-proxy:$K8S_VERSION" net_with_bins --env "$PATHENV" --entrypoint '["/usr/local/bin/kube-proxy"]'
inputs=("$top/test/e2e/pause.c")
image_archive "$img/pause.tar" "registry.k8s.io/pause:$PAUSE_VERSION" pause_rootfs --entrypoint '["/pause"]' --user 65535:65535
inputs=("$kind_bin/coredns")
image_archive "$img/coredns.tar" "registry.k8s.io/coredns/coredns:$COREDNS_VERSION" coredns_rootfs --entrypoint '["/coredns"]'
kindnetd_ref=$(python3 "$top/hack/lib/kind-manifest.py" "$kind_src/pkg/build/nodeimage/const_cni.go" defaultCNIManifest |
	sed -n 's/^ *image: *\(.*kindnetd.*\)$/\1/p')
[ -n "$kindnetd_ref" ] || die "no kindnetd image in kind's default CNI manifest"
static_bins=("$kind_bin/kindnetd") inputs=("$kind_bin/kindnetd" "$top/hack/lib/iptables-wrapper")
image_archive "$img/kindnetd.tar" "$kindnetd_ref" net_with_bins --env "$PATHENV" --cmd '["/usr/local/bin/kindnetd"]'
flannel_version=$(sed -n 's/^flanneld=\([^ ]*\) .*/\1/p' "$kind_bin/.stamp-flanneld")
flannel_cni_version=$(sed -n 's/^flannel=\([^ ]*\) .*/\1/p' "$kind_bin/.stamp-flannel")
inputs=("$kind_bin/flanneld" "$kind_bin/install-conf" "$top/hack/lib/iptables-wrapper")
image_archive "$img/flannel.tar" "ghcr.io/flannel-io/flannel:$flannel_version" flannel_rootfs --env "$PATHENV" --entrypoint '["/opt/bin/flanneld"]'
inputs=("$kind_bin/flannel" "$top/hack/lib/iptables-wrapper")
image_archive "$img/flannel-cni-plugin.tar" "ghcr.io/flannel-io/flannel-cni-plugin:$flannel_cni_version" flannel_cni_rootfs --env "$PATHENV"
preload=(kube-apiserver kube-controller-manager kube-scheduler kube-proxy etcd pause coredns kindnetd)

# --- The node image ------------------------------------------------------------
hash=$( (
	echo "$NODE_PKGS $MIRROR $K8S_VERSION"
	cat "$0" "$top/hack/lib/kind-manifest.py"
	for i in "${preload[@]}"; do cat "$img/$i.tar.stamp"; done
	cat "$k8s_bin"/.stamp-kubeadm "$k8s_bin"/.stamp-kubelet "$k8s_bin"/.stamp-kubectl "$kind_bin/.stamp-crictl"
	tar -C "$kind_src/images/base/files" -c --sort=name --mtime=@0 --owner=0 --group=0 .
) | sha256sum | cut -c1-12)
image=aiqos.local/kind-node:$K8S_VERSION-$hash
if docker image inspect "$image" >/dev/null 2>&1; then
	log "cached: $image"
	[ "$print" -eq 0 ] || echo "$image"
	exit 0
fi

t0=$(date +%s)
work=$(mktemp -d "$cache/node/.build.XXXXXX")
ctrd_pid=""
cleanup() {
	[ -z "$ctrd_pid" ] || { kill "$ctrd_pid" 2>/dev/null; wait "$ctrd_pid" 2>/dev/null || true; }
	rm -rf "$work"
}
trap cleanup EXIT
r=$work/rootfs
log "assembling $image in $work"
cp -a "$node_base" "$r"
rm -f "$r/.complete"

# kind's base image files and its Dockerfile's steps (images/base/Dockerfile).
f=$kind_src/images/base/files
install -m 0755 "$f"/usr/local/bin/* "$r/usr/local/bin/"
mkdir -p "$r/kind/bin" "$r/LICENSES" "$r/etc/containerd" "$r/etc/default" "$r/etc/sysctl.d" \
	"$r/etc/systemd/system/kubelet.service.d" "$r/etc/kubernetes/manifests" "$r/opt/cni/bin" "$r/kind/manifests"
install -m 0644 "$f"/kind/README.txt "$r/kind/"
install -m 0755 "$f"/kind/bin/* "$r/kind/bin/"
install -m 0644 "$f"/LICENSES/* "$r/LICENSES/"
install -m 0644 "$f"/etc/crictl.yaml "$r/etc/"
install -m 0644 "$f"/etc/containerd/* "$r/etc/containerd/"
install -m 0644 "$f"/etc/default/* "$r/etc/default/"
install -m 0644 "$f"/etc/sysctl.d/* "$r/etc/sysctl.d/"
find "$f/etc/systemd/system" -maxdepth 1 -type f -exec install -m 0644 {} "$r/etc/systemd/system/" \;
install -m 0644 "$f"/etc/systemd/system/kubelet.service.d/* "$r/etc/systemd/system/kubelet.service.d/"
# Debian's containerd 1.6 and runc where kind's units and config expect them.
ln -sfn /usr/bin/containerd "$r/usr/local/bin/containerd"
ln -sfn /usr/bin/ctr "$r/usr/local/bin/ctr"
ln -sfn /usr/bin/containerd-shim-runc-v2 "$r/usr/local/bin/containerd-shim-runc-v2"
ln -sfn /usr/sbin/runc "$r/usr/local/sbin/runc"
# The pause image kubeadm v1.34 names (kind's config file has 3.10).
sed -i "s|^\([[:space:]]*sandbox_image = \).*|\1\"registry.k8s.io/pause:$PAUSE_VERSION\"|" "$r/etc/containerd/config.toml"
grep -q "pause:$PAUSE_VERSION" "$r/etc/containerd/config.toml" || die "no sandbox_image in kind's containerd config"
# A pod's oom_score_adj below containerd's own needs CAP_SYS_RESOURCE, which a
# node lacks where the host's bounding set does (docker --privileged grants only
# what the host has; runc init then dies: "can't get final child's PID from
# pipe: EOF"). Clamped to containerd's value instead (as kind does for rootless);
# where systemd could give containerd its -999 this changes nothing.
sed -i 's|^\([[:space:]]*restrict_oom_score_adj = \).*|\1true|' "$r/etc/containerd/config.toml"
grep -q 'restrict_oom_score_adj = true' "$r/etc/containerd/config.toml" || die "no restrict_oom_score_adj in kind's containerd config"
ctr oci spec | jq '.hooks.createContainer[.hooks.createContainer| length] |= . + {"path": "/kind/bin/mount-product-files.sh"}' |
	jq 'del(.process.rlimits)' >"$r/etc/containerd/cri-base.json"
find "$r/lib/systemd/system/sysinit.target.wants/" -name systemd-tmpfiles-setup.service -delete
rm -f "$r"/lib/systemd/system/multi-user.target.wants/* "$r"/etc/systemd/system/*.wants/* \
	"$r"/lib/systemd/system/local-fs.target.wants/* "$r"/lib/systemd/system/sockets.target.wants/*udev* \
	"$r"/lib/systemd/system/sockets.target.wants/*initctl* "$r"/lib/systemd/system/basic.target.wants/*
echo "ReadKMsg=no" >>"$r/etc/systemd/journald.conf"
ln -sfn /lib/systemd/systemd "$r/sbin/init"
# Debian enables containerd.service (/lib/systemd/system) itself; kind's unit in /etc wins.
systemctl --root="$r" enable kubelet.service containerd.service undo-mount-hacks.service >/dev/null 2>&1 ||
	die "systemctl --root enable failed"
systemctl --root="$r" mask systemd-binfmt.service >/dev/null 2>&1
for p in host-local loopback ptp portmap bridge; do
	install -m 0755 "/usr/lib/cni/$p" "$r/opt/cni/bin/$p" 2>/dev/null || cp -a "$r/usr/lib/cni/$p" "$r/opt/cni/bin/$p"
done
rm -rf "$r/usr/lib/cni" "$r/var/cache/apt"/* "$r/var/lib/apt/lists"/*

# Kubernetes (what kind build node-image copies in) and crictl.
for b in kubeadm kubelet kubectl; do install -m 0755 "$k8s_bin/$b" "$r/usr/bin/$b"; done
install -m 0755 "$kind_bin/crictl" "$r/usr/local/bin/crictl"
echo -n "$K8S_VERSION" >"$r/kind/version"
python3 "$top/hack/lib/kind-manifest.py" "$kind_src/pkg/build/nodeimage/const_cni.go" defaultCNIManifest >"$r/kind/manifests/default-cni.yaml"
python3 "$top/hack/lib/kind-manifest.py" "$kind_src/pkg/build/nodeimage/const_storage.go" defaultStorageManifest >"$r/kind/manifests/default-storage.yaml"

# kubeadm's image list must be what we preload.
want=$(chroot "$r" kubeadm config images list --kubernetes-version "$K8S_VERSION" 2>/dev/null | sort) ||
	die "kubeadm config images list failed"
have=$(for i in "${preload[@]}"; do tar -xOf "$img/$i.tar" index.json | jq -r '.manifests[0].annotations["io.containerd.image.name"]'; done | sort)
missing=$(comm -23 <(echo "$want") <(echo "$have"))
[ -z "$missing" ] || die "kubeadm $K8S_VERSION needs images not built here: $missing"

# Preload: a containerd of our own on the rootfs' /var/lib/containerd.
mkdir -p "$work/state"
cat >"$work/containerd.toml" <<TOML
version = 2
root = "$r/var/lib/containerd"
state = "$work/state"
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = "$work/state/c.sock"
TOML
containerd --config "$work/containerd.toml" >"$work/containerd.log" 2>&1 &
ctrd_pid=$!
for _ in $(seq 1 50); do [ -S "$work/state/c.sock" ] && break; sleep 0.2; done
[ -S "$work/state/c.sock" ] || { cat "$work/containerd.log" >&2; die "containerd for the preload did not start"; }
for i in "${preload[@]}"; do
	ctr -a "$work/state/c.sock" -n k8s.io images import --snapshotter overlayfs "$img/$i.tar" >/dev/null ||
		die "preloading $i failed"
	# Pinned, as kind's own preload: the kubelet's image GC keeps them.
	ctr -a "$work/state/c.sock" -n k8s.io images label "$(tar -xOf "$img/$i.tar" index.json |
		jq -r '.manifests[0].annotations["io.containerd.image.name"]')" io.cri-containerd.pinned=pinned >/dev/null ||
		die "labelling $i failed"
done
ctr -a "$work/state/c.sock" -n k8s.io images list -q >&2
kill "$ctrd_pid"
wait "$ctrd_pid" 2>/dev/null || true
ctrd_pid=""

log "importing into Docker"
tar -C "$r" -c --numeric-owner . | docker import \
	--change 'ENTRYPOINT [ "/usr/local/bin/entrypoint", "/sbin/init" ]' \
	--change 'ENV container=docker' \
	- "$image-rootfs" >/dev/null || die "docker import failed"
# docker import takes no STOPSIGNAL: a metadata-only build step on top (local base, no pull).
printf 'FROM %s\nSTOPSIGNAL SIGRTMIN+3\n' "$image-rootfs" | docker build -q -t "$image" - >/dev/null ||
	die "docker build (STOPSIGNAL) failed"
docker rmi "$image-rootfs" >/dev/null
# Older builds of the node image only take space in the cache.
docker images --format '{{.Repository}}:{{.Tag}}' aiqos.local/kind-node | grep -vxF "$image" |
	xargs -r docker rmi >/dev/null 2>&1 || true
log "built $image in $(($(date +%s) - t0)) s"
[ "$print" -eq 0 ] || echo "$image"
