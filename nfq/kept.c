/* kept.c: bytes of a client's stream kept until the server acknowledges them. */
#include <stdlib.h>
#include <string.h>

#include "nfq/nfq.h"

void
nfq_kept_free(struct nfq_kept *k)
{
	free(k->bytes);
	memset(k, 0, sizeof(*k));
}

size_t
nfq_kept_room(const struct nfq_kept *k, uint32_t seq)
{
	const struct nfq_kept_range *last = k->n > 0 ? &k->r[k->n - 1] : NULL;

	/* a new range needs a slot; bytes that touch the last one do not */
	if (k->n == NFQ_KEPT_RANGES && last->seq + last->len != seq)
		return 0;
	return NFQ_KEPT_BYTES - k->len;
}

int
nfq_kept_add(struct nfq_kept *k, uint32_t seq, const uint8_t *data,
    size_t len)
{
	struct nfq_kept_range *last = k->n > 0 ? &k->r[k->n - 1] : NULL;
	bool joins = last != NULL && last->seq + last->len == seq;

	if (len == 0)
		return 0;
	if (len > nfq_kept_room(k, seq))
		return -1;
	if (k->len + len > k->cap) {
		/* most connections keep one head, far smaller than the bound */
		size_t cap = k->cap != 0 ? k->cap : 1024;
		uint8_t *p;

		while (cap < k->len + len)
			cap *= 2;
		if (cap > NFQ_KEPT_BYTES)
			cap = NFQ_KEPT_BYTES;
		if ((p = realloc(k->bytes, cap)) == NULL)
			return -1;
		k->bytes = p;
		k->cap = cap;
	}
	memcpy(k->bytes + k->len, data, len);
	k->len += len;
	if (joins) {
		last->len += (uint32_t)len;
		return 0;
	}
	k->r[k->n].seq = seq;
	k->r[k->n].len = (uint32_t)len;
	k->n++;
	return 0;
}

bool
nfq_kept_agrees(const struct nfq_kept *k, uint32_t seq, const uint8_t *data,
    size_t len)
{
	const uint8_t *p = k->bytes;
	size_t i;

	for (i = 0; i < k->n; p += k->r[i].len, i++) {
		uint32_t rs = k->r[i].seq, rl = k->r[i].len, o, n;

		if ((o = seq - rs) < rl) {	/* starts inside the range */
			n = rl - o < len ? rl - o : (uint32_t)len;
			if (memcmp(data, p + o, n) != 0)
				return false;
		} else if ((o = rs - seq) < len) {	/* the range inside it */
			n = len - o < rl ? (uint32_t)(len - o) : rl;
			if (memcmp(data + o, p, n) != 0)
				return false;
		}
	}
	return true;
}

void
nfq_kept_ack(struct nfq_kept *k, uint32_t ack)
{
	size_t n = 0, bytes = 0;
	uint32_t cut;

	while (n < k->n && (int32_t)(ack - (k->r[n].seq + k->r[n].len)) >= 0)
		bytes += k->r[n++].len;
	/* a range the ACK ends inside loses its front */
	if (n < k->n && (cut = ack - k->r[n].seq) < k->r[n].len) {
		bytes += cut;
		k->r[n].seq += cut;
		k->r[n].len -= cut;
	}
	if (bytes == 0)
		return;
	memmove(k->r, k->r + n, (k->n - n) * sizeof(k->r[0]));
	k->n -= n;
	memmove(k->bytes, k->bytes + bytes, k->len - bytes);
	k->len -= bytes;
}
