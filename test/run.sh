#!/usr/bin/env bash
# test/run.sh [--only unit|lint|integration|unit-asan|integration-asan|fuzz|k8s|helm|docs|image|kernel|e2e] BUILD_DIR
# Runs every suite of `make test` and ends with one line
# "N passed, N failed, N skipped" summing them. Exit 1 if anything failed.
# Under CI=true a skipped test counts as failed (strict mode): CI must
# cover everything.
set -u
only=""
if [ "${1:-}" = "--only" ]; then only=$2; shift 2; fi
build=${1:-build}
top=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "$build" && pwd)

total_pass=0 total_fail=0 total_skip=0

add_counts() { # "N passed, N failed[, N skipped]" line -> totals
	local line=$1 p f s
	p=$(grep -oE '[0-9]+ passed' <<<"$line" | grep -oE '[0-9]+' || echo 0)
	f=$(grep -oE '[0-9]+ failed' <<<"$line" | grep -oE '[0-9]+' || echo 0)
	s=$(grep -oE '[0-9]+ skipped' <<<"$line" | grep -oE '[0-9]+' || echo 0)
	total_pass=$((total_pass + p)); total_fail=$((total_fail + f)); total_skip=$((total_skip + s))
}

run_suite() { # name cmd...
	local name=$1; shift
	local out rc last
	echo "=== $name"
	out=$(mktemp)
	"$@" 2>&1 | tee "$out"
	rc=${PIPESTATUS[0]}
	last=$(grep -E '^([A-Za-z][A-Za-z0-9-]*: )?[0-9]+ passed, [0-9]+ failed' "$out" | tail -n 1)
	if [ -z "$last" ]; then
		echo "$name: no result line (exit $rc), counted as 1 failed"
		total_fail=$((total_fail + 1))
	else
		add_counts "$last"
		if [ "$rc" -ne 0 ] && ! grep -qE '[1-9][0-9]* failed' <<<"$last"; then
			echo "$name: exit $rc with no failure counted, counted as 1 failed"
			total_fail=$((total_fail + 1))
		fi
	fi
	rm -f "$out"
}

if [ -z "$only" ] || [ "$only" = unit ]; then
	for t in "$build"/test/test_*; do
		[ -x "$t" ] || continue
		run_suite "unit: $(basename "$t")" "$t"
	done
	run_suite "unit: library-silent" bash "$top/test/library-silent.sh" "$build"
	run_suite "unit: log-calls" python3 "$top/test/log-calls.py" "$top"
fi

# make lint (clang-format, cppcheck, clang-tidy over every C file; the
# scripts through shellcheck), one test per tool (test/lint.sh). --only lint.
if [ -z "$only" ] || [ "$only" = lint ]; then
	run_suite "lint" bash "$top/test/lint.sh" "$build"
fi

# The soak's second node runs the real kube-apiserver + etcd: build them
# (cached) first, so a fresh machine does not skip it; a failed build leaves
# that test to skip, which fails a strict (CI=true) run.
if [ -z "$only" ] || [ "$only" = integration ]; then
	# shellcheck disable=SC2016 # $1 expands in the inner shell
	run_suite "integration" env AIQOS_BUILD="$build" bash -c '"$1/hack/build-k8s.sh" ||
		echo "integration: hack/build-k8s.sh failed: the tests that need the control plane skip"
		exec /usr/bin/python3 -m pytest -q -p no:cacheprovider "$1/test/integration"' _ "$top"
fi

# The alert rules and the dashboard (manifests/monitoring/): promtool's
# checks and rule unit tests, and every dashboard query against a real
# Prometheus scraping a real agent (Debian package prometheus). --only monitoring.
if [ -z "$only" ] || [ "$only" = monitoring ]; then
	run_suite "monitoring" env AIQOS_BUILD="$build" /usr/bin/python3 -m pytest -q -p no:cacheprovider \
		"$top/test/monitoring"
fi

# Hardening: the unit and integration suites (plugin and agent
# lab) again against the ASan+UBSan build (`make asan-build`, BUILD-asan),
# leaks included; then every fuzz target for AIQOS_FUZZ_SECONDS (default 15)
# from the clang build (`make fuzz-build`, BUILD-fuzz). A sanitizer report
# aborts the program, so the test that ran it fails.
asan_build=${AIQOS_ASAN_BUILD:-$build-asan}
fuzz_build=${AIQOS_FUZZ_BUILD:-$build-fuzz}
asan_env=(ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=1}"
	UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}")

if [ -z "$only" ] || [ "$only" = unit-asan ]; then
	if ! ls "$asan_build"/test/test_* >/dev/null 2>&1; then
		run_suite "unit-asan" echo "asan: 0 passed, 1 failed ($asan_build/test: not built; make asan-build)"
	fi
	for t in "$asan_build"/test/test_*; do
		[ -x "$t" ] || continue
		run_suite "unit-asan: $(basename "$t")" env "${asan_env[@]}" "$t"
	done
fi

if [ -z "$only" ] || [ "$only" = integration-asan ]; then
	run_suite "integration-asan" env AIQOS_BUILD="$asan_build" "${asan_env[@]}" /usr/bin/python3 -m pytest -q \
		-p no:cacheprovider "$top"/test/integration/test_plugin_*.py "$top/test/integration/test_agent_lab.py" \
		"$top/test/integration/test_doctor.py"
fi

if [ -z "$only" ] || [ "$only" = fuzz ]; then
	run_suite "fuzz" bash "$top/test/fuzz/run.sh" "$fuzz_build" "${AIQOS_FUZZ_SECONDS:-15}"
fi

if [ -z "$only" ] || [ "$only" = k8s ]; then
	# The real control plane: binaries built once, cached outside the tree.
	# shellcheck disable=SC2016 # $1 expands in the inner shell
	# (test_manifests.py runs BUILD/bin/aiqos-agent with the manifests' identity.)
	run_suite "k8s" env AIQOS_BUILD="$build" bash -c '"$1/hack/build-k8s.sh" && exec /usr/bin/python3 -m pytest -q -p no:cacheprovider "$1/test/k8s"' _ "$top"
fi

# The Helm chart (test/helm): helm from its Go module and kubectl (for its
# kustomize), both built once and cached outside the tree.
if [ -z "$only" ] || [ "$only" = helm ]; then
	# shellcheck disable=SC2016 # $1 expands in the inner shell
	run_suite "helm" env AIQOS_BUILD="$build" bash -c '"$1/hack/build-helm.sh" && "$1/hack/build-k8s.sh" &&
		exec /usr/bin/python3 -m pytest -q -p no:cacheprovider "$1/test/helm"' _ "$top"
fi

# The docs (test/docs): links resolve, the config reference is the agent's
# table, README's quickstart/install/verify commands are checked (helm and
# kubectl as the helm suite builds them).
if [ -z "$only" ] || [ "$only" = docs ]; then
	# shellcheck disable=SC2016 # $1 expands in the inner shell
	run_suite "docs" env AIQOS_BUILD="$build" bash -c '"$1/hack/build-helm.sh" && "$1/hack/build-k8s.sh" &&
		exec /usr/bin/python3 -m pytest -q -p no:cacheprovider "$1/test/docs"' _ "$top"
fi

# The OCI image of hack/build-image.sh, read back (test/image).
if [ -z "$only" ] || [ "$only" = image ]; then
	run_suite "image" env AIQOS_BUILD="$build" /usr/bin/python3 -m pytest -q -p no:cacheprovider "$top/test/image"
fi

# Debian's stock kernel in qemu: the full fq/fq_codel/pedit/DCTCP paths
# (hack/test-kernel.sh). AIQOS_TEST_KERNEL=0 skips it (a failure under CI=true).
if [ -z "$only" ] || [ "$only" = kernel ]; then
	if [ "${AIQOS_TEST_KERNEL:-1}" = 0 ]; then
		run_suite "kernel" echo "kernel: 0 passed, 0 failed, 1 skipped (AIQOS_TEST_KERNEL=0)"
	else
		run_suite "kernel" bash "$top/hack/test-kernel.sh" "$build"
	fi
fi

# The kind-less node e2e (hack/e2e-node.sh, `make e2e`): a real kubelet +
# containerd + runc + control plane in namespaces of their own, the manifests
# installed, test/e2e/assert.py. Root. AIQOS_TEST_E2E=0 skips it (a failure
# under CI=true).
if [ -z "$only" ] || [ "$only" = e2e ]; then
	if [ "${AIQOS_TEST_E2E:-1}" = 0 ]; then
		run_suite "e2e" echo "e2e: 0 passed, 0 failed, 1 skipped (AIQOS_TEST_E2E=0)"
	else
		run_suite "e2e" bash "$top/hack/e2e-node.sh" "$build"
	fi
fi

if [ "${CI:-}" = true ] && [ "$total_skip" -gt 0 ]; then
	echo "strict mode (CI=true): $total_skip skipped tests count as failed"
	total_fail=$((total_fail + total_skip))
fi
echo "total: $total_pass passed, $total_fail failed, $total_skip skipped"
[ "$total_fail" -eq 0 ]
