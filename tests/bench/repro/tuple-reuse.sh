#!/bin/bash
# tuple-reuse: a connection on a 5-tuple that an allowed TLS flow just
# reset must be decided (and logged) anew, not inherit the old one's mark.
# Found by the benchmark (a TLS connection now and then had no flow row);
# written as a scenario so it can move to tests/scenarios/. It fails on
# sluice as of issue 8: after the reset and one in-window ACK, the second
# connection carries SNI b.test (not allowed) to b.test's virtual host
# uninspected, and no row is written for it.
. "$(dirname "$0")/../../lib/testbed.sh"
tb_init tuple-reuse
tb_internet_up || { tb_fail "test bed up"; tb_done; }
tb_sluiced_start || { tb_fail "sluiced up"; tb_done; }

cat > "$TB_DIR/policy.json" <<EOF
{"network": {"allowedDomains": ["a.test"]}}
EOF
tb_check "sandbox add" tb_sandbox_add a "$TB_DIR/policy.json"
tb_assert_eq "$(tb_in a dig +short a.test)" "$TB_ADDR_HTTPS" "a.test resolves"
"$TB_PY" - "$TB_DIR/hello-a.bin" <<'EOF'
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
addr=$(tb_sluice sandbox list -j | "$TB_PY" -c '
import json, sys
for s in json.load(sys.stdin):
    if s["name"] == sys.argv[1]:
        print(s["addr"].split("/")[0])' "${P}-a")
reuse() { tb_in a "$TB_PY" "$(dirname "$0")/tuple_reuse.py" "$addr" \
    "$TB_ADDR_HTTPS" 443 "$@"; }

# Control: reset, then at once the same port with SNI b.test: denied.
out=$(reuse 45001 "$TB_DIR/hello-a.bin" tls:b.test --no-ack)
tb_assert_eq "$(echo "$out" | sed -n 's/^second: //p')" "reset" \
    "same 5-tuple right after a reset, SNI b.test: reset"

# The same with one in-window ACK on the dead connection in between.
out=$(reuse 45002 "$TB_DIR/hello-a.bin" tls:b.test)
tb_assert_eq "$(echo "$out" | sed -n 's/^ack: //p')" "yes" "the extra ACK was sent"
second=$(echo "$out" | sed -n 's/^second: //p')
# conntrack does not see this SYN as new (the ACK kept the old entry), so
# sluice drops it rather than guess: the client times out, it gets no row
tb_check "same 5-tuple after a reset and an ACK, SNI b.test: refused ($second)" \
    [ "$second" = reset -o "$second" = timeout ]

sleep 0.5
tb_assert_eq "$(grep -c 'sni=b.test' "$TB_DIR/nginx.access.log")" 0 \
    "nginx served nothing for b.test"
tb_assert_eq "$(tb_sql "SELECT count(*) FROM flows WHERE src_port = 45002 AND
    verdict = 'allow' AND (sni IS NULL OR sni != 'a.test')")" 0 \
    "no allow row for anything but the first connection's a.test"
tb_done
