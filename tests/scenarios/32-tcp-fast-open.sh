#!/bin/bash
# 32-tcp-fast-open: data carried in a SYN (TCP Fast Open, no cookie needed
# as the sandbox is configured) is part of the first flight: it waits for
# the verdict like any other byte, and a denied one never leaves.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init tcp-fast-open
tb_internet_up || { tb_fail "test bed up"; tb_done; }
tb_sluiced_start || { tb_fail "sluiced up"; tb_done; }

cat > "$TB_DIR/policy.json" <<EOF
{"network": {"allowedDomains": ["a.test", "*.evil.test"]}}
EOF
tb_check "sandbox add" tb_sandbox_add a "$TB_DIR/policy.json"
# 1: client TFO on, 4: send data in the SYN without a cookie
tb_in a sysctl -qw net.ipv4.tcp_fastopen=5
for n in a.test x.evil.test; do tb_in a dig +short $n >/dev/null; done

tfo() {	# tfo ADDR SNI: a ClientHello in the SYN; prints what came back
	tb_in a "$TB_PY" - "$TB_LIB" "$1" "$2" <<'EOF'
import socket, sys
sys.path.insert(0, sys.argv[1])
import tlsclient
hello = tlsclient.python_hello(sys.argv[3], "")
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.settimeout(3)
try:
    s.sendto(hello, socket.MSG_FASTOPEN, (sys.argv[2], 443))
    print("answered" if s.recv(4096) else "closed")
except ConnectionResetError:
    print("reset")
except ConnectionRefusedError:
    print("refused")
except socket.timeout:
    print("timeout")
EOF
}
atk_syn_data() {
	"$TB_PY" -c 'import json,sys
print(sum(r.get("len", 0) for r in map(json.loads, open(sys.argv[1])) if r.get("proto") == "tcp"))' \
	    "$TB_DIR/attacker.packets"
}

tb_assert_eq "$(tfo "$TB_ADDR_HTTPS" a.test)" "answered" "an allowed hello in the SYN is decided and goes"
out=$(tfo "$TB_ADDR_ATK" a.test)
tb_check "an allowed name's hello in a SYN to the attacker is refused ($out)" \
    [ "$out" = refused -o "$out" = reset ]
sleep 0.5
tb_assert_eq "$(atk_syn_data)" 0 "the attacker received no byte of it, not even in the SYN"
tb_wait_rows "SELECT count(*) FROM flows WHERE dst_port = 443" 2 >/dev/null
tb_assert_eq "$(tb_sql "SELECT dst_ip, verdict, reason, sni FROM flows WHERE dst_port = 443 ORDER BY id")" \
"$TB_ADDR_HTTPS|allow|allowed_domain|a.test
$TB_ADDR_ATK|deny|sni_binding_mismatch|a.test" "both decided on the SNI in the SYN"
tb_done
