/* synpath.c: a flow's first decision, whichever way its SYN came.
 *
 * Most SYNs are queued: sluiced decides them and gives the verdict. A SYN
 * to a (sandbox, destination, port) already decided "allowed, inspect its
 * first flight" while the binding that admitted it lives is accepted in
 * the kernel instead (nfq/fastsyn.c has why and how), and a copy comes
 * here through NFLOG: it is decided exactly as a queued one, without a
 * verdict to give. What that decision says still holds for the
 * connection, because everything it lets through later passes sluiced:
 *   inspect   the hold starts as for a queued SYN, and the first flight
 *             is decided by the name it presents (inspect.c);
 *   allow     (the policy now covers the address by a CIDR, say): the
 *             flow table carries the verdict to its next packets;
 *   deny      (the policy or the binding changed, the sandbox is over a
 *             bound): the row says so at once, the set loses the entry,
 *             and the flow table carries the denial to the connection's
 *             first packet with a byte in it, which is reset without a
 *             row of its own, the server with it (inspect.c). The handshake itself
 *             went to an address the sandbox had resolved through an
 *             allowed name within the binding's lifetime.
 */
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <errno.h>
#include <limits.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_conntrack_tcp.h>
#include <string.h>
#include <time.h>

#include "gateway/capture.h"
#include "gateway/gw.h"
#include "gateway/log.h"
#include "gateway/verdict.h"

/* Gives pkt its verdict, unless it is a copy (already accepted). */
static int
verdict(struct gw *gw, const struct nfq_packet *pkt, uint32_t v,
    uint32_t mark)
{
	if (pkt->copy)
		return 0;
	return nfq_queue_verdict(gw->queue, pkt->id, v, true, mark);
}

/* Lets the next SYNs like this one past the queue while its binding
 * lives: t was just decided d, and its first flight is inspected. */
static void
learn(struct gw *gw, const struct nfq_packet *pkt, const struct nfq_tuple *t,
    const struct gw_decision *d, uint64_t now)
{
	uint64_t ms;

	if (gw->fastsyn == NULL || pkt->copy || d->verdict != GW_ALLOW ||
	    d->reason != GW_R_ALLOWED_DOMAIN || d->bound_until_ms <= now)
		return;
	ms = d->bound_until_ms - now;
	if (ms > GW_FASTSYN_MAX_MS)
		ms = GW_FASTSYN_MAX_MS;
	(void)nfq_fastsyn_add(gw->fastsyn, pkt->indev, t->saddr, t->daddr,
	    t->dport, ms);
}

/*
 * An allowed SYN again with the same sequence number: a retransmission,
 * or a new connection that reuses the 5-tuple and the ISN (a sandbox
 * picks both), which must have a row of its own. A retransmission may
 * have waited in the queue behind the first, whose connection has come a
 * long way since (established, even closed). A new one reopens a 5-tuple
 * conntrack was done with: conntrack ends the old entry first, and that
 * end is waiting on the event socket before this SYN was queued, so the
 * ends are read now (each drops its 5-tuple's entry: gw_ct_read). One that
 * conntrack did not take as new (stale) is new if conntrack has the old
 * connection reset or closed: the server has no socket left, and this SYN
 * opens a new one there. (Not past that: a retransmission may wait in the
 * queue while the handshake it belongs to completes, so an established
 * connection says nothing; a server that dropped one without conntrack
 * seeing it go makes a reuse that has no row of its own, to an address
 * the policy allows anyway.) When sluiced cannot tell (no events,
 * some lost lately, a backlog it did not read dry, no answer), the SYN is
 * taken as new: a row too many rather than a connection without one. All
 * of it on this rare path only.
 */
static struct nfq_flow *
same_syn(struct gw *gw, const struct nfq_packet *pkt,
    const struct nfq_tuple *t, const struct nfq_flow_key *key, uint64_t now)
{
	struct nfq_ct_end e;

	if (!gw_ct_read(gw, true))
		return NULL;
	if ((pkt->mark & GW_MARK_MASK) == GW_MARK_STALE &&
	    (nfq_ct_get(gw->ct, IPPROTO_TCP, t->saddr, t->sport, t->daddr,
	    t->dport, &e) != 1 || e.tcp_state == TCP_CONNTRACK_CLOSE ||
	    e.tcp_state == TCP_CONNTRACK_TIME_WAIT))
		return NULL;
	return nfq_flows_lookup(gw->flows, key, now);
}

struct gw_decide_ctx
gw_decide_ctx_of(const struct gw *gw, const struct gw_sandbox *sb,
    uint64_t now)
{
	size_t n;
	/* before the initializer: the order its expressions are evaluated
	 * in is unspecified */
	const uint32_t *host = gw_hostaddrs_list(gw, &n);

	return (struct gw_decide_ctx){
		.policy = sb->policy,
		.sandbox_addr = sb->addr,
		.pool_net = gw->pool_net,
		.pool_mask = gw->pool_mask,
		.uplink = { gw->uplink[0], gw->uplink[1] },
		.host_addrs = host,
		.nhost_addrs = n,
		.bindings = gw->bindings,
		.sandbox_id = sb->slot,
		.now_ms = now,
	};
}

int
gw_decide_first(struct gw *gw, const struct nfq_packet *pkt,
    const struct nfq_tuple *tp, uint64_t now)
{
	struct nfq_tuple t = *tp;
	struct gw_sandbox *sb;
	struct nfq_flow_key key;
	struct nfq_flow *fl;
	struct gw_decision d = { GW_DENY, GW_R_MALFORMED_PACKET, NULL, NULL,
	    "", 0 };
	int kind;
	uint32_t v, mark;
	bool limited = false, logged = true;
	enum gw_limit_kind limit = GW_LIMIT_CONN;

	sb = gw_sandbox_by_ifindex(gw, pkt->indev);
	memset(&key, 0, sizeof(key));
	key.ifindex = pkt->indev;
	key.saddr = t.saddr;
	key.daddr = t.daddr;
	key.sport = t.sport;
	key.dport = t.dport;
	key.proto = t.proto;
	if (t.proto == IPPROTO_ICMP) {
		key.sport = t.icmp_type;
		key.dport = t.icmp_id;
	}
	fl = nfq_flows_lookup(gw->flows, &key, now);
	/* a first flight's verdict is for the segments behind it: a SYN on
	 * its 5-tuple is a new connection whatever its sequence number (the
	 * sandbox picks those), decided and inspected anew, and the entry
	 * goes so that nothing of the new one follows it */
	if (fl != NULL && fl->flight) {
		nfq_flows_remove(gw->flows, &key);
		fl = NULL;
	}
	/* a verdict carries over to a retransmitted SYN (same sequence
	 * number), never to a new connection on a reused 5-tuple: that one
	 * is decided (and inspected) anew, and has its own row — allowed or
	 * denied (a refused client that tries again from the same port is
	 * a new attempt) */
	if (fl != NULL && t.proto == IPPROTO_TCP && fl->tag != t.tcp_seq)
		fl = NULL;
	if (fl != NULL && t.proto == IPPROTO_TCP && (t.tcp_flags & TH_SYN) &&
	    fl->verdict == NF_ACCEPT)
		fl = same_syn(gw, pkt, &t, &key, now);
	if (fl != NULL) {
		/* the same attempt again (a retransmission, a burst): same
		 * verdict, no new row */
		return verdict(gw, pkt, fl->verdict, fl->mark);
	}

	if (sb == NULL) {
		d.verdict = GW_DENY;
		d.reason = GW_R_UNKNOWN_SANDBOX;
	} else if (!gw_limit_conn(gw, sb, now)) {
		/* over the sandbox's rate: not even decided, so that a flood
		 * costs little, and logged only in part (limits.c) */
		limited = true;
	} else if (!store_writable(gw->store)) {
		/* the database cannot be written: nothing new passes until
		 * it can (the denial itself is queued and lands later) */
		d.verdict = GW_DENY;
		d.reason = GW_R_LOG_UNAVAILABLE;
	} else {
		struct gw_decide_ctx ctx = gw_decide_ctx_of(gw, sb, now);

		gw_decide(&ctx, &t, &d);
	}
	kind = limited ? GW_INSPECT_NONE : gw_inspect_kind(&d, t.dport);
	if (kind != GW_INSPECT_NONE && (pkt->mark & GW_MARK_MASK) ==
	    GW_MARK_STALE) {
		/*
		 * A SYN conntrack tracks already (ruleset.c): the server may
		 * still hold that connection, answer this SYN with an ACK of
		 * the old one, and read what follows from where the old one
		 * is. Its sequence number is then no stream start to read
		 * from — a sandbox that picks it a little before the old one's
		 * could show sluiced one name and the server another
		 * (adversarial 24). A flight held on the 5-tuple keeps the
		 * connection's mark: this SYN goes, with its row, and the
		 * flight is read from its own start; the same SYN again is
		 * that flight's (a retransmission, whose SYN-ACK was lost
		 * past the gateway). Not so for a hold kept after an HTTP
		 * connection's first request was decided: the client had
		 * its SYN-ACK, and the server may have reset the connection
		 * unseen (its packets pass in the kernel), so that this SYN
		 * opens a new one, whose bytes the old hold would take for
		 * old ones and let pass unread (adversarial 27). Such a hold
		 * is replaced. Else a flight is held from it, marked
		 * stale (inspect.c): the server's packets are copied, and its
		 * bytes are read only once the server has answered this SYN
		 * with a SYN-ACK of its ISN, which a server holding the old
		 * connection never sends (conntrack itself gets back in step
		 * on that SYN-ACK). Without it they are refused. A client
		 * reusing a port whose old entry lingers (its reset was the
		 * last word, and the server's late packets came after it)
		 * gets its connection; the old one's allow mark never
		 * carries the new one's flight (adversarial 25).
		 */
		int held = gw_inspect_held_syn(gw, pkt, &t);

		/* (a hold that went meanwhile, its proof read by the start,
		 * and no room for a new one: below, as any SYN refused so,
		 * with its verdict and row; found by review, 2026-12-03: it
		 * got neither, and stayed in the queue) */
		if (held == 1 &&
		    gw_inspect_start(gw, sb, pkt, &t, &d, kind, now) == 0)
			return 0;
		if (held == 0) {
			if (gw_log_flow(gw, sb, &t, &d, NULL) == 0)
				return verdict(gw, pkt, NF_ACCEPT, 0);
			gw->denied_unlogged++;
			d.verdict = GW_DENY;
			d.reason = GW_R_LOG_UNAVAILABLE;
			d.rule = NULL;
			kind = GW_INSPECT_NONE;
		}
	}
	if (kind != GW_INSPECT_NONE && t.proto == IPPROTO_TCP &&
	    (t.tcp_flags & TH_SYN)) {
		/* the row is written once the first flight is decided */
		if (gw_inspect_start(gw, sb, pkt, &t, &d, kind, now) == 0) {
			/* a sandbox at its bound of held flights gets its
			 * next SYNs refused, as queued ones are: none may
			 * pass the set meanwhile */
			if (gw->fastsyn == NULL)
				return 0;
			if (gw_limit_hold(gw, sb, gw_inspect_count(gw)) != 0)
				gw_fastsyn_forget(gw);
			else
				learn(gw, pkt, &t, &d, now);
			return 0;
		}
		if (errno == EBUSY) {
			/* the sandbox holds its share of flights already */
			limited = true;
			limit = GW_LIMIT_HOLDS;
		} else {
			d.verdict = GW_DENY;
			d.reason = GW_R_HOLD_TABLE_FULL;
			d.rule = NULL;
			if (sb->policy->mode == POLICY_AUDIT)
				d.verdict = GW_AUDIT;
			if (gw_log_flow(gw, sb, &t, &d, NULL) == -1)
				gw->denied_unlogged++;
		}
	} else if (!limited && gw_log_flow(gw, sb, &t, &d, NULL) == -1 &&
	    d.verdict != GW_DENY) {
		/* fail closed: what cannot be recorded does not pass */
		d.verdict = GW_DENY;
		d.reason = GW_R_LOG_UNAVAILABLE;
		d.rule = NULL;
		gw->denied_unlogged++;
		(void)gw_log_flow(gw, sb, &t, &d, NULL);
	}
	if (limited) {
		/* denied in audit mode too: what passes must have its row,
		 * and these rows are throttled */
		d.verdict = GW_DENY;
		d.reason = GW_R_RATE_LIMITED;
		d.rule = NULL;
		logged = gw_limit_log_flow(gw, sb, &t, limit, now) == 0;
	}
	if (pkt->copy && gw->fastsyn != NULL) {
		/* the set said inspect, the decision says otherwise now: the
		 * entry goes, and its next SYNs take the queue */
		gw->fastsyn_stale++;
		if (nfq_fastsyn_del(gw->fastsyn, pkt->indev, t.saddr, t.daddr,
		    t.dport, now) == -1)
			log_warn("kernel-SYN set: delete");
	}
	if (d.verdict == GW_DENY && (d.reason == GW_R_SPOOFED_SOURCE ||
	    (limited && t.saddr != sb->addr))) {
		/* a forged source gets no answer at all: a reset sent to
		 * an address the sandbox picked is a reflector */
		v = NF_DROP;
		mark = GW_MARK_DENY;
	} else if (d.verdict == GW_DENY) {
		/* repeat the hook with the deny mark: the ruleset rejects it
		 * (RST for TCP) so the client fails at once */
		v = NF_REPEAT;
		mark = GW_MARK_DENY;
		/* a denial without a row of its own is not captured either */
		if (gw->capture != NULL && sb != NULL && logged)
			gw_capture_packet(gw->capture, sb->name, pkt->payload,
			    pkt->len, store_now_us());
	} else {
		v = NF_ACCEPT;
		mark = GW_MARK_ALLOW;
	}
	fl = nfq_flows_insert(gw->flows, &key, now, v == NF_ACCEPT ?
	    GW_FLOW_ALLOW_TTL_MS : limited ? GW_FLOW_LIMITED_TTL_MS :
	    GW_FLOW_TTL_MS, v, mark);
	fl->tag = t.tcp_seq;
	/* conntrack's clock. A SYN sluiced lets go has its connection
	 * confirmed after this, so an end dated before it is an older
	 * connection's (flowlog.c); a copy's SYN went on before it was
	 * decided, and gets none */
	if (v == NF_ACCEPT && !pkt->copy)
		fl->since_us = (uint64_t)store_now_us();
	/* a denied SYN the kernel let through: its server took the
	 * handshake, and is reset with the connection's first packet */
	fl->reset_server = pkt->copy && v != NF_ACCEPT &&
	    t.proto == IPPROTO_TCP;
	return verdict(gw, pkt, v, mark);
}

/* ---- the kernel-SYN set and its copies --------------------------------- */

static int
on_copy(void *arg, const struct nfq_packet *pkt)
{
	struct gw *gw = arg;
	struct nfq_tuple t;

	gw_copy_seen(gw, pkt);
	/* what the set lets through is copied, a SYN without bytes; and
	 * what the kernel-SNI program lets through, a first flight with
	 * its ACK; anything else has nothing to start (and was not
	 * accepted for a decision: the ruleset copies only those) */
	if (nfq_packet_parse(pkt->payload, pkt->len, &t) != NFQ_PARSE_OK ||
	    t.proto != IPPROTO_TCP)
		return 0;
	if ((t.tcp_flags & (TH_SYN | TH_ACK | TH_FIN | TH_RST)) == TH_SYN &&
	    t.l4_len == 0) {
		gw->fastsyn_copies++;
		return gw_decide_first(gw, pkt, &t, gw_now_ms());
	}
	if (gw->ksni_rules &&
	    (t.tcp_flags & (TH_SYN | TH_ACK | TH_FIN | TH_RST)) == TH_ACK &&
	    t.l4_len > 0)
		gw_inspect_approved(gw, pkt, &t, gw_now_ms());
	return 0;
}

/* ---- first flights the kernel lets through (--kernel-sni) -------------- */

void
gw_ksni_open(struct gw *gw)
{
	char err[256], path[PATH_MAX];
	int n;

	if (!gw->cfg.kernel_sni)
		return;
	n = snprintf(path, sizeof(path), GW_KSNI_DIR "/%s", gw->cfg.netns);
	if (n < 0 || (size_t)n >= sizeof(path) || strchr(gw->cfg.netns, '/')) {
		log_warnx("kernel SNI: no pin path for namespace \"%s\"; every "
		    "first flight takes the queue", gw->cfg.netns);
		return;
	}
	if ((gw->ksni = nfq_ksni_open(path, GW_KSNI_ENTRIES, err,
	    sizeof(err))) == NULL)
		log_warnx("kernel SNI: %s; every first flight takes the queue",
		    err);
}

int
gw_ksni_timeout(const struct gw *gw, uint64_t now)
{
	if (gw->ksni == NULL)
		return -1;
	return gw->ksni_renew_at <= now ? 0 :
	    (int)(gw->ksni_renew_at - now);
}

/*
 * A lease the loop fails to renew runs out by itself, and the program
 * then passes nothing: a failed write is retried at the next renewal, not
 * sooner, and only counted and logged here.
 */
void
gw_ksni_renew(struct gw *gw, uint64_t now)
{
	if (gw->ksni == NULL || now < gw->ksni_renew_at)
		return;
	gw->ksni_renew_at = now + GW_KSNI_RENEW_MS;
	if (nfq_ksni_lease(gw->ksni, GW_KSNI_LEASE_MS) == -1 &&
	    gw->ksni_lease_errors++ == 0)
		log_warn("kernel SNI: lease");
}

/*
 * Lets the next ClientHellos like this one past the queue while the
 * binding that admitted it lives: (sandbox, destination, port, the name as
 * sent) was just allowed by d. Only names the program can match byte for
 * byte: what the client sent, not normalised.
 */
void
gw_ksni_learn(struct gw *gw, uint32_t ifindex, uint32_t daddr,
    uint16_t dport, const char *sni, const struct gw_decision *d,
    uint64_t now)
{
	uint64_t ms;
	size_t len = strlen(sni);

	if (gw->ksni == NULL || !gw->ksni_rules || d->verdict != GW_ALLOW ||
	    d->reason != GW_R_ALLOWED_DOMAIN || d->bound_until_ms <= now ||
	    len == 0 || len > NFQ_KSNI_NAME_MAX)
		return;
	ms = d->bound_until_ms - now;
	if (ms > GW_FASTSYN_MAX_MS)
		ms = GW_FASTSYN_MAX_MS;
	(void)nfq_ksni_add(gw->ksni, ifindex, daddr, dport, sni, len, ms);
}

void
gw_fastsyn_open(struct gw *gw)
{
	char err[256];

	if (!gw->fastsyn_rules && !gw->ksni_rules)
		return;
	/* the copies' reader first: no SYN passes the set before an
	 * entry is added, and none is added before both are open; the
	 * same for first flights and the kernel-SNI table. A first
	 * flight's copy is the whole packet. */
	if ((gw->nflog = nfq_nflog_open(GW_FASTSYN_GROUP, gw->ksni_rules ?
	    GW_KSNI_PKT_MAX : NFQ_NFLOG_HEADERS, err, sizeof(err))) == NULL) {
		log_warnx("kernel SYNs and SNI: %s; every SYN and first "
		    "flight takes the queue", err);
		gw->ksni_rules = false;
		nfq_ksni_close(gw->ksni);
		gw->ksni = NULL;
		return;
	}
	if (gw->fastsyn_rules && (gw->fastsyn = nfq_fastsyn_open(
	    GW_FASTSYN_TABLE, GW_FASTSYN_SET, err, sizeof(err))) == NULL)
		log_warnx("kernel SYNs: %s; every SYN takes the queue", err);
	if (gw->fastsyn == NULL && !gw->ksni_rules) {
		nfq_nflog_close(gw->nflog);
		gw->nflog = NULL;
	}
}

/* Copies the kernel could not hand over (the socket full): a first flight
 * it let out without one has no row of its own, and its connection ends
 * undecided (hold_timeout). How many is counted in lost_records (kind
 * flow, kernel_dropped) once known, when the socket has been read dry.
 * The kernel-SNI table is emptied, so that no more pass by it until
 * sluiced has read and allowed them again. */
static void
copies_lost(struct gw *gw, uint64_t now)
{
	struct nfq_nflog_stats st;

	nfq_nflog_stats(gw->nflog, &st);
	if (st.dropped > gw->nflog_dropped_logged) {
		store_count_flows_dropped(gw->store,
		    st.dropped - gw->nflog_dropped_logged);
		gw->nflog_dropped_logged = st.dropped;
	}
	if (st.overruns == gw->nflog_lost_seen)
		return;
	gw->nflog_lost_seen = st.overruns;
	gw->nflog_lost_ms = now;
	gw_ksni_clear(gw);
}

void
gw_fastsyn_read(struct gw *gw)
{
	if (gw->nflog == NULL)
		return;
	if (nfq_nflog_recv(gw->nflog, on_copy, gw) == -1)
		log_warn("kernel SYNs: receive");
	copies_lost(gw, gw_now_ms());
}

bool
gw_fastsyn_drain(struct gw *gw)
{
	uint64_t now;
	bool dry = false;
	int i;

	if (gw->nflog == NULL)
		return true;
	for (i = 0; i < GW_COPIES_DRAIN_READS; i++) {
		if (nfq_nflog_recv(gw->nflog, on_copy, gw) == -1) {
			log_warn("kernel SYNs: receive");
			break;
		}
		if ((dry = nfq_nflog_drained(gw->nflog)))
			break;
	}
	now = gw_now_ms();
	copies_lost(gw, now);
	return dry && (gw->nflog_lost_ms == 0 ||
	    now - gw->nflog_lost_ms > 2 * GW_FLOW_ALLOW_TTL_MS);
}

void
gw_ksni_clear(struct gw *gw)
{
	/* what cannot be emptied cannot be trusted: closed, the program
	 * passes nothing */
	if (gw->ksni != NULL && nfq_ksni_clear(gw->ksni) == -1) {
		log_warn("kernel SNI: clear; every first flight takes the "
		    "queue from now on");
		nfq_ksni_close(gw->ksni);
		gw->ksni = NULL;
	}
}

void
gw_fastsyn_forget(struct gw *gw)
{
	/* the kernel-SNI table too: what it learned was decided under a
	 * policy, or for an interface index, that is no more */
	gw_ksni_clear(gw);
	if (gw->fastsyn == NULL)
		return;
	/* what cannot be emptied cannot be trusted: no more entries (the
	 * copies still decide every SYN the old ones let through) */
	if (nfq_fastsyn_flush(gw->fastsyn) == -1) {
		log_warn("kernel-SYN set: flush; every SYN takes the queue "
		    "from now on");
		nfq_fastsyn_close(gw->fastsyn);
		gw->fastsyn = NULL;
	}
}

void
gw_fastsyn_close(struct gw *gw)
{
	/* stopped, sluiced reads no copies: every SYN must wait in the
	 * queue, which has no reader either (fail closed) */
	gw_fastsyn_forget(gw);
	nfq_fastsyn_close(gw->fastsyn);
	gw->fastsyn = NULL;
	/* the program passes nothing once closed, though the ruleset
	 * still names it */
	nfq_ksni_close(gw->ksni);
	gw->ksni = NULL;
	nfq_nflog_close(gw->nflog);
	gw->nflog = NULL;
}
