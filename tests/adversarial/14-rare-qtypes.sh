#!/bin/bash
# 14-rare-qtypes: for allowed names, every query type but A (and the
# empty answers to AAAA, HTTPS, SVCB) is REFUSED without being forwarded:
# NULL, the type DNS tunnels (iodine) carry data back in, and the other
# rare ones, in every class; zone transfers; other opcodes are FORMERR.
# The upstream server hears none of them, even for names under a wildcard
# that covers a zone the attacker runs.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init adv-rare-qtypes
tb_internet_up || { tb_fail "test bed up"; tb_done; }
tb_sluiced_start || { tb_fail "sluiced up"; tb_done; }

cat > "$TB_DIR/policy.json" <<EOF
{"network": {"allowedDomains": ["a.test", "*.evil.test"]}}
EOF
tb_check "sandbox add" tb_sandbox_add a "$TB_DIR/policy.json"
gw=$(tb_sandbox_field a gateway)
status() {
	tb_in a dig +time=2 +tries=1 @"$gw" "$@" 2>&1 |
	    sed -n 's/.*status: \([A-Z]*\),.*/\1/p'
}
: > "$TB_DIR/dns.log"

types="NULL TYPE10 MX SRV CAA NAPTR PTR SOA NS CNAME DNAME TYPE65535 TYPE0
    TYPE41 DNSKEY TLSA SSHFP URI HINFO RP MAILA MAILB TKEY TSIG"
n=0
for t in $types; do
	tb_assert_eq "$(status a.test "$t")" REFUSED "a.test $t: REFUSED"
	n=$((n + 1))
done
tb_assert_eq "$(status t0.tunnel.evil.test NULL)" REFUSED "NULL under the attacker's zone: REFUSED"
tb_assert_eq "$(status +tcp t1.tunnel.evil.test NULL)" REFUSED "over TCP too"
# dig says only "Transfer failed"; the rows below give the rcodes
tb_assert_match "$(tb_in a dig +tcp +time=2 +tries=1 @"$gw" a.test AXFR 2>&1)" \
    "Transfer failed" "AXFR fails (REFUSED)"
tb_assert_match "$(tb_in a dig +tcp +time=2 +tries=1 @"$gw" a.test IXFR=1 2>&1)" \
    "Transfer failed" "IXFR fails (FORMERR: a SOA record in a query)"
for c in CH HS ANY NONE; do
	tb_assert_eq "$(status -c "$c" -t A a.test)" REFUSED "class $c: REFUSED"
done

# opcodes other than QUERY, by hand (dig drops the answer as a mismatch)
out=$(tb_in a "$TB_PY" - "$gw" <<'EOF'
import socket, struct, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(2)
q = b"\x01a\x04test\x00\x00\x01\x00\x01"
for op in (1, 2, 4, 5, 15):
    s.sendto(struct.pack(">HHHHHH", 0x4000 + op, op << 11 | 0x0100, 1, 0, 0, 0) + q,
             (sys.argv[1], 53))
    try:
        d = s.recv(512)
        print("opcode=%d rcode=%d" % (op, d[3] & 15))
    except socket.timeout:
        print("opcode=%d none" % op)
EOF
)
tb_assert_eq "$out" "opcode=1 rcode=1
opcode=2 rcode=1
opcode=4 rcode=1
opcode=5 rcode=1
opcode=15 rcode=1" "IQUERY, STATUS, NOTIFY, UPDATE, opcode 15: FORMERR"

# the resolver still answers A
tb_assert_eq "$(tb_in a dig +short +time=2 +tries=1 a.test)" "$TB_ADDR_HTTPS" "a.test A still resolves"
sleep 0.3
tb_assert_eq "$(tb_upstream_queries)" 1 "the upstream heard only the one A query"
tb_assert_eq "$(grep -c 'query\[A\] a.test ' "$TB_DIR/dns.log")" 1 "and it was that one"
tb_assert_eq "$(tb_attacker_packet_count)" 0 "the attacker received nothing"

rows=$((n + 3 + 4))
tb_wait_rows "SELECT count(*) FROM dns_queries WHERE rcode = 'REFUSED'" $rows >/dev/null
tb_assert_eq "$(tb_sql "SELECT count(*), group_concat(DISTINCT verdict || ':' || reason)
    FROM dns_queries WHERE rcode = 'REFUSED'")" "$rows|allow:type_not_allowed" \
    "$rows REFUSED rows, each allow/type_not_allowed (the name is allowed, the type is not)"
tb_assert_eq "$(tb_sql "SELECT group_concat(qtype, ' ') FROM (SELECT qtype FROM dns_queries
    WHERE qname = 'a.test' AND rcode = 'REFUSED' ORDER BY id LIMIT 3)")" "TYPE10 TYPE10 MX" \
    "NULL is logged as TYPE10"
tb_assert_eq "$(tb_sql "SELECT qname, qtype, proto FROM dns_queries WHERE qname LIKE '%tunnel%' ORDER BY id")" \
"t0.tunnel.evil.test|TYPE10|udp
t1.tunnel.evil.test|TYPE10|tcp" "the tunnel-like queries' rows"
tb_assert_eq "$(tb_sql "SELECT count(*), group_concat(DISTINCT verdict || ':' || reason)
    FROM dns_queries WHERE rcode = 'FORMERR'")" "6|deny:malformed" \
    "IXFR and the five opcodes: malformed"
tb_assert_eq "$(tb_sql "SELECT rcode FROM dns_queries WHERE qtype = 'AXFR'")" REFUSED "AXFR's row"
tb_done
