#!/bin/bash
# 62-policy-revoke: a `policy set` cuts the open connections the new policy
# refuses and that the old one let start, and only those: from the cut on,
# no byte of theirs reaches the server (the attacker's sniffer, nginx's log),
# the client's next send is reset, and each row ends "revoked" with its
# counters. A connection the new policy still allows goes on.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init policy-revoke
tb_internet_up || { tb_fail "test bed up"; tb_done; }
tb_sluiced_start || { tb_fail "sluiced up"; tb_done; }

cat > "$TB_DIR/p1.json" <<EOF
{"network": {"allowedDomains": ["a.test:443"]},
 "sluice": {"allowedCidrs": ["$TB_ADDR_ATK:4444"]}}
EOF
cat > "$TB_DIR/p2.json" <<EOF
{"network": {"allowedDomains": ["a.test:443"]}}
EOF
cat > "$TB_DIR/p3.json" <<EOF
{"network": {"allowedDomains": ["b.test:443"]}}
EOF
tb_check "sandbox add" tb_sandbox_add a "$TB_DIR/p1.json"
tb_assert_eq "$(tb_in a dig +short a.test)" "$TB_ADDR_HTTPS" "a.test resolves"

# ticker PORT WORD N: to the attacker's PORT, "WORD-i" a line every 0.2 s,
# N lines at most; prints "never cut" or the error that ended it
cat > "$TB_DIR/ticker.py" <<'EOF'
import socket, sys, time
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3)
n = 0
try:
    for _ in range(int(sys.argv[4])):
        s.sendall(b"%s-%d\n" % (sys.argv[3].encode(), n))
        n += 1
        time.sleep(0.2)
    print("never cut")
except OSError as e:
    print("%s after %d lines" % (type(e).__name__, n))
EOF
ticker() { tb_in a "$TB_PY" "$TB_DIR/ticker.py" "$TB_ADDR_ATK" "$@"; }

# two connections kept open: to the attacker (allowed by a CIDR), a line
# every 0.2 s; and to a.test over TLS, one request per flag file
ticker 4444 line 60 > "$TB_DIR/ticker.out" 2>&1 &
ticker=$!
# tlsc NAME TAG: over one TLS connection with SNI NAME, GET /TAG-one, then
# (once TAG-go1 exists) /TAG-two, then (TAG-go2) /TAG-three; prints each
# status line or the error that ended it, to TAG.out; TAG-goN.ready says
# the request before it was answered
cat > "$TB_DIR/tlsc.py" <<'EOF'
import os, socket, ssl, sys, time
addr, ca, d, name, tag = sys.argv[1:6]
ctx = ssl.create_default_context(cafile=ca)
s = ctx.wrap_socket(socket.create_connection((addr, 443), timeout=3),
                    server_hostname=name)
def get(path):
    s.sendall(b"GET /%s HTTP/1.1\r\nHost: %s\r\n\r\n" % (path.encode(), name.encode()))
    got = s.recv(4096).decode(errors="replace")
    if not got:
        raise EOFError("closed")
    return got.split("\r\n", 1)[0]
def wait(flag):
    for _ in range(200):
        if os.path.exists(flag):
            return
        time.sleep(0.05)
for step, flag in (("one", "go1"), ("two", "go2"), ("three", None)):
    try:
        print(step, get(tag + "-" + step), flush=True)
    except (OSError, EOFError) as e:
        print(step, type(e).__name__, flush=True)
        break
    if flag:
        open("%s/%s-%s.ready" % (d, tag, flag), "w").close()
        wait("%s/%s-%s" % (d, tag, flag))
EOF
tlsc() {
	tb_in a "$TB_PY" "$TB_DIR/tlsc.py" "$TB_ADDR_HTTPS" "$TB_CA" "$TB_DIR" "$1" "$2" \
	    > "$TB_DIR/$2.out" 2>&1
}
tlsc a.test t &
tls=$!
ready() { [ -e "$TB_DIR/$1.ready" ]; }
# served TAG: the requests nginx logged of TAG's, "one two three" as seen
served() {
	local r x
	for x in one two three; do
		grep -q "\"GET /$1-$x " "$TB_DIR/nginx.access.log" && r="$r $x"
	done
	echo "${r# }"
}
# late PORT T: packets with payload to PORT the attacker's sniffer saw
# after T (seconds since the epoch, the clock every namespace shares)
late() {
	"$TB_PY" - "$TB_DIR/attacker.packets" "$1" "$2" <<'EOF'
import json, sys
n = 0
for l in open(sys.argv[1]):
    r = json.loads(l)
    if (r.get("dport") == int(sys.argv[2]) and r.get("len", 0) > 0
            and r["ts"] > float(sys.argv[3])):
        n += 1
print(n)
EOF
}
tb_wait_count 0 5 eval 'ready t-go1 && echo 0' >/dev/null
tb_check "the TLS client's first request answered" ready t-go1
sleep 0.6
tb_assert_eq "$(tb_sql "SELECT dst_port, reason FROM flows WHERE dst_port IN (443, 4444)
    AND verdict = 'allow' ORDER BY dst_port")" "443|allowed_domain
4444|allowed_cidr" "both connections have their allow rows"

# a connection to the attacker that has ended (both FINs: its conntrack
# entry lingers in TIME_WAIT) is no open connection to cut
done_port=$(tb_in a "$TB_PY" - "$TB_ADDR_ATK" <<'EOF'
import socket, sys
s = socket.create_connection((sys.argv[1], 4444), timeout=3)
s.sendall(b"done\n")
s.recv(64)
while s.recv(64):
    pass
print(s.getsockname()[1])
s.close()
EOF
)
sleep 0.2

# p2 drops the CIDR: the attacker's connection is cut, a.test's is not
tb_check "policy set p2" tb_sluice policy set "${P}-a" "$TB_DIR/p2.json"
t_cut=$(date +%s.%N)
touch "$TB_DIR/t-go1"
tb_wait_count 0 5 eval 'ready t-go2 && echo 0' >/dev/null
tb_check "the TLS client's second request answered" ready t-go2

# p3 allows b.test only: a.test's connection is cut now (within nginx's
# 5 s keep-alive: a request after it would end for that reason)
tb_check "policy set p3" tb_sluice policy set "${P}-a" "$TB_DIR/p3.json"
touch "$TB_DIR/t-go2"
wait "$tls"
wait "$ticker"
tb_assert_match "$(cat "$TB_DIR/ticker.out")" "^(ConnectionResetError|BrokenPipeError) after [0-9]+ lines$" \
    "the attacker connection: the client's next send after the cut is reset"
# the far side: lines reached the attacker up to the cut, none after it
sleep 1.5
tb_assert_match "$(tb_attacker_received)" "line-2" "the attacker got the lines sent before the cut"
tb_assert_eq "$(late 4444 "$t_cut")" 0 "no byte of it reached the attacker after the policy set"
tb_wait_rows "SELECT count(*) FROM flows WHERE end_state = 'revoked'" 2 >/dev/null
tb_assert_eq "$(tb_sql "SELECT dst_port, verdict, reason, end_state, bytes_out > 0 FROM flows
    WHERE end_state IS NOT NULL AND dst_port = 4444")" \
    "4444|allow|allowed_cidr|revoked|1" "the attacker connection's row ends revoked, with its bytes"
tb_assert_eq "$(tb_sql "SELECT verdict, ifnull(end_state, 'open') FROM flows
    WHERE src_port = $done_port")" "allow|open" \
    "the ended one is not cut (its end comes when conntrack lets it go)"

# (Python's ssl reads the reset as an end of the stream)
tb_assert_match "$(cat "$TB_DIR/t.out" | tr '\n' ' ')" \
    "^one HTTP/1.1 200 OK two HTTP/1.1 200 OK three (ConnectionResetError|EOFError) $" \
    "a.test: served under p1 and p2, reset under p3"
sleep 0.3
tb_assert_eq "$(served t)" "one two" "nginx served one and two, never saw three"
# (by port: which of the two connections got its row first is the
# clients' race, not the cut's)
tb_assert_eq "$(tb_sql "SELECT dst_port, reason, end_state FROM flows
    WHERE end_state = 'revoked' ORDER BY dst_port DESC")" \
    "4444|allowed_cidr|revoked
443|allowed_domain|revoked" "both rows end revoked"
tb_assert_eq "$(tb_status revoked)" 2 "sluice status counts two"
tb_assert_match "$(tb_sluice stats --prometheus)" "sluice_revoked_connections_total 2" "and the metric"
tb_assert_match "$(cat "$TB_DIR/sluiced.log")" "1 connection the new policy refuses cut" "sluiced's log says so"

# a policy set that takes nothing away cuts nothing
tb_check "policy set p3 again" tb_sluice policy set "${P}-a" "$TB_DIR/p3.json"
tb_assert_eq "$(tb_status revoked)" 2 "nothing more cut"

# one address, two names (a CDN's): a.test and b.test both resolve to
# it, so with a.test still allowed a SYN to it would pass; the connection
# that presented b.test is judged by that name, read back from its row
cat > "$TB_DIR/p4.json" <<EOF
{"network": {"allowedDomains": ["a.test:443", "b.test:443"]}}
EOF
cat > "$TB_DIR/p5.json" <<EOF
{"network": {"allowedDomains": ["a.test:443"]}}
EOF
tb_check "policy set p4" tb_sluice policy set "${P}-a" "$TB_DIR/p4.json"
tb_assert_eq "$(tb_in a dig +short a.test) $(tb_in a dig +short b.test)" \
    "$TB_ADDR_HTTPS $TB_ADDR_HTTPS" "a.test and b.test resolve to one address"
id0=$(tb_sql "SELECT coalesce(max(id), 0) FROM flows")
tlsc b.test sb &
sb_pid=$!
tlsc a.test sa &
sa_pid=$!
tb_wait_count 0 5 eval 'ready sb-go1 && ready sa-go1 && echo 0' >/dev/null
tb_check "both answered under p4" eval 'ready sb-go1 && ready sa-go1'
r0=$(tb_status revoked)
tb_check "policy set p5 (a.test only)" tb_sluice policy set "${P}-a" "$TB_DIR/p5.json"
touch "$TB_DIR/sb-go1" "$TB_DIR/sa-go1"
tb_wait_count 0 5 eval 'ready sa-go2 && echo 0' >/dev/null
touch "$TB_DIR/sb-go2" "$TB_DIR/sa-go2"
wait "$sb_pid" "$sa_pid"
tb_assert_match "$(tr '\n' ' ' < "$TB_DIR/sb.out")" "^one HTTP/1.1 200 OK two (ConnectionResetError|EOFError) $" \
    "b.test's connection: reset at its next request after p5"
tb_assert_eq "$(tr '\n' ' ' < "$TB_DIR/sa.out")" "one HTTP/1.1 200 OK two HTTP/1.1 200 OK three HTTP/1.1 200 OK " \
    "a.test's connection, on the same address: served on"
sleep 0.3
tb_assert_eq "$(served sb)/$(served sa)" "one/one two three" "nginx saw nothing of b.test's after the cut"
tb_assert_eq "$(( $(tb_status revoked) - r0 ))" 1 "one cut"
tb_wait_rows "SELECT count(*) FROM flows WHERE sni = 'b.test' AND end_state = 'revoked'" 1 >/dev/null
tb_assert_eq "$(tb_sql "SELECT sni, ifnull(end_state, 'open') FROM flows
    WHERE sni IN ('a.test', 'b.test') AND id > $id0 ORDER BY sni")" "a.test|open
b.test|revoked" "b.test's row ends revoked, a.test's is open"

# audit mode lets a refused connection through; the switch to enforce
# cuts it (the old policy let it start, the new one refuses it)
cat > "$TB_DIR/audit.json" <<EOF
{"network": {"allowedDomains": ["b.test:443"]}, "sluice": {"mode": "audit"}}
EOF
tb_check "policy set audit" tb_sluice policy set "${P}-a" "$TB_DIR/audit.json"
ticker 5555 audited 40 > "$TB_DIR/audit.out" 2>&1 &
audited=$!
sleep 0.8
tb_check "policy set enforce" tb_sluice policy set "${P}-a" "$TB_DIR/p3.json"
t_cut=$(date +%s.%N)
wait "$audited"
tb_assert_match "$(cat "$TB_DIR/audit.out")" "^(ConnectionResetError|BrokenPipeError) after [0-9]+ lines$" \
    "the audited connection is reset after the switch to enforce"
sleep 0.3
tb_assert_eq "$(late 5555 "$t_cut")" 0 "no byte of it reached the attacker after the switch"
tb_assert_eq "$(tb_sql "SELECT dst_port, verdict, reason, end_state FROM flows
    WHERE dst_port = 5555")" "5555|audit|no_dns_binding|revoked" "its row: audit, ended revoked"
tb_assert_eq "$(tb_status revoked)" 4 "four cut in all"
tb_check "sluiced is still running" kill -0 "$TB_SLUICED_PID"
tb_done
