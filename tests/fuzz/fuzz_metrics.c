/* fuzz_metrics.c: libFuzzer target for the metrics endpoint's HTTP request parser. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/metrics.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
check(int ok)
{
	if (!ok)
		abort();
}

static int
parse(const uint8_t *data, size_t size, bool *head_only)
{
	char *copy;
	int status;

	/* a copy of exactly size bytes, so ASan sees any read past it */
	if ((copy = malloc(size > 0 ? size : 1)) == NULL)
		return -1;
	memcpy(copy, data, size);
	*head_only = true;
	status = gw_metrics_http_parse(copy, size, head_only);
	free(copy);
	return status;
}

/*
 * sluiced parses what it has read so far after each read and answers at
 * the first status other than 0. Whatever the bytes: a known status; 0
 * only while shorter than GW_METRICS_REQ_MAX; HEAD only with 200 or 404;
 * and a status decided on a prefix (other than 431, decided by length
 * alone) is the status of any longer input.
 */
int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	bool head_only, head_prefix;
	size_t cut;
	int status, st;

	status = parse(data, size, &head_only);
	if (status == -1)
		return 0;
	check(status == 0 || status == 200 || status == 400 || status == 404 ||
	    status == 405 || status == 431 || status == 505);
	check(status != 0 || size < GW_METRICS_REQ_MAX);
	check(status != 431 || size >= GW_METRICS_REQ_MAX);
	check(!head_only || status == 200 || status == 404);

	cut = size > 0 ? (data[0] * 257u + data[size - 1]) % (size + 1) : 0;
	st = parse(data, cut, &head_prefix);
	if (st == -1)
		return 0;
	if (status == 0)
		check(st == 0);
	if (st != 0 && st != 431)
		check(st == status && head_prefix == head_only);
	return 0;
}
