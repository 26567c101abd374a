#!/bin/bash
# 51-service: sluiced as a system service.
#  - `make install DESTDIR=` makes exactly the documented tree; a second
#    install keeps a changed config; `make uninstall` removes the files and
#    keeps only the directories and a changed config; no group is made
#    under a DESTDIR.
#  - The installed unit passes `systemd-analyze verify` (its ExecStart=
#    pointed into the DESTDIR: that path is all that differs) and its
#    `systemd-analyze security` exposure is recorded and bounded.
#  - The built sluiced, started as the unit starts it (-f -c FILE, the
#    unit's CapabilityBoundingSet, no_new_privs, $NOTIFY_SOCKET, here an
#    abstract one): READY=1 only once the control socket answers; then
#    every thread holds only the kept capabilities; sandbox add, attach by
#    /proc/PID/ns/net and del still work; STATUS= follows the sandboxes.
#  - SIGHUP (RELOADING=1, then READY=1): a new upstream answers the next
#    query, a lower dns-ttl-max caps the next answer, a retain-days purges
#    old rows; a config that does not parse, or names an upstream that is
#    no address, changes nothing; a restart-only key is logged, not applied.
#  - A member of group sluice may use the control socket (list, add,
#    policy set, del); a user outside it cannot reach it.
#  - SIGTERM: STOPPING=1, exit 0.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init service

BDIR=$(cd "$(dirname "$SLUICED")" && pwd)
DEST=$TB_DIR/destdir
UNIT_REL=etc/systemd/system/sluiced.service
RUNTIME_CAPS=00000000002c1000	# net_admin, sys_chroot, sys_ptrace, sys_admin

# ---------------------------------------------------------------- install
# The tree `make install` documents (Makefile, README "Installing").
TREE="etc/sluice/sluiced.json
etc/systemd/system/sluiced.service
opt/cni/bin/sluice-cni
usr/local/bin/sluice
usr/local/sbin/sluiced
usr/local/share/man/man5/sluice-policy.5
usr/local/share/man/man8/sluice-cni.8
usr/local/share/man/man8/sluice.8
usr/local/share/man/man8/sluiced.8"
# ... and what uninstall leaves: the directories only.
DIRS_LEFT="etc
etc/systemd
etc/systemd/system
opt
opt/cni
opt/cni/bin
usr
usr/local
usr/local/bin
usr/local/sbin
usr/local/share
usr/local/share/man
usr/local/share/man/man5
usr/local/share/man/man8"
files() { (cd "$1" && find . ! -type d | sed 's|^\./||' | LC_ALL=C sort); }
dirs() { (cd "$1" && find . -mindepth 1 -type d | sed 's|^\./||' | LC_ALL=C sort); }
inst() {	# make TARGET into DESTDIR $1, without rebuilding
	local d=$1
	shift
	make -s -C "$REPO" B="$BDIR" DESTDIR="$d" -o all "$@" \
	    >> "$TB_DIR/install.log" 2>&1
}

group_before=$(getent group sluice)
if [ ! -x "$BDIR/sluice" ] || [ ! -x "$BDIR/sluice-cni" ]; then
	tb_fail "sluice and sluice-cni are not built next to $SLUICED"
	tb_done
fi
inst "$DEST" install
tb_assert_eq "$?" 0 "make install DESTDIR=..."
tb_assert_eq "$(files "$DEST")" "$(printf '%s\n' "$TREE" | LC_ALL=C sort)" \
    "install: exactly the documented files"
tb_assert_eq "$(cd "$DEST" && stat -c '%a %n' usr/local/sbin/sluiced \
    usr/local/bin/sluice opt/cni/bin/sluice-cni "$UNIT_REL" \
    etc/sluice/sluiced.json usr/local/share/man/man8/sluiced.8)" \
"755 usr/local/sbin/sluiced
755 usr/local/bin/sluice
755 opt/cni/bin/sluice-cni
644 $UNIT_REL
644 etc/sluice/sluiced.json
644 usr/local/share/man/man8/sluiced.8" "install: modes"
tb_check "the installed sluiced is the built one" cmp -s "$SLUICED" "$DEST/usr/local/sbin/sluiced"
tb_assert_eq "$(grep '^ExecStart=' "$DEST/$UNIT_REL")" \
    "ExecStart=/usr/local/sbin/sluiced -f -c /etc/sluice/sluiced.json" \
    "the unit starts the installed sluiced with the installed config"
tb_check "the installed config is deploy/sluiced.json" \
    cmp -s "$REPO/deploy/sluiced.json" "$DEST/etc/sluice/sluiced.json"
tb_check "and sluiced takes it" "$SLUICED" -c "$DEST/etc/sluice/sluiced.json" --version
tb_assert_eq "$(getent group sluice)" "$group_before" "no group is made for a DESTDIR install"

# A changed config survives a second install and the uninstall.
echo '{"netns": "mine"}' > "$DEST/etc/sluice/sluiced.json"
inst "$DEST" install
tb_assert_eq "$(cat "$DEST/etc/sluice/sluiced.json")" '{"netns": "mine"}' \
    "a second install keeps a changed config"
tb_assert_match "$(cat "$TB_DIR/install.log")" "sluiced.json is there already: kept" "and says so"
inst "$DEST" uninstall
tb_assert_eq "$?" 0 "make uninstall DESTDIR=..."
tb_assert_eq "$(files "$DEST")" "etc/sluice/sluiced.json" \
    "uninstall leaves only the changed config"
tb_assert_match "$(cat "$TB_DIR/install.log")" "differs from deploy/sluiced.json: kept" "and says so"
cp "$REPO/deploy/sluiced.json" "$DEST/etc/sluice/sluiced.json"
inst "$DEST" uninstall
tb_assert_eq "$(files "$DEST")" "" "an unchanged config goes with the rest"
tb_assert_eq "$(dirs "$DEST")" "$DIRS_LEFT" "only the directories stay (etc/sluice goes)"

# Another prefix and unit directory, as a distribution would use.
inst "$TB_DIR/dest2" install PREFIX=/usr UNITDIR=/usr/lib/systemd/system
tb_assert_eq "$(grep '^ExecStart=' "$TB_DIR/dest2/usr/lib/systemd/system/sluiced.service")" \
    "ExecStart=/usr/sbin/sluiced -f -c /etc/sluice/sluiced.json" "PREFIX=/usr: ExecStart follows SBINDIR"
tb_check "PREFIX=/usr: sluiced in /usr/sbin" test -x "$TB_DIR/dest2/usr/sbin/sluiced"

# ---------------------------------------------------------------- the unit
inst "$DEST" install
UNIT=$DEST/$UNIT_REL
if command -v systemd-analyze >/dev/null 2>&1; then
	# The one change: ExecStart= names the binary in the DESTDIR (verify
	# insists that it exists); man pages are looked up there too.
	mkdir -p "$TB_DIR/verify"
	sed "s|^ExecStart=/usr/local/sbin/sluiced |ExecStart=$DEST/usr/local/sbin/sluiced |" \
	    "$UNIT" > "$TB_DIR/verify/sluiced.service"
	tb_assert_eq "$(diff "$UNIT" "$TB_DIR/verify/sluiced.service" | grep -c '^[<>]')" 2 \
	    "the verified unit differs from the installed one in one line"
	out=$(MANPATH=$DEST/usr/local/share/man systemd-analyze verify \
	    "$TB_DIR/verify/sluiced.service" 2>&1)
	rc=$?
	echo "systemd-analyze verify: exit $rc${out:+: $out}"
	tb_assert_eq "$rc" 0 "systemd-analyze verify passes"
	tb_assert_eq "$out" "" "with nothing to say (man pages found)"
	systemd-analyze security --offline=true "$TB_DIR/verify/sluiced.service" \
	    > "$TB_DIR/security.txt" 2>&1
	score=$(sed -n 's/.*exposure level for sluiced.service: \([0-9.]*\).*/\1/p' \
	    "$TB_DIR/security.txt")
	echo "systemd-analyze security: exposure $score"
	tb_assert_le "$(echo "${score:-99}" | tr -d .)" 45 \
	    "systemd-analyze security exposure, times 10"
else
	tb_fail "systemd-analyze is missing (make deps installs it): the unit is not verified"
fi

# ---------------------------------------------------------------- the daemon
tb_internet_up || { tb_fail "test bed up"; tb_done; }
# A second upstream that answers a.test with another address, so the
# answer says which upstream gave it.
UP2=198.51.100.54
ip -n "$TB_NETNS_INET" addr add "$UP2/32" dev lo
_tb_bg "$TB_NETNS_INET" dnsmasq2 "$TB_DIR/dnsmasq2.out" dnsmasq --keep-in-foreground \
    --conf-file=/dev/null --user=root --group=root \
    --pid-file="$TB_DIR/dnsmasq2.pid" --bind-interfaces --listen-address="$UP2" \
    --no-resolv --no-hosts --no-poll --cache-size=0 --local-ttl=60 \
    --host-record=a.test,$TB_ADDR_PLAIN --address=/#/

# The control socket's group: the host's `sluice` if it has one, else a
# made-up one that only sluiced's mount namespace sees (/etc/group bound
# over there; /run/netns stays shared with the host's).
gid=$(getent group sluice | cut -d: -f3)
wrap=()
if [ -z "$gid" ]; then
	gid=3900
	while getent group "$gid" >/dev/null; do gid=$((gid + 1)); done
	{ cat /etc/group; echo "sluice:x:$gid:"; } > "$TB_DIR/group"
	cat > "$TB_DIR/in-ns.sh" <<'EOF'
mount --make-private / && mount --bind "$1" /etc/group || exit 1
shift
exec "$@"
EOF
	wrap=(unshare -m --propagation unchanged sh "$TB_DIR/in-ns.sh" "$TB_DIR/group")
fi
chmod 0711 "$TB_DIR"	# for the unprivileged clients below
SOCK=$TB_DIR/run/ctl.sock	# in a directory sluiced makes
cli() { "$SLUICE" -s "$SOCK" "$@"; }

# The listener: every datagram as a line "MS|MSG" (newlines as |); at the
# first READY=1 it asks the control socket for the status at once.
NOTIFY="@sluice-test-notify-$P"
cat > "$TB_DIR/notify.py" <<'EOF'
import json, socket, sys, time
name, log, ctl = sys.argv[1], sys.argv[2], sys.argv[3]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind("\0" + name[1:])
ready = False
with open(log + ".ready", "w"):
    pass
while True:
    msg = s.recv(4096).decode()
    with open(log, "a") as f:
        f.write("%d|%s\n" % (time.time() * 1000, msg.replace("\n", "|")))
    if not ready and "READY=1" in msg.split("\n"):
        ready = True
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            c.settimeout(2)
            c.connect(ctl)
            c.sendall(b'{"cmd":"status"}\n')
            r = json.loads(c.makefile().readline())
            res = "ok" if r.get("ok") else "error"
        except (OSError, ValueError) as e:
            res = "failed: %s" % e
        with open(log + ".control", "w") as f:
            f.write(res + "\n")
EOF
: > "$TB_DIR/notify.log"
"$TB_PY" "$TB_DIR/notify.py" "$NOTIFY" "$TB_DIR/notify.log" "$SOCK" \
    > "$TB_DIR/notify.out" 2>&1 &
_tb_record $! notify
_tb_wait_for "the notify listener" "$TB_DIR/notify.out" test -e "$TB_DIR/notify.log.ready" ||
    { tb_fail "notify listener"; tb_done; }
notes() { cut -d'|' -f2- "$TB_DIR/notify.log"; }
count() { notes | grep -c -- "$1"; }
wait_count() {	# PATTERN N: until N notifications match
	local i
	for i in $(seq 50); do
		[ "$(count "$1")" -ge "$2" ] && return 0
		sleep 0.1
	done
	return 1
}

conf() {	# UPSTREAM TTL_MAX RETAIN_DAYS [POOL [COPY_INTERVAL]]: writes the config file
	cat > "$TB_DIR/sluiced.json" <<EOF
{
  "control": "$SOCK",
  "db": "$TB_DIR/flows.db",
  "state-dir": "$TB_DIR/state",
  "netns": "$TB_NETNS_GW",
  "pool": "${4:-$TB_POOL}",
  "uplink-netns": "$TB_NETNS_INET",
  "uplink-addr": "$TB_UPLINK_ADDR",
  "uplink-peer-addr": "$TB_UPLINK_PEER_ADDR",
  "dns-upstream": ["$1"],
  "dns-ttl-min": 10,
  "dns-ttl-max": $2,
  "retain-days": $3,
  "copy-interval": ${5:-0}
}
EOF
}
conf "$TB_ADDR_DNS" 600 0

# As the unit runs it: its bounding set, no_new_privs, -f -c FILE.
bset=$(sed -n 's/^CapabilityBoundingSet=//p' "$UNIT" | tr ' ' '\n' |
    sed -n 's/^CAP_\(.*\)/+\L\1/p' | paste -sd, -)
echo "the unit's bounding set: $bset"
args=(-f -c "$TB_DIR/sluiced.json")
printf '%s\n' "${args[@]}" > "$TB_DIR/sluiced.args"	# for tb_down's --teardown
NOTIFY_SOCKET=$NOTIFY setsid "${wrap[@]}" setpriv --bounding-set "-all,$bset" \
    --no-new-privs --inh-caps=-all "$SLUICED" "${args[@]}" </dev/null \
    >> "$TB_DIR/sluiced.log" 2>&1 &
TB_SLUICED_PID=$!
echo "$TB_SLUICED_PID" > "$TB_DIR/sluiced.pid"
_tb_record "$TB_SLUICED_PID" sluiced-group
if ! wait_count '^READY=1' 1; then
	tail -n 30 "$TB_DIR/sluiced.log"
	tb_fail "READY=1 within 5 s"
	tb_done
fi
pid=$TB_SLUICED_PID
notes
tb_assert_eq "$(cat "$TB_DIR/notify.log.control" 2>/dev/null)" ok \
    "at READY=1 the control socket answers at once"
tb_assert_eq "$(notes | head -n 1)" \
    "READY=1|STATUS=0 sandboxes, 1 upstream resolvers, gateway $TB_NETNS_GW" \
    "the first notification is READY=1 with a STATUS"

# ---------------------------------------------------------------- capabilities
nthreads=0 bad=""
for st in /proc/"$pid"/task/*/status; do
	nthreads=$((nthreads + 1))
	line=$(grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs):' "$st" |
	    tr -d '\t' | paste -sd' ' -)
	[ "$line" = "CapInh:0000000000000000 CapPrm:$RUNTIME_CAPS CapEff:$RUNTIME_CAPS CapBnd:$RUNTIME_CAPS CapAmb:0000000000000000 NoNewPrivs:1" ] ||
	    bad="$bad ${st}: $line"
done
echo "threads: $nthreads; $(grep -E '^Cap(Eff|Bnd)' /proc/"$pid"/status | paste -sd' ' -)"
tb_assert_eq "$bad" "" "every thread: only net_admin, sys_chroot, sys_ptrace, sys_admin; no_new_privs"
tb_check "more than one thread was checked" [ "$nthreads" -ge 2 ]
tb_assert_match "$(cat "$TB_DIR/sluiced.log")" \
    "capabilities: kept cap_net_admin,cap_sys_chroot,cap_sys_ptrace,cap_sys_admin" "and says so"
tb_assert_eq "$(grep -c 'raw socket' "$TB_DIR/sluiced.log")" 0 \
    "the raw socket for servers' resets opened under the unit's bounding set (CAP_NET_RAW), before the drop"

# ---------------------------------------------------------------- sandboxes
cat > "$TB_DIR/policy.json" <<EOF
{"network": {"allowedDomains": ["a.test"]}}
EOF
tb_check "sandbox add after the drop" cli sandbox add "${P}-a" --policy "$TB_DIR/policy.json"
gw_a=$(cli sandbox list -j | "$TB_PY" -c 'import json,sys; print(json.load(sys.stdin)[0]["gateway"])')
q() { tb_in a dig +noall +answer +time=2 +tries=1 @"$gw_a" a.test A 2>/dev/null; }
ans() { q | awk '{ print $NF }'; }
ttl() { q | awk '{ print $2 }'; }
tb_assert_eq "$(ans)" "$TB_ADDR_HTTPS" "the sandbox's query is answered by the first upstream"
unshare -n sleep 60 &
holder=$!
_tb_record "$holder" holder
sleep 0.2
tb_check "attach /proc/PID/ns/net of a root process after the drop (CAP_SYS_PTRACE)" \
    cli sandbox add "${P}-ext" --netns "/proc/$holder/ns/net" --policy "$TB_DIR/policy.json"
tb_assert_match "$(nsenter --net="/proc/$holder/ns/net" ip -o -4 addr show dev eth0)" \
    "10\.213\." "the attached namespace got its address"
tb_check "sandbox del of the attached one" cli sandbox del "${P}-ext"
wait_count 'STATUS=' 4
tb_assert_eq "$(notes | sed -n 's/.*STATUS=\([0-9]*\) sandboxes.*/\1/p' | paste -sd' ' -)" \
    "0 1 2 1" "STATUS= followed the sandboxes"

# ---------------------------------------------------------------- reload
hup() {	# sends SIGHUP, waits for READY=1 number $1
	kill -HUP "$pid"
	wait_count '^READY=1' "$1"
}
conf "$UP2" 20 0
tb_check "SIGHUP: READY=1 again" hup 2
tb_assert_eq "$(count '^RELOADING=1|MONOTONIC_USEC=[0-9]*|STATUS=reloading$')" 1 \
    "RELOADING=1 (with MONOTONIC_USEC) before it"
tb_assert_eq "$(notes | grep -E '^(RELOADING|READY)=1' | tail -n 2 | cut -d'|' -f1 | paste -sd' ' -)" \
    "RELOADING=1 READY=1" "in that order"
tb_assert_eq "$(ans)" "$TB_ADDR_PLAIN" "a new upstream answers the next query"
t=$(ttl)
tb_assert_le "${t:-999}" 20 "a lower dns-ttl-max caps the next answer's TTL"
log=$(cat "$TB_DIR/sluiced.log")
tb_assert_match "$log" "reload: dns-upstream: $TB_ADDR_DNS -> $UP2" "the log names the change"
tb_assert_match "$log" "reload: dns-ttl-max: 600 -> 20" "and the other"

# retain-days: a row ten days old goes once the reload sets 5.
old_us=$(( ($(date +%s) - 10 * 86400) * 1000000 ))
tb_sql "INSERT INTO dns_queries (ts, proto, src_ip, qname, qtype, verdict, reason)
    VALUES ($old_us, 'udp', '10.213.0.2', 'old.test', 'A', 'allow', 'test')"
tb_assert_eq "$(tb_sql "SELECT count(*) FROM dns_queries WHERE qname = 'old.test'")" 1 \
    "an old row is there"
conf "$UP2" 20 5 "" 5
tb_check "SIGHUP" hup 3
tb_assert_eq "$(tb_wait_rows "SELECT count(*) FROM dns_queries WHERE qname = 'old.test'" 0)" 0 \
    "retain-days 5 purges it"
# copy-interval is read on every pass of the loop: applied live
tb_assert_match "$(cat "$TB_DIR/sluiced.log")" "reload: copy-interval: 0 -> 5" \
    "the log names copy-interval's change"
tb_assert_match "$(cli status -j)" '"interval_ms": ?5[,}]' "and status shows it in force"

# What does not parse changes nothing (retain-days 1 in there is not taken).
printf '{"dns-upstream": ["%s"], "retain-days": 1,\n' "$TB_ADDR_DNS" > "$TB_DIR/sluiced.json"
tb_check "SIGHUP with a broken config: READY=1 all the same" hup 4
tb_assert_eq "$(ans)" "$TB_ADDR_PLAIN" "the old upstream stays"
tb_assert_match "$(cat "$TB_DIR/sluiced.log")" "sluiced.json:2:[0-9]+: .*" \
    "the parse error is logged with its position"
tb_assert_match "$(cat "$TB_DIR/sluiced.log")" "does not parse: nothing changed" "and nothing changed"
conf "not-an-address" 20 1
tb_check "SIGHUP with an upstream that is no address" hup 5
tb_assert_eq "$(ans)" "$TB_ADDR_PLAIN" "the old upstream stays"
tb_assert_match "$(cat "$TB_DIR/sluiced.log")" "not-an-address: not an IPv4 address: nothing changed" \
    "and it says why"
tb_check "sluiced is alive" kill -0 "$pid"

# A key that needs a restart is named, not applied.
conf "$UP2" 20 5 10.99.0.0/16
tb_check "SIGHUP with a new pool" hup 6
tb_assert_match "$(cat "$TB_DIR/sluiced.log")" "reload: pool: $TB_POOL -> 10.99.0.0/16 needs a restart" \
    "the log says the pool needs a restart"
tb_check "sandbox add" cli sandbox add "${P}-b" --policy "$TB_DIR/policy.json"
tb_assert_match "$(cli sandbox list -j)" '"addr": ?"10\.213\.' "and the old pool is still in use"
tb_check "sandbox del" cli sandbox del "${P}-b"
conf "$UP2" 20 5	# as before, for the teardown at the end

# ---------------------------------------------------------------- the group
if [ "${#wrap[@]}" -gt 0 ] && ! grep -q "^sluice:x:$gid:" /proc/"$pid"/root/etc/group; then
	tb_fail "sluiced does not see the test's group file"
fi
tb_assert_eq "$(stat -c '%a %u:%g' "$TB_DIR/run" "$SOCK" | paste -sd' ' -)" \
    "750 0:$gid 660 0:$gid" "the socket's directory (made by sluiced) and the socket: root and group sluice"
mkdir -m 0755 "$TB_DIR/pub"
cp "$TB_DIR/policy.json" "$TB_DIR/pub/policy.json"
chmod 0644 "$TB_DIR/pub/policy.json"
member() { setpriv --reuid nobody --regid nogroup --groups "$gid" "$SLUICE" -s "$SOCK" "$@"; }
outsider() { setpriv --reuid nobody --regid nogroup --clear-groups "$SLUICE" -s "$SOCK" "$@"; }
tb_assert_match "$(member sandbox list 2>&1)" "^${P}-a " "a member of group sluice lists the sandboxes"
tb_check "a member adds a sandbox" member sandbox add "${P}-m" --policy "$TB_DIR/pub/policy.json"
tb_check "sets its policy" member policy set "${P}-m" "$TB_DIR/pub/policy.json"
tb_check "and deletes it" member sandbox del "${P}-m"
out=$(outsider sandbox list 2>&1)
rc=$?
echo "outside the group: sandbox list -> exit $rc: $out"
tb_assert_eq "$rc" 3 "a user outside the group cannot reach the socket (exit 3)"
tb_assert_match "$out" "ermission denied" "and is told why"
outsider sandbox del "${P}-a" >/dev/null 2>&1
tb_assert_match "$(cli sandbox list)" "^${P}-a " "nor delete anything"

# ---------------------------------------------------------------- stop
kill -TERM "$pid"
for i in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
wait "$pid"
rc=$?
tb_assert_eq "$rc" 0 "SIGTERM: exit 0"
tb_assert_eq "$(notes | tail -n 1)" "STOPPING=1|STATUS=stopping; sandboxes stay and fail closed" \
    "STOPPING=1 is the last notification"
TB_SLUICED_PID=
rm -f "$TB_DIR/sluiced.pid"
tb_done
