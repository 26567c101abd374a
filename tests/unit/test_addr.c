/* test_addr.c: the IPv4 address text sluiced, sluice and sluice-cni share. */
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

/* gw_addr_str against inet_ntop, over every octet value in each place */
static void
test_str(void **state)
{
	char want[INET_ADDRSTRLEN], got[INET_ADDRSTRLEN + 8];
	struct in_addr in;
	unsigned v, place;

	(void)state;
	for (place = 0; place < 4; place++)
		for (v = 0; v < 256; v++) {
			uint8_t o[4] = { 192, 0, 2, 1 };
			uint32_t a;

			o[place] = (uint8_t)v;
			memcpy(&a, o, sizeof(a));
			in.s_addr = a;
			inet_ntop(AF_INET, &in, want, sizeof(want));
			memset(got, 'x', sizeof(got));
			assert_ptr_equal(gw_addr_str(a, got), got);
			assert_string_equal(got, want);
		}
	in.s_addr = 0xffffffffu;
	assert_string_equal(gw_addr_str(in.s_addr, got), "255.255.255.255");
	assert_string_equal(gw_addr_str(0, got), "0.0.0.0");
}

static void
test_strcopy(void **state)
{
	char b[8];

	(void)state;
	memset(b, 'x', sizeof(b));
	gw_strcopy(b, sizeof(b), "abc");
	assert_string_equal(b, "abc");
	gw_strcopy(b, sizeof(b), "1234567");
	assert_string_equal(b, "1234567");
	/* cut to fit, terminated, nothing written past the end */
	{
		char c[10];

		memset(c, 'x', sizeof(c));
		gw_strcopy(c, 8, "123456789");
		assert_string_equal(c, "1234567");
		assert_int_equal(c[8], 'x');
		assert_int_equal(c[9], 'x');
	}
	gw_strcopy(b, sizeof(b), NULL);
	assert_string_equal(b, "");
	gw_strcopy(b, 1, "abc");
	assert_string_equal(b, "");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_split_ok),
		cmocka_unit_test(test_split_bad),
		cmocka_unit_test(test_str),
		cmocka_unit_test(test_strcopy),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
