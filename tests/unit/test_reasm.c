/* test_reasm.c: TCP stream reassembly: orders, overlaps, conflicts, bounds, consume. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "nfq/nfq.h"

/* The one true stream: the byte a client sends at sequence number seq. A
 * function of the sequence number alone, so that every segment cut from
 * it agrees with every other and wraparound keeps positions honest. */
static uint8_t
stream_byte(uint32_t seq)
{
	uint32_t x = seq * 2654435761U;

	return (uint8_t)(x >> 24 ^ x >> 8);
}

static void
stream_fill(uint8_t *buf, uint32_t seq, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++)
		buf[i] = stream_byte(seq + (uint32_t)i);
}

/* Adds the true stream's bytes [base + off, base + off + len). */
static enum nfq_reasm_result
add_true(struct nfq_reasm *r, uint32_t seq, size_t len)
{
	static uint8_t buf[NFQ_REASM_MAX + 64];

	assert_true(len <= sizeof(buf));
	stream_fill(buf, seq, len);
	return nfq_reasm_add(r, seq, buf, len);
}

static bool
has(const struct nfq_reasm *r, size_t pos)
{
	return (r->have[pos / 8] >> (pos % 8)) & 1;
}

/* Positions [from, to) are present and hold the true stream's bytes. */
static void
assert_true_bytes(const struct nfq_reasm *r, size_t from, size_t to)
{
	size_t i;

	for (i = from; i < to; i++) {
		if (!has(r, i) || r->data[i] != stream_byte(r->base +
		    (uint32_t)i))
			fail_msg("position %zu: present %d, byte %02x, want %02x",
			    i, has(r, i), r->data[i],
			    stream_byte(r->base + (uint32_t)i));
	}
}

static void
assert_absent(const struct nfq_reasm *r, size_t from, size_t to)
{
	size_t i;

	for (i = from; i < to; i++)
		if (has(r, i))
			fail_msg("position %zu present", i);
}

static void
assert_window(const struct nfq_reasm *r, uint32_t base, size_t contiguous,
    size_t high)
{
	assert_int_equal(r->base, base);
	assert_int_equal(r->contiguous, contiguous);
	assert_int_equal(r->high, high);
}

/* The structure is large: one static instance and one snapshot. */
static struct nfq_reasm rs, snap;

static void
take_snapshot(void)
{
	memcpy(&snap, &rs, sizeof(snap));
}

static void
assert_unchanged(void)
{
	assert_memory_equal(&rs, &snap, sizeof(rs));
}

/* ---- orders ---------------------------------------------------------- */

static void
test_init(void **state)
{
	(void)state;
	memset(&rs, 0xa5, sizeof(rs));
	nfq_reasm_init(&rs, 0x12345678U);
	assert_window(&rs, 0x12345678U, 0, 0);
	assert_absent(&rs, 0, NFQ_REASM_MAX);
}

static void
test_in_order(void **state)
{
	const uint32_t base = 1000;
	size_t i;

	(void)state;
	nfq_reasm_init(&rs, base);
	for (i = 0; i < 5; i++) {
		assert_int_equal(add_true(&rs, base + (uint32_t)(i * 100), 100),
		    NFQ_REASM_OK);
		assert_window(&rs, base, (i + 1) * 100, (i + 1) * 100);
	}
	assert_true_bytes(&rs, 0, 500);
	assert_absent(&rs, 500, NFQ_REASM_MAX);
}

static void
test_reversed_order(void **state)
{
	const uint32_t base = 77;
	size_t i;

	(void)state;
	nfq_reasm_init(&rs, base);
	for (i = 5; i-- > 1; ) {
		assert_int_equal(add_true(&rs, base + (uint32_t)(i * 100), 100),
		    NFQ_REASM_OK);
		assert_window(&rs, base, 0, 500);
		assert_absent(&rs, 0, i * 100);
		assert_true_bytes(&rs, i * 100, 500);
	}
	assert_int_equal(add_true(&rs, base, 100), NFQ_REASM_OK);
	assert_window(&rs, base, 500, 500);
	assert_true_bytes(&rs, 0, 500);
	assert_absent(&rs, 500, NFQ_REASM_MAX);
}

struct seg {
	size_t	off;
	size_t	len;
};

/* Adds segs in the order perm and checks, after each, that exactly the
 * union of the segments added so far is present, with contiguous and
 * high matching it. */
static void
run_order(const struct seg *segs, const int *perm, size_t span)
{
	const uint32_t base = 0xfffffffaU;	/* the stream crosses 2^32 */
	bool want[64];
	size_t i, k, contiguous, high;

	assert_true(span <= sizeof(want));
	memset(want, 0, sizeof(want));
	nfq_reasm_init(&rs, base);
	for (k = 0; k < 4; k++) {
		const struct seg *s = &segs[perm[k]];

		assert_int_equal(add_true(&rs, base + (uint32_t)s->off, s->len),
		    NFQ_REASM_OK);
		for (i = s->off; i < s->off + s->len; i++)
			want[i] = true;
		for (contiguous = 0; contiguous < span && want[contiguous];
		    contiguous++)
			;
		for (high = span; high > 0 && !want[high - 1]; high--)
			;
		assert_window(&rs, base, contiguous, high);
		for (i = 0; i < span; i++) {
			if (want[i])
				assert_true_bytes(&rs, i, i + 1);
			else
				assert_absent(&rs, i, i + 1);
		}
		assert_absent(&rs, span, NFQ_REASM_MAX);
	}
	assert_int_equal(rs.contiguous, span);
}

static void
test_permutations(void **state)
{
	/* Adjacent, with lengths that cross bitmap bytes unevenly. */
	static const struct seg adjacent[4] = {
		{ 0, 3 }, { 3, 7 }, { 10, 1 }, { 11, 9 },
	};
	/* Each overlapping its neighbours, one inside another's span. */
	static const struct seg overlapping[4] = {
		{ 0, 5 }, { 3, 6 }, { 8, 6 }, { 12, 8 },
	};
	int perm[4], a, b, c, d, n = 0;

	(void)state;
	for (a = 0; a < 4; a++)
		for (b = 0; b < 4; b++)
			for (c = 0; c < 4; c++)
				for (d = 0; d < 4; d++) {
					if (a == b || a == c || a == d ||
					    b == c || b == d || c == d)
						continue;
					perm[0] = a;
					perm[1] = b;
					perm[2] = c;
					perm[3] = d;
					run_order(adjacent, perm, 20);
					run_order(overlapping, perm, 20);
					n++;
				}
	assert_int_equal(n, 24);
}

/* ---- overlaps ---------------------------------------------------------- */

static void
test_exact_retransmission(void **state)
{
	const uint32_t base = 5000;

	(void)state;
	nfq_reasm_init(&rs, base);
	assert_int_equal(add_true(&rs, base, 100), NFQ_REASM_OK);
	assert_int_equal(add_true(&rs, base + 200, 50), NFQ_REASM_OK);
	take_snapshot();
	assert_int_equal(add_true(&rs, base, 100), NFQ_REASM_OK);
	assert_unchanged();
	assert_int_equal(add_true(&rs, base + 200, 50), NFQ_REASM_OK);
	assert_unchanged();
	assert_window(&rs, base, 100, 250);
}

static void
test_overlaps_agreeing(void **state)
{
	const uint32_t base = 42;

	(void)state;
	nfq_reasm_init(&rs, base);
	assert_int_equal(add_true(&rs, base + 10, 20), NFQ_REASM_OK);
	assert_window(&rs, base, 0, 30);
	/* Overlaps the start of what is stored, fills the gap before it. */
	assert_int_equal(add_true(&rs, base, 15), NFQ_REASM_OK);
	assert_window(&rs, base, 30, 30);
	/* Overlaps the end and extends it. */
	assert_int_equal(add_true(&rs, base + 25, 25), NFQ_REASM_OK);
	assert_window(&rs, base, 50, 50);
	/* Covers everything and more on the far side. */
	assert_int_equal(add_true(&rs, base + 5, 55), NFQ_REASM_OK);
	assert_window(&rs, base, 60, 60);
	/* Inside what is stored. */
	assert_int_equal(add_true(&rs, base + 17, 3), NFQ_REASM_OK);
	assert_window(&rs, base, 60, 60);
	assert_true_bytes(&rs, 0, 60);
	assert_absent(&rs, 60, NFQ_REASM_MAX);
}

/* Sends the true stream's [off, off + len) with the byte at stream
 * position flip changed, and expects a refusal that stores nothing. */
static void
expect_conflict(uint32_t base, size_t off, size_t len, size_t flip)
{
	uint8_t buf[512];

	assert_true(len <= sizeof(buf) && flip >= off && flip < off + len);
	stream_fill(buf, base + (uint32_t)off, len);
	buf[flip - off] ^= 0x01;
	take_snapshot();
	assert_int_equal(nfq_reasm_add(&rs, base + (uint32_t)off, buf, len),
	    NFQ_REASM_CONFLICT);
	assert_unchanged();
}

static void
test_overlaps_disagreeing(void **state)
{
	const uint32_t base = 0x80000000U;

	(void)state;
	nfq_reasm_init(&rs, base);
	assert_int_equal(add_true(&rs, base, 50), NFQ_REASM_OK);
	assert_int_equal(add_true(&rs, base + 100, 100), NFQ_REASM_OK);
	assert_window(&rs, base, 50, 200);

	/* One byte off at the start, the middle and the end of a segment
	 * lying wholly on stored bytes. */
	expect_conflict(base, 100, 50, 100);
	expect_conflict(base, 120, 60, 150);
	expect_conflict(base, 150, 50, 199);
	expect_conflict(base, 0, 1, 0);

	/* New bytes on both sides of a stored run with one disagreeing byte
	 * inside it: none of the new bytes may be kept either. */
	expect_conflict(base, 80, 140, 100);
	expect_conflict(base, 80, 140, 150);
	expect_conflict(base, 80, 140, 199);
	/* The gap would be filled and contiguous moved: it must not be. */
	expect_conflict(base, 40, 70, 109);
	expect_conflict(base, 40, 70, 40);
	expect_conflict(base, 49, 52, 49);
	expect_conflict(base, 49, 52, 100);

	/* Disagreeing bytes where nothing is stored are simply new. */
	{
		uint8_t buf[50];

		stream_fill(buf, base + 50, sizeof(buf));
		buf[0] ^= 0xff;
		assert_int_equal(nfq_reasm_add(&rs, base + 50, buf,
		    sizeof(buf)), NFQ_REASM_OK);
		assert_window(&rs, base, 200, 200);
		assert_int_equal(rs.data[50], stream_byte(base + 50) ^ 0xff);
		/* ... and from then on they are the version that counts. */
		assert_int_equal(add_true(&rs, base + 50, 1),
		    NFQ_REASM_CONFLICT);
		assert_int_equal(nfq_reasm_add(&rs, base + 50, buf, 1),
		    NFQ_REASM_OK);
	}
	assert_true_bytes(&rs, 0, 50);
	assert_true_bytes(&rs, 51, 200);
}

/* ---- the window's edges ----------------------------------------------- */

static void
test_segment_crossing_base(void **state)
{
	const uint32_t base = 3000;
	uint8_t buf[40];

	(void)state;
	nfq_reasm_init(&rs, base);
	assert_int_equal(add_true(&rs, base - 10, 30), NFQ_REASM_OK);
	assert_window(&rs, base, 20, 20);
	assert_true_bytes(&rs, 0, 20);
	assert_absent(&rs, 20, NFQ_REASM_MAX);

	/* The part before base has nothing to agree with: ignored. */
	stream_fill(buf, base - 20, sizeof(buf));
	memset(buf, 0xee, 20);
	assert_int_equal(nfq_reasm_add(&rs, base - 20, buf, sizeof(buf)),
	    NFQ_REASM_OK);
	assert_window(&rs, base, 20, 20);
	assert_true_bytes(&rs, 0, 20);

	/* The part after base is still checked. */
	buf[25] ^= 0x10;
	assert_int_equal(nfq_reasm_add(&rs, base - 20, buf, sizeof(buf)),
	    NFQ_REASM_CONFLICT);

	/* And still adds, past what is stored. */
	assert_int_equal(add_true(&rs, base - 1, 31), NFQ_REASM_OK);
	assert_window(&rs, base, 30, 30);
	assert_true_bytes(&rs, 0, 30);

	/* One byte after base is the least a crossing segment can bring. */
	nfq_reasm_init(&rs, base);
	assert_int_equal(add_true(&rs, base - 100, 101), NFQ_REASM_OK);
	assert_window(&rs, base, 1, 1);
	assert_true_bytes(&rs, 0, 1);
}

static void
test_entirely_before_base(void **state)
{
	const uint32_t base = 100000;

	(void)state;
	nfq_reasm_init(&rs, base);
	assert_int_equal(add_true(&rs, base + 10, 10), NFQ_REASM_OK);
	take_snapshot();
	/* Ending exactly at base. */
	assert_int_equal(add_true(&rs, base - 100, 100), NFQ_REASM_OLD);
	assert_int_equal(add_true(&rs, base - 1, 1), NFQ_REASM_OLD);
	assert_int_equal(add_true(&rs, base - 500, 50), NFQ_REASM_OLD);
	/* The furthest back that still counts as before: 2^31. */
	assert_int_equal(add_true(&rs, base - 0x80000000U, 10), NFQ_REASM_OLD);
	assert_unchanged();
	/* One less than 2^31 ahead is ahead, and far out of the window. */
	assert_int_equal(add_true(&rs, base + 0x7fffffffU, 1),
	    NFQ_REASM_OVERFLOW);
	assert_unchanged();
}

static void
test_wraparound(void **state)
{
	const uint32_t base = 0xfffffff0U;

	(void)state;
	nfq_reasm_init(&rs, base);
	/* Offsets 8 .. 24, across 2^32. */
	assert_int_equal(add_true(&rs, 0xfffffff8U, 16), NFQ_REASM_OK);
	assert_window(&rs, base, 0, 24);
	assert_absent(&rs, 0, 8);
	assert_true_bytes(&rs, 8, 24);
	assert_int_equal(rs.data[16], stream_byte(0));
	/* Offsets 24 .. 32, sequence numbers 8 .. 16. */
	assert_int_equal(add_true(&rs, 8, 8), NFQ_REASM_OK);
	assert_window(&rs, base, 0, 32);
	assert_int_equal(add_true(&rs, base, 8), NFQ_REASM_OK);
	assert_window(&rs, base, 32, 32);
	assert_true_bytes(&rs, 0, 32);
	/* A disagreeing byte just after 2^32. */
	{
		uint8_t b = stream_byte(1) ^ 0x80;

		assert_int_equal(nfq_reasm_add(&rs, 1, &b, 1),
		    NFQ_REASM_CONFLICT);
	}
	/* Consuming across 2^32. */
	nfq_reasm_consume(&rs, 21);
	assert_window(&rs, 5, 11, 11);
	assert_true_bytes(&rs, 0, 11);
	assert_int_equal(add_true(&rs, 0xfffffffeU, 4), NFQ_REASM_OLD);
	assert_int_equal(add_true(&rs, 0xfffffffeU, 20), NFQ_REASM_OK);
	assert_window(&rs, 5, 13, 13);
	assert_true_bytes(&rs, 0, 13);

	/* A base just after 2^32 and a segment from before it. */
	nfq_reasm_init(&rs, 0x10);
	assert_int_equal(add_true(&rs, 0xfffffff0U, 0x30), NFQ_REASM_OK);
	assert_window(&rs, 0x10, 0x10, 0x10);
	assert_true_bytes(&rs, 0, 0x10);
}

static void
test_max(void **state)
{
	const uint32_t base = 0xffffc000U;	/* the window ends at 2^32 */
	uint8_t b = 0;

	(void)state;
	nfq_reasm_init(&rs, base);
	assert_int_equal(add_true(&rs, base, NFQ_REASM_MAX), NFQ_REASM_OK);
	assert_window(&rs, base, NFQ_REASM_MAX, NFQ_REASM_MAX);
	assert_true_bytes(&rs, 0, NFQ_REASM_MAX);
	take_snapshot();
	assert_int_equal(add_true(&rs, base + NFQ_REASM_MAX, 1),
	    NFQ_REASM_OVERFLOW);
	assert_int_equal(add_true(&rs, base + NFQ_REASM_MAX - 10, 11),
	    NFQ_REASM_OVERFLOW);
	assert_unchanged();

	/* One byte too many stores nothing at all. */
	nfq_reasm_init(&rs, base);
	take_snapshot();
	assert_int_equal(add_true(&rs, base, NFQ_REASM_MAX + 1),
	    NFQ_REASM_OVERFLOW);
	assert_int_equal(add_true(&rs, base + NFQ_REASM_MAX - 1, 2),
	    NFQ_REASM_OVERFLOW);
	assert_int_equal(add_true(&rs, base + NFQ_REASM_MAX, 1),
	    NFQ_REASM_OVERFLOW);
	/* The length alone is over the bound: no wrap in the check. */
	assert_int_equal(nfq_reasm_add(&rs, base + 1, &b, SIZE_MAX),
	    NFQ_REASM_OVERFLOW);
	assert_unchanged();

	/* The last byte of the window alone. */
	assert_int_equal(add_true(&rs, base + NFQ_REASM_MAX - 1, 1),
	    NFQ_REASM_OK);
	assert_window(&rs, base, 0, NFQ_REASM_MAX);
	assert_true_bytes(&rs, NFQ_REASM_MAX - 1, NFQ_REASM_MAX);

	/* Crossing base: what counts is the part from base on. */
	nfq_reasm_init(&rs, base);
	assert_int_equal(add_true(&rs, base - 5, NFQ_REASM_MAX + 6),
	    NFQ_REASM_OVERFLOW);
	assert_window(&rs, base, 0, 0);
	assert_int_equal(add_true(&rs, base - 5, NFQ_REASM_MAX + 5),
	    NFQ_REASM_OK);
	assert_window(&rs, base, NFQ_REASM_MAX, NFQ_REASM_MAX);
	assert_true_bytes(&rs, 0, NFQ_REASM_MAX);
}

static void
test_len_zero(void **state)
{
	const uint32_t base = 9;

	(void)state;
	nfq_reasm_init(&rs, base);
	assert_int_equal(add_true(&rs, base + 3, 4), NFQ_REASM_OK);
	take_snapshot();
	assert_int_equal(nfq_reasm_add(&rs, base, NULL, 0), NFQ_REASM_OK);
	assert_int_equal(nfq_reasm_add(&rs, base - 1, NULL, 0), NFQ_REASM_OK);
	assert_int_equal(nfq_reasm_add(&rs, base + 0x40000000U, NULL, 0),
	    NFQ_REASM_OK);
	assert_unchanged();
}

/* ---- consume ------------------------------------------------------------ */

static void
test_consume_odd(void **state)
{
	uint32_t base = 0xffffff80U;
	static const size_t steps[] = { 13, 1, 7, 8, 9, 0, 15, 16, 17, 3 };
	size_t i, hole;

	(void)state;
	nfq_reasm_init(&rs, base);
	assert_int_equal(add_true(&rs, base, 100), NFQ_REASM_OK);
	assert_int_equal(add_true(&rs, base + 110, 30), NFQ_REASM_OK);

	nfq_reasm_consume(&rs, 13);
	base += 13;
	assert_window(&rs, base, 87, 127);
	assert_true_bytes(&rs, 0, 87);
	assert_absent(&rs, 87, 97);
	assert_true_bytes(&rs, 97, 127);
	assert_absent(&rs, 127, NFQ_REASM_MAX);

	/* Filling the hole, by the sequence numbers of the old window. */
	assert_int_equal(add_true(&rs, base - 13 + 100, 10), NFQ_REASM_OK);
	assert_window(&rs, base, 127, 127);
	assert_true_bytes(&rs, 0, 127);

	/* Consume by uneven steps, each followed by a segment that leaves a
	 * hole and then one that fills it: positions must stay exact. */
	for (i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		size_t end = rs.high;

		nfq_reasm_consume(&rs, steps[i]);
		base += (uint32_t)steps[i];
		end -= steps[i];
		assert_window(&rs, base, end, end);
		hole = 3 + i;
		assert_int_equal(add_true(&rs, base + (uint32_t)(end + hole),
		    20 + i), NFQ_REASM_OK);
		assert_window(&rs, base, end, end + hole + 20 + i);
		assert_absent(&rs, end, end + hole);
		assert_true_bytes(&rs, end + hole, end + hole + 20 + i);
		assert_int_equal(add_true(&rs, base + (uint32_t)end, hole),
		    NFQ_REASM_OK);
		assert_window(&rs, base, end + hole + 20 + i,
		    end + hole + 20 + i);
		assert_true_bytes(&rs, 0, rs.high);
		assert_absent(&rs, rs.high, NFQ_REASM_MAX);
	}

	/* Everything, then a fresh start at the new base. */
	base += (uint32_t)rs.contiguous;
	nfq_reasm_consume(&rs, rs.contiguous);
	assert_window(&rs, base, 0, 0);
	assert_absent(&rs, 0, NFQ_REASM_MAX);
	assert_int_equal(add_true(&rs, base + 5, 5), NFQ_REASM_OK);
	assert_window(&rs, base, 0, 10);
	assert_true_bytes(&rs, 5, 10);
}

static void
test_consume_full_window(void **state)
{
	uint32_t base = 1;

	(void)state;
	/* A full window shifted by an odd count: the last bitmap byte's bits
	 * must move into the one before and leave zeros behind. */
	nfq_reasm_init(&rs, base);
	assert_int_equal(add_true(&rs, base, NFQ_REASM_MAX), NFQ_REASM_OK);
	nfq_reasm_consume(&rs, 3);
	base += 3;
	assert_window(&rs, base, NFQ_REASM_MAX - 3, NFQ_REASM_MAX - 3);
	assert_true_bytes(&rs, 0, NFQ_REASM_MAX - 3);
	assert_absent(&rs, NFQ_REASM_MAX - 3, NFQ_REASM_MAX);
	assert_int_equal(add_true(&rs, base + NFQ_REASM_MAX - 4, 4),
	    NFQ_REASM_OK);
	assert_window(&rs, base, NFQ_REASM_MAX, NFQ_REASM_MAX);
	assert_true_bytes(&rs, 0, NFQ_REASM_MAX);
	assert_int_equal(add_true(&rs, base + NFQ_REASM_MAX, 1),
	    NFQ_REASM_OVERFLOW);
}

static void
test_consume_then_old(void **state)
{
	const uint32_t base = 700;
	uint8_t buf[50];

	(void)state;
	nfq_reasm_init(&rs, base);
	assert_int_equal(add_true(&rs, base, 50), NFQ_REASM_OK);
	nfq_reasm_consume(&rs, 50);
	assert_window(&rs, base + 50, 0, 0);
	take_snapshot();
	assert_int_equal(add_true(&rs, base, 50), NFQ_REASM_OLD);
	assert_int_equal(add_true(&rs, base + 10, 40), NFQ_REASM_OLD);
	/* Consumed bytes are gone: a different version of them is old too,
	 * not a conflict. */
	stream_fill(buf, base, sizeof(buf));
	buf[3] ^= 0x44;
	assert_int_equal(nfq_reasm_add(&rs, base, buf, sizeof(buf)),
	    NFQ_REASM_OLD);
	assert_unchanged();
	/* A retransmission that also carries new bytes keeps those. */
	assert_int_equal(add_true(&rs, base + 40, 20), NFQ_REASM_OK);
	assert_window(&rs, base + 50, 10, 10);
	assert_true_bytes(&rs, 0, 10);
}

static void
test_consume_clamped(void **state)
{
	const uint32_t base = 0;

	(void)state;
	nfq_reasm_init(&rs, base);
	assert_int_equal(add_true(&rs, base, 10), NFQ_REASM_OK);
	assert_int_equal(add_true(&rs, base + 20, 10), NFQ_REASM_OK);
	nfq_reasm_consume(&rs, 25);
	assert_window(&rs, base + 10, 0, 20);
	assert_absent(&rs, 0, 10);
	assert_true_bytes(&rs, 10, 20);
	take_snapshot();
	nfq_reasm_consume(&rs, 1);
	nfq_reasm_consume(&rs, 0);
	assert_unchanged();
}

/* ---- random operations against a byte array doing the same ------------ */

struct model {
	uint32_t	base;
	uint8_t		data[NFQ_REASM_MAX];
	bool		present[NFQ_REASM_MAX];
};

/* Byte by byte, with no notion of segments or bitmaps. */
static enum nfq_reasm_result
model_add(struct model *m, uint32_t seq, const uint8_t *data, size_t len)
{
	bool inside = false, overflow = false, conflict = false;
	uint32_t pos;
	size_t i;

	for (i = 0; i < len; i++) {
		pos = seq + (uint32_t)i - m->base;
		if (pos >= 0x80000000U)
			continue;
		inside = true;
		if (pos >= NFQ_REASM_MAX)
			overflow = true;
		else if (m->present[pos] && m->data[pos] != data[i])
			conflict = true;
	}
	if (len == 0)
		return NFQ_REASM_OK;
	if (!inside)
		return NFQ_REASM_OLD;
	if (overflow)
		return NFQ_REASM_OVERFLOW;
	if (conflict)
		return NFQ_REASM_CONFLICT;
	for (i = 0; i < len; i++) {
		pos = seq + (uint32_t)i - m->base;
		if (pos < NFQ_REASM_MAX) {
			m->data[pos] = data[i];
			m->present[pos] = true;
		}
	}
	return NFQ_REASM_OK;
}

static size_t
model_contiguous(const struct model *m)
{
	size_t n = 0;

	while (n < NFQ_REASM_MAX && m->present[n])
		n++;
	return n;
}

static size_t
model_high(const struct model *m)
{
	size_t n = NFQ_REASM_MAX;

	while (n > 0 && !m->present[n - 1])
		n--;
	return n;
}

static void
model_consume(struct model *m, size_t n)
{
	size_t c = model_contiguous(m);

	if (n > c)
		n = c;
	memmove(m->data, m->data + n, NFQ_REASM_MAX - n);
	memmove(m->present, m->present + n, NFQ_REASM_MAX - n);
	memset(m->present + NFQ_REASM_MAX - n, 0, n);
	m->base += (uint32_t)n;
}

static void
assert_model(const struct nfq_reasm *r, const struct model *m, unsigned step)
{
	size_t i;

	if (r->base != m->base || r->contiguous != model_contiguous(m) ||
	    r->high != model_high(m))
		fail_msg("step %u: base %u/%u contiguous %zu/%zu high %zu/%zu",
		    step, r->base, m->base, r->contiguous, model_contiguous(m),
		    r->high, model_high(m));
	for (i = 0; i < NFQ_REASM_MAX; i++) {
		if (has(r, i) != m->present[i] ||
		    (m->present[i] && r->data[i] != m->data[i]))
			fail_msg("step %u: position %zu differs", step, i);
	}
}

static uint32_t
xorshift(uint32_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 17;
	*x ^= *x << 5;
	return *x;
}

static uint32_t
rnd(uint32_t *x, uint32_t n)
{
	return xorshift(x) % n;
}

static struct model model;

static void
run_random(uint32_t base, uint32_t seed, unsigned steps)
{
	static uint8_t buf[2 * NFQ_REASM_MAX];
	enum nfq_reasm_result got, want;
	unsigned counts[4] = { 0 }, consumed = 0, step;
	uint32_t x = seed, seq, pick;
	size_t len, n;

	nfq_reasm_init(&rs, base);
	memset(&model, 0, sizeof(model));
	model.base = base;
	for (step = 0; step < steps; step++) {
		pick = rnd(&x, 100);
		if (pick < 15) {
			n = rnd(&x, (uint32_t)rs.contiguous + 20);
			nfq_reasm_consume(&rs, n);
			model_consume(&model, n);
			consumed++;
			assert_model(&rs, &model, step);
			continue;
		}
		if (pick < 65) {
			/* Near the edge of what is contiguous. */
			seq = rs.base + (uint32_t)rs.contiguous - 200 +
			    rnd(&x, 800);
			len = rnd(&x, 400);
		} else if (pick < 95) {
			seq = rs.base - 500 + rnd(&x, NFQ_REASM_MAX + 1000);
			len = rnd(&x, 1500);
		} else if (pick < 98) {
			seq = rs.base - 100 + rnd(&x, 200);
			len = NFQ_REASM_MAX - 100 + rnd(&x, 200);
		} else {
			seq = xorshift(&x);
			len = rnd(&x, 100);
		}
		stream_fill(buf, seq, len);
		if (len > 0 && rnd(&x, 10) == 0)
			buf[rnd(&x, (uint32_t)len)] ^= (uint8_t)(1 + rnd(&x, 255));
		want = model_add(&model, seq, buf, len);
		got = nfq_reasm_add(&rs, seq, buf, len);
		if (got != want)
			fail_msg("step %u: add %u+%zu (offset %d): got %d, want %d",
			    step, seq, len, (int)(seq - rs.base), got, want);
		counts[got]++;
		assert_model(&rs, &model, step);
	}
	/* Every outcome was exercised, or the run proves little. */
	for (n = 0; n < 4; n++)
		assert_true(counts[n] > 0);
	assert_true(consumed > 0);
}

static void
test_random_against_model(void **state)
{
	(void)state;
	run_random(0, 1, 3000);
	run_random(0xffffff00U, 2, 3000);
	run_random(0x7ffffff0U, 3, 3000);
	run_random(0xfffff000U, 0x9e3779b9U, 3000);
}

/* agrees: stored bytes compared, nothing stored; bytes before base, past
 * the stored ones or in a gap are not compared; wraps like add */
static void
test_agrees(void **state)
{
	static struct nfq_reasm r;
	uint8_t buf[600];
	const uint32_t base = 0xfffffe00U;	/* wraps inside the window */

	(void)state;
	nfq_reasm_init(&r, base);
	assert_int_equal(add_true(&r, base, 300), NFQ_REASM_OK);
	assert_int_equal(add_true(&r, base + 400, 100), NFQ_REASM_OK);

	stream_fill(buf, base - 50, sizeof(buf));
	assert_true(nfq_reasm_agrees(&r, base - 50, buf, sizeof(buf)));
	/* one byte changed inside the stored ones, each part */
	buf[50 + 299] ^= 1;
	assert_false(nfq_reasm_agrees(&r, base - 50, buf, sizeof(buf)));
	buf[50 + 299] ^= 1;
	buf[50 + 450] ^= 0x80;
	assert_false(nfq_reasm_agrees(&r, base - 50, buf, sizeof(buf)));
	buf[50 + 450] ^= 0x80;
	/* changed where nothing is stored: before base, in the gap, past
	 * high */
	buf[10] ^= 1;
	buf[50 + 350] ^= 1;
	buf[50 + 520] ^= 1;
	assert_true(nfq_reasm_agrees(&r, base - 50, buf, sizeof(buf)));
	/* entirely before, entirely past */
	assert_true(nfq_reasm_agrees(&r, base - 50, buf, 50));
	assert_true(nfq_reasm_agrees(&r, base + 500, buf, 10));
	assert_true(nfq_reasm_agrees(&r, base + NFQ_REASM_MAX + 10, buf, 10));
	/* a segment that starts inside and differs at its first byte */
	stream_fill(buf, base + 299, 1);
	buf[0] ^= 0xff;
	assert_false(nfq_reasm_agrees(&r, base + 299, buf, 1));
	/* nothing was stored by any of it */
	assert_int_equal(r.contiguous, 300);
	assert_int_equal(r.high, 500);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_init),
		cmocka_unit_test(test_in_order),
		cmocka_unit_test(test_reversed_order),
		cmocka_unit_test(test_permutations),
		cmocka_unit_test(test_exact_retransmission),
		cmocka_unit_test(test_overlaps_agreeing),
		cmocka_unit_test(test_overlaps_disagreeing),
		cmocka_unit_test(test_segment_crossing_base),
		cmocka_unit_test(test_entirely_before_base),
		cmocka_unit_test(test_wraparound),
		cmocka_unit_test(test_max),
		cmocka_unit_test(test_len_zero),
		cmocka_unit_test(test_consume_odd),
		cmocka_unit_test(test_consume_full_window),
		cmocka_unit_test(test_consume_then_old),
		cmocka_unit_test(test_consume_clamped),
		cmocka_unit_test(test_random_against_model),
		cmocka_unit_test(test_agrees),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
