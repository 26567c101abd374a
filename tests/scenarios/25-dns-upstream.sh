#!/bin/bash
# 25-dns-upstream: the resolver takes from an upstream only the answer to
# its question (wrong id, name or type are discarded), tries the next
# upstream when one is silent, and gives SERVFAIL when none answers.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init dns-upstream
tb_internet_up || { tb_fail "test bed up"; tb_done; }

# a hostile upstream at 198.51.100.54: for every question it first sends
# three forged answers (wrong id, wrong name, wrong type) pointing at the
# attacker, then the real one; it never answers "silent.test"
fake=198.51.100.54
ip -n "$TB_NETNS_INET" addr add "$fake/32" dev lo
cat > "$TB_DIR/fake-upstream.py" <<'EOF'
import socket, struct, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], 53))
open(sys.argv[2], "w").close()
def name(q, off):
    labels = []
    while q[off]:
        labels.append(q[off + 1:off + 1 + q[off]].decode())
        off += 1 + q[off]
    return ".".join(labels), off + 1
def wire(n):
    return b"".join(bytes([len(l)]) + l.encode() for l in n.split(".")) + b"\0"
def answer(qid, qname, qtype, addr):
    hdr = struct.pack(">HHHHHH", qid, 0x8180, 1, 1, 0, 0)
    return (hdr + wire(qname) + struct.pack(">HH", qtype, 1) + b"\xc0\x0c" +
            struct.pack(">HHIH", 1, 1, 60, 4) + socket.inet_aton(addr))
while True:
    q, peer = s.recvfrom(2048)
    qid = struct.unpack(">H", q[:2])[0]
    qname, off = name(q, 12)
    qtype = struct.unpack(">H", q[off:off + 2])[0]
    with open(sys.argv[2], "a") as log:
        log.write("%s %d\n" % (qname, qtype))
    if qname.startswith("silent"):
        continue
    s.sendto(answer(qid ^ 0x5555, qname, qtype, "203.0.113.66"), peer)
    s.sendto(answer(qid, "evil.test", qtype, "203.0.113.66"), peer)
    s.sendto(answer(qid, qname, 28, "203.0.113.66"), peer)
    s.sendto(answer(qid, qname, qtype, "192.0.2.20"), peer)
EOF
ip netns exec "$TB_NETNS_INET" "$TB_PY" "$TB_DIR/fake-upstream.py" "$fake" \
    "$TB_DIR/fake.log" >"$TB_DIR/fake.out" 2>&1 &
echo $! >> "$TB_DIR/pids"
tb_wait_count 1 5 bash -c "[ -e '$TB_DIR/fake.log' ] && echo 1" >/dev/null

# the first upstream is silent: 198.51.100.99 drops everything
ip -n "$TB_NETNS_INET" addr add 198.51.100.99/32 dev lo
ip netns exec "$TB_NETNS_INET" iptables -A INPUT -d 198.51.100.99 -j DROP
TB_DNS_UPSTREAM="198.51.100.99 $fake"
tb_sluiced_start || { tb_fail "sluiced up"; tb_done; }
cat > "$TB_DIR/policy.json" <<EOF
{"network": {"allowedDomains": ["*.forged.test", "silent.test"]}}
EOF
tb_check "sandbox add" tb_sandbox_add a "$TB_DIR/policy.json"

t0=$(tb_time_ms)
out=$(tb_in a dig +short +time=5 +tries=1 www.forged.test)
t1=$(tb_time_ms)
tb_assert_eq "$out" "192.0.2.20" "only the matching answer is taken"
tb_assert_le 1400 $((t1 - t0)) "after the silent upstream's 1.5 s"
tb_assert_eq "$(tb_status dns.mismatched)" \
    3 "three forged answers discarded"

t0=$(tb_time_ms)
out=$(tb_in a dig +time=6 +tries=1 silent.test 2>&1)
t1=$(tb_time_ms)
tb_assert_match "$out" "status: SERVFAIL" "no upstream answers: SERVFAIL"
tb_assert_le $((t1 - t0)) 4000 "after both upstreams' time, not the client's"

# the binding holds only the real address
tb_in a nc -z -w 2 "$TB_ADDR_ATK" 443 >/dev/null 2>&1
tb_check "the forged address is not bound" [ $? != 0 ]
tb_assert_eq "$(tb_in a curl -s --max-time 3 http://www.forged.test/)" \
    "hello from plain.test" "the real one is"
tb_assert_eq "$(tb_attacker_packet_count)" 0 "the attacker received nothing"

tb_wait_rows "SELECT count(*) FROM dns_queries WHERE qtype = 'A'" 3 >/dev/null
tb_assert_eq "$(tb_sql "SELECT qname, rcode, reason, ifnull(answers, '-') FROM dns_queries
    WHERE qtype = 'A' ORDER BY id")" \
"www.forged.test|NOERROR|allowed_domain|192.0.2.20
silent.test|SERVFAIL|upstream_failed|-
www.forged.test|NOERROR|allowed_domain|192.0.2.20" "the rows"
tb_done
