#!/bin/bash
# 21-dns-bindings: a TCP flow to a name-allowed destination is admitted only
# to an address the gateway's resolver returned to this sandbox for an
# allowed name, on a port that name allows; the flow row carries the name.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init dns-bindings
tb_internet_up || { tb_fail "test bed up"; tb_done; }
tb_sluiced_start || { tb_fail "sluiced up"; tb_done; }

cat > "$TB_DIR/policy.json" <<EOF
{"network": {"allowedDomains": ["a.test", "db.test:5432", "alias.test"]}}
EOF
tb_check "sandbox a" tb_sandbox_add a "$TB_DIR/policy.json"
tb_check "sandbox b" tb_sandbox_add b "$TB_DIR/policy.json"
tb_check "sandbox c" tb_sandbox_add c "$TB_DIR/policy.json"
curl_a() { tb_in "$1" curl -s --max-time 3 --cacert "$TB_CA" "${@:2}"; }

# an address never resolved: denied, even though a.test lives there
curl_a a --resolve "a.test:443:$TB_ADDR_HTTPS" https://a.test/ >/dev/null
tb_assert_eq "$?" 7 "a.test's address before resolving: refused"
n=$(grep -c 'sni=a.test' "$TB_DIR/nginx.access.log")
tb_assert_eq "$n" 0 "nginx received nothing"

# resolved through the gateway: allowed, on 443 and 80
tb_assert_eq "$(curl_a a https://a.test/)" "hello from a.test" "after resolving: allowed"
tb_assert_eq "$(curl_a a http://a.test/)" "hello from a.test on port 80" \
    "a name without a port allows 80 too"
curl_a a https://a.test:8443/ >/dev/null
tb_assert_eq "$?" 7 "but not 8443"

# name:port allows exactly that port
tb_assert_eq "$(tb_in a nc -w 3 db.test 5432 </dev/null)" "db" "db.test:5432 allowed"
tb_in a nc -w 2 db.test 443 </dev/null >/dev/null 2>&1
tb_check "db.test:443 refused" [ $? != 0 ]

# sandbox b cannot use a's binding...
curl_a b --resolve "a.test:443:$TB_ADDR_HTTPS" https://a.test/ >/dev/null
tb_assert_eq "$?" 7 "b cannot ride on a's binding"
# ...until it resolves the name itself
tb_assert_eq "$(curl_a b https://a.test/)" "hello from a.test" "b after resolving"

# a CNAME: the binding is for the name asked (alias.test), not the target
tb_assert_match "$(tb_in a dig +short alias.test | tr '\n' ' ')" "a.test. $TB_ADDR_HTTPS" \
    "alias.test is a CNAME to a.test"
tb_in c dig +short alias.test >/dev/null
out=$(tb_in c nc -z -w 2 "$TB_ADDR_HTTPS" 443 >/dev/null 2>&1; echo $?)
tb_assert_eq "$out" 0 "c reaches the address it got through the alias"

sleep 0.3
tb_assert_eq "$(grep -c "sni=a.test" "$TB_DIR/nginx.access.log")" 2 \
    "nginx saw exactly the two allowed HTTPS requests"
tb_assert_eq "$(tb_attacker_packet_count)" 0 "the attacker received nothing"

sa="${P}-a"; sb="${P}-b"; sc="${P}-c"
tb_wait_rows "SELECT count(*) FROM flows" 9 >/dev/null
tb_assert_eq "$(tb_sql "SELECT sandbox = '$sb', dst_port, verdict, reason, ifnull(name, '-'), ifnull(rule, '-')
    FROM flows WHERE sandbox != '$sc' ORDER BY id")" \
"0|443|deny|no_dns_binding|-|-
0|443|allow|allowed_domain|a.test|a.test
0|80|allow|allowed_domain|a.test|a.test
0|8443|deny|port_not_allowed|a.test|-
0|5432|allow|allowed_domain|db.test|db.test:5432
0|443|deny|port_not_allowed|db.test|-
1|443|deny|no_dns_binding|-|-
1|443|allow|allowed_domain|a.test|a.test" \
    "every flow row, with the binding's name and the rule"
tb_assert_eq "$(tb_sql "SELECT verdict, name, rule FROM flows WHERE sandbox = '$sc'")" \
    "allow|alias.test|alias.test" "c's flow is admitted as alias.test"
tb_assert_eq "$(tb_sql "SELECT qname, answers FROM dns_queries WHERE qname = 'alias.test'
    AND sandbox = '$sc'")" "alias.test|$TB_ADDR_HTTPS" "the alias query's row"
tb_done
