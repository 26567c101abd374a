#!/bin/bash
# 45-capture-denied: with --capture-denied DIR, the first packets of every
# denied flow (and refused DNS queries) land in DIR/SANDBOX.pcap, readable
# by libpcap tools, and nothing of an allowed flow does; the capture
# replays to the same denials. --capture-denied-total bounds the directory:
# at start-up the oldest file of a sandbox that no longer exists goes, and
# files that are not captures stay.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init capture-denied
tb_internet_up || { tb_fail "test bed up"; tb_done; }
# 2.5 MiB of a deleted sandbox's captures against a 2 MiB bound: its older
# file (1.5 MiB) goes, which leaves 1 MiB, under 7/8 of the bound
mkdir -p "$TB_DIR/pcap"
head -c $((3 << 19)) /dev/zero > "$TB_DIR/pcap/${P}-gone.pcap.1"
head -c $((1 << 20)) /dev/zero > "$TB_DIR/pcap/${P}-gone.pcap"
head -c $((3 << 20)) /dev/zero > "$TB_DIR/pcap/notes.txt"
touch -d '2 days ago' "$TB_DIR/pcap/${P}-gone.pcap.1" "$TB_DIR/pcap/notes.txt"
touch -d '1 day ago' "$TB_DIR/pcap/${P}-gone.pcap"
tb_sluiced_start --capture-denied "$TB_DIR/pcap" --capture-denied-total 2 ||
    { tb_fail "sluiced up"; tb_done; }
for _ in $(seq 50); do
	grep -q 'past --capture-denied-total' "$TB_DIR/sluiced.log" && break
	sleep 0.1
done
tb_assert_match "$(cat "$TB_DIR/sluiced.log")" \
    "past --capture-denied-total \(2 MiB\): 1 file\(s\) removed" \
    "the bound's removal is logged"
tb_check "a gone sandbox's oldest file is removed" \
    [ ! -e "$TB_DIR/pcap/${P}-gone.pcap.1" ]
tb_check "its newer file stays (the total is under the bound)" \
    [ -e "$TB_DIR/pcap/${P}-gone.pcap" ]
tb_check "a file that is no capture stays" [ -e "$TB_DIR/pcap/notes.txt" ]

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
