/* test_flows.c: the flow table: lookups, expiry, replacement, eviction, forgetting. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <linux/netfilter.h>
#include <cmocka.h>

#include "nfq/nfq.h"

/* A key with the given fields; the padding is filled with fill so that a
 * table comparing or hashing padding bytes would miss. */
static struct nfq_flow_key
key_make(uint32_t ifindex, uint32_t n, uint8_t fill)
{
	struct nfq_flow_key k;

	memset(&k, fill, sizeof(k));
	k.ifindex = ifindex;
	k.saddr = 0x0a000000U + n;
	k.daddr = 0xc6336407U;
	k.sport = (uint16_t)(1024 + n % 60000);
	k.dport = 443;
	k.proto = IPPROTO_TCP;
	return k;
}

static void
test_new_bounds(void **state)
{
	struct nfq_flows *ft;

	(void)state;
	assert_null(nfq_flows_new(0));
	ft = nfq_flows_new(1);
	assert_non_null(ft);
	assert_int_equal(nfq_flows_count(ft), 0);
	nfq_flows_free(ft);
	nfq_flows_free(NULL);
}

static void
test_insert_lookup(void **state)
{
	struct nfq_flows *ft;
	struct nfq_flow_key k = key_make(3, 1, 0xaa), probe;
	struct nfq_flow *f;

	(void)state;
	/* One bucket: every key shares the chain, so only the comparison
	 * tells flows apart. */
	ft = nfq_flows_new(1);
	assert_non_null(ft);
	assert_null(nfq_flows_lookup(ft, &k, 1000));

	f = nfq_flows_insert(ft, &k, 1000, 500, NF_ACCEPT, 7);
	assert_non_null(f);
	assert_int_equal(f->expires_ms, 1500);
	assert_int_equal(f->verdict, NF_ACCEPT);
	assert_int_equal(f->mark, 7);
	assert_int_equal(f->hits, 0);
	assert_int_equal(nfq_flows_count(ft), 1);

	/* Same fields, different padding bytes. */
	probe = key_make(3, 1, 0x55);
	f = nfq_flows_lookup(ft, &probe, 1000);
	assert_non_null(f);
	assert_int_equal(f->verdict, NF_ACCEPT);
	assert_int_equal(f->mark, 7);
	assert_int_equal(f->hits, 1);
	assert_int_equal(f->key.ifindex, 3);
	assert_int_equal(f->key.saddr, k.saddr);
	assert_int_equal(f->key.sport, k.sport);

	/* Any one field different: another flow. */
	probe = key_make(3, 1, 0); probe.ifindex = 4;
	assert_null(nfq_flows_lookup(ft, &probe, 1000));
	probe = key_make(3, 1, 0); probe.saddr ^= 1;
	assert_null(nfq_flows_lookup(ft, &probe, 1000));
	probe = key_make(3, 1, 0); probe.daddr ^= 1;
	assert_null(nfq_flows_lookup(ft, &probe, 1000));
	probe = key_make(3, 1, 0); probe.sport ^= 1;
	assert_null(nfq_flows_lookup(ft, &probe, 1000));
	probe = key_make(3, 1, 0); probe.dport ^= 1;
	assert_null(nfq_flows_lookup(ft, &probe, 1000));
	probe = key_make(3, 1, 0); probe.proto = IPPROTO_UDP;
	assert_null(nfq_flows_lookup(ft, &probe, 1000));

	f = nfq_flows_lookup(ft, &k, 1499);
	assert_non_null(f);
	assert_int_equal(f->hits, 2);
	nfq_flows_free(ft);
}

static void
test_expiry_exact(void **state)
{
	struct nfq_flows *ft;
	struct nfq_flow_key k = key_make(1, 1, 0);

	(void)state;
	ft = nfq_flows_new(4);
	assert_non_null(ft);
	nfq_flows_insert(ft, &k, 1000, 500, NF_DROP, 0);
	assert_non_null(nfq_flows_lookup(ft, &k, 1499));
	assert_null(nfq_flows_lookup(ft, &k, 1500));
	assert_null(nfq_flows_lookup(ft, &k, 1501));
	/* Expired but not yet reclaimed: still held. */
	assert_int_equal(nfq_flows_count(ft), 1);

	/* ttl 0: dead at once. */
	nfq_flows_insert(ft, &k, 2000, 0, NF_DROP, 0);
	assert_null(nfq_flows_lookup(ft, &k, 2000));
	/* A huge ttl saturates instead of wrapping into the past. */
	nfq_flows_insert(ft, &k, 2000, UINT64_MAX, NF_ACCEPT, 0);
	assert_non_null(nfq_flows_lookup(ft, &k, UINT64_MAX - 1));
	assert_int_equal(nfq_flows_count(ft), 1);
	nfq_flows_free(ft);
}

static void
test_replacement(void **state)
{
	struct nfq_flows *ft;
	struct nfq_flow_key k = key_make(1, 1, 0);
	struct nfq_flow *f;

	(void)state;
	ft = nfq_flows_new(4);
	assert_non_null(ft);
	nfq_flows_insert(ft, &k, 1000, 500, NF_ACCEPT, 7);
	assert_non_null(nfq_flows_lookup(ft, &k, 1100));

	/* Shorter: the new expiry wins even though it is earlier. */
	f = nfq_flows_insert(ft, &k, 1200, 100, NF_DROP, 9);
	assert_int_equal(nfq_flows_count(ft), 1);
	assert_int_equal(f->hits, 0);
	f = nfq_flows_lookup(ft, &k, 1299);
	assert_non_null(f);
	assert_int_equal(f->verdict, NF_DROP);
	assert_int_equal(f->mark, 9);
	assert_null(nfq_flows_lookup(ft, &k, 1300));

	/* Longer. */
	nfq_flows_insert(ft, &k, 1250, 10000, NF_ACCEPT, 1);
	assert_non_null(nfq_flows_lookup(ft, &k, 11249));
	assert_null(nfq_flows_lookup(ft, &k, 11250));

	/* Reusing an expired entry for the same key. */
	f = nfq_flows_insert(ft, &k, 20000, 5, NF_REPEAT, 2);
	assert_int_equal(f->verdict, NF_REPEAT);
	assert_int_equal(nfq_flows_count(ft), 1);
	assert_non_null(nfq_flows_lookup(ft, &k, 20004));
	nfq_flows_free(ft);
}

/* At capacity the entry that expires first goes. */
static void
test_eviction_soonest_expiry(void **state)
{
	struct nfq_flows *ft;
	struct nfq_flow_key a = key_make(1, 1, 0), b = key_make(1, 2, 0),
	    c = key_make(1, 3, 0), d = key_make(1, 4, 0),
	    e = key_make(1, 5, 0), f = key_make(1, 6, 0);

	(void)state;
	ft = nfq_flows_new(4);
	assert_non_null(ft);
	nfq_flows_insert(ft, &a, 0, 400, NF_ACCEPT, 0);
	nfq_flows_insert(ft, &b, 0, 100, NF_ACCEPT, 0);
	nfq_flows_insert(ft, &c, 0, 300, NF_ACCEPT, 0);
	nfq_flows_insert(ft, &d, 0, 200, NF_ACCEPT, 0);
	assert_int_equal(nfq_flows_count(ft), 4);

	nfq_flows_insert(ft, &e, 50, 1000, NF_ACCEPT, 0);
	assert_int_equal(nfq_flows_count(ft), 4);
	assert_null(nfq_flows_lookup(ft, &b, 50));
	assert_non_null(nfq_flows_lookup(ft, &a, 50));
	assert_non_null(nfq_flows_lookup(ft, &c, 50));
	assert_non_null(nfq_flows_lookup(ft, &d, 50));
	assert_non_null(nfq_flows_lookup(ft, &e, 50));

	/* Oldest is a (inserted first), but d expires first. */
	nfq_flows_insert(ft, &f, 60, 1000, NF_ACCEPT, 0);
	assert_null(nfq_flows_lookup(ft, &d, 60));
	assert_non_null(nfq_flows_lookup(ft, &a, 60));
	assert_non_null(nfq_flows_lookup(ft, &c, 60));

	/* Replacing a makes it the last to expire; c goes next. */
	nfq_flows_insert(ft, &a, 70, 5000, NF_ACCEPT, 0);
	nfq_flows_insert(ft, &b, 70, 5000, NF_ACCEPT, 0);
	assert_null(nfq_flows_lookup(ft, &c, 70));
	assert_non_null(nfq_flows_lookup(ft, &a, 70));
	assert_non_null(nfq_flows_lookup(ft, &b, 70));
	assert_non_null(nfq_flows_lookup(ft, &e, 70));
	assert_non_null(nfq_flows_lookup(ft, &f, 70));
	assert_int_equal(nfq_flows_count(ft), 4);
	nfq_flows_free(ft);
}

/* Expired entries are reclaimed, up to two per insert. */
static void
test_reclaim_expired(void **state)
{
	struct nfq_flows *ft;
	struct nfq_flow_key k;
	uint32_t i;

	(void)state;
	ft = nfq_flows_new(8);
	assert_non_null(ft);
	for (i = 0; i < 5; i++) {
		k = key_make(1, i, 0);
		nfq_flows_insert(ft, &k, 0, 10 + i, NF_ACCEPT, 0);
	}
	/* Entries 0..3 have expired at 13; entry 4 lives until 14. */
	k = key_make(1, 100, 0);
	nfq_flows_insert(ft, &k, 13, 1000, NF_ACCEPT, 0);
	assert_int_equal(nfq_flows_count(ft), 4);
	k = key_make(1, 101, 0);
	nfq_flows_insert(ft, &k, 13, 1000, NF_ACCEPT, 0);
	assert_int_equal(nfq_flows_count(ft), 3);
	k = key_make(1, 102, 0);
	nfq_flows_insert(ft, &k, 13, 1000, NF_ACCEPT, 0);
	assert_int_equal(nfq_flows_count(ft), 4);
	k = key_make(1, 4, 0);
	assert_non_null(nfq_flows_lookup(ft, &k, 13));
	nfq_flows_free(ft);
}

static void
test_full_of_expired(void **state)
{
	struct nfq_flows *ft;
	struct nfq_flow_key a = key_make(1, 1, 0), b = key_make(1, 2, 0),
	    c = key_make(1, 3, 0), d = key_make(1, 4, 0);

	(void)state;
	ft = nfq_flows_new(3);
	assert_non_null(ft);
	nfq_flows_insert(ft, &a, 0, 10, NF_ACCEPT, 0);
	nfq_flows_insert(ft, &b, 0, 1000, NF_ACCEPT, 0);
	nfq_flows_insert(ft, &c, 0, 500, NF_ACCEPT, 0);
	nfq_flows_insert(ft, &d, 20, 100, NF_ACCEPT, 0);
	assert_int_equal(nfq_flows_count(ft), 3);
	assert_null(nfq_flows_lookup(ft, &a, 20));
	assert_non_null(nfq_flows_lookup(ft, &b, 20));
	assert_non_null(nfq_flows_lookup(ft, &c, 20));
	assert_non_null(nfq_flows_lookup(ft, &d, 20));
	nfq_flows_free(ft);
}

static void
test_forget_ifindex(void **state)
{
	struct nfq_flows *ft;
	struct nfq_flow_key k;
	uint32_t i;

	(void)state;
	ft = nfq_flows_new(32);
	assert_non_null(ft);
	for (i = 0; i < 10; i++) {
		k = key_make(3, i, 0);
		nfq_flows_insert(ft, &k, 0, 100 + i, NF_ACCEPT, 0);
		k = key_make(4, i, 0);
		nfq_flows_insert(ft, &k, 0, 200 - i, NF_DROP, 0);
	}
	assert_int_equal(nfq_flows_count(ft), 20);
	nfq_flows_forget_ifindex(ft, 3);
	assert_int_equal(nfq_flows_count(ft), 10);
	for (i = 0; i < 10; i++) {
		k = key_make(3, i, 0);
		assert_null(nfq_flows_lookup(ft, &k, 1));
		k = key_make(4, i, 0);
		assert_non_null(nfq_flows_lookup(ft, &k, 1));
	}
	nfq_flows_forget_ifindex(ft, 99);
	assert_int_equal(nfq_flows_count(ft), 10);

	/* The freed slots are usable again, up to capacity. */
	for (i = 0; i < 22; i++) {
		k = key_make(5, i, 0);
		nfq_flows_insert(ft, &k, 1, 1000, NF_ACCEPT, 0);
	}
	assert_int_equal(nfq_flows_count(ft), 32);
	for (i = 0; i < 10; i++) {
		k = key_make(4, i, 0);
		assert_non_null(nfq_flows_lookup(ft, &k, 1));
	}
	nfq_flows_forget_ifindex(ft, 4);
	nfq_flows_forget_ifindex(ft, 5);
	assert_int_equal(nfq_flows_count(ft), 0);
	nfq_flows_free(ft);
}

/* Fill a large table, then overflow it: exactly the entries that expire
 * first are the ones gone. */
static void
test_many(void **state)
{
	const uint32_t cap = 1U << 16, extra = 1000;
	struct nfq_flows *ft;
	struct nfq_flow_key k;
	struct nfq_flow *f;
	uint32_t i, n;

	(void)state;
	ft = nfq_flows_new(cap);
	assert_non_null(ft);
	/* Inserted in a scrambled order so that the heap does real work:
	 * key n expires at 1000000 + n. */
	for (i = 0; i < cap; i++) {
		n = (i * 40503U) & (cap - 1);
		k = key_make(1 + n % 7, n, 0);
		nfq_flows_insert(ft, &k, 0, 1000000 + n, NF_ACCEPT, n);
	}
	assert_int_equal(nfq_flows_count(ft), cap);
	for (n = 0; n < cap; n++) {
		k = key_make(1 + n % 7, n, 0);
		f = nfq_flows_lookup(ft, &k, 1);
		assert_non_null(f);
		assert_int_equal(f->mark, n);
	}
	for (i = 0; i < extra; i++) {
		k = key_make(9, cap + i, 0);
		nfq_flows_insert(ft, &k, 2, 5000000, NF_DROP, 0);
	}
	assert_int_equal(nfq_flows_count(ft), cap);
	for (n = 0; n < cap; n++) {
		k = key_make(1 + n % 7, n, 0);
		if (n < extra)
			assert_null(nfq_flows_lookup(ft, &k, 3));
		else
			assert_non_null(nfq_flows_lookup(ft, &k, 3));
	}
	for (i = 0; i < extra; i++) {
		k = key_make(9, cap + i, 0);
		assert_non_null(nfq_flows_lookup(ft, &k, 3));
	}
	nfq_flows_free(ft);
}

/* ---- random operations against a plain array doing the same ---------- */

#define MODEL_CAP	64
#define MODEL_KEYS	150

struct model {
	bool		used[MODEL_CAP];
	uint32_t	key[MODEL_CAP];		/* index into the key pool */
	uint64_t	expires[MODEL_CAP];
	uint32_t	mark[MODEL_CAP];
};

static int
model_find(const struct model *m, uint32_t key)
{
	int i;

	for (i = 0; i < MODEL_CAP; i++)
		if (m->used[i] && m->key[i] == key)
			return i;
	return -1;
}

static int
model_soonest(const struct model *m)
{
	int i, best = -1;

	for (i = 0; i < MODEL_CAP; i++)
		if (m->used[i] && (best == -1 || m->expires[i] < m->expires[best]))
			best = i;
	return best;
}

static void
model_insert(struct model *m, uint32_t key, uint64_t now, uint64_t expires,
    uint32_t mark)
{
	int i, s;

	for (i = 0; i < 2; i++) {
		s = model_soonest(m);
		if (s == -1 || m->expires[s] > now)
			break;
		m->used[s] = false;
	}
	if ((s = model_find(m, key)) == -1) {
		for (s = 0; s < MODEL_CAP && m->used[s]; s++)
			;
		if (s == MODEL_CAP)
			m->used[s = model_soonest(m)] = false;
	}
	m->used[s] = true;
	m->key[s] = key;
	m->expires[s] = expires;
	m->mark[s] = mark;
}

static size_t
model_count(const struct model *m)
{
	size_t n = 0;
	int i;

	for (i = 0; i < MODEL_CAP; i++)
		n += m->used[i];
	return n;
}

static void
test_random_against_model(void **state)
{
	struct nfq_flows *ft;
	struct nfq_flow_key k;
	struct nfq_flow *f;
	struct model m;
	uint64_t now = 0, expires;
	uint32_t op, key, r, x = 12345;
	int i, s;

	(void)state;
	memset(&m, 0, sizeof(m));
	ft = nfq_flows_new(MODEL_CAP);
	assert_non_null(ft);
	for (op = 0; op < 200000; op++) {
		/* xorshift32: the same sequence every run */
		x ^= x << 13; x ^= x >> 17; x ^= x << 5;
		r = x;
		now += r % 3;
		key = (r >> 8) % MODEL_KEYS;
		k = key_make(1 + key % 3, key, (uint8_t)r);
		switch ((r >> 16) % 8) {
		case 0: case 1: case 2: case 3:
			/* Distinct expiries so that the victim is unique. */
			expires = now + 1 + ((r >> 20) % 64) * 1000000ULL +
			    op;
			nfq_flows_insert(ft, &k, now, expires - now, NF_ACCEPT,
			    op);
			model_insert(&m, key, now, expires, op);
			break;
		case 4:
			if ((r >> 24) % 8 == 0) {
				nfq_flows_forget_ifindex(ft, 1 + key % 3);
				for (i = 0; i < MODEL_CAP; i++)
					if (m.used[i] &&
					    1 + m.key[i] % 3 == 1 + key % 3)
						m.used[i] = false;
			}
			break;
		default:
			f = nfq_flows_lookup(ft, &k, now);
			s = model_find(&m, key);
			if (s == -1 || m.expires[s] <= now)
				assert_null(f);
			else {
				assert_non_null(f);
				assert_int_equal(f->mark, m.mark[s]);
				assert_int_equal(f->expires_ms, m.expires[s]);
			}
			break;
		}
		assert_int_equal(nfq_flows_count(ft), model_count(&m));
	}
	nfq_flows_free(ft);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_new_bounds),
		cmocka_unit_test(test_insert_lookup),
		cmocka_unit_test(test_expiry_exact),
		cmocka_unit_test(test_replacement),
		cmocka_unit_test(test_eviction_soonest_expiry),
		cmocka_unit_test(test_reclaim_expired),
		cmocka_unit_test(test_full_of_expired),
		cmocka_unit_test(test_forget_ifindex),
		cmocka_unit_test(test_many),
		cmocka_unit_test(test_random_against_model),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
