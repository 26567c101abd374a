/* http.c: every HTTP/1.x request head of a client's stream, bodies skipped. */
#include <string.h>
#include <arpa/inet.h>

#include "nfq/nfq.h"

/*
 * Bytes go through one state machine. Head bytes are checked one by one
 * (so that garbage, a bare CR or a NUL is refused at once) and kept in
 * s->head; when the empty line ends the head, the kept head is parsed as
 * a whole. Body bytes are counted off (Content-Length, chunk data) or
 * walked through (chunk lines, trailers) without being kept. Whatever the
 * way the stream is cut into pieces, the same byte meets the same state,
 * so the same heads and errors come out.
 */
enum {
	ST_IDLE,		/* before a request line */
	ST_LEAD_CR,		/* a CR before a request line */
	ST_LEAD_DONE,		/* the one empty line tolerated, seen */
	ST_RL_METHOD,		/* the request line: s->count = bytes of */
	ST_RL_TARGET,		/* its current part */
	ST_RL_VERSION,
	ST_RL_CR,
	ST_H_START,		/* a header line or the empty line */
	ST_H_NAME,
	ST_H_VALUE,
	ST_H_CR,
	ST_H_END_CR,		/* the CR of the empty line ending the head */
	ST_BODY,		/* s->remaining bytes of Content-Length body */
	ST_CHUNK_SIZE,		/* s->remaining = the size so far, s->count =
				 * bytes of the chunk line so far */
	ST_CHUNK_EXT,
	ST_CHUNK_SIZE_CR,
	ST_CHUNK_DATA,		/* s->remaining bytes of chunk data left */
	ST_CHUNK_DATA_CR,
	ST_CHUNK_DATA_LF,
	ST_TRAILER_START,	/* s->count = bytes of trailer section */
	ST_TRAILER_NAME,
	ST_TRAILER_VALUE,
	ST_TRAILER_CR,
	ST_TRAILER_END_CR,
	ST_DEAD,		/* malformed: s->error */
};

#define METHOD_MAX	15		/* sizeof(head->method) - 1 */
/* Lengths a reader can hold without overflow and a sender never needs. */
#define BODY_MAX	(UINT64_C(1) << 62)
#define CHUNK_DIGITS_MAX 16
/* A chunk line's size and extensions, CRLF aside: no client needs more. */
#define CHUNK_LINE_MAX	1024
#define TRAILERS_MAX	NFQ_HTTP_HEAD_MAX
#define PORT_DIGITS_MAX	5

enum target_form {
	FORM_ORIGIN,
	FORM_ABSOLUTE,
	FORM_ASTERISK,
};

/* The parts of a request line, pointing into the kept head. */
struct request_line {
	const uint8_t	*method;
	size_t		 method_len;
	const uint8_t	*target;
	size_t		 target_len;
	bool		 http10;
	enum target_form form;
	const uint8_t	*authority;	/* absolute-form: host[:port] */
	size_t		 authority_len;
	const uint8_t	*rest;		/* absolute-form: after the authority */
	size_t		 rest_len;
};

/* RFC 9110 5.6.2 token characters. */
static bool
is_tchar(uint8_t c)
{
	static const char symbols[] = "!#$%&'*+-.^_`|~";

	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9'))
		return true;
	return c != 0 && memchr(symbols, c, sizeof(symbols) - 1) != NULL;
}

/* field-vchar, SP or HTAB (RFC 9110 5.5): what a field value may hold. */
static bool
is_field_char(uint8_t c)
{
	return c == ' ' || c == '\t' || (c >= 0x21 && c != 0x7f);
}

/*
 * Visible ASCII but '#': a fragment is never part of a request target
 * (RFC 9112 3.2), and anything else invisible has no business there.
 */
static bool
is_target_char(uint8_t c)
{
	return c >= 0x21 && c <= 0x7e && c != '#';
}

/* The characters of a DNS name or an IPv4 address: nothing a server could
 * decode ('%') or read as a delimiter (',', '@', '\\') into another name. */
static bool
is_host_char(uint8_t c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_';
}

static int
hex_value(uint8_t c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static uint8_t
ascii_lower(uint8_t c)
{
	return c >= 'A' && c <= 'Z' ? (uint8_t)(c - 'A' + 'a') : c;
}

/* Whether p[0..n) is the lower-case word w, ignoring ASCII case. */
static bool
equal_nocase(const uint8_t *p, size_t n, const char *w)
{
	size_t i;

	if (n != strlen(w))
		return false;
	for (i = 0; i < n; i++)
		if (ascii_lower(p[i]) != (uint8_t)w[i])
			return false;
	return true;
}

/*
 * Whether p[0..n) is the field name w with some '-' written as '_': names
 * that a server folding '_' into '-' (as CGI-style ones do) would read as
 * a framing or routing field the parser did not see.
 */
static bool
equal_underscored(const uint8_t *p, size_t n, const char *w)
{
	size_t i;
	bool underscore = false;

	if (n != strlen(w))
		return false;
	for (i = 0; i < n; i++) {
		if (p[i] == '_' && w[i] == '-')
			underscore = true;
		else if (ascii_lower(p[i]) != (uint8_t)w[i])
			return false;
	}
	return underscore;
}

/* Host names compare without regard to ASCII case (RFC 4343). */
static bool
same_host(const char *a, const char *b)
{
	for (; *a != '\0' && *b != '\0'; a++, b++)
		if (ascii_lower((uint8_t)*a) != ascii_lower((uint8_t)*b))
			return false;
	return *a == *b;
}

static void
copy_cut(char *dst, size_t dstlen, const uint8_t *src, size_t n)
{
	if (n > dstlen - 1)
		n = dstlen - 1;
	memcpy(dst, src, n);
	dst[n] = '\0';
}

/*
 * host[:port] (RFC 9110 7.2, RFC 3986 3.2.2) into out without the port
 * and without an IPv6 literal's brackets. Names and ports are held to what
 * a client can mean: a DNS name's characters, at most 255 of them, a port
 * of 1 to 5 digits up to 65535; an IPv6 literal must be an address.
 */
static bool
parse_host_port(const uint8_t *p, size_t n, char out[256])
{
	size_t hostlen, i;
	const uint8_t *port;
	size_t portlen;
	unsigned long value = 0;

	if (n == 0)
		return false;
	if (p[0] == '[') {
		const uint8_t *close = memchr(p, ']', n);
		char addr[INET6_ADDRSTRLEN];
		struct in6_addr a6;

		if (close == NULL)
			return false;
		hostlen = (size_t)(close - p) - 1;
		if (hostlen == 0 || hostlen >= sizeof(addr))
			return false;
		memcpy(addr, p + 1, hostlen);
		addr[hostlen] = '\0';
		if (inet_pton(AF_INET6, addr, &a6) != 1)
			return false;
		memcpy(out, addr, hostlen + 1);
		port = close + 1;
	} else {
		for (hostlen = 0; hostlen < n && p[hostlen] != ':'; hostlen++)
			if (!is_host_char(p[hostlen]))
				return false;
		if (hostlen == 0 || hostlen > 255)
			return false;
		memcpy(out, p, hostlen);
		out[hostlen] = '\0';
		port = p + hostlen;
	}
	portlen = n - (size_t)(port - p);
	if (portlen == 0)
		return true;
	if (port[0] != ':' || portlen < 2 || portlen - 1 > PORT_DIGITS_MAX)
		return false;
	for (i = 1; i < portlen; i++) {
		if (port[i] < '0' || port[i] > '9')
			return false;
		value = value * 10 + (unsigned long)(port[i] - '0');
	}
	return value <= 65535;
}

/*
 * The request line p[0..n) (without its CRLF), already checked byte by
 * byte: a method of tchars, one SP, a target of target chars, one SP,
 * HTTP/1.0 or HTTP/1.1. Returns NULL or what is wrong with it.
 */
static const char *
parse_request_line(const uint8_t *p, size_t n, struct request_line *rl)
{
	static const char scheme[] = "http://";
	const uint8_t *sp1, *sp2, *end;

	memset(rl, 0, sizeof(*rl));
	sp1 = memchr(p, ' ', n);
	if (sp1 == NULL)
		return "bad request line";
	sp2 = memchr(sp1 + 1, ' ', n - (size_t)(sp1 + 1 - p));
	if (sp2 == NULL)
		return "bad request line";
	rl->method = p;
	rl->method_len = (size_t)(sp1 - p);
	rl->target = sp1 + 1;
	rl->target_len = (size_t)(sp2 - rl->target);
	rl->http10 = p[n - 1] == '0';

	/* Methods are case-sensitive, but a tunnel is refused however its
	 * name is spelled. */
	if (equal_nocase(rl->method, rl->method_len, "connect"))
		return "CONNECT not allowed";
	if (rl->target_len == 1 && rl->target[0] == '*') {
		if (rl->method_len != 7 ||
		    memcmp(rl->method, "OPTIONS", 7) != 0)
			return "asterisk-form target without OPTIONS";
		rl->form = FORM_ASTERISK;
		return NULL;
	}
	if (rl->target[0] == '/') {
		rl->form = FORM_ORIGIN;
		return NULL;
	}
	if (rl->target_len < sizeof(scheme) - 1 ||
	    !equal_nocase(rl->target, sizeof(scheme) - 1, scheme))
		return "bad request target";
	rl->form = FORM_ABSOLUTE;
	rl->authority = rl->target + sizeof(scheme) - 1;
	end = rl->target + rl->target_len;
	for (rl->rest = rl->authority; rl->rest < end; rl->rest++)
		if (*rl->rest == '/' || *rl->rest == '?')
			break;
	rl->authority_len = (size_t)(rl->rest - rl->authority);
	rl->rest_len = (size_t)(end - rl->rest);
	return NULL;
}

/* Digits only, no sign, no list, at most BODY_MAX. */
static bool
parse_content_length(const uint8_t *p, size_t n, uint64_t *value)
{
	uint64_t v = 0;
	size_t i;

	if (n == 0)
		return false;
	for (i = 0; i < n; i++) {
		if (p[i] < '0' || p[i] > '9')
			return false;
		if (v > (BODY_MAX - (uint64_t)(p[i] - '0')) / 10)
			return false;
		v = v * 10 + (uint64_t)(p[i] - '0');
	}
	*value = v;
	return true;
}

/* The path of the request as origin-form would give it. */
static void
fill_path(struct nfq_http_head *head, const struct request_line *rl)
{
	if (rl->form != FORM_ABSOLUTE) {
		copy_cut(head->path, sizeof(head->path), rl->target,
		    rl->target_len);
	} else if (rl->rest_len > 0 && rl->rest[0] == '/') {
		copy_cut(head->path, sizeof(head->path), rl->rest,
		    rl->rest_len);
	} else {
		head->path[0] = '/';
		copy_cut(head->path + 1, sizeof(head->path) - 1, rl->rest,
		    rl->rest_len);
	}
}

/*
 * The complete head in s->head (every line already checked byte by byte:
 * lines end in CRLF, header lines are name ':' value). Fills head and
 * sets up the body. Returns NULL or what is wrong.
 */
static const char *
parse_head(struct nfq_http_stream *s, struct nfq_http_head *head)
{
	struct request_line rl;
	const uint8_t *p = s->head, *end = s->head + s->headlen;
	const uint8_t *line, *eol, *colon, *v, *vend;
	bool has_host = false, has_cl = false, has_te = false;
	uint64_t length = 0;
	char target_host[256];
	struct nfq_http_head h;
	const char *error;

	memset(&h, 0, sizeof(h));
	eol = memchr(p, '\r', s->headlen);
	if ((error = parse_request_line(p, (size_t)(eol - p), &rl)) != NULL)
		return error;

	for (line = eol + 2; line < end && *line != '\r'; line = eol + 2) {
		eol = memchr(line, '\r', (size_t)(end - line));
		colon = memchr(line, ':', (size_t)(eol - line));
		v = colon + 1;
		vend = eol;
		while (v < vend && (*v == ' ' || *v == '\t'))
			v++;
		while (vend > v && (vend[-1] == ' ' || vend[-1] == '\t'))
			vend--;

		if (equal_nocase(line, (size_t)(colon - line), "host")) {
			if (has_host)
				return "two Host headers";
			has_host = true;
			if (!parse_host_port(v, (size_t)(vend - v), h.host))
				return "bad Host";
		} else if (equal_nocase(line, (size_t)(colon - line),
		    "content-length")) {
			if (has_cl)
				return "repeated Content-Length";
			has_cl = true;
			if (!parse_content_length(v, (size_t)(vend - v),
			    &length))
				return "bad Content-Length";
		} else if (equal_nocase(line, (size_t)(colon - line),
		    "transfer-encoding")) {
			/* A second line would make a list: only a lone
			 * "chunked" is unambiguous. */
			if (has_te)
				return "repeated Transfer-Encoding";
			has_te = true;
			if (!equal_nocase(v, (size_t)(vend - v), "chunked"))
				return "Transfer-Encoding other than chunked";
		} else if (equal_underscored(line, (size_t)(colon - line),
		    "content-length") || equal_underscored(line,
		    (size_t)(colon - line), "transfer-encoding")) {
			return "ambiguous header name";
		}
	}

	if (has_cl && has_te)
		return "both Content-Length and Transfer-Encoding";
	/* RFC 9112 6.1: an HTTP/1.0 message with Transfer-Encoding has
	 * faulty framing. */
	if (has_te && rl.http10)
		return "Transfer-Encoding in HTTP/1.0";
	if (!has_host && !rl.http10)
		return "HTTP/1.1 request without Host";
	if (rl.form == FORM_ABSOLUTE) {
		/* The server goes by the target's host (RFC 9112 3.2.2), the
		 * policy by Host: they must be one. */
		if (!parse_host_port(rl.authority, rl.authority_len,
		    target_host))
			return "bad request target host";
		if (!has_host || !same_host(target_host, h.host))
			return "absolute-form target host differs from Host";
		h.absolute = true;
	}

	copy_cut(h.method, sizeof(h.method), rl.method, rl.method_len);
	fill_path(&h, &rl);
	*head = h;

	s->remaining = 0;
	s->count = 0;
	if (has_te)
		s->state = ST_CHUNK_SIZE;
	else if (length > 0) {
		s->state = ST_BODY;
		s->remaining = length;
	} else
		s->state = ST_IDLE;
	return NULL;
}

/* Begins a request line with its first byte. */
static void
start_head(struct nfq_http_stream *s)
{
	s->state = ST_RL_METHOD;
	s->headlen = 0;
	s->count = 0;
}

/*
 * One byte of a head: checks it, and moves the state on. Returns NULL or
 * what is wrong. ST_H_END_CR taking its LF is the caller's business.
 */
static const char *
step_head(struct nfq_http_stream *s, uint8_t c)
{
	static const char version[] = "HTTP/1.";

	switch (s->state) {
	case ST_RL_METHOD:
		if (c == ' ') {
			if (s->count == 0)
				return "bad method";
			s->state = ST_RL_TARGET;
			s->count = 0;
		} else if (!is_tchar(c))
			return c == '\r' || c == '\n' ? "bad request line" :
			    "bad method";
		else if (++s->count > METHOD_MAX)
			return "method too long";
		return NULL;
	case ST_RL_TARGET:
		if (c == ' ') {
			if (s->count == 0)
				return "bad request target";
			s->state = ST_RL_VERSION;
			s->count = 0;
		} else if (!is_target_char(c))
			return c == '\r' || c == '\n' ? "bad request line" :
			    "bad request target";
		else
			s->count++;
		return NULL;
	case ST_RL_VERSION:
		if (s->count < sizeof(version) - 1) {
			if (c != (uint8_t)version[s->count])
				return "bad HTTP version";
		} else if (s->count == sizeof(version) - 1) {
			if (c != '0' && c != '1')
				return "bad HTTP version";
		} else if (c == '\r') {
			s->state = ST_RL_CR;
			return NULL;
		} else
			return c == '\n' ? "LF without CR" : "bad HTTP version";
		s->count++;
		return NULL;
	case ST_RL_CR:
	case ST_H_CR:
		if (c != '\n')
			return "bare CR";
		s->state = ST_H_START;
		return NULL;
	case ST_H_START:
		if (c == '\r')
			s->state = ST_H_END_CR;
		else if (c == ' ' || c == '\t')
			return "obs-fold header line";
		else if (c == '\n')
			return "LF without CR";
		else if (is_tchar(c))
			s->state = ST_H_NAME;
		else
			return "bad header name";
		return NULL;
	case ST_H_NAME:
		if (c == ':')
			s->state = ST_H_VALUE;
		else if (c == '\n')
			return "LF without CR";
		else if (!is_tchar(c))
			return "bad header name";
		return NULL;
	case ST_H_VALUE:
		if (c == '\r')
			s->state = ST_H_CR;
		else if (c == '\n')
			return "LF without CR";
		else if (!is_field_char(c))
			return "bad header value";
		return NULL;
	default:
		return "internal state";
	}
}

/* One byte of a chunk line or of the trailer section. */
static const char *
step_chunk(struct nfq_http_stream *s, uint8_t c)
{
	int d;

	switch (s->state) {
	case ST_CHUNK_SIZE:
		if ((d = hex_value(c)) >= 0) {
			if (++s->count > CHUNK_DIGITS_MAX ||
			    s->remaining > (BODY_MAX - (uint64_t)d) / 16)
				return "chunk size too large";
			s->remaining = s->remaining * 16 + (uint64_t)d;
		} else if (s->count == 0)
			return "bad chunk size";
		else if (c == ';') {
			s->count++;
			s->state = ST_CHUNK_EXT;
		} else if (c == '\r')
			s->state = ST_CHUNK_SIZE_CR;
		else
			return c == '\n' ? "LF without CR" : "bad chunk size";
		return NULL;
	case ST_CHUNK_EXT:
		if (c == '\r') {
			s->state = ST_CHUNK_SIZE_CR;
			return NULL;
		}
		if (++s->count > CHUNK_LINE_MAX)
			return "chunk line too long";
		if (c == '\n')
			return "LF without CR";
		else if (!is_field_char(c))
			return "bad chunk extension";
		return NULL;
	case ST_CHUNK_SIZE_CR:
		if (c != '\n')
			return "bare CR";
		s->count = 0;
		s->state = s->remaining == 0 ? ST_TRAILER_START : ST_CHUNK_DATA;
		return NULL;
	case ST_CHUNK_DATA_CR:
		if (c != '\r')
			return "missing CRLF after chunk data";
		s->state = ST_CHUNK_DATA_LF;
		return NULL;
	case ST_CHUNK_DATA_LF:
		if (c != '\n')
			return "missing CRLF after chunk data";
		s->state = ST_CHUNK_SIZE;
		s->count = 0;
		s->remaining = 0;
		return NULL;
	default:
		break;
	}

	/* The trailer section: field lines like a head's, then CRLF. */
	if (++s->count > TRAILERS_MAX)
		return "trailer section too long";
	switch (s->state) {
	case ST_TRAILER_START:
		if (c == '\r')
			s->state = ST_TRAILER_END_CR;
		else if (c == ' ' || c == '\t')
			return "obs-fold trailer line";
		else if (c == '\n')
			return "LF without CR";
		else if (is_tchar(c))
			s->state = ST_TRAILER_NAME;
		else
			return "bad trailer field";
		return NULL;
	case ST_TRAILER_NAME:
		if (c == ':')
			s->state = ST_TRAILER_VALUE;
		else if (c == '\n')
			return "LF without CR";
		else if (!is_tchar(c))
			return "bad trailer field";
		return NULL;
	case ST_TRAILER_VALUE:
		if (c == '\r')
			s->state = ST_TRAILER_CR;
		else if (c == '\n')
			return "LF without CR";
		else if (!is_field_char(c))
			return "bad trailer field";
		return NULL;
	case ST_TRAILER_CR:
		if (c != '\n')
			return "bare CR";
		s->state = ST_TRAILER_START;
		return NULL;
	case ST_TRAILER_END_CR:
		if (c != '\n')
			return "bare CR";
		s->state = ST_IDLE;
		return NULL;
	default:
		return "internal state";
	}
}

void
nfq_http_init(struct nfq_http_stream *s)
{
	memset(s, 0, sizeof(*s));
	s->state = ST_IDLE;
}

bool
nfq_http_in_head(const struct nfq_http_stream *s)
{
	/* A dead stream's bytes belong to no request that was let through. */
	return (s->state >= ST_RL_METHOD && s->state <= ST_H_END_CR) ||
	    s->state == ST_DEAD;
}

uint64_t
nfq_http_opaque(const struct nfq_http_stream *s)
{
	return s->state == ST_BODY || s->state == ST_CHUNK_DATA ?
	    s->remaining : 0;
}

/* nfq_http_feed, and with stop set nfq_http_feed_framing: the same walk,
 * which then ends where body or chunk data begins. */
static enum nfq_http_status
feed(struct nfq_http_stream *s, const uint8_t *buf, size_t len,
    size_t *used, struct nfq_http_head *head, const char **error, bool stop)
{
	const char *why = NULL;
	size_t i = 0, n;
	uint8_t c;

	if (error != NULL)
		*error = NULL;
	if (s->state == ST_DEAD) {
		*used = 0;
		if (error != NULL)
			*error = s->error;
		return NFQ_HTTP_MALFORMED;
	}

	while (i < len) {
		if (s->state == ST_BODY || s->state == ST_CHUNK_DATA) {
			if (stop) {
				*used = i;
				return NFQ_HTTP_NEED_MORE;
			}
			n = len - i;
			if ((uint64_t)n > s->remaining)
				n = (size_t)s->remaining;
			i += n;
			s->remaining -= n;
			if (s->remaining == 0)
				s->state = s->state == ST_BODY ? ST_IDLE :
				    ST_CHUNK_DATA_CR;
			continue;
		}

		c = buf[i++];
		/* Nowhere outside a body does a NUL belong. */
		if (c == '\0') {
			why = "NUL byte";
			goto dead;
		}
		switch (s->state) {
		case ST_IDLE:
		case ST_LEAD_DONE:
			if (c == '\r') {
				if (s->state == ST_LEAD_DONE) {
					why = "more than one empty line "
					    "before a request";
					goto dead;
				}
				s->state = ST_LEAD_CR;
				continue;
			}
			if (c == '\n') {
				why = "LF without CR";
				goto dead;
			}
			start_head(s);
			break;
		case ST_LEAD_CR:
			if (c != '\n') {
				why = "bare CR";
				goto dead;
			}
			s->state = ST_LEAD_DONE;
			continue;
		default:
			break;
		}

		if (s->state >= ST_RL_METHOD && s->state <= ST_H_END_CR) {
			if (s->headlen == NFQ_HTTP_HEAD_MAX) {
				why = "request head too long";
				goto dead;
			}
			s->head[s->headlen++] = c;
			if (s->state != ST_H_END_CR)
				why = step_head(s, c);
			else if (c != '\n')
				why = "bare CR";
			else if ((why = parse_head(s, head)) == NULL) {
				*used = i;
				return NFQ_HTTP_HEAD;
			}
		} else
			why = step_chunk(s, c);
		if (why != NULL)
			goto dead;
	}
	*used = len;
	return NFQ_HTTP_NEED_MORE;

dead:
	s->state = ST_DEAD;
	s->error = why;
	*used = i;
	if (error != NULL)
		*error = why;
	return NFQ_HTTP_MALFORMED;
}

enum nfq_http_status
nfq_http_feed(struct nfq_http_stream *s, const uint8_t *buf, size_t len,
    size_t *used, struct nfq_http_head *head, const char **error)
{
	return feed(s, buf, len, used, head, error, false);
}

enum nfq_http_status
nfq_http_feed_framing(struct nfq_http_stream *s, const uint8_t *buf,
    size_t len, size_t *used, struct nfq_http_head *head, const char **error)
{
	return feed(s, buf, len, used, head, error, true);
}
