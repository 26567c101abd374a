/* sluiced.c: the gateway daemon — setup, the event loop, the verdict path. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/netfilter.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gateway/capture.h"
#include "gateway/gw.h"
#include "gateway/trustdir.h"
#include "gateway/log.h"
#include "gateway/service.h"
#include "gateway/verdict.h"

/*
 * The verdict path: every queued packet gets exactly one verdict, and
 * anything that goes wrong on the way ends in a denial.
 */
static int
decide_packet(struct gw *gw, const struct nfq_packet *pkt, uint64_t now)
{
	struct nfq_tuple t;
	enum nfq_parse_error pe;

	gw->pkts++;
	pe = nfq_packet_parse(pkt->payload, pkt->len, &t);
	if (pe != NFQ_PARSE_OK) {
		gw->pkt_errors++;
		log_debug("packet from ifindex %u: %s", pkt->indev,
		    nfq_parse_error_str(pe));
		/* Not a flow: nothing sensible to log it as. Drop outright. */
		return nfq_queue_verdict(gw->queue, pkt->id, NF_DROP, false, 0);
	}

	/* a flow under inspection: its first flight is being read (a SYN
	 * marked so by the kernel-SYN set is a new connection: synpath.c),
	 * or its server's acknowledgement awaited (either side's packets) */
	if ((pkt->mark & GW_MARK_UNDER) == GW_MARK_UNDER &&
	    !(t.proto == IPPROTO_TCP &&
	    (t.tcp_flags & (TH_SYN | TH_ACK)) == TH_SYN)) {
		gw_inspect_packet(gw, pkt, &t, now);
		return 0;
	}
	return gw_decide_first(gw, pkt, &t, now);
}

/*
 * Every queued packet comes through here: IPv6 is logged and dropped
 * (ipv6.c), IPv4 decided; the time sluiced spends on each packet, receipt
 * to verdict (or to its being held), goes into the latency histogram.
 */
static int
on_packet(void *arg, const struct nfq_packet *pkt)
{
	struct gw *gw = arg;
	struct timespec t0, t1;
	uint64_t now;
	int rc;

	/* one clock read serves the decision and the histogram */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	now = (uint64_t)t0.tv_sec * 1000 + (uint64_t)t0.tv_nsec / 1000000;
	if (pkt->len > 0 && pkt->payload[0] >> 4 == 6) {
		gw->pkts++;
		rc = gw_ipv6_packet(gw, pkt, now);
	} else {
		rc = decide_packet(gw, pkt, now);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	gw_metrics_verdict_latency(gw->metrics,
	    (uint64_t)((t1.tv_sec - t0.tv_sec) * 1000000000LL +
	    (t1.tv_nsec - t0.tv_nsec)));
	return rc;
}

/* Says it once when the database stops or starts being writable. */
static void
store_watch(struct gw *gw)
{
	bool ok = store_writable(gw->store);

	if (ok == gw->store_ok)
		return;
	gw->store_ok = ok;
	if (ok)
		log_info("%s: writable again: new flows are decided as usual",
		    gw->cfg.db);
	else
		log_warnx("%s: cannot be written: new flows are denied "
		    "(log_unavailable) until it can", gw->cfg.db);
}

/*
 * Says what --capture-denied-total's scans removed and what they could
 * not: at most a line or two per scan, and scans are an eighth of the
 * bound apart (capture.h), not one per packet.
 */
static void
capture_watch(struct gw *gw)
{
	struct gw_capture_stats st;

	if (gw->capture == NULL)
		return;
	gw_capture_get_stats(gw->capture, &st);
	if (st.removed != gw->capture_removed_seen)
		log_info("%s: past --capture-denied-total (%u MiB): %llu "
		    "file(s) removed, %llu in all (%llu MiB); %llu MiB there now",
		    gw->cfg.capture_denied, gw->cfg.capture_denied_total,
		    (unsigned long long)(st.removed - gw->capture_removed_seen),
		    (unsigned long long)st.removed,
		    (unsigned long long)(st.removed_bytes >> 20),
		    (unsigned long long)(st.total_bytes >> 20));
	if (st.remove_errors != gw->capture_errors_seen)
		log_warnx("--capture-denied-total: %s (%llu failure(s) so far)",
		    gw_capture_last_error(gw->capture),
		    (unsigned long long)st.remove_errors);
	gw->capture_removed_seen = st.removed;
	gw->capture_errors_seen = st.remove_errors;
}

static int
open_queue(struct gw *gw, char *err, size_t errlen)
{
	/* The queue belongs to the namespace the socket is made in. */
	if (gw_netns_enter(gw->gw_nsfd) == -1)
		fatal("setns %s", gw->cfg.netns);
	/*
	 * Flow accounting first: the kernel gives a connection a destroy
	 * event only if someone listened when it was created. Without it
	 * rows lack byte counts, nothing more.
	 */
	if ((gw->ct = nfq_ct_open(err, errlen)) == NULL)
		log_warnx("conntrack events: %s (flows are logged without "
		    "byte counts)", err);
	if (gw->cfg.queue_balance > 1) {
		/* one queue per reader thread, started once set-up is over */
		if (gw_workers_open(gw, err, errlen) == -1) {
			if (gw_netns_enter(gw->home_nsfd) == -1)
				fatal("setns back home");
			return -1;
		}
	} else {
		gw->queue = nfq_queue_open((uint16_t)gw->cfg.queue_num,
		    gw->cfg.queue_maxlen, err, errlen);
		if (gw->queue != NULL)
			nfq_queue_set_mark_bits(gw->queue, GW_MARK_SET);
	}
	/* the proof's copies: without them no inspected connection could
	 * ever be let go, so sluiced does not start */
	if ((gw->queue != NULL || gw->workers != NULL) &&
	    gw_verify_open(gw, err, errlen) == -1) {
		if (gw_netns_enter(gw->home_nsfd) == -1)
			fatal("setns back home");
		return -1;
	}
	gw_fastsyn_open(gw);
	/* optional: without it a refused connection's server keeps its
	 * side open until its own timeout */
	if ((gw->rst_fd = socket(AF_INET, SOCK_RAW | SOCK_NONBLOCK |
	    SOCK_CLOEXEC, IPPROTO_RAW)) == -1)
		log_warn("raw socket (servers of refused connections are not "
		    "reset)");
	if (gw_netns_enter(gw->home_nsfd) == -1)
		fatal("setns back home");
	return gw->queue != NULL || gw->workers != NULL ? 0 : -1;
}

static int
teardown(struct gw *gw)
{
	char err[1024];

	/* Sandboxes are found from the kept state, so this works without a
	 * running daemon and after a crash. */
	gw->home_nsfd = gw->host_nsfd = open("/proc/self/ns/net",
	    O_RDONLY | O_CLOEXEC);
	gw->gw_nsfd = -1;
	if (gw_netns_exists(gw->cfg.netns))
		gw->gw_nsfd = gw_netns_open(gw->cfg.netns, false, err, sizeof(err));
	if (gw->gw_nsfd == -1) {
		/* no gateway: only the sandboxes' namespaces may be left */
		gw->gw_nsfd = gw->host_nsfd;
	}
	if (gw_sandboxes_restore(gw, err, sizeof(err)) == -1)
		log_warnx("%s", err);
	/* the veths go together as one link group (reaper.c), not one
	 * kernel grace period after another */
	if (gw->gw_nsfd != gw->host_nsfd) {
		if (gw_netns_enter(gw->gw_nsfd) == -1)
			fatal("setns %s", gw->cfg.netns);
		if (gw_reaper_start(gw, err, sizeof(err)) == -1)
			log_warnx("%s: deleting veths one at a time", err);
		if (gw_netns_enter(gw->home_nsfd) == -1)
			fatal("setns back home");
	}
	gw_sandboxes_teardown(gw);
	gw_reaper_stop(gw);
	gw_gateway_destroy(gw);
	log_info("torn down: gateway namespace %s and its sandboxes",
	    gw->cfg.netns);
	return 0;
}

static void
daemonize(void)
{
	pid_t pid = fork();
	int fd;

	if (pid == -1)
		fatal("fork");
	if (pid > 0)
		_exit(0);
	if (setsid() == -1)
		fatal("setsid");
	if ((fd = open("/dev/null", O_RDWR)) != -1) {
		dup2(fd, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		if (fd > 2)
			close(fd);
	}
}

/* Copies read so far, of both kinds (--copy-interval). */
static uint64_t
copies_read(const struct gw *gw)
{
	struct nfq_nflog_stats st;
	uint64_t n = 0;

	if (gw->nflog != NULL) {
		nfq_nflog_stats(gw->nflog, &st);
		n += st.packets;
	}
	if (gw->vlog != NULL) {
		nfq_nflog_stats(gw->vlog, &st);
		n += st.packets;
	}
	return n;
}

int
main(int argc, char **argv)
{
	struct gw gw;
	struct store_opts sopts = { 0 };
	char err[1024];
	sigset_t sigs;
	int sfd, rc;
	bool running = true;

	memset(&gw, 0, sizeof(gw));
	gw.ctl_fd = gw.gw_nsfd = gw.host_nsfd = gw.home_nsfd = -1;
	gw.rst_fd = -1;
	rc = gw_config_parse(&gw.cfg, argc, argv);
	if (rc != 0)
		return rc == 1 ? 0 : 1;
	log_init("sluiced", gw.cfg.foreground || gw.cfg.teardown,
	    gw.cfg.verbose);
	if (geteuid() != 0)
		fatalx("must run as root (it creates namespaces and netfilter "
		    "rules)");
	signal(SIGPIPE, SIG_IGN);
	umask(027);

	/* root writes and reads back files in these: nobody else may be
	 * able to change what is there */
	if (gw_dir_trusted("--state-dir", gw.cfg.state_dir, 0750, err,
	    sizeof(err)) == -1 ||
	    gw_dir_trusted_parent("--db", gw.cfg.db, 0750, err,
	    sizeof(err)) == -1)
		fatalx("%s", err);
	if (gw_sandboxes_init(&gw, err, sizeof(err)) == -1)
		fatalx("%s", err);
	if ((gw.flows = nfq_flows_new(GW_FLOWS_MAX)) == NULL ||
	    (gw.flows6 = nfq_flows_new(GW_FLOWS6_MAX)) == NULL)
		fatalx("out of memory");
	if (gw.cfg.teardown) {
		if ((gw.store = store_open(gw.cfg.db, NULL, err, sizeof(err))) == NULL)
			log_warnx("%s (teardown not logged)", err);
		rc = teardown(&gw);
		gw_log_lost_at_close(store_close(gw.store));
		return rc;
	}

	/* before the main thread moves to the gateway namespace: an
	 * abstract $NOTIFY_SOCKET is named in the host's */
	if (gw_notify_open(err, sizeof(err)) == -1)
		log_warnx("%s (no readiness notification)", err);
	if (!gw.cfg.foreground)
		daemonize();
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGHUP);
	/* block before any thread exists, so the store writer inherits it */
	sigprocmask(SIG_BLOCK, &sigs, NULL);
	if ((sfd = signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK)) == -1)
		fatal("signalfd");

	sopts.retain_days = gw.cfg.retain_days;
	sopts.queue_cap = gw.cfg.log_queue;
	if ((gw.store = store_open(gw.cfg.db, &sopts, err, sizeof(err))) == NULL)
		fatalx("%s", err);
	gw.store_ok = true;
	if (gw_gateway_setup(&gw, err, sizeof(err)) == -1)
		fatalx("gateway %s: %s", gw.cfg.netns, err);
	/* the ruleset names the kernel-SNI program by its pin */
	gw_ksni_open(&gw);
	if (gw_ruleset_apply(&gw, err, sizeof(err)) == -1)
		fatalx("ruleset: %s", err);
	if (gw_sandboxes_restore(&gw, err, sizeof(err)) == -1)
		fatalx("%s", err);
	if (open_queue(&gw, err, sizeof(err)) == -1)
		fatalx("queue %u: %s", gw.cfg.queue_num, err);
	if (gw_control_open(&gw, err, sizeof(err)) == -1)
		fatalx("control: %s", err);
	/* metrics listeners in the host namespace, where scrapers are */
	if ((gw.metrics = gw_metrics_open(&gw, err, sizeof(err))) == NULL)
		fatalx("metrics: %s", err);
	/* the host's own addresses, from its namespace (this one) */
	if (gw_hostaddrs_open(&gw, err, sizeof(err)) == -1)
		fatalx("%s", err);
	/* From here on the main thread lives in the gateway namespace: the
	 * resolver's sockets, listening and upstream, belong there. */
	if (gw_netns_enter(gw.gw_nsfd) == -1)
		fatal("setns %s", gw.cfg.netns);
	gw.home_nsfd = gw.gw_nsfd;
	if (gw_dns_open(&gw, err, sizeof(err)) == -1)
		fatalx("resolver: %s", err);
	if (gw_inspect_init(&gw) == -1)
		fatalx("out of memory");
	if (gw.cfg.capture_denied != NULL &&
	    (gw.capture = gw_capture_open(gw.cfg.capture_denied,
	    GW_CAPTURE_MAX_BYTES, err, sizeof(err))) == NULL)
		fatalx("--capture-denied: %s", err);
	/* files of earlier runs count too: this first scan may remove
	 * some, which the loop's capture_watch says; a failed scan is said
	 * there too, and the bound holds from what is written */
	if (gw.capture != NULL)
		(void)gw_capture_set_total(gw.capture,
		    (uint64_t)gw.cfg.capture_denied_total << 20,
		    gw_sandbox_names_live, &gw);
	/* everything privileged is open: keep only what sandbox add/del
	 * and the queue need (before any other thread is started) */
	if (gw_service_drop(&gw, err, sizeof(err)) == -1)
		fatalx("privileges: %s", err);
	/* the queue readers, with the privileges that are left */
	if (gw_workers_start(&gw, on_packet, err, sizeof(err)) == -1)
		fatalx("--queue-balance: %s", err);
	/* and the one that deletes veths, in the gateway namespace */
	if (gw_reaper_start(&gw, err, sizeof(err)) == -1)
		fatalx("%s", err);

	log_info("ready: gateway %s, queue %u (%u queue%s), %zu sandboxes, "
	    "control %s, %zu upstream resolvers", gw.cfg.netns,
	    gw.cfg.queue_num, gw.cfg.queue_balance > 1 ?
	    gw.cfg.queue_balance : 1, gw.cfg.queue_balance > 1 ? "s" : "",
	    gw.nsandboxes, gw.cfg.control, gw.cfg.ndns);
	gw_service_ready(&gw);

	/* pfd: queue, control, signals, conntrack, reaper, kernel SYNs,
	 * the workers' wake-up, server copies, refused mark changes, the
	 * host's addresses, then the rest */
#define NFIXED	10
	while (running) {
		struct pollfd pfd[NFIXED + 2 + DNS_TCP_MAX + DNS_PENDING_MAX +
		    16 + GW_METRICS_POLLFDS];
		size_t ndns, nctl, nmet;
		int timeout, itimeout, ctimeout, mtimeout, ltimeout;
		uint64_t now;
		bool behind, lazy;
		uint64_t copies;

		/* with --queue-balance the workers read the queues, and the
		 * state they share is this loop's only outside poll() */
		gw_lock(&gw);
		pfd[0] = (struct pollfd){ .fd = gw.workers == NULL ?
		    nfq_queue_fd(gw.queue) : -1, .events = POLLIN };
		pfd[1] = (struct pollfd){ .fd = gw.ctl_fd, .events = POLLIN };
		pfd[2] = (struct pollfd){ .fd = sfd, .events = POLLIN };
		pfd[3] = (struct pollfd){ .fd = gw.ct ? nfq_ct_fd(gw.ct) : -1,
		    .events = POLLIN };
		pfd[4] = (struct pollfd){ .fd = gw_reaper_fd(&gw),
		    .events = POLLIN };
		pfd[5] = (struct pollfd){ .fd = gw.nflog ?
		    nfq_nflog_fd(gw.nflog) : -1, .events = POLLIN };
		pfd[6] = (struct pollfd){ .fd = gw.workers == NULL ? -1 :
		    gw.wake_fd, .events = POLLIN };
		pfd[7] = (struct pollfd){ .fd = gw.vlog ?
		    nfq_nflog_fd(gw.vlog) : -1, .events = POLLIN };
		pfd[8] = (struct pollfd){ .fd = gw.ctmark ?
		    nfq_ctmark_fd(gw.ctmark) : -1, .events = POLLIN };
		pfd[9] = (struct pollfd){ .fd = gw_hostaddrs_fd(&gw),
		    .events = POLLIN };
		/* While the log's writer is behind, queries wait in the
		 * socket's buffer: a burst is delayed, not refused for want
		 * of room for its rows (log_unavailable). Nothing wakes the
		 * loop when the writer catches up, so it looks every 2 ms. */
		behind = store_behind(gw.store);
		dns_resolver_pause(gw.resolver, behind);
		ndns = dns_resolver_pollfds(gw.resolver, pfd + NFIXED,
		    sizeof(pfd) / sizeof(pfd[0]) - NFIXED - 16 -
		    GW_METRICS_POLLFDS);
		nctl = gw_control_pollfds(pfd + NFIXED + ndns, 16);
		nmet = gw_metrics_pollfds(gw.metrics,
		    pfd + NFIXED + ndns + nctl, GW_METRICS_POLLFDS);
		/* one now for all: a worker that finds a hold's deadline
		 * computes the same wake-up from it, not a later one */
		now = gw_now_ms();
		timeout = dns_resolver_timeout(gw.resolver, now);
		itimeout = gw_inspect_timeout(&gw, now);
		if (itimeout >= 0 && (timeout < 0 || itimeout < timeout))
			timeout = itimeout;
		/* the summary rows of rate-limited attempts (limits.c) */
		ltimeout = gw_limits_timeout(&gw, now);
		if (ltimeout >= 0 && (timeout < 0 || ltimeout < timeout))
			timeout = ltimeout;
		ctimeout = gw_control_timeout(now);
		if (ctimeout >= 0 && (timeout < 0 || ctimeout < timeout))
			timeout = ctimeout;
		mtimeout = gw_metrics_timeout(gw.metrics, now);
		if (mtimeout >= 0 && (timeout < 0 || mtimeout < timeout))
			timeout = mtimeout;
		/* the kernel-SNI program's lease (--kernel-sni) */
		mtimeout = gw_ksni_timeout(&gw, now);
		if (mtimeout >= 0 && (timeout < 0 || mtimeout < timeout))
			timeout = mtimeout;
		if (behind && (timeout < 0 || timeout > 2))
			timeout = 2;
		/*
		 * --copy-interval: while copies keep coming, the loop does
		 * not wait for them. Each copy would wake it at the moment
		 * its packet goes on, when the client and the server want
		 * the CPUs for what the packet starts; so they are read
		 * every pass instead, and at least every copy_interval ms.
		 * Nothing waits for them: a queued packet that needs one
		 * has them read first (inspect.c), and each pass reads them
		 * before conntrack's ends. A second with none, and the loop
		 * waits for the next one again.
		 */
		lazy = gw.cfg.copy_interval > 0 && gw.copies_seen_ms != 0 &&
		    now - gw.copies_seen_ms < GW_COPY_IDLE_MS;
		if (lazy) {
			pfd[5].fd = -1;
			pfd[7].fd = -1;
			if (timeout < 0 || timeout > (int)gw.cfg.copy_interval)
				timeout = (int)gw.cfg.copy_interval;
		}
		/* holds and rate-limit entries the workers make from here
		 * on are due after this, or they wake the loop (workers.c) */
		gw.wake_at = timeout < 0 ? UINT64_MAX : now + (uint64_t)timeout;
		gw_unlock(&gw);
		if (poll(pfd, NFIXED + ndns + nctl + nmet, timeout) == -1) {
			if (errno == EINTR)
				continue;
			fatal("poll");
		}
		gw_lock(&gw);
		/* woken by a worker: this pass looks at its timers again */
		if (pfd[6].revents & POLLIN) {
			eventfd_t n;

			(void)eventfd_read(gw.wake_fd, &n);
		}
		/* copies of SYNs the kernel let through, before the first
		 * flights that follow them */
		copies = copies_read(&gw);
		if (lazy)
			(void)gw_fastsyn_drain(&gw);	/* all: none woke it */
		else if (pfd[5].revents & POLLIN)
			gw_fastsyn_read(&gw);
		/* copies of server packets (the proof of first flights),
		 * before the client packets that answer them */
		if (lazy)
			gw_verify_drain(&gw);
		else if (pfd[7].revents & POLLIN)
			gw_verify_read(&gw);
		gw_verify_settle(&gw);	/* what had to wait for the hellos */
		if (copies_read(&gw) != copies) {
			if (lazy)
				gw.copies_unwaited++;
			else
				gw.copies_woken++;
			if (gw.cfg.copy_interval > 0)
				gw.copies_seen_ms = gw_now_ms();
		}
		if (pfd[8].revents & POLLIN)
			gw_verify_refusals(&gw);
		if (pfd[0].revents & POLLIN) {
			if (nfq_queue_recv(gw.queue, on_packet, &gw) == -1)
				log_warn("queue receive");
			gw_verify_settle(&gw);
		}
		dns_resolver_process(gw.resolver, pfd + NFIXED, ndns, gw_now_ms());
		gw_inspect_expire(&gw, gw_now_ms());
		gw_ksni_renew(&gw, gw_now_ms());
		gw_limits_expire(&gw, gw_now_ms(), false);
		if (pfd[3].revents & POLLIN)
			(void)gw_ct_read(&gw, false);
		if (pfd[4].revents & POLLIN)
			gw_reaper_collect(&gw);
		if (pfd[9].revents & POLLIN)
			gw_hostaddrs_read(&gw);
		store_watch(&gw);
		capture_watch(&gw);
		gw_control_process(&gw, pfd + NFIXED + ndns, nctl, gw_now_ms());
		gw_metrics_process(&gw, gw.metrics,
		    pfd + NFIXED + ndns + nctl, nmet, gw_now_ms());
		if (pfd[1].revents & POLLIN)
			gw_control_accept(&gw, gw_now_ms());
		if (pfd[2].revents & POLLIN) {
			struct signalfd_siginfo si;

			while (read(sfd, &si, sizeof(si)) == sizeof(si)) {
				if (si.ssi_signo == SIGHUP) {
					gw_service_reload(&gw, argc, argv);
					continue;
				}
				log_info("signal %u: stopping; sandboxes stay, "
				    "and fail closed until sluiced is back",
				    si.ssi_signo);
				gw_service_stopping(&gw);
				running = false;
			}
		}
		gw_service_status(&gw);
		gw_unlock(&gw);
	}

	gw_workers_stop(&gw);
	gw_fastsyn_close(&gw);
	gw_verify_close(&gw);
	gw_reaper_stop(&gw);

	gw_control_close(&gw);
	gw_metrics_free(gw.metrics);
	gw_hostaddrs_close(&gw);
	gw.metrics = NULL;
	nfq_ct_close(gw.ct);
	if (gw.rst_fd != -1)
		close(gw.rst_fd);
	gw_capture_close(gw.capture);
	/* counts of rate-limited attempts not yet summarised are written
	 * before the log closes */
	gw_limits_expire(&gw, 0, true);
	gw_inspect_free(&gw);
	gw_dns_close(&gw);
	nfq_queue_close(gw.queue);
	gw_log_lost_at_close(store_close(gw.store));
	nfq_flows_free(gw.flows);
	nfq_flows_free(gw.flows6);
	gw_sandboxes_free(&gw);
	return 0;
}
