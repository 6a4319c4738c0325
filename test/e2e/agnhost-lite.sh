#!/bin/sh
# test/e2e/agnhost-lite.sh — /agnhost of the node e2e's example image (busybox
# only; no registry can give us Kubernetes' agnhost here). It implements the
# agnhost subcommands that manifests/examples and test/e2e/assert.py use:
#   netexec --http-port=N          an HTTP server on N (serves /www)
#   pause                          wait for SIGTERM/SIGINT, exit 0
#   connect HOST:PORT [--timeout=Ns]
#                                  exit 0 once a TCP connection to HOST:PORT
#                                  answered an HTTP GET (netexec) with 200
# As PID 1 a process ignores SIGTERM unless it handles it: both long-running
# commands trap it, so a pod deletion is quick.
bb=/bin/busybox
cmd=${1:-}
[ $# -gt 0 ] && shift
case $cmd in
netexec)
	port=8080
	for a in "$@"; do
		case $a in
		--http-port=*) port=${a#--http-port=} ;;
		esac
	done
	$bb httpd -f -p "$port" -h /www &
	pid=$!
	trap '$bb kill "$pid" 2>/dev/null; exit 0' TERM INT
	wait "$pid"
	;;
pause)
	trap 'exit 0' TERM INT
	$bb sleep 2147483647 &
	wait $!
	;;
connect)
	target=${1:-}
	timeout=5
	[ $# -gt 0 ] && shift
	for a in "$@"; do
		case $a in
		--timeout=*) timeout=${a#--timeout=}; timeout=${timeout%s} ;;
		esac
	done
	[ -n "$target" ] || { echo "usage: agnhost connect HOST:PORT [--timeout=Ns]" >&2; exit 2; }
	host=${target%:*}
	port=${target##*:}
	host=${host#[}
	host=${host%]}
	# busybox's nc, not its wget: wget crashes in an image without glibc's
	# NSS libraries; an HTTP request proves the connection carried data
	printf 'GET / HTTP/1.0\r\n\r\n' | $bb nc -w "$timeout" "$host" "$port" | $bb grep -q '^HTTP/1\.[01] 200'
	;;
*)
	echo "agnhost (aiqos e2e): unknown subcommand '$cmd' (netexec, pause, connect)" >&2
	exit 2
	;;
esac
