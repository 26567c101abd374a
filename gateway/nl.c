/* nl.c: rtnetlink requests (libmnl) for sandbox plumbing: veths, addresses, routes. */
#include <errno.h>
#include <limits.h>
#include <stdalign.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <sys/socket.h>

#include <libmnl/libmnl.h>
#include <linux/if_addr.h>
#include <linux/if_link.h>
#include <linux/neighbour.h>
#include <linux/net_namespace.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>

#include "gateway/nl.h"

/* A request is a header, one fixed struct and a few short attributes. */
#define NL_REQ_SIZE	1024

/* Link dumps come in datagrams the kernel sizes after the reader's
 * buffer; a link is 1-2 KiB with its statistics, so this takes a dozen
 * per recv. MSG_TRUNC would mean a message larger than that. */
#define NL_RECV_SIZE	32768

struct gw_nl {
	struct mnl_socket	*sock;
	unsigned		 portid;
	unsigned		 seq;
	alignas(struct nlmsghdr) char req[NL_REQ_SIZE];
	alignas(struct nlmsghdr) char buf[NL_RECV_SIZE];
};

/* Called for each data message of a reply (a dump's links, a GETLINK's
 * answer); returns 0 to go on, -1 with errno to fail the request. */
typedef int (*reply_cb)(const struct nlmsghdr *nlh, void *arg);

struct gw_nl *
gw_nl_open(char *err, size_t errlen)
{
	struct gw_nl *nl = calloc(1, sizeof(*nl));
	int one = 1, saved;

	if (nl == NULL) {
		snprintf(err, errlen, "rtnetlink: out of memory");
		return NULL;
	}
	if ((nl->sock = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC)) == NULL ||
	    mnl_socket_bind(nl->sock, 0, MNL_SOCKET_AUTOPID) == -1) {
		saved = errno;
		snprintf(err, errlen, "rtnetlink socket: %s", strerror(errno));
		gw_nl_close(nl);
		errno = saved;
		return NULL;
	}
	/* Errors carry the kernel's own words ("Nexthop has invalid
	 * gateway"); the ACK need not echo our request back (CAP_ACK). Both
	 * are optional: older kernels answer with a bare errno. */
	(void)mnl_socket_setsockopt(nl->sock, NETLINK_EXT_ACK, &one, sizeof(one));
	(void)mnl_socket_setsockopt(nl->sock, NETLINK_CAP_ACK, &one, sizeof(one));
	nl->portid = mnl_socket_get_portid(nl->sock);
	return nl;
}

void
gw_nl_close(struct gw_nl *nl)
{
	if (nl == NULL)
		return;
	if (nl->sock != NULL)
		mnl_socket_close(nl->sock);
	free(nl);
}

static int
ext_ack_cb(const struct nlattr *attr, void *data)
{
	const char **msg = data;

	if (mnl_attr_get_type(attr) == NLMSGERR_ATTR_MSG &&
	    mnl_attr_validate(attr, MNL_TYPE_NUL_STRING) == 0)
		*msg = mnl_attr_get_str(attr);
	return MNL_CB_OK;
}

/* The kernel's extended-ACK message in an NLMSG_ERROR, or NULL. Points
 * into nlh. */
static const char *
ext_ack_msg(const struct nlmsghdr *nlh)
{
	const struct nlmsgerr *e = mnl_nlmsg_get_payload(nlh);
	size_t len = mnl_nlmsg_get_payload_len(nlh), off = sizeof(*e);
	const char *msg = NULL;

	if (!(nlh->nlmsg_flags & NLM_F_ACK_TLVS))
		return NULL;
	/* without CAP_ACK the request's body sits between header and TLVs */
	if (!(nlh->nlmsg_flags & NLM_F_CAPPED)) {
		if (e->msg.nlmsg_len < sizeof(struct nlmsghdr))
			return NULL;
		off += e->msg.nlmsg_len - sizeof(struct nlmsghdr);
	}
	if (MNL_ALIGN(off) >= len)
		return NULL;
	(void)mnl_attr_parse(nlh, (unsigned)off, ext_ack_cb, &msg);
	return msg;
}

static void
fail(char *err, size_t errlen, const char *what, const char *kmsg)
{
	if (kmsg != NULL && *kmsg != '\0')
		snprintf(err, errlen, "%s: %s (%s)", what, strerror(errno), kmsg);
	else
		snprintf(err, errlen, "%s: %s", what, strerror(errno));
}

/*
 * Sends the request in nl->req and reads until its end: the ACK of a
 * request (NLM_F_ACK is set here), NLMSG_DONE of a dump. Data messages
 * before that go to cb. what names the request in err.
 */
static int
transact(struct gw_nl *nl, reply_cb cb, void *arg, const char *what,
    char *err, size_t errlen)
{
	struct nlmsghdr *req = (struct nlmsghdr *)nl->req;
	bool dump = (req->nlmsg_flags & NLM_F_DUMP) == NLM_F_DUMP;
	bool intr = false;
	unsigned seq = ++nl->seq;

	req->nlmsg_flags |= NLM_F_REQUEST | (dump ? 0 : NLM_F_ACK);
	req->nlmsg_seq = seq;
	if (mnl_socket_sendto(nl->sock, req, req->nlmsg_len) == -1) {
		fail(err, errlen, what, NULL);
		return -1;
	}
	for (;;) {
		ssize_t n = mnl_socket_recvfrom(nl->sock, nl->buf, sizeof(nl->buf));
		const struct nlmsghdr *nlh = (const struct nlmsghdr *)nl->buf;
		int left;

		if (n == -1) {
			if (errno == EINTR)
				continue;
			fail(err, errlen, what, NULL);
			return -1;
		}
		left = (int)n;
		for (; mnl_nlmsg_ok(nlh, left); nlh = mnl_nlmsg_next(nlh, &left)) {
			/* an answer to an earlier request that gave up */
			if (nlh->nlmsg_seq != seq || nlh->nlmsg_pid != nl->portid)
				continue;
			if (nlh->nlmsg_flags & NLM_F_DUMP_INTR)
				intr = true;
			if (nlh->nlmsg_type == NLMSG_ERROR) {
				const struct nlmsgerr *e;

				if (mnl_nlmsg_get_payload_len(nlh) < sizeof(*e)) {
					errno = EPROTO;
					fail(err, errlen, what, "short NLMSG_ERROR");
					return -1;
				}
				e = mnl_nlmsg_get_payload(nlh);
				if (e->error == 0)
					return 0;
				errno = e->error < 0 ? -e->error : e->error;
				fail(err, errlen, what, ext_ack_msg(nlh));
				return -1;
			}
			if (nlh->nlmsg_type == NLMSG_DONE) {
				const int *status = mnl_nlmsg_get_payload(nlh);

				if (mnl_nlmsg_get_payload_len(nlh) >= sizeof(int) &&
				    *status < 0) {
					errno = -*status;
					fail(err, errlen, what, NULL);
					return -1;
				}
				if (intr) {
					errno = EAGAIN;
					fail(err, errlen, what, "the list changed "
					    "while it was read");
					return -1;
				}
				return 0;
			}
			if (nlh->nlmsg_type < NLMSG_MIN_TYPE || cb == NULL)
				continue;
			if (cb(nlh, arg) == -1) {
				fail(err, errlen, what, NULL);
				return -1;
			}
		}
	}
}

static struct nlmsghdr *
req_start(struct gw_nl *nl, uint16_t type, uint16_t flags)
{
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(nl->req);

	nlh->nlmsg_type = type;
	nlh->nlmsg_flags = flags;
	return nlh;
}

static struct ifinfomsg *
put_ifinfo(struct nlmsghdr *nlh, uint32_t ifindex)
{
	struct ifinfomsg *ifi = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifi));

	ifi->ifi_family = AF_UNSPEC;
	ifi->ifi_index = (int)ifindex;
	return ifi;
}

int
gw_nl_veth_add(struct gw_nl *nl, const char *name, const char *peer,
    int peer_nsfd, char *err, size_t errlen)
{
	struct nlmsghdr *nlh;
	struct nlattr *linkinfo, *data, *peerinfo;
	char what[2 * IF_NAMESIZE + 16];

	snprintf(what, sizeof(what), "create veth %s/%s", name, peer);
	if (strlen(name) >= IF_NAMESIZE || strlen(peer) >= IF_NAMESIZE) {
		errno = EINVAL;
		fail(err, errlen, what, "name too long");
		return -1;
	}
	nlh = req_start(nl, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL);
	put_ifinfo(nlh, 0);
	mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
	linkinfo = mnl_attr_nest_start(nlh, IFLA_LINKINFO);
	mnl_attr_put_strz(nlh, IFLA_INFO_KIND, "veth");
	data = mnl_attr_nest_start(nlh, IFLA_INFO_DATA);
	/* the peer is described by an ifinfomsg of its own, then its
	 * attributes, all inside VETH_INFO_PEER */
	peerinfo = mnl_attr_nest_start(nlh, VETH_INFO_PEER);
	put_ifinfo(nlh, 0);
	mnl_attr_put_strz(nlh, IFLA_IFNAME, peer);
	if (peer_nsfd >= 0)
		mnl_attr_put_u32(nlh, IFLA_NET_NS_FD, (uint32_t)peer_nsfd);
	mnl_attr_nest_end(nlh, peerinfo);
	mnl_attr_nest_end(nlh, data);
	mnl_attr_nest_end(nlh, linkinfo);
	return transact(nl, NULL, NULL, what, err, errlen);
}

static int
link_index_cb(const struct nlmsghdr *nlh, void *arg)
{
	const struct ifinfomsg *ifi;

	if (nlh->nlmsg_type != RTM_NEWLINK ||
	    mnl_nlmsg_get_payload_len(nlh) < sizeof(*ifi))
		return 0;
	ifi = mnl_nlmsg_get_payload(nlh);
	*(uint32_t *)arg = (uint32_t)ifi->ifi_index;
	return 0;
}

/* Starts an RTM_GETLINK of the interface called name; -1 with ENODEV and
 * err (what) if no name that long can be one. */
static int
getlink_by_name(struct gw_nl *nl, const char *name, const char *what,
    char *err, size_t errlen)
{
	struct nlmsghdr *nlh;

	if (strlen(name) >= IF_NAMESIZE) {
		errno = ENODEV;
		fail(err, errlen, what, "name too long");
		return -1;
	}
	/* looked up by name in the kernel's hash: the same cost with one
	 * interface or thousands */
	nlh = req_start(nl, RTM_GETLINK, 0);
	put_ifinfo(nlh, 0);
	mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
	mnl_attr_put_u32(nlh, IFLA_EXT_MASK, RTEXT_FILTER_SKIP_STATS);
	return 0;
}

int
gw_nl_link_index(struct gw_nl *nl, const char *name, uint32_t *ifindex,
    char *err, size_t errlen)
{
	char what[IF_NAMESIZE + 16];

	snprintf(what, sizeof(what), "find %s", name);
	*ifindex = 0;
	if (getlink_by_name(nl, name, what, err, errlen) == -1)
		return -1;
	if (transact(nl, link_index_cb, ifindex, what, err, errlen) == -1)
		return -1;
	if (*ifindex == 0) {
		errno = ENODEV;
		fail(err, errlen, what, "no answer");
		return -1;
	}
	return 0;
}

struct veth_link {
	uint32_t	ifindex;
	uint32_t	link;		/* IFLA_LINK: the peer's ifindex */
	int32_t		link_nsid;	/* where the peer is, seen from here */
	bool		has_link;
	bool		has_nsid;
	bool		veth;
};

static int
link_kind_cb(const struct nlattr *attr, void *data)
{
	struct veth_link *vl = data;

	if (mnl_attr_get_type(attr) == IFLA_INFO_KIND &&
	    mnl_attr_validate(attr, MNL_TYPE_NUL_STRING) == 0 &&
	    strcmp(mnl_attr_get_str(attr), "veth") == 0)
		vl->veth = true;
	return MNL_CB_OK;
}

static int
veth_attr_cb(const struct nlattr *attr, void *data)
{
	struct veth_link *vl = data;

	switch (mnl_attr_get_type(attr)) {
	case IFLA_LINK:
		if (mnl_attr_validate(attr, MNL_TYPE_U32) == 0) {
			vl->link = mnl_attr_get_u32(attr);
			vl->has_link = true;
		}
		break;
	case IFLA_LINK_NETNSID:
		if (mnl_attr_validate(attr, MNL_TYPE_U32) == 0) {
			vl->link_nsid = (int32_t)mnl_attr_get_u32(attr);
			vl->has_nsid = true;
		}
		break;
	case IFLA_LINKINFO:
		(void)mnl_attr_parse_nested(attr, link_kind_cb, vl);
		break;
	}
	return MNL_CB_OK;
}

static int
veth_link_cb(const struct nlmsghdr *nlh, void *arg)
{
	struct veth_link *vl = arg;
	const struct ifinfomsg *ifi;

	if (nlh->nlmsg_type != RTM_NEWLINK ||
	    mnl_nlmsg_get_payload_len(nlh) < sizeof(*ifi))
		return 0;
	ifi = mnl_nlmsg_get_payload(nlh);
	vl->ifindex = (uint32_t)ifi->ifi_index;
	(void)mnl_attr_parse(nlh, sizeof(*ifi), veth_attr_cb, vl);
	return 0;
}

static int
nsid_attr_cb(const struct nlattr *attr, void *data)
{
	if (mnl_attr_get_type(attr) == NETNSA_NSID &&
	    mnl_attr_validate(attr, MNL_TYPE_U32) == 0)
		*(int32_t *)data = (int32_t)mnl_attr_get_u32(attr);
	return MNL_CB_OK;
}

static int
nsid_cb(const struct nlmsghdr *nlh, void *arg)
{
	if (nlh->nlmsg_type != RTM_NEWNSID ||
	    mnl_nlmsg_get_payload_len(nlh) < sizeof(struct rtgenmsg))
		return 0;
	(void)mnl_attr_parse(nlh, sizeof(struct rtgenmsg), nsid_attr_cb, arg);
	return 0;
}

int
gw_nl_veth_peer(struct gw_nl *nl, const char *name, int peer_nsfd,
    uint32_t *peer, char *err, size_t errlen)
{
	struct nlmsghdr *nlh;
	struct rtgenmsg *rtg;
	struct veth_link vl = { 0 };
	int32_t nsid = NETNSA_NSID_NOT_ASSIGNED;
	char what[IF_NAMESIZE + 32];

	snprintf(what, sizeof(what), "peer of %s", name);
	*peer = 0;
	if (getlink_by_name(nl, name, what, err, errlen) == -1 ||
	    transact(nl, veth_link_cb, &vl, what, err, errlen) == -1)
		return -1;
	if (vl.ifindex == 0) {
		errno = ENODEV;
		fail(err, errlen, what, "no answer");
		return -1;
	}
	/* a peer in another namespace comes with that namespace's id as this
	 * one knows it, compared with peer_nsfd's below; none assigned (-1)
	 * matches nothing */
	if (!vl.veth || !vl.has_nsid || vl.link_nsid < 0) {
		errno = ENOENT;
		fail(err, errlen, what, "not a veth into another namespace");
		return -1;
	}
	nlh = req_start(nl, RTM_GETNSID, 0);
	rtg = mnl_nlmsg_put_extra_header(nlh, sizeof(*rtg));
	rtg->rtgen_family = AF_UNSPEC;
	mnl_attr_put_u32(nlh, NETNSA_FD, (uint32_t)peer_nsfd);
	if (transact(nl, nsid_cb, &nsid, what, err, errlen) == -1)
		return -1;
	if (nsid != vl.link_nsid) {
		errno = ENOENT;
		fail(err, errlen, what, "its other end is in another namespace");
		return -1;
	}
	/* IFLA_LINK is left out when it equals the interface's own index,
	 * which the peer's, counted in its own namespace, may */
	*peer = vl.has_link ? vl.link : vl.ifindex;
	return 0;
}

struct link_mac {
	uint8_t	*mac;
	bool	 found;
	bool	 ok;
};

static int
lladdr_cb(const struct nlattr *attr, void *data)
{
	struct link_mac *lm = data;

	if (mnl_attr_get_type(attr) == IFLA_ADDRESS &&
	    mnl_attr_get_payload_len(attr) == GW_NL_MAC_LEN) {
		memcpy(lm->mac, mnl_attr_get_payload(attr), GW_NL_MAC_LEN);
		lm->ok = true;
	}
	return MNL_CB_OK;
}

static int
link_mac_cb(const struct nlmsghdr *nlh, void *arg)
{
	struct link_mac *lm = arg;

	if (nlh->nlmsg_type != RTM_NEWLINK ||
	    mnl_nlmsg_get_payload_len(nlh) < sizeof(struct ifinfomsg))
		return 0;
	lm->found = true;
	(void)mnl_attr_parse(nlh, sizeof(struct ifinfomsg), lladdr_cb, lm);
	return 0;
}

int
gw_nl_link_mac(struct gw_nl *nl, uint32_t ifindex, uint8_t mac[GW_NL_MAC_LEN],
    char *err, size_t errlen)
{
	struct nlmsghdr *nlh = req_start(nl, RTM_GETLINK, 0);
	struct link_mac lm = { mac, false, false };
	char what[48];

	snprintf(what, sizeof(what), "address of ifindex %u", ifindex);
	put_ifinfo(nlh, ifindex);
	mnl_attr_put_u32(nlh, IFLA_EXT_MASK, RTEXT_FILTER_SKIP_STATS);
	if (transact(nl, link_mac_cb, &lm, what, err, errlen) == -1)
		return -1;
	if (!lm.ok) {
		errno = lm.found ? EPROTO : ENODEV;
		fail(err, errlen, what, lm.found ? "not Ethernet" : "no answer");
		return -1;
	}
	return 0;
}

int
gw_nl_link_up(struct gw_nl *nl, uint32_t ifindex, char *err, size_t errlen)
{
	struct nlmsghdr *nlh = req_start(nl, RTM_NEWLINK, 0);
	struct ifinfomsg *ifi = put_ifinfo(nlh, ifindex);
	char what[48];

	snprintf(what, sizeof(what), "set ifindex %u up", ifindex);
	ifi->ifi_change = IFF_UP;
	ifi->ifi_flags = IFF_UP;
	return transact(nl, NULL, NULL, what, err, errlen);
}

int
gw_nl_link_set_alias(struct gw_nl *nl, uint32_t ifindex, const char *alias,
    char *err, size_t errlen)
{
	struct nlmsghdr *nlh = req_start(nl, RTM_NEWLINK, 0);
	char what[48];

	snprintf(what, sizeof(what), "set alias of ifindex %u", ifindex);
	put_ifinfo(nlh, ifindex);
	mnl_attr_put_strz(nlh, IFLA_IFALIAS, alias);
	return transact(nl, NULL, NULL, what, err, errlen);
}

int
gw_nl_link_del(struct gw_nl *nl, uint32_t ifindex, char *err, size_t errlen)
{
	struct nlmsghdr *nlh = req_start(nl, RTM_DELLINK, 0);
	char what[48];

	snprintf(what, sizeof(what), "delete ifindex %u", ifindex);
	put_ifinfo(nlh, ifindex);
	return transact(nl, NULL, NULL, what, err, errlen);
}

int
gw_nl_link_set_group(struct gw_nl *nl, uint32_t ifindex, uint32_t group,
    char *err, size_t errlen)
{
	struct nlmsghdr *nlh = req_start(nl, RTM_NEWLINK, 0);
	char what[64];

	snprintf(what, sizeof(what), "set group of ifindex %u", ifindex);
	put_ifinfo(nlh, ifindex);
	mnl_attr_put_u32(nlh, IFLA_GROUP, group);
	return transact(nl, NULL, NULL, what, err, errlen);
}

int
gw_nl_group_del(struct gw_nl *nl, uint32_t group, char *err, size_t errlen)
{
	struct nlmsghdr *nlh = req_start(nl, RTM_DELLINK, 0);
	char what[48];

	snprintf(what, sizeof(what), "delete link group %u", group);
	put_ifinfo(nlh, 0);
	mnl_attr_put_u32(nlh, IFLA_GROUP, group);
	return transact(nl, NULL, NULL, what, err, errlen);
}

int
gw_nl_addr_add(struct gw_nl *nl, uint32_t ifindex, uint32_t addr,
    unsigned plen, char *err, size_t errlen)
{
	struct nlmsghdr *nlh = req_start(nl, RTM_NEWADDR,
	    NLM_F_CREATE | NLM_F_EXCL);
	struct ifaddrmsg *ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));
	char what[80], ip[INET_ADDRSTRLEN];

	inet_ntop(AF_INET, &addr, ip, sizeof(ip));
	snprintf(what, sizeof(what), "add %s/%u to ifindex %u", ip, plen,
	    ifindex);
	if (plen > 32) {
		errno = EINVAL;
		fail(err, errlen, what, NULL);
		return -1;
	}
	ifa->ifa_family = AF_INET;
	ifa->ifa_prefixlen = (unsigned char)plen;
	ifa->ifa_scope = RT_SCOPE_UNIVERSE;
	ifa->ifa_index = ifindex;
	/* on a broadcast link LOCAL is our address, ADDRESS the same */
	mnl_attr_put_u32(nlh, IFA_LOCAL, addr);
	mnl_attr_put_u32(nlh, IFA_ADDRESS, addr);
	return transact(nl, NULL, NULL, what, err, errlen);
}

int
gw_nl_neigh_set(struct gw_nl *nl, uint32_t ifindex, uint32_t addr,
    const uint8_t mac[GW_NL_MAC_LEN], char *err, size_t errlen)
{
	struct nlmsghdr *nlh = req_start(nl, RTM_NEWNEIGH,
	    NLM_F_CREATE | NLM_F_REPLACE);
	struct ndmsg *nd = mnl_nlmsg_put_extra_header(nlh, sizeof(*nd));
	char what[80], ip[INET_ADDRSTRLEN];

	inet_ntop(AF_INET, &addr, ip, sizeof(ip));
	snprintf(what, sizeof(what), "neighbour %s on ifindex %u", ip, ifindex);
	nd->ndm_family = AF_INET;
	nd->ndm_ifindex = (int)ifindex;
	nd->ndm_state = NUD_PERMANENT;
	nd->ndm_type = RTN_UNICAST;
	mnl_attr_put_u32(nlh, NDA_DST, addr);
	mnl_attr_put(nlh, NDA_LLADDR, GW_NL_MAC_LEN, mac);
	return transact(nl, NULL, NULL, what, err, errlen);
}

int
gw_nl_route_add_default(struct gw_nl *nl, uint32_t ifindex, uint32_t gateway,
    char *err, size_t errlen)
{
	struct nlmsghdr *nlh = req_start(nl, RTM_NEWROUTE,
	    NLM_F_CREATE | NLM_F_EXCL);
	struct rtmsg *rtm = mnl_nlmsg_put_extra_header(nlh, sizeof(*rtm));
	char what[80], ip[INET_ADDRSTRLEN];

	inet_ntop(AF_INET, &gateway, ip, sizeof(ip));
	snprintf(what, sizeof(what), "add default route via %s dev ifindex %u",
	    ip, ifindex);
	rtm->rtm_family = AF_INET;
	rtm->rtm_dst_len = 0;
	rtm->rtm_table = RT_TABLE_MAIN;
	rtm->rtm_protocol = RTPROT_BOOT;	/* what `ip route add` says */
	rtm->rtm_scope = RT_SCOPE_UNIVERSE;
	rtm->rtm_type = RTN_UNICAST;
	mnl_attr_put_u32(nlh, RTA_GATEWAY, gateway);
	mnl_attr_put_u32(nlh, RTA_OIF, ifindex);
	return transact(nl, NULL, NULL, what, err, errlen);
}

struct links_walk {
	gw_nl_link_cb	 cb;
	void		*arg;
};

static int
ifname_cb(const struct nlattr *attr, void *data)
{
	const char **name = data;

	if (mnl_attr_get_type(attr) == IFLA_IFNAME &&
	    mnl_attr_validate(attr, MNL_TYPE_NUL_STRING) == 0)
		*name = mnl_attr_get_str(attr);
	return MNL_CB_OK;
}

static int
links_cb(const struct nlmsghdr *nlh, void *arg)
{
	struct links_walk *w = arg;
	const struct ifinfomsg *ifi;
	const char *name = NULL;

	if (nlh->nlmsg_type != RTM_NEWLINK ||
	    mnl_nlmsg_get_payload_len(nlh) < sizeof(*ifi))
		return 0;
	ifi = mnl_nlmsg_get_payload(nlh);
	(void)mnl_attr_parse(nlh, sizeof(*ifi), ifname_cb, &name);
	if (name != NULL && ifi->ifi_index > 0)
		w->cb((uint32_t)ifi->ifi_index, name, w->arg);
	return 0;
}

int
gw_nl_links(struct gw_nl *nl, gw_nl_link_cb cb, void *arg, char *err,
    size_t errlen)
{
	struct nlmsghdr *nlh = req_start(nl, RTM_GETLINK, NLM_F_DUMP);
	struct links_walk w = { cb, arg };

	put_ifinfo(nlh, 0);
	mnl_attr_put_u32(nlh, IFLA_EXT_MASK, RTEXT_FILTER_SKIP_STATS);
	return transact(nl, links_cb, &w, "list interfaces", err, errlen);
}

struct addrs_walk {
	gw_nl_addr_cb	 cb;
	void		*arg;
	bool		 broadcast;
};

static int
addr_attr_cb(const struct nlattr *attr, void *data)
{
	const struct nlattr **tb = data;
	int type = mnl_attr_get_type(attr);

	if ((type == IFA_LOCAL || type == IFA_ADDRESS ||
	    type == IFA_BROADCAST) &&
	    mnl_attr_validate(attr, MNL_TYPE_U32) == 0)
		tb[type] = attr;
	return MNL_CB_OK;
}

static int
addrs_cb(const struct nlmsghdr *nlh, void *arg)
{
	struct addrs_walk *w = arg;
	const struct nlattr *tb[IFA_MAX + 1] = { NULL };
	const struct ifaddrmsg *ifa;
	const struct nlattr *a;

	if (nlh->nlmsg_type != RTM_NEWADDR ||
	    mnl_nlmsg_get_payload_len(nlh) < sizeof(*ifa))
		return 0;
	ifa = mnl_nlmsg_get_payload(nlh);
	if (ifa->ifa_family != AF_INET)
		return 0;
	(void)mnl_attr_parse(nlh, sizeof(*ifa), addr_attr_cb, tb);
	/* IFA_LOCAL is the address itself; IFA_ADDRESS is the peer's on a
	 * point-to-point link, and the same as IFA_LOCAL elsewhere */
	if ((a = tb[IFA_LOCAL] != NULL ? tb[IFA_LOCAL] : tb[IFA_ADDRESS]) == NULL)
		return 0;
	w->cb(mnl_attr_get_u32(a), w->arg);
	if (!w->broadcast)
		return 0;
	if (tb[IFA_BROADCAST] != NULL &&
	    mnl_attr_get_u32(tb[IFA_BROADCAST]) != 0 &&
	    mnl_attr_get_u32(tb[IFA_BROADCAST]) != 0xffffffffu)
		w->cb(mnl_attr_get_u32(tb[IFA_BROADCAST]), w->arg);
	if (ifa->ifa_prefixlen > 0 && ifa->ifa_prefixlen < 31) {
		uint32_t mask = htonl(~0u << (32 - ifa->ifa_prefixlen));
		uint32_t net = mnl_attr_get_u32(a) & mask;

		w->cb(net | ~mask, w->arg);
		w->cb(net, w->arg);
	}
	return 0;
}

int
gw_nl_addrs(struct gw_nl *nl, bool broadcast, gw_nl_addr_cb cb, void *arg,
    char *err, size_t errlen)
{
	struct nlmsghdr *nlh = req_start(nl, RTM_GETADDR, NLM_F_DUMP);
	struct ifaddrmsg *ifa;
	struct addrs_walk w = { cb, arg, broadcast };

	ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));
	ifa->ifa_family = AF_INET;
	return transact(nl, addrs_cb, &w, "list addresses", err, errlen);
}
