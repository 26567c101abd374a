#!/bin/bash
# 43-accounting: when a flow ends, its row gets bytes and packets in each
# direction, the end time and how it ended, from conntrack's destroy events.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init accounting
tb_internet_up || { tb_fail "test bed up"; tb_done; }
tb_sluiced_start || { tb_fail "sluiced up"; tb_done; }
# closed connections leave conntrack after TIME_WAIT: 1 s here, not 120
ip netns exec "$TB_NETNS_GW" sysctl -qw net.netfilter.nf_conntrack_tcp_timeout_time_wait=1

cat > "$TB_DIR/policy.json" <<EOF
{"network": {"allowedDomains": ["plain.test"]},
 "sluice": {"allowedCidrs": ["198.51.100.7:5432"]}}
EOF
tb_check "sandbox add" tb_sandbox_add a "$TB_DIR/policy.json"

# the server's retransmissions are counted by conntrack too (nginx is in
# the simulated internet's namespace)
retrans() {
	ip netns exec "$TB_NETNS_INET" nstat -az TcpRetransSegs 2>/dev/null |
	    awk '$1 == "TcpRetransSegs" { print $2 }'
}
r0=$(retrans)
n=$(tb_in a curl -s --max-time 10 -o /dev/null -w '%{size_download}' http://plain.test/big.bin)
r1=$(retrans)
tb_assert_eq "$n" "$TB_BIG_BYTES" "downloaded $TB_BIG_BYTES bytes through the gateway"
tb_assert_eq "$(tb_in a nc -w 3 "$TB_ADDR_DB" "$TB_PORT_DB" </dev/null)" "db" "a short exchange on a CIDR"
echo x | tb_in a nc -w 2 "$TB_ADDR_ATK" 4444 >/dev/null 2>&1	# denied: no conntrack entry lives on

# Conntrack reaps expired entries lazily (its GC runs up to a minute
# apart when little expires); listing the table reaps them at once, which
# is what makes the destroy events come now rather than later.
sleep 2
ip netns exec "$TB_NETNS_GW" conntrack -L >/dev/null 2>&1
tb_wait_rows "SELECT count(*) FROM flows WHERE end_ts IS NOT NULL" 2 10 >/dev/null
row=$(tb_sql "SELECT bytes_in, packets_in, bytes_out, packets_out, end_state, end_ts > ts
    FROM flows WHERE dst_port = 80")
IFS='|' read -r bin pin bout pout state later <<<"$row"
# IP and TCP headers add ~4%; conntrack also counts the retransmissions a
# loaded machine makes (the server's, a full segment each at most): allow
# 10% and those
extra=$(( ${r1:-0} - ${r0:-0} ))
tb_check "bytes in: $bin, the file plus headers within 10% (and $extra retransmitted segments)" \
    [ "$bin" -ge "$TB_BIG_BYTES" -a "$bin" -le $((TB_BIG_BYTES * 110 / 100 + extra * 1500)) ]
tb_check "packets in: $pin, at least one per 64 KiB" [ "$pin" -ge 16 ]
tb_check "bytes out: $bout, the request and ACKs only" [ "$bout" -gt 0 -a "$bout" -lt 200000 ]
tb_check "packets out: $pout" [ "$pout" -gt 2 ]
tb_assert_eq "$state" "closed" "ended with a close"
tb_assert_eq "$later" "1" "end time after start time"
row=$(tb_sql "SELECT bytes_in > 0, bytes_out > 0, end_state FROM flows WHERE dst_port = 5432")
tb_assert_eq "$row" "1|1|closed" "the CIDR flow is accounted too"
tb_assert_eq "$(tb_sql "SELECT verdict, ifnull(end_ts, 'NULL'), ifnull(bytes_out, 'NULL')
    FROM flows WHERE dst_port = 4444")" "deny|NULL|NULL" "the denied attempt keeps its row, without counters"
tb_assert_match "$(tb_sql "SELECT end_time FROM flow_log WHERE dst_port = 80")" \
    '^20[0-9]{2}-[01][0-9]-[0-3][0-9]T[0-9:.]+Z$' "flow_log shows a readable end time"
tb_done
