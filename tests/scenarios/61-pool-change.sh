#!/bin/bash
# 61-pool-change: sandboxes are kept across a restart (state-dir), their
# links with the addresses the pool gave them. Restarted with another
# --pool, sluiced used to take them on with addresses from the new pool:
# their links still carried the old ones, every flow of theirs was
# spoofed_source, and the checks that keep sandboxes apart
# (internal_destination and the rest) covered only the new pool, so
# another sandbox could reach one at its old address (found by review,
# 2026-11-30). Now such a start is refused, with the reason; with the pool
# the sandboxes were made under it starts, and they work. State written
# before the address was kept is taken as made under the pool in force,
# and written again with it.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init pool-change
tb_internet_up || { tb_fail "test bed up"; tb_done; }
tb_sluiced_start || { tb_fail "sluiced up"; tb_done; }

cat > "$TB_DIR/policy.json" <<EOF
{"sluice": {"allowedCidrs": ["$TB_ADDR_ATK:4444"]}}
EOF
tb_check "sandbox add" tb_sandbox_add a "$TB_DIR/policy.json"
addr=$(tb_sandbox_field a addr)
state="$TB_DIR/state/sandboxes/${P}-a.json"
tb_assert_eq "$("$TB_PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["addr"])' "$state")" \
    "$addr" "the kept state has the sandbox's address"
tb_check "sluiced stops" tb_sluiced_term

tb_sluiced_start --pool 10.214.0.0/16 2>/dev/null
tb_check "a start with another --pool is refused" [ $? != 0 ]
tb_assert_match "$(tail -n 5 "$TB_DIR/sluiced.log")" "sandbox ${P}-a has address $addr, made under another --pool" \
    "and says why"
TB_SLUICED_PID=	# it exited (reaped by the start)

# state as kept before the address was: no "addr"
"$TB_PY" - "$state" <<'EOF'
import json, sys
o = json.load(open(sys.argv[1]))
del o["addr"]
json.dump(o, open(sys.argv[1], "w"))
EOF
tb_sluiced_start || { tb_fail "sluiced starts with the pool the sandbox was made under"; tb_done; }
tb_assert_eq "$(tb_sandbox_field a addr)" "$addr" "the sandbox keeps its address"
tb_assert_eq "$(echo hi | tb_in a nc -w 3 "$TB_ADDR_ATK" 4444)" attacker "and works"
tb_assert_eq "$("$TB_PY" -c 'import json, sys; print(json.load(open(sys.argv[1])).get("addr"))' "$state")" \
    "$addr" "its state has the address again"
tb_done
