#!/bin/bash
# 26-kernel-syn-backlog: with --kernel-syn on, a sandbox's TLS connection
# to a.test (allowed) has its hello decided and proven; the flow table
# keeps an entry for that 5-tuple for 2 s, for packets queued behind the
# flight. The sandbox then aborts it, floods the kernel-SYN set with 200
# SYNs from other ports, and opens a new connection on the same 5-tuple,
# whose SYN passes in the kernel, its copy behind the flood's. Its first
# flight, b.test's hello, used to reach sluiced before that copy was read
# (sluiced read one batch of copies when a flight found no hold), meet the
# old connection's entry, and pass unread: nginx served b.test, with no
# row (found by review, 2026-11-30). sluiced is stopped from the abort
# to the hello, so that the copies are all waiting when it reads the hello.
# Now a flight that finds no hold reads every copy first, and trusts the
# entry only if the socket was read dry and no copy was lost lately.
# Checked at the server (nginx's log) and in the rows.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init adv-ksyn-backlog
tb_internet_up || { tb_fail "test bed up"; tb_done; }

cat > "$TB_DIR/policy.json" <<EOF
{"network": {"allowedDomains": ["a.test"]}}
EOF
tb_sluiced_start --kernel-syn on || { tb_fail "sluiced up"; tb_done; }
tb_check "sandbox add" tb_sandbox_add a "$TB_DIR/policy.json"
tb_assert_eq "$(tb_in a dig +short a.test)" "$TB_ADDR_HTTPS" "a.test resolves"
# the sandbox kernel's own resets stay home: the connections are made by
# hand, and the flood's SYN-ACKs find no socket there
tb_in a iptables -A OUTPUT -p tcp --tcp-flags ALL RST -j DROP
addr=$(tb_sandbox_field a addr)
# one connection through the queue first: the set learns a.test:443
# SYNs the set let through: its NFLOG rule's packet count
copies() {
	ip netns exec "$TB_NETNS_GW" iptables -L sluice-sandbox -v -x -n |
	    awk '/NFLOG/ { n += $1 } END { print n + 0 }'
}
out=$(tb_in a curl -s --max-time 5 --cacert "$TB_CA" https://a.test/)
tb_assert_eq "$out" "hello from a.test" "a.test served (the set learns it)"
lines0=$(wc -l < "$TB_DIR/nginx.access.log")
id0=$(tb_sql "SELECT coalesce(max(id), 0) FROM flows")
copies0=$(copies)
out=$(tb_in a "$TB_PY" "$TB_LIB/reuse_isn.py" "$addr" "$TB_ADDR_HTTPS" a.test b.test \
    backlog "$TB_SLUICED_PID" 200)
echo "$out"
tb_check "sluiced runs on" kill -0 "$TB_SLUICED_PID"
port=$(printf '%s\n' "$out" | sed -n 's/^conn1: .*port \([0-9]*\)$/\1/p')
tb_assert_match "$(printf '%s\n' "$out" | sed -n 1p)" "^conn1: [1-9][0-9]* bytes back" \
    "a.test's hello answered"
tb_assert_match "$(printf '%s\n' "$out" | sed -n 2p)" "<reset>" \
    "the new connection on its 5-tuple, b.test's hello behind 200 copies: reset"
sleep 1
tail -n +"$((lines0 + 1))" "$TB_DIR/nginx.access.log" > "$TB_DIR/nginx.new"
tb_assert_eq "$(grep -c 'b\.test' "$TB_DIR/nginx.new")" 0 "nginx served nothing for b.test"
tb_assert_le 200 "$(( $(copies) - copies0 ))" "the flood's SYNs were copies (passed in the kernel)"
tb_wait_rows "SELECT count(*) FROM flows WHERE id > $id0 AND src_port = ${port:-0} AND verdict = 'deny'" 1 >/dev/null
tb_assert_eq "$(tb_sql "SELECT verdict, reason, ifnull(sni, '-') FROM flows WHERE id > $id0 AND src_port = ${port:-0} ORDER BY id")" \
"allow|allowed_domain|a.test
deny|sni_not_allowed|b.test" "rows of that port: the first connection, then b.test's refused"
tb_done
