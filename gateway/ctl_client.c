/* ctl_client.c: the CLI's side of the control protocol (ctl.h). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "gateway/cli.h"
#include "gateway/ctl.h"

#define REPLY_CHUNK	4096

static int64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Milliseconds left until deadline, at least 0. */
static int
remaining_ms(int64_t deadline)
{
	int64_t left = deadline - now_ms();

	return left > 0 ? (int)left : 0;
}

void
ctl_client_printable(char *dst, size_t dstlen, const char *src)
{
	size_t i;

	if (dstlen == 0)
		return;
	for (i = 0; src[i] != '\0' && i + 1 < dstlen; i++) {
		unsigned char c = (unsigned char)src[i];

		dst[i] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
	}
	dst[i] = '\0';
}

const char *
ctl_client_string(const json_t *obj, const char *key)
{
	const json_t *v;

	if (!json_is_object(obj))
		return NULL;
	v = json_object_get(obj, key);
	return json_is_string(v) ? json_string_value(v) : NULL;
}

int
ctl_client_parse_reply(const char *buf, size_t len, json_t **reply,
    char *err, size_t errlen)
{
	json_error_t jerr;
	json_t *root, *ok;
	const char *msg, *code;
	char safe[512];
	int rc;

	*reply = NULL;
	/* JSON_REJECT_DUPLICATES: an ambiguous "ok" must not be guessed. */
	root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
	if (root == NULL) {
		snprintf(err, errlen, "unexpected reply from sluiced: "
		    "not JSON (%d:%d: %s)", jerr.line, jerr.column, jerr.text);
		return EXIT_FAILED;
	}
	ok = json_object_get(root, "ok");
	if (!json_is_object(root) || !json_is_boolean(ok)) {
		snprintf(err, errlen, "unexpected reply from sluiced: %s",
		    json_is_object(root) ? "no boolean \"ok\" member" :
		    "not a JSON object");
		json_decref(root);
		return EXIT_FAILED;
	}
	if (json_is_true(ok)) {
		*reply = root;
		return EXIT_OK;
	}

	msg = ctl_client_string(root, "error");
	code = ctl_client_string(root, "code");
	ctl_client_printable(safe, sizeof(safe),
	    msg != NULL && msg[0] != '\0' ? msg : "unspecified error");
	if (code != NULL && strcmp(code, "invalid") == 0)
		rc = EXIT_USAGE;
	else
		rc = EXIT_FAILED;	/* "failed", and codes we do not know */
	snprintf(err, errlen, "%s", safe);
	json_decref(root);
	return rc;
}

/* Connects to path, blocking for at most timeout_ms. Returns the socket
 * (non-blocking) or -1 with an EXIT_* code in *rc and a message in err. */
static int
ctl_connect(const char *path, int timeout_ms, int *rc, char *err,
    size_t errlen)
{
	struct sockaddr_un addr;
	struct timeval tv;
	const char *hint;
	int fd, flags;

	memset(&addr, 0, sizeof(addr));
	addr.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(addr.sun_path)) {
		snprintf(err, errlen, "control socket path too long (at most "
		    "%zu bytes): %s", sizeof(addr.sun_path) - 1, path);
		*rc = EXIT_USAGE;
		return -1;
	}
	memcpy(addr.sun_path, path, strlen(path) + 1);

	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd == -1) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		*rc = EXIT_FAILED;
		return -1;
	}
	/*
	 * A unix stream connect() blocks while the daemon's listen backlog is
	 * full, and honours SO_SNDTIMEO while it waits (EAGAIN when it runs
	 * out): a wedged daemon cannot hang the CLI.
	 */
	tv.tv_sec = timeout_ms / 1000;
	tv.tv_usec = (timeout_ms % 1000) * 1000;
	(void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) == -1) {
		int saved = errno;

		if (saved == EAGAIN || saved == EINPROGRESS)
			snprintf(err, errlen, "cannot reach sluiced at %s: no "
			    "connection within %d ms (is sluiced stuck?)", path,
			    timeout_ms);
		else {
			if (saved == EACCES || saved == EPERM)
				hint = "root or the socket's group may connect";
			else
				hint = "is sluiced running?";
			snprintf(err, errlen, "cannot reach sluiced at %s: %s "
			    "(%s)", path, strerror(saved), hint);
		}
		close(fd);
		*rc = EXIT_UNREACHABLE;
		return -1;
	}
	flags = fcntl(fd, F_GETFL);
	if (flags == -1 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) == -1) {
		snprintf(err, errlen, "fcntl: %s", strerror(errno));
		close(fd);
		*rc = EXIT_FAILED;
		return -1;
	}
	return fd;
}

/* Waits for events on fd until deadline. Returns 1 when ready, 0 on
 * timeout, -1 on error (errno set). */
static int
wait_fd(int fd, short events, int64_t deadline)
{
	struct pollfd pfd = { .fd = fd, .events = events };
	int n;

	do {
		n = poll(&pfd, 1, remaining_ms(deadline));
	} while (n == -1 && errno == EINTR);
	return n;
}

/*
 * Writes all of msg. Returns 0, 1 if the daemon stopped reading (it may
 * still have sent a reply that says why), or -1 on timeout or error.
 */
static int
send_all(int fd, const char *msg, size_t len, int64_t deadline)
{
	size_t off = 0;
	ssize_t n;
	int w;

	while (off < len) {
		/* MSG_NOSIGNAL: a daemon that closes early must not kill us
		 * with SIGPIPE before we read its reason. */
		n = send(fd, msg + off, len - off, MSG_NOSIGNAL);
		if (n > 0) {
			off += (size_t)n;
			continue;
		}
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1 && (errno == EPIPE || errno == ECONNRESET))
			return 1;
		if (n == -1 && errno != EAGAIN)
			return -1;
		w = wait_fd(fd, POLLOUT, deadline);
		if (w <= 0) {
			if (w == 0)
				errno = ETIMEDOUT;
			return -1;
		}
	}
	return 0;
}

/*
 * Reads one reply: up to and including "\n", or to EOF. Returns the bytes
 * read (*buf malloc'd, caller frees; 0 means the daemon closed without a
 * word), -1 on timeout or error (errno set; EMSGSIZE for a reply over
 * CTL_REPLY_MAX).
 */
static ssize_t
recv_reply(int fd, char **buf, int64_t deadline)
{
	char *b = NULL, *nb;
	size_t len = 0, cap = 0;
	ssize_t n;
	int w;

	*buf = NULL;
	for (;;) {
		if (len == cap) {
			if (cap >= CTL_REPLY_MAX) {
				errno = EMSGSIZE;
				goto fail;
			}
			cap = cap == 0 ? REPLY_CHUNK : cap * 2;
			if (cap > CTL_REPLY_MAX)
				cap = CTL_REPLY_MAX;
			if ((nb = realloc(b, cap)) == NULL)
				goto fail;
			b = nb;
		}
		n = recv(fd, b + len, cap - len, 0);
		if (n > 0) {
			if (memchr(b + len, '\n', (size_t)n) != NULL) {
				len += (size_t)n;
				break;
			}
			len += (size_t)n;
			continue;
		}
		if (n == 0)
			break;
		if (errno == EINTR)
			continue;
		if (errno == ECONNRESET)
			break;	/* as EOF: what arrived before still counts */
		if (errno != EAGAIN)
			goto fail;
		w = wait_fd(fd, POLLIN, deadline);
		if (w <= 0) {
			if (w == 0)
				errno = ETIMEDOUT;
			goto fail;
		}
	}
	*buf = b;
	return (ssize_t)len;
fail:
	free(b);
	return -1;
}

int
ctl_client_call(const char *socket_path, const json_t *request,
    json_t **reply, char *err, size_t errlen)
{
	char *msg = NULL, *buf = NULL, *nl;
	size_t len;
	ssize_t got;
	int64_t deadline;
	int fd = -1, rc = EXIT_FAILED, sent;

	*reply = NULL;
	deadline = now_ms() + CTL_TIMEOUT_MS;

	len = json_dumpb(request, NULL, 0, JSON_COMPACT);
	if (len == 0) {
		snprintf(err, errlen, "cannot encode the request");
		return EXIT_FAILED;
	}
	if (len + 1 > CTL_MSG_MAX) {
		snprintf(err, errlen, "request too large: %zu bytes, at most "
		    "%d", len + 1, CTL_MSG_MAX);
		return EXIT_USAGE;
	}
	if ((msg = malloc(len + 1)) == NULL) {
		snprintf(err, errlen, "out of memory");
		return EXIT_FAILED;
	}
	if (json_dumpb(request, msg, len, JSON_COMPACT) != len) {
		snprintf(err, errlen, "cannot encode the request");
		goto cleanup;
	}
	msg[len] = '\n';

	if ((fd = ctl_connect(socket_path, CTL_TIMEOUT_MS, &rc, err,
	    errlen)) == -1)
		goto cleanup;
	sent = send_all(fd, msg, len + 1, deadline);
	if (sent == -1) {
		snprintf(err, errlen, "sluiced at %s: sending the request: %s",
		    socket_path, strerror(errno));
		rc = EXIT_UNREACHABLE;
		goto cleanup;
	}
	/* Even when the daemon stopped reading (sent == 1), its reply may
	 * say why. */
	got = recv_reply(fd, &buf, deadline);
	if (got == -1) {
		if (errno == ETIMEDOUT) {
			snprintf(err, errlen, "sluiced at %s did not reply "
			    "within %d ms", socket_path, CTL_TIMEOUT_MS);
			rc = EXIT_UNREACHABLE;
		} else if (errno == EMSGSIZE) {
			snprintf(err, errlen, "reply from sluiced larger than "
			    "%d bytes", CTL_REPLY_MAX);
			rc = EXIT_FAILED;
		} else {
			snprintf(err, errlen, "sluiced at %s: reading the "
			    "reply: %s", socket_path, strerror(errno));
			rc = errno == ENOMEM ? EXIT_FAILED : EXIT_UNREACHABLE;
		}
		goto cleanup;
	}
	if (got == 0) {
		snprintf(err, errlen, "sluiced at %s closed the connection "
		    "without a reply", socket_path);
		rc = EXIT_UNREACHABLE;
		goto cleanup;
	}
	/* Only the first line is the reply. */
	nl = memchr(buf, '\n', (size_t)got);
	rc = ctl_client_parse_reply(buf, nl != NULL ? (size_t)(nl - buf) :
	    (size_t)got, reply, err, errlen);
cleanup:
	if (fd != -1)
		close(fd);
	free(buf);
	free(msg);
	return rc;
}
