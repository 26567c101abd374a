#!/bin/bash
# 38-arp-probe: each sandbox has a link of its own to the gateway, and on
# it nothing but its own /30 should answer. The gateway answered ARP on a
# sandbox's link for any address of its own (arp_ignore 0): another
# sandbox's gateway address (so which slots are in use, which sandboxes
# exist), its uplink address (wherever --uplink-addr puts it). No packet
# of IP, no row: a sandbox mapped the others unseen (found by review,
# 2026-12-03). The gateway's own address on the link still answers, and
# traffic goes on.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init arp-probe
tb_internet_up || { tb_fail "test bed up"; tb_done; }
tb_sluiced_start || { tb_fail "sluiced"; tb_done; }
cat > "$TB_DIR/policy.json" <<JSON
{"sluice": {"allowedCidrs": ["198.51.100.7:5432"]}}
JSON
tb_check "sandbox a" tb_sandbox_add a "$TB_DIR/policy.json"
tb_check "sandbox b" tb_sandbox_add b "$TB_DIR/policy.json"
a_gw=$(tb_in a ip -4 route show default | awk '{ print $3 }')
b_gw=$(tb_in b ip -4 route show default | awk '{ print $3 }')
uplink=${TB_UPLINK_ADDR%/*}

# resolve ADDR on a's link only: a host route onto eth0, one packet, then
# the neighbour entry says whether anything answered (the packet itself
# goes to the gateway's MAC if so: refused there, internal_destination)
neigh() {
	tb_in a ip route replace "$1/32" dev eth0
	tb_in a ping -c 1 -W 1 "$1" >/dev/null 2>&1
	tb_in a ip neigh show "$1" | grep -c lladdr
}
tb_assert_eq "$(neigh "$b_gw")" 0 "another sandbox's gateway address: no ARP answer on a's link"
tb_assert_eq "$(neigh "$uplink")" 0 "the gateway's uplink address: no ARP answer on a's link"
tb_assert_eq "$(neigh "$a_gw")" 1 "a's own gateway answers ARP"
out=$(tb_in a nc -w 2 "$TB_ADDR_DB" "$TB_PORT_DB" </dev/null 2>/dev/null)
tb_assert_eq "$out" "db" "a's allowed traffic goes on"
tb_done
