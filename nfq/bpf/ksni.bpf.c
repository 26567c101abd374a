/* ksni.bpf.c: a first flight approved in the kernel, for iptables' bpf match.
 *
 * Attached by `-m bpf --object-pinned PATH` (a socket filter: xt_bpf hands
 * it the packet from the IPv4 header on). It returns 1 for one shape only:
 * a TCP segment that is exactly one TLS record holding exactly one
 * ClientHello whose (ingress interface, destination, port, server_name as
 * sent) userspace learned, under the current generation and not expired.
 * Everything else returns 0 and goes to the queue as before, so every
 * check here may be stricter than nfq/tls.c but none may be looser: what
 * tls.c calls malformed is refused here too (repeated extensions, broken
 * ALPN or supported_versions lists, more than one server name), and
 * anything it does not read at all (several records, a hello split over
 * segments, bytes after it) is refused for being unusual.
 *
 * Offsets into the packet are plain numbers handed to bpf_skb_load_bytes,
 * which checks them against the packet (it may be non-linear: GRO), so the
 * verifier only ever sees small fixed buffers on the stack. Loops are
 * bounded (40 option bytes, 64 extensions, 16 ALPN names) and their bodies
 * keep to one path where they can (type_mask): kernel 6.18 verifies the
 * whole in some 34,000 instructions, against its limit of a million.
 */
#include <stdbool.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "nfq/bpf/ksni_int.h"

char LICENSE[] SEC("license") = "ISC";

/* Its size is the loader's (bpf_map__set_max_entries). LRU: at the bound
 * an add pushes out the least used entry, whose segments then go to the
 * queue; stale generations are pushed out the same way. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1);
	__type(key, struct ksni_key);
	__type(value, struct ksni_val);
} ksni_names SEC(".maps");

/* The current generation: 0 approves nothing. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} ksni_gen SEC(".maps");

/* The lease: until when (CLOCK_MONOTONIC ns) userspace vouches that it
 * reads the copies of what passes here. Renewed while its loop runs; 0,
 * or passed (the reader died or stalls), approves nothing. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} ksni_lease SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, KSNI_NCOUNTERS);
	__type(key, __u32);
	__type(value, __u64);
} ksni_counters SEC(".maps");

#define IP_HLEN			20
#define TCP_HLEN		20
#define PROTO_TCP		6

#define TCP_FIN			0x01
#define TCP_SYN			0x02
#define TCP_RST			0x04
#define TCP_ACK			0x10
#define TCP_URG			0x20

#define TCP_OPT_MAX		40	/* data offset 15 */
#define OPT_EOL			0
#define OPT_NOP			1
#define OPT_TS			8
#define OPT_TS_LEN		10

#define CT_HANDSHAKE		22
#define HS_CLIENT_HELLO		1
#define RECORD_HDR_LEN		5
#define HS_HDR_LEN		4
#define RECORD_MAX		16384	/* RFC 8446 5.1 */
#define SESSION_ID_MAX		32

#define EXT_SERVER_NAME		0
#define EXT_ALPN		16
#define EXT_SUPPORTED_VERSIONS	43
#define EXT_ECH			0xfe0d
#define EXT_ESNI		0xffce

/* Real hellos carry some 20 extensions and 2 or 3 ALPN names: more is
 * unusual, and the loops that read them are bounded. */
#define EXT_MAX			64
#define ALPN_NAMES_MAX		16

#define NAME_MAX_LEN		255

static __always_inline void
count(__u32 i)
{
	__u64 *c = bpf_map_lookup_elem(&ksni_counters, &i);

	if (c != NULL)
		*c += 1;
}

static __always_inline __u32
be16(const __u8 *p)
{
	return (__u32)p[0] << 8 | p[1];
}

/*
 * All ones if type is want, else 0, without a branch. A branch in the
 * extension loop that joins again (one path for the server name, one for
 * ALPN...) multiplies the paths the verifier walks by the number of
 * kinds at every extension: past a dozen extensions it gives up. The
 * barrier keeps clang from turning this back into a comparison, which
 * it would compile as a branch.
 */
static __always_inline __u32
type_mask(__u32 type, __u32 want)
{
	__u32 d = type ^ want;	/* < 2^16: d - 1 has bit 31 set iff d == 0 */

	asm volatile("" : "+r"(d));
	d = (d - 1) >> 31;
	asm volatile("" : "+r"(d));
	return 0 - d;
}

/* RFC 8446 4.2.1: versions<2..254> filling the extension (as tls.c). */
static __always_inline bool
versions_ok(struct __sk_buff *skb, __u32 off, __u32 len)
{
	__u8 n;

	if (len < 1 || bpf_skb_load_bytes(skb, off, &n, 1) < 0)
		return false;
	return n == len - 1 && n >= 2 && (n & 1) == 0;
}

/* RFC 7301 3.1: a list filling the extension, of names of 1..255 bytes
 * (as tls.c), at most ALPN_NAMES_MAX of them. */
static __always_inline bool
alpn_ok(struct __sk_buff *skb, __u32 off, __u32 len)
{
	__u8 b[2];
	__u32 end, i;

	if (len < 2 || bpf_skb_load_bytes(skb, off, b, 2) < 0 ||
	    be16(b) != len - 2 || len == 2)
		return false;
	end = off + len;
	off += 2;
	for (i = 0; i < ALPN_NAMES_MAX; i++) {
		if (off == end)
			return true;
		if (bpf_skb_load_bytes(skb, off, b, 1) < 0 || b[0] == 0)
			return false;
		off += 1 + b[0];
		if (off > end)
			return false;
	}
	return off == end;
}

static __always_inline int
check(struct __sk_buff *skb)
{
	/* the extension types are needed only until the key is built:
	 * apart, the two would not fit the 512 bytes of stack */
	union {
		__u16		types[EXT_MAX];
		struct ksni_key	key;
	} s;
	struct ksni_val *val;
	__u32 *gen, zero = 0;
	__u8 b[TCP_OPT_MAX + 8];	/* +8: a timestamp's length byte may be
					 * read at the last offset */
	__u32 len = skb->len, daddr, thl, optlen, p, c, n, i, j, type, elen;
	__u32 sni_off = 0, sni_len = 0, alpn_off = 0, alpn_len = 0;
	__u32 sv_off = 0, sv_len = 0, m;
	__u16 dport;
	bool eol = false, ts = false;

	/* IPv4 without options, TCP, not a fragment (MF, offset, and the
	 * reserved bit: clear), total length the packet's */
	if (bpf_skb_load_bytes(skb, 0, b, IP_HLEN + TCP_HLEN) < 0)
		return KSNI_UNPARSED;
	if (b[0] != 0x45 || b[9] != PROTO_TCP || (b[6] & 0xbf) != 0 ||
	    b[7] != 0 || be16(b + 2) != len)
		return KSNI_UNPARSED;
	__builtin_memcpy(&daddr, b + 16, 4);
	__builtin_memcpy(&dport, b + IP_HLEN + 2, 2);

	/* an ACK carrying data, nothing else that changes the connection;
	 * URG would make part of the bytes out of band */
	thl = (__u32)(b[IP_HLEN + 12] >> 4) * 4;
	if (thl < TCP_HLEN)
		return KSNI_UNPARSED;
	if ((b[IP_HLEN + 13] & TCP_ACK) == 0 ||
	    (b[IP_HLEN + 13] & (TCP_SYN | TCP_FIN | TCP_RST | TCP_URG)) != 0)
		return KSNI_UNPARSED;

	/*
	 * Options: NOP, one timestamp, EOL and zeros after it. Anything else
	 * goes to the queue: MD5 (19) and AO (29) signatures above all,
	 * which sluiced must see (nfq_tcp_options), but also whatever a
	 * stack might read that this does not.
	 */
	optlen = thl - TCP_HLEN;
	if (optlen > 0) {
		/* a hello is longer than 40 bytes, so the whole option space
		 * can be read whatever optlen is */
		__builtin_memset(b, 0, sizeof(b));
		if (bpf_skb_load_bytes(skb, IP_HLEN + TCP_HLEN, b,
		    TCP_OPT_MAX) < 0)
			return KSNI_UNPARSED;
		for (i = 0; i < TCP_OPT_MAX;) {
			if (i >= optlen)
				break;
			if (eol || b[i] == OPT_EOL) {
				if (b[i] != 0)
					return KSNI_UNPARSED;
				eol = true;
				i++;
			} else if (b[i] == OPT_NOP) {
				i++;
			} else if (b[i] == OPT_TS && !ts &&
			    i + OPT_TS_LEN <= optlen &&
			    b[i + 1] == OPT_TS_LEN) {
				ts = true;
				i += OPT_TS_LEN;
			} else
				return KSNI_UNPARSED;
		}
	}

	/* one record, exactly the payload, exactly one ClientHello */
	p = IP_HLEN + thl;
	if (p + RECORD_HDR_LEN + HS_HDR_LEN > len ||
	    bpf_skb_load_bytes(skb, p, b, RECORD_HDR_LEN + HS_HDR_LEN) < 0)
		return KSNI_UNPARSED;
	n = be16(b + 3);
	if (b[0] != CT_HANDSHAKE || b[1] != 3 || n > RECORD_MAX ||
	    p + RECORD_HDR_LEN + n != len)
		return KSNI_UNPARSED;
	if (b[5] != HS_CLIENT_HELLO || b[6] != 0 ||
	    HS_HDR_LEN + be16(b + 7) != n)
		return KSNI_UNPARSED;

	/* legacy_version and random, then the session id, the cipher
	 * suites, the compression methods and the extensions, which must
	 * be there and end where the hello does */
	c = p + RECORD_HDR_LEN + HS_HDR_LEN + 2 + 32;
	if (c + 1 > len || bpf_skb_load_bytes(skb, c, b, 1) < 0 ||
	    b[0] > SESSION_ID_MAX)
		return KSNI_UNPARSED;
	c += 1 + b[0];
	if (c + 2 > len || bpf_skb_load_bytes(skb, c, b, 2) < 0)
		return KSNI_UNPARSED;
	n = be16(b);
	if (n < 2 || (n & 1) != 0)
		return KSNI_UNPARSED;
	c += 2 + n;
	if (c + 1 > len || bpf_skb_load_bytes(skb, c, b, 1) < 0 || b[0] == 0)
		return KSNI_UNPARSED;
	c += 1 + b[0];
	if (c + 2 > len || bpf_skb_load_bytes(skb, c, b, 2) < 0)
		return KSNI_UNPARSED;
	c += 2;
	if (c + be16(b) != len)
		return KSNI_UNPARSED;

	for (i = 0; i < EXT_MAX; i++) {
		if (c == len)
			break;
		if (c + 4 > len || bpf_skb_load_bytes(skb, c, b, 4) < 0)
			return KSNI_UNPARSED;
		type = be16(b);
		elen = be16(b + 2);
		c += 4;
		if (c + elen > len || type == EXT_ECH || type == EXT_ESNI)
			return KSNI_UNPARSED;
		/* RFC 8446 4.2: one of each type (tls.c refuses a repeat) */
		for (j = 0; j < i; j++)
			if (s.types[j] == type)
				return KSNI_UNPARSED;
		s.types[i] = (__u16)type;
		/* each type once, so an OR records the one of each kind */
		m = type_mask(type, EXT_SERVER_NAME);
		sni_off |= c & m;
		sni_len |= elen & m;
		m = type_mask(type, EXT_ALPN);
		alpn_off |= c & m;
		alpn_len |= elen & m;
		m = type_mask(type, EXT_SUPPORTED_VERSIONS);
		sv_off |= c & m;
		sv_len |= elen & m;
		c += elen;
	}
	if (c != len || sni_off == 0)
		return KSNI_UNPARSED;
	if (alpn_off != 0 && !alpn_ok(skb, alpn_off, alpn_len))
		return KSNI_UNPARSED;
	if (sv_off != 0 && !versions_ok(skb, sv_off, sv_len))
		return KSNI_UNPARSED;

	/* RFC 6066 3: a list filling the extension, of exactly one
	 * host_name entry of 1..255 bytes */
	if (sni_len < 2 + 1 + 2 + 1 ||
	    bpf_skb_load_bytes(skb, sni_off, b, 5) < 0 ||
	    be16(b) + 2 != sni_len || b[2] != 0)
		return KSNI_UNPARSED;
	n = be16(b + 3);
	if (n == 0 || n > NAME_MAX_LEN || 3 + n != be16(b))
		return KSNI_UNPARSED;

	__builtin_memset(&s.key, 0, sizeof(s.key));
	s.key.ifindex = skb->ingress_ifindex;
	s.key.daddr = daddr;
	s.key.dport = dport;
	s.key.len = (__u16)n;
	/* the same n, in a form whose bounds (1..256) the verifier sees */
	if (bpf_skb_load_bytes(skb, sni_off + 5, s.key.name,
	    ((n - 1) & 0xff) + 1) < 0)
		return KSNI_UNPARSED;

	if ((val = bpf_map_lookup_elem(&ksni_names, &s.key)) == NULL ||
	    (gen = bpf_map_lookup_elem(&ksni_gen, &zero)) == NULL ||
	    *gen == 0 || val->gen != *gen ||
	    bpf_ktime_get_ns() >= val->expires_ns)
		return KSNI_UNKNOWN;
	return KSNI_APPROVED;
}

SEC("socket")
int
ksni_check(struct __sk_buff *skb)
{
	__u32 zero = 0;
	__u64 *lease = bpf_map_lookup_elem(&ksni_lease, &zero);
	int r;

	/* first: with no reader nothing passes, and nothing is parsed */
	if (lease == NULL || bpf_ktime_get_ns() >= *lease)
		r = KSNI_LAPSED;
	else
		r = check(skb);

	count(KSNI_SEEN);
	count(r);
	return r == KSNI_APPROVED;
}
