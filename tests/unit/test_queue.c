/* test_queue.c: nfq_queue_* against the kernel, in a private network namespace. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <linux/netfilter.h>
#include <cmocka.h>

#include "tests/unit/testns.h"

#include "nfq/nfq.h"

/*
 * The whole binary moves into a network namespace of its own
 * (unshare(CLONE_NEWNET)): loopback, the iptables rules and the queues
 * exist only there and vanish when the process exits, whatever happens,
 * so there is nothing to tear down. Needs root; skips otherwise.
 *
 * In that namespace:
 *   OUTPUT  udp dport 9 on lo  -> queue 3   (hook LOCAL_OUT, no indev)
 *   INPUT   udp dport 9 on lo without mark 0x2a -> drop
 *   INPUT   udp dport 10 on lo -> queue 4   (hook LOCAL_IN, indev lo)
 */

#ifndef UDP_SEGMENT
#define UDP_SEGMENT	103	/* linux/udp.h */
#endif

#define MARK		0x2a
#define WAIT_MS		1000	/* for something that should arrive */
#define ABSENT_MS	150	/* for something that should not */

static const char *env_skip;	/* why the tests cannot run, or NULL */

struct fixture {
	struct nfq_queue	*q;
	int			 rx;	/* 127.0.0.1:9 */
	int			 tx;	/* 127.0.0.1:<txport> */
	uint16_t		 txport;
};

/* What the callback saw and what it is told to do. */
struct capture {
	struct nfq_queue	*q;
	int			 n;
	struct nfq_packet	 pkt;	/* payload pointer not valid later */
	enum nfq_parse_error	 perr;
	struct nfq_tuple	 t;
	char			 data[64];	/* the UDP payload, NUL-ended */
	/* instructions */
	int			 ret;
	uint32_t		 verdict;
	bool			 set_mark;
};

static int
group_setup(void **state)
{
	static char *const rules[][20] = {
		{ "iptables", "-w", "-A", "OUTPUT", "-o", "lo", "-p", "udp",
		  "--dport", "9", "-j", "NFQUEUE", "--queue-num", "3", NULL },
		{ "iptables", "-w", "-A", "INPUT", "-i", "lo", "-p", "udp",
		  "--dport", "9", "-m", "mark", "!", "--mark", "0x2a",
		  "-j", "DROP", NULL },
		{ "iptables", "-w", "-A", "INPUT", "-i", "lo", "-p", "udp",
		  "--dport", "10", "-j", "NFQUEUE", "--queue-num", "4", NULL },
	};
	size_t i;
	int rc;

	(void)state;
	if ((env_skip = testns_enter()) != NULL)
		return 0;
	for (i = 0; i < sizeof(rules) / sizeof(rules[0]); i++) {
		rc = testns_run(rules[i]);
		if (rc == 127) {
			env_skip = "iptables not found";
			return 0;
		}
		if (rc != 0) {
			env_skip = "iptables failed (no NFQUEUE target?)";
			return 0;
		}
	}
	return 0;
}

static int
udp_socket(uint16_t port, uint16_t *bound)
{
	struct sockaddr_in sin;
	socklen_t slen = sizeof(sin);
	int fd;

	if ((fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0)) == -1)
		return -1;
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sin.sin_port = htons(port);
	if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) == -1 ||
	    getsockname(fd, (struct sockaddr *)&sin, &slen) == -1) {
		close(fd);
		return -1;
	}
	if (bound != NULL)
		*bound = ntohs(sin.sin_port);
	return fd;
}

static int
fixture_setup(void **state)
{
	struct fixture *fx;
	char err[256];

	*state = NULL;
	if (env_skip != NULL)
		return 0;
	fx = calloc(1, sizeof(*fx));
	assert_non_null(fx);
	fx->q = nfq_queue_open(3, 128, err, sizeof(err));
	if (fx->q == NULL)
		fail_msg("%s", err);
	fx->rx = udp_socket(9, NULL);
	fx->tx = udp_socket(0, &fx->txport);
	assert_true(fx->rx != -1 && fx->tx != -1);
	*state = fx;
	return 0;
}

static int
fixture_teardown(void **state)
{
	struct fixture *fx = *state;

	if (fx == NULL)
		return 0;
	nfq_queue_close(fx->q);
	close(fx->rx);
	close(fx->tx);
	free(fx);
	return 0;
}

#define NEED_ENV(state)	TESTNS_SKIP_IF(*(state) != NULL ? NULL :	\
    env_skip != NULL ? env_skip : "no state")

static void
send_to(int fd, uint16_t port, const char *msg)
{
	struct sockaddr_in sin;

	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sin.sin_port = htons(port);
	/* Queued packets are not sent yet, so sendto succeeds; only a
	 * packet dropped without a queue could make it fail, which callers
	 * then check at the receiving end. */
	(void)sendto(fd, msg, strlen(msg), 0, (struct sockaddr *)&sin,
	    sizeof(sin));
}

/* Datagram text received within ms, or "" when none came. */
static const char *
receive(int fd, int ms)
{
	static char buf[128];
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	ssize_t n;

	buf[0] = '\0';
	if (poll(&pfd, 1, ms) != 1)
		return buf;
	n = recv(fd, buf, sizeof(buf) - 1, 0);
	buf[n > 0 ? n : 0] = '\0';
	return buf;
}

static int
capture_cb(void *arg, const struct nfq_packet *pkt)
{
	struct capture *c = arg;
	size_t n;

	c->n++;
	c->pkt = *pkt;
	c->perr = nfq_packet_parse(pkt->payload, pkt->len, &c->t);
	n = c->perr == NFQ_PARSE_OK ? c->t.l4_len : 0;
	if (n > sizeof(c->data) - 1)
		n = sizeof(c->data) - 1;
	if (n > 0)
		memcpy(c->data, c->t.l4_payload, n);
	c->data[n] = '\0';
	if (c->ret == 0 && nfq_queue_verdict(c->q, pkt->id, c->verdict,
	    c->set_mark, MARK) == -1)
		return -1;
	return c->ret;
}

/* Waits for the queue to become readable and reads it once. */
static int
queue_read(struct nfq_queue *q, struct capture *c)
{
	struct pollfd pfd = { .fd = nfq_queue_fd(q), .events = POLLIN };

	if (poll(&pfd, 1, WAIT_MS) != 1)
		return 0;
	return nfq_queue_recv(q, capture_cb, c);
}

static void
test_accept_with_mark(void **state)
{
	struct fixture *fx;
	struct capture c = { .verdict = NF_ACCEPT, .set_mark = true };
	struct nfq_queue_stats st;

	NEED_ENV(state);
	fx = *state;
	c.q = fx->q;
	send_to(fx->tx, 9, "one");
	assert_int_equal(queue_read(fx->q, &c), 1);
	assert_int_equal(c.n, 1);
	assert_int_equal(c.pkt.hook, NF_INET_LOCAL_OUT);
	assert_int_equal(c.pkt.indev, 0);
	assert_int_equal(c.pkt.mark, 0);
	assert_int_equal(c.pkt.len, 20 + 8 + 3);
	assert_int_equal(c.perr, NFQ_PARSE_OK);
	assert_int_equal(c.t.proto, IPPROTO_UDP);
	assert_int_equal(c.t.saddr, htonl(INADDR_LOOPBACK));
	assert_int_equal(c.t.daddr, htonl(INADDR_LOOPBACK));
	assert_int_equal(c.t.sport, fx->txport);
	assert_int_equal(c.t.dport, 9);
	assert_string_equal(c.data, "one");
	/* Delivery also proves the mark: INPUT drops it without 0x2a. */
	assert_string_equal(receive(fx->rx, WAIT_MS), "one");

	nfq_queue_get_stats(fx->q, &st);
	assert_int_equal(st.packets, 1);
	assert_int_equal(st.dropped, 0);
	assert_int_equal(st.verdict_errors, 0);
}

static void
test_drop(void **state)
{
	struct fixture *fx;
	struct capture c = { .verdict = NF_DROP };

	NEED_ENV(state);
	fx = *state;
	c.q = fx->q;
	send_to(fx->tx, 9, "two");
	assert_int_equal(queue_read(fx->q, &c), 1);
	assert_string_equal(c.data, "two");
	assert_string_equal(receive(fx->rx, ABSENT_MS), "");
}

/* Accepted without the mark: the INPUT rule drops it, so the previous
 * test's delivery was the mark's doing. */
static void
test_accept_without_mark(void **state)
{
	struct fixture *fx;
	struct capture c = { .verdict = NF_ACCEPT };

	NEED_ENV(state);
	fx = *state;
	c.q = fx->q;
	send_to(fx->tx, 9, "unmarked");
	assert_int_equal(queue_read(fx->q, &c), 1);
	assert_string_equal(receive(fx->rx, ABSENT_MS), "");
}

/* A callback that fails leaves the verdict to the reader: drop. */
static void
test_callback_failure_drops(void **state)
{
	struct fixture *fx;
	struct capture c = { .ret = -1 };
	struct nfq_queue_stats st;

	NEED_ENV(state);
	fx = *state;
	c.q = fx->q;
	send_to(fx->tx, 9, "three");
	assert_int_equal(queue_read(fx->q, &c), 1);
	assert_int_equal(c.n, 1);
	assert_string_equal(receive(fx->rx, ABSENT_MS), "");
	nfq_queue_get_stats(fx->q, &st);
	assert_int_equal(st.dropped, 1);
	assert_int_equal(st.verdict_errors, 0);
}

/* A verdict for an id the kernel does not hold is refused; the refusal
 * arrives as an error message that the reader counts, not a failure. */
static void
test_unknown_id_counted(void **state)
{
	struct fixture *fx;
	struct capture c = { .verdict = NF_ACCEPT, .set_mark = true };
	struct nfq_queue_stats st;

	NEED_ENV(state);
	fx = *state;
	c.q = fx->q;
	assert_int_equal(nfq_queue_verdict(fx->q, 0x7fffffff, NF_ACCEPT,
	    false, 0), 0);
	send_to(fx->tx, 9, "four");
	assert_int_equal(queue_read(fx->q, &c), 1);
	assert_string_equal(receive(fx->rx, WAIT_MS), "four");
	nfq_queue_get_stats(fx->q, &st);
	assert_int_equal(st.verdict_errors, 1);
	assert_int_equal(st.packets, 1);

	errno = 0;
	assert_int_equal(nfq_queue_verdict(fx->q, 1, NF_QUEUE, false, 0), -1);
	assert_int_equal(errno, EINVAL);
}

/* One call reads at most 64 packets, in order, then the rest. */
static void
test_batches(void **state)
{
	struct fixture *fx;
	struct capture c = { .verdict = NF_ACCEPT, .set_mark = true };
	char msg[16];
	int i, got;

	NEED_ENV(state);
	fx = *state;
	c.q = fx->q;
	for (i = 0; i < 70; i++) {
		snprintf(msg, sizeof(msg), "m%d", i);
		send_to(fx->tx, 9, msg);
	}
	assert_int_equal(queue_read(fx->q, &c), 64);
	assert_string_equal(c.data, "m63");
	assert_int_equal(queue_read(fx->q, &c), 6);
	assert_string_equal(c.data, "m69");
	assert_int_equal(nfq_queue_recv(fx->q, capture_cb, &c), 0);
	for (got = 0; got < 70; got++) {
		snprintf(msg, sizeof(msg), "m%d", got);
		assert_string_equal(receive(fx->rx, WAIT_MS), msg);
	}
}

/* A full queue drops what does not fit (no fail-open flag). Port 10 has
 * no mark rule, so a packet let through would arrive. */
static void
test_full_queue_drops(void **state)
{
	struct fixture *fx;
	struct capture c = { .verdict = NF_ACCEPT };
	struct nfq_queue *q4;
	char err[256], msg[16];
	int i, rx10;

	NEED_ENV(state);
	fx = *state;
	q4 = nfq_queue_open(4, 4, err, sizeof(err));
	if (q4 == NULL)
		fail_msg("%s", err);
	rx10 = udp_socket(10, NULL);
	assert_true(rx10 != -1);
	c.q = q4;
	for (i = 0; i < 6; i++) {
		snprintf(msg, sizeof(msg), "f%d", i);
		send_to(fx->tx, 10, msg);
	}
	assert_int_equal(queue_read(q4, &c), 4);
	for (i = 0; i < 4; i++) {
		snprintf(msg, sizeof(msg), "f%d", i);
		assert_string_equal(receive(rx10, WAIT_MS), msg);
	}
	assert_string_equal(receive(rx10, ABSENT_MS), "");
	close(rx10);
	nfq_queue_close(q4);
}

/* With NFQA_CFG_F_GSO a GSO packet is queued whole: one UDP_SEGMENT send
 * of three segments is one queued packet, and still three datagrams. */
static void
test_gso_unsegmented(void **state)
{
	struct fixture *fx;
	struct capture c = { .verdict = NF_ACCEPT, .set_mark = true };
	struct sockaddr_in sin;
	static char big[3000];
	char buf[2048];
	int gso = 1000, i;
	ssize_t n;
	struct pollfd pfd;

	NEED_ENV(state);
	fx = *state;
	c.q = fx->q;
	if (setsockopt(fx->tx, SOL_UDP, UDP_SEGMENT, &gso, sizeof(gso)) == -1) {
		print_message("skipped: no UDP_SEGMENT\n");
		skip();
	}
	memset(big, 'g', sizeof(big));
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sin.sin_port = htons(9);
	assert_int_equal(sendto(fx->tx, big, sizeof(big), 0,
	    (struct sockaddr *)&sin, sizeof(sin)), sizeof(big));
	assert_int_equal(queue_read(fx->q, &c), 1);
	assert_int_equal(c.pkt.len, 20 + 8 + sizeof(big));
	assert_int_equal(c.perr, NFQ_PARSE_OK);
	assert_int_equal(c.t.l4_len, sizeof(big));
	for (i = 0; i < 3; i++) {
		pfd.fd = fx->rx;
		pfd.events = POLLIN;
		assert_int_equal(poll(&pfd, 1, WAIT_MS), 1);
		n = recv(fx->rx, buf, sizeof(buf), 0);
		assert_int_equal(n, 1000);
	}
}

static void
test_open_errors(void **state)
{
	struct fixture *fx;
	struct nfq_queue *q2;
	char err[256], want[128];

	NEED_ENV(state);
	fx = *state;
	(void)fx;
	/* Queue 3 is bound by the fixture's socket. */
	err[0] = '\0';
	q2 = nfq_queue_open(3, 64, err, sizeof(err));
	assert_null(q2);
	snprintf(want, sizeof(want), ": %s", strerror(EPERM));
	assert_non_null(strstr(err, "nfqueue 3: bind refused"));
	assert_non_null(strstr(err, want));

	err[0] = '\0';
	assert_null(nfq_queue_open(5, 0, err, sizeof(err)));
	assert_non_null(strstr(err, "nfqueue 5: "));
	/* NULL err is allowed. */
	assert_null(nfq_queue_open(3, 64, NULL, 0));
}

/* Once the reader is gone, queued traffic is dropped, not let through. */
static void
test_closed_queue_drops(void **state)
{
	struct fixture *fx;

	NEED_ENV(state);
	fx = *state;
	nfq_queue_close(fx->q);
	fx->q = NULL;
	send_to(fx->tx, 9, "after close");
	assert_string_equal(receive(fx->rx, ABSENT_MS), "");
}

/* A packet queued on input carries its input interface. */
static void
test_input_hook_indev(void **state)
{
	struct fixture *fx;
	struct capture c = { .verdict = NF_ACCEPT };
	struct nfq_queue *q4;
	char err[256];
	int rx10;

	NEED_ENV(state);
	fx = *state;
	q4 = nfq_queue_open(4, 16, err, sizeof(err));
	if (q4 == NULL)
		fail_msg("%s", err);
	rx10 = udp_socket(10, NULL);
	assert_true(rx10 != -1);
	c.q = q4;
	send_to(fx->tx, 10, "in");
	assert_int_equal(queue_read(q4, &c), 1);
	assert_int_equal(c.pkt.hook, NF_INET_LOCAL_IN);
	assert_int_equal(c.pkt.indev, if_nametoindex("lo"));
	assert_int_equal(c.t.dport, 10);
	assert_string_equal(receive(rx10, WAIT_MS), "in");
	close(rx10);
	nfq_queue_close(q4);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test_setup_teardown(f, fixture_setup, fixture_teardown)
		T(test_accept_with_mark),
		T(test_drop),
		T(test_accept_without_mark),
		T(test_callback_failure_drops),
		T(test_unknown_id_counted),
		T(test_batches),
		T(test_full_queue_drops),
		T(test_gso_unsegmented),
		T(test_open_errors),
		T(test_closed_queue_drops),
		T(test_input_hook_indev),
#undef T
	};

	return cmocka_run_group_tests(tests, group_setup, NULL);
}
