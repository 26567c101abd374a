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
	uint32_t	 mark;
	uint8_t		 hook;		/* NF_INET_* hook it was queued at */
	const uint8_t	*payload;	/* the network-layer packet */
	size_t		 len;
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

/* verdict: NF_ACCEPT, NF_DROP or NF_REPEAT; mark is set on the packet when
 * set_mark is true. Returns 0 or -1 with errno. */
int nfq_queue_verdict(struct nfq_queue *q, uint32_t id, uint32_t verdict,
    bool set_mark, uint32_t mark);

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
	uint8_t		 icmp_type;	/* ICMP */
	uint8_t		 icmp_code;
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

const char *nfq_parse_error_str(enum nfq_parse_error e);

/* "tcp", "udp", "icmp" or "ip" (static strings). */
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
};

struct nfq_flows;

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

/* Removes every entry whose ifindex is ifindex (a sandbox went away). */
void nfq_flows_forget_ifindex(struct nfq_flows *ft, uint32_t ifindex);

/* Entries held: the live ones plus expired ones not yet reclaimed (each
 * insert reclaims up to two). */
size_t nfq_flows_count(const struct nfq_flows *ft);

#endif
