/* test_http.c: the HTTP request head parser: syntax, pieces, smuggling. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "nfq/nfq.h"

#define HEADS_MAX	8
#define CHUNK_LINE	1024	/* http.c's bound on a chunk line */

/* What feeding a whole stream gave. */
struct result {
	size_t			 nheads;
	struct nfq_http_head	 heads[HEADS_MAX];
	size_t			 ends[HEADS_MAX];	/* offset after each */
	enum nfq_http_status	 last;		/* NEED_MORE or MALFORMED */
	const char		*error;
	size_t			 error_at;	/* offset after the bad byte */
	bool			 in_head;	/* at the end */
};

enum split {
	WHOLE,
	BYTES,		/* one byte per feed */
	RANDOM,		/* pieces of 1 .. 64 bytes from a seeded generator */
};

/* The stream is large: keep it off the test's stack. */
static struct nfq_http_stream stream;

static unsigned
next_random(unsigned *state)
{
	*state = *state * 1103515245U + 12345U;
	return (*state >> 16) & 0x7fff;
}

/* Feeds one piece of the stream at offset *off, again after every head
 * until the piece is consumed, as a gateway would; records what came. */
static enum nfq_http_status
feed(struct result *r, const uint8_t *p, size_t piece, size_t *off)
{
	struct nfq_http_head head;
	const char *error;
	size_t used;
	enum nfq_http_status st = NFQ_HTTP_NEED_MORE;

	while (piece > 0) {
		st = nfq_http_feed(&stream, p, piece, &used, &head, &error);
		assert_true(used <= piece);
		*off += used;
		p += used;
		piece -= used;
		if (st == NFQ_HTTP_HEAD) {
			assert_null(error);
			assert_false(nfq_http_in_head(&stream));
			assert_true(r->nheads < HEADS_MAX);
			r->heads[r->nheads] = head;
			r->ends[r->nheads++] = *off;
		} else if (st == NFQ_HTTP_MALFORMED) {
			assert_non_null(error);
			r->error = error;
			r->error_at = *off;
			break;
		} else {
			assert_null(error);
			assert_int_equal(piece, 0);
		}
	}
	r->last = st == NFQ_HTTP_MALFORMED ? st : NFQ_HTTP_NEED_MORE;
	r->in_head = nfq_http_in_head(&stream);
	return st;
}

/* Feeds buf to a fresh stream cut as split says. */
static void
run(const void *buf, size_t len, enum split split, unsigned seed,
    struct result *r)
{
	const uint8_t *p = buf;
	size_t off = 0, piece;

	memset(r, 0, sizeof(*r));
	nfq_http_init(&stream);
	r->in_head = nfq_http_in_head(&stream);
	while (off < len) {
		piece = split == WHOLE ? len - off : split == BYTES ? 1 :
		    1 + next_random(&seed) % 64;
		if (piece > len - off)
			piece = len - off;
		if (feed(r, p + off, piece, &off) == NFQ_HTTP_MALFORMED)
			break;
	}
}

static void
run_str(const char *s, struct result *r)
{
	run(s, strlen(s), WHOLE, 0, r);
}

static void
assert_same_result(const struct result *a, const struct result *b)
{
	size_t i;

	assert_int_equal(a->nheads, b->nheads);
	for (i = 0; i < a->nheads; i++) {
		assert_int_equal(a->ends[i], b->ends[i]);
		assert_string_equal(a->heads[i].method, b->heads[i].method);
		assert_string_equal(a->heads[i].host, b->heads[i].host);
		assert_string_equal(a->heads[i].path, b->heads[i].path);
		assert_int_equal(a->heads[i].absolute, b->heads[i].absolute);
	}
	assert_int_equal(a->last, b->last);
	assert_true(a->error == b->error);
	assert_int_equal(a->error_at, b->error_at);
	assert_int_equal(a->in_head, b->in_head);
}

static void
assert_head(const struct result *r, size_t i, const char *method,
    const char *host, const char *path)
{
	assert_true(i < r->nheads);
	assert_string_equal(r->heads[i].method, method);
	assert_string_equal(r->heads[i].host, host);
	assert_string_equal(r->heads[i].path, path);
}

/* s is one complete request (or several) that must parse cleanly. */
static void
assert_heads(const char *s, size_t nheads)
{
	struct result r;

	run_str(s, &r);
	assert_null(r.error);
	assert_int_equal(r.last, NFQ_HTTP_NEED_MORE);
	assert_int_equal(r.nheads, nheads);
}

/* s must be refused, with error, after nheads good heads. */
static void
assert_malformed(const char *s, size_t nheads, const char *error)
{
	struct result r;

	run_str(s, &r);
	assert_int_equal(r.last, NFQ_HTTP_MALFORMED);
	assert_non_null(r.error);
	assert_string_equal(r.error, error);
	assert_int_equal(r.nheads, nheads);
	assert_true(r.in_head);
}

/* Keep-alive, pipelining, both body framings, a smuggling attempt in each
 * and every optional part of the syntax: the stream split tests cut. */
static const char mixed[] =
    "\r\nGET /a HTTP/1.1\r\nHost: one.example\r\nAccept: */*\r\n\r\n"
    "POST /form HTTP/1.1\r\nHost: one.example:8080\r\n"
    "Content-Length: 47\r\n\r\n"
    "GET /x HTTP/1.1\r\nHost: evil\r\n\r\nGET /y HTTP/1.1\r"
    "\r\n"
    "PUT /up HTTP/1.1\r\ntransfer-encoding:  Chunked \r\n"
    "Host: [2001:db8::1]\r\n\r\n"
    "1f;name=\"v;x\"\r\nGET /x HTTP/1.1\r\nHost: evil\r\n\r\n\r\n"
    "3\r\nabc\r\n"
    "0;last\r\nX-Trailer: GET /x HTTP/1.1\r\nHost: evil\r\n\r\n"
    "OPTIONS * HTTP/1.0\r\n\r\n"
    "GET http://Two.Example/p?q HTTP/1.1\r\nHost: two.example:80\r\n\r\n"
    "GET /half HTTP/1.1\r\nHost: thr";

static void
assert_mixed(const struct result *r)
{
	assert_null(r->error);
	assert_int_equal(r->nheads, 5);
	assert_head(r, 0, "GET", "one.example", "/a");
	assert_head(r, 1, "POST", "one.example", "/form");
	assert_head(r, 2, "PUT", "2001:db8::1", "/up");
	assert_head(r, 3, "OPTIONS", "", "*");
	assert_head(r, 4, "GET", "two.example", "/p?q");
	assert_false(r->heads[3].absolute);
	assert_true(r->heads[4].absolute);
	assert_true(r->in_head);
}

static void
test_simple_get(void **state)
{
	static const char req[] = "GET /index.html?x=1 HTTP/1.1\r\n"
	    "Host: www.Example.com\r\nUser-Agent: curl/7.88\r\n"
	    "Accept: */*\r\n\r\n";
	struct nfq_http_head head;
	const char *error = "unset";
	size_t used = 0;

	(void)state;
	nfq_http_init(&stream);
	assert_false(nfq_http_in_head(&stream));
	assert_int_equal(nfq_http_feed(&stream, (const uint8_t *)req,
	    sizeof(req) - 1, &used, &head, &error), NFQ_HTTP_HEAD);
	assert_int_equal(used, sizeof(req) - 1);
	assert_null(error);
	assert_string_equal(head.method, "GET");
	assert_string_equal(head.host, "www.Example.com");
	assert_string_equal(head.path, "/index.html?x=1");
	assert_false(head.absolute);
	assert_false(nfq_http_in_head(&stream));

	/* Nothing left: an empty feed consumes nothing and asks for more. */
	assert_int_equal(nfq_http_feed(&stream, (const uint8_t *)req, 0,
	    &used, &head, &error), NFQ_HTTP_NEED_MORE);
	assert_int_equal(used, 0);
}

static void
test_split_every_boundary(void **state)
{
	static const char req[] = "GET /p HTTP/1.1\r\nHost: a.example\r\n"
	    "Content-Length: 3\r\n\r\nabc"
	    "POST /q HTTP/1.1\r\nHost: b.example\r\n"
	    "Transfer-Encoding: chunked\r\n\r\n"
	    "3;x\r\nabc\r\n0\r\nT: v\r\n\r\n";
	struct result whole, cut;
	size_t k, off, len = sizeof(req) - 1;

	(void)state;
	run(req, len, WHOLE, 0, &whole);
	assert_null(whole.error);
	assert_int_equal(whole.nheads, 2);
	assert_head(&whole, 0, "GET", "a.example", "/p");
	assert_head(&whole, 1, "POST", "b.example", "/q");
	assert_false(whole.in_head);
	for (k = 1; k < len; k++) {
		memset(&cut, 0, sizeof(cut));
		nfq_http_init(&stream);
		off = 0;
		assert_int_equal(feed(&cut, (const uint8_t *)req, k, &off) ==
		    NFQ_HTTP_MALFORMED, false);
		feed(&cut, (const uint8_t *)req + k, len - k, &off);
		assert_int_equal(off, len);
		assert_same_result(&whole, &cut);
	}
}

static void
test_split_pieces_same_heads(void **state)
{
	struct result whole, piece;
	unsigned seed;
	size_t k;

	(void)state;
	run(mixed, sizeof(mixed) - 1, WHOLE, 0, &whole);
	assert_mixed(&whole);
	run(mixed, sizeof(mixed) - 1, BYTES, 0, &piece);
	assert_same_result(&whole, &piece);
	for (seed = 1; seed <= 200; seed++) {
		run(mixed, sizeof(mixed) - 1, RANDOM, seed, &piece);
		assert_same_result(&whole, &piece);
	}

	/* Every prefix parses to a prefix of the same heads. */
	for (k = 0; k <= sizeof(mixed) - 1; k++) {
		run(mixed, k, WHOLE, 0, &piece);
		assert_null(piece.error);
		assert_true(piece.nheads <= whole.nheads);
		if (piece.nheads > 0)
			assert_int_equal(piece.ends[piece.nheads - 1],
			    whole.ends[piece.nheads - 1]);
	}
}

static void
test_pipelined(void **state)
{
	static const char reqs[] =
	    "GET /1 HTTP/1.1\r\nHost: a.example\r\n\r\n"
	    "HEAD /2 HTTP/1.1\r\nHost: b.example\r\n\r\n"
	    "DELETE /3 HTTP/1.0\r\nHost: c.example\r\n\r\n";
	struct result r;

	(void)state;
	run_str(reqs, &r);
	assert_null(r.error);
	assert_int_equal(r.nheads, 3);
	assert_head(&r, 0, "GET", "a.example", "/1");
	assert_head(&r, 1, "HEAD", "b.example", "/2");
	assert_head(&r, 2, "DELETE", "c.example", "/3");
	assert_int_equal(r.ends[0], 36);
	assert_int_equal(r.ends[1], 73);
	assert_int_equal(r.ends[2], sizeof(reqs) - 1);
	assert_false(r.in_head);
}

static void
test_keep_alive(void **state)
{
	static const char *reqs[] = {
		"GET /first HTTP/1.1\r\nHost: a.example\r\n"
		    "Connection: keep-alive\r\n\r\n",
		"POST /second HTTP/1.1\r\nHost: a.example\r\n"
		    "Content-Length: 5\r\n\r\nhello",
		"GET /third HTTP/1.1\r\nHost: b.example\r\n\r\n",
	};
	static const char *paths[] = { "/first", "/second", "/third" };
	struct nfq_http_head head;
	const char *error;
	size_t i, used, len;

	(void)state;
	nfq_http_init(&stream);
	for (i = 0; i < 3; i++) {
		len = strlen(reqs[i]);
		assert_int_equal(nfq_http_feed(&stream,
		    (const uint8_t *)reqs[i], len, &used, &head, &error),
		    NFQ_HTTP_HEAD);
		assert_string_equal(head.path, paths[i]);
		if (used < len) {
			/* The body: consumed silently. */
			assert_int_equal(nfq_http_feed(&stream,
			    (const uint8_t *)reqs[i] + used, len - used,
			    &used, &head, &error), NFQ_HTTP_NEED_MORE);
			assert_int_equal(used, 5);
		}
		assert_false(nfq_http_in_head(&stream));
	}
	assert_string_equal(head.host, "b.example");
}

static void
test_content_length_body_hides_nothing(void **state)
{
	static const char s[] =
	    "POST /upload HTTP/1.1\r\nHost: good.example\r\n"
	    "Content-Length: 47\r\n\r\n"
	    "GET /x HTTP/1.1\r\nHost: evil\r\n\r\n0123456789abcdef"
	    "GET /next HTTP/1.1\r\nHost: good.example\r\n\r\n";
	struct result r, p;
	unsigned seed;

	(void)state;
	run_str(s, &r);
	assert_null(r.error);
	assert_int_equal(r.nheads, 2);
	assert_head(&r, 0, "POST", "good.example", "/upload");
	assert_head(&r, 1, "GET", "good.example", "/next");
	for (seed = 1; seed <= 50; seed++) {
		run(s, sizeof(s) - 1, RANDOM, seed, &p);
		assert_same_result(&r, &p);
	}

	/* The body split across feeds: each piece consumed whole. */
	{
		struct nfq_http_head head;
		const char *error;
		size_t used, hlen = (size_t)(strstr(s, "\r\n\r\n") - s) + 4;

		nfq_http_init(&stream);
		assert_int_equal(nfq_http_feed(&stream, (const uint8_t *)s,
		    hlen + 10, &used, &head, &error), NFQ_HTTP_HEAD);
		assert_int_equal(used, hlen);
		assert_int_equal(nfq_http_feed(&stream,
		    (const uint8_t *)s + hlen, 10, &used, &head, &error),
		    NFQ_HTTP_NEED_MORE);
		assert_int_equal(used, 10);
		assert_false(nfq_http_in_head(&stream));
		assert_int_equal(nfq_http_feed(&stream,
		    (const uint8_t *)s + hlen + 10, 37, &used, &head,
		    &error), NFQ_HTTP_NEED_MORE);
		assert_int_equal(used, 37);
		assert_false(nfq_http_in_head(&stream));
		/* Body over: the next byte starts a head. */
		assert_int_equal(nfq_http_feed(&stream,
		    (const uint8_t *)s + hlen + 47, 1, &used, &head, &error),
		    NFQ_HTTP_NEED_MORE);
		assert_true(nfq_http_in_head(&stream));
	}
}

static void
test_chunked_body_hides_nothing(void **state)
{
	static const char s[] =
	    "POST /c HTTP/1.1\r\nHost: good.example\r\n"
	    "Transfer-Encoding: chunked\r\n\r\n"
	    "1F;ext=1;q=\"a b\"\r\n"
	    "GET /x HTTP/1.1\r\nHost: evil\r\n\r\n\r\n"
	    "000010\r\nGET /x HTTP/1.1\r\r\n"
	    "0\r\n"
	    "Trailer-One: GET /x HTTP/1.1\r\n"
	    "Host: evil\r\n"
	    "\r\n"
	    "GET /after HTTP/1.1\r\nHost: good.example\r\n\r\n";
	struct result r, p;
	unsigned seed;

	(void)state;
	run_str(s, &r);
	assert_null(r.error);
	assert_int_equal(r.nheads, 2);
	assert_head(&r, 0, "POST", "good.example", "/c");
	assert_head(&r, 1, "GET", "good.example", "/after");
	run(s, sizeof(s) - 1, BYTES, 0, &p);
	assert_same_result(&r, &p);
	for (seed = 1; seed <= 50; seed++) {
		run(s, sizeof(s) - 1, RANDOM, seed, &p);
		assert_same_result(&r, &p);
	}

	/* A last chunk without trailers, and a body cut off in the data. */
	assert_heads("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked"
	    "\r\n\r\n2\r\nhi\r\n0\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", 2);
	run_str("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked"
	    "\r\n\r\nff\r\nGET / HTTP/1.1\r\nHost: evil\r\n\r\n", &r);
	assert_null(r.error);
	assert_int_equal(r.nheads, 1);
	assert_false(r.in_head);
}

static void
test_chunked_malformed(void **state)
{
	static const char te[] = "POST / HTTP/1.1\r\nHost: a\r\n"
	    "Transfer-Encoding: chunked\r\n\r\n";
#define CASE(body, error)	{ body, sizeof(body) - 1, error }
	static const struct {
		const char	*body;
		size_t		 len;
		const char	*error;
	} cases[] = {
		CASE("\r\n", "bad chunk size"),
		CASE("g\r\n", "bad chunk size"),
		CASE(";x\r\n", "bad chunk size"),
		CASE("-1\r\n", "bad chunk size"),
		CASE("0x10\r\n", "bad chunk size"),
		CASE("1 \r\n", "bad chunk size"),
		CASE("1 ;x\r\n", "bad chunk size"),
		CASE("1\n", "LF without CR"),
		CASE("1\rx", "bare CR"),
		CASE("1;a\nb", "LF without CR"),
		CASE("1;a\x01\r\n", "bad chunk extension"),
		CASE("1;a\0\r\n", "NUL byte"),
		CASE("\0", "NUL byte"),
		CASE("3\r\nabcd\r\n", "missing CRLF after chunk data"),
		CASE("3\r\nabc\rx", "missing CRLF after chunk data"),
		CASE("3\r\nabc\n", "missing CRLF after chunk data"),
		CASE("12345678901234567\r\n", "chunk size too large"),
		CASE("00000000000000001\r\n", "chunk size too large"),
		CASE("4000000000000001\r\n", "chunk size too large"),
		CASE("ffffffffffffffff\r\n", "chunk size too large"),
		CASE("0\r\n x: y\r\n\r\n", "obs-fold trailer line"),
		CASE("0\r\nx y: z\r\n\r\n", "bad trailer field"),
		CASE("0\r\nx: \x7f\r\n\r\n", "bad trailer field"),
		CASE("0\r\nx: \0\r\n\r\n", "NUL byte"),
		CASE("0\r\nx: y\n\r\n", "LF without CR"),
		CASE("0\r\n\rx", "bare CR"),
		CASE("0\r\n\n", "LF without CR"),
	};
#undef CASE
	char buf[256];
	size_t i, n;
	struct result r;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		n = sizeof(te) - 1;
		memcpy(buf, te, n);
		memcpy(buf + n, cases[i].body, cases[i].len);
		n += cases[i].len;
		run(buf, n, WHOLE, 0, &r);
		if (r.error == NULL || strcmp(r.error, cases[i].error) != 0)
			print_message("chunked case %zu\n", i);
		assert_int_equal(r.nheads, 1);
		assert_int_equal(r.last, NFQ_HTTP_MALFORMED);
		assert_string_equal(r.error, cases[i].error);
		assert_true(r.in_head);
	}

	/* The largest chunk size taken: 2^62. */
	n = (size_t)snprintf(buf, sizeof(buf), "%s4000000000000000\r\nab", te);
	run(buf, n, WHOLE, 0, &r);
	assert_null(r.error);
	assert_int_equal(r.nheads, 1);
}

static void
test_chunk_line_and_trailer_bounds(void **state)
{
	static char buf[3 * NFQ_HTTP_HEAD_MAX];
	static const char te[] = "POST / HTTP/1.1\r\nHost: a\r\n"
	    "Transfer-Encoding: chunked\r\n\r\n";
	size_t n;
	struct result r;

	(void)state;
	/* A chunk line of 1024 bytes before its CRLF is taken, one more is
	 * not. */
	n = (size_t)snprintf(buf, sizeof(buf), "%s1;", te);
	memset(buf + n, 'e', CHUNK_LINE - 2);
	memcpy(buf + n + CHUNK_LINE - 2, "\r\nx\r\n0\r\n\r\n", 10);
	run(buf, n + CHUNK_LINE - 2 + 10, WHOLE, 0, &r);
	assert_null(r.error);
	assert_false(r.in_head);
	memset(buf + n, 'e', CHUNK_LINE - 1);
	memcpy(buf + n + CHUNK_LINE - 1, "\r\nx\r\n0\r\n\r\n", 10);
	run(buf, n + CHUNK_LINE - 1 + 10, WHOLE, 0, &r);
	assert_string_equal(r.error, "chunk line too long");
	assert_int_equal(r.error_at, n + CHUNK_LINE - 1);

	/* Trailers: NFQ_HTTP_HEAD_MAX bytes with the final CRLF. */
	n = (size_t)snprintf(buf, sizeof(buf), "%s0\r\nx: ", te);
	memset(buf + n, 'v', NFQ_HTTP_HEAD_MAX - 7);
	memcpy(buf + n + NFQ_HTTP_HEAD_MAX - 7, "\r\n\r\n", 4);
	run(buf, n + NFQ_HTTP_HEAD_MAX - 3, WHOLE, 0, &r);
	assert_null(r.error);
	assert_false(r.in_head);
	memset(buf + n, 'v', NFQ_HTTP_HEAD_MAX - 6);
	memcpy(buf + n + NFQ_HTTP_HEAD_MAX - 6, "\r\n\r\n", 4);
	run(buf, n + NFQ_HTTP_HEAD_MAX - 2, WHOLE, 0, &r);
	assert_string_equal(r.error, "trailer section too long");
	assert_int_equal(r.error_at, n + NFQ_HTTP_HEAD_MAX - 2);
}

static void
test_absolute_form(void **state)
{
	struct result r;

	(void)state;
	run_str("GET http://Api.Example.com:8080/v1?x HTTP/1.1\r\n"
	    "Host: api.example.COM\r\n\r\n", &r);
	assert_null(r.error);
	assert_head(&r, 0, "GET", "api.example.COM", "/v1?x");
	assert_true(r.heads[0].absolute);

	run_str("GET HTTP://a.example HTTP/1.1\r\nHost: a.example:81\r\n\r\n",
	    &r);
	assert_null(r.error);
	assert_head(&r, 0, "GET", "a.example", "/");
	run_str("GET http://a.example?q=1 HTTP/1.1\r\nHost: a.example\r\n\r\n",
	    &r);
	assert_head(&r, 0, "GET", "a.example", "/?q=1");
	run_str("GET http://[::1]:80/ HTTP/1.1\r\nHost: [0::1]\r\n\r\n", &r);
	assert_string_equal(r.error,
	    "absolute-form target host differs from Host");
	run_str("GET http://[::1]:80/ HTTP/1.1\r\nHost: [::1]\r\n\r\n", &r);
	assert_head(&r, 0, "GET", "::1", "/");

	assert_malformed("GET http://evil.example/ HTTP/1.1\r\n"
	    "Host: good.example\r\n\r\n", 0,
	    "absolute-form target host differs from Host");
	assert_malformed("GET http://good.example.evil/ HTTP/1.1\r\n"
	    "Host: good.example\r\n\r\n", 0,
	    "absolute-form target host differs from Host");
	assert_malformed("GET http://evil.example/ HTTP/1.0\r\n\r\n", 0,
	    "absolute-form target host differs from Host");
	assert_malformed("GET http://good.example@evil.example/ HTTP/1.1\r\n"
	    "Host: good.example\r\n\r\n", 0, "bad request target host");
	assert_malformed("GET http:///x HTTP/1.1\r\nHost: a\r\n\r\n", 0,
	    "bad request target host");
	assert_malformed("GET https://a/ HTTP/1.1\r\nHost: a\r\n\r\n", 0,
	    "bad request target");
	assert_malformed("GET a.example:80 HTTP/1.1\r\nHost: a\r\n\r\n", 0,
	    "bad request target");
	assert_malformed("GET http://a/#f HTTP/1.1\r\nHost: a\r\n\r\n", 0,
	    "bad request target");
}

static void
test_host_header(void **state)
{
	struct result r;
	static char longname[400];
	char req[600];

	(void)state;
	assert_malformed("GET / HTTP/1.1\r\nHost: a.example\r\n"
	    "Host: a.example\r\n\r\n", 0, "two Host headers");
	assert_malformed("GET / HTTP/1.1\r\nHost: a.example\r\nX: 1\r\n"
	    "hOST: b.example\r\n\r\n", 0, "two Host headers");
	assert_malformed("GET / HTTP/1.1\r\nX: 1\r\n\r\n", 0,
	    "HTTP/1.1 request without Host");
	run_str("GET / HTTP/1.0\r\nX: 1\r\n\r\n", &r);
	assert_null(r.error);
	assert_head(&r, 0, "GET", "", "/");

	run_str("GET / HTTP/1.1\r\nHost:\ta.example:8080 \t\r\n\r\n", &r);
	assert_head(&r, 0, "GET", "a.example", "/");
	run_str("GET / HTTP/1.1\r\nHost: [2001:DB8::a]:443\r\n\r\n", &r);
	assert_head(&r, 0, "GET", "2001:DB8::a", "/");
	run_str("GET / HTTP/1.1\r\nHost: [::ffff:192.0.2.1]\r\n\r\n", &r);
	assert_head(&r, 0, "GET", "::ffff:192.0.2.1", "/");
	run_str("GET / HTTP/1.1\r\nHost: 192.0.2.7:65535\r\n\r\n", &r);
	assert_head(&r, 0, "GET", "192.0.2.7", "/");

	static const char *bad[] = {
		"", ":80", "a.example:", "a.example:65536", "a.example:123456",
		"a.example:8x", "a.example:-1", "a b", "a,b", "a@b", "a%2eb",
		"a\\b", "[::1", "[]", "[::1]x", "[::1]:", "[::g]", "[v1.x]",
		"[fe80::1%25eth0]", "a:1:2", "\xc3\xa9.example", "[::1]:99999",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(req, sizeof(req), "GET / HTTP/1.1\r\nHost: %s\r\n\r\n",
		    bad[i]);
		run_str(req, &r);
		if (r.error == NULL || strcmp(r.error, "bad Host") != 0)
			print_message("host \"%s\"\n", bad[i]);
		assert_malformed(req, 0, "bad Host");
	}

	/* 255 bytes of name are kept whole; 256 are refused, not cut. */
	memset(longname, 'a', 255);
	snprintf(req, sizeof(req), "GET / HTTP/1.1\r\nHost: %s:1\r\n\r\n",
	    longname);
	run_str(req, &r);
	assert_null(r.error);
	assert_string_equal(r.heads[0].host, longname);
	longname[255] = 'a';
	snprintf(req, sizeof(req), "GET / HTTP/1.1\r\nHost: %s\r\n\r\n",
	    longname);
	assert_malformed(req, 0, "bad Host");
}

static void
test_framing_headers(void **state)
{
	struct result r;

	(void)state;
	assert_malformed("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n"
	    "Transfer-Encoding: chunked\r\n\r\n", 0,
	    "both Content-Length and Transfer-Encoding");
	assert_malformed("POST / HTTP/1.1\r\nHost: a\r\n"
	    "Transfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n", 0,
	    "both Content-Length and Transfer-Encoding");
	assert_malformed("POST / HTTP/1.1\r\nHost: a\r\n"
	    "Transfer-Encoding: gzip, chunked\r\n\r\n", 0,
	    "Transfer-Encoding other than chunked");
	assert_malformed("POST / HTTP/1.1\r\nHost: a\r\n"
	    "Transfer-Encoding: gzip\r\n\r\n", 0,
	    "Transfer-Encoding other than chunked");
	assert_malformed("POST / HTTP/1.1\r\nHost: a\r\n"
	    "Transfer-Encoding: chunked, chunked\r\n\r\n", 0,
	    "Transfer-Encoding other than chunked");
	assert_malformed("POST / HTTP/1.1\r\nHost: a\r\n"
	    "Transfer-Encoding:\r\n\r\n", 0,
	    "Transfer-Encoding other than chunked");
	assert_malformed("POST / HTTP/1.1\r\nHost: a\r\n"
	    "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
	    0, "repeated Transfer-Encoding");
	assert_malformed("POST / HTTP/1.0\r\nHost: a\r\n"
	    "Transfer-Encoding: chunked\r\n\r\n", 0,
	    "Transfer-Encoding in HTTP/1.0");

	static const char *bad_cl[] = {
		"12a", "-1", "+1", "", "1 2", "0x10", "1,1",
		"4611686018427387905",
		"99999999999999999999999",
	};
	char req[200];
	for (size_t i = 0; i < sizeof(bad_cl) / sizeof(bad_cl[0]); i++) {
		snprintf(req, sizeof(req), "POST / HTTP/1.1\r\nHost: a\r\n"
		    "Content-Length: %s\r\n\r\n", bad_cl[i]);
		run_str(req, &r);
		if (r.error == NULL || strcmp(r.error, "bad Content-Length"))
			print_message("Content-Length \"%s\"\n", bad_cl[i]);
		assert_malformed(req, 0, "bad Content-Length");
	}
	assert_malformed("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\n"
	    "Content-Length: 2\r\n\r\n", 0, "repeated Content-Length");
	assert_malformed("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\n"
	    "content-length: 1\r\n\r\n", 0, "repeated Content-Length");
	assert_malformed("POST / HTTP/1.1\r\nHost: a\r\nContent_Length: 1\r\n"
	    "\r\n", 0, "ambiguous header name");
	assert_malformed("POST / HTTP/1.1\r\nHost: a\r\n"
	    "transfer_encoding: chunked\r\n\r\n", 0, "ambiguous header name");

	/* Leading zeros, OWS, the bound itself; zero means no body. */
	run_str("POST / HTTP/1.1\r\nHost: a\r\nContent-Length:  007 \r\n\r\n"
	    "1234567GET / HTTP/1.1\r\nHost: b\r\n\r\n", &r);
	assert_null(r.error);
	assert_int_equal(r.nheads, 2);
	assert_string_equal(r.heads[1].host, "b");
	assert_heads("POST / HTTP/1.1\r\nHost: a\r\n"
	    "Content-Length: 4611686018427387904\r\n\r\nbody", 1);
	assert_heads("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n"
	    "GET / HTTP/1.1\r\nHost: b\r\n\r\n", 2);
	/* A GET without framing headers has no body, whatever follows. */
	assert_heads("GET / HTTP/1.1\r\nHost: a\r\n\r\n"
	    "GET / HTTP/1.1\r\nHost: b\r\n\r\n", 2);
}

static void
test_line_syntax(void **state)
{
	(void)state;
	assert_malformed("GET / HTTP/1.1\r\nHost: a\r\nX-A: 1\r\n"
	    " folded\r\n\r\n", 0, "obs-fold header line");
	assert_malformed("GET / HTTP/1.1\r\nHost: a\r\n\tfolded\r\n\r\n", 0,
	    "obs-fold header line");
	assert_malformed("GET / HTTP/1.1\nHost: a\r\n\r\n", 0,
	    "LF without CR");
	assert_malformed("GET / HTTP/1.1\r\nHost: a\n\r\n", 0,
	    "LF without CR");
	assert_malformed("GET / HTTP/1.1\r\nHost: a\r\n\n", 0,
	    "LF without CR");
	assert_malformed("GET / HTTP/1.1\r\nHost\n", 0, "LF without CR");
	assert_malformed("GET / HTTP/1.1\r\nHost: a\rX: b\r\n\r\n", 0,
	    "bare CR");
	assert_malformed("GET / HTTP/1.1\r\nHost: a\r\n\rX", 0, "bare CR");
	assert_malformed("GET / HTTP/1.1\rHost: a\r\n\r\n", 0, "bare CR");
	assert_malformed("GET / HTTP/1.1\r\nHost : a\r\n\r\n", 0,
	    "bad header name");
	assert_malformed("GET / HTTP/1.1\r\n: a\r\n\r\n", 0,
	    "bad header name");
	assert_malformed("GET / HTTP/1.1\r\nNo-colon\r\n\r\n", 0,
	    "bad header name");
	assert_malformed("GET / HTTP/1.1\r\nX: a\x01" "b\r\n\r\n", 0,
	    "bad header value");
	assert_malformed("GET / HTTP/1.1\r\nX: \x7f\r\n\r\n", 0,
	    "bad header value");
	/* obs-text in a value is allowed (RFC 9110 5.5). */
	assert_heads("GET / HTTP/1.1\r\nHost: a\r\nX: caf\xc3\xa9\r\n\r\n", 1);
	assert_heads("GET / HTTP/1.1\r\nHost: a\r\nX:\r\nY:  \r\n\r\n", 1);
}

static void
test_nul(void **state)
{
	static const char put[] =
	    "PUT / HTTP/1.0\r\nContent-Length: 2\r\n\r\n\0\0";
	static const char *cuts[] = {
		"G", "GET", "GET ", "GET /", "GET / HTTP/1.1",
		"GET / HTTP/1.1\r\nHo", "GET / HTTP/1.1\r\nHost: a",
		"GET / HTTP/1.1\r\nHost: a\r\n", "", "\r\n",
	};
	char buf[64];
	struct result r;
	size_t i, n;

	(void)state;
	for (i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
		n = strlen(cuts[i]);
		memcpy(buf, cuts[i], n);
		buf[n] = '\0';
		memcpy(buf + n + 1, "\r\n\r\n", 4);
		run(buf, n + 5, WHOLE, 0, &r);
		assert_int_equal(r.last, NFQ_HTTP_MALFORMED);
		assert_string_equal(r.error, "NUL byte");
		assert_int_equal(r.error_at, n + 1);
	}
	/* In a body a NUL is just data. */
	run(put, sizeof(put) - 1, WHOLE, 0, &r);
	assert_null(r.error);
	assert_int_equal(r.nheads, 1);
}

static void
test_head_bound(void **state)
{
	static char buf[NFQ_HTTP_HEAD_MAX + 64];
	static const char start[] = "GET / HTTP/1.1\r\nHost: a\r\nX: ";
	size_t fill;
	struct result r;

	(void)state;
	/* Exactly NFQ_HTTP_HEAD_MAX bytes with the final CRLF CRLF. */
	fill = NFQ_HTTP_HEAD_MAX - (sizeof(start) - 1) - 4;
	memcpy(buf, start, sizeof(start) - 1);
	memset(buf + sizeof(start) - 1, 'v', fill);
	memcpy(buf + sizeof(start) - 1 + fill, "\r\n\r\n", 4);
	run(buf, NFQ_HTTP_HEAD_MAX, WHOLE, 0, &r);
	assert_null(r.error);
	assert_int_equal(r.nheads, 1);
	assert_int_equal(r.ends[0], NFQ_HTTP_HEAD_MAX);

	/* 8193 bytes: refused at the byte over the bound. */
	memset(buf + sizeof(start) - 1, 'v', fill + 1);
	memcpy(buf + sizeof(start) - 1 + fill + 1, "\r\n\r\n", 4);
	run(buf, NFQ_HTTP_HEAD_MAX + 1, WHOLE, 0, &r);
	assert_int_equal(r.last, NFQ_HTTP_MALFORMED);
	assert_string_equal(r.error, "request head too long");
	assert_int_equal(r.error_at, NFQ_HTTP_HEAD_MAX + 1);
	run(buf, NFQ_HTTP_HEAD_MAX + 1, BYTES, 0, &r);
	assert_string_equal(r.error, "request head too long");

	/* A leading empty line does not count; the request line does. */
	buf[0] = '\r';
	buf[1] = '\n';
	memcpy(buf + 2, start, sizeof(start) - 1);
	memset(buf + 2 + sizeof(start) - 1, 'v', fill);
	memcpy(buf + 2 + sizeof(start) - 1 + fill, "\r\n\r\n", 4);
	run(buf, NFQ_HTTP_HEAD_MAX + 2, WHOLE, 0, &r);
	assert_null(r.error);
	assert_int_equal(r.nheads, 1);
	memcpy(buf, "GET /", 5);
	memset(buf + 5, 'p', NFQ_HTTP_HEAD_MAX);
	run(buf, NFQ_HTTP_HEAD_MAX + 5, WHOLE, 0, &r);
	assert_string_equal(r.error, "request head too long");
}

static void
test_request_line(void **state)
{
	static char buf[600];
	struct result r;

	(void)state;
	assert_malformed("CONNECT a.example:443 HTTP/1.1\r\n"
	    "Host: a.example:443\r\n\r\n", 0, "CONNECT not allowed");
	assert_malformed("connect a.example:443 HTTP/1.1\r\n"
	    "Host: a.example\r\n\r\n", 0, "CONNECT not allowed");
	run_str("OPTIONS * HTTP/1.1\r\nHost: a.example\r\n\r\n", &r);
	assert_null(r.error);
	assert_head(&r, 0, "OPTIONS", "a.example", "*");
	assert_malformed("GET * HTTP/1.1\r\nHost: a\r\n\r\n", 0,
	    "asterisk-form target without OPTIONS");
	assert_malformed("options * HTTP/1.1\r\nHost: a\r\n\r\n", 0,
	    "asterisk-form target without OPTIONS");

	assert_malformed("GET  / HTTP/1.1\r\n", 0, "bad request target");
	assert_malformed(" GET / HTTP/1.1\r\n", 0, "bad method");
	assert_malformed("GET /  HTTP/1.1\r\n", 0, "bad HTTP version");
	assert_malformed("GET / HTTP/1.1 \r\n", 0, "bad HTTP version");
	assert_malformed("GET /\tHTTP/1.1\r\n", 0, "bad request target");
	assert_malformed("GET / HTTP/1.2\r\n", 0, "bad HTTP version");
	assert_malformed("GET / HTTP/2.0\r\n", 0, "bad HTTP version");
	assert_malformed("GET / http/1.1\r\n", 0, "bad HTTP version");
	assert_malformed("GET / HTTP/1.10\r\n", 0, "bad HTTP version");
	assert_malformed("GET / HTTP/1.1\n", 0, "LF without CR");
	assert_malformed("GET /\r\n", 0, "bad request line");
	assert_malformed("GET\r\n", 0, "bad request line");
	assert_malformed("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 0,
	    "bad HTTP version");
	assert_malformed("G(T / HTTP/1.1\r\n", 0, "bad method");
	assert_malformed("\x16\x03\x01\x02\x00\x01", 0, "bad method");
	assert_malformed("GET /a\x7f HTTP/1.1\r\n", 0, "bad request target");
	assert_malformed("GET /\xc3\xa9 HTTP/1.1\r\n", 0, "bad request target");
	assert_malformed("GET x HTTP/1.1\r\nHost: a\r\n\r\n", 0,
	    "bad request target");
	assert_malformed("ABCDEFGHIJKLMNOP / HTTP/1.1\r\n", 0,
	    "method too long");
	run_str("ABCDEFGHIJKLMNO / HTTP/1.1\r\nHost: a\r\n\r\n", &r);
	assert_head(&r, 0, "ABCDEFGHIJKLMNO", "a", "/");
	run_str("M-SEARCH /~x!$&'()*+,;=:@%20?a=[1] HTTP/1.1\r\n"
	    "Host: a\r\n\r\n", &r);
	assert_head(&r, 0, "M-SEARCH", "a", "/~x!$&'()*+,;=:@%20?a=[1]");

	/* The path is cut to its buffer, NUL-terminated. */
	memcpy(buf, "GET /", 5);
	memset(buf + 5, 'p', 400);
	strcpy(buf + 405, " HTTP/1.1\r\nHost: a\r\n\r\n");
	run_str(buf, &r);
	assert_null(r.error);
	assert_int_equal(strlen(r.heads[0].path), 255);
	assert_int_equal(r.heads[0].path[0], '/');
	assert_int_equal(r.heads[0].path[254], 'p');
}

static void
test_leading_empty_line(void **state)
{
	struct result r;

	(void)state;
	run_str("\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", &r);
	assert_null(r.error);
	assert_head(&r, 0, "GET", "a", "/");
	assert_int_equal(r.ends[0], 29);
	/* After a body too (what old clients sent after a POST). */
	assert_heads("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\n\r\nx"
	    "\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", 2);
	assert_malformed("\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", 0,
	    "more than one empty line before a request");
	assert_malformed("\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", 0,
	    "LF without CR");
	assert_malformed("\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n\r\n\r\n", 1,
	    "more than one empty line before a request");
	assert_malformed("\rGET / HTTP/1.1\r\n", 0, "bare CR");
}

static void
test_in_head_flag(void **state)
{
	static const char s[] =
	    "\r\nPOST / HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nxy"
	    "GET / HTTP/1.1\r\nHost: a\r\n\r\n";
	/* in_head after each byte of s, fed one at a time. */
	const size_t lead = 2, head1 = 47, body = 2, head2 = 27;
	struct nfq_http_head head;
	const char *error;
	size_t i, used;
	enum nfq_http_status st;
	bool expect;

	(void)state;
	assert_int_equal(sizeof(s) - 1, lead + head1 + body + head2);
	nfq_http_init(&stream);
	assert_false(nfq_http_in_head(&stream));
	for (i = 0; i < sizeof(s) - 1; i++) {
		st = nfq_http_feed(&stream, (const uint8_t *)s + i, 1, &used,
		    &head, &error);
		assert_int_equal(used, 1);
		if (i == lead + head1 - 1 || i == sizeof(s) - 2)
			assert_int_equal(st, NFQ_HTTP_HEAD);
		else
			assert_int_equal(st, NFQ_HTTP_NEED_MORE);
		/* From the first byte of a request line to its end. */
		expect = (i >= lead && i < lead + head1 - 1) ||
		    (i >= lead + head1 + body && i < sizeof(s) - 2);
		assert_int_equal(nfq_http_in_head(&stream), expect);
	}

	/* A dead stream stays dead and counts as inside a head. */
	assert_int_equal(nfq_http_feed(&stream, (const uint8_t *)"G\x01", 2,
	    &used, &head, &error), NFQ_HTTP_MALFORMED);
	assert_int_equal(used, 2);
	assert_string_equal(error, "bad method");
	assert_true(nfq_http_in_head(&stream));
	assert_int_equal(nfq_http_feed(&stream, (const uint8_t *)s, 10, &used,
	    &head, &error), NFQ_HTTP_MALFORMED);
	assert_int_equal(used, 0);
	assert_string_equal(error, "bad method");
}

/* framing alone: a feed that stops where body or chunk data begins, and
 * the opaque count that says how much of it follows */
static void
test_feed_framing(void **state)
{
	static const char cl[] =
	    "POST /u HTTP/1.1\r\nHost: a.test\r\nContent-Length: 5\r\n\r\n"
	    "hello"
	    "GET /n HTTP/1.1\r\nHost: a.test\r\n\r\n";
	static const char ch[] =
	    "POST /c HTTP/1.1\r\nHost: a.test\r\n"
	    "Transfer-Encoding: chunked\r\n\r\n"
	    "4\r\nwxyz\r\n0\r\n\r\n"
	    "GET /m HTTP/1.1\r\nHost: a.test\r\n\r\n";
	struct nfq_http_head head;
	const char *err;
	size_t used, hl, off;

	(void)state;
	nfq_http_init(&stream);
	hl = strlen(cl) - 5 - strlen("GET /n HTTP/1.1\r\nHost: a.test\r\n\r\n");
	assert_int_equal(nfq_http_opaque(&stream), 0);
	assert_int_equal(nfq_http_feed_framing(&stream, (const uint8_t *)cl,
	    strlen(cl), &used, &head, &err), NFQ_HTTP_HEAD);
	assert_int_equal(used, hl);
	assert_string_equal(head.path, "/u");
	/* at the body: nothing more is framing */
	assert_int_equal(nfq_http_opaque(&stream), 5);
	assert_int_equal(nfq_http_feed_framing(&stream,
	    (const uint8_t *)cl + hl, strlen(cl) - hl, &used, &head, &err),
	    NFQ_HTTP_NEED_MORE);
	assert_int_equal(used, 0);
	assert_int_equal(nfq_http_feed(&stream, (const uint8_t *)cl + hl, 5,
	    &used, &head, &err), NFQ_HTTP_NEED_MORE);
	assert_int_equal(used, 5);
	assert_int_equal(nfq_http_opaque(&stream), 0);
	assert_int_equal(nfq_http_feed_framing(&stream,
	    (const uint8_t *)cl + hl + 5, strlen(cl) - hl - 5, &used, &head,
	    &err), NFQ_HTTP_HEAD);
	assert_string_equal(head.path, "/n");

	/* chunked: the chunk line is framing, its data is not, and the CRLF
	 * after it, the last chunk and the next head are again */
	nfq_http_init(&stream);
	assert_int_equal(nfq_http_feed_framing(&stream, (const uint8_t *)ch,
	    strlen(ch), &used, &head, &err), NFQ_HTTP_HEAD);
	off = used;
	assert_int_equal(nfq_http_feed_framing(&stream,
	    (const uint8_t *)ch + off, strlen(ch) - off, &used, &head, &err),
	    NFQ_HTTP_NEED_MORE);
	assert_int_equal(used, 3);			/* "4\r\n" */
	off += used;
	assert_int_equal(nfq_http_opaque(&stream), 4);
	assert_int_equal(nfq_http_feed(&stream, (const uint8_t *)ch + off, 4,
	    &used, &head, &err), NFQ_HTTP_NEED_MORE);
	off += used;
	assert_int_equal(nfq_http_opaque(&stream), 0);
	assert_int_equal(nfq_http_feed_framing(&stream,
	    (const uint8_t *)ch + off, strlen(ch) - off, &used, &head, &err),
	    NFQ_HTTP_HEAD);
	assert_string_equal(head.path, "/m");
	assert_int_equal(off + used, strlen(ch));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_simple_get),
		cmocka_unit_test(test_split_every_boundary),
		cmocka_unit_test(test_split_pieces_same_heads),
		cmocka_unit_test(test_pipelined),
		cmocka_unit_test(test_keep_alive),
		cmocka_unit_test(test_content_length_body_hides_nothing),
		cmocka_unit_test(test_chunked_body_hides_nothing),
		cmocka_unit_test(test_chunked_malformed),
		cmocka_unit_test(test_chunk_line_and_trailer_bounds),
		cmocka_unit_test(test_absolute_form),
		cmocka_unit_test(test_host_header),
		cmocka_unit_test(test_framing_headers),
		cmocka_unit_test(test_line_syntax),
		cmocka_unit_test(test_nul),
		cmocka_unit_test(test_head_bound),
		cmocka_unit_test(test_request_line),
		cmocka_unit_test(test_leading_empty_line),
		cmocka_unit_test(test_in_head_flag),
		cmocka_unit_test(test_feed_framing),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
