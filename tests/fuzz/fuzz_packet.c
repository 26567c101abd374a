/* fuzz_packet.c: libFuzzer target for the IPv4 and IPv6 header parsers. */
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "nfq/nfq.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct nfq_tuple t;
	struct nfq_tuple6 t6;
	enum nfq_parse_error e;

	memset(&t, 0xa5, sizeof(t));
	e = nfq_packet_parse(data, size, &t);
	assert(nfq_parse_error_str(e) != NULL);
	if (e == NFQ_PARSE_OK) {
		/* the payload lies inside the input */
		assert(t.l4_payload >= data && t.l4_payload <= data + size);
		assert(t.l4_len <= size - (size_t)(t.l4_payload - data));
		assert(nfq_proto_name(t.proto) != NULL);
	}
	e = nfq_packet6_parse(data, size, &t6);
	assert(nfq_parse_error_str(e) != NULL);
	if (e == NFQ_PARSE_OK)
		assert(size >= 40 && data[0] >> 4 == 6);
	else
		assert(t6.sport == 0 && t6.dport == 0);
	return 0;
}
