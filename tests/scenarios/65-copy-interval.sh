#!/bin/bash
# 65-copy-interval: with --copy-interval MS, sluiced does not wait for the
# kernel's copies (of the SYNs and hellos it let through, of the servers'
# answers that prove a first flight) while they keep coming: it reads them
# every pass of its loop and at least every MS ms, and a packet that needs
# one has them read first. Nothing it decides changes: every connection
# still gets its row and its proof, a name not allowed is refused, a hello
# the kernel let out that sluiced would not have is overruled (the
# attacker host gets that hello and nothing after it, and a reset), and a
# policy change takes effect at once. A second without copies, and it
# waits for them again. Without the flag (0, the default) it never reads
# them unwaited. Checked at the far side: what nginx served, what the
# attacker host received.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init copy-interval
tb_internet_up || { tb_fail "test bed up"; tb_done; }
tb_sluiced_start --kernel-syn on --kernel-sni on --copy-interval 20 ||
    { tb_fail "sluiced up"; tb_done; }

cat > "$TB_DIR/policy.json" <<EOF
{"network": {"allowedDomains": ["a.test", "*.evil.test"]}}
EOF
cat > "$TB_DIR/policy-a.json" <<EOF
{"network": {"allowedDomains": ["a.test"]}}
EOF
tb_check "sandbox add" tb_sandbox_add a "$TB_DIR/policy.json"
tls() { tb_in a "$TB_PY" "$TB_LIB/tlsclient.py" "$@"; }
ks() { tb_status "kernel_sni.$1"; }
copies() { tb_status "copies.$1"; }
q() { tb_sql "$1"; }
served() { grep -c "sni=$1" "$TB_DIR/nginx.access.log"; }
# burst ADDR NAME N [raw]: N connections to NAME at ADDR:443, one after
# another, in one process (so that the copies keep coming); prints how
# many were answered: with a whole TLS handshake and "GET /" (nginx's
# page), or with raw, a ClientHello and any reply (the attacker host)
burst() {
	tb_in a "$TB_PY" - "$TB_LIB" "$TB_CA" "$@" <<'EOF'
import socket, ssl, sys
sys.path.insert(0, sys.argv[1])
import tlsclient
ca, addr, name, n = sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
raw = sys.argv[6:] == ["raw"]
ctx = ssl.create_default_context(cafile=ca)
get = f"GET / HTTP/1.1\r\nHost: {name}\r\nConnection: close\r\n\r\n"
ok = 0
for _ in range(n):
    try:
        with socket.create_connection((addr, 443), timeout=3) as s:
            if raw:
                s.sendall(tlsclient.python_hello(name, ""))
                ok += len(s.recv(4096)) > 0
                continue
            with ctx.wrap_socket(s, server_hostname=name) as t:
                t.sendall(get.encode())
                body = b""
                while (d := t.recv(4096)):
                    body += d
                ok += body.endswith(f"hello from {name}".encode()) or \
                    f"hello from {name}".encode() in body
    except OSError:
        pass
print(ok)
EOF
}

tb_assert_eq "$(copies interval_ms)" 20 "copies.interval_ms"
tb_assert_eq "$(tb_in a dig +short a.test)" "$TB_ADDR_HTTPS" "a.test resolves"
tb_assert_eq "$(tb_in a dig +short x.evil.test)" "$TB_ADDR_ATK" "x.evil.test resolves"
# the first is queued (SYN and hello) and learned; the rest pass in the
# kernel, their copies read without waiting for them
tb_assert_eq "$(tls "$TB_ADDR_HTTPS" 443 --sni a.test)" "answered" "the first hello (queued)"
tb_assert_eq "$(burst "$TB_ADDR_HTTPS" a.test 40)" 40 "40 more, one after another: all answered"
tb_assert_eq "$(served a.test)" 40 "nginx served the 40 pages"
tb_check "their hellos went out in the kernel (kernel_sni.approved $(ks approved))" \
    [ "$(ks approved)" -ge 39 ]
tb_assert_eq "$(ks copies)" "$(ks approved)" "each one's copy read"
tb_check "copies read without waiting for them (copies.unwaited $(copies unwaited))" \
    [ "$(copies unwaited)" -gt 0 ]
tb_wait_rows "SELECT count(*) FROM flows WHERE sni = 'a.test'" 41 >/dev/null
tb_assert_eq "$(q "SELECT verdict, reason, app, count(*) FROM flows WHERE sni = 'a.test' GROUP BY 1, 2, 3")" \
    "allow|allowed_domain|TLS|41" "41 rows, each allowed and named"
tb_assert_eq "$(tb_status queue.verify_expired)" 0 \
    "every one proven by its server (queue.verify_expired 0)"

# a name not allowed, amid copies not waited for: refused in the queue
tb_assert_eq "$(burst "$TB_ADDR_HTTPS" a.test 5)" 5 "5 more for a.test"
tb_assert_eq "$(tls "$TB_ADDR_HTTPS" 443 --sni b.test)" "reset" "SNI b.test to a.test's address: reset"
tb_assert_eq "$(served b.test)" 0 "nginx served nothing for b.test"
tb_wait_rows "SELECT count(*) FROM flows WHERE sni = 'b.test'" 1 >/dev/null
tb_assert_eq "$(q "SELECT verdict, reason FROM flows WHERE sni = 'b.test'")" "deny|sni_not_allowed" "b.test: its row"

# overruled, with its copy not waited for: a hello the program passes and
# sluiced refuses (it lies past the stream's start, scenario 64)
tb_assert_eq "$(tls "$TB_ADDR_ATK" 443 --sni x.evil.test)" "answered" "x.evil.test answered (queued, learned)"
tb_assert_eq "$(burst "$TB_ADDR_HTTPS" a.test 5)" 5 "5 more for a.test"
tb_overrule_gap a

# a policy change takes effect at once, copies or not
tb_assert_eq "$(tls "$TB_ADDR_ATK" 443 --sni x.evil.test)" "answered" "x.evil.test again (queued, learned)"
tb_assert_eq "$(burst "$TB_ADDR_ATK" x.evil.test 5 raw)" 5 "5 more for x.evil.test"
tb_check "policy set without *.evil.test" tb_sluice policy set "${P}-a" "$TB_DIR/policy-a.json"
atk_bytes=$(tb_attacker_payload_bytes proto=tcp dport=443)
tb_assert_eq "$(tls "$TB_ADDR_ATK" 443 --sni x.evil.test)" "refused" "x.evil.test after the change: refused"
sleep 0.3
tb_assert_eq "$(tb_attacker_payload_bytes proto=tcp dport=443)" "$atk_bytes" "the attacker got no byte"

# a second without copies: the next one wakes the loop again
sleep 1.5
woken=$(copies woken)
tb_assert_eq "$(tls "$TB_ADDR_HTTPS" 443 --sni a.test)" "answered" "a.test after a quiet second"
tb_check "its copies were waited for (copies.woken $(copies woken) > $woken)" \
    [ "$(copies woken)" -gt "$woken" ]
tb_check "sluiced stops" tb_sluiced_term

# without the flag (0, the default): every copy is waited for
tb_sluiced_start --kernel-syn on --kernel-sni on || tb_fail "sluiced up without --copy-interval"
tb_assert_eq "$(copies interval_ms)" 0 "copies.interval_ms 0"
tb_assert_eq "$(tb_in a dig +short a.test)" "$TB_ADDR_HTTPS" "a.test resolves again"
tb_assert_eq "$(tls "$TB_ADDR_HTTPS" 443 --sni a.test)" "answered" "a.test (queued)"
tb_assert_eq "$(burst "$TB_ADDR_HTTPS" a.test 20)" 20 "20 more: all answered"
tb_check "copies waited for (copies.woken $(copies woken))" [ "$(copies woken)" -gt 0 ]
tb_assert_eq "$(copies unwaited)" 0 "none read unwaited"
tb_check "sluiced stops" tb_sluiced_term
tb_done
