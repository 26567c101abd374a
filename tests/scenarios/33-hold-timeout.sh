#!/bin/bash
# 33-hold-timeout: a first flight that never completes is not waited for
# forever: after 3 s the flow is reset and logged as hold_timeout, and the
# server never saw a byte of it. Flights cut short (the sandbox deleted,
# the client's RST) have their rows too.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init hold-timeout
tb_internet_up || { tb_fail "test bed up"; tb_done; }
tb_sluiced_start || { tb_fail "sluiced up"; tb_done; }

cat > "$TB_DIR/policy.json" <<EOF
{"network": {"allowedDomains": ["a.test", "*.evil.test"]}}
EOF
tb_check "sandbox add" tb_sandbox_add a "$TB_DIR/policy.json"
for n in a.test x.evil.test; do tb_in a dig +short $n >/dev/null; done

# 100 bytes of a ClientHello (the SNI not yet among them), then silence
t0=$(tb_time_ms)
out=$(tb_in a "$TB_PY" "$TB_LIB/tlsclient.py" "$TB_ADDR_ATK" 443 --sni x.evil.test \
    --truncate 100 --wait 10)
t1=$(tb_time_ms)
tb_assert_eq "$out" "reset" "an incomplete hello is reset"
tb_assert_le $((t1 - t0)) 4500 "after the 3 s hold, not the client's 10 s"
tb_check "not before it either" [ $((t1 - t0)) -ge 2900 ]
# an HTTP head that never ends
out=$(tb_in a "$TB_PY" "$TB_LIB/tlsclient.py" "$TB_ADDR_HTTPS" 80 \
    --raw 'GET / HTTP/1.1\r\nHost: a.test\r\nX-Slow: 1' --wait 10)
tb_assert_eq "$out" "reset" "an HTTP head that never ends is reset"

sleep 0.3
tb_assert_eq "$("$TB_PY" -c 'import json,sys
print(sum(r.get("len", 0) for r in map(json.loads, open(sys.argv[1])) if r.get("proto") == "tcp"))' \
    "$TB_DIR/attacker.packets")" 0 "the attacker received none of the held bytes"
tb_assert_eq "$(grep -c 'X-Slow\|"GET / ' "$TB_DIR/nginx.access.log")" 0 "nginx received no request"
tb_wait_rows "SELECT count(*) FROM flows WHERE reason = 'hold_timeout'" 2 >/dev/null
tb_assert_eq "$(tb_sql "SELECT dst_port, verdict, reason FROM flows ORDER BY id")" \
"443|deny|hold_timeout
80|deny|hold_timeout" "both logged as hold_timeout"

# a sandbox deleted while two of its first flights are held (one sent 20
# bytes of a ClientHello, one nothing): each has its row, written before
# the sandbox's name goes
cat > "$TB_DIR/held.json" <<EOF
{"network": {"allowedDomains": ["a.test"]}}
EOF
tb_check "sandbox add held" tb_sandbox_add held "$TB_DIR/held.json"
tb_in held dig +short a.test >/dev/null
tb_in held "$TB_PY" - "$TB_ADDR_HTTPS" > "$TB_DIR/held.out" 2>&1 <<'EOF' &
import socket, sys, time
a = socket.create_connection((sys.argv[1], 443), timeout=3)
a.sendall(bytes.fromhex("16030100c8010000c40303") + b"\x00" * 9)
b = socket.create_connection((sys.argv[1], 443), timeout=3)
print("held", flush=True)
time.sleep(3)
EOF
held=$!
sleep 0.7
tb_assert_eq "$(cat "$TB_DIR/held.out")" "held" "two connections to a.test:443 held"
tb_check "sandbox del held" tb_sluice sandbox del "${P}-held"
wait "$held" 2>/dev/null
tb_wait_rows "SELECT count(*) FROM flows WHERE sandbox = '${P}-held' AND dst_port = 443" 2 >/dev/null
tb_assert_eq "$(tb_sql "SELECT verdict, reason FROM flows WHERE sandbox = '${P}-held' AND dst_port = 443 ORDER BY verdict")" \
"allow|allowed_domain
deny|unknown_sandbox" "the silent one logged as its SYN was decided, the cut one denied"

# a client that sends part of its ClientHello and then aborts (RST): the
# bytes are dropped undecided, and the row says so (it said allow)
tb_check "sandbox add rst" tb_sandbox_add rst "$TB_DIR/held.json"
tb_in rst dig +short a.test >/dev/null
tb_in rst "$TB_PY" - "$TB_ADDR_HTTPS" <<'EOF'
import socket, struct, sys, time
a = socket.create_connection((sys.argv[1], 443), timeout=3)
a.sendall(bytes.fromhex("16030100c8010000c40303") + b"\x00" * 9)
time.sleep(0.3)
a.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
a.close()
EOF
tb_wait_rows "SELECT count(*) FROM flows WHERE sandbox = '${P}-rst' AND dst_port = 443" 1 >/dev/null
tb_assert_eq "$(tb_sql "SELECT verdict, reason FROM flows WHERE sandbox = '${P}-rst' AND dst_port = 443")" \
    "deny|hold_timeout" "a partial ClientHello then RST: deny, hold_timeout"
# a server that never acknowledges what was decided (its input drops every
# segment with payload to 443 and 80): the decided hello, and the decided
# request head, went out under the verify mark, and after 10 s without
# the server's ACK the connection ends: a row (hold_timeout), counted as
# verify_expired, and the deny mark, so the client's next retransmission
# is reset by the gateway
tb_in a dig +short a.test >/dev/null
for port in 443 80; do
	ip netns exec "$TB_NETNS_INET" iptables -I INPUT -p tcp --dport $port -m length --length 100:65535 -j DROP
done
v0=$(tb_status queue.verify_expired)
last=$(tb_sql "SELECT max(id) FROM flows")
t0=$(tb_time_ms)
tb_in a "$TB_PY" "$TB_LIB/tlsclient.py" "$TB_ADDR_HTTPS" 80 --wait 20 \
    --raw 'GET /never HTTP/1.1\r\nHost: a.test\r\nX-Pad: 0123456789012345678901234567890123456789\r\n\r\n' \
    > "$TB_DIR/never80.out" 2>&1 &
never80=$!
out=$(tb_in a "$TB_PY" "$TB_LIB/tlsclient.py" "$TB_ADDR_HTTPS" 443 --sni a.test --wait 20)
t1=$(tb_time_ms)
wait "$never80"
for port in 443 80; do
	ip netns exec "$TB_NETNS_INET" iptables -D INPUT -p tcp --dport $port -m length --length 100:65535 -j DROP
done
tb_assert_eq "$out" "reset" "a hello the server never acknowledges: the connection is reset"
tb_assert_eq "$(cat "$TB_DIR/never80.out")" "reset" "a request head the server never acknowledges: reset too"
tb_check "after the 10 s wait for the ACK ($((t1 - t0)) ms)" [ $((t1 - t0)) -ge 9900 ]
tb_assert_le $((t1 - t0)) 15500 "at the client's next retransmission after it"
tb_assert_eq "$(( $(tb_status queue.verify_expired) - v0 ))" 2 "status counts both as verify_expired"
tb_wait_rows "SELECT count(*) FROM flows WHERE id > $last AND reason = 'hold_timeout'" 2 >/dev/null
tb_assert_eq "$(tb_sql "SELECT dst_port, verdict, reason FROM flows WHERE id > $last
    ORDER BY dst_port, id")" \
"80|allow|allowed_domain
80|deny|hold_timeout
443|allow|allowed_domain
443|deny|hold_timeout" "their rows: each decision's allow, then the deny that ends it"
tb_assert_eq "$(grep -c 'GET /never' "$TB_DIR/nginx.access.log")" 0 "nginx never got the request"
tb_done
