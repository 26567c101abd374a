/* nfq.h: NFQUEUE I/O, packet parsing and the flow table. */
#ifndef SLUICE_NFQ_H
#define SLUICE_NFQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- queue I/O (queue.c) ---------------------------------------------- */

struct nfq_queue;

/* One queued packet. payload points into the receive buffer: valid only
 * during the callback that received it. */
struct nfq_packet {
	uint32_t	 id;		/* packet id, for the verdict */
	uint32_t	 indev;		/* input ifindex, 0 if none */
	uint32_t	 outdev;	/* output ifindex, 0 if none */
	uint32_t	 mark;
	uint8_t		 hook;		/* NF_INET_* hook it was queued at */
	const uint8_t	*payload;	/* the network-layer packet */
	size_t		 len;
	bool		 copy;		/* an NFLOG copy: already accepted,
					 * no id, no verdict (fastsyn.c) */
	bool		 has_gseq;	/* a copy: gseq is set */
	uint32_t	 gseq;		/* a copy: the order the kernel
					 * logged it in, one count for every
					 * group of the namespace
					 * (NFULA_SEQ_GLOBAL) */
};

/*
 * The callback must issue exactly one verdict for pkt->id (nfq_queue_verdict)
 * before returning; if it returns -1 the reader drops the packet itself.
 */
typedef int (*nfq_packet_cb)(void *arg, const struct nfq_packet *pkt);

/*
 * Binds queue number num in the caller's network namespace with maxlen
 * packets of kernel backlog, copying whole packets, with GSO packets left
 * unsegmented and ENOBUFS reporting off. Returns NULL with a message in err.
 */
struct nfq_queue *nfq_queue_open(uint16_t num, uint32_t maxlen, char *err,
    size_t errlen);

/* The socket, for poll(2). */
int nfq_queue_fd(const struct nfq_queue *q);

/*
 * Reads what is pending (non-blocking, at most 64 messages per call) and
 * calls cb for each packet. Returns the number of packets handled (given
 * to cb, or dropped by the reader when a message lacks a payload), or -1
 * with errno on a socket error other than EAGAIN/ENOBUFS (both are
 * survivable: EAGAIN ends the call, ENOBUFS is counted and reading goes on).
 */
int nfq_queue_recv(struct nfq_queue *q, nfq_packet_cb cb, void *arg);

/* Counters since nfq_queue_open. */
struct nfq_queue_stats {
	uint64_t	packets;	/* given to the callback */
	uint64_t	dropped;	/* dropped by the reader: no payload,
					 * callback -1, or before open returned */
	uint64_t	enobufs;	/* recv said the kernel lost messages */
	uint64_t	verdict_errors;	/* verdicts that failed or were refused */
	uint64_t	unverdictable;	/* packet messages without an id */
	uint64_t	bad_messages;	/* malformed or truncated messages */
};

void nfq_queue_get_stats(const struct nfq_queue *q, struct nfq_queue_stats *st);

/* The queue's number, as bound. */
uint16_t nfq_queue_num(const struct nfq_queue *q);

/* verdict: NF_ACCEPT, NF_DROP or NF_REPEAT; mark is set on the packet when
 * set_mark is true. Returns 0 or -1 with errno. */
int nfq_queue_verdict(struct nfq_queue *q, uint32_t id, uint32_t verdict,
    bool set_mark, uint32_t mark);

/* Every mark but 0 that a verdict of q sets carries bits as well (the
 * gateway's "set by a decision" bit: ruleset.c). */
void nfq_queue_set_mark_bits(struct nfq_queue *q, uint32_t bits);

/* The same verdict for n packets (a held flight), in order, in as few
 * sends as possible. Returns 0 or -1 with errno. */
int nfq_queue_verdicts(struct nfq_queue *q, const uint32_t *ids, size_t n,
    uint32_t verdict, bool set_mark, uint32_t mark);

/* NULL-safe. Unbinds the queue; packets queued later are dropped by the
 * kernel (no bypass). */
void nfq_queue_close(struct nfq_queue *q);

/* ---- packet parsing (packet.c): pure, no allocation -------------------- */

/* IPPROTO_TCP / IPPROTO_UDP / IPPROTO_ICMP or other */
struct nfq_tuple {
	uint8_t		 proto;
	uint32_t	 saddr;		/* network byte order */
	uint32_t	 daddr;
	uint16_t	 sport;		/* host order; 0 where the protocol has none */
	uint16_t	 dport;
	uint8_t		 tcp_flags;	/* TCP: the flags byte (FIN 0x01 .. CWR 0x80) */
	uint32_t	 tcp_seq;	/* TCP: sequence number, host order */
	uint32_t	 tcp_ack;	/* TCP: acknowledgement number */
	const uint8_t	*tcp_opts;	/* TCP: the options, into the buffer */
	size_t		 tcp_optlen;
	uint8_t		 ip_hlen;	/* the IPv4 header's length in bytes */
	uint8_t		 ttl;
	uint8_t		 icmp_type;	/* ICMP */
	uint8_t		 icmp_code;
	uint16_t	 icmp_id;	/* ICMP echo request/reply: its id,
					 * host order (0 for other types) */
	const uint8_t	*l4_payload;	/* into the packet buffer */
	size_t		 l4_len;
};

enum nfq_parse_error {
	NFQ_PARSE_OK = 0,
	NFQ_PARSE_TRUNCATED,	/* shorter than its headers say */
	NFQ_PARSE_BAD_VERSION,	/* not IPv4 */
	NFQ_PARSE_BAD_HEADER,	/* IHL < 5, total length < IHL, data offset < 5 ... */
	NFQ_PARSE_FRAGMENT,	/* MF set or offset != 0 (the kernel defragments
				 * before queueing, so this is never legitimate) */
};

/*
 * Parses an IPv4 packet of len bytes (the queued payload) and its TCP, UDP
 * or ICMP header. Other protocols parse with ports 0. Returns NFQ_PARSE_OK
 * and fills t; pointers in t point into buf.
 */
enum nfq_parse_error nfq_packet_parse(const uint8_t *buf, size_t len,
    struct nfq_tuple *t);

/* The same for a copy of the packet's first len bytes (an NFLOG copy's
 * range): the headers must be whole, the payload may be cut short;
 * l4_payload and l4_len are what was copied of it. */
enum nfq_parse_error nfq_packet_parse_head(const uint8_t *buf, size_t len,
    struct nfq_tuple *t);

const char *nfq_parse_error_str(enum nfq_parse_error e);

/*
 * The Internet checksum (RFC 1071): nfq_csum_add adds len bytes, as
 * big-endian 16-bit words (an odd last byte padded with zero), to a
 * running sum; nfq_csum_fold folds the sum and complements it. Pure.
 */
uint32_t nfq_csum_add(uint32_t sum, const uint8_t *p, size_t len);
uint16_t nfq_csum_fold(uint32_t sum);

#define NFQ_TCP_RST_LEN	40

/*
 * Writes an IPv4 TCP reset (RST alone, no options, no payload, DF, TTL
 * 64, both checksums) from saddr:sport to daddr:dport with sequence
 * number seq (addresses in network order, the rest host order) into buf.
 * Returns its length, NFQ_TCP_RST_LEN, or 0 if len is short of it. Pure.
 */
size_t nfq_tcp_rst(uint8_t *buf, size_t len, uint32_t saddr, uint16_t sport,
    uint32_t daddr, uint16_t dport, uint32_t seq);

/* An IPv6 packet's addresses and transport, for the log only: sandboxes
 * get no IPv6, so these are never forwarded, only recorded and dropped. */
struct nfq_tuple6 {
	uint8_t		 proto;		/* the last next-header: TCP, UDP,
					 * ICMPv6 (58), or where the walk ended */
	uint8_t		 saddr[16];
	uint8_t		 daddr[16];
	uint16_t	 sport;		/* host order; 0 without ports */
	uint16_t	 dport;
	uint8_t		 icmp_type;	/* ICMPv6 */
};

/*
 * Parses an IPv6 packet's fixed header, walks at most 8 extension headers
 * (hop-by-hop, routing, fragment, destination options, AH) and reads the
 * ports (TCP, UDP) or ICMPv6 type of a first fragment. NFQ_PARSE_BAD_VERSION
 * if it is no IPv6. Pure.
 */
enum nfq_parse_error nfq_packet6_parse(const uint8_t *buf, size_t len,
    struct nfq_tuple6 *t);

/*
 * The TCP options that matter to a middlebox reading the stream: whether
 * the segment carries an MD5 (19) or AO (29) signature, which a server
 * that does not expect one drops; and its timestamp (8), which the server
 * checks against the newest it has seen (PAWS). Pure.
 */
struct nfq_tcp_opts {
	bool		 signature;	/* MD5 or AO */
	bool		 has_ts;
	uint32_t	 tsval;
	bool		 malformed;	/* an option's length runs past the end */
};
void nfq_tcp_options(const uint8_t *opts, size_t len, struct nfq_tcp_opts *o);

/* "tcp", "udp", "icmp", "icmp6" or "ip" (static strings). */
const char *nfq_proto_name(uint8_t proto);

/* ---- the flow table (flows.c) ------------------------------------------ */

/*
 * Verdicts recently given, so that a retransmitted SYN or a burst of UDP
 * datagrams of one attempt gets the same verdict and one log row. Bounded:
 * at capacity the entry closest to expiry is evicted (the next packet of
 * that flow is then simply decided again).
 */
struct nfq_flow_key {
	uint32_t	ifindex;
	uint32_t	saddr;		/* network order */
	uint32_t	daddr;
	uint16_t	sport;		/* host order */
	uint16_t	dport;
	uint8_t		proto;
};

struct nfq_flow {
	struct nfq_flow_key	key;
	uint64_t		expires_ms;	/* CLOCK_MONOTONIC */
	uint32_t		verdict;	/* NF_* */
	uint32_t		mark;
	uint32_t		hits;		/* packets decided from this entry */
	uint32_t		tag;		/* the caller's (sluiced: a TCP
						 * SYN's sequence number, or
						 * for a flight, the one after
						 * its bytes) */
	bool			flight;		/* the caller's (sluiced: set
						 * for a verdict carried from a
						 * decided first flight to the
						 * segments behind it, which no
						 * SYN may reuse); cleared by
						 * each insert */
	bool			reset_server;	/* the caller's (sluiced: a
						 * denial of a SYN the kernel
						 * let through, whose server
						 * is to be reset); cleared by
						 * each insert */
	uint64_t		since_us;	/* the caller's (sluiced: when
						 * an allowed SYN it let go
						 * was decided, unix µs,
						 * CLOCK_REALTIME); cleared by
						 * each insert */
};

struct nfq_flows;

struct dns_hash_key;

/* SipHash-2-4 of key under k (dns/siphash.c), its padding left out: for
 * tables of flows whose addresses and ports a sender chooses. */
uint64_t nfq_flow_key_hash(const struct dns_hash_key *k,
    const struct nfq_flow_key *key);

/* capacity entries at most (1 .. 2^31); NULL on allocation failure or a
 * capacity out of range. */
struct nfq_flows *nfq_flows_new(size_t capacity);

/* NULL-safe. */
void nfq_flows_free(struct nfq_flows *ft);

/* The live entry for key at now_ms (an entry is dead from expires_ms on),
 * or NULL. Counts the lookup in the entry's hits. The pointer is valid
 * until the next insert or forget call. */
struct nfq_flow *nfq_flows_lookup(struct nfq_flows *ft,
    const struct nfq_flow_key *key, uint64_t now_ms);

/* Records a verdict for key, live for ttl_ms. Replaces an existing entry
 * (hits restart at 0). At capacity it evicts the entry that expires first
 * (an expired one if any). Returns the entry (valid as for lookup), never
 * NULL. */
struct nfq_flow *nfq_flows_insert(struct nfq_flows *ft,
    const struct nfq_flow_key *key, uint64_t now_ms, uint64_t ttl_ms,
    uint32_t verdict, uint32_t mark);

/* Removes key's entry, if there is one. */
void nfq_flows_remove(struct nfq_flows *ft, const struct nfq_flow_key *key);

/* Removes every entry whose ifindex is ifindex (a sandbox went away). */
void nfq_flows_forget_ifindex(struct nfq_flows *ft, uint32_t ifindex);

/* Entries held: the live ones plus expired ones not yet reclaimed (each
 * insert reclaims up to two). */
size_t nfq_flows_count(const struct nfq_flows *ft);

/* ---- TLS ClientHello (tls.c): pure, no allocation ---------------------- */

enum nfq_tls_status {
	NFQ_TLS_OK = 0,		/* a complete ClientHello was parsed */
	NFQ_TLS_NEED_MORE,	/* a valid prefix: feed more of the stream */
	NFQ_TLS_NOT_TLS,	/* the stream does not start with a TLS
				 * handshake record */
	NFQ_TLS_MALFORMED,	/* a TLS handshake, but broken or ambiguous:
				 * see hello->error */
};

struct nfq_tls_hello {
	bool		 has_sni;	/* a server_name extension was present */
	char		 sni[256];	/* its one host_name, as sent ("" if none) */
	bool		 ech;		/* encrypted_client_hello (0xfe0d) or the
					 * draft's 0xffce */
	uint16_t	 version;	/* the highest version offered: from
					 * supported_versions if present, else
					 * legacy_version (0x0304 = TLS 1.3) */
	char		 alpn[128];	/* ALPN names, comma-separated ("h2,http/1.1"),
					 * cut at the buffer's end */
	size_t		 consumed;	/* stream bytes holding the ClientHello:
					 * every record it spans, in full */
	const char	*error;		/* NFQ_TLS_MALFORMED: what (static text) */
};

/*
 * Parses the beginning of a client's TCP stream (len bytes, in order) as
 * TLS records carrying a ClientHello, which may span several records.
 * Malformed: a record or handshake that is not a ClientHello, any length
 * that disagrees with what it contains, a repeated extension (two
 * server_name among them), a server_name list with more than one entry or
 * a non-host_name entry, a host name that is empty, longer than 255 bytes
 * or holds a NUL. Pure: no allocation, no globals.
 */
enum nfq_tls_status nfq_tls_parse_hello(const uint8_t *buf, size_t len,
    struct nfq_tls_hello *hello);

/* "TLS1.3", "TLS1.2", "TLS1.1", "TLS1.0", "SSL3.0" or "0x%04x" in buf. */
const char *nfq_tls_version_str(uint16_t version, char *buf, size_t len);

/* ---- HTTP/1.x request heads (http.c): pure, streaming ------------------ */

#define NFQ_HTTP_HEAD_MAX	8192	/* a longer request head is malformed */

struct nfq_http_head {
	char		 method[16];
	char		 host[256];	/* the Host header, port removed, as sent */
	char		 path[256];	/* request target (origin form), cut */
	bool		 absolute;	/* the target was absolute-form */
};

enum nfq_http_status {
	NFQ_HTTP_NEED_MORE = 0,	/* everything fed was consumed */
	NFQ_HTTP_HEAD,		/* a complete head: *head filled */
	NFQ_HTTP_MALFORMED,	/* *error says what; the stream is dead */
};

/*
 * A client's HTTP/1.x byte stream, request after request: heads are
 * parsed, bodies (Content-Length or chunked) skipped, so pipelined and
 * keep-alive requests are all seen. Malformed: a request line that is not
 * METHOD SP TARGET SP HTTP/1.x, a head over NFQ_HTTP_HEAD_MAX, two Host
 * headers, an absolute-form target whose host differs from Host, both
 * Content-Length and Transfer-Encoding, a bad Content-Length or chunk
 * size, a Transfer-Encoding other than chunked, bare CR, NUL.
 */
struct nfq_http_stream {
	int		 state;		/* private */
	uint64_t	 remaining;	/* private: body or chunk bytes left */
	size_t		 headlen;	/* private: bytes of the head so far */
	unsigned	 count;		/* private: bytes of the current part of
					 * a request line, chunk line or trailer */
	const char	*error;		/* private: why the stream died */
	uint8_t		 head[NFQ_HTTP_HEAD_MAX];	/* private */
};

void nfq_http_init(struct nfq_http_stream *s);

/*
 * Consumes bytes from buf: stops right after a complete request head
 * (returns NFQ_HTTP_HEAD, *used = bytes consumed up to its end), or
 * consumes all of len (NFQ_HTTP_NEED_MORE). Feed the rest again to get
 * the next head. After NFQ_HTTP_MALFORMED (*used = bytes up to and
 * including the one found wrong) nothing more is accepted: later calls
 * return it again with *used = 0. *error (static text) is set on
 * NFQ_HTTP_MALFORMED, NULL otherwise; *head is written only on
 * NFQ_HTTP_HEAD.
 */
enum nfq_http_status nfq_http_feed(struct nfq_http_stream *s,
    const uint8_t *buf, size_t len, size_t *used, struct nfq_http_head *head,
    const char **error);

/* true while the stream is inside a request head not yet complete: bytes
 * fed since its start belong to a request not decided yet. Also true once
 * the stream is malformed: what follows belongs to no allowed request. */
bool nfq_http_in_head(const struct nfq_http_stream *s);

/* Bytes from here on that are body or chunk data (0 elsewhere): opaque to
 * the framing, so that another version of them changes no head and no
 * boundary between requests. */
uint64_t nfq_http_opaque(const struct nfq_http_stream *s);

/* nfq_http_feed, but NFQ_HTTP_NEED_MORE also when the stream reaches body
 * or chunk data (*used short of len; 0 when it starts there): what it
 * consumes is framing only — heads, chunk lines, trailers. */
enum nfq_http_status nfq_http_feed_framing(struct nfq_http_stream *s,
    const uint8_t *buf, size_t len, size_t *used, struct nfq_http_head *head,
    const char **error);

/* ---- TCP stream reassembly (reasm.c): pure, bounded --------------------- */

#define NFQ_REASM_MAX	16384	/* bytes of a client's stream held at once */

enum nfq_reasm_result {
	NFQ_REASM_OK = 0,	/* stored (or an exact retransmission) */
	NFQ_REASM_OLD,		/* entirely before the window: nothing new */
	NFQ_REASM_OVERFLOW,	/* beyond NFQ_REASM_MAX from the window's start */
	NFQ_REASM_CONFLICT,	/* overlaps stored bytes with different bytes */
};

/*
 * The client's byte stream from sequence number base on: segments in any
 * order, retransmissions and overlaps accepted when their bytes agree
 * with what is stored, refused (CONFLICT) when they differ — the first
 * version seen is the one inspected, and no other can slip past it.
 */
struct nfq_reasm {
	uint32_t	 base;		/* sequence number of data[0] */
	size_t		 contiguous;	/* data[0 .. contiguous) are present */
	size_t		 high;		/* one past the highest byte stored */
	uint8_t		 data[NFQ_REASM_MAX];
	uint8_t		 have[NFQ_REASM_MAX / 8];
};

void nfq_reasm_init(struct nfq_reasm *r, uint32_t base);

/* Adds a segment of len bytes starting at sequence number seq (modular
 * arithmetic: at most 2^31 before base counts as before). */
enum nfq_reasm_result nfq_reasm_add(struct nfq_reasm *r, uint32_t seq,
    const uint8_t *data, size_t len);

/* True when every byte of the segment that is stored equals it: bytes
 * before base or past the window are not compared. Stores nothing. */
bool nfq_reasm_agrees(const struct nfq_reasm *r, uint32_t seq,
    const uint8_t *data, size_t len);

/* Drops the first n (<= contiguous) bytes: base advances by n. An n past
 * contiguous is cut to contiguous: only bytes without a gap are dropped. */
void nfq_reasm_consume(struct nfq_reasm *r, size_t n);

/* ---- bytes kept until the server acknowledges them (kept.c) ----------- */

#define NFQ_KEPT_RANGES	128		/* separate ranges at once */
#define NFQ_KEPT_BYTES	NFQ_REASM_MAX	/* bytes at once */

/*
 * Ranges of a client's stream (sequence number, length) in stream order,
 * with their bytes back to back; ranges that touch are one. Zeroed, it is
 * empty. Pure but for the bytes' allocation, which grows by doubling from
 * 1 KiB to NFQ_KEPT_BYTES.
 */
struct nfq_kept_range {
	uint32_t	 seq;
	uint32_t	 len;
};

struct nfq_kept {
	struct nfq_kept_range	 r[NFQ_KEPT_RANGES];
	size_t			 n;
	uint8_t			*bytes;
	size_t			 len;		/* bytes kept */
	size_t			 cap;		/* bytes allocated */
};

/* Frees the bytes; k is empty again. */
void nfq_kept_free(struct nfq_kept *k);

/* Bytes that may be kept from seq on: 0 when the bytes are used up, or
 * the ranges are and seq does not continue the last one. */
size_t nfq_kept_room(const struct nfq_kept *k, uint32_t seq);

/* Keeps len bytes read at seq, after every range kept (stream order).
 * -1 when they do not fit (nfq_kept_room) or memory runs out: nothing is
 * kept then. */
int nfq_kept_add(struct nfq_kept *k, uint32_t seq, const uint8_t *data,
    size_t len);

/* True when every byte of the segment that overlaps a kept range equals
 * it. Modular sequence numbers, as TCP's. */
bool nfq_kept_agrees(const struct nfq_kept *k, uint32_t seq,
    const uint8_t *data, size_t len);

/* The server acknowledged every byte before ack: ranges wholly before it
 * go, and the front of one it ends inside. */
void nfq_kept_ack(struct nfq_kept *k, uint32_t ack);

/* ---- protocol identity with nDPI (classify.c) -------------------------- */

struct nfq_classifier;
struct nfq_class_flow;

/* One nDPI detection module for the process. NULL on failure. */
struct nfq_classifier *nfq_classifier_new(void);
void nfq_classifier_free(struct nfq_classifier *c);

/* Per-flow nDPI state; NULL on allocation failure. */
struct nfq_class_flow *nfq_class_flow_new(struct nfq_classifier *c);
/*
 * The same, but the packets fed are kept (up to 8, and 8 KiB; past
 * either, all are fed) and
 * given to nDPI only when the flow is named: nfq_class_result_keyed may
 * name it from the cache without nDPI seeing it at all.
 */
struct nfq_class_flow *nfq_class_flow_new_deferred(struct nfq_classifier *c);
void nfq_class_flow_free(struct nfq_class_flow *f);

/* Feeds one IPv4 packet of the flow (as queued), ts in ms. */
void nfq_class_feed(struct nfq_classifier *c, struct nfq_class_flow *f,
    const uint8_t *pkt, size_t len, uint64_t ts_ms);

/*
 * The application protocol seen so far, giving up detection if it is not
 * certain yet: "TLS", "HTTP", "SSH", "Unknown"... (nDPI's names, with
 * app and master joined by "." as nDPI prints them, e.g. "TLS.Google").
 * Written into buf; returns buf, or NULL if a deferred flow's nDPI state
 * could not be allocated (no name). The first call fixes the answer.
 */
const char *nfq_class_result(struct nfq_classifier *c, struct nfq_class_flow *f,
    char *buf, size_t len);
/*
 * The same for a deferred flow that nothing was asked of yet, by key:
 * the name a flow with the same key was given last, if the cache holds
 * it (nDPI never sees this flow's packets), else nfq_class_result's,
 * remembered under key. The key must hold every input nDPI names the
 * flow by (the caller's: for a ClientHello, the addresses, the server's
 * port and what the hello says). 4,096 keys at most, by hash.
 */
const char *nfq_class_result_keyed(struct nfq_classifier *c,
    struct nfq_class_flow *f, const void *key, size_t keylen, char *buf,
    size_t len);
/* Flows named from the cache, and keyed flows that were not. */
void nfq_class_cache_stats(const struct nfq_classifier *c, uint64_t *hits,
    uint64_t *misses);
/* Hits named by nDPI all the same (one in 64), and those of them whose
 * name differed from the cache's (the slot took nDPI's). */
void nfq_class_cache_checks(const struct nfq_classifier *c, uint64_t *checks,
    uint64_t *mismatches);

/* ---- conntrack destroy events (ct.c): flow accounting ------------------ */

/* A connection conntrack forgot, with its counters (nf_conntrack_acct). */
struct nfq_ct_end {
	uint8_t		 proto;		/* IPPROTO_* */
	uint32_t	 saddr;		/* original tuple, network order */
	uint32_t	 daddr;
	uint16_t	 sport;		/* host order; 0 without ports */
	uint16_t	 dport;
	uint64_t	 packets_orig, bytes_orig;	/* client -> server */
	uint64_t	 packets_reply, bytes_reply;
	uint32_t	 mark;		/* the connection mark */
	uint8_t		 tcp_state;	/* TCP_CONNTRACK_*, 0 if none/unknown */
	/* when it ended by conntrack's timestamps (net.netfilter.
	 * nf_conntrack_timestamp=1, entries made since), unix ns by
	 * CLOCK_REALTIME, 0 if absent; an entry reaped after its timeout ran
	 * out is dated to that moment, not to the reaping */
	uint64_t	 stop_ns;
};

struct nfq_ct;

/*
 * Listens for conntrack destroy events in the caller's network namespace
 * (ctnetlink over libmnl, group NFNLGRP_CONNTRACK_DESTROY), non-blocking,
 * with a large receive buffer. Needs CAP_NET_ADMIN. Open it before the
 * traffic: with nf_conntrack_events=2 (the default) only connections
 * created while a listener exists report their end. NULL with a message
 * in err.
 */
struct nfq_ct *nfq_ct_open(char *err, size_t errlen);
int nfq_ct_fd(const struct nfq_ct *ct);

typedef void (*nfq_ct_cb)(void *arg, const struct nfq_ct_end *e);

/*
 * Reads what is pending (non-blocking, at most 64 datagrams per call) and
 * calls cb per IPv4 destroy event; e is valid during the call only. IPv6
 * events are skipped, damaged messages counted (nfq_ct_damaged) and
 * skipped. Returns the number of events, or -1 with errno on a socket
 * error; ENOBUFS (events lost by the kernel) is counted (nfq_ct_lost) and
 * reading goes on with what was queued after the loss.
 */
int nfq_ct_recv(struct nfq_ct *ct, nfq_ct_cb cb, void *arg);

/* Times the kernel dropped events for want of buffer (ENOBUFS seen; how
 * many events each time is not known). */
uint64_t nfq_ct_lost(const struct nfq_ct *ct);

/* Whether the last nfq_ct_recv stopped because nothing was left to read
 * (not at its batch's end, nor at a socket error). */
bool nfq_ct_drained(const struct nfq_ct *ct);

/* Messages skipped unread: malformed, truncated, or not from the kernel. */
uint64_t nfq_ct_damaged(const struct nfq_ct *ct);

/*
 * How the connection ended, from the state TCP conntrack had reached
 * (nf_conntrack_proto_tcp.c's state table; a static string):
 *   "closed"   TIME_WAIT: FIN both ways and the last ACK. Also FIN_WAIT,
 *              CLOSE_WAIT and LAST_ACK: a close had begun, then the entry
 *              timed out there (half-closed, then idle) or was deleted;
 *   "reset"    CLOSE: only an RST leads there, from any state (a refused
 *              connection too);
 *   "timeout"  SYN_SENT, SYN_RECV, ESTABLISHED, SYN_SENT2: no close seen,
 *              idle until its timeout, or deleted (conntrack -F);
 *   "ended"    not TCP, or TCP without a known state.
 */
const char *nfq_ct_end_state(const struct nfq_ct_end *e);

/*
 * Asks conntrack (synchronously, on a socket of its own opened with the
 * event socket, so in the same namespace) for the IPv4 connection whose
 * original tuple is saddr:sport -> daddr:dport (addresses in network
 * order, ports in host order; proto TCP or UDP). Returns 1 with *e filled
 * (the counters so far, the mark, the TCP state), 0 if conntrack has no
 * such connection, -1 with errno: ETIMEDOUT without an answer within a
 * second, EPROTO for an answer that does not parse.
 */
int nfq_ct_get(struct nfq_ct *ct, uint8_t proto, uint32_t saddr,
    uint16_t sport, uint32_t daddr, uint16_t dport, struct nfq_ct_end *e);

void nfq_ct_close(struct nfq_ct *ct);	/* NULL-safe */

struct nfq_ctmark;

/* A socket for changing connection marks in the caller's network
 * namespace (CAP_NET_ADMIN). NULL with a message in err. */
struct nfq_ctmark *nfq_ctmark_open(char *err, size_t errlen);

/*
 * Sets the bits of the mark of the IPv4 connection whose original tuple is
 * saddr:sport -> daddr:dport (network order, host order) that mask covers
 * to mark's, and waits for the kernel to acknowledge it. 0, or -1 with
 * errno: ENOENT when conntrack has no such connection, ETIMEDOUT without
 * an answer within a second.
 */
int nfq_ctmark_set(struct nfq_ctmark *m, uint8_t proto, uint32_t saddr,
    uint16_t sport, uint32_t daddr, uint16_t dport, uint32_t mark,
    uint32_t mask);

/*
 * The same change, without waiting for an acknowledgement: the kernel has
 * made it, or refused it, by the time this returns (ctnetlink handles the
 * request inside the send), and answers only a refusal. 0, or -1 with
 * errno when the request could not be sent. A refusal waits on
 * nfq_ctmark_fd for nfq_ctmark_refusals. Do not mix with nfq_ctmark_set,
 * which skips answers to other requests.
 */
int nfq_ctmark_post(struct nfq_ctmark *m, uint8_t proto, uint32_t saddr,
    uint16_t sport, uint32_t daddr, uint16_t dport, uint32_t mark,
    uint32_t mask);
int nfq_ctmark_fd(const struct nfq_ctmark *m);

/*
 * e: the refused change's connection (proto, addresses and ports; the rest
 * 0), or NULL when the kernel's quote of it did not parse, or when
 * refusals were lost (error ENOBUFS: the socket's buffer overflowed).
 * error: the kernel's (ENOENT: conntrack has no such connection).
 */
typedef void (*nfq_ctmark_refusal_cb)(void *arg, const struct nfq_ct_end *e,
    int error);

/* Reads refusals of posted changes without blocking (at most 64 datagrams
 * a call): cb for each; what another process sends is skipped. The number
 * read, or -1 with errno. */
int nfq_ctmark_refusals(struct nfq_ctmark *m, nfq_ctmark_refusal_cb cb,
    void *arg);
void nfq_ctmark_close(struct nfq_ctmark *m);	/* NULL-safe */

/*
 * Deletes every IPv4 conntrack entry, of any protocol and zone, whose
 * original source is saddr (network order), in the caller's network
 * namespace: the socket is made here and closed before returning; the
 * call blocks until the kernel is done. One request where the kernel can
 * filter a flush (CTA_FILTER on IPCTNL_MSG_CT_DELETE; 6.18 can): cheap,
 * and nothing to do in a namespace without entries. Elsewhere the table
 * is dumped and each entry deleted by its tuple, a walk of the kernel's
 * whole hash table each time (some 10 ms with 262144 buckets). Needs
 * CAP_NET_ADMIN. 0, or -1 with a message in err: some may be left.
 * Thread-safe: it shares nothing with struct nfq_ct.
 */
int nfq_ct_flush_source(uint32_t saddr, char *err, size_t errlen);

/* true: the entry whose original source is saddr (network order) goes. */
typedef bool (*nfq_ct_match_cb)(void *arg, uint32_t saddr);

/*
 * Deletes the IPv4 entries whose original source match picks: the whole
 * table is dumped (match sees every IPv4 entry), the picked ones deleted
 * by tuple (one gone meanwhile is no error), and the table read again
 * when the dump came in pieces and may have skipped one. For many
 * sources at once, e.g. at start-up. Returns the number deleted, or -1
 * with a message in err. Same namespace and threading as above.
 */
int nfq_ct_flush_match(nfq_ct_match_cb match, void *arg, char *err,
    size_t errlen);

/* The mark an entry is to get (0: it keeps its own), from what the dump
 * said of it. */
typedef uint32_t (*nfq_ct_revise_cb)(void *arg, const struct nfq_ct_end *e);
/* An entry whose mark was changed, as the dump had it (its counters). */
typedef void (*nfq_ct_revised_cb)(void *arg, const struct nfq_ct_end *e);

/*
 * Changes the marks of the IPv4 entries whose original source is saddr
 * (network order): the kernel dumps them (filtered where it can), revise
 * picks the mark of each, whose bits under mask are set (acknowledged
 * requests, in batches), and revised hears of each one changed (NULL:
 * not told). One gone meanwhile is no error. The table is read again
 * when the dump came in pieces and may have skipped one, so revise must
 * answer 0 for an entry that already has its new mark. Returns the
 * number changed, or -1 with a message in err: some may be left. Same
 * namespace and threading as above.
 */
int nfq_ct_revise(uint32_t saddr, uint32_t mask, nfq_ct_revise_cb revise,
    nfq_ct_revised_cb revised, void *arg, char *err, size_t errlen);

/* ---- SYNs accepted in the kernel (fastsyn.c) ------------------------------ */

/*
 * The set's key, type iface_index . ipv4_addr . ipv4_addr . inet_service:
 * the sandbox's interface, its address, the destination and its port.
 */
#define NFQ_FASTSYN_KEY_LEN	16

struct nfq_fastsyn;

struct nfq_fastsyn_stats {
	uint64_t	adds;		/* elements sent */
	uint64_t	add_errors;	/* refused by the kernel (a full set) */
	uint64_t	dels;		/* elements deleted (transactions) */
	uint64_t	dels_spared;	/* ... not, known not to be there */
};

/* Addresses in network order, ifindex and port in host order. */
void nfq_fastsyn_key(uint8_t key[NFQ_FASTSYN_KEY_LEN], uint32_t ifindex,
    uint32_t saddr, uint32_t daddr, uint16_t dport);

/*
 * Opens a netlink socket to the nftables set TABLE SET (family ip) in the
 * caller's network namespace and empties the set, which must exist with
 * the key above and timeouts. NULL with a message in err.
 */
struct nfq_fastsyn *nfq_fastsyn_open(const char *table, const char *set,
    char *err, size_t errlen);

/*
 * Adds an element that expires after timeout_ms (an existing one is left
 * as it is). Not acknowledged: the kernel's refusals are read and counted
 * on the next call. -1 when the message could not be sent.
 */
int nfq_fastsyn_add(struct nfq_fastsyn *fs, uint32_t ifindex, uint32_t saddr,
    uint32_t daddr, uint16_t dport, uint64_t timeout_ms);

/* Deletes one element, or every element (only if one was added since the
 * last flush); acknowledged (gone on return 0). An element deleted less
 * than a second before now (ms, CLOCK_MONOTONIC) and not added since
 * costs no transaction. */
int nfq_fastsyn_del(struct nfq_fastsyn *fs, uint32_t ifindex, uint32_t saddr,
    uint32_t daddr, uint16_t dport, uint64_t now);
int nfq_fastsyn_flush(struct nfq_fastsyn *fs);
void nfq_fastsyn_stats(const struct nfq_fastsyn *fs,
    struct nfq_fastsyn_stats *st);
void nfq_fastsyn_close(struct nfq_fastsyn *fs);	/* NULL-safe */

struct nfq_nflog;

struct nfq_nflog_stats {
	uint64_t	packets;	/* copies read */
	uint64_t	overruns;	/* ENOBUFS: times the kernel dropped
					 * copies */
	uint64_t	dropped;	/* how many: counted once the socket is
					 * read dry after an ENOBUFS, from the
					 * kernel's drop counter (one an
					 * ENOBUFS when it cannot be read) */
	uint64_t	bad_messages;
};

/*
 * Binds NFLOG group in the caller's network namespace, copying up to range
 * bytes of each packet (NFQ_NFLOG_HEADERS: the headers; a rule's
 * --nflog-size can only copy less), each sent at once (threshold 1). A
 * copy whose message exceeds NFQ_NFLOG_DGRAM_MAX is counted bad and
 * skipped. NULL with a message in err.
 */
#define NFQ_NFLOG_HEADERS	128
#define NFQ_NFLOG_DGRAM_MAX	8192
struct nfq_nflog *nfq_nflog_open(uint16_t group, uint32_t range, char *err,
    size_t errlen);
int nfq_nflog_fd(const struct nfq_nflog *l);

/*
 * Reads what is pending (non-blocking, at most 64 datagrams) and calls cb
 * with each copy (pkt->copy set, pkt->id 0); cb's return is ignored.
 * Returns the number of copies, or -1 with errno on a socket error, or
 * EDEADLK when called from one of l's own callbacks (nothing is read).
 */
int nfq_nflog_recv(struct nfq_nflog *l, nfq_packet_cb cb, void *arg);
/* True when the last nfq_nflog_recv read the socket dry (it ended on
 * EAGAIN, not at its bound or on an error). */
bool nfq_nflog_drained(const struct nfq_nflog *l);
void nfq_nflog_stats(const struct nfq_nflog *l, struct nfq_nflog_stats *st);
void nfq_nflog_close(struct nfq_nflog *l);	/* NULL-safe */

/* ---- first flights checked in the kernel (ksni.c) ------------------------ */

/*
 * An eBPF program for iptables' `-m bpf --object-pinned PATH` that
 * approves (returns 1 for) a TCP segment only when it is one whole TLS
 * record holding one whole, plain ClientHello (no ECH, no TCP option but
 * NOP, EOL and timestamps) whose (ingress interface, destination,
 * port, server_name as sent) was learned with nfq_ksni_add, under the
 * current generation, before it expires, under a lease (nfq_ksni_lease).
 * Anything else it leaves to the
 * queue (0). The table holds max_entries keys; at the bound an add
 * pushes out the least recently used (that key's flights are queued
 * again).
 */
#define NFQ_KSNI_NAME_MAX	255

struct nfq_ksni;

struct nfq_ksni_stats {
	uint64_t	adds;		/* entries written */
	uint64_t	add_errors;	/* writes the kernel refused (map full...) */
	uint64_t	clears;		/* generation bumps */
	uint64_t	seen;		/* from the program's per-CPU counters, summed: */
	uint64_t	approved;	/*   segments it returned 1 for */
	uint64_t	unparsed;	/*   not the plain one-segment ClientHello */
	uint64_t	unknown;	/*   parsed, but no live entry for its key */
	uint64_t	lapsed;		/*   not parsed: the lease had run out */
};

/*
 * Loads the program (embedded in the library) with a name table of
 * max_entries, mounts a bpffs on the pin path's directory if none is
 * there (mkdir -p; only on an empty directory), removes a stale pin
 * (whose generation, if it is an earlier ksni program, is set to 0 first)
 * and pins the program at pin_path, an absolute path. Needs CAP_BPF and
 * CAP_SYS_ADMIN (the mount). NULL with a message in err on failure.
 */
struct nfq_ksni *nfq_ksni_open(const char *pin_path, uint32_t max_entries,
    char *err, size_t errlen);
/* pin_path as given; valid until nfq_ksni_close. */
const char *nfq_ksni_path(const struct nfq_ksni *k);
int nfq_ksni_prog_fd(const struct nfq_ksni *k);	/* for tests */

/*
 * Learns (ifindex, daddr, dport, name): the program approves such a
 * segment for ttl_ms from now (CLOCK_MONOTONIC, which is
 * bpf_ktime_get_ns's clock), under the current generation; an entry for
 * the same key is replaced. daddr in network order, dport in host order,
 * name: len bytes exactly as the client sent them (1..255, no NUL, else
 * EINVAL). 0, or -1 with errno.
 */
int nfq_ksni_add(struct nfq_ksni *k, uint32_t ifindex, uint32_t daddr,
    uint16_t dport, const char *name, size_t len, uint64_t ttl_ms);

/*
 * The lease: the program approves nothing from ms from now on (0: from
 * now), until the next call. A new program has none. The reader of the
 * copies renews it while it runs, so that if it dies or stalls, what the
 * program would pass takes the queue within ms. 0, or -1 with errno.
 */
int nfq_ksni_lease(struct nfq_ksni *k, uint64_t ms);

/* Every entry stops matching at once (a new generation); the old entries
 * are left to be overwritten or pushed out. 0, or -1 with errno (the old
 * generation then stays, for the kernel and for later adds). */
int nfq_ksni_clear(struct nfq_ksni *k);

void nfq_ksni_stats(const struct nfq_ksni *k, struct nfq_ksni_stats *st);

/* Generation 0 (= approve nothing, even while an iptables rule still
 * holds the program), unpins (if the pin is still this program), frees.
 * A bpffs mounted by open stays. NULL-safe. */
void nfq_ksni_close(struct nfq_ksni *k);

#endif
