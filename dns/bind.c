/* bind.c: (sandbox, IPv4 address) -> resolved names, bounded and expiring. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dns/dns.h"

/*
 * Layout: a fixed array of entries allocated by dns_bindings_new, hash
 * buckets of doubly linked chains keyed on (sandbox, addr) alone, so that
 * every name bound to one (sandbox, addr) sits in one chain (what a new
 * flow's decision walks), a second set of chains keyed on (sandbox, addr,
 * name), so that an answer refreshing a binding finds it without walking
 * every other name of its address (an address of a CDN or a wildcard
 * carries hundreds; the bench's 100 names on one address made that walk
 * the largest part of sluiced's own CPU per query), and two
 * binary min-heaps on expiry over the same entries: one over all of them
 * (the candidate for reclaiming at the total bound) and one per sandbox
 * (the candidate at that sandbox's bounds). Either candidate is the heap's
 * top, and freeing it costs O(log n).
 *
 * Per-sandbox state is a record found through a second hash on the
 * sandbox id, because the ids are the caller's and may be any uint32_t
 * (an ifindex grows without a small bound). Records come from a fixed
 * pool as large as the entry array: a record exists only while its
 * sandbox holds at least one entry. A record's heap array is the one
 * allocation after dns_bindings_new: it doubles up to the per-sandbox
 * bound and halves when three quarters are unused, so the arrays together
 * stay within a small multiple of the entries in use.
 *
 * Entries and records that were never used are not on the free lists but
 * beyond a mark, so dns_bindings_new writes neither array: the memory
 * behind them (about 300 bytes an entry, mostly the name) is only touched
 * as the table fills.
 *
 * A live binding is never evicted: an answer carrying its address has
 * already gone to the sandbox, and dropping the binding would turn that
 * answer into refused connections. At a bound only expired entries are
 * reclaimed; when none is, the new binding is refused and the caller
 * leaves the address out of its answer. So an add of a new binding fails
 * with ENOSPC when, in live bindings (exactly, but for the one case
 * below),
 *
 *   - the sandbox already holds per_addr names for that address: every
 *     new flow to the address walks its chain and checks each name there
 *     against the policy until one allows the flow, so this bounds the
 *     work of one decision (and of a new binding's count here; a binding
 *     found again is found through its name chain, without that walk);
 *   - or the sandbox already holds per_sandbox;
 *   - or only the last quarter of the table is free and the sandbox
 *     already holds light or more: that quarter is kept for sandboxes
 *     that hold little (as the hold table's is, gateway/limits.c), so
 *     that a few sandboxes filling their own bounds together cannot take
 *     every entry;
 *   - or the table holds total.
 *
 * To tell live entries from dead ones at the bounds: at per_sandbox and
 * total the soonest entry (of the sandbox, of all) is reclaimed if it is
 * dead, and the new binding takes its place. In the last quarter, the
 * sandbox's own dead entries go until it holds fewer than light, and if it
 * still holds light, anyone's until the table is out of the quarter; but
 * no more than BIND_RECLAIM_QUARTER in one add. That is the one case: just
 * after a mass expiry, a sandbox holding light or more may be refused
 * while dead entries still fill the quarter; each of its adds frees 256
 * more (and every add two), so in a table of 65,536 that ends within 64
 * of its adds.
 */

#define BIND_NIL		UINT32_MAX
#define BIND_MAX_CAPACITY	((size_t)1 << 31)
/* How many expired entries every add frees, needed or not. With two, an
 * add removes up to two dead entries while it creates at most one, so dead
 * entries cannot pile up in the chains between bounds. The unit test's
 * reference model mirrors this number. */
#define BIND_RECLAIM_PER_ADD	2
/* How many expired entries an add in the last quarter may free to tell
 * live entries from dead ones: about 0.15 ms. Without a bound, the first
 * add there after most of a full table expired freed 16,384 at once
 * (6 ms). The unit test's reference model mirrors this number too. */
#define BIND_RECLAIM_QUARTER	256
#define BIND_HEAP_MIN		8

enum { HEAP_ALL, HEAP_SANDBOX };

struct heap {
	uint32_t	*idx;		/* entries, soonest expiry first */
	uint32_t	 n;
	uint32_t	 cap;
};

struct binding {
	uint64_t	 expires_ms;
	uint32_t	 sandbox;
	uint32_t	 addr;
	uint32_t	 next;		/* bucket chain, or free list */
	uint32_t	 prev;		/* NIL at a chain's head */
	uint32_t	 bucket;
	uint32_t	 nnext;		/* name chain */
	uint32_t	 nbucket;
	uint32_t	 owner;		/* its sandbox's record */
	uint32_t	 pos[2];	/* in the heaps */
	uint8_t		 namelen;
	char		 name[DNS_NAME_MAX + 1];	/* lower case */
};

struct sandbox_rec {
	uint32_t	 id;
	uint32_t	 next;		/* hash chain, or the free list */
	struct heap	 heap;		/* heap.n is its count */
};

struct dns_bindings {
	struct binding		*entries;
	uint32_t		*buckets;	/* by (sandbox, addr) */
	uint32_t		*name_buckets;	/* by (sandbox, addr, name) */
	struct heap		 all;
	struct sandbox_rec	*recs;
	uint32_t		*rec_buckets;	/* by sandbox */
	uint32_t		 bucket_mask;	/* every bucket array */
	uint32_t		 capacity;
	uint32_t		 per_sandbox;
	uint32_t		 per_addr;	/* UINT32_MAX: no bound */
	uint32_t		 light;		/* UINT32_MAX: no quarter kept */
	uint32_t		 free_head;	/* freed entries */
	uint32_t		 fresh;		/* never used from here on */
	uint32_t		 rec_free;
	uint32_t		 rec_fresh;
	struct dns_hash_key	 key;		/* of the buckets */
};

/* ---- hashing ------------------------------------------------------------- */

/* The hash of an 8-byte message, m's bytes least significant first. */
static uint64_t
hash_u64(const struct dns_bindings *b, uint64_t m)
{
	uint8_t buf[8];
	size_t i;

	for (i = 0; i < 8; i++)
		buf[i] = (uint8_t)(m >> 8 * i);
	return dns_siphash(&b->key, buf, sizeof(buf));
}

static uint32_t
binding_bucket(const struct dns_bindings *b, uint32_t sandbox, uint32_t addr)
{
	return (uint32_t)hash_u64(b, (uint64_t)sandbox << 32 | addr) &
	    b->bucket_mask;
}

/* lname: the name in lower case, len bytes */
static uint32_t
name_bucket(const struct dns_bindings *b, uint32_t sandbox, uint32_t addr,
    const char *lname, size_t len)
{
	uint8_t buf[8 + DNS_NAME_MAX];
	size_t i;

	for (i = 0; i < 4; i++) {
		buf[i] = (uint8_t)(sandbox >> 8 * i);
		buf[4 + i] = (uint8_t)(addr >> 8 * i);
	}
	memcpy(buf + 8, lname, len);
	return (uint32_t)dns_siphash(&b->key, buf, 8 + len) & b->bucket_mask;
}

static uint32_t
rec_bucket(const struct dns_bindings *b, uint32_t sandbox)
{
	return (uint32_t)hash_u64(b, sandbox) & b->bucket_mask;
}

/* ---- expiry heaps -------------------------------------------------------- */

static uint64_t
heap_expiry(const struct dns_bindings *b, const struct heap *h, uint32_t pos)
{
	return b->entries[h->idx[pos]].expires_ms;
}

static void
heap_set(struct dns_bindings *b, struct heap *h, int which, uint32_t pos,
    uint32_t idx)
{
	h->idx[pos] = idx;
	b->entries[idx].pos[which] = pos;
}

static void
heap_sift_up(struct dns_bindings *b, struct heap *h, int which, uint32_t pos)
{
	uint32_t idx = h->idx[pos], parent;
	uint64_t exp = b->entries[idx].expires_ms;

	while (pos > 0) {
		parent = (pos - 1) / 2;
		if (heap_expiry(b, h, parent) <= exp)
			break;
		heap_set(b, h, which, pos, h->idx[parent]);
		pos = parent;
	}
	heap_set(b, h, which, pos, idx);
}

static void
heap_sift_down(struct dns_bindings *b, struct heap *h, int which, uint32_t pos)
{
	uint32_t idx = h->idx[pos], child;
	uint64_t exp = b->entries[idx].expires_ms;

	for (;;) {
		/* n <= 2^31, so 2 * pos + 1 does not overflow */
		child = 2 * pos + 1;
		if (child >= h->n)
			break;
		if (child + 1 < h->n &&
		    heap_expiry(b, h, child + 1) < heap_expiry(b, h, child))
			child++;
		if (heap_expiry(b, h, child) >= exp)
			break;
		heap_set(b, h, which, pos, h->idx[child]);
		pos = child;
	}
	heap_set(b, h, which, pos, idx);
}

/* After the expiry of the entry at pos changed either way. */
static void
heap_fix(struct dns_bindings *b, struct heap *h, int which, uint32_t pos)
{
	if (pos > 0 &&
	    heap_expiry(b, h, (pos - 1) / 2) > heap_expiry(b, h, pos))
		heap_sift_up(b, h, which, pos);
	else
		heap_sift_down(b, h, which, pos);
}

/* The caller made room: h->n < h->cap. */
static void
heap_push(struct dns_bindings *b, struct heap *h, int which, uint32_t idx)
{
	heap_set(b, h, which, h->n, idx);
	h->n++;
	heap_sift_up(b, h, which, h->n - 1);
}

static void
heap_remove(struct dns_bindings *b, struct heap *h, int which, uint32_t pos)
{
	uint32_t last = h->idx[--h->n];

	if (pos != h->n) {
		heap_set(b, h, which, pos, last);
		heap_fix(b, h, which, pos);
	}
}

/* Room for one more in a sandbox's heap; the bound check guarantees
 * h->n < limit. Returns 0 or -1 (ENOMEM). */
static int
heap_reserve(struct heap *h, uint32_t limit)
{
	size_t cap;
	uint32_t *p;

	if (h->n < h->cap)
		return 0;
	cap = h->cap == 0 ? BIND_HEAP_MIN : (size_t)h->cap * 2;
	if (cap > limit)
		cap = limit;
	if ((p = realloc(h->idx, cap * sizeof(*p))) == NULL)
		return -1;
	h->idx = p;
	h->cap = (uint32_t)cap;
	return 0;
}

static void
heap_shrink(struct heap *h)
{
	uint32_t *p;

	if (h->cap <= BIND_HEAP_MIN || h->n > h->cap / 4)
		return;
	/* A failed shrink keeps the larger array, which is still valid. */
	if ((p = realloc(h->idx, (size_t)(h->cap / 2) * sizeof(*p))) != NULL) {
		h->idx = p;
		h->cap /= 2;
	}
}

/* ---- sandbox records ----------------------------------------------------- */

static uint32_t
rec_lookup(const struct dns_bindings *b, uint32_t sandbox)
{
	uint32_t ri;

	for (ri = b->rec_buckets[rec_bucket(b, sandbox)]; ri != BIND_NIL;
	    ri = b->recs[ri].next)
		if (b->recs[ri].id == sandbox)
			return ri;
	return BIND_NIL;
}

/*
 * The pool never runs dry: records in use are at most entries in use, and
 * a record is only taken for an entry about to be taken while fewer than
 * total are in use.
 */
static uint32_t
rec_new(struct dns_bindings *b, uint32_t sandbox)
{
	uint32_t ri, bucket = rec_bucket(b, sandbox);
	struct sandbox_rec *r;

	if ((ri = b->rec_free) != BIND_NIL)
		b->rec_free = b->recs[ri].next;
	else
		ri = b->rec_fresh++;
	r = &b->recs[ri];
	r->id = sandbox;
	r->next = b->rec_buckets[bucket];
	b->rec_buckets[bucket] = ri;
	return ri;
}

static void
rec_release(struct dns_bindings *b, uint32_t ri)
{
	struct sandbox_rec *r = &b->recs[ri];
	uint32_t *link;

	for (link = &b->rec_buckets[rec_bucket(b, r->id)]; *link != ri;
	    link = &b->recs[*link].next)
		;
	*link = r->next;
	free(r->heap.idx);
	memset(&r->heap, 0, sizeof(r->heap));
	r->next = b->rec_free;
	b->rec_free = ri;
}

/* ---- entries ------------------------------------------------------------- */

static char
ascii_lower(char c)
{
	return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

/* The entry of (sandbox, addr, lname) in name chain nbucket, live or
 * not, or NIL. */
static uint32_t
binding_find(const struct dns_bindings *b, uint32_t nbucket, uint32_t sandbox,
    uint32_t addr, const char *lname, size_t len)
{
	const struct binding *e;
	uint32_t idx;

	for (idx = b->name_buckets[nbucket]; idx != BIND_NIL; idx = e->nnext) {
		e = &b->entries[idx];
		if (e->sandbox == sandbox && e->addr == addr &&
		    e->namelen == len && memcmp(e->name, lname, len) == 0)
			return idx;
	}
	return BIND_NIL;
}

/* How many live entries (sandbox, addr) has; its chain is bucket. */
static uint32_t
binding_live(const struct dns_bindings *b, uint32_t bucket, uint32_t sandbox,
    uint32_t addr, uint64_t now_ms)
{
	const struct binding *e;
	uint32_t idx, live = 0;

	for (idx = b->buckets[bucket]; idx != BIND_NIL; idx = e->next) {
		e = &b->entries[idx];
		if (e->sandbox == sandbox && e->addr == addr &&
		    e->expires_ms > now_ms)
			live++;
	}
	return live;
}

static void
binding_remove(struct dns_bindings *b, uint32_t idx)
{
	struct binding *e = &b->entries[idx];
	struct sandbox_rec *r = &b->recs[e->owner];
	uint32_t *link;

	for (link = &b->name_buckets[e->nbucket]; *link != idx;
	    link = &b->entries[*link].nnext)
		;
	*link = e->nnext;
	if (e->prev != BIND_NIL)
		b->entries[e->prev].next = e->next;
	else
		b->buckets[e->bucket] = e->next;
	if (e->next != BIND_NIL)
		b->entries[e->next].prev = e->prev;

	heap_remove(b, &b->all, HEAP_ALL, e->pos[HEAP_ALL]);
	heap_remove(b, &r->heap, HEAP_SANDBOX, e->pos[HEAP_SANDBOX]);
	if (r->heap.n == 0)
		rec_release(b, e->owner);
	else
		heap_shrink(&r->heap);

	e->next = b->free_head;
	b->free_head = idx;
}

/* Frees the soonest-expiring entry of h if it is dead at now_ms. h may be
 * a record's heap that goes away with that entry. */
static bool
reclaim_top(struct dns_bindings *b, const struct heap *h, uint64_t now_ms)
{
	if (h->n == 0 || heap_expiry(b, h, 0) > now_ms)
		return false;
	binding_remove(b, h->idx[0]);
	return true;
}

/* ---- the interface ------------------------------------------------------- */

/* Whether only the last quarter of the table is free, or less. */
static bool
in_last_quarter(const struct dns_bindings *b)
{
	return b->capacity - b->all.n <= b->capacity / 4;
}

static uint32_t
bound32(size_t v)
{
	return v < UINT32_MAX ? (uint32_t)v : UINT32_MAX;
}

struct dns_bindings *
dns_bindings_new(const struct dns_bindings_bounds *bb)
{
	struct dns_bindings *b;
	size_t max_total = bb->total, nbuckets, i;

	if (max_total == 0 || max_total > BIND_MAX_CAPACITY ||
	    bb->per_sandbox == 0) {
		errno = EINVAL;
		return NULL;
	}
	for (nbuckets = 1; nbuckets < max_total; nbuckets <<= 1)
		;
	if ((b = calloc(1, sizeof(*b))) == NULL)
		return NULL;
	b->entries = calloc(max_total, sizeof(*b->entries));
	b->buckets = calloc(nbuckets, sizeof(*b->buckets));
	b->name_buckets = calloc(nbuckets, sizeof(*b->name_buckets));
	b->all.idx = calloc(max_total, sizeof(*b->all.idx));
	b->recs = calloc(max_total, sizeof(*b->recs));
	b->rec_buckets = calloc(nbuckets, sizeof(*b->rec_buckets));
	if (b->entries == NULL || b->buckets == NULL ||
	    b->name_buckets == NULL || b->all.idx == NULL ||
	    b->recs == NULL || b->rec_buckets == NULL) {
		dns_bindings_free(b);
		errno = ENOMEM;
		return NULL;
	}
	b->capacity = (uint32_t)max_total;
	b->all.cap = (uint32_t)max_total;
	b->per_sandbox = bb->per_sandbox < max_total ?
	    (uint32_t)bb->per_sandbox : (uint32_t)max_total;
	b->per_addr = bb->per_addr == 0 ? UINT32_MAX : bound32(bb->per_addr);
	b->light = bb->light == 0 ? UINT32_MAX : bound32(bb->light);
	b->bucket_mask = (uint32_t)(nbuckets - 1);
	for (i = 0; i < nbuckets; i++)
		b->buckets[i] = b->name_buckets[i] = b->rec_buckets[i] =
		    BIND_NIL;
	b->free_head = b->rec_free = BIND_NIL;
	dns_hash_key_new(&b->key, b);
	return b;
}

void
dns_bindings_free(struct dns_bindings *b)
{
	uint32_t i;

	if (b == NULL)
		return;
	if (b->recs != NULL)
		for (i = 0; i < b->rec_fresh; i++)
			free(b->recs[i].heap.idx);
	free(b->entries);
	free(b->buckets);
	free(b->name_buckets);
	free(b->all.idx);
	free(b->recs);
	free(b->rec_buckets);
	free(b);
}

int
dns_bindings_add(struct dns_bindings *b, uint32_t sandbox, uint32_t addr,
    const char *name, uint64_t now_ms, uint64_t expires_ms)
{
	struct binding *e;
	struct sandbox_rec *r;
	struct heap *h;
	uint32_t bucket, nbucket, idx, ri;
	char lname[DNS_NAME_MAX];
	size_t len, i;
	int n;

	if ((len = strnlen(name, DNS_NAME_MAX + 1)) > DNS_NAME_MAX) {
		errno = ENAMETOOLONG;
		return -1;
	}
	for (i = 0; i < len; i++)
		lname[i] = ascii_lower(name[i]);

	/* On every add, not only at a bound: dead entries would otherwise
	 * linger in the chains that every new connection's lookup walks. */
	for (n = 0; n < BIND_RECLAIM_PER_ADD &&
	    reclaim_top(b, &b->all, now_ms); n++)
		;
	if (expires_ms <= now_ms)
		return 0;	/* dead on arrival: it would admit nothing */

	nbucket = name_bucket(b, sandbox, addr, lname, len);
	if ((idx = binding_find(b, nbucket, sandbox, addr, lname, len)) !=
	    BIND_NIL) {
		/* Possibly an expired entry not yet reclaimed: extending it
		 * is the same as reclaiming it and adding anew. */
		e = &b->entries[idx];
		if (expires_ms > e->expires_ms) {
			e->expires_ms = expires_ms;
			heap_fix(b, &b->all, HEAP_ALL, e->pos[HEAP_ALL]);
			heap_fix(b, &b->recs[e->owner].heap, HEAP_SANDBOX,
			    e->pos[HEAP_SANDBOX]);
		}
		return 0;
	}

	bucket = binding_bucket(b, sandbox, addr);
	if (b->per_addr != UINT32_MAX &&
	    binding_live(b, bucket, sandbox, addr, now_ms) >= b->per_addr)
		goto full;
	ri = rec_lookup(b, sandbox);
	if (ri != BIND_NIL && b->recs[ri].heap.n >= b->per_sandbox &&
	    !reclaim_top(b, &b->recs[ri].heap, now_ms))
		goto full;
	/* Reclaiming may have released the record with its last entry. */
	if ((ri = rec_lookup(b, sandbox)) != BIND_NIL &&
	    b->recs[ri].heap.n >= b->light && in_last_quarter(b)) {
		h = &b->recs[ri].heap;
		/* A record released with its last entry has h->n 0. */
		for (n = 0; n < BIND_RECLAIM_QUARTER && h->n >= b->light &&
		    reclaim_top(b, h, now_ms); n++)
			;
		if (h->n >= b->light) {
			/* Is the quarter taken by live ones too? */
			for (; n < BIND_RECLAIM_QUARTER && in_last_quarter(b) &&
			    reclaim_top(b, &b->all, now_ms); n++)
				;
			if (in_last_quarter(b))
				goto full;
		}
	}
	if (b->all.n >= b->capacity && !reclaim_top(b, &b->all, now_ms))
		goto full;
	/* Reclaiming may have released the record with its last entry. */
	if ((ri = rec_lookup(b, sandbox)) == BIND_NIL)
		ri = rec_new(b, sandbox);
	r = &b->recs[ri];
	if (heap_reserve(&r->heap, b->per_sandbox) == -1) {
		if (r->heap.n == 0)
			rec_release(b, ri);
		errno = ENOMEM;
		return -1;
	}

	/* all.n < capacity: a freed or a fresh entry is there. */
	if ((idx = b->free_head) != BIND_NIL)
		b->free_head = b->entries[idx].next;
	else
		idx = b->fresh++;
	e = &b->entries[idx];
	e->sandbox = sandbox;
	e->addr = addr;
	e->expires_ms = expires_ms;
	e->owner = ri;
	e->namelen = (uint8_t)len;
	memcpy(e->name, lname, len);
	e->name[len] = '\0';
	e->bucket = bucket;
	e->nbucket = nbucket;
	e->nnext = b->name_buckets[nbucket];
	b->name_buckets[nbucket] = idx;
	e->prev = BIND_NIL;
	e->next = b->buckets[bucket];
	if (e->next != BIND_NIL)
		b->entries[e->next].prev = idx;
	b->buckets[bucket] = idx;
	heap_push(b, &b->all, HEAP_ALL, idx);
	heap_push(b, &r->heap, HEAP_SANDBOX, idx);
	return 0;
full:
	errno = ENOSPC;
	return -1;
}

bool
dns_bindings_find(struct dns_bindings *b, uint32_t sandbox, uint32_t addr,
    uint64_t now_ms, dns_binding_fn fn, void *arg)
{
	const struct binding *e;
	uint32_t idx;

	for (idx = b->buckets[binding_bucket(b, sandbox, addr)];
	    idx != BIND_NIL; idx = e->next) {
		e = &b->entries[idx];
		if (e->sandbox == sandbox && e->addr == addr &&
		    e->expires_ms > now_ms && fn(arg, e->name, e->expires_ms))
			return true;
	}
	return false;
}

void
dns_bindings_forget(struct dns_bindings *b, uint32_t sandbox)
{
	struct sandbox_rec *r;
	uint32_t ri, n;

	if ((ri = rec_lookup(b, sandbox)) == BIND_NIL)
		return;
	r = &b->recs[ri];
	/* From the heap's last slot, which leaves the rest in place; the
	 * record is released with the last entry. */
	for (n = r->heap.n; n > 0; n--)
		binding_remove(b, r->heap.idx[n - 1]);
}

size_t
dns_bindings_count(const struct dns_bindings *b)
{
	return b->all.n;
}

size_t
dns_bindings_count_sandbox(const struct dns_bindings *b, uint32_t sandbox)
{
	uint32_t ri = rec_lookup(b, sandbox);

	return ri == BIND_NIL ? 0 : b->recs[ri].heap.n;
}
