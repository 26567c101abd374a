#!/bin/bash
# log-scale: the log writer's CPU per row with many sandboxes and a grown
# log, at a fixed rate, with transactions of at most 512 rows (the cap
# before 2026-12-02) and at most 4,096 (the default since), alternating.
#
#   tests/bench/repro/log-scale.sh
#
# storebench (tests/bench/storebench.c) writes ROWS flow rows and then
# their ends, PHASES times, spread over SANDBOXES sandboxes, at RATE rows
# a second, through store.h as sluiced does; the log grows by ROWS flow
# rows a phase. Prints the writer's microseconds of CPU per flow row in
# each phase, the rows/s it kept up with, and the transactions it took.
# Environment: ROUNDS (2), ROWS (40000), PHASES (5), RATE (12000),
# SANDBOXES (1000), BATCHES ("512 4096"). About 40 s a run. No root.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
ROUNDS=${ROUNDS:-2}
ROWS=${ROWS:-40000}
PHASES=${PHASES:-5}
RATE=${RATE:-12000}
SANDBOXES=${SANDBOXES:-1000}
BATCHES=${BATCHES:-512 4096}
STOREBENCH=${STOREBENCH:-$REPO/build/storebench}
[ -x "$STOREBENCH" ] || make -C "$REPO" -s build/storebench >/dev/null ||
    { echo "log-scale: cannot build storebench" >&2; exit 1; }
DIR=$(mktemp -d /tmp/sluice-log-scale.XXXXXX)
trap 'rm -rf "$DIR"' EXIT
kinds=$(printf 'fe%.0s' $(seq "$PHASES"))

echo "# $SANDBOXES sandboxes, $RATE rows/s, $ROWS flow rows a phase"
echo "| at most | flow row, writer µs by phase | rows/s by phase | transactions |"
echo "| --- | --- | --- | --- |"
for r in $(seq "$ROUNDS"); do
	for b in $BATCHES; do
		rm -f "$DIR"/db*
		STOREBENCH_BATCH=$b "$STOREBENCH" "$DIR/db" "$kinds" "$ROWS" \
		    "$RATE" "$SANDBOXES" > "$DIR/out"
		awk -v b="$b" '
		/^flow/ { for (i = 1; i <= NF; i++) {
			split($i, kv, "=")
			if (kv[1] == "writer_us_per_row") us = us sep kv[2]
			if (kv[1] == "rows_per_s") rs = rs sep kv[2]
		  } sep = ", " }
		{ for (i = 1; i <= NF; i++) { split($i, kv, "=")
			if (kv[1] == "batches") t = kv[2] } }
		END { printf "| %s | %s | %s | %s |\n", b, us, rs, t }' "$DIR/out"
	done
done
