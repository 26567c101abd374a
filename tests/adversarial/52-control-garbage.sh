#!/bin/bash
# 52-control-garbage: the control socket gets garbage bytes, a 3 MiB
# request, truncated JSON, JSON that is not an object, unknown and
# malformed commands, a storm of empty connections, a request held open
# without its newline, one trickled in byte by byte, and requests from an
# unprivileged user (refused by the socket's mode, and by SO_PEERCRED when
# the mode is opened). Each is answered with an error or refused, and after
# each the daemon is alive, answers `sluice status`, and a sandbox's
# allowed connection still works. While a client holds the socket, the
# queue, the resolver and other control clients must still be served: the
# daemon has one event loop, so a stall there stalls every sandbox.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init control-garbage
tb_internet_up || { tb_fail "test bed up"; tb_done; }
tb_sluiced_start || { tb_fail "sluiced up"; tb_done; }

cat > "$TB_DIR/policy.json" <<EOF
{"network": {"allowedDomains": ["a.test"]},
 "sluice": {"allowedCidrs": ["$TB_ADDR_ATK:4444"]}}
EOF
tb_check "sandbox add" tb_sandbox_add a "$TB_DIR/policy.json"
SOCK=$TB_DIR/ctl.sock
gw_a=$(tb_sluice sandbox list -j | "$TB_PY" -c 'import json,sys
print(json.load(sys.stdin)[0]["gateway"])')

# The client: ctl.py CASE prints the daemon's reply (or what went wrong)
# for one crafted request; "probe" times one allowed connection out of the
# sandbox (run inside it).
cat > "$TB_DIR/ctl.py" <<'EOF'
import json, os, socket, sys, time
case, arg = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else ""
path = os.environ.get("SOCK", "")

def talk(payload, shut=True, timeout=5.0):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(path)
    except OSError as e:
        return "connect: " + (os.strerror(e.errno) if e.errno else str(e))
    try:
        s.sendall(payload)
        if shut:
            s.shutdown(socket.SHUT_WR)
    except OSError as e:
        pass    # the daemon stopped reading: its reply may still be there
    data = b""
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            data += b
    except OSError as e:
        if not data:
            return "recv: " + (os.strerror(e.errno) if e.errno else str(e))
    s.close()
    return data.decode("utf-8", "replace").strip() or "(no reply)"

def reply_of(payload, **kw):
    r = talk(payload, **kw)
    try:
        j = json.loads(r)
        return "%s %s: %s" % ("ok" if j.get("ok") else "error",
                              j.get("code", "-"), j.get("error", "-"))
    except ValueError:
        return r

if case == "raw":           # arg: a Python bytes literal
    print(reply_of(eval(arg)))
elif case == "reply":       # the same, the whole reply
    print(talk(eval(arg)))
elif case == "garbage":
    import random
    random.seed(7)
    b = bytes(random.getrandbits(8) for _ in range(4096))
    print(reply_of(b + b"\n"))
elif case == "garbage-noeol":
    print(reply_of(bytes(range(1, 256)).replace(b"\n", b"") * 8))
elif case == "big":         # 3 MiB: a JSON object that never ends in time
    print(reply_of(b'{"cmd":"status","pad":"' + b"x" * (3 << 20) + b'"}\n'))
elif case == "storm":       # arg connections that close at once
    for _ in range(int(arg)):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
        s.close()
    print("done")
elif case == "hold":        # a request without its newline, held arg s
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    try:
        s.sendall(b'{"cmd":"status"}')
    except OSError:
        pass    # refused and closed by the daemon
    time.sleep(float(arg))
    s.close()
elif case == "trickle":     # one byte every 1.5 s, arg bytes, then "\n"
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    for c in b'{"cmd":"status"}'[:int(arg)]:
        s.sendall(bytes([c]))
        time.sleep(1.5)
    s.close()
elif case == "probe":       # inside the sandbox: arg = "ADDR:PORT"
    a, p = arg.split(":")
    t0 = time.time()
    try:
        with socket.create_connection((a, int(p)), timeout=12) as s:
            s.sendall(b"probe\n")
            ok = s.recv(16).startswith(b"attacker")
    except OSError:
        ok = False
    print("%s %d" % ("ok" if ok else "fail", round((time.time() - t0) * 1000)))
EOF
ctl() { SOCK=$SOCK "$TB_PY" "$TB_DIR/ctl.py" "$@"; }
probe() { tb_in a "$TB_PY" "$TB_DIR/ctl.py" probe "$TB_ADDR_ATK:4444"; }
status_ms() {	# the CLI's status, timed: "rc ms"
	local t0 rc
	t0=$(tb_time_ms)
	tb_sluice status >/dev/null 2>&1
	rc=$?
	echo "$rc $(( $(tb_time_ms) - t0 ))"
}
dns_ms() {	# a query from the sandbox, timed: "answer ms"
	local t0 out
	t0=$(tb_time_ms)
	out=$(tb_in a dig +short +time=12 +tries=1 @"$gw_a" a.test A 2>/dev/null)
	echo "${out:-none} $(( $(tb_time_ms) - t0 ))"
}
# healthy TAG: the daemon lives, answers status, and the sandbox's allowed
# connection works.
healthy() {
	local r
	tb_check "after $1: sluiced is alive" kill -0 "$TB_SLUICED_PID"
	read -r r _ <<< "$(status_ms)"
	tb_assert_eq "$r" 0 "after $1: sluice status answers"
	read -r r _ <<< "$(probe)"
	tb_assert_eq "$r" ok "after $1: the sandbox's allowed connection works"
}
# refused TAG REPLY: an error reply of code "invalid"
refused() {
	echo "$1 -> $2"
	tb_assert_match "$2" "^error invalid: " "$1 is refused as invalid"
}

healthy "start"

# ---------------------------------------------------------------- garbage
refused "random bytes" "$(ctl garbage)"
refused "bytes without a newline, then EOF" "$(ctl garbage-noeol)"
r=$(ctl big)
echo "3 MiB request -> $r"
tb_check "a 3 MiB request is not taken (reply or reset: $r)" \
    eval '! printf "%s" "$r" | grep -q "^ok"'
healthy "garbage and a 3 MiB request"

refused "truncated JSON" "$(ctl raw 'b"{\"cmd\":\"sandbox.list\"\n"')"
refused "truncated JSON, then EOF" "$(ctl raw 'b"{\"cmd\":\"sta"')"
for v in '[1,2]' '"status"' '42' 'null' 'true' '{}'; do
	refused "JSON $v" "$(ctl raw "b'$v\\n'")"
done
refused "JSON with a NUL" "$(ctl raw 'b"{\"cmd\":\"stat\\u0000us\"}\n"')"
# Bytes after the object are ignored (one request per connection): the
# first object is the request, and it gets one reply.
r=$(ctl raw 'b"{\"cmd\":\"sandbox.list\"}{\"cmd\":\"sandbox.del\"}\n"')
echo "two JSON objects on one line -> $r"
tb_assert_eq "$r" "ok -: -" "two objects on a line: only the first is taken"
healthy "malformed JSON"

# ---------------------------------------------------------------- commands
refused "unknown command" "$(ctl raw 'b"{\"cmd\":\"reboot\"}\n"')"
r=$(ctl raw 'b"{\"cmd\":\"reboot\",\"name\":\"x\"}\n"')
refused "unknown command with a name" "$r"
tb_assert_match "$r" 'unknown command "reboot"' "and named as unknown"
refused "empty command" "$(ctl raw 'b"{\"cmd\":\"\"}\n"')"
refused "a 100 KiB command name" "$(ctl raw 'b"{\"cmd\":\"" + b"x" * 102400 + b"\"}\n"')"
refused "cmd not a string" "$(ctl raw 'b"{\"cmd\":42}\n"')"
refused "duplicate keys" "$(ctl raw 'b"{\"cmd\":\"status\",\"cmd\":\"sandbox.del\"}\n"')"
refused "del without a name" "$(ctl raw 'b"{\"cmd\":\"sandbox.del\"}\n"')"
refused "del of a path" "$(ctl raw 'b"{\"cmd\":\"sandbox.del\",\"name\":\"../../etc\"}\n"')"
refused "del of an unknown sandbox" "$(ctl raw 'b"{\"cmd\":\"sandbox.del\",\"name\":\"nosuch\"}\n"')"
refused "add with a policy that is no string" \
    "$(ctl raw 'b"{\"cmd\":\"sandbox.add\",\"name\":\"x\",\"policy\":{}}\n"')"
refused "add with a bad policy" \
    "$(ctl raw 'b"{\"cmd\":\"sandbox.add\",\"name\":\"x\",\"policy\":\"{\\\"bad\\\":1}\"}\n"')"
refused "policy.set of an unknown sandbox" \
    "$(ctl raw 'b"{\"cmd\":\"policy.set\",\"name\":\"nosuch\",\"policy\":\"{}\"}\n"')"
tb_assert_match "$(tb_sluice sandbox list)" "^${P}-a " "the sandbox is still there"
tb_assert_eq "$(tb_sluice sandbox list -j | "$TB_PY" -c 'import json,sys; print(len(json.load(sys.stdin)))')" 1 \
    "and no other was made"
r=$(ctl storm 200)
tb_assert_eq "$r" done "200 connections that close at once"
healthy "bad commands and a connection storm"

# ---------------------------------------------------------------- slow clients
# A client that sends no newline and holds on for 5 s: meanwhile another
# CLI call, a new connection out of the sandbox and a DNS query are timed.
ctl hold 5 &
holder=$!
sleep 0.3
status_ms > "$TB_DIR/hold.status" &
w1=$!
probe > "$TB_DIR/hold.probe" &
w2=$!
dns_ms > "$TB_DIR/hold.dns" &
w3=$!
wait "$holder" "$w1" "$w2" "$w3"
read -r st_rc st_ms < "$TB_DIR/hold.status"
read -r pr_res pr_ms < "$TB_DIR/hold.probe"
read -r dns_ans dns_ms < "$TB_DIR/hold.dns"
echo "while a client held the socket for 5 s without a newline:" \
    "status took ${st_ms} ms, a new connection ${pr_ms} ms, a DNS query ${dns_ms} ms"
tb_assert_eq "$pr_res" ok "the sandbox's connection succeeded meanwhile"
tb_assert_eq "$dns_ans" "$TB_ADDR_HTTPS" "and its DNS query"
tb_assert_le "$pr_ms" 500 "a new connection is decided while a control client holds (ms)"
tb_assert_le "$dns_ms" 500 "a DNS query is answered while a control client holds (ms)"
tb_assert_le "$st_ms" 1000 "another sluice status is answered while a control client holds (ms)"
healthy "a held request"

# The same, one byte every 1.5 s (each within the daemon's 2 s per read):
# 5 bytes, 7.5 s.
ctl trickle 5 &
holder=$!
sleep 0.3
read -r pr_res pr_ms <<< "$(probe)"
wait "$holder"
echo "while a client trickled a request in for 7.5 s: a new connection took ${pr_ms} ms"
tb_assert_eq "$pr_res" ok "the sandbox's connection succeeded in the end"
tb_assert_le "$pr_ms" 500 "a new connection is decided while a control client trickles (ms)"
healthy "a trickled request"

# ---------------------------------------------------------------- unprivileged
# TB_DIR is 0700: let others reach the socket, so its own mode decides.
chmod 0711 "$TB_DIR"
nobody() { setpriv --reuid nobody --regid nogroup --clear-groups "$@"; }
mode=$(stat -c '%a %U:%G' "$SOCK")
tb_assert_eq "$mode" "660 root:root" "the socket is 0660 root:root (no sluice group here)"
r=$(nobody env SOCK="$SOCK" "$TB_PY" "$TB_DIR/ctl.py" raw 'b"{\"cmd\":\"status\"}\n"')
echo "nobody, socket 0660 -> $r"
tb_assert_eq "$r" "connect: Permission denied" "nobody cannot connect"
out=$(nobody "$SLUICE" -s "$SOCK" sandbox del "${P}-a" 2>&1)
rc=$?
echo "nobody: sluice sandbox del -> exit $rc: $out"
tb_assert_eq "$rc" 3 "nobody's sluice CLI: exit 3 (unreachable)"
tb_assert_match "$out" "ermission denied" "and it says why"

chmod 0666 "$SOCK"
r=$(nobody env SOCK="$SOCK" "$TB_PY" "$TB_DIR/ctl.py" raw 'b"{\"cmd\":\"status\"}\n"')
echo "nobody, socket 0666, status -> $r"
tb_assert_eq "$r" "error failed: permission denied" "SO_PEERCRED: nobody's status is refused"
r=$(nobody env SOCK="$SOCK" "$TB_PY" "$TB_DIR/ctl.py" raw \
    "b'{\"cmd\":\"sandbox.del\",\"name\":\"${P}-a\"}\\n'")
echo "nobody, socket 0666, sandbox.del -> $r"
tb_assert_eq "$r" "error failed: permission denied" "SO_PEERCRED: nobody's sandbox.del is refused"
out=$(nobody "$SLUICE" -s "$SOCK" sandbox del "${P}-a" 2>&1)
rc=$?
echo "nobody: sluice sandbox del -> exit $rc: $out"
tb_assert_eq "$rc" 2 "nobody's CLI: exit 2 (refused)"
r=$(nobody env SOCK="$SOCK" "$TB_PY" "$TB_DIR/ctl.py" hold 3 >/dev/null 2>&1 &
    sleep 0.3; probe)
echo "nobody holding the socket: a new connection took ${r#* } ms"
tb_assert_le "${r#* }" 500 "nobody holding the socket stalls nothing (ms)"
chmod 0660 "$SOCK"
tb_assert_match "$(tb_sluice sandbox list)" "^${P}-a " "the sandbox survived nobody's attempts"
healthy "unprivileged requests"

# A member of the socket's group (here root, supplementary, as
# `usermod -aG` makes members) passes the socket's mode; ctl.h and the
# README say the daemon accepts the socket's group.
r=$(setpriv --reuid nobody --regid nogroup --groups 0 env SOCK="$SOCK" \
    "$TB_PY" "$TB_DIR/ctl.py" raw 'b"{\"cmd\":\"sandbox.list\"}\n"')
echo "nobody with the socket's group as a supplementary group -> $r"
tb_assert_match "$r" "^ok " "a supplementary member of the socket's group is accepted"
healthy "a group member's request"

# Newlines in what a request names (a sandbox, a policy's origin) reach
# the log as '?': they made lines of the client's choosing in the journal
# (found by review, 2026-12-03).
ctl raw 'b"{\"cmd\":\"policy.set\",\"name\":\"x\\nsluiced: sandbox prod-db deleted\\nsluiced: z\",\"policy\":\"{}\"}\n"' >/dev/null
ctl raw 'b"{\"cmd\":\"sandbox.add\",\"name\":\"ok1\",\"origin\":\"p\\nsluiced: sandbox prod-web added\\nq\",\"policy\":\"{\\\"x\\\":1}\"}\n"' >/dev/null
sleep 0.3
tail -n 4 "$TB_DIR/sluiced.log"
tb_check "no forged line in the log" bash -c "! grep -Eqx 'sluiced: sandbox (prod-db deleted|prod-web added)' '$TB_DIR/sluiced.log'"
tb_check "the names are logged with '?' for the newlines" grep -q 'x?sluiced: sandbox prod-db deleted?sluiced: z' "$TB_DIR/sluiced.log"
healthy "requests with newlines in their names"

# sandbox.list with a name: that sandbox alone, or none (sluice-cni asks
# so: the whole list outgrows a reply at some 6,400 sandboxes)
r=$(ctl reply "b'{\"cmd\":\"sandbox.list\",\"name\":\"${P}-a\"}\\n'")
tb_assert_eq "$(printf '%s' "$r" | "$TB_PY" -c 'import json,sys; print(" ".join(s["name"] for s in json.load(sys.stdin)["sandboxes"]))')" \
    "${P}-a" "sandbox.list by name: that one alone"
r=$(ctl reply 'b"{\"cmd\":\"sandbox.list\",\"name\":\"nosuch\"}\n"')
tb_assert_match "$r" '"sandboxes": ?\[\]' "sandbox.list by a name no sandbox has: none"
tb_done
