/* fuzz_http.c: libFuzzer target: HTTP heads the same however the stream is cut. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "nfq/nfq.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/*
 * Input: one byte n (n % 8 piece sizes follow), the piece sizes (each
 * 1 .. 64, used in turn), then the client's stream. The stream is fed
 * whole, in those pieces and one byte at a time, and as sluiced reads it
 * (framing by nfq_http_feed_framing, body and chunk data skipped as
 * nfq_http_opaque says); all four must give the same heads at the same
 * offsets and the same error at the same offset.
 */

#define EVENTS_MAX	1024

struct event {
	enum nfq_http_status	 status;
	size_t			 end;		/* stream offset after it */
	struct nfq_http_head	 head;
	const char		*error;
};

struct run {
	struct event	 ev[EVENTS_MAX];
	size_t		 n;		/* events, even past EVENTS_MAX */
};

/* Too large for libFuzzer's stack budget to be comfortable per call. */
static struct nfq_http_stream stream;
static struct run runs[4];

static void
check(int ok)
{
	if (!ok)
		abort();
}

static bool
is_tchar(uint8_t c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9') || (c != 0 && strchr("!#$%&'*+-.^_`|~", c));
}

/* What a head may hold, whatever the input. */
static void
check_head(const struct nfq_http_head *h)
{
	size_t n, i;

	n = strnlen(h->method, sizeof(h->method));
	check(n >= 1 && n < sizeof(h->method));
	for (i = 0; i < n; i++)
		check(is_tchar((uint8_t)h->method[i]));
	n = strnlen(h->host, sizeof(h->host));
	check(n < sizeof(h->host));
	for (i = 0; i < n; i++)
		check(strchr("abcdefghijklmnopqrstuvwxyz"
		    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._:",
		    h->host[i]) != NULL);
	n = strnlen(h->path, sizeof(h->path));
	check(n >= 1 && n < sizeof(h->path));
	check(h->path[0] == '/' || strcmp(h->path, "*") == 0);
	check(strcmp(h->path, "*") != 0 || strcmp(h->method, "OPTIONS") == 0);
	check(strcasecmp(h->method, "CONNECT") != 0);
	for (i = 0; i < n; i++)
		check(h->path[i] > 0x20 && h->path[i] < 0x7f &&
		    h->path[i] != '#');
}

static void
record(struct run *r, enum nfq_http_status st, size_t end,
    const struct nfq_http_head *head, const char *error)
{
	if (r->n < EVENTS_MAX) {
		r->ev[r->n].status = st;
		r->ev[r->n].end = end;
		if (head != NULL)
			r->ev[r->n].head = *head;
		r->ev[r->n].error = error;
	}
	r->n++;
}

/*
 * Feeds s[0..len) whole (no sizes, piece_fixed 0), in pieces of the given
 * sizes in turn, or in pieces of piece_fixed bytes. One byte at a time,
 * where in_head turns true must be where the head's method starts.
 */
static void
feed_run(struct run *r, const uint8_t *s, size_t len, const uint8_t *sizes,
    size_t nsizes, size_t piece_fixed)
{
	struct nfq_http_head head;
	const char *error, *why;
	size_t off = 0, piece, used, k = 0, start = 0;
	bool was_in = false;
	enum nfq_http_status st;

	r->n = 0;
	nfq_http_init(&stream);
	check(!nfq_http_in_head(&stream));
	while (off < len) {
		if (piece_fixed > 0)
			piece = piece_fixed;
		else
			piece = nsizes > 0 ? 1 + sizes[k++ % nsizes] % 64 : len;
		if (piece > len - off)
			piece = len - off;
		while (piece > 0) {
			memset(&head, 0xa5, sizeof(head));
			st = nfq_http_feed(&stream, s + off, piece, &used,
			    &head, &error);
			check(used <= piece);
			if (!was_in && nfq_http_in_head(&stream))
				start = off;
			off += used;
			piece -= used;
			if (st == NFQ_HTTP_HEAD) {
				check(error == NULL);
				check(!nfq_http_in_head(&stream));
				check_head(&head);
				check(off >= 4 && memcmp(s + off - 4,
				    "\r\n\r\n", 4) == 0);
				if (piece_fixed == 1) {
					size_t ml = strlen(head.method);

					check(off - start <= NFQ_HTTP_HEAD_MAX);
					check(memcmp(s + start, head.method,
					    ml) == 0 && s[start + ml] == ' ');
				}
				record(r, st, off, &head, NULL);
			} else if (st == NFQ_HTTP_MALFORMED) {
				check(error != NULL);
				check(nfq_http_in_head(&stream));
				record(r, st, off, NULL, error);
				/* Dead for good. */
				why = error;
				check(nfq_http_feed(&stream, s, len, &used,
				    &head, &error) == NFQ_HTTP_MALFORMED);
				check(used == 0 && error == why);
				return;
			} else {
				check(error == NULL && piece == 0);
			}
			was_in = nfq_http_in_head(&stream);
		}
	}
}

/*
 * Feeds s[0..len) as inspect.c does: what nfq_http_opaque names is fed
 * alone, the rest with nfq_http_feed_framing, which must stop only where
 * a body or chunk data begins (or at a head's end).
 */
static void
framing_run(struct run *r, const uint8_t *s, size_t len)
{
	struct nfq_http_head head;
	const char *error;
	size_t off = 0, used;
	uint64_t opaque;
	enum nfq_http_status st;

	r->n = 0;
	nfq_http_init(&stream);
	while (off < len) {
		if ((opaque = nfq_http_opaque(&stream)) > 0) {
			used = opaque < len - off ? (size_t)opaque : len - off;
			st = nfq_http_feed(&stream, s + off, used, &used,
			    &head, &error);
			check(st == NFQ_HTTP_NEED_MORE);
			check(nfq_http_opaque(&stream) == opaque - used);
			off += used;
			continue;
		}
		st = nfq_http_feed_framing(&stream, s + off, len - off, &used,
		    &head, &error);
		check(used <= len - off);
		off += used;
		if (st == NFQ_HTTP_NEED_MORE) {
			/* all of it, or up to data: never nothing */
			check(off == len || nfq_http_opaque(&stream) > 0);
			check(used > 0);
		} else if (st == NFQ_HTTP_HEAD) {
			record(r, st, off, &head, NULL);
		} else {
			record(r, st, off, NULL, error);
			return;
		}
	}
}

static void
compare(const struct run *a, const struct run *b)
{
	size_t i;

	check(a->n == b->n);
	for (i = 0; i < a->n && i < EVENTS_MAX; i++) {
		const struct event *x = &a->ev[i], *y = &b->ev[i];

		check(x->status == y->status && x->end == y->end);
		check(x->error == y->error);
		if (x->status == NFQ_HTTP_HEAD)
			check(strcmp(x->head.method, y->head.method) == 0 &&
			    strcmp(x->head.host, y->head.host) == 0 &&
			    strcmp(x->head.path, y->head.path) == 0 &&
			    x->head.absolute == y->head.absolute);
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t nsizes;

	if (size == 0)
		return 0;
	nsizes = data[0] % 8;
	if (size < 1 + nsizes)
		return 0;

	feed_run(&runs[0], data + 1 + nsizes, size - 1 - nsizes, NULL, 0, 0);
	feed_run(&runs[1], data + 1 + nsizes, size - 1 - nsizes, data + 1,
	    nsizes, 0);
	feed_run(&runs[2], data + 1 + nsizes, size - 1 - nsizes, NULL, 0, 1);
	framing_run(&runs[3], data + 1 + nsizes, size - 1 - nsizes);
	compare(&runs[0], &runs[1]);
	compare(&runs[0], &runs[2]);
	compare(&runs[0], &runs[3]);
	return 0;
}
