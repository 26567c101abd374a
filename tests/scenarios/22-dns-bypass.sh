#!/bin/bash
# 22-dns-bypass: no resolver but the gateway's is reachable: DNS over UDP
# and TCP to the simulated internet's server, and DoT, get no answer, are
# logged as dns_bypass, and the server never hears of them.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init dns-bypass
tb_internet_up || { tb_fail "test bed up"; tb_done; }
tb_sluiced_start || { tb_fail "sluiced up"; tb_done; }

# even a policy that allows every address cannot open another resolver
cat > "$TB_DIR/policy.json" <<EOF
{"network": {"allowedDomains": ["a.test"]},
 "sluice": {"allowedCidrs": ["0.0.0.0/0"]}}
EOF
tb_check "sandbox add" tb_sandbox_add a "$TB_DIR/policy.json"
: > "$TB_DIR/dns.log"

out=$(tb_in a dig +time=2 +tries=1 @"$TB_ADDR_DNS" bypass-udp.a.test 2>&1)
tb_assert_match "$out" "no servers could be reached|timed out|unreachable" "UDP 53 elsewhere: no answer"
out=$(tb_in a dig +tcp +time=2 +tries=1 @"$TB_ADDR_DNS" bypass-tcp.a.test 2>&1)
tb_assert_match "$out" "refused|no servers could be reached|timed out" "TCP 53 elsewhere: no answer"
t0=$(tb_time_ms)
tb_in a nc -z -w 3 "$TB_ADDR_DNS" 853 >/dev/null 2>&1
tb_check "DoT (TCP 853) refused" [ $? != 0 ]
tb_assert_le $(( $(tb_time_ms) - t0 )) 1000 "at once"
out=$(tb_in a dig +time=2 +tries=1 @"$TB_ADDR_ATK" a.test 2>&1)
tb_assert_match "$out" "no servers could be reached|timed out|unreachable" \
    "UDP 53 to the attacker: no answer"

sleep 0.3
tb_assert_eq "$(grep -c 'query\[' "$TB_DIR/dns.log")" 0 \
    "the upstream server received no query from the sandbox"
tb_assert_eq "$(tb_attacker_packet_count)" 0 "the attacker received nothing"

# the gateway's own resolver still works, over both transports
tb_assert_eq "$(tb_in a dig +short +time=2 +tries=1 a.test)" "$TB_ADDR_HTTPS" "resolv.conf's resolver answers"
tb_assert_eq "$(tb_in a dig +short +tcp +time=2 +tries=1 a.test)" "$TB_ADDR_HTTPS" "over TCP too"

tb_wait_rows "SELECT count(*) FROM flows WHERE reason = 'dns_bypass'" 4 >/dev/null
tb_assert_eq "$(tb_sql "SELECT proto, dst_ip, dst_port, verdict FROM flows
    WHERE reason = 'dns_bypass' ORDER BY id")" \
"udp|$TB_ADDR_DNS|53|deny
tcp|$TB_ADDR_DNS|53|deny
tcp|$TB_ADDR_DNS|853|deny
udp|$TB_ADDR_ATK|53|deny" "one dns_bypass row per attempt"
tb_assert_eq "$(tb_sql "SELECT count(*) FROM flows WHERE reason != 'dns_bypass'")" 0 \
    "and nothing else was let through or logged as a flow"
tb_done
