#!/bin/bash
# 48-cni: sluice-cni invoked exactly as a container runtime invokes a CNI
# plugin (a clean environment of CNI_* variables, the network
# configuration on stdin, the result or error JSON on stdout): ADD
# attaches a namespace made outside sluice and the spec's result says how,
# CHECK compares with prevResult, DEL is idempotent and needs no
# namespace, VERSION; bad input gets the spec's error codes; with sluiced
# down the runtime is told to try again later.
. "$(dirname "$0")/../lib/testbed.sh"
SLUICE_CNI=${SLUICE_CNI:-$REPO/build/sluice-cni}
tb_init cni
[ -x "$SLUICE_CNI" ] || { tb_fail "$SLUICE_CNI is not built"; tb_done; }
tb_internet_up || { tb_fail "test bed up"; tb_done; }
tb_sluiced_start || { tb_fail "sluiced up"; tb_done; }

# holder: a process in a namespace of its own, as a runtime makes for a
# container started with no network; its pid in HOLDER.
holder() {
	unshare -n sleep 120 &
	HOLDER=$!
	_tb_record "$HOLDER" cni-holder
	sleep 0.2
}

new_id() {
	od -An -N32 -tx1 /dev/urandom | tr -d ' \n'
}

# cni_run COMMAND CONTAINERID NETNS IFNAME [CNI_ARGS]: the plugin with only
# what a runtime passes; the configuration from $CONF. Its stdout in OUT,
# its exit status in RC.
cni_run() {
	OUT=$(env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin CNI_COMMAND="$1" \
	    CNI_CONTAINERID="$2" CNI_NETNS="$3" CNI_IFNAME="$4" \
	    CNI_ARGS="${5:-}" CNI_PATH=/opt/cni/bin "$SLUICE_CNI" < "$CONF")
	RC=$?
}

# jget JSON PATH: the value at a dotted path ("ips.0.address"): strings
# raw, anything else as compact JSON, "MISSING" if it is not there.
jget() {
	"$TB_PY" -c 'import json, sys
v = json.loads(sys.argv[1])
for k in sys.argv[2].split(".") if sys.argv[2] else []:
    try:
        v = v[int(k)] if isinstance(v, list) else v[k]
    except (KeyError, IndexError, ValueError, TypeError):
        print("MISSING"); sys.exit(0)
print(v if isinstance(v, str) else json.dumps(v, separators=(",", ":")))' "$1" "$2"
}

# err_code: the code of the error JSON in OUT, if it is one as the spec
# has it (cniVersion, an integer code, a msg, nothing else on stdout).
err_code() {
	"$TB_PY" -c 'import json, sys
try:
    v = json.loads(sys.argv[1])
except ValueError:
    print("not JSON"); sys.exit(0)
ok = (isinstance(v, dict) and isinstance(v.get("cniVersion"), str)
      and type(v.get("code")) is int and isinstance(v.get("msg"), str)
      and v["msg"] and isinstance(v.get("details", ""), str))
print(v["code"] if ok else "malformed")' "$OUT"
}

# conf FILE VERSION [POLICY|-] [PREVRESULT]: a network configuration.
conf() {
	"$TB_PY" - "$@" "$TB_DIR/ctl.sock" "${P}-" <<'EOF'
import json, sys
a = sys.argv[1:]
path, version, policy = a[0], a[1], a[2]
prev, sock, prefix = a[3], a[4], a[5]
c = {"cniVersion": version, "name": "sluice-test", "type": "sluice-cni",
     "socket": sock, "sandboxPrefix": prefix}
if policy != "-":
    c["policy"] = policy
if prev:
    c["prevResult"] = json.loads(prev)
with open(path, "w") as f:
    json.dump(c, f)
EOF
}

sb_field() {
	tb_sluice sandbox list -j | "$TB_PY" -c 'import json, sys
for s in json.load(sys.stdin):
    if s["name"] == sys.argv[1]:
        print(s[sys.argv[2]])' "$1" "$2"
}

cat > "$TB_DIR/policy.json" <<EOF
{"sluice": {"allowedCidrs": ["192.0.2.10:443"]}}
EOF
cat > "$TB_DIR/policy-plain.json" <<EOF
{"sluice": {"allowedCidrs": ["192.0.2.20:80"]}}
EOF
printf '{"sluice": {"allowedCidrs": ["192.0.2.10:443"],\n  "colour": "blue"}}\n' \
    > "$TB_DIR/policy-bad.json"

# ---- VERSION
CONF=/dev/null
cni_run VERSION "" "" ""
tb_assert_eq "$RC" 0 "VERSION: exit 0"
tb_assert_eq "$OUT" '{"cniVersion":"1.0.0","supportedVersions":["0.4.0","1.0.0"]}' \
    "VERSION: the supported versions"

# ---- ADD
holder
h1=$HOLDER
ns1=/proc/$h1/ns/net
id1=$(new_id)
# 9 prefix characters leave 39: 26 of the ID, "-", 12 of its sha256
name1="${P}-${id1:0:26}-$(printf %s "$id1" | sha256sum | cut -c1-12)"
CONF=$TB_DIR/conf.json
conf "$CONF" 1.0.0 "$TB_DIR/policy.json" ""
cni_run ADD "$id1" "$ns1" eth0
tb_assert_eq "$RC" 0 "ADD: exit 0"
res1=$OUT
addr=$(sb_field "$name1" addr)
gw=$(sb_field "$name1" gateway)
tb_assert_match "$addr" '^10\.213\.[0-9]+\.[0-9]+/30$' "ADD: sluiced has sandbox prefix+ID+hash"
tb_assert_eq "$(jget "$res1" cniVersion)" 1.0.0 "result: cniVersion of the configuration"
tb_assert_eq "$(jget "$res1" interfaces)" \
    "[{\"name\":\"eth0\",\"mac\":\"$(nsenter --net="$ns1" ip -o link show dev eth0 |
    sed -E 's/.*link\/ether ([0-9a-f:]+).*/\1/')\",\"sandbox\":\"$ns1\"}]" \
    "result: interfaces eth0 with its MAC, in CNI_NETNS"
tb_assert_eq "$(jget "$res1" ips)" \
    "[{\"address\":\"$addr\",\"gateway\":\"$gw\",\"interface\":0}]" \
    "result: ips, the sandbox's address and gateway on interface 0"
tb_assert_eq "$(jget "$res1" routes)" "[{\"dst\":\"0.0.0.0/0\",\"gw\":\"$gw\"}]" \
    "result: the default route via the gateway"
tb_assert_eq "$(jget "$res1" dns)" "{\"nameservers\":[\"$gw\"]}" \
    "result: the gateway is the resolver"
tb_assert_match "$(nsenter --net="$ns1" ip -o -4 addr show dev eth0)" \
    " ${addr//./\\.} " "the namespace's eth0 carries that address"

out=$(nsenter --net="$ns1" curl -s --max-time 5 --cacert "$TB_CA" \
    --resolve "a.test:443:$TB_ADDR_HTTPS" https://a.test/)
tb_assert_eq "$out" "hello from a.test" "its allowed flow works"
echo cni-secret | nsenter --net="$ns1" nc -w 2 "$TB_ADDR_ATK" 4444 >/dev/null 2>&1
tb_check "its denied flow fails" [ $? != 0 ]
sleep 0.3
tb_assert_eq "$(tb_attacker_packet_count)" 0 "the attacker received nothing"
tb_wait_rows "SELECT count(*) FROM flows WHERE sandbox = '$name1'" 2 >/dev/null
tb_assert_eq "$(tb_sql "SELECT verdict, reason FROM flows WHERE sandbox = '$name1' ORDER BY id")" \
"allow|allowed_cidr
deny|not_allowlisted" "rows under the sandbox's name"

# ---- CHECK
conf "$TB_DIR/check.json" 1.0.0 "$TB_DIR/policy.json" "$res1"
CONF=$TB_DIR/check.json
cni_run CHECK "$id1" "$ns1" eth0
tb_assert_eq "$RC/$OUT" "0/" "CHECK with the ADD's result: exit 0, no output"
conf "$TB_DIR/check-other.json" 1.0.0 "$TB_DIR/policy.json" \
    "${res1//$addr/10.213.255.254/30}"
CONF=$TB_DIR/check-other.json
cni_run CHECK "$id1" "$ns1" eth0
tb_assert_eq "$RC/$(err_code)" "1/103" "CHECK with another address in prevResult: error 103"
CONF=$TB_DIR/conf.json
cni_run CHECK "$id1" "$ns1" eth0
tb_assert_eq "$RC/$(err_code)" "1/7" "CHECK without prevResult: error 7"

# ---- ADD again, without DEL: the interface exists, or the sandbox
cni_run ADD "$id1" "$ns1" eth0
tb_assert_eq "$RC/$(err_code)" "1/100" "a second ADD: error 100"
holder
h0=$HOLDER
cni_run ADD "$id1" "/proc/$h0/ns/net" eth0
tb_assert_eq "$RC/$(err_code)" "1/100" "the same container ID in another namespace: error 100"
tb_assert_eq "$(sb_field "$name1" addr)" "$addr" "and the sandbox is as it was"
tb_check "the other namespace got nothing" \
    bash -c "! nsenter --net='/proc/$h0/ns/net' ip link show eth0 >/dev/null 2>&1"

# ---- DEL
cni_run DEL "$id1" "$ns1" net1
tb_assert_eq "$RC" 0 "DEL of another interface name: exit 0"
tb_assert_eq "$(sb_field "$name1" addr)" "$addr" "and the eth0 sandbox stays"
cni_run DEL "$id1" "$ns1" eth0
tb_assert_eq "$RC/$OUT" "0/" "DEL: exit 0, no output"
tb_assert_eq "$(sb_field "$name1" addr)" "" "the sandbox is gone"
tb_check "the process lives on" kill -0 "$h1"
tb_check "its namespace is unplugged (no eth0)" \
    bash -c "! nsenter --net='$ns1' ip link show eth0 >/dev/null 2>&1"
cni_run DEL "$id1" "$ns1" eth0
tb_assert_eq "$RC/$OUT" "0/" "DEL again: exit 0"
CONF=$TB_DIR/check.json
cni_run CHECK "$id1" "$ns1" eth0
tb_assert_eq "$RC/$(err_code)" "1/103" "CHECK after DEL: error 103"

# ---- 0.4.0, the policy from CNI_ARGS, DEL when the namespace is gone
holder
h2=$HOLDER
ns2=/proc/$h2/ns/net
id2=$(new_id)
name2="${P}-${id2:0:26}-$(printf %s "$id2" | sha256sum | cut -c1-12)"
# chained after a plugin that set up lo: its result is kept, ours follows
CONF=$TB_DIR/conf-040.json
conf "$CONF" 0.4.0 - "{\"cniVersion\": \"0.4.0\",
    \"interfaces\": [{\"name\": \"lo\", \"sandbox\": \"$ns2\"}],
    \"ips\": [{\"version\": \"4\", \"address\": \"127.0.0.1/8\", \"interface\": 0}],
    \"dns\": {\"nameservers\": [\"192.0.2.53\"], \"search\": [\"example\"]}}"
cni_run ADD "$id2" "$ns2" eth0 "IgnoreUnknown=1;SLUICE_POLICY=$TB_DIR/policy-plain.json;K8S_POD_NAME=x"
tb_assert_eq "$RC" 0 "ADD, 0.4.0, chained, policy from CNI_ARGS: exit 0"
addr2=$(sb_field "$name2" addr)
gw2=$(sb_field "$name2" gateway)
tb_assert_eq "$(jget "$OUT" cniVersion)" 0.4.0 "result: cniVersion 0.4.0"
tb_assert_eq "$(jget "$OUT" ips)" \
    "[{\"version\":\"4\",\"address\":\"127.0.0.1/8\",\"interface\":0},{\"address\":\"$addr2\",\"gateway\":\"$gw2\",\"interface\":1,\"version\":\"4\"}]" \
    "result: prevResult's ips, then ours with version 4 on interface 1"
tb_assert_eq "$(jget "$OUT" interfaces.0.name)/$(jget "$OUT" interfaces.1.name)" "lo/eth0" \
    "result: prevResult's interfaces, then eth0"
tb_assert_eq "$(jget "$OUT" dns)" \
    "{\"nameservers\":[\"$gw2\",\"192.0.2.53\"],\"search\":[\"example\"]}" \
    "result: the gateway first among the nameservers, the rest kept"
out=$(nsenter --net="$ns2" curl -s --max-time 5 "http://$TB_ADDR_PLAIN/")
tb_assert_eq "$out" "hello from plain.test" "CNI_ARGS's policy allows its host"
nsenter --net="$ns2" curl -s --max-time 3 --cacert "$TB_CA" \
    --resolve "a.test:443:$TB_ADDR_HTTPS" https://a.test/ >/dev/null 2>&1
tb_check "and not the configuration's" [ $? != 0 ]
conf "$TB_DIR/check-040.json" 0.4.0 - "$OUT"
CONF=$TB_DIR/check-040.json
cni_run CHECK "$id2" "$ns2" eth0
tb_assert_eq "$RC/$OUT" "0/" "CHECK, 0.4.0: exit 0"
kill "$h2"
wait "$h2" 2>/dev/null
CONF=$TB_DIR/conf-040.json
cni_run DEL "$id2" "$ns2" eth0
tb_assert_eq "$RC/$OUT" "0/" "DEL with CNI_NETNS gone: exit 0"
tb_assert_eq "$(sb_field "$name2" addr)" "" "the sandbox is gone"
cni_run DEL "$id2" "" eth0
tb_assert_eq "$RC/$OUT" "0/" "DEL without CNI_NETNS: exit 0"

# ---- invalid input: the spec's error JSON, and nothing made
holder
h3=$HOLDER
ns3=/proc/$h3/ns/net
id3=$(new_id)
CONF=$TB_DIR/conf-nopolicy.json
conf "$CONF" 1.0.0 - ""
cni_run ADD "$id3" "$ns3" eth0
tb_assert_eq "$RC/$(err_code)" "1/7" "no policy: error 7"
CONF=$TB_DIR/conf-badpolicy.json
conf "$CONF" 1.0.0 "$TB_DIR/policy-bad.json" ""
cni_run ADD "$id3" "$ns3" eth0
tb_assert_eq "$RC/$(err_code)" "1/7" "a policy that does not parse: error 7"
tb_assert_match "$(jget "$OUT" details)" "policy-bad.json:2:[0-9]+: .*colour" \
    "its details give file:line:col"
printf '{"cniVersion": "1.0.0", "name": ' > "$TB_DIR/conf-broken.json"
CONF=$TB_DIR/conf-broken.json
cni_run ADD "$id3" "$ns3" eth0
tb_assert_eq "$RC/$(err_code)" "1/6" "configuration that is not JSON: error 6"
CONF=$TB_DIR/conf-old.json
conf "$CONF" 0.2.0 "$TB_DIR/policy.json" ""
cni_run ADD "$id3" "$ns3" eth0
tb_assert_eq "$RC/$(err_code)" "1/1" "cniVersion 0.2.0: error 1"
CONF=$TB_DIR/conf.json
cni_run ADD "$id3" "$ns3" net1
tb_assert_eq "$RC/$(err_code)" "1/4" "CNI_IFNAME other than eth0: error 4"
tb_assert_match "$(jget "$OUT" msg)" CNI_IFNAME "its message names CNI_IFNAME"
cni_run ADD "" "$ns3" eth0
tb_assert_eq "$RC/$(err_code)" "1/4" "no CNI_CONTAINERID: error 4"
cni_run ADD "$id3" /etc/hostname eth0
tb_assert_eq "$RC/$(err_code)" "1/4" "CNI_NETNS that is no namespace: error 4"
cni_run ADD "$id3" "$TB_DIR/no-such-netns" eth0
tb_assert_eq "$RC/$(err_code)" "1/3" "CNI_NETNS that does not exist: error 3"
cni_run ADD "$id3" "/run/netns/$TB_NETNS_GW" eth0
tb_assert_eq "$RC/$(err_code)" "1/101" "the gateway's namespace: sluiced refuses, error 101"
tb_assert_eq "$(tb_sluice sandbox list -j)" "[]" "none of them made a sandbox"
tb_check "nor an interface" \
    bash -c "! nsenter --net='$ns3' ip link show eth0 >/dev/null 2>&1"

# ---- sluiced down: try again later
tb_sluiced_stop
cni_run ADD "$id3" "$ns3" eth0
tb_assert_eq "$RC/$(err_code)" "1/11" "ADD with sluiced down: error 11"
cni_run DEL "$id3" "$ns3" eth0
tb_assert_eq "$RC/$(err_code)" "1/11" "DEL with sluiced down: error 11 (its state would bring the sandbox back)"
tb_done
