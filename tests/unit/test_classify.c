/* test_classify.c: nfq_class_* on hand-built TLS, HTTP, SSH and noise flows. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <cmocka.h>

#include "nfq/nfq.h"

/*
 * ClientHellos as OpenSSL 3.0 s_client sent them (TLS 1.3 offered, x25519
 * key share), captured on 127.0.0.1 in a private network namespace:
 * `openssl s_client -connect 127.0.0.1:4433 -servername a.test` and the
 * same with -servername www.google.com. Each is one TLS record.
 */
static const uint8_t hello_a_test[] = {
	0x16, 0x03, 0x01, 0x01, 0x33, 0x01, 0x00, 0x01, 0x2f, 0x03, 0x03, 0xe6,
	0x9b, 0x5e, 0x1e, 0xa5, 0x80, 0xf0, 0xfe, 0xe1, 0x8d, 0xd7, 0x02, 0x0a,
	0x7f, 0x9a, 0x09, 0xdc, 0xc2, 0xb5, 0xa1, 0x3f, 0xfb, 0xc3, 0x2d, 0x7f,
	0xf8, 0xbc, 0x9e, 0x8a, 0xcf, 0x0c, 0x2a, 0x20, 0xeb, 0xd6, 0x00, 0x2f,
	0x52, 0x9f, 0x91, 0x27, 0xa9, 0xcb, 0x09, 0x58, 0x59, 0xe3, 0x14, 0x63,
	0x0f, 0xe6, 0x64, 0xde, 0x5b, 0xcc, 0xfa, 0x2c, 0x8a, 0xb7, 0xaa, 0xfb,
	0x0d, 0x13, 0x16, 0xeb, 0x00, 0x3e, 0x13, 0x02, 0x13, 0x03, 0x13, 0x01,
	0xc0, 0x2c, 0xc0, 0x30, 0x00, 0x9f, 0xcc, 0xa9, 0xcc, 0xa8, 0xcc, 0xaa,
	0xc0, 0x2b, 0xc0, 0x2f, 0x00, 0x9e, 0xc0, 0x24, 0xc0, 0x28, 0x00, 0x6b,
	0xc0, 0x23, 0xc0, 0x27, 0x00, 0x67, 0xc0, 0x0a, 0xc0, 0x14, 0x00, 0x39,
	0xc0, 0x09, 0xc0, 0x13, 0x00, 0x33, 0x00, 0x9d, 0x00, 0x9c, 0x00, 0x3d,
	0x00, 0x3c, 0x00, 0x35, 0x00, 0x2f, 0x00, 0xff, 0x01, 0x00, 0x00, 0xa8,
	0x00, 0x00, 0x00, 0x0b, 0x00, 0x09, 0x00, 0x00, 0x06, 0x61, 0x2e, 0x74,
	0x65, 0x73, 0x74, 0x00, 0x0b, 0x00, 0x04, 0x03, 0x00, 0x01, 0x02, 0x00,
	0x0a, 0x00, 0x16, 0x00, 0x14, 0x00, 0x1d, 0x00, 0x17, 0x00, 0x1e, 0x00,
	0x19, 0x00, 0x18, 0x01, 0x00, 0x01, 0x01, 0x01, 0x02, 0x01, 0x03, 0x01,
	0x04, 0x00, 0x23, 0x00, 0x00, 0x00, 0x16, 0x00, 0x00, 0x00, 0x17, 0x00,
	0x00, 0x00, 0x0d, 0x00, 0x2a, 0x00, 0x28, 0x04, 0x03, 0x05, 0x03, 0x06,
	0x03, 0x08, 0x07, 0x08, 0x08, 0x08, 0x09, 0x08, 0x0a, 0x08, 0x0b, 0x08,
	0x04, 0x08, 0x05, 0x08, 0x06, 0x04, 0x01, 0x05, 0x01, 0x06, 0x01, 0x03,
	0x03, 0x03, 0x01, 0x03, 0x02, 0x04, 0x02, 0x05, 0x02, 0x06, 0x02, 0x00,
	0x2b, 0x00, 0x09, 0x08, 0x03, 0x04, 0x03, 0x03, 0x03, 0x02, 0x03, 0x01,
	0x00, 0x2d, 0x00, 0x02, 0x01, 0x01, 0x00, 0x33, 0x00, 0x26, 0x00, 0x24,
	0x00, 0x1d, 0x00, 0x20, 0x1c, 0x7b, 0x5e, 0x14, 0xc7, 0x20, 0x71, 0x84,
	0xa0, 0xfc, 0xe9, 0xa6, 0x43, 0x2c, 0x55, 0xce, 0x62, 0x81, 0x58, 0x84,
	0x84, 0x30, 0xca, 0x6e, 0x9c, 0x78, 0x35, 0xcb, 0xce, 0xe1, 0x8c, 0x59,
};

static const uint8_t hello_google[] = {
	0x16, 0x03, 0x01, 0x01, 0x3b, 0x01, 0x00, 0x01, 0x37, 0x03, 0x03, 0x29,
	0xcf, 0xdb, 0x62, 0x5a, 0xae, 0x09, 0xfe, 0x80, 0x6f, 0xc3, 0xbb, 0x1e,
	0xe2, 0xe9, 0xcd, 0xed, 0xd8, 0x56, 0xe5, 0x0e, 0xfa, 0x5c, 0xa7, 0x92,
	0xb7, 0x82, 0x71, 0x45, 0xa8, 0x55, 0xdb, 0x20, 0x41, 0xf8, 0xaf, 0x48,
	0x27, 0x55, 0x9b, 0xdc, 0x56, 0x33, 0x4b, 0xe5, 0xd2, 0x5f, 0xd8, 0x60,
	0x32, 0x26, 0xb0, 0x51, 0xe3, 0x97, 0x51, 0x7b, 0x0c, 0xac, 0x9a, 0xa2,
	0x0c, 0xf7, 0x9b, 0xd6, 0x00, 0x3e, 0x13, 0x02, 0x13, 0x03, 0x13, 0x01,
	0xc0, 0x2c, 0xc0, 0x30, 0x00, 0x9f, 0xcc, 0xa9, 0xcc, 0xa8, 0xcc, 0xaa,
	0xc0, 0x2b, 0xc0, 0x2f, 0x00, 0x9e, 0xc0, 0x24, 0xc0, 0x28, 0x00, 0x6b,
	0xc0, 0x23, 0xc0, 0x27, 0x00, 0x67, 0xc0, 0x0a, 0xc0, 0x14, 0x00, 0x39,
	0xc0, 0x09, 0xc0, 0x13, 0x00, 0x33, 0x00, 0x9d, 0x00, 0x9c, 0x00, 0x3d,
	0x00, 0x3c, 0x00, 0x35, 0x00, 0x2f, 0x00, 0xff, 0x01, 0x00, 0x00, 0xb0,
	0x00, 0x00, 0x00, 0x13, 0x00, 0x11, 0x00, 0x00, 0x0e, 0x77, 0x77, 0x77,
	0x2e, 0x67, 0x6f, 0x6f, 0x67, 0x6c, 0x65, 0x2e, 0x63, 0x6f, 0x6d, 0x00,
	0x0b, 0x00, 0x04, 0x03, 0x00, 0x01, 0x02, 0x00, 0x0a, 0x00, 0x16, 0x00,
	0x14, 0x00, 0x1d, 0x00, 0x17, 0x00, 0x1e, 0x00, 0x19, 0x00, 0x18, 0x01,
	0x00, 0x01, 0x01, 0x01, 0x02, 0x01, 0x03, 0x01, 0x04, 0x00, 0x23, 0x00,
	0x00, 0x00, 0x16, 0x00, 0x00, 0x00, 0x17, 0x00, 0x00, 0x00, 0x0d, 0x00,
	0x2a, 0x00, 0x28, 0x04, 0x03, 0x05, 0x03, 0x06, 0x03, 0x08, 0x07, 0x08,
	0x08, 0x08, 0x09, 0x08, 0x0a, 0x08, 0x0b, 0x08, 0x04, 0x08, 0x05, 0x08,
	0x06, 0x04, 0x01, 0x05, 0x01, 0x06, 0x01, 0x03, 0x03, 0x03, 0x01, 0x03,
	0x02, 0x04, 0x02, 0x05, 0x02, 0x06, 0x02, 0x00, 0x2b, 0x00, 0x09, 0x08,
	0x03, 0x04, 0x03, 0x03, 0x03, 0x02, 0x03, 0x01, 0x00, 0x2d, 0x00, 0x02,
	0x01, 0x01, 0x00, 0x33, 0x00, 0x26, 0x00, 0x24, 0x00, 0x1d, 0x00, 0x20,
	0x42, 0x1f, 0xa5, 0xf7, 0xdc, 0xa1, 0x7b, 0xd5, 0x32, 0x17, 0xea, 0xeb,
	0x07, 0x26, 0xc4, 0x72, 0xd6, 0x4f, 0x6d, 0xd2, 0xec, 0x75, 0xec, 0x61,
	0x4c, 0x34, 0x72, 0x02, 0xfa, 0x08, 0x18, 0x00,
};

/* A TCP connection as its client sends it. */
struct conn {
	uint32_t	saddr, daddr;	/* network order */
	uint16_t	sport, dport;
	uint32_t	seq;		/* next sequence number */
	uint64_t	ts_ms;
};

static uint16_t
fold(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

static uint32_t
sum16(const uint8_t *p, size_t n, uint32_t sum)
{
	for (; n > 1; p += 2, n -= 2)
		sum += (uint32_t)p[0] << 8 | p[1];
	if (n == 1)
		sum += (uint32_t)p[0] << 8;
	return sum;
}

static void
put16(uint8_t *p, uint16_t v)
{
	p[0] = v >> 8;
	p[1] = v & 0xff;
}

static void
put32(uint8_t *p, uint32_t v)
{
	put16(p, v >> 16);
	put16(p + 2, v & 0xffff);
}

/* IPv4 (20 bytes, DF) + TCP (20 bytes) + payload, checksums filled in.
 * Returns the packet's length. */
static size_t
build_tcp(uint8_t *buf, size_t cap, const struct conn *cn, uint8_t flags,
    uint32_t ack, const void *payload, size_t len)
{
	uint8_t *ip = buf, *tcp = buf + 20;
	size_t total = 40 + len;
	uint32_t sum;

	assert_true(total <= cap && total <= 0xffff);
	memset(buf, 0, 40);
	ip[0] = 0x45;
	put16(ip + 2, (uint16_t)total);
	put16(ip + 4, 0x1c46);
	ip[6] = 0x40;			/* DF */
	ip[8] = 64;
	ip[9] = IPPROTO_TCP;
	memcpy(ip + 12, &cn->saddr, 4);
	memcpy(ip + 16, &cn->daddr, 4);
	put16(ip + 10, fold(sum16(ip, 20, 0)));

	put16(tcp, cn->sport);
	put16(tcp + 2, cn->dport);
	put32(tcp + 4, cn->seq);
	put32(tcp + 8, ack);
	tcp[12] = 5 << 4;
	tcp[13] = flags;
	put16(tcp + 14, 64240);
	if (len > 0)
		memcpy(tcp + 20, payload, len);
	sum = sum16(ip + 12, 8, 0) + IPPROTO_TCP + (uint32_t)(20 + len);
	put16(tcp + 16, fold(sum16(tcp, 20 + len, sum)));
	return total;
}

#define TH_SYN	0x02
#define TH_PSH	0x08
#define TH_ACK	0x10
#define SERVER_ISN	0x7000

static void
conn_init(struct conn *cn, uint16_t sport, uint16_t dport)
{
	cn->saddr = htonl(0x0a000002);		/* 10.0.0.2 */
	cn->daddr = htonl(0xc6336407);	/* 198.51.100.7, TEST-NET-2 */
	cn->sport = sport;
	cn->dport = dport;
	cn->seq = 0x12345678;
	cn->ts_ms = 1000000;
}

static void
send_syn(struct nfq_classifier *c, struct nfq_class_flow *f, struct conn *cn)
{
	uint8_t pkt[64];
	size_t n;

	n = build_tcp(pkt, sizeof(pkt), cn, TH_SYN, 0, NULL, 0);
	nfq_class_feed(c, f, pkt, n, cn->ts_ms);
	cn->seq++;
	cn->ts_ms += 20;
}

/* One data segment. The packet lives on the heap and is scribbled over
 * and freed right after feeding: the classifier must keep nothing that
 * points into it. */
static void
send_data(struct nfq_classifier *c, struct nfq_class_flow *f,
    struct conn *cn, const void *data, size_t len)
{
	size_t cap = 40 + len, n;
	uint8_t *pkt;

	assert_non_null(pkt = malloc(cap));
	n = build_tcp(pkt, cap, cn, TH_ACK | TH_PSH, SERVER_ISN + 1, data, len);
	nfq_class_feed(c, f, pkt, n, cn->ts_ms);
	memset(pkt, 0xee, cap);
	free(pkt);
	cn->seq += (uint32_t)len;
	cn->ts_ms += 1;
}

/* classify() makes deferred flows (nfq_class_flow_new_deferred). */
static int deferred;

/* A SYN and then each of the segments, the classifier's answer in buf. */
static const char *
classify(struct nfq_classifier *c, uint16_t dport, const void *const *seg,
    const size_t *seglen, size_t nseg, char *buf, size_t len)
{
	struct nfq_class_flow *f;
	struct conn cn;
	const char *r;
	size_t i;

	conn_init(&cn, 40000, dport);
	assert_non_null(f = deferred ? nfq_class_flow_new_deferred(c) :
	    nfq_class_flow_new(c));
	send_syn(c, f, &cn);
	for (i = 0; i < nseg; i++)
		send_data(c, f, &cn, seg[i], seglen[i]);
	r = nfq_class_result(c, f, buf, len);
	nfq_class_flow_free(f);
	return r;
}

static const char *
classify1(struct nfq_classifier *c, uint16_t dport, const void *data,
    size_t len, char *buf, size_t buflen)
{
	return classify(c, dport, &data, &len, 1, buf, buflen);
}

static const char http_get[] = "GET / HTTP/1.1\r\nHost: a.test\r\n\r\n";
static const char ssh_banner[] = "SSH-2.0-OpenSSH_9.2\r\n";

/* Bytes no protocol claims: xorshift32 from a fixed seed. */
static void
noise(uint8_t *p, size_t n)
{
	uint32_t x = 0x9e3779b9;

	while (n-- > 0) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		*p++ = (uint8_t)x;
	}
}

static int
setup(void **state)
{
	*state = nfq_classifier_new();
	return *state == NULL ? -1 : 0;
}

static int
teardown(void **state)
{
	nfq_classifier_free(*state);
	return 0;
}

static void
test_tls(void **state)
{
	char buf[64];
	const char *r;

	r = classify1(*state, 443, hello_a_test, sizeof(hello_a_test),
	    buf, sizeof(buf));
	assert_ptr_equal(r, buf);
	assert_string_equal(buf, "TLS");
	/* By what it says, not by its port. */
	classify1(*state, 8443, hello_a_test, sizeof(hello_a_test), buf,
	    sizeof(buf));
	assert_string_equal(buf, "TLS");
}

static void
test_tls_app_joined(void **state)
{
	char buf[64];

	/* The server name makes it Google: master and app joined by ".". */
	classify1(*state, 443, hello_google, sizeof(hello_google), buf,
	    sizeof(buf));
	assert_string_equal(buf, "TLS.Google");
}

static void
test_tls_split(void **state)
{
	const void *seg[] = { hello_a_test, hello_a_test + 100 };
	size_t len[] = { 100, sizeof(hello_a_test) - 100 };
	char buf[64];

	classify(*state, 443, seg, len, 2, buf, sizeof(buf));
	assert_string_equal(buf, "TLS");
}

static void
test_http(void **state)
{
	char buf[64];

	classify1(*state, 80, http_get, strlen(http_get), buf, sizeof(buf));
	assert_string_equal(buf, "HTTP");
	classify1(*state, 5555, http_get, strlen(http_get), buf, sizeof(buf));
	assert_string_equal(buf, "HTTP");
}

static void
test_ssh(void **state)
{
	char buf[64];

	classify1(*state, 22, ssh_banner, strlen(ssh_banner), buf,
	    sizeof(buf));
	assert_string_equal(buf, "SSH");
	classify1(*state, 2222, ssh_banner, strlen(ssh_banner), buf,
	    sizeof(buf));
	assert_string_equal(buf, "SSH");
}

static void
test_noise_is_unknown(void **state)
{
	uint8_t data[600];
	const void *seg[] = { data, data + 300 };
	size_t len[] = { 300, 300 };
	char buf[64];

	noise(data, sizeof(data));
	/* No guess from the well-known ports either. */
	classify(*state, 443, seg, len, 2, buf, sizeof(buf));
	assert_string_equal(buf, "Unknown");
	classify(*state, 80, seg, len, 2, buf, sizeof(buf));
	assert_string_equal(buf, "Unknown");
	classify(*state, 22, seg, len, 2, buf, sizeof(buf));
	assert_string_equal(buf, "Unknown");
	classify(*state, 5555, seg, len, 2, buf, sizeof(buf));
	assert_string_equal(buf, "Unknown");
}

static void
test_nothing_seen(void **state)
{
	struct nfq_class_flow *f;
	struct conn cn;
	char buf[64];

	assert_non_null(f = nfq_class_flow_new(*state));
	nfq_class_result(*state, f, buf, sizeof(buf));
	assert_string_equal(buf, "Unknown");
	nfq_class_flow_free(f);

	/* A SYN alone. */
	classify(*state, 443, NULL, NULL, 0, buf, sizeof(buf));
	assert_string_equal(buf, "Unknown");

	/* Data without the SYN, as after a restart of the gateway. */
	conn_init(&cn, 40001, 443);
	assert_non_null(f = nfq_class_flow_new(*state));
	send_data(*state, f, &cn, hello_a_test, sizeof(hello_a_test));
	nfq_class_result(*state, f, buf, sizeof(buf));
	assert_string_equal(buf, "TLS");
	nfq_class_flow_free(f);
}

static void
test_result_is_final(void **state)
{
	struct nfq_class_flow *f;
	struct conn cn;
	char buf[64];

	conn_init(&cn, 40002, 22);
	assert_non_null(f = nfq_class_flow_new(*state));
	send_syn(*state, f, &cn);
	assert_string_equal(nfq_class_result(*state, f, buf, sizeof(buf)),
	    "Unknown");
	/* Detection was given up: a banner now changes nothing. */
	send_data(*state, f, &cn, ssh_banner, strlen(ssh_banner));
	assert_string_equal(nfq_class_result(*state, f, buf, sizeof(buf)),
	    "Unknown");
	nfq_class_flow_free(f);

	conn_init(&cn, 40003, 22);
	assert_non_null(f = nfq_class_flow_new(*state));
	send_syn(*state, f, &cn);
	send_data(*state, f, &cn, ssh_banner, strlen(ssh_banner));
	assert_string_equal(nfq_class_result(*state, f, buf, sizeof(buf)),
	    "SSH");
	send_data(*state, f, &cn, http_get, strlen(http_get));
	assert_string_equal(nfq_class_result(*state, f, buf, sizeof(buf)),
	    "SSH");
	nfq_class_flow_free(f);
}

static void
test_small_buffer(void **state)
{
	char buf[8];

	memset(buf, 'x', sizeof(buf));
	classify1(*state, 443, hello_google, sizeof(hello_google), buf, 5);
	assert_string_equal(buf, "TLS.");
	assert_int_equal(buf[5], 'x');

	classify1(*state, 443, hello_google, sizeof(hello_google), buf, 1);
	assert_string_equal(buf, "");

	memset(buf, 'x', sizeof(buf));
	assert_ptr_equal(classify1(*state, 443, hello_google,
	    sizeof(hello_google), buf, 0), buf);
	assert_int_equal(buf[0], 'x');
}

/* What a client can put on the wire, and what a queue can hand over:
 * nothing of it may crash the classifier or name a protocol. */
static void
test_bad_packets(void **state)
{
	struct nfq_classifier *c = *state;
	struct nfq_class_flow *f;
	static uint8_t big[70000];
	uint8_t pkt[128];
	struct conn cn;
	char buf[64];
	size_t n;

	conn_init(&cn, 40004, 443);
	assert_non_null(f = nfq_class_flow_new(c));
	nfq_class_feed(c, f, NULL, 0, 1);
	nfq_class_feed(c, f, pkt, 0, 1);

	/* Cut inside the IP header, inside the TCP header, mid payload. */
	n = build_tcp(pkt, sizeof(pkt), &cn, TH_ACK | TH_PSH, 1, "abcdefgh", 8);
	nfq_class_feed(c, f, pkt, 12, 2);
	nfq_class_feed(c, f, pkt, 30, 3);
	nfq_class_feed(c, f, pkt, n - 4, 4);

	/* IHL 15 with nothing behind it; an IPv6 version nibble. */
	pkt[0] = 0x4f;
	nfq_class_feed(c, f, pkt, n, 5);
	pkt[0] = 0x60;
	nfq_class_feed(c, f, pkt, n, 6);

	/* Longer than nDPI's 16-bit length (an unsegmented GSO packet). */
	build_tcp(big, sizeof(big), &cn, TH_ACK, 1, NULL, 0);
	nfq_class_feed(c, f, big, sizeof(big), 7);

	nfq_class_result(c, f, buf, sizeof(buf));
	assert_string_equal(buf, "Unknown");
	nfq_class_flow_free(f);
}

/* Flows come and go by the thousand; under ASan the leak checker at exit
 * says whether every one was freed whole. */
static void
test_many_flows(void **state)
{
	enum { LIVE = 64, FLOWS = 5000 };
	struct nfq_classifier *c = *state;
	struct nfq_class_flow *live[LIVE] = { NULL };
	struct conn cn[LIVE];
	unsigned tls = 0, http = 0, ssh = 0;
	char buf[64];
	size_t i, k;

	for (i = 0; i < FLOWS; i++) {
		k = i % LIVE;
		if (live[k] != NULL) {
			nfq_class_result(c, live[k], buf, sizeof(buf));
			tls += strcmp(buf, "TLS") == 0;
			http += strcmp(buf, "HTTP") == 0;
			ssh += strcmp(buf, "SSH") == 0;
			nfq_class_flow_free(live[k]);
		}
		assert_non_null(live[k] = nfq_class_flow_new(c));
		conn_init(&cn[k], (uint16_t)(10000 + i), 0);
		switch (i % 3) {
		case 0:
			cn[k].dport = 443;
			send_syn(c, live[k], &cn[k]);
			send_data(c, live[k], &cn[k], hello_a_test,
			    sizeof(hello_a_test));
			break;
		case 1:
			cn[k].dport = 80;
			send_syn(c, live[k], &cn[k]);
			send_data(c, live[k], &cn[k], http_get,
			    strlen(http_get));
			break;
		default:
			cn[k].dport = 22;
			send_syn(c, live[k], &cn[k]);
			send_data(c, live[k], &cn[k], ssh_banner,
			    strlen(ssh_banner));
			break;
		}
	}
	/* The last LIVE flows are freed unasked, as at shutdown. */
	for (k = 0; k < LIVE; k++)
		nfq_class_flow_free(live[k]);
	assert_int_equal(tls + http + ssh, FLOWS - LIVE);
	assert_int_equal(tls, (FLOWS - LIVE + 2) / 3);
	assert_int_equal(http, (FLOWS - LIVE + 1) / 3);
	assert_int_equal(ssh, (FLOWS - LIVE) / 3);
}

/* Modules never print: run a classifier's whole life with stdout and
 * stderr going to a file, and find the file empty. */
static void
test_quiet(void **state)
{
	struct nfq_classifier *c;
	struct nfq_class_flow *f;
	char path[] = "/tmp/test_classify.XXXXXX";
	int fd, out, err;
	char buf[64];
	uint8_t noisy[300];
	struct conn cn;
	off_t size;

	(void)state;
	assert_true((fd = mkstemp(path)) >= 0);
	unlink(path);
	fflush(stdout);
	fflush(stderr);
	assert_true((out = dup(1)) >= 0);
	assert_true((err = dup(2)) >= 0);
	assert_true(dup2(fd, 1) == 1 && dup2(fd, 2) == 2);

	c = nfq_classifier_new();
	if (c != NULL) {
		noise(noisy, sizeof(noisy));
		f = nfq_class_flow_new(c);
		conn_init(&cn, 40005, 443);
		send_syn(c, f, &cn);
		send_data(c, f, &cn, hello_google, sizeof(hello_google));
		send_data(c, f, &cn, noisy, sizeof(noisy));
		nfq_class_result(c, f, buf, sizeof(buf));
		nfq_class_flow_free(f);
		nfq_classifier_free(c);
	}
	fflush(stdout);
	fflush(stderr);

	assert_true(dup2(out, 1) == 1 && dup2(err, 2) == 2);
	close(out);
	close(err);
	size = lseek(fd, 0, SEEK_END);
	close(fd);
	assert_non_null(c);
	assert_int_equal(size, 0);
}

/* Every flow of the tests above, fed at once or kept and fed when named:
 * the same answers. 12 segments are more than a deferred flow keeps. */
static void
test_deferred_same(void **state)
{
	static const char get2[] = "GET /a HTTP/1.1\r\nHo";
	static const char get2b[] = "st: a.test\r\nAccept: */*\r\n\r\n";
	const void *split[] = { hello_a_test, hello_a_test + 100 };
	size_t splitlen[] = { 100, sizeof(hello_a_test) - 100 };
	const void *many[12];
	size_t manylen[12], i, k;
	uint8_t data[600];
	const void *nseg[] = { data, data + 300 };
	size_t nlen[] = { 300, 300 };
	char a[64], b[64];
	struct {
		uint16_t	 port;
		const void	*const *seg;
		const size_t	*len;
		size_t		 n;
	} cases[] = {
		{ 443, split, splitlen, 2 },
		{ 443, nseg, nlen, 2 },
		{ 80, many, manylen, 12 },
	};

	noise(data, sizeof(data));
	/* a request, then another in pieces */
	many[0] = http_get;
	manylen[0] = strlen(http_get);
	for (i = 1; i < 12; i++) {
		many[i] = i < 11 ? get2 + i - 1 : get2b;
		manylen[i] = i < 10 ? 1 : i == 10 ? strlen(get2) - 9 :
		    strlen(get2b);
	}
	for (deferred = 0; deferred < 2; deferred++) {
		char *out = deferred ? b : a;

		classify1(*state, 443, hello_a_test, sizeof(hello_a_test), out,
		    64);
		classify1(*state, 443, hello_google, sizeof(hello_google),
		    out + 16, 16);
		classify1(*state, 22, ssh_banner, strlen(ssh_banner), out + 32,
		    16);
		classify1(*state, 80, http_get, strlen(http_get), out + 48, 16);
		assert_string_equal(out, "TLS");
		assert_string_equal(out + 16, "TLS.Google");
		assert_string_equal(out + 32, "SSH");
		assert_string_equal(out + 48, "HTTP");
	}
	for (k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		deferred = 0;
		classify(*state, cases[k].port, cases[k].seg, cases[k].len,
		    cases[k].n, a, sizeof(a));
		deferred = 1;
		classify(*state, cases[k].port, cases[k].seg, cases[k].len,
		    cases[k].n, b, sizeof(b));
		assert_string_equal(a, b);
	}
	deferred = 0;
	assert_string_equal(a, "HTTP");
}

/* One deferred flow of a ClientHello, named by key. */
static const char *
keyed(struct nfq_classifier *c, const char *key, const uint8_t *hello,
    size_t len, char *buf, size_t buflen)
{
	struct nfq_class_flow *f;
	struct conn cn;
	const char *r;

	conn_init(&cn, 40010, 443);
	assert_non_null(f = nfq_class_flow_new_deferred(c));
	send_syn(c, f, &cn);
	send_data(c, f, &cn, hello, len);
	r = nfq_class_result_keyed(c, f, key, strlen(key), buf, buflen);
	/* the answer stays */
	if (r != NULL && buflen >= 64) {
		char again[64];

		assert_string_equal(nfq_class_result(c, f, again,
		    sizeof(again)), r);
	}
	nfq_class_flow_free(f);
	return r;
}

static void
test_keyed_cache(void **state)
{
	struct nfq_classifier *c = *state;
	struct nfq_class_flow *f;
	uint64_t h0, m0, h, m;
	char buf[64], small[6];

	nfq_class_cache_stats(c, &h0, &m0);
	/* the first of a key: nDPI names it, and the name is kept */
	assert_string_equal(keyed(c, "k1", hello_google,
	    sizeof(hello_google), buf, sizeof(buf)), "TLS.Google");
	nfq_class_cache_stats(c, &h, &m);
	assert_int_equal(h - h0, 0);
	assert_int_equal(m - m0, 1);
	/* the same key again: the kept name, whatever the packets say
	 * (so it cannot have come from nDPI) */
	assert_string_equal(keyed(c, "k1", hello_a_test,
	    sizeof(hello_a_test), buf, sizeof(buf)), "TLS.Google");
	nfq_class_cache_stats(c, &h, &m);
	assert_int_equal(h - h0, 1);
	assert_int_equal(m - m0, 1);
	/* cut to the buffer, as nDPI's own names are */
	assert_string_equal(keyed(c, "k1", hello_a_test,
	    sizeof(hello_a_test), small, sizeof(small)), "TLS.G");
	/* another key: nDPI again */
	assert_string_equal(keyed(c, "k2", hello_a_test,
	    sizeof(hello_a_test), buf, sizeof(buf)), "TLS");
	assert_string_equal(keyed(c, "k2", hello_google,
	    sizeof(hello_google), buf, sizeof(buf)), "TLS");
	nfq_class_cache_stats(c, &h, &m);
	assert_int_equal(h - h0, 3);
	assert_int_equal(m - m0, 2);
	/* a flow that is not deferred, or was named already, is named by
	 * its own packets, and neither counted nor kept */
	assert_non_null(f = nfq_class_flow_new(c));
	assert_string_equal(nfq_class_result_keyed(c, f, "k3", 2, buf,
	    sizeof(buf)), "Unknown");
	nfq_class_flow_free(f);
	assert_non_null(f = nfq_class_flow_new_deferred(c));
	assert_string_equal(nfq_class_result(c, f, buf, sizeof(buf)),
	    "Unknown");
	assert_string_equal(nfq_class_result_keyed(c, f, "k1", 2, buf,
	    sizeof(buf)), "Unknown");
	nfq_class_flow_free(f);
	nfq_class_cache_stats(c, &h, &m);
	assert_int_equal(h - h0, 3);
	assert_int_equal(m - m0, 2);
	assert_string_equal(keyed(c, "k3", hello_a_test,
	    sizeof(hello_a_test), buf, sizeof(buf)), "TLS");
	/* big segments: past 8 KiB kept, the flow is fed as it goes, and
	 * named all the same (a hello, then three resent 5,000-byte
	 * pieces of noise: nDPI has named it by then) */
	{
		struct conn cn;
		uint8_t big[5000];
		int i;

		noise(big, sizeof(big));
		conn_init(&cn, 40020, 443);
		assert_non_null(f = nfq_class_flow_new_deferred(c));
		send_syn(c, f, &cn);
		send_data(c, f, &cn, hello_a_test, sizeof(hello_a_test));
		for (i = 0; i < 3; i++) {
			send_data(c, f, &cn, big, sizeof(big));
			cn.seq -= sizeof(big);
		}
		assert_string_equal(nfq_class_result_keyed(c, f, "k4", 2,
		    buf, sizeof(buf)), "TLS");
		nfq_class_flow_free(f);
	}
	/* a deferred flow freed unnamed leaves nothing behind (ASan) */
	assert_non_null(f = nfq_class_flow_new_deferred(c));
	nfq_class_feed(c, f, hello_a_test, sizeof(hello_a_test), 1);
	nfq_class_flow_free(f);
}

/*
 * One hit in 64 is named by nDPI all the same: a key first named from one
 * hello and then met with another keeps the first name for 63 hits; the
 * 64th is nDPI's, counted as a mismatch, and the slot holds it from then.
 */
static void
test_cache_check(void **state)
{
	struct nfq_classifier *c;
	uint64_t h, m, checks, mism;
	char buf[64];
	int i;

	(void)state;
	assert_non_null(c = nfq_classifier_new());
	assert_string_equal(keyed(c, "kc", hello_google,
	    sizeof(hello_google), buf, sizeof(buf)), "TLS.Google");
	for (i = 0; i < 63; i++)
		assert_string_equal(keyed(c, "kc", hello_a_test,
		    sizeof(hello_a_test), buf, sizeof(buf)), "TLS.Google");
	nfq_class_cache_checks(c, &checks, &mism);
	assert_int_equal(checks, 0);
	assert_int_equal(mism, 0);
	assert_string_equal(keyed(c, "kc", hello_a_test,
	    sizeof(hello_a_test), buf, sizeof(buf)), "TLS");
	nfq_class_cache_checks(c, &checks, &mism);
	assert_int_equal(checks, 1);
	assert_int_equal(mism, 1);
	/* the slot follows nDPI now, whatever the packets say */
	assert_string_equal(keyed(c, "kc", hello_google,
	    sizeof(hello_google), buf, sizeof(buf)), "TLS");
	/* a check that agrees is no mismatch */
	for (i = 0; i < 63; i++)
		assert_string_equal(keyed(c, "kc", hello_a_test,
		    sizeof(hello_a_test), buf, sizeof(buf)), "TLS");
	nfq_class_cache_checks(c, &checks, &mism);
	assert_int_equal(checks, 2);
	assert_int_equal(mism, 1);
	nfq_class_cache_stats(c, &h, &m);
	assert_int_equal(h, 128);
	assert_int_equal(m, 1);
	nfq_classifier_free(c);
}

static void
test_free_null(void **state)
{
	(void)state;
	nfq_class_flow_free(NULL);
	nfq_classifier_free(NULL);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tls),
		cmocka_unit_test(test_tls_app_joined),
		cmocka_unit_test(test_tls_split),
		cmocka_unit_test(test_http),
		cmocka_unit_test(test_ssh),
		cmocka_unit_test(test_noise_is_unknown),
		cmocka_unit_test(test_nothing_seen),
		cmocka_unit_test(test_result_is_final),
		cmocka_unit_test(test_small_buffer),
		cmocka_unit_test(test_bad_packets),
		cmocka_unit_test(test_many_flows),
		cmocka_unit_test(test_quiet),
		cmocka_unit_test(test_deferred_same),
		cmocka_unit_test(test_keyed_cache),
		cmocka_unit_test(test_cache_check),
		cmocka_unit_test(test_free_null),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
