#!/bin/bash
# 49b-mountns: sluiced in a mount namespace of its own whose mounts do not
# propagate back (systemd's ProtectSystem= makes one: a slave of the
# host's) still makes /run/netns names the host sees, through pid 1's
# mount namespace: `ip netns exec NAME` works on the host, and `sandbox
# del` removes the name there.
#
# pid 1 here is not the host's init (and may not be readable), so sluiced
# runs in a pid namespace of its own whose init, a shell, stays in a mount
# namespace that shares /run/netns with the host (propagation unchanged),
# as systemd does; sluiced itself is one step further, in a slave.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init mountns
tb_internet_up || { tb_fail "test bed up"; tb_done; }

REAL_SLUICED=$SLUICED
cat > "$TB_DIR/sluiced-in-slave.sh" <<EOF
#!/bin/sh
# pid 1 of the new pid namespace is the shell: it stays where it is
exec unshare --pid --kill-child --mount-proc --propagation unchanged \\
    sh -c 'unshare --mount --propagation slave "\$0" "\$@" & wait \$!' \\
    "$REAL_SLUICED" "\$@"
EOF
chmod +x "$TB_DIR/sluiced-in-slave.sh"
SLUICED=$TB_DIR/sluiced-in-slave.sh
tb_sluiced_start -v || { tb_fail "sluiced up"; tb_done; }

# sluiced's own process, and its mount namespace
spid=
for p in /proc/[0-9]*; do
	[ "$(readlink "$p/exe" 2>/dev/null)" = "$(readlink -f "$REAL_SLUICED")" ] || continue
	tr '\0' ' ' < "$p/cmdline" 2>/dev/null | grep -q -- "$TB_DIR/ctl.sock" || continue
	spid=${p#/proc/}
done
tb_check "sluiced runs" [ -n "$spid" ]
tb_check "in a mount namespace other than the host's" \
    [ "$(readlink "/proc/$spid/ns/mnt")" != "$(readlink /proc/self/ns/mnt)" ]
tb_assert_match "$(cat "$TB_DIR/sluiced.log")" \
    "runs in a mount namespace of its own" "sluiced noticed"

# The premise: a bind mount made in sluiced's namespace stays there.
# (Its /proc is the pid namespace's, useless to a process from outside:
# the source is a name, and the check statfs(2), 6e736673 being nsfs.)
probe="/run/netns/${P}-probe"
tb_check "a plain bind mount in sluiced's namespace" \
    nsenter --mount="/proc/$spid/ns/mnt" sh -c \
    "touch '$probe' && mount --bind '/run/netns/$TB_NETNS_GW' '$probe' &&
    [ \"\$(stat -f -c %t '$probe')\" = 6e736673 ]"
tb_check "is not seen here" bash -c "[ \"\$(stat -f -c %t '$probe')\" != 6e736673 ] &&
    ! ip netns exec '${P}-probe' true 2>/dev/null"
# unlinking a mount point detaches it in every mount namespace
rm -f "$probe"

tb_check "the gateway's name is seen here" ip netns exec "$TB_NETNS_GW" true
cat > "$TB_DIR/policy.json" <<EOF
{"sluice": {"allowedCidrs": ["$TB_ADDR_DB:$TB_PORT_DB"]}}
EOF
tb_check "sandbox add" tb_sandbox_add s1 "$TB_DIR/policy.json"
tb_check "ip netns exec NAME works here" ip netns exec "${P}-s1" true
tb_assert_match "$(ip netns exec "${P}-s1" ip -4 -o addr show dev eth0)" \
    "inet 10\.213\." "and it is the sandbox, with its address"
tb_assert_match "$(cat "/etc/netns/${P}-s1/resolv.conf" 2>&1)" \
    "nameserver 10\.213\." "its resolv.conf is here"
out=$(tb_in s1 nc -w 3 "$TB_ADDR_DB" "$TB_PORT_DB" </dev/null 2>&1)
tb_assert_eq "$out" "db" "its allowed flow works"

tb_check "sandbox del" tb_sluice sandbox del "${P}-s1"
tb_assert_eq "$(ip netns list | grep -c "^${P}-s1\b")" 0 "the name is gone here"
tb_check "the file is gone" [ ! -e "/run/netns/${P}-s1" ]
tb_check "and in sluiced's namespace" \
    nsenter --mount="/proc/$spid/ns/mnt" sh -c "[ ! -e /run/netns/${P}-s1 ]"
tb_check "its /etc/netns directory is gone" [ ! -e "/etc/netns/${P}-s1" ]

# the same after a restart: names made before it are adopted
tb_check "sandbox add s2" tb_sandbox_add s2 "$TB_DIR/policy.json"
tb_sluiced_kill9
# the pid namespace went with its init; start afresh
tb_sluiced_start -v || { tb_fail "sluiced up again"; tb_done; }
tb_assert_match "$(tb_sluice sandbox list)" "${P}-s2" "s2 restored"
out=$(tb_in s2 nc -w 3 "$TB_ADDR_DB" "$TB_PORT_DB" </dev/null 2>&1)
tb_assert_eq "$out" "db" "s2's allowed flow works after the restart"
tb_check "sandbox del s2" tb_sluice sandbox del "${P}-s2"
tb_check "s2's name is gone here" [ ! -e "/run/netns/${P}-s2" ]
# what the detour through a child costs
grep -o 'sandbox [^ ]*: [a-z]* in [0-9]* us' "$TB_DIR/sluiced.log" | sed 's/^/# /'
tb_done
