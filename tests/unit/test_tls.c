/* test_tls.c: the ClientHello parser, on hellos built byte by byte. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "nfq/nfq.h"

/* Bytes under construction, written the way a test reads them. */
struct msg {
	uint8_t	b[20000];
	size_t	n;
};

static void
put8(struct msg *m, unsigned v)
{
	assert_true(m->n < sizeof(m->b));
	m->b[m->n++] = (uint8_t)v;
}

static void
put16(struct msg *m, unsigned v)
{
	put8(m, v >> 8);
	put8(m, v & 0xff);
}

static void
put_bytes(struct msg *m, const void *p, size_t n)
{
	assert_true(n <= sizeof(m->b) - m->n);
	memcpy(m->b + m->n, p, n);
	m->n += n;
}

static void
put_fill(struct msg *m, unsigned c, size_t n)
{
	while (n-- > 0)
		put8(m, c);
}

static void
set16(struct msg *m, size_t at, unsigned v)
{
	m->b[at] = (uint8_t)(v >> 8);
	m->b[at + 1] = (uint8_t)v;
}

static unsigned
get16_at(const struct msg *m, size_t at)
{
	return (unsigned)m->b[at] << 8 | m->b[at + 1];
}

/* A 2-byte length to be filled by close16 once its contents are written. */
static size_t
open16(struct msg *m)
{
	size_t at = m->n;

	put16(m, 0);
	return at;
}

static void
close16(struct msg *m, size_t at)
{
	set16(m, at, (unsigned)(m->n - at - 2));
}

/* An extension's type and length; close16 the returned offset. */
static size_t
ext_open(struct msg *m, unsigned type)
{
	put16(m, type);
	return open16(m);
}

static void
ext_sni(struct msg *m, const char *name)
{
	size_t ext = ext_open(m, 0), list = open16(m);

	put8(m, 0);
	put16(m, (unsigned)strlen(name));
	put_bytes(m, name, strlen(name));
	close16(m, list);
	close16(m, ext);
}

/* names: NULL-terminated */
static void
ext_alpn(struct msg *m, const char *const *names)
{
	size_t ext = ext_open(m, 16), list = open16(m);

	for (; *names != NULL; names++) {
		put8(m, (unsigned)strlen(*names));
		put_bytes(m, *names, strlen(*names));
	}
	close16(m, list);
	close16(m, ext);
}

static void
ext_versions(struct msg *m, const unsigned *v, size_t n)
{
	size_t ext = ext_open(m, 43), i;

	put8(m, (unsigned)(2 * n));
	for (i = 0; i < n; i++)
		put16(m, v[i]);
	close16(m, ext);
}

static void
ext_empty(struct msg *m, unsigned type)
{
	put16(m, type);
	put16(m, 0);
}

/* legacy_version up to compression methods, as openssl 3.0 sends them
 * (session id 32 bytes for middlebox compatibility). */
static void
put_head(struct msg *m, bool grease)
{
	static const unsigned suites[] = { 0x1302, 0x1303, 0x1301, 0xc02c,
	    0xc030, 0x009f, 0xcca9, 0xcca8, 0xccaa, 0xc02b, 0xc02f, 0x009e,
	    0x00ff };
	size_t at, i;

	put16(m, 0x0303);
	for (i = 0; i < 32; i++)
		put8(m, (unsigned)(i * 37 + 11));	/* random */
	put8(m, 32);
	for (i = 0; i < 32; i++)
		put8(m, (unsigned)(i * 53 + 5));	/* session id */
	at = open16(m);
	if (grease)
		put16(m, 0x3a3a);
	for (i = 0; i < sizeof(suites) / sizeof(suites[0]); i++)
		put16(m, suites[i]);
	close16(m, at);
	put8(m, 1);
	put8(m, 0);
}

/* The extensions of an openssl 3.0 hello that the parser only skips. */
static void
ext_openssl_rest(struct msg *m, bool grease)
{
	static const unsigned groups[] = { 0x001d, 0x0017, 0x001e, 0x0019,
	    0x0018 };
	static const unsigned sigalgs[] = { 0x0403, 0x0503, 0x0603, 0x0807,
	    0x0808, 0x0804, 0x0805, 0x0806, 0x0401, 0x0501, 0x0601 };
	size_t ext, list, i;

	ext = ext_open(m, 0x000b);		/* ec_point_formats */
	put8(m, 3);
	put8(m, 0);
	put8(m, 1);
	put8(m, 2);
	close16(m, ext);
	ext = ext_open(m, 0x000a);		/* supported_groups */
	list = open16(m);
	if (grease)
		put16(m, 0x9a9a);
	for (i = 0; i < sizeof(groups) / sizeof(groups[0]); i++)
		put16(m, groups[i]);
	close16(m, list);
	close16(m, ext);
	ext_empty(m, 0x0023);			/* session_ticket */
	ext_empty(m, 0x0016);			/* encrypt_then_mac */
	ext_empty(m, 0x0017);			/* extended_master_secret */
	ext = ext_open(m, 0x000d);		/* signature_algorithms */
	list = open16(m);
	for (i = 0; i < sizeof(sigalgs) / sizeof(sigalgs[0]); i++)
		put16(m, sigalgs[i]);
	close16(m, list);
	close16(m, ext);
	ext = ext_open(m, 0x002d);		/* psk_key_exchange_modes */
	put8(m, 1);
	put8(m, 1);
	close16(m, ext);
	ext = ext_open(m, 0x0033);		/* key_share: x25519 */
	list = open16(m);
	put16(m, 0x001d);
	put16(m, 32);
	put_fill(m, 0x5c, 32);
	close16(m, list);
	close16(m, ext);
}

/* What a standard test hello holds. */
struct spec {
	const char	*sni;		/* NULL: no server_name */
	bool		 alpn;		/* h2, http/1.1 */
	bool		 grease;	/* GREASE values as Chrome sends them */
	unsigned	 ech;		/* extension type, 0 for none */
};

static const char *const alpn_h2_http11[] = { "h2", "http/1.1", NULL };

/* The hello's body (after the handshake header), curl/openssl-like. */
static void
build_body(struct msg *m, const struct spec *s)
{
	static const unsigned versions[] = { 0x0304, 0x0303 };
	static const unsigned grease_versions[] = { 0x6a6a, 0x0304, 0x0303 };
	size_t exts, ext;

	m->n = 0;
	put_head(m, s->grease);
	exts = open16(m);
	if (s->grease)
		ext_empty(m, 0x2a2a);
	if (s->sni != NULL)
		ext_sni(m, s->sni);
	if (s->alpn)
		ext_alpn(m, alpn_h2_http11);
	if (s->grease)
		ext_versions(m, grease_versions, 3);
	else
		ext_versions(m, versions, 2);
	ext_openssl_rest(m, s->grease);
	if (s->ech != 0) {
		ext = ext_open(m, s->ech);
		put8(m, 0);			/* outer */
		put16(m, 0x0001);		/* HKDF-SHA256 */
		put16(m, 0x0001);		/* AES-128-GCM */
		put8(m, 0x42);			/* config id */
		put16(m, 32);
		put_fill(m, 0xe1, 32);		/* enc */
		put16(m, 48);
		put_fill(m, 0xe2, 48);		/* payload */
		close16(m, ext);
	}
	if (s->grease) {
		ext = ext_open(m, 0xbaba);
		put8(m, 0);
		close16(m, ext);
	}
	close16(m, exts);
}

/*
 * The handshake message (type, 24-bit length, body) in records whose
 * payload sizes are given in sizes[0 .. nsizes); the last record takes
 * whatever is left.
 */
static void
wrap_sizes(struct msg *out, const struct msg *body, unsigned hs_type,
    const size_t *sizes, size_t nsizes)
{
	static struct msg hs;
	size_t done = 0, i, n;

	hs.n = 0;
	put8(&hs, hs_type);
	put8(&hs, (unsigned)(body->n >> 16));
	put16(&hs, (unsigned)(body->n & 0xffff));
	put_bytes(&hs, body->b, body->n);
	out->n = 0;
	for (i = 0; i < nsizes && done < hs.n; i++) {
		n = i + 1 == nsizes ? hs.n - done : sizes[i];
		assert_true(n > 0 && n <= hs.n - done);
		put8(out, 22);
		put16(out, 0x0301);
		put16(out, (unsigned)n);
		put_bytes(out, hs.b + done, n);
		done += n;
	}
	assert_int_equal(done, hs.n);
}

/* In nrec records of about the same size. */
static void
wrap(struct msg *out, const struct msg *body, size_t nrec)
{
	size_t sizes[64], i, total = body->n + 4;

	assert_true(nrec >= 1 && nrec <= 64 && nrec <= total);
	for (i = 0; i < nrec; i++)
		sizes[i] = total / nrec;
	wrap_sizes(out, body, 1, sizes, nrec);
}

static void
build(struct msg *out, const struct spec *s)
{
	static struct msg body;

	build_body(&body, s);
	wrap(out, &body, 1);
}

/* Garbage in every field, so that a field left unset shows. */
static void
dirty(struct nfq_tls_hello *h)
{
	memset(h, 0xa5, sizeof(*h));
}

static enum nfq_tls_status
parse_n(const struct msg *m, size_t len, struct nfq_tls_hello *h)
{
	dirty(h);
	return nfq_tls_parse_hello(m->b, len, h);
}

static void
assert_empty(const struct nfq_tls_hello *h)
{
	assert_false(h->has_sni);
	assert_string_equal(h->sni, "");
	assert_false(h->ech);
	assert_int_equal(h->version, 0);
	assert_string_equal(h->alpn, "");
	assert_int_equal(h->consumed, 0);
	assert_non_null(h->error);
}

/*
 * m parses OK, consuming all of it, and every shorter prefix (the empty
 * one too) asks for more.
 */
static void
assert_ok_all_prefixes(const struct msg *m, struct nfq_tls_hello *h)
{
	size_t len;

	for (len = 0; len < m->n; len++) {
		if (parse_n(m, len, h) != NFQ_TLS_NEED_MORE)
			fail_msg("prefix %zu of %zu: status %d (%s)", len,
			    m->n, (int)nfq_tls_parse_hello(m->b, len, h),
			    h->error);
		assert_empty(h);
		assert_string_equal(h->error, "incomplete client hello");
	}
	assert_int_equal(parse_n(m, m->n, h), NFQ_TLS_OK);
	assert_int_equal(h->consumed, m->n);
	assert_string_equal(h->error, "");
}

/*
 * m is refused with status and error, every prefix gives NEED_MORE or
 * that same verdict, and once a prefix is refused all longer ones are.
 */
static void
assert_refused(const struct msg *m, enum nfq_tls_status status,
    const char *error)
{
	struct nfq_tls_hello h;
	enum nfq_tls_status st;
	bool decided = false;
	size_t len;

	for (len = 0; len <= m->n; len++) {
		st = parse_n(m, len, &h);
		assert_empty(&h);
		if (st == NFQ_TLS_NEED_MORE && !decided)
			continue;
		if (st != status || strcmp(h.error, error) != 0)
			fail_msg("prefix %zu of %zu: status %d (%s), "
			    "want %d (%s)", len, m->n, (int)st, h.error,
			    (int)status, error);
		decided = true;
	}
	assert_true(decided);
}

static void
assert_malformed(const struct msg *m, const char *error)
{
	assert_refused(m, NFQ_TLS_MALFORMED, error);
}

/* A hello body up to the opened extensions block; close16 the offset. */
static size_t
begin_exts(struct msg *m)
{
	m->n = 0;
	put_head(m, false);
	return open16(m);
}

/* ---- hellos that parse ---- */

static void
test_openssl_like(void **state)
{
	static struct msg m;
	struct spec s = { .sni = "WWW.Example.com", .alpn = true };
	struct nfq_tls_hello h;

	(void)state;
	build(&m, &s);
	assert_ok_all_prefixes(&m, &h);
	assert_true(h.has_sni);
	assert_string_equal(h.sni, "WWW.Example.com");
	assert_int_equal(h.version, 0x0304);
	assert_string_equal(h.alpn, "h2,http/1.1");
	assert_false(h.ech);
	assert_int_equal(h.consumed, m.n);
	/* record header, handshake header, then the body: nothing else */
	assert_int_equal(m.n, 5 + 4 + get16_at(&m, 3) - 4);
}

static void
test_grease(void **state)
{
	static struct msg m;
	struct spec s = { .sni = "grease.example", .alpn = true,
	    .grease = true };
	struct nfq_tls_hello h;

	(void)state;
	build(&m, &s);
	assert_ok_all_prefixes(&m, &h);
	assert_string_equal(h.sni, "grease.example");
	/* 0x6a6a is listed first and is the largest value: it is GREASE */
	assert_int_equal(h.version, 0x0304);
	assert_string_equal(h.alpn, "h2,http/1.1");
	assert_false(h.ech);
}

/* The same hello in 1, 2, 5 and one-byte records reads the same. */
static void
test_records_split(void **state)
{
	static struct msg body, m;
	static const size_t nrecs[] = { 1, 2, 5 };
	struct spec s = { .sni = "split.example", .alpn = true };
	struct nfq_tls_hello h;
	size_t i;

	(void)state;
	build_body(&body, &s);
	for (i = 0; i < sizeof(nrecs) / sizeof(nrecs[0]); i++) {
		wrap(&m, &body, nrecs[i]);
		assert_int_equal(m.n, body.n + 4 + 5 * nrecs[i]);
		assert_ok_all_prefixes(&m, &h);
		assert_true(h.has_sni);
		assert_string_equal(h.sni, "split.example");
		assert_string_equal(h.alpn, "h2,http/1.1");
		assert_int_equal(h.version, 0x0304);
		assert_int_equal(h.consumed, m.n);
	}

	/* Every byte its own record: the handshake header and the name
	 * are split too. */
	m.n = 0;
	{
		static struct msg hs;
		size_t k;

		hs.n = 0;
		put8(&hs, 1);
		put8(&hs, 0);
		put16(&hs, (unsigned)body.n);
		put_bytes(&hs, body.b, body.n);
		for (k = 0; k < hs.n; k++) {
			put8(&m, 22);
			put16(&m, 0x0303);
			put16(&m, 1);
			put8(&m, hs.b[k]);
		}
	}
	assert_ok_all_prefixes(&m, &h);
	assert_string_equal(h.sni, "split.example");
	assert_string_equal(h.alpn, "h2,http/1.1");
	assert_int_equal(h.consumed, 6 * (body.n + 4));
}

/* What follows the hello's records is the caller's: not consumed. */
static void
test_bytes_after_hello(void **state)
{
	static const uint8_t ccs[] = { 20, 3, 3, 0, 1, 1 };
	static struct msg m;
	struct spec s = { .sni = "a.test" };
	struct nfq_tls_hello h;
	size_t hello_len;

	(void)state;
	build(&m, &s);
	hello_len = m.n;
	put_bytes(&m, ccs, sizeof(ccs));
	put8(&m, 23);
	assert_int_equal(parse_n(&m, m.n, &h), NFQ_TLS_OK);
	assert_int_equal(h.consumed, hello_len);
	assert_string_equal(h.sni, "a.test");
	assert_int_equal(parse_n(&m, hello_len + 1, &h), NFQ_TLS_OK);
	assert_int_equal(h.consumed, hello_len);
}

static void
test_no_sni(void **state)
{
	static struct msg m;
	struct spec s = { .alpn = true };
	struct nfq_tls_hello h;

	(void)state;
	build(&m, &s);
	assert_ok_all_prefixes(&m, &h);
	assert_false(h.has_sni);
	assert_string_equal(h.sni, "");
	assert_string_equal(h.alpn, "h2,http/1.1");
	assert_int_equal(h.version, 0x0304);
}

/* A TLS 1.2 hello may end right after the compression methods. */
static void
test_no_extensions(void **state)
{
	static struct msg body, m;
	struct nfq_tls_hello h;

	(void)state;
	body.n = 0;
	put_head(&body, false);
	wrap(&m, &body, 1);
	assert_ok_all_prefixes(&m, &h);
	assert_int_equal(h.version, 0x0303);
	assert_false(h.has_sni);
	assert_string_equal(h.alpn, "");

	/* legacy_version is reported when nothing else says better */
	set16(&body, 0, 0x0301);
	wrap(&m, &body, 1);
	assert_int_equal(parse_n(&m, m.n, &h), NFQ_TLS_OK);
	assert_int_equal(h.version, 0x0301);

	/* an empty extensions block is allowed too */
	put16(&body, 0);
	wrap(&m, &body, 1);
	assert_ok_all_prefixes(&m, &h);
	assert_int_equal(h.version, 0x0301);
}

static void
test_ech(void **state)
{
	static const unsigned types[] = { 0xfe0d, 0xffce };
	static struct msg m;
	struct nfq_tls_hello h;
	size_t i;

	(void)state;
	for (i = 0; i < 2; i++) {
		struct spec s = { .sni = "public.example", .alpn = true,
		    .ech = types[i] };

		build(&m, &s);
		assert_ok_all_prefixes(&m, &h);
		assert_true(h.ech);
		assert_true(h.has_sni);
		assert_string_equal(h.sni, "public.example");
		assert_int_equal(h.version, 0x0304);
	}
	/* both at once are two different extensions */
	{
		static struct msg body;
		size_t exts = begin_exts(&body);

		ext_sni(&body, "public.example");
		ext_empty(&body, 0xfe0d);
		ext_empty(&body, 0xffce);
		close16(&body, exts);
		wrap(&m, &body, 1);
		assert_int_equal(parse_n(&m, m.n, &h), NFQ_TLS_OK);
		assert_true(h.ech);
	}
}

/* The highest non-GREASE version listed, whatever the order. */
static unsigned
version_of(const unsigned *v, size_t n)
{
	static struct msg body, m;
	struct nfq_tls_hello h;
	size_t exts = begin_exts(&body);

	ext_versions(&body, v, n);
	close16(&body, exts);
	wrap(&m, &body, 1);
	assert_int_equal(parse_n(&m, m.n, &h), NFQ_TLS_OK);
	return h.version;
}

static void
test_versions(void **state)
{
	static const unsigned up[] = { 0x0303, 0x0304 };
	static const unsigned old[] = { 0x0302, 0x0301 };
	static const unsigned grease_only[] = { 0x0a0a, 0xfafa };
	static const unsigned grease_high[] = { 0x0303, 0xdada };
	static const unsigned odd[] = { 0x0304, 0x7f1c };	/* a draft */
	static const unsigned not_grease[] = { 0x1a2a };

	(void)state;
	assert_int_equal(version_of(up, 2), 0x0304);
	assert_int_equal(version_of(old, 2), 0x0302);
	/* nothing real listed: legacy_version (put_head: 0x0303) */
	assert_int_equal(version_of(grease_only, 2), 0x0303);
	assert_int_equal(version_of(grease_high, 2), 0x0303);
	assert_int_equal(version_of(odd, 2), 0x7f1c);
	/* RFC 8701 GREASE repeats its byte: this one is not GREASE */
	assert_int_equal(version_of(not_grease, 1), 0x1a2a);
}

static void
test_version_str(void **state)
{
	char buf[16];

	(void)state;
	assert_string_equal(nfq_tls_version_str(0x0304, buf, sizeof(buf)),
	    "TLS1.3");
	assert_string_equal(nfq_tls_version_str(0x0303, buf, sizeof(buf)),
	    "TLS1.2");
	assert_string_equal(nfq_tls_version_str(0x0302, buf, sizeof(buf)),
	    "TLS1.1");
	assert_string_equal(nfq_tls_version_str(0x0301, buf, sizeof(buf)),
	    "TLS1.0");
	assert_string_equal(nfq_tls_version_str(0x0300, buf, sizeof(buf)),
	    "SSL3.0");
	assert_ptr_equal(nfq_tls_version_str(0x7f1c, buf, sizeof(buf)), buf);
	assert_string_equal(buf, "0x7f1c");
	assert_string_equal(nfq_tls_version_str(0, buf, sizeof(buf)),
	    "0x0000");
	assert_string_equal(nfq_tls_version_str(0xfefd, buf, sizeof(buf)),
	    "0xfefd");
	/* a short buffer is cut, still terminated */
	assert_string_equal(nfq_tls_version_str(0xabcd, buf, 4), "0xa");
}

static const char *
alpn_of(const char *const *names)
{
	static struct msg body, m;
	static struct nfq_tls_hello h;
	size_t exts = begin_exts(&body);

	ext_alpn(&body, names);
	close16(&body, exts);
	wrap(&m, &body, 1);
	assert_int_equal(parse_n(&m, m.n, &h), NFQ_TLS_OK);
	return h.alpn;
}

static void
test_alpn(void **state)
{
	char a[256], b[256], c[256], want[1024];
	const char *list[5];

	(void)state;
	list[0] = "http/1.1";
	list[1] = NULL;
	assert_string_equal(alpn_of(list), "http/1.1");

	/* 60 + 1 + 60 fit in 127, the third name does not and ends the
	 * list: the fourth would fit but is not shown after a gap */
	memset(a, 'a', 60);
	a[60] = '\0';
	memset(b, 'b', 60);
	b[60] = '\0';
	list[0] = a;
	list[1] = b;
	list[2] = "0123456789";
	list[3] = "x";
	list[4] = NULL;
	snprintf(want, sizeof(want), "%s,%s", a, b);
	assert_string_equal(alpn_of(list), want);

	/* exactly 127 characters fit */
	memset(c, 'c', 5);
	c[5] = '\0';
	list[2] = c;
	list[3] = NULL;
	snprintf(want, sizeof(want), "%s,%s,%s", a, b, c);
	assert_int_equal(strlen(want), 127);
	assert_string_equal(alpn_of(list), want);
	c[5] = 'c';
	c[6] = '\0';
	snprintf(want, sizeof(want), "%s,%s", a, b);
	assert_string_equal(alpn_of(list), want);

	/* one name longer than the buffer: nothing shown */
	memset(a, 'a', 255);
	a[255] = '\0';
	list[0] = a;
	list[1] = NULL;
	assert_string_equal(alpn_of(list), "");

	/* a comma or a non-printable byte cannot fake a name boundary */
	list[0] = "h2,x";
	list[1] = "\x0a\x0a";		/* RFC 8701 GREASE */
	list[2] = "sp ace";
	list[3] = "\x7f\xff";
	list[4] = NULL;
	assert_string_equal(alpn_of(list), "h2?x,??,sp?ace,??");
}

/* A 255-byte name is the longest allowed, and kept as sent. */
static void
test_sni_255(void **state)
{
	static struct msg body, m;
	struct nfq_tls_hello h;
	char name[256];
	size_t exts;

	(void)state;
	memset(name, 'x', 255);
	name[255] = '\0';
	name[0] = 'X';
	name[254] = '.';
	exts = begin_exts(&body);
	ext_sni(&body, name);
	close16(&body, exts);
	wrap(&m, &body, 3);
	assert_ok_all_prefixes(&m, &h);
	assert_true(h.has_sni);
	assert_string_equal(h.sni, name);
}

/* The handshake body at the limit: 16384 bytes, in two records. */
static void
test_hello_max(void **state)
{
	static struct msg body, m;
	struct nfq_tls_hello h;
	size_t exts, ext, sizes[2] = { 16384, 0 };

	(void)state;
	exts = begin_exts(&body);
	ext_sni(&body, "big.example");
	ext = ext_open(&body, 0x0015);		/* padding */
	put_fill(&body, 0, 16384 - body.n);
	close16(&body, ext);
	close16(&body, exts);
	assert_int_equal(body.n, 16384);
	wrap_sizes(&m, &body, 1, sizes, 2);
	assert_int_equal(parse_n(&m, m.n, &h), NFQ_TLS_OK);
	assert_string_equal(h.sni, "big.example");
	assert_int_equal(h.consumed, 16384 + 4 + 10);
	assert_int_equal(parse_n(&m, m.n - 1, &h), NFQ_TLS_NEED_MORE);

	/* one byte more is refused as soon as the length is read */
	put8(&body, 0);
	set16(&body, exts, get16_at(&body, exts) + 1);
	set16(&body, ext + 2, get16_at(&body, ext + 2) + 1);
	wrap_sizes(&m, &body, 1, sizes, 2);
	assert_malformed(&m, "client hello too long");
	assert_int_equal(parse_n(&m, 9, &h), NFQ_TLS_MALFORMED);
}

/* ---- captured from openssl s_client 3.0 -servername a.test -alpn h2 ---- */

static const uint8_t openssl_hello[] = {
	0x16, 0x03, 0x01, 0x01, 0x3c, 0x01, 0x00, 0x01, 0x38, 0x03, 0x03, 0x53,
	0x4c, 0xab, 0x31, 0x6b, 0xd2, 0x5f, 0x00, 0xa8, 0x2e, 0x89, 0x61, 0x84,
	0xa5, 0xbc, 0xb5, 0x9f, 0x04, 0x50, 0x20, 0xc0, 0x25, 0x92, 0x86, 0xe7,
	0xe3, 0x31, 0x66, 0x7c, 0xbe, 0x2f, 0x1d, 0x20, 0x5e, 0x7f, 0xdf, 0x7c,
	0x55, 0xd1, 0x24, 0xbd, 0x66, 0x06, 0xfe, 0xab, 0xfa, 0x48, 0xda, 0x34,
	0xba, 0xfa, 0xb4, 0xbb, 0x5d, 0x42, 0x92, 0xe0, 0x9b, 0xb1, 0x49, 0xa2,
	0xd3, 0x16, 0x56, 0xb0, 0x00, 0x3e, 0x13, 0x02, 0x13, 0x03, 0x13, 0x01,
	0xc0, 0x2c, 0xc0, 0x30, 0x00, 0x9f, 0xcc, 0xa9, 0xcc, 0xa8, 0xcc, 0xaa,
	0xc0, 0x2b, 0xc0, 0x2f, 0x00, 0x9e, 0xc0, 0x24, 0xc0, 0x28, 0x00, 0x6b,
	0xc0, 0x23, 0xc0, 0x27, 0x00, 0x67, 0xc0, 0x0a, 0xc0, 0x14, 0x00, 0x39,
	0xc0, 0x09, 0xc0, 0x13, 0x00, 0x33, 0x00, 0x9d, 0x00, 0x9c, 0x00, 0x3d,
	0x00, 0x3c, 0x00, 0x35, 0x00, 0x2f, 0x00, 0xff, 0x01, 0x00, 0x00, 0xb1,
	0x00, 0x00, 0x00, 0x0b, 0x00, 0x09, 0x00, 0x00, 0x06, 0x61, 0x2e, 0x74,
	0x65, 0x73, 0x74, 0x00, 0x0b, 0x00, 0x04, 0x03, 0x00, 0x01, 0x02, 0x00,
	0x0a, 0x00, 0x16, 0x00, 0x14, 0x00, 0x1d, 0x00, 0x17, 0x00, 0x1e, 0x00,
	0x19, 0x00, 0x18, 0x01, 0x00, 0x01, 0x01, 0x01, 0x02, 0x01, 0x03, 0x01,
	0x04, 0x00, 0x23, 0x00, 0x00, 0x00, 0x10, 0x00, 0x05, 0x00, 0x03, 0x02,
	0x68, 0x32, 0x00, 0x16, 0x00, 0x00, 0x00, 0x17, 0x00, 0x00, 0x00, 0x0d,
	0x00, 0x2a, 0x00, 0x28, 0x04, 0x03, 0x05, 0x03, 0x06, 0x03, 0x08, 0x07,
	0x08, 0x08, 0x08, 0x09, 0x08, 0x0a, 0x08, 0x0b, 0x08, 0x04, 0x08, 0x05,
	0x08, 0x06, 0x04, 0x01, 0x05, 0x01, 0x06, 0x01, 0x03, 0x03, 0x03, 0x01,
	0x03, 0x02, 0x04, 0x02, 0x05, 0x02, 0x06, 0x02, 0x00, 0x2b, 0x00, 0x09,
	0x08, 0x03, 0x04, 0x03, 0x03, 0x03, 0x02, 0x03, 0x01, 0x00, 0x2d, 0x00,
	0x02, 0x01, 0x01, 0x00, 0x33, 0x00, 0x26, 0x00, 0x24, 0x00, 0x1d, 0x00,
	0x20, 0xdf, 0xd3, 0x34, 0xdc, 0x4d, 0x05, 0x50, 0x71, 0x3a, 0xcd, 0xdf,
	0xb7, 0x09, 0xc4, 0x86, 0xa0, 0xf5, 0x8e, 0xd4, 0xb7, 0x8f, 0x34, 0x26,
	0x0e, 0x78, 0x89, 0xd2, 0xd4, 0x37, 0xdd, 0xa2, 0x02,
};

static void
test_openssl_capture(void **state)
{
	static struct msg m, body;
	struct nfq_tls_hello h;

	(void)state;
	m.n = 0;
	put_bytes(&m, openssl_hello, sizeof(openssl_hello));
	assert_ok_all_prefixes(&m, &h);
	assert_true(h.has_sni);
	assert_string_equal(h.sni, "a.test");
	assert_string_equal(h.alpn, "h2");
	assert_int_equal(h.version, 0x0304);
	assert_false(h.ech);
	assert_int_equal(h.consumed, sizeof(openssl_hello));

	/* the same body in three records */
	body.n = 0;
	put_bytes(&body, openssl_hello + 9, sizeof(openssl_hello) - 9);
	wrap(&m, &body, 3);
	assert_ok_all_prefixes(&m, &h);
	assert_string_equal(h.sni, "a.test");
	assert_string_equal(h.alpn, "h2");
	assert_int_equal(h.version, 0x0304);
	assert_int_equal(h.consumed, sizeof(openssl_hello) + 10);
}

/* ---- not TLS ---- */

static void
test_not_tls(void **state)
{
	static const uint8_t sslv2[] = { 0x80, 0x2e, 0x01, 0x03, 0x01, 0x00,
	    0x15, 0x00, 0x00, 0x00, 0x10 };
	static const char get[] = "GET / HTTP/1.1\r\nHost: a.test\r\n\r\n";
	static struct msg m;
	struct spec s = { .sni = "a.test" };

	(void)state;
	m.n = 0;
	put_bytes(&m, sslv2, sizeof(sslv2));
	assert_refused(&m, NFQ_TLS_NOT_TLS, "not a handshake record");
	m.n = 0;
	put_bytes(&m, get, strlen(get));
	assert_refused(&m, NFQ_TLS_NOT_TLS, "not a handshake record");

	/* application data first */
	build(&m, &s);
	m.b[0] = 23;
	assert_refused(&m, NFQ_TLS_NOT_TLS, "not a handshake record");
	/* a record version that is not 3.x */
	build(&m, &s);
	m.b[1] = 2;
	assert_refused(&m, NFQ_TLS_NOT_TLS, "not a TLS record version");
}

/* ---- malformed records ---- */

static void
test_bad_records(void **state)
{
	static struct msg body, m;
	struct spec s = { .sni = "a.test", .alpn = true };
	size_t sizes[2] = { 100, 0 }, second = 5 + 100;

	(void)state;
	build_body(&body, &s);

	/* an alert between two fragments of the hello */
	wrap_sizes(&m, &body, 1, sizes, 2);
	m.b[second] = 21;
	assert_malformed(&m, "not a handshake record");
	wrap_sizes(&m, &body, 1, sizes, 2);
	m.b[second + 1] = 0;
	assert_malformed(&m, "not a TLS record version");

	/* an empty record, first or in the middle */
	wrap(&m, &body, 1);
	set16(&m, 3, 0);
	assert_malformed(&m, "empty record");
	wrap_sizes(&m, &body, 1, sizes, 2);
	memmove(m.b + second + 5, m.b + second, m.n - second);
	m.b[second] = 22;
	set16(&m, second + 1, 0x0301);
	set16(&m, second + 3, 0);
	m.n += 5;
	assert_malformed(&m, "empty record");

	/* longer than a record may be */
	wrap(&m, &body, 1);
	set16(&m, 3, 16385);
	assert_malformed(&m, "record longer than 16384 bytes");

	/* a ServerHello */
	wrap_sizes(&m, &body, 2, sizes, 1);
	assert_malformed(&m, "not a client hello");

	/* a byte after the hello inside its record, one record or two */
	wrap(&m, &body, 1);
	set16(&m, 3, get16_at(&m, 3) + 1);
	put8(&m, 0);
	assert_malformed(&m, "record holds more than the client hello");
	wrap_sizes(&m, &body, 1, sizes, 2);
	set16(&m, second + 3, get16_at(&m, second + 3) + 1);
	put8(&m, 1);
	assert_malformed(&m, "record holds more than the client hello");

	/* a handshake length short of what the record holds */
	wrap(&m, &body, 1);
	m.b[8]--;
	assert_malformed(&m, "record holds more than the client hello");
	/* or longer than what the hello holds */
	wrap(&m, &body, 1);
	m.b[8]++;
	set16(&m, 3, get16_at(&m, 3) + 1);
	put8(&m, 0);
	assert_malformed(&m,
	    "extensions length does not fill the client hello");
}

/* ---- malformed hello fields ---- */

static void
test_bad_head(void **state)
{
	static struct msg body, m;
	struct spec s = { .sni = "a.test" };
	size_t sid = 2 + 32, ciphers = sid + 1 + 32, comp;

	(void)state;
	build_body(&body, &s);
	comp = ciphers + 2 + get16_at(&body, ciphers);

	/* session id of 33 bytes: told at its length byte */
	body.b[sid] = 33;
	wrap(&m, &body, 1);
	assert_malformed(&m, "session id longer than 32 bytes");
	build_body(&body, &s);

	set16(&body, ciphers, get16_at(&body, ciphers) - 1);
	wrap(&m, &body, 1);
	assert_malformed(&m, "bad cipher suites length");
	set16(&body, ciphers, 0);
	wrap(&m, &body, 1);
	assert_malformed(&m, "bad cipher suites length");
	build_body(&body, &s);

	body.b[comp] = 0;
	wrap(&m, &body, 1);
	assert_malformed(&m, "no compression methods");
	build_body(&body, &s);

	/* a cipher suites length past the hello */
	set16(&body, ciphers, 0xfffe);
	wrap(&m, &body, 1);
	assert_malformed(&m, "client hello fields past its length");

	/* one byte where the extensions would be: no room for a length */
	body.n = 0;
	put_head(&body, false);
	put8(&body, 0);
	wrap(&m, &body, 1);
	assert_malformed(&m, "client hello fields past its length");
}

static void
test_bad_extensions(void **state)
{
	static struct msg body, m;
	size_t exts, ext;

	(void)state;
	/* extensions length one short, one long */
	exts = begin_exts(&body);
	ext_sni(&body, "a.test");
	ext_alpn(&body, alpn_h2_http11);
	close16(&body, exts);
	set16(&body, exts, get16_at(&body, exts) - 1);
	wrap(&m, &body, 1);
	assert_malformed(&m,
	    "extensions length does not fill the client hello");
	set16(&body, exts, get16_at(&body, exts) + 2);
	wrap(&m, &body, 1);
	assert_malformed(&m,
	    "extensions length does not fill the client hello");

	/* a trailing byte inside the message after the extensions */
	set16(&body, exts, get16_at(&body, exts) - 1);
	put8(&body, 0);
	wrap(&m, &body, 1);
	assert_malformed(&m,
	    "extensions length does not fill the client hello");

	/* the last extension's length past the end */
	exts = begin_exts(&body);
	ext_sni(&body, "a.test");
	ext = ext_open(&body, 0x0017);
	put8(&body, 0);
	close16(&body, ext);
	close16(&body, exts);
	set16(&body, ext, 2);
	wrap(&m, &body, 1);
	assert_malformed(&m, "extension length past the end");

	/* three bytes cannot hold an extension header */
	exts = begin_exts(&body);
	put8(&body, 0);
	put16(&body, 0);
	close16(&body, exts);
	wrap(&m, &body, 1);
	assert_malformed(&m, "extension header past the end");

	/* a repeated extension, known or not */
	exts = begin_exts(&body);
	ext_alpn(&body, alpn_h2_http11);
	ext_sni(&body, "a.test");
	ext_alpn(&body, alpn_h2_http11);
	close16(&body, exts);
	wrap(&m, &body, 1);
	assert_malformed(&m, "repeated extension");
	exts = begin_exts(&body);
	ext_empty(&body, 0xffff);
	ext_sni(&body, "a.test");
	ext_empty(&body, 0xffff);
	close16(&body, exts);
	wrap(&m, &body, 1);
	assert_malformed(&m, "repeated extension");

	/* supported_versions: odd, empty, not filling */
	exts = begin_exts(&body);
	ext = ext_open(&body, 43);
	put8(&body, 3);
	put16(&body, 0x0304);
	put8(&body, 3);
	close16(&body, ext);
	close16(&body, exts);
	wrap(&m, &body, 1);
	assert_malformed(&m, "bad supported_versions length");
	body.b[ext + 2] = 0;
	wrap(&m, &body, 1);
	assert_malformed(&m, "bad supported_versions length");
	body.b[ext + 2] = 2;
	wrap(&m, &body, 1);
	assert_malformed(&m, "bad supported_versions length");
	/* a list of one version inside an extension that holds two */
	exts = begin_exts(&body);
	ext = ext_open(&body, 43);
	put8(&body, 2);
	put16(&body, 0x0303);
	put16(&body, 0x0304);
	close16(&body, ext);
	close16(&body, exts);
	wrap(&m, &body, 1);
	assert_malformed(&m, "bad supported_versions length");
	exts = begin_exts(&body);
	ext_empty(&body, 43);
	close16(&body, exts);
	wrap(&m, &body, 1);
	assert_malformed(&m, "supported_versions extension too short");

	/* ALPN: empty name, list length off, name past the list */
	exts = begin_exts(&body);
	ext = ext_open(&body, 16);
	put16(&body, 4);
	put8(&body, 2);
	put_bytes(&body, "h2", 2);
	put8(&body, 0);
	close16(&body, ext);
	close16(&body, exts);
	wrap(&m, &body, 1);
	assert_malformed(&m, "empty ALPN name");
	set16(&body, ext + 2, 5);
	wrap(&m, &body, 1);
	assert_malformed(&m, "ALPN list length does not fill its extension");
	set16(&body, ext + 2, 3);
	wrap(&m, &body, 1);
	assert_malformed(&m, "ALPN list length does not fill its extension");
	set16(&body, ext + 2, 4);
	body.b[ext + 7] = 1;
	wrap(&m, &body, 1);
	assert_malformed(&m, "ALPN name past its list");
	exts = begin_exts(&body);
	ext = ext_open(&body, 16);
	put16(&body, 0);
	close16(&body, ext);
	close16(&body, exts);
	wrap(&m, &body, 1);
	assert_malformed(&m, "ALPN list length does not fill its extension");
}

/* A server_name extension by hand: list length, entries as given. */
static size_t
sni_raw(struct msg *body, const uint8_t *entries, size_t n)
{
	size_t exts = begin_exts(body), ext, list;

	ext = ext_open(body, 0);
	list = open16(body);
	put_bytes(body, entries, n);
	close16(body, list);
	close16(body, ext);
	close16(body, exts);
	return list;
}

static void
test_bad_server_name(void **state)
{
	static const uint8_t two[] = { 0, 0, 6, 'a', '.', 't', 'e', 's', 't',
	    0, 0, 6, 'b', '.', 't', 'e', 's', 't' };
	static const uint8_t type1[] = { 1, 0, 6, 'a', '.', 't', 'e', 's',
	    't' };
	static const uint8_t empty[] = { 0, 0, 0 };
	static const uint8_t nul[] = { 0, 0, 6, 'a', '.', 't', 0, 'x', 'y' };
	static const uint8_t one[] = { 0, 0, 6, 'a', '.', 't', 'e', 's', 't' };
	static struct msg body, m;
	char name[257];
	size_t exts, list;

	(void)state;
	/* two server_name extensions */
	exts = begin_exts(&body);
	ext_sni(&body, "allowed.example");
	ext_sni(&body, "evil.example");
	close16(&body, exts);
	wrap(&m, &body, 1);
	assert_malformed(&m, "repeated extension");

	sni_raw(&body, two, sizeof(two));
	wrap(&m, &body, 1);
	assert_malformed(&m, "more than one server name");
	sni_raw(&body, type1, sizeof(type1));
	wrap(&m, &body, 1);
	assert_malformed(&m, "server name type is not host_name");
	sni_raw(&body, empty, sizeof(empty));
	wrap(&m, &body, 1);
	assert_malformed(&m, "empty server name");
	sni_raw(&body, nul, sizeof(nul));
	wrap(&m, &body, 1);
	assert_malformed(&m, "NUL in server name");

	memset(name, 'x', 256);
	name[256] = '\0';
	exts = begin_exts(&body);
	ext_sni(&body, name);
	close16(&body, exts);
	wrap(&m, &body, 2);
	assert_malformed(&m, "server name longer than 255 bytes");

	/* the list length off by one either way */
	list = sni_raw(&body, one, sizeof(one));
	set16(&body, list, sizeof(one) + 1);
	wrap(&m, &body, 1);
	assert_malformed(&m,
	    "server name list length does not fill its extension");
	set16(&body, list, sizeof(one) - 1);
	wrap(&m, &body, 1);
	assert_malformed(&m,
	    "server name list length does not fill its extension");

	/* the name length off by one either way */
	list = sni_raw(&body, one, sizeof(one));
	set16(&body, list + 3, 7);
	wrap(&m, &body, 1);
	assert_malformed(&m, "server name past its list");
	set16(&body, list + 3, 5);
	wrap(&m, &body, 1);
	assert_malformed(&m, "more than one server name");

	/* an empty extension, and a list too short for an entry */
	exts = begin_exts(&body);
	ext_empty(&body, 0);
	close16(&body, exts);
	wrap(&m, &body, 1);
	assert_malformed(&m, "server_name extension too short");
	sni_raw(&body, empty, 2);
	wrap(&m, &body, 1);
	assert_malformed(&m, "server name list too short");
	sni_raw(&body, empty, 0);
	wrap(&m, &body, 1);
	assert_malformed(&m, "server name list too short");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_openssl_like),
		cmocka_unit_test(test_grease),
		cmocka_unit_test(test_records_split),
		cmocka_unit_test(test_bytes_after_hello),
		cmocka_unit_test(test_no_sni),
		cmocka_unit_test(test_no_extensions),
		cmocka_unit_test(test_ech),
		cmocka_unit_test(test_versions),
		cmocka_unit_test(test_version_str),
		cmocka_unit_test(test_alpn),
		cmocka_unit_test(test_sni_255),
		cmocka_unit_test(test_hello_max),
		cmocka_unit_test(test_openssl_capture),
		cmocka_unit_test(test_not_tls),
		cmocka_unit_test(test_bad_records),
		cmocka_unit_test(test_bad_head),
		cmocka_unit_test(test_bad_extensions),
		cmocka_unit_test(test_bad_server_name),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
