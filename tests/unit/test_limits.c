/* test_limits.c: token buckets, the rate-limited rows' throttle, the hold bound, and the rows they make in a real database. */
#include <arpa/inet.h>
#include <errno.h>
#include <setjmp.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "gateway/gw.h"
#include "gateway/limits.h"
#include "gateway/verdict.h"

/* ---- token buckets ------------------------------------------------------ */

static void
test_bucket_starts_full(void **state)
{
	struct gw_bucket b = { 0 };
	struct gw_rate r = { 2, 4 };
	int i;

	(void)state;
	for (i = 0; i < 4; i++)
		assert_true(gw_bucket_take(&b, &r, 5000));
	assert_false(gw_bucket_take(&b, &r, 5000));
	/* 2 a second: one token every 500 ms, not a millisecond earlier */
	assert_false(gw_bucket_take(&b, &r, 5499));
	assert_true(gw_bucket_take(&b, &r, 5500));
	assert_false(gw_bucket_take(&b, &r, 5500));
	assert_false(gw_bucket_take(&b, &r, 5999));
	assert_true(gw_bucket_take(&b, &r, 6000));
}

static void
test_bucket_full_at_clock_zero(void **state)
{
	struct gw_bucket b = { 0 };
	struct gw_rate r = { 1, 3 };

	(void)state;
	/* all zeroes is full even when the clock reads 0 */
	assert_true(gw_bucket_take(&b, &r, 0));
	assert_true(gw_bucket_take(&b, &r, 0));
	assert_true(gw_bucket_take(&b, &r, 0));
	assert_false(gw_bucket_take(&b, &r, 0));
	assert_false(gw_bucket_take(&b, &r, 999));
	assert_true(gw_bucket_take(&b, &r, 1000));
}

static void
test_bucket_unlimited(void **state)
{
	struct gw_bucket b = { 0 };
	struct gw_rate r = { 0, 0 };
	int i;

	(void)state;
	for (i = 0; i < 100000; i++)
		assert_true(gw_bucket_take(&b, &r, 42));
	assert_int_equal(b.debt, 0);
}

/* Tokens granted when asking every millisecond over ms milliseconds,
 * after emptying the bucket. */
static unsigned
granted(unsigned rate, unsigned burst, uint64_t t0, uint64_t ms, unsigned step)
{
	struct gw_bucket b = { 0 };
	struct gw_rate r = { rate, burst };
	unsigned n = 0, i;
	uint64_t t;

	for (i = 0; i < burst; i++)
		assert_true(gw_bucket_take(&b, &r, t0));
	assert_false(gw_bucket_take(&b, &r, t0));
	for (t = t0 + step; t <= t0 + ms; t += step)
		while (gw_bucket_take(&b, &r, t))
			n++;
	return n;
}

static void
test_bucket_no_drift(void **state)
{
	(void)state;
	/* rates that do not divide a second: exactly rate * seconds over
	 * a long run, however finely or coarsely it is asked */
	assert_int_equal(granted(7, 100, 1000, 10000, 1), 70);
	assert_int_equal(granted(3, 100, 1000, 10000, 1), 30);
	assert_int_equal(granted(3, 100, 1000, 10000, 333), 29);	/* 9990 ms */
	assert_int_equal(granted(3, 100, 1000, 9999, 9999), 29);
	assert_int_equal(granted(999, 5000, 1, 60000, 8), 999 * 60);
	assert_int_equal(granted(999, 5000, 1, 60000, 7), 59937);	/* 59997 ms */
	assert_int_equal(granted(2000, 4000, 77, 3000, 1), 6000);
	/* never more than the burst after a pause, however long */
	assert_int_equal(granted(2000, 4000, 77, 3600000, 3600000), 4000);
}

static void
test_bucket_extremes(void **state)
{
	struct gw_bucket b = { 0 };
	struct gw_rate r = { GW_RATE_MAX, GW_RATE_MAX };
	struct gw_rate slow = { 1, 1 };
	unsigned i;

	(void)state;
	for (i = 0; i < GW_RATE_MAX; i++)
		if (!gw_bucket_take(&b, &r, 10))
			break;
	assert_int_equal(i, GW_RATE_MAX);
	assert_false(gw_bucket_take(&b, &r, 10));
	/* a pause near the end of the clock: full again, no overflow */
	assert_true(gw_bucket_take(&b, &r, UINT64_MAX - 1));
	assert_int_equal(b.debt, 1000);

	/* the clock going back refills nothing */
	memset(&b, 0, sizeof(b));
	assert_true(gw_bucket_take(&b, &slow, 10000));
	assert_false(gw_bucket_take(&b, &slow, 5000));
	assert_false(gw_bucket_take(&b, &slow, 10999));
	assert_true(gw_bucket_take(&b, &slow, 11000));

	/* a burst made smaller since: what was owed still counts */
	memset(&b, 0, sizeof(b));
	r.rate = 10;
	r.burst = 10;
	for (i = 0; i < 10; i++)
		assert_true(gw_bucket_take(&b, &r, 0));
	r.burst = 5;
	assert_false(gw_bucket_take(&b, &r, 400));	/* 4 back, 6 owed */
	assert_true(gw_bucket_take(&b, &r, 600));	/* 6 back, 4 owed */
	assert_false(gw_bucket_take(&b, &r, 600));
}

/* ---- the throttle of rate_limited rows ---------------------------------- */

static void
test_log_throttle(void **state)
{
	struct gw_limit_log l = { 0 };
	int i;

	(void)state;
	assert_int_equal(gw_limit_log_due(&l), UINT64_MAX);
	for (i = 0; i < 3; i++)
		assert_true(gw_limit_log_admit(&l, 3, 1000 + i));
	for (i = 0; i < 5; i++)
		assert_false(gw_limit_log_admit(&l, 3, 1500));
	assert_int_equal(l.unlogged, 5);
	assert_int_equal(gw_limit_log_due(&l), 2000);
	assert_int_equal(gw_limit_log_take(&l, 1999, false), 0);
	assert_int_equal(gw_limit_log_take(&l, 2000, false), 5);
	assert_int_equal(gw_limit_log_take(&l, 2000, false), 0);
	assert_int_equal(gw_limit_log_due(&l), UINT64_MAX);

	/* the next second starts at its first attempt, with its rows */
	assert_true(gw_limit_log_admit(&l, 3, 2600));
	assert_true(gw_limit_log_admit(&l, 3, 2700));
	assert_true(gw_limit_log_admit(&l, 3, 3599));
	assert_false(gw_limit_log_admit(&l, 3, 3599));
	assert_int_equal(gw_limit_log_due(&l), 3600);

	/* a count not taken carries into the next second's summary */
	assert_true(gw_limit_log_admit(&l, 3, 3600));
	assert_true(gw_limit_log_admit(&l, 3, 3600));
	assert_true(gw_limit_log_admit(&l, 3, 3600));
	assert_false(gw_limit_log_admit(&l, 3, 3600));
	assert_false(gw_limit_log_admit(&l, 3, 3600));
	assert_false(gw_limit_log_admit(&l, 3, 3600));
	assert_int_equal(gw_limit_log_due(&l), 4600);
	assert_int_equal(gw_limit_log_take(&l, 4000, false), 0);
	assert_int_equal(gw_limit_log_take(&l, 4000, true), 3 + 1);

	/* no rows at all: everything counted */
	memset(&l, 0, sizeof(l));
	assert_false(gw_limit_log_admit(&l, 0, 0));
	assert_int_equal(l.window_ms, 1);
	assert_int_equal(gw_limit_log_take(&l, 1000, false), 0);
	assert_int_equal(gw_limit_log_take(&l, 1001, false), 1);
}

/* ---- the hold bound ----------------------------------------------------- */

static void
test_hold_check(void **state)
{
	(void)state;
	assert_int_equal(gw_hold_check(0, 1024, 0, 256), 0);
	assert_int_equal(gw_hold_check(100, 1024, 255, 256), 0);
	assert_int_equal(gw_hold_check(100, 1024, 256, 256), EBUSY);
	assert_int_equal(gw_hold_check(1024, 1024, 0, 256), ENOSPC);
	assert_int_equal(gw_hold_check(1024, 1024, 0, 0), ENOSPC);
	assert_int_equal(gw_hold_check(1023, 1024, 1000, 0), 0);
	/* the last quarter is kept for sandboxes holding little */
	assert_int_equal(gw_hold_check(767, 1024, 200, 256), 0);
	assert_int_equal(gw_hold_check(768, 1024, 200, 256), EBUSY);
	assert_int_equal(gw_hold_check(768, 1024, GW_HOLD_LIGHT, 256), EBUSY);
	assert_int_equal(gw_hold_check(768, 1024, GW_HOLD_LIGHT - 1, 256), 0);
	assert_int_equal(gw_hold_check(1023, 1024, 0, 256), 0);
	assert_int_equal(gw_hold_check(1023, 1024, 5, 4), EBUSY);
}

static void
test_rule_text(void **state)
{
	struct gw_rate r = { 2000, 4000 };
	char buf[160];

	(void)state;
	assert_string_equal(gw_limit_rule(buf, sizeof(buf), GW_LIMIT_CONN, &r,
	    256, 0), "limit-conn-rate 2000/s burst 4000");
	assert_string_equal(gw_limit_rule(buf, sizeof(buf), GW_LIMIT_DNS, &r,
	    256, 0), "limit-dns-rate 2000/s burst 4000");
	assert_string_equal(gw_limit_rule(buf, sizeof(buf), GW_LIMIT_HOLDS, &r,
	    256, 0), "limit-holds 256 (16 once the table is 3/4 full)");
	assert_string_equal(gw_limit_rule(buf, sizeof(buf), GW_LIMIT_CONN, &r,
	    256, 1234), "1234 attempts summarised (this one the last): "
	    "limit-conn-rate 2000/s burst 4000");
	assert_string_equal(gw_reason_name(GW_R_RATE_LIMITED), "rate_limited");
}

/* ---- the rows, in a real database --------------------------------------- */

struct db_fixture {
	char		 dir[64];
	char		 path[96];
	struct gw	 gw;
	struct gw_sandbox *sb;
};

static int
db_setup(void **state)
{
	struct db_fixture *f = calloc(1, sizeof(*f));
	static const char policy[] = "{\"sluice\":{\"allowedCidrs\":"
	    "[\"192.0.2.0/24:443\"]}}";
	char err[256];

	assert_non_null(f);
	snprintf(f->dir, sizeof(f->dir), "/tmp/test_limits.XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->path, sizeof(f->path), "%s/flows.db", f->dir);
	f->gw.store = store_open(f->path, NULL, err, sizeof(err));
	assert_non_null(f->gw.store);
	f->gw.cfg.limit_conn_rate = 5;
	f->gw.cfg.limit_conn_burst = 10;
	f->gw.cfg.limit_dns_rate = 7;
	f->gw.cfg.limit_dns_burst = 3;
	f->gw.cfg.limit_holds = 256;
	f->sb = calloc(1, sizeof(*f->sb));
	assert_non_null(f->sb);
	snprintf(f->sb->name, sizeof(f->sb->name), "flooder");
	f->sb->ifindex = 42;
	f->sb->addr = htonl(0x0ad50006);	/* 10.213.0.6 */
	f->sb->policy = policy_parse(policy, strlen(policy), "p.json", err,
	    sizeof(err));
	assert_non_null(f->sb->policy);
	*state = f;
	return 0;
}

static int
db_teardown(void **state)
{
	struct db_fixture *f = *state;
	char cmd[128];

	store_close(f->gw.store);
	policy_free(f->sb->policy);
	free(f->sb);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
	assert_int_equal(system(cmd), 0);
	free(f);
	return 0;
}

/* One number from the database. */
static long long
db_int(struct db_fixture *f, const char *sql)
{
	sqlite3 *db;
	sqlite3_stmt *st;
	long long v = -1;

	assert_int_equal(store_flush(f->gw.store, 5000), 0);
	assert_int_equal(sqlite3_open_v2(f->path, &db, SQLITE_OPEN_READONLY,
	    NULL), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
	if (sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(db);
	return v;
}

static void
db_text(struct db_fixture *f, const char *sql, char *out, size_t len)
{
	sqlite3 *db;
	sqlite3_stmt *st;

	out[0] = '\0';
	assert_int_equal(store_flush(f->gw.store, 5000), 0);
	assert_int_equal(sqlite3_open_v2(f->path, &db, SQLITE_OPEN_READONLY,
	    NULL), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
	if (sqlite3_step(st) == SQLITE_ROW &&
	    sqlite3_column_text(st, 0) != NULL)
		snprintf(out, len, "%s", sqlite3_column_text(st, 0));
	sqlite3_finalize(st);
	sqlite3_close(db);
}

static struct nfq_tuple
tuple(uint16_t sport, uint16_t dport)
{
	struct nfq_tuple t;

	memset(&t, 0, sizeof(t));
	t.proto = IPPROTO_TCP;
	t.saddr = htonl(0x0ad50006);
	t.daddr = htonl(0xcb007142);		/* 203.0.113.66 */
	t.sport = sport;
	t.dport = dport;
	return t;
}

/* What the verdict path does with a new flow's token (on_packet). */
static int
attempt(struct db_fixture *f, uint16_t sport, uint64_t now)
{
	struct nfq_tuple t = tuple(sport, 5555);

	if (gw_limit_conn(&f->gw, f->sb, now))
		return 2;			/* would be decided */
	return gw_limit_log_flow(&f->gw, f->sb, &t, GW_LIMIT_CONN, now);
}

static void
test_flow_rows(void **state)
{
	struct db_fixture *f = *state;
	struct gw *gw = &f->gw;
	char rule[300];
	int i, decided = 0, rows = 0, counted = 0, rc;

	/* 100 attempts in the same millisecond: 10 decided (the burst),
	 * 10 rate_limited rows, 80 counted */
	for (i = 0; i < 100; i++) {
		rc = attempt(f, (uint16_t)(10000 + i), 5000);
		decided += rc == 2;
		rows += rc == 0;
		counted += rc == 1;
	}
	assert_int_equal(decided, 10);
	assert_int_equal(rows, GW_LIMIT_LOG_ROWS);
	assert_int_equal(counted, 100 - 10 - GW_LIMIT_LOG_ROWS);
	assert_ptr_equal(gw->limited, f->sb);
	assert_int_equal(gw_limits_timeout(gw, 5000), 1000);
	assert_int_equal(gw_limits_timeout(gw, 5400), 600);
	gw_limits_expire(gw, 5999, false);
	assert_int_equal(db_int(f, "SELECT count(*) FROM flows"),
	    GW_LIMIT_LOG_ROWS);
	db_text(f, "SELECT rule FROM flows ORDER BY id LIMIT 1", rule,
	    sizeof(rule));
	assert_string_equal(rule, "limit-conn-rate 5/s burst 10");

	/* the second is over: one summary row with the count, showing the
	 * last attempt, and the sandbox leaves the list */
	gw_limits_expire(gw, 6000, false);
	assert_null(gw->limited);
	assert_int_equal(gw_limits_timeout(gw, 6000), -1);
	assert_int_equal(db_int(f, "SELECT count(*) FROM flows"),
	    GW_LIMIT_LOG_ROWS + 1);
	db_text(f, "SELECT rule FROM flows ORDER BY id DESC LIMIT 1", rule,
	    sizeof(rule));
	assert_string_equal(rule, "80 attempts summarised (this one the last): "
	    "limit-conn-rate 5/s burst 10");
	assert_int_equal(db_int(f, "SELECT src_port FROM flows ORDER BY id "
	    "DESC LIMIT 1"), 10099);
	assert_int_equal(db_int(f, "SELECT count(*) FROM flows WHERE "
	    "sandbox = 'flooder' AND verdict = 'deny' AND reason = "
	    "'rate_limited' AND dst_ip = '203.0.113.66' AND dst_port = 5555 "
	    "AND policy_sha256 IS NOT NULL"), GW_LIMIT_LOG_ROWS + 1);
	/* every attempt that was not decided has its row or is counted */
	assert_int_equal(db_int(f, "SELECT sum(max(1, CAST(rule AS INTEGER))) "
	    "FROM flows WHERE reason = 'rate_limited'"), 90);

	/* 5 a second refill: at 8000 ms, 10 tokens again (the burst) */
	for (i = 0, decided = 0; i < 12; i++)
		decided += attempt(f, (uint16_t)(20000 + i), 8000) == 2;
	assert_int_equal(decided, 10);

	/* a count still open when the sandbox goes is written at once */
	for (i = 0; i < 20; i++)
		(void)attempt(f, (uint16_t)(30000 + i), 8001);
	assert_ptr_equal(gw->limited, f->sb);
	gw_limits_forget(gw, 41);		/* another sandbox */
	assert_ptr_equal(gw->limited, f->sb);
	gw_limits_forget(gw, 42);
	assert_null(gw->limited);
	assert_false(f->sb->limited.listed);
	/* 2 + 20 rate-limited at 8000-8001: 10 rows, 12 in one summary */
	assert_int_equal(db_int(f, "SELECT sum(max(1, CAST(rule AS INTEGER))) "
	    "FROM flows WHERE reason = 'rate_limited'"), 90 + 22);
	assert_int_equal(db_int(f, "SELECT CAST(rule AS INTEGER) FROM flows "
	    "ORDER BY id DESC LIMIT 1"), 12);
	assert_int_equal(gw->limited_flows, 90 + 22);
	assert_int_equal(gw->limited_dns, 0);
}

static void
test_dns_rows(void **state)
{
	struct db_fixture *f = *state;
	struct gw *gw = &f->gw;
	struct dns_request req;
	char text[300];
	int i, tokens = 0, rows = 0;

	memset(&req, 0, sizeof(req));
	req.perr = DNS_PARSE_OK;
	req.q.qtype = DNS_T_A;
	req.src_port = 33333;
	for (i = 0; i < 50; i++) {
		if (gw_limit_dns(gw, f->sb, 10000)) {
			tokens++;
			continue;
		}
		snprintf(req.q.qname, sizeof(req.q.qname), "q%d.evil.test", i);
		/* the resolver's side writes the rows of the first ones */
		rows += gw_limit_log_dns(gw, f->sb, &req, 10000);
	}
	assert_int_equal(tokens, 3);
	assert_int_equal(rows, GW_LIMIT_LOG_ROWS);
	assert_int_equal(gw->limited_dns, 47);
	assert_ptr_equal(gw->limited, f->sb);
	/* the flows side has nothing to say: no flows summary */
	gw_limits_expire(gw, 11000, false);
	assert_null(gw->limited);
	assert_int_equal(db_int(f, "SELECT count(*) FROM flows"), 0);
	assert_int_equal(db_int(f, "SELECT count(*) FROM dns_queries"), 1);
	db_text(f, "SELECT qname || ' ' || qtype || ' ' || rcode || ' ' || "
	    "verdict || ' ' || reason || ' ' || src_port || ' ' || src_ip "
	    "FROM dns_queries", text, sizeof(text));
	assert_string_equal(text, "q49.evil.test A REFUSED deny rate_limited "
	    "33333 10.213.0.6");
	db_text(f, "SELECT rule FROM dns_queries", text, sizeof(text));
	assert_string_equal(text, "37 attempts summarised (this one the last): "
	    "limit-dns-rate 7/s burst 3");

	/* 7 a second: 7 more a second later */
	for (i = 0, tokens = 0; i < 20; i++)
		tokens += gw_limit_dns(gw, f->sb, 11000);
	assert_int_equal(tokens, 3);	/* the burst caps the refill */
	for (i = 0, tokens = 0; i < 20; i++)
		tokens += gw_limit_dns(gw, f->sb, 12000);
	assert_int_equal(tokens, 3);
	assert_false(gw_limit_dns(gw, f->sb, 12142));
	assert_true(gw_limit_dns(gw, f->sb, 12143));
}

static void
test_force_on_close(void **state)
{
	struct db_fixture *f = *state;
	struct gw *gw = &f->gw;
	int i;

	f->gw.cfg.limit_conn_rate = 1;
	f->gw.cfg.limit_conn_burst = 1;
	for (i = 0; i < 30; i++)
		(void)attempt(f, (uint16_t)(40000 + i), 20000);
	assert_ptr_equal(gw->limited, f->sb);
	/* sluiced stopping (gw_inspect_free) writes what is open */
	gw_limits_expire(gw, 0, true);
	assert_null(gw->limited);
	assert_int_equal(db_int(f, "SELECT sum(max(1, CAST(rule AS INTEGER))) "
	    "FROM flows WHERE reason = 'rate_limited'"), 29);
	assert_int_equal(db_int(f, "SELECT count(*) FROM flows"),
	    GW_LIMIT_LOG_ROWS + 1);
}

/*
 * A summary refused by a full queue stood for its n attempts: each is
 * counted lost, so that rows (a summary as its n) plus lost_records still
 * add up to every attempt not decided.
 */
static void
test_summary_refused(void **state)
{
	struct db_fixture *f = *state;
	struct gw *gw = &f->gw;
	struct store_opts opts = { .queue_cap = 12 };
	struct gw_decision d = { GW_DENY, GW_R_NOT_ALLOWLISTED, NULL, NULL,
	    "", 0 };
	struct nfq_tuple t = tuple(9, 9);
	sqlite3 *lock;
	char err[256];
	int i;

	store_close(gw->store);
	gw->store = store_open(f->path, &opts, err, sizeof(err));
	assert_non_null(gw->store);
	assert_int_equal(sqlite3_open_v2(f->path, &lock,
	    SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_exec(lock, "BEGIN EXCLUSIVE", NULL, NULL,
	    NULL), SQLITE_OK);
	/* 10 decided, 10 rows, 80 counted for the summary */
	for (i = 0; i < 100; i++)
		(void)attempt(f, (uint16_t)(10000 + i), 5000);
	/* the writer cannot drain the queue: fill what is left of it */
	for (i = 0; store_has_room(gw->store, 1); i++)
		assert_int_equal(gw_log_flow(gw, f->sb, &t, &d, NULL), 0);
	assert_true(i > 0);
	gw_limits_expire(gw, 6000, false);	/* the summary: refused */
	assert_null(gw->limited);
	assert_int_equal(sqlite3_exec(lock, "COMMIT", NULL, NULL, NULL),
	    SQLITE_OK);
	sqlite3_close(lock);
	assert_int_equal(db_int(f, "SELECT count(*) FROM flows WHERE "
	    "reason = 'rate_limited'"), GW_LIMIT_LOG_ROWS);
	assert_int_equal(db_int(f, "SELECT sum(count) FROM lost_records "
	    "WHERE kind = 'flow' AND reason = 'queue_full'"), 80);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bucket_starts_full),
		cmocka_unit_test(test_bucket_full_at_clock_zero),
		cmocka_unit_test(test_bucket_unlimited),
		cmocka_unit_test(test_bucket_no_drift),
		cmocka_unit_test(test_bucket_extremes),
		cmocka_unit_test(test_log_throttle),
		cmocka_unit_test(test_hold_check),
		cmocka_unit_test(test_rule_text),
		cmocka_unit_test_setup_teardown(test_flow_rows, db_setup,
		    db_teardown),
		cmocka_unit_test_setup_teardown(test_dns_rows, db_setup,
		    db_teardown),
		cmocka_unit_test_setup_teardown(test_summary_refused, db_setup,
		    db_teardown),
		cmocka_unit_test_setup_teardown(test_force_on_close, db_setup,
		    db_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
