/* store_int.h: what the queue (store.c) and the SQLite side (db.c) share. */
#ifndef SLUICE_STORE_INT_H
#define SLUICE_STORE_INT_H

#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

enum store_rec_kind {
	STORE_REC_FLOW,
	STORE_REC_DNS,
	STORE_REC_SANDBOX,
	STORE_REC_POLICY,
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
 * Writes n records, ring[(head + i) % cap], in one transaction. 0 when
 * committed; -1 when rolled back (the records are untouched and may be
 * written again).
 */
int store_db_write(struct store_db *d, const struct store_rec *ring,
    size_t cap, size_t head, size_t n);

/* NULL-safe. */
void store_db_close(struct store_db *d);

#endif
