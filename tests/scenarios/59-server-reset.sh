#!/bin/bash
# 59-server-reset: a connection refused after its handshake (the first
# flight denied, left undecided by the client's own reset, or never sent
# in time) ends at the server too. The server accepted the handshake;
# before, only the client was reset, and the server's side stayed open
# until its own timeout (nginx: 60 s), its later packets dropped by the
# gateway. sluiced now sends the server a reset at the sequence number it
# expects next, as the client, through the connection's NAT. Checked at
# the far side: no socket of these connections left at the server.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init server-reset
tb_internet_up || { tb_fail "test bed up"; tb_done; }
tb_sluiced_start || { tb_fail "sluiced up"; tb_done; }

cat > "$TB_DIR/policy.json" <<EOF
{"network": {"allowedDomains": ["a.test"]}}
EOF
tb_check "sandbox add" tb_sandbox_add a "$TB_DIR/policy.json"
tb_assert_eq "$(tb_in a dig +short a.test)" "$TB_ADDR_HTTPS" "a.test resolves"

# client PORT SPORT WHAT: one connection from SPORT, then WHAT:
#   deny:  a whole ClientHello for b.test (same address, not allowed), or
#          an HTTP request for b.test; prints reset/answered/...
#   abort: 20 bytes of a hello for a.test, then the client's own reset
#   stall: 20 bytes of a hello for a.test, then nothing for 5 s
#   keep:  HTTP, kept alive: a GET and a POST with a body for a.test,
#          each answered, then a GET for b.test; prints what each got
#   partial: a whole hello for a.test in two segments, 60 bytes and the
#          rest (the caller has the server's namespace drop the second),
#          then 12 s for an answer (reset, if a retransmission of the
#          second segment meets the denial in time)
client() {
	tb_in a "$TB_PY" - "$TB_ADDR_HTTPS" "$@" <<'EOF'
import socket, ssl, struct, sys, time
addr, port, sport, what = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
bi, bo = ssl.MemoryBIO(), ssl.MemoryBIO()
so = ctx.wrap_bio(bi, bo, server_hostname="b.test" if what == "deny" else "a.test")
try:
    so.do_handshake()
except ssl.SSLWantReadError:
    pass
hello = bo.read()
if port == 80:
    hello = b"GET / HTTP/1.1\r\nHost: b.test\r\n\r\n"
def answer(s):
    data = b""
    while b"\r\n\r\n" not in data:
        data += s.recv(4096) or b"<eof>"
    head, body = data.split(b"\r\n\r\n", 1)
    n = [int(l.split(b":")[1]) for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")]
    while n and len(body) < n[0]:
        body += s.recv(4096)
    return head.split(b" ")[1].decode()
def fate(s, data):
    s.sendall(data)
    try:
        return "answered" if s.recv(100) else "closed"
    except ConnectionResetError:
        return "reset"
    except socket.timeout:
        return "timeout"
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
s.bind(("", sport))
s.settimeout(5)
s.connect((addr, port))
if what == "deny":
    print(fate(s, hello))
elif what == "keep":
    out = []
    s.sendall(b"GET / HTTP/1.1\r\nHost: a.test\r\n\r\n")
    out.append(answer(s))
    s.sendall(b"POST / HTTP/1.1\r\nHost: a.test\r\nContent-Length: 20000\r\n\r\n" + b"x" * 20000)
    out.append(answer(s))
    out.append(fate(s, hello))
    print(" ".join(out))
elif what == "partial":
    s.settimeout(12)
    s.sendall(hello[:60])
    time.sleep(0.2)
    print(fate(s, hello[60:]))
elif what == "abort":
    s.sendall(hello[:20])
    time.sleep(0.3)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()
    print("aborted")
else:
    print(fate(s, hello[:20]))
EOF
}

id0=$(tb_sql "SELECT coalesce(max(id), 0) FROM flows")
tb_assert_eq "$(client 443 41001 deny)" reset "TLS for b.test: the client is reset"
tb_assert_eq "$(client 80 41002 deny)" reset "HTTP for b.test: the client is reset"
tb_assert_eq "$(client 443 41003 abort)" aborted "half a hello, then the client's reset"
tb_assert_eq "$(client 443 41004 stall)" reset "half a hello, then nothing: reset when the hold times out"
out=$(client 80 41005 keep)
tb_assert_match "$out" "^200 [0-9]{3} reset$" "HTTP kept alive: a.test twice (a GET, a POST with a body), then b.test: reset"
# a segment lost on the way: the server has the hello's first 60 bytes
# only, acknowledges them, and never the rest, so the proof never comes
# (GW_VERIFY_MS, 10 s). The reset must be at what it acknowledged: the end
# of what was let out is ahead of it, the end of the handshake behind
ip netns exec "$TB_NETNS_INET" iptables -I INPUT -p tcp --sport 41006 --dport 443 \
    -m length --length 200:65535 -j DROP
tb_assert_match "$(client 443 41006 partial)" "^(reset|timeout)$" \
    "a hello for a.test whose second segment the server never gets: not answered"
ip netns exec "$TB_NETNS_INET" iptables -D INPUT -p tcp --sport 41006 --dport 443 \
    -m length --length 200:65535 -j DROP
sleep 0.5
tb_assert_eq "$(tb_server_sockets 443 41006)" 0 "the server holds nothing of the connection it got half a hello of"
tb_assert_eq "$(tb_server_sockets 80 41005)" 0 "the server holds nothing of the kept-alive connection refused at its third request"
tb_assert_eq "$(tb_server_sockets 443 41001)" 0 "the server holds nothing of the denied TLS connection"
tb_assert_eq "$(tb_server_sockets 80 41002)" 0 "the server holds nothing of the denied HTTP connection"
tb_assert_eq "$(tb_server_sockets 443 41003)" 0 "the server holds nothing of the aborted connection"
tb_assert_eq "$(tb_server_sockets 443 41004)" 0 "the server holds nothing of the stalled connection"
tb_wait_rows "SELECT count(*) FROM flows WHERE id > $id0" 8 >/dev/null
tb_assert_eq "$(tb_sql "SELECT src_port, verdict, reason FROM flows WHERE id > $id0 ORDER BY src_port, id")" \
"41001|deny|sni_not_allowed
41002|deny|host_not_allowed
41003|deny|hold_timeout
41004|deny|hold_timeout
41005|allow|allowed_domain
41005|deny|host_not_allowed
41006|allow|allowed_domain
41006|deny|hold_timeout" "a row for each, denied (the kept-alive one and the half-received one: their first flight's, then the denial)"
tb_assert_eq "$(tb_status queue.server_resets)" 6 "six resets sent to servers (sluice status)"
tb_assert_eq "$(tb_status queue.server_reset_errors) $(tb_status queue.server_resets_enabled)" "0 True" \
    "none failed, and status says resets are on"

# the guard: a packet the gateway sends as a sandbox that belongs to no
# established connection (no NAT would rewrite it) does not leave. Sent
# from the gateway's namespace, as sluiced's resets are; the attacker host
# must see nothing from the sandbox's address
sb_addr=$(tb_sandbox_field a addr)
out=$(ip netns exec "$TB_NETNS_GW" "$TB_PY" - "$sb_addr" "$TB_ADDR_ATK" <<'EOF'
import socket, struct, sys
src, dst = socket.inet_aton(sys.argv[1]), socket.inet_aton(sys.argv[2])
def csum(b):
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while s >> 16: s = (s & 0xffff) + (s >> 16)
    return ~s & 0xffff
tx = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
for flags in (0x04, 0x02):
    tcp = struct.pack("!HHIIBBHHH", 41999, 443, 1, 0, 0x50, flags, 0, 0, 0)
    c = csum(src + dst + struct.pack("!BBH", 0, 6, 20) + tcp)
    tcp = tcp[:16] + struct.pack("!H", c) + tcp[18:]
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 40, 0, 0x4000, 64, 6, 0, src, dst)
    try:
        tx.sendto(ip + tcp, (sys.argv[2], 0))
        print("sent")
    except PermissionError:
        print("refused")	# a drop in OUTPUT comes back as EPERM
EOF
)
tb_assert_eq "$(echo $out)" "refused refused" "the gateway's own stray sandbox-addressed packets are refused as they are sent"
sleep 0.5
tb_assert_eq "$(tb_attacker_packet_count src="$sb_addr")" 0 \
    "a sandbox-addressed packet of no connection, sent by the gateway, never reaches the attacker"
tb_assert_eq "$(ip netns exec "$TB_NETNS_GW" iptables -w 5 -L OUTPUT -v -n -x |
    awk '$3 == "DROP" && index($0, "ctstate ESTABLISHED") { print $1 }')" 2 \
    "the ruleset's guard dropped both"

# audit mode lets a would-be denial through: nothing is refused, so no
# server is reset
cat > "$TB_DIR/audit.json" <<EOF
{"network": {"allowedDomains": ["a.test"]}, "sluice": {"mode": "audit"}}
EOF
tb_check "sandbox add (audit)" tb_sandbox_add au "$TB_DIR/audit.json"
tb_in au dig +short a.test >/dev/null
r0=$(tb_status queue.server_resets)
tb_assert_eq "$(tb_in au "$TB_PY" "$TB_LIB/tlsclient.py" "$TB_ADDR_HTTPS" 443 --sni b.test)" answered \
    "audit mode: the hello for b.test answered"
tb_assert_eq "$(tb_status queue.server_resets)" "$r0" "audit mode: no server reset"

# an allowed connection is not reset by anything of this
out=$(tb_in a curl -s --max-time 5 --cacert "$TB_CA" https://a.test/)
tb_assert_eq "$out" "hello from a.test" "an allowed connection still works"
tb_done
