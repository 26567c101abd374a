#!/bin/bash
# 33-hold-timeout: a first flight that never completes is not waited for
# forever: after 3 s the flow is reset and logged as hold_timeout, and the
# server never saw a byte of it.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init hold-timeout
tb_internet_up || { tb_fail "test bed up"; tb_done; }
tb_sluiced_start || { tb_fail "sluiced up"; tb_done; }

cat > "$TB_DIR/policy.json" <<EOF
{"network": {"allowedDomains": ["a.test", "*.evil.test"]}}
EOF
tb_check "sandbox add" tb_sandbox_add a "$TB_DIR/policy.json"
for n in a.test x.evil.test; do tb_in a dig +short $n >/dev/null; done

# 100 bytes of a ClientHello (the SNI not yet among them), then silence
t0=$(tb_time_ms)
out=$(tb_in a "$TB_PY" "$TB_LIB/tlsclient.py" "$TB_ADDR_ATK" 443 --sni x.evil.test \
    --truncate 100 --wait 10)
t1=$(tb_time_ms)
tb_assert_eq "$out" "reset" "an incomplete hello is reset"
tb_assert_le $((t1 - t0)) 4500 "after the 3 s hold, not the client's 10 s"
tb_check "not before it either" [ $((t1 - t0)) -ge 2900 ]
# an HTTP head that never ends
out=$(tb_in a "$TB_PY" "$TB_LIB/tlsclient.py" "$TB_ADDR_HTTPS" 80 \
    --raw 'GET / HTTP/1.1\r\nHost: a.test\r\nX-Slow: 1' --wait 10)
tb_assert_eq "$out" "reset" "an HTTP head that never ends is reset"

sleep 0.3
tb_assert_eq "$("$TB_PY" -c 'import json,sys
print(sum(r.get("len", 0) for r in map(json.loads, open(sys.argv[1])) if r.get("proto") == "tcp"))' \
    "$TB_DIR/attacker.packets")" 0 "the attacker received none of the held bytes"
tb_assert_eq "$(grep -c 'X-Slow\|"GET / ' "$TB_DIR/nginx.access.log")" 0 "nginx received no request"
tb_wait_rows "SELECT count(*) FROM flows WHERE reason = 'hold_timeout'" 2 >/dev/null
tb_assert_eq "$(tb_sql "SELECT dst_port, verdict, reason FROM flows ORDER BY id")" \
"443|deny|hold_timeout
80|deny|hold_timeout" "both logged as hold_timeout"
tb_done
