#!/bin/bash
# 21-tcp-insertion: a first flight the gateway reads but the server throws
# away (an insertion attack, Ptacek & Newsham 1998). The sandbox sends a
# decoy ClientHello (or HTTP request head) for the allowed a.test in a
# segment the server's TCP drops on arrival — it carries a TCP-MD5 option
# the server has no key for (Linux drops it: TCPMD5Unexpected), or a
# timestamp older than the one the server holds (PAWS) — and then the real
# one, for b.test, over the same sequence numbers. b.test lives on a.test's
# address (a shared host, a CDN edge) and is not allowed.
#
# What must hold: the server never serves b.test, and the flow is denied.
# Two defences. First, sluice reads only segments the server will take
# too, where it can tell: a signed segment (MD5/AO), one with IP options,
# or one whose timestamp is older than the newest seen (PAWS) is refused
# or dropped unread; every sandbox packet leaves with TTL 64, so none can
# expire between the gateway and the server. Second, for every reason it
# cannot tell (ackpaws: the timestamp was raised by a bare ACK the kernel
# lets past sluiced; oldack: an ACK number the server finds too old), the
# decided bytes are proven taken: until the server's ACK covers them,
# every client segment over them is compared with them, and the real
# hello, which differs, ends the connection (inspect.c, the verify mark).
# Before the first, sluice decided on the decoy, marked the connection
# allowed, and the real hello passed in the kernel without being read (for
# HTTP, the rewritten bytes lay behind the consumed stream and were
# released unread): the server served b.test, and the log said a.test.
# Before the second, ackpaws and oldack still did that. A wrong checksum,
# the same trick one layer down, is caught by conntrack (the control at
# the end).
. "$(dirname "$0")/../lib/testbed.sh"
tb_init adv-tcp-insertion
tb_internet_up || { tb_fail "test bed up"; tb_done; }
tb_sluiced_start || { tb_fail "sluiced up"; tb_done; }

cat > "$TB_DIR/policy.json" <<EOF
{"network": {"allowedDomains": ["a.test"]}}
EOF
tb_check "sandbox add" tb_sandbox_add a "$TB_DIR/policy.json"
tb_assert_eq "$(tb_in a dig +short a.test)" "$TB_ADDR_HTTPS" "a.test resolves"
raw() { tb_in a "$TB_PY" "$TB_LIB/rawtcp.py" "$TB_ADDR_HTTPS" "$@" --sni a.test --sni2 b.test; }
# not_served OUT WORD: the client saw something, and not WORD
not_served() { [ -n "$1" ] && ! printf '%s' "$1" | grep -q -- "$2"; }
md5_drops() {
	ip netns exec "$TB_NETNS_INET" nstat -az TcpExtTCPMD5Unexpected |
	    awk '$1 == "TcpExtTCPMD5Unexpected" { print $2 }'
}

# TLS: the certificate the server sends back says which name it served
m0=$(md5_drops)
for trick in md5 paws ackpaws oldack; do
	out=$(raw 443 insert --trick $trick)
	tb_check "TLS, decoy dropped by the server ($trick): b.test is not served ($out)" \
	    not_served "$out" cert=b.test
done
# sluice refuses a signed segment it was not told about before it is
# forwarded: the server never even sees the decoy
tb_check "the MD5 decoy never reached the server (TcpExtTCPMD5Unexpected unchanged)" \
    [ "$(md5_drops)" = "${m0:-0}" ]

# HTTP on port 80: nginx logs the Host it answered for
for trick in md5 paws ackpaws oldack; do
	out=$(raw 80 insert --trick $trick --http)
	tb_check "HTTP, decoy dropped by the server ($trick): b.test is not served ($out)" \
	    not_served "$out" host=b.test
done
sleep 0.3
tb_assert_eq "$(grep -c 'host=b.test' "$TB_DIR/nginx.access.log")" 0 \
    "nginx answered no request for b.test"

# the control: a decoy with a wrong TCP checksum never reaches the queue
# (conntrack marks it INVALID), so the real hello is read and refused
tb_assert_eq "$(raw 443 insert --trick badsum)" "result=reset" \
    "a decoy with a bad checksum: the real hello is read and refused"

tb_wait_rows "SELECT count(*) FROM flows" 13 >/dev/null
# md5: refused unread; paws: dropped unread, the real one refused; ackpaws and oldack: the decoy is allowed
# (it is what sluice read), and the real one that differs ends it
tb_assert_eq "$(tb_sql "SELECT dst_port, verdict, reason FROM flows ORDER BY id")" \
"443|deny|malformed_tls
443|deny|sni_not_allowed
443|allow|allowed_domain
443|deny|malformed_tls
443|allow|allowed_domain
443|deny|malformed_tls
80|deny|malformed_http
80|deny|host_not_allowed
80|allow|allowed_domain
80|deny|malformed_http
80|allow|allowed_domain
80|deny|malformed_http
443|deny|sni_not_allowed" "every inserted flow is denied"
tb_assert_eq "$(tb_sql "SELECT count(*) FROM flows a WHERE verdict = 'allow'
    AND NOT EXISTS (SELECT 1 FROM flows d WHERE d.src_port = a.src_port
    AND d.dst_port = a.dst_port AND d.id > a.id AND d.verdict = 'deny')")" 0 \
    "each decoy's allow row is followed by its connection's denial"
tb_assert_eq "$(tb_sql "SELECT reason, sni FROM flows ORDER BY id DESC LIMIT 1")" \
    "sni_not_allowed|b.test" "the bad-checksum control's row: the real SNI, refused"

# the urgent byte: a segment with URG (its pointer on the name's first
# byte) has that byte taken out of the stream the server's application
# reads, so the server would read other bytes than sluiced did; such a
# flow is refused before any of it is let through (before, the hello and
# the request went through with an allow row, one byte short at nginx)
n0=$(wc -l < "$TB_DIR/nginx.access.log")
tb_assert_eq "$(raw 443 urgent)" "result=reset" "TLS with an urgent byte: reset"
tb_assert_eq "$(raw 80 urgent --http)" "result=reset" "HTTP with an urgent byte: reset"
# the same with an ordinary socket (MSG_OOB): an urgent digit in a head's
# Content-Length; sluiced would read 99 and nginx 9, so that what sluiced
# took for body reached nginx as a second request, for b.test (found by
# review, 2026-11-30: nginx served it)
out=$(tb_in a "$TB_PY" - "$TB_ADDR_HTTPS" <<'EOF'
import socket, sys
smuggled = b"GET / HTTP/1.1\r\nHost: b.test\r\nConnection: close\r\n\r\n"
body = b"A" * 9 + smuggled
body += b"B" * (99 - len(body))
s = socket.create_connection((sys.argv[1], 80), timeout=5)
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
out = b""
try:
    s.send(b"GET / HTTP/1.1\r\nHost: a.test\r\nContent-Length: ")
    s.send(b"9", socket.MSG_OOB)
    s.send(b"9\r\n\r\n" + body)
    while True:
        x = s.recv(65536)
        if not x:
            break
        out += x
except (ConnectionResetError, socket.timeout) as e:
    out += b"<" + type(e).__name__.encode() + b">"
print("b.test" if b"hello from b.test" in out else "reset" if b"<Conn" in out else "other")
EOF
)
tb_assert_eq "$out" "reset" "an urgent digit in Content-Length: reset, nothing smuggled"
sleep 0.3
tb_assert_eq "$(( $(wc -l < "$TB_DIR/nginx.access.log") - n0 ))" 0 \
    "nginx saw nothing of any of them"
# (a segment the client sent after its reset may find no state: a row of
# its own, no_inspection_state, or none, as the timing falls)
tb_wait_rows "SELECT count(*) FROM flows WHERE reason != 'no_inspection_state'" 16 >/dev/null
tb_assert_eq "$(tb_sql "SELECT dst_port, verdict, reason FROM flows
    WHERE reason != 'no_inspection_state' ORDER BY id DESC LIMIT 3")" \
"80|deny|malformed_http
80|deny|malformed_http
443|deny|malformed_tls" "their rows"
tb_assert_eq "$(tb_attacker_packet_count)" 0 "the attacker received nothing"
tb_assert_eq "$(tb_upstream_queries)" 1 "the upstream saw only the a.test lookup"
tb_done
