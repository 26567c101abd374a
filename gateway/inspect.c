/* inspect.c: holding a new flow's first flight until its TLS SNI or HTTP Host is read. */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/netfilter.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "gateway/addr.h"
#include "gateway/capture.h"
#include "gateway/gw.h"
#include "gateway/log.h"
#include "gateway/verdict.h"

#define TH_FIN	0x01
#define TH_SYN	0x02
#define TH_RST	0x04
#define TH_ACK	0x10
#define TH_URG	0x20

enum hold_kind { HOLD_TLS = GW_INSPECT_TLS, HOLD_HTTP = GW_INSPECT_HTTP };

/*
 * The first bytes of a TLS server's answer: a HelloRetryRequest is a
 * ServerHello whose random is the SHA-256 of "HelloRetryRequest" (RFC
 * 8446, 4.1.3), at bytes 11..42 of the stream (a record header of 5, the
 * handshake's type and length, 4, the version, 2). After one the client
 * sends its hello again, and a server that does not check that it is the
 * same (nginx and OpenSSL 3.0 do not) takes the name of the second: a
 * connection whose first hello named an allowed name reached another on
 * the same address (found by review, 2026-12-03; adversarial 60). So a
 * TLS connection is let go only once its server's first bytes are read
 * and are not one; one that is, is cut. The stream starts where the
 * server's first packet after the hello does (start: before its answer
 * the server sends nothing, so every packet until then has that sequence
 * number; an earlier one seen later moves it back and starts over).
 */
#define SRV_HEAD	43
static const uint8_t hrr_random[32] = {
	0xcf, 0x21, 0xad, 0x74, 0xe5, 0x9a, 0x61, 0x11,
	0xbe, 0x1d, 0x8c, 0x02, 0x1e, 0x65, 0xb8, 0x91,
	0xc2, 0xa2, 0x11, 0x16, 0x7a, 0xbb, 0x8c, 0x5e,
	0x07, 0x9e, 0x09, 0xe2, 0xc8, 0xa8, 0x33, 0x9c,
};

struct srv_head {
	bool		started;
	uint32_t	start;		/* the stream's first sequence number */
	uint64_t	have;		/* bit i: b[i] is known */
	uint8_t		b[SRV_HEAD];
};

enum srv_kind { SRV_UNKNOWN, SRV_OTHER, SRV_RETRY };

/* A server segment, t (a copy's: what was copied of its bytes). A SYN's
 * takes a number of its own: the stream starts after it. */
static void
srv_feed(struct srv_head *s, const struct nfq_tuple *t)
{
	uint32_t seq = t->tcp_seq + ((t->tcp_flags & TH_SYN) ? 1 : 0), off;
	const uint8_t *p = t->l4_payload;
	size_t len = t->l4_len, i;

	if (!s->started || (int32_t)(seq - s->start) < 0) {
		s->started = true;
		s->start = seq;
		s->have = 0;
	}
	off = seq - s->start;
	for (i = 0; p != NULL && i < len && off + i < SRV_HEAD; i++) {
		s->b[off + i] = p[i];
		s->have |= (uint64_t)1 << (off + i);
	}
}

static enum srv_kind
srv_kind(const struct srv_head *s)
{
	const uint64_t random = (((uint64_t)1 << 32) - 1) << 11;

	if (!(s->have & 1))
		return SRV_UNKNOWN;
	if (s->b[0] != 0x16)		/* no handshake record: an alert */
		return SRV_OTHER;
	if (!(s->have & ((uint64_t)1 << 5)))
		return SRV_UNKNOWN;
	if (s->b[5] != 0x02)		/* no ServerHello */
		return SRV_OTHER;
	if ((s->have & random) != random)
		return SRV_UNKNOWN;
	return memcmp(s->b + 11, hrr_random, sizeof(hrr_random)) == 0 ?
	    SRV_RETRY : SRV_OTHER;
}

/*
 * One flow under inspection. TLS flows live here from their SYN until the
 * server has acknowledged the ClientHello that was decided; HTTP flows for
 * the whole connection, since every request head is checked.
 *
 * Why until the server's acknowledgement: a segment sluiced reads may
 * never reach the server's stream. The server drops it (a timestamp it
 * finds too old, an acknowledgement number it finds too old, and every
 * other check a TCP stack makes) while sluiced has read and decided on
 * it, and a later segment at the same place then shows the server other
 * bytes. Mirroring every reason a server may drop a segment cannot be
 * done; this instead proves the server took the bytes that were decided:
 * until its ACK covers them (sent_end), every client segment that overlaps
 * them is compared with them, and one that differs ends the connection.
 * Under the verify mark the server's packets come here too (ruleset.c);
 * the first one whose ACK covers sent_end lets the connection go.
 *
 * On HTTP what is kept is the framing — heads, chunk lines, trailers —
 * never body or chunk data: once the bytes that set the boundaries between
 * requests are proven, another version of a body moves none of them.
 */
struct hold {
	bool			 used;
	enum hold_kind		 kind;
	bool			 logged;	/* its flow row is written */
	bool			 decided;	/* HTTP: a first head was allowed */
	bool			 data;		/* a byte of payload came */
	bool			 stale;		/* its SYN met an entry conntrack
						 * still held for the 5-tuple:
						 * its stream starts at the
						 * SYN's ISN only once the
						 * server's SYN-ACK says so */
	bool			 kernel;	/* TLS: its hello was let out by
						 * the kernel (--kernel-sni) and
						 * read from its copy */
	bool			 verifying;	/* TLS: the hello went out, and
						 * the server has not yet
						 * acknowledged all of it */
	uint32_t		 sent_end;	/* the sequence number after the
						 * last byte let out (the stream's
						 * start until one is) */
	uint32_t		 server_ack;	/* the highest the server has
						 * acknowledged, as seen */
	bool			 server_acked;	/* ... once it has */
	bool			 hello_acked;	/* TLS: the server acknowledged
						 * the whole hello; it is let go
						 * once srv says its answer is
						 * no HelloRetryRequest */
	struct srv_head		 srv;		/* TLS: its answer's first bytes */
	/* HTTP: the framing bytes read (heads, chunk lines, trailers) that
	 * the server has not acknowledged yet */
	struct nfq_kept		 kept;
	uint64_t		 verify_due;	/* HTTP: kept framing let out
						 * must be acknowledged by */
	bool			 marked;	/* HTTP: the connection's mark
						 * was set back to inspect over
						 * ctnetlink, and no framing
						 * was kept since */
	bool			 paused;	/* HTTP: reading stopped until
						 * the server acknowledges some */
	bool			 fin;		/* HTTP: the client closed with
						 * framing not acknowledged */
	const uint8_t		*direct;	/* HTTP: the segment in hand,
						 * read in place (in order, and
						 * nothing stored) */
	size_t			 direct_len;
	struct nfq_flow_key	 key;
	struct nfq_tuple	 t;		/* of the SYN, for the row */
	struct gw_decision	 syn;		/* what the SYN was allowed by;
						 * its rule points at syn_rule,
						 * never into a policy a
						 * `policy set` may free */
	char			 syn_rule[300];
	char			 syn_sha256[65];	/* the policy it was
						 * decided under */
	uint64_t		 deadline;	/* held bytes must be decided by */
	bool			 since_known;
	uint32_t		 since_gseq;	/* copies logged up to this one
						 * (in the kernel's order) came
						 * before its connection: its
						 * SYN's copy, or the newest
						 * read when a queued SYN made
						 * it (copy_after) */
	uint64_t		 last_ms;	/* last packet seen (or, once
						 * idle, counted by conntrack) */
	uint64_t		 ct_packets;	/* conntrack's count, both
						 * ways, when last asked */
	bool			 ct_asked;
	uint32_t		 ids[GW_HOLD_PKTS];
	struct nfq_queue	*qs[GW_HOLD_PKTS];	/* the queue each came
						 * on (--queue-balance) */
	size_t			 nids;
	struct nfq_reasm	*reasm;
	struct nfq_http_stream	*http;
	struct nfq_class_flow	*cls;
	struct nfq_http_head	 first;		/* HTTP: the first request */
	bool			 ts_on;		/* the SYN carried timestamps */
	uint32_t		 ts_max;	/* the newest TSval seen */
	uint8_t			*cap[GW_HOLD_CAPTURE];	/* --capture-denied */
	uint16_t		 caplen[GW_HOLD_CAPTURE];
	size_t			 ncap;
	char			 admitted[DNS_NAME_MAX + 1];	/* its Host */
	int			 next;		/* hash chain, -1 ends */
	int			 upos;		/* its place in used_ix */
};

/* The ACK of a server's packet read before the flight it proves, or its
 * reset; and the first bytes of the server's stream, if a copy had them. */
struct early {
	struct nfq_flow_key	 key;	/* the hold's: the client's way */
	uint32_t		 ack;	/* the furthest */
	bool			 acked;	/* ... if one came */
	bool			 has_gseq;
	uint32_t		 gseq;	/* the kernel's order of the copy
					 * that made it or last moved ack */
	bool			 rst;	/* the server reset the connection */
	uint64_t		 ms;	/* when first read; 0: the slot is free */
	struct srv_head		 srv;
};

struct gw_holds {
	struct hold		 h[GW_HOLD_MAX];
	int			 bucket[GW_HOLD_MAX * 2];
	int			 free_ix[GW_HOLD_MAX];	/* unused slots, a stack */
	int			 used_ix[GW_HOLD_MAX];	/* slots in use, [0, n):
						 * the timers walk these, not
						 * the whole table */
	size_t			 n;			/* slots in use */
	struct dns_hash_key	 key;
	struct early		 early[GW_EARLY_MAX];	/* early_keep */
};

_Static_assert((GW_HOLD_MAX & (GW_HOLD_MAX - 1)) == 0, "power of two");
_Static_assert((GW_EARLY_MAX & (GW_EARLY_MAX - 1)) == 0, "power of two");

/* keyed: a sandbox chooses its ports, not the chains they land in */
static uint32_t
key_hash(const struct gw_holds *hs, const struct nfq_flow_key *k)
{
	return (uint32_t)nfq_flow_key_hash(&hs->key, k) &
	    (GW_HOLD_MAX * 2 - 1);
}

static bool
key_eq(const struct nfq_flow_key *a, const struct nfq_flow_key *b)
{
	return a->ifindex == b->ifindex && a->saddr == b->saddr &&
	    a->daddr == b->daddr && a->sport == b->sport &&
	    a->dport == b->dport && a->proto == b->proto;
}

/* The key of the hold of the connection saddr:sport -> daddr:dport (the
 * client's way) on sandbox interface ifindex. */
static void
hold_key(struct nfq_flow_key *key, uint32_t ifindex, uint8_t proto,
    uint32_t saddr, uint16_t sport, uint32_t daddr, uint16_t dport)
{
	memset(key, 0, sizeof(*key));
	key->ifindex = ifindex;
	key->saddr = saddr;
	key->daddr = daddr;
	key->sport = sport;
	key->dport = dport;
	key->proto = proto;
}

/* The flow a packet belongs to: the ingress interface and the 5-tuple. */
static void
flow_key(const struct nfq_packet *pkt, const struct nfq_tuple *t,
    struct nfq_flow_key *key)
{
	hold_key(key, pkt->indev, t->proto, t->saddr, t->sport, t->daddr,
	    t->dport);
}

static struct hold *
hold_find(struct gw_holds *hs, const struct nfq_flow_key *k)
{
	int i;

	for (i = hs->bucket[key_hash(hs, k)]; i != -1; i = hs->h[i].next)
		if (key_eq(&hs->h[i].key, k))
			return &hs->h[i];
	return NULL;
}

static void
hold_free(struct gw *gw, struct hold *h)
{
	struct gw_holds *hs = gw->holds;
	int *pp = &hs->bucket[key_hash(hs, &h->key)];
	int me = (int)(h - hs->h);
	struct gw_sandbox *sb;
	int last;

	while (*pp != -1 && *pp != me)
		pp = &hs->h[*pp].next;
	if (*pp == me)
		*pp = h->next;
	free(h->reasm);
	free(h->http);
	nfq_kept_free(&h->kept);
	while (h->ncap > 0)
		free(h->cap[--h->ncap]);
	nfq_class_flow_free(h->cls);
	if ((sb = gw_sandbox_by_ifindex(gw, h->key.ifindex)) != NULL &&
	    sb->holds > 0)
		sb->holds--;
	/* the last slot in use takes its place in the list */
	last = hs->used_ix[hs->n - 1];
	hs->used_ix[h->upos] = last;
	hs->h[last].upos = h->upos;
	memset(h, 0, sizeof(*h));
	hs->n--;
	hs->free_ix[GW_HOLD_MAX - 1 - hs->n] = me;
}

int
gw_inspect_init(struct gw *gw)
{
	struct gw_holds *hs = calloc(1, sizeof(*hs));
	size_t i;

	if (hs == NULL)
		return -1;
	for (i = 0; i < GW_HOLD_MAX * 2; i++)
		hs->bucket[i] = -1;
	for (i = 0; i < GW_HOLD_MAX; i++)
		hs->free_ix[i] = (int)i;
	dns_hash_key_new(&hs->key, hs);
	gw->holds = hs;
	/* nDPI is a help for the log, not a gate: run without it if it
	 * cannot start */
	gw->classifier = nfq_classifier_new();
	if (gw->classifier == NULL)
		log_warnx("nDPI did not start: flows are logged without app");
	return 0;
}

/* Keeps a copy of the flow's first packets, for the pcap of a denial. */
static void
keep(struct gw *gw, struct hold *h, const struct nfq_packet *pkt)
{
	size_t len = pkt->len > 0xffff ? 0xffff : pkt->len;

	if (gw->capture == NULL || h->ncap == GW_HOLD_CAPTURE)
		return;
	if ((h->cap[h->ncap] = malloc(len)) == NULL)
		return;
	memcpy(h->cap[h->ncap], pkt->payload, len);
	h->caplen[h->ncap++] = (uint16_t)len;
}

static void
classify(struct gw *gw, struct hold *h, const struct nfq_packet *pkt,
    uint64_t now)
{
	keep(gw, h, pkt);
	if (h->cls != NULL)
		nfq_class_feed(gw->classifier, h->cls, pkt->payload, pkt->len, now);
}

static bool conn_mark(struct gw *, const struct hold *, uint32_t);
static bool early_take(struct gw *, struct hold *, uint64_t);

/* ---- decisions ------------------------------------------------------- */

/*
 * Decides a name presented in the first flight (SNI or Host) for the
 * flow, with the same code replay uses (verdict.c). A flow that could not
 * be logged is not let through.
 */
static void
decide_name(struct gw *gw, struct gw_sandbox *sb, const struct hold *h,
    const char *presented, const char *admitted, enum gw_reason not_allowed,
    enum gw_reason mismatch, uint64_t now, struct gw_decision *d)
{
	struct gw_decide_ctx ctx = gw_decide_ctx_of(gw, sb, now);

	gw_strcopy(d->name, sizeof(d->name), h->syn.name);
	gw_decide_name(&ctx, h->t.daddr, h->t.dport, presented, admitted,
	    not_allowed, mismatch, d);
	if (d->verdict == GW_ALLOW && !store_writable(gw->store)) {
		d->verdict = GW_DENY;
		d->reason = GW_R_LOG_UNAVAILABLE;
	}
}

/* Audit mode lets a would-be denial through, as everywhere. */
static void
audit(const struct gw_sandbox *sb, struct gw_decision *d)
{
	if (d->verdict == GW_DENY && sb != NULL &&
	    sb->policy->mode == POLICY_AUDIT)
		d->verdict = GW_AUDIT;
}

/*
 * What nDPI names a ClientHello by, as the classifier's cache key: the
 * addresses (nDPI's address lists), the server's port, and the hello's
 * server name, ALPN, version and ECH. Not the client's port, which
 * nDPI's built-in lists name nothing by, nor the rest of the hello: as
 * far as we know its ciphers and other extensions go only into nDPI's
 * fingerprint and risk flags, not into the name; were that wrong, a
 * cached name is the earlier connection's (the README says so). The
 * hello parsed is the one nDPI would have read: the same bytes, held.
 */
static size_t
hello_key(const struct hold *h, const struct nfq_tls_hello *hello,
    uint8_t *key, size_t size)
{
	size_t n = 0, sni = strlen(hello->sni), alpn = strlen(hello->alpn);

	if (size < 14 + sni + 1 + alpn + 1)
		return 0;
	memcpy(key + n, &h->t.saddr, 4);
	n += 4;
	memcpy(key + n, &h->t.daddr, 4);
	n += 4;
	memcpy(key + n, &h->t.dport, 2);
	n += 2;
	memcpy(key + n, &hello->version, 2);
	n += 2;
	key[n++] = hello->ech;
	key[n++] = hello->has_sni;
	memcpy(key + n, hello->sni, sni + 1);
	n += sni + 1;
	memcpy(key + n, hello->alpn, alpn + 1);
	return n + alpn + 1;
}

/* nDPI's name for the flow; NULL if it has none. */
static const char *
app_name(struct gw *gw, struct hold *h, const struct nfq_tls_hello *hello,
    char *buf, size_t len)
{
	uint8_t key[14 + sizeof(hello->sni) + sizeof(hello->alpn)];
	size_t n;

	if (h->cls == NULL)
		return NULL;
	if (hello != NULL && (n = hello_key(h, hello, key, sizeof(key))) > 0)
		return nfq_class_result_keyed(gw->classifier, h->cls, key, n,
		    buf, len);
	return nfq_class_result(gw->classifier, h->cls, buf, len);
}

static int
log_hold(struct gw *gw, struct gw_sandbox *sb, struct hold *h,
    const struct gw_decision *d, const struct nfq_tls_hello *hello,
    const struct nfq_http_head *head)
{
	struct gw_flow_extra x;
	char ver[16], app[48];

	memset(&x, 0, sizeof(x));
	if (hello != NULL) {
		x.sni = hello->sni;
		x.tls_version = nfq_tls_version_str(hello->version, ver,
		    sizeof(ver));
		x.alpn = hello->alpn;
	}
	if (head != NULL) {
		x.http_method = head->method;
		x.http_host = head->host;
		x.http_path = head->path;
	}
	x.app = app_name(gw, h, h->kind == HOLD_TLS ? hello : NULL, app,
	    sizeof(app));
	/* the SYN's decision names the policy it was made under, which a
	 * `policy set` since may have replaced */
	if (d == &h->syn)
		x.policy_sha256 = h->syn_sha256;
	h->logged = true;
	if (gw_log_flow(gw, sb, &h->t, d, &x) == -1) {
		gw->denied_unlogged++;
		return -1;
	}
	return 0;
}

/*
 * One verdict for held packets [0, n), in order: each run of packets that
 * came on the same queue in one send (with several queues a flow's
 * packets may come on several).
 */
static int
verdict_held(struct hold *h, size_t n, uint32_t verdict, bool set_mark,
    uint32_t mark)
{
	size_t i, j;
	int rc = 0;

	for (i = 0; i < n; i = j) {
		for (j = i + 1; j < n && h->qs[j] == h->qs[i]; j++)
			;
		if (nfq_queue_verdicts(h->qs[i], h->ids + i, j - i, verdict,
		    set_mark, mark) == -1)
			rc = -1;
	}
	return rc;
}

/* Releases every held packet (and the one in hand, already in ids). */
static void
release(struct gw *gw, struct hold *h, uint32_t mark)
{
	(void)gw;
	if (h->nids > 0 && verdict_held(h, h->nids, NF_ACCEPT, true,
	    mark) == -1)
		log_warn("verdicts for a held flight");
	h->nids = 0;
}

/*
 * The server took the handshake: it is reset too, or it would keep its
 * side open until its own timeout, its packets dropped here. The reset
 * goes out as the client's, at the sequence number the server expects
 * next, and conntrack NATs it as the connection's. That is the end of
 * what was let out, or of the handshake if the server never took that: a
 * reset at the other one is out of its window (ignored), or in it
 * (answered with an ACK, which at most reaches the client). One that
 * belongs to no established connection (the server never answered the
 * SYN, say) is dropped by the ruleset and comes back as EPERM: there is
 * nothing to reset, and that is no error. True if one went out.
 */
static bool
reset_to(struct gw *gw, const struct nfq_flow_key *k, const uint32_t *seqs,
    size_t n)
{
	uint8_t pkt[NFQ_TCP_RST_LEN];
	struct sockaddr_in to;
	size_t i;
	bool sent = false;

	if (gw->rst_fd == -1)
		return false;
	memset(&to, 0, sizeof(to));
	to.sin_family = AF_INET;
	to.sin_addr.s_addr = k->daddr;
	for (i = 0; i < n; i++) {
		(void)nfq_tcp_rst(pkt, sizeof(pkt), k->saddr, k->sport,
		    k->daddr, k->dport, seqs[i]);
		if (sendto(gw->rst_fd, pkt, sizeof(pkt), 0,
		    (struct sockaddr *)&to, sizeof(to)) != -1)
			sent = true;
		else if (errno != EPERM) {
			gw->server_reset_errors++;
			log_debug("reset to port %u: %s", k->dport,
			    strerror(errno));
		}
	}
	if (sent)
		gw->server_resets++;
	return sent;
}

/*
 * The server is reset where it may be in the stream: at the end of what
 * was let out, where it is if all of that reached it; at what it last
 * acknowledged, where it is if a segment of it was lost on the way (and
 * nothing came after); at the end of the handshake, if nothing was let
 * out or nothing arrived. Only a reset at the sequence number it expects
 * next resets it; one elsewhere in its window draws a challenge ACK, and
 * once it is reset the others meet no connection.
 */
static void
reset_server(struct gw *gw, const struct hold *h)
{
	uint32_t seqs[3], cand[3] = { h->sent_end, h->server_ack,
	    h->reasm->base };
	size_t i, j, n = 0;

	for (i = 0; i < 3; i++) {
		if (i == 1 && !h->server_acked)
			continue;
		for (j = 0; j < n && seqs[j] != cand[i]; j++)
			;
		if (j == n)
			seqs[n++] = cand[i];
	}
	(void)reset_to(gw, &h->key, seqs, n);
}

/*
 * A connection refused for want of state (a restart while its first flight
 * was held or under proof, an HTTP connection silent past --http-idle) is
 * reset at the server too, or it would keep its side open until its own
 * timeout. Nothing says where the server is in the stream but the
 * refused segment: at its start, if it is the first the server has not
 * taken (a retransmission of a held flight, the next request), or at its
 * end, if the server took it once before. Only a sandbox's own TCP
 * connections, from its own address (the ruleset also drops a reset of
 * anything but an established connection).
 */
static void
reset_stateless(struct gw *gw, const struct gw_sandbox *sb,
    const struct nfq_flow_key *k, const struct nfq_tuple *t)
{
	uint32_t seqs[2] = { t->tcp_seq, t->tcp_seq + (uint32_t)t->l4_len };

	if (sb == NULL || t->proto != IPPROTO_TCP || (t->tcp_flags & TH_SYN) ||
	    t->saddr != sb->addr)
		return;
	(void)reset_to(gw, k, seqs, 2);
}

/*
 * Ends the flow: the server is reset, held packets are dropped and the
 * last one goes round the chain again with the deny mark, so the kernel
 * resets the client and the connection keeps the deny mark for whatever
 * the client sends next.
 */
static void
reject(struct gw *gw, struct hold *h)
{
	log_debug("reject flow to port %u: %zu held", h->t.dport, h->nids);
	reset_server(gw, h);
	if (h->nids == 0)
		return;
	if (h->nids > 1 && verdict_held(h, h->nids - 1, NF_DROP, false,
	    0) == -1)
		log_warn("verdicts for a held flight");
	if (nfq_queue_verdict(h->qs[h->nids - 1], h->ids[h->nids - 1],
	    NF_REPEAT, true, GW_MARK_DENY) == -1)
		log_warn("verdict for a held flight");
	h->nids = 0;
}

/* A denial of the whole flow: row, reset, forget. */
static void
deny_hold(struct gw *gw, struct gw_sandbox *sb, struct hold *h,
    enum gw_reason reason, const struct nfq_tls_hello *hello,
    const struct nfq_http_head *head)
{
	struct gw_decision d = h->syn;

	d.verdict = GW_DENY;
	d.reason = reason;
	d.rule = NULL;
	d.domain = NULL;
	audit(sb, &d);
	if (gw->capture != NULL && sb != NULL) {
		size_t i;

		for (i = 0; i < h->ncap; i++)
			gw_capture_packet(gw->capture, sb->name, h->cap[i],
			    h->caplen[i], store_now_us());
	}
	if (log_hold(gw, sb, h, &d, hello, head) == 0 && d.verdict == GW_AUDIT)
		release(gw, h, GW_MARK_ALLOW);
	else
		reject(gw, h);
	hold_free(gw, h);
}

/*
 * Adds the packet in hand to the held flight for a verdict to come. At
 * the bound the newest held packet is dropped to make room (it gets its
 * one verdict now), so the caller can still reset the client with this
 * one.
 */
/* The newest held packet is dropped: it gets its one verdict now. */
static void
drop_newest(struct hold *h)
{
	h->nids--;
	(void)nfq_queue_verdict(h->qs[h->nids], h->ids[h->nids], NF_DROP,
	    false, 0);
}

static void
add_id(struct gw *gw, struct hold *h, uint32_t id)
{
	if (h->nids == GW_HOLD_PKTS)
		drop_newest(h);
	/* the packet in hand came on the queue being read */
	h->qs[h->nids] = gw->queue;
	h->ids[h->nids++] = id;
}

/* The mark a hold's packets carry: verify while the server has not
 * acknowledged what was read (or, for a stale SYN's, answered it with a
 * SYN-ACK: its packets are copied until then), else inspect. */
static uint32_t
hold_mark(const struct hold *h)
{
	return (h->stale || (h->kind == HOLD_TLS ? h->verifying :
	    h->kept.n > 0)) ? GW_MARK_VERIFY : GW_MARK_INSPECT;
}

/* Bytes on a stale SYN's connection before the server's SYN-ACK of its
 * ISN (pkt carries them): the server may be reading them as an older
 * connection's, from elsewhere than sluiced would, so the flow is
 * refused (adversarial 24, 25). */
static void
refuse_stale(struct gw *gw, struct gw_sandbox *sb, struct hold *h,
    const struct nfq_packet *pkt)
{
	add_id(gw, h, pkt->id);
	gw->stale_refused++;
	deny_hold(gw, sb, h, GW_R_NO_INSPECTION_STATE, NULL, NULL);
}

/* ---- TLS ----------------------------------------------------------- */

/*
 * A first flight the kernel let out (--kernel-sni) that sluiced decides
 * otherwise, or cannot read as the one the program approved: the server
 * has its bytes. The connection takes the deny mark over ctnetlink, so
 * that neither side's next packet passes (the client's is reset by the
 * ruleset), and its server is reset; the row says why. The program's
 * table is emptied: what else it learned may be as wrong, and nothing
 * passes by it until sluiced has allowed again through the queue.
 */
static void
overrule(struct gw *gw, struct gw_sandbox *sb, struct hold *h,
    enum gw_reason reason, const struct nfq_tls_hello *hello)
{
	gw->ksni_overruled++;
	log_warnx("%s: a first flight to port %u the kernel let out is "
	    "%s here: connection reset", sb->name, h->key.dport,
	    gw_reason_name(reason));
	if (gw->ctmark != NULL)
		(void)conn_mark(gw, h, sb->policy->mode == POLICY_AUDIT ?
		    GW_MARK_ALLOW : GW_MARK_DENY);
	deny_hold(gw, sb, h, reason, hello, NULL);
	gw_ksni_clear(gw);
}

/* A TLS flight refused: as a denial, or as an overruling of the kernel. */
static void
refuse(struct gw *gw, struct gw_sandbox *sb, struct hold *h,
    enum gw_reason reason, const struct nfq_tls_hello *hello)
{
	if (h->kernel)
		overrule(gw, sb, h, reason, hello);
	else
		deny_hold(gw, sb, h, reason, hello, NULL);
}

static void
tls_step(struct gw *gw, struct gw_sandbox *sb, struct hold *h, uint64_t now)
{
	struct nfq_tls_hello hello;
	struct gw_decision d;
	enum nfq_tls_status st;

	st = nfq_tls_parse_hello(h->reasm->data, h->reasm->contiguous, &hello);
	switch (st) {
	case NFQ_TLS_NEED_MORE:
		/* the kernel approves only a whole ClientHello */
		if (h->kernel)
			refuse(gw, sb, h, GW_R_MALFORMED_TLS, NULL);
		return;
	case NFQ_TLS_NOT_TLS:
		refuse(gw, sb, h, GW_R_NOT_TLS, NULL);
		return;
	case NFQ_TLS_MALFORMED:
		log_debug("%s: malformed ClientHello: %s", sb->name, hello.error);
		refuse(gw, sb, h, GW_R_MALFORMED_TLS, &hello);
		return;
	case NFQ_TLS_OK:
		break;
	}
	{
		struct gw_decide_ctx ctx = gw_decide_ctx_of(gw, sb, now);

		gw_strcopy(d.name, sizeof(d.name), h->syn.name);
		gw_decide_hello(&ctx, h->t.daddr, h->t.dport, &hello, &d);
		if (d.verdict == GW_ALLOW && !store_writable(gw->store)) {
			d.verdict = GW_DENY;
			d.reason = GW_R_LOG_UNAVAILABLE;
		}
	}
	if (d.verdict != GW_ALLOW) {
		refuse(gw, sb, h, d.reason, &hello);
		return;
	}
	/* decided: the rest of the connection stays in the kernel — unless
	 * it cannot be logged, in which case it does not pass at all */
	if (log_hold(gw, sb, h, &d, &hello, NULL) == -1) {
		if (h->kernel) {
			gw->ksni_overruled++;
			if (gw->ctmark != NULL)
				(void)conn_mark(gw, h, GW_MARK_DENY);
			gw_ksni_clear(gw);
		}
		reject(gw, h);
		hold_free(gw, h);
		return;
	}
	/* out it goes (or went, through the kernel), and the connection is
	 * let go once the server has acknowledged it (verify_reply); the
	 * next hello like it may pass in the kernel */
	h->sent_end = h->reasm->base + (uint32_t)h->reasm->high;
	h->verifying = true;
	release(gw, h, GW_MARK_VERIFY);
	h->deadline = now + GW_VERIFY_MS;
	if (!h->kernel)
		gw_ksni_learn(gw, h->key.ifindex, h->t.daddr, h->t.dport,
		    hello.sni, &d, now);
	else
		(void)early_take(gw, h, now);	/* its proof, if read first */
}

/*
 * Ends a connection whose decided bytes went out: a second row (reason),
 * and with copies its mark says so at once, so that neither side's
 * packets pass or are copied any longer (in audit mode it is let go
 * instead). Without copies its next packet either way finds no state and
 * is refused.
 */
static void
cut_verifying(struct gw *gw, struct gw_sandbox *sb, struct hold *h,
    enum gw_reason reason)
{
	if (gw->ctmark != NULL)
		(void)conn_mark(gw, h, sb != NULL &&
		    sb->policy->mode == POLICY_AUDIT ? GW_MARK_ALLOW :
		    GW_MARK_DENY);
	deny_hold(gw, sb, h, reason, NULL, NULL);
}

/*
 * The server has acknowledged every byte of the ClientHello that was
 * decided: the rest of the connection stays in the kernel. Packets already
 * queued behind this one, either side's, follow the verdict for a moment
 * (from the flow table, not a hold slot) instead of meeting no state —
 * never a SYN on a reused 5-tuple (tag: the stream's first byte; those
 * before the server's ACK can change nothing now).
 */
static void
tls_verified(struct gw *gw, struct hold *h, uint64_t now)
{
	struct nfq_flow *fl;

	fl = nfq_flows_insert(gw->flows, &h->key, now, GW_FLOW_ALLOW_TTL_MS,
	    NF_ACCEPT, GW_MARK_ALLOW);
	fl->flight = true;
	fl->tag = h->reasm->base;
	release(gw, h, GW_MARK_ALLOW);	/* what came after the hello */
	hold_free(gw, h);
}

/*
 * The server answered the hello with a HelloRetryRequest: the client's
 * next hello, whatever name it carries, would go on unread. The
 * connection is cut as one whose proof never came (expire_proof), with a
 * row that says why; in audit mode it is let go. What the client sent
 * after its first hello was held here (verify_client) and is dropped.
 */
static void
cut_retry(struct gw *gw, struct gw_sandbox *sb, struct hold *h)
{
	log_debug("a HelloRetryRequest on a connection to port %u: cut",
	    h->key.dport);
	gw->hello_retries++;
	cut_verifying(gw, sb, h, GW_R_HELLO_RETRY);
}

/*
 * Whether h, verifying, is done: its hello acknowledged and its server's
 * answer no HelloRetryRequest (its connection then let go), or one (cut).
 * True when h is gone; mark is what its connection carries otherwise.
 */
static bool
tls_settle(struct gw *gw, struct hold *h, uint64_t now, uint32_t *mark)
{
	*mark = GW_MARK_VERIFY;
	if (!h->hello_acked)
		return false;
	switch (srv_kind(&h->srv)) {
	case SRV_UNKNOWN:
		return false;
	case SRV_RETRY:
		cut_retry(gw, gw_sandbox_by_ifindex(gw, h->key.ifindex), h);
		return true;
	case SRV_OTHER:
		break;
	}
	h->verifying = false;
	*mark = GW_MARK_ALLOW;
	(void)now;
	return false;
}

/*
 * Proofs read before the flight they prove. With --kernel-sni a hello and
 * the server's answer to it go on without sluiced, and their copies wait
 * in two sockets: the hello's behind its SYN's in one, the answer's in
 * the other. Read as they come, the hello's copy is read first; but after
 * a stall (a backlog in both) the answers run ahead of the hellos, and
 * one read before its connection's hold exists, or before its hello's
 * copy made that hold wait for a proof, would be lost, and its connection
 * reset when no other came in GW_VERIFY_MS. So the ACK is kept, keyed the
 * hold's way in a table of GW_EARLY_MAX slots, two for each key (keyed:
 * a sandbox chooses its ports, not the slots they take), for
 * GW_EARLY_MS: the copies of a full socket are read in well under that.
 * With both taken by other connections' the older goes (early_pushed):
 * that connection waits for its server's next packet, as before (one
 * way, 65,536 slots: 300 of 7,000 pushed out in 67, and as many
 * connections held 10 s; two ways: 7-44, 1-29 held). It proves the
 * flight (early_take) only if it acknowledges all of it and at most
 * GW_EARLY_WINDOW past: an ACK of an older connection on the same
 * 5-tuple, read within GW_EARLY_MS, lands there one time in 65,536, and
 * then lets go a connection whose hello sluiced has decided on and the
 * kernel let out.
 * A reset is kept too, and frees the hold as one read after the flight
 * would: a server that closes at once (a full accept queue: 67's, after
 * the stall) resets the hello when it comes, and a hold whose reset was
 * read first waited GW_VERIFY_MS for a proof that could not come, a slot
 * of the table each (a thousand of them filled it, 2026-12-03).
 */
static bool
early_live(const struct early *e, uint64_t now)
{
	return e->ms != 0 && now - e->ms <= GW_EARLY_MS;
}

/* Two ways: a key's slot and its neighbour. k's live entry, or NULL
 * (with the one it would take in *room). */
static struct early *
early_find(struct gw *gw, const struct nfq_flow_key *k, uint64_t now,
    struct early **room)
{
	struct gw_holds *hs = gw->holds;
	struct early *e = &hs->early[nfq_flow_key_hash(&hs->key, k) &
	    (GW_EARLY_MAX - 2)];
	int i;

	for (i = 0; i < 2; i++)
		if (early_live(&e[i], now) && key_eq(&e[i].key, k))
			return &e[i];
	if (room != NULL)
		*room = !early_live(&e[0], now) ? &e[0] :
		    !early_live(&e[1], now) ? &e[1] :
		    e[0].ms <= e[1].ms ? &e[0] : &e[1];	/* the older */
	return NULL;
}

static void
early_keep(struct gw *gw, const struct nfq_flow_key *k,
    const struct nfq_packet *pkt, const struct nfq_tuple *t, uint64_t now)
{
	struct early *e, *room;

	if (!(t->tcp_flags & (TH_ACK | TH_RST)))
		return;
	if ((e = early_find(gw, k, now, &room)) == NULL) {
		e = room;
		if (early_live(e, now))
			gw->early_pushed++;
		gw->early_kept++;
		e->key = *k;
		e->acked = false;
		e->rst = false;
		e->srv.started = false;
		e->ms = now;
		e->has_gseq = pkt->has_gseq;
		e->gseq = pkt->gseq;
	}
	srv_feed(&e->srv, t);
	if (t->tcp_flags & TH_RST)
		e->rst = true;
	else if (!e->acked || (int32_t)(t->tcp_ack - e->ack) > 0) {
		e->ack = t->tcp_ack;
		e->acked = true;
		e->has_gseq = pkt->has_gseq;
		e->gseq = pkt->gseq;
	}
}

/*
 * Whether a copy logged as gseq (has: whether it was numbered) came after
 * h's connection began. A server's packet logged before is an older
 * connection's on the 5-tuple; its ACK proves nothing here, however well
 * it fits: the sandbox picks its ISN, and one chosen so that its hello
 * ends where the older connection's ACK points had that ACK taken for the
 * proof of a hello the server never took (found by review, 2026-12-03;
 * adversarial 29). A hold made by a queued SYN began after every copy
 * read by then (its SYN had not gone on: gw_inspect_start reads them all
 * first); one made by a SYN's copy, after that copy.
 */
static bool
copy_after(const struct hold *h, bool has, uint32_t gseq)
{
	if (!h->since_known)
		return true;	/* no copy read before it: none to mistake */
	return has && (int32_t)(gseq - h->since_gseq) > 0;
}

/* h, a hello the kernel let out, has just begun to wait for its proof
 * (tls_step): one read first lets it go. */
static bool
early_take(struct gw *gw, struct hold *h, uint64_t now)
{
	struct early *e = early_find(gw, &h->key, now, NULL);
	uint32_t ack, mark;

	if (e == NULL)
		return false;
	e->ms = 0;
	if (!copy_after(h, e->has_gseq, e->gseq)) {
		gw->copies_older++;
		return false;
	}
	ack = e->ack;
	if (e->rst) {
		/* nothing more to wait for (as verify_reply) */
		gw->early_used++;
		hold_free(gw, h);
		return true;
	}
	if (!e->acked || ack - h->sent_end > GW_EARLY_WINDOW)
		return false;
	gw->early_used++;
	h->server_ack = ack;
	h->server_acked = true;
	h->hello_acked = true;
	h->srv = e->srv;
	if (tls_settle(gw, h, now, &mark))
		return true;		/* a HelloRetryRequest: cut */
	if (mark != GW_MARK_ALLOW)
		return false;		/* its answer's first bytes to come */
	(void)conn_mark(gw, h, GW_MARK_ALLOW);
	tls_verified(gw, h, now);
	return true;
}

/* ---- HTTP ---------------------------------------------------------- */

/*
 * Reads len contiguous bytes of the stream from sequence number seq:
 * heads are decided, body and chunk data skipped, and the framing bytes
 * kept until the server acknowledges them. Returns the bytes read (short
 * of len when the kept framing is full: h->paused), or -1 when the flow
 * was denied and its hold freed.
 */
static ssize_t
http_read(struct gw *gw, struct gw_sandbox *sb, struct hold *h,
    const uint8_t *data, size_t len, uint32_t seq, uint64_t now)
{
	struct nfq_http_head head;
	struct gw_decision d;
	const char *error = NULL;
	size_t off = 0, used, room;
	uint64_t opaque;

	h->paused = false;
	while (off < len) {
		enum nfq_http_status st;

		if ((opaque = nfq_http_opaque(h->http)) > 0) {
			/* body bytes: nothing in them can move a boundary */
			used = opaque < len - off ? (size_t)opaque : len - off;
			(void)nfq_http_feed(h->http, data + off, used, &used,
			    &head, &error);
			off += used;
			continue;
		}
		if ((room = nfq_kept_room(&h->kept, seq + (uint32_t)off)) ==
		    0) {
			/* wait for the server's ACK, if one can free some:
			 * the first range went out whole; else none will */
			if ((int32_t)(h->sent_end - (h->kept.r[0].seq +
			    h->kept.r[0].len)) >= 0) {
				h->paused = true;
				break;
			}
			deny_hold(gw, sb, h, GW_R_HOLD_OVERFLOW, NULL, NULL);
			return -1;
		}
		st = nfq_http_feed_framing(h->http, data + off,
		    room < len - off ? room : len - off, &used, &head, &error);
		if (used > 0 && h->kept.n == 0)
			h->verify_due = now + GW_VERIFY_MS;
		if (nfq_kept_add(&h->kept, seq + (uint32_t)off, data + off,
		    used) == -1) {
			deny_hold(gw, sb, h, GW_R_HOLD_OVERFLOW, NULL, NULL);
			return -1;
		}
		if (used > 0)
			h->marked = false;	/* goes out under verify */
		off += used;
		if (st == NFQ_HTTP_NEED_MORE && used == 0 &&
		    nfq_http_opaque(h->http) == 0)
			st = NFQ_HTTP_MALFORMED;	/* cannot be: never spin */
		if (st == NFQ_HTTP_NEED_MORE)
			continue;
		if (st == NFQ_HTTP_MALFORMED) {
			log_debug("%s: malformed HTTP: %s", sb->name,
			    error ? error : "?");
			/* the row names the connection's first request, if
			 * any: the broken one has no head to show */
			deny_hold(gw, sb, h, GW_R_MALFORMED_HTTP, NULL,
			    h->decided ? &h->first : NULL);
			return -1;
		}
		decide_name(gw, sb, h, head.host,
		    h->decided ? h->admitted : NULL, GW_R_HOST_NOT_ALLOWED,
		    GW_R_HOST_BINDING_MISMATCH, now, &d);
		audit(sb, &d);
		if (d.verdict == GW_AUDIT) {
			/* audit mode: the request goes with its own row, and
			 * the connection is still read, so that each request
			 * after it has its row too, and a switch to enforce
			 * decides the next one */
			if (log_hold(gw, sb, h, &d, NULL, &head) == -1) {
				reject(gw, h);
				hold_free(gw, h);
				return -1;
			}
		} else if (d.verdict != GW_ALLOW) {
			/* a later request that is denied ends the
			 * connection, and gets its own row */
			deny_hold(gw, sb, h, d.reason, NULL, &head);
			return -1;
		}
		if (!h->decided) {
			h->decided = true;
			h->first = head;
			/* the name the connection was admitted with, which
			 * later requests may use without a binding: only one
			 * that was allowed. One audited through (a mismatch)
			 * admitted nothing, and after a switch to enforce a
			 * request for it would pass unchecked (found by
			 * review, 2026-12-03; scenario 13) */
			if (d.reason != GW_R_ALLOWED_DOMAIN ||
			    !dns_name_normalize(head.host, strlen(head.host),
			    h->admitted, NULL))
				h->admitted[0] = '\0';
			if (d.verdict == GW_ALLOW &&
			    log_hold(gw, sb, h, &d, NULL, &head) == -1) {
				reject(gw, h);
				hold_free(gw, h);
				return -1;
			}
		}
	}
	return (ssize_t)off;
}

/*
 * Reads what the stream has in order: the segment in hand in place when it
 * is the next one and nothing waits in the reassembler (a GSO segment of
 * 64 KiB fits no window, and body bytes need no copy), else the
 * reassembler's contiguous bytes.
 */
static void
http_step(struct gw *gw, struct gw_sandbox *sb, struct hold *h, uint64_t now)
{
	struct nfq_reasm *r = h->reasm;
	ssize_t n;

	if (h->direct != NULL) {
		const uint8_t *data = h->direct;
		size_t len = h->direct_len;

		h->direct = NULL;
		h->direct_len = 0;
		if ((n = http_read(gw, sb, h, data, len, r->base, now)) == -1)
			return;
		nfq_reasm_init(r, r->base + (uint32_t)n);
		if ((size_t)n < len && nfq_reasm_add(r, r->base, data + n,
		    len - (size_t)n) != NFQ_REASM_OK) {
			/* paused, and the rest does not fit: the segment is
			 * lost on the way as far as the client can tell, and
			 * comes again (what was read of it, the kept framing
			 * compares) */
			nfq_reasm_init(r, r->base);
			drop_newest(h);
		}
	} else {
		if ((n = http_read(gw, sb, h, r->data, r->contiguous, r->base,
		    now)) == -1)
			return;
		nfq_reasm_consume(r, (size_t)n);
	}
	/*
	 * Packets carrying any byte of a request head not yet complete, or
	 * not read yet, stay held; once every head they carry is decided (or
	 * they carry only body bytes) they go, and the server's packets come
	 * here until it has acknowledged their framing.
	 */
	if (!h->paused && !nfq_http_in_head(h->http)) {
		if (h->nids > 0)
			h->sent_end = r->base + (uint32_t)r->high;
		release(gw, h, hold_mark(h));
		h->deadline = 0;
	} else if (h->nids > 0 && h->deadline == 0)
		h->deadline = now + GW_HOLD_MS;
}

/* ---- packets --------------------------------------------------------- */

/*
 * Takes the packet in hand into the flow's held flight and feeds its
 * payload to the reassembler. Returns false when the flow was denied.
 */
static bool
take(struct gw *gw, struct gw_sandbox *sb, struct hold *h,
    const struct nfq_packet *pkt, const struct nfq_tuple *t, uint64_t now)
{
	uint32_t seq;
	enum nfq_reasm_result rr;
	struct nfq_tcp_opts o;

	/*
	 * Only bytes the server will take too may be read: a segment it
	 * drops (a signature it does not expect, a timestamp older than
	 * one it saw, IP options) could show the gateway one name while a
	 * later segment at the same place shows the server another.
	 */
	nfq_tcp_options(t->tcp_opts, t->tcp_optlen, &o);
	if (t->l4_len > 0 && (o.signature || o.malformed || t->ip_hlen > 20)) {
		add_id(gw, h, pkt->id);
		deny_hold(gw, sb, h, h->kind == HOLD_TLS ? GW_R_MALFORMED_TLS :
		    GW_R_MALFORMED_HTTP, NULL, NULL);
		return false;
	}
	if (t->l4_len > 0 && h->ts_on &&
	    (!o.has_ts || (int32_t)(o.tsval - h->ts_max) < 0)) {
		/* PAWS would drop it at the server: so do we, unread */
		(void)nfq_queue_verdict(gw->queue, pkt->id, NF_DROP, false, 0);
		return false;
	}
	if (o.has_ts && (int32_t)(o.tsval - h->ts_max) > 0)
		h->ts_max = o.tsval;

	if (h->nids == GW_HOLD_PKTS) {
		add_id(gw, h, pkt->id);		/* so it gets the reset */
		deny_hold(gw, sb, h, GW_R_HOLD_OVERFLOW, NULL, NULL);
		return false;
	}
	add_id(gw, h, pkt->id);
	if (t->l4_len == 0)
		return true;
	h->data = true;
	seq = t->tcp_seq + ((t->tcp_flags & TH_SYN) ? 1 : 0);
	if (h->kind == HOLD_HTTP) {
		if (!nfq_kept_agrees(&h->kept, seq, t->l4_payload,
		    t->l4_len)) {
			/* another version of framing already read: the
			 * server may never have taken the first one */
			deny_hold(gw, sb, h, GW_R_MALFORMED_HTTP, NULL, NULL);
			return false;
		}
		if (seq == h->reasm->base && h->reasm->high == 0) {
			/* the next bytes, and nothing waits: read in place */
			h->direct = t->l4_payload;
			h->direct_len = t->l4_len;
			if (h->deadline == 0)
				h->deadline = now + GW_HOLD_MS;
			return true;
		}
	}
	rr = nfq_reasm_add(h->reasm, seq, t->l4_payload, t->l4_len);
	if (rr == NFQ_REASM_CONFLICT) {
		/* two versions of the same bytes: which one the server
		 * keeps is not ours to know, so neither goes */
		deny_hold(gw, sb, h, h->kind == HOLD_TLS ? GW_R_MALFORMED_TLS :
		    GW_R_MALFORMED_HTTP, NULL, NULL);
		return false;
	}
	if (rr == NFQ_REASM_OVERFLOW && h->kind == HOLD_HTTP) {
		/* out of order, and too far ahead to store (a GSO segment of
		 * 64 KiB overtaking a smaller one on another CPU, say): it is
		 * lost on the way, as far as the client can tell, and comes
		 * again once what it skipped is here, read in place then */
		drop_newest(h);		/* the packet in hand */
		return false;
	}
	if (rr == NFQ_REASM_OVERFLOW) {
		deny_hold(gw, sb, h, GW_R_HOLD_OVERFLOW, NULL, NULL);
		return false;
	}
	if (h->deadline == 0)
		h->deadline = now + GW_HOLD_MS;
	return true;
}

/*
 * A segment with the URG flag, with bytes or without (its pointer may
 * name a byte still to come): the server's TCP takes the urgent byte out
 * of the stream its application reads (no SO_OOBINLINE), so that stream
 * would not be the one sluiced read. No client of TLS or HTTP sends one;
 * the flow is denied. True when it was.
 */
static bool
urgent(struct gw *gw, struct gw_sandbox *sb, struct hold *h,
    const struct nfq_packet *pkt, const struct nfq_tuple *t)
{
	if (!(t->tcp_flags & TH_URG))
		return false;
	if (!pkt->copy)
		add_id(gw, h, pkt->id);
	deny_hold(gw, sb, h, h->kind == HOLD_TLS ? GW_R_MALFORMED_TLS :
	    GW_R_MALFORMED_HTTP, NULL, NULL);
	return true;
}

/*
 * A client segment of a TLS connection decided and let out, whose server
 * has not acknowledged the hello yet: what it repeats of the decided bytes
 * must be what was decided, or the server could take another version of
 * them (the first one never reached it). Bytes past them are not read.
 */
static void
verify_client(struct gw *gw, struct gw_sandbox *sb, struct hold *h,
    const struct nfq_packet *pkt, const struct nfq_tuple *t)
{
	uint32_t seq = t->tcp_seq + ((t->tcp_flags & TH_SYN) ? 1 : 0);

	if (t->l4_len > 0 &&
	    !nfq_reasm_agrees(h->reasm, seq, t->l4_payload, t->l4_len)) {
		log_debug("%s: a ClientHello's bytes again, other ones",
		    sb->name);
		add_id(gw, h, pkt->id);
		deny_hold(gw, sb, h, GW_R_MALFORMED_TLS, NULL, NULL);
		return;
	}
	/* bytes past the hello before the server's answer to it is read:
	 * a second hello sent ahead of a HelloRetryRequest it expects (or
	 * early data) waits here until that answer says which it is */
	if (!pkt->copy && t->l4_len > 0 &&
	    (int32_t)(seq + (uint32_t)t->l4_len - h->sent_end) > 0 &&
	    !(t->tcp_flags & TH_RST)) {
		if (h->nids == GW_HOLD_PKTS) {
			add_id(gw, h, pkt->id);
			deny_hold(gw, sb, h, GW_R_HOLD_OVERFLOW, NULL, NULL);
			return;
		}
		add_id(gw, h, pkt->id);
		return;
	}
	if (!pkt->copy && nfq_queue_verdict(gw->queue, pkt->id, NF_ACCEPT,
	    true, GW_MARK_VERIFY) == -1)
		log_warn("verdict");
	if (t->tcp_flags & TH_RST)
		hold_free(gw, h);	/* nothing more to wait for */
}

static void
step(struct gw *gw, struct gw_sandbox *sb, struct hold *h, uint64_t now)
{
	if (h->kind == HOLD_TLS)
		tls_step(gw, sb, h, now);
	else
		http_step(gw, sb, h, now);
}

/*
 * The row of a flow whose first flight will never be decided, if it has
 * none yet: the SYN's decision if it sent nothing, else a denial for
 * reason (its held bytes are dropped, in audit mode too).
 */
static void
log_cut(struct gw *gw, struct gw_sandbox *sb, struct hold *h,
    enum gw_reason reason)
{
	struct gw_decision d;

	if (h->logged)
		return;
	if (!h->data) {
		(void)log_hold(gw, sb, h, &h->syn, NULL, NULL);
		return;
	}
	d = h->syn;
	d.verdict = GW_DENY;
	d.reason = reason;
	d.rule = NULL;
	(void)log_hold(gw, sb, h, &d, NULL, NULL);
}

/*
 * At a stop, the flows under inspection get their rows before they go: a
 * row is written only once a first flight is decided, and theirs never
 * will be (the queue closes, and what it held is dropped). One that sent
 * nothing yet gets its SYN's decision, its handshake having been let
 * through; one whose flight was cut short no_inspection_state, as its
 * next packet meets after a restart. (found by review, 2026-11-30: both
 * had no row at all.)
 */
void
gw_inspect_free(struct gw *gw)
{
	size_t k;

	if (gw->holds == NULL)
		return;
	for (k = 0; k < gw->holds->n; k++) {
		struct hold *h = &gw->holds->h[gw->holds->used_ix[k]];

		log_cut(gw, gw_sandbox_by_ifindex(gw, h->key.ifindex), h,
		    GW_R_NO_INSPECTION_STATE);
	}
	while (gw->holds->n > 0)
		hold_free(gw, &gw->holds->h[gw->holds->used_ix[0]]);
	free(gw->holds);
	gw->holds = NULL;
	nfq_classifier_free(gw->classifier);
	gw->classifier = NULL;
}

/*
 * A new connection on a held flow's 5-tuple (a new SYN, another sequence
 * number): the old one's flight will never complete. Its held packets are
 * dropped (not reset: the 4-tuple is the new connection's now) and it gets
 * its row — the SYN's decision if it sent nothing, else hold_timeout — so
 * that no packet waits in the queue for ever and no attempt goes unlogged.
 */
static void
replaced(struct gw *gw, struct gw_sandbox *sb, struct hold *h)
{
	if (h->nids > 0 && verdict_held(h, h->nids, NF_DROP, false, 0) == -1)
		log_warn("verdicts for a replaced flight");
	h->nids = 0;
	log_cut(gw, sb, h, GW_R_HOLD_TIMEOUT);
	hold_free(gw, h);
}

int
gw_inspect_held_syn(struct gw *gw, const struct nfq_packet *pkt,
    const struct nfq_tuple *t)
{
	struct nfq_flow_key key;
	const struct hold *h;

	flow_key(pkt, t, &key);
	if ((h = hold_find(gw->holds, &key)) == NULL || h->decided)
		return -1;
	return h->t.tcp_seq == t->tcp_seq ? 1 : 0;
}

int
gw_inspect_start(struct gw *gw, struct gw_sandbox *sb,
    const struct nfq_packet *pkt, const struct nfq_tuple *t,
    const struct gw_decision *d, int kind, uint64_t now)
{
	struct gw_holds *hs = gw->holds;
	struct nfq_flow_key key;
	struct hold *h = NULL;
	size_t i;
	uint32_t b;

	/* Copies made before this SYN are of other connections, or of an
	 * earlier one on this 5-tuple: read them all now, so none is taken
	 * for this one's proof (a stale ACK matching its sequence numbers).
	 * Its server has sent nothing yet: the SYN has not gone on. */
	gw_verify_drain(gw);
	flow_key(pkt, t, &key);
	if ((h = hold_find(hs, &key)) != NULL) {
		if (h->t.tcp_seq == t->tcp_seq && !h->decided) {
			/* the same SYN again (a retransmission): the hold
			 * goes on; data in it (TCP Fast Open) joins the
			 * flight. Not once a request on the connection was
			 * decided: the client had the SYN-ACK long before,
			 * and a SYN now is a new connection (see
			 * gw_inspect_held_syn) */
			if (urgent(gw, sb, h, pkt, t))
				return 0;
			if (h->verifying && h->kind == HOLD_TLS)
				verify_client(gw, sb, h, pkt, t);
			else if (t->l4_len == 0) {
				if (!pkt->copy && nfq_queue_verdict(gw->queue,
				    pkt->id, NF_ACCEPT, true,
				    hold_mark(h)) == -1)
					log_warn("verdict");
			} else if (take(gw, sb, h, pkt, t, now))
				step(gw, sb, h, now);
			return 0;
		}
		replaced(gw, sb, h);
	}
	/* bounded in all, and per sandbox so that one cannot take every
	 * slot from the others: constant work, on the path of every SYN */
	if ((errno = gw_limit_hold(gw, sb, hs->n)) != 0)
		return -1;
	i = (size_t)hs->free_ix[GW_HOLD_MAX - 1 - hs->n];
	h = &hs->h[i];
	memset(h, 0, sizeof(*h));
	h->reasm = malloc(sizeof(*h->reasm));
	if (h->reasm == NULL) {
		errno = ENOMEM;
		return -1;
	}
	if (kind == GW_INSPECT_HTTP) {
		if ((h->http = malloc(sizeof(*h->http))) == NULL) {
			free(h->reasm);
			h->reasm = NULL;
			errno = ENOMEM;
			return -1;
		}
		nfq_http_init(h->http);
	}
	h->used = true;
	sb->holds++;
	h->kind = kind == GW_INSPECT_TLS ? HOLD_TLS : HOLD_HTTP;
	if (pkt->copy) {
		h->since_known = pkt->has_gseq;
		h->since_gseq = pkt->gseq;
	} else {
		h->since_known = gw->copy_gseq_any;
		h->since_gseq = gw->copy_gseq;
	}
	h->stale = (pkt->mark & GW_MARK_MASK) == GW_MARK_STALE;
	if (h->stale)
		gw->stale_syns++;
	h->key = key;
	h->t = *t;
	h->t.l4_payload = NULL;
	h->t.l4_len = 0;
	h->t.tcp_opts = NULL;
	h->t.tcp_optlen = 0;
	h->syn = *d;
	gw_strcopy(h->syn_rule, sizeof(h->syn_rule), d->rule);
	h->syn.rule = d->rule != NULL ? h->syn_rule : NULL;
	h->syn.domain = NULL;
	gw_strcopy(h->syn_sha256, sizeof(h->syn_sha256), sb->policy->sha256);
	h->last_ms = now;
	nfq_reasm_init(h->reasm, t->tcp_seq + 1);
	h->sent_end = h->reasm->base;
	{
		struct nfq_tcp_opts o;

		nfq_tcp_options(t->tcp_opts, t->tcp_optlen, &o);
		h->ts_on = o.has_ts;
		h->ts_max = o.tsval;
	}
	/* a TLS flow is named once its hello is read, from the cache if
	 * one like it was named before: nDPI is fed only then, if at all */
	if (gw->classifier != NULL)
		h->cls = kind == GW_INSPECT_TLS ?
		    nfq_class_flow_new_deferred(gw->classifier) :
		    nfq_class_flow_new(gw->classifier);
	b = key_hash(hs, &key);
	h->next = hs->bucket[b];
	hs->bucket[b] = (int)i;
	h->upos = (int)hs->n;
	hs->used_ix[hs->n++] = (int)i;
	classify(gw, h, pkt, now);
	if (urgent(gw, sb, h, pkt, t))
		return 0;

	if (t->l4_len == 0) {
		/* a plain SYN: let the handshake happen, queue what follows
		 * (a copy from the kernel-SYN set is through already); a
		 * stale one's connection has the server's packets copied
		 * until its SYN-ACK (verify_reply) */
		if (!pkt->copy && nfq_queue_verdict(gw->queue, pkt->id,
		    NF_ACCEPT, true, hold_mark(h)) == -1)
			log_warn("verdict");
		return 0;
	}
	if (h->stale) {
		/* data in a stale SYN (TCP Fast Open): no SYN-ACK can have
		 * said where its stream starts yet */
		refuse_stale(gw, sb, h, pkt);
		return 0;
	}
	/* TCP Fast Open: data in the SYN is part of the first flight and
	 * waits for the verdict like the rest */
	if (take(gw, sb, h, pkt, t, now))
		step(gw, sb, h, now);
	return 0;
}

/*
 * Changes the connection's mark over ctnetlink. The kernel has changed it
 * (or refused to) when this returns; a refusal is read later
 * (gw_verify_refusals), which saves the acknowledgement's trip on every
 * proven connection. Whatever is refused, the connection keeps the mark it
 * had: a proven TLS connection the verify mark, so its client packets find
 * no hold and are refused once the flow table entry (GW_FLOW_ALLOW_TTL_MS)
 * is gone; an HTTP one is tried again with the next copy; an expired one
 * is refused at its next packet.
 */
static bool
conn_mark(struct gw *gw, const struct hold *h, uint32_t mark)
{
	if (nfq_ctmark_post(gw->ctmark, IPPROTO_TCP, h->key.saddr,
	    h->key.sport, h->key.daddr, h->key.dport, mark,
	    GW_MARK_MASK) == 0)
		return true;
	gw->verify_mark_errors++;
	log_warn("conntrack mark of connection to port %u", h->key.dport);
	return false;
}

/* The kernel refused a mark change: ENOENT, the connection is gone;
 * otherwise counted, and an HTTP hold's mark is tried again. */
static void
on_refusal(void *arg, const struct nfq_ct_end *e, int error)
{
	struct gw *gw = arg;
	struct gw_sandbox *sb;
	struct nfq_flow_key key;
	struct hold *h;

	if (error == ENOENT)
		return;
	gw->verify_mark_errors++;
	if (e == NULL) {
		log_warnx("conntrack mark refused: %s", strerror(error));
		return;
	}
	log_warnx("conntrack mark of connection to port %u refused: %s",
	    e->dport, strerror(error));
	if ((sb = gw_sandbox_by_addr(gw, e->saddr)) == NULL)
		return;
	hold_key(&key, sb->ifindex, e->proto, e->saddr, e->sport, e->daddr,
	    e->dport);
	if ((h = hold_find(gw->holds, &key)) != NULL && h->kind != HOLD_TLS)
		h->marked = false;	/* the next copy sets it again */
}

/*
 * The server has not acknowledged the bytes sluiced decided on within
 * GW_VERIFY_MS (or, on TLS, sent the first bytes of its answer): the
 * connection ends, with a row (hold_timeout).
 */
static void
expire_proof(struct gw *gw, struct gw_sandbox *sb, struct hold *h)
{
	log_debug("decided bytes to port %u never acknowledged",
	    h->key.dport);
	gw->verify_expired++;
	cut_verifying(gw, sb, h, GW_R_HOLD_TIMEOUT);
}

/*
 * The mark the server's packet says its connection is to carry now. A
 * queued one (a ruleset without NFLOG) carries it on by its verdict. A
 * copy's packet has gone on: the connection's mark is changed over
 * ctnetlink, when it is to change. Only marks a decision set are saved
 * from packets (GW_MARK_SET), so no packet in flight with the old one
 * restores it afterwards.
 */
static bool
proof_mark(struct gw *gw, const struct nfq_packet *pkt,
    const struct hold *h, uint32_t mark)
{
	if (!pkt->copy) {
		if (nfq_queue_verdict(gw->queue, pkt->id, NF_ACCEPT, true,
		    mark) == -1)
			log_warn("verdict");
		return true;
	}
	if (mark == GW_MARK_VERIFY)
		return true;	/* the mark it carries */
	return conn_mark(gw, h, mark);
}

/*
 * A server's packet, or a copy of it, while inspected bytes it has not
 * acknowledged are out (the verify mark). An ACK that covers all of them
 * lets a TLS connection go, and sends an HTTP one's server packets back
 * to the kernel; what it acknowledges of an HTTP stream need not be kept
 * any longer. A queued one with no state for it is dropped, unless its
 * connection was let go a moment ago.
 */
static void
verify_reply(struct gw *gw, const struct nfq_packet *pkt,
    const struct nfq_tuple *t, bool settling, uint64_t now)
{
	struct nfq_flow_key key;
	struct nfq_flow *fl;
	struct gw_sandbox *sb;
	struct hold *h = NULL;
	uint32_t mark = GW_MARK_VERIFY;

	/* the server's packet: the hold is keyed the client's way */
	hold_key(&key, pkt->outdev, t->proto, t->daddr, t->dport, t->saddr,
	    t->sport);
	if (t->proto == IPPROTO_TCP)
		h = hold_find(gw->holds, &key);
	/* a copy logged before the hold's connection began (one put off
	 * while an older connection's hold was there, say): that older
	 * connection's, with nothing to say about this one (copy_after) */
	if (h != NULL && pkt->copy && !copy_after(h, pkt->has_gseq,
	    pkt->gseq)) {
		gw->copies_older++;
		return;
	}
	if (h != NULL && gw->ksni_rules && h->kind == HOLD_TLS &&
	    !h->verifying && !h->stale && !settling) {
		/*
		 * Under the verify mark with nothing out to prove: the
		 * kernel let the hello out, and its copy, made before it
		 * went on, may be waiting unread. It is read first, or this
		 * packet would set the mark back to inspect and the proof
		 * would never be copied. A queued packet has it read now; a
		 * copy is read inside a read of copies, whose SYNs would
		 * read these copies in turn, each read's buffers under the
		 * other's feet (sluiced crashed so at 16 clients with both
		 * kernel switches on, 2026-12-02). So a copy waits, headers
		 * only, until the read is over (gw_verify_settle). With no
		 * room, it is taken as it is: the mark goes back to inspect,
		 * and the connection is reset when its proof does not come.
		 */
		if (!pkt->copy) {
			(void)gw_fastsyn_drain(gw);
			gw_verify_settle(gw);
			h = hold_find(gw->holds, &key);
		} else if (gw->nlater < GW_LATER_MAX) {
			struct gw_later *l = &gw->later[gw->nlater++];

			l->pkt = *pkt;
			l->pkt.payload = NULL;
			l->pkt.len = 0;
			l->t = *t;
			l->t.tcp_opts = NULL;
			l->t.tcp_optlen = 0;
			l->t.l4_payload = NULL;
			l->t.l4_len = t->l4_len < sizeof(l->head) ? t->l4_len :
			    sizeof(l->head);
			if (l->t.l4_len > 0)
				memcpy(l->head, t->l4_payload, l->t.l4_len);
			return;
		} else {
			/* no room: kept for its hello's copy instead */
			gw->later_full++;
			early_keep(gw, &key, pkt, t, now);
			return;
		}
	}
	if (h == NULL) {
		if (pkt->copy) {
			if (gw->ksni_rules)	/* on_proof: TCP */
				early_keep(gw, &key, pkt, t, now);
			return;
		}
		fl = nfq_flows_lookup(gw->flows, &key, now);
		if (nfq_queue_verdict(gw->queue, pkt->id, fl != NULL &&
		    fl->verdict == NF_ACCEPT ? NF_ACCEPT : NF_DROP,
		    fl != NULL, fl != NULL ? fl->mark : 0) == -1)
			log_warn("verdict");
		return;
	}
	h->last_ms = now;
	if (h->stale) {
		/* a SYN-ACK of the SYN's ISN: the server has no older
		 * connection on the 5-tuple (it would answer with an ACK of
		 * that one), so the stream starts where sluiced reads it */
		if ((t->tcp_flags & (TH_SYN | TH_ACK | TH_RST)) ==
		    (TH_SYN | TH_ACK) && t->tcp_ack == h->t.tcp_seq + 1)
			h->stale = false;
		else {
			proof_mark(gw, pkt, h, GW_MARK_VERIFY);
			if (t->tcp_flags & TH_RST) {
				/* refused: the attempt's row is its SYN's
				 * (no byte was taken while stale) */
				log_cut(gw, gw_sandbox_by_ifindex(gw,
				    h->key.ifindex), h,
				    GW_R_NO_INSPECTION_STATE);
				hold_free(gw, h);
			}
			return;
		}
	}
	if ((t->tcp_flags & TH_ACK) && (!h->server_acked ||
	    (int32_t)(t->tcp_ack - h->server_ack) > 0)) {
		h->server_ack = t->tcp_ack;
		h->server_acked = true;
	}
	if (h->kind == HOLD_TLS) {
		if (h->verifying) {
			/* the hello acknowledged, and the first bytes of
			 * the answer to it read (srv_head) */
			srv_feed(&h->srv, t);
			if ((t->tcp_flags & TH_ACK) &&
			    (int32_t)(t->tcp_ack - h->sent_end) >= 0)
				h->hello_acked = true;
			/* a server that closes without a byte sends no
			 * HelloRetryRequest either */
			if ((t->tcp_flags & TH_FIN) && t->l4_len == 0 &&
			    t->tcp_seq == h->srv.start && h->srv.have == 0 &&
			    h->hello_acked) {
				h->verifying = false;
				mark = GW_MARK_ALLOW;
			} else if (tls_settle(gw, h, now, &mark)) {
				/* cut; a queued packet of the server's
				 * goes no further either */
				if (!pkt->copy && nfq_queue_verdict(gw->queue,
				    pkt->id, NF_DROP, false, 0) == -1)
					log_warn("verdict");
				return;
			}
		} else
			mark = GW_MARK_INSPECT;	/* nothing out to prove */
		proof_mark(gw, pkt, h, mark);
		if (mark == GW_MARK_ALLOW)
			tls_verified(gw, h, now);
		else if (t->tcp_flags & TH_RST)
			hold_free(gw, h);	/* nothing more to wait for */
		return;
	}
	if (t->tcp_flags & TH_ACK) {
		size_t before = h->kept.len;

		nfq_kept_ack(&h->kept, t->tcp_ack);
		/* the server takes what is kept: the rest has as long again */
		if (h->kept.len < before)
			h->verify_due = h->kept.n > 0 ? now + GW_VERIFY_MS : 0;
	}
	/* a copy changes the mark once, not once for each copy after */
	if (!pkt->copy || !h->marked)
		h->marked = proof_mark(gw, pkt, h, hold_mark(h)) &&
		    pkt->copy && h->kept.n == 0;
	if ((t->tcp_flags & TH_RST) || (h->fin && h->kept.n == 0)) {
		hold_free(gw, h);	/* nothing more to wait for */
		return;
	}
	if (h->paused && (sb = gw_sandbox_by_ifindex(gw, h->key.ifindex)) !=
	    NULL)
		http_step(gw, sb, h, now);	/* room again */
}

/* A copy of a server's packet under the verify mark (the ruleset's NFLOG
 * rule): only its headers, for the ACK. */
static int
on_proof(void *arg, const struct nfq_packet *pkt)
{
	struct gw *gw = arg;
	struct nfq_tuple t;

	gw_copy_seen(gw, pkt);
	if (nfq_packet_parse_head(pkt->payload, pkt->len, &t) !=
	    NFQ_PARSE_OK || t.proto != IPPROTO_TCP)
		return 0;
	verify_reply(gw, pkt, &t, false, gw_now_ms());
	return 0;
}

int
gw_verify_open(struct gw *gw, char *err, size_t errlen)
{
	if (!gw->verify_copies)
		return 0;
	if ((gw->vlog = nfq_nflog_open(GW_VERIFY_GROUP, NFQ_NFLOG_HEADERS,
	    err, errlen)) == NULL)
		return -1;
	if ((gw->ctmark = nfq_ctmark_open(err, errlen)) == NULL) {
		nfq_nflog_close(gw->vlog);
		gw->vlog = NULL;
		return -1;
	}
	return 0;
}

void
gw_verify_read(struct gw *gw)
{
	if (gw->vlog != NULL && nfq_nflog_recv(gw->vlog, on_proof, gw) == -1)
		log_warn("server packets' copies: receive");
}

void
gw_verify_refusals(struct gw *gw)
{
	if (gw->ctmark != NULL &&
	    nfq_ctmark_refusals(gw->ctmark, on_refusal, gw) == -1)
		log_warn("conntrack marks: receive");
}

void
gw_verify_drain(struct gw *gw)
{
	int i;

	for (i = 0; gw->vlog != NULL && i < GW_COPIES_DRAIN_READS; i++)
		if (nfq_nflog_recv(gw->vlog, on_proof, gw) <= 0 ||
		    nfq_nflog_drained(gw->vlog))
			break;
}

void
gw_verify_settle(struct gw *gw)
{
	size_t i;

	if (gw->nlater == 0)
		return;
	/* the hellos' copies first; their SYNs' reads of server copies may
	 * put more off, taken in turn */
	(void)gw_fastsyn_drain(gw);
	for (i = 0; i < gw->nlater; i++) {
		struct gw_later *l = &gw->later[i];

		l->t.l4_payload = l->t.l4_len > 0 ? l->head : NULL;
		verify_reply(gw, &l->pkt, &l->t, true, gw_now_ms());
	}
	gw->nlater = 0;
}

void
gw_verify_close(struct gw *gw)
{
	nfq_nflog_close(gw->vlog);
	gw->vlog = NULL;
	nfq_ctmark_close(gw->ctmark);
	gw->ctmark = NULL;
}

void
gw_inspect_packet(struct gw *gw, const struct nfq_packet *pkt,
    const struct nfq_tuple *t, uint64_t now)
{
	struct gw_sandbox *sb = gw_sandbox_by_ifindex(gw, pkt->indev);
	struct nfq_flow_key key;
	struct hold *h;
	bool copies_read = true;

	if (sb == NULL && (pkt->mark & GW_MARK_MASK) == GW_MARK_VERIFY) {
		verify_reply(gw, pkt, t, false, now);
		return;
	}
	flow_key(pkt, t, &key);
	h = hold_find(gw->holds, &key);
	if (h != NULL && gw->vlog != NULL && hold_mark(h) == GW_MARK_VERIFY) {
		/* what the client answers, the server sent: it was copied
		 * before it went on, so the proof may be waiting unread.
		 * Read all first (a batch could stop short of it); the
		 * client's packet then meets the state the proof left,
		 * which may have freed the hold */
		gw_verify_drain(gw);
		gw_verify_settle(gw);
		h = hold_find(gw->holds, &key);
	}
	if (h != NULL && gw->ksni_rules && h->kind == HOLD_TLS &&
	    !h->verifying && !pkt->copy) {
		/* the kernel may have let a hello of this connection out,
		 * copied before it went on: read it before what follows
		 * it, or this packet's bytes would be taken for the
		 * flight's first */
		(void)gw_fastsyn_drain(gw);
		gw_verify_settle(gw);
		h = hold_find(gw->holds, &key);
	}
	if (h != NULL && h->stale && sb != NULL) {
		if ((t->tcp_flags & TH_RST) && t->l4_len == 0) {
			/* the client resets what the server answered instead
			 * of a SYN-ACK, an ACK of the older connection (Linux
			 * does, in SYN-SENT): the reset goes on, so that the
			 * server lets that connection go and the client's
			 * next SYN finds it gone. The attempt's row is its
			 * SYN's (no byte was taken while stale) */
			log_cut(gw, sb, h, GW_R_NO_INSPECTION_STATE);
			if (nfq_queue_verdict(gw->queue, pkt->id, NF_ACCEPT,
			    true, GW_MARK_INSPECT) == -1)
				log_warn("verdict");
			hold_free(gw, h);
			return;
		}
		if (t->l4_len > 0 && !(t->tcp_flags & TH_RST)) {
			refuse_stale(gw, sb, h, pkt);
			return;
		}
	}
	if (h == NULL && gw->nflog != NULL) {
		/*
		 * A SYN the kernel accepted: its copy was in the socket
		 * before the SYN left, so it is there to read now — if every
		 * copy is read. One batch is not enough: a sandbox that
		 * floods the set with SYNs first puts its new connection's
		 * copy behind them, and its first flight would meet the flow
		 * table's entry for the old connection on that 5-tuple (found
		 * by review, 2026-11-30). A packet with bytes the server can
		 * take needs its SYN-ACK, so its SYN had passed, copied: when
		 * the socket is read dry and no copy was lost, a new
		 * connection's SYN has been decided, and has removed that
		 * entry. When not, the entry is not trusted.
		 */
		copies_read = gw_fastsyn_drain(gw);
		gw_verify_settle(gw);
		h = hold_find(gw->holds, &key);
	}
	if (h == NULL) {
		struct nfq_flow *fl = nfq_flows_lookup(gw->flows, &key, now);

		/* just decided: follows its verdict. That is an allow, or
		 * a denial of a SYN the kernel-SYN set let through (its copy
		 * was decided otherwise): the connection is refused at its
		 * first byte, and the copy's row is its only one */
		if (fl != NULL && fl->flight && (!copies_read ||
		    t->proto != IPPROTO_TCP || (t->tcp_flags & TH_SYN) ||
		    t->tcp_seq - fl->tag >= 0x80000000u))
			fl = NULL;	/* not behind the decided flight */
		if (fl != NULL) {
			if (fl->reset_server && t->proto == IPPROTO_TCP) {
				/* nothing passed since the SYN: the server
				 * expects the byte after it */
				uint32_t seq = fl->tag + 1;

				if (reset_to(gw, &key, &seq, 1))
					fl->reset_server = false;
			}
			if (nfq_queue_verdict(gw->queue, pkt->id, fl->verdict,
			    true, fl->mark) == -1)
				log_warn("verdict");
			return;
		}
	}
	if (h == NULL && sb != NULL && t->proto == IPPROTO_TCP &&
	    t->l4_len == 0) {
		/* no bytes: the ACKs and FIN that end a connection whose
		 * state is already gone carry nothing to inspect */
		if (nfq_queue_verdict(gw->queue, pkt->id, NF_ACCEPT, true,
		    GW_MARK_INSPECT) == -1)
			log_warn("verdict");
		return;
	}
	if (h == NULL || sb == NULL || t->proto != IPPROTO_TCP) {
		struct gw_decision d = { GW_DENY, GW_R_NO_INSPECTION_STATE,
		    NULL, NULL, "", 0 };

		/* fail closed: nothing to decide this packet by */
		log_debug("no inspection state: flags 0x%x len %zu", t->tcp_flags,
		    t->l4_len);
		if (h != NULL) {
			add_id(gw, h, pkt->id);
			reject(gw, h);
			hold_free(gw, h);
		} else {
			/* a row each, so each is charged to the sandbox's
			 * rate like a new flow: a stream of them cannot fill
			 * the log either */
			if (!(t->tcp_flags & (TH_RST | TH_FIN)) &&
			    t->l4_len > 0) {
				if (sb != NULL && !gw_limit_conn(gw, sb, now))
					(void)gw_limit_log_flow(gw, sb, t,
					    GW_LIMIT_CONN, now);
				else {
					(void)gw_log_flow(gw, sb, t, &d, NULL);
					reset_stateless(gw, sb, &key, t);
				}
			}
			(void)nfq_queue_verdict(gw->queue, pkt->id, NF_REPEAT,
			    true, GW_MARK_DENY);
		}
		return;
	}
	if (urgent(gw, sb, h, pkt, t))
		return;
	if (h->verifying && h->kind == HOLD_TLS) {
		verify_client(gw, sb, h, pkt, t);
		return;
	}
	h->last_ms = now;
	classify(gw, h, pkt, now);
	if (t->tcp_flags & TH_RST) {
		/* the client gives up: nothing more to decide (what it
		 * sent of its first flight is dropped undecided) */
		add_id(gw, h, pkt->id);
		log_cut(gw, sb, h, GW_R_HOLD_TIMEOUT);
		reject(gw, h);
		hold_free(gw, h);
		return;
	}
	if (t->l4_len == 0 && !(t->tcp_flags & TH_FIN)) {
		/* a bare ACK or a repeated SYN carries nothing to read */
		if (nfq_queue_verdict(gw->queue, pkt->id, NF_ACCEPT, true,
		    hold_mark(h)) == -1)
			log_warn("verdict");
		return;
	}
	if (!take(gw, sb, h, pkt, t, now))
		return;
	if (t->l4_len > 0)
		step(gw, sb, h, now);
	if (!h->used || h->key.ifindex != key.ifindex)
		return;		/* decided and freed by step */
	if ((t->tcp_flags & TH_FIN) && h->nids > 0 &&
	    h->reasm->contiguous == 0 && !h->paused &&
	    (h->kind == HOLD_TLS ? !h->logged : !nfq_http_in_head(h->http))) {
		/* the client closes with nothing undecided: let the FIN
		 * through; a flow that never sent a byte is logged as the
		 * SYN was decided. Framing the server has not acknowledged
		 * yet keeps it here until it has. */
		if (!h->logged)
			log_hold(gw, sb, h, &h->syn, NULL, NULL);
		release(gw, h, hold_mark(h));
		if (hold_mark(h) == GW_MARK_VERIFY)
			h->fin = true;
		else
			hold_free(gw, h);
	}
}

/*
 * A copy of a first flight the kernel let out (--kernel-sni): one segment
 * holding a whole ClientHello whose (sandbox, destination, port, name) was
 * allowed through the queue before, while that binding lives. It is read
 * and decided as if it had been queued, with every check take() makes, and
 * logged; allowed, the connection waits for the server's proof as any
 * other (the ruleset gave it the verify mark). What sluiced would not have
 * let out is overruled: the connection is reset (overrule). The copy was
 * in the socket before the segment went on, so nothing of the server's
 * answer or the client's next bytes is read before it (the drains in
 * verify_reply and gw_inspect_packet).
 */
void
gw_inspect_approved(struct gw *gw, const struct nfq_packet *pkt,
    const struct nfq_tuple *t, uint64_t now)
{
	struct gw_sandbox *sb = gw_sandbox_by_ifindex(gw, pkt->indev);
	struct nfq_flow_key key;
	struct nfq_tcp_opts o;
	struct hold *h;

	gw->ksni_copies++;
	flow_key(pkt, t, &key);
	h = hold_find(gw->holds, &key);
	if (h == NULL || sb == NULL) {
		struct gw_decision d = { GW_DENY, GW_R_NO_INSPECTION_STATE,
		    NULL, NULL, "", 0 };

		/* no SYN seen (its copy lost, a restart in between): the
		 * connection is ended as one refused for want of state */
		gw->ksni_overruled++;
		log_warnx("a first flight to port %u the kernel let out has no "
		    "inspection state: connection reset", t->dport);
		if (gw->ctmark != NULL)
			(void)nfq_ctmark_post(gw->ctmark, IPPROTO_TCP,
			    t->saddr, t->sport, t->daddr, t->dport,
			    GW_MARK_DENY, GW_MARK_MASK);
		(void)gw_log_flow(gw, sb, t, &d, NULL);
		reset_stateless(gw, sb, &key, t);
		gw_ksni_clear(gw);
		return;
	}
	nfq_tcp_options(t->tcp_opts, t->tcp_optlen, &o);
	h->last_ms = now;
	/* only the flight's first bytes, at the stream's start, in one
	 * plain segment: anything else the server may read otherwise. Asked
	 * before the timestamp below: the newest one sluiced saw may be of a
	 * segment it holds, which the server never had, so that the server
	 * takes what is taken here for one it drops (found by review,
	 * 2026-12-03) */
	if (h->kind != HOLD_TLS || h->stale || h->verifying || h->data ||
	    h->nids > 0 || t->tcp_seq != h->reasm->base ||
	    (t->tcp_flags & TH_URG) || o.signature || o.malformed ||
	    t->ip_hlen > 20) {
		overrule(gw, sb, h, GW_R_MALFORMED_TLS, NULL);
		return;
	}
	if (t->l4_len > 0 && h->ts_on &&
	    (!o.has_ts || (int32_t)(o.tsval - h->ts_max) < 0)) {
		/* PAWS drops it at the server, as take() does here: it is
		 * not in the stream, and the client sends it again (queued:
		 * the connection has the verify mark now). Nothing of the
		 * flight was held, so the newest timestamp seen is one the
		 * server saw too (the handshake's) */
		gw->ksni_unread++;
		return;
	}
	if (o.has_ts && (int32_t)(o.tsval - h->ts_max) > 0)
		h->ts_max = o.tsval;
	h->kernel = true;
	h->data = true;
	if (nfq_reasm_add(h->reasm, t->tcp_seq, t->l4_payload, t->l4_len) !=
	    NFQ_REASM_OK) {
		overrule(gw, sb, h, GW_R_HOLD_OVERFLOW, NULL);
		return;
	}
	classify(gw, h, pkt, now);
	tls_step(gw, sb, h, now);
}

/*
 * An HTTP connection's bare ACKs pass in the kernel (ruleset.c), so a long
 * download shows sluiced no packet of the client's: before forgetting a
 * connection idle for --http-idle, conntrack is asked whether it counted
 * any packet of it, either way, since it was last asked. The first time
 * there is nothing to compare with, so it is kept: a silent connection is
 * forgotten between one and two idle periods after its last packet. If
 * conntrack has no such connection, or cannot say, it is forgotten at
 * once (its next packet is refused).
 */
static bool
still_in_use(struct gw *gw, struct hold *h)
{
	struct nfq_ct_end e;
	uint64_t n;
	int rc;

	if (gw->ct == NULL)
		return false;
	rc = nfq_ct_get(gw->ct, IPPROTO_TCP, h->key.saddr, h->key.sport,
	    h->key.daddr, h->key.dport, &e);
	if (rc == -1)
		log_warn("idle connection: asking conntrack");
	if (rc != 1)
		return false;
	n = e.packets_orig + e.packets_reply;
	if (h->ct_asked && n == h->ct_packets)
		return false;
	h->ct_asked = true;
	h->ct_packets = n;
	return true;
}

static uint64_t
idle_ms(const struct gw *gw)
{
	return gw->cfg.http_idle != 0 ? (uint64_t)gw->cfg.http_idle * 1000 :
	    GW_HOLD_IDLE_MS;
}

/* When gw_inspect_expire has something to do for h (UINT64_MAX: never),
 * from the same conditions. */
static uint64_t
hold_due(const struct gw *gw, const struct hold *h)
{
	uint64_t due;

	if (h->nids > 0 || (h->verifying && h->kind == HOLD_TLS))
		return h->deadline != 0 ? h->deadline : UINT64_MAX;
	due = h->last_ms + idle_ms(gw);
	if (h->kind == HOLD_HTTP && h->kept.n > 0 && h->verify_due != 0 &&
	    h->verify_due < due)
		due = h->verify_due;
	if (!h->data && !h->logged &&
	    h->last_ms + GW_HOLD_SILENT_MS < due)
		due = h->last_ms + GW_HOLD_SILENT_MS;
	return due;
}

int
gw_inspect_timeout(struct gw *gw, uint64_t now)
{
	const struct gw_holds *hs = gw->holds;
	uint64_t next = UINT64_MAX, due;
	size_t k;

	for (k = 0; k < hs->n; k++)
		if ((due = hold_due(gw, &hs->h[hs->used_ix[k]])) < next)
			next = due;
	if (next == UINT64_MAX)
		return -1;
	return next <= now ? 0 : (int)(next - now > 60000 ? 60000 : next - now);
}

void
gw_inspect_expire(struct gw *gw, uint64_t now)
{
	struct gw_holds *hs = gw->holds;
	size_t k;

	/* backwards: freeing one moves the last (already seen) into its
	 * place */
	for (k = hs->n; k-- > 0; ) {
		struct hold *h = &hs->h[hs->used_ix[k]];
		struct gw_sandbox *sb;

		sb = gw_sandbox_by_ifindex(gw, h->key.ifindex);
		if (h->deadline != 0 && h->deadline <= now && h->nids > 0) {
			deny_hold(gw, sb, h, GW_R_HOLD_TIMEOUT, NULL, NULL);
			continue;
		}
		if (h->verifying && h->kind == HOLD_TLS) {
			if (h->deadline != 0 && h->deadline <= now)
				expire_proof(gw, sb, h);
			continue;
		}
		if (h->kind == HOLD_HTTP && h->kept.n > 0 &&
		    h->verify_due != 0 && h->verify_due <= now) {
			expire_proof(gw, sb, h);
			continue;
		}
		/* a decided (HTTP) connection between requests: asked
		 * about; one that never sent its first flight is not */
		if (h->nids == 0 && h->logged &&
		    h->last_ms + idle_ms(gw) <= now && still_in_use(gw, h)) {
			h->last_ms = now;
			continue;
		}
		if (h->nids == 0 && (h->last_ms + idle_ms(gw) <= now ||
		    (!h->data &&
		    !h->logged && h->last_ms + GW_HOLD_SILENT_MS <= now))) {
			/* an idle connection: forget it; its next packet
			 * finds no state and is refused */
			if (!h->logged && sb != NULL)
				log_hold(gw, sb, h, &h->syn, NULL, NULL);
			hold_free(gw, h);
		}
	}
}

/*
 * A sandbox goes: its flows under inspection get their rows first, while
 * its name and policy are there — the SYN's decision for one that sent
 * nothing yet, unknown_sandbox for one whose flight was cut short — and
 * then go, their held packets dropped.
 */
void
gw_inspect_forget_sandbox(struct gw *gw, struct gw_sandbox *sb)
{
	size_t k;

	for (k = 0; gw->holds != NULL && k < gw->holds->n; k++) {
		struct hold *h = &gw->holds->h[gw->holds->used_ix[k]];

		if (h->key.ifindex == sb->ifindex)
			log_cut(gw, sb, h, GW_R_UNKNOWN_SANDBOX);
	}
	gw_inspect_forget_ifindex(gw, sb->ifindex);
}

void
gw_inspect_forget_ifindex(struct gw *gw, uint32_t ifindex)
{
	size_t k;

	gw_limits_forget(gw, ifindex);
	if (gw->holds == NULL)
		return;
	for (k = gw->holds->n; k-- > 0; ) {
		struct hold *h = &gw->holds->h[gw->holds->used_ix[k]];

		if (h->key.ifindex == ifindex) {
			if (h->nids > 0)
				(void)verdict_held(h, h->nids, NF_DROP, false,
				    0);
			hold_free(gw, h);
		}
	}
}

/* The hold of the connection e names (its sandbox's side), or NULL. */
static struct hold *
hold_of(struct gw *gw, const struct gw_sandbox *sb, const struct nfq_ct_end *e)
{
	struct nfq_flow_key key;

	if (gw->holds == NULL || e->proto != IPPROTO_TCP)
		return NULL;
	gw_ct_flow_key(sb, e, &key);
	return hold_find(gw->holds, &key);
}

bool
gw_inspect_undecided(struct gw *gw, const struct gw_sandbox *sb,
    const struct nfq_ct_end *e)
{
	const struct hold *h = hold_of(gw, sb, e);

	return h != NULL && !h->logged;
}

void
gw_inspect_revoked(struct gw *gw, const struct gw_sandbox *sb,
    const struct nfq_ct_end *e)
{
	struct hold *h = hold_of(gw, sb, e);

	if (h == NULL)
		return;
	if (h->nids > 0 && verdict_held(h, h->nids, NF_DROP, false, 0) == -1)
		log_warn("verdicts for a revoked connection");
	h->nids = 0;
	hold_free(gw, h);
}

size_t
gw_inspect_count(const struct gw *gw)
{
	return gw->holds ? gw->holds->n : 0;
}
