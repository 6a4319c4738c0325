#!/usr/bin/env bash
# hack/build-kind.sh [--print-bin-dir] [--check]
# Builds the Go programs of the kind runs (make kind-e2e) from their sources,
# at pinned versions, into ${AIQOS_CACHE:-/var/cache/aiqos}/kind/bin:
#
#   kind              sigs.k8s.io/kind                      (Go module proxy)
#   coredns           github.com/coredns/coredns            (Go module proxy)
#   flanneld,         github.com/flannel-io/flannel         (Go module proxy;
#   install-conf      without the TencentCloud VPC backend, whose SDK version
#                     the proxy refuses (403): only VXLAN is used here)
#   crictl            sigs.k8s.io/cri-tools                 (Go module proxy)
#   kindnetd          kind's images/kindnetd at its image tag's commit (a
#                     module of its own that the proxy does not serve: git,
#                     AIQOS_KIND_GIT, default https://github.com/kubernetes-sigs/kind)
#   flannel           the flannel CNI plugin, github.com/flannel-io/cni-plugin
#                     (git, AIQOS_FLANNEL_CNI_GIT; the proxy does not serve it)
#
# and kubeadm + kube-proxy through hack/build-k8s.sh --extra (same cache, same
# lock as the Kubernetes build). A program is rebuilt only when missing or its
# stamp (version, Go version, flags) differs; builds serialize on a lock and run
# with -p 1 and GOMAXPROCS=${AIQOS_KIND_GOMAXPROCS:-1} (the machine is shared).
# --check builds nothing: exit 1 if anything is missing.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${AIQOS_CACHE:-/var/cache/aiqos}
KIND_VERSION=${AIQOS_KIND_VERSION:-v0.30.0}
# kind v0.30.0's default CNI manifest names docker.io/kindest/kindnetd:v20250512-df8de77b:
# the image of images/kindnetd at commit df8de77b.
KINDNETD_TAG=v20250512-df8de77b
KINDNETD_COMMIT=df8de77b
COREDNS_VERSION=v1.12.1 # kubeadm v1.34's CoreDNSVersion
CRICTL_VERSION=v1.34.0
FLANNEL_VERSION=${AIQOS_FLANNEL_VERSION:-v0.28.10}
FLANNEL_CNI_REF=${AIQOS_FLANNEL_CNI_REF:-v1.9.1-flannel1}
KIND_GIT=${AIQOS_KIND_GIT:-https://github.com/kubernetes-sigs/kind}
FLANNEL_CNI_GIT=${AIQOS_FLANNEL_CNI_GIT:-https://github.com/flannel-io/cni-plugin}

root=$CACHE/kind
bin=$root/bin
src=$root/src
PROGS=(kind coredns flanneld install-conf kindnetd flannel crictl)

print_dir=0 check=0
for a in "$@"; do
	case $a in
	--print-bin-dir) print_dir=1 ;;
	--check) check=1 ;;
	-h | --help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "build-kind: unknown argument '$a'" >&2; exit 2 ;;
	esac
done

log() { echo "build-kind: $*" >&2; }
die() { log "error: $*"; exit 1; }

command -v go >/dev/null || die "go not found in PATH (needs Go >= 1.26 for flannel $FLANNEL_VERSION)"
go_version=$(go env GOVERSION)

stamp_of() { # NAME
	local v
	case $1 in
	kind) v=$KIND_VERSION ;;
	coredns) v=$COREDNS_VERSION ;;
	flanneld) v="$FLANNEL_VERSION-no-tencentvpc cgo=1-static" ;;
	install-conf) v=$FLANNEL_VERSION ;;
	crictl) v=$CRICTL_VERSION ;;
	kindnetd) v=$KINDNETD_TAG ;;
	flannel) v=$FLANNEL_CNI_REF ;;
	esac
	echo "$1=$v go=$go_version cgo=0 flags=-trimpath,-s,-w"
}
up_to_date() { [ -x "$bin/$1" ] && [ "$(cat "$bin/.stamp-$1" 2>/dev/null)" = "$(stamp_of "$1")" ]; }
needs() {
	need=()
	local p
	for p in "${PROGS[@]}"; do up_to_date "$p" || need+=("$p"); done
}
wants() { local p; for p in "${need[@]}"; do [ "$p" = "$1" ] && return 0; done; return 1; }

needs
if [ "$check" -eq 1 ]; then
	[ "$print_dir" -eq 0 ] || echo "$bin"
	[ ${#need[@]} -eq 0 ] && "$top/hack/build-k8s.sh" --extra kubeadm --extra kube-proxy --check && exit 0
	log "not built or out of date in $bin: ${need[*]}"
	exit 1
fi

mkdir -p "$bin" "$src"
if [ ${#need[@]} -ne 0 ]; then
	exec 9>"$root/.build-lock"
	flock 9
	needs
fi

export GOFLAGS="-mod=mod -buildvcs=false"
export CGO_ENABLED=0
export GOTOOLCHAIN=${GOTOOLCHAIN:-local}
export GOMAXPROCS=${AIQOS_KIND_GOMAXPROCS:-1}
t0=$(date +%s)

# A writable copy of a module from the proxy (its own go.mod and replaces apply).
module_src() { # MODULE VERSION DIR
	local dir=$3 info moddir
	if [ ! -f "$dir/.complete" ]; then
		info=$(cd "$src" && go mod download -json "$1@$2") || die "cannot download $1@$2 from the Go module proxy"
		moddir=$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p' <<<"$info")
		[ -d "$moddir" ] || die "no source directory for $1@$2 in: $info"
		rm -rf "$dir"
		cp -r "$moddir" "$dir"
		chmod -R u+w "$dir"
		touch "$dir/.complete"
	fi
}

# A source tree from git at REF (a bare clone cached under src/, fetched once).
git_src() { # URL REF SUBDIR DIR
	local url=$1 ref=$2 sub=$3 dir=$4 bare
	bare=$src/$(basename "$url" .git).git
	if [ ! -f "$dir/.complete" ]; then
		if ! git -C "$bare" rev-parse -q --verify "$ref^{commit}" >/dev/null 2>&1; then
			rm -rf "$bare"
			git clone -q --bare "$url" "$bare" || die "cannot clone $url (set AIQOS_KIND_GIT / AIQOS_FLANNEL_CNI_GIT to a local clone)"
		fi
		rm -rf "$dir"
		mkdir -p "$dir"
		git -C "$bare" archive "$ref" ${sub:+"$sub"} | tar -x -C "$dir" ${sub:+--strip-components=$(($(tr -cd / <<<"$sub" | wc -c) + 1))} ||
			die "no $ref${sub:+:$sub} in $url"
		touch "$dir/.complete"
	fi
}

gobuild() { # DIR OUT PKG [LDFLAGS]
	local dir=$1 out=$2 pkg=$3 ld="-s -w ${4:-}"
	log "building $(basename "$out") ($pkg, $go_version, -p 1, GOMAXPROCS=$GOMAXPROCS)"
	(cd "$dir" && go build -p 1 -trimpath -ldflags "$ld" -o "$out.tmp" "$pkg") || die "go build of $pkg failed (source in $dir)"
	mv -f "$out.tmp" "$out"
	stamp_of "$(basename "$out")" >"$bin/.stamp-$(basename "$out")"
}

if wants kind; then
	module_src sigs.k8s.io/kind "$KIND_VERSION" "$src/kind-$KIND_VERSION"
	gobuild "$src/kind-$KIND_VERSION" "$bin/kind" .
	"$bin/kind" version | grep -q "kind $KIND_VERSION " || die "$bin/kind does not report $KIND_VERSION: $("$bin/kind" version)"
fi
if wants coredns; then
	module_src github.com/coredns/coredns "$COREDNS_VERSION" "$src/coredns-$COREDNS_VERSION"
	gobuild "$src/coredns-$COREDNS_VERSION" "$bin/coredns" . "-X github.com/coredns/coredns/coremain.GitCommit=$COREDNS_VERSION"
fi
if wants flanneld || wants install-conf; then
	module_src github.com/flannel-io/flannel "$FLANNEL_VERSION" "$src/flannel-$FLANNEL_VERSION"
	sed -i '\|"github.com/flannel-io/flannel/pkg/backend/tencentvpc"|d' "$src/flannel-$FLANNEL_VERSION/main.go"
	# As upstream's Makefile on amd64: cgo (the UDP backend), linked statically.
	CGO_ENABLED=1 gobuild "$src/flannel-$FLANNEL_VERSION" "$bin/flanneld" . \
		"-X github.com/flannel-io/flannel/pkg/version.Version=$FLANNEL_VERSION -extldflags \"-static\""
	gobuild "$src/flannel-$FLANNEL_VERSION" "$bin/install-conf" ./cmd/install_conf
fi
if wants crictl; then
	module_src sigs.k8s.io/cri-tools "$CRICTL_VERSION" "$src/cri-tools-$CRICTL_VERSION"
	gobuild "$src/cri-tools-$CRICTL_VERSION" "$bin/crictl" ./cmd/crictl "-X sigs.k8s.io/cri-tools/pkg/version.Version=$CRICTL_VERSION"
fi
if wants kindnetd; then
	git_src "$KIND_GIT" "$KINDNETD_COMMIT" images/kindnetd "$src/kindnetd-$KINDNETD_TAG"
	gobuild "$src/kindnetd-$KINDNETD_TAG" "$bin/kindnetd" ./cmd/kindnetd
fi
if wants flannel; then
	git_src "$FLANNEL_CNI_GIT" "$FLANNEL_CNI_REF" "" "$src/flannel-cni-$FLANNEL_CNI_REF"
	gobuild "$src/flannel-cni-$FLANNEL_CNI_REF" "$bin/flannel" . "-X main.Version=$FLANNEL_CNI_REF"
fi

# kubeadm and kube-proxy: the Kubernetes build's cache and lock.
AIQOS_BUILD_JOBS=${AIQOS_BUILD_JOBS:-1} "$top/hack/build-k8s.sh" --extra kubeadm --extra kube-proxy >&2 || die "hack/build-k8s.sh --extra kubeadm --extra kube-proxy failed"

[ ${#need[@]} -eq 0 ] && log "cached: $bin (kind $KIND_VERSION, coredns $COREDNS_VERSION, flannel $FLANNEL_VERSION, kindnetd $KINDNETD_TAG)" ||
	log "built ${need[*]} in $(($(date +%s) - t0)) s: $bin"
[ "$print_dir" -eq 0 ] || echo "$bin"
