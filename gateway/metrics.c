/* metrics.c: counters, the Prometheus text exposition, and its HTTP server. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "gateway/ctl.h"
#include "gateway/gw.h"
#include "gateway/metrics.h"
#include "gateway/trustdir.h"

#define NVERDICTS	(GW_AUDIT + 1)
#define QUEUE_TABLE	"/proc/thread-self/net/netfilter/nfnetlink_queue"
#define ACCEPT_BURST	16	/* connections taken per wakeup per listener */

/*
 * Upper bounds of the latency buckets. A verdict from the flow table
 * takes about a microsecond, one decided from the policy tens of them, and
 * anything near 100 ms means the loop was stalled: the bounds cover that
 * range in 1-2.5-5 steps. The labels are spelled as Prometheus' own client
 * libraries spell them, so that dashboards match on le.
 */
static const struct {
	uint64_t	 ns;
	const char	*le;
	double		 seconds;
} buckets[GW_METRICS_LATENCY_BUCKETS] = {
	{ 1000, "1e-06", 1e-06 },
	{ 2500, "2.5e-06", 2.5e-06 },
	{ 5000, "5e-06", 5e-06 },
	{ 10000, "1e-05", 1e-05 },
	{ 25000, "2.5e-05", 2.5e-05 },
	{ 50000, "5e-05", 5e-05 },
	{ 100000, "0.0001", 0.0001 },
	{ 250000, "0.00025", 0.00025 },
	{ 500000, "0.0005", 0.0005 },
	{ 1000000, "0.001", 0.001 },
	{ 2500000, "0.0025", 0.0025 },
	{ 5000000, "0.005", 0.005 },
	{ 10000000, "0.01", 0.01 },
	{ 25000000, "0.025", 0.025 },
	{ 50000000, "0.05", 0.05 },
	{ 100000000, "0.1", 0.1 },
};

/* The order verdicts are listed in. */
static const enum gw_verdict verdict_order[NVERDICTS] = {
	GW_ALLOW, GW_DENY, GW_AUDIT,
};

struct client {
	int		 fd;		/* -1: free */
	char		 in[GW_METRICS_REQ_MAX];
	size_t		 inlen;
	char		*out;		/* the response, once made */
	size_t		 outlen, outoff;
	bool		 draining;	/* answered: reading until EOF so that
					 * closing does not reset the answer */
	uint64_t	 deadline;
};

struct gw_metrics {
	/* Relaxed atomics: counts from any thread, no ordering needed. */
	_Atomic uint64_t	 flows[NVERDICTS][GW_R_COUNT];
	_Atomic uint64_t	 dns[NVERDICTS];
	_Atomic uint64_t	 latency[GW_METRICS_LATENCY_BUCKETS + 1];
	_Atomic uint64_t	 latency_sum_ns;
	int64_t			 start_us;	/* wall clock */
	int			 listen_fd[2];	/* unix, tcp; -1: none */
	char			*unix_path;	/* to unlink */
	int			 queue_fd;	/* the kernel's queue table */
	struct client		 clients[GW_METRICS_CLIENTS];
	/* Rendering takes the main loop ~40 µs under gw->lock, and a
	 * client may scrape back to back (16,000 a second were measured):
	 * past GW_METRICS_RENDERS a second, the last text is served again */
	struct gw_bucket	 renders;
	char			*last;		/* the last text rendered */
	size_t			 lastlen;
	uint64_t		 served_again;
};

struct gw_metrics *
gw_metrics_new(void)
{
	struct gw_metrics *m;
	size_t i;

	if ((m = calloc(1, sizeof(*m))) == NULL)
		return NULL;
	m->start_us = store_now_us();
	m->listen_fd[0] = m->listen_fd[1] = -1;
	m->queue_fd = -1;
	for (i = 0; i < GW_METRICS_CLIENTS; i++)
		m->clients[i].fd = -1;
	return m;
}

static void
client_close(struct client *c)
{
	if (c->fd != -1)
		close(c->fd);
	free(c->out);
	c->fd = -1;
	c->out = NULL;
	c->inlen = c->outlen = c->outoff = 0;
	c->draining = false;
}

void
gw_metrics_free(struct gw_metrics *m)
{
	size_t i;

	if (m == NULL)
		return;
	for (i = 0; i < GW_METRICS_CLIENTS; i++)
		client_close(&m->clients[i]);
	for (i = 0; i < 2; i++)
		if (m->listen_fd[i] != -1)
			close(m->listen_fd[i]);
	if (m->unix_path != NULL) {
		unlink(m->unix_path);
		free(m->unix_path);
	}
	if (m->queue_fd != -1)
		close(m->queue_fd);
	free(m->last);
	free(m);
}

/* ---- counting ---------------------------------------------------------- */

static void
add(_Atomic uint64_t *c, uint64_t n)
{
	atomic_fetch_add_explicit(c, n, memory_order_relaxed);
}

static uint64_t
get(const _Atomic uint64_t *c)
{
	return atomic_load_explicit(c, memory_order_relaxed);
}

void
gw_metrics_flow(struct gw_metrics *m, enum gw_verdict v, enum gw_reason r)
{
	if (m == NULL || (unsigned)v >= NVERDICTS || (unsigned)r >= GW_R_COUNT)
		return;
	add(&m->flows[v][r], 1);
}

void
gw_metrics_dns(struct gw_metrics *m, const char *verdict)
{
	enum gw_verdict v = GW_DENY;

	if (m == NULL)
		return;
	if (verdict != NULL && strcmp(verdict, "allow") == 0)
		v = GW_ALLOW;
	else if (verdict != NULL && strcmp(verdict, "audit") == 0)
		v = GW_AUDIT;
	add(&m->dns[v], 1);
}

void
gw_metrics_verdict_latency(struct gw_metrics *m, uint64_t ns)
{
	size_t i;

	if (m == NULL)
		return;
	for (i = 0; i < GW_METRICS_LATENCY_BUCKETS && ns > buckets[i].ns; i++)
		;
	add(&m->latency[i], 1);
	add(&m->latency_sum_ns, ns);
}

/* ---- the state of the rest of the daemon ------------------------------- */

int
gw_metrics_open_queue_table(struct gw_metrics *m, const char *path)
{
	int fd;

	if ((fd = open(path != NULL ? path : QUEUE_TABLE,
	    O_RDONLY | O_CLOEXEC)) == -1)
		return -1;
	if (m->queue_fd != -1)
		close(m->queue_fd);
	m->queue_fd = fd;
	return 0;
}

/*
 * One line per queue, as net/netfilter/nfnetlink_queue.c prints it:
 * number, peer portid, packets waiting, copy mode, copy range, dropped
 * (queue full), user dropped (netlink could not deliver), last packet id,
 * and a constant 1.
 */
void
gw_metrics_read_queue_table(const struct gw_metrics *m,
    struct gw_metrics_state *st)
{
	char buf[8192], *line, *save;
	ssize_t n;

	st->queue_known = false;
	st->queue_length = st->queue_dropped = st->queue_user_dropped = 0;
	if (m == NULL || m->queue_fd == -1)
		return;
	if ((n = pread(m->queue_fd, buf, sizeof(buf) - 1, 0)) < 0)
		return;
	buf[n] = '\0';
	for (line = strtok_r(buf, "\n", &save); line != NULL;
	    line = strtok_r(NULL, "\n", &save)) {
		unsigned long long f[9];
		char *p = line, *end;
		int i;

		for (i = 0; i < 9; i++) {
			errno = 0;
			f[i] = strtoull(p, &end, 10);
			if (end == p || errno != 0)
				break;
			p = end;
		}
		if (i < 7)
			continue;
		st->queue_known = true;
		st->queue_length += f[2];
		st->queue_dropped += f[5];
		st->queue_user_dropped += f[6];
	}
}

void
gw_metrics_gather(struct gw *gw, struct gw_metrics_state *st)
{
	memset(st, 0, sizeof(*st));
	st->sandboxes = gw->nsandboxes;
	st->held_flows = gw_inspect_count(gw);
	st->bindings = gw->bindings != NULL ?
	    dns_bindings_count(gw->bindings) : 0;
	st->packets = gw->pkts;
	st->packet_errors = gw->pkt_errors;
	st->denied_unlogged = gw->denied_unlogged;
	st->revoked = gw->revoked;
	st->verify_expired = gw->verify_expired;
	st->stale_syns = gw->stale_syns;
	st->stale_refused = gw->stale_refused;
	st->verify_mark_errors = gw->verify_mark_errors;
	st->server_resets = gw->server_resets;
	st->server_reset_errors = gw->server_reset_errors;
	if (gw->classifier != NULL) {
		nfq_class_cache_stats(gw->classifier, &st->app_cache_hits,
		    &st->app_cache_misses);
		nfq_class_cache_checks(gw->classifier, &st->app_cache_checks,
		    &st->app_cache_mismatches);
	}
	if (gw->vlog != NULL) {
		struct nfq_nflog_stats vs;

		nfq_nflog_stats(gw->vlog, &vs);
		st->verify_copies = vs.packets;
		st->verify_copies_lost = vs.overruns;
		st->verify_copies_dropped = vs.dropped;
	}
	st->limited_flows = gw->limited_flows;
	st->limited_dns = gw->limited_dns;
	st->kernel_syn = gw->fastsyn != NULL;
	st->kernel_syn_copies = gw->fastsyn_copies;
	st->kernel_syn_stale = gw->fastsyn_stale;
	if (gw->nflog != NULL) {
		struct nfq_nflog_stats ls;

		nfq_nflog_stats(gw->nflog, &ls);
		st->kernel_syn_lost = ls.overruns;
		st->kernel_syn_dropped = ls.dropped;
	}
	if (gw->fastsyn != NULL) {
		struct nfq_fastsyn_stats fs;

		nfq_fastsyn_stats(gw->fastsyn, &fs);
		st->kernel_syn_learned = fs.adds;
		st->kernel_syn_learn_errors = fs.add_errors;
	}
	st->kernel_sni = gw->ksni != NULL && gw->ksni_rules;
	st->kernel_sni_overruled = gw->ksni_overruled;
	if (gw->ksni != NULL) {
		struct nfq_ksni_stats ks;

		nfq_ksni_stats(gw->ksni, &ks);
		st->kernel_sni_approved = ks.approved;
		st->kernel_sni_learned = ks.adds;
		st->kernel_sni_learn_errors = ks.add_errors;
	}
	store_stats(gw->store, &st->log);
	st->log_writable = store_writable(gw->store);
	if (gw->resolver != NULL)
		dns_resolver_stats(gw->resolver, &st->dns);
	gw_metrics_read_queue_table(gw->metrics, st);
}

/* ---- rendering --------------------------------------------------------- */

/* Appends like snprintf: counts what did not fit, so the caller learns
 * the whole length. */
struct text {
	char	*buf;
	size_t	 len;	/* of buf */
	size_t	 used;	/* of the whole text, even past len */
};

static void __attribute__((format(printf, 2, 3)))
put(struct text *t, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(t->used < t->len ? t->buf + t->used : NULL,
	    t->used < t->len ? t->len - t->used : 0, fmt, ap);
	va_end(ap);
	if (n > 0)
		t->used += (size_t)n;
}

static void
family(struct text *t, const char *name, const char *type, const char *help)
{
	put(t, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void
one(struct text *t, const char *name, const char *type, const char *help,
    uint64_t value)
{
	family(t, name, type, help);
	put(t, "%s %" PRIu64 "\n", name, value);
}

/* Nanoseconds as decimal seconds, exactly: "0.0000125", "3", "12.5". */
static void
seconds_str(uint64_t ns, char *buf, size_t len)
{
	size_t n;

	n = (size_t)snprintf(buf, len, "%" PRIu64 ".%09" PRIu64,
	    ns / 1000000000u, ns % 1000000000u);
	if (n >= len)
		return;
	while (buf[n - 1] == '0')
		buf[--n] = '\0';
	if (buf[n - 1] == '.')
		buf[n - 1] = '\0';
}

/* Allowing reasons go with allow, the others with deny and audit. */
static bool
reason_allows(enum gw_reason r)
{
	return r == GW_R_ALLOWED_CIDR || r == GW_R_ALLOWED_DOMAIN;
}

/* A snapshot of the histogram: each bucket read once, and the count made
 * from them, so that +Inf and _count always agree. */
static uint64_t
latency_snapshot(const struct gw_metrics *m,
    uint64_t b[GW_METRICS_LATENCY_BUCKETS + 1], uint64_t *sum_ns)
{
	uint64_t total = 0;
	size_t i;

	for (i = 0; i <= GW_METRICS_LATENCY_BUCKETS; i++) {
		b[i] = m != NULL ? get(&m->latency[i]) : 0;
		total += b[i];
	}
	*sum_ns = m != NULL ? get(&m->latency_sum_ns) : 0;
	return total;
}

size_t
gw_metrics_render(const struct gw_metrics *m,
    const struct gw_metrics_state *st, char *buf, size_t len)
{
	struct text t = { buf, len, 0 };
	uint64_t b[GW_METRICS_LATENCY_BUCKETS + 1], sum_ns, cum, count;
	char secs[32];
	size_t i, k;

	if (len > 0)
		buf[0] = '\0';

	family(&t, "sluice_build_info", "gauge",
	    "sluiced's version, as the label; always 1.");
	put(&t, "sluice_build_info{version=\"%s\"} 1\n", SLUICE_VERSION);
	family(&t, "sluice_start_time_seconds", "gauge",
	    "When sluiced started, in unix seconds.");
	put(&t, "sluice_start_time_seconds %" PRId64 "\n",
	    m != NULL ? m->start_us / 1000000 : 0);
	one(&t, "sluice_sandboxes", "gauge",
	    "Sandboxes governed now.", st->sandboxes);

	family(&t, "sluice_flows_total", "counter",
	    "Flow rows logged (attempted connections), by verdict and reason.");
	for (i = 0; i < NVERDICTS; i++) {
		enum gw_verdict v = verdict_order[i];

		for (k = 0; k < GW_R_COUNT; k++) {
			uint64_t n = m != NULL ? get(&m->flows[v][k]) : 0;

			/* every pair that can occur is there from the start
			 * (a counter born at its first event loses that
			 * event to rate()); impossible pairs only if seen */
			if (n == 0 && (v == GW_ALLOW) != reason_allows(k))
				continue;
			put(&t, "sluice_flows_total{verdict=\"%s\",reason=\"%s\"} "
			    "%" PRIu64 "\n", gw_verdict_name(v),
			    gw_reason_name(k), n);
		}
	}

	family(&t, "sluice_dns_queries_total", "counter",
	    "DNS queries sandboxes sent to the gateway's resolver, by verdict.");
	for (i = 0; i < NVERDICTS; i++)
		put(&t, "sluice_dns_queries_total{verdict=\"%s\"} %" PRIu64 "\n",
		    gw_verdict_name(verdict_order[i]),
		    m != NULL ? get(&m->dns[verdict_order[i]]) : 0);
	one(&t, "sluice_dns_forwarded_total", "counter",
	    "DNS queries forwarded to an upstream resolver.", st->dns.forwarded);
	one(&t, "sluice_dns_cache_hits_total", "counter",
	    "DNS queries answered from the resolver's cache (after the "
	    "sandbox's policy allowed them).", st->dns.cache_hits);
	one(&t, "sluice_dns_cache_entries", "gauge",
	    "Upstream answers the resolver's cache holds now.",
	    (uint64_t)st->dns.cache_entries);
	one(&t, "sluice_dns_upstream_timeouts_total", "counter",
	    "Forwarded DNS queries no upstream answered in time.",
	    st->dns.upstream_timeouts);
	one(&t, "sluice_dns_malformed_total", "counter",
	    "DNS messages from sandboxes that did not parse.", st->dns.malformed);
	one(&t, "sluice_dns_dropped_total", "counter",
	    "DNS answers or connections the resolver had to drop.",
	    st->dns.dropped);
	one(&t, "sluice_dns_kernel_dropped_total", "counter",
	    "UDP DNS queries the kernel dropped before the resolver read them "
	    "(also in lost_records).", st->dns.kernel_dropped);
	one(&t, "sluice_dns_tcp_refused_total", "counter",
	    "DNS-over-TCP connections beyond the resolver's bound (refused, "
	    "with rows).", st->dns.tcp_refused);
	one(&t, "sluice_dns_bindings", "gauge",
	    "Live DNS bindings (sandbox, address) -> name.", st->bindings);

	count = latency_snapshot(m, b, &sum_ns);
	family(&t, "sluice_verdict_latency_seconds", "histogram",
	    "Time from a packet's receipt by sluiced to its verdict.");
	for (i = 0, cum = 0; i < GW_METRICS_LATENCY_BUCKETS; i++) {
		cum += b[i];
		put(&t, "sluice_verdict_latency_seconds_bucket{le=\"%s\"} "
		    "%" PRIu64 "\n", buckets[i].le, cum);
	}
	put(&t, "sluice_verdict_latency_seconds_bucket{le=\"+Inf\"} %" PRIu64
	    "\n", count);
	seconds_str(sum_ns, secs, sizeof(secs));
	put(&t, "sluice_verdict_latency_seconds_sum %s\n", secs);
	put(&t, "sluice_verdict_latency_seconds_count %" PRIu64 "\n", count);

	one(&t, "sluice_queue_packets_total", "counter",
	    "Packets sluiced received from the queue.", st->packets);
	one(&t, "sluice_queue_packet_errors_total", "counter",
	    "Queued packets that did not parse (dropped, no row).",
	    st->packet_errors);
	if (st->queue_known) {
		one(&t, "sluice_queue_length", "gauge",
		    "Packets waiting in the kernel's queue for a verdict.",
		    st->queue_length);
		one(&t, "sluice_queue_dropped_total", "counter",
		    "Packets the kernel dropped because the queue was full.",
		    st->queue_dropped);
		one(&t, "sluice_queue_user_dropped_total", "counter",
		    "Packets the kernel dropped because sluiced's socket "
		    "could not take them.", st->queue_user_dropped);
	}
	one(&t, "sluice_kernel_syn_enabled", "gauge",
	    "1 when SYNs to addresses already decided \"inspect\" are "
	    "accepted in the kernel (--kernel-syn).", st->kernel_syn ? 1 : 0);
	one(&t, "sluice_kernel_syn_learned_total", "counter",
	    "Entries added to the kernel-SYN set.", st->kernel_syn_learned);
	one(&t, "sluice_kernel_syn_learn_errors_total", "counter",
	    "Entries the kernel refused (a full set: those SYNs keep taking "
	    "the queue).", st->kernel_syn_learn_errors);
	one(&t, "sluice_kernel_syn_copies_total", "counter",
	    "SYNs accepted in the kernel whose copy sluiced decided.",
	    st->kernel_syn_copies);
	one(&t, "sluice_kernel_syn_stale_total", "counter",
	    "... of them decided otherwise than the set said (its entry "
	    "removed; the connection reset at its first byte).",
	    st->kernel_syn_stale);
	one(&t, "sluice_kernel_syn_copies_lost_total", "counter",
	    "Times the kernel could not hand sluiced copies (those "
	    "connections are reset at their first byte).",
	    st->kernel_syn_lost);
	one(&t, "sluice_kernel_syn_copies_dropped_total", "counter",
	    "Copies the kernel dropped, by the socket's drop counter (each "
	    "also in lost_records: flow, kernel_dropped).",
	    st->kernel_syn_dropped);
	one(&t, "sluice_kernel_sni_enabled", "gauge",
	    "1 while first flights may be let out in the kernel "
	    "(--kernel-sni).", st->kernel_sni ? 1 : 0);
	one(&t, "sluice_kernel_sni_approved_total", "counter",
	    "First flights the kernel-SNI program let out (each copied to "
	    "sluiced and decided again).", st->kernel_sni_approved);
	one(&t, "sluice_kernel_sni_overruled_total", "counter",
	    "First flights the kernel let out that sluiced decided otherwise "
	    "(connection reset).", st->kernel_sni_overruled);
	one(&t, "sluice_kernel_sni_learned_total", "counter",
	    "Entries added to the kernel-SNI table.", st->kernel_sni_learned);
	one(&t, "sluice_kernel_sni_learn_errors_total", "counter",
	    "Entries the kernel-SNI table refused (those first flights take "
	    "the queue).", st->kernel_sni_learn_errors);
	one(&t, "sluice_inspect_held_flows", "gauge",
	    "Flows whose first flight (TLS ClientHello, HTTP head) is being "
	    "read.", st->held_flows);

	one(&t, "sluice_log_records_queued_total", "counter",
	    "Records accepted by the log's queue.", st->log.queued);
	one(&t, "sluice_log_records_written_total", "counter",
	    "Records committed to the database.", st->log.written);
	one(&t, "sluice_log_records_lost_total", "counter",
	    "Records refused because the log's queue was full (each counted "
	    "in the lost_records table).", st->log.rejected);
	one(&t, "sluice_log_write_errors_total", "counter",
	    "Failed database transactions (retried).", st->log.write_errors);
	one(&t, "sluice_log_backlog_records", "gauge",
	    "Records waiting to be written.", st->log.depth);
	one(&t, "sluice_log_backlog_bytes", "gauge",
	    "Bytes those records take in the log's queue.",
	    st->log.depth_bytes);
	one(&t, "sluice_log_queue_capacity_records", "gauge",
	    "Records the log's queue holds at most.", st->log.capacity);
	one(&t, "sluice_log_queue_capacity_bytes", "gauge",
	    "Bytes the log's queue holds at most (long records fill it before "
	    "its count does).", st->log.capacity_bytes);
	one(&t, "sluice_log_db_bytes", "gauge",
	    "The database file's size.", (uint64_t)st->log.db_bytes);
	one(&t, "sluice_log_wal_bytes", "gauge",
	    "Its -wal file's size: it grows while a reader's snapshot holds "
	    "the checkpoints back, and is cut back to 64 MiB after.",
	    (uint64_t)st->log.wal_bytes);
	one(&t, "sluice_log_writable", "gauge",
	    "1 while the database can be written; 0 while new flows are "
	    "denied (log_unavailable).", st->log_writable ? 1 : 0);
	one(&t, "sluice_denied_unlogged_total", "counter",
	    "Verdict-path records (flows, DNS queries, flow ends) the full log "
	    "refused; a flow that could not be logged was denied.",
	    st->denied_unlogged);
	one(&t, "sluice_revoked_connections_total", "counter",
	    "Open connections a policy set cut: the old policy let them "
	    "start, the new one refuses them.", st->revoked);
	one(&t, "sluice_verify_expired_total", "counter",
	    "Connections ended because the server never acknowledged the "
	    "ClientHello or request framing sluiced decided on.",
	    st->verify_expired);
	one(&t, "sluice_stale_syns_total", "counter",
	    "SYNs conntrack did not take as new (a 5-tuple reused while its "
	    "old entry lingers) that a flight was held from.", st->stale_syns);
	one(&t, "sluice_stale_refused_total", "counter",
	    "Of those, connections refused for sending bytes before the "
	    "server's SYN-ACK of the SYN.", st->stale_refused);
	one(&t, "sluice_verify_copies_total", "counter",
	    "Copies of servers' packets read for the acknowledgement that "
	    "proves a first flight.", st->verify_copies);
	one(&t, "sluice_verify_copies_lost_total", "counter",
	    "Times the kernel dropped such copies for want of buffer (each "
	    "connection's next server packet is copied again).",
	    st->verify_copies_lost);
	one(&t, "sluice_verify_copies_dropped_total", "counter",
	    "Copies of servers' packets the kernel dropped, by the socket's "
	    "drop counter.", st->verify_copies_dropped);
	one(&t, "sluice_verify_mark_errors_total", "counter",
	    "Proven connections whose conntrack mark could not be changed "
	    "(their next packets are refused).", st->verify_mark_errors);
	one(&t, "sluice_server_resets_total", "counter",
	    "Connections refused after their handshake whose server was sent "
	    "a reset, so it does not keep its side open.", st->server_resets);
	one(&t, "sluice_server_reset_errors_total", "counter",
	    "Such resets that could not be sent.", st->server_reset_errors);
	one(&t, "sluice_app_cache_hits_total", "counter",
	    "TLS connections whose app (nDPI's name) was that of an earlier "
	    "one with the same addresses, port and ClientHello fields, "
	    "without nDPI (but for the checks).", st->app_cache_hits);
	one(&t, "sluice_app_cache_misses_total", "counter",
	    "TLS connections named by nDPI, the name then kept for the next.",
	    st->app_cache_misses);
	one(&t, "sluice_app_cache_checks_total", "counter",
	    "Cache hits named by nDPI all the same (one in 64), to check the "
	    "cache's name.", st->app_cache_checks);
	one(&t, "sluice_app_cache_mismatches_total", "counter",
	    "Checks where nDPI's name differed from the cache's (the cache "
	    "then took nDPI's).", st->app_cache_mismatches);
	one(&t, "sluice_rate_limited_flows_total", "counter",
	    "Flow attempts denied by a sandbox's bounds (rate_limited), rows "
	    "of their own or only counted.", st->limited_flows);
	one(&t, "sluice_rate_limited_dns_queries_total", "counter",
	    "DNS queries refused by a sandbox's bound (rate_limited).",
	    st->limited_dns);
	one(&t, "sluice_metrics_scrapes_repeated_total", "counter",
	    "Scrapes beyond 20 a second, answered with the last text "
	    "rendered.", m != NULL ? m->served_again : 0);
	return t.used;
}

char *
gw_metrics_text(const struct gw_metrics *m, const struct gw_metrics_state *st,
    size_t *len)
{
	size_t cap = 16384, n;
	char *buf = NULL, *nb;

	for (;;) {
		if ((nb = realloc(buf, cap)) == NULL) {
			free(buf);
			return NULL;
		}
		buf = nb;
		if ((n = gw_metrics_render(m, st, buf, cap)) < cap)
			break;
		cap = n + 1;
	}
	*len = n;
	return buf;
}

json_t *
gw_metrics_json(const struct gw_metrics *m, const struct gw_metrics_state *st)
{
	uint64_t b[GW_METRICS_LATENCY_BUCKETS + 1], sum_ns, cum, count;
	json_t *o, *flows, *by_reason, *dnsq, *lat, *bl, *kernel;
	size_t i, k;

	o = json_object();
	flows = json_object();
	by_reason = json_object();
	dnsq = json_object();
	bl = json_array();
	if (o == NULL || flows == NULL || by_reason == NULL || dnsq == NULL ||
	    bl == NULL)
		goto fail;
	for (i = 0; i < NVERDICTS; i++) {
		enum gw_verdict v = verdict_order[i];
		json_t *reasons = json_object();
		uint64_t total = 0;

		if (reasons == NULL)
			goto fail;
		for (k = 0; k < GW_R_COUNT; k++) {
			uint64_t n = m != NULL ? get(&m->flows[v][k]) : 0;

			total += n;
			if (n > 0)
				json_object_set_new(reasons, gw_reason_name(k),
				    json_integer((json_int_t)n));
		}
		json_object_set_new(flows, gw_verdict_name(v),
		    json_integer((json_int_t)total));
		json_object_set_new(by_reason, gw_verdict_name(v), reasons);
		json_object_set_new(dnsq, gw_verdict_name(v),
		    json_integer((json_int_t)(m != NULL ? get(&m->dns[v]) : 0)));
	}
	json_object_set_new(flows, "by_reason", by_reason);
	by_reason = NULL;

	count = latency_snapshot(m, b, &sum_ns);
	for (i = 0, cum = 0; i < GW_METRICS_LATENCY_BUCKETS; i++) {
		cum += b[i];
		json_array_append_new(bl, json_pack("{s:f, s:I}", "le_seconds",
		    buckets[i].seconds, "count", (json_int_t)cum));
	}
	lat = json_pack("{s:I, s:f, s:o}", "count", (json_int_t)count,
	    "sum_seconds", (double)sum_ns / 1e9, "buckets", bl);
	bl = NULL;
	kernel = st->queue_known ? json_pack("{s:I, s:I, s:I}",
	    "length", (json_int_t)st->queue_length,
	    "dropped", (json_int_t)st->queue_dropped,
	    "user_dropped", (json_int_t)st->queue_user_dropped) : json_null();

	json_object_set_new(o, "version", json_string(SLUICE_VERSION));
	json_object_set_new(o, "start_time_us",
	    json_integer(m != NULL ? m->start_us : 0));
	json_object_set_new(o, "sandboxes", json_integer((json_int_t)st->sandboxes));
	json_object_set_new(o, "flows", flows);
	flows = NULL;
	json_object_set_new(o, "dns", json_pack("{s:o, s:I, s:I, s:I, s:I, s:I, "
	    "s:I, s:I}",
	    "queries", dnsq, "bindings", (json_int_t)st->bindings,
	    "forwarded", (json_int_t)st->dns.forwarded,
	    "cache_hits", (json_int_t)st->dns.cache_hits,
	    "cache_entries", (json_int_t)st->dns.cache_entries,
	    "upstream_timeouts", (json_int_t)st->dns.upstream_timeouts,
	    "malformed", (json_int_t)st->dns.malformed,
	    "dropped", (json_int_t)st->dns.dropped));
	dnsq = NULL;
	json_object_set_new(o, "verdict_latency", lat);
	json_object_set_new(o, "queue", json_pack("{s:I, s:I, s:I, s:o}",
	    "packets", (json_int_t)st->packets,
	    "errors", (json_int_t)st->packet_errors,
	    "held_flows", (json_int_t)st->held_flows,
	    "kernel", kernel));
	json_object_set_new(o, "log", json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, "
	    "s:I, s:I, s:I, s:I, s:I, s:b}", "queued", (json_int_t)st->log.queued,
	    "written", (json_int_t)st->log.written,
	    "lost", (json_int_t)st->log.rejected,
	    "write_errors", (json_int_t)st->log.write_errors,
	    "backlog", (json_int_t)st->log.depth,
	    "backlog_bytes", (json_int_t)st->log.depth_bytes,
	    "capacity", (json_int_t)st->log.capacity,
	    "capacity_bytes", (json_int_t)st->log.capacity_bytes,
	    "denied_unlogged", (json_int_t)st->denied_unlogged,
	    "db_bytes", (json_int_t)st->log.db_bytes,
	    "wal_bytes", (json_int_t)st->log.wal_bytes,
	    "writable", st->log_writable));
	json_object_set_new(o, "rate_limited", json_pack("{s:I, s:I}",
	    "flows", (json_int_t)st->limited_flows,
	    "dns", (json_int_t)st->limited_dns));
	/* any member that failed to build is missing: say so */
	if (json_object_size(o) != 9)
		goto fail;
	return o;
fail:
	json_decref(o);
	json_decref(flows);
	json_decref(by_reason);
	json_decref(dnsq);
	json_decref(bl);
	return NULL;
}

/* ---- HTTP -------------------------------------------------------------- */

/* "METHOD SP TARGET SP HTTP/1.x" from line (len bytes, no line end). */
static int
request_line(const char *line, size_t len, bool *head_only)
{
	const char *sp1, *sp2, *target, *version;
	size_t tlen, mlen;

	if ((sp1 = memchr(line, ' ', len)) == NULL)
		return 400;
	mlen = (size_t)(sp1 - line);
	target = sp1 + 1;
	if ((sp2 = memchr(target, ' ', len - mlen - 1)) == NULL)
		return 400;
	tlen = (size_t)(sp2 - target);
	version = sp2 + 1;
	if (mlen == 0 || tlen == 0 || target[0] == ' ' ||
	    memchr(version, ' ', len - mlen - tlen - 2) != NULL)
		return 400;
	if ((size_t)(line + len - version) != 8 ||
	    memcmp(version, "HTTP/", 5) != 0)
		return 400;
	if (memcmp(version, "HTTP/1.0", 8) != 0 &&
	    memcmp(version, "HTTP/1.1", 8) != 0)
		return 505;
	if (mlen == 4 && memcmp(line, "HEAD", 4) == 0)
		*head_only = true;
	else if (!(mlen == 3 && memcmp(line, "GET", 3) == 0))
		return 405;
	/* a query string is ignored, as Prometheus' own exporters do */
	if ((tlen == 8 || (tlen > 8 && target[8] == '?')) &&
	    memcmp(target, "/metrics", 8) == 0)
		return 200;
	return 404;
}

int
gw_metrics_http_parse(const char *buf, size_t len, bool *head_only)
{
	const char *eol = NULL, *end = NULL;
	size_t i, linelen;

	*head_only = false;
	/*
	 * A request head is printable ASCII with line ends; anything else
	 * (TLS, binary noise) is refused at once rather than waited for.
	 * The head ends at an empty line (CRLF or bare LF, RFC 9112 2.2).
	 */
	for (i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)buf[i];

		if (ch == '\n') {
			if (eol == NULL)
				eol = buf + i;
			if ((i >= 1 && buf[i - 1] == '\n') ||
			    (i >= 2 && buf[i - 1] == '\r' && buf[i - 2] == '\n')) {
				end = buf + i;
				break;
			}
		} else if (ch != '\r' && ch != '\t' && (ch < 0x20 || ch > 0x7e))
			return 400;
	}
	if (eol == buf || (eol == buf + 1 && buf[0] == '\r'))
		return 400;	/* no request line */
	if (end == NULL)
		return len >= GW_METRICS_REQ_MAX ? 431 : 0;
	linelen = (size_t)(eol - buf);
	if (linelen > 0 && buf[linelen - 1] == '\r')
		linelen--;
	return request_line(buf, linelen, head_only);
}

static const char *
status_text(int status)
{
	switch (status) {
	case 200: return "OK";
	case 400: return "Bad Request";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 431: return "Request Header Fields Too Large";
	case 503: return "Service Unavailable";
	case 505: return "HTTP Version Not Supported";
	default: return "Internal Server Error";
	}
}

/* A whole response in a new buffer; NULL when out of memory. */
static char *
response(int status, bool head_only, const char *body, size_t bodylen,
    size_t *outlen)
{
	char head[512], *out;
	int n;

	n = snprintf(head, sizeof(head), "HTTP/1.1 %d %s\r\n"
	    "Content-Type: %s\r\nContent-Length: %zu\r\n%s"
	    "Cache-Control: no-store\r\nConnection: close\r\n\r\n",
	    status, status_text(status),
	    status == 200 ? GW_METRICS_CONTENT_TYPE : "text/plain; charset=utf-8",
	    bodylen, status == 405 ? "Allow: GET, HEAD\r\n" : "");
	if (n < 0 || (size_t)n >= sizeof(head))
		return NULL;
	if (head_only)
		bodylen = 0;
	if ((out = malloc((size_t)n + bodylen)) == NULL)
		return NULL;
	memcpy(out, head, (size_t)n);
	if (bodylen > 0)
		memcpy(out + n, body, bodylen);
	*outlen = (size_t)n + bodylen;
	return out;
}

/* The exposition's text: rendered now, or the last one when scrapes come
 * faster than GW_METRICS_RENDERS a second. NULL: out of memory. */
static const char *
scrape_text(struct gw *gw, size_t *len, uint64_t now_ms)
{
	static const struct gw_rate rate = { GW_METRICS_RENDERS,
	    GW_METRICS_RENDERS };
	struct gw_metrics *m = gw->metrics;
	struct gw_metrics_state st;
	char *text;

	if (!gw_bucket_take(&m->renders, &rate, now_ms) && m->last != NULL) {
		m->served_again++;
		*len = m->lastlen;
		return m->last;
	}
	gw_metrics_gather(gw, &st);
	if ((text = gw_metrics_text(m, &st, len)) == NULL)
		return NULL;
	free(m->last);
	m->last = text;
	m->lastlen = *len;
	return text;
}

static void
client_answer(struct gw *gw, struct client *c, int status, bool head_only,
    uint64_t now_ms)
{
	char msg[64];
	const char *text = NULL;
	size_t len;

	if (status == 200 &&
	    (text = scrape_text(gw, &len, now_ms)) == NULL)
		status = 500;
	if (text == NULL) {
		len = (size_t)snprintf(msg, sizeof(msg), "%d %s\n", status,
		    status_text(status));
		c->out = response(status, head_only, msg, len, &c->outlen);
	} else
		c->out = response(status, head_only, text, len, &c->outlen);
	c->outoff = 0;
	if (c->out == NULL)
		client_close(c);
}

static void
client_io(struct gw *gw, struct client *c, short revents, uint64_t now_ms)
{
	ssize_t n;
	bool head_only;
	int status;

	if (c->draining) {
		char sink[512];

		n = read(c->fd, sink, sizeof(sink));
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
			client_close(c);
		return;
	}
	if (c->out != NULL) {
		if (!(revents & (POLLOUT | POLLERR | POLLHUP)))
			return;
		n = send(c->fd, c->out + c->outoff, c->outlen - c->outoff,
		    MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0 && errno != EAGAIN && errno != EINTR) {
			client_close(c);
			return;
		}
		if (n > 0)
			c->outoff += (size_t)n;
		if (c->outoff == c->outlen) {
			/* all said: close our side, read theirs to its end */
			shutdown(c->fd, SHUT_WR);
			c->draining = true;
		}
		return;
	}
	if (!(revents & (POLLIN | POLLERR | POLLHUP)))
		return;
	n = read(c->fd, c->in + c->inlen, sizeof(c->in) - c->inlen);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		client_close(c);
		return;
	}
	c->inlen += (size_t)n;
	if ((status = gw_metrics_http_parse(c->in, c->inlen, &head_only)) != 0)
		client_answer(gw, c, status, head_only, now_ms);
}

static void
accept_clients(struct gw_metrics *m, int lfd, uint64_t now_ms)
{
	static const char busy[] = "HTTP/1.1 503 Service Unavailable\r\n"
	    "Content-Length: 0\r\nRetry-After: 1\r\nConnection: close\r\n\r\n";
	struct client *c;
	size_t i, k;
	int fd;

	for (k = 0; k < ACCEPT_BURST; k++) {
		fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (fd == -1)
			return;
		c = NULL;
		for (i = 0; i < GW_METRICS_CLIENTS; i++)
			if (m->clients[i].fd == -1) {
				c = &m->clients[i];
				break;
			}
		if (c == NULL) {
			/* a fresh socket's buffer takes this without waiting */
			(void)send(fd, busy, sizeof(busy) - 1,
			    MSG_NOSIGNAL | MSG_DONTWAIT);
			close(fd);
			continue;
		}
		c->fd = fd;
		c->inlen = 0;
		c->deadline = now_ms + GW_METRICS_IO_MS;
	}
}

size_t
gw_metrics_pollfds(const struct gw_metrics *m, struct pollfd *pfd, size_t max)
{
	size_t i, n = 0;

	if (m == NULL)
		return 0;
	for (i = 0; i < 2 && n < max; i++) {
		if (m->listen_fd[i] == -1)
			continue;
		pfd[n++] = (struct pollfd){ .fd = m->listen_fd[i],
		    .events = POLLIN };
	}
	for (i = 0; i < GW_METRICS_CLIENTS && n < max; i++) {
		const struct client *c = &m->clients[i];

		if (c->fd == -1)
			continue;
		pfd[n++] = (struct pollfd){ .fd = c->fd,
		    .events = c->out != NULL && !c->draining ? POLLOUT : POLLIN };
	}
	return n;
}

void
gw_metrics_process(struct gw *gw, struct gw_metrics *m,
    const struct pollfd *pfd, size_t n, uint64_t now_ms)
{
	size_t i, k;

	if (m == NULL)
		return;
	for (k = 0; k < n; k++) {
		if (pfd[k].revents == 0)
			continue;
		if (pfd[k].fd == m->listen_fd[0] || pfd[k].fd == m->listen_fd[1]) {
			accept_clients(m, pfd[k].fd, now_ms);
			continue;
		}
		for (i = 0; i < GW_METRICS_CLIENTS; i++)
			if (m->clients[i].fd == pfd[k].fd) {
				client_io(gw, &m->clients[i], pfd[k].revents,
				    now_ms);
				break;
			}
	}
	for (i = 0; i < GW_METRICS_CLIENTS; i++)
		if (m->clients[i].fd != -1 && m->clients[i].deadline <= now_ms)
			client_close(&m->clients[i]);
}

int
gw_metrics_timeout(const struct gw_metrics *m, uint64_t now_ms)
{
	uint64_t next = UINT64_MAX;
	size_t i;

	if (m == NULL)
		return -1;
	for (i = 0; i < GW_METRICS_CLIENTS; i++)
		if (m->clients[i].fd != -1 && m->clients[i].deadline < next)
			next = m->clients[i].deadline;
	if (next == UINT64_MAX)
		return -1;
	return next <= now_ms ? 0 : (int)(next - now_ms);
}

/* ---- listeners --------------------------------------------------------- */

int
gw_metrics_parse_listen(const char *s, struct sockaddr_storage *ss,
    socklen_t *sslen, char *err, size_t errlen)
{
	char host[INET6_ADDRSTRLEN + 2];
	const char *colon, *port_s;
	unsigned long port;
	char *end;
	size_t hlen;

	memset(ss, 0, sizeof(*ss));
	if (s[0] == '[') {
		const char *close_b = strchr(s, ']');

		if (close_b == NULL || close_b[1] != ':')
			goto bad;
		hlen = (size_t)(close_b - s - 1);
		if (hlen == 0 || hlen >= sizeof(host))
			goto bad;
		memcpy(host, s + 1, hlen);
		port_s = close_b + 2;
	} else {
		if ((colon = strrchr(s, ':')) == NULL ||
		    strchr(s, ':') != colon)
			goto bad;
		hlen = (size_t)(colon - s);
		if (hlen == 0 || hlen >= sizeof(host))
			goto bad;
		memcpy(host, s, hlen);
		port_s = colon + 1;
	}
	host[hlen] = '\0';
	errno = 0;
	port = strtoul(port_s, &end, 10);
	if (port_s[0] < '0' || port_s[0] > '9' || *end != '\0' || errno != 0 ||
	    port == 0 || port > 65535) {
		snprintf(err, errlen, "%s: the port must be a number in 1..65535",
		    s);
		return -1;
	}
	if (s[0] == '[') {
		struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;

		if (inet_pton(AF_INET6, host, &a6->sin6_addr) != 1)
			goto bad;
		if (IN6_IS_ADDR_UNSPECIFIED(&a6->sin6_addr))
			goto wildcard;
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons((uint16_t)port);
		*sslen = sizeof(*a6);
	} else {
		struct sockaddr_in *a4 = (struct sockaddr_in *)ss;

		if (inet_pton(AF_INET, host, &a4->sin_addr) != 1)
			goto bad;
		if (a4->sin_addr.s_addr == htonl(INADDR_ANY))
			goto wildcard;
		a4->sin_family = AF_INET;
		a4->sin_port = htons((uint16_t)port);
		*sslen = sizeof(*a4);
	}
	return 0;
wildcard:
	snprintf(err, errlen, "%s: a wildcard address would serve the metrics "
	    "on every interface; name one address (127.0.0.1, ::1, or a "
	    "management interface's)", s);
	return -1;
bad:
	snprintf(err, errlen, "%s: not IPV4:PORT or [IPV6]:PORT (numeric)", s);
	return -1;
}

static int
listen_unix(struct gw_metrics *m, const char *path, char *err, size_t errlen)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	char dir[PATH_MAX], *slash;
	int fd;

	if (strlen(path) >= sizeof(sun.sun_path)) {
		snprintf(err, errlen, "%s: path too long", path);
		return -1;
	}
	snprintf(dir, sizeof(dir), "%s", path);
	if ((slash = strrchr(dir, '/')) != NULL && slash != dir) {
		*slash = '\0';
		if (gw_dir_trusted("--metrics-socket", dir, 0750, err,
		    errlen) == -1)
			return -1;
		if (mkdir(dir, 0750) == -1 && errno != EEXIST) {
			snprintf(err, errlen, "%s: %s", dir, strerror(errno));
			return -1;
		}
	}
	if ((fd = gw_unix_listen(path, 16, err, errlen)) == -1)
		return -1;
	/*
	 * Read-only counters with no names or addresses in them: whoever
	 * may enter the directory may read them (the directory's mode is the
	 * access control, e.g. a scraper's group on it).
	 */
	if (chmod(path, 0666) == -1) {
		snprintf(err, errlen, "%s: chmod: %s", path, strerror(errno));
		close(fd);
		unlink(path);
		return -1;
	}
	if ((m->unix_path = strdup(path)) == NULL) {
		snprintf(err, errlen, "out of memory");
		close(fd);
		unlink(path);
		return -1;
	}
	m->listen_fd[0] = fd;
	return 0;
}

static int
listen_tcp(struct gw_metrics *m, const char *addr, char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	socklen_t sslen;
	int fd, on = 1;

	if (gw_metrics_parse_listen(addr, &ss, &sslen, err, errlen) == -1)
		return -1;
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
	    0);
	if (fd == -1) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		return -1;
	}
	/* a restarted daemon binds at once, TIME_WAIT or not */
	(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
	if (ss.ss_family == AF_INET6)
		(void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof(on));
	if (bind(fd, (struct sockaddr *)&ss, sslen) == -1 ||
	    listen(fd, 16) == -1) {
		snprintf(err, errlen, "%s: %s", addr, strerror(errno));
		close(fd);
		return -1;
	}
	m->listen_fd[1] = fd;
	return 0;
}

int
gw_metrics_listen(struct gw_metrics *m, const char *unix_path,
    const char *tcp_addr, char *err, size_t errlen)
{
	if (unix_path != NULL && listen_unix(m, unix_path, err, errlen) == -1)
		return -1;
	if (tcp_addr != NULL && listen_tcp(m, tcp_addr, err, errlen) == -1)
		return -1;
	return 0;
}

struct gw_metrics *
gw_metrics_open(struct gw *gw, char *err, size_t errlen)
{
	struct gw_metrics *m;

	if ((m = gw_metrics_new()) == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	if (gw_metrics_listen(m, gw->cfg.metrics_socket, gw->cfg.metrics_listen,
	    err, errlen) == -1) {
		gw_metrics_free(m);
		return NULL;
	}
	/*
	 * The queue's counters are those of the gateway namespace. Without
	 * them the kernel's drops are left out of the exposition, nothing
	 * more, so a failure to open the table is not fatal.
	 */
	if (gw->gw_nsfd != -1) {
		if (gw_netns_enter(gw->gw_nsfd) == -1) {
			snprintf(err, errlen, "setns: %s", strerror(errno));
			gw_metrics_free(m);
			return NULL;
		}
		(void)gw_metrics_open_queue_table(m, NULL);
		if (gw_netns_enter(gw->home_nsfd) == -1) {
			snprintf(err, errlen, "setns back: %s", strerror(errno));
			gw_metrics_free(m);
			return NULL;
		}
	}
	return m;
}
