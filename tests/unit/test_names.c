/* test_names.c: the sandbox name rule that sluiced and sluice share. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "gateway/names.h"

static void
test_valid_names(void **state)
{
	static const char *const ok[] = {
		"a", "Z", "0", "_", "task-a", "Task_B.2", "a.", "a-", "x..y",
		"web_01.ci-run", "0123456789",
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		if (!gw_sandbox_name_valid(ok[i]))
			fail_msg("rejected valid name \"%s\"", ok[i]);
	}
}

static void
test_invalid_names(void **state)
{
	static const char *const bad[] = {
		"", ".", "..", ".hidden", "-x", "--policy", "a/b", "/", "a b",
		" a", "a\n", "a\t", "a:b", "a*", "a$", "a\\b", "caf\xc3\xa9",
		"\xff", "a@b", "a+b", "a,b",
	};
	size_t i;

	(void)state;
	assert_false(gw_sandbox_name_valid(NULL));
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (gw_sandbox_name_valid(bad[i]))
			fail_msg("accepted invalid name \"%s\"", bad[i]);
	}
}

static void
test_length_bound(void **state)
{
	char name[GW_SANDBOX_NAME_MAX + 2];

	(void)state;
	assert_int_equal(GW_SANDBOX_NAME_MAX, 48);
	memset(name, 'a', sizeof(name));
	name[GW_SANDBOX_NAME_MAX] = '\0';
	assert_true(gw_sandbox_name_valid(name));	/* 48 */
	name[GW_SANDBOX_NAME_MAX] = 'a';
	name[GW_SANDBOX_NAME_MAX + 1] = '\0';
	assert_false(gw_sandbox_name_valid(name));	/* 49 */
	/* a bad character past the bound is not what rejects it */
	name[GW_SANDBOX_NAME_MAX] = '\0';
	name[GW_SANDBOX_NAME_MAX - 1] = '/';
	assert_false(gw_sandbox_name_valid(name));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_valid_names),
		cmocka_unit_test(test_invalid_names),
		cmocka_unit_test(test_length_bound),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
