#!/usr/bin/env bash
# test/fuzz/run.sh FUZZ_BUILD SECONDS [TARGET...]
# Runs the libFuzzer targets FUZZ_BUILD/fuzz/fuzz_<name> (make fuzz-build):
# each first replays its regression inputs (test/fuzz/regress/<name>/, every
# one must pass), then fuzzes for SECONDS from a scratch copy of its seed
# corpus (test/fuzz/corpus/<name>/) with its dictionary. A target passes when
# both end without a crash, leak, timeout or broken property. Ends with
# "fuzz: N passed, N failed". Crashing inputs are kept in
# FUZZ_BUILD/artifacts/ (the message says how to make one a regression).
# FUZZ_JOBS targets run at once (default: the number of CPUs); FUZZ_KEEP=DIR
# keeps each grown corpus in DIR/<name>/.
set -u
build=${1:?usage: run.sh FUZZ_BUILD SECONDS [TARGET...]}
secs=${2:?usage: run.sh FUZZ_BUILD SECONDS [TARGET...]}
shift 2
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "$build" 2>/dev/null && pwd) || { echo "fuzz: $1: no build dir (make fuzz-build)"; echo "fuzz: 0 passed, 1 failed"; exit 1; }
jobs=${FUZZ_JOBS:-$(nproc 2>/dev/null || echo 1)}

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
	for src in "$here"/fuzz_*.c; do
		t=$(basename "$src" .c)
		targets+=("${t#fuzz_}")
	done
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/aiqos-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$build/artifacts"
# the targets' own temp files (kubeconfig, state) on tmpfs when there is one
if [ -z "${TMPDIR:-}" ] && [ -d /dev/shm ] && [ -w /dev/shm ]; then
	export TMPDIR=/dev/shm
fi
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1:detect_stack_use_after_return=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# One target: replay, then fuzz. Writes $work/<t>.log and $work/<t>.result.
run_target() {
	local t=$1 bin="$build/fuzz/fuzz_$1" log="$work/$1.log" corpus="$work/corpus-$1" dict="$work/$1.dict"
	local regress="$here/regress/$t" seeds="$here/corpus/$t" rc
	if [ ! -x "$bin" ]; then
		echo "fuzz_$t: FAILED: $bin not built (make fuzz-build)" >"$work/$t.result"
		return
	fi
	: >"$log"
	if [ -d "$regress" ] && [ -n "$(ls -A "$regress")" ]; then
		if ! "$bin" -close_fd_mask=3 -runs=1 "$regress"/* >>"$log" 2>&1; then
			echo "fuzz_$t: FAILED: a regression input crashes again (log below)" >"$work/$t.result"
			return
		fi
	fi
	mkdir -p "$corpus"
	cat "$here/dict/json.dict" "$here/dict/$t.dict" >"$dict" 2>/dev/null || cp "$here/dict/json.dict" "$dict"
	# new inputs go to the scratch dir (first); the seeds are only read
	"$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -close_fd_mask=3 -print_final_stats=1 \
		-dict="$dict" -artifact_prefix="$build/artifacts/$t-" "$corpus" "$seeds" >>"$log" 2>&1
	rc=$?
	if [ -n "${FUZZ_KEEP:-}" ]; then # keep the grown corpus (e.g. for coverage reports)
		mkdir -p "$FUZZ_KEEP/$t" && cp -n "$corpus"/* "$FUZZ_KEEP/$t/" 2>/dev/null
	fi
	local runs eps cov ft
	runs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$' | tail -n1)
	eps=$(grep -oE 'stat::average_exec_per_sec: *[0-9]+' "$log" | grep -oE '[0-9]+$' | tail -n1)
	cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+' "$log" | tail -n1)
	ft=$(ls "$corpus" | wc -l)
	if [ "$rc" -eq 0 ]; then
		echo "fuzz_$t: ok: ${secs}s, ${runs:-?} runs (${eps:-?}/s), ${cov:-cov ?}, corpus +$ft" >"$work/$t.result"
	else
		local crash
		crash=$(grep -oE "Test unit written to [^ ]+" "$log" | tail -n1 | sed 's/Test unit written to //')
		echo "fuzz_$t: FAILED (exit $rc): ${crash:-no artifact}; after the fix: mkdir -p test/fuzz/regress/$t && cp ${crash:-ARTIFACT} test/fuzz/regress/$t/" >"$work/$t.result"
	fi
}

running=0
for t in "${targets[@]}"; do
	run_target "$t" &
	running=$((running + 1))
	if [ "$running" -ge "$jobs" ]; then
		wait -n
		running=$((running - 1))
	fi
done
wait

pass=0 fail=0
for t in "${targets[@]}"; do
	if grep -q ': ok:' "$work/$t.result" 2>/dev/null; then
		pass=$((pass + 1))
		cat "$work/$t.result"
	else
		fail=$((fail + 1))
		cat "$work/$t.result" 2>/dev/null || echo "fuzz_$t: FAILED: no result"
		echo "--- fuzz_$t log (last 60 lines)"
		tail -n 60 "$work/$t.log" 2>/dev/null
	fi
done
echo "fuzz: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
