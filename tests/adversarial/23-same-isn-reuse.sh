#!/bin/bash
# 23-same-isn-reuse: a sandbox makes an allowed TLS connection to a.test,
# aborts it (RST), and within the flow table's 2 s reuses its source port
# AND its initial sequence number (a sandbox picks both) for a second
# connection that presents b.test, which shares a.test's address and is
# not allowed. A SYN with the same sequence number looks like a
# retransmission of the first; the first flight's verdict must still not
# carry over: the second connection is decided and inspected anew, denied
# (sni_not_allowed) with its own row, and nginx never serves b.test. Run
# with the kernel-SYN set off (the default) and on. Then a new SYN with
# another sequence number while the old connection's flight is held, and
# a refused connection tried again from the same port.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init adv-same-isn-reuse
tb_internet_up || { tb_fail "test bed up"; tb_done; }

cat > "$TB_DIR/policy.json" <<EOF
{"network": {"allowedDomains": ["a.test"]}}
EOF
for ks in off on; do
	tb_sluiced_start --kernel-syn "$ks" || { tb_fail "sluiced up (--kernel-syn $ks)"; continue; }
	tb_check "sandbox add ($ks)" tb_sandbox_add "a$ks" "$TB_DIR/policy.json"
	tb_assert_eq "$(tb_in "a$ks" dig +short a.test)" "$TB_ADDR_HTTPS" "a.test resolves ($ks)"
	addr=$(tb_sandbox_field "a$ks" addr)
	# the sandbox kernel's own resets (a SYN-ACK for a port it has no
	# socket on) stay home: the connections are made by hand
	tb_in "a$ks" iptables -A OUTPUT -p tcp --tcp-flags ALL RST -j DROP
	id0=$(tb_sql "SELECT coalesce(max(id), 0) FROM flows")
	lines0=$(wc -l < "$TB_DIR/nginx.access.log")
	out=$(tb_in "a$ks" "$TB_PY" "$TB_LIB/reuse_isn.py" "$addr" "$TB_ADDR_HTTPS" a.test b.test 0.3)
	echo "$out"
	tb_assert_match "$(printf '%s\n' "$out" | sed -n 1p)" "hello from a.test" "--kernel-syn $ks: the first connection (a.test) served"
	tb_assert_match "$(printf '%s\n' "$out" | sed -n 2p)" "^conn2: '<reset>'$" \
	    "--kernel-syn $ks: the second (b.test, same port and ISN) reset"
	sleep 0.5
	tail -n +"$((lines0 + 1))" "$TB_DIR/nginx.access.log" > "$TB_DIR/nginx.new"
	tb_assert_eq "$(grep -c 'sni=a.test.*GET /first' "$TB_DIR/nginx.new")" 1 "--kernel-syn $ks: nginx served /first to a.test"
	tb_assert_eq "$(grep -c 'b.test\|/second' "$TB_DIR/nginx.new")" 0 "--kernel-syn $ks: nginx never saw b.test or /second"
	tb_wait_rows "SELECT count(*) FROM flows WHERE id > $id0 AND dst_port = 443" 2 >/dev/null
	tb_assert_eq "$(tb_sql "SELECT verdict, reason, sni FROM flows WHERE id > $id0 AND dst_port = 443 ORDER BY id")" \
"allow|allowed_domain|a.test
deny|sni_not_allowed|b.test" "--kernel-syn $ks: each connection has its row, the second denied"
	tb_check "sluiced stops ($ks)" tb_sluiced_term
done

# the same reuse to an address allowed by CIDR (no inspection, so the
# SYN's verdict is all there is): the second connection is allowed as the
# first was, but it is another connection, and it has its own row. The
# first one's conntrack entry ends when the second SYN reopens its 5-tuple;
# sluiced reads that end before it takes the SYN for a retransmission
cat > "$TB_DIR/cidr.json" <<EOF
{"sluice": {"allowedCidrs": ["$TB_ADDR_HTTPS:443"]}}
EOF
tb_sluiced_start || tb_fail "sluiced up (cidr)"
tb_check "sandbox add (cidr)" tb_sandbox_add c "$TB_DIR/cidr.json"
tb_in c iptables -A OUTPUT -p tcp --tcp-flags ALL RST -j DROP
id0=$(tb_sql "SELECT coalesce(max(id), 0) FROM flows")
lines0=$(wc -l < "$TB_DIR/nginx.access.log")
out=$(tb_in c "$TB_PY" "$TB_LIB/reuse_isn.py" "$(tb_sandbox_field c addr)" "$TB_ADDR_HTTPS" a.test a.test 0.3)
echo "$out"
tb_assert_match "$(printf '%s\n' "$out" | sed -n 1p)" "hello from a.test" "CIDR: the first connection served"
tb_assert_match "$(printf '%s\n' "$out" | sed -n 2p)" "hello from a.test" "CIDR: the second (same port and ISN) served too"
sleep 0.5
tail -n +"$((lines0 + 1))" "$TB_DIR/nginx.access.log" > "$TB_DIR/nginx.new"
tb_assert_eq "$(grep -c 'GET /first\|GET /second' "$TB_DIR/nginx.new")" 2 "CIDR: nginx served both connections"
tb_wait_rows "SELECT count(*) FROM flows WHERE id > $id0 AND dst_port = 443" 2 >/dev/null
tb_assert_eq "$(tb_sql "SELECT verdict, reason, count(DISTINCT src_port), count(*) FROM flows WHERE id > $id0 AND dst_port = 443 GROUP BY verdict, reason")" \
    "allow|allowed_cidr|1|2" "CIDR: a row for each connection (one source port, two rows)"
# a retransmitted SYN (the same one again, its SYN-ACK lost) is not a
# new connection: one row, and the connection is made
id0=$(tb_sql "SELECT coalesce(max(id), 0) FROM flows")
out=$(tb_in c "$TB_PY" "$TB_LIB/reuse_isn.py" "$(tb_sandbox_field c addr)" "$TB_ADDR_HTTPS" a.test - resyn)
echo "$out"
tb_assert_match "$out" "hello from a.test" "CIDR: a connection whose SYN came twice served"
tb_wait_rows "SELECT count(*) FROM flows WHERE id > $id0 AND dst_port = 443" 1 >/dev/null
sleep 0.5
tb_assert_eq "$(tb_sql "SELECT verdict, reason, count(*) FROM flows WHERE id > $id0 AND dst_port = 443 GROUP BY verdict, reason")" \
    "allow|allowed_cidr|1" "CIDR: the retransmitted SYN has no row of its own"
tb_check "sluiced stops (cidr)" tb_sluiced_term

# a new SYN (another sequence number) on the 5-tuple of a flight still
# held: conntrack tracks the 5-tuple already, so the SYN goes on with a
# row of its own and no flight is held from it (adversarial 24), and the
# old flight's held packets get their verdict at its 3 s (hold_timeout,
# a row each) rather than waiting in the kernel's queue for ever, which
# 68 such rounds had once filled for every sandbox
tb_sluiced_start || tb_fail "sluiced up"
tb_check "sandbox add (held)" tb_sandbox_add h "$TB_DIR/policy.json"
tb_in h dig +short a.test >/dev/null
tb_in h iptables -A OUTPUT -p tcp --tcp-flags ALL RST -j DROP
id0=$(tb_sql "SELECT coalesce(max(id), 0) FROM flows")
out=$(tb_in h "$TB_PY" "$TB_LIB/reuse_isn.py" "$(tb_sandbox_field h addr)" "$TB_ADDR_HTTPS" a.test - held 10 20)
tb_assert_match "$out" "rounds done: 10" "10 rounds: 20 bytes of a hello held, then a new SYN on the 5-tuple"
sleep 3.5
tb_assert_eq "$(ip netns exec "$TB_NETNS_GW" awk '{ n += $3 } END { print n + 0 }' /proc/net/netfilter/nfnetlink_queue)" 0 \
    "no packet left waiting in the kernel's queue"
tb_wait_rows "SELECT count(*) FROM flows WHERE id > $id0 AND reason = 'hold_timeout'" 10 >/dev/null
tb_assert_eq "$(tb_sql "SELECT count(*) FROM flows WHERE id > $id0 AND verdict = 'deny' AND reason = 'hold_timeout'")" 10 \
    "each replaced connection has its row"

# a refused client that tries again from the same source port (a new
# SYN, a new sequence number) makes a new attempt, with a row each
id0=$(tb_sql "SELECT coalesce(max(id), 0) FROM flows")
out=$(tb_in h "$TB_PY" - "$TB_ADDR_ATK" <<'EOF'
import socket, sys, time
res = []
for i in range(3):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("", 40001))
    s.settimeout(2)
    try:
        s.connect((sys.argv[1], 4444))
        res.append("connected")
    except OSError as e:
        res.append(type(e).__name__)
    s.close()
    time.sleep(0.3)
print(" ".join(res))
EOF
)
tb_assert_eq "$out" "ConnectionRefusedError ConnectionRefusedError ConnectionRefusedError" \
    "three connects from port 40001 to the attacker: each refused"
tb_wait_rows "SELECT count(*) FROM flows WHERE id > $id0 AND src_port = 40001" 3 >/dev/null
tb_assert_eq "$(tb_sql "SELECT count(*) FROM flows WHERE id > $id0 AND src_port = 40001 AND verdict = 'deny'")" 3 \
    "a deny row for each of the three"
tb_assert_eq "$(tb_attacker_packet_count proto=tcp dport=4444)" 0 "the attacker got no SYN"
tb_check "sluiced stops" tb_sluiced_term
tb_done
