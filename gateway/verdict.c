/* verdict.c: the decision for a new flow, given a sandbox's policy. */
#include <netinet/in.h>

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

void
gw_decide(const struct gw_decide_ctx *ctx, const struct nfq_tuple *t,
    struct gw_decision *out)
{
	const struct policy_cidr *c;
	bool addr_matched = false;

	out->verdict = GW_DENY;
	out->rule = NULL;

	if (t->saddr != ctx->sandbox_addr) {
		deny(ctx, GW_R_SPOOFED_SOURCE, out);
		return;
	}
	/* Other sandboxes and the gateway's own addresses are never a
	 * destination, whatever the policy's CIDRs cover. */
	if ((t->daddr & ctx->pool_mask) == ctx->pool_net) {
		deny(ctx, GW_R_INTERNAL_DEST, out);
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
	deny(ctx, addr_matched ? GW_R_PORT_NOT_ALLOWED : GW_R_NOT_ALLOWLISTED,
	    out);
}
