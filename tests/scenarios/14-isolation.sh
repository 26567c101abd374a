#!/bin/bash
# 14-isolation: two sandboxes cannot reach each other or the gateway, even
# with a policy that allows every address; forged source addresses get
# nothing out. Identity is the ingress interface, never the source address.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init isolation
tb_internet_up || { tb_fail "test bed up"; tb_done; }
tb_sluiced_start || { tb_fail "sluiced up"; tb_done; }

cat > "$TB_DIR/open.json" <<EOF
{"sluice": {"allowedCidrs": ["0.0.0.0/0"]}}
EOF
tb_check "sandbox a" tb_sandbox_add a "$TB_DIR/open.json"
tb_check "sandbox b" tb_sandbox_add b "$TB_DIR/open.json"
addr_a=$(tb_sluice sandbox list -j | "$TB_PY" -c 'import json,sys
print([s["addr"] for s in json.load(sys.stdin) if s["name"].endswith("-a")][0].split("/")[0])')
addr_b=$(tb_sluice sandbox list -j | "$TB_PY" -c 'import json,sys
print([s["addr"] for s in json.load(sys.stdin) if s["name"].endswith("-b")][0].split("/")[0])')
gw_a=$(tb_sluice sandbox list -j | "$TB_PY" -c 'import json,sys
print([s["gateway"] for s in json.load(sys.stdin) if s["name"].endswith("-a")][0])')
tb_check "addresses differ" [ -n "$addr_a" ] && [ "$addr_a" != "$addr_b" ]

# b listens; a tries to reach it
tb_in b timeout 8 nc -l -k 8080 > "$TB_DIR/b.received" 2>/dev/null &
blisten=$!
sleep 0.3
t0=$(tb_time_ms)
echo "to-b-secret" | tb_in a nc -w 3 "$addr_b" 8080 >/dev/null 2>&1
rc=$?
t1=$(tb_time_ms)
tb_check "a cannot connect to b" [ "$rc" != 0 ]
tb_assert_le $((t1 - t0)) 1000 "refused at once"
echo "to-gw-secret" | tb_in a nc -w 2 "$gw_a" 22 >/dev/null 2>&1
tb_check "a cannot connect to its gateway's other ports" [ $? != 0 ]
out=$(tb_in a ping -c 1 -W 1 "$addr_b" 2>&1)
tb_check "a cannot ping b" [ $? != 0 ]

# forged sources: b's address, and an outside address
tb_in a ip addr add "$addr_b/32" dev eth0
echo "forged-b" | tb_in a nc -w 2 -s "$addr_b" "$TB_ADDR_ATK" 4444 >/dev/null 2>&1
tb_check "a connection from a forged sandbox address fails" [ $? != 0 ]
tb_in a ip addr add 192.0.2.99/32 dev eth0
echo "forged-out" | tb_in a nc -w 2 -s 192.0.2.99 "$TB_ADDR_ATK" 4444 >/dev/null 2>&1
tb_check "a connection from a forged outside address fails" [ $? != 0 ]
# a route change inside the sandbox does not help either
tb_in a ip route replace "$TB_ADDR_ATK/32" via "$gw_a" src "$addr_b"
echo "forged-route" | tb_in a nc -w 2 "$TB_ADDR_ATK" 4444 >/dev/null 2>&1
tb_check "a forged source through a rewritten route fails" [ $? != 0 ]
tb_in a ip route del "$TB_ADDR_ATK/32"
tb_in a ip addr del "$addr_b/32" dev eth0
tb_in a ip addr del 192.0.2.99/32 dev eth0

# the sandbox's own address still works: the gateway is not just broken
out=$(echo "legit-14" | tb_in a nc -w 3 "$TB_ADDR_ATK" 4444)
tb_assert_eq "$out" "attacker" "a's own connection out works"

wait $blisten 2>/dev/null
tb_check "b received nothing" [ ! -s "$TB_DIR/b.received" ]
tb_assert_eq "$(tb_attacker_conn_count port=4444)" 1 \
    "the attacker got exactly the one legitimate connection"
received=$(tb_attacker_received)
tb_check "no forged bytes reached the attacker" \
    [ -z "$(echo "$received" | grep forged)" ]

tb_wait_rows "SELECT count(*) FROM flows WHERE reason = 'internal_destination'" 3 >/dev/null
tb_assert_eq "$(tb_sql "SELECT dst_ip, ifnull(dst_port, 'NULL'), verdict FROM flows
    WHERE reason = 'internal_destination' ORDER BY id")" \
"$addr_b|8080|deny
$gw_a|22|deny
$addr_b|NULL|deny" "each attempt on the inside is one internal_destination row"
tb_assert_eq "$(tb_sql "SELECT count(*) FROM flows WHERE src_ip != '$addr_a'
    AND verdict != 'deny'")" 0 "no flow from a forged source was allowed"
tb_done
