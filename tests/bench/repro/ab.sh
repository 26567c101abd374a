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
# Environment: ROUNDS (3), PAIRS (4), SECS (3), CONC (16), MODE (tls, or
# http), BENCH_SLUICED_ARGS (more flags for sluiced, as in run.sh),
# ARGS_A and ARGS_B (flags for A's sluiced only, for B's only: one build
# with and without a switch is `ARGS_B="--kernel-sni on" ab.sh HEAD HEAD`),
# RATE (unset: the rate with CONC clients is measured; set: the setup
# latency of one client at RATE connections/s instead, and what S adds to
# B1's p50 and p99, per pair).
# About 3 minutes with the defaults. Needs root, like the bench.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
REV_A=${1:-HEAD~1}
REV_B=${2:-HEAD}
ROUNDS=${ROUNDS:-3}
PAIRS=${PAIRS:-4}
SECS=${SECS:-3}
CONC=${CONC:-16}
MODE=${MODE:-tls}
RATE=${RATE:-}
case $MODE in
tls|http) ;;
*) echo "ab: MODE is tls or http, not $MODE" >&2; exit 2 ;;
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

# lat CFG: one client at RATE/s for SECS; prints its p50 and p99 (µs)
lat() {
	bn_load "$1" "$MODE" 1 "$SECS" "$RATE" && "$TB_PY" -c 'import json, sys
o = json.load(open(sys.argv[1]))
if o["errors"] == 0 and o["ok"] > 0:
    print(o["lat_p50_us"], o["lat_p99_us"])' "$TB_DIR/cb.out"
}
# lat_pairs LABEL: PAIRS pairs of lat under B1 and S, alternating which
# goes first; appends "LABEL B1-P50 B1-P99 S-P50 S-P99" to ab.txt
lat_pairs() {
	local i b s
	for ((i = 0; i < PAIRS; i++)); do
		# shellcheck disable=SC2119 # a.test, its default
		bn_resolve_s >/dev/null 2>&1
		if ((i % 2)); then
			s=$(lat S) b=$(lat B1)
		else
			b=$(lat B1) s=$(lat S)
		fi
		[ -n "$b" ] && [ -n "$s" ] && echo "$1 $b $s" >> "$TB_DIR/ab.txt"
	done
}

: > "$TB_DIR/ab.txt"
for ((r = 0; r < ROUNDS; r++)); do
	for v in A B; do
		if [ "$v" = A ]; then
			w=$WT_A BENCH_SLUICED_ARGS="$BASE_ARGS ${ARGS_A:-}"
		else
			w=$WT_B BENCH_SLUICED_ARGS="$BASE_ARGS ${ARGS_B:-}"
		fi
		tb_sluiced_stop >/dev/null 2>&1
		export SLUICED=$w/build/sluiced SLUICE=$w/build/sluice
		bn_sluice_up "$TB_DIR/policy.json" >/dev/null 2>&1 ||
		    { echo "ab: sluiced up failed ($v)" >&2; exit 1; }
		# the binary running is the one meant
		[ "$(readlink "/proc/$TB_SLUICED_PID/exe")" = "$w/build/sluiced" ] ||
		    { echo "ab: sluiced is not $w/build/sluiced" >&2; exit 1; }
		if [ -n "$RATE" ]; then
			lat_pairs "$v"
		else
			bn_pairs "$v" "$PAIRS" "$MODE" "$CONC" "$SECS" "$TB_DIR/ab.txt"
		fi
	done
done
tb_sluiced_stop >/dev/null 2>&1
# shellcheck disable=SC2034 # read by testbed.sh's exit trap
TB_FINISHED=1
if [ -n "$RATE" ]; then
	echo "$MODE, 1 client at $RATE/s, $ROUNDS rounds of $PAIRS pairs of ${SECS} s loads"
	kind=lat
else
	echo "$MODE, $CONC clients, $ROUNDS rounds of $PAIRS pairs of ${SECS} s loads"
	kind=rate
fi
# ab.txt: "LABEL B1-RATE S-RATE" (rate) or "LABEL B1-P50 B1-P99 S-P50
# S-P99" (lat) a pair; a pair with a 0 (a failed load) is left out
"$TB_PY" - "$kind" "$TB_DIR/ab.txt" "$NAME_A" "$NAME_B" <<'EOF'
import statistics, sys
kind, path, names = sys.argv[1], sys.argv[2], sys.argv[3:5]
rows = {}
for line in open(path):
    v, *f = line.split()
    f = [float(x) for x in f]
    if all(x > 0 for x in f):
        rows.setdefault(v, []).append(f)
def spread(xs, fmt):
    return (f"{statistics.median(xs):{fmt}} "
            f"({min(xs):{fmt}}-{max(xs):{fmt}})")
def med(p, i):
    return f"{statistics.median(r[i] for r in p):,.0f}"
if kind == "rate":
    head = ["S/B1 median (min-max)", "B1 conn/s", "S conn/s"]
    def cells(p):
        return [spread([s / b for b, s in p], ".3f"), med(p, 0), med(p, 1)]
else:
    head = ["added p50, µs", "added p99, µs", "B1 p50 / p99", "S p50 / p99"]
    def cells(p):
        return [spread([r[2] - r[0] for r in p], ".0f"),
                spread([r[3] - r[1] for r in p], ".0f"),
                f"{med(p, 0)} / {med(p, 1)}", f"{med(p, 2)} / {med(p, 3)}"]
print("| build | " + " | ".join(head) + " | pairs |")
print("|" + " --- |" * (len(head) + 2))
for v, name in zip("AB", names):
    p = rows.get(v, [])
    c = cells(p) if p else ["no valid pair"] + [""] * (len(head) - 1)
    print(f"| {name} | " + " | ".join(c) + f" | {len(p)} |")
EOF
