/* test_service.c: sd_notify messages, capability sets, what a reload changes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <linux/capability.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "gateway/service.h"

/* ---- $NOTIFY_SOCKET ---------------------------------------------------- */

static void
test_notify_addr_path(void **state)
{
	struct sockaddr_un sun;
	socklen_t len = 0;

	(void)state;
	assert_int_equal(gw_notify_addr("/run/systemd/notify", &sun, &len), 0);
	assert_int_equal(sun.sun_family, AF_UNIX);
	assert_string_equal(sun.sun_path, "/run/systemd/notify");
	/* family, the path and its NUL */
	assert_int_equal(len, offsetof(struct sockaddr_un, sun_path) + 20);
}

static void
test_notify_addr_abstract(void **state)
{
	struct sockaddr_un sun;
	socklen_t len = 0;

	(void)state;
	assert_int_equal(gw_notify_addr("@sd-notify/x", &sun, &len), 0);
	assert_int_equal(sun.sun_path[0], '\0');
	assert_memory_equal(sun.sun_path + 1, "sd-notify/x", 11);
	/* no NUL of its own: the length ends the name */
	assert_int_equal(len, offsetof(struct sockaddr_un, sun_path) + 12);
}

static void
test_notify_addr_bad(void **state)
{
	struct sockaddr_un sun;
	socklen_t len = 0;
	char longp[sizeof(sun.sun_path) + 2];

	(void)state;
	errno = 0;
	assert_int_equal(gw_notify_addr("run/notify", &sun, &len), -1);
	assert_int_equal(errno, EINVAL);
	assert_int_equal(gw_notify_addr("", &sun, &len), -1);
	assert_int_equal(errno, EINVAL);
	assert_int_equal(gw_notify_addr("@", &sun, &len), -1);
	assert_int_equal(errno, EINVAL);
	assert_int_equal(gw_notify_addr("vsock:2:1234", &sun, &len), -1);
	assert_int_equal(errno, EINVAL);

	/* 108 bytes of path: no room for its NUL */
	memset(longp, 'a', sizeof(sun.sun_path));
	longp[0] = '/';
	longp[sizeof(sun.sun_path)] = '\0';
	assert_int_equal(gw_notify_addr(longp, &sun, &len), -1);
	assert_int_equal(errno, ENAMETOOLONG);
	/* 107 bytes fit */
	longp[sizeof(sun.sun_path) - 1] = '\0';
	assert_int_equal(gw_notify_addr(longp, &sun, &len), 0);
	/* abstract: '@' plus 107 bytes fit exactly (no NUL needed) */
	memset(longp, 'b', sizeof(sun.sun_path));
	longp[0] = '@';
	longp[sizeof(sun.sun_path)] = '\0';
	assert_int_equal(gw_notify_addr(longp, &sun, &len), 0);
	assert_int_equal(len, sizeof(struct sockaddr_un));
	longp[sizeof(sun.sun_path)] = 'b';
	longp[sizeof(sun.sun_path) + 1] = '\0';
	assert_int_equal(gw_notify_addr(longp, &sun, &len), -1);
	assert_int_equal(errno, ENAMETOOLONG);
}

/* Binds a datagram socket at value's address. */
static int
listener(const char *value)
{
	struct sockaddr_un sun;
	socklen_t len;
	int fd;

	assert_int_equal(gw_notify_addr(value, &sun, &len), 0);
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sun, len), 0);
	return fd;
}

static void
expect_message(int fd, const char *want)
{
	char buf[600];
	ssize_t n;

	n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
	assert_int_equal(n, (ssize_t)strlen(want));
	assert_memory_equal(buf, want, (size_t)n);
}

static void
test_notify_send(void **state)
{
	char err[256], name[64], path[64];
	int fd;

	(void)state;
	/* no manager: nothing is sent, and that is no error */
	unsetenv("NOTIFY_SOCKET");
	assert_int_equal(gw_notify_open(err, sizeof(err)), 0);
	assert_int_equal(gw_notify("READY=1"), 0);

	snprintf(name, sizeof(name), "@sluice-test-notify-%d", (int)getpid());
	fd = listener(name);
	setenv("NOTIFY_SOCKET", name, 1);
	assert_int_equal(gw_notify_open(err, sizeof(err)), 0);
	/* left in the environment, as sd_notify(0, ...) does */
	assert_string_equal(getenv("NOTIFY_SOCKET"), name);
	assert_int_equal(gw_notify("READY=1\nSTATUS=%d sandboxes", 3), 0);
	expect_message(fd, "READY=1\nSTATUS=3 sandboxes");
	assert_int_equal(gw_notify("STOPPING=1"), 0);
	expect_message(fd, "STOPPING=1");
	close(fd);

	snprintf(path, sizeof(path), "/tmp/sluice-test-notify-%d", (int)getpid());
	unlink(path);
	fd = listener(path);
	setenv("NOTIFY_SOCKET", path, 1);
	assert_int_equal(gw_notify_open(err, sizeof(err)), 0);
	assert_int_equal(gw_notify("RELOADING=1"), 0);
	expect_message(fd, "RELOADING=1");
	close(fd);
	unlink(path);
	/* nobody listens any more: the send fails, the caller logs */
	assert_int_equal(gw_notify("READY=1"), -1);

	setenv("NOTIFY_SOCKET", "relative/path", 1);
	assert_int_equal(gw_notify_open(err, sizeof(err)), -1);
	assert_non_null(strstr(err, "NOTIFY_SOCKET=relative/path"));
	unsetenv("NOTIFY_SOCKET");
}

/* ---- capabilities ------------------------------------------------------ */

static void
test_caps_runtime(void **state)
{
	uint64_t m = gw_caps_runtime();
	char names[256];

	(void)state;
	/* CAP_NET_ADMIN 12, CAP_SYS_CHROOT 18, CAP_SYS_PTRACE 19,
	 * CAP_SYS_ADMIN 21 */
	assert_int_equal(m, UINT64_C(0x2c1000));
	assert_false(m & GW_CAP(CAP_NET_BIND_SERVICE));
	assert_false(m & GW_CAP(CAP_CHOWN));
	assert_false(m & GW_CAP(CAP_SETPCAP));
	assert_false(m & GW_CAP(CAP_NET_RAW));
	assert_false(m & GW_CAP(CAP_DAC_OVERRIDE));
	assert_string_equal(gw_caps_names(m, names, sizeof(names)),
	    "cap_net_admin,cap_sys_chroot,cap_sys_ptrace,cap_sys_admin");
}

static void
test_caps_words_and_names(void **state)
{
	uint32_t w[2];
	char names[64];

	(void)state;
	gw_caps_words(GW_CAP(CAP_CHOWN) | GW_CAP(CAP_SYS_ADMIN) |
	    GW_CAP(CAP_CHECKPOINT_RESTORE), w);
	assert_int_equal(w[0], 0x200001u);
	assert_int_equal(w[1], 1u << (CAP_CHECKPOINT_RESTORE - 32));
	gw_caps_words(0, w);
	assert_int_equal(w[0], 0);
	assert_int_equal(w[1], 0);

	assert_string_equal(gw_caps_names(0, names, sizeof(names)), "none");
	assert_string_equal(gw_caps_names(GW_CAP(CAP_CHECKPOINT_RESTORE) |
	    GW_CAP(50), names, sizeof(names)), "cap_checkpoint_restore,cap_50");
	/* truncated, still terminated */
	assert_string_equal(gw_caps_names(GW_CAP(CAP_NET_ADMIN) |
	    GW_CAP(CAP_SYS_ADMIN), names, 12), "cap_net_adm");
}

static void
test_caps_from_status(void **state)
{
	static const char status[] =
	    "Name:\tsluiced\n"
	    "CapInh:\t0000000000000000\n"
	    "CapPrm:\t00000000002c1000\n"
	    "CapEff:\t00000000002c1000\n"
	    "CapBnd:\t000001ffffffffff\n"
	    "CapAmb:\t0000000000000000\n"
	    "NoNewPrivs:\t1\n";
	uint64_t v = 0;

	(void)state;
	assert_int_equal(gw_caps_from_status(status, "CapEff", &v), 0);
	assert_int_equal(v, UINT64_C(0x2c1000));
	assert_int_equal(gw_caps_from_status(status, "CapBnd", &v), 0);
	assert_int_equal(v, UINT64_C(0x1ffffffffff));
	assert_int_equal(gw_caps_from_status(status, "CapInh", &v), 0);
	assert_int_equal(v, 0);
	/* a field name must match whole, at the start of a line */
	assert_int_equal(gw_caps_from_status(status, "Cap", &v), -1);
	assert_int_equal(gw_caps_from_status(status, "apEff", &v), -1);
	assert_int_equal(gw_caps_from_status(status, "CapX", &v), -1);
	assert_int_equal(gw_caps_from_status("CapEff:\tzz\n", "CapEff", &v), -1);
	assert_int_equal(gw_caps_from_status("CapEff:\t12g4\n", "CapEff", &v), -1);
	assert_int_equal(gw_caps_from_status("CapEff:\t-1\n", "CapEff", &v), -1);
	assert_int_equal(gw_caps_from_status("CapEff:\t\n", "CapEff", &v), -1);
	assert_int_equal(gw_caps_from_status("CapEff:\tff", "CapEff", &v), 0);
	assert_int_equal(v, 0xff);
}

static uint64_t
self_status(const char *field)
{
	char buf[8192];
	uint64_t v = UINT64_MAX;
	size_t n;
	FILE *f = fopen("/proc/self/status", "re");

	if (f == NULL)
		return UINT64_MAX;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	if (gw_caps_from_status(buf, field, &v) == -1)
		return UINT64_MAX;
	return v;
}

static pthread_mutex_t park = PTHREAD_MUTEX_INITIALIZER;

static void *
parked(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&park);
	pthread_mutex_unlock(&park);
	return NULL;
}

/*
 * In a child (the drop cannot be undone): drops to CAP_NET_ADMIN and
 * CAP_SYS_ADMIN, with one thread started before. Exit status: 0 when
 * every check passed, else the number of the first that failed.
 */
static int
drop_child(void)
{
	const uint64_t keep = GW_CAP(CAP_NET_ADMIN) | GW_CAP(CAP_SYS_ADMIN);
	char err[256];
	pthread_t t;
	int tid, rc = 0;

	pthread_mutex_lock(&park);
	if (pthread_create(&t, NULL, parked, NULL) != 0)
		return 1;
	if (gw_caps_drop(keep, err, sizeof(err)) == -1) {
		fprintf(stderr, "drop: %s\n", err);
		rc = 2;
	} else if (self_status("CapEff") != keep ||
	    self_status("CapPrm") != keep) {
		rc = 3;
	} else if (self_status("CapBnd") != keep) {
		rc = 4;
	} else if (self_status("CapInh") != 0 || self_status("CapAmb") != 0) {
		rc = 5;
	} else if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1) {
		rc = 6;
	} else if (gw_caps_check_threads(keep, &tid) != 1 || tid == 0 ||
	    tid == (int)getpid()) {
		/* the thread made before the drop still holds everything */
		rc = 7;
	}
	pthread_mutex_unlock(&park);
	pthread_join(t, NULL);
	if (rc == 0 && gw_caps_check_threads(keep, &tid) != 0)
		rc = 8;
	/* a second drop to less works; asking for more than is held is
	 * narrowed, not an error */
	if (rc == 0 && gw_caps_drop(GW_CAP(CAP_NET_ADMIN) |
	    GW_CAP(CAP_NET_RAW), err, sizeof(err)) == -1)
		rc = 9;
	if (rc == 0 && self_status("CapEff") != GW_CAP(CAP_NET_ADMIN))
		rc = 10;
	return rc;
}

static void
test_caps_drop(void **state)
{
	int status;
	pid_t pid;

	(void)state;
	if (geteuid() != 0 || !(self_status("CapEff") & GW_CAP(CAP_SETPCAP)) ||
	    !(self_status("CapEff") & GW_CAP(CAP_SYS_ADMIN)))
		skip();
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(drop_child());
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

/* ---- reload: the diff --------------------------------------------------- */

static void
base_config(struct gw_config *c)
{
	memset(c, 0, sizeof(*c));
	c->control = "/run/sluice/ctl.sock";
	c->db = "/var/lib/sluice/flows.db";
	c->state_dir = "/var/lib/sluice";
	c->netns = "sluice";
	c->pool = "10.213.0.0/16";
	c->dns_upstream[0] = "198.51.100.53";
	c->ndns = 1;
	c->dns_ttl_min = 30;
	c->dns_ttl_max = 600;
	c->dns_grace = 10;
	c->queue_maxlen = 4096;
}

static void
test_config_diff(void **state)
{
	struct gw_config a, b;
	struct gw_config_change ch[8];
	char buf[128];
	char same_text[] = "10.213.0.0/16";	/* another pointer, same text */

	(void)state;
	base_config(&a);
	base_config(&b);
	b.pool = same_text;
	assert_int_equal(gw_config_diff(&a, &b, ch, 8), 0);

	b.dns_upstream[0] = "198.51.100.54";
	b.retain_days = 7;
	b.pool = "10.99.0.0/16";
	b.capture_denied = "/var/lib/sluice/pcap";
	assert_int_equal(gw_config_diff(&a, &b, ch, 8), 4);
	/* in the table's order: the live keys first */
	assert_string_equal(ch[0].key, "dns-upstream");
	assert_true(ch[0].live);
	assert_string_equal(ch[1].key, "retain-days");
	assert_true(ch[1].live);
	assert_string_equal(ch[2].key, "capture-denied");
	assert_true(ch[2].live);
	assert_string_equal(ch[3].key, "pool");
	assert_false(ch[3].live);
	/* room for two: two filled, four counted */
	memset(ch, 0, sizeof(ch));
	assert_int_equal(gw_config_diff(&a, &b, ch, 2), 4);
	assert_null(ch[2].key);

	/* --http-idle applies at once */
	base_config(&b);
	b.http_idle = 30;
	assert_int_equal(gw_config_diff(&a, &b, ch, 8), 1);
	assert_string_equal(ch[0].key, "http-idle");
	assert_true(ch[0].live);
	assert_string_equal(gw_config_value(&b, "http-idle", buf, sizeof(buf)),
	    "30");

	/* so does --capture-denied-total (the directory is scanned again) */
	base_config(&b);
	b.capture_denied_total = a.capture_denied_total + 64;
	assert_int_equal(gw_config_diff(&a, &b, ch, 8), 1);
	assert_string_equal(ch[0].key, "capture-denied-total");
	assert_true(ch[0].live);

	/* a second upstream is a change; so is one fewer */
	base_config(&b);
	b.dns_upstream[1] = "198.51.100.54";
	b.ndns = 2;
	assert_int_equal(gw_config_diff(&a, &b, ch, 8), 1);
	assert_string_equal(ch[0].key, "dns-upstream");
	assert_string_equal(gw_config_value(&b, "dns-upstream", buf,
	    sizeof(buf)), "198.51.100.53,198.51.100.54");
	b.ndns = 0;
	assert_string_equal(gw_config_value(&b, "dns-upstream", buf,
	    sizeof(buf)), "(none)");

	/* every restart-only key is reported as such */
	base_config(&b);
	b.netns = "other";
	b.queue_num = 3;
	b.uplink_netns = "up";
	b.kernel_syn = !a.kernel_syn;
	b.kernel_sni = !a.kernel_sni;
	assert_int_equal(gw_config_diff(&a, &b, ch, 8), 5);
	assert_false(ch[0].live);
	assert_false(ch[1].live);
	assert_false(ch[2].live);
	assert_false(ch[3].live);
	assert_false(ch[4].live);
	assert_string_equal(ch[0].key, "netns");
	assert_string_equal(ch[1].key, "uplink-netns");
	assert_string_equal(ch[2].key, "queue-num");
	assert_string_equal(ch[3].key, "kernel-syn");
	assert_string_equal(ch[4].key, "kernel-sni");
	assert_string_equal(gw_config_value(&b, "kernel-syn", buf, sizeof(buf)),
	    b.kernel_syn ? "on" : "off");
	assert_string_equal(gw_config_value(&b, "kernel-sni", buf, sizeof(buf)),
	    b.kernel_sni ? "on" : "off");

	assert_string_equal(gw_config_value(&b, "queue-num", buf, sizeof(buf)),
	    "3");
	assert_string_equal(gw_config_value(&a, "capture-denied", buf,
	    sizeof(buf)), "(none)");
	assert_string_equal(gw_config_value(&a, "no-such-key", buf,
	    sizeof(buf)), "");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_notify_addr_path),
		cmocka_unit_test(test_notify_addr_abstract),
		cmocka_unit_test(test_notify_addr_bad),
		cmocka_unit_test(test_notify_send),
		cmocka_unit_test(test_caps_runtime),
		cmocka_unit_test(test_caps_words_and_names),
		cmocka_unit_test(test_caps_from_status),
		cmocka_unit_test(test_caps_drop),
		cmocka_unit_test(test_config_diff),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
