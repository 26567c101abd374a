/* dnsgw.c: what sluice's resolver answers — the policy side of dns/resolver.c. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "gateway/gw.h"
#include "gateway/log.h"

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
};

_Static_assert(sizeof(struct note) <= sizeof(((struct dns_request *)0)->user),
    "struct note must fit in dns_request.user");

static struct note *
note_of(struct dns_request *req)
{
	return (struct note *)(void *)req->user.bytes;
}

static uint64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void
append_addr(char *list, size_t len, const uint8_t a[4])
{
	size_t used = strlen(list);

	if (used + 17 >= len) {
		if (used + 4 < len && strcmp(list + used - 3, "...") != 0)
			strcat(list, ",...");
		return;
	}
	snprintf(list + used, len - used, "%s%u.%u.%u.%u", used ? "," : "",
	    a[0], a[1], a[2], a[3]);
}

/*
 * Addresses an answer may never carry to a sandbox unless the policy's
 * CIDRs name them: otherwise an allowed name under an attacker's control
 * (or a compromised record) would point the sandbox at the gateway, the
 * host, a metadata service or the local network (DNS rebinding).
 */
static bool
rebinding_target(const struct gw *gw, const uint8_t a[4])
{
	uint32_t addr;

	memcpy(&addr, a, 4);
	if ((addr & gw->pool_mask) == gw->pool_net)
		return true;
	switch (a[0]) {
	case 0: case 10: case 127:
		return true;
	case 100:
		return (a[1] & 0xc0) == 64;		/* 100.64/10, CGNAT */
	case 169:
		return a[1] == 254;			/* link-local, metadata */
	case 172:
		return (a[1] & 0xf0) == 16;		/* 172.16/12 */
	case 192:
		return a[1] == 168 ||			/* 192.168/16 */
		    (a[1] == 0 && a[2] == 0);		/* 192.0.0/24 */
	case 198:
		return a[1] == 18 || a[1] == 19;	/* 198.18/15 */
	}
	return a[0] >= 224;				/* multicast, reserved */
}

static enum dns_action
dns_query(void *arg, struct dns_request *req, unsigned *rcode)
{
	struct gw *gw = arg;
	struct note *n = note_of(req);
	const struct policy_domain *rule = NULL;
	enum policy_name_verdict v;
	bool allowed;

	memset(n, 0, sizeof(*n));
	n->verdict = "deny";
	n->sb = gw_sandbox_by_ifindex(gw, req->ifindex);
	if (n->sb == NULL) {
		n->reason = "unknown_sandbox";
		*rcode = DNS_R_REFUSED;
		return DNS_ANSWER;
	}
	n->slot = n->sb->slot;
	snprintf(n->sandbox, sizeof(n->sandbox), "%s", n->sb->name);
	snprintf(n->sha256, sizeof(n->sha256), "%s", n->sb->policy->sha256);
	/* a query that cannot be logged is not answered either */
	if (!store_has_room(gw->store, 2)) {
		n->reason = "log_unavailable";
		*rcode = DNS_R_SERVFAIL;
		return DNS_ANSWER;
	}
	if (req->perr != DNS_PARSE_OK) {
		n->reason = "malformed";
		return DNS_ANSWER;		/* FORMERR */
	}
	v = req->name_ok ? policy_match_name(n->sb->policy, req->name, -1, &rule) :
	    POLICY_NAME_NOT_ALLOWED;
	allowed = v == POLICY_NAME_ALLOWED;
	if (rule != NULL)
		snprintf(n->rule, sizeof(n->rule), "%s", rule->text);
	if (!allowed) {
		n->reason = v == POLICY_NAME_DENIED ? "denied_domain" :
		    "not_allowlisted";
		/* audit mode resolves it anyway, and says what enforce would
		 * have done; a name that is no host name is never sent on */
		if (n->sb->policy->mode != POLICY_AUDIT || !req->name_ok) {
			*rcode = DNS_R_NXDOMAIN;
			return DNS_ANSWER;
		}
		n->verdict = "audit";
	} else {
		n->verdict = "allow";
		n->reason = "allowed_domain";
	}
	if (req->q.qclass != 1) {		/* IN only */
		n->reason = "type_not_allowed";
		*rcode = DNS_R_REFUSED;
		return DNS_ANSWER;
	}
	switch (req->q.qtype) {
	case DNS_T_A:
		return DNS_FORWARD;
	case DNS_T_AAAA:
		/* no IPv6 for sandboxes: an empty answer makes clients use
		 * IPv4 at once instead of waiting */
		n->reason = "no_ipv6";
		*rcode = DNS_R_NOERROR;
		return DNS_ANSWER;
	case DNS_T_HTTPS:
	case DNS_T_SVCB:
		/* these carry ECH keys and alternative endpoints */
		n->reason = "no_svcb";
		*rcode = DNS_R_NOERROR;
		return DNS_ANSWER;
	default:
		n->reason = "type_not_allowed";
		*rcode = DNS_R_REFUSED;
		return DNS_ANSWER;
	}
}

static void
dns_response(void *arg, struct dns_request *req, struct dns_response *r,
    unsigned *rcode)
{
	struct gw *gw = arg;
	struct note *n = note_of(req);
	const char *owner = req->name;	/* the chain followed so far */
	uint64_t now = now_ms();
	size_t i, kept = 0;
	bool limited = false;

	if (r == NULL) {
		n->reason = "upstream_failed";
		*rcode = DNS_R_SERVFAIL;
		return;
	}
	if (*rcode != DNS_R_NOERROR && *rcode != DNS_R_NXDOMAIN)
		*rcode = DNS_R_SERVFAIL;
	for (i = 0; i < r->nrr; i++) {
		struct dns_rr *rr = &r->rr[i];
		uint32_t ttl = rr->ttl, addr;

		/* only records on the chain from the name asked count */
		if (!dns_name_equal(rr->name, owner) &&
		    !dns_name_equal(rr->name, req->name))
			continue;
		if (ttl > gw->cfg.dns_ttl_max)
			ttl = gw->cfg.dns_ttl_max;
		rr->ttl = ttl;
		if (rr->type == DNS_T_CNAME) {
			r->rr[kept++] = *rr;
			owner = r->rr[kept - 1].data.cname;
			continue;
		}
		if (rr->type != DNS_T_A)
			continue;
		memcpy(&addr, rr->data.a, 4);
		if (rebinding_target(gw, rr->data.a) &&
		    !policy_covers_addr(n->sb->policy, addr)) {
			append_addr(n->stripped, sizeof(n->stripped), rr->data.a);
			continue;
		}
		if (ttl < gw->cfg.dns_ttl_min)
			ttl = gw->cfg.dns_ttl_min;
		/* the binding is in place before the answer leaves: bound
		 * for the name the sandbox asked, whatever the chain */
		if (dns_bindings_add(gw->bindings, n->slot, addr, req->name, now,
		    now + ((uint64_t)ttl + gw->cfg.dns_grace) * 1000) == -1) {
			append_addr(n->stripped, sizeof(n->stripped), rr->data.a);
			limited = true;
			continue;
		}
		append_addr(n->answers, sizeof(n->answers), rr->data.a);
		r->rr[kept++] = *rr;
	}
	r->nrr = kept;
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
	struct in_addr a = { .s_addr = req->src_addr };

	memset(&d, 0, sizeof(d));
	d.ts_us = store_now_us();
	snprintf(d.sandbox, sizeof(d.sandbox), "%s", n->sandbox);
	d.proto = req->tcp ? "tcp" : "udp";
	inet_ntop(AF_INET, &a, d.src_ip, sizeof(d.src_ip));
	d.src_port = req->src_port;
	if (req->perr == DNS_PARSE_OK) {
		snprintf(d.qname, sizeof(d.qname), "%s", req->q.qname);
		snprintf(d.qtype, sizeof(d.qtype), "%s",
		    dns_type_str(req->q.qtype, tbuf, sizeof(tbuf)));
	}
	d.rcode = rcode < 0 ? "" : dns_rcode_str((unsigned)rcode, rbuf, sizeof(rbuf));
	/* rcode names beyond the static ones land in rbuf: keep a copy */
	if (d.rcode == rbuf)
		d.rcode = "OTHER";
	d.verdict = n->verdict ? n->verdict : "deny";
	d.reason = n->reason ? n->reason : "malformed";
	snprintf(d.rule, sizeof(d.rule), "%s", n->rule);
	snprintf(d.answers, sizeof(d.answers), "%s", n->answers);
	snprintf(d.stripped, sizeof(d.stripped), "%s", n->stripped);
	snprintf(d.policy_sha256, sizeof(d.policy_sha256), "%s", n->sha256);
	if (store_put_dns(gw->store, &d) == -1)
		gw->denied_unlogged++;
}

static const struct dns_resolver_ops ops = {
	.query = dns_query,
	.response = dns_response,
	.done = dns_done,
};

int
gw_dns_open(struct gw *gw, char *err, size_t errlen)
{
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
	gw->bindings = dns_bindings_new(GW_BINDINGS_MAX, GW_BINDINGS_PER_SANDBOX);
	if (gw->bindings == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	/* every gateway address, in the gateway namespace (the caller is
	 * there): the sandbox is told apart by its ingress interface */
	gw->resolver = dns_resolver_open(htonl(INADDR_ANY), 53, up, gw->cfg.ndns,
	    &ops, gw, err, errlen);
	return gw->resolver ? 0 : -1;
}

void
gw_dns_close(struct gw *gw)
{
	dns_resolver_close(gw->resolver);
	gw->resolver = NULL;
	dns_bindings_free(gw->bindings);
	gw->bindings = NULL;
}
