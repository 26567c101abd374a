/* gw.h: sluiced's own state, shared by the daemon's files (not the CLI). */
#ifndef SLUICE_GW_H
#define SLUICE_GW_H

#include <net/if.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "gateway/policy.h"
#include "dns/dns.h"
#include "nfq/nfq.h"

/* CLOCK_MONOTONIC in ms: every timer of the event loop, its readers' and
 * the holds' counts in it. */
static inline uint64_t
gw_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}
#include "store/store.h"
#include "gateway/limits.h"
#include "gateway/metrics.h"

/*
 * Packet and connection marks. Bits 28-31 belong to sluice so that other
 * rules on a production host can keep using the rest of the mark.
 */
#define GW_MARK_MASK	0x70000000u
#define GW_MARK_ALLOW	0x10000000u
#define GW_MARK_DENY	0x20000000u
#define GW_MARK_INSPECT	0x30000000u	/* being inspected: its client packets
					 * keep coming to sluiced */
#define GW_MARK_VERIFY	0x70000000u	/* inspected bytes let through that
					 * the server has not acknowledged
					 * yet: its client packets and the
					 * server's come to sluiced */
/* a SYN conntrack did not take as new (its 5-tuple is tracked already),
 * on its way to sluiced (ruleset.c): never a connection's mark */
#define GW_MARK_STALE	0x40000000u
/* inspect and verify, and nothing else: value and mask of one match */
#define GW_MARK_UNDER	0x30000000u
/* Set with every mark a decision gives a packet (a verdict, the kernel-SYN
 * set), never saved onto the connection: only a packet carrying it has
 * its mark saved there (ruleset.c). A packet whose mark was merely
 * restored from its connection never writes it back, so it cannot undo a
 * change sluiced made to the connection's mark meanwhile (ctnetlink). */
#define GW_MARK_SET	0x80000000u
#define GW_VERIFY_MS	10000		/* a TLS connection's server must
					 * acknowledge its ClientHello in */

/* Inspection of the first flight (inspect.c): bounds and their behaviour.
 * A full hold table denies new flows that need inspection; a flight that
 * does not complete within the bytes (NFQ_REASM_MAX), packets or time is
 * denied. */
#define GW_HOLD_MAX	1024		/* flows under inspection at once */
#define GW_HOLD_PKTS	64		/* packets held per flow */
#define GW_HOLD_PER_SANDBOX	256	/* of GW_HOLD_MAX, for one sandbox:
					 * --limit-holds' default */
#define GW_HOLD_SILENT_MS	10000	/* a flow that never sends its first
					 * flight gives its slot back */
#define GW_HOLD_MS	3000		/* a first flight must complete in */
#define GW_HOLD_CAPTURE	8		/* packets of a held flow kept for
					 * --capture-denied */
#define GW_CAPTURE_MAX_BYTES	(16u << 20)	/* a pcap file, then rotated */
#define GW_CAPTURE_TOTAL_MB	1024		/* all of them together, in MiB:
						 * --capture-denied-total's
						 * default, 32 names' worth */
#define GW_CAPTURE_TOTAL_MB_MAX	(1u << 22)	/* 4 TiB */
#define GW_HOLD_IDLE_MS	120000		/* an HTTP connection idle this long
					 * is forgotten (its next packet is
					 * refused): --http-idle's default */

#define GW_DNS_MAX	8
#define GW_QUEUES_MAX	64		/* --queue-balance */
#define GW_NAME_MAX	48		/* sandbox names; see names.h */
#define GW_UPLINK_IF	"uplink"	/* the gateway side of the uplink veth */
/* Uplink through the host: the veth's addresses unless --uplink-addr and
 * --uplink-peer-addr say otherwise (shared address space, RFC 6598, which
 * hosts rarely route themselves). capture.h has them too, for replay. */
#define GW_HOST_UPLINK_ADDR	"100.64.213.2/30"
#define GW_HOST_UPLINK_PEER	"100.64.213.1/30"
#define GW_SB_IF_PREFIX	"sg"		/* gateway side of sandbox veths: sg<slot> */
#define GW_SB_IF	"eth0"		/* sandbox side */
/* SYNs accepted in the kernel (nfq/fastsyn.c): the nftables table and set
 * the ruleset makes, and the NFLOG group their copies go to. */
#define GW_FASTSYN_TABLE	"sluice"
#define GW_FASTSYN_SET		"bound"
#define GW_FASTSYN_GROUP	7
/* The server's packets on a connection under the verify mark: copies to
 * sluiced (NFLOG), for their ACK (inspect.c) */
#define GW_VERIFY_GROUP		8
/* Bounds a read of all the copies waiting in one of those sockets:
 * reads of up to 64 copies, more than its 16 MiB hold */
#define GW_COPIES_DRAIN_READS	1600
/* ... of them, put off at once at most (inspect.c: verify_reply) */
#define GW_LATER_MAX		64
/* ... read before the copy of the first flight they prove (--kernel-sni,
 * a backlog): their ACKs kept, this many slots, this long, for an ACK at
 * most this far past the flight's end (inspect.c: early_keep) */
#define GW_EARLY_MAX		65536
#define GW_EARLY_MS		2000
#define GW_EARLY_WINDOW		65535
/* --copy-interval: the longest wait between reads of those copies, and
 * how long after the last one the loop waits for them again instead */
#define GW_COPY_INTERVAL_MAX	100
#define GW_COPY_IDLE_MS		1000
/* An element lives as long as the binding that admitted it, at most: */
#define GW_FASTSYN_MAX_MS	600000
/* First flights the kernel lets through (--kernel-sni, nfq/ksni.c): the
 * directory its program is pinned in (a bpffs, mounted there if need be;
 * the file is named after the gateway namespace), its table's bound, and
 * the largest packet the ruleset gives it, so that its whole copy fits
 * one NFLOG message. The copies go to GW_FASTSYN_GROUP, behind their
 * SYN's when the kernel-SYN set let that through. */
#define GW_KSNI_DIR		"/run/sluice/bpf"
#define GW_KSNI_ENTRIES		16384
#define GW_KSNI_PKT_MAX		7680
/* The program passes nothing once the main loop has not renewed its lease
 * for GW_KSNI_LEASE_MS (sluiced died or stalls: the copies of what it
 * would pass have no reader); the loop renews it every
 * GW_KSNI_RENEW_MS. */
#define GW_KSNI_LEASE_MS	2000
#define GW_KSNI_RENEW_MS	500

/* DNS bindings: bounds, and what happens at them (dns/dns.h): a full
 * table refuses new bindings, and their addresses are left out of the
 * answer. Names per (sandbox, address): a new flow to an address no name
 * allows checks every name bound to it against the policy, so this
 * bounds one decision (at 256 names of 30 characters about 15 us, of 250
 * characters 85 us; at 4,096 it was 250 us and 1.4 ms), while leaving
 * room for the many names a CDN or an ingress serves from one address.
 * Light: once only the last quarter of the table is free, a sandbox
 * holding 256 or more gets no more, so the last 16,384 are for sandboxes
 * that hold fewer, as many as a build resolves within a TTL (the hold
 * table's reserve, limits.h, at the same 1/16 of the per-sandbox bound);
 * before, 16 sandboxes at their own bound took the whole table. */
#define GW_BINDINGS_MAX		65536
#define GW_BINDINGS_PER_SANDBOX	4096
#define GW_BINDINGS_PER_ADDR	256
#define GW_BINDINGS_LIGHT	256
#define GW_BINDINGS_BOUNDS	{ .total = GW_BINDINGS_MAX, \
	.per_sandbox = GW_BINDINGS_PER_SANDBOX, \
	.per_addr = GW_BINDINGS_PER_ADDR, .light = GW_BINDINGS_LIGHT }

/* Flow table: recently decided attempts, for retransmissions and bursts. */
#define GW_FLOWS_MAX	65536
#define GW_FLOWS6_MAX	4096		/* IPv6 attempts, for their rows only */
#define GW_FLOW_TTL_MS	30000		/* denials: UDP's conntrack timeout, one row per flow */
/* Allowed flows leave the queue once their connmark is saved; only packets
 * already queued behind the first need the cached verdict. Kept short so a
 * reused 5-tuple is decided (and logged) again. */
#define GW_FLOW_ALLOW_TTL_MS	2000

/*
 * Fairness (limits.c): per sandbox, new flows and DNS queries per second
 * (token buckets) and flows held for inspection at once. What is over a
 * bound is denied, reason rate_limited, for that sandbox only. Defaults:
 * the soak's heaviest sandbox does ~310 new flows and ~1,050 queries a
 * second, and one sandbox at the limit takes about a tenth of what the
 * verdict path can decide. A burst of 0 means twice the rate.
 */
/* Upstream answers the resolver keeps (dns/cache.c): a kilobyte and a
 * name each at most, about 5 MiB when full. */
#define GW_DNS_CACHE		4096

#define GW_LIMIT_CONN_RATE	2000
#define GW_LIMIT_DNS_RATE	2000
/* Rows for what a bound denies: the first GW_LIMIT_LOG_ROWS each second
 * per sandbox (flows and DNS apart), then one summary row a second with
 * the count, so a flood cannot fill the log. */
#define GW_LIMIT_LOG_ROWS	10
/* A rate-limited attempt is remembered only briefly: a retransmission
 * within the second is the same attempt, a later one is decided again
 * (and a flood's entries are the first the flow table evicts). */
#define GW_FLOW_LIMITED_TTL_MS	1000

struct gw_config {
	const char	*control;
	const char	*db;
	const char	*state_dir;
	const char	*netns;		/* the gateway namespace's name */
	const char	*pool;
	const char	*uplink_netns;
	const char	*uplink_addr;
	const char	*uplink_peer_addr;
	const char	*dns_upstream[GW_DNS_MAX];
	size_t		 ndns;
	unsigned	 queue_num;
	unsigned	 queue_maxlen;
	unsigned	 queue_balance;	/* queues (and reader threads); 1: the
					 * main loop reads the one queue */
	unsigned	 dns_ttl_min;	/* seconds a binding lasts at least */
	unsigned	 dns_ttl_max;	/* ... at most (answers' TTLs are capped too) */
	unsigned	 dns_grace;	/* seconds added to a binding's TTL */
	unsigned	 dns_cache;	/* upstream answers kept; 0: none */
	unsigned	 retain_days;	/* 0: keep every row */
	unsigned	 log_queue;	/* the store's queue, rows; 0: its default */
	const char	*capture_denied;	/* pcap directory, or NULL */
	unsigned	 capture_denied_total;	/* MiB of its files; 0: no bound */
	const char	*metrics_socket;	/* exposition on a unix socket, or NULL */
	const char	*metrics_listen;	/* ... on ADDR:PORT in the host, or NULL */
	unsigned	 limit_conn_rate;	/* per sandbox; 0: unlimited */
	unsigned	 limit_conn_burst;
	unsigned	 limit_dns_rate;	/* per sandbox; 0: unlimited */
	unsigned	 limit_dns_burst;
	bool		 kernel_syn;		/* --kernel-syn (fastsyn.c) */
	bool		 kernel_sni;		/* --kernel-sni (nfq/ksni.c) */
	unsigned	 limit_holds;		/* per sandbox; 0: no bound */
	unsigned	 http_idle;		/* s: --http-idle */
	unsigned	 copy_interval;		/* ms: --copy-interval; 0: as
						 * each copy comes */
	bool		 foreground;
	bool		 verbose;
	bool		 teardown;
	/* The config file's JSON (a json_t), kept: string values point into
	 * it, the others into argv or are literals. gw_config_free. */
	void		*file;
};

/* A sandbox's fairness state (limits.c). */
struct gw_limited {
	struct gw_bucket	 conn, dns;
	struct gw_limit_log	 flow_log, dns_log;
	/* the last attempt without a row, shown by the summary row */
	enum gw_limit_kind	 flow_kind;
	uint8_t			 proto;
	uint32_t		 saddr, daddr;
	uint16_t		 sport, dport;
	bool			 parsed;	/* the DNS query was */
	bool			 tcp;
	uint16_t		 qtype, src_port;
	char			 qname[DNS_NAME_MAX + 1];
	struct gw_sandbox	*next;		/* on gw->limited */
	bool			 listed;
};

struct gw_sandbox {
	char		 name[GW_NAME_MAX + 1];
	unsigned	 slot;		/* index in the address pool */
	char		 ifname[IF_NAMESIZE];
	uint32_t	 ifindex;	/* of ifname, in the gateway namespace */
	uint32_t	 addr;		/* network order */
	uint32_t	 gw_addr;
	char		 netns_path[128];
	struct policy	*policy;
	int64_t		 created_us;
	unsigned	 holds;		/* its flows under inspection */
	struct gw_limited limited;
	struct gw_sandbox *hnext;	/* ifindex hash chain */
};

struct gw {
	struct gw_config	 cfg;
	uint32_t		 pool_net;	/* network order */
	uint32_t		 pool_mask;
	uint32_t		 uplink[2];	/* the gateway's uplink address and
						 * its peer's, network order: never
						 * a destination (gw_gateway_setup) */
	unsigned		 pool_slots;	/* /30s in the pool */
	struct gw_sandbox	**slots;	/* by slot, pool_slots long */
	bool			*slot_busy;	/* by slot: its veth is still
						 * being deleted (reaper.c) */
	struct gw_reaper	*reaper;	/* NULL: deletes in place */
	struct gw_sandbox	**by_ifindex;	/* hash buckets */
	size_t			 nbuckets;
	size_t			 nsandboxes;
	int			 gw_nsfd;	/* the gateway namespace */
	int			 host_nsfd;	/* where sluiced started */
	int			 home_nsfd;	/* where the main thread lives: the
						 * host during setup, then the
						 * gateway (its sockets are there) */
	struct gw_hostaddrs	*hostaddrs;	/* the host's own addresses,
						 * with the uplink through it
						 * (hostaddr.c); else NULL */
	struct gw_nl		*rtnl;		/* rtnetlink in the gateway
						 * namespace; opened when first
						 * needed (sandbox.c) */
	/* Where /run/netns names are made (netns.c): the host's mount
	 * namespace, when sluiced runs in one of its own, else -1. Valid
	 * once mntns_checked. */
	int			 host_mntfd;
	bool			 mntns_checked;
	bool			 netns_dir_ready;	/* /run/netns is a shared
							 * mount point */
	struct nfq_queue	*queue;
	struct nfq_flows	*flows;
	struct nfq_flows	*flows6;	/* IPv6 attempts seen (ipv6.c) */
	struct store		*store;
	struct dns_resolver	*resolver;
	struct dns_bindings	*bindings;
	struct gw_holds		*holds;
	struct nfq_classifier	*classifier;
	struct nfq_ct		*ct;		/* conntrack destroy events */
	uint64_t		 ct_lost_seen;	/* nfq_ct_lost() last read */
	uint64_t		 ct_lost_ms;	/* when it last grew (0: never) */
	bool			 fastsyn_rules;	/* the ruleset has them */
	struct nfq_fastsyn	*fastsyn;	/* NULL: every SYN is queued */
	struct nfq_nflog	*nflog;		/* copies of the SYNs it lets */
	uint64_t		 fastsyn_copies;	/* SYNs it let through */
	uint64_t		 fastsyn_stale;	/* ... decided otherwise now */
	uint64_t		 nflog_lost_seen;	/* overruns last read */
	uint64_t		 nflog_dropped_logged;	/* dropped, counted in
							 * lost_records */
	uint64_t		 nflog_lost_ms;	/* when they last grew (0: never) */
	uint64_t		 copies_seen_ms;	/* --copy-interval: a read
						 * last found copies (0: never) */
	uint64_t		 copies_woken;	/* passes a copy woke */
	uint64_t		 copies_unwaited; /* passes that found copies
						 * without waiting for them */
	/* --kernel-sni: the program (NULL: every first flight is queued),
	 * whether the ruleset passes first flights by it, and what became
	 * of those it passed (inspect.c) */
	struct nfq_ksni		*ksni;
	bool			 ksni_rules;
	uint64_t		 ksni_copies;	/* read and decided again */
	uint64_t		 ksni_overruled;	/* ... otherwise: reset */
	uint64_t		 ksni_unread;	/* ... not read: the server
						 * dropped it too (PAWS) */
	uint64_t		 ksni_renew_at;	/* the lease's next renewal */
	uint64_t		 ksni_lease_errors;
	/* Copies of servers' packets put off until the hellos' copies are
	 * read (inspect.c: gw_verify_settle), and how many found no room */
	struct gw_later {
		struct nfq_packet	 pkt;	/* a copy: headers only */
		struct nfq_tuple	 t;
		uint8_t			 head[64];	/* its payload's first
						 * bytes (a server's answer
						 * tells a HelloRetryRequest
						 * by them: inspect.c) */
	}			 later[GW_LATER_MAX];
	size_t			 nlater;
	uint64_t		 later_full;
	uint64_t		 early_kept;	/* proofs read before their flight */
	uint64_t		 early_used;	/* ... that proved it */
	uint64_t		 early_pushed;	/* ... lost to another's slot */
	uint64_t		 copies_older;	/* server copies logged before
						 * the hold of their 5-tuple
						 * began: an older connection's */
	uint32_t		 copy_gseq;	/* the newest copy read, in the
						 * kernel's order (gw_copy_seen) */
	bool			 copy_gseq_any;
	/* The proof of a first flight (inspect.c): copies of the server's
	 * packets, and the connection marks changed when it comes. NULL
	 * (a ruleset without NFLOG): the server's packets are queued. */
	struct nfq_nflog	*vlog;
	struct nfq_ctmark	*ctmark;
	bool			 verify_copies;	/* the ruleset copies them */
	uint64_t		 verify_mark_errors;	/* marks not changed */
	struct gw_capture	*capture;	/* --capture-denied, or NULL */
	/* The config documents (json_t) that reloaded live strings point
	 * into: cfg.dns_upstream, cfg.capture_denied. Held while they do. */
	void			*upstream_file;
	void			*capture_file;
	uint64_t		 capture_removed_seen;	/* what sluiced.c's
						 * capture_watch has said */
	uint64_t		 capture_errors_seen;
	bool			 store_ok;	/* last seen store_writable() */
	int			 ctl_fd;
	uid_t			 attach_uid;	/* the control client's uid while
						 * its sandbox.add runs: not 0,
						 * --netns must be a namespace
						 * that uid could open itself */
	uint64_t		 pkts, pkt_errors, denied_unlogged;
	uint64_t		 revoked;	/* connections a policy set cut
						 * (revoke.c) */
	uint64_t		 verify_expired;	/* TLS connections whose
						 * server never acknowledged
						 * the hello (inspect.c) */
	uint64_t		 hello_retries;	/* ... whose server answered
						 * with a HelloRetryRequest:
						 * cut (inspect.c) */
	uint64_t		 stale_syns;	/* flights held from SYNs
						 * conntrack did not take as
						 * new (inspect.c) */
	uint64_t		 stale_refused;	/* ... whose bytes came
						 * before the server's SYN-ACK */
	/* Resets sent to the servers of connections refused after their
	 * handshake (inspect.c): a raw socket in the gateway namespace,
	 * opened at set-up (CAP_NET_RAW then, not later); -1 without. */
	int			 rst_fd;
	uint64_t		 server_resets;
	uint64_t		 server_reset_errors;
	struct gw_metrics	*metrics;	/* counters, exposition (metrics.h) */
	struct gw_sandbox	*limited;	/* summary rows to write (limits.c) */
	uint64_t		 limited_flows;	/* attempts denied rate_limited, */
	uint64_t		 limited_dns;	/* with a row of their own or not */
	/* --queue-balance (workers.c): with nworkers > 0 every access to
	 * the state above takes lock (gw_lock) */
	struct gw_worker	*workers;
	unsigned		 nworkers;
	pthread_mutex_t		 lock;
	atomic_bool		 stopping;
	/* The main loop's wake-up (workers.c): an eventfd it polls, written
	 * by a worker whose batch made a timer (hold, limits) due before
	 * wake_at, the loop's planned wake-up (CLOCK_MONOTONIC ms, UINT64_MAX:
	 * none; 0: woken already, or not asleep yet), under lock. */
	int			 wake_fd;
	uint64_t		 wake_at;
};

/* ipv6.c: an IPv6 packet from a sandbox: dropped, its attempt logged. */
int gw_ipv6_packet(struct gw *gw, const struct nfq_packet *pkt, uint64_t now);
int gw_ipv6_queue_link(const char *ifname);	/* in the gateway namespace */

/* workers.c: --queue-balance. gw_lock/gw_unlock do nothing with one queue. */
struct gw_worker;
int gw_workers_open(struct gw *gw, char *err, size_t errlen);
int gw_workers_start(struct gw *gw, nfq_packet_cb cb, char *err, size_t errlen);
void gw_workers_stop(struct gw *gw);

/* reaper.c: a thread that deletes sandboxes' veths off the event loop.
 * Start it in the gateway namespace, after the privilege drop. */
int gw_reaper_start(struct gw *gw, char *err, size_t errlen);
/* Hands ifindex (the veth of slot) over and marks the slot busy until it
 * is deleted; -1 (no reaper, its queue full): delete it in place. */
int gw_reaper_submit(struct gw *gw, uint32_t ifindex, unsigned slot,
    const char *name);
/* Whether the veth ifindex (in the gateway) was handed over and is not
 * yet reported deleted: waiting, or in the thread's hands. */
bool gw_reaper_holds(const struct gw *gw, uint32_t ifindex);
int gw_reaper_fd(const struct gw *gw);		/* poll it; -1: none */
void gw_reaper_collect(struct gw *gw);		/* frees the done slots */
struct gw_reaper_stats {
	uint64_t	pending;	/* veths waiting to be deleted */
	uint64_t	deleted, failed;	/* since start */
};
void gw_reaper_stats(const struct gw *gw, struct gw_reaper_stats *out);
void gw_reaper_stop(struct gw *gw);		/* finishes them, then goes */
void gw_workers_queue_stats(const struct gw *gw, struct nfq_queue_stats *st);
void gw_lock(struct gw *gw);
void gw_unlock(struct gw *gw);

/* config.c */
int gw_config_parse(struct gw_config *cfg, int argc, char **argv);
void gw_config_free(struct gw_config *cfg);

/* netns.c: running programs and working in the gateway namespace. */
int gw_run(char *const argv[], const char *input, char *err, size_t errlen);
int gw_run_quiet(char *const argv[]);
int gw_netns_enter(int nsfd);	/* 0 or -1; the calling thread only */
int gw_netns_open(const char *name, bool create, char *err, size_t errlen);
bool gw_netns_exists(const char *name);
/*
 * Named namespaces without ip(8). Names (/run/netns/NAME, and with a
 * nameserver /etc/netns/NAME/resolv.conf) are made in the host's mount
 * namespace so that `ip netns exec NAME` there works, also when sluiced
 * runs in a private one (systemd's ProtectSystem=). gw_netns_create makes
 * a new namespace and names it: returns an open descriptor of it (the
 * caller closes it), or -1 with errno and err. gw_netns_name names the
 * namespace nsfd; gw_netns_unname removes a name (the namespace ends with
 * its last user); gw_netns_resolv_conf (re)writes resolv.conf if it is
 * not what it should be. All 0 or -1 with errno and err.
 */
int gw_netns_create(struct gw *gw, const char *name, const char *nameserver,
    char *err, size_t errlen);
int gw_netns_name(struct gw *gw, int nsfd, const char *name,
    const char *nameserver, char *err, size_t errlen);
int gw_netns_unname(struct gw *gw, const char *name, char *err, size_t errlen);
int gw_netns_resolv_conf(struct gw *gw, const char *name,
    const char *nameserver, char *err, size_t errlen);
int gw_sysctl(const char *path, const char *value);
int gw_gateway_setup(struct gw *gw, char *err, size_t errlen);
void gw_gateway_destroy(struct gw *gw);

/* ruleset.c */
int gw_ruleset_apply(struct gw *gw, char *err, size_t errlen);

/* sandbox.c */
int gw_sandboxes_init(struct gw *gw, char *err, size_t errlen);
/* attach: an existing namespace's file to govern, or NULL to create one */
int gw_sandbox_add(struct gw *gw, const char *name, const char *policy_text,
    size_t policy_len, const char *origin, const char *attach,
    struct gw_sandbox **out, char *err, size_t errlen);
int gw_sandbox_del(struct gw *gw, const char *name, char *err, size_t errlen);
int gw_sandbox_set_policy(struct gw *gw, const char *name,
    const char *policy_text, size_t policy_len, const char *origin,
    struct gw_sandbox **out, char *err, size_t errlen);
struct gw_sandbox *gw_sandbox_by_name(struct gw *gw, const char *name);
struct gw_sandbox *gw_sandbox_by_ifindex(struct gw *gw, uint32_t ifindex);
/* capture.h's gw_capture_live_fn, arg a struct gw: which of the sorted
 * names are sandboxes now (live[i] set for each that is). */
void gw_sandbox_names_live(void *arg, const char *const *names, size_t n,
    bool *live);
/* The sandbox whose address addr (network order) is, or NULL. */
struct gw_sandbox *gw_sandbox_by_addr(struct gw *gw, uint32_t addr);
int gw_sandboxes_restore(struct gw *gw, char *err, size_t errlen);
void gw_sandboxes_teardown(struct gw *gw);
void gw_sandboxes_free(struct gw *gw);

/* flowlog.c: one flows row. extra (may be NULL) is what inspection read. */
struct gw_decision;
struct gw_flow_extra {
	const char	*sni, *tls_version, *alpn;
	const char	*http_method, *http_host, *http_path;
	const char	*app;
	const char	*policy_sha256;	/* NULL: the sandbox's policy now */
};
int gw_log_flow(struct gw *gw, const struct gw_sandbox *sb,
    const struct nfq_tuple *t, const struct gw_decision *d,
    const struct gw_flow_extra *extra);
int gw_log_flow6(struct gw *gw, const struct gw_sandbox *sb,
    const struct nfq_tuple6 *t, const struct gw_decision *d);
/* The end of the connection conntrack reports as e, with end_state (a
 * static string): its row gets the counters. -1: the log refused it
 * (counted in denied_unlogged). */
/* After store_close: says in sluiced's own log how many records it could
 * not write (the database had no room for the count). */
void gw_log_lost_at_close(size_t n);
int gw_log_flow_end(struct gw *gw, const struct nfq_ct_end *e,
    const char *end_state);
/* The flow-table key of sb's side of the connection e (TCP). */
void gw_ct_flow_key(const struct gw_sandbox *sb, const struct nfq_ct_end *e,
    struct nfq_flow_key *key);
/* What a decision needs to know of sb, now (synpath.c). */
struct gw_decide_ctx gw_decide_ctx_of(const struct gw *gw,
    const struct gw_sandbox *sb, uint64_t now);

/*
 * Reads conntrack destroy events (flowlog.c): one batch, or all that are
 * pending (at most 64 batches); each ended connection's row gets its
 * counters, and an allowed SYN's flow-table entry on its 5-tuple goes.
 * True when every end since 2 × GW_FLOW_ALLOW_TTL_MS ago was read: the
 * socket was read dry, and none was lost by the kernel (ENOBUFS).
 */
bool gw_ct_read(struct gw *gw, bool all);

/*
 * synpath.c: a new flow's first decision, for a queued packet (with its
 * verdict) or a SYN the kernel accepted (pkt->copy, none); and the
 * kernel-SYN set: opened after the ruleset in the gateway namespace,
 * emptied when a policy changes or a sandbox goes, its copies read before
 * the queue and whenever a first flight finds no hold. gw_fastsyn_drain
 * reads them all: true when the socket was read dry and no copy was lost
 * lately (within 2 × GW_FLOW_ALLOW_TTL_MS), so that every SYN the set let
 * through up to now has been decided.
 */
int gw_decide_first(struct gw *gw, const struct nfq_packet *pkt,
    const struct nfq_tuple *t, uint64_t now);
void gw_fastsyn_open(struct gw *gw);
/* hostaddr.c: with the uplink through the host, its addresses (opened in
 * its namespace; a no-op with --uplink-netns), read again when its fd is
 * readable; the list is sorted, for gw_decide_ctx. */
int gw_hostaddrs_open(struct gw *gw, char *err, size_t errlen);
int gw_hostaddrs_fd(const struct gw *gw);
void gw_hostaddrs_read(struct gw *gw);
const uint32_t *gw_hostaddrs_list(const struct gw *gw, size_t *n);
void gw_hostaddrs_close(struct gw *gw);
/* --kernel-sni: the program loaded and pinned before the ruleset names it
 * (a warning, and every first flight queued, when it cannot be); its
 * table is emptied with the kernel-SYN set (gw_fastsyn_forget), and
 * whenever a first flight it passed is decided otherwise. */
void gw_ksni_open(struct gw *gw);
void gw_ksni_learn(struct gw *gw, uint32_t ifindex, uint32_t daddr,
    uint16_t dport, const char *sni, const struct gw_decision *d,
    uint64_t now);
void gw_ksni_clear(struct gw *gw);
/* The program's lease, renewed by the main loop: ms until it is due (-1:
 * no program), and the renewal when it is. */
int gw_ksni_timeout(const struct gw *gw, uint64_t now);
void gw_ksni_renew(struct gw *gw, uint64_t now);
void gw_fastsyn_read(struct gw *gw);
bool gw_fastsyn_drain(struct gw *gw);
void gw_fastsyn_forget(struct gw *gw);
void gw_fastsyn_close(struct gw *gw);

/* inspect.c. gw_inspect_start: 0, or -1 with errno ENOSPC (the hold
 * table is full), EBUSY (the sandbox holds --limit-holds flows already)
 * or ENOMEM; the caller then gives the packet its verdict. */
int gw_inspect_init(struct gw *gw);
void gw_inspect_free(struct gw *gw);
int gw_inspect_start(struct gw *gw, struct gw_sandbox *sb,
    const struct nfq_packet *pkt, const struct nfq_tuple *t,
    const struct gw_decision *d, int kind, uint64_t now);
/* A copy of a first flight the kernel let out (--kernel-sni). */
void gw_inspect_approved(struct gw *gw, const struct nfq_packet *pkt,
    const struct nfq_tuple *t, uint64_t now);
void gw_inspect_packet(struct gw *gw, const struct nfq_packet *pkt,
    const struct nfq_tuple *t, uint64_t now);
/* The hold on a SYN's 5-tuple: 1 it is that SYN's (the same sequence
 * number), 0 another connection's first flight, -1 there is none, or it
 * is that of an HTTP connection whose first request was decided: a SYN
 * then, whatever its sequence number, is a new connection, which holds
 * a flight of its own (adversarial 27). */
int gw_inspect_held_syn(struct gw *gw, const struct nfq_packet *pkt,
    const struct nfq_tuple *t);
int gw_inspect_timeout(struct gw *gw, uint64_t now);
void gw_inspect_expire(struct gw *gw, uint64_t now);
void gw_inspect_forget_ifindex(struct gw *gw, uint32_t ifindex);
/* The same for a sandbox being deleted, after its flows' rows. */
void gw_inspect_forget_sandbox(struct gw *gw, struct gw_sandbox *sb);
size_t gw_inspect_count(const struct gw *gw);
/* A policy set cuts a connection (revoke.c): true while its hold has no
 * decision yet (the new policy will make it); gw_inspect_revoked drops a
 * decided one's hold, whose proof would give it its allow mark back. */
bool gw_inspect_undecided(struct gw *gw, const struct gw_sandbox *sb,
    const struct nfq_ct_end *e);
void gw_inspect_revoked(struct gw *gw, const struct gw_sandbox *sb,
    const struct nfq_ct_end *e);

/* revoke.c: gives the deny mark to sb's connections that old let start and
 * sb->policy would refuse, and ends their rows "revoked"; in the gateway
 * namespace. The number cut, or -1 with err (some may be left). */
int gw_revoke(struct gw *gw, struct gw_sandbox *sb, const struct policy *old,
    char *err, size_t errlen);
/* The proof's copies of server packets (inspect.c): opened in the gateway
 * namespace when the ruleset copies them (verify_copies); -1 with a
 * message in err. */
int gw_verify_open(struct gw *gw, char *err, size_t errlen);
void gw_verify_read(struct gw *gw);	/* a batch of what is waiting */
void gw_verify_drain(struct gw *gw);	/* all of it */
/* What was put off because it had to wait for the hellos' copies, after
 * reading them; only where no copy is being read (a read's callbacks may
 * not start another read of either socket). */
void gw_verify_settle(struct gw *gw);
void gw_verify_refusals(struct gw *gw);	/* mark changes refused */
void gw_verify_close(struct gw *gw);	/* safe when not open */

/*
 * limits.c: the per-sandbox bounds. gw_limit_conn and gw_limit_dns take
 * a token: false when the sandbox is over its rate. gw_limit_log_flow
 * writes the row of a flow denied rate_limited by the bound kind (0), or
 * only counts it for the second's summary row (1); -1 if the log refused
 * the row. gw_limit_log_dns says whether a rate-limited query gets a row
 * of its own (the caller writes it) or is counted. Summary rows are
 * written by gw_limits_expire once their second is over (all at once when
 * force) and gw_limits_forget (a sandbox going away); gw_limits_timeout
 * is the milliseconds until the next one is due (-1: none).
 */
bool gw_limit_conn(struct gw *gw, struct gw_sandbox *sb, uint64_t now);
bool gw_limit_dns(struct gw *gw, struct gw_sandbox *sb, uint64_t now);
/* 0, ENOSPC or EBUSY: may sb hold one more flow, with used slots taken
 * (gw_hold_check) */
int gw_limit_hold(const struct gw *gw, const struct gw_sandbox *sb,
    size_t used);
const char *gw_limit_rule_text(const struct gw *gw, enum gw_limit_kind kind,
    char *buf, size_t len, uint64_t summarised);
int gw_limit_log_flow(struct gw *gw, struct gw_sandbox *sb,
    const struct nfq_tuple *t, enum gw_limit_kind kind, uint64_t now);
bool gw_limit_log_dns(struct gw *gw, struct gw_sandbox *sb,
    const struct dns_request *req, uint64_t now);
void gw_limits_expire(struct gw *gw, uint64_t now, bool force);
int gw_limits_timeout(const struct gw *gw, uint64_t now);
void gw_limits_forget(struct gw *gw, uint32_t ifindex);

/* dnsgw.c: the resolver's policy side */
int gw_dns_open(struct gw *gw, char *err, size_t errlen);
void gw_dns_close(struct gw *gw);

/* control.c */
int gw_control_open(struct gw *gw, char *err, size_t errlen);
int gw_unix_listen(const char *path, int backlog, char *err, size_t errlen);
void gw_control_accept(struct gw *gw, uint64_t now_ms);
/* clients being served: their descriptors, their I/O, their deadlines */
size_t gw_control_pollfds(struct pollfd *pfd, size_t max);
void gw_control_process(struct gw *gw, const struct pollfd *pfd, size_t n,
    uint64_t now_ms);
int gw_control_timeout(uint64_t now_ms);
void gw_control_close(struct gw *gw);

/* Notes a copy read (of either group): the newest, in the order the kernel
 * logged them (inspect.c: a hold's server copies must come after it). */
static inline void
gw_copy_seen(struct gw *gw, const struct nfq_packet *pkt)
{
	if (pkt->has_gseq && (!gw->copy_gseq_any ||
	    (int32_t)(pkt->gseq - gw->copy_gseq) > 0)) {
		gw->copy_gseq = pkt->gseq;
		gw->copy_gseq_any = true;
	}
}

#endif
