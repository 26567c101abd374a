#!/bin/sh
# Installs the Debian 12 packages that sluice's build, tests and demo use.
# Idempotent: asks apt only for what is missing.
set -eu

# clang also builds the eBPF program (nfq/bpf/), which libbpf-dev loads
PKGS="build-essential pkg-config clang libbpf-dev
libnetfilter-queue-dev libmnl-dev libsqlite3-dev libjansson-dev libssl-dev libcmocka-dev
libndpi-dev libpcap-dev
iptables nftables iproute2 conntrack sqlite3
nginx-light dnsmasq-base openssl curl netcat-openbsd socat python3 procps
bind9-dnsutils iputils-ping tcpdump strace
libclang-rt-14-dev
iperf3 wrk dnsperf tinyproxy squid
systemd man-db"

missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
	    missing="$missing $p"
done
[ -z "$missing" ] && exit 0

if [ "$(id -u)" != 0 ]; then
	echo "install-deps: missing packages:$missing (run as root to install them)" >&2
	exit 1
fi
echo "install-deps: installing$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# nginx's package would start a system-wide nginx on :80; keep services from
# starting during installation (policy-rc.d is the Debian way to say so).
prc=/usr/sbin/policy-rc.d
made_prc=0
if [ ! -e $prc ]; then
	printf '#!/bin/sh\nexit 101\n' > $prc && chmod 0755 $prc && made_prc=1
fi
rc=0
apt-get install -y -qq --no-install-recommends $missing >/dev/null || rc=$?
[ $made_prc = 1 ] && rm -f $prc
exit $rc
