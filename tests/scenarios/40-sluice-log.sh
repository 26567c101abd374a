#!/bin/bash
# 40-sluice-log: `sluice log` reads the flow log straight from the database:
# each filter gives exactly its rows, -j gives the tables' columns, --dns the
# queries, -f follows new rows without ever holding up the gateway, and a
# missing or foreign file is refused with the documented exit code.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init sluice-log
tb_internet_up || { tb_fail "test bed up"; tb_done; }
tb_sluiced_start || { tb_fail "sluiced up"; tb_done; }

cat > "$TB_DIR/a.json" <<EOF
{"network": {"allowedDomains": ["a.test"]},
 "sluice": {"allowedCidrs": ["$TB_ADDR_DB:$TB_PORT_DB"]}}
EOF
cat > "$TB_DIR/b.json" <<EOF
{"sluice": {"mode": "audit", "allowedCidrs": ["$TB_ADDR_HTTPS:443"]}}
EOF
tb_check "sandbox a" tb_sandbox_add a "$TB_DIR/a.json"
tb_check "sandbox b" tb_sandbox_add b "$TB_DIR/b.json"
sa="${P}-a"; sb="${P}-b"
DB=$TB_DIR/flows.db
log() { "$SLUICE" log --db "$DB" "$@"; }

# Six flows and three queries, in this order.
tb_assert_eq "$(tb_in a dig +short +time=2 +tries=1 a.test)" "$TB_ADDR_HTTPS" \
    "a resolves a.test"
# --resolve: curl would add queries of its own (A and AAAA)
tb_assert_eq "$(tb_in a curl -s --max-time 3 --cacert "$TB_CA" \
    --resolve "a.test:443:$TB_ADDR_HTTPS" https://a.test/)" \
    "hello from a.test" "a: https://a.test/ allowed"
tb_assert_eq "$(tb_in a nc -w 3 "$TB_ADDR_DB" "$TB_PORT_DB" </dev/null)" "db" \
    "a: the database's address allowed"
tb_in a nc -z -w 2 "$TB_ADDR_ATK" 4444 >/dev/null 2>&1
tb_check "a: the attacker refused" [ $? != 0 ]
# a name the policy does not allow, presented to a.test's bound address
tb_in a curl -s --max-time 3 --cacert "$TB_CA" \
    --resolve "b.test:443:$TB_ADDR_HTTPS" https://b.test/ >/dev/null
tb_check "a: SNI b.test refused" [ $? != 0 ]
tb_in a dig +time=2 +tries=1 nope.test >/dev/null 2>&1
tb_assert_eq "$(tb_in b curl -s --max-time 3 --cacert "$TB_CA" \
    --resolve "a.test:443:$TB_ADDR_HTTPS" https://a.test/)" "hello from a.test" \
    "b: an allowed address"
tb_in b curl -s --max-time 3 "http://$TB_ADDR_PLAIN/" >/dev/null
tb_in b dig +short +time=2 +tries=1 A.Test >/dev/null 2>&1
tb_wait_rows "SELECT count(*) FROM flows" 6 >/dev/null
tb_wait_rows "SELECT count(*) FROM dns_queries" 3 >/dev/null

# What the database says, to hold sluice log against.
tb_assert_eq "$(tb_sql "SELECT sandbox = '$sb', dst_ip, dst_port, verdict, reason,
    ifnull(name, '-'), ifnull(sni, '-') FROM flows ORDER BY id")" \
"0|$TB_ADDR_HTTPS|443|allow|allowed_domain|a.test|a.test
0|$TB_ADDR_DB|$TB_PORT_DB|allow|allowed_cidr|-|-
0|$TB_ADDR_ATK|4444|deny|no_dns_binding|-|-
0|$TB_ADDR_HTTPS|443|deny|sni_not_allowed|a.test|b.test
1|$TB_ADDR_HTTPS|443|allow|allowed_cidr|-|-
1|$TB_ADDR_PLAIN|80|audit|not_allowlisted|-|-" "the flows table, as expected"

# jf FIELD...: each NDJSON line of stdin as "v1|v2|..." (null: "-"); the
# sandbox as a, b; a line that is not a JSON object fails the parse.
jf() {
	"$TB_PY" -c '
import json, sys
p = sys.argv[1]
for line in sys.stdin:
    r = json.loads(line)
    assert isinstance(r, dict), line
    out = []
    for k in sys.argv[2:]:
        v = r[k]
        if k == "sandbox" and isinstance(v, str) and v.startswith(p):
            v = v[len(p):]
        out.append("-" if v is None else str(v))
    print("|".join(out))
' "${P}-" "$@"
}
F="sandbox dst_ip dst_port verdict reason"
R1="a|$TB_ADDR_HTTPS|443|allow|allowed_domain"
R2="a|$TB_ADDR_DB|$TB_PORT_DB|allow|allowed_cidr"
R3="a|$TB_ADDR_ATK|4444|deny|no_dns_binding"
R4="a|$TB_ADDR_HTTPS|443|deny|sni_not_allowed"
R5="b|$TB_ADDR_HTTPS|443|allow|allowed_cidr"
R6="b|$TB_ADDR_PLAIN|80|audit|not_allowlisted"
nl=$'\n'

out=$(log -j)
tb_assert_eq "$?" 0 "log -j: exit 0"
tb_assert_eq "$(jf $F <<< "$out")" "$R1$nl$R2$nl$R3$nl$R4$nl$R5$nl$R6" \
    "without filters: every flow, oldest first"
tb_assert_eq "$(log -j --sandbox "$sb" | jf $F)" "$R5$nl$R6" "--sandbox"
tb_assert_eq "$(log -j --sandbox "${P}" | jf $F)" "" "--sandbox is exact"
tb_assert_eq "$(log -j --verdict deny | jf $F)" "$R3$nl$R4" "--verdict deny"
tb_assert_eq "$(log -j --verdict audit | jf $F)" "$R6" "--verdict audit"
tb_assert_eq "$(log -j --reason allowed_cidr | jf $F)" "$R2$nl$R5" "--reason"
tb_assert_eq "$(log -j --reason allowed | jf $F)" "" "--reason is exact"
tb_assert_eq "$(log -j --name A.Test | jf $F)" "$R1$nl$R4" \
    "--name: the binding's name, any case"
tb_assert_eq "$(log -j --name b.test | jf $F)" "$R4" "--name: the SNI too"
tb_assert_eq "$(log -j --sandbox "$sa" --verdict allow --reason allowed_cidr | jf $F)" \
    "$R2" "filters combine"
tb_assert_eq "$(log -j --sandbox "$sa" --name a.test --verdict allow | jf $F)" \
    "$R1" "--name combines too"
tb_assert_eq "$(log -j --last 2 | jf $F)" "$R5$nl$R6" "--last 2: the newest two, oldest first"
tb_assert_eq "$(log -j --last 2 --verdict allow | jf $F)" "$R2$nl$R5" \
    "--last counts matching rows"
tb_assert_eq "$(log -j --last 0 | jf $F)" "" "--last 0: nothing"
tb_assert_eq "$(log -j --since 1h | wc -l)" 6 "--since 1h: all"
tb_assert_eq "$(log -j --since 1h --last 1 | jf $F)" "$R6" "--since and --last"
out=$(log --since 2099-01-01T00:00)
tb_assert_eq "$?:$out" "0:" "--since a future time: nothing, exit 0"
tb_assert_eq "$(log -j --since "$(date -u -d '-1 hour' +%Y-%m-%dT%H:%M:%S)" | wc -l)" 6 \
    "--since an hour ago as a time: all"
tb_assert_eq "$(SLUICE_DB=$DB "$SLUICE" log -j --last 1 | jf $F)" "$R6" "SLUICE_DB"

# -j: the table's columns as members, "time" after "ts", NULL as null,
# integers as numbers; the same values as in the table and the flow_log view
cols=$(tb_sql "SELECT group_concat(name, ' ') FROM pragma_table_info('flows')")
tb_assert_eq "$(log -j --last 1 | "$TB_PY" -c '
import json, sys
print(" ".join(k for k in json.loads(sys.stdin.readline()) if k != "time"))')" \
    "$cols" "-j: every column of flows, in order"
tb_assert_eq "$(log -j --last 1 | "$TB_PY" -c '
import json, sys
k = list(json.loads(sys.stdin.readline()))
print(k[k.index("ts") + 1])')" "time" "time follows ts"
tb_assert_eq "$(log -j --reason allowed_domain | "$TB_PY" -c '
import json, sys
r = json.loads(sys.stdin.readline())
print(type(r["id"]).__name__, type(r["ts"]).__name__, type(r["dst_port"]).__name__,
      r["rule"], r["name"], r["sni"], r["http_host"], r["tls_version"] is not None)')" \
    "int int int a.test a.test a.test None True" "-j: types and values of the allowed HTTPS flow"
tb_assert_eq "$(log -j --reason no_dns_binding | jf id time rule name src_port)" \
    "$(tb_sql "SELECT id, time, ifnull(rule, '-'), ifnull(name, '-'), src_port
    FROM flow_log WHERE reason = 'no_dns_binding'")" "-j: id, time, nulls as in flow_log"

# the table
out=$(COLUMNS=100 log)
tb_assert_eq "$(printf '%s\n' "$out" | wc -l)" 7 "the table: a header and six rows"
tb_assert_match "$(printf '%s\n' "$out" | head -1)" \
    '^TIME +SANDBOX +PROTO +DESTINATION +VERDICT +REASON$' "the header"
T='^([0-9]{4}-[0-9]{2}-[0-9]{2} )?[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3} +'
tb_assert_match "$(printf '%s\n' "$out" | sed -n 2p)" \
    "$T$sa +tcp +a\.test \($TB_ADDR_HTTPS:443\) +allow +allowed_domain\$" \
    "a row with its name and address"
tb_assert_match "$(printf '%s\n' "$out" | sed -n 4p)" \
    "$T$sa +tcp +$TB_ADDR_ATK:4444 +deny +no_dns_binding\$" "a row with no name"
tb_assert_le "$(printf '%s\n' "$out" | awk '{ print length($0) }' | sort -n | tail -1)" 100 \
    "the table fits COLUMNS=100"
out=$(COLUMNS=70 log --reason sni_not_allowed | sed -n 2p)
tb_assert_match "$out" " tcp +b\.test \(192[0-9.:]*~ +deny +sni_not_allowed\$" \
    "a narrow terminal: the destination (the SNI refused) is cut with '~'"

# --dns
D="sandbox qname qtype verdict reason"
tb_assert_eq "$(log -j --dns | jf $D)" \
"a|a.test|A|allow|allowed_domain
a|nope.test|A|deny|not_allowlisted
b|A.Test|A|audit|not_allowlisted" "--dns: the queries"
tb_assert_eq "$(log -j --dns --name A.TEST | jf sandbox qname answers)" \
"a|a.test|$TB_ADDR_HTTPS
b|A.Test|$TB_ADDR_HTTPS" "--dns --name: the query name, any case"
tb_assert_eq "$(log -j --dns --verdict deny --sandbox "$sa" | jf qname rcode)" \
    "nope.test|NXDOMAIN" "--dns with filters"
tb_assert_match "$(log --dns | head -1)" '^TIME +SANDBOX +QTYPE +QNAME +RCODE +VERDICT +REASON$' \
    "--dns: the table's header"

# bad input: exit 1; not a sluice database: exit 2
err=$("$SLUICE" log --db "$TB_DIR/none.db" 2>&1)
tb_assert_eq "$?" 1 "a missing database: exit 1"
tb_assert_match "$err" "none.db: No such file" "and says so"
tb_check "and creates nothing" [ ! -e "$TB_DIR/none.db" ]
echo "not a database" > "$TB_DIR/text.db"
err=$("$SLUICE" log --db "$TB_DIR/text.db" 2>&1)
tb_assert_eq "$?" 2 "a file that is no sluice database: exit 2"
tb_assert_match "$err" "not a sluice database" "and says so"
sqlite3 "$TB_DIR/future.db" "CREATE TABLE flows (id INTEGER); PRAGMA user_version = 99"
err=$("$SLUICE" log --db "$TB_DIR/future.db" 2>&1)
tb_assert_eq "$?" 2 "a newer schema: exit 2"
tb_assert_match "$err" "schema version 99 is newer" "and says so"
for bad in "--verdict allowed" "--since 10y" "--since 2024-02-30" "--last -1" \
    "--last x" "--sandbox=" "--bogus" "extra"; do
	# shellcheck disable=SC2086 # split on purpose
	log $bad >/dev/null 2>&1
	tb_assert_eq "$?" 1 "log $bad: exit 1"
done
out=$("$SLUICE" log --help)
tb_assert_eq "$?" 0 "log --help: exit 0"
for flag in --db --sandbox --verdict --reason --name --since --last --follow --json --dns; do
	tb_assert_match "$out" "^  ($flag|-., $flag) " "log --help documents $flag"
done
tb_assert_match "$("$SLUICE" --help)" "^  log +" "sluice --help lists log"

# -f: the rows so far, then new ones as they come; the gateway does not wait
# started directly, not through log(): $! must be sluice itself
"$SLUICE" log --db "$DB" -f -j > "$TB_DIR/follow.out" 2> "$TB_DIR/follow.err" &
fpid=$!
_tb_record "$fpid" "sluice-log-f"
tb_wait_count 6 5 sh -c "wc -l < '$TB_DIR/follow.out'" >/dev/null
tb_assert_eq "$(jf $F < "$TB_DIR/follow.out")" "$R1$nl$R2$nl$R3$nl$R4$nl$R5$nl$R6" \
    "-f: the rows so far"
t0=$(tb_time_ms)
tb_assert_eq "$(tb_in a nc -w 3 "$TB_ADDR_DB" "$TB_PORT_DB" </dev/null)" "db" \
    "a flow while -f runs: allowed"
t1=$(tb_time_ms)
tb_assert_le $((t1 - t0)) 1000 "and decided at once"
tb_wait_count 7 3 sh -c "wc -l < '$TB_DIR/follow.out'" >/dev/null
t2=$(tb_time_ms)
tb_assert_eq "$(tail -n 1 "$TB_DIR/follow.out" | jf $F)" "$R2" "-f: the new flow's line appears"
tb_assert_le $((t2 - t1)) 3000 "within 3 s"
echo x | tb_in a nc -w 2 "$TB_ADDR_ATK" 4444 >/dev/null 2>&1
tb_in a dig +short +time=2 +tries=1 a.test >/dev/null
tb_wait_count 8 3 sh -c "wc -l < '$TB_DIR/follow.out'" >/dev/null
tb_assert_eq "$(tail -n 1 "$TB_DIR/follow.out" | jf $F)" "$R3" "-f: and the next"
tb_assert_eq "$(jf id < "$TB_DIR/follow.out" | sort -n | uniq -d)" "" "-f: no row twice"
# a reader beside it, and the writer goes on: the rows are all in the file
tb_assert_eq "$(log -j --last 1 --dns | jf qname)" "a.test" "another reader meanwhile"
tb_assert_eq "$(tb_wait_rows "SELECT count(*) FROM flows" 8)" 8 "every flow written"
kill -INT "$fpid"
wait "$fpid"
tb_assert_eq "$?" 0 "-f ends on SIGINT with exit 0"
tb_assert_eq "$(cat "$TB_DIR/follow.err")" "" "-f said nothing on stderr"

"$SLUICE" log --db "$DB" -f -j --dns > "$TB_DIR/follow2.out" 2>&1 &
fpid=$!
_tb_record "$fpid" "sluice-log-f"
tb_wait_count 4 5 sh -c "wc -l < '$TB_DIR/follow2.out'" >/dev/null
kill -TERM "$fpid"
wait "$fpid"
tb_assert_eq "$?" 0 "-f --dns ends on SIGTERM with exit 0"
tb_assert_eq "$(jf qname < "$TB_DIR/follow2.out" | tail -n 1)" "a.test" "-f --dns: the queries"

# the output closed: -f ends by itself, with exit 0
timeout 10 bash -c "\"\$SLUICE\" log --db '$DB' -f | head -n 1 >/dev/null; exit \${PIPESTATUS[0]}"
tb_assert_eq "$?" 0 "-f into a pipe that closes: ends with exit 0"
timeout 10 bash -c "\"\$SLUICE\" log --db '$DB' -f --since 2099-01-01 | sleep 0.5; exit \${PIPESTATUS[0]}"
tb_assert_eq "$?" 0 "-f with nothing to print: ends soon after the pipe closes"

# and without the daemon
tb_sluiced_stop
tb_assert_eq "$(log -j --last 2 | jf $F)" "$R2$nl$R3" "without sluiced"

# What a sandbox sent reaches the operator's terminal escaped: an SNI with
# U+009B (CSI, a C1 control in UTF-8) comes out of -j as \u009b, and as
# '?' in the table (found by review, 2026-12-03: -j wrote its bytes).
sqlite3 "$DB" "INSERT INTO flows (ts, sandbox, proto, src_ip, src_port, dst_ip,
    dst_port, verdict, reason, sni) VALUES ($(date +%s)000000, '${P}-a', 'tcp',
    '10.213.0.2', 40000, '192.0.2.10', 443, 'deny', 'sni_not_allowed',
    CAST(X'C29B324A6576696C' AS TEXT))"
log -j --last 1 > "$TB_DIR/c1.out"
tb_check "-j: no C1 control byte on the terminal" bash -c "! grep -q \$'\\xc2\\x9b' '$TB_DIR/c1.out'"
tb_assert_match "$(cat "$TB_DIR/c1.out")" '"sni":"\\u009[bB]2Jevil"' "-j: escaped"
log --last 1 > "$TB_DIR/c1.txt"
tb_assert_match "$(cat "$TB_DIR/c1.txt")" '\?2Jevil' "the table: a '?' for it"
tb_check "the table: no C1 control byte either" bash -c "! grep -q \$'\\xc2\\x9b' '$TB_DIR/c1.txt'"
tb_done
