#!/usr/bin/env bash
# hack/kind-docker.sh start|stop|status|env
# A Docker engine of its own for the kind runs (make kind-e2e): Debian's
# dockerd (package docker.io, hack/install-deps.sh --kind) with every byte of
# its state under ${AIQOS_CACHE:-/var/cache/aiqos}/kind/docker, its socket at
# /run/aiqos-kind/docker.sock (export DOCKER_HOST, see `env`), so it neither
# uses nor disturbs another dockerd on the machine. No systemd needed.
#
#   start   starts it (idempotent; waits until `docker info` answers)
#   stop    stops the dockerd this script started (its pidfile), waits
#   status  exit 0 if it answers
#   env     prints `export DOCKER_HOST=...` and the PATH with Debian's docker CLI
#
# Its default runtime is hack/lib/kind-runc (copied under the cache): runc
# with the capabilities the machine's bounding set lacks removed from the OCI
# spec, because `docker run --privileged` (every kind node) otherwise fails
# with "unable to apply caps: operation not permitted" where root's bounding
# set lacks CAP_SYS_RESOURCE. The engine leaves the host's firewall alone
# (iptables and ip-forward off: the kind network is a plain bridge, the API
# server is published on 127.0.0.1 by docker-proxy).
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cache=${AIQOS_CACHE:-/var/cache/aiqos}/kind
root=$cache/docker
run=/run/aiqos-kind
sock=$run/docker.sock
pidfile=$run/dockerd.pid
log=$cache/dockerd.log

die() { echo "kind-docker: error: $*" >&2; exit 1; }

env_lines() {
	echo "export DOCKER_HOST=unix://$sock"
	# Debian's CLI (same release as the daemon) ahead of any other docker on PATH.
	echo "export PATH=$cache/cli:\$PATH"
}

answers() { DOCKER_HOST=unix://$sock "$cache/cli/docker" info >/dev/null 2>&1; }

start() {
	[ "$(id -u)" -eq 0 ] || die "needs root"
	for c in dockerd containerd runc python3; do
		command -v "$c" >/dev/null || die "'$c' not found (hack/install-deps.sh --kind installs docker.io)"
	done
	[ -x /usr/bin/docker ] || die "/usr/bin/docker missing (package docker.io)"
	mkdir -p "$root" "$run" "$cache/cli" "$cache/bin"
	ln -sfn /usr/bin/docker "$cache/cli/docker"
	install -m 0755 "$top/hack/lib/kind-runc" "$cache/bin/kind-runc"
	if answers; then
		echo "kind-docker: running ($sock)" >&2
		return
	fi
	cat >"$cache/daemon.json" <<JSON
{
  "data-root": "$root",
  "exec-root": "$run/exec",
  "pidfile": "$pidfile",
  "hosts": ["unix://$sock"],
  "storage-driver": "overlay2",
  "iptables": false,
  "ip-forward": false,
  "ip-masq": false,
  "bridge": "none",
  "runtimes": { "kind-runc": { "path": "$cache/bin/kind-runc" } },
  "default-runtime": "kind-runc",
  "log-driver": "json-file",
  "log-opts": { "max-size": "10m" }
}
JSON
	echo "kind-docker: starting dockerd (data $root, log $log)" >&2
	setsid dockerd --config-file "$cache/daemon.json" >>"$log" 2>&1 </dev/null &
	for _ in $(seq 1 60); do
		answers && { echo "kind-docker: running ($sock)" >&2; return; }
		sleep 0.5
	done
	tail -n 20 "$log" >&2
	die "dockerd did not answer on $sock within 30 s (log: $log)"
}

stop() {
	[ -f "$pidfile" ] || { echo "kind-docker: not running" >&2; return; }
	local pid
	pid=$(cat "$pidfile")
	if kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid"
		for _ in $(seq 1 60); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.5
		done
		kill -0 "$pid" 2>/dev/null && die "dockerd ($pid) still running 30 s after SIGTERM"
	fi
	rm -f "$pidfile"
	echo "kind-docker: stopped" >&2
}

case ${1:-} in
start) start ;;
stop) stop ;;
status) answers ;;
env) env_lines ;;
-h | --help | "") sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; [ -n "${1:-}" ] ;;
*) die "unknown command '$1' (start|stop|status|env)" ;;
esac
