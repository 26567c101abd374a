/* ksni.c: first flights approved in the kernel, and the table that lets them.
 *
 * A TLS connection's first flight goes through the queue so that sluiced
 * can read the name it presents. For the plainest flight, one segment
 * holding exactly one ClientHello, the answer depends only on the
 * (sandbox interface, destination, port, name) and on state that changes
 * rarely, so once sluiced has allowed such a flight it teaches the kernel
 * the key, and an eBPF program (nfq/bpf/ksni.bpf.c) behind an iptables
 * `-m bpf --object-pinned` rule approves the next one without the trip
 * through userspace. The program is conservative: anything but that
 * plain shape, or a key not learned, is left to the queue.
 *
 * The object is built by clang into build/nfq/bpf/ksni.bpf.o and embedded
 * in the library (ksni_obj.S), so there is no file to install or find.
 *
 * Forgetting is by generation: the program approves an entry only under
 * the current one, so nfq_ksni_clear drops everything at once with one
 * write, and nfq_ksni_close sets it to 0 so that a rule still holding the
 * program (xt_bpf keeps its own reference) approves nothing. Old entries
 * stay in the table until the LRU pushes them out or an add overwrites
 * them.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <dirent.h>
#include <libgen.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <linux/magic.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "nfq/nfq.h"
#include "nfq/bpf/ksni_int.h"

/* ksni_obj.S */
extern const unsigned char nfq_ksni_obj[];
extern const unsigned char nfq_ksni_obj_end[];

/* The verifier's log is kept only for a failed load: its last line, the
 * reason, goes into err. */
#define KSNI_LOG_SIZE	(256 * 1024)

struct nfq_ksni {
	struct bpf_object	*obj;
	int			 prog_fd;
	int			 names_fd;
	int			 gen_fd;
	int			 lease_fd;
	int			 counters_fd;
	uint32_t		 gen;
	uint32_t		 prog_id;
	int			 ncpus;
	uint64_t		*percpu;	/* a counter's value per CPU */
	struct nfq_ksni_stats	 stats;		/* adds, add_errors, clears */
	char			 path[PATH_MAX];
};

/* libbpf prints to stderr by default; a module prints nothing. */
static int
quiet(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	(void)level;
	(void)fmt;
	(void)ap;
	return 0;
}

static int
set_gen(int fd, uint32_t gen)
{
	uint32_t zero = 0;

	return bpf_map_update_elem(fd, &zero, &gen, BPF_ANY);
}

/* mkdir -p, mode 0700 for what it makes. */
static int
mkdirs(const char *dir)
{
	char buf[PATH_MAX], *p;

	if (snprintf(buf, sizeof(buf), "%s", dir) >= (int)sizeof(buf)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	for (p = buf + 1; *p != '\0'; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0700) == -1 && errno != EEXIST)
			return -1;
		*p = '/';
	}
	if (mkdir(buf, 0700) == -1 && errno != EEXIST)
		return -1;
	return 0;
}

static bool
dir_empty(const char *dir)
{
	DIR *d;
	struct dirent *e;
	bool empty = true;

	if ((d = opendir(dir)) == NULL)
		return false;
	while ((e = readdir(d)) != NULL)
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
			empty = false;
			break;
		}
	closedir(d);
	return empty;
}

/*
 * A bpffs on dir: there already, or mounted now. Only on an empty
 * directory: a mount over one that holds files (a control socket under
 * /run) would hide them from everyone.
 */
static int
bpffs_at(const char *dir, char *err, size_t errlen)
{
	struct statfs sf;

	if (mkdirs(dir) == -1) {
		snprintf(err, errlen, "%s: %s", dir, strerror(errno));
		return -1;
	}
	if (statfs(dir, &sf) == -1) {
		snprintf(err, errlen, "%s: %s", dir, strerror(errno));
		return -1;
	}
	if (sf.f_type == BPF_FS_MAGIC)
		return 0;
	if (!dir_empty(dir)) {
		snprintf(err, errlen, "%s: not a bpf file system, and not empty",
		    dir);
		return -1;
	}
	if (mount("bpf", dir, "bpf", 0, "mode=0700") == -1) {
		snprintf(err, errlen, "mount bpf on %s: %s", dir,
		    strerror(errno));
		return -1;
	}
	return 0;
}

/* The id of the program pinned at path, or 0. */
static uint32_t
pinned_prog_id(const char *path, struct bpf_prog_info *info)
{
	uint32_t len = sizeof(*info);
	int fd;

	memset(info, 0, sizeof(*info));
	if ((fd = bpf_obj_get(path)) < 0)
		return 0;
	if (bpf_obj_get_info_by_fd(fd, info, &len) != 0)
		info->id = 0;
	close(fd);
	return info->id;
}

/*
 * A program left pinned by an earlier run that did not close (a crash)
 * may still be held by a rule: its generation goes to 0 before the pin
 * goes, so that it approves nothing from its old table. Best effort, and
 * only on what is recognisably ours: a socket filter named ksni_check
 * and its array named ksni_gen.
 */
static void
disarm_stale(const char *path)
{
	struct bpf_prog_info info;
	struct bpf_map_info minfo;
	uint32_t ids[8], len, i;
	int fd, mfd;

	if ((fd = bpf_obj_get(path)) < 0)
		return;
	memset(&info, 0, sizeof(info));
	memset(ids, 0, sizeof(ids));
	info.nr_map_ids = sizeof(ids) / sizeof(ids[0]);
	info.map_ids = (uint64_t)(uintptr_t)ids;
	len = sizeof(info);
	if (bpf_obj_get_info_by_fd(fd, &info, &len) != 0 ||
	    info.type != BPF_PROG_TYPE_SOCKET_FILTER ||
	    strcmp(info.name, "ksni_check") != 0) {
		close(fd);
		return;
	}
	close(fd);
	for (i = 0; i < info.nr_map_ids && i < sizeof(ids) / sizeof(ids[0]);
	    i++) {
		if ((mfd = bpf_map_get_fd_by_id(ids[i])) < 0)
			continue;
		memset(&minfo, 0, sizeof(minfo));
		len = sizeof(minfo);
		if (bpf_obj_get_info_by_fd(mfd, &minfo, &len) == 0 &&
		    minfo.type == BPF_MAP_TYPE_ARRAY &&
		    strcmp(minfo.name, "ksni_gen") == 0 &&
		    minfo.key_size == 4 && minfo.value_size == 4 &&
		    minfo.max_entries == 1)
			(void)set_gen(mfd, 0);
		close(mfd);
	}
}

/* The verifier's last words: the line that says why. */
static const char *
log_reason(char *log)
{
	char *end = log + strlen(log), *p;

	while (end > log && (end[-1] == '\n' || end[-1] == ' '))
		*--end = '\0';
	if ((p = strrchr(log, '\n')) == NULL)
		return log;
	/* "processed N insns ..." follows the reason when there is one */
	if (strncmp(p + 1, "processed ", 10) == 0 && p > log) {
		*p = '\0';
		if ((p = strrchr(log, '\n')) == NULL)
			return log;
	}
	return p + 1;
}

static int
map_fd(struct nfq_ksni *k, const char *name, char *err, size_t errlen)
{
	struct bpf_map *m;
	int fd;

	if ((m = bpf_object__find_map_by_name(k->obj, name)) == NULL ||
	    (fd = bpf_map__fd(m)) < 0) {
		snprintf(err, errlen, "bpf object: no map %s", name);
		return -1;
	}
	return fd;
}

static int
load(struct nfq_ksni *k, uint32_t max_entries, char *err, size_t errlen)
{
	struct bpf_program *prog;
	struct bpf_map *names;
	char *log;
	int rc = -1;

	if ((log = calloc(1, KSNI_LOG_SIZE)) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	LIBBPF_OPTS(bpf_object_open_opts, opts,
	    .object_name = "ksni",
	    .kernel_log_buf = log,
	    .kernel_log_size = KSNI_LOG_SIZE);
	k->obj = bpf_object__open_mem(nfq_ksni_obj,
	    (size_t)(nfq_ksni_obj_end - nfq_ksni_obj), &opts);
	if (k->obj == NULL) {
		snprintf(err, errlen, "bpf object: %s", strerror(errno));
		goto cleanup;
	}
	if ((names = bpf_object__find_map_by_name(k->obj,
	    "ksni_names")) == NULL ||
	    bpf_map__set_max_entries(names, max_entries) != 0) {
		snprintf(err, errlen, "bpf object: no map ksni_names");
		goto cleanup;
	}
	if (bpf_object__load(k->obj) != 0) {
		int e = errno;

		snprintf(err, errlen, "bpf load: %s%s%s", strerror(e),
		    log[0] != '\0' ? ": " : "",
		    log[0] != '\0' ? log_reason(log) : "");
		goto cleanup;
	}
	if ((prog = bpf_object__find_program_by_name(k->obj,
	    "ksni_check")) == NULL ||
	    (k->prog_fd = bpf_program__fd(prog)) < 0) {
		snprintf(err, errlen, "bpf object: no program ksni_check");
		goto cleanup;
	}
	if ((k->names_fd = map_fd(k, "ksni_names", err, errlen)) == -1 ||
	    (k->gen_fd = map_fd(k, "ksni_gen", err, errlen)) == -1 ||
	    (k->lease_fd = map_fd(k, "ksni_lease", err, errlen)) == -1 ||
	    (k->counters_fd = map_fd(k, "ksni_counters", err, errlen)) == -1)
		goto cleanup;
	rc = 0;
cleanup:
	free(log);
	return rc;
}

struct nfq_ksni *
nfq_ksni_open(const char *pin_path, uint32_t max_entries, char *err,
    size_t errlen)
{
	struct nfq_ksni *k;
	struct bpf_prog_info info;
	libbpf_print_fn_t old;
	char dir[PATH_MAX];
	uint32_t len = sizeof(info);
	int rc;

	if (pin_path[0] != '/' || snprintf(dir, sizeof(dir), "%s",
	    pin_path) >= (int)sizeof(dir)) {
		snprintf(err, errlen, "%s: not an absolute path", pin_path);
		return NULL;
	}
	if (max_entries == 0) {
		snprintf(err, errlen, "a table of 0 entries");
		return NULL;
	}
	if ((k = calloc(1, sizeof(*k))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	snprintf(k->path, sizeof(k->path), "%s", pin_path);
	k->prog_fd = k->names_fd = k->gen_fd = k->lease_fd =
	    k->counters_fd = -1;
	if ((k->ncpus = libbpf_num_possible_cpus()) <= 0 ||
	    (k->percpu = calloc((size_t)k->ncpus, sizeof(uint64_t))) == NULL) {
		snprintf(err, errlen, "possible CPUs: %s",
		    k->ncpus < 0 ? strerror(-k->ncpus) : "out of memory");
		goto fail;
	}

	old = libbpf_set_print(quiet);
	rc = load(k, max_entries, err, errlen);
	libbpf_set_print(old);
	if (rc == -1)
		goto fail;
	memset(&info, 0, sizeof(info));
	if (bpf_obj_get_info_by_fd(k->prog_fd, &info, &len) != 0) {
		snprintf(err, errlen, "bpf program info: %s", strerror(errno));
		goto fail;
	}
	k->prog_id = info.id;
	k->gen = 1;
	if (set_gen(k->gen_fd, k->gen) != 0) {
		snprintf(err, errlen, "bpf generation: %s", strerror(errno));
		goto fail;
	}

	if (bpffs_at(dirname(dir), err, errlen) == -1)
		goto fail;
	disarm_stale(k->path);
	if (unlink(k->path) == -1 && errno != ENOENT) {
		snprintf(err, errlen, "%s: %s", k->path, strerror(errno));
		goto fail;
	}
	if (bpf_obj_pin(k->prog_fd, k->path) != 0) {
		snprintf(err, errlen, "pin %s: %s", k->path, strerror(errno));
		goto fail;
	}
	return k;
fail:
	bpf_object__close(k->obj);
	free(k->percpu);
	free(k);
	return NULL;
}

const char *
nfq_ksni_path(const struct nfq_ksni *k)
{
	return k->path;
}

int
nfq_ksni_prog_fd(const struct nfq_ksni *k)
{
	return k->prog_fd;
}

static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

int
nfq_ksni_add(struct nfq_ksni *k, uint32_t ifindex, uint32_t daddr,
    uint16_t dport, const char *name, size_t len, uint64_t ttl_ms)
{
	struct ksni_key key;
	struct ksni_val val;
	uint64_t now = now_ns();

	/* a NUL would never match: tls.c refuses such a name */
	if (len == 0 || len > NFQ_KSNI_NAME_MAX ||
	    memchr(name, '\0', len) != NULL) {
		errno = EINVAL;
		return -1;
	}
	memset(&key, 0, sizeof(key));
	key.ifindex = ifindex;
	key.daddr = daddr;
	key.dport = htons(dport);
	key.len = (uint16_t)len;
	memcpy(key.name, name, len);
	memset(&val, 0, sizeof(val));
	/* saturated: a TTL of years is "until cleared" */
	val.expires_ns = ttl_ms > (UINT64_MAX - now) / 1000000 ? UINT64_MAX :
	    now + ttl_ms * 1000000;
	val.gen = k->gen;
	if (bpf_map_update_elem(k->names_fd, &key, &val, BPF_ANY) != 0) {
		k->stats.add_errors++;
		return -1;
	}
	k->stats.adds++;
	return 0;
}

int
nfq_ksni_lease(struct nfq_ksni *k, uint64_t ms)
{
	uint32_t zero = 0;
	uint64_t now = now_ns(), until;

	until = ms == 0 ? 0 : ms > (UINT64_MAX - now) / 1000000 ?
	    UINT64_MAX : now + ms * 1000000;
	return bpf_map_update_elem(k->lease_fd, &zero, &until, BPF_ANY) == 0 ?
	    0 : -1;
}

int
nfq_ksni_clear(struct nfq_ksni *k)
{
	uint32_t gen = k->gen + 1;

	if (gen == 0)
		gen = 1;
	/* on failure the kernel keeps the old generation, and so do the
	 * adds that follow */
	if (set_gen(k->gen_fd, gen) != 0)
		return -1;
	k->gen = gen;
	k->stats.clears++;
	return 0;
}

void
nfq_ksni_stats(const struct nfq_ksni *k, struct nfq_ksni_stats *st)
{
	uint64_t sum[KSNI_NCOUNTERS];
	uint32_t i;
	int c;

	*st = k->stats;
	for (i = 0; i < KSNI_NCOUNTERS; i++) {
		sum[i] = 0;
		if (bpf_map_lookup_elem(k->counters_fd, &i, k->percpu) != 0)
			continue;
		for (c = 0; c < k->ncpus; c++)
			sum[i] += k->percpu[c];
	}
	st->seen = sum[KSNI_SEEN];
	st->approved = sum[KSNI_APPROVED];
	st->unparsed = sum[KSNI_UNPARSED];
	st->unknown = sum[KSNI_UNKNOWN];
	st->lapsed = sum[KSNI_LAPSED];
}

void
nfq_ksni_close(struct nfq_ksni *k)
{
	struct bpf_prog_info info;

	if (k == NULL)
		return;
	/* first, and whatever else fails: a rule may hold the program on */
	(void)set_gen(k->gen_fd, 0);
	(void)nfq_ksni_lease(k, 0);
	/* the pin only if it is still ours, not a newer run's */
	if (pinned_prog_id(k->path, &info) == k->prog_id)
		(void)unlink(k->path);
	bpf_object__close(k->obj);
	free(k->percpu);
	free(k);
}
