#!/usr/bin/env bash
# Install every Debian package that building, testing and the lab need.
# Idempotent: installs only what is missing; safe to run on every `make test`.
# --kind: also what `make kind-e2e` needs (not part of `make test`): Debian's
# Docker engine (docker.io; hack/kind-docker.sh runs it), mmdebstrap (the kind
# node image's root filesystem, hack/kind-node-image.sh) and git (kindnetd's
# and Flannel's CNI plugin's sources, hack/build-kind.sh).
set -euo pipefail

kind=0
case ${1:-} in
--kind) kind=1 ;;
"") ;;
*) echo "install-deps: unknown argument '$1' (--kind)" >&2; exit 2 ;;
esac

PKGS=(
	# build
	build-essential dpkg-dev pkg-config clang lld llvm
	libclang-rt-dev # libFuzzer and the sanitizers' runtimes for clang (make fuzz)
	libnl-3-dev libnl-route-3-dev libcjson-dev libcurl4-openssl-dev
	libsystemd-dev libyaml-dev libmicrohttpd-dev
	# the BPF programs: clang -target bpf, bpftool gen skeleton, libbpf (static)
	libbpf-dev bpftool
	# lint
	clang-tidy clang-format cppcheck shellcheck
	# tests and lab
	iproute2 ethtool jq procps psmisc util-linux kmod
	containernetworking-plugins iperf3 sockperf gnuplot-nox
	nginx-light # the lab's real HTTP server (test/bench/httpload.py)
	python3 python3-pytest valgrind
	python3-venv # the venv of the token streams' HTTP/SSE stack (hack/install-sse.sh)
	python3-seccomp systemd # the agent under its unit's syscall filter (test_agent_bpf_sandbox.py)
	# the real control plane (hack/build-k8s.sh needs Go >= 1.24, not a Debian package here)
	openssl curl
	# the monitoring suite: promtool (check/test rules, check metrics), a real Prometheus
	prometheus python3-yaml
	# the node e2e (hack/e2e-node.sh): the container runtime, the pods' busybox,
	# iptables for the portmap plugin of the kindnet-like chain
	containerd runc busybox-static iptables
)
[ "$kind" -eq 0 ] || PKGS+=(docker.io mmdebstrap git)

missing=()
for p in "${PKGS[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
	echo "install-deps: all ${#PKGS[@]} packages present"
	exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
	echo "install-deps: missing packages: ${missing[*]}" >&2
	echo "install-deps: run as root to install them" >&2
	exit 1
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
