/* store.h: the audit log in SQLite, written by one thread in batches. */
#ifndef SLUICE_STORE_H
#define SLUICE_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define STORE_SCHEMA_VERSION	7
/* Records waiting for the writer. A slot fits the largest record
 * (store_flow, about 1.6 KiB), so the default ring is about 25 MiB. */
#define STORE_QUEUE_DEFAULT	16384
#define STORE_BATCH_DEFAULT	4096	/* records per transaction at most */
#define STORE_FLUSH_MS_DEFAULT	50	/* a partial batch waits this long at most */
/* The WAL file is cut back to this when it starts over (it grows past it
 * while a reader's snapshot holds the checkpoint back). */
#define STORE_WAL_LIMIT_DEFAULT	(64 << 20)

struct store;

/* One attempted connection. Strings are copied into the queue. */
struct store_flow {
	int64_t		ts_us;		/* wall clock, unix microseconds */
	char		sandbox[64];	/* "" if the ingress was no sandbox's */
	const char	*proto;		/* static: "tcp", "udp", "icmp", ... */
	char		src_ip[46];
	int		src_port;	/* -1: none (icmp) */
	char		dst_ip[46];
	int		dst_port;	/* -1: none */
	const char	*verdict;	/* static: "allow", "deny", "audit" */
	const char	*reason;	/* static, from the fixed vocabulary */
	char		rule[300];	/* the policy entry that matched, or "" */
	char		policy_sha256[65];	/* "" if no policy applied */
	char		name[254];	/* the DNS binding's name, or "" */
	/* what the first flight said (issue 4); "" when not inspected */
	char		sni[256];
	char		tls_version[12];	/* "TLS1.3" ... */
	char		alpn[64];
	char		http_method[16];
	char		http_host[256];
	char		http_path[128];
	char		app[48];		/* nDPI's protocol name */
};

/* One DNS query a sandbox sent to the gateway's resolver. */
struct store_dns {
	int64_t		ts_us;
	char		sandbox[64];	/* "" if no sandbox's */
	const char	*proto;		/* static: "udp", "tcp" */
	char		src_ip[46];
	int		src_port;
	char		qname[254];	/* as asked ("" for a message without one) */
	char		qtype[16];	/* "A", "AAAA", "TYPE65"... ("" if none) */
	const char	*rcode;		/* static: "NOERROR", "NXDOMAIN", ... or
					 * "" when no answer was sent */
	const char	*verdict;	/* static: "allow", "deny", "audit" */
	const char	*reason;	/* static, from the DNS vocabulary */
	char		rule[300];	/* the allowedDomains/deniedDomains entry */
	char		answers[400];	/* addresses answered, comma-separated */
	char		stripped[200];	/* addresses removed from the answer */
	char		policy_sha256[65];
};

struct store_stats {
	uint64_t	queued;		/* accepted by store_put_* */
	uint64_t	written;	/* committed to the database */
	uint64_t	rejected;	/* refused by store_put_* (queue full) */
	uint64_t	write_errors;	/* failed transactions, or attempts to
					 * reopen a damaged file (retried) */
	uint64_t	batches;
	size_t		depth;		/* records waiting now */
	size_t		depth_bytes;	/* the queue's bytes they take */
	size_t		capacity;	/* records the queue holds at most */
	size_t		capacity_bytes;	/* its bytes: long records fill it
					 * before its count does */
	uint64_t	lost_persisted;	/* refusals (any reason) counted in
					 * lost_records so far */
	uint64_t	purged;		/* rows deleted by retention */
	uint64_t	reopened;	/* times the file at the path was found
					 * removed or replaced, and a new one
					 * opened there */
	int64_t		db_bytes;	/* the database file's size now */
	int64_t		wal_bytes;	/* its -wal file's (0: none) */
};

struct store_opts {
	size_t		queue_cap;	/* 0: STORE_QUEUE_DEFAULT */
	size_t		batch_max;	/* 0: STORE_BATCH_DEFAULT */
	unsigned	flush_ms;	/* 0: STORE_FLUSH_MS_DEFAULT */
	unsigned	retain_days;	/* 0: keep everything; else rows older
					 * than this are purged, in small
					 * batches, by the writer */
	int64_t		wal_limit;	/* bytes; 0: STORE_WAL_LIMIT_DEFAULT */
};

/*
 * A flow ended (conntrack destroyed its entry): the newest row of that
 * 5-tuple (as the sandbox sent it, before NAT) that has no end yet and
 * was logged at or before ts_us gets its counters, end time and state;
 * failing that (a row logged late, a clock set back), the newest row
 * with no end. A sandbox that reconnects on the same 5-tuple at once has
 * its new row logged before the old end is read, and the old end must
 * not close it. That needs ts_us from the kernel's own clock of the end
 * (conntrack's timestamps), not the time it was read.
 */
struct store_flow_end {
	int64_t		ts_us;		/* when it ended */
	const char	*proto;		/* static: "tcp", "udp", "icmp" */
	char		src_ip[46];
	int		src_port;	/* -1: none */
	char		dst_ip[46];
	int		dst_port;
	uint64_t	bytes_out;	/* original direction: sandbox -> world */
	uint64_t	packets_out;
	uint64_t	bytes_in;	/* reply direction */
	uint64_t	packets_in;
	const char	*end_state;	/* static: "closed", "reset", "timeout",
					 * "time_wait", ... */
};

/*
 * Opens (creating if needed, with its parent directory) the database at
 * path, sets WAL mode, creates or migrates the schema, and starts the
 * writer thread. opts may be NULL. Returns NULL on failure with a message
 * in err.
 */
struct store *store_open(const char *path, const struct store_opts *opts,
    char *err, size_t errlen);

/*
 * Queue a record for the writer. Never blocks on the disk: the only wait
 * is a short mutex hold. Return 0, or -1 with errno = ENOBUFS when the
 * queue is full (the caller must then fail closed), EINVAL for a bad
 * record, or ENOMEM. Every refusal is counted, by kind and reason, and
 * the counts are written to the table lost_records with the next batch.
 */
int store_put_flow(struct store *s, const struct store_flow *f);

/* Queue a flow's end; as store_put_flow. */
int store_put_flow_end(struct store *s, const struct store_flow_end *e);

/*
 * false while the database cannot be written (the last transaction failed:
 * disk full, read-only, locked, corrupt) until a later one succeeds; true
 * from store_open on. The writer retries by itself. The gateway denies new
 * flows meanwhile (log_unavailable); what it queues is written once the
 * fault clears. A damaged file (SQLITE_CORRUPT, SQLITE_NOTADB) is closed
 * and the path opened again on each retry: once the operator moves it
 * aside (with its -wal and -shm), a new database is made there.
 */
bool store_writable(struct store *s);

/* Queue a DNS query record; as store_put_flow. */
int store_put_dns(struct store *s, const struct store_dns *d);

/*
 * Counts n DNS queries that never became records because the kernel
 * dropped them before sluiced read them (the resolver's socket was
 * full): lost_records kind "dns", reason "kernel_dropped", written as
 * refusals are. NULL-safe.
 */
void store_count_dns_dropped(struct store *s, uint64_t n);

/*
 * The same, kind "flow", for n copies of SYNs and first flights the kernel
 * let through (--kernel-syn, --kernel-sni) and dropped before sluiced
 * read them (its socket was full): each a connection that may have no
 * row of its own. NULL-safe.
 */
void store_count_flows_dropped(struct store *s, uint64_t n);

/*
 * A summary record (a rate limit's: one row standing for n attempts) was
 * refused by store_put_flow (flow) or store_put_dns (!flow) with errno
 * err: the refusal counted one; this counts the other n - 1 under the
 * same reason. NULL-safe.
 */
void store_count_refused(struct store *s, bool flow, int err, uint64_t n);

/* A sandbox was created (event "add") or deleted ("del"). */
int store_put_sandbox(struct store *s, int64_t ts_us, const char *name,
    const char *event, const char *ifname, const char *addr);

/* A sandbox got a policy version; text is copied. */
int store_put_policy(struct store *s, int64_t ts_us, const char *sandbox,
    const char *sha256, const char *text);

/* true while the queue has room for n more records. */
bool store_has_room(struct store *s, size_t n);

/*
 * true while the database is writable and the queue is at least half
 * full: the writer is behind (a checkpoint, a share of the CPU it did not
 * get), not stopped. Producers that can wait should, so that the backlog
 * drains instead of overflowing into refused records.
 */
bool store_behind(struct store *s);

void store_stats(struct store *s, struct store_stats *out);

/* Waits until everything queued so far is committed (or timeout_ms). */
int store_flush(struct store *s, unsigned timeout_ms);

/* Flushes what it can (for up to 2 s), stops the writer, closes.
 * NULL-safe. Returns the records still queued, not written: lost, with no
 * database to count them in, so the caller says so in its own log. */
size_t store_close(struct store *s);

/* Changes store_opts.retain_days of an open store (a reload); the next
 * purge round starts as soon as the writer is idle. */
void store_set_retain_days(struct store *s, unsigned days);

/* Wall clock in unix microseconds, for records. */
int64_t store_now_us(void);

/* ---- reading the log back (reader.c) --------------------------------- */

struct store_reader;

/* A read-only connection to the database at path (its own, apart from the
 * writer's). NULL with a message in err. */
struct store_reader *store_reader_open(const char *path, char *err,
    size_t errlen);

/*
 * What the open TCP connection src_ip:src_port -> dst_ip:dst_port
 * presented in its first flight, from its newest row that let it through
 * and has no end yet: its SNI, else its HTTP Host, else "" (into name).
 * 1 found, 0 no such row (not written yet, or none), -1 the database could
 * not be read.
 */
int store_reader_presented(struct store_reader *r, const char *src_ip,
    int src_port, const char *dst_ip, int dst_port, char *name, size_t len);

void store_reader_close(struct store_reader *r);	/* NULL-safe */

#endif
