/* cmd_sandbox.c: `sluice sandbox add|del|list`. */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "gateway/cli.h"
#include "gateway/ctl.h"
#include "gateway/log.h"
#include "gateway/policy.h"

#define TABLE_WIDTH	80	/* the list must fit a default terminal */
#define CELL_MAX	64	/* longest cell kept; names are at most 48 */
#define NAME_MIN_WIDTH	8	/* the NAME column shrinks to this, no less */
#define POLICY_HEX	12	/* digits of the policy's sha256 shown */

static int sandbox_add(int, char **, const struct cli *);
static int sandbox_del(int, char **, const struct cli *);
static int sandbox_list(int, char **, const struct cli *);

static const struct cli_action sandbox_actions[] = {
	{ "add", sandbox_add, "NAME --policy FILE [--netns PATH]",
	    "create a sandbox governed by a policy file",
	    "  --policy FILE  the sandbox's policy, see sluice-policy(5); "
	    "checked here\n"
	    "                 before it is sent\n"
	    "  --netns PATH   link an existing network namespace (e.g. "
	    "/proc/PID/ns/net)\n"
	    "                 instead of creating /run/netns/NAME\n",
	    false },
	{ "del", sandbox_del, "NAME",
	    "remove a sandbox",
	    NULL, false },
	{ "list", sandbox_list, "[-j]",
	    "list the sandboxes",
	    "  -j, --json     print the daemon's JSON array of sandboxes\n",
	    false },
};

const struct cli_command cmd_sandbox = {
	"sandbox", sandbox_actions,
	sizeof(sandbox_actions) / sizeof(sandbox_actions[0]),
};

static int
sandbox_add(int argc, char **argv, const struct cli *cli)
{
	enum { OPT_POLICY = 256, OPT_NETNS };
	static const struct option longopts[] = {
		{ "policy", required_argument, NULL, OPT_POLICY },
		{ "netns", required_argument, NULL, OPT_NETNS },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static const char optstring[] = "-:h";
	const char *name = NULL, *file = NULL, *netns = NULL;
	const char *addr, *gateway, *path;
	char addr_s[CELL_MAX], gateway_s[CELL_MAX], path_s[256];
	struct policy *p = NULL;
	json_t *req = NULL, *reply = NULL, *sb;
	json_error_t jerr;
	int c, rc, nop = 0;

	optind = 0;
	/* "-": operands come back in order as 1, so NAME may stand anywhere
	 * even under POSIXLY_CORRECT. */
	while ((c = getopt_long(argc, argv, optstring, longopts, NULL)) != -1) {
		switch (c) {
		case OPT_POLICY:
			file = optarg;
			break;
		case OPT_NETNS:
			netns = optarg;
			break;
		default:
			if ((rc = cli_opt_default(cli, c, argv, optstring,
			    &name, 1, &nop)) != -1)
				return rc;
		}
	}
	if ((rc = cli_opt_operands(cli, argc, argv, &name, 1, &nop)) != -1)
		return rc;
	if (name == NULL)
		return cli_usage_error(cli, "missing NAME");
	if (file == NULL)
		return cli_usage_error(cli, "missing --policy FILE");
	if (netns != NULL && netns[0] == '\0')
		return cli_usage_error(cli, "--netns needs a path");
	if (!cli_name_ok(name))
		return EXIT_USAGE;
	if ((p = cli_policy_load(file)) == NULL)
		return EXIT_USAGE;

	req = json_pack_ex(&jerr, 0, "{s:s, s:s, s:s%, s:s, s:s*}",
	    "cmd", "sandbox.add", "name", name, "policy", p->text, p->textlen,
	    "origin", file, "netns", netns);
	if (req == NULL) {
		/* only a file name or path that is not UTF-8 gets here */
		log_warnx("cannot encode the request: %s", jerr.text);
		rc = EXIT_USAGE;
		goto cleanup;
	}
	if ((rc = cli_call(cli, req, &reply)) != EXIT_OK)
		goto cleanup;

	sb = json_object_get(reply, "sandbox");
	addr = ctl_client_string(sb, "addr");
	gateway = ctl_client_string(sb, "gateway");
	path = ctl_client_string(sb, "netns");
	if (addr == NULL || gateway == NULL || path == NULL) {
		log_warnx("unexpected reply from sluiced: no sandbox address "
		    "(the sandbox may exist: see 'sluice sandbox list')");
		rc = EXIT_FAILED;
		goto cleanup;
	}
	ctl_client_printable(addr_s, sizeof(addr_s), addr);
	ctl_client_printable(gateway_s, sizeof(gateway_s), gateway);
	ctl_client_printable(path_s, sizeof(path_s), path);
	printf("sandbox %s: %s via %s (netns %s)\n", name, addr_s, gateway_s,
	    path_s);
cleanup:
	json_decref(reply);
	json_decref(req);
	policy_free(p);
	return rc;
}

static int
sandbox_del(int argc, char **argv, const struct cli *cli)
{
	static const char *const what[] = { "NAME" };
	const char *name;
	json_t *req, *reply = NULL;
	int rc;

	if ((rc = cli_operands(argc, argv, cli, &name, 1, what)) != -1)
		return rc;
	if (!cli_name_ok(name))
		return EXIT_USAGE;

	if ((req = json_pack("{s:s, s:s}", "cmd", "sandbox.del", "name",
	    name)) == NULL) {
		log_warnx("out of memory");
		return EXIT_FAILED;
	}
	rc = cli_call(cli, req, &reply);
	json_decref(reply);
	json_decref(req);
	return rc;
}

enum { COL_NAME, COL_ADDR, COL_GATEWAY, COL_MODE, COL_POLICY, COL_IFNAME,
    NCOLS };

static const char *const col_header[NCOLS] = {
	"NAME", "ADDR", "GATEWAY", "MODE", "POLICY", "IFNAME",
};
static const char *const col_key[NCOLS] = {
	"name", "addr", "gateway", "mode", "policy_sha256", "ifname",
};

/* One sandbox's cells, printable; "-" for what the daemon left out. */
static void
row_cells(const json_t *sb, char cell[NCOLS][CELL_MAX])
{
	const char *v;
	int i;

	for (i = 0; i < NCOLS; i++) {
		v = ctl_client_string(sb, col_key[i]);
		ctl_client_printable(cell[i], CELL_MAX, v != NULL ? v : "-");
	}
	if (strlen(cell[COL_POLICY]) > POLICY_HEX)
		cell[COL_POLICY][POLICY_HEX] = '\0';
}

static void
print_row(char cell[NCOLS][CELL_MAX], const size_t width[NCOLS], size_t gap)
{
	size_t len;
	int i;

	for (i = 0; i < NCOLS; i++) {
		len = strlen(cell[i]);
		if (len > width[i]) {
			/* '~' cannot occur in a name, so it marks the cut */
			cell[i][width[i] - 1] = '~';
			cell[i][width[i]] = '\0';
			len = width[i];
		}
		if (i == NCOLS - 1)
			printf("%s\n", cell[i]);
		else
			printf("%s%*s", cell[i], (int)(width[i] - len + gap), "");
	}
}

/* Column widths fit the content, then the 80 columns: first the gaps
 * narrow, then the NAME column (scripts use -j, not the table). */
static void
table_layout(const json_t *list, size_t width[NCOLS], size_t *gap)
{
	char cell[NCOLS][CELL_MAX];
	const json_t *sb;
	size_t i, total, over;
	int c;

	for (c = 0; c < NCOLS; c++)
		width[c] = strlen(col_header[c]);
	json_array_foreach(list, i, sb) {
		row_cells(sb, cell);
		for (c = 0; c < NCOLS; c++)
			if (strlen(cell[c]) > width[c])
				width[c] = strlen(cell[c]);
	}
	for (*gap = 2; ; (*gap)--) {
		total = (NCOLS - 1) * *gap;
		for (c = 0; c < NCOLS; c++)
			total += width[c];
		if (total <= TABLE_WIDTH || *gap == 1)
			break;
	}
	if (total > TABLE_WIDTH && width[COL_NAME] > NAME_MIN_WIDTH) {
		over = total - TABLE_WIDTH;
		width[COL_NAME] = width[COL_NAME] - NAME_MIN_WIDTH > over ?
		    width[COL_NAME] - over : NAME_MIN_WIDTH;
	}
}

static int
sandbox_list(int argc, char **argv, const struct cli *cli)
{
	char cell[NCOLS][CELL_MAX];
	size_t width[NCOLS], gap, i;
	json_t *req, *reply = NULL, *list, *sb;
	bool json = false;
	int c, rc;

	if ((rc = cli_parse_json_flag(argc, argv, cli, &json)) != -1)
		return rc;

	if ((req = json_pack("{s:s}", "cmd", "sandbox.list")) == NULL) {
		log_warnx("out of memory");
		return EXIT_FAILED;
	}
	if ((rc = cli_call(cli, req, &reply)) != EXIT_OK)
		goto cleanup;
	list = json_object_get(reply, "sandboxes");
	if (!json_is_array(list)) {
		log_warnx("unexpected reply from sluiced: no sandbox list");
		rc = EXIT_FAILED;
		goto cleanup;
	}
	json_array_foreach(list, i, sb) {
		if (!json_is_object(sb)) {
			log_warnx("unexpected reply from sluiced: sandbox %zu "
			    "is not an object", i);
			rc = EXIT_FAILED;
			goto cleanup;
		}
	}
	if (json) {
		cli_print_json(list);
		goto cleanup;
	}
	table_layout(list, width, &gap);
	for (c = 0; c < NCOLS; c++)
		snprintf(cell[c], CELL_MAX, "%s", col_header[c]);
	print_row(cell, width, gap);
	json_array_foreach(list, i, sb) {
		row_cells(sb, cell);
		print_row(cell, width, gap);
	}
cleanup:
	json_decref(reply);
	json_decref(req);
	return rc;
}
