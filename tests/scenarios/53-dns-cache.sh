#!/bin/bash
# 53-dns-cache: the resolver's cache of upstream answers. A second query
# for a kept name never reaches the upstream, yet each sandbox's own policy
# still decides: a sandbox that does not allow the name gets NXDOMAIN and no
# binding, one that allows it gets the kept answer and a binding of its own,
# and a sandbox that never asked gets nothing. Answers are kept for their
# TTL, counted down; NXDOMAIN and empty answers are not kept; a new upstream
# list flushes the cache; dns-cache 0 (a live reload) asks every time. Every
# query, hits too, has its row. Far side: what the upstream dnsmasq and the
# name's own server received.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init dns-cache
tb_internet_up || { tb_fail "test bed up"; tb_done; }

# x.test's server: an address of its own, which no policy names, so only a
# DNS binding reaches it. It writes one line per connection it accepts and
# one with what the client sent, so the far side can tell who got through.
XADDR=198.51.100.80
XPORT=7777
ip -n "$TB_NETNS_INET" addr add "$XADDR/32" dev lo
cat > "$TB_DIR/xsrv.py" <<'EOF'
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2])))
s.listen(16)
open(sys.argv[3], "w").close()
while True:
    c, peer = s.accept()
    with open(sys.argv[3], "a") as log:
        log.write("accept %s\n" % peer[0])
    c.settimeout(2)
    try:
        data = c.recv(256).decode(errors="replace").strip()
    except OSError:
        data = ""
    with open(sys.argv[3], "a") as log:
        log.write("data %s\n" % (data or "-"))
    try:
        c.sendall(b"x-server\n")
    except OSError:
        pass
    c.close()
EOF
_tb_bg "$TB_NETNS_INET" xsrv "$TB_DIR/xsrv.out" "$TB_PY" "$TB_DIR/xsrv.py" \
    "$XADDR" "$XPORT" "$TB_DIR/xsrv.log"
tb_wait_count 1 5 bash -c "[ -e '$TB_DIR/xsrv.log' ] && echo 1" >/dev/null ||
    { tb_fail "x.test's server up"; tb_done; }

# The upstream: x.test (the bed's TTL, 60 s), short.test with a TTL of 3 s,
# v6.test with no A record (an empty NOERROR); nx.test falls to the bed's
# catch-all NXDOMAIN. dnsmasq logs every question it receives (dns.log).
tb_dnsmasq_restart --host-record=x.test,$XADDR --host-record=short.test,$XADDR,3 \
    --host-record=v6.test,2001:db8::53 || { tb_fail "dnsmasq with the names"; tb_done; }

# The cache size and the upstream list come from a config file, so that a
# SIGHUP can change both (a flag would win over the file). TB_DNS_UPSTREAM
# of a blank keeps the bed from adding --dns-upstream flags.
conf() {	# conf CACHE UPSTREAM...
	local c=$1 u
	shift
	u=$(printf '"%s", ' "$@")
	printf '{"dns-cache": %s, "dns-upstream": [%s]}\n' "$c" "${u%, }" \
	    > "$TB_DIR/sluiced.json"
}
conf 4096 "$TB_ADDR_DNS"
TB_DNS_UPSTREAM=" "
tb_sluiced_start -c "$TB_DIR/sluiced.json" || { tb_fail "sluiced up"; tb_done; }
hup() {	# sends SIGHUP and waits until the reload is done
	local n
	n=$(grep -c 'reload: .* applied' "$TB_DIR/sluiced.log")
	kill -HUP "$TB_SLUICED_PID"
	tb_wait_count $((n + 1)) 5 grep -c 'reload: .* applied' "$TB_DIR/sluiced.log" >/dev/null
}

cat > "$TB_DIR/a.json" <<EOF
{"network": {"allowedDomains": ["x.test:$XPORT", "short.test:$XPORT", "nx.test", "v6.test"]}}
EOF
cat > "$TB_DIR/b.json" <<EOF
{"network": {"allowedDomains": ["a.test"]}}
EOF
cat > "$TB_DIR/c.json" <<EOF
{"network": {"allowedDomains": ["x.test:$XPORT"]}}
EOF
for s in a b c; do
	tb_check "sandbox $s" tb_sandbox_add $s "$TB_DIR/$s.json"
done

ask() {	# ask SANDBOX NAME -> "STATUS ADDR/TTL..." (the A records)
	local out
	out=$(tb_in "$1" dig +time=2 +tries=1 "$2" A 2>&1)
	printf '%s' "$(printf '%s\n' "$out" | sed -n 's/.*status: \([A-Z]*\),.*/\1/p')"
	printf '%s\n' "$out" | awk '$4 == "A" { printf " %s/%s", $5, $2 }'
}
ttl_of() { printf '%s\n' "${1##*/}"; }
# questions for NAME that the upstream logged (after a moment for its log)
upstream() { sleep 0.3; tb_upstream_queries "^${1//./\\.}\$"; }
upstream_all() { sleep 0.3; tb_upstream_queries; }
st() { tb_status "dns.$1"; }
connect() {	# connect SANDBOX: the server's reply; fails if refused
	tb_in "$1" timeout 5 bash -c 'exec 3<>"/dev/tcp/$0/$1" || exit 7
		printf "from-%s\n" "$2" >&3
		read -r -t 3 l <&3 && echo "$l"' "$XADDR" "$XPORT" "$1" 2>/dev/null
}
accepts() { sleep 0.3; grep -c '^accept' "$TB_DIR/xsrv.log"; }
sent_by() { grep -c "^data from-$1\$" "$TB_DIR/xsrv.log"; }

tb_assert_eq "$(st cache_hits)/$(st cache_entries)" "0/0" "status: no hits, nothing kept yet"

# ---- 1. A asks twice: one question upstream, two answers, one hit
r1=$(ask a x.test)
tb_assert_eq "${r1%/*}" "NOERROR $XADDR" "A: x.test resolves"
tb_assert_eq "$(ttl_of "$r1")" 60 "A: the fresh answer carries the upstream's TTL"
t_first=$(tb_time_ms)
r2=$(ask a x.test)
tb_assert_eq "${r2%/*}" "NOERROR $XADDR" "A: x.test again, same address"
tb_check "A: the second TTL is the first or a little less ($(ttl_of "$r2"))" \
    [ "$(ttl_of "$r2")" -le 60 -a "$(ttl_of "$r2")" -ge 58 ]
tb_assert_eq "$(upstream x.test)" 1 "upstream received exactly one question for x.test"
tb_assert_eq "$(st cache_hits)/$(st cache_entries)" "1/1" "status: one hit, one answer kept"
tb_assert_eq "$(connect a)" "x-server" "A reaches x.test's server through its binding"
tb_assert_eq "$(sent_by a)" 1 "the server received A's bytes"

# ---- 2. B does not allow x.test: the kept answer is not for B
n_acc=$(accepts)
tb_assert_eq "$(ask b x.test)" "NXDOMAIN" "B: x.test is NXDOMAIN, no address"
tb_assert_eq "$(upstream x.test)" 1 "upstream received no new question"
tb_assert_eq "$(st cache_hits)" 1 "B's refused query is no hit"
out=$(connect b)
rc=$?
tb_check "B: connecting to x.test's address fails (rc $rc)" [ "$rc" != 0 -a -z "$out" ]
tb_assert_eq "$(accepts)" "$n_acc" "the server accepted no connection from B"
tb_assert_eq "$(sent_by b)" 0 "and received nothing from B"

# ---- 3. C allows x.test: the binding comes from the kept answer, and only
# once C asked
sleep 1	# so that the kept answer has aged
out=$(connect c)
rc=$?
tb_check "C before resolving: refused (rc $rc)" [ "$rc" != 0 -a -z "$out" ]
tb_assert_eq "$(accepts)" "$n_acc" "the server accepted nothing from C before its query"
r3=$(ask c X.Test)
tb_assert_eq "${r3%/*}" "NOERROR $XADDR" "C: X.Test resolves from the cache"
t=$(ttl_of "$r3")
age=$(( ($(tb_time_ms) - t_first) / 1000 ))
tb_check "C: the TTL is counted down ($t, about $((60 - age)))" \
    [ "$t" -lt 60 -a "$t" -ge $((60 - age - 1)) ]
tb_assert_eq "$(upstream x.test)" 1 "upstream still received one question for x.test"
tb_assert_eq "$(st cache_hits)" 2 "status: two hits"
tb_assert_eq "$(connect c)" "x-server" "C reaches the server after its cached answer"
tb_assert_eq "$(accepts)" $((n_acc + 1)) "the server accepted exactly one more connection"
tb_assert_eq "$(sent_by c)" 1 "and it was C's"

# ---- 5. negative answers are not kept (NXDOMAIN, and an empty NOERROR)
tb_assert_eq "$(ask a nx.test)" "NXDOMAIN" "A: nx.test NXDOMAIN from upstream"
tb_assert_eq "$(ask a nx.test)" "NXDOMAIN" "A: nx.test NXDOMAIN again"
tb_assert_eq "$(upstream nx.test)" 2 "upstream received both nx.test questions"
tb_assert_eq "$(ask a v6.test)" "NOERROR" "A: v6.test, no A record"
tb_assert_eq "$(ask a v6.test)" "NOERROR" "A: v6.test again"
tb_assert_eq "$(upstream v6.test)" 2 "upstream received both v6.test questions"
tb_assert_eq "$(st cache_hits)/$(st cache_entries)" "2/1" "status: no hit, nothing more kept"

# ---- 4. an answer is kept for its TTL (3 s here), counted down; the
# client sees the record's TTL, not --dns-ttl-min (30 s, bindings only)
r=$(ask a short.test)
t0=$(tb_time_ms)
tb_assert_eq "$r" "NOERROR $XADDR/3" "A: short.test with its TTL of 3"
sleep 1.1
r=$(ask a short.test)
tb_assert_match "$r" "^NOERROR $XADDR/[12]\$" "A: within the TTL, from the cache, counted down"
tb_assert_eq "$(upstream short.test)" 1 "upstream received one question for short.test"
while [ "$(tb_time_ms)" -lt $((t0 + 3400)) ]; do sleep 0.1; done
r=$(ask a short.test)
tb_assert_eq "$r" "NOERROR $XADDR/3" "A: after the TTL, a fresh answer"
tb_assert_eq "$(upstream short.test)" 2 "upstream received the second question"
tb_assert_eq "$(st cache_hits)/$(st cache_entries)" "3/2" "status: three hits, two kept"

# ---- a new upstream list flushes the cache (a reload)
conf 4096 "$TB_ADDR_DNS" 198.51.100.54
tb_check "SIGHUP with a second upstream" hup
tb_assert_eq "$(st cache_entries)" 0 "status: the cache is empty"
tb_assert_eq "$(ask a x.test)" "NOERROR $XADDR/60" "A: x.test, a fresh answer"
tb_assert_eq "$(upstream x.test)" 2 "upstream received a new question for x.test"

# ---- 6. dns-cache 0 (a reload): every query goes upstream
conf 0 "$TB_ADDR_DNS" 198.51.100.54
tb_check "SIGHUP with dns-cache 0" hup
tb_assert_match "$(cat "$TB_DIR/sluiced.log")" "reload: dns-cache: 4096 -> 0" \
    "the log names the change"
tb_assert_eq "$(ask a x.test)" "NOERROR $XADDR/60" "A: x.test without a cache"
tb_assert_eq "$(ask a x.test)" "NOERROR $XADDR/60" "A: x.test again without a cache"
tb_assert_eq "$(upstream x.test)" 4 "upstream received both questions"
tb_assert_eq "$(st cache_hits)/$(st cache_entries)" "3/0" "status: no new hit, nothing kept"

# ---- the counters elsewhere
sj=$(tb_sluice stats -j)
tb_assert_eq "$(printf '%s' "$sj" | "$TB_PY" -c 'import json, sys
d = json.load(sys.stdin)["dns"]; print("%s/%s" % (d["cache_hits"], d["cache_entries"]))')" \
    "3/0" "stats -j: dns.cache_hits, dns.cache_entries"
prom=$(tb_sluice stats --prometheus)
tb_assert_eq "$(printf '%s\n' "$prom" | awk '$1 == "sluice_dns_cache_hits_total" { print $2 }')" \
    3 "prometheus: sluice_dns_cache_hits_total"
tb_assert_eq "$(printf '%s\n' "$prom" | awk '$1 == "sluice_dns_cache_entries" { print $2 }')" \
    0 "prometheus: sluice_dns_cache_entries"
tb_assert_eq "$(st forwarded)" "$(upstream_all)" "status: forwarded = what the upstream received"
tb_assert_eq "$(upstream_all)" 10 "the upstream received 10 questions in all"

# ---- 7. every query has its row, hits too; and the flows
sa="${P}-a"; sb="${P}-b"; sc="${P}-c"
tb_wait_rows "SELECT count(*) FROM dns_queries" 14 >/dev/null
tb_assert_eq "$(tb_sql "SELECT count(*) FROM dns_queries")" 14 "14 queries, 14 rows"
tb_assert_eq "$(tb_sql "SELECT CASE sandbox WHEN '$sa' THEN 'A' WHEN '$sb' THEN 'B'
    WHEN '$sc' THEN 'C' ELSE sandbox END, qname, rcode, verdict, reason, ifnull(answers, '')
    FROM dns_queries ORDER BY id")" \
"A|x.test|NOERROR|allow|allowed_domain|$XADDR
A|x.test|NOERROR|allow|allowed_domain|$XADDR
B|x.test|NXDOMAIN|deny|not_allowlisted|
C|X.Test|NOERROR|allow|allowed_domain|$XADDR
A|nx.test|NXDOMAIN|allow|allowed_domain|
A|nx.test|NXDOMAIN|allow|allowed_domain|
A|v6.test|NOERROR|allow|allowed_domain|
A|v6.test|NOERROR|allow|allowed_domain|
A|short.test|NOERROR|allow|allowed_domain|$XADDR
A|short.test|NOERROR|allow|allowed_domain|$XADDR
A|short.test|NOERROR|allow|allowed_domain|$XADDR
A|x.test|NOERROR|allow|allowed_domain|$XADDR
A|x.test|NOERROR|allow|allowed_domain|$XADDR
A|x.test|NOERROR|allow|allowed_domain|$XADDR" "every row, in order"
tb_assert_eq "$(st queries)" 14 "status: 14 queries"
tb_wait_rows "SELECT count(*) FROM flows WHERE dst_port = $XPORT" 4 >/dev/null
tb_assert_eq "$(tb_sql "SELECT CASE sandbox WHEN '$sa' THEN 'A' WHEN '$sb' THEN 'B'
    WHEN '$sc' THEN 'C' ELSE sandbox END, verdict, reason, ifnull(name, '-')
    FROM flows WHERE dst_port = $XPORT ORDER BY id")" \
"A|allow|allowed_domain|x.test
B|deny|no_dns_binding|-
C|deny|no_dns_binding|-
C|allow|allowed_domain|x.test" "the flow rows: B and C denied without a binding"
tb_assert_eq "$(grep -c '^accept' "$TB_DIR/xsrv.log")" 2 \
    "the server accepted only A's and C's connections"
tb_done
