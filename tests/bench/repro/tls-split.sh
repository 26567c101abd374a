#!/bin/bash
# tls-split: what each part of sluice's work costs its TLS connection rate.
#
# Builds sluiced from HEAD with tls-split.patch applied (in a temporary
# git worktree; the patch is never part of a build that guards anything)
# and measures, on the bench's bed (tests/bench/lib.sh), TLS new
# connections/s with 16 clients under B1 and under S, alternating in
# pairs, with one part of S's work at a time left out:
#   base   the patched binary with nothing left out (S as shipped)
#   proof  no proof: the decided ClientHello goes out with the allow mark
#          (under --kernel-sni, the mark is changed to allow at once),
#          no server packet is copied
#   log    no row for the TLS decisions (the writer's INSERT, the queue)
#   dpi    no nDPI flow (nothing kept for it or fed to it, `app` empty;
#          since b42973c most TLS connections are named from its cache)
#   all    the three at once: what is left is the two trips through the
#          queue, the hold and the parsing
# For each variant sluiced is restarted on the same bed; the variants
# are interleaved ROUNDS times, PAIRS pairs of SECS-second loads each.
# Prints one line a variant: the median S/B1 and its spread, and the
# median connection rates. Environment: ROUNDS (2), PAIRS (3), SECS (3),
# CONC (16), VARIANTS ("base proof log dpi all"), BENCH_SLUICED_ARGS
# (more flags for sluiced, as in run.sh: "--kernel-syn on" leaves one
# trip), and RATE (as in ab.sh: the setup latency S adds to B1's, of CONC
# clients, 1 unless set, at RATE connections/s, instead of the rate).
# About 5 minutes with the defaults. Needs root, like the bench.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
ROUNDS=${ROUNDS:-2}
PAIRS=${PAIRS:-3}
SECS=${SECS:-3}
RATE=${RATE:-}
if [ -n "$RATE" ]; then CONC=${CONC:-1}; else CONC=${CONC:-16}; fi
VARIANTS=${VARIANTS:-base proof log dpi all}
CONNBENCH=${CONNBENCH:-$REPO/build/connbench}
[ -x "$CONNBENCH" ] || make -C "$REPO" -s build/connbench >/dev/null ||
    { echo "tls-split: cannot build connbench" >&2; exit 1; }

WT=$(mktemp -d /tmp/sluice-tls-split.XXXXXX)
git -C "$REPO" worktree add -q --detach "$WT" HEAD ||
    { echo "tls-split: git worktree add failed" >&2; rmdir "$WT"; exit 1; }
cleanup_wt() { git -C "$REPO" worktree remove --force "$WT" 2>/dev/null; }
if ! git -C "$WT" apply "$HERE/tls-split.patch"; then
	echo "tls-split: tls-split.patch no longer applies to HEAD; mend it" >&2
	cleanup_wt
	exit 1
fi
if ! make -C "$WT" -s -j2 build/sluiced build/sluice >/dev/null; then
	echo "tls-split: the patched build failed" >&2
	cleanup_wt
	exit 1
fi
export SLUICED=$WT/build/sluiced SLUICE=$WT/build/sluice

. "$REPO/tests/bench/lib.sh"
bn_repro_up tls-split

variant_env() {
	case $1 in
	base) ;;
	proof) echo SLUICE_ABLATE_PROOF=1 ;;
	log) echo SLUICE_ABLATE_LOG=1 ;;
	dpi) echo SLUICE_ABLATE_DPI=1 ;;
	all) echo SLUICE_ABLATE_PROOF=1 SLUICE_ABLATE_LOG=1 SLUICE_ABLATE_DPI=1 ;;
	*) echo "tls-split: no variant $1" >&2; return 1 ;;
	esac
}

: > "$TB_DIR/split.txt"
for ((r = 0; r < ROUNDS; r++)); do
	for v in $VARIANTS; do
		e=$(variant_env "$v") || exit 1
		read -r -a envs <<< "$e"
		tb_sluiced_stop >/dev/null 2>&1
		bn_sluice_up_env "${envs[@]}" ||
		    { echo "tls-split: sluiced up failed ($v)" >&2; exit 1; }
		got=$(tr '\0' '\n' < "/proc/$TB_SLUICED_PID/environ" |
		    grep -c '^SLUICE_ABLATE_')
		[ "$got" = "${#envs[@]}" ] ||
		    { echo "tls-split: sluiced has $got SLUICE_ABLATE_ variables, not ${#envs[@]}" >&2; exit 1; }
		bn_pairs "$v" "$PAIRS" tls "$CONC" "$SECS" "$TB_DIR/split.txt" \
		    "$RATE"
	done
done
tb_sluiced_stop >/dev/null 2>&1
# shellcheck disable=SC2034 # read by testbed.sh's exit trap
TB_FINISHED=1
kind=rate
[ -n "$RATE" ] && kind=lat
names=()
for v in $VARIANTS; do names+=("$v=$v"); done
"$TB_PY" "$HERE/pairs.py" "$kind" "$TB_DIR/split.txt" --base base "${names[@]}"
