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
	GW_R_INTERNAL_DEST,	/* the gateway itself (its uplink address too),
				 * the uplink's peer, another sandbox, the pool */
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
	GW_R_IPV6,		/* IPv6 from a sandbox: never carried (ipv6.c) */
	GW_R_RATE_LIMITED,	/* over one of its sandbox's bounds (limits.c);
				 * denied in audit mode too */
	GW_R_HELLO_RETRY,	/* the server asked for a second ClientHello
				 * (a TLS 1.3 HelloRetryRequest), which is
				 * not read: the connection is cut */
	GW_R_COUNT
};

struct gw_decision {
	enum gw_verdict		 verdict;
	enum gw_reason		 reason;
	const char		*rule;	/* the policy entry's text, or NULL */
	const struct policy_domain *domain;	/* the admitting entry (allowed_domain) */
	char			 name[254];	/* the binding's name, or "" */
	uint64_t		 bound_until_ms;	/* allowed_domain: when the
						 * binding that admitted it
						 * expires (CLOCK_MONOTONIC ms) */
};

/* What the decision needs to know of the sandbox. Addresses network order. */
struct gw_decide_ctx {
	const struct policy	*policy;
	uint32_t		 sandbox_addr;	/* the sandbox's own address */
	uint32_t		 pool_net;	/* the whole sandbox pool */
	uint32_t		 pool_mask;
	uint32_t		 uplink[2];	/* the gateway's uplink address
						 * and its peer's (0: none) */
	const uint32_t		*host_addrs;	/* the host's own addresses,
						 * with the uplink through it,
						 * sorted (hostaddr.c) */
	size_t			 nhost_addrs;
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

/*
 * Decides a name presented in a flow's first flight (TLS SNI, HTTP Host)
 * for the flow from ctx->sandbox to daddr:port: it must be allowed on the
 * port, and daddr bound for this sandbox to it or to a name the same
 * allowlist entry covers — unless it equals admitted (the name an
 * established connection was let in with; NULL for none). Denials carry
 * not_allowed or mismatch. Audit mode is not applied here (the caller
 * knows whether the flow can still be let through).
 */
void gw_decide_name(const struct gw_decide_ctx *ctx, uint32_t daddr,
    uint16_t port, const char *presented, const char *admitted,
    enum gw_reason not_allowed, enum gw_reason mismatch,
    struct gw_decision *out);

/*
 * Decides a complete ClientHello (see gw_decide_name); out->name is left
 * as the caller set it.
 */
void gw_decide_hello(const struct gw_decide_ctx *ctx, uint32_t daddr,
    uint16_t port, const struct nfq_tls_hello *hello, struct gw_decision *out);

/* ---- DNS: what the resolver answers and what an answer binds ---------- */

enum gw_dns_action { GW_DNS_ANSWER, GW_DNS_FORWARD };

/* What the policy says about one query. */
struct gw_dns_decision {
	enum gw_dns_action	 action;
	unsigned		 rcode;		/* with GW_DNS_ANSWER */
	const char		*verdict;	/* "allow", "deny", "audit" */
	const char		*reason;	/* the DNS vocabulary (README) */
	const char		*rule;		/* the deciding entry, or NULL */
};

/*
 * Decides a query for name (normalised; name_ok false if the query's name
 * is no valid host name) of qtype/qclass under policy. Pure.
 */
void gw_dns_decide(const struct policy *policy, const char *name,
    bool name_ok, uint16_t qtype, uint16_t qclass, struct gw_dns_decision *out);

/* Limits for the bindings an answer makes. */
struct gw_dns_limits {
	unsigned	ttl_min, ttl_max, grace;	/* seconds */
	uint32_t	pool_net, pool_mask;		/* network order */
	uint32_t	uplink[2];	/* as in gw_decide_ctx */
	const uint32_t	*host_addrs;	/* as in gw_decide_ctx */
	size_t		 nhost_addrs;
};

/*
 * The rcode a sandbox is sent for an upstream answer r: NOERROR and
 * NXDOMAIN as they are, any other (SERVFAIL, REFUSED, NOTIMP...) as
 * SERVFAIL. Only a NOERROR answer's records are passed on (gw_dns_filter).
 */
unsigned gw_dns_rcode(const struct dns_response *r);

/*
 * Filters an upstream answer to the query for name in place and binds its
 * addresses for sandbox_id (dns_bindings_add), as the resolver does before
 * releasing it: an answer whose rcode is not NOERROR keeps no record and
 * binds nothing; of a NOERROR one only the CNAME chain from name and its A
 * records are kept; rebinding targets (private, loopback, link-local, ...,
 * the pool, the uplink's two addresses, the host's) are stripped unless the policy's
 * CIDRs cover them; TTLs are capped at ttl_max; an address that cannot be
 * bound is stripped. Kept and stripped addresses are listed
 * comma-separated in answers/stripped. Returns true if some address had to
 * be stripped for want of room in the bindings.
 */
bool gw_dns_filter(const struct policy *policy, struct dns_bindings *b,
    uint32_t sandbox_id, const struct gw_dns_limits *lim, const char *name,
    struct dns_response *r, uint64_t now_ms, char *answers, size_t alen,
    char *stripped, size_t slen);

/* How a flow's first flight is read (gw_inspect_kind). */
enum { GW_INSPECT_NONE = 0, GW_INSPECT_TLS, GW_INSPECT_HTTP };

/*
 * GW_INSPECT_TLS or _HTTP for a flow allowed by a domain entry on a port
 * read as TLS or HTTP (the entry's /tls or /http, else 443 and 80),
 * GW_INSPECT_NONE for anything decided on the address alone.
 */
int gw_inspect_kind(const struct gw_decision *d, uint16_t dport);

/* "allow", "deny", "audit". */
const char *gw_verdict_name(enum gw_verdict v);
/* "allowed_cidr", "not_allowlisted", ... (static strings). */
const char *gw_reason_name(enum gw_reason r);

#endif
