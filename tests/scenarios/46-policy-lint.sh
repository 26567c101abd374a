#!/bin/bash
# 46-policy-lint: `sluice policy check` warns about entries that make an
# allowlist functionally open, on stderr after the ok line; --strict turns
# warnings into exit 1. Offline: no test bed, no daemon.
. "$(dirname "$0")/../lib/testbed.sh"
tb_init policy-lint

# check ARGS...: runs `sluice policy check ARGS`; sets out, err and rc.
check() {
	"$SLUICE" policy check "$@" >"$TB_DIR/out" 2>"$TB_DIR/err"
	rc=$?
	out=$(cat "$TB_DIR/out")
	err=$(cat "$TB_DIR/err")
}

# The README's example policy, as the README has it now.
awk '/^## Policy/ { p = 1 } p && /^```json/ { j = 1; next }
    j && /^```/ { exit } j' "$REPO/README.md" > "$TB_DIR/readme.json"
tb_check "the README has an example policy" [ -s "$TB_DIR/readme.json" ]

for f in "$TB_DIR/readme.json" "$REPO/deploy/examples/policy.json"; do
	name=${f##*/}
	check --strict "$f"
	tb_assert_eq "$rc" 0 "$name: --strict, exit 0"
	tb_assert_match "$out" "^$f: ok \(" "$name: the ok line"
	tb_assert_eq "$err" "" "$name: no warnings"
done

# The usual default-deny: a bare "*" denied, names allowed; and what
# deniedDomains takes back.
cat > "$TB_DIR/deny-all.json" <<EOF
{"network": {"allowedDomains": ["api.example.com", "*.pkg.example.org"],
             "deniedDomains": ["*"]}}
EOF
cat > "$TB_DIR/carved.json" <<EOF
{"network": {"allowedDomains": ["github.com", "*.github.com"],
             "deniedDomains": ["gist.github.com", "api.github.com"]}}
EOF
for f in deny-all carved; do
	check --strict "$TB_DIR/$f.json"
	tb_assert_eq "$rc" 0 "$f: --strict, exit 0"
	tb_assert_eq "$err" "" "$f: no warnings"
done

cat > "$TB_DIR/open.json" <<EOF
{
  "network": {
    "allowedDomains": ["api.example.com", "*.s3.amazonaws.com", "*.github.io",
                       "pastebin.com", "*.github.com", "dns.google", "*.co.uk"],
    "deniedDomains": ["gist.github.com"]
  },
  "sluice": {
    "mode": "audit",
    "allowedCidrs": ["198.51.100.7:5432", "169.254.169.254:80", "10.0.0.0/8",
                     "0.0.0.0/0:443", "10.213.0.6:22"]
  }
}
EOF
W="sluice: warning: $TB_DIR/open.json"
INTERNAL="not the public internet: the sandbox can reach internal hosts and services there"
want=$(cat <<EOF
$W: network.allowedDomains[1]: "*.s3.amazonaws.com": looks like public object storage — anyone can own a bucket there and read what the sandbox uploads
$W: network.allowedDomains[2]: "*.github.io": anyone can host content under github.io: the sandbox can send data to an attacker's bucket or site there
$W: network.allowedDomains[3]: "pastebin.com": looks like a public paste service — anything the sandbox sends there is readable by anyone
$W: network.allowedDomains[4]: "*.github.com": covers api.github.com, which serves the GitHub API — it creates gists, readable by anyone, from whatever the sandbox sends
$W: network.allowedDomains[5]: "dns.google": looks like a DNS-over-HTTPS resolver — it resolves any name past sluice's resolver and carries data out in its queries
$W: network.allowedDomains[6]: "*.co.uk": covers every name under co.uk, a public suffix: anyone can register a domain there and receive what the sandbox sends
$W: sluice.allowedCidrs[1]: "169.254.169.254:80": includes the cloud metadata service 169.254.169.254: it hands out the host's credentials
$W: sluice.allowedCidrs[2]: "10.0.0.0/8": reaches private address space (10.0.0.0/8), $INTERNAL
$W: sluice.allowedCidrs[2]: "10.0.0.0/8": covers the sandbox pool 10.213.0.0/16 (sluiced's default --pool): sluice always denies it, so that part is never reachable
$W: sluice.allowedCidrs[3]: "0.0.0.0/0:443": covers 4294967296 addresses, a cloud metadata service and non-public address space among them: is that intended?
$W: sluice.allowedCidrs[4]: "10.213.0.6:22": never reachable: sluice always denies the sandbox pool 10.213.0.0/16 (sluiced's default --pool)
EOF
)
ok="$TB_DIR/open.json: ok (5 allowed cidrs, 7 allowed domains, 1 denied domains, mode audit)"

check "$TB_DIR/open.json"
tb_assert_eq "$rc" 0 "warnings alone: exit 0"
tb_assert_eq "$out" "$ok" "the ok line, alone on stdout"
tb_assert_eq "$err" "$want" "the warnings on stderr, in order, with paths"

check --strict "$TB_DIR/open.json"
tb_assert_eq "$rc" 1 "--strict with warnings: exit 1"
tb_assert_eq "$out" "$ok" "--strict: the same ok line"
tb_assert_eq "$err" "$want
sluice: $TB_DIR/open.json: 11 warnings (--strict)" \
    "--strict: the same warnings and a last line saying why it failed"

check "$TB_DIR/open.json" --strict
tb_assert_eq "$rc" 1 "--strict after the file: exit 1"

# With 2>&1 the ok line comes first, as in a terminal.
all=$("$SLUICE" policy check "$TB_DIR/open.json" 2>&1)
tb_assert_eq "$(printf '%s\n' "$all" | head -n 1)" "$ok" "merged: the ok line first"

# An invalid policy: the error, no warnings, exit 1 with or without --strict.
printf '{"network": {"allowedDomains": ["*.github.io", 7]}}\n' > "$TB_DIR/bad.json"
check --strict "$TB_DIR/bad.json"
tb_assert_eq "$rc" 1 "an invalid policy with --strict: exit 1"
tb_assert_match "$err" "^sluice: $TB_DIR/bad.json:1:[0-9]+: " "with file:line:col"
tb_assert_eq "$(printf '%s\n' "$err" | grep -c warning)" 0 "and no warnings"
tb_assert_eq "$out" "" "and nothing on stdout"

# Usage.
check --strict
tb_assert_eq "$rc" 1 "no file: exit 1"
tb_assert_match "$err" "missing FILE" "says what is missing"
check "$TB_DIR/open.json" "$TB_DIR/carved.json"
tb_assert_eq "$rc" 1 "two files: exit 1"
check --loud "$TB_DIR/open.json"
tb_assert_eq "$rc" 1 "an unknown option: exit 1"
tb_assert_match "$("$SLUICE" policy check -h)" "--strict" "-h lists --strict"

tb_done
