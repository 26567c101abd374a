# testbed.sh: the simulated internet, sluiced's lifecycle and assertions for scenario tests.
#
# Sourced by bash scripts (tests/scenarios/*.sh, tests/demo.sh); needs bash.
# Every name it creates starts with a per-run prefix P ("sl" + 6 hex), so
# runs in parallel do not collide and tb_down can find all of it:
#
#   ${P}-inet  router and servers        ${P}-atk  the attacker host
#   ${P}-gw    sluiced's gateway         ${P}-a, ${P}-b ...  sandboxes
#
#   ${P}-inet: lo  192.0.2.10    nginx: HTTPS a.test, b.test (by SNI) :443,
#                                       HTTP :80 (answers with the Host)
#                  192.0.2.20    nginx: HTTP plain.test :80
#                  198.51.100.7  "db\n" on TCP 5432
#                  198.51.100.53 dnsmasq, authoritative for the test names
#              atk0 203.0.113.1/24 ──veth── eth0 203.0.113.66/24 in ${P}-atk
#              (sluiced adds its uplink here: 198.51.100.1/30 <-> .2/30)
#
# Whatever a function starts is recorded in $TB_DIR/pids and stopped by
# tb_down, which also runs on EXIT/INT/TERM/HUP.

TB_LIB=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$TB_LIB/../.." && pwd)
SLUICED=${SLUICED:-$REPO/build/sluiced}
SLUICE=${SLUICE:-$REPO/build/sluice}
# The system interpreter: a user's pyenv or venv shim may not see root's
# environment inside `ip netns exec`.
if [ -x /usr/bin/python3 ]; then TB_PY=/usr/bin/python3; else TB_PY=python3; fi

TB_ADDR_HTTPS=192.0.2.10	# a.test, b.test on :443; HTTP on :80
TB_ADDR_PLAIN=192.0.2.20	# plain.test on :80
TB_ADDR_DB=198.51.100.7		# "db\n" on :5432
TB_PORT_DB=5432
TB_ADDR_DNS=198.51.100.53
TB_ADDR_ATK=203.0.113.66
TB_ADDR_ATK_GW=203.0.113.1
TB_UPLINK_ADDR=198.51.100.2/30
TB_UPLINK_PEER_ADDR=198.51.100.1/30
TB_POOL=10.213.0.0/16
TB_ATK_PORT=10999		# every port on the attacker is redirected here
TB_BIG_BYTES=1048576		# http://plain.test/big.bin
TB_DNS_TTL=${TB_DNS_TTL:-60}
TB_WAIT_S=${TB_WAIT_S:-5}	# how long a service may take to answer
export REPO SLUICED SLUICE TB_PY TB_ADDR_HTTPS TB_ADDR_PLAIN TB_ADDR_DB \
    TB_PORT_DB TB_ADDR_DNS TB_ADDR_ATK TB_ADDR_ATK_GW TB_UPLINK_ADDR \
    TB_UPLINK_PEER_ADDR TB_POOL TB_ATK_PORT

TB_FAILED=0
TB_NPASS=0
TB_NFAIL=0
TB_FINISHED=0
TB_DOWN_DONE=0

# ---------------------------------------------------------------- set-up

# tb_init NAME: picks the prefix, makes TB_DIR, installs the cleanup traps.
tb_init() {
	TB_NAME=${1:?tb_init: name}
	local rnd
	rnd=$(od -An -N2 -tx1 /dev/urandom | tr -d ' \n')
	P=$(printf 'sl%02x%s' $(( $$ & 0xff )) "$rnd")
	TB_NETNS_INET="${P}-inet"
	TB_NETNS_ATK="${P}-atk"
	TB_NETNS_GW="${P}-gw"
	TB_DIR=$(mktemp -d /tmp/sluice-test.XXXXXX) || return 1
	TB_CA=$TB_DIR/tls/ca.pem
	TB_SLUICED_PID=
	TB_DOWN_DONE=0
	echo "$P" > "$TB_DIR/prefix"
	: > "$TB_DIR/pids"
	# A runner that may have to clean up after a killed scenario learns
	# where to look.
	if [ -n "${TB_STATE_FILE:-}" ]; then
		printf '%s %s\n' "$P" "$TB_DIR" >> "$TB_STATE_FILE"
	fi
	export TB_NAME P TB_NETNS_INET TB_NETNS_ATK TB_NETNS_GW TB_DIR TB_CA
	trap _tb_on_exit EXIT
	trap '_tb_on_signal 130' INT
	trap '_tb_on_signal 143' TERM
	trap '_tb_on_signal 129' HUP
}

# tb_adopt P DIR: takes over a run's state (for cleaning up after it).
tb_adopt() {
	P=$1
	TB_DIR=$2
	TB_NETNS_INET="${P}-inet"
	TB_NETNS_ATK="${P}-atk"
	TB_NETNS_GW="${P}-gw"
	TB_DOWN_DONE=0
	TB_SLUICED_PID=
	[ -r "$TB_DIR/sluiced.pid" ] && TB_SLUICED_PID=$(cat "$TB_DIR/sluiced.pid")
	return 0
}

_tb_on_exit() {
	local rc=$?
	trap - EXIT
	if [ "$TB_FINISHED" = 0 ] && [ -n "${TB_NAME:-}" ]; then
		echo "FAIL $TB_NAME (ended early, status $rc)"
		[ "$rc" = 0 ] && rc=1
	fi
	tb_down
	exit "$rc"
}

_tb_on_signal() {
	trap - INT TERM HUP
	echo "testbed: interrupted, tearing down" >&2
	exit "$1"	# the EXIT trap tears down
}

# _tb_record PID WHAT: remembers a process the bed started.
_tb_record() {
	echo "$1 $2" >> "$TB_DIR/pids"
}

# _tb_bg NS WHAT LOG CMD...: starts CMD in namespace NS in the background,
# output to LOG; the pid is that of CMD itself (ip netns exec execs it).
_tb_bg() {
	local ns=$1 what=$2 log=$3
	shift 3
	ip netns exec "$ns" "$@" </dev/null >>"$log" 2>&1 &
	_tb_record $! "$what"
	TB_LAST_PID=$!
}

# _tb_wait_for DESC "LOG..." CMD...: polls CMD until it succeeds or
# TB_WAIT_S passes; then prints the logs and fails.
_tb_wait_for() {
	local -
	set +e
	local desc=$1 log=$2 f
	shift 2
	local deadline=$(( $(tb_time_ms) + TB_WAIT_S * 1000 ))
	while ! "$@" >/dev/null 2>&1; do
		if [ "$(tb_time_ms)" -ge "$deadline" ]; then
			echo "testbed: $desc did not come up within ${TB_WAIT_S}s" >&2
			for f in $log; do
				[ -s "$f" ] || continue
				echo "---- $f" >&2
				tail -n 40 "$f" >&2
				echo "----" >&2
			done
			return 1
		fi
		sleep 0.03
	done
}

_tb_ns() {
	local ns=$1
	ip netns add "$ns" || return 1
	ip -n "$ns" link set lo up
	# No IPv6 chatter (router solicitations, MLD) to pollute the records;
	# "default" also covers interfaces added later (sluiced's uplink).
	ip netns exec "$ns" sh -c '
		sysctl -qw net.ipv6.conf.all.disable_ipv6=1
		sysctl -qw net.ipv6.conf.default.disable_ipv6=1'
}

_tb_make_tls() {
	local -
	set +e
	local d=$TB_DIR/tls n c=${TB_TLS_CACHE:-}
	# run-scenarios.sh makes them once for a whole run (seven openssl
	# runs, a quarter of a second each time otherwise)
	if [ -n "$c" ] && [ -e "$c/complete" ]; then
		mkdir -p "$d" && cp "$c"/* "$d"/ && return 0
	fi
	mkdir -p "$d"
	(
		set -e
		cd "$d"
		openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 \
		    -nodes -days 2 -subj "/CN=sluice test CA $P" \
		    -addext "basicConstraints=critical,CA:TRUE" \
		    -addext "keyUsage=critical,keyCertSign,cRLSign" \
		    -keyout ca.key -out ca.pem
		# One certificate per name, so SNI really selects one of them;
		# "default" is what a ClientHello with an unknown name gets.
		for n in a.test b.test default.invalid; do
			openssl req -new -newkey ec \
			    -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
			    -subj "/CN=$n" -keyout "$n.key" -out "$n.csr"
			printf 'subjectAltName=DNS:%s\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' \
			    "$n" > "$n.ext"
			openssl x509 -req -in "$n.csr" -CA ca.pem -CAkey ca.key \
			    -CAcreateserial -days 2 -extfile "$n.ext" -out "$n.pem"
		done
	) > "$TB_DIR/tls.log" 2>&1 || {
		echo "testbed: making the test CA failed" >&2
		cat "$TB_DIR/tls.log" >&2
		return 1
	}
	if [ -n "$c" ] && mkdir -p "$c"; then
		cp "$d"/*.pem "$d"/*.key "$c"/ 2>/dev/null &&
		    : > "$c/complete"
	fi
	return 0
}

_tb_nginx_conf() {
	local t=$TB_DIR/tls
	mkdir -p "$TB_DIR/nginx/tmp" "$TB_DIR/www"
	head -c "$TB_BIG_BYTES" /dev/urandom > "$TB_DIR/www/big.bin"
	truncate -s 16M "$TB_DIR/www/huge.bin"	# sparse: costs nothing
	cat > "$TB_DIR/nginx/nginx.conf" <<EOF
daemon off;
master_process on;
user root;
worker_processes 1;
pid $TB_DIR/nginx.pid;
error_log $TB_DIR/nginx.error.log info;
worker_rlimit_nofile 16384;
events { worker_connections 8192; }
http {
	default_type text/plain;
	client_body_temp_path $TB_DIR/nginx/tmp/body;
	proxy_temp_path $TB_DIR/nginx/tmp/proxy;
	fastcgi_temp_path $TB_DIR/nginx/tmp/fastcgi;
	uwsgi_temp_path $TB_DIR/nginx/tmp/uwsgi;
	scgi_temp_path $TB_DIR/nginx/tmp/scgi;
	log_format tb '\$remote_addr \$server_addr:\$server_port sni=\$ssl_server_name host=\$host "\$request" \$status';
	access_log $TB_DIR/nginx.access.log tb;
	keepalive_timeout 5;

	server {
		listen $TB_ADDR_HTTPS:443 ssl http2 default_server;
		server_name _;
		ssl_certificate $t/default.invalid.pem;
		ssl_certificate_key $t/default.invalid.key;
		location / { return 200 "hello from default\n"; }
	}
	server {
		listen $TB_ADDR_HTTPS:443 ssl;
		server_name a.test;
		ssl_certificate $t/a.test.pem;
		ssl_certificate_key $t/a.test.key;
		location / { return 200 "hello from a.test\n"; }
	}
	server {
		listen $TB_ADDR_HTTPS:443 ssl;
		server_name b.test;
		ssl_certificate $t/b.test.pem;
		ssl_certificate_key $t/b.test.key;
		location / { return 200 "hello from b.test\n"; }
	}
	server {
		listen $TB_ADDR_HTTPS:80 default_server;
		server_name _;
		location / { return 200 "hello from \$host on port 80\n"; }
	}
	server {
		listen $TB_ADDR_PLAIN:80 default_server;
		server_name _;
		location / { return 200 "hello from plain.test\n"; }
		# exactly TB_BIG_BYTES, for byte accounting
		location = /big.bin { alias $TB_DIR/www/big.bin; }
		# 16 MiB of zeros: long enough that the few packets a server
		# sends before sluiced settles a connection are a small part
		location = /huge.bin { alias $TB_DIR/www/huge.bin; }
		# kept alive a minute (the others 5 s), and the same file at
		# 128 KiB/s: 57-http-idle
		location = /idle { keepalive_timeout 60; return 200 "idle-ok\n"; }
		location = /slow.bin {
			alias $TB_DIR/www/big.bin;
			limit_rate 128k;
			keepalive_timeout 60;
		}
	}
}
EOF
}

_tb_dns_answers() {
	local out
	out=$(ip netns exec "$TB_NETNS_INET" dig +short +time=1 +tries=1 \
	    @"$TB_ADDR_DNS" a.test A 2>/dev/null) || return 1
	[ "$out" = "$TB_ADDR_HTTPS" ]
}

_tb_https_answers() {
	local out
	out=$(ip netns exec "$TB_NETNS_INET" curl -s --max-time 2 \
	    --cacert "$TB_CA" --resolve "a.test:443:$TB_ADDR_HTTPS" \
	    https://a.test/) || return 1
	[ "$out" = "hello from a.test" ]
}

# tb_internet_up: builds the simulated internet and the attacker host and
# waits until every service answers.
tb_internet_up() {
	local -
	set +e
	local ns=$TB_NETNS_INET atk=$TB_NETNS_ATK a
	_tb_ns "$ns" || return 1
	_tb_ns "$atk" || return 1
	ip netns exec "$ns" sysctl -qw net.ipv4.ip_forward=1
	for a in $TB_ADDR_HTTPS $TB_ADDR_PLAIN $TB_ADDR_DB $TB_ADDR_DNS; do
		ip -n "$ns" addr add "$a/32" dev lo || return 1
	done
	# Made straight inside both namespaces: the names never exist in the
	# host's namespace, so parallel runs cannot clash on them.
	ip -n "$ns" link add atk0 type veth peer name eth0 netns "$atk" || return 1
	ip -n "$ns" addr add "$TB_ADDR_ATK_GW/24" dev atk0
	ip -n "$ns" link set atk0 up
	ip -n "$atk" addr add "$TB_ADDR_ATK/24" dev eth0
	ip -n "$atk" link set eth0 up
	ip -n "$atk" route add default via "$TB_ADDR_ATK_GW"

	_tb_make_tls || return 1

	# DNS: exact names via host-record (so x.a.test is not a.test),
	# evil.test with all its subdomains via address, and "/#/" with no
	# address makes every other name NXDOMAIN; no upstream exists.
	_tb_bg "$ns" dnsmasq "$TB_DIR/dnsmasq.out" dnsmasq --keep-in-foreground \
	    --conf-file=/dev/null --user=root --group=root \
	    --pid-file="$TB_DIR/dnsmasq.pid" \
	    --bind-interfaces --listen-address="$TB_ADDR_DNS" \
	    --no-resolv --no-hosts --no-poll --cache-size=0 \
	    --local-ttl="$TB_DNS_TTL" \
	    --log-queries=extra --log-facility="$TB_DIR/dns.log" \
	    --host-record=a.test,$TB_ADDR_HTTPS \
	    --host-record=b.test,$TB_ADDR_HTTPS \
	    --host-record=plain.test,$TB_ADDR_PLAIN \
	    --host-record=db.test,$TB_ADDR_DB \
	    --address=/evil.test/$TB_ADDR_ATK \
	    --host-record=lo.rebind.test,127.0.0.1 \
	    --host-record=ten.rebind.test,10.1.2.3 \
	    --host-record=meta.rebind.test,169.254.169.254 \
	    --host-record=mixed.rebind.test,$TB_ADDR_PLAIN \
	    --host-record=mixed.rebind.test,127.0.0.1 \
	    --cname=alias.test,a.test \
	    --txt-record=a.test,"v=txt" \
	    --address=/#/

	_tb_nginx_conf
	_tb_bg "$ns" nginx "$TB_DIR/nginx.out" nginx -p "$TB_DIR/nginx" \
	    -e "$TB_DIR/nginx.error.log" -c "$TB_DIR/nginx/nginx.conf"

	# socat forks a child per connection that prints "db" and closes.
	_tb_bg "$ns" db "$TB_DIR/db.log" socat \
	    "TCP-LISTEN:$TB_PORT_DB,bind=$TB_ADDR_DB,reuseaddr,fork" \
	    SYSTEM:"echo db"

	ip netns exec "$atk" iptables -t nat -A PREROUTING -i eth0 -p tcp \
	    -j REDIRECT --to-ports "$TB_ATK_PORT" || return 1
	ip netns exec "$atk" iptables -t nat -A PREROUTING -i eth0 -p udp \
	    -j REDIRECT --to-ports "$TB_ATK_PORT" || return 1
	: > "$TB_DIR/attacker.packets"
	: > "$TB_DIR/attacker.conns"
	: > "$TB_DIR/attacker.udp"
	_tb_bg "$atk" attacker "$TB_DIR/attacker.log" "$TB_PY" \
	    "$TB_LIB/attacker.py" --dir "$TB_DIR" --iface eth0 \
	    --addr "$TB_ADDR_ATK" --port "$TB_ATK_PORT"

	_tb_wait_for "dnsmasq" "$TB_DIR/dnsmasq.out $TB_DIR/dns.log" \
	    _tb_dns_answers || return 1
	_tb_wait_for "nginx" "$TB_DIR/nginx.out $TB_DIR/nginx.error.log" \
	    _tb_https_answers || return 1
	_tb_wait_for "db service" "$TB_DIR/db.log" ip netns exec "$ns" \
	    nc -z -w 1 "$TB_ADDR_DB" "$TB_PORT_DB" || return 1
	_tb_wait_for "attacker" "$TB_DIR/attacker.log" \
	    test -e "$TB_DIR/attacker.ready" || return 1
	# The probes above left lines in the logs: start the tests clean.
	: > "$TB_DIR/nginx.access.log"
	: > "$TB_DIR/dns.log"
	return 0
}

# tb_inet_client NAME [CLIENT_CIDR INET_CIDR]: a plain host "${P}-NAME"
# linked straight to the simulated internet, not through sluice (default
# 198.51.100.66/30, the internet side .65).
tb_inet_client() {
	local -
	set +e
	local ns="${P}-$1" cli=${2:-198.51.100.66/30} gw=${3:-198.51.100.65/30}
	local ifn="c-$1"
	ifn=${ifn:0:15}
	_tb_ns "$ns" || return 1
	ip -n "$TB_NETNS_INET" link add "$ifn" type veth peer name eth0 \
	    netns "$ns" || return 1
	ip -n "$TB_NETNS_INET" addr add "$gw" dev "$ifn"
	ip -n "$TB_NETNS_INET" link set "$ifn" up
	ip -n "$ns" addr add "$cli" dev eth0
	ip -n "$ns" link set eth0 up
	ip -n "$ns" route add default via "${gw%/*}"
}

# ---------------------------------------------------------------- sluiced

# tb_sluiced_start [ARGS...]: starts sluiced on the bed; waits until the
# control socket answers.
tb_sluiced_start() {
	local -
	set +e
	local a
	TB_SLUICED_ARGS=(-f --netns "$TB_NETNS_GW" --control "$TB_DIR/ctl.sock"
	    --db "$TB_DIR/flows.db" --state-dir "$TB_DIR/state"
	    --uplink-netns "$TB_NETNS_INET" --uplink-addr "$TB_UPLINK_ADDR"
	    --uplink-peer-addr "$TB_UPLINK_PEER_ADDR"
	    --pool "$TB_POOL")
	# TB_DNS_UPSTREAM: the upstream resolvers, space-separated
	for a in ${TB_DNS_UPSTREAM:-$TB_ADDR_DNS}; do
		TB_SLUICED_ARGS+=(--dns-upstream "$a")
	done
	TB_SLUICED_ARGS+=("$@")
	# TB_SLUICED_EXTRA: words added to every start (a whole suite run
	# with, say, --kernel-sni on)
	# shellcheck disable=SC2206
	TB_SLUICED_ARGS+=(${TB_SLUICED_EXTRA:-})
	: > "$TB_DIR/sluiced.args"
	for a in "${TB_SLUICED_ARGS[@]}"; do
		printf '%s\n' "$a" >> "$TB_DIR/sluiced.args"
	done
	if [ ! -x "$SLUICED" ]; then
		echo "testbed: $SLUICED is not built" >&2
		return 1
	fi
	# Its own process group (setsid execs in place: a background job is
	# no group leader), so the stop can reach any helper it forked.
	setsid "$SLUICED" "${TB_SLUICED_ARGS[@]}" </dev/null \
	    >>"$TB_DIR/sluiced.log" 2>&1 &
	TB_SLUICED_PID=$!
	echo "$TB_SLUICED_PID" > "$TB_DIR/sluiced.pid"
	_tb_record "$TB_SLUICED_PID" sluiced-group
	_tb_sluiced_ready && return 0
	echo "---- $TB_DIR/sluiced.log" >&2
	tail -n 60 "$TB_DIR/sluiced.log" >&2
	echo "----" >&2
	return 1
}

_tb_sluiced_ready() {
	local -
	set +e
	local deadline=$(( $(tb_time_ms) + TB_WAIT_S * 1000 ))
	while [ "$(tb_time_ms)" -lt "$deadline" ]; do
		if ! kill -0 "$TB_SLUICED_PID" 2>/dev/null; then
			wait "$TB_SLUICED_PID"
			echo "testbed: sluiced exited with status $? while starting" >&2
			return 1
		fi
		if [ -S "$TB_DIR/ctl.sock" ] &&
		    tb_sluice sandbox list >/dev/null 2>&1; then
			return 0
		fi
		sleep 0.03
	done
	echo "testbed: sluiced did not answer on $TB_DIR/ctl.sock within ${TB_WAIT_S}s" >&2
	return 1
}

# tb_sluiced_kill9: SIGKILL, as a crash would.
tb_sluiced_kill9() {
	local -
	set +e
	[ -n "${TB_SLUICED_PID:-}" ] || return 0
	kill -KILL "$TB_SLUICED_PID" 2>/dev/null
	wait "$TB_SLUICED_PID" 2>/dev/null
	TB_SLUICED_PID=
	rm -f "$TB_DIR/sluiced.pid"
	return 0
}

# tb_host_sluiced_start HOSTNS [ARGS...]: sluiced with the uplink through
# the host (no --uplink-netns), the "host" being HOSTNS, a namespace of the
# test's own (tb_inet_client), so that the machine's network is never
# touched; waits until the control socket answers. TB_HOST_SLUICED_PID.
# tb_host_sluiced_stop stops it and tears its gateway down (host rules
# included) from that namespace.
tb_host_sluiced_args() {
	TB_HOST_ARGS=(-f --netns "$TB_NETNS_GW" --control "$TB_DIR/ctl.sock"
	    --db "$TB_DIR/flows.db" --state-dir "$TB_DIR/state"
	    --pool "$TB_POOL")
}
tb_host_sluiced_start() {
	local -
	set +e
	local i
	TB_HOST_NS=$1
	shift
	tb_host_sluiced_args
	nsenter --net="/run/netns/$TB_HOST_NS" "$SLUICED" "${TB_HOST_ARGS[@]}" \
	    "$@" </dev/null >>"$TB_DIR/sluiced.log" 2>&1 &
	TB_HOST_SLUICED_PID=$!
	echo "$TB_HOST_SLUICED_PID" >> "$TB_DIR/pids"
	for i in $(seq 50); do
		tb_sluice sandbox list >/dev/null 2>&1 && return 0
		kill -0 "$TB_HOST_SLUICED_PID" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}
tb_host_sluiced_stop() {
	local -
	set +e
	kill -TERM "$TB_HOST_SLUICED_PID" 2>/dev/null
	wait "$TB_HOST_SLUICED_PID" 2>/dev/null
	tb_host_sluiced_args
	nsenter --net="/run/netns/$TB_HOST_NS" "$SLUICED" --teardown \
	    "${TB_HOST_ARGS[@]}" >>"$TB_DIR/sluiced.log" 2>&1
}

# tb_sluiced_term [TIMEOUT_S]: SIGTERM only, for a test of a clean
# shutdown; returns sluiced's exit status, or 124 if it is still running
# after TIMEOUT_S (default 5). tb_down still runs --teardown afterwards.
tb_sluiced_term() {
	local -
	set +e
	local pid=${TB_SLUICED_PID:-} t=${1:-5} i rc
	[ -n "$pid" ] || return 0
	kill -TERM "$pid" 2>/dev/null
	for i in $(seq $((t * 40))); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.025
	done
	kill -0 "$pid" 2>/dev/null && return 124
	wait "$pid" 2>/dev/null
	rc=$?
	TB_SLUICED_PID=
	rm -f "$TB_DIR/sluiced.pid"
	return $rc
}

# tb_sluiced_stop: SIGTERM, then --teardown with the same flags, then
# SIGKILL if it is still alive. Returns sluiced's exit status if it ended
# by itself.
tb_sluiced_stop() {
	local -
	set +e
	local pid=${TB_SLUICED_PID:-} i rc=0
	local -a args=()
	[ -n "$pid" ] || { [ -r "$TB_DIR/sluiced.pid" ] &&
	    pid=$(cat "$TB_DIR/sluiced.pid"); }
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid" 2>/dev/null
		for i in $(seq 200); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.025
		done
	fi
	if [ -r "$TB_DIR/sluiced.args" ] && [ -x "$SLUICED" ]; then
		mapfile -t args < "$TB_DIR/sluiced.args"
		timeout 10 "$SLUICED" --teardown "${args[@]}" </dev/null \
		    >>"$TB_DIR/sluiced.log" 2>&1
	fi
	if [ -n "$pid" ]; then
		kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
		# wait works only for our own child (not after tb_adopt).
		wait "$pid" 2>/dev/null
		rc=$?
		kill -KILL -- "-$pid" 2>/dev/null	# its process group
	fi
	TB_SLUICED_PID=
	rm -f "$TB_DIR/sluiced.pid" "$TB_DIR/sluiced.args"
	return $rc
}

# tb_sluice ARGS...: the CLI against this bed's daemon.
tb_sluice() {
	"$SLUICE" -s "$TB_DIR/ctl.sock" "$@"
}

# tb_status PATH: one value of `sluice status -j`, by its dotted path
# (queue.verify_expired, store.depth, ...).
tb_status() {
	tb_sluice status -j | "$TB_PY" -c 'import json, sys
v = json.load(sys.stdin)
for k in sys.argv[1].split("."):
    v = v[k]
print(v)' "$1"
}

# tb_sandbox_add NAME POLICYFILE [ARGS...]: sandbox "${P}-NAME".
tb_sandbox_add() {
	local name=$1 policy=$2
	shift 2
	tb_sluice sandbox add "${P}-$name" --policy "$policy" "$@"
}

# tb_in NAME CMD...: runs CMD inside sandbox (or client) "${P}-NAME".
tb_in() {
	local name=$1
	shift
	ip netns exec "${P}-$name" "$@"
}

# ---------------------------------------------------------------- tear-down

# tb_down: stops everything this run started and removes every trace.
# Idempotent, safe on a half-built bed, never fails.
tb_down() {
	local -
	set +e +u
	[ "${TB_DOWN_DONE:-0}" = 1 ] && return 0
	[ -n "${P:-}" ] || return 0
	TB_DOWN_DONE=1
	local pid what ns pids i alive=""
	{
		if [ -n "${TB_SLUICED_PID:-}" ] ||
		    [ -e "${TB_DIR:-/nonexistent}/sluiced.pid" ] ||
		    [ -e "${TB_DIR:-/nonexistent}/sluiced.args" ]; then
			tb_sluiced_stop
		fi
		pids=""
		if [ -n "${TB_DIR:-}" ] && [ -r "$TB_DIR/pids" ]; then
			while read -r pid what; do
				[ -n "$pid" ] || continue
				kill -TERM "$pid" 2>/dev/null
				# A sluiced killed by a test may have left
				# helpers in its process group.
				case $what in
				*-group) kill -KILL -- "-$pid" 2>/dev/null ;;
				esac
				pids="$pids $pid"
			done < "$TB_DIR/pids"
		fi
		# Whatever still runs inside our namespaces (socat's
		# per-connection children, a client a test left behind) is ours.
		for ns in $(_tb_our_netns); do
			for pid in $(ip netns pids "$ns" 2>/dev/null); do
				kill -TERM "$pid" 2>/dev/null
				pids="$pids $pid"
			done
		done
		for i in $(seq 100); do
			alive=""
			for pid in $pids; do
				kill -0 "$pid" 2>/dev/null && alive="$alive $pid"
			done
			[ -z "$alive" ] && break
			sleep 0.03
		done
		for pid in $alive; do
			kill -KILL "$pid" 2>/dev/null
		done
		for ns in $(_tb_our_netns); do
			for pid in $(ip netns pids "$ns" 2>/dev/null); do
				kill -KILL "$pid" 2>/dev/null
			done
		done
		# Reap our own children so none is left as a zombie.
		for pid in $pids; do
			wait "$pid" 2>/dev/null
		done
		for ns in $(_tb_our_netns); do
			ip netns del "$ns"
		done
		rm -rf /etc/netns/"${P}"-*
		if [ -n "${TB_DIR:-}" ] && [ -d "$TB_DIR" ]; then
			if [ "${TB_KEEP:-0}" = 1 ]; then
				echo "testbed: kept $TB_DIR" >&2
			else
				rm -rf "$TB_DIR"
			fi
		fi
	} 2>/dev/null
	return 0
}

# Names of this run's namespaces ("name" or "name (id: N)" per line).
_tb_our_netns() {
	[ -n "${P:-}" ] || return 0
	ip netns list 2>/dev/null | awk -v p="${P}-" \
	    'index($1, p) == 1 { print $1 }'
}

# ---------------------------------------------------------------- assertions

tb_time_ms() {
	date +%s%3N
}

tb_pass() {
	TB_NPASS=$((TB_NPASS + 1))
	echo "ok - $*"
	return 0
}

tb_fail() {
	TB_FAILED=1
	TB_NFAIL=$((TB_NFAIL + 1))
	echo "not ok - $*"
	return 1
}

# tb_check MSG CMD...: passes if CMD succeeds.
tb_check() {
	local msg=$1
	shift
	if "$@"; then tb_pass "$msg"; else tb_fail "$msg"; fi
}

# tb_assert_eq ACTUAL EXPECTED MSG
tb_assert_eq() {
	if [ "$1" = "$2" ]; then
		tb_pass "$3"
	else
		tb_fail "$3: got '$1', expected '$2'"
	fi
}

# tb_assert_le ACTUAL LIMIT MSG (integers)
tb_assert_le() {
	if [ "$1" -le "$2" ] 2>/dev/null; then
		tb_pass "$3 ($1 <= $2)"
	else
		tb_fail "$3: got '$1', expected at most $2"
	fi
}

# tb_assert_match ACTUAL ERE MSG
tb_assert_match() {
	if printf '%s\n' "$1" | grep -Eq -- "$2"; then
		tb_pass "$3"
	else
		tb_fail "$3: '$1' does not match /$2/"
	fi
}

# tb_sql SQL: runs SQL on the flow database; retries briefly while the
# database is busy or does not exist yet.
tb_sql() {
	local -
	set +e
	local i out rc
	for i in $(seq 20); do
		if [ -e "$TB_DIR/flows.db" ]; then
			out=$(sqlite3 -batch -noheader -cmd ".timeout 2000" \
			    "$TB_DIR/flows.db" "$1" 2>&1)
			rc=$?
			if [ $rc = 0 ]; then
				[ -n "$out" ] && printf '%s\n' "$out"
				return 0
			fi
			case $out in
			*locked*|*busy*|*"no such table"*|*"no such view"*) ;;
			*) printf '%s\n' "$out" >&2; return $rc ;;
			esac
		fi
		sleep 0.1
	done
	echo "tb_sql: gave up: ${out:-no database at $TB_DIR/flows.db}" >&2
	return 1
}

# tb_wait_rows "SELECT count(*) ..." N [TIMEOUT_S]: polls until the count
# is N; prints the last count; fails on timeout.
tb_wait_rows() {
	local -
	set +e
	local q=$1 want=$2 t=${3:-5} got=
	local deadline=$(( $(tb_time_ms) + t * 1000 ))
	while :; do
		got=$(tb_sql "$q" 2>/dev/null)
		[ "$got" = "$want" ] && { echo "$got"; return 0; }
		[ "$(tb_time_ms)" -ge "$deadline" ] && break
		sleep 0.1
	done
	echo "${got:-none}"
	return 1
}

# Counts the JSON lines of FILE whose fields equal all KEY=VALUE filters;
# a value of "-" matches a missing or null field. String comparison, so
# dport=4444 and proto=tcp both work.
_tb_json_count() {
	local -
	set +e
	local file=$1
	shift
	[ -r "$file" ] || { echo 0; return 0; }
	"$TB_PY" - "$file" "$@" <<'EOF'
import json, sys
want = [a.split("=", 1) for a in sys.argv[2:]]
n = 0
with open(sys.argv[1], encoding="ascii", errors="replace") as f:
    for line in f:
        try:
            r = json.loads(line)
        except ValueError:
            continue
        def norm(v):
            return "-" if v is None else str(v)
        if all(norm(r.get(k)) == v for k, v in want):
            n += 1
print(n)
EOF
}

# tb_server_sockets PORT SPORT: the internet's sockets on PORT (any state
# but TIME-WAIT, which a reset never leaves) of the connection from SPORT:
# whether a server still holds a connection the gateway refused.
tb_server_sockets() {
	ip netns exec "$TB_NETNS_INET" ss -Htn state connected \
	    "( sport = :$1 and dport = :$2 )" | grep -vc TIME-WAIT
}

# tb_tls_load_bed NAME: sandbox ${P}-NAME allowed a.test, its whole port
# range open for a load, $TB_DIR/hello.bin a ClientHello for a.test
# (connbench -H), and one hello sent through the queue and logged, so
# that with --kernel-sni the load's may pass in the kernel (66, 67).
tb_tls_load_bed() {
	cat > "$TB_DIR/policy.json" <<EOF
{"network": {"allowedDomains": ["a.test"]}}
EOF
	tb_check "sandbox add" tb_sandbox_add "$1" "$TB_DIR/policy.json"
	tb_in "$1" sysctl -qw net.ipv4.ip_local_port_range="1024 65535"
	tb_assert_eq "$(tb_in "$1" dig +short a.test)" "$TB_ADDR_HTTPS" \
	    "a.test resolves"
	"$TB_PY" -c 'import sys; sys.path.insert(0, sys.argv[1]); import tlsclient
open(sys.argv[2], "wb").write(tlsclient.python_hello("a.test", ""))' \
	    "$TB_LIB" "$TB_DIR/hello.bin"
	tb_assert_eq "$(tb_in "$1" "$TB_PY" "$TB_LIB/tlsclient.py" \
	    "$TB_ADDR_HTTPS" 443 --sni a.test)" "answered" \
	    "the first hello (queued)"
	tb_wait_rows "SELECT count(*) FROM flows WHERE sni = 'a.test'" 1 \
	    >/dev/null
}

# tb_overrule_gap NAME: sandbox ${P}-NAME, whose x.evil.test hello the
# kernel-SNI program has learned, sends one that the program passes and
# sluiced must overrule: it lies 100 bytes past the stream's start, which
# the program cannot see (rawtcp.py overlap --how gap; scenarios 64, 65).
# The attacker's TCP holds it out of order and never reads it. Checked:
# no answer; kernel_sni.overruled one more; the attacker host received
# that hello and nothing after it, and a reset; the attempt's one row,
# malformed_tls.
tb_overrule_gap() {
	local atk_bytes atk_rst over0 id0 out len

	atk_bytes=$(tb_attacker_payload_bytes proto=tcp dport=443)
	atk_rst=$(tb_attacker_packet_count proto=tcp dport=443 flags=R)
	over0=$(tb_status kernel_sni.overruled)
	id0=$(tb_sql "SELECT coalesce(max(id), 0) FROM flows")
	# (the client is reset at its next segment, by the ruleset: rawtcp
	# sends none, so it sees a timeout or, if its dup ACK came late, a
	# reset)
	out=$(tb_in "$1" "$TB_PY" "$TB_LIB/rawtcp.py" "$TB_ADDR_ATK" 443 \
	    overlap --how gap --sni x.evil.test --sni2 y.evil.test)
	tb_check "a hello past the stream's start, through the kernel: no answer ($out)" \
	    _tb_not_answered "$out"
	sleep 0.3
	tb_assert_eq "$(tb_status kernel_sni.overruled)" "$((over0 + 1))" \
	    "kernel_sni.overruled one more"
	len=$(tb_in "$1" "$TB_PY" -c '
import sys; sys.path.insert(0, sys.argv[1]); import rawtcp
print(len(rawtcp.tls12_hello("x.evil.test")))' "$TB_LIB")
	tb_assert_eq "$(($(tb_attacker_payload_bytes proto=tcp dport=443) - atk_bytes))" \
	    "$len" "the attacker received the hello ($len bytes) and nothing after it"
	tb_check "and a reset for its side" \
	    [ "$(tb_attacker_packet_count proto=tcp dport=443 flags=R)" -gt "$atk_rst" ]
	tb_wait_rows "SELECT count(*) FROM flows WHERE id > $id0 AND dst_ip = '$TB_ADDR_ATK'" 1 >/dev/null
	tb_assert_eq "$(tb_sql "SELECT verdict, reason FROM flows WHERE id > $id0 AND dst_ip = '$TB_ADDR_ATK'")" \
	    "deny|malformed_tls" "its one row: malformed_tls"
}

_tb_not_answered() {
	[ -n "$1" ] && ! printf '%s' "$1" | grep -q -- result=answered
}

# tb_attacker_packet_count [KEY=VALUE...]: packets that reached the
# attacker, e.g. proto=tcp dport=4444, src=198.51.100.2, flags=S.
tb_attacker_packet_count() {
	_tb_json_count "$TB_DIR/attacker.packets" "$@"
}

# tb_attacker_conn_count [KEY=VALUE...]: TCP connections accepted (written
# when each ends), e.g. port=4444.
tb_attacker_conn_count() {
	_tb_json_count "$TB_DIR/attacker.conns" "$@"
}

# tb_attacker_udp_count [KEY=VALUE...]: UDP datagrams, e.g. port=53.
tb_attacker_udp_count() {
	_tb_json_count "$TB_DIR/attacker.udp" "$@"
}

# tb_attacker_received: every byte the attacker received, TCP connections
# then UDP datagrams, for grepping a secret.
tb_attacker_received() {
	local -
	set +e
	"$TB_PY" - "$TB_DIR/attacker.conns" "$TB_DIR/attacker.udp" <<'EOF'
import base64, json, sys
for path in sys.argv[1:]:
    try:
        f = open(path, encoding="ascii")
    except OSError:
        continue
    with f:
        for line in f:
            try:
                r = json.loads(line)
            except ValueError:
                continue
            sys.stdout.buffer.write(base64.b64decode(r.get("data_b64", "")))
sys.stdout.flush()
EOF
}

# tb_word LINE KEY: the value of KEY=VALUE among LINE's words (a line of
# key=value words, as rawtcp.py prints); nothing if it has none.
tb_word() { printf '%s\n' "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }

# tb_wait_count EXPECTED TIMEOUT_S CMD...: polls CMD's output until it is
# EXPECTED; prints the last output; fails on timeout.
tb_wait_count() {
	local -
	set +e
	local want=$1 t=$2 got=
	shift 2
	local deadline=$(( $(tb_time_ms) + t * 1000 ))
	while :; do
		got=$("$@" 2>/dev/null)
		[ "$got" = "$want" ] && { echo "$got"; return 0; }
		[ "$(tb_time_ms)" -ge "$deadline" ] && break
		sleep 0.1
	done
	echo "$got"
	return 1
}

# tb_skip MSG: ends the scenario as skipped (exit 77), e.g. when a tool
# it needs is missing. Not for hiding failures.
tb_skip() {
	TB_FINISHED=1
	echo "SKIP ${TB_NAME:-?}: $*"
	exit 77
}

# tb_done: the scenario's last line; prints PASS/FAIL and exits.
tb_done() {
	local rc=0
	TB_FINISHED=1
	[ "$TB_FAILED" = 0 ] || rc=1
	if [ "$TB_NPASS" = 0 ] && [ "$TB_NFAIL" = 0 ]; then
		echo "no checks were made"
		rc=1
	fi
	if [ $rc = 0 ]; then
		echo "PASS $TB_NAME ($TB_NPASS checks)"
	else
		echo "FAIL $TB_NAME ($TB_NFAIL of $((TB_NPASS + TB_NFAIL)) checks failed)"
	fi
	exit $rc
}

# ================================================================
# Adversarial suite helpers (tests/adversarial/*.sh). Added at the end,
# kept apart: nothing above depends on them.
# ================================================================

# tb_sandbox_field NAME FIELD: a field of sandbox "${P}-NAME" from
# `sluice sandbox list -j` (addr without its prefix length).
tb_sandbox_field() {
	tb_sluice sandbox list -j | "$TB_PY" -c 'import json, sys
want, field = sys.argv[1], sys.argv[2]
for s in json.load(sys.stdin):
    if s["name"] == want:
        v = str(s[field])
        print(v.split("/")[0] if field == "addr" else v)' "${P}-$1" "$2"
}

# tb_attacker_payload_bytes [KEY=VALUE...]: payload bytes (the sniffer's
# "len") of the packets that reached the attacker and match every
# filter, e.g. proto=tcp; fragments count with proto=frag.
tb_attacker_payload_bytes() {
	local -
	set +e
	"$TB_PY" - "$TB_DIR/attacker.packets" "$@" <<'PYEOF'
import json, sys
want = [a.split("=", 1) for a in sys.argv[2:]]
n = 0
try:
    f = open(sys.argv[1], encoding="ascii", errors="replace")
except OSError:
    print(0)
    sys.exit(0)
for line in f:
    try:
        r = json.loads(line)
    except ValueError:
        continue
    if all(("-" if r.get(k) is None else str(r.get(k))) == v for k, v in want):
        n += int(r.get("len") or 0)
print(n)
PYEOF
}

# tb_upstream_queries [ERE]: queries the upstream dnsmasq logged (all of
# them, or those whose name matches ERE, case-insensitive).
tb_upstream_queries() {
	local re=${1:-.}
	grep -E 'query\[[A-Za-z0-9]+\] ' "$TB_DIR/dns.log" 2>/dev/null |
	    sed -E 's/.*query\[[A-Za-z0-9]+\] ([^ ]*) from .*/\1/' |
	    grep -Eci -- "$re"
}

# tb_dnsmasq_restart ARGS...: restarts the bed's dnsmasq with its own
# command line plus ARGS (extra records for one scenario, e.g.
# --cname=x.test,y.test) and waits until it answers again. Its pid file
# names the process; the command line is read from /proc.
tb_dnsmasq_restart() {
	local -
	set +e
	local pid _
	local -a args=()
	pid=$(cat "$TB_DIR/dnsmasq.pid" 2>/dev/null)
	if [ -z "$pid" ] || [ ! -r "/proc/$pid/cmdline" ]; then
		echo "testbed: no dnsmasq to restart" >&2
		return 1
	fi
	mapfile -d '' -t args < "/proc/$pid/cmdline"
	kill -TERM "$pid"
	for _ in $(seq 50); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	_tb_bg "$TB_NETNS_INET" dnsmasq "$TB_DIR/dnsmasq.out" "${args[@]}" "$@"
	_tb_wait_for "dnsmasq (restarted)" "$TB_DIR/dnsmasq.out $TB_DIR/dns.log" \
	    _tb_dns_answers || return 1
	: > "$TB_DIR/dns.log"
}

# tb_gw_if NAME: the gateway-side interface of sandbox "${P}-NAME".
tb_gw_if() {
	tb_sandbox_field "$1" ifname
}
