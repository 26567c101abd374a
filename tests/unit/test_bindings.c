/* test_bindings.c: DNS bindings: lookups, expiry, bounds, and a model. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "dns/dns.h"
#include "gateway/gw.h"	/* the daemon's bounds */

/* bind.c's BIND_RECLAIM_PER_ADD: how many expired entries every add frees
 * before its own work. The exact counts below depend on it. */
#define RECLAIM_PER_ADD	2
/* bind.c's BIND_RECLAIM_QUARTER: how many more an add in the last quarter
 * may free. */
#define RECLAIM_QUARTER	256

#define ADDR_A	0xc6336407U	/* any byte order: the table does not care */
#define ADDR_B	0xc6336408U

/* A table with all four bounds; per_addr and light 0: not bounded. */
static struct dns_bindings *
bnew4(size_t total, size_t per_sandbox, size_t per_addr, size_t light)
{
	struct dns_bindings_bounds bb = {
		.total = total, .per_sandbox = per_sandbox,
		.per_addr = per_addr, .light = light,
	};

	return dns_bindings_new(&bb);
}

/* Bounded in total and per sandbox only. */
static struct dns_bindings *
bnew(size_t total, size_t per_sandbox)
{
	return bnew4(total, per_sandbox, 0, 0);
}

/* ---- collecting what find reports ---------------------------------------- */

#define SEEN_MAX	1024

struct seen {
	size_t	 n;
	size_t	 stop_at;	/* true on call number stop_at; 0: never */
	char	 names[SEEN_MAX][DNS_NAME_MAX + 1];
	uint64_t expires[SEEN_MAX];	/* each name's expiry, as reported */
};

static bool
collect(void *arg, const char *name, uint64_t expires_ms)
{
	struct seen *s = arg;

	assert_true(s->n < SEEN_MAX);
	assert_true(strlen(name) <= DNS_NAME_MAX);
	s->expires[s->n] = expires_ms;
	strcpy(s->names[s->n++], name);
	return s->stop_at != 0 && s->n == s->stop_at;
}

static struct seen *
seen_new(void)
{
	struct seen *s = calloc(1, sizeof(*s));

	assert_non_null(s);
	return s;
}

/* Finds (sandbox, addr) at now into s (reset first); returns find's result. */
static bool
find_into(struct dns_bindings *b, uint32_t sandbox, uint32_t addr,
    uint64_t now, struct seen *s, size_t stop_at)
{
	s->n = 0;
	s->stop_at = stop_at;
	return dns_bindings_find(b, sandbox, addr, now, collect, s);
}

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(a, b);
}

/* The names seen are exactly want[0..nwant), in any order, each once. */
static void
assert_seen_set(struct seen *s, const char *const *want, size_t nwant)
{
	char (*w)[DNS_NAME_MAX + 1];
	size_t i;

	assert_int_equal(s->n, nwant);
	if (nwant == 0)
		return;
	w = calloc(nwant, sizeof(*w));
	assert_non_null(w);
	for (i = 0; i < nwant; i++)
		strcpy(w[i], want[i]);
	qsort(w, nwant, sizeof(*w), cmp_str);
	qsort(s->names, s->n, sizeof(s->names[0]), cmp_str);
	for (i = 0; i < nwant; i++)
		assert_string_equal(s->names[i], w[i]);
	free(w);
}

static void
assert_finds_one(struct dns_bindings *b, uint32_t sandbox, uint32_t addr,
    uint64_t now, const char *name)
{
	struct seen *s = seen_new();

	assert_false(find_into(b, sandbox, addr, now, s, 0));
	assert_seen_set(s, &name, 1);
	free(s);
}

static void
assert_finds_none(struct dns_bindings *b, uint32_t sandbox, uint32_t addr,
    uint64_t now)
{
	struct seen *s = seen_new();

	assert_false(find_into(b, sandbox, addr, now, s, 0));
	assert_int_equal(s->n, 0);
	free(s);
}

/* ---- unit tests ---------------------------------------------------------- */

static void
test_new_bounds(void **state)
{
	struct dns_bindings *b;

	(void)state;
	errno = 0;
	assert_null(bnew(0, 1));
	assert_int_equal(errno, EINVAL);
	assert_null(bnew(1, 0));
	assert_null(bnew(((size_t)1 << 31) + 1, 1));
	/* Bounds past the table's size are no bounds. */
	b = bnew4(1, SIZE_MAX, SIZE_MAX, SIZE_MAX);
	assert_non_null(b);
	assert_int_equal(dns_bindings_add(b, 1, ADDR_A, "a.example", 0, 10),
	    0);
	dns_bindings_free(b);
	b = bnew(1, 1);
	assert_non_null(b);
	assert_int_equal(dns_bindings_count(b), 0);
	assert_int_equal(dns_bindings_count_sandbox(b, 0), 0);
	assert_finds_none(b, 0, 0, 0);
	dns_bindings_forget(b, 0);
	dns_bindings_free(b);
	dns_bindings_free(NULL);
}

static void
test_add_find_one(void **state)
{
	struct dns_bindings *b;
	struct seen *s = seen_new();

	(void)state;
	b = bnew(16, 4);
	assert_non_null(b);
	assert_int_equal(dns_bindings_add(b, 1, ADDR_A, "example.com", 1000,
	    2000), 0);
	assert_int_equal(dns_bindings_count(b), 1);
	assert_int_equal(dns_bindings_count_sandbox(b, 1), 1);
	assert_int_equal(dns_bindings_count_sandbox(b, 2), 0);

	assert_finds_one(b, 1, ADDR_A, 1000, "example.com");
	assert_true(find_into(b, 1, ADDR_A, 1500, s, 1));
	assert_int_equal(s->n, 1);
	/* Another address, another sandbox, an address differing in the
	 * other half of the hashed word: nothing. */
	assert_finds_none(b, 1, ADDR_B, 1000);
	assert_finds_none(b, 2, ADDR_A, 1000);
	assert_finds_none(b, 0, ADDR_A, 1000);
	assert_finds_none(b, 1, ADDR_A ^ 0x80000000U, 1000);

	/* The same triple again: still one entry. */
	assert_int_equal(dns_bindings_add(b, 1, ADDR_A, "example.com", 1100,
	    2000), 0);
	assert_int_equal(dns_bindings_count(b), 1);
	dns_bindings_free(b);
	free(s);
}

static void
test_several_names(void **state)
{
	static const char *const names[] = {
		"a.example.com", "b.example.com", "cdn.example.net",
		"example.org",
	};
	struct dns_bindings *b;
	struct seen *s = seen_new();
	size_t i;

	(void)state;
	b = bnew(16, 8);
	assert_non_null(b);
	for (i = 0; i < 4; i++)
		assert_int_equal(dns_bindings_add(b, 3, ADDR_A, names[i], 0,
		    1000 + i), 0);
	assert_int_equal(dns_bindings_add(b, 3, ADDR_B, "other.example", 0,
	    1000), 0);
	/* A name that is a prefix of a bound one is another name. */
	assert_int_equal(dns_bindings_add(b, 3, ADDR_A, "a.example.co", 0,
	    1000), 0);
	assert_int_equal(dns_bindings_count(b), 6);
	assert_int_equal(dns_bindings_count_sandbox(b, 3), 6);

	assert_false(find_into(b, 3, ADDR_A, 500, s, 0));
	{
		const char *const want[] = {
			"a.example.com", "b.example.com", "cdn.example.net",
			"example.org", "a.example.co",
		};
		assert_seen_set(s, want, 5);
	}
	assert_finds_one(b, 3, ADDR_B, 500, "other.example");

	/* Expiring one by one: 1000, 1001, ... */
	assert_false(find_into(b, 3, ADDR_A, 1001, s, 0));
	{
		const char *const want[] = {
			"cdn.example.net", "example.org",
		};
		assert_seen_set(s, want, 2);
	}
	dns_bindings_free(b);
	free(s);
}

static void
test_many_names_one_address(void **state)
{
	struct dns_bindings *b;
	struct seen *s = seen_new();
	char name[32];
	unsigned i;

	(void)state;
	b = bnew(1000, 600);
	assert_non_null(b);
	for (i = 0; i < 600; i++) {
		snprintf(name, sizeof(name), "h%u.cdn.example", i);
		assert_int_equal(dns_bindings_add(b, 9, ADDR_A, name, 0,
		    10000 + i), 0);
	}
	assert_int_equal(dns_bindings_add(b, 9, ADDR_A, "one.more", 0, 20000),
	    -1);
	assert_int_equal(errno, ENOSPC);
	/* At the sandbox's bound, a name already bound is found (through
	 * its own chain, in any case) and extended, not refused. */
	assert_int_equal(dns_bindings_add(b, 9, ADDR_A, "H17.cdn.EXAMPLE", 0,
	    20000), 0);
	assert_int_equal(dns_bindings_count(b), 600);
	/* The same name on the address for another sandbox is its own. */
	assert_int_equal(dns_bindings_add(b, 8, ADDR_A, "h17.cdn.example", 0,
	    500), 0);
	assert_int_equal(dns_bindings_count(b), 601);
	assert_finds_one(b, 8, ADDR_A, 0, "h17.cdn.example");
	dns_bindings_forget(b, 8);
	assert_false(find_into(b, 9, ADDR_A, 0, s, 0));
	assert_int_equal(s->n, 600);
	qsort(s->names, s->n, sizeof(s->names[0]), cmp_str);
	for (i = 1; i < s->n; i++)
		assert_true(strcmp(s->names[i - 1], s->names[i]) < 0);
	/* At 10300, those up to 10300 have expired but h17; none was
	 * reclaimed. */
	assert_false(find_into(b, 9, ADDR_A, 10300, s, 0));
	assert_int_equal(s->n, 300);
	assert_int_equal(dns_bindings_count(b), 600);
	dns_bindings_forget(b, 9);
	assert_int_equal(dns_bindings_count(b), 0);
	assert_finds_none(b, 9, ADDR_A, 0);
	dns_bindings_free(b);
	free(s);
}

static void
test_sandboxes_independent(void **state)
{
	struct dns_bindings *b;

	(void)state;
	b = bnew(16, 4);
	assert_non_null(b);
	assert_int_equal(dns_bindings_add(b, 1, ADDR_A, "one.example", 0,
	    1000), 0);
	assert_int_equal(dns_bindings_add(b, 2, ADDR_A, "two.example", 0,
	    2000), 0);
	/* Sandbox ids beyond 16 bits hash and count like any other. */
	assert_int_equal(dns_bindings_add(b, UINT32_MAX, ADDR_A,
	    "max.example", 0, 3000), 0);
	assert_finds_one(b, 1, ADDR_A, 0, "one.example");
	assert_finds_one(b, 2, ADDR_A, 0, "two.example");
	assert_finds_one(b, UINT32_MAX, ADDR_A, 0, "max.example");
	assert_int_equal(dns_bindings_count_sandbox(b, 1), 1);
	assert_int_equal(dns_bindings_count_sandbox(b, 2), 1);
	assert_int_equal(dns_bindings_count_sandbox(b, UINT32_MAX), 1);
	assert_int_equal(dns_bindings_count(b), 3);

	/* Each its own expiry. */
	assert_finds_none(b, 1, ADDR_A, 1000);
	assert_finds_one(b, 2, ADDR_A, 1000, "two.example");
	dns_bindings_free(b);
}

static void
test_extension(void **state)
{
	struct dns_bindings *b;

	(void)state;
	b = bnew(16, 4);
	assert_non_null(b);
	assert_int_equal(dns_bindings_add(b, 1, ADDR_A, "example.com", 0,
	    5000), 0);
	/* A shorter expiry leaves the longer one. */
	assert_int_equal(dns_bindings_add(b, 1, ADDR_A, "example.com", 1000,
	    3000), 0);
	assert_finds_one(b, 1, ADDR_A, 4999, "example.com");
	assert_finds_none(b, 1, ADDR_A, 5000);
	/* A longer one extends, and find reports the new expiry (the
	 * kernel-SYN set's entries last no longer than it). */
	assert_int_equal(dns_bindings_add(b, 1, ADDR_A, "example.com", 2000,
	    8000), 0);
	assert_finds_one(b, 1, ADDR_A, 7999, "example.com");
	{
		struct seen *s = seen_new();

		assert_true(find_into(b, 1, ADDR_A, 7999, s, 0) == false);
		assert_int_equal(s->n, 1);
		assert_int_equal(s->expires[0], 8000);
		free(s);
	}
	assert_finds_none(b, 1, ADDR_A, 8000);
	/* Case does not make another binding; stored in lower case. */
	assert_int_equal(dns_bindings_add(b, 1, ADDR_A, "EXAMPLE.Com", 2000,
	    9000), 0);
	assert_int_equal(dns_bindings_count(b), 1);
	assert_finds_one(b, 1, ADDR_A, 8999, "example.com");
	assert_int_equal(dns_bindings_add(b, 1, ADDR_B, "Upper.EXAMPLE", 2000,
	    9000), 0);
	assert_finds_one(b, 1, ADDR_B, 2000, "upper.example");

	assert_int_equal(dns_bindings_count(b), 2);
	assert_finds_none(b, 1, ADDR_A, 9000);
	dns_bindings_free(b);

	/* An expired binding not yet reclaimed (the add's own reclaim is
	 * spent on two that expired sooner) is extended in place, not
	 * added a second time. */
	b = bnew(16, 4);
	assert_non_null(b);
	assert_int_equal(dns_bindings_add(b, 2, ADDR_A, "e1.example", 0, 50),
	    0);
	assert_int_equal(dns_bindings_add(b, 2, ADDR_A, "e2.example", 0, 60),
	    0);
	assert_int_equal(dns_bindings_add(b, 1, ADDR_A, "old.example", 0,
	    100), 0);
	assert_int_equal(dns_bindings_add(b, 1, ADDR_B, "keep.example", 0,
	    5000), 0);
	assert_finds_none(b, 1, ADDR_A, 100);
	assert_int_equal(dns_bindings_add(b, 1, ADDR_A, "old.example", 200,
	    300), 0);
	assert_int_equal(dns_bindings_count(b), 2);
	assert_int_equal(dns_bindings_count_sandbox(b, 1), 2);
	assert_int_equal(dns_bindings_count_sandbox(b, 2), 0);
	assert_finds_one(b, 1, ADDR_A, 299, "old.example");
	assert_finds_none(b, 1, ADDR_A, 300);
	dns_bindings_free(b);
}

static void
test_expiry_exact(void **state)
{
	struct dns_bindings *b;

	(void)state;
	b = bnew(16, 4);
	assert_non_null(b);
	assert_int_equal(dns_bindings_add(b, 1, ADDR_A, "example.com", 1000,
	    2000), 0);
	assert_finds_one(b, 1, ADDR_A, 1999, "example.com");
	assert_finds_none(b, 1, ADDR_A, 2000);
	assert_finds_none(b, 1, ADDR_A, UINT64_MAX);
	/* Found expired, but still counted until reclaimed. */
	assert_int_equal(dns_bindings_count(b), 1);
	assert_int_equal(dns_bindings_count_sandbox(b, 1), 1);

	/* Dead on arrival: success, nothing stored; the add reclaims the
	 * expired one. */
	assert_int_equal(dns_bindings_add(b, 1, ADDR_B, "late.example", 2000,
	    2000), 0);
	assert_int_equal(dns_bindings_add(b, 1, ADDR_B, "late.example", 3000,
	    10), 0);
	assert_int_equal(dns_bindings_count(b), 0);
	assert_int_equal(dns_bindings_count_sandbox(b, 1), 0);
	assert_finds_none(b, 1, ADDR_B, 0);

	assert_int_equal(dns_bindings_add(b, 1, ADDR_A, "forever.example",
	    3000, UINT64_MAX), 0);
	assert_finds_one(b, 1, ADDR_A, UINT64_MAX - 1, "forever.example");
	assert_finds_none(b, 1, ADDR_A, UINT64_MAX);
	dns_bindings_free(b);
}

static void
test_sandbox_bound(void **state)
{
	struct dns_bindings *b;
	struct seen *s = seen_new();
	char name[32];
	unsigned i;

	(void)state;
	b = bnew(100, 3);
	assert_non_null(b);
	/* Sandboxes 2 and 4 hold the soonest-expiring entries, so that the
	 * reclaim every add does (RECLAIM_PER_ADD, 2, of the soonest
	 * anywhere) is spent on them and sandbox 1's bound has to reclaim
	 * its own. */
	for (i = 0; i < 3; i++) {
		snprintf(name, sizeof(name), "s2-%u.example", i);
		assert_int_equal(dns_bindings_add(b, 2, ADDR_B, name, 0,
		    1500 + i), 0);
		snprintf(name, sizeof(name), "s4-%u.example", i);
		assert_int_equal(dns_bindings_add(b, 4, ADDR_B, name, 0,
		    1600 + i), 0);
	}
	assert_int_equal(dns_bindings_add(b, 1, ADDR_A, "a.example", 0, 2000),
	    0);
	assert_int_equal(dns_bindings_add(b, 1, ADDR_A, "b.example", 0, 3000),
	    0);
	assert_int_equal(dns_bindings_add(b, 1, ADDR_B, "c.example", 0, 4000),
	    0);
	/* Full and all live: refused, whatever the address. */
	errno = 0;
	assert_int_equal(dns_bindings_add(b, 1, ADDR_A, "d.example", 0, 5000),
	    -1);
	assert_int_equal(errno, ENOSPC);
	errno = 0;
	assert_int_equal(dns_bindings_add(b, 1, 0x01020304U, "d.example", 1000,
	    5000), -1);
	assert_int_equal(errno, ENOSPC);
	/* Extending a bound name needs no room. */
	assert_int_equal(dns_bindings_add(b, 1, ADDR_A, "b.example", 1000,
	    3500), 0);
	/* Another sandbox is not affected by sandbox 1's bound. */
	assert_int_equal(dns_bindings_add(b, 3, ADDR_A, "d.example", 1000,
	    6000), 0);
	assert_finds_one(b, 3, ADDR_A, 1000, "d.example");
	assert_int_equal(dns_bindings_count(b), 10);

	/* 1999: a.example is still live. The add reclaims 1500 and 1501 and
	 * still refuses sandbox 1. */
	errno = 0;
	assert_int_equal(dns_bindings_add(b, 1, ADDR_A, "d.example", 1999,
	    5000), -1);
	assert_int_equal(errno, ENOSPC);
	assert_int_equal(dns_bindings_count_sandbox(b, 2), 1);
	assert_int_equal(dns_bindings_count_sandbox(b, 4), 3);
	assert_int_equal(dns_bindings_count_sandbox(b, 1), 3);

	/* 2000: the add reclaims 1502 and 1600; a.example (2000) is dead
	 * and sandbox 1's own reclaim frees it. */
	assert_int_equal(dns_bindings_add(b, 1, ADDR_A, "d.example", 2000,
	    5000), 0);
	assert_int_equal(dns_bindings_count_sandbox(b, 1), 3);
	assert_int_equal(dns_bindings_count_sandbox(b, 2), 0);
	assert_int_equal(dns_bindings_count_sandbox(b, 4), 2);
	assert_int_equal(dns_bindings_count(b), 6);
	{
		const char *const want[] = { "b.example", "d.example" };

		assert_false(find_into(b, 1, ADDR_A, 2000, s, 0));
		assert_seen_set(s, want, 2);
	}
	assert_finds_one(b, 1, ADDR_B, 2000, "c.example");
	dns_bindings_free(b);
	free(s);
}

static void
test_sandbox_bound_after_extension(void **state)
{
	struct dns_bindings *b;

	(void)state;
	/* Extending the sandbox's soonest entry makes another one the
	 * soonest: the bound must reclaim that one. */
	b = bnew(16, 2);
	assert_non_null(b);
	assert_int_equal(dns_bindings_add(b, 2, ADDR_B, "e1.example", 0, 10),
	    0);
	assert_int_equal(dns_bindings_add(b, 2, ADDR_B, "e2.example", 0, 20),
	    0);
	assert_int_equal(dns_bindings_add(b, 1, ADDR_A, "x.example", 0, 100),
	    0);
	assert_int_equal(dns_bindings_add(b, 1, ADDR_A, "y.example", 0, 200),
	    0);
	assert_int_equal(dns_bindings_add(b, 1, ADDR_A, "x.example", 5, 300),
	    0);
	/* 250: the add's reclaim takes e1 and e2; y (200) is sandbox 1's. */
	assert_int_equal(dns_bindings_add(b, 1, ADDR_A, "z.example", 250,
	    400), 0);
	assert_int_equal(dns_bindings_count_sandbox(b, 1), 2);
	assert_int_equal(dns_bindings_count_sandbox(b, 2), 0);
	{
		struct seen *s = seen_new();
		const char *const want[] = { "x.example", "z.example" };

		assert_false(find_into(b, 1, ADDR_A, 250, s, 0));
		assert_seen_set(s, want, 2);
		free(s);
	}
	dns_bindings_free(b);
}

static void
test_sandbox_bound_one(void **state)
{
	struct dns_bindings *b;

	(void)state;
	/* One entry per sandbox: reclaiming at the bound releases the
	 * sandbox's state, which the add then sets up again. */
	b = bnew(8, 1);
	assert_non_null(b);
	assert_int_equal(dns_bindings_add(b, 5, ADDR_A, "x.example", 0, 10),
	    0);
	assert_int_equal(dns_bindings_add(b, 5, ADDR_A, "y.example", 9, 20),
	    -1);
	assert_int_equal(errno, ENOSPC);
	assert_int_equal(dns_bindings_add(b, 5, ADDR_A, "y.example", 10, 20),
	    0);
	assert_int_equal(dns_bindings_count_sandbox(b, 5), 1);
	assert_finds_one(b, 5, ADDR_A, 10, "y.example");
	dns_bindings_free(b);
}

static void
test_total_bound(void **state)
{
	struct dns_bindings *b;
	char name[32];
	unsigned i;

	(void)state;
	b = bnew(4, 10);
	assert_non_null(b);
	for (i = 0; i < 4; i++) {
		snprintf(name, sizeof(name), "n%u.example", i);
		assert_int_equal(dns_bindings_add(b, i, ADDR_A, name, 0,
		    1000 + 100 * i), 0);
	}
	/* Every sandbox is refused, with or without entries of its own. */
	for (i = 0; i < 6; i++) {
		errno = 0;
		assert_int_equal(dns_bindings_add(b, i, ADDR_B, "new.example",
		    999, 5000), -1);
		assert_int_equal(errno, ENOSPC);
	}
	assert_int_equal(dns_bindings_count(b), 4);
	/* Extending is not adding. */
	assert_int_equal(dns_bindings_add(b, 0, ADDR_A, "n0.example", 999,
	    1050), 0);
	assert_int_equal(dns_bindings_add(b, 7, ADDR_B, "new.example", 1049,
	    5000), -1);

	/* 1050: n0 is dead, reclaimed, its room taken by sandbox 7. */
	assert_int_equal(dns_bindings_add(b, 7, ADDR_B, "new.example", 1050,
	    5000), 0);
	assert_int_equal(dns_bindings_count(b), 4);
	assert_int_equal(dns_bindings_count_sandbox(b, 0), 0);
	assert_int_equal(dns_bindings_count_sandbox(b, 7), 1);
	assert_finds_one(b, 7, ADDR_B, 1050, "new.example");
	assert_finds_none(b, 0, ADDR_A, 0);
	assert_finds_one(b, 1, ADDR_A, 1050, "n1.example");
	dns_bindings_free(b);
}

static void
test_forget(void **state)
{
	struct dns_bindings *b;
	char name[32];
	unsigned i;

	(void)state;
	b = bnew(64, 20);
	assert_non_null(b);
	for (i = 0; i < 20; i++) {
		snprintf(name, sizeof(name), "n%u.example", i);
		assert_int_equal(dns_bindings_add(b, 1, ADDR_A + i % 3, name, 0,
		    1000 + (i * 7919) % 100), 0);
	}
	assert_int_equal(dns_bindings_add(b, 2, ADDR_A, "n0.example", 0, 1000),
	    0);
	assert_int_equal(dns_bindings_add(b, 2, ADDR_B, "b.example", 0, 1000),
	    0);
	assert_int_equal(dns_bindings_add(b, 1, ADDR_A, "full.example", 0,
	    1000), -1);
	assert_int_equal(dns_bindings_count(b), 22);

	dns_bindings_forget(b, 1);
	assert_int_equal(dns_bindings_count(b), 2);
	assert_int_equal(dns_bindings_count_sandbox(b, 1), 0);
	for (i = 0; i < 3; i++)
		assert_finds_none(b, 1, ADDR_A + i, 0);
	assert_finds_one(b, 2, ADDR_A, 0, "n0.example");
	assert_finds_one(b, 2, ADDR_B, 0, "b.example");

	/* Room again, up to the bound. */
	for (i = 0; i < 20; i++) {
		snprintf(name, sizeof(name), "again%u.example", i);
		assert_int_equal(dns_bindings_add(b, 1, ADDR_B, name, 0, 1000),
		    0);
	}
	assert_int_equal(dns_bindings_add(b, 1, ADDR_B, "over.example", 0,
	    1000), -1);
	dns_bindings_forget(b, 99);
	assert_int_equal(dns_bindings_count(b), 22);
	dns_bindings_forget(b, 2);
	dns_bindings_forget(b, 2);
	assert_int_equal(dns_bindings_count(b), 20);
	assert_finds_none(b, 2, ADDR_A, 0);
	dns_bindings_free(b);
}

static void
test_early_stop(void **state)
{
	struct dns_bindings *b;
	struct seen *s = seen_new();
	char name[32];
	unsigned i;

	(void)state;
	b = bnew(16, 8);
	assert_non_null(b);
	for (i = 0; i < 5; i++) {
		snprintf(name, sizeof(name), "n%u.example", i);
		assert_int_equal(dns_bindings_add(b, 1, ADDR_A, name, 0, 1000),
		    0);
	}
	assert_true(find_into(b, 1, ADDR_A, 0, s, 2));
	assert_int_equal(s->n, 2);
	assert_true(find_into(b, 1, ADDR_A, 0, s, 5));
	assert_int_equal(s->n, 5);
	assert_false(find_into(b, 1, ADDR_A, 0, s, 6));
	assert_int_equal(s->n, 5);
	assert_false(find_into(b, 1, ADDR_A, 1000, s, 1));
	assert_int_equal(s->n, 0);
	dns_bindings_free(b);
	free(s);
}

static void
test_name_too_long(void **state)
{
	struct dns_bindings *b;
	char name[DNS_NAME_MAX + 2];

	(void)state;
	b = bnew(16, 8);
	assert_non_null(b);
	memset(name, 'a', DNS_NAME_MAX + 1);
	name[DNS_NAME_MAX + 1] = '\0';
	errno = 0;
	assert_int_equal(dns_bindings_add(b, 1, ADDR_A, name, 0, 1000), -1);
	assert_int_equal(errno, ENAMETOOLONG);
	assert_int_equal(dns_bindings_count(b), 0);

	name[DNS_NAME_MAX] = '\0';
	assert_int_equal(dns_bindings_add(b, 1, ADDR_A, name, 0, 1000), 0);
	assert_finds_one(b, 1, ADDR_A, 0, name);
	assert_int_equal(dns_bindings_add(b, 1, ADDR_A, "", 0, 1000), 0);
	assert_int_equal(dns_bindings_count(b), 2);
	dns_bindings_free(b);
}

/* The daemon's names per (sandbox, address): the 257th live name of one
 * address is refused; other addresses and sandboxes are not affected; a
 * dead name makes room even before it is reclaimed. Before the bound, a
 * sandbox could bind its whole 4,096 to one address, and a new flow to it
 * checked all of them against the policy (250 us a decision). */
static void
test_addr_bound(void **state)
{
	struct dns_bindings *b;
	struct seen *s = seen_new();
	char name[32];
	unsigned i;

	(void)state;
	assert_int_equal(GW_BINDINGS_PER_ADDR, 256);
	b = bnew4(4096, 1024, GW_BINDINGS_PER_ADDR, 0);
	assert_non_null(b);
	/* The soonest to expire, so that the adds' own reclaim (two each)
	 * is spent on these below. */
	assert_int_equal(dns_bindings_add(b, 2, ADDR_B, "x.example", 0, 100),
	    0);
	assert_int_equal(dns_bindings_add(b, 2, ADDR_B, "y.example", 0, 101),
	    0);
	for (i = 0; i < 256; i++) {
		snprintf(name, sizeof(name), "h%u.cdn.example", i);
		assert_int_equal(dns_bindings_add(b, 1, ADDR_A, name, 0,
		    1000 + i), 0);
	}
	errno = 0;
	assert_int_equal(dns_bindings_add(b, 1, ADDR_A, "one.more.example",
	    0, 5000), -1);
	assert_int_equal(errno, ENOSPC);
	assert_int_equal(dns_bindings_count_sandbox(b, 1), 256);
	assert_false(find_into(b, 1, ADDR_A, 0, s, 0));
	assert_int_equal(s->n, 256);
	/* Extending a bound name needs no room. */
	assert_int_equal(dns_bindings_add(b, 1, ADDR_A, "H5.cdn.example", 0,
	    6000), 0);
	/* Another address, another sandbox: room. */
	assert_int_equal(dns_bindings_add(b, 1, ADDR_B, "one.more.example",
	    0, 5000), 0);
	assert_int_equal(dns_bindings_add(b, 3, ADDR_A, "one.more.example",
	    0, 5000), 0);

	/* 1000: h0 is dead. The add reclaims sandbox 2's two, which expired
	 * sooner, so h0 is still in the chain, but not counted. */
	assert_int_equal(dns_bindings_add(b, 1, ADDR_A, "one.more.example",
	    1000, 5000), 0);
	assert_int_equal(dns_bindings_count_sandbox(b, 2), 0);
	assert_int_equal(dns_bindings_count_sandbox(b, 1), 258);
	assert_false(find_into(b, 1, ADDR_A, 1000, s, 0));
	assert_int_equal(s->n, 256);
	/* 256 live again: refused (this add reclaims h0 only; h1 lives to
	 * 1001). */
	errno = 0;
	assert_int_equal(dns_bindings_add(b, 1, ADDR_A, "two.more.example",
	    1000, 5000), -1);
	assert_int_equal(errno, ENOSPC);
	assert_int_equal(dns_bindings_count_sandbox(b, 1), 257);
	/* Gone: room again for as many. */
	dns_bindings_forget(b, 1);
	for (i = 0; i < 256; i++) {
		snprintf(name, sizeof(name), "g%u.cdn.example", i);
		assert_int_equal(dns_bindings_add(b, 1, ADDR_A, name, 1000,
		    9000), 0);
	}
	assert_int_equal(dns_bindings_add(b, 1, ADDR_A, "two.more.example",
	    1000, 5000), -1);
	dns_bindings_free(b);
	free(s);
}

/* Adds count bindings of sandbox, one name each on its own address. */
static void
add_many(struct dns_bindings *b, uint32_t sandbox, unsigned count,
    uint64_t now, uint64_t expires)
{
	char name[32];
	unsigned i;

	for (i = 0; i < count; i++) {
		snprintf(name, sizeof(name), "n%u.example", i);
		assert_int_equal(dns_bindings_add(b, sandbox, 0x0a000000U + i,
		    name, now, expires), 0);
	}
}

/* The daemon's table: once only its last quarter is free, a sandbox
 * holding 256 or more gets no more, and one holding fewer still does.
 * Before, 16 sandboxes at their 4,096 took every entry for 10 minutes. */
static void
test_last_quarter(void **state)
{
	static const struct dns_bindings_bounds bounds = GW_BINDINGS_BOUNDS;
	struct dns_bindings *b;
	uint32_t sb;

	(void)state;
	assert_int_equal(GW_BINDINGS_MAX, 65536);
	assert_int_equal(GW_BINDINGS_LIGHT, 256);
	b = dns_bindings_new(&bounds);
	assert_non_null(b);
	/* 20 and 21 hold 256 and 255; the big ones fill up to one short of
	 * three quarters (49,152). Sandbox 1's expire first. */
	add_many(b, 20, 256, 0, 100000);
	add_many(b, 21, 255, 0, 100000);
	add_many(b, 1, 4096, 0, 500);
	for (sb = 2; sb <= 11; sb++)
		add_many(b, sb, 4096, 0, 100000);
	add_many(b, 12, 3584, 0, 100000);
	assert_int_equal(dns_bindings_count(b), 49151);

	/* A big one under its own bound, before the last quarter: in. */
	assert_int_equal(dns_bindings_add(b, 20, ADDR_A, "more.example", 0,
	    100000), 0);
	/* Now the last quarter: the big ones get no more, whatever their
	 * own bound says. */
	errno = 0;
	assert_int_equal(dns_bindings_add(b, 20, ADDR_B, "more.example", 0,
	    100000), -1);
	assert_int_equal(errno, ENOSPC);
	errno = 0;
	assert_int_equal(dns_bindings_add(b, 12, ADDR_B, "more.example", 0,
	    100000), -1);
	assert_int_equal(errno, ENOSPC);
	/* Extending is not adding. */
	assert_int_equal(dns_bindings_add(b, 12, 0x0a000000U, "n0.example", 0,
	    200000), 0);
	/* A small one gets in, up to 256. */
	assert_int_equal(dns_bindings_add(b, 21, ADDR_B, "more.example", 0,
	    100000), 0);
	assert_int_equal(dns_bindings_add(b, 21, ADDR_A, "more.example", 0,
	    100000), -1);
	add_many(b, 30, 256, 0, 100000);
	assert_int_equal(dns_bindings_add(b, 30, ADDR_A, "more.example", 0,
	    100000), -1);
	add_many(b, 31, 1, 0, 100000);
	assert_int_equal(dns_bindings_count(b), 49152 + 1 + 256 + 1);

	/* 500: sandbox 1's are dead. A big one's add reclaims dead entries
	 * to get the table out of the last quarter, two and then at most 256:
	 * one short of it, refused; the next add gets it out and is in. */
	errno = 0;
	assert_int_equal(dns_bindings_add(b, 20, ADDR_B, "more.example", 500,
	    100000), -1);
	assert_int_equal(errno, ENOSPC);
	assert_int_equal(dns_bindings_count(b), 49152);
	assert_int_equal(dns_bindings_count_sandbox(b, 1), 4096 - 258);
	assert_int_equal(dns_bindings_add(b, 20, ADDR_B, "more.example", 500,
	    100000), 0);
	assert_int_equal(dns_bindings_count(b), 49151);
	assert_int_equal(dns_bindings_count_sandbox(b, 1), 4096 - 260);
	assert_int_equal(dns_bindings_count_sandbox(b, 20), 258);
	/* Gone sandboxes give the room back. */
	dns_bindings_forget(b, 2);
	assert_int_equal(dns_bindings_add(b, 12, ADDR_B, "more.example", 500,
	    100000), 0);
	dns_bindings_free(b);
}

/* Small: in the last quarter, a big sandbox's own dead entries are
 * reclaimed first, and what counts is what it then holds live. */
static void
test_last_quarter_own_dead(void **state)
{
	struct dns_bindings *b;
	char name[32];
	unsigned i;

	(void)state;
	/* 16 entries: the last quarter is 4; light is 2. */
	b = bnew4(16, 16, 0, 2);
	assert_non_null(b);
	assert_int_equal(dns_bindings_add(b, 1, ADDR_A, "a.example", 0, 50),
	    0);
	assert_int_equal(dns_bindings_add(b, 1, ADDR_A, "b.example", 0, 1000),
	    0);
	assert_int_equal(dns_bindings_add(b, 1, ADDR_A, "c.example", 0, 1001),
	    0);
	/* Twelve sandboxes of one each: two that expire at 10 and 20, ten
	 * that live on. */
	for (i = 0; i < 12; i++) {
		snprintf(name, sizeof(name), "n%u.example", i);
		assert_int_equal(dns_bindings_add(b, 100 + i, ADDR_B, name, 0,
		    i == 0 ? 10 : i == 1 ? 20 : 2000 + i), 0);
	}
	assert_int_equal(dns_bindings_count(b), 15);
	/* 50: the add reclaims 10 and 20 (13 left, in the quarter); sandbox
	 * 1 holds three, of which a.example is dead: reclaimed, and two
	 * live ones are still light: refused. */
	errno = 0;
	assert_int_equal(dns_bindings_add(b, 1, ADDR_A, "d.example", 50,
	    3000), -1);
	assert_int_equal(errno, ENOSPC);
	assert_int_equal(dns_bindings_count_sandbox(b, 1), 2);
	assert_int_equal(dns_bindings_count(b), 12);
	/* A new sandbox: in, and once more; then it holds 2. */
	assert_int_equal(dns_bindings_add(b, 3, ADDR_A, "a.example", 50,
	    3000), 0);
	assert_int_equal(dns_bindings_add(b, 3, ADDR_A, "b.example", 50,
	    3000), 0);
	assert_int_equal(dns_bindings_add(b, 3, ADDR_A, "c.example", 50,
	    3000), -1);
	assert_int_equal(dns_bindings_count(b), 14);
	/* 1000: sandbox 1's b.example is dead, reclaimed by the add, and
	 * the one left is under light: in. */
	assert_int_equal(dns_bindings_add(b, 1, ADDR_A, "d.example", 1000,
	    3000), 0);
	assert_int_equal(dns_bindings_count_sandbox(b, 1), 2);
	dns_bindings_free(b);
}

/* ---- a reference model --------------------------------------------------- */

/*
 * The same behaviour written the obvious way over an array: linear scans
 * for everything. Every expiry a test draws differs from every expiry in
 * use, so "the soonest-expiring entry" is one entry in both and the
 * counts agree exactly, not only the answers.
 */
#define MODEL_MAX	64
#define NAME_LEN	32

struct model_entry {
	bool		 used;
	uint32_t	 sandbox, addr;
	char		 name[NAME_LEN];	/* lower case */
	uint64_t	 expires;
};

struct model {
	size_t			 cap, per;
	size_t			 per_addr, light;	/* 0: none */
	struct model_entry	 e[MODEL_MAX];
};

static size_t
model_count(const struct model *m, bool one, uint32_t sandbox)
{
	size_t i, n = 0;

	for (i = 0; i < m->cap; i++)
		if (m->e[i].used && (!one || m->e[i].sandbox == sandbox))
			n++;
	return n;
}

/* The used entry (of sandbox, if one) with the soonest expiry, or -1. */
static int
model_soonest(const struct model *m, bool one, uint32_t sandbox)
{
	int best = -1;
	size_t i;

	for (i = 0; i < m->cap; i++)
		if (m->e[i].used && (!one || m->e[i].sandbox == sandbox) &&
		    (best < 0 || m->e[i].expires < m->e[best].expires))
			best = (int)i;
	return best;
}

static bool
model_reclaim(struct model *m, bool one, uint32_t sandbox, uint64_t now)
{
	int i = model_soonest(m, one, sandbox);

	if (i < 0 || m->e[i].expires > now)
		return false;
	m->e[i].used = false;
	return true;
}

static bool
model_last_quarter(const struct model *m)
{
	return m->cap - model_count(m, false, 0) <= m->cap / 4;
}

static int
model_add(struct model *m, uint32_t sandbox, uint32_t addr, const char *name,
    uint64_t now, uint64_t expires)
{
	char lower[NAME_LEN];
	size_t i, live;
	int n;

	for (i = 0; name[i] != '\0'; i++)
		lower[i] = name[i] >= 'A' && name[i] <= 'Z' ?
		    (char)(name[i] - 'A' + 'a') : name[i];
	lower[i] = '\0';

	for (n = 0; n < RECLAIM_PER_ADD && model_reclaim(m, false, 0, now); n++)
		;
	if (expires <= now)
		return 0;
	live = 0;
	for (i = 0; i < m->cap; i++) {
		struct model_entry *e = &m->e[i];

		if (!e->used || e->sandbox != sandbox || e->addr != addr)
			continue;
		if (strcmp(e->name, lower) == 0) {
			if (expires > e->expires)
				e->expires = expires;
			return 0;
		}
		if (e->expires > now)
			live++;
	}
	if (m->per_addr != 0 && live >= m->per_addr)
		return -1;
	if (model_count(m, true, sandbox) >= m->per &&
	    !model_reclaim(m, true, sandbox, now))
		return -1;
	/* In the last quarter a sandbox holding light live ones gets no
	 * more: its own dead ones go first, then everyone's until the table
	 * is out of the quarter. */
	if (m->light != 0 && model_count(m, true, sandbox) >= m->light &&
	    model_last_quarter(m)) {
		for (n = 0; n < RECLAIM_QUARTER &&
		    model_count(m, true, sandbox) >= m->light &&
		    model_reclaim(m, true, sandbox, now); n++)
			;
		if (model_count(m, true, sandbox) >= m->light) {
			for (; n < RECLAIM_QUARTER && model_last_quarter(m) &&
			    model_reclaim(m, false, 0, now); n++)
				;
			if (model_last_quarter(m))
				return -1;
		}
	}
	if (model_count(m, false, 0) >= m->cap &&
	    !model_reclaim(m, false, 0, now))
		return -1;
	for (i = 0; m->e[i].used; i++)
		;
	m->e[i].used = true;
	m->e[i].sandbox = sandbox;
	m->e[i].addr = addr;
	strcpy(m->e[i].name, lower);
	m->e[i].expires = expires;
	return 0;
}

static void
model_forget(struct model *m, uint32_t sandbox)
{
	size_t i;

	for (i = 0; i < m->cap; i++)
		if (m->e[i].sandbox == sandbox)
			m->e[i].used = false;
}

static bool
model_expiry_in_use(const struct model *m, uint64_t t)
{
	size_t i;

	for (i = 0; i < m->cap; i++)
		if (m->e[i].used && m->e[i].expires == t)
			return true;
	return false;
}

/* xorshift64*: the same sequence on every run, so a failure repeats. */
static uint64_t
rnd(uint64_t *st)
{
	*st ^= *st >> 12;
	*st ^= *st << 25;
	*st ^= *st >> 27;
	return *st * 0x2545f4914f6cdd1dULL;
}

static void
stress_one(size_t cap, size_t per, size_t per_addr, size_t light,
    uint64_t seed, unsigned ops)
{
	static const uint32_t sandboxes[] = { 0, 1, 2, 65535, UINT32_MAX };
	static const uint32_t addrs[] = {
		0, 0x0a000001U, 0x0a000002U, 0xc0a80101U,
	};
	static const char *const names[] = {
		"n0.example", "n1.example", "N1.Example", "n2.example",
		"www.n2.example", "n3.example", "N3.EXAMPLE", "cdn.test",
	};
	struct dns_bindings *b;
	struct model *m;
	struct seen *s = seen_new();
	const char *want[MODEL_MAX];
	uint64_t st = seed, now = 1000, r, expires;
	uint32_t sandbox, addr;
	size_t i, nwant, stop;
	unsigned op;
	int rc, mrc;

	m = calloc(1, sizeof(*m));
	assert_non_null(m);
	assert_true(cap <= MODEL_MAX);
	m->cap = cap;
	m->per = per < cap ? per : cap;
	m->per_addr = per_addr;
	m->light = light;
	b = bnew4(cap, per, per_addr, light);
	assert_non_null(b);

	for (op = 0; op < ops; op++) {
		r = rnd(&st);
		now += r % 4;
		sandbox = sandboxes[(r >> 8) % 5];
		addr = addrs[(r >> 16) % 4];
		switch ((r >> 24) % 100) {
		default:
			/* Mostly live bindings; some dead on arrival. */
			if ((r >> 32) % 10 == 0)
				expires = now - (r >> 40) % 3;
			else
				do
					expires = now + 1 + rnd(&st) % 200;
				while (model_expiry_in_use(m, expires));
			mrc = model_add(m, sandbox, addr,
			    names[(r >> 48) % 8], now, expires);
			errno = 0;
			rc = dns_bindings_add(b, sandbox, addr,
			    names[(r >> 48) % 8], now, expires);
			assert_int_equal(rc, mrc);
			if (rc == -1)
				assert_int_equal(errno, ENOSPC);
			break;
		case 0:
			model_forget(m, sandbox);
			dns_bindings_forget(b, sandbox);
			break;
		case 1: case 2:
			/* Many expire at once: more dead entries than one add
			 * reclaims, so the bounds have to reclaim their own. */
			now += (r >> 32) % 150;
			break;
		case 3: case 4: case 5: case 6: case 7:
		case 8: case 9: case 10: case 11: case 12: case 13: case 14:
		case 15: case 16: case 17: case 18: case 19: case 20:
			/* Lookups also at later times, without adds between. */
			now += (r >> 32) % 20;
			break;
		}

		/* Counts and one lookup after every operation. */
		assert_int_equal(dns_bindings_count(b),
		    model_count(m, false, 0));
		for (i = 0; i < 5; i++)
			assert_int_equal(dns_bindings_count_sandbox(b,
			    sandboxes[i]), model_count(m, true, sandboxes[i]));
		r = rnd(&st);
		sandbox = sandboxes[r % 5];
		addr = addrs[(r >> 8) % 4];
		for (i = nwant = 0; i < m->cap; i++)
			if (m->e[i].used && m->e[i].sandbox == sandbox &&
			    m->e[i].addr == addr && m->e[i].expires > now)
				want[nwant++] = m->e[i].name;
		if ((r >> 16) % 4 == 0 && nwant > 0) {
			stop = 1 + (r >> 24) % nwant;
			assert_true(find_into(b, sandbox, addr, now, s, stop));
			assert_int_equal(s->n, stop);
		} else {
			assert_false(find_into(b, sandbox, addr, now, s, 0));
			assert_seen_set(s, want, nwant);
		}
	}
	dns_bindings_free(b);
	free(m);
	free(s);
}

static void
test_stress_model(void **state)
{
	(void)state;
	stress_one(64, 12, 0, 0, 0x9e3779b97f4a7c15ULL, 100000);
	stress_one(48, 48, 0, 0, 0x0123456789abcdefULL, 100000);
	stress_one(16, 1, 0, 0, 0xfeedfacecafebeefULL, 50000);
	stress_one(32, 4, 0, 0, 0x5eed5eed5eed5eedULL, 100000);
	stress_one(12, 3, 0, 0, 0xa5a5a5a5a5a5a5a5ULL, 100000);
	stress_one(8, 100, 0, 0, 0x1badb002deadbeefULL, 50000);
	stress_one(1, 1, 0, 0, 42, 20000);
	/* Names per address (of the 8 names, 6 distinct) and the last
	 * quarter, apart and together. */
	stress_one(64, 20, 3, 0, 0x0ddba11cafef00d5ULL, 100000);
	stress_one(32, 12, 0, 4, 0x7e57ab1e7e57ab1eULL, 100000);
	stress_one(40, 16, 2, 6, 0xc0ffee00c0ffee00ULL, 100000);
	stress_one(24, 24, 1, 1, 0x600dcafe600dcafeULL, 50000);
	stress_one(64, 64, 4, 8, 0xb16b00b5b16b00b5ULL, 100000);
}

/* ---- size ---------------------------------------------------------------- */

static void
test_100k(void **state)
{
	enum { N = 100000, SANDBOXES = 100 };
	struct dns_bindings *b;
	struct seen *s = seen_new();
	char name[32];
	uint32_t i;

	(void)state;
	b = bnew(N, N / SANDBOXES);
	assert_non_null(b);
	for (i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "h%u.example", i);
		assert_int_equal(dns_bindings_add(b, i % SANDBOXES,
		    0x0a000000U + i / SANDBOXES, name, 0, 10000 + i % 5000), 0);
	}
	assert_int_equal(dns_bindings_count(b), N);
	assert_int_equal(dns_bindings_count_sandbox(b, 7), N / SANDBOXES);
	assert_int_equal(dns_bindings_add(b, 7, 1, "more.example", 0, 20000),
	    -1);
	assert_int_equal(errno, ENOSPC);
	assert_int_equal(dns_bindings_add(b, SANDBOXES, 1, "more.example", 0,
	    20000), -1);
	for (i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "h%u.example", i);
		assert_false(find_into(b, i % SANDBOXES,
		    0x0a000000U + i / SANDBOXES, 9999, s, 0));
		assert_int_equal(s->n, 1);
		assert_string_equal(s->names[0], name);
	}
	dns_bindings_forget(b, 3);
	assert_int_equal(dns_bindings_count(b), N - N / SANDBOXES);
	/* All expired: refilling reclaims as it goes. */
	for (i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "g%u.example", i);
		assert_int_equal(dns_bindings_add(b, i % SANDBOXES,
		    0x0b000000U + i / SANDBOXES, name, 20000, 30000), 0);
	}
	assert_int_equal(dns_bindings_count(b), N);
	assert_finds_none(b, 5, 0x0a000000U, 20000);
	assert_finds_one(b, 5, 0x0b000000U, 20000, "g5.example");
	dns_bindings_free(b);
	free(s);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_new_bounds),
		cmocka_unit_test(test_add_find_one),
		cmocka_unit_test(test_several_names),
		cmocka_unit_test(test_many_names_one_address),
		cmocka_unit_test(test_sandboxes_independent),
		cmocka_unit_test(test_extension),
		cmocka_unit_test(test_expiry_exact),
		cmocka_unit_test(test_sandbox_bound),
		cmocka_unit_test(test_sandbox_bound_after_extension),
		cmocka_unit_test(test_sandbox_bound_one),
		cmocka_unit_test(test_total_bound),
		cmocka_unit_test(test_forget),
		cmocka_unit_test(test_early_stop),
		cmocka_unit_test(test_name_too_long),
		cmocka_unit_test(test_addr_bound),
		cmocka_unit_test(test_last_quarter),
		cmocka_unit_test(test_last_quarter_own_dead),
		cmocka_unit_test(test_stress_model),
		cmocka_unit_test(test_100k),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
