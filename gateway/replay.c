/* replay.c: sluiced's verdict engine run offline over a pcap trace of one sandbox. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pcap/pcap.h>

#include "gateway/capture.h"
#include "gateway/gw.h"
#include "gateway/verdict.h"

#define TH_FIN	0x01
#define TH_SYN	0x02
#define TH_RST	0x04
#define TH_ACK	0x10

#define ICMP_ECHO_REPLY		0
#define ICMP_ECHO_REQUEST	8

/*
 * Conntrack's part, as far as it decides which packets reach sluiced: a
 * connection lives this long after its last packet (the kernel's defaults:
 * nf_conntrack_udp_timeout, _icmp_timeout, _generic_timeout; TCP is ended
 * by a new SYN on the same ports rather than by its long timeouts).
 */
#define CT_UDP_MS	30000
#define CT_ICMP_MS	30000
#define CT_GENERIC_MS	600000
#define CT_TCP_MS	(5ULL * 24 * 3600 * 1000)

/* A forwarded query whose answer is not in the trace this long after it
 * is given up (every upstream tried in turn, as the resolver does). */
#define DNS_GIVE_UP_MS	((uint64_t)DNS_UPSTREAM_TRY_MS * DNS_UPSTREAM_MAX)

enum { INSPECT_NONE = GW_INSPECT_NONE, INSPECT_TLS = GW_INSPECT_TLS,
    INSPECT_HTTP = GW_INSPECT_HTTP };

struct conn;

/* A flow's first flight being read (inspect.c's struct hold). */
struct hold {
	bool			 used;
	int			 kind;		/* INSPECT_TLS or INSPECT_HTTP */
	bool			 logged;	/* a row was written */
	bool			 decided;	/* HTTP: a first head was allowed */
	struct conn		*conn;
	struct nfq_tuple	 t;		/* of the SYN */
	struct gw_decision	 syn;		/* what the SYN was allowed by */
	uint64_t		 seq;		/* the SYN's packet number */
	unsigned		 rows;		/* rows written for this flow */
	uint64_t		 deadline;	/* held bytes must be decided by */
	uint64_t		 last_ms;
	size_t			 held;		/* packets held */
	struct nfq_reasm	*reasm;
	struct nfq_http_stream	*http;
	struct nfq_http_head	 last;		/* HTTP: the latest head */
	char			 admitted[DNS_NAME_MAX + 1];
};

/* One connection as conntrack sees it, keyed in the sandbox's direction. */
struct conn_key {
	uint32_t	saddr, daddr;
	uint16_t	sport, dport;	/* ICMP echo: the identifier as sport */
	uint8_t		proto;
};

struct conn {
	struct conn_key	 key;
	bool		 used;
	uint32_t	 isn;		/* TCP: the SYN's sequence number */
	uint32_t	 mark;		/* the connection mark sluiced gave it:
					 * 0, GW_MARK_ALLOW, _DENY or _INSPECT */
	uint64_t	 expires_ms;
	struct hold	*hold;
	uint32_t	 hnext;		/* hash chain */
	uint32_t	 prev, next;	/* recency list, most recent first */
};

#define NIL	UINT32_MAX

/* A query forwarded under the replayed policy, waiting for its answer. */
struct pending {
	bool		 used;
	uint64_t	 seq;
	int64_t		 ts_us;
	uint64_t	 ms;
	uint8_t		 proto;		/* the query's transport */
	uint32_t	 saddr, daddr;
	uint16_t	 sport, dport, id, qtype, qclass;
	char		 qname[DNS_NAME_MAX + 1];	/* as asked */
	char		 name[DNS_NAME_MAX + 1];	/* normalised */
	const char	*verdict, *reason;
	char		 rule[POLICY_ENTRY_MAX];
};

/* A TCP connection to the resolver: both byte streams, for the
 * length-prefixed messages in them. */
struct dns_stream {
	struct conn_key	 key;		/* the sandbox's direction */
	bool		 answers_seen;	/* the SYN/ACK gave the answers' start */
	uint64_t	 last_use;
	struct nfq_reasm q, a;		/* queries, answers */
};

struct gw_replay {
	struct gw_replay_opts	 o;
	gw_replay_row_fn	 fn;
	void			*arg;
	uint32_t		 sandbox;	/* network order, 0 while unknown */
	uint64_t		 seq;		/* packets fed so far */
	uint64_t		 now;		/* ms, never going back */
	int64_t			 now_us;
	struct dns_bindings	*bindings;
	struct nfq_flows	*verdicts;	/* sluiced's flow table */
	struct conn		*conns;
	uint32_t		*buckets;
	uint32_t		 nbuckets;	/* a power of two */
	uint32_t		 nconns, head, tail, free_head;
	struct hold		 holds[GW_HOLD_MAX];
	size_t			 nholds;
	uint64_t		 next_timer;	/* earliest hold timer, or 0 */
	struct pending		 pend[DNS_PENDING_MAX];
	size_t			 npend;
	struct dns_stream	*streams[DNS_TCP_MAX];	/* as many as the
						 * resolver serves at once */
	uint64_t		 stream_tick;
	struct gw_replay_stats	 st;
	struct gw_replay_row	 row;		/* scratch */
};

/* ---- rows -------------------------------------------------------------- */

static void
copy(char *dst, size_t len, const char *src)
{
	snprintf(dst, len, "%s", src != NULL ? src : "");
}

static void
emit_flow(struct gw_replay *r, uint64_t seq, unsigned sub, uint64_t ms,
    const struct nfq_tuple *t, const struct gw_decision *d, const char *sni,
    const char *http_host)
{
	struct gw_replay_row *w = &r->row;
	bool ports = t->proto == IPPROTO_TCP || t->proto == IPPROTO_UDP;

	memset(w, 0, sizeof(*w));
	w->kind = GW_REPLAY_FLOW;
	w->seq = seq;
	w->sub = sub;
	/* the packet's own time, or a timer's (a hold's deadline) */
	w->ts_us = ms == r->now ? r->now_us : (int64_t)(ms * 1000);
	w->proto = t->proto;
	w->saddr = t->saddr;
	w->daddr = t->daddr;
	w->sport = ports ? t->sport : 0;
	w->dport = ports ? t->dport : 0;
	w->verdict = gw_verdict_name(d->verdict);
	w->reason = gw_reason_name(d->reason);
	copy(w->rule, sizeof(w->rule), d->rule);
	copy(w->name, sizeof(w->name), d->name);
	copy(w->sni, sizeof(w->sni), sni);
	copy(w->http_host, sizeof(w->http_host), http_host);
	r->st.flows++;
	r->fn(r->arg, w);
}

static void
emit_dns(struct gw_replay *r, const struct pending *p, int64_t ts_us,
    const char *rcode, const char *answers)
{
	struct gw_replay_row *w = &r->row;
	char tbuf[16];

	memset(w, 0, sizeof(*w));
	w->kind = GW_REPLAY_DNS;
	w->seq = p->seq;
	w->ts_us = ts_us;
	w->proto = p->proto;
	w->saddr = p->saddr;
	w->daddr = p->daddr;
	w->sport = p->sport;
	w->dport = p->dport;
	w->verdict = p->verdict;
	w->reason = p->reason;
	copy(w->rule, sizeof(w->rule), p->rule);
	copy(w->qname, sizeof(w->qname), p->qname);
	if (p->qname[0] != '\0' || p->qtype != 0)
		copy(w->qtype, sizeof(w->qtype),
		    dns_type_str(p->qtype, tbuf, sizeof(tbuf)));
	copy(w->rcode, sizeof(w->rcode), rcode);
	copy(w->answers, sizeof(w->answers), answers);
	r->st.queries++;
	r->fn(r->arg, w);
}

/* ---- connections -------------------------------------------------------- */

static uint32_t
conn_hash(const struct gw_replay *r, const struct conn_key *k)
{
	uint64_t x;

	x = ((uint64_t)k->saddr << 32 | k->daddr) * 0x9e3779b97f4a7c15ull;
	x ^= ((uint64_t)k->sport << 24 | (uint64_t)k->dport << 8 | k->proto) *
	    0xc2b2ae3d27d4eb4full;
	x ^= x >> 29;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 32;
	return (uint32_t)x & (r->nbuckets - 1);
}

static bool
conn_key_eq(const struct conn_key *a, const struct conn_key *b)
{
	return a->saddr == b->saddr && a->daddr == b->daddr &&
	    a->sport == b->sport && a->dport == b->dport &&
	    a->proto == b->proto;
}

static void
list_unlink(struct gw_replay *r, uint32_t i)
{
	struct conn *c = &r->conns[i];

	if (c->prev != NIL)
		r->conns[c->prev].next = c->next;
	else
		r->head = c->next;
	if (c->next != NIL)
		r->conns[c->next].prev = c->prev;
	else
		r->tail = c->prev;
	c->prev = c->next = NIL;
}

static void
list_push(struct gw_replay *r, uint32_t i)
{
	struct conn *c = &r->conns[i];

	c->prev = NIL;
	c->next = r->head;
	if (r->head != NIL)
		r->conns[r->head].prev = i;
	r->head = i;
	if (r->tail == NIL)
		r->tail = i;
}

static void hold_forget(struct gw_replay *, struct hold *);

static void
conn_free(struct gw_replay *r, uint32_t i)
{
	struct conn *c = &r->conns[i];
	uint32_t *pp = &r->buckets[conn_hash(r, &c->key)];

	while (*pp != NIL && *pp != i)
		pp = &r->conns[*pp].hnext;
	if (*pp == i)
		*pp = c->hnext;
	if (c->hold != NULL)
		hold_forget(r, c->hold);
	list_unlink(r, i);
	memset(c, 0, sizeof(*c));
	c->hnext = r->free_head;
	r->free_head = i;
	r->nconns--;
}

/* The live connection for k, or NULL; an expired one is freed. */
static struct conn *
conn_find(struct gw_replay *r, const struct conn_key *k)
{
	uint32_t i;

	for (i = r->buckets[conn_hash(r, k)]; i != NIL; i = r->conns[i].hnext) {
		if (!conn_key_eq(&r->conns[i].key, k))
			continue;
		if (r->conns[i].expires_ms <= r->now &&
		    r->conns[i].hold == NULL) {
			conn_free(r, i);
			return NULL;
		}
		return &r->conns[i];
	}
	return NULL;
}

static void
conn_touch(struct gw_replay *r, struct conn *c, uint64_t ttl)
{
	uint32_t i = (uint32_t)(c - r->conns);

	c->expires_ms = r->now + ttl;
	list_unlink(r, i);
	list_push(r, i);
}

/* A new connection for k, replacing any with the same key; at the bound
 * the least recently seen one is forgotten. */
static struct conn *
conn_new(struct gw_replay *r, const struct conn_key *k, uint64_t ttl)
{
	struct conn *c;
	uint32_t i, b;

	if ((c = conn_find(r, k)) != NULL)
		conn_free(r, (uint32_t)(c - r->conns));
	if (r->free_head == NIL)
		conn_free(r, r->tail);
	i = r->free_head;
	c = &r->conns[i];
	r->free_head = c->hnext;
	memset(c, 0, sizeof(*c));
	c->used = true;
	c->key = *k;
	c->prev = c->next = NIL;
	b = conn_hash(r, k);
	c->hnext = r->buckets[b];
	r->buckets[b] = i;
	r->nconns++;
	list_push(r, i);
	c->expires_ms = r->now + ttl;
	return c;
}

static uint64_t
conn_ttl(uint8_t proto)
{
	switch (proto) {
	case IPPROTO_TCP:
		return CT_TCP_MS;
	case IPPROTO_UDP:
		return CT_UDP_MS;
	case IPPROTO_ICMP:
		return CT_ICMP_MS;
	}
	return CT_GENERIC_MS;
}

/* The ICMP echo identifier, which conntrack keys echo flows by. */
static uint16_t
icmp_echo_id(const struct nfq_tuple *t)
{
	const uint8_t *h = t->l4_payload - 8;	/* the 8-byte header */

	return (uint16_t)(h[4] << 8 | h[5]);
}

static void
conn_key_of(const struct nfq_tuple *t, bool reverse, struct conn_key *k)
{
	memset(k, 0, sizeof(*k));
	k->proto = t->proto;
	k->saddr = reverse ? t->daddr : t->saddr;
	k->daddr = reverse ? t->saddr : t->daddr;
	if (t->proto == IPPROTO_TCP || t->proto == IPPROTO_UDP) {
		k->sport = reverse ? t->dport : t->sport;
		k->dport = reverse ? t->sport : t->dport;
	} else if (t->proto == IPPROTO_ICMP) {
		k->sport = icmp_echo_id(t);
	}
}

/* ---- the first flight (inspect.c, step for step) ---------------------- */


static void
hold_forget(struct gw_replay *r, struct hold *h)
{
	if (h->conn != NULL)
		h->conn->hold = NULL;
	free(h->reasm);
	free(h->http);
	memset(h, 0, sizeof(*h));
	r->nholds--;
}

static struct gw_decide_ctx
decide_ctx(const struct gw_replay *r)
{
	struct gw_decide_ctx ctx = {
		.policy = r->o.policy,
		.sandbox_addr = r->sandbox,
		.pool_net = r->o.pool_net,
		.pool_mask = r->o.pool_mask,
		.uplink = { r->o.uplink[0], r->o.uplink[1] },
		.bindings = r->bindings,
		.sandbox_id = 0,
		.now_ms = r->now,
	};

	return ctx;
}

static void
audit(const struct gw_replay *r, struct gw_decision *d)
{
	if (d->verdict == GW_DENY && r->o.policy->mode == POLICY_AUDIT)
		d->verdict = GW_AUDIT;
}

static void
hold_row(struct gw_replay *r, struct hold *h, uint64_t ms,
    const struct gw_decision *d, const struct nfq_tls_hello *hello,
    const struct nfq_http_head *head)
{
	h->logged = true;
	emit_flow(r, h->seq, h->rows++, ms, &h->t, d,
	    hello != NULL ? hello->sni : NULL, head != NULL ? head->host : NULL);
}

/* The held packets go, and the connection carries mark from now on. */
static void
release(struct hold *h, uint32_t mark)
{
	h->held = 0;
	if (h->conn != NULL)
		h->conn->mark = mark;
}

static void
reject(struct hold *h)
{
	h->held = 0;
	if (h->conn != NULL)
		h->conn->mark = GW_MARK_DENY;
}

static void
deny_hold(struct gw_replay *r, struct hold *h, uint64_t ms,
    enum gw_reason reason, const struct nfq_tls_hello *hello,
    const struct nfq_http_head *head)
{
	struct gw_decision d = h->syn;

	d.verdict = GW_DENY;
	d.reason = reason;
	d.rule = NULL;
	d.domain = NULL;
	audit(r, &d);
	hold_row(r, h, ms, &d, hello, head);
	if (d.verdict == GW_AUDIT)
		release(h, GW_MARK_ALLOW);
	else
		reject(h);
	hold_forget(r, h);
}

static void
tls_step(struct gw_replay *r, struct hold *h)
{
	struct gw_decide_ctx ctx = decide_ctx(r);
	struct nfq_tls_hello hello;
	struct gw_decision d;

	switch (nfq_tls_parse_hello(h->reasm->data, h->reasm->contiguous,
	    &hello)) {
	case NFQ_TLS_NEED_MORE:
		return;
	case NFQ_TLS_NOT_TLS:
		deny_hold(r, h, r->now, GW_R_NOT_TLS, NULL, NULL);
		return;
	case NFQ_TLS_MALFORMED:
		deny_hold(r, h, r->now, GW_R_MALFORMED_TLS, &hello, NULL);
		return;
	case NFQ_TLS_OK:
		break;
	}
	snprintf(d.name, sizeof(d.name), "%s", h->syn.name);
	gw_decide_hello(&ctx, h->t.daddr, h->t.dport, &hello, &d);
	if (d.verdict != GW_ALLOW) {
		deny_hold(r, h, r->now, d.reason, &hello, NULL);
		return;
	}
	hold_row(r, h, r->now, &d, &hello, NULL);
	release(h, GW_MARK_ALLOW);
	hold_forget(r, h);
}

static void
http_step(struct gw_replay *r, struct hold *h)
{
	struct gw_decide_ctx ctx = decide_ctx(r);
	struct gw_decision d;
	const char *error = NULL;
	size_t off = 0, used;

	while (off < h->reasm->contiguous) {
		enum nfq_http_status st;

		st = nfq_http_feed(h->http, h->reasm->data + off,
		    h->reasm->contiguous - off, &used, &h->last, &error);
		off += used;
		if (st == NFQ_HTTP_NEED_MORE)
			break;
		if (st == NFQ_HTTP_MALFORMED) {
			/* after a decided head the row names the latest one
			 * (inspect.c passes its head variable, which holds
			 * the previous head or nothing yet) */
			deny_hold(r, h, r->now, GW_R_MALFORMED_HTTP, NULL,
			    h->decided ? &h->last : NULL);
			return;
		}
		snprintf(d.name, sizeof(d.name), "%s", h->syn.name);
		gw_decide_name(&ctx, h->t.daddr, h->t.dport, h->last.host,
		    h->decided ? h->admitted : NULL, GW_R_HOST_NOT_ALLOWED,
		    GW_R_HOST_BINDING_MISMATCH, &d);
		if (d.verdict != GW_ALLOW) {
			deny_hold(r, h, r->now, d.reason, NULL, &h->last);
			return;
		}
		if (!h->decided) {
			h->decided = true;
			if (!dns_name_normalize(h->last.host,
			    strlen(h->last.host), h->admitted, NULL))
				h->admitted[0] = '\0';
			hold_row(r, h, r->now, &d, NULL, &h->last);
		}
	}
	nfq_reasm_consume(h->reasm, off);
	if (!nfq_http_in_head(h->http)) {
		release(h, GW_MARK_INSPECT);
		h->deadline = 0;
	} else if (h->deadline == 0) {
		h->deadline = r->now + GW_HOLD_MS;
	}
}

static void
step(struct gw_replay *r, struct hold *h)
{
	if (h->kind == INSPECT_TLS)
		tls_step(r, h);
	else
		http_step(r, h);
}

/* Takes the packet into the held flight; false when the flow was denied. */
static bool
take(struct gw_replay *r, struct hold *h, const struct nfq_tuple *t)
{
	enum nfq_reasm_result rr;
	uint32_t seq;

	if (h->held == GW_HOLD_PKTS) {
		deny_hold(r, h, r->now, GW_R_HOLD_OVERFLOW, NULL, NULL);
		return false;
	}
	h->held++;
	if (t->l4_len == 0)
		return true;
	seq = t->tcp_seq + ((t->tcp_flags & TH_SYN) ? 1 : 0);
	rr = nfq_reasm_add(h->reasm, seq, t->l4_payload, t->l4_len);
	if (rr == NFQ_REASM_CONFLICT) {
		deny_hold(r, h, r->now, h->kind == INSPECT_TLS ?
		    GW_R_MALFORMED_TLS : GW_R_MALFORMED_HTTP, NULL, NULL);
		return false;
	}
	if (rr == NFQ_REASM_OVERFLOW) {
		deny_hold(r, h, r->now, GW_R_HOLD_OVERFLOW, NULL, NULL);
		return false;
	}
	if (h->deadline == 0)
		h->deadline = r->now + GW_HOLD_MS;
	return true;
}

/* When h's timer is due (0: it has none). */
static uint64_t
hold_timer(const struct hold *h)
{
	if (!h->used)
		return 0;
	if (h->held > 0)
		return h->deadline;
	return h->last_ms + GW_HOLD_IDLE_MS;
}

/* Keeps next_timer at or before h's timer. An earlier next_timer left by
 * a hold that is gone costs one needless scan, nothing else. */
static void
timer_note(struct gw_replay *r, const struct hold *h)
{
	uint64_t at = hold_timer(h);

	if (at != 0 && (r->next_timer == 0 || at < r->next_timer))
		r->next_timer = at;
}

static void
timers_update(struct gw_replay *r)
{
	size_t i;

	r->next_timer = 0;
	for (i = 0; i < GW_HOLD_MAX; i++)
		timer_note(r, &r->holds[i]);
}

/*
 * inspect.c's gw_inspect_expire at every timer due by now: a held flight
 * past its deadline is denied; an idle one without held packets is
 * forgotten (its row written first if it has none).
 */
static void
timers_run(struct gw_replay *r, uint64_t now)
{
	size_t i;

	if (r->next_timer == 0 || r->next_timer > now)
		return;
	for (i = 0; i < GW_HOLD_MAX; i++) {
		struct hold *h = &r->holds[i];

		if (!h->used)
			continue;
		if (h->deadline != 0 && h->deadline <= now && h->held > 0) {
			deny_hold(r, h, h->deadline, GW_R_HOLD_TIMEOUT, NULL,
			    NULL);
			continue;
		}
		if (h->held == 0 && h->last_ms + GW_HOLD_IDLE_MS <= now) {
			if (!h->logged)
				hold_row(r, h, h->last_ms + GW_HOLD_IDLE_MS,
				    &h->syn, NULL, NULL);
			hold_forget(r, h);
		}
	}
	timers_update(r);
}

/* inspect.c's gw_inspect_start; -1 when the hold table is full. */
static int
hold_start(struct gw_replay *r, struct conn *c, const struct nfq_tuple *t,
    const struct gw_decision *d, int kind)
{
	struct hold *h = NULL;
	size_t i;

	if (r->nholds == GW_HOLD_MAX)
		return -1;
	for (i = 0; i < GW_HOLD_MAX && r->holds[i].used; i++)
		;
	h = &r->holds[i];
	memset(h, 0, sizeof(*h));
	if ((h->reasm = malloc(sizeof(*h->reasm))) == NULL)
		return -1;
	if (kind == INSPECT_HTTP) {
		if ((h->http = malloc(sizeof(*h->http))) == NULL) {
			free(h->reasm);
			h->reasm = NULL;
			return -1;
		}
		nfq_http_init(h->http);
	}
	h->used = true;
	h->kind = kind;
	h->conn = c;
	h->t = *t;
	h->t.l4_payload = NULL;
	h->t.l4_len = 0;
	h->syn = *d;
	h->seq = r->seq;
	h->last_ms = r->now;
	nfq_reasm_init(h->reasm, t->tcp_seq + 1);
	c->hold = h;
	c->mark = GW_MARK_INSPECT;
	r->nholds++;
	/* TCP Fast Open: data in the SYN is part of the first flight */
	if (t->l4_len > 0 && take(r, h, t))
		step(r, h);
	timer_note(r, h);
	return 0;
}

/* inspect.c's gw_inspect_packet: a client packet of a flow under
 * inspection (its connection carries the inspect mark). */
static void
inspect_packet(struct gw_replay *r, struct conn *c, const struct nfq_tuple *t)
{
	struct hold *h = c->hold;

	if (h == NULL) {
		struct gw_decision d = { GW_DENY, GW_R_NO_INSPECTION_STATE,
		    NULL, NULL, "", 0 };

		/* fail closed: nothing to decide this packet by */
		if (!(t->tcp_flags & (TH_RST | TH_FIN)) && t->l4_len > 0)
			emit_flow(r, r->seq, 0, r->now, t, &d, NULL, NULL);
		c->mark = GW_MARK_DENY;
		return;
	}
	h->last_ms = r->now;
	if (t->tcp_flags & TH_RST) {
		/* the client gives up: nothing more to decide */
		if (!h->logged)
			hold_row(r, h, r->now, &h->syn, NULL, NULL);
		reject(h);
		hold_forget(r, h);
		timer_note(r, h);
		return;
	}
	if (t->l4_len == 0 && !(t->tcp_flags & TH_FIN)) {
		timer_note(r, h);
		return;		/* a bare ACK or a repeated SYN */
	}
	if (!take(r, h, t)) {
		timer_note(r, h);
		return;
	}
	if (t->l4_len > 0)
		step(r, h);
	if (h->used && (t->tcp_flags & TH_FIN) && h->held > 0 &&
	    h->reasm->contiguous == 0 && (h->kind == INSPECT_TLS ?
	    !h->logged : !nfq_http_in_head(h->http))) {
		/* the client closes with nothing undecided */
		if (!h->logged)
			hold_row(r, h, r->now, &h->syn, NULL, NULL);
		release(h, GW_MARK_INSPECT);
		hold_forget(r, h);
	}
	timer_note(r, h);
}

/* ---- new flows (sluiced.c's on_packet) ------------------------------- */

static void
new_flow(struct gw_replay *r, struct conn *c, const struct nfq_tuple *t)
{
	struct gw_decide_ctx ctx = decide_ctx(r);
	struct gw_decision d;
	struct nfq_flow_key key;
	struct nfq_flow *fl;
	int kind;

	memset(&key, 0, sizeof(key));
	key.saddr = t->saddr;
	key.daddr = t->daddr;
	key.sport = t->sport;
	key.dport = t->dport;
	key.proto = t->proto;
	if (t->proto == IPPROTO_ICMP) {
		key.sport = t->icmp_type;
		key.dport = t->icmp_id;
	}
	if ((fl = nfq_flows_lookup(r->verdicts, &key, r->now)) != NULL) {
		/* the same attempt again: same verdict, no new row */
		c->mark = fl->mark;
		return;
	}
	gw_decide(&ctx, t, &d);
	kind = gw_inspect_kind(&d, t->dport);
	if (kind != INSPECT_NONE && t->proto == IPPROTO_TCP &&
	    (t->tcp_flags & TH_SYN)) {
		/* the row is written once the first flight is decided */
		if (hold_start(r, c, t, &d, kind) == 0)
			return;
		d.verdict = GW_DENY;
		d.reason = GW_R_HOLD_TABLE_FULL;
		d.rule = NULL;
		audit(r, &d);
	}
	emit_flow(r, r->seq, 0, r->now, t, &d, NULL, NULL);
	c->mark = d.verdict == GW_DENY ? GW_MARK_DENY : GW_MARK_ALLOW;
	nfq_flows_insert(r->verdicts, &key, r->now, d.verdict == GW_DENY ?
	    GW_FLOW_TTL_MS : GW_FLOW_ALLOW_TTL_MS, 0, c->mark);
}

/* ---- DNS ---------------------------------------------------------------- */

/* The gateway's resolver: an address of the pool other than a
 * sandbox's own (.2 of its /30). */
static bool
is_resolver(const struct gw_replay *r, uint32_t addr)
{
	return (addr & r->o.pool_mask) == r->o.pool_net &&
	    (ntohl(addr) & 3) != 2;
}

static void
pending_end(struct gw_replay *r, struct pending *p)
{
	emit_dns(r, p, p->ts_us, "", "");
	p->used = false;
	r->npend--;
}

/* Queries forwarded long ago whose answers never came. */
static void
pending_expire(struct gw_replay *r, uint64_t now)
{
	size_t i;

	for (i = 0; i < DNS_PENDING_MAX && r->npend > 0; i++)
		if (r->pend[i].used && r->pend[i].ms + DNS_GIVE_UP_MS <= now)
			pending_end(r, &r->pend[i]);
}

static void
dns_query(struct gw_replay *r, uint8_t proto, uint32_t saddr, uint16_t sport,
    uint32_t daddr, uint16_t dport, const uint8_t *msg, size_t len)
{
	struct gw_dns_decision dd;
	struct pending q, *slot = NULL;
	struct dns_query dq;
	enum dns_parse_error perr;
	char rbuf[16];
	bool name_ok;
	size_t i;

	memset(&q, 0, sizeof(q));
	q.seq = r->seq;
	q.ts_us = r->now_us;
	q.ms = r->now;
	q.proto = proto;
	q.saddr = saddr;
	q.daddr = daddr;
	q.sport = sport;
	q.dport = dport;
	/* as the resolver's handle_query and gateway's dns_query do */
	perr = dns_parse_query(msg, len, &dq);
	if (perr != DNS_PARSE_OK) {
		q.verdict = "deny";
		q.reason = "malformed";
		emit_dns(r, &q, q.ts_us, "FORMERR", "");
		return;
	}
	name_ok = dns_name_normalize(dq.qname, strlen(dq.qname), q.name, NULL);
	if (!name_ok)
		q.name[0] = '\0';
	copy(q.qname, sizeof(q.qname), dq.qname);
	q.id = dq.id;
	q.qtype = dq.qtype;
	q.qclass = dq.qclass;
	gw_dns_decide(r->o.policy, q.name, name_ok, dq.qtype, dq.qclass, &dd);
	q.verdict = dd.verdict;
	q.reason = dd.reason;
	copy(q.rule, sizeof(q.rule), dd.rule);
	if (dd.action == GW_DNS_ANSWER || !name_ok) {
		emit_dns(r, &q, q.ts_us, dns_rcode_str(dd.rcode, rbuf,
		    sizeof(rbuf)), "");
		return;
	}
	/* forwarded: its row comes with the answer the trace shows */
	for (i = 0; i < DNS_PENDING_MAX; i++) {
		if (!r->pend[i].used) {
			slot = &r->pend[i];
			break;
		}
		if (slot == NULL || r->pend[i].ms < slot->ms)
			slot = &r->pend[i];
	}
	if (slot->used)
		pending_end(r, slot);
	*slot = q;
	slot->used = true;
	r->npend++;
}

/* An answer from the resolver at from to the sandbox's port to. */
static void
dns_answer(struct gw_replay *r, uint8_t proto, uint32_t from, uint16_t to,
    const uint8_t *msg, size_t len)
{
	static struct dns_response resp;	/* 8 KiB: not on the stack */
	struct gw_dns_limits lim = {
		.ttl_min = r->o.ttl_min,
		.ttl_max = r->o.ttl_max,
		.grace = r->o.grace,
		.pool_net = r->o.pool_net,
		.pool_mask = r->o.pool_mask,
		.uplink = { r->o.uplink[0], r->o.uplink[1] },
	};
	struct pending *p = NULL;
	char answers[400], stripped[200], rbuf[16];
	unsigned rc;
	size_t i;

	if (dns_parse_response(msg, len, &resp) != DNS_PARSE_OK) {
		r->st.answers_unmatched++;
		return;
	}
	for (i = 0; i < DNS_PENDING_MAX && p == NULL && r->npend > 0; i++) {
		struct pending *q = &r->pend[i];

		if (q->used && q->proto == proto && q->sport == to &&
		    q->daddr == from && q->id == resp.id &&
		    q->qtype == resp.qtype && q->qclass == resp.qclass &&
		    dns_name_equal(q->qname, resp.qname))
			p = q;
	}
	if (p == NULL) {
		r->st.answers_unmatched++;
		return;
	}
	/* what the sandbox got is taken as the upstream's answer: the
	 * bindings are made from it as the resolver made them */
	rc = resp.rcode;
	if (rc != DNS_R_NOERROR && rc != DNS_R_NXDOMAIN)
		rc = DNS_R_SERVFAIL;
	if (gw_dns_filter(r->o.policy, r->bindings, 0, &lim, p->name, &resp,
	    r->now, answers, sizeof(answers), stripped, sizeof(stripped)) &&
	    answers[0] == '\0') {
		p->reason = "binding_limit";
		p->verdict = "deny";
		rc = DNS_R_SERVFAIL;
	}
	emit_dns(r, p, r->now_us, dns_rcode_str(rc, rbuf, sizeof(rbuf)),
	    answers);
	p->used = false;
	r->npend--;
}

/* ---- DNS over TCP -------------------------------------------------------- */

static struct dns_stream **
stream_find(struct gw_replay *r, const struct conn_key *k)
{
	size_t i;

	for (i = 0; i < DNS_TCP_MAX; i++)
		if (r->streams[i] != NULL &&
		    conn_key_eq(&r->streams[i]->key, k))
			return &r->streams[i];
	return NULL;
}

static void
stream_drop(struct gw_replay *r, struct dns_stream **sp, bool lost)
{
	if (lost)
		r->st.dns_tcp_lost++;
	free(*sp);
	*sp = NULL;
}

/* A SYN to the resolver: a new stream, in place of the least recently
 * used one when all are taken. */
static void
stream_start(struct gw_replay *r, const struct conn_key *k, uint32_t isn)
{
	struct dns_stream **sp = stream_find(r, k), **old = NULL;
	size_t i;

	if (sp != NULL && (*sp)->q.base == isn + 1 && (*sp)->q.high == 0)
		return;		/* the SYN again */
	r->st.dns_tcp++;
	if (sp != NULL)
		stream_drop(r, sp, false);
	for (i = 0; i < DNS_TCP_MAX && sp == NULL; i++) {
		if (r->streams[i] == NULL)
			sp = &r->streams[i];
		else if (old == NULL ||
		    r->streams[i]->last_use < (*old)->last_use)
			old = &r->streams[i];
	}
	if (sp == NULL) {
		stream_drop(r, old, true);
		sp = old;
	}
	if ((*sp = malloc(sizeof(**sp))) == NULL) {
		r->st.dns_tcp_lost++;
		return;
	}
	memset(*sp, 0, offsetof(struct dns_stream, q));
	(*sp)->key = *k;
	(*sp)->last_use = ++r->stream_tick;
	nfq_reasm_init(&(*sp)->q, isn + 1);
}

/*
 * Feeds a segment of one direction and handles every complete message
 * in it, as the resolver reads them: a length of 0 or over
 * DNS_TCP_MSG_MAX ends the connection.
 */
static void
stream_feed(struct gw_replay *r, struct dns_stream **sp, bool answers,
    const struct nfq_tuple *t)
{
	struct dns_stream *s = *sp;
	struct nfq_reasm *ra = answers ? &s->a : &s->q;
	enum nfq_reasm_result rr;
	size_t mlen;

	s->last_use = ++r->stream_tick;
	if (t->l4_len > 0) {
		rr = nfq_reasm_add(ra, t->tcp_seq, t->l4_payload, t->l4_len);
		if (rr == NFQ_REASM_CONFLICT || rr == NFQ_REASM_OVERFLOW) {
			stream_drop(r, sp, true);
			return;
		}
	}
	while (ra->contiguous >= 2) {
		mlen = (size_t)ra->data[0] << 8 | ra->data[1];
		if (mlen == 0 || mlen > DNS_TCP_MSG_MAX) {
			stream_drop(r, sp, true);
			return;
		}
		if (ra->contiguous < 2 + mlen)
			break;
		if (answers)
			dns_answer(r, IPPROTO_TCP, s->key.daddr, s->key.sport,
			    ra->data + 2, mlen);
		else
			dns_query(r, IPPROTO_TCP, s->key.saddr, s->key.sport,
			    s->key.daddr, s->key.dport, ra->data + 2, mlen);
		nfq_reasm_consume(ra, 2 + mlen);
	}
	if (t->tcp_flags & (TH_FIN | TH_RST))
		stream_drop(r, sp, false);
}

/* A TCP segment between the sandbox and the resolver's port 53. */
static void
stream_segment(struct gw_replay *r, const struct nfq_tuple *t, bool to_sb)
{
	struct dns_stream **sp;
	struct conn_key k;

	conn_key_of(t, to_sb, &k);
	if (!to_sb && (t->tcp_flags & (TH_SYN | TH_ACK)) == TH_SYN) {
		stream_start(r, &k, t->tcp_seq);
		return;
	}
	if ((sp = stream_find(r, &k)) == NULL)
		return;		/* begun before the trace, or dropped */
	if (to_sb && (t->tcp_flags & TH_SYN)) {
		nfq_reasm_init(&(*sp)->a, t->tcp_seq + 1);
		(*sp)->answers_seen = true;
		return;
	}
	if (to_sb && !(*sp)->answers_seen) {
		stream_drop(r, sp, true);
		return;
	}
	stream_feed(r, sp, to_sb, t);
}

/* ---- packets ------------------------------------------------------------ */

/* The packets that tell the sandbox's address: only a sandbox opens
 * connections and asks names in its own trace. */
static bool
opens_something(const struct nfq_tuple *t)
{
	switch (t->proto) {
	case IPPROTO_TCP:
		return (t->tcp_flags & (TH_SYN | TH_ACK)) == TH_SYN;
	case IPPROTO_UDP:
		return t->dport == 53;
	case IPPROTO_ICMP:
		return t->icmp_type == ICMP_ECHO_REQUEST;
	}
	return false;
}

/* A packet the sandbox sent, as the gateway's rules would route it. */
static void
from_sandbox(struct gw_replay *r, const struct nfq_tuple *t)
{
	struct conn_key k;
	struct conn *c;
	bool syn = t->proto == IPPROTO_TCP &&
	    (t->tcp_flags & (TH_SYN | TH_ACK)) == TH_SYN;

	/* the resolver is accepted before anything is queued */
	if (t->dport == 53 && is_resolver(r, t->daddr)) {
		if (t->proto == IPPROTO_UDP)
			dns_query(r, IPPROTO_UDP, t->saddr, t->sport, t->daddr,
			    t->dport, t->l4_payload, t->l4_len);
		else if (t->proto == IPPROTO_TCP)
			stream_segment(r, t, false);
		else
			r->st.ignored++;
		return;
	}
	/* multicast is not routed; ICMP other than an echo request is a
	 * reply or an error belonging to another connection */
	if ((ntohl(t->daddr) >> 28) == 0xe ||
	    (t->proto == IPPROTO_ICMP && t->icmp_type != ICMP_ECHO_REQUEST)) {
		r->st.ignored++;
		return;
	}
	conn_key_of(t, false, &k);
	c = conn_find(r, &k);
	if (t->proto == IPPROTO_TCP) {
		if (syn && (c == NULL || c->isn != t->tcp_seq)) {
			/* a new connection (a SYN with another sequence
			 * number on the same ports starts over) */
			c = conn_new(r, &k, CT_TCP_MS);
			c->isn = t->tcp_seq;
			new_flow(r, c, t);
			return;
		}
		if (c == NULL) {
			/* no connection: conntrack calls it invalid
			 * (nf_conntrack_tcp_loose is 0) and drops it */
			r->st.ignored++;
			return;
		}
		conn_touch(r, c, CT_TCP_MS);
		if (c->mark == GW_MARK_INSPECT)
			inspect_packet(r, c, t);
		else
			r->st.ignored++;
		return;
	}
	if (c == NULL) {
		c = conn_new(r, &k, conn_ttl(t->proto));
		new_flow(r, c, t);
		return;
	}
	/* a later datagram of a decided connection stays in the kernel */
	conn_touch(r, c, conn_ttl(t->proto));
	r->st.ignored++;
}

/* A packet to the sandbox: an answer of the resolver, or a reply that
 * keeps a connection alive. */
static void
to_sandbox(struct gw_replay *r, const struct nfq_tuple *t)
{
	struct conn_key k;
	struct conn *c;

	if (t->sport == 53 && is_resolver(r, t->saddr)) {
		if (t->proto == IPPROTO_UDP)
			dns_answer(r, IPPROTO_UDP, t->saddr, t->dport,
			    t->l4_payload, t->l4_len);
		else if (t->proto == IPPROTO_TCP)
			stream_segment(r, t, true);
		else
			r->st.ignored++;
		return;
	}
	r->st.ignored++;
	if (t->proto == IPPROTO_ICMP && t->icmp_type != ICMP_ECHO_REPLY)
		return;
	conn_key_of(t, true, &k);
	if ((c = conn_find(r, &k)) != NULL)
		conn_touch(r, c, conn_ttl(t->proto));
}

void
gw_replay_packet(struct gw_replay *r, const uint8_t *pkt, size_t len,
    int64_t ts_us)
{
	struct nfq_tuple t;
	uint64_t ms = ts_us > 0 ? (uint64_t)ts_us / 1000 : 0;

	r->seq++;
	/* the trace's clock, never going back (captures merged from
	 * several queues can be slightly out of order) */
	if (ms > r->now) {
		r->now = ms;
		r->now_us = ts_us;
	} else if (ts_us > r->now_us) {
		r->now_us = ts_us;
	}
	timers_run(r, r->now);
	pending_expire(r, r->now);
	if (nfq_packet_parse(pkt, len, &t) != NFQ_PARSE_OK) {
		r->st.malformed++;
		return;
	}
	if (r->sandbox == 0 && opens_something(&t))
		r->sandbox = t.saddr;
	if (r->sandbox != 0 && t.saddr == r->sandbox)
		from_sandbox(r, &t);
	else if (r->sandbox != 0 && t.daddr == r->sandbox)
		to_sandbox(r, &t);
	else
		r->st.ignored++;	/* someone else's, or forged */
}

static uint16_t
be16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

int
gw_replay_frame(struct gw_replay *r, int linktype, const uint8_t *frame,
    size_t len, int64_t ts_us)
{
	size_t off;
	uint16_t type;

	r->st.frames++;
	switch (linktype) {
	case DLT_RAW:
	case DLT_IPV4:
		off = 0;
		type = len > 0 && frame[0] >> 4 == 4 ? 0x0800 : 0;
		break;
	case DLT_EN10MB:
		if (len < 14)
			goto not_ipv4;
		off = 14;
		type = be16(frame + 12);
		/* 802.1Q / 802.1ad tags */
		while ((type == 0x8100 || type == 0x88a8) && len >= off + 4) {
			type = be16(frame + off + 2);
			off += 4;
		}
		break;
	case DLT_LINUX_SLL:
		if (len < 16)
			goto not_ipv4;
		off = 16;
		type = be16(frame + 14);
		break;
	case DLT_LINUX_SLL2:
		if (len < 20)
			goto not_ipv4;
		off = 20;
		type = be16(frame);
		break;
	default:
		return -1;
	}
	if (type != 0x0800)
		goto not_ipv4;
	gw_replay_packet(r, frame + off, len - off, ts_us);
	return 0;
not_ipv4:
	r->st.not_ipv4++;
	return 0;
}

/* ---- the engine --------------------------------------------------------- */

struct gw_replay *
gw_replay_new(const struct gw_replay_opts *o, gw_replay_row_fn fn, void *arg)
{
	static const struct dns_bindings_bounds bounds = GW_BINDINGS_BOUNDS;
	struct gw_replay *r;
	uint32_t i;

	if ((r = calloc(1, sizeof(*r))) == NULL)
		return NULL;
	r->o = *o;
	r->fn = fn;
	r->arg = arg;
	r->sandbox = o->sandbox_addr;
	r->nbuckets = GW_REPLAY_CONNS_MAX * 2;
	r->conns = calloc(GW_REPLAY_CONNS_MAX, sizeof(*r->conns));
	r->buckets = malloc(r->nbuckets * sizeof(*r->buckets));
	r->bindings = dns_bindings_new(&bounds);
	r->verdicts = nfq_flows_new(GW_FLOWS_MAX);
	if (r->conns == NULL || r->buckets == NULL || r->bindings == NULL ||
	    r->verdicts == NULL) {
		gw_replay_free(r);
		return NULL;
	}
	for (i = 0; i < r->nbuckets; i++)
		r->buckets[i] = NIL;
	for (i = 0; i < GW_REPLAY_CONNS_MAX; i++)
		r->conns[i].hnext = i + 1 < GW_REPLAY_CONNS_MAX ? i + 1 : NIL;
	r->free_head = 0;
	r->head = r->tail = NIL;
	return r;
}

void
gw_replay_finish(struct gw_replay *r)
{
	size_t i;

	/* every timer fires, in order of time */
	while (r->next_timer != 0)
		timers_run(r, r->next_timer);
	for (i = 0; i < DNS_PENDING_MAX; i++) {
		struct pending *p = NULL;
		size_t j;

		for (j = 0; j < DNS_PENDING_MAX; j++)
			if (r->pend[j].used && (p == NULL ||
			    r->pend[j].seq < p->seq))
				p = &r->pend[j];
		if (p == NULL)
			break;
		pending_end(r, p);
	}
}

uint32_t
gw_replay_sandbox_addr(const struct gw_replay *r)
{
	return r->sandbox;
}

void
gw_replay_get_stats(const struct gw_replay *r, struct gw_replay_stats *st)
{
	*st = r->st;
}

void
gw_replay_free(struct gw_replay *r)
{
	size_t i;

	if (r == NULL)
		return;
	for (i = 0; i < GW_HOLD_MAX; i++) {
		if (r->holds[i].used) {
			free(r->holds[i].reasm);
			free(r->holds[i].http);
		}
	}
	for (i = 0; i < DNS_TCP_MAX; i++)
		free(r->streams[i]);
	free(r->conns);
	free(r->buckets);
	dns_bindings_free(r->bindings);
	nfq_flows_free(r->verdicts);
	free(r);
}

static bool
linktype_ok(int lt)
{
	return lt == DLT_RAW || lt == DLT_IPV4 || lt == DLT_EN10MB ||
	    lt == DLT_LINUX_SLL || lt == DLT_LINUX_SLL2;
}

int
gw_replay_file(const char *path, struct gw_replay *const *r, size_t n,
    char *err, size_t errlen)
{
	char perr[PCAP_ERRBUF_SIZE];
	struct pcap_pkthdr *h;
	const u_char *data;
	pcap_t *p;
	int lt, rc, ret = 0;
	size_t i;

	p = pcap_open_offline_with_tstamp_precision(path,
	    PCAP_TSTAMP_PRECISION_MICRO, perr);
	if (p == NULL) {
		/* pcap names the file in some messages, not in others */
		if (strstr(perr, path) != NULL)
			snprintf(err, errlen, "%s", perr);
		else
			snprintf(err, errlen, "%s: %s", path, perr);
		return -1;
	}
	lt = pcap_datalink(p);
	if (!linktype_ok(lt)) {
		const char *name = pcap_datalink_val_to_name(lt);

		snprintf(err, errlen, "%s: link type %s is not one replay "
		    "reads (RAW, EN10MB, LINUX_SLL, LINUX_SLL2)", path,
		    name != NULL ? name : "unknown");
		pcap_close(p);
		return -1;
	}
	while ((rc = pcap_next_ex(p, &h, &data)) == 1) {
		int64_t ts = (int64_t)h->ts.tv_sec * 1000000 + h->ts.tv_usec;

		for (i = 0; i < n; i++)
			(void)gw_replay_frame(r[i], lt, data, h->caplen, ts);
	}
	if (rc != PCAP_ERROR_BREAK) {
		snprintf(err, errlen, "%s: %s", path, pcap_geterr(p));
		ret = 1;
	}
	for (i = 0; i < n; i++)
		gw_replay_finish(r[i]);
	pcap_close(p);
	return ret;
}
