#!/bin/bash
# 44-store-faults: when the log cannot be written (disk full, locked by
# another process; read-only and damaged files are provoked in the store's
# unit tests) new flows are denied rather than let through
# unrecorded; the condition shows in `status`; when the fault clears the
# gateway recovers by itself and every queued row, the denials included,
# lands in the database.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init store-faults
tb_internet_up || { tb_fail "test bed up"; tb_done; }

fs="$TB_DIR/dbfs"
mkdir -p "$fs"
if ! mount -t tmpfs -o size=4m,mode=0750 tmpfs "$fs"; then
	echo "cannot mount a tmpfs here"
	tb_skip 2>/dev/null || exit 77
fi
trap 'umount -l "$fs" 2>/dev/null; tb_down' EXIT INT TERM HUP
db="$fs/flows.db"
tb_sluiced_start --db "$db" || { tb_fail "sluiced up"; tb_done; }

cat > "$TB_DIR/policy.json" <<EOF
{"sluice": {"allowedCidrs": ["203.0.113.66:4444"]}}
EOF
tb_check "sandbox add" tb_sandbox_add a "$TB_DIR/policy.json"
sql() { sqlite3 -batch -noheader -cmd ".timeout 3000" "$db" "$1"; }
writable() { tb_status store.writable; }
try() {	# try TAG: one connection to the allowed attacker port; prints ok/denied
	out=$(echo "$1" | tb_in a nc -w 2 "$TB_ADDR_ATK" 4444 2>/dev/null)
	[ "$out" = attacker ] && echo ok || echo denied
}
# a fault is noticed by the first batch that fails: make flows until then
until_denied() {
	local i
	for i in $(seq 20); do
		[ "$(try "$1-$i")" = denied ] && return 0
		sleep 0.2
	done
	return 1
}

tb_assert_eq "$(try before)" "ok" "allowed while the log is healthy"
tb_assert_eq "$(writable)" "True" "status: writable"

# 1. disk full
dd if=/dev/zero of="$fs/filler" bs=64k 2>/dev/null
tb_check "disk full: new flows are denied" until_denied full
tb_assert_eq "$(writable)" "False" "status: not writable"
rm -f "$fs/filler"
sleep 3
tb_assert_eq "$(try after-full)" "ok" "space again: allowed again, without a restart"
tb_assert_eq "$(writable)" "True" "status: writable again"

# 2. a lock held by another process
"$TB_PY" - "$db" <<'EOF' &
import sqlite3, sys, time
c = sqlite3.connect(sys.argv[1], timeout=5, isolation_level=None)
c.execute("BEGIN EXCLUSIVE")
time.sleep(4)
c.execute("COMMIT")
EOF
locker=$!
sleep 0.5
tb_check "locked: new flows are denied" until_denied lock
wait $locker
sleep 3
tb_assert_eq "$(try after-lock)" "ok" "lock released: allowed again"

# every attempt is on record now, and nothing passed unrecorded
sleep 1
allowed_rows=$(sql "SELECT count(*) FROM flows WHERE verdict = 'allow'")
conns=$(tb_attacker_conn_count port=4444)
tb_assert_eq "$allowed_rows" "$conns" "every connection that reached the attacker has an allow row ($conns)"
tb_assert_eq "$(sql "SELECT count(*) FROM flows WHERE reason = 'log_unavailable' AND verdict = 'deny'")" 2 \
    "each fault's denial was logged once the store was back"
tb_check "write errors were counted" \
    [ "$(tb_status store.write_errors)" -gt 0 ]
tb_assert_match "$(cat "$TB_DIR/sluiced.log")" "cannot be written.*denied" "the condition is logged"
tb_assert_match "$(cat "$TB_DIR/sluiced.log")" "writable again" "and its end"
tb_done
