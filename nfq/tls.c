/* tls.c: the ClientHello opening a client's TLS stream (RFC 8446, 6066). */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "nfq/nfq.h"

#define CT_HANDSHAKE		22
#define HS_CLIENT_HELLO		1
#define RECORD_HDR_LEN		5
#define HS_HDR_LEN		4
#define RANDOM_LEN		32
#define SESSION_ID_MAX		32

/* RFC 8446 5.1: a plaintext record carries at most 2^14 bytes. */
#define RECORD_MAX		16384

/*
 * The gateway holds at most NFQ_REASM_MAX (16 KiB) of a stream while it
 * waits for the hello, so a longer one could never be decided: refuse it
 * as soon as its length is read rather than hold it until the hold
 * overflows. Real hellos, post-quantum key shares included, stay under
 * 2 KiB.
 */
#define HELLO_MAX		16384

#define EXT_SERVER_NAME		0
#define EXT_ALPN		16
#define EXT_SUPPORTED_VERSIONS	43
#define EXT_ECH			0xfe0d
#define EXT_ESNI		0xffce	/* encrypted_server_name, the ESNI
					 * drafts that ECH replaced */

#define NAME_TYPE_HOST		0
#define SNI_NAME_MAX		255

/* A read that crosses a length field of the hello itself. */
#define PAST_HELLO		"client hello fields past its length"

/*
 * A cursor over the handshake message carried by the records in buf.
 * Lengths declared by the message are checked before the bytes are
 * needed, so a broken length is reported as soon as it is seen and a
 * valid prefix only ever runs out of bytes (NEED_MORE).
 */
struct reader {
	const uint8_t		*buf;
	size_t			 len;
	size_t			 pos;	/* next byte of buf to read */
	size_t			 rec_left; /* of the current record's payload */
	size_t			 off;	/* handshake message bytes read */
	size_t			 hs_end; /* message length with its header,
					  * 0 until that is read */
	enum nfq_tls_status	 status;
	const char		*error;
	uint64_t		 seen[65536 / 64];	/* extension types */
};

static bool
stop(struct reader *r, enum nfq_tls_status status, const char *error)
{
	r->status = status;
	r->error = error;
	return false;
}

/*
 * A record must end where the hello ends or before: anything after the
 * hello inside the same record would be a second handshake message, and
 * a client sends none before the server's reply.
 */
static bool
record_fits(struct reader *r)
{
	if (r->hs_end != 0 && r->rec_left > r->hs_end - r->off)
		return stop(r, NFQ_TLS_MALFORMED,
		    "record holds more than the client hello");
	return true;
}

/* Reads the header of the record that continues the message. */
static bool
next_record(struct reader *r)
{
	enum nfq_tls_status bad = r->pos == 0 ? NFQ_TLS_NOT_TLS :
	    NFQ_TLS_MALFORMED;
	size_t avail = r->len - r->pos, n;

	/*
	 * RFC 8446 5.1: no other record may come between the fragments of
	 * a handshake message. Both checks run on a partial header so that
	 * a stream that is not TLS is told at its first bytes.
	 */
	if (avail >= 1 && r->buf[r->pos] != CT_HANDSHAKE)
		return stop(r, bad, "not a handshake record");
	if (avail >= 2 && r->buf[r->pos + 1] != 3)
		return stop(r, bad, "not a TLS record version");
	if (avail < RECORD_HDR_LEN)
		return stop(r, NFQ_TLS_NEED_MORE, "incomplete client hello");
	n = (size_t)r->buf[r->pos + 3] << 8 | r->buf[r->pos + 4];
	/* RFC 8446 5.1: zero-length handshake fragments are forbidden. */
	if (n == 0)
		return stop(r, NFQ_TLS_MALFORMED, "empty record");
	if (n > RECORD_MAX)
		return stop(r, NFQ_TLS_MALFORMED,
		    "record longer than 16384 bytes");
	r->pos += RECORD_HDR_LEN;
	r->rec_left = n;
	return record_fits(r);
}

/*
 * Moves n bytes of the message into dst (NULL: skips them), across
 * records. The n bytes must lie before end, a message offset at or after
 * r->off: otherwise the message contradicts its own lengths (error).
 */
static bool
take(struct reader *r, void *dst, size_t n, size_t end, const char *error)
{
	uint8_t *out = dst;
	size_t chunk;

	if (n > end - r->off)
		return stop(r, NFQ_TLS_MALFORMED, error);
	while (n > 0) {
		if (r->rec_left == 0 && !next_record(r))
			return false;
		if (r->pos == r->len)
			return stop(r, NFQ_TLS_NEED_MORE,
			    "incomplete client hello");
		chunk = r->len - r->pos;
		if (chunk > r->rec_left)
			chunk = r->rec_left;
		if (chunk > n)
			chunk = n;
		if (out != NULL) {
			memcpy(out, r->buf + r->pos, chunk);
			out += chunk;
		}
		r->pos += chunk;
		r->rec_left -= chunk;
		r->off += chunk;
		n -= chunk;
	}
	return true;
}

static bool
get8(struct reader *r, size_t end, const char *error, size_t *v)
{
	uint8_t b;

	if (!take(r, &b, 1, end, error))
		return false;
	*v = b;
	return true;
}

static bool
get16(struct reader *r, size_t end, const char *error, size_t *v)
{
	uint8_t b[2];

	if (!take(r, b, 2, end, error))
		return false;
	*v = (size_t)b[0] << 8 | b[1];
	return true;
}

/* RFC 8701: 0x0a0a, 0x1a1a ... 0xfafa are never real versions. */
static bool
is_grease(size_t v)
{
	return (v & 0x0f0f) == 0x0a0a && (v >> 8) == (v & 0xff);
}

/*
 * RFC 6066 3: the list may hold one name per type and host_name is the
 * only type. More than one entry, or another type, is refused: a server
 * could read an entry the gateway did not decide on.
 */
static bool
parse_server_name(struct reader *r, size_t end, struct nfq_tls_hello *hello)
{
	size_t list, type, n;

	if (!get16(r, end, "server_name extension too short", &list))
		return false;
	if (list != end - r->off)
		return stop(r, NFQ_TLS_MALFORMED,
		    "server name list length does not fill its extension");
	if (!get8(r, end, "server name list too short", &type))
		return false;
	if (type != NAME_TYPE_HOST)
		return stop(r, NFQ_TLS_MALFORMED,
		    "server name type is not host_name");
	if (!get16(r, end, "server name list too short", &n))
		return false;
	if (n == 0)
		return stop(r, NFQ_TLS_MALFORMED, "empty server name");
	if (n > SNI_NAME_MAX)
		return stop(r, NFQ_TLS_MALFORMED,
		    "server name longer than 255 bytes");
	if (n > end - r->off)
		return stop(r, NFQ_TLS_MALFORMED, "server name past its list");
	if (n < end - r->off)
		return stop(r, NFQ_TLS_MALFORMED, "more than one server name");
	if (!take(r, hello->sni, n, end, "server name past its list"))
		return false;
	/* A NUL would end the name early for the gateway, not the server. */
	if (memchr(hello->sni, '\0', n) != NULL)
		return stop(r, NFQ_TLS_MALFORMED, "NUL in server name");
	hello->sni[n] = '\0';
	hello->has_sni = true;
	return true;
}

static bool
parse_versions(struct reader *r, size_t end, struct nfq_tls_hello *hello)
{
	size_t n, v, best = 0;

	if (!get8(r, end, "supported_versions extension too short", &n))
		return false;
	/* RFC 8446 4.2.1: versions<2..254>, the whole extension. */
	if (n != end - r->off || n < 2 || n % 2 != 0)
		return stop(r, NFQ_TLS_MALFORMED,
		    "bad supported_versions length");
	while (r->off < end) {
		if (!get16(r, end, "bad supported_versions length", &v))
			return false;
		if (!is_grease(v) && v > best)
			best = v;
	}
	if (best != 0)
		hello->version = (uint16_t)best;
	return true;
}

/*
 * Appends one protocol name to hello->alpn. Names are opaque bytes
 * (RFC 7301 3.1, and RFC 8701 greases them with 0x0a0a...): a comma or a
 * byte that is not printable ASCII shows as '?', so the list always reads
 * back as the names sent. A name that does not fit whole ends the list:
 * a cut name could read as another, shorter protocol.
 */
static void
alpn_append(struct nfq_tls_hello *hello, size_t *used, bool *full,
    const uint8_t *name, size_t n)
{
	size_t at = *used, i;

	if (*full || at + (at != 0) + n >= sizeof(hello->alpn)) {
		*full = true;
		return;
	}
	if (at != 0)
		hello->alpn[at++] = ',';
	for (i = 0; i < n; i++)
		hello->alpn[at++] = name[i] > 0x20 && name[i] < 0x7f &&
		    name[i] != ',' ? (char)name[i] : '?';
	hello->alpn[at] = '\0';
	*used = at;
}

static bool
parse_alpn(struct reader *r, size_t end, struct nfq_tls_hello *hello)
{
	uint8_t name[255];
	size_t list, n, used = 0;
	bool full = false;

	if (!get16(r, end, "ALPN extension too short", &list))
		return false;
	/* RFC 7301 3.1: protocol_name_list<2..2^16-1>, names <1..2^8-1>. */
	if (list != end - r->off || list == 0)
		return stop(r, NFQ_TLS_MALFORMED,
		    "ALPN list length does not fill its extension");
	while (r->off < end) {
		if (!get8(r, end, "ALPN list too short", &n))
			return false;
		if (n == 0)
			return stop(r, NFQ_TLS_MALFORMED, "empty ALPN name");
		if (!take(r, name, n, end, "ALPN name past its list"))
			return false;
		alpn_append(hello, &used, &full, name, n);
	}
	return true;
}

/* From legacy_version to the end of the message (RFC 8446 4.1.2). */
static bool
parse_body(struct reader *r, struct nfq_tls_hello *hello)
{
	size_t end = r->hs_end, v, n, type, ext_end;
	bool ok;

	if (!get16(r, end, PAST_HELLO, &v))
		return false;
	hello->version = (uint16_t)v;
	if (!take(r, NULL, RANDOM_LEN, end, PAST_HELLO))
		return false;
	if (!get8(r, end, PAST_HELLO, &n))
		return false;
	if (n > SESSION_ID_MAX)
		return stop(r, NFQ_TLS_MALFORMED,
		    "session id longer than 32 bytes");
	if (!take(r, NULL, n, end, PAST_HELLO))
		return false;
	if (!get16(r, end, PAST_HELLO, &n))
		return false;
	if (n < 2 || n % 2 != 0)
		return stop(r, NFQ_TLS_MALFORMED, "bad cipher suites length");
	if (!take(r, NULL, n, end, PAST_HELLO))
		return false;
	if (!get8(r, end, PAST_HELLO, &n))
		return false;
	if (n == 0)
		return stop(r, NFQ_TLS_MALFORMED, "no compression methods");
	if (!take(r, NULL, n, end, PAST_HELLO))
		return false;

	/* RFC 5246 7.4.1.2: extensions may be absent only as a whole. */
	if (r->off == end)
		return true;
	if (!get16(r, end, PAST_HELLO, &n))
		return false;
	if (n != end - r->off)
		return stop(r, NFQ_TLS_MALFORMED,
		    "extensions length does not fill the client hello");

	while (r->off < end) {
		if (!get16(r, end, "extension header past the end", &type) ||
		    !get16(r, end, "extension header past the end", &n))
			return false;
		if (n > end - r->off)
			return stop(r, NFQ_TLS_MALFORMED,
			    "extension length past the end");
		/* RFC 8446 4.2: one extension of each type at most. */
		if (r->seen[type / 64] & (UINT64_C(1) << (type % 64)))
			return stop(r, NFQ_TLS_MALFORMED, "repeated extension");
		r->seen[type / 64] |= UINT64_C(1) << (type % 64);
		ext_end = r->off + n;
		switch (type) {
		case EXT_SERVER_NAME:
			ok = parse_server_name(r, ext_end, hello);
			break;
		case EXT_SUPPORTED_VERSIONS:
			ok = parse_versions(r, ext_end, hello);
			break;
		case EXT_ALPN:
			ok = parse_alpn(r, ext_end, hello);
			break;
		case EXT_ECH:
		case EXT_ESNI:
			hello->ech = true;
			ok = take(r, NULL, n, ext_end, PAST_HELLO);
			break;
		default:
			ok = take(r, NULL, n, ext_end, PAST_HELLO);
			break;
		}
		if (!ok)
			return false;
	}
	return true;
}

static bool
parse_message(struct reader *r, struct nfq_tls_hello *hello)
{
	uint8_t h[HS_HDR_LEN];
	size_t n;

	/* The type alone already tells a stream that is no ClientHello. */
	if (!take(r, h, 1, HS_HDR_LEN, PAST_HELLO))
		return false;
	if (h[0] != HS_CLIENT_HELLO)
		return stop(r, NFQ_TLS_MALFORMED, "not a client hello");
	if (!take(r, h + 1, 3, HS_HDR_LEN, PAST_HELLO))
		return false;
	n = (size_t)h[1] << 16 | (size_t)h[2] << 8 | h[3];
	if (n > HELLO_MAX)
		return stop(r, NFQ_TLS_MALFORMED, "client hello too long");
	r->hs_end = HS_HDR_LEN + n;
	if (!record_fits(r))
		return false;
	return parse_body(r, hello);
}

enum nfq_tls_status
nfq_tls_parse_hello(const uint8_t *buf, size_t len,
    struct nfq_tls_hello *hello)
{
	struct reader r;

	memset(&r, 0, sizeof(r));
	r.buf = buf;
	r.len = len;
	memset(hello, 0, sizeof(*hello));
	if (!parse_message(&r, hello)) {
		/* Nothing of a hello that was not accepted is reported. */
		memset(hello, 0, sizeof(*hello));
		hello->error = r.error;
		return r.status;
	}
	/* record_fits() made the last record end with the message. */
	hello->consumed = r.pos;
	hello->error = "";
	return NFQ_TLS_OK;
}

const char *
nfq_tls_version_str(uint16_t version, char *buf, size_t len)
{
	switch (version) {
	case 0x0304:
		return "TLS1.3";
	case 0x0303:
		return "TLS1.2";
	case 0x0302:
		return "TLS1.1";
	case 0x0301:
		return "TLS1.0";
	case 0x0300:
		return "SSL3.0";
	}
	if (buf == NULL || len == 0)
		return "";
	snprintf(buf, len, "0x%04x", (unsigned)version);
	return buf;
}
