/* capture.h: denied packets to pcap files; the verdict engine replayed over a trace. */
#ifndef SLUICE_CAPTURE_H
#define SLUICE_CAPTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dns/dns.h"
#include "gateway/policy.h"

/* ---- capture (capture.c): sluiced's --capture-denied DIR --------------- */

#define GW_CAPTURE_OPEN_MAX	64	/* files open at once; the least
					 * recently used is closed beyond */
#define GW_CAPTURE_SNAPLEN	65535	/* bytes kept of a packet */
#define GW_CAPTURE_SCAN_MAX	16384	/* files a scan for the total's bound
					 * weighs at once (twice that in
					 * memory): those first to go are
					 * kept, the rest wait for a scan */

struct gw_capture;

/*
 * pcap files under dir (created 0750 if missing), one per sandbox:
 * dir/NAME.pcap, linktype DLT_RAW (raw IPv4), rotated to NAME.pcap.1 (one
 * old file kept, replaced at the next rotation) when the next packet would
 * take it past max_bytes (at least one packet per file). A file left by an
 * earlier run is appended to. Files are made 0640 and opened on first use.
 * Returns NULL with a message in err.
 */
struct gw_capture *gw_capture_open(const char *dir, size_t max_bytes,
    char *err, size_t errlen);

/*
 * Says which of names[0..n) (sorted by strcmp, distinct, valid sandbox
 * names) are sandboxes that exist now, by setting live[i] (all false on
 * entry). The names are valid during the call only.
 */
typedef void (*gw_capture_live_fn)(void *arg, const char *const *names,
    size_t n, bool *live);

/*
 * Bounds the bytes of every capture file in the directory together,
 * NAME.pcap and NAME.pcap.1 of every name (other files are neither counted
 * nor touched), to total; 0: no bound. The directory is scanned now, and
 * again whenever the total, kept up to date from what is written, rotated
 * and removed, passes the bound; never for each packet. A scan removes
 * files of names live says are no sandbox (live NULL: all are) first, the
 * oldest (mtime) first, then other files the oldest first, until the
 * total is 7/8 of the bound (so the next scan is an eighth of it away),
 * but never the NAME.pcap open for a sandbox that exists. What a scan
 * cannot remove waits for the next one. Returns 0, or -1 when the scan
 * failed (gw_capture_last_error says why); either way the bound holds.
 */
int gw_capture_set_total(struct gw_capture *c, uint64_t total,
    gw_capture_live_fn live, void *arg);

/*
 * The last failure of a scan or of a removal for the bound, "" if none;
 * valid until the next call on c.
 */
const char *gw_capture_last_error(const struct gw_capture *c);

/*
 * Appends one IPv4 packet (as queued: IP header first; cut at
 * GW_CAPTURE_SNAPLEN) for sandbox, with ts_us (unix microseconds) as its
 * time. Never fails loudly: a name that is no sandbox name (names.h) or a
 * file that cannot be written is counted in the errors.
 */
void gw_capture_packet(struct gw_capture *c, const char *sandbox,
    const uint8_t *pkt, size_t len, int64_t ts_us);

/*
 * Appends a DNS message a sandbox sent the resolver (or the answer it got),
 * wrapped in synthetic IPv4 and UDP headers src:sport -> dst:dport
 * (addresses in network order, ports in host order) with correct lengths
 * and checksums, so that tcpdump and wireshark decode it as DNS. A message
 * longer than a UDP datagram can carry is counted as an error.
 */
void gw_capture_dns(struct gw_capture *c, const char *sandbox, uint32_t src,
    uint16_t sport, uint32_t dst, uint16_t dport, const uint8_t *msg,
    size_t len, int64_t ts_us);

struct gw_capture_stats {
	uint64_t	packets;	/* records written */
	uint64_t	bytes;		/* record bytes written, headers included */
	uint64_t	rotations;	/* files moved to NAME.pcap.1 */
	uint64_t	errors;		/* records not written: bad name, I/O */
	size_t		open_files;
	uint64_t	total_bytes;	/* of every capture file, as last known */
	uint64_t	scans;		/* of the directory, for the bound */
	uint64_t	removed;	/* files removed for the bound */
	uint64_t	removed_bytes;
	uint64_t	remove_errors;	/* files that could not be removed,
					 * scans that failed */
};

void gw_capture_get_stats(const struct gw_capture *c,
    struct gw_capture_stats *st);

/* NULL-safe; flushes and closes every file. */
void gw_capture_close(struct gw_capture *c);

/* ---- replay (replay.c): `sluice replay` -------------------------------- */

/*
 * The gateway's decisions (verdict.c: gw_decide, gw_decide_hello,
 * gw_decide_name, gw_dns_decide, gw_dns_filter) run offline over a trace of
 * one sandbox's traffic as seen on its side of the link: the packets it
 * sent and the answers it got. The trace's timestamps are the clock. What
 * sluiced would have written to its flows and dns_queries tables comes out
 * as rows.
 */

/* Sandbox addresses, one /30 each: the gateway is .1 of its /30. */
#define GW_REPLAY_POOL_DEFAULT	"10.213.0.0/16"
/* The uplink's addresses, never a destination: sluiced's defaults
 * (gw.h's GW_HOST_UPLINK_ADDR and GW_HOST_UPLINK_PEER). */
#define GW_REPLAY_UPLINK_DEFAULT	"100.64.213.2/30"
#define GW_REPLAY_UPLINK_PEER_DEFAULT	"100.64.213.1/30"
#define GW_REPLAY_CONNS_MAX	65536	/* connections tracked (conntrack's
					 * part); the least recently seen is
					 * forgotten beyond */

struct gw_replay_opts {
	const struct policy	*policy;	/* must outlive the engine */
	uint32_t		 pool_net;	/* network order */
	uint32_t		 pool_mask;
	uint32_t		 uplink[2];	/* sluiced's --uplink-addr and
						 * --uplink-peer-addr (network
						 * order; 0: none) */
	uint32_t		 sandbox_addr;	/* network order; 0: the source of
						 * the first TCP SYN, UDP datagram
						 * to port 53 or ICMP echo */
	unsigned		 ttl_min, ttl_max, grace;	/* sluiced's
						 * --dns-ttl-min/-max/--dns-grace */
};

enum gw_replay_kind { GW_REPLAY_FLOW, GW_REPLAY_DNS };

/* One row, as sluiced would have logged it. Strings are "" when absent. */
struct gw_replay_row {
	enum gw_replay_kind	 kind;
	uint64_t		 seq;	/* number (from 1) of the packet that
					 * opened the flow or carried the query */
	unsigned		 sub;	/* 0; n for the nth later row of the same
					 * flow (a denied later HTTP request) */
	int64_t			 ts_us;	/* when it was decided */
	uint8_t			 proto;	/* IPPROTO_*: the flow's, or the
					 * query's transport */
	uint32_t		 saddr, daddr;	/* network order */
	uint16_t		 sport, dport;	/* host order; 0 for ICMP */
	const char		*verdict;	/* "allow", "deny", "audit" */
	const char		*reason;	/* the README's vocabularies */
	char			 rule[POLICY_ENTRY_MAX];
	char			 name[DNS_NAME_MAX + 1];	/* flows: the binding's */
	char			 sni[256];
	char			 http_host[256];
	char			 qname[DNS_NAME_MAX + 1];	/* dns: as asked */
	char			 qtype[16];
	char			 rcode[16];	/* dns: "" when no answer was seen */
	char			 answers[400];	/* dns: the addresses bound */
};

/* Called for each row as it is decided; row is valid during the call. */
typedef void (*gw_replay_row_fn)(void *arg, const struct gw_replay_row *row);

struct gw_replay_stats {
	uint64_t	frames;		/* read from the trace */
	uint64_t	not_ipv4;	/* frames skipped: ARP, IPv6, ... */
	uint64_t	malformed;	/* IPv4 that did not parse (or was cut
					 * short by the capture's snap length) */
	uint64_t	ignored;	/* parsed, but nothing sluiced would see:
					 * decided connections, replies, ... */
	uint64_t	dns_tcp;	/* TCP connections to the resolver */
	uint64_t	dns_tcp_lost;	/* ... whose messages could not all be
					 * read: a gap, a conflict, a bound, no
					 * SYN/ACK in the trace */
	uint64_t	answers_unmatched;	/* resolver answers with no query */
	uint64_t	flows, queries;	/* rows */
};

struct gw_replay;

/* A new engine; rows go to fn(arg, row). NULL on allocation failure. */
struct gw_replay *gw_replay_new(const struct gw_replay_opts *o,
    gw_replay_row_fn fn, void *arg);

/* Feeds one IPv4 packet (IP header first) seen at ts_us. */
void gw_replay_packet(struct gw_replay *r, const uint8_t *pkt, size_t len,
    int64_t ts_us);

/*
 * Feeds one frame of linktype (DLT_RAW, DLT_IPV4, DLT_EN10MB, DLT_LINUX_SLL,
 * DLT_LINUX_SLL2); frames that carry no IPv4 packet are counted and
 * skipped. Returns 0, or -1 for a linktype it cannot read.
 */
int gw_replay_frame(struct gw_replay *r, int linktype, const uint8_t *frame,
    size_t len, int64_t ts_us);

/* The end of the trace: flights still held time out, queries without an
 * answer get their row. Call once, after the last packet. */
void gw_replay_finish(struct gw_replay *r);

/* The sandbox's address (network order), 0 while unknown. */
uint32_t gw_replay_sandbox_addr(const struct gw_replay *r);

void gw_replay_get_stats(const struct gw_replay *r, struct gw_replay_stats *st);

void gw_replay_free(struct gw_replay *r);	/* NULL-safe */

/*
 * Reads the pcap file at path and feeds every frame to each of the n
 * engines (several policies over one pass), then finishes them. Returns 0,
 * 1 when the file ended in a truncated or unreadable record (what came
 * before was replayed; err says what), or -1 when the file cannot be read
 * at all or its linktype is not one of gw_replay_frame's (err says why).
 */
int gw_replay_file(const char *path, struct gw_replay *const *r, size_t n,
    char *err, size_t errlen);

#endif
