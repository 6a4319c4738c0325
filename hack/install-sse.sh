#!/usr/bin/env bash
# hack/install-sse.sh [--force] [--print-python] [--check]
# Installs the lab's real HTTP/SSE stack (uvicorn + sse-starlette serving,
# httpx + httpx-sse reading; test/bench/sse_tokens.py is the only glue of
# ours) from PyPI at the versions pinned in test/bench/sse-requirements.txt
# (the whole closure, installed --no-deps, wheels only) into a venv of the
# system python outside the repository, like hack/build-vegeta.sh does for
# vegeta:
#
#   ${AIQOS_CACHE:-/var/cache/aiqos}/sse/venv/bin/python
#
# Reinstalled only when missing, when its stamp (the requirements' sha256,
# the python's version) differs or when the venv cannot import the stack; a
# second run costs a few hundred milliseconds. Concurrent runs serialize on a
# lock. --print-python prints the venv's python on stdout (everything else
# goes to stderr); --check installs nothing: exit 0 if installed and current,
# 1 if not. Used by the lab's token-stream cells with client sse
# (test/bench/outcome.py, `make bench`, test/bench/streams.py, the lab smoke).
set -euo pipefail
# shellcheck source=hack/lib/cache-lock.sh
. "$(dirname "$0")/lib/cache-lock.sh"

top=$(cd "$(dirname "$0")/.." && pwd)
req=$top/test/bench/sse-requirements.txt
base=${AIQOS_SSE_BASE_PYTHON:-/usr/bin/python3}
root=${AIQOS_CACHE:-/var/cache/aiqos}/sse
venv=$root/venv
modules=uvicorn,uvloop,httptools,sse_starlette,starlette,httpx,httpx_sse

log() { echo "install-sse: $*" >&2; }
die() {
	log "error: $*"
	exit 1
}

force=0 print=0 check=0
for a in "$@"; do
	case $a in
	--force) force=1 ;;
	--print-python) print=1 ;;
	--check) check=1 ;;
	-h | --help)
		sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
		exit 0
		;;
	*)
		log "unknown argument '$a' (--force, --print-python, --check)"
		exit 2
		;;
	esac
done

[ -f "$req" ] || die "$req is missing"
[ -x "$base" ] || die "$base not found (AIQOS_SSE_BASE_PYTHON: the python to make the venv with)"
stamp="req=$(sha256sum "$req" | cut -d' ' -f1) python=$("$base" -c 'import sys; print(sys.version.split()[0])')"

up_to_date() {
	[ "$force" -eq 0 ] || return 1
	[ -x "$venv/bin/python" ] && [ -f "$venv/.stamp" ] || return 1
	[ "$(cat "$venv/.stamp")" = "$stamp" ] || return 1
	"$venv/bin/python" -c "import $modules" 2>/dev/null
}

cache_guard "$check" "$print" "$venv/bin/python" up_to_date "$root/.lock" log \
	"the SSE stack is not installed or out of date in $venv (run hack/install-sse.sh)" "cached: $venv ($stamp)"

t0=$(date +%s)
"$base" -c 'import venv, ensurepip' 2>/dev/null ||
	die "$base has no venv/ensurepip module (Debian: apt-get install python3-venv; hack/install-deps.sh does)"
rm -rf "$venv"
"$base" -m venv "$venv" || die "python3 -m venv $venv failed"
log "installing $(grep -cE '^[A-Za-z]' "$req") pinned packages from $req"
"$venv/bin/python" -m pip install --no-input --disable-pip-version-check -q --no-deps --only-binary=:all: \
	-r "$req" >&2 || die "pip install -r $req failed (is PyPI reachable?)"
"$venv/bin/python" -m pip check >&2 || die "the pinned packages of $req do not satisfy each other's requirements"
"$venv/bin/python" -c "import $modules" || die "the venv cannot import $modules"
echo "$stamp" >"$venv/.stamp"
log "installed in $(($(date +%s) - t0)) s: $venv"
[ "$print" -eq 0 ] || echo "$venv/bin/python"
