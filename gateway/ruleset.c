/* ruleset.c: the gateway namespace's netfilter rules, installed in one go.
 *
 * This kernel has no native nftables queue expression, so the rules are
 * iptables-nft rules (the NFQUEUE target through nft's xt compat), loaded
 * with iptables-restore: every table is replaced atomically, so a restart
 * never leaves a half-built ruleset. The namespace is sluice's alone.
 *
 * A packet from a sandbox veth (sg+) meets, in order:
 *   mangle PREROUTING  connmark -> packet mark (decided flows carry it)
 *   filter FORWARD/INPUT -> chain sluice-sandbox:
 *       allow mark      accept (the fast path: never leaves the kernel)
 *       deny mark       REJECT: TCP reset, or ICMP admin-prohibited
 *       inspect/verify  NFQUEUE (but bare ACKs, below)
 *       no mark, NEW    NFQUEUE, without --queue-bypass: no reader, no pass
 *       anything else   drop
 *   filter FORWARD from the uplink (a server's packet): accepted on the
 *       allow or inspect mark; on the verify mark copied to sluiced
 *       (NFLOG) and accepted (inspect.c: the ACK that proves the server
 *       took the bytes sluiced read; queued instead where NFLOG is
 *       missing); dropped otherwise
 *   mangle POSTROUTING/INPUT  a mark a decision set -> connmark, for the
 *       rest of the flow
 * except DNS to the gateway itself (UDP/TCP 53 on INPUT), accepted for the
 * resolver before anything is queued.
 * sluiced answers a queued packet with NF_ACCEPT + allow mark, or with
 * NF_REPEAT + deny mark so the same chain rejects it: the kernel sends the
 * RST and the client fails at once instead of timing out. The verdict
 * cannot set the conntrack mark directly here (no NETLINK_GLUE_CT), hence
 * the packet mark saved by CONNMARK. Only a mark a decision set is saved
 * (GW_MARK_SET, which the verdicts add): a packet whose mark was restored
 * from its connection, between PREROUTING and POSTROUTING while sluiced
 * changes that connection's mark over ctnetlink, would write the old one
 * back.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "gateway/gw.h"
#include "gateway/log.h"

/*
 * Two rules sets are optimisations, not part of the boundary, and use
 * matches a kernel may lack (xt_addrtype, xt_CT, xt_u32);
 * without them the ruleset is loaded without these and the traffic takes
 * the queue.
 *
 * DNS over UDP to the gateway's own resolver is not tracked: a conntrack
 * entry per query (made, timed out, its destroy event read by sluiced) is
 * work for nothing, since the INPUT rule admits every such datagram from a
 * sandbox veth and the resolver logs each query itself, and a sandbox
 * sending from many ports could fill the table every sandbox needs. Only
 * to the gateway's own addresses: DNS to any other resolver is a flow like
 * any other, tracked, queued and denied (dns_bypass).
 */
static const char raw_dns[] =
    "*raw\n"
    ":PREROUTING ACCEPT [0:0]\n"
    ":OUTPUT ACCEPT [0:0]\n"
    "-A PREROUTING -i " GW_SB_IF_PREFIX "+ -p udp --dport 53 -m addrtype --dst-type LOCAL -j CT --notrack\n"
    "-A OUTPUT -o " GW_SB_IF_PREFIX "+ -p udp --sport 53 -j CT --notrack\n"
    "COMMIT\n";

/*
 * A flow under inspection sends its bare ACKs past the queue: no IP
 * options (IHL 5), total length exactly the headers' (no byte of payload),
 * flags exactly ACK, for the two TCP header lengths clients send (no
 * options, timestamps). They carry nothing to read. On 443 the
 * handshake's last ACK was one of three trips through sluiced per TLS
 * connection; on 80 the handshake's and the ones acknowledging the
 * response were two of five. An HTTP connection's ACKs used to tell
 * sluiced that a kept-alive connection was still in use; now conntrack's
 * counters do, asked once sluiced has seen nothing of it for --http-idle
 * (inspect.c).
 */
#define BARE_ACK_40 "-m u32 --u32 \"0>>24=0x45&&0&0xFFFF=40&&32>>28=5&&32>>16&0xFF=0x10\""
#define BARE_ACK_52 "-m u32 --u32 \"0>>24=0x45&&0&0xFFFF=52&&32>>28=8&&32>>16&0xFF=0x10\""

/*
 * SYNs accepted in the kernel (nfq/fastsyn.c): a SYN from a sandbox with
 * no payload whose (interface, source, destination, port) is in the set
 * was decided "inspect" through the queue before, and is marked so here,
 * ahead of the filter table (priority -5), only while it carries no mark
 * of sluice's (a denied SYN repeated with the deny mark stays denied).
 * The filter chain copies it to sluiced (NFLOG) and accepts it. Only SYNs
 * without payload: the length must be exactly the headers' (IHL 5, each
 * TCP header length), so a SYN with data (TCP Fast Open) is queued and
 * its data held like any first flight.
 */
static int
fastsyn_table(char *buf, size_t len)
{
	/* TCP header lengths in words, Linux's (timestamps) first */
	static const int doffs[] = { 10, 5, 6, 7, 8, 9, 11, 12, 13, 14, 15 };
	size_t off, i;
	int n;

	n = snprintf(buf, len,
	    "add table ip " GW_FASTSYN_TABLE "\n"
	    "delete table ip " GW_FASTSYN_TABLE "\n"
	    "table ip " GW_FASTSYN_TABLE " {\n"
	    " set " GW_FASTSYN_SET " {\n"
	    "  type iface_index . ipv4_addr . ipv4_addr . inet_service\n"
	    "  flags timeout\n"
	    "  size 262144\n"
	    " }\n"
	    " chain syn {\n"
	    "  type filter hook forward priority -5; policy accept;\n"
	    "  tcp flags & (fin|syn|rst|ack) == syn meta mark & 0x%x == 0 ip hdrlength 5 ct state new jump shape\n"
	    " }\n"
	    " chain shape {\n", GW_MARK_MASK);
	for (i = 0; i < sizeof(doffs) / sizeof(doffs[0]); i++) {
		if (n < 0 || (size_t)n >= len)
			return -1;
		off = (size_t)n;
		n += snprintf(buf + off, len - off,
		    "  ip length %d tcp doff %d goto bound\n",
		    20 + 4 * doffs[i], doffs[i]);
	}
	if (n < 0 || (size_t)n >= len)
		return -1;
	off = (size_t)n;
	n += snprintf(buf + off, len - off,
	    " }\n"
	    " chain bound {\n"
	    "  meta iif . ip saddr . ip daddr . tcp dport @" GW_FASTSYN_SET " meta mark set meta mark | 0x%x\n"
	    " }\n"
	    "}\n", GW_MARK_INSPECT | GW_MARK_SET);
	return n > 0 && (size_t)n < len ? 0 : -1;
}

static void
bare_acks(char *buf, size_t len, bool kernel_syn)
{
	int n = 0;

	if (kernel_syn)
		n = snprintf(buf, len,
		    "-A sluice-sandbox -m mark --mark 0x%x/0x%x -p tcp --tcp-flags SYN,ACK,FIN,RST SYN -j NFLOG --nflog-group %u --nflog-size 128\n"
		    "-A sluice-sandbox -m mark --mark 0x%x/0x%x -p tcp --tcp-flags SYN,ACK,FIN,RST SYN -j ACCEPT\n",
		    GW_MARK_INSPECT, GW_MARK_MASK, GW_FASTSYN_GROUP,
		    GW_MARK_INSPECT, GW_MARK_MASK);
	if (n < 0 || (size_t)n >= len)
		n = 0;
	/* inspect or verify: a bare ACK carries no byte to compare either */
	snprintf(buf + n, len - (size_t)n,
	    "-A sluice-sandbox -m mark --mark 0x%x/0x%x -p tcp --dport 443 " BARE_ACK_40 " -j ACCEPT\n"
	    "-A sluice-sandbox -m mark --mark 0x%x/0x%x -p tcp --dport 443 " BARE_ACK_52 " -j ACCEPT\n"
	    "-A sluice-sandbox -m mark --mark 0x%x/0x%x -p tcp --dport 80 " BARE_ACK_40 " -j ACCEPT\n"
	    "-A sluice-sandbox -m mark --mark 0x%x/0x%x -p tcp --dport 80 " BARE_ACK_52 " -j ACCEPT\n",
	    GW_MARK_UNDER, GW_MARK_UNDER, GW_MARK_UNDER, GW_MARK_UNDER,
	    GW_MARK_UNDER, GW_MARK_UNDER, GW_MARK_UNDER, GW_MARK_UNDER);
}

/*
 * First flights passed in the kernel (--kernel-sni, nfq/ksni.c): a packet
 * with bytes of a connection under the inspect mark (not yet decided; not
 * a stale SYN's), small enough for its whole copy to fit one NFLOG
 * message, that the program approves — one complete ClientHello whose
 * (sandbox, destination, port, name) was allowed through the queue
 * before, while that binding lives. Copied whole to sluiced, which
 * decides it again as if it had been queued, and marked as a queued one
 * allowed would be: verify, so that the server's packets are copied for
 * the proof and the client's next bytes come to sluiced.
 */
static int
ksni_rules(char *buf, size_t len, const char *pin)
{
	int n;

	n = snprintf(buf, len,
	    "-A sluice-ksni -j NFLOG --nflog-group %u --nflog-size %u\n"
	    "-A sluice-ksni -j MARK --set-xmark 0x%x/0x%x\n"
	    "-A sluice-ksni -j ACCEPT\n"
	    "-A sluice-sandbox -m mark --mark 0x%x/0x%x -p tcp -m length --length 0:%u -m bpf --object-pinned %s -j sluice-ksni\n",
	    GW_FASTSYN_GROUP, GW_KSNI_PKT_MAX,
	    GW_MARK_VERIFY | GW_MARK_SET, GW_MARK_MASK | GW_MARK_SET,
	    GW_MARK_INSPECT, GW_MARK_MASK, GW_KSNI_PKT_MAX, pin);
	return n > 0 && (size_t)n < len ? 0 : -1;
}

static int
ruleset_load(struct gw *gw, bool extras, bool ksni, char *err, size_t errlen)
{
	char rules[8192], rules6[512], target[64], acks[2048], proof[256];
	char pool[INET_ADDRSTRLEN + 3];
	struct in_addr pa = { gw->pool_net };
	const char *raw = extras ? raw_dns : "";
	int n, n6;
	char *argv[] = { "ip", "netns", "exec", (char *)gw->cfg.netns,
	    "iptables-restore", "-w", "5", NULL };
	char *argv6[] = { "ip", "netns", "exec", (char *)gw->cfg.netns,
	    "ip6tables-restore", "-w", "5", NULL };
	unsigned q = gw->cfg.queue_num, nq = gw->cfg.queue_balance;
	const unsigned m = GW_MARK_MASK;

	/* several queues: a flow goes to the queue of the CPU that handles
	 * it, each read by its own thread (workers.c) */
	if (nq > 1)
		snprintf(target, sizeof(target),
		    "--queue-balance %u:%u --queue-cpu-fanout", q, q + nq - 1);
	else
		snprintf(target, sizeof(target), "--queue-num %u", q);
	snprintf(pool, sizeof(pool), "%s/%d", inet_ntoa(pa),
	    __builtin_popcount(gw->pool_mask));
	acks[0] = '\0';
	if (extras)
		bare_acks(acks, sizeof(acks), gw->cfg.kernel_syn);
	if (extras && ksni && ksni_rules(acks + strlen(acks),
	    sizeof(acks) - strlen(acks), nfq_ksni_path(gw->ksni)) == -1) {
		snprintf(err, errlen, "kernel-SNI rules too long");
		return -1;
	}
	/* the server's packets under the verify mark: a copy of each is
	 * enough (its ACK is read, nothing else), and the packet goes on at
	 * once; without NFLOG each waits in the queue for its verdict */
	if (extras)
		snprintf(proof, sizeof(proof),
		    "-A FORWARD -i " GW_UPLINK_IF " -m mark --mark 0x%x/0x%x -j NFLOG --nflog-group %u --nflog-size 128\n"
		    "-A FORWARD -i " GW_UPLINK_IF " -m mark --mark 0x%x/0x%x -j ACCEPT\n",
		    GW_MARK_VERIFY, m, GW_VERIFY_GROUP, GW_MARK_VERIFY, m);
	else
		snprintf(proof, sizeof(proof),
		    "-A FORWARD -i " GW_UPLINK_IF " -m mark --mark 0x%x/0x%x -j NFQUEUE %s\n",
		    GW_MARK_VERIFY, m, target);

	n = snprintf(rules, sizeof(rules),
	    "%s"
	    "*mangle\n"
	    ":PREROUTING ACCEPT [0:0]\n"
	    ":INPUT ACCEPT [0:0]\n"
	    ":FORWARD ACCEPT [0:0]\n"
	    ":OUTPUT ACCEPT [0:0]\n"
	    ":POSTROUTING ACCEPT [0:0]\n"
	    /* a SYN from a sandbox never inherits a connection's mark: a
	     * 5-tuple reused while conntrack still holds the old entry
	     * must be decided afresh (or, if conntrack does not see it as
	     * new, dropped), never ride on the old verdict */
	    "-A PREROUTING -i " GW_SB_IF_PREFIX "+ -p tcp --tcp-flags SYN,ACK SYN -j RETURN\n"
	    "-A PREROUTING -j CONNMARK --restore-mark --nfmask 0x%x --ctmask 0x%x\n"
	    /* every sandbox packet leaves with the same TTL: a segment that
	     * would expire between the gateway and the server (seen by the
	     * gateway, never by the server) cannot be built */
	    "-A FORWARD -i " GW_SB_IF_PREFIX "+ -j TTL --ttl-set 64\n"
	    /* the marks decisions set go onto the connection */
	    "-A INPUT -m mark --mark 0x%x/0x%x -j CONNMARK --save-mark --nfmask 0x%x --ctmask 0x%x\n"
	    "-A POSTROUTING -m mark --mark 0x%x/0x%x -j CONNMARK --save-mark --nfmask 0x%x --ctmask 0x%x\n"
	    "COMMIT\n"
	    "*nat\n"
	    ":PREROUTING ACCEPT [0:0]\n"
	    ":INPUT ACCEPT [0:0]\n"
	    ":OUTPUT ACCEPT [0:0]\n"
	    ":POSTROUTING ACCEPT [0:0]\n"
	    "-A POSTROUTING -o " GW_UPLINK_IF " -j MASQUERADE\n"
	    "COMMIT\n"
	    "*filter\n"
	    ":INPUT DROP [0:0]\n"
	    ":FORWARD DROP [0:0]\n"
	    ":OUTPUT ACCEPT [0:0]\n"
	    ":sluice-sandbox - [0:0]\n"
	    ":sluice-ksni - [0:0]\n"
	    /* The gateway's own ICMP errors must not become a channel: a
	     * reset it sends to an address nobody answers ARP for turns into
	     * a host-unreachable carrying bytes the sandbox chose, addressed
	     * to the denied destination. Towards the uplink only
	     * "fragmentation needed" may leave; towards sandboxes, not
	     * host/net-unreachable (the REJECT rules' own replies are
	     * admin-prohibited and resets). The resolver's answers (and
	     * its questions upstream) leave after one rule. */
	    "-A OUTPUT -p udp -j ACCEPT\n"
	    /* a packet the gateway itself sends as a sandbox's (the reset
	     * of a refused connection's server, inspect.c) leaves only as
	     * part of an established connection, which NAT rewrites: never
	     * with the sandbox's own address */
	    "-A OUTPUT -o " GW_UPLINK_IF " -s %s -m conntrack ! --ctstate ESTABLISHED -j DROP\n"
	    "-A OUTPUT ! -p icmp -j ACCEPT\n"
	    "-A OUTPUT -o " GW_UPLINK_IF " -p icmp -m icmp --icmp-type fragmentation-needed -j ACCEPT\n"
	    "-A OUTPUT -o " GW_UPLINK_IF " -p icmp -j DROP\n"
	    "-A OUTPUT -o " GW_SB_IF_PREFIX "+ -p icmp -m icmp --icmp-type host-unreachable -j DROP\n"
	    "-A OUTPUT -o " GW_SB_IF_PREFIX "+ -p icmp -m icmp --icmp-type network-unreachable -j DROP\n"
	    /* the gateway's resolver: it tells sandboxes apart by their
	     * ingress interface and logs every query itself. A query over
	     * UDP is accepted first, before two rules that were a fifth of
	     * its way through netfilter: it is untracked (raw_dns), so the
	     * INVALID rule could not drop it, and where raw_dns is not
	     * loaded conntrack calls a UDP datagram INVALID only for a
	     * header or checksum the socket layer drops as well. Over TCP
	     * it is tracked and comes after the INVALID rule */
	    "-A INPUT -i " GW_SB_IF_PREFIX "+ -p udp --dport 53 -j ACCEPT\n"
	    "-A INPUT -i lo -j ACCEPT\n"
	    "-A INPUT -m conntrack --ctstate INVALID -j DROP\n"
	    "-A INPUT -i " GW_SB_IF_PREFIX "+ -p tcp --dport 53 -j ACCEPT\n"
	    "-A INPUT -i " GW_SB_IF_PREFIX "+ -j sluice-sandbox\n"
	    "-A INPUT -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT\n"
	    "-A FORWARD -m conntrack --ctstate INVALID -j DROP\n"
	    "-A FORWARD -i " GW_SB_IF_PREFIX "+ -j sluice-sandbox\n"
	    /* replies to decided and inspected flows: the restored
	     * connmark says so (server bytes are no exfiltration). While
	     * inspected bytes the server has not acknowledged are out, its
	     * packets come to sluiced: their ACK is the proof that it took
	     * the bytes sluiced read, and not others (inspect.c) */
	    "-A FORWARD -i " GW_UPLINK_IF " -m mark --mark 0x%x/0x%x -j ACCEPT\n"
	    "-A FORWARD -i " GW_UPLINK_IF " -m mark --mark 0x%x/0x%x -j ACCEPT\n"
	    "%s"
	    /* an ICMP error from a sandbox is RELATED to whichever
	     * connection the packet it quotes belongs to: conntrack checks
	     * the outer destination, never the outer source (a router on
	     * the way may send errors), and the connection's mark, restored
	     * above, is another sandbox's allow. So a sandbox could send
	     * its bytes to that connection's server, or through NAT's
	     * reverse translation into that sandbox, without a decision or
	     * a row (found by review, 2026-12-03; adversarial 36). A
	     * sandbox has no error of its own to send that matters (its
	     * veth drops what is too big without one): none passes */
	    "-A sluice-sandbox -p icmp -m conntrack --ctstate RELATED -j DROP\n"
	    "-A sluice-sandbox -m mark --mark 0x%x/0x%x -j ACCEPT\n"
	    /* a denied inspected flow keeps its deny mark: all it sends
	     * next is reset too (a denied new flow does not: the reset's
	     * conntrack entry must not refuse the next connection that
	     * happens to reuse its 5-tuple without a decision) */
	    "-A sluice-sandbox -m mark --mark 0x%x/0x%x -m conntrack --ctstate ESTABLISHED -j CONNMARK --save-mark --nfmask 0x%x --ctmask 0x%x\n"
	    "-A sluice-sandbox -m mark --mark 0x%x/0x%x -p tcp -j REJECT --reject-with tcp-reset\n"
	    "-A sluice-sandbox -m mark --mark 0x%x/0x%x -j REJECT --reject-with icmp-admin-prohibited\n"
	    /* under inspection: every client packet (this chain sees only
	     * the sandbox's side, the original direction), but for the bare
	     * ACKs above */
	    "%s"
	    "-A sluice-sandbox -m mark --mark 0x%x/0x%x -j NFQUEUE %s\n"
	    "-A sluice-sandbox -m mark --mark 0x0/0x%x -m conntrack --ctstate NEW -j NFQUEUE %s\n"
	    /* a SYN conntrack did not take as new: it still tracks the
	     * 5-tuple (a port reused while the old entry lingers, in a
	     * state it will not reopen from) and ignores the SYN. Decided
	     * and logged like any other; accepted, the server's answer
	     * puts conntrack back in step. Dropped here, it would retry
	     * unseen, without a row, until the old entry timed out. It
	     * comes marked stale: its sequence number is no stream start
	     * sluiced may read from, since the server may be holding the
	     * old connection still (synpath.c) */
	    "-A sluice-sandbox -m mark --mark 0x0/0x%x -p tcp --tcp-flags SYN,ACK,FIN,RST SYN -j MARK --set-xmark 0x%x/0x%x\n"
	    "-A sluice-sandbox -m mark --mark 0x%x/0x%x -p tcp --tcp-flags SYN,ACK,FIN,RST SYN -j NFQUEUE %s\n"
	    "-A sluice-sandbox -j DROP\n"
	    "COMMIT\n",
	    raw, m, m,
	    GW_MARK_SET, GW_MARK_SET, m, m,
	    GW_MARK_SET, GW_MARK_SET, m, m,
	    pool,
	    GW_MARK_ALLOW, m,
	    GW_MARK_INSPECT, m,
	    proof,
	    GW_MARK_ALLOW, m,
	    GW_MARK_DENY, m, m, m,
	    GW_MARK_DENY, m,
	    GW_MARK_DENY, m,
	    acks,
	    GW_MARK_UNDER, GW_MARK_UNDER, target,
	    m, target,
	    m, GW_MARK_STALE, m,
	    GW_MARK_STALE, m, target);
	/* IPv6 is not carried for sandboxes: nothing passes. Every packet a
	 * sandbox sends is queued before conntrack sees it, so that sluiced
	 * logs the attempt (ipv6.c) and drops it. The gateway has no IPv6
	 * address on sandbox links: it answers nothing, neighbour
	 * solicitations and router advertisements included. */
	n6 = snprintf(rules6, sizeof(rules6),
	    "*raw\n"
	    ":PREROUTING ACCEPT [0:0]\n"
	    ":OUTPUT ACCEPT [0:0]\n"
	    "-A PREROUTING -i " GW_SB_IF_PREFIX "+ -j NFQUEUE %s\n"
	    "COMMIT\n"
	    "*filter\n"
	    ":INPUT DROP [0:0]\n"
	    ":FORWARD DROP [0:0]\n"
	    ":OUTPUT DROP [0:0]\n"
	    "-A INPUT -i lo -j ACCEPT\n"
	    "-A OUTPUT -o lo -j ACCEPT\n"
	    "COMMIT\n", target);
	/* a cut ruleset would load without its last rules: never */
	if (n < 0 || (size_t)n >= sizeof(rules) || n6 < 0 ||
	    (size_t)n6 >= sizeof(rules6)) {
		snprintf(err, errlen, "ruleset too long for its buffer");
		return -1;
	}
	if (gw_run(argv, rules, err, errlen) == -1)
		return -1;
	if (gw_run(argv6, rules6, err, errlen) == -1)
		return -1;
	return 0;
}

int
gw_ruleset_apply(struct gw *gw, char *err, size_t errlen)
{
	char nft[2048];
	char *argv[] = { "ip", "netns", "exec", (char *)gw->cfg.netns,
	    "nft", "-f", "-", NULL };
	bool extras = true;

	/* the kernel-SNI rule needs xt_bpf: without it, the rest is loaded
	 * as it would be with --kernel-sni off */
	gw->ksni_rules = false;
	if (gw->ksni != NULL) {
		if (ruleset_load(gw, true, true, err, errlen) == 0) {
			gw->ksni_rules = true;
			goto loaded;
		}
		log_warnx("ruleset: %s; loading it without the kernel-SNI "
		    "rule: every first flight takes the queue", err);
		nfq_ksni_close(gw->ksni);
		gw->ksni = NULL;
	}
	if (ruleset_load(gw, true, false, err, errlen) == -1) {
		log_warnx("ruleset: %s; loading it without the bare-ACK, "
		    "kernel-SYN, DNS-notrack and proof-copy rules (xt_u32, "
		    "xt_addrtype, xt_CT, NFLOG): those packets take the queue "
		    "and conntrack instead", err);
		if (ruleset_load(gw, false, false, err, errlen) == -1)
			return -1;
		extras = false;
	}
loaded:
	gw->verify_copies = extras;
	/* The set and the chain that marks SYNs by it: without them (no
	 * nft, a kernel without concatenated sets) every SYN is queued. */
	gw->fastsyn_rules = false;
	if (extras && gw->cfg.kernel_syn) {
		if (fastsyn_table(nft, sizeof(nft)) == -1)
			fatalx("fastsyn_table: buffer too small");
		if (gw_run(argv, nft, err, errlen) == -1)
			log_warnx("ruleset: table ip " GW_FASTSYN_TABLE ": %s; "
			    "every SYN takes the queue", err);
		else
			gw->fastsyn_rules = true;
	} else if (gw_run(argv, "add table ip " GW_FASTSYN_TABLE "\n"
	    "delete table ip " GW_FASTSYN_TABLE "\n", err, errlen) == -1) {
		/* off: a table an earlier run left must not mark SYNs */
		log_debug("ruleset: no table ip " GW_FASTSYN_TABLE ": %s", err);
	}

	/* Conntrack is in use in the namespace now: its sysctls exist. */
	if (gw_netns_enter(gw->gw_nsfd) == -1)
		fatal("setns %s", gw->cfg.netns);
	if (gw_sysctl("net/netfilter/nf_conntrack_tcp_loose", "0") == -1)
		log_warn("sysctl nf_conntrack_tcp_loose");
	if (gw_sysctl("net/netfilter/nf_conntrack_acct", "1") == -1)
		log_warn("sysctl nf_conntrack_acct");
	/* dates each end, which matches it to its own row (flowlog.c) */
	if (gw_sysctl("net/netfilter/nf_conntrack_timestamp", "1") == -1)
		log_warn("sysctl nf_conntrack_timestamp");
	if (gw_netns_enter(gw->home_nsfd) == -1)
		fatal("setns back home");
	return 0;
}
