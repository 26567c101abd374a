/* test_addr.c: the IPv4 address splitter sluiced, sluice and sluice-cni share. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <arpa/inet.h>
#include <cmocka.h>

#include "gateway/addr.h"

static void
test_split_ok(void **state)
{
	static const struct {
		const char	*s;
		const char	*addr;
		int		 plen;
	} ok[] = {
		{ "192.0.2.1", "192.0.2.1", -1 },
		{ "10.213.0.0/16", "10.213.0.0", 16 },
		{ "198.51.100.2/30", "198.51.100.2", 30 },
		{ "0.0.0.0/0", "0.0.0.0", 0 },
		{ "255.255.255.255/32", "255.255.255.255", 32 },
		{ "203.0.113.7/08", "203.0.113.7", 8 },
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		uint32_t addr = 0, want;
		int plen = 99;

		if (!gw_addr_split(ok[i].s, &addr, &plen))
			fail_msg("rejected \"%s\"", ok[i].s);
		assert_int_equal(inet_pton(AF_INET, ok[i].addr, &want), 1);
		assert_int_equal(addr, want);
		assert_int_equal(plen, ok[i].plen);
	}
}

static void
test_split_bad(void **state)
{
	static const char *const bad[] = {
		"", "/24", "192.0.2.1/", "192.0.2.1/33", "192.0.2.1/320",
		"192.0.2.1/-1", "192.0.2.1/+8", "192.0.2.1/ 8", "192.0.2.1/8 ",
		"192.0.2.1/8/9", "192.0.2.1/8x", "192.0.2", "192.0.2.256",
		"192.0.2.1 ", " 192.0.2.1", "2001:db8::1", "2001:db8::/32",
		"a.test", "192.0.2.1:443", "1111111111111111111111/8",
		"192.0.2.1/99999999999999999999",
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		uint32_t addr = 7;
		int plen = 7;

		if (gw_addr_split(bad[i], &addr, &plen))
			fail_msg("accepted \"%s\"", bad[i]);
		/* nothing written */
		assert_int_equal(addr, 7);
		assert_int_equal(plen, 7);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_split_ok),
		cmocka_unit_test(test_split_bad),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
