/* ct.c: conntrack over ctnetlink (libmnl): a connection's end and its counters
 * (destroy events), one connection's counters on request, and a source's
 * connections deleted. */
#include <endian.h>
#include <errno.h>
#include <limits.h>
#include <stdalign.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <libmnl/libmnl.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_conntrack.h>
#include <linux/netfilter/nf_conntrack_tcp.h>

#include "nfq/nfq.h"
#include "nfq/ct_int.h"
#include "nfq/mmsg_int.h"

/* Datagrams per nfq_ct_recv, so that a flood of ends (a table flush, a
 * port scan timing out) cannot starve the caller's event loop. */
#define CT_RECV_BATCH	64

/* Datagrams one recvmmsg takes; fewer means the socket was empty, and the
 * batch ends without another read to find so. */
#define CT_RECV_VLEN	8

/* One event is a few hundred bytes and the kernel sends each in its own
 * datagram; this leaves ample room, so MSG_TRUNC means a damaged sender. */
#define CT_BUF_SIZE	16384

/* Kernel backlog of events the socket may hold while the caller is busy.
 * The kernel doubles the value and charges about 1.3 KiB per queued event
 * (measured, skb overhead included): some 13000 ends, seconds of a busy
 * gateway's connection rate. */
#define CT_RCVBUF	(8 * 1024 * 1024)

#define CT_DESTROY_TYPE	((NFNL_SUBSYS_CTNETLINK << 8) | IPCTNL_MSG_CT_DELETE)
#define CT_NEW_TYPE	((NFNL_SUBSYS_CTNETLINK << 8) | IPCTNL_MSG_CT_NEW)
#define CT_GET_TYPE	((NFNL_SUBSYS_CTNETLINK << 8) | IPCTNL_MSG_CT_GET)

/* How long nfq_ct_get waits for the kernel's answer. */
#define CT_GET_TIMEOUT_MS	1000

struct nfq_ct {
	struct mnl_socket	*nl;
	struct mnl_socket	*q;		/* nfq_ct_get's: blocking, in no
						 * group, answers only */
	uint32_t		 q_seq;

	/* Set for the duration of one nfq_ct_recv. */
	nfq_ct_cb		 cb;
	void			*cb_arg;
	int			 events;

	uint64_t		 lost;		/* ENOBUFS seen */
	uint64_t		 damaged;	/* messages skipped unread */
	bool			 drained;	/* the last read found none left */

	struct mmsghdr		 msgs[CT_RECV_VLEN];
	struct iovec		 iov[CT_RECV_VLEN];
	struct sockaddr_nl	 from[CT_RECV_VLEN];
	alignas(struct nlmsghdr) char buf[CT_RECV_VLEN][CT_BUF_SIZE];
};

/*
 * Attribute types read at each nesting level, for mnl_attr_validate: an
 * integer must have exactly its size, a nest room for attributes. Types
 * left MNL_TYPE_UNSPEC are not read and not checked (newer kernels add
 * attributes; CTA_COUNTERS_PAD precedes a u64 to align it).
 */
static const enum mnl_attr_data_type ct_types[CTA_MAX + 1] = {
	[CTA_TUPLE_ORIG]	= MNL_TYPE_NESTED,
	[CTA_PROTOINFO]		= MNL_TYPE_NESTED,
	[CTA_MARK]		= MNL_TYPE_U32,
	[CTA_COUNTERS_ORIG]	= MNL_TYPE_NESTED,
	[CTA_COUNTERS_REPLY]	= MNL_TYPE_NESTED,
	[CTA_TIMESTAMP]		= MNL_TYPE_NESTED,
};

static const enum mnl_attr_data_type ct_tuple_types[CTA_TUPLE_MAX + 1] = {
	[CTA_TUPLE_IP]		= MNL_TYPE_NESTED,
	[CTA_TUPLE_PROTO]	= MNL_TYPE_NESTED,
};

static const enum mnl_attr_data_type ct_ip_types[CTA_IP_MAX + 1] = {
	[CTA_IP_V4_SRC]		= MNL_TYPE_U32,
	[CTA_IP_V4_DST]		= MNL_TYPE_U32,
};

static const enum mnl_attr_data_type ct_proto_types[CTA_PROTO_MAX + 1] = {
	[CTA_PROTO_NUM]		= MNL_TYPE_U8,
	[CTA_PROTO_SRC_PORT]	= MNL_TYPE_U16,
	[CTA_PROTO_DST_PORT]	= MNL_TYPE_U16,
};

static const enum mnl_attr_data_type ct_counters_types[CTA_COUNTERS_MAX + 1] = {
	[CTA_COUNTERS_PACKETS]	= MNL_TYPE_U64,
	[CTA_COUNTERS_BYTES]	= MNL_TYPE_U64,
};

static const enum mnl_attr_data_type ct_tstamp_types[CTA_TIMESTAMP_MAX + 1] = {
	[CTA_TIMESTAMP_START]	= MNL_TYPE_U64,
	[CTA_TIMESTAMP_STOP]	= MNL_TYPE_U64,
};

static const enum mnl_attr_data_type ct_protoinfo_types[CTA_PROTOINFO_MAX + 1] = {
	[CTA_PROTOINFO_TCP]	= MNL_TYPE_NESTED,
};

static const enum mnl_attr_data_type ct_tcp_types[CTA_PROTOINFO_TCP_MAX + 1] = {
	[CTA_PROTOINFO_TCP_STATE] = MNL_TYPE_U8,
};

/* One nesting level being walked by ct_attr_cb. */
struct ct_level {
	const struct nlattr		**tb;		/* [max + 1] */
	const enum mnl_attr_data_type	 *types;	/* [max + 1] */
	uint16_t			  max;
	const char			 *start;
	size_t				  walked;	/* bytes up to the end of
							 * the last attribute */
};

static int
ct_attr_cb(const struct nlattr *attr, void *data)
{
	struct ct_level *l = data;
	uint16_t type = mnl_attr_get_type(attr);

	l->walked = (size_t)((const char *)attr - l->start) +
	    MNL_ALIGN(attr->nla_len);
	if (type > l->max || l->types[type] == MNL_TYPE_UNSPEC)
		return MNL_CB_OK;
	/* The kernel never repeats one: two would leave us to guess. */
	if (l->tb[type] != NULL || mnl_attr_validate(attr, l->types[type]) == -1)
		return MNL_CB_ERROR;
	l->tb[type] = attr;
	return MNL_CB_OK;
}

/*
 * Fills tb[0 .. max] from the attributes in payload[0 .. len). false when
 * one we read is malformed or repeated, or when bytes are left over that
 * form no attribute: mnl_attr_parse stops silently at the first bad
 * header, which would let a damaged tail pass for a shorter message.
 */
static bool
ct_attrs(const void *payload, size_t len, const enum mnl_attr_data_type *types,
    uint16_t max, const struct nlattr **tb)
{
	struct ct_level l = {
		.tb = tb, .types = types, .max = max, .start = payload,
	};

	memset(tb, 0, ((size_t)max + 1) * sizeof(*tb));
	if (mnl_attr_parse_payload(payload, len, ct_attr_cb, &l) != MNL_CB_OK)
		return false;
	return l.walked >= len;
}

/* ct_attrs over a nest; false for a NULL nest as for a damaged one. */
static bool
ct_nest(const struct nlattr *nest, const enum mnl_attr_data_type *types,
    uint16_t max, const struct nlattr **tb)
{
	if (nest == NULL)
		return false;
	return ct_attrs(mnl_attr_get_payload(nest),
	    mnl_attr_get_payload_len(nest), types, max, tb);
}

/* CTA_COUNTERS_ORIG/REPLY: both counters, or false. */
static bool
ct_counters(const struct nlattr *nest, uint64_t *packets, uint64_t *bytes)
{
	const struct nlattr *tb[CTA_COUNTERS_MAX + 1];

	if (!ct_nest(nest, ct_counters_types, CTA_COUNTERS_MAX, tb) ||
	    tb[CTA_COUNTERS_PACKETS] == NULL || tb[CTA_COUNTERS_BYTES] == NULL)
		return false;
	/* nla_put_be64: 64-bit counters in network order. */
	*packets = be64toh(mnl_attr_get_u64(tb[CTA_COUNTERS_PACKETS]));
	*bytes = be64toh(mnl_attr_get_u64(tb[CTA_COUNTERS_BYTES]));
	return true;
}

/* CTA_TIMESTAMP: the stop, once the entry is dying (0 when absent; the
 * start is checked, not kept); false for a damaged nest. */
static bool
ct_tstamp(const struct nlattr *nest, uint64_t *stop)
{
	const struct nlattr *tb[CTA_TIMESTAMP_MAX + 1];

	if (!ct_nest(nest, ct_tstamp_types, CTA_TIMESTAMP_MAX, tb))
		return false;
	/* nla_put_be64, as the counters */
	if (tb[CTA_TIMESTAMP_STOP] != NULL)
		*stop = be64toh(mnl_attr_get_u64(tb[CTA_TIMESTAMP_STOP]));
	return true;
}

/* CTA_PROTOINFO: the TCP state if there is one (0 otherwise, and for a
 * value beyond the states the kernel defines). */
static bool
ct_tcp_state(const struct nlattr *nest, uint8_t *state)
{
	const struct nlattr *pi[CTA_PROTOINFO_MAX + 1];
	const struct nlattr *tcp[CTA_PROTOINFO_TCP_MAX + 1];
	uint8_t s;

	*state = 0;
	if (!ct_nest(nest, ct_protoinfo_types, CTA_PROTOINFO_MAX, pi))
		return false;
	if (pi[CTA_PROTOINFO_TCP] == NULL)
		return true;
	if (!ct_nest(pi[CTA_PROTOINFO_TCP], ct_tcp_types, CTA_PROTOINFO_TCP_MAX,
	    tcp))
		return false;
	if (tcp[CTA_PROTOINFO_TCP_STATE] != NULL) {
		s = mnl_attr_get_u8(tcp[CTA_PROTOINFO_TCP_STATE]);
		if (s <= TCP_CONNTRACK_SYN_SENT2)
			*state = s;
	}
	return true;
}

/* A message of type type (a destroy event, or a get's answer) into *e. */
static enum nfq_ct_parse_result
ct_parse(const void *buf, size_t len, uint16_t type, struct nfq_ct_end *e)
{
	const struct nlmsghdr *nlh = buf;
	const struct nfgenmsg *nfg;
	const struct nlattr *cta[CTA_MAX + 1];
	const struct nlattr *tuple[CTA_TUPLE_MAX + 1];
	const struct nlattr *ip[CTA_IP_MAX + 1];
	const struct nlattr *proto[CTA_PROTO_MAX + 1];
	struct nfq_ct_end out;
	size_t attrlen;

	if (!mnl_nlmsg_ok(nlh, len > INT_MAX ? INT_MAX : (int)len))
		return NFQ_CT_DAMAGED;
	if (nlh->nlmsg_type != type)
		return NFQ_CT_OTHER;
	if (mnl_nlmsg_get_payload_len(nlh) < MNL_ALIGN(sizeof(*nfg)))
		return NFQ_CT_DAMAGED;
	nfg = mnl_nlmsg_get_payload(nlh);
	if (nfg->nfgen_family != AF_INET)
		return NFQ_CT_OTHER;
	attrlen = mnl_nlmsg_get_payload_len(nlh) - MNL_ALIGN(sizeof(*nfg));
	if (!ct_attrs(mnl_nlmsg_get_payload_offset(nlh, sizeof(*nfg)), attrlen,
	    ct_types, CTA_MAX, cta))
		return NFQ_CT_DAMAGED;

	memset(&out, 0, sizeof(out));
	if (!ct_nest(cta[CTA_TUPLE_ORIG], ct_tuple_types, CTA_TUPLE_MAX, tuple) ||
	    !ct_nest(tuple[CTA_TUPLE_IP], ct_ip_types, CTA_IP_MAX, ip) ||
	    !ct_nest(tuple[CTA_TUPLE_PROTO], ct_proto_types, CTA_PROTO_MAX, proto))
		return NFQ_CT_DAMAGED;
	if (ip[CTA_IP_V4_SRC] == NULL || ip[CTA_IP_V4_DST] == NULL ||
	    proto[CTA_PROTO_NUM] == NULL)
		return NFQ_CT_DAMAGED;
	out.saddr = mnl_attr_get_u32(ip[CTA_IP_V4_SRC]);
	out.daddr = mnl_attr_get_u32(ip[CTA_IP_V4_DST]);
	out.proto = mnl_attr_get_u8(proto[CTA_PROTO_NUM]);

	/* Ports come in pairs, and TCP and UDP always have them. ICMP has
	 * CTA_PROTO_ICMP_ID/TYPE/CODE instead, left unread: ports stay 0. */
	if ((proto[CTA_PROTO_SRC_PORT] == NULL) !=
	    (proto[CTA_PROTO_DST_PORT] == NULL))
		return NFQ_CT_DAMAGED;
	if (proto[CTA_PROTO_SRC_PORT] != NULL) {
		out.sport = ntohs(mnl_attr_get_u16(proto[CTA_PROTO_SRC_PORT]));
		out.dport = ntohs(mnl_attr_get_u16(proto[CTA_PROTO_DST_PORT]));
	} else if (out.proto == IPPROTO_TCP || out.proto == IPPROTO_UDP)
		return NFQ_CT_DAMAGED;

	/* Without nf_conntrack_acct there are no counters: they stay 0. */
	if (cta[CTA_COUNTERS_ORIG] != NULL && !ct_counters(cta[CTA_COUNTERS_ORIG],
	    &out.packets_orig, &out.bytes_orig))
		return NFQ_CT_DAMAGED;
	if (cta[CTA_COUNTERS_REPLY] != NULL &&
	    !ct_counters(cta[CTA_COUNTERS_REPLY], &out.packets_reply,
	    &out.bytes_reply))
		return NFQ_CT_DAMAGED;
	if (cta[CTA_TIMESTAMP] != NULL && !ct_tstamp(cta[CTA_TIMESTAMP],
	    &out.stop_ns))
		return NFQ_CT_DAMAGED;
	/* Recent kernels leave a mark of 0 out of destroy events. */
	if (cta[CTA_MARK] != NULL)
		out.mark = ntohl(mnl_attr_get_u32(cta[CTA_MARK]));
	if (cta[CTA_PROTOINFO] != NULL) {
		uint8_t state;

		if (!ct_tcp_state(cta[CTA_PROTOINFO], &state))
			return NFQ_CT_DAMAGED;
		if (out.proto == IPPROTO_TCP)
			out.tcp_state = state;
	}
	*e = out;
	return NFQ_CT_EVENT;
}

enum nfq_ct_parse_result
nfq_ct_parse(const void *buf, size_t len, struct nfq_ct_end *e)
{
	return ct_parse(buf, len, CT_DESTROY_TYPE, e);
}

/* Every message mnl_cb_run frames. MNL_CB_OK whatever it holds: one bad
 * message must not cost the rest of the datagram. */
static int
ct_msg_cb(const struct nlmsghdr *nlh, void *data)
{
	struct nfq_ct *ct = data;
	struct nfq_ct_end e;

	switch (nfq_ct_parse(nlh, nlh->nlmsg_len, &e)) {
	case NFQ_CT_EVENT:
		ct->events++;
		ct->cb(ct->cb_arg, &e);
		break;
	case NFQ_CT_OTHER:
		break;
	case NFQ_CT_DAMAGED:
		ct->damaged++;
		break;
	}
	return MNL_CB_OK;
}

static void
ct_err(char *err, size_t errlen, const char *what, int e)
{
	if (err == NULL || errlen == 0)
		return;
	snprintf(err, errlen, "conntrack events: %s: %s", what, strerror(e));
}

struct nfq_ct *
nfq_ct_open(char *err, size_t errlen)
{
	struct nfq_ct *ct;
	unsigned int group = NFNLGRP_CONNTRACK_DESTROY;
	int rcvbuf = CT_RCVBUF;
	int e;

	if ((ct = calloc(1, sizeof(*ct))) == NULL) {
		ct_err(err, errlen, "calloc", errno);
		return NULL;
	}

	/* Non-blocking: nfq_ct_recv drains what is pending and returns to
	 * the caller's poll loop. Close-on-exec: a program the daemon runs
	 * has no business reading the gateway's connections. */
	ct->nl = mnl_socket_open2(NETLINK_NETFILTER, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (ct->nl == NULL) {
		ct_err(err, errlen, "netlink socket", errno);
		goto fail;
	}

	/*
	 * Bursts of ends (a flush, many connections timing out at once)
	 * wait here instead of being dropped. SO_RCVBUFFORCE ignores
	 * net.core.rmem_max but needs CAP_NET_ADMIN (which joining the
	 * group needs anyway); without it SO_RCVBUF gets what rmem_max
	 * allows. Neither failing is fatal: a small buffer only loses
	 * events earlier, and that loss is counted.
	 *
	 * NETLINK_NO_ENOBUFS is deliberately not set: the ENOBUFS that recv
	 * returns after an overrun is our only sign that events, hence the
	 * accounting of some connections, were lost (nfq_ct_lost).
	 * NETLINK_BROADCAST_ERROR is not set either: with it the kernel
	 * keeps dying entries and redelivers their events, so a stalled
	 * reader would hold conntrack memory; losing counters is the
	 * cheaper failure for a log.
	 */
	if (setsockopt(mnl_socket_get_fd(ct->nl), SOL_SOCKET, SO_RCVBUFFORCE,
	    &rcvbuf, sizeof(rcvbuf)) == -1)
		(void)setsockopt(mnl_socket_get_fd(ct->nl), SOL_SOCKET,
		    SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));

	/* groups = 0: bind's bitmask is the old interface; the group is
	 * joined by number just below. */
	if (mnl_socket_bind(ct->nl, 0, MNL_SOCKET_AUTOPID) == -1) {
		ct_err(err, errlen, "netlink bind", errno);
		goto fail;
	}

	/*
	 * Destroy events only: one per connection, with the final counters
	 * and state. Joining needs CAP_NET_ADMIN. With the default
	 * nf_conntrack_events=2 the kernel attaches event state only to
	 * connections created while some listener exists, so connections
	 * older than this call end silently.
	 */
	if (mnl_socket_setsockopt(ct->nl, NETLINK_ADD_MEMBERSHIP, &group,
	    sizeof(group)) == -1) {
		e = errno;
		ct_err(err, errlen, e == EPERM ? "joining the destroy group "
		    "(no CAP_NET_ADMIN?)" : "joining the destroy group", e);
		goto fail;
	}

	/* The query socket: blocking, with a bound on the wait */
	ct->q = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC);
	if (ct->q == NULL) {
		ct_err(err, errlen, "netlink socket", errno);
		goto fail;
	}
	{
		struct timeval tv = { .tv_sec = CT_GET_TIMEOUT_MS / 1000,
		    .tv_usec = CT_GET_TIMEOUT_MS % 1000 * 1000 };

		if (setsockopt(mnl_socket_get_fd(ct->q), SOL_SOCKET,
		    SO_RCVTIMEO, &tv, sizeof(tv)) == -1 ||
		    mnl_socket_bind(ct->q, 0, MNL_SOCKET_AUTOPID) == -1) {
			ct_err(err, errlen, "netlink query socket", errno);
			goto fail;
		}
	}
	return ct;

fail:
	if (ct->nl != NULL)
		mnl_socket_close(ct->nl);
	if (ct->q != NULL)
		mnl_socket_close(ct->q);
	free(ct);
	return NULL;
}

int
nfq_ct_fd(const struct nfq_ct *ct)
{
	return mnl_socket_get_fd(ct->nl);
}

/* Bytes at the end of a datagram that frame no netlink message: mnl_cb_run
 * stops at them without a word. */
static bool
ct_framed(const void *buf, size_t n)
{
	const struct nlmsghdr *nlh = buf;
	int len = (int)n;

	while (mnl_nlmsg_ok(nlh, len))
		nlh = mnl_nlmsg_next(nlh, &len);
	return len <= 0;
}

/*
 * Up to CT_RECV_VLEN datagrams into ct->buf: how many, or -1 with errno.
 * A datagram not from the kernel, or truncated, is marked to be skipped
 * (its length 0).
 */
static int
ct_read(struct nfq_ct *ct)
{
	struct msghdr *m;
	int i, n;

	nfq_mmsg_prepare(ct->msgs, ct->iov, ct->buf[0], sizeof(ct->buf[0]),
	    CT_RECV_VLEN, ct->from, sizeof(ct->from[0]));
	if ((n = recvmmsg(mnl_socket_get_fd(ct->nl), ct->msgs, CT_RECV_VLEN,
	    MSG_DONTWAIT, NULL)) == -1)
		return -1;
	for (i = 0; i < n; i++) {
		m = &ct->msgs[i].msg_hdr;
		/* Events come from the kernel (port id 0). Another process
		 * with CAP_NET_ADMIN could send to our port id: it must not
		 * be able to forge a connection's accounting. */
		if (m->msg_namelen != sizeof(ct->from[i]) ||
		    ct->from[i].nl_family != AF_NETLINK ||
		    ct->from[i].nl_pid != 0 || (m->msg_flags & MSG_TRUNC)) {
			ct->damaged++;
			ct->msgs[i].msg_len = 0;
		}
	}
	return n;
}

int
nfq_ct_recv(struct nfq_ct *ct, nfq_ct_cb cb, void *arg)
{
	size_t len;
	int i, n, got = 0;

	ct->cb = cb;
	ct->cb_arg = arg;
	ct->events = 0;
	ct->drained = false;
	while (got < CT_RECV_BATCH) {
		if ((n = ct_read(ct)) == -1) {
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				ct->drained = true;
				break;
			}
			if (errno == EINTR)
				continue;
			/* The socket overflowed and the kernel dropped
			 * events: those connections' ends are gone. What
			 * is queued after the overrun is intact. */
			if (errno == ENOBUFS) {
				ct->lost++;
				got++;
				continue;
			}
			ct->cb = NULL;
			return -1;
		}
		for (i = 0; i < n; i++) {
			if ((len = ct->msgs[i].msg_len) == 0)
				continue;
			if (!ct_framed(ct->buf[i], len))
				ct->damaged++;
			/* seq and port id 0: events answer no request of
			 * ours (one caused by someone's flush carries that
			 * process's port id, which must not make it fail). */
			if (mnl_cb_run(ct->buf[i], len, 0, 0, ct_msg_cb, ct) ==
			    MNL_CB_ERROR)
				ct->damaged++;
		}
		got += n;
		if (n < CT_RECV_VLEN) {
			ct->drained = true;	/* the socket was empty */
			break;
		}
	}
	ct->cb = NULL;
	return ct->events;
}

uint64_t
nfq_ct_lost(const struct nfq_ct *ct)
{
	return ct->lost;
}

bool
nfq_ct_drained(const struct nfq_ct *ct)
{
	return ct->drained;
}

uint64_t
nfq_ct_damaged(const struct nfq_ct *ct)
{
	return ct->damaged;
}

const char *
nfq_ct_end_state(const struct nfq_ct_end *e)
{
	if (e->proto != IPPROTO_TCP)
		return "ended";
	switch (e->tcp_state) {
	case TCP_CONNTRACK_TIME_WAIT:
	case TCP_CONNTRACK_FIN_WAIT:
	case TCP_CONNTRACK_CLOSE_WAIT:
	case TCP_CONNTRACK_LAST_ACK:
		return "closed";
	case TCP_CONNTRACK_CLOSE:
		return "reset";
	case TCP_CONNTRACK_SYN_SENT:
	case TCP_CONNTRACK_SYN_RECV:
	case TCP_CONNTRACK_ESTABLISHED:
	case TCP_CONNTRACK_SYN_SENT2:
		return "timeout";
	default:
		return "ended";
	}
}

/* One answer from a socket with a receive timeout: -1 with errno, and
 * ETIMEDOUT when none came in time. */
static ssize_t
ct_recv(struct mnl_socket *nl, void *buf, size_t len)
{
	ssize_t n;

	while ((n = mnl_socket_recvfrom(nl, buf, len)) == -1 && errno == EINTR)
		;
	if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK))
		errno = ETIMEDOUT;
	return n;
}

/* The answer to request seq on a socket with a receive timeout, run
 * through cb: mnl_cb_run's result, MNL_CB_ERROR with errno (the kernel's
 * error, or ETIMEDOUT) too. Answers to earlier requests that timed out
 * are skipped. */
static int
ct_wait_answer(struct mnl_socket *nl, void *buf, size_t len, uint32_t seq,
    mnl_cb_t cb, void *data)
{
	ssize_t n;

	for (;;) {
		if ((n = ct_recv(nl, buf, len)) == -1)
			return MNL_CB_ERROR;
		if ((size_t)n < sizeof(struct nlmsghdr) ||
		    ((const struct nlmsghdr *)buf)->nlmsg_seq == seq)
			return mnl_cb_run(buf, (size_t)n, seq,
			    mnl_socket_get_portid(nl), cb, data);
	}
}

/* A ctnetlink request's headers at buf, for IPv4 (NLM_F_REQUEST and
 * flags): the message to add its attributes to. */
static struct nlmsghdr *
ct_request(void *buf, uint16_t type, uint16_t flags, uint32_t seq)
{
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	struct nfgenmsg *nfg;

	nlh->nlmsg_type = type;
	nlh->nlmsg_flags = NLM_F_REQUEST | flags;
	nlh->nlmsg_seq = seq;
	nfg = mnl_nlmsg_put_extra_header(nlh, sizeof(*nfg));
	nfg->nfgen_family = AF_INET;
	nfg->version = NFNETLINK_V0;
	nfg->res_id = 0;
	return nlh;
}

/* The original tuple of an IPv4 connection (addresses in network order,
 * ports in host order), the key of a request about one connection. */
static void
ct_put_tuple(struct nlmsghdr *nlh, uint8_t proto, uint32_t saddr,
    uint16_t sport, uint32_t daddr, uint16_t dport)
{
	struct nlattr *tuple, *nest;

	tuple = mnl_attr_nest_start(nlh, CTA_TUPLE_ORIG);
	nest = mnl_attr_nest_start(nlh, CTA_TUPLE_IP);
	mnl_attr_put_u32(nlh, CTA_IP_V4_SRC, saddr);
	mnl_attr_put_u32(nlh, CTA_IP_V4_DST, daddr);
	mnl_attr_nest_end(nlh, nest);
	nest = mnl_attr_nest_start(nlh, CTA_TUPLE_PROTO);
	mnl_attr_put_u8(nlh, CTA_PROTO_NUM, proto);
	mnl_attr_put_u16(nlh, CTA_PROTO_SRC_PORT, htons(sport));
	mnl_attr_put_u16(nlh, CTA_PROTO_DST_PORT, htons(dport));
	mnl_attr_nest_end(nlh, nest);
	mnl_attr_nest_end(nlh, tuple);
}

/* nfq_ct_get's answer: the connection, or the error the kernel sent. */
struct ct_answer {
	struct nfq_ct_end	*e;
	int			 found;		/* 1, or -1: did not parse */
};

static int
ct_answer_cb(const struct nlmsghdr *nlh, void *data)
{
	struct ct_answer *a = data;

	if (ct_parse(nlh, nlh->nlmsg_len, CT_NEW_TYPE, a->e) == NFQ_CT_EVENT)
		a->found = 1;
	else
		a->found = -1;
	return MNL_CB_OK;
}

int
nfq_ct_get(struct nfq_ct *ct, uint8_t proto, uint32_t saddr, uint16_t sport,
    uint32_t daddr, uint16_t dport, struct nfq_ct_end *e)
{
	alignas(struct nlmsghdr) char buf[MNL_SOCKET_BUFFER_SIZE];
	struct ct_answer a = { e, 0 };
	struct nlmsghdr *nlh;
	uint32_t seq = ++ct->q_seq;

	nlh = ct_request(buf, CT_GET_TYPE, 0, seq);
	ct_put_tuple(nlh, proto, saddr, sport, daddr, dport);
	if (mnl_socket_sendto(ct->q, nlh, nlh->nlmsg_len) == -1)
		return -1;
	if (ct_wait_answer(ct->q, buf, sizeof(buf), seq, ct_answer_cb, &a) ==
	    MNL_CB_ERROR)
		return errno == ENOENT ? 0 : -1;
	if (a.found != 1) {
		errno = EPROTO;
		return -1;
	}
	return 1;
}

/* ---- connection marks ------------------------------------------------- */

struct nfq_ctmark {
	struct mnl_socket	*nl;
	uint32_t		 seq;
	/* a request, then its acknowledgement: an error message, which
	 * quotes the request */
	alignas(struct nlmsghdr) char buf[4096];
	/* refusals of posted changes, read apart from the requests */
	alignas(struct nlmsghdr) char rbuf[4096];
};

struct nfq_ctmark *
nfq_ctmark_open(char *err, size_t errlen)
{
	struct nfq_ctmark *m;
	struct timeval tv = { .tv_sec = CT_GET_TIMEOUT_MS / 1000,
	    .tv_usec = CT_GET_TIMEOUT_MS % 1000 * 1000 };

	if ((m = calloc(1, sizeof(*m))) == NULL) {
		ct_err(err, errlen, "calloc", errno);
		return NULL;
	}
	/* blocking, with a bound on the wait: each change is acknowledged */
	if ((m->nl = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC)) ==
	    NULL || setsockopt(mnl_socket_get_fd(m->nl), SOL_SOCKET,
	    SO_RCVTIMEO, &tv, sizeof(tv)) == -1 ||
	    mnl_socket_bind(m->nl, 0, MNL_SOCKET_AUTOPID) == -1) {
		ct_err(err, errlen, "conntrack marks: netlink socket", errno);
		nfq_ctmark_close(m);
		return NULL;
	}
	return m;
}

int
nfq_ctmark_set(struct nfq_ctmark *m, uint8_t proto, uint32_t saddr,
    uint16_t sport, uint32_t daddr, uint16_t dport, uint32_t mark,
    uint32_t mask)
{
	struct nlmsghdr *nlh;
	uint32_t seq = ++m->seq;

	/* IPCTNL_MSG_CT_NEW without NLM_F_CREATE changes the connection the
	 * tuple names, or fails with ENOENT; the kernel replaces the bits of
	 * the mark that CTA_MARK_MASK covers */
	nlh = ct_request(m->buf, CT_NEW_TYPE, NLM_F_ACK, seq);
	ct_put_tuple(nlh, proto, saddr, sport, daddr, dport);
	mnl_attr_put_u32(nlh, CTA_MARK, htonl(mark & mask));
	mnl_attr_put_u32(nlh, CTA_MARK_MASK, htonl(mask));
	if (mnl_socket_sendto(m->nl, nlh, nlh->nlmsg_len) == -1)
		return -1;
	/* the acknowledgement is an error message: 0, or errno */
	return ct_wait_answer(m->nl, m->buf, sizeof(m->buf), seq, NULL, NULL) ==
	    MNL_CB_ERROR ? -1 : 0;
}

int
nfq_ctmark_fd(const struct nfq_ctmark *m)
{
	return mnl_socket_get_fd(m->nl);
}

int
nfq_ctmark_post(struct nfq_ctmark *m, uint8_t proto, uint32_t saddr,
    uint16_t sport, uint32_t daddr, uint16_t dport, uint32_t mark,
    uint32_t mask)
{
	struct nlmsghdr *nlh;

	/* no NLM_F_ACK: the kernel makes the change inside sendto and
	 * answers only a refusal, which quotes the request (its tuple) */
	nlh = ct_request(m->buf, CT_NEW_TYPE, 0, ++m->seq);
	ct_put_tuple(nlh, proto, saddr, sport, daddr, dport);
	mnl_attr_put_u32(nlh, CTA_MARK, htonl(mark & mask));
	mnl_attr_put_u32(nlh, CTA_MARK_MASK, htonl(mask));
	return mnl_socket_sendto(m->nl, nlh, nlh->nlmsg_len) == -1 ? -1 : 0;
}

/* One refusal (an error message quoting a posted change) to the caller. */
static void
ctmark_refusal(const struct nlmsghdr *nlh, nfq_ctmark_refusal_cb cb,
    void *arg)
{
	const struct nlmsgerr *e;
	struct nfq_ct_end ce;
	size_t len;

	if (nlh->nlmsg_type != NLMSG_ERROR ||
	    mnl_nlmsg_get_payload_len(nlh) < sizeof(*e))
		return;
	e = mnl_nlmsg_get_payload(nlh);
	if (e->error == 0)
		return;		/* an acknowledgement nobody asked for */
	len = mnl_nlmsg_get_payload_len(nlh) - offsetof(struct nlmsgerr, msg);
	if (ct_parse(&e->msg, len, CT_NEW_TYPE, &ce) == NFQ_CT_EVENT)
		cb(arg, &ce, -e->error);
	else
		cb(arg, NULL, -e->error);	/* the quote was cut */
}

int
nfq_ctmark_refusals(struct nfq_ctmark *m, nfq_ctmark_refusal_cb cb,
    void *arg)
{
	const struct nlmsghdr *nlh;
	struct sockaddr_nl from;
	socklen_t fromlen;
	ssize_t n;
	int len, i, count = 0;

	/* bounded: refusals are rare, and a flood of them must not hold
	 * the caller's loop */
	for (i = 0; i < CT_RECV_BATCH; i++) {
		fromlen = sizeof(from);
		n = recvfrom(mnl_socket_get_fd(m->nl), m->rbuf,
		    sizeof(m->rbuf), MSG_DONTWAIT, (struct sockaddr *)&from,
		    &fromlen);
		if (n == -1) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			if (errno == ENOBUFS) {
				/* refusals were lost: whose, unknown */
				cb(arg, NULL, ENOBUFS);
				count++;
				continue;
			}
			return -1;
		}
		/* a refusal comes from the kernel (port id 0); another
		 * process with CAP_NET_ADMIN could send to our port id */
		if (fromlen != sizeof(from) || from.nl_family != AF_NETLINK ||
		    from.nl_pid != 0)
			continue;
		len = (int)n;
		for (nlh = (const struct nlmsghdr *)m->rbuf;
		    mnl_nlmsg_ok(nlh, len); nlh = mnl_nlmsg_next(nlh, &len)) {
			ctmark_refusal(nlh, cb, arg);
			count++;
		}
	}
	return count;
}

void
nfq_ctmark_close(struct nfq_ctmark *m)
{
	if (m == NULL)
		return;
	if (m->nl != NULL)
		mnl_socket_close(m->nl);
	free(m);
}

void
nfq_ct_close(struct nfq_ct *ct)
{
	if (ct == NULL)
		return;
	mnl_socket_close(ct->nl);
	if (ct->q != NULL)
		mnl_socket_close(ct->q);
	free(ct);
}

/* ---- forgetting a source's connections -------------------------------- */

/*
 * CTA_FILTER's flags (nf_conntrack_netlink.c, Linux 5.8 on); older uapi
 * headers name the attribute but not its flags.
 */
#ifndef CTA_FILTER_FLAG_CTA_IP_SRC
#define CTA_FILTER_FLAG_CTA_IP_SRC	(1U << 0)
#endif

#define CT_DELETE_TYPE	CT_DESTROY_TYPE	/* a request, here */

/* A dump's datagrams: the kernel fills what the reader offers, up to 32 KiB
 * (libmnl's MNL_SOCKET_DUMP_SIZE); smaller would truncate. */
#define CT_DUMP_BUF	32768

/* How long one dump or one batch of deletes may take to be answered. */
#define CT_FLUSH_TIMEOUT_MS	2000

/* An original tuple as the dump gave it: IP, ports or ICMP id/type/code,
 * maybe a zone. Some 60 bytes for TCP; one longer is not the kernel's. */
#define CT_TUPLE_BYTES	256

/* Delete requests in one datagram: each is about 100 bytes. */
#define CT_DELETE_BATCH	64

/*
 * Dump, delete, and dump again if the dump may have skipped some: the
 * kernel fills a datagram, stops at an entry that does not fit and
 * resumes from it in the next one, and some kernels lose their place when
 * that entry died meanwhile. Each dump walks the whole hash table (shared
 * by all namespaces: 262144 buckets here, some 10 ms in the kernel, and
 * other sandboxes' connects measurably slower meanwhile), so it is not
 * repeated without cause: entries that all
 * came in one datagram shorter than CT_DGRAM_WHOLE were sent in one go
 * (the kernel's smallest dump datagram is about a page, an entry well
 * under 1 KiB). Passes end when one finds nothing, or was not cut;
 * CT_FLUSH_PASSES bounds them.
 */
#define CT_FLUSH_PASSES	4
#define CT_DGRAM_WHOLE	2048

/*
 * Entries acted on in one pass, some 340 bytes each: more wait for the
 * next pass (those acted on are gone, or carry their new mark, and are
 * passed over then). A `policy set` that refused 70,000 connections in
 * TIME_WAIT, each now marked (revoke.c), held them all at once: sluiced's
 * peak RSS went from 46 to 72 MiB in the bench (2026-12-03). Passes that
 * stop at this bound do not count towards CT_FLUSH_PASSES; CT_PASSES_MAX
 * bounds them all (a full table, 262,144 entries, is 32).
 */
#define CT_PASS_MAX	8192
#define CT_PASSES_MAX	64

static const enum mnl_attr_data_type ct_flush_types[CTA_MAX + 1] = {
	[CTA_TUPLE_ORIG]	= MNL_TYPE_NESTED,
	[CTA_ZONE]		= MNL_TYPE_U16,
	[CTA_ID]		= MNL_TYPE_U32,
};

/* One connection to delete (or to mark), named as the dump named it. */
struct ct_doomed {
	alignas(struct nlattr) unsigned char tuple[CT_TUPLE_BYTES];
	uint16_t	tuple_len;	/* CTA_TUPLE_ORIG's payload */
	bool		has_zone, has_id;
	uint16_t	zone;		/* as sent: network order */
	uint32_t	id;
	uint32_t	mark;		/* nfq_ct_revise: the mark it gets */
	struct nfq_ct_end e;		/* nfq_ct_revise: as the dump had it */
};

/* nfq_ct_revise's part of a pass: marks instead of deletes. */
struct ct_revise_how {
	nfq_ct_revise_cb	 revise;
	nfq_ct_revised_cb	 revised;
	uint32_t		 mask;
};

struct ct_flush {
	struct mnl_socket	*nl;
	uint32_t		 seq;
	nfq_ct_match_cb		 match;
	void			*match_arg;
	/* nfq_ct_revise: marks instead of deletes */
	nfq_ct_revise_cb	 revise;
	nfq_ct_revised_cb	 revised;
	uint32_t		 mask;
	struct ct_doomed	*doomed;
	size_t			 n, cap;
	bool			 damaged;	/* an entry that did not parse */
	bool			 nomem;
	bool			 cut;		/* the dump may have resumed */
	bool			 capped;	/* more than CT_PASS_MAX to act on */
	size_t			 seen;		/* entries in this datagram */
	alignas(struct nlmsghdr) char buf[CT_DUMP_BUF];
};

static void
flush_err(char *err, size_t errlen, const char *what, int e)
{
	if (err == NULL || errlen == 0)
		return;
	snprintf(err, errlen, "conntrack flush: %s: %s", what, strerror(e));
}

/* One entry of the dump: kept for deletion if its original source matches. */
static int
flush_dump_cb(const struct nlmsghdr *nlh, void *data)
{
	struct ct_flush *f = data;
	const struct nfgenmsg *nfg;
	const struct nlattr *cta[CTA_MAX + 1];
	const struct nlattr *tuple[CTA_TUPLE_MAX + 1];
	const struct nlattr *ip[CTA_IP_MAX + 1];
	struct ct_doomed *d;
	struct nfq_ct_end e;
	uint32_t mark = 0;
	size_t len;

	if (nlh->nlmsg_type != CT_NEW_TYPE ||
	    mnl_nlmsg_get_payload_len(nlh) < MNL_ALIGN(sizeof(*nfg)))
		return MNL_CB_OK;
	f->seen++;
	nfg = mnl_nlmsg_get_payload(nlh);
	if (nfg->nfgen_family != AF_INET)
		return MNL_CB_OK;
	if (!ct_attrs(mnl_nlmsg_get_payload_offset(nlh, sizeof(*nfg)),
	    mnl_nlmsg_get_payload_len(nlh) - MNL_ALIGN(sizeof(*nfg)),
	    ct_flush_types, CTA_MAX, cta) ||
	    !ct_nest(cta[CTA_TUPLE_ORIG], ct_tuple_types, CTA_TUPLE_MAX, tuple) ||
	    !ct_nest(tuple[CTA_TUPLE_IP], ct_ip_types, CTA_IP_MAX, ip) ||
	    ip[CTA_IP_V4_SRC] == NULL) {
		f->damaged = true;
		return MNL_CB_OK;
	}
	/* checked here even when the kernel filtered: one without CTA_FILTER
	 * ignores it and sends everything */
	if (!f->match(f->match_arg, mnl_attr_get_u32(ip[CTA_IP_V4_SRC])))
		return MNL_CB_OK;
	if (f->n >= CT_PASS_MAX) {
		f->capped = true;	/* the next pass's */
		return MNL_CB_OK;
	}
	if (f->revise != NULL) {
		if (ct_parse(nlh, nlh->nlmsg_len, CT_NEW_TYPE, &e) !=
		    NFQ_CT_EVENT) {
			f->damaged = true;
			return MNL_CB_OK;
		}
		if ((mark = f->revise(f->match_arg, &e)) == 0)
			return MNL_CB_OK;
	}
	len = mnl_attr_get_payload_len(cta[CTA_TUPLE_ORIG]);
	if (len > CT_TUPLE_BYTES) {
		f->damaged = true;
		return MNL_CB_OK;
	}
	if (f->n == f->cap) {
		size_t cap = f->cap ? f->cap * 2 : 16;
		struct ct_doomed *v = reallocarray(f->doomed, cap, sizeof(*v));

		if (v == NULL) {
			f->nomem = true;
			return MNL_CB_OK;
		}
		f->doomed = v;
		f->cap = cap;
	}
	d = &f->doomed[f->n++];
	memcpy(d->tuple, mnl_attr_get_payload(cta[CTA_TUPLE_ORIG]), len);
	d->tuple_len = (uint16_t)len;
	d->has_zone = cta[CTA_ZONE] != NULL;
	d->zone = d->has_zone ? mnl_attr_get_u16(cta[CTA_ZONE]) : 0;
	d->has_id = cta[CTA_ID] != NULL;
	d->id = d->has_id ? mnl_attr_get_u32(cta[CTA_ID]) : 0;
	if (f->revise != NULL) {
		d->mark = mark;
		d->e = e;
	}
	return MNL_CB_OK;
}

/*
 * Dumps the IPv4 table into f->doomed. With filter, the kernel sends only
 * the entries whose original source is *filter. -1 with errno.
 */
static int
flush_dump(struct ct_flush *f, const uint32_t *filter)
{
	struct nlmsghdr *nlh;
	struct nlattr *nest, *ipn;
	uint32_t seq = ++f->seq, portid = mnl_socket_get_portid(f->nl);
	size_t with_entries = 0;
	ssize_t n;
	int rc;

	f->n = 0;
	f->damaged = f->nomem = f->cut = f->capped = false;
	/* IPv4: CTA_FILTER needs a family */
	nlh = ct_request(f->buf, CT_GET_TYPE, NLM_F_DUMP, seq);
	if (filter != NULL) {
		nest = mnl_attr_nest_start(nlh, CTA_TUPLE_ORIG);
		ipn = mnl_attr_nest_start(nlh, CTA_TUPLE_IP);
		mnl_attr_put_u32(nlh, CTA_IP_V4_SRC, *filter);
		mnl_attr_nest_end(nlh, ipn);
		mnl_attr_nest_end(nlh, nest);
		nest = mnl_attr_nest_start(nlh, CTA_FILTER);
		mnl_attr_put_u32(nlh, CTA_FILTER_ORIG_FLAGS,
		    CTA_FILTER_FLAG_CTA_IP_SRC);
		mnl_attr_nest_end(nlh, nest);
	}
	if (mnl_socket_sendto(f->nl, nlh, nlh->nlmsg_len) == -1)
		return -1;
	do {
		if ((n = ct_recv(f->nl, f->buf, sizeof(f->buf))) == -1)
			return -1;
		f->seen = 0;
		rc = mnl_cb_run(f->buf, (size_t)n, seq, portid, flush_dump_cb,
		    f);
		if (f->seen > 0 && (++with_entries > 1 || n >= CT_DGRAM_WHOLE))
			f->cut = true;
	} while (rc == MNL_CB_OK);
	if (rc == MNL_CB_ERROR)
		return -1;
	if (f->nomem) {
		errno = ENOMEM;
		return -1;
	}
	return 0;
}

/*
 * Deletes doomed[0 .. n) (n <= CT_DELETE_BATCH) in one datagram, one
 * acknowledged request each; with f->revise, sets their marks instead.
 * Adds those done to *deleted; ENOENT (gone meanwhile, or a new connection
 * with the same tuple: CTA_ID tells them apart) is no failure. -1 with
 * errno: the first other error.
 */
static int
flush_apply(struct ct_flush *f, const struct ct_doomed *doomed, size_t n,
    int *deleted)
{
	alignas(struct nlmsghdr) char req[CT_DELETE_BATCH * 512];
	struct nlmsghdr *nlh;
	uint32_t first = f->seq + 1;
	size_t i, len = 0, answered = 0;
	int failed = 0;
	ssize_t r;

	for (i = 0; i < n; i++) {
		/* IPCTNL_MSG_CT_NEW without NLM_F_CREATE changes the entry
		 * the tuple names (it takes no CTA_ID) */
		nlh = ct_request(req + len, f->revise != NULL ? CT_NEW_TYPE :
		    CT_DELETE_TYPE, NLM_F_ACK, ++f->seq);
		mnl_attr_put(nlh, CTA_TUPLE_ORIG | NLA_F_NESTED,
		    doomed[i].tuple_len, doomed[i].tuple);
		if (doomed[i].has_zone)
			mnl_attr_put_u16(nlh, CTA_ZONE, doomed[i].zone);
		if (f->revise != NULL) {
			mnl_attr_put_u32(nlh, CTA_MARK,
			    htonl(doomed[i].mark & f->mask));
			mnl_attr_put_u32(nlh, CTA_MARK_MASK, htonl(f->mask));
		} else if (doomed[i].has_id)
			mnl_attr_put_u32(nlh, CTA_ID, doomed[i].id);
		len += nlh->nlmsg_len;
	}
	if (mnl_socket_sendto(f->nl, req, len) == -1)
		return -1;
	while (answered < n) {
		const struct nlmsghdr *a;
		int left;

		if ((r = ct_recv(f->nl, f->buf, sizeof(f->buf))) == -1)
			return -1;
		left = (int)r;
		for (a = (const struct nlmsghdr *)(void *)f->buf;
		    mnl_nlmsg_ok(a, left); a = mnl_nlmsg_next(a, &left)) {
			const struct nlmsgerr *e;

			/* an answer to an earlier request that timed out */
			if (a->nlmsg_type != NLMSG_ERROR ||
			    a->nlmsg_seq - first >= n ||
			    mnl_nlmsg_get_payload_len(a) < sizeof(*e))
				continue;
			e = mnl_nlmsg_get_payload(a);
			answered++;
			if (e->error == 0) {
				(*deleted)++;
				if (f->revised != NULL)
					f->revised(f->match_arg,
					    &doomed[a->nlmsg_seq - first].e);
			} else if (e->error != -ENOENT && failed == 0)
				failed = -e->error;
		}
	}
	if (failed != 0) {
		errno = failed;
		return -1;
	}
	return 0;
}

/* A blocking ctnetlink socket, with a bound on each wait. */
static struct mnl_socket *
flush_socket(char *err, size_t errlen)
{
	struct timeval tv = { .tv_sec = CT_FLUSH_TIMEOUT_MS / 1000,
	    .tv_usec = CT_FLUSH_TIMEOUT_MS % 1000 * 1000 };
	struct mnl_socket *nl;
	int one = 1;

	if ((nl = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC)) == NULL) {
		flush_err(err, errlen, "netlink socket", errno);
		return NULL;
	}
	/* failed acknowledgements without the request copied back */
	(void)mnl_socket_setsockopt(nl, NETLINK_CAP_ACK, &one, sizeof(one));
	if (setsockopt(mnl_socket_get_fd(nl), SOL_SOCKET, SO_RCVTIMEO, &tv,
	    sizeof(tv)) == -1 ||
	    mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) == -1) {
		flush_err(err, errlen, "netlink socket", errno);
		mnl_socket_close(nl);
		return NULL;
	}
	return nl;
}

/*
 * Dumps and deletes, on nl (closed here); filter as for flush_dump.
 * Returns the number deleted or -1.
 */
static int
ct_flush(struct mnl_socket *nl, const uint32_t *filter, nfq_ct_match_cb match,
    void *arg, const struct ct_revise_how *revise, char *err, size_t errlen)
{
	struct ct_flush *f;
	int deleted = 0, rc = -1, pass, tries = 0;
	size_t i, k;

	if ((f = calloc(1, sizeof(*f))) == NULL) {
		flush_err(err, errlen, "calloc", errno);
		mnl_socket_close(nl);
		return -1;
	}
	f->nl = nl;
	f->match = match;
	f->match_arg = arg;
	if (revise != NULL) {
		f->revise = revise->revise;
		f->revised = revise->revised;
		f->mask = revise->mask;
	}
	for (pass = 0;; pass++) {
		if (flush_dump(f, filter) == -1) {
			/* a kernel that knows CTA_FILTER but not this use of
			 * it: every entry comes, and is matched here */
			if (filter != NULL && (errno == EINVAL ||
			    errno == EOPNOTSUPP)) {
				filter = NULL;
				pass--;
				continue;
			}
			flush_err(err, errlen, "listing connections", errno);
			goto cleanup;
		}
		if (f->damaged) {
			flush_err(err, errlen, "listing connections", EPROTO);
			goto cleanup;
		}
		if (f->n == 0) {
			rc = deleted;
			goto cleanup;
		}
		/* still some after every pass: they are made as fast as
		 * they are deleted (a pass stopped at CT_PASS_MAX is no
		 * try) */
		if (tries == CT_FLUSH_PASSES || pass == CT_PASSES_MAX) {
			flush_err(err, errlen, "connections keep coming",
			    EAGAIN);
			goto cleanup;
		}
		for (i = 0; i < f->n; i += k) {
			k = f->n - i < CT_DELETE_BATCH ? f->n - i :
			    CT_DELETE_BATCH;
			if (flush_apply(f, f->doomed + i, k, &deleted) == -1) {
				flush_err(err, errlen, f->revise != NULL ?
				    "marking a connection" :
				    "deleting a connection", errno);
				goto cleanup;
			}
		}
		if (!f->cut && !f->capped) {
			rc = deleted;
			goto cleanup;
		}
		if (!f->capped)
			tries++;
	}
cleanup:
	mnl_socket_close(f->nl);
	free(f->doomed);
	free(f);
	return rc;
}

/*
 * One request: the kernel deletes every entry whose original source is
 * saddr (a flush with CTA_FILTER), walking its table without holding off
 * softirqs for more than a bucket, and skipping the walk in a namespace
 * without entries. 0, or -1 with errno: EINVAL or EOPNOTSUPP from a kernel
 * without that filter on a flush (it reads the address as an incomplete
 * tuple to delete, never as a flush of everything).
 */
static int
flush_by_filter(struct mnl_socket *nl, uint32_t saddr)
{
	alignas(struct nlmsghdr) char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nlh;
	struct nlattr *nest, *ipn;
	uint32_t seq = 1, portid = mnl_socket_get_portid(nl);
	ssize_t n;

	nlh = ct_request(buf, CT_DELETE_TYPE, NLM_F_ACK, seq);
	nest = mnl_attr_nest_start(nlh, CTA_TUPLE_ORIG);
	ipn = mnl_attr_nest_start(nlh, CTA_TUPLE_IP);
	mnl_attr_put_u32(nlh, CTA_IP_V4_SRC, saddr);
	mnl_attr_nest_end(nlh, ipn);
	mnl_attr_nest_end(nlh, nest);
	nest = mnl_attr_nest_start(nlh, CTA_FILTER);
	mnl_attr_put_u32(nlh, CTA_FILTER_ORIG_FLAGS, CTA_FILTER_FLAG_CTA_IP_SRC);
	mnl_attr_nest_end(nlh, nest);
	if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) == -1)
		return -1;
	for (;;) {
		if ((n = ct_recv(nl, buf, sizeof(buf))) == -1)
			return -1;
		switch (mnl_cb_run(buf, (size_t)n, seq, portid, NULL, NULL)) {
		case MNL_CB_ERROR:
			return -1;
		case MNL_CB_STOP:
			return 0;
		default:
			break;	/* not the acknowledgement yet */
		}
	}
}

static bool
same_source(void *arg, uint32_t saddr)
{
	return saddr == *(const uint32_t *)arg;
}

int
nfq_ct_flush_source(uint32_t saddr, char *err, size_t errlen)
{
	struct mnl_socket *nl;

	if ((nl = flush_socket(err, errlen)) == NULL)
		return -1;
	if (flush_by_filter(nl, saddr) == 0) {
		mnl_socket_close(nl);
		return 0;
	}
	if (errno != EINVAL && errno != EOPNOTSUPP) {
		flush_err(err, errlen, "deleting connections", errno);
		mnl_socket_close(nl);
		return -1;
	}
	return ct_flush(nl, &saddr, same_source, &saddr, NULL, err, errlen) ==
	    -1 ? -1 : 0;
}

int
nfq_ct_flush_match(nfq_ct_match_cb match, void *arg, char *err,
    size_t errlen)
{
	struct mnl_socket *nl;

	if ((nl = flush_socket(err, errlen)) == NULL)
		return -1;
	return ct_flush(nl, NULL, match, arg, NULL, err, errlen);
}

struct revise_arg {
	uint32_t		 saddr;
	nfq_ct_revise_cb	 revise;
	nfq_ct_revised_cb	 revised;
	void			*arg;
};

static bool
revise_source(void *arg, uint32_t saddr)
{
	return saddr == ((const struct revise_arg *)arg)->saddr;
}

static uint32_t
revise_one(void *arg, const struct nfq_ct_end *e)
{
	const struct revise_arg *r = arg;

	return r->revise(r->arg, e);
}

static void
revised_one(void *arg, const struct nfq_ct_end *e)
{
	const struct revise_arg *r = arg;

	if (r->revised != NULL)
		r->revised(r->arg, e);
}

int
nfq_ct_revise(uint32_t saddr, uint32_t mask, nfq_ct_revise_cb revise,
    nfq_ct_revised_cb revised, void *arg, char *err, size_t errlen)
{
	struct revise_arg r = { saddr, revise, revised, arg };
	struct ct_revise_how how = { revise_one, revised_one, mask };
	struct mnl_socket *nl;

	if ((nl = flush_socket(err, errlen)) == NULL)
		return -1;
	return ct_flush(nl, &saddr, revise_source, &r, &how, err, errlen);
}
