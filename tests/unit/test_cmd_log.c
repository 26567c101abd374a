/* test_cmd_log.c: `sluice log`'s --since parser, cells, and which files it opens. */
#include <sys/stat.h>

#include <errno.h>
#include <ftw.h>
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
#include <jansson.h>

#include "gateway/cli.h"
#include "gateway/ctl.h"
#include "store/store.h"
#include "store/store_int.h"

/*
 * cmd_log.o refers to the CLI's shared helpers, which live in sluice.c
 * with main() and so are not in the archive the tests link against.
 * Nothing here reaches them.
 */
void
cli_action_help(FILE *f, const struct cli *cli)
{
	(void)f;
	(void)cli;
	fail_msg("cli_action_help called");
}

int
cli_usage_error(const struct cli *cli, const char *fmt, ...)
{
	(void)cli;
	(void)fmt;
	fail_msg("cli_usage_error called");
	return EXIT_USAGE;
}

int
cli_option_error(const struct cli *cli, int c, char **argv,
    const char *optstring)
{
	(void)cli;
	(void)c;
	(void)argv;
	(void)optstring;
	fail_msg("cli_option_error called");
	return EXIT_USAGE;
}

int
cli_opt_default(const struct cli *cli, int c, char **argv,
    const char *optstring, const char **operand, int n, int *got)
{
	(void)cli;
	(void)c;
	(void)argv;
	(void)optstring;
	(void)operand;
	(void)n;
	(void)got;
	fail_msg("cli_opt_default called");
	return EXIT_USAGE;
}

int
cli_opt_operands(const struct cli *cli, int argc, char **argv,
    const char **operand, int n, int *got)
{
	(void)cli;
	(void)argc;
	(void)argv;
	(void)operand;
	(void)n;
	(void)got;
	fail_msg("cli_opt_operands called");
	return EXIT_USAGE;
}

void
cli_print_json(const json_t *json)
{
	(void)json;
	fail_msg("cli_print_json called");
}

#define NOW_US	1709296215123456LL	/* 2024-03-01T12:30:15.123456Z */
#define S	1000000LL

static int64_t
since(const char *arg)
{
	int64_t us = -42;

	if (cli_log_parse_since(arg, NOW_US, &us) == -1)
		fail_msg("'%s' was refused", arg);
	return us;
}

static void
refused(const char *arg)
{
	int64_t us = -42;

	if (cli_log_parse_since(arg, NOW_US, &us) != -1)
		fail_msg("'%s' was accepted as %lld", arg, (long long)us);
	assert_int_equal(us, -42);	/* untouched */
}

static void
test_since_durations(void **state)
{
	(void)state;
	assert_int_equal(since("30s"), NOW_US - 30 * S);
	assert_int_equal(since("10m"), NOW_US - 600 * S);
	assert_int_equal(since("2h"), NOW_US - 7200 * S);
	assert_int_equal(since("7d"), NOW_US - 7 * 86400 * S);
	assert_int_equal(since("0s"), NOW_US);
	assert_int_equal(since("007m"), NOW_US - 420 * S);
	/* a bare number is seconds, as `policy suggest --since` takes it */
	assert_int_equal(since("600"), NOW_US - 600 * S);
	assert_int_equal(since("0"), NOW_US);
	/* 100 years of 366 days is the bound */
	assert_int_equal(since("36600d"), NOW_US - 36600LL * 86400 * S);
	refused("36601d");
	refused("3162240001");
	refused("99999999999999999999999s");

	refused("");
	refused("m");
	refused("10x");
	refused("10M");
	refused("10mm");
	refused("10 m");
	refused(" 10m");
	refused("10m ");
	refused("-10m");
	refused("+10m");
	refused("1.5h");
	refused("0x10s");
}

static void
test_since_times(void **state)
{
	(void)state;
	assert_int_equal(since("2024-03-01"), 1709251200 * S);
	assert_int_equal(since("2024-03-01T12:30"), (1709296215 - 15) * S);
	assert_int_equal(since("2024-03-01T12:30:15"), 1709296215 * S);
	assert_int_equal(since("2024-03-01 12:30:15"), 1709296215 * S);
	assert_int_equal(since("2024-03-01T12:30Z"), (1709296215 - 15) * S);
	/* pasted from the table or from -j */
	assert_int_equal(since("2024-03-01 12:30:15.250"),
	    1709296215 * S + 250000);
	assert_int_equal(since("2024-03-01T12:30:15.123456Z"), NOW_US);
	assert_int_equal(since("2024-02-29T23:59"), 1709251140 * S);
	assert_int_equal(since("1970-01-01"), 0);

	refused("2024-02-30");
	refused("2023-02-29");
	refused("2024-13-01");
	refused("2024-00-10");
	refused("2024-03-00");
	refused("2024-3-1");
	refused("24-03-01");
	refused("2024/03/01");
	refused("2024-03-01T");
	refused("2024-03-01T12");
	refused("2024-03-01T24:00");
	refused("2024-03-01T12:60");
	refused("2024-03-01T12:30:60");
	refused("2024-03-01T12:30:15.");
	refused("2024-03-01T12:30:15.1234567");
	refused("2024-03-01T12:30.5");
	refused("2024-03-01Z");
	refused("2024-03-01T12:30+01:00");
	refused("2024-03-01x");
	refused("1969-12-31");
}

static void
test_destination(void **state)
{
	char buf[128];

	(void)state;
	cli_log_destination(buf, sizeof(buf), "a.test", "192.0.2.10", 443);
	assert_string_equal(buf, "a.test (192.0.2.10:443)");
	cli_log_destination(buf, sizeof(buf), NULL, "192.0.2.10", 443);
	assert_string_equal(buf, "192.0.2.10:443");
	cli_log_destination(buf, sizeof(buf), "", "192.0.2.10", 0);
	assert_string_equal(buf, "192.0.2.10:0");
	/* ICMP: no port */
	cli_log_destination(buf, sizeof(buf), NULL, "198.51.100.7", -1);
	assert_string_equal(buf, "198.51.100.7");
	cli_log_destination(buf, sizeof(buf), "db.test", "198.51.100.7", -1);
	assert_string_equal(buf, "db.test (198.51.100.7)");
	cli_log_destination(buf, sizeof(buf), NULL, "2001:db8::1", 443);
	assert_string_equal(buf, "[2001:db8::1]:443");
	cli_log_destination(buf, sizeof(buf), "v6.test", "2001:db8::1", 80);
	assert_string_equal(buf, "v6.test ([2001:db8::1]:80)");
	cli_log_destination(buf, 10, "a.test", "192.0.2.10", 443);
	assert_string_equal(buf, "a.test (1");
}

static void
test_cell(void **state)
{
	char buf[16];

	(void)state;
	cli_log_cell(buf, sizeof(buf), "hello", 0);
	assert_string_equal(buf, "hello");
	cli_log_cell(buf, sizeof(buf), "hello", 5);
	assert_string_equal(buf, "hello");
	cli_log_cell(buf, sizeof(buf), "hello", 6);
	assert_string_equal(buf, "hello");
	cli_log_cell(buf, sizeof(buf), "hello", 4);
	assert_string_equal(buf, "hel~");
	cli_log_cell(buf, sizeof(buf), "hello", 1);
	assert_string_equal(buf, "~");
	cli_log_cell(buf, sizeof(buf), "", 3);
	assert_string_equal(buf, "");
	/* a name from a sandbox cannot drive the terminal */
	cli_log_cell(buf, sizeof(buf), "a\x1b[2Jb\r\n\x7f", 0);
	assert_string_equal(buf, "a?[2Jb???");
	cli_log_cell(buf, sizeof(buf), "\xc3\xa9t\xc3\xa9", 0);
	assert_string_equal(buf, "??t??");
	/* an 8-bit CSI is a control too */
	cli_log_cell(buf, sizeof(buf), "x\x9b" "31m", 0);
	assert_string_equal(buf, "x?31m");
	/* the buffer bounds it as well */
	cli_log_cell(buf, 6, "abcdefghij", 0);
	assert_string_equal(buf, "abcde");
	cli_log_cell(buf, sizeof(buf), "abcdefghijklmnopqrstuvwxyz", 12);
	assert_string_equal(buf, "abcdefghijk~");
}

struct fixture {
	char	dir[64];
	char	path[128];
};

static int
setup(void **state)
{
	struct fixture *fx;

	if ((fx = calloc(1, sizeof(*fx))) == NULL)
		return -1;
	strcpy(fx->dir, "/tmp/sluice-test-log.XXXXXX");
	if (mkdtemp(fx->dir) == NULL) {
		free(fx);
		return -1;
	}
	snprintf(fx->path, sizeof(fx->path), "%s/flows.db", fx->dir);
	*state = fx;
	return 0;
}

static int
rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(p);
}

static int
teardown(void **state)
{
	struct fixture *fx = *state;
	int rc;

	rc = nftw(fx->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	free(fx);
	return rc;
}

/* Makes a database at path by running sql, as another program would. */
static void
make_db(const char *path, const char *sql)
{
	sqlite3 *db = NULL;
	char *msg = NULL;

	assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE |
	    SQLITE_OPEN_CREATE, NULL), SQLITE_OK);
	if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK)
		fail_msg("%s: %s", sql, msg);
	sqlite3_close(db);
}

/* cli_log_open(path) returns want, with a message containing what. */
static void
open_fails(const char *path, int want, const char *what)
{
	struct sqlite3 *db = (struct sqlite3 *)1;
	char err[512] = "";

	assert_int_equal(cli_log_open(path, &db, err, sizeof(err)), want);
	assert_null(db);
	if (strstr(err, what) == NULL || strstr(err, path) == NULL)
		fail_msg("message '%s' lacks '%s' or the path", err, what);
}

static void
test_open_refuses(void **state)
{
	struct fixture *fx = *state;
	char sql[128];
	FILE *f;

	/* bad input: exit 1 */
	open_fails(fx->path, EXIT_USAGE, "No such file or directory");
	open_fails(fx->dir, EXIT_USAGE, "not a regular file");

	/* not ours, or a schema this CLI does not read: exit 2 */
	assert_non_null(f = fopen(fx->path, "w"));
	fputs("time,sandbox\n1,a\n", f);
	fclose(f);
	open_fails(fx->path, EXIT_FAILED, "not a sluice database");
	unlink(fx->path);

	make_db(fx->path, "CREATE TABLE t (a)");
	open_fails(fx->path, EXIT_FAILED, "not a sluice database");
	unlink(fx->path);

	snprintf(sql, sizeof(sql), "CREATE TABLE flows (id INTEGER);"
	    "PRAGMA user_version = %d", STORE_SCHEMA_VERSION + 1);
	make_db(fx->path, sql);
	open_fails(fx->path, EXIT_FAILED, "newer");
	unlink(fx->path);

	make_db(fx->path, "CREATE TABLE flows (id INTEGER);"
	    "PRAGMA user_version = 2");
	open_fails(fx->path, EXIT_FAILED, "older");
}

static void
test_open_store_db(void **state)
{
	struct fixture *fx = *state;
	struct store_db *writer;
	struct sqlite3 *db = NULL;
	struct stat before, after;
	char err[512] = "";

	/* what sluiced makes is what the CLI reads */
	writer = store_db_open(fx->path, err, sizeof(err));
	if (writer == NULL)
		fail_msg("store_db_open: %s", err);
	assert_int_equal(cli_log_open(fx->path, &db, err, sizeof(err)),
	    EXIT_OK);
	assert_non_null(db);

	/* read-only: no write gets through, the writer still can write */
	assert_int_equal(sqlite3_exec(db, "CREATE TABLE x (a)", NULL, NULL,
	    NULL) & 0xff, SQLITE_READONLY);
	assert_int_equal(sqlite3_exec(db, "DELETE FROM flows", NULL, NULL,
	    NULL) & 0xff, SQLITE_READONLY);
	assert_int_equal(sqlite3_exec(db, "SELECT count(*) FROM flows", NULL,
	    NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	store_db_close(writer);

	/* and without the daemon, leaving the file as it was */
	assert_int_equal(stat(fx->path, &before), 0);
	assert_int_equal(cli_log_open(fx->path, &db, err, sizeof(err)),
	    EXIT_OK);
	assert_int_equal(sqlite3_exec(db, "SELECT count(*) FROM flows", NULL,
	    NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	assert_int_equal(stat(fx->path, &after), 0);
	assert_int_equal(before.st_size, after.st_size);
	assert_int_equal(before.st_mtim.tv_sec, after.st_mtim.tv_sec);
	assert_int_equal(before.st_mtim.tv_nsec, after.st_mtim.tv_nsec);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_since_durations),
		cmocka_unit_test(test_since_times),
		cmocka_unit_test(test_destination),
		cmocka_unit_test(test_cell),
		cmocka_unit_test_setup_teardown(test_open_refuses, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_open_store_db, setup,
		    teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
