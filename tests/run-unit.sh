#!/bin/sh
# Runs each cmocka unit test binary given; fails if any fails.
set -u
fail=0; n=0
for t in "$@"; do
	n=$((n + 1))
	echo "== unit: ${t##*/}"
	"$t" || fail=$((fail + 1))
done
echo "unit: $((n - fail)) passed, $fail failed"
[ "$fail" = 0 ]
