#!/bin/bash
# tls-rate: one sandbox opening TLS connections as fast as it can must not
# deny another sandbox's TLS. Found by the benchmark; written as a scenario so it
# can move to tests/scenarios/. It fails on sluice at 18a9825: each allowed
# TLS flow keeps its hold-table slot for 2 s after its verdict, the table
# (GW_HOLD_MAX, 1,024, shared by all sandboxes) is full above ~512 new TLS
# connections/s, and every sandbox's new TLS flows are then denied with
# hold_table_full. Needs tests/bench/connbench.c built (CONNBENCH, default
# build/connbench). The per-sandbox bounds are off: this is about the
# shared hold table, not about one sandbox's rate.
. "$(dirname "$0")/../../lib/testbed.sh"
CONNBENCH=${CONNBENCH:-$REPO/build/connbench}
tb_init tls-rate
[ -x "$CONNBENCH" ] || tb_skip "$CONNBENCH is not built"
tb_internet_up || { tb_fail "test bed up"; tb_done; }
tb_sluiced_start --limit-conn-rate 0 --limit-holds 0 || { tb_fail "sluiced up"; tb_done; }

cat > "$TB_DIR/policy.json" <<EOF
{"network": {"allowedDomains": ["a.test"]}}
EOF
tb_check "sandbox add a" tb_sandbox_add a "$TB_DIR/policy.json"
tb_check "sandbox add b" tb_sandbox_add b "$TB_DIR/policy.json"
tb_assert_eq "$(tb_in a dig +short a.test)" "$TB_ADDR_HTTPS" "a.test resolves in a"
tb_assert_eq "$(tb_in b dig +short a.test)" "$TB_ADDR_HTTPS" "a.test resolves in b"
"$TB_PY" - "$TB_DIR/hello.bin" <<'EOF'
import ssl, sys
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
o = ctx.wrap_bio(inc, out, server_hostname="a.test")
try:
    o.do_handshake()
except ssl.SSLWantReadError:
    pass
open(sys.argv[1], "wb").write(out.read())
EOF
# keep the flood's many source ports apart from anything else
tb_in a sysctl -qw net.ipv4.ip_local_port_range="1024 65535"

tb_in a "$CONNBENCH" -m tls -a "$TB_ADDR_HTTPS" -p 443 -n a.test \
    -H "$TB_DIR/hello.bin" -c 16 -d 5 > "$TB_DIR/flood.json" &
flood=$!
sleep 1
ok=0
for i in $(seq 10); do
	out=$(tb_in b curl -s --max-time 3 --cacert "$TB_CA" https://a.test/)
	[ "$out" = "hello from a.test" ] && ok=$((ok + 1))
	sleep 0.2
done
wait "$flood"
tb_assert_eq "$ok" 10 "b's ten HTTPS requests during a's flood of TLS connections"
tb_assert_eq "$(tb_sql "SELECT count(*) FROM flows WHERE reason = 'hold_table_full'")" 0 \
    "no flow denied with hold_table_full"
tb_done
