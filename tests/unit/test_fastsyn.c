/* test_fastsyn.c: nfq_fastsyn_* against the kernel's nftables set, in a
 * private network namespace. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <cmocka.h>

#include "tests/unit/testns.h"

#include "nfq/nfq.h"

/*
 * The binary moves into a network namespace of its own and makes
 *   table ip t { set s { type iface_index . ipv4_addr . ipv4_addr .
 *   inet_service; flags timeout; } }
 * as sluiced's ruleset does (gateway/ruleset.c). Needs root and nft;
 * skips otherwise.
 */

static const char *env_skip;
static char rules[] = "/tmp/test_fastsyn.XXXXXX";

static int
group_setup(void **state)
{
	char *const nft[] = { "nft", "-f", rules, NULL };
	FILE *f;
	int fd, rc;

	(void)state;
	if ((env_skip = testns_enter()) != NULL)
		return 0;
	if ((fd = mkstemp(rules)) == -1 || (f = fdopen(fd, "w")) == NULL) {
		env_skip = "cannot write the ruleset's file";
		return 0;
	}
	fprintf(f, "table ip t {\n set s {\n"
	    "  type iface_index . ipv4_addr . ipv4_addr . inet_service\n"
	    "  flags timeout\n }\n}\n");
	fclose(f);
	if ((rc = testns_run(nft)) != 0)
		env_skip = rc == 127 ? "nft not found" : "nft -f failed";
	(void)unlink(rules);
	return 0;
}

#define NEED_ENV()	TESTNS_SKIP_IF(env_skip)

#define IFX	1
#define SRC	0x0a000002u	/* 10.0.0.2 */
#define DST	0xc0000201u	/* 192.0.2.1 */
#define T0	100000		/* ms: a moment on sluiced's clock */

/* Whether the set holds (IFX, SRC, DST, port), asked of nft itself. */
static bool
in_set(uint16_t port)
{
	char elem[96];
	char *const argv[] = { "nft", "get", "element", "ip", "t", "s", elem,
	    NULL };

	snprintf(elem, sizeof(elem), "{ 1 . 10.0.0.2 . 192.0.2.1 . %u }",
	    port);
	return testns_run(argv) == 0;
}

static struct nfq_fastsyn *
open_set(void)
{
	struct nfq_fastsyn *fs;
	char err[256];

	fs = nfq_fastsyn_open("t", "s", err, sizeof(err));
	if (fs == NULL)
		fail_msg("open: %s", err);
	return fs;
}

/* Deletes (IFX, SRC, DST, port) at ms on sluiced's clock. */
static int
del(struct nfq_fastsyn *fs, uint16_t port, uint64_t ms)
{
	return nfq_fastsyn_del(fs, IFX, htonl(SRC), htonl(DST), port, ms);
}

/* An element is deleted once; deleting it again is known to be needless
 * until it is added again. */
static void
test_delete_once(void **state)
{
	struct nfq_fastsyn *fs;
	struct nfq_fastsyn_stats st;

	(void)state;
	NEED_ENV();
	fs = open_set();
	assert_int_equal(nfq_fastsyn_add(fs, IFX, htonl(SRC), htonl(DST), 443,
	    60000), 0);
	assert_int_equal(nfq_fastsyn_add(fs, IFX, htonl(SRC), htonl(DST), 80,
	    60000), 0);
	assert_true(in_set(443));
	assert_true(in_set(80));
	assert_int_equal(del(fs, 443, T0), 0);
	assert_false(in_set(443));
	assert_true(in_set(80));
	nfq_fastsyn_stats(fs, &st);
	assert_int_equal(st.dels, 1);
	assert_int_equal(st.dels_spared, 0);
	/* again and again: no transaction, and still gone */
	assert_int_equal(del(fs, 443, T0 + 1), 0);
	assert_int_equal(del(fs, 443, T0 + 999), 0);
	nfq_fastsyn_stats(fs, &st);
	assert_int_equal(st.dels, 1);
	assert_int_equal(st.dels_spared, 2);
	assert_false(in_set(443));
	/* added again, it is deleted again, however soon */
	assert_int_equal(nfq_fastsyn_add(fs, IFX, htonl(SRC), htonl(DST), 443,
	    60000), 0);
	assert_true(in_set(443));
	assert_int_equal(del(fs, 443, T0 + 999), 0);
	assert_false(in_set(443));
	nfq_fastsyn_stats(fs, &st);
	assert_int_equal(st.dels, 2);
	/* the other one was never deleted: it is */
	assert_int_equal(del(fs, 80, T0), 0);
	assert_false(in_set(80));
	nfq_fastsyn_stats(fs, &st);
	assert_int_equal(st.dels, 3);
	nfq_fastsyn_close(fs);
}

/* Many deleted keys share the remembered slots (300 keys, 1,024 slots:
 * some do): every element added is gone after its deletion, whatever was
 * pushed out, and the rest are remembered. */
static void
test_many_keys(void **state)
{
	struct nfq_fastsyn *fs;
	struct nfq_fastsyn_stats st;
	uint16_t p;

	(void)state;
	NEED_ENV();
	fs = open_set();
	for (p = 1000; p < 1300; p++)
		assert_int_equal(nfq_fastsyn_add(fs, IFX, htonl(SRC),
		    htonl(DST), p, 60000), 0);
	for (p = 1000; p < 1300; p++)
		assert_int_equal(del(fs, p, T0), 0);
	/* re-added: each must really go, whether or not its slot was
	 * taken by another since */
	for (p = 1000; p < 1300; p += 7)
		assert_int_equal(nfq_fastsyn_add(fs, IFX, htonl(SRC),
		    htonl(DST), p, 60000), 0);
	for (p = 1000; p < 1300; p++)
		assert_int_equal(del(fs, p, T0), 0);
	for (p = 1000; p < 1300; p += 7)
		assert_false(in_set(p));
	nfq_fastsyn_stats(fs, &st);
	assert_true(st.dels >= 300 + 43);	/* the re-added, again */
	assert_true(st.dels_spared > 0);	/* most of the others */
	nfq_fastsyn_close(fs);
}

/* An element root adds behind sluiced's back goes at its first deletion
 * once the last one of that key is a second old. */
static void
test_foreign_element(void **state)
{
	char *const plant[] = { "nft", "add", "element", "ip", "t", "s",
	    "{ 1 . 10.0.0.2 . 192.0.2.1 . 22 timeout 60s }", NULL };
	struct nfq_fastsyn *fs;
	struct nfq_fastsyn_stats st;

	(void)state;
	NEED_ENV();
	fs = open_set();
	/* never added by sluiced: deleted all the same */
	assert_int_equal(testns_run(plant), 0);
	assert_true(in_set(22));
	assert_int_equal(del(fs, 22, T0), 0);
	assert_false(in_set(22));
	/* planted again at once: the next deletion is spared ... */
	assert_int_equal(testns_run(plant), 0);
	assert_int_equal(del(fs, 22, T0 + 500), 0);
	assert_true(in_set(22));
	nfq_fastsyn_stats(fs, &st);
	assert_int_equal(st.dels, 1);
	assert_int_equal(st.dels_spared, 1);
	/* ... a second later, not */
	assert_int_equal(del(fs, 22, T0 + 1000), 0);
	assert_false(in_set(22));
	nfq_fastsyn_stats(fs, &st);
	assert_int_equal(st.dels, 2);
	nfq_fastsyn_close(fs);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_delete_once),
		cmocka_unit_test(test_many_keys),
		cmocka_unit_test(test_foreign_element),
	};

	return cmocka_run_group_tests(tests, group_setup, NULL);
}
