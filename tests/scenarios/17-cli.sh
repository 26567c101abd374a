#!/bin/bash
# 17-cli: the CLI's contract — exit codes, messages, offline policy check,
# sandbox life cycle and what it leaves on the host.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init cli

cat > "$TB_DIR/good.json" <<EOF
{"network": {"allowedDomains": ["a.test", "*.b.test:8443"], "deniedDomains": ["x.a.test"]},
 "sluice": {"mode": "enforce", "allowedCidrs": ["192.0.2.10:443", "198.51.100.0/24:8000-8080"]}}
EOF
printf '{"sluice": {"allowedCidrs": ["192.0.2.10:443"],\n  "colour": "blue"}}\n' \
    > "$TB_DIR/unknown.json"
printf '{"sluice": {"mode": "enforce",\n  "mode": "audit"}}\n' > "$TB_DIR/dup.json"

# no daemon
err=$("$SLUICE" -s "$TB_DIR/none.sock" sandbox list 2>&1)
tb_assert_eq "$?" 3 "no daemon: exit 3"
tb_assert_match "$err" "none.sock" "the message names the socket"

# offline policy check
out=$("$SLUICE" policy check "$TB_DIR/good.json" 2>&1)
tb_assert_eq "$?" 0 "policy check of a good file: exit 0"
tb_assert_match "$out" "ok" "and says ok"
err=$("$SLUICE" policy check "$TB_DIR/unknown.json" 2>&1)
tb_assert_eq "$?" 1 "unknown key: exit 1"
tb_assert_match "$err" "unknown.json:2:[0-9]+: .*colour" "with file:line:col and the key"
err=$("$SLUICE" policy check "$TB_DIR/dup.json" 2>&1)
tb_assert_eq "$?" 1 "duplicate key: exit 1"
tb_assert_match "$err" "dup.json:2:[0-9]+:" "with its position"
err=$("$SLUICE" policy check "$TB_DIR/missing.json" 2>&1)
tb_assert_eq "$?" 1 "missing file: exit 1"
"$SLUICE" frobnicate >/dev/null 2>&1
tb_assert_eq "$?" 1 "unknown command: exit 1"
"$SLUICE" sandbox add >/dev/null 2>&1
tb_assert_eq "$?" 1 "missing arguments: exit 1"
tb_assert_match "$("$SLUICE" --help 2>&1)" "sandbox add" "--help lists the commands"
# every flag sluiced --help names is in sluiced(8) and in the README's table
undocumented=
for f in $("$SLUICED" --help | grep -o -- '--[a-z][a-z-]*' | sort -u); do
	grep -q -- "Fl -${f#--}\b" "$REPO/deploy/man/sluiced.8" &&
	    grep -qE -- "^\|[^|]*$f[ \`]" "$REPO/README.md" ||
	    undocumented+=" $f"
done
tb_assert_eq "${undocumented:-none}" none "sluiced's flags in sluiced(8) and the README"

tb_internet_up || { tb_fail "test bed up"; tb_done; }
tb_sluiced_start || { tb_fail "sluiced up"; tb_done; }

out=$(tb_sluice status)
tb_assert_eq "$?" 0 "status: exit 0"
tb_assert_match "$out" "sandboxes: 0" "status counts the sandboxes"
tb_assert_match "$(tb_sluice status -j)" '"netns": ?"'"$TB_NETNS_GW"'"' "status -j names the gateway"

out=$(tb_sandbox_add a "$TB_DIR/good.json")
tb_assert_eq "$?" 0 "sandbox add: exit 0"
tb_assert_match "$out" "${P}-a" "and says which sandbox"
tb_check "the namespace exists" [ -e "/run/netns/${P}-a" ]
gw=$(tb_sluice sandbox list -j | "$TB_PY" -c 'import json,sys; print(json.load(sys.stdin)[0]["gateway"])')
tb_assert_eq "$(cat "/etc/netns/${P}-a/resolv.conf" | grep ^nameserver)" \
    "nameserver $gw" "resolv.conf points at the gateway"
tb_assert_eq "$(tb_in a ip route show default | cut -d' ' -f1-3)" "default via $gw" \
    "the default route goes via the gateway"

tb_sandbox_add a "$TB_DIR/good.json" >/dev/null 2>&1
tb_assert_eq "$?" 1 "a duplicate name: exit 1"
tb_sluice sandbox add "bad/name" --policy "$TB_DIR/good.json" >/dev/null 2>&1
tb_assert_eq "$?" 1 "an invalid name: exit 1"
tb_sluice sandbox add "$(printf 'n%.0s' $(seq 60))" --policy "$TB_DIR/good.json" >/dev/null 2>&1
tb_assert_eq "$?" 1 "a name too long: exit 1"
tb_sandbox_add u "$TB_DIR/unknown.json" >/dev/null 2>&1
tb_assert_eq "$?" 1 "a bad policy: exit 1"
tb_check "and no namespace was made for it" [ ! -e "/run/netns/${P}-u" ]

# a long name still gets a valid interface name
long="${P}-$(printf 'x%.0s' $(seq 39))"
tb_check "a 48-character name works" tb_sluice sandbox add "$long" --policy "$TB_DIR/good.json"
tb_assert_eq "$(tb_sluice sandbox list -j | "$TB_PY" -c 'import json,sys
print(sorted(len(s["ifname"]) <= 15 for s in json.load(sys.stdin)))')" "[True, True]" \
    "interface names fit IFNAMSIZ"

tb_assert_eq "$(tb_sluice sandbox list -j | "$TB_PY" -c 'import json,sys
print(len(json.load(sys.stdin)))')" 2 "list -j is JSON with both"
tb_check "sandbox del" tb_sluice sandbox del "$long"
tb_check "sandbox del a" tb_sluice sandbox del "${P}-a"
tb_check "the namespace is gone" [ ! -e "/run/netns/${P}-a" ]
tb_check "its resolv.conf is gone" [ ! -e "/etc/netns/${P}-a" ]
tb_sluice sandbox del "${P}-a" >/dev/null 2>&1
tb_assert_eq "$?" 1 "deleting it again: exit 1"
tb_assert_eq "$(tb_sluice sandbox list -j)" "[]" "the list is empty"
tb_assert_eq "$(tb_wait_rows "SELECT count(*) FROM sandboxes WHERE deleted_us IS NOT NULL" 2)" 2 \
    "the sandboxes table records both deletions"
tb_done
