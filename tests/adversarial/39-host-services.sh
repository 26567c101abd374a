#!/bin/bash
# 39-host-services: with the uplink through the host (no --uplink-netns),
# the host's own addresses are one route away from the gateway: a packet
# a sandbox sends to one is delivered to the host's own sockets, not
# forwarded. A policy that allows a range the host's address lies in (a
# company's whole /24, say) must not let a sandbox reach services that
# listen on the host itself; the rest of the range stays reachable. The
# "host" is a namespace of the test's own, as in scenario 18.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init host-services
tb_internet_up || { tb_fail "test bed up"; tb_done; }
tb_inet_client host || { tb_fail "host namespace"; tb_done; }
hostns="${P}-host"
hostaddr=198.51.100.66

# a service on the host's own address, and one elsewhere in the range
listener() {	# NS ADDR PORT FILE: appends what each connection sends
	ip netns exec "$1" "$TB_PY" -c '
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(16)
while True:
    c, a = s.accept(); c.settimeout(2)
    try:
        d = c.recv(4096)
        c.sendall(b"served\n")
    except OSError:
        d = b""
    with open(sys.argv[3], "ab") as f:
        f.write(a[0].encode() + b" " + d)
    c.close()' "$2" "$3" "$4" </dev/null >/dev/null 2>&1 &
	echo $! >> "$TB_DIR/pids"
}
listener "$hostns" "$hostaddr" 8443 "$TB_DIR/host.got"
listener "$TB_NETNS_INET" "$TB_ADDR_DB" 8443 "$TB_DIR/db.got"
# the host's sshd-like service on the uplink's host end, too
listener "$hostns" 0.0.0.0 2222 "$TB_DIR/host-any.got"
sleep 0.3

tb_check "sluiced runs with the host uplink" tb_host_sluiced_start "$hostns" --dns-upstream "$TB_ADDR_DNS"

cat > "$TB_DIR/policy.json" <<JSON
{"sluice": {"allowedCidrs": ["198.51.100.0/24:8443", "198.51.100.0/24:2222"]}}
JSON
tb_check "sandbox add" tb_sandbox_add a "$TB_DIR/policy.json"

out=$(echo to-db | tb_in a nc -w 2 "$TB_ADDR_DB" 8443 2>/dev/null)
tb_assert_eq "$out" "served" "the range is reachable (a server in it)"
out=$(echo host-secret | tb_in a nc -w 2 "$hostaddr" 8443 2>/dev/null)
tb_assert_eq "$out" "" "the host's own address: no answer"
out=$(echo host-secret-2 | tb_in a nc -w 2 "$hostaddr" 2222 2>/dev/null)
tb_assert_eq "$out" "" "another port of the host: no answer"
sleep 0.5
tb_assert_eq "$(grep -c to-db "$TB_DIR/db.got" 2>/dev/null)" 1 "the server in the range got its bytes"
tb_assert_eq "$(cat "$TB_DIR/host.got" "$TB_DIR/host-any.got" 2>/dev/null | wc -c)" 0 \
    "the host's services received nothing"
tb_assert_eq "$(tb_sql "SELECT count(*) FROM flows WHERE dst_ip = '$hostaddr' AND verdict = 'allow'")" 0 \
    "no allow row for the host's address"
tb_check "the attempts are denied as internal_destination, with rows" tb_wait_rows \
    "SELECT count(*) FROM flows WHERE dst_ip = '$hostaddr' AND verdict = 'deny' AND reason = 'internal_destination'" 2

# an address the host gets later is known as soon as the kernel says so
ip -n "$hostns" addr add 198.51.100.77/32 dev lo
sleep 0.3
out=$(echo host-secret-3 | tb_in a nc -w 2 198.51.100.77 2222 2>/dev/null)
tb_assert_eq "$out" "" "an address the host got later: no answer"
tb_check "... denied as internal_destination" tb_wait_rows \
    "SELECT count(*) FROM flows WHERE dst_ip = '198.51.100.77' AND reason = 'internal_destination'" 1

# a name that resolves to the host: its address is stripped from the
# answer (the upstream did give it), as the uplink's are
tb_dnsmasq_restart --host-record=host.test,$hostaddr || tb_fail "dnsmasq with host.test"
cat > "$TB_DIR/policy-b.json" <<JSON
{"network": {"allowedDomains": ["host.test:2222"]}}
JSON
tb_check "sandbox b add" tb_sandbox_add b "$TB_DIR/policy-b.json"
tb_assert_eq "$(tb_in b dig +short host.test A)" "" "host.test: no address reaches the sandbox"
tb_check "the upstream answered it" [ "$(tb_upstream_queries '^host\.test$')" -ge 1 ]
tb_check "the answer's row lists it stripped" tb_wait_rows \
    "SELECT count(*) FROM dns_queries WHERE qname = 'host.test' AND stripped LIKE '%$hostaddr%'" 1
out=$(echo host-secret-4 | tb_in b nc -w 2 "$hostaddr" 2222 2>/dev/null)
tb_assert_eq "$out" "" "b reaches nothing at the host's address"

# the host's own chain holds without the verdict: from the gateway's own
# namespace (its uplink address, as NAT makes every sandbox's packet),
# the host's services are dropped; DNS to the host is not
out=$(echo from-gateway | ip netns exec "$TB_NETNS_GW" nc -w 2 "$hostaddr" 2222 2>/dev/null)
tb_assert_eq "$out" "" "the host drops what the gateway sends its services"
sleep 0.5
tb_assert_eq "$(cat "$TB_DIR/host.got" "$TB_DIR/host-any.got" 2>/dev/null | wc -c)" 0 \
    "the host's services received nothing at all"
tb_check "the host's chain dropped it" [ "$(ip netns exec "$hostns" iptables -L "sluice-in-$TB_NETNS_GW" -v -x -n | awk '$3 == "DROP" { print $1 }')" -ge 1 ]

tb_host_sluiced_stop
tb_done
