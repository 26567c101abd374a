#!/bin/bash
# 56-kernel-syn: once a TLS connection's SYN has been decided "inspect"
# through the queue, the sandbox's next SYNs to that address and port pass
# in the kernel (the set ip sluice bound) and reach sluiced as NFLOG
# copies. Each connection still has its first flight read, its verdict and
# its row; the set empties when a policy changes or a sandbox goes, and
# when sluiced stops; an entry the decision no longer backs (made stale
# here by hand) lets a handshake through, never a byte of data, and is
# removed. Without --kernel-syn on (the default is off) there is no table.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init kernel-syn
tb_internet_up || { tb_fail "test bed up"; tb_done; }
tb_sluiced_start --kernel-syn on || { tb_fail "sluiced up"; tb_done; }

cat > "$TB_DIR/policy.json" <<EOF
{"network": {"allowedDomains": ["a.test", "*.evil.test"]}}
EOF
cat > "$TB_DIR/policy-a.json" <<EOF
{"network": {"allowedDomains": ["a.test"]}}
EOF
tb_check "sandbox add" tb_sandbox_add a "$TB_DIR/policy.json"
tls() { tb_in a "$TB_PY" "$TB_LIB/tlsclient.py" "$@"; }
# the set's elements, one per line: interface address destination port
elems() {
	ip netns exec "$TB_NETNS_GW" nft -j list set ip sluice bound 2>/dev/null |
	    "$TB_PY" -c '
import json, sys
try:
    d = json.load(sys.stdin)
except ValueError:
    sys.exit(0)
for o in d.get("nftables", []):
    for e in o.get("set", {}).get("elem", []):
        v = e.get("elem", {}).get("val", e) if isinstance(e, dict) else e
        print(" ".join(str(x) for x in v["concat"]))'
}
copies() {
	ip netns exec "$TB_NETNS_GW" iptables -L sluice-sandbox -v -x -n |
	    awk '/NFLOG/ { n += $1 } END { print n + 0 }'
}
syns_at() {	# SYNs that reached host $1 on port 443
	tb_attacker_packet_count proto=tcp dst="$1" dport=443 flags=S
}
q() { tb_sql "$1"; }

IF=$(tb_gw_if a)
ADDR=$(tb_sandbox_field a addr)
tb_assert_eq "$(tb_in a dig +short a.test)" "$TB_ADDR_HTTPS" "a.test resolves"
tb_assert_eq "$(tb_in a dig +short x.evil.test)" "$TB_ADDR_ATK" "x.evil.test resolves"
tb_assert_eq "$(elems)" "" "the set starts empty"

# the first connection is queued and decided; its SYN's decision is learned
out=$(tb_in a curl -s --max-time 5 --cacert "$TB_CA" https://a.test/)
tb_assert_eq "$out" "hello from a.test" "first curl https://a.test/"
tb_assert_eq "$(elems)" "$IF $ADDR $TB_ADDR_HTTPS 443" "learned: $IF $ADDR $TB_ADDR_HTTPS 443"
tb_assert_eq "$(copies)" 0 "no copy yet"

# the next ones pass their SYN in the kernel; all else is as before
for i in 1 2 3 4 5; do
	out=$(tb_in a curl -s --max-time 5 --cacert "$TB_CA" https://a.test/)
	tb_assert_eq "$out" "hello from a.test" "curl https://a.test/ #$((i + 1)), its SYN through the set"
done
tb_assert_eq "$(copies)" 5 "5 SYNs copied to sluiced"
tb_assert_eq "$(grep -c 'sni=a.test' "$TB_DIR/nginx.access.log")" 6 "nginx served 6 requests"

# the first flight is still read: a name not bound to this address is reset
tb_assert_eq "$(tls "$TB_ADDR_HTTPS" 443 --sni x.evil.test)" "reset" \
    "SNI x.evil.test to a.test's address through the set: reset"
tb_assert_eq "$(copies)" 6 "its SYN was copied"
# a connection that never sends a byte has its row too
tb_in a nc -z -w 2 "$TB_ADDR_HTTPS" 443
tb_assert_eq "$(copies)" 7 "a bare connect's SYN was copied"
tb_assert_eq "$(tb_sluice stats --prometheus | awk '$1 == "sluice_kernel_syn_copies_total" { print $2 }')" 7 \
    "sluice_kernel_syn_copies_total 7"
tb_wait_rows "SELECT count(*) FROM flows WHERE dst_port = 443 AND verdict = 'allow' AND sni IS NULL" 1 >/dev/null
tb_assert_eq "$(q "SELECT verdict, reason, coalesce(sni, '-'), count(*) FROM flows
    WHERE dst_ip = '$TB_ADDR_HTTPS' AND dst_port = 443 GROUP BY 1, 2, 3 ORDER BY 1, 2, 3")" \
"allow|allowed_domain|-|1
allow|allowed_domain|a.test|6
deny|sni_binding_mismatch|x.evil.test|1" "a row for every connection, with its verdict"
tb_assert_eq "$(grep -c 'sni=x.evil.test' "$TB_DIR/nginx.access.log")" 0 "nginx got no request for x.evil.test"

# a policy change empties the set: the attacker's address was learned,
# is no longer allowed, and its SYN is refused in the queue again
tb_assert_eq "$(tls "$TB_ADDR_ATK" 443 --sni x.evil.test)" "answered" "x.evil.test (allowed) answered"
tb_check "the attacker's address learned" sh -c "$(declare -f elems); elems | grep -q '$TB_ADDR_ATK 443'"
tb_check "policy set without *.evil.test" tb_sluice policy set "${P}-a" "$TB_DIR/policy-a.json"
tb_assert_eq "$(elems)" "" "policy set: the set is empty"
before=$(syns_at "$TB_ADDR_ATK")
tb_assert_eq "$(tls "$TB_ADDR_ATK" 443 --sni x.evil.test)" "refused" "x.evil.test after the change: its SYN reset (refused)"
sleep 0.3
tb_assert_eq "$(syns_at "$TB_ADDR_ATK")" "$before" "the attacker received no SYN"

# an entry the decision no longer backs (put in by hand): the handshake
# passes, its copy is decided (denied, with the reason), the entry goes,
# and the first flight is reset without reaching the attacker
ip netns exec "$TB_NETNS_GW" nft add element ip sluice bound \
    "{ $IF . $ADDR . $TB_ADDR_ATK . 443 timeout 60s }"
tb_check "a stale entry in place" sh -c "$(declare -f elems); elems | grep -q '$TB_ADDR_ATK 443'"
before=$(syns_at "$TB_ADDR_ATK")
atk_bytes=$(tb_attacker_payload_bytes proto=tcp dport=443)
atk_rst=$(tb_attacker_packet_count proto=tcp dport=443 flags=R)
tb_assert_eq "$(tls "$TB_ADDR_ATK" 443 --sni x.evil.test)" "reset" "through the stale entry: reset"
sleep 0.3
tb_assert_eq "$(syns_at "$TB_ADDR_ATK")" "$((before + 1))" "the handshake reached the attacker"
tb_assert_eq "$(tb_attacker_payload_bytes proto=tcp dport=443)" "$atk_bytes" "no byte of the hello did"
tb_assert_eq "$(tb_attacker_packet_count proto=tcp dport=443 flags=R)" "$((atk_rst + 1))" \
    "the server that took the handshake was reset (scenario 59)"
tb_assert_eq "$(elems)" "" "the stale entry is gone"
tb_wait_rows "SELECT count(*) FROM flows WHERE dst_ip = '$TB_ADDR_ATK' AND verdict = 'deny'
    AND reason = 'no_dns_binding'" 2 >/dev/null
tb_assert_eq "$(q "SELECT count(*) FROM flows WHERE dst_ip = '$TB_ADDR_ATK' AND verdict = 'deny'
    AND reason = 'no_dns_binding'")" 2 "both SYNs' refusals have their rows"
sleep 0.5
tb_assert_eq "$(q "SELECT count(*) FROM flows WHERE dst_ip = '$TB_ADDR_ATK' AND reason = 'no_inspection_state'")" 0 \
    "the stale entry's reset first flight has no row of its own: the copy's denial is the connection's row"

# sandbox del and sluiced's stop empty it too
out=$(tb_in a curl -s --max-time 5 --cacert "$TB_CA" https://a.test/)
tb_assert_eq "$(elems)" "$IF $ADDR $TB_ADDR_HTTPS 443" "learned again"
tb_check "sandbox del" tb_sluice sandbox del "${P}-a"
tb_assert_eq "$(elems)" "" "sandbox del: the set is empty"
tb_check "sandbox add b" tb_sandbox_add b "$TB_DIR/policy.json"
tb_in b dig +short a.test >/dev/null
out=$(tb_in b curl -s --max-time 5 --cacert "$TB_CA" https://a.test/)
tb_assert_eq "$out" "hello from a.test" "b: curl https://a.test/"
tb_check "b's entry learned" [ -n "$(elems)" ]
tb_check "sluiced stops" tb_sluiced_term
tb_assert_eq "$(elems)" "" "stopped: the set is empty"

# over a sandbox's bound of held flights through the set: sluiced is
# stopped (SIGSTOP) while b opens 8 connections to x.evil.test, so all 8
# SYNs pass in the kernel and their copies wait in the socket; resumed, it
# holds 3 flights (--limit-holds 3), empties the set and denies the other
# 5 copies (rate_limited, the bound named). Each connection then sends the
# start of a TLS record: 3 are held, 5 reset at that first byte, without
# a second row, and the attacker gets 8 handshakes and no byte.
tb_sluiced_start --kernel-syn on --limit-holds 3 || tb_fail "sluiced up with --limit-holds 3"
tb_assert_eq "$(tb_in b dig +short x.evil.test)" "$TB_ADDR_ATK" "b: x.evil.test resolves"
tb_assert_eq "$(tb_in b "$TB_PY" "$TB_LIB/tlsclient.py" "$TB_ADDR_ATK" 443 --sni x.evil.test)" "answered" \
    "b: x.evil.test answered (its SYN queued, the entry learned)"
tb_check "b's entry for the attacker learned" sh -c "$(declare -f elems); elems | grep -q '$TB_ADDR_ATK 443'"
id0=$(q "SELECT coalesce(max(id), 0) FROM flows")
before=$(syns_at "$TB_ADDR_ATK")
atk_bytes=$(tb_attacker_payload_bytes proto=tcp dport=443)
stale0=$(tb_sluice stats --prometheus | awk '$1 == "sluice_kernel_syn_stale_total" { print $2 }')
kill -STOP "$TB_SLUICED_PID"
out=$(tb_in b "$TB_PY" - "$TB_ADDR_ATK" "$TB_SLUICED_PID" <<'PYEOF'
import errno, os, select, signal, socket, sys, time
addr, pid = sys.argv[1], int(sys.argv[2])
socks = []
try:
    for _ in range(8):
        s = socket.socket()
        s.setblocking(False)
        if s.connect_ex((addr, 443)) not in (0, errno.EINPROGRESS):
            raise OSError("connect")
        socks.append(s)
    # the handshakes complete in the kernel, sluiced stopped
    _, w, _ = select.select([], socks, [], 3)
    connected = sum(1 for s in w if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0)
finally:
    os.kill(pid, signal.SIGCONT)
time.sleep(0.5)
for s in socks:
    try:
        s.send(b"\x16\x03\x01\x02\x00\x01")	# a ClientHello's start, no more
    except OSError:
        pass
time.sleep(1.5)
held = reset = other = 0
for s in socks:
    try:
        d = s.recv(64)
        other += 1
    except BlockingIOError:
        held += 1
    except ConnectionResetError:
        reset += 1
    except OSError:
        other += 1
print(connected, held, reset, other)
PYEOF
)
kill -CONT "$TB_SLUICED_PID" 2>/dev/null
tb_assert_eq "$out" "8 3 5 0" "8 handshakes through the set; 3 flights held, 5 reset at their first byte (connected held reset other)"
sleep 0.3
tb_assert_eq "$(syns_at "$TB_ADDR_ATK")" "$((before + 8))" "the attacker got the 8 SYNs"
tb_assert_eq "$(tb_attacker_payload_bytes proto=tcp dport=443)" "$atk_bytes" "and no byte"
tb_assert_eq "$(elems)" "" "at the bound: the set is empty"
stale1=$(tb_sluice stats --prometheus | awk '$1 == "sluice_kernel_syn_stale_total" { print $2 }')
tb_assert_eq "$((stale1 - stale0))" 5 "sluice_kernel_syn_stale_total counts the 5 copies denied"
tb_wait_rows "SELECT count(*) FROM flows WHERE id > $id0 AND reason = 'rate_limited'" 5 >/dev/null
tb_assert_eq "$(q "SELECT count(*) FROM flows WHERE id > $id0 AND sandbox = '${P}-b' AND dst_ip = '$TB_ADDR_ATK'
    AND verdict = 'deny' AND reason = 'rate_limited' AND rule LIKE 'limit-holds 3%'")" 5 \
    "the 5 have their rate_limited rows, the bound named"
tb_assert_eq "$(q "SELECT count(*) FROM flows WHERE id > $id0 AND reason = 'no_inspection_state'")" 0 \
    "and no second row at their first byte"
tb_check "sluiced stops" tb_sluiced_term

# the default, off: the table goes, every SYN is queued
tb_sluiced_start || tb_fail "sluiced up without --kernel-syn"
tb_check "no table ip sluice" sh -c "! ip netns exec '$TB_NETNS_GW' nft list table ip sluice >/dev/null 2>&1"
tb_in b dig +short a.test >/dev/null
for i in 1 2; do
	out=$(tb_in b curl -s --max-time 5 --cacert "$TB_CA" https://a.test/)
	tb_assert_eq "$out" "hello from a.test" "--kernel-syn off (the default): curl #$i"
done
tb_check "no copy rule" sh -c "! ip netns exec '$TB_NETNS_GW' iptables -S sluice-sandbox | grep -q NFLOG"
tb_done
