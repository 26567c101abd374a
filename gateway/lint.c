/* lint.c: policy entries that make an allowlist functionally open; no I/O. */
#include <arpa/inet.h>

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dns/dns.h"
#include "gateway/cli.h"
#include "gateway/policy.h"

#define NELEM(a)	(sizeof(a) / sizeof((a)[0]))

/*
 * sluiced's default --pool. A policy does not know the pool it will run
 * under; this is the one it almost always is.
 */
#define POOL_NET	0x0ad50000U	/* 10.213.0.0/16, host order */
#define POOL_BITS	16

/* Shorter prefixes than this are worth asking about whatever they cover. */
#define WIDE_BITS	8

/*
 * Relays that suggest.c does not flag: its list decides what `policy
 * suggest` leaves out with --strict, and api.github.com is too common in
 * working policies to leave out. Here it only earns a line.
 */
static const struct {
	const char	*name;
	const char	*why;
} extra_flagged[] = {
	{ "api.github.com", "serves the GitHub API — it creates gists, "
	    "readable by anyone, from whatever the sandbox sends" },
};

/* Address space that is not the public internet (host order). */
static const struct {
	uint32_t	 net;
	unsigned	 bits;
	const char	*message;
} special[] = {
	/* the /32s first: a range holding one says less about it */
	{ 0xa9fea9feU, 32, "includes the cloud metadata service "
	    "169.254.169.254: it hands out the host's credentials" },
	{ 0x646464c8U, 32, "includes a cloud metadata service "
	    "(100.100.100.200): it hands out the host's credentials" },
#define INTERNAL	", not the public internet: the sandbox can reach " \
	    "internal hosts and services there"
	{ 0x0a000000U, 8, "reaches private address space (10.0.0.0/8)"
	    INTERNAL },
	{ 0x64400000U, 10, "reaches shared address space (100.64.0.0/10, "
	    "carrier-grade NAT)" INTERNAL },
	{ 0x7f000000U, 8, "reaches loopback space (127.0.0.0/8)" INTERNAL },
	{ 0xa9fe0000U, 16, "reaches link-local space (169.254.0.0/16)"
	    INTERNAL },
	{ 0xac100000U, 12, "reaches private address space (172.16.0.0/12)"
	    INTERNAL },
	{ 0xc0a80000U, 16, "reaches private address space (192.168.0.0/16)"
	    INTERNAL },
#undef INTERNAL
};

struct lint {
	struct lint_warning	*w;
	size_t			 n;
	bool			 oom;
};

static void add(struct lint *, const char *, size_t, const char *,
    const char *, ...) __attribute__((format(printf, 5, 6)));

/* One warning about entry, the index-th of list ("network.allowedDomains"). */
static void
add(struct lint *l, const char *list, size_t index, const char *entry,
    const char *fmt, ...)
{
	struct lint_warning *w;
	va_list ap;
	char *msg;
	int n;

	if (l->oom)
		return;
	va_start(ap, fmt);
	n = vasprintf(&msg, fmt, ap);
	va_end(ap);
	if (n < 0) {
		l->oom = true;
		return;
	}
	if ((w = reallocarray(l->w, l->n + 1, sizeof(*w))) == NULL) {
		free(msg);
		l->oom = true;
		return;
	}
	l->w = w;
	w = &l->w[l->n++];
	snprintf(w->path, sizeof(w->path), "%s[%zu]", list, index);
	w->entry = entry;
	w->message = msg;
}

static bool
name_denied(const struct policy *p, const char *name)
{
	const struct policy_domain *rule;

	return policy_match_name(p, name, -1, &rule) == POLICY_NAME_DENIED;
}

/* deniedDomains covers every name that allowedDomains entry d admits. */
static bool
entry_denied(const struct policy *p, const struct policy_domain *d)
{
	const struct policy_domain *e;
	size_t i;

	if (!d->wildcard)
		return name_denied(p, d->name);
	for (i = 0; i < p->ndenied; i++) {
		e = &p->denied[i];
		if (e->any || (e->wildcard && (strcmp(d->name, e->name) == 0 ||
		    dns_name_match(d->name, e->name, true))))
			return true;
	}
	return false;
}

/*
 * Why exact name is a relay: suggest.c's flagged services, then the
 * extras. NULL if it is none.
 */
static const char *
relay_why(const char *name)
{
	const char *why;
	size_t i;

	if ((why = suggest_flag_why(name)) != NULL)
		return why;
	for (i = 0; i < NELEM(extra_flagged); i++)
		if (strcmp(name, extra_flagged[i].name) == 0)
			return extra_flagged[i].why;
	return NULL;
}

/*
 * The first relay "*.parent" admits that deniedDomains does not take
 * back, with why in *why; NULL if none.
 */
static const char *
relay_under(const struct policy *p, const char *parent, const char **why)
{
	const char *name;
	size_t i;

	for (i = 0; (name = suggest_flagged_name(i)) != NULL; i++)
		if (dns_name_match(name, parent, true) &&
		    !name_denied(p, name)) {
			*why = suggest_flag_why(name);
			return name;
		}
	for (i = 0; i < NELEM(extra_flagged); i++)
		if (dns_name_match(extra_flagged[i].name, parent, true) &&
		    !name_denied(p, extra_flagged[i].name)) {
			*why = extra_flagged[i].why;
			return extra_flagged[i].name;
		}
	return NULL;
}

/* At most one warning per entry: the broadest reason first. */
static void
lint_domain(struct lint *l, const struct policy *p, size_t i)
{
	static const char list[] = "network.allowedDomains";
	const struct policy_domain *d = &p->allowed[i];
	const char *why, *shared, *relay;

	if (d->any || entry_denied(p, d))
		return;
	if (!d->wildcard) {
		if ((why = relay_why(d->name)) != NULL)
			add(l, list, i, d->text, "%s", why);
		return;
	}
	if (suggest_public_suffix(d->name))
		add(l, list, i, d->text, "covers every name under %s, a public "
		    "suffix: anyone can register a domain there and receive "
		    "what the sandbox sends", d->name);
	else if ((why = relay_why(d->name)) != NULL)
		add(l, list, i, d->text, "%s", why);
	else if ((shared = suggest_shared_parent(d->name)) != NULL)
		add(l, list, i, d->text, "anyone can host content under %s: "
		    "the sandbox can send data to an attacker's bucket or site "
		    "there", shared);
	else if ((relay = relay_under(p, d->name, &why)) != NULL)
		add(l, list, i, d->text, "covers %s, which %s", relay, why);
}

static uint32_t
prefix_mask(unsigned bits)
{
	return bits == 0 ? 0 : 0xffffffffU << (32 - bits);
}

static unsigned
mask_bits(uint32_t mask)
{
	unsigned n = 0;

	for (; mask != 0; mask <<= 1)
		n++;
	return n;
}

/* net/bits lies within range/rbits. */
static bool
inside(uint32_t net, unsigned bits, uint32_t range, unsigned rbits)
{
	return bits >= rbits && (net & prefix_mask(rbits)) == range;
}

static bool
overlaps(uint32_t a, unsigned abits, uint32_t b, unsigned bbits)
{
	uint32_t m = prefix_mask(abits < bbits ? abits : bbits);

	return (a & m) == (b & m);
}

static void
lint_cidr(struct lint *l, const struct policy *p, size_t i)
{
	static const char list[] = "sluice.allowedCidrs";
	const struct policy_cidr *c = &p->cidrs[i];
	uint32_t net = ntohl(c->addr);
	unsigned bits = mask_bits(ntohl(c->mask));
	bool hit[NELEM(special)], any = false, covered;
	size_t j, k;

	if (inside(net, bits, POOL_NET, POOL_BITS)) {
		add(l, list, i, c->text, "never reachable: sluice always "
		    "denies the sandbox pool 10.213.0.0/16 (sluiced's default "
		    "--pool)");
		return;
	}
	for (j = 0; j < NELEM(special); j++)
		if ((hit[j] = overlaps(net, bits, special[j].net,
		    special[j].bits)))
			any = true;
	if (bits < WIDE_BITS) {
		add(l, list, i, c->text, "covers %llu addresses%s: is that "
		    "intended?", 1ULL << (32 - bits),
		    !any ? "" : hit[0] || hit[1] ? ", a cloud metadata "
		    "service and non-public address space among them" :
		    ", non-public address space among them");
		return;
	}
	for (j = 0; j < NELEM(special); j++) {
		if (!hit[j])
			continue;
		/* 169.254.169.254 is link-local too: once is enough */
		for (k = 0, covered = false; k < j && !covered; k++)
			covered = hit[k] && inside(net, bits, special[k].net,
			    special[k].bits);
		if (!covered)
			add(l, list, i, c->text, "%s", special[j].message);
	}
	if (overlaps(net, bits, POOL_NET, POOL_BITS))
		add(l, list, i, c->text, "covers the sandbox pool "
		    "10.213.0.0/16 (sluiced's default --pool): sluice always "
		    "denies it, so that part is never reachable");
}

int
lint_policy(const struct policy *p, struct lint_warning **warnings,
    size_t *nwarnings)
{
	struct lint l = { NULL, 0, false };
	size_t i;

	for (i = 0; i < p->nallowed && !l.oom; i++)
		lint_domain(&l, p, i);
	for (i = 0; i < p->ncidrs && !l.oom; i++)
		lint_cidr(&l, p, i);
	if (l.oom) {
		lint_free(l.w, l.n);
		*warnings = NULL;
		*nwarnings = 0;
		errno = ENOMEM;
		return -1;
	}
	*warnings = l.w;
	*nwarnings = l.n;
	return 0;
}

void
lint_free(struct lint_warning *warnings, size_t nwarnings)
{
	size_t i;

	if (warnings == NULL)
		return;
	for (i = 0; i < nwarnings; i++)
		free(warnings[i].message);
	free(warnings);
}
