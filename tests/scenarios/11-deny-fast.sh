#!/bin/bash
# 11-deny-fast: another port of an allowed address and another address are
# refused at once (RST, not a timeout), logged once each, and nothing of
# them reaches the far side.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init deny-fast
tb_internet_up || { tb_fail "test bed up"; tb_done; }
tb_sluiced_start || { tb_fail "sluiced up"; tb_done; }

cat > "$TB_DIR/policy.json" <<EOF
{"sluice": {"allowedCidrs": ["192.0.2.10:443"]}}
EOF
tb_check "sandbox add" tb_sandbox_add a "$TB_DIR/policy.json"

t0=$(tb_time_ms)
tb_in a curl -s --max-time 10 "http://$TB_ADDR_HTTPS:80/" >/dev/null
rc=$?
t1=$(tb_time_ms)
tb_assert_eq "$rc" 7 "curl to another port of the address: connection refused"
tb_assert_le $((t1 - t0)) 1000 "refused within 1 s"

t0=$(tb_time_ms)
out=$(echo "secret-11" | tb_in a nc -v -w 10 "$TB_ADDR_ATK" 443 2>&1)
rc=$?
t1=$(tb_time_ms)
tb_check "nc to the attacker fails" [ "$rc" != 0 ]
tb_assert_match "$out" "refused" "nc says connection refused"
tb_assert_le $((t1 - t0)) 1000 "refused within 1 s"

t0=$(tb_time_ms)
tb_in a curl -s --max-time 10 "http://$TB_ADDR_ATK:8080/?secret-11" >/dev/null
rc=$?
t1=$(tb_time_ms)
tb_assert_eq "$rc" 7 "curl to the attacker: connection refused"
tb_assert_le $((t1 - t0)) 1000 "refused within 1 s"

# the far side
sleep 0.3
tb_assert_eq "$(tb_attacker_packet_count)" 0 "the attacker host received no packet"
tb_check "the attacker received no byte" [ -z "$(tb_attacker_received)" ]
tb_assert_eq "$(grep -c ":80 " "$TB_DIR/nginx.access.log")" 0 \
    "nginx on port 80 received no request"

tb_wait_rows "SELECT count(*) FROM flows" 3 >/dev/null
tb_assert_eq "$(tb_sql "SELECT dst_ip, dst_port, verdict, reason,
    ifnull(rule, 'NULL') FROM flows ORDER BY id")" \
"$TB_ADDR_HTTPS|80|deny|port_not_allowed|NULL
$TB_ADDR_ATK|443|deny|not_allowlisted|NULL
$TB_ADDR_ATK|8080|deny|not_allowlisted|NULL" \
    "exactly one row per attempt, with its reason"
tb_done
