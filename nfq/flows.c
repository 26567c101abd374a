/* flows.c: a bounded table of recent verdicts, keyed by interface and 5-tuple. */
#include <stdlib.h>
#include <string.h>

#include "dns/dns.h"
#include "nfq/nfq.h"

/*
 * Layout: a fixed array of slots, chained hash buckets of slot indices
 * (at least as many buckets as slots, a power of two), and a binary
 * min-heap of the used slots ordered by expiry time. The heap gives the
 * eviction victim at capacity in O(1) and keeps every insert at O(log n):
 * the victim is the entry that expires first, which is an expired entry
 * whenever there is one. With one TTL for every entry that is also the
 * entry inserted (or replaced) longest ago.
 */

#define FLOW_NIL		UINT32_MAX
#define FLOW_MAX_CAPACITY	((size_t)1 << 31)
/* Expired entries each insert frees beyond its own need, so that they do
 * not linger in the chains: more than one per insert means the backlog of
 * dead entries only shrinks. */
#define FLOW_RECLAIM_PER_INSERT	2

struct flow_slot {
	struct nfq_flow	 flow;
	uint32_t	 next;		/* bucket chain, or the free list */
	uint32_t	 bucket;
	uint32_t	 heap_pos;	/* FLOW_NIL when the slot is free */
};

struct nfq_flows {
	struct flow_slot	*slots;
	uint32_t		*buckets;	/* head slot index or FLOW_NIL */
	uint32_t		*heap;		/* slot indices */
	uint32_t		 bucket_mask;
	uint32_t		 capacity;
	uint32_t		 count;
	uint32_t		 free_head;
	struct dns_hash_key	 key;
};

/* ---- hashing ----------------------------------------------------------- */

/*
 * SipHash-2-4 with a random key per table (dns/siphash.c): a keyed PRF, so
 * packets whose addresses and ports a sender chooses cannot be aimed at
 * one bucket. The key fields are packed into three words, which also
 * leaves the struct's padding out of the hash.
 */
uint64_t
nfq_flow_key_hash(const struct dns_hash_key *k, const struct nfq_flow_key *key)
{
	uint64_t w[3];

	w[0] = (uint64_t)key->ifindex | (uint64_t)key->saddr << 32;
	w[1] = (uint64_t)key->daddr | (uint64_t)key->sport << 32 |
	    (uint64_t)key->dport << 48;
	w[2] = key->proto;
	return dns_siphash_words(k, w, 3);
}

static uint32_t
flow_bucket(const struct nfq_flows *ft, const struct nfq_flow_key *k)
{
	return (uint32_t)nfq_flow_key_hash(&ft->key, k) & ft->bucket_mask;
}

static bool
flow_key_equal(const struct nfq_flow_key *a, const struct nfq_flow_key *b)
{
	return a->ifindex == b->ifindex && a->saddr == b->saddr &&
	    a->daddr == b->daddr && a->sport == b->sport &&
	    a->dport == b->dport && a->proto == b->proto;
}

/* ---- the expiry heap ----------------------------------------------------- */

static uint64_t
heap_expiry(const struct nfq_flows *ft, uint32_t pos)
{
	return ft->slots[ft->heap[pos]].flow.expires_ms;
}

static void
heap_set(struct nfq_flows *ft, uint32_t pos, uint32_t idx)
{
	ft->heap[pos] = idx;
	ft->slots[idx].heap_pos = pos;
}

static void
heap_sift_up(struct nfq_flows *ft, uint32_t pos)
{
	uint32_t idx = ft->heap[pos], parent;
	uint64_t exp = ft->slots[idx].flow.expires_ms;

	while (pos > 0) {
		parent = (pos - 1) / 2;
		if (heap_expiry(ft, parent) <= exp)
			break;
		heap_set(ft, pos, ft->heap[parent]);
		pos = parent;
	}
	heap_set(ft, pos, idx);
}

static void
heap_sift_down(struct nfq_flows *ft, uint32_t pos)
{
	uint32_t idx = ft->heap[pos], child;
	uint64_t exp = ft->slots[idx].flow.expires_ms;

	for (;;) {
		/* count <= 2^31, so 2 * pos + 1 does not overflow */
		child = 2 * pos + 1;
		if (child >= ft->count)
			break;
		if (child + 1 < ft->count &&
		    heap_expiry(ft, child + 1) < heap_expiry(ft, child))
			child++;
		if (heap_expiry(ft, child) >= exp)
			break;
		heap_set(ft, pos, ft->heap[child]);
		pos = child;
	}
	heap_set(ft, pos, idx);
}

/* After the expiry of the entry at pos changed either way. */
static void
heap_fix(struct nfq_flows *ft, uint32_t pos)
{
	if (pos > 0 && heap_expiry(ft, (pos - 1) / 2) > heap_expiry(ft, pos))
		heap_sift_up(ft, pos);
	else
		heap_sift_down(ft, pos);
}

/* ---- slots ----------------------------------------------------------------- */

static uint32_t
flow_find(const struct nfq_flows *ft, const struct nfq_flow_key *key,
    uint32_t bucket)
{
	uint32_t idx;

	for (idx = ft->buckets[bucket]; idx != FLOW_NIL;
	    idx = ft->slots[idx].next)
		if (flow_key_equal(&ft->slots[idx].flow.key, key))
			return idx;
	return FLOW_NIL;
}

static void
flow_remove(struct nfq_flows *ft, uint32_t idx)
{
	struct flow_slot *s = &ft->slots[idx];
	uint32_t *link, pos, last;

	for (link = &ft->buckets[s->bucket]; *link != idx;
	    link = &ft->slots[*link].next)
		;
	*link = s->next;

	pos = s->heap_pos;
	last = ft->heap[--ft->count];
	if (last != idx) {
		heap_set(ft, pos, last);
		heap_fix(ft, pos);
	}

	s->heap_pos = FLOW_NIL;
	s->next = ft->free_head;
	ft->free_head = idx;
}

struct nfq_flows *
nfq_flows_new(size_t capacity)
{
	struct nfq_flows *ft;
	size_t nbuckets, i;

	if (capacity == 0 || capacity > FLOW_MAX_CAPACITY)
		return NULL;
	for (nbuckets = 1; nbuckets < capacity; nbuckets <<= 1)
		;
	if ((ft = calloc(1, sizeof(*ft))) == NULL)
		return NULL;
	ft->slots = calloc(capacity, sizeof(*ft->slots));
	ft->buckets = calloc(nbuckets, sizeof(*ft->buckets));
	ft->heap = calloc(capacity, sizeof(*ft->heap));
	if (ft->slots == NULL || ft->buckets == NULL || ft->heap == NULL) {
		nfq_flows_free(ft);
		return NULL;
	}
	ft->capacity = (uint32_t)capacity;
	ft->bucket_mask = (uint32_t)(nbuckets - 1);
	for (i = 0; i < nbuckets; i++)
		ft->buckets[i] = FLOW_NIL;
	for (i = 0; i < capacity; i++) {
		ft->slots[i].heap_pos = FLOW_NIL;
		ft->slots[i].next = i + 1 < capacity ? (uint32_t)(i + 1) :
		    FLOW_NIL;
	}
	ft->free_head = 0;
	dns_hash_key_new(&ft->key, ft);
	return ft;
}

void
nfq_flows_free(struct nfq_flows *ft)
{
	if (ft == NULL)
		return;
	free(ft->slots);
	free(ft->buckets);
	free(ft->heap);
	free(ft);
}

struct nfq_flow *
nfq_flows_lookup(struct nfq_flows *ft, const struct nfq_flow_key *key,
    uint64_t now_ms)
{
	struct nfq_flow *f;
	uint32_t idx;

	idx = flow_find(ft, key, flow_bucket(ft, key));
	if (idx == FLOW_NIL)
		return NULL;
	f = &ft->slots[idx].flow;
	if (now_ms >= f->expires_ms)
		return NULL;
	f->hits++;
	return f;
}

struct nfq_flow *
nfq_flows_insert(struct nfq_flows *ft, const struct nfq_flow_key *key,
    uint64_t now_ms, uint64_t ttl_ms, uint32_t verdict, uint32_t mark)
{
	struct flow_slot *s;
	uint32_t bucket, idx;
	int i;

	for (i = 0; i < FLOW_RECLAIM_PER_INSERT && ft->count > 0 &&
	    heap_expiry(ft, 0) <= now_ms; i++)
		flow_remove(ft, ft->heap[0]);

	bucket = flow_bucket(ft, key);
	idx = flow_find(ft, key, bucket);
	if (idx == FLOW_NIL) {
		if (ft->count == ft->capacity)
			flow_remove(ft, ft->heap[0]);
		idx = ft->free_head;
		s = &ft->slots[idx];
		ft->free_head = s->next;
		s->bucket = bucket;
		s->next = ft->buckets[bucket];
		ft->buckets[bucket] = idx;
		/* Copied field by field: the caller's padding stays out. */
		memset(&s->flow, 0, sizeof(s->flow));
		s->flow.key.ifindex = key->ifindex;
		s->flow.key.saddr = key->saddr;
		s->flow.key.daddr = key->daddr;
		s->flow.key.sport = key->sport;
		s->flow.key.dport = key->dport;
		s->flow.key.proto = key->proto;
		s->heap_pos = ft->count;
		ft->heap[ft->count++] = idx;
	} else
		s = &ft->slots[idx];

	s->flow.expires_ms = ttl_ms > UINT64_MAX - now_ms ? UINT64_MAX :
	    now_ms + ttl_ms;
	s->flow.verdict = verdict;
	s->flow.mark = mark;
	s->flow.hits = 0;
	s->flow.flight = false;
	s->flow.reset_server = false;
	s->flow.since_us = 0;
	heap_fix(ft, s->heap_pos);
	return &s->flow;
}

void
nfq_flows_remove(struct nfq_flows *ft, const struct nfq_flow_key *key)
{
	uint32_t idx = flow_find(ft, key, flow_bucket(ft, key));

	if (idx != FLOW_NIL)
		flow_remove(ft, idx);
}

void
nfq_flows_forget_ifindex(struct nfq_flows *ft, uint32_t ifindex)
{
	uint32_t i;

	for (i = 0; i < ft->capacity; i++)
		if (ft->slots[i].heap_pos != FLOW_NIL &&
		    ft->slots[i].flow.key.ifindex == ifindex)
			flow_remove(ft, i);
}

size_t
nfq_flows_count(const struct nfq_flows *ft)
{
	return ft->count;
}
