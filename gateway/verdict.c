/* verdict.c: the decision for a new flow, given a sandbox's policy. */
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

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
	 * policy question.
	 */
	if (ctx->policy != NULL && ctx->policy->mode == POLICY_AUDIT &&
	    reason != GW_R_SPOOFED_SOURCE)
		out->verdict = GW_AUDIT;
	else
		out->verdict = GW_DENY;
}

/* What the bound names of one address say about a port. */
struct binding_check {
	const struct policy		*policy;
	uint16_t			 port;
	enum policy_name_verdict	 best;
	const struct policy_domain	*rule;
	char				 name[254];
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
check_binding(void *arg, const char *name)
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
		snprintf(bc->name, sizeof(bc->name), "%s", name);
	}
	return v == POLICY_NAME_ALLOWED;
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

	if (t->saddr != ctx->sandbox_addr) {
		deny(ctx, GW_R_SPOOFED_SOURCE, out);
		return;
	}
	/* Other sandboxes and the gateway's own addresses are never a
	 * destination, whatever the policy's CIDRs cover (the gateway's
	 * resolver is accepted by the ruleset before anything is queued). */
	if ((t->daddr & ctx->pool_mask) == ctx->pool_net) {
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
	bc.best = POLICY_NAME_NOT_ALLOWED;
	if (ctx->bindings != NULL) {
		dns_bindings_find(ctx->bindings, ctx->sandbox_id, t->daddr,
		    ctx->now_ms, check_binding, &bc);
		if (bc.name[0] != '\0')
			snprintf(out->name, sizeof(out->name), "%s", bc.name);
	}
	if (bc.best == POLICY_NAME_ALLOWED) {
		out->verdict = GW_ALLOW;
		out->reason = GW_R_ALLOWED_DOMAIN;
		out->rule = bc.rule->text;
		out->domain = bc.rule;
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
