/* metrics.h: sluiced's counters, their Prometheus text exposition and the
 * small HTTP server that hands it out. */
#ifndef SLUICE_METRICS_H
#define SLUICE_METRICS_H

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <jansson.h>

#include "dns/dns.h"
#include "gateway/verdict.h"
#include "store/store.h"

struct gw;
struct gw_metrics;

/*
 * Exposition format: Prometheus text 0.0.4. Every label value comes from a
 * fixed vocabulary (verdict, reason, le): no sandbox names, no addresses.
 */
#define GW_METRICS_CONTENT_TYPE	"text/plain; version=0.0.4; charset=utf-8"
#define GW_METRICS_CLIENTS	8	/* scrapes served at once; more get 503 */
#define GW_METRICS_POLLFDS	(2 + GW_METRICS_CLIENTS)	/* listeners too */
#define GW_METRICS_REQ_MAX	4096	/* a request head longer is refused (431) */
#define GW_METRICS_IO_MS	2000	/* a client gets this long, in all */
#define GW_METRICS_RENDERS	20	/* renders a second (and at once); a
					 * scrape beyond gets the last text */

/* Verdict latency histogram: upper bounds in nanoseconds (1 µs .. 100 ms),
 * +Inf beyond. */
#define GW_METRICS_LATENCY_BUCKETS	16

/*
 * Counters start at zero. Returns NULL (errno ENOMEM) on failure; free
 * with gw_metrics_free() (NULL-safe; closes any listeners).
 */
struct gw_metrics *gw_metrics_new(void);
void gw_metrics_free(struct gw_metrics *m);

/*
 * Counting. Each is a relaxed C11 atomic add, so any thread may call them
 * (queue workers); m may be NULL (then nothing is counted).
 */

/* One flow row logged with this verdict and reason (flowlog.c). */
void gw_metrics_flow(struct gw_metrics *m, enum gw_verdict v,
    enum gw_reason r);
/* One DNS query answered or forwarded: verdict "allow", "deny" or "audit"
 * (anything else, or NULL, counts as "deny"). */
void gw_metrics_dns(struct gw_metrics *m, const char *verdict);
/* Time from a packet's receipt to its verdict, in nanoseconds. */
void gw_metrics_verdict_latency(struct gw_metrics *m, uint64_t ns);

/* What the rest of the daemon reports, read when the metrics are rendered. */
struct gw_metrics_state {
	size_t			 sandboxes;
	size_t			 held_flows;	/* flows under inspection */
	size_t			 bindings;	/* live DNS bindings */
	uint64_t		 packets;	/* given to sluiced by the queue */
	uint64_t		 packet_errors;	/* unparseable, dropped */
	uint64_t		 verify_expired;
	uint64_t		 stale_syns;	/* flights held from stale SYNs */
	uint64_t		 stale_refused;	/* ... refused before a SYN-ACK */
	uint64_t		 verify_copies;	/* server packets' copies read */
	uint64_t		 verify_copies_lost;	/* ... the kernel dropped */
	uint64_t		 verify_copies_dropped;	/* ... how many */
	uint64_t		 verify_mark_errors;	/* proven, mark unchanged */
	uint64_t		 server_resets;	/* servers of refused connections */
	uint64_t		 server_reset_errors;	/* ... resets not sent */
	uint64_t		 app_cache_hits;	/* TLS flows named by key */
	uint64_t		 app_cache_misses;	/* ... by nDPI */
	uint64_t		 app_cache_checks;	/* hits named by nDPI too */
	uint64_t		 app_cache_mismatches;	/* ... differently */
	uint64_t		 denied_unlogged;	/* records the log refused
						 * on the verdict path */
	uint64_t		 revoked;	/* connections policy sets cut */
	uint64_t		 limited_flows;	/* attempts denied rate_limited */
	uint64_t		 limited_dns;	/* queries refused rate_limited */
	bool			 queue_known;	/* the kernel's counters were read */
	uint64_t		 queue_length;	/* packets waiting in the kernel */
	uint64_t		 queue_dropped;	/* the queue was full */
	uint64_t		 queue_user_dropped;	/* netlink could not take them */
	bool			 kernel_syn;	/* the kernel-SYN set is in use */
	uint64_t		 kernel_syn_copies;	/* SYNs it let through */
	uint64_t		 kernel_syn_stale;	/* ... decided otherwise */
	uint64_t		 kernel_syn_lost;	/* times the kernel dropped
							 * copies (ENOBUFS) */
	uint64_t		 kernel_syn_dropped;	/* ... how many it dropped */
	uint64_t		 kernel_syn_learned;	/* entries added */
	uint64_t		 kernel_syn_learn_errors;	/* ... refused */
	bool			 kernel_sni;	/* --kernel-sni's program in use */
	uint64_t		 kernel_sni_approved;	/* flights it let out */
	uint64_t		 kernel_sni_overruled;	/* ... decided otherwise */
	uint64_t		 kernel_sni_learned;	/* entries added */
	uint64_t		 kernel_sni_learn_errors;	/* ... refused */
	struct store_stats	 log;
	bool			 log_writable;
	struct dns_resolver_stats dns;
};

/* Fills st from gw (any part of gw that is not there counts as zero). */
void gw_metrics_gather(struct gw *gw, struct gw_metrics_state *st);

/*
 * Renders the exposition of m and st into buf (len bytes, always
 * terminated when len > 0). Returns the length of the whole text, without
 * the terminating NUL: when it is >= len the text was cut, and a buffer of
 * the returned length + 1 takes it all (as snprintf). Pure.
 */
size_t gw_metrics_render(const struct gw_metrics *m,
    const struct gw_metrics_state *st, char *buf, size_t len);

/* The whole rendering in a new buffer (the caller frees it), its length
 * in *len; NULL when out of memory. */
char *gw_metrics_text(const struct gw_metrics *m,
    const struct gw_metrics_state *st, size_t *len);

/*
 * The same numbers as a JSON object for `sluice stats -j` (control.c's
 * "stats" reply): a new reference, or NULL when out of memory.
 */
json_t *gw_metrics_json(const struct gw_metrics *m,
    const struct gw_metrics_state *st);

/* ---- the exposition server ------------------------------------------- */

/*
 * Reads one HTTP request head from buf (len bytes so far). Returns 0 when
 * more bytes are needed, or the status to answer with: 200 for GET or HEAD
 * of /metrics (*head_only set for HEAD), 400 for anything that is no HTTP
 * request, 404 for another path, 405 for another method, 431 when no head
 * ended within GW_METRICS_REQ_MAX bytes, 505 for a version other than
 * HTTP/1.0 and 1.1. Pure.
 */
int gw_metrics_http_parse(const char *buf, size_t len, bool *head_only);

/*
 * Parses a --metrics-listen address, "IPV4:PORT" or "[IPV6]:PORT", numeric
 * only, port 1..65535, the wildcards 0.0.0.0 and :: refused. Fills *ss and
 * *sslen; returns 0, or -1 with the reason in err.
 */
int gw_metrics_parse_listen(const char *s, struct sockaddr_storage *ss,
    socklen_t *sslen, char *err, size_t errlen);

/*
 * Opens the listeners: a unix socket at unix_path and a TCP socket at
 * tcp_addr (either may be NULL), in the caller's network namespace (call it
 * in the host's: one in the gateway's would be out of the host's reach).
 * Returns 0, or -1 with a message in err (what was opened stays open, and
 * gw_metrics_free closes it).
 */
int gw_metrics_listen(struct gw_metrics *m, const char *unix_path,
    const char *tcp_addr, char *err, size_t errlen);

/*
 * Keeps a descriptor on the kernel's queue table (path, or NULL for the
 * caller's network namespace's: /proc/thread-self/net/netfilter/
 * nfnetlink_queue) so that its drops can be read later from anywhere: the
 * file stays bound to the namespace it was opened in. Returns 0 or -1 with
 * errno.
 */
int gw_metrics_open_queue_table(struct gw_metrics *m, const char *path);

/*
 * Reads the kernel's counters for every queue of that table into st
 * (queue_known false if it could not be read).
 */
void gw_metrics_read_queue_table(const struct gw_metrics *m,
    struct gw_metrics_state *st);

/*
 * sluiced's part (metrics.c): the counters, the listeners from the flags
 * (--metrics-socket, --metrics-listen, opened in the caller's namespace)
 * and the kernel queue table of the gateway namespace (entered and left
 * for the moment). Returns NULL with a message in err.
 */
struct gw_metrics *gw_metrics_open(struct gw *gw, char *err, size_t errlen);

/*
 * The event loop's side, as gw_control_*: the descriptors to poll (at most
 * max, GW_METRICS_POLLFDS is enough), their results (accepting, reading,
 * answering from gw), and milliseconds until the next deadline (-1: none).
 * Nothing here blocks: a slow or silent client holds a slot for at most
 * GW_METRICS_IO_MS.
 */
size_t gw_metrics_pollfds(const struct gw_metrics *m, struct pollfd *pfd,
    size_t max);
void gw_metrics_process(struct gw *gw, struct gw_metrics *m,
    const struct pollfd *pfd, size_t n, uint64_t now_ms);
int gw_metrics_timeout(const struct gw_metrics *m, uint64_t now_ms);

#endif
