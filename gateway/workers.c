/* workers.c: several NFQUEUE queues, one reader thread each (--queue-balance).
 *
 * With --queue-balance N > 1 the ruleset spreads new flows over queues
 * queue-num .. queue-num+N-1 by the CPU that handles them (NFQUEUE's
 * --queue-cpu-fanout), and each queue gets its own thread here. All of
 * sluiced's decision state (sandboxes, policies, bindings, the flow and
 * hold tables, the classifier, the capture files) is shared and guarded by
 * one lock, gw->lock: a worker takes it for one receive batch, the main
 * thread (resolver, control socket, conntrack events, timers) for one pass
 * of its loop. The log needs nothing more: the store's queue has its own
 * lock and its own writer thread.
 *
 * One lock is a deliberate choice: every decision reads several tables
 * that the resolver and the control socket change, and a verdict that saw
 * half of a policy swap or a binding half added would be a hole. What runs
 * in parallel is what happens outside it: the kernel queueing packets to
 * each queue's socket (per CPU), waking each reader, and the writer
 * thread's SQLite work.
 *
 * The main loop sleeps in poll() until the earliest of its timers, which
 * include the holds' deadlines and the rate-limit summaries that workers
 * create. Before it sleeps it notes when it will wake (gw->wake_at); a
 * worker whose batch made something due earlier writes gw->wake_fd, once
 * until the loop has looked again, so a busy queue costs no syscall.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "gateway/gw.h"
#include "gateway/log.h"

struct gw_worker {
	struct gw		*gw;
	struct nfq_queue	*queue;
	nfq_packet_cb		 cb;
	pthread_t		 thread;
	bool			 started;
};

void
gw_lock(struct gw *gw)
{
	if (gw->nworkers > 0)
		pthread_mutex_lock(&gw->lock);
}

void
gw_unlock(struct gw *gw)
{
	if (gw->nworkers > 0)
		pthread_mutex_unlock(&gw->lock);
}

/* With the lock held, after a batch: the main loop is woken if a timer
 * it does not know of is due before it wakes anyway. */
static void
wake_main(struct gw *gw)
{
	uint64_t now, due = UINT64_MAX;
	int t;

	if (gw->wake_at == 0)
		return;
	now = gw_now_ms();
	if ((t = gw_inspect_timeout(gw, now)) >= 0)
		due = now + (uint64_t)t;
	if ((t = gw_limits_timeout(gw, now)) >= 0 && now + (uint64_t)t < due)
		due = now + (uint64_t)t;
	if (due >= gw->wake_at)
		return;
	/* EAGAIN: the counter is full, so the loop is woken already */
	if (eventfd_write(gw->wake_fd, 1) == -1 && errno != EAGAIN)
		log_warn("waking the main loop");
	gw->wake_at = 0;
}

static void *
worker_main(void *arg)
{
	struct gw_worker *w = arg;
	struct gw *gw = w->gw;
	struct pollfd pfd = { .fd = nfq_queue_fd(w->queue), .events = POLLIN };

	/* the stop flag is looked at every 200 ms at worst */
	while (!atomic_load_explicit(&gw->stopping, memory_order_relaxed)) {
		if (poll(&pfd, 1, 200) == -1) {
			if (errno == EINTR)
				continue;
			/* cannot happen with one valid fd; if it did, the
			 * queue fills and the kernel drops: fail closed */
			log_warn("queue %u: poll", nfq_queue_num(w->queue));
			break;
		}
		if (!(pfd.revents & POLLIN))
			continue;
		pthread_mutex_lock(&gw->lock);
		/* verdicts given in this batch go to this queue; held
		 * packets remember theirs (inspect.c) */
		gw->queue = w->queue;
		if (nfq_queue_recv(w->queue, w->cb, gw) == -1)
			log_warn("queue %u: receive", nfq_queue_num(w->queue));
		gw_verify_settle(gw);
		wake_main(gw);
		pthread_mutex_unlock(&gw->lock);
	}
	return NULL;
}

int
gw_workers_open(struct gw *gw, char *err, size_t errlen)
{
	unsigned i, n = gw->cfg.queue_balance;

	if (n <= 1)
		return 0;
	if ((gw->workers = calloc(n, sizeof(*gw->workers))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if ((gw->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) == -1) {
		snprintf(err, errlen, "eventfd: %s", strerror(errno));
		return -1;
	}
	for (i = 0; i < n; i++) {
		struct gw_worker *w = &gw->workers[i];

		w->gw = gw;
		w->queue = nfq_queue_open((uint16_t)(gw->cfg.queue_num + i),
		    gw->cfg.queue_maxlen, err, errlen);
		if (w->queue == NULL)
			return -1;
		nfq_queue_set_mark_bits(w->queue, GW_MARK_SET);
	}
	return 0;
}

int
gw_workers_start(struct gw *gw, nfq_packet_cb cb, char *err, size_t errlen)
{
	unsigned i, n = gw->cfg.queue_balance;
	int e;

	if (gw->workers == NULL)
		return 0;
	if ((e = pthread_mutex_init(&gw->lock, NULL)) != 0) {
		snprintf(err, errlen, "mutex: %s", strerror(e));
		return -1;
	}
	/* from here on gw_lock() locks: set before the first thread runs */
	gw->nworkers = n;
	for (i = 0; i < n; i++) {
		struct gw_worker *w = &gw->workers[i];

		w->cb = cb;
		if ((e = pthread_create(&w->thread, NULL, worker_main, w)) != 0) {
			snprintf(err, errlen, "queue %u: thread: %s",
			    gw->cfg.queue_num + i, strerror(e));
			return -1;
		}
		w->started = true;
	}
	return 0;
}

void
gw_workers_stop(struct gw *gw)
{
	unsigned i;

	if (gw->workers == NULL)
		return;
	atomic_store(&gw->stopping, true);
	for (i = 0; i < gw->cfg.queue_balance; i++)
		if (gw->workers[i].started)
			pthread_join(gw->workers[i].thread, NULL);
	for (i = 0; i < gw->cfg.queue_balance; i++)
		nfq_queue_close(gw->workers[i].queue);
	free(gw->workers);
	gw->workers = NULL;
	close(gw->wake_fd);
	gw->wake_fd = -1;
	if (gw->nworkers > 0)
		pthread_mutex_destroy(&gw->lock);
	gw->nworkers = 0;
	gw->queue = NULL;
}

/* Adds every queue's counters (nfq_queue_get_stats) into st. */
void
gw_workers_queue_stats(const struct gw *gw, struct nfq_queue_stats *st)
{
	struct nfq_queue_stats one;
	unsigned i;

	memset(st, 0, sizeof(*st));
	if (gw->workers == NULL) {
		if (gw->queue != NULL)
			nfq_queue_get_stats(gw->queue, st);
		return;
	}
	for (i = 0; i < gw->cfg.queue_balance; i++) {
		nfq_queue_get_stats(gw->workers[i].queue, &one);
		st->packets += one.packets;
		st->dropped += one.dropped;
		st->enobufs += one.enobufs;
		st->verdict_errors += one.verdict_errors;
		st->unverdictable += one.unverdictable;
		st->bad_messages += one.bad_messages;
	}
}
