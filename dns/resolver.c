/* resolver.c: the resolver's sockets — listeners, upstream queries, TCP framing. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/errqueue.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/ip_icmp.h>
#include <poll.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dns/dns.h"

/*
 * Upstream questions leave through a small pool of long-lived UDP sockets
 * per upstream, each on its own port of the kernel's random ephemeral
 * choice and connected to its upstream (the kernel then drops datagrams
 * from anyone else, and routes both ways from the socket's cache). A
 * forged answer still has to hit one (port, id) pair of a question in
 * flight, as with a socket per question, without a socket, a connect and
 * a conntrack entry per question. A socket takes between UPSOCK_USES and
 * twice as many questions (or lives UPSOCK_AGE_MS to twice that), then
 * takes no more and is closed when its last question is over, so that a
 * port an observer may have learnt (the ICMP side channels of "SAD DNS")
 * soon leads nowhere; the bounds are drawn at random per socket so that a
 * pool does not turn over at once. Sockets are opened when first needed.
 */
#define UPSOCK_PER_UP	8
#define UPSOCK_N	(DNS_UPSTREAM_MAX * UPSOCK_PER_UP)
#define UPSOCK_USES	2048
#define UPSOCK_AGE_MS	30000

/* Datagrams per recvmmsg and answers per sendmmsg. A receive buffer is
 * as large as any datagram so nothing is cut short; its pages are only
 * touched as far as datagrams reach. */
#define RX_BATCH	16
#define RX_BUF		65536
#define RX_BATCHES	4	/* per readable socket and loop turn */
#define TX_BATCH	32
#define TX_BUF		DNS_EDNS_SIZE	/* the largest UDP answer written */

#define NONE		(-1)

/*
 * Client connections: DNS_TCP_MAX served, then DNS_TCP_REFUSE_MAX whose
 * queries are refused, then one more, used and closed within one accept,
 * for a connection that finds every other slot taken.
 */
#define CONN_N		(DNS_TCP_MAX + DNS_TCP_REFUSE_MAX + 1)
#define CONN_SPARE	(CONN_N - 1)

enum slot_kind { K_UDP, K_TCP_LISTEN, K_CONN, K_UPSTREAM };

struct pending {
	bool			 used;
	struct dns_request	 req;
	int			 sock;		/* upstream socket asked, NONE */
	uint16_t		 upid;		/* the id sent upstream */
	unsigned		 attempt;	/* which upstream is asked now */
	uint64_t		 deadline;
	int			 conn;		/* TCP client slot, -1 for UDP */
	uint32_t		 conn_gen;
	int			 prev, next;	/* deadline list; free list */
};

struct upsock {
	int		 fd;		/* -1: closed, opened when needed */
	uint32_t	 addr;		/* the upstream it is connected to */
	uint32_t	 gen;		/* counts openings of this slot */
	bool		 retiring;	/* takes no new questions */
	uint32_t	 npending;
	uint32_t	 uses, max_uses;
	uint64_t	 retire_at;
};

struct conn {
	bool		 used;
	bool		 busy;		/* its query is upstream */
	bool		 closing;	/* the client finished sending, or its
					 * framing was lost: no more reads */
	bool		 over_limit;	/* beyond DNS_TCP_MAX: refused */
	uint32_t	 nreq;		/* requests made of its input */
	int		 fd;
	uint32_t	 gen;
	uint32_t	 ifindex, local, peer;
	uint16_t	 peer_port;
	uint64_t	 idle_deadline;	/* closed then, unless busy */
	size_t		 inlen, outlen, outoff;
	uint8_t		 in[2 + DNS_TCP_MSG_MAX];
	uint8_t		 out[2 + DNS_TCP_MSG_MAX];
};

struct slot_ref {
	enum slot_kind	 kind;
	int		 index;
};

union pktinfo_cmsg {
	struct cmsghdr	align;
	char		buf[CMSG_SPACE(sizeof(struct in_pktinfo))];
};

/* What a datagram to the listener comes with: its pktinfo, and the
 * kernel's count of datagrams the socket dropped (SO_RXQ_OVFL). */
union rx_cmsg {
	struct cmsghdr	align;
	char		buf[CMSG_SPACE(sizeof(struct in_pktinfo)) +
			    CMSG_SPACE(sizeof(uint32_t))];
};

/* Receive slots for recvmmsg, on the listener and the upstream sockets. */
struct rx {
	struct mmsghdr		 mm[RX_BATCH];
	struct iovec		 iov[RX_BATCH];
	struct sockaddr_in	 from[RX_BATCH];
	union rx_cmsg		 cmsg[RX_BATCH];
	uint8_t			*buf;		/* RX_BATCH * RX_BUF */
};

/* UDP answers to clients, sent together at the end of a loop turn. */
struct tx {
	struct mmsghdr		 mm[TX_BATCH];
	struct iovec		 iov[TX_BATCH];
	struct sockaddr_in	 to[TX_BATCH];
	union pktinfo_cmsg	 cmsg[TX_BATCH];
	uint8_t			 buf[TX_BATCH][TX_BUF];
	unsigned		 n;
};

struct dns_resolver {
	int				 udp_fd;
	int				 tcp_fd;
	uint32_t			 up[DNS_UPSTREAM_MAX];
	size_t				 nup;
	const struct dns_resolver_ops	*ops;
	void				*arg;
	struct pending			*pend;		/* DNS_PENDING_MAX */
	int				 free_head;	/* unused pending slots */
	int				 due_head, due_tail; /* by deadline */
	struct upsock			 ups[UPSOCK_N];	/* by upstream */
	unsigned			 ups_next[DNS_UPSTREAM_MAX];
	struct conn			*conns;		/* CONN_N */
	size_t				 nconns;
	struct slot_ref			 map[2 + CONN_N + UPSOCK_N];
	size_t				 nmap;
	uint64_t			 now;
	uint32_t			 next_gen;
	struct dns_resolver_stats	 st;
	struct rx			 rx;
	struct tx			 tx;
	uint8_t				 rnd[256];	/* from getrandom */
	size_t				 rnd_off;
	uint16_t			 by_id[65536];	/* upstream id -> slot + 1 */
	struct dns_response		 resp;		/* one parsed response */
	struct dns_cache		*cache;		/* NULL: none */
	size_t				 tcp_per_client;	/* served
						 * connections one ingress
						 * interface may hold; 0: no
						 * bound but DNS_TCP_MAX */
	bool				 paused;	/* UDP queries wait */
	uint32_t			 udp_drops;	/* the kernel's count of
							 * datagrams the listener
							 * dropped, as last seen */
	struct dns_request		 scratch;	/* a query being handled */
	uint8_t				 buf[65536];	/* build */
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
	 * and unlogged. Forced past rmem_max when we may, else best effort.
	 * What still overflows it must at least be counted: SO_RXQ_OVFL
	 * hands each datagram read the socket's count of drops so far. */
	if (type == SOCK_DGRAM) {
		int big = 4 << 20;

		if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &big,
		    sizeof(big)) == -1)
			(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &big,
			    sizeof(big));
		if (setsockopt(fd, SOL_SOCKET, SO_RXQ_OVFL, &on,
		    sizeof(on)) == -1) {
			set_err(err, errlen, "udp/53: SO_RXQ_OVFL");
			close(fd);
			return -1;
		}
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

static void
rx_init(struct rx *x)
{
	int j;

	for (j = 0; j < RX_BATCH; j++) {
		x->iov[j] = (struct iovec){ .iov_base = x->buf + j * RX_BUF,
		    .iov_len = RX_BUF };
		x->mm[j].msg_hdr = (struct msghdr){ .msg_name = &x->from[j],
		    .msg_iov = &x->iov[j], .msg_iovlen = 1 };
	}
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
	    (r->conns = calloc(CONN_N, sizeof(*r->conns))) == NULL ||
	    (r->rx.buf = calloc(RX_BATCH, RX_BUF)) == NULL) {
		snprintf(err, errlen, "out of memory");
		if (r != NULL) {
			free(r->pend);
			free(r->conns);
		}
		free(r);
		return NULL;
	}
	r->udp_fd = r->tcp_fd = -1;
	r->free_head = NONE;
	r->tcp_per_client = DNS_TCP_PER_CLIENT;
	for (i = DNS_PENDING_MAX; i-- > 0; ) {
		r->pend[i].sock = NONE;
		r->pend[i].next = r->free_head;
		r->free_head = (int)i;
	}
	r->due_head = r->due_tail = NONE;
	for (i = 0; i < UPSOCK_N; i++)
		r->ups[i].fd = -1;
	for (i = 0; i < CONN_N; i++)
		r->conns[i].fd = -1;
	r->rnd_off = sizeof(r->rnd);
	rx_init(&r->rx);
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

/* Random bits from the kernel's generator, fetched 256 bytes at a time
 * (at most 256 bytes are never cut short once it is seeded). */
static int
random_bytes(struct dns_resolver *r, void *out, size_t len)
{
	if (sizeof(r->rnd) - r->rnd_off < len) {
		if (getrandom(r->rnd, sizeof(r->rnd), 0) != sizeof(r->rnd))
			return -1;
		r->rnd_off = 0;
	}
	memcpy(out, r->rnd + r->rnd_off, len);
	r->rnd_off += len;
	return 0;
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

/* Sends the queued UDP answers in one sendmmsg where it takes them all;
 * an answer the kernel refuses is counted as dropped and skipped. */
static void
udp_flush(struct dns_resolver *r)
{
	unsigned off = 0;
	int n;

	while (off < r->tx.n) {
		n = sendmmsg(r->udp_fd, r->tx.mm + off, r->tx.n - off,
		    MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			r->st.dropped++;
			off++;
		} else
			off += (unsigned)n;
	}
	r->tx.n = 0;
}

static void
udp_send(struct dns_resolver *r, const struct dns_request *req,
    const uint8_t *msg, size_t len)
{
	struct tx *t = &r->tx;
	struct msghdr *mh;
	struct cmsghdr *cm;
	struct in_pktinfo pi;
	unsigned k;

	if (len > TX_BUF) {	/* not written by dns_write_answer for UDP */
		r->st.dropped++;
		return;
	}
	if (t->n == TX_BATCH)
		udp_flush(r);
	k = t->n++;
	memcpy(t->buf[k], msg, len);
	t->to[k] = (struct sockaddr_in){ .sin_family = AF_INET,
	    .sin_port = htons(req->src_port), .sin_addr.s_addr = req->src_addr };
	t->iov[k] = (struct iovec){ .iov_base = t->buf[k], .iov_len = len };
	mh = &t->mm[k].msg_hdr;
	*mh = (struct msghdr){ .msg_name = &t->to[k],
	    .msg_namelen = sizeof(t->to[k]), .msg_iov = &t->iov[k],
	    .msg_iovlen = 1, .msg_control = t->cmsg[k].buf,
	    .msg_controllen = sizeof(t->cmsg[k].buf) };
	/* answer from the address the query was sent to */
	memset(&pi, 0, sizeof(pi));
	pi.ipi_spec_dst.s_addr = req->dst_addr;
	cm = CMSG_FIRSTHDR(mh);
	cm->cmsg_level = IPPROTO_IP;
	cm->cmsg_type = IP_PKTINFO;
	cm->cmsg_len = CMSG_LEN(sizeof(pi));
	memcpy(CMSG_DATA(cm), &pi, sizeof(pi));
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

/*
 * Sends the answer (or nothing for rcode < 0) and ends the request: with
 * resp's records (NULL: none), and TC if resp is an upstream's truncated
 * NOERROR answer. sluiced asks upstreams over UDP only, so a truncated
 * answer is passed on as such (with what it held, as the caller left
 * it): the client asks again over TCP, and gets no less than that.
 */
static void
reply(struct dns_resolver *r, struct dns_request *req, int conn,
    uint32_t conn_gen, int rcode, const uint8_t *raw, size_t rawlen,
    const struct dns_response *resp)
{
	int len = -1;

	if (rcode >= 0) {
		if (req->perr != DNS_PARSE_OK)
			len = dns_write_formerr(r->buf, sizeof(r->buf), raw, rawlen);
		else
			len = dns_write_answer(r->buf, sizeof(r->buf),
			    answer_limit(req), &req->q, (unsigned)rcode |
			    (resp != NULL && rcode == DNS_R_NOERROR ?
			    (resp->flags & DNS_FLAG_TC) : 0),
			    resp ? resp->rr : NULL, resp ? resp->nrr : 0);
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
	/* idle is time spent waiting on the client: it starts again once
	 * no query is outstanding, so that an answer that took longer than
	 * the idle time is still sent (a refused connection's time is not
	 * idle time: it ends when it ends) */
	if (conn >= 0 && r->conns[conn].used &&
	    r->conns[conn].gen == conn_gen) {
		r->conns[conn].busy = false;
		if (!r->conns[conn].over_limit)
			r->conns[conn].idle_deadline = r->now + DNS_TCP_IDLE_MS;
	}
}

/* ---- upstream sockets --------------------------------------------------- */

static void
upsock_close(struct upsock *u)
{
	if (u->fd != -1)
		close(u->fd);
	u->fd = -1;
	u->retiring = false;
	u->npending = 0;
}

static int
upsock_open(struct dns_resolver *r, struct upsock *u, unsigned up)
{
	struct sockaddr_in any = { .sin_family = AF_INET };
	struct sockaddr_in sin = { .sin_family = AF_INET,
	    .sin_port = htons(53), .sin_addr.s_addr = r->up[up] };
	uint32_t rnd[2];
	int on = 1;

	if (random_bytes(r, rnd, sizeof(rnd)) == -1)
		return -1;
	u->fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (u->fd == -1)
		return -1;
	/*
	 * IP_RECVERR: an ICMP error (port unreachable, say) is queued with
	 * the first bytes of the question that caused it, so the question
	 * it concerns moves on to the next upstream at once; without it a
	 * connected socket only says that some question failed. Port 0: a
	 * random port from the kernel's ephemeral range.
	 */
	if (setsockopt(u->fd, IPPROTO_IP, IP_RECVERR, &on, sizeof(on)) == -1 ||
	    bind(u->fd, (struct sockaddr *)&any, sizeof(any)) == -1 ||
	    connect(u->fd, (struct sockaddr *)&sin, sizeof(sin)) == -1) {
		close(u->fd);
		u->fd = -1;
		return -1;
	}
	u->addr = r->up[up];
	u->gen++;
	u->retiring = false;
	u->npending = 0;
	u->uses = 0;
	u->max_uses = UPSOCK_USES + rnd[0] % UPSOCK_USES;
	u->retire_at = r->now + UPSOCK_AGE_MS + rnd[1] % UPSOCK_AGE_MS;
	return 0;
}

/* The socket for the next question to upstream up, round robin over its
 * pool; -1 if none can be had. */
static int
upsock_pick(struct dns_resolver *r, unsigned up)
{
	struct upsock *u;
	unsigned k, i;

	for (k = 0; k < UPSOCK_PER_UP; k++) {
		i = up * UPSOCK_PER_UP + (r->ups_next[up] + k) % UPSOCK_PER_UP;
		u = &r->ups[i];
		if (u->fd != -1 && (u->uses >= u->max_uses ||
		    r->now >= u->retire_at || u->addr != r->up[up]))
			u->retiring = true;
		if (u->fd != -1 && u->retiring && u->npending == 0)
			upsock_close(u);
		if (u->fd == -1 && upsock_open(r, u, up) == -1)
			continue;
		if (u->retiring)
			continue;
		r->ups_next[up] = (i + 1) % UPSOCK_PER_UP;
		return (int)i;
	}
	/* every open socket still waits for answers: an old one will do,
	 * if it talks to this upstream */
	for (k = 0; k < UPSOCK_PER_UP; k++) {
		u = &r->ups[up * UPSOCK_PER_UP + k];
		if (u->fd != -1 && u->addr == r->up[up])
			return (int)(up * UPSOCK_PER_UP + k);
	}
	return -1;
}

/* ---- questions in flight ----------------------------------------------- */

static void
due_unlink(struct dns_resolver *r, struct pending *p)
{
	if (p->prev != NONE)
		r->pend[p->prev].next = p->next;
	else
		r->due_head = p->next;
	if (p->next != NONE)
		r->pend[p->next].prev = p->prev;
	else
		r->due_tail = p->prev;
	p->prev = p->next = NONE;
}

/* Every deadline is now + DNS_UPSTREAM_TRY_MS with now never going back,
 * so appending keeps the list in deadline order. */
static void
due_append(struct dns_resolver *r, struct pending *p)
{
	int i = (int)(p - r->pend);

	p->next = NONE;
	p->prev = r->due_tail;
	if (r->due_tail != NONE)
		r->pend[r->due_tail].next = i;
	else
		r->due_head = i;
	r->due_tail = i;
}

/* Forgets the question p has upstream, if any: its id, socket, deadline. */
static void
pending_unask(struct dns_resolver *r, struct pending *p)
{
	struct upsock *u;

	if (p->sock == NONE)
		return;
	due_unlink(r, p);
	r->by_id[p->upid] = 0;
	u = &r->ups[p->sock];
	p->sock = NONE;
	if (u->npending > 0)
		u->npending--;
	if (u->retiring && u->npending == 0)
		upsock_close(u);
}

static struct pending *
pending_get(struct dns_resolver *r)
{
	struct pending *p;

	if (r->free_head == NONE)
		return NULL;
	p = &r->pend[r->free_head];
	r->free_head = p->next;
	p->used = true;
	p->sock = NONE;
	p->prev = p->next = NONE;
	return p;
}

static void
pending_free(struct dns_resolver *r, struct pending *p)
{
	pending_unask(r, p);
	p->used = false;
	p->next = r->free_head;
	r->free_head = (int)(p - r->pend);
}

/* Asks upstream number p->attempt; returns -1 if it could not be asked. */
static int
upstream_ask(struct dns_resolver *r, struct pending *p)
{
	uint16_t id;
	int s, len, tries;

	pending_unask(r, p);
	if ((s = upsock_pick(r, p->attempt)) == -1)
		return -1;
	/* a fresh random id, unique among the questions in flight, so that
	 * an answer names its question */
	for (tries = 0; ; tries++) {
		if (tries == 8 || random_bytes(r, &id, sizeof(id)) == -1)
			return -1;
		if (r->by_id[id] == 0)
			break;
	}
	len = dns_write_query(r->buf, sizeof(r->buf), id, p->req.name,
	    p->req.q.qtype, p->req.q.qclass);
	if (len < 0 || send(r->ups[s].fd, r->buf, (size_t)len, 0) != len)
		return -1;
	p->sock = s;
	p->upid = id;
	r->by_id[id] = (uint16_t)(p - r->pend + 1);
	r->ups[s].npending++;
	r->ups[s].uses++;
	p->deadline = r->now + DNS_UPSTREAM_TRY_MS;
	due_append(r, p);
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
	reply(r, &p->req, p->conn, p->conn_gen, (int)rcode, NULL, 0, NULL);
	pending_free(r, p);
}

/* The question in flight that id names, if it went out on socket s to
 * addr, port 53. */
static struct pending *
pending_by_id(struct dns_resolver *r, int s, uint16_t id,
    const struct sockaddr_in *addr)
{
	struct pending *p;

	if (r->by_id[id] == 0)
		return NULL;
	p = &r->pend[r->by_id[id] - 1];
	/* after a reload the upstream asked may be listed no more */
	if (p->sock != s || p->attempt >= r->nup ||
	    addr->sin_family != AF_INET ||
	    addr->sin_addr.s_addr != r->up[p->attempt] ||
	    addr->sin_port != htons(53))
		return NULL;
	return p;
}

static void
upstream_answer(struct dns_resolver *r, int s, const struct sockaddr_in *from,
    const uint8_t *msg, size_t len)
{
	struct pending *p;
	unsigned rcode;

	/* Taken only from the upstream asked, to the socket and id asked
	 * with, for the question asked; anything else is left unread. */
	p = len >= 2 ? pending_by_id(r, s, (uint16_t)(msg[0] << 8 | msg[1]),
	    from) : NULL;
	if (p == NULL ||
	    dns_parse_response(msg, len, &r->resp) != DNS_PARSE_OK ||
	    r->resp.id != p->upid || r->resp.qtype != p->req.q.qtype ||
	    r->resp.qclass != p->req.q.qclass ||
	    !dns_name_equal(r->resp.qname, p->req.name)) {
		/* not the answer to our question: keep waiting */
		r->st.mismatched++;
		return;
	}
	/* kept as the upstream said it, before a sandbox's policy edits it */
	if (r->cache != NULL)
		dns_cache_put(r->cache, p->req.name, p->req.q.qtype,
		    p->req.q.qclass, r->now, &r->resp);
	rcode = r->resp.rcode;
	r->ops->response(r->arg, &p->req, &r->resp, &rcode);
	reply(r, &p->req, p->conn, p->conn_gen, (int)rcode, NULL, 0, &r->resp);
	pending_free(r, p);
}

/*
 * ICMP errors queued by IP_RECVERR. Each carries the start of the
 * question that caused it and its destination: a destination unreachable
 * (port, host, network, prohibited) means that upstream will not answer
 * this question, so the next one is asked now. Other errors (a path MTU,
 * a TTL) are left to the timeout.
 */
static void
upsock_errors(struct dns_resolver *r, int s)
{
	int fd = r->ups[s].fd, budget = 16;
	uint32_t gen = r->ups[s].gen;

	/* moving a question on may close this socket and open another */
	while (budget-- > 0 && r->ups[s].fd != -1 && r->ups[s].gen == gen) {
		union {
			struct cmsghdr	align;
			char		buf[CMSG_SPACE(sizeof(struct
				    sock_extended_err) + sizeof(struct
				    sockaddr_in))];
		} c;
		struct sockaddr_in dst;
		uint8_t head[DNS_HDR_LEN];
		struct iovec iov = { .iov_base = head, .iov_len = sizeof(head) };
		struct msghdr mh = { .msg_name = &dst, .msg_namelen = sizeof(dst),
		    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = c.buf,
		    .msg_controllen = sizeof(c.buf) };
		struct sock_extended_err ee;
		struct cmsghdr *cm;
		struct pending *p;
		bool unreachable = false;
		ssize_t n;

		n = recvmsg(fd, &mh, MSG_ERRQUEUE | MSG_DONTWAIT);
		if (n < 0)
			return;
		for (cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
			if (cm->cmsg_level != IPPROTO_IP ||
			    cm->cmsg_type != IP_RECVERR ||
			    cm->cmsg_len < CMSG_LEN(sizeof(ee)))
				continue;
			memcpy(&ee, CMSG_DATA(cm), sizeof(ee));
			unreachable = ee.ee_origin == SO_EE_ORIGIN_ICMP &&
			    ee.ee_type == ICMP_DEST_UNREACH &&
			    ee.ee_code != ICMP_FRAG_NEEDED;
		}
		if (!unreachable || n < 2 || mh.msg_namelen < sizeof(dst))
			continue;
		p = pending_by_id(r, s, (uint16_t)(head[0] << 8 | head[1]), &dst);
		if (p != NULL)
			upstream_next(r, p);
	}
}

static void
upsock_read(struct dns_resolver *r, int s, short revents)
{
	struct rx *x = &r->rx;
	int fd = r->ups[s].fd, batch, n, j;
	uint32_t gen = r->ups[s].gen;

	if (revents & POLLERR)
		upsock_errors(r, s);
	/* an answer or an error may end the socket's last question and
	 * close it, and another may take its slot: what was read from it
	 * is then no answer to anything on the new one */
#define SAME_SOCKET()	(r->ups[s].fd == fd && r->ups[s].gen == gen)
	for (batch = 0; batch < RX_BATCHES && SAME_SOCKET(); batch++) {
		for (j = 0; j < RX_BATCH; j++) {
			x->mm[j].msg_hdr.msg_namelen = sizeof(x->from[j]);
			x->mm[j].msg_hdr.msg_controllen = 0;
			x->mm[j].msg_hdr.msg_control = NULL;
		}
		n = recvmmsg(fd, x->mm, RX_BATCH, MSG_DONTWAIT, NULL);
		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK ||
			    errno == EINTR)
				return;
			/* a pending ICMP error, reported once: read it */
			upsock_errors(r, s);
			continue;
		}
		for (j = 0; j < n && SAME_SOCKET(); j++)
			upstream_answer(r, s, &x->from[j], x->iov[j].iov_base,
			    x->mm[j].msg_len);
		if (n < RX_BATCH)
			return;
	}
#undef SAME_SOCKET
}

/* ---- queries ----------------------------------------------------------- */

/*
 * Parses the query msg into req. A framing error (TCP) makes it malformed
 * even if its bytes parse: they are not the message the client framed.
 */
static void
parse_request(struct dns_resolver *r, struct dns_request *req,
    const uint8_t *msg, size_t len, enum dns_parse_error framing)
{
	r->st.queries++;
	req->perr = dns_parse_query(msg, len, &req->q);
	if (req->perr == DNS_PARSE_OK)
		req->perr = framing;
	req->name_ok = req->perr == DNS_PARSE_OK &&
	    dns_name_normalize(req->q.qname, strlen(req->q.qname), req->name,
	    NULL);
	if (!req->name_ok)
		req->name[0] = '\0';
	if (req->perr != DNS_PARSE_OK)
		r->st.malformed++;
}

static void
handle_query(struct dns_resolver *r, struct dns_request *req,
    const uint8_t *msg, size_t len, int conn, enum dns_parse_error framing)
{
	enum dns_action act;
	unsigned rcode = DNS_R_SERVFAIL;
	uint32_t gen = conn >= 0 ? r->conns[conn].gen : 0;
	struct pending *p;

	parse_request(r, req, msg, len, framing);
	act = r->ops->query(r->arg, req, &rcode);
	if (req->perr != DNS_PARSE_OK) {
		reply(r, req, conn, gen, act == DNS_DROP ? -1 : DNS_R_FORMERR,
		    msg, len, NULL);
		return;
	}
	if (act == DNS_DROP) {
		reply(r, req, conn, gen, -1, NULL, 0, NULL);
		return;
	}
	if (act == DNS_FORWARD && req->over_limit) {
		act = DNS_ANSWER;
		rcode = DNS_R_REFUSED;
	}
	if (act == DNS_ANSWER || !req->name_ok) {
		reply(r, req, conn, gen, (int)rcode, NULL, 0, NULL);
		return;
	}
	if (r->cache != NULL && dns_cache_get(r->cache, req->name,
	    req->q.qtype, req->q.qclass, r->now, &r->resp)) {
		/* answered as the upstream did, through the same policy */
		r->st.cache_hits++;
		rcode = r->resp.rcode;
		r->ops->response(r->arg, req, &r->resp, &rcode);
		reply(r, req, conn, gen, (int)rcode, NULL, 0, &r->resp);
		return;
	}
	if (r->nup == 0 || (p = pending_get(r)) == NULL) {
		/* no room for another question in flight: fail, never wait */
		rcode = DNS_R_SERVFAIL;
		r->ops->response(r->arg, req, NULL, &rcode);
		reply(r, req, conn, gen, (int)rcode, NULL, 0, NULL);
		return;
	}
	p->req = *req;
	p->attempt = 0;
	p->conn = conn;
	p->conn_gen = gen;
	r->st.forwarded++;
	if (conn >= 0)
		r->conns[conn].busy = true;
	if (upstream_ask(r, p) == -1)
		upstream_next(r, p);
}

/*
 * The kernel's count of datagrams the listener dropped was seen to be
 * now: what it grew by since it was last seen is reported. The count is
 * 32 bits and wraps; a datagram queued before the last drops seen carries
 * an older count, which is not news.
 */
static void
udp_drops_seen(struct dns_resolver *r, uint32_t now)
{
	uint32_t delta = now - r->udp_drops;

	if (delta == 0 || delta > INT32_MAX)
		return;
	r->udp_drops = now;
	r->st.kernel_dropped += delta;
	if (r->ops->lost != NULL)
		r->ops->lost(r->arg, delta);
}

/* The count as it is now, for drops no datagram read since reports: those
 * of a pause, or at the end. */
static void
udp_drops_settle(struct dns_resolver *r)
{
	uint32_t mem[SK_MEMINFO_VARS];
	socklen_t len = sizeof(mem);

	if (r->udp_fd != -1 && getsockopt(r->udp_fd, SOL_SOCKET, SO_MEMINFO,
	    mem, &len) == 0 && len > SK_MEMINFO_DROPS * sizeof(mem[0]))
		udp_drops_seen(r, mem[SK_MEMINFO_DROPS]);
}

static void
udp_read(struct dns_resolver *r)
{
	struct dns_request *req = &r->scratch;
	struct rx *x = &r->rx;
	int batch, n, j;

	for (batch = 0; batch < RX_BATCHES; batch++) {
		for (j = 0; j < RX_BATCH; j++) {
			x->mm[j].msg_hdr.msg_namelen = sizeof(x->from[j]);
			x->mm[j].msg_hdr.msg_control = x->cmsg[j].buf;
			x->mm[j].msg_hdr.msg_controllen = sizeof(x->cmsg[j].buf);
		}
		n = recvmmsg(r->udp_fd, x->mm, RX_BATCH, MSG_DONTWAIT, NULL);
		if (n <= 0)
			return;
		for (j = 0; j < n; j++) {
			struct msghdr *mh = &x->mm[j].msg_hdr;
			struct cmsghdr *cm;
			size_t len = x->mm[j].msg_len;

			memset(req, 0, offsetof(struct dns_request, user));
			req->src_addr = x->from[j].sin_addr.s_addr;
			req->src_port = ntohs(x->from[j].sin_port);
			for (cm = CMSG_FIRSTHDR(mh); cm; cm = CMSG_NXTHDR(mh, cm)) {
				struct in_pktinfo pi;
				uint32_t drops;

				if (cm->cmsg_level == SOL_SOCKET &&
				    cm->cmsg_type == SO_RXQ_OVFL &&
				    cm->cmsg_len >= CMSG_LEN(sizeof(drops))) {
					memcpy(&drops, CMSG_DATA(cm),
					    sizeof(drops));
					udp_drops_seen(r, drops);
					continue;
				}
				if (cm->cmsg_level != IPPROTO_IP ||
				    cm->cmsg_type != IP_PKTINFO)
					continue;
				memcpy(&pi, CMSG_DATA(cm), sizeof(pi));
				req->ifindex = (uint32_t)pi.ipi_ifindex;
				req->dst_addr = pi.ipi_addr.s_addr;
			}
			/* a query longer than any we handle is malformed: parse
			 * a prefix so its id can still be answered */
			if (len > DNS_TCP_MSG_MAX)
				len = DNS_TCP_MSG_MAX;
			handle_query(r, req, x->iov[j].iov_base, len, -1,
			    DNS_PARSE_OK);
		}
		if (n < RX_BATCH)
			return;
	}
}

/* ---- TCP clients ------------------------------------------------------- */

/*
 * The next message in c's input: its length (its bytes are at c->in + 2)
 * and how many bytes of input it takes; 0 while it is not all there yet,
 * unless at_end (no more input will come: what there is, is all). A
 * length of 0 or beyond DNS_TCP_MSG_MAX, or a message the end cut short,
 * is a framing error (*framing): nothing after it can be told apart from
 * it, so it takes all the input there is.
 */
static size_t
conn_next(const struct conn *c, bool at_end, size_t *len,
    enum dns_parse_error *framing)
{
	size_t mlen;

	*framing = DNS_PARSE_OK;
	if (c->inlen >= 2) {
		mlen = (size_t)c->in[0] << 8 | c->in[1];
		if (mlen == 0 || mlen > DNS_TCP_MSG_MAX) {
			*framing = mlen == 0 ? DNS_PARSE_SHORT :
			    DNS_PARSE_TRAILING;
			*len = c->inlen - 2;
			return c->inlen;
		}
		if (c->inlen >= mlen + 2) {
			*len = mlen;
			return mlen + 2;
		}
	}
	if (!at_end || c->inlen == 0)
		return 0;
	*framing = DNS_PARSE_SHORT;
	*len = c->inlen < 2 ? 0 : c->inlen - 2;
	return c->inlen;
}

/* A request from client i, its message still to be parsed. */
static void
conn_request(struct dns_resolver *r, int i, struct dns_request *req)
{
	struct conn *c = &r->conns[i];

	memset(req, 0, offsetof(struct dns_request, user));
	req->tcp = true;
	req->over_limit = c->over_limit;
	req->ifindex = c->ifindex;
	req->src_addr = c->peer;
	req->src_port = c->peer_port;
	req->dst_addr = c->local;
	c->nreq++;
}

/*
 * Takes the next message out of client i's input (conn_next) into msg,
 * with its request begun: copied out, since handling it may queue an
 * answer into this connection. False while there is none.
 */
static bool
conn_pop(struct dns_resolver *r, int i, bool at_end, struct dns_request *req,
    uint8_t *msg, size_t *mlen, enum dns_parse_error *framing)
{
	struct conn *c = &r->conns[i];
	size_t take;

	if ((take = conn_next(c, at_end, mlen, framing)) == 0)
		return false;
	conn_request(r, i, req);
	memcpy(msg, c->in + 2, *mlen);
	memmove(c->in, c->in + take, c->inlen - take);
	c->inlen -= take;
	return true;
}

/*
 * Client i goes away before what it sent could be answered (a reset, its
 * time ran out, the resolver closes): each query still in its input gets
 * its request all the same, with nothing sent, and what is left of a
 * message is a malformed one. A refused connection that sent no query at
 * all gets one request for the attempt.
 */
static void
conn_drain(struct dns_resolver *r, int i)
{
	struct conn *c = &r->conns[i];
	struct dns_request *req = &r->scratch;
	enum dns_parse_error framing;
	uint8_t msg[DNS_TCP_MSG_MAX];
	size_t mlen;
	unsigned rcode = DNS_R_SERVFAIL;

	while (conn_pop(r, i, true, req, msg, &mlen, &framing)) {
		parse_request(r, req, msg, mlen, framing);
		(void)r->ops->query(r->arg, req, &rcode);
		r->ops->done(r->arg, req, -1);
	}
	if (c->over_limit && c->nreq == 0) {
		conn_request(r, i, req);
		req->perr = DNS_PARSE_SHORT;
		(void)r->ops->query(r->arg, req, &rcode);
		r->ops->done(r->arg, req, -1);
	}
}

static void
conn_close(struct dns_resolver *r, int i)
{
	struct conn *c = &r->conns[i];

	if (c->used)
		conn_drain(r, i);
	if (c->fd != -1)
		close(c->fd);
	c->fd = -1;
	if (c->used)
		r->nconns--;
	c->used = false;
}

static void conn_io(struct dns_resolver *r, int i, short revents);

/* The ingress interface of an accepted connection (0 if unknown), from
 * the pktinfo the listener's IP_PKTINFO made the kernel keep. */
static uint32_t
conn_ifindex(int fd)
{
	char opts[256];
	socklen_t olen = sizeof(opts);
	struct msghdr mh;
	struct cmsghdr *cm;
	uint32_t ifindex = 0;

	memset(&mh, 0, sizeof(mh));
	if (getsockopt(fd, IPPROTO_IP, IP_PKTOPTIONS, opts, &olen) == -1)
		return 0;
	mh.msg_control = opts;
	mh.msg_controllen = olen;
	for (cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
		struct in_pktinfo pi;

		if (cm->cmsg_level != IPPROTO_IP ||
		    cm->cmsg_type != IP_PKTINFO)
			continue;
		memcpy(&pi, CMSG_DATA(cm), sizeof(pi));
		ifindex = (uint32_t)pi.ipi_ifindex;
	}
	return ifindex;
}

/* Whether the client on ifindex holds its share of the served slots: one
 * sandbox cannot take every one from the others. */
static bool
client_full(const struct dns_resolver *r, uint32_t ifindex)
{
	size_t i, n = 0;

	if (r->tcp_per_client == 0)
		return false;
	for (i = 0; i < DNS_TCP_MAX; i++)
		if (r->conns[i].used && r->conns[i].ifindex == ifindex &&
		    ++n >= r->tcp_per_client)
			return true;
	return false;
}

static void
tcp_accept(struct dns_resolver *r)
{
	int budget = 16;

	while (budget-- > 0) {
		struct sockaddr_in peer, local;
		socklen_t plen = sizeof(peer), llen = sizeof(local);
		struct conn *c;
		uint32_t ifindex;
		int fd, i;

		fd = accept4(r->tcp_fd, (struct sockaddr *)&peer, &plen,
		    SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd == -1)
			return;
		if (getsockname(fd, (struct sockaddr *)&local, &llen) == -1) {
			r->st.dropped++;
			close(fd);
			continue;
		}
		ifindex = conn_ifindex(fd);
		/* served slots first (unless this client holds its share of
		 * them), then refused ones, then the spare */
		for (i = client_full(r, ifindex) ? DNS_TCP_MAX : 0;
		    i < CONN_SPARE; i++)
			if (!r->conns[i].used)
				break;
		c = &r->conns[i];
		memset(c, 0, offsetof(struct conn, in));
		c->used = true;
		r->nconns++;
		c->fd = fd;
		c->gen = ++r->next_gen;
		c->peer = peer.sin_addr.s_addr;
		c->peer_port = ntohs(peer.sin_port);
		c->local = local.sin_addr.s_addr;
		c->idle_deadline = r->now + DNS_TCP_IDLE_MS;
		c->ifindex = ifindex;
		r->st.tcp_conns++;
		if (i < DNS_TCP_MAX)
			continue;
		/*
		 * Beyond the bound: refused, but with a request for each query
		 * (or for the attempt), so that it is on record. A refused
		 * slot waits DNS_TCP_REFUSE_MS at most for the queries; the
		 * spare takes what the client sent already, answers the first
		 * and goes.
		 */
		c->over_limit = true;
		c->idle_deadline = r->now + DNS_TCP_REFUSE_MS;
		r->st.tcp_refused++;
		if (i == CONN_SPARE) {
			/* the first query's answer is sent once, if the
			 * socket takes it; not through conn_io, which would
			 * read the next query and queue an answer the close
			 * then drops, its row saying REFUSED all the same
			 * (found by review, 2026-12-03). The queries behind
			 * it get their rows from conn_close, unanswered */
			conn_io(r, i, POLLIN);
			if (c->used && c->outoff < c->outlen)
				(void)send(c->fd, c->out + c->outoff,
				    c->outlen - c->outoff,
				    MSG_NOSIGNAL | MSG_DONTWAIT);
			conn_close(r, i);
		}
	}
}

static void
conn_process(struct dns_resolver *r, int i)
{
	struct conn *c = &r->conns[i];
	struct dns_request *req = &r->scratch;
	enum dns_parse_error framing;
	uint8_t msg[DNS_TCP_MSG_MAX];
	size_t mlen;

	while (c->used && !c->busy && c->outlen == c->outoff && c->inlen > 0) {
		if (!conn_pop(r, i, c->closing, req, msg, &mlen, &framing))
			return;
		/* framing lost: answered (FORMERR), then closed unread */
		if (framing != DNS_PARSE_OK)
			c->closing = true;
		handle_query(r, req, msg, mlen, i, framing);
	}
}

static bool
conn_finished(const struct conn *c)
{
	return c->closing && !c->busy && c->outoff == c->outlen;
}

/*
 * The events a client's socket is polled for: input while there is room
 * for it (a full buffer waits until its query is answered, and a socket
 * left readable would wake the loop for nothing), output while an answer
 * waits. A connection whose query is upstream is still read while it has
 * room: a pipelined query waits in the buffer (conn_process takes one at
 * a time), and a reset is found by the read (its queries are recorded
 * then, the one upstream when its answer comes). None: the buffer is full
 * and nothing is to be sent; the connection is then left out of poll,
 * which reports a reset (POLLHUP) whatever was asked for, and the reset is
 * found when the answer is sent.
 */
static short
conn_events(const struct conn *c)
{
	return (short)((!c->closing && c->inlen < sizeof(c->in) ? POLLIN : 0) |
	    (c->outoff < c->outlen ? POLLOUT : 0));
}

static void
conn_io(struct dns_resolver *r, int i, short revents)
{
	struct conn *c = &r->conns[i];
	ssize_t n;

	/* MSG_NOSIGNAL: a client that reset is an error, not a SIGPIPE */
	if (revents & (POLLOUT | POLLHUP | POLLERR) && c->outoff < c->outlen) {
		n = send(c->fd, c->out + c->outoff, c->outlen - c->outoff,
		    MSG_NOSIGNAL);
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
			/* a message's first bytes start the idle time again,
			 * the rest of it does not: a client sending a byte
			 * now and then would hold its connection (one of
			 * DNS_TCP_MAX) for ever without a query, and without
			 * a row (found by review, 2026-12-03). So a message
			 * must come whole within the idle time of its start,
			 * or of the answer before it (reply) */
			if (!c->over_limit && c->inlen == 0)
				c->idle_deadline = r->now + DNS_TCP_IDLE_MS;
			c->inlen += (size_t)n;
		} else if (n == 0) {
			c->closing = true;	/* answers still go out */
		} else if (errno != EAGAIN && errno != EINTR) {
			/* a reset: nothing can reach the client any more; a
			 * query of its upstream ends unanswered (reply) */
			conn_close(r, i);
			return;
		}
	}
	conn_process(r, i);
	if (c->used && conn_finished(c))
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
	pfd[n] = (struct pollfd){ .fd = r->udp_fd,
	    .events = r->paused ? 0 : POLLIN };
	r->map[n++] = (struct slot_ref){ K_UDP, 0 };
	pfd[n] = (struct pollfd){ .fd = r->tcp_fd, .events = POLLIN };
	r->map[n++] = (struct slot_ref){ K_TCP_LISTEN, 0 };
	for (i = 0; i < CONN_N && n < max && r->nconns > 0; i++) {
		struct conn *c = &r->conns[i];

		if (!c->used || conn_events(c) == 0)
			continue;
		pfd[n] = (struct pollfd){ .fd = c->fd,
		    .events = conn_events(c) };
		r->map[n++] = (struct slot_ref){ K_CONN, i };
	}
	for (i = 0; i < UPSOCK_N && n < max; i++) {
		if (r->ups[i].fd == -1)
			continue;
		pfd[n] = (struct pollfd){ .fd = r->ups[i].fd, .events = POLLIN };
		r->map[n++] = (struct slot_ref){ K_UPSTREAM, i };
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
			if (!r->paused)	/* POLLERR still comes */
				udp_read(r);
			break;
		case K_TCP_LISTEN:
			tcp_accept(r);
			break;
		case K_CONN:
			if (r->conns[i].used && r->conns[i].fd == pfd[k].fd)
				conn_io(r, i, pfd[k].revents);
			break;
		case K_UPSTREAM:
			if (r->ups[i].fd == pfd[k].fd)
				upsock_read(r, i, pfd[k].revents);
			break;
		}
	}
	r->nmap = 0;
	while (r->due_head != NONE && r->pend[r->due_head].deadline <= now_ms)
		upstream_next(r, &r->pend[r->due_head]);
	for (i = 0; i < CONN_N && r->nconns > 0; i++) {
		struct conn *c = &r->conns[i];

		if (!c->used)
			continue;
		if (!c->busy && c->idle_deadline <= now_ms) {
			conn_close(r, i);
			continue;
		}
		/* an answer came: the next query, or the end */
		conn_process(r, i);
		if (c->used && conn_finished(c))
			conn_close(r, i);
	}
	udp_flush(r);
}

int
dns_resolver_timeout(const struct dns_resolver *r, uint64_t now_ms)
{
	uint64_t next = UINT64_MAX;
	int i;

	if (r->due_head != NONE)
		next = r->pend[r->due_head].deadline;
	/* a busy connection waits on its query, whose deadline is above;
	 * it is closed for idleness only once that is over */
	for (i = 0; i < CONN_N && r->nconns > 0; i++)
		if (r->conns[i].used && !r->conns[i].busy &&
		    r->conns[i].idle_deadline < next)
			next = r->conns[i].idle_deadline;
	if (next == UINT64_MAX)
		return -1;
	return next <= now_ms ? 0 : (int)(next - now_ms);
}

void
dns_resolver_stats(const struct dns_resolver *r, struct dns_resolver_stats *out)
{
	struct dns_cache_stats cs;

	*out = r->st;
	if (r->cache != NULL) {
		dns_cache_stats(r->cache, &cs);
		out->cache_entries = cs.entries;
		out->cache_capacity = cs.capacity;
	}
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
			pending_free(r, &r->pend[i]);
		}
	for (i = 0; i < UPSOCK_N; i++)
		upsock_close(&r->ups[i]);
	for (i = 0; r->conns != NULL && i < CONN_N; i++)
		if (r->conns[i].used)
			conn_close(r, i);
	udp_drops_settle(r);
	if (r->udp_fd != -1)
		close(r->udp_fd);
	if (r->tcp_fd != -1)
		close(r->tcp_fd);
	free(r->rx.buf);
	free(r->pend);
	free(r->conns);
	dns_cache_free(r->cache);
	free(r);
}

int
dns_resolver_set_upstreams(struct dns_resolver *r, const uint32_t *upstreams,
    size_t nupstreams)
{
	struct upsock *u;
	size_t i;

	if (nupstreams > DNS_UPSTREAM_MAX) {
		errno = EINVAL;
		return -1;
	}
	/* what the old upstreams said is not what the new ones would */
	if (r->cache != NULL && (nupstreams != r->nup ||
	    memcmp(r->up, upstreams, nupstreams * sizeof(*upstreams)) != 0))
		dns_cache_flush(r->cache);
	memcpy(r->up, upstreams, nupstreams * sizeof(*upstreams));
	r->nup = nupstreams;
	/* a socket connected to an upstream no longer in its place takes no
	 * new question; it goes once its last one is over */
	for (i = 0; i < UPSOCK_N; i++) {
		u = &r->ups[i];
		if (u->fd == -1 || (i / UPSOCK_PER_UP < r->nup &&
		    u->addr == r->up[i / UPSOCK_PER_UP]))
			continue;
		u->retiring = true;
		if (u->npending == 0)
			upsock_close(u);
	}
	return 0;
}

void
dns_resolver_set_tcp_per_client(struct dns_resolver *r, size_t n)
{
	r->tcp_per_client = n;
}

int
dns_resolver_set_cache(struct dns_resolver *r, size_t entries)
{
	struct dns_cache *c = NULL;

	if (entries > 0 && (c = dns_cache_new(entries)) == NULL)
		return -1;
	dns_cache_free(r->cache);
	r->cache = c;
	return 0;
}

void
dns_resolver_pause(struct dns_resolver *r, bool paused)
{
	if (paused && !r->paused)
		r->st.paused++;
	/* what a pause cost is known now, whether or not more comes */
	if (!paused && r->paused)
		udp_drops_settle(r);
	r->paused = paused;
}
