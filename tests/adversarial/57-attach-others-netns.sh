#!/bin/bash
# 57-attach-others-netns: a user the control socket admits (its group) but
# who is not root asks for `sandbox add --netns /proc/PID/ns/net` of a
# root process in a private network namespace (systemd's PrivateNetwork=,
# a runtime's --network none). The user cannot open that file: opening
# /proc/PID/ns/net takes ptrace access to PID. sluiced opens it with its
# own CAP_SYS_PTRACE and plumbs a veth, an address and a default route
# into the root process's namespace: a confused deputy, the user reaches
# into a namespace that is not theirs. A request from a non-root peer
# must name a namespace that peer could open itself.
# Found by review, 2026-12-03: the attach went through and the root
# process got eth0 and a default route.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init attach-others
tb_internet_up || { tb_fail "test bed up"; tb_done; }
tb_sluiced_start || { tb_fail "sluiced up"; tb_done; }

# the control socket's group: sluice, or root's when the host has none
gid=$(getent group sluice | cut -d: -f3)
gid=${gid:-0}
chmod 0711 "$TB_DIR"
printf '{"sluice": {"allowedCidrs": ["192.0.2.10:443"]}}\n' \
    > "$TB_DIR/policy.json"
chmod 0644 "$TB_DIR/policy.json"
member() { setpriv --reuid nobody --regid "$gid" --clear-groups "$@"; }

# the user may use the socket
out=$(member "$SLUICE" -s "$TB_DIR/ctl.sock" sandbox list 2>&1)
tb_assert_eq "$?" 0 "the group's member may use the control socket"

# a root process with a network namespace of its own
unshare -n sleep 60 &
victim=$!
echo "$victim victim" >> "$TB_DIR/pids"
sleep 0.3
member cat "/proc/$victim/ns/net" >/dev/null 2>&1
tb_assert_eq "$?" 1 "the member cannot open the root process's namespace"

out=$(member "$SLUICE" -s "$TB_DIR/ctl.sock" sandbox add "${P}-v" \
    --netns "/proc/$victim/ns/net" --policy "$TB_DIR/policy.json" 2>&1)
rc=$?
echo "attach by the member -> $rc: $out"
tb_check "the attach of a namespace the member cannot open is refused" \
    [ "$rc" -ne 0 ]
links=$(nsenter -t "$victim" -n ip -br link 2>&1)
echo "the root process's links: $links"
tb_check "the root process's namespace got no eth0" \
    eval '! printf "%s\n" "$links" | grep -q "^eth0"'
tb_sluice sandbox del "${P}-v" >/dev/null 2>&1

# the member's own process's namespace is still theirs to attach
setpriv --reuid nobody --regid "$gid" --clear-groups unshare -rn sleep 60 &
own=$!
echo "$own own" >> "$TB_DIR/pids"
sleep 0.3
out=$(member "$SLUICE" -s "$TB_DIR/ctl.sock" sandbox add "${P}-o" \
    --netns "/proc/$own/ns/net" --policy "$TB_DIR/policy.json" 2>&1)
tb_assert_eq "$?" 0 "the member attaches its own process's namespace ($out)"
tb_sluice sandbox del "${P}-o" >/dev/null 2>&1
kill "$own" 2>/dev/null

# root may still attach it (what sluice-cni and the administrator do)
out=$(tb_sluice sandbox add "${P}-r" --netns "/proc/$victim/ns/net" \
    --policy "$TB_DIR/policy.json" 2>&1)
tb_assert_eq "$?" 0 "root attaches it"
tb_sluice sandbox del "${P}-r" >/dev/null 2>&1
kill "$victim" 2>/dev/null
tb_done
