/* test_policy.c: policy parsing, error positions, and matching against a linear reference. */
#include <arpa/inet.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "dns/dns.h"
#include "gateway/policy.h"

/* An address in host order, and in network order as policy.h keeps it. */
#define HIP(a, b, c, d)	((uint32_t)(a) << 24 | (uint32_t)(b) << 16 | \
			    (uint32_t)(c) << 8 | (uint32_t)(d))
#define IP(a, b, c, d)	htonl(HIP(a, b, c, d))

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

static void
expect_err(const char *json, const char *want)
{
	char err[512] = "";
	struct policy *p;

	p = policy_parse(json, strlen(json), "p.json", err, sizeof(err));
	if (p != NULL) {
		policy_free(p);
		fail_msg("accepted: %s", json);
	}
	assert_string_equal(err, want);
}

static void
test_empty_object(void **state)
{
	struct policy *p;

	(void)state;
	p = parse_ok("{}");
	assert_int_equal(p->mode, POLICY_ENFORCE);
	assert_int_equal(p->ncidrs, 0);
	assert_null(p->cidrs);
	assert_int_equal(p->nallowed, 0);
	assert_int_equal(p->ndenied, 0);
	assert_string_equal(p->text, "{}");
	assert_int_equal(p->textlen, 2);
	/* printf %s '{}' | sha256sum */
	assert_string_equal(p->sha256,
	    "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a");
	policy_free(p);

	p = parse_ok("{\"network\": {}, \"sluice\": {\"allowedCidrs\": []}}");
	assert_int_equal(p->mode, POLICY_ENFORCE);
	assert_int_equal(p->ncidrs + p->nallowed + p->ndenied, 0);
	policy_free(p);
	policy_free(NULL);
}

static void
test_sha256_exact_text(void **state)
{
	char err[256];
	struct policy *p;

	(void)state;
	/* printf %s '{"sluice": {"mode": "audit"}}' | sha256sum */
	p = parse_ok("{\"sluice\": {\"mode\": \"audit\"}}");
	assert_int_equal(p->mode, POLICY_AUDIT);
	assert_string_equal(p->sha256,
	    "0be6f2c933e7c690950f5ea3bbf6da60d3e3015244f6d412c4c4da98d8b7bfca");
	policy_free(p);

	/* The same policy with a newline is another text. */
	p = parse_ok("{\"sluice\": {\"mode\": \"audit\"}}\n");
	assert_string_equal(p->sha256,
	    "f1679b363f59d2266a80f30ee819921842cea58807f9dc820afb85adb3ddaa2f");
	policy_free(p);

	/* Only len bytes count, and the copy is NUL-terminated. */
	p = policy_parse("{}garbage", 2, "p.json", err, sizeof(err));
	assert_non_null(p);
	assert_string_equal(p->text, "{}");
	assert_string_equal(p->sha256,
	    "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a");
	policy_free(p);
}

static void
test_full_policy(void **state)
{
	static const char json[] =
	    "{\n"
	    "  \"network\": {\n"
	    "    \"allowedDomains\": [\"Example.COM\", \"*.example.org\",\n"
	    "      \"api.example.net:8443\", \"*.Svc.example:443\",\n"
	    "      \"trailing.example.\", \"_dmarc.example.com\",\n"
	    "      \"Example.COM\"],\n"
	    "    \"deniedDomains\": [\"*\", \"bad.example.com\", "
	    "\"*.ads.example:80\"]\n"
	    "  },\n"
	    "  \"sluice\": {\n"
	    "    \"mode\": \"audit\",\n"
	    "    \"allowedCidrs\": [\"203.0.113.0/24:443\", "
	    "\"198.51.100.7:5432\",\n"
	    "      \"192.0.2.0/24:8000-8080\", \"192.0.2.9\", \"0.0.0.0/0:53\",\n"
	    "      \"10.0.0.0\\/8\", \"\\u0031.2.3.4/32:1-65535\", "
	    "\"255.255.255.255:65535\"]\n"
	    "  }\n"
	    "}\n";
	static const struct {
		const char	*name;
		bool		 wildcard;
		uint16_t	 port;
		const char	*text;
	} allowed[] = {
		{ "example.com", false, 0, "Example.COM" },
		{ "example.org", true, 0, "*.example.org" },
		{ "api.example.net", false, 8443, "api.example.net:8443" },
		{ "svc.example", true, 443, "*.Svc.example:443" },
		{ "trailing.example", false, 0, "trailing.example." },
		{ "_dmarc.example.com", false, 0, "_dmarc.example.com" },
		{ "example.com", false, 0, "Example.COM" },
	};
	static const struct {
		uint32_t	 addr, mask;	/* host order */
		uint16_t	 lo, hi;
		const char	*text;
	} cidrs[] = {
		{ HIP(203, 0, 113, 0), HIP(255, 255, 255, 0), 443, 443,
		    "203.0.113.0/24:443" },
		{ HIP(198, 51, 100, 7), HIP(255, 255, 255, 255), 5432, 5432,
		    "198.51.100.7:5432" },
		{ HIP(192, 0, 2, 0), HIP(255, 255, 255, 0), 8000, 8080,
		    "192.0.2.0/24:8000-8080" },
		{ HIP(192, 0, 2, 9), HIP(255, 255, 255, 255), 0, 65535,
		    "192.0.2.9" },
		{ 0, 0, 53, 53, "0.0.0.0/0:53" },
		{ HIP(10, 0, 0, 0), HIP(255, 0, 0, 0), 0, 65535, "10.0.0.0/8" },
		{ HIP(1, 2, 3, 4), HIP(255, 255, 255, 255), 1, 65535,
		    "1.2.3.4/32:1-65535" },
		{ HIP(255, 255, 255, 255), HIP(255, 255, 255, 255), 65535, 65535,
		    "255.255.255.255:65535" },
	};
	struct policy *p;
	size_t i;

	(void)state;
	p = parse_ok(json);
	assert_int_equal(p->mode, POLICY_AUDIT);
	assert_int_equal(p->textlen, strlen(json));
	assert_string_equal(p->text, json);

	assert_int_equal(p->nallowed, sizeof(allowed) / sizeof(allowed[0]));
	for (i = 0; i < p->nallowed; i++) {
		assert_string_equal(p->allowed[i].name, allowed[i].name);
		assert_int_equal(p->allowed[i].wildcard, allowed[i].wildcard);
		assert_false(p->allowed[i].any);
		assert_int_equal(p->allowed[i].port, allowed[i].port);
		assert_int_equal(p->allowed[i].inspect, POLICY_INSPECT_AUTO);
		assert_string_equal(p->allowed[i].text, allowed[i].text);
	}

	assert_int_equal(p->ndenied, 3);
	assert_true(p->denied[0].any);
	assert_false(p->denied[0].wildcard);
	assert_string_equal(p->denied[0].name, "");
	assert_int_equal(p->denied[0].port, 0);
	assert_string_equal(p->denied[0].text, "*");
	assert_false(p->denied[1].any);
	assert_false(p->denied[1].wildcard);
	assert_string_equal(p->denied[1].name, "bad.example.com");
	assert_int_equal(p->denied[1].port, 0);
	assert_false(p->denied[2].any);
	assert_true(p->denied[2].wildcard);
	assert_string_equal(p->denied[2].name, "ads.example");
	assert_int_equal(p->denied[2].port, 80);
	assert_string_equal(p->denied[2].text, "*.ads.example:80");
	for (i = 0; i < p->ndenied; i++)
		assert_int_equal(p->denied[i].inspect, POLICY_INSPECT_AUTO);

	assert_int_equal(p->ncidrs, sizeof(cidrs) / sizeof(cidrs[0]));
	for (i = 0; i < p->ncidrs; i++) {
		assert_int_equal(ntohl(p->cidrs[i].addr), cidrs[i].addr);
		assert_int_equal(ntohl(p->cidrs[i].mask), cidrs[i].mask);
		assert_int_equal(p->cidrs[i].port_lo, cidrs[i].lo);
		assert_int_equal(p->cidrs[i].port_hi, cidrs[i].hi);
		assert_string_equal(p->cidrs[i].text, cidrs[i].text);
	}
	policy_free(p);
}

static void
test_mode(void **state)
{
	struct policy *p;

	(void)state;
	p = parse_ok("{\"sluice\": {\"mode\": \"enforce\"}}");
	assert_int_equal(p->mode, POLICY_ENFORCE);
	policy_free(p);
	assert_string_equal(policy_mode_name(POLICY_ENFORCE), "enforce");
	assert_string_equal(policy_mode_name(POLICY_AUDIT), "audit");

	expect_err("{\"sluice\": {\"mode\": \"Enforce\"}}",
	    "p.json:1:21: sluice.mode: \"Enforce\": "
	    "must be \"enforce\" or \"audit\"");
	expect_err("{\"sluice\": {\"mode\": \"\"}}",
	    "p.json:1:21: sluice.mode: \"\": must be \"enforce\" or \"audit\"");
	expect_err("{\"sluice\": {\"mode\": true}}",
	    "p.json:1:21: sluice.mode: must be \"enforce\" or \"audit\", "
	    "not true");
}

static void
test_syntax_errors(void **state)
{
	(void)state;
	expect_err("", "p.json:1:0: '[' or '{' expected near end of file");
	expect_err("{\"sluice\": x}", "p.json:1:12: invalid token near 'x'");
	expect_err("{\"network\": {},}",
	    "p.json:1:16: string or '}' expected near '}'");
	expect_err("{\"a\": \"\xff\"}",
	    "p.json:1:7: unable to decode byte 0xff near '\"'");
	/* jansson counts columns in characters: "ü" is one. */
	expect_err("{\"network\": {\"deniedDomains\": [\"\xc3\xbc\" x]}}",
	    "p.json:1:36: ']' expected near 'x'");
	/* Trailing garbage. */
	expect_err("{} x", "p.json:1:4: end of file expected near 'x'");
	expect_err("{}\n\n  {}", "p.json:3:3: end of file expected near '{'");
	/* Duplicate keys, at the end of the second one, at any level. */
	expect_err("{\"sluice\": {}, \"sluice\": {}}",
	    "p.json:1:23: duplicate object key near '\"sluice\"'");
	expect_err("{\"sluice\": {\n  \"mode\": \"audit\",\n  \"mode\": \"audit\"}}",
	    "p.json:3:8: duplicate object key near '\"mode\"'");
	/* jansson's NUL rule holds. */
	expect_err("{\"sluice\": {\"mode\": \"audit\\u0000\"}}",
	    "p.json:1:33: \\u0000 is not allowed without JSON_ALLOW_NUL "
	    "near '\"audit\\u0000\"'");
}

static void
test_top_level(void **state)
{
	(void)state;
	expect_err("[]", "p.json:1:1: top level must be an object, not an array");
	expect_err("\n  [{}]",
	    "p.json:2:3: top level must be an object, not an array");
}

static void
test_unknown_keys(void **state)
{
	(void)state;
	expect_err("{\"networks\": {}}",
	    "p.json:1:2: unknown key \"networks\" (known: network, sluice)");
	expect_err("{\"sluice\": {}, \"Network\": {}}",
	    "p.json:1:16: unknown key \"Network\" (known: network, sluice)");
	expect_err("{\"network\": {\"allowedDomains\": [],\n"
	    "\t\"deniedDomain\": []}}",
	    "p.json:2:2: network: unknown key \"deniedDomain\" "
	    "(known: allowedDomains, deniedDomains)");
	expect_err("{\"sluice\": {\n"
	    "    \"mode\": \"audit\",\n"
	    "    \"allowedCIDRs\": []\n"
	    "}}",
	    "p.json:3:5: sluice: unknown key \"allowedCIDRs\" "
	    "(known: mode, allowedCidrs)");
	/* Control characters in a key do not reach the message raw. */
	expect_err("{\"a\\u001b[2Jb\": 1}",
	    "p.json:1:2: unknown key \"a\\u001b[2Jb\" (known: network, sluice)");
}

static void
test_wrong_types(void **state)
{
	(void)state;
	expect_err("{\"network\": []}",
	    "p.json:1:13: network: must be an object, not an array");
	expect_err("{\"sluice\": null}",
	    "p.json:1:12: sluice: must be an object, not null");
	expect_err("{\"network\": {\"allowedDomains\": \"a.com\"}}",
	    "p.json:1:32: network.allowedDomains: "
	    "must be an array of strings, not a string");
	expect_err("{\"network\": {\"deniedDomains\": {}}}",
	    "p.json:1:31: network.deniedDomains: "
	    "must be an array of strings, not an object");
	expect_err("{\"sluice\": {\"allowedCidrs\": [\"1.2.3.4\", 5]}}",
	    "p.json:1:41: sluice.allowedCidrs[1]: must be a string, "
	    "not a number");
	expect_err("{\"network\": {\"deniedDomains\": [false]}}",
	    "p.json:1:32: network.deniedDomains[0]: must be a string, "
	    "not false");
	expect_err("{\"network\": {\"allowedDomains\": [[\"a.com\"]]}}",
	    "p.json:1:33: network.allowedDomains[0]: must be a string, "
	    "not an array");
}

/* Each entry alone in sluice.allowedCidrs, whose value starts at column 28. */
static void
test_bad_cidrs(void **state)
{
	static const struct {
		const char	*entry;		/* as a JSON string */
		const char	*msg;
	} cases[] = {
		{ "\"\"", "empty entry" },
		{ "\"10.0.0.1/33\"",
		    "\"10.0.0.1/33\": prefix length must be 0..32" },
		{ "\"10.0.0.0/\"",
		    "\"10.0.0.0/\": missing prefix length after '/'" },
		{ "\"10.0.0.0/08\"",
		    "\"10.0.0.0/08\": prefix length has leading zeros" },
		{ "\"10.0.0.0/-1\"",
		    "\"10.0.0.0/-1\": prefix length must be 0..32" },
		{ "\"10.0.0.0/8/8\"",
		    "\"10.0.0.0/8/8\": prefix length must be 0..32" },
		{ "\"192.0.2.1/24\"",
		    "\"192.0.2.1/24\": host bits are set; "
		    "did you mean 192.0.2.0/24?" },
		{ "\"10.1.2.3/0:80\"",
		    "\"10.1.2.3/0:80\": host bits are set; "
		    "did you mean 0.0.0.0/0?" },
		{ "\"010.0.0.1\"",
		    "\"010.0.0.1\": leading zero in an address byte "
		    "(octal is not accepted)" },
		{ "\"10.0.0.00\"",
		    "\"10.0.0.00\": leading zero in an address byte "
		    "(octal is not accepted)" },
		{ "\"256.0.0.1\"",
		    "\"256.0.0.1\": address byte out of range 0..255" },
		{ "\"1.2.3.99999999999999999999\"",
		    "\"1.2.3.99999999999999999999\": "
		    "address byte out of range 0..255" },
		{ "\"1.2.3\"", "\"1.2.3\": not an IPv4 address (a.b.c.d)" },
		{ "\"1.2.3.4.5\"",
		    "\"1.2.3.4.5\": not an IPv4 address (a.b.c.d)" },
		{ "\"1..3.4\"", "\"1..3.4\": not an IPv4 address (a.b.c.d)" },
		{ "\"1.2.3.\"", "\"1.2.3.\": not an IPv4 address (a.b.c.d)" },
		{ "\"0x1.2.3.4\"",
		    "\"0x1.2.3.4\": not an IPv4 address (a.b.c.d)" },
		{ "\"+1.2.3.4\"",
		    "\"+1.2.3.4\": not an IPv4 address (a.b.c.d)" },
		{ "\"example.com\"",
		    "\"example.com\": not an IPv4 address (a.b.c.d)" },
		{ "\"1.2.3.4 \"", "\"1.2.3.4 \": white space is not allowed" },
		{ "\" 1.2.3.4\"", "\" 1.2.3.4\": white space is not allowed" },
		{ "\"1.2.3.4\\t:80\"",
		    "\"1.2.3.4\\u0009:80\": white space is not allowed" },
		{ "\"1.2.3.4:\"", "\"1.2.3.4:\": missing port after ':'" },
		{ "\"1.2.3.4:0\"", "\"1.2.3.4:0\": port must be 1..65535" },
		{ "\"1.2.3.4:65536\"",
		    "\"1.2.3.4:65536\": port must be 1..65535" },
		{ "\"1.2.3.4:080\"", "\"1.2.3.4:080\": port has leading zeros" },
		{ "\"1.2.3.4:http\"", "\"1.2.3.4:http\": port must be 1..65535" },
		{ "\"1.2.3.4:80:90\"",
		    "\"1.2.3.4:80:90\": port must be 1..65535" },
		{ "\"1.2.3.4:0-80\"", "\"1.2.3.4:0-80\": port must be 1..65535" },
		{ "\"1.2.3.4:80-65536\"",
		    "\"1.2.3.4:80-65536\": port must be 1..65535" },
		{ "\"1.2.3.4:90-80\"",
		    "\"1.2.3.4:90-80\": port range is empty (90 > 80)" },
		{ "\"1.2.3.4:-80\"", "\"1.2.3.4:-80\": port range must be low-high" },
		{ "\"1.2.3.4:80-\"", "\"1.2.3.4:80-\": port range must be low-high" },
		{ "\"1.2.3.4:1-2-3\"", "\"1.2.3.4:1-2-3\": port must be 1..65535" },
		{ "\"::1\"", "\"::1\": IPv6 is not supported yet" },
		{ "\"2001:db8::/32\"",
		    "\"2001:db8::/32\": IPv6 is not supported yet" },
		{ "\"[2001:db8::1]:443\"",
		    "\"[2001:db8::1]:443\": IPv6 is not supported yet" },
		{ "\"::ffff:1.2.3.4\"",
		    "\"::ffff:1.2.3.4\": IPv6 is not supported yet" },
	};
	char json[256], want[512];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		snprintf(json, sizeof(json),
		    "{\"sluice\":{\"allowedCidrs\":[%s]}}", cases[i].entry);
		snprintf(want, sizeof(want),
		    "p.json:1:28: sluice.allowedCidrs[0]: %s", cases[i].msg);
		expect_err(json, want);
	}
}

/* Each entry alone in network.<list>, whose value starts at column 31/30. */
static void
test_bad_domains(void **state)
{
	static const struct {
		bool		 denied;
		const char	*entry;		/* as a JSON string */
		const char	*msg;
	} cases[] = {
		{ false, "\"\"", "empty entry" },
		{ true, "\"\"", "empty entry" },
		{ false, "\"*\"", "\"*\": a bare \"*\" is only allowed in "
		    "deniedDomains" },
		{ false, "\"*:443\"", "\"*:443\": a bare \"*\" is only "
		    "allowed in deniedDomains" },
		{ true, "\"*:443\"", "\"*:443\": a bare \"*\" takes no port" },
		{ false, "\"a*.b\"", "\"a*.b\": '*' is only allowed as a whole "
		    "first label, as in \"*.example.com\"" },
		{ false, "\"*foo.com\"", "\"*foo.com\": '*' is only allowed as "
		    "a whole first label, as in \"*.example.com\"" },
		{ true, "\"foo.*.com\"", "\"foo.*.com\": '*' is only allowed "
		    "as a whole first label, as in \"*.example.com\"" },
		{ false, "\"*.*.com\"", "\"*.*.com\": '*' is only allowed "
		    "as a whole first label, as in \"*.example.com\"" },
		{ false, "\"*.\"", "\"*.\": empty name" },
		{ false, "\"a..b\"", "\"a..b\": empty label" },
		{ false, "\".example.com\"", "\".example.com\": empty label" },
		{ true, "\"-a.com\"", "\"-a.com\": label starts with a hyphen" },
		{ false, "\"a-.com\"", "\"a-.com\": label ends with a hyphen" },
		{ false, "\"a .com\"", "\"a .com\": white space in name" },
		{ false, "\"a.com:\"", "\"a.com:\": missing port after ':'" },
		{ false, "\"a.com:0\"", "\"a.com:0\": port must be 1..65535" },
		{ false, "\"a.com:65536\"",
		    "\"a.com:65536\": port must be 1..65535" },
		{ false, "\"a.com:1-2\"", "\"a.com:1-2\": port must be 1..65535" },
		{ false, "\"a.com:443:443\"", "\"a.com:443:443\": invalid "
		    "character in name (letters, digits, '-', '_' only)" },
		{ false, "\"a.com/24\"", "\"a.com/24\": invalid character in "
		    "name (letters, digits, '-', '_' only)" },
		{ false, "\"m\xc3\xbcnchen.de\"",
		    "\"m\xc3\xbcnchen.de\": not ASCII; write internationalised "
		    "names in punycode (xn--...)" },
		{ true, "\"*.\\u00e9t\\u00e9.fr\"",
		    "\"*.\xc3\xa9t\xc3\xa9.fr\": not ASCII; write "
		    "internationalised names in punycode (xn--...)" },
		{ false, "\"a\\u0085b\"", "\"a\\u0085b\": not ASCII; write "
		    "internationalised names in punycode (xn--...)" },
		/* "/tls" and "/http" follow a port, lower case, allowed only. */
		{ false, "\"a.test/tls\"", "\"a.test/tls\": \"/tls\" needs a "
		    "port before it, as in \"example.com:8443/tls\"" },
		{ false, "\"*.a.test/http\"", "\"*.a.test/http\": \"/http\" "
		    "needs a port before it, as in \"example.com:8443/http\"" },
		{ false, "\"/tls\"", "\"/tls\": \"/tls\" needs a port before "
		    "it, as in \"example.com:8443/tls\"" },
		{ false, "\"a.test:8443/ssh\"", "\"a.test:8443/ssh\": unknown "
		    "protocol \"/ssh\" after the port (known: /tls, /http)" },
		{ false, "\"a.test:8443/TLS\"", "\"a.test:8443/TLS\": unknown "
		    "protocol \"/TLS\" after the port (known: /tls, /http)" },
		{ false, "\"a.test:80/Http\"", "\"a.test:80/Http\": unknown "
		    "protocol \"/Http\" after the port (known: /tls, /http)" },
		{ false, "\"a.test:443/\"", "\"a.test:443/\": unknown "
		    "protocol \"/\" after the port (known: /tls, /http)" },
		{ false, "\"a.test:443/tls/http\"", "\"a.test:443/tls/http\": "
		    "unknown protocol \"/tls/http\" after the port (known: "
		    "/tls, /http)" },
		{ false, "\"a.test:443//tls\"", "\"a.test:443//tls\": unknown "
		    "protocol \"//tls\" after the port (known: /tls, /http)" },
		{ false, "\"a.test:443/tls \"", "\"a.test:443/tls \": unknown "
		    "protocol \"/tls \" after the port (known: /tls, /http)" },
		{ false, "\"a.test:443/\\u001b\"", "\"a.test:443/\\u001b\": "
		    "unknown protocol \"/\\u001b\" after the port (known: "
		    "/tls, /http)" },
		{ false, "\"a.test:/tls\"",
		    "\"a.test:/tls\": missing port after ':'" },
		{ false, "\"a.test:0/http\"",
		    "\"a.test:0/http\": port must be 1..65535" },
		{ false, "\"a.test:65536/tls\"",
		    "\"a.test:65536/tls\": port must be 1..65535" },
		{ false, "\"a.test:08443/tls\"",
		    "\"a.test:08443/tls\": port has leading zeros" },
		{ false, "\"a.test:443/tls:80\"", "\"a.test:443/tls:80\": "
		    "invalid character in name (letters, digits, '-', '_' "
		    "only)" },
		{ false, "\"a.test/ssh\"", "\"a.test/ssh\": invalid character "
		    "in name (letters, digits, '-', '_' only)" },
		{ false, "\"*:443/tls\"", "\"*:443/tls\": a bare \"*\" is only "
		    "allowed in deniedDomains" },
		{ false, "\"a*.test:443/tls\"", "\"a*.test:443/tls\": '*' is "
		    "only allowed as a whole first label, as in "
		    "\"*.example.com\"" },
		{ false, "\"a..test:443/tls\"",
		    "\"a..test:443/tls\": empty label" },
		{ true, "\"a.test:443/tls\"", "\"a.test:443/tls\": \"/tls\" is "
		    "only allowed in allowedDomains" },
		{ true, "\"*.a.test:8080/http\"", "\"*.a.test:8080/http\": "
		    "\"/http\" is only allowed in allowedDomains" },
		{ true, "\"a.test/tls\"", "\"a.test/tls\": \"/tls\" is only "
		    "allowed in allowedDomains" },
		{ true, "\"a.test:443/ssh\"", "\"a.test:443/ssh\": unknown "
		    "protocol \"/ssh\" after the port (known: /tls, /http)" },
		{ true, "\"*:443/tls\"",
		    "\"*:443/tls\": a bare \"*\" takes no port" },
		{ true, "\"*/tls\"", "\"*/tls\": \"/tls\" is only allowed in "
		    "allowedDomains" },
	};
	char json[256], want[512];
	const char *list;
	size_t i;
	int col;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		list = cases[i].denied ? "deniedDomains" : "allowedDomains";
		col = cases[i].denied ? 30 : 31;
		snprintf(json, sizeof(json), "{\"network\":{\"%s\":[%s]}}",
		    list, cases[i].entry);
		snprintf(want, sizeof(want), "p.json:1:%d: network.%s[0]: %s",
		    col, list, cases[i].msg);
		expect_err(json, want);
	}
}

/* "/tls" and "/http" after a port; without one the port decides (AUTO). */
static void
test_domain_inspect(void **state)
{
	static const char json[] =
	    "{\"network\": {\n"
	    "  \"allowedDomains\": [\"a.test:8443/tls\", "
	    "\"*.api.test:8080/http\",\n"
	    "    \"Mixed.TEST:443/tls\", \"plain.test:80/tls\", "
	    "\"web.test:443/http\",\n"
	    "    \"dot.test.:65535/http\", \"esc.test:1\\/tls\", "
	    "\"port.test:8443\",\n"
	    "    \"bare.test\", \"*.wild.test\"],\n"
	    "  \"deniedDomains\": [\"x.test:443\", \"*.y.test\"]\n"
	    "}}\n";
	static const struct {
		const char		*name;
		bool			 wildcard;
		uint16_t		 port;
		enum policy_inspect	 inspect;
		const char		*text;
	} allowed[] = {
		{ "a.test", false, 8443, POLICY_INSPECT_TLS, "a.test:8443/tls" },
		{ "api.test", true, 8080, POLICY_INSPECT_HTTP,
		    "*.api.test:8080/http" },
		{ "mixed.test", false, 443, POLICY_INSPECT_TLS,
		    "Mixed.TEST:443/tls" },
		/* The suffix overrides what the port would say. */
		{ "plain.test", false, 80, POLICY_INSPECT_TLS,
		    "plain.test:80/tls" },
		{ "web.test", false, 443, POLICY_INSPECT_HTTP,
		    "web.test:443/http" },
		{ "dot.test", false, 65535, POLICY_INSPECT_HTTP,
		    "dot.test.:65535/http" },
		/* "\/" is JSON for "/". */
		{ "esc.test", false, 1, POLICY_INSPECT_TLS, "esc.test:1/tls" },
		{ "port.test", false, 8443, POLICY_INSPECT_AUTO,
		    "port.test:8443" },
		{ "bare.test", false, 0, POLICY_INSPECT_AUTO, "bare.test" },
		{ "wild.test", true, 0, POLICY_INSPECT_AUTO, "*.wild.test" },
	};
	const struct policy_domain *rule;
	struct policy *p;
	size_t i;

	(void)state;
	p = parse_ok(json);
	assert_int_equal(p->nallowed, sizeof(allowed) / sizeof(allowed[0]));
	for (i = 0; i < p->nallowed; i++) {
		assert_string_equal(p->allowed[i].name, allowed[i].name);
		assert_int_equal(p->allowed[i].wildcard, allowed[i].wildcard);
		assert_false(p->allowed[i].any);
		assert_int_equal(p->allowed[i].port, allowed[i].port);
		assert_int_equal(p->allowed[i].inspect, allowed[i].inspect);
		assert_string_equal(p->allowed[i].text, allowed[i].text);
	}
	assert_int_equal(p->ndenied, 2);
	for (i = 0; i < p->ndenied; i++)
		assert_int_equal(p->denied[i].inspect, POLICY_INSPECT_AUTO);
	assert_int_equal(p->denied[0].port, 443);

	/* The port still decides what is admitted; the suffix is no port. */
	assert_int_equal(policy_match_name(p, "a.test", 8443, &rule),
	    POLICY_NAME_ALLOWED);
	assert_ptr_equal(rule, &p->allowed[0]);
	assert_int_equal(policy_match_name(p, "a.test", 443, &rule),
	    POLICY_NAME_PORT_NOT_ALLOWED);
	assert_ptr_equal(rule, &p->allowed[0]);
	assert_int_equal(policy_match_name(p, "v1.api.test", 8080, &rule),
	    POLICY_NAME_ALLOWED);
	assert_ptr_equal(rule, &p->allowed[1]);
	assert_int_equal(policy_match_name(p, "api.test", 8080, &rule),
	    POLICY_NAME_NOT_ALLOWED);
	assert_int_equal(policy_match_name(p, "plain.test", 80, &rule),
	    POLICY_NAME_ALLOWED);
	assert_ptr_equal(rule, &p->allowed[3]);
	policy_free(p);

	/* An error in a later line is found there. */
	expect_err("{\"network\": {\n"
	    "  \"allowedDomains\": [\"a.test:8443/tls\",\n"
	    "\t\"b.test:8443/TLS\"]}}",
	    "p.json:3:2: network.allowedDomains[1]: \"b.test:8443/TLS\": "
	    "unknown protocol \"/TLS\" after the port (known: /tls, /http)");
	expect_err("{\"network\": {\"allowedDomains\": [\"a.test:8443/tls\"],"
	    "\n  \"deniedDomains\": [\"*\", \"b.test:443/http\"]}}",
	    "p.json:2:26: network.deniedDomains[1]: \"b.test:443/http\": "
	    "\"/http\" is only allowed in allowedDomains");
}

#define ALLOWED_ONE	"{\"network\":{\"allowedDomains\":[\"%s\"]}}"

static void
test_long_entries(void **state)
{
	char entry[400], json[512], want[512];
	struct policy *p;
	size_t len;

	(void)state;
	/* The longest sensible entry: a 253-byte name, "*.", a port. */
	len = 0;
	memcpy(entry, "*.", 2);
	len += 2;
	memset(entry + len, 'a', 63);
	entry[len + 63] = '.';
	memset(entry + len + 64, 'b', 63);
	entry[len + 127] = '.';
	memset(entry + len + 128, 'c', 63);
	entry[len + 191] = '.';
	memset(entry + len + 192, 'd', 61);
	len += 253;
	memcpy(entry + len, ".:65535", 8);
	snprintf(json, sizeof(json), ALLOWED_ONE, entry);
	p = parse_ok(json);
	assert_int_equal(strlen(p->allowed[0].name), 253);
	assert_true(p->allowed[0].wildcard);
	assert_int_equal(p->allowed[0].port, 65535);
	assert_string_equal(p->allowed[0].text, entry);
	policy_free(p);

	/* 299 bytes: kept as text room allows, refused as a name. */
	memset(entry, 'a', 299);
	entry[299] = '\0';
	snprintf(json, sizeof(json), ALLOWED_ONE, entry);
	snprintf(want, sizeof(want), "p.json:1:31: network.allowedDomains[0]: "
	    "\"%.85s...\": name longer than 253 bytes", entry);
	expect_err(json, want);

	/* 300 bytes would not fit policy_domain.text. */
	memset(entry, 'a', 300);
	entry[300] = '\0';
	snprintf(json, sizeof(json), ALLOWED_ONE, entry);
	snprintf(want, sizeof(want), "p.json:1:31: network.allowedDomains[0]: "
	    "\"%.85s...\": longer than 299 bytes", entry);
	expect_err(json, want);
	snprintf(json, sizeof(json), "{\"sluice\":{\"allowedCidrs\":[\"%s\"]}}",
	    entry);
	snprintf(want, sizeof(want), "p.json:1:28: sluice.allowedCidrs[0]: "
	    "\"%.85s...\": longer than 299 bytes", entry);
	expect_err(json, want);
}

/*
 * The locator walks the text jansson accepted: escaped keys and values,
 * strings that look like keys, nested skipping, tabs, CRLF.
 */
static void
test_locator(void **state)
{
	(void)state;
	expect_err(
	    "{\n"
	    "  \"network\": {\n"
	    "    \"deniedDomains\": [\"sluice\", \"mode\", \"allowedcidrs\"],\n"
	    "    \"allowedDomains\": [\"\\u0061.example\", \"b.example\"]\n"
	    "  },\n"
	    "  \"sluice\": {\n"
	    "    \"allowedCidrs\": [\"10.0.0.0\\/8\", \"\\u0031.2.3.4\",\n"
	    "        \"10.0.0.1/33\"]\n"
	    "  }\n"
	    "}\n",
	    "p.json:8:9: sluice.allowedCidrs[2]: \"10.0.0.1/33\": "
	    "prefix length must be 0..32");

	/* Keys written with escapes are found by their value. */
	expect_err("{\"\\u0073luice\": {\"mode\": \"audit\", "
	    "\"allowed\\u0043idrs\": [\"1.2.3.4\", \"1.2.3.4/8\"]}}",
	    "p.json:1:68: sluice.allowedCidrs[1]: \"1.2.3.4/8\": host bits "
	    "are set; did you mean 1.0.0.0/8?");
	expect_err("{\"sluice\": {\"m\\u006fde\": \"x\"}}",
	    "p.json:1:26: sluice.mode: \"x\": must be \"enforce\" or \"audit\"");

	/* A key with a surrogate pair, and a key after it. */
	expect_err("{\"sluice\": {}, \"\\ud83d\\ude00\": 1}",
	    "p.json:1:16: unknown key \"\xf0\x9f\x98\x80\" "
	    "(known: network, sluice)");

	/* Tabs count as one column; CRLF ends a line at its LF. */
	expect_err("{\r\n\t\"network\": {\"deniedDomains\": [],\r\n"
	    "\t\t\"allowedDomains\": [\r\n\t\t\t\"ok.example\",\t\"bad..example\"]}}",
	    "p.json:4:18: network.allowedDomains[1]: \"bad..example\": "
	    "empty label");

	/* Earlier objects and arrays, nested, are skipped whole. */
	expect_err("{\"network\": {\"allowedDomains\": [], \"deniedDomains\": "
	    "[\"*\"]}, \"sluice\": {\"allowedCidrs\": [], \"mode\": "
	    "\"AUDIT\"}}",
	    "p.json:1:100: sluice.mode: \"AUDIT\": "
	    "must be \"enforce\" or \"audit\"");

	/* Duplicates are not errors, and the error is in the later list. */
	expect_err("{\"sluice\": {\"allowedCidrs\": [\"1.2.3.4\", \"1.2.3.4\"]},\n"
	    " \"network\": {\"deniedDomains\": [\"a.b\", \"a.b\", \"*.*\"]}}",
	    "p.json:2:46: network.deniedDomains[2]: \"*.*\": '*' is only "
	    "allowed as a whole first label, as in \"*.example.com\"");
}

static void
test_limits(void **state)
{
	size_t n, i, off;
	char *json, err[256];
	struct policy *p;

	(void)state;
	/* POLICY_MAX_ENTRIES entries are fine, one more is not. */
	n = POLICY_MAX_ENTRIES + 1;
	json = malloc(64 + n * 4);
	assert_non_null(json);
	off = (size_t)sprintf(json, "{\"network\": {\"deniedDomains\": [");
	for (i = 0; i < n - 1; i++)
		off += (size_t)sprintf(json + off, "%s\"a\"", i ? "," : "");
	strcpy(json + off, "]}}");
	p = parse_ok(json);
	assert_int_equal(p->ndenied, POLICY_MAX_ENTRIES);
	assert_string_equal(p->denied[POLICY_MAX_ENTRIES - 1].name, "a");
	policy_free(p);
	strcpy(json + off, ",\"a\"]}}");
	expect_err(json, "p.json:1:31: network.deniedDomains: "
	    "more than 100000 entries");
	free(json);

	/* POLICY_MAX_BYTES is fine, one more byte is not. */
	json = malloc(POLICY_MAX_BYTES + 2);
	assert_non_null(json);
	memset(json, ' ', POLICY_MAX_BYTES + 1);
	json[0] = '{';
	json[1] = '}';
	p = policy_parse(json, POLICY_MAX_BYTES, "big.json", err, sizeof(err));
	assert_non_null(p);
	assert_int_equal(p->textlen, POLICY_MAX_BYTES);
	policy_free(p);
	p = policy_parse(json, POLICY_MAX_BYTES + 1, "big.json", err,
	    sizeof(err));
	assert_null(p);
	assert_string_equal(err, "big.json: larger than 1048576 bytes");
	free(json);

	/* err may be NULL or short; origin may be NULL. */
	assert_null(policy_parse("[", 1, "p.json", NULL, 0));
	assert_null(policy_parse("[", 1, "p.json", err, 8));
	assert_string_equal(err, "p.json:");
	assert_null(policy_parse("[]", 2, NULL, err, sizeof(err)));
	assert_string_equal(err,
	    "policy:1:1: top level must be an object, not an array");
}

static void
write_file(const char *path, const char *data, size_t len)
{
	FILE *f = fopen(path, "wb");

	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, len, f), len);
	assert_int_equal(fclose(f), 0);
}

static void
test_load(void **state)
{
	char dir[] = "/tmp/test_policy.XXXXXX", path[64], err[512];
	static const char json[] = "{\"sluice\": {\"mode\": \"audit\"}}";
	struct policy *p;
	char *big;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/p.json", dir);

	write_file(path, json, strlen(json));
	p = policy_load(path, err, sizeof(err));
	assert_non_null(p);
	assert_int_equal(p->mode, POLICY_AUDIT);
	assert_string_equal(p->text, json);
	assert_string_equal(p->sha256,
	    "0be6f2c933e7c690950f5ea3bbf6da60d3e3015244f6d412c4c4da98d8b7bfca");
	policy_free(p);

	write_file(path, "{\n  \"sluice\": {\"mode\": 1}}", 26);
	assert_null(policy_load(path, err, sizeof(err)));
	assert_string_equal(strchr(err, ':'), ":2:22: sluice.mode: must be "
	    "\"enforce\" or \"audit\", not a number");
	assert_memory_equal(err, path, strlen(path));

	big = malloc(POLICY_MAX_BYTES + 1);
	assert_non_null(big);
	memset(big, ' ', POLICY_MAX_BYTES + 1);
	big[0] = '{';
	big[1] = '}';
	write_file(path, big, POLICY_MAX_BYTES);
	p = policy_load(path, err, sizeof(err));
	assert_non_null(p);
	assert_int_equal(p->textlen, POLICY_MAX_BYTES);
	assert_int_equal(strlen(p->text), POLICY_MAX_BYTES);
	policy_free(p);
	write_file(path, big, POLICY_MAX_BYTES + 1);
	assert_null(policy_load(path, err, sizeof(err)));
	assert_string_equal(strchr(err, ':'), ": larger than 1048576 bytes");
	free(big);
	assert_int_equal(unlink(path), 0);

	assert_null(policy_load(path, err, sizeof(err)));
	assert_string_equal(strchr(err, ':'), ": No such file or directory");
	assert_memory_equal(err, path, strlen(path));
	assert_null(policy_load(dir, err, sizeof(err)));
	assert_string_equal(strchr(err, ':'), ": Is a directory");
	assert_int_equal(rmdir(dir), 0);
}

static void
test_match_cidr(void **state)
{
	static const char json[] = "{\"sluice\": {\"allowedCidrs\": ["
	    "\"192.0.2.0/24:8000-8080\", \"192.0.2.9\", \"198.51.100.7:5432\","
	    "\"203.0.113.0/25:443\", \"203.0.113.128/25:1-1\"]}}";
	const struct policy_cidr *c;
	struct policy *p;
	bool am;

	(void)state;
	p = parse_ok(json);

	/* Port range boundaries. */
	am = true;
	c = policy_match_cidr(p, IP(192, 0, 2, 1), 8000, &am);
	assert_ptr_equal(c, &p->cidrs[0]);
	assert_false(am);
	assert_ptr_equal(policy_match_cidr(p, IP(192, 0, 2, 255), 8080, &am),
	    &p->cidrs[0]);
	assert_null(policy_match_cidr(p, IP(192, 0, 2, 1), 7999, &am));
	assert_true(am);
	assert_null(policy_match_cidr(p, IP(192, 0, 2, 1), 8081, &am));
	assert_true(am);
	/* Outside the /24. */
	assert_null(policy_match_cidr(p, IP(192, 0, 3, 1), 8000, &am));
	assert_false(am);
	/* First match wins; the /32 with any port comes second. */
	assert_ptr_equal(policy_match_cidr(p, IP(192, 0, 2, 9), 8000, &am),
	    &p->cidrs[0]);
	assert_ptr_equal(policy_match_cidr(p, IP(192, 0, 2, 9), 1, &am),
	    &p->cidrs[1]);
	assert_ptr_equal(policy_match_cidr(p, IP(192, 0, 2, 9), 65535, &am),
	    &p->cidrs[1]);
	assert_ptr_equal(policy_match_cidr(p, IP(192, 0, 2, 9), 0, &am),
	    &p->cidrs[1]);
	/* /32 with a port. */
	assert_ptr_equal(policy_match_cidr(p, IP(198, 51, 100, 7), 5432, &am),
	    &p->cidrs[2]);
	assert_null(policy_match_cidr(p, IP(198, 51, 100, 7), 5433, &am));
	assert_true(am);
	assert_null(policy_match_cidr(p, IP(198, 51, 100, 6), 5432, &am));
	assert_false(am);
	/* The two halves of a /24. */
	assert_ptr_equal(policy_match_cidr(p, IP(203, 0, 113, 127), 443, &am),
	    &p->cidrs[3]);
	assert_null(policy_match_cidr(p, IP(203, 0, 113, 128), 443, &am));
	assert_true(am);
	assert_ptr_equal(policy_match_cidr(p, IP(203, 0, 113, 255), 1, &am),
	    &p->cidrs[4]);
	/* addr_matched may be NULL. */
	assert_null(policy_match_cidr(p, IP(203, 0, 113, 200), 2, NULL));
	policy_free(p);

	/* /0 covers every address. */
	p = parse_ok("{\"sluice\": {\"allowedCidrs\": [\"0.0.0.0/0:53\"]}}");
	assert_ptr_equal(policy_match_cidr(p, IP(255, 255, 255, 255), 53, &am),
	    &p->cidrs[0]);
	assert_ptr_equal(policy_match_cidr(p, IP(0, 0, 0, 0), 53, &am),
	    &p->cidrs[0]);
	assert_null(policy_match_cidr(p, IP(8, 8, 8, 8), 54, &am));
	assert_true(am);
	policy_free(p);

	/* No entries: nothing matches. */
	p = parse_ok("{}");
	am = true;
	assert_null(policy_match_cidr(p, IP(192, 0, 2, 9), 80, &am));
	assert_false(am);
	policy_free(p);
}

/* Which entry decides, where several could. */
static void
test_match_name(void **state)
{
	static const char json[] = "{\"network\": {"
	    "\"allowedDomains\": [\"a.test:8443\", \"*.a.test\", \"a.test\","
	    " \"A.test:22\", \"a.test:22\", \"*.b.a.test:22\", \"x.b.a.test\","
	    " \"bad.test\", \"*.deep.test\", \"*.q.deep.test:80\"],"
	    "\"deniedDomains\": [\"*.bad.test\", \"bad.test:443\", "
	    "\"evil.b.a.test\", \"*.evil.b.a.test\"]}}";
	const struct policy_domain *rule;
	struct policy *p;

	(void)state;
	p = parse_ok(json);
	/* the first entry fitting name and port; the first fitting the
	 * name when none fits the port */
	assert_int_equal(policy_match_name(p, "a.test", 443, &rule),
	    POLICY_NAME_ALLOWED);
	assert_ptr_equal(rule, &p->allowed[2]);
	assert_int_equal(policy_match_name(p, "a.test", 8443, &rule),
	    POLICY_NAME_ALLOWED);
	assert_ptr_equal(rule, &p->allowed[0]);
	assert_int_equal(policy_match_name(p, "a.test", 22, &rule),
	    POLICY_NAME_ALLOWED);
	assert_ptr_equal(rule, &p->allowed[3]);
	assert_int_equal(policy_match_name(p, "a.test", 25, &rule),
	    POLICY_NAME_PORT_NOT_ALLOWED);
	assert_ptr_equal(rule, &p->allowed[0]);
	assert_int_equal(policy_match_name(p, "a.test", -1, &rule),
	    POLICY_NAME_ALLOWED);
	assert_ptr_equal(rule, &p->allowed[0]);
	/* "*.a.test" covers every depth below, not a.test itself */
	assert_int_equal(policy_match_name(p, "x.b.a.test", 80, &rule),
	    POLICY_NAME_ALLOWED);
	assert_ptr_equal(rule, &p->allowed[1]);
	assert_int_equal(policy_match_name(p, "x.b.a.test", 22, &rule),
	    POLICY_NAME_ALLOWED);
	assert_ptr_equal(rule, &p->allowed[5]);
	assert_int_equal(policy_match_name(p, "x.b.a.test", 8443, &rule),
	    POLICY_NAME_PORT_NOT_ALLOWED);
	assert_ptr_equal(rule, &p->allowed[1]);
	assert_int_equal(policy_match_name(p, "b.a.test", 22, &rule),
	    POLICY_NAME_PORT_NOT_ALLOWED);
	assert_ptr_equal(rule, &p->allowed[1]);
	assert_int_equal(policy_match_name(p, "q.deep.test", 80, &rule),
	    POLICY_NAME_ALLOWED);
	assert_ptr_equal(rule, &p->allowed[8]);
	assert_int_equal(policy_match_name(p, "r.q.deep.test", 8443, &rule),
	    POLICY_NAME_PORT_NOT_ALLOWED);
	assert_ptr_equal(rule, &p->allowed[8]);
	assert_int_equal(policy_match_name(p, "deep.test", 80, &rule),
	    POLICY_NAME_NOT_ALLOWED);
	assert_null(rule);
	/* deniedDomains wins over any allowed entry, whatever the port:
	 * its first matching entry is the rule */
	assert_int_equal(policy_match_name(p, "bad.test", 80, &rule),
	    POLICY_NAME_DENIED);
	assert_ptr_equal(rule, &p->denied[1]);
	assert_int_equal(policy_match_name(p, "x.bad.test", -1, &rule),
	    POLICY_NAME_DENIED);
	assert_ptr_equal(rule, &p->denied[0]);
	assert_int_equal(policy_match_name(p, "evil.b.a.test", 443, &rule),
	    POLICY_NAME_DENIED);
	assert_ptr_equal(rule, &p->denied[2]);
	assert_int_equal(policy_match_name(p, "x.evil.b.a.test", 443, &rule),
	    POLICY_NAME_DENIED);
	assert_ptr_equal(rule, &p->denied[3]);
	/* the suffix must end at a label: "xa.test" is not under a.test */
	assert_int_equal(policy_match_name(p, "xa.test", 443, &rule),
	    POLICY_NAME_NOT_ALLOWED);
	assert_int_equal(policy_match_name(p, "test", 443, &rule),
	    POLICY_NAME_NOT_ALLOWED);
	assert_int_equal(policy_match_name(p, "", 443, &rule),
	    POLICY_NAME_NOT_ALLOWED);
	assert_int_equal(policy_match_name(p, ".a.test", 443, &rule),
	    POLICY_NAME_NOT_ALLOWED);
	policy_free(p);

	/* a bare "*" denies everything, from wherever it is in the list */
	p = parse_ok("{\"network\": {\"allowedDomains\": [\"a.test\"], "
	    "\"deniedDomains\": [\"b.test\", \"*\", \"a.test\"]}}");
	assert_int_equal(policy_match_name(p, "a.test", 443, &rule),
	    POLICY_NAME_DENIED);
	assert_ptr_equal(rule, &p->denied[1]);
	assert_string_equal(rule->name, "");
	assert_string_equal(rule->text, "*");
	assert_int_equal(policy_match_name(p, "b.test", 443, &rule),
	    POLICY_NAME_DENIED);
	assert_ptr_equal(rule, &p->denied[0]);
	policy_free(p);
}

/* ---- the index against the scan it replaced ----------------------------- */

static const struct policy_cidr *
linear_match_cidr(const struct policy *p, uint32_t daddr, uint16_t dport,
    bool *addr_matched)
{
	const struct policy_cidr *c;
	bool addr_seen = false;
	size_t i;

	for (i = 0; i < p->ncidrs; i++) {
		c = &p->cidrs[i];
		if ((daddr & c->mask) != c->addr)
			continue;
		if (dport >= c->port_lo && dport <= c->port_hi) {
			*addr_matched = false;
			return c;
		}
		addr_seen = true;
	}
	*addr_matched = addr_seen;
	return NULL;
}

static bool
linear_covers_addr(const struct policy *p, uint32_t addr)
{
	size_t i;

	/* an entry for every port only (policy.h) */
	for (i = 0; i < p->ncidrs; i++)
		if ((addr & p->cidrs[i].mask) == p->cidrs[i].addr &&
		    p->cidrs[i].port_lo == 0 && p->cidrs[i].port_hi == 65535)
			return true;
	return false;
}

static bool
linear_port_ok(const struct policy_domain *d, uint16_t port)
{
	if (d->port != 0)
		return port == d->port;
	return port == 443 || port == 80;
}

static enum policy_name_verdict
linear_match_name(const struct policy *p, const char *name, int port,
    const struct policy_domain **rule)
{
	const struct policy_domain *d, *name_only = NULL;
	size_t i;

	*rule = NULL;
	for (i = 0; i < p->ndenied; i++) {
		d = &p->denied[i];
		if (d->any || dns_name_match(name, d->name, d->wildcard)) {
			*rule = d;
			return POLICY_NAME_DENIED;
		}
	}
	for (i = 0; i < p->nallowed; i++) {
		d = &p->allowed[i];
		if (!dns_name_match(name, d->name, d->wildcard))
			continue;
		if (port < 0 || linear_port_ok(d, (uint16_t)port)) {
			*rule = d;
			return POLICY_NAME_ALLOWED;
		}
		if (name_only == NULL)
			name_only = d;
	}
	if (name_only != NULL) {
		*rule = name_only;
		return POLICY_NAME_PORT_NOT_ALLOWED;
	}
	return POLICY_NAME_NOT_ALLOWED;
}

static uint64_t rng_state;

static uint32_t
rng(uint32_t n)
{
	/* xorshift64*: reproducible from the seed printed on failure */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return (uint32_t)((rng_state * 0x2545f4914f6cdd1dULL) >> 32) % n;
}

/* A name of 1..maxlabels labels over a small alphabet, so that entries
 * and queries meet often; upper case when upper. */
static void
rand_name(char *out, size_t size, unsigned maxlabels, bool upper)
{
	static const char *labels[] = { "a", "b", "c", "ab", "x-y", "_s",
	    "www", "api", "a1" };
	static const char *tlds[] = { "test", "com" };
	size_t off = 0;
	unsigned n = 1 + rng(maxlabels), i;
	char *c;

	out[0] = '\0';
	for (i = 0; i < n; i++)
		off += (size_t)snprintf(out + off, size - off, "%s.",
		    labels[rng(sizeof(labels) / sizeof(labels[0]))]);
	snprintf(out + off, size - off, "%s", tlds[rng(2)]);
	if (upper)
		for (c = out; *c != '\0'; c++)
			if (*c >= 'a' && *c <= 'z' && rng(3) == 0)
				*c = (char)(*c - 'a' + 'A');
}

static const uint16_t rand_ports[] = { 80, 443, 8443, 22, 53, 1, 65535 };

static size_t
rand_domain(char *out, size_t size, bool denied)
{
	char name[128];
	size_t off = 0;

	if (denied && rng(40) == 0)
		return (size_t)snprintf(out, size, "*");
	rand_name(name, sizeof(name), 3, true);
	if (rng(3) == 0)
		off += (size_t)snprintf(out + off, size - off, "*.");
	off += (size_t)snprintf(out + off, size - off, "%s%s", name,
	    rng(8) == 0 ? "." : "");
	if (rng(2) == 0) {
		off += (size_t)snprintf(out + off, size - off, ":%u",
		    rand_ports[rng(5)]);
		if (!denied && rng(4) == 0)
			off += (size_t)snprintf(out + off, size - off, "%s",
			    rng(2) ? "/tls" : "/http");
	}
	return off;
}

/* Addresses from 10.0-1.0-3.0-7 and a few around, so CIDRs overlap. */
static uint32_t
rand_addr(void)
{
	if (rng(10) == 0)
		return HIP(rng(256), rng(256), rng(256), rng(256));
	return HIP(10, rng(2), rng(4), rng(8));
}

static size_t
rand_cidr(char *out, size_t size)
{
	static const unsigned lens[] = { 0, 8, 16, 23, 24, 29, 30, 31, 32 };
	unsigned len = lens[rng(sizeof(lens) / sizeof(lens[0]))];
	uint32_t a = rand_addr(), mask;
	size_t off;

	mask = len == 0 ? 0 : UINT32_C(0xffffffff) << (32 - len);
	a &= mask;
	off = (size_t)snprintf(out, size, "%u.%u.%u.%u/%u", a >> 24,
	    a >> 16 & 0xff, a >> 8 & 0xff, a & 0xff, len);
	switch (rng(4)) {
	case 0:
		break;
	case 1:
		off += (size_t)snprintf(out + off, size - off, ":%u",
		    rand_ports[rng(5)]);
		break;
	case 2:
		off += (size_t)snprintf(out + off, size - off, ":1-1024");
		break;
	default:
		off += (size_t)snprintf(out + off, size - off, ":443-8443");
		break;
	}
	return off;
}

/* A random policy of up to max entries per list, as JSON. */
static char *
rand_policy(size_t max)
{
	static const char *lists[] = { "allowedDomains", "deniedDomains" };
	size_t cap = 128 + 3 * max * 64, off = 0, n, i, l;
	char *json = malloc(cap);

	assert_non_null(json);
	off += (size_t)snprintf(json + off, cap - off, "{\"network\": {");
	for (l = 0; l < 2; l++) {
		n = l == 1 && rng(2) ? rng(3) : rng((uint32_t)max + 1);
		off += (size_t)snprintf(json + off, cap - off, "%s\"%s\": [",
		    l ? ", " : "", lists[l]);
		for (i = 0; i < n; i++) {
			if (i > 0)
				json[off++] = ',';
			json[off++] = '"';
			off += rand_domain(json + off, cap - off, l == 1);
			json[off++] = '"';
		}
		off += (size_t)snprintf(json + off, cap - off, "]");
	}
	off += (size_t)snprintf(json + off, cap - off,
	    "}, \"sluice\": {\"allowedCidrs\": [");
	n = rng((uint32_t)max + 1);
	for (i = 0; i < n; i++) {
		if (i > 0)
			json[off++] = ',';
		json[off++] = '"';
		off += rand_cidr(json + off, cap - off);
		json[off++] = '"';
	}
	snprintf(json + off, cap - off, "]}}");
	return json;
}

static void
compare_one(const struct policy *p, unsigned seed)
{
	static const int ports[] = { -1, 80, 443, 8443, 22, 53, 1, 0, 65535 };
	const struct policy_domain *want_rule, *got_rule;
	const struct policy_cidr *want_c, *got_c;
	enum policy_name_verdict want, got;
	char name[256];
	uint32_t a;
	uint16_t port;
	bool want_am, got_am;
	int q, np;

	for (q = 0; q < 200; q++) {
		if (rng(4) == 0 && p->nallowed + p->ndenied > 0) {
			/* an entry's own name, or one right under it */
			size_t k = rng((uint32_t)(p->nallowed + p->ndenied));
			const struct policy_domain *d = k < p->nallowed ?
			    &p->allowed[k] : &p->denied[k - p->nallowed];

			snprintf(name, sizeof(name), "%s%s", rng(2) ? "" :
			    "z.", d->name);
		} else {
			rand_name(name, sizeof(name), 5, false);
		}
		/* names no resolver would pass on must not confuse it */
		if (rng(10) == 0) {
			char odd[sizeof(name)];

			snprintf(odd, sizeof(odd), "%s", name);
			switch (rng(3)) {
			case 0:
				snprintf(name, sizeof(name), ".%.250s", odd);
				break;
			case 1:
				snprintf(name, sizeof(name), "%.250s.", odd);
				break;
			default:
				snprintf(name, sizeof(name), "a..%.250s", odd);
				break;
			}
		}
		np = ports[rng(sizeof(ports) / sizeof(ports[0]))];
		want = linear_match_name(p, name, np, &want_rule);
		got = policy_match_name(p, name, np, &got_rule);
		if (want != got || want_rule != got_rule)
			fail_msg("seed %u: %s port %d: want %d %s, got %d %s",
			    seed, name, np, want, want_rule ? want_rule->text :
			    "-", got, got_rule ? got_rule->text : "-");

		a = htonl(rand_addr());
		port = (uint16_t)(rng(3) ? rand_ports[rng(7)] : rng(65536));
		want_c = linear_match_cidr(p, a, port, &want_am);
		got_am = !want_am;
		got_c = policy_match_cidr(p, a, port, &got_am);
		if (want_c != got_c || want_am != got_am)
			fail_msg("seed %u: %08x port %u: want %s/%d, got %s/%d",
			    seed, ntohl(a), port, want_c ? want_c->text : "-",
			    want_am, got_c ? got_c->text : "-", got_am);
		assert_int_equal(policy_covers_addr(p, a),
		    linear_covers_addr(p, a));
	}
}

/*
 * Random policies over a small alphabet of names, ports and addresses (so
 * entries overlap, repeat and shadow each other) must give the very
 * verdict and entry that the scan in list order gave.
 */
static void
test_index_vs_linear(void **state)
{
	struct policy *p;
	unsigned seed;
	char *json;

	(void)state;
	for (seed = 1; seed <= 3000; seed++) {
		rng_state = 0x9e3779b97f4a7c15ULL * seed;
		json = rand_policy(seed % 50 == 0 ? 2000 : 40);
		p = parse_ok(json);
		compare_one(p, seed);
		policy_free(p);
		free(json);
	}
}

/* An entry's strings belong to the policy: a normalised name shares its
 * entry's text, any other is a copy; nothing points into the JSON. */
static void
test_entry_strings(void **state)
{
	static const char json[] = "{\"network\": {\"allowedDomains\": "
	    "[\"a.test\", \"*.b.test\", \"C.test\", \"d.test:443\", "
	    "\"*.e.test.\"]}, \"sluice\": {\"allowedCidrs\": [\"10.0.0.0/8\"]}}";
	struct policy *p;
	char *copy;

	(void)state;
	copy = strdup(json);
	assert_non_null(copy);
	p = parse_ok(copy);
	memset(copy, 'x', strlen(copy));
	free(copy);
	assert_ptr_equal(p->allowed[0].name, p->allowed[0].text);
	assert_ptr_equal(p->allowed[1].name, p->allowed[1].text + 2);
	assert_string_equal(p->allowed[1].name, "b.test");
	assert_string_equal(p->allowed[2].name, "c.test");
	assert_string_equal(p->allowed[2].text, "C.test");
	assert_string_equal(p->allowed[3].name, "d.test");
	assert_string_equal(p->allowed[3].text, "d.test:443");
	assert_string_equal(p->allowed[4].name, "e.test");
	assert_string_equal(p->allowed[4].text, "*.e.test.");
	assert_string_equal(p->cidrs[0].text, "10.0.0.0/8");
	/* the policy's own copy of the document is another block */
	assert_true(p->allowed[0].text < p->text ||
	    p->allowed[0].text >= p->text + p->textlen);
	policy_free(p);
}

/* policy_names_port: every port an allowedDomains entry admits, and only
 * those (80 and 443 always: a name without a port admits both) */
static void
test_names_port(void **state)
{
	struct policy *p;

	(void)state;
	p = parse_ok("{\"network\": {\"allowedDomains\": [\"a.test:8443\","
	    " \"*.b.test:22\", \"c.test:8443\"],"
	    " \"deniedDomains\": [\"d.test:2222\"]}}");
	assert_true(policy_names_port(p, 80));
	assert_true(policy_names_port(p, 443));
	assert_true(policy_names_port(p, 22));
	assert_true(policy_names_port(p, 8443));
	assert_false(policy_names_port(p, 2222));	/* denied only */
	assert_false(policy_names_port(p, 21));
	assert_false(policy_names_port(p, 8444));
	assert_false(policy_names_port(p, 0));
	policy_free(p);
	p = parse_ok("{}");
	assert_false(policy_names_port(p, 22));
	assert_true(policy_names_port(p, 443));
	policy_free(p);
}

/*
 * Names chosen to share the index's low hash bits, as the hash was before
 * it was seeded (FNV-1a from the name's end, a fixed final mix): all in
 * one cluster of the table, so that loading 90,000 of them took 3 s under
 * the lock every verdict takes, and a lookup probed them all (found by
 * review, 2026-12-03). Seeded, they spread like any names.
 */
static uint32_t
unseeded_hash(const char *name)
{
	uint32_t h = 2166136261u;
	size_t i = strlen(name);

	while (i-- > 0)
		h = (h ^ (unsigned char)name[i]) * 16777619u;
	h ^= h >> 16;
	h *= 0x85ebca6bu;
	h ^= h >> 13;
	h *= 0xc2b2ae35u;
	h ^= h >> 16;
	return h;
}

#define CLUSTER_N	3000	/* runs: a table of 8,192 slots */
#define CLUSTER_MASK	8191u

static void
test_index_seeded(void **state)
{
	static const char al[] = "abcdefghijklmnopqrstuvwxyz0123456789";
	char *text, *p, name[8], err[256];
	struct policy *pol;
	const struct policy_domain *rule;
	uint64_t ctr = 0, x;
	int n = 0, i;

	(void)state;
	text = malloc(CLUSTER_N * 12 + 64);
	assert_non_null(text);
	p = text + sprintf(text, "{\"network\":{\"allowedDomains\":[");
	while (n < CLUSTER_N) {
		for (x = ctr++, i = 0; i < 7; i++, x /= 36)
			name[i] = al[x % 36];
		name[7] = '\0';
		if ((unseeded_hash(name) & CLUSTER_MASK) >= 32)
			continue;
		p += sprintf(p, "%s\"%s\"", n++ ? "," : "", name);
	}
	strcpy(p, "]}}");
	pol = policy_parse(text, strlen(text), "clustered.json", err,
	    sizeof(err));
	free(text);
	assert_non_null(pol);
	/* unseeded: one cluster of CLUSTER_N; at half load, a few dozen */
	assert_true(policy_probe_max(pol) < 100);
	assert_int_equal(policy_match_name(pol, "aaaaaaa.test", 443, &rule),
	    POLICY_NAME_NOT_ALLOWED);
	policy_free(pol);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_empty_object),
		cmocka_unit_test(test_sha256_exact_text),
		cmocka_unit_test(test_full_policy),
		cmocka_unit_test(test_mode),
		cmocka_unit_test(test_syntax_errors),
		cmocka_unit_test(test_top_level),
		cmocka_unit_test(test_unknown_keys),
		cmocka_unit_test(test_wrong_types),
		cmocka_unit_test(test_bad_cidrs),
		cmocka_unit_test(test_bad_domains),
		cmocka_unit_test(test_domain_inspect),
		cmocka_unit_test(test_long_entries),
		cmocka_unit_test(test_locator),
		cmocka_unit_test(test_limits),
		cmocka_unit_test(test_load),
		cmocka_unit_test(test_match_cidr),
		cmocka_unit_test(test_match_name),
		cmocka_unit_test(test_index_vs_linear),
		cmocka_unit_test(test_entry_strings),
		cmocka_unit_test(test_names_port),
		cmocka_unit_test(test_index_seeded),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
