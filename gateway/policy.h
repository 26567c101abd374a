/* policy.h: a sandbox's allowlist, parsed from strict JSON, and matching against it. */
#ifndef SLUICE_POLICY_H
#define SLUICE_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define POLICY_MAX_BYTES	(1024 * 1024)	/* a larger policy file is an error */
#define POLICY_MAX_ENTRIES	100000		/* per list */
#define POLICY_ENTRY_MAX	300		/* longest entry text kept, NUL included */

/*
 * The strings of entries (name, text) belong to the policy: they stay
 * valid, unchanged, until policy_free().
 */

enum policy_mode {
	POLICY_ENFORCE = 0,
	POLICY_AUDIT,
};

/* One "sluice.allowedCidrs" entry: TCP to addr/prefix on ports lo..hi. */
struct policy_cidr {
	uint32_t	addr;		/* network byte order, host bits zero */
	uint32_t	mask;		/* network byte order */
	uint16_t	port_lo;	/* host order; 1..65535 when written, */
	uint16_t	port_hi;	/* 0..65535 for "any port" */
	const char	*text;		/* the entry as written */
};

/* One "network.allowedDomains" / "deniedDomains" entry. */
struct policy_domain {
	const char	*name;		/* lower case, no trailing dot, no "*.";
					 * "" for a bare "*" */
	bool		wildcard;	/* "*.name": every subdomain, not name */
	bool		any;		/* bare "*" (deniedDomains only) */
	uint16_t	port;		/* 0: none given */
	enum policy_inspect {
		POLICY_INSPECT_AUTO = 0,	/* 443: TLS, 80: HTTP, else none */
		POLICY_INSPECT_TLS,		/* "name:port/tls" */
		POLICY_INSPECT_HTTP,		/* "name:port/http" */
	}		inspect;
	const char	*text;		/* the entry as written */
};

struct policy_index;	/* policy.c's lookup tables and entry strings */

struct policy {
	enum policy_mode	 mode;
	struct policy_cidr	*cidrs;
	size_t			 ncidrs;
	struct policy_domain	*allowed;
	size_t			 nallowed;
	struct policy_domain	*denied;
	size_t			 ndenied;
	char			 sha256[65];	/* hex digest of text */
	char			*text;		/* the JSON as given, NUL-terminated */
	size_t			 textlen;
	struct policy_index	*index;		/* built by the parser */
};

/*
 * Parses a policy document. On success returns a new policy the caller
 * frees with policy_free(). On failure returns NULL and writes
 * "origin:line:col: message" into err (origin names the source, e.g. the
 * file name). Strict: unknown keys, duplicate keys, wrong types and bad
 * entries are errors; the position is that of the offending key or value.
 */
struct policy *policy_parse(const char *text, size_t len, const char *origin,
    char *err, size_t errlen);

/* Reads and parses a file; as policy_parse(), with origin = path. */
struct policy *policy_load(const char *path, char *err, size_t errlen);

/* NULL-safe. */
void policy_free(struct policy *p);

/*
 * First allowedCidrs entry covering TCP to daddr (network order) port dport
 * (host order), or NULL. *addr_matched (may be NULL) tells whether some
 * entry covered the address but not the port. Looked up in an index built
 * by the parser: O(prefix lengths in use x log entries), not linear.
 */
const struct policy_cidr *policy_match_cidr(const struct policy *p,
    uint32_t daddr, uint16_t dport, bool *addr_matched);

const char *policy_mode_name(enum policy_mode mode);

/* true if some allowedCidrs entry for every port (one without a port)
 * covers addr (network order). An entry with a port does not: the DNS
 * rebinding filter asks, and an address kept for a name is reachable on
 * the name's ports (found by review, 2026-12-03: "10.0.0.5:5432" let a
 * name bound to 10.0.0.5 reach it on 443 and 80). */
bool policy_covers_addr(const struct policy *p, uint32_t addr);

enum policy_name_verdict {
	POLICY_NAME_ALLOWED,		/* an allowedDomains entry admits it */
	POLICY_NAME_PORT_NOT_ALLOWED,	/* entries match the name, none the port */
	POLICY_NAME_DENIED,		/* a deniedDomains entry matches: it wins */
	POLICY_NAME_NOT_ALLOWED,	/* no entry matches */
};

/*
 * Decides name (normalised: lower case, no trailing dot) for TCP port
 * (host order), or for resolution alone when port < 0. *rule is the entry
 * that decided (the denying one, the admitting one, or for
 * PORT_NOT_ALLOWED the first that matched the name), else NULL; it points
 * into p. deniedDomains wins; a name entry without a port admits 443 and
 * 80. Where several entries fit, the first in the list decides. Hash
 * lookups of the name and of each of its parent domains: the cost grows
 * with the name's labels, not with the number of entries.
 */
enum policy_name_verdict policy_match_name(const struct policy *p,
    const char *name, int port, const struct policy_domain **rule);

/*
 * Whether some allowedDomains entry admits TCP port (host order): one
 * naming it, or one naming none for 80 and 443. When none does, no name
 * is POLICY_NAME_ALLOWED for the port. (For an entry that names no port
 * the answer is true for 80 and 443 whether or not the list has one.)
 */
bool policy_names_port(const struct policy *p, uint16_t port);

/* The longest run of taken slots in the index of allowedDomains: the most
 * a lookup probes (for the tests: names chosen to share a hash must not
 * share a cluster). */
size_t policy_probe_max(const struct policy *p);

#endif
