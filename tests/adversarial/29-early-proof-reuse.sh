#!/bin/bash
# 29-early-proof-reuse: with --kernel-sni on, a server's copy read before
# the hello it proves is kept, keyed by the 5-tuple (the early table,
# inspect.c). Connection A to a.test is proven, its server's later
# copies land there, and A is reset; connection B from the same port
# picks its ISN so that its hello ends where A's ACK points, raises the
# server's timestamp with a bare ACK (it passes in the kernel), and sends
# an a.test hello with an older timestamp: the kernel program lets it
# through, the server drops it (PAWS). (found by review, 2026-12-03)
# sluiced took A's ACK for B's proof: the allow mark, and B's next hello,
# for b.test (refused), passed unread; nginx served b.test and the log had
# only allow rows for a.test. Now a kept copy proves only a connection
# that began before its server's packet was logged (the kernel's global
# count of NFLOG copies): A's is dropped (copies.older), and b.test's
# hello is read and refused. Checked at nginx: no b.test. (Since the
# HelloRetryRequest check a proof also needs the first bytes of the
# server's answer, which B's server never sends.)
. "$(dirname "$0")/../lib/testbed.sh"
tb_init adv-early-proof
tb_internet_up || { tb_fail "test bed up"; tb_done; }
tb_sluiced_start --kernel-sni on --copy-interval 5 || { tb_fail "sluiced up"; tb_done; }
cat > "$TB_DIR/policy.json" <<EOF
{"network": {"allowedDomains": ["a.test"]}}
EOF
tb_check "sandbox add" tb_sandbox_add a "$TB_DIR/policy.json"
tb_assert_eq "$(tb_in a dig +short a.test)" "$TB_ADDR_HTTPS" "a.test resolves"
out=$(tb_in a curl -s --max-time 5 --cacert "$TB_CA" https://a.test/)
tb_assert_eq "$out" "hello from a.test" "a first a.test connection (queued: the kernel program learns a.test)"
for i in 1 2 3 4 5 6; do
	out=$(tb_in a "$TB_PY" "$TB_LIB/earlyproof.py" "$TB_ADDR_HTTPS" --sni a.test --sni2 b.test)
	echo "try $i: $out early_used=$(tb_status copies.early_used) older=$(tb_status copies.older)"
	tb_assert_match "$out" "." "try $i ran"
	case $out in
	*cert=b.test*) tb_fail "try $i: the server answered b.test's hello ($out)" ;;
	*) tb_pass "try $i: b.test's hello did not reach the server's TLS" ;;
	esac
done
# Since a TLS proof needs the server's answer's first bytes too (the
# HelloRetryRequest check, adversarial 60), A's answer is read by A's own
# hold, and what B finds kept is an ACK alone at most: told apart as
# older, or proving nothing without B's server's bytes. Either way no
# kept copy may have let B go.
tb_assert_eq "$(tb_status copies.early_used)" 0 "no kept copy proved B (copies.older: $(tb_status copies.older))"
sleep 0.5
tb_assert_eq "$(grep -c 'sni=b.test' "$TB_DIR/nginx.access.log")" 0 "nginx served nothing for b.test"
tb_assert_eq "$(tb_sql "SELECT count(*) FROM flows WHERE sni = 'b.test' AND verdict = 'allow'")" 0 \
    "no row allows b.test"
tb_done
