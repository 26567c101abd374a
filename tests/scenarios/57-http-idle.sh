#!/bin/bash
# 57-http-idle: an HTTP connection's bare ACKs pass in the kernel, so
# sluiced knows a kept-alive connection is in use from conntrack's counters
# (asked once it has been idle for --http-idle, here 3 s). Two kept-alive
# connections to plain.test, at once:
#   X downloads 1 MiB at 128 KiB/s (8 s, its client sending only ACKs),
#     then asks again on the same connection: answered, still read;
#   Y asks once, then sends nothing for 7 s: forgotten (between one and
#     two idle periods after its last packet), its next request refused
#     before nginx sees it.
# Then, with --http-idle 30, one connection Z asks, is silent for 13 s and
# asks again: answered; and from 10 to 12 s, while sluiced keeps its state
# and has nothing to do, sluiced uses under a tenth of a CPU (its loop used
# to spin from a kept-alive connection's tenth idle second to its
# forgetting).
. "$(dirname "$0")/../lib/testbed.sh"
tb_init http-idle
tb_internet_up || { tb_fail "test bed up"; tb_done; }
tb_sluiced_start --http-idle 3 || { tb_fail "sluiced up"; tb_done; }

cat > "$TB_DIR/policy.json" <<EOF
{"network": {"allowedDomains": ["plain.test"]}}
EOF
tb_check "sandbox add" tb_sandbox_add a "$TB_DIR/policy.json"
tb_assert_eq "$(tb_in a dig +short plain.test)" "$TB_ADDR_PLAIN" "plain.test resolves"
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$TB_SLUICED_PID/stat"; }
tck=$(getconf CLK_TCK)

tb_in a "$TB_PY" - "$TB_ADDR_PLAIN" > "$TB_DIR/clients.out" 2>&1 <<'EOF' &
import http.client, sys, threading, time
addr, out, t0 = sys.argv[1], {}, time.time()
def ask(c, path):
    try:
        c.request("GET", path, headers={"Host": "plain.test"})
        return c.getresponse().read()
    except (ConnectionError, http.client.HTTPException, OSError) as e:
        return type(e).__name__
def x():
    c = http.client.HTTPConnection(addr, 80, timeout=30)
    body = ask(c, "/slow.bin")
    out["x1"] = str(len(body)) if isinstance(body, bytes) else body
    out["xs"] = "%.0f" % (time.time() - t0)
    r = ask(c, "/idle")
    out["x2"] = r.decode().strip() if isinstance(r, bytes) else r
def y():
    c = http.client.HTTPConnection(addr, 80, timeout=30)
    r = ask(c, "/idle")
    out["y1"] = r.decode().strip() if isinstance(r, bytes) else r
    time.sleep(7 - (time.time() - t0))
    r = ask(c, "/idle")
    out["y2"] = r.decode().strip() if isinstance(r, bytes) else r
ts = [threading.Thread(target=f) for f in (x, y)]
for t in ts:
    t.start()
for t in ts:
    t.join()
print(" ".join("%s=%s" % (k, out.get(k, "-")) for k in ("x1", "xs", "x2", "y1", "y2")))
EOF
wait $!
read -r x1 xs x2 y1 y2 < "$TB_DIR/clients.out"
echo "clients: $x1 $xs $x2 $y1 $y2"
tb_assert_eq "$x1" "x1=$TB_BIG_BYTES" "X: 1 MiB downloaded"
tb_check "X: the download took longer than two idle periods ($xs)" [ "${xs#xs=}" -ge 7 ]
tb_assert_eq "$x2" "x2=idle-ok" "X: the next request on it answered (in use, by conntrack's counts)"
tb_assert_eq "$y1" "y1=idle-ok" "Y: first request answered"
tb_assert_match "$y2" "^y2=(ConnectionResetError|RemoteDisconnected|BadStatusLine)$" \
    "Y: its request after 7 s silent refused"

sleep 0.3
tb_assert_eq "$(grep -c '"GET /slow.bin' "$TB_DIR/nginx.access.log")" 1 "nginx served slow.bin"
tb_assert_eq "$(grep -c '"GET /idle' "$TB_DIR/nginx.access.log")" 2 \
    "nginx saw Y's first request and X's second, not Y's second"
tb_wait_rows "SELECT count(*) FROM flows WHERE reason = 'no_inspection_state'" 1 >/dev/null
tb_assert_eq "$(tb_sql "SELECT verdict, reason, ifnull(http_path, '-') FROM flows
    WHERE dst_port = 80 ORDER BY verdict, http_path")" \
"allow|allowed_domain|/idle
allow|allowed_domain|/slow.bin
deny|no_inspection_state|-" "the rows: each connection's first request, and Y's refusal"

tb_check "sluiced stops" tb_sluiced_term
tb_sluiced_start --http-idle 30 || tb_fail "sluiced up with --http-idle 30"
tb_assert_eq "$(tb_in a dig +short plain.test)" "$TB_ADDR_PLAIN" "plain.test resolves again"
tb_in a "$TB_PY" - "$TB_ADDR_PLAIN" > "$TB_DIR/z.out" 2>&1 <<'EOF' &
import http.client, sys, time
c = http.client.HTTPConnection(sys.argv[1], 80, timeout=5)
res = []
for i in range(2):
    try:
        c.request("GET", "/idle", headers={"Host": "plain.test"})
        res.append(c.getresponse().read().decode().strip())
    except (ConnectionError, http.client.HTTPException, OSError) as e:
        res.append(type(e).__name__)
    if i == 0:
        time.sleep(13)
print(" ".join(res))
EOF
cl=$!
sleep 10.5
c0=$(cpu_ticks)
sleep 2
c1=$(cpu_ticks)
wait "$cl"
tb_assert_eq "$(cat "$TB_DIR/z.out")" "idle-ok idle-ok" "Z: both requests answered, 13 s apart"
tb_check "Z silent from 10.5 to 12.5 s: sluiced used under a tenth of a CPU ($((c1 - c0)) ticks of $((2 * tck)))" \
    [ $(( (c1 - c0) * 10 )) -lt $((2 * tck)) ]
tb_done
