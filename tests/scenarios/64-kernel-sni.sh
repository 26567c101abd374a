#!/bin/bash
# 64-kernel-sni: once a ClientHello has been allowed through the queue, the
# next ones from the same sandbox to the same address and port with the
# same name, each whole in one segment, pass in the kernel (the program
# --kernel-sni pins, which the ruleset names) and reach sluiced as NFLOG
# copies. Each still gets its row, its proof and nDPI's name; a name the
# program does not know (another, or one not allowed) takes the queue and
# is decided there; a decoy the server drops does not carry the real
# hello past the queue; a policy change empties the program's table; a
# hello the program passes and sluiced would not have (one past the
# stream's start, which the program cannot see) is overruled: the
# connection is reset at both ends, its row says why, and the table is
# emptied. Checked at the far side: what nginx served, what the attacker
# host received.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init kernel-sni
tb_internet_up || { tb_fail "test bed up"; tb_done; }
tb_sluiced_start --kernel-sni on || { tb_fail "sluiced up"; tb_done; }

cat > "$TB_DIR/policy.json" <<EOF
{"network": {"allowedDomains": ["a.test", "*.evil.test"]}}
EOF
cat > "$TB_DIR/policy-a.json" <<EOF
{"network": {"allowedDomains": ["a.test"]}}
EOF
tb_check "sandbox add" tb_sandbox_add a "$TB_DIR/policy.json"
tls() { tb_in a "$TB_PY" "$TB_LIB/tlsclient.py" "$@"; }
ks() { tb_status "kernel_sni.$1"; }
q() { tb_sql "$1"; }
served() { grep -c "sni=$1" "$TB_DIR/nginx.access.log"; }

tb_assert_eq "$(ks enabled)" "True" "kernel_sni.enabled"
tb_check "the ruleset names the program" sh -c \
    "ip netns exec '$TB_NETNS_GW' iptables -S sluice-sandbox | grep -q -- '--object-pinned /run/sluice/bpf/$TB_NETNS_GW'"
tb_assert_eq "$(tb_in a dig +short a.test)" "$TB_ADDR_HTTPS" "a.test resolves"
tb_assert_eq "$(tb_in a dig +short x.evil.test)" "$TB_ADDR_ATK" "x.evil.test resolves"

# the first hello is queued and decided; it is learned
out=$(tb_in a curl -s --max-time 5 --cacert "$TB_CA" https://a.test/)
tb_assert_eq "$out" "hello from a.test" "first curl https://a.test/ (queued)"
tb_assert_eq "$(ks learned)" 1 "one entry learned"
tb_assert_eq "$(ks approved)" 0 "nothing passed in the kernel yet"

# the next ones pass in the kernel, and are each read, proven and logged
for i in 1 2 3 4 5; do
	out=$(tb_in a curl -s --max-time 5 --cacert "$TB_CA" https://a.test/)
	tb_assert_eq "$out" "hello from a.test" "curl https://a.test/ #$((i + 1)), its hello through the kernel"
done
tb_assert_eq "$(ks approved)" 5 "5 hellos let out in the kernel"
tb_assert_eq "$(ks copies)" 5 "5 copies read"
tb_assert_eq "$(ks overruled)" 0 "none overruled"
tb_assert_eq "$(served a.test)" 6 "nginx served 6 requests"
tb_wait_rows "SELECT count(*) FROM flows WHERE sni = 'a.test' AND verdict = 'allow'" 6 >/dev/null
tb_assert_eq "$(q "SELECT verdict, reason, sni, app, count(*) FROM flows WHERE dst_ip = '$TB_ADDR_HTTPS'
    AND dst_port = 443 GROUP BY 1, 2, 3, 4")" "allow|allowed_domain|a.test|TLS|6" \
    "six rows, each with its name and nDPI's"
tb_assert_eq "$(tb_status queue.verify_expired)" 0 \
    "every one proven by its server (queue.verify_expired 0)"

# a name the program does not know takes the queue: b.test is not allowed
before=$(ks approved)
tb_assert_eq "$(tls "$TB_ADDR_HTTPS" 443 --sni b.test)" "reset" "SNI b.test to a.test's address: reset"
tb_assert_eq "$(ks approved)" "$before" "b.test was not let out in the kernel"
tb_assert_eq "$(served b.test)" 0 "nginx served nothing for b.test"
tb_wait_rows "SELECT count(*) FROM flows WHERE sni = 'b.test'" 1 >/dev/null
tb_assert_eq "$(q "SELECT verdict, reason FROM flows WHERE sni = 'b.test'")" "deny|sni_not_allowed" "b.test: its row"
# nor is the same name in other case: the program matches bytes as sent
tb_assert_eq "$(tls "$TB_ADDR_HTTPS" 443 --sni A.TEST)" "answered" "SNI A.TEST: answered (through the queue)"
tb_assert_eq "$(ks approved)" "$before" "A.TEST was not let out in the kernel"

# decoys the server throws away (tests/adversarial/21): the decoy, for
# the learned a.test, passes in the kernel; the real hello over the same
# bytes, for b.test, is not let out there (an unknown name) and is
# compared in the queue with what was read: b.test is never served
raw() { tb_in a "$TB_PY" "$TB_LIB/rawtcp.py" "$@"; }
not_served() { [ -n "$1" ] && ! printf '%s' "$1" | grep -q -- "$2"; }
before=$(ks approved)
for trick in paws ackpaws oldack; do
	out=$(raw "$TB_ADDR_HTTPS" 443 insert --trick $trick --sni a.test --sni2 b.test)
	tb_check "a decoy through the kernel ($trick): b.test is not served ($out)" \
	    not_served "$out" cert=b.test
done
tb_assert_eq "$(served b.test)" 0 "nginx served nothing for b.test"
tb_assert_eq "$(ks approved)" "$((before + 3))" "the three decoys went out in the kernel"

# overruled: the attacker's name is learned, then a hello the program
# passes (its name known, its shape plain to it) that sluiced refuses: it
# does not begin the stream (it lies 100 bytes past it, which the program
# cannot see). The attacker's TCP holds that hello out of order and never
# reads it; it gets a reset, and the row says why
tb_assert_eq "$(tls "$TB_ADDR_ATK" 443 --sni x.evil.test)" "answered" "x.evil.test answered (queued, learned)"
clears0=$(ks clears)
tb_overrule_gap a
tb_assert_eq "$(ks clears)" "$((clears0 + 1))" "the program's table emptied"
# emptied, the next plain hello is queued (and learned again)
before=$(ks approved)
tb_assert_eq "$(tls "$TB_ADDR_ATK" 443 --sni x.evil.test)" "answered" "x.evil.test again: answered"
tb_assert_eq "$(ks approved)" "$before" "through the queue"

# a stalled sluiced (SIGSTOP): the program's lease, renewed by its loop,
# runs out within 2 s, and then nothing passes by it: a learned hello on
# a connection opened before the stop waits in the queue, and the
# attacker gets no byte of it until sluiced runs again and reads it
tb_in a "$TB_PY" - "$TB_LIB" "$TB_ADDR_ATK" > "$TB_DIR/stalled.out" 2>&1 <<'EOF' &
import socket, sys, time
sys.path.insert(0, sys.argv[1])
import tlsclient
s = socket.create_connection((sys.argv[2], 443), timeout=5)
print("connected", flush=True)
time.sleep(3.5)
s.send(tlsclient.python_hello("x.evil.test", ""))
time.sleep(3)
EOF
stalled=$!
for _ in $(seq 50); do grep -q connected "$TB_DIR/stalled.out" && break; sleep 0.05; done
tb_assert_eq "$(cat "$TB_DIR/stalled.out")" "connected" "a connection to the attacker, opened"
atk_bytes=$(tb_attacker_payload_bytes proto=tcp dport=443)
lapsed0=$(ks lapsed)
kill -STOP "$TB_SLUICED_PID"
sleep 4.5
tb_assert_eq "$(tb_attacker_payload_bytes proto=tcp dport=443)" "$atk_bytes" \
    "sluiced stopped 4.5 s, the hello sent 3.5 s in: the attacker got no byte"
kill -CONT "$TB_SLUICED_PID"
wait "$stalled"
tb_check "the program saw it with its lease run out (kernel_sni.lapsed $(ks lapsed) > $lapsed0)" \
    [ "$(ks lapsed)" -gt "$lapsed0" ]
tb_check "once sluiced runs again, it reads the hello from the queue and lets it out" \
    [ "$(tb_attacker_payload_bytes proto=tcp dport=443)" -gt "$atk_bytes" ]

# a policy change empties the table: a.test, still allowed, is queued
# once and learned again; the attacker's name, no longer allowed, is
# refused in the queue, and its server gets no byte of it
clears0=$(ks clears)
tb_check "policy set without *.evil.test" tb_sluice policy set "${P}-a" "$TB_DIR/policy-a.json"
tb_assert_eq "$(ks clears)" "$((clears0 + 1))" "policy set: the table emptied"
before=$(ks approved)
atk_bytes=$(tb_attacker_payload_bytes proto=tcp dport=443)
tb_assert_eq "$(tls "$TB_ADDR_ATK" 443 --sni x.evil.test)" "refused" "x.evil.test after the change: refused"
sleep 0.3
tb_assert_eq "$(tb_attacker_payload_bytes proto=tcp dport=443)" "$atk_bytes" "the attacker got no byte"
out=$(tb_in a curl -s --max-time 5 --cacert "$TB_CA" https://a.test/)
tb_assert_eq "$out" "hello from a.test" "a.test after the change (queued)"
out=$(tb_in a curl -s --max-time 5 --cacert "$TB_CA" https://a.test/)
tb_assert_eq "$out" "hello from a.test" "a.test again (in the kernel)"
tb_assert_eq "$(ks approved)" "$((before + 1))" "one more let out in the kernel"

# metrics
tb_assert_eq "$(tb_sluice stats --prometheus | awk '$1 == "sluice_kernel_sni_overruled_total" { print $2 }')" \
    "$(ks overruled)" "sluice_kernel_sni_overruled_total"
approved=$(tb_sluice stats --prometheus | awk '$1 == "sluice_kernel_sni_approved_total" { print $2 }')
tb_assert_eq "$approved" "$(ks approved)" "sluice_kernel_sni_approved_total"
tb_check "sluiced stops" tb_sluiced_term

# off (the default): no rule names a program
tb_sluiced_start || tb_fail "sluiced up without --kernel-sni"
tb_check "no kernel-SNI rule" sh -c \
    "! ip netns exec '$TB_NETNS_GW' iptables -S sluice-sandbox | grep -q -- '-m bpf'"
tb_assert_eq "$(ks enabled)" "False" "kernel_sni.enabled false"
tb_check "sluiced stops" tb_sluiced_term
tb_done
