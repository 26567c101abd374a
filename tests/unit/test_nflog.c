/* test_nflog.c: nfq_nflog_* against the kernel, in a private network namespace. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <cmocka.h>

#include "tests/unit/testns.h"

#include "nfq/nfq.h"

/*
 * The binary moves into a network namespace of its own, where
 *   OUTPUT  udp dport 11 on lo -> NFLOG group 5
 * and every datagram to 127.0.0.1:11 is copied to group 5. Needs root;
 * skips otherwise.
 */

#define GROUP	5
#define PORT	11
#define BURST	400

static const char *env_skip;

static int
group_setup(void **state)
{
	char *const rule[] = { "iptables", "-w", "-A", "OUTPUT", "-o", "lo",
	    "-p", "udp", "--dport", "11", "-j", "NFLOG", "--nflog-group", "5",
	    NULL };
	int rc;

	(void)state;
	if ((env_skip = testns_enter()) != NULL)
		return 0;
	if ((rc = testns_run(rule)) != 0)
		env_skip = rc == 127 ? "iptables not found" :
		    "iptables failed (no NFLOG target?)";
	return 0;
}

#define NEED_ENV()	TESTNS_SKIP_IF(env_skip)

static void
burst(int n)
{
	struct sockaddr_in sin;
	char msg[64];
	int fd, i;

	assert_true((fd = socket(AF_INET, SOCK_DGRAM, 0)) != -1);
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sin.sin_port = htons(PORT);
	memset(msg, 'x', sizeof(msg));
	/* nothing listens: each is copied on the way out, then refused */
	for (i = 0; i < n; i++)
		(void)sendto(fd, msg, sizeof(msg), 0,
		    (struct sockaddr *)&sin, sizeof(sin));
	close(fd);
}

static int
count_cb(void *arg, const struct nfq_packet *pkt)
{
	(void)pkt;
	(*(int *)arg)++;
	return 0;
}

/* Reads until the socket is dry; the copies read. */
static int
drain(struct nfq_nflog *l)
{
	int n = 0, i;

	for (i = 0; i < 10000; i++) {
		assert_true(nfq_nflog_recv(l, count_cb, &n) >= 0);
		if (nfq_nflog_drained(l))
			return n;
	}
	fail_msg("never read dry");
	return n;
}

/*
 * A socket too small for a burst: the kernel drops copies and says so
 * once (ENOBUFS); once read dry, stats.dropped has how many, from the
 * kernel's own counter, so that read and dropped add up to what was
 * sent. A second burst after that is counted as well.
 */
static void
test_drops_counted(void **state)
{
	struct nfq_nflog_stats st;
	struct nfq_nflog *l;
	char err[256];
	int small = 8192, got;

	(void)state;
	NEED_ENV();
	l = nfq_nflog_open(GROUP, NFQ_NFLOG_HEADERS, err, sizeof(err));
	if (l == NULL)
		fail_msg("%s", err);
	assert_int_equal(setsockopt(nfq_nflog_fd(l), SOL_SOCKET, SO_RCVBUF,
	    &small, sizeof(small)), 0);

	burst(BURST);
	got = drain(l);
	nfq_nflog_stats(l, &st);
	assert_true(got > 0);
	assert_true(st.overruns >= 1);
	assert_true(st.dropped >= 1);
	assert_int_equal(st.packets, (uint64_t)got);
	assert_int_equal(st.dropped + st.packets, BURST);

	burst(BURST);
	got += drain(l);
	nfq_nflog_stats(l, &st);
	assert_true(st.overruns >= 2);
	assert_int_equal(st.dropped + (uint64_t)got, 2 * BURST);

	/* a burst the socket holds: nothing more counted */
	burst(4);
	got += drain(l);
	nfq_nflog_stats(l, &st);
	assert_int_equal(st.dropped + (uint64_t)got, 2 * BURST + 4);
	nfq_nflog_close(l);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_drops_counted),
	};

	return cmocka_run_group_tests(tests, group_setup, NULL);
}
