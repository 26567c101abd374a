#!/bin/bash
# 15-policy-swap: `policy set` replaces a sandbox's policy atomically for new
# flows; a malformed policy is rejected with its position (by the CLI and by
# the daemon itself) and the old one stays in force; a flight held across a
# swap is logged with the policy that admitted it.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init policy-swap
tb_internet_up || { tb_fail "test bed up"; tb_done; }
tb_sluiced_start || { tb_fail "sluiced up"; tb_done; }

cat > "$TB_DIR/p1.json" <<EOF
{"sluice": {"allowedCidrs": ["192.0.2.10:443"]}}
EOF
cat > "$TB_DIR/p2.json" <<EOF
{"sluice": {"allowedCidrs": ["192.0.2.10:443", "203.0.113.66:4444"]}}
EOF
printf '{\n  "sluice": {\n    "allowedCidrs": ["10.0.0.1/33"]\n  }\n}\n' > "$TB_DIR/bad.json"
sha1=$(sha256sum < "$TB_DIR/p1.json" | cut -d' ' -f1)
sha2=$(sha256sum < "$TB_DIR/p2.json" | cut -d' ' -f1)
tb_check "sandbox add" tb_sandbox_add a "$TB_DIR/p1.json"

echo "before-swap" | tb_in a nc -w 2 "$TB_ADDR_ATK" 4444 >/dev/null 2>&1
tb_check "port 4444 is denied under p1" [ $? != 0 ]
tb_assert_eq "$(tb_attacker_packet_count)" 0 "nothing reached the attacker"

tb_check "policy set p2" tb_sluice policy set "${P}-a" "$TB_DIR/p2.json"
out=$(echo "after-swap" | tb_in a nc -w 3 "$TB_ADDR_ATK" 4444)
tb_assert_eq "$out" "attacker" "port 4444 is allowed under p2"
tb_wait_count 1 3 tb_attacker_conn_count port=4444 >/dev/null
tb_assert_match "$(tb_attacker_received)" "after-swap" "the attacker got the new flow"

# a bad policy, through the CLI: rejected before it reaches the daemon
err=$(tb_sluice policy set "${P}-a" "$TB_DIR/bad.json" 2>&1)
tb_assert_eq "$?" 1 "the CLI exits 1 on a bad policy"
tb_assert_match "$err" "bad.json:3:[0-9]+: .*33" "the error names file:line:col"

# and straight at the daemon, bypassing the CLI's own check
reply=$("$TB_PY" - "$TB_DIR/ctl.sock" "$TB_DIR/bad.json" "${P}-a" <<'EOF'
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
req = {"cmd": "policy.set", "name": sys.argv[3],
       "policy": open(sys.argv[2]).read(), "origin": "raw.json"}
s.sendall((json.dumps(req) + "\n").encode())
print(s.makefile().readline().strip())
EOF
)
tb_assert_match "$reply" '"ok": ?false' "the daemon refuses it too"
tb_assert_match "$reply" 'raw.json:3:[0-9]+:' "with its position"
tb_assert_match "$(tb_sluice sandbox list -j)" "$sha2" "p2 is still in force"

out=$(echo "still-p2" | tb_in a nc -w 3 "$TB_ADDR_ATK" 4444)
tb_assert_eq "$out" "attacker" "and still decides: 4444 allowed"
tb_in a curl -s --max-time 3 "http://$TB_ADDR_HTTPS:80/" >/dev/null
tb_assert_eq "$?" 7 "and port 80 still denied"

tb_wait_rows "SELECT count(*) FROM flows" 4 >/dev/null
tb_assert_eq "$(tb_sql "SELECT dst_port, verdict, policy_sha256 FROM flows ORDER BY id")" \
"4444|deny|$sha1
4444|allow|$sha2
4444|allow|$sha2
80|deny|$sha2" "each row carries the policy that decided it"
tb_assert_eq "$(tb_sql "SELECT sha256 FROM policies WHERE sandbox = '${P}-a' ORDER BY id")" \
"$sha1
$sha2" "both policy versions are kept, the bad one is not"

# a first flight held across a `policy set`: its row, written after the
# swap (the client connects, sends nothing and closes), names the entry
# and the policy that admitted its SYN (the old policy is freed by then:
# scenarios 1-4 run again under ASan)
cat > "$TB_DIR/p3.json" <<EOF
{"network": {"allowedDomains": ["a.test:443"]}}
EOF
cat > "$TB_DIR/p4.json" <<EOF
{"network": {"allowedDomains": ["zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz.test"]}}
EOF
sha3=$(sha256sum < "$TB_DIR/p3.json" | cut -d' ' -f1)
tb_check "policy set p3" tb_sluice policy set "${P}-a" "$TB_DIR/p3.json"
tb_assert_eq "$(tb_in a dig +short a.test)" "$TB_ADDR_HTTPS" "a.test resolves under p3"
id0=$(tb_sql "SELECT coalesce(max(id), 0) FROM flows")
tb_in a "$TB_PY" - "$TB_ADDR_HTTPS" <<'EOF' &
import socket, sys, time
s = socket.create_connection((sys.argv[1], 443), timeout=3)
time.sleep(1.5)
s.close()
time.sleep(0.3)
EOF
held=$!
sleep 0.5
for _ in 1 2 3 4; do
	tb_sluice policy set "${P}-a" "$TB_DIR/p4.json" >/dev/null || tb_fail "policy set p4"
done
wait "$held"
tb_wait_rows "SELECT count(*) FROM flows WHERE id > $id0" 1 >/dev/null
tb_assert_eq "$(tb_sql "SELECT dst_port, verdict, reason, rule, name, policy_sha256 FROM flows WHERE id > $id0")" \
    "443|allow|allowed_domain|a.test:443|a.test|$sha3" \
    "the held flight's row: the old policy's entry and digest, read after the swap"
tb_check "sluiced is still running" kill -0 "$TB_SLUICED_PID"
tb_done
