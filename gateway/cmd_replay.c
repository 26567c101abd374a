/* cmd_replay.c: `sluice replay`: a sandbox's trace decided offline under a policy (or two). */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "gateway/addr.h"
#include "gateway/capture.h"
#include "gateway/cli.h"
#include "gateway/ctl.h"
#include "gateway/log.h"
#include "gateway/policy.h"

/* sluiced's defaults for --dns-ttl-min, --dns-ttl-max, --dns-grace */
#define TTL_MIN_DEFAULT	30
#define TTL_MAX_DEFAULT	600
#define GRACE_DEFAULT	10
#define DEST_WIDTH	34	/* the DESTINATION column */

static int replay_run(int, char **, const struct cli *);

static const struct cli_action replay_actions[] = {
	{ NULL, replay_run, "--policy FILE [--against OTHER] [-j] TRACE.pcap",
	    "decide a sandbox's captured traffic offline under a policy",
	    "  --policy FILE       the policy to replay the trace under\n"
	    "  --against OTHER     replay under OTHER too; print only what "
	    "differs\n"
	    "  -j, --json          one JSON object a line (NDJSON)\n"
	    "  --sandbox-addr A    the sandbox's address (default: the source "
	    "of the\n"
	    "                      first SYN, DNS query or ping in the trace)\n"
	    "  --pool CIDR         sluiced's --pool (default "
	    GW_REPLAY_POOL_DEFAULT ")\n"
	    "  --uplink-addr A, --uplink-peer-addr A\n"
	    "                      sluiced's (default " GW_REPLAY_UPLINK_DEFAULT
	    " and\n"
	    "                      " GW_REPLAY_UPLINK_PEER_DEFAULT "): never a "
	    "destination\n"
	    "  --dns-ttl-min S, --dns-ttl-max S, --dns-grace S\n"
	    "                      sluiced's binding limits (default 30, 600, "
	    "10)\n",
	    true },
};

const struct cli_command cmd_replay = {
	"replay", replay_actions, 1,
};

/* ---- arguments ---------------------------------------------------------- */

struct args {
	const char	*policy, *against, *trace;
	bool		 json;
	struct gw_replay_opts o;
};

static bool
parse_seconds(const char *s, unsigned *out)
{
	unsigned long v;
	char *end;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (s[0] < '0' || s[0] > '9' || *end != '\0' || errno != 0 ||
	    v > 86400)
		return false;
	*out = (unsigned)v;
	return true;
}

/* sluiced's --pool rule: a.b.c.d/8..29, host bits zero. */
static bool
parse_pool(const char *s, uint32_t *net, uint32_t *mask)
{
	int plen;

	if (!gw_addr_split(s, net, &plen) || plen < 8 || plen > 29)
		return false;
	*mask = htonl(~0u << (32 - plen));
	return (*net & ~*mask) == 0;
}

/* An address, a.b.c.d, or a.b.c.d/len as sluiced's --uplink-addr takes
 * it (the length is not needed here). */
static bool
parse_host(const char *s, uint32_t *addr)
{
	int plen;

	return gw_addr_split(s, addr, &plen) && *addr != 0;
}

static int
parse_args(int argc, char **argv, const struct cli *cli, struct args *a)
{
	enum { OPT_POLICY = 256, OPT_AGAINST, OPT_SANDBOX, OPT_POOL,
	    OPT_TTL_MIN, OPT_TTL_MAX, OPT_GRACE, OPT_UPLINK, OPT_UPLINK_PEER };
	static const struct option longopts[] = {
		{ "policy", required_argument, NULL, OPT_POLICY },
		{ "against", required_argument, NULL, OPT_AGAINST },
		{ "json", no_argument, NULL, 'j' },
		{ "sandbox-addr", required_argument, NULL, OPT_SANDBOX },
		{ "pool", required_argument, NULL, OPT_POOL },
		{ "uplink-addr", required_argument, NULL, OPT_UPLINK },
		{ "uplink-peer-addr", required_argument, NULL, OPT_UPLINK_PEER },
		{ "dns-ttl-min", required_argument, NULL, OPT_TTL_MIN },
		{ "dns-ttl-max", required_argument, NULL, OPT_TTL_MAX },
		{ "dns-grace", required_argument, NULL, OPT_GRACE },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static const char optstring[] = "-:jh";
	struct in_addr in;
	int c, rc, nop = 0;

	memset(a, 0, sizeof(*a));
	a->o.ttl_min = TTL_MIN_DEFAULT;
	a->o.ttl_max = TTL_MAX_DEFAULT;
	a->o.grace = GRACE_DEFAULT;
	(void)parse_pool(GW_REPLAY_POOL_DEFAULT, &a->o.pool_net,
	    &a->o.pool_mask);
	(void)parse_host(GW_REPLAY_UPLINK_DEFAULT, &a->o.uplink[0]);
	(void)parse_host(GW_REPLAY_UPLINK_PEER_DEFAULT, &a->o.uplink[1]);
	optind = 0;
	while ((c = getopt_long(argc, argv, optstring, longopts, NULL)) != -1) {
		switch (c) {
		case OPT_POLICY:
			a->policy = optarg;
			break;
		case OPT_AGAINST:
			a->against = optarg;
			break;
		case 'j':
			a->json = true;
			break;
		case OPT_SANDBOX:
			if (inet_pton(AF_INET, optarg, &in) != 1 ||
			    in.s_addr == 0)
				return cli_usage_error(cli, "--sandbox-addr: "
				    "'%s' is not an IPv4 address", optarg);
			a->o.sandbox_addr = in.s_addr;
			break;
		case OPT_POOL:
			if (!parse_pool(optarg, &a->o.pool_net,
			    &a->o.pool_mask))
				return cli_usage_error(cli, "--pool: '%s' is "
				    "not a network a.b.c.d/8..29", optarg);
			break;
		case OPT_UPLINK:
		case OPT_UPLINK_PEER:
			if (!parse_host(optarg, &a->o.uplink[c == OPT_UPLINK ?
			    0 : 1]))
				return cli_usage_error(cli, "%s: '%s' is not "
				    "an IPv4 address (a.b.c.d or a.b.c.d/len, "
				    "as sluiced takes it)", c == OPT_UPLINK ?
				    "--uplink-addr" : "--uplink-peer-addr",
				    optarg);
			break;
		case OPT_TTL_MIN:
		case OPT_TTL_MAX:
		case OPT_GRACE:
			if (!parse_seconds(optarg, c == OPT_TTL_MIN ?
			    &a->o.ttl_min : c == OPT_TTL_MAX ? &a->o.ttl_max :
			    &a->o.grace))
				return cli_usage_error(cli, "%s: '%s' is not "
				    "a number of seconds (0 to 86400)",
				    c == OPT_TTL_MIN ? "--dns-ttl-min" :
				    c == OPT_TTL_MAX ? "--dns-ttl-max" :
				    "--dns-grace", optarg);
			break;
		default:
			if ((rc = cli_opt_default(cli, c, argv, optstring,
			    &a->trace, 1, &nop)) != -1)
				return rc;
		}
	}
	if ((rc = cli_opt_operands(cli, argc, argv, &a->trace, 1, &nop)) != -1)
		return rc;
	if (a->policy == NULL)
		return cli_usage_error(cli, "missing --policy FILE");
	if (a->trace == NULL)
		return cli_usage_error(cli, "missing TRACE.pcap");
	if (a->o.ttl_min > a->o.ttl_max)
		return cli_usage_error(cli, "--dns-ttl-min is above "
		    "--dns-ttl-max");
	return -1;
}

/* ---- output ------------------------------------------------------------- */

/* Names from a trace are the sender's bytes: keep them printable ASCII
 * (valid UTF-8 for JSON, harmless on a terminal). */
static void
printable(char *dst, size_t len, const char *src)
{
	size_t i;

	for (i = 0; src[i] != '\0' && i + 1 < len; i++)
		dst[i] = src[i] >= 0x20 && src[i] < 0x7f ? src[i] : '?';
	dst[i] = '\0';
}

static const char *
proto_name(const struct gw_replay_row *w)
{
	switch (w->proto) {
	case IPPROTO_TCP:
		return "tcp";
	case IPPROTO_UDP:
		return "udp";
	case IPPROTO_ICMP:
		return "icmp";
	}
	return "ip";
}

static bool
has_ports(const struct gw_replay_row *w)
{
	return w->proto == IPPROTO_TCP || w->proto == IPPROTO_UDP;
}

/* A JSON string member, or null when empty. */
static json_t *
str_or_null(const char *s)
{
	char buf[512];

	if (s == NULL || s[0] == '\0')
		return json_null();
	printable(buf, sizeof(buf), s);
	return json_string(buf);
}

static json_t *
row_json(const struct gw_replay_row *w, const char *kind)
{
	char src[INET_ADDRSTRLEN], dst[INET_ADDRSTRLEN];
	json_t *o;

	gw_addr_str(w->saddr, src);
	gw_addr_str(w->daddr, dst);
	o = json_pack("{s:s, s:I, s:s, s:s, s:o, s:s, s:o, s:s, s:s}",
	    "kind", kind != NULL ? kind :
	    w->kind == GW_REPLAY_DNS ? "dns" : "flow",
	    "ts", (json_int_t)w->ts_us,
	    "proto", proto_name(w),
	    "src_ip", src,
	    "src_port", has_ports(w) ? json_integer(w->sport) : json_null(),
	    "dst_ip", dst,
	    "dst_port", has_ports(w) ? json_integer(w->dport) : json_null(),
	    "verdict", w->verdict,
	    "reason", w->reason);
	if (o == NULL)
		return NULL;
	json_object_set_new(o, "rule", str_or_null(w->rule));
	json_object_set_new(o, "name", str_or_null(w->name));
	json_object_set_new(o, "sni", str_or_null(w->sni));
	json_object_set_new(o, "http_host", str_or_null(w->http_host));
	json_object_set_new(o, "qname", w->kind == GW_REPLAY_DNS ?
	    json_string(w->qname) : json_null());
	json_object_set_new(o, "qtype", str_or_null(w->qtype));
	json_object_set_new(o, "rcode", str_or_null(w->rcode));
	json_object_set_new(o, "answers", str_or_null(w->answers));
	return o;
}

static void
time_str(int64_t ts_us, char *buf, size_t len)
{
	time_t s = (time_t)(ts_us / 1000000);
	struct tm tm;

	if (ts_us < 0 || gmtime_r(&s, &tm) == NULL) {
		snprintf(buf, len, "?");
		return;
	}
	snprintf(buf, len, "%02d:%02d:%02d.%03d", tm.tm_hour, tm.tm_min,
	    tm.tm_sec, (int)(ts_us % 1000000 / 1000));
}

/* "a.test (192.0.2.10:443)", "198.51.100.53:53", "a.test A": as
 * `sluice log` writes destinations */
static void
destination(const struct gw_replay_row *w, char *buf, size_t len)
{
	char ip[INET_ADDRSTRLEN], name[300];
	const char *n;

	if (w->kind == GW_REPLAY_DNS) {
		printable(name, sizeof(name), w->qname);
		snprintf(buf, len, "%s %s", w->qname[0] != '\0' || w->qtype[0] ?
		    name : "(malformed)", w->qtype);
		return;
	}
	gw_addr_str(w->daddr, ip);
	n = w->sni[0] != '\0' ? w->sni : w->http_host[0] != '\0' ?
	    w->http_host : w->name;
	printable(name, sizeof(name), n);
	if (has_ports(w))
		snprintf(buf, len, name[0] ? "%s (%s:%u)" : "%s%s:%u", name, ip,
		    w->dport);
	else
		snprintf(buf, len, name[0] ? "%s (%s)" : "%s%s", name, ip);
}

static void
row_prefix(const struct gw_replay_row *w)
{
	char t[32], dest[600];

	time_str(w->ts_us, t, sizeof(t));
	destination(w, dest, sizeof(dest));
	printf("%-12s  %-5s %-*s ", t, w->kind == GW_REPLAY_DNS ? "dns" :
	    proto_name(w), DEST_WIDTH, dest);
}

/* ---- one policy: rows as they come, then a summary --------------------- */

struct tally {
	bool		 json;
	bool		 header;	/* the table's header was printed */
	json_t		*flows, *dns;	/* {"count":N, "verdicts":{}, "reasons":{}} */
	bool		 oom;
};

static void
bump(json_t *obj, const char *key)
{
	json_t *v = json_object_get(obj, key);

	json_object_set_new(obj, key,
	    json_integer(v != NULL ? json_integer_value(v) + 1 : 1));
}

static void
count(struct tally *t, const struct gw_replay_row *w)
{
	json_t *k = w->kind == GW_REPLAY_DNS ? t->dns : t->flows;

	bump(k, "count");
	bump(json_object_get(k, "verdicts"), w->verdict);
	bump(json_object_get(k, "reasons"), w->reason);
}

/* Printed with the first row (or after an empty replay), so that a
 * trace that cannot be read prints nothing on stdout. */
static void
table_header(struct tally *t)
{
	if (t->json || t->header)
		return;
	printf("%-12s  %-5s %-*s %-7s %s\n", "TIME", "PROTO", DEST_WIDTH,
	    "DESTINATION", "VERDICT", "REASON");
	t->header = true;
}

static void
on_row(void *arg, const struct gw_replay_row *w)
{
	struct tally *t = arg;
	json_t *o;

	count(t, w);
	if (t->json) {
		if ((o = row_json(w, NULL)) == NULL) {
			t->oom = true;
			return;
		}
		cli_print_json(o);
		json_decref(o);
		return;
	}
	table_header(t);
	row_prefix(w);
	printf("%-7s %s\n", w->verdict, w->reason);
}

static json_t *
new_counts(void)
{
	return json_pack("{s:i, s:{}, s:{}}", "count", 0, "verdicts",
	    "reasons");
}

/* "allow 3, deny 2" */
static void
print_counts(const char *what, json_t *k)
{
	const char *key;
	json_t *v;
	bool first = true;

	printf("%s: %lld", what, (long long)json_integer_value(
	    json_object_get(k, "count")));
	json_object_foreach(json_object_get(k, "verdicts"), key, v) {
		printf("%s%s %lld", first ? " (" : ", ", key,
		    (long long)json_integer_value(v));
		first = false;
	}
	printf("%s\n", first ? "" : ")");
	first = true;
	json_object_foreach(json_object_get(k, "reasons"), key, v) {
		printf("%s%s %lld", first ? "  reasons: " : ", ", key,
		    (long long)json_integer_value(v));
		first = false;
	}
	if (!first)
		printf("\n");
}

/* The summary line's common part. */
static json_t *
summary_json(const struct gw_replay *r)
{
	struct gw_replay_stats st;
	char addr[INET_ADDRSTRLEN];
	uint32_t a = gw_replay_sandbox_addr(r);

	gw_replay_get_stats(r, &st);
	gw_addr_str(a, addr);
	return json_pack("{s:s, s:o, s:I, s:I, s:I, s:I, s:I}",
	    "kind", "summary",
	    "sandbox_addr", a != 0 ? json_string(addr) : json_null(),
	    "frames", (json_int_t)st.frames,
	    "not_ipv4", (json_int_t)st.not_ipv4,
	    "malformed", (json_int_t)st.malformed,
	    "dns_tcp", (json_int_t)st.dns_tcp,
	    "dns_tcp_lost", (json_int_t)st.dns_tcp_lost);
}

/* What the reader should know about what was not replayed. */
static void
print_notes(const struct gw_replay *r)
{
	struct gw_replay_stats st;
	char addr[INET_ADDRSTRLEN];

	gw_replay_get_stats(r, &st);
	if (gw_replay_sandbox_addr(r) == 0)
		printf("note: no packet in the trace opens a connection or "
		    "asks a name: no sandbox found (see --sandbox-addr)\n");
	else {
		gw_addr_str(gw_replay_sandbox_addr(r), addr);
		printf("sandbox %s, %llu frames\n", addr,
		    (unsigned long long)st.frames);
	}
	if (st.dns_tcp_lost > 0)
		printf("note: %llu DNS connection(s) over TCP to the resolver "
		    "could not be read whole: what was missed binds nothing "
		    "here\n", (unsigned long long)st.dns_tcp_lost);
	if (st.malformed > 0)
		printf("note: %llu IPv4 packet(s) did not parse (or were cut "
		    "by the capture's snap length)\n",
		    (unsigned long long)st.malformed);
}

static int
replay_one(const struct args *a, const struct gw_replay_opts *o)
{
	struct tally t = { .json = a->json };
	struct gw_replay *r = NULL;
	char err[1024];
	json_t *sum = NULL;
	int rc = EXIT_FAILED, frc;

	t.flows = new_counts();
	t.dns = new_counts();
	if (t.flows == NULL || t.dns == NULL ||
	    (r = gw_replay_new(o, on_row, &t)) == NULL) {
		log_warnx("out of memory");
		goto cleanup;
	}
	frc = gw_replay_file(a->trace, &r, 1, err, sizeof(err));
	if (frc == -1) {
		log_warnx("%s", err);
		rc = EXIT_USAGE;
		goto cleanup;
	}
	if (frc == 1)
		log_warnx("%s (the trace is replayed up to there)", err);
	if (t.oom) {
		log_warnx("out of memory");
		goto cleanup;
	}
	if (a->json) {
		if ((sum = summary_json(r)) == NULL) {
			log_warnx("out of memory");
			goto cleanup;
		}
		json_object_set(sum, "flows", t.flows);
		json_object_set(sum, "dns", t.dns);
		cli_print_json(sum);
	} else {
		table_header(&t);
		printf("\n");
		print_notes(r);
		print_counts("flows", t.flows);
		print_counts("dns queries", t.dns);
	}
	rc = EXIT_OK;
cleanup:
	json_decref(sum);
	json_decref(t.flows);
	json_decref(t.dns);
	gw_replay_free(r);
	return rc;
}

/* ---- two policies: only what differs ----------------------------------- */

/*
 * What --against keeps of a row until both replays are done: enough to
 * pair it and print it, its strings copied only when set (a trace can
 * hold many rows).
 */
struct kept {
	enum gw_replay_kind	 kind;
	uint64_t		 seq;
	unsigned		 sub;
	int64_t			 ts_us;
	uint8_t			 proto;
	uint32_t		 saddr, daddr;
	uint16_t		 sport, dport;
	const char		*verdict, *reason;	/* static strings */
	char			*name, *sni, *http_host, *qname, *qtype;
};

struct rows {
	struct kept	*v;
	size_t		 n, cap;
	bool		 oom;
};

/* A copy of s, or NULL for ""; false when out of memory. */
static bool
dup_set(char **dst, const char *s)
{
	*dst = NULL;
	if (s[0] == '\0')
		return true;
	return (*dst = strdup(s)) != NULL;
}

static void
kept_free(struct kept *k)
{
	free(k->name);
	free(k->sni);
	free(k->http_host);
	free(k->qname);
	free(k->qtype);
}

static void
rows_free(struct rows *rs)
{
	size_t i;

	for (i = 0; i < rs->n; i++)
		kept_free(&rs->v[i]);
	free(rs->v);
}

static void
collect(void *arg, const struct gw_replay_row *w)
{
	struct rows *rs = arg;
	struct kept *nv, *k;

	if (rs->oom)
		return;
	if (rs->n == rs->cap) {
		size_t cap = rs->cap ? rs->cap * 2 : 64;

		if ((nv = reallocarray(rs->v, cap, sizeof(*nv))) == NULL) {
			rs->oom = true;
			return;
		}
		rs->v = nv;
		rs->cap = cap;
	}
	k = &rs->v[rs->n++];
	memset(k, 0, sizeof(*k));
	k->kind = w->kind;
	k->seq = w->seq;
	k->sub = w->sub;
	k->ts_us = w->ts_us;
	k->proto = w->proto;
	k->saddr = w->saddr;
	k->daddr = w->daddr;
	k->sport = w->sport;
	k->dport = w->dport;
	k->verdict = w->verdict;
	k->reason = w->reason;
	if (!dup_set(&k->name, w->name) || !dup_set(&k->sni, w->sni) ||
	    !dup_set(&k->http_host, w->http_host) ||
	    !dup_set(&k->qname, w->qname) || !dup_set(&k->qtype, w->qtype))
		rs->oom = true;
}

/* The row again, for printing (into w). */
static const struct gw_replay_row *
row_of(const struct kept *k, struct gw_replay_row *w)
{
	memset(w, 0, sizeof(*w));
	w->kind = k->kind;
	w->seq = k->seq;
	w->sub = k->sub;
	w->ts_us = k->ts_us;
	w->proto = k->proto;
	w->saddr = k->saddr;
	w->daddr = k->daddr;
	w->sport = k->sport;
	w->dport = k->dport;
	w->verdict = k->verdict;
	w->reason = k->reason;
	snprintf(w->name, sizeof(w->name), "%s", k->name ? k->name : "");
	snprintf(w->sni, sizeof(w->sni), "%s", k->sni ? k->sni : "");
	snprintf(w->http_host, sizeof(w->http_host), "%s",
	    k->http_host ? k->http_host : "");
	snprintf(w->qname, sizeof(w->qname), "%s", k->qname ? k->qname : "");
	snprintf(w->qtype, sizeof(w->qtype), "%s", k->qtype ? k->qtype : "");
	return w;
}

/* Rows pair up by the packet that opened them (and their order within
 * a flow): the same trace gives the same openings under any policy. */
static int
row_cmp(const void *x, const void *y)
{
	const struct kept *a = x, *b = y;

	if (a->seq != b->seq)
		return a->seq < b->seq ? -1 : 1;
	if (a->kind != b->kind)
		return a->kind < b->kind ? -1 : 1;
	if (a->sub != b->sub)
		return a->sub < b->sub ? -1 : 1;
	return 0;
}

static json_t *
side_json(const struct kept *k)
{
	if (k == NULL)
		return json_null();
	return json_pack("{s:s, s:s}", "verdict", k->verdict, "reason",
	    k->reason);
}

/* Prints one differing pair; false when out of memory. */
static bool
print_diff(const struct args *args, const struct kept *a,
    const struct kept *b)
{
	static struct gw_replay_row scratch;
	const struct gw_replay_row *w = row_of(a != NULL ? a : b, &scratch);
	json_t *o;

	if (args->json) {
		if ((o = row_json(w, "diff")) == NULL)
			return false;
		json_object_del(o, "verdict");
		json_object_del(o, "reason");
		json_object_del(o, "rule");
		json_object_del(o, "rcode");
		json_object_del(o, "answers");
		json_object_set_new(o, "a", side_json(a));
		json_object_set_new(o, "b", side_json(b));
		cli_print_json(o);
		json_decref(o);
		return true;
	}
	row_prefix(w);
	if (a != NULL)
		printf("%s (%s)", a->verdict, a->reason);
	else
		printf("(no row)");
	if (b != NULL)
		printf(" -> %s (%s)\n", b->verdict, b->reason);
	else
		printf(" -> (no row)\n");
	return true;
}

static bool
same(const struct kept *a, const struct kept *b)
{
	return strcmp(a->verdict, b->verdict) == 0 &&
	    strcmp(a->reason, b->reason) == 0;
}

static int
replay_diff(const struct args *a, const struct gw_replay_opts *oa,
    const struct gw_replay_opts *ob)
{
	struct rows ra = { 0 }, rb = { 0 };
	struct gw_replay *r[2] = { NULL, NULL };
	char err[1024];
	size_t i = 0, j = 0, total = 0, differ = 0;
	json_t *sum = NULL;
	int rc = EXIT_FAILED, frc;

	if ((r[0] = gw_replay_new(oa, collect, &ra)) == NULL ||
	    (r[1] = gw_replay_new(ob, collect, &rb)) == NULL) {
		log_warnx("out of memory");
		goto cleanup;
	}
	frc = gw_replay_file(a->trace, r, 2, err, sizeof(err));
	if (frc == -1) {
		log_warnx("%s", err);
		rc = EXIT_USAGE;
		goto cleanup;
	}
	if (frc == 1)
		log_warnx("%s (the trace is replayed up to there)", err);
	if (ra.oom || rb.oom) {
		log_warnx("out of memory");
		goto cleanup;
	}
	qsort(ra.v, ra.n, sizeof(*ra.v), row_cmp);
	qsort(rb.v, rb.n, sizeof(*rb.v), row_cmp);
	if (!a->json)
		printf("%-12s  %-5s %-*s %s -> %s\n", "TIME", "PROTO",
		    DEST_WIDTH, "DESTINATION", a->policy, a->against);
	while (i < ra.n || j < rb.n) {
		const struct kept *x = i < ra.n ? &ra.v[i] : NULL;
		const struct kept *y = j < rb.n ? &rb.v[j] : NULL;
		int c = x == NULL ? 1 : y == NULL ? -1 : row_cmp(x, y);

		total++;
		if (c < 0)
			y = NULL;
		else if (c > 0)
			x = NULL;
		i += x != NULL;
		j += y != NULL;
		if (x != NULL && y != NULL && same(x, y))
			continue;
		differ++;
		if (!print_diff(a, x, y)) {
			log_warnx("out of memory");
			goto cleanup;
		}
	}
	if (a->json) {
		if ((sum = summary_json(r[0])) == NULL) {
			log_warnx("out of memory");
			goto cleanup;
		}
		json_object_set_new(sum, "rows",
		    json_integer((json_int_t)total));
		json_object_set_new(sum, "differ",
		    json_integer((json_int_t)differ));
		cli_print_json(sum);
	} else {
		printf("\n");
		print_notes(r[0]);
		printf("%zu of %zu rows differ\n", differ, total);
	}
	rc = EXIT_OK;
cleanup:
	json_decref(sum);
	gw_replay_free(r[0]);
	gw_replay_free(r[1]);
	rows_free(&ra);
	rows_free(&rb);
	return rc;
}

static int
replay_run(int argc, char **argv, const struct cli *cli)
{
	struct args a;
	struct policy *pa = NULL, *pb = NULL;
	struct gw_replay_opts ob;
	int rc;

	if ((rc = parse_args(argc, argv, cli, &a)) != -1)
		return rc;
	if ((pa = cli_policy_load(a.policy)) == NULL)
		return EXIT_USAGE;
	if (a.against != NULL && (pb = cli_policy_load(a.against)) == NULL) {
		policy_free(pa);
		return EXIT_USAGE;
	}
	a.o.policy = pa;
	if (pb == NULL) {
		rc = replay_one(&a, &a.o);
	} else {
		ob = a.o;
		ob.policy = pb;
		rc = replay_diff(&a, &a.o, &ob);
	}
	policy_free(pa);
	policy_free(pb);
	return rc;
}
