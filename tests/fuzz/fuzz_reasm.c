/* fuzz_reasm.c: libFuzzer target running TCP reassembly against a byte-array model. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nfq/nfq.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/*
 * The input: 4 bytes of initial base (little-endian), then operations,
 * each an opcode byte c and its arguments:
 *   c & 3 == 0  add the true stream's bytes:   off16 len16
 *   c & 3 == 1  the same with one byte changed: off16 len16 where8
 *   c & 3 == 2  add bytes from the input:       off16 len8 bytes...
 *   c & 3 == 3  consume:                        n16
 * off16 is a signed offset from base, or from base + contiguous when
 * c & 4; c & 8 moves it half the sequence space away, to the edge
 * between ahead and behind. Missing argument bytes read as zero.
 */

/* The model and the checks loop over every byte: left without coverage
 * tracing, they run several times faster and cover nothing of interest. */
#define ORACLE	__attribute__((no_sanitize("coverage")))

/* Same answer, byte by byte, with no segments and no bitmap. */
struct model {
	uint32_t	base;
	size_t		high;	/* kept as bytes come and go: scanning the
				 * whole window after each step is slow */
	uint8_t		data[NFQ_REASM_MAX];
	bool		present[NFQ_REASM_MAX];
};

/* Too large for libFuzzer's stack budget to be comfortable per call. */
static struct nfq_reasm rs;
static struct model model;

static void
check(int ok)
{
	if (!ok)
		abort();
}

ORACLE static uint8_t
stream_byte(uint32_t seq)
{
	uint32_t x = seq * 2654435761U;

	return (uint8_t)(x >> 24 ^ x >> 8);
}

ORACLE static void
stream_fill(uint8_t *buf, uint32_t seq, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++)
		buf[i] = stream_byte(seq + (uint32_t)i);
}

ORACLE static enum nfq_reasm_result
model_add(struct model *m, uint32_t seq, const uint8_t *buf, size_t len)
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
		else if (m->present[pos] && m->data[pos] != buf[i])
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
			m->data[pos] = buf[i];
			m->present[pos] = true;
			if (pos + 1 > m->high)
				m->high = pos + 1;
		}
	}
	return NFQ_REASM_OK;
}

ORACLE static size_t
model_contiguous(const struct model *m)
{
	size_t n = 0;

	while (n < NFQ_REASM_MAX && m->present[n])
		n++;
	return n;
}

ORACLE static void
model_consume(struct model *m, size_t n)
{
	size_t c = model_contiguous(m);

	if (n > c)
		n = c;
	memmove(m->data, m->data + n, m->high - n);
	memmove(m->present, m->present + n, m->high - n);
	memset(m->present + m->high - n, 0, n);
	m->base += (uint32_t)n;
	m->high -= n;
}

/* Positions [0, upto) agree, and the window's bounds. Checking past high
 * after every step would make each run slow; the last step checks it. */
ORACLE static void
check_model(size_t upto)
{
	size_t i;
	bool have;

	check(rs.base == model.base);
	check(rs.contiguous == model_contiguous(&model));
	check(rs.high == model.high);
	for (i = 0; i < upto; i++) {
		have = (rs.have[i / 8] >> (i % 8)) & 1;
		check(have == model.present[i]);
		check(!have || rs.data[i] == model.data[i]);
	}
	/* The model's own high, against its bytes. */
	check(model.high == 0 || model.present[model.high - 1]);
	if (upto == NFQ_REASM_MAX)
		for (i = model.high; i < NFQ_REASM_MAX; i++)
			check(!model.present[i]);
}

struct input {
	const uint8_t	*p;
	size_t		 left;
};

static uint32_t
take(struct input *in, size_t n)
{
	uint32_t v = 0;
	size_t i;

	for (i = 0; i < n; i++) {
		v |= (uint32_t)(in->left > 0 ? *in->p : 0) << (8 * i);
		if (in->left > 0) {
			in->p++;
			in->left--;
		}
	}
	return v;
}

static void
run_add(struct input *in, uint8_t c)
{
	static uint8_t segbuf[NFQ_REASM_MAX + 64];
	enum nfq_reasm_result got, want;
	bool agree;
	uint32_t seq, where;
	uint8_t *buf;
	const uint8_t *seg;
	size_t len;
	int32_t off;

	off = (int16_t)take(in, 2);
	seq = rs.base + (uint32_t)off;
	if (c & 4)
		seq += (uint32_t)rs.contiguous;
	if (c & 8)
		seq += 0x80000000U;

	if ((c & 3) == 2) {
		/* Straight from the input, which libFuzzer allocates to its
		 * exact size: a read past len is caught. */
		len = take(in, 1);
		if (len > in->left)
			len = in->left;
		seg = in->p;
		in->p += len;
		in->left -= len;
	} else {
		len = take(in, 2) % (NFQ_REASM_MAX + 64);
		where = (c & 3) == 1 ? take(in, 1) : 0;
		/* At the very end of an array, next to ASan's redzone after
		 * it, for the same reason. */
		buf = &segbuf[sizeof(segbuf) - len];
		stream_fill(buf, seq, len);
		if ((c & 3) == 1 && len > 0)
			buf[where * len / 256] ^= (uint8_t)(1U << (c >> 5));
		seg = buf;
	}

	/* agrees says, before the add, whether it would conflict */
	agree = nfq_reasm_agrees(&rs, seq, seg, len);
	want = model_add(&model, seq, seg, len);
	got = nfq_reasm_add(&rs, seq, seg, len);
	check(got == want);
	check(got != NFQ_REASM_CONFLICT || !agree);
	check(got != NFQ_REASM_OK || agree);
	/* and stored, a segment agrees with itself */
	if (got == NFQ_REASM_OK)
		check(nfq_reasm_agrees(&rs, seq, seg, len));
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct input in = { data, size };
	uint8_t c;

	nfq_reasm_init(&rs, take(&in, 4));
	memset(&model, 0, sizeof(model));
	model.base = rs.base;

	while (in.left > 0) {
		c = (uint8_t)take(&in, 1);
		if ((c & 3) == 3) {
			size_t n = take(&in, 2) % (rs.contiguous + 17);

			nfq_reasm_consume(&rs, n);
			model_consume(&model, n);
		} else
			run_add(&in, c);
		check_model(rs.high);
	}
	check_model(NFQ_REASM_MAX);
	return 0;
}
