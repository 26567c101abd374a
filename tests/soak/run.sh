#!/bin/bash
# run.sh: `make soak` — a bounded soak of sluiced: connections and DNS queries from several sandboxes, then memory, descriptors, rows and the far side checked.
#
# Builds its own test bed (tests/lib/testbed.sh) with SOAK_SANDBOXES
# sandboxes (4). Each runs one connection client and one DNS client
# (tests/soak/soakload.c) for about SOAK_SECS seconds, together
# SOAK_CONNS connections (300,000) and SOAK_DNS queries (1,000,000), half
# of the connections allowed and half denied:
#
#   192.0.2.10:7000  allow  allowed_domain ("a.test:7000", bound by the
#                           sandbox's own queries for a.test)
#   192.0.2.20:7000  allow  allowed_cidr
#   192.0.2.20:7001  deny   port_not_allowed (the sink listens there too,
#                           to catch anything let through)
#   203.0.113.66:5000-5001  deny  no_dns_binding (the attacker host)
#
# and queries, by tenths: 4 a.test A (allowed; the cache answers all but a
# few), 1 AAAA (no_ipv6), 4 new names under exfil.evil.test (NXDOMAIN,
# never forwarded), 1 TXT (REFUSED).
# sluiced's VmRSS and open descriptors are sampled every SOAK_SAMPLE_S
# seconds from the start of the load to SOAK_SETTLE_S after its end. Then:
#   - memory and descriptors are back near their values after warm-up
#     (the first sample at least SOAK_WARMUP_S into the load): descriptors
#     other than the resolver's upstream sockets within 2, those at most 8
#     (the pool's bound for one upstream), VmRSS within max(8 MiB, 25%);
#   - every attempt has its row: per sandbox, flows rows = connection
#     attempts (denied ones, which fail at the client, included) and
#     dns_queries rows = queries sent; verdicts and reasons as expected;
#     lost_records empty; every allow row has its end counters (from
#     conntrack's destroy event);
#   - the attacker host received no packet at all, the sink no connection
#     on the denied port and no "soak-deny" bytes.
# Prints a summary and writes it to SOAK_OUT/latest.md (tests/soak/results).
# Exit 0 if every check passed, 1 otherwise.
#
# Environment: SLUICED, SLUICE (default build/), SOAKLOAD (built from
# soakload.c into the run's directory if unset), SOAK_CONNS, SOAK_DNS,
# SOAK_SECS (240), SOAK_SANDBOXES (4), SOAK_WARMUP_S (20),
# SOAK_SAMPLE_S (10), SOAK_SETTLE_S (35: past the flow table's 30 s for
# denials), SOAK_CONC (64 connections and 64 queries in flight per client),
# SOAK_OUT, TB_KEEP=1 to keep the run's directory (and its database),
# SOAK_PCAP=1 to capture the headers of every packet to or from port
# 7000 in the gateway's namespace, on every interface (gw.pcap: the
# sandbox side and the uplink, before and after the NAT) and in the
# internet's (inet.pcap), to tell who sent a reset; with TB_KEEP=1. The
# TCP counters of the gateway's and the internet's namespaces (nstat) are
# kept in any case (gw.nstat, inet.nstat).
set -u
. "$(dirname "$0")/../lib/testbed.sh"

SOAK_CONNS=${SOAK_CONNS:-300000}
SOAK_DNS=${SOAK_DNS:-1000000}
SOAK_SECS=${SOAK_SECS:-240}
SOAK_SANDBOXES=${SOAK_SANDBOXES:-4}
SOAK_WARMUP_S=${SOAK_WARMUP_S:-20}
SOAK_SAMPLE_S=${SOAK_SAMPLE_S:-10}
SOAK_SETTLE_S=${SOAK_SETTLE_S:-35}
SOAK_CONC=${SOAK_CONC:-64}
SOAK_OUT=${SOAK_OUT:-$REPO/tests/soak/results}
SINK_A=192.0.2.10	# a.test's address
SINK_B=192.0.2.20

if [ "$(id -u)" != 0 ]; then
	echo "soak: builds network namespaces; run as root" >&2
	exit 1
fi
for t in "$SLUICED" "$SLUICE"; do
	[ -x "$t" ] || { echo "soak: $t is not built (make all)" >&2; exit 1; }
done
for t in sqlite3 dig dnsmasq nginx cc; do
	command -v "$t" >/dev/null || { echo "soak: $t is missing (make deps)" >&2; exit 1; }
done

T0=$(date +%s)
say() { printf '[soak %3ss] %s\n' "$(( $(date +%s) - T0 ))" "$*" >&2; }

tb_init soak
if [ -z "${SOAKLOAD:-}" ]; then
	SOAKLOAD=$TB_DIR/soakload
	cc -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -o "$SOAKLOAD" \
	    "$REPO/tests/soak/soakload.c" || { echo "soak: cannot build soakload" >&2; exit 1; }
fi
say "test bed"
tb_internet_up || { echo "soak: the test bed did not come up" >&2; exit 1; }
tb_sluiced_start || { echo "soak: sluiced did not start" >&2; exit 1; }
SPID=$TB_SLUICED_PID

_tb_bg "$TB_NETNS_INET" sink "$TB_DIR/sink.log" "$SOAKLOAD" sink \
    -o "$TB_DIR/sink.json" "$SINK_A:7000" "$SINK_B:7000" "$SINK_B:7001"
_tb_wait_for "the sink" "$TB_DIR/sink.log" test -s "$TB_DIR/sink.json" || exit 1

cat > "$TB_DIR/policy.json" <<EOF
{"network": {"allowedDomains": ["a.test:7000"]},
 "sluice": {"allowedCidrs": ["$SINK_B:7000"]}}
EOF
declare -a SB ADDR GW
for i in $(seq "$SOAK_SANDBOXES"); do
	tb_sandbox_add "s$i" "$TB_DIR/policy.json" >/dev/null ||
	    { echo "soak: sandbox s$i" >&2; exit 1; }
	SB[$i]="${P}-s$i"
done
tb_sluice sandbox list -j > "$TB_DIR/sandboxes.json"
for i in $(seq "$SOAK_SANDBOXES"); do
	read -r ADDR[$i] GW[$i] <<< "$("$TB_PY" -c '
import json, sys
s = [x for x in json.load(open(sys.argv[1])) if x["name"] == sys.argv[2]][0]
print(s["addr"].split("/")[0], s["gateway"])' "$TB_DIR/sandboxes.json" "${SB[$i]}")"
	# bind a.test for this sandbox before its first connection
	out=$(tb_in "s$i" dig +short +time=2 +tries=2 @"${GW[$i]}" a.test A)
	[ "$out" = "$SINK_A" ] || { echo "soak: s$i cannot resolve a.test ($out)" >&2; exit 1; }
done

# ---------------------------------------------------------------- the load

rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$SPID/status"; }
nfds() { ls "/proc/$SPID/fd" | wc -l; }
# The resolver's upstream sockets: a pool of at most 8 per upstream, opened
# when first needed and replaced as they age, so their number moves with
# how many questions went upstream lately (fewer since answers are
# cached); they are counted apart from the other descriptors.
nups() {
	ip netns exec "$TB_NETNS_GW" ss -Hunp state established \
	    '( dport = :53 )' 2>/dev/null | grep -c "pid=$SPID,"
}
store_depth() {
	tb_sluice status -j | "$TB_PY" -c '
import json, sys
d = json.load(sys.stdin)["store"]
print(d["depth"], d["queued"], d["written"])'
}
SERIES=$TB_DIR/series
: > "$SERIES"
sample() {	# sample PHASE: "seconds phase rss_kb fds depth upstream_socks"
	local d
	read -r d _ <<< "$(store_depth)"
	printf '%s %s %s %s %s %s\n' "$(( $(date +%s) - LOAD_T0 ))" "$1" \
	    "$(rss_kb)" "$(nfds)" "${d:-?}" "$(nups)" >> "$SERIES"
}

per_conn=$(( SOAK_CONNS / SOAK_SANDBOXES ))
per_dns=$(( SOAK_DNS / SOAK_SANDBOXES ))
crate=$(awk -v n="$per_conn" -v s="$SOAK_SECS" 'BEGIN { printf "%.1f", n / s }')
drate=$(awk -v n="$per_dns" -v s="$SOAK_SECS" 'BEGIN { printf "%.1f", n / s }')
deadline=$(( SOAK_SECS * 2 + 30 ))
say "load: $SOAK_SANDBOXES sandboxes, each $per_conn connections at $crate/s and $per_dns queries at $drate/s"
# rows from before the load (the priming queries) are not counted
wait_writer() {
	local depth queued written
	for _ in $(seq 100); do
		read -r depth queued written <<< "$(store_depth)"
		[ "$depth" = 0 ] && [ "$queued" = "$written" ] && return 0
		sleep 0.2
	done
	return 1
}
wait_writer
# UDP datagrams a namespace's kernel dropped because a socket's buffer was
# full: "InErrors RcvbufErrors" of /proc/net/snmp
udp_drops() {
	ip netns exec "$1" awk '/^Udp:/ && $2 ~ /^[0-9]/ { print $4, $6 }' /proc/net/snmp
}
read -r GW_UDP_INERR0 GW_UDP_RCVBUF0 <<< "$(udp_drops "$TB_NETNS_GW")"
read -r _ UP_UDP_RCVBUF0 <<< "$(udp_drops "$TB_NETNS_INET")"
# the gateway's conntrack statistics, summed over CPUs: "clashres invalid
# insert_failed drop early_drop"
ct_stats() {
	local c=0 i=0 f=0 d=0 e=0
	local -a x
	while read -r -a x; do
		[ "${x[0]}" = entries ] && continue
		c=$((c + 16#${x[1]})) i=$((i + 16#${x[4]})) f=$((f + 16#${x[9]}))
		d=$((d + 16#${x[10]})) e=$((e + 16#${x[11]}))
	done < <(ip netns exec "$TB_NETNS_GW" cat /proc/net/stat/nf_conntrack)
	echo "$c $i $f $d $e"
}
read -r CT0_CLASH CT0_INVALID CT0_FAILED CT0_DROP CT0_EARLY <<< "$(ct_stats)"
FLOW_ID0=$(tb_sql "SELECT coalesce(max(id), 0) FROM flows")
if [ "${SOAK_PCAP:-0}" = 1 ]; then
	command -v tcpdump >/dev/null || { echo "soak: SOAK_PCAP needs tcpdump" >&2; exit 1; }
	for ns in "$TB_NETNS_GW" "$TB_NETNS_INET"; do
		_tb_bg "$ns" "tcpdump-$ns" "$TB_DIR/tcpdump.log" tcpdump -n -i any \
		    -s 96 -B 16384 -w "$TB_DIR/${ns##*-}.pcap" \
		    "tcp and port 7000"
	done
	sleep 1
fi
DNS_ID0=$(tb_sql "SELECT coalesce(max(id), 0) FROM dns_queries")
LOAD_T0=$(date +%s)
sample start
clients=""
for i in $(seq "$SOAK_SANDBOXES"); do
	# each sandbox starts its source ports elsewhere, as unrelated
	# clients would (in step, the NAT to the one uplink address would
	# remap nearly every connection)
	ip netns exec "${SB[$i]}" "$SOAKLOAD" conn -s "${ADDR[$i]}" -n "$per_conn" \
	    -r "$crate" -c "$SOAK_CONC" -t 5000 -d "$deadline" \
	    -p $(( 1024 + (i - 1) * 16000 % 64000 )) \
	    "$SINK_A:7000/allow" "$SINK_B:7001/deny" "$SINK_B:7000/allow" \
	    "$TB_ADDR_ATK:5000/deny" "$SINK_A:7000/allow" "$SINK_B:7001/deny" \
	    "$SINK_B:7000/allow" "$TB_ADDR_ATK:5001/deny" \
	    > "$TB_DIR/conn.$i.json" 2> "$TB_DIR/conn.$i.err" &
	clients="$clients $!"
	_tb_record $! "conn-$i"
	ip netns exec "${SB[$i]}" "$SOAKLOAD" dns -s "${GW[$i]}" -n "$per_dns" \
	    -r "$drate" -c "$SOAK_CONC" -t 4000 -d "$deadline" \
	    -z "x$i.exfil.evil.test" -a a.test \
	    > "$TB_DIR/dns.$i.json" 2> "$TB_DIR/dns.$i.err" &
	clients="$clients $!"
	_tb_record $! "dns-$i"
done
running() {
	local p
	for p in $clients; do kill -0 "$p" 2>/dev/null && return 0; done
	return 1
}
next=$SOAK_SAMPLE_S
while running; do
	sleep 1
	el=$(( $(date +%s) - LOAD_T0 ))
	if [ "$el" -ge "$next" ]; then
		sample load
		next=$(( next + SOAK_SAMPLE_S ))
		[ $(( el % 60 )) -lt "$SOAK_SAMPLE_S" ] &&
		    say "load running, $(tail -n 1 "$SERIES" | awk '{ print "VmRSS " $3 " kB, " $4 " fds, writer queue " $5 }')"
	fi
done
for p in $clients; do wait "$p"; done
LOAD_S=$(( $(date +%s) - LOAD_T0 ))
say "load done in ${LOAD_S}s; settling for ${SOAK_SETTLE_S}s"
sample end
settle_end=$(( $(date +%s) + SOAK_SETTLE_S ))
while [ "$(date +%s)" -lt "$settle_end" ]; do
	sleep "$SOAK_SAMPLE_S"
	sample settle
done
# Conntrack reaps expired entries lazily, its GC up to a minute apart
# when little expires, and an entry's destroy event (its row's end) comes
# only then; listing the table reaps them at once (scenario 43 does the
# same). The connections ended with resets well over CLOSE's 10 s ago.
ip netns exec "$TB_NETNS_GW" conntrack -L >/dev/null 2>&1
# the writer must have caught up before rows are counted
sleep 1
wait_writer
sample final
tb_sluice status -j > "$TB_DIR/status.json"
cp "$TB_DIR/sink.json" "$TB_DIR/sink.final.json"
read -r a b <<< "$(udp_drops "$TB_NETNS_GW")"
echo "$((a - GW_UDP_INERR0)) $((b - GW_UDP_RCVBUF0))" > "$TB_DIR/udp_drops"
sb_drops=0
for i in $(seq "$SOAK_SANDBOXES"); do
	read -r _ b <<< "$(udp_drops "${SB[$i]}")"
	sb_drops=$((sb_drops + b))
done
read -r _ b <<< "$(udp_drops "$TB_NETNS_INET")"
echo "$sb_drops $((b - UP_UDP_RCVBUF0))" >> "$TB_DIR/udp_drops"
for ns in "$TB_NETNS_GW" "$TB_NETNS_INET"; do
	ip netns exec "$ns" nstat -asz > "$TB_DIR/${ns##*-}.nstat" 2>/dev/null
done
read -r a b c d e <<< "$(ct_stats)"
echo "$((a - CT0_CLASH)) $((b - CT0_INVALID)) $((c - CT0_FAILED)) $((d - CT0_DROP)) $((e - CT0_EARLY))" \
    > "$TB_DIR/ct_stats"

# ---------------------------------------------------------------- counting

say "counting rows"
tb_sql "SELECT sandbox, dst_ip || ':' || dst_port, verdict, reason, count(*)
    FROM flows WHERE id > $FLOW_ID0 AND proto = 'tcp'
    GROUP BY 1, 2, 3, 4" > "$TB_DIR/flow_rows"
tb_sql "SELECT sandbox, qtype, CASE WHEN qname LIKE '%.exfil.evil.test' THEN 'exfil'
    ELSE lower(qname) END, rcode, verdict, reason, count(*)
    FROM dns_queries WHERE id > $DNS_ID0 GROUP BY 1, 2, 3, 4, 5, 6" > "$TB_DIR/dns_rows"
tb_sql "SELECT count(*), coalesce(sum(count), 0) FROM lost_records" > "$TB_DIR/lost"
tb_sql "SELECT count(*) FROM flows WHERE id > $FLOW_ID0 AND proto = 'tcp'
    AND verdict = 'allow' AND bytes_out IS NOT NULL" \
    > "$TB_DIR/ended"
ls -l "$TB_DIR/flows.db" | awk '{ print $5 }' > "$TB_DIR/dbsize"
for f in packets conns udp; do
	wc -l < "$TB_DIR/attacker.$f" > "$TB_DIR/attacker.$f.n"
done

"$TB_PY" "$REPO/tests/soak/report.py" "$TB_DIR" "$SOAK_SANDBOXES" "$P" \
    "$SOAK_WARMUP_S" "$LOAD_S" "$SOAK_CONNS" "$SOAK_DNS" "$SOAK_SECS" "$SOAK_OUT"
rc=$?
say "summary written to $SOAK_OUT/latest.md"
TB_FINISHED=1
exit $rc
