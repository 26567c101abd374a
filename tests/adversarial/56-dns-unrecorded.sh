#!/bin/bash
# 56-dns-unrecorded: DNS that the resolver cannot serve still leaves a
# trace (found by review, 2026-11-30: each of these had no row), and one
# sandbox cannot take the TCP slots of the others. Sandboxes a to d hold
# 16 idle TCP connections each, every one of the 64 served slots (a
# sandbox may hold 16 at most); a 17th of a's, with a query, is refused
# while b to d are still connecting; then ten more from sandbox e each
# send a query for an allowed name: each is answered REFUSED, has its row
# (tcp_conn_limit) and never reaches the upstream. Broken TCP framing (a
# length of 0, a length beyond 4096 before a query for an allowed name, a
# message cut short by the client's end) gets FORMERR and a malformed row
# each, and nothing upstream. UDP queries the kernel drops while sluiced
# is frozen (SIGSTOP: its socket's buffer fills) are counted in
# lost_records (kind dns, reason kernel_dropped), as many as `sluice
# status` says.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init adv-dns-unrecorded
tb_internet_up || { tb_fail "test bed up"; tb_done; }
tb_sluiced_start || { tb_fail "sluiced up"; tb_done; }

cat > "$TB_DIR/policy.json" <<EOF
{"network": {"allowedDomains": ["plain.test", "*.plain.test"]}}
EOF
for sb in a b c d e; do
	tb_check "sandbox add $sb" tb_sandbox_add $sb "$TB_DIR/policy.json"
done
gw=$(tb_sandbox_field a gateway)
: > "$TB_DIR/dns.log"

cat > "$TB_DIR/dns.py" <<'EOF'
import os, socket, struct, sys, time
gw, what = sys.argv[1], sys.argv[2]
def q(qid, name):
    m = struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    m += b"".join(bytes([len(l)]) + l.encode() for l in name.split("."))
    return m + b"\0" + struct.pack(">HH", 1, 1)
def framed(m, n=None):
    return struct.pack(">H", len(m) if n is None else n) + m
def rcode(s):
    buf = b""
    s.settimeout(3)
    try:
        while len(buf) < 2 or len(buf) < 2 + struct.unpack(">H", buf[:2])[0]:
            b = s.recv(4096)
            if not b:
                break
            buf += b
    except OSError:
        pass
    return str(buf[5] & 15) if len(buf) >= 6 else "none"
def conn():
    return socket.create_connection((gw, 53), timeout=5)
def ask(name, qid):
    s = conn()
    s.sendall(framed(q(qid, name)))
    r = rcode(s)
    s.close()
    return r
if what == "hold":
    # 16 connections, held until the file argv[3] exists (6 s at most)
    held = [conn() for i in range(16)]
    open(sys.argv[3] + ".up", "w").close()
    for _ in range(300):
        if os.path.exists(sys.argv[3]):
            break
        time.sleep(0.02)
elif what == "share":
    held = [conn() for i in range(16)]
    time.sleep(0.3)
    print("share", ask("share.plain.test", 99))
    open(sys.argv[3] + ".up", "w").close()
    for _ in range(300):
        if os.path.exists(sys.argv[3]):
            break
        time.sleep(0.02)
elif what == "over":
    print("over", " ".join(ask("over%d.plain.test" % i, 100 + i) for i in range(10)))
else:
    got = []
    s = conn()
    s.sendall(b"\0\0")
    got.append(rcode(s))
    s.close()
    s = conn()
    s.sendall(framed(q(7, "big.plain.test"), 5000))
    got.append(rcode(s))
    s.close()
    s = conn()
    m = q(8, "cut.plain.test")
    s.sendall(framed(m, len(m) + 10))
    s.shutdown(socket.SHUT_WR)
    got.append(rcode(s))
    s.close()
    print("framing", " ".join(got))
EOF
dns() { local sb=$1; shift; tb_in $sb "$TB_PY" "$TB_DIR/dns.py" "$gw" "$@"; }
# a first, alone: its 17th connection is over its share with 48 slots free
dns a share "$TB_DIR/a" > "$TB_DIR/share.out" &
pids=$!
for _ in $(seq 1 150); do [ -e "$TB_DIR/a.up" ] && break; sleep 0.02; done
for sb in b c d; do
	dns $sb hold "$TB_DIR/$sb" &
	pids="$pids $!"
done
for sb in b c d; do
	for _ in $(seq 1 150); do [ -e "$TB_DIR/$sb.up" ] && break; sleep 0.02; done
done
over=$(dns e over)
touch "$TB_DIR/a" "$TB_DIR/b" "$TB_DIR/c" "$TB_DIR/d"
wait $pids
tb_assert_eq "$(cat "$TB_DIR/share.out")" "share 5" \
    "a 17th connection of one sandbox: REFUSED, while 48 slots were free"
tb_assert_eq "$over" "over 5 5 5 5 5 5 5 5 5 5" \
    "every served slot held by a to d: e's queries are REFUSED"
sleep 0.5
tb_assert_eq "$(dns e framing)" "framing 1 1 1" "FORMERR for broken framing"
tb_wait_rows "SELECT count(*) FROM dns_queries WHERE proto = 'tcp'" 14 5 >/dev/null
tb_assert_eq "$(tb_sql "SELECT reason, rcode, verdict, count(*), count(DISTINCT qname)
    FROM dns_queries WHERE proto = 'tcp' GROUP BY 1, 2, 3 ORDER BY 1")" \
"malformed|FORMERR|deny|3|1
tcp_conn_limit|REFUSED|deny|11|11" "a row for each, the refused ones with their names"
tb_assert_eq "$(tb_sql "SELECT count(*) FROM dns_queries WHERE qname LIKE 'over_.plain.test'
    AND sandbox = '${P}-e'")" 10 "the refused queries' names are on record, as e's"
tb_assert_eq "$(tb_upstream_queries 'over|big|cut|share')" 0 "none of them reached the upstream"
tb_assert_eq "$(tb_status dns.tcp_refused)" 11 \
    "sluice status counts the refused connections"

# UDP: sluiced frozen, a burst well beyond its socket's 4 MiB
kill -STOP "$TB_SLUICED_PID"
tb_in a "$TB_PY" - "$gw" <<'EOF'
import socket, struct, sys
gw = sys.argv[1]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for i in range(20000):
    m = struct.pack(">HHHHHH", i, 0x0100, 1, 0, 0, 0)
    m += b"\x05flood\x04evil\x04test\0" + struct.pack(">HH", 1, 1)
    s.sendto(m, (gw, 53))
EOF
sleep 0.3
kill -CONT "$TB_SLUICED_PID"
sleep 1
# the next datagram read carries the kernel's count of drops
tb_in a dig +short +time=2 +tries=1 @"$gw" after.evil.test >/dev/null
dropped=$(tb_status dns.kernel_dropped)
echo "kernel dropped $dropped queries"
tb_assert_le 1 "${dropped:-0}" "the kernel dropped some of the burst"
tb_assert_eq "$(tb_wait_rows "SELECT coalesce(sum(count), 0) FROM lost_records
    WHERE kind = 'dns' AND reason = 'kernel_dropped'" "$dropped" 5)" "$dropped" \
    "each is counted in lost_records"
tb_assert_eq "$(tb_sql "SELECT count(*) FROM lost_records WHERE reason <> 'kernel_dropped'")" \
    0 "nothing else was lost"
tb_check "sluiced is alive" kill -0 "$TB_SLUICED_PID"
tb_done
