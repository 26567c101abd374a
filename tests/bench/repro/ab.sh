#!/bin/bash
# ab: two builds of sluiced against each other on one bed.
#
#   tests/bench/repro/ab.sh [REV_A [REV_B]]     (HEAD~1 and HEAD)
#
# Builds sluiced at each revision (in temporary git worktrees) and
# measures, on the bench's bed (tests/bench/lib.sh), new connections/s
# with CONC clients under B1 and under S, in alternating pairs, restarting
# sluiced with A's binary, then B's, ROUNDS times, PAIRS pairs each. A
# change too small for `make bench` to tell from its spread (each bench
# run is one bed and one binary; two runs of one binary differ by 0.03 in
# TLS S/B1) shows here, or is shown to be within the spread.
# Prints the median S/B1 of each and its spread, and the median rates.
# Environment: ROUNDS (3), PAIRS (4), SECS (3), CONC (16), MODE (tls,
# http, or dns: dnsperf as in run.sh against S and against Dc, dnsmasq
# with its cache, and each one's CPU per query; S/Dc of that is the
# measure, CONC and RATE are unused), BENCH_SLUICED_ARGS (more flags for
# sluiced, as in run.sh),
# ARGS_A and ARGS_B (flags for A's sluiced only, for B's only: one build
# with and without a switch is `ARGS_B="--kernel-sni on" ab.sh HEAD HEAD`),
# RATE (unset: the rate with CONC clients is measured; set: the setup
# latency of CONC clients, 1 unless set, at RATE connections/s in all
# instead, and what S adds to B1's p50 and p99, per pair), PRIO_A and
# PRIO_B (a chrt(1) policy for every thread of A's, B's sluiced:
# PRIO_B="chrt --idle" runs it only on a CPU nothing else wants), ENV_A
# and ENV_B (VAR=VALUE words in the environment of A's, B's sluiced
# only).
# About 3 minutes with the defaults. Needs root, like the bench.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
REV_A=${1:-HEAD~1}
REV_B=${2:-HEAD}
ROUNDS=${ROUNDS:-3}
PAIRS=${PAIRS:-4}
SECS=${SECS:-3}
MODE=${MODE:-tls}
RATE=${RATE:-}
if [ -n "$RATE" ]; then CONC=${CONC:-1}; else CONC=${CONC:-16}; fi
case $MODE in
tls|http|dns) ;;
*) echo "ab: MODE is tls, http or dns, not $MODE" >&2; exit 2 ;;
esac
CONNBENCH=${CONNBENCH:-$REPO/build/connbench}
[ -x "$CONNBENCH" ] || make -C "$REPO" -s build/connbench >/dev/null ||
    { echo "ab: cannot build connbench" >&2; exit 1; }

WTS=()
cleanup_wt() {
	local w
	for w in "${WTS[@]}"; do
		git -C "$REPO" worktree remove --force "$w" 2>/dev/null
	done
}
# build REV: a worktree at REV with sluiced and sluice built; prints it
build() {
	local wt
	wt=$(mktemp -d /tmp/sluice-ab.XXXXXX)
	if ! git -C "$REPO" worktree add -q --detach "$wt" "$1" >&2; then
		echo "ab: no revision $1" >&2
		rmdir "$wt"
		return 1
	fi
	if ! make -C "$wt" -s -j2 build/sluiced build/sluice >/dev/null; then
		echo "ab: the build of $1 failed" >&2
		git -C "$REPO" worktree remove --force "$wt" 2>/dev/null
		return 1
	fi
	echo "$wt"
}
WT_A=$(build "$REV_A") || exit 1
WTS+=("$WT_A")
WT_B=$(build "$REV_B") || { cleanup_wt; exit 1; }
WTS+=("$WT_B")
NAME_A="$REV_A ($(git -C "$WT_A" rev-parse --short HEAD))${ARGS_A:+ $ARGS_A}"
NAME_B="$REV_B ($(git -C "$WT_B" rev-parse --short HEAD))${ARGS_B:+ $ARGS_B}"
BASE_ARGS=${BENCH_SLUICED_ARGS:-}
export SLUICED=$WT_B/build/sluiced SLUICE=$WT_B/build/sluice

. "$REPO/tests/bench/lib.sh"
bn_repro_up ab
if [ "$MODE" = dns ]; then
	bn_dns_queries "$TB_DIR/queries.txt"
	bn_policy_names "$TB_DIR/policy.json" "$BN_NAME" "*.$BN_WILD"
fi

: > "$TB_DIR/ab.txt"
for ((r = 0; r < ROUNDS; r++)); do
	for v in A B; do
		if [ "$v" = A ]; then
			w=$WT_A BENCH_SLUICED_ARGS="$BASE_ARGS ${ARGS_A:-}"
		else
			w=$WT_B BENCH_SLUICED_ARGS="$BASE_ARGS ${ARGS_B:-}"
		fi
		tb_sluiced_stop >/dev/null 2>&1
		# each start with a database of its own: the two may differ
		# in schema version, and an older sluiced refuses a newer one
		rm -f "$TB_DIR"/flows.db "$TB_DIR"/flows.db-*
		export SLUICED=$w/build/sluiced SLUICE=$w/build/sluice
		ev=ENV_$v
		read -r -a envs <<< "${!ev:-}"
		bn_sluice_up_env "${envs[@]}" >/dev/null ||
		    { echo "ab: sluiced up failed ($v)" >&2; exit 1; }
		# the binary running is the one meant
		[ "$(readlink "/proc/$TB_SLUICED_PID/exe")" = "$w/build/sluiced" ] ||
		    { echo "ab: sluiced is not $w/build/sluiced" >&2; exit 1; }
		pv=PRIO_$v
		if [ -n "${!pv:-}" ]; then
			# shellcheck disable=SC2086 # a command and its flags
			${!pv} -a -p 0 "$TB_SLUICED_PID" >/dev/null ||
			    { echo "ab: ${!pv} failed" >&2; exit 1; }
		fi
		bn_pairs "$v" "$PAIRS" "$MODE" "$CONC" "$SECS" "$TB_DIR/ab.txt" \
		    "$RATE"
	done
done
tb_sluiced_stop >/dev/null 2>&1
# shellcheck disable=SC2034 # read by testbed.sh's exit trap
TB_FINISHED=1
if [ "$MODE" = dns ]; then
	echo "dns (dnsperf -c 4 -q 100), $ROUNDS rounds of $PAIRS pairs of ${SECS} s loads"
	kind=cpu
elif [ -n "$RATE" ]; then
	echo "$MODE, $CONC client(s) at $RATE/s, $ROUNDS rounds of $PAIRS pairs of ${SECS} s loads"
	kind=lat
else
	echo "$MODE, $CONC clients, $ROUNDS rounds of $PAIRS pairs of ${SECS} s loads"
	kind=rate
fi
"$TB_PY" "$HERE/pairs.py" "$kind" "$TB_DIR/ab.txt" "A=$NAME_A" "B=$NAME_B"
