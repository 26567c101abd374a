/* ct_int.h: the ctnetlink event parser of ct.c, for its unit test and fuzzing. */
#ifndef SLUICE_NFQ_CT_INT_H
#define SLUICE_NFQ_CT_INT_H

#include <stddef.h>

#include "nfq/nfq.h"

enum nfq_ct_parse_result {
	NFQ_CT_EVENT = 0,	/* an IPv4 destroy event: *e is filled */
	NFQ_CT_OTHER,		/* not one: another message type or
				 * subsystem, an IPv6 event */
	NFQ_CT_DAMAGED,		/* a destroy event that does not parse: an
				 * attribute of the wrong length, a nest that
				 * holds something else than attributes, a
				 * repeated attribute, a required one missing,
				 * a message longer than the buffer */
};

/*
 * Parses one netlink message at buf, aligned for struct nlmsghdr (len
 * bytes available; the message may be shorter, as its header says). Pure:
 * no allocation, no globals. *e is written only on NFQ_CT_EVENT.
 */
enum nfq_ct_parse_result nfq_ct_parse(const void *buf, size_t len,
    struct nfq_ct_end *e);

#endif
