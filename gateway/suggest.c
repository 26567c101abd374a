/* suggest.c: a policy from the names and addresses a sandbox tried; no I/O. */
#include <arpa/inet.h>

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "dns/dns.h"
#include "gateway/cli.h"
#include "gateway/policy.h"

/*
 * Invalid names are usually many variants of one mistake (or one probe):
 * the first few are worth a line each, the rest a count.
 */
#define SKIP_WARN_MAX	20
#define PRINTABLE_MAX	80	/* bytes of a raw name quoted in a warning */

enum flag {
	FLAG_NONE = 0,
	FLAG_STORAGE,
	FLAG_PASTE,
	FLAG_FILEDROP,
	FLAG_TUNNEL,
	FLAG_DOH,
	FLAG_WEBHOOK,
};

static const char *const flag_why[] = {
	[FLAG_STORAGE] = "looks like public object storage — anyone can own "
	    "a bucket there and read what the sandbox uploads",
	[FLAG_PASTE] = "looks like a public paste service — anything the "
	    "sandbox sends there is readable by anyone",
	[FLAG_FILEDROP] = "looks like a public file drop — anything the "
	    "sandbox uploads there can be downloaded by anyone",
	[FLAG_TUNNEL] = "looks like a public tunnel — it relays to whoever "
	    "runs the other end",
	[FLAG_DOH] = "looks like a DNS-over-HTTPS resolver — it resolves any "
	    "name past sluice's resolver and carries data out in its queries",
	[FLAG_WEBHOOK] = "looks like a webhook catcher — anything the sandbox "
	    "sends there is readable by whoever holds the URL",
};

/* A name is flagged if it is one of these or under one. */
static const struct {
	const char	*suffix;
	enum flag	 flag;
} flagged[] = {
	{ "s3.amazonaws.com", FLAG_STORAGE },
	{ "storage.googleapis.com", FLAG_STORAGE },
	{ "storage.cloud.google.com", FLAG_STORAGE },
	{ "blob.core.windows.net", FLAG_STORAGE },
	{ "dfs.core.windows.net", FLAG_STORAGE },
	{ "file.core.windows.net", FLAG_STORAGE },
	{ "digitaloceanspaces.com", FLAG_STORAGE },
	{ "r2.cloudflarestorage.com", FLAG_STORAGE },
	{ "backblazeb2.com", FLAG_STORAGE },
	{ "wasabisys.com", FLAG_STORAGE },
	{ "pastebin.com", FLAG_PASTE },
	{ "gist.github.com", FLAG_PASTE },
	{ "gist.githubusercontent.com", FLAG_PASTE },
	{ "hastebin.com", FLAG_PASTE },
	{ "hastebin.skyra.pw", FLAG_PASTE },
	{ "paste.ee", FLAG_PASTE },
	{ "paste.rs", FLAG_PASTE },
	{ "dpaste.com", FLAG_PASTE },
	{ "dpaste.org", FLAG_PASTE },
	{ "rentry.co", FLAG_PASTE },
	{ "termbin.com", FLAG_PASTE },
	{ "ix.io", FLAG_PASTE },
	{ "sprunge.us", FLAG_PASTE },
	{ "controlc.com", FLAG_PASTE },
	{ "justpaste.it", FLAG_PASTE },
	{ "privatebin.net", FLAG_PASTE },
	{ "bpa.st", FLAG_PASTE },
	{ "transfer.sh", FLAG_FILEDROP },
	{ "file.io", FLAG_FILEDROP },
	{ "0x0.st", FLAG_FILEDROP },
	{ "temp.sh", FLAG_FILEDROP },
	{ "filebin.net", FLAG_FILEDROP },
	{ "bashupload.com", FLAG_FILEDROP },
	{ "catbox.moe", FLAG_FILEDROP },
	{ "gofile.io", FLAG_FILEDROP },
	{ "ngrok.io", FLAG_TUNNEL },
	{ "ngrok.app", FLAG_TUNNEL },
	{ "ngrok.dev", FLAG_TUNNEL },
	{ "ngrok-free.app", FLAG_TUNNEL },
	{ "ngrok-free.dev", FLAG_TUNNEL },
	{ "trycloudflare.com", FLAG_TUNNEL },
	{ "localtunnel.me", FLAG_TUNNEL },
	{ "loca.lt", FLAG_TUNNEL },
	{ "serveo.net", FLAG_TUNNEL },
	{ "serveousercontent.com", FLAG_TUNNEL },
	{ "localhost.run", FLAG_TUNNEL },
	{ "lhr.life", FLAG_TUNNEL },
	{ "pinggy.io", FLAG_TUNNEL },
	{ "pinggy.link", FLAG_TUNNEL },
	{ "bore.pub", FLAG_TUNNEL },
	{ "loclx.io", FLAG_TUNNEL },
	{ "devtunnels.ms", FLAG_TUNNEL },
	{ "dns.google", FLAG_DOH },
	{ "dns.google.com", FLAG_DOH },
	{ "cloudflare-dns.com", FLAG_DOH },
	{ "one.one.one.one", FLAG_DOH },
	{ "dns.quad9.net", FLAG_DOH },
	{ "dns9.quad9.net", FLAG_DOH },
	{ "dns10.quad9.net", FLAG_DOH },
	{ "dns11.quad9.net", FLAG_DOH },
	{ "dns.adguard.com", FLAG_DOH },
	{ "dns.adguard-dns.com", FLAG_DOH },
	{ "dns.nextdns.io", FLAG_DOH },
	{ "dns.mullvad.net", FLAG_DOH },
	{ "dns0.eu", FLAG_DOH },
	{ "webhook.site", FLAG_WEBHOOK },
	{ "requestbin.com", FLAG_WEBHOOK },
	{ "requestbin.net", FLAG_WEBHOOK },
	{ "requestcatcher.com", FLAG_WEBHOOK },
	{ "pipedream.net", FLAG_WEBHOOK },
	{ "hookbin.com", FLAG_WEBHOOK },
	{ "beeceptor.com", FLAG_WEBHOOK },
	{ "postb.in", FLAG_WEBHOOK },
	{ "mockbin.org", FLAG_WEBHOOK },
	{ "interact.sh", FLAG_WEBHOOK },
	{ "oast.fun", FLAG_WEBHOOK },
	{ "oast.live", FLAG_WEBHOOK },
	{ "oast.me", FLAG_WEBHOOK },
	{ "oast.online", FLAG_WEBHOOK },
	{ "oast.pro", FLAG_WEBHOOK },
	{ "oast.site", FLAG_WEBHOOK },
	{ "oastify.com", FLAG_WEBHOOK },
	{ "burpcollaborator.net", FLAG_WEBHOOK },
	{ "canarytokens.com", FLAG_WEBHOOK },
	{ "dnslog.cn", FLAG_WEBHOOK },
	{ "ceye.io", FLAG_WEBHOOK },
};

/*
 * Parents shared by many unrelated owners: "*.github.io" would admit every
 * user's site. Never a wildcard, at or below these; names under them are
 * listed one by one. A small hand-picked stand-in for the Public Suffix
 * List, which a CLI should not have to download.
 */
static const char *const multi_tenant[] = {
	"amazonaws.com", "cloudfront.net", "elasticbeanstalk.com",
	"awsapprunner.com", "on.aws", "azurewebsites.net", "azureedge.net",
	"azurefd.net", "cloudapp.net", "cloudapp.azure.com",
	"azurestaticapps.net", "azurecr.io", "windows.net",
	"trafficmanager.net", "appspot.com", "googleapis.com",
	"googleusercontent.com", "cloudfunctions.net", "run.app", "web.app",
	"firebaseapp.com", "firebaseio.com", "github.io",
	"githubusercontent.com", "gitlab.io", "bitbucket.io", "pages.dev",
	"workers.dev", "r2.dev", "herokuapp.com", "herokudns.com",
	"netlify.app", "vercel.app", "now.sh", "fly.dev", "onrender.com",
	"railway.app", "glitch.me", "repl.co", "replit.dev", "deno.dev",
	"surge.sh", "fastly.net", "fastlylb.net", "akamaihd.net",
	"akamaized.net", "edgekey.net", "edgesuite.net", "blogspot.com",
	"wordpress.com", "tumblr.com", "wixsite.com", "myshopify.com",
	"ondigitalocean.app", "duckdns.org", "no-ip.org", "ddns.net",
	"dyndns.org", "hopto.org", "sslip.io", "nip.io", "xip.io",
	"eu.org", "uk.com", "us.com",
};

/* Second-level labels that registries sell under: "co.uk", "com.au". */
static const char *const registry_sld[] = {
	"ac", "co", "com", "edu", "gob", "go", "gov", "ltd", "mil", "ne",
	"net", "nic", "nom", "or", "org", "plc", "sch",
};

/* Destinations worth a second look: not the public internet. */
static const struct {
	uint32_t	 net;		/* host order */
	unsigned	 bits;
	const char	*why;
} special_ranges[] = {
	/* before the link-local and shared ranges that hold them */
	{ 0xa9fea9feU, 32, "the cloud metadata service — it hands out the "
	    "host's credentials" },
	{ 0x646464c8U, 32, "a cloud metadata service — it hands out the "
	    "host's credentials" },
#define NOT_PUBLIC	", not the public internet — check that the sandbox " \
	    "should reach it"
	{ 0x00000000U, 8, "a \"this network\" address (0.0.0.0/8)" NOT_PUBLIC },
	{ 0x0a000000U, 8, "a private address (10.0.0.0/8)" NOT_PUBLIC },
	{ 0x64400000U, 10, "a shared address (100.64.0.0/10, carrier-grade "
	    "NAT)" NOT_PUBLIC },
	{ 0x7f000000U, 8, "a loopback address (127.0.0.0/8)" NOT_PUBLIC },
	{ 0xa9fe0000U, 16, "a link-local address (169.254.0.0/16)" NOT_PUBLIC },
	{ 0xac100000U, 12, "a private address (172.16.0.0/12)" NOT_PUBLIC },
	{ 0xc0000000U, 24, "an IETF protocol address (192.0.0.0/24)"
	    NOT_PUBLIC },
	{ 0xc0a80000U, 16, "a private address (192.168.0.0/16)" NOT_PUBLIC },
	{ 0xc6120000U, 15, "a benchmarking address (198.18.0.0/15)"
	    NOT_PUBLIC },
	{ 0xe0000000U, 4, "a multicast address (224.0.0.0/4)" NOT_PUBLIC },
	{ 0xf0000000U, 4, "a reserved address (240.0.0.0/4)" NOT_PUBLIC },
#undef NOT_PUBLIC
};

#define NELEM(a)	(sizeof(a) / sizeof((a)[0]))

/* One normalised (name, port) or (address, port) seen. */
struct pair {
	char		 name[DNS_NAME_MAX + 1];
	uint16_t	 port;
};

struct addr_pair {
	uint32_t	 addr;		/* host order */
	uint16_t	 port;
};

/* One name, or one "*.parent", with every TCP port used with it. */
struct entry {
	char		 name[DNS_NAME_MAX + 1];	/* wildcard: the parent */
	bool		 wildcard;
	bool		 absorbed;	/* covered by a wildcard now */
	enum flag	 flag;
	unsigned	 labels;
	uint16_t	*ports;		/* sorted, distinct; 0: resolved only;
					 * none: resolved, its port left out */
	size_t		 nports;
};

struct builder {
	struct suggestion	*s;
	struct entry		*entries;
	size_t			 nentries;
	size_t			 cap;
	size_t			 nskipped;	/* invalid names, addresses */
	bool			 oom;
};

static void add_warning(struct builder *, const char *, ...)
    __attribute__((format(printf, 2, 3)));

static void
add_warning(struct builder *b, const char *fmt, ...)
{
	char **w, *line;
	va_list ap;
	int n;

	if (b->oom)
		return;
	va_start(ap, fmt);
	n = vasprintf(&line, fmt, ap);
	va_end(ap);
	if (n < 0) {
		b->oom = true;
		return;
	}
	w = reallocarray(b->s->warnings, b->s->nwarnings + 1, sizeof(*w));
	if (w == NULL) {
		free(line);
		b->oom = true;
		return;
	}
	w[b->s->nwarnings++] = line;
	b->s->warnings = w;
}

/* raw, recorded from a sandbox, made safe for a terminal: \xNN escapes. */
static void
printable(char *out, size_t outlen, const char *raw)
{
	static const char hex[] = "0123456789abcdef";
	size_t i, o = 0;
	unsigned char c;

	for (i = 0; raw[i] != '\0' && i < PRINTABLE_MAX; i++) {
		c = (unsigned char)raw[i];
		if (o + 5 >= outlen)
			break;
		if (c > 0x20 && c < 0x7f && c != '\\')
			out[o++] = (char)c;
		else {
			out[o++] = '\\';
			out[o++] = 'x';
			out[o++] = hex[c >> 4];
			out[o++] = hex[c & 0xf];
		}
	}
	if (raw[i] != '\0' && o + 4 < outlen) {
		memcpy(out + o, "...", 3);
		o += 3;
	}
	out[o] = '\0';
}

static void
skip_warn(struct builder *b, const char *raw, const char *why)
{
	char p[PRINTABLE_MAX * 4 + 8];

	if (b->nskipped++ >= SKIP_WARN_MAX)
		return;
	printable(p, sizeof(p), raw);
	add_warning(b, "%s: %s; left out", p, why);
}

static unsigned
count_labels(const char *name)
{
	unsigned n = 1;

	for (; *name != '\0'; name++)
		if (*name == '.')
			n++;
	return n;
}

/* name is suffix or a subdomain of it. */
static bool
at_or_under(const char *name, const char *suffix)
{
	size_t nlen = strlen(name), slen = strlen(suffix);

	if (nlen == slen)
		return strcmp(name, suffix) == 0;
	return nlen > slen && name[nlen - slen - 1] == '.' &&
	    strcmp(name + nlen - slen, suffix) == 0;
}

/* S3's regional and dual-stack endpoints put "s3" anywhere in the name. */
static bool
is_s3_endpoint(const char *name)
{
	const char *l = name;

	if (!at_or_under(name, "amazonaws.com"))
		return false;
	for (;;) {
		if (strncmp(l, "s3.", 3) == 0 || strncmp(l, "s3-", 3) == 0)
			return true;
		if ((l = strchr(l, '.')) == NULL)
			return false;
		l++;
	}
}

static enum flag
name_flag(const char *name)
{
	size_t i;

	for (i = 0; i < NELEM(flagged); i++)
		if (at_or_under(name, flagged[i].suffix))
			return flagged[i].flag;
	if (is_s3_endpoint(name))
		return FLAG_STORAGE;
	/* doh.example.net, doh-de.example.org: a DoH server by its name */
	if (strncmp(name, "doh.", 4) == 0 || strncmp(name, "doh-", 4) == 0)
		return FLAG_DOH;
	return FLAG_NONE;
}

bool
suggest_public_suffix(const char *name)
{
	const char *dot;
	size_t i;

	if ((dot = strchr(name, '.')) == NULL)
		return true;
	if (strchr(dot + 1, '.') == NULL && strlen(dot + 1) == 2)
		for (i = 0; i < NELEM(registry_sld); i++)
			if (strlen(registry_sld[i]) == (size_t)(dot - name) &&
			    strncmp(name, registry_sld[i],
			    (size_t)(dot - name)) == 0)
				return true;
	return false;
}

const char *
suggest_shared_parent(const char *name)
{
	size_t i;

	for (i = 0; i < NELEM(multi_tenant); i++)
		if (at_or_under(name, multi_tenant[i]))
			return multi_tenant[i];
	return NULL;
}

const char *
suggest_flag_why(const char *name)
{
	enum flag f = name_flag(name);

	return f == FLAG_NONE ? NULL : flag_why[f];
}

const char *
suggest_flagged_name(size_t i)
{
	return i < NELEM(flagged) ? flagged[i].suffix : NULL;
}

/*
 * May "*.parent" be suggested? Not for a TLD, a registry's second level,
 * a multi-tenant parent or anything under one, and not where a flagged
 * service lives at or below the parent: the wildcard would admit it.
 */
static bool
wildcard_ok(const char *parent)
{
	size_t i;

	if (suggest_public_suffix(parent) ||
	    suggest_shared_parent(parent) != NULL)
		return false;
	for (i = 0; i < NELEM(flagged); i++)
		if (at_or_under(parent, flagged[i].suffix) ||
		    at_or_under(flagged[i].suffix, parent))
			return false;
	return name_flag(parent) == FLAG_NONE;
}

/* The last label of [start, end). */
static const char *
last_label(const char *start, const char *end)
{
	const char *dot = memrchr(start, '.', (size_t)(end - start));

	return dot != NULL ? dot + 1 : start;
}

/*
 * Domain order: label by label from the right, a parent before its
 * subdomains. Everything under a name then follows it without a gap.
 */
static int
domain_cmp(const char *a, const char *b)
{
	const char *ae = a + strlen(a), *be = b + strlen(b), *al, *bl;
	size_t alen, blen;
	int c;

	for (;;) {
		al = last_label(a, ae);
		bl = last_label(b, be);
		alen = (size_t)(ae - al);
		blen = (size_t)(be - bl);
		if ((c = memcmp(al, bl, alen < blen ? alen : blen)) != 0)
			return c;
		if (alen != blen)
			return alen < blen ? -1 : 1;
		if (al == a || bl == b)	/* fewer labels first */
			return (bl == b) - (al == a);
		ae = al - 1;
		be = bl - 1;
	}
}

static int
pair_cmp(const void *x, const void *y)
{
	const struct pair *a = x, *b = y;
	int c;

	if ((c = domain_cmp(a->name, b->name)) != 0)
		return c;
	return (a->port > b->port) - (a->port < b->port);
}

static int
addr_pair_cmp(const void *x, const void *y)
{
	const struct addr_pair *a = x, *b = y;

	if (a->addr != b->addr)
		return a->addr < b->addr ? -1 : 1;
	return (a->port > b->port) - (a->port < b->port);
}

static int
port_cmp(const void *x, const void *y)
{
	uint16_t a = *(const uint16_t *)x, b = *(const uint16_t *)y;

	return (a > b) - (a < b);
}

static int
str_domain_cmp(const void *x, const void *y)
{
	return domain_cmp(*(const char *const *)x, *(const char *const *)y);
}

/* Output order: exact names first, more labels first, then alphabetical. */
static int
entry_out_cmp(const void *x, const void *y)
{
	const struct entry *a = x, *b = y;

	if (a->wildcard != b->wildcard)
		return a->wildcard ? 1 : -1;
	if (a->labels != b->labels)
		return a->labels > b->labels ? -1 : 1;
	return strcmp(a->name, b->name);
}

/* DNS and DoT go to the gateway's resolver only; no entry changes that. */
static bool
dns_port(uint16_t port)
{
	return port == 53 || port == 853;
}

/* Room for want entries in all; false when out of memory. */
static bool
entries_reserve(struct builder *b, size_t want)
{
	struct entry *e;

	if (want <= b->cap)
		return true;
	if ((e = reallocarray(b->entries, want, sizeof(*e))) == NULL) {
		b->oom = true;
		return false;
	}
	b->entries = e;
	b->cap = want;
	return true;
}

static struct entry *
entry_add(struct builder *b, const char *name, bool wildcard)
{
	struct entry *e;

	if (b->nentries == b->cap && !entries_reserve(b,
	    b->cap == 0 ? 64 : b->cap * 2))
		return NULL;
	e = &b->entries[b->nentries++];
	memset(e, 0, sizeof(*e));
	snprintf(e->name, sizeof(e->name), "%s", name);
	e->wildcard = wildcard;
	e->labels = count_labels(name) + (wildcard ? 1 : 0);
	e->flag = wildcard ? FLAG_NONE : name_flag(name);
	return e;
}

static bool
entry_add_port(struct builder *b, struct entry *e, uint16_t port)
{
	uint16_t *p;

	if (e->nports > 0 && e->ports[e->nports - 1] == port)
		return true;
	if ((p = reallocarray(e->ports, e->nports + 1, sizeof(*p))) == NULL) {
		b->oom = true;
		return false;
	}
	p[e->nports++] = port;
	e->ports = p;
	return true;
}

/* A recorded name that cannot go into a policy, and why. */
struct bad_name {
	const char	*raw;
	const char	*why;
	size_t		 index;		/* in the input: the warnings' order */
};

static int
bad_raw_cmp(const void *x, const void *y)
{
	const struct bad_name *a = x, *b = y;
	int c;

	if ((c = strcmp(a->raw, b->raw)) != 0)
		return c;
	return (a->index > b->index) - (a->index < b->index);
}

static int
bad_index_cmp(const void *x, const void *y)
{
	const struct bad_name *a = x, *b = y;

	return (a->index > b->index) - (a->index < b->index);
}

/* Why raw (normalised into out) cannot be an allowedDomains name, or NULL. */
static const char *
name_problem(const char *raw, char *out)
{
	const char *why, *tld;
	size_t i, len = strlen(raw);

	for (i = 0; i < len; i++)
		if ((unsigned char)raw[i] >= 0x80)
			return "not ASCII (an internationalised name goes into "
			    "a policy in punycode, xn--...)";
	if (!dns_name_normalize(raw, len, out, &why))
		return why;
	/* an address in a Host header or an SNI: no TLD is all digits */
	tld = strrchr(out, '.');
	tld = tld != NULL ? tld + 1 : out;
	if (strspn(tld, "0123456789") == strlen(tld))
		return "an address, not a name";
	return NULL;
}

/* One warning per distinct bad name, in the order they first came. */
static void
warn_bad_names(struct builder *b, struct bad_name *bad, size_t nbad)
{
	size_t i, j;

	qsort(bad, nbad, sizeof(*bad), bad_raw_cmp);
	for (i = 0, j = 0; i < nbad; i++)
		if (j == 0 || strcmp(bad[j - 1].raw, bad[i].raw) != 0)
			bad[j++] = bad[i];
	qsort(bad, j, sizeof(*bad), bad_index_cmp);
	for (i = 0; i < j; i++)
		skip_warn(b, bad[i].raw, bad[i].why);
}

/*
 * Normalises the recorded names into distinct (name, port) pairs in
 * domain order, warning about what cannot go into a policy.
 */
static struct pair *
normalise_names(struct builder *b, const struct suggest_name *names,
    size_t n, size_t *npairs)
{
	struct bad_name *bad;
	struct pair *pairs;
	const char *why;
	size_t i, j, np = 0, nbad = 0;

	*npairs = 0;
	if (n == 0)
		return NULL;
	pairs = calloc(n, sizeof(*pairs));
	bad = calloc(n, sizeof(*bad));
	if (pairs == NULL || bad == NULL) {
		free(pairs);
		free(bad);
		b->oom = true;
		return NULL;
	}
	for (i = 0; i < n; i++) {
		if (names[i].name == NULL || names[i].name[0] == '\0')
			continue;
		if ((why = name_problem(names[i].name, pairs[np].name)) !=
		    NULL) {
			bad[nbad].raw = names[i].name;
			bad[nbad].why = why;
			bad[nbad++].index = i;
			continue;
		}
		pairs[np++].port = names[i].port;
	}
	warn_bad_names(b, bad, nbad);
	free(bad);
	qsort(pairs, np, sizeof(*pairs), pair_cmp);
	for (i = 0, j = 0; i < np; i++)
		if (j == 0 || pair_cmp(&pairs[j - 1], &pairs[i]) != 0)
			pairs[j++] = pairs[i];
	*npairs = j;
	return pairs;
}

/* One entry per distinct name, in domain order, ports ascending. */
static void
build_entries(struct builder *b, const struct pair *pairs, size_t np)
{
	struct entry *e = NULL;
	size_t i;

	for (i = 0; i < np && !b->oom; i++) {
		if (e == NULL || strcmp(e->name, pairs[i].name) != 0)
			if ((e = entry_add(b, pairs[i].name, false)) == NULL)
				return;
		/* the entry stays: resolving the name is still allowed */
		if (dns_port(pairs[i].port))
			add_warning(b, "%s:%u: DNS and DNS over TLS go only to "
			    "the gateway's resolver, no policy allows them; "
			    "left out", pairs[i].name, pairs[i].port);
		else
			entry_add_port(b, e, pairs[i].port);
	}
}

/* First entry at or after name in domain order (entries[0..n) sorted). */
static size_t
lower_bound(const struct entry *entries, size_t n, const char *name)
{
	size_t lo = 0, hi = n, mid;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (domain_cmp(entries[mid].name, name) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* name is a proper subdomain of parent. */
static bool
strictly_under(const char *name, const char *parent)
{
	return at_or_under(name, parent) && strcmp(name, parent) != 0;
}

/*
 * The ports of what "*.parent" replaces: the sorted names in [first, last)
 * and the wildcards made earlier under parent (from nsorted on). With
 * ports NULL only counts them; otherwise also marks them absorbed.
 */
static size_t
take_ports(struct builder *b, const char *parent, size_t first, size_t last,
    size_t nsorted, uint16_t *ports)
{
	const size_t range[2][2] = { { first, last },
	    { nsorted, b->nentries } };
	struct entry *e;
	size_t r, i, n = 0;

	for (r = 0; r < 2; r++)
		for (i = range[r][0]; i < range[r][1]; i++) {
			e = &b->entries[i];
			if (e->absorbed || !strictly_under(e->name, parent))
				continue;
			if (ports != NULL) {
				if (e->nports > 0)
					memcpy(ports + n, e->ports,
					    e->nports * sizeof(*ports));
				e->absorbed = true;
			}
			n += e->nports;
		}
	return n;
}

static void
collapse(struct builder *b, const char *parent, size_t first, size_t last,
    size_t nsorted)
{
	struct entry *w;
	uint16_t *ports;
	size_t i, n;

	n = take_ports(b, parent, first, last, nsorted, NULL);
	if ((ports = calloc(n + 1, sizeof(*ports))) == NULL) {
		b->oom = true;
		return;
	}
	take_ports(b, parent, first, last, nsorted, ports);
	qsort(ports, n, sizeof(*ports), port_cmp);
	if ((w = entry_add(b, parent, true)) != NULL)
		for (i = 0; i < n && !b->oom; i++)
			entry_add_port(b, w, ports[i]);
	free(ports);
}

/*
 * "*.parent" for every parent with at least SUGGEST_WILDCARD_MIN distinct
 * names directly under it, deepest parents first so that a more specific
 * wildcard is tried before a broader one folds it in, and never where
 * wildcard_ok() says no or a flagged name is under the parent (the
 * wildcard would hide it from the warning and from --strict).
 */
static void
collapse_wildcards(struct builder *b)
{
	const char **parents;
	const char *dot, *p;
	size_t n = b->nentries, np = 0, i, g, first, last, children;
	unsigned plabels;
	bool blocked;

	/*
	 * parents point into the entries' names, and collapse() adds at
	 * most one wildcard per entry: with room made first, the array
	 * never moves under them.
	 */
	if (n == 0 || !entries_reserve(b, 2 * n))
		return;
	if ((parents = calloc(n, sizeof(*parents))) == NULL) {
		b->oom = true;
		return;
	}
	for (i = 0; i < n; i++)
		if ((dot = strchr(b->entries[i].name, '.')) != NULL)
			parents[np++] = dot + 1;
	qsort(parents, np, sizeof(*parents), str_domain_cmp);

	/*
	 * Domain order puts a parent before its subdomains, so walking the
	 * groups of equal parents backwards visits deeper ones first.
	 */
	for (i = np; i > 0 && !b->oom; i = g) {
		p = parents[i - 1];
		for (g = i - 1; g > 0 && strcmp(parents[g - 1], p) == 0; g--)
			;
		if (i - g < SUGGEST_WILDCARD_MIN || !wildcard_ok(p))
			continue;
		/* entries [0, n) stay in domain order: wildcards go after */
		first = lower_bound(b->entries, n, p);
		if (first < n && strcmp(b->entries[first].name, p) == 0)
			first++;
		plabels = count_labels(p);
		children = 0;
		blocked = false;
		for (last = first; last < n &&
		    at_or_under(b->entries[last].name, p); last++) {
			if (b->entries[last].flag != FLAG_NONE)
				blocked = true;
			if (!b->entries[last].absorbed &&
			    b->entries[last].labels == plabels + 1)
				children++;
		}
		if (!blocked && children >= SUGGEST_WILDCARD_MIN)
			collapse(b, p, first, last, n);
	}
	free(parents);
}

static const char *
special_range(uint32_t addr)
{
	size_t i;
	uint32_t mask;

	for (i = 0; i < NELEM(special_ranges); i++) {
		mask = special_ranges[i].bits == 0 ? 0 :
		    0xffffffffU << (32 - special_ranges[i].bits);
		if ((addr & mask) == special_ranges[i].net)
			return special_ranges[i].why;
	}
	return NULL;
}

/* Distinct (address, port) pairs in address order. */
static struct addr_pair *
normalise_addrs(struct builder *b, const struct suggest_addr *addrs,
    size_t n, size_t *npairs)
{
	struct addr_pair *pairs;
	struct in_addr in;
	size_t i, j, np = 0;

	*npairs = 0;
	if (n == 0)
		return NULL;
	if ((pairs = calloc(n, sizeof(*pairs))) == NULL) {
		b->oom = true;
		return NULL;
	}
	for (i = 0; i < n; i++) {
		if (addrs[i].addr == NULL ||
		    inet_pton(AF_INET, addrs[i].addr, &in) != 1) {
			skip_warn(b, addrs[i].addr != NULL ? addrs[i].addr :
			    "(null)", "not an IPv4 address");
			continue;
		}
		if (addrs[i].port == 0) {
			skip_warn(b, addrs[i].addr, "port 0");
			continue;
		}
		pairs[np].addr = ntohl(in.s_addr);
		pairs[np++].port = addrs[i].port;
	}
	qsort(pairs, np, sizeof(*pairs), addr_pair_cmp);
	for (i = 0, j = 0; i < np; i++)
		if (j == 0 || addr_pair_cmp(&pairs[j - 1], &pairs[i]) != 0)
			pairs[j++] = pairs[i];
	*npairs = j;
	return pairs;
}

static bool
append_string(struct builder *b, json_t *list, const char *s)
{
	if (json_array_append_new(list, json_string(s)) != 0) {
		b->oom = true;
		return false;
	}
	return true;
}

/*
 * One entry's lines: "name" for resolution alone or 443/80 (a name
 * without a port admits both), "name:port" for each other port.
 */
static void
emit_entry(struct builder *b, json_t *list, const struct entry *e)
{
	char text[POLICY_ENTRY_MAX];
	size_t i, nother = 0;
	bool plain = false;

	for (i = 0; i < e->nports; i++) {
		if (e->ports[i] == 80 || e->ports[i] == 443)
			plain = true;
		else if (e->ports[i] != 0)
			nother++;
	}
	if (plain || nother == 0) {
		snprintf(text, sizeof(text), "%s%s", e->wildcard ? "*." : "",
		    e->name);
		if (!append_string(b, list, text))
			return;
		b->s->ndomains++;
	}
	for (i = 0; i < e->nports; i++) {
		if (e->ports[i] == 0 || e->ports[i] == 80 ||
		    e->ports[i] == 443)
			continue;
		snprintf(text, sizeof(text), "%s%s:%u",
		    e->wildcard ? "*." : "", e->name, e->ports[i]);
		if (!append_string(b, list, text))
			return;
		b->s->ndomains++;
	}
}

static json_t *
domains_json(struct builder *b, bool strict)
{
	struct entry *e;
	json_t *list;
	size_t i;

	if ((list = json_array()) == NULL) {
		b->oom = true;
		return NULL;
	}
	if (b->nentries > 0)
		qsort(b->entries, b->nentries, sizeof(*b->entries),
		    entry_out_cmp);
	for (i = 0; i < b->nentries && !b->oom; i++) {
		e = &b->entries[i];
		if (e->absorbed)
			continue;
		if (e->flag != FLAG_NONE)
			add_warning(b, "%s: %s%s", e->name, flag_why[e->flag],
			    strict ? " (left out: --strict)" : "");
		if (e->flag == FLAG_NONE || !strict)
			emit_entry(b, list, e);
	}
	return list;
}

static json_t *
cidrs_json(struct builder *b, const struct addr_pair *pairs, size_t np,
    bool strict)
{
	char text[POLICY_ENTRY_MAX];
	const char *why;
	struct in_addr in;
	char a[INET_ADDRSTRLEN];
	json_t *list;
	size_t i;

	if ((list = json_array()) == NULL) {
		b->oom = true;
		return NULL;
	}
	for (i = 0; i < np && !b->oom; i++) {
		in.s_addr = htonl(pairs[i].addr);
		inet_ntop(AF_INET, &in, a, sizeof(a));
		snprintf(text, sizeof(text), "%s:%u", a, pairs[i].port);
		if (dns_port(pairs[i].port)) {
			add_warning(b, "%s: DNS and DNS over TLS go only to "
			    "the gateway's resolver, no policy allows them; "
			    "left out", text);
			continue;
		}
		if ((why = special_range(pairs[i].addr)) != NULL) {
			add_warning(b, "%s: %s%s", text, why,
			    strict ? " (left out: --strict)" : "");
			if (strict)
				continue;
		}
		if (!append_string(b, list, text))
			break;
		b->s->ncidrs++;
	}
	return list;
}

/* The policy document, in the order people read one. */
static char *
policy_text(struct builder *b, json_t *domains, json_t *cidrs)
{
	json_t *doc, *sluice;
	char *text = NULL, *nl;
	size_t len;

	doc = json_object();
	sluice = json_object();
	if (doc == NULL || sluice == NULL)
		goto oom;
	if (json_array_size(domains) > 0 && json_object_set_new(doc,
	    "network", json_pack("{s:O}", "allowedDomains", domains)) != 0)
		goto oom;
	if (json_object_set_new(sluice, "mode", json_string("enforce")) != 0)
		goto oom;
	if (json_array_size(cidrs) > 0 &&
	    json_object_set(sluice, "allowedCidrs", cidrs) != 0)
		goto oom;
	if (json_object_set(doc, "sluice", sluice) != 0)
		goto oom;
	text = json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	if (text == NULL)
		goto oom;
	len = strlen(text);
	if ((nl = realloc(text, len + 2)) == NULL) {
		free(text);
		text = NULL;
		goto oom;
	}
	text = nl;
	memcpy(text + len, "\n", 2);
	goto done;
oom:
	b->oom = true;
done:
	json_decref(sluice);
	json_decref(doc);
	return text;
}

struct suggestion *
suggest_policy(const struct suggest_name *names, size_t nnames,
    const struct suggest_addr *addrs, size_t naddrs, bool strict)
{
	struct builder b;
	struct pair *pairs = NULL;
	struct addr_pair *apairs = NULL;
	json_t *domains = NULL, *cidrs = NULL;
	size_t np, nap, i;

	memset(&b, 0, sizeof(b));
	if ((b.s = calloc(1, sizeof(*b.s))) == NULL)
		return NULL;
	pairs = normalise_names(&b, names, nnames, &np);
	apairs = normalise_addrs(&b, addrs, naddrs, &nap);
	if (b.nskipped > SKIP_WARN_MAX)
		add_warning(&b, "and %zu more invalid names or addresses "
		    "left out", b.nskipped - SKIP_WARN_MAX);
	if (!b.oom)
		build_entries(&b, pairs, np);
	if (!b.oom)
		collapse_wildcards(&b);
	if (!b.oom)
		domains = domains_json(&b, strict);
	if (!b.oom)
		cidrs = cidrs_json(&b, apairs, nap, strict);
	if (!b.oom && (b.s->ndomains > POLICY_MAX_ENTRIES ||
	    b.s->ncidrs > POLICY_MAX_ENTRIES)) {
		errno = E2BIG;
		suggest_free(b.s);
		b.s = NULL;
		goto cleanup;
	}
	if (!b.oom)
		b.s->json = policy_text(&b, domains, cidrs);
	if (b.oom) {
		suggest_free(b.s);
		b.s = NULL;
		errno = ENOMEM;
	}
cleanup:
	json_decref(domains);
	json_decref(cidrs);
	for (i = 0; i < b.nentries; i++)
		free(b.entries[i].ports);
	free(b.entries);
	free(pairs);
	free(apairs);
	return b.s;
}

void
suggest_free(struct suggestion *s)
{
	size_t i;

	if (s == NULL)
		return;
	for (i = 0; i < s->nwarnings; i++)
		free(s->warnings[i]);
	free(s->warnings);
	free(s->json);
	free(s);
}
