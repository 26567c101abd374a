#!/bin/bash
# 66-kernel-both-load: with both kernel switches on (--kernel-syn,
# --kernel-sni), 16 clients opening TLS connections as fast as they can
# for 2 s. Each connection's SYN and hello pass in the kernel and come to
# sluiced as copies, and the servers' answers as copies too, so reading
# one kind of copy finds the other waiting: a server's answer to a hello
# whose copy is not read yet is put off until it is, never read from
# inside the other read (until 2026-12-02 it was, and sluiced crashed
# within a second: each read's buffers overwritten under the other's
# feet). Checked: every connection answered by the server (a handshake
# record, read by the client), sluiced still running, no first flight
# without its state, one row each.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init kernel-both-load
CONNBENCH=${CONNBENCH:-$REPO/build/connbench}
[ -x "$CONNBENCH" ] || { tb_fail "no $CONNBENCH (make build/connbench)"; tb_done; }
tb_internet_up || { tb_fail "test bed up"; tb_done; }
tb_sluiced_start --kernel-syn on --kernel-sni on --limit-conn-rate 0 \
    --limit-holds 0 || { tb_fail "sluiced up"; tb_done; }
# the first hello is queued and learned: the rest may pass in the kernel
tb_tls_load_bed a
id0=$(tb_sql "SELECT coalesce(max(id), 0) FROM flows")
tb_in a "$CONNBENCH" -m tls -a "$TB_ADDR_HTTPS" -p 443 -n a.test \
    -H "$TB_DIR/hello.bin" -c 16 -d 2 -t 3000 > "$TB_DIR/cb.out" 2>&1
cb() { "$TB_PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$TB_DIR/cb.out" "$1"; }
ok=$(cb ok)
tb_check "sluiced still runs" kill -0 "$TB_SLUICED_PID"
tb_check "a load was made ($ok connections answered)" [ "${ok:-0}" -gt 500 ]
tb_assert_eq "$(cb errors)" 0 "no connection failed (timeouts $(cb err_timeout), resets $(cb err_reset))"
tb_check "their hellos went out in the kernel (kernel_sni.approved $(tb_status kernel_sni.approved))" \
    [ "$(tb_status kernel_sni.approved)" -gt 100 ]
tb_assert_eq "$(tb_status kernel_sni.overruled)" 0 "none overruled"
tb_assert_eq "$(grep -c 'no inspection state' "$TB_DIR/sluiced.log")" 0 \
    "no first flight without its state"
tb_wait_rows "SELECT count(*) FROM flows WHERE id > $id0 AND sni = 'a.test'" "$ok" >/dev/null
tb_assert_eq "$(tb_sql "SELECT verdict, reason, count(*) FROM flows WHERE id > $id0 GROUP BY 1, 2")" \
    "allow|allowed_domain|$ok" "one row each, allowed"
tb_check "sluiced stops" tb_sluiced_term
tb_done
