/* classify.c: the application protocol of a flow, as nDPI names it. */
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Included through its directory so that the compiler treats nDPI's
 * headers as system headers: they do not build warning-free under our
 * flags otherwise, and no -I/usr/include/ndpi is needed. */
#include <ndpi/ndpi_api.h>

#include "nfq/nfq.h"

/*
 * nDPI 4.2 keeps its per-packet scratch state in the detection module, not
 * in the flow, so one classifier serves one thread at a time. It keeps no
 * pointer into a packet past the call that fed it.
 *
 * nDPI 4.2 prints nothing on the paths used here when they succeed. On a
 * failed allocation at initialisation ("[NDPI] Error allocating Patricia
 * trees") or a libgcrypt that will not initialise it writes a line to
 * stdout before returning NULL; a module cannot silence that without
 * touching process-wide descriptors, so it is left as is.
 */

/* Packets of a flow given to nDPI at most. nDPI names the protocols sluice
 * logs from the first client payload packet or two; the bound keeps a long
 * flow whose caller keeps feeding from costing more than that. */
#define CLASS_MAX_PACKETS	32

/* ndpi_detection_process_packet takes the length as an unsigned short. */
#define CLASS_MAX_PKT_LEN	0xffffu

struct nfq_classifier {
	struct ndpi_detection_module_struct	*ndpi;
};

struct nfq_class_flow {
	struct ndpi_flow_struct	*ndpi;
	ndpi_protocol		 proto;	/* as of the last packet fed */
	uint32_t		 packets;	/* given to nDPI */
	bool			 stopped;	/* nothing more to learn */
	bool			 decided;	/* proto is the final answer */
};

struct nfq_classifier *
nfq_classifier_new(void)
{
	struct nfq_classifier *c;
	NDPI_PROTOCOL_BITMASK all;

	if ((c = calloc(1, sizeof(*c))) == NULL)
		return NULL;
	/* No preferences: the defaults (Tor host list, libgcrypt set up for
	 * QUIC) are what nDPI is tested with. */
	if ((c->ndpi = ndpi_init_detection_module(ndpi_no_prefs)) == NULL) {
		free(c);
		return NULL;
	}
	NDPI_BITMASK_SET_ALL(all);
	ndpi_set_protocol_detection_bitmask2(c->ndpi, &all);
	ndpi_finalize_initialization(c->ndpi);
	return c;
}

void
nfq_classifier_free(struct nfq_classifier *c)
{
	if (c == NULL)
		return;
	ndpi_exit_detection_module(c->ndpi);
	free(c);
}

struct nfq_class_flow *
nfq_class_flow_new(struct nfq_classifier *c)
{
	struct nfq_class_flow *f;

	(void)c;
	if ((f = calloc(1, sizeof(*f))) == NULL)
		return NULL;
	/* nDPI 4.2 wants the flow zeroed and allocated by ndpi_flow_malloc,
	 * which ndpi_flow_free pairs with (it frees the flow's own
	 * allocations too). */
	if ((f->ndpi = ndpi_flow_malloc(SIZEOF_FLOW_STRUCT)) == NULL) {
		free(f);
		return NULL;
	}
	memset(f->ndpi, 0, SIZEOF_FLOW_STRUCT);
	return f;
}

void
nfq_class_flow_free(struct nfq_class_flow *f)
{
	if (f == NULL)
		return;
	ndpi_flow_free(f->ndpi);
	free(f);
}

static bool
proto_known(ndpi_protocol p)
{
	return p.app_protocol != NDPI_PROTOCOL_UNKNOWN ||
	    p.master_protocol != NDPI_PROTOCOL_UNKNOWN;
}

void
nfq_class_feed(struct nfq_classifier *c, struct nfq_class_flow *f,
    const uint8_t *pkt, size_t len, uint64_t ts_ms)
{
	if (f->stopped || f->decided || pkt == NULL || len == 0)
		return;
	/* Only an unsegmented BIG TCP packet is longer. Cut, not wrapped
	 * round by the cast into a short packet that might look valid. */
	if (len > CLASS_MAX_PKT_LEN)
		len = CLASS_MAX_PKT_LEN;
	f->proto = ndpi_detection_process_packet(c->ndpi, f->ndpi, pkt,
	    (unsigned short)len, ts_ms);
	f->packets++;
	/* Once named, more packets only matter while nDPI says they could
	 * refine the name (a Host header in a later segment, say). */
	if (f->packets >= CLASS_MAX_PACKETS ||
	    (proto_known(f->proto) &&
	    !ndpi_extra_dissection_possible(c->ndpi, f->ndpi)))
		f->stopped = true;
}

const char *
nfq_class_result(struct nfq_classifier *c, struct nfq_class_flow *f,
    char *buf, size_t len)
{
	uint8_t guessed;

	/* Giving up without guessing: a guess from the port or the address
	 * says nothing the log row does not already hold. A ClientHello
	 * with a server name that nDPI saw is still named TLS. The answer
	 * is fixed from here on, so that every call gives the same one. */
	if (!f->decided) {
		if (!proto_known(f->proto))
			f->proto = ndpi_detection_giveup(c->ndpi, f->ndpi, 0,
			    &guessed);
		f->decided = true;
	}
	if (len == 0)
		return buf;
	if (len > UINT_MAX)
		len = UINT_MAX;
	return ndpi_protocol2name(c->ndpi, f->proto, buf, (u_int)len);
}
