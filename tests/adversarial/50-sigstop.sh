#!/bin/bash
# 50-sigstop: under a light steady load, a frozen sluiced (SIGSTOP) lets
# nothing new through: the queued SYNs wait in the kernel, the clients
# fail, the attacker sees no new connection. After SIGCONT the service is
# back within a few seconds, every attempt has its row (also those whose
# client gave up during the freeze), and every connection that reached the
# far side has an allow row.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init sigstop
tb_internet_up || { tb_fail "test bed up"; tb_done; }
tb_sluiced_start || { tb_fail "sluiced up"; tb_done; }

cat > "$TB_DIR/policy.json" <<EOF
{"sluice": {"allowedCidrs": ["$TB_ADDR_ATK:4444"]}}
EOF
tb_check "sandbox add" tb_sandbox_add a "$TB_DIR/policy.json"
out=$(echo warm-up | tb_in a nc -w 3 "$TB_ADDR_ATK" 4444)
tb_assert_eq "$out" "attacker" "allowed before the freeze"

# The load: a new connection every 100 ms for LOAD_S seconds, each in its
# own thread with a 1.5 s timeout; one JSON line per attempt.
LOAD_S=9 STOP_AT=2.5 FROZEN_S=3
tb_in a "$TB_PY" - "$TB_ADDR_ATK" 4444 "$LOAD_S" "$TB_DIR/attempts" <<'EOF' &
import json, socket, sys, threading, time
addr, port, dur, path = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
out = open(path, "w", buffering=1)
lock = threading.Lock()
def one(i):
    s = socket.socket()
    s.settimeout(1.5)
    t0, res, sport = time.time(), "fail", 0
    try:
        s.connect((addr, port))
        sport = s.getsockname()[1]
        s.sendall(b"load-%d\n" % i)
        res = "ok" if s.recv(64).startswith(b"attacker") else "noanswer"
    except socket.timeout:
        res = "timeout"
    except OSError as e:
        res = "error"
    finally:
        if not sport:
            sport = s.getsockname()[1]   # autobound by connect()
        s.close()
    with lock:
        out.write(json.dumps({"i": i, "t0": t0, "t1": time.time(),
                              "res": res, "sport": sport}) + "\n")
threads, start, i = [], time.time(), 0
while time.time() - start < dur:
    t = threading.Thread(target=one, args=(i,))
    t.start()
    threads.append(t)
    i += 1
    time.sleep(0.1)
for t in threads:
    t.join()
EOF
load=$!

sleep "$STOP_AT"
t_stop=$(date +%s.%N)
kill -STOP "$TB_SLUICED_PID"
sleep 0.3
state=$(awk '{ print $3 }' "/proc/$TB_SLUICED_PID/stat")
tb_assert_eq "$state" "T" "sluiced is stopped"
# while frozen: the CLI gets no answer either (the control socket waits)
timeout 2 "$SLUICE" -s "$TB_DIR/ctl.sock" status >/dev/null 2>&1
tb_check "the control socket does not answer while frozen" [ $? != 0 ]
rest=$(awk -v a="$t_stop" -v b="$(date +%s.%N)" -v f="$FROZEN_S" \
    'BEGIN { r = a + f - b; printf "%.2f", (r > 0 ? r : 0) }')
sleep "$rest"
queued=$(ip netns exec "$TB_NETNS_GW" awk '{ print $3 }' \
    /proc/net/netfilter/nfnetlink_queue | head -n 1)
t_cont=$(date +%s.%N)
kill -CONT "$TB_SLUICED_PID"
echo "frozen from $t_stop to $t_cont; packets waiting in the queue at the end: ${queued:-?}"
tb_check "SYNs waited in the kernel's queue while frozen (${queued:-?})" \
    [ "${queued:-0}" -gt 0 ]
wait "$load"

tb_check "sluiced survived the freeze" kill -0 "$TB_SLUICED_PID"
tb_check "and answers status" eval 'tb_sluice status >/dev/null'
# the writer needs a moment for the last rows
sleep 1
tb_sql "SELECT src_port, verdict FROM flows WHERE sandbox = '${P}-a'
    AND dst_ip = '$TB_ADDR_ATK' AND dst_port = 4444" > "$TB_DIR/rows"

eval "$("$TB_PY" - "$TB_DIR" "$t_stop" "$t_cont" <<'EOF'
import json, sys
d, t_stop, t_cont = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
att = [json.loads(l) for l in open(d + "/attempts")]
rows = {}
for l in open(d + "/rows"):
    p, v = l.strip().split("|")
    rows.setdefault(int(p), []).append(v)
pk = [json.loads(l) for l in open(d + "/attacker.packets")]
cn = [json.loads(l) for l in open(d + "/attacker.conns")]
load_ports = {a["sport"] for a in att}
before = [a for a in att if a["t1"] < t_stop]
# started once the freeze had certainly begun, given up before it ended
frozen = [a for a in att if a["t0"] > t_stop + 0.05 and a["t0"] < t_cont]
frozen_ok_in_freeze = [a for a in frozen if a["res"] == "ok" and a["t1"] < t_cont]
after = [a for a in att if a["t0"] >= t_cont]
late = [a for a in att if a["t0"] >= t_cont + 1.0]
first_ok = min((a["t1"] for a in after if a["res"] == "ok"), default=None)
syns_frozen = [p for p in pk if p.get("flags") == "S" and p.get("dport") == 4444
               and t_stop + 0.05 < p["ts"] < t_cont]
syn_ports = {p["sport"] for p in pk if p.get("flags") == "S" and p.get("dport") == 4444
             and p["sport"] in load_ports}
conn_ports = {c["peer_port"] for c in cn if c["port"] == 4444 and c["peer_port"] in load_ports}
allow_ports = {p for p, v in rows.items() if "allow" in v}
print("n_att=%d" % len(att))
print("n_before_ok=%d" % sum(a["res"] == "ok" for a in before))
print("n_frozen=%d" % len(frozen))
print("n_frozen_ok=%d" % len(frozen_ok_in_freeze))
print("n_syn_frozen=%d" % len(syns_frozen))
print("n_late=%d n_late_ok=%d" % (len(late), sum(a["res"] == "ok" for a in late)))
print("back_ms=%d" % (round((first_ok - t_cont) * 1000) if first_ok else -1))
print("n_rowless=%d" % len(load_ports - set(rows)))
print("n_multirow=%d" % sum(len(rows.get(p, [])) > 1 for p in load_ports))
print("n_syn_unallowed=%d n_syn=%d" % (len(syn_ports - allow_ports), len(syn_ports)))
print("n_conn_unallowed=%d n_conn=%d" % (len(conn_ports - allow_ports), len(conn_ports)))
EOF
)"
echo "attempts: $n_att; ok before the freeze: $n_before_ok; started while frozen: $n_frozen"
tb_check "the load worked before the freeze ($n_before_ok ok)" [ "${n_before_ok:-0}" -gt 5 ]
tb_check "connections were attempted while frozen ($n_frozen)" [ "${n_frozen:-0}" -ge 10 ]
tb_assert_eq "$n_frozen_ok" 0 "none of them succeeded while sluiced was frozen"
tb_assert_eq "$n_syn_frozen" 0 "no new SYN reached the attacker while frozen"
tb_check "service is back after SIGCONT (first success after ${back_ms} ms)" \
    [ "${back_ms:--1}" -ge 0 ] && [ "$back_ms" -le 3000 ]
tb_assert_eq "$n_late_ok" "$n_late" "every attempt from 1 s after SIGCONT on succeeds"
tb_assert_eq "$n_rowless" 0 "every attempt has a row, also those given up during the freeze"
tb_assert_eq "$n_multirow" 0 "and only one"
tb_assert_eq "$n_syn_unallowed" 0 "every SYN that reached the attacker has an allow row ($n_syn SYNs)"
tb_assert_eq "$n_conn_unallowed" 0 "every connection the attacker accepted has an allow row ($n_conn)"
tb_done
