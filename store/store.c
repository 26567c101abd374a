/* store.c: the audit log's bounded queue and the one thread that drains it. */
#include <sys/stat.h>

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sqlite3.h>

#include "store/store.h"
#include "store/store_int.h"

#define BACKOFF_FIRST_MS	100
#define BACKOFF_MAX_MS		2000
#define CLOSE_FLUSH_MS		2000

/*
 * Retention: a purge round starts at most this often, and deletes in
 * chunks of PURGE_CHUNK rows, one transaction each, so the write lock is
 * never held for long and batches go in between the chunks.
 */
#define PURGE_INTERVAL_MS	10000
#define PURGE_CHUNK		1000
#define UNPACK_MAX		512	/* records unpacked at once: a batch
					 * of batch_max is written in pieces */
#define DAY_US			(86400LL * 1000000)

/*
 * The ring is bytes: each record packed (below) behind an 8-byte header.
 * It has room for a queue of records of ENT_AVG bytes and, whatever the
 * queue's length, for 64 of the largest: a burst of long names fills it
 * sooner and is refused like any full queue. Only what gets used is ever
 * touched, and the ring starts over at its top whenever it empties.
 */
#define ENT_AVG			384
#define ENT_BIG			64

/*
 * The ring holds records from head to tail; the writer unpacks a batch
 * from the head and only drops it from the ring once committed, so a
 * failed transaction loses nothing and needs no copy to put back.
 * Producers only ever write free bytes, which the writer never reads.
 *
 * A refused record is counted in lost, and every transaction the writer
 * commits also writes what lost gained since the last one (lost_done)
 * into lost_records: refusals are never silent, even across restarts.
 */
struct store {
	char			*path;	/* to open it again after SQLITE_CORRUPT */
	struct store_db		*db;	/* the writer's; NULL until reopened */
	atomic_uint_fast64_t	 reopens;	/* store_stats' reopened */
	bool			 db_known;	/* db_dev, db_ino: the file it has */
	dev_t			 db_dev;
	ino_t			 db_ino;
	pthread_t		 writer;
	pthread_mutex_t		 lock;
	pthread_cond_t		 wake;	/* writer: records, a flush, or stop */
	pthread_cond_t		 done;	/* flushers: a batch was committed */
	unsigned char		*ring;
	size_t			 bytes;	/* its size */
	size_t			 head;	/* offset of the oldest entry */
	size_t			 tail;	/* offset of the next one */
	size_t			 used;	/* bytes in entries and pads */
	size_t			 cap;	/* records at most */
	size_t			 count;	/* in the ring, including in flight */
	struct store_rec	*batch;	/* the writer's, unpacked: unpack_max */
	size_t			 batch_max;	/* records a transaction at most */
	size_t			 unpack_max;	/* ... unpacked at once */
	unsigned		 flush_ms;
	uint64_t		 flush_target;	/* write now until written >= */
	uint64_t		 flush_lost;	/* ... and lost_persisted >= */
	bool			 kick;		/* a flush asked since the last
						 * failed write: retry now */
	int			 stop;
	struct store_stats	 st;	/* depth is count, filled on read */
	struct store_lost	 lost;	/* refused, all told */
	struct store_lost	 lost_done;	/* of those, in lost_records */
	uint64_t		 lost_total;	/* the sum of lost */
	atomic_bool		 writable;	/* read without the lock */
	/* Retention. Only the writer changes these (purge_round without
	 * the lock), but for store_set_purge_interval. */
	int64_t			 retain_us;	/* 0: keep everything */
	int64_t			 wal_limit;	/* bytes */
	unsigned		 purge_ms;
	struct timespec		 purge_at;	/* the next round, monotonic */
	int			 purging;	/* a round is under way */
	enum store_purge_table	 purge_table;	/* its next table */
	int64_t			 purge_round;	/* rows deleted in it so far */
	int			 batch_next;	/* records before purge chunks */
};

/*
 * A packed record: every char array as a 2-byte length and its bytes,
 * everything between them (numbers, static strings) as it lies in the
 * struct. A DNS query's row packs into about 220 of its 1,400 bytes.
 */
struct field {
	uint16_t	off;
	uint16_t	size;
};

#define FIELD(type, m)	{ offsetof(type, m), sizeof(((type *)0)->m) }

/* Each struct's char arrays, in the order they lie in it. */
static const struct field flow_fields[] = {
	FIELD(struct store_flow, sandbox), FIELD(struct store_flow, src_ip),
	FIELD(struct store_flow, dst_ip), FIELD(struct store_flow, rule),
	FIELD(struct store_flow, policy_sha256),
	FIELD(struct store_flow, name), FIELD(struct store_flow, sni),
	FIELD(struct store_flow, tls_version),
	FIELD(struct store_flow, alpn), FIELD(struct store_flow, http_method),
	FIELD(struct store_flow, http_host),
	FIELD(struct store_flow, http_path), FIELD(struct store_flow, app),
};
static const struct field dns_fields[] = {
	FIELD(struct store_dns, sandbox), FIELD(struct store_dns, src_ip),
	FIELD(struct store_dns, qname), FIELD(struct store_dns, qtype),
	FIELD(struct store_dns, rule), FIELD(struct store_dns, answers),
	FIELD(struct store_dns, stripped),
	FIELD(struct store_dns, policy_sha256),
};
static const struct field sandbox_fields[] = {
	FIELD(struct store_sandbox_rec, name),
	FIELD(struct store_sandbox_rec, ifname),
	FIELD(struct store_sandbox_rec, addr),
};
static const struct field policy_fields[] = {
	FIELD(struct store_policy_rec, sandbox),
	FIELD(struct store_policy_rec, sha256),
};
static const struct field flow_end_fields[] = {
	FIELD(struct store_flow_end, src_ip),
	FIELD(struct store_flow_end, dst_ip),
};

#define NELEM(a)	(sizeof(a) / sizeof((a)[0]))

static const struct layout {
	const struct field	*f;
	size_t			 n;
	size_t			 size;	/* of the struct */
} layouts[STORE_REC_KINDS] = {
	[STORE_REC_FLOW] = { flow_fields, NELEM(flow_fields),
	    sizeof(struct store_flow) },
	[STORE_REC_DNS] = { dns_fields, NELEM(dns_fields),
	    sizeof(struct store_dns) },
	[STORE_REC_SANDBOX] = { sandbox_fields, NELEM(sandbox_fields),
	    sizeof(struct store_sandbox_rec) },
	[STORE_REC_POLICY] = { policy_fields, NELEM(policy_fields),
	    sizeof(struct store_policy_rec) },
	[STORE_REC_FLOW_END] = { flow_end_fields, NELEM(flow_end_fields),
	    sizeof(struct store_flow_end) },
};

/* An entry's header; size counts the header and is a multiple of 8. */
struct ent {
	uint32_t	size;
	uint32_t	kind;	/* enum store_rec_kind, or ENT_PAD */
};

#define ENT_PAD		UINT32_MAX
#define ALIGN8(n)	(((n) + 7) & ~(size_t)7)
/* The largest entry: a length may take 2 bytes more than its array. */
#define ENT_MAX		ALIGN8(sizeof(struct ent) + sizeof(struct store_rec) + \
			    2 * NELEM(flow_fields))

/*
 * The tables above must list each struct's arrays in order, inside it:
 * pack and unpack copy what lies between them. Checked at open, so that
 * a field added out of order fails every test at once.
 */
static bool
layouts_ok(void)
{
	size_t k, i, at;

	for (k = 0; k < STORE_REC_KINDS; k++)
		for (i = 0, at = 0; i < layouts[k].n; i++) {
			if (layouts[k].f[i].off < at ||
			    layouts[k].f[i].off + layouts[k].f[i].size >
			    layouts[k].size)
				return false;
			at = layouts[k].f[i].off + layouts[k].f[i].size;
		}
	return true;
}

/* Packs src into dst; the length, or -1 when an array has no NUL. */
static ssize_t
pack(unsigned char *dst, const void *src, const struct layout *l)
{
	const unsigned char *p = src;
	size_t at = 0, len, i, o = 0;
	uint16_t n;

	for (i = 0; i < l->n; i++) {
		memcpy(dst + o, p + at, l->f[i].off - at);
		o += l->f[i].off - at;
		if ((len = strnlen((const char *)p + l->f[i].off,
		    l->f[i].size)) == l->f[i].size)
			return -1;
		n = (uint16_t)len;
		memcpy(dst + o, &n, sizeof(n));
		memcpy(dst + o + sizeof(n), p + l->f[i].off, len);
		o += sizeof(n) + len;
		at = l->f[i].off + l->f[i].size;
	}
	memcpy(dst + o, p + at, l->size - at);
	return (ssize_t)(o + l->size - at);
}

/* The inverse of pack: every array gets its string and a NUL. */
static void
unpack(void *dst, const unsigned char *src, const struct layout *l)
{
	unsigned char *p = dst;
	size_t at = 0, i, o = 0;
	uint16_t n;

	for (i = 0; i < l->n; i++) {
		memcpy(p + at, src + o, l->f[i].off - at);
		o += l->f[i].off - at;
		memcpy(&n, src + o, sizeof(n));
		memcpy(p + l->f[i].off, src + o + sizeof(n), n);
		p[l->f[i].off + n] = '\0';
		o += sizeof(n) + n;
		at = l->f[i].off + l->f[i].size;
	}
	memcpy(p + at, src + o, l->size - at);
}

static struct ent *
ent_at(const struct store *s, size_t off)
{
	return (struct ent *)(void *)(s->ring + off);
}

/* The offset after the entry at off; the ring's top after its last. */
static size_t
ent_next(const struct store *s, size_t off)
{
	off += ent_at(s, off)->size;
	if (off == s->bytes)
		off = 0;
	return off;
}

/* The offset of the first record at or after off (skips the pad). */
static size_t
ent_rec(const struct store *s, size_t off)
{
	return ent_at(s, off)->kind == ENT_PAD ? 0 : off;
}

/* Unpacks the record at off into r. */
static void
ent_get(const struct store *s, size_t off, struct store_rec *r)
{
	const struct ent *e = ent_at(s, off);

	r->kind = (enum store_rec_kind)e->kind;
	unpack(&r->u, s->ring + off + sizeof(*e), &layouts[e->kind]);
}

/*
 * Where an entry of need bytes goes, or SIZE_MAX when the ring has no
 * room for it; pads the end when it has to start over at the top. An
 * entry never wraps, so the writer reads each in one piece. Lock held.
 */
static size_t
reserve(struct store *s, size_t need)
{
	struct ent *pad;

	if (s->used == 0)
		s->head = s->tail = 0;
	if (s->tail >= s->head && s->used < s->bytes) {
		if (need <= s->bytes - s->tail)
			return s->tail;
		if (need > s->head)
			return SIZE_MAX;
		pad = ent_at(s, s->tail);
		pad->size = (uint32_t)(s->bytes - s->tail);
		pad->kind = ENT_PAD;
		s->used += pad->size;
		return 0;
	}
	return s->used < s->bytes && need <= s->head - s->tail ?
	    s->tail : SIZE_MAX;
}

static void
deadline_after(struct timespec *ts, unsigned ms)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

/* Drops n records from the head, and the pad before one; lock held. */
static void
release(struct store *s, size_t n)
{
	struct store_rec r;
	struct ent *e;

	while (n-- > 0) {
		e = ent_at(s, s->head);
		if (e->kind == ENT_PAD) {
			s->used -= e->size;
			s->head = 0;
			e = ent_at(s, 0);
		}
		if (e->kind == STORE_REC_POLICY) {
			ent_get(s, s->head, &r);
			free(r.u.policy.text);
		}
		s->used -= e->size;
		s->head = ent_next(s, s->head);
		s->count--;
	}
	if (s->count == 0)
		s->head = s->tail = s->used = 0;
}

static bool
lost_pending(const struct store *s)
{
	return s->st.lost_persisted != s->lost_total;
}

/* Work for a batch: records, or refusals not yet in lost_records. */
static bool
has_records(const struct store *s)
{
	return s->count > 0 || lost_pending(s);
}

/* Something is waiting to be written right away rather than batched up. */
static bool
urgent(const struct store *s)
{
	return s->count >= s->batch_max || s->st.written < s->flush_target ||
	    s->st.lost_persisted < s->flush_lost;
}

static bool
purge_due(const struct store *s)
{
	struct timespec now;

	if (s->retain_us == 0)
		return false;
	if (s->purging)
		return true;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return now.tv_sec > s->purge_at.tv_sec ||
	    (now.tv_sec == s->purge_at.tv_sec &&
	    now.tv_nsec >= s->purge_at.tv_nsec);
}

/*
 * Purge chunks and batches take turns. While the database fails, records
 * go first: the purge only runs (and so is retried) on an empty queue.
 */
static bool
purge_next(const struct store *s)
{
	return purge_due(s) && (!has_records(s) ||
	    (!s->batch_next && atomic_load(&s->writable)));
}

/* What the next transaction writes to lost_records; lock held. */
static void
take_lost(const struct store *s, struct store_lost *out)
{
	int k, r;

	for (k = 0; k < STORE_REC_KINDS; k++)
		for (r = 0; r < STORE_LOST_REASONS; r++)
			out->n[k][r] = s->lost.n[k][r] - s->lost_done.n[k][r];
}

/* A transaction ended; lock held. */
static void
settle(struct store *s, bool committed, const struct store_lost *lost)
{
	int k, r;

	if (!committed) {
		s->st.write_errors++;
		atomic_store(&s->writable, false);
		return;
	}
	for (k = 0; k < STORE_REC_KINDS; k++)
		for (r = 0; r < STORE_LOST_REASONS; r++) {
			s->lost_done.n[k][r] += lost->n[k][r];
			s->st.lost_persisted += lost->n[k][r];
		}
	atomic_store(&s->writable, true);
	pthread_cond_broadcast(&s->done);
}

/* A connection to the database, with this store's settings, and the file
 * it has (db_same). */
static struct store_db *
db_open(struct store *s, const char *path, char *err, size_t errlen)
{
	struct store_db *d;
	struct stat st;

	if ((d = store_db_open(path, err, errlen)) != NULL) {
		store_db_wal_limit(d, s->wal_limit);
		s->db_known = stat(path, &st) == 0;
		s->db_dev = st.st_dev;
		s->db_ino = st.st_ino;
	}
	return d;
}

/*
 * Whether the path still names the file the connection has. Removed or
 * replaced under it (a cleanup, a rotation by hand), the connection went
 * on committing into a file no one could read again, writable all along,
 * with every row from then on gone at the stop (found by review,
 * 2026-12-03). Asked before each transaction; then a new file at the path
 * takes the rows, as at a first start.
 */
static bool
db_same(const struct store *s)
{
	struct stat st;

	if (!s->db_known)
		return true;
	return stat(s->path, &st) == 0 && st.st_dev == s->db_dev &&
	    st.st_ino == s->db_ino;
}

/*
 * The writer's connection, opened again when a damaged file made it drop
 * the last one: until the operator moves the file aside or repairs it
 * this fails, and the records wait in the ring. Writer only, unlocked.
 */
static struct store_db *
writer_db(struct store *s)
{
	char err[256];

	if (s->db != NULL && !db_same(s)) {
		store_db_close(s->db);
		s->db = NULL;
		atomic_fetch_add(&s->reopens, 1);
	}
	if (s->db == NULL)
		s->db = db_open(s, s->path, err, sizeof(err));
	return s->db;
}

/* Writer only, unlocked, after a failed transaction. */
static void
drop_if_broken(struct store *s)
{
	if (s->db != NULL && store_db_broken(s->db)) {
		store_db_close(s->db);
		s->db = NULL;
	}
}

/*
 * Unpacks n records (at most unpack_max) from head into s->batch; returns
 * the offset after them. Writer only, unlocked: producers never write the
 * bytes of records in the ring.
 */
static size_t
unpack_batch(struct store *s, size_t head, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		head = ent_rec(s, head);
		ent_get(s, head, &s->batch[i]);
		head = ent_next(s, head);
	}
	return head;
}

/*
 * One transaction of records from the head of the ring, unpacked and
 * written batch_now at a time; lock held. It takes what is waiting, up to
 * batch_max: a writer that has fallen behind catches up in longer
 * transactions, each of which costs less a row. With many sandboxes a
 * row's inserts land on as many pages of the indexes by sandbox and by
 * tuple, and every page a transaction changes is written to the WAL and
 * again at the checkpoint, however few of its rows changed (storebench,
 * 1,000 sandboxes, 160,000 rows in the log, at 12,000 rows/s: 52-63 us of
 * the writer's CPU a row at most 512 a transaction, 34-39 at 4,096).
 */
static int
write_batch(struct store *s)
{
	struct store_lost lost;
	size_t head, n, done, k;
	bool ok;
	int rc = -1;

	head = s->head;
	n = s->count < s->batch_max ? s->count : s->batch_max;
	take_lost(s, &lost);
	pthread_mutex_unlock(&s->lock);
	if (writer_db(s) != NULL) {
		if (store_db_begin(s->db) == 0) {
			for (ok = true, done = 0; ok && done < n; done += k) {
				k = n - done < s->unpack_max ? n - done :
				    s->unpack_max;
				head = unpack_batch(s, head, k);
				ok = store_db_put(s->db, s->batch, k) == 0;
			}
			rc = store_db_end(s->db, ok, &lost, store_now_us());
		}
		if (rc == -1)
			drop_if_broken(s);
	}
	pthread_mutex_lock(&s->lock);
	if (rc == 0) {
		release(s, n);
		s->st.written += n;
		s->st.batches++;
	}
	settle(s, rc == 0, &lost);
	return rc;
}

/*
 * One chunk of a purge round: up to PURGE_CHUNK rows of one table, then
 * the same table again or the next. After the last table the WAL is
 * checkpointed, so that it starts over from its top and does not grow;
 * the pages freed in the database are reused by later inserts. Lock held.
 */
static int
purge_step(struct store *s)
{
	struct store_lost lost;
	enum store_purge_table table = s->purge_table;
	int64_t now, deleted = -1;
	int64_t retain_us = s->retain_us;	/* read under the lock: a
						 * reload may change it */
	bool last;

	take_lost(s, &lost);
	pthread_mutex_unlock(&s->lock);
	now = store_now_us();
	if (writer_db(s) != NULL &&
	    (deleted = store_db_purge(s->db, table, now - retain_us,
	    PURGE_CHUNK, &lost, now)) == -1)
		drop_if_broken(s);
	last = deleted >= 0 && deleted < PURGE_CHUNK &&
	    table == STORE_PURGE_TABLES - 1;
	if (deleted > 0)
		s->purge_round += deleted;
	if (last && s->purge_round > 0)
		store_db_checkpoint(s->db);
	pthread_mutex_lock(&s->lock);
	settle(s, deleted >= 0, &lost);
	if (deleted == -1)
		return -1;
	s->st.purged += (uint64_t)deleted;
	s->batch_next = 1;
	if (last) {
		s->purging = 0;
		s->purge_table = 0;
		s->purge_round = 0;
		deadline_after(&s->purge_at, s->purge_ms);
	} else {
		s->purging = 1;
		if (deleted < PURGE_CHUNK)
			s->purge_table = table + 1;
	}
	return 0;
}

static void *
writer_main(void *arg)
{
	struct store *s = arg;
	struct timespec until;
	unsigned backoff = 0;
	int rc;

	pthread_mutex_lock(&s->lock);
	for (;;) {
		while (!s->stop && !has_records(s) && !purge_due(s)) {
			if (s->retain_us > 0)
				pthread_cond_timedwait(&s->wake, &s->lock,
				    &s->purge_at);
			else
				pthread_cond_wait(&s->wake, &s->lock);
		}
		if (s->stop)
			break;
		s->kick = false;	/* a flush asked from here on counts */
		if (purge_next(s))
			rc = purge_step(s);
		else {
			/* A partial batch waits up to flush_ms for company. */
			if (!urgent(s)) {
				deadline_after(&until, s->flush_ms);
				while (!s->stop && !urgent(s) &&
				    pthread_cond_timedwait(&s->wake, &s->lock,
				    &until) != ETIMEDOUT)
					;
				if (s->stop)
					break;
			}
			rc = write_batch(s);
			s->batch_next = 0;
		}
		if (rc == 0) {
			backoff = 0;
			continue;
		}
		/*
		 * Locked, full, read-only, I/O error, damaged: keep the batch
		 * and try again later; store_writable() says false until a
		 * transaction commits. Meanwhile the queue fills and producers
		 * are refused (and counted), which is what makes the gateway
		 * fail closed.
		 */
		backoff = backoff == 0 ? BACKOFF_FIRST_MS :
		    backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
		/* a flush (a stop's among them) cuts the wait short: the
		 * database may be writable again, and a stop that came in
		 * the middle of a 2 s wait left the writer no time before it
		 * gave up (found by review, 2026-12-03) */
		deadline_after(&until, backoff);
		while (!s->stop && !s->kick && pthread_cond_timedwait(&s->wake,
		    &s->lock, &until) != ETIMEDOUT)
			;
		if (s->stop)
			break;
	}
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

static void
store_free(struct store *s)
{
	if (s->ring != NULL) {
		release(s, s->count);
		free(s->ring);
	}
	free(s->batch);
	store_db_close(s->db);
	free(s->path);
	pthread_cond_destroy(&s->done);
	pthread_cond_destroy(&s->wake);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

/* Starts the writer with all signals blocked: they are the main loop's. */
static int
start_writer(struct store *s)
{
	sigset_t all, old;
	int rc;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&s->writer, NULL, writer_main, s);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc == 0)
		pthread_setname_np(s->writer, "sluice-store");
	return rc;
}

/*
 * SQLite counts every allocation under a global mutex unless told not to
 * before it initialises; nothing here reads those counts, and the writer
 * paid a tenth of its time for them. Too late (SQLITE_MISUSE) when
 * something in the process used SQLite first: then it stays as it was.
 */
static void
sqlite_setup(void)
{
	(void)sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}

static void
open_err(char *err, size_t errlen, const char *path, int e)
{
	if (err != NULL && errlen > 0)
		snprintf(err, errlen, "%s: %s", path, strerror(e));
}

struct store *
store_open(const char *path, const struct store_opts *opts, char *err,
    size_t errlen)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	struct store *s;
	pthread_condattr_t ca;
	int rc;

	pthread_once(&once, sqlite_setup);
	if (!layouts_ok()) {
		open_err(err, errlen, path ? path : "(null)", EINVAL);
		return NULL;
	}
	if ((s = calloc(1, sizeof(*s))) == NULL) {
		open_err(err, errlen, path ? path : "(null)", errno);
		return NULL;
	}
	s->cap = opts && opts->queue_cap ? opts->queue_cap :
	    STORE_QUEUE_DEFAULT;
	s->batch_max = opts && opts->batch_max ? opts->batch_max :
	    STORE_BATCH_DEFAULT;
	if (s->batch_max > s->cap)
		s->batch_max = s->cap;
	s->unpack_max = s->batch_max < UNPACK_MAX ? s->batch_max : UNPACK_MAX;
	s->flush_ms = opts && opts->flush_ms ? opts->flush_ms :
	    STORE_FLUSH_MS_DEFAULT;
	if (opts != NULL && opts->retain_days > 0)
		s->retain_us = opts->retain_days > INT64_MAX / DAY_US ?
		    INT64_MAX / DAY_US * DAY_US : opts->retain_days * DAY_US;
	s->purge_ms = PURGE_INTERVAL_MS;
	s->wal_limit = opts && opts->wal_limit > 0 ? opts->wal_limit :
	    STORE_WAL_LIMIT_DEFAULT;
	/* The first round as soon as the writer is idle: the daemon may
	 * have been down for a while. */
	clock_gettime(CLOCK_MONOTONIC, &s->purge_at);
	atomic_init(&s->writable, true);

	/* Timed waits on CLOCK_MONOTONIC: the wall clock may jump. */
	pthread_mutex_init(&s->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->wake, &ca);
	pthread_cond_init(&s->done, &ca);
	pthread_condattr_destroy(&ca);

	if ((s->db = db_open(s, path, err, errlen)) == NULL)
		goto fail;
	if ((s->path = strdup(path)) == NULL) {
		open_err(err, errlen, path, errno);
		goto fail;
	}
	s->bytes = ALIGN8(s->cap * ENT_AVG + ENT_BIG * ENT_MAX);
	if ((s->ring = malloc(s->bytes)) == NULL ||
	    (s->batch = calloc(s->unpack_max, sizeof(*s->batch))) == NULL) {
		open_err(err, errlen, path, errno);
		goto fail;
	}
	if ((rc = start_writer(s)) != 0) {
		open_err(err, errlen, path, rc);
		goto fail;
	}
	return s;

fail:
	store_free(s);
	return NULL;
}

/*
 * Counts a refused record for lost_records; lock held. A writer idle on
 * an empty queue is woken: it has a row to write.
 */
static void
count_lost(struct store *s, enum store_rec_kind kind,
    enum store_lost_reason why)
{
	s->lost.n[kind][why]++;
	s->lost_total++;
	if (s->count == 0)
		pthread_cond_signal(&s->wake);
}

static void
count_n(struct store *s, enum store_rec_kind kind, enum store_lost_reason why,
    uint64_t n)
{
	if (s == NULL || n == 0)
		return;
	pthread_mutex_lock(&s->lock);
	s->lost.n[kind][why] += n;
	s->lost_total += n;
	if (s->count == 0)
		pthread_cond_signal(&s->wake);
	pthread_mutex_unlock(&s->lock);
}

void
store_count_dns_dropped(struct store *s, uint64_t n)
{
	count_n(s, STORE_REC_DNS, STORE_LOST_KERNEL_DROPPED, n);
}

void
store_count_flows_dropped(struct store *s, uint64_t n)
{
	count_n(s, STORE_REC_FLOW, STORE_LOST_KERNEL_DROPPED, n);
}

void
store_count_refused(struct store *s, bool flow, int err, uint64_t n)
{
	enum store_lost_reason why;

	if (n < 2)
		return;
	switch (err) {
	case ENOBUFS:	why = STORE_LOST_QUEUE_FULL; break;
	case ENOMEM:	why = STORE_LOST_NO_MEMORY; break;
	default:	why = STORE_LOST_INVALID; break;
	}
	count_n(s, flow ? STORE_REC_FLOW : STORE_REC_DNS, why, n - 1);
}

/* Refuses a record with errno e; counted when there is a store to count. */
static int
refuse(struct store *s, enum store_rec_kind kind, enum store_lost_reason why,
    int e)
{
	if (s != NULL) {
		pthread_mutex_lock(&s->lock);
		count_lost(s, kind, why);
		pthread_mutex_unlock(&s->lock);
	}
	errno = e;
	return -1;
}

/*
 * Packs rec, a record of the kind given, into the ring; on -1 the caller
 * still owns what it points to. EINVAL when one of its strings does not
 * end inside its array: the log is never truncated.
 */
static int
enqueue(struct store *s, enum store_rec_kind kind, const void *rec)
{
	union {
		struct ent	e;
		unsigned char	b[ENT_MAX];
	} u;
	ssize_t len;
	size_t need, at;

	if ((len = pack(u.b + sizeof(u.e), rec, &layouts[kind])) == -1)
		return refuse(s, kind, STORE_LOST_INVALID, EINVAL);
	need = ALIGN8(sizeof(u.e) + (size_t)len);
	u.e.size = (uint32_t)need;
	u.e.kind = kind;
	pthread_mutex_lock(&s->lock);
	if (s->count == s->cap || (at = reserve(s, need)) == SIZE_MAX) {
		s->st.rejected++;
		count_lost(s, kind, STORE_LOST_QUEUE_FULL);
		pthread_mutex_unlock(&s->lock);
		errno = ENOBUFS;
		return -1;
	}
	memcpy(s->ring + at, u.b, need);
	s->tail = at + need == s->bytes ? 0 : at + need;
	s->used += need;
	s->count++;
	s->st.queued++;
	/* The writer sleeps on an empty queue or waits for a full batch. */
	if (s->count == 1 || s->count == s->batch_max)
		pthread_cond_signal(&s->wake);
	pthread_mutex_unlock(&s->lock);
	return 0;
}

/* Also copies s into dst; refuses rather than truncate the log. */
static int
copy_str(char *dst, size_t size, const char *src)
{
	size_t len;

	if (src == NULL)
		src = "";
	if ((len = strlen(src)) >= size)
		return -1;
	memcpy(dst, src, len + 1);
	return 0;
}

/*
 * The verdict column's CHECK is enforced here, not by the writer: its
 * connection skips CHECKs (db.c), so this is what keeps every row in it.
 */
static const char *
known_verdict(const char *v)
{
	static const char *const verdicts[] = { "allow", "deny", "audit" };
	size_t i;

	if (v == NULL)
		return NULL;
	for (i = 0; i < sizeof(verdicts) / sizeof(verdicts[0]); i++)
		if (strcmp(v, verdicts[i]) == 0)
			return verdicts[i];
	return NULL;
}

int
store_put_flow(struct store *s, const struct store_flow *f)
{
	struct store_flow r;
	const char *verdict;

	if (s == NULL || f == NULL || f->proto == NULL || f->reason == NULL ||
	    (verdict = known_verdict(f->verdict)) == NULL ||
	    f->src_port < -1 || f->src_port > 65535 ||
	    f->dst_port < -1 || f->dst_port > 65535)
		return refuse(s, STORE_REC_FLOW, STORE_LOST_INVALID, EINVAL);
	r = *f;
	r.verdict = verdict;
	return enqueue(s, STORE_REC_FLOW, &r);
}

int
store_put_dns(struct store *s, const struct store_dns *d)
{
	struct store_dns r;
	const char *verdict;

	if (s == NULL || d == NULL || d->proto == NULL || d->rcode == NULL ||
	    d->reason == NULL ||
	    (verdict = known_verdict(d->verdict)) == NULL ||
	    d->src_port < -1 || d->src_port > 65535)
		return refuse(s, STORE_REC_DNS, STORE_LOST_INVALID, EINVAL);
	r = *d;
	r.verdict = verdict;
	return enqueue(s, STORE_REC_DNS, &r);
}

int
store_put_flow_end(struct store *s, const struct store_flow_end *e)
{
	if (s == NULL || e == NULL || e->proto == NULL ||
	    e->end_state == NULL ||
	    e->src_port < -1 || e->src_port > 65535 ||
	    e->dst_port < -1 || e->dst_port > 65535)
		return refuse(s, STORE_REC_FLOW_END, STORE_LOST_INVALID,
		    EINVAL);
	return enqueue(s, STORE_REC_FLOW_END, e);
}

int
store_put_sandbox(struct store *s, int64_t ts_us, const char *name,
    const char *event, const char *ifname, const char *addr)
{
	struct store_sandbox_rec r;

	memset(&r, 0, sizeof(r));
	r.ts_us = ts_us;
	if (s == NULL || name == NULL || *name == '\0' || event == NULL ||
	    copy_str(r.name, sizeof(r.name), name) == -1 ||
	    copy_str(r.ifname, sizeof(r.ifname), ifname) == -1 ||
	    copy_str(r.addr, sizeof(r.addr), addr) == -1)
		return refuse(s, STORE_REC_SANDBOX, STORE_LOST_INVALID, EINVAL);
	if (strcmp(event, "add") == 0)
		r.deleted = 0;
	else if (strcmp(event, "del") == 0)
		r.deleted = 1;
	else
		return refuse(s, STORE_REC_SANDBOX, STORE_LOST_INVALID, EINVAL);
	return enqueue(s, STORE_REC_SANDBOX, &r);
}

int
store_put_policy(struct store *s, int64_t ts_us, const char *sandbox,
    const char *sha256, const char *text)
{
	struct store_policy_rec r;

	memset(&r, 0, sizeof(r));
	r.ts_us = ts_us;
	if (s == NULL || sandbox == NULL || sha256 == NULL || text == NULL ||
	    copy_str(r.sandbox, sizeof(r.sandbox), sandbox) == -1 ||
	    copy_str(r.sha256, sizeof(r.sha256), sha256) == -1)
		return refuse(s, STORE_REC_POLICY, STORE_LOST_INVALID, EINVAL);
	/* Allocated outside the lock; the ring owns it once queued. */
	if ((r.text = strdup(text)) == NULL)
		return refuse(s, STORE_REC_POLICY, STORE_LOST_NO_MEMORY,
		    ENOMEM);
	if (enqueue(s, STORE_REC_POLICY, &r) == -1) {
		free(r.text);
		errno = ENOBUFS;
		return -1;
	}
	return 0;
}

bool
store_writable(struct store *s)
{
	return s != NULL && atomic_load(&s->writable);
}

bool
store_has_room(struct store *s, size_t n)
{
	bool room;

	if (s == NULL)
		return false;
	pthread_mutex_lock(&s->lock);
	/* (n + 1): the end's pad wastes less than one entry */
	room = n == 0 || (s->cap - s->count >= n &&
	    s->bytes - s->used >= (n + 1) * ENT_MAX);
	pthread_mutex_unlock(&s->lock);
	return room;
}

bool
store_behind(struct store *s)
{
	bool behind;

	if (s == NULL || !store_writable(s))
		return false;
	pthread_mutex_lock(&s->lock);
	behind = s->count >= s->cap / 2 || s->used >= s->bytes / 2;
	pthread_mutex_unlock(&s->lock);
	return behind;
}

/*
 * The sizes of the database and its WAL on disk: a reader that keeps a
 * snapshot holds the checkpoints back and the WAL grows meanwhile, which
 * the records' counts do not show.
 */
static void
file_sizes(const char *path, int64_t *db, int64_t *wal)
{
	char p[PATH_MAX + 8];
	struct stat sb;

	*db = stat(path, &sb) == 0 ? (int64_t)sb.st_size : 0;
	snprintf(p, sizeof(p), "%s-wal", path);
	*wal = stat(p, &sb) == 0 ? (int64_t)sb.st_size : 0;
}

void
store_stats(struct store *s, struct store_stats *out)
{
	if (s == NULL) {
		memset(out, 0, sizeof(*out));
		return;
	}
	pthread_mutex_lock(&s->lock);
	*out = s->st;
	out->depth = s->count;
	out->depth_bytes = s->used;
	out->reopened = atomic_load(&s->reopens);
	out->capacity = s->cap;
	out->capacity_bytes = s->bytes;
	pthread_mutex_unlock(&s->lock);
	file_sizes(s->path, &out->db_bytes, &out->wal_bytes);
}

int
store_flush(struct store *s, unsigned timeout_ms)
{
	struct timespec until;
	uint64_t target, lost;
	int ret = 0;

	if (s == NULL) {
		errno = EINVAL;
		return -1;
	}
	deadline_after(&until, timeout_ms);
	pthread_mutex_lock(&s->lock);
	/* Records are written in order, so "written" reaching the count
	 * queued so far means all of those are in; so for refusals. */
	target = s->st.queued;
	lost = s->lost_total;
	if (s->flush_target < target || s->flush_lost < lost) {
		if (s->flush_target < target)
			s->flush_target = target;
		if (s->flush_lost < lost)
			s->flush_lost = lost;
		s->kick = true;
		pthread_cond_signal(&s->wake);
	}
	while (s->st.written < target || s->st.lost_persisted < lost)
		if (pthread_cond_timedwait(&s->done, &s->lock, &until) ==
		    ETIMEDOUT)
			break;
	if (s->st.written < target || s->st.lost_persisted < lost) {
		errno = ETIMEDOUT;
		ret = -1;
	}
	pthread_mutex_unlock(&s->lock);
	return ret;
}

size_t
store_close(struct store *s)
{
	size_t left;

	if (s == NULL)
		return 0;
	(void)store_flush(s, CLOSE_FLUSH_MS);
	pthread_mutex_lock(&s->lock);
	s->stop = 1;
	pthread_cond_signal(&s->wake);
	pthread_mutex_unlock(&s->lock);
	pthread_join(s->writer, NULL);
	left = s->count;
	store_free(s);
	return left;
}

void
store_set_purge_interval(struct store *s, unsigned ms)
{
	pthread_mutex_lock(&s->lock);
	s->purge_ms = ms;
	deadline_after(&s->purge_at, ms);
	pthread_cond_signal(&s->wake);
	pthread_mutex_unlock(&s->lock);
}

int64_t
store_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

void
store_set_retain_days(struct store *s, unsigned days)
{
	pthread_mutex_lock(&s->lock);
	s->retain_us = days > INT64_MAX / DAY_US ? INT64_MAX / DAY_US * DAY_US :
	    days * DAY_US;
	/* the next round as soon as the writer is idle, as at open */
	clock_gettime(CLOCK_MONOTONIC, &s->purge_at);
	pthread_cond_signal(&s->wake);
	pthread_mutex_unlock(&s->lock);
}
