/* fuzz_control.c: libFuzzer target for the control socket: a client's bytes, read, decoded, dispatched, answered. */
#include <stdio.h>

/* The file whole: the client buffer and handle() are static. */
#include "gateway/control.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/*
 * log.h's functions, silent: a request that is refused is logged, and
 * millions of lines would be all the fuzzer did. (log.o is then not
 * linked from the library.)
 */
void log_init(const char *ident, bool foreground, bool verbose)
{ (void)ident; (void)foreground; (void)verbose; }
void log_warn(const char *fmt, ...) { (void)fmt; }
void log_warnx(const char *fmt, ...) { (void)fmt; }
void log_info(const char *fmt, ...) { (void)fmt; }
void log_debug(const char *fmt, ...) { (void)fmt; }
void fatal(const char *fmt, ...) { (void)fmt; abort(); }
void fatalx(const char *fmt, ...) { (void)fmt; abort(); }

/*
 * A gateway with an address pool of no slots: every request is decoded
 * and dispatched as sluiced does, but a sandbox.add that passes its name
 * and policy checks stops at "the pool is full", and no sandbox exists to
 * delete or to change, so nothing outside this process is touched (the
 * name check's stat of /run/netns/NAME aside).
 */
static struct gw gw;

static void
check(int ok)
{
	if (!ok)
		abort();
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	gw.cfg.netns = "sluice";
	gw.cfg.pool = "10.213.0.0/16";
	gw.cfg.control = "/nonexistent/sluice-fuzz.sock";
	gw.ctl_fd = -1;
	gw.rst_fd = -1;
	gw.gw_nsfd = gw.host_nsfd = gw.home_nsfd = gw.host_mntfd = -1;
	if ((gw.metrics = gw_metrics_new()) == NULL)
		abort();
	return 0;
}

/*
 * The input, written to one end of a socket pair that is then shut for
 * writing; the other end is served by client_io() as the event loop
 * would (POLLIN until a reply is made, then POLLOUT). The reply must be
 * one line: a JSON object with "ok", and on refusal an "error" and a
 * "code" of "invalid" or "failed".
 */
int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char reply[CTL_MSG_MAX + 1];
	struct ctl_client c;
	json_error_t jerr;
	json_t *r, *ok;
	const char *code;
	size_t got = 0, off = 0;
	ssize_t n;
	int sv[2], rounds;

	if (size > 65536)
		return 0;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) == -1)
		abort();
	memset(&c, 0, sizeof(c));
	c.fd = sv[0];
	while (off < size) {
		n = write(sv[1], data + off, size - off);
		check(n > 0);
		off += (size_t)n;
	}
	shutdown(sv[1], SHUT_WR);

	for (rounds = 0; c.fd != -1 && c.out == NULL; rounds++) {
		check(rounds < 64);
		client_io(&gw, &c, POLLIN);
	}
	if (c.fd == -1) {
		/* closed without a word: only a client that sent nothing */
		check(size == 0);
		close(sv[1]);
		return 0;
	}
	check(c.outlen > 0 && c.out[c.outlen - 1] == '\n');
	check(memchr(c.out, '\n', c.outlen - 1) == NULL);
	while (c.fd != -1) {
		client_io(&gw, &c, POLLOUT);
		while ((n = read(sv[1], reply + got, sizeof(reply) - got)) > 0)
			got += (size_t)n;
	}
	close(sv[1]);
	check(got > 0 && reply[got - 1] == '\n');

	r = json_loadb(reply, got, 0, &jerr);
	check(json_is_object(r));
	ok = json_object_get(r, "ok");
	check(json_is_boolean(ok));
	if (json_is_false(ok)) {
		code = json_string_value(json_object_get(r, "code"));
		check(json_is_string(json_object_get(r, "error")));
		check(code != NULL && (strcmp(code, "invalid") == 0 ||
		    strcmp(code, "failed") == 0));
	}
	json_decref(r);
	return 0;
}
