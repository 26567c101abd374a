/* test_resolver.c: the resolver's sockets against the kernel, in a private network namespace. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <cmocka.h>

#include "tests/unit/testns.h"

#include "dns/dns.h"

/*
 * The binary moves into a network namespace of its own, so that fake
 * upstreams can listen on port 53 of 127.0.0.2 and 127.0.0.3 and nothing
 * needs tearing down. Needs root; skips otherwise. Time is the test's:
 * dns_resolver_process is handed a clock that only moves when a test
 * moves it, so timeouts are exact and instant.
 *
 *   127.0.0.1:5300  the resolver (UDP and TCP)
 *   127.0.0.2:53    upstream 0      127.0.0.3:53    upstream 1
 *   127.0.0.9:53    a stranger      127.0.0.1:<any> the client
 */

#define RES_PORT	5300
#define WAIT_MS		1000	/* for something that should arrive */
#define ABSENT_MS	100	/* for something that should not */
#define UP0		"127.0.0.2"
#define UP1		"127.0.0.3"
#define STRANGER	"127.0.0.9"

static const char *env_skip;

struct done_rec {
	char			name[DNS_NAME_MAX + 1];
	int			rcode;
	bool			had_response;
	enum dns_parse_error	perr;
	bool			over_limit;
	uint16_t		id;
};

struct fixture {
	struct dns_resolver	*r;
	int			 up[2];		/* the fake upstreams */
	int			 stranger;
	int			 client;
	uint64_t		 now;
	/* what the ops saw */
	size_t			 ndone;
	struct done_rec		 done[1024];
	bool			 answer_locally;	/* query op: DNS_ANSWER */
	size_t			 nresponse;	/* response op calls */
	bool			 edit;		/* response op: drop the last
						 * record, TTLs to EDIT_TTL */
	uint64_t		 lost;		/* the lost op's sum */
	size_t			 nlost;		/* its calls */
};

#define EDIT_TTL	5

static int
group_setup(void **state)
{
	(void)state;
	env_skip = testns_enter();
	return 0;
}

static uint32_t
addr(const char *s)
{
	struct in_addr a;

	assert_int_equal(inet_pton(AF_INET, s, &a), 1);
	return a.s_addr;
}

static int
udp_bound(const char *a, uint16_t port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET,
	    .sin_port = htons(port), .sin_addr.s_addr = addr(a) };
	int fd, big = 4 << 20;

	fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
	assert_true(fd != -1);
	/* room for every question in flight at once */
	assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &big,
	    sizeof(big)), 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	return fd;
}

/* ---- the ops ---------------------------------------------------------- */

static enum dns_action
op_query(void *arg, struct dns_request *req, unsigned *rcode)
{
	struct fixture *fx = arg;

	if (fx->answer_locally || strcmp(req->name, "local.test") == 0) {
		*rcode = DNS_R_NXDOMAIN;
		return DNS_ANSWER;
	}
	return DNS_FORWARD;
}

static void
op_response(void *arg, struct dns_request *req, struct dns_response *r,
    unsigned *rcode)
{
	struct fixture *fx = arg;
	size_t i;

	fx->nresponse++;
	/* remembered in the request's own room, as dnsgw does */
	req->user.bytes[0] = r != NULL;
	/* a policy that filters: what a sandbox is sent, never what is kept */
	if (fx->edit && r != NULL && r->nrr > 0) {
		r->nrr--;
		for (i = 0; i < r->nrr; i++)
			r->rr[i].ttl = EDIT_TTL;
	}
	(void)rcode;
}

static void
op_done(void *arg, struct dns_request *req, int rcode)
{
	struct fixture *fx = arg;
	struct done_rec *d;

	if (fx->ndone == sizeof(fx->done) / sizeof(fx->done[0]))
		return;
	d = &fx->done[fx->ndone++];
	snprintf(d->name, sizeof(d->name), "%s", req->name);
	d->rcode = rcode;
	d->had_response = req->user.bytes[0];
	d->perr = req->perr;
	d->over_limit = req->over_limit;
	d->id = req->q.id;
}

static void
op_lost(void *arg, uint64_t n)
{
	struct fixture *fx = arg;

	assert_true(n > 0);
	fx->lost += n;
	fx->nlost++;
}

static const struct dns_resolver_ops ops = {
	.query = op_query,
	.response = op_response,
	.done = op_done,
	.lost = op_lost,
};

static int
fixture_setup(void **state)
{
	struct fixture *fx;
	uint32_t ups[2];
	char err[256];

	*state = NULL;
	if (env_skip != NULL)
		return 0;
	fx = calloc(1, sizeof(*fx));
	assert_non_null(fx);
	fx->now = 1000000;
	ups[0] = addr(UP0);
	ups[1] = addr(UP1);
	fx->up[0] = udp_bound(UP0, 53);
	fx->up[1] = udp_bound(UP1, 53);
	fx->stranger = udp_bound(STRANGER, 53);
	fx->client = udp_bound("127.0.0.1", 0);
	fx->r = dns_resolver_open(addr("127.0.0.1"), RES_PORT, ups, 2, &ops,
	    fx, err, sizeof(err));
	if (fx->r == NULL)
		fail_msg("%s", err);
	*state = fx;
	return 0;
}

static int
fixture_teardown(void **state)
{
	struct fixture *fx = *state;

	if (fx == NULL)
		return 0;
	dns_resolver_close(fx->r);
	close(fx->up[0]);
	close(fx->up[1]);
	close(fx->stranger);
	close(fx->client);
	free(fx);
	return 0;
}

#define NEED_ENV(state) do {						\
	if (*(state) == NULL) {						\
		print_message("skipped: %s\n", env_skip);		\
		skip();							\
	}								\
} while (0)

/* ---- driving the loop ------------------------------------------------- */

/* One turn of the loop: poll the resolver's descriptors up to ms, then
 * let it handle what is ready and what is due at fx->now. */
static void
turn(struct fixture *fx, int ms)
{
	struct pollfd pfd[2 + DNS_TCP_MAX + DNS_PENDING_MAX];
	size_t n;

	n = dns_resolver_pollfds(fx->r, pfd, sizeof(pfd) / sizeof(pfd[0]));
	assert_true(poll(pfd, n, ms) >= 0);
	dns_resolver_process(fx->r, pfd, n, fx->now);
}

/* Turns until fd is readable (or WAIT_MS); returns whether it is. */
static bool
turn_until(struct fixture *fx, int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	int i;

	for (i = 0; i < ms / 5; i++) {
		if (poll(&p, 1, 0) == 1)
			return true;
		turn(fx, 5);
	}
	return poll(&p, 1, 0) == 1;
}

static void
client_ask(struct fixture *fx, uint16_t id, const char *name, uint16_t type)
{
	struct sockaddr_in to = { .sin_family = AF_INET,
	    .sin_port = htons(RES_PORT), .sin_addr.s_addr = addr("127.0.0.1") };
	uint8_t msg[512];
	int len;

	len = dns_write_query(msg, sizeof(msg), id, name, type, 1);
	assert_true(len > 0);
	msg[2] |= 0x01;		/* RD */
	assert_int_equal(sendto(fx->client, msg, (size_t)len, 0,
	    (struct sockaddr *)&to, sizeof(to)), len);
}

/* The client's next answer, parsed; false if none came. */
static bool
client_answer(struct fixture *fx, struct dns_response *resp)
{
	uint8_t buf[4096];
	ssize_t n;

	if (!turn_until(fx, fx->client, WAIT_MS))
		return false;
	n = recv(fx->client, buf, sizeof(buf), 0);
	assert_true(n > 0);
	assert_int_equal(dns_parse_response(buf, (size_t)n, resp), DNS_PARSE_OK);
	return true;
}

/* A question as an upstream got it, with where it came from. */
struct upq {
	struct dns_query	q;
	struct sockaddr_in	from;
	uint8_t			raw[512];
	size_t			len;
};

static bool
upstream_get(struct fixture *fx, int fd, struct upq *u, int ms)
{
	socklen_t flen = sizeof(u->from);
	ssize_t n;

	if (!turn_until(fx, fd, ms))
		return false;
	n = recvfrom(fd, u->raw, sizeof(u->raw), 0,
	    (struct sockaddr *)&u->from, &flen);
	assert_true(n > 0);
	u->len = (size_t)n;
	assert_int_equal(dns_parse_query(u->raw, u->len, &u->q), DNS_PARSE_OK);
	return true;
}

/* Answers u from fd with addr a for name/type (or u's own), id given. */
static void
upstream_reply(int fd, const struct upq *u, uint16_t id, const char *name,
    uint16_t type, const char *a)
{
	struct dns_query q = u->q;
	struct dns_rr rr;
	uint8_t out[1024];
	int len;

	q.id = id;
	if (name != NULL)
		snprintf(q.qname, sizeof(q.qname), "%s", name);
	if (type != 0)
		q.qtype = type;
	memset(&rr, 0, sizeof(rr));
	snprintf(rr.name, sizeof(rr.name), "%s", q.qname);
	rr.type = DNS_T_A;
	rr.ttl = 60;
	assert_int_equal(inet_pton(AF_INET, a, rr.data.a), 1);
	len = dns_write_answer(out, sizeof(out), sizeof(out), &q, DNS_R_NOERROR,
	    &rr, 1);
	assert_true(len > 0);
	assert_int_equal(sendto(fd, out, (size_t)len, 0,
	    (const struct sockaddr *)&u->from, sizeof(u->from)), len);
}

static struct dns_resolver_stats
stats(struct fixture *fx)
{
	struct dns_resolver_stats st;

	dns_resolver_stats(fx->r, &st);
	return st;
}

static void
assert_a(const struct dns_response *resp, uint16_t id, const char *a)
{
	char got[INET_ADDRSTRLEN];

	assert_int_equal(resp->id, id);
	assert_int_equal(resp->rcode, DNS_R_NOERROR);
	assert_int_equal(resp->nrr, 1);
	assert_int_equal(resp->rr[0].type, DNS_T_A);
	inet_ntop(AF_INET, resp->rr[0].data.a, got, sizeof(got));
	assert_string_equal(got, a);
}

/* ---- tests ------------------------------------------------------------ */

/* A question goes to upstream 0 with an id of its own; the answer goes
 * back with the client's id. */
static void
test_forward(void **state)
{
	struct fixture *fx = *state;
	struct dns_response resp;
	struct upq u;

	NEED_ENV(state);
	client_ask(fx, 0x1234, "A.Test", DNS_T_A);
	assert_true(upstream_get(fx, fx->up[0], &u, WAIT_MS));
	assert_string_equal(u.q.qname, "a.test");
	assert_int_equal(u.q.qtype, DNS_T_A);
	assert_true(u.q.edns);
	assert_true(ntohs(u.from.sin_port) != RES_PORT);
	upstream_reply(fx->up[0], &u, u.q.id, NULL, 0, "192.0.2.1");
	assert_true(client_answer(fx, &resp));
	assert_a(&resp, 0x1234, "192.0.2.1");
	/* the client's spelling is echoed */
	assert_string_equal(resp.qname, "A.Test");
	assert_int_equal(fx->ndone, 1);
	assert_int_equal(fx->done[0].rcode, DNS_R_NOERROR);
	assert_true(fx->done[0].had_response);
	assert_int_equal(stats(fx).forwarded, 1);
	assert_int_equal(stats(fx).answered, 1);
	assert_int_equal(stats(fx).mismatched, 0);
	/* an answer for a name the ops decide is not sent upstream */
	client_ask(fx, 7, "local.test", DNS_T_A);
	assert_true(client_answer(fx, &resp));
	assert_int_equal(resp.rcode, DNS_R_NXDOMAIN);
	assert_false(upstream_get(fx, fx->up[0], &u, ABSENT_MS));
}

/*
 * Only the answer to the question asked is taken: a wrong id, name or
 * type is counted and ignored; a stranger's datagram to the same port
 * and one from the upstream's address but another port never even reach
 * the resolver (its socket is connected).
 */
static void
test_forged(void **state)
{
	struct fixture *fx = *state;
	struct dns_response resp;
	struct upq u;
	int other;

	NEED_ENV(state);
	client_ask(fx, 0x4242, "www.forged.test", DNS_T_A);
	assert_true(upstream_get(fx, fx->up[0], &u, WAIT_MS));
	upstream_reply(fx->up[0], &u, u.q.id ^ 0x5555, NULL, 0, "203.0.113.66");
	upstream_reply(fx->up[0], &u, u.q.id, "evil.test", 0, "203.0.113.66");
	upstream_reply(fx->up[0], &u, u.q.id, NULL, DNS_T_AAAA, "203.0.113.66");
	upstream_reply(fx->stranger, &u, u.q.id, NULL, 0, "203.0.113.66");
	other = udp_bound(UP0, 5454);
	upstream_reply(other, &u, u.q.id, NULL, 0, "203.0.113.66");
	close(other);
	turn(fx, ABSENT_MS);
	assert_int_equal(fx->ndone, 0);
	assert_int_equal(stats(fx).mismatched, 3);
	upstream_reply(fx->up[0], &u, u.q.id, NULL, 0, "192.0.2.20");
	assert_true(client_answer(fx, &resp));
	assert_a(&resp, 0x4242, "192.0.2.20");
	/* a second copy of the right answer is late: ignored */
	upstream_reply(fx->up[0], &u, u.q.id, NULL, 0, "203.0.113.66");
	turn(fx, ABSENT_MS);
	assert_int_equal(stats(fx).mismatched, 4);
	assert_int_equal(fx->ndone, 1);
	assert_false(turn_until(fx, fx->client, ABSENT_MS));
}

/* A silent upstream is given 1.5 s, then the next one is asked; once
 * none answers, SERVFAIL. */
static void
test_timeouts(void **state)
{
	struct fixture *fx = *state;
	struct dns_response resp;
	struct upq u0, u1;

	NEED_ENV(state);
	client_ask(fx, 1, "slow.test", DNS_T_A);
	assert_true(upstream_get(fx, fx->up[0], &u0, WAIT_MS));
	assert_int_equal(dns_resolver_timeout(fx->r, fx->now),
	    DNS_UPSTREAM_TRY_MS);
	fx->now += DNS_UPSTREAM_TRY_MS - 1;
	assert_false(upstream_get(fx, fx->up[1], &u1, ABSENT_MS));
	fx->now += 1;
	assert_true(upstream_get(fx, fx->up[1], &u1, WAIT_MS));
	assert_string_equal(u1.q.qname, "slow.test");
	/* the first upstream's late answer is no answer any more */
	upstream_reply(fx->up[0], &u0, u0.q.id, NULL, 0, "203.0.113.66");
	turn(fx, ABSENT_MS);
	assert_int_equal(fx->ndone, 0);
	upstream_reply(fx->up[1], &u1, u1.q.id, NULL, 0, "192.0.2.7");
	assert_true(client_answer(fx, &resp));
	assert_a(&resp, 1, "192.0.2.7");
	assert_int_equal(dns_resolver_timeout(fx->r, fx->now), -1);

	client_ask(fx, 2, "silent.test", DNS_T_A);
	assert_true(upstream_get(fx, fx->up[0], &u0, WAIT_MS));
	fx->now += DNS_UPSTREAM_TRY_MS;
	assert_true(upstream_get(fx, fx->up[1], &u1, WAIT_MS));
	fx->now += DNS_UPSTREAM_TRY_MS - 1;
	turn(fx, 0);
	assert_int_equal(fx->ndone, 1);
	fx->now += 1;
	assert_true(client_answer(fx, &resp));
	assert_int_equal(resp.id, 2);
	assert_int_equal(resp.rcode, DNS_R_SERVFAIL);
	assert_int_equal(fx->ndone, 2);
	assert_int_equal(fx->done[1].rcode, DNS_R_SERVFAIL);
	assert_false(fx->done[1].had_response);
	assert_int_equal(stats(fx).upstream_timeouts, 1);
}

/* Port unreachable from upstream 0 (nothing listens) moves the question
 * on at once, without waiting for the timeout. */
static void
test_icmp_unreachable(void **state)
{
	struct fixture *fx = *state;
	struct dns_response resp;
	struct upq u1;

	NEED_ENV(state);
	close(fx->up[0]);
	fx->up[0] = socket(AF_INET, SOCK_DGRAM, 0);	/* unbound */
	client_ask(fx, 9, "refused.test", DNS_T_A);
	assert_true(upstream_get(fx, fx->up[1], &u1, WAIT_MS));
	upstream_reply(fx->up[1], &u1, u1.q.id, NULL, 0, "192.0.2.9");
	assert_true(client_answer(fx, &resp));
	assert_a(&resp, 9, "192.0.2.9");
	assert_int_equal(stats(fx).upstream_timeouts, 0);
}

/*
 * Many questions in flight: each has its own id; answers in any order
 * find their question; once DNS_PENDING_MAX are in flight the next one
 * fails at once with SERVFAIL.
 */
static void
test_many_in_flight(void **state)
{
	struct fixture *fx = *state;
	static struct upq u[DNS_PENDING_MAX];
	static uint8_t seen[65536];
	struct dns_response resp;
	char name[64];
	size_t i, got = 0, answered = 0;
	int ports = 0;
	uint16_t port_seen[64];
	int j;

	NEED_ENV(state);
	memset(seen, 0, sizeof(seen));
	for (i = 0; i < DNS_PENDING_MAX; i++) {
		snprintf(name, sizeof(name), "n%zu.test", i);
		client_ask(fx, (uint16_t)(1000 + i), name, DNS_T_A);
		if (i % 16 == 15)
			turn(fx, 0);
	}
	while (got < DNS_PENDING_MAX &&
	    upstream_get(fx, fx->up[0], &u[got], WAIT_MS)) {
		assert_int_equal(seen[u[got].q.id], 0);
		seen[u[got].q.id] = 1;
		for (j = 0; j < ports; j++)
			if (port_seen[j] == u[got].from.sin_port)
				break;
		if (j == ports && ports < 64)
			port_seen[ports++] = u[got].from.sin_port;
		got++;
	}
	assert_int_equal(got, DNS_PENDING_MAX);
	/* spread over the upstream's pool of a few sockets */
	assert_true(ports >= 2 && ports <= 8);
	client_ask(fx, 7777, "one.too.many", DNS_T_A);
	assert_true(client_answer(fx, &resp));
	assert_int_equal(resp.id, 7777);
	assert_int_equal(resp.rcode, DNS_R_SERVFAIL);
	/* answered last to first */
	for (i = DNS_PENDING_MAX; i-- > 0; ) {
		char a[32];

		snprintf(a, sizeof(a), "192.0.2.%zu", i % 250 + 1);
		upstream_reply(fx->up[0], &u[i], u[i].q.id, NULL, 0, a);
		if (i % 16 == 0)
			turn(fx, 0);
	}
	while (answered < DNS_PENDING_MAX && client_answer(fx, &resp)) {
		char want[32];

		snprintf(name, sizeof(name), "n%u.test", resp.id - 1000);
		assert_string_equal(resp.qname, name);
		snprintf(want, sizeof(want), "192.0.2.%u",
		    (resp.id - 1000) % 250 + 1);
		assert_a(&resp, resp.id, want);
		answered++;
	}
	assert_int_equal(answered, DNS_PENDING_MAX);
	assert_int_equal(stats(fx).mismatched, 0);
}

/* Sockets are replaced: after some thousands of questions, or some tens
 * of seconds, questions leave from other ports. */
static void
test_rotation(void **state)
{
	struct fixture *fx = *state;
	struct dns_response resp;
	struct upq u;
	uint16_t first[16];
	size_t nfirst = 0, i, k, same;

	NEED_ENV(state);
	/* the ports in use at first */
	for (i = 0; i < 16; i++) {
		client_ask(fx, (uint16_t)i, "r.test", DNS_T_A);
		assert_true(upstream_get(fx, fx->up[0], &u, WAIT_MS));
		for (k = 0; k < nfirst && first[k] != u.from.sin_port; k++)
			;
		if (k == nfirst)
			first[nfirst++] = u.from.sin_port;
		upstream_reply(fx->up[0], &u, u.q.id, NULL, 0, "192.0.2.1");
		assert_true(client_answer(fx, &resp));
	}
	assert_true(nfirst >= 2);
	/* after a minute (more than any socket's age), none is used again;
	 * a new random port may meet an old one by chance (p ~ 0.2 %) */
	fx->now += 60001;
	same = 0;
	for (i = 0; i < 16; i++) {
		client_ask(fx, (uint16_t)i, "r.test", DNS_T_A);
		assert_true(upstream_get(fx, fx->up[0], &u, WAIT_MS));
		for (k = 0; k < nfirst; k++)
			same += first[k] == u.from.sin_port;
		upstream_reply(fx->up[0], &u, u.q.id, NULL, 0, "192.0.2.1");
		assert_true(client_answer(fx, &resp));
	}
	assert_true(same <= 2);
	/* after many questions, not one of the ports of the start is left */
	nfirst = 0;
	for (i = 0; i < 16; i++) {
		client_ask(fx, (uint16_t)i, "r.test", DNS_T_A);
		assert_true(upstream_get(fx, fx->up[0], &u, WAIT_MS));
		for (k = 0; k < nfirst && first[k] != u.from.sin_port; k++)
			;
		if (k == nfirst)
			first[nfirst++] = u.from.sin_port;
		upstream_reply(fx->up[0], &u, u.q.id, NULL, 0, "192.0.2.1");
		assert_true(client_answer(fx, &resp));
	}
	for (i = 0; i < 9 * 4096; i++) {
		client_ask(fx, (uint16_t)i, "r.test", DNS_T_A);
		assert_true(upstream_get(fx, fx->up[0], &u, WAIT_MS));
		upstream_reply(fx->up[0], &u, u.q.id, NULL, 0, "192.0.2.1");
		assert_true(client_answer(fx, &resp));
		assert_int_equal(resp.id, (uint16_t)i);
	}
	same = 0;
	for (i = 0; i < 16; i++) {
		client_ask(fx, (uint16_t)i, "r.test", DNS_T_A);
		assert_true(upstream_get(fx, fx->up[0], &u, WAIT_MS));
		for (k = 0; k < nfirst; k++)
			same += first[k] == u.from.sin_port;
		upstream_reply(fx->up[0], &u, u.q.id, NULL, 0, "192.0.2.1");
		assert_true(client_answer(fx, &resp));
	}
	assert_true(same <= 2);
	assert_int_equal(stats(fx).mismatched, 0);
}

/* Over TCP: a length-prefixed query gets a length-prefixed answer. */
static void
test_tcp(void **state)
{
	struct fixture *fx = *state;
	struct sockaddr_in to = { .sin_family = AF_INET,
	    .sin_port = htons(RES_PORT), .sin_addr.s_addr = addr("127.0.0.1") };
	struct dns_response resp;
	struct upq u;
	uint8_t msg[512], in[1024];
	size_t have = 0;
	ssize_t n;
	int fd, len;

	NEED_ENV(state);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(fd != -1);
	assert_int_equal(connect(fd, (struct sockaddr *)&to, sizeof(to)), 0);
	len = dns_write_query(msg + 2, sizeof(msg) - 2, 0x7777, "t.test",
	    DNS_T_A, 1);
	assert_true(len > 0);
	msg[0] = (uint8_t)(len >> 8);
	msg[1] = (uint8_t)len;
	assert_int_equal(write(fd, msg, (size_t)len + 2), len + 2);
	assert_true(upstream_get(fx, fx->up[0], &u, WAIT_MS));
	upstream_reply(fx->up[0], &u, u.q.id, NULL, 0, "192.0.2.3");
	while (have < 2 || have < 2 + (size_t)(in[0] << 8 | in[1])) {
		assert_true(turn_until(fx, fd, WAIT_MS));
		n = read(fd, in + have, sizeof(in) - have);
		assert_true(n > 0);
		have += (size_t)n;
	}
	assert_int_equal(dns_parse_response(in + 2, have - 2, &resp),
	    DNS_PARSE_OK);
	assert_a(&resp, 0x7777, "192.0.2.3");
	assert_int_equal(stats(fx).tcp_conns, 1);
	close(fd);
}

/*
 * A reload replaces the upstreams: new questions go to the new list, one
 * in flight is not answered by an upstream no longer listed in its place
 * and moves on to the new list's next entry.
 */
static void
test_set_upstreams(void **state)
{
	struct fixture *fx = *state;
	struct dns_response resp;
	struct upq u0, u1, u4;
	uint32_t ups[DNS_UPSTREAM_MAX + 1];
	int up4;

	NEED_ENV(state);
	up4 = udp_bound("127.0.0.4", 53);
	client_ask(fx, 1, "before.test", DNS_T_A);
	assert_true(upstream_get(fx, fx->up[0], &u0, WAIT_MS));
	ups[0] = addr("127.0.0.4");
	ups[1] = addr(UP1);
	assert_int_equal(dns_resolver_set_upstreams(fx->r, ups, 2), 0);
	/* the old first upstream's answer is no longer taken */
	upstream_reply(fx->up[0], &u0, u0.q.id, NULL, 0, "203.0.113.66");
	turn(fx, ABSENT_MS);
	assert_int_equal(fx->ndone, 0);
	assert_int_equal(stats(fx).mismatched, 1);
	/* a new question goes to the new first upstream */
	client_ask(fx, 2, "after.test", DNS_T_A);
	assert_true(upstream_get(fx, up4, &u4, WAIT_MS));
	assert_string_equal(u4.q.qname, "after.test");
	assert_false(upstream_get(fx, fx->up[0], &u0, ABSENT_MS));
	upstream_reply(up4, &u4, u4.q.id, NULL, 0, "192.0.2.4");
	assert_true(client_answer(fx, &resp));
	assert_a(&resp, 2, "192.0.2.4");
	/* the one in flight times out and asks the new second upstream */
	fx->now += DNS_UPSTREAM_TRY_MS;
	assert_true(upstream_get(fx, fx->up[1], &u1, WAIT_MS));
	assert_string_equal(u1.q.qname, "before.test");
	upstream_reply(fx->up[1], &u1, u1.q.id, NULL, 0, "192.0.2.5");
	assert_true(client_answer(fx, &resp));
	assert_a(&resp, 1, "192.0.2.5");

	/* too many: refused, nothing changed */
	memset(ups, 0, sizeof(ups));
	assert_int_equal(dns_resolver_set_upstreams(fx->r, ups,
	    DNS_UPSTREAM_MAX + 1), -1);
	assert_int_equal(errno, EINVAL);
	/* none: a question in flight and a new one both get SERVFAIL */
	client_ask(fx, 3, "orphan.test", DNS_T_A);
	assert_true(upstream_get(fx, up4, &u4, WAIT_MS));
	assert_int_equal(dns_resolver_set_upstreams(fx->r, ups, 0), 0);
	upstream_reply(up4, &u4, u4.q.id, NULL, 0, "203.0.113.66");
	client_ask(fx, 4, "none.test", DNS_T_A);
	assert_true(client_answer(fx, &resp));
	assert_int_equal(resp.id, 4);
	assert_int_equal(resp.rcode, DNS_R_SERVFAIL);
	fx->now += DNS_UPSTREAM_TRY_MS;
	assert_true(client_answer(fx, &resp));
	assert_int_equal(resp.id, 3);
	assert_int_equal(resp.rcode, DNS_R_SERVFAIL);
	close(up4);
}

/* Closing with questions in flight ends each with done(-1). */
static void
test_close_in_flight(void **state)
{
	struct fixture *fx = *state;
	struct upq u;

	NEED_ENV(state);
	client_ask(fx, 5, "pending.test", DNS_T_A);
	assert_true(upstream_get(fx, fx->up[0], &u, WAIT_MS));
	assert_int_equal(fx->ndone, 0);
	dns_resolver_close(fx->r);
	fx->r = NULL;
	assert_int_equal(fx->ndone, 1);
	assert_int_equal(fx->done[0].rcode, -1);
	assert_string_equal(fx->done[0].name, "pending.test");
}

/* ---- TCP clients that cannot be served yet ------------------------- */

/*
 * The loop must sleep while nothing can progress: none of the resolver's
 * descriptors ready, and a timeout other than 0. A descriptor poll keeps
 * reporting, or a deadline that passed and is not acted on, makes
 * sluiced's loop spin on the CPU.
 */
static void
assert_asleep(struct fixture *fx)
{
	struct pollfd pfd[2 + DNS_TCP_MAX + DNS_PENDING_MAX];
	size_t n, k;
	int ready;

	n = dns_resolver_pollfds(fx->r, pfd, sizeof(pfd) / sizeof(pfd[0]));
	ready = poll(pfd, n, 0);
	assert_true(ready >= 0);
	for (k = 0; k < n && ready > 0; k++)
		if (pfd[k].revents != 0)
			print_message("fd %d: events %#x, revents %#x\n",
			    pfd[k].fd, (unsigned)pfd[k].events,
			    (unsigned)pfd[k].revents);
	assert_int_equal(ready, 0);
	assert_int_not_equal(dns_resolver_timeout(fx->r, fx->now), 0);
}

static int
tcp_client(void)
{
	struct sockaddr_in to = { .sin_family = AF_INET,
	    .sin_port = htons(RES_PORT), .sin_addr.s_addr = addr("127.0.0.1") };
	int fd;

	fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(fd != -1);
	assert_int_equal(connect(fd, (struct sockaddr *)&to, sizeof(to)), 0);
	return fd;
}

/* Writes a length-prefixed query into buf; returns its length. */
static size_t
tcp_query(uint8_t *buf, size_t size, uint16_t id, const char *name)
{
	int len;

	assert_true(size > 2);
	len = dns_write_query(buf + 2, size - 2, id, name, DNS_T_A, 1);
	assert_true(len > 0);
	buf[0] = (uint8_t)(len >> 8);
	buf[1] = (uint8_t)len;
	return (size_t)len + 2;
}

static void
tcp_ask(int fd, uint16_t id, const char *name)
{
	uint8_t msg[512];
	size_t len;

	len = tcp_query(msg, sizeof(msg), id, name);
	assert_int_equal(write(fd, msg, len), (ssize_t)len);
}

/* Reads exactly len bytes, turning the loop while it waits; false at the
 * end of the stream or after WAIT_MS without data. */
static bool
tcp_read(struct fixture *fx, int fd, uint8_t *buf, size_t len)
{
	size_t have = 0;
	ssize_t n;

	while (have < len) {
		if (!turn_until(fx, fd, WAIT_MS))
			return false;
		n = read(fd, buf + have, len - have);
		if (n <= 0)
			return false;
		have += (size_t)n;
	}
	return true;
}

/* The next answer on a TCP client, parsed; false if none came. */
static bool
tcp_answer(struct fixture *fx, int fd, struct dns_response *resp)
{
	uint8_t buf[2 + DNS_TCP_MSG_MAX];
	size_t len;

	if (!tcp_read(fx, fd, buf, 2))
		return false;
	len = (size_t)buf[0] << 8 | buf[1];
	if (!tcp_read(fx, fd, buf + 2, len))
		return false;
	assert_int_equal(dns_parse_response(buf + 2, len, resp), DNS_PARSE_OK);
	return true;
}

/* The resolver closed the connection: its end of the stream is there. */
static void
assert_tcp_closed(struct fixture *fx, int fd)
{
	uint8_t b;

	assert_true(turn_until(fx, fd, WAIT_MS));
	assert_int_equal(read(fd, &b, 1), 0);
}

/* A reset (RST) instead of a close. */
static void
tcp_reset(int fd)
{
	struct linger l = { .l_onoff = 1, .l_linger = 0 };

	assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l)),
	    0);
	close(fd);
}

/*
 * A client that resets while its query is upstream is closed at once:
 * its socket is not left for poll to report over and over. The answer
 * finds it gone (done with -1) and does not reach the next client of
 * the same slot. One that half-closed and then resets is not polled
 * until its answer is there; the answer then closes it.
 */
static void
test_tcp_reset_busy(void **state)
{
	struct fixture *fx = *state;
	struct dns_response resp;
	struct upq u0, u1, u2;
	int fd;

	NEED_ENV(state);
	fd = tcp_client();
	tcp_ask(fd, 1, "reset.test");
	assert_true(upstream_get(fx, fx->up[0], &u0, WAIT_MS));
	tcp_reset(fd);
	turn(fx, ABSENT_MS);
	assert_asleep(fx);
	assert_int_equal(dns_resolver_timeout(fx->r, fx->now),
	    DNS_UPSTREAM_TRY_MS);
	assert_int_equal(fx->ndone, 0);
	/* the next client, very likely in the same slot */
	fd = tcp_client();
	tcp_ask(fd, 2, "next.test");
	assert_true(upstream_get(fx, fx->up[0], &u1, WAIT_MS));
	upstream_reply(fx->up[0], &u0, u0.q.id, NULL, 0, "203.0.113.66");
	turn(fx, ABSENT_MS);
	assert_int_equal(fx->ndone, 1);
	assert_string_equal(fx->done[0].name, "reset.test");
	assert_int_equal(fx->done[0].rcode, -1);
	assert_int_equal(stats(fx).answered, 0);
	upstream_reply(fx->up[0], &u1, u1.q.id, NULL, 0, "192.0.2.2");
	assert_true(tcp_answer(fx, fd, &resp));
	assert_a(&resp, 2, "192.0.2.2");
	assert_int_equal(stats(fx).answered, 1);

	/* half-closed, then reset */
	assert_int_equal(shutdown(fd, SHUT_WR), 0);
	assert_tcp_closed(fx, fd);
	fd = tcp_client();
	tcp_ask(fd, 3, "half.test");
	assert_true(upstream_get(fx, fx->up[0], &u2, WAIT_MS));
	assert_int_equal(shutdown(fd, SHUT_WR), 0);
	turn(fx, ABSENT_MS);
	assert_asleep(fx);
	tcp_reset(fd);
	assert_asleep(fx);
	assert_int_equal(dns_resolver_timeout(fx->r, fx->now),
	    DNS_UPSTREAM_TRY_MS);
	upstream_reply(fx->up[0], &u2, u2.q.id, NULL, 0, "192.0.2.3");
	turn(fx, ABSENT_MS);	/* the answer, queued */
	turn(fx, ABSENT_MS);	/* refused: the connection goes */
	assert_int_equal(fx->ndone, 3);
	assert_int_equal(dns_resolver_timeout(fx->r, fx->now), -1);
	assert_asleep(fx);
}

/* A client that half-closes after its query still gets the answer, and
 * the connection is closed once it is sent. */
static void
test_tcp_half_close(void **state)
{
	struct fixture *fx = *state;
	struct dns_response resp;
	struct upq u;
	int fd;

	NEED_ENV(state);
	fd = tcp_client();
	tcp_ask(fd, 4, "half.test");
	assert_int_equal(shutdown(fd, SHUT_WR), 0);
	assert_true(upstream_get(fx, fx->up[0], &u, WAIT_MS));
	turn(fx, ABSENT_MS);
	assert_asleep(fx);
	upstream_reply(fx->up[0], &u, u.q.id, NULL, 0, "192.0.2.4");
	assert_true(tcp_answer(fx, fd, &resp));
	assert_a(&resp, 4, "192.0.2.4");
	assert_tcp_closed(fx, fd);
	assert_int_equal(dns_resolver_timeout(fx->r, fx->now), -1);
	close(fd);
}

/*
 * A client sends more than the connection's buffer holds while its query
 * is upstream: what does not fit stays in the socket, unpolled, until
 * the answer is out; then every query is answered, in order.
 */
static void
test_tcp_fill(void **state)
{
	struct fixture *fx = *state;
	static uint8_t msg[8192];
	struct dns_response resp;
	struct upq u;
	size_t len, nq = 0, got = 0;
	int fd;

	NEED_ENV(state);
	fd = tcp_client();
	len = tcp_query(msg, sizeof(msg), 100, "fill.test");
	/* then queries answered without upstream, more than in[] holds */
	while (len + 64 < sizeof(msg) && len < 2 * (2 + DNS_TCP_MSG_MAX)) {
		len += tcp_query(msg + len, sizeof(msg) - len,
		    (uint16_t)(101 + nq), "local.test");
		nq++;
	}
	assert_int_equal(write(fd, msg, len), (ssize_t)len);
	assert_true(upstream_get(fx, fx->up[0], &u, WAIT_MS));
	turn(fx, ABSENT_MS);
	turn(fx, ABSENT_MS);
	assert_asleep(fx);
	assert_int_equal(dns_resolver_timeout(fx->r, fx->now),
	    DNS_UPSTREAM_TRY_MS);
	assert_int_equal(stats(fx).queries, 1);
	upstream_reply(fx->up[0], &u, u.q.id, NULL, 0, "192.0.2.5");
	assert_true(tcp_answer(fx, fd, &resp));
	assert_a(&resp, 100, "192.0.2.5");
	while (got < nq && tcp_answer(fx, fd, &resp)) {
		assert_int_equal(resp.id, 101 + got);
		assert_int_equal(resp.rcode, DNS_R_NXDOMAIN);
		got++;
	}
	assert_int_equal(got, nq);
	assert_int_equal(stats(fx).queries, 1 + nq);
	close(fd);
}

/*
 * The idle time of a connection does not run out while its query is
 * upstream: the loop waits for the query's deadline, not for an idle
 * deadline it would not act on, and an answer that comes after the idle
 * time is still sent. Idleness counts again from the answer.
 */
static void
test_tcp_idle_busy(void **state)
{
	struct fixture *fx = *state;
	struct dns_response resp;
	struct upq u0, u1;
	int fd;

	NEED_ENV(state);
	fd = tcp_client();
	tcp_ask(fd, 6, "late.test");
	assert_true(upstream_get(fx, fx->up[0], &u0, WAIT_MS));
	/* upstream 0 gives up and upstream 1 is asked as the idle time ends */
	fx->now += DNS_TCP_IDLE_MS;
	turn(fx, 0);
	assert_int_equal(dns_resolver_timeout(fx->r, fx->now),
	    DNS_UPSTREAM_TRY_MS);
	assert_asleep(fx);
	assert_true(upstream_get(fx, fx->up[1], &u1, WAIT_MS));
	upstream_reply(fx->up[1], &u1, u1.q.id, NULL, 0, "192.0.2.6");
	assert_true(tcp_answer(fx, fd, &resp));
	assert_a(&resp, 6, "192.0.2.6");
	assert_int_equal(dns_resolver_timeout(fx->r, fx->now), DNS_TCP_IDLE_MS);
	assert_asleep(fx);
	/* a second query, pipelined behind one that outlives the idle time */
	tcp_ask(fd, 7, "late.test");
	tcp_ask(fd, 8, "local.test");
	assert_true(upstream_get(fx, fx->up[0], &u0, WAIT_MS));
	fx->now += DNS_TCP_IDLE_MS + DNS_UPSTREAM_TRY_MS;
	assert_true(upstream_get(fx, fx->up[1], &u1, WAIT_MS));
	fx->now += DNS_UPSTREAM_TRY_MS;
	assert_true(tcp_answer(fx, fd, &resp));
	assert_int_equal(resp.id, 7);
	assert_int_equal(resp.rcode, DNS_R_SERVFAIL);
	assert_true(tcp_answer(fx, fd, &resp));
	assert_int_equal(resp.id, 8);
	assert_int_equal(resp.rcode, DNS_R_NXDOMAIN);
	/* then idle for good */
	assert_int_equal(dns_resolver_timeout(fx->r, fx->now), DNS_TCP_IDLE_MS);
	fx->now += DNS_TCP_IDLE_MS - 1;
	turn(fx, 0);
	assert_asleep(fx);
	fx->now += 1;
	assert_tcp_closed(fx, fd);
	assert_int_equal(dns_resolver_timeout(fx->r, fx->now), -1);
	close(fd);
}

/* ---- the answer cache ----------------------------------------------- */

static void
set_a(struct dns_rr *rr, const char *name, uint32_t ttl, const char *a)
{
	memset(rr, 0, sizeof(*rr));
	snprintf(rr->name, sizeof(rr->name), "%s", name);
	rr->type = DNS_T_A;
	rr->ttl = ttl;
	assert_int_equal(inet_pton(AF_INET, a, rr->data.a), 1);
}

static void
set_aaaa(struct dns_rr *rr, const char *name, uint32_t ttl, const char *a)
{
	memset(rr, 0, sizeof(*rr));
	snprintf(rr->name, sizeof(rr->name), "%s", name);
	rr->type = DNS_T_AAAA;
	rr->ttl = ttl;
	assert_int_equal(inet_pton(AF_INET6, a, rr->data.aaaa), 1);
}

static void
set_cname(struct dns_rr *rr, const char *name, uint32_t ttl,
    const char *target)
{
	memset(rr, 0, sizeof(*rr));
	snprintf(rr->name, sizeof(rr->name), "%s", name);
	rr->type = DNS_T_CNAME;
	rr->ttl = ttl;
	snprintf(rr->data.cname, sizeof(rr->data.cname), "%s", target);
}

/* Answers u from fd with rcode and the given records. */
static void
upstream_reply_rr(int fd, const struct upq *u, unsigned rcode,
    const struct dns_rr *rr, size_t nrr)
{
	uint8_t out[2048];
	int len;

	len = dns_write_answer(out, sizeof(out), sizeof(out), &u->q, rcode,
	    rr, nrr);
	assert_true(len > 0);
	assert_int_equal(sendto(fd, out, (size_t)len, 0,
	    (const struct sockaddr *)&u->from, sizeof(u->from)), len);
}

/* A question that must reach upstream fd and is answered with rcode and
 * rr; the client's answer in resp. */
static void
ask_upstream(struct fixture *fx, int fd, uint16_t id, const char *name,
    uint16_t type, unsigned rcode, const struct dns_rr *rr, size_t nrr,
    struct dns_response *resp)
{
	struct upq u;
	char want[DNS_NAME_MAX + 1];
	size_t i;

	client_ask(fx, id, name, type);
	if (!upstream_get(fx, fd, &u, WAIT_MS))
		fail_msg("%s/%u: no question upstream", name, type);
	for (i = 0; name[i] != '\0'; i++)
		want[i] = (char)(name[i] >= 'A' && name[i] <= 'Z' ?
		    name[i] - 'A' + 'a' : name[i]);
	want[i] = '\0';
	assert_string_equal(u.q.qname, want);
	assert_int_equal(u.q.qtype, type);
	upstream_reply_rr(fd, &u, rcode, rr, nrr);
	assert_true(client_answer(fx, resp));
	assert_int_equal(resp->id, id);
	assert_int_equal(resp->rcode, rcode);
}

/* No question reached either upstream (the far side's sockets). */
static void
assert_upstreams_quiet(struct fixture *fx)
{
	struct upq u;

	assert_false(upstream_get(fx, fx->up[0], &u, ABSENT_MS));
	assert_false(upstream_get(fx, fx->up[1], &u, 0));
}

/* A question answered without asking upstream; the answer in resp. */
static void
ask_cached(struct fixture *fx, uint16_t id, const char *name, uint16_t type,
    struct dns_response *resp)
{
	client_ask(fx, id, name, type);
	if (!client_answer(fx, resp))
		fail_msg("%s/%u: no answer", name, type);
	assert_int_equal(resp->id, id);
	assert_upstreams_quiet(fx);
}

/* got has want's records, each TTL less age. */
static void
assert_same_rr(const struct dns_response *got, const struct dns_rr *want,
    size_t nwant, uint32_t age)
{
	size_t i;

	assert_int_equal(got->rcode, DNS_R_NOERROR);
	assert_int_equal(got->nrr, nwant);
	for (i = 0; i < nwant; i++) {
		const struct dns_rr *g = &got->rr[i], *w = &want[i];

		/* case-blind: an owner equal to the question is written as a
		 * pointer to it, in the asking client's spelling */
		if (!dns_name_equal(g->name, w->name))
			fail_msg("record %zu: owner %s, want %s", i, g->name,
			    w->name);
		assert_int_equal(g->type, w->type);
		if (g->ttl != w->ttl - age)
			fail_msg("record %zu: ttl %u, want %u - %u", i,
			    (unsigned)g->ttl, (unsigned)w->ttl, (unsigned)age);
		if (w->type == DNS_T_A)
			assert_memory_equal(g->data.a, w->data.a, 4);
		else if (w->type == DNS_T_AAAA)
			assert_memory_equal(g->data.aaaa, w->data.aaaa, 16);
		else
			assert_string_equal(g->data.cname, w->data.cname);
	}
}

/*
 * With a cache, a repeated question is answered without asking upstream:
 * the upstream sees one question, both clients the same records (the
 * second with TTLs counted down), and both answers go through the ops.
 */
static void
test_cache_hit(void **state)
{
	struct fixture *fx = *state;
	struct dns_response r1, r2;
	struct dns_resolver_stats st;
	struct dns_rr rr[3];
	size_t i;

	NEED_ENV(state);
	st = stats(fx);
	assert_int_equal(st.cache_capacity, 0);
	assert_int_equal(st.cache_entries, 0);
	assert_int_equal(dns_resolver_set_cache(fx->r, 16), 0);
	st = stats(fx);
	assert_int_equal(st.cache_capacity, 16);
	assert_int_equal(st.cache_entries, 0);
	set_cname(&rr[0], "c.test", 300, "edge.c.test");
	set_a(&rr[1], "edge.c.test", 300, "192.0.2.1");
	set_a(&rr[2], "edge.c.test", 200, "192.0.2.2");
	ask_upstream(fx, fx->up[0], 0x0101, "c.test", DNS_T_A, DNS_R_NOERROR,
	    rr, 3, &r1);
	assert_same_rr(&r1, rr, 3, 0);
	assert_int_equal(stats(fx).cache_entries, 1);
	fx->now += 2500;
	ask_cached(fx, 0x0202, "c.test", DNS_T_A, &r2);
	assert_string_equal(r2.qname, "c.test");
	assert_int_equal(r2.qtype, DNS_T_A);
	assert_same_rr(&r2, rr, 3, 2);
	for (i = 0; i < 3; i++)
		assert_true(r2.rr[i].ttl <= r1.rr[i].ttl);
	st = stats(fx);
	assert_int_equal(st.queries, 2);
	assert_int_equal(st.forwarded, 1);
	assert_int_equal(st.cache_hits, 1);
	assert_int_equal(st.answered, 2);
	assert_int_equal(st.cache_entries, 1);
	assert_int_equal(st.cache_capacity, 16);
	assert_int_equal(st.mismatched, 0);
	/* both through the policy: response, then done */
	assert_int_equal(fx->nresponse, 2);
	assert_int_equal(fx->ndone, 2);
	for (i = 0; i < 2; i++) {
		assert_string_equal(fx->done[i].name, "c.test");
		assert_int_equal(fx->done[i].rcode, DNS_R_NOERROR);
		assert_true(fx->done[i].had_response);
	}
	/* over TCP too */
	{
		struct sockaddr_in to = { .sin_family = AF_INET,
		    .sin_port = htons(RES_PORT),
		    .sin_addr.s_addr = addr("127.0.0.1") };
		uint8_t msg[512], in[2048];
		struct dns_response r3;
		size_t have = 0;
		ssize_t n;
		int fd, len;

		fd = socket(AF_INET, SOCK_STREAM, 0);
		assert_true(fd != -1);
		assert_int_equal(connect(fd, (struct sockaddr *)&to,
		    sizeof(to)), 0);
		len = dns_write_query(msg + 2, sizeof(msg) - 2, 0x0303,
		    "c.test", DNS_T_A, 1);
		assert_true(len > 0);
		msg[0] = (uint8_t)(len >> 8);
		msg[1] = (uint8_t)len;
		assert_int_equal(write(fd, msg, (size_t)len + 2), len + 2);
		while (have < 2 || have < 2 + (size_t)(in[0] << 8 | in[1])) {
			assert_true(turn_until(fx, fd, WAIT_MS));
			n = read(fd, in + have, sizeof(in) - have);
			assert_true(n > 0);
			have += (size_t)n;
		}
		assert_int_equal(dns_parse_response(in + 2, have - 2, &r3),
		    DNS_PARSE_OK);
		assert_int_equal(r3.id, 0x0303);
		assert_same_rr(&r3, rr, 3, 2);
		close(fd);
	}
	assert_upstreams_quiet(fx);
	st = stats(fx);
	assert_int_equal(st.cache_hits, 2);
	assert_int_equal(st.forwarded, 1);
	assert_int_equal(fx->nresponse, 3);
	assert_int_equal(fx->ndone, 3);
}

/* The key is the normalised name with type and class: another type goes
 * upstream, another spelling of the name does not. */
static void
test_cache_key(void **state)
{
	struct fixture *fx = *state;
	struct dns_response resp;
	struct dns_rr a, aaaa;

	NEED_ENV(state);
	assert_int_equal(dns_resolver_set_cache(fx->r, 16), 0);
	set_a(&a, "a.test", 600, "192.0.2.60");
	set_aaaa(&aaaa, "a.test", 600, "2001:db8::60");
	ask_upstream(fx, fx->up[0], 1, "a.TeSt", DNS_T_A, DNS_R_NOERROR,
	    &a, 1, &resp);
	ask_upstream(fx, fx->up[0], 2, "a.test", DNS_T_AAAA, DNS_R_NOERROR,
	    &aaaa, 1, &resp);
	assert_same_rr(&resp, &aaaa, 1, 0);
	assert_int_equal(stats(fx).cache_entries, 2);
	fx->now += 1000;
	ask_cached(fx, 3, "A.TEST", DNS_T_A, &resp);
	/* the client's spelling is echoed, the records are the upstream's */
	assert_string_equal(resp.qname, "A.TEST");
	assert_same_rr(&resp, &a, 1, 1);
	ask_cached(fx, 4, "a.test", DNS_T_AAAA, &resp);
	assert_same_rr(&resp, &aaaa, 1, 1);
	ask_cached(fx, 5, "a.test", DNS_T_A, &resp);
	assert_same_rr(&resp, &a, 1, 1);
	/* another name is another question */
	ask_upstream(fx, fx->up[0], 6, "b.test", DNS_T_A, DNS_R_NOERROR,
	    &a, 1, &resp);
	assert_int_equal(stats(fx).forwarded, 3);
	assert_int_equal(stats(fx).cache_hits, 3);
	assert_int_equal(stats(fx).cache_entries, 3);
}

/* Kept for the smallest TTL: at that moment the question goes upstream
 * again, and the new answer is kept in turn. */
static void
test_cache_expiry(void **state)
{
	struct fixture *fx = *state;
	struct dns_response resp;
	struct dns_rr rr[2];
	uint64_t t0;

	NEED_ENV(state);
	assert_int_equal(dns_resolver_set_cache(fx->r, 16), 0);
	set_a(&rr[0], "x.test", 600, "192.0.2.1");
	set_a(&rr[1], "x.test", 60, "192.0.2.2");
	t0 = fx->now;
	ask_upstream(fx, fx->up[0], 1, "x.test", DNS_T_A, DNS_R_NOERROR, rr, 2,
	    &resp);
	fx->now = t0 + 60000 - 1;
	ask_cached(fx, 2, "x.test", DNS_T_A, &resp);
	assert_same_rr(&resp, rr, 2, 59);
	fx->now = t0 + 60000;
	set_a(&rr[1], "x.test", 60, "192.0.2.3");
	ask_upstream(fx, fx->up[0], 3, "x.test", DNS_T_A, DNS_R_NOERROR, rr, 2,
	    &resp);
	assert_same_rr(&resp, rr, 2, 0);
	fx->now += 30000;
	ask_cached(fx, 4, "x.test", DNS_T_A, &resp);
	assert_same_rr(&resp, rr, 2, 30);
	assert_int_equal(stats(fx).forwarded, 2);
	assert_int_equal(stats(fx).cache_hits, 2);
	assert_int_equal(stats(fx).cache_entries, 1);
}

/*
 * An upstream's truncated answer goes to the client truncated, with the
 * records it held (upstreams are asked over UDP only: the client asks
 * again over TCP), and is not kept; an error with TC set goes on as the
 * rcode alone, and a whole answer has no TC.
 */
static void
test_truncated(void **state)
{
	struct fixture *fx = *state;
	struct dns_response resp;
	struct dns_rr rr;
	struct upq u;
	int k;

	NEED_ENV(state);
	assert_int_equal(dns_resolver_set_cache(fx->r, 16), 0);
	set_a(&rr, "big.test", 600, "192.0.2.7");
	for (k = 0; k < 2; k++) {
		client_ask(fx, (uint16_t)(0x100 + k), "big.test", DNS_T_A);
		/* the second time too: a truncated answer is not kept */
		assert_true(upstream_get(fx, fx->up[0], &u, WAIT_MS));
		upstream_reply_rr(fx->up[0], &u, DNS_R_NOERROR | DNS_FLAG_TC,
		    &rr, 1);
		assert_true(client_answer(fx, &resp));
		assert_int_equal(resp.id, 0x100 + k);
		assert_true(resp.flags & DNS_FLAG_TC);
		assert_same_rr(&resp, &rr, 1, 0);
	}
	assert_int_equal(stats(fx).cache_entries, 0);
	client_ask(fx, 0x200, "big.test", DNS_T_A);
	assert_true(upstream_get(fx, fx->up[0], &u, WAIT_MS));
	upstream_reply_rr(fx->up[0], &u, DNS_R_SERVFAIL | DNS_FLAG_TC, NULL, 0);
	assert_true(client_answer(fx, &resp));
	assert_int_equal(resp.rcode, DNS_R_SERVFAIL);
	assert_false(resp.flags & DNS_FLAG_TC);
	client_ask(fx, 0x300, "big.test", DNS_T_A);
	assert_true(upstream_get(fx, fx->up[0], &u, WAIT_MS));
	upstream_reply_rr(fx->up[0], &u, DNS_R_NOERROR, &rr, 1);
	assert_true(client_answer(fx, &resp));
	assert_false(resp.flags & DNS_FLAG_TC);
	assert_same_rr(&resp, &rr, 1, 0);
}

/* Negative answers (NXDOMAIN, SERVFAIL, NOERROR without records) and a
 * TTL of 0 are not kept: each question goes upstream. */
static void
test_cache_negative(void **state)
{
	struct fixture *fx = *state;
	struct dns_response resp;
	struct dns_rr rr;
	int k;

	NEED_ENV(state);
	assert_int_equal(dns_resolver_set_cache(fx->r, 16), 0);
	for (k = 0; k < 2; k++) {
		ask_upstream(fx, fx->up[0], (uint16_t)(10 + k), "nx.test",
		    DNS_T_A, DNS_R_NXDOMAIN, NULL, 0, &resp);
		assert_int_equal(resp.nrr, 0);
		ask_upstream(fx, fx->up[0], (uint16_t)(20 + k), "fail.test",
		    DNS_T_A, DNS_R_SERVFAIL, NULL, 0, &resp);
		ask_upstream(fx, fx->up[0], (uint16_t)(30 + k), "nodata.test",
		    DNS_T_AAAA, DNS_R_NOERROR, NULL, 0, &resp);
		assert_int_equal(resp.nrr, 0);
		set_a(&rr, "zero.test", 0, "192.0.2.9");
		ask_upstream(fx, fx->up[0], (uint16_t)(40 + k), "zero.test",
		    DNS_T_A, DNS_R_NOERROR, &rr, 1, &resp);
		assert_same_rr(&resp, &rr, 1, 0);
	}
	assert_int_equal(stats(fx).forwarded, 8);
	assert_int_equal(stats(fx).cache_hits, 0);
	assert_int_equal(stats(fx).cache_entries, 0);
	assert_int_equal(fx->ndone, 8);
	assert_int_equal(fx->done[0].rcode, DNS_R_NXDOMAIN);
}

/* A reload that keeps the upstreams keeps the cache; one that changes
 * them forgets it. */
static void
test_cache_upstreams(void **state)
{
	struct fixture *fx = *state;
	struct dns_response resp;
	uint32_t ups[DNS_UPSTREAM_MAX + 1];
	struct dns_rr rr;

	NEED_ENV(state);
	assert_int_equal(dns_resolver_set_cache(fx->r, 16), 0);
	set_a(&rr, "u.test", 300, "192.0.2.30");
	ask_upstream(fx, fx->up[0], 1, "u.test", DNS_T_A, DNS_R_NOERROR, &rr, 1,
	    &resp);
	/* the same list */
	ups[0] = addr(UP0);
	ups[1] = addr(UP1);
	assert_int_equal(dns_resolver_set_upstreams(fx->r, ups, 2), 0);
	assert_int_equal(stats(fx).cache_entries, 1);
	ask_cached(fx, 2, "u.test", DNS_T_A, &resp);
	assert_same_rr(&resp, &rr, 1, 0);
	/* a refused one changes nothing */
	memset(ups + 2, 0, sizeof(ups) - 2 * sizeof(ups[0]));
	assert_int_equal(dns_resolver_set_upstreams(fx->r, ups,
	    DNS_UPSTREAM_MAX + 1), -1);
	assert_int_equal(stats(fx).cache_entries, 1);
	ask_cached(fx, 3, "u.test", DNS_T_A, &resp);
	/* the same upstreams in another order are another list */
	ups[0] = addr(UP1);
	ups[1] = addr(UP0);
	assert_int_equal(dns_resolver_set_upstreams(fx->r, ups, 2), 0);
	assert_int_equal(stats(fx).cache_entries, 0);
	assert_int_equal(stats(fx).cache_capacity, 16);
	set_a(&rr, "u.test", 300, "192.0.2.31");
	ask_upstream(fx, fx->up[1], 4, "u.test", DNS_T_A, DNS_R_NOERROR, &rr, 1,
	    &resp);
	assert_same_rr(&resp, &rr, 1, 0);
	/* kept again, from the new upstream */
	ask_cached(fx, 5, "u.test", DNS_T_A, &resp);
	assert_same_rr(&resp, &rr, 1, 0);
	/* one upstream fewer */
	assert_int_equal(dns_resolver_set_upstreams(fx->r, ups, 1), 0);
	assert_int_equal(stats(fx).cache_entries, 0);
	ask_upstream(fx, fx->up[1], 6, "u.test", DNS_T_A, DNS_R_NOERROR, &rr, 1,
	    &resp);
	assert_int_equal(stats(fx).forwarded, 3);
	assert_int_equal(stats(fx).cache_hits, 3);
}

/* set_cache replaces the cache (forgetting what was kept); 0 turns it
 * off; a size refused keeps the cache there was. */
static void
test_cache_set(void **state)
{
	struct fixture *fx = *state;
	struct dns_response resp;
	struct dns_resolver_stats st;
	struct dns_rr rr;

	NEED_ENV(state);
	set_a(&rr, "s.test", 300, "192.0.2.40");
	/* none by default */
	ask_upstream(fx, fx->up[0], 1, "s.test", DNS_T_A, DNS_R_NOERROR, &rr, 1,
	    &resp);
	ask_upstream(fx, fx->up[0], 2, "s.test", DNS_T_A, DNS_R_NOERROR, &rr, 1,
	    &resp);
	assert_int_equal(dns_resolver_set_cache(fx->r, 16), 0);
	ask_upstream(fx, fx->up[0], 3, "s.test", DNS_T_A, DNS_R_NOERROR, &rr, 1,
	    &resp);
	ask_cached(fx, 4, "s.test", DNS_T_A, &resp);
	/* a new size: a new, empty cache */
	assert_int_equal(dns_resolver_set_cache(fx->r, 8), 0);
	st = stats(fx);
	assert_int_equal(st.cache_capacity, 8);
	assert_int_equal(st.cache_entries, 0);
	ask_upstream(fx, fx->up[0], 5, "s.test", DNS_T_A, DNS_R_NOERROR, &rr, 1,
	    &resp);
	/* refused: the one there was stays, with what it holds */
	errno = 0;
	assert_int_equal(dns_resolver_set_cache(fx->r,
	    (size_t)DNS_CACHE_MAX + 1), -1);
	assert_int_equal(errno, EINVAL);
	st = stats(fx);
	assert_int_equal(st.cache_capacity, 8);
	assert_int_equal(st.cache_entries, 1);
	ask_cached(fx, 6, "s.test", DNS_T_A, &resp);
	/* off */
	assert_int_equal(dns_resolver_set_cache(fx->r, 0), 0);
	st = stats(fx);
	assert_int_equal(st.cache_capacity, 0);
	assert_int_equal(st.cache_entries, 0);
	ask_upstream(fx, fx->up[0], 7, "s.test", DNS_T_A, DNS_R_NOERROR, &rr, 1,
	    &resp);
	ask_upstream(fx, fx->up[0], 8, "s.test", DNS_T_A, DNS_R_NOERROR, &rr, 1,
	    &resp);
	assert_int_equal(dns_resolver_set_cache(fx->r, 0), 0);
	st = stats(fx);
	assert_int_equal(st.forwarded, 6);
	assert_int_equal(st.cache_hits, 2);
	assert_int_equal(fx->nresponse, 8);
	assert_int_equal(fx->ndone, 8);
}

/* What the response op edits (records dropped, TTLs changed) is what one
 * client is sent; the cache keeps the upstream's answer as it came. */
static void
test_cache_edit(void **state)
{
	struct fixture *fx = *state;
	struct dns_response resp;
	struct dns_rr rr[3], edited[2];
	size_t i;

	NEED_ENV(state);
	assert_int_equal(dns_resolver_set_cache(fx->r, 16), 0);
	set_a(&rr[0], "p.test", 300, "192.0.2.1");
	set_a(&rr[1], "p.test", 300, "192.0.2.2");
	set_a(&rr[2], "p.test", 300, "192.0.2.3");
	for (i = 0; i < 2; i++) {
		edited[i] = rr[i];
		edited[i].ttl = EDIT_TTL;
	}
	fx->edit = true;
	ask_upstream(fx, fx->up[0], 1, "p.test", DNS_T_A, DNS_R_NOERROR, rr, 3,
	    &resp);
	assert_same_rr(&resp, edited, 2, 0);
	fx->now += 1000;
	ask_cached(fx, 2, "p.test", DNS_T_A, &resp);
	assert_same_rr(&resp, edited, 2, 0);
	fx->edit = false;
	fx->now += 1000;
	ask_cached(fx, 3, "p.test", DNS_T_A, &resp);
	assert_same_rr(&resp, rr, 3, 2);
	assert_int_equal(stats(fx).forwarded, 1);
	assert_int_equal(stats(fx).cache_hits, 2);
	assert_int_equal(fx->nresponse, 3);
}

/*
 * Paused, the resolver leaves UDP queries in the socket: none is read or
 * answered, while an answer to a question already upstream still gets
 * through; once resumed, the waiting ones are answered in order.
 */
static void
test_pause(void **state)
{
	struct fixture *fx = *state;
	struct dns_response resp;
	struct upq u;

	NEED_ENV(state);
	client_ask(fx, 1, "a.test", DNS_T_A);
	assert_true(upstream_get(fx, fx->up[0], &u, WAIT_MS));
	dns_resolver_pause(fx->r, true);
	dns_resolver_pause(fx->r, true);	/* counted once */
	client_ask(fx, 2, "b.test", DNS_T_A);
	client_ask(fx, 3, "local.test", DNS_T_A);
	upstream_reply(fx->up[0], &u, u.q.id, NULL, 0, "192.0.2.1");
	assert_true(client_answer(fx, &resp));
	assert_a(&resp, 1, "192.0.2.1");
	/* the two new ones wait: not read, not asked upstream */
	assert_false(upstream_get(fx, fx->up[0], &u, ABSENT_MS));
	assert_false(turn_until(fx, fx->client, ABSENT_MS));
	assert_int_equal(stats(fx).queries, 1);
	assert_int_equal(stats(fx).paused, 1);
	dns_resolver_pause(fx->r, false);
	assert_true(upstream_get(fx, fx->up[0], &u, WAIT_MS));
	assert_string_equal(u.q.qname, "b.test");
	assert_true(client_answer(fx, &resp));
	assert_int_equal(resp.id, 3);
	assert_int_equal(resp.rcode, DNS_R_NXDOMAIN);
	upstream_reply(fx->up[0], &u, u.q.id, NULL, 0, "192.0.2.2");
	assert_true(client_answer(fx, &resp));
	assert_a(&resp, 2, "192.0.2.2");
	assert_int_equal(stats(fx).queries, 3);
	assert_int_equal(stats(fx).paused, 1);
}

/* ---- what gets a request: every query, every connection ------------- */

/* Turns until the resolver has accepted n TCP connections in all. */
static void
accepted(struct fixture *fx, uint64_t n)
{
	int i;

	for (i = 0; i < WAIT_MS / 5 && stats(fx).tcp_conns < n; i++)
		turn(fx, 5);
	assert_int_equal(stats(fx).tcp_conns, n);
}

/* Reads a raw answer's header (no question needed: a FORMERR has none);
 * false if none came. */
static bool
tcp_header(struct fixture *fx, int fd, uint16_t *id, unsigned *rcode)
{
	uint8_t buf[2 + DNS_TCP_MSG_MAX];
	size_t len;

	if (!tcp_read(fx, fd, buf, 2))
		return false;
	len = (size_t)buf[0] << 8 | buf[1];
	assert_true(len >= DNS_HDR_LEN);
	if (!tcp_read(fx, fd, buf + 2, len))
		return false;
	assert_true(buf[2 + 2] & 0x80);		/* QR */
	*id = (uint16_t)(buf[2] << 8 | buf[3]);
	*rcode = buf[2 + 3] & 0x0f;
	return true;
}

/* Turns until n requests are done (or WAIT_MS). */
static void
done_count(struct fixture *fx, size_t n)
{
	int i;

	for (i = 0; i < WAIT_MS / 5 && fx->ndone < n; i++)
		turn(fx, 5);
	assert_int_equal(fx->ndone, n);
}

/*
 * Connections beyond DNS_TCP_MAX are refused, but never silently: a
 * query on one is answered REFUSED (not asked upstream) and has its
 * request, marked over_limit; one that sends nothing has a request of its
 * own (no message, nothing sent) when its DNS_TCP_REFUSE_MS run out. When
 * even the refused slots are taken, a connection is read once, its query
 * answered and the connection closed; a silent one again has a request.
 */
static void
test_tcp_over_limit(void **state)
{
	struct fixture *fx = *state;
	struct dns_response resp;
	int fds[DNS_TCP_MAX], refused[DNS_TCP_REFUSE_MAX], over, spare, i;
	size_t base;

	NEED_ENV(state);
	/* every client here comes in on lo: no share per interface */
	dns_resolver_set_tcp_per_client(fx->r, 0);
	for (i = 0; i < DNS_TCP_MAX; i++)
		fds[i] = tcp_client();
	accepted(fx, DNS_TCP_MAX);
	assert_int_equal(stats(fx).tcp_refused, 0);

	/* the first one beyond: its query is refused, on record */
	over = tcp_client();
	tcp_ask(over, 65, "over.test");
	assert_true(tcp_answer(fx, over, &resp));
	assert_int_equal(resp.id, 65);
	assert_int_equal(resp.rcode, DNS_R_REFUSED);
	assert_string_equal(resp.qname, "over.test");
	assert_int_equal(fx->ndone, 1);
	assert_string_equal(fx->done[0].name, "over.test");
	assert_int_equal(fx->done[0].rcode, DNS_R_REFUSED);
	assert_true(fx->done[0].over_limit);
	assert_int_equal(fx->done[0].perr, DNS_PARSE_OK);
	assert_upstreams_quiet(fx);
	assert_int_equal(stats(fx).tcp_refused, 1);
	assert_int_equal(stats(fx).dropped, 0);
	/* its client closes: so does the resolver, without another request */
	assert_int_equal(shutdown(over, SHUT_WR), 0);
	assert_tcp_closed(fx, over);
	close(over);
	assert_int_equal(fx->ndone, 1);

	/* the refused slots, taken by clients that say nothing */
	for (i = 0; i < DNS_TCP_REFUSE_MAX; i++)
		refused[i] = tcp_client();
	accepted(fx, DNS_TCP_MAX + 1 + DNS_TCP_REFUSE_MAX);
	assert_int_equal(fx->ndone, 1);

	/* every slot taken: what the client sent already is answered */
	spare = tcp_client();
	tcp_ask(spare, 66, "spare.test");
	assert_true(tcp_answer(fx, spare, &resp));
	assert_int_equal(resp.id, 66);
	assert_int_equal(resp.rcode, DNS_R_REFUSED);
	assert_tcp_closed(fx, spare);
	close(spare);
	assert_int_equal(fx->ndone, 2);
	assert_string_equal(fx->done[1].name, "spare.test");
	assert_int_equal(fx->done[1].rcode, DNS_R_REFUSED);
	assert_true(fx->done[1].over_limit);
	/* ... and a client that sent nothing yet has its attempt recorded */
	spare = tcp_client();
	assert_tcp_closed(fx, spare);
	close(spare);
	assert_int_equal(fx->ndone, 3);
	assert_string_equal(fx->done[2].name, "");
	assert_int_equal(fx->done[2].rcode, -1);
	assert_int_equal(fx->done[2].perr, DNS_PARSE_SHORT);
	assert_true(fx->done[2].over_limit);
	/* ... and one that sent three queries at once: the first answered,
	 * the two behind it on record unanswered (the second's row said
	 * REFUSED, for an answer the connection closed on: found by
	 * review, 2026-12-03) */
	{
		uint8_t msg[3 * 512];
		size_t len;

		len = tcp_query(msg, sizeof(msg), 67, "s1.test");
		len += tcp_query(msg + len, sizeof(msg) - len, 68, "s2.test");
		len += tcp_query(msg + len, sizeof(msg) - len, 69, "s3.test");
		spare = tcp_client();
		assert_int_equal(write(spare, msg, len), (ssize_t)len);
		assert_true(tcp_answer(fx, spare, &resp));
		assert_int_equal(resp.id, 67);
		assert_tcp_closed(fx, spare);
		close(spare);
	}
	assert_int_equal(fx->ndone, 6);
	assert_string_equal(fx->done[3].name, "s1.test");
	assert_int_equal(fx->done[3].rcode, DNS_R_REFUSED);
	assert_string_equal(fx->done[4].name, "s2.test");
	assert_int_equal(fx->done[4].rcode, -1);
	assert_string_equal(fx->done[5].name, "s3.test");
	assert_int_equal(fx->done[5].rcode, -1);

	/* the silent refused ones: their time runs out, each on record */
	turn(fx, 0);
	assert_int_equal(fx->ndone, 6);
	fx->now += DNS_TCP_REFUSE_MS;
	turn(fx, 0);
	base = 6;
	assert_int_equal(fx->ndone, base + DNS_TCP_REFUSE_MAX);
	for (i = 0; i < DNS_TCP_REFUSE_MAX; i++) {
		assert_true(fx->done[base + (size_t)i].over_limit);
		assert_int_equal(fx->done[base + (size_t)i].rcode, -1);
		assert_int_equal(fx->done[base + (size_t)i].perr,
		    DNS_PARSE_SHORT);
		assert_tcp_closed(fx, refused[i]);
		close(refused[i]);
	}
	assert_int_equal(stats(fx).tcp_refused, 4 + DNS_TCP_REFUSE_MAX);
	assert_int_equal(stats(fx).queries, 5);

	/* the served connections were never disturbed, and with one gone
	 * the next connection is served again */
	tcp_ask(fds[0], 67, "local.test");
	assert_true(tcp_answer(fx, fds[0], &resp));
	assert_int_equal(resp.rcode, DNS_R_NXDOMAIN);
	close(fds[0]);
	turn(fx, ABSENT_MS);
	fds[0] = tcp_client();
	tcp_ask(fds[0], 68, "local.test");
	assert_true(tcp_answer(fx, fds[0], &resp));
	assert_int_equal(resp.rcode, DNS_R_NXDOMAIN);
	assert_false(fx->done[fx->ndone - 1].over_limit);
	for (i = 0; i < DNS_TCP_MAX; i++)
		close(fds[i]);
	assert_upstreams_quiet(fx);
}

/*
 * One ingress interface (a sandbox) holds at most its share of the served
 * connections: its next one is refused (on record) while the served slots
 * are far from full, and once one of its own goes, it is served again.
 */
static void
test_tcp_per_client(void **state)
{
	struct fixture *fx = *state;
	struct dns_response resp;
	int fds[4], over, i;

	NEED_ENV(state);
	dns_resolver_set_tcp_per_client(fx->r, 4);
	for (i = 0; i < 4; i++)
		fds[i] = tcp_client();
	accepted(fx, 4);
	over = tcp_client();
	tcp_ask(over, 70, "share.test");
	assert_true(tcp_answer(fx, over, &resp));
	assert_int_equal(resp.rcode, DNS_R_REFUSED);
	assert_int_equal(fx->ndone, 1);
	assert_true(fx->done[0].over_limit);
	assert_int_equal(stats(fx).tcp_refused, 1);
	close(over);
	/* the served ones still are */
	tcp_ask(fds[3], 71, "local.test");
	assert_true(tcp_answer(fx, fds[3], &resp));
	assert_int_equal(resp.rcode, DNS_R_NXDOMAIN);
	assert_false(fx->done[fx->ndone - 1].over_limit);
	/* one of its own goes: the next is served */
	close(fds[0]);
	turn(fx, ABSENT_MS);
	fds[0] = tcp_client();
	tcp_ask(fds[0], 72, "local.test");
	assert_true(tcp_answer(fx, fds[0], &resp));
	assert_int_equal(resp.rcode, DNS_R_NXDOMAIN);
	assert_false(fx->done[fx->ndone - 1].over_limit);
	assert_int_equal(stats(fx).tcp_refused, 1);
	for (i = 0; i < 4; i++)
		close(fds[i]);
	assert_upstreams_quiet(fx);
}

/* Writes len bytes to a new TCP client and returns it. */
static int
tcp_send_raw(const uint8_t *msg, size_t len)
{
	int fd = tcp_client();

	assert_int_equal(write(fd, msg, len), (ssize_t)len);
	return fd;
}

/*
 * Framing a query cannot be read by has a request all the same (a
 * malformed one), answered FORMERR where the client can still read, and
 * the connection is closed: a length of 0, a length beyond what the
 * resolver takes, a message the client's end cut short. Queries behind
 * one upstream when the client resets, and a message cut short by a
 * reset or by the idle time, have theirs too, with nothing sent.
 */
static void
test_tcp_bad_framing(void **state)
{
	struct fixture *fx = *state;
	uint8_t msg[1024];
	struct upq u;
	unsigned rcode;
	uint16_t id;
	size_t len, l2;
	int fd, i;

	NEED_ENV(state);
	/* a length of 0 */
	memset(msg, 0, sizeof(msg));
	fd = tcp_send_raw(msg, 2);
	assert_true(tcp_header(fx, fd, &id, &rcode));
	assert_int_equal(rcode, DNS_R_FORMERR);
	assert_tcp_closed(fx, fd);
	close(fd);
	assert_int_equal(fx->ndone, 1);
	assert_int_equal(fx->done[0].rcode, DNS_R_FORMERR);
	assert_int_not_equal(fx->done[0].perr, DNS_PARSE_OK);
	assert_false(fx->done[0].over_limit);

	/* a length beyond DNS_TCP_MSG_MAX, before a query that would parse:
	 * not forwarded, answered FORMERR with its id */
	len = tcp_query(msg, sizeof(msg), 0x1234, "big.test");
	msg[0] = (uint8_t)((DNS_TCP_MSG_MAX + 1) >> 8);
	msg[1] = (uint8_t)(DNS_TCP_MSG_MAX + 1);
	fd = tcp_send_raw(msg, len);
	assert_true(tcp_header(fx, fd, &id, &rcode));
	assert_int_equal(id, 0x1234);
	assert_int_equal(rcode, DNS_R_FORMERR);
	assert_tcp_closed(fx, fd);
	close(fd);
	assert_int_equal(fx->ndone, 2);
	assert_int_equal(fx->done[1].rcode, DNS_R_FORMERR);
	assert_int_equal(fx->done[1].perr, DNS_PARSE_TRAILING);
	assert_string_equal(fx->done[1].name, "");
	assert_upstreams_quiet(fx);

	/* a length longer than what comes before the client's end */
	len = tcp_query(msg, sizeof(msg), 0x2345, "cut.test");
	msg[1] = (uint8_t)(msg[1] + 10);
	fd = tcp_send_raw(msg, len);
	assert_int_equal(shutdown(fd, SHUT_WR), 0);
	assert_true(tcp_header(fx, fd, &id, &rcode));
	assert_int_equal(id, 0x2345);
	assert_int_equal(rcode, DNS_R_FORMERR);
	assert_tcp_closed(fx, fd);
	close(fd);
	assert_int_equal(fx->ndone, 3);
	assert_int_equal(fx->done[2].perr, DNS_PARSE_SHORT);
	assert_int_equal(fx->done[2].rcode, DNS_R_FORMERR);
	assert_upstreams_quiet(fx);

	/* a query upstream, one behind it and half of a third; then a
	 * reset: the second and the half are on record at once, the first
	 * when its answer finds the client gone */
	len = tcp_query(msg, sizeof(msg), 1, "first.test");
	len += tcp_query(msg + len, sizeof(msg) - len, 2, "second.test");
	l2 = tcp_query(msg + len, sizeof(msg) - len, 3, "third.test");
	len += l2 / 2;
	fd = tcp_send_raw(msg, len);
	assert_true(upstream_get(fx, fx->up[0], &u, WAIT_MS));
	assert_string_equal(u.q.qname, "first.test");
	turn(fx, ABSENT_MS);
	assert_int_equal(fx->ndone, 3);
	tcp_reset(fd);
	done_count(fx, 5);
	assert_string_equal(fx->done[3].name, "second.test");
	assert_int_equal(fx->done[3].rcode, -1);
	assert_int_equal(fx->done[3].perr, DNS_PARSE_OK);
	assert_string_equal(fx->done[4].name, "");
	assert_int_equal(fx->done[4].rcode, -1);
	assert_int_equal(fx->done[4].perr, DNS_PARSE_SHORT);
	upstream_reply(fx->up[0], &u, u.q.id, NULL, 0, "192.0.2.1");
	done_count(fx, 6);
	assert_string_equal(fx->done[5].name, "first.test");
	assert_int_equal(fx->done[5].rcode, -1);
	/* only the first went upstream */
	assert_upstreams_quiet(fx);

	/* half a length prefix, then silence until the idle time is up */
	fd = tcp_send_raw(msg, 1);
	turn(fx, ABSENT_MS);	/* accepted */
	turn(fx, ABSENT_MS);	/* read */
	assert_int_equal(fx->ndone, 6);
	fx->now += DNS_TCP_IDLE_MS;
	turn(fx, 0);
	assert_int_equal(fx->ndone, 7);
	assert_int_equal(fx->done[6].perr, DNS_PARSE_SHORT);
	assert_int_equal(fx->done[6].rcode, -1);
	assert_tcp_closed(fx, fd);
	close(fd);

	/* a message a byte at a time, each well within the idle time: the
	 * time runs from its first byte, not from the last, or one client
	 * could hold a connection for hours without a query (found by
	 * review, 2026-12-03) */
	fd = tcp_send_raw(msg, 1);
	turn(fx, ABSENT_MS);	/* accepted */
	turn(fx, ABSENT_MS);	/* read */
	for (i = 1; i < 4; i++) {
		fx->now += DNS_TCP_IDLE_MS / 4;
		assert_int_equal(write(fd, msg + i, 1), 1);
		turn(fx, ABSENT_MS);
		assert_int_equal(fx->ndone, 7);
	}
	fx->now += DNS_TCP_IDLE_MS / 4;
	turn(fx, 0);
	assert_int_equal(fx->ndone, 8);
	assert_int_equal(fx->done[7].perr, DNS_PARSE_SHORT);
	assert_tcp_closed(fx, fd);
	close(fd);
	assert_int_equal(stats(fx).malformed, 6);
}

/*
 * While the resolver does not read (paused, or its loop busy), queries
 * beyond the UDP socket's buffer are dropped by the kernel. Each one is
 * counted (ops->lost, kernel_dropped): learnt from the next datagram
 * read, and at the end of a pause. Nothing is counted twice: every query
 * sent is a request or a loss.
 */
#define FLOOD_N	20000

static void
flood(struct fixture *fx, uint16_t first)
{
	int i;

	for (i = 0; i < FLOOD_N; i++)
		client_ask(fx, (uint16_t)(first + i), "local.test", DNS_T_A);
}

/* Turns until the resolver has read every query waiting. */
static void
drain_queries(struct fixture *fx)
{
	uint64_t before;
	int quiet = 0;

	while (quiet < 3) {
		before = stats(fx).queries;
		turn(fx, 10);
		quiet = stats(fx).queries == before ? quiet + 1 : 0;
	}
}

static void
test_udp_overflow(void **state)
{
	struct fixture *fx = *state;
	uint64_t read1, dropped1;

	NEED_ENV(state);
	fx->answer_locally = true;
	/* not read while they come: the loop is elsewhere */
	flood(fx, 0);
	drain_queries(fx);
	read1 = stats(fx).queries;
	assert_true(read1 > 0 && read1 < FLOOD_N);
	/* nothing read was queued after a drop: not known yet */
	assert_int_equal(stats(fx).kernel_dropped, 0);
	/* the next datagram says how many there were */
	client_ask(fx, 1, "local.test", DNS_T_A);
	drain_queries(fx);
	assert_int_equal(stats(fx).queries, read1 + 1);
	assert_int_equal(stats(fx).kernel_dropped, FLOOD_N - read1);
	assert_int_equal(fx->lost, FLOOD_N - read1);
	assert_int_equal(fx->nlost, 1);
	dropped1 = FLOOD_N - read1;

	/* paused: known when the pause ends, before anything is read */
	dns_resolver_pause(fx->r, true);
	flood(fx, 0);
	turn(fx, 10);
	assert_int_equal(stats(fx).queries, read1 + 1);
	dns_resolver_pause(fx->r, false);
	assert_true(stats(fx).kernel_dropped > dropped1);
	assert_int_equal(fx->lost, stats(fx).kernel_dropped);
	drain_queries(fx);
	/* and the datagrams read after it, queued before, add nothing */
	assert_int_equal(stats(fx).queries + stats(fx).kernel_dropped,
	    2 * FLOOD_N + 1);
	assert_int_equal(fx->lost, stats(fx).kernel_dropped);
	assert_int_equal(fx->nlost, 2);

	/* closing with drops no datagram told of: counted then */
	dns_resolver_pause(fx->r, true);
	dropped1 = stats(fx).kernel_dropped;
	flood(fx, 0);
	dns_resolver_close(fx->r);
	fx->r = NULL;
	assert_true(fx->lost > dropped1);
	assert_int_equal(fx->nlost, 3);
}

#define T(f)	cmocka_unit_test_setup_teardown(f, fixture_setup, \
		    fixture_teardown)

int
main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_forward),
		T(test_forged),
		T(test_timeouts),
		T(test_icmp_unreachable),
		T(test_many_in_flight),
		T(test_rotation),
		T(test_tcp),
		T(test_set_upstreams),
		T(test_close_in_flight),
		T(test_tcp_reset_busy),
		T(test_tcp_half_close),
		T(test_tcp_fill),
		T(test_tcp_idle_busy),
		T(test_cache_hit),
		T(test_cache_key),
		T(test_cache_expiry),
		T(test_cache_negative),
		T(test_truncated),
		T(test_cache_upstreams),
		T(test_cache_set),
		T(test_cache_edit),
		T(test_pause),
		T(test_tcp_over_limit),
		T(test_tcp_per_client),
		T(test_tcp_bad_framing),
		T(test_udp_overflow),
	};

	return cmocka_run_group_tests(tests, group_setup, NULL);
}
