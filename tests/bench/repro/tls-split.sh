#!/bin/bash
# tls-split: what each part of sluice's work costs its TLS connection rate.
#
# Builds sluiced from HEAD with tls-split.patch applied (in a temporary
# git worktree; the patch is never part of a build that guards anything)
# and measures, on the bench's bed (tests/bench/lib.sh), TLS new
# connections/s with 16 clients under B1 and under S, alternating in
# pairs, with one part of S's work at a time left out:
#   base   the patched binary with nothing left out (S as shipped)
#   proof  no proof: the decided ClientHello goes out with the allow mark,
#          no server packet is copied, no ctnetlink mark change
#   log    no row for the TLS decisions (the writer's INSERT, the queue)
#   dpi    no nDPI flow (nothing kept for it or fed to it, `app` empty;
#          since b42973c most TLS connections are named from its cache)
#   all    the three at once: what is left is the two trips through the
#          queue, the hold and the parsing
# For each variant sluiced is restarted on the same bed; the variants
# are interleaved ROUNDS times, PAIRS pairs of SECS-second loads each.
# Prints one line a variant: the median S/B1 and its spread, and the
# median connection rates. Environment: ROUNDS (2), PAIRS (3), SECS (3),
# CONC (16), VARIANTS ("base proof log dpi all"), and BENCH_SLUICED_ARGS
# (more flags for sluiced, as in run.sh: "--kernel-syn on" leaves one
# trip). About 5 minutes with the defaults. Needs root, like the bench.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
ROUNDS=${ROUNDS:-2}
PAIRS=${PAIRS:-3}
SECS=${SECS:-3}
CONC=${CONC:-16}
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
		unset SLUICE_ABLATE_PROOF SLUICE_ABLATE_LOG SLUICE_ABLATE_DPI
		for x in "${envs[@]}"; do export "${x?}"; done
		bn_sluice_up "$TB_DIR/policy.json" >/dev/null 2>&1 ||
		    { echo "tls-split: sluiced up failed ($v)" >&2; exit 1; }
		unset SLUICE_ABLATE_PROOF SLUICE_ABLATE_LOG SLUICE_ABLATE_DPI
		got=$(tr '\0' '\n' < "/proc/$TB_SLUICED_PID/environ" |
		    grep '^SLUICE_ABLATE_' | sort | tr '\n' ' ')
		want=
		[ -z "$e" ] || want=$(printf '%s\n' "${envs[@]}" | sort | tr '\n' ' ')
		[ "$got" = "$want" ] ||
		    { echo "tls-split: sluiced has '$got', not '$want'" >&2; exit 1; }
		bn_pairs "$v" "$PAIRS" tls "$CONC" "$SECS" "$TB_DIR/split.txt"
	done
done
tb_sluiced_stop >/dev/null 2>&1
# shellcheck disable=SC2034 # read by testbed.sh's exit trap
TB_FINISHED=1
"$TB_PY" - "$TB_DIR/split.txt" "$VARIANTS" <<'EOF'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    v, b, s = line.split()
    if float(b) > 0 and float(s) > 0:
        rows.setdefault(v, []).append((float(b), float(s)))
base = None
print("| variant | S/B1 median (min-max) | B1 conn/s | S conn/s | pairs |")
print("| --- | --- | --- | --- | --- |")
for v in sys.argv[2].split():
    p = rows.get(v, [])
    if not p:
        print(f"| {v} | no valid pair | | | 0 |")
        continue
    r = [s / b for b, s in p]
    med = statistics.median(r)
    if v == "base":
        base = med
    extra = f", {med - base:+.3f} on base" if base is not None and v != "base" else ""
    print(f"| {v} | {med:.3f} ({min(r):.3f}-{max(r):.3f}){extra} | "
          f"{statistics.median(b for b, _ in p):,.0f} | "
          f"{statistics.median(s for _, s in p):,.0f} | {len(p)} |")
EOF
