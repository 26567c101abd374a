/* test_metrics.c: the exposition (exact lines, histogram, format, label
 * vocabulary), the HTTP request reader, and the server over a real socket. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "gateway/ctl.h"
#include "gateway/gw.h"
#include "gateway/metrics.h"
#include "gateway/verdict.h"

static char *
render(const struct gw_metrics *m, const struct gw_metrics_state *st)
{
	size_t len;
	char *text = gw_metrics_text(m, st, &len);

	assert_non_null(text);
	assert_int_equal(strlen(text), len);
	return text;
}

/* true if text has exactly this line */
static bool
has_line(const char *text, const char *line)
{
	size_t n = strlen(line);
	const char *p = text;

	while ((p = strstr(p, line)) != NULL) {
		if ((p == text || p[-1] == '\n') && p[n] == '\n')
			return true;
		p++;
	}
	return false;
}

static void
assert_line(const char *text, const char *line)
{
	if (!has_line(text, line))
		fail_msg("missing line: %s\n---\n%s", line, text);
}

static size_t
count_prefix(const char *text, const char *prefix)
{
	size_t n = 0, plen = strlen(prefix);
	const char *p = text;

	for (;;) {
		if (strncmp(p, prefix, plen) == 0)
			n++;
		if ((p = strchr(p, '\n')) == NULL || *++p == '\0')
			return n;
	}
}

static void
test_counters(void **state)
{
	struct gw_metrics *m = gw_metrics_new();
	struct gw_metrics_state st;
	char *text;

	(void)state;
	assert_non_null(m);
	memset(&st, 0, sizeof(st));
	st.sandboxes = 3;
	st.bindings = 7;
	st.held_flows = 2;
	st.kernel_syn = true;
	st.kernel_syn_copies = 31;
	st.kernel_syn_stale = 32;
	st.kernel_syn_lost = 33;
	st.kernel_syn_dropped = 36;
	st.verify_copies_lost = 37;
	st.verify_copies_dropped = 38;
	st.kernel_syn_learned = 34;
	st.kernel_syn_learn_errors = 35;
	st.kernel_sni = true;
	st.kernel_sni_approved = 41;
	st.kernel_sni_overruled = 42;
	st.kernel_sni_learned = 43;
	st.kernel_sni_learn_errors = 44;
	st.packets = 100;
	st.packet_errors = 4;
	st.denied_unlogged = 6;
	st.queue_known = true;
	st.queue_length = 11;
	st.queue_dropped = 5;
	st.queue_user_dropped = 12;
	st.log.queued = 90;
	st.log.written = 81;
	st.log.rejected = 13;
	st.log.write_errors = 1;
	st.log.depth = 9;
	st.log.depth_bytes = 1984;
	st.log.capacity = 16384;
	st.log.capacity_bytes = 6396928;
	st.log.db_bytes = 331776;
	st.log.wal_bytes = 4124152;
	st.log_writable = true;
	st.dns.forwarded = 21;
	st.dns.upstream_timeouts = 22;
	st.dns.malformed = 23;
	st.dns.dropped = 24;

	gw_metrics_flow(m, GW_ALLOW, GW_R_ALLOWED_DOMAIN);
	gw_metrics_flow(m, GW_ALLOW, GW_R_ALLOWED_DOMAIN);
	gw_metrics_flow(m, GW_ALLOW, GW_R_ALLOWED_CIDR);
	gw_metrics_flow(m, GW_DENY, GW_R_NOT_ALLOWLISTED);
	gw_metrics_flow(m, GW_AUDIT, GW_R_DNS_BYPASS);
	gw_metrics_flow(m, GW_DENY, GW_R_ALLOWED_DOMAIN);	/* odd, but seen */
	gw_metrics_flow(m, (enum gw_verdict)7, GW_R_QUIC);	/* ignored */
	gw_metrics_flow(m, GW_DENY, GW_R_COUNT);		/* ignored */
	gw_metrics_flow(NULL, GW_DENY, GW_R_QUIC);		/* no-op */
	gw_metrics_dns(m, "allow");
	gw_metrics_dns(m, "allow");
	gw_metrics_dns(m, "allow");
	gw_metrics_dns(m, "deny");
	gw_metrics_dns(m, "audit");
	gw_metrics_dns(m, "bogus");
	gw_metrics_dns(m, NULL);
	gw_metrics_dns(NULL, "allow");

	text = render(m, &st);
	assert_line(text, "# TYPE sluice_flows_total counter");
	assert_line(text,
	    "sluice_flows_total{verdict=\"allow\",reason=\"allowed_domain\"} 2");
	assert_line(text,
	    "sluice_flows_total{verdict=\"allow\",reason=\"allowed_cidr\"} 1");
	assert_line(text,
	    "sluice_flows_total{verdict=\"deny\",reason=\"not_allowlisted\"} 1");
	assert_line(text,
	    "sluice_flows_total{verdict=\"audit\",reason=\"dns_bypass\"} 1");
	assert_line(text,
	    "sluice_flows_total{verdict=\"deny\",reason=\"allowed_domain\"} 1");
	/* possible pairs are there from the start, impossible ones are not */
	assert_line(text, "sluice_flows_total{verdict=\"deny\",reason=\"quic\"} 0");
	assert_line(text, "sluice_flows_total{verdict=\"audit\",reason=\"quic\"} 0");
	assert_false(has_line(text,
	    "sluice_flows_total{verdict=\"allow\",reason=\"quic\"} 0"));
	assert_false(has_line(text,
	    "sluice_flows_total{verdict=\"audit\",reason=\"allowed_cidr\"} 0"));
	/* 2 allowing reasons with allow, the rest with deny and audit, and
	 * the one odd pair seen */
	assert_int_equal(count_prefix(text, "sluice_flows_total{"),
	    2 + 2 * (GW_R_COUNT - 2) + 1);

	assert_line(text, "# TYPE sluice_dns_queries_total counter");
	assert_line(text, "sluice_dns_queries_total{verdict=\"allow\"} 3");
	assert_line(text, "sluice_dns_queries_total{verdict=\"deny\"} 3");
	assert_line(text, "sluice_dns_queries_total{verdict=\"audit\"} 1");
	assert_line(text, "sluice_dns_forwarded_total 21");
	assert_line(text, "sluice_dns_upstream_timeouts_total 22");
	assert_line(text, "sluice_dns_malformed_total 23");
	assert_line(text, "sluice_dns_dropped_total 24");
	assert_line(text, "sluice_dns_bindings 7");
	assert_line(text, "# TYPE sluice_sandboxes gauge");
	assert_line(text, "sluice_sandboxes 3");
	assert_line(text, "sluice_inspect_held_flows 2");
	assert_line(text, "# TYPE sluice_kernel_syn_enabled gauge");
	assert_line(text, "sluice_kernel_syn_enabled 1");
	assert_line(text, "sluice_kernel_syn_copies_total 31");
	assert_line(text, "sluice_kernel_syn_stale_total 32");
	assert_line(text, "sluice_kernel_syn_copies_lost_total 33");
	assert_line(text, "sluice_kernel_syn_copies_dropped_total 36");
	assert_line(text, "sluice_verify_copies_lost_total 37");
	assert_line(text, "sluice_verify_copies_dropped_total 38");
	assert_line(text, "sluice_kernel_syn_learned_total 34");
	assert_line(text, "sluice_kernel_syn_learn_errors_total 35");
	assert_line(text, "# TYPE sluice_kernel_sni_enabled gauge");
	assert_line(text, "sluice_kernel_sni_enabled 1");
	assert_line(text, "# TYPE sluice_kernel_sni_approved_total counter");
	assert_line(text, "sluice_kernel_sni_approved_total 41");
	assert_line(text, "sluice_kernel_sni_overruled_total 42");
	assert_line(text, "sluice_kernel_sni_learned_total 43");
	assert_line(text, "sluice_kernel_sni_learn_errors_total 44");
	assert_line(text, "sluice_queue_packets_total 100");
	assert_line(text, "sluice_queue_packet_errors_total 4");
	assert_line(text, "# TYPE sluice_queue_length gauge");
	assert_line(text, "sluice_queue_length 11");
	assert_line(text, "# TYPE sluice_queue_dropped_total counter");
	assert_line(text, "sluice_queue_dropped_total 5");
	assert_line(text, "sluice_queue_user_dropped_total 12");
	assert_line(text, "sluice_log_records_queued_total 90");
	assert_line(text, "sluice_log_records_written_total 81");
	assert_line(text, "sluice_log_records_lost_total 13");
	assert_line(text, "sluice_log_write_errors_total 1");
	assert_line(text, "# TYPE sluice_log_backlog_records gauge");
	assert_line(text, "sluice_log_backlog_records 9");
	assert_line(text, "# TYPE sluice_log_backlog_bytes gauge");
	assert_line(text, "sluice_log_backlog_bytes 1984");
	assert_line(text, "sluice_log_queue_capacity_records 16384");
	assert_line(text, "sluice_log_queue_capacity_bytes 6396928");
	assert_line(text, "# TYPE sluice_log_db_bytes gauge");
	assert_line(text, "sluice_log_db_bytes 331776");
	assert_line(text, "# TYPE sluice_log_wal_bytes gauge");
	assert_line(text, "sluice_log_wal_bytes 4124152");
	assert_line(text, "sluice_log_writable 1");
	assert_line(text, "sluice_denied_unlogged_total 6");
	assert_line(text, "sluice_build_info{version=\"" SLUICE_VERSION "\"} 1");
	assert_line(text, "# HELP sluice_sandboxes Sandboxes governed now.");
	free(text);

	/* without the kernel's table its series are left out, not zero */
	st.queue_known = false;
	st.log_writable = false;
	text = render(m, &st);
	assert_null(strstr(text, "sluice_queue_dropped_total"));
	assert_null(strstr(text, "sluice_queue_length"));
	assert_line(text, "sluice_log_writable 0");
	free(text);
	gw_metrics_free(m);
}

static void
test_histogram(void **state)
{
	static const char *const want[] = {
		"{le=\"1e-06\"} 2", "{le=\"2.5e-06\"} 3", "{le=\"5e-06\"} 4",
		"{le=\"1e-05\"} 4", "{le=\"2.5e-05\"} 4", "{le=\"5e-05\"} 4",
		"{le=\"0.0001\"} 4", "{le=\"0.00025\"} 4", "{le=\"0.0005\"} 4",
		"{le=\"0.001\"} 4", "{le=\"0.0025\"} 4", "{le=\"0.005\"} 4",
		"{le=\"0.01\"} 4", "{le=\"0.025\"} 4", "{le=\"0.05\"} 4",
		"{le=\"0.1\"} 5", "{le=\"+Inf\"} 7",
	};
	struct gw_metrics *m = gw_metrics_new();
	struct gw_metrics_state st;
	char *text, line[128];
	const char *p;
	size_t i;

	(void)state;
	memset(&st, 0, sizeof(st));
	text = render(m, &st);
	assert_line(text, "sluice_verdict_latency_seconds_bucket{le=\"+Inf\"} 0");
	assert_line(text, "sluice_verdict_latency_seconds_sum 0");
	assert_line(text, "sluice_verdict_latency_seconds_count 0");
	free(text);

	gw_metrics_verdict_latency(m, 0);
	gw_metrics_verdict_latency(m, 1000);		/* on a bound: in it */
	gw_metrics_verdict_latency(m, 1001);
	gw_metrics_verdict_latency(m, 3000);
	gw_metrics_verdict_latency(m, 100000000);	/* 0.1 s exactly */
	gw_metrics_verdict_latency(m, 100000001);
	gw_metrics_verdict_latency(m, 5000000000u);
	gw_metrics_verdict_latency(NULL, 1);
	text = render(m, &st);
	assert_line(text, "# TYPE sluice_verdict_latency_seconds histogram");
	/* every bucket, cumulative, in order, +Inf last */
	p = strstr(text, "sluice_verdict_latency_seconds_bucket");
	assert_non_null(p);
	for (i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		snprintf(line, sizeof(line),
		    "sluice_verdict_latency_seconds_bucket%s\n", want[i]);
		if (strncmp(p, line, strlen(line)) != 0)
			fail_msg("bucket %zu: want %s, got %.80s", i, line, p);
		p += strlen(line);
	}
	snprintf(line, sizeof(line), "sluice_verdict_latency_seconds_sum "
	    "5.200005002\nsluice_verdict_latency_seconds_count 7\n");
	assert_true(strncmp(p, line, strlen(line)) == 0);
	assert_int_equal(count_prefix(text,
	    "sluice_verdict_latency_seconds_bucket"), 17);
	free(text);
	gw_metrics_free(m);
}

/* ---- a format check of the whole text --------------------------------- */

/* val (vlen bytes) is one of list (NULL-terminated) */
static bool
in_list(const char *val, size_t vlen, const char *const *list)
{
	size_t i;

	for (i = 0; list[i] != NULL; i++)
		if (strlen(list[i]) == vlen && memcmp(list[i], val, vlen) == 0)
			return true;
	return false;
}

static bool
label_ok(const char *key, size_t klen, const char *val, size_t vlen)
{
	static const char *const verdicts[] = { "allow", "deny", "audit", NULL };
	static const char *const les[] = { "1e-06", "2.5e-06", "5e-06", "1e-05",
	    "2.5e-05", "5e-05", "0.0001", "0.00025", "0.0005", "0.001",
	    "0.0025", "0.005", "0.01", "0.025", "0.05", "0.1", "+Inf", NULL };
	size_t i;

	if (klen == 7 && memcmp(key, "verdict", 7) == 0)
		return in_list(val, vlen, verdicts);
	if (klen == 6 && memcmp(key, "reason", 6) == 0) {
		for (i = 0; i < GW_R_COUNT; i++)
			if (strlen(gw_reason_name(i)) == vlen &&
			    memcmp(gw_reason_name(i), val, vlen) == 0)
				return true;
		return false;
	}
	if (klen == 2 && memcmp(key, "le", 2) == 0)
		return in_list(val, vlen, les);
	if (klen == 7 && memcmp(key, "version", 7) == 0)
		return vlen == strlen(SLUICE_VERSION) &&
		    memcmp(val, SLUICE_VERSION, vlen) == 0;
	return false;
}

static bool
name_char(char c, bool first)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
	    c == ':' || (!first && c >= '0' && c <= '9');
}

struct family {
	char	name[96];
	char	type[16];
	bool	help;
};

/* Checks text line by line; fails with the line at fault. */
static void
check_format(const char *text)
{
	struct family fam[64];
	char seen[256][160];
	size_t nfam = 0, nseen = 0, i;
	const char *line = text, *eol;

	assert_true(strlen(text) > 0 && text[strlen(text) - 1] == '\n');
	memset(fam, 0, sizeof(fam));
	for (; *line != '\0'; line = eol + 1) {
		char name[96], series[160], *end;
		const char *p = line;
		size_t n = 0;

		eol = strchr(line, '\n');
		assert_non_null(eol);
		if (strncmp(line, "# HELP ", 7) == 0 ||
		    strncmp(line, "# TYPE ", 7) == 0) {
			bool help = line[2] == 'H';
			const char *q = line + 7;

			while (name_char(q[n], n == 0))
				n++;
			if (n == 0 || q[n] != ' ' || n >= sizeof(name))
				fail_msg("bad comment: %.*s", (int)(eol - line), line);
			memcpy(name, q, n);
			name[n] = '\0';
			for (i = 0; i < nfam; i++)
				if (strcmp(fam[i].name, name) == 0)
					break;
			if (i == nfam) {
				assert_true(nfam < 64);
				snprintf(fam[nfam++].name, sizeof(fam[0].name),
				    "%s", name);
			}
			if (help) {
				if (fam[i].help)
					fail_msg("second HELP for %s", name);
				fam[i].help = true;
			} else {
				size_t tl = (size_t)(eol - q - n - 1);

				if (fam[i].type[0] != '\0')
					fail_msg("second TYPE for %s", name);
				if (tl >= sizeof(fam[i].type))
					fail_msg("bad TYPE for %s", name);
				memcpy(fam[i].type, q + n + 1, tl);
				fam[i].type[tl] = '\0';
				if (strcmp(fam[i].type, "counter") != 0 &&
				    strcmp(fam[i].type, "gauge") != 0 &&
				    strcmp(fam[i].type, "histogram") != 0)
					fail_msg("type %s", fam[i].type);
				if (strcmp(fam[i].type, "counter") == 0 &&
				    (strlen(name) < 6 ||
				    strcmp(name + strlen(name) - 6, "_total") != 0))
					fail_msg("counter %s lacks _total", name);
			}
			continue;
		}
		assert_true(line[0] != '#');
		/* a sample: name, optional {labels}, space, value */
		while (name_char(p[n], n == 0))
			n++;
		if (n == 0 || n >= sizeof(name))
			fail_msg("bad sample: %.*s", (int)(eol - line), line);
		memcpy(name, p, n);
		name[n] = '\0';
		p += n;
		if (*p == '{') {
			p++;
			for (;;) {
				const char *k = p, *v;
				size_t kl = 0, vl = 0;

				while (name_char(p[kl], kl == 0))
					kl++;
				if (kl == 0 || p[kl] != '=' || p[kl + 1] != '"')
					fail_msg("bad label in %.*s",
					    (int)(eol - line), line);
				v = p + kl + 2;
				while (v[vl] != '"' && v[vl] != '\\' &&
				    v[vl] != '\n')
					vl++;
				if (v[vl] != '"')
					fail_msg("bad label value in %.*s",
					    (int)(eol - line), line);
				if (!label_ok(k, kl, v, vl))
					fail_msg("label outside the vocabulary: "
					    "%.*s", (int)(eol - line), line);
				p = v + vl + 1;
				if (*p == ',') {
					p++;
					continue;
				}
				if (*p != '}')
					fail_msg("bad labels in %.*s",
					    (int)(eol - line), line);
				p++;
				break;
			}
		}
		if (*p != ' ')
			fail_msg("no value: %.*s", (int)(eol - line), line);
		errno = 0;
		(void)strtod(p + 1, &end);
		if (end == p + 1 || end != eol || errno != 0)
			fail_msg("bad value: %.*s", (int)(eol - line), line);
		/* the family: histogram samples carry a suffix */
		for (i = 0; i < nfam; i++) {
			size_t fl = strlen(fam[i].name);

			if (strcmp(fam[i].name, name) == 0)
				break;
			if (strcmp(fam[i].type, "histogram") == 0 &&
			    strncmp(name, fam[i].name, fl) == 0 &&
			    (strcmp(name + fl, "_bucket") == 0 ||
			    strcmp(name + fl, "_sum") == 0 ||
			    strcmp(name + fl, "_count") == 0))
				break;
		}
		if (i == nfam || fam[i].type[0] == '\0' || !fam[i].help)
			fail_msg("sample before its HELP and TYPE: %s", name);
		/* no series twice */
		snprintf(series, sizeof(series), "%.*s",
		    (int)(p - line), line);
		for (i = 0; i < nseen; i++)
			if (strcmp(seen[i], series) == 0)
				fail_msg("series twice: %s", series);
		assert_true(nseen < 256);
		snprintf(seen[nseen++], sizeof(seen[0]), "%s", series);
	}
	/* every family has samples */
	for (i = 0; i < nfam; i++)
		if (count_prefix(text, fam[i].name) == 0)
			fail_msg("no samples of %s", fam[i].name);
}

static void
test_format(void **state)
{
	struct gw_metrics *m = gw_metrics_new();
	struct gw_metrics_state st;
	char *text;
	size_t r, v;

	(void)state;
	memset(&st, 0, sizeof(st));
	st.queue_known = true;
	/* every counter of the vocabulary touched */
	for (v = 0; v <= GW_AUDIT; v++)
		for (r = 0; r < GW_R_COUNT; r++)
			gw_metrics_flow(m, (enum gw_verdict)v, (enum gw_reason)r);
	gw_metrics_dns(m, "allow");
	gw_metrics_verdict_latency(m, 12345);
	text = render(m, &st);
	check_format(text);
	assert_int_equal(count_prefix(text, "sluice_flows_total{"),
	    3 * GW_R_COUNT);
	free(text);
	/* and the empty state */
	gw_metrics_free(m);
	m = gw_metrics_new();
	st.queue_known = false;
	text = render(m, &st);
	check_format(text);
	free(text);
	text = render(NULL, &st);
	check_format(text);
	free(text);
	gw_metrics_free(m);
}

static void
test_render_buffer(void **state)
{
	struct gw_metrics *m = gw_metrics_new();
	struct gw_metrics_state st;
	char small[100], *whole, *exact;
	size_t n, len;

	(void)state;
	memset(&st, 0, sizeof(st));
	whole = render(m, &st);
	len = strlen(whole);
	/* as snprintf: the whole length back, the start in the buffer */
	n = gw_metrics_render(m, &st, small, sizeof(small));
	assert_int_equal(n, len);
	assert_int_equal(strlen(small), sizeof(small) - 1);
	assert_memory_equal(small, whole, sizeof(small) - 1);
	assert_int_equal(gw_metrics_render(m, &st, NULL, 0), len);
	exact = malloc(len + 1);
	assert_int_equal(gw_metrics_render(m, &st, exact, len + 1), len);
	assert_string_equal(exact, whole);
	free(exact);
	free(whole);
	gw_metrics_free(m);
}

static void
test_json(void **state)
{
	struct gw_metrics *m = gw_metrics_new();
	struct gw_metrics_state st;
	json_t *j, *lat;

	(void)state;
	memset(&st, 0, sizeof(st));
	st.sandboxes = 2;
	st.log.rejected = 4;
	st.log.depth_bytes = 216;
	st.log.capacity_bytes = 6396928;
	gw_metrics_flow(m, GW_ALLOW, GW_R_ALLOWED_DOMAIN);
	gw_metrics_flow(m, GW_DENY, GW_R_NOT_ALLOWLISTED);
	gw_metrics_flow(m, GW_DENY, GW_R_NOT_ALLOWLISTED);
	gw_metrics_dns(m, "deny");
	gw_metrics_verdict_latency(m, 2000);
	gw_metrics_verdict_latency(m, 2000000000u);
	j = gw_metrics_json(m, &st);
	assert_non_null(j);
	assert_int_equal(json_integer_value(json_object_get(j, "sandboxes")), 2);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(j,
	    "flows"), "deny")), 2);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(
	    json_object_get(json_object_get(j, "flows"), "by_reason"), "deny"),
	    "not_allowlisted")), 2);
	/* zero reasons are left out of the JSON */
	assert_int_equal(json_object_size(json_object_get(json_object_get(
	    json_object_get(j, "flows"), "by_reason"), "audit")), 0);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(
	    json_object_get(j, "dns"), "queries"), "deny")), 1);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(j,
	    "log"), "lost")), 4);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(j,
	    "log"), "backlog_bytes")), 216);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(j,
	    "log"), "capacity_bytes")), 6396928);
	assert_true(json_is_null(json_object_get(json_object_get(j, "queue"),
	    "kernel")));
	lat = json_object_get(j, "verdict_latency");
	assert_int_equal(json_integer_value(json_object_get(lat, "count")), 2);
	assert_true(json_real_value(json_object_get(lat, "sum_seconds")) >
	    2.0000019 && json_real_value(json_object_get(lat, "sum_seconds")) <
	    2.0000021);
	assert_int_equal(json_array_size(json_object_get(lat, "buckets")),
	    GW_METRICS_LATENCY_BUCKETS);
	assert_int_equal(json_integer_value(json_object_get(json_array_get(
	    json_object_get(lat, "buckets"), 2), "count")), 1);
	json_decref(j);
	gw_metrics_free(m);
}

static void
test_queue_table(void **state)
{
	char path[] = "/tmp/test_metrics_qXXXXXX";
	struct gw_metrics *m = gw_metrics_new();
	struct gw_metrics_state st;
	int fd;
	FILE *f;

	(void)state;
	memset(&st, 0, sizeof(st));
	gw_metrics_read_queue_table(m, &st);
	assert_false(st.queue_known);
	assert_int_equal(gw_metrics_open_queue_table(m, "/nonexistent/q"), -1);

	/* as net/netfilter/nfnetlink_queue.c prints two queues */
	fd = mkstemp(path);
	assert_true(fd >= 0);
	f = fdopen(fd, "w");
	fprintf(f, "    0  28016     3 2 65531     7     1     4242  1\n"
	    "    1  28017     4 2 65531    10     2       17  1\n");
	fclose(f);
	assert_int_equal(gw_metrics_open_queue_table(m, path), 0);
	gw_metrics_read_queue_table(m, &st);
	assert_true(st.queue_known);
	assert_int_equal(st.queue_length, 7);
	assert_int_equal(st.queue_dropped, 17);
	assert_int_equal(st.queue_user_dropped, 3);
	/* read again from the start each time: the kernel's numbers move */
	f = fopen(path, "w");
	fprintf(f, "    0  28016     0 2 65531     9     1     4300  1\n");
	fclose(f);
	gw_metrics_read_queue_table(m, &st);
	assert_int_equal(st.queue_dropped, 9);
	/* an empty table: no queue bound there, nothing known */
	f = fopen(path, "w");
	fclose(f);
	gw_metrics_read_queue_table(m, &st);
	assert_false(st.queue_known);
	unlink(path);
	gw_metrics_free(m);
}

/* ---- HTTP requests ------------------------------------------------------ */

static int
parse(const char *s, bool *head)
{
	return gw_metrics_http_parse(s, strlen(s), head);
}

static void
test_http_parse(void **state)
{
	char big[GW_METRICS_REQ_MAX + 10];
	bool head;

	(void)state;
	assert_int_equal(parse("GET /metrics HTTP/1.1\r\nHost: x\r\n"
	    "Accept: */*\r\n\r\n", &head), 200);
	assert_false(head);
	assert_int_equal(parse("GET /metrics HTTP/1.0\r\n\r\n", &head), 200);
	assert_int_equal(parse("GET /metrics?name[]=x HTTP/1.1\n\n", &head), 200);
	assert_int_equal(parse("HEAD /metrics HTTP/1.1\r\n\r\n", &head), 200);
	assert_true(head);

	/* partial: wait */
	assert_int_equal(parse("", &head), 0);
	assert_int_equal(parse("G", &head), 0);
	assert_int_equal(parse("GET /metr", &head), 0);
	assert_int_equal(parse("GET /metrics HTTP/1.1\r\n", &head), 0);
	assert_int_equal(parse("GET /metrics HTTP/1.1\r\nHost: x\r\n", &head), 0);
	assert_int_equal(parse("GET /metrics HTTP/1.1\r\nHost: x\r\n\r", &head), 0);

	/* answered with an error */
	assert_int_equal(parse("GET / HTTP/1.1\r\n\r\n", &head), 404);
	assert_int_equal(parse("GET /metricsx HTTP/1.1\r\n\r\n", &head), 404);
	assert_int_equal(parse("GET /metrics/ HTTP/1.1\r\n\r\n", &head), 404);
	assert_int_equal(parse("POST /metrics HTTP/1.1\r\n\r\n", &head), 405);
	assert_int_equal(parse("get /metrics HTTP/1.1\r\n\r\n", &head), 405);
	assert_int_equal(parse("GET /metrics HTTP/2.0\r\n\r\n", &head), 505);
	assert_int_equal(parse("GET /metrics HTTP/1.10\r\n\r\n", &head), 400);
	assert_int_equal(parse("GET /metrics\r\n\r\n", &head), 400);
	assert_int_equal(parse("GET  /metrics HTTP/1.1\r\n\r\n", &head), 400);
	assert_int_equal(parse("GET /metrics HTTP/1.1 x\r\n\r\n", &head), 400);
	assert_int_equal(parse("\r\n\r\n", &head), 400);
	assert_int_equal(parse("\n", &head), 400);
	assert_int_equal(parse("garbage\n\n", &head), 400);
	/* binary garbage is refused at once, not waited for */
	assert_int_equal(gw_metrics_http_parse("\x16\x03\x01\x02\x00", 5, &head),
	    400);
	assert_int_equal(gw_metrics_http_parse("GET /\0", 6, &head), 400);
	assert_int_equal(parse("GET /m\x7f", &head), 400);

	/* oversized: a head that does not end within the bound */
	memset(big, 'a', sizeof(big));
	memcpy(big, "GET /metrics HTTP/1.1\r\nX-A: ", 28);
	assert_int_equal(gw_metrics_http_parse(big, GW_METRICS_REQ_MAX - 1,
	    &head), 0);
	assert_int_equal(gw_metrics_http_parse(big, GW_METRICS_REQ_MAX, &head),
	    431);
}

static void
test_parse_listen(void **state)
{
	static const char *const bad[] = {
		"127.0.0.1", "127.0.0.1:", "127.0.0.1:0", "127.0.0.1:65536",
		"127.0.0.1:+9", "127.0.0.1:-9", "127.0.0.1:9x", "127.0.0.1: 9",
		"localhost:9", "::1:9", "[::1]9", "[::1]", "[]:9", ":9",
		"1.2.3:9", "[127.0.0.1]:9", "",
	};
	struct sockaddr_storage ss;
	socklen_t len;
	char err[256];
	size_t i;

	(void)state;
	assert_int_equal(gw_metrics_parse_listen("127.0.0.1:9413", &ss, &len,
	    err, sizeof(err)), 0);
	assert_int_equal(ss.ss_family, AF_INET);
	assert_int_equal(len, sizeof(struct sockaddr_in));
	assert_int_equal(ntohs(((struct sockaddr_in *)&ss)->sin_port), 9413);
	assert_int_equal(gw_metrics_parse_listen("[::1]:65535", &ss, &len,
	    err, sizeof(err)), 0);
	assert_int_equal(ss.ss_family, AF_INET6);
	assert_int_equal(gw_metrics_parse_listen("192.168.7.3:1", &ss, &len,
	    err, sizeof(err)), 0);

	assert_int_equal(gw_metrics_parse_listen("0.0.0.0:9413", &ss, &len,
	    err, sizeof(err)), -1);
	assert_non_null(strstr(err, "wildcard"));
	assert_int_equal(gw_metrics_parse_listen("[::]:9413", &ss, &len,
	    err, sizeof(err)), -1);
	assert_non_null(strstr(err, "wildcard"));
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (gw_metrics_parse_listen(bad[i], &ss, &len, err,
		    sizeof(err)) != -1)
			fail_msg("accepted \"%s\"", bad[i]);
}

/* ---- the server, over a real unix socket ------------------------------- */

struct bed {
	char		 dir[64];
	char		 path[96];
	struct gw	 gw;
	uint64_t	 now;
};

static int
bed_setup(void **state)
{
	struct bed *b = calloc(1, sizeof(*b));
	char err[256];

	snprintf(b->dir, sizeof(b->dir), "/tmp/test_metrics_XXXXXX");
	assert_non_null(mkdtemp(b->dir));
	snprintf(b->path, sizeof(b->path), "%s/m.sock", b->dir);
	b->gw.metrics = gw_metrics_new();
	b->gw.nsandboxes = 5;
	assert_int_equal(gw_metrics_listen(b->gw.metrics, b->path, NULL, err,
	    sizeof(err)), 0);
	b->now = 1000000;
	*state = b;
	return 0;
}

static int
bed_teardown(void **state)
{
	struct bed *b = *state;

	gw_metrics_free(b->gw.metrics);
	/* the socket file goes with the listener */
	assert_int_equal(access(b->path, F_OK), -1);
	rmdir(b->dir);
	free(b);
	return 0;
}

/* One turn of the event loop, as sluiced runs it. */
static void
pump(struct bed *b, int wait_ms)
{
	struct pollfd pfd[GW_METRICS_POLLFDS];
	size_t n;

	n = gw_metrics_pollfds(b->gw.metrics, pfd, GW_METRICS_POLLFDS);
	assert_true(poll(pfd, n, wait_ms) >= 0);
	gw_metrics_process(&b->gw, b->gw.metrics, pfd, n, b->now);
}

static int
connect_bed(struct bed *b)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);

	assert_true(fd >= 0);
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", b->path);
	assert_int_equal(connect(fd, (struct sockaddr *)&sun, sizeof(sun)), 0);
	return fd;
}

/* Pumps until the client reads EOF; returns what it read (caller frees). */
static char *
exchange(struct bed *b, int fd, const char *req, size_t reqlen)
{
	size_t cap = 1 << 16, len = 0;
	char *out = malloc(cap);
	int turns;

	if (reqlen > 0)
		assert_int_equal(send(fd, req, reqlen, MSG_NOSIGNAL),
		    (ssize_t)reqlen);
	for (turns = 0; turns < 200; turns++) {
		ssize_t n;

		pump(b, 10);
		n = read(fd, out + len, cap - len - 1);
		if (n == 0 || (n < 0 && errno == ECONNRESET))
			break;
		if (n > 0)
			len += (size_t)n;
		assert_true(len < cap - 1);
	}
	assert_true(turns < 200);
	out[len] = '\0';
	return out;
}

static void
test_server_scrape(void **state)
{
	struct bed *b = *state;
	const char *body, *cl;
	char *out;
	int fd;

	fd = connect_bed(b);
	out = exchange(b, fd, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", 34);
	close(fd);
	assert_true(strncmp(out, "HTTP/1.1 200 OK\r\n", 17) == 0);
	assert_non_null(strstr(out, "\r\nContent-Type: text/plain; "
	    "version=0.0.4; charset=utf-8\r\n"));
	assert_non_null(strstr(out, "\r\nConnection: close\r\n"));
	body = strstr(out, "\r\n\r\n");
	assert_non_null(body);
	body += 4;
	cl = strstr(out, "Content-Length: ");
	assert_non_null(cl);
	assert_int_equal(strtoul(cl + 16, NULL, 10), strlen(body));
	assert_true(has_line(body, "sluice_sandboxes 5"));
	check_format(body);
	free(out);

	/* HEAD: the length, no body */
	fd = connect_bed(b);
	out = exchange(b, fd, "HEAD /metrics HTTP/1.0\r\n\r\n", 26);
	close(fd);
	assert_true(strncmp(out, "HTTP/1.1 200 OK\r\n", 17) == 0);
	body = strstr(out, "\r\n\r\n");
	assert_non_null(body);
	assert_string_equal(body + 4, "");
	assert_null(strstr(out, "Content-Length: 0\r\n"));
	free(out);
}

static void
test_server_errors(void **state)
{
	struct bed *b = *state;
	char big[GW_METRICS_REQ_MAX + 100], *out;
	int fd;

	fd = connect_bed(b);
	out = exchange(b, fd, "\x16\x03\x01\x02\x00\x01", 6);
	close(fd);
	assert_true(strncmp(out, "HTTP/1.1 400 Bad Request\r\n", 26) == 0);
	free(out);

	fd = connect_bed(b);
	out = exchange(b, fd, "DELETE /metrics HTTP/1.1\r\n\r\n", 28);
	close(fd);
	assert_true(strncmp(out, "HTTP/1.1 405 ", 13) == 0);
	assert_non_null(strstr(out, "\r\nAllow: GET, HEAD\r\n"));
	free(out);

	fd = connect_bed(b);
	out = exchange(b, fd, "GET /other HTTP/1.1\r\n\r\n", 23);
	close(fd);
	assert_true(strncmp(out, "HTTP/1.1 404 ", 13) == 0);
	free(out);

	/* oversized: answered (and the rest ignored) once the bound is hit */
	memset(big, 'a', sizeof(big));
	memcpy(big, "GET /metrics HTTP/1.1\r\nX-A: ", 28);
	fd = connect_bed(b);
	out = exchange(b, fd, big, sizeof(big));
	close(fd);
	assert_true(strncmp(out, "HTTP/1.1 431 ", 13) == 0);
	free(out);
}

static void
test_server_slow_clients(void **state)
{
	struct bed *b = *state;
	int slow[GW_METRICS_CLIENTS], fd, i;
	char buf[512], *out;
	ssize_t n;

	/* a client that sends half a request holds its slot, nothing more */
	slow[0] = connect_bed(b);
	assert_int_equal(send(slow[0], "GET /met", 8, 0), 8);
	pump(b, 10);
	pump(b, 0);
	assert_int_equal(read(slow[0], buf, sizeof(buf)), -1);
	assert_int_equal(errno, EAGAIN);
	/* meanwhile others are served */
	fd = connect_bed(b);
	out = exchange(b, fd, "GET /metrics HTTP/1.1\r\n\r\n", 25);
	close(fd);
	assert_true(strncmp(out, "HTTP/1.1 200 OK\r\n", 17) == 0);
	free(out);

	/* all slots taken by silent clients: the next one hears 503 */
	for (i = 1; i < GW_METRICS_CLIENTS; i++) {
		slow[i] = connect_bed(b);
		pump(b, 10);
	}
	fd = connect_bed(b);
	out = exchange(b, fd, "", 0);
	close(fd);
	assert_true(strncmp(out, "HTTP/1.1 503 ", 13) == 0);
	free(out);
	assert_int_equal(gw_metrics_timeout(b->gw.metrics, b->now),
	    GW_METRICS_IO_MS);

	/* at their deadline they are dropped */
	b->now += GW_METRICS_IO_MS;
	assert_int_equal(gw_metrics_timeout(b->gw.metrics, b->now), 0);
	pump(b, 0);
	assert_int_equal(gw_metrics_timeout(b->gw.metrics, b->now), -1);
	for (i = 0; i < GW_METRICS_CLIENTS; i++) {
		/* EOF; a reset for the one whose bytes were left unread */
		n = read(slow[i], buf, sizeof(buf));
		assert_true(n == 0 || (i == 0 && n == -1 && errno == ECONNRESET));
		close(slow[i]);
	}
	/* and the server takes new clients again */
	fd = connect_bed(b);
	out = exchange(b, fd, "GET /metrics HTTP/1.1\r\n\r\n", 25);
	close(fd);
	assert_true(strncmp(out, "HTTP/1.1 200 OK\r\n", 17) == 0);
	free(out);
}

/* Scrapes beyond GW_METRICS_RENDERS a second get the last text again;
 * the next second renders anew. */
static void
test_server_renders_bounded(void **state)
{
	struct bed *b = *state;
	char line[64], *out;
	int fd, i, fresh = 0;

	for (i = 0; i < GW_METRICS_RENDERS + 5; i++) {
		b->gw.nsandboxes = 100 + (size_t)i;
		fd = connect_bed(b);
		out = exchange(b, fd, "GET /metrics HTTP/1.1\r\n\r\n", 25);
		close(fd);
		assert_true(strncmp(out, "HTTP/1.1 200 OK\r\n", 17) == 0);
		snprintf(line, sizeof(line), "sluice_sandboxes %d", 100 + i);
		if (has_line(out, line))
			fresh++;
		else {
			/* the last one rendered, whole */
			snprintf(line, sizeof(line), "sluice_sandboxes %d",
			    100 + GW_METRICS_RENDERS - 1);
			assert_true(has_line(out, line));
			assert_true(has_line(out,
			    "sluice_metrics_scrapes_repeated_total 0"));
		}
		free(out);
	}
	assert_int_equal(fresh, GW_METRICS_RENDERS);
	/* a second later: rendered again, with the count of repeats */
	b->now += 1000;
	b->gw.nsandboxes = 7;
	fd = connect_bed(b);
	out = exchange(b, fd, "GET /metrics HTTP/1.1\r\n\r\n", 25);
	close(fd);
	assert_true(has_line(out, "sluice_sandboxes 7"));
	assert_true(has_line(out, "sluice_metrics_scrapes_repeated_total 5"));
	free(out);
}

static void
test_server_stale_socket(void **state)
{
	struct bed *b = *state;
	struct gw_metrics *other = gw_metrics_new();
	char err[256];

	(void)state;
	/* a live listener is not taken over */
	assert_int_equal(gw_metrics_listen(other, b->path, NULL, err,
	    sizeof(err)), -1);
	assert_non_null(strstr(err, "another sluiced"));
	gw_metrics_free(other);
	/* the loser did not remove the winner's socket */
	assert_int_equal(access(b->path, F_OK), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_counters),
		cmocka_unit_test(test_histogram),
		cmocka_unit_test(test_format),
		cmocka_unit_test(test_render_buffer),
		cmocka_unit_test(test_json),
		cmocka_unit_test(test_queue_table),
		cmocka_unit_test(test_http_parse),
		cmocka_unit_test(test_parse_listen),
		cmocka_unit_test_setup_teardown(test_server_scrape, bed_setup,
		    bed_teardown),
		cmocka_unit_test_setup_teardown(test_server_renders_bounded,
		    bed_setup, bed_teardown),
		cmocka_unit_test_setup_teardown(test_server_errors, bed_setup,
		    bed_teardown),
		cmocka_unit_test_setup_teardown(test_server_slow_clients,
		    bed_setup, bed_teardown),
		cmocka_unit_test_setup_teardown(test_server_stale_socket,
		    bed_setup, bed_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
