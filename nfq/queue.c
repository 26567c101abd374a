/* queue.c: one NFQUEUE queue over libmnl: bind, read packets, send verdicts. */
#include <errno.h>
#include <poll.h>
#include <stdalign.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <sys/socket.h>

#include <libmnl/libmnl.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_queue.h>
#include <libnetfilter_queue/libnetfilter_queue.h>

#include "nfq/nfq.h"
#include "nfq/mmsg_int.h"

/* Messages per nfq_queue_recv, so that one busy queue cannot starve the
 * rest of the caller's event loop. */
#define QUEUE_RECV_BATCH	64

/* Messages one recvmmsg takes. A call that takes fewer found the socket
 * empty, so the batch ends without the read that would say so (EAGAIN):
 * a system call saved on every wake-up of the caller's loop. */
#define QUEUE_RECV_VLEN		8

/* The kernel copies at most 0xffff bytes of a packet (copy range); with
 * NFQA_CFG_F_GSO a queued packet is an unsegmented GSO packet of up to
 * 64 KiB. Twice that leaves room for the netlink header and the other
 * attributes, so a message is never truncated (MSG_TRUNC). */
#define QUEUE_BUF_SIZE		(128 * 1024)

/* Kernel backlog of queued messages the socket may hold: bursts (a SYN
 * flood, a slow moment of the caller) wait here instead of being dropped. */
#define QUEUE_RCVBUF		(8 * 1024 * 1024)

/* How long nfq_queue_open waits for the kernel's answer to its config. */
#define QUEUE_ACK_TIMEOUT_MS	2000

/* sendto of a verdict: attempts on ENOBUFS/EAGAIN before giving up. */
#define QUEUE_SEND_TRIES	4

struct nfq_queue {
	struct mnl_socket	*nl;
	unsigned int		 portid;
	uint16_t		 num;
	uint32_t		 seq;

	/* Set for the duration of one nfq_queue_recv. */
	nfq_packet_cb		 cb;
	void			*cb_arg;
	int			 handled;

	struct nfq_queue_stats	 stats;
	uint32_t		 mark_bits;	/* nfq_queue_set_mark_bits */

	/* Received messages, one datagram each; packet payloads point in
	 * here. Pages the kernel never writes are never resident. */
	struct mmsghdr		 msgs[QUEUE_RECV_VLEN];
	struct iovec		 iov[QUEUE_RECV_VLEN];
	alignas(struct nlmsghdr) char buf[QUEUE_RECV_VLEN][QUEUE_BUF_SIZE];
};

static void
queue_err(char *err, size_t errlen, uint16_t num, const char *what, int e)
{
	if (err == NULL || errlen == 0)
		return;
	snprintf(err, errlen, "nfqueue %u: %s: %s", num, what, strerror(e));
}

/* Every id that reaches us gets exactly one verdict; when the packet cannot
 * be handed to the caller that verdict is drop (fail closed). */
static void
queue_drop(struct nfq_queue *q, uint32_t id)
{
	q->stats.dropped++;
	if (nfq_queue_verdict(q, id, NF_DROP, false, 0) == -1)
		q->stats.verdict_errors++;
}

/*
 * A message of type NFQNL_MSG_PACKET. Returns MNL_CB_OK whatever happens to
 * the packet: one bad message must not stop the rest of the batch.
 */
static int
queue_packet_cb(const struct nlmsghdr *nlh, void *data)
{
	struct nfq_queue *q = data;
	struct nlattr *attr[NFQA_MAX + 1] = { NULL };
	struct nfqnl_msg_packet_hdr ph;
	struct nfq_packet pkt;
	int parsed;

	if (nlh->nlmsg_type != ((NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET))
		return MNL_CB_OK;

	/* The kernel puts the packet header first, so a later malformed
	 * attribute still leaves us the id to drop. */
	parsed = nfq_nlmsg_parse(nlh, attr);
	if (attr[NFQA_PACKET_HDR] == NULL) {
		q->stats.unverdictable++;
		return MNL_CB_OK;
	}
	memcpy(&ph, mnl_attr_get_payload(attr[NFQA_PACKET_HDR]), sizeof(ph));

	memset(&pkt, 0, sizeof(pkt));
	pkt.id = ntohl(ph.packet_id);
	pkt.hook = ph.hook;
	q->handled++;

	/* No payload: copy mode was still "meta" (a packet queued between
	 * bind and the copy-mode setting) or the message is damaged. */
	if (parsed < 0 || attr[NFQA_PAYLOAD] == NULL) {
		queue_drop(q, pkt.id);
		return MNL_CB_OK;
	}
	if (attr[NFQA_IFINDEX_INDEV] != NULL)
		pkt.indev = ntohl(mnl_attr_get_u32(attr[NFQA_IFINDEX_INDEV]));
	if (attr[NFQA_IFINDEX_OUTDEV] != NULL)
		pkt.outdev = ntohl(mnl_attr_get_u32(
		    attr[NFQA_IFINDEX_OUTDEV]));
	if (attr[NFQA_MARK] != NULL)
		pkt.mark = ntohl(mnl_attr_get_u32(attr[NFQA_MARK]));
	pkt.payload = mnl_attr_get_payload(attr[NFQA_PAYLOAD]);
	pkt.len = mnl_attr_get_payload_len(attr[NFQA_PAYLOAD]);

	q->stats.packets++;
	if (q->cb(q->cb_arg, &pkt) < 0)
		queue_drop(q, pkt.id);
	return MNL_CB_OK;
}

/* Packets that arrive while nfq_queue_open still waits for its ack have no
 * caller to decide them yet. */
static int
queue_early_packet_cb(const struct nlmsghdr *nlh, void *data)
{
	struct nfq_queue *q = data;
	struct nlattr *attr[NFQA_MAX + 1] = { NULL };
	struct nfqnl_msg_packet_hdr ph;

	if (nlh->nlmsg_type != ((NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET))
		return MNL_CB_OK;
	(void)nfq_nlmsg_parse(nlh, attr);
	if (attr[NFQA_PACKET_HDR] == NULL) {
		q->stats.unverdictable++;
		return MNL_CB_OK;
	}
	memcpy(&ph, mnl_attr_get_payload(attr[NFQA_PACKET_HDR]), sizeof(ph));
	queue_drop(q, ntohl(ph.packet_id));
	return MNL_CB_OK;
}

/* An error reply outside nfq_queue_open answers a verdict we sent without
 * NLM_F_ACK (the kernel always reports failures), e.g. for an unknown id. */
static int
queue_error_cb(const struct nlmsghdr *nlh, void *data)
{
	struct nfq_queue *q = data;
	const struct nlmsgerr *e;

	if (mnl_nlmsg_get_payload_len(nlh) < sizeof(*e)) {
		q->stats.bad_messages++;
		return MNL_CB_OK;
	}
	e = mnl_nlmsg_get_payload(nlh);
	if (e->error != 0)
		q->stats.verdict_errors++;
	return MNL_CB_OK;
}

/* Control messages below NLMSG_MIN_TYPE: only errors matter; NOOP, DONE and
 * OVERRUN are ignored rather than ending the batch. (Not const only
 * because mnl_cb_run2's prototype says so.) */
static mnl_cb_t queue_ctl_cbs[NLMSG_MIN_TYPE] = {
	[NLMSG_ERROR] = queue_error_cb,
};

/*
 * Sends one config message with NLM_F_ACK and waits for the kernel's
 * answer. Returns 0, or -1 with errno (the kernel's error for a refused
 * config, ETIMEDOUT when no answer comes).
 */
static int
queue_config(struct nfq_queue *q, struct nlmsghdr *nlh)
{
	struct pollfd pfd;
	ssize_t n;
	int ret;

	nlh->nlmsg_flags |= NLM_F_ACK;
	nlh->nlmsg_seq = ++q->seq;
	if (mnl_socket_sendto(q->nl, nlh, nlh->nlmsg_len) < 0)
		return -1;

	pfd.fd = mnl_socket_get_fd(q->nl);
	pfd.events = POLLIN;
	for (;;) {
		n = mnl_socket_recvfrom(q->nl, q->buf[0], sizeof(q->buf[0]));
		if (n < 0) {
			if (errno == EINTR || errno == ENOBUFS)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				return -1;
			ret = poll(&pfd, 1, QUEUE_ACK_TIMEOUT_MS);
			if (ret == -1 && errno != EINTR)
				return -1;
			if (ret == 0) {
				errno = ETIMEDOUT;
				return -1;
			}
			continue;
		}
		/* -1: the kernel refused (errno is its error); 0 (MNL_CB_STOP):
		 * our ack; otherwise keep reading. */
		ret = mnl_cb_run(q->buf[0], n, q->seq, q->portid,
		    queue_early_packet_cb, q);
		if (ret <= MNL_CB_STOP)
			return ret == MNL_CB_STOP ? 0 : -1;
	}
}

struct nfq_queue *
nfq_queue_open(uint16_t num, uint32_t maxlen, char *err, size_t errlen)
{
	alignas(struct nlmsghdr) char msg[256];
	struct nfq_queue *q;
	struct nlmsghdr *nlh;
	int one = 1, rcvbuf = QUEUE_RCVBUF;
	int e;

	if (maxlen == 0) {
		queue_err(err, errlen, num, "queue length 0", EINVAL);
		return NULL;
	}
	if ((q = calloc(1, sizeof(*q))) == NULL) {
		queue_err(err, errlen, num, "calloc", errno);
		return NULL;
	}
	q->num = num;

	/* Non-blocking: nfq_queue_recv drains what is pending and returns to
	 * the caller's poll loop. Close-on-exec: a program the daemon runs
	 * must not inherit the queue (nor keep it bound after we exit). */
	q->nl = mnl_socket_open2(NETLINK_NETFILTER, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (q->nl == NULL) {
		queue_err(err, errlen, num, "netlink socket", errno);
		goto fail;
	}

	/*
	 * When the socket buffer is full the kernel drops the packet (fail
	 * closed: no fail-open flag) and, without this option, also makes the
	 * next recv fail with ENOBUFS. The drop already happened; the error
	 * only tells us so, and a loop that treats it as fatal would stop
	 * deciding every later packet. Drops stay visible in
	 * /proc/net/netfilter/nfnetlink_queue.
	 */
	if (mnl_socket_setsockopt(q->nl, NETLINK_NO_ENOBUFS, &one,
	    sizeof(one)) == -1) {
		queue_err(err, errlen, num, "NETLINK_NO_ENOBUFS", errno);
		goto fail;
	}

	/*
	 * A large receive buffer absorbs bursts while the caller is busy.
	 * SO_RCVBUFFORCE ignores net.core.rmem_max but needs CAP_NET_ADMIN
	 * (which binding a queue needs anyway); without it SO_RCVBUF gets
	 * what rmem_max allows. Neither failing is fatal: a small buffer
	 * only drops earlier under load.
	 */
	if (setsockopt(mnl_socket_get_fd(q->nl), SOL_SOCKET, SO_RCVBUFFORCE,
	    &rcvbuf, sizeof(rcvbuf)) == -1)
		(void)setsockopt(mnl_socket_get_fd(q->nl), SOL_SOCKET,
		    SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));

	if (mnl_socket_bind(q->nl, 0, MNL_SOCKET_AUTOPID) == -1) {
		queue_err(err, errlen, num, "netlink bind", errno);
		goto fail;
	}
	q->portid = mnl_socket_get_portid(q->nl);

	/*
	 * One message binds and configures the queue. The kernel checks the
	 * flags before it creates the queue and the rest cannot fail, so the
	 * queue is either bound with everything below or not at all. (Since
	 * Linux 3.8 the per-family PF_BIND/PF_UNBIND commands are no-ops and
	 * are not sent.)
	 *   - copy whole packets (0xffff is the largest copy range);
	 *   - maxlen packets of backlog; beyond it the kernel drops;
	 *   - NFQA_CFG_F_GSO: hand over GSO packets unsegmented, otherwise the
	 *     kernel segments each one before queueing, at a large cost.
	 *     The mask names only GSO and FAIL_OPEN, and FAIL_OPEN is cleared:
	 *     a full queue must drop, never let packets through undecided.
	 */
	nlh = nfq_nlmsg_put(msg, NFQNL_MSG_CONFIG, num);
	nfq_nlmsg_cfg_put_cmd(nlh, AF_INET, NFQNL_CFG_CMD_BIND);
	nfq_nlmsg_cfg_put_params(nlh, NFQNL_COPY_PACKET, 0xffff);
	nfq_nlmsg_cfg_put_qmaxlen(nlh, maxlen);
	mnl_attr_put_u32(nlh, NFQA_CFG_FLAGS, htonl(NFQA_CFG_F_GSO));
	mnl_attr_put_u32(nlh, NFQA_CFG_MASK,
	    htonl(NFQA_CFG_F_GSO | NFQA_CFG_F_FAIL_OPEN));
	if (queue_config(q, nlh) == -1) {
		e = errno;
		if (e == EPERM)
			queue_err(err, errlen, num, "bind refused (no "
			    "CAP_NET_ADMIN, or the queue is bound by another "
			    "socket)", e);
		else if (e == EOPNOTSUPP)
			queue_err(err, errlen, num, "bind: kernel refuses the "
			    "GSO queue flag", e);
		else
			queue_err(err, errlen, num, "bind", e);
		goto fail;
	}
	return q;

fail:
	if (q->nl != NULL)
		mnl_socket_close(q->nl);
	free(q);
	return NULL;
}

uint16_t
nfq_queue_num(const struct nfq_queue *q)
{
	return q->num;
}

int
nfq_queue_fd(const struct nfq_queue *q)
{
	return mnl_socket_get_fd(q->nl);
}

int
nfq_queue_recv(struct nfq_queue *q, nfq_packet_cb cb, void *arg)
{
	int i, n, got = 0;

	q->cb = cb;
	q->cb_arg = arg;
	q->handled = 0;
	while (got < QUEUE_RECV_BATCH) {
		nfq_mmsg_prepare(q->msgs, q->iov, q->buf[0],
		    sizeof(q->buf[0]), QUEUE_RECV_VLEN, NULL, 0);
		n = recvmmsg(mnl_socket_get_fd(q->nl), q->msgs,
		    QUEUE_RECV_VLEN, MSG_DONTWAIT, NULL);
		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			if (errno == EINTR)
				continue;
			/* The kernel dropped messages it could not queue to
			 * us; those packets are gone (dropped, fail closed). */
			if (errno == ENOBUFS) {
				q->stats.enobufs++;
				got++;
				continue;
			}
			q->cb = NULL;
			return -1;
		}
		for (i = 0; i < n; i++) {
			/* MSG_TRUNC: cannot happen with QUEUE_BUF_SIZE, but
			 * if it did that one packet is lost, not the loop. */
			if (q->msgs[i].msg_hdr.msg_flags & MSG_TRUNC) {
				q->stats.bad_messages++;
				continue;
			}
			/* seq 0: packets are not answers to anything we
			 * sent. */
			if (mnl_cb_run2(q->buf[i], q->msgs[i].msg_len, 0,
			    q->portid, queue_packet_cb, q, queue_ctl_cbs,
			    NLMSG_MIN_TYPE) == MNL_CB_ERROR)
				q->stats.bad_messages++;
		}
		got += n;
		if (n < QUEUE_RECV_VLEN)
			break;		/* the socket was empty */
	}
	q->cb = NULL;
	return q->handled;
}

void
nfq_queue_set_mark_bits(struct nfq_queue *q, uint32_t bits)
{
	q->mark_bits = bits;
}

int
nfq_queue_verdict(struct nfq_queue *q, uint32_t id, uint32_t verdict,
    bool set_mark, uint32_t mark)
{
	alignas(struct nlmsghdr) char msg[128];
	struct nlmsghdr *nlh;
	int tries;

	/* Only final verdicts: NF_QUEUE with its bypass flag would let a
	 * packet through undecided when the other queue has no reader. */
	if (verdict != NF_ACCEPT && verdict != NF_DROP && verdict != NF_REPEAT) {
		errno = EINVAL;
		return -1;
	}
	nlh = nfq_nlmsg_put(msg, NFQNL_MSG_VERDICT, q->num);
	nfq_nlmsg_verdict_put(nlh, (int)id, (int)verdict);
	if (set_mark)
		nfq_nlmsg_verdict_put_mark(nlh, mark != 0 ?
		    mark | q->mark_bits : 0);

	/* The kernel handles the message inside sendto; ENOBUFS/EAGAIN mean
	 * a momentary allocation failure, worth a few more attempts because
	 * the packet waits in the queue until it has its verdict. */
	for (tries = 1; ; tries++) {
		if (mnl_socket_sendto(q->nl, nlh, nlh->nlmsg_len) >= 0)
			return 0;
		if (errno != ENOBUFS && errno != EAGAIN && errno != EINTR)
			return -1;
		if (tries == QUEUE_SEND_TRIES)
			return -1;
	}
}

int
nfq_queue_verdicts(struct nfq_queue *q, const uint32_t *ids, size_t n,
    uint32_t verdict, bool set_mark, uint32_t mark)
{
	alignas(struct nlmsghdr) char msg[64 * 64];
	size_t i, len;
	int tries;

	if (verdict != NF_ACCEPT && verdict != NF_DROP && verdict != NF_REPEAT) {
		errno = EINVAL;
		return -1;
	}
	/*
	 * Several verdict messages back to back in one datagram: the kernel
	 * handles them in order within one sendto, so a held flight is
	 * released (or dropped) together. NFQNL_MSG_VERDICT_BATCH cannot be
	 * used: it covers every id up to the last, other flows' too.
	 */
	for (i = 0; i < n; ) {
		for (len = 0; i < n && len + 64 <= sizeof(msg); i++) {
			struct nlmsghdr *nlh;

			nlh = nfq_nlmsg_put(msg + len, NFQNL_MSG_VERDICT, q->num);
			nfq_nlmsg_verdict_put(nlh, (int)ids[i], (int)verdict);
			if (set_mark)
				nfq_nlmsg_verdict_put_mark(nlh, mark != 0 ?
				    mark | q->mark_bits : 0);
			len += NLMSG_ALIGN(nlh->nlmsg_len);
		}
		for (tries = 1; ; tries++) {
			if (mnl_socket_sendto(q->nl, msg, len) >= 0)
				break;
			if ((errno != ENOBUFS && errno != EAGAIN && errno != EINTR) ||
			    tries == QUEUE_SEND_TRIES)
				return -1;
		}
	}
	return 0;
}

void
nfq_queue_get_stats(const struct nfq_queue *q, struct nfq_queue_stats *st)
{
	*st = q->stats;
}

void
nfq_queue_close(struct nfq_queue *q)
{
	alignas(struct nlmsghdr) char msg[128];
	struct nlmsghdr *nlh;

	if (q == NULL)
		return;
	/* Closing the socket unbinds as well; saying so first is explicit
	 * and does not depend on the socket's release being immediate. The
	 * kernel drops packets still queued and those queued later. */
	nlh = nfq_nlmsg_put(msg, NFQNL_MSG_CONFIG, q->num);
	nfq_nlmsg_cfg_put_cmd(nlh, AF_INET, NFQNL_CFG_CMD_UNBIND);
	(void)mnl_socket_sendto(q->nl, nlh, nlh->nlmsg_len);
	mnl_socket_close(q->nl);
	free(q);
}
