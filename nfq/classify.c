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

#include "dns/dns.h"
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

/* Packets, and bytes, a deferred flow keeps back at most; past either it
 * is fed. A ClientHello and its SYN fit several times over; the byte
 * bound keeps a sandbox's held flows (1,024 at most) from costing more
 * than 8 MiB here, whatever they resend. */
#define CLASS_DEFER_MAX		8
#define CLASS_DEFER_BYTES	8192

/*
 * Names by key (nfq_class_result_keyed): slots, a power of two. A slot
 * holds the key's two hashes under two secret keys, not the key itself:
 * one that two keys share names one flow as the other was named, and a
 * sandbox cannot aim for that, not knowing the keys.
 */
#define CLASS_CACHE_SLOTS	4096
#define CLASS_NAME_MAX		48

/* One hit in this many is named by nDPI all the same, and compared with
 * the cache's name: the cache rests on a reading of nDPI (that it names a
 * hello by what the key holds), and this checks it on live traffic, at
 * the cost of nDPI on one flow in 64. The slot then holds nDPI's name. */
#define CLASS_CACHE_CHECK	64

struct class_slot {
	uint64_t	 h1, h2;	/* 0 and 0: empty */
	char		 name[CLASS_NAME_MAX];
};

struct nfq_classifier {
	struct ndpi_detection_module_struct	*ndpi;
	struct class_slot	*cache;		/* NULL: none (no memory) */
	struct dns_hash_key	 k1, k2;
	uint64_t		 hits, misses;
	uint64_t		 checks, mismatches;
	unsigned		 until_check;	/* hits left before one is
						 * checked */
};

struct class_pkt {
	uint8_t			*data;
	size_t			 len;
	uint64_t		 ts_ms;
};

struct nfq_class_flow {
	struct ndpi_flow_struct	*ndpi;	/* NULL while deferred */
	ndpi_protocol		 proto;	/* as of the last packet fed */
	uint32_t		 packets;	/* given to nDPI */
	bool			 stopped;	/* nothing more to learn */
	bool			 decided;	/* proto is the final answer */
	bool			 deferred;	/* packets kept, not fed yet */
	bool			 failed;	/* no nDPI state: no name */
	struct class_pkt	 held[CLASS_DEFER_MAX];
	size_t			 nheld;
	size_t			 held_bytes;
	bool			 cached;	/* named from the cache, */
	char			 name[CLASS_NAME_MAX];	/* ... this */
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
	/* without it every flow is fed, as before there was one */
	c->cache = calloc(CLASS_CACHE_SLOTS, sizeof(*c->cache));
	dns_hash_key_new(&c->k1, c);
	dns_hash_key_new(&c->k2, &c->k2);
	c->until_check = CLASS_CACHE_CHECK;
	return c;
}

void
nfq_classifier_free(struct nfq_classifier *c)
{
	if (c == NULL)
		return;
	ndpi_exit_detection_module(c->ndpi);
	free(c->cache);
	free(c);
}

struct nfq_class_flow *
nfq_class_flow_new_deferred(struct nfq_classifier *c)
{
	struct nfq_class_flow *f;

	(void)c;
	if ((f = calloc(1, sizeof(*f))) == NULL)
		return NULL;
	f->deferred = true;
	return f;
}

static void
drop_held(struct nfq_class_flow *f)
{
	size_t i;

	for (i = 0; i < f->nheld; i++)
		free(f->held[i].data);
	f->nheld = 0;
	f->held_bytes = 0;
}

void
nfq_class_flow_free(struct nfq_class_flow *f)
{
	if (f == NULL)
		return;
	drop_held(f);
	if (f->ndpi != NULL)
		ndpi_flow_free(f->ndpi);
	free(f);
}

/* As nDPI writes a name: cut to fit, always terminated. */
static void
copy_name(char *dst, size_t size, const char *src)
{
	size_t n = strlen(src);

	if (size == 0)
		return;
	if (n >= size)
		n = size - 1;
	memcpy(dst, src, n);
	dst[n] = '\0';
}

static bool
proto_known(ndpi_protocol p)
{
	return p.app_protocol != NDPI_PROTOCOL_UNKNOWN ||
	    p.master_protocol != NDPI_PROTOCOL_UNKNOWN;
}

static void
feed(struct nfq_classifier *c, struct nfq_class_flow *f, const uint8_t *pkt,
    size_t len, uint64_t ts_ms)
{
	if (f->failed || f->stopped)
		return;
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

/* A deferred flow is given its nDPI state and what it kept, in order. */
static void
undefer(struct nfq_classifier *c, struct nfq_class_flow *f)
{
	size_t i;

	if (!f->deferred)
		return;
	f->deferred = false;
	/* nDPI 4.2 wants the flow zeroed and allocated by ndpi_flow_malloc,
	 * which ndpi_flow_free pairs with (it frees the flow's own
	 * allocations too). */
	if ((f->ndpi = ndpi_flow_malloc(SIZEOF_FLOW_STRUCT)) == NULL)
		f->failed = true;
	else
		memset(f->ndpi, 0, SIZEOF_FLOW_STRUCT);
	for (i = 0; i < f->nheld && !f->failed; i++)
		feed(c, f, f->held[i].data, f->held[i].len, f->held[i].ts_ms);
	drop_held(f);
}

/* A flow fed as it goes: a deferred one given its nDPI state at once. */
struct nfq_class_flow *
nfq_class_flow_new(struct nfq_classifier *c)
{
	struct nfq_class_flow *f;

	if ((f = nfq_class_flow_new_deferred(c)) == NULL)
		return NULL;
	undefer(c, f);
	if (f->failed) {
		free(f);
		return NULL;
	}
	return f;
}

void
nfq_class_feed(struct nfq_classifier *c, struct nfq_class_flow *f,
    const uint8_t *pkt, size_t len, uint64_t ts_ms)
{
	uint8_t *data;

	if (f->stopped || f->decided || pkt == NULL || len == 0)
		return;
	/* Only an unsegmented BIG TCP packet is longer. Cut, not wrapped
	 * round by the cast into a short packet that might look valid. */
	if (len > CLASS_MAX_PKT_LEN)
		len = CLASS_MAX_PKT_LEN;
	if (f->deferred && f->nheld < CLASS_DEFER_MAX &&
	    len <= CLASS_DEFER_BYTES - f->held_bytes &&
	    (data = malloc(len)) != NULL) {
		memcpy(data, pkt, len);
		f->held[f->nheld].data = data;
		f->held[f->nheld].len = len;
		f->held[f->nheld].ts_ms = ts_ms;
		f->nheld++;
		f->held_bytes += len;
		return;
	}
	undefer(c, f);		/* kept enough: from here on fed */
	feed(c, f, pkt, len, ts_ms);
}

const char *
nfq_class_result(struct nfq_classifier *c, struct nfq_class_flow *f,
    char *buf, size_t len)
{
	uint8_t guessed;

	undefer(c, f);
	if (f->failed)
		return NULL;
	if (f->cached) {
		copy_name(buf, len, f->name);
		return buf;
	}
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

const char *
nfq_class_result_keyed(struct nfq_classifier *c, struct nfq_class_flow *f,
    const void *key, size_t keylen, char *buf, size_t len)
{
	struct class_slot *sl;
	uint64_t h1, h2;
	const char *r;
	bool check = false;

	if (!f->deferred || c->cache == NULL)
		return nfq_class_result(c, f, buf, len);
	h1 = dns_siphash(&c->k1, key, keylen);
	h2 = dns_siphash(&c->k2, key, keylen);
	if ((h1 | h2) == 0)
		h2 = 1;		/* 0, 0 is an empty slot */
	sl = &c->cache[h1 & (CLASS_CACHE_SLOTS - 1)];
	if (sl->h1 == h1 && sl->h2 == h2) {
		c->hits++;
		if (--c->until_check > 0) {
			drop_held(f);
			f->deferred = false;
			f->decided = true;
			f->cached = true;
			copy_name(f->name, sizeof(f->name), sl->name);
			return nfq_class_result(c, f, buf, len);
		}
		/* the check: named by nDPI, as a miss is */
		c->until_check = CLASS_CACHE_CHECK;
		c->checks++;
		check = true;
	} else
		c->misses++;
	/* nDPI names it from the packets kept, and what it says is the
	 * slot's from now (a check's that differs counted) */
	if ((r = nfq_class_result(c, f, buf, len)) != NULL &&
	    strlen(r) < sizeof(sl->name) && strlen(r) + 1 <= len) {
		if (check && strcmp(r, sl->name) != 0)
			c->mismatches++;
		sl->h1 = h1;
		sl->h2 = h2;
		memcpy(sl->name, r, strlen(r) + 1);
	}
	return r;
}

void
nfq_class_cache_stats(const struct nfq_classifier *c, uint64_t *hits,
    uint64_t *misses)
{
	*hits = c->hits;
	*misses = c->misses;
}

void
nfq_class_cache_checks(const struct nfq_classifier *c, uint64_t *checks,
    uint64_t *mismatches)
{
	*checks = c->checks;
	*mismatches = c->mismatches;
}
