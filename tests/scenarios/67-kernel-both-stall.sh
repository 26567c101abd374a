#!/bin/bash
# 67-kernel-both-stall: both kernel switches on, 16 clients opening TLS
# connections as fast as they can, and sluiced stopped (SIGSTOP) for
# STALL seconds in the middle, inside the kernel-SNI lease. Meanwhile the
# kernel lets SYNs and learned hellos out, the servers answer, and the
# copies of it all pile up unread. Resumed, sluiced reads the backlog:
# far more connections than its table of held flights holds, whose
# proofs wait in the other socket and are read ahead of their hellos
# (kept until the hello's copy comes: copies.early_*); connections it
# cannot hold are refused and their servers reset, the price of the
# stall (4,700 of 14,000 until 2026-12-03, none since). What
# must hold, checked at the server: every connection that reached it
# has its row, or the copy that would have made the row is counted in
# lost_records (kind flow, kernel_dropped; until 2026-12-02 such
# connections left no trace at all, and the copies' 4 MiB socket
# overflowed in a 0.6 s stall; STALL=1.5 makes it overflow the 16 MiB
# one). And afterwards sluiced runs and decides as before.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init kernel-both-stall
CONNBENCH=${CONNBENCH:-$REPO/build/connbench}
STALL=${STALL:-0.6}
[ -x "$CONNBENCH" ] || { tb_fail "no $CONNBENCH (make build/connbench)"; tb_done; }
command -v tcpdump >/dev/null || tb_skip "no tcpdump (make deps)"
tb_internet_up || { tb_fail "test bed up"; tb_done; }
msock=$TB_DIR/run/metrics.sock
tb_sluiced_start --kernel-syn on --kernel-sni on --limit-conn-rate 0 \
    --limit-holds 0 --metrics-socket "$msock" ||
    { tb_fail "sluiced up"; tb_done; }
tb_tls_load_bed a
id0=$(tb_sql "SELECT coalesce(max(id), 0) FROM flows")

# the server's side: every SYN that reached it, by source port (the NAT
# keeps the sandbox's ports: one sandbox, one address)
_tb_bg "$TB_NETNS_INET" tcpdump "$TB_DIR/tcpdump.out" tcpdump --immediate-mode -i any -n \
    -B 16384 -s 96 -w "$TB_DIR/syns.pcap" \
    "tcp dst port 443 and tcp[tcpflags] & (tcp-syn|tcp-ack) == tcp-syn"
tcpdump_pid=$TB_LAST_PID
tb_wait_count 1 5 grep -c 'listening on' "$TB_DIR/tcpdump.out" >/dev/null

tb_in a "$CONNBENCH" -m tls -a "$TB_ADDR_HTTPS" -p 443 -n a.test \
    -H "$TB_DIR/hello.bin" -c 16 -d 3 -t 3000 > "$TB_DIR/cb.out" 2>&1 &
cbpid=$!
sleep 1
kill -STOP "$TB_SLUICED_PID"
sleep "$STALL"
kill -CONT "$TB_SLUICED_PID"
wait "$cbpid"
cb() { "$TB_PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$TB_DIR/cb.out" "$1"; }
ok=$(cb ok)
tb_check "sluiced still runs" kill -0 "$TB_SLUICED_PID"
errs=$(cb errors)
tb_check "a load was made ($ok connections answered, $errs failed)" \
    [ "${ok:-0}" -gt 500 ]
# Each connection has 3 s: a stall of 0.6 s costs none of them (until
# 2026-12-03 the bed's nginx took 512 connections at most, and the
# backlog of the stall made it close 2,800-6,700 of each load at once)
tb_check "the stall failed under 1 % of the connections ($errs of $ok)" \
    [ "${errs:-1}" -le $((${ok:-0} / 100)) ]
sleep 0.5
kill -INT "$tcpdump_pid"
wait "$tcpdump_pid" 2>/dev/null
tb_assert_match "$(cat "$TB_DIR/tcpdump.out")" "^0 packets dropped by kernel" \
    "the server's capture is whole"
tcpdump -nr "$TB_DIR/syns.pcap" 2>/dev/null |
    sed -n 's/.* [0-9.]*\.\([0-9]*\) > [0-9.]*\.443: .*/\1/p' \
    > "$TB_DIR/server.syns"
syns=$(wc -l < "$TB_DIR/server.syns")
tb_check "the server saw the connections ($syns SYNs)" [ "$syns" -ge "$ok" ]
sort -u "$TB_DIR/server.syns" > "$TB_DIR/server.ports"
# what status counts lost reaches lost_records; the rows of the backlog
# land once it is read; then none is missing beyond that count
lost=$(tb_status copies.lost)
lost_rows() {
	tb_sql "SELECT coalesce(sum(count), 0) FROM lost_records WHERE kind = 'flow' AND reason = 'kernel_dropped'"
}
tb_check "lost_records counts the $lost copies status copies.lost does" \
    tb_wait_count "$lost" 5 lost_rows
metric=$(curl -s --max-time 3 --unix-socket "$msock" http://x/metrics |
    sed -n 's/^sluice_kernel_syn_copies_dropped_total //p')
tb_assert_eq "$metric" "$lost" \
    "sluice_kernel_syn_copies_dropped_total counts what copies.lost does"
for i in $(seq 50); do
	tb_sql "SELECT DISTINCT src_port FROM flows WHERE id > $id0" |
	    sort -u > "$TB_DIR/row.ports"
	missing=$(comm -23 "$TB_DIR/server.ports" "$TB_DIR/row.ports" | wc -l)
	[ "$missing" -le "$lost" ] && break
	sleep 0.2
done
tb_assert_le "$missing" "$lost" \
    "connections that reached the server without a row ($missing) are no more than the copies counted lost ($lost)"
tb_sql "SELECT verdict, reason, count(*) FROM flows WHERE id > $id0 GROUP BY 1, 2" |
    sed 's/^/# /'
echo "# put off past the room: $(tb_status copies.put_off_full); still held: $(tb_status queue.held_flows)"
# the backlog's proofs run ahead of their hellos (the other socket is
# read at every SYN): kept, they let those connections go when their
# hellos are read (before 2026-12-03 each such connection waited 10 s
# for another, holding a slot, and the table filled: 4,700 refused)
tb_check "proofs read before their hellos were kept and used ($(tb_status copies.early_kept) kept, $(tb_status copies.early_pushed) pushed out)" \
    [ "$(tb_status copies.early_used)" -gt 0 ]
full=$(tb_sql "SELECT count(*) FROM flows WHERE id > $id0 AND reason = 'hold_table_full'")
tb_check "connections refused for want of room ($full) are under a tenth of the $syns the server saw (a third until then; none since)" \
    [ "$full" -lt $((syns / 10)) ]

# and afterwards: an allowed hello reaches the server and is answered, a
# name not allowed is refused before the server gets a byte of it (the
# server's side captured for each: segments to 443 that carry bytes), an
# address never resolved gets no packet through
sleep 0.5
# server_bytes NAME: the hello for NAME, while the server's side is
# captured; prints the client's word and the segments with bytes
server_bytes() {
	local out n
	_tb_bg "$TB_NETNS_INET" tcpdump "$TB_DIR/tcpdump-$1.out" tcpdump --immediate-mode -i any \
	    -n -s 96 -w "$TB_DIR/$1.pcap" \
	    "tcp dst port 443 and (ip[2:2] - ((ip[0] & 0xf) << 2) - ((tcp[12] & 0xf0) >> 2)) > 0"
	n=$TB_LAST_PID
	tb_wait_count 1 5 grep -c 'listening on' "$TB_DIR/tcpdump-$1.out" >/dev/null
	out=$(tb_in a "$TB_PY" "$TB_LIB/tlsclient.py" "$TB_ADDR_HTTPS" 443 --sni "$1")
	sleep 0.3
	kill -INT "$n"
	wait "$n" 2>/dev/null
	echo "$out $(tcpdump -nr "$TB_DIR/$1.pcap" 2>/dev/null | wc -l)"
}
read -r out segs <<EOF
$(server_bytes a.test)
EOF
tb_assert_eq "$out" answered "after the stall: a.test answered"
tb_check "and its hello reached the server ($segs segments with bytes)" [ "$segs" -ge 1 ]
id1=$(tb_sql "SELECT coalesce(max(id), 0) FROM flows")
read -r out segs <<EOF
$(server_bytes b.test)
EOF
tb_check "after the stall: b.test refused ($out)" [ "$out" != answered ]
tb_assert_eq "$segs" 0 "and the server got no byte of it"
tb_wait_rows "SELECT count(*) FROM flows WHERE id > $id1 AND sni = 'b.test'" 1 >/dev/null
tb_assert_eq "$(tb_sql "SELECT verdict, reason FROM flows WHERE id > $id1 AND sni = 'b.test'")" \
    "deny|sni_not_allowed" "its row"
atk0=$(tb_attacker_packet_count proto=tcp)
tb_in a "$TB_PY" "$TB_LIB/tlsclient.py" "$TB_ADDR_ATK" 443 --sni a.test >/dev/null
tb_assert_eq "$(tb_attacker_packet_count proto=tcp)" "$atk0" \
    "after the stall: the attacker host received nothing"
tb_check "sluiced stops" tb_sluiced_term
tb_done
