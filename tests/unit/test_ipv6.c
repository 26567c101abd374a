/* test_ipv6.c: how an IPv6 attempt's addresses are folded into a flow key. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <arpa/inet.h>
#include <cmocka.h>

/* the fold and its key are the file's own: the test reads them in place */
#include "gateway/ipv6.c"

static void
addr6(const char *s, uint8_t a[16])
{
	assert_int_equal(inet_pton(AF_INET6, s, a), 1);
}

/* The fold ipv6.c had: 32-bit FNV-1a of each address, no key. */
static uint32_t
fnv_fold(const uint8_t a[16])
{
	uint32_t h = 2166136261u;
	int i;

	for (i = 0; i < 16; i++)
		h = (h ^ a[i]) * 16777619u;
	return h;
}

static uint64_t
folded(const uint8_t s[16], const uint8_t d[16])
{
	uint32_t out[2];

	fold(s, d, out);
	return (uint64_t)out[1] << 32 | out[0];
}

/*
 * Two destinations whose unkeyed folds are equal (found by a birthday
 * search over 2001:db8::/96): with the old fold, a sandbox's attempt to
 * the second one found the first one's entry and had no row for 30 s.
 * Keyed, they fold apart; the same pair always folds the same.
 */
static void
test_fnv_collision_apart(void **state)
{
	uint8_t src[16], a[16], b[16];

	(void)state;
	addr6("fd00:5c::2", src);
	addr6("2001:db8::2f6:56b", a);
	addr6("2001:db8::460:8000", b);
	/* the pair is a real collision of the old fold */
	assert_int_equal(fnv_fold(a), fnv_fold(b));
	assert_int_equal(fnv_fold(a), 0x96e999a3u);
	assert_true(folded(src, a) != folded(src, b));
	assert_true(folded(src, a) == folded(src, a));
	/* source and destination are not interchangeable */
	assert_true(folded(src, a) != folded(a, src));
}

/*
 * The key is drawn from the kernel's generator, once per process: a fold
 * learnt elsewhere (another run, another gateway) says nothing about this
 * one's. Two draws give two keys, and the same pair folds differently
 * under each.
 */
static void
test_key_secret(void **state)
{
	struct dns_hash_key k1, k2;
	uint8_t src[16], dst[16];
	uint64_t h1, h2;

	(void)state;
	addr6("fd00:5c::2", src);
	addr6("2001:db8::1", dst);
	h1 = folded(src, dst);
	k1 = fold_key;
	assert_false(k1.k0 == 0 && k1.k1 == 0);
	fold_key_init();
	k2 = fold_key;
	assert_false(k1.k0 == k2.k0 && k1.k1 == k2.k1);
	h2 = folded(src, dst);
	assert_true(h1 != h2);
	/* nor is it the unkeyed SipHash */
	memset(&fold_key, 0, sizeof(fold_key));
	assert_true(folded(src, dst) != h2);
	fold_key = k2;
	assert_true(folded(src, dst) == h2);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fnv_collision_apart),
		cmocka_unit_test(test_key_secret),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
