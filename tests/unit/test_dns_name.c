/* test_dns_name.c: host name normalisation and matching. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "dns/dns.h"

#define BAD_CHAR	"invalid character in name (letters, digits, '-', '_' only)"

struct norm_case {
	const char	*in;
	size_t		 len;		/* 0: strlen(in) */
	const char	*out;		/* NULL: invalid */
	const char	*why;
};

static void
check_norm(const struct norm_case *t)
{
	char out[DNS_NAME_MAX + 1];
	const char *why = "unset";
	size_t len = t->len != 0 ? t->len : strlen(t->in);
	bool ok;

	ok = dns_name_normalize(t->in, len, out, &why);
	if (t->out != NULL) {
		if (!ok)
			fail_msg("\"%s\" refused: %s", t->in, why);
		assert_string_equal(out, t->out);
		assert_string_equal(why, "unset");
	} else {
		if (ok)
			fail_msg("\"%s\" accepted as \"%s\"", t->in, out);
		assert_string_equal(why, t->why);
	}
}

static void
test_normalize_valid(void **state)
{
	static const struct norm_case cases[] = {
		{ "example.com", 0, "example.com", NULL },
		{ "Example.COM", 0, "example.com", NULL },
		{ "Example.COM.", 0, "example.com", NULL },
		{ "a", 0, "a", NULL },
		{ "A.", 0, "a", NULL },
		{ "a-b.c-d.e", 0, "a-b.c-d.e", NULL },
		{ "a--b.example", 0, "a--b.example", NULL },
		{ "_sip._tcp.Example.com", 0, "_sip._tcp.example.com", NULL },
		{ "_a_.b", 0, "_a_.b", NULL },
		{ "xn--mnchen-3ya.de", 0, "xn--mnchen-3ya.de", NULL },
		{ "123.456", 0, "123.456", NULL },
		/* len stops before the garbage. */
		{ "host.example!!!", 12, "host.example", NULL },
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		check_norm(&cases[i]);
}

static void
test_normalize_invalid(void **state)
{
	static const struct norm_case cases[] = {
		{ "", 0, NULL, "empty name" },
		{ ".", 0, NULL, "empty name" },
		{ "..", 0, NULL, "empty label" },
		{ "a..b", 0, NULL, "empty label" },
		{ ".a", 0, NULL, "empty label" },
		{ "a..", 0, NULL, "empty label" },
		{ "-a.b", 0, NULL, "label starts with a hyphen" },
		{ "a.-b", 0, NULL, "label starts with a hyphen" },
		{ "a-.b", 0, NULL, "label ends with a hyphen" },
		{ "a.b-", 0, NULL, "label ends with a hyphen" },
		{ "a.b-.", 0, NULL, "label ends with a hyphen" },
		{ "-", 0, NULL, "label starts with a hyphen" },
		{ "a b", 0, NULL, "white space in name" },
		{ " a", 0, NULL, "white space in name" },
		{ "a\tb", 0, NULL, "white space in name" },
		{ "a.b\n", 0, NULL, "white space in name" },
		{ "a\0b", 3, NULL, "NUL byte in name" },
		{ "m\xc3\xbcnchen.de", 0, NULL,
		    "non-ASCII byte in name (use punycode)" },
		{ "a\x80", 0, NULL, "non-ASCII byte in name (use punycode)" },
		{ "a*b.c", 0, NULL,
		    BAD_CHAR },
		{ "*.c", 0, NULL,
		    BAD_CHAR },
		{ "a/b", 0, NULL,
		    BAD_CHAR },
		{ "a:80", 0, NULL,
		    BAD_CHAR },
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		check_norm(&cases[i]);
}

/* Writes labels of the given lengths, of 'a'..., joined by dots. */
static size_t
make_name(char *buf, const size_t *labels, size_t n, bool trailing_dot)
{
	size_t i, off = 0;

	for (i = 0; i < n; i++) {
		if (i > 0)
			buf[off++] = '.';
		memset(buf + off, 'A' + (int)i, labels[i]);
		off += labels[i];
	}
	if (trailing_dot)
		buf[off++] = '.';
	buf[off] = '\0';
	return off;
}

static void
test_normalize_lengths(void **state)
{
	static const size_t l63[] = { 63, 3 }, l64[] = { 64, 3 };
	static const size_t n253[] = { 63, 63, 63, 61 };
	static const size_t n254[] = { 63, 63, 63, 62 };
	char in[300], out[DNS_NAME_MAX + 1], lower[300];
	const char *why = NULL;
	size_t len, i;

	(void)state;
	len = make_name(in, l63, 2, false);
	assert_int_equal(len, 67);
	assert_true(dns_name_normalize(in, len, out, &why));
	assert_int_equal(strlen(out), 67);
	for (i = 0; i <= len; i++)
		lower[i] = (in[i] >= 'A' && in[i] <= 'Z') ? in[i] + 32 : in[i];
	assert_string_equal(out, lower);

	len = make_name(in, l64, 2, false);
	assert_false(dns_name_normalize(in, len, out, &why));
	assert_string_equal(why, "label longer than 63 bytes");
	/* A long last label is caught too. */
	len = make_name(in, (const size_t[]){ 3, 64 }, 2, false);
	assert_false(dns_name_normalize(in, len, out, &why));
	assert_string_equal(why, "label longer than 63 bytes");

	len = make_name(in, n253, 4, false);
	assert_int_equal(len, 253);
	assert_true(dns_name_normalize(in, len, out, &why));
	assert_int_equal(strlen(out), 253);
	/* 254 bytes with the trailing dot is still a 253-byte name. */
	len = make_name(in, n253, 4, true);
	assert_int_equal(len, 254);
	assert_true(dns_name_normalize(in, len, out, &why));
	assert_int_equal(strlen(out), 253);

	len = make_name(in, n254, 4, false);
	assert_int_equal(len, 254);
	assert_false(dns_name_normalize(in, len, out, &why));
	assert_string_equal(why, "name longer than 253 bytes");
	len = make_name(in, n254, 4, true);
	assert_false(dns_name_normalize(in, len, out, &why));
	assert_string_equal(why, "name longer than 253 bytes");

	/* why may be NULL. */
	assert_false(dns_name_normalize("a..b", 4, out, NULL));
}

static void
test_match(void **state)
{
	static const struct {
		const char	*name;
		const char	*pattern;
		bool		 wildcard;
		bool		 want;
	} cases[] = {
		{ "example.com", "example.com", false, true },
		{ "a.example.com", "example.com", false, false },
		{ "example.com", "a.example.com", false, false },
		{ "example.co", "example.com", false, false },
		{ "a.example.com", "example.com", true, true },
		{ "x.y.example.com", "example.com", true, true },
		{ "example.com", "example.com", true, false },
		{ "badexample.com", "example.com", true, false },
		{ "a.badexample.com", "example.com", true, false },
		{ "xexample.com", "example.com", true, false },
		{ "com", "example.com", true, false },
		{ "example.com.evil", "example.com", true, false },
		{ "a.com", "com", true, true },
		{ "com", "com", true, false },
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		if (dns_name_match(cases[i].name, cases[i].pattern,
		    cases[i].wildcard) != cases[i].want)
			fail_msg("match(\"%s\", \"%s\", %d) != %d",
			    cases[i].name, cases[i].pattern,
			    cases[i].wildcard, cases[i].want);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_normalize_valid),
		cmocka_unit_test(test_normalize_invalid),
		cmocka_unit_test(test_normalize_lengths),
		cmocka_unit_test(test_match),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
