#!/bin/bash
# 68-end-reuse: a connection's end counters go to its own row when the
# sandbox opens a new connection on the same 5-tuple right after it. The
# client ends each connection with a reset and reconnects at once from the
# same port; conntrack reopens the 5-tuple: it ends the old entry (its
# destroy event) and makes a new one for the SYN, which sluiced decides
# and logs. The old end can be read after the new row is written; it must
# still close the old row, not the new one. Each pair sends a few bytes,
# then many: the rows' counters must match what the far side (the
# attacker host, on an allowed port) received on each connection. The ends
# are dated by conntrack (nf_conntrack_timestamp, which sluiced turns on in
# the gateway's namespace): the old one before the new row.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init end-reuse
tb_internet_up || { tb_fail "test bed up"; tb_done; }
tb_sluiced_start || { tb_fail "sluiced up"; tb_done; }

PORT=4444
SMALL=200
BIG=6000
cat > "$TB_DIR/p.json" <<EOF
{"sluice": {"allowedCidrs": ["$TB_ADDR_ATK:$PORT"]}}
EOF
tb_check "sandbox add" tb_sandbox_add a "$TB_DIR/p.json"

# pair SPORT: two connections from SPORT, SMALL then BIG bytes, each ended
# by the client's reset once the far host has answered
pair() {
	tb_in a "$TB_PY" - "$TB_ADDR_ATK" "$PORT" "$1" "$SMALL" "$BIG" <<'PY'
import socket, struct, sys
dst, port, sport = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for n in map(int, sys.argv[4:]):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("", sport))
    s.settimeout(5)
    s.connect((dst, port))
    s.sendall(b"x" * n)
    got = b""
    while not got.endswith(b"\n"):
        b = s.recv(64)
        if not b:
            break
        got += b
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()
    print(n, got.decode().strip())
PY
}

# a reset connection stays in conntrack for CLOSE's timeout: 1 s here, not
# 10, so that the second connections end soon (a new SYN reopens the
# 5-tuple either way)
ip netns exec "$TB_NETNS_GW" sysctl -qw net.netfilter.nf_conntrack_tcp_timeout_close=1
SPORTS="41001 41002 41003 41004 41005"
for sp in $SPORTS; do
	tb_assert_eq "$(pair "$sp" | tr '\n' ' ')" "$SMALL attacker $BIG attacker " \
	    "port $sp: both connections answered"
done
# the far side: each connection arrived with its own bytes
for sp in $SPORTS; do
	tb_assert_eq "$(tb_wait_count 1 5 tb_attacker_conn_count peer_port=$sp bytes=$SMALL)/$(
	    tb_wait_count 1 5 tb_attacker_conn_count peer_port=$sp bytes=$BIG)" "1/1" \
	    "port $sp: the far host received $SMALL bytes, then $BIG"
done

# listing the table reaps what expired (scenario 43)
sleep 2
ip netns exec "$TB_NETNS_GW" conntrack -L >/dev/null 2>&1
n=$(echo $SPORTS | wc -w)
tb_assert_eq "$(tb_wait_rows "SELECT count(*) FROM flows WHERE dst_port = $PORT
    AND end_ts IS NOT NULL" $((2 * n)) 10)" $((2 * n)) "every row has its end"
for sp in $SPORTS; do
	rows=$(tb_sql "SELECT coalesce(bytes_out, -1) FROM flows WHERE dst_port = $PORT
	    AND src_port = $sp ORDER BY id" | tr '\n' ' ')
	read -r b1 b2 <<<"$rows"
	# headers add ~52 bytes a segment: the small one stays under 1,000
	tb_check "port $sp: the first row counts the small connection ($rows)" \
	    [ "${b1:-0}" -ge "$SMALL" -a "${b1:-0}" -lt 1000 ]
	tb_check "port $sp: the second row counts the big one" \
	    [ "${b2:-0}" -ge "$BIG" ]
	tb_assert_eq "$(tb_sql "SELECT count(*) FROM flows a, flows b
	    WHERE a.src_port = $sp AND b.src_port = $sp AND a.id < b.id
	    AND a.dst_port = $PORT AND b.dst_port = $PORT
	    AND a.end_ts <= b.ts AND b.ts <= b.end_ts")" 1 \
	    "port $sp: the first connection ended before the second's row, which ended after it"
done

# A new connection's SYN sent again after its answer (its SYN-ACK lost, as
# the client sees it) is the same attempt, with no row of its own, also
# when the old connection's end was read after the new SYN was decided:
# that end must not take the new SYN's verdict away. rawtcp.py's reuse
# plan; --clean: the reset is the last word, so conntrack reopens.
out=$(tb_in a "$TB_PY" "$TB_LIB/rawtcp.py" "$TB_ADDR_ATK" "$PORT" reuse \
    --clean --syn-again --pause 0.1)
sp=$(tb_word "$out" sport)
tb_assert_match "$out" "^result=answered .*syns=2 bytes_in=9" \
    "raw client: the new SYN was answered and sent twice, the connection carried ($out)"
tb_assert_eq "$(tb_wait_count 3 3 tb_attacker_packet_count proto=tcp \
    sport="${sp:-0}" flags=S)" 3 \
    "the far host received the first SYN, the new one and its second copy"
sleep 0.5	# the log's batch (50 ms)
tb_assert_eq "$(tb_sql "SELECT count(*) FROM flows WHERE dst_port = $PORT
    AND src_port = ${sp:-0}")" 2 "one row per connection, none for the SYN sent again"
tb_done
