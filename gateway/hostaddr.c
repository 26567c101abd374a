/* hostaddr.c: the host's own addresses, never a sandbox's destination with the uplink through the host. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <libmnl/libmnl.h>
#include <linux/rtnetlink.h>

#include "gateway/gw.h"
#include "gateway/log.h"
#include "gateway/nl.h"

/*
 * Without --uplink-netns the gateway's uplink is a veth into the host,
 * and a packet a sandbox sends to any address of the host (its public
 * one, a bridge's) is delivered to the host's own sockets rather than
 * forwarded. The host's INPUT chain drops those (netns.c, host_input):
 * that is the boundary. This is for the verdict to say so too: a policy
 * whose range covers the host's address would otherwise log an allow
 * for a connection the host then drops. So the host's IPv4 addresses
 * are kept, sorted (gw_decide looks them up), read again whenever the kernel
 * says one came or went (RTNLGRP_IPV4_IFADDR, on a socket opened in the
 * host's namespace, which it keeps). 127/8 is left out: the kernel
 * drops a loopback destination that comes in on a veth as martian.
 * The broadcast addresses of the host's networks are kept too: a
 * datagram to one is the host's as well (delivered to its sockets bound
 * to the wildcard address), and audit mode lets UDP through, DNS
 * included; the host's chain let port 53 on, and a sandbox in audit mode
 * reached a DNS server listening on the host (found by review,
 * 2026-12-03: adversarial 37).
 */

#define HOSTADDR_MAX	1024	/* beyond: the rest is the INPUT chain's */

struct gw_hostaddrs {
	struct gw_nl		*nl;	/* dumps, in the host's namespace */
	struct mnl_socket	*ev;	/* its address events */
	size_t			 n;
	bool			 over;	/* more than HOSTADDR_MAX */
	uint32_t		 a[HOSTADDR_MAX];
};

static int
cmp_addr(const void *x, const void *y)
{
	uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;

	return a < b ? -1 : a > b;
}

static void
add_addr(uint32_t addr, void *arg)
{
	struct gw_hostaddrs *h = arg;

	if ((ntohl(addr) >> 24) == 127)
		return;
	if (h->n == HOSTADDR_MAX) {
		h->over = true;
		return;
	}
	h->a[h->n++] = addr;
}

/* Reads the host's addresses again; on failure the old list stays. */
static void
refresh(struct gw *gw)
{
	struct gw_hostaddrs *h = gw->hostaddrs, tmp;
	char err[512];
	int tries;

	for (tries = 0; tries < 3; tries++) {
		tmp.n = 0;
		tmp.over = false;
		if (gw_nl_addrs(h->nl, true, add_addr, &tmp, err,
		    sizeof(err)) == 0)
			break;
		if (errno != EAGAIN || tries == 2) {
			log_warnx("host addresses: %s (the last list stays)",
			    err);
			return;
		}
	}
	qsort(tmp.a, tmp.n, sizeof(tmp.a[0]), cmp_addr);
	if (tmp.over && !h->over)
		log_warnx("host addresses: more than %d; the rest are refused "
		    "by the host's INPUT chain only", HOSTADDR_MAX);
	memcpy(h->a, tmp.a, tmp.n * sizeof(tmp.a[0]));
	h->n = tmp.n;
	h->over = tmp.over;
}

int
gw_hostaddrs_open(struct gw *gw, char *err, size_t errlen)
{
	struct gw_hostaddrs *h;

	if (gw->cfg.uplink_netns != NULL)
		return 0;		/* the uplink is not the host */
	if ((h = calloc(1, sizeof(*h))) == NULL) {
		snprintf(err, errlen, "host addresses: out of memory");
		return -1;
	}
	/* both sockets belong to the namespace they are opened in: the
	 * calling thread is in the host's (sluiced.c) */
	if ((h->nl = gw_nl_open(err, errlen)) == NULL)
		goto fail;
	if ((h->ev = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC |
	    SOCK_NONBLOCK)) == NULL ||
	    mnl_socket_bind(h->ev, RTMGRP_IPV4_IFADDR, MNL_SOCKET_AUTOPID) ==
	    -1) {
		snprintf(err, errlen, "host addresses: rtnetlink events: %s",
		    strerror(errno));
		goto fail;
	}
	gw->hostaddrs = h;
	refresh(gw);
	return 0;
fail:
	if (h->ev != NULL)
		mnl_socket_close(h->ev);
	gw_nl_close(h->nl);
	free(h);
	return -1;
}

int
gw_hostaddrs_fd(const struct gw *gw)
{
	return gw->hostaddrs != NULL ? mnl_socket_get_fd(gw->hostaddrs->ev) : -1;
}

void
gw_hostaddrs_read(struct gw *gw)
{
	char buf[8192];
	ssize_t n;
	int i;

	if (gw->hostaddrs == NULL)
		return;
	/* what changed does not matter: the list is read again whole (an
	 * overrun, ENOBUFS, the same) */
	for (i = 0; i < 64; i++) {
		n = mnl_socket_recvfrom(gw->hostaddrs->ev, buf, sizeof(buf));
		if (n == -1 && errno != ENOBUFS)
			break;
	}
	refresh(gw);
}

const uint32_t *
gw_hostaddrs_list(const struct gw *gw, size_t *n)
{
	*n = gw->hostaddrs != NULL ? gw->hostaddrs->n : 0;
	return gw->hostaddrs != NULL ? gw->hostaddrs->a : NULL;
}

void
gw_hostaddrs_close(struct gw *gw)
{
	struct gw_hostaddrs *h = gw->hostaddrs;

	if (h == NULL)
		return;
	mnl_socket_close(h->ev);
	gw_nl_close(h->nl);
	free(h);
	gw->hostaddrs = NULL;
}
