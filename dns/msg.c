/* msg.c: DNS messages on the wire (RFC 1035, EDNS per RFC 6891): parsers and writers. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "dns/dns.h"

#define FLAG_QR		0x8000U
#define FLAG_TC		0x0200U
#define FLAG_RD		0x0100U
#define FLAG_RA		0x0080U
#define OPCODE(f)	(((f) >> 11) & 0xfU)
#define CLASS_IN	1

/*
 * Pointers must go strictly backwards, which already ends every chain;
 * the hop bound only caps the work a hostile message can ask for.
 */
#define PTR_HOPS_MAX	64
/* A pointer holds 14 bits of offset. */
#define PTR_OFF_MAX	0x3fffU

#define RR_FIXED_LEN	10	/* type, class, TTL, RDLENGTH */
#define OPT_LEN		11	/* root owner, fixed part, no options */

/* Whole names already written, to compress repeats into pointers. */
#define WRITE_SEEN_MAX	16

static uint16_t
get16(const uint8_t *p)
{
	return (uint16_t)((unsigned)p[0] << 8 | p[1]);
}

static uint32_t
get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	    (uint32_t)p[2] << 8 | p[3];
}

static void
put16(uint8_t *p, unsigned v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void
put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

/*
 * Reads the name at *off into out (DNS_NAME_MAX + 1 bytes, always
 * NUL-terminated) and moves *off past the name's bytes in place. Only
 * buf[0..len) is read. A pointer must point below the start of the run
 * of labels it ends, and not into the header, so chains strictly descend.
 */
static enum dns_parse_error
name_read(const uint8_t *buf, size_t len, size_t *off, bool pointers,
    char *out)
{
	enum dns_parse_error e = DNS_PARSE_BAD_NAME;
	size_t pos = *off, run = *off, after = 0, n = 0, i;
	unsigned hops = 0;

	for (;;) {
		uint8_t c;

		if (pos >= len)
			goto short_name;
		c = buf[pos];
		if ((c & 0xc0) == 0xc0) {
			size_t target;

			if (!pointers)
				goto fail;
			if (len - pos < 2)
				goto short_name;
			target = (size_t)(c & 0x3f) << 8 | buf[pos + 1];
			if (target >= run || target < DNS_HDR_LEN ||
			    ++hops > PTR_HOPS_MAX)
				goto fail;
			if (hops == 1)
				after = pos + 2;
			pos = run = target;
			continue;
		}
		/* 0x40 (extended) and 0x80 (reserved) label types. */
		if (c & 0xc0)
			goto fail;
		if (c == 0)
			break;
		if (len - pos - 1 < c)
			goto short_name;
		if (n + (n > 0) + c > DNS_NAME_MAX)
			goto fail;
		if (n > 0)
			out[n++] = '.';
		for (i = 1; i <= c; i++) {
			uint8_t b = buf[pos + i];

			/* Keeps names printable and their dots unambiguous. */
			if (b < 0x21 || b > 0x7e || b == '.')
				goto fail;
			out[n++] = (char)b;
		}
		pos += 1 + (size_t)c;
	}
	out[n] = '\0';
	*off = hops > 0 ? after : pos + 1;
	return DNS_PARSE_OK;

short_name:
	e = DNS_PARSE_SHORT;
fail:
	out[0] = '\0';
	return e;
}

/* The question's name, type and class at *off. */
static enum dns_parse_error
question_read(const uint8_t *buf, size_t len, size_t *off, bool pointers,
    char *qname, uint16_t *qtype, uint16_t *qclass)
{
	enum dns_parse_error e;

	if ((e = name_read(buf, len, off, pointers, qname)) != DNS_PARSE_OK)
		return e;
	if (len - *off < 4)
		return DNS_PARSE_SHORT;
	*qtype = get16(buf + *off);
	*qclass = get16(buf + *off + 2);
	*off += 4;
	return DNS_PARSE_OK;
}

/*
 * The query's one additional record: an OPT whose owner is the root (RFC
 * 6891 6.1.2). Its options are checked to fill RDATA exactly, not read.
 */
static enum dns_parse_error
opt_read(const uint8_t *buf, size_t len, size_t *off, struct dns_query *q)
{
	enum dns_parse_error e;
	char owner[DNS_NAME_MAX + 1];
	size_t pos = *off, end;
	uint16_t rdlen;

	/* Other records may name the question with a pointer. */
	if ((e = name_read(buf, len, &pos, true, owner)) != DNS_PARSE_OK)
		return e;
	if (len - pos < RR_FIXED_LEN)
		return DNS_PARSE_SHORT;
	if (get16(buf + pos) != DNS_T_OPT)
		return DNS_PARSE_EXTRA_RR;
	if (owner[0] != '\0')
		return DNS_PARSE_BAD_RR;
	q->edns = true;
	q->udp_size = get16(buf + pos + 2);
	/* "Values lower than 512 MUST be treated as equal to 512." */
	if (q->udp_size < DNS_UDP_PLAIN)
		q->udp_size = DNS_UDP_PLAIN;
	rdlen = get16(buf + pos + 8);
	pos += RR_FIXED_LEN;
	if (rdlen > len - pos)
		return DNS_PARSE_BAD_RR;
	end = pos + rdlen;
	while (pos < end) {
		if (end - pos < 4 || get16(buf + pos + 2) > end - pos - 4)
			return DNS_PARSE_BAD_RR;
		pos += 4 + (size_t)get16(buf + pos + 2);
	}
	*off = end;
	return DNS_PARSE_OK;
}

enum dns_parse_error
dns_parse_query(const uint8_t *buf, size_t len, struct dns_query *q)
{
	enum dns_parse_error e;
	size_t off = DNS_HDR_LEN;

	memset(q, 0, sizeof(*q));
	q->udp_size = DNS_UDP_PLAIN;
	if (len >= 2)
		q->id = get16(buf);
	if (len < DNS_HDR_LEN)
		return DNS_PARSE_SHORT;
	q->flags = get16(buf + 2);
	if ((q->flags & FLAG_QR) || OPCODE(q->flags) != 0)
		return DNS_PARSE_NOT_QUERY;
	if (get16(buf + 4) != 1)
		return DNS_PARSE_QDCOUNT;
	if (get16(buf + 6) != 0 || get16(buf + 8) != 0 ||
	    get16(buf + 10) > 1)
		return DNS_PARSE_EXTRA_RR;
	/* Nothing precedes the question that a pointer could name. */
	e = question_read(buf, len, &off, false, q->qname, &q->qtype,
	    &q->qclass);
	if (e != DNS_PARSE_OK)
		return e;
	if (get16(buf + 10) == 1 &&
	    (e = opt_read(buf, len, &off, q)) != DNS_PARSE_OK)
		return e;
	if (off != len)
		return DNS_PARSE_TRAILING;
	return DNS_PARSE_OK;
}

/*
 * One answer record at *off. A, AAAA and CNAME of class IN go into r->rr
 * while there is room; everything else, and the overflow, is counted.
 */
static enum dns_parse_error
answer_read(const uint8_t *buf, size_t len, size_t *off,
    struct dns_response *r)
{
	enum dns_parse_error e;
	struct dns_rr scratch, *rr;
	uint16_t type, class, rdlen;
	size_t pos;

	rr = r->nrr < DNS_RR_MAX ? &r->rr[r->nrr] : &scratch;
	if ((e = name_read(buf, len, off, true, rr->name)) != DNS_PARSE_OK)
		return e;
	if (len - *off < RR_FIXED_LEN)
		return DNS_PARSE_SHORT;
	type = get16(buf + *off);
	class = get16(buf + *off + 2);
	rr->ttl = get32(buf + *off + 4);
	rdlen = get16(buf + *off + 8);
	pos = *off + RR_FIXED_LEN;
	if (rdlen > len - pos)
		return DNS_PARSE_BAD_RR;
	*off = pos + rdlen;

	if (class != CLASS_IN || (type != DNS_T_A && type != DNS_T_AAAA &&
	    type != DNS_T_CNAME)) {
		r->nskipped++;
		return DNS_PARSE_OK;
	}
	rr->type = type;
	switch (type) {
	case DNS_T_A:
		if (rdlen != sizeof(rr->data.a))
			return DNS_PARSE_BAD_RR;
		memcpy(rr->data.a, buf + pos, sizeof(rr->data.a));
		break;
	case DNS_T_AAAA:
		if (rdlen != sizeof(rr->data.aaaa))
			return DNS_PARSE_BAD_RR;
		memcpy(rr->data.aaaa, buf + pos, sizeof(rr->data.aaaa));
		break;
	default:
		/* Bounded by RDATA's end: the name must fill it exactly. */
		e = name_read(buf, *off, &pos, true, rr->data.cname);
		if (e == DNS_PARSE_SHORT || (e == DNS_PARSE_OK && pos != *off))
			return DNS_PARSE_BAD_RR;
		if (e != DNS_PARSE_OK)
			return e;
		break;
	}
	if (rr == &scratch)
		r->nskipped++;
	else
		r->nrr++;
	return DNS_PARSE_OK;
}

enum dns_parse_error
dns_parse_response(const uint8_t *buf, size_t len, struct dns_response *r)
{
	enum dns_parse_error e;
	size_t off = DNS_HDR_LEN;
	unsigned ancount, i;

	memset(r, 0, sizeof(*r));
	if (len >= 2)
		r->id = get16(buf);
	if (len < DNS_HDR_LEN)
		return DNS_PARSE_SHORT;
	r->flags = get16(buf + 2);
	r->rcode = (uint8_t)(r->flags & 0xfU);
	if (!(r->flags & FLAG_QR))
		return DNS_PARSE_NOT_RESPONSE;
	if (get16(buf + 4) != 1)
		return DNS_PARSE_QDCOUNT;
	ancount = get16(buf + 6);
	e = question_read(buf, len, &off, true, r->qname, &r->qtype,
	    &r->qclass);
	if (e != DNS_PARSE_OK)
		return e;
	for (i = 0; i < ancount; i++)
		if ((e = answer_read(buf, len, &off, r)) != DNS_PARSE_OK)
			return e;
	return DNS_PARSE_OK;
}

const char *
dns_parse_error_str(enum dns_parse_error e)
{
	switch (e) {
	case DNS_PARSE_OK:
		return "ok";
	case DNS_PARSE_SHORT:
		return "message too short";
	case DNS_PARSE_NOT_QUERY:
		return "not a standard query";
	case DNS_PARSE_NOT_RESPONSE:
		return "not a response";
	case DNS_PARSE_QDCOUNT:
		return "not exactly one question";
	case DNS_PARSE_BAD_NAME:
		return "malformed name";
	case DNS_PARSE_BAD_RR:
		return "malformed record";
	case DNS_PARSE_TRAILING:
		return "trailing bytes after the message";
	case DNS_PARSE_EXTRA_RR:
		return "unexpected records in a query";
	}
	return "unknown parse error";
}

/*
 * The uncompressed wire length of a presentation name (one trailing dot
 * allowed, "" or "." for the root), or 0 if it cannot be written: an
 * empty label, a label over 63 bytes, more than 253 bytes.
 */
static size_t
name_wire_len(const char *name)
{
	size_t n, label = 0;

	for (n = 0; name[n] != '\0'; n++) {
		if (n > DNS_NAME_MAX)
			return 0;
		if (name[n] != '.') {
			if (++label > DNS_LABEL_MAX)
				return 0;
			continue;
		}
		if (label == 0 && !(n == 0 && name[1] == '\0'))
			return 0;
		label = 0;
	}
	if (n > 0 && name[n - 1] == '.')
		n--;
	if (n > DNS_NAME_MAX)
		return 0;
	return n == 0 ? 1 : n + 2;
}

/* Writes name (name_wire_len() bytes, checked by the caller) at out. */
static void
name_put(uint8_t *out, const char *name)
{
	size_t label = 0, at = 0, i;

	for (i = 0; name[i] != '\0'; i++) {
		if (name[i] == '.') {
			/* Only the root has an empty label here. */
			if (label > 0) {
				out[at] = (uint8_t)label;
				at += label + 1;
			}
			label = 0;
			continue;
		}
		out[at + 1 + label++] = (uint8_t)name[i];
	}
	if (label > 0) {
		out[at] = (uint8_t)label;
		at += label + 1;
	}
	out[at] = 0;
}

struct name_seen {
	const char	*name;
	size_t		 off;
};

struct writer {
	uint8_t			*out;
	size_t			 pos;
	size_t			 end;	/* write no further */
	struct name_seen	 seen[WRITE_SEEN_MAX];
	size_t			 nseen;
};

/* The bytes name takes at w's position: a pointer if written before. */
static size_t
name_cost(const struct writer *w, const char *name, size_t *ptr)
{
	size_t i;

	for (i = 0; i < w->nseen; i++) {
		if (dns_name_equal(w->seen[i].name, name)) {
			*ptr = w->seen[i].off;
			return 2;
		}
	}
	*ptr = 0;
	return name_wire_len(name);
}

/* Writes name, compressed if possible; false if it does not fit. */
static bool
name_write(struct writer *w, const char *name)
{
	size_t ptr, n = name_cost(w, name, &ptr);

	if (n > w->end - w->pos)
		return false;
	if (ptr != 0) {
		put16(w->out + w->pos, 0xc000U | (unsigned)ptr);
	} else {
		name_put(w->out + w->pos, name);
		/* The root is shorter than a pointer to it. */
		if (n > 2 && w->pos <= PTR_OFF_MAX &&
		    w->nseen < WRITE_SEEN_MAX) {
			w->seen[w->nseen].name = name;
			w->seen[w->nseen].off = w->pos;
			w->nseen++;
		}
	}
	w->pos += n;
	return true;
}

static size_t
rdata_len(const struct dns_rr *rr)
{
	switch (rr->type) {
	case DNS_T_A:
		return sizeof(rr->data.a);
	case DNS_T_AAAA:
		return sizeof(rr->data.aaaa);
	case DNS_T_CNAME:
		return name_wire_len(rr->data.cname);
	}
	return 0;
}

static bool
rr_write(struct writer *w, const struct dns_rr *rr)
{
	size_t rdstart;

	if (!name_write(w, rr->name) || w->end - w->pos < RR_FIXED_LEN)
		return false;
	put16(w->out + w->pos, rr->type);
	put16(w->out + w->pos + 2, CLASS_IN);
	put32(w->out + w->pos + 4, rr->ttl);
	w->pos += RR_FIXED_LEN;
	rdstart = w->pos;
	switch (rr->type) {
	case DNS_T_A:
	case DNS_T_AAAA:
		if (rdata_len(rr) > w->end - w->pos)
			return false;
		memcpy(w->out + w->pos, rr->type == DNS_T_A ?
		    rr->data.a : rr->data.aaaa, rdata_len(rr));
		w->pos += rdata_len(rr);
		break;
	default:
		if (!name_write(w, rr->data.cname))
			return false;
		break;
	}
	put16(w->out + rdstart - 2, (unsigned)(w->pos - rdstart));
	return true;
}

/* An OPT record offering DNS_EDNS_SIZE, no options, version 0. */
static void
opt_put(uint8_t *out)
{
	out[0] = 0;
	put16(out + 1, DNS_T_OPT);
	put16(out + 3, DNS_EDNS_SIZE);
	put32(out + 5, 0);
	put16(out + 9, 0);
}

static void
header_put(uint8_t *out, uint16_t id, unsigned flags, unsigned qd,
    unsigned an, unsigned ar)
{
	put16(out, id);
	put16(out + 2, flags);
	put16(out + 4, qd);
	put16(out + 6, an);
	put16(out + 8, 0);
	put16(out + 10, ar);
}

int
dns_write_answer(uint8_t *out, size_t cap, size_t limit,
    const struct dns_query *q, unsigned rcode, const struct dns_rr *rr,
    size_t nrr)
{
	struct writer w;
	size_t qlen, optlen = q->edns ? OPT_LEN : 0, i, qend;
	unsigned flags = FLAG_QR | (q->flags & FLAG_RD) | FLAG_RA |
	    (rcode & (0xfU | DNS_FLAG_TC));
	bool fits = true;

	if ((qlen = name_wire_len(q->qname)) == 0)
		return -1;
	if (cap > 65535)
		cap = 65535;
	if (DNS_HDR_LEN + qlen + 4 + optlen > cap)
		return -1;
	for (i = 0; i < nrr; i++)
		if (name_wire_len(rr[i].name) == 0 || rdata_len(&rr[i]) == 0)
			return -1;

	memset(&w, 0, sizeof(w));
	w.out = out;
	w.pos = DNS_HDR_LEN;
	w.end = cap;
	(void)name_write(&w, q->qname);
	put16(out + w.pos, q->qtype);
	put16(out + w.pos + 2, q->qclass);
	w.pos += 4;
	qend = w.pos;

	/* Keep room for the OPT: it goes even when the records do not. */
	w.end = (limit < cap ? limit : cap);
	w.end = w.end >= qend + optlen ? w.end - optlen : qend;
	for (i = 0; i < nrr && fits; i++)
		fits = rr_write(&w, &rr[i]);
	if (!fits || qend + optlen > limit) {
		/* All or nothing: a client retries a truncated answer on TCP. */
		w.pos = qend;
		nrr = 0;
		flags |= FLAG_TC;
	}
	if (optlen > 0) {
		opt_put(out + w.pos);
		w.pos += optlen;
	}
	header_put(out, q->id, flags, 1, (unsigned)nrr, optlen > 0);
	return (int)w.pos;
}

int
dns_write_formerr(uint8_t *out, size_t cap, const uint8_t *in, size_t inlen)
{
	if (cap < DNS_HDR_LEN)
		return -1;
	header_put(out, inlen >= 2 ? get16(in) : 0, FLAG_QR | DNS_R_FORMERR,
	    0, 0, 0);
	return DNS_HDR_LEN;
}

int
dns_write_query(uint8_t *out, size_t cap, uint16_t id, const char *name,
    uint16_t qtype, uint16_t qclass)
{
	size_t qlen = name_wire_len(name), pos = DNS_HDR_LEN;

	if (qlen == 0 || DNS_HDR_LEN + qlen + 4 + OPT_LEN > cap)
		return -1;
	header_put(out, id, FLAG_RD, 1, 0, 1);
	name_put(out + pos, name);
	pos += qlen;
	put16(out + pos, qtype);
	put16(out + pos + 2, qclass);
	pos += 4;
	opt_put(out + pos);
	return (int)(pos + OPT_LEN);
}

const char *
dns_type_str(uint16_t type, char *buf, size_t len)
{
	static const struct {
		uint16_t	 type;
		const char	*name;
	} names[] = {
		{ DNS_T_A, "A" }, { DNS_T_NS, "NS" }, { DNS_T_CNAME, "CNAME" },
		{ DNS_T_SOA, "SOA" }, { DNS_T_PTR, "PTR" }, { DNS_T_MX, "MX" },
		{ DNS_T_TXT, "TXT" }, { DNS_T_AAAA, "AAAA" },
		{ DNS_T_SRV, "SRV" }, { 35, "NAPTR" }, { 39, "DNAME" },
		{ DNS_T_OPT, "OPT" }, { 43, "DS" }, { 46, "RRSIG" },
		{ 47, "NSEC" }, { 48, "DNSKEY" }, { 50, "NSEC3" },
		{ 52, "TLSA" }, { DNS_T_SVCB, "SVCB" },
		{ DNS_T_HTTPS, "HTTPS" }, { 252, "AXFR" }, { 251, "IXFR" },
		{ DNS_T_ANY, "ANY" }, { 257, "CAA" },
	};
	size_t i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (names[i].type == type)
			return names[i].name;
	(void)snprintf(buf, len, "TYPE%u", (unsigned)type);
	return buf;
}

const char *
dns_rcode_str(unsigned rcode, char *buf, size_t len)
{
	static const char *const names[] = {
		"NOERROR", "FORMERR", "SERVFAIL", "NXDOMAIN", "NOTIMP",
		"REFUSED", "YXDOMAIN", "YXRRSET", "NXRRSET", "NOTAUTH",
		"NOTZONE",
	};

	if (rcode < sizeof(names) / sizeof(names[0]))
		return names[rcode];
	(void)snprintf(buf, len, "RCODE%u", rcode);
	return buf;
}

static char
ascii_lower(char c)
{
	return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

bool
dns_name_equal(const char *a, const char *b)
{
	size_t alen = strlen(a), blen = strlen(b), i;

	if (alen > 0 && a[alen - 1] == '.')
		alen--;
	if (blen > 0 && b[blen - 1] == '.')
		blen--;
	if (alen != blen)
		return false;
	for (i = 0; i < alen; i++)
		if (ascii_lower(a[i]) != ascii_lower(b[i]))
			return false;
	return true;
}
