#!/bin/bash
# 22-ip-fragments: a ClientHello sent inside IP fragments (tests/lib/
# rawtcp.py, DF clear, MF set, down to 8-byte fragments that cut the TCP
# header itself). The gateway's conntrack reassembles before the queue, so
# the verdict is the one the whole packet gets: allowed for a.test's SNI on
# a.test's bound address, sni_binding_mismatch for a.test's SNI on the
# attacker's bound address. A datagram that never completes (only its
# first fragment) or whose fragments overlap with different bytes is never
# reassembled and never passes; no fragment of any of them reaches the
# attacker.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init adv-ip-fragments
tb_internet_up || { tb_fail "test bed up"; tb_done; }
tb_sluiced_start || { tb_fail "sluiced up"; tb_done; }

cat > "$TB_DIR/policy.json" <<EOF
{"network": {"allowedDomains": ["a.test", "x.evil.test"]}}
EOF
tb_check "sandbox add" tb_sandbox_add a "$TB_DIR/policy.json"
tb_assert_eq "$(tb_in a dig +short a.test)" "$TB_ADDR_HTTPS" "a.test resolves"
tb_assert_eq "$(tb_in a dig +short x.evil.test)" "$TB_ADDR_ATK" "x.evil.test resolves"
raw() { tb_in a "$TB_PY" "$TB_LIB/rawtcp.py" "$@" --sni a.test --sni2 b.test; }

# the same hello unfragmented, for comparison
tb_assert_eq "$(raw "$TB_ADDR_HTTPS" 443 overlap --how once)" "result=answered cert=a.test" \
    "unfragmented, to a.test's address: allowed"
out=$(raw "$TB_ADDR_HTTPS" 443 frag --frag-size 64)
tb_assert_match "$out" "^result=answered cert=a.test frags_out=[3-9]$" \
    "in 64-byte fragments, to a.test's address: allowed, a.test served"
out=$(raw "$TB_ADDR_HTTPS" 443 frag --frag-size 8)
tb_assert_match "$out" "^result=answered cert=a.test frags_out=[0-9]{2}$" \
    "in 8-byte fragments (the TCP header cut in three): allowed"

a0=$(tb_attacker_packet_count)
r0=$(tb_attacker_packet_count flags=R)
out=$(raw "$TB_ADDR_ATK" 443 frag --frag-size 64)
tb_assert_match "$out" "^result=reset frags_out=[3-9]$" \
    "a.test's SNI in fragments to the attacker's address: reset"
out=$(raw "$TB_ADDR_ATK" 443 frag --frag-size 8)
tb_assert_match "$out" "^result=reset frags_out=[0-9]{2}$" "in 8-byte fragments too"
out=$(raw "$TB_ADDR_ATK" 443 frag --only-first --wait 1)
tb_assert_eq "$out" "result=timeout frags_out=1" \
    "only the first fragment: nothing comes back"
out=$(raw "$TB_ADDR_ATK" 443 frag --frag-overlap --wait 1)
tb_assert_match "$out" "^result=timeout frags_out=[4-9]$" \
    "fragments overlapping with another name: nothing comes back"
sleep 0.5
tb_assert_eq "$(tb_attacker_packet_count proto=frag)" 0 "no fragment reached the attacker"
tb_assert_eq "$(tb_attacker_payload_bytes)" 0 "no payload byte reached the attacker"
tb_assert_eq "$(( $(tb_attacker_packet_count) - a0 - $(tb_attacker_packet_count flags=R) + r0 ))" 8 \
    "the attacker saw only the four handshakes (SYN and ACK each), and the resets of those refused"
tb_assert_eq "$(tb_upstream_queries)" 2 "the upstream saw only the two lookups"

tb_wait_rows "SELECT count(*) FROM flows" 5 >/dev/null
tb_assert_eq "$(tb_sql "SELECT dst_ip, verdict, reason, ifnull(sni, '-') FROM flows ORDER BY id")" \
"$TB_ADDR_HTTPS|allow|allowed_domain|a.test
$TB_ADDR_HTTPS|allow|allowed_domain|a.test
$TB_ADDR_HTTPS|allow|allowed_domain|a.test
$TB_ADDR_ATK|deny|sni_binding_mismatch|a.test
$TB_ADDR_ATK|deny|sni_binding_mismatch|a.test" \
    "rows as for unfragmented hellos; the incomplete ones are still held, undecided"
tb_done
