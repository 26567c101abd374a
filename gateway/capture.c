/* capture.c: denied packets and DNS messages to one pcap file per sandbox. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <pcap/pcap.h>

#include "gateway/capture.h"
#include "gateway/names.h"
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
 * and no symbolic link is followed.
 */
static pcap_dumper_t *
dumper_open(struct gw_capture *c, const char *path)
{
	pcap_dumper_t *d;
	int fd;

	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0640);
	if (fd == -1)
		return NULL;
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

	if (f->d != NULL) {
		pcap_dump_close(f->d);
		f->d = NULL;
	}
	if (!file_path(c, f->name, false, cur, sizeof(cur)) ||
	    !file_path(c, f->name, true, old, sizeof(old)))
		return -1;
	if (rename(cur, old) == -1 && errno != ENOENT)
		return -1;
	c->st.rotations++;
	if ((f->d = dumper_open(c, cur)) == NULL)
		return -1;
	f->size = PCAP_FILE_HDR;
	return 0;
}

/* The open file for sandbox name, opening it (and closing the least
 * recently used one) if needed; NULL on failure. */
static struct capture_file *
file_get(struct gw_capture *c, const char *name)
{
	struct capture_file *f = NULL, *spare = NULL;
	char path[PATH_MAX];
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
		if ((f->d = dumper_open(c, path)) == NULL) {
			/* not a pcap file we can append to (another
			 * linktype, or damaged): keep it as the old one */
			if (file_rotate(c, f) == -1) {
				file_close(f);
				return NULL;
			}
		}
		pos = pcap_dump_ftell64(f->d);
		f->size = pos < PCAP_FILE_HDR ? PCAP_FILE_HDR : (uint64_t)pos;
	}
	f->last_use = ++c->tick;
	return f;
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
