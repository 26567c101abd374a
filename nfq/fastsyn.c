/* fastsyn.c: SYNs accepted in the kernel, and the set that lets them.
 *
 * A TLS or HTTP connection to an address a sandbox resolved through an
 * allowed name is decided twice: at its SYN (the binding) and at its first
 * flight (the name it presents). The first decision depends on nothing
 * the connection sends, only on the (sandbox, source, destination, port)
 * and on state that changes rarely (the policy, the binding), so once it
 * has been made through the queue it is put into an nftables set with
 * the binding's remaining lifetime, and the next SYN of that kind is
 * marked "under inspection" and accepted in the kernel: one trip through
 * sluiced fewer on every such connection's path. sluiced does this only
 * with --kernel-syn on (the README's "Performance" says why it is off by
 * default).
 *
 * sluiced still sees every such SYN: the ruleset copies it to an NFLOG
 * group before accepting it, and the copy starts the connection's hold as
 * the queued SYN did (the sequence number the first flight starts from,
 * the row of a connection that never sends a byte). The copy is in the
 * socket before the SYN has left the gateway, so it is always readable
 * when the first flight arrives, at least one round trip later.
 *
 * Two parts: the set's writer (nf_tables set-element messages, built by
 * hand with libmnl: add with a timeout, flush) and the NFLOG reader.
 */
#include <endian.h>
#include <errno.h>
#include <stdalign.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <arpa/inet.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <libmnl/libmnl.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_log.h>
#include <linux/netfilter/nf_tables.h>

#include "nfq/nfq.h"
#include "nfq/mmsg_int.h"

/* ---- the set ------------------------------------------------------------ */

/* How long a request waits for the kernel's answer (SO_RCVTIMEO): the
 * kernel answers inside sendto, so this only bounds one that would not. */
#define FS_ACK_TIMEOUT_S	2

/*
 * Keys deleted and not added since, remembered so as not to delete them
 * again: deleting an element that is not there is a transaction the
 * kernel aborts (ENOENT), and an abort waits out an RCU grace period
 * (nf_tables_abort: synchronize_rcu), some milliseconds. A backlog of SYN
 * copies decided otherwise than the set said deletes the same element
 * once for each; after a stall in scenario 67 that was 3,300 deletions,
 * 10 s in which sluiced answered nothing else (2026-12-03). Direct-mapped
 * by a hash of the key: one pushed out by another's deletion is deleted
 * again, which costs only the time. Remembered for FS_GONE_MS only: the
 * ruleset only looks the set up, but root may add to it (56 does), and
 * such an element goes at the first deletion after that.
 */
#define FS_GONE_SLOTS		1024
#define FS_GONE_MS		1000

struct nfq_fastsyn {
	struct mnl_socket	*nl;
	unsigned int		 portid;
	uint32_t		 seq;
	char			 table[32];
	char			 set[32];
	bool			 dirty;		/* added to since the last flush */
	struct nfq_fastsyn_stats stats;
	/* keys deleted and not added since (nfq_fastsyn_del) */
	struct {
		uint8_t		 key[NFQ_FASTSYN_KEY_LEN];
		bool		 used;
		uint64_t	 ms;		/* deleted then */
	}			 gone[FS_GONE_SLOTS];
	alignas(struct nlmsghdr) char buf[8192];
};

/*
 * The key of type iface_index . ipv4_addr . ipv4_addr . inet_service:
 * each part in its own 4-byte register, the interface index in host
 * order, the addresses and the port as they are on the wire (the port in
 * the register's first two bytes).
 */
void
nfq_fastsyn_key(uint8_t key[NFQ_FASTSYN_KEY_LEN], uint32_t ifindex,
    uint32_t saddr, uint32_t daddr, uint16_t dport)
{
	uint16_t p = htons(dport);

	memset(key, 0, NFQ_FASTSYN_KEY_LEN);
	memcpy(key, &ifindex, 4);
	memcpy(key + 4, &saddr, 4);
	memcpy(key + 8, &daddr, 4);
	memcpy(key + 12, &p, 2);
}

static size_t
gone_slot(const uint8_t *key)
{
	uint32_t h = 2166136261u;
	int i;

	for (i = 0; i < NFQ_FASTSYN_KEY_LEN; i++)
		h = (h ^ key[i]) * 16777619u;
	return h & (FS_GONE_SLOTS - 1);
}

static struct nlmsghdr *
nfnl_msg(char *at, uint16_t type, uint16_t flags, uint32_t seq, uint8_t family,
    uint16_t res_id)
{
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(at);
	struct nfgenmsg *nfg;

	nlh->nlmsg_type = type;
	nlh->nlmsg_flags = NLM_F_REQUEST | flags;
	nlh->nlmsg_seq = seq;
	nfg = mnl_nlmsg_put_extra_header(nlh, sizeof(*nfg));
	nfg->nfgen_family = family;
	nfg->version = NFNETLINK_V0;
	nfg->res_id = htons(res_id);
	return nlh;
}

/*
 * Reads until the answer to seq: 0 for an ack, -1 with errno for the
 * kernel's refusal, or EAGAIN when none came within the receive timeout.
 */
static int
wait_ack(struct mnl_socket *nl, char *buf, size_t len, uint32_t seq,
    unsigned int portid)
{
	ssize_t n;
	int rc;

	for (;;) {
		if ((n = mnl_socket_recvfrom(nl, buf, len)) < 0)
			return -1;
		rc = mnl_cb_run(buf, (size_t)n, seq, portid, NULL, NULL);
		if (rc == MNL_CB_ERROR)
			return -1;
		if (rc == MNL_CB_STOP)
			return 0;
	}
}

/*
 * One transaction: begin, a set-element message, end. key NULL: delete
 * every element (a flush). With ack, waits for the kernel's answer.
 */
static int
fs_send(struct nfq_fastsyn *fs, int type, const uint8_t *key,
    uint64_t timeout_ms, bool ack)
{
	alignas(struct nlmsghdr) char msg[512];
	struct nlmsghdr *nlh;
	struct nlattr *list, *elem, *k;
	size_t len = 0;
	uint32_t seq = ++fs->seq;

	nlh = nfnl_msg(msg, NFNL_MSG_BATCH_BEGIN, 0, seq, AF_UNSPEC,
	    NFNL_SUBSYS_NFTABLES);
	len += nlh->nlmsg_len;
	nlh = nfnl_msg(msg + len, (NFNL_SUBSYS_NFTABLES << 8) | type,
	    (type == NFT_MSG_NEWSETELEM ? NLM_F_CREATE : 0) |
	    (ack ? NLM_F_ACK : 0), seq, NFPROTO_IPV4, 0);
	mnl_attr_put_strz(nlh, NFTA_SET_ELEM_LIST_TABLE, fs->table);
	mnl_attr_put_strz(nlh, NFTA_SET_ELEM_LIST_SET, fs->set);
	if (key != NULL) {
		list = mnl_attr_nest_start(nlh, NFTA_SET_ELEM_LIST_ELEMENTS);
		elem = mnl_attr_nest_start(nlh, NFTA_LIST_ELEM);
		k = mnl_attr_nest_start(nlh, NFTA_SET_ELEM_KEY);
		mnl_attr_put(nlh, NFTA_DATA_VALUE, NFQ_FASTSYN_KEY_LEN, key);
		mnl_attr_nest_end(nlh, k);
		if (timeout_ms > 0)
			mnl_attr_put_u64(nlh, NFTA_SET_ELEM_TIMEOUT,
			    htobe64(timeout_ms));
		mnl_attr_nest_end(nlh, elem);
		mnl_attr_nest_end(nlh, list);
	}
	len += nlh->nlmsg_len;
	nlh = nfnl_msg(msg + len, NFNL_MSG_BATCH_END, 0, seq, AF_UNSPEC,
	    NFNL_SUBSYS_NFTABLES);
	len += nlh->nlmsg_len;

	if (mnl_socket_sendto(fs->nl, msg, len) < 0)
		return -1;
	return ack ? wait_ack(fs->nl, fs->buf, sizeof(fs->buf), seq,
	    fs->portid) : 0;
}

/* Errors of unacknowledged adds come back later: read and count them. */
static void
fs_drain(struct nfq_fastsyn *fs)
{
	ssize_t n;

	while ((n = recv(mnl_socket_get_fd(fs->nl), fs->buf, sizeof(fs->buf),
	    MSG_DONTWAIT)) > 0) {
		const struct nlmsghdr *nlh = (const struct nlmsghdr *)fs->buf;
		size_t left = (size_t)n;

		for (; mnl_nlmsg_ok(nlh, (int)left);
		    nlh = mnl_nlmsg_next(nlh, (int *)&left)) {
			const struct nlmsgerr *e;

			if (nlh->nlmsg_type != NLMSG_ERROR)
				continue;
			e = mnl_nlmsg_get_payload(nlh);
			if (e->error != 0)
				fs->stats.add_errors++;
		}
	}
	if (n < 0 && errno == ENOBUFS)
		fs->stats.add_errors++;
}

struct nfq_fastsyn *
nfq_fastsyn_open(const char *table, const char *set, char *err, size_t errlen)
{
	struct nfq_fastsyn *fs;

	if ((fs = calloc(1, sizeof(*fs))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	snprintf(fs->table, sizeof(fs->table), "%s", table);
	snprintf(fs->set, sizeof(fs->set), "%s", set);
	fs->seq = (uint32_t)time(NULL);
	if ((fs->nl = mnl_socket_open(NETLINK_NETFILTER)) == NULL ||
	    mnl_socket_bind(fs->nl, 0, MNL_SOCKET_AUTOPID) < 0) {
		snprintf(err, errlen, "netlink: %s", strerror(errno));
		goto fail;
	}
	fs->portid = mnl_socket_get_portid(fs->nl);
	{
		struct timeval tv = { FS_ACK_TIMEOUT_S, 0 };

		(void)setsockopt(mnl_socket_get_fd(fs->nl), SOL_SOCKET,
		    SO_RCVTIMEO, &tv, sizeof(tv));
	}
	/* the set must be there and writable: a flush says both */
	if (fs_send(fs, NFT_MSG_DELSETELEM, NULL, 0, true) == -1) {
		snprintf(err, errlen, "set %s %s: %s", table, set,
		    strerror(errno));
		goto fail;
	}
	return fs;
fail:
	if (fs->nl != NULL)
		mnl_socket_close(fs->nl);
	free(fs);
	return NULL;
}

int
nfq_fastsyn_add(struct nfq_fastsyn *fs, uint32_t ifindex, uint32_t saddr,
    uint32_t daddr, uint16_t dport, uint64_t timeout_ms)
{
	uint8_t key[NFQ_FASTSYN_KEY_LEN];
	size_t slot;

	if (timeout_ms == 0)
		return 0;
	fs_drain(fs);
	nfq_fastsyn_key(key, ifindex, saddr, daddr, dport);
	slot = gone_slot(key);
	if (fs->gone[slot].used && memcmp(fs->gone[slot].key, key,
	    sizeof(key)) == 0)
		fs->gone[slot].used = false;	/* there, or may be */
	fs->dirty = true;
	if (fs_send(fs, NFT_MSG_NEWSETELEM, key, timeout_ms, false) == -1) {
		fs->stats.add_errors++;
		return -1;
	}
	fs->stats.adds++;
	return 0;
}

int
nfq_fastsyn_del(struct nfq_fastsyn *fs, uint32_t ifindex, uint32_t saddr,
    uint32_t daddr, uint16_t dport, uint64_t now)
{
	uint8_t key[NFQ_FASTSYN_KEY_LEN];
	size_t slot;

	nfq_fastsyn_key(key, ifindex, saddr, daddr, dport);
	slot = gone_slot(key);
	/* deleted a moment ago and not added since: not there */
	if (fs->gone[slot].used && now - fs->gone[slot].ms < FS_GONE_MS &&
	    memcmp(fs->gone[slot].key, key, sizeof(key)) == 0) {
		fs->stats.dels_spared++;
		return 0;
	}
	fs_drain(fs);
	/* acknowledged: the caller relies on its being gone (ENOENT, an
	 * element already expired, is success too) */
	fs->stats.dels++;
	if (fs_send(fs, NFT_MSG_DELSETELEM, key, 0, true) == -1 &&
	    errno != ENOENT)
		return -1;
	memcpy(fs->gone[slot].key, key, sizeof(key));
	fs->gone[slot].used = true;
	fs->gone[slot].ms = now;
	return 0;
}

int
nfq_fastsyn_flush(struct nfq_fastsyn *fs)
{
	/* nothing added since the last flush: nothing of ours to remove
	 * (a sandbox deleted every few milliseconds costs no transaction) */
	if (!fs->dirty)
		return 0;
	fs_drain(fs);
	if (fs_send(fs, NFT_MSG_DELSETELEM, NULL, 0, true) == -1)
		return -1;
	fs->dirty = false;
	return 0;
}

void
nfq_fastsyn_stats(const struct nfq_fastsyn *fs, struct nfq_fastsyn_stats *st)
{
	*st = fs->stats;
}

void
nfq_fastsyn_close(struct nfq_fastsyn *fs)
{
	if (fs == NULL)
		return;
	mnl_socket_close(fs->nl);
	free(fs);
}

/* ---- the NFLOG copies --------------------------------------------------- */

/* Copies per nfq_nflog_recv call, like the queue's batch. */
#define NFLOG_RECV_BATCH	64

/* Datagrams one recvmmsg takes; fewer means the socket was empty, and the
 * batch ends without another read to find so (as the queue's). A copy is
 * one message (qthreshold 1) of some 300 bytes (128 bytes of packet), or
 * of a whole first flight let through in the kernel (--kernel-sni: the
 * ruleset copies only packets that fit): a datagram larger than
 * NFLOG_DGRAM_SIZE is damaged and skipped. */
#define NFLOG_RECV_VLEN		8
#define NFLOG_DGRAM_SIZE	NFQ_NFLOG_DGRAM_MAX
#define NFLOG_RCVBUF		(16 * 1024 * 1024)

struct nfq_nflog {
	struct mnl_socket	*nl;
	unsigned int		 portid;
	uint16_t		 group;
	uint32_t		 seq;
	nfq_packet_cb		 cb;
	void			*cb_arg;
	int			 handled;
	bool			 dry;	/* the last read found the socket
					 * empty */
	uint64_t		 drops_read;	/* the drop counter, last read */
	uint64_t		 overruns_counted;	/* stats.overruns then:
							 * fewer, an ENOBUFS
							 * since */
	struct nfq_nflog_stats	 stats;
	struct mmsghdr		 msgs[NFLOG_RECV_VLEN];
	struct iovec		 iov[NFLOG_RECV_VLEN];
	alignas(struct nlmsghdr) char buf[NFLOG_RECV_VLEN][NFLOG_DGRAM_SIZE];
};

/*
 * The socket's drop counter (sk_drops: the Drops column of
 * /proc/net/netlink in the calling thread's namespace, the line found by
 * the socket's inode), or -1 when it cannot be read. ENOBUFS says only
 * that copies were dropped, once per congestion; this says how many.
 */
static int64_t
nflog_kernel_drops(const struct nfq_nflog *l)
{
	char line[256];
	unsigned long long drops, ino;
	struct stat st;
	int64_t n = -1;
	FILE *f;

	if (fstat(mnl_socket_get_fd(l->nl), &st) == -1 ||
	    (f = fopen("/proc/thread-self/net/netlink", "re")) == NULL)
		return -1;
	/* sk Eth Pid Groups Rmem Wmem Dump Locks Drops Inode */
	while (fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "%*s %*d %*u %*x %*d %*d %*d %*d %llu %llu",
		    &drops, &ino) == 2 && ino == (unsigned long long)st.st_ino) {
			n = (int64_t)drops;
			break;
		}
	fclose(f);
	return n;
}

/* Adds the copies dropped since the last count to stats.dropped: by the
 * kernel's counter, or one for each ENOBUFS when it cannot be read. */
static void
count_drops(struct nfq_nflog *l)
{
	int64_t n = nflog_kernel_drops(l);

	if (n >= 0) {
		/* the kernel's counter is 32 bits: the difference wraps */
		l->stats.dropped += (uint32_t)((uint64_t)n - l->drops_read);
		l->drops_read = (uint64_t)n;
	} else
		l->stats.dropped += l->stats.overruns - l->overruns_counted;
	l->overruns_counted = l->stats.overruns;
}

static int
nflog_config(struct nfq_nflog *l, uint16_t group, const void *attr,
    uint16_t type, size_t len)
{
	alignas(struct nlmsghdr) char msg[256];
	struct nlmsghdr *nlh;
	uint32_t seq = ++l->seq;

	nlh = nfnl_msg(msg, (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_CONFIG,
	    NLM_F_ACK, seq, AF_UNSPEC, group);
	mnl_attr_put(nlh, type, len, attr);
	if (mnl_socket_sendto(l->nl, nlh, nlh->nlmsg_len) < 0)
		return -1;
	/* nothing is logged to the group before its bind succeeds: the
	 * answer is the next message */
	return wait_ack(l->nl, l->buf[0], sizeof(l->buf[0]), seq, l->portid);
}

struct nfq_nflog *
nfq_nflog_open(uint16_t group, uint32_t range, char *err, size_t errlen)
{
	struct nfq_nflog *l;
	struct nfulnl_msg_config_cmd cmd;
	struct nfulnl_msg_config_mode mode;
	uint32_t thresh = htonl(1);
	uint16_t flags = htons(NFULNL_CFG_F_SEQ_GLOBAL);
	int rcvbuf = NFLOG_RCVBUF;
	struct timeval tv = { 2, 0 };

	if ((l = calloc(1, sizeof(*l))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	l->group = group;
	if ((l->nl = mnl_socket_open(NETLINK_NETFILTER)) == NULL ||
	    mnl_socket_bind(l->nl, 0, MNL_SOCKET_AUTOPID) < 0) {
		snprintf(err, errlen, "nflog %u: netlink: %s", group,
		    strerror(errno));
		goto fail;
	}
	l->portid = mnl_socket_get_portid(l->nl);
	(void)setsockopt(mnl_socket_get_fd(l->nl), SOL_SOCKET, SO_RCVBUFFORCE,
	    &rcvbuf, sizeof(rcvbuf));
	(void)setsockopt(mnl_socket_get_fd(l->nl), SOL_SOCKET, SO_RCVTIMEO,
	    &tv, sizeof(tv));
	cmd.command = NFULNL_CFG_CMD_BIND;
	if (nflog_config(l, group, &cmd, NFULA_CFG_CMD, sizeof(cmd)) == -1) {
		snprintf(err, errlen, "nflog %u: bind: %s", group,
		    strerror(errno));
		goto fail;
	}
	/* the headers are enough for a SYN the set lets through (no
	 * payload) and for a server's packet (read for its ACK); a first
	 * flight the kernel let through (--kernel-sni) is read whole */
	memset(&mode, 0, sizeof(mode));
	mode.copy_mode = NFULNL_COPY_PACKET;
	mode.copy_range = htonl(range);
	/* each copy numbered in the order the kernel logged it, across
	 * groups: a server's packet logged before a SYN is no answer to it
	 * (inspect.c) */
	if (nflog_config(l, group, &mode, NFULA_CFG_MODE, sizeof(mode)) == -1 ||
	    nflog_config(l, group, &thresh, NFULA_CFG_QTHRESH,
	    sizeof(thresh)) == -1 ||
	    nflog_config(l, group, &flags, NFULA_CFG_FLAGS,
	    sizeof(flags)) == -1) {
		snprintf(err, errlen, "nflog %u: config: %s", group,
		    strerror(errno));
		goto fail;
	}
	return l;
fail:
	if (l->nl != NULL)
		mnl_socket_close(l->nl);
	free(l);
	return NULL;
}

int
nfq_nflog_fd(const struct nfq_nflog *l)
{
	return mnl_socket_get_fd(l->nl);
}

static int
nflog_attr_cb(const struct nlattr *attr, void *data)
{
	const struct nlattr **tb = data;
	int type = mnl_attr_get_type(attr);

	if (mnl_attr_type_valid(attr, NFULA_MAX) < 0)
		return MNL_CB_OK;
	tb[type] = attr;
	return MNL_CB_OK;
}

static int
nflog_packet_cb(const struct nlmsghdr *nlh, void *data)
{
	struct nfq_nflog *l = data;
	const struct nlattr *tb[NFULA_MAX + 1] = { NULL };
	struct nfq_packet pkt;

	if (nlh->nlmsg_type != ((NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_PACKET))
		return MNL_CB_OK;
	if (mnl_attr_parse(nlh, sizeof(struct nfgenmsg), nflog_attr_cb,
	    tb) < 0 || tb[NFULA_PAYLOAD] == NULL ||
	    (tb[NFULA_IFINDEX_INDEV] != NULL &&
	    mnl_attr_get_payload_len(tb[NFULA_IFINDEX_INDEV]) < 4) ||
	    (tb[NFULA_IFINDEX_OUTDEV] != NULL &&
	    mnl_attr_get_payload_len(tb[NFULA_IFINDEX_OUTDEV]) < 4) ||
	    (tb[NFULA_MARK] != NULL &&
	    mnl_attr_get_payload_len(tb[NFULA_MARK]) < 4) ||
	    (tb[NFULA_SEQ_GLOBAL] != NULL &&
	    mnl_attr_get_payload_len(tb[NFULA_SEQ_GLOBAL]) < 4)) {
		l->stats.bad_messages++;
		return MNL_CB_OK;
	}
	memset(&pkt, 0, sizeof(pkt));
	pkt.copy = true;
	if (tb[NFULA_IFINDEX_INDEV] != NULL)
		pkt.indev = ntohl(mnl_attr_get_u32(tb[NFULA_IFINDEX_INDEV]));
	if (tb[NFULA_IFINDEX_OUTDEV] != NULL)
		pkt.outdev = ntohl(mnl_attr_get_u32(tb[NFULA_IFINDEX_OUTDEV]));
	if (tb[NFULA_MARK] != NULL)
		pkt.mark = ntohl(mnl_attr_get_u32(tb[NFULA_MARK]));
	if (tb[NFULA_SEQ_GLOBAL] != NULL) {
		pkt.gseq = ntohl(mnl_attr_get_u32(tb[NFULA_SEQ_GLOBAL]));
		pkt.has_gseq = true;
	}
	pkt.payload = mnl_attr_get_payload(tb[NFULA_PAYLOAD]);
	pkt.len = mnl_attr_get_payload_len(tb[NFULA_PAYLOAD]);
	l->stats.packets++;
	l->handled++;
	(void)l->cb(l->cb_arg, &pkt);
	return MNL_CB_OK;
}

int
nfq_nflog_recv(struct nfq_nflog *l, nfq_packet_cb cb, void *arg)
{
	int i, n, got = 0;

	/* not from a callback of this reader: the batch being handled is
	 * in the buffers the next read would fill (a bug of the caller's;
	 * refused, so that the copies wait instead of being overwritten) */
	if (l->cb != NULL) {
		l->dry = false;
		errno = EDEADLK;
		return -1;
	}
	l->cb = cb;
	l->cb_arg = arg;
	l->handled = 0;
	l->dry = false;
	while (got < NFLOG_RECV_BATCH) {
		nfq_mmsg_prepare(l->msgs, l->iov, l->buf[0],
		    sizeof(l->buf[0]), NFLOG_RECV_VLEN, NULL, 0);
		n = recvmmsg(mnl_socket_get_fd(l->nl), l->msgs,
		    NFLOG_RECV_VLEN, MSG_DONTWAIT, NULL);
		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				l->dry = true;
				break;
			}
			if (errno == EINTR)
				continue;
			/* copies the kernel could not queue to us: those
			 * connections' first flights find no state and are
			 * refused (fail closed) */
			if (errno == ENOBUFS) {
				l->stats.overruns++;
				got++;
				continue;
			}
			l->cb = NULL;
			return -1;
		}
		for (i = 0; i < n; i++) {
			if ((l->msgs[i].msg_hdr.msg_flags & MSG_TRUNC) ||
			    mnl_cb_run(l->buf[i], l->msgs[i].msg_len, 0,
			    l->portid, nflog_packet_cb, l) == MNL_CB_ERROR)
				l->stats.bad_messages++;
		}
		got += n;
		if (n < NFLOG_RECV_VLEN) {
			l->dry = true;	/* the socket was empty */
			break;
		}
	}
	l->cb = NULL;
	/* once read dry the socket is no longer congested: a drop after
	 * this raises ENOBUFS again, so the counter read now has them all */
	if (l->dry && l->stats.overruns != l->overruns_counted)
		count_drops(l);
	return l->handled;
}

bool
nfq_nflog_drained(const struct nfq_nflog *l)
{
	return l->dry;
}

void
nfq_nflog_stats(const struct nfq_nflog *l, struct nfq_nflog_stats *st)
{
	*st = l->stats;
}

void
nfq_nflog_close(struct nfq_nflog *l)
{
	if (l == NULL)
		return;
	mnl_socket_close(l->nl);
	free(l);
}
