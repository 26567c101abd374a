#!/bin/bash
# 60-stop-held: sluiced stopped cleanly (SIGTERM) while two connections
# are under inspection: one silent since its handshake, one with half a
# TLS record header held. A flow's row is written when its first flight is
# decided, and these never will be: before, both went without a row,
# though the attacker host had taken both handshakes (found by review,
# 2026-11-30). Now the stop writes them: the silent one its SYN's
# decision, the cut one no_inspection_state.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init stop-held
tb_internet_up || { tb_fail "test bed up"; tb_done; }
tb_sluiced_start || { tb_fail "sluiced up"; tb_done; }

cat > "$TB_DIR/policy.json" <<EOF
{"network": {"allowedDomains": ["evil.test"]}}
EOF
tb_check "sandbox add" tb_sandbox_add a "$TB_DIR/policy.json"
tb_assert_eq "$(tb_in a dig +short evil.test)" "$TB_ADDR_ATK" "evil.test resolves (to the attacker host)"
id0=$(tb_sql "SELECT coalesce(max(id), 0) FROM flows")
# client SPORT BYTES: connects from SPORT, sends BYTES (hex), stays 6 s
client() {
	_tb_bg "${P}-a" "client-$1" "$TB_DIR/client.$1" "$TB_PY" -u -c '
import socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("", int(sys.argv[1])))
s.settimeout(5)
s.connect((sys.argv[3], 443))
print("connected", flush=True)
if sys.argv[2]:
    s.send(bytes.fromhex(sys.argv[2]))
time.sleep(6)' "$1" "$2" "$TB_ADDR_ATK"
}
client 42001 ""
client 42002 1603010200
tb_wait_count 2 5 tb_attacker_packet_count proto=tcp dport=443 flags=S >/dev/null
sleep 0.5
tb_assert_eq "$(cat "$TB_DIR/client.42001" "$TB_DIR/client.42002")" "connected
connected" "both handshakes made, with the attacker host"
tb_assert_eq "$(tb_sql "SELECT count(*) FROM flows WHERE id > $id0")" 0 \
    "no row yet: neither first flight is decided"
tb_check "sluiced stops (SIGTERM)" tb_sluiced_term
tb_assert_eq "$(tb_sql "SELECT src_port, verdict, reason FROM flows WHERE id > $id0 ORDER BY src_port")" \
"42001|allow|allowed_domain
42002|deny|no_inspection_state" "each has its row: the silent one its SYN's decision, the cut one no_inspection_state"
tb_assert_eq "$(tb_attacker_received | grep -c .)" 0 "the attacker got no byte"
tb_done
