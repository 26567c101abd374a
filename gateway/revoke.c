/*
 * revoke.c: what a policy set takes away from connections already open.
 *
 * A connection is decided at its start; left alone, one open before a
 * `policy set` would go on under the policy that no longer holds, which
 * is the moment an operator revoking access in an incident needs it to
 * hold. So the sandbox's connections are read from conntrack, and each
 * one that the old policy let start and the new one would refuse gets the
 * deny mark: nothing more of it passes either way (the ruleset rejects
 * the client's next packet with a reset and drops the server's), and its
 * row ends with end_state "revoked" and its counters so far.
 *
 * "Would refuse" is the new policy's decision of the connection's SYN,
 * with the bindings the resolver holds now, beside the old policy's on
 * the same: only what the change took away is cut. A connection whose
 * binding has expired since it started is refused by both and is left
 * alone. Where the SYN would still pass (its address is bound to another
 * name the new policy allows), a connection whose first flight was read
 * is judged by the name it presented, its SNI or HTTP Host, read back
 * from its row: cut if the old policy let that name in on its port and
 * the new one does not (a CDN address shared by a revoked name and an
 * allowed one). Its row is written by then, but for one decided within
 * the writer's last batch or so: the log is flushed first, for up to
 * REVOKE_FLUSH_MS.
 */
#include <arpa/inet.h>
#include <linux/netfilter/nf_conntrack_tcp.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "dns/dns.h"
#include "gateway/gw.h"
#include "gateway/log.h"
#include "gateway/verdict.h"

#define REVOKE_FLUSH_MS	200

struct revoke {
	struct gw		*gw;
	struct gw_sandbox	*sb;
	struct gw_decide_ctx	 was, now;
	struct store_reader	*log;	/* NULL: names not read back */
	bool			 log_tried;	/* opened when first needed */
	int			 cut;
};

/* Whether policy p lets name in on port: allowed, or anything in audit. */
static bool
lets_in(const struct policy *p, const char *name, uint16_t port)
{
	const struct policy_domain *rule;

	return p->mode == POLICY_AUDIT ||
	    policy_match_name(p, name, port, &rule) == POLICY_NAME_ALLOWED;
}

/*
 * The log, read back: opened when a connection first needs its name (most
 * policy sets have none to ask about), after the rows of connections
 * decided a moment ago are written — a wait of up to REVOKE_FLUSH_MS, in
 * which no verdict is given.
 */
static struct store_reader *
reader(struct revoke *r)
{
	char err[512];

	if (!r->log_tried) {
		r->log_tried = true;
		(void)store_flush(r->gw->store, REVOKE_FLUSH_MS);
		if ((r->log = store_reader_open(r->gw->cfg.db, err,
		    sizeof(err))) == NULL)
			log_warnx("policy set: the names of open connections "
			    "are not read back (%s): only their addresses are "
			    "judged", err);
	}
	return r->log;
}

/* Whether the name e's first flight presented was let in by the old
 * policy and is refused by the new one (false when not known). */
static bool
name_revoked(struct revoke *r, const struct nfq_ct_end *e)
{
	char src[INET_ADDRSTRLEN], dst[INET_ADDRSTRLEN];
	char presented[DNS_NAME_MAX + 1], name[DNS_NAME_MAX + 1];
	struct store_reader *log = reader(r);
	struct in_addr a;

	if (log == NULL)
		return false;
	a.s_addr = e->saddr;
	inet_ntop(AF_INET, &a, src, sizeof(src));
	a.s_addr = e->daddr;
	inet_ntop(AF_INET, &a, dst, sizeof(dst));
	if (store_reader_presented(log, src, e->sport, dst, e->dport,
	    presented, sizeof(presented)) != 1 || presented[0] == '\0' ||
	    !dns_name_normalize(presented, strlen(presented), name, NULL))
		return false;
	return lets_in(r->was.policy, name, e->dport) &&
	    !lets_in(r->now.policy, name, e->dport);
}

static uint32_t
revise(void *arg, const struct nfq_ct_end *e)
{
	struct revoke *r = arg;
	struct gw_decision before, after;
	struct nfq_tuple t;
	uint32_t m = e->mark & GW_MARK_MASK;

	/* decided connections only: an undecided one (a SYN's) is decided
	 * by the new policy, a denied one stays so */
	if (m != GW_MARK_ALLOW && m != GW_MARK_INSPECT && m != GW_MARK_VERIFY)
		return 0;
	memset(&t, 0, sizeof(t));
	t.proto = e->proto;
	t.saddr = e->saddr;
	t.daddr = e->daddr;
	t.sport = e->sport;
	t.dport = e->dport;
	gw_decide(&r->was, &t, &before);
	gw_decide(&r->now, &t, &after);
	if (before.verdict == GW_DENY)
		return 0;
	/* a flight not decided yet will be, under the new policy (asked
	 * first: it has no row whose name could be read back) */
	if (gw_inspect_undecided(r->gw, r->sb, e))
		return 0;
	/* the SYN would pass: a connection whose name was read is judged
	 * by that name */
	if (after.verdict != GW_DENY && (e->proto != IPPROTO_TCP ||
	    gw_inspect_kind(&after, e->dport) == GW_INSPECT_NONE ||
	    !name_revoked(r, e)))
		return 0;
	return GW_MARK_DENY;
}

/*
 * A TCP connection both ends have closed, or one reset. An honest stack
 * sends nothing more on it, but conntrack passes segments inside the
 * window in TIME_WAIT (and renews the entry for each), so a sandbox
 * sending raw segments after its FIN went on under the old allow mark
 * (found by review, 2026-12-03; adversarial 28). Its entry gets the deny
 * mark like any other; it is no open connection cut, and its row gets
 * its own end when conntrack lets the entry go.
 */
static bool
closed(const struct nfq_ct_end *e)
{
	return e->proto == IPPROTO_TCP &&
	    (e->tcp_state == TCP_CONNTRACK_LAST_ACK ||
	    e->tcp_state == TCP_CONNTRACK_TIME_WAIT ||
	    e->tcp_state == TCP_CONNTRACK_CLOSE);
}

static void
revised(void *arg, const struct nfq_ct_end *e)
{
	struct revoke *r = arg;

	/* a proof still awaited must not give it its allow mark back */
	gw_inspect_revoked(r->gw, r->sb, e);
	if (closed(e))
		return;
	r->cut++;
	(void)gw_log_flow_end(r->gw, e, "revoked");
}

int
gw_revoke(struct gw *gw, struct gw_sandbox *sb, const struct policy *old,
    char *err, size_t errlen)
{
	struct revoke r;
	int n;

	memset(&r, 0, sizeof(r));
	r.gw = gw;
	r.sb = sb;
	r.now = gw_decide_ctx_of(gw, sb, gw_now_ms());
	r.was = r.now;
	r.was.policy = old;
	n = nfq_ct_revise(sb->addr, GW_MARK_MASK, revise, revised, &r, err,
	    errlen);
	store_reader_close(r.log);
	gw->revoked += (uint64_t)r.cut;
	return n == -1 ? -1 : r.cut;
}
