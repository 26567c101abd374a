/* store_int.h: what the queue (store.c) and the SQLite side (db.c) share. */
#ifndef SLUICE_STORE_INT_H
#define SLUICE_STORE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

/* Also the kind column of lost_records, by db.c's table of names. */
enum store_rec_kind {
	STORE_REC_FLOW,
	STORE_REC_DNS,
	STORE_REC_SANDBOX,
	STORE_REC_POLICY,
	STORE_REC_FLOW_END,
	STORE_REC_KINDS
};

/* Why store_put_* refused a record: the reason column of lost_records. */
enum store_lost_reason {
	STORE_LOST_QUEUE_FULL,	/* ENOBUFS */
	STORE_LOST_INVALID,	/* EINVAL: the caller's record was bad */
	STORE_LOST_NO_MEMORY,	/* ENOMEM: a policy's text not copied */
	STORE_LOST_KERNEL_DROPPED,	/* never reached sluiced: the kernel
					 * dropped it (store_count_dns_dropped) */
	STORE_LOST_REASONS
};

/* Refused records not yet counted in lost_records, by kind and reason. */
struct store_lost {
	uint64_t	n[STORE_REC_KINDS][STORE_LOST_REASONS];
};

/* The tables the retention purge deletes from, in this order. */
enum store_purge_table {
	STORE_PURGE_FLOWS,
	STORE_PURGE_DNS,
	STORE_PURGE_LOST,
	STORE_PURGE_TABLES
};

struct store_sandbox_rec {
	int64_t		ts_us;
	int		deleted;	/* 0: event "add", 1: "del" */
	char		name[64];	/* as store_flow.sandbox */
	char		ifname[32];	/* IFNAMSIZ is 16; room to spare */
	char		addr[64];	/* an IPv6 address with a prefix fits */
};

struct store_policy_rec {
	int64_t		ts_us;
	char		sandbox[64];
	char		sha256[65];
	char		*text;		/* malloc'ed, owned by the queue slot */
};

/*
 * One queue slot. Fixed size, so the ring is one allocation; store_flow
 * is the largest member and sets the size of every slot.
 */
struct store_rec {
	enum store_rec_kind	kind;
	union {
		struct store_flow	 flow;
		struct store_dns	 dns;
		struct store_sandbox_rec sandbox;
		struct store_policy_rec	 policy;
		struct store_flow_end	 flow_end;
	} u;
};

struct store_db;

/*
 * Opens or creates the database at path (and its parent directory), sets
 * the connection up, creates the schema if the file is new. NULL on
 * failure with "path: message" in err. The handle may then be used by one
 * thread at a time.
 */
struct store_db *store_db_open(const char *path, char *err, size_t errlen);

/*
 * Writes the n records recs[0..n) (n may be 0), and one lost_records row
 * stamped now_us for each nonzero count in lost, in one transaction. 0
 * when committed; -1 when rolled back (the records are untouched and may
 * be written again).
 */
int store_db_write(struct store_db *d, const struct store_rec *recs,
    size_t n, const struct store_lost *lost, int64_t now_us);

/*
 * The same transaction in parts, for a batch unpacked a piece at a time:
 * store_db_begin opens it (0, or -1 with nothing open); store_db_put
 * writes n more records into it (0, or -1: the rest is pointless);
 * store_db_end writes lost and commits when ok, else rolls back (0 when
 * committed, -1 when rolled back).
 */
int store_db_begin(struct store_db *d);
int store_db_put(struct store_db *d, const struct store_rec *recs,
    size_t n);
int store_db_end(struct store_db *d, bool ok, const struct store_lost *lost,
    int64_t now_us);

/*
 * Deletes up to limit rows older than cutoff_us (ts < cutoff_us) from one
 * table and writes lost as store_db_write does, in one transaction.
 * Returns the number of rows deleted, or -1 when rolled back.
 */
int64_t store_db_purge(struct store_db *d, enum store_purge_table table,
    int64_t cutoff_us, int limit, const struct store_lost *lost,
    int64_t now_us);

/* PRAGMA wal_checkpoint(PASSIVE): lets the WAL start over from its top. */
void store_db_checkpoint(struct store_db *d);
void store_db_wal_limit(struct store_db *d, int64_t bytes);

/*
 * true when the last failure says the file itself is bad (SQLITE_CORRUPT,
 * SQLITE_NOTADB): the connection's cache may hide it, so the writer closes
 * it and opens the path again, which also picks up a replaced file.
 */
bool store_db_broken(const struct store_db *d);

/* NULL-safe. */
void store_db_close(struct store_db *d);

/* For tests: the interval between purge rounds (PURGE_INTERVAL_MS). */
void store_set_purge_interval(struct store *s, unsigned ms);

#endif
