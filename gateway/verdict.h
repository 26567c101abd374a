/* verdict.h: how sluiced decides a new flow, as a pure function. */
#ifndef SLUICE_VERDICT_H
#define SLUICE_VERDICT_H

#include <stdint.h>

#include "dns/dns.h"
#include "gateway/policy.h"
#include "nfq/nfq.h"

enum gw_verdict {
	GW_DENY = 0,	/* the default: anything not decided otherwise */
	GW_ALLOW,
	GW_AUDIT,	/* audit mode: would be denied, let through */
};

/* The fixed reason vocabulary written to flows.reason (see README). */
enum gw_reason {
	GW_R_ALLOWED_CIDR = 0,	/* an allowedCidrs entry covers address and port */
	GW_R_NOT_ALLOWLISTED,	/* no entry covers the destination address */
	GW_R_PORT_NOT_ALLOWED,	/* an entry covers the address, none the port */
	GW_R_PROTO_NOT_ALLOWED,	/* UDP, ICMP and other protocols (DNS comes later) */
	GW_R_INTERNAL_DEST,	/* the gateway itself, another sandbox, the pool */
	GW_R_SPOOFED_SOURCE,	/* source address is not the sandbox's own */
	GW_R_MALFORMED_PACKET,	/* could not be parsed */
	GW_R_UNKNOWN_SANDBOX,	/* ingress interface belongs to no sandbox */
	GW_R_LOG_UNAVAILABLE,	/* the flow could not be logged: fail closed */
	GW_R_ALLOWED_DOMAIN,	/* bound by the resolver to an allowed name */
	GW_R_NO_DNS_BINDING,	/* no resolved, allowed name for this address */
	GW_R_DENIED_DOMAIN,	/* bound only to names deniedDomains now covers */
	GW_R_DNS_BYPASS,	/* DNS (53, 853) to another resolver */
	GW_R_QUIC,		/* UDP 443: clients fall back to TCP */
	/* the first flight (inspect.c) */
	GW_R_NO_SNI,		/* a ClientHello without server_name */
	GW_R_SNI_NOT_ALLOWED,	/* its name is not allowed on this port */
	GW_R_SNI_BINDING_MISMATCH,	/* allowed, but this address is not
				 * bound to it (or its entry) here */
	GW_R_ECH,		/* encrypted ClientHello: the name is hidden */
	GW_R_MALFORMED_TLS,	/* broken, ambiguous or conflicting */
	GW_R_NOT_TLS,		/* a first payload that is no TLS handshake */
	GW_R_HOST_NOT_ALLOWED,	/* an HTTP Host not allowed on this port */
	GW_R_HOST_BINDING_MISMATCH,
	GW_R_MALFORMED_HTTP,
	GW_R_HOLD_TIMEOUT,	/* the first flight did not complete in time */
	GW_R_HOLD_OVERFLOW,	/* ... or not within the bytes/packets held */
	GW_R_HOLD_TABLE_FULL,	/* too many flows being inspected at once */
	GW_R_NO_INSPECTION_STATE,	/* a packet of an inspected flow sluiced
				 * knows nothing of (e.g. after a restart) */
	GW_R_COUNT
};

struct gw_decision {
	enum gw_verdict		 verdict;
	enum gw_reason		 reason;
	const char		*rule;	/* the policy entry's text, or NULL */
	const struct policy_domain *domain;	/* the admitting entry (allowed_domain) */
	char			 name[254];	/* the binding's name, or "" */
};

/* What the decision needs to know of the sandbox. Addresses network order. */
struct gw_decide_ctx {
	const struct policy	*policy;
	uint32_t		 sandbox_addr;	/* the sandbox's own address */
	uint32_t		 pool_net;	/* the whole sandbox pool */
	uint32_t		 pool_mask;
	struct dns_bindings	*bindings;	/* NULL: no name is bound */
	uint32_t		 sandbox_id;	/* the bindings' key */
	uint64_t		 now_ms;	/* CLOCK_MONOTONIC */
};

/*
 * Decides a new flow t coming from the sandbox described by ctx. Pure: no
 * side effects (it only reads the bindings). In audit mode a would-be denial becomes GW_AUDIT with the
 * reason it would have had.
 */
void gw_decide(const struct gw_decide_ctx *ctx, const struct nfq_tuple *t,
    struct gw_decision *out);

/* "allow", "deny", "audit". */
const char *gw_verdict_name(enum gw_verdict v);
/* "allowed_cidr", "not_allowlisted", ... (static strings). */
const char *gw_reason_name(enum gw_reason r);

#endif
