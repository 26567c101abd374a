/* test_kept.c: the framing bytes kept until the server acknowledges them. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <string.h>
#include <cmocka.h>

#include "nfq/nfq.h"

static void
test_empty(void **state)
{
	struct nfq_kept k;

	(void)state;
	memset(&k, 0, sizeof(k));
	assert_int_equal(nfq_kept_room(&k, 1000), NFQ_KEPT_BYTES);
	assert_true(nfq_kept_agrees(&k, 1000, (const uint8_t *)"x", 1));
	nfq_kept_ack(&k, 5000);
	assert_int_equal(k.n, 0);
	assert_int_equal(nfq_kept_add(&k, 1000, (const uint8_t *)"", 0), 0);
	assert_int_equal(k.n, 0);
	nfq_kept_free(&k);
}

/* Bytes that touch the last range extend it; others make a new one. */
static void
test_ranges(void **state)
{
	struct nfq_kept k;

	(void)state;
	memset(&k, 0, sizeof(k));
	assert_int_equal(nfq_kept_add(&k, 100, (const uint8_t *)"GET ", 4), 0);
	assert_int_equal(nfq_kept_add(&k, 104, (const uint8_t *)"/ H", 3), 0);
	assert_int_equal(k.n, 1);
	assert_int_equal(k.r[0].seq, 100);
	assert_int_equal(k.r[0].len, 7);
	assert_int_equal(nfq_kept_add(&k, 200, (const uint8_t *)"5\r\n", 3), 0);
	assert_int_equal(k.n, 2);
	assert_int_equal(k.len, 10);
	assert_memory_equal(k.bytes, "GET / H5\r\n", 10);
	nfq_kept_free(&k);
	assert_int_equal(k.n, 0);
	assert_null(k.bytes);
}

/* Every byte over a kept one must equal it: a segment starting inside a
 * range, one holding a whole range, one spanning two, one outside. */
static void
test_agrees(void **state)
{
	struct nfq_kept k;

	(void)state;
	memset(&k, 0, sizeof(k));
	assert_int_equal(nfq_kept_add(&k, 100, (const uint8_t *)"abcdef", 6),
	    0);
	assert_int_equal(nfq_kept_add(&k, 110, (const uint8_t *)"wxyz", 4), 0);
	assert_true(nfq_kept_agrees(&k, 102, (const uint8_t *)"cde", 3));
	assert_false(nfq_kept_agrees(&k, 102, (const uint8_t *)"cdX", 3));
	/* from before the first range to past it: its bytes in the middle */
	assert_true(nfq_kept_agrees(&k, 98, (const uint8_t *)"??abcdef??", 10));
	assert_false(nfq_kept_agrees(&k, 98, (const uint8_t *)"??abcdeF??",
	    10));
	/* over the gap (bytes not kept: body) into the second range */
	assert_true(nfq_kept_agrees(&k, 104, (const uint8_t *)"ef....wx", 8));
	assert_false(nfq_kept_agrees(&k, 104, (const uint8_t *)"ef....Wx", 8));
	/* only the gap, and only past the end */
	assert_true(nfq_kept_agrees(&k, 106, (const uint8_t *)"QQQQ", 4));
	assert_true(nfq_kept_agrees(&k, 114, (const uint8_t *)"QQQQ", 4));
	assert_true(nfq_kept_agrees(&k, 90, (const uint8_t *)"QQQQ", 4));
	nfq_kept_free(&k);
}

/* Ranges wholly before the ACK go; one it ends inside loses its front. */
static void
test_ack(void **state)
{
	struct nfq_kept k;

	(void)state;
	memset(&k, 0, sizeof(k));
	assert_int_equal(nfq_kept_add(&k, 100, (const uint8_t *)"abcdef", 6),
	    0);
	assert_int_equal(nfq_kept_add(&k, 110, (const uint8_t *)"wxyz", 4), 0);
	nfq_kept_ack(&k, 99);		/* before everything: nothing */
	assert_int_equal(k.n, 2);
	assert_int_equal(k.len, 10);
	nfq_kept_ack(&k, 103);		/* inside the first */
	assert_int_equal(k.n, 2);
	assert_int_equal(k.r[0].seq, 103);
	assert_int_equal(k.r[0].len, 3);
	assert_int_equal(k.len, 7);
	assert_memory_equal(k.bytes, "defwxyz", 7);
	assert_false(nfq_kept_agrees(&k, 103, (const uint8_t *)"dXf", 3));
	/* the bytes acknowledged are not compared any more */
	assert_true(nfq_kept_agrees(&k, 100, (const uint8_t *)"XXXdef", 6));
	nfq_kept_ack(&k, 112);		/* past the first, inside the second */
	assert_int_equal(k.n, 1);
	assert_int_equal(k.r[0].seq, 112);
	assert_int_equal(k.r[0].len, 2);
	assert_memory_equal(k.bytes, "yz", 2);
	nfq_kept_ack(&k, 114);
	assert_int_equal(k.n, 0);
	assert_int_equal(k.len, 0);
	nfq_kept_free(&k);
}

/* Sequence numbers wrap: a range across 2^32, acknowledged past it. */
static void
test_wrap(void **state)
{
	struct nfq_kept k;

	(void)state;
	memset(&k, 0, sizeof(k));
	assert_int_equal(nfq_kept_add(&k, 0xfffffffcU,
	    (const uint8_t *)"12345678", 8), 0);
	assert_true(nfq_kept_agrees(&k, 0xfffffffeU, (const uint8_t *)"3456",
	    4));
	assert_false(nfq_kept_agrees(&k, 0xfffffffeU, (const uint8_t *)"3457",
	    4));
	assert_false(nfq_kept_agrees(&k, 2, (const uint8_t *)"7X", 2));
	nfq_kept_ack(&k, 2);
	assert_int_equal(k.n, 1);
	assert_int_equal(k.r[0].seq, 2);
	assert_memory_equal(k.bytes, "78", 2);
	nfq_kept_ack(&k, 0xfffffff0U);	/* an old ACK: nothing */
	assert_int_equal(k.len, 2);
	nfq_kept_free(&k);
}

/* The bounds: NFQ_KEPT_RANGES ranges (bytes that touch the last one still
 * fit), NFQ_KEPT_BYTES bytes; what does not fit is not kept at all. */
static void
test_bounds(void **state)
{
	static uint8_t big[NFQ_KEPT_BYTES];
	struct nfq_kept k;
	size_t i;

	(void)state;
	memset(&k, 0, sizeof(k));
	for (i = 0; i < NFQ_KEPT_RANGES; i++)
		assert_int_equal(nfq_kept_add(&k, (uint32_t)(i * 10),
		    (const uint8_t *)"ab", 2), 0);
	assert_int_equal(nfq_kept_room(&k, 5000), 0);
	assert_int_equal(nfq_kept_add(&k, 5000, (const uint8_t *)"c", 1), -1);
	assert_int_equal(k.n, NFQ_KEPT_RANGES);
	assert_int_equal(k.len, 2 * NFQ_KEPT_RANGES);
	i = (NFQ_KEPT_RANGES - 1) * 10 + 2;	/* touches the last */
	assert_int_equal(nfq_kept_room(&k, (uint32_t)i),
	    NFQ_KEPT_BYTES - 2 * NFQ_KEPT_RANGES);
	assert_int_equal(nfq_kept_add(&k, (uint32_t)i, (const uint8_t *)"c",
	    1), 0);
	assert_int_equal(k.n, NFQ_KEPT_RANGES);
	nfq_kept_free(&k);

	memset(big, 'b', sizeof(big));
	assert_int_equal(nfq_kept_add(&k, 0, big, NFQ_KEPT_BYTES - 1), 0);
	assert_int_equal(nfq_kept_room(&k, NFQ_KEPT_BYTES - 1), 1);
	assert_int_equal(nfq_kept_add(&k, NFQ_KEPT_BYTES - 1, big, 2), -1);
	assert_int_equal(k.len, NFQ_KEPT_BYTES - 1);
	assert_int_equal(nfq_kept_add(&k, NFQ_KEPT_BYTES - 1, big, 1), 0);
	assert_int_equal(nfq_kept_room(&k, NFQ_KEPT_BYTES), 0);
	assert_true(k.cap <= NFQ_KEPT_BYTES);
	nfq_kept_ack(&k, 100);
	assert_int_equal(nfq_kept_room(&k, NFQ_KEPT_BYTES), 100);
	nfq_kept_free(&k);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_empty),
		cmocka_unit_test(test_ranges),
		cmocka_unit_test(test_agrees),
		cmocka_unit_test(test_ack),
		cmocka_unit_test(test_wrap),
		cmocka_unit_test(test_bounds),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
