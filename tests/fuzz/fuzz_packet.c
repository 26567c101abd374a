/* fuzz_packet.c: libFuzzer target for the IPv4/TCP/UDP/ICMP header parser. */
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
	return 0;
}
