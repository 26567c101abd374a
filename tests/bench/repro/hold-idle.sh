#!/bin/bash
# hold-idle: one sandbox's idle connections to a TLS port must not deny
# another sandbox's TLS. Found while benchmarking; written as a scenario so
# it can move to tests/scenarios/ or tests/adversarial/. It fails on sluice
# at 18a9825: a connection that never sends its first flight keeps its
# hold-table slot (GW_HOLD_MAX, 1,024, shared by all sandboxes) until it
# has been idle 120 s, so 1,100 silent connections from sandbox a make
# every sandbox's new TLS and HTTP flows fail with hold_table_full.
. "$(dirname "$0")/../../lib/testbed.sh"
tb_init hold-idle
tb_internet_up || { tb_fail "test bed up"; tb_done; }
tb_sluiced_start || { tb_fail "sluiced up"; tb_done; }

cat > "$TB_DIR/policy.json" <<EOF
{"network": {"allowedDomains": ["a.test"]}}
EOF
tb_check "sandbox add a" tb_sandbox_add a "$TB_DIR/policy.json"
tb_check "sandbox add b" tb_sandbox_add b "$TB_DIR/policy.json"
tb_assert_eq "$(tb_in a dig +short a.test)" "$TB_ADDR_HTTPS" "a.test resolves in a"
tb_assert_eq "$(tb_in b dig +short a.test)" "$TB_ADDR_HTTPS" "a.test resolves in b"
https_b() { tb_in b curl -s --max-time 3 --cacert "$TB_CA" https://a.test/; }
tb_assert_eq "$(https_b)" "hello from a.test" "b's HTTPS before"

# a: 1,100 connections to a.test:443 that never send a byte, for 12 s
tb_in a "$TB_PY" -c '
import socket, time
socks = []
for _ in range(1100):
    s = socket.socket()
    s.setblocking(False)
    try:
        s.connect(("'"$TB_ADDR_HTTPS"'", 443))
    except BlockingIOError:
        pass
    socks.append(s)
time.sleep(12)
' &
idle=$!
sleep 3
ok=0
for i in $(seq 5); do
	[ "$(https_b)" = "hello from a.test" ] && ok=$((ok + 1))
done
tb_assert_eq "$ok" 5 "b's five HTTPS requests while a holds 1,100 idle connections"
sleep 0.5	# the writer's batch
tb_assert_eq "$(tb_sql "SELECT count(*) FROM flows WHERE sandbox = '${P}-b'
    AND reason = 'hold_table_full'")" 0 "no flow of b denied with hold_table_full"
kill "$idle" 2>/dev/null
wait "$idle" 2>/dev/null
tb_done
