#!/bin/bash
# 19-readme-queries: every SQL query printed in README.md runs against a
# database filled by real traffic and returns rows, so the README's
# examples cannot drift from the schema.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init readme-queries
tb_internet_up || { tb_fail "test bed up"; tb_done; }
tb_sluiced_start || { tb_fail "sluiced up"; tb_done; }
ip netns exec "$TB_NETNS_GW" sysctl -qw net.netfilter.nf_conntrack_tcp_timeout_time_wait=1

cat > "$TB_DIR/enforce.json" <<EOF
{"network": {"allowedDomains": ["plain.test", "a.test", "b.test"]}}
EOF
cat > "$TB_DIR/audit.json" <<EOF
{"sluice": {"mode": "audit", "allowedCidrs": ["192.0.2.10:443"]}}
EOF
tb_check "sandbox e" tb_sandbox_add e "$TB_DIR/enforce.json"
tb_check "sandbox u" tb_sandbox_add u "$TB_DIR/audit.json"
tb_check "sandbox gone" tb_sandbox_add gone "$TB_DIR/enforce.json"
tb_check "sandbox gone deleted" tb_sluice sandbox del "${P}-gone"
for sb in e u; do
	tb_in $sb curl -s --max-time 3 --cacert "$TB_CA" \
	    --resolve "a.test:443:$TB_ADDR_HTTPS" https://a.test/ >/dev/null
	echo x | tb_in $sb nc -w 2 "$TB_ADDR_ATK" 4444 >/dev/null 2>&1
	echo x | tb_in $sb nc -u -w 1 "$TB_ADDR_DNS" 53 >/dev/null 2>&1
	tb_in $sb nc -z -w 1 10.213.0.1 22 >/dev/null 2>&1
	echo x | tb_in $sb nc -u -w 1 "$TB_ADDR_ATK" 5000 >/dev/null 2>&1
	tb_in $sb dig +time=2 +tries=1 nope.test >/dev/null 2>&1
	tb_in $sb curl -s --max-time 3 http://plain.test/ >/dev/null
	tb_in $sb curl -s --max-time 3 http://plain.test:8080/ >/dev/null
	tb_in $sb curl -s --max-time 3 --cacert "$TB_CA" https://a.test/ >/dev/null
	tb_in $sb curl -s --max-time 3 --cacert "$TB_CA" \
	    --resolve "b.test:443:$TB_ADDR_HTTPS" https://b.test/ >/dev/null
done
tb_wait_rows "SELECT count(*) FROM flows" 18 >/dev/null
# let the finished connections end, and conntrack reap them now
sleep 2
ip netns exec "$TB_NETNS_GW" conntrack -L >/dev/null 2>&1
tb_wait_rows "SELECT count(*) > 0 FROM flows WHERE end_ts IS NOT NULL" 1 >/dev/null

# Pull the ```sql blocks out of the README, one query per block.
"$TB_PY" - "$REPO/README.md" "$TB_DIR/q" <<'EOF'
import sys
text = open(sys.argv[1]).read().split("\n")
n, cur = 0, None
for line in text:
    if cur is None and line.strip() == "```sql":
        cur = []
    elif cur is not None and line.strip() == "```":
        n += 1
        open("%s.%02d.sql" % (sys.argv[2], n), "w").write("\n".join(cur) + "\n")
        cur = None
    elif cur is not None:
        cur.append(line)
EOF
nq=$(ls "$TB_DIR"/q.*.sql 2>/dev/null | wc -l)
tb_check "the README has at least 10 queries ($nq)" [ "$nq" -ge 14 ]
for q in "$TB_DIR"/q.*.sql; do
	title=$(head -n 1 "$q")
	out=$(sqlite3 -batch -bail -readonly "$TB_DIR/flows.db" < "$q" 2>&1)
	rc=$?
	tb_assert_eq "$rc" 0 "runs: $title"
	tb_check "returns rows: $title" [ -n "$out" ]
	case $out in *rror*) tb_fail "no error in the output of: $title ($out)" ;; esac
done
tb_done
