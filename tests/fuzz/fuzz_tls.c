/* fuzz_tls.c: libFuzzer target for the TLS ClientHello parser. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nfq/nfq.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Prefixes tried one by one; beyond that, a sample. */
#define PREFIX_ALL	64

static void
check(int ok)
{
	if (!ok)
		abort();
}

/* What holds for any result, whatever the input. */
static void
check_result(enum nfq_tls_status st, const struct nfq_tls_hello *h,
    size_t len)
{
	check(st == NFQ_TLS_OK || st == NFQ_TLS_NEED_MORE ||
	    st == NFQ_TLS_NOT_TLS || st == NFQ_TLS_MALFORMED);
	check(memchr(h->sni, '\0', sizeof(h->sni)) != NULL);
	check(memchr(h->alpn, '\0', sizeof(h->alpn)) != NULL);
	check(h->has_sni == (h->sni[0] != '\0'));
	check(h->error != NULL);
	if (st == NFQ_TLS_OK) {
		/* a record header, a handshake header, a minimal body */
		check(h->consumed >= 5 + 4 + 2 + 32 + 1 + 2 + 2 + 1 + 1);
		check(h->consumed <= len);
		/* no comma starts, ends or doubles in the list */
		check(h->alpn[0] != ',');
		check(h->alpn[0] == '\0' ||
		    h->alpn[strlen(h->alpn) - 1] != ',');
		check(strstr(h->alpn, ",,") == NULL);
	} else {
		check(!h->has_sni && !h->ech && h->version == 0);
		check(h->alpn[0] == '\0' && h->consumed == 0);
		check(h->error[0] != '\0');
	}
}

static bool
same_hello(const struct nfq_tls_hello *a, const struct nfq_tls_hello *b)
{
	return a->has_sni == b->has_sni && strcmp(a->sni, b->sni) == 0 &&
	    a->ech == b->ech && a->version == b->version &&
	    strcmp(a->alpn, b->alpn) == 0 && a->consumed == b->consumed &&
	    strcmp(a->error, b->error) == 0;
}

/*
 * The verdict on a prefix is final unless it is NEED_MORE: the full
 * input must give the same result, down to the error text. That is what
 * lets the gateway decide on the bytes it has.
 */
static void
check_prefix(const uint8_t *data, size_t len, enum nfq_tls_status full_st,
    const struct nfq_tls_hello *full)
{
	struct nfq_tls_hello h;
	enum nfq_tls_status st;

	st = nfq_tls_parse_hello(data, len, &h);
	check_result(st, &h, len);
	if (st == NFQ_TLS_NEED_MORE) {
		/* a hello complete in the full input is not complete yet */
		if (full_st == NFQ_TLS_OK)
			check(len < full->consumed);
		return;
	}
	check(st == full_st && same_hello(&h, full));
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct nfq_tls_hello full, again;
	enum nfq_tls_status st;
	char vbuf[8];
	size_t len;

	st = nfq_tls_parse_hello(data, size, &full);
	check_result(st, &full, size);
	check(strlen(nfq_tls_version_str(full.version, vbuf, sizeof(vbuf))) <
	    sizeof(vbuf));

	for (len = 0; len < size && len <= PREFIX_ALL; len++)
		check_prefix(data, len, st, &full);
	if (size > 0)
		check_prefix(data, size - 1, st, &full);

	if (st == NFQ_TLS_OK) {
		/* exactly the consumed bytes are enough, and every prefix
		 * of them short by one is not */
		check_prefix(data, full.consumed, st, &full);
		check_prefix(data, full.consumed - 1, st, &full);
		check(nfq_tls_parse_hello(data, full.consumed - 1, &again) ==
		    NFQ_TLS_NEED_MORE);
	}
	return 0;
}
