#!/bin/bash
# 55-port-reuse: a client reuses its source port while the gateway's
# conntrack still holds the old connection in a state it will not reopen
# from: the old one was ended by the client's reset, and a stray ACK of it
# followed the reset, so conntrack's "the last packet was a reset" reopen
# fails and it ignores the new SYN (ctstate is not NEW). Such a SYN must
# still be decided and logged like any other (the benchmark met it about
# once in 40,000 TLS connections; the ruleset used to drop it at the end of
# the sandbox chain, unseen, and the client's connect timed out).
# tests/lib/rawtcp.py's reuse plan makes the segments. The far side is the
# attacker host, which records every packet and connection it receives.
#   allowed: the new SYN is answered, the far host gets it and a second
#            connection, the flows table has one allow row per connection
#   denied:  the policy stops allowing the port between the two
#            connections: the new SYN gets a deny row and a reset, and
#            nothing of it reaches the far host
# Neither SYN is thrown away by the chain's final DROP.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init port-reuse
tb_internet_up || { tb_fail "test bed up"; tb_done; }
tb_sluiced_start || { tb_fail "sluiced up"; tb_done; }

OKPORT=4444	# allowed throughout
NOPORT=5555	# allowed for the first connection only
cat > "$TB_DIR/p1.json" <<EOF
{"sluice": {"allowedCidrs": ["$TB_ADDR_ATK:$OKPORT", "$TB_ADDR_ATK:$NOPORT"]}}
EOF
cat > "$TB_DIR/p2.json" <<EOF
{"sluice": {"allowedCidrs": ["$TB_ADDR_ATK:$OKPORT"]}}
EOF
tb_check "sandbox add" tb_sandbox_add a "$TB_DIR/p1.json"

raw() { tb_in a "$TB_PY" "$TB_LIB/rawtcp.py" "$TB_ADDR_ATK" "$@"; }
# chain_count ERE: the packets counted by the sandbox chain's rules whose
# listing matches ERE
chain_count() {
	ip netns exec "$TB_NETNS_GW" iptables -w -vnxL sluice-sandbox |
	    awk -v re="$1" 'NR > 2 && $0 ~ re { n += $1 } END { print n + 0 }'
}
# thrown away by the final rule (-j DROP, the chain's only DROP)
final_drops() { chain_count ' DROP '; }
# queued as conntrack's NEW
new_queued() { chain_count ' NFQUEUE .* ctstate NEW '; }
# rows PORT SPORT: verdict|reason of the rows for that 5-tuple
rows() {
	tb_sql "SELECT verdict, reason FROM flows WHERE src_port = $2
	    AND dst_ip = '$TB_ADDR_ATK' AND dst_port = $1 ORDER BY id"
}

# ---- allowed: the new connection goes through
d0=$(final_drops) n0=$(new_queued)
out=$(raw $OKPORT reuse)
d1=$(final_drops) n1=$(new_queued)
sp=$(tb_word "$out" sport)
syns=$(tb_word "$out" syns)
tb_assert_match "$out" "^result=answered " \
    "allowed: a SYN-ACK for the new ISN came back ($out)"
tb_assert_eq "$(tb_word "$out" bytes_in)" 9 "and the far host answered on it"
# the state the test is about: conntrack did not take the new SYN as NEW
tb_assert_eq "$((n1 - n0))" 1 "only the first connection's SYN was NEW to conntrack"
tb_assert_eq "$((d1 - d0))" 0 "no packet hit the chain's final DROP"
# the far host's own records: the first SYN and every new one, and the
# second connection with its bytes
tb_assert_eq "$(tb_wait_count $((1 + ${syns:-0})) 3 tb_attacker_packet_count \
    proto=tcp dport=$OKPORT flags=S)" "$((1 + ${syns:-0}))" \
    "the far host received the first SYN and the new one ($syns sent)"
tb_assert_eq "$(tb_wait_count 1 3 tb_attacker_conn_count port=$OKPORT \
    answered=True)" 1 "the far host accepted the second connection"
tb_assert_match "$(tb_attacker_received)" "port reuse: the second connection" \
    "and got its bytes"
tb_wait_rows "SELECT count(*) FROM flows WHERE dst_port = $OKPORT" 2 >/dev/null
tb_assert_eq "$(rows $OKPORT "${sp:-0}")" "allow|allowed_cidr
allow|allowed_cidr" "one allow row per connection for the 5-tuple"

# ---- denied: the port is no longer allowed when the new SYN comes
go=$TB_DIR/go
d0=$(final_drops) n0=$(new_queued)
raw $NOPORT reuse --go "$go" > "$TB_DIR/denied.out" 2>&1 &
rawpid=$!
# the first connection is over once the far host has the stray ACK (after
# the handshake's)
tb_assert_eq "$(tb_wait_count 2 5 tb_attacker_packet_count proto=tcp \
    dport=$NOPORT flags=A)" 2 "the first connection reached the far host"
tb_check "policy set: port $NOPORT no longer allowed" \
    tb_sluice policy set "${P}-a" "$TB_DIR/p2.json"
touch "$go"
wait "$rawpid"
d1=$(final_drops) n1=$(new_queued)
out=$(cat "$TB_DIR/denied.out")
sp=$(tb_word "$out" sport)
tb_assert_match "$out" "^result=refused " \
    "denied: the new SYN is refused with a reset ($out)"
tb_assert_eq "$((n1 - n0))" 1 "only the first connection's SYN was NEW to conntrack"
tb_assert_eq "$((d1 - d0))" 0 "no packet hit the chain's final DROP"
tb_wait_rows "SELECT count(*) FROM flows WHERE dst_port = $NOPORT" 2 >/dev/null
tb_assert_eq "$(rows $NOPORT "${sp:-0}")" "allow|allowed_cidr
deny|port_not_allowed" "an allow row for the first connection, a deny row for the new SYN"
# SYN, ACK, the reset, the stray ACK: nothing of the new connection
sleep 0.3
tb_assert_eq "$(tb_attacker_packet_count proto=tcp dport=$NOPORT)" 4 \
    "the far host received only the first connection's packets"
tb_assert_eq "$(tb_attacker_packet_count proto=tcp dport=$NOPORT flags=S)" 1 \
    "and no SYN of the new one"
tb_done
