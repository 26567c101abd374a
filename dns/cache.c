/* cache.c: upstream answers kept for their TTL, shared by every sandbox. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dns/dns.h"

/*
 * What is kept is the upstream's answer as the resolver parsed it (rcode,
 * flags and the A, AAAA and CNAME records with their TTLs), before any
 * sandbox's policy touched it: a hit goes through the asking sandbox's
 * filter and bindings exactly as a fresh answer would. Only whole
 * positive answers are kept (NOERROR with at least one record, TC clear):
 * a negative one carries its TTL in the authority section's SOA, which
 * the parser does not read, and guessing one would make a name that
 * appears upstream invisible for the guess.
 *
 * A fixed array of entries, a chained hash over them and a list in order
 * of use; the least recently used entry makes room for a new one. The
 * records are packed into the entry (type, TTL, owner, data), so an entry
 * costs its name and a kilobyte at most, whatever DNS_RR_MAX is.
 */
#define BLOB_MAX	1024

struct centry {
	char		 name[DNS_NAME_MAX + 1];	/* normalised */
	uint16_t	 qtype, qclass;
	uint32_t	 hash;
	uint64_t	 stored_ms, expires_ms;
	uint16_t	 flags;
	uint8_t		 rcode;
	uint8_t		 nrr;
	uint16_t	 bloblen;
	size_t		 nskipped;
	int		 chain;			/* next in the bucket, -1 */
	int		 prev, next;		/* use order; free list */
	uint8_t		 blob[BLOB_MAX];
};

struct dns_cache {
	struct centry	*e;
	size_t		 cap, used;
	int		*bucket;		/* nbucket, -1: empty */
	size_t		 nbucket;		/* a power of two */
	int		 head, tail;		/* most, least recently used */
	int		 free_head;
	struct dns_hash_key key;	/* names come from sandboxes and
					 * zones: keyed, see siphash.c */
	struct dns_cache_stats st;
};

static uint32_t
hash_of(const struct dns_cache *c, const char *name, uint16_t qtype,
    uint16_t qclass)
{
	uint8_t buf[4 + DNS_NAME_MAX];
	size_t n = strnlen(name, DNS_NAME_MAX);

	buf[0] = (uint8_t)(qtype >> 8);
	buf[1] = (uint8_t)qtype;
	buf[2] = (uint8_t)(qclass >> 8);
	buf[3] = (uint8_t)qclass;
	memcpy(buf + 4, name, n);
	return (uint32_t)dns_siphash(&c->key, buf, 4 + n);
}

struct dns_cache *
dns_cache_new(size_t entries)
{
	struct dns_cache *c;
	size_t i;

	if (entries == 0 || entries > DNS_CACHE_MAX) {
		errno = EINVAL;
		return NULL;
	}
	if ((c = calloc(1, sizeof(*c))) == NULL)
		return NULL;
	for (c->nbucket = 16; c->nbucket < 2 * entries; c->nbucket *= 2)
		;
	/* untouched entries cost address space only, not memory */
	c->e = calloc(entries, sizeof(*c->e));
	c->bucket = malloc(c->nbucket * sizeof(*c->bucket));
	if (c->e == NULL || c->bucket == NULL) {
		dns_cache_free(c);
		errno = ENOMEM;
		return NULL;
	}
	c->cap = entries;
	dns_hash_key_new(&c->key, c);
	for (i = 0; i < c->nbucket; i++)
		c->bucket[i] = -1;
	c->head = c->tail = -1;
	c->free_head = -1;
	for (i = entries; i-- > 0; ) {
		c->e[i].next = c->free_head;
		c->free_head = (int)i;
	}
	return c;
}

void
dns_cache_free(struct dns_cache *c)
{
	if (c == NULL)
		return;
	free(c->e);
	free(c->bucket);
	free(c);
}

/* ---- the use list and the hash chains ---------------------------------- */

static void
use_unlink(struct dns_cache *c, int i)
{
	struct centry *x = &c->e[i];

	if (x->prev != -1)
		c->e[x->prev].next = x->next;
	else
		c->head = x->next;
	if (x->next != -1)
		c->e[x->next].prev = x->prev;
	else
		c->tail = x->prev;
}

static void
use_push(struct dns_cache *c, int i)
{
	struct centry *x = &c->e[i];

	x->prev = -1;
	x->next = c->head;
	if (c->head != -1)
		c->e[c->head].prev = i;
	else
		c->tail = i;
	c->head = i;
}

/* Takes entry i out of the cache and onto the free list. */
static void
drop(struct dns_cache *c, int i)
{
	int *p = &c->bucket[c->e[i].hash & (c->nbucket - 1)];

	while (*p != i)
		p = &c->e[*p].chain;
	*p = c->e[i].chain;
	use_unlink(c, i);
	c->e[i].next = c->free_head;
	c->free_head = i;
	c->used--;
}

static int
find(struct dns_cache *c, const char *name, uint16_t qtype, uint16_t qclass,
    uint32_t h)
{
	int i;

	for (i = c->bucket[h & (c->nbucket - 1)]; i != -1; i = c->e[i].chain)
		if (c->e[i].hash == h && c->e[i].qtype == qtype &&
		    c->e[i].qclass == qclass && strcmp(c->e[i].name, name) == 0)
			return i;
	return -1;
}

/* ---- packing records ---------------------------------------------------- */

static size_t
put_str(uint8_t *p, const char *s)
{
	size_t n = strlen(s);

	p[0] = (uint8_t)n;
	memcpy(p + 1, s, n);
	return 1 + n;
}

static size_t
get_str(const uint8_t *p, char *s)
{
	size_t n = p[0];

	memcpy(s, p + 1, n);
	s[n] = '\0';
	return 1 + n;
}

/* Packs rr into blob; returns the length, 0 if it does not fit. */
static size_t
pack(uint8_t *blob, const struct dns_rr *rr, size_t nrr)
{
	size_t off = 0, i, need;

	for (i = 0; i < nrr; i++) {
		const struct dns_rr *x = &rr[i];

		if (x->type != DNS_T_A && x->type != DNS_T_AAAA &&
		    x->type != DNS_T_CNAME)
			return 0;
		need = 2 + 4 + 1 + strlen(x->name) + 1 +
		    (x->type == DNS_T_A ? 4 : x->type == DNS_T_AAAA ? 16 :
		    strlen(x->data.cname));
		if (off + need > BLOB_MAX)
			return 0;
		blob[off++] = (uint8_t)(x->type >> 8);
		blob[off++] = (uint8_t)x->type;
		memcpy(blob + off, &x->ttl, 4);
		off += 4;
		off += put_str(blob + off, x->name);
		if (x->type == DNS_T_A) {
			blob[off++] = 4;
			memcpy(blob + off, x->data.a, 4);
			off += 4;
		} else if (x->type == DNS_T_AAAA) {
			blob[off++] = 16;
			memcpy(blob + off, x->data.aaaa, 16);
			off += 16;
		} else {
			off += put_str(blob + off, x->data.cname);
		}
	}
	return off;
}

static void
unpack(const struct centry *x, struct dns_rr *rr, uint32_t age_s)
{
	const uint8_t *p = x->blob;
	size_t i;

	for (i = 0; i < x->nrr; i++) {
		memset(&rr[i], 0, offsetof(struct dns_rr, data));
		rr[i].type = (uint16_t)(p[0] << 8 | p[1]);
		memcpy(&rr[i].ttl, p + 2, 4);
		rr[i].ttl -= age_s;	/* every TTL is above the age */
		p += 6;
		p += get_str(p, rr[i].name);
		if (rr[i].type == DNS_T_CNAME) {
			p += get_str(p, rr[i].data.cname);
		} else {
			memcpy(rr[i].data.aaaa, p + 1, p[0]);
			p += 1 + p[0];
		}
	}
}

/* ---- lookups and insertions --------------------------------------------- */

bool
dns_cache_get(struct dns_cache *c, const char *name, uint16_t qtype,
    uint16_t qclass, uint64_t now_ms, struct dns_response *out)
{
	uint32_t h = hash_of(c, name, qtype, qclass);
	struct centry *x;
	int i;

	if ((i = find(c, name, qtype, qclass, h)) == -1) {
		c->st.misses++;
		return false;
	}
	x = &c->e[i];
	if (now_ms >= x->expires_ms) {
		drop(c, i);
		c->st.expired++;
		c->st.misses++;
		return false;
	}
	use_unlink(c, i);
	use_push(c, i);
	c->st.hits++;
	out->id = 0;
	out->flags = x->flags;
	out->rcode = x->rcode;
	strcpy(out->qname, x->name);
	out->qtype = qtype;
	out->qclass = qclass;
	out->nrr = x->nrr;
	out->nskipped = x->nskipped;
	unpack(x, out->rr, (uint32_t)((now_ms - x->stored_ms) / 1000));
	return true;
}

bool
dns_cache_put(struct dns_cache *c, const char *name, uint16_t qtype,
    uint16_t qclass, uint64_t now_ms, const struct dns_response *r)
{
	uint32_t h = hash_of(c, name, qtype, qclass), ttl = UINT32_MAX;
	uint8_t blob[BLOB_MAX];
	struct centry *x;
	size_t len, i;
	int k;

	/* TC: the upstream cut it short; whole answers only */
	if (r->rcode != DNS_R_NOERROR || r->nrr == 0 || r->nrr > UINT8_MAX ||
	    (r->flags & DNS_FLAG_TC) || strlen(name) > DNS_NAME_MAX)
		return false;
	for (i = 0; i < r->nrr; i++)
		if (r->rr[i].ttl < ttl)
			ttl = r->rr[i].ttl;
	if (ttl > DNS_CACHE_TTL_MAX)
		ttl = DNS_CACHE_TTL_MAX;
	if (ttl == 0)
		return false;		/* not to be kept, says its owner */
	/* packed before anything is dropped: an answer too large to keep
	 * leaves the cache as it was, like any other that is not kept */
	if ((len = pack(blob, r->rr, r->nrr)) == 0)
		return false;
	/* a newer answer replaces the old one */
	if ((k = find(c, name, qtype, qclass, h)) != -1)
		drop(c, k);
	if (c->free_head == -1) {
		c->st.evicted++;
		drop(c, c->tail);
	}
	k = c->free_head;
	x = &c->e[k];
	c->free_head = x->next;
	memcpy(x->blob, blob, len);
	strcpy(x->name, name);
	x->qtype = qtype;
	x->qclass = qclass;
	x->hash = h;
	x->stored_ms = now_ms;
	x->expires_ms = now_ms + (uint64_t)ttl * 1000;
	x->flags = r->flags;
	x->rcode = r->rcode;
	x->nrr = (uint8_t)r->nrr;
	x->bloblen = (uint16_t)len;
	x->nskipped = r->nskipped;
	x->chain = c->bucket[h & (c->nbucket - 1)];
	c->bucket[h & (c->nbucket - 1)] = k;
	use_push(c, k);
	c->used++;
	c->st.stored++;
	return true;
}

void
dns_cache_flush(struct dns_cache *c)
{
	while (c->head != -1)
		drop(c, c->head);
}

void
dns_cache_stats(const struct dns_cache *c, struct dns_cache_stats *out)
{
	*out = c->st;
	out->entries = c->used;
	out->capacity = c->cap;
}
