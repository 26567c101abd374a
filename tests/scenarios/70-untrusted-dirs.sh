#!/bin/bash
# 70-untrusted-dirs: sluiced runs as root and creates, renames, chmods and
# reads back files by name in --state-dir, --db's directory, --control's
# and --metrics-socket's directories and --capture-denied. If another user
# can write to one of them, that user can put a symbolic link where root
# writes (a state file's NAME.json.tmp is opened with O_CREAT|O_TRUNC
# and no O_NOFOLLOW: root overwrote a root-owned file of the attacker's
# choosing with the sandbox's state; the sockets are chowned/chmodded by
# path after bind, the capture files reopened by path after the
# O_NOFOLLOW open), or a file of their own where root expects its own (a
# flow log owned by the attacker, state files that root restores as
# sandboxes with the attacker's policies). sluiced must refuse such a
# directory (owned by another user, or writable by another user or group;
# or under such a directory that is not sticky), and say why. Found by
# review, 2026-12-03: every one of them was accepted.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init untrusted-dirs
tb_internet_up || { tb_fail "test bed up"; tb_done; }

# the attacker: nobody, who may traverse TB_DIR and owns evil*/
chmod 0711 "$TB_DIR"
as_nobody() { setpriv --reuid nobody --regid nogroup --clear-groups "$@"; }
printf '{"sluice": {"allowedCidrs": ["192.0.2.10:443"]}}\n' \
    > "$TB_DIR/policy.json"
evil() {	# evil NAME: a directory owned by nobody
	mkdir -p "$TB_DIR/$1"
	chown nobody:nogroup "$TB_DIR/$1"
	chmod 0755 "$TB_DIR/$1"
}
# refused WHAT ARGS...: sluiced started with ARGS exits, naming the
# directory as one another user could change
refused() {
	local what=$1
	shift
	: > "$TB_DIR/sluiced.log"
	tb_sluiced_start "$@" >/dev/null 2>&1
	if [ -n "${TB_SLUICED_PID:-}" ] && kill -0 "$TB_SLUICED_PID" 2>/dev/null; then
		tb_fail "$what: sluiced runs with it"
		tb_sluiced_stop
		return 1
	fi
	tb_sluiced_stop
	tb_assert_match "$(cat "$TB_DIR/sluiced.log")" \
	    "$what .*another user could replace" "$what: refused, and why"
}

# ---- the state directory: a symbolic link at the state file's .tmp
echo precious > "$TB_DIR/victim"
evil state
as_nobody mkdir "$TB_DIR/state/sandboxes"
as_nobody ln -s "$TB_DIR/victim" "$TB_DIR/state/sandboxes/${P}-a.json.tmp"
: > "$TB_DIR/sluiced.log"
if tb_sluiced_start >/dev/null 2>&1; then
	tb_fail "--state-dir owned by another user: sluiced runs with it"
	tb_sandbox_add a "$TB_DIR/policy.json" >/dev/null 2>&1
	tb_sluiced_stop
else
	tb_sluiced_stop
	tb_assert_match "$(cat "$TB_DIR/sluiced.log")" \
	    "--state-dir .*another user could replace" \
	    "--state-dir owned by another user: refused, and why"
fi
tb_assert_eq "$(cat "$TB_DIR/victim")" precious \
    "root's file behind the attacker's link is untouched"
rm -rf "${TB_DIR:?}/state"

# ---- the flow log: the attacker's own file
evil dbdir
as_nobody touch "$TB_DIR/dbdir/flows.db"
refused --db --db "$TB_DIR/dbdir/flows.db"
tb_assert_eq "$(stat -c %s "$TB_DIR/dbdir/flows.db")" 0 \
    "nothing was logged into the attacker's file"

# ---- a group-writable state directory, and one under a directory
# another user owns (who can rename it and put their own in its place)
mkdir -p "$TB_DIR/gw"
chgrp nogroup "$TB_DIR/gw"
chmod 0770 "$TB_DIR/gw"
refused --state-dir --state-dir "$TB_DIR/gw"
evil parent
mkdir "$TB_DIR/parent/state"
refused --state-dir --state-dir "$TB_DIR/parent/state"

# ---- the control socket's, the metrics socket's and the capture
# directories
evil ctl
refused --control --control "$TB_DIR/ctl/ctl.sock"
evil metrics
refused --metrics-socket --metrics-socket "$TB_DIR/metrics/m.sock"
evil pcap
refused --capture-denied --capture-denied "$TB_DIR/pcap"

# ---- and root's own directories still do
rm -rf "${TB_DIR:?}/state"
tb_sluiced_start --capture-denied "$TB_DIR/pcap-ok" \
    --metrics-socket "$TB_DIR/run/m.sock" ||
    { tb_fail "sluiced up with root's directories"; tb_done; }
tb_check "sandbox add" tb_sandbox_add a "$TB_DIR/policy.json"
tb_assert_eq "$(stat -c '%a %U' "$TB_DIR/state/sandboxes/${P}-a.json")" \
    "600 root" "the state file is root's, 0600"
tb_done
