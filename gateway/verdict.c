/* verdict.c: the decision for a new flow, given a sandbox's policy. */
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/addr.h"
#include "gateway/verdict.h"

static const char *const reason_names[GW_R_COUNT] = {
	[GW_R_ALLOWED_CIDR] = "allowed_cidr",
	[GW_R_NOT_ALLOWLISTED] = "not_allowlisted",
	[GW_R_PORT_NOT_ALLOWED] = "port_not_allowed",
	[GW_R_PROTO_NOT_ALLOWED] = "proto_not_allowed",
	[GW_R_INTERNAL_DEST] = "internal_destination",
	[GW_R_SPOOFED_SOURCE] = "spoofed_source",
	[GW_R_MALFORMED_PACKET] = "malformed_packet",
	[GW_R_UNKNOWN_SANDBOX] = "unknown_sandbox",
	[GW_R_LOG_UNAVAILABLE] = "log_unavailable",
	[GW_R_ALLOWED_DOMAIN] = "allowed_domain",
	[GW_R_NO_DNS_BINDING] = "no_dns_binding",
	[GW_R_DENIED_DOMAIN] = "denied_domain",
	[GW_R_DNS_BYPASS] = "dns_bypass",
	[GW_R_QUIC] = "quic",
	[GW_R_NO_SNI] = "no_sni",
	[GW_R_SNI_NOT_ALLOWED] = "sni_not_allowed",
	[GW_R_SNI_BINDING_MISMATCH] = "sni_binding_mismatch",
	[GW_R_ECH] = "ech",
	[GW_R_MALFORMED_TLS] = "malformed_tls",
	[GW_R_NOT_TLS] = "not_tls",
	[GW_R_HOST_NOT_ALLOWED] = "host_not_allowed",
	[GW_R_HOST_BINDING_MISMATCH] = "host_binding_mismatch",
	[GW_R_MALFORMED_HTTP] = "malformed_http",
	[GW_R_HOLD_TIMEOUT] = "hold_timeout",
	[GW_R_HOLD_OVERFLOW] = "hold_overflow",
	[GW_R_HOLD_TABLE_FULL] = "hold_table_full",
	[GW_R_NO_INSPECTION_STATE] = "no_inspection_state",
	[GW_R_IPV6] = "ipv6",
	[GW_R_RATE_LIMITED] = "rate_limited",
	[GW_R_HELLO_RETRY] = "hello_retry",
};

const char *
gw_reason_name(enum gw_reason r)
{
	if ((unsigned)r >= GW_R_COUNT)
		return "unknown";
	return reason_names[r];
}

const char *
gw_verdict_name(enum gw_verdict v)
{
	switch (v) {
	case GW_ALLOW:
		return "allow";
	case GW_AUDIT:
		return "audit";
	case GW_DENY:
		break;
	}
	return "deny";
}

static void
deny(const struct gw_decide_ctx *ctx, enum gw_reason reason,
    struct gw_decision *out)
{
	out->reason = reason;
	out->rule = NULL;
	/*
	 * Audit mode lets the flow through but never covers up a forged
	 * source: that is an attack on the gateway's identity model, not a
	 * policy question. Nor a flow to another sandbox, the gateway or
	 * the uplink's peer: no policy may allow those, and another
	 * sandbox's isolation is not this one's policy to relax (found by
	 * review, 2026-12-03: a sandbox in audit mode reached a listener in
	 * an enforcing one, and the uplink's peer).
	 */
	if (ctx->policy != NULL && ctx->policy->mode == POLICY_AUDIT &&
	    reason != GW_R_SPOOFED_SOURCE &&
	    reason != GW_R_INTERNAL_DEST)
		out->verdict = GW_AUDIT;
	else
		out->verdict = GW_DENY;
}

/* What the bound names of one address say about a port. */
struct binding_check {
	const struct policy		*policy;
	uint16_t			 port;
	bool				 port_named;	/* by some entry */
	enum policy_name_verdict	 best;
	const struct policy_domain	*rule;
	char				 name[254];
	uint64_t			 expires_ms;	/* name's binding */
};

/* Ranks what a bound name can say, best first. */
static int
rank(enum policy_name_verdict v)
{
	switch (v) {
	case POLICY_NAME_ALLOWED:		return 0;
	case POLICY_NAME_PORT_NOT_ALLOWED:	return 1;
	case POLICY_NAME_DENIED:		return 2;
	case POLICY_NAME_NOT_ALLOWED:		break;
	}
	return 3;
}

static bool
check_binding(void *arg, const char *name, uint64_t expires_ms)
{
	struct binding_check *bc = arg;
	const struct policy_domain *rule;
	enum policy_name_verdict v;

	/* the name is checked against the policy in force now, not the one
	 * that resolved it */
	v = policy_match_name(bc->policy, name, bc->port, &rule);
	if (bc->name[0] == '\0' || rank(v) < rank(bc->best)) {
		bc->best = v;
		bc->rule = rule;
		gw_strcopy(bc->name, sizeof(bc->name), name);
		bc->expires_ms = expires_ms;
	}
	/* the best a name can say: allowed; or, when no entry names the
	 * port, port_not_allowed, and the first such name is kept anyway
	 * (a sandbox can bind hundreds of names to one address, and every
	 * SYN to it used to check them all) */
	return v == POLICY_NAME_ALLOWED ||
	    (v == POLICY_NAME_PORT_NOT_ALLOWED && !bc->port_named);
}

static bool
is_uplink(const uint32_t uplink[2], uint32_t addr)
{
	return addr != 0 && (addr == uplink[0] || addr == uplink[1]);
}

static int
cmp_addr(const void *x, const void *y)
{
	uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;

	return a < b ? -1 : a > b;
}

static bool
is_host(const uint32_t *host_addrs, size_t n, uint32_t addr)
{
	return n > 0 && bsearch(&addr, host_addrs, n, sizeof(addr),
	    cmp_addr) != NULL;
}

static bool
is_dns_port(uint16_t port)
{
	return port == 53 || port == 853;
}

void
gw_decide(const struct gw_decide_ctx *ctx, const struct nfq_tuple *t,
    struct gw_decision *out)
{
	const struct policy_cidr *c;
	struct binding_check bc;
	bool addr_matched = false;

	out->verdict = GW_DENY;
	out->rule = NULL;
	out->domain = NULL;
	out->name[0] = '\0';
	out->bound_until_ms = 0;

	if (t->saddr != ctx->sandbox_addr) {
		deny(ctx, GW_R_SPOOFED_SOURCE, out);
		return;
	}
	/* Other sandboxes and the gateway's own addresses are never a
	 * destination, whatever the policy's CIDRs cover (the gateway's
	 * resolver is accepted by the ruleset before anything is queued):
	 * the pool, the gateway's uplink address, and the uplink's peer
	 * (the host, with the default uplink, or the next hop), and with
	 * the default uplink every other address of the host: a packet to
	 * one is the host's own, not forwarded (hostaddr.c). */
	if ((t->daddr & ctx->pool_mask) == ctx->pool_net ||
	    is_uplink(ctx->uplink, t->daddr) ||
	    is_host(ctx->host_addrs, ctx->nhost_addrs, t->daddr)) {
		deny(ctx, GW_R_INTERNAL_DEST, out);
		return;
	}
	/* The gateway is the only resolver: DNS, DNS over TLS or QUIC to
	 * any other address is a bypass, even where a CIDR covers it. */
	if ((t->proto == IPPROTO_TCP || t->proto == IPPROTO_UDP) &&
	    is_dns_port(t->dport)) {
		deny(ctx, GW_R_DNS_BYPASS, out);
		return;
	}
	if (t->proto == IPPROTO_UDP && t->dport == 443) {
		deny(ctx, GW_R_QUIC, out);
		return;
	}
	if (t->proto != IPPROTO_TCP) {
		deny(ctx, GW_R_PROTO_NOT_ALLOWED, out);
		return;
	}
	c = policy_match_cidr(ctx->policy, t->daddr, t->dport, &addr_matched);
	if (c != NULL) {
		out->verdict = GW_ALLOW;
		out->reason = GW_R_ALLOWED_CIDR;
		out->rule = c->text;
		return;
	}
	memset(&bc, 0, sizeof(bc));
	bc.policy = ctx->policy;
	bc.port = t->dport;
	bc.port_named = policy_names_port(ctx->policy, t->dport);
	bc.best = POLICY_NAME_NOT_ALLOWED;
	if (ctx->bindings != NULL) {
		dns_bindings_find(ctx->bindings, ctx->sandbox_id, t->daddr,
		    ctx->now_ms, check_binding, &bc);
		if (bc.name[0] != '\0')
			gw_strcopy(out->name, sizeof(out->name), bc.name);
	}
	if (bc.best == POLICY_NAME_ALLOWED) {
		out->verdict = GW_ALLOW;
		out->reason = GW_R_ALLOWED_DOMAIN;
		out->rule = bc.rule->text;
		out->domain = bc.rule;
		out->bound_until_ms = bc.expires_ms;
		return;
	}
	if (bc.best == POLICY_NAME_PORT_NOT_ALLOWED || addr_matched) {
		deny(ctx, GW_R_PORT_NOT_ALLOWED, out);
	} else if (bc.best == POLICY_NAME_DENIED) {
		deny(ctx, GW_R_DENIED_DOMAIN, out);
		out->rule = bc.rule->text;
	} else if (ctx->policy->nallowed > 0) {
		deny(ctx, GW_R_NO_DNS_BINDING, out);
	} else {
		deny(ctx, GW_R_NOT_ALLOWLISTED, out);
	}
}

/* ---- names presented in the first flight ------------------------------ */

struct bound_check {
	const char			*name;	/* presented, normalised */
	const struct policy_domain	*entry;	/* the entry admitting it */
	uint64_t			 expires_ms;	/* of the binding found */
};

static bool
bound_ok(void *arg, const char *bound, uint64_t expires_ms)
{
	struct bound_check *bc = arg;

	/* the address must be bound to this very name, or to one the same
	 * allowlist entry covers (several names of one CDN entry) */
	if (!dns_name_equal(bound, bc->name) &&
	    !dns_name_match(bound, bc->entry->name, bc->entry->wildcard))
		return false;
	bc->expires_ms = expires_ms;
	return true;
}

void
gw_decide_name(const struct gw_decide_ctx *ctx, uint32_t daddr, uint16_t port,
    const char *presented, const char *admitted, enum gw_reason not_allowed,
    enum gw_reason mismatch, struct gw_decision *out)
{
	char name[DNS_NAME_MAX + 1];
	const struct policy_domain *entry = NULL;
	struct bound_check bc;

	out->verdict = GW_DENY;
	out->rule = NULL;
	out->domain = NULL;
	if (!dns_name_normalize(presented, strlen(presented), name, NULL) ||
	    policy_match_name(ctx->policy, name, port, &entry) !=
	    POLICY_NAME_ALLOWED) {
		out->reason = not_allowed;
		return;
	}
	bc.name = name;
	bc.entry = entry;
	bc.expires_ms = 0;
	/* an established connection keeps the name it was admitted with,
	 * even once that binding has expired: it is no new flow */
	if ((admitted == NULL || !dns_name_equal(name, admitted)) &&
	    (ctx->bindings == NULL || !dns_bindings_find(ctx->bindings,
	    ctx->sandbox_id, daddr, ctx->now_ms, bound_ok, &bc))) {
		out->reason = mismatch;
		return;
	}
	out->verdict = GW_ALLOW;
	out->reason = GW_R_ALLOWED_DOMAIN;
	out->rule = entry->text;
	out->domain = entry;
	/* 0 when the name admitted the connection before (no binding
	 * asked): nothing says how long a like one would be allowed */
	out->bound_until_ms = bc.expires_ms;
}

void
gw_decide_hello(const struct gw_decide_ctx *ctx, uint32_t daddr, uint16_t port,
    const struct nfq_tls_hello *hello, struct gw_decision *out)
{
	out->verdict = GW_DENY;
	out->rule = NULL;
	out->domain = NULL;
	if (hello->ech)
		out->reason = GW_R_ECH;
	else if (!hello->has_sni)
		out->reason = GW_R_NO_SNI;
	else
		gw_decide_name(ctx, daddr, port, hello->sni, NULL,
		    GW_R_SNI_NOT_ALLOWED, GW_R_SNI_BINDING_MISMATCH, out);
}

/* ---- DNS ------------------------------------------------------------- */

void
gw_dns_decide(const struct policy *policy, const char *name, bool name_ok,
    uint16_t qtype, uint16_t qclass, struct gw_dns_decision *out)
{
	const struct policy_domain *rule = NULL;
	enum policy_name_verdict v;

	v = name_ok ? policy_match_name(policy, name, -1, &rule) :
	    POLICY_NAME_NOT_ALLOWED;
	out->rule = rule ? rule->text : NULL;
	out->action = GW_DNS_ANSWER;
	if (v != POLICY_NAME_ALLOWED) {
		out->verdict = "deny";
		out->reason = v == POLICY_NAME_DENIED ? "denied_domain" :
		    "not_allowlisted";
		out->rcode = DNS_R_NXDOMAIN;
		/* audit mode resolves it anyway and says what enforce would
		 * have done; a name that is no host name is never sent on */
		if (policy->mode != POLICY_AUDIT || !name_ok)
			return;
		out->verdict = "audit";
	} else {
		out->verdict = "allow";
		out->reason = "allowed_domain";
	}
	if (qclass != 1) {			/* IN only */
		out->reason = "type_not_allowed";
		out->rcode = DNS_R_REFUSED;
		return;
	}
	switch (qtype) {
	case DNS_T_A:
		out->action = GW_DNS_FORWARD;
		return;
	case DNS_T_AAAA:
		/* no IPv6 for sandboxes: an empty answer makes clients use
		 * IPv4 at once instead of waiting */
		out->reason = "no_ipv6";
		out->rcode = DNS_R_NOERROR;
		return;
	case DNS_T_HTTPS:
	case DNS_T_SVCB:
		/* these carry ECH keys and alternative endpoints */
		out->reason = "no_svcb";
		out->rcode = DNS_R_NOERROR;
		return;
	default:
		out->reason = "type_not_allowed";
		out->rcode = DNS_R_REFUSED;
		return;
	}
}

static void
append_addr(char *list, size_t len, const uint8_t a[4])
{
	size_t used = strlen(list);
	uint32_t v;

	/* room for a comma, 15 characters and the terminator */
	if (used + 17 >= len) {
		if (used + 5 < len && (used < 3 || strcmp(list + used - 3, "...") != 0))
			strcat(list, ",...");
		return;
	}
	memcpy(&v, a, sizeof(v));
	if (used > 0)
		list[used++] = ',';
	gw_addr_str(v, list + used);
}

/*
 * Addresses an answer may never carry to a sandbox unless the policy's
 * CIDRs name them: otherwise an allowed name under an attacker's control
 * (or a compromised record) would point the sandbox at the gateway, the
 * host, a metadata service or the local network (DNS rebinding). The
 * gateway's uplink and its peer may be anywhere (--uplink-addr), and so
 * may the host's own addresses with the uplink through it: they are
 * named, not found among the ranges.
 */
static bool
rebinding_target(const struct gw_dns_limits *lim, const uint8_t a[4])
{
	uint32_t addr;

	memcpy(&addr, a, 4);
	if ((addr & lim->pool_mask) == lim->pool_net ||
	    is_uplink(lim->uplink, addr) ||
	    is_host(lim->host_addrs, lim->nhost_addrs, addr))
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

unsigned
gw_dns_rcode(const struct dns_response *r)
{
	if (r->rcode == DNS_R_NOERROR || r->rcode == DNS_R_NXDOMAIN)
		return r->rcode;
	return DNS_R_SERVFAIL;
}

bool
gw_dns_filter(const struct policy *policy, struct dns_bindings *b,
    uint32_t sandbox_id, const struct gw_dns_limits *lim, const char *name,
    struct dns_response *r, uint64_t now_ms, char *answers, size_t alen,
    char *stripped, size_t slen)
{
	const char *owner = name;	/* the chain followed so far */
	size_t i, kept = 0;
	bool limited = false;

	answers[0] = stripped[0] = '\0';
	/* records beside an error are no answer: an NXDOMAIN or SERVFAIL
	 * with A records binds nothing and passes nothing on */
	if (r->rcode != DNS_R_NOERROR) {
		r->nrr = 0;
		return false;
	}
	for (i = 0; i < r->nrr; i++) {
		struct dns_rr *rr = &r->rr[i];
		uint32_t ttl = rr->ttl, addr;

		/* only records on the chain from the name asked count */
		if (!dns_name_equal(rr->name, owner) &&
		    !dns_name_equal(rr->name, name))
			continue;
		if (ttl > lim->ttl_max)
			ttl = lim->ttl_max;
		rr->ttl = ttl;
		if (rr->type == DNS_T_CNAME) {
			r->rr[kept++] = *rr;
			owner = r->rr[kept - 1].data.cname;
			continue;
		}
		if (rr->type != DNS_T_A)
			continue;
		memcpy(&addr, rr->data.a, 4);
		if (rebinding_target(lim, rr->data.a) &&
		    !policy_covers_addr(policy, addr)) {
			append_addr(stripped, slen, rr->data.a);
			continue;
		}
		if (ttl < lim->ttl_min)
			ttl = lim->ttl_min;
		/* the binding is in place before the answer leaves: bound
		 * for the name the sandbox asked, whatever the chain */
		if (dns_bindings_add(b, sandbox_id, addr, name, now_ms,
		    now_ms + ((uint64_t)ttl + lim->grace) * 1000) == -1) {
			append_addr(stripped, slen, rr->data.a);
			limited = true;
			continue;
		}
		append_addr(answers, alen, rr->data.a);
		r->rr[kept++] = *rr;
	}
	r->nrr = kept;
	return limited;
}

/* Which allowed flows have their first flight read, and as what. */
int
gw_inspect_kind(const struct gw_decision *d, uint16_t dport)
{
	if (d->verdict == GW_DENY || d->reason != GW_R_ALLOWED_DOMAIN ||
	    d->domain == NULL)
		return GW_INSPECT_NONE;
	switch (d->domain->inspect) {
	case POLICY_INSPECT_TLS:
		return GW_INSPECT_TLS;
	case POLICY_INSPECT_HTTP:
		return GW_INSPECT_HTTP;
	case POLICY_INSPECT_AUTO:
		break;
	}
	if (dport == 443)
		return GW_INSPECT_TLS;
	if (dport == 80)
		return GW_INSPECT_HTTP;
	return GW_INSPECT_NONE;
}
