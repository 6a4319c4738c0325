# shellcheck shell=bash
# hack/lib/cache-lock.sh — the guard of a tool cached outside the repository
# (sourced by hack/lib/go-tool.sh and hack/install-sse.sh):
#
#   cache_guard CHECK PRINT OUT UP_TO_DATE_FN LOCKFILE LOG_FN MISSING CACHED
#
# CHECK=1 (the script's --check): installs nothing; prints OUT when PRINT=1
# (--print-...), exits 0 when UP_TO_DATE_FN says the cached tool is current,
# else logs MISSING (with LOG_FN) and exits 1. Otherwise, when the tool is
# current (a cheap check first, no lock), logs CACHED, prints OUT when
# PRINT=1 and exits 0; when it is not, takes LOCKFILE (fd 9, held until the
# script exits: concurrent installs serialize), asks again (another run may
# have installed it meanwhile) and returns only when the caller must
# (re)install it, holding the lock.
cache_guard() {
	local check=$1 print=$2 out=$3 up=$4 lock=$5 logfn=$6 missing=$7 cached=$8
	if [ "$check" -eq 1 ]; then
		[ "$print" -eq 0 ] || echo "$out"
		"$up" && exit 0
		"$logfn" "$missing"
		exit 1
	fi
	if ! "$up"; then
		mkdir -p "$(dirname "$lock")"
		exec 9>"$lock"
		flock 9
		"$up" || return 0
	fi
	"$logfn" "$cached"
	[ "$print" -eq 0 ] || echo "$out"
	exit 0
}
