/* test_nl.c: rtnetlink plumbing (nl.c) and named namespaces (netns.c) against the kernel. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <linux/magic.h>
#include <netinet/in.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <cmocka.h>

#include "gateway/gw.h"
#include "gateway/nl.h"

/*
 * The process moves into a network namespace of its own (the "gateway"
 * here) and a mount namespace of its own whose mounts propagate nowhere,
 * so everything made vanishes with it. Each test makes a second network
 * namespace, the "sandbox", held only by a descriptor. Names under
 * /run/netns and /etc/netns are files on the host's file system: they
 * carry the pid and are removed by the tests that make them. Needs root;
 * skips otherwise.
 */

#define WAIT_MS		1000

static const char *env_skip;	/* why the tests cannot run, or NULL */
static int gw_ns = -1;		/* the process's own network namespace */

struct fixture {
	int		 sb_ns;		/* the sandbox's */
	struct gw_nl	*gw;		/* a socket in gw_ns */
	struct gw_nl	*sb;		/* ... in sb_ns */
	uint8_t		 gwmac[GW_NL_MAC_LEN], sbmac[GW_NL_MAC_LEN];
};

static uint32_t
ip4(const char *s)
{
	struct in_addr a;

	assert_int_equal(inet_pton(AF_INET, s, &a), 1);
	return a.s_addr;
}

static int
group_setup(void **state)
{
	(void)state;
	if (geteuid() != 0) {
		env_skip = "needs root (namespaces)";
		return 0;
	}
	if (unshare(CLONE_NEWNET | CLONE_NEWNS) == -1) {
		env_skip = "unshare(CLONE_NEWNET | CLONE_NEWNS) failed";
		return 0;
	}
	/* nothing mounted here may reach the host */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == -1) {
		env_skip = "cannot make / private in the new mount namespace";
		return 0;
	}
	gw_ns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	if (gw_ns == -1)
		env_skip = "/proc/self/ns/net";
	return 0;
}

/* lo up with 192.0.2.1/32, a place to send to past the gateway. */
static void
gateway_lo(void)
{
	static bool done;
	struct gw_nl *nl;
	uint32_t lo;
	char err[256];

	if (done)
		return;
	done = true;
	if ((nl = gw_nl_open(err, sizeof(err))) == NULL)
		fail_msg("%s", err);
	assert_int_equal(gw_nl_link_index(nl, "lo", &lo, err, sizeof(err)), 0);
	assert_int_equal(lo, 1);
	assert_int_equal(gw_nl_link_up(nl, lo, err, sizeof(err)), 0);
	assert_int_equal(gw_nl_addr_add(nl, lo, ip4("192.0.2.1"), 32, err,
	    sizeof(err)), 0);
	gw_nl_close(nl);
}

/* A new network namespace, held by the descriptor returned. */
static int
new_netns(void)
{
	int fd;

	assert_int_equal(unshare(CLONE_NEWNET), 0);
	fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(setns(gw_ns, CLONE_NEWNET), 0);
	return fd;
}

static struct gw_nl *
nl_in(int nsfd)
{
	struct gw_nl *nl;
	char err[256];

	assert_int_equal(setns(nsfd, CLONE_NEWNET), 0);
	nl = gw_nl_open(err, sizeof(err));
	assert_int_equal(setns(gw_ns, CLONE_NEWNET), 0);
	if (nl == NULL)
		fail_msg("%s", err);
	return nl;
}

static int
fixture_setup(void **state)
{
	struct fixture *fx;

	*state = NULL;
	if (env_skip != NULL)
		return 0;
	fx = calloc(1, sizeof(*fx));
	assert_non_null(fx);
	gateway_lo();
	fx->sb_ns = new_netns();
	fx->gw = nl_in(gw_ns);
	fx->sb = nl_in(fx->sb_ns);
	*state = fx;
	return 0;
}

static int
fixture_teardown(void **state)
{
	struct fixture *fx = *state;
	uint32_t idx;
	char err[256];

	if (fx == NULL)
		return 0;
	/* veths the test left in the process's namespace */
	for (int i = 0; i < 4; i++) {
		char name[IF_NAMESIZE];

		snprintf(name, sizeof(name), "sg%d", i);
		if (gw_nl_link_index(fx->gw, name, &idx, err, sizeof(err)) == 0)
			gw_nl_link_del(fx->gw, idx, err, sizeof(err));
	}
	gw_nl_close(fx->gw);
	gw_nl_close(fx->sb);
	close(fx->sb_ns);
	free(fx);
	return 0;
}

#define assert_prefix(s, prefix) \
	assert_true(strncmp((s), (prefix), strlen(prefix)) == 0)

#define NEED_ENV(state) do {						\
	if (*(state) == NULL) {						\
		print_message("skipped: %s\n", env_skip);		\
		skip();							\
	}								\
} while (0)

/* The first line of `ip ARGS` run in the namespace nsfd, "" if none. */
static const char *
ip_out(int nsfd, const char *args)
{
	static char line[1024];
	char cmd[256];
	FILE *f;

	line[0] = '\0';
	snprintf(cmd, sizeof(cmd), "ip %s 2>/dev/null", args);
	assert_int_equal(setns(nsfd, CLONE_NEWNET), 0);
	f = popen(cmd, "r");
	assert_int_equal(setns(gw_ns, CLONE_NEWNET), 0);
	assert_non_null(f);
	if (fgets(line, sizeof(line), f) == NULL)
		line[0] = '\0';
	pclose(f);
	return line;
}

static int
udp_in(int nsfd, const char *addr, uint16_t port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET,
	    .sin_port = htons(port) };
	int fd;

	sin.sin_addr.s_addr = addr ? ip4(addr) : INADDR_ANY;
	assert_int_equal(setns(nsfd, CLONE_NEWNET), 0);
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	assert_int_equal(setns(gw_ns, CLONE_NEWNET), 0);
	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	return fd;
}

/* Both sides as sandbox.c plumbs them: sg1 10.213.0.5/30 here, eth0
 * 10.213.0.6/30 over there with its default route via sg1. */
static void
plumb(struct fixture *fx, uint32_t *gwidx, uint32_t *sbidx)
{
	uint32_t lo;
	char err[256];

	if (gw_nl_veth_add(fx->gw, "sg1", "eth0", fx->sb_ns, err,
	    sizeof(err)) == -1)
		fail_msg("%s", err);
	assert_int_equal(gw_nl_link_index(fx->gw, "sg1", gwidx, err,
	    sizeof(err)), 0);
	assert_int_equal(gw_nl_link_set_alias(fx->gw, *gwidx, "sb-one", err,
	    sizeof(err)), 0);
	assert_int_equal(gw_nl_addr_add(fx->gw, *gwidx, ip4("10.213.0.5"), 30,
	    err, sizeof(err)), 0);
	assert_int_equal(gw_nl_link_up(fx->gw, *gwidx, err, sizeof(err)), 0);

	assert_int_equal(gw_nl_link_index(fx->sb, "lo", &lo, err,
	    sizeof(err)), 0);
	assert_int_equal(gw_nl_link_up(fx->sb, lo, err, sizeof(err)), 0);
	assert_int_equal(gw_nl_link_index(fx->sb, "eth0", sbidx, err,
	    sizeof(err)), 0);
	assert_int_equal(gw_nl_addr_add(fx->sb, *sbidx, ip4("10.213.0.6"), 30,
	    err, sizeof(err)), 0);
	assert_int_equal(gw_nl_link_up(fx->sb, *sbidx, err, sizeof(err)), 0);
	if (gw_nl_route_add_default(fx->sb, *sbidx, ip4("10.213.0.5"), err,
	    sizeof(err)) == -1)
		fail_msg("%s", err);
	/* each side knows the other's address for good */
	assert_int_equal(gw_nl_link_mac(fx->gw, *gwidx, fx->gwmac, err,
	    sizeof(err)), 0);
	assert_int_equal(gw_nl_link_mac(fx->sb, *sbidx, fx->sbmac, err,
	    sizeof(err)), 0);
	assert_int_equal(gw_nl_neigh_set(fx->gw, *gwidx, ip4("10.213.0.6"),
	    fx->sbmac, err, sizeof(err)), 0);
	assert_int_equal(gw_nl_neigh_set(fx->sb, *sbidx, ip4("10.213.0.5"),
	    fx->gwmac, err, sizeof(err)), 0);
}

static const char *
mac_str(const uint8_t mac[GW_NL_MAC_LEN])
{
	static char buf[18];

	snprintf(buf, sizeof(buf), "%02x:%02x:%02x:%02x:%02x:%02x", mac[0],
	    mac[1], mac[2], mac[3], mac[4], mac[5]);
	return buf;
}

static void
test_veth_peer_in_other_namespace(void **state)
{
	struct fixture *fx = *state;
	uint32_t a, b, c;
	char err[256];

	NEED_ENV(state);
	assert_int_equal(gw_nl_veth_add(fx->gw, "sg1", "eth0", fx->sb_ns, err,
	    sizeof(err)), 0);
	assert_int_equal(gw_nl_link_index(fx->gw, "sg1", &a, err,
	    sizeof(err)), 0);
	assert_true(a > 1);
	/* the peer exists over there only, by the name asked for */
	assert_int_equal(gw_nl_link_index(fx->sb, "eth0", &b, err,
	    sizeof(err)), 0);
	assert_true(b > 1);
	assert_int_equal(gw_nl_link_index(fx->gw, "eth0", &c, err,
	    sizeof(err)), -1);
	assert_int_equal(errno, ENODEV);
	assert_int_equal(c, 0);
	assert_string_equal(err, "find eth0: No such device");
	assert_int_equal(gw_nl_link_index(fx->sb, "sg1", &c, err,
	    sizeof(err)), -1);
	assert_int_equal(errno, ENODEV);
	/* and the kernel agrees, seen through ip(8) */
	assert_non_null(strstr(ip_out(fx->sb_ns, "-o link show dev eth0"),
	    "eth0@if"));
}

static void
test_veth_exists(void **state)
{
	struct fixture *fx = *state;
	char err[256];

	NEED_ENV(state);
	assert_int_equal(gw_nl_veth_add(fx->gw, "sg1", "eth0", fx->sb_ns, err,
	    sizeof(err)), 0);
	assert_int_equal(gw_nl_veth_add(fx->gw, "sg1", "eth0", fx->sb_ns, err,
	    sizeof(err)), -1);
	assert_int_equal(errno, EEXIST);
	assert_prefix(err, "create veth sg1/eth0: File exists");
	/* a free name here, a taken one over there */
	assert_int_equal(gw_nl_veth_add(fx->gw, "sg2", "eth0", fx->sb_ns, err,
	    sizeof(err)), -1);
	assert_int_equal(errno, EEXIST);
	assert_int_equal(gw_nl_veth_add(fx->gw, "sg-name-too-long", "eth0",
	    -1, err, sizeof(err)), -1);
	assert_int_equal(errno, EINVAL);
}

static void
test_plumbed_veth_carries_traffic(void **state)
{
	struct fixture *fx = *state;
	uint32_t gwidx, sbidx;
	struct sockaddr_in to = { .sin_family = AF_INET,
	    .sin_port = htons(5353) };
	struct pollfd pfd;
	char buf[16];
	int rx, tx;

	NEED_ENV(state);
	plumb(fx, &gwidx, &sbidx);
	assert_non_null(strstr(ip_out(gw_ns, "-o -4 addr show dev sg1"),
	    "inet 10.213.0.5/30"));
	assert_non_null(strstr(ip_out(gw_ns, "-o link show dev sg1"),
	    "alias sb-one"));
	assert_non_null(strstr(ip_out(gw_ns, "-o link show dev sg1"),
	    "state UP"));
	assert_non_null(strstr(ip_out(fx->sb_ns, "-o -4 addr show dev eth0"),
	    "inet 10.213.0.6/30"));
	assert_non_null(strstr(ip_out(fx->sb_ns, "-o link show dev lo"),
	    "<LOOPBACK,UP,LOWER_UP>"));
	assert_string_equal(ip_out(fx->sb_ns, "route show default"),
	    "default via 10.213.0.5 dev eth0 \n");
	/* the addresses read are the interfaces' own, and the entries are
	 * permanent */
	assert_non_null(strstr(ip_out(gw_ns, "-o link show dev sg1"),
	    mac_str(fx->gwmac)));
	assert_non_null(strstr(ip_out(fx->sb_ns, "-o link show dev eth0"),
	    mac_str(fx->sbmac)));
	assert_memory_not_equal(fx->gwmac, fx->sbmac, GW_NL_MAC_LEN);
	{
		char want[96];

		snprintf(want, sizeof(want), "10.213.0.6 lladdr %s "
		    "PERMANENT \n", mac_str(fx->sbmac));
		assert_string_equal(ip_out(gw_ns, "neigh show dev sg1"), want);
		snprintf(want, sizeof(want), "10.213.0.5 lladdr %s "
		    "PERMANENT \n", mac_str(fx->gwmac));
		assert_string_equal(ip_out(fx->sb_ns, "neigh show dev eth0"),
		    want);
	}
	/* a datagram from the sandbox to an address off its /30 (the
	 * gateway namespace's lo has it) leaves by the default route */
	rx = udp_in(gw_ns, "192.0.2.1", 5353);
	tx = udp_in(fx->sb_ns, "10.213.0.6", 0);
	to.sin_addr.s_addr = ip4("192.0.2.1");
	assert_int_equal(sendto(tx, "hi", 2, 0, (struct sockaddr *)&to,
	    sizeof(to)), 2);
	pfd = (struct pollfd){ .fd = rx, .events = POLLIN };
	assert_int_equal(poll(&pfd, 1, WAIT_MS), 1);
	assert_int_equal(recv(rx, buf, sizeof(buf), 0), 2);
	close(rx);
	close(tx);
}

static void
test_refusals_carry_the_kernels_reason(void **state)
{
	struct fixture *fx = *state;
	uint32_t gwidx, sbidx;
	char err[256];

	NEED_ENV(state);
	plumb(fx, &gwidx, &sbidx);
	/* twice the same */
	assert_int_equal(gw_nl_addr_add(fx->gw, gwidx, ip4("10.213.0.5"), 30,
	    err, sizeof(err)), -1);
	assert_int_equal(errno, EEXIST);
	assert_int_equal(gw_nl_route_add_default(fx->sb, sbidx,
	    ip4("10.213.0.5"), err, sizeof(err)), -1);
	assert_int_equal(errno, EEXIST);
	/* no such interface */
	assert_int_equal(gw_nl_addr_add(fx->gw, 99999, ip4("10.0.0.1"), 30,
	    err, sizeof(err)), -1);
	assert_int_equal(errno, ENODEV);
	print_message("kernel says: %s\n", err);
	assert_prefix(err, "add 10.0.0.1/30 to ifindex 99999: No such device");
	assert_int_equal(gw_nl_link_up(fx->gw, 99999, err, sizeof(err)), -1);
	assert_int_equal(errno, ENODEV);
	assert_int_equal(gw_nl_link_del(fx->gw, 99999, err, sizeof(err)), -1);
	assert_int_equal(errno, ENODEV);
	assert_int_equal(gw_nl_link_mac(fx->gw, 99999, fx->gwmac, err,
	    sizeof(err)), -1);
	assert_int_equal(errno, ENODEV);
	assert_int_equal(gw_nl_neigh_set(fx->gw, 99999, ip4("10.0.0.1"),
	    fx->gwmac, err, sizeof(err)), -1);
	assert_int_equal(errno, ENODEV);
	assert_int_equal(gw_nl_addr_add(fx->gw, gwidx, ip4("10.0.0.1"), 33,
	    err, sizeof(err)), -1);
	assert_int_equal(errno, EINVAL);
	/* a gateway off every connected network: the kernel says why */
	assert_int_equal(gw_nl_route_add_default(fx->gw, gwidx,
	    ip4("198.51.100.1"), err, sizeof(err)), -1);
	assert_int_equal(errno, ENETUNREACH);
	print_message("kernel says: %s\n", err);
	assert_prefix(err, "add default route via 198.51.100.1 dev ifindex ");
}

static void
test_del_takes_the_peer(void **state)
{
	struct fixture *fx = *state;
	uint32_t gwidx, sbidx, idx;
	char err[256];

	NEED_ENV(state);
	plumb(fx, &gwidx, &sbidx);
	assert_int_equal(gw_nl_link_del(fx->gw, gwidx, err, sizeof(err)), 0);
	assert_int_equal(gw_nl_link_index(fx->gw, "sg1", &idx, err,
	    sizeof(err)), -1);
	assert_int_equal(errno, ENODEV);
	assert_int_equal(gw_nl_link_index(fx->sb, "eth0", &idx, err,
	    sizeof(err)), -1);
	assert_int_equal(errno, ENODEV);
	assert_string_equal(ip_out(fx->sb_ns, "route show default"), "");
}

struct seen {
	unsigned	 n, sg, lo;
	uint32_t	 sg2;
};

static void
seen_cb(uint32_t ifindex, const char *name, void *arg)
{
	struct seen *s = arg;

	s->n++;
	if (strncmp(name, "sg", 2) == 0)
		s->sg++;
	if (strcmp(name, "sg2") == 0)
		s->sg2 = ifindex;
	if (strcmp(name, "lo") == 0 && ifindex == 1)
		s->lo++;
}

static void
test_links_lists_every_interface(void **state)
{
	struct fixture *fx = *state;
	struct seen s = { 0 };
	uint32_t idx;
	char err[256], peer[IF_NAMESIZE];
	int i;

	NEED_ENV(state);
	for (i = 0; i < 3; i++) {
		char name[IF_NAMESIZE];

		snprintf(name, sizeof(name), "sg%d", i);
		snprintf(peer, sizeof(peer), "p%d", i);
		assert_int_equal(gw_nl_veth_add(fx->gw, name, peer, fx->sb_ns,
		    err, sizeof(err)), 0);
	}
	assert_int_equal(gw_nl_links(fx->gw, seen_cb, &s, err, sizeof(err)), 0);
	assert_int_equal(s.n, 4);	/* lo and the three */
	assert_int_equal(s.sg, 3);
	assert_int_equal(s.lo, 1);
	assert_int_equal(gw_nl_link_index(fx->gw, "sg2", &idx, err,
	    sizeof(err)), 0);
	assert_int_equal(s.sg2, idx);
	/* the socket still answers plain requests after a dump */
	assert_int_equal(gw_nl_link_up(fx->gw, idx, err, sizeof(err)), 0);
	memset(&s, 0, sizeof(s));
	assert_int_equal(gw_nl_links(fx->sb, seen_cb, &s, err, sizeof(err)), 0);
	assert_int_equal(s.n, 4);	/* lo, p0, p1, p2 */
	assert_int_equal(s.sg, 0);
}

/*
 * A group delete takes exactly the group's links and their peers in the
 * other namespace, and nothing else; an empty group deletes nothing.
 */
static void
test_group_del(void **state)
{
	struct fixture *fx = *state;
	struct seen s = { 0 };
	uint32_t idx[4];
	char err[256], name[IF_NAMESIZE], peer[IF_NAMESIZE];
	int i;

	NEED_ENV(state);
	for (i = 0; i < 4; i++) {
		snprintf(name, sizeof(name), "sg%d", i);
		snprintf(peer, sizeof(peer), "p%d", i);
		assert_int_equal(gw_nl_veth_add(fx->gw, name, peer, fx->sb_ns,
		    err, sizeof(err)), 0);
		assert_int_equal(gw_nl_link_index(fx->gw, name, &idx[i], err,
		    sizeof(err)), 0);
	}
	/* an empty group: the kernel says ENODEV, and deletes nothing */
	assert_int_equal(gw_nl_group_del(fx->gw, 77, err, sizeof(err)), -1);
	assert_int_equal(errno, ENODEV);
	assert_int_equal(gw_nl_links(fx->gw, seen_cb, &s, err, sizeof(err)), 0);
	assert_int_equal(s.sg, 4);
	assert_int_equal(gw_nl_link_set_group(fx->gw, idx[0], 77, err,
	    sizeof(err)), 0);
	assert_int_equal(gw_nl_link_set_group(fx->gw, idx[2], 77, err,
	    sizeof(err)), 0);
	assert_int_equal(gw_nl_link_set_group(fx->gw, idx[3], 78, err,
	    sizeof(err)), 0);
	assert_int_equal(gw_nl_link_set_group(fx->gw, 99999, 77, err,
	    sizeof(err)), -1);
	assert_int_equal(errno, ENODEV);
	assert_int_equal(gw_nl_group_del(fx->gw, 77, err, sizeof(err)), 0);
	memset(&s, 0, sizeof(s));
	assert_int_equal(gw_nl_links(fx->gw, seen_cb, &s, err, sizeof(err)), 0);
	assert_int_equal(s.sg, 2);
	for (i = 0; i < 4; i++) {
		uint32_t x;

		snprintf(name, sizeof(name), "sg%d", i);
		snprintf(peer, sizeof(peer), "p%d", i);
		assert_int_equal(gw_nl_link_index(fx->gw, name, &x, err,
		    sizeof(err)), i == 0 || i == 2 ? -1 : 0);
		assert_int_equal(gw_nl_link_index(fx->sb, peer, &x, err,
		    sizeof(err)), i == 0 || i == 2 ? -1 : 0);
	}
}

/* ---- named namespaces (netns.c) ------------------------------------- */

static bool
is_netns_mount(const char *path)
{
	struct statfs sfs;

	return statfs(path, &sfs) == 0 && sfs.f_type == NSFS_MAGIC;
}

static bool
same_file(int fd, const char *path)
{
	struct stat a, b;

	return fstat(fd, &a) == 0 && stat(path, &b) == 0 &&
	    a.st_ino == b.st_ino && a.st_dev == b.st_dev;
}

/* In a child in mount namespace mntfd: whether path is a netns mount. */
static bool
netns_mount_in(int mntfd, const char *path)
{
	pid_t pid = fork();
	int status;

	assert_true(pid != -1);
	if (pid == 0) {
		if (setns(mntfd, CLONE_NEWNS) == -1)
			_exit(2);
		_exit(is_netns_mount(path) ? 0 : 1);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) != 2);
	return WEXITSTATUS(status) == 0;
}

static void
test_names_in_own_mount_namespace(void **state)
{
	struct gw gw;
	char name[64], path[128], rpath[160], buf[256], err[512];
	int nsfd, fd;
	ssize_t n;

	if (env_skip != NULL) {
		print_message("skipped: %s\n", env_skip);
		skip();
	}
	(void)state;
	memset(&gw, 0, sizeof(gw));
	gw.mntns_checked = true;
	gw.host_mntfd = -1;
	snprintf(name, sizeof(name), "sluice-test-nl-%d", (int)getpid());
	snprintf(path, sizeof(path), "/run/netns/%s", name);
	snprintf(rpath, sizeof(rpath), "/etc/netns/%s/resolv.conf", name);
	nsfd = gw_netns_create(&gw, name, "10.213.0.1", err, sizeof(err));
	if (nsfd == -1)
		fail_msg("%s", err);
	assert_true(gw.netns_dir_ready);
	assert_true(is_netns_mount(path));
	assert_true(same_file(nsfd, path));
	/* a different namespace from the process's own */
	assert_false(same_file(gw_ns, path));
	fd = open(rpath, O_RDONLY);
	assert_true(fd >= 0);
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	assert_true(n > 0);
	buf[n] = '\0';
	assert_string_equal(buf, "# written by sluiced: the gateway is this "
	    "sandbox's only resolver\nnameserver 10.213.0.1\n");
	/* right already: left alone; wrong: rewritten */
	assert_int_equal(gw_netns_resolv_conf(&gw, name, "10.213.0.1", err,
	    sizeof(err)), 0);
	assert_int_equal(gw_netns_resolv_conf(&gw, name, "10.213.0.9", err,
	    sizeof(err)), 0);
	fd = open(rpath, O_RDONLY);
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	assert_non_null(strstr(buf, "nameserver 10.213.0.9\n"));
	/* a taken name is refused and left as it was */
	assert_int_equal(gw_netns_create(&gw, name, NULL, err, sizeof(err)), -1);
	assert_int_equal(errno, EEXIST);
	assert_true(same_file(nsfd, path));

	assert_int_equal(gw_netns_unname(&gw, name, err, sizeof(err)), 0);
	assert_int_equal(access(path, F_OK), -1);
	assert_int_equal(access(rpath, F_OK), -1);
	snprintf(path, sizeof(path), "/etc/netns/%s", name);
	assert_int_equal(access(path, F_OK), -1);
	/* removing what is gone is no error */
	assert_int_equal(gw_netns_unname(&gw, name, err, sizeof(err)), 0);
	close(nsfd);
}

/*
 * systemd's ProtectSystem=: sluiced in a mount namespace that is a slave
 * of the host's. Here the "host" is the test's mount namespace, and the
 * process moves on into a slave of it. A name made the plain way stays in
 * the slave; made through host_mntfd it is in the host's, and propagates
 * back into the slave. Then the same from a private namespace.
 */
static void
test_names_in_host_mount_namespace(void **state)
{
	struct gw gw;
	char name[64], path[128], err[512];
	int host, nsfd;

	if (env_skip != NULL) {
		print_message("skipped: %s\n", env_skip);
		skip();
	}
	(void)state;
	memset(&gw, 0, sizeof(gw));
	gw.mntns_checked = true;
	gw.host_mntfd = -1;
	/* /run/netns must be a shared mount in the "host" before the slave
	 * copies it, as ip netns (or sluiced's first name) leaves it */
	snprintf(name, sizeof(name), "sluice-test-nl-%d-prep", (int)getpid());
	nsfd = gw_netns_create(&gw, name, NULL, err, sizeof(err));
	if (nsfd == -1)
		fail_msg("%s", err);
	close(nsfd);
	assert_int_equal(gw_netns_unname(&gw, name, err, sizeof(err)), 0);
	host = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);
	assert_true(host >= 0);
	assert_int_equal(unshare(CLONE_NEWNS), 0);
	assert_int_equal(mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL), 0);

	/* the plain way: invisible to the host */
	snprintf(name, sizeof(name), "sluice-test-nl-%d-own", (int)getpid());
	snprintf(path, sizeof(path), "/run/netns/%s", name);
	gw.netns_dir_ready = false;
	nsfd = gw_netns_create(&gw, name, NULL, err, sizeof(err));
	if (nsfd == -1)
		fail_msg("%s", err);
	assert_true(is_netns_mount(path));
	assert_false(netns_mount_in(host, path));
	assert_int_equal(gw_netns_unname(&gw, name, err, sizeof(err)), 0);
	close(nsfd);

	/* through the host's namespace: seen by both */
	gw.host_mntfd = host;
	gw.netns_dir_ready = false;
	snprintf(name, sizeof(name), "sluice-test-nl-%d-host", (int)getpid());
	snprintf(path, sizeof(path), "/run/netns/%s", name);
	nsfd = gw_netns_create(&gw, name, "10.213.0.1", err, sizeof(err));
	if (nsfd == -1)
		fail_msg("%s", err);
	assert_true(netns_mount_in(host, path));
	assert_true(is_netns_mount(path));
	assert_true(same_file(nsfd, path));
	assert_int_equal(access("/etc/netns", F_OK), 0);
	assert_int_equal(gw_netns_unname(&gw, name, err, sizeof(err)), 0);
	assert_false(netns_mount_in(host, path));
	assert_false(is_netns_mount(path));
	assert_int_equal(access(path, F_OK), -1);
	close(nsfd);

	/* a private namespace receives nothing from the host's: the name
	 * is made in both */
	assert_int_equal(unshare(CLONE_NEWNS), 0);
	assert_int_equal(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
	snprintf(name, sizeof(name), "sluice-test-nl-%d-priv", (int)getpid());
	snprintf(path, sizeof(path), "/run/netns/%s", name);
	nsfd = gw_netns_create(&gw, name, NULL, err, sizeof(err));
	if (nsfd == -1)
		fail_msg("%s", err);
	assert_true(netns_mount_in(host, path));
	assert_true(is_netns_mount(path));
	assert_true(same_file(nsfd, path));
	assert_int_equal(gw_netns_unname(&gw, name, err, sizeof(err)), 0);
	assert_false(netns_mount_in(host, path));
	assert_false(is_netns_mount(path));
	assert_int_equal(access(path, F_OK), -1);
	close(nsfd);

	/* a child that cannot get there reports why */
	gw.host_mntfd = gw_ns;		/* a network namespace: EINVAL */
	assert_int_equal(gw_netns_unname(&gw, name, err, sizeof(err)), -1);
	assert_int_equal(errno, EINVAL);
	assert_string_equal(err, "setns into the host's mount namespace: "
	    "Invalid argument");
	close(host);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test_setup_teardown(f, fixture_setup, fixture_teardown)
		T(test_veth_peer_in_other_namespace),
		T(test_veth_exists),
		T(test_plumbed_veth_carries_traffic),
		T(test_refusals_carry_the_kernels_reason),
		T(test_del_takes_the_peer),
		T(test_links_lists_every_interface),
		T(test_group_del),
#undef T
		cmocka_unit_test(test_names_in_own_mount_namespace),
		/* last: it leaves the process in a slave mount namespace */
		cmocka_unit_test(test_names_in_host_mount_namespace),
	};

	return cmocka_run_group_tests(tests, group_setup, NULL);
}
