#!/bin/bash
# 31-metadata-spellings: the cloud metadata address in every spelling a
# URL parser accepts — dotted, one decimal number, hex, octal, mixed
# forms, IPv4-mapped IPv6 — is the same IPv4 address by the time it is a
# packet: each attempt fails at once with one row (no_dns_binding with
# allowedDomains, not_allowlisted without). The AWS IPv6 endpoint has no
# route at all (no row); the metadata names get NXDOMAIN. Here
# 169.254.169.254 really exists — on the attacker host — so nothing
# reaching it would go unseen; a host outside sluice reaches it (control).
. "$(dirname "$0")/../lib/testbed.sh"
tb_init adv-metadata-spellings
tb_internet_up || { tb_fail "test bed up"; tb_done; }
tb_sluiced_start || { tb_fail "sluiced up"; tb_done; }

MD=169.254.169.254
ip -n "$TB_NETNS_ATK" addr add "$MD/32" dev eth0
ip -n "$TB_NETNS_INET" route add "$MD/32" via "$TB_ADDR_ATK"

cat > "$TB_DIR/a.json" <<EOF
{"network": {"allowedDomains": ["a.test"]}}
EOF
cat > "$TB_DIR/b.json" <<EOF
{"sluice": {"allowedCidrs": ["192.0.2.10/32"]}}
EOF
tb_check "sandbox a (names)" tb_sandbox_add a "$TB_DIR/a.json"
tb_check "sandbox b (addresses only)" tb_sandbox_add b "$TB_DIR/b.json"

urls="http://$MD/ http://2852039166/ http://0xa9fea9fe/ http://0251.0376.0251.0376/
    http://169.254.43518/ http://169.16689662/ http://0xa9.0xfe.0xa9.0xfe/
    http://[::ffff:$MD]/ http://[::ffff:a9fe:a9fe]/"
n=0
for sb in a b; do
	for u in $urls; do
		t0=$(tb_time_ms)
		tb_in $sb curl -s --max-time 3 -H 'Metadata-Flavor: Google' \
		    "${u}latest/meta-data/" >/dev/null 2>&1
		rc=$?
		tb_assert_eq "$rc" 7 "$sb: $u refused (curl exit 7)"
		tb_assert_le $(( $(tb_time_ms) - t0 )) 1000 "$sb: at once"
		n=$((n + 1))
	done
done
tb_in a curl -s --max-time 2 'http://[fd00:ec2::254]/latest/meta-data/' >/dev/null 2>&1
tb_assert_eq "$?" 7 "the AWS IPv6 endpoint: no route"
for name in metadata.google.internal metadata instance-data.ec2.internal; do
	out=$(tb_in a dig +time=2 +tries=1 "$name" 2>&1)
	tb_assert_match "$out" "status: NXDOMAIN" "$name: NXDOMAIN"
done
sleep 0.5
tb_assert_eq "$(tb_attacker_packet_count dst=$MD)" 0 "nothing from a sandbox reached $MD"
tb_assert_eq "$(tb_attacker_packet_count)" 0 "nor anything else on the attacker host"
tb_assert_eq "$(tb_upstream_queries)" 0 "the upstream heard no metadata name"

# the control: outside sluice, the same URL reaches the far side
tb_inet_client c || tb_fail "a client on the internet side"
tb_in c curl -s --max-time 3 --http0.9 "http://$MD/" -d control >/dev/null 2>&1
tb_wait_count 1 3 tb_attacker_conn_count dst=$MD >/dev/null
tb_assert_eq "$(tb_attacker_conn_count dst=$MD)" 1 \
    "(a host on the internet side does reach $MD: the far side listens)"

tb_wait_rows "SELECT count(*) FROM flows" $n >/dev/null
tb_assert_eq "$(tb_sql "SELECT substr(sandbox, -1), proto, dst_ip, dst_port, verdict, reason,
    count(*) FROM flows GROUP BY 1, 2, 3, 4, 5, 6 ORDER BY 1")" \
"a|tcp|$MD|80|deny|no_dns_binding|9
b|tcp|$MD|80|deny|not_allowlisted|9" "one row per spelling, all the same IPv4 address"
tb_assert_eq "$(tb_sql "SELECT qname, rcode, reason FROM dns_queries WHERE qtype = 'A' ORDER BY id")" \
"metadata.google.internal|NXDOMAIN|not_allowlisted
metadata|NXDOMAIN|not_allowlisted
instance-data.ec2.internal|NXDOMAIN|not_allowlisted" "the metadata names' rows"
tb_done
