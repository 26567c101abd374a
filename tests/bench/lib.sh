# lib.sh: the benchmark's topology and its measurements, on top of tests/lib/testbed.sh.
#
# Sourced by tests/bench/run.sh (bash). Every configuration is the same
# chain of veth pairs through three namespaces: a client, a gateway, and
# the simulated internet ${P}-inet, which they all share:
#
#   B0  ${P}-c0 10.214.0.2 ── ${P}-g0 (forwarding, no rules) ── 198.18.0.2 ─┐
#   B1  ${P}-c1 10.214.1.2 ── ${P}-g1 (conntrack: established-accept,      │
#                             NEW from the client, MASQUERADE) 198.18.0.6 ─┤
#       D   dnsmasq on ${P}-g1 10.214.1.1:53, no cache (forwards each query)│
#       Dc  dnsmasq on ${P}-g1 10.214.1.1:5300, its default cache           ├─ ${P}-inet
#       Dl  dnsmasq on ${P}-g1 10.214.1.1:5301, Dc logging every query     │
#   P   ${P}-c2 10.214.2.2 ── ${P}-g2 (B1's rules; tinyproxy on           │
#                             10.214.2.1:8888, explicit proxy) 198.18.0.10 ─┤
#       Q   squid on ${P}-g2 10.214.2.1:3128, explicit proxy, no cache     │
#   S   ${P}-s1 10.213.0.2 ── ${P}-gw (sluiced, a sandbox) ── 198.51.100.2 ┘
#
#   ${P}-inet: 192.0.2.10 nginx (2 workers, no access log): TLS a.test :443,
#              HTTP :80 (also on 192.0.2.11-13, the fill's); 192.0.2.30
#              iperf3 :5201; 198.51.100.53 dnsmasq, authoritative for
#              a.test, n1..n3.fill.test and *.w0.bench.example (the
#              upstream of sluiced, D, Dc).
#
# B0 needs the internet to route 10.214.0.0/30 back (no NAT); the others
# NAT to their uplink address like sluiced does. Each configuration has an
# uplink address of its own: connections to one server from two sources
# behind one address (B1's NAT and the proxy's own, say) reuse each
# other's 4-tuples with unrelated TCP timestamps, and the server's
# TIME_WAIT sockets drop those SYNs: 1 s retransmissions that would be
# the bed's cost, not the configuration's.

BENCH_LIB=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$BENCH_LIB/../lib/testbed.sh"

BN_HTTPS=192.0.2.10
BN_IPERF=192.0.2.30
BN_DNS=198.51.100.53
BN_NAME=a.test
# Answered for any name under it, at a.test's address: the DNS load's names.
BN_WILD=w0.bench.example
# Three more HTTP addresses, n1.fill.test..n3.fill.test: with a.test's,
# enough distinct tuples for 100,000 tracked connections (run.sh's fill).
BN_FILL_ADDRS="192.0.2.11 192.0.2.12 192.0.2.13"
BN_PROXY_PORT=8888
BN_SQUID_PORT=3128
BN_DC_PORT=5300
BN_DL_PORT=5301

# The fill names' host records, for the authoritative dnsmasq.
_bn_fill_records() {
	local a i=1
	for a in $BN_FILL_ADDRS; do
		printf -- '--host-record=n%d.fill.test,%s ' "$i" "$a"
		i=$((i + 1))
	done
}

# _bn_ns NAME: a namespace with lo up, no IPv6, client ports from 1024 so
# that a few seconds of connections never reuse a 4-tuple.
_bn_ns() {
	_tb_ns "$1" || return 1
	ip netns exec "$1" sysctl -qw net.ipv4.ip_local_port_range="1024 65535"
}

# _bn_gateway N: client ${P}-cN and gateway ${P}-gN, as in the picture.
_bn_gateway() {
	local n=$1 c="${P}-c$1" g="${P}-g$1" inet=$TB_NETNS_INET
	local up_inet="198.18.0.$((n * 4 + 1))" up_gw="198.18.0.$((n * 4 + 2))"
	_bn_ns "$c" || return 1
	_bn_ns "$g" || return 1
	ip -n "$g" link add cli type veth peer name eth0 netns "$c" || return 1
	ip -n "$g" addr add "10.214.$n.1/30" dev cli
	ip -n "$g" link set cli up
	ip -n "$c" addr add "10.214.$n.2/30" dev eth0
	ip -n "$c" link set eth0 up
	ip -n "$c" route add default via "10.214.$n.1"
	ip -n "$g" link add uplink type veth peer name "b${n}up" netns "$inet" ||
	    return 1
	ip -n "$g" addr add "$up_gw/30" dev uplink
	ip -n "$g" link set uplink up
	ip -n "$inet" addr add "$up_inet/30" dev "b${n}up"
	ip -n "$inet" link set "b${n}up" up
	ip -n "$g" route add default via "$up_inet"
	ip netns exec "$g" sysctl -qw net.ipv4.ip_forward=1
}

_bn_nginx_conf() {
	local t=$TB_DIR/tls
	mkdir -p "$TB_DIR/nginx/tmp"
	cat > "$TB_DIR/nginx/nginx.conf" <<EOF
daemon off;
master_process on;
user root;
worker_processes 2;
worker_rlimit_nofile 16384;
pid $TB_DIR/nginx.pid;
error_log $TB_DIR/nginx.error.log crit;
events { worker_connections 8192; }
http {
	default_type text/plain;
	client_body_temp_path $TB_DIR/nginx/tmp/body;
	proxy_temp_path $TB_DIR/nginx/tmp/proxy;
	fastcgi_temp_path $TB_DIR/nginx/tmp/fastcgi;
	uwsgi_temp_path $TB_DIR/nginx/tmp/uwsgi;
	scgi_temp_path $TB_DIR/nginx/tmp/scgi;
	access_log off;
	keepalive_timeout 5;
	ssl_session_cache off;
	ssl_session_tickets off;
	server {
		listen $BN_HTTPS:443 ssl backlog=4096;
		server_name $BN_NAME;
		ssl_certificate $t/a.test.pem;
		ssl_certificate_key $t/a.test.key;
		location / { return 200 "hello from a.test\n"; }
	}
	server {
		listen $BN_HTTPS:80 backlog=4096;
$(for a in $BN_FILL_ADDRS; do printf '\t\tlisten %s:80;\n' "$a"; done)
		server_name _;
		location / { return 200 "hello from \$host on port 80\n"; }
	}
}
EOF
}

_bn_tls_answers() {
	local out
	out=$(ip netns exec "$TB_NETNS_INET" curl -s --max-time 2 \
	    --cacert "$TB_CA" --resolve "$BN_NAME:443:$BN_HTTPS" \
	    "https://$BN_NAME/") || return 1
	[ "$out" = "hello from a.test" ]
}

# _bn_dns_answers NS SERVER [PORT [NAME ADDR]]: SERVER answers NAME (a.test)
# with ADDR (a.test's) alone, asked from NS.
_bn_dns_answers() {
	local out
	out=$(ip netns exec "$1" dig +short +time=1 +tries=1 -p "${3:-53}" \
	    @"$2" "${4:-$BN_NAME}" A 2>/dev/null) || return 1
	[ "$out" = "${5:-$BN_HTTPS}" ]
}

# _bn_stateful NS: B1's ruleset: conntrack with established-accept, new
# connections from the client side, NAT to the uplink address.
_bn_stateful() {
	ip netns exec "$1" iptables-restore <<'EOF'
*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
-A POSTROUTING -o uplink -j MASQUERADE
COMMIT
*filter
:INPUT ACCEPT [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
-A FORWARD -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT
-A FORWARD -i cli -m conntrack --ctstate NEW -j ACCEPT
COMMIT
EOF
}

# bn_bed_up: the internet, the B0, B1 and P chains, tinyproxy, the two
# dnsmasq on B1's gateway, and the ClientHello every TLS client sends.
bn_bed_up() {
	local -
	set +e
	local inet=$TB_NETNS_INET g1="${P}-g1" g2="${P}-g2" a ns
	_bn_ns "$inet" || return 1
	ip netns exec "$inet" sysctl -qw net.ipv4.ip_forward=1
	for a in $BN_HTTPS $BN_IPERF $BN_DNS $BN_FILL_ADDRS; do
		ip -n "$inet" addr add "$a/32" dev lo || return 1
	done
	_tb_make_tls || return 1
	_bn_nginx_conf
	_tb_bg "$inet" nginx "$TB_DIR/nginx.out" nginx -p "$TB_DIR/nginx" \
	    -e "$TB_DIR/nginx.error.log" -c "$TB_DIR/nginx/nginx.conf"
	_tb_bg "$inet" dns-auth "$TB_DIR/dns-auth.out" dnsmasq \
	    --keep-in-foreground --conf-file=/dev/null --user=root --group=root \
	    --pid-file="$TB_DIR/dns-auth.pid" --bind-interfaces \
	    --listen-address="$BN_DNS" --no-resolv --no-hosts --no-poll \
	    --cache-size=0 --local-ttl=600 --dns-forward-max=1000 \
	    --host-record="$BN_NAME,$BN_HTTPS" $(_bn_fill_records) \
	    --address="/$BN_WILD/$BN_HTTPS" --address=/#/
	_tb_bg "$inet" iperf3 "$TB_DIR/iperf3.out" iperf3 -s -B "$BN_IPERF" -p 5201

	_bn_gateway 0 || return 1
	ip -n "$inet" route add 10.214.0.0/30 via 198.18.0.2
	_bn_gateway 1 || return 1
	_bn_gateway 2 || return 1
	_bn_stateful "$g1" || return 1
	_bn_stateful "$g2" || return 1
	# P's and Q's clients and proxies make new connections to the same
	# server at thousands a second, and each closes first: TIME_WAIT
	# sockets pile up on their side. A wide port range and TIME_WAIT
	# reuse for outgoing connections keep that from running out of ports
	# (1 s stalls for both proxies, seen when Q was added).
	for ns in "${P}-c2" "$g2"; do
		ip netns exec "$ns" sysctl -qw net.ipv4.tcp_tw_reuse=1 \
		    net.ipv4.ip_local_port_range="1024 65535"
	done

	# P: tinyproxy on the gateway. It finds a.test in the namespace's
	# hosts file, so a proxied connection costs it no DNS query (in its
	# favour: sluice's clients resolve once, then connect many times).
	mkdir -p "/etc/netns/$g2"
	printf '127.0.0.1 localhost\n%s %s\n' "$BN_HTTPS" "$BN_NAME" \
	    > "/etc/netns/$g2/hosts"
	cat > "$TB_DIR/tinyproxy.conf" <<EOF
User root
Group root
Port $BN_PROXY_PORT
Listen 10.214.2.1
Timeout 30
MaxClients 2048
LogLevel Critical
PidFile "$TB_DIR/tinyproxy.pid"
DisableViaHeader Yes
Allow 10.214.2.0/30
ConnectPort 443
EOF
	_tb_bg "$g2" tinyproxy "$TB_DIR/tinyproxy.out" tinyproxy -d \
	    -c "$TB_DIR/tinyproxy.conf"
	# Q: squid beside it, as a user would set it up for CONNECT and
	# plain HTTP: no cache, no logs, the same hosts file. Its own
	# resolver would ask the bed's authoritative server, if anything.
	printf 'nameserver %s\n' "$BN_DNS" > "/etc/netns/$g2/resolv.conf"
	cat > "$TB_DIR/squid.conf" <<EOF
http_port 10.214.2.1:$BN_SQUID_PORT
acl SSL_ports port 443
acl CONNECT method CONNECT
http_access deny CONNECT !SSL_ports
http_access allow all
cache deny all
cache_mem 8 MB
access_log none
cache_store_log none
cache_log /dev/null
pid_filename none
hosts_file /etc/hosts
dns_nameservers $BN_DNS
via off
forwarded_for delete
shutdown_lifetime 0 seconds
max_filedescriptors 16384
EOF
	_tb_bg "$g2" squid "$TB_DIR/squid.out" squid -N -d 1 \
	    -f "$TB_DIR/squid.conf"
	BN_SQUID_PID=$TB_LAST_PID
	# D: what a user would put on a gateway instead; without a cache, so
	# that it forwards every query as sluiced does. Dc: its defaults.
	_tb_bg "$g1" dnsmasq-D "$TB_DIR/dnsmasq-D.out" dnsmasq \
	    --keep-in-foreground --conf-file=/dev/null --user=root --group=root \
	    --pid-file="$TB_DIR/dnsmasq-D.pid" --bind-interfaces \
	    --listen-address=10.214.1.1 --no-resolv --no-hosts --no-poll \
	    --server="$BN_DNS" --cache-size=0 --dns-forward-max=1000
	BN_D_PID=$TB_LAST_PID
	_tb_bg "$g1" dnsmasq-Dc "$TB_DIR/dnsmasq-Dc.out" dnsmasq \
	    --keep-in-foreground --conf-file=/dev/null --user=root --group=root \
	    --pid-file="$TB_DIR/dnsmasq-Dc.pid" --bind-interfaces \
	    --listen-address=10.214.1.1 --port="$BN_DC_PORT" --no-resolv \
	    --no-hosts --no-poll --server="$BN_DNS"
	BN_DC_PID=$TB_LAST_PID
	# Dl: Dc with a line per query in a file, the nearest dnsmasq comes to
	# sluice's row per query (not in the targets: the issue's D is Dc)
	_tb_bg "$g1" dnsmasq-Dl "$TB_DIR/dnsmasq-Dl.out" dnsmasq \
	    --keep-in-foreground --conf-file=/dev/null --user=root --group=root \
	    --pid-file="$TB_DIR/dnsmasq-Dl.pid" --bind-interfaces \
	    --listen-address=10.214.1.1 --port="$BN_DL_PORT" --no-resolv \
	    --no-hosts --no-poll --server="$BN_DNS" --log-queries \
	    --log-facility="$TB_DIR/dnsmasq-Dl.log"
	BN_DL_PID=$TB_LAST_PID

	"$TB_PY" - "$TB_DIR/hello.bin" "$BN_NAME" <<'EOF' || return 1
import ssl, sys
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
ctx.set_alpn_protocols(["http/1.1"])
inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
obj = ctx.wrap_bio(inc, out, server_hostname=sys.argv[2])
try:
    obj.do_handshake()
except ssl.SSLWantReadError:
    pass
open(sys.argv[1], "wb").write(out.read())
EOF

	_tb_wait_for "nginx" "$TB_DIR/nginx.out $TB_DIR/nginx.error.log" \
	    _bn_tls_answers || return 1
	_tb_wait_for "authoritative dnsmasq" "$TB_DIR/dns-auth.out" \
	    _bn_dns_answers "$inet" "$BN_DNS" || return 1
	_tb_wait_for "dnsmasq D" "$TB_DIR/dnsmasq-D.out" \
	    _bn_dns_answers "${P}-c1" 10.214.1.1 || return 1
	_tb_wait_for "dnsmasq Dc" "$TB_DIR/dnsmasq-Dc.out" \
	    _bn_dns_answers "${P}-c1" 10.214.1.1 "$BN_DC_PORT" || return 1
	_tb_wait_for "dnsmasq Dl" "$TB_DIR/dnsmasq-Dl.out" \
	    _bn_dns_answers "${P}-c1" 10.214.1.1 "$BN_DL_PORT" || return 1
	_tb_wait_for "tinyproxy" "$TB_DIR/tinyproxy.out" ip netns exec "${P}-c2" \
	    curl -s --max-time 2 -o /dev/null -p -x "10.214.2.1:$BN_PROXY_PORT" \
	    --cacert "$TB_CA" "https://$BN_NAME/" || return 1
	_tb_wait_for "squid" "$TB_DIR/squid.out" ip netns exec "${P}-c2" \
	    curl -s --max-time 2 -o /dev/null -p -x "10.214.2.1:$BN_SQUID_PORT" \
	    --cacert "$TB_CA" "https://$BN_NAME/" || return 1
	_tb_wait_for "iperf3" "$TB_DIR/iperf3.out" ip netns exec "${P}-c0" \
	    nc -z -w 1 "$BN_IPERF" 5201 || return 1
	_tb_wait_for "B0 forwarding" "" ip netns exec "${P}-c0" \
	    curl -s --max-time 2 -o /dev/null "http://$BN_HTTPS/" || return 1
	return 0
}

# bn_sluice_up POLICY: sluiced on ${P}-gw (per-sandbox bounds off) and
# sandbox ${P}-s1, with a.test resolved through it.
bn_sluice_up() {
	local -
	set +e
	# the per-sandbox bounds off: one sandbox carries the whole load here,
	# and the bench measures the engine, not a default of 2,000 flows/s
	# BENCH_SLUICED_ARGS: more flags, to measure one against another
	# shellcheck disable=SC2086
	tb_sluiced_start --limit-conn-rate 0 --limit-dns-rate 0 --limit-holds 0 \
	    ${BENCH_SLUICED_ARGS:-} || return 1
	BN_SLUICED_PID=$TB_SLUICED_PID
	tb_sluice sandbox add "${P}-s1" --policy "$1" >/dev/null || return 1
	ip netns exec "${P}-s1" sysctl -qw net.ipv4.ip_local_port_range="1024 65535"
	BN_S_GW=$(tb_sluice sandbox list -j | "$TB_PY" -c '
import json, sys
d = json.load(sys.stdin)
for s in d if isinstance(d, list) else d.get("sandboxes", []):
    if s["name"] == sys.argv[1]:
        print(s["gateway"])' "${P}-s1")
	[ -n "$BN_S_GW" ] || { echo "bench: no gateway address for ${P}-s1" >&2; return 1; }
	bn_resolve_s
}

# bn_sluice_up_env [VAR=VALUE...]: bn_sluice_up with $TB_DIR/policy.json
# and these in sluiced's environment (unset in this shell afterwards);
# fails unless sluiced's environment has each.
bn_sluice_up_env() {
	local x rc

	for x in "$@"; do export "${x?}"; done
	bn_sluice_up "$TB_DIR/policy.json"
	rc=$?
	for x in "$@"; do unset "${x%%=*}"; done
	((rc == 0)) || return 1
	for x in "$@"; do
		tr '\0' '\n' < "/proc/$TB_SLUICED_PID/environ" | grep -qxF -- "$x" ||
		    { echo "bench: sluiced's environment lacks $x" >&2; return 1; }
	done
}

# bn_repro_up NAME: the bed of a script in tests/bench/repro: tb_init NAME,
# an exit trap that runs the script's cleanup_wt (its git worktrees) and
# then the bed's own teardown, the bed, and $TB_DIR/policy.json, a policy
# allowing a.test. Exits the script when the bed does not come up.
bn_repro_up() {
	tb_init "$1"
	trap _bn_repro_exit EXIT
	bn_bed_up || { echo "$1: bed up failed" >&2; exit 1; }
	bn_policy_names "$TB_DIR/policy.json" "$BN_NAME"
}

# bn_policy_names FILE NAME...: a policy allowing these names, in FILE.
bn_policy_names() {
	"$TB_PY" - "$@" <<'EOF'
import json, sys
json.dump({"network": {"allowedDomains": sys.argv[2:]}},
          open(sys.argv[1], "w"))
EOF
}

_bn_repro_exit() {
	local rc=$?

	cleanup_wt
	(exit "$rc")
	_tb_on_exit
}

# bn_load CFG MODE CONC SECS [RATE]: one load (MODE tls or http, to
# a.test) from CFG's client with connbench ($CONNBENCH), closed-loop or at
# RATE connections/s; its output in $TB_DIR/cb.out, its status returned.
bn_load() {
	local port=443
	local -a rate=()

	[ "$2" = http ] && port=80
	[ -n "${5:-}" ] && rate=(-r "$5")
	ip netns exec "$(bn_client_ns "$1")" "$CONNBENCH" -m "$2" \
	    -a "$BN_HTTPS" -p "$port" -n "$BN_NAME" -H "$TB_DIR/hello.bin" \
	    -c "$3" -d "$4" -t 3000 "${rate[@]}" > "$TB_DIR/cb.out" 2>&1
}

# bn_rate CFG MODE CONC SECS: a closed-loop bn_load; prints its
# connections/s, nothing when it failed.
bn_rate() {
	bn_load "$@" &&
	    sed -n 's/.*"rate": \([0-9.]*\).*/\1/p' "$TB_DIR/cb.out"
}

# bn_lat CFG MODE CONC SECS RATE: a bn_load at RATE connections/s; prints
# its setup latency's p50 and p99 (µs), nothing when it failed or had an
# error.
bn_lat() {
	bn_load "$@" && "$TB_PY" -c 'import json, sys
o = json.load(open(sys.argv[1]))
if o["errors"] == 0 and o["ok"] > 0:
    print(o["lat_p50_us"], o["lat_p99_us"])' "$TB_DIR/cb.out"
}

# bn_dns_queries FILE: the DNS load's queries, a.test and 99 names under
# $BN_WILD: the authoritative server answers them all, and every
# resolver's cache holds them all (dnsmasq's default is 150). An S policy
# must allow *.$BN_WILD for them.
bn_dns_queries() {
	local i
	{
		printf '%s A\n' "$BN_NAME"
		for ((i = 1; i < 100; i++)); do
			printf 'n%d.%s A\n' "$i" "$BN_WILD"
		done
	} > "$1"
}

# bn_dns_pid CFG: the pid of S's, D's, Dc's or Dl's DNS server.
bn_dns_pid() {
	case $1 in
	S) echo "$BN_SLUICED_PID" ;;
	D) echo "$BN_D_PID" ;;
	Dc) echo "$BN_DC_PID" ;;
	Dl) echo "$BN_DL_PID" ;;
	*) return 1 ;;
	esac
}

# bn_dnsperf CFG SECS OUT: the DNS load, dnsperf with 4 clients and 100
# queries in flight (the queries of bn_dns_queries in
# $TB_DIR/queries.txt), for SECS from CFG's client against its server
# (S's resolver, D, Dc or Dl); its output in OUT, its status returned.
bn_dnsperf() {
	local srv=10.214.1.1 port=53

	case $1 in
	S) srv=$BN_S_GW ;;
	D) ;;
	Dc) port=$BN_DC_PORT ;;
	Dl) port=$BN_DL_PORT ;;
	*) return 1 ;;
	esac
	ip netns exec "$(bn_client_ns "$1")" timeout $((${2%.*} + 10)) \
	    dnsperf -s "$srv" -p "$port" -d "$TB_DIR/queries.txt" -l "$2" \
	    -c 4 -q 100 -t 2 > "$3" 2>&1
}

# bn_dnsq CFG SECS: a bn_dnsperf load; prints "QPS CPU" (CPU: the
# server's, every thread of it, in µs a query answered), nothing when it
# failed.
bn_dnsq() {
	local pid c0 c1

	pid=$(bn_dns_pid "$1") || return 1
	c0=$(bn_cpu_ns "$pid")
	bn_dnsperf "$1" "$2" "$TB_DIR/dnsq.out" || return 1
	c1=$(bn_cpu_ns "$pid")
	awk -v cpu=$((c1 - c0)) '
	    /Queries completed:/ { done = $3 }
	    /Queries per second:/ { qps = $4 }
	    END { if (done > 0) printf "%s %.3f\n", qps, cpu / 1000 / done }' \
	    "$TB_DIR/dnsq.out"
}

# bn_pairs LABEL N MODE CONC SECS FILE [RATE]: N pairs of loads under B1
# and under S, which goes first alternating (as in run.sh), s1's binding
# refreshed before each pair. Without RATE, closed-loop bn_rate loads,
# and "LABEL B1-RATE S-RATE" a pair is appended to FILE (0 for a load
# that failed); with it, bn_lat loads, and "LABEL B1-P50 B1-P99 S-P50
# S-P99" (a pair with a failed load is left out). MODE dns: bn_dnsq
# loads under Dc and S (CONC and RATE unused), and "LABEL Dc-CPU S-CPU
# Dc-QPS S-QPS" (0 for a load that failed).
bn_pairs() {
	local i b s bq bc sq sc f=bn_rate

	[ -n "${7:-}" ] && f=bn_lat
	if [ "$3" = dns ]; then
		for ((i = 0; i < $2; i++)); do
			if ((i % 2)); then
				s=$(bn_dnsq S "$5") b=$(bn_dnsq Dc "$5")
			else
				b=$(bn_dnsq Dc "$5") s=$(bn_dnsq S "$5")
			fi
			read -r bq bc <<< "${b:-0 0}"
			read -r sq sc <<< "${s:-0 0}"
			echo "$1 $bc $sc $bq $sq" >> "$6"
		done
		return
	fi
	for ((i = 0; i < $2; i++)); do
		# shellcheck disable=SC2119 # a.test, its default
		bn_resolve_s >/dev/null 2>&1
		if ((i % 2)); then
			s=$($f S "$3" "$4" "$5" ${7:+"$7"})
			b=$($f B1 "$3" "$4" "$5" ${7:+"$7"})
		else
			b=$($f B1 "$3" "$4" "$5" ${7:+"$7"})
			s=$($f S "$3" "$4" "$5" ${7:+"$7"})
		fi
		if [ -z "${7:-}" ]; then
			echo "$1 ${b:-0} ${s:-0}" >> "$6"
		elif [ -n "$b" ] && [ -n "$s" ]; then
			echo "$1 $b $s" >> "$6"
		fi
	done
}

# bn_resolve_s: makes (or refreshes) s1's binding of a.test.
bn_resolve_s() {
	_bn_dns_answers "${P}-s1" "$BN_S_GW" 53 "${1:-$BN_NAME}" "${2:-$BN_HTTPS}"
}

# The client namespace of a configuration.
bn_client_ns() {
	case $1 in
	B0) echo "${P}-c0" ;;
	B1|D|Dc|Dl) echo "${P}-c1" ;;
	P|Q) echo "${P}-c2" ;;
	S) echo "${P}-s1" ;;
	esac
}

# bn_cpu_ns PID: CPU time of every thread of PID, in nanoseconds.
bn_cpu_ns() {
	local t sum=0 v
	for t in /proc/"$1"/task/*/schedstat; do
		read -r v _ < "$t" 2>/dev/null || continue
		sum=$((sum + v))
	done
	echo "$sum"
}

# bn_rss PID: "VmRSS VmHWM" in KiB.
bn_rss() {
	awk '/^VmRSS:/ { r = $2 } /^VmHWM:/ { h = $2 } END { print r + 0, h + 0 }' \
	    /proc/"$1"/status
}

# bn_queue_drops: "queue_dropped user_dropped" of the gateway's queues.
bn_queue_drops() {
	ip netns exec "$TB_NETNS_GW" cat /proc/net/netfilter/nfnetlink_queue \
	    2>/dev/null | awk '{ q += $6; u += $7 } END { print q + 0, u + 0 }'
}

bn_ct_count() {
	ip netns exec "$1" cat /proc/sys/net/netfilter/nf_conntrack_count \
	    2>/dev/null || echo 0
}

# bn_status: `sluice status -j` of the bed's daemon.
bn_status() {
	tb_sluice status -j 2>/dev/null
}
