/* soakload.c: the soak's load: TCP connections and DNS queries at a set rate, counted per target, and the sink that answers them. */
/*
 * soakload conn -s SRC -n COUNT -r RATE [-c CONC] [-t TIMEOUT_MS] [-d DEADLINE_S]
 *               [-p FIRST_PORT] ADDR:PORT/allow|deny ...
 *     Attempt i goes to target i % ntargets, from SRC with its own source
 *     port (1024-65535 in turn from FIRST_PORT, so no 5-tuple repeats
 *     within a minute and every attempt is a new flow to the gateway). A connection that opens
 *     sends "soak-allow\n" or "soak-deny\n" (its target's expectation) and
 *     waits for a line back; it is then closed with a reset, so neither
 *     side keeps TIME_WAIT.
 * soakload dns -s SERVER -n COUNT -r RATE [-c CONC] [-t TIMEOUT_MS] [-d DEADLINE_S]
 *               [-z ZONE] [-a NAME]
 *     One UDP socket; query i is, by i % 10: 0-3 NAME A, 4 NAME AAAA,
 *     5-8 a new name under ZONE (an exfiltration attempt) A, 9 NAME TXT.
 * soakload sink -o FILE ADDR:PORT ...
 *     Accepts on every ADDR:PORT, answers "ok\n" to the first bytes, and
 *     rewrites FILE (JSON) every second: connections per port and how many
 *     brought "soak-deny" bytes. Runs until SIGTERM or SIGINT. Its
 *     listeners defer the accept to the first bytes (TCP_DEFER_ACCEPT), so
 *     that only the request, not the handshake's ACK handled at the same
 *     time on the other CPU, turns the half-open connection into a full
 *     one: without it the sink's kernel sent resets of its own, to
 *     segments of connections it no longer found (README, soak).
 *
 * conn and dns start at most RATE attempts a second, at most CONC at once,
 * stop after COUNT or at DEADLINE_S, and print one JSON object on stdout.
 * Exit status 0, 1 on a usage error, 2 on a system error.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define CONC_MAX	1024
#define TARGETS_MAX	16
#define LISTEN_MAX	16
#define SINK_CONNS_MAX	65536
#define PORT_FIRST	1024
#define PORT_LAST	65535
#define BIND_TRIES	64

struct opts {
	struct in_addr	 addr;		/* conn: source; dns: server */
	uint64_t	 count;
	double		 rate;
	unsigned	 conc;
	uint64_t	 timeout_ns;
	double		 deadline_s;
	const char	*zone;
	const char	*name;
	const char	*out;
	uint16_t	 port_first;
};

static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void
usage(void)
{
	fprintf(stderr,
	    "usage: soakload conn -s SRC -n COUNT -r RATE [-c CONC] [-t MS] [-d S] [-p PORT]\n"
	    "                     ADDR:PORT/allow|deny ...\n"
	    "       soakload dns -s SERVER -n COUNT -r RATE [-c CONC] [-t MS] [-d S] [-z ZONE] [-a NAME]\n"
	    "       soakload sink -o FILE ADDR:PORT ...\n");
	exit(1);
}

static uint64_t
parse_u64(const char *s, uint64_t lo, uint64_t hi)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) {
		fprintf(stderr, "soakload: bad number \"%s\" (%" PRIu64 "..%" PRIu64 ")\n",
		    s, lo, hi);
		exit(1);
	}
	return v;
}

static double
parse_double(const char *s)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno != 0 || end == s || *end != '\0' || !(v > 0)) {
		fprintf(stderr, "soakload: bad number \"%s\"\n", s);
		exit(1);
	}
	return v;
}

/* "ADDR:PORT" (and an optional "/SUFFIX" returned in *suffix) */
static void
parse_addr_port(const char *arg, struct sockaddr_in *sin, const char **suffix)
{
	char buf[64], *colon, *slash;

	if (strlen(arg) >= sizeof(buf))
		usage();
	strcpy(buf, arg);
	if (suffix != NULL) {
		*suffix = NULL;
		if ((slash = strchr(buf, '/')) != NULL) {
			*slash = '\0';
			*suffix = arg + (slash - buf) + 1;
		}
	}
	if ((colon = strrchr(buf, ':')) == NULL)
		usage();
	*colon = '\0';
	memset(sin, 0, sizeof(*sin));
	sin->sin_family = AF_INET;
	if (inet_pton(AF_INET, buf, &sin->sin_addr) != 1) {
		fprintf(stderr, "soakload: bad address \"%s\"\n", buf);
		exit(1);
	}
	sin->sin_port = htons((uint16_t)parse_u64(colon + 1, 1, 65535));
}

static void
raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &rl);
	}
}

/* How many attempts should have started by now: RATE a second from t0. */
static uint64_t
due(const struct opts *o, uint64_t t0, uint64_t now)
{
	double d = (double)(now - t0) / 1e9 * o->rate + 1;

	return d >= (double)o->count ? o->count : (uint64_t)d;
}

/* ---------------------------------------------------------------- conn */

enum cstate { C_FREE, C_CONNECTING, C_WAITING };

struct target {
	struct sockaddr_in sin;
	char		 text[32];
	bool		 deny;
	uint64_t	 attempts, connected, ok, refused, reset, timeout,
			 error, eof;
};

struct conn {
	enum cstate	 st;
	int		 fd;
	unsigned	 target;
	uint64_t	 deadline;
};

struct connload {
	struct opts	 o;
	struct target	 targets[TARGETS_MAX];
	unsigned	 ntargets;
	struct conn	 conns[CONC_MAX];
	unsigned	 inflight;
	int		 ep;
	uint16_t	 next_port;
	uint64_t	 bind_retries, bind_failures, socket_errors;
};

static void
conn_end(struct connload *L, struct conn *c)
{
	(void)epoll_ctl(L->ep, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);	/* SO_LINGER 0: a reset, no TIME_WAIT */
	c->st = C_FREE;
	c->fd = -1;
	L->inflight--;
}

static void
conn_fail(struct connload *L, struct conn *c, int e)
{
	static unsigned logged;
	struct target *t = &L->targets[c->target];
	struct sockaddr_in me;
	socklen_t mlen = sizeof(me);

	/* an allowed connection that failed: say which, for the logs */
	if (!t->deny && logged < 50 && getsockname(c->fd,
	    (struct sockaddr *)&me, &mlen) == 0) {
		logged++;
		fprintf(stderr, "soakload: %s from port %u failed %s: %s\n",
		    t->text, ntohs(me.sin_port), c->st == C_CONNECTING ?
		    "connecting" : "waiting for the answer", strerror(e));
	}

	if (e == ECONNREFUSED)
		t->refused++;
	else if (e == ECONNRESET)
		t->reset++;
	else if (e == ETIMEDOUT)
		t->timeout++;
	else
		t->error++;
	conn_end(L, c);
}

static void
conn_start(struct connload *L, uint64_t i, uint64_t now)
{
	struct linger lg = { 1, 0 };
	struct sockaddr_in src = { .sin_family = AF_INET };
	struct epoll_event ev;
	struct conn *c = NULL;
	struct target *t;
	unsigned k, tries;
	int fd;

	for (k = 0; k < L->o.conc; k++)
		if (L->conns[k].st == C_FREE) {
			c = &L->conns[k];
			break;
		}
	if (c == NULL)
		return;
	t = &L->targets[i % L->ntargets];
	t->attempts++;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd == -1) {
		L->socket_errors++;
		t->error++;
		return;
	}
	(void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	src.sin_addr = L->o.addr;
	for (tries = 0; tries < BIND_TRIES; tries++) {
		src.sin_port = htons(L->next_port);
		L->next_port = L->next_port == PORT_LAST ? PORT_FIRST :
		    (uint16_t)(L->next_port + 1);
		if (bind(fd, (struct sockaddr *)&src, sizeof(src)) == 0)
			break;
		if (errno != EADDRINUSE) {
			tries = BIND_TRIES;
			break;
		}
		L->bind_retries++;
	}
	if (tries == BIND_TRIES ||
	    (connect(fd, (struct sockaddr *)&t->sin, sizeof(t->sin)) == -1 &&
	    errno != EINPROGRESS)) {
		if (tries == BIND_TRIES)
			L->bind_failures++;
		t->error++;
		close(fd);
		return;
	}
	c->st = C_CONNECTING;
	c->fd = fd;
	c->target = (unsigned)(t - L->targets);
	c->deadline = now + L->o.timeout_ns;
	ev.events = EPOLLOUT;
	ev.data.ptr = c;
	if (epoll_ctl(L->ep, EPOLL_CTL_ADD, fd, &ev) == -1) {
		perror("soakload: epoll_ctl");
		exit(2);
	}
	L->inflight++;
}

static void
conn_event(struct connload *L, struct conn *c)
{
	struct target *t = &L->targets[c->target];
	struct epoll_event ev;
	socklen_t len = sizeof(int);
	char buf[256];
	const char *msg;
	ssize_t n;
	int e = 0;

	if (c->st == C_CONNECTING) {
		if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &e, &len) == -1)
			e = errno;
		if (e != 0) {
			conn_fail(L, c, e);
			return;
		}
		t->connected++;
		msg = t->deny ? "soak-deny\n" : "soak-allow\n";
		if (send(c->fd, msg, strlen(msg), MSG_NOSIGNAL) == -1) {
			conn_fail(L, c, errno);
			return;
		}
		c->st = C_WAITING;
		ev.events = EPOLLIN;
		ev.data.ptr = c;
		(void)epoll_ctl(L->ep, EPOLL_CTL_MOD, c->fd, &ev);
		return;
	}
	n = recv(c->fd, buf, sizeof(buf), 0);
	if (n > 0) {
		t->ok++;
		conn_end(L, c);
	} else if (n == 0) {
		t->eof++;
		conn_end(L, c);
	} else if (errno != EAGAIN && errno != EINTR) {
		conn_fail(L, c, errno);
	}
}

static int
run_conn(struct opts *o, int argc, char **argv)
{
	static struct connload L;
	struct epoll_event evs[256];
	uint64_t t0, now, started = 0, unfinished = 0;
	unsigned k;
	int i, n;

	L.o = *o;
	L.next_port = o->port_first;
	if (argc == 0 || argc > TARGETS_MAX)
		usage();
	for (i = 0; i < argc; i++) {
		struct target *t = &L.targets[L.ntargets++];
		const char *sfx;

		parse_addr_port(argv[i], &t->sin, &sfx);
		if (sfx == NULL || (strcmp(sfx, "allow") != 0 &&
		    strcmp(sfx, "deny") != 0))
			usage();
		t->deny = strcmp(sfx, "deny") == 0;
		snprintf(t->text, sizeof(t->text), "%s:%u",
		    inet_ntoa(t->sin.sin_addr), ntohs(t->sin.sin_port));
	}
	for (k = 0; k < CONC_MAX; k++)
		L.conns[k].fd = -1;
	if ((L.ep = epoll_create1(EPOLL_CLOEXEC)) == -1) {
		perror("soakload: epoll_create1");
		return 2;
	}
	t0 = now = now_ns();
	for (;;) {
		uint64_t want = due(o, t0, now);

		while (started < want && L.inflight < o->conc)
			conn_start(&L, started++, now);
		if (started == o->count && L.inflight == 0)
			break;
		if ((double)(now - t0) / 1e9 > o->deadline_s)
			break;
		n = epoll_wait(L.ep, evs, 256, 2);
		if (n == -1 && errno != EINTR) {
			perror("soakload: epoll_wait");
			return 2;
		}
		for (i = 0; i < n; i++)
			conn_event(&L, evs[i].data.ptr);
		now = now_ns();
		for (k = 0; k < o->conc; k++)
			if (L.conns[k].st != C_FREE && L.conns[k].deadline <= now)
				conn_fail(&L, &L.conns[k], ETIMEDOUT);
	}
	for (k = 0; k < o->conc; k++)
		if (L.conns[k].st != C_FREE) {
			unfinished++;
			conn_fail(&L, &L.conns[k], ETIMEDOUT);
		}
	printf("{\"mode\": \"conn\", \"elapsed_s\": %.3f, \"started\": %" PRIu64
	    ", \"unfinished\": %" PRIu64 ", \"bind_retries\": %" PRIu64
	    ", \"bind_failures\": %" PRIu64 ", \"socket_errors\": %" PRIu64
	    ", \"targets\": [", (double)(now_ns() - t0) / 1e9, started,
	    unfinished, L.bind_retries, L.bind_failures, L.socket_errors);
	for (k = 0; k < L.ntargets; k++) {
		struct target *t = &L.targets[k];

		printf("%s{\"target\": \"%s\", \"expect\": \"%s\", "
		    "\"attempts\": %" PRIu64 ", \"connected\": %" PRIu64
		    ", \"ok\": %" PRIu64 ", \"refused\": %" PRIu64
		    ", \"reset\": %" PRIu64 ", \"timeout\": %" PRIu64
		    ", \"eof\": %" PRIu64 ", \"error\": %" PRIu64 "}",
		    k ? ", " : "", t->text, t->deny ? "deny" : "allow",
		    t->attempts, t->connected, t->ok, t->refused, t->reset,
		    t->timeout, t->eof, t->error);
	}
	printf("]}\n");
	return 0;
}

/* ---------------------------------------------------------------- dns */

enum { Q_A, Q_AAAA, Q_EXFIL, Q_TXT, Q_CLASSES };
static const char *q_names[Q_CLASSES] = { "a", "aaaa", "exfil", "txt" };
#define RCODES	6	/* NOERROR .. REFUSED; others counted apart */
static const char *rcode_names[RCODES] = { "NOERROR", "FORMERR", "SERVFAIL",
    "NXDOMAIN", "NOTIMP", "REFUSED" };

struct qstats {
	uint64_t	 sent, answered, with_answer, timeout, rcode[RCODES],
			 rcode_other;
};

struct pending {
	bool		 active;
	uint16_t	 id;
	uint8_t		 cls;
	uint64_t	 deadline;
};

static int
qclass_of(uint64_t i)
{
	unsigned r = (unsigned)(i % 10);

	if (r < 4)
		return Q_A;
	if (r == 4)
		return Q_AAAA;
	if (r < 9)
		return Q_EXFIL;
	return Q_TXT;
}

/* Writes NAME in wire form at p; returns the length, or 0 if it does not fit. */
static size_t
put_name(unsigned char *p, size_t cap, const char *name)
{
	size_t len = 0;

	while (*name != '\0') {
		const char *dot = strchr(name, '.');
		size_t l = dot ? (size_t)(dot - name) : strlen(name);

		if (l == 0 || l > 63 || len + 1 + l + 1 > cap)
			return 0;
		p[len++] = (unsigned char)l;
		memcpy(p + len, name, l);
		len += l;
		name += l;
		if (*name == '.')
			name++;
	}
	p[len++] = 0;
	return len;
}

static size_t
build_query(unsigned char *q, size_t cap, uint16_t id, int cls, uint64_t i,
    const struct opts *o)
{
	char name[256];
	uint16_t type = 1;
	size_t n;

	switch (cls) {
	case Q_AAAA:
		type = 28;
		break;
	case Q_TXT:
		type = 16;
		break;
	case Q_EXFIL:
		/* a new name each time, as an exfiltrating client makes */
		snprintf(name, sizeof(name), "d%" PRIx64 "-%08x.%s", i,
		    (unsigned)random(), o->zone);
		break;
	}
	if (cls != Q_EXFIL)
		snprintf(name, sizeof(name), "%s", o->name);
	if (cap < 12 + 4)
		return 0;
	memset(q, 0, 12);
	q[0] = (unsigned char)(id >> 8);
	q[1] = (unsigned char)id;
	q[2] = 0x01;	/* RD */
	q[5] = 1;	/* QDCOUNT */
	if ((n = put_name(q + 12, cap - 12 - 4, name)) == 0)
		return 0;
	n += 12;
	q[n++] = (unsigned char)(type >> 8);
	q[n++] = (unsigned char)type;
	q[n++] = 0;
	q[n++] = 1;	/* IN */
	return n;
}

static int
run_dns(struct opts *o)
{
	static struct pending slots[CONC_MAX];
	static int16_t by_id[65536];
	struct qstats st[Q_CLASSES];
	struct sockaddr_in srv = { .sin_family = AF_INET, .sin_port = htons(53) };
	unsigned char q[512], r[4096];
	uint64_t t0, now, started = 0, late = 0, send_errors = 0, bad = 0;
	unsigned inflight = 0, k;
	uint16_t next_id = (uint16_t)random();
	int fd, rcvbuf = 4 << 20, c;

	memset(st, 0, sizeof(st));
	memset(by_id, 0xff, sizeof(by_id));
	srv.sin_addr = o->addr;
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd == -1 || connect(fd, (struct sockaddr *)&srv, sizeof(srv)) == -1) {
		perror("soakload: dns socket");
		return 2;
	}
	(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
	t0 = now = now_ns();
	for (;;) {
		uint64_t want = due(o, t0, now);
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		ssize_t n;

		while (started < want && inflight < o->conc) {
			struct pending *p = NULL;
			size_t len;

			for (k = 0; k < o->conc; k++)
				if (!slots[k].active) {
					p = &slots[k];
					break;
				}
			/* an id still in use (a very slow answer): skip it */
			while (by_id[next_id] != -1)
				next_id++;
			c = qclass_of(started);
			len = build_query(q, sizeof(q), next_id, c, started, o);
			if (p == NULL || len == 0)
				break;
			if (send(fd, q, len, MSG_DONTWAIT) == -1) {
				if (errno == EAGAIN || errno == ENOBUFS)
					break;
				send_errors++;
				started++;
				continue;
			}
			p->active = true;
			p->id = next_id;
			p->cls = (uint8_t)c;
			p->deadline = now + o->timeout_ns;
			by_id[next_id] = (int16_t)(p - slots);
			next_id++;
			st[c].sent++;
			started++;
			inflight++;
		}
		if (started == o->count && inflight == 0)
			break;
		if ((double)(now - t0) / 1e9 > o->deadline_s)
			break;
		if (poll(&pfd, 1, 2) == -1 && errno != EINTR) {
			perror("soakload: poll");
			return 2;
		}
		while ((n = recv(fd, r, sizeof(r), MSG_DONTWAIT)) >= 0) {
			uint16_t id;
			unsigned rc, an;
			struct pending *p;

			if (n < 12) {
				bad++;
				continue;
			}
			id = (uint16_t)(r[0] << 8 | r[1]);
			rc = r[3] & 0x0f;
			an = (unsigned)(r[6] << 8 | r[7]);
			if (by_id[id] == -1) {
				late++;
				continue;
			}
			p = &slots[by_id[id]];
			by_id[id] = -1;
			p->active = false;
			inflight--;
			st[p->cls].answered++;
			if (rc < RCODES)
				st[p->cls].rcode[rc]++;
			else
				st[p->cls].rcode_other++;
			if (an > 0)
				st[p->cls].with_answer++;
		}
		now = now_ns();
		for (k = 0; k < o->conc; k++)
			if (slots[k].active && slots[k].deadline <= now) {
				st[slots[k].cls].timeout++;
				by_id[slots[k].id] = -1;
				slots[k].active = false;
				inflight--;
			}
	}
	for (k = 0; k < o->conc; k++)
		if (slots[k].active) {
			st[slots[k].cls].timeout++;
			slots[k].active = false;
		}
	printf("{\"mode\": \"dns\", \"elapsed_s\": %.3f, \"started\": %" PRIu64
	    ", \"send_errors\": %" PRIu64 ", \"late\": %" PRIu64
	    ", \"short\": %" PRIu64 ", \"classes\": {",
	    (double)(now_ns() - t0) / 1e9, started, send_errors, late, bad);
	for (c = 0; c < Q_CLASSES; c++) {
		int j;

		printf("%s\"%s\": {\"sent\": %" PRIu64 ", \"answered\": %" PRIu64
		    ", \"with_answer\": %" PRIu64 ", \"timeout\": %" PRIu64,
		    c ? ", " : "", q_names[c], st[c].sent, st[c].answered,
		    st[c].with_answer, st[c].timeout);
		for (j = 0; j < RCODES; j++)
			printf(", \"%s\": %" PRIu64, rcode_names[j], st[c].rcode[j]);
		printf(", \"other_rcode\": %" PRIu64 "}", st[c].rcode_other);
	}
	printf("}}\n");
	close(fd);
	return 0;
}

/* ---------------------------------------------------------------- sink */

struct listener {
	int		 fd;
	char		 text[32];
	uint64_t	 accepted, deny_bytes;
};

struct sconn {
	int		 fd;
	int		 lst;	/* its listener */
	bool		 answered;
};

static void
sink_write(const char *path, const struct listener *ls, int nls)
{
	char tmp[4096];
	FILE *f;
	int i;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	if ((f = fopen(tmp, "w")) == NULL)
		return;
	fprintf(f, "{");
	for (i = 0; i < nls; i++)
		fprintf(f, "%s\"%s\": {\"accepted\": %" PRIu64
		    ", \"deny_bytes\": %" PRIu64 "}", i ? ", " : "",
		    ls[i].text, ls[i].accepted, ls[i].deny_bytes);
	fprintf(f, "}\n");
	if (fclose(f) == 0)
		(void)rename(tmp, path);
}

static int
run_sink(const char *path, int argc, char **argv)
{
	static struct sconn conns[SINK_CONNS_MAX];
	struct listener ls[LISTEN_MAX];
	struct epoll_event ev, evs[256];
	sigset_t sigs;
	uint64_t last = 0;
	int ep, sfd, nls = 0, i, n, one = 1, defer = 5;
	bool running = true;

	if (argc == 0 || argc > LISTEN_MAX || path == NULL)
		usage();
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigprocmask(SIG_BLOCK, &sigs, NULL);
	if ((sfd = signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK)) == -1 ||
	    (ep = epoll_create1(EPOLL_CLOEXEC)) == -1) {
		perror("soakload: sink");
		return 2;
	}
	ev.events = EPOLLIN;
	ev.data.u64 = UINT64_MAX;
	(void)epoll_ctl(ep, EPOLL_CTL_ADD, sfd, &ev);
	for (i = 0; i < argc; i++) {
		struct sockaddr_in sin;
		struct listener *l = &ls[nls];

		parse_addr_port(argv[i], &sin, NULL);
		memset(l, 0, sizeof(*l));
		snprintf(l->text, sizeof(l->text), "%s", argv[i]);
		l->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (l->fd == -1 ||
		    setsockopt(l->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == -1 ||
		    setsockopt(l->fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &defer,
		    sizeof(defer)) == -1 ||
		    bind(l->fd, (struct sockaddr *)&sin, sizeof(sin)) == -1 ||
		    listen(l->fd, 4096) == -1) {
			fprintf(stderr, "soakload: listen %s: %s\n", argv[i],
			    strerror(errno));
			return 2;
		}
		ev.events = EPOLLIN;
		ev.data.u64 = (uint64_t)nls | (1ull << 32);
		(void)epoll_ctl(ep, EPOLL_CTL_ADD, l->fd, &ev);
		nls++;
	}
	for (i = 0; i < SINK_CONNS_MAX; i++)
		conns[i].fd = -1;
	sink_write(path, ls, nls);
	while (running) {
		uint64_t now;

		n = epoll_wait(ep, evs, 256, 200);
		for (i = 0; i < n; i++) {
			uint64_t u = evs[i].data.u64;

			if (u == UINT64_MAX) {
				running = false;
			} else if (u >> 32) {
				struct listener *l = &ls[u & 0xffffffff];
				int fd;

				while ((fd = accept4(l->fd, NULL, NULL,
				    SOCK_NONBLOCK | SOCK_CLOEXEC)) != -1) {
					l->accepted++;
					if (fd >= SINK_CONNS_MAX) {
						close(fd);
						continue;
					}
					conns[fd].fd = fd;
					conns[fd].lst = (int)(l - ls);
					conns[fd].answered = false;
					ev.events = EPOLLIN;
					ev.data.u64 = (uint64_t)fd;
					(void)epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
				}
			} else {
				struct sconn *c = &conns[u];
				char buf[512];
				ssize_t r = recv(c->fd, buf, sizeof(buf), 0);

				if (r > 0) {
					if (r >= 9 && memcmp(buf, "soak-deny", 9) == 0)
						ls[c->lst].deny_bytes++;
					if (!c->answered) {
						c->answered = true;
						(void)send(c->fd, "ok\n", 3, MSG_NOSIGNAL);
					}
					continue;
				}
				if (r == -1 && (errno == EAGAIN || errno == EINTR))
					continue;
				/* the client's reset or close */
				(void)epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
				close(c->fd);
				c->fd = -1;
			}
		}
		now = now_ns();
		if (now - last > 1000000000u) {
			sink_write(path, ls, nls);
			last = now;
		}
	}
	sink_write(path, ls, nls);
	return 0;
}

int
main(int argc, char **argv)
{
	struct opts o = { .conc = 64, .timeout_ns = 5000000000u,
	    .deadline_s = 3600, .zone = "exfil.evil.test", .name = "a.test",
	    .port_first = PORT_FIRST };
	const char *mode;
	bool have_addr = false;
	int ch;

	if (argc < 2)
		usage();
	mode = argv[1];
	argv++;
	argc--;
	while ((ch = getopt(argc, argv, "s:n:r:c:t:d:z:a:o:p:")) != -1) {
		switch (ch) {
		case 's':
			if (inet_pton(AF_INET, optarg, &o.addr) != 1)
				usage();
			have_addr = true;
			break;
		case 'n':
			o.count = parse_u64(optarg, 1, UINT64_C(1) << 40);
			break;
		case 'r':
			o.rate = parse_double(optarg);
			break;
		case 'c':
			o.conc = (unsigned)parse_u64(optarg, 1, CONC_MAX);
			break;
		case 't':
			o.timeout_ns = parse_u64(optarg, 1, 600000) * 1000000u;
			break;
		case 'd':
			o.deadline_s = parse_double(optarg);
			break;
		case 'z':
			o.zone = optarg;
			break;
		case 'a':
			o.name = optarg;
			break;
		case 'o':
			o.out = optarg;
			break;
		case 'p':
			o.port_first = (uint16_t)parse_u64(optarg, PORT_FIRST,
			    PORT_LAST);
			break;
		default:
			usage();
		}
	}
	argc -= optind;
	argv += optind;
	signal(SIGPIPE, SIG_IGN);
	raise_nofile();
	srandom((unsigned)(now_ns() ^ (uint64_t)getpid()));
	if (strcmp(mode, "sink") == 0)
		return run_sink(o.out, argc, argv);
	if (!have_addr || o.count == 0 || o.rate == 0)
		usage();
	if (strcmp(mode, "conn") == 0)
		return run_conn(&o, argc, argv);
	if (strcmp(mode, "dns") == 0 && argc == 0)
		return run_dns(&o);
	usage();
	return 1;
}
