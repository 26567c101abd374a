#!/bin/bash
# 37-audit-host-broadcast: with the uplink through the host (no
# --uplink-netns), a sandbox in audit mode may send UDP (audit lets
# proto_not_allowed and dns_bypass through), but never to the host itself
# (internal_destination holds in audit mode too). A UDP datagram to the
# directed broadcast address of one of the host's networks is not to any
# of the host's addresses as the verdict knew them: the gateway forwarded
# it, and the host delivered it to its own sockets (a broadcast is local),
# and its chain sluice-in-NETNS lets port 53 in (sluiced's own questions
# to a resolver on the host). So a DNS server listening on the host's
# wildcard address got the sandbox's bytes (found by review, 2026-12-03).
# The "host" is a namespace of the test's own, as in adv 39.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init audit-host-broadcast
tb_internet_up || { tb_fail "test bed up"; tb_done; }
tb_inet_client host || { tb_fail "host namespace"; tb_done; }
hostns="${P}-host"
hostaddr=198.51.100.66		# 198.51.100.64/30 on the host's eth0
hostbrd=198.51.100.67

udp_listener() {	# NS PORT FILE: appends every datagram received
	ip netns exec "$1" "$TB_PY" -c '
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[1])))
while True:
    d, a = s.recvfrom(4096)
    with open(sys.argv[2], "ab") as f:
        f.write(a[0].encode() + b" " + d + b"\n")' "$2" "$3" </dev/null >/dev/null 2>&1 &
	echo $! >> "$TB_DIR/pids"
}
# the host's DNS server (dnsmasq, bind: the wildcard address) and another
# UDP service of the host's
udp_listener "$hostns" 53 "$TB_DIR/host53.got"
udp_listener "$hostns" 5353 "$TB_DIR/host5353.got"
sleep 0.3

tb_check "sluiced runs with the host uplink" tb_host_sluiced_start "$hostns"

cat > "$TB_DIR/policy.json" <<JSON
{"sluice": {"mode": "audit", "allowedCidrs": ["203.0.113.66:443"]}}
JSON
tb_check "sandbox add (audit mode)" tb_sandbox_add a "$TB_DIR/policy.json"

send() {	# DST PORT WORD: one datagram from the sandbox
	tb_in a "$TB_PY" -c '
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
s.sendto(sys.argv[3].encode(), (sys.argv[1], int(sys.argv[2])))' "$@"
}
# audit mode's UDP reaches the internet (the attacker host's capture):
# the bed works as the test assumes
send "$TB_ADDR_ATK" 9999 audit-udp-out
sleep 1
tb_assert_eq "$(tb_attacker_received | grep -c audit-udp-out)" 1 \
    "audit mode lets UDP out (the attacker got it)"

for w in 1 2 3; do
	send "$hostaddr" 53 to-host-unicast-$w
	send "$hostbrd" 53 to-host-broadcast-$w
	send "$hostbrd" 5353 to-host-broadcast-5353-$w
	sleep 0.1
done
sleep 1
tb_assert_eq "$(cat "$TB_DIR/host53.got" 2>/dev/null | grep -c unicast)" 0 \
    "the host's DNS server got nothing sent to the host's address"
tb_assert_eq "$(cat "$TB_DIR/host53.got" "$TB_DIR/host5353.got" 2>/dev/null | wc -c)" 0 \
    "the host's UDP services got nothing sent to its networks' broadcast address"
tb_assert_eq "$(tb_sql "SELECT count(*) FROM flows WHERE dst_ip = '$hostbrd' AND verdict != 'deny'")" 0 \
    "no audit row lets the host's broadcast address through"
tb_check "the attempts are denied as internal_destination, with rows" tb_wait_rows \
    "SELECT count(*) FROM flows WHERE dst_ip = '$hostbrd' AND verdict = 'deny' AND reason = 'internal_destination'" 6

# the host's own chain holds without the verdict: from the gateway's own
# namespace (its uplink address, as NAT makes every sandbox's datagram),
# a broadcast of the host's network to port 53 is dropped by the host
ip netns exec "$TB_NETNS_GW" "$TB_PY" -c '
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
s.sendto(b"from-gateway", (sys.argv[1], 53))' "$hostbrd"
sleep 0.5
tb_assert_eq "$(cat "$TB_DIR/host53.got" 2>/dev/null | grep -c from-gateway)" 0 \
    "the host's chain drops a broadcast to port 53, whoever sent it"

tb_host_sluiced_stop
tb_done
