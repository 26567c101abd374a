#!/bin/sh
# Runs each cmocka unit test binary given, UNIT_JOBS at a time (default:
# the number of CPUs), and prints their outputs in the order given; fails
# if any fails. The tests share nothing: each makes its own files under
# its own temporary directory.
set -u
jobs=${UNIT_JOBS:-$(nproc 2>/dev/null || echo 1)}
out=$(mktemp -d /tmp/sluice-unit.XXXXXX)
trap 'rm -rf "$out"' EXIT
i=0
for t in "$@"; do
	i=$((i + 1))
	echo "$i $t"
done | xargs -P "$jobs" -n 2 sh -c '"$2" > "$0/$1.out" 2>&1; echo $? > "$0/$1.rc"' "$out"
fail=0; n=0
for t in "$@"; do
	n=$((n + 1))
	echo "== unit: ${t##*/}"
	cat "$out/$n.out"
	[ "$(cat "$out/$n.rc" 2>/dev/null)" = 0 ] || {
		echo "== unit: ${t##*/} FAILED (exit $(cat "$out/$n.rc" 2>/dev/null))"
		fail=$((fail + 1))
	}
done
echo "unit: $((n - fail)) passed, $fail failed"
[ "$fail" = 0 ]
