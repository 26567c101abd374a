#!/bin/bash
# 24-dns-rebinding: answers that point an allowed name at loopback, private,
# link-local (cloud metadata) or the gateway's own ranges are stripped, and
# no binding is made for them, unless an allowedCidrs entry for every port
# names the range (one with a port does not: the name would reach the
# address on its own ports, 443 and 80; found by review, 2026-12-03).
. "$(dirname "$0")/../lib/testbed.sh"
tb_init dns-rebinding
tb_internet_up || { tb_fail "test bed up"; tb_done; }
tb_sluiced_start || { tb_fail "sluiced up"; tb_done; }

cat > "$TB_DIR/policy.json" <<EOF
{"network": {"allowedDomains": ["*.rebind.test"]}}
EOF
cat > "$TB_DIR/lan.json" <<EOF
{"network": {"allowedDomains": ["*.rebind.test"]},
 "sluice": {"allowedCidrs": ["10.0.0.0/8"]}}
EOF
cat > "$TB_DIR/lan443.json" <<EOF
{"network": {"allowedDomains": ["*.rebind.test"]},
 "sluice": {"allowedCidrs": ["10.0.0.0/8:443"]}}
EOF
tb_check "sandbox a" tb_sandbox_add a "$TB_DIR/policy.json"
tb_check "sandbox l" tb_sandbox_add l "$TB_DIR/lan.json"
tb_check "sandbox p" tb_sandbox_add p "$TB_DIR/lan443.json"
short() { tb_in "$1" dig +short +time=2 +tries=1 "$2" | sort | tr '\n' ' '; }

tb_assert_eq "$(short a lo.rebind.test)" "" "127.0.0.1 stripped"
tb_assert_eq "$(short a ten.rebind.test)" "" "10.1.2.3 stripped"
tb_assert_eq "$(short a meta.rebind.test)" "" "169.254.169.254 stripped"
tb_assert_eq "$(short a mixed.rebind.test)" "$TB_ADDR_PLAIN " \
    "a mixed answer keeps only the public address"
tb_assert_eq "$(short l ten.rebind.test)" "10.1.2.3 " \
    "kept where allowedCidrs names the range"
tb_assert_eq "$(short l lo.rebind.test)" "" "but loopback still stripped there"
tb_assert_eq "$(short p ten.rebind.test)" "" "stripped where an entry names the range for one port only"

# no binding was made for a stripped address: the flow is refused
tb_in a curl -s --max-time 2 http://169.254.169.254/ >/dev/null
tb_check "metadata address refused" [ $? != 0 ]
tb_in a curl -s --max-time 2 http://mixed.rebind.test/ >/dev/null
tb_assert_eq "$?" 0 "the kept address works"

tb_wait_rows "SELECT count(*) FROM dns_queries WHERE qname LIKE '%.rebind.test' AND qtype = 'A'" 7 >/dev/null
tb_assert_eq "$(tb_sql "SELECT qname, rcode, ifnull(answers, '-'), ifnull(stripped, '-') FROM dns_queries
    WHERE sandbox = '${P}-a' AND qtype = 'A' ORDER BY id LIMIT 4")" \
"lo.rebind.test|NOERROR|-|127.0.0.1
ten.rebind.test|NOERROR|-|10.1.2.3
meta.rebind.test|NOERROR|-|169.254.169.254
mixed.rebind.test|NOERROR|$TB_ADDR_PLAIN|127.0.0.1" "dns_queries records what was stripped"
tb_wait_rows "SELECT count(*) FROM flows WHERE dst_ip = '169.254.169.254'" 1 >/dev/null
tb_assert_eq "$(tb_sql "SELECT reason FROM flows WHERE dst_ip = '169.254.169.254'")" \
    "no_dns_binding" "the metadata flow's row"
tb_done
