#!/bin/bash
# 63-restart-held: connections whose first flight was held when sluiced
# stopped are refused after its restart (no_inspection_state: it has no
# state for them) and now reset at the server as well as at the client.
# Before, only the client was reset, and the server kept its side open
# until its own timeout (nginx: 60 s), its packets dropped at the gateway,
# as it did for a refused first flight before scenario 59's fix. The
# restarted sluiced knows nothing of where the server is in the stream but
# the refused segment; a retransmission of the held flight starts where
# the server expects the next byte.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init restart-held
tb_internet_up || { tb_fail "test bed up"; tb_done; }
tb_sluiced_start || { tb_fail "sluiced up"; tb_done; }

cat > "$TB_DIR/policy.json" <<EOF
{"network": {"allowedDomains": ["a.test"]}}
EOF
tb_check "sandbox add" tb_sandbox_add a "$TB_DIR/policy.json"
tb_assert_eq "$(tb_in a dig +short a.test)" "$TB_ADDR_HTTPS" "a.test resolves"

# client PORT SPORT: connects from SPORT, sends the first 20 bytes of its
# first flight (a ClientHello for a.test; an HTTP request for a.test),
# prints "sent"; once $TB_DIR/go exists sends the rest and prints what
# became of the connection (reset, answered, closed, timeout)
cat > "$TB_DIR/client.py" <<'EOF'
import os, socket, sys, time
sys.path.insert(0, sys.argv[5])
import tlsclient
addr, port, sport, go = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
if port == 443:
    flight = tlsclient.python_hello("a.test", "")
else:
    flight = b"GET / HTTP/1.1\r\nHost: a.test\r\n\r\n"
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
s.bind(("", sport))
s.settimeout(5)
s.connect((addr, port))
s.sendall(flight[:20])
print("sent", flush=True)
for _ in range(200):
    if os.path.exists(go):
        break
    time.sleep(0.05)
s.settimeout(15)
try:
    s.sendall(flight[20:])
    print("answered" if s.recv(100) else "closed")
except ConnectionResetError:
    print("reset")
except socket.timeout:
    print("timeout")
EOF
client() {
	_tb_bg "${P}-a" "client-$2" "$TB_DIR/client.$2" "$TB_PY" -u \
	    "$TB_DIR/client.py" "$TB_ADDR_HTTPS" "$1" "$2" "$TB_DIR/go" "$TB_LIB"
}

id0=$(tb_sql "SELECT coalesce(max(id), 0) FROM flows")
client 443 42101
client 80 42102
tb_wait_count 2 5 eval 'cat "$TB_DIR"/client.421* 2>/dev/null | grep -c "^sent$"' >/dev/null
sleep 0.3
tb_assert_eq "$(tb_server_sockets 443 42101) $(tb_server_sockets 80 42102)" "1 1" \
    "the server holds both connections (handshakes made, first flights held)"
tb_check "sluiced stops (SIGTERM)" tb_sluiced_term
r_stop=$(tb_sql "SELECT count(*) FROM flows WHERE id > $id0")
tb_sluiced_start || { tb_fail "sluiced restarts"; tb_done; }
touch "$TB_DIR/go"
# each client's retransmission of its held bytes meets the restarted
# sluiced within a few retransmission timeouts
tb_wait_count 2 20 eval 'cat "$TB_DIR"/client.421* 2>/dev/null | grep -cv "^sent$"' >/dev/null
tb_assert_eq "$(sed -n 2p "$TB_DIR/client.42101") $(sed -n 2p "$TB_DIR/client.42102")" \
    "reset reset" "both clients are reset"
sleep 0.3
tb_assert_eq "$(tb_server_sockets 443 42101)" 0 "the server holds nothing of the TLS connection"
tb_assert_eq "$(tb_server_sockets 80 42102)" 0 "the server holds nothing of the HTTP connection"
tb_assert_eq "$(grep -c '"GET ' "$TB_DIR/nginx.access.log")" 0 \
    "nginx answered no request on either"
tb_assert_eq "$r_stop" 2 "the stop wrote a row for each cut flight"
tb_wait_rows "SELECT count(*) FROM flows WHERE id > $id0" 4 >/dev/null
tb_assert_eq "$(tb_sql "SELECT src_port, verdict, reason FROM flows WHERE id > $id0 ORDER BY src_port, id")" \
"42101|deny|no_inspection_state
42101|deny|no_inspection_state
42102|deny|no_inspection_state
42102|deny|no_inspection_state" "each: the stop's row, then the refusal's after the restart"
tb_assert_eq "$(tb_status queue.server_resets) $(tb_status queue.server_reset_errors)" "2 0" \
    "two resets sent to servers, none failed (sluice status)"

# an allowed connection after the restart is not touched by any of this
out=$(tb_in a curl -s --max-time 5 --cacert "$TB_CA" https://a.test/)
tb_assert_eq "$out" "hello from a.test" "a.test is served after the restart"
tb_done
