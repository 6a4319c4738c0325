#!/usr/bin/env bash
# hack/control-plane.sh COMMAND [ARGS]
# Runs a real Kubernetes control plane (etcd + kube-apiserver, optionally
# kube-controller-manager + kube-scheduler) on 127.0.0.1 for tests, with
# binaries from hack/build-k8s.sh and a throwaway PKI made with the openssl CLI.
#
# Commands:
#   start [--with-controllers]   start (idempotent: a healthy running plane is kept)
#   stop                         kill what start started, unmount and remove the dir
#   status                       exit 0 if every started component is alive and ready
#   env                          print `export K=V` lines (KUBECONFIG, server URL, ...)
#   restart COMPONENT            restart one component (apiserver: a fresh watch cache)
#   compact                      compact etcd at its current revision; prints it
#   token NAMESPACE SA [OUT]     mint a ServiceAccount token (TokenRequest API); with
#                                OUT, write a kubeconfig for that identity there
#   node-kubeconfig NODE OUT     client cert system:node:NODE (group system:nodes)
#
# Environment:
#   AIQOS_CP_DIR                 state dir (default /tmp/aiqos-cp); must be absolute
#   AIQOS_CP_CONTROLLERS=1       same as --with-controllers
#   AIQOS_CP_APISERVER_PORT      secure port (default 0: a free port)
#   AIQOS_CP_COMPACTION_INTERVAL kube-apiserver --etcd-compaction-interval (default 5m; 0 = off)
#   AIQOS_CP_SERVICE_CIDR        --service-cluster-ip-range (default 10.96.0.0/16)
#   AIQOS_CP_APISERVER_ARGS      extra kube-apiserver flags (space separated)
#   AIQOS_CP_TOKEN_SECONDS       token lifetime (default 3600)
#   AIQOS_CP_KEEP=1              stop keeps the dir (logs, etcd data) for debugging
#   AIQOS_K8S_BIN                binary dir (default: hack/build-k8s.sh --print-bin-dir)
#
# Files in the dir: admin.kubeconfig (O=system:masters), cp.env (KEY=VALUE, the same
# as `env`), pki/, logs/<component>.log, run/<component>.{pid,args}, etcd/.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
DIR=${AIQOS_CP_DIR:-/tmp/aiqos-cp}
MARKER=.aiqos-control-plane
SERVICE_CIDR=${AIQOS_CP_SERVICE_CIDR:-10.96.0.0/16}
COMPACTION=${AIQOS_CP_COMPACTION_INTERVAL:-5m}
TOKEN_SECONDS=${AIQOS_CP_TOKEN_SECONDS:-3600}
ALL_COMPONENTS=(etcd apiserver controller-manager scheduler)

log() { echo "control-plane: $*" >&2; }
die() { log "error: $*"; exit 1; }

case $DIR in
/*) ;;
*) die "AIQOS_CP_DIR '$DIR' must be an absolute path" ;;
esac
[[ $DIR =~ ^[A-Za-z0-9/._-]+$ ]] || die "AIQOS_CP_DIR '$DIR' may only contain letters, digits and / . _ -"
[ "$DIR" != / ] || die "AIQOS_CP_DIR may not be /"
PKI=$DIR/pki RUN=$DIR/run LOGS=$DIR/logs

need_cmd() { command -v "$1" >/dev/null || die "'$1' not found (hack/install-deps.sh installs it)"; }

bin_dir() {
	if [ -n "${AIQOS_K8S_BIN:-}" ]; then
		echo "$AIQOS_K8S_BIN"
	else
		"$top/hack/build-k8s.sh" --print-bin-dir
	fi
}

# --- state ------------------------------------------------------------------

# cp.env holds KEY=VALUE lines; values never contain spaces or quotes.
env_get() { # KEY
	[ -f "$DIR/cp.env" ] || return 1
	sed -n "s/^$1=//p" "$DIR/cp.env" | tail -n 1
}

pid_of() { # COMPONENT: prints the pid if that process is alive and still ours
	local c=$1 pid exe want
	[ -f "$RUN/$c.pid" ] || return 1
	pid=$(cat "$RUN/$c.pid")
	[[ $pid =~ ^[0-9]+$ ]] || return 1
	exe=$(readlink "/proc/$pid/exe" 2>/dev/null) || return 1
	want=$(readlink -f "$(sed -n 1p "$RUN/$c.args")")
	[ "${exe% (deleted)}" = "$want" ] || return 1
	echo "$pid"
}

# A process that exists and is not a zombie (our own children become zombies
# until this script exits).
alive() { # PID
	local st
	st=$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null) || return 1
	[ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]
}

started_components() {
	local c
	for c in "${ALL_COMPONENTS[@]}"; do [ -f "$RUN/$c.args" ] && echo "$c"; done
	return 0
}

# --- ports, PKI, kubeconfigs ----------------------------------------------------

free_ports() { # N: N distinct free TCP ports on 127.0.0.1
	python3 - "$1" <<'EOF'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
EOF
}

first_service_ip() {
	python3 -c 'import ipaddress, sys; print(ipaddress.ip_network(sys.argv[1], strict=False)[1])' "$1" ||
		die "AIQOS_CP_SERVICE_CIDR '$1' is not a CIDR"
}

genkey() { (umask 077 && openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null); }

mkcert() { # NAME CN EKU SAN(or "") [O]
	local name=$1 cn=$2 eku=$3 san=$4 org=${5:-} tmp
	tmp=$(mktemp -d)
	genkey "$PKI/$name.key"
	{
		printf '[req]\ndistinguished_name = dn\nprompt = no\n[dn]\n'
		[ -z "$org" ] || printf 'O = %s\n' "$org"
		printf 'CN = %s\n' "$cn"
	} >"$tmp/req.cnf"
	{
		printf 'basicConstraints = critical,CA:FALSE\n'
		printf 'keyUsage = critical,digitalSignature,keyEncipherment\n'
		printf 'extendedKeyUsage = %s\n' "$eku"
		printf 'subjectKeyIdentifier = hash\n'
		printf 'authorityKeyIdentifier = keyid,issuer\n'
		[ -z "$san" ] || printf 'subjectAltName = %s\n' "$san"
	} >"$tmp/ext.cnf"
	openssl req -new -sha256 -config "$tmp/req.cnf" -key "$PKI/$name.key" -out "$tmp/req.csr"
	openssl x509 -req -sha256 -days 30 -in "$tmp/req.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" \
		-set_serial "0x$(openssl rand -hex 16)" -extfile "$tmp/ext.cnf" -out "$PKI/$name.crt" 2>/dev/null
	rm -rf "$tmp"
}

make_pki() {
	local svc_ip=$1 tmp
	mkdir -p "$PKI"
	tmp=$(mktemp -d)
	genkey "$PKI/ca.key"
	printf '[req]\ndistinguished_name = dn\nprompt = no\n[dn]\nCN = aiqos-test-kubernetes-ca\n[v3_ca]\nbasicConstraints = critical,CA:TRUE\nkeyUsage = critical,keyCertSign,cRLSign,digitalSignature\nsubjectKeyIdentifier = hash\n' >"$tmp/ca.cnf"
	openssl req -x509 -new -sha256 -days 30 -config "$tmp/ca.cnf" -extensions v3_ca \
		-key "$PKI/ca.key" -out "$PKI/ca.crt"
	rm -rf "$tmp"
	mkcert apiserver kube-apiserver serverAuth \
		"IP:127.0.0.1,IP:::1,IP:$svc_ip,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
	mkcert apiserver-kubelet-client kube-apiserver-kubelet-client clientAuth "" system:masters
	mkcert admin aiqos-admin clientAuth "" system:masters
	mkcert controller-manager system:kube-controller-manager clientAuth ""
	mkcert scheduler system:kube-scheduler clientAuth ""
	# Service-account token signing pair.
	(umask 077 && openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$PKI/sa.key" 2>/dev/null)
	openssl pkey -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub"
}

write_kubeconfig() { # OUT USER then either: cert CERT KEY | token TOKEN
	local out=$1 user=$2 kind=$3 server
	server=$(env_get AIQOS_CP_SERVER) || die "control plane not started (no $DIR/cp.env)"
	{
		echo "apiVersion: v1"
		echo "kind: Config"
		echo "clusters:"
		echo "- name: aiqos-test"
		echo "  cluster:"
		echo "    server: $server"
		echo "    certificate-authority: $PKI/ca.crt"
		echo "users:"
		echo "- name: $user"
		echo "  user:"
		case $kind in
		cert)
			echo "    client-certificate: $4"
			echo "    client-key: $5"
			;;
		token) echo "    token: $4" ;;
		esac
		echo "contexts:"
		echo "- name: aiqos-test"
		echo "  context:"
		echo "    cluster: aiqos-test"
		echo "    user: $user"
		echo "current-context: aiqos-test"
	} >"$out.tmp"
	chmod 600 "$out.tmp"
	mv "$out.tmp" "$out"
}

# --- processes ------------------------------------------------------------------

# run/<c>.args: line 1 the binary, then one argument per line.
launch() { # COMPONENT
	local c=$1 exe
	local -a args
	mapfile -t args <"$RUN/$c.args"
	exe=${args[0]}
	args=("${args[@]:1}")
	setsid "$exe" "${args[@]}" >>"$LOGS/$c.log" 2>&1 </dev/null &
	echo $! >"$RUN/$c.pid"
}

write_args() { # COMPONENT EXE ARGS...
	local c=$1
	shift
	printf '%s\n' "$@" >"$RUN/$c.args"
}

wait_ready() { # COMPONENT SECONDS
	local c=$1 secs=$2 i
	local pid
	pid=$(cat "$RUN/$c.pid")
	for ((i = 0; i < secs * 5; i++)); do
		if ! alive "$pid"; then
			log "$c exited; last log lines:"
			tail -n 25 "$LOGS/$c.log" >&2 || true
			return 1
		fi
		if probe "$c"; then return 0; fi
		sleep 0.2
	done
	log "$c not ready after ${secs}s; last log lines:"
	tail -n 25 "$LOGS/$c.log" >&2 || true
	return 1
}

probe() { # COMPONENT: one readiness check
	local c=$1
	case $c in
	etcd)
		curl -fsS --max-time 2 "$(env_get AIQOS_CP_ETCD)/health" 2>/dev/null | grep -q '"health":"true"'
		;;
	apiserver)
		[ "$(curl -sS --max-time 3 --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" \
			"$(env_get AIQOS_CP_SERVER)/readyz" 2>/dev/null)" = ok ]
		;;
	controller-manager | scheduler)
		local port
		port=$(env_get "AIQOS_CP_$(tr a-z- A-Z_ <<<"$c")_PORT")
		[ "$(curl -sS --max-time 2 -k "https://127.0.0.1:$port/healthz" 2>/dev/null)" = ok ]
		;;
	esac
}

kill_component() { # COMPONENT
	local c=$1 pid i
	pid=$(pid_of "$c") || { rm -f "$RUN/$c.pid"; return 0; }
	kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < 100; i++)); do
		alive "$pid" || break
		sleep 0.1
	done
	if alive "$pid"; then
		log "$c (pid $pid) ignored SIGTERM for 10 s; sending SIGKILL"
		kill -KILL "$pid" 2>/dev/null || true
		for ((i = 0; i < 50; i++)); do alive "$pid" || break; sleep 0.1; done
	fi
	rm -f "$RUN/$c.pid"
}

# --- commands -------------------------------------------------------------------

cmd_status() {
	local c ok=0 any=0
	for c in $(started_components); do
		any=1
		if ! pid_of "$c" >/dev/null; then
			log "$c: not running"
			ok=1
		elif ! probe "$c"; then
			log "$c: running, not ready"
			ok=1
		fi
	done
	[ "$any" -eq 1 ] || { log "not started in $DIR"; return 1; }
	return "$ok"
}

cmd_start() {
	local controllers=${AIQOS_CP_CONTROLLERS:-0}
	while [ $# -gt 0 ]; do
		case $1 in
		--with-controllers) controllers=1 ;;
		*) die "start: unknown argument '$1'" ;;
		esac
		shift
	done
	case $controllers in
	0 | 1) ;;
	*) die "AIQOS_CP_CONTROLLERS '$controllers' must be 0 or 1" ;;
	esac
	if ! [[ ${AIQOS_CP_APISERVER_PORT:-0} =~ ^[0-9]+$ ]] || [ "${AIQOS_CP_APISERVER_PORT:-0}" -gt 65535 ]; then
		die "AIQOS_CP_APISERVER_PORT '${AIQOS_CP_APISERVER_PORT}' is not a port number"
	fi
	need_cmd openssl
	need_cmd curl
	need_cmd python3

	if [ -f "$DIR/$MARKER" ]; then
		local have_cm=0
		[ -f "$RUN/controller-manager.args" ] && have_cm=1
		if [ "$have_cm" = "$controllers" ] && cmd_status 2>/dev/null; then
			log "already running in $DIR"
			return 0
		fi
		log "stale or different control plane in $DIR: stopping it first"
		cmd_stop
	elif [ -e "$DIR" ] && [ -n "$(ls -A "$DIR" 2>/dev/null)" ]; then
		die "$DIR exists, is not empty and is not a control-plane dir (no $MARKER)"
	fi

	local bin
	bin=$(bin_dir) || die "Kubernetes binaries are not available (hack/build-k8s.sh)"
	for b in etcd kube-apiserver; do [ -x "$bin/$b" ] || die "$bin/$b missing (run hack/build-k8s.sh)"; done

	mkdir -p "$DIR"
	chmod 700 "$DIR"
	mkdir -p "$RUN" "$LOGS"
	mkdir -m 700 "$DIR/etcd"
	touch "$DIR/$MARKER"

	local port_api=${AIQOS_CP_APISERVER_PORT:-0} etcd_client etcd_peer cm_port sched_port p4 svc_ip
	read -r etcd_client etcd_peer cm_port sched_port p4 <<<"$(free_ports 5)"
	[ "$port_api" != 0 ] || port_api=$p4
	svc_ip=$(first_service_ip "$SERVICE_CIDR")

	make_pki "$svc_ip"
	{
		echo "AIQOS_CP_DIR=$DIR"
		echo "AIQOS_K8S_BIN=$bin"
		echo "KUBECONFIG=$DIR/admin.kubeconfig"
		echo "AIQOS_CP_SERVER=https://127.0.0.1:$port_api"
		echo "AIQOS_CP_ETCD=http://127.0.0.1:$etcd_client"
		echo "AIQOS_CP_CA=$PKI/ca.crt"
		echo "AIQOS_CP_ADMIN_CERT=$PKI/admin.crt"
		echo "AIQOS_CP_ADMIN_KEY=$PKI/admin.key"
		echo "AIQOS_CP_SERVICE_CIDR=$SERVICE_CIDR"
		echo "AIQOS_CP_CONTROLLERS=$controllers"
		if [ "$controllers" = 1 ]; then
			echo "AIQOS_CP_CONTROLLER_MANAGER_PORT=$cm_port"
			echo "AIQOS_CP_SCHEDULER_PORT=$sched_port"
		fi
	} >"$DIR/cp.env"
	write_kubeconfig "$DIR/admin.kubeconfig" aiqos-admin cert "$PKI/admin.crt" "$PKI/admin.key"

	# etcd: plain HTTP on loopback, no fsync (throwaway test data).
	write_args etcd "$bin/etcd" \
		--name=aiqos-test --data-dir="$DIR/etcd" \
		--listen-client-urls="http://127.0.0.1:$etcd_client" \
		--advertise-client-urls="http://127.0.0.1:$etcd_client" \
		--listen-peer-urls="http://127.0.0.1:$etcd_peer" \
		--initial-advertise-peer-urls="http://127.0.0.1:$etcd_peer" \
		--initial-cluster="aiqos-test=http://127.0.0.1:$etcd_peer" \
		--initial-cluster-state=new --unsafe-no-fsync --log-level=warn
	launch etcd
	wait_ready etcd 30 || { cmd_stop_keep; die "etcd did not become healthy (logs kept in $LOGS)"; }

	local -a extra=()
	# shellcheck disable=SC2206 # word splitting of the extra flags is the point
	[ -z "${AIQOS_CP_APISERVER_ARGS:-}" ] || extra=(${AIQOS_CP_APISERVER_ARGS})
	write_args apiserver "$bin/kube-apiserver" \
		--bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$port_api" \
		--etcd-servers="http://127.0.0.1:$etcd_client" \
		--etcd-compaction-interval="$COMPACTION" \
		--tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
		--client-ca-file="$PKI/ca.crt" \
		--kubelet-client-certificate="$PKI/apiserver-kubelet-client.crt" \
		--kubelet-client-key="$PKI/apiserver-kubelet-client.key" \
		--service-account-issuer=https://kubernetes.default.svc.cluster.local \
		--service-account-key-file="$PKI/sa.pub" \
		--service-account-signing-key-file="$PKI/sa.key" \
		--service-cluster-ip-range="$SERVICE_CIDR" \
		--authorization-mode=Node,RBAC \
		--allow-privileged=true \
		--endpoint-reconciler-type=none \
		--shutdown-watch-termination-grace-period=2s \
		--profiling=false \
		"${extra[@]}"
	launch apiserver
	wait_ready apiserver 90 || { cmd_stop_keep; die "kube-apiserver did not become ready (logs kept in $LOGS)"; }

	if [ "$controllers" = 1 ]; then
		for b in kube-controller-manager kube-scheduler; do [ -x "$bin/$b" ] || die "$bin/$b missing"; done
		write_kubeconfig "$DIR/controller-manager.kubeconfig" system:kube-controller-manager cert \
			"$PKI/controller-manager.crt" "$PKI/controller-manager.key"
		write_kubeconfig "$DIR/scheduler.kubeconfig" system:kube-scheduler cert \
			"$PKI/scheduler.crt" "$PKI/scheduler.key"
		write_args controller-manager "$bin/kube-controller-manager" \
			--kubeconfig="$DIR/controller-manager.kubeconfig" \
			--authentication-kubeconfig="$DIR/controller-manager.kubeconfig" \
			--authorization-kubeconfig="$DIR/controller-manager.kubeconfig" \
			--bind-address=127.0.0.1 --secure-port="$cm_port" \
			--cert-dir="$DIR/controller-manager-certs" \
			--leader-elect=false --use-service-account-credentials=true \
			--service-account-private-key-file="$PKI/sa.key" --root-ca-file="$PKI/ca.crt" \
			--cluster-signing-cert-file="$PKI/ca.crt" --cluster-signing-key-file="$PKI/ca.key" \
			--service-cluster-ip-range="$SERVICE_CIDR" --allocate-node-cidrs=false \
			--profiling=false
		launch controller-manager
		write_args scheduler "$bin/kube-scheduler" \
			--kubeconfig="$DIR/scheduler.kubeconfig" \
			--authentication-kubeconfig="$DIR/scheduler.kubeconfig" \
			--authorization-kubeconfig="$DIR/scheduler.kubeconfig" \
			--bind-address=127.0.0.1 --secure-port="$sched_port" \
			--cert-dir="$DIR/scheduler-certs" \
			--leader-elect=false --profiling=false
		launch scheduler
		wait_ready controller-manager 60 || { cmd_stop_keep; die "kube-controller-manager did not become healthy (logs kept in $LOGS)"; }
		wait_ready scheduler 60 || { cmd_stop_keep; die "kube-scheduler did not become healthy (logs kept in $LOGS)"; }
	fi
	log "ready: $(env_get AIQOS_CP_SERVER) (KUBECONFIG=$DIR/admin.kubeconfig)"
}

# Kill every component, keep the files (a failed start keeps its logs).
cmd_stop_keep() {
	local i
	for ((i = ${#ALL_COMPONENTS[@]} - 1; i >= 0; i--)); do
		kill_component "${ALL_COMPONENTS[$i]}"
	done
}

cmd_stop() {
	[ -e "$DIR" ] || return 0
	if [ ! -f "$DIR/$MARKER" ]; then
		[ -z "$(ls -A "$DIR" 2>/dev/null)" ] && { rmdir "$DIR" 2>/dev/null || true; return 0; }
		die "$DIR is not a control-plane dir (no $MARKER): not touching it"
	fi
	cmd_stop_keep
	# Anything mounted below the dir (kubelet volumes, later) goes first, deepest first.
	local m
	while read -r m; do
		[ -n "$m" ] || continue
		umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || log "could not unmount $m"
	done < <(awk -v d="$DIR/" 'index($5, d) == 1 { print $5 }' /proc/self/mountinfo | sort -r)
	if [ "${AIQOS_CP_KEEP:-0}" = 1 ]; then
		log "stopped; kept $DIR (AIQOS_CP_KEEP=1)"
		return 0
	fi
	rm -rf --one-file-system "$DIR"
	log "stopped; removed $DIR"
}

cmd_env() {
	[ -f "$DIR/cp.env" ] || die "control plane not started (no $DIR/cp.env)"
	local k v
	while IFS='=' read -r k v; do
		[ -n "$k" ] || continue
		printf "export %s='%s'\n" "$k" "$v"
	done <"$DIR/cp.env"
}

cmd_restart() { # COMPONENT
	local c=${1:-}
	case $c in
	etcd | apiserver | controller-manager | scheduler) ;;
	*) die "restart: COMPONENT must be etcd, apiserver, controller-manager or scheduler" ;;
	esac
	[ -f "$RUN/$c.args" ] || die "$c was not started in $DIR"
	kill_component "$c"
	launch "$c"
	wait_ready "$c" 90 || die "$c did not become ready after restart (logs in $LOGS)"
	log "restarted $c"
}

# etcd's JSON gateway: current revision, then a physical compaction at it.
cmd_compact() {
	local etcd rev
	etcd=$(env_get AIQOS_CP_ETCD) || die "control plane not started (no $DIR/cp.env)"
	rev=$(curl -fsS --max-time 10 -X POST -d '{"key":"AA=="}' "$etcd/v3/kv/range" |
		python3 -c 'import json, sys; print(json.load(sys.stdin)["header"]["revision"])') ||
		die "cannot read the etcd revision from $etcd"
	curl -fsS --max-time 30 -X POST -d "{\"revision\":\"$rev\",\"physical\":true}" \
		"$etcd/v3/kv/compaction" >/dev/null || die "etcd compaction at revision $rev failed"
	echo "$rev"
}

cmd_token() { # NAMESPACE SA [OUT]
	if [ $# -lt 2 ] || [ $# -gt 3 ]; then die "usage: token NAMESPACE SERVICEACCOUNT [OUT_KUBECONFIG]"; fi
	local ns=$1 sa=$2 out=${3:-} server body token
	[[ $ns =~ ^[a-z0-9]([-a-z0-9]*[a-z0-9])?$ ]] || die "token: namespace '$ns' is not a DNS label"
	[[ $sa =~ ^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$ ]] || die "token: service account '$sa' is not a DNS subdomain"
	if ! [[ $TOKEN_SECONDS =~ ^[0-9]+$ ]] || [ "$TOKEN_SECONDS" -lt 600 ]; then
		die "AIQOS_CP_TOKEN_SECONDS '$TOKEN_SECONDS' must be an integer >= 600"
	fi
	server=$(env_get AIQOS_CP_SERVER) || die "control plane not started (no $DIR/cp.env)"
	body=$(curl -sS --max-time 10 --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" \
		-H 'Content-Type: application/json' -X POST \
		-d "{\"apiVersion\":\"authentication.k8s.io/v1\",\"kind\":\"TokenRequest\",\"spec\":{\"expirationSeconds\":$TOKEN_SECONDS}}" \
		"$server/api/v1/namespaces/$ns/serviceaccounts/$sa/token") ||
		die "token: request to $server failed"
	token=$(python3 -c '
import json, sys
try:
    d = json.loads(sys.argv[1])
except ValueError:
    sys.exit("not JSON: %s" % sys.argv[1][:300])
if d.get("kind") != "TokenRequest" or not d.get("status", {}).get("token"):
    sys.exit("refused: %s" % d.get("message", sys.argv[1][:300]))
print(d["status"]["token"])' "$body") || die "token: no token for $ns/$sa"
	if [ -z "$out" ]; then
		echo "$token"
	else
		write_kubeconfig "$out" "system:serviceaccount:$ns:$sa" token "$token"
		echo "$out"
	fi
}

cmd_node_kubeconfig() { # NODE OUT
	[ $# -eq 2 ] || die "usage: node-kubeconfig NODE OUT_KUBECONFIG"
	local node=$1 out=$2
	[[ $node =~ ^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$ ]] || die "node-kubeconfig: '$node' is not a DNS subdomain"
	[ -f "$PKI/ca.key" ] || die "control plane not started (no $PKI/ca.key)"
	mkcert "node-$node" "system:node:$node" clientAuth "" system:nodes
	write_kubeconfig "$out" "system:node:$node" cert "$PKI/node-$node.crt" "$PKI/node-$node.key"
	echo "$out"
}

cmd=${1:-}
[ $# -eq 0 ] || shift
case $cmd in
start) cmd_start "$@" ;;
stop) cmd_stop ;;
status) cmd_status ;;
env) cmd_env ;;
restart) cmd_restart "$@" ;;
compact) cmd_compact ;;
token) cmd_token "$@" ;;
node-kubeconfig) cmd_node_kubeconfig "$@" ;;
-h | --help | help) sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//' ;;
*) echo "usage: $0 start|stop|status|env|restart|compact|token|node-kubeconfig (see --help)" >&2; exit 2 ;;
esac
