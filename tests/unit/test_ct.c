/* test_ct.c: conntrack: the event parser on hand-built messages; the reader, the query and the flush against the kernel. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdalign.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <linux/tcp.h>		/* struct tcp_info with tcpi_segs_in/out */
#include <libmnl/libmnl.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_conntrack.h>
#include <linux/netfilter/nf_conntrack_tcp.h>
#include <cmocka.h>

#include "tests/unit/testns.h"

#include "nfq/nfq.h"
#include "nfq/ct_int.h"

/*
 * The kernel tests run the whole binary in a network namespace of its own
 * (unshare(CLONE_NEWNET)): loopback, the rules, the conntrack table and its
 * sysctls exist only there and vanish with the process, so there is
 * nothing to tear down. Needs root; skips otherwise. In that namespace:
 *   INPUT  -m conntrack --ctstate NEW,ESTABLISHED -j ACCEPT  (conntrack on)
 *   mangle OUTPUT udp dport 7001 -> CONNMARK --set-mark 0x2a
 *   nf_conntrack_acct=1, TCP TIME_WAIT/CLOSE and UDP timeouts 1 s,
 *   TCP timestamps, SACK and window scaling on (the header sizes below),
 *   ping sockets allowed for root.
 */

#define UDP_PORT	7001
#define MARK		0x2a
#define WAIT_MS		2000

/* IP header 20 + TCP header 20 + timestamps option 12 on every segment;
 * the SYN and the SYN-ACK carry MSS, SACK-permitted, timestamps and window
 * scale instead: 20 + 40. */
#define TCP_SEG_HDRS	52
#define TCP_SYN_EXTRA	8

#define CT_TYPE(m)	((NFNL_SUBSYS_CTNETLINK << 8) | (m))

static const char *env_skip;	/* why the kernel tests cannot run, or NULL */

/* ---- hand-built messages --------------------------------------------- */

/* What a builder damages (one thing at a time). */
enum damage {
	D_NONE,
	D_SRC_LEN5,		/* CTA_IP_V4_SRC with 5 bytes */
	D_SPORT_LEN4,		/* CTA_PROTO_SRC_PORT with 4 bytes */
	D_PROTO_LEN2,		/* CTA_PROTO_NUM with 2 bytes */
	D_PACKETS_U32,		/* CTA_COUNTERS_PACKETS as a u32 */
	D_BYTES_MISSING,	/* counters without CTA_COUNTERS_BYTES */
	D_MARK_U64,		/* CTA_MARK as a u64 */
	D_STATE_U16,		/* CTA_PROTOINFO_TCP_STATE as a u16 */
	D_NO_ORIG,		/* no CTA_TUPLE_ORIG */
	D_NO_IP,		/* tuple without CTA_TUPLE_IP */
	D_NO_PROTO,		/* tuple without CTA_TUPLE_PROTO */
	D_NO_DST,		/* CTA_TUPLE_IP without CTA_IP_V4_DST */
	D_NO_PROTO_NUM,		/* CTA_TUPLE_PROTO without CTA_PROTO_NUM */
	D_NO_PORTS,		/* TCP without ports */
	D_ONE_PORT,		/* a source port only */
	D_ORIG_NOT_NEST,	/* CTA_TUPLE_ORIG holding 2 bytes */
	D_ORIG_GARBAGE,		/* CTA_TUPLE_ORIG holding 6 bytes, no attribute */
	D_PROTOINFO_GARBAGE,	/* CTA_PROTOINFO holding 3 bytes */
	D_COUNTERS_OVERRUN,	/* an attribute inside the counters claims
				 * more than its nest holds */
	D_ORIG_TWICE,		/* two CTA_TUPLE_ORIG */
	D_TRAILING,		/* 2 bytes after the last attribute */
	D_STOP_U32,		/* CTA_TIMESTAMP_STOP as a u32 */
	D_TSTAMP_GARBAGE,	/* CTA_TIMESTAMP holding 3 bytes */
	D_COUNT
};

static const char *const damage_names[D_COUNT] = {
	"none", "src len 5", "sport len 4", "proto len 2", "packets u32",
	"bytes missing", "mark u64", "state u16", "no orig", "no ip",
	"no proto", "no dst", "no proto num", "no ports", "one port",
	"orig not a nest", "orig garbage", "protoinfo garbage",
	"counters overrun", "orig twice", "trailing bytes", "stop u32",
	"timestamp garbage",
};

struct ev_spec {
	uint16_t	type;		/* nlmsg_type */
	uint8_t		family;
	uint8_t		proto;
	uint32_t	saddr, daddr;	/* network order */
	uint16_t	sport, dport;
	uint64_t	po, bo, pr, br;	/* counters */
	uint32_t	mark;		/* 0: no CTA_MARK, as the kernel does */
	int		state;		/* -1: no CTA_PROTOINFO */
	uint64_t	start, stop;	/* CTA_TIMESTAMP (start 0: none; stop
					 * 0: no CTA_TIMESTAMP_STOP) */
	enum damage	damage;
};

static void
put_u32_as(struct nlmsghdr *nlh, uint16_t type, uint32_t v, size_t len)
{
	uint8_t b[8] = { 0 };

	memcpy(b, &v, sizeof(v));
	mnl_attr_put(nlh, type, len, b);
}

static void
put_tuple(struct nlmsghdr *nlh, uint16_t type, const struct ev_spec *s,
    bool reply)
{
	struct nlattr *t, *n;
	enum damage d = reply ? D_NONE : s->damage;

	t = mnl_attr_nest_start(nlh, type);
	if (d != D_NO_IP) {
		n = mnl_attr_nest_start(nlh, CTA_TUPLE_IP);
		if (d == D_SRC_LEN5)
			put_u32_as(nlh, CTA_IP_V4_SRC, s->saddr, 5);
		else
			mnl_attr_put_u32(nlh, CTA_IP_V4_SRC,
			    reply ? s->daddr : s->saddr);
		if (d != D_NO_DST)
			mnl_attr_put_u32(nlh, CTA_IP_V4_DST,
			    reply ? s->saddr : s->daddr);
		mnl_attr_nest_end(nlh, n);
	}
	if (d != D_NO_PROTO) {
		n = mnl_attr_nest_start(nlh, CTA_TUPLE_PROTO);
		if (d == D_PROTO_LEN2)
			put_u32_as(nlh, CTA_PROTO_NUM, s->proto, 2);
		else if (d != D_NO_PROTO_NUM)
			mnl_attr_put_u8(nlh, CTA_PROTO_NUM, s->proto);
		if (s->proto == IPPROTO_ICMP) {
			mnl_attr_put_u16(nlh, CTA_PROTO_ICMP_ID, htons(0x1234));
			mnl_attr_put_u8(nlh, CTA_PROTO_ICMP_TYPE, 8);
			mnl_attr_put_u8(nlh, CTA_PROTO_ICMP_CODE, 0);
		} else if (d != D_NO_PORTS) {
			if (d == D_SPORT_LEN4)
				put_u32_as(nlh, CTA_PROTO_SRC_PORT,
				    htons(s->sport), 4);
			else
				mnl_attr_put_u16(nlh, CTA_PROTO_SRC_PORT,
				    htons(reply ? s->dport : s->sport));
			if (d != D_ONE_PORT)
				mnl_attr_put_u16(nlh, CTA_PROTO_DST_PORT,
				    htons(reply ? s->sport : s->dport));
		}
		mnl_attr_nest_end(nlh, n);
	}
	mnl_attr_nest_end(nlh, t);
}

static void
put_counters(struct nlmsghdr *nlh, uint16_t type, uint64_t packets,
    uint64_t bytes, enum damage d)
{
	struct nlattr *n;

	n = mnl_attr_nest_start(nlh, type);
	/* The kernel's nla_put_be64 puts a pad attribute first where the
	 * u64 would not be 8-byte aligned: it must be skipped. */
	mnl_attr_put(nlh, CTA_COUNTERS_PAD, 0, NULL);
	if (d == D_PACKETS_U32)
		mnl_attr_put_u32(nlh, CTA_COUNTERS_PACKETS,
		    htonl((uint32_t)packets));
	else
		mnl_attr_put_u64(nlh, CTA_COUNTERS_PACKETS, htobe64(packets));
	if (d != D_BYTES_MISSING)
		mnl_attr_put_u64(nlh, CTA_COUNTERS_BYTES, htobe64(bytes));
	if (d == D_COUNTERS_OVERRUN) {
		struct nlattr *last = mnl_nlmsg_get_payload_tail(nlh);

		mnl_attr_put_u32(nlh, CTA_COUNTERS32_PACKETS, 0);
		last->nla_len += 8;	/* past the nest's end */
	}
	mnl_attr_nest_end(nlh, n);
}

/* A destroy event laid out as ctnetlink_conntrack_event does. */
static struct nlmsghdr *
build(void *buf, const struct ev_spec *s)
{
	struct nlmsghdr *nlh;
	struct nfgenmsg *nfg;
	struct nlattr *n, *t;
	const uint8_t junk[6] = { 1, 2, 3, 4, 5, 6 };

	nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = s->type;
	nfg = mnl_nlmsg_put_extra_header(nlh, sizeof(*nfg));
	nfg->nfgen_family = s->family;
	nfg->version = NFNETLINK_V0;
	nfg->res_id = 0;

	if (s->damage == D_ORIG_NOT_NEST)
		mnl_attr_put(nlh, CTA_TUPLE_ORIG, 2, junk);
	else if (s->damage == D_ORIG_GARBAGE)
		mnl_attr_put(nlh, CTA_TUPLE_ORIG, 6, junk);
	else if (s->damage != D_NO_ORIG)
		put_tuple(nlh, CTA_TUPLE_ORIG, s, false);
	if (s->damage == D_ORIG_TWICE)
		put_tuple(nlh, CTA_TUPLE_ORIG, s, false);
	put_tuple(nlh, CTA_TUPLE_REPLY, s, true);
	mnl_attr_put_u32(nlh, CTA_STATUS, htonl(0x18e));
	if (s->damage == D_MARK_U64)
		mnl_attr_put_u64(nlh, CTA_MARK, htobe64(s->mark));
	else if (s->mark != 0)
		mnl_attr_put_u32(nlh, CTA_MARK, htonl(s->mark));
	put_counters(nlh, CTA_COUNTERS_ORIG, s->po, s->bo, s->damage);
	put_counters(nlh, CTA_COUNTERS_REPLY, s->pr, s->br, D_NONE);
	if (s->damage == D_PROTOINFO_GARBAGE)
		mnl_attr_put(nlh, CTA_PROTOINFO, 3, junk);
	else if (s->state >= 0) {
		n = mnl_attr_nest_start(nlh, CTA_PROTOINFO);
		t = mnl_attr_nest_start(nlh, CTA_PROTOINFO_TCP);
		if (s->damage == D_STATE_U16)
			mnl_attr_put_u16(nlh, CTA_PROTOINFO_TCP_STATE,
			    (uint16_t)s->state);
		else
			mnl_attr_put_u8(nlh, CTA_PROTOINFO_TCP_STATE,
			    (uint8_t)s->state);
		mnl_attr_nest_end(nlh, t);
		mnl_attr_nest_end(nlh, n);
	}
	if (s->damage == D_TSTAMP_GARBAGE)
		mnl_attr_put(nlh, CTA_TIMESTAMP, 3, junk);
	else if (s->start != 0) {
		n = mnl_attr_nest_start(nlh, CTA_TIMESTAMP);
		mnl_attr_put(nlh, CTA_TIMESTAMP_PAD, 0, NULL);
		mnl_attr_put_u64(nlh, CTA_TIMESTAMP_START, htobe64(s->start));
		if (s->damage == D_STOP_U32)
			mnl_attr_put_u32(nlh, CTA_TIMESTAMP_STOP,
			    htonl((uint32_t)s->stop));
		else if (s->stop != 0)
			mnl_attr_put_u64(nlh, CTA_TIMESTAMP_STOP,
			    htobe64(s->stop));
		mnl_attr_nest_end(nlh, n);
	}
	mnl_attr_put_u32(nlh, CTA_ID, htonl(0xdeadbeef));
	/* An attribute from a future kernel: ignored. */
	mnl_attr_put_u32(nlh, CTA_MAX + 7, 0);
	if (s->damage == D_TRAILING)
		nlh->nlmsg_len += 2;	/* 2 bytes form no attribute */
	return nlh;
}

static const struct ev_spec tcp_spec = {
	.type = CT_TYPE(IPCTNL_MSG_CT_DELETE),
	.family = AF_INET,
	.proto = IPPROTO_TCP,
	.saddr = 0x0100000aU,	/* 10.0.0.1 on little endian: any value */
	.daddr = 0x08080808U,
	.sport = 40000,
	.dport = 443,
	.po = 12, .bo = 0x100000000ULL + 1234,	/* beyond 32 bits */
	.pr = 10, .br = 98765,
	.mark = 0x2a,
	.state = TCP_CONNTRACK_TIME_WAIT,
	.start = 1796309866743727123ULL, .stop = 1796309870000000456ULL,
};

static void
test_parse_tcp(void **state)
{
	alignas(struct nlmsghdr) char buf[1024];
	struct nlmsghdr *nlh;
	struct nfq_ct_end e;

	(void)state;
	nlh = build(buf, &tcp_spec);
	memset(&e, 0xaa, sizeof(e));
	assert_int_equal(nfq_ct_parse(nlh, nlh->nlmsg_len, &e), NFQ_CT_EVENT);
	assert_int_equal(e.proto, IPPROTO_TCP);
	assert_int_equal(e.saddr, tcp_spec.saddr);
	assert_int_equal(e.daddr, tcp_spec.daddr);
	assert_int_equal(e.sport, 40000);
	assert_int_equal(e.dport, 443);
	assert_int_equal(e.packets_orig, 12);
	assert_int_equal(e.bytes_orig, 0x100000000ULL + 1234);
	assert_int_equal(e.packets_reply, 10);
	assert_int_equal(e.bytes_reply, 98765);
	assert_int_equal(e.mark, 0x2a);
	assert_int_equal(e.tcp_state, TCP_CONNTRACK_TIME_WAIT);
	assert_int_equal(e.stop_ns, 1796309870000000456ULL);
	assert_string_equal(nfq_ct_end_state(&e), "closed");
	/* The buffer may be larger than the message. */
	assert_int_equal(nfq_ct_parse(nlh, sizeof(buf), &e), NFQ_CT_EVENT);
}

/* Optional parts: no mark, no counters (acct off), no protoinfo, no
 * timestamps (nf_conntrack_timestamp off), a start without a stop. */
static void
test_parse_optional(void **state)
{
	alignas(struct nlmsghdr) char buf[1024];
	struct ev_spec s = tcp_spec;
	struct nlmsghdr *nlh;
	struct nfq_ct_end e;
	struct nlattr *a;

	(void)state;
	s.mark = 0;
	s.state = -1;
	s.start = 0;
	nlh = build(buf, &s);
	assert_int_equal(nfq_ct_parse(nlh, nlh->nlmsg_len, &e), NFQ_CT_EVENT);
	assert_int_equal(e.mark, 0);
	assert_int_equal(e.tcp_state, 0);
	assert_int_equal(e.stop_ns, 0);
	assert_string_equal(nfq_ct_end_state(&e), "ended");

	/* Renaming the counter nests to unknown types hides them. */
	mnl_attr_for_each(a, nlh, sizeof(struct nfgenmsg)) {
		if (mnl_attr_get_type(a) == CTA_COUNTERS_ORIG ||
		    mnl_attr_get_type(a) == CTA_COUNTERS_REPLY)
			a->nla_type = CTA_MAX + 9;
	}
	assert_int_equal(nfq_ct_parse(nlh, nlh->nlmsg_len, &e), NFQ_CT_EVENT);
	assert_int_equal(e.packets_orig, 0);
	assert_int_equal(e.bytes_orig, 0);
	assert_int_equal(e.packets_reply, 0);
	assert_int_equal(e.bytes_reply, 0);
	assert_int_equal(e.sport, 40000);

	s = tcp_spec;
	s.stop = 0;
	nlh = build(buf, &s);
	assert_int_equal(nfq_ct_parse(nlh, nlh->nlmsg_len, &e), NFQ_CT_EVENT);
	assert_int_equal(e.stop_ns, 0);

	/* A state beyond the kernel's known ones is unknown: 0. */
	s = tcp_spec;
	s.state = 42;
	nlh = build(buf, &s);
	assert_int_equal(nfq_ct_parse(nlh, nlh->nlmsg_len, &e), NFQ_CT_EVENT);
	assert_int_equal(e.tcp_state, 0);
}

static void
test_parse_icmp_udp(void **state)
{
	alignas(struct nlmsghdr) char buf[1024];
	struct ev_spec s = tcp_spec;
	struct nlmsghdr *nlh;
	struct nfq_ct_end e;

	(void)state;
	s.proto = IPPROTO_ICMP;
	s.state = -1;
	nlh = build(buf, &s);
	assert_int_equal(nfq_ct_parse(nlh, nlh->nlmsg_len, &e), NFQ_CT_EVENT);
	assert_int_equal(e.proto, IPPROTO_ICMP);
	assert_int_equal(e.sport, 0);
	assert_int_equal(e.dport, 0);
	assert_int_equal(e.packets_orig, 12);
	assert_string_equal(nfq_ct_end_state(&e), "ended");

	s.proto = IPPROTO_UDP;
	nlh = build(buf, &s);
	assert_int_equal(nfq_ct_parse(nlh, nlh->nlmsg_len, &e), NFQ_CT_EVENT);
	assert_int_equal(e.proto, IPPROTO_UDP);
	assert_int_equal(e.sport, 40000);
	assert_int_equal(e.dport, 443);
	assert_string_equal(nfq_ct_end_state(&e), "ended");

	/* A UDP event that carries TCP protoinfo keeps state 0. */
	s.state = TCP_CONNTRACK_CLOSE;
	nlh = build(buf, &s);
	assert_int_equal(nfq_ct_parse(nlh, nlh->nlmsg_len, &e), NFQ_CT_EVENT);
	assert_int_equal(e.tcp_state, 0);
}

/* Not a destroy event of IPv4: left alone, not counted as damage. */
static void
test_parse_other(void **state)
{
	alignas(struct nlmsghdr) char buf[1024];
	struct ev_spec s = tcp_spec;
	struct nlmsghdr *nlh;
	struct nfq_ct_end e;

	(void)state;
	s.family = AF_INET6;
	nlh = build(buf, &s);
	assert_int_equal(nfq_ct_parse(nlh, nlh->nlmsg_len, &e), NFQ_CT_OTHER);
	s = tcp_spec;
	s.type = CT_TYPE(IPCTNL_MSG_CT_NEW);
	nlh = build(buf, &s);
	assert_int_equal(nfq_ct_parse(nlh, nlh->nlmsg_len, &e), NFQ_CT_OTHER);
	s.type = (NFNL_SUBSYS_CTNETLINK_EXP << 8) | IPCTNL_MSG_CT_DELETE;
	nlh = build(buf, &s);
	assert_int_equal(nfq_ct_parse(nlh, nlh->nlmsg_len, &e), NFQ_CT_OTHER);
	s.type = NLMSG_ERROR;
	nlh = build(buf, &s);
	assert_int_equal(nfq_ct_parse(nlh, nlh->nlmsg_len, &e), NFQ_CT_OTHER);
}

static void
test_parse_damaged(void **state)
{
	alignas(struct nlmsghdr) char buf[1024];
	struct ev_spec s = tcp_spec;
	struct nlmsghdr *nlh;
	struct nfq_ct_end e, sentinel;
	int d;

	(void)state;
	memset(&sentinel, 0xaa, sizeof(sentinel));
	for (d = D_NONE + 1; d < D_COUNT; d++) {
		s.damage = (enum damage)d;
		nlh = build(buf, &s);
		e = sentinel;
		if (nfq_ct_parse(nlh, nlh->nlmsg_len, &e) != NFQ_CT_DAMAGED)
			fail_msg("damage \"%s\" not detected", damage_names[d]);
		/* Nothing half-read reaches the caller. */
		assert_memory_equal(&e, &sentinel, sizeof(e));
	}

	/* The same message is fine undamaged. */
	s.damage = D_NONE;
	nlh = build(buf, &s);
	assert_int_equal(nfq_ct_parse(nlh, nlh->nlmsg_len, &e), NFQ_CT_EVENT);
	/* Cut short: the buffer holds less than the header says. */
	assert_int_equal(nfq_ct_parse(nlh, nlh->nlmsg_len - 4, &e),
	    NFQ_CT_DAMAGED);
	assert_int_equal(nfq_ct_parse(nlh, 10, &e), NFQ_CT_DAMAGED);
	assert_int_equal(nfq_ct_parse(nlh, 0, &e), NFQ_CT_DAMAGED);
	/* No room for the nfgenmsg. */
	nlh->nlmsg_len = MNL_NLMSG_HDRLEN + 2;
	assert_int_equal(nfq_ct_parse(nlh, sizeof(buf), &e), NFQ_CT_DAMAGED);
	/* A length below the header's own. */
	nlh->nlmsg_len = 8;
	assert_int_equal(nfq_ct_parse(nlh, sizeof(buf), &e), NFQ_CT_DAMAGED);
}

static void
test_end_state(void **state)
{
	static const struct {
		uint8_t		 proto;
		uint8_t		 state;
		const char	*want;
	} cases[] = {
		{ IPPROTO_TCP, TCP_CONNTRACK_TIME_WAIT, "closed" },
		{ IPPROTO_TCP, TCP_CONNTRACK_FIN_WAIT, "closed" },
		{ IPPROTO_TCP, TCP_CONNTRACK_CLOSE_WAIT, "closed" },
		{ IPPROTO_TCP, TCP_CONNTRACK_LAST_ACK, "closed" },
		{ IPPROTO_TCP, TCP_CONNTRACK_CLOSE, "reset" },
		{ IPPROTO_TCP, TCP_CONNTRACK_SYN_SENT, "timeout" },
		{ IPPROTO_TCP, TCP_CONNTRACK_SYN_RECV, "timeout" },
		{ IPPROTO_TCP, TCP_CONNTRACK_ESTABLISHED, "timeout" },
		{ IPPROTO_TCP, TCP_CONNTRACK_SYN_SENT2, "timeout" },
		{ IPPROTO_TCP, TCP_CONNTRACK_NONE, "ended" },
		{ IPPROTO_TCP, 200, "ended" },
		{ IPPROTO_UDP, TCP_CONNTRACK_CLOSE, "ended" },
		{ IPPROTO_ICMP, 0, "ended" },
		{ IPPROTO_SCTP, 0, "ended" },
	};
	struct nfq_ct_end e;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		memset(&e, 0, sizeof(e));
		e.proto = cases[i].proto;
		e.tcp_state = cases[i].state;
		assert_string_equal(nfq_ct_end_state(&e), cases[i].want);
	}
}

/* ---- against the kernel ---------------------------------------------- */

static int
write_file(const char *path, const char *value)
{
	int fd, ok;

	if ((fd = open(path, O_WRONLY)) == -1)
		return -1;
	ok = write(fd, value, strlen(value)) == (ssize_t)strlen(value);
	return close(fd) == 0 && ok ? 0 : -1;
}

static int
group_setup(void **state)
{
	static char *const rules[][20] = {
		{ "iptables", "-w", "-A", "INPUT", "-m", "conntrack",
		  "--ctstate", "NEW,ESTABLISHED", "-j", "ACCEPT", NULL },
		{ "iptables", "-w", "-t", "mangle", "-A", "OUTPUT", "-p", "udp",
		  "--dport", "7001", "-j", "CONNMARK", "--set-mark", "0x2a",
		  NULL },
	};
	static const char *const sysctls[][2] = {
		/* after the rule: the conntrack sysctls appear once
		 * conntrack is in use in the namespace */
		{ "/proc/sys/net/netfilter/nf_conntrack_acct", "1" },
		{ "/proc/sys/net/netfilter/nf_conntrack_timestamp", "1" },
		{ "/proc/sys/net/netfilter/nf_conntrack_tcp_timeout_time_wait",
		  "1" },
		{ "/proc/sys/net/netfilter/nf_conntrack_tcp_timeout_close", "1" },
		{ "/proc/sys/net/netfilter/nf_conntrack_udp_timeout", "1" },
		{ "/proc/sys/net/ipv4/tcp_timestamps", "1" },
		{ "/proc/sys/net/ipv4/tcp_sack", "1" },
		{ "/proc/sys/net/ipv4/tcp_window_scaling", "1" },
		{ "/proc/sys/net/ipv4/ping_group_range", "0 0" },
	};
	size_t i;
	int rc;

	(void)state;
	if ((env_skip = testns_enter()) != NULL)
		return 0;
	for (i = 0; i < sizeof(rules) / sizeof(rules[0]); i++) {
		rc = testns_run(rules[i]);
		if (rc != 0) {
			env_skip = rc == 127 ? "iptables not found" :
			    "iptables failed (no conntrack or CONNMARK match?)";
			return 0;
		}
	}
	for (i = 0; i < sizeof(sysctls) / sizeof(sysctls[0]); i++) {
		if (write_file(sysctls[i][0], sysctls[i][1]) == -1) {
			env_skip = "cannot set the conntrack and TCP sysctls";
			return 0;
		}
	}
	return 0;
}

/*
 * One ctnetlink request for the whole IPv4 table, answered in full:
 * IPCTNL_MSG_CT_DELETE flushes it (a destroy event per entry), a
 * IPCTNL_MSG_CT_GET dump reaps entries whose timeout has passed (the
 * kernel's garbage collector may take seconds to get there).
 */
static int
ct_request(uint8_t msg, uint16_t flags)
{
	alignas(struct nlmsghdr) static char buf[65536];
	struct mnl_socket *nl;
	struct nlmsghdr *nlh;
	struct nfgenmsg *nfg;
	unsigned int portid, seq = (unsigned int)time(NULL);
	ssize_t n;
	int ret = -1;

	if ((nl = mnl_socket_open(NETLINK_NETFILTER)) == NULL)
		return -1;
	if (mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) == -1)
		goto out;
	portid = mnl_socket_get_portid(nl);
	nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = CT_TYPE(msg);
	nlh->nlmsg_flags = NLM_F_REQUEST | flags;
	nlh->nlmsg_seq = seq;
	nfg = mnl_nlmsg_put_extra_header(nlh, sizeof(*nfg));
	nfg->nfgen_family = AF_INET;
	nfg->version = NFNETLINK_V0;
	if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0)
		goto out;
	do {
		if ((n = mnl_socket_recvfrom(nl, buf, sizeof(buf))) < 0)
			goto out;
		ret = mnl_cb_run(buf, (size_t)n, seq, portid, NULL, NULL);
	} while (ret > MNL_CB_STOP);
out:
	mnl_socket_close(nl);
	return ret == MNL_CB_ERROR ? -1 : 0;
}

static int
ct_flush(void)
{
	return ct_request(IPCTNL_MSG_CT_DELETE, NLM_F_ACK);
}

static int
ct_dump(void)
{
	return ct_request(IPCTNL_MSG_CT_GET, NLM_F_DUMP);
}

/* Events seen by the callback. */
struct events {
	size_t			n;
	struct nfq_ct_end	e[256];
};

static void
collect_cb(void *arg, const struct nfq_ct_end *e)
{
	struct events *ev = arg;

	if (ev->n < sizeof(ev->e) / sizeof(ev->e[0]))
		ev->e[ev->n] = *e;
	ev->n++;
}

static const struct nfq_ct_end *
find_event(const struct events *ev, uint8_t proto, uint16_t sport,
    uint16_t dport)
{
	size_t i;

	for (i = 0; i < ev->n && i < sizeof(ev->e) / sizeof(ev->e[0]); i++)
		if (ev->e[i].proto == proto && ev->e[i].sport == sport &&
		    ev->e[i].dport == dport)
			return &ev->e[i];
	return NULL;
}

/* Reads events until one of the flow shows up or ms pass. */
static const struct nfq_ct_end *
wait_event(struct nfq_ct *ct, struct events *ev, uint8_t proto,
    uint16_t sport, uint16_t dport, int ms)
{
	struct pollfd pfd = { .fd = nfq_ct_fd(ct), .events = POLLIN };
	const struct nfq_ct_end *e;
	int step = 50;

	for (; ms > 0; ms -= step) {
		if ((e = find_event(ev, proto, sport, dport)) != NULL)
			return e;
		if (poll(&pfd, 1, step) == 1)
			assert_true(nfq_ct_recv(ct, collect_cb, ev) >= 0);
	}
	return find_event(ev, proto, sport, dport);
}

/* Drains what is readable now; returns the number of events. */
static size_t
drain(struct nfq_ct *ct, struct events *ev)
{
	size_t before = ev->n;
	int got;

	do {
		got = nfq_ct_recv(ct, collect_cb, ev);
		assert_true(got >= 0);
	} while (got > 0);
	/* nothing was left: the socket was read dry */
	assert_true(nfq_ct_drained(ct));
	return ev->n - before;
}

static int
fixture_setup(void **state)
{
	struct nfq_ct *ct;
	char err[256];

	*state = NULL;
	if (env_skip != NULL)
		return 0;
	/* Earlier tests' entries go while nobody listens. */
	assert_int_equal(ct_flush(), 0);
	if ((ct = nfq_ct_open(err, sizeof(err))) == NULL)
		fail_msg("%s", err);
	*state = ct;
	return 0;
}

static int
fixture_teardown(void **state)
{
	nfq_ct_close(*state);
	return 0;
}

#define NEED_ENV(state)	TESTNS_SKIP_IF(*(state) != NULL ? NULL :	\
    env_skip != NULL ? env_skip : "no state")

static struct sockaddr_in
loopback(uint16_t port)
{
	struct sockaddr_in sin;

	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sin.sin_port = htons(port);
	return sin;
}

static uint16_t
local_port(int fd)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);

	assert_int_equal(getsockname(fd, (struct sockaddr *)&sin, &len), 0);
	return ntohs(sin.sin_port);
}

struct tcp_pair {
	int		 lfd, cfd, sfd;
	uint16_t	 cport, sport;
};

/* A socket bound to src (network order; lo answers all of 127/8), port 0. */
static int
bound_socket(int type, int proto, uint32_t src)
{
	struct sockaddr_in sin = loopback(0);
	int fd;

	sin.sin_addr.s_addr = src;
	fd = socket(AF_INET, type | SOCK_CLOEXEC, proto);
	assert_true(fd != -1);
	assert_int_equal(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	return fd;
}

/* A TCP connection over loopback from src to 127.0.0.1: client cfd,
 * accepted sfd. */
static void
tcp_connect_from(struct tcp_pair *p, uint32_t src)
{
	struct sockaddr_in sin = loopback(0);
	socklen_t len = sizeof(sin);

	p->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(p->lfd != -1);
	assert_int_equal(bind(p->lfd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	assert_int_equal(listen(p->lfd, 4), 0);
	p->sport = local_port(p->lfd);
	sin = loopback(p->sport);
	p->cfd = bound_socket(SOCK_STREAM, 0, src);
	assert_int_equal(connect(p->cfd, (struct sockaddr *)&sin, sizeof(sin)),
	    0);
	p->cport = local_port(p->cfd);
	p->sfd = accept(p->lfd, (struct sockaddr *)&sin, &len);
	assert_true(p->sfd != -1);
}

static void
tcp_connect(struct tcp_pair *p)
{
	tcp_connect_from(p, htonl(INADDR_LOOPBACK));
}

static void
send_all(int fd, size_t n)
{
	static const char zeros[4096];

	assert_true(n <= sizeof(zeros));
	assert_int_equal(write(fd, zeros, n), (ssize_t)n);
}

static void
recv_exactly(int fd, size_t n)
{
	char buf[4096];
	size_t got = 0;
	ssize_t r;

	while (got < n) {
		r = read(fd, buf, sizeof(buf));
		assert_true(r > 0);
		got += (size_t)r;
	}
	assert_int_equal(got, n);
}

static struct tcp_info
tcp_info(int fd)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);

	memset(&ti, 0, sizeof(ti));
	assert_int_equal(getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len), 0);
	assert_true(len >= offsetof(struct tcp_info, tcpi_segs_in) +
	    sizeof(ti.tcpi_segs_in));
	return ti;
}

static void
assert_loopback_tuple(const struct nfq_ct_end *e)
{
	assert_int_equal(e->saddr, htonl(INADDR_LOOPBACK));
	assert_int_equal(e->daddr, htonl(INADDR_LOOPBACK));
}

/*
 * The client sends 1000 bytes, the server 3000, the client shuts down its
 * side, the server closes, the client reads the end: conntrack sits in
 * TIME_WAIT. The client's own segment counts (TCP_INFO) are what
 * conntrack must have counted: every segment one way went out of the
 * client, every one back came in; each is one packet on loopback.
 */
/* CLOCK_REALTIME in ns, conntrack's timestamps' clock. */
static uint64_t
real_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void
test_tcp_closed(void **state)
{
	struct nfq_ct *ct;
	struct events ev = { 0 };
	struct tcp_pair p;
	struct tcp_info ti;
	const struct nfq_ct_end *e;
	uint64_t t0, t1;
	char c;

	NEED_ENV(state);
	ct = *state;
	tcp_connect(&p);
	send_all(p.cfd, 1000);
	recv_exactly(p.sfd, 1000);
	send_all(p.sfd, 3000);
	recv_exactly(p.cfd, 3000);
	assert_int_equal(shutdown(p.cfd, SHUT_WR), 0);
	assert_int_equal(read(p.sfd, &c, 1), 0);
	close(p.sfd);
	/* The client acked the server's FIN before this read returns. */
	assert_int_equal(read(p.cfd, &c, 1), 0);
	ti = tcp_info(p.cfd);
	assert_true(ti.tcpi_options & TCPI_OPT_TIMESTAMPS);

	t0 = real_ns();
	assert_int_equal(ct_flush(), 0);
	t1 = real_ns();
	e = wait_event(ct, &ev, IPPROTO_TCP, p.cport, p.sport, WAIT_MS);
	assert_non_null(e);
	assert_loopback_tuple(e);
	/* Dated by the kernel: ended by the flush. */
	assert_in_range(e->stop_ns, t0, t1);
	/* SYN, ACK, data, FIN, last ACK at least; a few ACKs more at most. */
	assert_in_range(e->packets_orig, 5, 8);
	assert_in_range(e->packets_reply, 3, 6);
	assert_int_equal(e->packets_orig, ti.tcpi_segs_out);
	assert_int_equal(e->packets_reply, ti.tcpi_segs_in);
	/* Payload plus every packet's IP and TCP headers, exactly. */
	assert_int_equal(e->bytes_orig,
	    1000 + TCP_SEG_HDRS * e->packets_orig + TCP_SYN_EXTRA);
	assert_int_equal(e->bytes_reply,
	    3000 + TCP_SEG_HDRS * e->packets_reply + TCP_SYN_EXTRA);
	assert_int_equal(e->mark, 0);
	assert_int_equal(e->tcp_state, TCP_CONNTRACK_TIME_WAIT);
	assert_string_equal(nfq_ct_end_state(e), "closed");
	/* One connection, one event. */
	assert_int_equal(ev.n, 1);
	assert_int_equal(nfq_ct_lost(ct), 0);
	assert_int_equal(nfq_ct_damaged(ct), 0);
	close(p.cfd);
	close(p.lfd);
}

/* The client aborts with SO_LINGER 0 (one RST); returns once the server
 * has seen it. */
static void
client_reset(struct tcp_pair *p)
{
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };
	char c;

	assert_int_equal(setsockopt(p->cfd, SOL_SOCKET, SO_LINGER, &lg,
	    sizeof(lg)), 0);
	close(p->cfd);
	assert_int_equal(read(p->sfd, &c, 1), -1);
	assert_int_equal(errno, ECONNRESET);
}

/* The client aborts: one RST, conntrack in CLOSE. */
static void
test_tcp_reset(void **state)
{
	struct nfq_ct *ct;
	struct events ev = { 0 };
	struct tcp_pair p;
	struct tcp_info ti;
	const struct nfq_ct_end *e;

	NEED_ENV(state);
	ct = *state;
	tcp_connect(&p);
	send_all(p.cfd, 700);
	recv_exactly(p.sfd, 700);
	send_all(p.sfd, 200);
	recv_exactly(p.cfd, 200);
	ti = tcp_info(p.cfd);
	client_reset(&p);

	assert_int_equal(ct_flush(), 0);
	e = wait_event(ct, &ev, IPPROTO_TCP, p.cport, p.sport, WAIT_MS);
	assert_non_null(e);
	assert_loopback_tuple(e);
	/* What the client had sent, then the RST. */
	assert_int_equal(e->packets_orig, ti.tcpi_segs_out + 1);
	assert_int_equal(e->packets_reply, ti.tcpi_segs_in);
	assert_int_equal(e->bytes_orig,
	    700 + TCP_SEG_HDRS * e->packets_orig + TCP_SYN_EXTRA);
	assert_int_equal(e->bytes_reply,
	    200 + TCP_SEG_HDRS * e->packets_reply + TCP_SYN_EXTRA);
	assert_int_equal(e->tcp_state, TCP_CONNTRACK_CLOSE);
	assert_string_equal(nfq_ct_end_state(e), "reset");
	close(p.sfd);
	close(p.lfd);
}

/*
 * An entry whose timeout ran out, reaped well after (here by a dump 2.5 s
 * after a reset, CLOSE's timeout being 1 s): its end is dated to when the
 * timeout ran out, not to the reaping, which is what flows.end_ts says.
 */
static void
test_tcp_expired_dated(void **state)
{
	struct nfq_ct *ct;
	struct events ev = { 0 };
	struct tcp_pair p;
	const struct nfq_ct_end *e;
	uint64_t t_rst, t_reap;

	NEED_ENV(state);
	ct = *state;
	tcp_connect(&p);
	send_all(p.cfd, 10);
	recv_exactly(p.sfd, 10);
	client_reset(&p);
	t_rst = real_ns();
	usleep(2500 * 1000);
	t_reap = real_ns();
	assert_int_equal(ct_dump(), 0);
	e = wait_event(ct, &ev, IPPROTO_TCP, p.cport, p.sport, WAIT_MS);
	assert_non_null(e);
	assert_string_equal(nfq_ct_end_state(e), "reset");
	/* 1 s after the reset, give or take the kernel's jiffies */
	assert_in_range(e->stop_ns, t_rst + 800000000u, t_rst + 1300000000u);
	assert_true(e->stop_ns < t_reap);
	close(p.sfd);
	close(p.lfd);
}

/* Nobody listens: the RST that refuses the SYN ends the entry at once
 * (no flush), in CLOSE. */
static void
test_tcp_refused(void **state)
{
	struct nfq_ct *ct;
	struct events ev = { 0 };
	struct sockaddr_in sin = loopback(0);
	const struct nfq_ct_end *e;
	int lfd, fd;
	uint16_t port, cport;

	NEED_ENV(state);
	ct = *state;
	/* A port just released, so that nobody listens on it. */
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(lfd != -1);
	assert_int_equal(bind(lfd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	port = local_port(lfd);
	close(lfd);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(fd != -1);
	sin = loopback(port);
	assert_int_equal(connect(fd, (struct sockaddr *)&sin, sizeof(sin)), -1);
	assert_int_equal(errno, ECONNREFUSED);
	cport = local_port(fd);
	e = wait_event(ct, &ev, IPPROTO_TCP, cport, port, WAIT_MS);
	assert_non_null(e);
	assert_int_equal(e->packets_orig, 1);
	assert_int_equal(e->bytes_orig, TCP_SEG_HDRS + TCP_SYN_EXTRA);
	/* The RST has no options: 20 + 20. */
	assert_int_equal(e->packets_reply, 1);
	assert_int_equal(e->bytes_reply, 40);
	assert_int_equal(e->tcp_state, TCP_CONNTRACK_CLOSE);
	assert_string_equal(nfq_ct_end_state(e), "reset");
	close(fd);
}

/* An open connection deleted from the table: no close was seen. */
static void
test_tcp_flushed_open(void **state)
{
	struct nfq_ct *ct;
	struct events ev = { 0 };
	struct tcp_pair p;
	const struct nfq_ct_end *e;

	NEED_ENV(state);
	ct = *state;
	tcp_connect(&p);
	send_all(p.cfd, 10);
	recv_exactly(p.sfd, 10);
	assert_int_equal(ct_flush(), 0);
	e = wait_event(ct, &ev, IPPROTO_TCP, p.cport, p.sport, WAIT_MS);
	assert_non_null(e);
	assert_int_equal(e->tcp_state, TCP_CONNTRACK_ESTABLISHED);
	assert_string_equal(nfq_ct_end_state(e), "timeout");
	close(p.cfd);
	close(p.sfd);
	close(p.lfd);
}

/*
 * One datagram each way, then nothing: the entry times out (1 s here) and
 * its end carries exact counters (IP 20 + UDP 8 + payload) and the
 * connection mark the mangle rule set.
 */
static void
test_udp_timeout(void **state)
{
	struct nfq_ct *ct;
	struct events ev = { 0 };
	struct sockaddr_in sin = loopback(UDP_PORT), from;
	socklen_t len = sizeof(from);
	const struct nfq_ct_end *e = NULL;
	char buf[16];
	int srv, cli, i;
	uint16_t cport;

	NEED_ENV(state);
	ct = *state;
	srv = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	cli = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	assert_true(srv != -1 && cli != -1);
	assert_int_equal(bind(srv, (struct sockaddr *)&sin, sizeof(sin)), 0);
	assert_int_equal(sendto(cli, "ping", 4, 0, (struct sockaddr *)&sin,
	    sizeof(sin)), 4);
	cport = local_port(cli);
	assert_int_equal(recvfrom(srv, buf, sizeof(buf), 0,
	    (struct sockaddr *)&from, &len), 4);
	assert_int_equal(sendto(srv, "pong!!", 6, 0, (struct sockaddr *)&from,
	    len), 6);
	assert_int_equal(recv(cli, buf, sizeof(buf), 0), 6);

	/* Not before its timeout. */
	assert_int_equal(ct_dump(), 0);
	assert_null(wait_event(ct, &ev, IPPROTO_UDP, cport, UDP_PORT, 200));
	for (i = 0; i < 20 && e == NULL; i++) {
		usleep(250 * 1000);
		assert_int_equal(ct_dump(), 0);
		e = wait_event(ct, &ev, IPPROTO_UDP, cport, UDP_PORT, 100);
	}
	assert_non_null(e);
	assert_loopback_tuple(e);
	assert_int_equal(e->packets_orig, 1);
	assert_int_equal(e->bytes_orig, 20 + 8 + 4);
	assert_int_equal(e->packets_reply, 1);
	assert_int_equal(e->bytes_reply, 20 + 8 + 6);
	assert_int_equal(e->mark, MARK);
	assert_int_equal(e->tcp_state, 0);
	assert_string_equal(nfq_ct_end_state(e), "ended");
	close(srv);
	close(cli);
}

/* An echo request and its reply (a ping socket): no ports. */
static void
test_icmp(void **state)
{
	struct nfq_ct *ct;
	struct events ev = { 0 };
	struct sockaddr_in sin = loopback(0);
	uint8_t echo[8 + 5] = { 8, 0, 0, 0, 0, 0, 0, 1, 'h', 'e', 'l', 'l',
	    'o' };
	char buf[64];
	const struct nfq_ct_end *e;
	int fd;

	NEED_ENV(state);
	ct = *state;
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, IPPROTO_ICMP);
	if (fd == -1) {
		print_message("skipped: no ping socket: %s\n", strerror(errno));
		skip();
	}
	assert_int_equal(sendto(fd, echo, sizeof(echo), 0,
	    (struct sockaddr *)&sin, sizeof(sin)), sizeof(echo));
	assert_int_equal(recv(fd, buf, sizeof(buf), 0), sizeof(echo));
	assert_int_equal(ct_flush(), 0);
	e = wait_event(ct, &ev, IPPROTO_ICMP, 0, 0, WAIT_MS);
	assert_non_null(e);
	assert_loopback_tuple(e);
	assert_int_equal(e->packets_orig, 1);
	assert_int_equal(e->bytes_orig, 20 + sizeof(echo));
	assert_int_equal(e->packets_reply, 1);
	assert_int_equal(e->bytes_reply, 20 + sizeof(echo));
	assert_string_equal(nfq_ct_end_state(e), "ended");
	close(fd);
}

/*
 * A receive buffer far too small for a flush of 200 entries: the kernel
 * drops events, recv reports ENOBUFS once, the reader counts it, delivers
 * what was queued and keeps working.
 */
static void
test_overrun_counted(void **state)
{
	struct nfq_ct *ct;
	struct events ev = { 0 };
	struct sockaddr_in sin;
	int fd, small = 1, i;
	size_t got;
	uint16_t cport;

	NEED_ENV(state);
	ct = *state;
	assert_int_equal(setsockopt(nfq_ct_fd(ct), SOL_SOCKET, SO_RCVBUF,
	    &small, sizeof(small)), 0);
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	assert_true(fd != -1);
	/* 200 entries: one per destination port (nobody listens there;
	 * the ICMP errors belong to those entries and add none). */
	for (i = 0; i < 200; i++) {
		sin = loopback((uint16_t)(20000 + i));
		assert_int_equal(sendto(fd, "x", 1, 0, (struct sockaddr *)&sin,
		    sizeof(sin)), 1);
	}
	assert_int_equal(ct_flush(), 0);
	got = drain(ct, &ev);
	assert_int_equal(nfq_ct_lost(ct), 1);
	assert_true(got > 0 && got < 200);
	assert_int_equal(nfq_ct_damaged(ct), 0);

	/* Still listening. */
	cport = local_port(fd);
	sin = loopback(30000);
	assert_int_equal(sendto(fd, "y", 1, 0, (struct sockaddr *)&sin,
	    sizeof(sin)), 1);
	assert_int_equal(ct_flush(), 0);
	assert_non_null(wait_event(ct, &ev, IPPROTO_UDP, cport, 30000,
	    WAIT_MS));
	assert_int_equal(nfq_ct_lost(ct), 1);
	close(fd);
}

/* Sends nlh from a netlink socket of this process (not the kernel) to
 * the port id of netlink socket fd, and waits until fd has it. */
static void
forge_to(int fd, const struct nlmsghdr *nlh)
{
	struct mnl_socket *nl;
	struct sockaddr_nl me, to;
	socklen_t len = sizeof(me);
	struct pollfd pfd;

	assert_int_equal(getsockname(fd, (struct sockaddr *)&me, &len), 0);
	nl = mnl_socket_open(NETLINK_NETFILTER);
	assert_non_null(nl);
	assert_int_equal(mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID), 0);
	memset(&to, 0, sizeof(to));
	to.nl_family = AF_NETLINK;
	to.nl_pid = me.nl_pid;
	assert_int_equal(sendto(mnl_socket_get_fd(nl), nlh, nlh->nlmsg_len, 0,
	    (struct sockaddr *)&to, sizeof(to)), (ssize_t)nlh->nlmsg_len);
	pfd.fd = fd;
	pfd.events = POLLIN;
	assert_int_equal(poll(&pfd, 1, WAIT_MS), 1);
	mnl_socket_close(nl);
}

/* A well-formed event sent by a process, not the kernel: skipped, counted. */
static void
test_forged_sender(void **state)
{
	alignas(struct nlmsghdr) char buf[1024];
	struct nfq_ct *ct;
	struct events ev = { 0 };

	NEED_ENV(state);
	ct = *state;
	forge_to(nfq_ct_fd(ct), build(buf, &tcp_spec));
	assert_int_equal(nfq_ct_recv(ct, collect_cb, &ev), 0);
	assert_int_equal(ev.n, 0);
	assert_int_equal(nfq_ct_damaged(ct), 1);
}

/*
 * nfq_ct_get: an open connection's counters so far, read twice around
 * more traffic (the client's segments, TCP_INFO's count, are the original
 * direction's packets); a tuple conntrack has not seen is 0, not an error;
 * once the table is flushed, the connection is gone too.
 */
static void
test_get(void **state)
{
	struct nfq_ct *ct;
	struct nfq_ct_end e;
	struct tcp_pair p;
	struct tcp_info ti;
	uint32_t lo = htonl(INADDR_LOOPBACK);
	uint64_t before;

	NEED_ENV(state);
	ct = *state;
	tcp_connect(&p);
	send_all(p.cfd, 100);
	recv_exactly(p.sfd, 100);
	send_all(p.sfd, 200);
	recv_exactly(p.cfd, 200);
	memset(&e, 0, sizeof(e));
	assert_int_equal(nfq_ct_get(ct, IPPROTO_TCP, lo, p.cport, lo, p.sport,
	    &e), 1);
	assert_loopback_tuple(&e);
	assert_int_equal(e.proto, IPPROTO_TCP);
	assert_int_equal(e.sport, p.cport);
	assert_int_equal(e.dport, p.sport);
	assert_int_equal(e.tcp_state, TCP_CONNTRACK_ESTABLISHED);
	ti = tcp_info(p.cfd);
	assert_int_equal(e.packets_orig, ti.tcpi_segs_out);
	assert_true(e.packets_reply >= 2);
	assert_int_equal(e.bytes_orig,
	    100 + TCP_SEG_HDRS * e.packets_orig + TCP_SYN_EXTRA);
	before = e.packets_orig + e.packets_reply;

	/* the server sends, the client only acknowledges: both counts move */
	send_all(p.sfd, 3000);
	recv_exactly(p.cfd, 3000);
	assert_int_equal(nfq_ct_get(ct, IPPROTO_TCP, lo, p.cport, lo, p.sport,
	    &e), 1);
	assert_true(e.packets_orig + e.packets_reply > before);
	ti = tcp_info(p.cfd);
	assert_int_equal(e.packets_orig, ti.tcpi_segs_out);

	/* no such connection: the ports swapped round are a tuple of the
	 * reply direction, which conntrack finds too, so another port */
	assert_int_equal(nfq_ct_get(ct, IPPROTO_TCP, lo, p.cport, lo,
	    (uint16_t)(p.sport ^ 1), &e), 0);
	assert_int_equal(nfq_ct_get(ct, IPPROTO_UDP, lo, p.cport, lo, p.sport,
	    &e), 0);
	assert_int_equal(ct_flush(), 0);
	assert_int_equal(nfq_ct_get(ct, IPPROTO_TCP, lo, p.cport, lo, p.sport,
	    &e), 0);
	close(p.cfd);
	close(p.sfd);
	close(p.lfd);
}

/*
 * nfq_ctmark_set: only the bits the mask covers change (the rest of the
 * mark is another program's); a connection conntrack does not have is
 * ENOENT.
 */
static void
test_mark(void **state)
{
	struct nfq_ct *ct;
	struct nfq_ctmark *m;
	struct nfq_ct_end e;
	struct tcp_pair p;
	uint32_t lo = htonl(INADDR_LOOPBACK);
	char err[256];

	NEED_ENV(state);
	ct = *state;
	assert_non_null(m = nfq_ctmark_open(err, sizeof(err)));
	tcp_connect(&p);
	assert_int_equal(nfq_ctmark_set(m, IPPROTO_TCP, lo, p.cport, lo,
	    p.sport, 0x00000abcU, 0xffffffffU), 0);
	assert_int_equal(nfq_ct_get(ct, IPPROTO_TCP, lo, p.cport, lo, p.sport,
	    &e), 1);
	assert_int_equal(e.mark, 0x00000abcU);
	assert_int_equal(nfq_ctmark_set(m, IPPROTO_TCP, lo, p.cport, lo,
	    p.sport, 0x70000000U, 0x70000000U), 0);
	assert_int_equal(nfq_ct_get(ct, IPPROTO_TCP, lo, p.cport, lo, p.sport,
	    &e), 1);
	assert_int_equal(e.mark, 0x70000abcU);
	assert_int_equal(nfq_ctmark_set(m, IPPROTO_TCP, lo, p.cport, lo,
	    p.sport, 0x10000000U, 0x70000000U), 0);
	assert_int_equal(nfq_ct_get(ct, IPPROTO_TCP, lo, p.cport, lo, p.sport,
	    &e), 1);
	assert_int_equal(e.mark, 0x10000abcU);
	errno = 0;
	assert_int_equal(nfq_ctmark_set(m, IPPROTO_TCP, lo, p.cport, lo,
	    (uint16_t)(p.sport ^ 1), 0x10000000U, 0x70000000U), -1);
	assert_int_equal(errno, ENOENT);
	nfq_ctmark_close(m);
	nfq_ctmark_close(NULL);
	close(p.cfd);
	close(p.sfd);
	close(p.lfd);
}

struct refusals {
	int		 n;
	int		 error;
	bool		 quoted;
	struct nfq_ct_end e;
};

static void
on_refusal(void *arg, const struct nfq_ct_end *e, int error)
{
	struct refusals *r = arg;

	r->n++;
	r->error = error;
	r->quoted = e != NULL;
	if (e != NULL)
		r->e = *e;
}

/*
 * nfq_ctmark_post: the change is made when it returns (read back at once),
 * nothing is answered for it, and a refused one comes back with the
 * connection it named and the kernel's error.
 */
static void
test_mark_post(void **state)
{
	struct nfq_ct *ct;
	struct nfq_ctmark *m;
	struct nfq_ct_end e;
	struct tcp_pair p;
	struct refusals r;
	uint32_t lo = htonl(INADDR_LOOPBACK);
	char err[256];

	NEED_ENV(state);
	ct = *state;
	assert_non_null(m = nfq_ctmark_open(err, sizeof(err)));
	assert_true(nfq_ctmark_fd(m) >= 0);
	tcp_connect(&p);
	assert_int_equal(nfq_ctmark_post(m, IPPROTO_TCP, lo, p.cport, lo,
	    p.sport, 0x20000def, 0x7fffffffU), 0);
	assert_int_equal(nfq_ct_get(ct, IPPROTO_TCP, lo, p.cport, lo, p.sport,
	    &e), 1);
	assert_int_equal(e.mark, 0x20000defU);
	memset(&r, 0, sizeof(r));
	assert_int_equal(nfq_ctmark_refusals(m, on_refusal, &r), 0);
	assert_int_equal(r.n, 0);

	/* a connection conntrack does not have */
	assert_int_equal(nfq_ctmark_post(m, IPPROTO_TCP, lo, p.cport, lo,
	    (uint16_t)(p.sport ^ 1), 0x10000000U, 0x70000000U), 0);
	assert_int_equal(nfq_ctmark_refusals(m, on_refusal, &r), 1);
	assert_int_equal(r.n, 1);
	assert_int_equal(r.error, ENOENT);
	assert_true(r.quoted);
	assert_int_equal(r.e.proto, IPPROTO_TCP);
	assert_int_equal(r.e.saddr, lo);
	assert_int_equal(r.e.daddr, lo);
	assert_int_equal(r.e.sport, p.cport);
	assert_int_equal(r.e.dport, (uint16_t)(p.sport ^ 1));
	/* read once: nothing is left */
	assert_int_equal(nfq_ctmark_refusals(m, on_refusal, &r), 0);
	assert_int_equal(r.n, 1);
	/* a refusal another process sends is no refusal */
	{
		alignas(struct nlmsghdr) char buf[256];
		struct nlmsghdr *nlh;
		struct nlmsgerr *ne;

		nlh = mnl_nlmsg_put_header(buf);
		nlh->nlmsg_type = NLMSG_ERROR;
		ne = mnl_nlmsg_put_extra_header(nlh, sizeof(*ne));
		ne->error = -EPERM;
		forge_to(nfq_ctmark_fd(m), nlh);
		assert_int_equal(nfq_ctmark_refusals(m, on_refusal, &r), 0);
		assert_int_equal(r.n, 1);
	}
	/* the refused change moved nothing */
	assert_int_equal(nfq_ct_get(ct, IPPROTO_TCP, lo, p.cport, lo, p.sport,
	    &e), 1);
	assert_int_equal(e.mark, 0x20000defU);
	nfq_ctmark_close(m);
	close(p.cfd);
	close(p.sfd);
	close(p.lfd);
}

/* One datagram from src to 127.0.0.1:port; returns the socket (its
 * source port names the entry). */
static int
udp_from(uint32_t src, uint16_t port)
{
	struct sockaddr_in sin = loopback(port);
	int fd = bound_socket(SOCK_DGRAM, 0, src);

	assert_int_equal(sendto(fd, "x", 1, 0, (struct sockaddr *)&sin,
	    sizeof(sin)), 1);
	return fd;
}

/* nfq_ct_flush_match's picker: entries from addr (0: none); counts them all. */
struct pick {
	uint32_t	addr;
	int		seen;
};

static bool
pick_source(void *arg, uint32_t saddr)
{
	struct pick *p = arg;

	p->seen++;
	return saddr == p->addr;
}

#define FLUSH_MANY	150	/* more than a dump datagram holds, and
				 * than one batch of deletes (64) */

/*
 * nfq_ct_flush_source: the connections from 127.0.0.2 go, of every kind
 * (TCP, UDP with the connection mark, an echo request, FLUSH_MANY UDP
 * flows), those from 127.0.0.1 to the same places stay: a reading of
 * the whole table finds exactly those two. Then nfq_ct_flush_match, the
 * dump and the deletes by tuple: 127.0.0.2's new entries, then
 * 127.0.0.1's, each exactly.
 */
static void
test_flush_source(void **state)
{
	struct nfq_ct *ct;
	struct nfq_ct_end e;
	struct tcp_pair a, b;
	struct sockaddr_in sin = loopback(UDP_PORT);
	uint32_t lo = htonl(INADDR_LOOPBACK), lo2 = htonl(INADDR_LOOPBACK + 1);
	struct pick none = { 0, 0 }, pick2 = { lo2, 0 }, pick1 = { lo, 0 };
	uint8_t echo[8] = { 8, 0, 0, 0, 0, 0, 0, 1 };
	char buf[64], err[256];
	int srv, srv2, ua, ub, icmp, many[FLUSH_MANY], i;
	uint16_t pa, pb;

	NEED_ENV(state);
	ct = *state;
	tcp_connect_from(&a, lo);
	tcp_connect_from(&b, lo2);
	srv = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	assert_true(srv != -1);
	assert_int_equal(bind(srv, (struct sockaddr *)&sin, sizeof(sin)), 0);
	sin = loopback(UDP_PORT + 1);
	srv2 = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	assert_true(srv2 != -1);
	assert_int_equal(bind(srv2, (struct sockaddr *)&sin, sizeof(sin)), 0);
	ua = udp_from(lo, UDP_PORT);
	ub = udp_from(lo2, UDP_PORT);
	pa = local_port(ua);
	pb = local_port(ub);
	for (i = 0; i < FLUSH_MANY; i++)
		many[i] = udp_from(lo2, UDP_PORT + 1);
	sin = loopback(0);
	icmp = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, IPPROTO_ICMP);
	if (icmp != -1) {
		sin.sin_addr.s_addr = lo2;
		assert_int_equal(bind(icmp, (struct sockaddr *)&sin,
		    sizeof(sin)), 0);
		sin = loopback(0);
		assert_int_equal(sendto(icmp, echo, sizeof(echo), 0,
		    (struct sockaddr *)&sin, sizeof(sin)), sizeof(echo));
		assert_int_equal(recv(icmp, buf, sizeof(buf), 0),
		    sizeof(echo));
	} else
		print_message("no ping socket (%s): no ICMP entry\n",
		    strerror(errno));

	assert_int_equal(nfq_ct_get(ct, IPPROTO_TCP, lo2, b.cport, lo, b.sport,
	    &e), 1);
	assert_int_equal(nfq_ct_get(ct, IPPROTO_UDP, lo2, pb, lo, UDP_PORT,
	    &e), 1);
	assert_int_equal(e.mark, MARK);
	/* a picker that takes none reads the whole table */
	assert_int_equal(nfq_ct_flush_match(pick_source, &none, err,
	    sizeof(err)), 0);
	assert_int_equal(none.seen, 4 + FLUSH_MANY + (icmp != -1));

	err[0] = '\0';
	assert_int_equal(nfq_ct_flush_source(lo2, err, sizeof(err)), 0);
	assert_string_equal(err, "");
	assert_int_equal(nfq_ct_get(ct, IPPROTO_TCP, lo2, b.cport, lo, b.sport,
	    &e), 0);
	assert_int_equal(nfq_ct_get(ct, IPPROTO_UDP, lo2, pb, lo, UDP_PORT,
	    &e), 0);
	assert_int_equal(nfq_ct_get(ct, IPPROTO_UDP, lo2, local_port(many[0]),
	    lo, UDP_PORT + 1, &e), 0);
	assert_int_equal(nfq_ct_get(ct, IPPROTO_TCP, lo, a.cport, lo, a.sport,
	    &e), 1);
	assert_int_equal(e.tcp_state, TCP_CONNTRACK_ESTABLISHED);
	assert_int_equal(nfq_ct_get(ct, IPPROTO_UDP, lo, pa, lo, UDP_PORT, &e),
	    1);
	assert_int_equal(e.mark, MARK);
	none.seen = 0;
	assert_int_equal(nfq_ct_flush_match(pick_source, &none, err,
	    sizeof(err)), 0);
	assert_int_equal(none.seen, 2);
	/* nothing left to do is no error */
	assert_int_equal(nfq_ct_flush_source(lo2, err, sizeof(err)), 0);

	/* the dump and the deletes by tuple, in pieces and in batches */
	for (i = 0; i < FLUSH_MANY; i++) {
		close(many[i]);
		many[i] = udp_from(lo2, UDP_PORT + 1);
	}
	assert_int_equal(nfq_ct_flush_match(pick_source, &pick2, err,
	    sizeof(err)), FLUSH_MANY);
	assert_int_equal(nfq_ct_get(ct, IPPROTO_UDP, lo2, local_port(many[0]),
	    lo, UDP_PORT + 1, &e), 0);
	assert_int_equal(nfq_ct_get(ct, IPPROTO_TCP, lo, a.cport, lo, a.sport,
	    &e), 1);
	assert_int_equal(nfq_ct_flush_match(pick_source, &pick1, err,
	    sizeof(err)), 2);
	assert_int_equal(nfq_ct_get(ct, IPPROTO_TCP, lo, a.cport, lo, a.sport,
	    &e), 0);
	assert_int_equal(nfq_ct_get(ct, IPPROTO_UDP, lo, pa, lo, UDP_PORT, &e),
	    0);

	for (i = 0; i < FLUSH_MANY; i++)
		close(many[i]);
	if (icmp != -1)
		close(icmp);
	close(ua);
	close(ub);
	close(srv);
	close(srv2);
	close(a.cfd);
	close(a.sfd);
	close(a.lfd);
	close(b.cfd);
	close(b.sfd);
	close(b.lfd);
}

static void
test_close_null(void **state)
{
	(void)state;
	nfq_ct_close(NULL);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_tcp),
		cmocka_unit_test(test_parse_optional),
		cmocka_unit_test(test_parse_icmp_udp),
		cmocka_unit_test(test_parse_other),
		cmocka_unit_test(test_parse_damaged),
		cmocka_unit_test(test_end_state),
		cmocka_unit_test(test_close_null),
#define T(f) cmocka_unit_test_setup_teardown(f, fixture_setup, fixture_teardown)
		T(test_tcp_closed),
		T(test_tcp_reset),
		T(test_tcp_expired_dated),
		T(test_tcp_refused),
		T(test_tcp_flushed_open),
		T(test_udp_timeout),
		T(test_icmp),
		T(test_overrun_counted),
		T(test_forged_sender),
		T(test_get),
		T(test_mark),
		T(test_mark_post),
		T(test_flush_source),
#undef T
	};

	return cmocka_run_group_tests(tests, group_setup, NULL);
}
