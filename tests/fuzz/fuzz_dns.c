/* fuzz_dns.c: libFuzzer target for the DNS message parsers and writers. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dns/dns.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Too large for libFuzzer's stack budget to be comfortable per call. */
static struct dns_response resp;

static void
check(int ok)
{
	if (!ok)
		abort();
}

/* Every kept name must be printable and within bounds. */
static void
check_name(const char *name)
{
	size_t n = strnlen(name, DNS_NAME_MAX + 1);

	check(n <= DNS_NAME_MAX);
	for (size_t i = 0; i < n; i++)
		check(name[i] >= 0x21 && name[i] <= 0x7e);
}

/* Answers q with a CNAME, an A and an AAAA and reads the answer back. */
static void
answer_roundtrip(const struct dns_query *q)
{
	struct dns_rr rr[3];
	uint8_t out[600];
	size_t limit = q->edns ? (q->udp_size < DNS_EDNS_SIZE ? q->udp_size :
	    DNS_EDNS_SIZE) : DNS_UDP_PLAIN;
	int n;

	memset(rr, 0, sizeof(rr));
	memcpy(rr[0].name, q->qname, sizeof(rr[0].name));
	rr[0].type = DNS_T_CNAME;
	rr[0].ttl = 300;
	memcpy(rr[0].data.cname, "target.example", sizeof("target.example"));
	memcpy(rr[1].name, "target.example", sizeof("target.example"));
	rr[1].type = DNS_T_A;
	rr[1].ttl = 60;
	memcpy(rr[1].data.a, "\xc0\x00\x02\x01", 4);
	memcpy(rr[2].name, "Target.Example.", sizeof("Target.Example."));
	rr[2].type = DNS_T_AAAA;
	rr[2].ttl = 0;
	rr[2].data.aaaa[0] = 0x20;

	n = dns_write_answer(out, sizeof(out), limit, q, DNS_R_NOERROR, rr, 3);
	check(n > 0 && (size_t)n <= sizeof(out));
	check(dns_parse_response(out, (size_t)n, &resp) == DNS_PARSE_OK);
	check(resp.id == q->id);
	check(strcmp(resp.qname, q->qname) == 0);
	check(resp.qtype == q->qtype && resp.qclass == q->qclass);
	check(resp.nskipped == 0);
	if (resp.flags & 0x0200) {
		check(resp.nrr == 0);
	} else {
		check(resp.nrr == 3);
		check(dns_name_equal(resp.rr[0].name, q->qname));
		check(strcmp(resp.rr[0].data.cname, "target.example") == 0);
		check(memcmp(resp.rr[1].data.a, rr[1].data.a, 4) == 0);
		check(dns_name_equal(resp.rr[2].name, "target.example"));
	}

	/* The same question sent upstream parses as a query again. */
	n = dns_write_query(out, sizeof(out), q->id, q->qname, q->qtype,
	    q->qclass);
	check(n > 0);
	{
		struct dns_query again;

		check(dns_parse_query(out, (size_t)n, &again) == DNS_PARSE_OK);
		check(strcmp(again.qname, q->qname) == 0);
		check(again.edns && again.udp_size == DNS_EDNS_SIZE);
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dns_query q;
	uint8_t out[DNS_HDR_LEN];
	size_t i;

	if (dns_parse_query(data, size, &q) == DNS_PARSE_OK) {
		check_name(q.qname);
		check(q.udp_size >= DNS_UDP_PLAIN);
		answer_roundtrip(&q);
	}
	check(q.id == (size >= 2 ? (data[0] << 8 | data[1]) : 0));

	if (dns_parse_response(data, size, &resp) == DNS_PARSE_OK) {
		check_name(resp.qname);
		check(resp.nrr <= DNS_RR_MAX);
		for (i = 0; i < resp.nrr; i++) {
			check_name(resp.rr[i].name);
			if (resp.rr[i].type == DNS_T_CNAME)
				check_name(resp.rr[i].data.cname);
		}
	}

	check(dns_write_formerr(out, sizeof(out), data, size) ==
	    DNS_HDR_LEN);
	return 0;
}
