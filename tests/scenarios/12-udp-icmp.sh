#!/bin/bash
# 12-udp-icmp: UDP and ICMP are denied (even where a CIDR allows TCP), one
# row per flow, and the attacker host receives nothing.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init udp-icmp
tb_internet_up || { tb_fail "test bed up"; tb_done; }
tb_sluiced_start || { tb_fail "sluiced up"; tb_done; }

cat > "$TB_DIR/policy.json" <<EOF
{"sluice": {"allowedCidrs": ["203.0.113.0/24"]}}
EOF
tb_check "sandbox add" tb_sandbox_add a "$TB_DIR/policy.json"

# three datagrams of one flow, then one to another port
tb_in a sh -c "for i in 1 2 3; do echo udp-secret-\$i; sleep 0.1; done |
    nc -u -w 1 -p 40001 $TB_ADDR_ATK 5000" >/dev/null 2>&1
echo udp-secret-4 | tb_in a nc -u -w 1 -p 40002 "$TB_ADDR_ATK" 9999 \
    >/dev/null 2>&1
out=$(tb_in a ping -c 3 -i 0.2 -W 1 "$TB_ADDR_ATK" 2>&1)
tb_check "ping fails" [ $? != 0 ]
tb_assert_match "$out" "3 packets transmitted, 0 received" "no echo reply"
# another ping (another echo id, as conntrack tells them apart) is
# another attempt, with its own row
tb_in a ping -c 1 -W 1 "$TB_ADDR_ATK" >/dev/null 2>&1
tb_check "the second ping fails" [ $? != 0 ]

# the TCP entry still works: UDP's denial is not a broken gateway
echo tcp-ok | tb_in a nc -w 3 "$TB_ADDR_ATK" 4444 >/dev/null
tb_wait_count 1 3 tb_attacker_conn_count port=4444 >/dev/null
tb_assert_eq "$(tb_attacker_conn_count port=4444)" 1 \
    "TCP to the allowed CIDR arrives"

sleep 0.3
tb_assert_eq "$(tb_attacker_packet_count proto=udp)" 0 \
    "no UDP packet reached the attacker"
tb_assert_eq "$(tb_attacker_packet_count proto=icmp)" 0 \
    "no ICMP packet reached the attacker"
tb_assert_eq "$(tb_attacker_udp_count)" 0 "the attacker's UDP listener got nothing"
received=$(tb_attacker_received)
tb_check "no UDP secret on the far side" [ -z "$(echo "$received" | grep udp-secret)" ]

tb_wait_rows "SELECT count(*) FROM flows" 5 >/dev/null
tb_assert_eq "$(tb_sql "SELECT proto, ifnull(src_port, 'NULL'),
    ifnull(dst_port, 'NULL'), verdict, reason FROM flows
    WHERE proto != 'tcp' ORDER BY id")" \
"udp|40001|5000|deny|proto_not_allowed
udp|40002|9999|deny|proto_not_allowed
icmp|NULL|NULL|deny|proto_not_allowed
icmp|NULL|NULL|deny|proto_not_allowed" "one row per UDP flow and per ping (its echoes)"
tb_assert_eq "$(tb_sql "SELECT count(*) FROM flows WHERE proto = 'tcp'
    AND verdict = 'allow'")" 1 "and one allow row for the TCP flow"
tb_done
