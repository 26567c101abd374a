/* sluice.c: the sluice CLI: global options, the command table, help, status. */
#include <getopt.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "gateway/cli.h"
#include "gateway/ctl.h"
#include "gateway/log.h"
#include "gateway/names.h"

static int status_run(int, char **, const struct cli *);
static int help_run(int, char **, const struct cli *);

static const struct cli_action status_actions[] = {
	{ NULL, status_run, "[-j]",
	    "show the daemon's state and counters",
	    "  -j, --json     print the daemon's JSON object, not key: value lines\n",
	    false },
};
static const struct cli_command cmd_status = {
	"status", status_actions, 1,
};

static const struct cli_action help_actions[] = {
	{ NULL, help_run, "[COMMAND [ACTION]]",
	    "show a command's synopsis and flags",
	    NULL, true },
};
static const struct cli_command cmd_help = {
	"help", help_actions, 1,
};

/* Adding a command: one row here, one cmd_*.c file with its actions. */
static const struct cli_command *const commands[] = {
	&cmd_sandbox,
	&cmd_policy,
	&cmd_log,
	&cmd_replay,
	&cmd_status,
	&cmd_stats,
	&cmd_help,
};
#define NCOMMANDS	(sizeof(commands) / sizeof(commands[0]))


static const struct cli_command *
find_command(const char *name)
{
	size_t i;

	for (i = 0; i < NCOMMANDS; i++)
		if (strcmp(commands[i]->name, name) == 0)
			return commands[i];
	return NULL;
}

static bool
has_actions(const struct cli_command *cmd)
{
	return cmd->actions[0].name != NULL;
}

static const struct cli_action *
find_action(const struct cli_command *cmd, const char *name)
{
	size_t i;

	for (i = 0; i < cmd->nactions; i++)
		if (strcmp(cmd->actions[i].name, name) == 0)
			return &cmd->actions[i];
	return NULL;
}

static bool
is_help_word(const char *arg)
{
	return strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0 ||
	    strcmp(arg, "help") == 0;
}

static void
print_synopsis(FILE *f, const char *lead, const struct cli_command *cmd,
    const struct cli_action *a)
{
	fprintf(f, "%ssluice%s %s%s%s%s%s\n", lead,
	    a->offline ? "" : " [-s SOCK]", cmd->name,
	    a->name != NULL ? " " : "", a->name != NULL ? a->name : "",
	    a->args[0] != '\0' ? " " : "", a->args);
}

/* The "usage:" lines of every action of cmd. */
static void
command_usage(FILE *f, const struct cli_command *cmd)
{
	size_t i;

	for (i = 0; i < cmd->nactions; i++)
		print_synopsis(f, i == 0 ? "usage: " : "       ", cmd,
		    &cmd->actions[i]);
}

void
cli_action_help(FILE *f, const struct cli *cli)
{
	const struct cli_action *a = cli->action;

	print_synopsis(f, "usage: ", cli->command, a);
	fprintf(f, "\n%s\n\nOptions:\n%s  -h, --help     show this help\n",
	    a->summary, a->options != NULL ? a->options : "");
}

static void
command_help(FILE *f, const struct cli_command *cmd)
{
	size_t i;

	if (!has_actions(cmd)) {
		struct cli cli = { NULL, cmd, &cmd->actions[0] };

		cli_action_help(f, &cli);
		return;
	}
	command_usage(f, cmd);
	for (i = 0; i < cmd->nactions; i++) {
		fprintf(f, "\n");
		print_synopsis(f, "", cmd, &cmd->actions[i]);
		fprintf(f, "  %s\n", cmd->actions[i].summary);
		if (cmd->actions[i].options != NULL)
			fprintf(f, "%s", cmd->actions[i].options);
	}
}

static void
global_usage(FILE *f)
{
	const struct cli_command *cmd;
	char word[32];
	size_t i, j;

	fprintf(f,
	    "usage: sluice [-s SOCK] COMMAND [ARGS]\n"
	    "       sluice help [COMMAND [ACTION]]\n"
	    "       sluice --version\n"
	    "\nCommands:\n");
	for (i = 0; i < NCOMMANDS; i++) {
		cmd = commands[i];
		for (j = 0; j < cmd->nactions; j++) {
			snprintf(word, sizeof(word), "%s%s%s", cmd->name,
			    cmd->actions[j].name != NULL ? " " : "",
			    cmd->actions[j].name != NULL ?
			    cmd->actions[j].name : "");
			fprintf(f, "  %-14s %s\n", word,
			    cmd->actions[j].summary);
		}
	}
}

static void
global_help(FILE *f)
{
	global_usage(f);
	fprintf(f,
	    "\nOptions:\n"
	    "  -s, --socket SOCK  sluiced's control socket (default: the "
	    "environment's\n"
	    "                     SLUICE_SOCKET, else " CTL_SOCKET_DEFAULT ")\n"
	    "  -h, --help         show this help\n"
	    "  --version          show the version\n"
	    "\nExit status:\n"
	    "  0  success\n"
	    "  1  usage error or invalid input (a bad name, a policy file that "
	    "does not\n"
	    "     parse, a request sluiced rejected as invalid)\n"
	    "  2  the operation failed (sluiced says why)\n"
	    "  3  sluiced is unreachable: no socket, connection refused, no "
	    "permission,\n"
	    "     or no reply within %d seconds\n"
	    "\nRun 'sluice help COMMAND' for a command's synopsis and flags.\n",
	    CTL_TIMEOUT_MS / 1000);
}

int
cli_usage_error(const struct cli *cli, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (cli->action->name != NULL)
		log_warnx("%s %s: %s", cli->command->name, cli->action->name,
		    msg);
	else
		log_warnx("%s: %s", cli->command->name, msg);
	print_synopsis(stderr, "usage: ", cli->command, cli->action);
	return EXIT_USAGE;
}

/*
 * What getopt_long complained about, in words (optstring starts with ":").
 * The offending option is worked out from optopt, since in a cluster such
 * as "-xj" getopt_long has not yet moved optind past the bad letter.
 */
static void
option_message(int c, char **argv, const char *optstring, char *buf,
    size_t len)
{
	const char *arg = argv[optind - 1];	/* the last one consumed */
	int namelen = (int)strcspn(arg, "=");

	if (c == ':') {
		/* the option was the last argument, so it is arg */
		if (strncmp(arg, "--", 2) == 0)
			snprintf(buf, len, "option '%s' needs an argument",
			    arg);
		else
			snprintf(buf, len, "option '-%c' needs an argument",
			    optopt);
	} else if (optopt == 0)
		snprintf(buf, len, "unknown option '%.*s'", namelen, arg);
	else if (optopt < 256 && strchr(optstring, optopt) == NULL)
		snprintf(buf, len, "unknown option '-%c'", optopt);
	else	/* a known long option given "=value" */
		snprintf(buf, len, "option '%.*s' takes no argument", namelen,
		    arg);
}

int
cli_option_error(const struct cli *cli, int c, char **argv,
    const char *optstring)
{
	char msg[256];

	option_message(c, argv, optstring, msg, sizeof(msg));
	return cli_usage_error(cli, "%s", msg);
}

/* One more operand into operand[*got], if the action takes one more;
 * got may be NULL for an action that takes none (n 0). */
static int
take_operand(const struct cli *cli, const char *arg, const char **operand,
    int n, int *got)
{
	if (got == NULL || *got == n)
		return cli_usage_error(cli, "unexpected argument '%s'", arg);
	operand[(*got)++] = arg;
	return -1;
}

int
cli_opt_default(const struct cli *cli, int c, char **argv,
    const char *optstring, const char **operand, int n, int *got)
{
	switch (c) {
	case 'h':
		cli_action_help(stdout, cli);
		return EXIT_OK;
	case 1:
		return take_operand(cli, optarg, operand, n, got);
	default:
		return cli_option_error(cli, c, argv, optstring);
	}
}

int
cli_opt_operands(const struct cli *cli, int argc, char **argv,
    const char **operand, int n, int *got)
{
	int rc;

	for (; optind < argc; optind++)
		if ((rc = take_operand(cli, argv[optind], operand, n,
		    got)) != -1)
			return rc;
	return -1;
}

/*
 * Parses the arguments of an action whose only flag is -j/--json and that
 * takes no operands. Returns -1 to go on, or the EXIT_* code the action
 * should return (help was shown, or a usage error printed).
 */
int
cli_parse_json_flag(int argc, char **argv, const struct cli *cli, bool *json)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static const char optstring[] = "-:jh";
	int c, rc;

	*json = false;
	optind = 0;
	while ((c = getopt_long(argc, argv, optstring, longopts, NULL)) != -1) {
		switch (c) {
		case 'j':
			*json = true;
			break;
		default:
			if ((rc = cli_opt_default(cli, c, argv, optstring,
			    NULL, 0, NULL)) != -1)
				return rc;
		}
	}
	if ((rc = cli_opt_operands(cli, argc, argv, NULL, 0, NULL)) != -1)
		return rc;
	return -1;
}


bool
cli_name_ok(const char *name)
{
	if (gw_sandbox_name_valid(name))
		return true;
	log_warnx("invalid sandbox name '%s': use 1 to %d characters from "
	    "A-Z a-z 0-9 _ . -, not starting with '.' or '-'", name,
	    GW_SANDBOX_NAME_MAX);
	return false;
}

int
cli_call(const struct cli *cli, const json_t *req, json_t **reply)
{
	char err[1024];
	int rc;

	rc = ctl_client_call(cli->socket, req, reply, err, sizeof(err));
	if (rc != EXIT_OK)
		log_warnx("%s", err);
	return rc;
}

int
cli_operands(int argc, char **argv, const struct cli *cli, const char **operand,
    int n, const char *const *what)
{
	static const struct option longopts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static const char optstring[] = "-:h";
	int c, rc, got = 0;

	optind = 0;
	while ((c = getopt_long(argc, argv, optstring, longopts, NULL)) != -1)
		if ((rc = cli_opt_default(cli, c, argv, optstring, operand, n,
		    &got)) != -1)
			return rc;
	if ((rc = cli_opt_operands(cli, argc, argv, operand, n, &got)) != -1)
		return rc;
	if (got < n)
		return cli_usage_error(cli, "missing %s", what[got]);
	return -1;
}

void
cli_print_json(const json_t *json)
{
	/* ASCII only: a row's strings are what a sandbox sent (an SNI may
	 * hold any byte but NUL), and UTF-8 C1 controls (U+009B, CSI) went
	 * to the operator's terminal as they came (found by review,
	 * 2026-12-03) */
	if (json_dumpf(json, stdout, JSON_COMPACT | JSON_ENSURE_ASCII) == 0)
		fputc('\n', stdout);
}

/* `status` prints nested objects as dotted keys, one value a line. */
static void
print_flat(const json_t *obj, const char *prefix)
{
	const char *key;
	json_t *v;
	char path[256], safe[1024], *s;

	json_object_foreach((json_t *)obj, key, v) {
		snprintf(path, sizeof(path), "%s%s", prefix, key);
		if (json_is_object(v)) {
			strncat(path, ".", sizeof(path) - strlen(path) - 1);
			print_flat(v, path);
			continue;
		}
		ctl_client_printable(safe, sizeof(safe), path);
		printf("%s: ", safe);
		if (json_is_string(v)) {
			ctl_client_printable(safe, sizeof(safe),
			    json_string_value(v));
			printf("%s\n", safe);
		} else if (json_is_null(v))
			printf("-\n");
		else if ((s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY)) !=
		    NULL) {
			ctl_client_printable(safe, sizeof(safe), s);
			printf("%s\n", safe);
			free(s);
		} else
			printf("?\n");
	}
}

static int
status_run(int argc, char **argv, const struct cli *cli)
{
	json_t *req = NULL, *reply = NULL;
	bool json = false;
	int rc;

	if ((rc = cli_parse_json_flag(argc, argv, cli, &json)) != -1)
		return rc;

	if ((req = json_pack("{s:s}", "cmd", "status")) == NULL) {
		log_warnx("out of memory");
		return EXIT_FAILED;
	}
	if ((rc = cli_call(cli, req, &reply)) != EXIT_OK)
		goto cleanup;
	json_object_del(reply, "ok");
	if (json)
		cli_print_json(reply);
	else
		print_flat(reply, "");
cleanup:
	json_decref(reply);
	json_decref(req);
	return rc;
}

static int
help_run(int argc, char **argv, const struct cli *cli)
{
	const struct cli_command *cmd;
	const struct cli_action *a;
	struct cli sub = { cli->socket, NULL, NULL };

	if (argc < 2 || is_help_word(argv[1])) {
		global_help(stdout);
		return EXIT_OK;
	}
	if ((cmd = find_command(argv[1])) == NULL) {
		log_warnx("help: unknown command '%s'", argv[1]);
		global_usage(stderr);
		return EXIT_USAGE;
	}
	if (argc == 2 || !has_actions(cmd)) {
		if (argc > 2)
			return cli_usage_error(cli, "unexpected argument '%s'",
			    argv[2]);
		command_help(stdout, cmd);
		return EXIT_OK;
	}
	if (argc > 3)
		return cli_usage_error(cli, "unexpected argument '%s'",
		    argv[3]);
	if ((a = find_action(cmd, argv[2])) == NULL) {
		log_warnx("help: %s has no action '%s'", cmd->name, argv[2]);
		command_usage(stderr, cmd);
		return EXIT_USAGE;
	}
	sub.command = cmd;
	sub.action = a;
	cli_action_help(stdout, &sub);
	return EXIT_OK;
}

static int
run_command(const struct cli_command *cmd, int argc, char **argv,
    const char *socket_path)
{
	struct cli cli = { socket_path, cmd, NULL };

	if (!has_actions(cmd)) {
		cli.action = &cmd->actions[0];
		return cli.action->run(argc, argv, &cli);
	}
	if (argc < 2) {
		log_warnx("%s: missing action", cmd->name);
		command_usage(stderr, cmd);
		return EXIT_USAGE;
	}
	if (is_help_word(argv[1])) {
		command_help(stdout, cmd);
		return EXIT_OK;
	}
	if ((cli.action = find_action(cmd, argv[1])) == NULL) {
		log_warnx("%s: unknown action '%s'", cmd->name, argv[1]);
		command_usage(stderr, cmd);
		return EXIT_USAGE;
	}
	return cli.action->run(argc - 1, argv + 1, &cli);
}

int
main(int argc, char **argv)
{
	enum { OPT_VERSION = 256 };
	static const struct option longopts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, OPT_VERSION },
		{ NULL, 0, NULL, 0 },
	};
	const struct cli_command *cmd;
	/* "+": stop at the command; what follows belongs to it. */
	const char *optstring = "+:s:h";
	const char *socket_path = NULL, *env;
	char buf[256];
	int c, rc = EXIT_USAGE;

	log_init("sluice", true, false);
	opterr = 0;
	while ((c = getopt_long(argc, argv, optstring, longopts, NULL)) != -1) {
		switch (c) {
		case 's':
			if (optarg[0] == '\0') {
				log_warnx("-s needs a socket path");
				goto usage;
			}
			socket_path = optarg;
			break;
		case 'h':
			global_help(stdout);
			rc = EXIT_OK;
			goto done;
		case OPT_VERSION:
			printf("sluice %s\n", SLUICE_VERSION);
			rc = EXIT_OK;
			goto done;
		default:
			option_message(c, argv, optstring, buf, sizeof(buf));
			log_warnx("%s", buf);
			goto usage;
		}
	}
	if (socket_path == NULL) {
		env = getenv("SLUICE_SOCKET");
		socket_path = env != NULL && env[0] != '\0' ? env :
		    CTL_SOCKET_DEFAULT;
	}
	if (optind == argc) {
		log_warnx("missing command");
		goto usage;
	}
	if ((cmd = find_command(argv[optind])) == NULL) {
		log_warnx("unknown command '%s'", argv[optind]);
		goto usage;
	}
	rc = run_command(cmd, argc - optind, argv + optind, socket_path);
done:
	/* A full disk or a closed pipe must not pass for success. */
	if (fflush(stdout) == EOF || ferror(stdout)) {
		log_warn("writing the output");
		if (rc == EXIT_OK)
			rc = EXIT_FAILED;
	}
	return rc;
usage:
	global_usage(stderr);
	return EXIT_USAGE;
}
