#!/bin/bash
# 61-http-host-edges: with only a.test allowed, request heads whose Host or
# framing a server might read otherwise than sluiced: a tab before or after
# the Host value, a trailing dot, "a.test..", case, ports (0, leading
# zeros), absolute-form targets (upper-case scheme, a port, no path, a
# query naming b.test), an underscored Host, a duplicate Host in another
# case, OPTIONS *, HTTP/1.0, a leading empty line, an h2c upgrade, and
# bodies meant to hide a request for b.test from one side (a tab in
# Content-Length or Transfer-Encoding, Expect: 100-continue, HEAD with a
# body, a quoted chunk extension, a Host trailer). tests/lib/httpvar.py
# sends each on a connection of its own. Checked at the far side: nginx on
# a.test's address (it answers with the Host it read) never reads a Host
# but a.test's and never serves a hidden request (/sNN), and no row allows
# b.test. (red-team review, 2026-12-03: all held)
. "$(dirname "$0")/../lib/testbed.sh"
tb_init adv-http-host-edges
tb_internet_up || { tb_fail "test bed up"; tb_done; }
echo '{"network": {"allowedDomains": ["a.test"]}}' > "$TB_DIR/policy.json"
tb_sluiced_start || { tb_fail "sluiced up"; tb_done; }
tb_check "sandbox add" tb_sandbox_add a "$TB_DIR/policy.json"
tb_assert_eq "$(tb_in a dig +short a.test)" "$TB_ADDR_HTTPS" "a.test resolves"
tb_in a "$TB_PY" "$TB_LIB/httpvar.py" "$TB_ADDR_HTTPS" > "$TB_DIR/variants.out" 2>&1
cat "$TB_DIR/variants.out"
sleep 0.5
tb_assert_eq "$(grep -c . "$TB_DIR/variants.out")" 24 "every variant was sent"
tb_assert_eq "$(grep -vc 'host=a.test \|host=_ ' "$TB_DIR/nginx.access.log")" 0 \
    "nginx read no Host but a.test (or none)"
tb_assert_eq "$(grep -c '"[A-Z]* /s[0-9]' "$TB_DIR/nginx.access.log")" 0 \
    "nginx served no request hidden in a body"
tb_assert_eq "$(tb_sql "SELECT count(*) FROM flows WHERE verdict = 'allow' AND http_host NOT IN ('a.test', 'a.test.', 'A.TEST')")" 0 \
    "every allow row names a.test"
tb_assert_eq "$(tb_attacker_packet_count)" 0 "the attacker received nothing"
tb_done
