/* resolver.c: the resolver's sockets — listeners, upstream queries, TCP framing. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dns/dns.h"

enum slot_kind { K_UDP, K_TCP_LISTEN, K_CONN, K_PENDING };

struct pending {
	bool			 used;
	struct dns_request	 req;
	int			 fd;		/* upstream socket, -1 if none */
	uint16_t		 upid;		/* the id sent upstream */
	unsigned		 attempt;	/* which upstream is asked now */
	uint64_t		 deadline;
	int			 conn;		/* TCP client slot, -1 for UDP */
	uint32_t		 conn_gen;
};

struct conn {
	bool		 used;
	bool		 busy;		/* its query is upstream */
	bool		 closing;	/* the client finished sending */
	int		 fd;
	uint32_t	 gen;
	uint32_t	 ifindex, local, peer;
	uint16_t	 peer_port;
	uint64_t	 idle_deadline;
	size_t		 inlen, outlen, outoff;
	uint8_t		 in[2 + DNS_TCP_MSG_MAX];
	uint8_t		 out[2 + DNS_TCP_MSG_MAX];
};

struct slot_ref {
	enum slot_kind	 kind;
	int		 index;
};

struct dns_resolver {
	int				 udp_fd;
	int				 tcp_fd;
	uint32_t			 up[DNS_UPSTREAM_MAX];
	size_t				 nup;
	const struct dns_resolver_ops	*ops;
	void				*arg;
	struct pending			*pend;		/* DNS_PENDING_MAX */
	struct conn			*conns;		/* DNS_TCP_MAX */
	struct slot_ref			 map[2 + DNS_TCP_MAX + DNS_PENDING_MAX];
	size_t				 nmap;
	uint64_t			 now;
	uint32_t			 next_gen;
	struct dns_resolver_stats	 st;
	struct dns_response		 resp;		/* one parsed response */
	struct dns_request		 scratch;	/* a query being handled */
	uint8_t				 buf[65536];	/* receive and build */
};

static void
set_err(char *err, size_t errlen, const char *what)
{
	snprintf(err, errlen, "%s: %s", what, strerror(errno));
}

static int
listener(int type, uint32_t addr, uint16_t port, char *err, size_t errlen)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(port),
	    .sin_addr.s_addr = addr };
	int fd, on = 1;

	fd = socket(AF_INET, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd == -1) {
		set_err(err, errlen, "socket");
		return -1;
	}
	/*
	 * IP_PKTINFO: the interface a query came in on is the sandbox's
	 * identity. On a TCP listener it is inherited by accepted sockets,
	 * whose IP_PKTOPTIONS then report the ingress interface.
	 */
	/* A burst of queries from many sandboxes must not overflow the
	 * default (~208 KiB) buffer: the kernel would drop them unanswered
	 * and unlogged. Forced past rmem_max when we may, else best effort. */
	if (type == SOCK_DGRAM) {
		int big = 4 << 20;

		if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &big,
		    sizeof(big)) == -1)
			(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &big,
			    sizeof(big));
	}
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on)) == -1 ||
	    setsockopt(fd, IPPROTO_IP, IP_PKTINFO, &on, sizeof(on)) == -1 ||
	    bind(fd, (struct sockaddr *)&sin, sizeof(sin)) == -1 ||
	    (type == SOCK_STREAM && listen(fd, 128) == -1)) {
		set_err(err, errlen, type == SOCK_STREAM ? "tcp/53" : "udp/53");
		close(fd);
		return -1;
	}
	return fd;
}

struct dns_resolver *
dns_resolver_open(uint32_t addr, uint16_t port, const uint32_t *upstreams,
    size_t nupstreams, const struct dns_resolver_ops *ops, void *arg,
    char *err, size_t errlen)
{
	struct dns_resolver *r;
	size_t i;

	if (nupstreams > DNS_UPSTREAM_MAX) {
		snprintf(err, errlen, "at most %d upstream resolvers",
		    DNS_UPSTREAM_MAX);
		return NULL;
	}
	if ((r = calloc(1, sizeof(*r))) == NULL ||
	    (r->pend = calloc(DNS_PENDING_MAX, sizeof(*r->pend))) == NULL ||
	    (r->conns = calloc(DNS_TCP_MAX, sizeof(*r->conns))) == NULL) {
		snprintf(err, errlen, "out of memory");
		if (r != NULL)
			free(r->pend);
		free(r);
		return NULL;
	}
	r->udp_fd = r->tcp_fd = -1;
	for (i = 0; i < DNS_PENDING_MAX; i++)
		r->pend[i].fd = -1;
	for (i = 0; i < DNS_TCP_MAX; i++)
		r->conns[i].fd = -1;
	memcpy(r->up, upstreams, nupstreams * sizeof(*upstreams));
	r->nup = nupstreams;
	r->ops = ops;
	r->arg = arg;
	if ((r->udp_fd = listener(SOCK_DGRAM, addr, port, err, errlen)) == -1 ||
	    (r->tcp_fd = listener(SOCK_STREAM, addr, port, err, errlen)) == -1) {
		dns_resolver_close(r);
		return NULL;
	}
	return r;
}

/* ---- answering ---------------------------------------------------------- */

static size_t
answer_limit(const struct dns_request *req)
{
	if (req->tcp)
		return DNS_TCP_MSG_MAX;
	if (!req->q.edns)
		return DNS_UDP_PLAIN;
	return req->q.udp_size < DNS_EDNS_SIZE ? req->q.udp_size : DNS_EDNS_SIZE;
}

static void
udp_send(struct dns_resolver *r, const struct dns_request *req,
    const uint8_t *msg, size_t len)
{
	struct sockaddr_in to = { .sin_family = AF_INET,
	    .sin_port = htons(req->src_port), .sin_addr.s_addr = req->src_addr };
	union {
		struct cmsghdr	align;
		char		buf[CMSG_SPACE(sizeof(struct in_pktinfo))];
	} c;
	struct iovec iov = { .iov_base = (void *)msg, .iov_len = len };
	struct msghdr mh = { .msg_name = &to, .msg_namelen = sizeof(to),
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = c.buf,
	    .msg_controllen = sizeof(c.buf) };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
	struct in_pktinfo pi;

	/* answer from the address the query was sent to */
	memset(&pi, 0, sizeof(pi));
	pi.ipi_spec_dst.s_addr = req->dst_addr;
	cm->cmsg_level = IPPROTO_IP;
	cm->cmsg_type = IP_PKTINFO;
	cm->cmsg_len = CMSG_LEN(sizeof(pi));
	memcpy(CMSG_DATA(cm), &pi, sizeof(pi));
	if (sendmsg(r->udp_fd, &mh, MSG_DONTWAIT) == -1)
		r->st.dropped++;
}

static void conn_close(struct dns_resolver *r, int i);

static void
conn_queue(struct dns_resolver *r, int i, const uint8_t *msg, size_t len)
{
	struct conn *c = &r->conns[i];

	/* one answer at a time: the next query is read only after it left */
	if (len > DNS_TCP_MSG_MAX || c->outlen != c->outoff) {
		r->st.dropped++;
		return;
	}
	c->out[0] = (uint8_t)(len >> 8);
	c->out[1] = (uint8_t)len;
	memcpy(c->out + 2, msg, len);
	c->outoff = 0;
	c->outlen = len + 2;
}

/* Sends the answer (or nothing for rcode < 0) and ends the request. */
static void
reply(struct dns_resolver *r, struct dns_request *req, int conn,
    uint32_t conn_gen, int rcode, const uint8_t *raw, size_t rawlen,
    const struct dns_rr *rr, size_t nrr)
{
	int len = -1;

	if (rcode >= 0) {
		if (req->perr != DNS_PARSE_OK)
			len = dns_write_formerr(r->buf, sizeof(r->buf), raw, rawlen);
		else
			len = dns_write_answer(r->buf, sizeof(r->buf),
			    answer_limit(req), &req->q, (unsigned)rcode, rr, nrr);
	}
	if (len < 0) {
		rcode = -1;
	} else if (conn < 0) {
		udp_send(r, req, r->buf, (size_t)len);
	} else if (r->conns[conn].used && r->conns[conn].gen == conn_gen) {
		conn_queue(r, conn, r->buf, (size_t)len);
	} else {
		rcode = -1;	/* the client went away meanwhile */
	}
	if (rcode >= 0)
		r->st.answered++;
	r->ops->done(r->arg, req, rcode);
	if (conn >= 0 && r->conns[conn].used && r->conns[conn].gen == conn_gen)
		r->conns[conn].busy = false;
}

/* ---- upstream ---------------------------------------------------------- */

static void
pending_free(struct pending *p)
{
	if (p->fd != -1)
		close(p->fd);
	p->fd = -1;
	p->used = false;
}

/* Asks upstream number p->attempt; returns -1 if it could not be asked. */
static int
upstream_ask(struct dns_resolver *r, struct pending *p)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(53) };
	int len;

	if (p->fd != -1)
		close(p->fd);
	/* a fresh socket per question: its source port is as random as the
	 * kernel's ephemeral choice, on top of the random id */
	p->fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (p->fd == -1)
		return -1;
	sin.sin_addr.s_addr = r->up[p->attempt];
	if (getrandom(&p->upid, sizeof(p->upid), 0) != sizeof(p->upid))
		p->upid ^= (uint16_t)(r->now * 2654435761u);
	len = dns_write_query(r->buf, sizeof(r->buf), p->upid, p->req.name,
	    p->req.q.qtype, p->req.q.qclass);
	if (len < 0 ||
	    connect(p->fd, (struct sockaddr *)&sin, sizeof(sin)) == -1 ||
	    send(p->fd, r->buf, (size_t)len, 0) != len)
		return -1;
	p->deadline = r->now + DNS_UPSTREAM_TRY_MS;
	return 0;
}

/* Tries the next upstream, or gives up with the caller's verdict. */
static void
upstream_next(struct dns_resolver *r, struct pending *p)
{
	unsigned rcode = DNS_R_SERVFAIL;

	while (++p->attempt < r->nup)
		if (upstream_ask(r, p) == 0)
			return;
	r->st.upstream_timeouts++;
	r->ops->response(r->arg, &p->req, NULL, &rcode);
	reply(r, &p->req, p->conn, p->conn_gen, (int)rcode, NULL, 0, NULL, 0);
	pending_free(p);
}

static void
upstream_read(struct dns_resolver *r, struct pending *p)
{
	unsigned rcode;
	ssize_t n;
	int budget = 8;

	while (budget-- > 0 && p->used) {
		n = recv(p->fd, r->buf, sizeof(r->buf), MSG_DONTWAIT);
		if (n < 0) {
			/* an ICMP error (refused, unreachable): this upstream
			 * will not answer, ask the next one now */
			if (errno != EAGAIN && errno != EWOULDBLOCK &&
			    errno != EINTR)
				upstream_next(r, p);
			return;
		}
		if (dns_parse_response(r->buf, (size_t)n, &r->resp) != DNS_PARSE_OK ||
		    r->resp.id != p->upid || r->resp.qtype != p->req.q.qtype ||
		    r->resp.qclass != p->req.q.qclass ||
		    !dns_name_equal(r->resp.qname, p->req.name)) {
			/* not the answer to our question: keep waiting */
			r->st.mismatched++;
			continue;
		}
		rcode = r->resp.rcode;
		r->ops->response(r->arg, &p->req, &r->resp, &rcode);
		reply(r, &p->req, p->conn, p->conn_gen, (int)rcode, NULL, 0,
		    r->resp.rr, r->resp.nrr);
		pending_free(p);
	}
}

/* ---- queries ----------------------------------------------------------- */

static void
handle_query(struct dns_resolver *r, struct dns_request *req,
    const uint8_t *msg, size_t len, int conn)
{
	enum dns_action act;
	unsigned rcode = DNS_R_SERVFAIL;
	uint32_t gen = conn >= 0 ? r->conns[conn].gen : 0;
	size_t i;

	r->st.queries++;
	req->perr = dns_parse_query(msg, len, &req->q);
	req->name_ok = req->perr == DNS_PARSE_OK &&
	    dns_name_normalize(req->q.qname, strlen(req->q.qname), req->name,
	    NULL);
	if (!req->name_ok)
		req->name[0] = '\0';
	if (req->perr != DNS_PARSE_OK)
		r->st.malformed++;
	act = r->ops->query(r->arg, req, &rcode);
	if (req->perr != DNS_PARSE_OK) {
		reply(r, req, conn, gen, act == DNS_DROP ? -1 : DNS_R_FORMERR,
		    msg, len, NULL, 0);
		return;
	}
	if (act == DNS_DROP) {
		reply(r, req, conn, gen, -1, NULL, 0, NULL, 0);
		return;
	}
	if (act == DNS_ANSWER || !req->name_ok) {
		reply(r, req, conn, gen, (int)rcode, NULL, 0, NULL, 0);
		return;
	}
	for (i = 0; i < DNS_PENDING_MAX && r->pend[i].used; i++)
		;
	if (i == DNS_PENDING_MAX || r->nup == 0) {
		/* no room for another question in flight: fail, never wait */
		rcode = DNS_R_SERVFAIL;
		r->ops->response(r->arg, req, NULL, &rcode);
		reply(r, req, conn, gen, (int)rcode, NULL, 0, NULL, 0);
		return;
	}
	r->pend[i].used = true;
	r->pend[i].req = *req;
	r->pend[i].attempt = 0;
	r->pend[i].conn = conn;
	r->pend[i].conn_gen = gen;
	r->st.forwarded++;
	if (conn >= 0)
		r->conns[conn].busy = true;
	if (upstream_ask(r, &r->pend[i]) == -1)
		upstream_next(r, &r->pend[i]);
}

static void
udp_read(struct dns_resolver *r)
{
	struct dns_request *req = &r->scratch;
	int budget = 64;

	while (budget-- > 0) {
		struct sockaddr_in from;
		union {
			struct cmsghdr	align;
			char		buf[CMSG_SPACE(sizeof(struct in_pktinfo))];
		} c;
		struct iovec iov = { .iov_base = r->buf, .iov_len = sizeof(r->buf) };
		struct msghdr mh = { .msg_name = &from,
		    .msg_namelen = sizeof(from), .msg_iov = &iov, .msg_iovlen = 1,
		    .msg_control = c.buf, .msg_controllen = sizeof(c.buf) };
		struct cmsghdr *cm;
		uint8_t msg[DNS_TCP_MSG_MAX];
		ssize_t n;

		n = recvmsg(r->udp_fd, &mh, MSG_DONTWAIT);
		if (n < 0)
			return;
		memset(req, 0, offsetof(struct dns_request, user));
		req->src_addr = from.sin_addr.s_addr;
		req->src_port = ntohs(from.sin_port);
		for (cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
			struct in_pktinfo pi;

			if (cm->cmsg_level != IPPROTO_IP ||
			    cm->cmsg_type != IP_PKTINFO)
				continue;
			memcpy(&pi, CMSG_DATA(cm), sizeof(pi));
			req->ifindex = (uint32_t)pi.ipi_ifindex;
			req->dst_addr = pi.ipi_addr.s_addr;
		}
		/* a query longer than any we handle is malformed: parse a
		 * prefix so its id can still be answered */
		if ((size_t)n > sizeof(msg))
			n = sizeof(msg);
		memcpy(msg, r->buf, (size_t)n);
		handle_query(r, req, msg, (size_t)n, -1);
	}
}

/* ---- TCP clients ------------------------------------------------------- */

static void
conn_close(struct dns_resolver *r, int i)
{
	struct conn *c = &r->conns[i];

	if (c->fd != -1)
		close(c->fd);
	c->fd = -1;
	c->used = false;
}

static void
tcp_accept(struct dns_resolver *r)
{
	int budget = 16;

	while (budget-- > 0) {
		struct sockaddr_in peer, local;
		socklen_t plen = sizeof(peer), llen = sizeof(local);
		char opts[256];
		socklen_t olen = sizeof(opts);
		struct msghdr mh;
		struct cmsghdr *cm;
		struct conn *c = NULL;
		int fd, i;

		fd = accept4(r->tcp_fd, (struct sockaddr *)&peer, &plen,
		    SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd == -1)
			return;
		for (i = 0; i < DNS_TCP_MAX; i++)
			if (!r->conns[i].used) {
				c = &r->conns[i];
				break;
			}
		if (c == NULL || getsockname(fd, (struct sockaddr *)&local,
		    &llen) == -1) {
			r->st.dropped++;
			close(fd);
			continue;
		}
		memset(c, 0, offsetof(struct conn, in));
		c->used = true;
		c->fd = fd;
		c->gen = ++r->next_gen;
		c->peer = peer.sin_addr.s_addr;
		c->peer_port = ntohs(peer.sin_port);
		c->local = local.sin_addr.s_addr;
		c->idle_deadline = r->now + DNS_TCP_IDLE_MS;
		/* the ingress interface of the connection, from the pktinfo
		 * the listener's IP_PKTINFO made the kernel keep */
		memset(&mh, 0, sizeof(mh));
		if (getsockopt(fd, IPPROTO_IP, IP_PKTOPTIONS, opts, &olen) == 0) {
			mh.msg_control = opts;
			mh.msg_controllen = olen;
			for (cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
				struct in_pktinfo pi;

				if (cm->cmsg_level != IPPROTO_IP ||
				    cm->cmsg_type != IP_PKTINFO)
					continue;
				memcpy(&pi, CMSG_DATA(cm), sizeof(pi));
				c->ifindex = (uint32_t)pi.ipi_ifindex;
			}
		}
		r->st.tcp_conns++;
	}
}

static void
conn_process(struct dns_resolver *r, int i)
{
	struct conn *c = &r->conns[i];
	struct dns_request *req = &r->scratch;
	uint8_t msg[DNS_TCP_MSG_MAX];
	size_t mlen;

	while (c->used && !c->busy && c->outlen == c->outoff && c->inlen >= 2) {
		mlen = (size_t)c->in[0] << 8 | c->in[1];
		if (mlen > DNS_TCP_MSG_MAX || mlen == 0) {
			conn_close(r, i);
			return;
		}
		if (c->inlen < mlen + 2)
			return;
		memset(req, 0, offsetof(struct dns_request, user));
		req->tcp = true;
		req->ifindex = c->ifindex;
		req->src_addr = c->peer;
		req->src_port = c->peer_port;
		req->dst_addr = c->local;
		/* copy out: handling may queue an answer into this conn */
		memcpy(msg, c->in + 2, mlen);
		memmove(c->in, c->in + 2 + mlen, c->inlen - 2 - mlen);
		c->inlen -= 2 + mlen;
		handle_query(r, req, msg, mlen, i);
	}
}

static void
conn_io(struct dns_resolver *r, int i, short revents)
{
	struct conn *c = &r->conns[i];
	ssize_t n;

	if (revents & POLLOUT && c->outoff < c->outlen) {
		n = write(c->fd, c->out + c->outoff, c->outlen - c->outoff);
		if (n > 0)
			c->outoff += (size_t)n;
		else if (n < 0 && errno != EAGAIN && errno != EINTR) {
			conn_close(r, i);
			return;
		}
	}
	if (revents & (POLLIN | POLLHUP | POLLERR) && !c->closing &&
	    c->inlen < sizeof(c->in)) {
		n = read(c->fd, c->in + c->inlen, sizeof(c->in) - c->inlen);
		if (n > 0) {
			c->inlen += (size_t)n;
			c->idle_deadline = r->now + DNS_TCP_IDLE_MS;
		} else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
			c->closing = true;
		}
	}
	conn_process(r, i);
	if (c->used && c->closing && !c->busy && c->outoff == c->outlen)
		conn_close(r, i);
}

/* ---- the loop ---------------------------------------------------------- */

size_t
dns_resolver_pollfds(struct dns_resolver *r, struct pollfd *pfd, size_t max)
{
	size_t n = 0;
	int i;

	r->nmap = 0;
	if (max < 2)
		return 0;
	pfd[n] = (struct pollfd){ .fd = r->udp_fd, .events = POLLIN };
	r->map[n++] = (struct slot_ref){ K_UDP, 0 };
	pfd[n] = (struct pollfd){ .fd = r->tcp_fd, .events = POLLIN };
	r->map[n++] = (struct slot_ref){ K_TCP_LISTEN, 0 };
	for (i = 0; i < DNS_TCP_MAX && n < max; i++) {
		struct conn *c = &r->conns[i];

		if (!c->used)
			continue;
		pfd[n] = (struct pollfd){ .fd = c->fd,
		    .events = (short)((c->closing ? 0 : POLLIN) |
		    (c->outoff < c->outlen ? POLLOUT : 0)) };
		r->map[n++] = (struct slot_ref){ K_CONN, i };
	}
	for (i = 0; i < DNS_PENDING_MAX && n < max; i++) {
		if (!r->pend[i].used || r->pend[i].fd == -1)
			continue;
		pfd[n] = (struct pollfd){ .fd = r->pend[i].fd, .events = POLLIN };
		r->map[n++] = (struct slot_ref){ K_PENDING, i };
	}
	r->nmap = n;
	return n;
}

void
dns_resolver_process(struct dns_resolver *r, const struct pollfd *pfd,
    size_t n, uint64_t now_ms)
{
	size_t k;
	int i;

	r->now = now_ms;
	for (k = 0; k < n && k < r->nmap; k++) {
		if (pfd[k].revents == 0)
			continue;
		i = r->map[k].index;
		switch (r->map[k].kind) {
		case K_UDP:
			udp_read(r);
			break;
		case K_TCP_LISTEN:
			tcp_accept(r);
			break;
		case K_CONN:
			if (r->conns[i].used && r->conns[i].fd == pfd[k].fd)
				conn_io(r, i, pfd[k].revents);
			break;
		case K_PENDING:
			if (r->pend[i].used && r->pend[i].fd == pfd[k].fd)
				upstream_read(r, &r->pend[i]);
			break;
		}
	}
	r->nmap = 0;
	for (i = 0; i < DNS_PENDING_MAX; i++)
		if (r->pend[i].used && r->pend[i].deadline <= now_ms)
			upstream_next(r, &r->pend[i]);
	for (i = 0; i < DNS_TCP_MAX; i++) {
		struct conn *c = &r->conns[i];

		if (c->used && !c->busy && c->idle_deadline <= now_ms)
			conn_close(r, i);
		else if (c->used)
			conn_process(r, i);
	}
}

int
dns_resolver_timeout(const struct dns_resolver *r, uint64_t now_ms)
{
	uint64_t next = UINT64_MAX;
	int i;

	for (i = 0; i < DNS_PENDING_MAX; i++)
		if (r->pend[i].used && r->pend[i].deadline < next)
			next = r->pend[i].deadline;
	for (i = 0; i < DNS_TCP_MAX; i++)
		if (r->conns[i].used && r->conns[i].idle_deadline < next)
			next = r->conns[i].idle_deadline;
	if (next == UINT64_MAX)
		return -1;
	return next <= now_ms ? 0 : (int)(next - now_ms);
}

void
dns_resolver_stats(const struct dns_resolver *r, struct dns_resolver_stats *out)
{
	*out = r->st;
}

void
dns_resolver_close(struct dns_resolver *r)
{
	int i;

	if (r == NULL)
		return;
	for (i = 0; r->pend != NULL && i < DNS_PENDING_MAX; i++)
		if (r->pend[i].used) {
			r->ops->done(r->arg, &r->pend[i].req, -1);
			pending_free(&r->pend[i]);
		}
	for (i = 0; r->conns != NULL && i < DNS_TCP_MAX; i++)
		if (r->conns[i].used)
			conn_close(r, i);
	if (r->udp_fd != -1)
		close(r->udp_fd);
	if (r->tcp_fd != -1)
		close(r->tcp_fd);
	free(r->pend);
	free(r->conns);
	free(r);
}
