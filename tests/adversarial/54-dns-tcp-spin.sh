#!/bin/bash
# 54-dns-tcp-spin: DNS-over-TCP clients whose queries wait on a silent
# upstream do not make sluiced's loop spin: one that resets meanwhile, one
# that sends more than its connection's buffer holds. sluiced's CPU time
# stays near nothing while they wait; a client that half-closes after its
# query still gets an answer; TCP queries work again once the upstream is
# back. (A busy connection outliving its idle time: tests/unit.)
. "$(dirname "$0")/../lib/testbed.sh"
tb_init adv-dns-tcp-spin
tb_internet_up || { tb_fail "test bed up"; tb_done; }
tb_sluiced_start || { tb_fail "sluiced up"; tb_done; }

cat > "$TB_DIR/policy.json" <<EOF
{"network": {"allowedDomains": ["plain.test", "*.plain.test"]}}
EOF
tb_check "sandbox add" tb_sandbox_add a "$TB_DIR/policy.json"
gw=$(tb_sandbox_field a gateway)
tb_assert_eq "$(tb_in a dig +tcp +short +time=2 +tries=1 @"$gw" plain.test)" \
    "$TB_ADDR_PLAIN" "a TCP query is answered"

# the upstream goes silent: every forwarded query waits for its timeout
dpid=$(cat "$TB_DIR/dnsmasq.pid")
kill -STOP "$dpid"
cpu() { awk '{ print $14 + $15 }' "/proc/$TB_SLUICED_PID/stat"; }
c0=$(cpu)
t0=$(tb_time_ms)
tb_in a "$TB_PY" - "$gw" > "$TB_DIR/clients" <<'EOF'
import socket, struct, sys, threading, time, random
gw = sys.argv[1]
def q(name):
    m = struct.pack(">HHHHHH", random.randrange(65536), 0x0100, 1, 0, 0, 0)
    m += b"".join(bytes([len(l)]) + l.encode() for l in name.split("."))
    m += b"\0" + struct.pack(">HH", 1, 1)
    return struct.pack(">H", len(m)) + m
def reset(n):
    for i in range(n):
        s = socket.create_connection((gw, 53), timeout=5)
        s.sendall(q("r%d-%d.plain.test" % (i, random.randrange(10**6))))
        time.sleep(0.2)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()
        time.sleep(1.4)
held = []
def fill(n):
    for i in range(n):
        s = socket.create_connection((gw, 53), timeout=5)
        s.sendall(q("f%d-%d.plain.test" % (i, random.randrange(10**6))))
        s.sendall(b"\x00\x10" + b"x" * 6000)   # more than the buffer holds
        held.append(s)
        time.sleep(1.6)
def half():
    s = socket.create_connection((gw, 53), timeout=5)
    s.sendall(q("h-%d.plain.test" % random.randrange(10**6)))
    s.shutdown(socket.SHUT_WR)
    got = b""
    try:
        while True:
            b = s.recv(4096)
            if not b:
                break
            got += b
    except OSError:
        pass
    if len(got) >= 6:
        print("half rcode=%d" % (got[5] & 15))
    else:
        print("half nothing")
ts = [threading.Thread(target=f, args=a) for f, a in
      ((reset, (3,)), (fill, (3,)), (half, ()))]
for t in ts:
    t.start()
for t in ts:
    t.join()
for s in held:
    s.close()
EOF
sleep 1
c1=$(cpu)
t1=$(tb_time_ms)
kill -CONT "$dpid"
echo "sluiced: $((c1 - c0)) ticks of CPU over $((t1 - t0)) ms"
# before the fix: ~100 ticks a second of waiting (a spinning loop)
tb_assert_le "$((c1 - c0))" 50 "sluiced slept while the TCP clients waited"
tb_assert_eq "$(cat "$TB_DIR/clients")" "half rcode=2" \
    "a half-closed client got its answer (SERVFAIL)"
tb_check "sluiced is alive" kill -0 "$TB_SLUICED_PID"
tb_assert_eq "$(tb_in a dig +tcp +short +time=2 +tries=1 @"$gw" plain.test)" \
    "$TB_ADDR_PLAIN" "TCP queries are answered with the upstream back"
tb_done
