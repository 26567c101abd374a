#!/bin/bash
# 45-capture-denied: with --capture-denied DIR, the first packets of every
# denied flow (and refused DNS queries) land in DIR/SANDBOX.pcap, readable
# by libpcap tools, and nothing of an allowed flow does; the capture
# replays to the same denials.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init capture-denied
tb_internet_up || { tb_fail "test bed up"; tb_done; }
tb_sluiced_start --capture-denied "$TB_DIR/pcap" || { tb_fail "sluiced up"; tb_done; }

cat > "$TB_DIR/policy.json" <<EOF
{"network": {"allowedDomains": ["a.test", "*.evil.test"]}}
EOF
tb_check "sandbox add" tb_sandbox_add a "$TB_DIR/policy.json"
for n in a.test x.evil.test; do tb_in a dig +short $n >/dev/null; done
tb_in a dig +short nope.test >/dev/null
out=$(tb_in a curl -s --max-time 5 --cacert "$TB_CA" https://a.test/)
tb_assert_eq "$out" "hello from a.test" "the allowed flow works"
echo captured-secret | tb_in a nc -w 2 "$TB_ADDR_HTTPS" 8443 >/dev/null 2>&1
tb_assert_eq "$(tb_in a "$TB_PY" "$TB_LIB/tlsclient.py" "$TB_ADDR_ATK" 443 --sni a.test)" "reset" \
    "a.test's SNI to the attacker is reset"

pcap="$TB_DIR/pcap/${P}-a.pcap"
tb_check "the sandbox's pcap exists" [ -s "$pcap" ]
summary=$("$TB_PY" - "$pcap" <<'EOF'
import socket, struct, sys
data = open(sys.argv[1], "rb").read()
magic, _, _, _, _, _, link = struct.unpack("<IHHiIII", data[:24])
assert magic == 0xa1b2c3d4, hex(magic)
off, out = 24, []
while off < len(data):
    _, _, incl, _ = struct.unpack("<IIII", data[off:off + 16])
    pkt = data[off + 16:off + 16 + incl]
    off += 16 + incl
    ihl = (pkt[0] & 15) * 4
    proto, dst = pkt[9], socket.inet_ntoa(pkt[16:20])
    dport = struct.unpack(">H", pkt[ihl + 2:ihl + 4])[0]
    body = pkt[ihl + (8 if proto == 17 else (pkt[ihl + 12] >> 4) * 4):]
    tag = "hello" if b"a.test" in body else ("dns:nope" if b"nope" in body else "")
    out.append("%d %s:%d %s" % (proto, dst, dport, tag))
print("link=%d" % link)
print("\n".join(sorted(set(out))))
EOF
)
echo "$summary"
tb_assert_match "$summary" "link=(101|12|228)" "raw IPv4 link type"
tb_assert_match "$summary" "6 $TB_ADDR_HTTPS:8443" "the denied SYN to port 8443"
tb_assert_match "$summary" "6 $TB_ADDR_ATK:443 hello" "the held ClientHello of the denied TLS flow"
tb_assert_match "$summary" "17 10.213.0.1:53 dns:nope" "the refused DNS query"
tb_check "nothing of the allowed flow" bash -c "! grep -q '$TB_ADDR_HTTPS:443' <<<'$summary'"

out=$("$SLUICE" replay --policy "$TB_DIR/policy.json" -j "$pcap" 2>&1)
tb_assert_match "$out" '"dst_port": ?8443.*"verdict": ?"deny"|"verdict": ?"deny".*"dst_port": ?8443' "replay denies the 8443 flow too"
tb_done
