/* dns.h: DNS names as sluice's policies and resolver see them. */
#ifndef SLUICE_DNS_H
#define SLUICE_DNS_H

#include <stdbool.h>
#include <stddef.h>

#define DNS_NAME_MAX	253	/* presentation form, no trailing dot */
#define DNS_LABEL_MAX	63

/*
 * Normalises a host name in presentation form into out (at least
 * DNS_NAME_MAX + 1 bytes): lower case, one trailing dot removed. Accepts
 * LDH labels (letters, digits, hyphen, not at a label's ends; '_' allowed
 * for service labels), 1..63 bytes each, 253 in all. Returns true if valid;
 * on false, *why (if not NULL) points to a static description.
 */
bool dns_name_normalize(const char *in, size_t len, char *out,
    const char **why);

/*
 * true if name (normalised) equals pattern, or, when wildcard, is a proper
 * subdomain of pattern at any depth.
 */
bool dns_name_match(const char *name, const char *pattern, bool wildcard);

#endif
