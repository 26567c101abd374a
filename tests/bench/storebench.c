/* storebench.c: rows through store.h as sluiced queues them; the writer thread's CPU per row. */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "store/store.h"

/*
 * Usage: storebench DB KINDS ROWS [RATE [SANDBOXES]]
 *   KINDS      one letter a phase, in order: d DNS queries, f flows,
 *              e the ends of the flows of the last f phase
 *   RATE       rows per second, 0 (default) as fast as the queue takes them
 *   SANDBOXES  how many the rows are spread over (default 1); each has
 *              one address, and its own place in the indexes by sandbox
 * Environment: STOREBENCH_RANDOM=1 spreads flows over random destinations
 * and source ports (inserts land all over flows_dst and flows_tuple);
 * STOREBENCH_BATCH, STOREBENCH_QUEUE set store_opts.
 * DB should not exist (a fresh file each run). One line a phase:
 *   dns rows=N writer_us_per_row=X rows_per_s=Y batches=B full_waits=W
 * writer_us_per_row is the writer thread's on-CPU time (schedstat), all
 * of it: statements, commits, checkpoints, fsyncs.
 */

#define SHA256_HEX	"3f2a9c0e5b7d41f6a8e2c9b0d7f1e3a5" \
			"c6b8d0f2e4a6c8b0d2f4e6a8c0b2d4f6"
#define FULL_WAIT_US	200	/* the queue is full: let the writer drain */
#define FLUSH_MS	60000

static uint32_t rng = 12345;
static uint32_t flow_seed;	/* rng at the start of the last f phase */
static int next_port[256];	/* per source: ephemeral ports, in steps of 2 */
static int flow_random;

static uint32_t
rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 17;
	rng ^= rng << 5;
	return rng;
}

/* The writer's on-CPU ns: the thread named sluice-store. 0 if none. */
static uint64_t
writer_cpu_ns(void)
{
	char path[300], comm[64], line[128];
	struct dirent *de;
	uint64_t ns = 0;
	DIR *dir;
	FILE *f;

	if ((dir = opendir("/proc/self/task")) == NULL)
		return 0;
	while ((de = readdir(dir)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm",
		    de->d_name);
		if ((f = fopen(path, "r")) == NULL)
			continue;
		if (fgets(comm, sizeof(comm), f) == NULL)
			comm[0] = '\0';
		fclose(f);
		if (strncmp(comm, "sluice-store", 12) != 0)
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/schedstat",
		    de->d_name);
		if ((f = fopen(path, "r")) == NULL)
			continue;
		if (fgets(line, sizeof(line), f) != NULL)
			ns = strtoull(line, NULL, 10);
		fclose(f);
	}
	closedir(dir);
	return ns;
}

static double
mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A query as the bench's dnsperf sends them: 100 names, one answer. */
static void
make_dns(struct store_dns *d, int sandboxes)
{
	int sb = (int)(rnd() % (uint32_t)sandboxes);

	memset(d, 0, sizeof(*d));
	d->ts_us = store_now_us();
	snprintf(d->sandbox, sizeof(d->sandbox), "bench-s%d", sb);
	d->proto = "udp";
	snprintf(d->src_ip, sizeof(d->src_ip), "10.77.%d.%d", sb / 200,
	    2 + sb % 200);
	d->src_port = 1024 + (int)(rnd() % 60000);
	snprintf(d->qname, sizeof(d->qname), "n%u.fill.test", rnd() % 100);
	strcpy(d->qtype, "A");
	d->rcode = "NOERROR";
	d->verdict = "allow";
	d->reason = "allowed_domain";
	strcpy(d->rule, "*.fill.test");
	snprintf(d->answers, sizeof(d->answers), "198.18.%u.%u", rnd() % 256,
	    rnd() % 256);
	strcpy(d->policy_sha256, SHA256_HEX);
}

/* A connection: 20 servers, ports 443 and 80, half of them TLS. */
static void
make_flow(struct store_flow *f, long i, int sandboxes)
{
	int sb = (int)(rnd() % (uint32_t)sandboxes), k = sb % 256;

	memset(f, 0, sizeof(*f));
	f->ts_us = store_now_us();
	snprintf(f->sandbox, sizeof(f->sandbox), "bench-s%d", sb);
	f->proto = "tcp";
	snprintf(f->src_ip, sizeof(f->src_ip), "10.77.%d.%d", sb / 200,
	    2 + sb % 200);
	if (flow_random) {
		f->src_port = 1024 + (int)(rnd() % 60000);
		snprintf(f->dst_ip, sizeof(f->dst_ip), "198.18.%u.%u",
		    rnd() % 256, rnd() % 256);
		f->dst_port = 443;
	} else {
		if (next_port[k] == 0 || next_port[k] > 60000)
			next_port[k] = 32768 + (int)(rnd() % 1000);
		next_port[k] += 2;
		f->src_port = next_port[k];
		snprintf(f->dst_ip, sizeof(f->dst_ip), "198.18.0.%u",
		    rnd() % 20);
		f->dst_port = rnd() % 3 ? 443 : 80;
	}
	f->verdict = i % 4 ? "allow" : "deny";
	f->reason = i % 4 ? "allowed_domain" : "not_allowlisted";
	if (i % 4)
		strcpy(f->rule, "*.fill.test");
	strcpy(f->policy_sha256, SHA256_HEX);
	snprintf(f->name, sizeof(f->name), "n%u.fill.test", rnd() % 100);
	if (i % 2) {
		snprintf(f->sni, sizeof(f->sni), "%s", f->name);
		strcpy(f->tls_version, "TLS1.3");
		strcpy(f->alpn, "h2,http/1.1");
		strcpy(f->app, "TLS");
	}
}

/* The end of the flow make_flow made with the same rng state. */
static void
make_end(struct store_flow_end *e, long i, int sandboxes)
{
	struct store_flow f;

	make_flow(&f, i, sandboxes);
	memset(e, 0, sizeof(*e));
	e->ts_us = store_now_us();
	e->proto = f.proto;
	strcpy(e->src_ip, f.src_ip);
	e->src_port = f.src_port;
	strcpy(e->dst_ip, f.dst_ip);
	e->dst_port = f.dst_port;
	e->bytes_out = 1000 + (uint64_t)i;
	e->packets_out = 10;
	e->bytes_in = 20000;
	e->packets_in = 20;
	e->end_state = "closed";
}

/* Record i of a phase, made once and queued until the queue takes it. */
union rec {
	struct store_dns	d;
	struct store_flow	f;
	struct store_flow_end	e;
};

static void
make_rec(union rec *r, char kind, long i, int sandboxes)
{
	if (kind == 'd')
		make_dns(&r->d, sandboxes);
	else if (kind == 'f')
		make_flow(&r->f, i, sandboxes);
	else
		make_end(&r->e, i, sandboxes);
}

static int
put_rec(struct store *s, char kind, const union rec *r)
{
	if (kind == 'd')
		return store_put_dns(s, &r->d);
	if (kind == 'f')
		return store_put_flow(s, &r->f);
	return store_put_flow_end(s, &r->e);
}

static int
run(struct store *s, char kind, long rows, long rate, int sandboxes)
{
	static const char *const names[] = { "dns", "flow", "end" };
	const char *name = names[kind == 'd' ? 0 : kind == 'f' ? 1 : 2];
	long i, waits = 0, slice = rate / 1000 > 0 ? rate / 1000 : 1;
	struct store_stats st;
	uint64_t c0, c1;
	double t0, t1, next;
	union rec r;

	if (kind == 'f')
		flow_seed = rng;
	if (kind == 'e') {
		rng = flow_seed;
		memset(next_port, 0, sizeof(next_port));
	}
	c0 = writer_cpu_ns();
	t0 = next = mono_s();
	for (i = 0; i < rows; i++) {
		if (rate > 0 && i % slice == 0) {
			next += (double)slice / (double)rate;
			while (mono_s() < next)
				usleep(100);
		}
		make_rec(&r, kind, i, sandboxes);
		/* waits for room rather than be refused: a refusal is a
		 * lost_records row, which sluiced would not write here */
		while (!store_has_room(s, 1)) {
			waits++;
			usleep(FULL_WAIT_US);
		}
		while (put_rec(s, kind, &r) == -1) {
			if (errno != ENOBUFS) {
				perror("store_put");
				return -1;
			}
			waits++;
			usleep(FULL_WAIT_US);
		}
	}
	if (store_flush(s, FLUSH_MS) == -1) {
		perror("store_flush");
		return -1;
	}
	t1 = mono_s();
	c1 = writer_cpu_ns();
	store_stats(s, &st);
	printf("%s rows=%ld writer_us_per_row=%.3f rows_per_s=%.0f"
	    " batches=%" PRIu64 " full_waits=%ld\n", name, rows,
	    (double)(c1 - c0) / 1e3 / (double)rows,
	    (double)rows / (t1 - t0), st.batches, waits);
	fflush(stdout);
	return 0;
}

/* A number in [min, max] from s; -1 (with a message) if it is not one. */
static long
number(const char *what, const char *s, long min, long max)
{
	unsigned long v;
	char *end;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (*s == '\0' || *end != '\0' || errno != 0 || *s == '-' ||
	    v < (unsigned long)min || v > (unsigned long)max) {
		fprintf(stderr, "storebench: %s: '%s' is not a number in"
		    " %ld..%ld\n", what, s, min, max);
		return -1;
	}
	return (long)v;
}

static long
env_number(const char *name, long min, long max)
{
	const char *v = getenv(name);

	return v == NULL || *v == '\0' ? 0 : number(name, v, min, max);
}

int
main(int argc, char **argv)
{
	struct store_opts o = { 0 };
	struct store *s;
	const char *k;
	char err[512];
	long rows, rate = 0, sandboxes = 1, batch, queue;

	if (argc < 4 || argc > 6 || argv[2][strspn(argv[2], "dfe")] != '\0') {
		fprintf(stderr, "usage: storebench DB KINDS(d f e) ROWS"
		    " [RATE [SANDBOXES]]\n");
		return 2;
	}
	if ((rows = number("ROWS", argv[3], 1, 100000000)) == -1 ||
	    (argc > 4 && (rate = number("RATE", argv[4], 0, 10000000)) ==
	    -1) ||
	    (argc > 5 && (sandboxes = number("SANDBOXES", argv[5], 1,
	    50000)) == -1) ||
	    (batch = env_number("STOREBENCH_BATCH", 1, 1000000)) == -1 ||
	    (queue = env_number("STOREBENCH_QUEUE", 1, 10000000)) == -1)
		return 2;
	flow_random = getenv("STOREBENCH_RANDOM") != NULL &&
	    strcmp(getenv("STOREBENCH_RANDOM"), "1") == 0;
	o.batch_max = (size_t)batch;
	o.queue_cap = (size_t)queue;
	if ((s = store_open(argv[1], &o, err, sizeof(err))) == NULL) {
		fprintf(stderr, "storebench: %s\n", err);
		return 1;
	}
	for (k = argv[2]; *k != '\0'; k++)
		if (run(s, *k, rows, rate, (int)sandboxes) == -1) {
			store_close(s);
			return 1;
		}
	store_close(s);
	return 0;
}
