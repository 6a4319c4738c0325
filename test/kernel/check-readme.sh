#!/usr/bin/env bash
# test/kernel/check-readme.sh README FEATURES_BIN KERNEL_ROOT KVER — checks
# a doc's "Kernel support" table (docs/concepts.md) against the code and a real kernel
# (run on the host by hack/test-kernel.sh): the table lists exactly the
# features FEATURES_BIN (test/kernel/features.c: tc kinds of the registry,
# actions, congestion controls and sysctls the planner uses) prints; every
# CONFIG_ option it names is =y or =m in that kernel's config; every module
# it names exists there (or is built in); every row says what aiqos does
# without the feature. Prints "ok  CASE"/"FAIL CASE" and
# "N passed, N failed".
set -uo pipefail

if [ $# -ne 4 ]; then
	echo "usage: $0 README FEATURES_BIN KERNEL_ROOT KVER" >&2
	exit 2
fi
readme=$1 features_bin=$2 kroot=$3 kver=$4
config=$kroot/boot/config-$kver
pass=0 failed=0

result() { # NAME PROBLEMS
	if [ -z "$2" ]; then
		echo "ok  $1"
		pass=$((pass + 1))
	else
		printf '%s\n' "$2" | sed 's/^/  /'
		echo "FAIL $1"
		failed=$((failed + 1))
	fi
}

# The table rows of the section: "| `feature` | options/modules | use | without |"
rows=$(awk '/^## Kernel support/ {on = 1; next} /^## / {on = 0} on && /^\| `/' "$readme")
problems=""
[ -n "$rows" ] || problems="no table rows starting with '| \`' under '## Kernel support' in $readme"
result readme_table_present "$problems"

cell() { # ROW N -> the Nth cell, trimmed
	awk -F'|' -v n="$(($2 + 1))" '{gsub(/^[ \t]+|[ \t]+$/, "", $n); print $n}' <<<"$1"
}

# 1. the same features as the code
want=$("$features_bin") || {
	result features_match_code "cannot run $features_bin"
	want=""
}
have=$(while IFS= read -r row; do cell "$row" 1 | sed -n 's/^`\([^`]*\)`.*/\1/p'; done <<<"$rows" | sort)
if [ -n "$want" ]; then
	problems=$(
		comm -23 <(sort -u <<<"$want") <(sort -u <<<"$have") | sed 's/^/in the code, missing from the README table: /'
		comm -13 <(sort -u <<<"$want") <(sort -u <<<"$have") | sed 's/^/in the README table, not in the code: /'
		sort <<<"$have" | uniq -d | sed 's/^/listed twice: /'
	)
	result features_match_code "$problems"
fi

# 2. every row complete
problems=$(while IFS= read -r row; do
	for n in 2 3 4; do
		[ -n "$(cell "$row" "$n")" ] || echo "row '$(cell "$row" 1)': cell $n is empty"
	done
done <<<"$rows")
result rows_complete "$problems"

# 3. the kernel options exist in the kernel the VM boots
if [ -f "$config" ]; then
	problems=$(while IFS= read -r row; do
		for opt in $(cell "$row" 2 | grep -oE 'CONFIG_[A-Z0-9_]+'); do
			grep -qE "^$opt=(y|m)$" "$config" || echo "row '$(cell "$row" 1)': $opt is not =y or =m in $config"
		done
		cell "$row" 2 | grep -q 'CONFIG_' || echo "row '$(cell "$row" 1)': names no CONFIG_ option"
	done <<<"$rows")
else
	problems="no kernel config $config"
fi
result kernel_options_exist "$problems"

# 4. the modules exist (or are built in) in that kernel
problems=$(while IFS= read -r row; do
	for mod in $(cell "$row" 2 | grep -oE '`[a-z0-9_]+`' | tr -d '`'); do
		modprobe -d "$kroot" -S "$kver" --show-depends "$mod" >/dev/null 2>&1 ||
			echo "row '$(cell "$row" 1)': module $mod not found in $kroot/lib/modules/$kver"
	done
done <<<"$rows")
result modules_exist "$problems"

echo "$pass passed, $failed failed"
[ "$failed" -eq 0 ]
