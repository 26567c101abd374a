/* capture.c: denied packets and DNS messages to one pcap file per sandbox. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <pcap/pcap.h>

#include "gateway/capture.h"
#include "gateway/names.h"
#include "gateway/trustdir.h"
#include "nfq/nfq.h"

#define PCAP_FILE_HDR	24	/* the file header pcap writes */
#define PCAP_REC_HDR	16	/* before each packet, in the file */
#define IP_HLEN		20
#define UDP_HLEN	8

struct capture_file {
	char		 name[GW_SANDBOX_NAME_MAX + 1];	/* "" when unused */
	pcap_dumper_t	*d;
	uint64_t	 size;		/* bytes in the file */
	uint64_t	 last_use;	/* for closing the least recently used */
};

struct gw_capture {
	char			 dir[PATH_MAX];
	size_t			 max_bytes;
	pcap_t			*dead;		/* DLT_RAW, for the dumpers */
	struct capture_file	 f[GW_CAPTURE_OPEN_MAX];
	uint64_t		 tick;
	uint64_t		 total_max;	/* all files; 0: no bound */
	uint64_t		 scan_at;	/* st.total_bytes past which the
						 * directory is scanned again */
	gw_capture_live_fn	 live;
	void			*live_arg;
	char			 error[PATH_MAX + 128];	/* the last failure */
	struct gw_capture_stats	 st;
	uint8_t			 buf[GW_CAPTURE_SNAPLEN];	/* a DNS datagram */
};

struct gw_capture *
gw_capture_open(const char *dir, size_t max_bytes, char *err, size_t errlen)
{
	struct gw_capture *c;
	struct stat sb;
	char real[PATH_MAX];

	if (mkdir(dir, 0750) == 0) {
		/* whatever the umask: denied packets are not for everyone */
		(void)chmod(dir, 0750);
	} else if (errno != EEXIST) {
		snprintf(err, errlen, "mkdir %s: %s", dir, strerror(errno));
		return NULL;
	}
	if (stat(dir, &sb) == -1 || !S_ISDIR(sb.st_mode)) {
		snprintf(err, errlen, "%s: not a directory", dir);
		return NULL;
	}
	/* files are made, renamed and removed there by name */
	if (gw_dir_trusted("--capture-denied", dir, 0750, err, errlen) == -1)
		return NULL;
	/* files are opened later, possibly after the daemon changed its
	 * working directory */
	if (realpath(dir, real) == NULL) {
		snprintf(err, errlen, "%s: %s", dir, strerror(errno));
		return NULL;
	}
	if (strlen(real) + 1 + GW_SANDBOX_NAME_MAX + sizeof(".pcap.1") >
	    sizeof(c->dir)) {
		snprintf(err, errlen, "%s: path too long", dir);
		return NULL;
	}
	if ((c = calloc(1, sizeof(*c))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	snprintf(c->dir, sizeof(c->dir), "%s", real);
	c->max_bytes = max_bytes;
	c->dead = pcap_open_dead(DLT_RAW, GW_CAPTURE_SNAPLEN);
	if (c->dead == NULL) {
		snprintf(err, errlen, "pcap_open_dead failed");
		free(c);
		return NULL;
	}
	return c;
}

/* The file of sandbox name; false if it does not fit (open checked that
 * it does). */
static bool
file_path(const struct gw_capture *c, const char *name, bool old, char *buf,
    size_t len)
{
	int n = snprintf(buf, len, "%s/%s.pcap%s", c->dir, name,
	    old ? ".1" : "");

	return n >= 0 && (size_t)n < len;
}

static void __attribute__((format(printf, 2, 3)))
set_error(struct gw_capture *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->error, sizeof(c->error), fmt, ap);
	va_end(ap);
}

/* The running total of the bound: a file's bytes from was to now. */
static void
account(struct gw_capture *c, uint64_t was, uint64_t now)
{
	if (now >= was)
		c->st.total_bytes += now - was;
	else
		c->st.total_bytes -= was - now > c->st.total_bytes ?
		    c->st.total_bytes : was - now;
}

static void
file_close(struct capture_file *f)
{
	if (f->d != NULL)
		pcap_dump_close(f->d);
	memset(f, 0, sizeof(*f));
}

/*
 * Opens dir/NAME.pcap for appending (a new file gets its header). The file
 * is made first with open(2) so that its mode is 0640 whatever the umask,
 * and no symbolic link is followed. *was is its size before: the running
 * total already has those bytes (a scan counted them), not the header.
 */
static pcap_dumper_t *
dumper_open(struct gw_capture *c, const char *path, uint64_t *was)
{
	pcap_dumper_t *d;
	struct stat sb;
	int fd;

	*was = 0;
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0640);
	if (fd == -1)
		return NULL;
	if (fstat(fd, &sb) == 0 && sb.st_size > 0)
		*was = (uint64_t)sb.st_size;
	close(fd);
	if ((d = pcap_dump_open_append(c->dead, path)) == NULL)
		return NULL;
	/* sluiced runs ip(8) and friends: they get none of these */
	fd = fileno(pcap_dump_file(d));
	if (fd != -1)
		(void)fcntl(fd, F_SETFD, FD_CLOEXEC);
	return d;
}

/* Moves NAME.pcap to NAME.pcap.1 (replacing it) and starts a new file. */
static int
file_rotate(struct gw_capture *c, struct capture_file *f)
{
	char cur[PATH_MAX], old[PATH_MAX];
	struct stat sb;
	uint64_t gone = 0, was;

	if (f->d != NULL) {
		pcap_dump_close(f->d);
		f->d = NULL;
	}
	if (!file_path(c, f->name, false, cur, sizeof(cur)) ||
	    !file_path(c, f->name, true, old, sizeof(old)))
		return -1;
	/* the old file the rename replaces leaves the total */
	if (lstat(old, &sb) == 0 && S_ISREG(sb.st_mode))
		gone = (uint64_t)sb.st_size;
	if (rename(cur, old) == -1) {
		if (errno != ENOENT)
			return -1;
	} else {
		account(c, gone, 0);
	}
	c->st.rotations++;
	if ((f->d = dumper_open(c, cur, &was)) == NULL)
		return -1;
	f->size = PCAP_FILE_HDR;
	account(c, was, f->size);
	return 0;
}

/* The open file for sandbox name, opening it (and closing the least
 * recently used one) if needed; NULL on failure. */
static struct capture_file *
file_get(struct gw_capture *c, const char *name)
{
	struct capture_file *f = NULL, *spare = NULL;
	char path[PATH_MAX];
	uint64_t was;
	int64_t pos;
	size_t i;

	for (i = 0; i < GW_CAPTURE_OPEN_MAX && f == NULL; i++) {
		struct capture_file *e = &c->f[i];

		if (e->name[0] != '\0' && strcmp(e->name, name) == 0)
			f = e;
		else if (spare == NULL || (spare->name[0] != '\0' &&
		    (e->name[0] == '\0' || e->last_use < spare->last_use)))
			spare = e;	/* unused first, else the oldest */
	}
	if (f == NULL) {
		f = spare;
		file_close(f);
		snprintf(f->name, sizeof(f->name), "%s", name);
		if (!file_path(c, name, false, path, sizeof(path))) {
			file_close(f);
			return NULL;
		}
		if ((f->d = dumper_open(c, path, &was)) == NULL) {
			/* not a pcap file we can append to (another
			 * linktype, or damaged): keep it as the old one */
			if (file_rotate(c, f) == -1) {
				file_close(f);
				return NULL;
			}
			was = f->size;
		}
		pos = pcap_dump_ftell64(f->d);
		f->size = pos < PCAP_FILE_HDR ? PCAP_FILE_HDR : (uint64_t)pos;
		account(c, was, f->size);
	}
	f->last_use = ++c->tick;
	return f;
}

/* ---- the bound on all files together ---------------------------------- */

/* A capture file a scan weighs. */
struct capture_victim {
	char		name[GW_SANDBOX_NAME_MAX + 1];	/* its sandbox's */
	bool		old;		/* NAME.pcap.1, never open */
	bool		live;		/* a sandbox of that name exists */
	uint64_t	size;
	struct timespec	mtime;
};

/* The sandbox name of capture file fname, and whether it is the old one;
 * false for any other file, which the bound leaves alone. */
static bool
parse_fname(const char *fname, char *name, bool *old)
{
	size_t n = strlen(fname);

	if (n > 7 && strcmp(fname + n - 7, ".pcap.1") == 0) {
		*old = true;
		n -= 7;
	} else if (n > 5 && strcmp(fname + n - 5, ".pcap") == 0) {
		*old = false;
		n -= 5;
	} else
		return false;
	if (n > GW_SANDBOX_NAME_MAX)
		return false;
	memcpy(name, fname, n);
	name[n] = '\0';
	return gw_sandbox_name_valid(name);
}

static int
by_name(const void *a, const void *b)
{
	const struct capture_victim *x = a, *y = b;

	return strcmp(x->name, y->name);
}

/* The order of removal: files of sandboxes that are gone, then the rest;
 * the oldest first; of one name's two with one mtime, the old one. */
static int
by_age(const void *a, const void *b)
{
	const struct capture_victim *x = a, *y = b;

	if (x->live != y->live)
		return x->live ? 1 : -1;
	if (x->mtime.tv_sec != y->mtime.tv_sec)
		return x->mtime.tv_sec < y->mtime.tv_sec ? -1 : 1;
	if (x->mtime.tv_nsec != y->mtime.tv_nsec)
		return x->mtime.tv_nsec < y->mtime.tv_nsec ? -1 : 1;
	if (x->old != y->old)
		return x->old ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* Asks c->live about v[0..n) in one call: its cost is per sandbox, not per
 * file (names and live have room for n). */
static void
resolve_live(struct gw_capture *c, struct capture_victim *v, size_t n,
    const char **names, bool *live)
{
	size_t i, j, k = 0;

	if (n == 0)
		return;
	qsort(v, n, sizeof(*v), by_name);
	for (i = 0; i < n; i++)
		if (k == 0 || strcmp(names[k - 1], v[i].name) != 0)
			names[k++] = v[i].name;
	for (i = 0; i < k; i++)
		live[i] = c->live == NULL;
	if (c->live != NULL)
		c->live(c->live_arg, names, k, live);
	for (i = 0, j = 0; i < n; i++) {
		if (strcmp(names[j], v[i].name) != 0)
			j++;
		v[i].live = live[j];
	}
}

/* The slot whose open file is NAME.pcap, or NULL. */
static struct capture_file *
file_open_for(struct gw_capture *c, const char *name)
{
	size_t i;

	for (i = 0; i < GW_CAPTURE_OPEN_MAX; i++)
		if (c->f[i].d != NULL && strcmp(c->f[i].name, name) == 0)
			return &c->f[i];
	return NULL;
}

/*
 * Scans the directory: the running total becomes what is there, and if it
 * is past the bound, files go (gw_capture_set_total says which) until it
 * is 7/8 of it. At most 2 * GW_CAPTURE_SCAN_MAX files are weighed at once:
 * when the array fills, the half that goes first is kept. Returns 0, or -1
 * with c->error set when the directory could not be read.
 */
static int
trim(struct gw_capture *c)
{
	const size_t max = GW_CAPTURE_SCAN_MAX;
	struct capture_victim *v = NULL;
	struct capture_file *f;
	const char **names = NULL;
	bool *live = NULL, more = false, progress = false;
	struct dirent *de;
	struct stat sb;
	DIR *d = NULL;
	uint64_t total = 0, slack, low;
	size_t n = 0, done = 0, i;
	int rc = -1;

	c->st.scans++;
	slack = c->total_max / 8 > 0 ? c->total_max / 8 : 1;
	low = c->total_max - slack;
	if ((v = calloc(2 * max, sizeof(*v))) == NULL ||
	    (names = calloc(2 * max, sizeof(*names))) == NULL ||
	    (live = calloc(2 * max, sizeof(*live))) == NULL) {
		set_error(c, "scan of %s: out of memory", c->dir);
		goto done;
	}
	if ((d = opendir(c->dir)) == NULL) {
		set_error(c, "scan of %s: %s", c->dir, strerror(errno));
		goto done;
	}
	for (errno = 0; (de = readdir(d)) != NULL; errno = 0) {
		struct capture_victim *e = &v[n];

		if (!parse_fname(de->d_name, e->name, &e->old))
			continue;
		/* gone since readdir, or not a file sluiced makes */
		if (fstatat(dirfd(d), de->d_name, &sb, AT_SYMLINK_NOFOLLOW) ==
		    -1 || !S_ISREG(sb.st_mode))
			continue;
		e->size = (uint64_t)sb.st_size;
		e->mtime = sb.st_mtim;
		total += e->size;
		if (++n == 2 * max) {
			resolve_live(c, v + done, n - done, names, live);
			qsort(v, n, sizeof(*v), by_age);
			n = done = max;
			more = true;
		}
	}
	if (errno != 0) {
		/* a partial count: the running total stays as it was */
		set_error(c, "scan of %s: %s", c->dir, strerror(errno));
		goto done;
	}
	resolve_live(c, v + done, n - done, names, live);
	qsort(v, n, sizeof(*v), by_age);
	c->st.total_bytes = total;
	rc = 0;
	if (total <= c->total_max)
		goto done;
	for (i = 0; i < n && c->st.total_bytes > low; i++) {
		char fname[GW_SANDBOX_NAME_MAX + sizeof(".pcap.1")];

		if (!v[i].old && (f = file_open_for(c, v[i].name)) != NULL) {
			if (v[i].live)
				continue;	/* being written */
			file_close(f);		/* its sandbox is gone */
		}
		snprintf(fname, sizeof(fname), "%s.pcap%s", v[i].name,
		    v[i].old ? ".1" : "");
		if (unlinkat(dirfd(d), fname, 0) == -1 && errno != ENOENT) {
			c->st.remove_errors++;
			set_error(c, "unlink %s/%s: %s", c->dir, fname,
			    strerror(errno));
			continue;
		}
		account(c, v[i].size, 0);
		c->st.removed++;
		c->st.removed_bytes += v[i].size;
		progress = true;
	}
done:
	if (rc == -1)
		c->st.remove_errors++;
	/*
	 * The next scan: when the total passes the bound again; at once if
	 * this one left files unweighed and got somewhere; otherwise (what
	 * is left is being written, or cannot be removed) an eighth of the
	 * bound later, so that a stuck directory costs a scan per eighth,
	 * not one per packet.
	 */
	if (c->st.total_bytes <= c->total_max)
		c->scan_at = c->total_max;
	else if (more && progress)
		c->scan_at = c->st.total_bytes;
	else
		c->scan_at = c->st.total_bytes + slack;
	if (d != NULL)
		closedir(d);
	free(live);
	free(names);
	free(v);
	return rc;
}

int
gw_capture_set_total(struct gw_capture *c, uint64_t total,
    gw_capture_live_fn live, void *arg)
{
	c->total_max = total;
	c->live = live;
	c->live_arg = arg;
	if (total == 0)
		return 0;
	return trim(c);
}

const char *
gw_capture_last_error(const struct gw_capture *c)
{
	return c == NULL ? "" : c->error;
}

static void
write_record(struct gw_capture *c, const char *sandbox, const uint8_t *pkt,
    size_t len, int64_t ts_us)
{
	struct capture_file *f;
	struct pcap_pkthdr h;
	size_t caplen = len > GW_CAPTURE_SNAPLEN ? GW_CAPTURE_SNAPLEN : len;

	if (c == NULL)
		return;
	/* the name becomes a file name: the sandbox name rule keeps out
	 * '/', "." and ".."; '/' is checked again in case it ever changes */
	if (!gw_sandbox_name_valid(sandbox) || strchr(sandbox, '/') != NULL ||
	    (f = file_get(c, sandbox)) == NULL) {
		c->st.errors++;
		return;
	}
	if (f->size > PCAP_FILE_HDR &&
	    f->size + PCAP_REC_HDR + caplen > c->max_bytes &&
	    file_rotate(c, f) == -1) {
		file_close(f);
		c->st.errors++;
		return;
	}
	memset(&h, 0, sizeof(h));
	if (ts_us < 0)
		ts_us = 0;
	h.ts.tv_sec = (time_t)(ts_us / 1000000);
	h.ts.tv_usec = (suseconds_t)(ts_us % 1000000);
	h.caplen = (bpf_u_int32)caplen;
	h.len = (bpf_u_int32)(len > UINT32_MAX ? UINT32_MAX : len);
	pcap_dump((u_char *)f->d, &h, pkt);
	/* denied packets are few: each is on disk before the next */
	if (pcap_dump_flush(f->d) == -1) {
		file_close(f);
		c->st.errors++;
		return;
	}
	f->size += PCAP_REC_HDR + caplen;
	c->st.packets++;
	c->st.bytes += PCAP_REC_HDR + caplen;
	account(c, 0, PCAP_REC_HDR + caplen);
	/* f is not used past this point: the scan may close it */
	if (c->total_max > 0 && c->st.total_bytes > c->scan_at)
		(void)trim(c);
}

void
gw_capture_packet(struct gw_capture *c, const char *sandbox,
    const uint8_t *pkt, size_t len, int64_t ts_us)
{
	write_record(c, sandbox, pkt, len, ts_us);
}

static void
put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

void
gw_capture_dns(struct gw_capture *c, const char *sandbox, uint32_t src,
    uint16_t sport, uint32_t dst, uint16_t dport, const uint8_t *msg,
    size_t len, int64_t ts_us)
{
	uint8_t *ip, *udp, pseudo[12];
	uint16_t ulen, csum;

	if (c == NULL)
		return;
	if (len > sizeof(c->buf) - IP_HLEN - UDP_HLEN) {
		c->st.errors++;
		return;
	}
	ip = c->buf;
	udp = ip + IP_HLEN;
	ulen = (uint16_t)(UDP_HLEN + len);
	memset(ip, 0, IP_HLEN + UDP_HLEN);
	ip[0] = 0x45;				/* IPv4, 20-byte header */
	put16(ip + 2, (uint16_t)(IP_HLEN + ulen));
	ip[8] = 64;				/* TTL */
	ip[9] = 17;				/* UDP */
	memcpy(ip + 12, &src, 4);
	memcpy(ip + 16, &dst, 4);
	put16(ip + 10, nfq_csum_fold(nfq_csum_add(0, ip, IP_HLEN)));
	put16(udp, sport);
	put16(udp + 2, dport);
	put16(udp + 4, ulen);
	memcpy(udp + UDP_HLEN, msg, len);
	memcpy(pseudo, &src, 4);
	memcpy(pseudo + 4, &dst, 4);
	pseudo[8] = 0;
	pseudo[9] = 17;
	put16(pseudo + 10, ulen);
	csum = nfq_csum_fold(nfq_csum_add(nfq_csum_add(0, pseudo,
	    sizeof(pseudo)), udp, ulen));
	/* 0 means "no checksum" in UDP: a computed 0 is sent as all ones */
	put16(udp + 6, csum == 0 ? 0xffff : csum);
	write_record(c, sandbox, c->buf, IP_HLEN + (size_t)ulen, ts_us);
}

void
gw_capture_get_stats(const struct gw_capture *c, struct gw_capture_stats *st)
{
	size_t i;

	memset(st, 0, sizeof(*st));
	if (c == NULL)
		return;
	*st = c->st;
	st->open_files = 0;
	for (i = 0; i < GW_CAPTURE_OPEN_MAX; i++)
		if (c->f[i].d != NULL)
			st->open_files++;
}

void
gw_capture_close(struct gw_capture *c)
{
	size_t i;

	if (c == NULL)
		return;
	for (i = 0; i < GW_CAPTURE_OPEN_MAX; i++)
		file_close(&c->f[i]);
	pcap_close(c->dead);
	free(c);
}
