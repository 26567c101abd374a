/* test_suggest.c: `sluice policy suggest`'s pure part, rows in, exact policy text out. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gateway/cli.h"
#include "gateway/policy.h"

#define N(a)	(sizeof(a) / sizeof((a)[0]))

/* The policy text sluice prints for these domain and cidr lines. */
static char *
expect_policy(const char *const *domains, size_t nd,
    const char *const *cidrs, size_t nc)
{
	static char buf[8192];
	size_t i, o = 0;

	buf[0] = '\0';
#define OUT(...)	o += (size_t)snprintf(buf + o, sizeof(buf) - o, __VA_ARGS__)
	OUT("{\n");
	if (nd > 0) {
		OUT("  \"network\": {\n    \"allowedDomains\": [\n");
		for (i = 0; i < nd; i++)
			OUT("      \"%s\"%s\n", domains[i], i + 1 < nd ? "," : "");
		OUT("    ]\n  },\n");
	}
	OUT("  \"sluice\": {\n    \"mode\": \"enforce\"%s\n", nc > 0 ? "," : "");
	if (nc > 0) {
		OUT("    \"allowedCidrs\": [\n");
		for (i = 0; i < nc; i++)
			OUT("      \"%s\"%s\n", cidrs[i], i + 1 < nc ? "," : "");
		OUT("    ]\n");
	}
	OUT("  }\n}\n");
#undef OUT
	assert_true(o < sizeof(buf));
	return buf;
}

/* The warnings joined by newlines ("" for none). */
static char *
joined_warnings(const struct suggestion *s)
{
	static char buf[8192];
	size_t i, o = 0;

	buf[0] = '\0';
	for (i = 0; i < s->nwarnings; i++)
		o += (size_t)snprintf(buf + o, sizeof(buf) - o, "%s%s",
		    i > 0 ? "\n" : "", s->warnings[i]);
	assert_true(o < sizeof(buf));
	return buf;
}

/* The text must also be a policy sluice accepts, with the same counts. */
static void
assert_policy_ok(const struct suggestion *s)
{
	struct policy *p;
	char err[512];

	p = policy_parse(s->json, strlen(s->json), "suggested", err,
	    sizeof(err));
	if (p == NULL)
		fail_msg("the suggestion does not parse: %s\n%s", err,
		    s->json);
	assert_int_equal(p->mode, POLICY_ENFORCE);
	assert_int_equal(p->nallowed, s->ndomains);
	assert_int_equal(p->ncidrs, s->ncidrs);
	assert_int_equal(p->ndenied, 0);
	policy_free(p);
}

static struct suggestion *
run(const struct suggest_name *names, size_t nn,
    const struct suggest_addr *addrs, size_t na, bool strict)
{
	struct suggestion *s;

	s = suggest_policy(names, nn, addrs, na, strict);
	assert_non_null(s);
	assert_non_null(s->json);
	assert_policy_ok(s);
	return s;
}

static void
test_nothing_seen(void **state)
{
	struct suggestion *s;

	(void)state;
	s = run(NULL, 0, NULL, 0, false);
	assert_string_equal(s->json,
	    "{\n  \"sluice\": {\n    \"mode\": \"enforce\"\n  }\n}\n");
	assert_int_equal(s->nwarnings, 0);
	assert_int_equal(s->ndomains, 0);
	assert_int_equal(s->ncidrs, 0);
	suggest_free(s);
}

static void
test_port_forms(void **state)
{
	static const struct suggest_name names[] = {
		{ "mix.test", 8443 }, { "a.test", 443 }, { "a.test", 0 },
		{ "b.test", 80 }, { "c.test", 0 }, { "db.test", 0 },
		{ "db.test", 5432 }, { "mix.test", 443 }, { "mix.test", 22 },
		{ "mix.test", 0 }, { "web.test", 80 }, { "web.test", 443 },
	};
	static const char *const want[] = {
		"a.test", "b.test", "c.test", "db.test:5432", "mix.test",
		"mix.test:22", "mix.test:8443", "web.test",
	};
	struct suggestion *s;

	(void)state;
	s = run(names, N(names), NULL, 0, false);
	assert_string_equal(s->json, expect_policy(want, N(want), NULL, 0));
	assert_string_equal(joined_warnings(s), "");
	assert_int_equal(s->ndomains, N(want));
	suggest_free(s);
}

static void
test_normalisation(void **state)
{
	static const struct suggest_name names[] = {
		{ "A.Test.", 443 }, { "a.test", 443 }, { "API.Example.COM.", 0 },
		{ "api.example.com", 443 }, { "Svc_1.Example.com", 0 },
		{ "", 0 }, { NULL, 0 },
	};
	static const char *const want[] = {
		"api.example.com", "svc_1.example.com", "a.test",
	};
	struct suggestion *s;

	(void)state;
	s = run(names, N(names), NULL, 0, false);
	assert_string_equal(s->json, expect_policy(want, N(want), NULL, 0));
	assert_string_equal(joined_warnings(s), "");
	suggest_free(s);
}

static void
test_invalid_names(void **state)
{
	static const struct suggest_name names[] = {
		{ "caf\xc3\xa9.test", 443 }, { "ok.test", 443 },
		{ "bad..test", 0 }, { "sp ace.test", 0 },
		{ "caf\xc3\xa9.test", 0 },	/* warned once */
		{ "192.0.2.10", 80 }, { "-x.test", 0 },
		{ "xn--caf-dma.test", 443 },	/* punycode is fine */
		{ "l\n.test", 0 },
	};
	static const char *const want[] = { "ok.test", "xn--caf-dma.test" };
	struct suggestion *s;

	(void)state;
	s = run(names, N(names), NULL, 0, false);
	assert_string_equal(s->json, expect_policy(want, N(want), NULL, 0));
	assert_string_equal(joined_warnings(s),
	    "caf\\xc3\\xa9.test: not ASCII (an internationalised name goes "
	    "into a policy in punycode, xn--...); left out\n"
	    "bad..test: empty label; left out\n"
	    "sp\\x20ace.test: white space in name; left out\n"
	    "192.0.2.10: an address, not a name; left out\n"
	    "-x.test: label starts with a hyphen; left out\n"
	    "l\\x0a.test: white space in name; left out");
	suggest_free(s);
}

static void
test_invalid_names_bounded(void **state)
{
	struct suggest_name names[30];
	char raw[30][16];
	struct suggestion *s;
	size_t i;

	(void)state;
	for (i = 0; i < N(names); i++) {
		snprintf(raw[i], sizeof(raw[i]), "bad%zu..test", i);
		names[i].name = raw[i];
		names[i].port = 443;
	}
	s = run(names, N(names), NULL, 0, false);
	assert_int_equal(s->nwarnings, 21);
	assert_string_equal(s->warnings[0], "bad0..test: empty label; left out");
	assert_string_equal(s->warnings[19],
	    "bad19..test: empty label; left out");
	assert_string_equal(s->warnings[20],
	    "and 10 more invalid names or addresses left out");
	assert_int_equal(s->ndomains, 0);
	suggest_free(s);
}

static void
test_wildcard_threshold(void **state)
{
	static const struct suggest_name three[] = {
		{ "a.cdn.example.com", 443 }, { "b.cdn.example.com", 443 },
		{ "c.cdn.example.com", 0 },
	};
	static const char *const want3[] = {
		"a.cdn.example.com", "b.cdn.example.com", "c.cdn.example.com",
	};
	static const struct suggest_name four[] = {
		{ "a.cdn.example.com", 443 }, { "B.cdn.example.com.", 443 },
		{ "c.cdn.example.com", 0 }, { "d.cdn.example.com", 8443 },
		{ "deep.d.cdn.example.com", 9000 },	/* under it: folded in */
		{ "cdn.example.com", 443 },	/* the parent stays */
		{ "b.cdn.example.com", 443 },	/* a duplicate is no sibling */
		{ "www.example.com", 443 },
	};
	static const char *const want4[] = {
		"cdn.example.com", "www.example.com", "*.cdn.example.com",
		"*.cdn.example.com:8443", "*.cdn.example.com:9000",
	};
	struct suggestion *s;

	(void)state;
	assert_int_equal(SUGGEST_WILDCARD_MIN, 4);
	s = run(three, N(three), NULL, 0, false);
	assert_string_equal(s->json, expect_policy(want3, N(want3), NULL, 0));
	suggest_free(s);

	s = run(four, N(four), NULL, 0, false);
	assert_string_equal(s->json, expect_policy(want4, N(want4), NULL, 0));
	assert_string_equal(joined_warnings(s), "");
	suggest_free(s);
}

static void
test_wildcard_nested(void **state)
{
	/* four under x.example.com; three (with x) under example.com */
	static const struct suggest_name names[] = {
		{ "a.x.example.com", 443 }, { "b.x.example.com", 443 },
		{ "c.x.example.com", 443 }, { "d.x.example.com", 443 },
		{ "p.example.com", 443 }, { "q.example.com", 443 },
		{ "x.example.com", 443 },
	};
	static const char *const want[] = {
		"p.example.com", "q.example.com", "x.example.com",
		"*.x.example.com",
	};
	/* one more under example.com: the broader wildcard takes all */
	struct suggest_name more[N(names) + 1];
	static const char *const want_more[] = { "*.example.com" };
	struct suggestion *s;

	(void)state;
	s = run(names, N(names), NULL, 0, false);
	assert_string_equal(s->json, expect_policy(want, N(want), NULL, 0));
	suggest_free(s);

	memcpy(more, names, sizeof(names));
	more[N(names)].name = "r.example.com";
	more[N(names)].port = 443;
	s = run(more, N(more), NULL, 0, false);
	assert_string_equal(s->json,
	    expect_policy(want_more, N(want_more), NULL, 0));
	suggest_free(s);
}

static void
test_many_wildcards(void **state)
{
	/* 64 names, 4 under each of 16 parents: as many wildcards */
	struct suggest_name names[64];
	char raw[64][32], want[16][32];
	const char *wantp[16];
	struct suggestion *s;
	size_t i;

	(void)state;
	for (i = 0; i < N(names); i++) {
		snprintf(raw[i], sizeof(raw[i]), "h%zu.p%02zu.example.com",
		    i % 4, i / 4);
		names[i].name = raw[i];
		names[i].port = 443;
	}
	for (i = 0; i < N(want); i++) {
		snprintf(want[i], sizeof(want[i]), "*.p%02zu.example.com", i);
		wantp[i] = want[i];
	}
	s = run(names, N(names), NULL, 0, false);
	assert_string_equal(s->json, expect_policy(wantp, N(wantp), NULL, 0));
	suggest_free(s);
}

static void
test_no_wildcard_for_shared_parents(void **state)
{
	static const struct suggest_name names[] = {
		{ "a.com", 443 }, { "b.com", 443 }, { "c.com", 443 },
		{ "d.com", 443 },
		{ "a.co.uk", 443 }, { "b.co.uk", 443 }, { "c.co.uk", 443 },
		{ "d.co.uk", 443 },
		{ "a.github.io", 443 }, { "b.github.io", 443 },
		{ "c.github.io", 443 }, { "d.github.io", 443 },
		{ "a.pages.x.amazonaws.com", 443 },
		{ "b.pages.x.amazonaws.com", 443 },
		{ "c.pages.x.amazonaws.com", 443 },
		{ "d.pages.x.amazonaws.com", 443 },
		{ "api.github.com", 443 }, { "codeload.github.com", 443 },
		{ "objects.github.com", 443 }, { "uploads.github.com", 443 },
	};
	static const char *const want[] = {
		"a.pages.x.amazonaws.com", "b.pages.x.amazonaws.com",
		"c.pages.x.amazonaws.com", "d.pages.x.amazonaws.com",
		"a.co.uk", "a.github.io", "api.github.com", "b.co.uk",
		"b.github.io", "c.co.uk", "c.github.io", "codeload.github.com",
		"d.co.uk", "d.github.io", "objects.github.com",
		"uploads.github.com",
		"a.com", "b.com", "c.com", "d.com",
	};
	struct suggestion *s;

	(void)state;
	s = run(names, N(names), NULL, 0, false);
	/* github.com holds gist.github.com: "*.github.com" would admit it */
	assert_string_equal(s->json, expect_policy(want, N(want), NULL, 0));
	assert_string_equal(joined_warnings(s), "");
	suggest_free(s);
}

static const struct suggest_name flagged_names[] = {
	{ "pastebin.com", 443 }, { "gist.github.com", 443 },
	{ "bucket.s3.amazonaws.com", 443 },
	{ "b2.s3.eu-west-1.amazonaws.com", 443 },
	{ "abc.ngrok-free.app", 443 }, { "dns.google", 443 },
	{ "doh.example.net", 443 }, { "webhook.site", 443 },
	{ "x.blob.core.windows.net", 443 }, { "api.example.org", 443 },
};

static void
test_flags_kept(void **state)
{
	static const char *const want[] = {
		"b2.s3.eu-west-1.amazonaws.com", "x.blob.core.windows.net",
		"bucket.s3.amazonaws.com", "abc.ngrok-free.app",
		"api.example.org", "doh.example.net", "gist.github.com",
		"dns.google", "pastebin.com", "webhook.site",
	};
	struct suggestion *s;

	(void)state;
	s = run(flagged_names, N(flagged_names), NULL, 0, false);
	assert_string_equal(s->json, expect_policy(want, N(want), NULL, 0));
	assert_string_equal(joined_warnings(s),
	    "b2.s3.eu-west-1.amazonaws.com: looks like public object storage "
	    "— anyone can own a bucket there and read what the sandbox "
	    "uploads\n"
	    "x.blob.core.windows.net: looks like public object storage — "
	    "anyone can own a bucket there and read what the sandbox "
	    "uploads\n"
	    "bucket.s3.amazonaws.com: looks like public object storage — "
	    "anyone can own a bucket there and read what the sandbox "
	    "uploads\n"
	    "abc.ngrok-free.app: looks like a public tunnel — it relays to "
	    "whoever runs the other end\n"
	    "doh.example.net: looks like a DNS-over-HTTPS resolver — it "
	    "resolves any name past sluice's resolver and carries data out "
	    "in its queries\n"
	    "gist.github.com: looks like a public paste service — anything "
	    "the sandbox sends there is readable by anyone\n"
	    "dns.google: looks like a DNS-over-HTTPS resolver — it resolves "
	    "any name past sluice's resolver and carries data out in its "
	    "queries\n"
	    "pastebin.com: looks like a public paste service — anything the "
	    "sandbox sends there is readable by anyone\n"
	    "webhook.site: looks like a webhook catcher — anything the "
	    "sandbox sends there is readable by whoever holds the URL");
	suggest_free(s);
}

static void
test_flags_strict(void **state)
{
	static const char *const want[] = { "api.example.org" };
	struct suggestion *s;
	size_t i;

	(void)state;
	s = run(flagged_names, N(flagged_names), NULL, 0, true);
	assert_string_equal(s->json, expect_policy(want, N(want), NULL, 0));
	assert_int_equal(s->nwarnings, 9);
	for (i = 0; i < s->nwarnings; i++) {
		const char *w = s->warnings[i];
		const char *tail = " (left out: --strict)";

		assert_true(strlen(w) > strlen(tail));
		assert_string_equal(w + strlen(w) - strlen(tail), tail);
	}
	assert_string_equal(s->warnings[7], "pastebin.com: looks like a "
	    "public paste service — anything the sandbox sends there is "
	    "readable by anyone (left out: --strict)");
	suggest_free(s);
}

static void
test_flagged_name_blocks_wildcard(void **state)
{
	static const struct suggest_name names[] = {
		{ "a.example.org", 443 }, { "b.example.org", 443 },
		{ "c.example.org", 443 }, { "d.example.org", 443 },
		{ "doh.example.org", 443 },
	};
	static const char *const want[] = {
		"a.example.org", "b.example.org", "c.example.org",
		"d.example.org",
	};
	struct suggestion *s;

	(void)state;
	/* "*.example.org" would admit doh.example.org even under --strict */
	s = run(names, N(names), NULL, 0, true);
	assert_string_equal(s->json, expect_policy(want, N(want), NULL, 0));
	assert_int_equal(s->nwarnings, 1);
	suggest_free(s);
}

static void
test_addresses(void **state)
{
	static const struct suggest_addr addrs[] = {
		{ "198.51.100.7", 5432 }, { "9.9.9.9", 443 },
		{ "10.1.2.3", 22 }, { "198.51.100.7", 22 },
		{ "198.51.100.7", 5432 },	/* a duplicate */
		{ "169.254.169.254", 80 }, { "127.0.0.1", 8080 },
		{ "203.0.113.5", 53 }, { "203.0.113.5", 853 },
		{ "not-an-address", 80 }, { "1.2.3.4", 0 },
		{ "192.168.1.1", 443 }, { "100.100.100.200", 80 },
	};
	static const char *const want[] = {
		"9.9.9.9:443", "10.1.2.3:22", "100.100.100.200:80",
		"127.0.0.1:8080", "169.254.169.254:80", "192.168.1.1:443",
		"198.51.100.7:22", "198.51.100.7:5432",
	};
	static const char *const want_strict[] = {
		"9.9.9.9:443", "198.51.100.7:22", "198.51.100.7:5432",
	};
	static const char warnings[] =
	    "not-an-address: not an IPv4 address; left out\n"
	    "1.2.3.4: port 0; left out\n"
	    "10.1.2.3:22: a private address (10.0.0.0/8), not the public "
	    "internet — check that the sandbox should reach it\n"
	    "100.100.100.200:80: a cloud metadata service — it hands out the "
	    "host's credentials\n"
	    "127.0.0.1:8080: a loopback address (127.0.0.0/8), not the "
	    "public internet — check that the sandbox should reach it\n"
	    "169.254.169.254:80: the cloud metadata service — it hands out "
	    "the host's credentials\n"
	    "192.168.1.1:443: a private address (192.168.0.0/16), not the "
	    "public internet — check that the sandbox should reach it\n"
	    "203.0.113.5:53: DNS and DNS over TLS go only to the gateway's "
	    "resolver, no policy allows them; left out\n"
	    "203.0.113.5:853: DNS and DNS over TLS go only to the gateway's "
	    "resolver, no policy allows them; left out";
	struct suggestion *s;

	(void)state;
	s = run(NULL, 0, addrs, N(addrs), false);
	assert_string_equal(s->json, expect_policy(NULL, 0, want, N(want)));
	assert_string_equal(joined_warnings(s), warnings);
	suggest_free(s);

	s = run(NULL, 0, addrs, N(addrs), true);
	assert_string_equal(s->json,
	    expect_policy(NULL, 0, want_strict, N(want_strict)));
	assert_int_equal(s->nwarnings, 9);
	assert_string_equal(s->warnings[2], "10.1.2.3:22: a private address "
	    "(10.0.0.0/8), not the public internet — check that the sandbox "
	    "should reach it (left out: --strict)");
	suggest_free(s);
}

static void
test_dns_ports_on_names(void **state)
{
	static const struct suggest_name names[] = {
		{ "ns.test", 53 }, { "ns.test", 0 }, { "dot.test", 853 },
	};
	/* resolving them is still allowed; the port never is */
	static const char *const want[] = { "dot.test", "ns.test" };
	struct suggestion *s;

	(void)state;
	s = run(names, N(names), NULL, 0, false);
	assert_string_equal(s->json, expect_policy(want, N(want), NULL, 0));
	assert_string_equal(joined_warnings(s),
	    "dot.test:853: DNS and DNS over TLS go only to the gateway's "
	    "resolver, no policy allows them; left out\n"
	    "ns.test:53: DNS and DNS over TLS go only to the gateway's "
	    "resolver, no policy allows them; left out");
	suggest_free(s);
}

static void
test_ordering(void **state)
{
	static const struct suggest_name names[] = {
		{ "z.test", 443 }, { "b.a.example.com", 443 },
		{ "example.com", 443 }, { "m.example.com", 443 },
		{ "1.w.test", 443 }, { "2.w.test", 443 }, { "3.w.test", 443 },
		{ "4.w.test", 443 },
		{ "1.v.x.test", 443 }, { "2.v.x.test", 443 },
		{ "3.v.x.test", 443 }, { "4.v.x.test", 443 },
	};
	static const char *const want[] = {
		"b.a.example.com", "m.example.com", "example.com", "z.test",
		"*.v.x.test", "*.w.test",
	};
	struct suggestion *s;

	(void)state;
	s = run(names, N(names), NULL, 0, false);
	assert_string_equal(s->json, expect_policy(want, N(want), NULL, 0));
	suggest_free(s);
}

static void
test_both_lists(void **state)
{
	static const struct suggest_name names[] = {
		{ "a.test", 443 }, { "db.test", 5432 },
	};
	static const struct suggest_addr addrs[] = {
		{ "203.0.113.66", 4444 },
	};
	struct suggestion *s;

	(void)state;
	s = run(names, N(names), addrs, N(addrs), false);
	assert_string_equal(s->json,
	    "{\n"
	    "  \"network\": {\n"
	    "    \"allowedDomains\": [\n"
	    "      \"a.test\",\n"
	    "      \"db.test:5432\"\n"
	    "    ]\n"
	    "  },\n"
	    "  \"sluice\": {\n"
	    "    \"mode\": \"enforce\",\n"
	    "    \"allowedCidrs\": [\n"
	    "      \"203.0.113.66:4444\"\n"
	    "    ]\n"
	    "  }\n"
	    "}\n");
	assert_int_equal(s->ndomains, 2);
	assert_int_equal(s->ncidrs, 1);
	suggest_free(s);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_nothing_seen),
		cmocka_unit_test(test_port_forms),
		cmocka_unit_test(test_normalisation),
		cmocka_unit_test(test_invalid_names),
		cmocka_unit_test(test_invalid_names_bounded),
		cmocka_unit_test(test_wildcard_threshold),
		cmocka_unit_test(test_wildcard_nested),
		cmocka_unit_test(test_many_wildcards),
		cmocka_unit_test(test_no_wildcard_for_shared_parents),
		cmocka_unit_test(test_flags_kept),
		cmocka_unit_test(test_flags_strict),
		cmocka_unit_test(test_flagged_name_blocks_wildcard),
		cmocka_unit_test(test_addresses),
		cmocka_unit_test(test_dns_ports_on_names),
		cmocka_unit_test(test_ordering),
		cmocka_unit_test(test_both_lists),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
