/* dns.h: DNS names as sluice's policies and resolver see them. */
#ifndef SLUICE_DNS_H
#define SLUICE_DNS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <poll.h>

#define DNS_NAME_MAX	253	/* presentation form, no trailing dot */
#define DNS_LABEL_MAX	63

/*
 * Normalises a host name in presentation form into out (at least
 * DNS_NAME_MAX + 1 bytes): lower case, one trailing dot removed. Accepts
 * LDH labels (letters, digits, hyphen, not at a label's ends; '_' allowed
 * for service labels), 1..63 bytes each, 253 in all. Returns true if valid;
 * on false, *why (if not NULL) points to a static description.
 */
bool dns_name_normalize(const char *in, size_t len, char *out,
    const char **why);

/*
 * true if name (normalised) equals pattern, or, when wildcard, is a proper
 * subdomain of pattern at any depth.
 */
bool dns_name_match(const char *name, const char *pattern, bool wildcard);

/* ---- messages (msg.c): pure parsers and writers over caller buffers ---- */

#define DNS_HDR_LEN	12
#define DNS_UDP_PLAIN	512	/* a UDP answer's limit without EDNS */
#define DNS_EDNS_SIZE	1232	/* what sluice offers and accepts with EDNS */
#define DNS_RR_MAX	32	/* answer records kept from one response */
#define DNS_FLAG_TC	0x0200	/* in dns_query.flags, dns_response.flags */

enum dns_type {
	DNS_T_A = 1, DNS_T_NS = 2, DNS_T_CNAME = 5, DNS_T_SOA = 6,
	DNS_T_PTR = 12, DNS_T_MX = 15, DNS_T_TXT = 16, DNS_T_AAAA = 28,
	DNS_T_SRV = 33, DNS_T_OPT = 41, DNS_T_SVCB = 64, DNS_T_HTTPS = 65,
	DNS_T_ANY = 255,
};

enum dns_rcode {
	DNS_R_NOERROR = 0, DNS_R_FORMERR = 1, DNS_R_SERVFAIL = 2,
	DNS_R_NXDOMAIN = 3, DNS_R_NOTIMP = 4, DNS_R_REFUSED = 5,
};

enum dns_parse_error {
	DNS_PARSE_OK = 0,
	DNS_PARSE_SHORT,	/* shorter than its header or a field says */
	DNS_PARSE_NOT_QUERY,	/* QR set, or opcode != QUERY (for queries) */
	DNS_PARSE_NOT_RESPONSE,	/* QR clear (for responses) */
	DNS_PARSE_QDCOUNT,	/* QDCOUNT != 1 */
	DNS_PARSE_BAD_NAME,	/* label > 63, name > 253, bad label type,
				 * pointer loop or forward pointer, a pointer
				 * in a query's question */
	DNS_PARSE_BAD_RR,	/* a record's length disagrees with its type
				 * or runs past the message */
	DNS_PARSE_TRAILING,	/* bytes after the last section (queries) */
	DNS_PARSE_EXTRA_RR,	/* a query with answer or authority records,
				 * or additional ones other than one OPT */
};

/*
 * A query as received. qname keeps the sender's case (answers echo it) in
 * presentation form without the trailing dot ("" for the root); labels
 * holding '.' or bytes outside 0x21..0x7e make the name invalid
 * (DNS_PARSE_BAD_NAME), so qname is always printable.
 */
struct dns_query {
	uint16_t	id;
	uint16_t	flags;		/* the header's second 16 bits, host order */
	char		qname[DNS_NAME_MAX + 1];
	uint16_t	qtype;
	uint16_t	qclass;
	bool		edns;		/* an OPT record was present */
	uint16_t	udp_size;	/* the OPT's payload size, else 512 */
};

/* One kept answer record: A, AAAA or CNAME. Names as for dns_query. */
struct dns_rr {
	char		name[DNS_NAME_MAX + 1];
	uint16_t	type;
	uint32_t	ttl;
	union {
		uint8_t	a[4];		/* network order */
		uint8_t	aaaa[16];
		char	cname[DNS_NAME_MAX + 1];
	} data;
};

/* A response as received from an upstream resolver. */
struct dns_response {
	uint16_t	id;
	uint16_t	flags;
	uint8_t		rcode;
	char		qname[DNS_NAME_MAX + 1];
	uint16_t	qtype;
	uint16_t	qclass;
	size_t		nrr;		/* kept A/AAAA/CNAME answer records */
	struct dns_rr	rr[DNS_RR_MAX];
	size_t		nskipped;	/* other answer records, or beyond RR_MAX */
};

/*
 * Parses a query (one question, no answer/authority records; additional
 * records only an OPT). Pure: no allocation, no globals. Returns
 * DNS_PARSE_OK and fills q; on an error q->id is still set when len >= 2.
 */
enum dns_parse_error dns_parse_query(const uint8_t *buf, size_t len,
    struct dns_query *q);

/*
 * Parses a response: the header, one question, and the answer section's
 * A, AAAA and CNAME records in order (others are counted in nskipped);
 * authority and additional sections are not read. Compression pointers
 * are followed backwards only, with a bound on hops.
 */
enum dns_parse_error dns_parse_response(const uint8_t *buf, size_t len,
    struct dns_response *r);

const char *dns_parse_error_str(enum dns_parse_error e);

/*
 * Writes an answer to q into out (cap bytes): header with q's id, QR, RD
 * copied from q, RA set, the given rcode; q's question; then the records
 * (A, AAAA, CNAME) with their TTLs; an OPT record when q had one. If the
 * records do not fit in limit bytes (the client's UDP size, or 65535 over
 * TCP) none are written and TC is set. rcode | DNS_FLAG_TC sets TC with
 * the records written (an upstream's truncated answer passed on).
 * Returns the length, or -1 if even the header and question do not fit
 * in cap.
 */
int dns_write_answer(uint8_t *out, size_t cap, size_t limit,
    const struct dns_query *q, unsigned rcode, const struct dns_rr *rr,
    size_t nrr);

/* A FORMERR for a message that did not parse: its id (if it had one), no
 * question. Returns the length (12) or -1. */
int dns_write_formerr(uint8_t *out, size_t cap, const uint8_t *in,
    size_t inlen);

/* A recursive query for name/type/class with id, and an OPT record
 * offering DNS_EDNS_SIZE. Returns the length or -1. */
int dns_write_query(uint8_t *out, size_t cap, uint16_t id, const char *name,
    uint16_t qtype, uint16_t qclass);

/* "A", "AAAA", "HTTPS", ... or "TYPE123" in buf (at least 12 bytes). */
const char *dns_type_str(uint16_t type, char *buf, size_t len);
/* "NOERROR", "NXDOMAIN", ... or "RCODE12" (static or buf). */
const char *dns_rcode_str(unsigned rcode, char *buf, size_t len);

/* Case-insensitive equality of two presentation names. */
bool dns_name_equal(const char *a, const char *b);

/* ---- hashing (siphash.c) ------------------------------------------------ */

/* A SipHash-2-4 key, drawn once per table. */
struct dns_hash_key {
	uint64_t	k0, k1;
};

/* A fresh key from getrandom(2) (from the clock, pid and salt's address
 * only if the kernel's pool is not ready yet). */
void dns_hash_key_new(struct dns_hash_key *k, const void *salt);
/* SipHash-2-4 of len bytes at data under k. */
uint64_t dns_siphash(const struct dns_hash_key *k, const void *data,
    size_t len);
/* The same of n words, each taken as its 8 bytes in little-endian order
 * (dns_siphash of those 8n bytes): for keys packed into integers. */
uint64_t dns_siphash_words(const struct dns_hash_key *k, const uint64_t *w,
    size_t n);

/* ---- bindings (bind.c): which addresses a sandbox may reach, by name --- */

/*
 * A binding says: sandbox S resolved NAME and got ADDR, so until EXPIRES
 * a new flow from S to ADDR may be admitted as NAME. One address may be
 * bound to several names for one sandbox (virtual hosts, CDNs), and the
 * same address to several sandboxes independently. Bounded in total, per
 * sandbox, and in names per (sandbox, address) (a new flow to an address
 * checks each of its names against the policy, so this bounds the work of
 * one decision); and once only the last quarter of the table is free, a
 * sandbox holding light or more bindings gets no more (that quarter is
 * kept for sandboxes that hold little, so that a few sandboxes filling
 * their own bounds together cannot take the whole table). At a bound,
 * expired entries are reclaimed first, and if none is expired the new
 * binding is refused (ENOSPC): the caller must then leave the address out
 * of the answer (fail closed).
 */
struct dns_bindings;

struct dns_bindings_bounds {
	size_t	total;		/* 1 .. 2^31 */
	size_t	per_sandbox;	/* at least 1 */
	size_t	per_addr;	/* names per (sandbox, address); 0: no bound
				 * but per_sandbox */
	size_t	light;		/* 0: no quarter kept */
};

/* Returns a new empty table, or NULL with errno EINVAL (a bound out of
 * range) or ENOMEM. */
struct dns_bindings *dns_bindings_new(const struct dns_bindings_bounds *bb);
void dns_bindings_free(struct dns_bindings *b);	/* NULL-safe */

/*
 * Binds (sandbox, addr) to name (normalised, lower case) until
 * expires_ms (CLOCK_MONOTONIC ms). An existing binding of the same triple
 * is extended (never shortened). Returns 0, or -1 with errno ENOSPC (a
 * bound), ENAMETOOLONG or ENOMEM.
 */
int dns_bindings_add(struct dns_bindings *b, uint32_t sandbox, uint32_t addr,
    const char *name, uint64_t now_ms, uint64_t expires_ms);

/*
 * Calls fn(arg, name, expires_ms) for each live binding of (sandbox, addr)
 * at now_ms until fn returns true. Returns true if some fn call returned
 * true. The name pointer is valid during the call only.
 */
typedef bool (*dns_binding_fn)(void *arg, const char *name,
    uint64_t expires_ms);
bool dns_bindings_find(struct dns_bindings *b, uint32_t sandbox,
    uint32_t addr, uint64_t now_ms, dns_binding_fn fn, void *arg);

/* Drops every binding of sandbox (it was deleted or got a new policy). */
void dns_bindings_forget(struct dns_bindings *b, uint32_t sandbox);

/* Live and expired-but-unreclaimed entries, in total / for one sandbox. */
size_t dns_bindings_count(const struct dns_bindings *b);
size_t dns_bindings_count_sandbox(const struct dns_bindings *b,
    uint32_t sandbox);

/* ---- the answer cache (cache.c) ---------------------------------------- */

/*
 * Upstream answers by (normalised name, type, class), kept for their
 * smallest TTL (at most DNS_CACHE_TTL_MAX seconds) and handed out with
 * their TTLs counted down. Positive answers only (NOERROR with records);
 * bounded in entries, the least recently used one goes first. Not
 * thread-safe: the resolver's.
 */
#define DNS_CACHE_MAX		1000000	/* entries */
#define DNS_CACHE_TTL_MAX	3600	/* seconds */

struct dns_cache;

struct dns_cache_stats {
	uint64_t	hits, misses, stored, expired, evicted;
	size_t		entries, capacity;
};

/* NULL with errno EINVAL (0 or above DNS_CACHE_MAX entries) or ENOMEM. */
struct dns_cache *dns_cache_new(size_t entries);
void dns_cache_free(struct dns_cache *c);	/* NULL-safe */

/* Fills out (its records, their TTLs less the entry's age) and returns
 * true if a live answer to (name, qtype, qclass) is kept at now_ms. */
bool dns_cache_get(struct dns_cache *c, const char *name, uint16_t qtype,
    uint16_t qclass, uint64_t now_ms, struct dns_response *out);

/* Keeps r as the answer to (name, qtype, qclass) if it may be kept (a
 * positive answer whose TTLs are not 0, and whose records fit an entry);
 * returns whether it was. */
bool dns_cache_put(struct dns_cache *c, const char *name, uint16_t qtype,
    uint16_t qclass, uint64_t now_ms, const struct dns_response *r);

void dns_cache_flush(struct dns_cache *c);
void dns_cache_stats(const struct dns_cache *c, struct dns_cache_stats *out);

/* ---- the resolver (resolver.c): sockets, upstreams, timeouts ---------- */

/*
 * The server side of sluice's resolver: UDP and TCP port 53 listeners,
 * queries forwarded to upstream resolvers over UDP (a few long-lived
 * sockets per upstream, each connected from a random port and replaced
 * after some thousands of questions or tens of seconds; a random id per
 * query in flight; answers checked against socket, source, id, name, type
 * and class), timeouts, and TCP framing. What to answer is the
 * caller's: it is asked through dns_resolver_ops. Single-threaded: the
 * caller polls the descriptors dns_resolver_pollfds gives and hands the
 * results back. Sockets are made in the network namespace of the thread
 * calling dns_resolver_open/dns_resolver_process.
 */
#define DNS_PENDING_MAX		512	/* queries in flight upstream */
#define DNS_TCP_MAX		64	/* client TCP connections */
/*
 * Connections beyond DNS_TCP_MAX are still accepted, up to
 * DNS_TCP_REFUSE_MAX more at once for DNS_TCP_REFUSE_MS each: every query
 * they send is answered REFUSED (never forwarded) and gets its request, as
 * does the connection itself if it sends none. Beyond those, a connection
 * is read once when accepted (what its client sent already), answered so,
 * and closed.
 */
#define DNS_TCP_PER_CLIENT	16	/* of DNS_TCP_MAX, for one ingress
					 * interface (a sandbox); its next
					 * connections are refused so */
#define DNS_TCP_REFUSE_MAX	16
#define DNS_TCP_REFUSE_MS	2000
#define DNS_TCP_MSG_MAX		4096	/* a TCP query or answer we handle */
#define DNS_UPSTREAM_MAX	8
#define DNS_UPSTREAM_TRY_MS	1500	/* per upstream, then the next one */
#define DNS_TCP_IDLE_MS		10000

enum dns_action {
	DNS_ANSWER,	/* answer now with *rcode and no records */
	DNS_FORWARD,	/* ask the upstreams */
	DNS_DROP,	/* send nothing */
};

/* One query, from arrival to answer. */
struct dns_request {
	struct dns_query	 q;
	enum dns_parse_error	 perr;		/* != OK: the message was malformed */
	char			 name[DNS_NAME_MAX + 1];	/* q.qname normalised */
	bool			 name_ok;	/* q.qname is a valid host name */
	uint32_t		 ifindex;	/* ingress interface */
	uint32_t		 src_addr;	/* network order */
	uint16_t		 src_port;	/* host order */
	uint32_t		 dst_addr;	/* the address it was sent to */
	bool			 tcp;
	/* Its TCP connection was one beyond DNS_TCP_MAX: it is never
	 * forwarded (DNS_FORWARD is taken as DNS_ANSWER with REFUSED). With
	 * perr DNS_PARSE_SHORT and no bytes, the request stands for a
	 * connection that sent no query before it was closed. */
	bool			 over_limit;
	union {					/* the caller's, per request */
		max_align_t	 align;
		unsigned char	 bytes[1536];
	}			 user;
};

struct dns_resolver_ops {
	/*
	 * A message arrived. For a malformed one (req->perr) the answer is
	 * FORMERR unless DNS_DROP is returned. Otherwise return DNS_FORWARD,
	 * or DNS_ANSWER with *rcode set.
	 */
	enum dns_action	(*query)(void *arg, struct dns_request *req,
			    unsigned *rcode);
	/*
	 * The upstream answered with r (NULL: no upstream answered in time,
	 * or no slot was free). Keep what may be sent by editing r->rr and
	 * r->nrr in place (TTLs too) and set *rcode. A truncated answer
	 * (DNS_FLAG_TC in r->flags) is sent truncated, with the records
	 * kept, if *rcode is NOERROR: upstreams are asked over UDP only, so
	 * the client is left to ask again over TCP.
	 */
	void		(*response)(void *arg, struct dns_request *req,
			    struct dns_response *r, unsigned *rcode);
	/* The request is over: rcode is what was sent, -1 if nothing. */
	void		(*done)(void *arg, struct dns_request *req, int rcode);
	/*
	 * n queries were lost before they could become requests: the
	 * kernel dropped them (the UDP socket's buffer was full while the
	 * caller paused reading, or they failed its checks). Learnt from
	 * the next datagram read (SO_RXQ_OVFL), and at close. May be NULL.
	 */
	void		(*lost)(void *arg, uint64_t n);
};

struct dns_resolver_stats {
	uint64_t	queries, answered, forwarded, upstream_timeouts;
	uint64_t	malformed, dropped, mismatched, tcp_conns;
	uint64_t	cache_hits;	/* answered from the cache */
	uint64_t	paused;		/* times reading queries was held off */
	uint64_t	kernel_dropped;	/* UDP queries the kernel dropped (ops->lost) */
	uint64_t	tcp_refused;	/* connections beyond DNS_TCP_MAX */
	size_t		cache_entries, cache_capacity;	/* 0, 0: no cache */
};

struct dns_resolver;

/*
 * Listens on addr:port (network order; INADDR_ANY for every gateway
 * address) over UDP and TCP, forwarding to the upstreams (network order,
 * port 53). Returns NULL with a message in err.
 */
struct dns_resolver *dns_resolver_open(uint32_t addr, uint16_t port,
    const uint32_t *upstreams, size_t nupstreams,
    const struct dns_resolver_ops *ops, void *arg, char *err, size_t errlen);

/* Fills up to max pollfds (events set); returns how many. */
size_t dns_resolver_pollfds(struct dns_resolver *r, struct pollfd *pfd,
    size_t max);

/* Handles the results of poll for the n descriptors dns_resolver_pollfds
 * gave, and every timeout due at now_ms (CLOCK_MONOTONIC). */
void dns_resolver_process(struct dns_resolver *r, const struct pollfd *pfd,
    size_t n, uint64_t now_ms);

/* Milliseconds until the next timeout (-1: none). */
int dns_resolver_timeout(const struct dns_resolver *r, uint64_t now_ms);

void dns_resolver_stats(const struct dns_resolver *r,
    struct dns_resolver_stats *out);

/* NULL-safe; requests in flight end with done(-1). */
void dns_resolver_close(struct dns_resolver *r);

/*
 * Replaces the upstream resolvers (a reload). New questions go to the new
 * list; one in flight moves on to the new list's next entry if it has to
 * ask again, and an answer from an upstream no longer listed is not taken.
 * Returns 0, or -1 with errno EINVAL for more than DNS_UPSTREAM_MAX.
 */
int dns_resolver_set_upstreams(struct dns_resolver *r,
    const uint32_t *upstreams, size_t nupstreams);

/*
 * Keeps up to entries upstream answers (dns_cache) and answers repeated
 * questions from them; 0 keeps none. Whatever was kept is forgotten,
 * also when the upstreams change. A hit still goes through ops->response
 * and ops->done like an upstream's answer. Returns -1 (ENOMEM, EINVAL)
 * and keeps the cache it had if a new one cannot be made.
 */
int dns_resolver_set_cache(struct dns_resolver *r, size_t entries);

/* Served TCP connections one ingress interface may hold at once (default
 * DNS_TCP_PER_CLIENT; 0: no bound but DNS_TCP_MAX); its connections
 * beyond are refused like those beyond DNS_TCP_MAX. */
void dns_resolver_set_tcp_per_client(struct dns_resolver *r, size_t n);

/*
 * While paused, new UDP queries are left in the socket's buffer (the
 * kernel's, 4 MiB) rather than read; what is in flight goes on, and TCP
 * is served as usual. The caller pauses while its log is behind, so that
 * a burst waits a few milliseconds instead of being refused. What the
 * buffer could not hold is reported to ops->lost when the pause ends.
 */
void dns_resolver_pause(struct dns_resolver *r, bool paused);

#endif
