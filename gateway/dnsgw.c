/* dnsgw.c: what sluice's resolver answers — the policy side of dns/resolver.c. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "gateway/addr.h"
#include "gateway/capture.h"
#include "gateway/gw.h"
#include "gateway/log.h"
#include "gateway/verdict.h"

/* What the policy said about one query, kept in dns_request.user until
 * the query's row is written. */
struct note {
	struct gw_sandbox	*sb;		/* NULL: no sandbox's interface */
	uint32_t		 slot;
	const char		*verdict;
	const char		*reason;
	char			 rule[POLICY_ENTRY_MAX];
	char			 answers[400];
	char			 stripped[200];
	char			 sandbox[GW_NAME_MAX + 1];
	char			 sha256[65];
	bool			 unlogged;	/* rate-limited, counted for the
						 * summary row (limits.c) */
};

_Static_assert(sizeof(struct note) <= sizeof(((struct dns_request *)0)->user),
    "struct note must fit in dns_request.user");

static struct note *
note_of(struct dns_request *req)
{
	return (struct note *)(void *)req->user.bytes;
}

static enum dns_action
dns_query(void *arg, struct dns_request *req, unsigned *rcode)
{
	struct gw *gw = arg;
	struct note *n = note_of(req);
	struct gw_dns_decision dd;

	/* field by field: the note is a kilobyte and a half */
	n->sb = NULL;
	n->slot = 0;
	n->reason = NULL;
	n->rule[0] = n->answers[0] = n->stripped[0] = '\0';
	n->sandbox[0] = n->sha256[0] = '\0';
	n->unlogged = false;
	n->verdict = "deny";
	n->sb = gw_sandbox_by_ifindex(gw, req->ifindex);
	if (n->sb == NULL) {
		n->reason = "unknown_sandbox";
		*rcode = DNS_R_REFUSED;
		return DNS_ANSWER;
	}
	n->slot = n->sb->slot;
	gw_strcopy(n->sandbox, sizeof(n->sandbox), n->sb->name);
	gw_strcopy(n->sha256, sizeof(n->sha256), n->sb->policy->sha256);
	if (!gw_limit_dns(gw, n->sb, gw_now_ms())) {
		/* over the sandbox's rate: refused before anything else,
		 * so that a flood costs little; logged only in part */
		n->reason = "rate_limited";
		gw_limit_rule_text(gw, GW_LIMIT_DNS, n->rule, sizeof(n->rule), 0);
		n->unlogged = !gw_limit_log_dns(gw, n->sb, req, gw_now_ms());
		*rcode = DNS_R_REFUSED;
		return DNS_ANSWER;
	}
	/* a query that cannot be logged is not answered either */
	if (!store_has_room(gw->store, 2) || !store_writable(gw->store)) {
		n->reason = "log_unavailable";
		*rcode = DNS_R_SERVFAIL;
		return DNS_ANSWER;
	}
	/* a TCP connection beyond the resolver's bound: its queries (or,
	 * if it sent none, the connection) are refused, and on record */
	if (req->over_limit) {
		n->reason = "tcp_conn_limit";
		*rcode = DNS_R_REFUSED;
		return DNS_ANSWER;
	}
	if (req->perr != DNS_PARSE_OK) {
		n->reason = "malformed";
		return DNS_ANSWER;		/* FORMERR */
	}
	gw_dns_decide(n->sb->policy, req->name, req->name_ok, req->q.qtype,
	    req->q.qclass, &dd);
	n->verdict = dd.verdict;
	n->reason = dd.reason;
	if (dd.rule != NULL)
		gw_strcopy(n->rule, sizeof(n->rule), dd.rule);
	if (dd.action == GW_DNS_FORWARD)
		return DNS_FORWARD;
	*rcode = dd.rcode;
	return DNS_ANSWER;
}

static void
dns_response(void *arg, struct dns_request *req, struct dns_response *r,
    unsigned *rcode)
{
	struct gw *gw = arg;
	struct note *n = note_of(req);
	size_t nhost;
	const uint32_t *host = gw_hostaddrs_list(gw, &nhost);
	struct gw_dns_limits lim = {
		.ttl_min = gw->cfg.dns_ttl_min,
		.ttl_max = gw->cfg.dns_ttl_max,
		.grace = gw->cfg.dns_grace,
		.pool_net = gw->pool_net,
		.pool_mask = gw->pool_mask,
		.uplink = { gw->uplink[0], gw->uplink[1] },
		.host_addrs = host,
		.nhost_addrs = nhost,
	};
	bool limited;

	if (r == NULL) {
		n->reason = "upstream_failed";
		*rcode = DNS_R_SERVFAIL;
		return;
	}
	if (gw_sandbox_by_ifindex(gw, req->ifindex) != n->sb) {
		/* deleted while the query was upstream: its policy is gone,
		 * and a binding now would outlive it in its slot */
		n->sb = NULL;
		n->reason = "unknown_sandbox";
		n->verdict = "deny";
		*rcode = DNS_R_REFUSED;
		r->nrr = 0;
		return;
	}
	/* the answer goes out before dns_done queues its row: the room
	 * seen at dns_query may have gone while the question was upstream
	 * (workers queue flow rows meanwhile). Checked again here, under
	 * the same hold of gw->lock as the put, so the room cannot shrink
	 * in between (the writer only frees it): an answer that could not
	 * be logged is not given, and binds nothing */
	if (!store_has_room(gw->store, 1)) {
		n->reason = "log_unavailable";
		n->verdict = "deny";
		*rcode = DNS_R_SERVFAIL;
		r->nrr = 0;
		return;
	}
	/* an error is passed on without records (gw_dns_filter drops
	 * them); one other than NXDOMAIN is the upstream failing */
	*rcode = gw_dns_rcode(r);
	if (*rcode == DNS_R_SERVFAIL)
		n->reason = "upstream_failed";
	limited = gw_dns_filter(n->sb->policy, gw->bindings, n->slot, &lim,
	    req->name, r, gw_now_ms(), n->answers, sizeof(n->answers),
	    n->stripped, sizeof(n->stripped));
	if (limited && n->answers[0] == '\0') {
		/* fail closed: nothing could be bound */
		n->reason = "binding_limit";
		n->verdict = "deny";
		*rcode = DNS_R_SERVFAIL;
		r->nrr = 0;
	}
}

static void
dns_done(void *arg, struct dns_request *req, int rcode)
{
	struct gw *gw = arg;
	struct note *n = note_of(req);
	struct store_dns d;
	char tbuf[16], rbuf[16];

	/* every field is set below (no memset: the row is 1.4 KB) */
	d.ts_us = store_now_us();
	gw_strcopy(d.sandbox, sizeof(d.sandbox), n->sandbox);
	d.proto = req->tcp ? "tcp" : "udp";
	gw_addr_str(req->src_addr, d.src_ip);
	d.src_port = req->src_port;
	d.qname[0] = d.qtype[0] = '\0';
	if (req->perr == DNS_PARSE_OK) {
		gw_strcopy(d.qname, sizeof(d.qname), req->q.qname);
		gw_strcopy(d.qtype, sizeof(d.qtype),
		    dns_type_str(req->q.qtype, tbuf, sizeof(tbuf)));
	}
	d.rcode = rcode < 0 ? "" : dns_rcode_str((unsigned)rcode, rbuf, sizeof(rbuf));
	/* rcode names beyond the static ones land in rbuf: keep a copy */
	if (d.rcode == rbuf)
		d.rcode = "OTHER";
	d.verdict = n->verdict ? n->verdict : "deny";
	d.reason = n->reason ? n->reason : "malformed";
	gw_strcopy(d.rule, sizeof(d.rule), n->rule);
	gw_strcopy(d.answers, sizeof(d.answers), n->answers);
	gw_strcopy(d.stripped, sizeof(d.stripped), n->stripped);
	gw_strcopy(d.policy_sha256, sizeof(d.policy_sha256), n->sha256);
	gw_metrics_dns(gw->metrics, d.verdict);
	/* a rate-limited query past its second's rows has none: it is
	 * counted in the summary row instead (limits.c) */
	if (!n->unlogged && store_put_dns(gw->store, &d) == -1)
		gw->denied_unlogged++;
	/* a refused name goes into the sandbox's pcap too, re-encoded from
	 * the parsed question (the resolver does not keep the raw bytes) */
	if (gw->capture != NULL && n->sb != NULL && !n->unlogged &&
	    req->perr == DNS_PARSE_OK && strcmp(d.verdict, "deny") == 0) {
		uint8_t msg[DNS_NAME_MAX + 64];
		int len = dns_write_query(msg, sizeof(msg), req->q.id,
		    req->q.qname, req->q.qtype, req->q.qclass);

		if (len > 0)
			gw_capture_dns(gw->capture, n->sandbox, req->src_addr,
			    req->src_port, req->dst_addr, 53, msg, (size_t)len,
			    d.ts_us);
	}
}

/* Queries the kernel dropped before the resolver read them: no row can
 * say what they were, so they are counted in lost_records. */
static void
dns_lost(void *arg, uint64_t n)
{
	struct gw *gw = arg;

	store_count_dns_dropped(gw->store, n);
}

static const struct dns_resolver_ops ops = {
	.query = dns_query,
	.response = dns_response,
	.done = dns_done,
	.lost = dns_lost,
};

int
gw_dns_open(struct gw *gw, char *err, size_t errlen)
{
	static const struct dns_bindings_bounds bounds = GW_BINDINGS_BOUNDS;
	uint32_t up[DNS_UPSTREAM_MAX];
	size_t i;

	for (i = 0; i < gw->cfg.ndns; i++) {
		struct in_addr a;

		if (inet_pton(AF_INET, gw->cfg.dns_upstream[i], &a) != 1) {
			snprintf(err, errlen, "--dns-upstream %s: not an IPv4 "
			    "address", gw->cfg.dns_upstream[i]);
			return -1;
		}
		up[i] = a.s_addr;
	}
	gw->bindings = dns_bindings_new(&bounds);
	if (gw->bindings == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	/* every gateway address, in the gateway namespace (the caller is
	 * there): the sandbox is told apart by its ingress interface */
	gw->resolver = dns_resolver_open(htonl(INADDR_ANY), 53, up, gw->cfg.ndns,
	    &ops, gw, err, errlen);
	if (gw->resolver == NULL)
		return -1;
	if (dns_resolver_set_cache(gw->resolver, gw->cfg.dns_cache) == -1) {
		snprintf(err, errlen, "--dns-cache %u: %s", gw->cfg.dns_cache,
		    strerror(errno));
		gw_dns_close(gw);
		return -1;
	}
	return 0;
}

void
gw_dns_close(struct gw *gw)
{
	dns_resolver_close(gw->resolver);
	gw->resolver = NULL;
	dns_bindings_free(gw->bindings);
	gw->bindings = NULL;
}
