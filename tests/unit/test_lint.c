/* test_lint.c: `sluice policy check`'s warnings, policy text in, exact lines out. */
#include <errno.h>
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

/* The messages, spelled out: a changed word has to change a test. */
#define STORAGE	"looks like public object storage — anyone can own a " \
	"bucket there and read what the sandbox uploads"
#define PASTE	"looks like a public paste service — anything the sandbox " \
	"sends there is readable by anyone"
#define FILEDROP "looks like a public file drop — anything the sandbox " \
	"uploads there can be downloaded by anyone"
#define TUNNEL	"looks like a public tunnel — it relays to whoever runs " \
	"the other end"
#define DOH	"looks like a DNS-over-HTTPS resolver — it resolves any " \
	"name past sluice's resolver and carries data out in its queries"
#define WEBHOOK	"looks like a webhook catcher — anything the sandbox sends " \
	"there is readable by whoever holds the URL"
#define GITHUB_API "serves the GitHub API — it creates gists, readable by " \
	"anyone, from whatever the sandbox sends"
#define SHARED(parent) "anyone can host content under " parent ": the " \
	"sandbox can send data to an attacker's bucket or site there"
#define SUFFIX(s) "covers every name under " s ", a public suffix: anyone " \
	"can register a domain there and receive what the sandbox sends"
#define INTERNAL ", not the public internet: the sandbox can reach " \
	"internal hosts and services there"
#define METADATA "includes the cloud metadata service 169.254.169.254: it " \
	"hands out the host's credentials"
#define METADATA_ALI "includes a cloud metadata service (100.100.100.200): " \
	"it hands out the host's credentials"
#define POOL_IN "never reachable: sluice always denies the sandbox pool " \
	"10.213.0.0/16 (sluiced's default --pool)"
#define POOL_OVER "covers the sandbox pool 10.213.0.0/16 (sluiced's " \
	"default --pool): sluice always denies it, so that part is never " \
	"reachable"

static struct policy *
parse_ok(const char *json)
{
	char err[512] = "";
	struct policy *p;

	p = policy_parse(json, strlen(json), "p.json", err, sizeof(err));
	if (p == NULL)
		fail_msg("refused: %s\n%s", err, json);
	return p;
}

/* The warnings about json as "path: \"entry\": message" lines. */
static char *
lint_lines(const char *json)
{
	static char buf[16384];
	struct lint_warning *w;
	struct policy *p;
	size_t n, i, o = 0;

	p = parse_ok(json);
	assert_int_equal(lint_policy(p, &w, &n), 0);
	buf[0] = '\0';
	for (i = 0; i < n; i++)
		o += (size_t)snprintf(buf + o, sizeof(buf) - o, "%s: \"%s\": %s\n",
		    w[i].path, w[i].entry, w[i].message);
	assert_true(o < sizeof(buf));
	if (n == 0)
		assert_null(w);
	lint_free(w, n);
	policy_free(p);
	return buf;
}

/* The lines about one allowedDomains entry alone. */
static char *
lint_domain(const char *entry)
{
	char json[512];

	snprintf(json, sizeof(json),
	    "{\"network\": {\"allowedDomains\": [\"%s\"]}}", entry);
	return lint_lines(json);
}

static char *
lint_cidr(const char *entry)
{
	char json[512];

	snprintf(json, sizeof(json),
	    "{\"sluice\": {\"allowedCidrs\": [\"%s\"]}}", entry);
	return lint_lines(json);
}

/* One line about "network.allowedDomains[0]". */
static void
expect_domain(const char *entry, const char *message)
{
	char want[1024];

	snprintf(want, sizeof(want), "network.allowedDomains[0]: \"%s\": %s\n",
	    entry, message);
	assert_string_equal(lint_domain(entry), want);
}

static void
expect_cidr(const char *entry, const char *message)
{
	char want[1024];

	snprintf(want, sizeof(want), "sluice.allowedCidrs[0]: \"%s\": %s\n",
	    entry, message);
	assert_string_equal(lint_cidr(entry), want);
}

static void
test_readme_example(void **state)
{
	(void)state;
	assert_string_equal(lint_lines(
	    "{\n"
	    "  \"network\": {\n"
	    "    \"allowedDomains\": [\"api.example.com\", \"*.pkg.example.org\","
	    " \"git.example.com:22\"],\n"
	    "    \"deniedDomains\": [\"uploads.pkg.example.org\"]\n"
	    "  },\n"
	    "  \"sluice\": {\n"
	    "    \"mode\": \"enforce\",\n"
	    "    \"allowedCidrs\": [\"203.0.113.0/24:443\", "
	    "\"198.51.100.7:5432\", \"192.0.2.0/24:8000-8080\", "
	    "\"192.0.2.9\"]\n"
	    "  }\n"
	    "}\n"), "");
}

static void
test_deploy_example(void **state)
{
	(void)state;
	assert_string_equal(lint_lines(
	    "{\n"
	    "\t\"network\": {\n"
	    "\t\t\"allowedDomains\": [\"a.test\", \"*.b.test\"]\n"
	    "\t},\n"
	    "\t\"sluice\": {\n"
	    "\t\t\"mode\": \"enforce\",\n"
	    "\t\t\"allowedCidrs\": [\"192.0.2.10:443\", \"192.0.2.20:80\", "
	    "\"198.51.100.7:5432\"]\n"
	    "\t}\n"
	    "}\n"), "");
}

/* Ordinary entries near the flagged ones stay quiet. */
static void
test_ordinary_names(void **state)
{
	static const char *const quiet[] = {
		"github.com", "*.pkg.github.com:8443", "raw.githubusercontent.com",
		"myorg.github.io", "deb.debian.org", "*.debian.org",
		"registry.npmjs.org", "*.pypi.org", "files.pythonhosted.org",
		"*.example.co.uk", "*.example.com.au", "*.corp.example",
		"*.b.test", "pastebin.com.example.net", "notpastebin.com",
		"dohnut.example.com", "dns.example.com", "google.com",
		"*.googlesource.com", "amazonaws.com", "s3-example.com",
		"*.gitlab.com", "*.example.io", "*.co.example", "*.comm.uk",
	};
	size_t i;

	(void)state;
	for (i = 0; i < N(quiet); i++)
		if (strcmp(lint_domain(quiet[i]), "") != 0)
			fail_msg("%s: %s", quiet[i], lint_domain(quiet[i]));
	assert_string_equal(lint_lines("{}"), "");
}

static void
test_wildcards_over_shared_hosting(void **state)
{
	static const struct {
		const char	*entry;
		const char	*message;
	} cases[] = {
		{ "*.amazonaws.com", SHARED("amazonaws.com") },
		{ "*.s3.amazonaws.com", STORAGE },
		{ "*.s3.eu-west-1.amazonaws.com", STORAGE },
		{ "*.execute-api.us-east-1.amazonaws.com",
		    SHARED("amazonaws.com") },
		{ "*.storage.googleapis.com", STORAGE },
		{ "*.googleapis.com", SHARED("googleapis.com") },
		{ "*.blob.core.windows.net", STORAGE },
		{ "*.githubusercontent.com", SHARED("githubusercontent.com") },
		{ "*.github.io", SHARED("github.io") },
		{ "*.gitlab.io", SHARED("gitlab.io") },
		{ "*.herokuapp.com", SHARED("herokuapp.com") },
		{ "*.vercel.app", SHARED("vercel.app") },
		{ "*.netlify.app", SHARED("netlify.app") },
		{ "*.pages.dev", SHARED("pages.dev") },
		{ "*.workers.dev", SHARED("workers.dev") },
		{ "*.cloudfront.net", SHARED("cloudfront.net") },
		{ "*.azurewebsites.net", SHARED("azurewebsites.net") },
		{ "*.appspot.com", SHARED("appspot.com") },
		{ "*.firebaseapp.com", SHARED("firebaseapp.com") },
		{ "*.ngrok.io", TUNNEL },
		{ "*.ngrok-free.app", TUNNEL },
		{ "*.trycloudflare.com", TUNNEL },
		{ "*.loca.lt", TUNNEL },
		{ "*.serveo.net", TUNNEL },
		/* with a port, in any case: still open */
		{ "*.GitHub.IO.:8443", SHARED("github.io") },
	};
	size_t i;

	(void)state;
	for (i = 0; i < N(cases); i++)
		expect_domain(cases[i].entry, cases[i].message);
}

static void
test_wildcards_over_public_suffixes(void **state)
{
	(void)state;
	expect_domain("*.com", SUFFIX("com"));
	expect_domain("*.io", SUFFIX("io"));
	expect_domain("*.co.uk", SUFFIX("co.uk"));
	expect_domain("*.com.au", SUFFIX("com.au"));
	expect_domain("*.org.uk:8080", SUFFIX("org.uk"));
	expect_domain("*.ac.jp", SUFFIX("ac.jp"));
}

static void
test_relay_names(void **state)
{
	static const struct {
		const char	*entry;
		const char	*message;
	} cases[] = {
		{ "pastebin.com", PASTE },
		{ "gist.github.com", PASTE },
		{ "api.github.com", GITHUB_API },
		{ "hastebin.com", PASTE },
		{ "transfer.sh", FILEDROP },
		{ "file.io", FILEDROP },
		{ "webhook.site", WEBHOOK },
		{ "requestbin.net", WEBHOOK },
		{ "pipedream.net", WEBHOOK },
		{ "eo1a2b.m.pipedream.net", WEBHOOK },
		{ "dns.google", DOH },
		{ "cloudflare-dns.com", DOH },
		{ "mozilla.cloudflare-dns.com", DOH },
		{ "dns.quad9.net", DOH },
		{ "doh.opendns.com", DOH },
		{ "dns.nextdns.io", DOH },
		{ "s3.amazonaws.com", STORAGE },
		{ "PasteBin.com.:8443", PASTE },
		/* and wildcards over them */
		{ "*.pastebin.com", PASTE },
		{ "*.cloudflare-dns.com", DOH },
		{ "*.github.com", "covers gist.github.com, which " PASTE },
		{ "*.quad9.net", "covers dns.quad9.net, which " DOH },
		{ "*.nextdns.io", "covers dns.nextdns.io, which " DOH },
		{ "*.site", SUFFIX("site") },
	};
	size_t i;

	(void)state;
	for (i = 0; i < N(cases); i++)
		expect_domain(cases[i].entry, cases[i].message);
}

/* What deniedDomains takes back is not open. */
static void
test_denied_takes_back(void **state)
{
	(void)state;
	assert_string_equal(lint_lines(
	    "{\"network\": {\"allowedDomains\": [\"*.github.com\"],"
	    " \"deniedDomains\": [\"gist.github.com\"]}}"),
	    "network.allowedDomains[0]: \"*.github.com\": covers "
	    "api.github.com, which " GITHUB_API "\n");
	assert_string_equal(lint_lines(
	    "{\"network\": {\"allowedDomains\": [\"*.github.com\"],"
	    " \"deniedDomains\": [\"gist.github.com\", \"API.github.com.\"]}}"),
	    "");
	assert_string_equal(lint_lines(
	    "{\"network\": {\"allowedDomains\": [\"pastebin.com\","
	    " \"*.s3.amazonaws.com\", \"*.x.github.io\", \"*.github.io\"],"
	    " \"deniedDomains\": [\"*.pastebin.com\", \"pastebin.com\","
	    " \"*.amazonaws.com\", \"*.x.github.io\"]}}"),
	    "network.allowedDomains[3]: \"*.github.io\": "
	    SHARED("github.io") "\n");
	/* a denied wildcard does not deny its own name */
	assert_string_equal(lint_lines(
	    "{\"network\": {\"allowedDomains\": [\"pastebin.com\"],"
	    " \"deniedDomains\": [\"*.pastebin.com\"]}}"),
	    "network.allowedDomains[0]: \"pastebin.com\": " PASTE "\n");
}

/* A bare "*" in deniedDomains is the usual default-deny: no warning. */
static void
test_bare_star_denied(void **state)
{
	(void)state;
	assert_string_equal(lint_lines(
	    "{\"network\": {\"allowedDomains\": [\"api.example.com\","
	    " \"*.pkg.example.org\"], \"deniedDomains\": [\"*\"]}}"), "");
	assert_string_equal(lint_lines(
	    "{\"network\": {\"deniedDomains\": [\"*\"]},"
	    " \"sluice\": {\"allowedCidrs\": [\"192.0.2.0/24:8000-8080\"]}}"),
	    "");
}

static void
test_cidrs_non_public(void **state)
{
	(void)state;
	assert_string_equal(lint_cidr("10.0.0.0/8:443"),
	    "sluice.allowedCidrs[0]: \"10.0.0.0/8:443\": reaches private "
	    "address space (10.0.0.0/8)" INTERNAL "\n"
	    "sluice.allowedCidrs[0]: \"10.0.0.0/8:443\": " POOL_OVER "\n");
	expect_cidr("10.1.2.3:5432", "reaches private address space "
	    "(10.0.0.0/8)" INTERNAL);
	expect_cidr("172.16.0.0/12", "reaches private address space "
	    "(172.16.0.0/12)" INTERNAL);
	expect_cidr("172.31.255.255", "reaches private address space "
	    "(172.16.0.0/12)" INTERNAL);
	expect_cidr("192.168.0.0/16", "reaches private address space "
	    "(192.168.0.0/16)" INTERNAL);
	expect_cidr("192.168.1.0/24:80", "reaches private address space "
	    "(192.168.0.0/16)" INTERNAL);
	expect_cidr("127.0.0.0/8", "reaches loopback space (127.0.0.0/8)"
	    INTERNAL);
	expect_cidr("127.0.0.1:8080", "reaches loopback space (127.0.0.0/8)"
	    INTERNAL);
	expect_cidr("100.64.0.0/16", "reaches shared address space "
	    "(100.64.0.0/10, carrier-grade NAT)" INTERNAL);
	expect_cidr("169.254.0.0/24", "reaches link-local space "
	    "(169.254.0.0/16)" INTERNAL);
	/* a prefix over two ranges: a line for each */
	assert_string_equal(lint_cidr("172.0.0.0/8"),
	    "sluice.allowedCidrs[0]: \"172.0.0.0/8\": reaches private address "
	    "space (172.16.0.0/12)" INTERNAL "\n");
	assert_string_equal(lint_cidr("160.0.0.0/4"),
	    "sluice.allowedCidrs[0]: \"160.0.0.0/4\": covers 268435456 "
	    "addresses, a cloud metadata service and non-public address space "
	    "among them: is that intended?\n");
	assert_string_equal(lint_cidr("168.0.0.0/5"),
	    "sluice.allowedCidrs[0]: \"168.0.0.0/5\": covers 134217728 "
	    "addresses, a cloud metadata service and non-public address space "
	    "among them: is that intended?\n");
	assert_string_equal(lint_cidr("160.0.0.0/8"), "");
}

static void
test_cidrs_metadata(void **state)
{
	(void)state;
	/* named once, not again as link-local */
	expect_cidr("169.254.169.254", METADATA);
	expect_cidr("169.254.169.254:80", METADATA);
	expect_cidr("169.254.169.254/32", METADATA);
	assert_string_equal(lint_cidr("169.254.0.0/16"),
	    "sluice.allowedCidrs[0]: \"169.254.0.0/16\": " METADATA "\n"
	    "sluice.allowedCidrs[0]: \"169.254.0.0/16\": reaches link-local "
	    "space (169.254.0.0/16)" INTERNAL "\n");
	expect_cidr("100.100.100.200:80", METADATA_ALI);
	assert_string_equal(lint_cidr("100.64.0.0/10"),
	    "sluice.allowedCidrs[0]: \"100.64.0.0/10\": " METADATA_ALI "\n"
	    "sluice.allowedCidrs[0]: \"100.64.0.0/10\": reaches shared address "
	    "space (100.64.0.0/10, carrier-grade NAT)" INTERNAL "\n");
}

static void
test_cidrs_wide(void **state)
{
	(void)state;
	expect_cidr("0.0.0.0/0", "covers 4294967296 addresses, a cloud "
	    "metadata service and non-public address space among them: is "
	    "that intended?");
	expect_cidr("0.0.0.0/0:443", "covers 4294967296 addresses, a cloud "
	    "metadata service and non-public address space among them: is "
	    "that intended?");
	expect_cidr("192.0.0.0/3", "covers 536870912 addresses, non-public "
	    "address space among them: is that intended?");
	expect_cidr("32.0.0.0/3", "covers 536870912 addresses: is that "
	    "intended?");
	expect_cidr("2.0.0.0/7", "covers 33554432 addresses: is that "
	    "intended?");
	assert_string_equal(lint_cidr("11.0.0.0/8"), "");
	assert_string_equal(lint_cidr("203.0.113.0/24:443"), "");
}

static void
test_cidrs_pool(void **state)
{
	(void)state;
	expect_cidr("10.213.0.0/16", POOL_IN);
	expect_cidr("10.213.0.6:22", POOL_IN);
	expect_cidr("10.213.128.0/17:80-90", POOL_IN);
	assert_string_equal(lint_cidr("10.212.0.0/15"),
	    "sluice.allowedCidrs[0]: \"10.212.0.0/15\": reaches private address "
	    "space (10.0.0.0/8)" INTERNAL "\n"
	    "sluice.allowedCidrs[0]: \"10.212.0.0/15\": " POOL_OVER "\n");
	assert_string_equal(lint_cidr("10.214.0.0/16"),
	    "sluice.allowedCidrs[0]: \"10.214.0.0/16\": reaches private address "
	    "space (10.0.0.0/8)" INTERNAL "\n");
}

/* Paths count entries as written; domains come before CIDRs. */
static void
test_paths_and_order(void **state)
{
	(void)state;
	assert_string_equal(lint_lines(
	    "{\"sluice\": {\"mode\": \"audit\", \"allowedCidrs\": "
	    "[\"192.0.2.1\", \"169.254.169.254:80\", \"198.51.100.0/24\","
	    " \"10.213.0.9\"]},"
	    " \"network\": {\"deniedDomains\": [\"x.example.com\"],"
	    " \"allowedDomains\": [\"a.example.com\", \"b.example.com:22\","
	    " \"*.github.io\", \"c.example.com\", \"webhook.site\"]}}"),
	    "network.allowedDomains[2]: \"*.github.io\": " SHARED("github.io")
	    "\n"
	    "network.allowedDomains[4]: \"webhook.site\": " WEBHOOK "\n"
	    "sluice.allowedCidrs[1]: \"169.254.169.254:80\": " METADATA "\n"
	    "sluice.allowedCidrs[3]: \"10.213.0.9\": " POOL_IN "\n");
}

static void
test_free_null(void **state)
{
	(void)state;
	lint_free(NULL, 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_readme_example),
		cmocka_unit_test(test_deploy_example),
		cmocka_unit_test(test_ordinary_names),
		cmocka_unit_test(test_wildcards_over_shared_hosting),
		cmocka_unit_test(test_wildcards_over_public_suffixes),
		cmocka_unit_test(test_relay_names),
		cmocka_unit_test(test_denied_takes_back),
		cmocka_unit_test(test_bare_star_denied),
		cmocka_unit_test(test_cidrs_non_public),
		cmocka_unit_test(test_cidrs_metadata),
		cmocka_unit_test(test_cidrs_wide),
		cmocka_unit_test(test_cidrs_pool),
		cmocka_unit_test(test_paths_and_order),
		cmocka_unit_test(test_free_null),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
