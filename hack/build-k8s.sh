#!/usr/bin/env bash
# hack/build-k8s.sh [--force] [--print-bin-dir] [--check] [--extra NAME ...]
# Builds the real Kubernetes control plane and node binaries (kube-apiserver,
# kube-controller-manager, kube-scheduler, kubelet, and a kubectl of the same
# version) from the k8s.io/kubernetes Go module and etcd from
# go.etcd.io/etcd/server/v3, at pinned versions, into a cache outside the
# repository:
#
#   ${AIQOS_CACHE:-/var/cache/aiqos}/k8s/<k8s version>/bin/{kube-apiserver,...,etcd}
#
# A binary is rebuilt only when it is missing, its stamp (versions, Go version,
# build flags) differs, or its --version output is not the pinned version, so a
# second run costs a few hundred milliseconds. Concurrent runs serialize on a
# lock. --print-bin-dir prints the bin directory (and builds if needed) on stdout;
# everything else goes to stderr. --check builds nothing: exit 0 if every binary
# is built and current, 1 if not (with --print-bin-dir it still prints the dir).
# --extra NAME adds a k8s.io/kubernetes/cmd/NAME program (kubeadm, kube-proxy:
# the kind node image, hack/build-kind.sh) to the set built and checked.
#
# Why these versions (see test/k8s/README.md): Kubernetes 1.34 is the newest
# minor whose kubelet still starts on a cgroup v1 host by default
# (failCgroupV1 defaults to false up to 1.34, true from 1.35) and that still
# falls back to its own cgroupDriver with a containerd 1.x runtime (no
# RuntimeConfig RPC). etcd 3.6.5 is what Kubernetes 1.34 is tested with
# (hack/lib/etcd.sh, kubeadm's default); Debian's etcd 3.4.23 is below kubeadm's
# minimum external etcd (3.5.24).
set -euo pipefail

K8S_VERSION=${AIQOS_K8S_VERSION:-v1.34.4}
ETCD_VERSION=${AIQOS_ETCD_VERSION:-v3.6.5}
CACHE=${AIQOS_CACHE:-/var/cache/aiqos}
JOBS=${AIQOS_BUILD_JOBS:-$(nproc)}
K8S_BINS=(kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl)
# Upstream's release flags (hack/lib/golang.sh): static, stripped, trimmed,
# tags selinux,notest,grpcnotrace.
TAGS=selinux,notest,grpcnotrace

force=0 print_dir=0 check=0
while [ $# -gt 0 ]; do
	case $1 in
	--force) force=1 ;;
	--print-bin-dir) print_dir=1 ;;
	--check) check=1 ;;
	--extra)
		case ${2:-} in
		kubeadm | kube-proxy) K8S_BINS+=("$2") ;;
		*) echo "build-k8s: --extra '${2:-}' is not kubeadm or kube-proxy" >&2; exit 2 ;;
		esac
		shift
		;;
	-h | --help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "build-k8s: unknown argument '$1'" >&2; exit 2 ;;
	esac
	shift
done

log() { echo "build-k8s: $*" >&2; }
die() { log "error: $*"; exit 1; }

[[ $K8S_VERSION =~ ^v1\.([0-9]+)\.([0-9]+)$ ]] || die "AIQOS_K8S_VERSION '$K8S_VERSION' is not vMAJOR.MINOR.PATCH (v1.34.4)"
k8s_minor=${BASH_REMATCH[1]}
k8s_patch=${BASH_REMATCH[2]}
staging_version=v0.${k8s_minor}.${k8s_patch}
[[ $ETCD_VERSION =~ ^v3\.[0-9]+\.[0-9]+$ ]] || die "AIQOS_ETCD_VERSION '$ETCD_VERSION' is not v3.MINOR.PATCH (v3.6.5)"

command -v go >/dev/null || die "go not found in PATH (needs Go >= 1.24)"
go_version=$(go env GOVERSION)

root=$CACHE/k8s/$K8S_VERSION
bin=$root/bin

# The stamp says how a binary was built; any change rebuilds it.
stamp_of() { # NAME
	case $1 in
	etcd) echo "etcd=$ETCD_VERSION go=$go_version cgo=0 flags=-trimpath,-s,-w" ;;
	*) echo "k8s=$K8S_VERSION go=$go_version cgo=0 tags=$TAGS flags=-trimpath,-s,-w" ;;
	esac
}

version_ok() { # NAME: the binary runs and reports the pinned version
	local name=$1 out
	case $name in
	kubectl) out=$("$bin/$name" version --client 2>&1) || return 1 ;;
	kubeadm) out=$("$bin/$name" version -o short 2>&1) || return 1 ;;
	*) out=$("$bin/$name" --version 2>&1) || return 1 ;;
	esac
	case $name in
	etcd) grep -qx "etcd Version: ${ETCD_VERSION#v}" <<<"$out" ;;
	kubectl) grep -qx "Client Version: $K8S_VERSION" <<<"$out" ;;
	kubeadm) grep -qx "$K8S_VERSION" <<<"$out" ;;
	*) grep -qx "Kubernetes $K8S_VERSION" <<<"$out" ;;
	esac
}

up_to_date() { # NAME
	local name=$1
	[ "$force" -eq 0 ] || return 1
	[ -x "$bin/$name" ] && [ -f "$bin/.stamp-$name" ] || return 1
	[ "$(cat "$bin/.stamp-$name")" = "$(stamp_of "$name")" ] || return 1
	version_ok "$name"
}

compute_needs() {
	local b
	need_k8s=()
	for b in "${K8S_BINS[@]}"; do up_to_date "$b" || need_k8s+=("$b"); done
	need_etcd=0
	up_to_date etcd || need_etcd=1
}
compute_needs

if [ "$check" -eq 1 ]; then
	[ "$print_dir" -eq 0 ] || echo "$bin"
	if [ ${#need_k8s[@]} -eq 0 ] && [ "$need_etcd" -eq 0 ]; then exit 0; fi
	missing=("${need_k8s[@]}")
	[ "$need_etcd" -eq 0 ] || missing+=(etcd)
	log "not built or out of date in $bin: ${missing[*]} (run hack/build-k8s.sh)"
	exit 1
fi

if [ ${#need_k8s[@]} -ne 0 ] || [ "$need_etcd" -ne 0 ]; then
	# Builds serialize on one lock per version directory; a build that finished
	# while we waited leaves nothing to do.
	mkdir -p "$bin" "$root/src"
	exec 9>"$root/.lock"
	flock 9
	compute_needs
fi

if [ ${#need_k8s[@]} -eq 0 ] && [ "$need_etcd" -eq 0 ]; then
	log "cached: $bin (kubernetes $K8S_VERSION, etcd $ETCD_VERSION, $go_version)"
	[ "$print_dir" -eq 0 ] || echo "$bin"
	exit 0
fi

export GOFLAGS="-mod=mod -buildvcs=false"
export CGO_ENABLED=0
# The machine's Go is newer than both modules' go lines; never switch toolchains.
export GOTOOLCHAIN=${GOTOOLCHAIN:-local}

tmp=$(mktemp -d "$root/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
t0=$(date +%s)

# go.mod.in is the generated wrapper module; go build -mod=mod then adds the
# requirements it resolves to go.mod/go.sum. A changed template starts over.
use_template() { # SRC_DIR
	local src=$1
	if cmp -s "$src/go.mod.in.new" "$src/go.mod.in" && [ -f "$src/go.mod" ]; then
		rm -f "$src/go.mod.in.new"
		return
	fi
	mv "$src/go.mod.in.new" "$src/go.mod.in"
	cp "$src/go.mod.in" "$src/go.mod"
	rm -f "$src/go.sum"
}

# --- kubernetes -------------------------------------------------------------
build_k8s() {
	local src=$root/src/kubernetes modinfo gomod go_line godebug build_date
	mkdir -p "$src"
	log "fetching k8s.io/kubernetes@$K8S_VERSION"
	modinfo=$(cd "$src" && GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$K8S_VERSION") ||
		die "cannot download k8s.io/kubernetes@$K8S_VERSION from the Go module proxy"
	gomod=$(sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p' <<<"$modinfo")
	[ -f "$gomod" ] || die "no go.mod for k8s.io/kubernetes@$K8S_VERSION in: $modinfo"
	go_line=$(grep -m1 -E '^go [0-9.]+$' "$gomod")
	godebug=$(grep -E '^godebug ' "$gomod" || true)

	# The published module's replace directives point into ./staging, which is
	# not part of the module zip: pin every staging module to its published tag.
	{
		echo "// Generated by aiqos hack/build-k8s.sh: builds k8s.io/kubernetes $K8S_VERSION."
		echo "module aiqos.invalid/k8s-build"
		echo
		echo "$go_line"
		[ -z "$godebug" ] || { echo; echo "$godebug"; }
		echo
		echo "require k8s.io/kubernetes $K8S_VERSION"
		echo
		echo "replace ("
		grep -E '^[[:space:]]*k8s\.io/[a-z0-9-]+ => \./staging/src/k8s\.io/[a-z0-9-]+$' "$gomod" |
			awk -v v="$staging_version" '{ printf "\t%s => %s %s\n", $1, $1, v }'
		echo ")"
	} >"$src/go.mod.in.new"
	grep -q "k8s.io/client-go => k8s.io/client-go $staging_version" "$src/go.mod.in.new" ||
		die "could not derive the staging replace list from $gomod"
	use_template "$src"

	# Reproducible build date: the module's publication time.
	build_date=$(sed -n 's/.*"Time":"\([^"]*\)".*/\1/p' "${gomod%.mod}.info" 2>/dev/null || true)
	[ -n "$build_date" ] || build_date=1970-01-01T00:00:00Z
	local ld="-s -w" k
	for k in "gitVersion=$K8S_VERSION" "gitMajor=1" "gitMinor=$k8s_minor" "gitTreeState=clean" "buildDate=$build_date"; do
		ld+=" -X k8s.io/component-base/version.$k -X k8s.io/client-go/pkg/version.$k"
	done

	local pkgs=() b
	for b in "${need_k8s[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$b"); done
	log "building ${need_k8s[*]} (kubernetes $K8S_VERSION, $go_version, -p $JOBS)"
	mkdir -p "$tmp/k8s"
	(cd "$src" && go build -p "$JOBS" -trimpath -tags "$TAGS" -ldflags "$ld" -o "$tmp/k8s/" "${pkgs[@]}") ||
		die "go build of ${need_k8s[*]} failed (source module in $src)"
	for b in "${need_k8s[@]}"; do
		mv -f "$tmp/k8s/$b" "$bin/$b"
		stamp_of "$b" >"$bin/.stamp-$b"
		version_ok "$b" || die "$bin/$b does not report version $K8S_VERSION: $("$bin/$b" --version 2>&1 | head -n 3)"
	done
}

# --- etcd ---------------------------------------------------------------------
build_etcd() {
	local src=$root/src/etcd ld="-s -w"
	mkdir -p "$src"
	{
		echo "// Generated by aiqos hack/build-k8s.sh: builds etcd $ETCD_VERSION."
		echo "module aiqos.invalid/etcd-build"
		echo
		echo "go 1.24"
		echo
		echo "require ("
		for m in server/v3 api/v3 client/pkg/v3 client/v3 pkg/v3; do
			printf '\tgo.etcd.io/etcd/%s %s\n' "$m" "$ETCD_VERSION"
		done
		echo ")"
	} >"$src/go.mod.in.new"
	use_template "$src"
	log "building etcd $ETCD_VERSION ($go_version)"
	mkdir -p "$tmp/etcd"
	(cd "$src" && go build -p "$JOBS" -trimpath -ldflags "$ld" -o "$tmp/etcd/etcd" go.etcd.io/etcd/server/v3) ||
		die "go build of etcd failed (source module in $src)"
	mv -f "$tmp/etcd/etcd" "$bin/etcd"
	stamp_of etcd >"$bin/.stamp-etcd"
	version_ok etcd || die "$bin/etcd does not report version $ETCD_VERSION: $("$bin/etcd" --version 2>&1 | head -n 3)"
}

[ ${#need_k8s[@]} -eq 0 ] || build_k8s
[ "$need_etcd" -eq 0 ] || build_etcd

log "built in $(($(date +%s) - t0)) s: $bin ($(du -sh "$bin" | cut -f1))"
[ "$print_dir" -eq 0 ] || echo "$bin"
