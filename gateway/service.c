/* service.c: sluiced as a system service — sd_notify, SIGHUP reload, capabilities. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <linux/capability.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <jansson.h>

#include "gateway/capture.h"
#include "gateway/log.h"
#include "gateway/service.h"

/* ---- readiness ---------------------------------------------------------- */

static int notify_fd = -1;
static struct sockaddr_un notify_sun;
static socklen_t notify_len;

int
gw_notify_addr(const char *value, struct sockaddr_un *sun, socklen_t *len)
{
	size_t n = strlen(value);

	memset(sun, 0, sizeof(*sun));
	sun->sun_family = AF_UNIX;
	if (value[0] == '/') {
		if (n >= sizeof(sun->sun_path)) {
			errno = ENAMETOOLONG;
			return -1;
		}
		memcpy(sun->sun_path, value, n + 1);
		*len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + 1);
		return 0;
	}
	if (value[0] == '@' && n > 1) {
		/* abstract: a leading NUL, and the length says where the
		 * name ends (no terminating NUL of its own) */
		if (n > sizeof(sun->sun_path)) {
			errno = ENAMETOOLONG;
			return -1;
		}
		memcpy(sun->sun_path + 1, value + 1, n - 1);
		*len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
		return 0;
	}
	errno = EINVAL;
	return -1;
}

int
gw_notify_open(char *err, size_t errlen)
{
	const char *v = getenv("NOTIFY_SOCKET");

	if (v == NULL || v[0] == '\0')
		return 0;
	if (gw_notify_addr(v, &notify_sun, &notify_len) == -1) {
		snprintf(err, errlen, "NOTIFY_SOCKET=%s: %s", v, strerror(errno));
		return -1;
	}
	notify_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (notify_fd == -1) {
		snprintf(err, errlen, "NOTIFY_SOCKET: socket: %s",
		    strerror(errno));
		return -1;
	}
	return 0;
}

int
gw_notify(const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	int n;

	if (notify_fd == -1)
		return 0;
	va_start(ap, fmt);
	n = vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(msg)) {
		errno = EMSGSIZE;
		return -1;
	}
	if (sendto(notify_fd, msg, (size_t)n, MSG_NOSIGNAL,
	    (struct sockaddr *)&notify_sun, notify_len) != n)
		return -1;
	return 0;
}

/* ---- capabilities ------------------------------------------------------- */

/*
 * What sandbox add/del, the queue and the namespaces need once setup is
 * over. Everything else goes, CAP_NET_BIND_SERVICE included: port 53 is
 * bound once at setup and never again (a reload changes the upstreams of
 * the open resolver, it does not rebind).
 */
uint64_t
gw_caps_runtime(void)
{
	return
	    /* verdicts: nfnetlink checks every message, not only the
	     * socket; conntrack events; veths, addresses, routes and
	     * moving a veth into a sandbox's namespace */
	    GW_CAP(CAP_NET_ADMIN) |
	    /* setns(2) into the gateway's and the sandboxes' namespaces;
	     * `ip netns add/del` (unshare, bind mount, umount); the bind
	     * mount that names an attached namespace; ip -n's own mount
	     * namespace and sysfs */
	    GW_CAP(CAP_SYS_ADMIN) |
	    /* opening /proc/PID/ns/net of a process with other
	     * credentials or more capabilities (sandbox add --netns, the
	     * CNI plugin), and /proc/1/ns/mnt: a ptrace access check */
	    GW_CAP(CAP_SYS_PTRACE) |
	    /* setns(2) into the host's mount namespace, so /run/netns names
	     * made under ProtectSystem= are seen outside it (netns.c) */
	    GW_CAP(CAP_SYS_CHROOT);
}

void
gw_caps_words(uint64_t mask, uint32_t out[2])
{
	out[0] = (uint32_t)(mask & 0xffffffffu);
	out[1] = (uint32_t)(mask >> 32);
}

int
gw_caps_from_status(const char *status, const char *field, uint64_t *out)
{
	size_t flen = strlen(field);
	const char *p = status;
	unsigned long long v;
	char *end;

	for (;;) {
		if (strncmp(p, field, flen) == 0 && p[flen] == ':')
			break;
		if ((p = strchr(p, '\n')) == NULL)
			return -1;
		p++;
	}
	p += flen + 1;
	while (*p == '\t' || *p == ' ')
		p++;
	if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f') ||
	    (*p >= 'A' && *p <= 'F')))
		return -1;
	errno = 0;
	v = strtoull(p, &end, 16);
	if (errno != 0 || (*end != '\n' && *end != '\0'))
		return -1;
	*out = (uint64_t)v;
	return 0;
}

static const char *const cap_names[] = {
	"chown", "dac_override", "dac_read_search", "fowner", "fsetid",
	"kill", "setgid", "setuid", "setpcap", "linux_immutable",
	"net_bind_service", "net_broadcast", "net_admin", "net_raw",
	"ipc_lock", "ipc_owner", "sys_module", "sys_rawio", "sys_chroot",
	"sys_ptrace", "sys_pacct", "sys_admin", "sys_boot", "sys_nice",
	"sys_resource", "sys_time", "sys_tty_config", "mknod", "lease",
	"audit_write", "audit_control", "setfcap", "mac_override",
	"mac_admin", "syslog", "wake_alarm", "block_suspend", "audit_read",
	"perfmon", "bpf", "checkpoint_restore",
};

char *
gw_caps_names(uint64_t mask, char *buf, size_t len)
{
	size_t used = 0;
	unsigned c;

	if (len == 0)
		return buf;
	buf[0] = '\0';
	if (mask == 0) {
		snprintf(buf, len, "none");
		return buf;
	}
	for (c = 0; c < 64 && used < len; c++) {
		if (!(mask & GW_CAP(c)))
			continue;
		if (c < sizeof(cap_names) / sizeof(cap_names[0]))
			used += (size_t)snprintf(buf + used, len - used, "%scap_%s",
			    used ? "," : "", cap_names[c]);
		else
			used += (size_t)snprintf(buf + used, len - used, "%scap_%u",
			    used ? "," : "", c);
	}
	return buf;
}

static int
caps_get(struct __user_cap_data_struct data[2])
{
	struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };

	memset(data, 0, 2 * sizeof(*data));
	return (int)syscall(SYS_capget, &hdr, data);
}

int
gw_caps_drop(uint64_t keep, char *err, size_t errlen)
{
	struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct data[2];
	uint64_t have, eff;
	uint32_t w[2];
	int c, in;

	if (caps_get(data) == -1) {
		snprintf(err, errlen, "capget: %s", strerror(errno));
		return -1;
	}
	have = data[0].permitted | (uint64_t)data[1].permitted << 32;
	eff = data[0].effective | (uint64_t)data[1].effective << 32;
	/* capset cannot add to the permitted set */
	keep &= have;
	/* The bounding set is what a program run as root starts with:
	 * shrink it while CAP_SETPCAP is still effective. PR_CAPBSET_READ
	 * fails past the kernel's last capability. */
	for (c = 0; c < 64 && (eff & GW_CAP(CAP_SETPCAP)); c++) {
		if ((in = prctl(PR_CAPBSET_READ, c, 0, 0, 0)) < 0)
			break;
		if (in == 0 || (keep & GW_CAP(c)))
			continue;
		if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) == -1) {
			snprintf(err, errlen, "bounding set: dropping %d: %s", c,
			    strerror(errno));
			return -1;
		}
	}
	/* kernels before 4.3 have no ambient set: nothing to clear */
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) == -1 &&
	    errno != EINVAL) {
		snprintf(err, errlen, "ambient set: %s", strerror(errno));
		return -1;
	}
	gw_caps_words(keep, w);
	data[0].effective = data[0].permitted = w[0];
	data[1].effective = data[1].permitted = w[1];
	data[0].inheritable = data[1].inheritable = 0;
	if (syscall(SYS_capset, &hdr, data) == -1) {
		snprintf(err, errlen, "capset: %s", strerror(errno));
		return -1;
	}
	/* With no_new_privs a program run as root gets the permitted set
	 * intersected with ours, whatever its bounding set says, and a
	 * set-user-ID program gains nothing. */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1) {
		snprintf(err, errlen, "no_new_privs: %s", strerror(errno));
		return -1;
	}
	return 0;
}

static uint64_t
caps_bounding(void)
{
	uint64_t m = 0;
	int c, in;

	for (c = 0; c < 64; c++) {
		if ((in = prctl(PR_CAPBSET_READ, c, 0, 0, 0)) < 0)
			break;
		if (in)
			m |= GW_CAP(c);
	}
	return m;
}

static int
read_small(const char *path, char *buf, size_t len)
{
	ssize_t n;
	size_t got = 0;
	int fd;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return -1;
	while (got < len - 1 && (n = read(fd, buf + got, len - 1 - got)) > 0)
		got += (size_t)n;
	close(fd);
	buf[got] = '\0';
	return 0;
}

int
gw_caps_check_threads(uint64_t keep, int *tid)
{
	char path[64], status[8192];
	struct dirent *de;
	int over = 0;
	DIR *d;

	*tid = 0;
	if ((d = opendir("/proc/self/task")) == NULL)
		return -1;
	while ((de = readdir(d)) != NULL) {
		uint64_t eff, prm, bnd;
		unsigned long t;
		char *end;

		errno = 0;
		t = strtoul(de->d_name, &end, 10);
		if (de->d_name[0] < '0' || de->d_name[0] > '9' || *end != '\0' ||
		    errno != 0 || t > INT_MAX)
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%lu/status", t);
		/* a thread that ended meanwhile holds nothing */
		if (read_small(path, status, sizeof(status)) == -1)
			continue;
		if (gw_caps_from_status(status, "CapEff", &eff) == -1 ||
		    gw_caps_from_status(status, "CapPrm", &prm) == -1 ||
		    gw_caps_from_status(status, "CapBnd", &bnd) == -1 ||
		    ((eff | prm | bnd) & ~keep) != 0) {
			if (over++ == 0)
				*tid = (int)t;
		}
	}
	closedir(d);
	return over;
}

/* ---- reload: which keys differ, which apply live ------------------------ */

enum key_kind { K_STR, K_UINT, K_BOOL, K_UPSTREAMS };

struct config_key {
	const char	*key;
	enum key_kind	 kind;
	size_t		 off;
	bool		 live;
};

#define STR(k, f, l)	{ k, K_STR, offsetof(struct gw_config, f), l }
#define UINT(k, f, l)	{ k, K_UINT, offsetof(struct gw_config, f), l }
#define BOOL(k, f, l)	{ k, K_BOOL, offsetof(struct gw_config, f), l }

/*
 * Every key of the config file. live: a reload applies it (what reads it
 * reads gw->cfg each time, or is told here); otherwise it is set up once
 * (sockets, namespaces, the ruleset, the queue) and needs a restart.
 */
static const struct config_key config_keys[] = {
	{ "dns-upstream", K_UPSTREAMS, 0, true },
	UINT("dns-ttl-min", dns_ttl_min, true),
	UINT("dns-ttl-max", dns_ttl_max, true),
	UINT("dns-grace", dns_grace, true),
	UINT("dns-cache", dns_cache, true),
	UINT("retain-days", retain_days, true),
	STR("capture-denied", capture_denied, true),
	UINT("capture-denied-total", capture_denied_total, true),
	UINT("limit-conn-rate", limit_conn_rate, true),
	UINT("limit-conn-burst", limit_conn_burst, true),
	UINT("limit-dns-rate", limit_dns_rate, true),
	UINT("limit-dns-burst", limit_dns_burst, true),
	UINT("limit-holds", limit_holds, true),
	UINT("http-idle", http_idle, true),
	UINT("copy-interval", copy_interval, true),
	STR("control", control, false),
	STR("db", db, false),
	STR("state-dir", state_dir, false),
	STR("netns", netns, false),
	STR("pool", pool, false),
	STR("uplink-netns", uplink_netns, false),
	STR("uplink-addr", uplink_addr, false),
	STR("uplink-peer-addr", uplink_peer_addr, false),
	UINT("queue-num", queue_num, false),
	UINT("queue-maxlen", queue_maxlen, false),
	UINT("log-queue", log_queue, false),
	UINT("queue-balance", queue_balance, false),
	BOOL("kernel-syn", kernel_syn, false),
	BOOL("kernel-sni", kernel_sni, false),
	STR("metrics-socket", metrics_socket, false),
	STR("metrics-listen", metrics_listen, false),
};

#undef STR
#undef UINT
#undef BOOL

static const char *
key_str(const struct gw_config *c, const struct config_key *k)
{
	const char *s;

	memcpy(&s, (const char *)c + k->off, sizeof(s));
	return s;
}

static unsigned
key_uint(const struct gw_config *c, const struct config_key *k)
{
	unsigned v;

	memcpy(&v, (const char *)c + k->off, sizeof(v));
	return v;
}

static bool
key_bool(const struct gw_config *c, const struct config_key *k)
{
	bool v;

	memcpy(&v, (const char *)c + k->off, sizeof(v));
	return v;
}

static bool
key_differs(const struct gw_config *a, const struct gw_config *b,
    const struct config_key *k)
{
	const char *sa, *sb;
	size_t i;

	switch (k->kind) {
	case K_STR:
		sa = key_str(a, k);
		sb = key_str(b, k);
		if (sa == NULL || sb == NULL)
			return sa != sb;
		return strcmp(sa, sb) != 0;
	case K_UINT:
		return key_uint(a, k) != key_uint(b, k);
	case K_BOOL:
		return key_bool(a, k) != key_bool(b, k);
	case K_UPSTREAMS:
		if (a->ndns != b->ndns)
			return true;
		for (i = 0; i < a->ndns; i++)
			if (strcmp(a->dns_upstream[i], b->dns_upstream[i]) != 0)
				return true;
		return false;
	}
	return false;
}

size_t
gw_config_diff(const struct gw_config *old, const struct gw_config *new,
    struct gw_config_change *out, size_t max)
{
	size_t i, n = 0;

	for (i = 0; i < sizeof(config_keys) / sizeof(config_keys[0]); i++) {
		if (!key_differs(old, new, &config_keys[i]))
			continue;
		if (n < max) {
			out[n].key = config_keys[i].key;
			out[n].live = config_keys[i].live;
		}
		n++;
	}
	return n;
}

const char *
gw_config_value(const struct gw_config *cfg, const char *key, char *buf,
    size_t len)
{
	const struct config_key *k = NULL;
	const char *s;
	size_t i, used = 0;

	for (i = 0; i < sizeof(config_keys) / sizeof(config_keys[0]); i++)
		if (strcmp(config_keys[i].key, key) == 0)
			k = &config_keys[i];
	buf[0] = '\0';
	if (k == NULL)
		return buf;
	switch (k->kind) {
	case K_STR:
		s = key_str(cfg, k);
		snprintf(buf, len, "%s", s ? s : "(none)");
		break;
	case K_UINT:
		snprintf(buf, len, "%u", key_uint(cfg, k));
		break;
	case K_BOOL:
		snprintf(buf, len, "%s", key_bool(cfg, k) ? "on" : "off");
		break;
	case K_UPSTREAMS:
		if (cfg->ndns == 0)
			snprintf(buf, len, "(none)");
		for (i = 0; i < cfg->ndns && used < len; i++)
			used += (size_t)snprintf(buf + used, len - used, "%s%s",
			    i ? "," : "", cfg->dns_upstream[i]);
		break;
	}
	return buf;
}

/* ---- the daemon's side -------------------------------------------------- */

static uint64_t kept_caps;	/* after gw_service_drop */
static size_t status_sandboxes = (size_t)-1;	/* in the last STATUS= */

int
gw_service_drop(struct gw *gw, char *err, size_t errlen)
{
	struct store_opts sopts = {
		.retain_days = gw->cfg.retain_days,
		.queue_cap = gw->cfg.log_queue,
	};
	struct __user_cap_data_struct data[2];
	char names[512], serr[1024];
	uint64_t bnd;

	if (gw_caps_drop(gw_caps_runtime(), err, errlen) == -1)
		return -1;
	if (caps_get(data) == -1) {
		snprintf(err, errlen, "capget: %s", strerror(errno));
		return -1;
	}
	kept_caps = data[0].permitted | (uint64_t)data[1].permitted << 32;
	bnd = caps_bounding();
	log_info("capabilities: kept %s", gw_caps_names(kept_caps, names,
	    sizeof(names)));
	if (bnd & ~kept_caps)
		log_warnx("capabilities: no CAP_SETPCAP, the bounding set keeps "
		    "%s (no_new_privs still holds programs sluiced runs to "
		    "the set above)", gw_caps_names(bnd & ~kept_caps, names,
		    sizeof(names)));
	kept_caps |= bnd;
	/*
	 * Capabilities belong to threads, and a thread's can only be changed
	 * by itself. The store's writer was started before setup (setup
	 * logs); start it again from this thread, so that it inherits the
	 * reduced sets. Closing flushes what setup queued.
	 */
	gw_log_lost_at_close(store_close(gw->store));
	if ((gw->store = store_open(gw->cfg.db, &sopts, serr,
	    sizeof(serr))) == NULL) {
		snprintf(err, errlen, "reopening the store: %s", serr);
		return -1;
	}
	return 0;
}

static void
send_status(struct gw *gw, const char *prefix)
{
	status_sandboxes = gw->nsandboxes;
	if (gw_notify("%sSTATUS=%zu sandboxes, %zu upstream resolvers, "
	    "gateway %s", prefix, gw->nsandboxes, gw->cfg.ndns,
	    gw->cfg.netns) == -1)
		log_warn("sd_notify");
}

void
gw_service_ready(struct gw *gw)
{
	int tid, over;

	over = gw_caps_check_threads(kept_caps, &tid);
	if (over > 0)
		log_warnx("capabilities: %d thread(s) (the first: %d) hold more "
		    "than the kept set: they were started before the drop",
		    over, tid);
	else if (over == -1)
		log_warn("/proc/self/task");
	send_status(gw, "READY=1\n");
}

void
gw_service_status(struct gw *gw)
{
	if (gw->nsandboxes != status_sandboxes)
		send_status(gw, "");
}

void
gw_service_stopping(struct gw *gw)
{
	(void)gw;
	if (gw_notify("STOPPING=1\nSTATUS=stopping; sandboxes stay and fail "
	    "closed") == -1)
		log_warn("sd_notify");
}

static uint64_t
monotonic_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

/*
 * gw_config_parse prints its errors to stderr, which is /dev/null once
 * daemonized: run it with stderr on a memory file, and log each line.
 */
static int
parse_logged(struct gw_config *cfg, int argc, char **argv)
{
	char buf[4096], *line, *save = NULL;
	int mfd, saved, rc;
	ssize_t n;

	fflush(stderr);
	mfd = memfd_create("sluiced-reload", MFD_CLOEXEC);
	saved = mfd == -1 ? -1 : fcntl(2, F_DUPFD_CLOEXEC, 3);
	if (saved != -1 && dup2(mfd, 2) == -1) {
		close(saved);
		saved = -1;
	}
	/* glibc's getopt starts over only from optind 0 */
	optind = 0;
	rc = gw_config_parse(cfg, argc, argv);
	fflush(stderr);
	if (saved == -1) {
		if (mfd != -1)
			close(mfd);
		return rc;
	}
	dup2(saved, 2);
	close(saved);
	n = pread(mfd, buf, sizeof(buf) - 1, 0);
	close(mfd);
	buf[n > 0 ? n : 0] = '\0';
	for (line = strtok_r(buf, "\n", &save); line != NULL;
	    line = strtok_r(NULL, "\n", &save)) {
		if (strncmp(line, "sluiced: ", 9) == 0)
			line += 9;
		/* the usage text after a bad flag says nothing new */
		if (strncmp(line, "usage:", 6) == 0)
			break;
		log_warnx("reload: %s", line);
	}
	return rc;
}

/* Upstream addresses as dns_resolver_open takes them; -1 names the bad one. */
static int
upstreams_of(const struct gw_config *c, uint32_t *up, char *err, size_t errlen)
{
	size_t i;

	for (i = 0; i < c->ndns; i++) {
		struct in_addr a;

		if (inet_pton(AF_INET, c->dns_upstream[i], &a) != 1) {
			snprintf(err, errlen, "dns-upstream %s: not an IPv4 "
			    "address", c->dns_upstream[i]);
			return -1;
		}
		up[i] = a.s_addr;
	}
	return 0;
}

static bool
same_str(const char *a, const char *b)
{
	return a == NULL || b == NULL ? a == b : strcmp(a, b) == 0;
}

void
gw_service_reload(struct gw *gw, int argc, char **argv)
{
	struct gw_config nc = { 0 };
	struct gw_config_change ch[64];
	struct gw_capture *cap = NULL;
	uint32_t up[DNS_UPSTREAM_MAX];
	char err[1024], was[512], now[512];
	size_t n, i, applied = 0, restart = 0;
	bool new_capture;

	if (gw_notify("RELOADING=1\nMONOTONIC_USEC=%llu\nSTATUS=reloading",
	    (unsigned long long)monotonic_us()) == -1)
		log_warn("sd_notify");
	log_info("SIGHUP: reading the configuration again");
	if (parse_logged(&nc, argc, argv) != 0) {
		log_warnx("reload: the configuration does not parse: nothing "
		    "changed");
		goto done;
	}
	/* Everything that can fail is done before anything is changed. */
	if (upstreams_of(&nc, up, err, sizeof(err)) == -1) {
		log_warnx("reload: %s: nothing changed", err);
		goto done;
	}
	new_capture = !same_str(nc.capture_denied, gw->cfg.capture_denied);
	if (new_capture && nc.capture_denied != NULL &&
	    (cap = gw_capture_open(nc.capture_denied, GW_CAPTURE_MAX_BYTES,
	    err, sizeof(err))) == NULL) {
		log_warnx("reload: capture-denied: %s: nothing changed", err);
		goto done;
	}

	n = gw_config_diff(&gw->cfg, &nc, ch, sizeof(ch) / sizeof(ch[0]));
	if (n > sizeof(ch) / sizeof(ch[0]))
		n = sizeof(ch) / sizeof(ch[0]);
	for (i = 0; i < n; i++) {
		gw_config_value(&gw->cfg, ch[i].key, was, sizeof(was));
		gw_config_value(&nc, ch[i].key, now, sizeof(now));
		if (ch[i].live) {
			log_info("reload: %s: %s -> %s", ch[i].key, was, now);
			applied++;
		} else {
			log_warnx("reload: %s: %s -> %s needs a restart (%s "
			    "stays until then)", ch[i].key, was, now, was);
			restart++;
		}
	}
	/* The live keys. What reads them reads gw->cfg each time (the
	 * resolver's policy side, the limits) or is told here. */
	if (dns_resolver_set_upstreams(gw->resolver, up, nc.ndns) == 0) {
		memcpy(gw->cfg.dns_upstream, nc.dns_upstream,
		    sizeof(gw->cfg.dns_upstream));
		gw->cfg.ndns = nc.ndns;
		json_decref(gw->upstream_file);
		gw->upstream_file = json_incref(nc.file);
	}
	gw->cfg.dns_ttl_min = nc.dns_ttl_min;
	gw->cfg.dns_ttl_max = nc.dns_ttl_max;
	gw->cfg.dns_grace = nc.dns_grace;
	if (nc.dns_cache != gw->cfg.dns_cache) {
		if (dns_resolver_set_cache(gw->resolver, nc.dns_cache) == 0)
			gw->cfg.dns_cache = nc.dns_cache;
		else
			log_warn("reload: dns-cache %u (%u stays)",
			    nc.dns_cache, gw->cfg.dns_cache);
	}
	gw->cfg.limit_conn_rate = nc.limit_conn_rate;
	gw->cfg.limit_conn_burst = nc.limit_conn_burst;
	gw->cfg.limit_dns_rate = nc.limit_dns_rate;
	gw->cfg.limit_dns_burst = nc.limit_dns_burst;
	gw->cfg.limit_holds = nc.limit_holds;
	gw->cfg.http_idle = nc.http_idle;
	gw->cfg.copy_interval = nc.copy_interval;	/* read every pass */
	if (nc.retain_days != gw->cfg.retain_days) {
		store_set_retain_days(gw->store, nc.retain_days);
		gw->cfg.retain_days = nc.retain_days;
	}
	if (new_capture) {
		gw_capture_close(gw->capture);
		gw->capture = cap;
		gw->cfg.capture_denied = nc.capture_denied;
		json_decref(gw->capture_file);
		gw->capture_file = json_incref(nc.file);
		gw->capture_removed_seen = 0;	/* a new capture's counts */
		gw->capture_errors_seen = 0;
	}
	/* a new directory, or a new bound: scanned now, what is removed
	 * said by the loop (a failed scan too) */
	if (gw->capture != NULL && (new_capture ||
	    nc.capture_denied_total != gw->cfg.capture_denied_total))
		(void)gw_capture_set_total(gw->capture,
		    (uint64_t)nc.capture_denied_total << 20,
		    gw_sandbox_names_live, gw);
	gw->cfg.capture_denied_total = nc.capture_denied_total;
	log_info("reload: %zu change(s) applied, %zu need a restart%s; "
	    "sandboxes are not re-read from %s (%zu running: the control "
	    "socket changes them)", applied, restart,
	    n == 0 ? " (nothing changed)" : "", gw->cfg.state_dir,
	    gw->nsandboxes);
done:
	/* What nc holds goes, but for the documents adopted strings hold. */
	gw_config_free(&nc);
	send_status(gw, "READY=1\n");
}
