#!/bin/bash
# 20-retransmit-other-name: TCP segments that carry the same stream bytes
# twice, with a different SNI in the second copy (tests/lib/rawtcp.py
# builds them by hand). While the ClientHello is incomplete, a copy that
# disagrees is malformed_tls, in order or reordered, and nothing reaches
# the far side; a copy sent after a complete hello was decided finds the
# connection allowed and the server holding the first bytes, which it
# proves by serving the certificate of the name sluice read.
# (A first copy the server never keeps is another matter: see
# 21-tcp-insertion.) The copies after a complete hello wait 0.3 s, as a
# retransmission would: sent at once, the copy can reach the queue before
# the allow verdict's connection mark is saved, finds no inspection state
# and resets the allowed connection (no_inspection_state) — fail-closed,
# but it hits a client that sends anything right behind its hello.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init adv-retransmit-other-name
tb_internet_up || { tb_fail "test bed up"; tb_done; }
tb_sluiced_start || { tb_fail "sluiced up"; tb_done; }

# b.test shares a.test's address and is not allowed; x.evil.test binds
# the attacker's address
cat > "$TB_DIR/policy.json" <<EOF
{"network": {"allowedDomains": ["a.test", "x.evil.test"]}}
EOF
tb_check "sandbox add" tb_sandbox_add a "$TB_DIR/policy.json"
tb_assert_eq "$(tb_in a dig +short a.test)" "$TB_ADDR_HTTPS" "a.test resolves"
tb_assert_eq "$(tb_in a dig +short x.evil.test)" "$TB_ADDR_ATK" "x.evil.test resolves"
raw() { tb_in a "$TB_PY" "$TB_LIB/rawtcp.py" "$@" --sni a.test --sni2 b.test; }

# to the shared address: the server's certificate says which name it got
tb_assert_eq "$(raw "$TB_ADDR_HTTPS" 443 overlap --how same --gap 0.3)" \
    "result=answered cert=a.test" "an identical retransmission: allowed, a.test served"
tb_assert_eq "$(raw "$TB_ADDR_HTTPS" 443 overlap --how reorder)" \
    "result=answered cert=a.test" "the two halves in reverse order: allowed, a.test served"
tb_assert_eq "$(raw "$TB_ADDR_HTTPS" 443 overlap --how partial)" \
    "result=reset" "a later segment rewriting the name: reset"
tb_assert_eq "$(raw "$TB_ADDR_HTTPS" 443 overlap --how reorder-conflict)" \
    "result=reset" "the rewritten name first, the original after: reset"
tb_assert_eq "$(raw "$TB_ADDR_HTTPS" 443 overlap --how full --gap 0.3)" \
    "result=answered cert=a.test" "a whole second hello after the verdict: the server keeps the first (a.test)"

# to the attacker's bound address: nothing of a disagreeing flight goes
tb_assert_eq "$(raw "$TB_ADDR_ATK" 443 overlap --how partial)" \
    "result=reset" "to the attacker, a rewritten name: reset"
tb_assert_eq "$(raw "$TB_ADDR_ATK" 443 overlap --how reorder-conflict)" \
    "result=reset" "to the attacker, reordered and rewritten: reset"
sleep 0.5
tb_assert_eq "$(tb_attacker_payload_bytes proto=tcp)" 0 \
    "the attacker received the handshakes but no payload byte"
tb_assert_eq "$(tb_attacker_packet_count proto=tcp flags=S)" 2 \
    "(it did receive both SYNs: the far side was listening)"
tb_assert_eq "$(tb_upstream_queries)" 2 "the upstream saw only the two lookups"

tb_wait_rows "SELECT count(*) FROM flows" 7 >/dev/null
tb_assert_eq "$(tb_sql "SELECT dst_ip, verdict, reason, ifnull(sni, '-') FROM flows ORDER BY id")" \
"$TB_ADDR_HTTPS|allow|allowed_domain|a.test
$TB_ADDR_HTTPS|allow|allowed_domain|a.test
$TB_ADDR_HTTPS|deny|malformed_tls|-
$TB_ADDR_HTTPS|deny|malformed_tls|-
$TB_ADDR_HTTPS|allow|allowed_domain|a.test
$TB_ADDR_ATK|deny|malformed_tls|-
$TB_ADDR_ATK|deny|malformed_tls|-" "one row per connection, each disagreeing overlap malformed_tls"
tb_done
