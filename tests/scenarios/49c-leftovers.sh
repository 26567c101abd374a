#!/bin/bash
# 49c-leftovers: a crashed run's sandbox veths that no kept state names
# (killed between making a veth and saving its state; a state file lost)
# are deleted when sluiced starts again, each logged; the kept sandboxes'
# veths and anything not named like a sandbox veth stay.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init leftovers
tb_internet_up || { tb_fail "test bed up"; tb_done; }
tb_sluiced_start || { tb_fail "sluiced up"; tb_done; }

cat > "$TB_DIR/policy.json" <<EOF
{"sluice": {"allowedCidrs": ["$TB_ADDR_DB:$TB_PORT_DB"]}}
EOF
tb_check "sandbox a" tb_sandbox_add a "$TB_DIR/policy.json"
tb_check "sandbox b" tb_sandbox_add b "$TB_DIR/policy.json"
if_a=$(tb_gw_if a)
if_b=$(tb_gw_if b)
tb_sluiced_kill9

# b's state is lost; a veth sg77 and a veth keep0 appear out of nowhere
rm "$TB_DIR/state/sandboxes/${P}-b.json"
ip -n "$TB_NETNS_GW" link add sg77 type veth peer name x77
ip -n "$TB_NETNS_GW" link add keep0 type veth peer name keep1
gw_links() {
	ip -n "$TB_NETNS_GW" -o link show | awk -F': ' '{ sub(/@.*/, "", $2); print $2 }' |
	    grep -E '^(sg|x77|keep)' | sort | tr '\n' ' '
}
tb_assert_eq "$(gw_links)" "keep0 keep1 $if_a $if_b sg77 x77 " "before the restart"

tb_sluiced_start || { tb_fail "sluiced up again"; tb_done; }
tb_assert_eq "$(gw_links)" "keep0 keep1 $if_a " \
    "after it: the leftovers are gone, with their peers; the rest stays"
log=$(cat "$TB_DIR/sluiced.log")
tb_assert_match "$log" "deleted $if_b, a leftover that belongs to no sandbox" \
    "the lost sandbox's veth is logged"
tb_assert_match "$log" "deleted sg77, a leftover that belongs to no sandbox" \
    "so is the stray one"
tb_assert_eq "$(tb_sluice sandbox list -j | "$TB_PY" -c 'import json,sys; print(" ".join(s["name"] for s in json.load(sys.stdin)))')" \
    "${P}-a" "a is restored, b is not"
out=$(tb_in a nc -w 3 "$TB_ADDR_DB" "$TB_PORT_DB" </dev/null 2>&1)
tb_assert_eq "$out" "db" "a works"
tb_check "b is unplugged (no eth0)" \
    bash -c "! ip netns exec '${P}-b' ip link show eth0 >/dev/null 2>&1"
# a new sandbox takes the freed slot and its interface name again
tb_check "sandbox c" tb_sandbox_add c "$TB_DIR/policy.json"
tb_assert_eq "$(tb_gw_if c)" "$if_b" "c gets the freed slot"
out=$(tb_in c nc -w 3 "$TB_ADDR_DB" "$TB_PORT_DB" </dev/null 2>&1)
tb_assert_eq "$out" "db" "c works"
ip -n "$TB_NETNS_GW" link del keep0
tb_done
