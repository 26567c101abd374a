/* reaper.c: deleted sandboxes' veth pairs and connections are removed off the event loop. */
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>

#include "gateway/gw.h"
#include "gateway/log.h"
#include "gateway/nl.h"

/*
 * Deleting a veth takes the kernel 20 to 30 ms (unregistering a device
 * waits for RCU grace periods), inside the sendto of RTM_DELLINK. On the
 * event loop that would hold every sandbox's verdicts for as long, at
 * each delete. So `sandbox del` forgets the sandbox at once (its packets
 * then find none and are denied) and hands the veth to this thread, with
 * a netlink socket of its own in the gateway namespace. The slot, whose
 * number names the veth (sg<slot>), is not given to a new sandbox until
 * the thread reports the veth gone; the main loop learns that through an
 * eventfd. What waits is deleted together (delete_batch). The thread is
 * started after the privileges are dropped, so it holds only what is left
 * (CAP_NET_ADMIN is). Until the thread gets to it, the veth's far end is
 * still eth0 in the sandbox's namespace, which an attached one outlives:
 * an add into that namespace right after the del would find its eth0
 * taken, so it deletes that veth itself (sandbox.c, make_veth, asking
 * gw_reaper_holds first); the job here then finds it gone, which is done.
 *
 * The slot's address goes with it, and the gateway's conntrack still
 * holds the old sandbox's connections from that address, each with the
 * connection mark of its verdict: mangle PREROUTING restores that mark on
 * every packet of a matching tuple, so a new sandbox on the slot could
 * carry on an allowed connection of the old one (same 5-tuple, sequence
 * numbers in its window). So once the veth is gone (nothing more comes
 * from the address) its entries are deleted too, before the slot is
 * reported free (forget_batch); the thread, started in the gateway
 * namespace, makes its ctnetlink sockets there.
 */
#define REAP_MAX	1024	/* deletions waiting; beyond, done in place */
#define REAP_GROUP	0x736c	/* the link group of veths being deleted
				 * (the gateway namespace is sluice's) */

struct reap_job {
	uint32_t	ifindex;
	unsigned	slot;
	uint32_t	addr;		/* the sandbox's, network order */
	char		name[GW_NAME_MAX + 1];
};

struct gw_reaper {
	pthread_t	 th;
	pthread_mutex_t	 lock;
	pthread_cond_t	 wake;
	int		 efd;		/* readable: slots are done */
	struct gw_nl	*nl;		/* the thread's, in the gateway */
	struct reap_job	 q[REAP_MAX];	/* to delete, a ring */
	size_t		 head, count;
	struct reap_job	 batch[REAP_MAX];	/* the thread's, in hand */
	bool		 ok[REAP_MAX];
	size_t		 inhand;
	struct {
		unsigned slot;
		bool	 ok;		/* false: its veth, or its
					 * connections, may be left */
	}		 done[REAP_MAX];	/* slots to collect */
	size_t		 ndone;
	bool		 stop;
	uint64_t	 reaped, failed;
};

/* Deletes one veth; ENODEV means it is gone already (its namespace died
 * and took it). */
static bool
delete_one(struct gw_reaper *r, const struct reap_job *j)
{
	char err[512];

	if (gw_nl_link_del(r->nl, j->ifindex, err, sizeof(err)) == -1 &&
	    errno != ENODEV) {
		log_warnx("sandbox %s: %s", j->name, err);
		return false;
	}
	return true;
}

/*
 * Deletes a batch: each veth is put in the reaper's group, then the group
 * is deleted in one request, so that a hundred deletes wait for the
 * kernel's grace periods once, not a hundred times. A veth that cannot be
 * grouped, or a group delete that fails, falls back to one at a time.
 */
static void
delete_batch(struct gw_reaper *r, const struct reap_job *b, size_t n,
    bool *ok)
{
	char err[512];
	size_t i, grouped = 0;

	if (n == 1) {
		ok[0] = delete_one(r, &b[0]);
		return;
	}
	for (i = 0; i < n; i++) {
		ok[i] = false;
		if (gw_nl_link_set_group(r->nl, b[i].ifindex, REAP_GROUP, err,
		    sizeof(err)) == 0)
			grouped++;
		else if (errno == ENODEV)
			ok[i] = true;		/* gone already */
		else
			ok[i] = delete_one(r, &b[i]);
	}
	if (grouped == 0)
		return;
	/* ENODEV: the group is empty, they went with their namespaces */
	if (gw_nl_group_del(r->nl, REAP_GROUP, err, sizeof(err)) == 0 ||
	    errno == ENODEV) {
		for (i = 0; i < n; i++)
			ok[i] = true;
		return;
	}
	log_warnx("deleting %zu veths at once: %s (one at a time instead)",
	    grouped, err);
	for (i = 0; i < n; i++)
		if (!ok[i])
			ok[i] = delete_one(r, &b[i]);
}

/*
 * Deletes the conntrack entries from the addresses of the batch whose
 * veth went: one request each, the kernel filters. A slot whose entries
 * could not all be deleted stays out of use (ok false): fail closed.
 */
static void
forget_batch(const struct reap_job *b, size_t n, bool *ok)
{
	char err[512];
	size_t i;

	for (i = 0; i < n; i++)
		if (ok[i] && nfq_ct_flush_source(b[i].addr, err,
		    sizeof(err)) == -1) {
			log_warnx("sandbox %s: %s", b[i].name, err);
			ok[i] = false;
		}
}

static void *
reaper_main(void *arg)
{
	struct gw_reaper *r = arg;
	uint64_t one = 1;
	size_t i, n;

	pthread_mutex_lock(&r->lock);
	for (;;) {
		while (r->count == 0 && !r->stop)
			pthread_cond_wait(&r->wake, &r->lock);
		if (r->count == 0)
			break;		/* stopping, and nothing is left */
		/* all that waits, at once */
		for (n = 0; r->count > 0; n++) {
			r->batch[n] = r->q[r->head];
			r->head = (r->head + 1) % REAP_MAX;
			r->count--;
		}
		r->inhand = n;
		pthread_mutex_unlock(&r->lock);
		delete_batch(r, r->batch, n, r->ok);
		forget_batch(r->batch, n, r->ok);
		pthread_mutex_lock(&r->lock);
		for (i = 0; i < n; i++) {
			if (r->ok[i])
				r->reaped++;
			else
				r->failed++;
			r->done[r->ndone].slot = r->batch[i].slot;
			r->done[r->ndone++].ok = r->ok[i];
		}
		r->inhand = 0;
		(void)write(r->efd, &one, sizeof(one));
	}
	pthread_mutex_unlock(&r->lock);
	return NULL;
}

int
gw_reaper_start(struct gw *gw, char *err, size_t errlen)
{
	struct gw_reaper *r;
	int e;

	if ((r = calloc(1, sizeof(*r))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	r->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (r->efd == -1) {
		snprintf(err, errlen, "eventfd: %s", strerror(errno));
		free(r);
		return -1;
	}
	/* the caller is in the gateway namespace: the socket belongs there */
	if ((r->nl = gw_nl_open(err, errlen)) == NULL) {
		close(r->efd);
		free(r);
		return -1;
	}
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->wake, NULL);
	if ((e = pthread_create(&r->th, NULL, reaper_main, r)) != 0) {
		snprintf(err, errlen, "starting the reaper: %s", strerror(e));
		gw_nl_close(r->nl);
		pthread_cond_destroy(&r->wake);
		pthread_mutex_destroy(&r->lock);
		close(r->efd);
		free(r);
		return -1;
	}
	gw->reaper = r;
	return 0;
}

int
gw_reaper_submit(struct gw *gw, uint32_t ifindex, unsigned slot,
    const char *name)
{
	struct gw_reaper *r = gw->reaper;
	struct reap_job *j;

	if (r == NULL || ifindex == 0)
		return -1;
	pthread_mutex_lock(&r->lock);
	/* a slot sits in the queue, in the thread's hands or in the done
	 * list until collected: the three share REAP_MAX */
	if (r->count + r->inhand + r->ndone >= REAP_MAX) {
		pthread_mutex_unlock(&r->lock);
		return -1;
	}
	j = &r->q[(r->head + r->count) % REAP_MAX];
	j->ifindex = ifindex;
	j->slot = slot;
	/* the sandbox's address on the slot, as slot_addrs (sandbox.c) */
	j->addr = htonl(ntohl(gw->pool_net) + slot * 4 + 2);
	snprintf(j->name, sizeof(j->name), "%s", name);
	r->count++;
	gw->slot_busy[slot] = true;
	pthread_cond_signal(&r->wake);
	pthread_mutex_unlock(&r->lock);
	return 0;
}

bool
gw_reaper_holds(const struct gw *gw, uint32_t ifindex)
{
	struct gw_reaper *r = gw->reaper;
	bool held = false;
	size_t i;

	if (r == NULL || ifindex == 0)
		return false;
	pthread_mutex_lock(&r->lock);
	for (i = 0; i < r->count && !held; i++)
		held = r->q[(r->head + i) % REAP_MAX].ifindex == ifindex;
	/* in hand, it may be gone already: the caller's delete then finds
	 * no such device */
	for (i = 0; i < r->inhand && !held; i++)
		held = r->batch[i].ifindex == ifindex;
	pthread_mutex_unlock(&r->lock);
	return held;
}

int
gw_reaper_fd(const struct gw *gw)
{
	return gw->reaper != NULL ? gw->reaper->efd : -1;
}

void
gw_reaper_collect(struct gw *gw)
{
	struct gw_reaper *r = gw->reaper;
	uint64_t n;
	size_t i;

	if (r == NULL)
		return;
	(void)read(r->efd, &n, sizeof(n));
	pthread_mutex_lock(&r->lock);
	for (i = 0; i < r->ndone; i++) {
		/* a veth that could not be deleted keeps its slot out of use:
		 * a new sandbox there would clash with its name; so do
		 * connections that could not be forgotten: it would inherit
		 * them */
		if (r->done[i].ok)
			gw->slot_busy[r->done[i].slot] = false;
		else
			log_warnx("slot %u stays out of use: its veth sg%u, or "
			    "its connections, could not be deleted",
			    r->done[i].slot, r->done[i].slot);
	}
	r->ndone = 0;
	pthread_mutex_unlock(&r->lock);
}

void
gw_reaper_stats(const struct gw *gw, struct gw_reaper_stats *out)
{
	struct gw_reaper *r = gw->reaper;

	memset(out, 0, sizeof(*out));
	if (r == NULL)
		return;
	pthread_mutex_lock(&r->lock);
	out->pending = r->count + r->inhand;
	out->deleted = r->reaped;
	out->failed = r->failed;
	pthread_mutex_unlock(&r->lock);
}

void
gw_reaper_stop(struct gw *gw)
{
	struct gw_reaper *r = gw->reaper;

	if (r == NULL)
		return;
	/* what was asked is done before sluiced goes: no veth is left
	 * wired to a gateway that forgot it */
	pthread_mutex_lock(&r->lock);
	r->stop = true;
	pthread_cond_signal(&r->wake);
	pthread_mutex_unlock(&r->lock);
	pthread_join(r->th, NULL);
	gw_reaper_collect(gw);
	gw_nl_close(r->nl);
	pthread_cond_destroy(&r->wake);
	pthread_mutex_destroy(&r->lock);
	close(r->efd);
	free(r);
	gw->reaper = NULL;
}
