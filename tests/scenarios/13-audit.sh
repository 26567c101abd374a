#!/bin/bash
# 13-audit: audit mode decides as enforce would, lets the flow through, and
# logs the verdict it would have given as 'audit'.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init audit
tb_internet_up || { tb_fail "test bed up"; tb_done; }
tb_sluiced_start || { tb_fail "sluiced up"; tb_done; }

cat > "$TB_DIR/policy.json" <<EOF
{"sluice": {"mode": "audit", "allowedCidrs": ["192.0.2.10:443"]}}
EOF
tb_check "sandbox add" tb_sandbox_add a "$TB_DIR/policy.json"
tb_assert_match "$(tb_sluice sandbox list)" "${P}-a .*audit" "list shows audit mode"

out=$(echo "audit-bytes-13" | tb_in a nc -w 3 "$TB_ADDR_ATK" 4444)
tb_assert_eq "$out" "attacker" "the denied-by-policy connection went through"
tb_wait_count 1 3 tb_attacker_conn_count port=4444 >/dev/null
tb_assert_eq "$(tb_attacker_conn_count port=4444)" 1 "the attacker got the connection"
tb_assert_match "$(tb_attacker_received)" "audit-bytes-13" "and the bytes"

out=$(tb_in a curl -s --max-time 5 --cacert "$TB_CA" \
    --resolve "a.test:443:$TB_ADDR_HTTPS" https://a.test/)
tb_assert_eq "$out" "hello from a.test" "an allowed flow is simply allowed"

tb_wait_rows "SELECT count(*) FROM flows" 2 >/dev/null
tb_assert_eq "$(tb_sql "SELECT dst_ip, dst_port, verdict, reason, ifnull(rule, 'NULL')
    FROM flows ORDER BY id")" \
"$TB_ADDR_ATK|4444|audit|not_allowlisted|NULL
$TB_ADDR_HTTPS|443|allow|allowed_cidr|192.0.2.10:443" \
    "audit row with the reason it would have had, allow row as usual"

# switching the same sandbox to enforce takes effect for the next flow
sed 's/"audit"/"enforce"/' "$TB_DIR/policy.json" > "$TB_DIR/enforce.json"
tb_check "policy set to enforce" tb_sluice policy set "${P}-a" "$TB_DIR/enforce.json"
before=$(tb_attacker_packet_count)
echo "enforced-13" | tb_in a nc -w 3 "$TB_ADDR_ATK" 4444 >/dev/null 2>&1
tb_check "now the connection fails" [ $? != 0 ]
sleep 0.3
tb_assert_eq "$(tb_attacker_packet_count)" "$before" \
    "and the attacker received no new packet"
tb_wait_rows "SELECT count(*) FROM flows WHERE verdict = 'deny'" 1 >/dev/null
tb_assert_eq "$(tb_sql "SELECT reason FROM flows WHERE verdict = 'deny'")" \
    "not_allowlisted" "logged as deny"
tb_done
