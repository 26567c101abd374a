#!/bin/bash
# 58-http-framing: on port 80 the framing sluiced read (heads, chunk lines)
# is kept until the server acknowledges it, so that no other version of it
# can reach the server (inspect.c). Its bound is 128 ranges and 16 KiB: a
# client that pipelines past it waits for the server's ACK when some of it
# went out, and is denied (hold_overflow) when none did. Bodies are not
# kept, so pipelined requests with bodies are served whole.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init http-framing
tb_internet_up || { tb_fail "test bed up"; tb_done; }
tb_sluiced_start || { tb_fail "sluiced up"; tb_done; }

cat > "$TB_DIR/policy.json" <<EOF
{"network": {"allowedDomains": ["a.test"]}}
EOF
tb_check "sandbox add" tb_sandbox_add a "$TB_DIR/policy.json"
tb_in a dig +short a.test >/dev/null
block() { ip netns exec "$TB_NETNS_INET" iptables -w "$1" OUTPUT -p tcp --sport 80 -j DROP; }
posts() { grep -c "\"POST /$1" "$TB_DIR/nginx.access.log"; }
# pipeline TAG N SPLIT [SYNC]: N POSTs with one-byte bodies (each head its
# own range of framing: the bodies part them), the first SPLIT, then 50 ms
# later the rest (within the client's first retransmission timeout, so its
# TCP sends them although the first are not acknowledged); prints the answers counted and how the connection ended.
# With SYNC, once connected it creates SYNC.up and waits for SYNC.go.
pipeline() {
	tb_in a "$TB_PY" - "$TB_ADDR_HTTPS" "$@" <<'EOF'
import os, socket, sys, time
tag, n, split = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
sync = sys.argv[5] if len(sys.argv) > 5 else None
def req(i):
    close = b"Connection: close\r\n" if i == n - 1 else b""
    return (b"POST /%s%d HTTP/1.1\r\nHost: a.test\r\nContent-Length: 1\r\n%s\r\nx"
            % (tag.encode(), i, close))
s = socket.create_connection((sys.argv[1], 80), timeout=10)
if sync:
    open(sync + ".up", "w").close()
    for _ in range(100):
        if os.path.exists(sync + ".go"):
            break
        time.sleep(0.02)
out, end = b"", "eof"
try:
    s.sendall(b"".join(req(i) for i in range(split)))
    time.sleep(0.05)
    s.sendall(b"".join(req(i) for i in range(split, n)))
    while True:
        d = s.recv(65536)
        if not d:
            break
        out += d
except socket.timeout:
    end = "timeout"
except ConnectionResetError:
    end = "reset"
print(out.count(b"HTTP/1.1 200"), end)
EOF
}

# 100 then 100 more, while the server's packets are dropped at its output
# for a second (it takes the first burst, but its ACK never comes): the
# kept ranges fill, reading waits with the second burst held, and once
# the server's packets flow again (its data, resent, carries the ACK)
# everything is read, let through and answered
pipeline a 200 100 "$TB_DIR/sync" > "$TB_DIR/out.a" &
bg=$!
for _ in $(seq 1 100); do [ -e "$TB_DIR/sync.up" ] && break; sleep 0.02; done
block -I
touch "$TB_DIR/sync.go"
sleep 1
block -D
wait $bg
tb_assert_eq "$(cat "$TB_DIR/out.a")" "200 eof" "200 pipelined POSTs, the ACK held back: all answered"
sleep 0.3
tb_assert_eq "$(posts a)" 200 "nginx answered all 200"

# 200 in one burst: the framing of none of them went out, so no ACK can
# make room: denied at the bound, before any of them reaches the server
tb_assert_eq "$(pipeline b 200 200)" "0 reset" "200 pipelined POSTs in one burst: reset"
sleep 0.3
tb_assert_eq "$(posts b)" 0 "nginx saw none of them"
tb_wait_rows "SELECT count(*) FROM flows WHERE reason = 'hold_overflow'" 1 >/dev/null
# the second connection's first head was decided (allow) before the bound
# was met; segments the client still sent after the reset find no state
tb_assert_eq "$(tb_sql "SELECT verdict, reason FROM flows WHERE dst_port = 80
    AND reason != 'no_inspection_state' ORDER BY id")" \
"allow|allowed_domain
allow|allowed_domain
deny|hold_overflow" "the rows: each connection's first head, then the second's hold_overflow"
tb_done
