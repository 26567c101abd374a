/* fuzz_replay.c: libFuzzer target for `sluice replay`: the verdict engine over frames of a user's trace. */
#include <arpa/inet.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <pcap/pcap.h>

#include "gateway/capture.h"
#include "gateway/policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static const char policy_text[] =
"{\"network\": {\"allowedDomains\": [\"a.test\", \"*.b.test\"]},\n"
" \"sluice\": {\"mode\": \"enforce\",\n"
"  \"allowedCidrs\": [\"192.0.2.10:443\", \"192.0.2.20:80\"]}}\n";

static const int linktypes[] = { DLT_RAW, DLT_IPV4, DLT_EN10MB,
    DLT_LINUX_SLL, DLT_LINUX_SLL2 };

static struct policy *policy;

struct seen {
	uint64_t	frames;		/* fed so far */
	uint64_t	rows;
};

static void
check(int ok)
{
	if (!ok)
		abort();
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char err[256];

	(void)argc;
	(void)argv;
	policy = policy_parse(policy_text, sizeof(policy_text) - 1,
	    "fuzz.json", err, sizeof(err));
	if (policy == NULL)
		abort();
	return 0;
}

static bool
terminated(const char *s, size_t len)
{
	return memchr(s, '\0', len) != NULL;
}

static void
on_row(void *arg, const struct gw_replay_row *row)
{
	struct seen *s = arg;

	s->rows++;
	check(row->kind == GW_REPLAY_FLOW || row->kind == GW_REPLAY_DNS);
	check(row->seq >= 1 && row->seq <= s->frames);
	check(row->verdict != NULL && row->reason != NULL);
	check(strcmp(row->verdict, "allow") == 0 ||
	    strcmp(row->verdict, "deny") == 0 ||
	    strcmp(row->verdict, "audit") == 0);
	check(terminated(row->rule, sizeof(row->rule)) &&
	    terminated(row->name, sizeof(row->name)) &&
	    terminated(row->sni, sizeof(row->sni)) &&
	    terminated(row->http_host, sizeof(row->http_host)) &&
	    terminated(row->qname, sizeof(row->qname)) &&
	    terminated(row->qtype, sizeof(row->qtype)) &&
	    terminated(row->rcode, sizeof(row->rcode)) &&
	    terminated(row->answers, sizeof(row->answers)));
}

/*
 * The input: a byte choosing the link type and whether the sandbox's
 * address is given, then frames, each a 16-bit big-endian length, a
 * time step (byte t: t * 10 ms later, or 1 s earlier for 255, as a merged
 * capture can be) and that many bytes (fewer at the end). Every frame is
 * fed as sluice replay feeds a pcap file's, then the trace ends.
 */
int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gw_replay_opts o;
	struct gw_replay_stats st;
	struct gw_replay *r;
	struct seen seen = { 0, 0 };
	int64_t ts = 1700000000000000LL;
	size_t off = 1, len;
	int lt;

	if (size < 1)
		return 0;
	memset(&o, 0, sizeof(o));
	o.policy = policy;
	o.pool_net = htonl(0x0ad50000);		/* 10.213.0.0/16 */
	o.pool_mask = htonl(0xffff0000);
	o.uplink[0] = htonl(0x6440d502);	/* 100.64.213.2 */
	o.uplink[1] = htonl(0x6440d501);
	o.sandbox_addr = data[0] & 0x80 ? htonl(0x0ad50002) : 0;
	o.ttl_min = 30;
	o.ttl_max = 600;
	o.grace = 10;
	lt = linktypes[(data[0] & 0x7f) % (sizeof(linktypes) /
	    sizeof(linktypes[0]))];
	if ((r = gw_replay_new(&o, on_row, &seen)) == NULL)
		return 0;

	while (off + 3 <= size) {
		len = (size_t)data[off] << 8 | data[off + 1];
		ts += data[off + 2] == 255 ? -1000000 : data[off + 2] * 10000;
		off += 3;
		if (len > size - off)
			len = size - off;
		seen.frames++;
		check(gw_replay_frame(r, lt, data + off, len, ts) == 0);
		off += len;
	}
	gw_replay_finish(r);
	gw_replay_get_stats(r, &st);
	check(st.frames == seen.frames);
	check(st.not_ipv4 + st.malformed <= st.frames);
	check(st.flows + st.queries == seen.rows);
	gw_replay_free(r);
	return 0;
}
