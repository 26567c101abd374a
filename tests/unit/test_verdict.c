/* test_verdict.c: gw_decide over parsed policies. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <cmocka.h>

#include "gateway/verdict.h"

static uint32_t
ip(const char *s)
{
	struct in_addr a;

	assert_int_equal(inet_pton(AF_INET, s, &a), 1);
	return a.s_addr;
}

static struct policy *
parse(const char *text)
{
	char err[256];
	struct policy *p = policy_parse(text, strlen(text), "t.json", err,
	    sizeof(err));

	if (p == NULL)
		fail_msg("%s", err);
	return p;
}

static struct dns_bindings *bindings;	/* NULL unless a test sets it */
static uint64_t now = 1000;

static void
decide(const struct policy *p, uint8_t proto, const char *src,
    const char *dst, uint16_t dport, struct gw_decision *d)
{
	struct gw_decide_ctx ctx = {
		.policy = p,
		.sandbox_addr = ip("10.213.0.2"),
		.pool_net = ip("10.213.0.0"),
		.pool_mask = htonl(0xffff0000u),
		.uplink = { ip("198.51.100.2"), ip("198.51.100.1") },
		.bindings = bindings,
		.sandbox_id = 7,
		.now_ms = now,
	};
	struct nfq_tuple t;

	memset(&t, 0, sizeof(t));
	t.proto = proto;
	t.saddr = ip(src);
	t.daddr = ip(dst);
	t.sport = 40000;
	t.dport = dport;
	gw_decide(&ctx, &t, d);
}

static const char enforce[] =
    "{\"sluice\":{\"allowedCidrs\":[\"192.0.2.0/24:443\",\"198.51.100.7:5432\","
    "\"203.0.113.0/28\"]}}";

static void
test_allowed_cidr(void **state)
{
	struct policy *p = parse(enforce);
	struct gw_decision d;

	(void)state;
	decide(p, IPPROTO_TCP, "10.213.0.2", "192.0.2.10", 443, &d);
	assert_int_equal(d.verdict, GW_ALLOW);
	assert_string_equal(gw_reason_name(d.reason), "allowed_cidr");
	assert_string_equal(d.rule, "192.0.2.0/24:443");

	decide(p, IPPROTO_TCP, "10.213.0.2", "198.51.100.7", 5432, &d);
	assert_int_equal(d.verdict, GW_ALLOW);
	assert_string_equal(d.rule, "198.51.100.7:5432");

	/* no port: any TCP port */
	decide(p, IPPROTO_TCP, "10.213.0.2", "203.0.113.15", 1, &d);
	assert_int_equal(d.verdict, GW_ALLOW);
	assert_string_equal(d.rule, "203.0.113.0/28");
	policy_free(p);
}

static void
test_denials(void **state)
{
	struct policy *p = parse(enforce);
	struct gw_decision d;

	(void)state;
	decide(p, IPPROTO_TCP, "10.213.0.2", "192.0.2.10", 80, &d);
	assert_int_equal(d.verdict, GW_DENY);
	assert_string_equal(gw_reason_name(d.reason), "port_not_allowed");
	assert_null(d.rule);

	decide(p, IPPROTO_TCP, "10.213.0.2", "203.0.113.16", 443, &d);
	assert_int_equal(d.verdict, GW_DENY);
	assert_string_equal(gw_reason_name(d.reason), "not_allowlisted");

	decide(p, IPPROTO_UDP, "10.213.0.2", "192.0.2.10", 443, &d);
	assert_int_equal(d.verdict, GW_DENY);
	assert_string_equal(gw_reason_name(d.reason), "quic");

	decide(p, IPPROTO_UDP, "10.213.0.2", "192.0.2.10", 4433, &d);
	assert_int_equal(d.verdict, GW_DENY);
	assert_string_equal(gw_reason_name(d.reason), "proto_not_allowed");

	decide(p, IPPROTO_ICMP, "10.213.0.2", "192.0.2.10", 0, &d);
	assert_int_equal(d.verdict, GW_DENY);
	assert_string_equal(gw_reason_name(d.reason), "proto_not_allowed");

	/* another sandbox, or the gateway: never, whatever the CIDRs say */
	decide(p, IPPROTO_TCP, "10.213.0.2", "10.213.0.6", 443, &d);
	assert_int_equal(d.verdict, GW_DENY);
	assert_string_equal(gw_reason_name(d.reason), "internal_destination");

	decide(p, IPPROTO_TCP, "10.213.0.6", "192.0.2.10", 443, &d);
	assert_int_equal(d.verdict, GW_DENY);
	assert_string_equal(gw_reason_name(d.reason), "spoofed_source");
	policy_free(p);
}

static void
test_internal_beats_cidr(void **state)
{
	struct policy *p = parse("{\"sluice\":{\"allowedCidrs\":[\"0.0.0.0/0\"]}}");
	struct gw_decision d;

	(void)state;
	decide(p, IPPROTO_TCP, "10.213.0.2", "10.213.0.1", 22, &d);
	assert_int_equal(d.verdict, GW_DENY);
	assert_string_equal(gw_reason_name(d.reason), "internal_destination");
	decide(p, IPPROTO_TCP, "10.213.0.2", "192.0.2.1", 22, &d);
	assert_int_equal(d.verdict, GW_ALLOW);
	/* the gateway's uplink address and its peer, outside every range
	 * the pool or the rebinding list names (--uplink-addr) */
	decide(p, IPPROTO_TCP, "10.213.0.2", "198.51.100.2", 80, &d);
	assert_int_equal(d.verdict, GW_DENY);
	assert_string_equal(gw_reason_name(d.reason), "internal_destination");
	decide(p, IPPROTO_TCP, "10.213.0.2", "198.51.100.1", 22, &d);
	assert_int_equal(d.verdict, GW_DENY);
	assert_string_equal(gw_reason_name(d.reason), "internal_destination");
	decide(p, IPPROTO_UDP, "10.213.0.2", "198.51.100.1", 123, &d);
	assert_string_equal(gw_reason_name(d.reason), "internal_destination");
	/* their neighbours are not */
	decide(p, IPPROTO_TCP, "10.213.0.2", "198.51.100.3", 80, &d);
	assert_int_equal(d.verdict, GW_ALLOW);
	policy_free(p);
}

static void
test_audit(void **state)
{
	struct policy *p = parse("{\"sluice\":{\"mode\":\"audit\","
	    "\"allowedCidrs\":[\"192.0.2.10:443\"]}}");
	struct gw_decision d;

	(void)state;
	decide(p, IPPROTO_TCP, "10.213.0.2", "192.0.2.10", 443, &d);
	assert_int_equal(d.verdict, GW_ALLOW);
	decide(p, IPPROTO_TCP, "10.213.0.2", "203.0.113.66", 4444, &d);
	assert_int_equal(d.verdict, GW_AUDIT);
	assert_string_equal(gw_verdict_name(d.verdict), "audit");
	assert_string_equal(gw_reason_name(d.reason), "not_allowlisted");
	decide(p, IPPROTO_UDP, "10.213.0.2", "203.0.113.66", 5000, &d);
	assert_int_equal(d.verdict, GW_AUDIT);
	assert_string_equal(gw_reason_name(d.reason), "proto_not_allowed");
	/* a forged source is denied even in audit mode */
	decide(p, IPPROTO_TCP, "192.0.2.99", "192.0.2.10", 443, &d);
	assert_int_equal(d.verdict, GW_DENY);
	policy_free(p);
}

static void
test_empty_policy(void **state)
{
	struct policy *p = parse("{}");
	struct gw_decision d;

	(void)state;
	decide(p, IPPROTO_TCP, "10.213.0.2", "192.0.2.10", 443, &d);
	assert_int_equal(d.verdict, GW_DENY);
	assert_string_equal(gw_reason_name(d.reason), "not_allowlisted");
	policy_free(p);
}

static void
test_names(void **state)
{
	(void)state;
	assert_string_equal(gw_verdict_name(GW_ALLOW), "allow");
	assert_string_equal(gw_verdict_name(GW_DENY), "deny");
	assert_string_equal(gw_reason_name(GW_R_LOG_UNAVAILABLE), "log_unavailable");
	assert_string_equal(gw_reason_name(GW_R_UNKNOWN_SANDBOX), "unknown_sandbox");
	assert_string_equal(gw_reason_name(GW_R_MALFORMED_PACKET), "malformed_packet");
	assert_string_equal(gw_reason_name(GW_R_COUNT), "unknown");
}

static void
test_dns_bypass(void **state)
{
	struct policy *p = parse("{\"sluice\":{\"allowedCidrs\":[\"0.0.0.0/0\"]}}");
	struct gw_decision d;

	(void)state;
	/* another resolver, even under an all-covering CIDR */
	decide(p, IPPROTO_UDP, "10.213.0.2", "198.51.100.53", 53, &d);
	assert_string_equal(gw_reason_name(d.reason), "dns_bypass");
	assert_int_equal(d.verdict, GW_DENY);
	decide(p, IPPROTO_TCP, "10.213.0.2", "198.51.100.53", 53, &d);
	assert_string_equal(gw_reason_name(d.reason), "dns_bypass");
	decide(p, IPPROTO_TCP, "10.213.0.2", "198.51.100.53", 853, &d);
	assert_string_equal(gw_reason_name(d.reason), "dns_bypass");
	decide(p, IPPROTO_UDP, "10.213.0.2", "198.51.100.53", 853, &d);
	assert_string_equal(gw_reason_name(d.reason), "dns_bypass");
	decide(p, IPPROTO_TCP, "10.213.0.2", "198.51.100.53", 443, &d);
	assert_int_equal(d.verdict, GW_ALLOW);
	policy_free(p);
}

static void
bind_addr(uint32_t sandbox, const char *addr, const char *name, uint64_t until)
{
	assert_int_equal(dns_bindings_add(bindings, sandbox, ip(addr), name, now,
	    until), 0);
}

static void
test_bindings(void **state)
{
	struct policy *p = parse("{\"network\":{\"allowedDomains\":[\"a.test\","
	    "\"db.test:5432\",\"*.cdn.test\"],\"deniedDomains\":[\"bad.cdn.test\"]},"
	    "\"sluice\":{\"allowedCidrs\":[\"198.51.100.0/24:22\"]}}");
	struct gw_decision d;

	(void)state;
	bindings = dns_bindings_new(&(struct dns_bindings_bounds){
	    .total = 64, .per_sandbox = 16 });
	assert_non_null(bindings);
	now = 1000;

	/* never resolved */
	decide(p, IPPROTO_TCP, "10.213.0.2", "192.0.2.10", 443, &d);
	assert_int_equal(d.verdict, GW_DENY);
	assert_string_equal(gw_reason_name(d.reason), "no_dns_binding");
	assert_string_equal(d.name, "");

	bind_addr(7, "192.0.2.10", "a.test", 5000);
	decide(p, IPPROTO_TCP, "10.213.0.2", "192.0.2.10", 443, &d);
	assert_int_equal(d.verdict, GW_ALLOW);
	assert_string_equal(gw_reason_name(d.reason), "allowed_domain");
	assert_string_equal(d.rule, "a.test");
	assert_string_equal(d.name, "a.test");
	decide(p, IPPROTO_TCP, "10.213.0.2", "192.0.2.10", 80, &d);
	assert_int_equal(d.verdict, GW_ALLOW);
	/* a name without a port: 443 and 80 only */
	decide(p, IPPROTO_TCP, "10.213.0.2", "192.0.2.10", 8443, &d);
	assert_int_equal(d.verdict, GW_DENY);
	assert_string_equal(gw_reason_name(d.reason), "port_not_allowed");
	assert_string_equal(d.name, "a.test");

	/* name:port is exactly that port */
	bind_addr(7, "198.51.100.7", "db.test", 5000);
	decide(p, IPPROTO_TCP, "10.213.0.2", "198.51.100.7", 5432, &d);
	assert_int_equal(d.verdict, GW_ALLOW);
	assert_string_equal(d.rule, "db.test:5432");
	decide(p, IPPROTO_TCP, "10.213.0.2", "198.51.100.7", 443, &d);
	assert_string_equal(gw_reason_name(d.reason), "port_not_allowed");
	/* the CIDR still answers for its own port */
	decide(p, IPPROTO_TCP, "10.213.0.2", "198.51.100.7", 22, &d);
	assert_string_equal(gw_reason_name(d.reason), "allowed_cidr");

	/* another sandbox's binding is not ours */
	bind_addr(8, "192.0.2.20", "a.test", 5000);
	decide(p, IPPROTO_TCP, "10.213.0.2", "192.0.2.20", 443, &d);
	assert_string_equal(gw_reason_name(d.reason), "no_dns_binding");

	/* one address, two names: the one that admits wins */
	bind_addr(7, "203.0.113.5", "bad.cdn.test", 5000);
	decide(p, IPPROTO_TCP, "10.213.0.2", "203.0.113.5", 443, &d);
	assert_string_equal(gw_reason_name(d.reason), "denied_domain");
	assert_string_equal(d.rule, "bad.cdn.test");
	bind_addr(7, "203.0.113.5", "img.cdn.test", 5000);
	decide(p, IPPROTO_TCP, "10.213.0.2", "203.0.113.5", 443, &d);
	assert_int_equal(d.verdict, GW_ALLOW);
	assert_string_equal(d.name, "img.cdn.test");
	assert_string_equal(d.rule, "*.cdn.test");

	/* expiry: dead from its deadline on */
	now = 4999;
	decide(p, IPPROTO_TCP, "10.213.0.2", "192.0.2.10", 443, &d);
	assert_int_equal(d.verdict, GW_ALLOW);
	now = 5000;
	decide(p, IPPROTO_TCP, "10.213.0.2", "192.0.2.10", 443, &d);
	assert_string_equal(gw_reason_name(d.reason), "no_dns_binding");

	dns_bindings_free(bindings);
	bindings = NULL;
	policy_free(p);
}

/* ---- DNS --------------------------------------------------------------- */

/* An upstream's answer for name with rcode and the A records addrs. */
static void
response(struct dns_response *r, const char *name, unsigned rcode,
    const char *const *addrs)
{
	memset(r, 0, sizeof(*r));
	snprintf(r->qname, sizeof(r->qname), "%s", name);
	r->qtype = DNS_T_A;
	r->qclass = 1;
	r->rcode = (uint8_t)rcode;
	r->flags = 0x8180 | rcode;
	for (; *addrs != NULL; addrs++) {
		struct dns_rr *rr = &r->rr[r->nrr++];

		snprintf(rr->name, sizeof(rr->name), "%s", name);
		rr->type = DNS_T_A;
		rr->ttl = 60;
		assert_int_equal(inet_pton(AF_INET, *addrs, rr->data.a), 1);
	}
}

static bool
any_binding(void *arg, const char *name, uint64_t expires_ms)
{
	(void)arg;
	(void)name;
	(void)expires_ms;
	return true;
}

static bool
bound(const char *addr)
{
	return dns_bindings_find(bindings, 7, ip(addr), now, any_binding, NULL);
}

static void
filter(const struct policy *p, struct dns_response *r, char *answers,
    char *stripped)
{
	struct gw_dns_limits lim = {
		.ttl_min = 30, .ttl_max = 600, .grace = 10,
		.pool_net = ip("10.213.0.0"),
		.pool_mask = htonl(0xffff0000u),
		.uplink = { ip("198.51.100.2"), ip("198.51.100.1") },
	};

	assert_false(gw_dns_filter(p, bindings, 7, &lim, r->qname, r, now,
	    answers, 400, stripped, 200));
}

/*
 * Only a NOERROR answer's records are passed on and bound: an upstream's
 * NXDOMAIN or SERVFAIL that carries A records goes to the sandbox with
 * its rcode (SERVFAIL for any error but NXDOMAIN) and nothing else.
 */
static void
test_dns_upstream_rcode(void **state)
{
	static const char *const one[] = { "203.0.113.115", NULL };
	struct policy *p = parse("{\"network\":{\"allowedDomains\":[\"*.up.test\"]}}");
	struct dns_response r;
	char answers[400], stripped[200];
	static const unsigned errors[] = { DNS_R_NXDOMAIN, DNS_R_SERVFAIL,
	    DNS_R_FORMERR, DNS_R_NOTIMP, DNS_R_REFUSED, 9 };
	size_t i;

	(void)state;
	bindings = dns_bindings_new(&(struct dns_bindings_bounds){
	    .total = 64, .per_sandbox = 16 });
	assert_non_null(bindings);
	now = 1000;
	for (i = 0; i < sizeof(errors) / sizeof(errors[0]); i++) {
		response(&r, "nx.up.test", errors[i], one);
		assert_int_equal(gw_dns_rcode(&r), errors[i] == DNS_R_NXDOMAIN ?
		    DNS_R_NXDOMAIN : DNS_R_SERVFAIL);
		filter(p, &r, answers, stripped);
		assert_int_equal(r.nrr, 0);
		assert_string_equal(answers, "");
		assert_false(bound("203.0.113.115"));
	}
	/* the same records under NOERROR are the answer */
	response(&r, "ok.up.test", DNS_R_NOERROR, one);
	assert_int_equal(gw_dns_rcode(&r), DNS_R_NOERROR);
	filter(p, &r, answers, stripped);
	assert_int_equal(r.nrr, 1);
	assert_string_equal(answers, "203.0.113.115");
	assert_true(bound("203.0.113.115"));
	dns_bindings_free(bindings);
	bindings = NULL;
	policy_free(p);
}

/* The gateway's uplink address and its peer are stripped from answers
 * like the pool, unless allowedCidrs names them for every port: an entry
 * with a port does not keep them (an address kept for a name is reachable
 * on the name's ports; found by review, 2026-12-03). */
static void
test_dns_strip_uplink(void **state)
{
	static const char *const addrs[] = { "198.51.100.2", "198.51.100.1",
	    "10.213.0.6", "198.51.100.3", NULL };
	struct policy *p = parse("{\"network\":{\"allowedDomains\":[\"*.up.test\"]}}");
	struct policy *named = parse("{\"network\":{\"allowedDomains\":"
	    "[\"*.up.test\"]},\"sluice\":{\"allowedCidrs\":[\"198.51.100.0/30\"]}}");
	struct policy *ported = parse("{\"network\":{\"allowedDomains\":"
	    "[\"*.up.test\"]},\"sluice\":{\"allowedCidrs\":[\"198.51.100.0/30:80\","
	    "\"10.0.0.5:5432\"]}}");
	struct dns_response r;
	char answers[400], stripped[200];

	(void)state;
	bindings = dns_bindings_new(&(struct dns_bindings_bounds){
	    .total = 64, .per_sandbox = 16 });
	assert_non_null(bindings);
	now = 1000;
	response(&r, "rebind.up.test", DNS_R_NOERROR, addrs);
	filter(p, &r, answers, stripped);
	assert_string_equal(answers, "198.51.100.3");
	assert_string_equal(stripped, "198.51.100.2,198.51.100.1,10.213.0.6");
	assert_int_equal(r.nrr, 1);
	assert_false(bound("198.51.100.2"));
	assert_false(bound("198.51.100.1"));
	response(&r, "rebind.up.test", DNS_R_NOERROR, addrs);
	filter(named, &r, answers, stripped);
	assert_string_equal(answers, "198.51.100.2,198.51.100.1,198.51.100.3");
	assert_string_equal(stripped, "10.213.0.6");
	response(&r, "rebind.up.test", DNS_R_NOERROR, addrs);
	filter(ported, &r, answers, stripped);
	assert_string_equal(answers, "198.51.100.3");
	assert_string_equal(stripped, "198.51.100.2,198.51.100.1,10.213.0.6");
	/* a private address a CIDR entry allows on one port: stripped, so
	 * the name cannot reach it on 443 */
	{
		static const char *const priv[] = { "10.0.0.5", NULL };
		struct gw_decision d;

		response(&r, "rebind.up.test", DNS_R_NOERROR, priv);
		filter(ported, &r, answers, stripped);
		assert_string_equal(answers, "");
		assert_string_equal(stripped, "10.0.0.5");
		decide(ported, IPPROTO_TCP, "10.213.0.2", "10.0.0.5", 443, &d);
		assert_int_equal(d.verdict, GW_DENY);
		decide(ported, IPPROTO_TCP, "10.213.0.2", "10.0.0.5", 5432, &d);
		assert_int_equal(d.verdict, GW_ALLOW);
	}
	dns_bindings_free(bindings);
	bindings = NULL;
	policy_free(p);
	policy_free(named);
	policy_free(ported);
}

/*
 * What a query is answered. Audit mode forwards what enforce mode would
 * refuse, deniedDomains included, and logs it as it would be decided; a
 * name that is no host name (the root among them) is NXDOMAIN,
 * not_allowlisted, and never forwarded, whatever the mode.
 */
static void
test_dns_decide(void **state)
{
	static const char pol[] = "{\"network\":{\"allowedDomains\":"
	    "[\"*.up.test\"],\"deniedDomains\":[\"bad.up.test\"]}%s}";
	char text[256];
	struct policy *enf, *aud;
	struct gw_dns_decision dd;

	(void)state;
	snprintf(text, sizeof(text), pol, "");
	enf = parse(text);
	snprintf(text, sizeof(text), pol, ",\"sluice\":{\"mode\":\"audit\"}");
	aud = parse(text);

	gw_dns_decide(enf, "www.up.test", true, DNS_T_A, 1, &dd);
	assert_int_equal(dd.action, GW_DNS_FORWARD);
	assert_string_equal(dd.reason, "allowed_domain");
	gw_dns_decide(enf, "bad.up.test", true, DNS_T_A, 1, &dd);
	assert_int_equal(dd.action, GW_DNS_ANSWER);
	assert_int_equal(dd.rcode, DNS_R_NXDOMAIN);
	assert_string_equal(dd.verdict, "deny");
	assert_string_equal(dd.reason, "denied_domain");
	assert_string_equal(dd.rule, "bad.up.test");
	gw_dns_decide(aud, "bad.up.test", true, DNS_T_A, 1, &dd);
	assert_int_equal(dd.action, GW_DNS_FORWARD);
	assert_string_equal(dd.verdict, "audit");
	assert_string_equal(dd.reason, "denied_domain");
	assert_string_equal(dd.rule, "bad.up.test");
	gw_dns_decide(aud, "other.test", true, DNS_T_A, 1, &dd);
	assert_int_equal(dd.action, GW_DNS_FORWARD);
	assert_string_equal(dd.verdict, "audit");
	assert_string_equal(dd.reason, "not_allowlisted");

	/* the root, or any name that is no host name */
	gw_dns_decide(enf, "", false, DNS_T_A, 1, &dd);
	assert_int_equal(dd.action, GW_DNS_ANSWER);
	assert_int_equal(dd.rcode, DNS_R_NXDOMAIN);
	assert_string_equal(dd.reason, "not_allowlisted");
	gw_dns_decide(aud, "", false, DNS_T_A, 1, &dd);
	assert_int_equal(dd.action, GW_DNS_ANSWER);
	assert_int_equal(dd.rcode, DNS_R_NXDOMAIN);
	assert_string_equal(dd.verdict, "deny");
	assert_string_equal(dd.reason, "not_allowlisted");

	/* another class than IN: logged as its type, type_not_allowed */
	gw_dns_decide(enf, "www.up.test", true, DNS_T_A, 3, &dd);
	assert_int_equal(dd.action, GW_DNS_ANSWER);
	assert_int_equal(dd.rcode, DNS_R_REFUSED);
	assert_string_equal(dd.reason, "type_not_allowed");
	policy_free(enf);
	policy_free(aud);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_allowed_cidr),
		cmocka_unit_test(test_denials),
		cmocka_unit_test(test_internal_beats_cidr),
		cmocka_unit_test(test_audit),
		cmocka_unit_test(test_empty_policy),
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_dns_bypass),
		cmocka_unit_test(test_bindings),
		cmocka_unit_test(test_dns_upstream_rcode),
		cmocka_unit_test(test_dns_strip_uplink),
		cmocka_unit_test(test_dns_decide),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
