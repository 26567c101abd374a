#!/bin/bash
# 10-allowed-cidr: an allowedCidrs entry's address and port are reachable
# with real clients, and each connection is one 'allow' row.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init allowed-cidr
tb_internet_up || { tb_fail "test bed up"; tb_done; }
tb_sluiced_start || { tb_fail "sluiced up"; tb_done; }

cat > "$TB_DIR/policy.json" <<EOF
{"sluice": {"allowedCidrs": ["192.0.2.10:443", "198.51.100.7:5432"]}}
EOF
tb_check "sandbox add" tb_sandbox_add a "$TB_DIR/policy.json"
sha=$(sha256sum < "$TB_DIR/policy.json" | cut -d' ' -f1)

out=$(tb_in a curl -s --max-time 5 --cacert "$TB_CA" \
    --resolve "a.test:443:$TB_ADDR_HTTPS" https://a.test/)
tb_assert_eq "$out" "hello from a.test" "HTTPS to an allowed CIDR:port answers"
out=$(tb_in a curl -s --max-time 5 --cacert "$TB_CA" \
    --resolve "b.test:443:$TB_ADDR_HTTPS" https://b.test/)
tb_assert_eq "$out" "hello from b.test" "a second name on the same address"
out=$(tb_in a nc -w 3 "$TB_ADDR_DB" "$TB_PORT_DB" </dev/null)
tb_assert_eq "$out" "db" "a single-address entry with a port"

# the far side saw the requests, from the gateway's uplink address
n=$(grep -c "^198.51.100.2 $TB_ADDR_HTTPS:443 sni=a.test" "$TB_DIR/nginx.access.log")
tb_assert_eq "$n" 1 "nginx got the a.test request through the uplink"

tb_wait_rows "SELECT count(*) FROM flows" 3 >/dev/null
tb_assert_eq "$(tb_sql "SELECT count(*) FROM flows")" 3 "one row per connection"
tb_assert_eq "$(tb_sql "SELECT sandbox, proto, src_ip, dst_ip, dst_port, verdict,
    reason, rule, policy_sha256 = '$sha' FROM flows WHERE dst_port = 5432")" \
    "${P}-a|tcp|10.213.0.2|198.51.100.7|5432|allow|allowed_cidr|198.51.100.7:5432|1" \
    "the db row, column by column"
tb_assert_eq "$(tb_sql "SELECT count(*) FROM flows WHERE dst_ip = '$TB_ADDR_HTTPS'
    AND dst_port = 443 AND verdict = 'allow' AND reason = 'allowed_cidr'
    AND rule = '192.0.2.10:443' AND src_port BETWEEN 1024 AND 65535")" 2 \
    "the two HTTPS rows"
tb_assert_match "$(tb_sql "SELECT time FROM flow_log LIMIT 1")" \
    '^20[0-9]{2}-[01][0-9]-[0-3][0-9]T[0-9:]{8}\.[0-9]{3}Z$' \
    "flow_log shows UTC times"
tb_assert_eq "$(tb_sql "SELECT count(*) FROM sandboxes WHERE name = '${P}-a'
    AND deleted_us IS NULL")" 1 "the sandboxes table has it"
tb_assert_eq "$(tb_sql "SELECT sha256 = '$sha' FROM policies
    WHERE sandbox = '${P}-a'")" 1 "the policies table has its text's sha256"
tb_assert_eq "$(tb_attacker_packet_count)" 0 "the attacker received nothing"
tb_done
