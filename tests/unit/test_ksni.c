/* test_ksni.c: the kernel's first-flight checker, run on built packets.
 *
 * Each test loads the program with nfq_ksni_open (pinned under a bpffs that
 * open mounts on /run/sluice-test-ksni-PID, which the teardown unmounts and
 * removes) and runs it with BPF_PROG_TEST_RUN: the packet goes in with an
 * Ethernet header, which the kernel pulls for a socket filter, so the
 * program sees the IPv4 header at 0 as under xt_bpf; the context's
 * ingress_ifindex becomes the skb's input interface. Needs root (CAP_BPF,
 * CAP_SYS_ADMIN): a load that fails is a failure, not a skip.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/mount.h>
#include <sys/vfs.h>
#include <linux/magic.h>

#include <bpf/bpf.h>
#include <cmocka.h>

#include "nfq/nfq.h"

#define IFINDEX		7
#define DADDR		"198.51.100.7"
#define DPORT		443
#define NAME		"api.example.com"

static char dir[64];
static char pin[96];

/* ---- packets ------------------------------------------------------------ */

struct pkt {
	uint8_t		b[4096];
	size_t		n;
	size_t		random_off;	/* the hello's random, in b */
	size_t		ip_off;		/* 14 */
};

/* What the packet is made of; spec_plain() is the one that is approved. */
struct spec {
	uint32_t	 daddr;		/* network order */
	uint16_t	 dport;
	const char	*name;		/* NULL: no server_name */
	int		 nsni;		/* server_name extensions */
	const char	*name2;		/* a second entry in the name list */
	size_t		 sid;		/* session id bytes */
	size_t		 cslen;		/* cipher suites bytes (<= 8) */
	size_t		 ncomp;		/* compression methods */
	const uint8_t	*ext;		/* raw extensions after the others */
	size_t		 extlen;
	uint8_t		 ihl;
	uint8_t		 flags;		/* TCP */
	const uint8_t	*opts;		/* TCP options, a multiple of 4 */
	size_t		 optlen;
	uint16_t	 frag;		/* IPv4 flags and fragment offset */
	size_t		 trailing;	/* bytes after the record */
	size_t		 cut;		/* bytes of the record not sent */
};

static struct spec
spec_plain(void)
{
	struct spec s;

	memset(&s, 0, sizeof(s));
	s.daddr = inet_addr(DADDR);
	s.dport = DPORT;
	s.name = NAME;
	s.nsni = 1;
	s.sid = 32;
	s.cslen = 8;
	s.ncomp = 1;
	s.ihl = 5;
	s.flags = 0x18;		/* PSH|ACK */
	s.frag = 0x4000;	/* DF */
	return s;
}

static void
put8(struct pkt *p, unsigned v)
{
	assert_true(p->n < sizeof(p->b));
	p->b[p->n++] = (uint8_t)v;
}

static void
put16(struct pkt *p, unsigned v)
{
	put8(p, v >> 8);
	put8(p, v & 0xff);
}

static void
put_bytes(struct pkt *p, const void *v, size_t n)
{
	assert_true(n <= sizeof(p->b) - p->n);
	if (n == 0)		/* v may be NULL then */
		return;
	memcpy(p->b + p->n, v, n);
	p->n += n;
}

static void
set16(struct pkt *p, size_t at, unsigned v)
{
	p->b[at] = (uint8_t)(v >> 8);
	p->b[at + 1] = (uint8_t)v;
}

static void
put_sni(struct pkt *p, const char *name, const char *name2)
{
	size_t n = strlen(name), n2 = name2 != NULL ? strlen(name2) + 3 : 0;

	put16(p, 0);
	put16(p, (unsigned)(n + 5 + n2));
	put16(p, (unsigned)(n + 3 + n2));
	put8(p, 0);
	put16(p, (unsigned)n);
	put_bytes(p, name, n);
	if (name2 != NULL) {
		put8(p, 0);
		put16(p, (unsigned)n2 - 3);
		put_bytes(p, name2, n2 - 3);
	}
}

static void
build(struct pkt *p, const struct spec *s)
{
	static const uint8_t mac[12] = { 2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2 };
	static const uint8_t ciphers[] = { 0x13, 0x01, 0x13, 0x02, 0x13, 0x03,
	    0xc0, 0x2f };
	uint8_t fill[64];
	size_t ip, tcp, rec, hs, exts, i;
	int k;

	memset(p, 0, sizeof(*p));
	put_bytes(p, mac, sizeof(mac));
	put16(p, 0x0800);

	ip = p->ip_off = p->n;
	put8(p, 0x40 | s->ihl);
	put8(p, 0);
	put16(p, 0);			/* total length, below */
	put16(p, 0x1234);
	put16(p, s->frag);
	put8(p, 64);
	put8(p, 6);
	put16(p, 0);			/* checksum, below */
	put_bytes(p, "\x0a\x00\x00\x02", 4);
	put_bytes(p, &s->daddr, 4);
	for (i = 5; i < s->ihl; i++)
		put_bytes(p, "\x01\x01\x01\x00", 4);	/* NOP NOP NOP EOL */

	tcp = p->n;
	put16(p, 40000);
	put16(p, s->dport);
	put_bytes(p, "\x11\x22\x33\x44\x55\x66\x77\x88", 8);
	put8(p, (unsigned)(5 + s->optlen / 4) << 4);
	put8(p, s->flags);
	put16(p, 64240);
	put16(p, 0);
	put16(p, 0);
	put_bytes(p, s->opts, s->optlen);
	assert_int_equal(p->n - tcp, 20 + s->optlen);

	rec = p->n;
	put8(p, 0x16);
	put16(p, 0x0301);
	put16(p, 0);			/* record length, below */
	hs = p->n;
	put8(p, 1);
	put8(p, 0);
	put16(p, 0);			/* handshake length, below */
	put16(p, 0x0303);
	p->random_off = p->n;
	for (i = 0; i < 32; i++)
		put8(p, 0xa0 + (unsigned)i);
	put8(p, (unsigned)s->sid);
	memset(fill, 0x5e, sizeof(fill));
	put_bytes(p, fill, s->sid);
	assert_true(s->cslen <= sizeof(ciphers));
	put16(p, (unsigned)s->cslen);
	put_bytes(p, ciphers, s->cslen);
	put8(p, (unsigned)s->ncomp);
	for (i = 0; i < s->ncomp; i++)
		put8(p, 0);
	put16(p, 0);			/* extensions length, below */
	exts = p->n;
	put16(p, 0x0a0a);		/* GREASE, empty */
	put16(p, 0);
	if (s->name != NULL)
		put_sni(p, s->name, s->name2);
	put16(p, 43);			/* supported_versions: 1.3, 1.2 */
	put16(p, 5);
	put8(p, 4);
	put16(p, 0x0304);
	put16(p, 0x0303);
	put16(p, 16);			/* ALPN: h2, http/1.1 */
	put16(p, 14);
	put16(p, 12);
	put8(p, 2);
	put_bytes(p, "h2", 2);
	put8(p, 8);
	put_bytes(p, "http/1.1", 8);
	put16(p, 51);			/* key_share, x25519 */
	put16(p, 38);
	put16(p, 36);
	put16(p, 29);
	put16(p, 32);
	memset(fill, 0x33, sizeof(fill));
	put_bytes(p, fill, 32);
	put_bytes(p, s->ext, s->extlen);
	for (k = 1; k < s->nsni && s->name != NULL; k++)
		put_sni(p, s->name, NULL);
	set16(p, exts - 2, (unsigned)(p->n - exts));
	set16(p, hs + 2, (unsigned)(p->n - hs - 4));
	set16(p, rec + 3, (unsigned)(p->n - rec - 5));
	assert_true(p->n - hs - 4 < 0x10000);

	assert_true(s->cut < p->n - rec);
	p->n -= s->cut;
	for (i = 0; i < s->trailing; i++)
		put8(p, 0x17);

	set16(p, ip + 2, (unsigned)(p->n - ip));
	set16(p, ip + 10, nfq_csum_fold(nfq_csum_add(0, p->b + ip,
	    (size_t)s->ihl * 4)));
}

/* ---- the program -------------------------------------------------------- */

static int
run_len(struct nfq_ksni *k, const uint8_t *b, size_t n, uint32_t ifindex)
{
	struct __sk_buff ctx;
	int rc;

	memset(&ctx, 0, sizeof(ctx));
	ctx.ingress_ifindex = ifindex;
	LIBBPF_OPTS(bpf_test_run_opts, o,
	    .data_in = b,
	    .data_size_in = (uint32_t)n,
	    .ctx_in = &ctx,
	    .ctx_size_in = sizeof(ctx),
	    .repeat = 1);
	rc = bpf_prog_test_run_opts(nfq_ksni_prog_fd(k), &o);
	if (rc != 0)
		fail_msg("BPF_PROG_TEST_RUN (%zu bytes): %s", n,
		    strerror(errno));
	return (int)o.retval;
}

static int
run(struct nfq_ksni *k, const struct pkt *p, uint32_t ifindex)
{
	return run_len(k, p->b, p->n, ifindex);
}

static int
run_spec(struct nfq_ksni *k, const struct spec *s)
{
	struct pkt p;

	build(&p, s);
	return run(k, &p, IFINDEX);
}

static int
learn(struct nfq_ksni *k, const char *name, uint64_t ttl_ms)
{
	return nfq_ksni_add(k, IFINDEX, inet_addr(DADDR), DPORT, name,
	    strlen(name), ttl_ms);
}

static int
setup(void **state)
{
	char err[256];
	struct nfq_ksni *k;

	snprintf(dir, sizeof(dir), "/run/sluice-test-ksni-%ld",
	    (long)getpid());
	snprintf(pin, sizeof(pin), "%s/prog", dir);
	if ((k = nfq_ksni_open(pin, 1024, err, sizeof(err))) == NULL) {
		print_error("nfq_ksni_open: %s\n", err);
		return -1;
	}
	if (nfq_ksni_lease(k, 600000) == -1) {
		print_error("nfq_ksni_lease: %s\n", strerror(errno));
		nfq_ksni_close(k);
		return -1;
	}
	*state = k;
	return 0;
}

static int
teardown(void **state)
{
	nfq_ksni_close(*state);
	/* close unpins: the directory must be empty again */
	if (access(pin, F_OK) == 0) {
		print_error("%s still pinned after close\n", pin);
		return -1;
	}
	if (umount(dir) == -1 || rmdir(dir) == -1) {
		print_error("%s: %s\n", dir, strerror(errno));
		return -1;
	}
	return 0;
}

/* ---- tests -------------------------------------------------------------- */

static void
test_open(void **state)
{
	struct nfq_ksni *k = *state;
	struct statfs sf;

	assert_string_equal(nfq_ksni_path(k), pin);
	assert_true(nfq_ksni_prog_fd(k) >= 0);
	assert_int_equal(statfs(dir, &sf), 0);
	assert_true(sf.f_type == BPF_FS_MAGIC);
	assert_int_equal(access(pin, F_OK), 0);
	nfq_ksni_close(NULL);
}

static void
test_learned(void **state)
{
	struct nfq_ksni *k = *state;
	struct spec s = spec_plain();
	struct pkt p;

	build(&p, &s);
	assert_int_equal(run(k, &p, IFINDEX), 0);	/* not learned yet */
	assert_int_equal(learn(k, NAME, 60000), 0);
	assert_int_equal(run(k, &p, IFINDEX), 1);

	/* the context's ingress_ifindex is what the program reads */
	assert_int_equal(run(k, &p, IFINDEX + 1), 0);
	assert_int_equal(run(k, &p, 0), 0);

	s.name = "www.example.com";
	assert_int_equal(run_spec(k, &s), 0);
	s.name = "API.example.com";		/* no case folding */
	assert_int_equal(run_spec(k, &s), 0);
	s.name = "api.example.co";		/* a prefix */
	assert_int_equal(run_spec(k, &s), 0);
	s = spec_plain();
	s.daddr = inet_addr("198.51.100.8");
	assert_int_equal(run_spec(k, &s), 0);
	s = spec_plain();
	s.dport = 8443;
	assert_int_equal(run_spec(k, &s), 0);
	s = spec_plain();
	assert_int_equal(run_spec(k, &s), 1);
}

static void
test_name_lengths(void **state)
{
	struct nfq_ksni *k = *state;
	struct spec s = spec_plain();
	char name[NFQ_KSNI_NAME_MAX + 2];

	memset(name, 'a', sizeof(name));
	name[NFQ_KSNI_NAME_MAX] = '\0';
	assert_int_equal(learn(k, name, 60000), 0);
	assert_int_equal(learn(k, "x", 60000), 0);
	s.name = name;
	assert_int_equal(run_spec(k, &s), 1);
	s.name = "x";
	assert_int_equal(run_spec(k, &s), 1);

	/* the add refuses what no hello can carry */
	errno = 0;
	assert_int_equal(nfq_ksni_add(k, IFINDEX, 0, DPORT, "", 0, 1000), -1);
	assert_int_equal(errno, EINVAL);
	assert_int_equal(nfq_ksni_add(k, IFINDEX, 0, DPORT, name,
	    NFQ_KSNI_NAME_MAX + 1, 1000), -1);
	assert_int_equal(nfq_ksni_add(k, IFINDEX, 0, DPORT, "a\0b", 3, 1000),
	    -1);
}

static void
test_expired(void **state)
{
	struct nfq_ksni *k = *state;
	struct spec s = spec_plain();
	struct timespec ts = { 0, 20 * 1000 * 1000 };

	assert_int_equal(learn(k, NAME, 1), 0);
	nanosleep(&ts, NULL);
	assert_int_equal(run_spec(k, &s), 0);
	/* learned again: live again */
	assert_int_equal(learn(k, NAME, 60000), 0);
	assert_int_equal(run_spec(k, &s), 1);
}

/* Without a live lease (a new program, a dead or stalled reader) nothing
 * is approved, learned or not, and nothing is parsed. */
static void
test_lease(void **state)
{
	struct nfq_ksni *k = *state;
	struct spec s = spec_plain();
	struct nfq_ksni_stats a, b;
	struct timespec ts = { 0, 80 * 1000 * 1000 };

	assert_int_equal(learn(k, NAME, 60000), 0);
	assert_int_equal(run_spec(k, &s), 1);
	nfq_ksni_stats(k, &a);
	assert_int_equal(nfq_ksni_lease(k, 0), 0);
	assert_int_equal(run_spec(k, &s), 0);
	nfq_ksni_stats(k, &b);
	assert_int_equal(b.lapsed - a.lapsed, 1);
	assert_int_equal(b.seen - a.seen, 1);
	assert_int_equal(b.unparsed + b.unknown, a.unparsed + a.unknown);
	/* a short one runs out by itself */
	assert_int_equal(nfq_ksni_lease(k, 30), 0);
	assert_int_equal(run_spec(k, &s), 1);
	nanosleep(&ts, NULL);
	assert_int_equal(run_spec(k, &s), 0);
	/* renewed: the entry was kept */
	assert_int_equal(nfq_ksni_lease(k, 60000), 0);
	assert_int_equal(run_spec(k, &s), 1);
	nfq_ksni_stats(k, &b);
	assert_int_equal(b.seen, b.approved + b.unknown + b.unparsed +
	    b.lapsed);
}

static void
test_clear(void **state)
{
	struct nfq_ksni *k = *state;
	struct spec s = spec_plain(), t = spec_plain();
	struct nfq_ksni_stats st;

	t.name = "other.example.com";
	assert_int_equal(learn(k, NAME, 60000), 0);
	assert_int_equal(learn(k, t.name, 60000), 0);
	assert_int_equal(run_spec(k, &s), 1);
	assert_int_equal(run_spec(k, &t), 1);
	assert_int_equal(nfq_ksni_clear(k), 0);
	assert_int_equal(run_spec(k, &s), 0);
	assert_int_equal(run_spec(k, &t), 0);
	assert_int_equal(learn(k, NAME, 60000), 0);
	assert_int_equal(run_spec(k, &s), 1);
	assert_int_equal(run_spec(k, &t), 0);	/* still of the old one */
	nfq_ksni_stats(k, &st);
	assert_int_equal(st.clears, 1);
	assert_int_equal(st.adds, 3);
	assert_int_equal(st.add_errors, 0);
}

/* Closed while something else (a rule) holds the program: it approves
 * nothing. */
static void
test_close_disarms(void **state)
{
	char err[256];
	struct nfq_ksni *k = *state;
	struct spec s = spec_plain();
	struct pkt p;
	int fd;

	build(&p, &s);
	assert_int_equal(learn(k, NAME, 60000), 0);
	assert_int_equal(run(k, &p, IFINDEX), 1);
	assert_true((fd = dup(nfq_ksni_prog_fd(k))) >= 0);
	nfq_ksni_close(k);
	*state = NULL;
	assert_int_equal(access(pin, F_OK), -1);
	{
		struct __sk_buff ctx;

		memset(&ctx, 0, sizeof(ctx));
		ctx.ingress_ifindex = IFINDEX;
		LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = p.b,
		    .data_size_in = (uint32_t)p.n, .ctx_in = &ctx,
		    .ctx_size_in = sizeof(ctx));
		assert_int_equal(bpf_prog_test_run_opts(fd, &o), 0);
		assert_int_equal(o.retval, 0);
	}

	/* a stale pin (a run that died holding the program) is disarmed
	 * and replaced by the next open */
	k = nfq_ksni_open(pin, 16, err, sizeof(err));
	if (k == NULL)
		fail_msg("nfq_ksni_open: %s", err);
	*state = k;
	assert_int_equal(nfq_ksni_lease(k, 600000), 0);
	assert_int_equal(learn(k, NAME, 60000), 0);
	assert_int_equal(run(k, &p, IFINDEX), 1);
	close(fd);
	assert_true((fd = dup(nfq_ksni_prog_fd(k))) >= 0);
	{
		struct nfq_ksni *k2 = nfq_ksni_open(pin, 16, err, sizeof(err));
		struct __sk_buff ctx;

		if (k2 == NULL)
			fail_msg("nfq_ksni_open again: %s", err);
		memset(&ctx, 0, sizeof(ctx));
		ctx.ingress_ifindex = IFINDEX;
		LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = p.b,
		    .data_size_in = (uint32_t)p.n, .ctx_in = &ctx,
		    .ctx_size_in = sizeof(ctx));
		assert_int_equal(bpf_prog_test_run_opts(fd, &o), 0);
		assert_int_equal(o.retval, 0);
		/* the first one's close leaves the second one's pin */
		nfq_ksni_close(k);
		assert_int_equal(access(pin, F_OK), 0);
		*state = k2;
	}
	close(fd);
}

static void
test_hello_shapes(void **state)
{
	static const uint8_t ech[] = { 0xfe, 0x0d, 0, 2, 0xaa, 0xbb };
	static const uint8_t esni[] = { 0xff, 0xce, 0, 0 };
	static const uint8_t alpn2[] = { 0, 16, 0, 5, 0, 3, 2, 'h', '2' };
	static const uint8_t badalpn[] = { 0, 17, 0, 0 };
	static const uint8_t sv2[] = { 0, 43, 0, 3, 2, 3, 4 };
	static const uint8_t ks2[] = { 0, 51, 0, 0 };
	static const uint8_t grease2[] = { 0x0a, 0x0a, 0, 0 };
	struct nfq_ksni *k = *state;
	struct spec s;
	uint8_t many[65 * 4];
	size_t i;

	assert_int_equal(learn(k, NAME, 60000), 0);
	s = spec_plain();
	assert_int_equal(run_spec(k, &s), 1);

	s.ext = ech;
	s.extlen = sizeof(ech);
	assert_int_equal(run_spec(k, &s), 0);
	s.ext = esni;
	s.extlen = sizeof(esni);
	assert_int_equal(run_spec(k, &s), 0);
	s.ext = alpn2;			/* a second ALPN */
	s.extlen = sizeof(alpn2);
	assert_int_equal(run_spec(k, &s), 0);
	s.ext = sv2;			/* a second supported_versions */
	s.extlen = sizeof(sv2);
	assert_int_equal(run_spec(k, &s), 0);
	s.ext = ks2;			/* any type repeated */
	s.extlen = sizeof(ks2);
	assert_int_equal(run_spec(k, &s), 0);
	s.ext = grease2;
	s.extlen = sizeof(grease2);
	assert_int_equal(run_spec(k, &s), 0);
	s.ext = badalpn;		/* an unknown empty one: fine */
	s.extlen = sizeof(badalpn);
	assert_int_equal(run_spec(k, &s), 1);

	/* 64 extensions are read, a 65th is too many */
	for (i = 0; i < 65; i++) {
		many[i * 4] = 0x70;
		many[i * 4 + 1] = (uint8_t)i;
		many[i * 4 + 2] = 0;
		many[i * 4 + 3] = 0;
	}
	s.ext = many;
	s.extlen = (64 - 5) * 4;	/* with the 5 of spec_plain */
	assert_int_equal(run_spec(k, &s), 1);
	s.extlen += 4;
	assert_int_equal(run_spec(k, &s), 0);

	s = spec_plain();
	s.name = NULL;
	assert_int_equal(run_spec(k, &s), 0);
	s = spec_plain();
	s.nsni = 2;
	assert_int_equal(run_spec(k, &s), 0);
	s = spec_plain();
	s.name2 = "other.example.com";	/* two names in the list */
	assert_int_equal(run_spec(k, &s), 0);
	s = spec_plain();
	s.sid = 0;
	assert_int_equal(run_spec(k, &s), 1);
	s.sid = 33;			/* longer than TLS allows */
	assert_int_equal(run_spec(k, &s), 0);
	s = spec_plain();
	s.cslen = 7;			/* half a cipher suite */
	assert_int_equal(run_spec(k, &s), 0);
	s.cslen = 0;
	assert_int_equal(run_spec(k, &s), 0);
	s.cslen = 2;
	assert_int_equal(run_spec(k, &s), 1);
	s = spec_plain();
	s.ncomp = 0;
	assert_int_equal(run_spec(k, &s), 0);
	s.ncomp = 2;
	assert_int_equal(run_spec(k, &s), 1);
	s = spec_plain();
	s.cut = 1;			/* the rest in the next segment */
	assert_int_equal(run_spec(k, &s), 0);
	s.cut = 60;
	assert_int_equal(run_spec(k, &s), 0);
	s = spec_plain();
	s.trailing = 1;
	assert_int_equal(run_spec(k, &s), 0);
	s.trailing = 6;
	assert_int_equal(run_spec(k, &s), 0);
}

/* Bytes inside the hello whose change the program must notice. */
static void
test_hello_fields(void **state)
{
	struct nfq_ksni *k = *state;
	struct spec s = spec_plain();
	struct pkt p, q;
	size_t rec, body;

	assert_int_equal(learn(k, NAME, 60000), 0);
	build(&p, &s);
	assert_int_equal(run(k, &p, IFINDEX), 1);
	rec = p.ip_off + 40;
	body = rec + 9;

#define MUTATED(at, v) do {						\
	q = p;								\
	q.b[(at)] = (uint8_t)(v);					\
	assert_int_equal(run(k, &q, IFINDEX), 0);			\
} while (0)
	MUTATED(rec, 0x17);			/* application data */
	MUTATED(rec + 1, 0x02);			/* record version */
	MUTATED(rec + 5, 2);			/* a ServerHello */
	MUTATED(rec + 6, 1);			/* handshake length */
	MUTATED(rec + 8, p.b[rec + 8] - 1);
	MUTATED(body + 34, 33);			/* session id length */
	MUTATED(body + 34, 31);
	MUTATED(body + 34 + 33 + 1, 7);		/* odd cipher suites */
	MUTATED(body + 34 + 33 + 2 + 8, 0);	/* no compression method */
#undef MUTATED

	/* a record over 16384 bytes, lengths otherwise consistent */
	q = p;
	set16(&q, rec + 3, 16385);
	assert_int_equal(run(k, &q, IFINDEX), 0);
}

static void
test_tcp_ip(void **state)
{
	static const uint8_t ts[] = { 1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0 };
	static const uint8_t ts_eol[] = { 8, 10, 0, 0, 0, 1, 0, 0, 0, 0, 0,
	    0 };
	static const uint8_t eol_junk[] = { 8, 10, 0, 0, 0, 1, 0, 0, 0, 0, 0,
	    1 };
	static const uint8_t ts2[] = { 8, 10, 0, 0, 0, 1, 0, 0, 0, 0, 1, 1,
	    8, 10, 0, 0, 0, 2, 0, 0, 0, 0, 1, 1 };
	static const uint8_t md5[] = { 1, 1, 19, 18, 1, 2, 3, 4, 5, 6, 7, 8, 9,
	    10, 11, 12, 13, 14, 15, 16 };
	static const uint8_t ao[] = { 29, 4, 1, 1 };
	static const uint8_t sack[] = { 1, 1, 5, 10, 0, 0, 0, 1, 0, 0, 0, 2 };
	static const uint8_t mss[] = { 2, 4, 5, 0xb4 };
	static const uint8_t nops[] = { 1, 1, 1, 1 };
	static const uint8_t ts_short[] = { 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 8,
	    10 };
	struct nfq_ksni *k = *state;
	struct spec s;

	assert_int_equal(learn(k, NAME, 60000), 0);

#define OPTS(o, want) do {						\
	s = spec_plain();						\
	s.opts = (o);							\
	s.optlen = sizeof(o);						\
	assert_int_equal(run_spec(k, &s), (want));			\
} while (0)
	OPTS(ts, 1);
	OPTS(ts_eol, 1);
	OPTS(nops, 1);
	OPTS(eol_junk, 0);
	OPTS(ts2, 0);
	OPTS(md5, 0);
	OPTS(ao, 0);
	OPTS(sack, 0);
	OPTS(mss, 0);
	OPTS(ts_short, 0);
#undef OPTS

	s = spec_plain();
	s.ihl = 6;
	assert_int_equal(run_spec(k, &s), 0);
	s = spec_plain();
	s.flags = 0x12;			/* SYN|ACK */
	assert_int_equal(run_spec(k, &s), 0);
	s.flags = 0x38;			/* URG|PSH|ACK */
	assert_int_equal(run_spec(k, &s), 0);
	s.flags = 0x19;			/* FIN|PSH|ACK */
	assert_int_equal(run_spec(k, &s), 0);
	s.flags = 0x1c;			/* RST|PSH|ACK */
	assert_int_equal(run_spec(k, &s), 0);
	s.flags = 0x08;			/* no ACK */
	assert_int_equal(run_spec(k, &s), 0);
	s.flags = 0x10;			/* ACK alone */
	assert_int_equal(run_spec(k, &s), 1);
	s = spec_plain();
	s.frag = 0x2000;		/* MF */
	assert_int_equal(run_spec(k, &s), 0);
	s.frag = 0x0001;		/* offset 8 */
	assert_int_equal(run_spec(k, &s), 0);
	s.frag = 0;			/* no DF: fine */
	assert_int_equal(run_spec(k, &s), 1);

	/* a total length that disagrees with the packet */
	{
		struct pkt p;

		s = spec_plain();
		build(&p, &s);
		set16(&p, p.ip_off + 2, (unsigned)(p.n - p.ip_off - 1));
		assert_int_equal(run(k, &p, IFINDEX), 0);
		p.n++;			/* one byte more than it says */
		set16(&p, p.ip_off + 2, (unsigned)(p.n - p.ip_off - 2));
		assert_int_equal(run(k, &p, IFINDEX), 0);
	}
}

static void
test_stats(void **state)
{
	struct nfq_ksni *k = *state;
	struct nfq_ksni_stats a, b;
	struct spec s;

	assert_int_equal(learn(k, NAME, 60000), 0);
	nfq_ksni_stats(k, &a);
	s = spec_plain();
	assert_int_equal(run_spec(k, &s), 1);
	assert_int_equal(run_spec(k, &s), 1);
	s.name = "nope.example.com";
	assert_int_equal(run_spec(k, &s), 0);
	s = spec_plain();
	s.flags = 0x12;
	assert_int_equal(run_spec(k, &s), 0);
	s = spec_plain();
	s.name = NULL;
	assert_int_equal(run_spec(k, &s), 0);
	s = spec_plain();
	s.cut = 3;
	assert_int_equal(run_spec(k, &s), 0);
	nfq_ksni_stats(k, &b);
	assert_int_equal(b.seen - a.seen, 6);
	assert_int_equal(b.approved - a.approved, 2);
	assert_int_equal(b.unknown - a.unknown, 1);
	assert_int_equal(b.unparsed - a.unparsed, 3);
	assert_int_equal(b.adds, 1);
	assert_int_equal(b.lapsed, 0);
	assert_int_equal(b.seen, b.approved + b.unknown + b.unparsed);
}

/*
 * What the program approves, userspace must read the same way: the same
 * destination, no signature, and one whole ClientHello filling the
 * payload whose one name is the learned one, without ECH.
 */
static void
assert_userspace_agrees(const uint8_t *ip, size_t len)
{
	struct nfq_tuple t;
	struct nfq_tcp_opts o;
	struct nfq_tls_hello h;

	assert_int_equal(nfq_packet_parse(ip, len, &t), NFQ_PARSE_OK);
	assert_int_equal(t.proto, 6);
	assert_true(t.daddr == inet_addr(DADDR));
	assert_int_equal(t.dport, DPORT);
	nfq_tcp_options(t.tcp_opts, t.tcp_optlen, &o);
	assert_false(o.signature);
	assert_false(o.malformed);
	memset(&h, 0, sizeof(h));
	assert_int_equal(nfq_tls_parse_hello(t.l4_payload, t.l4_len, &h),
	    NFQ_TLS_OK);
	assert_int_equal(h.consumed, t.l4_len);
	assert_true(h.has_sni);
	assert_false(h.ech);
	assert_string_equal(h.sni, NAME);
}

static void
test_robust(void **state)
{
	static const uint8_t ts[] = { 1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0 };
	struct nfq_ksni *k = *state;
	struct spec s = spec_plain();
	struct pkt p, q;
	size_t n, at;
	unsigned seed = 20260101, approved = 0, tries = 0;
	int i, r;

	s.opts = ts;
	s.optlen = sizeof(ts);
	assert_int_equal(learn(k, NAME, 600000), 0);
	build(&p, &s);
	assert_int_equal(run(k, &p, IFINDEX), 1);
	assert_userspace_agrees(p.b + p.ip_off, p.n - p.ip_off);

	/* every truncation, with the IP length as it was and as cut (from
	 * a whole IPv4 header on: the test run refuses less, EINVAL, and
	 * no hook sees less) */
	for (n = p.ip_off + 20; n < p.n; n++) {
		assert_int_equal(run_len(k, p.b, n, IFINDEX), 0);
		q = p;
		set16(&q, q.ip_off + 2, (unsigned)(n - q.ip_off));
		assert_int_equal(run_len(k, q.b, n, IFINDEX), 0);
	}

	/* the random: any value is still the same hello */
	for (i = 0; i < 200; i++) {
		q = p;
		at = q.random_off + (size_t)rand_r(&seed) % 32;
		q.b[at] = (uint8_t)rand_r(&seed);
		assert_int_equal(run(k, &q, IFINDEX), 1);
	}

	/* anywhere: what is approved, userspace reads as the learned hello */
	for (i = 0; i < 5000; i++) {
		q = p;
		at = q.ip_off + (size_t)rand_r(&seed) % (q.n - q.ip_off);
		do
			q.b[at] = (uint8_t)rand_r(&seed);
		while (q.b[at] == p.b[at]);
		tries++;
		if ((r = run(k, &q, IFINDEX)) == 1) {
			approved++;
			assert_userspace_agrees(q.b + q.ip_off, q.n - q.ip_off);
		} else
			assert_int_equal(r, 0);
	}
	print_message("mutations: %u of %u still approved\n", approved, tries);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_open, setup, teardown),
		cmocka_unit_test_setup_teardown(test_learned, setup, teardown),
		cmocka_unit_test_setup_teardown(test_name_lengths, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_expired, setup, teardown),
		cmocka_unit_test_setup_teardown(test_clear, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lease, setup, teardown),
		cmocka_unit_test_setup_teardown(test_clear, setup, teardown),
		cmocka_unit_test_setup_teardown(test_close_disarms, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_hello_shapes, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_hello_fields, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_tcp_ip, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stats, setup, teardown),
		cmocka_unit_test_setup_teardown(test_robust, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
