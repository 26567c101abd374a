/* netns.c: the gateway namespace, its uplink, and running ip(8) and friends. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gateway/gw.h"
#include "gateway/log.h"

/*
 * Runs argv[0] (looked up in PATH) with input (may be NULL) on its stdin and
 * waits for it. Returns 0 if it exited 0; otherwise -1 with the command and
 * the first line of what it wrote to stderr in err.
 */
int
gw_run(char *const argv[], const char *input, char *err, size_t errlen)
{
	int in[2] = { -1, -1 }, out[2] = { -1, -1 };
	char buf[1024];
	size_t got = 0, inlen = input ? strlen(input) : 0, sent = 0;
	pid_t pid;
	int status, rc = -1;

	if (pipe2(in, O_CLOEXEC) == -1 || pipe2(out, O_CLOEXEC) == -1) {
		snprintf(err, errlen, "pipe: %s", strerror(errno));
		goto cleanup;
	}
	pid = fork();
	if (pid == -1) {
		snprintf(err, errlen, "fork: %s", strerror(errno));
		goto cleanup;
	}
	if (pid == 0) {
		int devnull = open("/dev/null", O_WRONLY);

		dup2(in[0], 0);
		dup2(out[1], 2);
		if (devnull != -1)
			dup2(devnull, 1);
		signal(SIGPIPE, SIG_DFL);
		execvp(argv[0], argv);
		dprintf(2, "%s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	in[0] = out[1] = -1;
	/* Feed stdin and drain stderr together so neither pipe can fill up. */
	if (inlen == 0) {
		close(in[1]);
		in[1] = -1;
	}
	for (;;) {
		struct pollfd pfd[2] = {
			{ .fd = out[0], .events = POLLIN },
			{ .fd = in[1], .events = POLLOUT },
		};
		ssize_t n;

		if (poll(pfd, in[1] == -1 ? 1 : 2, -1) == -1) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (in[1] != -1 && (pfd[1].revents & (POLLOUT | POLLERR | POLLHUP))) {
			n = write(in[1], input + sent, inlen - sent);
			if (n > 0)
				sent += (size_t)n;
			if (n <= 0 || sent == inlen) {
				close(in[1]);
				in[1] = -1;
			}
		}
		if (pfd[0].revents & (POLLIN | POLLHUP | POLLERR)) {
			char sink[512];

			if (got < sizeof(buf) - 1)
				n = read(out[0], buf + got, sizeof(buf) - 1 - got);
			else
				n = read(out[0], sink, sizeof(sink));
			if (n <= 0)
				break;
			if (got < sizeof(buf) - 1)
				got += (size_t)n;
		}
	}
	buf[got] = '\0';
	while (waitpid(pid, &status, 0) == -1 && errno == EINTR)
		;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
		rc = 0;
	} else {
		char *nl = strchr(buf, '\n');
		size_t i, used;

		if (nl != NULL)
			*nl = '\0';
		used = (size_t)snprintf(err, errlen, "%s", argv[0]);
		for (i = 1; argv[i] != NULL && used < errlen; i++)
			used += (size_t)snprintf(err + used, errlen - used, " %s",
			    argv[i]);
		if (used < errlen)
			snprintf(err + used, errlen - used, ": %s",
			    got ? buf : WIFEXITED(status) ? "failed" : "killed");
	}
cleanup:
	if (in[0] != -1) close(in[0]);
	if (in[1] != -1) close(in[1]);
	if (out[0] != -1) close(out[0]);
	if (out[1] != -1) close(out[1]);
	return rc;
}

int
gw_run_quiet(char *const argv[])
{
	char err[256];

	return gw_run(argv, NULL, err, sizeof(err));
}

int
gw_netns_enter(int nsfd)
{
	return setns(nsfd, CLONE_NEWNET);
}

bool
gw_netns_exists(const char *name)
{
	char path[PATH_MAX];
	struct stat st;

	snprintf(path, sizeof(path), "/run/netns/%s", name);
	return stat(path, &st) == 0;
}

/* Opens /run/netns/NAME, creating the namespace first when asked to. */
int
gw_netns_open(const char *name, bool create, char *err, size_t errlen)
{
	char path[PATH_MAX];
	int fd;

	if (create && !gw_netns_exists(name)) {
		char *argv[] = { "ip", "netns", "add", (char *)name, NULL };

		if (gw_run(argv, NULL, err, errlen) == -1)
			return -1;
	}
	snprintf(path, sizeof(path), "/run/netns/%s", name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd == -1)
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
	return fd;
}

/* Writes a sysctl in the calling thread's network namespace. */
int
gw_sysctl(const char *path, const char *value)
{
	char full[PATH_MAX];
	int fd, rc = 0;
	size_t len = strlen(value);

	snprintf(full, sizeof(full), "/proc/sys/%s", path);
	if ((fd = open(full, O_WRONLY | O_CLOEXEC)) == -1)
		return -1;
	if (write(fd, value, len) != (ssize_t)len)
		rc = -1;
	close(fd);
	return rc;
}

/* Splits "a.b.c.d/len" into an address (network order) and prefix length. */
static int
parse_cidr(const char *s, uint32_t *addr, unsigned *plen)
{
	char ip[INET_ADDRSTRLEN];
	const char *slash = strchr(s, '/');
	char *end;
	unsigned long l;
	struct in_addr in;

	if (slash == NULL || (size_t)(slash - s) >= sizeof(ip))
		return -1;
	memcpy(ip, s, (size_t)(slash - s));
	ip[slash - s] = '\0';
	errno = 0;
	l = strtoul(slash + 1, &end, 10);
	if (*end != '\0' || slash[1] == '\0' || errno || l > 32)
		return -1;
	if (inet_pton(AF_INET, ip, &in) != 1)
		return -1;
	*addr = in.s_addr;
	*plen = (unsigned)l;
	return 0;
}

static const char *
cidr_ip(const char *cidr, char *buf, size_t len)
{
	const char *slash = strchr(cidr, '/');
	size_t n = slash ? (size_t)(slash - cidr) : strlen(cidr);

	if (n >= len)
		n = len - 1;
	memcpy(buf, cidr, n);
	buf[n] = '\0';
	return buf;
}

/*
 * The gateway's side settings, written inside its namespace: forwarding on,
 * strict reverse-path filtering on every interface (a sandbox's packet
 * whose source does not route back through its own veth is dropped before
 * anything else sees it: that is the anti-spoofing), no loose TCP pickup
 * (a mid-stream packet without conntrack state is INVALID, not a new
 * flow), no IPv6 on new interfaces.
 */
static int
gateway_sysctls(char *err, size_t errlen)
{
	static const char *const set[][2] = {
		{ "net/ipv4/ip_forward", "1" },
		{ "net/ipv4/conf/all/rp_filter", "1" },
		{ "net/ipv4/conf/default/rp_filter", "1" },
		{ "net/ipv4/conf/all/accept_redirects", "0" },
		{ "net/ipv4/conf/default/accept_redirects", "0" },
		{ "net/ipv4/conf/all/send_redirects", "0" },
		{ "net/ipv4/conf/default/send_redirects", "0" },
		{ "net/ipv6/conf/all/disable_ipv6", "1" },
		{ "net/ipv6/conf/default/disable_ipv6", "1" },
		{ "net/netfilter/nf_conntrack_tcp_loose", "0" },
		{ "net/netfilter/nf_conntrack_acct", "1" },
	};
	size_t i;

	for (i = 0; i < sizeof(set) / sizeof(set[0]); i++) {
		if (gw_sysctl(set[i][0], set[i][1]) == -1) {
			/* conntrack's sysctls appear once conntrack is in use
			 * in this namespace; the ruleset makes that happen and
			 * the caller sets them again afterwards. */
			if (errno == ENOENT && strstr(set[i][0], "netfilter"))
				continue;
			snprintf(err, errlen, "sysctl %s=%s: %s", set[i][0],
			    set[i][1], strerror(errno));
			return -1;
		}
	}
	return 0;
}

/*
 * The uplink through the host: a veth from the host's namespace (the one
 * sluiced was started in) into the gateway, the host end addressed with
 * GW_HOST_UPLINK_PEER, and the gateway's traffic NATed out of the host's
 * default route. The host's own rules are touched as little as possible:
 * one MASQUERADE rule and two FORWARD rules, each tagged with a comment
 * naming the gateway so teardown removes exactly them.
 */
static void
host_rules(const struct gw_config *c, const char *peer, bool add,
    const char *gwip)
{
	char comment[64], src[INET_ADDRSTRLEN + 3];
	/* slot 3 of each rule is the operation: -C, -I or -D */
	char *nat[] = { "iptables", "-w", "5", NULL, "POSTROUTING", "-t", "nat",
	    "-s", src, "!", "-o", (char *)peer, "-m", "comment", "--comment",
	    comment, "-j", "MASQUERADE", NULL };
	char *fwd_out[] = { "iptables", "-w", "5", NULL, "FORWARD", "-i",
	    (char *)peer, "-m", "comment", "--comment", comment, "-j", "ACCEPT",
	    NULL };
	char *fwd_in[] = { "iptables", "-w", "5", NULL, "FORWARD", "-o",
	    (char *)peer, "-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED",
	    "-m", "comment", "--comment", comment, "-j", "ACCEPT", NULL };
	char **rules[] = { nat, fwd_out, fwd_in };
	size_t i;

	snprintf(comment, sizeof(comment), "sluice gateway %s", c->netns);
	snprintf(src, sizeof(src), "%s/32", gwip);
	for (i = 0; i < 3; i++) {
		bool present;

		/* checked first: a restart adds nothing twice, a teardown of
		 * something already gone is quiet */
		rules[i][3] = "-C";
		present = gw_run_quiet(rules[i]) == 0;
		if (present == add)
			continue;
		rules[i][3] = add ? "-I" : "-D";
		if (gw_run_quiet(rules[i]) != 0)
			log_warnx("host: iptables %s %s for %s failed",
			    rules[i][3], rules[i][4], c->netns);
	}
}

static void
host_peer_name(const struct gw_config *c, char *peer, size_t len)
{
	snprintf(peer, len, "sl-%.12s", c->netns);
}

static int
host_uplink_setup(struct gw *gw, char *err, size_t errlen)
{
	const struct gw_config *c = &gw->cfg;
	char peer[IF_NAMESIZE], batch[256];
	const char *gwaddr = c->uplink_addr ? c->uplink_addr : GW_HOST_UPLINK_ADDR;
	const char *hostaddr = c->uplink_peer_addr ? c->uplink_peer_addr :
	    GW_HOST_UPLINK_PEER;
	char gwip[INET_ADDRSTRLEN], hostip[INET_ADDRSTRLEN];
	char *gw_argv[] = { "ip", "-n", (char *)c->netns, "-batch", "-", NULL };
	char *host_argv[] = { "ip", "-batch", "-", NULL };
	uint32_t a;
	unsigned l;
	int rc;

	if (parse_cidr(gwaddr, &a, &l) == -1 || parse_cidr(hostaddr, &a, &l) == -1) {
		snprintf(err, errlen, "uplink addresses must be CIDRs like "
		    "100.64.213.2/30");
		return -1;
	}
	host_peer_name(c, peer, sizeof(peer));
	cidr_ip(gwaddr, gwip, sizeof(gwip));
	cidr_ip(hostaddr, hostip, sizeof(hostip));
	/* work from the host's side: made here, the veth's far end is put
	 * into the gateway namespace by name */
	if (gw_netns_enter(gw->host_nsfd) == -1)
		fatal("setns back to the host namespace");
	rc = 0;
	if (if_nametoindex(peer) == 0) {
		char *argv[] = { "ip", "link", "add", peer, "type", "veth", "peer",
		    "name", GW_UPLINK_IF, "netns", (char *)c->netns, NULL };

		rc = gw_run(argv, NULL, err, errlen);
	}
	snprintf(batch, sizeof(batch), "addr replace %s dev %s\nlink set %s up\n",
	    hostaddr, peer, peer);
	if (rc == 0)
		rc = gw_run(host_argv, batch, err, errlen);
	if (rc == 0 && gw_sysctl("net/ipv4/ip_forward", "1") == -1) {
		snprintf(err, errlen, "host: sysctl net.ipv4.ip_forward=1: %s",
		    strerror(errno));
		rc = -1;
	}
	if (rc == 0)
		host_rules(c, peer, true, gwip);
	if (gw_netns_enter(gw->gw_nsfd) == -1)
		fatal("setns %s", c->netns);
	if (rc == -1)
		return -1;
	snprintf(batch, sizeof(batch),
	    "addr replace %s dev " GW_UPLINK_IF "\n"
	    "link set " GW_UPLINK_IF " up\n"
	    "link set lo up\n"
	    "route replace default via %s dev " GW_UPLINK_IF "\n",
	    gwaddr, hostip);
	return gw_run(gw_argv, batch, err, errlen);
}

static int
uplink_setup(struct gw *gw, char *err, size_t errlen)
{
	const struct gw_config *c = &gw->cfg;
	char peer[IF_NAMESIZE], peer_ip[INET_ADDRSTRLEN], batch[512];
	uint32_t a;
	unsigned l;
	char *gw_argv[] = { "ip", "-n", (char *)c->netns, "-batch", "-", NULL };

	if (c->uplink_netns == NULL)
		return host_uplink_setup(gw, err, errlen);
	if (parse_cidr(c->uplink_addr, &a, &l) == -1 ||
	    parse_cidr(c->uplink_peer_addr, &a, &l) == -1) {
		snprintf(err, errlen, "uplink addresses must be CIDRs like "
		    "198.51.100.2/30");
		return -1;
	}
	if (!gw_netns_exists(c->uplink_netns)) {
		snprintf(err, errlen, "uplink namespace %s does not exist",
		    c->uplink_netns);
		return -1;
	}
	/* The peer's name must be unique in the uplink namespace, which may
	 * serve several gateways: derive it from the gateway's name. */
	snprintf(peer, sizeof(peer), "up-%.11s", c->netns);
	cidr_ip(c->uplink_peer_addr, peer_ip, sizeof(peer_ip));
	if (if_nametoindex(GW_UPLINK_IF) == 0) {
		char *argv[] = { "ip", "-n", (char *)c->netns, "link", "add",
		    GW_UPLINK_IF, "type", "veth", "peer", "name", peer, "netns",
		    (char *)c->uplink_netns, NULL };
		char *pargv[] = { "ip", "-n", (char *)c->uplink_netns, "-batch",
		    "-", NULL };
		char pbatch[256];

		if (gw_run(argv, NULL, err, errlen) == -1)
			return -1;
		snprintf(pbatch, sizeof(pbatch),
		    "addr replace %s dev %s\nlink set %s up\n",
		    c->uplink_peer_addr, peer, peer);
		if (gw_run(pargv, pbatch, err, errlen) == -1)
			return -1;
	}
	snprintf(batch, sizeof(batch),
	    "addr replace %s dev " GW_UPLINK_IF "\n"
	    "link set " GW_UPLINK_IF " up\n"
	    "link set lo up\n"
	    "route replace default via %s dev " GW_UPLINK_IF "\n",
	    c->uplink_addr, peer_ip);
	return gw_run(gw_argv, batch, err, errlen);
}

/*
 * Creates (or adopts, after a restart) the gateway namespace and its
 * uplink. On return gw->gw_nsfd and gw->host_nsfd are open and the calling
 * thread is back in the host namespace.
 */
int
gw_gateway_setup(struct gw *gw, char *err, size_t errlen)
{
	int rc = -1;

	gw->home_nsfd = gw->host_nsfd = open("/proc/self/ns/net",
	    O_RDONLY | O_CLOEXEC);
	if (gw->host_nsfd == -1) {
		snprintf(err, errlen, "/proc/self/ns/net: %s", strerror(errno));
		return -1;
	}
	gw->gw_nsfd = gw_netns_open(gw->cfg.netns, true, err, errlen);
	if (gw->gw_nsfd == -1)
		return -1;
	if (gw_netns_enter(gw->gw_nsfd) == -1) {
		snprintf(err, errlen, "setns %s: %s", gw->cfg.netns,
		    strerror(errno));
		return -1;
	}
	if (gateway_sysctls(err, errlen) == 0 && uplink_setup(gw, err, errlen) == 0)
		rc = 0;
	if (gw_netns_enter(gw->host_nsfd) == -1)
		fatal("setns back to the host namespace");
	return rc;
}

/* Removes the gateway namespace; its veths (uplink, sandboxes) go with it. */
void
gw_gateway_destroy(struct gw *gw)
{
	char *argv[] = { "ip", "netns", "del", (char *)gw->cfg.netns, NULL };

	if (gw_netns_exists(gw->cfg.netns))
		gw_run_quiet(argv);
	if (gw->cfg.uplink_netns == NULL) {
		const char *gwaddr = gw->cfg.uplink_addr ? gw->cfg.uplink_addr :
		    GW_HOST_UPLINK_ADDR;
		char peer[IF_NAMESIZE], gwip[INET_ADDRSTRLEN];

		/* the host end went with the namespace; the rules stay */
		host_peer_name(&gw->cfg, peer, sizeof(peer));
		cidr_ip(gwaddr, gwip, sizeof(gwip));
		host_rules(&gw->cfg, peer, false, gwip);
	}
}
