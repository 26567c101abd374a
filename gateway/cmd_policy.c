/* cmd_policy.c: `sluice policy set|check`. */
#include <getopt.h>
#include <stdio.h>

#include <jansson.h>

#include "gateway/cli.h"
#include "gateway/ctl.h"
#include "gateway/log.h"
#include "gateway/policy.h"

static int policy_set(int, char **, const struct cli *);
static int policy_check(int, char **, const struct cli *);

static const struct cli_action policy_actions[] = {
	{ "set", policy_set, "NAME FILE",
	    "replace a sandbox's policy",
	    NULL, false },
	{ "check", policy_check, "FILE",
	    "check a policy file (offline: no daemon needed)",
	    NULL, true },
};

const struct cli_command cmd_policy = {
	"policy", policy_actions,
	sizeof(policy_actions) / sizeof(policy_actions[0]),
};

struct policy *
cli_policy_load(const char *path)
{
	struct policy *p;
	char err[1024];

	if ((p = policy_load(path, err, sizeof(err))) == NULL)
		log_warnx("%s", err);
	return p;
}

static int
policy_set(int argc, char **argv, const struct cli *cli)
{
	static const char *const what[] = { "NAME", "FILE" };
	const char *arg[2], *sha, *mode;
	char sha_s[72], mode_s[32];
	struct policy *p = NULL;
	json_t *req = NULL, *reply = NULL, *sb;
	json_error_t jerr;
	int rc;

	if ((rc = cli_operands(argc, argv, cli, arg, 2, what)) != -1)
		return rc;
	if (!cli_name_ok(arg[0]))
		return EXIT_USAGE;
	if ((p = cli_policy_load(arg[1])) == NULL)
		return EXIT_USAGE;

	req = json_pack_ex(&jerr, 0, "{s:s, s:s, s:s%, s:s}",
	    "cmd", "policy.set", "name", arg[0], "policy", p->text, p->textlen,
	    "origin", arg[1]);
	if (req == NULL) {
		log_warnx("cannot encode the request: %s", jerr.text);
		rc = EXIT_USAGE;
		goto cleanup;
	}
	if ((rc = cli_call(cli, req, &reply)) != EXIT_OK)
		goto cleanup;
	sb = json_object_get(reply, "sandbox");
	sha = ctl_client_string(sb, "policy_sha256");
	mode = ctl_client_string(sb, "mode");
	if (sha == NULL || mode == NULL) {
		log_warnx("unexpected reply from sluiced: no policy digest");
		rc = EXIT_FAILED;
		goto cleanup;
	}
	ctl_client_printable(sha_s, sizeof(sha_s), sha);
	ctl_client_printable(mode_s, sizeof(mode_s), mode);
	printf("policy for %s: sha256 %s (%s)\n", arg[0], sha_s, mode_s);
cleanup:
	json_decref(reply);
	json_decref(req);
	policy_free(p);
	return rc;
}

static int
policy_check(int argc, char **argv, const struct cli *cli)
{
	static const char *const what[] = { "FILE" };
	const char *file;
	struct policy *p;
	int rc;

	if ((rc = cli_operands(argc, argv, cli, &file, 1, what)) != -1)
		return rc;
	if ((p = cli_policy_load(file)) == NULL)
		return EXIT_USAGE;
	printf("%s: ok (%zu allowed cidrs, %zu allowed domains, %zu denied "
	    "domains, mode %s)\n", file, p->ncidrs, p->nallowed, p->ndenied,
	    policy_mode_name(p->mode));
	policy_free(p);
	return EXIT_OK;
}
