/* policy.c: strict JSON policies with file:line:col errors; indexed matching of names and CIDRs. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <openssl/evp.h>

#include "dns/dns.h"
#include "gateway/policy.h"

/* The deepest path a policy has is "sluice" / "allowedCidrs" / index. */
#define PATH_DEPTH_MAX	4
/* Bytes of a user's entry quoted in an error message, quotes included. */
#define QUOTE_MAX	96

struct path_elem {
	const char	*key;		/* NULL for an array element */
	size_t		 index;
};

/* The entries' strings, one after the other in one block. */
struct strings {
	char		*buf;
	size_t		 len;
	size_t		 cap;
};

struct parser {
	const char		*text;	/* the document jansson accepted */
	size_t			 len;
	const char		*origin;
	char			*err;
	size_t			 errlen;
	struct path_elem	 path[PATH_DEPTH_MAX];
	size_t			 depth;
	struct strings		*str;
};

/*
 * One list of names, indexed: the entries other than a bare "*", ordered
 * by (kind, name, position), and a hash table of the runs that share a
 * name and kind, so that a name and each of its parents is one probe.
 */
struct name_run {
	uint32_t	 hash;
	uint32_t	 first;		/* into order[] */
	uint32_t	 count;		/* 0: an empty slot */
};

struct name_index {
	const struct policy_domain *list;
	uint32_t	*order;		/* positions in list, by run */
	struct name_run	*slots;
	size_t		 mask;		/* slots - 1, a power of two minus 1 */
	size_t		 first_any;	/* position of the first bare "*" */
	size_t		 wild_min;	/* lengths of wildcard names, so that */
	size_t		 wild_max;	/* only parents that fit are probed */
	uint32_t	 seed;		/* of the hash: random, per index */
};

/*
 * The CIDRs by prefix length, longest first; within a length, by
 * (address, position), so that the entries covering an address are one
 * binary search per length in use.
 */
struct cidr_key {
	uint32_t	 addr;		/* host order */
	uint32_t	 pos;
};

struct cidr_len {
	uint32_t	 mask;		/* host order */
	uint32_t	 first;		/* into keys[] */
	uint32_t	 count;
};

struct policy_index {
	char			*strings;
	struct name_index	 allowed;
	struct name_index	 denied;
	uint16_t		*ports;		/* allowedDomains' ports, sorted,
						 * once each (80 and 443 for an
						 * entry without one) */
	size_t			 nports;
	struct cidr_key		*keys;
	struct cidr_len		 lens[33];
	size_t			 nlens;
};

/* Where the locator is in the text; line and col are those of *p. */
struct cursor {
	const char	*p;
	const char	*end;
	int		 line;
	int		 col;
};

struct member {
	const char	*key;
	bool		(*parse)(struct parser *, json_t *, struct policy *);
};

enum num_status {
	NUM_OK,
	NUM_EMPTY,
	NUM_SYNTAX,
	NUM_LEADING_ZERO,
	NUM_RANGE,
};

static void set_err(char *, size_t, const char *, ...)
    __attribute__((format(printf, 3, 4)));
static bool fail(struct parser *, bool, const char *, ...)
    __attribute__((format(printf, 3, 4)));

static void
set_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err == NULL || errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/*
 * Copies s (len bytes) and a NUL into the block. The block is sized
 * before parsing for every string the lists can hold (strings_bound),
 * so it never moves while entries point into it.
 */
static const char *
strings_put(struct strings *str, const char *s, size_t len)
{
	char *out;

	if (str->cap - str->len < len + 1)
		return "";	/* not reached: the block was sized ahead */
	out = str->buf + str->len;
	memcpy(out, s, len);
	out[len] = '\0';
	str->len += len + 1;
	return out;
}

/*
 * The locator. jansson keeps no positions of values, so an error about a
 * value finds it again in the text, which jansson has already accepted as
 * valid JSON. Columns count characters, not bytes, as jansson's do.
 */

static void
cur_next(struct cursor *c)
{
	unsigned char ch;

	if (c->p >= c->end)
		return;
	ch = (unsigned char)*c->p++;
	if (ch == '\n') {
		c->line++;
		c->col = 1;
	} else if ((ch & 0xc0) != 0x80)
		c->col++;
}

static void
cur_skip_ws(struct cursor *c)
{
	while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' ||
	    *c->p == '\n' || *c->p == '\r'))
		cur_next(c);
}

static unsigned long
cur_hex4(struct cursor *c)
{
	unsigned long v = 0;
	int i;

	for (i = 0; i < 4 && c->p < c->end; i++) {
		char h = *c->p;

		v <<= 4;
		if (h >= '0' && h <= '9')
			v |= (unsigned long)(h - '0');
		else if (h >= 'a' && h <= 'f')
			v |= (unsigned long)(h - 'a' + 10);
		else if (h >= 'A' && h <= 'F')
			v |= (unsigned long)(h - 'A' + 10);
		cur_next(c);
	}
	return v;
}

static size_t
utf8_encode(unsigned long cp, unsigned char *buf)
{
	if (cp < 0x80) {
		buf[0] = (unsigned char)cp;
		return 1;
	}
	if (cp < 0x800) {
		buf[0] = (unsigned char)(0xc0 | cp >> 6);
		buf[1] = (unsigned char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		buf[0] = (unsigned char)(0xe0 | cp >> 12);
		buf[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
		buf[2] = (unsigned char)(0x80 | (cp & 0x3f));
		return 3;
	}
	buf[0] = (unsigned char)(0xf0 | cp >> 18);
	buf[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3f));
	buf[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
	buf[3] = (unsigned char)(0x80 | (cp & 0x3f));
	return 4;
}

/*
 * Moves past the string at c; true if its decoded value equals want (keys
 * may be written with escapes: "m\u006fde" is "mode").
 */
static bool
cur_string(struct cursor *c, const char *want, size_t wantlen)
{
	unsigned char buf[4];
	unsigned long cp, lo;
	size_t off = 0, n;
	bool eq = want != NULL;

	cur_next(c);
	while (c->p < c->end && *c->p != '"') {
		if (*c->p != '\\') {
			buf[0] = (unsigned char)*c->p;
			n = 1;
			cur_next(c);
		} else {
			cur_next(c);
			if (c->p >= c->end)
				break;
			switch (*c->p) {
			case 'b':	cp = '\b'; break;
			case 'f':	cp = '\f'; break;
			case 'n':	cp = '\n'; break;
			case 'r':	cp = '\r'; break;
			case 't':	cp = '\t'; break;
			case 'u':	cp = 0; break;
			default:	cp = (unsigned char)*c->p; break;
			}
			if (*c->p == 'u') {
				cur_next(c);
				cp = cur_hex4(c);
				if (cp >= 0xd800 && cp <= 0xdbff &&
				    c->end - c->p >= 6 && c->p[0] == '\\' &&
				    c->p[1] == 'u') {
					cur_next(c);
					cur_next(c);
					lo = cur_hex4(c);
					cp = 0x10000 + ((cp - 0xd800) << 10) +
					    (lo - 0xdc00);
				}
			} else
				cur_next(c);
			n = utf8_encode(cp, buf);
		}
		if (eq) {
			if (wantlen - off < n ||
			    memcmp(want + off, buf, n) != 0)
				eq = false;
			else
				off += n;
		}
	}
	cur_next(c);
	return eq && off == wantlen;
}

static void
cur_skip_value(struct cursor *c)
{
	int depth = 0;

	if (c->p >= c->end)
		return;
	if (*c->p == '"') {
		cur_string(c, NULL, 0);
		return;
	}
	if (*c->p != '{' && *c->p != '[') {
		while (c->p < c->end && strchr(",]} \t\r\n", *c->p) == NULL)
			cur_next(c);
		return;
	}
	while (c->p < c->end) {
		if (*c->p == '"') {
			cur_string(c, NULL, 0);
			continue;
		}
		if (*c->p == '{' || *c->p == '[')
			depth++;
		else if (*c->p == '}' || *c->p == ']')
			depth--;
		cur_next(c);
		if (depth == 0)
			return;
	}
}

/* Moves past the ',' after a member or element, if there is one. */
static void
cur_skip_comma(struct cursor *c)
{
	cur_skip_ws(c);
	if (c->p < c->end && *c->p == ',')
		cur_next(c);
	cur_skip_ws(c);
}

/*
 * Leaves c at the value the path names, or at its key when at_key. Should
 * the path not be found (it always is in a document jansson parsed), c is
 * left at the deepest value found.
 */
static void
locate(struct cursor *c, const struct path_elem *path, size_t depth,
    bool at_key)
{
	struct cursor parent, key;
	size_t i, k;
	bool found;

	cur_skip_ws(c);
	for (i = 0; i < depth; i++) {
		parent = *c;
		found = false;
		if (c->p >= c->end)
			return;
		if (*c->p == '{' && path[i].key != NULL) {
			cur_next(c);
			cur_skip_ws(c);
			while (c->p < c->end && *c->p == '"') {
				key = *c;
				found = cur_string(c, path[i].key,
				    strlen(path[i].key));
				cur_skip_ws(c);
				if (c->p < c->end && *c->p == ':')
					cur_next(c);
				cur_skip_ws(c);
				if (found)
					break;
				cur_skip_value(c);
				cur_skip_comma(c);
			}
			if (found && at_key && i + 1 == depth) {
				*c = key;
				return;
			}
		} else if (*c->p == '[' && path[i].key == NULL) {
			cur_next(c);
			cur_skip_ws(c);
			for (k = 0; k < path[i].index && c->p < c->end &&
			    *c->p != ']'; k++) {
				cur_skip_value(c);
				cur_skip_comma(c);
			}
			found = c->p < c->end && *c->p != ']';
		}
		if (!found) {
			*c = parent;
			return;
		}
	}
}

/* Writes "a.b[3]" for the first depth elements of the path. */
static void
path_string(const struct parser *ps, size_t depth, char *buf, size_t size)
{
	size_t i, off = 0;
	int n;

	buf[0] = '\0';
	for (i = 0; i < depth && off < size; i++) {
		if (ps->path[i].key != NULL)
			n = snprintf(buf + off, size - off, "%s%s",
			    i > 0 ? "." : "", ps->path[i].key);
		else
			n = snprintf(buf + off, size - off, "[%zu]",
			    ps->path[i].index);
		if (n < 0)
			break;
		off += (size_t)n;
	}
}

/*
 * Writes "origin:line:col: path: message" for the value at the current path
 * (its key when at_key, the path then naming the object that holds it).
 * Returns false, for the caller to return.
 */
static bool
fail(struct parser *ps, bool at_key, const char *fmt, ...)
{
	struct cursor c = { ps->text, ps->text + ps->len, 1, 1 };
	char where[128], msg[512];
	size_t depth = ps->depth;
	va_list ap;

	locate(&c, ps->path, depth, at_key);
	if (at_key && depth > 0)
		depth--;
	path_string(ps, depth, where, sizeof(where));
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (where[0] != '\0')
		set_err(ps->err, ps->errlen, "%s:%d:%d: %s: %s", ps->origin,
		    c.line, c.col, where, msg);
	else
		set_err(ps->err, ps->errlen, "%s:%d:%d: %s", ps->origin,
		    c.line, c.col, msg);
	return false;
}

static void
path_push(struct parser *ps, const char *key, size_t index)
{
	/* The schema is three levels deep; deeper levels are never read. */
	if (ps->depth == PATH_DEPTH_MAX)
		return;
	ps->path[ps->depth].key = key;
	ps->path[ps->depth].index = index;
	ps->depth++;
}

static void
path_pop(struct parser *ps)
{
	if (ps->depth > 0)
		ps->depth--;
}

/*
 * Quotes a user's text for an error message: control characters (C0 and
 * C1, which terminals obey) are escaped and long texts are cut.
 * jansson has checked that the text is valid UTF-8.
 */
static const char *
quote(char *buf, size_t size, const char *s, size_t len)
{
	size_t i = 0, off = 0, n;
	unsigned char ch;

	buf[off++] = '"';
	while (i < len) {
		ch = (unsigned char)s[i];
		n = ch < 0x80 ? 1 : ch >= 0xf0 ? 4 : ch >= 0xe0 ? 3 : 2;
		if (n > len - i)
			n = len - i;
		/* Room for an escape, or n bytes, and for "...\"" and NUL. */
		if (off + 6 + 5 > size) {
			memcpy(buf + off, "...", 3);
			off += 3;
			break;
		}
		if (ch == '"' || ch == '\\') {
			buf[off++] = '\\';
			buf[off++] = (char)ch;
		} else if (ch < 0x20 || ch == 0x7f) {
			off += (size_t)snprintf(buf + off, size - off,
			    "\\u%04x", ch);
		} else if (ch == 0xc2 && n == 2 &&
		    (unsigned char)s[i + 1] < 0xa0) {
			off += (size_t)snprintf(buf + off, size - off,
			    "\\u%04x", (unsigned char)s[i + 1]);
		} else {
			memcpy(buf + off, s + i, n);
			off += n;
		}
		i += n;
	}
	buf[off++] = '"';
	buf[off] = '\0';
	return buf;
}

static const char *
json_kind(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT:
		return "an object";
	case JSON_ARRAY:
		return "an array";
	case JSON_STRING:
		return "a string";
	case JSON_INTEGER:
	case JSON_REAL:
		return "a number";
	case JSON_TRUE:
		return "true";
	case JSON_FALSE:
		return "false";
	case JSON_NULL:
		return "null";
	}
	return "an unknown value";
}

/*
 * A decimal number in min..max written without sign, spaces or leading
 * zeros: "080" could be read as octal elsewhere, so it is refused.
 */
static enum num_status
parse_num(const char *s, size_t len, unsigned long min, unsigned long max,
    unsigned long *out)
{
	unsigned long v = 0;
	size_t i;

	if (len == 0)
		return NUM_EMPTY;
	for (i = 0; i < len; i++)
		if (s[i] < '0' || s[i] > '9')
			return NUM_SYNTAX;
	if (len > 1 && s[0] == '0')
		return NUM_LEADING_ZERO;
	for (i = 0; i < len; i++) {
		v = v * 10 + (unsigned long)(s[i] - '0');
		if (v > max)
			return NUM_RANGE;
	}
	if (v < min)
		return NUM_RANGE;
	*out = v;
	return NUM_OK;
}

static bool
parse_port(struct parser *ps, const char *q, const char *s, size_t len,
    uint16_t *port)
{
	unsigned long v;

	switch (parse_num(s, len, 1, 65535, &v)) {
	case NUM_OK:
		*port = (uint16_t)v;
		return true;
	case NUM_EMPTY:
		return fail(ps, false, "%s: missing port after ':'", q);
	case NUM_LEADING_ZERO:
		return fail(ps, false, "%s: port has leading zeros", q);
	default:
		return fail(ps, false, "%s: port must be 1..65535", q);
	}
}

/* Returns NULL, or why s is no dotted-quad IPv4 address. */
static const char *
parse_ipv4(const char *s, size_t len, uint32_t *addr)
{
	const char *p = s, *end = s + len, *dot;
	unsigned long v;
	int i;

	*addr = 0;
	for (i = 0; i < 4; i++) {
		dot = i < 3 ? memchr(p, '.', (size_t)(end - p)) : end;
		if (dot == NULL)
			return "not an IPv4 address (a.b.c.d)";
		switch (parse_num(p, (size_t)(dot - p), 0, 255, &v)) {
		case NUM_OK:
			break;
		case NUM_LEADING_ZERO:
			return "leading zero in an address byte "
			    "(octal is not accepted)";
		case NUM_RANGE:
			return "address byte out of range 0..255";
		default:
			return "not an IPv4 address (a.b.c.d)";
		}
		*addr = *addr << 8 | (uint32_t)v;
		p = dot + 1;
	}
	return NULL;
}

static bool
parse_cidr(struct parser *ps, const char *s, size_t len,
    struct policy_cidr *c)
{
	char q[QUOTE_MAX];
	const char *colon, *slash, *end, *dash, *why;
	unsigned long prefix = 32;
	uint32_t addr, mask;
	size_t i, ncolons = 0;

	quote(q, sizeof(q), s, len);
	if (len == 0)
		return fail(ps, false, "empty entry");
	if (len >= POLICY_ENTRY_MAX)
		return fail(ps, false, "%s: longer than %d bytes", q,
		    POLICY_ENTRY_MAX - 1);
	for (i = 0; i < len; i++) {
		if (strchr(" \t\n\v\f\r", s[i]) != NULL)
			return fail(ps, false,
			    "%s: white space is not allowed", q);
		if (s[i] == ':')
			ncolons++;
	}
	colon = memchr(s, ':', len);
	/* "a.b.c.d:80:90" is a bad port, "::1" and "2001:db8::/32" are IPv6. */
	if (memchr(s, '[', len) != NULL || (ncolons > 1 &&
	    memchr(s, '.', (size_t)(colon - s)) == NULL))
		return fail(ps, false, "%s: IPv6 is not supported yet", q);

	end = colon != NULL ? colon : s + len;
	slash = memchr(s, '/', (size_t)(end - s));
	why = parse_ipv4(s, (size_t)((slash != NULL ? slash : end) - s), &addr);
	if (why != NULL)
		return fail(ps, false, "%s: %s", q, why);
	if (slash != NULL) {
		switch (parse_num(slash + 1, (size_t)(end - slash - 1), 0, 32,
		    &prefix)) {
		case NUM_OK:
			break;
		case NUM_EMPTY:
			return fail(ps, false,
			    "%s: missing prefix length after '/'", q);
		case NUM_LEADING_ZERO:
			return fail(ps, false,
			    "%s: prefix length has leading zeros", q);
		default:
			return fail(ps, false,
			    "%s: prefix length must be 0..32", q);
		}
	}
	/* A shift by 32 is undefined. */
	mask = prefix == 0 ? 0 : UINT32_C(0xffffffff) << (32 - prefix);
	if ((addr & ~mask) != 0)
		return fail(ps, false,
		    "%s: host bits are set; did you mean %u.%u.%u.%u/%lu?", q,
		    (addr & mask) >> 24, (addr & mask) >> 16 & 0xff,
		    (addr & mask) >> 8 & 0xff, addr & mask & 0xff, prefix);

	c->port_lo = 0;
	c->port_hi = 65535;
	if (colon != NULL) {
		const char *ports = colon + 1;
		size_t plen = len - (size_t)(ports - s);

		dash = memchr(ports, '-', plen);
		if (dash == NULL) {
			if (!parse_port(ps, q, ports, plen, &c->port_lo))
				return false;
			c->port_hi = c->port_lo;
		} else {
			if (dash == ports || dash == ports + plen - 1)
				return fail(ps, false,
				    "%s: port range must be low-high", q);
			if (!parse_port(ps, q, ports, (size_t)(dash - ports),
			    &c->port_lo) ||
			    !parse_port(ps, q, dash + 1,
			    plen - (size_t)(dash + 1 - ports), &c->port_hi))
				return false;
			if (c->port_lo > c->port_hi)
				return fail(ps, false,
				    "%s: port range is empty (%u > %u)", q,
				    (unsigned)c->port_lo, (unsigned)c->port_hi);
		}
	}
	c->addr = htonl(addr);
	c->mask = htonl(mask);
	c->text = strings_put(ps->str, s, len);
	return true;
}

/*
 * "/tls" or "/http", slash to end, after a port: how to read the first
 * flight where the port does not tell. Lower case only, so that a reader
 * of policies meets one spelling. Without a port, other text after a '/'
 * is left for the name's own check to refuse ("a.com/24").
 */
static bool
parse_inspect(struct parser *ps, const char *q, const char *slash,
    size_t len, bool port, bool denied, enum policy_inspect *inspect)
{
	char sq[QUOTE_MAX];
	enum policy_inspect v;

	quote(sq, sizeof(sq), slash, len);
	if (len == 4 && memcmp(slash, "/tls", 4) == 0)
		v = POLICY_INSPECT_TLS;
	else if (len == 5 && memcmp(slash, "/http", 5) == 0)
		v = POLICY_INSPECT_HTTP;
	else if (!port)
		return true;
	else
		return fail(ps, false, "%s: unknown protocol %s after the "
		    "port (known: /tls, /http)", q, sq);
	/* A denied name is refused whatever it speaks. */
	if (denied)
		return fail(ps, false, "%s: %s is only allowed in "
		    "allowedDomains", q, sq);
	if (!port)
		return fail(ps, false, "%s: %s needs a port before it, as in "
		    "\"example.com:8443%.*s\"", q, sq, (int)len, slash);
	*inspect = v;
	return true;
}

static bool
parse_domain(struct parser *ps, const char *s, size_t len, bool denied,
    struct policy_domain *d)
{
	char q[QUOTE_MAX], norm[DNS_NAME_MAX + 1];
	const char *name = s, *colon, *slash, *portend, *why;
	size_t namelen = len, i;

	quote(q, sizeof(q), s, len);
	if (len == 0)
		return fail(ps, false, "empty entry");
	if (len >= POLICY_ENTRY_MAX)
		return fail(ps, false, "%s: longer than %d bytes", q,
		    POLICY_ENTRY_MAX - 1);
	for (i = 0; i < len; i++)
		if ((unsigned char)s[i] >= 0x80)
			return fail(ps, false, "%s: not ASCII; write "
			    "internationalised names in punycode (xn--...)",
			    q);

	if (len == 1 && s[0] == '*') {
		if (!denied)
			return fail(ps, false, "%s: a bare \"*\" is only "
			    "allowed in deniedDomains", q);
		d->any = true;
		d->text = strings_put(ps->str, s, len);
		d->name = d->text + len;	/* "" */
		return true;
	}
	/*
	 * Names hold no ':' and no '/': the last ':' starts a port, and a
	 * '/' after it what to inspect.
	 */
	if ((colon = memrchr(s, ':', len)) != NULL) {
		namelen = (size_t)(colon - s);
		if (namelen == 1 && s[0] == '*')
			return fail(ps, false, denied ?
			    "%s: a bare \"*\" takes no port" :
			    "%s: a bare \"*\" is only allowed in deniedDomains",
			    q);
		slash = memchr(colon, '/', len - namelen);
		portend = slash != NULL ? slash : s + len;
		if (!parse_port(ps, q, colon + 1, (size_t)(portend - colon - 1),
		    &d->port))
			return false;
	} else
		slash = memchr(s, '/', len);
	if (slash != NULL && !parse_inspect(ps, q, slash,
	    (size_t)(s + len - slash), colon != NULL, denied, &d->inspect))
		return false;
	if (namelen >= 2 && name[0] == '*' && name[1] == '.') {
		d->wildcard = true;
		name += 2;
		namelen -= 2;
	}
	if (memchr(name, '*', namelen) != NULL)
		return fail(ps, false, "%s: '*' is only allowed as a whole "
		    "first label, as in \"*.example.com\"", q);
	if (!dns_name_normalize(name, namelen, norm, &why))
		return fail(ps, false, "%s: %s", q, why);
	/* most entries are written as normalised names: share the text */
	d->text = strings_put(ps->str, s, len);
	if (strcmp(d->text + (d->wildcard ? 2 : 0), norm) == 0)
		d->name = d->text + (d->wildcard ? 2 : 0);
	else
		d->name = strings_put(ps->str, norm, strlen(norm));
	return true;
}

static bool
parse_list_start(struct parser *ps, json_t *v)
{
	if (!json_is_array(v))
		return fail(ps, false, "must be an array of strings, not %s",
		    json_kind(v));
	if (json_array_size(v) > POLICY_MAX_ENTRIES)
		return fail(ps, false, "more than %d entries",
		    POLICY_MAX_ENTRIES);
	return true;
}

static bool
parse_domains(struct parser *ps, json_t *v, bool denied,
    struct policy_domain **out, size_t *nout)
{
	json_t *e;
	size_t i;

	if (!parse_list_start(ps, v))
		return false;
	if (json_array_size(v) > 0 &&
	    (*out = calloc(json_array_size(v), sizeof(**out))) == NULL)
		return fail(ps, false, "out of memory");
	json_array_foreach(v, i, e) {
		path_push(ps, NULL, i);
		if (!json_is_string(e))
			return fail(ps, false, "must be a string, not %s",
			    json_kind(e));
		if (!parse_domain(ps, json_string_value(e),
		    json_string_length(e), denied, &(*out)[i]))
			return false;
		(*nout)++;
		path_pop(ps);
	}
	return true;
}

static bool
parse_allowed_domains(struct parser *ps, json_t *v, struct policy *p)
{
	return parse_domains(ps, v, false, &p->allowed, &p->nallowed);
}

static bool
parse_denied_domains(struct parser *ps, json_t *v, struct policy *p)
{
	return parse_domains(ps, v, true, &p->denied, &p->ndenied);
}

static bool
parse_cidrs(struct parser *ps, json_t *v, struct policy *p)
{
	json_t *e;
	size_t i;

	if (!parse_list_start(ps, v))
		return false;
	if (json_array_size(v) > 0 &&
	    (p->cidrs = calloc(json_array_size(v), sizeof(*p->cidrs))) == NULL)
		return fail(ps, false, "out of memory");
	json_array_foreach(v, i, e) {
		path_push(ps, NULL, i);
		if (!json_is_string(e))
			return fail(ps, false, "must be a string, not %s",
			    json_kind(e));
		if (!parse_cidr(ps, json_string_value(e),
		    json_string_length(e), &p->cidrs[i]))
			return false;
		p->ncidrs++;
		path_pop(ps);
	}
	return true;
}

static bool
parse_mode(struct parser *ps, json_t *v, struct policy *p)
{
	char q[QUOTE_MAX];
	const char *s;

	if (!json_is_string(v))
		return fail(ps, false,
		    "must be \"enforce\" or \"audit\", not %s", json_kind(v));
	s = json_string_value(v);
	if (strcmp(s, "enforce") == 0)
		p->mode = POLICY_ENFORCE;
	else if (strcmp(s, "audit") == 0)
		p->mode = POLICY_AUDIT;
	else
		return fail(ps, false, "%s: must be \"enforce\" or \"audit\"",
		    quote(q, sizeof(q), s, json_string_length(v)));
	return true;
}

/* Walks an object's members in document order, refusing unknown keys. */
static bool
parse_members(struct parser *ps, json_t *obj, const struct member *members,
    const char *known, struct policy *p)
{
	char q[QUOTE_MAX];
	const struct member *m;
	const char *key;
	json_t *v;

	if (!json_is_object(obj))
		return fail(ps, false, "must be an object, not %s",
		    json_kind(obj));
	json_object_foreach(obj, key, v) {
		path_push(ps, key, 0);
		for (m = members; m->key != NULL; m++)
			if (strcmp(m->key, key) == 0)
				break;
		if (m->key == NULL)
			return fail(ps, true, "unknown key %s (known: %s)",
			    quote(q, sizeof(q), key, strlen(key)), known);
		if (!m->parse(ps, v, p))
			return false;
		path_pop(ps);
	}
	return true;
}

static const struct member network_members[] = {
	{ "allowedDomains",	parse_allowed_domains },
	{ "deniedDomains",	parse_denied_domains },
	{ NULL,			NULL },
};

static const struct member sluice_members[] = {
	{ "mode",		parse_mode },
	{ "allowedCidrs",	parse_cidrs },
	{ NULL,			NULL },
};

static bool
parse_network(struct parser *ps, json_t *v, struct policy *p)
{
	return parse_members(ps, v, network_members,
	    "allowedDomains, deniedDomains", p);
}

static bool
parse_sluice(struct parser *ps, json_t *v, struct policy *p)
{
	return parse_members(ps, v, sluice_members, "mode, allowedCidrs", p);
}

static const struct member top_members[] = {
	{ "network",	parse_network },
	{ "sluice",	parse_sluice },
	{ NULL,		NULL },
};

/* ---- the index --------------------------------------------------------- */

/*
 * Room for every string the lists may keep: an entry's text and, for
 * names, its normalised name, which is never longer. What is not a
 * string, or not in a list, is refused later and needs none.
 */
static size_t
list_bytes(json_t *obj, const char *key, size_t per_entry)
{
	json_t *v = json_is_object(obj) ? json_object_get(obj, key) : NULL;
	json_t *e;
	size_t i, n = 0;

	if (!json_is_array(v))
		return 0;
	json_array_foreach(v, i, e)
		if (json_is_string(e))
			n += per_entry * (json_string_length(e) + 1);
	return n;
}

static size_t
strings_bound(json_t *root)
{
	json_t *net = json_object_get(root, "network");
	json_t *sl = json_object_get(root, "sluice");

	return list_bytes(net, "allowedDomains", 2) +
	    list_bytes(net, "deniedDomains", 2) +
	    list_bytes(sl, "allowedCidrs", 1) + 1;
}

/*
 * Moves the strings into a block of their exact size; entries point into
 * the old one, which is about twice as large as it needed to be.
 */
static bool
strings_settle(struct policy *p, struct strings *str)
{
	char *buf;
	size_t i;

	if ((buf = malloc(str->len + 1)) == NULL)
		return false;
	memcpy(buf, str->buf, str->len);
#define MOVE(s)	((s) = buf + ((s) - str->buf))
	for (i = 0; i < p->ncidrs; i++)
		MOVE(p->cidrs[i].text);
	for (i = 0; i < p->nallowed; i++) {
		MOVE(p->allowed[i].text);
		MOVE(p->allowed[i].name);
	}
	for (i = 0; i < p->ndenied; i++) {
		MOVE(p->denied[i].text);
		MOVE(p->denied[i].name);
	}
#undef MOVE
	free(str->buf);
	str->buf = buf;
	str->cap = str->len + 1;
	p->index->strings = buf;
	return true;
}

/*
 * FNV-1a over the name read from its end, so that the hashes of all its
 * parent domains come out of one pass over it; then the kind, and a final
 * mix so that the low bits index the table. Both ends are seeded, at
 * random for each index: with the hash known, a policy of 90,000 names
 * chosen to share the table's low bits took 3 s to load, under the lock
 * every verdict takes, and each lookup probed the whole cluster (found by
 * review, 2026-12-03). FNV is no keyed hash, but with its start unknown
 * neither its collisions nor the final mix's can be worked out offline.
 */
#define HASH_INIT(ix)	(2166136261u ^ (ix)->seed)
#define HASH_STEP(h, c)	(((h) ^ (unsigned char)(c)) * 16777619u)

static uint32_t
hash_final(uint32_t h, bool wildcard, uint32_t seed)
{
	h ^= (wildcard ? 0x9e3779b9u : 0) ^ (seed >> 16 | seed << 16);
	h ^= h >> 16;
	h *= 0x85ebca6bu;
	h ^= h >> 13;
	h *= 0xc2b2ae35u;
	h ^= h >> 16;
	return h;
}

static uint32_t
hash_name(const struct name_index *ix, const char *name, bool wildcard)
{
	uint32_t h = HASH_INIT(ix);
	size_t i = strlen(name);

	while (i-- > 0)
		h = HASH_STEP(h, name[i]);
	return hash_final(h, wildcard, ix->seed);
}

static int
domain_order(const void *a, const void *b, void *arg)
{
	const struct policy_domain *list = arg;
	const struct policy_domain *x = &list[*(const uint32_t *)a];
	const struct policy_domain *y = &list[*(const uint32_t *)b];
	int c;

	if (x->wildcard != y->wildcard)
		return x->wildcard ? 1 : -1;
	if ((c = strcmp(x->name, y->name)) != 0)
		return c;
	return *(const uint32_t *)a < *(const uint32_t *)b ? -1 : 1;
}

static bool
same_run(const struct policy_domain *x, const struct policy_domain *y)
{
	return x->wildcard == y->wildcard && strcmp(x->name, y->name) == 0;
}

static bool
names_index(struct name_index *ix, const struct policy_domain *list, size_t n)
{
	size_t i, k, norder = 0, nruns = 0, size, len;
	struct dns_hash_key key;
	struct name_run run;

	ix->list = list;
	ix->first_any = SIZE_MAX;
	ix->wild_min = SIZE_MAX;
	ix->wild_max = 0;
	if (n == 0)
		return true;
	dns_hash_key_new(&key, ix);
	ix->seed = (uint32_t)(key.k0 ^ key.k0 >> 32);
	if ((ix->order = calloc(n, sizeof(*ix->order))) == NULL)
		return false;
	for (i = 0; i < n; i++) {
		if (list[i].any) {
			if (ix->first_any == SIZE_MAX)
				ix->first_any = i;
			continue;
		}
		ix->order[norder++] = (uint32_t)i;
		if (list[i].wildcard) {
			len = strlen(list[i].name);
			if (len < ix->wild_min)
				ix->wild_min = len;
			if (len > ix->wild_max)
				ix->wild_max = len;
		}
	}
	qsort_r(ix->order, norder, sizeof(*ix->order), domain_order,
	    (void *)list);
	for (i = 0; i < norder; i++)
		if (i == 0 || !same_run(&list[ix->order[i - 1]],
		    &list[ix->order[i]]))
			nruns++;
	/* at most half full: probes stay short */
	for (size = 1; size < 2 * nruns; size *= 2)
		;
	if ((ix->slots = calloc(size, sizeof(*ix->slots))) == NULL)
		return false;
	ix->mask = size - 1;
	for (i = 0; i < norder; i = run.first + run.count) {
		run.first = (uint32_t)i;
		for (run.count = 1; i + run.count < norder &&
		    same_run(&list[ix->order[i]], &list[ix->order[i +
		    run.count]]); run.count++)
			;
		run.hash = hash_name(ix, list[ix->order[i]].name,
		    list[ix->order[i]].wildcard);
		for (k = run.hash & ix->mask; ix->slots[k].count != 0;
		    k = (k + 1) & ix->mask)
			;
		ix->slots[k] = run;
	}
	return true;
}

static int
cidr_order(const void *a, const void *b)
{
	const struct cidr_key *x = a, *y = b;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	return x->pos < y->pos ? -1 : 1;
}

static bool
cidrs_index(struct policy_index *ix, const struct policy_cidr *c, size_t n)
{
	size_t count[33] = { 0 }, start[33], i, off = 0;
	uint32_t mask;
	int len;

	if (n == 0)
		return true;
	if ((ix->keys = calloc(n, sizeof(*ix->keys))) == NULL)
		return false;
	for (i = 0; i < n; i++)
		count[__builtin_popcount(ntohl(c[i].mask))]++;
	for (len = 32; len >= 0; len--) {
		start[len] = off;
		off += count[len];
	}
	for (i = 0; i < n; i++) {
		mask = ntohl(c[i].mask);
		len = __builtin_popcount(mask);
		ix->keys[start[len]++] = (struct cidr_key){ ntohl(c[i].addr),
		    (uint32_t)i };
	}
	for (len = 32, off = 0; len >= 0; len--) {
		if (count[len] == 0)
			continue;
		qsort(ix->keys + off, count[len], sizeof(*ix->keys), cidr_order);
		ix->lens[ix->nlens++] = (struct cidr_len){
		    len == 0 ? 0 : UINT32_C(0xffffffff) << (32 - len),
		    (uint32_t)off, (uint32_t)count[len] };
		off += count[len];
	}
	return true;
}

/* The index and the block for the strings, before parsing. */
static bool
index_new(struct policy *p, struct strings *str, size_t cap)
{
	if ((p->index = calloc(1, sizeof(*p->index))) == NULL ||
	    (p->index->strings = malloc(cap)) == NULL)
		return false;
	str->buf = p->index->strings;
	str->len = 0;
	str->cap = cap;
	return true;
}

static int
port_cmp(const void *a, const void *b)
{
	return (int)*(const uint16_t *)a - (int)*(const uint16_t *)b;
}

/* The ports allowedDomains names, for policy_names_port. */
static bool
ports_index(struct policy_index *ix, const struct policy_domain *list,
    size_t n)
{
	size_t i, k = 0;

	if ((ix->ports = calloc(n + 2, sizeof(*ix->ports))) == NULL)
		return false;
	ix->ports[k++] = 80;
	ix->ports[k++] = 443;
	for (i = 0; i < n; i++)
		if (list[i].port != 0)
			ix->ports[k++] = list[i].port;
	qsort(ix->ports, k, sizeof(*ix->ports), port_cmp);
	for (i = 0, ix->nports = 0; i < k; i++)
		if (ix->nports == 0 || ix->ports[ix->nports - 1] != ix->ports[i])
			ix->ports[ix->nports++] = ix->ports[i];
	return true;
}

/* The index, once the lists are parsed. */
static bool
index_build(struct policy *p, struct strings *str)
{
	return strings_settle(p, str) &&
	    names_index(&p->index->allowed, p->allowed, p->nallowed) &&
	    names_index(&p->index->denied, p->denied, p->ndenied) &&
	    cidrs_index(p->index, p->cidrs, p->ncidrs) &&
	    ports_index(p->index, p->allowed, p->nallowed);
}

static void
index_free(struct policy_index *ix)
{
	if (ix == NULL)
		return;
	free(ix->strings);
	free(ix->allowed.order);
	free(ix->allowed.slots);
	free(ix->denied.order);
	free(ix->denied.slots);
	free(ix->keys);
	free(ix->ports);
	free(ix);
}

/* Parses p->text, which p owns; on failure the caller frees p. */
static bool
parse_text(struct policy *p, const char *origin, char *err, size_t errlen)
{
	struct parser ps = {
		.text = p->text,
		.len = p->textlen,
		.origin = origin,
		.err = err,
		.errlen = errlen,
	};
	struct strings str = { NULL, 0, 0 };
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0, i;
	json_error_t jerr;
	json_t *root;
	bool ok;

	if (EVP_Digest(p->text, p->textlen, md, &mdlen, EVP_sha256(),
	    NULL) != 1 || mdlen != 32) {
		set_err(err, errlen, "%s: cannot compute SHA-256", origin);
		return false;
	}
	for (i = 0; i < mdlen; i++)
		snprintf(p->sha256 + 2 * i, 3, "%02x", md[i]);

	/* No JSON_DISABLE_EOF_CHECK: text after the object is an error. */
	root = json_loadb(p->text, p->textlen, JSON_REJECT_DUPLICATES, &jerr);
	if (root == NULL) {
		set_err(err, errlen, "%s:%d:%d: %s", origin, jerr.line,
		    jerr.column, jerr.text);
		return false;
	}
	if (!json_is_object(root)) {
		ok = fail(&ps, false, "top level must be an object, not %s",
		    json_kind(root));
	} else if (!index_new(p, &str, strings_bound(root))) {
		set_err(err, errlen, "%s: out of memory", origin);
		ok = false;
	} else {
		ps.str = &str;
		ok = parse_members(&ps, root, top_members, "network, sluice",
		    p);
		if (ok && !index_build(p, &str)) {
			set_err(err, errlen, "%s: out of memory", origin);
			ok = false;
		}
	}
	json_decref(root);
	return ok;
}

struct policy *
policy_parse(const char *text, size_t len, const char *origin, char *err,
    size_t errlen)
{
	struct policy *p;

	if (origin == NULL)
		origin = "policy";
	if (len > POLICY_MAX_BYTES) {
		set_err(err, errlen, "%s: larger than %d bytes", origin,
		    POLICY_MAX_BYTES);
		return NULL;
	}
	if ((p = calloc(1, sizeof(*p))) == NULL ||
	    (p->text = malloc(len + 1)) == NULL) {
		set_err(err, errlen, "%s: out of memory", origin);
		free(p);
		return NULL;
	}
	if (len > 0)
		memcpy(p->text, text, len);
	p->text[len] = '\0';
	p->textlen = len;
	if (!parse_text(p, origin, err, errlen)) {
		policy_free(p);
		return NULL;
	}
	return p;
}

struct policy *
policy_load(const char *path, char *err, size_t errlen)
{
	struct policy *p = NULL;
	char *buf = NULL, *shrunk;
	size_t len = 0, n;
	FILE *f;

	if ((f = fopen(path, "rb")) == NULL) {
		set_err(err, errlen, "%s: %s", path, strerror(errno));
		return NULL;
	}
	/* Reading one byte more than allowed tells a larger file apart. */
	if ((buf = malloc(POLICY_MAX_BYTES + 1)) == NULL) {
		set_err(err, errlen, "%s: out of memory", path);
		goto cleanup;
	}
	while (len < POLICY_MAX_BYTES + 1 &&
	    (n = fread(buf + len, 1, POLICY_MAX_BYTES + 1 - len, f)) > 0)
		len += n;
	if (ferror(f)) {
		set_err(err, errlen, "%s: %s", path, strerror(errno));
		goto cleanup;
	}
	if (len > POLICY_MAX_BYTES) {
		set_err(err, errlen, "%s: larger than %d bytes", path,
		    POLICY_MAX_BYTES);
		goto cleanup;
	}
	buf[len] = '\0';
	if ((shrunk = realloc(buf, len + 1)) != NULL)
		buf = shrunk;
	if ((p = calloc(1, sizeof(*p))) == NULL) {
		set_err(err, errlen, "%s: out of memory", path);
		goto cleanup;
	}
	p->text = buf;
	p->textlen = len;
	buf = NULL;
	if (!parse_text(p, path, err, errlen)) {
		policy_free(p);
		p = NULL;
	}
cleanup:
	free(buf);
	fclose(f);
	return p;
}

void
policy_free(struct policy *p)
{
	if (p == NULL)
		return;
	free(p->cidrs);
	free(p->allowed);
	free(p->denied);
	index_free(p->index);
	free(p->text);
	free(p);
}

/* The first key of len's run with addr (host order), or the run's end. */
static size_t
cidr_lower_bound(const struct policy_index *ix, const struct cidr_len *len,
    uint32_t addr)
{
	size_t lo = len->first, hi = (size_t)len->first + len->count, mid;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (ix->keys[mid].addr < addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

const struct policy_cidr *
policy_match_cidr(const struct policy *p, uint32_t daddr, uint16_t dport,
    bool *addr_matched)
{
	const struct policy_index *ix = p->index;
	const struct policy_cidr *c;
	size_t best = SIZE_MAX, k, l, end;
	uint32_t addr = ntohl(daddr), net;
	bool addr_seen = false;

	/* the first entry in the list covering the address and the port:
	 * the lowest position over every prefix length's run */
	for (l = 0; ix != NULL && l < ix->nlens; l++) {
		net = addr & ix->lens[l].mask;
		end = (size_t)ix->lens[l].first + ix->lens[l].count;
		for (k = cidr_lower_bound(ix, &ix->lens[l], net);
		    k < end && ix->keys[k].addr == net &&
		    ix->keys[k].pos < best; k++) {
			c = &p->cidrs[ix->keys[k].pos];
			addr_seen = true;
			if (dport >= c->port_lo && dport <= c->port_hi)
				best = ix->keys[k].pos;
		}
	}
	if (addr_matched != NULL)
		*addr_matched = best == SIZE_MAX && addr_seen;
	return best == SIZE_MAX ? NULL : &p->cidrs[best];
}

const char *
policy_mode_name(enum policy_mode mode)
{
	return mode == POLICY_AUDIT ? "audit" : "enforce";
}

bool
policy_covers_addr(const struct policy *p, uint32_t addr)
{
	const struct policy_index *ix = p->index;
	const struct policy_cidr *c;
	uint32_t a = ntohl(addr), net;
	size_t l, k, end;

	for (l = 0; ix != NULL && l < ix->nlens; l++) {
		net = a & ix->lens[l].mask;
		end = (size_t)ix->lens[l].first + ix->lens[l].count;
		for (k = cidr_lower_bound(ix, &ix->lens[l], net);
		    k < end && ix->keys[k].addr == net; k++) {
			c = &p->cidrs[ix->keys[k].pos];
			if (c->port_lo == 0 && c->port_hi == 65535)
				return true;
		}
	}
	return false;
}

static bool
domain_port_ok(const struct policy_domain *d, uint16_t port)
{
	if (d->port != 0)
		return port == d->port;
	return port == 443 || port == 80;
}

/* What a list says about a name: the first entry matching it, and the
 * first matching it for the port too (SIZE_MAX: none). */
struct name_hits {
	int	 port;		/* < 0: any entry matching the name will do */
	size_t	 first;
	size_t	 first_port;
};

/* The run of (name[0..len), wildcard) in ix, if there is one. */
static void
names_probe(const struct name_index *ix, const char *name, size_t len,
    bool wildcard, uint32_t h, struct name_hits *hits)
{
	const struct name_run *run;
	const struct policy_domain *d;
	size_t k, i, pos;

	h = hash_final(h, wildcard, ix->seed);
	for (k = h & ix->mask; ix->slots[k].count != 0; k = (k + 1) & ix->mask) {
		run = &ix->slots[k];
		d = &ix->list[ix->order[run->first]];
		if (run->hash != h || d->wildcard != wildcard ||
		    strncmp(d->name, name, len) != 0 || d->name[len] != '\0')
			continue;
		/* a run is in list order: its first is the first match */
		if (ix->order[run->first] < hits->first)
			hits->first = ix->order[run->first];
		for (i = 0; i < run->count; i++) {
			pos = ix->order[run->first + i];
			if (pos >= hits->first_port)
				break;
			if (hits->port < 0 ||
			    domain_port_ok(&ix->list[pos], (uint16_t)hits->port)) {
				hits->first_port = pos;
				break;
			}
		}
		return;
	}
}

/*
 * The entries of a list matching name: the entry for the name itself, and
 * "*.parent" entries for each parent domain (a proper one: "*.a.com" is
 * not "a.com"), probed from the longest parent down.
 */
static void
names_lookup(const struct name_index *ix, const char *name,
    struct name_hits *hits)
{
	size_t len = strlen(name), i;
	uint32_t h = HASH_INIT(ix);

	hits->first = hits->first_port = ix->first_any;
	if (ix->slots == NULL)
		return;
	for (i = len; i-- > 0; ) {
		h = HASH_STEP(h, name[i]);
		/* name[i..] follows a dot that has a label before it */
		if (i >= 2 && name[i - 1] == '.' && len - i >= ix->wild_min &&
		    len - i <= ix->wild_max)
			names_probe(ix, name + i, len - i, true, h, hits);
	}
	names_probe(ix, name, len, false, h, hits);
}

size_t
policy_probe_max(const struct policy *p)
{
	const struct name_index *ix;
	size_t k, run = 0, max = 0;

	if (p->index == NULL || (ix = &p->index->allowed)->slots == NULL)
		return 0;
	for (k = 0; k <= ix->mask; k++) {
		run = ix->slots[k].count != 0 ? run + 1 : 0;
		if (run > max)
			max = run;
	}
	return max;
}

bool
policy_names_port(const struct policy *p, uint16_t port)
{
	return p->index != NULL && p->index->nports > 0 &&
	    bsearch(&port, p->index->ports, p->index->nports,
	    sizeof(port), port_cmp) != NULL;
}

enum policy_name_verdict
policy_match_name(const struct policy *p, const char *name, int port,
    const struct policy_domain **rule)
{
	struct name_hits denied = { .port = -1 }, hits = { .port = port };

	*rule = NULL;
	if (p->index == NULL)		/* not made by the parser: empty */
		return POLICY_NAME_NOT_ALLOWED;
	/* deniedDomains wins, by its first entry matching the name */
	names_lookup(&p->index->denied, name, &denied);
	if (denied.first != SIZE_MAX) {
		*rule = &p->denied[denied.first];
		return POLICY_NAME_DENIED;
	}
	names_lookup(&p->index->allowed, name, &hits);
	if (hits.first_port != SIZE_MAX) {
		*rule = &p->allowed[hits.first_port];
		return POLICY_NAME_ALLOWED;
	}
	if (hits.first != SIZE_MAX) {
		*rule = &p->allowed[hits.first];
		return POLICY_NAME_PORT_NOT_ALLOWED;
	}
	return POLICY_NAME_NOT_ALLOWED;
}
