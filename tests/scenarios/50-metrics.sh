#!/bin/bash
# 50-metrics: `sluice stats` and the Prometheus exposition. After an allowed
# and a denied connection and a few DNS queries from a sandbox, the flow and
# DNS counters equal the rows in the database, in `sluice stats -j` and in
# what curl gets from the metrics unix socket and the TCP listener (which
# lives in the host's namespace, not the gateway's); the text passes a
# format check (names, TYPE/HELP, histogram, labels only from the fixed
# vocabularies); a silent client does not hold anything up.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init metrics
command -v curl >/dev/null 2>&1 || tb_skip "curl is missing"
tb_internet_up || { tb_fail "test bed up"; tb_done; }

# a free port on the host's loopback (a race with others is unlikely)
port=$("$TB_PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
msock=$TB_DIR/run/metrics.sock
tb_sluiced_start --metrics-socket "$msock" --metrics-listen "127.0.0.1:$port" ||
    { tb_fail "sluiced up"; tb_done; }
tb_check "the metrics socket exists" [ -S "$msock" ]

# The format check: prints the samples as JSON {series: value}, or fails
# with the line at fault. Reasons come from the source's vocabulary.
cat > "$TB_DIR/promcheck.py" <<'EOF'
import json, re, sys
vocab = {
    "verdict": {"allow", "deny", "audit"},
    "reason": set(re.findall(r'\[GW_R_\w+\]\s*=\s*"(\w+)"',
                             open(sys.argv[1]).read())),
    "le": None,	# checked as numbers below
    "version": None,
}
name_re = re.compile(r'[a-zA-Z_:][a-zA-Z0-9_:]*$')
sample_re = re.compile(r'([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
label_re = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\.)*)"')
text = sys.stdin.read()
def bad(msg):
    print("format: " + msg, file=sys.stderr)
    sys.exit(1)
if not text.endswith("\n"):
    bad("no final newline")
types, helps, out, hist = {}, set(), {}, {}
for line in text.split("\n")[:-1]:
    if line.startswith("# HELP "):
        name = line.split(" ")[2]
        if not name_re.match(name) or name in helps:
            bad("HELP: " + line)
        helps.add(name)
        continue
    if line.startswith("# TYPE "):
        parts = line.split(" ")
        if len(parts) != 4 or parts[2] in types or parts[3] not in (
                "counter", "gauge", "histogram", "summary", "untyped"):
            bad("TYPE: " + line)
        if parts[3] == "counter" and not parts[2].endswith("_total"):
            bad("counter without _total: " + line)
        if not parts[2].startswith("sluice_"):
            bad("no sluice_ prefix: " + line)
        types[parts[2]] = parts[3]
        continue
    if line.startswith("#") or line == "":
        bad("stray line: %r" % line)
    m = sample_re.match(line)
    if not m:
        bad("sample: " + line)
    name, labels, value = m.group(1), m.group(2), m.group(3)
    fam = name
    for suf in ("_bucket", "_sum", "_count"):
        if name.endswith(suf) and types.get(name[:-len(suf)]) == "histogram":
            fam = name[:-len(suf)]
    if fam not in types or fam not in helps:
        bad("sample before its TYPE and HELP: " + line)
    lab = {}
    if labels:
        rest = label_re.sub("", labels).replace(",", "")
        if rest:
            bad("labels: " + line)
        for k, v in label_re.findall(labels):
            if k not in vocab or k in lab:
                bad("label %s: %s" % (k, line))
            if vocab[k] is not None and v not in vocab[k]:
                bad("label value %s=%s: %s" % (k, v, line))
            if k == "le" and v != "+Inf":
                float(v)
            lab[k] = v
    try:
        val = float(value)
    except ValueError:
        bad("value: " + line)
    key = name + ("{" + ",".join('%s="%s"' % kv for kv in sorted(lab.items())) + "}" if lab else "")
    if key in out:
        bad("series twice: " + line)
    out[key] = val
    if name.endswith("_bucket") and fam != name:
        le = float("inf") if lab["le"] == "+Inf" else float(lab["le"])
        hist.setdefault(fam, []).append((le, val))
for fam, b in hist.items():
    if [x[0] for x in b] != sorted(x[0] for x in b) or b[-1][0] != float("inf"):
        bad(fam + ": buckets out of order or no +Inf")
    if any(b[i][1] > b[i + 1][1] for i in range(len(b) - 1)):
        bad(fam + ": buckets not cumulative")
    if b[-1][1] != out.get(fam + "_count"):
        bad(fam + ": +Inf differs from _count")
    if fam + "_sum" not in out:
        bad(fam + ": no _sum")
print(json.dumps(out))
EOF
promcheck() { "$TB_PY" "$TB_DIR/promcheck.py" "$REPO/gateway/verdict.c"; }
# SERIES from the JSON promcheck printed (0 if absent)
series() { "$TB_PY" -c 'import json, sys
d = json.loads(sys.argv[1]); v = d.get(sys.argv[2], 0); print(int(v) if v == int(v) else v)' "$1" "$2"; }
# sum of sluice_flows_total over the reasons of VERDICT
flows_sum() { "$TB_PY" -c 'import json, sys
d = json.loads(sys.argv[1])
print(int(sum(v for k, v in d.items() if k.startswith("sluice_flows_total{") and ("verdict=\"%s\"" % sys.argv[2]) in k)))' "$1" "$2"; }
jget() { "$TB_PY" -c 'import json, sys
d = json.loads(sys.argv[1])
for k in sys.argv[2].split("."):
    d = d[k] if d is not None else None
print(json.dumps(d) if isinstance(d, (dict, list)) or d is None else (str(d).lower() if isinstance(d, bool) else d))' "$1" "$2"; }

cat > "$TB_DIR/policy.json" <<EOF
{"network": {"allowedDomains": ["plain.test"]}}
EOF
tb_check "sandbox add" tb_sandbox_add a "$TB_DIR/policy.json"

# before any traffic: everything is there, at zero
curl -s --max-time 3 --unix-socket "$msock" -o "$TB_DIR/m.txt" http://x/metrics
tb_assert_eq "$?" 0 "curl on the unix socket"
j=$(promcheck < "$TB_DIR/m.txt")
tb_assert_eq "$?" 0 "the exposition passes the format check (idle)"
tb_assert_eq "$(series "$j" 'sluice_flows_total{reason="no_dns_binding",verdict="deny"}')" 0 \
    "a possible series is there before its first event"
tb_assert_eq "$(grep -c 'verdict="allow",reason="no_dns_binding"' "$TB_DIR/m.txt")" 0 \
    "an impossible one is not"
tb_assert_eq "$(series "$j" sluice_sandboxes)" 1 "sluice_sandboxes 1"

# traffic: one allowed and one denied connection, DNS allowed and denied
out=$(tb_in a curl -s --max-time 5 http://plain.test/)
tb_assert_eq "$out" "hello from plain.test" "an allowed connection (by name)"
echo x | tb_in a nc -w 2 "$TB_ADDR_ATK" 4444 >/dev/null 2>&1
tb_assert_eq "$(tb_attacker_conn_count)" 0 "a denied one: the attacker got nothing"
for n in plain.test nope.test PLAIN.test also-nope.test; do
	tb_in a dig +time=2 +tries=1 "$n" >/dev/null 2>&1
done
tb_wait_rows "SELECT count(*) FROM flows" 2 >/dev/null
sleep 0.5	# let the last records be written

db_flows_allow=$(tb_sql "SELECT count(*) FROM flows WHERE verdict = 'allow'")
db_flows_deny=$(tb_sql "SELECT count(*) FROM flows WHERE verdict = 'deny'")
db_dns_allow=$(tb_sql "SELECT count(*) FROM dns_queries WHERE verdict = 'allow'")
db_dns_deny=$(tb_sql "SELECT count(*) FROM dns_queries WHERE verdict = 'deny'")
db_notallow=$(tb_sql "SELECT count(*) FROM flows WHERE verdict = 'deny' AND reason = 'no_dns_binding'")
tb_assert_eq "$db_flows_allow" 1 "the database has the allowed flow"
tb_assert_eq "$db_flows_deny" 1 "and the denied one"
tb_assert_eq "$db_notallow" 1 "denied for want of a DNS binding"
tb_check "and the DNS queries, allowed ($db_dns_allow) and denied ($db_dns_deny)" \
    [ "$db_dns_allow" -ge 3 -a "$db_dns_deny" -ge 2 ]

# sluice stats -j
sj=$(tb_sluice stats -j)
tb_assert_eq "$?" 0 "sluice stats -j: exit 0"
tb_assert_eq "$(jget "$sj" flows.allow)" "$db_flows_allow" "stats -j: allowed flows = rows"
tb_assert_eq "$(jget "$sj" flows.deny)" "$db_flows_deny" "stats -j: denied flows = rows"
tb_assert_eq "$(jget "$sj" flows.by_reason.deny.no_dns_binding)" "$db_notallow" \
    "stats -j: by reason"
tb_assert_eq "$(jget "$sj" dns.queries.allow)" "$db_dns_allow" "stats -j: allowed DNS = rows"
tb_assert_eq "$(jget "$sj" dns.queries.deny)" "$db_dns_deny" "stats -j: denied DNS = rows"
tb_assert_eq "$(jget "$sj" sandboxes)" 1 "stats -j: one sandbox"
tb_assert_eq "$(jget "$sj" log.backlog)" 0 "stats -j: nothing waiting in the log"
tb_assert_eq "$(jget "$sj" log.backlog_bytes)" 0 "stats -j: no bytes waiting in the log"
tb_assert_eq "$(jget "$sj" log.capacity)" 16384 "stats -j: the log's queue holds 16,384 records"
tb_check "stats -j: and some MiB ($(jget "$sj" log.capacity_bytes))" \
    [ "$(jget "$sj" log.capacity_bytes)" -gt 1048576 ]
tb_assert_eq "$(jget "$sj" log.writable)" true "stats -j: the log is writable"
db_bytes=$(jget "$sj" log.db_bytes)
tb_check "stats -j: the database's size ($db_bytes), as on the disk, in pages of 16 KiB" \
    [ "${db_bytes:-0}" = "$(stat -c %s "$TB_DIR/flows.db")" -a \
    $((${db_bytes:-1} % 16384)) = 0 ]
tb_check "stats -j: its WAL's size ($(jget "$sj" log.wal_bytes)), as on the disk" \
    [ "$(jget "$sj" log.wal_bytes)" = "$(stat -c %s "$TB_DIR/flows.db-wal")" ]
tb_check "status: store.db_bytes ($(tb_status store.db_bytes)) and store.wal_bytes" \
    [ "$(tb_status store.db_bytes)" -gt 0 -a -n "$(tb_status store.wal_bytes)" ]
tb_check "stats -j: the kernel's queue table was read (gateway namespace)" \
    [ "$(jget "$sj" queue.kernel.dropped)" = 0 ]
tb_check "stats -j: packets were counted" [ "$(jget "$sj" queue.packets)" -ge 2 ]

# the same numbers from the unix socket and from TCP
for where in unix tcp; do
	if [ $where = unix ]; then
		curl -s --max-time 3 -o "$TB_DIR/m.txt" --unix-socket "$msock" \
		    http://x/metrics
	else
		curl -s --max-time 3 -o "$TB_DIR/m.txt" \
		    "http://127.0.0.1:$port/metrics"
	fi
	tb_assert_eq "$?" 0 "$where: curl GET /metrics"
	j=$(promcheck < "$TB_DIR/m.txt")
	tb_assert_eq "$?" 0 "$where: the exposition passes the format check"
	tb_assert_eq "$(flows_sum "$j" allow)" "$db_flows_allow" "$where: allowed flows = rows"
	tb_assert_eq "$(flows_sum "$j" deny)" "$db_flows_deny" "$where: denied flows = rows"
	tb_assert_eq "$(series "$j" 'sluice_flows_total{reason="no_dns_binding",verdict="deny"}')" \
	    "$db_notallow" "$where: by reason"
	tb_assert_eq "$(series "$j" 'sluice_dns_queries_total{verdict="allow"}')" "$db_dns_allow" \
	    "$where: allowed DNS queries = rows"
	tb_assert_eq "$(series "$j" 'sluice_dns_queries_total{verdict="deny"}')" "$db_dns_deny" \
	    "$where: denied DNS queries = rows"
	tb_assert_eq "$(series "$j" sluice_sandboxes)" 1 "$where: one sandbox"
	tb_assert_eq "$(series "$j" sluice_queue_dropped_total)" 0 \
	    "$where: the kernel's queue drops are there (and zero)"
	tb_assert_eq "$(series "$j" sluice_log_records_lost_total)" 0 "$where: no log loss"
	tb_assert_eq "$(series "$j" sluice_log_backlog_records)" 0 "$where: no log backlog"
	tb_assert_eq "$(series "$j" sluice_log_backlog_bytes)" 0 "$where: no log backlog bytes"
	tb_assert_eq "$(series "$j" sluice_log_queue_capacity_records)" 16384 \
	    "$where: the log queue's capacity in records"
done
hdr=$(curl -s -D - -o /dev/null --max-time 3 "http://127.0.0.1:$port/metrics")
tb_assert_match "$hdr" "Content-Type: text/plain; version=0.0.4" "the 0.0.4 content type"
tb_assert_eq "$(curl -s -o /dev/null -w '%{http_code}' --max-time 3 "http://127.0.0.1:$port/")" \
    404 "another path: 404"
tb_assert_eq "$(curl -s -o /dev/null -w '%{http_code}' --max-time 3 -X POST "http://127.0.0.1:$port/metrics")" \
    405 "another method: 405"

# sluice stats --prometheus: the same text, from the control socket
tb_sluice stats --prometheus > "$TB_DIR/m.txt"
tb_assert_eq "$?" 0 "sluice stats --prometheus: exit 0"
j=$(promcheck < "$TB_DIR/m.txt")
tb_assert_eq "$?" 0 "its text passes the format check"
tb_assert_eq "$(flows_sum "$j" deny)" "$db_flows_deny" "--prometheus: denied flows = rows"
# the human summary
out=$(tb_sluice stats)
tb_assert_eq "$?" 0 "sluice stats: exit 0"
tb_assert_match "$out" "^flows +$db_flows_allow allowed, $db_flows_deny denied, 0 audited" \
    "sluice stats: the flows line"
tb_assert_match "$out" "^  deny +no_dns_binding $db_notallow" "sluice stats: reasons"
tb_assert_match "$out" "^log .* 0 waiting \(0 of [0-9]+ KiB\), 0 lost" "sluice stats: the log line"

# the TCP listener is the host's: the gateway's own loopback has nothing there
ip netns exec "$TB_NETNS_GW" curl -s --max-time 2 "http://127.0.0.1:$port/metrics" >/dev/null 2>&1
tb_check "not reachable inside the gateway namespace" [ $? != 0 ]
gwaddr=$(tb_sandbox_field a gateway)
tb_in a curl -s --max-time 2 "http://$gwaddr:$port/metrics" >/dev/null 2>&1
tb_check "nor from the sandbox" [ $? != 0 ]

# a client that never finishes its request holds nothing up: a scrape and
# a sandbox's connection go through meanwhile, and it is dropped in time
"$TB_PY" - "$port" > "$TB_DIR/slow.out" 2>&1 <<'EOF' &
import socket, sys, time
s = [socket.create_connection(("127.0.0.1", int(sys.argv[1]))) for _ in range(3)]
for c in s:
    c.sendall(b"GET /metr")
t0 = time.time()
s[0].settimeout(5)
try:
    data = repr(s[0].recv(100))
except ConnectionResetError:
    data = "reset"	# our unread bytes make the close a reset
print("closed after %.1f s: %s" % (time.time() - t0, data))
EOF
slow=$!
sleep 0.3
t0=$(tb_time_ms)
out=$(curl -s --max-time 3 "http://127.0.0.1:$port/metrics")
tb_assert_eq "$?" 0 "a scrape while slow clients hang"
tb_assert_le $(( $(tb_time_ms) - t0 )) 1000 "and it was not made to wait (ms)"
out=$(tb_in a curl -s --max-time 3 http://plain.test/)
tb_assert_eq "$out" "hello from plain.test" "a sandbox's connection meanwhile"
wait $slow
tb_assert_match "$(cat "$TB_DIR/slow.out")" "closed after [1-3]\.[0-9] s: (b''|reset)$" \
    "the slow client was dropped after about 2 s"

# bad flags
"$SLUICED" --metrics-listen 0.0.0.0:9100 --help >/dev/null 2>&1
tb_assert_eq "$?" 1 "--metrics-listen 0.0.0.0: refused"
tb_sluice stats -j --prometheus >/dev/null 2>&1
tb_assert_eq "$?" 1 "stats -j --prometheus: usage error"
"$SLUICE" -s "$TB_DIR/none.sock" stats >/dev/null 2>&1
tb_assert_eq "$?" 3 "stats without a daemon: exit 3"
tb_done
