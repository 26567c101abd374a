/* store.c: the audit log's bounded queue and the one thread that drains it. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store/store.h"
#include "store/store_int.h"

#define BACKOFF_FIRST_MS	100
#define BACKOFF_MAX_MS		2000
#define CLOSE_FLUSH_MS		2000

/*
 * The ring is allocated whole and every slot gets used as it wraps, so
 * this is what a default queue costs, always.
 */
#define RING_MEMORY_MAX		(32U << 20)
_Static_assert(sizeof(struct store_rec) * STORE_QUEUE_DEFAULT <=
    RING_MEMORY_MAX, "the default queue needs more than 32 MiB");

/*
 * The ring holds records from tail to head; the writer writes a batch
 * from the head in place and only drops it from the ring once committed,
 * so a failed transaction loses nothing and needs no copy to put back.
 * Producers only ever write free slots, which the writer never reads.
 */
struct store {
	struct store_db		*db;
	pthread_t		 writer;
	pthread_mutex_t		 lock;
	pthread_cond_t		 wake;	/* writer: records, a flush, or stop */
	pthread_cond_t		 done;	/* flushers: a batch was committed */
	struct store_rec	*ring;
	size_t			 cap;
	size_t			 head;
	size_t			 count;	/* in the ring, including in flight */
	size_t			 batch_max;
	unsigned		 flush_ms;
	uint64_t		 flush_target;	/* write now until written >= */
	int			 stop;
	struct store_stats	 st;	/* depth is count, filled on read */
};

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

static void
release(struct store *s, size_t n)
{
	struct store_rec *r;

	while (n-- > 0) {
		r = &s->ring[s->head];
		if (r->kind == STORE_REC_POLICY) {
			free(r->u.policy.text);
			r->u.policy.text = NULL;
		}
		s->head = (s->head + 1) % s->cap;
		s->count--;
	}
}

/* Something is waiting to be written right away rather than batched up. */
static int
urgent(const struct store *s)
{
	return s->count >= s->batch_max || s->st.written < s->flush_target;
}

static void *
writer_main(void *arg)
{
	struct store *s = arg;
	struct timespec until;
	unsigned backoff = 0;
	size_t head, n;
	int rc;

	pthread_mutex_lock(&s->lock);
	for (;;) {
		while (!s->stop && s->count == 0)
			pthread_cond_wait(&s->wake, &s->lock);
		/* A partial batch waits up to flush_ms for company. */
		if (!s->stop && !urgent(s)) {
			deadline_after(&until, s->flush_ms);
			while (!s->stop && !urgent(s) &&
			    pthread_cond_timedwait(&s->wake, &s->lock,
			    &until) != ETIMEDOUT)
				;
		}
		if (s->stop)
			break;

		head = s->head;
		n = s->count < s->batch_max ? s->count : s->batch_max;
		pthread_mutex_unlock(&s->lock);
		rc = store_db_write(s->db, s->ring, s->cap, head, n);
		pthread_mutex_lock(&s->lock);

		if (rc == 0) {
			release(s, n);
			s->st.written += n;
			s->st.batches++;
			backoff = 0;
			pthread_cond_broadcast(&s->done);
			continue;
		}
		/*
		 * Locked, full, read-only, I/O error: keep the batch and try
		 * again later. Meanwhile the queue fills and producers are
		 * refused, which is what makes the gateway fail closed.
		 */
		s->st.write_errors++;
		backoff = backoff == 0 ? BACKOFF_FIRST_MS :
		    backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
		deadline_after(&until, backoff);
		while (!s->stop && pthread_cond_timedwait(&s->wake, &s->lock,
		    &until) != ETIMEDOUT)
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
	store_db_close(s->db);
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
	struct store *s;
	pthread_condattr_t ca;
	int rc;

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
	s->flush_ms = opts && opts->flush_ms ? opts->flush_ms :
	    STORE_FLUSH_MS_DEFAULT;

	/* Timed waits on CLOCK_MONOTONIC: the wall clock may jump. */
	pthread_mutex_init(&s->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->wake, &ca);
	pthread_cond_init(&s->done, &ca);
	pthread_condattr_destroy(&ca);

	if ((s->db = store_db_open(path, err, errlen)) == NULL)
		goto fail;
	if ((s->ring = calloc(s->cap, sizeof(*s->ring))) == NULL) {
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

/* Copies r into the ring; on -1 the caller still owns what r points to. */
static int
enqueue(struct store *s, const struct store_rec *r)
{
	pthread_mutex_lock(&s->lock);
	if (s->count == s->cap) {
		s->st.rejected++;
		pthread_mutex_unlock(&s->lock);
		errno = ENOBUFS;
		return -1;
	}
	s->ring[(s->head + s->count) % s->cap] = *r;
	s->count++;
	s->st.queued++;
	/* The writer sleeps on an empty queue or waits for a full batch. */
	if (s->count == 1 || s->count == s->batch_max)
		pthread_cond_signal(&s->wake);
	pthread_mutex_unlock(&s->lock);
	return 0;
}

/* A field the caller filled must end inside its array. */
static int
fits(const char *str, size_t size)
{
	return strnlen(str, size) < size;
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

/* The verdict column has a CHECK: a bad record would jam the queue for good. */
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
	struct store_rec r;
	const char *verdict;

	if (s == NULL || f == NULL || f->proto == NULL || f->reason == NULL ||
	    (verdict = known_verdict(f->verdict)) == NULL ||
	    f->src_port < -1 || f->src_port > 65535 ||
	    f->dst_port < -1 || f->dst_port > 65535 ||
	    !fits(f->sandbox, sizeof(f->sandbox)) ||
	    !fits(f->src_ip, sizeof(f->src_ip)) ||
	    !fits(f->dst_ip, sizeof(f->dst_ip)) ||
	    !fits(f->rule, sizeof(f->rule)) ||
	    !fits(f->policy_sha256, sizeof(f->policy_sha256)) ||
	    !fits(f->name, sizeof(f->name)) ||
	    !fits(f->sni, sizeof(f->sni)) ||
	    !fits(f->tls_version, sizeof(f->tls_version)) ||
	    !fits(f->alpn, sizeof(f->alpn)) ||
	    !fits(f->http_method, sizeof(f->http_method)) ||
	    !fits(f->http_host, sizeof(f->http_host)) ||
	    !fits(f->http_path, sizeof(f->http_path)) ||
	    !fits(f->app, sizeof(f->app))) {
		errno = EINVAL;
		return -1;
	}
	r.kind = STORE_REC_FLOW;
	r.u.flow = *f;
	r.u.flow.verdict = verdict;
	return enqueue(s, &r);
}

int
store_put_dns(struct store *s, const struct store_dns *d)
{
	struct store_rec r;
	const char *verdict;

	if (s == NULL || d == NULL || d->proto == NULL || d->rcode == NULL ||
	    d->reason == NULL ||
	    (verdict = known_verdict(d->verdict)) == NULL ||
	    d->src_port < -1 || d->src_port > 65535 ||
	    !fits(d->sandbox, sizeof(d->sandbox)) ||
	    !fits(d->src_ip, sizeof(d->src_ip)) ||
	    !fits(d->qname, sizeof(d->qname)) ||
	    !fits(d->qtype, sizeof(d->qtype)) ||
	    !fits(d->rule, sizeof(d->rule)) ||
	    !fits(d->answers, sizeof(d->answers)) ||
	    !fits(d->stripped, sizeof(d->stripped)) ||
	    !fits(d->policy_sha256, sizeof(d->policy_sha256))) {
		errno = EINVAL;
		return -1;
	}
	r.kind = STORE_REC_DNS;
	r.u.dns = *d;
	r.u.dns.verdict = verdict;
	return enqueue(s, &r);
}

int
store_put_sandbox(struct store *s, int64_t ts_us, const char *name,
    const char *event, const char *ifname, const char *addr)
{
	struct store_rec r;

	memset(&r, 0, sizeof(r));
	r.kind = STORE_REC_SANDBOX;
	r.u.sandbox.ts_us = ts_us;
	if (s == NULL || name == NULL || *name == '\0' || event == NULL ||
	    copy_str(r.u.sandbox.name, sizeof(r.u.sandbox.name), name) == -1 ||
	    copy_str(r.u.sandbox.ifname, sizeof(r.u.sandbox.ifname),
	    ifname) == -1 ||
	    copy_str(r.u.sandbox.addr, sizeof(r.u.sandbox.addr), addr) == -1) {
		errno = EINVAL;
		return -1;
	}
	if (strcmp(event, "add") == 0)
		r.u.sandbox.deleted = 0;
	else if (strcmp(event, "del") == 0)
		r.u.sandbox.deleted = 1;
	else {
		errno = EINVAL;
		return -1;
	}
	return enqueue(s, &r);
}

int
store_put_policy(struct store *s, int64_t ts_us, const char *sandbox,
    const char *sha256, const char *text)
{
	struct store_rec r;

	memset(&r, 0, sizeof(r));
	r.kind = STORE_REC_POLICY;
	r.u.policy.ts_us = ts_us;
	if (s == NULL || sandbox == NULL || sha256 == NULL || text == NULL ||
	    copy_str(r.u.policy.sandbox, sizeof(r.u.policy.sandbox),
	    sandbox) == -1 ||
	    copy_str(r.u.policy.sha256, sizeof(r.u.policy.sha256),
	    sha256) == -1) {
		errno = EINVAL;
		return -1;
	}
	/* Allocated outside the lock; the ring slot owns it once queued. */
	if ((r.u.policy.text = strdup(text)) == NULL)
		return -1;
	if (enqueue(s, &r) == -1) {
		free(r.u.policy.text);
		errno = ENOBUFS;
		return -1;
	}
	return 0;
}

bool
store_has_room(struct store *s, size_t n)
{
	bool room;

	if (s == NULL)
		return false;
	pthread_mutex_lock(&s->lock);
	room = s->cap - s->count >= n;
	pthread_mutex_unlock(&s->lock);
	return room;
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
	pthread_mutex_unlock(&s->lock);
}

int
store_flush(struct store *s, unsigned timeout_ms)
{
	struct timespec until;
	uint64_t target;
	int ret = 0;

	if (s == NULL) {
		errno = EINVAL;
		return -1;
	}
	deadline_after(&until, timeout_ms);
	pthread_mutex_lock(&s->lock);
	/* Records are written in order, so "written" reaching the count
	 * queued so far means all of those are in. */
	target = s->st.queued;
	if (s->flush_target < target) {
		s->flush_target = target;
		pthread_cond_signal(&s->wake);
	}
	while (s->st.written < target)
		if (pthread_cond_timedwait(&s->done, &s->lock, &until) ==
		    ETIMEDOUT)
			break;
	if (s->st.written < target) {
		errno = ETIMEDOUT;
		ret = -1;
	}
	pthread_mutex_unlock(&s->lock);
	return ret;
}

void
store_close(struct store *s)
{
	if (s == NULL)
		return;
	(void)store_flush(s, CLOSE_FLUSH_MS);
	pthread_mutex_lock(&s->lock);
	s->stop = 1;
	pthread_cond_signal(&s->wake);
	pthread_mutex_unlock(&s->lock);
	pthread_join(s->writer, NULL);
	store_free(s);
}

int64_t
store_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}
