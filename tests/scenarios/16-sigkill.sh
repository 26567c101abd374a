#!/bin/bash
# 16-sigkill: with sluiced killed by SIGKILL, new flows fail closed (the
# queue has no reader, so the kernel drops) and nothing reaches the
# attacker; after a restart the sandbox is adopted again and works. A
# teardown takes the uplink's far end with it at once, so that a start
# right after it can make the uplink again.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init sigkill
tb_internet_up || { tb_fail "test bed up"; tb_done; }
tb_sluiced_start || { tb_fail "sluiced up"; tb_done; }

cat > "$TB_DIR/policy.json" <<EOF
{"sluice": {"allowedCidrs": ["192.0.2.10:443", "203.0.113.66:4444"]}}
EOF
tb_check "sandbox add" tb_sandbox_add a "$TB_DIR/policy.json"
out=$(tb_in a curl -s --max-time 5 --cacert "$TB_CA" \
    --resolve "a.test:443:$TB_ADDR_HTTPS" https://a.test/)
tb_assert_eq "$out" "hello from a.test" "allowed before the crash"

tb_sluiced_kill9
echo "while-dead" | tb_in a nc -w 2 "$TB_ADDR_ATK" 4444 >/dev/null 2>&1
tb_check "an allowed destination fails while sluiced is dead" [ $? != 0 ]
tb_in a curl -s --max-time 2 --cacert "$TB_CA" \
    --resolve "a.test:443:$TB_ADDR_HTTPS" https://a.test/ >/dev/null
tb_check "HTTPS fails too" [ $? != 0 ]
sleep 0.3
tb_assert_eq "$(tb_attacker_packet_count)" 0 "the attacker received no packet"
tb_assert_eq "$(grep -c 'sni=a.test' "$TB_DIR/nginx.access.log")" 1 \
    "nginx got only the request from before the crash"

tb_sluiced_start || { tb_fail "sluiced restarts"; tb_done; }
tb_assert_match "$(tb_sluice sandbox list)" "^${P}-a " "the sandbox is adopted again"
out=$(echo "after-restart" | tb_in a nc -w 3 "$TB_ADDR_ATK" 4444)
tb_assert_eq "$out" "attacker" "flows work again after the restart"
out=$(tb_in a curl -s --max-time 5 --cacert "$TB_CA" \
    --resolve "a.test:443:$TB_ADDR_HTTPS" https://a.test/)
tb_assert_eq "$out" "hello from a.test" "HTTPS too"
tb_wait_count 1 3 tb_attacker_conn_count port=4444 >/dev/null
received=$(tb_attacker_received)
tb_check "the attacker got only the post-restart bytes" \
    [ -z "$(echo "$received" | grep while-dead)" ]
tb_assert_match "$received" "after-restart" "which did arrive"

# The far end's name stayed taken until the kernel freed the namespace,
# and a start right after the teardown failed: "File exists".
peer="up-${TB_NETNS_GW:0:11}"
tb_check "before the teardown the uplink's far end is $peer" \
    ip -n "$TB_NETNS_INET" link show "$peer"
tb_sluiced_stop
tb_check "the teardown took it" \
    bash -c "! ip -n '$TB_NETNS_INET' link show '$peer' >/dev/null 2>&1"
tb_sluiced_start || { tb_fail "sluiced starts right after a teardown"; tb_done; }
tb_check "sandbox add after it" tb_sandbox_add b "$TB_DIR/policy.json"
out=$(echo "after-teardown" | tb_in b nc -w 3 "$TB_ADDR_ATK" 4444)
tb_assert_eq "$out" "attacker" "and the new gateway's uplink carries flows"
tb_done
