#!/bin/bash
# 24-resyn-earlier-isn: after its handshake (ISN I) the sandbox sends a
# second SYN on the same 5-tuple with ISN I - d, d the length of a decoy
# (a ClientHello or request head for the allowed a.test), and then one
# segment from I - d + 1 carrying the decoy and the real first flight
# (b.test, on a.test's address, not allowed). conntrack tracks the 5-tuple
# already and ignores the SYN; the server, still holding the connection,
# answers it with an ACK of the old one and trims what lies before its
# next byte, so it reads only the real flight. (found by review,
# 2026-11-30): sluiced started a new flight at I - d + 1, read the decoy,
# and the server's ACK of the whole segment then passed as the proof that
# it took what was read: nginx served b.test, and the rows said a.test.
# Now a SYN conntrack did not take as new comes marked stale and no flight
# is held from it: it goes with its row and no mark, and the real flight
# is read from the connection's true start and refused. Run with the
# kernel-SYN set off (the default) and on.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init adv-resyn
tb_internet_up || { tb_fail "test bed up"; tb_done; }

cat > "$TB_DIR/policy.json" <<EOF
{"network": {"allowedDomains": ["a.test"]}}
EOF
for ks in off on; do
	tb_sluiced_start --kernel-syn "$ks" || { tb_fail "sluiced up (--kernel-syn $ks)"; continue; }
	tb_check "sandbox add ($ks)" tb_sandbox_add "a$ks" "$TB_DIR/policy.json"
	tb_assert_eq "$(tb_in "a$ks" dig +short a.test)" "$TB_ADDR_HTTPS" "a.test resolves ($ks)"
	raw() { tb_in "a$ks" "$TB_PY" "$TB_LIB/rawtcp.py" "$TB_ADDR_HTTPS" "$@" --sni a.test --sni2 b.test; }
	id0=$(tb_sql "SELECT coalesce(max(id), 0) FROM flows")
	out=$(raw 443 resyn)
	tb_assert_match "$out" "^result=reset d=" "--kernel-syn $ks: TLS, the real hello after an earlier SYN is reset ($out)"
	out=$(raw 80 resyn --http)
	tb_assert_match "$out" "^result=reset d=" "--kernel-syn $ks: HTTP, the real head after an earlier SYN is reset ($out)"
	sleep 0.3
	tb_assert_eq "$(grep -c 'b.test' "$TB_DIR/nginx.access.log")" 0 "--kernel-syn $ks: nginx never served b.test"
	tb_wait_rows "SELECT count(*) FROM flows WHERE id > $id0" 4 >/dev/null
	# the SYN's row (its decision, no name yet), then the real flight's
	tb_assert_eq "$(tb_sql "SELECT dst_port, verdict, reason, ifnull(sni, '-'), ifnull(http_host, '-')
	    FROM flows WHERE id > $id0 ORDER BY id")" \
"443|allow|allowed_domain|-|-
443|deny|sni_not_allowed|b.test|-
80|allow|allowed_domain|-|-
80|deny|host_not_allowed|-|b.test" "--kernel-syn $ks: the rows"
	tb_check "sluiced stops ($ks)" tb_sluiced_term
done
tb_assert_eq "$(tb_attacker_packet_count)" 0 "the attacker received nothing"
tb_done
