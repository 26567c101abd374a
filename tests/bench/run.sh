#!/bin/bash
# run.sh: `make bench` — sluice against plain forwarding, conntrack, two proxies (tinyproxy, squid) and dnsmasq, interleaved, as ratios.
#
# Builds its own namespaces (tests/bench/lib.sh), runs every measurement
# BENCH_REPS times with the configurations interleaved (the order rotates
# each repetition, so drift on a shared machine falls on all of them
# alike), then the scale runs, and writes the table to stdout and to
# $BENCH_OUT/latest.md (raw samples: latest.jsonl). Every load is bounded
# in time; everything is torn down on exit, also on failure or ^C.
#
# Environment: SLUICED, SLUICE, CONNBENCH (programs; default build/),
# BENCH_REPS (5), BENCH_SECS (2, per load), BENCH_LAT_SECS (1.5),
# BENCH_SANDBOXES (1000), BENCH_SANDBOX_TIME (90 s for adding them),
# BENCH_ENTRIES (10000), BENCH_TRACKED (100000 connections in the
# gateway's conntrack for the memory target, filled for at most
# BENCH_FILL_SECS, 40), BENCH_DEADLINE (540 s: later phases are skipped,
# and say so, once a run has taken this long), BENCH_SLUICED_ARGS (more
# flags for sluiced, e.g. --kernel-syn off), BENCH_PERF (1: profile
# sluiced with perf(1) under load, if perf works; skipped once a run has
# taken BENCH_PERF_DEADLINE, 570 s), BENCH_OUT.
set -u
. "$(dirname "$0")/lib.sh"

CONNBENCH=${CONNBENCH:-$REPO/build/connbench}
BENCH_REPS=${BENCH_REPS:-5}
BENCH_SECS=${BENCH_SECS:-2}
BENCH_LAT_SECS=${BENCH_LAT_SECS:-1.5}
BENCH_LAT_RATE=${BENCH_LAT_RATE:-300}
BENCH_SANDBOXES=${BENCH_SANDBOXES:-1000}
BENCH_SANDBOX_TIME=${BENCH_SANDBOX_TIME:-90}
BENCH_ENTRIES=${BENCH_ENTRIES:-10000}
BENCH_TRACKED=${BENCH_TRACKED:-100000}
BENCH_FILL_SECS=${BENCH_FILL_SECS:-40}
BENCH_DEADLINE=${BENCH_DEADLINE:-540}
BENCH_PERF=${BENCH_PERF:-1}
BENCH_PERF_DEADLINE=${BENCH_PERF_DEADLINE:-570}
BENCH_OUT=${BENCH_OUT:-$REPO/tests/bench/results}

for t in "$SLUICED" "$SLUICE" "$CONNBENCH"; do
	[ -x "$t" ] || { echo "bench: $t is not built" >&2; exit 1; }
done
for t in iperf3 dnsperf tinyproxy squid dnsmasq nginx dig sqlite3; do
	command -v "$t" >/dev/null || {
		echo "bench: $t is missing (make deps installs it)" >&2; exit 1; }
done

BN_T0=$(date +%s)
elapsed() { echo $(( $(date +%s) - BN_T0 )); }
say() { printf '[bench %3ss] %s\n' "$(elapsed)" "$*" >&2; }
past_deadline() { [ "$(elapsed)" -ge "$BENCH_DEADLINE" ]; }

tb_init bench
RAW=$TB_DIR/raw.jsonl
: > "$RAW"
SKIPPED=""

# On exit: stop sluiced and remove the extra sandboxes' namespaces in one
# ip(8) process before the test bed's own tear-down, which would otherwise
# delete a thousand sandboxes one by one.
_bn_on_exit() {
	local rc=$?
	trap - EXIT
	if [ -n "${TB_SLUICED_PID:-}" ]; then
		kill -TERM "$TB_SLUICED_PID" 2>/dev/null
		for _ in $(seq 50); do
			kill -0 "$TB_SLUICED_PID" 2>/dev/null || break
			sleep 0.1
		done
	fi
	ip netns list 2>/dev/null | awk -v p="${P}-x" \
	    'index($1, p) == 1 { print "netns del " $1 }' |
	    ip -batch - 2>/dev/null
	(exit "$rc")
	_tb_on_exit
}
trap _bn_on_exit EXIT

# ---------------------------------------------------------------- policies

# policy FILE N: the S policy with N entries in all: a.test last (the
# worst place for a list scanned in order), iperf3's address, and other
# names, a fifth of them wildcards.
policy() {
	"$TB_PY" - "$1" "$2" "$BN_NAME" "$BN_IPERF" <<'EOF'
import json, sys
path, n, name, iperf = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
names = []
for i in range(n - 2):
    names.append(("*.w%d.bench.example" if i % 5 == 0 else "h%d.bench.example") % i)
names.append(name)
with open(path, "w") as f:
    json.dump({"network": {"allowedDomains": names},
               "sluice": {"allowedCidrs": [iperf + ":5201"]}}, f)
EOF
}

# ---------------------------------------------------------------- measurements

# emit JSON FIELDS...: one raw record: the JSON object from a tool with
# "key": value fields put in front.
emit() {
	local json=$1 f pre="" body
	shift
	for f in "$@"; do pre="$pre$f, "; done
	[ -n "$json" ] || json='{"failed": true}'
	body=${json#\{}
	[ "${body// /}" = "}" ] && { pre=${pre%, }; body="}"; }
	printf '{%s%s\n' "$pre" "$body" >> "$RAW"
}

st_get() { # st_get JSON PATH...: numbers out of `sluice status -j`
	"$TB_PY" -c '
import json, sys
d = json.loads(sys.argv[1])
out = []
for p in sys.argv[2:]:
    v = d
    for k in p.split("."):
        v = v.get(k, 0) if isinstance(v, dict) else 0
    out.append(str(int(v)))
print(" ".join(out))' "$@"
}

flows_max_id() { tb_sql "SELECT coalesce(max(id), 0) FROM flows"; }
dns_max_id() { tb_sql "SELECT coalesce(max(id), 0) FROM dns_queries"; }
lost_sum() { tb_sql "SELECT coalesce(sum(count), 0) FROM lost_records"; }

# thread_cpu PID: "main other" CPU ns (the event loop; the store writer).
thread_cpu() {
	local t v main=0 other=0
	for t in /proc/"$1"/task/*; do
		read -r v _ < "$t/schedstat" 2>/dev/null || continue
		if [ "${t##*/}" = "$1" ]; then main=$v; else other=$((other + v)); fi
	done
	echo "$main $other"
}

# s_before / s_after: the S-side counters around one load. s_after waits
# for the writer to catch up and emits the fields as S_EXTRA.
s_before() {
	local st
	st=$(bn_status)
	read -r SB_PKTS SB_WRITTEN SB_QUEUED SB_REJ SB_UNLOG SB_PAUSED SB_COPIES \
	    SB_KSNI <<< \
	    "$(st_get "$st" queue.packets store.written store.queued \
	    store.rejected queue.denied_unlogged dns.paused queue.verify_copies \
	    kernel_sni.approved)"
	SB_FLOW_ID=$(flows_max_id)
	SB_DNS_ID=$(dns_max_id)
	SB_LOST=$(lost_sum)
	read -r SB_QD SB_UD <<< "$(bn_queue_drops)"
	read -r SB_CPU_M SB_CPU_W <<< "$(thread_cpu "$BN_SLUICED_PID")"
	SB_DEPTH_MAX=0
	SB_HELD_MAX=0
	SB_SAMPLES=0
}

# s_watch SECS / s_watched: while a load runs, the writer's queue depth
# and the flows held for inspection (their largest), sampled by one
# `connbench -m status` process beside the load. It runs only during S's
# loads, so it must cost next to nothing: a loop of `sluice status` and
# two seds here every 250 ms took a tenth of S's TLS connection rate on
# the 2-CPU VM, which B1 and the proxies did not pay (a python3 start
# every 250 ms, before that, took a tenth of a CPU).
s_watch() {
	timeout $((${1%.*} + 15)) "$CONNBENCH" -m status -S "$TB_DIR/ctl.sock" \
	    -d "$1" > "$TB_DIR/watch.out" 2>/dev/null &
	SB_WATCH_PID=$!
}
s_watched() {
	local w
	wait "$SB_WATCH_PID"
	w=$(cat "$TB_DIR/watch.out")
	SB_DEPTH_MAX=$(sed -n 's/.*"s_depth_max": *\([0-9]*\).*/\1/p' <<< "$w")
	SB_HELD_MAX=$(sed -n 's/.*"s_held_max": *\([0-9]*\).*/\1/p' <<< "$w")
	SB_SAMPLES=$(sed -n 's/.*"s_samples": *\([0-9]*\).*/\1/p' <<< "$w")
	SB_DEPTH_MAX=${SB_DEPTH_MAX:-0}
	SB_HELD_MAX=${SB_HELD_MAX:-0}
	SB_SAMPLES=${SB_SAMPLES:-0}
}

s_after() {
	local t_end=$1 st pkts written queued rej unlog depth lag_ms=-1 qd ud
	local cpu_m cpu_w rows drows lost deny now paused copies ksni
	read -r cpu_m cpu_w <<< "$(thread_cpu "$BN_SLUICED_PID")"
	read -r qd ud <<< "$(bn_queue_drops)"
	# The writer's lag: from the load's end until every record queued by
	# then is committed (records queued later, such as ends of earlier
	# connections, do not count).
	local q_end=
	while :; do
		st=$(bn_status)
		read -r pkts written queued rej unlog depth <<< \
		    "$(st_get "$st" queue.packets store.written store.queued \
		    store.rejected queue.denied_unlogged store.depth)"
		now=$(tb_time_ms)
		[ -n "$q_end" ] || q_end=$queued
		if [ "$written" -ge "$q_end" ]; then
			lag_ms=$((now - t_end))
			break
		fi
		[ $((now - t_end)) -gt 10000 ] && break
		sleep 0.02
	done
	paused=$(st_get "$st" dns.paused)
	copies=$(st_get "$st" queue.verify_copies)
	# hellos let out in the kernel (--kernel-sni): how many took that path
	ksni=$(st_get "$st" kernel_sni.approved)
	rows=$(tb_sql "SELECT count(*) FROM flows WHERE id > $SB_FLOW_ID")
	drows=$(tb_sql "SELECT count(*) FROM dns_queries WHERE id > $SB_DNS_ID")
	deny=$(tb_sql "SELECT coalesce(group_concat(reason || ':' || n, ' '), '')
	    FROM (SELECT reason, count(*) AS n FROM flows WHERE id > $SB_FLOW_ID
	    AND verdict != 'allow' GROUP BY reason)")
	lost=$(lost_sum)
	S_EXTRA=("\"s_pkts\": $((pkts - SB_PKTS))" "\"s_rows\": ${rows:-0}"
	    "\"s_dns_rows\": ${drows:-0}"
	    "\"s_written\": $((written - SB_WRITTEN))"
	    "\"s_rejected\": $((rej - SB_REJ))" "\"s_denied_unlogged\": $((unlog - SB_UNLOG))"
	    "\"s_lost_records\": $((lost - SB_LOST))" "\"s_lag_ms\": $lag_ms"
	    "\"s_depth_max\": $SB_DEPTH_MAX" "\"s_denials\": \"$deny\""
	    "\"s_qdrop\": $((qd - SB_QD))" "\"s_udrop\": $((ud - SB_UD))"
	    "\"s_cpu_main_ns\": $((cpu_m - SB_CPU_M))"
	    "\"s_cpu_writer_ns\": $((cpu_w - SB_CPU_W))"
	    "\"s_dns_paused\": $((paused - SB_PAUSED))"
	    "\"s_copies\": $((${copies:-0} - ${SB_COPIES:-0}))"
	    "\"s_ksni_approved\": $((${ksni:-0} - ${SB_KSNI:-0}))"
	    "\"s_held_max\": $SB_HELD_MAX" "\"s_samples\": $SB_SAMPLES")
}

# conn CFG MODE CONC RATE SECS TAGS...: one connbench load from CFG's
# client, to a.test or to CONN_NAME at CONN_ADDR.
conn() {
	local cfg=$1 mode=$2 conc=$3 rate=$4 secs=$5 ns port=443 out pid t_end
	local -a args
	shift 5
	[ "$mode" = http ] && port=80
	ns=$(bn_client_ns "$cfg")
	args=(-m "$mode" -a "${CONN_ADDR:-$BN_HTTPS}" -p "$port"
	    -n "${CONN_NAME:-$BN_NAME}" -H "$TB_DIR/hello.bin"
	    -c "$conc" -d "$secs" -t 3000)
	[ "$rate" != 0 ] && args+=(-r "$rate")
	[ "$cfg" = P ] && args+=(-x "10.214.2.1:$BN_PROXY_PORT")
	[ "$cfg" = Q ] && args+=(-x "10.214.2.1:$BN_SQUID_PORT")
	if [ "$cfg" = S ]; then
		bn_resolve_s "${CONN_NAME:-}" "${CONN_ADDR:-}" >/dev/null 2>&1
		s_before
	fi
	# the latency runs (a fixed rate) are not sampled at all
	[ "$cfg" = S ] && [ "$rate" = 0 ] && s_watch "$secs"
	ip netns exec "$ns" "$CONNBENCH" "${args[@]}" > "$TB_DIR/cb.out" 2>"$TB_DIR/cb.err" &
	pid=$!
	wait "$pid"
	t_end=$(tb_time_ms)
	[ "$cfg" = S ] && [ "$rate" = 0 ] && s_watched
	out=$(cat "$TB_DIR/cb.out")
	if [ "$cfg" = S ]; then
		s_after "$t_end"
		emit "$out" "$@" "\"cfg\": \"$cfg\"" "${S_EXTRA[@]}"
	else
		emit "$out" "$@" "\"cfg\": \"$cfg\""
	fi
}

# bulk CFG STREAMS TAGS...: iperf3 upload for BENCH_SECS.
bulk() {
	local cfg=$1 n=$2 ns out
	shift 2
	ns=$(bn_client_ns "$cfg")
	[ "$cfg" = S ] && s_before
	out=$(ip netns exec "$ns" timeout $((${BENCH_SECS%.*} + 10)) iperf3 \
	    -c "$BN_IPERF" -p 5201 -t "$BENCH_SECS" -P "$n" -J 2>/dev/null |
	    "$TB_PY" -c '
import json, sys
try:
    d = json.load(sys.stdin)
    print(json.dumps({"gbps": d["end"]["sum_received"]["bits_per_second"] / 1e9,
        "retransmits": d["end"]["sum_sent"].get("retransmits", 0)}))
except Exception as e:
    print(json.dumps({"failed": True, "error": str(e)}))')
	if [ "$cfg" = S ]; then
		s_after "$(tb_time_ms)"
		emit "$out" "$@" "\"cfg\": \"$cfg\"" "${S_EXTRA[@]}"
	else
		emit "$out" "$@" "\"cfg\": \"$cfg\""
	fi
}

# dns CFG TAGS...: the DNS load (bn_dnsperf) for BENCH_SECS against S's
# resolver, D, Dc or Dl, with the server's CPU time.
dns() {
	local cfg=$1 pid out c0 c1 dpid
	shift
	pid=$(bn_dns_pid "$cfg")
	[ "$cfg" = S ] && s_before
	c0=$(bn_cpu_ns "$pid")
	bn_dnsperf "$cfg" "$BENCH_SECS" "$TB_DIR/dnsperf.out" &
	dpid=$!
	[ "$cfg" = S ] && s_watch "$BENCH_SECS"
	wait "$dpid"
	[ "$cfg" = S ] && s_watched
	c1=$(bn_cpu_ns "$pid")
	out=$(cat "$TB_DIR/dnsperf.out")
	out=$("$TB_PY" -c '
import json, re, sys
t = sys.argv[1]
def num(label):
    m = re.search(label + r":\s+([0-9.]+)", t)
    return float(m.group(1)) if m else None
done, qps = num("Queries completed"), num("Queries per second")
cpu = int(sys.argv[2])
r = {"qps": qps, "sent": num("Queries sent"), "completed": done,
     "lost": num("Queries lost"),
     "noerror": int((re.search(r"NOERROR (\d+)", t) or [0, 0])[1]),
     "cpu_ns": cpu, "cpu_us_per_query": cpu / 1000 / done if done else None}
if qps is None:
    r["failed"] = True
print(json.dumps(r))' "$out" "$((c1 - c0))")
	if [ "$cfg" = S ]; then
		s_after "$(tb_time_ms)"
		emit "$out" "$@" "\"cfg\": \"$cfg\"" "${S_EXTRA[@]}"
	else
		emit "$out" "$@" "\"cfg\": \"$cfg\""
	fi
}

# rotate N ITEMS...: the items, starting at the N-th (mod their count).
rotate() {
	local n=$1 i
	shift
	local -a a=("$@")
	for ((i = 0; i < ${#a[@]}; i++)); do
		printf '%s ' "${a[$(((i + n) % ${#a[@]}))]}"
	done
}

mem() { # mem TAG: sluiced's memory and what it tracks now
	local rss hwm ct flows
	read -r rss hwm <<< "$(bn_rss "$BN_SLUICED_PID")"
	ct=$(bn_ct_count "$TB_NETNS_GW")
	flows=$(tb_sql "SELECT count(*) FROM flows")
	emit '{}' "\"phase\": \"mem\"" "\"tag\": \"$1\"" "\"rss_kib\": $rss" \
	    "\"hwm_kib\": $hwm" "\"conntrack\": $ct" "\"flows_total\": ${flows:-0}" \
	    "\"sandboxes\": $(st_get "$(bn_status)" sandboxes)"
}

# ---------------------------------------------------------------- the run

rev=$(git -C "$REPO" describe --always --dirty 2>/dev/null)
emit '{}' "\"phase\": \"meta\"" "\"date\": \"$(date -u '+%Y-%m-%d %H:%M UTC')\"" \
    "\"rev\": \"${rev:-unknown}\"" \
    "\"machine\": \"$(nproc) CPUs ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo |
    head -n 1 | tr -d '"\\')), Linux $(uname -r)\""
say "bed: internet, B0, B1, P (tinyproxy), Q (squid), D and Dc (dnsmasq)"
bn_bed_up || { echo "bench: the test bed did not come up" >&2; exit 1; }
# The DNS load (*.w0.bench.example is an entry of every S policy here).
bn_dns_queries "$TB_DIR/queries.txt"
policy "$TB_DIR/policy-10.json" 10
policy "$TB_DIR/policy-big.json" "$BENCH_ENTRIES"
say "bed: sluiced and sandbox ${P}-s1"
bn_sluice_up "$TB_DIR/policy-10.json" || {
	echo "bench: sluiced did not come up" >&2; exit 1; }
mem start

for ((r = 1; r <= BENCH_REPS; r++)); do
	say "repetition $r of $BENCH_REPS"
	tag="\"phase\": \"main\", \"rep\": $r"
	for n in 1 2; do
		for c in $(rotate $r B0 B1 S); do
			bulk "$c" "$n" "$tag" "\"test\": \"bulk_$n\""
		done
	done
	for mode in tls http; do
		for conc in 4 16; do
			for c in $(rotate $r B0 B1 S P Q); do
				conn "$c" "$mode" "$conc" 0 "$BENCH_SECS" "$tag" \
				    "\"test\": \"${mode}_c$conc\""
			done
		done
		for c in $(rotate $r B0 B1 S P Q); do
			conn "$c" "$mode" 1 "$BENCH_LAT_RATE" "$BENCH_LAT_SECS" "$tag" \
			    "\"test\": \"${mode}_lat\""
		done
	done
	for c in $(rotate $r S D Dc Dl); do
		dns "$c" "$tag" "\"test\": \"dns\""
	done
done
mem after-main

# Scale 1: BENCH_SANDBOXES sandboxes (the add rate is measured too; the
# time for adding them is bounded), then S against B1 again.
if past_deadline; then
	SKIPPED="$SKIPPED sandboxes"
else
	say "scale: adding sandboxes up to $BENCH_SANDBOXES (at most ${BENCH_SANDBOX_TIME}s)"
	t0=$(tb_time_ms)
	added=1
	add_fail=0
	while [ "$added" -lt "$BENCH_SANDBOXES" ] &&
	    [ $(( $(tb_time_ms) - t0 )) -lt $((BENCH_SANDBOX_TIME * 1000)) ]; do
		if tb_sluice sandbox add "$(printf '%s-x%04d' "$P" "$added")" \
		    --policy "$TB_DIR/policy-10.json" >/dev/null 2>>"$TB_DIR/add.err"; then
			added=$((added + 1))
		else
			add_fail=$((add_fail + 1))
			[ "$add_fail" -ge 5 ] && break
		fi
	done
	t1=$(tb_time_ms)
	emit '{}' "\"phase\": \"sandbox_add\"" "\"sandboxes\": $added" \
	    "\"added\": $((added - 1))" "\"ms\": $((t1 - t0))" "\"failures\": $add_fail"
	say "scale: $added sandboxes ($((added - 1)) added in $((t1 - t0)) ms)"
	mem "sandboxes"
	for ((r = 1; r <= BENCH_REPS; r++)); do
		past_deadline && { SKIPPED="$SKIPPED sandboxes-runs-from-$r"; break; }
		for c in $(rotate $r B1 S); do
			conn "$c" http 16 0 "$BENCH_SECS" "\"phase\": \"sandboxes\", \"rep\": $r" \
			    "\"test\": \"http_c16\"" "\"sandboxes\": $added"
		done
	done
	mem after-sandboxes
fi

# Scale 2: 10 against BENCH_ENTRIES allowlist entries, swapped by
# `policy set` between interleaved runs.
if past_deadline; then
	SKIPPED="$SKIPPED entries"
else
	say "scale: 10 vs $BENCH_ENTRIES allowlist entries"
	for ((r = 1; r <= BENCH_REPS; r++)); do
		for e in $(rotate $r 10 big); do
			tb_sluice policy set "${P}-s1" "$TB_DIR/policy-$e.json" >/dev/null ||
			    say "policy set $e failed"
			[ "$e" = big ] && e=$BENCH_ENTRIES
			conn S http 16 0 "$BENCH_SECS" "\"phase\": \"entries\", \"rep\": $r" \
			    "\"test\": \"http_c16\"" "\"entries\": $e"
		done
	done
	tb_sluice policy set "${P}-s1" "$TB_DIR/policy-10.json" >/dev/null
	mem after-entries
fi

# Scale 3: the memory target's flow count. HTTP load through S
# until the gateway's conntrack holds BENCH_TRACKED connections (closed
# ones stay 120 s in TIME_WAIT), at most BENCH_FILL_SECS; then sluiced's
# memory with them, their flow ends arriving, every sandbox present. A
# new connection on a tuple in TIME_WAIT takes its entry over, connect()
# picks even ports while they are free, and every sandbox is NATed to the
# one uplink address: a server address and port holds about 32,000 of
# them. So the sandbox's policy also allows *.fill.test for the fill, and
# the load goes to a.test and then to n1..n3.fill.test, each at an
# address of its own on the same nginx.
if past_deadline; then
	SKIPPED="$SKIPPED tracked"
else
	say "scale: filling conntrack to $BENCH_TRACKED connections"
	"$TB_PY" - "$TB_DIR/policy-10.json" "$TB_DIR/policy-fill.json" <<'EOF'
import json, sys
p = json.load(open(sys.argv[1]))
p["network"]["allowedDomains"].append("*.fill.test")
json.dump(p, open(sys.argv[2], "w"))
EOF
	tb_sluice policy set "${P}-s1" "$TB_DIR/policy-fill.json" >/dev/null ||
	    say "policy set fill failed"
	fill=("$BN_NAME $BN_HTTPS")
	i=1
	for a in $BN_FILL_ADDRS; do
		fill+=("n$i.fill.test $a")
		i=$((i + 1))
	done
	t0=$(tb_time_ms)
	i=0
	while [ "$(bn_ct_count "$TB_NETNS_GW")" -lt "$BENCH_TRACKED" ] &&
	    [ $(( $(tb_time_ms) - t0 )) -lt $((BENCH_FILL_SECS * 1000)) ]; do
		read -r fill_name fill_addr <<< "${fill[$((i % ${#fill[@]}))]}"
		CONN_NAME=$fill_name CONN_ADDR=$fill_addr conn S http 16 0 3 \
		    '"phase": "fill"' '"test": "http_c16"'
		i=$((i + 1))
	done
	tb_sluice policy set "${P}-s1" "$TB_DIR/policy-10.json" >/dev/null
	mem tracked
fi

# Profiles of sluiced under the load of the targets it misses (TLS, 16
# clients) and under DNS, for the README's "what limits it". They take
# about 15 s, so they have a deadline of their own, BENCH_PERF_DEADLINE,
# that still ends the run within 10 minutes.
PERF_TXT=""
profile() { # profile LABEL CMD...: perf record sluiced for 2 s while CMD runs
	local label=$1 pid
	shift
	"$@" >/dev/null 2>&1 &
	pid=$!
	sleep 0.3
	if perf record -q -g -p "$BN_SLUICED_PID" -o "$TB_DIR/perf.data" \
	    -- sleep 2 >/dev/null 2>&1; then
		PERF_TXT=$TB_DIR/perf.txt
		{
			echo "# perf record -g -p SLUICED, 2 s under $label"
			echo "## by thread (sluiced: the event loop; sluice-store: the writer)"
			perf report -i "$TB_DIR/perf.data" --stdio --no-children -g none \
			    --sort comm 2>/dev/null | grep -v '^#' | grep -v '^$' | head -5
			echo "## by shared object"
			perf report -i "$TB_DIR/perf.data" --stdio --no-children -g none \
			    --sort dso 2>/dev/null | grep -v '^#' | grep -v '^$' | head -8
			echo "## kernel entry points, with everything they call"
			perf report -i "$TB_DIR/perf.data" --stdio --children -g none \
			    --sort sym 2>/dev/null | grep -E '\[k\] (__sys_(sendto|recvmsg|recvfrom|sendmsg|sendmmsg|socket|connect)|do_recvmmsg|nfqnl_reinject|__schedule|__x64_sys_(close|pwrite64|fdatasync|epoll_wait|poll|getrandom))$' |
			    awk '{ print "  " $1, $NF }'
			echo "## top symbols (self)"
			perf report -i "$TB_DIR/perf.data" --stdio --no-children -g none \
			    --sort dso,sym 2>/dev/null | grep -v '^#' | grep -v '^$' | head -20
			echo
		} >> "$TB_DIR/perf.txt"
	fi
	wait "$pid"
}
if [ "$BENCH_PERF" = 1 ] && command -v perf >/dev/null &&
    [ "$(elapsed)" -ge "$BENCH_PERF_DEADLINE" ]; then
	SKIPPED="$SKIPPED perf (perf-sluiced.txt is an older run's)"
elif [ "$BENCH_PERF" = 1 ] && command -v perf >/dev/null; then
	say "perf: sluiced under tls_c16 and under dnsperf"
	bn_resolve_s >/dev/null 2>&1
	profile "TLS, 16 clients (connbench)" ip netns exec "${P}-s1" \
	    "$CONNBENCH" -m tls -a "$BN_HTTPS" -p 443 -n "$BN_NAME" \
	    -H "$TB_DIR/hello.bin" -c 16 -d 3 -t 3000
	profile "DNS (dnsperf -c 4 -q 100, 100 allowed names, A)" ip netns exec "${P}-s1" \
	    dnsperf -s "$BN_S_GW" -d "$TB_DIR/queries.txt" -l 3 -c 4 -q 100
fi

# ---------------------------------------------------------------- the report

mkdir -p "$BENCH_OUT"
cp "$RAW" "$BENCH_OUT/latest.jsonl"
[ -n "$PERF_TXT" ] && cp "$PERF_TXT" "$BENCH_OUT/perf-sluiced.txt"
"$TB_PY" "$BENCH_LIB/report.py" --raw "$RAW" --secs "$BENCH_SECS" \
    --elapsed "$(elapsed)" --skipped "$SKIPPED" \
    ${PERF_TXT:+--perf "$PERF_TXT"} > "$BENCH_OUT/latest.md" || {
	echo "bench: report.py failed" >&2; exit 1; }
cat "$BENCH_OUT/latest.md"
say "done; results in $BENCH_OUT/latest.md"
TB_FINISHED=1
exit 0
