#!/bin/bash
# run-scenarios.sh: runs tests/scenarios/*.sh one by one, each in its own
# process with a timeout, and sums up.
#
#   DIR=PATH         the directory of scenarios (default tests/scenarios;
#                    tests/adversarial holds the attack techniques)
#   SCENARIOS=GLOB   run only the scenarios whose file name (with or without
#                    .sh) matches GLOB, e.g. SCENARIOS='0[0-3]*'; several
#                    globs separated by spaces: any of them
#   V=1              print every scenario's output, not only a failure's
#   TB_TIMEOUT=S     seconds one scenario may take (default 120)
#   TB_KEEP=1        keep each run's TB_DIR (logs, records, flows.db)
#   TB_SLUICED_EXTRA="ARGS"  words added to every sluiced the scenarios
#                    start, e.g. "--kernel-sni on" (scenarios that check
#                    the default may then fail: read their failures)
#   TB_TLS_CACHE=DIR where the test CA made by the first scenario is kept
#                    for the others (default: a directory of this run's)
#
# A scenario passes with exit 0, is skipped with exit 77 and fails
# otherwise, and also when it leaves a namespace of its run behind.
# Output of each scenario is kept in tests/out/NAME.log.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
set -u

here=$(cd "$(dirname "$0")" && pwd)
if [ "$(id -u)" != 0 ]; then
	echo "run-scenarios: the scenarios build network namespaces; run as root" >&2
	exit 1
fi
for tool in ip timeout; do
	command -v "$tool" >/dev/null 2>&1 || {
		echo "run-scenarios: $tool is missing (make deps)" >&2
		exit 1
	}
done

glob=${SCENARIOS:-*}
dir=${DIR:-$here/scenarios}
limit=${TB_TIMEOUT:-120}
out=${TB_OUT:-$here/out}
mkdir -p "$out"
state=$(mktemp /tmp/sluice-scenarios.XXXXXX)
# the test CA and certificates, made by the first scenario, copied by the
# others (testbed.sh)
tls_made=
if [ -z "${TB_TLS_CACHE:-}" ]; then
	TB_TLS_CACHE=$(mktemp -d /tmp/sluice-tls.XXXXXX)
	tls_made=$TB_TLS_CACHE
fi
export TB_TLS_CACHE
trap 'rm -f "$state"; [ -z "$tls_made" ] || rm -rf "$tls_made"' EXIT

# Cleans up after a scenario that could not (killed by the timeout):
# every run it started is recorded in $state as "PREFIX DIR".
reap() {
	local p dir left
	while read -r p dir; do
		[ -n "$p" ] || continue
		left=$(ip netns list | awk -v p="$p-" 'index($1, p) == 1 { print $1 }')
		if [ -n "$left" ]; then
			echo "run-scenarios: $1 left namespaces behind:" $left
			leaked=1
		fi
		bash -c '. "$1/lib/testbed.sh"; tb_adopt "$2" "$3"; tb_down' \
		    _ "$here" "$p" "$dir"
	done < "$state"
	: > "$state"
}

# matches NAME: NAME matches one of the globs.
matches() {
	local g
	for g in "${globs[@]}"; do
		# shellcheck disable=SC2254 # GLOB is a pattern on purpose
		case $1 in $g) return 0 ;; esac
	done
	return 1
}
set -f
read -r -a globs <<< "$glob"
set +f

npass=0 nfail=0 nskip=0 failed=""
for f in "$dir"/*.sh; do
	[ -e "$f" ] || continue
	base=${f##*/}
	name=${base%.sh}
	matches "$base" || matches "$name" || continue
	log=$out/$name.log
	t0=$(date +%s)
	# timeout signals its whole process group, so helpers the scenario
	# started go too; with -k its final SIGKILL also hits timeout itself,
	# whose death bash would report on stderr.
	{ TB_STATE_FILE=$state timeout -k 10 "$limit" bash "$f" > "$log" 2>&1 \
	    < /dev/null; } 2>/dev/null
	rc=$?
	t=$(( $(date +%s) - t0 ))
	leaked=0
	reap "$name" >> "$log" 2>&1
	case $rc in 124|137) echo "run-scenarios: timed out after ${limit}s" >> "$log" ;; esac
	if [ $rc = 0 ] && [ $leaked = 0 ]; then
		npass=$((npass + 1))
		echo "PASS $name (${t}s)"
		[ "${V:-0}" = 1 ] && sed 's/^/    /' "$log"
	elif [ $rc = 77 ]; then
		nskip=$((nskip + 1))
		echo "SKIP $name: $(grep -m1 '^SKIP' "$log" | sed 's/^SKIP [^:]*: //')"
		[ "${V:-0}" = 1 ] && sed 's/^/    /' "$log"
	else
		nfail=$((nfail + 1))
		failed="$failed $name"
		echo "FAIL $name (exit $rc, ${t}s)"
		sed 's/^/    /' "$log"
	fi
done

total=$((npass + nfail + nskip))
if [ $total = 0 ]; then
	echo "run-scenarios: no scenario matches '$glob'" >&2
	echo "scenarios: 0 passed, 0 failed"
	exit 1
fi
[ -n "$failed" ] && echo "failed:$failed"
if [ $nskip = 0 ]; then
	echo "scenarios: $npass passed, $nfail failed"
else
	echo "scenarios: $npass passed, $nfail failed, $nskip skipped"
fi
[ $nfail = 0 ]
