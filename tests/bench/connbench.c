/* connbench.c: opens TCP connections back to back (TLS hello or HTTP GET, direct or through a proxy) and reports their rate and setup latency. */
/*
 * connbench -m tls|http -a ADDR -p PORT [-n NAME] [-H HELLO] [-x PROXY:PORT]
 *           [-c CONC] [-d SECONDS] [-r RATE] [-t TIMEOUT_MS]
 * connbench -m status -S CTLSOCK [-d SECONDS]
 *
 * One thread, epoll, CONC connections in flight. Each connection:
 *   tls   sends the ClientHello read from HELLO (a real one, made once by
 *         the caller; the server does the full handshake's work for it) and
 *         ends at the first byte of the server's answer, which must be a
 *         handshake record; then closes with a reset (no TIME_WAIT here).
 *   http  sends "GET / HTTP/1.1" with Host NAME and Connection: close, reads
 *         to the end, which must start with "HTTP/1.1 200".
 * With -x the connection goes to an explicit proxy first: CONNECT NAME:PORT
 * for tls, an absolute-URI GET for http.
 *
 * Setup latency is from connect() to the first byte of the server's answer
 * (for a proxy, of the answer behind it), so it includes every gateway's
 * hold of the first flight. Without -r the load is closed-loop (as fast as
 * CONC connections allow); with -r, new connections start at RATE per
 * second, at most CONC at once, for latency at a light load.
 *
 * -m status opens no connection: it asks sluiced's status over its control
 * socket every 250 ms for SECONDS, beside a load run by another process,
 * and reports the largest writer queue depth and count of flows held for
 * inspection (s_depth_max, s_held_max). One process for the whole load,
 * not a loop of `sluice status` in the shell: on this 2-CPU VM that
 * loop's processes (a sluice and two seds every 250 ms) took about a tenth
 * of S's TLS connection rate, which B1 and the proxies did not pay.
 *
 * Prints one JSON object on stdout. Exit status 0, or 1 on a usage error.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "gateway/cli.h"

#define CONC_MAX	1024
#define SAMPLE_NS	250000000ull
#define SAMPLES_MAX	(4u << 20)
#define HELLO_MAX	16384
#define REQ_MAX		1024

enum mode { MODE_TLS, MODE_HTTP, MODE_STATUS };

enum state {
	ST_FREE,
	ST_CONNECTING,
	ST_PROXY_REPLY,		/* CONNECT sent, reading the proxy's answer */
	ST_ANSWER,		/* request sent, reading the server's answer */
};

enum err_kind { E_CONNECT, E_RESET, E_TIMEOUT, E_PROTO, E_MAX };

static const char *err_names[E_MAX] = { "connect", "reset", "timeout", "proto" };

struct conn {
	enum state	 st;
	int		 fd;
	uint64_t	 t_start;
	uint64_t	 t_connected;
	uint64_t	 deadline;
	uint64_t	 t_first;	/* the answer's first byte, 0 before */
	size_t		 nin;		/* bytes of answer (or proxy reply) read */
	char		 head[64];	/* the answer's first bytes */
	char		 preply[512];	/* the proxy's reply head */
};

struct opts {
	enum mode		 mode;
	struct sockaddr_in	 dst;		/* where connect() goes */
	bool			 proxy;
	const char		*name;
	unsigned		 port;		/* the server's port (for CONNECT) */
	const char		*target;	/* the server's address, text */
	unsigned		 conc;
	double			 secs;
	double			 rate;
	uint64_t		 timeout_ns;
	const char		*ctl;		/* -S: the control socket */
};

struct samples {
	uint32_t	*v;
	size_t		 n;
};

static struct opts o;
static uint8_t hello[HELLO_MAX];
static size_t hello_len;
static char req[REQ_MAX];
static size_t req_len;
static char preq[REQ_MAX];
static size_t preq_len;
static struct samples lat, clat;
static uint64_t n_ok, n_err[E_MAX], n_started;
static json_int_t s_depth_max = -1, s_held_max = -1;
static unsigned s_samples, s_sample_errors;

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
	fprintf(stderr, "usage: connbench -m tls|http -a ADDR -p PORT [-n NAME] "
	    "[-H HELLO] [-x PROXY:PORT] [-c CONC] [-d SECONDS] [-r RATE] "
	    "[-t TIMEOUT_MS]\n       connbench -m status -S CTLSOCK "
	    "[-d SECONDS]\n");
	exit(1);
}

static unsigned long
num(const char *s, unsigned long lo, unsigned long hi, const char *what)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) {
		fprintf(stderr, "connbench: bad %s: %s\n", what, s);
		exit(1);
	}
	return v;
}

static double
fnum(const char *s, double lo, double hi, const char *what)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno != 0 || end == s || *end != '\0' || !(v >= lo && v <= hi)) {
		fprintf(stderr, "connbench: bad %s: %s\n", what, s);
		exit(1);
	}
	return v;
}

static void
parse_addr(const char *s, unsigned port, struct sockaddr_in *sin)
{
	memset(sin, 0, sizeof(*sin));
	sin->sin_family = AF_INET;
	sin->sin_port = htons((uint16_t)port);
	if (inet_pton(AF_INET, s, &sin->sin_addr) != 1) {
		fprintf(stderr, "connbench: bad address: %s\n", s);
		exit(1);
	}
}

static void
read_hello(const char *path)
{
	FILE *f;

	if ((f = fopen(path, "rb")) == NULL) {
		perror(path);
		exit(1);
	}
	hello_len = fread(hello, 1, sizeof(hello), f);
	fclose(f);
	/* A handshake record: type 22, then a version and a length. */
	if (hello_len < 6 || hello[0] != 0x16) {
		fprintf(stderr, "connbench: %s is no TLS handshake record\n", path);
		exit(1);
	}
}

static void
build_requests(void)
{
	int n;

	if (o.mode == MODE_HTTP) {
		if (o.proxy)
			n = snprintf(req, sizeof(req), "GET http://%s/ HTTP/1.1\r\n"
			    "Host: %s\r\nConnection: close\r\n\r\n", o.name, o.name);
		else
			n = snprintf(req, sizeof(req), "GET / HTTP/1.1\r\n"
			    "Host: %s\r\nConnection: close\r\n\r\n", o.name);
		req_len = (size_t)n;
	}
	if (o.mode == MODE_TLS && o.proxy) {
		n = snprintf(preq, sizeof(preq), "CONNECT %s:%u HTTP/1.1\r\n"
		    "Host: %s:%u\r\n\r\n", o.name, o.port, o.name, o.port);
		preq_len = (size_t)n;
	}
}

static void
sample_add(struct samples *s, uint64_t ns)
{
	uint64_t us = ns / 1000;

	if (s->n < SAMPLES_MAX)
		s->v[s->n++] = us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
}

static int
cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static uint32_t
pct(const struct samples *s, double p)
{
	size_t i;

	if (s->n == 0)
		return 0;
	i = (size_t)(p * (double)(s->n - 1) + 0.5);
	return s->v[i];
}

static size_t
count_above(const struct samples *s, uint32_t us)
{
	size_t i, n = 0;

	for (i = 0; i < s->n; i++)
		if (s->v[i] > us)
			n++;
	return n;
}

static void
conn_end(int ep, struct conn *c, bool reset)
{
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };

	epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
	/* A reset leaves no TIME_WAIT on the client, so ports are reusable. */
	if (reset)
		setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	close(c->fd);
	c->fd = -1;
	c->st = ST_FREE;
}

static void
conn_fail(int ep, struct conn *c, enum err_kind k)
{
	n_err[k]++;
	conn_end(ep, c, true);
}

static void
conn_done(int ep, struct conn *c, bool reset)
{
	n_ok++;
	sample_add(&lat, c->t_first - c->t_start);
	sample_add(&clat, c->t_connected - c->t_start);
	conn_end(ep, c, reset);
}

static int
conn_start(int ep, struct conn *c, uint64_t now)
{
	struct epoll_event ev;
	int fd, on = 1;

	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd == -1)
		return -1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
	n_started++;
	c->fd = fd;
	c->t_start = now;
	c->deadline = now + o.timeout_ns;
	c->t_first = 0;
	c->nin = 0;
	c->st = ST_CONNECTING;
	ev.events = EPOLLOUT | EPOLLIN | EPOLLRDHUP;
	ev.data.ptr = c;
	if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == -1) {
		close(fd);
		c->fd = -1;
		c->st = ST_FREE;
		return -1;
	}
	if (connect(fd, (struct sockaddr *)&o.dst, sizeof(o.dst)) == -1 &&
	    errno != EINPROGRESS) {
		conn_fail(ep, c, E_CONNECT);
		return 0;
	}
	return 0;
}

static bool
send_all(int fd, const void *buf, size_t len)
{
	ssize_t n;

	/* A few hundred bytes on a fresh connection: the socket buffer takes
	 * them in one call, anything else is an error worth seeing. */
	n = send(fd, buf, len, MSG_NOSIGNAL);
	return n == (ssize_t)len;
}

static void
send_request(int ep, struct conn *c)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP, .data.ptr = c };
	bool ok;

	if (o.mode == MODE_TLS)
		ok = send_all(c->fd, hello, hello_len);
	else
		ok = send_all(c->fd, req, req_len);
	if (!ok) {
		conn_fail(ep, c, E_RESET);
		return;
	}
	c->st = ST_ANSWER;
	c->nin = 0;
	epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
}

static void
on_connected(int ep, struct conn *c, uint64_t now)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP, .data.ptr = c };
	int err = 0;
	socklen_t len = sizeof(err);

	if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) == -1 || err != 0) {
		conn_fail(ep, c, err == ECONNRESET ? E_RESET : E_CONNECT);
		return;
	}
	c->t_connected = now;
	if (o.proxy && o.mode == MODE_TLS) {
		if (!send_all(c->fd, preq, preq_len)) {
			conn_fail(ep, c, E_RESET);
			return;
		}
		c->st = ST_PROXY_REPLY;
		c->nin = 0;
		epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
		return;
	}
	send_request(ep, c);
}

/* Reads the proxy's reply to CONNECT up to its empty line; anything the
 * server sent behind it in the same read would be lost, but the server
 * cannot speak before it has our hello. */
static void
on_proxy_reply(int ep, struct conn *c)
{
	ssize_t n;

	n = recv(c->fd, c->preply + c->nin, sizeof(c->preply) - 1 - c->nin, 0);
	if (n <= 0) {
		if (n == -1 && errno == EAGAIN)
			return;
		conn_fail(ep, c, n == 0 ? E_PROTO : E_RESET);
		return;
	}
	c->nin += (size_t)n;
	c->preply[c->nin] = '\0';
	if (strstr(c->preply, "\r\n\r\n") == NULL) {
		if (c->nin == sizeof(c->preply) - 1)
			conn_fail(ep, c, E_PROTO);
		return;
	}
	if (strncmp(c->preply, "HTTP/1.0 200", 12) != 0 &&
	    strncmp(c->preply, "HTTP/1.1 200", 12) != 0) {
		conn_fail(ep, c, E_PROTO);
		return;
	}
	send_request(ep, c);
}

static void
on_answer(int ep, struct conn *c, uint64_t now)
{
	char buf[16384];
	ssize_t n;
	size_t k;

	for (;;) {
		n = recv(c->fd, buf, sizeof(buf), 0);
		if (n == -1 && errno == EAGAIN)
			return;
		if (n == -1) {
			conn_fail(ep, c, E_RESET);
			return;
		}
		if (n == 0)
			break;
		if (c->t_first == 0)
			c->t_first = now;
		k = sizeof(c->head) - c->nin;
		if (k > (size_t)n)
			k = (size_t)n;
		memcpy(c->head + c->nin, buf, k);
		c->nin += k;
		if (o.mode == MODE_TLS) {
			/* 22: a handshake record (the ServerHello); an
			 * alert (21) means the server refused the hello. */
			if ((uint8_t)c->head[0] != 0x16) {
				conn_fail(ep, c, E_PROTO);
				return;
			}
			conn_done(ep, c, true);
			return;
		}
	}
	/* HTTP: the server closed after its answer. */
	if (c->nin < 12 || memcmp(c->head, "HTTP/1.1 200", 12) != 0) {
		conn_fail(ep, c, c->nin == 0 ? E_RESET : E_PROTO);
		return;
	}
	conn_done(ep, c, false);
}

static void
on_event(int ep, struct conn *c, uint32_t events, uint64_t now)
{
	switch (c->st) {
	case ST_CONNECTING:
		if (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))
			on_connected(ep, c, now);
		break;
	case ST_PROXY_REPLY:
		on_proxy_reply(ep, c);
		break;
	case ST_ANSWER:
		on_answer(ep, c, now);
		break;
	case ST_FREE:
		break;
	}
}

/* json member a.b of v as an integer, or -1 */
static json_int_t
member(json_t *v, const char *a, const char *b)
{
	json_t *n = json_object_get(json_object_get(v, a), b);

	return json_is_integer(n) ? json_integer_value(n) : -1;
}

/* One status of sluiced: the writer's queue depth and the held flows. */
static void
sample(void)
{
	json_t *ask, *reply = NULL;
	json_int_t d, h;
	char err[256];

	if ((ask = json_pack("{s:s}", "cmd", "status")) == NULL ||
	    ctl_client_call(o.ctl, ask, &reply, err, sizeof(err)) != 0) {
		s_sample_errors++;
		json_decref(ask);
		return;
	}
	json_decref(ask);
	d = member(reply, "store", "depth");
	h = member(reply, "queue", "held_flows");
	json_decref(reply);
	if (d < 0 || h < 0) {
		s_sample_errors++;
		return;
	}
	s_samples++;
	if (d > s_depth_max)
		s_depth_max = d;
	if (h > s_held_max)
		s_held_max = h;
}

/* -m status: samples for o.secs, then prints the largest of each. */
static int
watch(void)
{
	uint64_t t_end = now_ns() + (uint64_t)(o.secs * 1e9), next = now_ns();
	struct timespec ts;
	uint64_t now;

	while ((now = now_ns()) < t_end) {
		if (now < next) {
			ts.tv_sec = (time_t)((next - now) / 1000000000u);
			ts.tv_nsec = (long)((next - now) % 1000000000u);
			nanosleep(&ts, NULL);
			continue;
		}
		sample();
		next += SAMPLE_NS;
	}
	printf("{\"s_depth_max\": %" JSON_INTEGER_FORMAT
	    ", \"s_held_max\": %" JSON_INTEGER_FORMAT
	    ", \"s_samples\": %u, \"s_sample_errors\": %u}\n",
	    s_depth_max < 0 ? 0 : s_depth_max, s_held_max < 0 ? 0 : s_held_max,
	    s_samples, s_sample_errors);
	return 0;
}

static void
run(struct conn *cs)
{
	struct epoll_event evs[256];
	uint64_t t0, t_end, t_drain, now, next_start, gap_ns = 0;
	size_t i, inflight;
	int ep, n, wait_ms;

	if ((ep = epoll_create1(EPOLL_CLOEXEC)) == -1) {
		perror("epoll_create1");
		exit(1);
	}
	for (i = 0; i < o.conc; i++) {
		cs[i].st = ST_FREE;
		cs[i].fd = -1;
	}
	t0 = now_ns();
	t_end = t0 + (uint64_t)(o.secs * 1e9);
	t_drain = t_end + o.timeout_ns;
	if (o.rate > 0)
		gap_ns = (uint64_t)(1e9 / o.rate);
	next_start = t0;
	for (;;) {
		now = now_ns();
		inflight = 0;
		for (i = 0; i < o.conc; i++) {
			if (cs[i].st != ST_FREE && now >= cs[i].deadline)
				conn_fail(ep, &cs[i], E_TIMEOUT);
			if (cs[i].st == ST_FREE && now < t_end &&
			    (gap_ns == 0 || now >= next_start)) {
				if (conn_start(ep, &cs[i], now) == -1)
					n_err[E_CONNECT]++;
				next_start += gap_ns;
			}
			if (cs[i].st != ST_FREE)
				inflight++;
		}
		if (now >= t_end && inflight == 0)
			break;
		if (now >= t_drain)
			break;
		wait_ms = 100;
		if (gap_ns != 0 && now < t_end) {
			wait_ms = next_start > now ?
			    (int)((next_start - now) / 1000000) : 0;
		}
		n = epoll_wait(ep, evs, 256, wait_ms);
		now = now_ns();
		for (int j = 0; j < n; j++)
			on_event(ep, evs[j].data.ptr, evs[j].events, now);
	}
	for (i = 0; i < o.conc; i++)
		if (cs[i].st != ST_FREE)
			conn_fail(ep, &cs[i], E_TIMEOUT);
	close(ep);
}

int
main(int argc, char **argv)
{
	struct conn *cs;
	const char *addr = NULL, *hello_path = NULL, *proxy = NULL;
	uint64_t nerr = 0;
	int ch, i;

	o.mode = MODE_HTTP;
	o.conc = 1;
	o.secs = 3;
	o.timeout_ns = 3000000000ull;
	while ((ch = getopt(argc, argv, "m:a:p:n:H:x:c:d:r:t:S:")) != -1) {
		switch (ch) {
		case 'm':
			if (strcmp(optarg, "tls") == 0)
				o.mode = MODE_TLS;
			else if (strcmp(optarg, "http") == 0)
				o.mode = MODE_HTTP;
			else if (strcmp(optarg, "status") == 0)
				o.mode = MODE_STATUS;
			else
				usage();
			break;
		case 'a': addr = optarg; break;
		case 'p': o.port = (unsigned)num(optarg, 1, 65535, "port"); break;
		case 'n': o.name = optarg; break;
		case 'H': hello_path = optarg; break;
		case 'x': proxy = optarg; break;
		case 'c': o.conc = (unsigned)num(optarg, 1, CONC_MAX, "concurrency"); break;
		case 'd': o.secs = fnum(optarg, 0.1, 600, "duration"); break;
		case 'r': o.rate = fnum(optarg, 0, 1e6, "rate"); break;
		case 't':
			o.timeout_ns = num(optarg, 1, 60000, "timeout") * 1000000ull;
			break;
		case 'S': o.ctl = optarg; break;
		default:
			usage();
		}
	}
	if (o.mode == MODE_STATUS) {
		if (o.ctl == NULL)
			usage();
		return watch();
	}
	if (addr == NULL || o.port == 0 || o.name == NULL)
		usage();
	if (o.mode == MODE_TLS) {
		if (hello_path == NULL)
			usage();
		read_hello(hello_path);
	}
	o.target = addr;
	if (proxy != NULL) {
		char host[64], *colon;

		if (strlen(proxy) >= sizeof(host))
			usage();
		strcpy(host, proxy);
		if ((colon = strrchr(host, ':')) == NULL)
			usage();
		*colon = '\0';
		parse_addr(host, (unsigned)num(colon + 1, 1, 65535, "proxy port"),
		    &o.dst);
		o.proxy = true;
	} else
		parse_addr(addr, o.port, &o.dst);
	build_requests();
	lat.v = calloc(SAMPLES_MAX, sizeof(uint32_t));
	clat.v = calloc(SAMPLES_MAX, sizeof(uint32_t));
	cs = calloc(o.conc, sizeof(*cs));
	if (lat.v == NULL || clat.v == NULL || cs == NULL) {
		perror("calloc");
		return 1;
	}
	run(cs);
	qsort(lat.v, lat.n, sizeof(uint32_t), cmp_u32);
	qsort(clat.v, clat.n, sizeof(uint32_t), cmp_u32);
	for (i = 0; i < E_MAX; i++)
		nerr += n_err[i];
	printf("{\"mode\": \"%s\", \"conc\": %u, \"secs\": %.3f, \"target_rate\": %.1f, "
	    "\"started\": %" PRIu64 ", \"ok\": %" PRIu64 ", \"errors\": %" PRIu64 ", "
	    "\"rate\": %.1f, \"lat_p50_us\": %u, \"lat_p90_us\": %u, "
	    "\"lat_p99_us\": %u, \"lat_max_us\": %u, \"slow_200ms\": %zu, "
	    "\"connect_p50_us\": %u, \"connect_p99_us\": %u",
	    o.mode == MODE_TLS ? "tls" : "http", o.conc, o.secs, o.rate,
	    n_started, n_ok, nerr, (double)n_ok / o.secs,
	    pct(&lat, 0.50), pct(&lat, 0.90), pct(&lat, 0.99), pct(&lat, 1.0),
	    count_above(&lat, 200000),
	    pct(&clat, 0.50), pct(&clat, 0.99));
	for (i = 0; i < E_MAX; i++)
		printf(", \"err_%s\": %" PRIu64, err_names[i], n_err[i]);
	printf("}\n");
	free(lat.v);
	free(clat.v);
	free(cs);
	return 0;
}
