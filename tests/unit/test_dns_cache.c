/* test_dns_cache.c: the answer cache, against a clock the test holds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include <cmocka.h>

#include "dns/dns.h"

#define T0	5000000		/* ms: the time of the first put */
#define IN	1		/* class IN */

/* ---- building answers -------------------------------------------------- */

static void
resp_init(struct dns_response *r, uint8_t rcode)
{
	memset(r, 0, sizeof(*r));
	r->rcode = rcode;
	r->flags = 0x8180 | rcode;	/* QR RD RA */
	r->qclass = IN;
}

static struct dns_rr *
rr_add(struct dns_response *r, const char *name, uint16_t type, uint32_t ttl)
{
	struct dns_rr *x;

	assert_true(r->nrr < DNS_RR_MAX);
	x = &r->rr[r->nrr++];
	memset(x, 0, sizeof(*x));
	assert_true(strlen(name) <= DNS_NAME_MAX);
	strcpy(x->name, name);
	x->type = type;
	x->ttl = ttl;
	return x;
}

static void
add_a(struct dns_response *r, const char *name, uint32_t ttl, const char *a)
{
	assert_int_equal(inet_pton(AF_INET, a, rr_add(r, name, DNS_T_A,
	    ttl)->data.a), 1);
}

static void
add_aaaa(struct dns_response *r, const char *name, uint32_t ttl,
    const char *a)
{
	assert_int_equal(inet_pton(AF_INET6, a, rr_add(r, name, DNS_T_AAAA,
	    ttl)->data.aaaa), 1);
}

static void
add_cname(struct dns_response *r, const char *name, uint32_t ttl,
    const char *target)
{
	struct dns_rr *x = rr_add(r, name, DNS_T_CNAME, ttl);

	assert_true(strlen(target) <= DNS_NAME_MAX);
	strcpy(x->data.cname, target);
}

/* A name of exactly len bytes (labels of 50 and dots), ending in tag. */
static void
long_name(char *out, size_t len, char tag)
{
	size_t i;

	assert_true(len >= 1 && len <= DNS_NAME_MAX);
	for (i = 0; i < len; i++)
		out[i] = (i % 51 == 50) ? '.' : 'a';
	/* the tag ends the name, so a dot there moves one to the left */
	if (out[len - 1] == '.')
		out[len - 2] = '.';
	out[len - 1] = tag;
	out[len] = '\0';
}

/* ---- checking answers --------------------------------------------------- */

/* got equals want record by record, each TTL less age. */
static void
assert_records(const struct dns_response *got, const struct dns_response *want,
    uint32_t age)
{
	size_t i;

	assert_int_equal(got->nrr, want->nrr);
	for (i = 0; i < want->nrr; i++) {
		const struct dns_rr *g = &got->rr[i], *w = &want->rr[i];

		assert_string_equal(g->name, w->name);
		assert_int_equal(g->type, w->type);
		if (g->ttl != w->ttl - age)
			fail_msg("record %zu: ttl %u, want %u - %u", i,
			    (unsigned)g->ttl, (unsigned)w->ttl, (unsigned)age);
		switch (w->type) {
		case DNS_T_A:
			assert_memory_equal(g->data.a, w->data.a, 4);
			break;
		case DNS_T_AAAA:
			assert_memory_equal(g->data.aaaa, w->data.aaaa, 16);
			break;
		case DNS_T_CNAME:
			assert_string_equal(g->data.cname, w->data.cname);
			break;
		default:
			fail_msg("unexpected type %u", w->type);
		}
	}
}

static void
assert_hit(struct dns_cache *c, const char *name, uint16_t qtype,
    uint64_t now, const struct dns_response *want, uint32_t age)
{
	static struct dns_response got;

	memset(&got, 0xa5, sizeof(got));
	if (!dns_cache_get(c, name, qtype, IN, now, &got))
		fail_msg("%s/%u at %llu: miss, want a hit", name, qtype,
		    (unsigned long long)now);
	assert_int_equal(got.rcode, DNS_R_NOERROR);
	assert_int_equal(got.flags, want->flags);
	assert_int_equal(got.qtype, qtype);
	assert_int_equal(got.qclass, IN);
	assert_int_equal(got.nskipped, want->nskipped);
	assert_records(&got, want, age);
}

static void
assert_miss(struct dns_cache *c, const char *name, uint16_t qtype,
    uint64_t now)
{
	static struct dns_response got;

	if (dns_cache_get(c, name, qtype, IN, now, &got))
		fail_msg("%s/%u at %llu: hit, want a miss", name, qtype,
		    (unsigned long long)now);
}

static struct dns_cache_stats
cstats(const struct dns_cache *c)
{
	struct dns_cache_stats st;

	memset(&st, 0xff, sizeof(st));
	dns_cache_stats(c, &st);
	return st;
}

static void
assert_stats(const struct dns_cache *c, uint64_t hits, uint64_t misses,
    uint64_t stored, uint64_t expired, uint64_t evicted, size_t entries)
{
	struct dns_cache_stats st = cstats(c);

	assert_int_equal(st.hits, hits);
	assert_int_equal(st.misses, misses);
	assert_int_equal(st.stored, stored);
	assert_int_equal(st.expired, expired);
	assert_int_equal(st.evicted, evicted);
	assert_int_equal(st.entries, entries);
}

/* One A record for name with ttl and address 192.0.2.<n>. */
static void
simple(struct dns_response *r, const char *name, uint32_t ttl, unsigned n)
{
	char a[32];

	resp_init(r, DNS_R_NOERROR);
	snprintf(a, sizeof(a), "192.0.2.%u", n);
	add_a(r, name, ttl, a);
}

/* ---- tests -------------------------------------------------------------- */

static void
test_new_bounds(void **state)
{
	struct dns_cache *c;
	struct dns_cache_stats st;

	(void)state;
	errno = 0;
	assert_null(dns_cache_new(0));
	assert_int_equal(errno, EINVAL);
	errno = 0;
	assert_null(dns_cache_new((size_t)DNS_CACHE_MAX + 1));
	assert_int_equal(errno, EINVAL);
	errno = 0;
	assert_null(dns_cache_new(SIZE_MAX));
	assert_int_equal(errno, EINVAL);
	assert_int_equal(DNS_CACHE_TTL_MAX, 3600);
	c = dns_cache_new(1);
	assert_non_null(c);
	st = cstats(c);
	assert_int_equal(st.capacity, 1);
	assert_int_equal(st.entries, 0);
	assert_int_equal(st.hits + st.misses + st.stored + st.expired +
	    st.evicted, 0);
	dns_cache_free(c);
	dns_cache_free(NULL);
}

static void
test_miss_then_hit(void **state)
{
	static struct dns_response r;
	struct dns_cache *c = dns_cache_new(16);
	struct dns_cache_stats st;

	(void)state;
	assert_non_null(c);
	resp_init(&r, DNS_R_NOERROR);
	add_a(&r, "a.test", 300, "192.0.2.1");
	add_a(&r, "a.test", 300, "192.0.2.2");
	r.nskipped = 2;
	assert_miss(c, "a.test", DNS_T_A, T0);
	assert_stats(c, 0, 1, 0, 0, 0, 0);
	assert_true(dns_cache_put(c, "a.test", DNS_T_A, IN, T0, &r));
	assert_stats(c, 0, 1, 1, 0, 0, 1);
	assert_hit(c, "a.test", DNS_T_A, T0, &r, 0);
	assert_hit(c, "a.test", DNS_T_A, T0 + 999, &r, 0);
	assert_stats(c, 2, 1, 1, 0, 0, 1);
	/* another name, not a prefix match */
	assert_miss(c, "a.tes", DNS_T_A, T0);
	assert_miss(c, "b.a.test", DNS_T_A, T0);
	st = cstats(c);
	assert_int_equal(st.hits, 2);
	assert_int_equal(st.misses, 3);
	assert_int_equal(st.capacity, 16);
	dns_cache_free(c);
}

/* get returns the TTLs less the entry's age in whole seconds. */
static void
test_ttl_countdown(void **state)
{
	static struct dns_response r;
	struct dns_cache *c = dns_cache_new(4);

	(void)state;
	resp_init(&r, DNS_R_NOERROR);
	add_a(&r, "t.test", 300, "192.0.2.1");
	add_a(&r, "t.test", 120, "192.0.2.2");
	assert_true(dns_cache_put(c, "t.test", DNS_T_A, IN, T0, &r));
	assert_hit(c, "t.test", DNS_T_A, T0 + 2500, &r, 2);
	assert_hit(c, "t.test", DNS_T_A, T0 + 999, &r, 0);
	assert_hit(c, "t.test", DNS_T_A, T0 + 1000, &r, 1);
	assert_hit(c, "t.test", DNS_T_A, T0 + 119999, &r, 119);
	assert_stats(c, 4, 0, 1, 0, 0, 1);
	dns_cache_free(c);
}

/* Live while now < stored + TTL * 1000; the first get after that drops it. */
static void
test_expiry_exact(void **state)
{
	static struct dns_response r;
	struct dns_cache *c = dns_cache_new(4);

	(void)state;
	simple(&r, "e.test", 30, 1);
	assert_true(dns_cache_put(c, "e.test", DNS_T_A, IN, T0, &r));
	assert_hit(c, "e.test", DNS_T_A, T0 + 30000 - 1, &r, 29);
	assert_stats(c, 1, 0, 1, 0, 0, 1);
	assert_miss(c, "e.test", DNS_T_A, T0 + 30000);
	assert_stats(c, 1, 1, 1, 1, 0, 0);
	/* gone: a second miss is a plain one */
	assert_miss(c, "e.test", DNS_T_A, T0 + 30000);
	assert_stats(c, 1, 2, 1, 1, 0, 0);
	/* and it can be kept again */
	assert_true(dns_cache_put(c, "e.test", DNS_T_A, IN, T0 + 40000, &r));
	assert_hit(c, "e.test", DNS_T_A, T0 + 40000, &r, 0);
	assert_stats(c, 2, 2, 2, 1, 0, 1);
	dns_cache_free(c);
}

/* The smallest TTL of all records decides, wherever it is. */
static void
test_min_ttl(void **state)
{
	static struct dns_response r;
	struct dns_cache *c = dns_cache_new(4);

	(void)state;
	resp_init(&r, DNS_R_NOERROR);
	add_cname(&r, "m.test", 600, "n.test");
	add_a(&r, "n.test", 5, "192.0.2.1");
	add_a(&r, "n.test", 900, "192.0.2.2");
	assert_true(dns_cache_put(c, "m.test", DNS_T_A, IN, T0, &r));
	assert_hit(c, "m.test", DNS_T_A, T0 + 4999, &r, 4);
	assert_miss(c, "m.test", DNS_T_A, T0 + 5000);
	assert_stats(c, 1, 1, 1, 1, 0, 0);
	dns_cache_free(c);
}

/* Kept DNS_CACHE_TTL_MAX at most; the TTLs handed out are the record's
 * own, counted down (not cut to the cap). */
static void
test_ttl_cap(void **state)
{
	static struct dns_response r;
	struct dns_cache *c = dns_cache_new(4);
	const uint64_t cap_ms = (uint64_t)DNS_CACHE_TTL_MAX * 1000;

	(void)state;
	resp_init(&r, DNS_R_NOERROR);
	add_a(&r, "long.test", 86400, "192.0.2.1");
	add_a(&r, "long.test", 7200, "192.0.2.2");
	assert_true(dns_cache_put(c, "long.test", DNS_T_A, IN, T0, &r));
	assert_hit(c, "long.test", DNS_T_A, T0 + cap_ms - 1, &r,
	    DNS_CACHE_TTL_MAX - 1);
	assert_miss(c, "long.test", DNS_T_A, T0 + cap_ms);
	assert_stats(c, 1, 1, 1, 1, 0, 0);
	/* exactly the cap, and the largest TTL there is */
	simple(&r, "cap.test", DNS_CACHE_TTL_MAX, 3);
	assert_true(dns_cache_put(c, "cap.test", DNS_T_A, IN, T0, &r));
	simple(&r, "max.test", UINT32_MAX, 4);
	assert_true(dns_cache_put(c, "max.test", DNS_T_A, IN, T0, &r));
	assert_hit(c, "max.test", DNS_T_A, T0 + cap_ms - 1, &r,
	    DNS_CACHE_TTL_MAX - 1);
	assert_miss(c, "cap.test", DNS_T_A, T0 + cap_ms);
	assert_miss(c, "max.test", DNS_T_A, T0 + cap_ms);
	assert_stats(c, 2, 3, 3, 3, 0, 0);
	dns_cache_free(c);
}

/* A TTL of 0 anywhere means: not to be kept. */
static void
test_ttl_zero(void **state)
{
	static struct dns_response r;
	struct dns_cache *c = dns_cache_new(4);

	(void)state;
	simple(&r, "z.test", 0, 1);
	assert_false(dns_cache_put(c, "z.test", DNS_T_A, IN, T0, &r));
	resp_init(&r, DNS_R_NOERROR);
	add_cname(&r, "z.test", 300, "y.test");
	add_a(&r, "y.test", 0, "192.0.2.1");
	assert_false(dns_cache_put(c, "z.test", DNS_T_A, IN, T0, &r));
	assert_miss(c, "z.test", DNS_T_A, T0);
	assert_stats(c, 0, 1, 0, 0, 0, 0);
	/* 1 s is kept, for 1 s */
	simple(&r, "z.test", 1, 1);
	assert_true(dns_cache_put(c, "z.test", DNS_T_A, IN, T0, &r));
	assert_hit(c, "z.test", DNS_T_A, T0 + 999, &r, 0);
	assert_miss(c, "z.test", DNS_T_A, T0 + 1000);
	dns_cache_free(c);
}

/* Only NOERROR with at least one record is kept. */
static void
test_negative_not_kept(void **state)
{
	static struct dns_response r;
	struct dns_cache *c = dns_cache_new(4);
	static const uint8_t rcodes[] = { DNS_R_NXDOMAIN, DNS_R_SERVFAIL,
	    DNS_R_REFUSED, DNS_R_FORMERR, DNS_R_NOTIMP };
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(rcodes); i++) {
		resp_init(&r, rcodes[i]);
		assert_false(dns_cache_put(c, "neg.test", DNS_T_A, IN, T0, &r));
		/* even with records in it */
		add_a(&r, "neg.test", 300, "192.0.2.1");
		assert_false(dns_cache_put(c, "neg.test", DNS_T_A, IN, T0, &r));
	}
	/* a truncated answer (TC), records and all: the rest is missing */
	resp_init(&r, DNS_R_NOERROR);
	r.flags |= DNS_FLAG_TC;
	add_a(&r, "neg.test", 300, "192.0.2.1");
	assert_false(dns_cache_put(c, "neg.test", DNS_T_A, IN, T0, &r));
	/* NODATA: NOERROR without records (skipped ones do not count) */
	resp_init(&r, DNS_R_NOERROR);
	r.nskipped = 3;
	assert_false(dns_cache_put(c, "neg.test", DNS_T_A, IN, T0, &r));
	assert_miss(c, "neg.test", DNS_T_A, T0);
	assert_stats(c, 0, 1, 0, 0, 0, 0);
	dns_cache_free(c);
}

/* The key is (name, type, class): each kept apart. */
static void
test_key(void **state)
{
	static struct dns_response a, aaaa, ch;
	struct dns_cache *c = dns_cache_new(8);
	static struct dns_response got;

	(void)state;
	simple(&a, "k.test", 300, 1);
	assert_true(dns_cache_put(c, "k.test", DNS_T_A, IN, T0, &a));
	assert_miss(c, "k.test", DNS_T_AAAA, T0);
	assert_false(dns_cache_get(c, "k.test", DNS_T_A, 3, T0, &got));
	assert_miss(c, "k.tesu", DNS_T_A, T0);
	resp_init(&aaaa, DNS_R_NOERROR);
	add_aaaa(&aaaa, "k.test", 200, "2001:db8::1");
	assert_true(dns_cache_put(c, "k.test", DNS_T_AAAA, IN, T0, &aaaa));
	simple(&ch, "k.test", 100, 9);
	assert_true(dns_cache_put(c, "k.test", DNS_T_A, 3, T0, &ch));
	assert_hit(c, "k.test", DNS_T_A, T0 + 1000, &a, 1);
	assert_hit(c, "k.test", DNS_T_AAAA, T0 + 1000, &aaaa, 1);
	memset(&got, 0, sizeof(got));
	assert_true(dns_cache_get(c, "k.test", DNS_T_A, 3, T0 + 1000, &got));
	assert_int_equal(got.qclass, 3);
	assert_records(&got, &ch, 1);
	assert_stats(c, 3, 3, 3, 0, 0, 3);
	/* names are matched as given: the caller normalises them */
	assert_miss(c, "K.TEST", DNS_T_A, T0 + 1000);
	dns_cache_free(c);
}

/* A CNAME chain and its addresses come back as they went in, in order. */
static void
test_cname_chain(void **state)
{
	static struct dns_response r;
	struct dns_cache *c = dns_cache_new(4);

	(void)state;
	resp_init(&r, DNS_R_NOERROR);
	add_cname(&r, "www.example.test", 3000, "www.example.test.cdn.test");
	add_cname(&r, "www.example.test.cdn.test", 60, "edge-7.cdn.test");
	add_a(&r, "edge-7.cdn.test", 20, "198.51.100.7");
	add_a(&r, "edge-7.cdn.test", 20, "198.51.100.255");
	add_a(&r, "edge-7.cdn.test", 25, "0.0.0.1");
	r.nskipped = 1;
	assert_true(dns_cache_put(c, "www.example.test", DNS_T_A, IN, T0, &r));
	assert_hit(c, "www.example.test", DNS_T_A, T0 + 19999, &r, 19);
	/* spelled out, not only through assert_records */
	{
		static struct dns_response got;

		assert_true(dns_cache_get(c, "www.example.test", DNS_T_A, IN,
		    T0 + 3000, &got));
		assert_int_equal(got.nrr, 5);
		assert_int_equal(got.rr[0].type, DNS_T_CNAME);
		assert_string_equal(got.rr[0].name, "www.example.test");
		assert_string_equal(got.rr[0].data.cname,
		    "www.example.test.cdn.test");
		assert_int_equal(got.rr[0].ttl, 2997);
		assert_int_equal(got.rr[1].type, DNS_T_CNAME);
		assert_string_equal(got.rr[1].data.cname, "edge-7.cdn.test");
		assert_int_equal(got.rr[1].ttl, 57);
		assert_int_equal(got.rr[2].type, DNS_T_A);
		assert_string_equal(got.rr[2].name, "edge-7.cdn.test");
		assert_memory_equal(got.rr[2].data.a, "\xc6\x33\x64\x07", 4);
		assert_memory_equal(got.rr[3].data.a, "\xc6\x33\x64\xff", 4);
		assert_memory_equal(got.rr[4].data.a, "\x00\x00\x00\x01", 4);
		assert_int_equal(got.rr[4].ttl, 22);
		assert_string_equal(got.qname, "www.example.test");
	}
	assert_miss(c, "www.example.test", DNS_T_A, T0 + 20000);
	dns_cache_free(c);
}

static void
test_aaaa(void **state)
{
	static struct dns_response r;
	struct dns_cache *c = dns_cache_new(4);

	(void)state;
	resp_init(&r, DNS_R_NOERROR);
	add_aaaa(&r, "v6.test", 600, "2001:db8::1");
	add_aaaa(&r, "v6.test", 600, "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff");
	add_aaaa(&r, "v6.test", 600, "::");
	assert_true(dns_cache_put(c, "v6.test", DNS_T_AAAA, IN, T0, &r));
	assert_hit(c, "v6.test", DNS_T_AAAA, T0 + 61000, &r, 61);
	assert_miss(c, "v6.test", DNS_T_A, T0);
	dns_cache_free(c);
}

/*
 * An entry holds 1024 bytes of records, each packed as type (2), TTL (4),
 * owner (1 + length) and data (1 + 4, 1 + 16, or 1 + the target's
 * length): eight A records with 116-byte owners fill it exactly.
 */
static void
test_blob_bound(void **state)
{
	static struct dns_response r;
	struct dns_cache *c = dns_cache_new(4);
	char name[DNS_NAME_MAX + 1], name2[DNS_NAME_MAX + 1];
	size_t i;

	(void)state;
	long_name(name, 116, 'q');
	long_name(name2, 117, 'q');
	resp_init(&r, DNS_R_NOERROR);
	for (i = 0; i < 8; i++)
		add_a(&r, name, 60, "192.0.2.1");
	assert_true(dns_cache_put(c, "fit.test", DNS_T_A, IN, T0, &r));
	assert_hit(c, "fit.test", DNS_T_A, T0, &r, 0);
	strcpy(r.rr[7].name, name2);	/* one byte more */
	assert_false(dns_cache_put(c, "over.test", DNS_T_A, IN, T0, &r));
	assert_miss(c, "over.test", DNS_T_A, T0);
	assert_stats(c, 1, 1, 1, 0, 0, 1);
	dns_cache_free(c);
}

/* An answer too large to keep is not kept and leaves the cache as it
 * was: nothing evicted for it, nothing replaced by it. */
static void
test_too_large(void **state)
{
	static struct dns_response big, r1, r2, r3;
	struct dns_cache *c = dns_cache_new(3);
	char from[DNS_NAME_MAX + 1], to[DNS_NAME_MAX + 1];
	size_t i;

	(void)state;
	resp_init(&big, DNS_R_NOERROR);
	for (i = 0; i < DNS_RR_MAX; i++) {
		long_name(from, 120, (char)('a' + i % 26));
		long_name(to, 120, (char)('a' + (i + 1) % 26));
		add_cname(&big, from, 300, to);
	}
	simple(&r1, "one.test", 300, 1);
	simple(&r2, "two.test", 300, 2);
	simple(&r3, "three.test", 300, 3);
	assert_true(dns_cache_put(c, "one.test", DNS_T_A, IN, T0, &r1));
	assert_true(dns_cache_put(c, "two.test", DNS_T_A, IN, T0, &r2));
	/* room left: still not kept */
	assert_false(dns_cache_put(c, "big.test", DNS_T_A, IN, T0, &big));
	assert_stats(c, 0, 0, 2, 0, 0, 2);
	assert_true(dns_cache_put(c, "three.test", DNS_T_A, IN, T0, &r3));
	/* full: nothing is evicted for an answer that is not kept */
	assert_false(dns_cache_put(c, "big.test", DNS_T_A, IN, T0, &big));
	assert_stats(c, 0, 0, 3, 0, 0, 3);
	/* nor is a kept answer to the same question dropped for it */
	assert_false(dns_cache_put(c, "two.test", DNS_T_A, IN, T0, &big));
	assert_stats(c, 0, 0, 3, 0, 0, 3);
	assert_miss(c, "big.test", DNS_T_A, T0);
	assert_hit(c, "one.test", DNS_T_A, T0 + 1000, &r1, 1);
	assert_hit(c, "two.test", DNS_T_A, T0 + 1000, &r2, 1);
	assert_hit(c, "three.test", DNS_T_A, T0 + 1000, &r3, 1);
	assert_stats(c, 3, 1, 3, 0, 0, 3);
	/* and the cache still works at its bound */
	simple(&r1, "four.test", 300, 4);
	assert_true(dns_cache_put(c, "four.test", DNS_T_A, IN, T0, &r1));
	assert_stats(c, 3, 1, 4, 0, 1, 3);
	assert_miss(c, "one.test", DNS_T_A, T0 + 1000);
	dns_cache_free(c);
}

/* The least recently used entry (put or hit) goes first. */
static void
test_lru(void **state)
{
	static struct dns_response r[6];
	static const char *const names[] = { "", "e1.test", "e2.test",
	    "e3.test", "e4.test", "e5.test" };
	struct dns_cache *c = dns_cache_new(3);
	unsigned i;

	(void)state;
	for (i = 1; i <= 5; i++)
		simple(&r[i], names[i], 300, i);
	for (i = 1; i <= 3; i++)
		assert_true(dns_cache_put(c, names[i], DNS_T_A, IN, T0, &r[i]));
	assert_hit(c, names[1], DNS_T_A, T0, &r[1], 0);
	assert_true(dns_cache_put(c, names[4], DNS_T_A, IN, T0, &r[4]));
	assert_stats(c, 1, 0, 4, 0, 1, 3);
	assert_miss(c, names[2], DNS_T_A, T0);
	assert_hit(c, names[1], DNS_T_A, T0, &r[1], 0);
	assert_hit(c, names[3], DNS_T_A, T0, &r[3], 0);
	assert_hit(c, names[4], DNS_T_A, T0, &r[4], 0);
	/* use order now 4, 3, 1: 1 goes next */
	assert_true(dns_cache_put(c, names[5], DNS_T_A, IN, T0, &r[5]));
	assert_stats(c, 4, 1, 5, 0, 2, 3);
	assert_miss(c, names[1], DNS_T_A, T0);
	/* a replaced entry counts as just used: 3 is replaced, 4 goes */
	assert_true(dns_cache_put(c, names[3], DNS_T_A, IN, T0, &r[3]));
	assert_true(dns_cache_put(c, names[2], DNS_T_A, IN, T0, &r[2]));
	assert_stats(c, 4, 2, 7, 0, 3, 3);
	assert_miss(c, names[4], DNS_T_A, T0);
	assert_hit(c, names[2], DNS_T_A, T0, &r[2], 0);
	assert_hit(c, names[3], DNS_T_A, T0, &r[3], 0);
	assert_hit(c, names[5], DNS_T_A, T0, &r[5], 0);
	dns_cache_free(c);
}

/* A put for a kept question replaces its answer, in the same entry. */
static void
test_replace(void **state)
{
	static struct dns_response r1, r2;
	struct dns_cache *c = dns_cache_new(2);

	(void)state;
	simple(&r1, "r.test", 60, 1);
	resp_init(&r2, DNS_R_NOERROR);
	add_a(&r2, "r.test", 120, "192.0.2.2");
	add_a(&r2, "r.test", 120, "192.0.2.3");
	assert_true(dns_cache_put(c, "r.test", DNS_T_A, IN, T0, &r1));
	assert_true(dns_cache_put(c, "r.test", DNS_T_A, IN, T0 + 10000, &r2));
	assert_stats(c, 0, 0, 2, 0, 0, 1);
	assert_hit(c, "r.test", DNS_T_A, T0 + 10000, &r2, 0);
	/* the new answer's lifetime, from the new time */
	assert_hit(c, "r.test", DNS_T_A, T0 + 129999, &r2, 119);
	assert_miss(c, "r.test", DNS_T_A, T0 + 130000);
	/* a second entry fits beside it without evicting */
	assert_true(dns_cache_put(c, "r.test", DNS_T_A, IN, T0, &r1));
	assert_true(dns_cache_put(c, "r.test", DNS_T_A, IN, T0, &r2));
	assert_true(dns_cache_put(c, "s.test", DNS_T_A, IN, T0, &r1));
	assert_stats(c, 2, 1, 5, 1, 0, 2);
	dns_cache_free(c);
}

static void
test_flush(void **state)
{
	static struct dns_response r;
	struct dns_cache *c = dns_cache_new(5);
	char name[32];
	unsigned i;

	(void)state;
	dns_cache_flush(c);	/* empty: nothing to do */
	for (i = 0; i < 5; i++) {
		snprintf(name, sizeof(name), "f%u.test", i);
		simple(&r, name, 300, i);
		assert_true(dns_cache_put(c, name, DNS_T_A, IN, T0, &r));
	}
	assert_stats(c, 0, 0, 5, 0, 0, 5);
	dns_cache_flush(c);
	assert_stats(c, 0, 0, 5, 0, 0, 0);
	for (i = 0; i < 5; i++) {
		snprintf(name, sizeof(name), "f%u.test", i);
		assert_miss(c, name, DNS_T_A, T0);
	}
	assert_stats(c, 0, 5, 5, 0, 0, 0);
	/* every entry is free again: five fit without an eviction */
	for (i = 0; i < 5; i++) {
		snprintf(name, sizeof(name), "g%u.test", i);
		simple(&r, name, 300, i);
		assert_true(dns_cache_put(c, name, DNS_T_A, IN, T0, &r));
	}
	assert_stats(c, 0, 5, 10, 0, 0, 5);
	simple(&r, "g0.test", 300, 0);
	assert_hit(c, "g0.test", DNS_T_A, T0, &r, 0);
	assert_int_equal(cstats(c).capacity, 5);
	dns_cache_free(c);
}

/* ---- against a model ---------------------------------------------------- */

#define M_CAP	16
#define M_NAMES	24
#define M_OPS	6000
#define M_RR	3

struct model_entry {
	bool		used;
	unsigned	key;		/* name index * 2 + (AAAA ? 1 : 0) */
	struct dns_response resp;
	uint64_t	stored, expires, last_use;
};

struct model {
	struct model_entry	e[M_CAP];
	uint64_t		tick;
	struct dns_cache_stats	st;
};

static uint32_t rng_state = 20261129;

static uint32_t
rng(uint32_t n)
{
	/* xorshift32: fixed seed, the same run each time */
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 17;
	rng_state ^= rng_state << 5;
	return rng_state % n;
}

static void
key_parts(unsigned key, char *name, size_t len, uint16_t *qtype)
{
	snprintf(name, len, "m%u.model.test", key / 2);
	*qtype = key % 2 ? DNS_T_AAAA : DNS_T_A;
}

static struct model_entry *
model_find(struct model *m, unsigned key)
{
	size_t i;

	for (i = 0; i < M_CAP; i++)
		if (m->e[i].used && m->e[i].key == key)
			return &m->e[i];
	return NULL;
}

static void
model_put(struct model *m, unsigned key, uint64_t now,
    const struct dns_response *r, bool keepable)
{
	struct model_entry *x, *lru = NULL;
	uint32_t ttl = UINT32_MAX;
	size_t i, n = 0;

	if (!keepable)
		return;
	for (i = 0; i < r->nrr; i++)
		if (r->rr[i].ttl < ttl)
			ttl = r->rr[i].ttl;
	if (ttl > DNS_CACHE_TTL_MAX)
		ttl = DNS_CACHE_TTL_MAX;
	if ((x = model_find(m, key)) != NULL)
		x->used = false;
	for (i = 0; i < M_CAP; i++) {
		if (!m->e[i].used)
			continue;
		n++;
		if (lru == NULL || m->e[i].last_use < lru->last_use)
			lru = &m->e[i];
	}
	if (n == M_CAP) {
		lru->used = false;
		m->st.evicted++;
	}
	for (x = m->e; x->used; x++)
		;
	x->used = true;
	x->key = key;
	x->resp = *r;
	x->stored = now;
	x->expires = now + (uint64_t)ttl * 1000;
	x->last_use = ++m->tick;
	m->st.stored++;
}

/* Whether the model has a live answer; its entry in *hit. */
static bool
model_get(struct model *m, unsigned key, uint64_t now,
    struct model_entry **hit)
{
	struct model_entry *x = model_find(m, key);

	if (x == NULL) {
		m->st.misses++;
		return false;
	}
	if (now >= x->expires) {
		x->used = false;
		m->st.expired++;
		m->st.misses++;
		return false;
	}
	x->last_use = ++m->tick;
	m->st.hits++;
	*hit = x;
	return true;
}

/* A random answer for key: mostly keepable, sometimes not (TTL 0, an
 * error, no records, too large). Returns whether it may be kept. */
static bool
random_answer(struct dns_response *r, unsigned key, unsigned serial)
{
	char name[64], target[64], big[DNS_NAME_MAX + 1];
	uint16_t qtype;
	uint32_t kind = rng(100);
	size_t i, n;

	key_parts(key, name, sizeof(name), &qtype);
	resp_init(r, DNS_R_NOERROR);
	if (kind < 3) {
		resp_init(r, DNS_R_NXDOMAIN);
		return false;
	}
	if (kind < 5)
		return false;			/* NODATA */
	if (kind < 8) {
		for (i = 0; i < DNS_RR_MAX; i++) {
			long_name(big, 200, (char)('a' + i % 26));
			add_cname(r, big, 300, name);
		}
		return false;			/* too large */
	}
	n = 1 + rng(M_RR);
	if (rng(3) == 0) {
		snprintf(target, sizeof(target), "t%u.cdn.test", serial);
		add_cname(r, name, 1 + rng(30), target);
		n--;
	} else
		snprintf(target, sizeof(target), "%s", name);
	for (i = 0; i < n; i++) {
		char a[64];

		if (qtype == DNS_T_A) {
			snprintf(a, sizeof(a), "10.%u.%u.%zu", serial >> 8 & 255,
			    serial & 255, i);
			add_a(r, target, 1 + rng(30), a);
		} else {
			snprintf(a, sizeof(a), "2001:db8::%x:%zx", serial, i);
			add_aaaa(r, target, 1 + rng(30), a);
		}
	}
	if (kind < 10) {
		r->rr[rng((uint32_t)r->nrr)].ttl = 0;
		return false;
	}
	if (kind < 12)
		r->rr[0].ttl = 4000 + rng(100000);	/* past the cap */
	r->nskipped = rng(3);
	return true;
}

static void
test_model(void **state)
{
	static struct model m;
	static struct dns_response r, got;
	struct dns_cache *c = dns_cache_new(M_CAP);
	struct model_entry *hit = NULL;
	struct dns_cache_stats st;
	uint64_t now = T0;
	unsigned op, key;
	char name[64];
	uint16_t qtype;
	bool kept, want;
	size_t i;

	(void)state;
	memset(&m, 0, sizeof(m));
	for (op = 0; op < M_OPS; op++) {
		now += rng(2000);
		key = rng(M_NAMES * 2);
		key_parts(key, name, sizeof(name), &qtype);
		if (rng(700) == 0) {
			dns_cache_flush(c);
			for (i = 0; i < M_CAP; i++)
				m.e[i].used = false;
		} else if (rng(2) == 0) {
			want = random_answer(&r, key, op);
			kept = dns_cache_put(c, name, qtype, IN, now, &r);
			if (kept != want)
				fail_msg("op %u: put %s/%u: %d, want %d", op,
				    name, qtype, kept, want);
			model_put(&m, key, now, &r, want);
		} else {
			memset(&got, 0x5a, sizeof(got));
			kept = dns_cache_get(c, name, qtype, IN, now, &got);
			want = model_get(&m, key, now, &hit);
			if (kept != want)
				fail_msg("op %u: get %s/%u: %d, want %d", op,
				    name, qtype, kept, want);
			if (kept) {
				assert_int_equal(got.qtype, qtype);
				assert_int_equal(got.nskipped,
				    hit->resp.nskipped);
				assert_records(&got, &hit->resp,
				    (uint32_t)((now - hit->stored) / 1000));
			}
		}
		st = cstats(c);
		m.st.entries = 0;
		for (i = 0; i < M_CAP; i++)
			m.st.entries += m.e[i].used;
		if (st.hits != m.st.hits || st.misses != m.st.misses ||
		    st.stored != m.st.stored || st.expired != m.st.expired ||
		    st.evicted != m.st.evicted || st.entries != m.st.entries ||
		    st.capacity != M_CAP)
			fail_msg("op %u: stats differ from the model", op);
	}
	/* the run went through every case */
	assert_true(m.st.hits > 300);
	assert_true(m.st.expired > 100);
	assert_true(m.st.evicted > 100);
	assert_true(m.st.misses > m.st.expired);
	dns_cache_free(c);
}

/*
 * SipHash-2-4 against the reference vectors of Aumasson and Bernstein:
 * key 00 01 .. 0f, messages 00 01 .. (n-1) for n = 0, 7, 8, 15, 16 (the
 * tail, a whole word, a word and a tail, two words), and as words.
 */
static void
test_siphash_vectors(void **state)
{
	struct dns_hash_key k;
	uint8_t key[16], msg[16];
	size_t i;

	(void)state;
	for (i = 0; i < 16; i++)
		key[i] = msg[i] = (uint8_t)i;
	k.k0 = k.k1 = 0;
	for (i = 8; i-- > 0; ) {
		k.k0 = k.k0 << 8 | key[i];
		k.k1 = k.k1 << 8 | key[8 + i];
	}
	assert_true(dns_siphash(&k, msg, 0) == 0x726fdb47dd0e0e31ULL);
	assert_true(dns_siphash(&k, msg, 7) == 0xab0200f58b01d137ULL);
	assert_true(dns_siphash(&k, msg, 8) == 0x93f5f5799a932462ULL);
	assert_true(dns_siphash(&k, msg, 15) == 0xa129ca6149be45e5ULL);
	assert_true(dns_siphash(&k, msg, 16) == 0x3f2acc7f57c29bdbULL);
	/* the same messages as words (the flow table's keys): little-endian */
	{
		const uint64_t w[2] = { 0x0706050403020100ULL,
		    0x0f0e0d0c0b0a0908ULL };

		assert_true(dns_siphash_words(&k, w, 0) ==
		    0x726fdb47dd0e0e31ULL);
		assert_true(dns_siphash_words(&k, w, 1) ==
		    0x93f5f5799a932462ULL);
		assert_true(dns_siphash_words(&k, w, 2) ==
		    0x3f2acc7f57c29bdbULL);
	}
	/* two fresh keys differ (the kernel's generator) */
	{
		struct dns_hash_key a, b;

		dns_hash_key_new(&a, &a);
		dns_hash_key_new(&b, &b);
		assert_false(a.k0 == b.k0 && a.k1 == b.k1);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_siphash_vectors),
		cmocka_unit_test(test_new_bounds),
		cmocka_unit_test(test_miss_then_hit),
		cmocka_unit_test(test_ttl_countdown),
		cmocka_unit_test(test_expiry_exact),
		cmocka_unit_test(test_min_ttl),
		cmocka_unit_test(test_ttl_cap),
		cmocka_unit_test(test_ttl_zero),
		cmocka_unit_test(test_negative_not_kept),
		cmocka_unit_test(test_key),
		cmocka_unit_test(test_cname_chain),
		cmocka_unit_test(test_aaaa),
		cmocka_unit_test(test_blob_bound),
		cmocka_unit_test(test_too_large),
		cmocka_unit_test(test_lru),
		cmocka_unit_test(test_replace),
		cmocka_unit_test(test_flush),
		cmocka_unit_test(test_model),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
