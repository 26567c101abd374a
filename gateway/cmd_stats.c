/* cmd_stats.c: `sluice stats` — the daemon's counters, as text, JSON or
 * the Prometheus exposition. */
#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "gateway/cli.h"
#include "gateway/ctl.h"
#include "gateway/log.h"

#define REASONS_MAX	64	/* per verdict; the vocabulary is smaller */

static int stats_run(int, char **, const struct cli *);

static const struct cli_action stats_actions[] = {
	{ NULL, stats_run, "[-j | --prometheus]",
	    "show the counters: flows, DNS, verdict latency, queue, log",
	    "  -j, --json     print the daemon's JSON object\n"
	    "  --prometheus   print the Prometheus text exposition (format "
	    "0.0.4), as\n"
	    "                 sluiced serves it with --metrics-socket or "
	    "--metrics-listen\n",
	    false },
};

const struct cli_command cmd_stats = {
	"stats", stats_actions, 1,
};

static uint64_t
num(const json_t *obj, const char *key)
{
	json_int_t v = json_integer_value(json_object_get(obj, key));

	return v > 0 ? (uint64_t)v : 0;
}

/* A duration for people: "750 ns", "2.5 us", "100 ms", "1.5 s". */
static void
duration(double s, char *buf, size_t len)
{
	if (s < 1e-6)
		snprintf(buf, len, "%.3g ns", s * 1e9);
	else if (s < 1e-3)
		snprintf(buf, len, "%.3g us", s * 1e6);
	else if (s < 1)
		snprintf(buf, len, "%.3g ms", s * 1e3);
	else
		snprintf(buf, len, "%.3g s", s);
}

/* "allow 3, deny 2, audit 0" style counts of a {verdict: n} object. */
static void
print_verdicts(const json_t *obj)
{
	printf("%ju allowed, %ju denied, %ju audited",
	    (uintmax_t)num(obj, "allow"), (uintmax_t)num(obj, "deny"),
	    (uintmax_t)num(obj, "audit"));
}

struct reason_count {
	const char	*name;
	uint64_t	 n;
};

static int
by_count(const void *a, const void *b)
{
	const struct reason_count *x = a, *y = b;

	if (x->n != y->n)
		return x->n < y->n ? 1 : -1;
	return strcmp(x->name, y->name);
}

/* One line per verdict that has rows: its reasons, most frequent first. */
static void
print_reasons(const json_t *by_reason)
{
	static const char *const verdicts[] = { "allow", "deny", "audit" };
	struct reason_count rc[REASONS_MAX];
	char safe[64];
	const char *key;
	json_t *v;
	size_t i, k, n;

	for (i = 0; i < 3; i++) {
		n = 0;
		json_object_foreach(json_object_get(by_reason, verdicts[i]), key,
		    v) {
			if (n < REASONS_MAX && json_integer_value(v) > 0)
				rc[n++] = (struct reason_count){ key,
				    (uint64_t)json_integer_value(v) };
		}
		if (n == 0)
			continue;
		qsort(rc, n, sizeof(rc[0]), by_count);
		printf("  %-15s ", verdicts[i]);
		for (k = 0; k < n; k++) {
			ctl_client_printable(safe, sizeof(safe), rc[k].name);
			printf("%s%s %ju", k > 0 ? ", " : "", safe,
			    (uintmax_t)rc[k].n);
		}
		printf("\n");
	}
}

/* The bucket bound under which a fraction q of the verdicts fell. */
static void
quantile(const json_t *lat, double q, char *buf, size_t len)
{
	uint64_t count = num(lat, "count");
	const json_t *b;
	size_t i;

	json_array_foreach(json_object_get(lat, "buckets"), i, b) {
		if ((double)num(b, "count") >= q * (double)count) {
			char d[32];

			duration(json_number_value(json_object_get(b,
			    "le_seconds")), d, sizeof(d));
			snprintf(buf, len, "<= %s", d);
			return;
		}
	}
	snprintf(buf, len, "above the last bucket");
}

static void
print_human(const json_t *r)
{
	const json_t *flows = json_object_get(r, "flows");
	const json_t *dns = json_object_get(r, "dns");
	const json_t *lat = json_object_get(r, "verdict_latency");
	const json_t *queue = json_object_get(r, "queue");
	const json_t *kernel = json_object_get(queue, "kernel");
	const json_t *lg = json_object_get(r, "log");
	uint64_t count = num(lat, "count");
	char p50[48], p99[48], mean[32];

	printf("%-17s %ju\n", "sandboxes", (uintmax_t)num(r, "sandboxes"));
	printf("%-17s ", "flows");
	print_verdicts(flows);
	printf("\n");
	print_reasons(json_object_get(flows, "by_reason"));
	printf("%-17s ", "dns queries");
	print_verdicts(json_object_get(dns, "queries"));
	printf("; %ju forwarded, %ju from the cache (%ju kept), "
	    "%ju upstream timeouts, %ju bindings\n",
	    (uintmax_t)num(dns, "forwarded"),
	    (uintmax_t)num(dns, "cache_hits"),
	    (uintmax_t)num(dns, "cache_entries"),
	    (uintmax_t)num(dns, "upstream_timeouts"),
	    (uintmax_t)num(dns, "bindings"));
	printf("%-17s %ju verdicts", "verdict latency", (uintmax_t)count);
	if (count > 0) {
		duration(json_number_value(json_object_get(lat, "sum_seconds")) /
		    (double)count, mean, sizeof(mean));
		quantile(lat, 0.5, p50, sizeof(p50));
		quantile(lat, 0.99, p99, sizeof(p99));
		printf(", mean %s; 50%% %s, 99%% %s", mean, p50, p99);
	}
	printf("\n");
	printf("%-17s %ju packets, %ju unparseable, %ju flows held for "
	    "inspection\n", "queue", (uintmax_t)num(queue, "packets"),
	    (uintmax_t)num(queue, "errors"), (uintmax_t)num(queue, "held_flows"));
	if (json_is_object(kernel))
		printf("%-17s %ju waiting; dropped: %ju (queue full), %ju "
		    "(socket full)\n", "kernel queue",
		    (uintmax_t)num(kernel, "length"),
		    (uintmax_t)num(kernel, "dropped"),
		    (uintmax_t)num(kernel, "user_dropped"));
	else
		printf("%-17s unknown (its table could not be read)\n",
		    "kernel queue");
	printf("%-17s %ju queued, %ju written, %ju waiting (%ju of %ju KiB), "
	    "%ju lost, %ju write errors; %s\n", "log",
	    (uintmax_t)num(lg, "queued"), (uintmax_t)num(lg, "written"),
	    (uintmax_t)num(lg, "backlog"),
	    (uintmax_t)(num(lg, "backlog_bytes") + 1023) / 1024,
	    (uintmax_t)num(lg, "capacity_bytes") / 1024,
	    (uintmax_t)num(lg, "lost"), (uintmax_t)num(lg, "write_errors"),
	    json_is_true(json_object_get(lg, "writable")) ? "writable" :
	    "NOT WRITABLE: new flows are denied");
	printf("%-17s %ju flow attempts, %ju dns queries (with a row or only "
	    "counted)\n", "rate limited",
	    (uintmax_t)num(json_object_get(r, "rate_limited"), "flows"),
	    (uintmax_t)num(json_object_get(r, "rate_limited"), "dns"));
}

static int
stats_run(int argc, char **argv, const struct cli *cli)
{
	enum { OPT_PROMETHEUS = 256 };
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "prometheus", no_argument, NULL, OPT_PROMETHEUS },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static const char optstring[] = "-:jh";
	json_t *req = NULL, *reply = NULL;
	const char *text;
	bool json = false, prometheus = false;
	int c, rc;

	optind = 0;
	while ((c = getopt_long(argc, argv, optstring, longopts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = true;
			break;
		case OPT_PROMETHEUS:
			prometheus = true;
			break;
		default:
			if ((rc = cli_opt_default(cli, c, argv, optstring,
			    NULL, 0, NULL)) != -1)
				return rc;
		}
	}
	if ((rc = cli_opt_operands(cli, argc, argv, NULL, 0, NULL)) != -1)
		return rc;
	if (json && prometheus)
		return cli_usage_error(cli, "-j and --prometheus exclude each "
		    "other");

	if ((req = json_pack("{s:s, s:b}", "cmd", "stats", "prometheus",
	    prometheus)) == NULL) {
		log_warnx("out of memory");
		return EXIT_FAILED;
	}
	if ((rc = cli_call(cli, req, &reply)) != EXIT_OK)
		goto cleanup;
	if (prometheus) {
		/* the text goes out as sluiced made it: a scraper's input */
		if ((text = ctl_client_string(reply, "prometheus")) == NULL) {
			log_warnx("sluiced sent no exposition text");
			rc = EXIT_FAILED;
			goto cleanup;
		}
		fputs(text, stdout);
		goto cleanup;
	}
	json_object_del(reply, "ok");
	/* short decimals for the buckets' bounds: 1e-06, not 9.99...e-7 */
	if (json) {
		if (json_dumpf(reply, stdout, JSON_COMPACT |
		    JSON_REAL_PRECISION(10)) == 0)
			fputc('\n', stdout);
	} else
		print_human(reply);
cleanup:
	json_decref(reply);
	json_decref(req);
	return rc;
}
