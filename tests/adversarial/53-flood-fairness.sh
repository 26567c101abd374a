#!/bin/bash
# 53-flood-fairness: one sandbox floods, a quiet one is not starved (issue
# 6 item 4). sluiced runs with its default per-sandbox rates (2,000 new
# flows and 2,000 DNS queries a second, bursts of 4,000) and
# --limit-holds 20. Three floods from sandbox a while sandbox b works:
#   1. 30,000 raw SYNs at ~10,000/s, a quarter to the attacker's allowed
#      :4444, the rest to its denied :5555; b makes 50 connections to its
#      database, one every 50 ms;
#   2. 20,000 DNS queries at ~10,000/s, half for the allowed a.test (which
#      the gateway forwards), half for names it refuses; b asks 40 times
#      for db.test;
#   3. 30 idle connections to a.test:443 (each holds a first flight; over
#      the bound, refused at the SYN; each then sends the start of a TLS
#      record, which a held flight waits on and a connection without a
#      hold would be reset for); b fetches https://b.test.
# Every one of b's connections and queries succeeds (the far side
# answered), b has no rate_limited row; a gets rate_limited denials, and
# no more decided flows or answered queries than its buckets allow; every
# attempt of a has its row or is counted in a summary row (or in the
# kernel's drop counters); the log gets at most 11 rate_limited rows a
# second from a; nothing reached the attacker beyond a's allowed port, and
# the upstream resolver saw no more of a's queries than a's allow rows.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init flood-fairness
tb_internet_up || { tb_fail "test bed up"; tb_done; }
HOLDS=20
# The DNS flood is to contend for the upstream path (the resolver's
# questions in flight), so the answer cache is off: every allowed query
# is asked upstream, and the upstream's count below is exact.
tb_sluiced_start --limit-holds "$HOLDS" --dns-cache 0 ||
    { tb_fail "sluiced up"; tb_done; }
RATE=2000 BURST=4000	# sluiced's defaults, for the bounds checked below

cat > "$TB_DIR/a.json" <<EOF
{"network": {"allowedDomains": ["a.test"]}, "sluice": {"allowedCidrs": ["$TB_ADDR_ATK:4444"]}}
EOF
cat > "$TB_DIR/b.json" <<EOF
{"network": {"allowedDomains": ["db.test", "b.test"]}, "sluice": {"allowedCidrs": ["$TB_ADDR_DB:$TB_PORT_DB"]}}
EOF
tb_check "sandbox a (the flooder)" tb_sandbox_add a "$TB_DIR/a.json"
tb_check "sandbox b (quiet)" tb_sandbox_add b "$TB_DIR/b.json"
addr_a=$(tb_sandbox_field a addr)
gw_a=$(tb_sandbox_field a gateway)
gw_b=$(tb_sandbox_field b gateway)
out=$(echo before | tb_in a nc -w 3 "$TB_ADDR_ATK" 4444)
tb_assert_eq "$out" "attacker" "a's allowed port works before the flood"
out=$(tb_in b nc -w 3 "$TB_ADDR_DB" "$TB_PORT_DB" </dev/null)
tb_assert_eq "$out" "db" "b's database works before the flood"

# The kernel's counters of queue 0 (see 51-syn-flood): "queue_dropped
# user_dropped".
qstat() {
	ip netns exec "$TB_NETNS_GW" awk '$1 == 0 { print $6 + 0, $7 + 0 }' \
	    /proc/net/netfilter/nfnetlink_queue
}
# UDP datagrams the gateway's sockets dropped for a full receive buffer.
rcvbuf_errors() {
	ip netns exec "$TB_NETNS_GW" awk '$1 == "Udp:" && $2 ~ /^[0-9]+$/ { print $6 }' \
	    /proc/net/snmp
}
store_depth() {
	tb_status store.depth
}
# drained: the writer has nothing left (rows get their ids when written).
drained() {
	local _
	for _ in $(seq 30); do
		[ "$(store_depth)" = 0 ] && break
		sleep 0.2
	done
}
# settle: the last second's summary rows are due and written too.
settle() {
	sleep 1.2
	drained
}
# weight WHERE: the attempts the rows stand for (a summary row counts
# the number its rule starts with, any other row one).
weight() {
	tb_sql "SELECT coalesce(sum(max(1, CAST(rule AS INTEGER))), 0) FROM $1"
}

# quiet_conns N GAP_MS OUT: b connects to its database N times, one every
# GAP_MS; OUT gets a JSON list of {ok, ms}; ok only if "db" came back.
quiet_conns() {
	tb_in b "$TB_PY" - "$TB_ADDR_DB" "$TB_PORT_DB" "$@" <<'EOF' &
import json, socket, sys, threading, time
addr, port, n, gap, path = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
res, lock = [], threading.Lock()
def one(i):
    t0 = time.time()
    try:
        with socket.create_connection((addr, port), timeout=4) as s:
            ok = s.recv(16).startswith(b"db")
    except OSError:
        ok = False
    with lock:
        res.append({"ok": ok, "ms": round((time.time() - t0) * 1000)})
ts = []
for i in range(n):
    t = threading.Thread(target=one, args=(i,))
    t.start()
    ts.append(t)
    time.sleep(gap / 1000)
for t in ts:
    t.join()
json.dump(res, open(path, "w"))
EOF
	quiet=$!
}
# summary FILE: "ok n slowest_ms"
summary() {
	"$TB_PY" -c '
import json, sys
r = json.load(open(sys.argv[1]))
ok = [x["ms"] for x in r if x["ok"]]
print(len(ok), len(r), max(ok) if ok else -1)' "$1"
}

# ---------------------------------------------------------------- 1. SYNs

drained
read -r qd0 ud0 <<< "$(qstat)"
id0=$(tb_sql "SELECT coalesce(max(id), 0) FROM flows")
quiet_conns 50 50 "$TB_DIR/quiet1.json"
sleep 0.1
# every SYN a new 5-tuple: source ports 2000-31999, below the ephemeral
# ports of the probes that connect for real; 300 every 30 ms, about
# 10,000 a second
tb_in a "$TB_PY" "$TB_LIB/synflood.py" "$addr_a" "$TB_ADDR_ATK" "$TB_DIR/flood1.out" \
    --sport 2000 --count 30000 --allow-every 4 --batch 300 --period 0.03
read -r sent_allow sent_deny send_errors secs < "$TB_DIR/flood1.out"
sent=$((sent_allow + sent_deny))
wait "$quiet"
echo "SYN flood: $sent SYNs in ${secs}s ($sent_allow to :4444, $sent_deny to :5555, $send_errors send errors)"
tb_check "the flood was sent ($sent of 30000)" [ "$sent" -ge 29000 ]
settle
read -r qd1 ud1 <<< "$(qstat)"
kdrop=$(( qd1 - qd0 + ud1 - ud0 ))

read -r ok n slow <<< "$(summary "$TB_DIR/quiet1.json")"
echo "b during the SYN flood: $ok of $n connections got their answer (slowest ${slow} ms)"
tb_assert_eq "$ok" 50 "all 50 of b's connections reached its database and got the answer"
tb_assert_le "$slow" 2999 "none of b's needed more than one SYN retransmission"

A="id > $id0 AND sandbox = '${P}-a' AND src_port BETWEEN 2000 AND 31999"
decided=$(tb_sql "SELECT count(*) FROM flows WHERE $A AND reason != 'rate_limited'")
decided_ok=$(tb_sql "SELECT count(*) FROM flows WHERE $A AND
    ((verdict = 'allow' AND dst_port = 4444 AND reason = 'allowed_cidr') OR
     (verdict = 'deny' AND dst_port = 5555 AND reason = 'port_not_allowed'))")
limited=$(weight "flows WHERE $A AND reason = 'rate_limited'")
limited_rows=$(tb_sql "SELECT count(*) FROM flows WHERE $A AND reason = 'rate_limited'")
summaries=$(tb_sql "SELECT count(*) FROM flows WHERE $A AND reason = 'rate_limited' AND CAST(rule AS INTEGER) > 0")
others=$(tb_sql "SELECT count(*) FROM flows WHERE $A AND reason = 'rate_limited' AND
    rule NOT LIKE '%limit-conn-rate $RATE/s burst $BURST'")
echo "a's flood: $decided decided, $limited rate_limited in $limited_rows rows ($summaries summaries), $kdrop dropped by the kernel's queue"
tb_assert_eq "$decided_ok" "$decided" "a's decided flows: allow on :4444, port_not_allowed on :5555"
tb_check "a was rate-limited ($limited attempts)" [ "$limited" -gt 0 ]
tb_assert_eq "$others" 0 "its rate_limited rows name the bound: limit-conn-rate $RATE/s burst $BURST"
cap=$("$TB_PY" -c "import math, sys; print(int($BURST + $RATE * (math.ceil($secs) + 2)))")
tb_assert_le "$decided" "$cap" "a's decided flows stay within its bucket (burst + rate x seconds)"
tb_check "every SYN sent is decided, counted as rate_limited or dropped by the kernel ($sent <= $decided + $limited + $kdrop)" \
    [ "$sent" -le $((decided + limited + kdrop)) ]
tb_assert_le $((decided + limited)) "$sent" "no attempt is counted twice"
rowcap=$(( 11 * ($(printf '%.0f' "$secs") + 3) ))
tb_assert_le "$limited_rows" "$rowcap" "the log got at most 11 rate_limited rows a second from a"
tb_assert_eq "$(tb_sql "SELECT count(*) FROM flows WHERE sandbox = '${P}-b' AND reason = 'rate_limited'")" 0 \
    "b has no rate_limited row"
tb_assert_eq "$(tb_sql "SELECT count(*) FROM flows WHERE sandbox = '${P}-b' AND id > $id0 AND verdict = 'allow' AND dst_port = $TB_PORT_DB")" 50 \
    "b's 50 connections each have their allow row"

syn_allow=$(tb_attacker_packet_count proto=tcp flags=S dport=4444)
tb_assert_eq "$(tb_attacker_packet_count proto=tcp dport=5555)" 0 "nothing of a's reached the denied :5555"
tb_sql "SELECT src_port FROM flows WHERE $A AND verdict = 'allow'" > "$TB_DIR/allow.ports"
unallowed=$("$TB_PY" - "$TB_DIR" <<'EOF'
import json, sys
d = sys.argv[1]
allow = {int(l) for l in open(d + "/allow.ports") if l.strip()}
n = 0
for l in open(d + "/attacker.packets"):
    p = json.loads(l)
    if p.get("flags") == "S" and p.get("dport") == 4444 and 2000 <= p["sport"] < 32000:
        n += p["sport"] not in allow
print(n)
EOF
)
tb_assert_eq "$unallowed" 0 "every flood SYN the attacker saw ($syn_allow) has its allow row"
"$SLUICE" log --db "$TB_DIR/flows.db" --sandbox "${P}-a" --reason rate_limited \
    --last 3 > "$TB_DIR/log.out" 2>&1
tb_assert_eq "$(grep -c rate_limited "$TB_DIR/log.out")" 3 "sluice log --reason rate_limited shows them"

# ---------------------------------------------------------------- 2. DNS

drained
did0=$(tb_sql "SELECT coalesce(max(id), 0) FROM dns_queries")
rb0=$(rcvbuf_errors)
: > "$TB_DIR/dns.log"
tb_in b "$TB_PY" - "$gw_b" 40 "$TB_DIR/quiet2.out" <<'EOF' &
import socket, struct, sys, time
gw, n, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def query(qid, name):
    q = b"".join(bytes([len(l)]) + l.encode() for l in name.split(".")) + b"\0"
    return struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0) + q + b"\0\1\0\1"
ok, slow = 0, 0
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(2)
time.sleep(0.2)
for i in range(1, n + 1):
    t0 = time.time()
    s.sendto(query(i, "db.test"), (gw, 53))
    try:
        while True:
            d = s.recv(4096)
            if struct.unpack(">H", d[:2])[0] == i:
                break
        # NOERROR with one answer ending in 198.51.100.7
        if d[3] & 15 == 0 and struct.unpack(">H", d[6:8])[0] >= 1 and \
                d.endswith(bytes([198, 51, 100, 7])):
            ok += 1
    except OSError:
        pass
    slow = max(slow, time.time() - t0)
    time.sleep(0.04)
open(path, "w").write("%d %d %d\n" % (ok, n, slow * 1000))
EOF
quiet=$!
tb_in a "$TB_PY" - "$gw_a" "$TB_DIR/flood2.out" <<'EOF'
import select, socket, struct, sys, time
gw, path = sys.argv[1], sys.argv[2]
def query(qid, name):
    q = b"".join(bytes([len(l)]) + l.encode() for l in name.split(".")) + b"\0"
    return struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0) + q + b"\0\1\0\1"
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
# FORCE: past rmem_max, so that no answer is lost on this side
s.setsockopt(socket.SOL_SOCKET, 33, 1 << 22)	# SO_RCVBUFFORCE
s.setblocking(False)
rcodes, sent, t0 = {}, 0, time.time()
def drain():
    while True:
        try:
            d = s.recv(4096)
        except BlockingIOError:
            return
        rcodes[d[3] & 15] = rcodes.get(d[3] & 15, 0) + 1
for b in range(0, 20000, 200):
    for i in range(b, b + 200):
        # even: the allowed a.test; odd: a name the gateway refuses
        name = "a.test" if i % 2 == 0 else "r%d.nope.test" % i
        while True:
            try:
                s.sendto(query(i & 0xFFFF, name), (gw, 53))
                break
            except BlockingIOError:
                select.select([], [s], [], 0.01)
        sent += 1
    drain()
    lag = t0 + (b // 200 + 1) * 0.02 - time.time()
    if lag > 0:
        time.sleep(lag)
secs = time.time() - t0
end = time.time() + 3
while time.time() < end:
    select.select([s], [], [], 0.2)
    drain()
open(path, "w").write("%d %.2f %d %d %d\n" % (sent, secs, rcodes.get(0, 0),
                      rcodes.get(3, 0), rcodes.get(5, 0)))
EOF
wait "$quiet"
read -r dsent dsecs noerror nxdomain refused < "$TB_DIR/flood2.out"
echo "DNS flood: $dsent queries in ${dsecs}s; answers NOERROR $noerror, NXDOMAIN $nxdomain, REFUSED $refused"
read -r bok bn bslow < "$TB_DIR/quiet2.out"
echo "b during the DNS flood: $bok of $bn queries for db.test answered (slowest ${bslow} ms)"
tb_assert_eq "$bok" 40 "all 40 of b's queries were answered with db.test's address"
# queries to the gateway's resolver take no conntrack entry: a flood of
# them cannot fill the table every sandbox's flows need
ct53=$(ip netns exec "$TB_NETNS_GW" conntrack -L -p udp --dport 53 2>/dev/null |
    grep -c "dst=10\.")
tb_assert_eq "$ct53" 0 "the DNS flood left no conntrack entry for the resolver"
settle
rb1=$(rcvbuf_errors)

D="id > $did0 AND sandbox = '${P}-a'"
dn_answered=$(tb_sql "SELECT count(*) FROM dns_queries WHERE $D AND reason != 'rate_limited'")
dn_allow=$(tb_sql "SELECT count(*) FROM dns_queries WHERE $D AND qname = 'a.test' AND verdict = 'allow'")
dn_limited=$(weight "dns_queries WHERE $D AND reason = 'rate_limited'")
dn_limited_rows=$(tb_sql "SELECT count(*) FROM dns_queries WHERE $D AND reason = 'rate_limited'")
dn_odd=$(tb_sql "SELECT count(*) FROM dns_queries WHERE $D AND reason = 'rate_limited' AND
    (rcode != 'REFUSED' OR rule NOT LIKE '%limit-dns-rate $RATE/s burst $BURST')")
echo "a's DNS flood: $dn_answered decided ($dn_allow a.test allowed), $dn_limited rate_limited in $dn_limited_rows rows; $((rb1 - rb0)) dropped by a full socket buffer"
tb_check "a's flood got REFUSED answers ($refused)" [ "$refused" -gt 0 ]
tb_assert_eq "$dn_odd" 0 "its rate_limited rows say REFUSED and name limit-dns-rate $RATE/s burst $BURST"
cap=$("$TB_PY" -c "import math; print(int($BURST + $RATE * (math.ceil($dsecs) + 2)))")
tb_assert_le "$dn_answered" "$cap" "a's decided queries stay within its bucket"
tb_assert_le $((dn_answered + dn_limited)) "$dsent" "no query is counted twice"
tb_check "every query sent has its row, is counted as rate_limited or was dropped by the socket ($dsent <= $dn_answered + $dn_limited + $((rb1 - rb0)))" \
    [ "$dsent" -le $((dn_answered + dn_limited + rb1 - rb0)) ]
tb_assert_eq "$refused" "$dn_limited" "a got one REFUSED per rate_limited query"
rowcap=$(( 11 * ($(printf '%.0f' "$dsecs") + 3) ))
tb_assert_le "$dn_limited_rows" "$rowcap" "the log got at most 11 rate_limited DNS rows a second from a"
tb_assert_eq "$(tb_sql "SELECT count(*) FROM dns_queries WHERE sandbox = '${P}-b' AND reason = 'rate_limited'")" 0 \
    "b has no rate_limited query"
up_a=$(tb_upstream_queries '^a\.test$')
tb_assert_le "$up_a" "$dn_allow" "the upstream saw no more of a's a.test queries than a's allow rows"
tb_check "and saw some ($up_a)" [ "$up_a" -gt 0 ]
tb_assert_eq "$(tb_upstream_queries 'nope')" 0 "no refused name reached the upstream"
tb_assert_eq "$(tb_upstream_queries '^db\.test$')" 40 "the upstream saw each of b's 40 queries"

# ---------------------------------------------------------------- 3. holds

sleep 2.2	# a's buckets are full again
tb_assert_eq "$(tb_in a dig +short +time=2 +tries=1 a.test)" "$TB_ADDR_HTTPS" "a resolves a.test"
drained
hid0=$(tb_sql "SELECT coalesce(max(id), 0) FROM flows")
tb_in a "$TB_PY" - "$TB_ADDR_HTTPS" 30 "$TB_DIR/holds.out" <<'EOF' &
import socket, sys, time
addr, n, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
conns, refused, held, reset = [], 0, 0, 0
for i in range(n):
    s = socket.socket()
    s.settimeout(3)
    try:
        s.connect((addr, 443))      # and then say nothing: a held flight
        conns.append(s)
    except OSError:
        refused += 1
time.sleep(0.5)
# The start of a TLS record: a held flight waits for the rest; a
# connection without a hold (a SYN the kernel-SYN set let through over
# the bound, were it on) would be reset for it.
for s in conns:
    try:
        s.send(b"\x16\x03\x01\x02\x00")
    except OSError:
        pass
time.sleep(0.5)
for s in conns:
    s.setblocking(False)
    try:
        reset += 1 if s.recv(1) == b"" else 0
    except BlockingIOError:
        held += 1
    except OSError:
        reset += 1
open(path, "w").write("%d %d %d\n" % (held, refused, reset))
time.sleep(2)
for s in conns:
    s.close()
EOF
holder=$!
sleep 1
out=$(tb_in b curl -s --max-time 5 --cacert "$TB_CA" https://b.test/)
tb_assert_eq "$out" "hello from b.test" "b's HTTPS request is answered while a holds its share"
wait "$holder"
read -r held hrefused hreset < "$TB_DIR/holds.out"
echo "a's idle TLS connections: $held held, $hrefused refused at the SYN, $hreset reset at the first byte"
# every SYN is queued (--kernel-syn is off): the rest are refused at the
# SYN, and none is left for its first byte to reset
tb_assert_eq "$held $hrefused $hreset" "$HOLDS $((30 - HOLDS)) 0" \
    "a holds $HOLDS first flights, the rest are refused at the SYN"
tb_assert_eq "$(tb_sql "SELECT count(*) FROM flows WHERE id > $hid0 AND sandbox = '${P}-a' AND
    reason = 'rate_limited' AND dst_port = 443 AND rule LIKE 'limit-holds $HOLDS %'")" $((30 - HOLDS)) \
    "each refused one has its rate_limited row (limit-holds $HOLDS)"
tb_assert_eq "$(tb_sql "SELECT count(*) FROM flows WHERE id > $hid0 AND sandbox = '${P}-b' AND
    verdict = 'allow' AND sni = 'b.test'")" 1 "b's connection has its allow row"

tb_check "sluiced is alive" kill -0 "$TB_SLUICED_PID"
tb_assert_eq "$(tb_sql "SELECT coalesce(sum(count), 0) FROM lost_records")" 0 "no record was lost"
out=$(echo after | tb_in a nc -w 3 "$TB_ADDR_ATK" 4444)
tb_assert_eq "$out" "attacker" "a's allowed connection works after the floods"
tb_done
