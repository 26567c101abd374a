/* ksni_int.h: the maps ksni.bpf.c and ksni.c share (private to nfq/). */
#ifndef SLUICE_KSNI_INT_H
#define SLUICE_KSNI_INT_H

#include <linux/types.h>

/*
 * A learned first flight. Hashed as raw bytes by the kernel: every byte
 * is set (name zero-padded), and the layout has no holes (4+4+2+2+256).
 */
struct ksni_key {
	__u32	ifindex;	/* ingress interface, host order */
	__u32	daddr;		/* as on the wire */
	__u16	dport;		/* as on the wire */
	__u16	len;		/* name bytes, 1..255 */
	__u8	name[256];	/* as the client sent it, zero-padded */
};

struct ksni_val {
	__u64	expires_ns;	/* CLOCK_MONOTONIC (bpf_ktime_get_ns) */
	__u32	gen;		/* matches only under this generation */
	__u32	pad;
};

/* The program's per-CPU counters (ksni_counters), by index. */
enum {
	KSNI_SEEN,
	KSNI_APPROVED,
	KSNI_UNPARSED,
	KSNI_UNKNOWN,
	KSNI_LAPSED,
	KSNI_NCOUNTERS
};

#endif
