#!/bin/bash
# 42-replay: live equals replay. Everything a sandbox sends and receives is
# captured on its side of the link while a mix of clients runs; `sluice
# replay` under the same policy must then give exactly the rows the live
# gateway wrote (flows and DNS queries), and `--against` a stricter policy
# exactly the rows that policy would have decided otherwise.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init replay
tb_internet_up || { tb_fail "test bed up"; tb_done; }
tb_sluiced_start || { tb_fail "sluiced up"; tb_done; }

cat > "$TB_DIR/policy.json" <<EOF
{"network": {"allowedDomains": ["a.test", "plain.test", "*.evil.test"]}}
EOF
cat > "$TB_DIR/strict.json" <<EOF
{"network": {"allowedDomains": ["a.test"]}}
EOF
tb_check "sandbox add" tb_sandbox_add a "$TB_DIR/policy.json"
SB="${P}-a"

# the whole conversation, from the sandbox's side, from before its first
# packet to after its last
TRACE=$TB_DIR/trace.pcap
_tb_bg "$SB" sniffer "$TB_DIR/sniff.log" "$TB_PY" "$TB_LIB/pcapsniff.py" \
    --iface eth0 --out "$TRACE" --ready "$TB_DIR/sniff.ready"
SNIFF_PID=$TB_LAST_PID
_tb_wait_for "the sniffer" "$TB_DIR/sniff.log" test -e "$TB_DIR/sniff.ready" ||
    { tb_fail "sniffer up"; tb_done; }

# ---- the mix: allowed and denied names, flows, first flights
tb_assert_eq "$(tb_in a dig +short +time=2 +tries=1 a.test)" "$TB_ADDR_HTTPS" "dig a.test"
tb_assert_eq "$(tb_in a dig +short +time=2 +tries=1 nope.test)" "" "dig nope.test: NXDOMAIN"
tb_assert_eq "$(tb_in a dig +short +time=2 +tries=1 a.test AAAA)" "" "dig a.test AAAA: empty"
tb_assert_eq "$(tb_in a dig +short +time=2 +tries=1 a.test TXT)" "" "dig a.test TXT: refused"
tb_assert_eq "$(tb_in a dig +short +time=2 +tries=1 x.evil.test)" "$TB_ADDR_ATK" "dig x.evil.test"
tb_assert_eq "$(tb_in a dig +tcp +short +time=2 +tries=1 a.test)" "$TB_ADDR_HTTPS" "dig +tcp a.test"
out=$(tb_in a curl -s --max-time 5 --cacert "$TB_CA" https://a.test/)
tb_assert_eq "$out" "hello from a.test" "curl https://a.test/"
tb_in a curl -s --max-time 5 --cacert "$TB_CA" \
    --resolve "b.test:443:$TB_ADDR_HTTPS" https://b.test/ >/dev/null
tb_assert_eq "$?" 35 "curl with SNI b.test (not allowed) on a.test's address: reset"
out=$(echo | tb_in a timeout 5 openssl s_client -connect "$TB_ADDR_ATK:443" \
    -servername a.test 2>&1)
tb_assert_match "$out" "errno=104|reset|Connection reset" "SNI a.test to the attacker's (bound) address: reset"
tb_in a nc -z -w 2 "$TB_ADDR_ATK" 4444 >/dev/null 2>&1
tb_check "nc to the attacker: refused" [ $? != 0 ]
echo datagram | tb_in a nc -u -w 1 "$TB_ADDR_ATK" 9999 >/dev/null 2>&1
out=$(tb_in a dig +time=1 +tries=1 @"$TB_ADDR_DNS" a.test 2>&1)
tb_assert_match "$out" "no servers could be reached|timed out|unreachable" "DNS to another resolver: no answer"
tb_assert_eq "$(tb_in a curl -s --max-time 3 http://plain.test/)" "hello from plain.test" "curl http://plain.test/"
tb_in a curl -s --max-time 3 -H 'Host: other.test' http://a.test/ >/dev/null
tb_assert_eq "$?" 56 "Host: other.test to a.test's address: reset"
tb_in a ping -c 1 -W 1 "$TB_ADDR_HTTPS" >/dev/null 2>&1
tb_check "ping: no answer" [ $? != 0 ]
tb_in a curl -s --max-time 3 http://a.test:8080/ >/dev/null
tb_assert_eq "$?" 7 "a.test on another port: refused"
tb_check "connect to a.test:443 and close without a byte" tb_in a nc -z -w 2 a.test 443
out=$(tb_in a "$TB_PY" "$TB_LIB/tlsclient.py" "$TB_ADDR_HTTPS" 443 --sni a.test \
    --truncate 100 --wait 10)
tb_assert_eq "$out" "reset" "half a ClientHello: reset after the hold time"
sleep 0.5

kill -TERM "$SNIFF_PID" 2>/dev/null
wait "$SNIFF_PID" 2>/dev/null
tb_check "the trace was written" [ -s "$TRACE" ]

# ---- live rows, once they have all landed
tb_wait_rows "SELECT count(*) FROM flows WHERE proto = 'icmp'" 1 >/dev/null
tb_wait_rows "SELECT count(*) FROM flows WHERE reason = 'hold_timeout'" 1 >/dev/null
tb_sql "SELECT 'flow', proto, dst_ip, ifnull(dst_port, ''), verdict, reason
    FROM flows WHERE sandbox = '$SB'" | tr '|' ' ' | sort > "$TB_DIR/live.rows"
tb_sql "SELECT 'dns', proto, qname, qtype, verdict, reason, ifnull(rcode, '')
    FROM dns_queries WHERE sandbox = '$SB'" | tr '|' ' ' | sort >> "$TB_DIR/live.rows"
sort -o "$TB_DIR/live.rows" "$TB_DIR/live.rows"

# ---- replayed rows
"$SLUICE" replay --policy "$TB_DIR/policy.json" -j "$TRACE" \
    > "$TB_DIR/replay.json" 2> "$TB_DIR/replay.err"
tb_assert_eq "$?" 0 "sluice replay -j exits 0"
rows() {	# NDJSON rows as the lines of live.rows
	"$TB_PY" - "$1" <<'EOF'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r["kind"] == "flow":
        p = "" if r["dst_port"] is None else r["dst_port"]
        print("flow", r["proto"], r["dst_ip"], p, r["verdict"], r["reason"])
    elif r["kind"] == "dns":
        print("dns", r["proto"], r["qname"], r["qtype"], r["verdict"], r["reason"],
              r["rcode"] or "")
EOF
}
rows "$TB_DIR/replay.json" | sort > "$TB_DIR/replay.rows"
if diff -u "$TB_DIR/live.rows" "$TB_DIR/replay.rows" > "$TB_DIR/rows.diff"; then
	tb_pass "replay gives exactly the live rows ($(wc -l < "$TB_DIR/live.rows") rows)"
else
	tb_fail "replay differs from the live rows (- live, + replay):"
	cat "$TB_DIR/rows.diff"
fi
# the mix really covered what it meant to
for want in "flow tcp $TB_ADDR_HTTPS 443 allow allowed_domain" \
    "flow tcp $TB_ADDR_HTTPS 443 deny sni_not_allowed" \
    "flow tcp $TB_ADDR_ATK 443 deny sni_binding_mismatch" \
    "flow tcp $TB_ADDR_ATK 4444 deny port_not_allowed" \
    "flow udp $TB_ADDR_ATK 9999 deny proto_not_allowed" \
    "flow udp $TB_ADDR_DNS 53 deny dns_bypass" \
    "flow tcp $TB_ADDR_PLAIN 80 allow allowed_domain" \
    "flow tcp $TB_ADDR_HTTPS 80 deny host_not_allowed" \
    "flow icmp $TB_ADDR_HTTPS  deny proto_not_allowed" \
    "flow tcp $TB_ADDR_HTTPS 8080 deny port_not_allowed" \
    "flow tcp $TB_ADDR_HTTPS 443 deny hold_timeout" \
    "dns udp a.test A allow allowed_domain NOERROR" \
    "dns tcp a.test A allow allowed_domain NOERROR" \
    "dns udp nope.test A deny not_allowlisted NXDOMAIN" \
    "dns udp a.test AAAA allow no_ipv6 NOERROR" \
    "dns udp a.test TXT allow type_not_allowed REFUSED"; do
	tb_check "replayed: $want" grep -qxF "$want" "$TB_DIR/replay.rows"
done
tb_assert_eq "$(tail -n 1 "$TB_DIR/replay.json" | "$TB_PY" -c 'import json,sys
r = json.load(sys.stdin)
print(r["kind"], r["sandbox_addr"], r["flows"]["count"] + r["dns"]["count"])')" \
    "summary 10.213.0.2 $(wc -l < "$TB_DIR/live.rows")" "the summary line"

# the table says the same
out=$("$SLUICE" replay --policy "$TB_DIR/policy.json" "$TRACE")
tb_assert_eq "$?" 0 "sluice replay (table) exits 0"
tb_assert_match "$(echo "$out" | head -n 1)" "^TIME +PROTO +DESTINATION +VERDICT +REASON$" "the table's header"
tb_assert_match "$out" "a\.test \($TB_ADDR_HTTPS:443\) +allow +allowed_domain" "a.test's row in the table"
tb_assert_match "$out" "b\.test \($TB_ADDR_HTTPS:443\) +deny +sni_not_allowed" "b.test's SNI in the table"

# ---- against a stricter policy: exactly what it changes
"$SLUICE" replay --policy "$TB_DIR/policy.json" --against "$TB_DIR/strict.json" \
    -j "$TRACE" > "$TB_DIR/diff.json"
tb_assert_eq "$?" 0 "sluice replay --against exits 0"
got=$("$TB_PY" - "$TB_DIR/diff.json" <<'EOF'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r["kind"] != "diff":
        continue
    what = r["qname"] + " " + r["qtype"] if r["qname"] else \
        "%s %s:%s" % (r["proto"], r["dst_ip"], r["dst_port"])
    print(what, "%s/%s -> %s/%s" % (r["a"]["verdict"], r["a"]["reason"],
                                    r["b"]["verdict"], r["b"]["reason"]))
EOF
)
# plain.test and x.evil.test are not allowed any more: their queries are
# refused, so nothing is bound to their addresses (curl asks AAAA too when
# it thinks IPv6 might work)
want=$(sort <<EOF
plain.test A allow/allowed_domain -> deny/not_allowlisted
tcp $TB_ADDR_ATK:443 deny/sni_binding_mismatch -> deny/no_dns_binding
tcp $TB_ADDR_ATK:4444 deny/port_not_allowed -> deny/no_dns_binding
tcp $TB_ADDR_PLAIN:80 allow/allowed_domain -> deny/no_dns_binding
x.evil.test A allow/allowed_domain -> deny/not_allowlisted
$(grep -x "dns udp plain.test AAAA allow no_ipv6 NOERROR" "$TB_DIR/replay.rows" |
    sed 's|.*|plain.test AAAA allow/no_ipv6 -> deny/not_allowlisted|')
EOF
)
want=$(echo "$want" | sed '/^$/d')
tb_assert_eq "$(echo "$got" | sort)" "$want" \
    "--against: exactly the rows the stricter policy changes"
tb_assert_eq "$(tail -n 1 "$TB_DIR/diff.json" | "$TB_PY" -c 'import json,sys
r = json.load(sys.stdin); print(r["kind"], r["differ"])')" \
    "summary $(echo "$want" | wc -l)" "--against's summary"
out=$("$SLUICE" replay --policy "$TB_DIR/policy.json" --against "$TB_DIR/strict.json" "$TRACE")
tb_assert_match "$out" "allow \(allowed_domain\) -> deny \(no_dns_binding\)" "--against as a table"

# ---- bad input
printf '{"network": {"allowedDomains": [1]}}\n' > "$TB_DIR/bad.json"
err=$("$SLUICE" replay --policy "$TB_DIR/bad.json" "$TRACE" 2>&1 >/dev/null)
tb_assert_eq "$?" 1 "a bad policy: exit 1"
tb_assert_match "$err" "bad\.json:1:[0-9]+: " "a bad policy: file:line:col"
echo "not a pcap" > "$TB_DIR/junk.pcap"
"$SLUICE" replay --policy "$TB_DIR/policy.json" "$TB_DIR/junk.pcap" >/dev/null 2>&1
tb_assert_eq "$?" 1 "an unreadable trace: exit 1"
"$SLUICE" replay "$TRACE" >/dev/null 2>&1
tb_assert_eq "$?" 1 "no --policy: exit 1"
tb_done
