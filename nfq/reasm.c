/* reasm.c: a bounded TCP stream reassembler that refuses disagreeing overlaps. */
#include <string.h>

#include "nfq/nfq.h"

/*
 * have[] holds one bit per byte of data[], least significant bit first:
 * position p is present when have[p / 8] & (1 << p % 8). Bits at and past
 * high are always clear, which lets consume shift only the used part.
 */

/* An offset this far from base or more is behind it (RFC 793's modular
 * sequence comparison: half the sequence space either way). */
#define REASM_BEHIND	0x80000000U

static bool
reasm_has(const struct nfq_reasm *r, size_t pos)
{
	return (r->have[pos / 8] >> (pos % 8)) & 1;
}

/* Marks [from, to) present: partial bytes bit by bit, whole bytes at once. */
static void
reasm_mark(struct nfq_reasm *r, size_t from, size_t to)
{
	for (; from < to && from % 8 != 0; from++)
		r->have[from / 8] |= (uint8_t)(1U << (from % 8));
	if (to - from >= 8) {
		memset(&r->have[from / 8], 0xff, (to - from) / 8);
		from += (to - from) / 8 * 8;
	}
	for (; from < to; from++)
		r->have[from / 8] |= (uint8_t)(1U << (from % 8));
}

/* Moves contiguous past every present byte that now follows it. Each
 * byte is walked over once in its stay in the window, so the walk costs
 * no more than the bytes added, summed over calls. */
static void
reasm_extend(struct nfq_reasm *r)
{
	size_t c = r->contiguous;

	while (c < NFQ_REASM_MAX && c % 8 != 0 && reasm_has(r, c))
		c++;
	if (c % 8 == 0)
		while (c < NFQ_REASM_MAX && r->have[c / 8] == 0xff)
			c += 8;
	while (c < NFQ_REASM_MAX && reasm_has(r, c))
		c++;
	r->contiguous = c;
}

void
nfq_reasm_init(struct nfq_reasm *r, uint32_t base)
{
	/* data[] needs no clearing: no byte is read before it is marked. */
	r->base = base;
	r->contiguous = 0;
	r->high = 0;
	memset(r->have, 0, sizeof(r->have));
}

/*
 * The part of a segment at seq from base on, as an offset into data[]:
 * bytes before base were consumed, and there is nothing left to compare
 * them with. False when nothing is left.
 */
static bool
reasm_clip(const struct nfq_reasm *r, uint32_t seq, const uint8_t **data,
    size_t *len, uint32_t *off)
{
	uint32_t behind;

	*off = seq - r->base;
	if (*off >= REASM_BEHIND) {
		behind = 0U - *off;
		if (*len <= behind)
			return false;
		*data += behind;
		*len -= behind;
		*off = 0;
	}
	return true;
}

enum nfq_reasm_result
nfq_reasm_add(struct nfq_reasm *r, uint32_t seq, const uint8_t *data,
    size_t len)
{
	uint32_t off;
	size_t i, end;

	if (len == 0)
		return NFQ_REASM_OK;
	if (!reasm_clip(r, seq, &data, &len, &off))
		return NFQ_REASM_OLD;
	/* All or nothing: a partly stored segment would leave the stream's
	 * bytes up to the sender's choice of where to cut. */
	if (off >= NFQ_REASM_MAX || len > NFQ_REASM_MAX - off)
		return NFQ_REASM_OVERFLOW;
	end = off + len;

	for (i = off; i < end; i++)
		if (reasm_has(r, i) && r->data[i] != data[i - off])
			return NFQ_REASM_CONFLICT;

	/* Bytes already present are equal, so copying over them is harmless. */
	memcpy(&r->data[off], data, len);
	reasm_mark(r, off, end);
	if (end > r->high)
		r->high = end;
	if (off <= r->contiguous && end > r->contiguous) {
		r->contiguous = end;
		reasm_extend(r);
	}
	return NFQ_REASM_OK;
}

bool
nfq_reasm_agrees(const struct nfq_reasm *r, uint32_t seq,
    const uint8_t *data, size_t len)
{
	uint32_t off;
	size_t i, end;

	if (len == 0 || !reasm_clip(r, seq, &data, &len, &off) ||
	    off >= r->high)
		return true;
	end = len < r->high - off ? off + len : r->high;
	for (i = off; i < end; i++)
		if (reasm_has(r, i) && r->data[i] != data[i - off])
			return false;
	return true;
}

void
nfq_reasm_consume(struct nfq_reasm *r, size_t n)
{
	size_t q, s, i, used;

	if (n > r->contiguous)
		n = r->contiguous;
	if (n == 0)
		return;

	memmove(r->data, &r->data[n], r->high - n);

	/* Shift the bitmap down by n bits: q whole bytes, then s bits. Bits
	 * past high are clear, so only the bytes up to high need moving and
	 * what moves in from beyond them is zero. */
	used = (r->high + 7) / 8;
	q = n / 8;
	s = n % 8;
	for (i = 0; i + q < used; i++) {
		unsigned v = r->have[i + q] >> s;

		if (s != 0 && i + q + 1 < used)
			v |= (unsigned)r->have[i + q + 1] << (8 - s);
		r->have[i] = (uint8_t)v;
	}
	memset(&r->have[i], 0, used - i);

	r->base += (uint32_t)n;
	r->contiguous -= n;
	r->high -= n;
}
