#!/bin/bash
# 54-delete-churn: `sandbox del` leaves the veth to a background thread, so
# a steady sandbox's verdicts do not wait for the kernel (20-30 ms a veth)
# while others are added and deleted in a tight loop; every deleted veth
# still goes (the held namespaces are unplugged), a name is reusable at
# once, each add and del is in the sandboxes table, and SIGTERM finishes
# the deletions still pending before sluiced exits. TB_CHURN=N churns N
# sandboxes instead of 40.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init churn
N=${TB_CHURN:-40}	# sandboxes added and deleted while S connects
RATE=150		# S's connections a second
SLOW_MS=15		# a connect slower than this waited for something
PORT=7654		# S's allowed port on the far side; r's is PORT + 1
NDRAIN=8		# deleted right before SIGTERM
tb_internet_up || { tb_fail "test bed up"; tb_done; }
# -v: sluiced logs each delete's own duration
tb_sluiced_start -v || { tb_fail "sluiced up"; tb_done; }

# The far side: accepts on PORT and PORT + 1, writes "<port>" a connection.
: > "$TB_DIR/far.log"
_tb_bg "$TB_NETNS_INET" far "$TB_DIR/far.out" "$TB_PY" -u -c '
import selectors, socket, sys
addr, log, port = sys.argv[1], open(sys.argv[2], "a", buffering=1), int(sys.argv[3])
sel = selectors.DefaultSelector()
for p in (port, port + 1):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, p))
    s.listen(512)
    sel.register(s, selectors.EVENT_READ, p)
print("ready", flush=True)
while True:
    for key, _ in sel.select():
        c, _ = key.fileobj.accept()
        log.write("%d\n" % key.data)
        c.close()
' "$TB_ADDR_DB" "$TB_DIR/far.log" "$PORT"
_tb_wait_for "far side" "$TB_DIR/far.out" \
    grep -q ready "$TB_DIR/far.out" || { tb_fail "far side up"; tb_done; }

printf '{"sluice": {"allowedCidrs": ["%s:%d"]}}\n' "$TB_ADDR_DB" "$PORT" \
    > "$TB_DIR/s.json"
printf '{"sluice": {"allowedCidrs": ["%s:%d"]}}\n' "$TB_ADDR_DB" \
    $((PORT + 1)) > "$TB_DIR/r.json"
printf '{"sluice": {"allowedCidrs": ["%s:%d"]}}\n' "$TB_ADDR_DB" \
    "$TB_PORT_DB" > "$TB_DIR/c.json"

# Half the churned sandboxes are attached namespaces held by a process:
# their veth goes only if sluiced deletes it (a namespace that dies with
# its name takes its devices along by itself).
declare -A holder
hold() {	# KEY: a process in a namespace of its own
	unshare -n sleep 120 </dev/null >/dev/null 2>&1 &
	_tb_record $! "holder-$1"
	holder[$1]=$!
}
for i in $(seq 2 2 "$N"); do hold "c$i"; done
for i in $(seq 1 "$NDRAIN"); do hold "d$i"; done

# slot_of OUTPUT: the slot of the sandbox whose gateway address an add printed
slot_of() {
	local a
	a=$(printf '%s\n' "$1" | sed -n 's/.* via \([0-9.]*\) .*/\1/p')
	[ -n "$a" ] || return 1
	IFS=. read -r _ _ x y <<< "$a"
	echo $(( ((x * 256 + y) - 1) / 4 ))
}
# gw_ifindex IFNAME: its index in the gateway, none if it is gone
gw_ifindex() {
	ip -n "$TB_NETNS_GW" -o link show dev "$1" 2>/dev/null | cut -d: -f1
}
gw_indexes() {	# every link's index in the gateway, one a line
	ip -n "$TB_NETNS_GW" -o link show | cut -d: -f1
}
unplugged() {	# KEY: the holder's namespace has no eth0
	! nsenter --net="/proc/${holder[$1]}/ns/net" ip link show eth0 \
	    >/dev/null 2>&1
}
# add KEY [ARGS]: sandbox ${P}-KEY with policy c.json; sets SLOT, IFINDEX
add() {
	local key=$1 out
	shift
	out=$(tb_sluice sandbox add "${P}-$key" "$@" 2>&1) || return 1
	SLOT=$(slot_of "$out") || return 1
	IFINDEX=$(gw_ifindex "sg$SLOT")
	[ -n "$IFINDEX" ]
}

if add s --policy "$TB_DIR/s.json"; then tb_pass "sandbox s"; else tb_fail "sandbox s"; fi
s_if=sg$SLOT

# ---- S connects steadily while N others come and go
: > "$TB_DIR/monitor.log"
_tb_bg "$TB_NETNS_GW" monitor "$TB_DIR/monitor.log" ip -ts -o monitor link
_tb_bg "${P}-s" client "$TB_DIR/client.out" "$TB_PY" -c '
import os, socket, sys, time
addr, port, rate = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
out, stop = sys.argv[4], sys.argv[5]
rows, t_start = [], time.monotonic()
t_next = t_start
while not os.path.exists(stop) and time.monotonic() - t_start < 60:
    now = time.monotonic()
    if t_next > now:
        time.sleep(t_next - now)
    t_next += 1 / rate
    s = socket.socket()
    s.settimeout(3)
    t0 = time.monotonic()
    try:
        s.connect((addr, port))
        ok = 1
    except OSError:
        ok = 0
    t1 = time.monotonic()
    s.close()
    rows.append("%.6f %.3f %d" % (t0 - t_start, (t1 - t0) * 1000, ok))
    if len(rows) == 1:
        open(out + ".ready", "w").close()
with open(out + ".tmp", "w") as f:
    f.write("\n".join(rows) + "\n")
os.rename(out + ".tmp", out)
' "$TB_ADDR_DB" "$PORT" "$RATE" "$TB_DIR/lat" "$TB_DIR/lat.stop"
client_pid=$TB_LAST_PID
_tb_wait_for "S's client" "$TB_DIR/client.out" test -e "$TB_DIR/lat.ready" ||
    { tb_fail "S's client runs"; tb_done; }
sleep 0.5

: > "$TB_DIR/churn"
add_failed=0 del_failed=0 named=0
t_churn=${EPOCHREALTIME/[.,]/}
for i in $(seq 1 "$N"); do
	if [ -n "${holder[c$i]:-}" ]; then
		add "c$i" --policy "$TB_DIR/c.json" \
		    --netns "/proc/${holder[c$i]}/ns/net"
	else
		add "c$i" --policy "$TB_DIR/c.json"
	fi || { add_failed=$((add_failed + 1)); continue; }
	tb_sluice sandbox del "${P}-c$i" >/dev/null ||
	    del_failed=$((del_failed + 1))
	echo "c$i sg$SLOT $IFINDEX ${EPOCHREALTIME/[.,]/}" >> "$TB_DIR/churn"
	[ -e "/run/netns/${P}-c$i" ] && named=$((named + 1))
done
t_churn=$(( (${EPOCHREALTIME/[.,]/} - t_churn) / 1000 ))
sleep 0.5
touch "$TB_DIR/lat.stop"
wait "$client_pid"
tb_assert_eq "$add_failed/$del_failed" 0/0 "$N adds and $N deletes succeeded (${t_churn} ms)"
tb_assert_eq "$named" 0 "no deleted sandbox's /run/netns name is left when the CLI returns"

# ---- S's connections: all made, none waited for a delete
read -r total failed slow <<< "$(awk -v s=$SLOW_MS '
    { n++; if (!$3) f++; if ($2 > s) slow++ } END { print n + 0, f + 0, slow + 0 }' \
    "$TB_DIR/lat")"
read -r p50 p99 max <<< "$(sort -n -k2 "$TB_DIR/lat" | awk -v n="$total" '
    NR == int(n * 0.5) { a = $2 } NR == int(n * 0.99) { b = $2 }
    END { print a, b, $2 }')"
echo "# S: $total connects, p50 $p50 ms, p99 $p99 ms, max $max ms, $slow over $SLOW_MS ms"
echo "# sluiced: $(grep -o 'deleted in [0-9]* us' "$TB_DIR/sluiced.log" |
    awk '{ s += $3; if ($3 > m) m = $3 } END {
	printf "%d deletes, mean %.1f ms, max %.1f ms", NR, s / NR / 1000, m / 1000 }')"
tb_check "S made connections the whole time ($total)" [ "$total" -ge $((RATE * t_churn / 1000)) ]
tb_assert_eq "$failed" 0 "every connect of S succeeded"
tb_assert_le "$slow" $((N / 5)) "connects of S slower than $SLOW_MS ms, with $N deletes"

# ---- every deleted veth goes, soon
# gone IDX...: none of these indexes is a link in the gateway
gone() {
	local left
	left=$(gw_indexes | grep -Fxf <(printf '%s\n' "$@"))
	[ -z "$left" ]
}
# gone_soon IDX...: within 2 s
gone_soon() {
	local deadline=$(( $(tb_time_ms) + 2000 ))
	until gone "$@"; do
		[ "$(tb_time_ms)" -ge "$deadline" ] && return 1
		sleep 0.05
	done
}
gw_sg() {	# the sandbox veths in the gateway, sorted, on one line
	ip -n "$TB_NETNS_GW" -o link show | awk -F': ' '{ sub(/@.*/, "", $2); print $2 }' |
	    grep '^sg' | sort | tr '\n' ' '
}
mapfile -t churned < <(awk '{ print $3 }' "$TB_DIR/churn")
tb_check "every churned sandbox's veth is gone from the gateway within 2 s" \
    gone_soon "${churned[@]}"
n=0
for i in $(seq 2 2 "$N"); do unplugged "c$i" && n=$((n + 1)); done
tb_assert_eq "$n" $((N / 2)) "the held namespaces lost their eth0"
# went FILE: of the veths in FILE ("IFINDEX T_US" a line), how many have
# a "Deleted" event in the monitor's log, the latest and the mean ms from
# T_US to it (0 if before), and how many went after their T_US
went() {
	"$TB_PY" - "$1" "$TB_DIR/monitor.log" <<'PYEOF'
import datetime, re, sys
gone = {}
for line in open(sys.argv[2]):
    m = re.match(r"\[([0-9T:.-]+)\]\s*Deleted (\d+): sg", line)
    if m:
        t = datetime.datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S.%f")
        gone.setdefault(m.group(2), t.timestamp() * 1e6)
d = []
for line in open(sys.argv[1]):
    idx, t = line.split()
    if idx in gone:
        d.append((gone[idx] - int(t)) / 1000)
print(len(d), "%.0f" % max([0] + d), "%.0f" % (sum(max(0, x) for x in d) /
    max(len(d), 1)), sum(1 for x in d if x > 0))
PYEOF
}
sleep 0.2
awk '{ print $3, $4 }' "$TB_DIR/churn" > "$TB_DIR/churn.t"
read -r nev dmax dmean _ <<< "$(went "$TB_DIR/churn.t")"
echo "# veths gone after their del returned: mean $dmean ms, max $dmax ms"
tb_assert_eq "$nev" "$N" "a deletion event for each churned veth"
tb_assert_le "$dmax" 2000 "the slowest went within 2 s of its del (ms)"

# ---- a name deleted is reusable at once, while its slot may be busy
if add r --policy "$TB_DIR/r.json"; then tb_pass "sandbox r"; else tb_fail "sandbox r"; fi
r_slots=("$SLOT")
r_old=()
ok=0
tb_in r nc -z -w 3 "$TB_ADDR_DB" $((PORT + 1)) </dev/null && ok=$((ok + 1))
for k in 1 2 3; do
	r_old+=("$IFINDEX")
	tb_sluice sandbox del "${P}-r" >/dev/null
	add r --policy "$TB_DIR/r.json" || { tb_fail "r added again ($k)"; continue; }
	r_slots+=("$SLOT")
	tb_assert_match "$(ip -n "${P}-r" -4 -o addr show dev eth0)" \
	    " 10\.213\.$(( SLOT * 4 / 256 ))\.$(( SLOT * 4 % 256 + 2 ))/30 " \
	    "r again ($k): eth0 has its slot's address"
	tb_in r nc -z -w 3 "$TB_ADDR_DB" $((PORT + 1)) </dev/null && ok=$((ok + 1))
done
echo "# r's slots, one incarnation after the other: ${r_slots[*]}"
tb_assert_eq "$ok" 4 "each incarnation of r reaches its allowed port"
tb_in r nc -z -w 2 "$TB_ADDR_DB" "$PORT" </dev/null
tb_check "r is refused S's port" [ $? != 0 ]
tb_check "the former r's veths are gone within 2 s" gone_soon "${r_old[@]}"
sleep 0.3
tb_assert_eq "$(grep -cx $((PORT + 1)) "$TB_DIR/far.log")/$(grep -cx "$PORT" "$TB_DIR/far.log")" \
    "4/$total" "the far side: r's 4 connections, S's $total, nothing else"
r_if=sg$SLOT
living="$(printf '%s\n' "$s_if" "$r_if" | sort | tr '\n' ' ')"
tb_assert_eq "$(tb_wait_count "$living" 2 gw_sg)" "$living" \
    "no sandbox veth in the gateway but the living ones' (S, r)"

# ---- S's and r's flows are logged under their names
q="SELECT count(*) FROM flows WHERE sandbox = '${P}-s' AND dst_port = $PORT"
got=$(tb_wait_rows "$q AND verdict = 'allow' AND reason = 'allowed_cidr'" "$total" 10)
tb_assert_eq "$got/$(tb_sql "SELECT count(*) FROM flows WHERE sandbox = '${P}-s' AND verdict <> 'allow'")" \
    "$total/0" "each connection of S has its allow row, none has a deny"
q="SELECT verdict, count(*) FROM flows WHERE sandbox = '${P}-r' GROUP BY verdict ORDER BY verdict"
tb_wait_rows "SELECT count(*) FROM flows WHERE sandbox = '${P}-r'" 5 >/dev/null
tb_assert_eq "$(tb_sql "$q" | tr '\n' ' ')" "allow|4 deny|1 " "r's rows: 4 allowed, 1 denied"

# ---- the reaper's own count: every delete so far done, none failed
read -r pend reaped rfail <<< "$(tb_sluice status -j | "$TB_PY" -c '
import json, sys
r = json.load(sys.stdin)["reaper"]
print(r["pending"], r["deleted"], r["failed"])')"
ndel=$(tb_wait_rows "SELECT count(*) FROM sandboxes WHERE deleted_us IS NOT NULL" \
    "$reaped" 10)
tb_assert_eq "$pend $reaped $rfail" "0 $ndel 0" \
    "status: no veth left to delete, one deleted a del ($ndel), none failed"

# ---- SIGTERM right after deletes: they are finished before the exit
drain=() drain_if=()
for i in $(seq 1 "$NDRAIN"); do
	add "d$i" --policy "$TB_DIR/c.json" --netns "/proc/${holder[d$i]}/ns/net" ||
	    tb_fail "sandbox d$i"
	drain+=("$IFINDEX")
	drain_if[i]=sg$SLOT
done
# One after the other, the signal at once: the reaper has a batch in
# hand while the next deletes queue up behind it, and those are still
# waiting when sluiced is told to stop (the thread's progress shows in
# the monitor's log: the kernel announces a veth's deletion before its
# grace periods).
failed=0
for i in $(seq 1 "$NDRAIN"); do
	tb_sluice sandbox del "${P}-d$i" >/dev/null || failed=$((failed + 1))
done
t_term=${EPOCHREALTIME/[.,]/}
kill -TERM "$TB_SLUICED_PID"
tb_sluiced_term 10
tb_assert_eq "$?/$failed" 0/0 "$NDRAIN deletes, then SIGTERM at once: sluiced exits cleanly"
tb_check "none of the $NDRAIN veths deleted before it is left" gone "${drain[@]}"
n=0
for i in $(seq 1 "$NDRAIN"); do unplugged "d$i" && n=$((n + 1)); done
tb_assert_eq "$n" "$NDRAIN" "their held namespaces lost their eth0"
sleep 0.2
printf "%s $t_term\n" "${drain[@]}" > "$TB_DIR/drain.t"
read -r nev _ _ late <<< "$(went "$TB_DIR/drain.t")"
echo "# $late of the $NDRAIN veths went after SIGTERM was sent"
tb_assert_eq "$nev" "$NDRAIN" "a deletion event for each"
tb_assert_eq "$(gw_sg)" "$living" \
    "after the exit only the living sandboxes' veths (S, r) are in the gateway"

# ---- the sandboxes table: a row for each add, closed by its del
# (in the order of the adds; 1: deleted_us is set, not before created_us)
{
	echo "s|$s_if|0"
	awk '{ print $1 "|" $2 "|1" }' "$TB_DIR/churn"
	for k in "${r_slots[@]}"; do echo "r|sg$k|1"; done | sed '$s/1$/0/'
	for i in $(seq 1 "$NDRAIN"); do echo "d$i|${drain_if[$i]}|1"; done
} > "$TB_DIR/rows.want"
tb_sql "SELECT substr(name, length('${P}-') + 1), ifname,
    deleted_us IS NOT NULL AND deleted_us >= created_us
    FROM sandboxes WHERE name LIKE '${P}-%' ORDER BY id" > "$TB_DIR/rows.got"
tb_check "the sandboxes table has each add's row, each del's deleted_us ($(wc -l < "$TB_DIR/rows.want") rows)" \
    diff "$TB_DIR/rows.want" "$TB_DIR/rows.got"
tb_done
