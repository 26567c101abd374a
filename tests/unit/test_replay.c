/* test_replay.c: the verdict engine over small traces written with libpcap. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <cmocka.h>

#include <pcap/pcap.h>

#include "gateway/capture.h"

#define T0	1700000000000000LL	/* the trace's first timestamp, µs */

/* ---- packets ------------------------------------------------------------ */

static uint32_t
ip(const char *s)
{
	struct in_addr a;

	assert_int_equal(inet_pton(AF_INET, s, &a), 1);
	return a.s_addr;
}

static void
put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void
put32(uint8_t *p, uint32_t v)
{
	put16(p, (uint16_t)(v >> 16));
	put16(p + 2, (uint16_t)v);
}

/* One frame of the trace under construction. */
struct frame {
	int64_t		ts_us;
	size_t		len;
	uint8_t		data[2048];
};

static struct frame trace[128];
static size_t ntrace;
static int64_t clock_us;

/* Appends an IPv4 packet: header, l4 header of l4hlen bytes, payload. */
static uint8_t *
packet(const char *src, const char *dst, uint8_t proto, size_t l4hlen,
    const void *payload, size_t plen)
{
	struct frame *f;
	uint8_t *p;
	uint32_t s = ip(src), d = ip(dst);

	assert_true(ntrace < sizeof(trace) / sizeof(trace[0]));
	f = &trace[ntrace++];
	clock_us += 10000;		/* 10 ms apart */
	f->ts_us = clock_us;
	f->len = 20 + l4hlen + plen;
	assert_true(f->len <= sizeof(f->data));
	p = f->data;
	memset(p, 0, f->len);
	p[0] = 0x45;
	put16(p + 2, (uint16_t)f->len);
	p[8] = 64;
	p[9] = proto;
	memcpy(p + 12, &s, 4);
	memcpy(p + 16, &d, 4);
	if (plen > 0)
		memcpy(p + 20 + l4hlen, payload, plen);
	return p + 20;
}

#define SYN	0x02
#define ACK	0x10
#define PSH	0x08
#define FIN	0x01
#define RST	0x04

static void
tcp(const char *src, uint16_t sport, const char *dst, uint16_t dport,
    uint8_t flags, uint32_t seq, const void *payload, size_t plen)
{
	uint8_t *h = packet(src, dst, IPPROTO_TCP, 20, payload, plen);

	put16(h, sport);
	put16(h + 2, dport);
	put32(h + 4, seq);
	h[12] = 5 << 4;
	h[13] = flags;
	put16(h + 14, 65535);
}

static void
udp(const char *src, uint16_t sport, const char *dst, uint16_t dport,
    const void *payload, size_t plen)
{
	uint8_t *h = packet(src, dst, IPPROTO_UDP, 8, payload, plen);

	put16(h, sport);
	put16(h + 2, dport);
	put16(h + 4, (uint16_t)(8 + plen));
}

static void
icmp_echo(const char *src, const char *dst, uint8_t type, uint16_t id,
    uint16_t seq)
{
	static const uint8_t data[8] = "pingping";
	uint8_t *h = packet(src, dst, IPPROTO_ICMP, 8, data, sizeof(data));

	h[0] = type;
	put16(h + 4, id);
	put16(h + 6, seq);
}

#define SB	"10.213.0.2"
#define GW	"10.213.0.1"

/* A query from the sandbox to the gateway's resolver, and its answer
 * with addr (NULL: NXDOMAIN). */
static void
dns(uint16_t port, uint16_t id, const char *name, uint16_t qtype,
    const char *addr)
{
	uint8_t msg[512];
	struct dns_query q;
	struct dns_rr rr;
	int n;

	n = dns_write_query(msg, sizeof(msg), id, name, qtype, 1);
	assert_true(n > 0);
	udp(SB, port, GW, 53, msg, (size_t)n);
	assert_int_equal(dns_parse_query(msg, (size_t)n, &q), DNS_PARSE_OK);
	memset(&rr, 0, sizeof(rr));
	snprintf(rr.name, sizeof(rr.name), "%s", name);
	rr.type = DNS_T_A;
	rr.ttl = 60;
	if (addr != NULL) {
		uint32_t a = ip(addr);

		memcpy(rr.data.a, &a, 4);
	}
	n = dns_write_answer(msg, sizeof(msg), sizeof(msg), &q,
	    addr != NULL ? DNS_R_NOERROR : DNS_R_NXDOMAIN, &rr,
	    addr != NULL ? 1 : 0);
	assert_true(n > 0);
	udp(GW, 53, SB, port, msg, (size_t)n);
}

/* captured from openssl s_client 3.0 -servername a.test -alpn h2
 * (tests/unit/test_tls.c) */
static const uint8_t hello_a[] = {
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

/* A TLS connection: SYN, the server's SYN/ACK, ACK, then the hello cut
 * at split (0: one segment), then the server's reply and a FIN. */
static void
tls_flow(uint16_t sport, const char *dst, size_t split)
{
	const uint32_t isn = 1000u * sport;

	tcp(SB, sport, dst, 443, SYN, isn, NULL, 0);
	tcp(dst, 443, SB, sport, SYN | ACK, 77, NULL, 0);
	tcp(SB, sport, dst, 443, ACK, isn + 1, NULL, 0);
	if (split == 0) {
		tcp(SB, sport, dst, 443, ACK | PSH, isn + 1, hello_a,
		    sizeof(hello_a));
	} else {
		tcp(SB, sport, dst, 443, ACK, isn + 1, hello_a, split);
		tcp(SB, sport, dst, 443, ACK | PSH, isn + 1 + (uint32_t)split,
		    hello_a + split, sizeof(hello_a) - split);
	}
	tcp(dst, 443, SB, sport, ACK | PSH, 78, "server", 6);
	tcp(SB, sport, dst, 443, ACK | FIN, isn + 1 + sizeof(hello_a), NULL, 0);
}

static void
http_flow(uint16_t sport, const char *dst, const char *host)
{
	char req[256];
	const uint32_t isn = 1000u * sport;
	int n = snprintf(req, sizeof(req),
	    "GET /x HTTP/1.1\r\nHost: %s\r\nUser-Agent: t\r\n\r\n", host);

	tcp(SB, sport, dst, 80, SYN, isn, NULL, 0);
	tcp(dst, 80, SB, sport, SYN | ACK, 5, NULL, 0);
	tcp(SB, sport, dst, 80, ACK, isn + 1, NULL, 0);
	tcp(SB, sport, dst, 80, ACK | PSH, isn + 1, req, (size_t)n);
	tcp(dst, 80, SB, sport, ACK | PSH, 6, "HTTP/1.1 200 OK\r\n\r\n", 19);
	tcp(SB, sport, dst, 80, ACK | FIN, isn + 1 + (uint32_t)n, NULL, 0);
}

/* ---- running --------------------------------------------------------- */

static char dir[64];
static char tracefile[128];

static int
setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/test_replay.XXXXXX");
	if (mkdtemp(dir) == NULL)
		return -1;
	snprintf(tracefile, sizeof(tracefile), "%s/t.pcap", dir);
	return 0;
}

static int
teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static int
reset(void **state)
{
	(void)state;
	ntrace = 0;
	clock_us = T0;
	return 0;
}

/* Writes the trace with linktype (framing each packet accordingly). */
static void
write_trace(int linktype)
{
	pcap_t *p = pcap_open_dead(linktype, 65535);
	pcap_dumper_t *d;
	size_t i;

	assert_non_null(p);
	d = pcap_dump_open(p, tracefile);
	assert_non_null(d);
	for (i = 0; i < ntrace; i++) {
		struct pcap_pkthdr h;
		uint8_t buf[2100];
		size_t hl = 0;

		memset(buf, 0, sizeof(buf));
		if (linktype == DLT_EN10MB) {
			memset(buf, 0x02, 12);		/* MACs */
			put16(buf + 12, 0x0800);
			hl = 14;
		} else if (linktype == DLT_LINUX_SLL) {
			put16(buf, 4);			/* outgoing */
			put16(buf + 2, 1);		/* ARPHRD_ETHER */
			put16(buf + 4, 6);
			put16(buf + 14, 0x0800);
			hl = 16;
		}
		memcpy(buf + hl, trace[i].data, trace[i].len);
		h.ts.tv_sec = trace[i].ts_us / 1000000;
		h.ts.tv_usec = trace[i].ts_us % 1000000;
		h.caplen = h.len = (bpf_u_int32)(hl + trace[i].len);
		pcap_dump((u_char *)d, &h, buf);
		if (linktype == DLT_EN10MB && i == 0) {
			/* an ARP frame and an IPv6 one: skipped */
			put16(buf + 12, 0x0806);
			pcap_dump((u_char *)d, &h, buf);
			put16(buf + 12, 0x86dd);
			pcap_dump((u_char *)d, &h, buf);
		}
	}
	pcap_dump_close(d);
	pcap_close(p);
}

static struct policy *
parse(const char *text)
{
	char err[256];
	struct policy *p = policy_parse(text, strlen(text), "t.json", err,
	    sizeof(err));

	if (p == NULL)
		fail_msg("%s", err);
	return p;
}

/* The rows, one line each, in the order they came. */
struct out {
	char	lines[64][1200];
	size_t	n;
	int64_t	ts[64];
	uint64_t seq[64];
	uint8_t	proto[64];
};

static void
on_row(void *arg, const struct gw_replay_row *w)
{
	struct out *o = arg;
	char dst[INET_ADDRSTRLEN];
	struct in_addr a = { .s_addr = w->daddr };

	assert_true(o->n < 64);
	inet_ntop(AF_INET, &a, dst, sizeof(dst));
	if (w->kind == GW_REPLAY_DNS)
		snprintf(o->lines[o->n], sizeof(o->lines[0]),
		    "dns %s %s %s %s %s [%s]", w->qname, w->qtype, w->verdict,
		    w->reason, w->rcode, w->answers);
	else
		snprintf(o->lines[o->n], sizeof(o->lines[0]),
		    "%s %s:%u %s %s name=%s sni=%s host=%s",
		    w->proto == IPPROTO_TCP ? "tcp" : w->proto == IPPROTO_UDP ?
		    "udp" : w->proto == IPPROTO_ICMP ? "icmp" : "ip", dst,
		    w->dport, w->verdict, w->reason, w->name, w->sni,
		    w->http_host);
	o->ts[o->n] = w->ts_us;
	o->seq[o->n] = w->seq;
	o->proto[o->n] = w->proto;
	o->n++;
}

static struct gw_replay_opts
opts(const struct policy *p)
{
	struct gw_replay_opts o = {
		.policy = p,
		.pool_net = ip("10.213.0.0"),
		.pool_mask = htonl(0xffff0000u),
		.uplink = { ip("100.64.213.2"), ip("100.64.213.1") },
		.ttl_min = 30,
		.ttl_max = 600,
		.grace = 10,
	};

	return o;
}

static void
replay(const char *policy_text, int linktype, struct out *o)
{
	struct policy *p = parse(policy_text);
	struct gw_replay_opts op = opts(p);
	struct gw_replay *r;
	char err[256];

	write_trace(linktype);
	memset(o, 0, sizeof(*o));
	r = gw_replay_new(&op, on_row, o);
	assert_non_null(r);
	if (gw_replay_file(tracefile, &r, 1, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	assert_int_equal(gw_replay_sandbox_addr(r), ip(SB));
	gw_replay_free(r);
	policy_free(p);
}

static void
assert_rows(const struct out *o, const char *const *want, size_t n)
{
	size_t i;

	for (i = 0; i < o->n && i < n; i++)
		if (strcmp(o->lines[i], want[i]) != 0)
			fail_msg("row %zu: got '%s', expected '%s'", i,
			    o->lines[i], want[i]);
	if (o->n != n) {
		for (i = 0; i < o->n; i++)
			print_message("row %zu: %s\n", i, o->lines[i]);
		fail_msg("%zu rows, expected %zu", o->n, n);
	}
}

/* ---- the brief's trace ---------------------------------------------- */

static const char policy_ab[] =
    "{\"network\":{\"allowedDomains\":[\"a.test\",\"b.test\"]}}";
static const char policy_a[] =
    "{\"network\":{\"allowedDomains\":[\"a.test\"]}}";

static void
mixed_trace(void)
{
	dns(40001, 0x1111, "a.test", DNS_T_A, "192.0.2.10");
	tls_flow(50001, "192.0.2.10", 100);		/* two segments */
	tcp(SB, 50002, "203.0.113.66", 443, SYN, 42, NULL, 0);
	tcp("203.0.113.66", 443, SB, 50002, RST | ACK, 0, NULL, 0);
	udp(SB, 50003, "198.51.100.53", 53, "\x12\x34", 2);
	udp(SB, 50003, "198.51.100.53", 53, "\x12\x35", 2);	/* same flow */
	http_flow(50004, "192.0.2.10", "b.test");	/* not resolved yet */
	dns(40002, 0x2222, "b.test", DNS_T_A, "192.0.2.10");
	http_flow(50005, "192.0.2.10", "b.test");
}

static void
test_mixed(void **state)
{
	static const char *const want[] = {
		"dns a.test A allow allowed_domain NOERROR [192.0.2.10]",
		"tcp 192.0.2.10:443 allow allowed_domain name=a.test sni=a.test host=",
		"tcp 203.0.113.66:443 deny no_dns_binding name= sni= host=",
		"udp 198.51.100.53:53 deny dns_bypass name= sni= host=",
		"tcp 192.0.2.10:80 deny host_binding_mismatch name=a.test sni= host=b.test",
		"dns b.test A allow allowed_domain NOERROR [192.0.2.10]",
		/* the address is bound to both names now */
		"tcp 192.0.2.10:80 allow allowed_domain name=b.test sni= host=b.test",
	};
	static const char *const want_a[] = {
		"dns a.test A allow allowed_domain NOERROR [192.0.2.10]",
		"tcp 192.0.2.10:443 allow allowed_domain name=a.test sni=a.test host=",
		"tcp 203.0.113.66:443 deny no_dns_binding name= sni= host=",
		"udp 198.51.100.53:53 deny dns_bypass name= sni= host=",
		"tcp 192.0.2.10:80 deny host_not_allowed name=a.test sni= host=b.test",
		"dns b.test A deny not_allowlisted NXDOMAIN []",
		"tcp 192.0.2.10:80 deny host_not_allowed name=a.test sni= host=b.test",
	};
	struct out o;

	(void)state;
	mixed_trace();
	replay(policy_ab, DLT_RAW, &o);
	assert_rows(&o, want, sizeof(want) / sizeof(want[0]));
	/* the TLS row is decided when the hello's second segment came */
	assert_int_equal(o.ts[1], T0 + 7 * 10000);
	assert_int_equal(o.seq[1], 3);		/* its SYN */

	replay(policy_a, DLT_RAW, &o);
	assert_rows(&o, want_a, sizeof(want_a) / sizeof(want_a[0]));

	/* other framings of the same packets decide the same */
	replay(policy_ab, DLT_EN10MB, &o);
	assert_rows(&o, want, sizeof(want) / sizeof(want[0]));
	replay(policy_ab, DLT_LINUX_SLL, &o);
	assert_rows(&o, want, sizeof(want) / sizeof(want[0]));
}

static void
test_audit(void **state)
{
	static const char *const want[] = {
		"dns a.test A allow allowed_domain NOERROR [192.0.2.10]",
		"tcp 192.0.2.10:443 allow allowed_domain name=a.test sni=a.test host=",
		"tcp 203.0.113.66:443 audit no_dns_binding name= sni= host=",
		"udp 198.51.100.53:53 audit dns_bypass name= sni= host=",
		"tcp 192.0.2.10:80 audit host_not_allowed name=a.test sni= host=b.test",
		"dns b.test A audit not_allowlisted NOERROR [192.0.2.10]",
		"tcp 192.0.2.10:80 audit host_not_allowed name=a.test sni= host=b.test",
	};
	struct out o;

	(void)state;
	mixed_trace();
	replay("{\"network\":{\"allowedDomains\":[\"a.test\"]},"
	    "\"sluice\":{\"mode\":\"audit\"}}", DLT_RAW, &o);
	assert_rows(&o, want, sizeof(want) / sizeof(want[0]));
}

/* --against: exactly the rows whose verdict or reason differ. */
struct pair {
	struct out	a, b;
};

static void
test_against(void **state)
{
	struct policy *pa = parse(policy_ab), *pb = parse(policy_a);
	struct gw_replay_opts oa = opts(pa), ob = opts(pb);
	static struct pair pr;
	struct gw_replay *r[2];
	char err[256], got[512] = "";
	size_t i;

	(void)state;
	mixed_trace();
	write_trace(DLT_RAW);
	memset(&pr, 0, sizeof(pr));
	r[0] = gw_replay_new(&oa, on_row, &pr.a);
	r[1] = gw_replay_new(&ob, on_row, &pr.b);
	assert_non_null(r[0]);
	assert_non_null(r[1]);
	assert_int_equal(gw_replay_file(tracefile, r, 2, err, sizeof(err)), 0);
	/* one pass, the same openings: rows pair up one to one here */
	assert_int_equal(pr.a.n, pr.b.n);
	for (i = 0; i < pr.a.n; i++) {
		assert_int_equal(pr.a.seq[i], pr.b.seq[i]);
		if (strcmp(pr.a.lines[i], pr.b.lines[i]) != 0) {
			char s[16];

			snprintf(s, sizeof(s), "%llu ",
			    (unsigned long long)pr.a.seq[i]);
			strcat(got, s);
		}
	}
	/* the host_binding_mismatch HTTP flow (SYN is packet 14), the
	 * b.test query (20) and the later HTTP flow (22) */
	assert_string_equal(got, "14 20 22 ");
	gw_replay_free(r[0]);
	gw_replay_free(r[1]);
	policy_free(pa);
	policy_free(pb);
}

static void
test_cidr_icmp_internal_and_cache(void **state)
{
	static const char *const want[] = {
		"tcp 198.51.100.7:5432 allow allowed_cidr name= sni= host=",
		"icmp 192.0.2.10:0 deny proto_not_allowed name= sni= host=",
		"icmp 192.0.2.10:0 deny proto_not_allowed name= sni= host=",
		"tcp 10.213.0.6:22 deny internal_destination name= sni= host=",
		"udp 10.213.0.6:53 deny internal_destination name= sni= host=",
		"udp 192.0.2.10:443 deny quic name= sni= host=",
		"tcp 100.64.213.1:9100 deny internal_destination name= sni= host=",
		"tcp 198.51.100.7:5432 allow allowed_cidr name= sni= host=",
		"icmp 192.0.2.10:0 deny proto_not_allowed name= sni= host=",
	};
	struct out o;

	(void)state;
	tcp(SB, 50010, "198.51.100.7", 5432, SYN, 1, NULL, 0);
	tcp(SB, 50010, "198.51.100.7", 5432, SYN, 1, NULL, 0);	/* again */
	tcp(SB, 50010, "198.51.100.7", 5432, ACK, 2, "data", 4);
	icmp_echo(SB, "192.0.2.10", 8, 7, 1);
	icmp_echo("192.0.2.10", SB, 0, 7, 1);
	icmp_echo(SB, "192.0.2.10", 8, 7, 2);
	/* another ping (another id) within 30 s: another attempt, with
	 * its own row (conntrack keys echoes on their id too) */
	icmp_echo(SB, "192.0.2.10", 8, 8, 1);
	tcp(SB, 50011, "10.213.0.6", 22, SYN, 1, NULL, 0);
	udp(SB, 50012, "10.213.0.6", 53, "x", 1);	/* another sandbox */
	udp(SB, 50013, "192.0.2.10", 443, "quic", 4);
	/* the uplink's peer (the host), though a CIDR covers it */
	tcp(SB, 50014, "100.64.213.1", 9100, SYN, 1, NULL, 0);
	/* the same ports 40 s later: a new connection, a new row (an
	 * allowance is cached for 2 s only) */
	clock_us += 40000000;
	tcp(SB, 50010, "198.51.100.7", 5432, SYN, 99, NULL, 0);
	icmp_echo(SB, "192.0.2.10", 8, 9, 1);
	replay("{\"sluice\":{\"allowedCidrs\":[\"198.51.100.7:5432\","
	    "\"100.64.213.0/30\"]}}", DLT_RAW, &o);
	assert_rows(&o, want, sizeof(want) / sizeof(want[0]));
}

static void
test_dns_rows(void **state)
{
	static const char *const want[] = {
		"dns a.test AAAA allow no_ipv6 NOERROR []",
		"dns a.test HTTPS allow no_svcb NOERROR []",
		"dns a.test TXT allow type_not_allowed REFUSED []",
		"dns evil.test A deny not_allowlisted NXDOMAIN []",
		"dns   deny malformed FORMERR []",
		"dns lo.a.test A allow allowed_domain NOERROR []",
		"dns x.a.test A allow allowed_domain NXDOMAIN []",
		"dns late.a.test A allow allowed_domain  []",
	};
	uint8_t msg[512];
	struct out o;
	int n;

	(void)state;
	/* answered by the gateway itself: no answer is needed */
	n = dns_write_query(msg, sizeof(msg), 1, "a.test", DNS_T_AAAA, 1);
	udp(SB, 40010, GW, 53, msg, (size_t)n);
	n = dns_write_query(msg, sizeof(msg), 2, "a.test", DNS_T_HTTPS, 1);
	udp(SB, 40011, GW, 53, msg, (size_t)n);
	n = dns_write_query(msg, sizeof(msg), 3, "a.test", DNS_T_TXT, 1);
	udp(SB, 40012, GW, 53, msg, (size_t)n);
	n = dns_write_query(msg, sizeof(msg), 4, "evil.test", DNS_T_A, 1);
	udp(SB, 40013, GW, 53, msg, (size_t)n);
	udp(SB, 40014, GW, 53, "\x00\x05\x01", 3);
	/* a rebinding address is stripped: nothing bound */
	dns(40015, 6, "lo.a.test", DNS_T_A, "127.0.0.1");
	dns(40016, 7, "x.a.test", DNS_T_A, NULL);
	/* forwarded, and the trace ends before its answer */
	n = dns_write_query(msg, sizeof(msg), 8, "late.a.test", DNS_T_A, 1);
	udp(SB, 40017, GW, 53, msg, (size_t)n);
	replay("{\"network\":{\"allowedDomains\":[\"a.test\",\"*.a.test\"]}}",
	    DLT_RAW, &o);
	assert_rows(&o, want, sizeof(want) / sizeof(want[0]));
}

/* The binding lasts the TTL (60 s, within 30..600) plus the grace (10 s). */
static void
test_binding_expiry(void **state)
{
	static const char *const want[] = {
		"dns db.test A allow allowed_domain NOERROR [198.51.100.7]",
		"tcp 198.51.100.7:5432 allow allowed_domain name=db.test sni= host=",
		"tcp 198.51.100.7:5432 deny no_dns_binding name= sni= host=",
	};
	struct out o;

	(void)state;
	dns(40020, 9, "db.test", DNS_T_A, "198.51.100.7");
	clock_us += 69000000;
	tcp(SB, 50020, "198.51.100.7", 5432, SYN, 1, NULL, 0);
	clock_us += 1000000;
	tcp(SB, 50021, "198.51.100.7", 5432, SYN, 1, NULL, 0);
	replay("{\"network\":{\"allowedDomains\":[\"db.test:5432\"]}}",
	    DLT_RAW, &o);
	assert_rows(&o, want, sizeof(want) / sizeof(want[0]));
}

static void
test_first_flight_bounds(void **state)
{
	static const char *const want[] = {
		"dns a.test A allow allowed_domain NOERROR [192.0.2.10]",
		/* half a hello, then nothing for 5 s */
		"tcp 192.0.2.10:443 deny hold_timeout name=a.test sni= host=",
		/* a SYN then a FIN: logged as the SYN was decided */
		"tcp 192.0.2.10:443 allow allowed_domain name=a.test sni= host=",
		"tcp 192.0.2.10:443 deny not_tls name=a.test sni= host=",
		/* data after the flight was decided: not read */
		"tcp 192.0.2.10:443 allow allowed_domain name=a.test sni=a.test host=",
		/* half a hello at the trace's end: its deadline comes */
		"tcp 192.0.2.10:443 deny hold_timeout name=a.test sni= host=",
	};
	struct out o;

	(void)state;
	dns(40030, 10, "a.test", DNS_T_A, "192.0.2.10");
	tcp(SB, 50030, "192.0.2.10", 443, SYN, 100, NULL, 0);
	tcp(SB, 50030, "192.0.2.10", 443, ACK, 101, hello_a, 50);
	clock_us += 5000000;
	tcp(SB, 50030, "192.0.2.10", 443, ACK, 151, hello_a + 50, 10);
	tcp(SB, 50031, "192.0.2.10", 443, SYN, 200, NULL, 0);
	tcp(SB, 50031, "192.0.2.10", 443, ACK | FIN, 201, NULL, 0);
	tcp(SB, 50032, "192.0.2.10", 443, SYN, 300, NULL, 0);
	tcp(SB, 50032, "192.0.2.10", 443, ACK, 301, "GET / HTTP/1.0\r\n", 16);
	tcp(SB, 50033, "192.0.2.10", 443, SYN, 400, NULL, 0);
	tcp(SB, 50033, "192.0.2.10", 443, ACK, 401, hello_a, sizeof(hello_a));
	tcp(SB, 50033, "192.0.2.10", 443, ACK, 401 + sizeof(hello_a), "x", 1);
	tcp(SB, 50034, "192.0.2.10", 443, SYN, 500, NULL, 0);
	tcp(SB, 50034, "192.0.2.10", 443, ACK, 501, hello_a, 60);
	replay(policy_a, DLT_RAW, &o);
	assert_rows(&o, want, sizeof(want) / sizeof(want[0]));
	/* timeouts are dated at their deadline: 3 s after the first byte */
	assert_int_equal(o.ts[1], T0 + 4 * 10000 + 3000000);
	assert_int_equal(o.ts[5], T0 + 14 * 10000 + 5000000 + 3000000);
}

/* DNS over TCP to the resolver: messages framed by their length, cut
 * anywhere by the segments. */
static void
test_dns_tcp(void **state)
{
	static const char *const want[] = {
		/* answered at once, before a.test's answer came */
		"dns nope.test A deny not_allowlisted NXDOMAIN []",
		"dns a.test A allow allowed_domain NOERROR [192.0.2.10]",
		"tcp 192.0.2.10:443 allow allowed_domain name=a.test sni=a.test host=",
	};
	uint8_t q1[300], q2[300], ans[600], stream[700];
	struct dns_query dq;
	struct dns_rr rr;
	struct gw_replay_stats st;
	struct policy *p = parse(policy_a);
	struct gw_replay_opts op = opts(p);
	struct gw_replay *r;
	struct out o;
	char err[256];
	uint32_t a = ip("192.0.2.10");
	int n1, n2, na;

	(void)state;
	n1 = dns_write_query(q1 + 2, sizeof(q1) - 2, 0x4444, "a.test", DNS_T_A, 1);
	n2 = dns_write_query(q2 + 2, sizeof(q2) - 2, 0x5555, "nope.test",
	    DNS_T_A, 1);
	put16(q1, (uint16_t)n1);
	put16(q2, (uint16_t)n2);
	assert_int_equal(dns_parse_query(q1 + 2, (size_t)n1, &dq), DNS_PARSE_OK);
	memset(&rr, 0, sizeof(rr));
	snprintf(rr.name, sizeof(rr.name), "a.test");
	rr.type = DNS_T_A;
	rr.ttl = 300;
	memcpy(rr.data.a, &a, 4);
	na = dns_write_answer(ans + 2, sizeof(ans) - 2, 4096, &dq,
	    DNS_R_NOERROR, &rr, 1);
	put16(ans, (uint16_t)na);
	/* both queries in one stream, cut inside the first length field */
	memcpy(stream, q1, (size_t)n1 + 2);
	memcpy(stream + n1 + 2, q2, (size_t)n2 + 2);
	tcp(SB, 40100, GW, 53, SYN, 7000, NULL, 0);
	tcp(GW, 53, SB, 40100, SYN | ACK, 9000, NULL, 0);
	tcp(SB, 40100, GW, 53, ACK, 7001, stream, 1);
	tcp(SB, 40100, GW, 53, ACK, 7002, stream + 1,
	    (size_t)(n1 + n2 + 4 - 1));
	tcp(GW, 53, SB, 40100, ACK, 9001, ans, 5);
	tcp(GW, 53, SB, 40100, ACK, 9006, ans + 5, (size_t)na + 2 - 5);
	tcp(SB, 40100, GW, 53, ACK | FIN, 7001 + (uint32_t)(n1 + n2 + 4), NULL, 0);
	tls_flow(50100, "192.0.2.10", 0);
	/* a zero length ends what can be read of a connection */
	tcp(SB, 40101, GW, 53, SYN, 100, NULL, 0);
	tcp(GW, 53, SB, 40101, SYN | ACK, 200, NULL, 0);
	tcp(SB, 40101, GW, 53, ACK, 101, "\0\0\0\0", 4);
	write_trace(DLT_RAW);
	memset(&o, 0, sizeof(o));
	r = gw_replay_new(&op, on_row, &o);
	assert_non_null(r);
	assert_int_equal(gw_replay_file(tracefile, &r, 1, err, sizeof(err)), 0);
	assert_rows(&o, want, sizeof(want) / sizeof(want[0]));
	assert_int_equal(o.proto[0], IPPROTO_TCP);
	assert_int_equal(o.proto[1], IPPROTO_TCP);
	gw_replay_get_stats(r, &st);
	assert_int_equal(st.dns_tcp, 2);
	assert_int_equal(st.dns_tcp_lost, 1);
	gw_replay_free(r);
	policy_free(p);
}

static void
test_bad_files(void **state)
{
	struct policy *p = parse(policy_a);
	struct gw_replay_opts op = opts(p);
	struct gw_replay *r;
	struct out o;
	char err[256], path[160];
	pcap_t *pd;
	pcap_dumper_t *d;
	FILE *f;
	long len;

	(void)state;
	memset(&o, 0, sizeof(o));
	r = gw_replay_new(&op, on_row, &o);
	assert_non_null(r);
	snprintf(path, sizeof(path), "%s/none.pcap", dir);
	assert_int_equal(gw_replay_file(path, &r, 1, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "none.pcap"));

	/* a link type replay cannot read */
	pd = pcap_open_dead(DLT_NULL, 65535);
	d = pcap_dump_open(pd, tracefile);
	pcap_dump_close(d);
	pcap_close(pd);
	assert_int_equal(gw_replay_file(tracefile, &r, 1, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "link type"));

	/* a trace cut in its last record: what came before is replayed */
	dns(40040, 11, "a.test", DNS_T_A, "192.0.2.10");
	tcp(SB, 50040, "203.0.113.66", 443, SYN, 1, NULL, 0);
	write_trace(DLT_RAW);
	f = fopen(tracefile, "r+");
	assert_non_null(f);
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	len = ftell(f);
	assert_int_equal(ftruncate(fileno(f), len - 5), 0);
	fclose(f);
	assert_int_equal(gw_replay_file(tracefile, &r, 1, err, sizeof(err)), 1);
	assert_int_equal(o.n, 1);
	assert_string_equal(o.lines[0],
	    "dns a.test A allow allowed_domain NOERROR [192.0.2.10]");
	gw_replay_free(r);
	gw_replay_free(NULL);
	policy_free(p);
}

static void
test_sandbox_addr_given(void **state)
{
	struct policy *p = parse(policy_a);
	struct gw_replay_opts op = opts(p);
	struct gw_replay *r;
	struct gw_replay_stats st;
	struct out o;
	char err[256];

	(void)state;
	/* the first SYN is another host's: the address given wins */
	tcp("10.213.0.6", 50050, "203.0.113.66", 443, SYN, 1, NULL, 0);
	tcp(SB, 50051, "203.0.113.66", 443, SYN, 1, NULL, 0);
	write_trace(DLT_EN10MB);
	op.sandbox_addr = ip(SB);
	memset(&o, 0, sizeof(o));
	r = gw_replay_new(&op, on_row, &o);
	assert_int_equal(gw_replay_file(tracefile, &r, 1, err, sizeof(err)), 0);
	assert_int_equal(o.n, 1);
	assert_string_equal(o.lines[0],
	    "tcp 203.0.113.66:443 deny no_dns_binding name= sni= host=");
	gw_replay_get_stats(r, &st);
	assert_int_equal(st.frames, 4);
	assert_int_equal(st.not_ipv4, 2);
	assert_int_equal(st.flows, 1);
	gw_replay_free(r);
	policy_free(p);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_mixed, reset),
		cmocka_unit_test_setup(test_audit, reset),
		cmocka_unit_test_setup(test_against, reset),
		cmocka_unit_test_setup(test_cidr_icmp_internal_and_cache, reset),
		cmocka_unit_test_setup(test_dns_rows, reset),
		cmocka_unit_test_setup(test_binding_expiry, reset),
		cmocka_unit_test_setup(test_first_flight_bounds, reset),
		cmocka_unit_test_setup(test_dns_tcp, reset),
		cmocka_unit_test_setup(test_bad_files, reset),
		cmocka_unit_test_setup(test_sandbox_addr_given, reset),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
