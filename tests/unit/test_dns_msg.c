/* test_dns_msg.c: DNS message parsers and writers, byte by byte. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "dns/dns.h"

/* A message under construction, written the way a test reads it. */
struct msg {
	uint8_t	b[4096];
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
put32(struct msg *m, uint32_t v)
{
	put16(m, v >> 16);
	put16(m, v & 0xffff);
}

static void
put_bytes(struct msg *m, const void *p, size_t n)
{
	assert_true(n <= sizeof(m->b) - m->n);
	memcpy(m->b + m->n, p, n);
	m->n += n;
}

/* Labels of a presentation name, without the terminating zero. */
static void
put_labels(struct msg *m, const char *name)
{
	const char *dot;

	while (*name != '\0') {
		dot = strchr(name, '.');
		if (dot == NULL)
			dot = name + strlen(name);
		put8(m, (unsigned)(dot - name));
		put_bytes(m, name, (size_t)(dot - name));
		name = *dot == '.' ? dot + 1 : dot;
	}
}

/* An uncompressed name; returns its offset. */
static size_t
put_name(struct msg *m, const char *name)
{
	size_t at = m->n;

	put_labels(m, name);
	put8(m, 0);
	return at;
}

static void
put_ptr(struct msg *m, size_t off)
{
	put16(m, 0xc000U | (unsigned)off);
}

static void
put_header(struct msg *m, unsigned id, unsigned flags, unsigned qd,
    unsigned an, unsigned ns, unsigned ar)
{
	m->n = 0;
	put16(m, id);
	put16(m, flags);
	put16(m, qd);
	put16(m, an);
	put16(m, ns);
	put16(m, ar);
}

/* An OPT record after its owner name: no options. */
static void
put_opt_fixed(struct msg *m, unsigned udp_size)
{
	put16(m, DNS_T_OPT);
	put16(m, udp_size);
	put32(m, 0);
	put16(m, 0);
}

/* An OPT record with root owner and no options. */
static void
put_opt(struct msg *m, unsigned udp_size)
{
	put8(m, 0);
	put_opt_fixed(m, udp_size);
}

/* The fixed part of a record after its owner name. */
static void
put_rr_fixed(struct msg *m, unsigned type, uint32_t ttl, unsigned rdlen)
{
	put16(m, type);
	put16(m, 1);
	put32(m, ttl);
	put16(m, rdlen);
}

/* A standard query for name/type, RD set, with an OPT if udp_size != 0. */
static void
build_query(struct msg *m, unsigned id, const char *name, unsigned qtype,
    unsigned udp_size)
{
	put_header(m, id, 0x0100, 1, 0, 0, udp_size != 0);
	put_name(m, name);
	put16(m, qtype);
	put16(m, 1);
	if (udp_size != 0)
		put_opt(m, udp_size);
}

/* A response header and question for name/type; answers follow. */
static void
build_response(struct msg *m, unsigned id, unsigned rcode, const char *name,
    unsigned qtype, unsigned ancount)
{
	put_header(m, id, 0x8180 | rcode, 1, ancount, 0, 0);
	put_name(m, name);
	put16(m, qtype);
	put16(m, 1);
}

static void
put_a(struct msg *m, uint32_t ttl, const uint8_t a[4])
{
	put_rr_fixed(m, DNS_T_A, ttl, 4);
	put_bytes(m, a, 4);
}

static char *
repeat(char *buf, char c, size_t n)
{
	memset(buf, c, n);
	buf[n] = '\0';
	return buf;
}

static enum dns_parse_error
query_of(const struct msg *m, struct dns_query *q)
{
	return dns_parse_query(m->b, m->n, q);
}

/* Parses into a heap-free static: a response is ~17 KB. */
static struct dns_response resp;

static enum dns_parse_error
response_of(const struct msg *m)
{
	return dns_parse_response(m->b, m->n, &resp);
}

/* ---- queries ---- */

static void
test_query_a(void **state)
{
	struct dns_query q;
	struct msg m;

	(void)state;
	build_query(&m, 0xbeef, "Example.COM", DNS_T_A, 0);
	assert_int_equal(m.n, 12 + 13 + 4);
	assert_int_equal(query_of(&m, &q), DNS_PARSE_OK);
	assert_int_equal(q.id, 0xbeef);
	assert_int_equal(q.flags, 0x0100);
	assert_string_equal(q.qname, "Example.COM");
	assert_int_equal(q.qtype, DNS_T_A);
	assert_int_equal(q.qclass, 1);
	assert_false(q.edns);
	assert_int_equal(q.udp_size, 512);
}

static void
test_query_types_and_opt(void **state)
{
	struct dns_query q;
	struct msg m;

	(void)state;
	build_query(&m, 1, "www.Example.org", DNS_T_AAAA, 4096);
	assert_int_equal(query_of(&m, &q), DNS_PARSE_OK);
	assert_string_equal(q.qname, "www.Example.org");
	assert_int_equal(q.qtype, DNS_T_AAAA);
	assert_true(q.edns);
	assert_int_equal(q.udp_size, 4096);

	build_query(&m, 2, "svc.example", DNS_T_HTTPS, 1232);
	assert_int_equal(query_of(&m, &q), DNS_PARSE_OK);
	assert_int_equal(q.qtype, 65);
	assert_int_equal(q.udp_size, 1232);

	/* Sizes below 512 count as 512 (RFC 6891 6.2.3). */
	build_query(&m, 3, "ANY.example", DNS_T_ANY, 100);
	assert_int_equal(query_of(&m, &q), DNS_PARSE_OK);
	assert_int_equal(q.qtype, 255);
	assert_true(q.edns);
	assert_int_equal(q.udp_size, 512);

	/* The root, and class CH kept as sent. */
	put_header(&m, 4, 0, 1, 0, 0, 0);
	put8(&m, 0);
	put16(&m, DNS_T_NS);
	put16(&m, 3);
	assert_int_equal(query_of(&m, &q), DNS_PARSE_OK);
	assert_string_equal(q.qname, "");
	assert_int_equal(q.qtype, DNS_T_NS);
	assert_int_equal(q.qclass, 3);
	assert_int_equal(q.flags, 0);
}

static void
test_query_label_bytes(void **state)
{
	static const uint8_t bad[] = { '.', 0x00, 0x80, 0x20, 0x7f, 0xff };
	struct dns_query q;
	struct msg m;
	size_t i, at;

	(void)state;
	/* The printable edges and punctuation pass, case kept. */
	build_query(&m, 9, "!~_*-.A-z", DNS_T_TXT, 0);
	assert_int_equal(query_of(&m, &q), DNS_PARSE_OK);
	assert_string_equal(q.qname, "!~_*-.A-z");

	for (i = 0; i < sizeof(bad); i++) {
		build_query(&m, 9, "abc.example", DNS_T_A, 0);
		at = DNS_HDR_LEN + 2;	/* the 'b' */
		m.b[at] = bad[i];
		assert_int_equal(query_of(&m, &q), DNS_PARSE_BAD_NAME);
		assert_int_equal(q.id, 9);
		assert_string_equal(q.qname, "");
	}
}

static void
test_query_name_lengths(void **state)
{
	char label[80], name[4 * 80];
	struct dns_query q;
	struct msg m;

	(void)state;
	build_query(&m, 1, repeat(label, 'a', 63), DNS_T_A, 0);
	assert_int_equal(query_of(&m, &q), DNS_PARSE_OK);
	assert_int_equal(strlen(q.qname), 63);

	/* 64 is the 0x40 label type on the wire. */
	build_query(&m, 1, repeat(label, 'a', 64), DNS_T_A, 0);
	assert_int_equal(query_of(&m, &q), DNS_PARSE_BAD_NAME);

	/* 4 x 63-byte labels with dots: 255; cut to 253 and to 254. */
	snprintf(name, sizeof(name), "%s.%s.%s.%s", repeat(label, 'a', 63),
	    label, label, label);
	name[253] = '\0';
	assert_int_equal(strlen(name), 253);
	build_query(&m, 1, name, DNS_T_A, 0);
	assert_int_equal(m.n, 12 + 255 + 4);
	assert_int_equal(query_of(&m, &q), DNS_PARSE_OK);
	assert_string_equal(q.qname, name);

	snprintf(name, sizeof(name), "%s.%s.%s.%s", label, label, label,
	    label);
	name[254] = '\0';
	build_query(&m, 1, name, DNS_T_A, 0);
	assert_int_equal(query_of(&m, &q), DNS_PARSE_BAD_NAME);

	/* Many one-byte labels: 127 is 253 bytes, 128 is 255. */
	for (size_t i = 0; i < 127; i++) {
		name[2 * i] = 'x';
		if (i > 0)
			name[2 * i - 1] = '.';
	}
	name[253] = '\0';
	build_query(&m, 1, name, DNS_T_A, 0);
	assert_int_equal(query_of(&m, &q), DNS_PARSE_OK);
	assert_int_equal(strlen(q.qname), 253);
	memcpy(name + 253, ".x", 3);
	build_query(&m, 1, name, DNS_T_A, 0);
	assert_int_equal(query_of(&m, &q), DNS_PARSE_BAD_NAME);
}

static void
test_query_label_types(void **state)
{
	char label[80];
	struct dns_query q;
	struct msg m;

	(void)state;
	/* A pointer to the question itself cannot be earlier than it. */
	put_header(&m, 7, 0, 1, 0, 0, 0);
	put_labels(&m, "www");
	put_ptr(&m, 12);
	put16(&m, 1);
	put16(&m, 1);
	assert_int_equal(query_of(&m, &q), DNS_PARSE_BAD_NAME);

	/* Even a pointer into the header. */
	put_header(&m, 7, 0, 1, 0, 0, 0);
	put_ptr(&m, 0);
	put16(&m, 1);
	put16(&m, 1);
	assert_int_equal(query_of(&m, &q), DNS_PARSE_BAD_NAME);

	put_header(&m, 7, 0, 1, 0, 0, 0);
	put8(&m, 0x41);
	put_bytes(&m, repeat(label, 'x', 65), 65);
	put8(&m, 0);
	put16(&m, 1);
	put16(&m, 1);
	assert_int_equal(query_of(&m, &q), DNS_PARSE_BAD_NAME);

	put_header(&m, 7, 0, 1, 0, 0, 0);
	put8(&m, 0x80);
	put8(&m, 0);
	put16(&m, 1);
	put16(&m, 1);
	assert_int_equal(query_of(&m, &q), DNS_PARSE_BAD_NAME);
}

static void
check_truncations(const struct msg *full, unsigned id)
{
	struct dns_query q;
	size_t len;

	for (len = 0; len < full->n; len++) {
		enum dns_parse_error e = dns_parse_query(full->b, len, &q);

		if (e != DNS_PARSE_SHORT)
			fail_msg("length %zu of %zu: %s", len, full->n,
			    dns_parse_error_str(e));
		assert_int_equal(q.id, len >= 2 ? id : 0);
	}
	assert_int_equal(dns_parse_query(full->b, full->n, &q), DNS_PARSE_OK);
}

static void
test_query_truncated(void **state)
{
	struct dns_query q;
	struct msg m;

	(void)state;
	build_query(&m, 0x1234, "a.Example.com", DNS_T_A, 0);
	check_truncations(&m, 0x1234);
	build_query(&m, 0xfedc, "b.example", DNS_T_HTTPS, 1400);
	check_truncations(&m, 0xfedc);

	/* An OPT whose RDATA is cut: the record's length runs past. */
	build_query(&m, 5, "c.example", DNS_T_A, 1232);
	m.b[m.n - 1] = 8;
	put16(&m, 10);		/* COOKIE */
	put16(&m, 4);
	put32(&m, 0x01020304);
	assert_int_equal(query_of(&m, &q), DNS_PARSE_OK);
	for (size_t cut = 1; cut <= 8; cut++)
		assert_int_equal(dns_parse_query(m.b, m.n - cut, &q),
		    DNS_PARSE_BAD_RR);
	assert_int_equal(q.id, 5);
}

static void
test_query_header_errors(void **state)
{
	struct dns_query q;
	struct msg m;

	(void)state;
	build_query(&m, 0x4242, "example.com", DNS_T_A, 0);
	m.b[5] = 0;
	assert_int_equal(query_of(&m, &q), DNS_PARSE_QDCOUNT);
	assert_int_equal(q.id, 0x4242);
	m.b[5] = 2;
	assert_int_equal(query_of(&m, &q), DNS_PARSE_QDCOUNT);
	m.b[5] = 1;
	assert_int_equal(query_of(&m, &q), DNS_PARSE_OK);

	m.b[2] |= 0x80;		/* QR */
	assert_int_equal(query_of(&m, &q), DNS_PARSE_NOT_QUERY);
	assert_int_equal(q.id, 0x4242);
	m.b[2] = 0x08;		/* opcode 1 (IQUERY) */
	assert_int_equal(query_of(&m, &q), DNS_PARSE_NOT_QUERY);
	m.b[2] = 0x28;		/* opcode 5 (UPDATE) */
	assert_int_equal(query_of(&m, &q), DNS_PARSE_NOT_QUERY);
	m.b[2] = 0x01;
	assert_int_equal(query_of(&m, &q), DNS_PARSE_OK);
}

static void
test_query_sections(void **state)
{
	static const uint8_t addr[4] = { 192, 0, 2, 1 };
	struct dns_query q;
	struct msg m;

	(void)state;
	/* An answer or authority record in a query. */
	build_query(&m, 1, "example.com", DNS_T_A, 0);
	m.b[7] = 1;
	put_ptr(&m, 12);
	put_a(&m, 60, addr);
	assert_int_equal(query_of(&m, &q), DNS_PARSE_EXTRA_RR);
	m.b[7] = 0;
	m.b[9] = 1;
	assert_int_equal(query_of(&m, &q), DNS_PARSE_EXTRA_RR);

	/* An additional record that is not an OPT. */
	m.b[9] = 0;
	m.b[11] = 1;
	assert_int_equal(query_of(&m, &q), DNS_PARSE_EXTRA_RR);

	/* Two OPTs. */
	build_query(&m, 1, "example.com", DNS_T_A, 1232);
	put_opt(&m, 1232);
	m.b[11] = 2;
	assert_int_equal(query_of(&m, &q), DNS_PARSE_EXTRA_RR);

	/* An OPT owned by a name, plainly or by pointer. */
	build_query(&m, 1, "example.com", DNS_T_A, 0);
	m.b[11] = 1;
	put_labels(&m, "x");
	put_opt(&m, 1232);
	assert_int_equal(query_of(&m, &q), DNS_PARSE_BAD_RR);
	build_query(&m, 1, "example.com", DNS_T_A, 0);
	m.b[11] = 1;
	put_ptr(&m, 12);
	put_opt_fixed(&m, 1232);
	assert_int_equal(query_of(&m, &q), DNS_PARSE_BAD_RR);

	/* OPT options that overrun RDATA: 6 bytes hold an 8-byte option. */
	build_query(&m, 1, "example.com", DNS_T_A, 1232);
	m.b[m.n - 1] = 6;
	put16(&m, 10);
	put16(&m, 8);
	put16(&m, 0);
	assert_int_equal(query_of(&m, &q), DNS_PARSE_BAD_RR);
	/* Options in two pieces, the second an empty one: fine. */
	build_query(&m, 1, "example.com", DNS_T_A, 1232);
	m.b[m.n - 1] = 10;
	put16(&m, 10);
	put16(&m, 2);
	put16(&m, 0xaaaa);
	put16(&m, 12);
	put16(&m, 0);
	assert_int_equal(query_of(&m, &q), DNS_PARSE_OK);
	assert_true(q.edns);
	/* Three bytes cannot hold an option's code and length. */
	build_query(&m, 1, "example.com", DNS_T_A, 1232);
	m.b[m.n - 1] = 3;
	put16(&m, 10);
	put8(&m, 0);
	assert_int_equal(query_of(&m, &q), DNS_PARSE_BAD_RR);
}

static void
test_query_trailing(void **state)
{
	struct dns_query q;
	struct msg m;

	(void)state;
	build_query(&m, 1, "example.com", DNS_T_A, 0);
	put8(&m, 0);
	assert_int_equal(query_of(&m, &q), DNS_PARSE_TRAILING);
	build_query(&m, 1, "example.com", DNS_T_A, 1232);
	put16(&m, 0xabcd);
	assert_int_equal(query_of(&m, &q), DNS_PARSE_TRAILING);
	assert_true(q.edns);
}

/* ---- responses ---- */

static void
assert_a(const struct dns_rr *rr, const char *name, uint32_t ttl,
    const uint8_t a[4])
{
	assert_string_equal(rr->name, name);
	assert_int_equal(rr->type, DNS_T_A);
	assert_int_equal(rr->ttl, ttl);
	assert_memory_equal(rr->data.a, a, 4);
}

static void
assert_cname(const struct dns_rr *rr, const char *name, uint32_t ttl,
    const char *target)
{
	assert_string_equal(rr->name, name);
	assert_int_equal(rr->type, DNS_T_CNAME);
	assert_int_equal(rr->ttl, ttl);
	assert_string_equal(rr->data.cname, target);
}

static void
test_response_cname_chain(void **state)
{
	static const uint8_t a1[4] = { 192, 0, 2, 1 }, a2[4] = { 192, 0, 2, 2 };
	static const uint8_t v6[16] = { 0x20, 0x01, 0x0d, 0xb8, [15] = 1 };
	struct msg m;
	size_t rd, cdn, edge, net;

	(void)state;
	build_response(&m, 0x7777, 0, "WWW.example.com", DNS_T_A, 5);
	/* www -> cdn.Example.net */
	put_ptr(&m, 12);
	put_rr_fixed(&m, DNS_T_CNAME, 300, 0);
	rd = m.n;
	cdn = put_name(&m, "cdn.Example.net");
	net = cdn + 4;
	m.b[rd - 1] = (uint8_t)(m.n - rd);
	/* cdn.example.net -> edge.cdn.example.net, the target compressed */
	put_ptr(&m, cdn);
	put_rr_fixed(&m, DNS_T_CNAME, 60, 7);
	edge = m.n;
	put_labels(&m, "edge");
	put_ptr(&m, cdn);
	/* two A and an AAAA for edge: owners point at a pointer */
	put_ptr(&m, edge);
	put_a(&m, 20, a1);
	put_ptr(&m, edge);
	put_a(&m, 21, a2);
	put_labels(&m, "v6");
	put_ptr(&m, net);
	put_rr_fixed(&m, DNS_T_AAAA, 22, 16);
	put_bytes(&m, v6, 16);
	/* An authority section that is not read. */
	put_bytes(&m, "\xff\xff", 2);

	assert_int_equal(response_of(&m), DNS_PARSE_OK);
	assert_int_equal(resp.id, 0x7777);
	assert_int_equal(resp.flags, 0x8180);
	assert_int_equal(resp.rcode, 0);
	assert_string_equal(resp.qname, "WWW.example.com");
	assert_int_equal(resp.qtype, DNS_T_A);
	assert_int_equal(resp.qclass, 1);
	assert_int_equal(resp.nrr, 5);
	assert_int_equal(resp.nskipped, 0);
	assert_cname(&resp.rr[0], "WWW.example.com", 300, "cdn.Example.net");
	assert_cname(&resp.rr[1], "cdn.Example.net", 60,
	    "edge.cdn.Example.net");
	assert_a(&resp.rr[2], "edge.cdn.Example.net", 20, a1);
	assert_a(&resp.rr[3], "edge.cdn.Example.net", 21, a2);
	assert_string_equal(resp.rr[4].name, "v6.Example.net");
	assert_int_equal(resp.rr[4].type, DNS_T_AAAA);
	assert_int_equal(resp.rr[4].ttl, 22);
	assert_memory_equal(resp.rr[4].data.aaaa, v6, 16);
}

static void
test_response_skipped(void **state)
{
	static const uint8_t a1[4] = { 198, 51, 100, 7 };
	struct msg m;

	(void)state;
	build_response(&m, 1, DNS_R_NOERROR, "t.example", DNS_T_A, 5);
	put_ptr(&m, 12);
	put_rr_fixed(&m, DNS_T_TXT, 5, 6);
	put_bytes(&m, "\x05hello", 6);
	put_ptr(&m, 12);
	put_a(&m, 5, a1);
	put_ptr(&m, 12);
	put_rr_fixed(&m, 46, 5, 3);	/* RRSIG, body not looked at */
	put_bytes(&m, "\0\0\0", 3);
	put_ptr(&m, 12);		/* class CH: not an address */
	put16(&m, DNS_T_A);
	put16(&m, 3);
	put32(&m, 5);
	put16(&m, 2);
	put16(&m, 0);
	put_ptr(&m, 12);		/* an empty NS RDATA is not read */
	put_rr_fixed(&m, DNS_T_NS, 5, 0);
	assert_int_equal(response_of(&m), DNS_PARSE_OK);
	assert_int_equal(resp.nrr, 1);
	assert_int_equal(resp.nskipped, 4);
	assert_a(&resp.rr[0], "t.example", 5, a1);

	/* NXDOMAIN, no answers, an authority count whose records are absent. */
	build_response(&m, 2, DNS_R_NXDOMAIN, "nope.example", DNS_T_AAAA, 0);
	m.b[9] = 1;
	assert_int_equal(response_of(&m), DNS_PARSE_OK);
	assert_int_equal(resp.rcode, DNS_R_NXDOMAIN);
	assert_int_equal(resp.nrr, 0);
	assert_int_equal(resp.nskipped, 0);
	assert_string_equal(resp.qname, "nope.example");
}

static void
test_response_many(void **state)
{
	struct msg m;
	uint8_t a[4] = { 203, 0, 113, 0 };
	unsigned i;

	(void)state;
	build_response(&m, 3, 0, "many.example", DNS_T_A, DNS_RR_MAX + 8);
	for (i = 0; i < DNS_RR_MAX + 8; i++) {
		a[3] = (uint8_t)i;
		put_ptr(&m, 12);
		put_a(&m, i, a);
	}
	assert_int_equal(response_of(&m), DNS_PARSE_OK);
	assert_int_equal(resp.nrr, DNS_RR_MAX);
	assert_int_equal(resp.nskipped, 8);
	a[3] = DNS_RR_MAX - 1;
	assert_a(&resp.rr[DNS_RR_MAX - 1], "many.example", DNS_RR_MAX - 1, a);

	/* A malformed record beyond the kept ones still fails. */
	m.b[m.n - 5] = 5;
	put8(&m, 0);
	assert_int_equal(response_of(&m), DNS_PARSE_BAD_RR);
}

static void
test_response_bad_rr(void **state)
{
	static const uint8_t a1[4] = { 192, 0, 2, 9 };
	struct msg m;

	(void)state;
	/* RDLENGTH past the end, for a kept and a skipped type. */
	build_response(&m, 4, 0, "x.example", DNS_T_A, 1);
	put_ptr(&m, 12);
	put_rr_fixed(&m, DNS_T_A, 1, 5);
	put_bytes(&m, a1, 4);
	assert_int_equal(response_of(&m), DNS_PARSE_BAD_RR);
	assert_int_equal(resp.id, 4);
	build_response(&m, 4, 0, "x.example", DNS_T_A, 1);
	put_ptr(&m, 12);
	put_rr_fixed(&m, DNS_T_TXT, 1, 100);
	put_bytes(&m, "\x03" "abc", 4);
	assert_int_equal(response_of(&m), DNS_PARSE_BAD_RR);

	/* Lengths that disagree with the type. */
	build_response(&m, 4, 0, "x.example", DNS_T_A, 1);
	put_ptr(&m, 12);
	put_rr_fixed(&m, DNS_T_A, 1, 5);
	put_bytes(&m, "\1\2\3\4\5", 5);
	assert_int_equal(response_of(&m), DNS_PARSE_BAD_RR);
	build_response(&m, 4, 0, "x.example", DNS_T_AAAA, 1);
	put_ptr(&m, 12);
	put_rr_fixed(&m, DNS_T_AAAA, 1, 4);
	put_bytes(&m, a1, 4);
	assert_int_equal(response_of(&m), DNS_PARSE_BAD_RR);

	/* A CNAME whose name is shorter or longer than its RDATA. */
	build_response(&m, 4, 0, "x.example", DNS_T_A, 1);
	put_ptr(&m, 12);
	put_rr_fixed(&m, DNS_T_CNAME, 1, 5);
	put_name(&m, "y");
	put8(&m, 0);
	put8(&m, 0);
	assert_int_equal(response_of(&m), DNS_PARSE_BAD_RR);
	build_response(&m, 4, 0, "x.example", DNS_T_A, 1);
	put_ptr(&m, 12);
	put_rr_fixed(&m, DNS_T_CNAME, 1, 2);
	put_name(&m, "yy");
	assert_int_equal(response_of(&m), DNS_PARSE_BAD_RR);
	/* ... and one that fits exactly. */
	m.b[m.n - 5] = 4;
	assert_int_equal(response_of(&m), DNS_PARSE_OK);
	assert_cname(&resp.rr[0], "x.example", 1, "yy");

	/* Cut in the fixed part of a record. */
	build_response(&m, 4, 0, "x.example", DNS_T_A, 1);
	put_ptr(&m, 12);
	put16(&m, DNS_T_A);
	assert_int_equal(response_of(&m), DNS_PARSE_SHORT);
	/* Fewer records than ANCOUNT says. */
	build_response(&m, 4, 0, "x.example", DNS_T_A, 2);
	put_ptr(&m, 12);
	put_a(&m, 1, a1);
	assert_int_equal(response_of(&m), DNS_PARSE_SHORT);
}

static void
test_response_pointers(void **state)
{
	static const uint8_t a1[4] = { 192, 0, 2, 9 };
	struct msg m;
	size_t a, b;

	(void)state;
	/*
	 * A loop: the answer's owner A is a pointer to B, a pointer in the
	 * CNAME's RDATA further on, which points back to A.
	 */
	build_response(&m, 5, 0, "l.example", DNS_T_A, 2);
	a = m.n;
	put_ptr(&m, a + 2 + 10);
	put_rr_fixed(&m, DNS_T_CNAME, 1, 2);
	b = m.n;
	put_ptr(&m, a);
	assert_int_equal(b, a + 12);
	put_ptr(&m, 12);
	put_a(&m, 1, a1);
	assert_int_equal(response_of(&m), DNS_PARSE_BAD_NAME);

	/*
	 * The same loop parked in a TXT and entered from behind: the owner
	 * points back to B, B back to A, and A forward to B again.
	 */
	build_response(&m, 5, 0, "l.example", DNS_T_A, 2);
	put_ptr(&m, 12);
	put_rr_fixed(&m, DNS_T_TXT, 1, 4);
	a = m.n;
	b = a + 2;
	put_ptr(&m, b);
	put_ptr(&m, a);
	put_ptr(&m, b);
	put_a(&m, 1, a1);
	assert_int_equal(response_of(&m), DNS_PARSE_BAD_NAME);
	/* Without the loop the same layout parses. */
	m.b[a + 1] = 12;
	assert_int_equal(response_of(&m), DNS_PARSE_OK);
	assert_int_equal(resp.nrr, 1);
	assert_int_equal(resp.nskipped, 1);
	assert_string_equal(resp.rr[0].name, "l.example");

	/* A plain forward pointer to a valid name. */
	build_response(&m, 5, 0, "f.example", DNS_T_A, 1);
	a = m.n;
	put_ptr(&m, a + 2 + 10 + 4);
	put_a(&m, 1, a1);
	put_name(&m, "later");
	assert_int_equal(response_of(&m), DNS_PARSE_BAD_NAME);

	/* A pointer to itself, and labels pointing back at their own start. */
	build_response(&m, 5, 0, "s.example", DNS_T_A, 1);
	put_ptr(&m, m.n);
	put_a(&m, 1, a1);
	assert_int_equal(response_of(&m), DNS_PARSE_BAD_NAME);
	build_response(&m, 5, 0, "s.example", DNS_T_A, 1);
	a = m.n;
	put_labels(&m, "ab");
	put_ptr(&m, a);
	put_a(&m, 1, a1);
	assert_int_equal(response_of(&m), DNS_PARSE_BAD_NAME);

	/* Into the header; the reserved 0x40 and 0x80 label types. */
	build_response(&m, 5, 0, "h.example", DNS_T_A, 1);
	put_ptr(&m, 4);
	put_a(&m, 1, a1);
	assert_int_equal(response_of(&m), DNS_PARSE_BAD_NAME);
	build_response(&m, 5, 0, "h.example", DNS_T_A, 1);
	put8(&m, 0x40);
	put8(&m, 0);
	put_a(&m, 1, a1);
	assert_int_equal(response_of(&m), DNS_PARSE_BAD_NAME);
	build_response(&m, 5, 0, "h.example", DNS_T_A, 1);
	put8(&m, 0x81);
	put8(&m, 'x');
	put8(&m, 0);
	put_a(&m, 1, a1);
	assert_int_equal(response_of(&m), DNS_PARSE_BAD_NAME);

	/* A pointer cut in half. */
	build_response(&m, 5, 0, "h.example", DNS_T_A, 1);
	put8(&m, 0xc0);
	assert_int_equal(response_of(&m), DNS_PARSE_SHORT);
}

/* A chain of hops pointers, each to the one before, parked in a TXT. */
static void
build_hops(struct msg *m, unsigned hops)
{
	static const uint8_t a1[4] = { 192, 0, 2, 3 };
	size_t first;
	unsigned i;

	build_response(m, 6, 0, "hop.example", DNS_T_A, 2);
	put_ptr(m, 12);
	put_rr_fixed(m, DNS_T_TXT, 1, (unsigned)(2 * hops));
	first = m->n;
	put_ptr(m, 12);
	for (i = 1; i < hops; i++)
		put_ptr(m, first + 2 * (i - 1));
	put_ptr(m, first + 2 * (hops - 1));
	put_a(m, 7, a1);
}

static void
test_response_hop_bound(void **state)
{
	struct msg m;

	(void)state;
	/* The answer's owner and hops pointers: hops + 1 in all. */
	build_hops(&m, 63);
	assert_int_equal(response_of(&m), DNS_PARSE_OK);
	assert_int_equal(resp.nrr, 1);
	assert_string_equal(resp.rr[0].name, "hop.example");
	build_hops(&m, 64);
	assert_int_equal(response_of(&m), DNS_PARSE_BAD_NAME);
}

static void
test_response_header_errors(void **state)
{
	struct msg m;

	(void)state;
	build_response(&m, 8, 0, "r.example", DNS_T_A, 0);
	assert_int_equal(response_of(&m), DNS_PARSE_OK);
	m.b[2] &= 0x7f;
	assert_int_equal(response_of(&m), DNS_PARSE_NOT_RESPONSE);
	assert_int_equal(resp.id, 8);
	m.b[2] |= 0x80;
	m.b[5] = 0;
	assert_int_equal(response_of(&m), DNS_PARSE_QDCOUNT);
	m.b[5] = 2;
	assert_int_equal(response_of(&m), DNS_PARSE_QDCOUNT);
	assert_int_equal(dns_parse_response(m.b, 11, &resp), DNS_PARSE_SHORT);
	assert_int_equal(resp.id, 8);
	assert_int_equal(dns_parse_response(m.b, 1, &resp), DNS_PARSE_SHORT);
	assert_int_equal(resp.id, 0);
	m.b[5] = 1;
	assert_int_equal(dns_parse_response(m.b, m.n - 1, &resp),
	    DNS_PARSE_SHORT);
	/* SERVFAIL's rcode from the low bits; bad name in the question. */
	m.b[3] = 0x82;
	assert_int_equal(response_of(&m), DNS_PARSE_OK);
	assert_int_equal(resp.rcode, DNS_R_SERVFAIL);
	m.b[13] = ' ';
	assert_int_equal(response_of(&m), DNS_PARSE_BAD_NAME);
}

/* ---- writers ---- */

static void
set_a(struct dns_rr *rr, const char *name, uint32_t ttl, uint8_t last)
{
	memset(rr, 0, sizeof(*rr));
	strcpy(rr->name, name);
	rr->type = DNS_T_A;
	rr->ttl = ttl;
	rr->data.a[0] = 192;
	rr->data.a[2] = 2;
	rr->data.a[3] = last;
}

static void
set_cname(struct dns_rr *rr, const char *name, uint32_t ttl,
    const char *target)
{
	memset(rr, 0, sizeof(*rr));
	strcpy(rr->name, name);
	rr->type = DNS_T_CNAME;
	rr->ttl = ttl;
	strcpy(rr->data.cname, target);
}

static void
assert_same_rr(const struct dns_rr *got, const struct dns_rr *want)
{
	assert_true(dns_name_equal(got->name, want->name));
	assert_int_equal(got->type, want->type);
	assert_int_equal(got->ttl, want->ttl);
	if (want->type == DNS_T_CNAME)
		assert_string_equal(got->data.cname, want->data.cname);
	else if (want->type == DNS_T_A)
		assert_memory_equal(got->data.a, want->data.a, 4);
	else
		assert_memory_equal(got->data.aaaa, want->data.aaaa, 16);
}

static void
test_write_answer_roundtrip(void **state)
{
	static const uint8_t opt[11] = { 0, 0, 41, 0x04, 0xd0, 0, 0, 0, 0, 0,
	    0 };
	struct dns_rr rr[5];
	struct dns_query q;
	struct msg m;
	uint8_t out[1232];
	int n;
	size_t i;

	(void)state;
	build_query(&m, 0xa5a5, "WwW.Example.com", DNS_T_A, 1232);
	assert_int_equal(query_of(&m, &q), DNS_PARSE_OK);
	set_cname(&rr[0], "www.example.COM", 300, "cdn.example.net");
	set_cname(&rr[1], "cdn.example.net.", 30, "Edge.cdn.example.net");
	set_a(&rr[2], "edge.cdn.example.net", 10, 1);
	set_a(&rr[3], "edge.cdn.example.net", 11, 2);
	memset(&rr[4], 0, sizeof(rr[4]));
	strcpy(rr[4].name, "v6.example.org");
	rr[4].type = DNS_T_AAAA;
	rr[4].ttl = 0xffffffffU;
	rr[4].data.aaaa[0] = 0x20;
	rr[4].data.aaaa[15] = 0x99;

	n = dns_write_answer(out, sizeof(out), 1232, &q, DNS_R_NOERROR, rr, 5);
	assert_true(n > 0);
	/* id, QR|RD|RA, counts 1/5/0/1 */
	assert_memory_equal(out,
	    "\xa5\xa5\x81\x80\x00\x01\x00\x05\x00\x00\x00\x01", 12);
	assert_memory_equal(out + 12, m.b + 12, 17 + 4);
	assert_memory_equal(out + n - 11, opt, 11);
	/* Owner names equal to earlier names are pointers. */
	assert_int_equal(out[12 + 21], 0xc0);
	assert_int_equal(out[12 + 22], 12);

	assert_int_equal(dns_parse_response(out, (size_t)n, &resp),
	    DNS_PARSE_OK);
	assert_int_equal(resp.id, 0xa5a5);
	assert_int_equal(resp.flags, 0x8180);
	assert_string_equal(resp.qname, "WwW.Example.com");
	assert_int_equal(resp.qtype, DNS_T_A);
	assert_int_equal(resp.qclass, 1);
	assert_int_equal(resp.nrr, 5);
	assert_int_equal(resp.nskipped, 0);
	for (i = 0; i < 5; i++)
		assert_same_rr(&resp.rr[i], &rr[i]);

	/* The same without EDNS and with NXDOMAIN, no records. */
	build_query(&m, 0x0102, "gone.example", DNS_T_AAAA, 0);
	m.b[2] = 0;		/* RD clear: RD clear in the answer */
	assert_int_equal(query_of(&m, &q), DNS_PARSE_OK);
	n = dns_write_answer(out, sizeof(out), 512, &q, DNS_R_NXDOMAIN, NULL,
	    0);
	assert_int_equal(n, (int)m.n);
	assert_memory_equal(out,
	    "\x01\x02\x80\x83\x00\x01\x00\x00\x00\x00\x00\x00", 12);
	assert_memory_equal(out + 12, m.b + 12, m.n - 12);
	assert_int_equal(dns_parse_response(out, (size_t)n, &resp),
	    DNS_PARSE_OK);
	assert_int_equal(resp.rcode, DNS_R_NXDOMAIN);

	/* A root question with a record owned by the root. */
	put_header(&m, 3, 0, 1, 0, 0, 0);
	put8(&m, 0);
	put16(&m, DNS_T_A);
	put16(&m, 1);
	assert_int_equal(query_of(&m, &q), DNS_PARSE_OK);
	set_a(&rr[0], "", 5, 5);
	n = dns_write_answer(out, sizeof(out), 512, &q, 0, rr, 1);
	assert_int_equal(n, 12 + 5 + 1 + 10 + 4);
	assert_int_equal(dns_parse_response(out, (size_t)n, &resp),
	    DNS_PARSE_OK);
	assert_int_equal(resp.nrr, 1);
	assert_same_rr(&resp.rr[0], &rr[0]);
}

static void
test_write_answer_truncated(void **state)
{
	static struct dns_rr rr[DNS_RR_MAX];
	char name[64];
	struct dns_query q;
	struct msg m;
	uint8_t out[8192];
	size_t i, qlen;
	int n, need;

	(void)state;
	build_query(&m, 0x0bad, "big.example", DNS_T_A, 1232);
	assert_int_equal(query_of(&m, &q), DNS_PARSE_OK);
	qlen = m.n - 11;		/* header and question */
	/* Each record: 2 (pointer) + 10 + 4, owner the question. */
	for (i = 0; i < DNS_RR_MAX; i++)
		set_a(&rr[i], "big.example", 60, (uint8_t)i);
	need = (int)qlen + DNS_RR_MAX * 16 + 11;
	n = dns_write_answer(out, sizeof(out), (size_t)need, &q, 0, rr,
	    DNS_RR_MAX);
	assert_int_equal(n, need);
	assert_int_equal(out[2] & 0x02, 0);
	assert_int_equal(out[7], DNS_RR_MAX);

	/* One byte less: nothing but the question and the OPT, TC set. */
	n = dns_write_answer(out, sizeof(out), (size_t)need - 1, &q, 0, rr,
	    DNS_RR_MAX);
	assert_int_equal(n, (int)qlen + 11);
	assert_memory_equal(out,
	    "\x0b\xad\x83\x80\x00\x01\x00\x00\x00\x00\x00\x01", 12);
	assert_int_equal(dns_parse_response(out, (size_t)n, &resp),
	    DNS_PARSE_OK);
	assert_int_equal(resp.nrr, 0);
	assert_int_equal(resp.flags & 0x0200, 0x0200);

	/* Long distinct names over 512 bytes; over TCP they fit. */
	build_query(&m, 0x0bad, "big.example", DNS_T_A, 0);
	assert_int_equal(query_of(&m, &q), DNS_PARSE_OK);
	for (i = 0; i < 12; i++) {
		snprintf(name, sizeof(name), "%02zu%s.example", i,
		    "-padding-padding-padding");
		set_a(&rr[i], name, 60, (uint8_t)i);
	}
	n = dns_write_answer(out, sizeof(out), DNS_UDP_PLAIN, &q, 0, rr, 12);
	assert_int_equal(n, (int)m.n);
	assert_int_equal(out[2] & 0x02, 0x02);
	assert_int_equal(out[7], 0);
	assert_int_equal(out[11], 0);
	n = dns_write_answer(out, sizeof(out), 65535, &q, 0, rr, 12);
	assert_true(n > DNS_UDP_PLAIN);
	assert_int_equal(out[2] & 0x02, 0);
	assert_int_equal(dns_parse_response(out, (size_t)n, &resp),
	    DNS_PARSE_OK);
	assert_int_equal(resp.nrr, 12);
	for (i = 0; i < 12; i++)
		assert_same_rr(&resp.rr[i], &rr[i]);

	/* cap below header + question + OPT; limit capped by cap. */
	build_query(&m, 0x0bad, "big.example", DNS_T_A, 1232);
	assert_int_equal(query_of(&m, &q), DNS_PARSE_OK);
	assert_int_equal(dns_write_answer(out, m.n - 1, 1232, &q, 0, rr, 1),
	    -1);
	n = dns_write_answer(out, m.n, 1232, &q, 0, rr, 1);
	assert_int_equal(n, (int)m.n);
	assert_int_equal(out[2] & 0x02, 0x02);

	/* Records that cannot be written at all. */
	rr[0].type = DNS_T_TXT;
	assert_int_equal(dns_write_answer(out, sizeof(out), 1232, &q, 0, rr, 1),
	    -1);
	set_cname(&rr[0], "big.example", 1, "a..b");
	assert_int_equal(dns_write_answer(out, sizeof(out), 1232, &q, 0, rr, 1),
	    -1);
}

static void
test_write_query(void **state)
{
	static const uint8_t want[] = {
		0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 1,
		7, 'E', 'x', 'a', 'm', 'p', 'l', 'e', 3, 'c', 'o', 'm', 0,
		0, 28, 0, 1,
		0, 0, 41, 0x04, 0xd0, 0, 0, 0, 0, 0, 0,
	};
	char label[80], name[4 * 80];
	struct dns_query q;
	uint8_t out[512];
	int n;

	(void)state;
	n = dns_write_query(out, sizeof(out), 0x1234, "Example.com",
	    DNS_T_AAAA, 1);
	assert_int_equal(n, sizeof(want));
	assert_memory_equal(out, want, sizeof(want));
	assert_int_equal(dns_parse_query(out, (size_t)n, &q), DNS_PARSE_OK);
	assert_int_equal(q.id, 0x1234);
	assert_int_equal(q.flags, 0x0100);
	assert_string_equal(q.qname, "Example.com");
	assert_true(q.edns);
	assert_int_equal(q.udp_size, DNS_EDNS_SIZE);

	/* A trailing dot is the same name. */
	n = dns_write_query(out, sizeof(out), 0x1234, "Example.com.",
	    DNS_T_AAAA, 1);
	assert_int_equal(n, sizeof(want));
	assert_memory_equal(out, want, sizeof(want));
	assert_int_equal(dns_write_query(out, sizeof(want), 0x1234,
	    "Example.com", DNS_T_AAAA, 1), sizeof(want));
	assert_int_equal(dns_write_query(out, sizeof(want) - 1, 0x1234,
	    "Example.com", DNS_T_AAAA, 1), -1);

	/* The root, "" or ".". */
	n = dns_write_query(out, sizeof(out), 1, ".", DNS_T_NS, 1);
	assert_int_equal(n, 12 + 1 + 4 + 11);
	assert_int_equal(dns_parse_query(out, (size_t)n, &q), DNS_PARSE_OK);
	assert_string_equal(q.qname, "");
	assert_int_equal(dns_write_query(out, sizeof(out), 1, "", DNS_T_NS,
	    1), n);

	/* Names that cannot be written. */
	assert_int_equal(dns_write_query(out, sizeof(out), 1, "a..b", 1, 1),
	    -1);
	assert_int_equal(dns_write_query(out, sizeof(out), 1, ".a", 1, 1), -1);
	assert_int_equal(dns_write_query(out, sizeof(out), 1, "a..", 1, 1), -1);
	assert_int_equal(dns_write_query(out, sizeof(out), 1, "..", 1, 1), -1);
	assert_int_equal(dns_write_query(out, sizeof(out), 1,
	    repeat(label, 'x', 64), 1, 1), -1);
	assert_int_equal(dns_write_query(out, sizeof(out), 1,
	    repeat(label, 'x', 63), 1, 1), 12 + 65 + 4 + 11);
	snprintf(name, sizeof(name), "%s.%s.%s.%s", label, label, label,
	    label);
	name[253] = '\0';
	assert_int_equal(dns_write_query(out, sizeof(out), 1, name, 1, 1),
	    12 + 255 + 4 + 11);
	name[253] = '.';
	name[254] = '\0';
	assert_int_equal(dns_write_query(out, sizeof(out), 1, name, 1, 1),
	    12 + 255 + 4 + 11);
	name[254] = 'x';
	assert_int_equal(dns_write_query(out, sizeof(out), 1, name, 1, 1), -1);
}

static void
test_write_formerr(void **state)
{
	static const uint8_t in[] = { 0xab, 0xcd, 0x01 };
	uint8_t out[64];

	(void)state;
	memset(out, 0xee, sizeof(out));
	assert_int_equal(dns_write_formerr(out, sizeof(out), in, 1), 12);
	assert_memory_equal(out, "\0\0\x80\x01\0\0\0\0\0\0\0\0", 12);
	assert_int_equal(out[12], 0xee);
	memset(out, 0xee, sizeof(out));
	assert_int_equal(dns_write_formerr(out, sizeof(out), NULL, 0), 12);
	assert_memory_equal(out, "\0\0\x80\x01\0\0\0\0\0\0\0\0", 12);
	assert_int_equal(dns_write_formerr(out, sizeof(out), in, 3), 12);
	assert_memory_equal(out, "\xab\xcd\x80\x01\0\0\0\0\0\0\0\0", 12);
	assert_int_equal(dns_write_formerr(out, 11, in, 3), -1);
	assert_int_equal(dns_write_formerr(out, 12, in, 2), 12);
}

/* ---- strings and names ---- */

static void
test_strings(void **state)
{
	char buf[16];

	(void)state;
	assert_string_equal(dns_type_str(DNS_T_A, buf, sizeof(buf)), "A");
	assert_string_equal(dns_type_str(DNS_T_AAAA, buf, sizeof(buf)),
	    "AAAA");
	assert_string_equal(dns_type_str(DNS_T_HTTPS, buf, sizeof(buf)),
	    "HTTPS");
	assert_string_equal(dns_type_str(DNS_T_ANY, buf, sizeof(buf)), "ANY");
	assert_string_equal(dns_type_str(46, buf, sizeof(buf)), "RRSIG");
	assert_string_equal(dns_type_str(123, buf, sizeof(buf)), "TYPE123");
	assert_string_equal(dns_type_str(65535, buf, 12), "TYPE65535");
	assert_string_equal(dns_rcode_str(0, buf, sizeof(buf)), "NOERROR");
	assert_string_equal(dns_rcode_str(1, buf, sizeof(buf)), "FORMERR");
	assert_string_equal(dns_rcode_str(3, buf, sizeof(buf)), "NXDOMAIN");
	assert_string_equal(dns_rcode_str(5, buf, sizeof(buf)), "REFUSED");
	assert_string_equal(dns_rcode_str(12, buf, sizeof(buf)), "RCODE12");
	assert_string_equal(dns_parse_error_str(DNS_PARSE_OK), "ok");
	assert_string_equal(dns_parse_error_str(DNS_PARSE_BAD_NAME),
	    "malformed name");
	assert_string_equal(dns_parse_error_str(DNS_PARSE_EXTRA_RR),
	    "unexpected records in a query");
	assert_string_equal(dns_parse_error_str((enum dns_parse_error)99),
	    "unknown parse error");
}

static void
test_name_equal(void **state)
{
	(void)state;
	assert_true(dns_name_equal("Example.COM", "example.com"));
	assert_true(dns_name_equal("example.com.", "EXAMPLE.com"));
	assert_true(dns_name_equal("example.com", "example.com."));
	assert_true(dns_name_equal("", "."));
	assert_true(dns_name_equal("", ""));
	assert_true(dns_name_equal("_A-1", "_a-1"));
	assert_false(dns_name_equal("example.com..", "example.com"));
	assert_false(dns_name_equal("example.co", "example.com"));
	assert_false(dns_name_equal("www.example.com", "example.com"));
	assert_false(dns_name_equal("a", ""));
	/* Only ASCII letters fold: '@' and '`' sit beside them. */
	assert_false(dns_name_equal("@", "`"));
	assert_false(dns_name_equal("[", "{"));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_query_a),
		cmocka_unit_test(test_query_types_and_opt),
		cmocka_unit_test(test_query_label_bytes),
		cmocka_unit_test(test_query_name_lengths),
		cmocka_unit_test(test_query_label_types),
		cmocka_unit_test(test_query_truncated),
		cmocka_unit_test(test_query_header_errors),
		cmocka_unit_test(test_query_sections),
		cmocka_unit_test(test_query_trailing),
		cmocka_unit_test(test_response_cname_chain),
		cmocka_unit_test(test_response_skipped),
		cmocka_unit_test(test_response_many),
		cmocka_unit_test(test_response_bad_rr),
		cmocka_unit_test(test_response_pointers),
		cmocka_unit_test(test_response_hop_bound),
		cmocka_unit_test(test_response_header_errors),
		cmocka_unit_test(test_write_answer_roundtrip),
		cmocka_unit_test(test_write_answer_truncated),
		cmocka_unit_test(test_write_query),
		cmocka_unit_test(test_write_formerr),
		cmocka_unit_test(test_strings),
		cmocka_unit_test(test_name_equal),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
