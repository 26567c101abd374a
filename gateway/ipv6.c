/* ipv6.c: IPv6 from sandboxes is dropped, and recorded once per attempt.
 *
 * Sandboxes get no IPv6: the gateway has no IPv6 address on their links
 * and forwards none. A sandbox's root can still turn IPv6 on and send; the
 * ruleset queues every such packet (raw PREROUTING, before conntrack), and
 * here each one is dropped. The first packet of an attempt (source,
 * destination, protocol, port or ICMPv6 type, within 30 s) gets a flows
 * row with reason "ipv6", so the attempt is as visible in the log as an
 * IPv4 denial; further packets of it only count. Link housekeeping
 * (neighbour discovery, router solicitations, listener reports) is dropped
 * without a row.
 *
 * The rows are remembered in a table of their own, never in the IPv4 flow
 * table: its entries carry verdicts that are reused, and a folded IPv6
 * address must never find an IPv4 flow's allow.
 */
#include <netinet/in.h>
#include <linux/netfilter.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "gateway/gw.h"
#include "gateway/log.h"
#include "gateway/verdict.h"

/*
 * The two addresses (32 bytes) folded into the 64 bits a flow key has
 * room for (its saddr and daddr). A table hit suppresses the row of an
 * attempt for 30 s, so the fold must not be one a sandbox can aim: with
 * an unkeyed hash it could pick a destination whose fold equals one it
 * had just tried, and reach it with no row. SipHash under a key drawn
 * once per process cannot be aimed, and both addresses in one 64-bit
 * digest make a chance collision as rare as the table's own hash's.
 */
static struct dns_hash_key fold_key;
static pthread_once_t fold_once = PTHREAD_ONCE_INIT;

static void
fold_key_init(void)
{
	dns_hash_key_new(&fold_key, &fold_key);
}

static void
fold(const uint8_t saddr[16], const uint8_t daddr[16], uint32_t out[2])
{
	uint8_t both[32];
	uint64_t h;

	(void)pthread_once(&fold_once, fold_key_init);
	memcpy(both, saddr, 16);
	memcpy(both + 16, daddr, 16);
	h = dns_siphash(&fold_key, both, sizeof(both));
	out[0] = (uint32_t)h;
	out[1] = (uint32_t)(h >> 32);
}

/*
 * What any IPv6 stack sends on a link it brings up — multicast listener
 * reports and queries, router and neighbour solicitations and
 * advertisements, redirects — is dropped without a row: it is no attempt
 * to reach anything, and every sandbox whose kernel has IPv6 on sends a
 * few. None of it can go further than the veth, and nothing answers it.
 */
static bool
link_housekeeping(const struct nfq_tuple6 *t)
{
	if (t->proto != IPPROTO_ICMPV6)
		return false;
	switch (t->icmp_type) {
	case 130: case 131: case 132:	/* MLD query, report, done */
	case 133: case 134:		/* router solicitation, advertisement */
	case 135: case 136: case 137:	/* neighbour sol./adv., redirect */
	case 143:			/* MLDv2 report */
		return true;
	default:
		return false;
	}
}

int
gw_ipv6_packet(struct gw *gw, const struct nfq_packet *pkt, uint64_t now)
{
	struct gw_sandbox *sb;
	struct nfq_tuple6 t;
	struct nfq_flow_key key;
	struct gw_decision d = { GW_DENY, GW_R_IPV6, NULL, NULL, "", 0 };
	uint32_t folded[2];

	if (nfq_packet6_parse(pkt->payload, pkt->len, &t) != NFQ_PARSE_OK) {
		gw->pkt_errors++;
		return nfq_queue_verdict(gw->queue, pkt->id, NF_DROP, false, 0);
	}
	if (link_housekeeping(&t))
		return nfq_queue_verdict(gw->queue, pkt->id, NF_DROP, false, 0);
	memset(&key, 0, sizeof(key));
	key.ifindex = pkt->indev;
	fold(t.saddr, t.daddr, folded);
	key.saddr = folded[0];
	key.daddr = folded[1];
	key.proto = t.proto;
	key.sport = t.proto == IPPROTO_ICMPV6 ? t.icmp_type : t.sport;
	key.dport = t.dport;
	if (nfq_flows_lookup(gw->flows6, &key, now) != NULL)
		return nfq_queue_verdict(gw->queue, pkt->id, NF_DROP, false, 0);
	(void)nfq_flows_insert(gw->flows6, &key, now, GW_FLOW_TTL_MS, NF_DROP,
	    GW_MARK_DENY);

	sb = gw_sandbox_by_ifindex(gw, pkt->indev);
	/* a new attempt costs the sandbox a connection token: a flood of
	 * IPv6 attempts is only counted, not logged row by row */
	if (sb != NULL && !gw_limit_conn(gw, sb, now)) {
		gw->limited_flows++;
		return nfq_queue_verdict(gw->queue, pkt->id, NF_DROP, false, 0);
	}
	/* never carried, audit mode or not */
	d.reason = sb != NULL ? GW_R_IPV6 : GW_R_UNKNOWN_SANDBOX;
	if (gw_log_flow6(gw, sb, &t, &d) == -1)
		gw->denied_unlogged++;
	log_debug("ipv6 from %s: %s (%s) dropped", sb != NULL ? sb->name : "?",
	    gw_reason_name(d.reason), nfq_proto_name(t.proto));
	return nfq_queue_verdict(gw->queue, pkt->id, NF_DROP, false, 0);
}

/*
 * Lets IPv6 from the sandbox veth ifname (in the gateway namespace, which
 * the calling thread must be in) reach the queue rule: IPv6 on, with no
 * address of the gateway's own (addr_gen_mode 1: not even a link-local
 * one, so it can neither answer nor send), no autoconfiguration and no
 * router advertisements taken. The order matters: the address mode is set
 * before IPv6 comes on. Returns 0 or -1 with errno.
 */
int
gw_ipv6_queue_link(const char *ifname)
{
	static const char *const set[][2] = {
		{ "addr_gen_mode", "1" },
		{ "accept_ra", "0" },
		{ "autoconf", "0" },
		{ "accept_redirects", "0" },
		{ "forwarding", "0" },
		{ "disable_ipv6", "0" },
	};
	char path[128];
	size_t i;

	for (i = 0; i < sizeof(set) / sizeof(set[0]); i++) {
		snprintf(path, sizeof(path), "net/ipv6/conf/%s/%s", ifname,
		    set[i][0]);
		if (gw_sysctl(path, set[i][1]) == -1)
			return -1;
	}
	return 0;
}
