/* fuzz_policy.c: libFuzzer target for the policy JSON loader and its lookups. */
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "gateway/policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[512];
	struct policy *p;
	const struct policy_domain *rule;
	bool addr_matched;

	err[0] = '\0';
	p = policy_parse((const char *)data, size, "fuzz.json", err, sizeof(err));
	if (p == NULL) {
		/* every refusal says where and what */
		assert(strncmp(err, "fuzz.json:", 10) == 0);
		return 0;
	}
	assert(strlen(p->sha256) == 64);
	(void)policy_match_cidr(p, 0x0a00020c, 443, &addr_matched);
	(void)policy_match_name(p, "a.example.com", 443, &rule);
	(void)policy_match_name(p, "example.com", -1, &rule);
	policy_free(p);
	return 0;
}
