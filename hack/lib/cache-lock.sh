# shellcheck shell=bash
# hack/lib/cache-lock.sh — the guard of a tool cached outside the repository
# (sourced by hack/lib/go-tool.sh and hack/install-sse.sh):
#
#   cache_ready_or_lock UP_TO_DATE_FN LOCKFILE
#
# Returns 0 when UP_TO_DATE_FN says the cached tool is current (a cheap
# check, no lock). Else takes LOCKFILE (fd 9, held until the script exits:
# concurrent installs serialize) and asks again, since another run may have
# installed it meanwhile: 0 if it is current now, 1 if the caller must
# (re)install it, holding the lock.
cache_ready_or_lock() {
	local up=$1 lock=$2
	"$up" && return 0
	mkdir -p "$(dirname "$lock")"
	exec 9>"$lock"
	flock 9
	"$up"
}
