/* netns.c: the gateway namespace, its uplink, named namespaces, and running ip(8) and friends. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gateway/addr.h"
#include "gateway/gw.h"
#include "gateway/log.h"
#include "gateway/nl.h"

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

/* ---- named namespaces, made in-process ------------------------------- */

#define NETNS_DIR	"/run/netns"
#define NETNS_ETC_DIR	"/etc/netns"

/*
 * Finds out once where names go. Under systemd with ProtectSystem= (or in
 * any mount namespace of its own) sluiced's mounts are slaves of the
 * host's and do not propagate back: a name made in sluiced's namespace is
 * invisible to `ip netns exec` on the host. Then names are made in pid 1's
 * mount namespace, the host's, by a short-lived child: a multithreaded
 * process cannot setns into a mount namespace, a fresh child can.
 */
static void
mntns_check(struct gw *gw)
{
	struct stat init, self;
	int fd;

	if (gw == NULL || gw->mntns_checked)
		return;
	gw->mntns_checked = true;
	gw->host_mntfd = -1;
	if ((fd = open("/proc/1/ns/mnt", O_RDONLY | O_CLOEXEC)) == -1) {
		log_warnx("cannot open /proc/1/ns/mnt (%s): /run/netns names "
		    "are made in sluiced's own mount namespace, which `ip "
		    "netns` on the host does not see if it is not the host's",
		    strerror(errno));
		return;
	}
	if (fstat(fd, &init) == -1 || stat("/proc/self/ns/mnt", &self) == -1 ||
	    (init.st_ino == self.st_ino && init.st_dev == self.st_dev)) {
		close(fd);
		return;
	}
	gw->host_mntfd = fd;
	log_info("sluiced runs in a mount namespace of its own: /run/netns "
	    "names are made in the host's (pid 1's)");
}

/* Returns 0, -1 with errno and err, or 1: done, but err holds a warning. */
typedef int (*host_fs_fn)(void *arg, char *err, size_t errlen);

/* Runs fn in the host's mount namespace: in a child if sluiced is not in
 * it, else here. fn's result, errno and err come back either way. */
static int
in_host_mntns(struct gw *gw, host_fs_fn fn, void *arg, char *err,
    size_t errlen)
{
	struct {
		int	 rc, errnum;
		char	 msg[512];
	} back;
	size_t got = 0;
	int p[2], status, saved, rc;
	pid_t pid;

	mntns_check(gw);
	if (gw == NULL || gw->host_mntfd == -1)
		return fn(arg, err, errlen);
	if (pipe2(p, O_CLOEXEC) == -1) {
		snprintf(err, errlen, "pipe: %s", strerror(errno));
		return -1;
	}
	if ((pid = fork()) == -1) {
		saved = errno;
		snprintf(err, errlen, "fork: %s", strerror(errno));
		close(p[0]);
		close(p[1]);
		errno = saved;
		return -1;
	}
	if (pid == 0) {
		/* only system calls and snprintf from here: another thread
		 * of the parent may have held any lock at the fork */
		close(p[0]);
		memset(&back, 0, sizeof(back));
		if (setns(gw->host_mntfd, CLONE_NEWNS) == -1) {
			back.rc = -1;
			back.errnum = errno;
			snprintf(back.msg, sizeof(back.msg), "setns into the "
			    "host's mount namespace: %s", strerror(errno));
		} else {
			errno = 0;
			back.rc = fn(arg, back.msg, sizeof(back.msg));
			back.errnum = errno ? errno : EIO;
		}
		if (back.rc == 0)
			_exit(0);
		(void)!write(p[1], &back, sizeof(back));
		_exit(1);
	}
	close(p[1]);
	memset(&back, 0, sizeof(back));
	for (;;) {
		ssize_t n = read(p[0], (char *)&back + got, sizeof(back) - got);

		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
		if (got == sizeof(back))
			break;
	}
	close(p[0]);
	while (waitpid(pid, &status, 0) == -1 && errno == EINTR)
		;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	if (got == sizeof(back)) {
		back.msg[sizeof(back.msg) - 1] = '\0';
		snprintf(err, errlen, "%s", back.msg);
		errno = back.errnum;
		rc = back.rc == 1 ? 1 : -1;
	} else {
		snprintf(err, errlen, "the helper in the host's mount namespace "
		    "died (status 0x%x)", (unsigned)status);
		errno = EIO;
		rc = -1;
	}
	return rc;
}

/*
 * Makes /run/netns a mount point shared with its peers, as ip-netns(8)
 * does: a name made or removed there then reaches every mount namespace
 * holding a copy of the directory (ip netns exec's own, a runtime's).
 * Done once per sluiced: MS_REC walks every name below.
 */
static int
netns_dir_prepare(char *err, size_t errlen)
{
	bool bound = false;

	if (mkdir(NETNS_DIR, 0755) == -1 && errno != EEXIST) {
		snprintf(err, errlen, NETNS_DIR ": %s", strerror(errno));
		return -1;
	}
	while (mount("", NETNS_DIR, "none", MS_SHARED | MS_REC, NULL) == -1) {
		/* EINVAL: not a mount point yet; bind it onto itself */
		if (errno != EINVAL || bound ||
		    mount(NETNS_DIR, NETNS_DIR, "none", MS_BIND | MS_REC,
		    NULL) == -1) {
			snprintf(err, errlen, "make " NETNS_DIR " a shared "
			    "mount: %s", strerror(errno));
			return -1;
		}
		bound = true;
	}
	return 0;
}

static int
resolv_conf_text(const char *nameserver, char *buf, size_t len)
{
	return snprintf(buf, len, "# written by sluiced: the gateway is this "
	    "sandbox's only resolver\nnameserver %s\n", nameserver);
}

struct resolv_op {
	const char	*name;
	const char	*nameserver;
};

static int
resolv_conf_write(void *arg, char *err, size_t errlen)
{
	const struct resolv_op *op = arg;
	char dir[PATH_MAX], path[PATH_MAX + 16], tmp[PATH_MAX + 32], text[256];
	int fd, n = resolv_conf_text(op->nameserver, text, sizeof(text));
	ssize_t w;

	snprintf(dir, sizeof(dir), NETNS_ETC_DIR "/%s", op->name);
	if ((mkdir(NETNS_ETC_DIR, 0755) == -1 && errno != EEXIST) ||
	    (mkdir(dir, 0755) == -1 && errno != EEXIST)) {
		snprintf(err, errlen, "%s: %s", dir, strerror(errno));
		return -1;
	}
	snprintf(path, sizeof(path), "%s/resolv.conf", dir);
	snprintf(tmp, sizeof(tmp), "%s/.resolv.conf.sluiced", dir);
	/* written aside and renamed: a reader sees the old file or the new */
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd == -1) {
		snprintf(err, errlen, "%s: %s", tmp, strerror(errno));
		return -1;
	}
	w = write(fd, text, (size_t)n);
	if (w != n || fchmod(fd, 0644) == -1 || close(fd) == -1 ||
	    rename(tmp, path) == -1) {
		snprintf(err, errlen, "%s: %s", path, w == -1 || w == n ?
		    strerror(errno) : "short write");
		if (w != n)
			close(fd);
		unlink(tmp);
		return -1;
	}
	return 0;
}

static void
resolv_conf_remove(const char *name)
{
	char dir[PATH_MAX], path[PATH_MAX + 16];

	snprintf(dir, sizeof(dir), NETNS_ETC_DIR "/%s", name);
	snprintf(path, sizeof(path), "%s/resolv.conf", dir);
	unlink(path);
	rmdir(dir);
}

struct name_op {
	int		 nsfd;
	const char	*name;
	const char	*nameserver;	/* or NULL: no resolv.conf */
	bool		 prepare_dir;
};

static int
name_op(void *arg, char *err, size_t errlen)
{
	const struct name_op *op = arg;
	char target[PATH_MAX], source[64];
	int fd, saved;

	if (op->prepare_dir && netns_dir_prepare(err, errlen) == -1)
		return -1;
	snprintf(target, sizeof(target), NETNS_DIR "/%s", op->name);
	/* O_EXCL: a name that exists, mounted or not, is someone else's */
	fd = open(target, O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0);
	if (fd == -1) {
		saved = errno;
		snprintf(err, errlen, "%s: %s", target, strerror(errno));
		errno = saved;
		return -1;
	}
	close(fd);
	/* the descriptor's magic link is as good a source as a path, and
	 * the only one a child in another mount namespace has */
	snprintf(source, sizeof(source), "/proc/self/fd/%d", op->nsfd);
	if (mount(source, target, "none", MS_BIND, NULL) == -1) {
		saved = errno;
		snprintf(err, errlen, "bind the namespace on %s: %s", target,
		    strerror(errno));
		unlink(target);
		errno = saved;
		return -1;
	}
	if (op->nameserver != NULL) {
		struct resolv_op rop = { op->name, op->nameserver };

		/* a sandbox without it still works, told its resolver
		 * otherwise: a warning, not a failure */
		if (resolv_conf_write(&rop, err, errlen) == -1)
			return 1;
	}
	return 0;
}

static int
unname_op(void *arg, char *err, size_t errlen)
{
	const char *name = arg;
	char target[PATH_MAX];
	int rc = 0;

	snprintf(target, sizeof(target), NETNS_DIR "/%s", name);
	/* MNT_DETACH: a process with its cwd under it does not keep the
	 * name; EINVAL: it was not mounted (a half-made name) */
	if (umount2(target, MNT_DETACH) == -1 && errno != EINVAL &&
	    errno != ENOENT) {
		snprintf(err, errlen, "unmount %s: %s", target, strerror(errno));
		rc = -1;
	}
	if (unlink(target) == -1 && errno != ENOENT && rc == 0) {
		snprintf(err, errlen, "%s: %s", target, strerror(errno));
		rc = -1;
	}
	resolv_conf_remove(name);
	return rc;
}

int
gw_netns_name(struct gw *gw, int nsfd, const char *name,
    const char *nameserver, char *err, size_t errlen)
{
	struct name_op op = { nsfd, name, nameserver,
	    gw == NULL || !gw->netns_dir_ready };
	char target[PATH_MAX], source[64];
	struct statfs sfs;
	int rc = in_host_mntns(gw, name_op, &op, err, errlen);

	if (rc == -1)
		return -1;
	if (rc == 1)
		log_warnx("namespace %s: %s", name, err);
	if (gw != NULL)
		gw->netns_dir_ready = true;
	if (gw == NULL || gw->host_mntfd == -1)
		return 0;
	/* Made in the host's namespace, the name reaches sluiced's own by
	 * propagation if that is a slave (systemd's PrivateMounts=). A
	 * private one does not receive it: name it here too, for sluiced's
	 * own later opens (a restart's gw_netns_open). */
	snprintf(target, sizeof(target), NETNS_DIR "/%s", name);
	snprintf(source, sizeof(source), "/proc/self/fd/%d", nsfd);
	if ((statfs(target, &sfs) == -1 || sfs.f_type != NSFS_MAGIC) &&
	    mount(source, target, "none", MS_BIND, NULL) == -1)
		log_warn("namespace %s: not visible in sluiced's own mount "
		    "namespace", name);
	return 0;
}

int
gw_netns_unname(struct gw *gw, const char *name, char *err, size_t errlen)
{
	char target[PATH_MAX];
	int rc = in_host_mntns(gw, unname_op, (void *)name, err, errlen);
	int saved = errno;

	/* the copy gw_netns_name may have made here; EINVAL: there is none,
	 * the unmount in the host's namespace took it with it */
	if (gw != NULL && gw->host_mntfd != -1) {
		snprintf(target, sizeof(target), NETNS_DIR "/%s", name);
		(void)umount2(target, MNT_DETACH);
	}
	errno = saved;
	return rc;
}

int
gw_netns_resolv_conf(struct gw *gw, const char *name, const char *nameserver,
    char *err, size_t errlen)
{
	struct resolv_op op = { name, nameserver };
	char path[PATH_MAX], want[256], have[256];
	int fd, n = resolv_conf_text(nameserver, want, sizeof(want));
	ssize_t got = -1;

	/* read where sluiced is (the host's files show through a private
	 * mount namespace): a restart with a thousand sandboxes forks no
	 * thousand children for files that are right already */
	snprintf(path, sizeof(path), NETNS_ETC_DIR "/%s/resolv.conf", name);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) != -1) {
		got = read(fd, have, sizeof(have));
		close(fd);
	}
	if (got == n && memcmp(have, want, (size_t)n) == 0)
		return 0;
	return in_host_mntns(gw, resolv_conf_write, &op, err, errlen);
}

/* gw NULL: the name is made in sluiced's own mount namespace. */
int
gw_netns_create(struct gw *gw, const char *name, const char *nameserver,
    char *err, size_t errlen)
{
	int here, nsfd, saved;

	/* made on this thread and left at once: the thread goes back to
	 * where it was, the descriptor keeps the new one alive */
	if ((here = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC)) == -1) {
		saved = errno;
		snprintf(err, errlen, "/proc/thread-self/ns/net: %s",
		    strerror(errno));
		errno = saved;
		return -1;
	}
	if (unshare(CLONE_NEWNET) == -1) {
		saved = errno;
		snprintf(err, errlen, "new network namespace %s: %s", name,
		    strerror(errno));
		close(here);
		errno = saved;
		return -1;
	}
	nsfd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	saved = errno;
	if (setns(here, CLONE_NEWNET) == -1)
		fatal("setns back after making namespace %s", name);
	close(here);
	if (nsfd == -1) {
		snprintf(err, errlen, "/proc/thread-self/ns/net: %s",
		    strerror(saved));
		errno = saved;
		return -1;
	}
	if (gw_netns_name(gw, nsfd, name, nameserver, err, errlen) == -1) {
		saved = errno;
		close(nsfd);
		errno = saved;
		return -1;
	}
	return nsfd;
}

/* Opens /run/netns/NAME, creating the namespace first when asked to (named
 * in sluiced's own mount namespace: gw_netns_create names it where the
 * host sees it). */
int
gw_netns_open(const char *name, bool create, char *err, size_t errlen)
{
	char path[PATH_MAX];
	int fd;

	if (create && !gw_netns_exists(name))
		return gw_netns_create(NULL, name, NULL, err, errlen);
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

/* The address of "a.b.c.d/len" (network order); the length must be there. */
static bool
cidr_addr(const char *s, uint32_t *addr)
{
	int plen;

	return gw_addr_split(s, addr, &plen) && plen >= 0;
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
 * flow), no IPv6 on new interfaces, no source routing (a namespace's
 * own default already refuses it: said here, not inherited). ARP is
 * answered on a link only for an address of that link (arp_ignore 1):
 * by default the kernel answers for any of its addresses on any link,
 * and a sandbox learnt, without a packet of IP or a row, which other
 * sandboxes' gateway addresses exist and the uplink's (found by review,
 * 2026-12-03: adversarial 38); and asked with the link's own address
 * (arp_announce 2), never another.
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
		{ "net/ipv4/conf/all/accept_source_route", "0" },
		{ "net/ipv4/conf/default/accept_source_route", "0" },
		{ "net/ipv4/conf/all/send_redirects", "0" },
		{ "net/ipv4/conf/all/arp_ignore", "1" },
		{ "net/ipv4/conf/default/arp_ignore", "1" },
		{ "net/ipv4/conf/all/arp_announce", "2" },
		{ "net/ipv4/conf/default/arp_announce", "2" },
		{ "net/ipv4/conf/default/send_redirects", "0" },
		{ "net/ipv6/conf/all/disable_ipv6", "1" },
		{ "net/ipv6/conf/default/disable_ipv6", "1" },
		{ "net/netfilter/nf_conntrack_tcp_loose", "0" },
		{ "net/netfilter/nf_conntrack_acct", "1" },
		{ "net/netfilter/nf_conntrack_timestamp", "1" },
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
 * What comes in from the gateway to the host's own addresses. A packet a
 * sandbox sends to one of them (its public address, a bridge's) is not
 * forwarded but delivered to the host's own sockets, whatever listens
 * there; a policy allowing a range the host lies in would reach them
 * (found by review, 2026-12-03: adversarial 39). The gateway cannot know
 * every address the host has or will have, so the host drops it: a chain
 * that lets on only sluiced's own questions to a resolver on the host
 * (port 53, which no sandbox's packet can carry past the gateway) and
 * what belongs to connections the host began; the host's own rules then
 * decide those as before. -1 if the chain could not be made whole.
 */
static int
host_input(const char *chain, const char *peer, const char *comment,
    bool add)
{
	char *mk[] = { "iptables", "-w", "5", "-N", (char *)chain, NULL };
	char *flush[] = { "iptables", "-w", "5", "-F", (char *)chain, NULL };
	char *rm[] = { "iptables", "-w", "5", "-X", (char *)chain, NULL };
	char *est[] = { "iptables", "-w", "5", "-A", (char *)chain, "-m",
	    "conntrack", "--ctstate", "ESTABLISHED,RELATED", "-j", "RETURN",
	    NULL };
	/* to the host's own addresses only (unicast): a broadcast of one
	 * of its networks is local too, but no question of sluiced's goes
	 * there, and a sandbox's datagram may (audit mode lets UDP and DNS
	 * to other resolvers through; adversarial 37). Without xt_addrtype,
	 * the rules without the match (slot 9 ends them early) */
	char *udp[] = { "iptables", "-w", "5", "-A", (char *)chain, "-p",
	    "udp", "--dport", "53", "-m", "addrtype", "--dst-type", "LOCAL",
	    "-j", "RETURN", NULL };
	char *tcp[] = { "iptables", "-w", "5", "-A", (char *)chain, "-p",
	    "tcp", "--dport", "53", "-m", "addrtype", "--dst-type", "LOCAL",
	    "-j", "RETURN", NULL };
	char *drop[] = { "iptables", "-w", "5", "-A", (char *)chain, "-j",
	    "DROP", NULL };
	char *jump[] = { "iptables", "-w", "5", NULL, "INPUT", "-i",
	    (char *)peer, "-m", "comment", "--comment", (char *)comment, "-j",
	    (char *)chain, NULL };
	char **fill[] = { est, udp, tcp, drop };
	size_t i;

	if (!add) {
		/* the jump first: the chain cannot go while it is used */
		jump[3] = "-D";
		while (gw_run_quiet(jump) == 0)
			;
		(void)gw_run_quiet(flush);
		(void)gw_run_quiet(rm);
		return 0;
	}
	/* made afresh (a restart finds the old one), filled, then jumped
	 * to: no moment where the jump leads nowhere */
	if (gw_run_quiet(mk) != 0 && gw_run_quiet(flush) != 0)
		return -1;
	for (i = 0; i < sizeof(fill) / sizeof(fill[0]); i++) {
		if (gw_run_quiet(fill[i]) == 0)
			continue;
		if (fill[i] != udp && fill[i] != tcp)
			return -1;
		log_warnx("host: iptables: no addrtype match; the host's "
		    "chain %s lets port 53 on to its broadcast addresses too",
		    chain);
		fill[i][9] = "-j";
		fill[i][10] = "RETURN";
		fill[i][11] = NULL;
		if (gw_run_quiet(fill[i]) != 0)
			return -1;
	}
	jump[3] = "-C";
	if (gw_run_quiet(jump) == 0)
		return 0;
	jump[3] = "-I";
	return gw_run_quiet(jump) == 0 ? 0 : -1;
}

/*
 * The uplink through the host: a veth from the host's namespace (the one
 * sluiced was started in) into the gateway, the host end addressed with
 * GW_HOST_UPLINK_PEER, and the gateway's traffic NATed out of the host's
 * default route. The host's own rules are touched as little as possible:
 * one MASQUERADE rule, two FORWARD rules and one INPUT rule, each tagged
 * with a comment naming the gateway so teardown removes exactly them, and
 * the INPUT rule's chain (host_input). Returns -1 if the INPUT rule could
 * not be made: sandboxes would reach the host's own services.
 */
static int
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
	char chain[32];
	size_t i;

	snprintf(comment, sizeof(comment), "sluice gateway %s", c->netns);
	snprintf(chain, sizeof(chain), "sluice-in-%.12s", c->netns);
	if (!add)
		(void)host_input(chain, peer, comment, false);
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
	return add ? host_input(chain, peer, comment, true) : 0;
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
	int rc;

	if (!cidr_addr(gwaddr, &gw->uplink[0]) ||
	    !cidr_addr(hostaddr, &gw->uplink[1])) {
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
	if (rc == 0 && host_rules(c, peer, true, gwip) == -1) {
		snprintf(err, errlen, "host: iptables: cannot make the chain "
		    "sluice-in-%.12s that keeps sandboxes off the host's own "
		    "addresses", c->netns);
		rc = -1;
	}
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
	char *gw_argv[] = { "ip", "-n", (char *)c->netns, "-batch", "-", NULL };

	if (c->uplink_netns == NULL)
		return host_uplink_setup(gw, err, errlen);
	if (!cidr_addr(c->uplink_addr, &gw->uplink[0]) ||
	    !cidr_addr(c->uplink_peer_addr, &gw->uplink[1])) {
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
	mntns_check(gw);
	if (gw_netns_exists(gw->cfg.netns))	/* a restart adopts it */
		gw->gw_nsfd = gw_netns_open(gw->cfg.netns, false, err, errlen);
	else
		gw->gw_nsfd = gw_netns_create(gw, gw->cfg.netns, NULL, err,
		    errlen);
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

/* Deletes the link NAME of the calling thread's namespace, if it has one. */
static void
link_del_here(const char *name)
{
	char err[512];
	struct gw_nl *nl;
	uint32_t idx;

	if ((nl = gw_nl_open(err, sizeof(err))) == NULL) {
		log_warnx("uplink %s: %s", name, err);
		return;
	}
	if (gw_nl_link_index(nl, name, &idx, err, sizeof(err)) == 0 &&
	    gw_nl_link_del(nl, idx, err, sizeof(err)) == -1)
		log_warnx("uplink %s: %s", name, err);
	gw_nl_close(nl);
}

/*
 * Removes the gateway namespace; its veths (uplink, sandboxes) go with it.
 * The far end of the uplink would go too, but only once the kernel gets
 * round to freeing the namespace, and until then its name is taken: a
 * start right after a teardown could not make it again ("File exists",
 * seen on the bench's bed). So the uplink goes first, both ends at once.
 */
void
gw_gateway_destroy(struct gw *gw)
{
	char err[512];

	if (gw->cfg.uplink_netns == NULL) {
		char peer[IF_NAMESIZE];

		/* from the host's side (the calling thread's) */
		host_peer_name(&gw->cfg, peer, sizeof(peer));
		link_del_here(peer);
	} else if (gw->gw_nsfd != -1 && gw->gw_nsfd != gw->host_nsfd) {
		if (gw_netns_enter(gw->gw_nsfd) == -1)
			fatal("setns %s", gw->cfg.netns);
		link_del_here(GW_UPLINK_IF);
		if (gw_netns_enter(gw->home_nsfd) == -1)
			fatal("setns back home");
	}
	/* without its name and with no process inside, the kernel frees the
	 * namespace */
	if (gw_netns_exists(gw->cfg.netns) &&
	    gw_netns_unname(gw, gw->cfg.netns, err, sizeof(err)) == -1)
		log_warnx("gateway %s: %s", gw->cfg.netns, err);
	if (gw->cfg.uplink_netns == NULL) {
		const char *gwaddr = gw->cfg.uplink_addr ? gw->cfg.uplink_addr :
		    GW_HOST_UPLINK_ADDR;
		char peer[IF_NAMESIZE], gwip[INET_ADDRSTRLEN];

		/* the host's rules */
		host_peer_name(&gw->cfg, peer, sizeof(peer));
		cidr_ip(gwaddr, gwip, sizeof(gwip));
		(void)host_rules(&gw->cfg, peer, false, gwip);
	}
}
