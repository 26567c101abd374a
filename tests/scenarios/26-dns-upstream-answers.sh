#!/bin/bash
# 26-dns-upstream-answers: what a hostile upstream's answers to an allowed
# name can make of the sandbox. An NXDOMAIN, SERVFAIL or REFUSED carrying A
# records passes on only its rcode (SERVFAIL for anything but NXDOMAIN) and
# binds nothing; the gateway's own uplink address and its peer's are
# stripped like any rebinding target, and connections to them are
# internal_destination; a truncated answer reaches the client truncated,
# with its records, so that it asks again over TCP.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init dns-upstream-answers
tb_internet_up || { tb_fail "test bed up"; tb_done; }

uplink=${TB_UPLINK_ADDR%/*}
peer=${TB_UPLINK_PEER_ADDR%/*}
# the upstream at 198.51.100.54 answers by the first label of the name
fake=198.51.100.54
ip -n "$TB_NETNS_INET" addr add "$fake/32" dev lo
cat > "$TB_DIR/fake-upstream.py" <<'EOF'
import socket, struct, sys
addr, log, atk, uplink, peer, plain = sys.argv[1:7]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((addr, 53))
open(log, "w").close()
def a(owner, ip):
    return owner + struct.pack(">HHIH", 1, 1, 60, 4) + socket.inet_aton(ip)
while True:
    q, peer_ = s.recvfrom(2048)
    qid = struct.unpack(">H", q[:2])[0]
    off, labels = 12, []
    while q[off]:
        labels.append(q[off + 1:off + 1 + q[off]].decode())
        off += 1 + q[off]
    question = q[12:off + 5]
    with open(log, "a") as f:
        f.write(".".join(labels) + "\n")
    flags, rcode, recs = 0x8180, 0, []
    first = labels[0] if labels else ""
    if first == "nx":
        rcode, recs = 3, [atk]
    elif first == "sf":
        rcode, recs = 2, [atk]
    elif first == "ref":
        rcode, recs = 5, [atk]
    elif first == "tc":
        flags, recs = 0x8380, [atk]
    elif first == "gw":
        recs = [uplink, peer, plain]
    else:
        rcode = 3
    body = b"".join(a(b"\xc0\x0c", ip) for ip in recs)
    s.sendto(struct.pack(">HHHHHH", qid, flags | rcode, 1, len(recs), 0, 0) +
             question + body, peer_)
EOF
_tb_bg "$TB_NETNS_INET" fake-upstream "$TB_DIR/fake.out" "$TB_PY" \
    "$TB_DIR/fake-upstream.py" "$fake" "$TB_DIR/fake.log" "$TB_ADDR_ATK" \
    "$uplink" "$peer" "$TB_ADDR_PLAIN"
tb_wait_count 1 5 bash -c "[ -e '$TB_DIR/fake.log' ] && echo 1" >/dev/null

TB_DNS_UPSTREAM=$fake
tb_sluiced_start || { tb_fail "sluiced up"; tb_done; }
cat > "$TB_DIR/policy.json" <<EOF
{"network": {"allowedDomains": ["*.up.test"]}}
EOF
tb_check "sandbox add" tb_sandbox_add a "$TB_DIR/policy.json"

# listeners on the gateway's uplink address and on its peer, port 80: a
# connection that got there is one the policy must never have let out
cat > "$TB_DIR/listen.py" <<'EOF'
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], 80))
s.listen(8)
open(sys.argv[2], "w").close()
while True:
    c, who = s.accept()
    with open(sys.argv[2], "a") as f:
        f.write("%s\n" % who[0])
    c.close()
EOF
_tb_bg "$TB_NETNS_GW" listen-uplink "$TB_DIR/listen-uplink.out" "$TB_PY" \
    "$TB_DIR/listen.py" "$uplink" "$TB_DIR/uplink.conns"
_tb_bg "$TB_NETNS_INET" listen-peer "$TB_DIR/listen-peer.out" "$TB_PY" \
    "$TB_DIR/listen.py" "$peer" "$TB_DIR/peer.conns"
tb_wait_count 2 5 bash -c "ls '$TB_DIR/uplink.conns' '$TB_DIR/peer.conns' 2>/dev/null | wc -l" >/dev/null

dig_a() { tb_in a dig +time=3 +tries=1 "$@" 2>&1; }
answer() { echo "$1" | awk '/ANSWER SECTION/{f=1;next} /^$/{f=0} f{print $5}' | tr '\n' ' '; }
connect() {
	printf 'GET / HTTP/1.1\r\nHost: %s\r\n\r\n' "${2:-x.up.test}" |
	    tb_in a nc -w 2 "$1" 80 >/dev/null 2>&1
}

# errors with records: the rcode alone, nothing bound
for n in nx sf ref; do
	out=$(dig_a +ignore "$n.up.test")
	case $n in nx) want=NXDOMAIN ;; *) want=SERVFAIL ;; esac
	tb_assert_match "$out" "status: $want" "$n.up.test: $want"
	tb_assert_eq "$(answer "$out")" "" "$n.up.test: no records"
	connect "$TB_ADDR_ATK"
	tb_check "$n.up.test: its address is not bound" [ $? != 0 ]
done
tb_assert_eq "$(tb_attacker_conn_count)" 0 "the attacker got no connection"

# the uplink's addresses: stripped, and never reachable
out=$(dig_a gw.up.test)
tb_assert_eq "$(answer "$out")" "$TB_ADDR_PLAIN " \
    "the gateway's uplink address and its peer's stripped"
connect "$uplink"
tb_check "the gateway's uplink address refused" [ $? != 0 ]
connect "$peer"
tb_check "the uplink's peer refused" [ $? != 0 ]
tb_assert_eq "$(cat "$TB_DIR/uplink.conns" "$TB_DIR/peer.conns")" "" \
    "neither listener got a connection"

# truncated: TC and the record over UDP, then the same over TCP
out=$(dig_a +ignore tc.up.test)
tb_assert_match "$out" "flags: qr tc rd ra;" "UDP: the answer says it is truncated"
tb_assert_eq "$(answer "$out")" "$TB_ADDR_ATK " "UDP: with the record it held"
out=$(dig_a tc.up.test)
tb_assert_match "$out" "Truncated, retrying in TCP mode" "the client asks again over TCP"
tb_assert_eq "$(answer "$out")" "$TB_ADDR_ATK " "TCP: the record"
connect "$TB_ADDR_ATK" tc.up.test
tb_assert_eq "$?" 0 "a NOERROR answer's address is bound"
tb_wait_count 1 5 tb_attacker_conn_count >/dev/null
tb_assert_eq "$(tb_attacker_conn_count)" 1 "and reached"

tb_wait_rows "SELECT count(*) FROM dns_queries WHERE qname LIKE '%.up.test'" 7 >/dev/null
tb_assert_eq "$(tb_sql "SELECT qname, proto, rcode, verdict, reason, ifnull(answers, '-'),
    ifnull(stripped, '-') FROM dns_queries WHERE qname LIKE '%.up.test' ORDER BY id")" \
"nx.up.test|udp|NXDOMAIN|allow|allowed_domain|-|-
sf.up.test|udp|SERVFAIL|allow|upstream_failed|-|-
ref.up.test|udp|SERVFAIL|allow|upstream_failed|-|-
gw.up.test|udp|NOERROR|allow|allowed_domain|$TB_ADDR_PLAIN|$uplink,$peer
tc.up.test|udp|NOERROR|allow|allowed_domain|$TB_ADDR_ATK|-
tc.up.test|udp|NOERROR|allow|allowed_domain|$TB_ADDR_ATK|-
tc.up.test|tcp|NOERROR|allow|allowed_domain|$TB_ADDR_ATK|-" "the query rows"
tb_wait_rows "SELECT count(*) FROM flows WHERE dst_port = 80" 6 >/dev/null
tb_assert_eq "$(tb_sql "SELECT dst_ip, verdict, reason FROM flows WHERE dst_port = 80
    ORDER BY id")" \
"$TB_ADDR_ATK|deny|no_dns_binding
$TB_ADDR_ATK|deny|no_dns_binding
$TB_ADDR_ATK|deny|no_dns_binding
$uplink|deny|internal_destination
$peer|deny|internal_destination
$TB_ADDR_ATK|allow|allowed_domain" "the connections' rows"
tb_done
