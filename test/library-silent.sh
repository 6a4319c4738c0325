#!/usr/bin/env bash
# test/library-silent.sh BUILD_DIR — the library never logs or prints
# (shared/log.h, shared/error.h): no object of shared/ but log.o (the
# programs' logging module) refers to the logger, to the logging failpoint()
# or to stdout/stderr and the printing calls. One case per object; ends with
# "N passed, N failed".
set -u
build=${1:-build}
pass=0 fail=0
forbidden='log_msg|log_setup|log_enabled|log_failpoints_armed|failpoint|stderr|stdout|printf|__printf_chk|fprintf|__fprintf_chk|vfprintf|__vfprintf_chk|vprintf|puts|fputs|perror|syslog|vsyslog|fwrite'
objs=$(find "$build/obj/shared" -name '*.o' ! -name log.o | sort)
if [ -z "$objs" ]; then
	echo "no objects under $build/obj/shared (make first)"
	echo "0 passed, 1 failed"
	exit 1
fi
for o in $objs; do
	bad=$(nm -u "$o" | awk '{print $2}' | grep -xE "$forbidden" | tr '\n' ' ')
	if [ -n "$bad" ]; then
		echo "FAIL ${o#"$build"/obj/}: refers to $bad"
		fail=$((fail + 1))
	else
		pass=$((pass + 1))
	fi
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
