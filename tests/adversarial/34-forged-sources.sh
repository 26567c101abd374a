#!/bin/bash
# 34-forged-sources: a raw-socket client (IP_HDRINCL) in sandbox a sends a
# TCP SYN with data, a UDP datagram and an ICMP echo, each carrying a
# marker, from forged source addresses — sandbox b's, b's gateway's, a's
# own gateway's, the gateway's uplink, the DNS server's, the attacker's own,
# an outside one, loopback, 0.0.0.0, broadcast, multicast, and the network
# and broadcast addresses of a's own /30 — to the attacker and to sandbox
# b, and a DNS query to a's resolver. The policy allows every address.
# Strict reverse-path filtering drops all of them before the queue, except
# the one source it cannot tell from a's own link: a's /30 network address
# (10.213.0.0 routes back through a's veth). That one reaches sluice, whose
# verdict checks the source is the sandbox's own address: spoofed_source.
# (0.0.0.0 is no forgery: the kernel fills in a's own address, and the
# TCP and UDP checksums, made over 0.0.0.0, no longer match: conntrack
# drops those as INVALID; the echoes go out as a's own, and are denied.)
# Nothing may reach the attacker or b but the control, sent from a's real
# address.
#
# This FAILS today: the gateway answers the spoofed_source SYN with a TCP
# reset (REJECT), in the name of the destination and to the forged
# network address, which nobody on a's link answers ARP for; after about
# 3 s the gateway's kernel reports the undeliverable reset with an ICMP
# host-unreachable — sent to the forged SYN's destination, the attacker,
# through the uplink, carrying the reset and with it the sandbox's chosen
# ports and sequence number. 35-reject-reflection exfiltrates a message
# that way under an empty policy.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init adv-forged-sources
tb_internet_up || { tb_fail "test bed up"; tb_done; }
tb_sluiced_start || { tb_fail "sluiced up"; tb_done; }

cat > "$TB_DIR/open.json" <<EOF
{"network": {"allowedDomains": ["a.test"]},
 "sluice": {"allowedCidrs": ["0.0.0.0/0"]}}
EOF
tb_check "sandbox a" tb_sandbox_add a "$TB_DIR/open.json"
tb_check "sandbox b" tb_sandbox_add b "$TB_DIR/open.json"
addr_a=$(tb_sandbox_field a addr)
gw_a=$(tb_sandbox_field a gateway)
addr_b=$(tb_sandbox_field b addr)
gw_b=$(tb_sandbox_field b gateway)
net_a=$(echo "$addr_a" | awk -F. '{ printf "%s.%s.%s.%d", $1, $2, $3, $4 - 2 }')
bcast_a=$(echo "$addr_a" | awk -F. '{ printf "%s.%s.%s.%d", $1, $2, $3, $4 + 1 }')
tb_assert_eq "$gw_a $net_a $bcast_a" "$(echo "$addr_a" | awk -F. '{ printf "%s.%s.%s.%d %s.%s.%s.%d %s.%s.%s.%d",
    $1, $2, $3, $4 - 1, $1, $2, $3, $4 - 2, $1, $2, $3, $4 + 1 }')" "a's /30: gateway, network, broadcast"
ip_in() {	# IP datagrams a namespace's kernel has received
	ip netns exec "$1" awk '$1 == "Ip:" { if (h) { print $4; exit } h = 1 }' /proc/net/snmp
}
rx_b0=$(ip_in "${P}-b")

forged="$addr_b $gw_b $gw_a ${TB_UPLINK_ADDR%/*} $TB_ADDR_DNS $TB_ADDR_ATK 192.0.2.99
    127.0.0.1 0.0.0.0 255.255.255.255 224.0.0.1 $net_a $bcast_a"
# shellcheck disable=SC2086 # word splitting joins the list with commas
out=$(tb_in a "$TB_PY" - "$TB_ADDR_ATK,$addr_b" "$(echo $forged | tr ' ' ,)" "$gw_a" "$addr_a" <<'EOF'
import random, socket, struct, sys

def csum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF

def ip(src, dst, proto, l4):
    h = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(l4), random.randint(1, 65535),
                    0x4000, 64, proto, 0, socket.inet_aton(src), socket.inet_aton(dst))
    return h[:10] + struct.pack("!H", csum(h)) + h[12:] + l4

def l4(src, dst, proto, seg, at):
    c = csum(socket.inet_aton(src) + socket.inet_aton(dst) +
             struct.pack("!BBH", 0, proto, len(seg)) + seg)
    return ip(src, dst, proto, seg[:at] + struct.pack("!H", c) + seg[at + 2:])

def syn(src, dst, dport, data):
    t = struct.pack("!HHIIBBHHH", random.randint(40000, 60000), dport,
                    random.getrandbits(32), 0, 5 << 4, 0x02, 64240, 0, 0) + data
    return l4(src, dst, 6, t, 16)

def udp(src, dst, dport, data):
    return l4(src, dst, 17, struct.pack("!HHHH", random.randint(40000, 60000), dport,
                                        8 + len(data), 0) + data, 6)

def echo(src, dst, data):
    m = struct.pack("!BBHHH", 8, 0, 0, random.randint(1, 65535), 1) + data
    return ip(src, dst, 1, m[:2] + struct.pack("!H", csum(m)) + m[4:])

dns = (struct.pack(">HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0) +
       b"\x06forged\x01a\x04test\x00\x00\x01\x00\x01")
s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
dsts, srcs, gw, me = sys.argv[1].split(","), sys.argv[2].split(","), sys.argv[3], sys.argv[4]
sent = 0
for src in srcs:
    mark = b"FORGED-" + src.encode()
    pkts = [syn(src, d, 443, mark) for d in dsts] + [udp(src, d, 5353, mark) for d in dsts]
    pkts += [echo(src, d, mark) for d in dsts] + [udp(src, gw, 53, dns)]
    for p in pkts:
        s.sendto(p, (socket.inet_ntoa(p[16:20]), 0))
        sent += 1
# the control: the same kind of packet from the sandbox's own address
s.sendto(syn(me, dsts[0], 4444, b"CONTROL"), (dsts[0], 0))
print("sent %d" % sent)
EOF
)
tb_assert_eq "$out" "sent 91" "91 forged packets sent (13 sources x 7), then the control"
# the gateway gives up resolving an on-link neighbour after 3 probes, 1 s
# apart: wait for whatever that may cause
sleep 4

tb_assert_eq "$(tb_attacker_packet_count proto=tcp dport=4444 flags=S)" 1 \
    "the control SYN from a's own address reached the attacker"
tb_assert_eq "$(tb_attacker_packet_count proto=tcp dport=443)" 0 "no forged SYN reached the attacker"
tb_assert_eq "$(tb_attacker_packet_count proto=udp)" 0 "no forged datagram"
tb_assert_eq "$(tb_attacker_packet_count proto=icmp)" 0 "no forged echo, and no ICMP error caused by a forged packet"
tb_assert_eq "$(tb_attacker_packet_count)" "$(tb_attacker_packet_count dport=4444)" \
    "the attacker received nothing but the control's packets"
tb_check "no marker on the far side" [ "$(tb_attacker_received | grep -ac FORGED)" = 0 ]
tb_assert_eq "$(ip_in "${P}-b")" "$rx_b0" "sandbox b's kernel received no IP datagram at all"
tb_assert_eq "$(tb_upstream_queries)" 0 "the upstream DNS server heard nothing"

tb_wait_rows "SELECT count(*) FROM flows WHERE src_ip = '$addr_a'" 3 >/dev/null
tb_assert_eq "$(tb_sql "SELECT src_ip, proto, dst_ip, verdict, reason FROM flows
    WHERE src_ip != '$addr_a' ORDER BY id")" \
"$net_a|tcp|$TB_ADDR_ATK|deny|spoofed_source
$net_a|tcp|$addr_b|deny|spoofed_source
$net_a|udp|$TB_ADDR_ATK|deny|spoofed_source
$net_a|udp|$addr_b|deny|spoofed_source
$net_a|icmp|$TB_ADDR_ATK|deny|spoofed_source
$net_a|icmp|$addr_b|deny|spoofed_source" \
    "only a's network address got past reverse-path filtering, and it is spoofed_source"
tb_assert_eq "$(tb_sql "SELECT proto, dst_ip, ifnull(dst_port, '-'), verdict, reason FROM flows
    WHERE src_ip = '$addr_a' ORDER BY id")" \
"icmp|$TB_ADDR_ATK|-|deny|proto_not_allowed
icmp|$addr_b|-|deny|internal_destination
tcp|$TB_ADDR_ATK|4444|allow|allowed_cidr" "a's own rows: the echoes 'from 0.0.0.0', and the control"
tb_assert_eq "$(tb_sql "SELECT ifnull(group_concat(sandbox || ' ' || src_ip || ' ' || verdict), 'none')
    FROM dns_queries WHERE qname = 'forged.a.test'")" "${P}-a $net_a deny" \
    "the resolver got the forged query only from a's network address, as a's, and refused it"
tb_done
