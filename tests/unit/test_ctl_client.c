/* test_ctl_client.c: the CLI's reply classification and one real exchange. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "gateway/cli.h"
#include "gateway/ctl.h"

static int
parse(const char *text, json_t **reply, char *err, size_t errlen)
{
	return ctl_client_parse_reply(text, strlen(text), reply, err, errlen);
}

static void
test_reply_ok(void **state)
{
	json_t *reply;
	char err[256] = "";

	(void)state;
	assert_int_equal(parse("{\"ok\":true,\"sandboxes\":[]}\n", &reply,
	    err, sizeof(err)), EXIT_OK);
	assert_non_null(reply);
	assert_true(json_is_array(json_object_get(reply, "sandboxes")));
	assert_string_equal(err, "");
	json_decref(reply);

	/* no newline: a reply may end at EOF */
	assert_int_equal(parse("{\"ok\":true}", &reply, err, sizeof(err)),
	    EXIT_OK);
	json_decref(reply);
}

static void
test_reply_errors(void **state)
{
	json_t *reply = (json_t *)1;
	char err[256];

	(void)state;
	assert_int_equal(parse("{\"ok\":false,\"error\":\"no such sandbox\","
	    "\"code\":\"invalid\"}", &reply, err, sizeof(err)), EXIT_USAGE);
	assert_null(reply);
	assert_string_equal(err, "no such sandbox");

	assert_int_equal(parse("{\"ok\":false,\"error\":\"veth: File exists\","
	    "\"code\":\"failed\"}", &reply, err, sizeof(err)), EXIT_FAILED);
	assert_string_equal(err, "veth: File exists");

	/* a code this CLI does not know is a failure, not a usage error */
	assert_int_equal(parse("{\"ok\":false,\"error\":\"x\",\"code\":\"new\"}",
	    &reply, err, sizeof(err)), EXIT_FAILED);
	assert_int_equal(parse("{\"ok\":false}", &reply, err, sizeof(err)),
	    EXIT_FAILED);
	assert_string_equal(err, "unspecified error");

	/* control characters from the daemon never reach the terminal */
	assert_int_equal(parse("{\"ok\":false,\"error\":\"a\\u001b[2Jb\\n\","
	    "\"code\":\"failed\"}", &reply, err, sizeof(err)), EXIT_FAILED);
	assert_string_equal(err, "a?[2Jb?");
}

static void
test_reply_malformed(void **state)
{
	static const char *const bad[] = {
		"", "not json", "[1,2]", "\"ok\"", "{}", "{\"ok\":1}",
		"{\"ok\":\"true\"}", "{\"ok\":null}", "{\"ok\":true",
		"{\"ok\":true,\"ok\":false}",
	};
	json_t *reply;
	char err[256];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		if (parse(bad[i], &reply, err, sizeof(err)) != EXIT_FAILED)
			fail_msg("reply '%s' not classified as failed", bad[i]);
		assert_null(reply);
		assert_non_null(strstr(err, "unexpected reply"));
	}
}

static void
test_call_unreachable(void **state)
{
	json_t *req, *reply = (json_t *)1;
	char err[512];

	(void)state;
	req = json_pack("{s:s}", "cmd", "status");
	assert_int_equal(ctl_client_call("/nonexistent/sluice-test.sock", req,
	    &reply, err, sizeof(err)), EXIT_UNREACHABLE);
	assert_null(reply);
	assert_string_equal(err, "cannot reach sluiced at "
	    "/nonexistent/sluice-test.sock: No such file or directory "
	    "(is sluiced running?)");
	json_decref(req);
}

struct server {
	int	 fd;
	char	 request[256];
	const char *reply;	/* NULL: close without a word */
};

static void *
serve_one(void *arg)
{
	struct server *s = arg;
	size_t len = 0;
	ssize_t n;
	int c;

	if ((c = accept(s->fd, NULL, NULL)) == -1)
		return NULL;
	while (len + 1 < sizeof(s->request) &&
	    (n = read(c, s->request + len, sizeof(s->request) - 1 - len)) > 0) {
		len += (size_t)n;
		if (memchr(s->request, '\n', len) != NULL)
			break;
	}
	s->request[len] = '\0';
	if (s->reply != NULL && write(c, s->reply, strlen(s->reply)) == -1)
		s->request[0] = '\0';	/* the client's assertions catch it */
	close(c);
	return NULL;
}

/* One exchange with a server thread on a real unix socket. */
static int
exchange(const char *reply_text, char *request, size_t reqlen,
    json_t **reply, char *err, size_t errlen)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	struct server s = { .reply = reply_text };
	pthread_t t;
	json_t *req;
	int rc;

	snprintf(sun.sun_path, sizeof(sun.sun_path),
	    "/tmp/test_ctl_client.%ld.sock", (long)getpid());
	unlink(sun.sun_path);
	s.fd = socket(AF_UNIX, SOCK_STREAM, 0);
	assert_true(s.fd != -1);
	assert_int_equal(bind(s.fd, (struct sockaddr *)&sun, sizeof(sun)), 0);
	assert_int_equal(listen(s.fd, 1), 0);
	assert_int_equal(pthread_create(&t, NULL, serve_one, &s), 0);

	req = json_pack("{s:s, s:s}", "cmd", "sandbox.del", "name", "t1");
	rc = ctl_client_call(sun.sun_path, req, reply, err, errlen);
	pthread_join(t, NULL);
	json_decref(req);
	close(s.fd);
	unlink(sun.sun_path);
	snprintf(request, reqlen, "%s", s.request);
	return rc;
}

static void
test_call_roundtrip(void **state)
{
	char request[256], err[512];
	json_t *reply;

	(void)state;
	assert_int_equal(exchange("{\"ok\":true}\n", request, sizeof(request),
	    &reply, err, sizeof(err)), EXIT_OK);
	/* the wire format: one compact object and a newline */
	assert_string_equal(request,
	    "{\"cmd\":\"sandbox.del\",\"name\":\"t1\"}\n");
	json_decref(reply);

	assert_int_equal(exchange("{\"ok\":false,\"error\":\"busy\","
	    "\"code\":\"failed\"}\n", request, sizeof(request), &reply, err,
	    sizeof(err)), EXIT_FAILED);
	assert_string_equal(err, "busy");

	assert_int_equal(exchange(NULL, request, sizeof(request), &reply,
	    err, sizeof(err)), EXIT_UNREACHABLE);
	assert_non_null(strstr(err, "closed the connection without a reply"));
}

/* A reply longer than a request may be (the list of a full pool is some
 * 5.4 MB): read whole, up to CTL_REPLY_MAX (it was cut at CTL_MSG_MAX, 2
 * MiB, 6,400 sandboxes: found by review, 2026-12-03); beyond, refused. */
static char *
long_reply(size_t len)
{
	char *s = malloc(len + 1);
	size_t head = strlen("{\"ok\":true,\"pad\":\"");

	assert_non_null(s);
	memcpy(s, "{\"ok\":true,\"pad\":\"", head);
	memset(s + head, 'x', len - head - 3);
	memcpy(s + len - 3, "\"}\n", 4);
	return s;
}

static void
test_call_long_reply(void **state)
{
	char request[256], err[512], *text;
	json_t *reply;

	(void)state;
	text = long_reply(6 * 1024 * 1024);
	assert_int_equal(exchange(text, request, sizeof(request), &reply,
	    err, sizeof(err)), EXIT_OK);
	assert_int_equal(strlen(json_string_value(json_object_get(reply,
	    "pad"))), 6 * 1024 * 1024 - strlen("{\"ok\":true,\"pad\":\"") - 3);
	json_decref(reply);
	free(text);

	text = long_reply(CTL_REPLY_MAX + 4096);
	assert_int_equal(exchange(text, request, sizeof(request), &reply,
	    err, sizeof(err)), EXIT_FAILED);
	assert_non_null(strstr(err, "larger than"));
	free(text);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reply_ok),
		cmocka_unit_test(test_reply_errors),
		cmocka_unit_test(test_reply_malformed),
		cmocka_unit_test(test_call_unreachable),
		cmocka_unit_test(test_call_roundtrip),
		cmocka_unit_test(test_call_long_reply),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
