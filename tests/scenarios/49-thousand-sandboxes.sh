#!/bin/bash
# 49-thousand-sandboxes: 1,000 sandboxes made through the CLI, each with a
# policy of its own (one allowed port on the db host); all of them at once
# reach their own port, a sample is refused another's; then all are
# deleted and nothing is left. Adding and deleting must stay well under
# 100 ms each at 1,000 and must not grow with the number. TB_SANDBOXES=N
# runs with N instead.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init thousand
N=${TB_SANDBOXES:-1000}
BASE=20000			# sandbox i may reach $TB_ADDR_DB:$((BASE + i))
LIMIT_MS=100
SAMPLE=20
tb_internet_up || { tb_fail "test bed up"; tb_done; }
# -v: sluiced logs each add's and del's own duration
tb_sluiced_start -v || { tb_fail "sluiced up"; tb_done; }

echo "# ulimit -n $(ulimit -n), user.max_net_namespaces" \
    "$(cat /proc/sys/user/max_net_namespaces 2>/dev/null)," \
    "sluiced's open files at start: $(ls /proc/"$TB_SLUICED_PID"/fd | wc -l)"
mem_before=$(awk '/^MemAvailable:/ { print $2 }' /proc/meminfo)
rules_before=$(ip netns exec "$TB_NETNS_GW" iptables-save | grep -c '^-A')
overflows=$(dmesg 2>/dev/null | grep -c 'table overflow')

# The sample: spread over the range, the first and the last included.
sample=()
for k in $(seq 0 $((SAMPLE - 1))); do
	sample+=( $(( k * (N - 1) / (SAMPLE - 1) )) )
done

# One listener on every sandbox's port: answers "p<port>" and writes
# "<port> <peer address>" for every connection it accepts.
: > "$TB_DIR/listener.log"
_tb_bg "$TB_NETNS_INET" listener "$TB_DIR/listener.out" "$TB_PY" -u -c '
import selectors, socket, sys
addr, log = sys.argv[1], open(sys.argv[2], "a", buffering=1)
sel = selectors.DefaultSelector()
for p in range(int(sys.argv[3]), int(sys.argv[4])):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, int(p)))
    s.listen(16)
    sel.register(s, selectors.EVENT_READ, int(p))
print("ready", flush=True)
while True:
    for key, _ in sel.select():
        c, peer = key.fileobj.accept()
        log.write("%d %s\n" % (key.data, peer[0]))
        c.sendall(b"p%d\n" % key.data)
        c.close()
' "$TB_ADDR_DB" "$TB_DIR/listener.log" "$BASE" "$((BASE + N))"
_tb_wait_for "listener" "$TB_DIR/listener.out" \
    grep -q ready "$TB_DIR/listener.out" || { tb_fail "listener up"; tb_done; }

mkdir -p "$TB_DIR/p"
for i in $(seq 0 $((N - 1))); do
	printf '{"sluice": {"allowedCidrs": ["%s:%d"]}}\n' "$TB_ADDR_DB" \
	    $((BASE + i)) > "$TB_DIR/p/$i.json"
done

# Milliseconds (3 decimals) since an EPOCHREALTIME: no fork per sample.
now_us() { local t=${EPOCHREALTIME/[.,]/}; echo "$t"; }

# ---- add
: > "$TB_DIR/add.cli"
failed=0
t_all=$(now_us)
for i in $(seq 0 $((N - 1))); do
	t0=${EPOCHREALTIME/[.,]/}
	if ! tb_sluice sandbox add "${P}-s$i" --policy "$TB_DIR/p/$i.json" \
	    >/dev/null 2>>"$TB_DIR/add.err"; then
		failed=$((failed + 1))
	fi
	t1=${EPOCHREALTIME/[.,]/}
	echo $((t1 - t0)) >> "$TB_DIR/add.cli"
done
t_add=$(( ($(now_us) - t_all) / 1000 ))
tb_assert_eq "$failed" 0 "all $N adds succeeded"
[ "$failed" = 0 ] || head -5 "$TB_DIR/add.err"
tb_assert_eq "$(tb_sluice sandbox list -j | "$TB_PY" -c 'import json,sys; print(len(json.load(sys.stdin)))')" \
    "$N" "sandbox list shows $N"
tb_assert_eq "$(ip -n "$TB_NETNS_GW" -o link show | grep -c ': sg[0-9]*@')" \
    "$N" "$N sandbox veths in the gateway"
tb_assert_eq "$(ip netns exec "$TB_NETNS_GW" iptables-save | grep -c '^-A')" \
    "$rules_before" "no rule was added per sandbox"
echo "# at $N sandboxes: sluiced's open files $(ls /proc/"$TB_SLUICED_PID"/fd | wc -l)," \
    "memory in use $(( (mem_before - $(awk '/^MemAvailable:/ { print $2 }' /proc/meminfo)) / 1024 )) MiB more"

# ---- the sample: not another's port
# The gateway masquerades onto its uplink, so the far side cannot tell
# sandboxes apart by address: first each sampled sandbox i tries the port
# of the next one in the sample (the last the first's), and the listener
# must see nothing; then every sandbox connects to its own port.
other_refused=0 n=${#sample[@]}
for k in $(seq 0 $((n - 1))); do
	i=${sample[$k]}
	j=${sample[$(( (k + 1) % n ))]}
	tb_in "s$i" nc -w 2 "$TB_ADDR_DB" $((BASE + j)) </dev/null \
	    >/dev/null 2>&1 || other_refused=$((other_refused + 1))
done
tb_assert_eq "$other_refused" "$n" "each sampled sandbox is refused another's port"
sleep 0.3
tb_assert_eq "$(wc -l < "$TB_DIR/listener.log")" 0 \
    "the far side received no connection from the refused attempts"

# ---- all of them at once: its own port
# One process enters each sandbox's namespace in turn to make a socket
# there, then all $N connect together: $N sandboxes active at the same
# time (each with neighbour entries on both sides of its veth), not one
# after the other.
out=$("$TB_PY" - "$P" "$N" "$TB_ADDR_DB" "$BASE" <<'PYEOF'
import ctypes, os, selectors, socket, sys, time
prefix, n, addr, base = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNET = 0x40000000
def setns(fd):
    if libc.setns(fd, CLONE_NEWNET) != 0:
        raise OSError(ctypes.get_errno(), "setns")
home = os.open("/proc/self/ns/net", os.O_RDONLY)
sel = selectors.DefaultSelector()
for i in range(n):
    fd = os.open("/run/netns/%s-s%d" % (prefix, i), os.O_RDONLY)
    setns(fd)
    s = socket.socket()
    setns(home)
    os.close(fd)
    s.setblocking(False)
    s.connect_ex((addr, base + i))
    sel.register(s, selectors.EVENT_READ, [i, b""])
ok, bad, deadline = 0, [], time.monotonic() + 20
while sel.get_map() and time.monotonic() < deadline:
    for key, _ in sel.select(1):
        i, got = key.data
        try:
            d = key.fileobj.recv(64)
        except OSError as e:
            d, got = b"", b"error %s" % e.strerror.encode()
        if d:
            key.data[1] += d
            continue
        sel.unregister(key.fileobj)
        key.fileobj.close()
        if key.data[1] == b"p%d\n" % (base + i):
            ok += 1
        else:
            bad.append("s%d: %r" % (i, key.data[1]))
bad += ["s%d: no answer" % k.data[0] for k in sel.get_map().values()]
print(ok)
for b in bad[:5]:
    print("#", b, file=sys.stderr)
PYEOF
)
tb_assert_eq "$out" "$N" "all $N sandboxes at once: each reaches its own port"
tb_assert_eq "$(awk '{ print $1 }' "$TB_DIR/listener.log" | sort -u | wc -l)/$(wc -l < "$TB_DIR/listener.log")" \
    "$N/$N" "the far side got exactly one connection on each port"
q="SELECT count(*) FROM flows WHERE sandbox LIKE '${P}-s%' AND dst_port >= $BASE"
tb_assert_eq "$(tb_wait_rows "$q AND verdict = 'deny'" "$n")/$(tb_wait_rows "$q AND verdict = 'allow'" "$N" 10)" \
    "$n/$N" "the log has the $n denials and the $N allowed flows"
tb_assert_eq "$(dmesg 2>/dev/null | grep -c 'table overflow')" "$overflows" \
    "the kernel's neighbour table did not overflow"

# ---- del, newest first (the slowest order for a scan of the pool)
: > "$TB_DIR/del.cli"
failed=0
t_all=$(now_us)
for i in $(seq $((N - 1)) -1 0); do
	t0=${EPOCHREALTIME/[.,]/}
	tb_sluice sandbox del "${P}-s$i" >/dev/null 2>>"$TB_DIR/del.err" ||
	    failed=$((failed + 1))
	t1=${EPOCHREALTIME/[.,]/}
	echo $((t1 - t0)) >> "$TB_DIR/del.cli"
done
t_del=$(( ($(now_us) - t_all) / 1000 ))
tb_assert_eq "$failed" 0 "all $N deletes succeeded"

# ---- nothing left
tb_assert_eq "$(tb_sluice sandbox list -j | tr -d ' \n')" "[]" "sandbox list is empty"
# the veths go in the background (gateway/reaper.c), in batches: the last
# ones within a moment of the last delete
t0=$(now_us)
for _ in $(seq 100); do
	[ "$(ip -n "$TB_NETNS_GW" -o link show | grep -c ': sg')" = 0 ] && break
	sleep 0.05
done
echo "# the last veth was gone $(( ($(now_us) - t0) / 1000 )) ms after the last delete"
tb_assert_eq "$(ip -n "$TB_NETNS_GW" -o link show | grep -c ': sg')" 0 \
    "no sg interface in the gateway"
tb_assert_eq "$(ip -n "$TB_NETNS_GW" -o link show type veth | grep -vc ': uplink@')" 0 \
    "no veth but the uplink in the gateway"
tb_assert_eq "$(ip -n "$TB_NETNS_GW" -4 -o addr show | grep -vc ' lo \| uplink ')" 0 \
    "no address but lo's and the uplink's in the gateway"
tb_assert_eq "$(ip -n "$TB_NETNS_GW" -4 route show | grep -vc 'dev uplink')" 0 \
    "no route but the uplink's in the gateway"
tb_assert_eq "$(ip netns exec "$TB_NETNS_GW" iptables-save | grep -c '^-A')" \
    "$rules_before" "the ruleset is as it was"
tb_assert_eq "$(ip netns list | grep -c "^${P}-s")" 0 "no /run/netns name of the run"
tb_assert_eq "$(ls /etc/netns 2>/dev/null | grep -c "^${P}-s")" 0 "no /etc/netns directory of the run"
tb_assert_eq "$(ls "$TB_DIR/state/sandboxes" 2>/dev/null | wc -l)" 0 "no state file"

# ---- the numbers
# CLI: the whole `sluice sandbox add` process; sluiced: the add itself
grep -o 'added in [0-9]* us' "$TB_DIR/sluiced.log" | awk '{ print $3 }' > "$TB_DIR/add.d"
grep -o 'deleted in [0-9]* us' "$TB_DIR/sluiced.log" | awk '{ print $3 }' > "$TB_DIR/del.d"
stats() {	# FILE: first last mean(first 50) mean(last 50) mean max, in ms
	awk '{ v[NR] = $1; s += $1; if ($1 > m) m = $1 }
	    END {
		if (NR == 0) { print "- - - - - -"; exit }
		k = NR < 50 ? NR : 50
		for (i = 1; i <= k; i++) { a += v[i]; b += v[NR - k + i] }
		printf "%.1f %.1f %.1f %.1f %.1f %.1f\n", v[1] / 1000,
		    v[NR] / 1000, a / k / 1000, b / k / 1000, s / NR / 1000,
		    m / 1000 }' "$1"
}
report() {	# WHAT FILE
	local s
	read -r -a s <<< "$(stats "$2")"
	printf '# %-11s 1st %6s ms, %dth %6s ms; mean %6s ms (first 50 %s, last 50 %s), max %s ms\n' \
	    "$1" "${s[0]}" "$N" "${s[1]}" "${s[4]}" "${s[2]}" "${s[3]}" "${s[5]}"
}
echo "# $N adds in ${t_add} ms, $N deletes in ${t_del} ms (CLI loop)"
report "add CLI" "$TB_DIR/add.cli"
report "add sluiced" "$TB_DIR/add.d"
# deletes ran from the 1,000th to the 1st: the first of them is at N
tac "$TB_DIR/del.cli" > "$TB_DIR/del.cli.r"
tac "$TB_DIR/del.d" > "$TB_DIR/del.d.r"
report "del CLI" "$TB_DIR/del.cli.r"
report "del sluiced" "$TB_DIR/del.d.r"
tb_assert_eq "$(wc -l < "$TB_DIR/add.d")" "$N" "sluiced timed every add"

# at N sandboxes: the mean of the 50 adds before the Nth, of the 50
# deletes after it; the whole CLI process is what a runtime waits for
read -r -a a <<< "$(stats "$TB_DIR/add.cli")"
read -r -a d <<< "$(stats "$TB_DIR/del.cli.r")"
tb_check "add at $N: ${a[3]} ms < $LIMIT_MS ms" \
    awk -v v="${a[3]}" -v l=$LIMIT_MS 'BEGIN { exit !(v < l) }'
tb_check "del at $N: ${d[3]} ms < $LIMIT_MS ms" \
    awk -v v="${d[3]}" -v l=$LIMIT_MS 'BEGIN { exit !(v < l) }'
# no growth with the number: within 3x of the first 50 (plus 5 ms of
# scheduling noise on a busy machine)
read -r -a a <<< "$(stats "$TB_DIR/add.d")"
read -r -a d <<< "$(stats "$TB_DIR/del.d.r")"
tb_check "sluiced's add does not grow: ${a[2]} ms at 1..50, ${a[3]} ms at $((N - 49))..$N" \
    awk -v f="${a[2]}" -v l="${a[3]}" 'BEGIN { exit !(l <= 3 * f + 5) }'
tb_check "sluiced's del does not grow: ${d[2]} ms at 1..50, ${d[3]} ms at $((N - 49))..$N" \
    awk -v f="${d[2]}" -v l="${d[3]}" 'BEGIN { exit !(l <= 3 * f + 5) }'
tb_done
