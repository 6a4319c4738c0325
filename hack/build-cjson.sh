#!/usr/bin/env bash
# hack/build-cjson.sh [--force] [--print-lib]
# Builds a static cJSON archive for the CNI plugin from Debian's source of the
# libcjson-dev version installed here (same version as the header we compile
# against), with Debian's patches applied:
#
#   ${AIQOS_CACHE:-/var/cache/aiqos}/cjson/<version>/libcjson.a
#
# Why: the plugin is copied to the node's CNI bin directory (/opt/cni/bin)
# and exec'd there by the container runtime. A node need not have libcjson1
# (kind's node image, most distributions don't); a plugin linked against
# libcjson.so.1 fails every pod's ADD and DEL with "error while loading shared
# libraries". Debian ships no libcjson.a, so we build one.
#
# The source comes through apt (`apt-get source`, signatures checked by apt)
# from the deb-src twin of each `deb` entry of the machine's own sources, with
# a private list directory: the machine's apt configuration is not changed.
# Rebuilt only when missing or the installed version changed; concurrent runs
# serialize on a lock. --print-lib prints the archive's path on stdout
# (everything else goes to stderr).
set -euo pipefail

die() { echo "hack/build-cjson.sh: $*" >&2; exit 1; }

force=0 print=0
for a in "$@"; do
	case $a in
	--force) force=1 ;;
	--print-lib) print=1 ;;
	*) die "unknown argument '$a' (--force, --print-lib)" ;;
	esac
done

version=$(dpkg-query -W -f='${Version}' libcjson-dev 2>/dev/null) ||
	die "libcjson-dev is not installed (hack/install-deps.sh installs it)"
[ -n "$version" ] || die "libcjson-dev is not installed (hack/install-deps.sh installs it)"
cache=${AIQOS_CACHE:-/var/cache/aiqos}/cjson
out=$cache/$version
lib=$out/libcjson.a

build() {
	if [ "$force" = 0 ] && [ -s "$lib" ] && [ "$(cat "$out/stamp" 2>/dev/null)" = "$version" ]; then
		return 0
	fi
	command -v dpkg-source >/dev/null || die "dpkg-source is missing (apt-get install dpkg-dev)"
	local work
	work=$(mktemp -d "$cache/build.XXXXXX")
	# shellcheck disable=SC2064
	trap "rm -rf '$work'" RETURN
	# deb-src twins of the machine's deb sources (one-line and deb822 forms).
	{
		grep -hE '^[[:space:]]*deb[[:space:]]' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
			sed -E 's/^[[:space:]]*deb[[:space:]]/deb-src /' || true
	} >"$work/src.list"
	local parts=/nonexistent
	if ls /etc/apt/sources.list.d/*.sources >/dev/null 2>&1; then
		mkdir -p "$work/parts"
		for f in /etc/apt/sources.list.d/*.sources; do
			sed -E 's/^Types:.*/Types: deb-src/' "$f" >"$work/parts/$(basename "$f")"
		done
		parts=$work/parts
	fi
	mkdir -p "$work/lists/partial"
	local apt=(apt-get -q -o "Dir::Etc::SourceList=$work/src.list" -o "Dir::Etc::SourceParts=$parts"
		-o "Dir::State::Lists=$work/lists" -o APT::Sandbox::User=root)
	"${apt[@]}" update >&2 || die "apt-get update of the deb-src lists failed"
	(cd "$work" && "${apt[@]}" source "cjson=$version" >&2) ||
		die "apt-get source cjson=$version failed (is the Debian archive reachable?)"
	local src
	src=$(find "$work" -maxdepth 1 -type d -name 'cjson-*' | head -n1)
	[ -f "$src/cJSON.c" ] || die "no cJSON.c in the source of cjson $version"
	# Debian's flags for the shared library, position-independent (the plugin
	# is PIE); cJSON_Utils is not used.
	${CC:-cc} -std=c89 -O2 -fPIC -fstack-protector-strong -D_FORTIFY_SOURCE=2 \
		-c "$src/cJSON.c" -o "$work/cJSON.o" >&2
	ar rcs "$work/libcjson.a" "$work/cJSON.o"
	mkdir -p "$out"
	mv "$work/libcjson.a" "$lib.tmp" && mv "$lib.tmp" "$lib"
	echo "$version" >"$out/stamp.tmp" && mv "$out/stamp.tmp" "$out/stamp"
	echo "hack/build-cjson.sh: built $lib (cjson $version)" >&2
}

mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9
build
if [ "$print" = 1 ]; then echo "$lib"; fi
