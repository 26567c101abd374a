#!/bin/bash
# 30-tls-sni: a new TLS flow is held until its ClientHello is read; it goes
# only if the SNI is allowed and the address is bound to it for this
# sandbox. Whatever is denied is reset at once, and the far side gets no
# byte of the held flight.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init tls-sni
tb_internet_up || { tb_fail "test bed up"; tb_done; }
tb_sluiced_start || { tb_fail "sluiced up"; tb_done; }

cat > "$TB_DIR/policy.json" <<EOF
{"network": {"allowedDomains": ["a.test", "b.test", "*.evil.test"]}}
EOF
tb_check "sandbox add" tb_sandbox_add a "$TB_DIR/policy.json"
tls() { tb_in a "$TB_PY" "$TB_LIB/tlsclient.py" "$@"; }
atk_app_bytes() {
	"$TB_PY" - "$TB_DIR/attacker.packets" <<'EOF'
import json, sys
n = 0
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("proto") == "tcp" and r.get("len", 0) > 0:
        n += r["len"]
print(n)
EOF
}

# resolve a.test and an attacker name: both addresses are now bound
tb_assert_eq "$(tb_in a dig +short a.test)" "$TB_ADDR_HTTPS" "a.test resolves"
tb_assert_eq "$(tb_in a dig +short x.evil.test)" "$TB_ADDR_ATK" "x.evil.test resolves"

# allowed: curl over HTTP/1.1 and HTTP/2
out=$(tb_in a curl -s --http1.1 --max-time 5 --cacert "$TB_CA" https://a.test/)
tb_assert_eq "$out" "hello from a.test" "curl --http1.1 https://a.test/"
out=$(tb_in a curl -s --http2 --max-time 5 --cacert "$TB_CA" -w '%{http_version}' https://a.test/)
tb_assert_eq "$(echo $out)" "hello from a.test 2" "curl --http2 https://a.test/"
# the first's hello again (address, port, name, version, ALPN): named
# from the classifier's cache, not by nDPI, and named the same
hits0=$(tb_sluice status -j | "$TB_PY" -c 'import json,sys; print(json.load(sys.stdin)["queue"]["app_cache_hits"])')
out=$(tb_in a curl -s --http1.1 --max-time 5 --cacert "$TB_CA" https://a.test/)
tb_assert_eq "$out" "hello from a.test" "curl --http1.1 https://a.test/ again"
hits1=$(tb_sluice status -j | "$TB_PY" -c 'import json,sys; print(json.load(sys.stdin)["queue"]["app_cache_hits"])')
tb_assert_eq "$((hits1 - hits0))" 1 "its app from the cache (queue.app_cache_hits)"
# one hit is far from the 64th, which nDPI names too: no check yet
chk=$(tb_sluice status -j | "$TB_PY" -c 'import json,sys; q = json.load(sys.stdin)["queue"]; print(q["app_cache_checks"], q["app_cache_mismatches"])')
tb_assert_eq "$chk" "0 0" "no cache check yet (queue.app_cache_checks, app_cache_mismatches)"

# an allowed name presented to the attacker's (bound) address
t0=$(tb_time_ms)
out=$(echo | tb_in a timeout 5 openssl s_client -connect "$TB_ADDR_ATK:443" -servername a.test 2>&1)
t1=$(tb_time_ms)
tb_assert_match "$out" "errno=104|reset|write:errno|Connection reset" "openssl s_client with SNI a.test to the attacker: reset"
tb_assert_le $((t1 - t0)) 2000 "at once"

# a shared virtual-host address: b.test is allowed, but only a.test was resolved
out=$(tb_in a curl -s --max-time 5 --cacert "$TB_CA" --resolve "b.test:443:$TB_ADDR_HTTPS" https://b.test/)
tb_assert_eq "$?" 35 "b.test's SNI on a.test's binding: reset during the handshake"
tb_in a dig +short b.test >/dev/null
out=$(tb_in a curl -s --max-time 5 --cacert "$TB_CA" https://b.test/)
tb_assert_eq "$out" "hello from b.test" "after resolving b.test it is allowed"

# no SNI, ECH, and the malformed variants, to a.test's address
tb_assert_eq "$(tls "$TB_ADDR_HTTPS" 443)" "reset" "no SNI (Python's hello without a name)"
tb_assert_eq "$(tls "$TB_ADDR_HTTPS" 443 --sni a.test --synthetic ech)" "reset" "ECH (0xfe0d)"
tb_assert_eq "$(tls "$TB_ADDR_HTTPS" 443 --sni a.test --synthetic ech-draft)" "reset" "ECH draft (0xffce)"
for v in two-sni-ext two-names nul-name long-name list-length; do
	tb_assert_eq "$(tls "$TB_ADDR_HTTPS" 443 --sni a.test --synthetic $v)" "reset" "malformed: $v"
done
tb_assert_eq "$(tls "$TB_ADDR_HTTPS" 443 --raw 'GET / HTTP/1.1\r\nHost: a.test\r\n\r\n')" "reset" \
    "plain text to 443"

# the same hello, cut differently: the verdict does not change
for how in "" "--segment 60 --cut-name" "--records 4" "--records 3 --segment 70 --cut-name"; do
	# shellcheck disable=SC2086
	tb_assert_eq "$(tls "$TB_ADDR_HTTPS" 443 --sni a.test $how)" "answered" "allowed SNI, cut as '${how:-one piece}'"
	# shellcheck disable=SC2086
	tb_assert_eq "$(tls "$TB_ADDR_ATK" 443 --sni a.test $how)" "reset" "allowed SNI to the attacker, cut as '${how:-one piece}'"
done

# UDP 443 (QUIC): denied and logged; HTTPS over TCP still works
echo quic | tb_in a nc -u -w 1 "$TB_ADDR_HTTPS" 443 >/dev/null 2>&1
out=$(tb_in a curl -s --max-time 5 --cacert "$TB_CA" https://a.test/)
tb_assert_eq "$out" "hello from a.test" "plain curl after a QUIC attempt"

sleep 0.5
tb_assert_eq "$(atk_app_bytes)" 0 "the attacker host received no application byte"
tb_assert_eq "$(grep -c 'sni=b.test' "$TB_DIR/nginx.access.log")" 1 \
    "nginx served b.test once (after it was resolved)"

# The proof comes from a copy of the server's packet (its ACK of the
# hello), not from the packet itself: the connection's mark is changed to
# allow over ctnetlink. A client that sends its hello, reads the server's
# answer and then sends nothing (no queued packet of its own could set the
# mark) carries the allow mark a moment later.
c0=$(tb_status queue.verify_copies)
tls "$TB_ADDR_HTTPS" 443 --sni a.test --linger 2.5 > "$TB_DIR/quiet.out" 2>&1 &
quiet=$!
sleep 1.5
marks=$(ip netns exec "$TB_NETNS_GW" conntrack -L -p tcp --dport 443 2>/dev/null |
    grep ESTABLISHED | grep -o 'mark=[0-9]*' | sort | uniq -c | tr -s ' ')
wait "$quiet"
tb_assert_eq "$(cat "$TB_DIR/quiet.out")" "answered" "a hello alone is answered"
tb_assert_match "$marks" "^ ?1 mark=268435456$" "and its connection then carries the allow mark (0x10000000)"
tb_assert_le 1 $(( $(tb_status queue.verify_copies) - c0 )) "the proof came from copies of the server's packets"
tb_assert_eq "$(tb_status queue.verify_mark_errors)" 0 "no conntrack mark failed to change"

q() { tb_sql "$1"; }
tb_wait_rows "SELECT count(*) FROM flows WHERE proto = 'udp'" 1 >/dev/null
tb_assert_eq "$(q "SELECT verdict, reason, sni, tls_version, alpn FROM flows
    WHERE dst_ip = '$TB_ADDR_HTTPS' AND sni = 'a.test' ORDER BY id LIMIT 2")" \
"allow|allowed_domain|a.test|TLS1.3|http/1.1
allow|allowed_domain|a.test|TLS1.3|h2,http/1.1" "curl's rows: SNI, version, ALPN offered"
tb_assert_eq "$(q "SELECT verdict, reason FROM flows WHERE dst_ip = '$TB_ADDR_ATK' AND dst_port = 443
    ORDER BY id LIMIT 1")" "deny|sni_binding_mismatch" "openssl to the attacker"
tb_assert_eq "$(q "SELECT reason FROM flows WHERE sni = 'b.test' ORDER BY id")" \
"sni_binding_mismatch
allowed_domain" "b.test before and after resolving"
tb_assert_eq "$(q "SELECT group_concat(reason, ' ') FROM (SELECT reason FROM flows
    WHERE dst_ip = '$TB_ADDR_HTTPS' AND proto = 'tcp' AND verdict = 'deny'
    AND (sni IS NULL OR sni != 'b.test') ORDER BY id)")" \
    "no_sni ech ech malformed_tls malformed_tls malformed_tls malformed_tls malformed_tls not_tls" \
    "the denied hellos, each with its reason"
tb_assert_eq "$(q "SELECT count(*) FROM flows WHERE dst_ip = '$TB_ADDR_ATK' AND reason = 'sni_binding_mismatch'")" 5 \
    "every cut of the hello to the attacker: sni_binding_mismatch"
tb_assert_eq "$(q "SELECT reason FROM flows WHERE proto = 'udp' AND dst_port = 443")" "quic" "UDP 443: quic"
tb_assert_eq "$(q "SELECT group_concat(app, ' ') FROM (SELECT app FROM flows
    WHERE sni = 'a.test' AND verdict = 'allow' AND dst_ip = '$TB_ADDR_HTTPS'
    ORDER BY id LIMIT 3)")" "TLS TLS TLS" \
    "nDPI names the protocol (the third from the cache)"
# the handshakes' bare ACKs took the kernel's path, not the queue: every
# payload above went through sluiced (the far side got nothing denied)
acks=$(ip netns exec "$TB_NETNS_GW" iptables -L sluice-sandbox -v -x -n |
    awk '/u32/ && /ACCEPT/ { n += $1 } END { print n + 0 }')
tb_check "bare ACKs of held TLS flows passed in the kernel ($acks)" [ "$acks" -gt 0 ]
tb_done
