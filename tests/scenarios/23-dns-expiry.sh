#!/bin/bash
# 23-dns-expiry: a binding lasts the record's TTL (clamped) plus a grace;
# after that a new flow is denied until the name is resolved again, while
# a connection opened in time keeps going.
. "$(dirname "$0")/../lib/testbed.sh"
TB_DNS_TTL=2
tb_init dns-expiry
tb_internet_up || { tb_fail "test bed up"; tb_done; }
tb_sluiced_start --dns-ttl-min 1 --dns-ttl-max 60 --dns-grace 1 ||
    { tb_fail "sluiced up"; tb_done; }

cat > "$TB_DIR/policy.json" <<EOF
{"network": {"allowedDomains": ["a.test"]}}
EOF
tb_check "sandbox add" tb_sandbox_add a "$TB_DIR/policy.json"

ans=$(tb_in a dig +noall +answer +time=2 +tries=1 a.test)
tb_assert_match "$ans" "^a\.test\.[[:space:]]+2[[:space:]]+IN[[:space:]]+A[[:space:]]+$TB_ADDR_HTTPS" \
    "the answer carries the short TTL"
out=$(tb_in a curl -s --max-time 3 --cacert "$TB_CA" \
    --resolve "a.test:443:$TB_ADDR_HTTPS" https://a.test/)
tb_assert_eq "$out" "hello from a.test" "within the TTL: allowed"

# a keep-alive connection opened in time (to a.test:80): its second
# request, after the binding expired, still goes through
tb_in a "$TB_PY" - "$TB_ADDR_HTTPS" > "$TB_DIR/long.out" 2>&1 <<'EOF' &
import http.client, sys, time
c = http.client.HTTPConnection(sys.argv[1], 80, timeout=8)
for i in range(2):
    c.request("GET", "/", headers={"Host": "a.test"})
    print(c.getresponse().read().decode().strip())
    if i == 0:
        time.sleep(4.5)
EOF
long=$!

sleep 4	# TTL 2 + grace 1, and a margin
tb_in a curl -s --max-time 3 --cacert "$TB_CA" \
    --resolve "a.test:443:$TB_ADDR_HTTPS" https://a.test/ >/dev/null
tb_assert_eq "$?" 7 "after TTL + grace: refused"
wait $long
tb_assert_eq "$(cat "$TB_DIR/long.out")" "hello from a.test on port 80
hello from a.test on port 80" "the established connection kept working past the expiry"

tb_assert_eq "$(tb_in a dig +short +time=2 +tries=1 a.test)" "$TB_ADDR_HTTPS" "resolving again..."
out=$(tb_in a curl -s --max-time 3 --cacert "$TB_CA" \
    --resolve "a.test:443:$TB_ADDR_HTTPS" https://a.test/)
tb_assert_eq "$out" "hello from a.test" "...allows again"

tb_wait_rows "SELECT count(*) FROM flows WHERE dst_port = 443" 3 >/dev/null
tb_assert_eq "$(tb_sql "SELECT verdict, reason FROM flows WHERE dst_port = 443 ORDER BY id")" \
"allow|allowed_domain
deny|no_dns_binding
allow|allowed_domain" "rows: allowed, expired, allowed again"
tb_assert_eq "$(grep -c 'sni=a.test' "$TB_DIR/nginx.access.log")" 2 \
    "nginx saw only the two allowed requests"
tb_done
