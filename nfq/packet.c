/* packet.c: parse a queued packet's IP and TCP/UDP/ICMP headers (IPv4; IPv6 for the log). */
#include <stdbool.h>
#include <string.h>
#include <netinet/in.h>

#include "nfq/nfq.h"

#define IP_MIN_HLEN	20
#define IP_FLAG_MF	0x2000
#define IP_FRAG_OFFSET	0x1fff
#define TCP_MIN_HLEN	20
#define UDP_HLEN	8
#define ICMP_HLEN	8

static uint16_t
get_be16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static enum nfq_parse_error
parse_tcp(const uint8_t *l4, size_t l4len, struct nfq_tuple *t)
{
	size_t hlen;

	if (l4len < TCP_MIN_HLEN)
		return NFQ_PARSE_TRUNCATED;
	hlen = (size_t)(l4[12] >> 4) * 4;
	if (hlen < TCP_MIN_HLEN)
		return NFQ_PARSE_BAD_HEADER;
	if (hlen > l4len)
		return NFQ_PARSE_TRUNCATED;
	t->sport = get_be16(l4);
	t->dport = get_be16(l4 + 2);
	t->tcp_flags = l4[13];
	t->tcp_seq = (uint32_t)get_be16(l4 + 4) << 16 | get_be16(l4 + 6);
	t->tcp_ack = (uint32_t)get_be16(l4 + 8) << 16 | get_be16(l4 + 10);
	t->tcp_opts = l4 + TCP_MIN_HLEN;
	t->tcp_optlen = hlen - TCP_MIN_HLEN;
	t->l4_payload = l4 + hlen;
	t->l4_len = l4len - hlen;
	return NFQ_PARSE_OK;
}

static enum nfq_parse_error
parse_udp(const uint8_t *l4, size_t l4len, struct nfq_tuple *t)
{
	size_t ulen;

	if (l4len < UDP_HLEN)
		return NFQ_PARSE_TRUNCATED;
	ulen = get_be16(l4 + 4);
	if (ulen < UDP_HLEN)
		return NFQ_PARSE_BAD_HEADER;
	if (ulen > l4len)
		return NFQ_PARSE_TRUNCATED;
	t->sport = get_be16(l4);
	t->dport = get_be16(l4 + 2);
	t->l4_payload = l4 + UDP_HLEN;
	t->l4_len = ulen - UDP_HLEN;
	return NFQ_PARSE_OK;
}

static enum nfq_parse_error
parse_icmp(const uint8_t *l4, size_t l4len, struct nfq_tuple *t)
{
	if (l4len < ICMP_HLEN)
		return NFQ_PARSE_TRUNCATED;
	t->icmp_type = l4[0];
	t->icmp_code = l4[1];
	/* an echo's id tells one ping from the next (conntrack keys on it) */
	if (t->icmp_type == 8 || t->icmp_type == 0)
		t->icmp_id = (uint16_t)(l4[4] << 8 | l4[5]);
	t->l4_payload = l4 + ICMP_HLEN;
	t->l4_len = l4len - ICMP_HLEN;
	return NFQ_PARSE_OK;
}

/* cut: buf may hold only the packet's first len bytes (a copy's range) */
static enum nfq_parse_error
packet_parse(const uint8_t *buf, size_t len, bool cut, struct nfq_tuple *t)
{
	size_t hlen, totlen;

	memset(t, 0, sizeof(*t));
	if (len == 0)
		return NFQ_PARSE_TRUNCATED;
	if (buf[0] >> 4 != 4)
		return NFQ_PARSE_BAD_VERSION;
	if (len < IP_MIN_HLEN)
		return NFQ_PARSE_TRUNCATED;
	hlen = (size_t)(buf[0] & 0x0f) * 4;
	if (hlen < IP_MIN_HLEN)
		return NFQ_PARSE_BAD_HEADER;
	if (hlen > len)
		return NFQ_PARSE_TRUNCATED;
	/* The total length bounds the packet: bytes beyond it (padding) are
	 * not part of it. */
	totlen = get_be16(buf + 2);
	if (totlen < hlen)
		return NFQ_PARSE_BAD_HEADER;
	if (totlen > len && !cut)
		return NFQ_PARSE_TRUNCATED;
	if (totlen > len)
		totlen = len;
	if (get_be16(buf + 6) & (IP_FLAG_MF | IP_FRAG_OFFSET))
		return NFQ_PARSE_FRAGMENT;

	t->proto = buf[9];
	t->ip_hlen = (uint8_t)hlen;
	t->ttl = buf[8];
	memcpy(&t->saddr, buf + 12, sizeof(t->saddr));
	memcpy(&t->daddr, buf + 16, sizeof(t->daddr));

	switch (t->proto) {
	case IPPROTO_TCP:
		return parse_tcp(buf + hlen, totlen - hlen, t);
	case IPPROTO_UDP:
		return parse_udp(buf + hlen, totlen - hlen, t);
	case IPPROTO_ICMP:
		return parse_icmp(buf + hlen, totlen - hlen, t);
	default:
		t->l4_payload = buf + hlen;
		t->l4_len = totlen - hlen;
		return NFQ_PARSE_OK;
	}
}

enum nfq_parse_error
nfq_packet_parse(const uint8_t *buf, size_t len, struct nfq_tuple *t)
{
	return packet_parse(buf, len, false, t);
}

enum nfq_parse_error
nfq_packet_parse_head(const uint8_t *buf, size_t len, struct nfq_tuple *t)
{
	return packet_parse(buf, len, true, t);
}

const char *
nfq_parse_error_str(enum nfq_parse_error e)
{
	switch (e) {
	case NFQ_PARSE_OK:
		return "ok";
	case NFQ_PARSE_TRUNCATED:
		return "truncated packet";
	case NFQ_PARSE_BAD_VERSION:
		return "not IPv4";
	case NFQ_PARSE_BAD_HEADER:
		return "malformed header";
	case NFQ_PARSE_FRAGMENT:
		return "IP fragment";
	}
	return "unknown parse error";
}

const char *
nfq_proto_name(uint8_t proto)
{
	switch (proto) {
	case IPPROTO_TCP:
		return "tcp";
	case IPPROTO_UDP:
		return "udp";
	case IPPROTO_ICMP:
		return "icmp";
	case IPPROTO_ICMPV6:
		return "icmp6";
	default:
		return "ip";
	}
}

void
nfq_tcp_options(const uint8_t *opts, size_t len, struct nfq_tcp_opts *o)
{
	size_t i = 0, olen;

	memset(o, 0, sizeof(*o));
	while (i < len) {
		uint8_t kind = opts[i];

		if (kind == 0)			/* end of options */
			break;
		if (kind == 1) {		/* no-op */
			i++;
			continue;
		}
		if (i + 1 >= len || (olen = opts[i + 1]) < 2 || i + olen > len) {
			o->malformed = true;
			return;
		}
		if (kind == 19 || kind == 29)
			o->signature = true;
		if (kind == 8 && olen == 10) {
			o->has_ts = true;
			o->tsval = (uint32_t)opts[i + 2] << 24 |
			    (uint32_t)opts[i + 3] << 16 |
			    (uint32_t)opts[i + 4] << 8 | opts[i + 5];
		}
		i += olen;
	}
}

#define IP6_HLEN	40
#define IP6_EXT_MAX	8

enum nfq_parse_error
nfq_packet6_parse(const uint8_t *buf, size_t len, struct nfq_tuple6 *t)
{
	const uint8_t *p;
	size_t plen, off, hlen;
	uint8_t nh;
	bool first = true;
	int i;

	memset(t, 0, sizeof(*t));
	if (len < 1)
		return NFQ_PARSE_TRUNCATED;
	if (buf[0] >> 4 != 6)
		return NFQ_PARSE_BAD_VERSION;
	if (len < IP6_HLEN)
		return NFQ_PARSE_TRUNCATED;
	plen = get_be16(buf + 4);
	/* a jumbogram (payload length 0) never reaches a veth */
	if (plen == 0 || IP6_HLEN + plen > len)
		return NFQ_PARSE_TRUNCATED;
	memcpy(t->saddr, buf + 8, 16);
	memcpy(t->daddr, buf + 24, 16);
	nh = buf[6];
	p = buf + IP6_HLEN;
	off = 0;
	for (i = 0; i < IP6_EXT_MAX; i++) {
		if (nh == 0 || nh == 43 || nh == 60) {
			/* hop-by-hop, routing, destination options:
			 * (length + 1) * 8 bytes */
			if (off + 2 > plen)
				return NFQ_PARSE_TRUNCATED;
			hlen = ((size_t)p[off + 1] + 1) * 8;
		} else if (nh == 51) {
			/* AH: (length + 2) * 4 bytes */
			if (off + 2 > plen)
				return NFQ_PARSE_TRUNCATED;
			hlen = ((size_t)p[off + 1] + 2) * 4;
		} else if (nh == 44) {
			/* fragment: only the first carries the ports */
			if (off + 8 > plen)
				return NFQ_PARSE_TRUNCATED;
			if ((get_be16(p + off + 2) & 0xfff8) != 0)
				first = false;
			hlen = 8;
		} else {
			break;
		}
		if (off + hlen > plen)
			return NFQ_PARSE_TRUNCATED;
		nh = p[off];
		off += hlen;
	}
	t->proto = nh;
	if (!first)
		return NFQ_PARSE_OK;
	/* a first fragment's transport header must be whole */
	if (nh == IPPROTO_TCP || nh == IPPROTO_UDP) {
		if (off + (nh == IPPROTO_TCP ? TCP_MIN_HLEN : UDP_HLEN) > plen)
			return NFQ_PARSE_TRUNCATED;
		t->sport = get_be16(p + off);
		t->dport = get_be16(p + off + 2);
	} else if (nh == IPPROTO_ICMPV6) {
		if (off + 4 > plen)
			return NFQ_PARSE_TRUNCATED;
		t->icmp_type = p[off];
	}
	return NFQ_PARSE_OK;
}

/* ---- building a reset --------------------------------------------------- */

uint32_t
nfq_csum_add(uint32_t sum, const uint8_t *p, size_t len)
{
	size_t i;

	for (i = 0; i + 1 < len; i += 2)
		sum += get_be16(p + i);
	if (len & 1)
		sum += (uint32_t)p[len - 1] << 8;
	return sum;
}

uint16_t
nfq_csum_fold(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

static void
put_be16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void
put_be32(uint8_t *p, uint32_t v)
{
	put_be16(p, (uint16_t)(v >> 16));
	put_be16(p + 2, (uint16_t)v);
}

size_t
nfq_tcp_rst(uint8_t *buf, size_t len, uint32_t saddr, uint16_t sport,
    uint32_t daddr, uint16_t dport, uint32_t seq)
{
	uint8_t *ip = buf, *tcp = buf + IP_MIN_HLEN, pseudo[12];

	if (len < NFQ_TCP_RST_LEN)
		return 0;
	memset(buf, 0, NFQ_TCP_RST_LEN);
	ip[0] = 0x45;
	put_be16(ip + 2, NFQ_TCP_RST_LEN);
	put_be16(ip + 6, 0x4000);		/* DF */
	ip[8] = 64;
	ip[9] = IPPROTO_TCP;
	memcpy(ip + 12, &saddr, 4);
	memcpy(ip + 16, &daddr, 4);
	put_be16(ip + 10, nfq_csum_fold(nfq_csum_add(0, ip, IP_MIN_HLEN)));
	put_be16(tcp, sport);
	put_be16(tcp + 2, dport);
	put_be32(tcp + 4, seq);
	tcp[12] = (TCP_MIN_HLEN / 4) << 4;
	tcp[13] = 0x04;				/* RST */
	memcpy(pseudo, &saddr, 4);
	memcpy(pseudo + 4, &daddr, 4);
	pseudo[8] = 0;
	pseudo[9] = IPPROTO_TCP;
	put_be16(pseudo + 10, TCP_MIN_HLEN);
	put_be16(tcp + 16, nfq_csum_fold(nfq_csum_add(
	    nfq_csum_add(0, pseudo, sizeof(pseudo)), tcp, TCP_MIN_HLEN)));
	return NFQ_TCP_RST_LEN;
}
