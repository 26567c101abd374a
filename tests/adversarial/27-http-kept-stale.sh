#!/bin/bash
# 27-http-kept-stale: an HTTP connection to plain.test (allowed) has its
# first request decided and answered; its hold stays, to read the
# requests that may follow on it. The server then resets it (no FIN), and
# sluiced does not see that reset: server packets of an inspected
# connection pass in the kernel. A SYN from the same source port is one
# conntrack does not take as new (adversarial 25): it comes marked stale,
# the server, with no socket left, answers it, and a new connection goes
# on under the old entry. (found by review, 2026-12-03) The stale SYN
# went with a row and the old hold stayed; the new connection's head,
# for evil.test, lay before where the old stream had got, was taken for
# a retransmission of bytes already decided, and passed unread: the
# server served evil.test, and no row named it. The same with the first
# connection's own ISN, which passed as a retransmitted SYN. Now a stale
# or repeated SYN on a connection whose first request was decided holds
# a flight of its own: evil.test's head is refused, and plain.test's is
# served. Checked at the server: the Host of every request it read.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init adv-http-kept
tb_internet_up || { tb_fail "test bed up"; tb_done; }

PORT=8081
# plain.test's address: a server that reads request heads, notes each
# one's Host, answers it (kept alive) and resets the connection 0.3 s
# after its first answer
ip netns exec "$TB_NETNS_INET" timeout 90 "$TB_PY" - "$TB_ADDR_PLAIN" "$PORT" "$TB_DIR/srv.log" <<'EOF' &
import re, socket, struct, sys, threading, time
ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind((sys.argv[1], int(sys.argv[2])))
ls.listen(8)
def serve(c):
    c.settimeout(0.3)
    buf, end = b"", None
    while end is None or time.time() < end:
        try:
            d = c.recv(4096)
        except OSError:
            d = None
        if d == b"":
            break
        if d:
            buf += d
        while b"\r\n\r\n" in buf:
            head, buf = buf.split(b"\r\n\r\n", 1)
            m = re.search(rb"\r\nHost: *([^\r]*)", head)
            with open(sys.argv[3], "a") as f:
                f.write((m.group(1) if m else b"-").decode("latin-1") + "\n")
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            if end is None:
                end = time.time() + 0.3
    c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    c.close()
while True:
    c, _ = ls.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
EOF
_tb_record $! kept-server
sleep 0.5

cat > "$TB_DIR/policy.json" <<EOF
{"network": {"allowedDomains": ["plain.test:$PORT/http"]}}
EOF

# round MODE HOST2 CONN2 SERVED ROWS WHAT: plain.test's head, the
# server's answer and reset, then HOST2's head from the same port (MODE:
# http-stale, a new ISN; http-stale-same, the first one's)
round() {
	local id0 out
	: > "$TB_DIR/srv.log"
	id0=$(tb_sql "SELECT coalesce(max(id), 0) FROM flows")
	out=$(tb_in "a$ks" env REUSE_DPORT="$PORT" "$TB_PY" "$TB_LIB/reuse_isn.py" \
	    "$(tb_sandbox_field "a$ks" addr)" "$TB_ADDR_PLAIN" plain.test "$2" "$1" 0.6)
	echo "$out"
	tb_assert_match "$(printf '%s\n' "$out" | sed -n 1p)" "^conn1: server reset after b'ok'" \
	    "--kernel-syn $ks, $1 $2: plain.test's head answered, then the server's reset"
	tb_assert_match "$(printf '%s\n' "$out" | sed -n 2p)" "$3" \
	    "--kernel-syn $ks, $1 $2: the next connection from that port"
	sleep 1
	tb_assert_eq "$(paste -sd' ' "$TB_DIR/srv.log")" "$4" \
	    "--kernel-syn $ks, $1 $2: the Hosts the server read"
	tb_wait_rows "SELECT count(*) FROM flows WHERE id > $id0" 2 >/dev/null
	tb_assert_eq "$(tb_sql "SELECT verdict, reason, ifnull(http_host, '-') FROM flows
	    WHERE id > $id0 ORDER BY id")" "$5" "--kernel-syn $ks, $1: $6"
}

for ks in off on; do
	tb_sluiced_start --kernel-syn "$ks" || { tb_fail "sluiced up (--kernel-syn $ks)"; continue; }
	tb_check "sandbox add ($ks)" tb_sandbox_add "a$ks" "$TB_DIR/policy.json"
	tb_assert_eq "$(tb_in "a$ks" dig +short plain.test)" "$TB_ADDR_PLAIN" "plain.test resolves ($ks)"
	# the connections are made by hand: the sandbox kernel's resets stay home
	tb_in "a$ks" iptables -A OUTPUT -p tcp --tcp-flags ALL RST -j DROP
	for mode in http-stale http-stale-same; do
		round "$mode" evil.test "^conn2: reset$" "plain.test" \
"allow|allowed_domain|plain.test
deny|host_not_allowed|evil.test" "evil.test's head read and refused (the server never read it)"
		round "$mode" plain.test "^conn2: server reset after b'ok'" "plain.test plain.test" \
"allow|allowed_domain|plain.test
allow|allowed_domain|plain.test" "plain.test's head served, a row each"
	done
	tb_check "sluiced stops ($ks)" tb_sluiced_term
done
tb_assert_eq "$(tb_attacker_packet_count)" 0 "the attacker received nothing"
tb_done
