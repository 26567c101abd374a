/* test_packet.c: nfq_packet_parse on valid packets and on every malformation. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <cmocka.h>

#include "nfq/nfq.h"

/* 192.168.0.104:50000 -> 198.51.100.7:443, SYN with DF, 20 bytes of
 * options (MSS, SACK permitted, timestamps, NOP, window scale). */
static const uint8_t tcp_syn[] = {
	0x45, 0x00, 0x00, 0x3c,		/* v4, IHL 5, total 60 */
	0x1c, 0x46, 0x40, 0x00,		/* id, DF */
	0x40, 0x06, 0x00, 0x00,		/* TTL 64, TCP, checksum */
	0xc0, 0xa8, 0x00, 0x68,		/* 192.168.0.104 */
	0xc6, 0x33, 0x64, 0x07,		/* 198.51.100.7 */
	0xc3, 0x50, 0x01, 0xbb,		/* 50000 -> 443 */
	0x12, 0x34, 0x56, 0x78,		/* seq */
	0x00, 0x00, 0x00, 0x00,		/* ack */
	0xa0, 0x02, 0xfa, 0xf0,		/* data offset 10, SYN, window */
	0x00, 0x00, 0x00, 0x00,		/* checksum, urgent */
	0x02, 0x04, 0x05, 0xb4,		/* MSS 1460 */
	0x04, 0x02, 0x08, 0x0a,		/* SACK ok, timestamps ... */
	0x00, 0x01, 0x02, 0x03,
	0x00, 0x00, 0x00, 0x00,
	0x01, 0x03, 0x03, 0x07,		/* NOP, window scale 7 */
};

/* 10.0.0.2:54321 -> 192.0.2.53:53, UDP with 5 bytes of payload. */
static const uint8_t udp_dgram[] = {
	0x45, 0x00, 0x00, 0x21,		/* total 33 */
	0xab, 0xcd, 0x00, 0x00,
	0x40, 0x11, 0x00, 0x00,		/* UDP */
	0x0a, 0x00, 0x00, 0x02,
	0xc0, 0x00, 0x02, 0x35,
	0xd4, 0x31, 0x00, 0x35,		/* 54321 -> 53 */
	0x00, 0x0d, 0x00, 0x00,		/* length 13, checksum */
	'h', 'e', 'l', 'l', 'o',
};

/* 10.0.0.2 -> 203.0.113.9, ICMP echo request with 4 bytes of data. */
static const uint8_t icmp_echo[] = {
	0x45, 0x00, 0x00, 0x20,		/* total 32 */
	0x00, 0x01, 0x00, 0x00,
	0x40, 0x01, 0x00, 0x00,		/* ICMP */
	0x0a, 0x00, 0x00, 0x02,
	0xcb, 0x00, 0x71, 0x09,
	0x08, 0x00, 0x00, 0x00,		/* echo request, code 0, checksum */
	0x12, 0x34, 0x00, 0x01,		/* id, sequence */
	0xde, 0xad, 0xbe, 0xef,
};

static enum nfq_parse_error
parse(const uint8_t *buf, size_t len)
{
	struct nfq_tuple t;

	return nfq_packet_parse(buf, len, &t);
}

static void
set_be16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void
test_tcp_syn(void **state)
{
	struct nfq_tuple t;

	(void)state;
	assert_int_equal(nfq_packet_parse(tcp_syn, sizeof(tcp_syn), &t),
	    NFQ_PARSE_OK);
	assert_int_equal(t.proto, IPPROTO_TCP);
	assert_int_equal(t.saddr, htonl(0xc0a80068));
	assert_int_equal(t.daddr, htonl(0xc6336407));
	assert_int_equal(t.sport, 50000);
	assert_int_equal(t.dport, 443);
	assert_int_equal(t.tcp_flags, 0x02);
	assert_ptr_equal(t.l4_payload, tcp_syn + 60);
	assert_int_equal(t.l4_len, 0);
	assert_int_equal(t.icmp_type, 0);
	assert_int_equal(t.icmp_code, 0);
}

static void
test_tcp_payload_and_padding(void **state)
{
	uint8_t p[20 + 20 + 6 + 4];
	struct nfq_tuple t;

	(void)state;
	/* 20 bytes IP, 20 TCP, 6 payload; 4 bytes of link padding after the
	 * total length must not count. */
	memcpy(p, tcp_syn, 40);
	set_be16(p + 2, 46);
	p[32] = 0x50;			/* data offset 5 */
	p[33] = 0x18;			/* PSH|ACK */
	memcpy(p + 28, "\x9a\xbc\xde\xf0", 4);	/* ack */
	memcpy(p + 40, "GET / ", 6);
	memset(p + 46, 0xee, 4);
	assert_int_equal(nfq_packet_parse(p, sizeof(p), &t), NFQ_PARSE_OK);
	assert_int_equal(t.tcp_flags, 0x18);
	assert_int_equal(t.tcp_seq, 0x12345678U);
	assert_int_equal(t.tcp_ack, 0x9abcdef0U);
	assert_ptr_equal(t.l4_payload, p + 40);
	assert_int_equal(t.l4_len, 6);
}

/* A copy of a packet's first bytes (NFLOG's range): parse_head reads its
 * headers, parse calls it truncated; headers cut short fail both. */
static void
test_head_of_a_copy(void **state)
{
	uint8_t p[20 + 32 + 8];
	struct nfq_tuple t;
	size_t k;

	(void)state;
	memcpy(p, tcp_syn, 40);
	set_be16(p + 2, 1500);		/* the packet was 1,500 bytes */
	p[32] = 0x80;			/* data offset 8: 12 bytes of options */
	p[33] = 0x10;			/* ACK */
	set_be16(p + 28, 0x0102);
	set_be16(p + 30, 0x0304);	/* ack 0x01020304 */
	memset(p + 40, 0, 20);
	assert_int_equal(nfq_packet_parse(p, sizeof(p), &t),
	    NFQ_PARSE_TRUNCATED);
	assert_int_equal(nfq_packet_parse_head(p, sizeof(p), &t), NFQ_PARSE_OK);
	assert_int_equal(t.proto, IPPROTO_TCP);
	assert_int_equal(t.tcp_flags, 0x10);
	assert_int_equal(t.tcp_ack, 0x01020304U);
	assert_int_equal(t.tcp_optlen, 12);
	assert_ptr_equal(t.l4_payload, p + 52);
	assert_int_equal(t.l4_len, 8);	/* what was copied of it */
	for (k = 0; k < 52; k++)
		assert_int_equal(nfq_packet_parse_head(p, k, &t),
		    NFQ_PARSE_TRUNCATED);
	/* a whole packet parses the same both ways */
	set_be16(p + 2, sizeof(p));
	assert_int_equal(nfq_packet_parse_head(p, sizeof(p), &t), NFQ_PARSE_OK);
	assert_int_equal(t.l4_len, 8);
}

static void
test_udp(void **state)
{
	struct nfq_tuple t;

	(void)state;
	assert_int_equal(nfq_packet_parse(udp_dgram, sizeof(udp_dgram), &t),
	    NFQ_PARSE_OK);
	assert_int_equal(t.proto, IPPROTO_UDP);
	assert_int_equal(t.saddr, htonl(0x0a000002));
	assert_int_equal(t.daddr, htonl(0xc0000235));
	assert_int_equal(t.sport, 54321);
	assert_int_equal(t.dport, 53);
	assert_int_equal(t.tcp_flags, 0);
	assert_ptr_equal(t.l4_payload, udp_dgram + 28);
	assert_int_equal(t.l4_len, 5);
	assert_memory_equal(t.l4_payload, "hello", 5);
}

static void
test_udp_length_bounds_payload(void **state)
{
	uint8_t p[sizeof(udp_dgram)];
	struct nfq_tuple t;

	(void)state;
	/* UDP says 10 of the 13 bytes the IP header gives it. */
	memcpy(p, udp_dgram, sizeof(p));
	set_be16(p + 24, 10);
	assert_int_equal(nfq_packet_parse(p, sizeof(p), &t), NFQ_PARSE_OK);
	assert_int_equal(t.l4_len, 2);
	/* Exactly the header: empty payload. */
	set_be16(p + 24, 8);
	assert_int_equal(nfq_packet_parse(p, sizeof(p), &t), NFQ_PARSE_OK);
	assert_int_equal(t.l4_len, 0);
}

static void
test_icmp_echo(void **state)
{
	struct nfq_tuple t;

	(void)state;
	assert_int_equal(nfq_packet_parse(icmp_echo, sizeof(icmp_echo), &t),
	    NFQ_PARSE_OK);
	assert_int_equal(t.proto, IPPROTO_ICMP);
	assert_int_equal(t.daddr, htonl(0xcb007109));
	assert_int_equal(t.sport, 0);
	assert_int_equal(t.dport, 0);
	assert_int_equal(t.icmp_type, 8);
	assert_int_equal(t.icmp_code, 0);
	assert_ptr_equal(t.l4_payload, icmp_echo + 28);
	assert_int_equal(t.l4_len, 4);
}

static void
test_icmp_unreachable_code(void **state)
{
	uint8_t p[sizeof(icmp_echo)];
	struct nfq_tuple t;

	(void)state;
	memcpy(p, icmp_echo, sizeof(p));
	p[20] = 3;
	p[21] = 13;
	assert_int_equal(nfq_packet_parse(p, sizeof(p), &t), NFQ_PARSE_OK);
	assert_int_equal(t.icmp_type, 3);
	assert_int_equal(t.icmp_code, 13);
}

static void
test_ip_options(void **state)
{
	uint8_t p[24 + 8 + 5];
	struct nfq_tuple t;

	(void)state;
	/* IHL 6: 4 bytes of options (NOPs and an end of list). */
	memcpy(p, udp_dgram, 20);
	p[0] = 0x46;
	set_be16(p + 2, sizeof(p));
	p[20] = 1; p[21] = 1; p[22] = 1; p[23] = 0;
	memcpy(p + 24, udp_dgram + 20, 13);
	assert_int_equal(nfq_packet_parse(p, sizeof(p), &t), NFQ_PARSE_OK);
	assert_int_equal(t.sport, 54321);
	assert_int_equal(t.dport, 53);
	assert_ptr_equal(t.l4_payload, p + 32);
	assert_int_equal(t.l4_len, 5);
}

static void
test_other_protocol(void **state)
{
	uint8_t p[sizeof(udp_dgram)];
	struct nfq_tuple t;

	(void)state;
	memcpy(p, udp_dgram, sizeof(p));
	p[9] = 47;			/* GRE */
	assert_int_equal(nfq_packet_parse(p, sizeof(p), &t), NFQ_PARSE_OK);
	assert_int_equal(t.proto, 47);
	assert_int_equal(t.sport, 0);
	assert_int_equal(t.dport, 0);
	assert_ptr_equal(t.l4_payload, p + 20);
	assert_int_equal(t.l4_len, 13);
	/* An empty payload is still a packet. */
	set_be16(p + 2, 20);
	assert_int_equal(nfq_packet_parse(p, 20, &t), NFQ_PARSE_OK);
	assert_int_equal(t.l4_len, 0);
}

/* Every prefix of a valid packet is truncated, whatever field it cuts. */
static void
test_every_truncation_point(void **state)
{
	static const struct {
		const uint8_t	*p;
		size_t		 len;
	} pkts[] = {
		{ tcp_syn, sizeof(tcp_syn) },
		{ udp_dgram, sizeof(udp_dgram) },
		{ icmp_echo, sizeof(icmp_echo) },
	};
	size_t i, len;

	(void)state;
	for (i = 0; i < sizeof(pkts) / sizeof(pkts[0]); i++)
		for (len = 0; len < pkts[i].len; len++)
			assert_int_equal(parse(pkts[i].p, len),
			    NFQ_PARSE_TRUNCATED);
}

/* The IP header is whole and consistent but says the L4 header is cut:
 * total length (and len) end inside it. */
static void
test_l4_header_truncated(void **state)
{
	uint8_t p[64];
	size_t k;

	(void)state;
	/* TCP: the fixed header, then the options the data offset claims. */
	for (k = 0; k < 40; k++) {
		memcpy(p, tcp_syn, sizeof(tcp_syn));
		set_be16(p + 2, (uint16_t)(20 + k));
		assert_int_equal(parse(p, 20 + k), NFQ_PARSE_TRUNCATED);
		/* The same with bytes beyond the total length: still cut. */
		assert_int_equal(parse(p, sizeof(tcp_syn)),
		    NFQ_PARSE_TRUNCATED);
	}
	for (k = 0; k < 8; k++) {
		memcpy(p, udp_dgram, sizeof(udp_dgram));
		set_be16(p + 2, (uint16_t)(20 + k));
		assert_int_equal(parse(p, 20 + k), NFQ_PARSE_TRUNCATED);
		memcpy(p, icmp_echo, sizeof(icmp_echo));
		set_be16(p + 2, (uint16_t)(20 + k));
		assert_int_equal(parse(p, 20 + k), NFQ_PARSE_TRUNCATED);
	}
}

static void
test_len_zero(void **state)
{
	(void)state;
	assert_int_equal(parse(udp_dgram, 0), NFQ_PARSE_TRUNCATED);
}

static void
test_version(void **state)
{
	uint8_t p[sizeof(udp_dgram)];

	(void)state;
	memcpy(p, udp_dgram, sizeof(p));
	p[0] = 0x60;
	assert_int_equal(parse(p, sizeof(p)), NFQ_PARSE_BAD_VERSION);
	/* The version nibble decides before the length does. */
	assert_int_equal(parse(p, 1), NFQ_PARSE_BAD_VERSION);
	p[0] = 0x05;
	assert_int_equal(parse(p, sizeof(p)), NFQ_PARSE_BAD_VERSION);
	p[0] = 0xf5;
	assert_int_equal(parse(p, sizeof(p)), NFQ_PARSE_BAD_VERSION);
}

static void
test_ihl(void **state)
{
	uint8_t p[sizeof(udp_dgram)];

	(void)state;
	memcpy(p, udp_dgram, sizeof(p));
	p[0] = 0x44;
	assert_int_equal(parse(p, sizeof(p)), NFQ_PARSE_BAD_HEADER);
	p[0] = 0x40;
	assert_int_equal(parse(p, sizeof(p)), NFQ_PARSE_BAD_HEADER);
	/* IHL 15 = 60 bytes in a 33-byte packet. */
	p[0] = 0x4f;
	assert_int_equal(parse(p, sizeof(p)), NFQ_PARSE_TRUNCATED);
	/* IHL 9 = 36 bytes: beyond len by exactly 3. */
	p[0] = 0x49;
	assert_int_equal(parse(p, sizeof(p)), NFQ_PARSE_TRUNCATED);
}

static void
test_total_length(void **state)
{
	uint8_t p[sizeof(udp_dgram)];

	(void)state;
	memcpy(p, udp_dgram, sizeof(p));
	set_be16(p + 2, 19);
	assert_int_equal(parse(p, sizeof(p)), NFQ_PARSE_BAD_HEADER);
	set_be16(p + 2, 0);
	assert_int_equal(parse(p, sizeof(p)), NFQ_PARSE_BAD_HEADER);
	/* With IHL 6 the header is 24 bytes: total 23 is below it. */
	p[0] = 0x46;
	set_be16(p + 2, 23);
	assert_int_equal(parse(p, sizeof(p)), NFQ_PARSE_BAD_HEADER);
	p[0] = 0x45;
	set_be16(p + 2, sizeof(p) + 1);
	assert_int_equal(parse(p, sizeof(p)), NFQ_PARSE_TRUNCATED);
	set_be16(p + 2, 0xffff);
	assert_int_equal(parse(p, sizeof(p)), NFQ_PARSE_TRUNCATED);
}

static void
test_fragments(void **state)
{
	uint8_t p[sizeof(tcp_syn)];

	(void)state;
	memcpy(p, tcp_syn, sizeof(p));
	p[6] = 0x20;			/* MF, offset 0: a first fragment */
	p[7] = 0x00;
	assert_int_equal(parse(p, sizeof(p)), NFQ_PARSE_FRAGMENT);
	p[6] = 0x60;			/* DF and MF together */
	assert_int_equal(parse(p, sizeof(p)), NFQ_PARSE_FRAGMENT);
	p[6] = 0x00;			/* offset 1 (8 bytes), last fragment */
	p[7] = 0x01;
	assert_int_equal(parse(p, sizeof(p)), NFQ_PARSE_FRAGMENT);
	p[6] = 0x10;			/* offset in the high bits only */
	p[7] = 0x00;
	assert_int_equal(parse(p, sizeof(p)), NFQ_PARSE_FRAGMENT);
	p[6] = 0x40;			/* DF alone is a whole packet */
	assert_int_equal(parse(p, sizeof(p)), NFQ_PARSE_OK);
}

static void
test_tcp_data_offset(void **state)
{
	uint8_t p[sizeof(tcp_syn)];
	uint8_t doff;

	(void)state;
	memcpy(p, tcp_syn, sizeof(p));
	for (doff = 0; doff < 5; doff++) {
		p[32] = (uint8_t)(doff << 4);
		assert_int_equal(parse(p, sizeof(p)), NFQ_PARSE_BAD_HEADER);
	}
	/* 11 and 15 words: beyond the 40 bytes the packet has. */
	p[32] = 0xb0;
	assert_int_equal(parse(p, sizeof(p)), NFQ_PARSE_TRUNCATED);
	p[32] = 0xf0;
	assert_int_equal(parse(p, sizeof(p)), NFQ_PARSE_TRUNCATED);
	/* 5 words: the options become payload. */
	p[32] = 0x50;
	{
		struct nfq_tuple t;

		assert_int_equal(nfq_packet_parse(p, sizeof(p), &t),
		    NFQ_PARSE_OK);
		assert_int_equal(t.l4_len, 20);
	}
}

static void
test_udp_length(void **state)
{
	uint8_t p[sizeof(udp_dgram)];
	uint16_t ulen;

	(void)state;
	memcpy(p, udp_dgram, sizeof(p));
	for (ulen = 0; ulen < 8; ulen++) {
		set_be16(p + 24, ulen);
		assert_int_equal(parse(p, sizeof(p)), NFQ_PARSE_BAD_HEADER);
	}
	set_be16(p + 24, 14);
	assert_int_equal(parse(p, sizeof(p)), NFQ_PARSE_TRUNCATED);
	set_be16(p + 24, 0xffff);
	assert_int_equal(parse(p, sizeof(p)), NFQ_PARSE_TRUNCATED);
}

static void
test_strings(void **state)
{
	(void)state;
	assert_string_equal(nfq_parse_error_str(NFQ_PARSE_OK), "ok");
	assert_string_equal(nfq_parse_error_str(NFQ_PARSE_TRUNCATED),
	    "truncated packet");
	assert_string_equal(nfq_parse_error_str(NFQ_PARSE_BAD_VERSION),
	    "not IPv4");
	assert_string_equal(nfq_parse_error_str(NFQ_PARSE_BAD_HEADER),
	    "malformed header");
	assert_string_equal(nfq_parse_error_str(NFQ_PARSE_FRAGMENT),
	    "IP fragment");
	assert_string_equal(nfq_parse_error_str((enum nfq_parse_error)99),
	    "unknown parse error");
	assert_string_equal(nfq_proto_name(IPPROTO_TCP), "tcp");
	assert_string_equal(nfq_proto_name(IPPROTO_UDP), "udp");
	assert_string_equal(nfq_proto_name(IPPROTO_ICMP), "icmp");
	assert_string_equal(nfq_proto_name(47), "ip");
	assert_string_equal(nfq_proto_name(0), "ip");
}

/* 2001:db8:5::2 -> 2001:db8:66::66, hop-by-hop options then TCP 40000 -> 443 */
static uint8_t v6_tcp[40 + 8 + 20];

static void
v6_build(uint8_t *b, size_t len, uint8_t nh)
{
	memset(b, 0, len);
	b[0] = 0x60;
	b[4] = (uint8_t)((len - 40) >> 8);
	b[5] = (uint8_t)(len - 40);
	b[6] = nh;
	b[7] = 64;
	b[8] = 0x20; b[9] = 0x01; b[10] = 0x0d; b[11] = 0xb8; b[13] = 0x05;
	b[23] = 0x02;
	b[24] = 0x20; b[25] = 0x01; b[26] = 0x0d; b[27] = 0xb8; b[29] = 0x66;
	b[38] = 0x00; b[39] = 0x66;
}

static void
test_ipv6_ext_tcp(void **state)
{
	struct nfq_tuple6 t;
	char s[INET6_ADDRSTRLEN], d[INET6_ADDRSTRLEN];
	size_t n;

	(void)state;
	v6_build(v6_tcp, sizeof(v6_tcp), 0);
	v6_tcp[40] = IPPROTO_TCP;	/* hop-by-hop: next TCP, 8 bytes */
	v6_tcp[48] = 0x9c; v6_tcp[49] = 0x40;	/* 40000 */
	v6_tcp[50] = 0x01; v6_tcp[51] = 0xbb;	/* 443 */
	assert_int_equal(nfq_packet6_parse(v6_tcp, sizeof(v6_tcp), &t),
	    NFQ_PARSE_OK);
	assert_int_equal(t.proto, IPPROTO_TCP);
	assert_int_equal(t.sport, 40000);
	assert_int_equal(t.dport, 443);
	inet_ntop(AF_INET6, t.saddr, s, sizeof(s));
	inet_ntop(AF_INET6, t.daddr, d, sizeof(d));
	assert_string_equal(s, "2001:db8:5::2");
	assert_string_equal(d, "2001:db8:66::66");
	assert_string_equal(nfq_proto_name(IPPROTO_ICMPV6), "icmp6");

	/* every truncation is refused, never read past */
	for (n = 0; n < sizeof(v6_tcp); n++) {
		/* the buffer cut short, then the payload length too */
		assert_int_not_equal(nfq_packet6_parse(v6_tcp, n, &t),
		    NFQ_PARSE_OK);
		v6_tcp[4] = (uint8_t)((n > 40 ? n - 40 : 0) >> 8);
		v6_tcp[5] = (uint8_t)(n > 40 ? n - 40 : 0);
		assert_int_not_equal(nfq_packet6_parse(v6_tcp, sizeof(v6_tcp),
		    &t), NFQ_PARSE_OK);
		v6_tcp[4] = 0;
		v6_tcp[5] = sizeof(v6_tcp) - 40;
	}
	/* an IPv4 packet is not IPv6 */
	assert_int_equal(nfq_packet6_parse(tcp_syn, sizeof(tcp_syn), &t),
	    NFQ_PARSE_BAD_VERSION);
}

static void
test_ipv6_icmp_fragment(void **state)
{
	uint8_t b[40 + 8 + 8];
	struct nfq_tuple6 t;

	(void)state;
	v6_build(b, sizeof(b), IPPROTO_ICMPV6);
	b[40] = 135;	/* neighbour solicitation */
	assert_int_equal(nfq_packet6_parse(b, 43, &t), NFQ_PARSE_TRUNCATED);
	v6_build(b, 48, IPPROTO_ICMPV6);
	b[40] = 135;
	assert_int_equal(nfq_packet6_parse(b, 48, &t), NFQ_PARSE_OK);
	assert_int_equal(t.proto, IPPROTO_ICMPV6);
	assert_int_equal(t.icmp_type, 135);

	/* a later fragment: protocol known, no ports */
	v6_build(b, sizeof(b), 44);
	b[40] = IPPROTO_UDP;
	b[42] = 0x00; b[43] = 0x08;	/* offset 1 (8 bytes) */
	b[48] = 0x12; b[49] = 0x34; b[50] = 0x00; b[51] = 0x35;
	assert_int_equal(nfq_packet6_parse(b, sizeof(b), &t), NFQ_PARSE_OK);
	assert_int_equal(t.proto, IPPROTO_UDP);
	assert_int_equal(t.dport, 0);
	/* the first fragment carries them */
	b[42] = 0x00; b[43] = 0x01;	/* offset 0, more fragments */
	assert_int_equal(nfq_packet6_parse(b, sizeof(b), &t), NFQ_PARSE_OK);
	assert_int_equal(t.sport, 0x1234);
	assert_int_equal(t.dport, 53);

	/* an extension header running past the payload */
	v6_build(b, sizeof(b), 60);
	b[40] = IPPROTO_TCP;
	b[41] = 2;	/* 24 bytes, only 16 there */
	assert_int_equal(nfq_packet6_parse(b, sizeof(b), &t),
	    NFQ_PARSE_TRUNCATED);
	/* a chain longer than the walk ends where it stops */
	{
		uint8_t c[40 + 8 * 10];
		int i;

		v6_build(c, sizeof(c), 60);
		for (i = 0; i < 10; i++)
			c[40 + 8 * i] = 60;
		assert_int_equal(nfq_packet6_parse(c, sizeof(c), &t),
		    NFQ_PARSE_OK);
		assert_int_equal(t.proto, 60);
		assert_int_equal(t.dport, 0);
	}
}

/* Ones' complement sum of 16-bit words, folded, written apart from
 * packet.c's: a header with its checksum in place sums to 0xffff. */
static unsigned
ones_sum(const uint8_t *p, size_t len, unsigned sum)
{
	size_t i;

	for (i = 0; i < len; i += 2)
		sum += (unsigned)p[i] << 8 | (i + 1 < len ? p[i + 1] : 0);
	while (sum > 0xffff)
		sum = (sum & 0xffff) + (sum >> 16);
	return sum;
}

static void
test_tcp_rst(void **state)
{
	uint8_t buf[64], pseudo[12];
	struct nfq_tuple t;
	uint32_t s = inet_addr("10.213.0.2"), d = inet_addr("192.0.2.10");

	(void)state;
	assert_int_equal(nfq_tcp_rst(buf, NFQ_TCP_RST_LEN - 1, s, 41001, d,
	    443, 0x89abcdefu), 0);
	memset(buf, 0xaa, sizeof(buf));
	assert_int_equal(nfq_tcp_rst(buf, sizeof(buf), s, 41001, d, 443,
	    0x89abcdefu), NFQ_TCP_RST_LEN);
	assert_int_equal(nfq_packet_parse(buf, NFQ_TCP_RST_LEN, &t),
	    NFQ_PARSE_OK);
	assert_int_equal(t.proto, IPPROTO_TCP);
	assert_int_equal(t.saddr, s);
	assert_int_equal(t.daddr, d);
	assert_int_equal(t.sport, 41001);
	assert_int_equal(t.dport, 443);
	assert_int_equal(t.tcp_seq, 0x89abcdefu);
	assert_int_equal(t.tcp_ack, 0);
	assert_int_equal(t.tcp_flags, 0x04);	/* RST alone */
	assert_int_equal(t.tcp_optlen, 0);
	assert_int_equal(t.l4_len, 0);
	assert_int_equal(t.ttl, 64);
	/* both checksums: the known values, and a sum that checks out */
	assert_int_equal(buf[10] << 8 | buf[11], 0x6def);
	assert_int_equal(buf[36] << 8 | buf[37], 0xe97f);
	assert_int_equal(ones_sum(buf, 20, 0), 0xffff);
	memcpy(pseudo, &s, 4);
	memcpy(pseudo + 4, &d, 4);
	pseudo[8] = 0;
	pseudo[9] = IPPROTO_TCP;
	pseudo[10] = 0;
	pseudo[11] = 20;
	assert_int_equal(ones_sum(buf + 20, 20, ones_sum(pseudo, 12, 0)),
	    0xffff);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tcp_syn),
		cmocka_unit_test(test_tcp_payload_and_padding),
		cmocka_unit_test(test_head_of_a_copy),
		cmocka_unit_test(test_tcp_rst),
		cmocka_unit_test(test_udp),
		cmocka_unit_test(test_udp_length_bounds_payload),
		cmocka_unit_test(test_icmp_echo),
		cmocka_unit_test(test_icmp_unreachable_code),
		cmocka_unit_test(test_ip_options),
		cmocka_unit_test(test_other_protocol),
		cmocka_unit_test(test_every_truncation_point),
		cmocka_unit_test(test_l4_header_truncated),
		cmocka_unit_test(test_len_zero),
		cmocka_unit_test(test_version),
		cmocka_unit_test(test_ihl),
		cmocka_unit_test(test_total_length),
		cmocka_unit_test(test_fragments),
		cmocka_unit_test(test_tcp_data_offset),
		cmocka_unit_test(test_udp_length),
		cmocka_unit_test(test_strings),
		cmocka_unit_test(test_ipv6_ext_tcp),
		cmocka_unit_test(test_ipv6_icmp_fragment),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
