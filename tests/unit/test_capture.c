/* test_capture.c: denied packets and DNS messages to pcap files, read back with libpcap. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <dirent.h>
#include <fcntl.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <cmocka.h>

#include <pcap/pcap.h>

#include "gateway/capture.h"
#include "nfq/nfq.h"

static char dir[64];

static int
setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/test_capture.XXXXXX");
	if (mkdtemp(dir) == NULL)
		return -1;
	return 0;
}

static int
teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static uint32_t
ip(const char *s)
{
	struct in_addr a;

	assert_int_equal(inet_pton(AF_INET, s, &a), 1);
	return a.s_addr;
}

/* A TCP SYN-like IPv4 packet of len bytes (>= 40) whose payload bytes
 * are derived from tag, so each packet is recognisable. */
static size_t
make_packet(uint8_t *p, size_t len, unsigned tag)
{
	size_t i;

	memset(p, 0, len);
	p[0] = 0x45;
	p[2] = (uint8_t)(len >> 8);
	p[3] = (uint8_t)len;
	p[8] = 64;
	p[9] = IPPROTO_TCP;
	p[12] = 10; p[13] = 213; p[14] = 0; p[15] = 2;
	p[16] = 203; p[17] = 0; p[18] = 113; p[19] = 66;
	p[20] = 0x9c; p[21] = 0x40;		/* 40000 */
	p[22] = 0x01; p[23] = 0xbb;		/* 443 */
	p[32] = 5 << 4;				/* data offset */
	p[33] = 0x02;				/* SYN */
	for (i = 40; i < len; i++)
		p[i] = (uint8_t)(tag * 31 + i);
	return len;
}

struct rec {
	int64_t		ts_us;
	size_t		len;
	uint8_t		data[2048];
};

/* Reads every record of path; returns how many (at most max). */
static size_t
read_pcap(const char *path, struct rec *out, size_t max, int *linktype)
{
	char err[PCAP_ERRBUF_SIZE];
	struct pcap_pkthdr *h;
	const u_char *data;
	pcap_t *p;
	size_t n = 0;
	int rc;

	p = pcap_open_offline(path, err);
	if (p == NULL)
		fail_msg("%s: %s", path, err);
	*linktype = pcap_datalink(p);
	while ((rc = pcap_next_ex(p, &h, &data)) == 1) {
		assert_true(n < max);
		assert_int_equal(h->caplen, h->len);
		assert_true(h->caplen <= sizeof(out[n].data));
		out[n].ts_us = (int64_t)h->ts.tv_sec * 1000000 + h->ts.tv_usec;
		out[n].len = h->caplen;
		memcpy(out[n].data, data, h->caplen);
		n++;
	}
	assert_int_equal(rc, PCAP_ERROR_BREAK);	/* a clean end of file */
	pcap_close(p);
	return n;
}

static void
path_of(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s/%s", dir, name);
}

static bool
exists(const char *name)
{
	char path[256];

	path_of(path, sizeof(path), name);
	return access(path, F_OK) == 0;
}

static struct gw_capture *
open_capture(const char *sub, size_t max)
{
	char path[256], err[256];
	struct gw_capture *c;

	path_of(path, sizeof(path), sub);
	c = gw_capture_open(path, max, err, sizeof(err));
	if (c == NULL)
		fail_msg("%s", err);
	return c;
}

static void
test_packets_and_rotation(void **state)
{
	/* room for exactly three 100-byte packets after the header */
	const size_t max = 24 + 3 * (16 + 100);
	struct gw_capture *c;
	struct gw_capture_stats st;
	static struct rec r[16];
	uint8_t pkt[7][100];
	char path[256];
	struct stat sb;
	int lt;
	size_t n, i;

	(void)state;
	c = open_capture("cap", max);
	path_of(path, sizeof(path), "cap");
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(sb.st_mode & 07777, 0750);
	for (i = 0; i < 7; i++) {
		make_packet(pkt[i], sizeof(pkt[i]), (unsigned)i);
		gw_capture_packet(c, "task-a", pkt[i], sizeof(pkt[i]),
		    1700000000000000 + (int64_t)i * 1500);
	}
	gw_capture_get_stats(c, &st);
	assert_int_equal(st.packets, 7);
	assert_int_equal(st.bytes, 7 * (16 + 100));
	assert_int_equal(st.rotations, 2);	/* after packets 3 and 6 */
	assert_int_equal(st.errors, 0);
	assert_int_equal(st.open_files, 1);
	/* flushed after each packet: readable while still open */
	path_of(path, sizeof(path), "cap/task-a.pcap");
	n = read_pcap(path, r, 16, &lt);
	assert_int_equal(n, 1);
	assert_int_equal(lt, DLT_RAW);
	assert_memory_equal(r[0].data, pkt[6], 100);
	assert_int_equal(r[0].ts_us, 1700000000000000 + 6 * 1500);
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(sb.st_mode & 07777, 0640);
	assert_int_equal(sb.st_size, 24 + 16 + 100);

	/* one old file is kept: packets 3..5 (0..2 were rotated away) */
	path_of(path, sizeof(path), "cap/task-a.pcap.1");
	n = read_pcap(path, r, 16, &lt);
	assert_int_equal(n, 3);
	for (i = 0; i < 3; i++) {
		assert_int_equal(r[i].len, 100);
		assert_memory_equal(r[i].data, pkt[3 + i], 100);
		assert_int_equal(r[i].ts_us,
		    1700000000000000 + (int64_t)(3 + i) * 1500);
	}
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(sb.st_size, max);
	assert_false(exists("cap/task-a.pcap.2"));
	gw_capture_close(c);

	/* a new run appends to the file the last one left */
	c = open_capture("cap", max);
	gw_capture_packet(c, "task-a", pkt[0], sizeof(pkt[0]), 1700000001000000);
	gw_capture_close(c);
	path_of(path, sizeof(path), "cap/task-a.pcap");
	n = read_pcap(path, r, 16, &lt);
	assert_int_equal(n, 2);
	assert_memory_equal(r[0].data, pkt[6], 100);
	assert_memory_equal(r[1].data, pkt[0], 100);
	assert_int_equal(r[1].ts_us, 1700000001000000);
}

static void
test_big_packet_alone(void **state)
{
	/* a packet larger than the bound still gets written, in a file of
	 * its own */
	struct gw_capture *c = open_capture("big", 100);
	static struct rec r[4];
	uint8_t pkt[600];
	char path[256];
	int lt;

	(void)state;
	make_packet(pkt, sizeof(pkt), 9);
	gw_capture_packet(c, "b", pkt, sizeof(pkt), 5);
	gw_capture_packet(c, "b", pkt, sizeof(pkt), 6);
	gw_capture_close(c);
	path_of(path, sizeof(path), "big/b.pcap");
	assert_int_equal(read_pcap(path, r, 4, &lt), 1);
	assert_int_equal(r[0].ts_us, 6);
	assert_memory_equal(r[0].data, pkt, sizeof(pkt));
	path_of(path, sizeof(path), "big/b.pcap.1");
	assert_int_equal(read_pcap(path, r, 4, &lt), 1);
	assert_int_equal(r[0].ts_us, 5);
}

static void
test_bad_names(void **state)
{
	struct gw_capture *c = open_capture("names", 1 << 20);
	struct gw_capture_stats st;
	uint8_t pkt[60];
	static const char *const bad[] = {
		"", "..", ".", "a/b", "../x", "-x", "x y",
		"0123456789012345678901234567890123456789012345678",
	};
	size_t i;

	(void)state;
	make_packet(pkt, sizeof(pkt), 1);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		gw_capture_packet(c, bad[i], pkt, sizeof(pkt), 1);
	gw_capture_packet(c, NULL, pkt, sizeof(pkt), 1);
	gw_capture_get_stats(c, &st);
	assert_int_equal(st.errors, sizeof(bad) / sizeof(bad[0]) + 1);
	assert_int_equal(st.packets, 0);
	assert_int_equal(st.open_files, 0);
	gw_capture_close(c);
	assert_false(exists("a"));
	assert_false(exists("x.pcap"));
	assert_false(exists("names/a"));
	assert_false(exists("names/..pcap"));
	/* NULL-safe */
	gw_capture_packet(NULL, "a", pkt, sizeof(pkt), 1);
	gw_capture_close(NULL);
}

static void
test_lru(void **state)
{
	struct gw_capture *c = open_capture("lru", 1 << 20);
	struct gw_capture_stats st;
	static struct rec r[4];
	uint8_t pkt[60];
	char name[32], path[256];
	int lt;
	unsigned i;

	(void)state;
	for (i = 0; i < GW_CAPTURE_OPEN_MAX + 6; i++) {
		make_packet(pkt, sizeof(pkt), i);
		snprintf(name, sizeof(name), "sb%u", i);
		gw_capture_packet(c, name, pkt, sizeof(pkt), i);
	}
	gw_capture_get_stats(c, &st);
	assert_int_equal(st.open_files, GW_CAPTURE_OPEN_MAX);
	assert_int_equal(st.packets, GW_CAPTURE_OPEN_MAX + 6);
	/* sb0 was closed to make room: it is opened again and appended to */
	make_packet(pkt, sizeof(pkt), 1000);
	gw_capture_packet(c, "sb0", pkt, sizeof(pkt), 1000);
	gw_capture_get_stats(c, &st);
	assert_int_equal(st.open_files, GW_CAPTURE_OPEN_MAX);
	assert_int_equal(st.errors, 0);
	path_of(path, sizeof(path), "lru/sb0.pcap");
	assert_int_equal(read_pcap(path, r, 4, &lt), 2);
	assert_int_equal(r[0].ts_us, 0);
	assert_int_equal(r[1].ts_us, 1000);
	assert_memory_equal(r[1].data, pkt, sizeof(pkt));
	gw_capture_close(c);
	/* every sandbox got its own file */
	for (i = 0; i < GW_CAPTURE_OPEN_MAX + 6; i++) {
		snprintf(name, sizeof(name), "lru/sb%u.pcap", i);
		assert_true(exists(name));
	}
}

static void
test_damaged_file_kept_aside(void **state)
{
	struct gw_capture *c;
	static struct rec r[4];
	uint8_t pkt[60];
	char path[256];
	FILE *f;
	int lt;

	(void)state;
	path_of(path, sizeof(path), "dmg");
	assert_int_equal(mkdir(path, 0750), 0);
	path_of(path, sizeof(path), "dmg/x.pcap");
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("this is no pcap file at all, but it is long enough", f);
	fclose(f);
	c = open_capture("dmg", 1 << 20);
	make_packet(pkt, sizeof(pkt), 3);
	gw_capture_packet(c, "x", pkt, sizeof(pkt), 77);
	gw_capture_close(c);
	assert_int_equal(read_pcap(path, r, 4, &lt), 1);
	assert_memory_equal(r[0].data, pkt, sizeof(pkt));
	assert_true(exists("dmg/x.pcap.1"));
}

/* The Internet checksum over the UDP pseudo-header and segment: 0 when
 * the checksum in it is right. */
static uint16_t
udp_check(const struct nfq_tuple *t, const uint8_t *udp, size_t ulen)
{
	uint32_t sum = 0;
	const uint8_t *a = (const uint8_t *)&t->saddr;
	const uint8_t *b = (const uint8_t *)&t->daddr;
	size_t i;

	sum += (uint32_t)(a[0] << 8 | a[1]) + (uint32_t)(a[2] << 8 | a[3]);
	sum += (uint32_t)(b[0] << 8 | b[1]) + (uint32_t)(b[2] << 8 | b[3]);
	sum += 17 + (uint32_t)ulen;
	for (i = 0; i + 1 < ulen; i += 2)
		sum += (uint32_t)(udp[i] << 8 | udp[i + 1]);
	if (ulen & 1)
		sum += (uint32_t)(udp[ulen - 1] << 8);
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

static uint16_t
ip_check(const uint8_t *p)
{
	uint32_t sum = 0;
	size_t i;

	for (i = 0; i < 20; i += 2)
		sum += (uint32_t)(p[i] << 8 | p[i + 1]);
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

static void
test_dns(void **state)
{
	struct gw_capture *c = open_capture("dns", 1 << 20);
	static struct rec r[8];
	uint8_t query[64], answer[301];
	struct nfq_tuple t;
	struct dns_query q;
	char path[256];
	int len, lt;
	size_t i, n;

	(void)state;
	len = dns_write_query(query, sizeof(query), 0x1234, "a.test", DNS_T_A, 1);
	assert_true(len > 0);
	gw_capture_dns(c, "t", ip("10.213.0.2"), 40001, ip("10.213.0.1"), 53,
	    query, (size_t)len, 100);
	/* odd length, every byte value: the checksum's padding is exercised */
	for (i = 0; i < sizeof(answer); i++)
		answer[i] = (uint8_t)(i * 7 + 1);
	gw_capture_dns(c, "t", ip("10.213.0.1"), 53, ip("10.213.0.2"), 40001,
	    answer, sizeof(answer), 200);
	gw_capture_close(c);

	path_of(path, sizeof(path), "dns/t.pcap");
	n = read_pcap(path, r, 8, &lt);
	assert_int_equal(n, 2);
	assert_int_equal(lt, DLT_RAW);

	assert_int_equal(r[0].len, 20 + 8 + (size_t)len);
	assert_int_equal(nfq_packet_parse(r[0].data, r[0].len, &t), NFQ_PARSE_OK);
	assert_int_equal(t.proto, IPPROTO_UDP);
	assert_int_equal(t.saddr, ip("10.213.0.2"));
	assert_int_equal(t.daddr, ip("10.213.0.1"));
	assert_int_equal(t.sport, 40001);
	assert_int_equal(t.dport, 53);
	assert_int_equal(t.l4_len, (size_t)len);
	assert_memory_equal(t.l4_payload, query, (size_t)len);
	assert_int_equal(ip_check(r[0].data), 0);
	assert_int_equal(udp_check(&t, r[0].data + 20, 8 + (size_t)len), 0);
	assert_int_not_equal(r[0].data[26] | r[0].data[27], 0);
	assert_int_equal(dns_parse_query(t.l4_payload, t.l4_len, &q), DNS_PARSE_OK);
	assert_string_equal(q.qname, "a.test");
	assert_int_equal(r[0].ts_us, 100);

	assert_int_equal(r[1].len, 20 + 8 + sizeof(answer));
	assert_int_equal(nfq_packet_parse(r[1].data, r[1].len, &t), NFQ_PARSE_OK);
	assert_int_equal(t.saddr, ip("10.213.0.1"));
	assert_int_equal(t.sport, 53);
	assert_int_equal(t.dport, 40001);
	assert_memory_equal(t.l4_payload, answer, sizeof(answer));
	assert_int_equal(ip_check(r[1].data), 0);
	assert_int_equal(udp_check(&t, r[1].data + 20, 8 + sizeof(answer)), 0);

	/* tcpdump, where installed, decodes the query as DNS */
	if (access("/usr/bin/tcpdump", X_OK) == 0 ||
	    access("/usr/sbin/tcpdump", X_OK) == 0) {
		char cmd[512], line[512] = "";
		FILE *p;
		int found = 0;

		snprintf(cmd, sizeof(cmd), "tcpdump -nn -r '%s' 2>/dev/null",
		    path);
		p = popen(cmd, "r");
		assert_non_null(p);
		while (fgets(line, sizeof(line), p) != NULL)
			/* "4660+ [1au] A? a.test.": the OPT record shows */
			if (strstr(line, " 4660+ ") != NULL &&
			    strstr(line, " A? a.test. ") != NULL)
				found++;
		pclose(p);
		assert_int_equal(found, 1);
	} else {
		print_message("tcpdump not installed: its part is skipped\n");
	}
}

static void
test_dns_too_long(void **state)
{
	struct gw_capture *c = open_capture("long", 1 << 20);
	struct gw_capture_stats st;
	static uint8_t msg[65535];

	(void)state;
	gw_capture_dns(c, "t", ip("10.213.0.1"), 53, ip("10.213.0.2"), 1, msg,
	    65535 - 28, 1);
	gw_capture_dns(c, "t", ip("10.213.0.1"), 53, ip("10.213.0.2"), 1, msg,
	    65535 - 27, 1);
	gw_capture_get_stats(c, &st);
	assert_int_equal(st.packets, 1);
	assert_int_equal(st.errors, 1);
	gw_capture_close(c);
}

static void
test_open_errors(void **state)
{
	char err[256], path[256];
	FILE *f;

	(void)state;
	path_of(path, sizeof(path), "plainfile");
	f = fopen(path, "w");
	assert_non_null(f);
	fclose(f);
	assert_null(gw_capture_open(path, 1000, err, sizeof(err)));
	assert_non_null(strstr(err, "not a directory"));
	path_of(path, sizeof(path), "no/such/parent");
	assert_null(gw_capture_open(path, 1000, err, sizeof(err)));
	assert_non_null(strstr(err, "mkdir"));
}

/* ---- the bound on all files together ---------------------------------- */

/* The sandboxes that exist, for live_names; what it was asked. */
static const char *live_set[4];
static unsigned live_calls;
static bool live_sorted = true;

static void
live_names(void *arg, const char *const *names, size_t n, bool *live)
{
	size_t i, j;

	(void)arg;
	live_calls++;
	for (i = 0; i < n; i++) {
		if (i > 0 && strcmp(names[i - 1], names[i]) >= 0)
			live_sorted = false;
		for (j = 0; j < sizeof(live_set) / sizeof(live_set[0]); j++)
			if (live_set[j] != NULL &&
			    strcmp(live_set[j], names[i]) == 0)
				live[i] = true;
	}
}

/* Makes dir/sub/name of size bytes, last modified at unix time mtime. */
static void
make_file(const char *sub, const char *name, size_t size, time_t mtime)
{
	struct timespec ts[2] = { { mtime, 0 }, { mtime, 0 } };
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s/%s", dir, sub, name);
	f = fopen(path, "w");
	assert_non_null(f);
	while (size-- > 0)
		fputc('x', f);
	fclose(f);
	assert_int_equal(utimensat(AT_FDCWD, path, ts, 0), 0);
}

/* The bytes of dir/sub's capture files, as the bound counts them. */
static uint64_t
dir_total(const char *sub)
{
	char path[256];
	struct dirent *de;
	struct stat sb;
	uint64_t total = 0;
	DIR *d;

	path_of(path, sizeof(path), sub);
	d = opendir(path);
	assert_non_null(d);
	while ((de = readdir(d)) != NULL) {
		size_t n = strlen(de->d_name);

		if (de->d_name[0] == '-' ||
		    !((n > 5 && strcmp(de->d_name + n - 5, ".pcap") == 0) ||
		    (n > 7 && strcmp(de->d_name + n - 7, ".pcap.1") == 0)))
			continue;
		assert_int_equal(fstatat(dirfd(d), de->d_name, &sb, 0), 0);
		total += (uint64_t)sb.st_size;
	}
	closedir(d);
	return total;
}

/* Writes 100-byte packets (116 bytes a record) for name until the
 * removals reach removed; returns how many it wrote (at most max). */
static unsigned
write_until(struct gw_capture *c, const char *name, uint64_t removed,
    unsigned max)
{
	struct gw_capture_stats st;
	uint8_t pkt[100];
	unsigned i;

	make_packet(pkt, sizeof(pkt), 1);
	for (i = 0; i < max; i++) {
		gw_capture_get_stats(c, &st);
		if (st.removed >= removed)
			break;
		gw_capture_packet(c, name, pkt, sizeof(pkt), 1);
	}
	return i;
}

static void
test_total_bound(void **state)
{
	const uint64_t cap = 10000;
	struct gw_capture *c;
	struct gw_capture_stats st;
	char path[256];
	unsigned n;

	(void)state;
	path_of(path, sizeof(path), "tot");
	assert_int_equal(mkdir(path, 0750), 0);
	/* a sandbox deleted before this run, one that still exists (its
	 * file the oldest), and files that are not the capture's */
	make_file("tot", "gone.pcap.1", 3000, 1000);
	make_file("tot", "gone.pcap", 3000, 2000);
	make_file("tot", "keep.pcap.1", 2000, 500);
	make_file("tot", "notes.txt", 50000, 100);
	make_file("tot", "-x.pcap", 5000, 100);
	live_set[0] = "keep";
	live_set[1] = "w";
	live_set[2] = "d";
	live_calls = 0;

	c = open_capture("tot", 1 << 20);
	assert_int_equal(gw_capture_set_total(c, cap, live_names, NULL), 0);
	gw_capture_get_stats(c, &st);
	/* under the bound: counted, nothing removed */
	assert_int_equal(st.total_bytes, 8000);
	assert_int_equal(st.scans, 1);
	assert_int_equal(st.removed, 0);
	assert_true(exists("tot/gone.pcap.1"));

	/* a sandbox that will be gone while its file is open: 14 records,
	 * enough for one scan's removal */
	write_until(c, "d", 1, 14);
	assert_true(exists("tot/d.pcap"));

	/* past the bound: the gone sandbox's older file goes first, and
	 * that is enough for 7/8 of the bound */
	n = write_until(c, "w", 1, 100);
	assert_true(n > 0 && n < 100);
	gw_capture_get_stats(c, &st);
	assert_int_equal(st.scans, 2);
	assert_int_equal(st.removed, 1);
	assert_int_equal(st.removed_bytes, 3000);
	assert_false(exists("tot/gone.pcap.1"));
	assert_true(exists("tot/gone.pcap"));
	assert_true(exists("tot/keep.pcap.1"));
	assert_int_equal(st.total_bytes, dir_total("tot"));
	assert_true(st.total_bytes <= cap - cap / 8);

	/* d is deleted: its open file goes before anything of a live one */
	live_set[2] = NULL;
	write_until(c, "w", 2, 100);
	assert_false(exists("tot/gone.pcap"));
	write_until(c, "w", 3, 100);
	assert_false(exists("tot/d.pcap"));
	assert_true(exists("tot/keep.pcap.1"));
	/* then a live sandbox's oldest file (not being written) */
	write_until(c, "w", 4, 100);
	assert_false(exists("tot/keep.pcap.1"));
	gw_capture_get_stats(c, &st);
	assert_int_equal(st.removed, 4);
	assert_int_equal(st.remove_errors, 0);
	assert_int_equal(st.total_bytes, dir_total("tot"));

	/* only the file being written is left: it stays past the bound,
	 * and the directory is scanned once an eighth of it, not for each
	 * packet */
	n = write_until(c, "w", 5, 200);
	assert_int_equal(n, 200);
	gw_capture_get_stats(c, &st);
	assert_int_equal(st.removed, 4);
	assert_true(exists("tot/w.pcap"));
	assert_true(st.total_bytes > cap);
	assert_int_equal(st.total_bytes, dir_total("tot"));
	assert_true(st.scans < 2 + 4 + 200 * 116 / (cap / 8) + 2);
	/* other files are never touched */
	assert_true(exists("tot/notes.txt"));
	assert_true(exists("tot/-x.pcap"));
	assert_true(live_sorted);
	assert_true(live_calls >= 2);
	gw_capture_close(c);
}

static void
test_total_rotation_and_restart(void **state)
{
	/* three records a file: the live sandbox's old file goes, never
	 * the one it writes */
	const size_t max = 24 + 3 * (16 + 100);
	struct gw_capture *c;
	struct gw_capture_stats st;
	unsigned i;

	(void)state;
	live_set[0] = "r";
	live_set[1] = live_set[2] = NULL;
	c = open_capture("rot", max);
	assert_int_equal(gw_capture_set_total(c, 600, live_names, NULL), 0);
	write_until(c, "r", 100, 20);
	gw_capture_get_stats(c, &st);
	assert_true(st.rotations >= 5);
	assert_true(st.removed >= 1);
	assert_int_equal(st.total_bytes, dir_total("rot"));
	assert_true(st.total_bytes <= 600);
	assert_true(exists("rot/r.pcap"));
	gw_capture_close(c);

	/* a restart with files of many names left over, far past a new
	 * bound: they go at once, the oldest first */
	for (i = 0; i < 50; i++) {
		char name[32];

		snprintf(name, sizeof(name), "old%02u.pcap", i);
		make_file("rot", name, 1000, 1000 + i);
	}
	c = open_capture("rot", max);
	assert_int_equal(gw_capture_set_total(c, 8000, live_names, NULL), 0);
	gw_capture_get_stats(c, &st);
	assert_true(st.total_bytes <= 7000);
	assert_int_equal(st.total_bytes, dir_total("rot"));
	assert_false(exists("rot/old00.pcap"));
	assert_true(exists("rot/old49.pcap"));
	assert_true(exists("rot/r.pcap"));	/* live, newer */
	gw_capture_close(c);
}

static void
test_total_scan_error(void **state)
{
	struct gw_capture *c;
	struct gw_capture_stats st;
	char path[256];
	uint8_t pkt[100];

	(void)state;
	c = open_capture("vanish", 1 << 20);
	path_of(path, sizeof(path), "vanish");
	assert_int_equal(rmdir(path), 0);
	/* the directory is gone: the scan fails, says so, and nothing
	 * else happens */
	assert_int_equal(gw_capture_set_total(c, 1000, NULL, NULL), -1);
	assert_non_null(strstr(gw_capture_last_error(c), "vanish"));
	make_packet(pkt, sizeof(pkt), 1);
	gw_capture_packet(c, "a", pkt, sizeof(pkt), 1);
	gw_capture_get_stats(c, &st);
	assert_int_equal(st.remove_errors, 1);
	assert_int_equal(st.errors, 1);
	assert_string_equal(gw_capture_last_error(NULL), "");
	gw_capture_close(c);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_packets_and_rotation),
		cmocka_unit_test(test_big_packet_alone),
		cmocka_unit_test(test_bad_names),
		cmocka_unit_test(test_lru),
		cmocka_unit_test(test_damaged_file_kept_aside),
		cmocka_unit_test(test_dns),
		cmocka_unit_test(test_dns_too_long),
		cmocka_unit_test(test_open_errors),
		cmocka_unit_test(test_total_bound),
		cmocka_unit_test(test_total_rotation_and_restart),
		cmocka_unit_test(test_total_scan_error),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
