#!/bin/bash
# 69-state-files: a sandbox's state file (--state-dir) is written, fsynced
# and renamed, and its directory fsynced: a crash leaves the old state or
# the new, never an empty file. A restore takes a file only under its own
# sandbox's name: a copy kept under another name (keep.json) brought a
# deleted sandbox back at the next start, since a delete removes only
# NAME.json. (both found by review, 2026-12-03: no fsync at all, and the
# name inside the file was all restore read)
. "$(dirname "$0")/../lib/testbed.sh"
tb_init state-files
tb_internet_up || { tb_fail "test bed up"; tb_done; }
tb_sluiced_start || { tb_fail "sluiced up"; tb_done; }
cat > "$TB_DIR/policy.json" <<EOF
{"sluice": {"allowedCidrs": ["192.0.2.10:443"]}}
EOF
strace -f -qq -p "$TB_SLUICED_PID" -e trace=openat,fsync,fdatasync,rename,renameat,renameat2 \
    -o "$TB_DIR/strace.out" &
st=$!
echo "$st strace" >> "$TB_DIR/pids"
sleep 0.5
tb_check "sandbox add a" tb_sandbox_add a "$TB_DIR/policy.json"
sleep 0.3
kill "$st"; wait "$st" 2>/dev/null
echo "---- state file syscalls"; grep -E "sandboxes/|fsync|fdatasync" "$TB_DIR/strace.out" | grep -v resolv
fd=$(sed -n 's/.*sandboxes\/.*\.json\.tmp".* = \([0-9]*\)$/\1/p' "$TB_DIR/strace.out" | head -1)
echo "the state file's descriptor: $fd"
# between the file's open and its rename (the directory's fsync after
# the rename may reuse the number)
tb_check "state_save fsyncs the state file before the rename" \
    awk -v fd="$fd" '/sandboxes\/.*\.json\.tmp".* = / { open = 1 }
	open && $0 ~ "f(data)?sync\\(" fd "\\)" { synced = 1 }
	open && /rename\(/ { exit !synced } END { if (!open) exit 1 }' "$TB_DIR/strace.out"

sd="$TB_DIR/state/sandboxes"
cp "$sd/${P}-a.json" "$sd/keep.json"
tb_check "sandbox del a" tb_sluice sandbox del "${P}-a"
ls "$sd"
tb_sluiced_term
tb_sluiced_start || { tb_fail "sluiced up again"; tb_done; }
out=$(tb_sluice sandbox list)
echo "$out"
tb_check "the deleted sandbox stays deleted after a restart" \
    bash -c "! grep -q '${P}-a' <<< '$out'"
tb_sluice sandbox del "${P}-a" >/dev/null 2>&1
tb_done
