/*
 * test_config.c: sluiced's configuration, from a file (-c) and flags, and
 * what a parse keeps: under ASan every parse here is freed again, so a
 * string the parser allocates and loses (as each SIGHUP used to) is a
 * leak report that fails the run.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <getopt.h>
#include <unistd.h>

#include <cmocka.h>

#include "gateway/gw.h"

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
	strcpy(fx->dir, "/tmp/sluice-test-config.XXXXXX");
	if (mkdtemp(fx->dir) == NULL) {
		free(fx);
		return -1;
	}
	snprintf(fx->path, sizeof(fx->path), "%s/sluiced.json", fx->dir);
	*state = fx;
	return 0;
}

static int
teardown(void **state)
{
	struct fixture *fx = *state;

	(void)unlink(fx->path);
	(void)rmdir(fx->dir);
	free(fx);
	return 0;
}

static void
write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	assert_int_equal(fputs(text, f) >= 0, 1);
	assert_int_equal(fclose(f), 0);
}

/* gw_config_parse on a NULL-terminated argument list, from the start. */
static int
parse(struct gw_config *cfg, char **argv)
{
	int argc = 0;

	while (argv[argc] != NULL)
		argc++;
	optind = 0;	/* glibc's getopt starts over only from 0 */
	return gw_config_parse(cfg, argc, argv);
}

static const char full_config[] =
	"{\"db\": \"/var/lib/x/flows.db\","
	" \"dns-upstream\": [\"192.0.2.53\", \"198.51.100.53\"],"
	" \"capture-denied\": \"/var/lib/x/pcap\","
	" \"capture-denied-total\": 64,"
	" \"dns-ttl-min\": \"5\", \"retain-days\": 7,"
	" \"pool\": \"10.99.0.0/16\"}";

/* The file's values, strings and numbers (as numbers or strings); a flag
 * wins over the file; the file's document is kept, then freed. */
static void
test_file_and_flags(void **state)
{
	struct fixture *fx = *state;
	struct gw_config cfg;
	char *argv[] = { "sluiced", "-c", fx->path, "--db", "/tmp/other.db",
	    NULL };

	write_file(fx->path, full_config);
	assert_int_equal(parse(&cfg, argv), 0);
	assert_string_equal(cfg.db, "/tmp/other.db");
	assert_int_equal(cfg.ndns, 2);
	assert_string_equal(cfg.dns_upstream[0], "192.0.2.53");
	assert_string_equal(cfg.dns_upstream[1], "198.51.100.53");
	assert_string_equal(cfg.capture_denied, "/var/lib/x/pcap");
	assert_int_equal(cfg.capture_denied_total, 64);
	assert_string_equal(cfg.pool, "10.99.0.0/16");
	assert_int_equal(cfg.dns_ttl_min, 5);
	assert_int_equal(cfg.retain_days, 7);
	assert_string_equal(cfg.state_dir, "/var/lib/sluice");	/* default */
	assert_non_null(cfg.file);
	gw_config_free(&cfg);
	assert_null(cfg.file);
	gw_config_free(&cfg);	/* twice is harmless */
}

/* --dns-upstream flags replace the file's list rather than add to it. */
static void
test_flags_replace_upstreams(void **state)
{
	struct fixture *fx = *state;
	struct gw_config cfg;
	char *argv[] = { "sluiced", "-c", fx->path, "--dns-upstream",
	    "203.0.113.53", NULL };

	write_file(fx->path, full_config);
	assert_int_equal(parse(&cfg, argv), 0);
	assert_int_equal(cfg.ndns, 1);
	assert_string_equal(cfg.dns_upstream[0], "203.0.113.53");
	gw_config_free(&cfg);
}

/* No file: nothing is kept, and freeing is still right. */
static void
test_flags_only(void **state)
{
	struct gw_config cfg;
	char *argv[] = { "sluiced", "--dns-upstream", "192.0.2.53",
	    "--capture-denied", "/tmp/cap", NULL };

	(void)state;
	assert_int_equal(parse(&cfg, argv), 0);
	assert_null(cfg.file);
	assert_string_equal(cfg.capture_denied, "/tmp/cap");
	assert_int_equal(cfg.capture_denied_total, 1024);	/* 1 GiB */
	assert_string_equal(cfg.db, "/var/lib/sluice/flows.db");
	assert_false(cfg.kernel_syn);			/* off by default */
	assert_false(cfg.kernel_sni);			/* off by default */
	assert_int_equal(cfg.http_idle, 120);
	assert_int_equal(cfg.copy_interval, 0);		/* as each comes */
	gw_config_free(&cfg);
}

/* --kernel-sni: as --kernel-syn, and independent of it. */
static void
test_kernel_sni(void **state)
{
	struct fixture *fx = *state;
	struct gw_config cfg;
	char *flag[] = { "sluiced", "--kernel-sni", "on", NULL };
	char *file[] = { "sluiced", "-c", fx->path, NULL };
	char *both[] = { "sluiced", "-c", fx->path, "--kernel-sni", "off",
	    NULL };
	char *bad[] = { "sluiced", "--kernel-sni", "yes", NULL };

	assert_int_equal(parse(&cfg, flag), 0);
	assert_true(cfg.kernel_sni);
	assert_false(cfg.kernel_syn);
	gw_config_free(&cfg);
	write_file(fx->path, "{\"kernel-sni\": true, \"kernel-syn\": \"on\"}");
	assert_int_equal(parse(&cfg, file), 0);
	assert_true(cfg.kernel_sni);
	assert_true(cfg.kernel_syn);
	gw_config_free(&cfg);
	assert_int_equal(parse(&cfg, both), 0);
	assert_false(cfg.kernel_sni);			/* the flag wins */
	assert_true(cfg.kernel_syn);
	gw_config_free(&cfg);
	assert_int_equal(parse(&cfg, bad), -1);
	gw_config_free(&cfg);
}

/* --http-idle: seconds, 1..86400, as a flag or a key (a number or text). */
static void
test_http_idle(void **state)
{
	struct fixture *fx = *state;
	struct gw_config cfg;
	char *flag[] = { "sluiced", "--http-idle", "30", NULL };
	char *file[] = { "sluiced", "-c", fx->path, NULL };
	char *zero[] = { "sluiced", "--http-idle", "0", NULL };
	char *big[] = { "sluiced", "--http-idle", "86401", NULL };

	assert_int_equal(parse(&cfg, flag), 0);
	assert_int_equal(cfg.http_idle, 30);
	gw_config_free(&cfg);
	write_file(fx->path, "{\"http-idle\": 600}");
	assert_int_equal(parse(&cfg, file), 0);
	assert_int_equal(cfg.http_idle, 600);
	gw_config_free(&cfg);
	write_file(fx->path, "{\"http-idle\": \"45\"}");
	assert_int_equal(parse(&cfg, file), 0);
	assert_int_equal(cfg.http_idle, 45);
	gw_config_free(&cfg);
	assert_int_equal(parse(&cfg, zero), -1);
	gw_config_free(&cfg);
	assert_int_equal(parse(&cfg, big), -1);
	gw_config_free(&cfg);
}

/* --capture-denied-total: MiB, 0 (no bound) .. 4 TiB, a flag or a key;
 * the flag wins over the file. */
static void
test_capture_denied_total(void **state)
{
	struct fixture *fx = *state;
	struct gw_config cfg;
	char *zero[] = { "sluiced", "--capture-denied-total", "0", NULL };
	char *both[] = { "sluiced", "-c", fx->path, "--capture-denied-total",
	    "4194304", NULL };
	char *big[] = { "sluiced", "--capture-denied-total", "4194305", NULL };
	char *neg[] = { "sluiced", "--capture-denied-total", "-1", NULL };

	assert_int_equal(parse(&cfg, zero), 0);
	assert_int_equal(cfg.capture_denied_total, 0);
	gw_config_free(&cfg);
	write_file(fx->path, "{\"capture-denied-total\": 2048}");
	assert_int_equal(parse(&cfg, both), 0);
	assert_int_equal(cfg.capture_denied_total, 4194304);
	gw_config_free(&cfg);
	assert_int_equal(parse(&cfg, big), -1);
	gw_config_free(&cfg);
	assert_int_equal(parse(&cfg, neg), -1);
	gw_config_free(&cfg);
}

/* --copy-interval: ms, 0..100, as a flag or a key (a number or text); the
 * flag wins over the file. */
static void
test_copy_interval(void **state)
{
	struct fixture *fx = *state;
	struct gw_config cfg;
	char *flag[] = { "sluiced", "--copy-interval", "5", NULL };
	char *file[] = { "sluiced", "-c", fx->path, NULL };
	char *both[] = { "sluiced", "-c", fx->path, "--copy-interval", "0",
	    NULL };
	char *big[] = { "sluiced", "--copy-interval", "101", NULL };
	char *neg[] = { "sluiced", "--copy-interval", "-1", NULL };
	char *text[] = { "sluiced", "--copy-interval", "5ms", NULL };

	assert_int_equal(parse(&cfg, flag), 0);
	assert_int_equal(cfg.copy_interval, 5);
	gw_config_free(&cfg);
	write_file(fx->path, "{\"copy-interval\": 100}");
	assert_int_equal(parse(&cfg, file), 0);
	assert_int_equal(cfg.copy_interval, 100);
	gw_config_free(&cfg);
	write_file(fx->path, "{\"copy-interval\": \"20\"}");
	assert_int_equal(parse(&cfg, file), 0);
	assert_int_equal(cfg.copy_interval, 20);
	gw_config_free(&cfg);
	assert_int_equal(parse(&cfg, both), 0);
	assert_int_equal(cfg.copy_interval, 0);
	gw_config_free(&cfg);
	assert_int_equal(parse(&cfg, big), -1);
	gw_config_free(&cfg);
	assert_int_equal(parse(&cfg, neg), -1);
	gw_config_free(&cfg);
	assert_int_equal(parse(&cfg, text), -1);
	gw_config_free(&cfg);
}

/* --kernel-syn: on or off, as a flag or a key (a string or a boolean). */
static void
test_kernel_syn(void **state)
{
	struct fixture *fx = *state;
	struct gw_config cfg;
	char *flag[] = { "sluiced", "--kernel-syn", "on", NULL };
	char *file[] = { "sluiced", "-c", fx->path, NULL };
	char *both[] = { "sluiced", "-c", fx->path, "--kernel-syn", "on", NULL };
	char *bad[] = { "sluiced", "--kernel-syn", "no", NULL };

	assert_int_equal(parse(&cfg, flag), 0);
	assert_true(cfg.kernel_syn);
	gw_config_free(&cfg);
	write_file(fx->path, "{\"kernel-syn\": false}");
	assert_int_equal(parse(&cfg, file), 0);
	assert_false(cfg.kernel_syn);
	gw_config_free(&cfg);
	assert_int_equal(parse(&cfg, both), 0);
	assert_true(cfg.kernel_syn);			/* the flag wins */
	gw_config_free(&cfg);
	write_file(fx->path, "{\"kernel-syn\": \"off\"}");
	assert_int_equal(parse(&cfg, file), 0);
	assert_false(cfg.kernel_syn);
	gw_config_free(&cfg);
	assert_int_equal(parse(&cfg, bad), -1);
	gw_config_free(&cfg);
}

/*
 * Files that do not parse, or parse but say something wrong: -1, and
 * whatever the parse kept is freed all the same (a failed reload frees
 * its half-made config).
 */
static void
test_bad_files(void **state)
{
	struct fixture *fx = *state;
	static const char *const bad[] = {
		"{\"db\": ",					/* JSON */
		"[\"db\"]",					/* no object */
		"{\"no-such-key\": \"x\"}",
		"{\"db\": 5}",					/* type */
		"{\"dns-upstream\": [\"192.0.2.1\", 5]}",
		"{\"dns-ttl-min\": \"five\"}",
		"{\"dns-ttl-min\": 99999999}",
		"{\"dns-ttl-min\": \"60\", \"dns-ttl-max\": \"30\"}",
		"{\"uplink-addr\": \"100.64.0.1/30\"}",		/* without peer */
		"{\"queue-balance\": 0}",
		"{\"kernel-syn\": \"maybe\"}",
		"{\"kernel-syn\": 1}",
		"{\"kernel-sni\": \"maybe\"}",
		"{\"http-idle\": 0}",
		"{\"http-idle\": true}",
	};
	char *argv[] = { "sluiced", "-c", fx->path, NULL };
	struct gw_config cfg;
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		write_file(fx->path, bad[i]);
		memset(&cfg, 0, sizeof(cfg));
		if (parse(&cfg, argv) != -1)
			fail_msg("accepted: %s", bad[i]);
		gw_config_free(&cfg);
		assert_null(cfg.file);
	}
}

/* What every SIGHUP does: parse the same file again and drop the result.
 * Under ASan, a string lost per parse is 1,000 leak reports. */
static void
test_parse_again_and_again(void **state)
{
	struct fixture *fx = *state;
	struct gw_config cfg;
	char *argv[] = { "sluiced", "-c", fx->path, NULL };
	int i;

	write_file(fx->path, full_config);
	for (i = 0; i < 1000; i++) {
		assert_int_equal(parse(&cfg, argv), 0);
		assert_string_equal(cfg.dns_upstream[1], "198.51.100.53");
		gw_config_free(&cfg);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_file_and_flags, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_flags_replace_upstreams,
		    setup, teardown),
		cmocka_unit_test(test_flags_only),
		cmocka_unit_test_setup_teardown(test_kernel_syn, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_kernel_sni, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_copy_interval, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_http_idle, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_capture_denied_total,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_files, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_parse_again_and_again,
		    setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
