/* cmd_policy.c: `sluice policy set|check|suggest`. */
#include <sys/stat.h>

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <sqlite3.h>

#include "gateway/cli.h"
#include "gateway/ctl.h"
#include "gateway/log.h"
#include "gateway/policy.h"

#define SUGGEST_DB_DEFAULT	"/var/lib/sluice/flows.db"
/* sluiced's writer holds its lock for a batch, at most ~100 ms */
#define SUGGEST_BUSY_MS		5000
/* the flow log's first schema with the first flight's columns */
#define SUGGEST_SCHEMA_MIN	3

static int policy_set(int, char **, const struct cli *);
static int policy_check(int, char **, const struct cli *);
static int policy_suggest(int, char **, const struct cli *);

static const struct cli_action policy_actions[] = {
	{ "set", policy_set, "NAME FILE",
	    "replace a sandbox's policy",
	    NULL, false },
	{ "check", policy_check, "[--strict] FILE",
	    "check a policy file (offline: no daemon needed)",
	    "  --strict       exit 1 if there are warnings: entries that make "
	    "the\n"
	    "                 allowlist open (relay services, shared hosting, "
	    "public\n"
	    "                 suffixes, non-public addresses)\n",
	    true },
	{ "suggest", policy_suggest,
	    "--sandbox NAME [--since DURATION] [--db FILE] [-o FILE] "
	    "[--strict]",
	    "write a policy allowing what a sandbox tried (from the flow log)",
	    "  --sandbox NAME     the sandbox whose flows and DNS queries to "
	    "read\n"
	    "  --since DURATION   only the last DURATION (30s, 10m, 2h, 7d),\n"
	    "                     or since a UTC time YYYY-MM-DD[THH:MM[:SS]]\n"
	    "  --db FILE          the flow log (default: the environment's "
	    "SLUICE_DB,\n"
	    "                     else " SUGGEST_DB_DEFAULT ")\n"
	    "  -o, --output FILE  write the policy to FILE, not to standard "
	    "output\n"
	    "  --strict           leave out flagged entries (paste, storage, "
	    "tunnel,\n"
	    "                     DoH, webhook services; non-public addresses)"
	    "\n",
	    true },
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
	enum { OPT_STRICT = 256 };
	static const struct option longopts[] = {
		{ "strict", no_argument, NULL, OPT_STRICT },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static const char optstring[] = "-:h";
	const char *file = NULL;
	struct lint_warning *w = NULL;
	struct policy *p;
	bool strict = false;
	size_t nw = 0, i;
	int c, rc, nop = 0;

	optind = 0;
	while ((c = getopt_long(argc, argv, optstring, longopts, NULL)) != -1) {
		switch (c) {
		case OPT_STRICT:
			strict = true;
			break;
		default:
			if ((rc = cli_opt_default(cli, c, argv, optstring,
			    &file, 1, &nop)) != -1)
				return rc;
		}
	}
	if ((rc = cli_opt_operands(cli, argc, argv, &file, 1, &nop)) != -1)
		return rc;
	if (file == NULL)
		return cli_usage_error(cli, "missing FILE");

	if ((p = cli_policy_load(file)) == NULL)
		return EXIT_USAGE;
	if (lint_policy(p, &w, &nw) == -1) {
		log_warnx("out of memory");
		policy_free(p);
		return EXIT_FAILED;
	}
	printf("%s: ok (%zu allowed cidrs, %zu allowed domains, %zu denied "
	    "domains, mode %s)\n", file, p->ncidrs, p->nallowed, p->ndenied,
	    policy_mode_name(p->mode));
	/* the ok line first, as it would come in a terminal */
	fflush(stdout);
	for (i = 0; i < nw; i++)
		log_warnx("warning: %s: %s: \"%s\": %s", file, w[i].path,
		    w[i].entry, w[i].message);
	rc = EXIT_OK;
	if (strict && nw > 0) {
		log_warnx("%s: %zu warning%s (--strict)", file, nw,
		    nw == 1 ? "" : "s");
		rc = EXIT_USAGE;
	}
	lint_free(w, nw);
	policy_free(p);
	return rc;
}

/* Flows no policy can allow, whatever the suggestion says. */
#define SUGGEST_UNFIXABLE						\
	"('internal_destination', 'spoofed_source', 'unknown_sandbox')"
#define SUGGEST_FLOWS							\
	" FROM flows WHERE sandbox = ?1 AND ts >= ?2 AND proto = 'tcp'"	\
	" AND dst_port BETWEEN 1 AND 65535"				\
	" AND reason NOT IN " SUGGEST_UNFIXABLE

/* Every name asked for or connected to, with the TCP port (0: none). */
static const char suggest_names_sql[] =
	"SELECT qname, 0 FROM dns_queries WHERE sandbox = ?1 AND ts >= ?2"
	" AND qtype IN ('A', 'AAAA', 'HTTPS')"
	" UNION SELECT name, dst_port" SUGGEST_FLOWS " AND name IS NOT NULL"
	" UNION SELECT sni, dst_port" SUGGEST_FLOWS " AND sni IS NOT NULL"
	" UNION SELECT http_host, dst_port" SUGGEST_FLOWS
	" AND http_host IS NOT NULL";

/* Destinations reached with no name at all. */
static const char suggest_addrs_sql[] =
	"SELECT DISTINCT dst_ip, dst_port" SUGGEST_FLOWS
	" AND name IS NULL AND sni IS NULL AND http_host IS NULL";

/* What was left out above, for a note. */
static const char suggest_left_out_sql[] =
	"SELECT ifnull(sum(proto != 'tcp'), 0),"
	" ifnull(sum(proto = 'tcp' AND reason IN " SUGGEST_UNFIXABLE "), 0)"
	" FROM flows WHERE sandbox = ?1 AND ts >= ?2";

static const char suggest_known_sql[] =
	"SELECT EXISTS (SELECT 1 FROM sandboxes WHERE name = ?1)";

/* The rows of one suggestion, copied out of SQLite. */
struct suggest_rows {
	struct suggest_name	*names;
	size_t			 nnames;
	struct suggest_addr	*addrs;
	size_t			 naddrs;
};

static void
suggest_rows_free(struct suggest_rows *r)
{
	size_t i;

	for (i = 0; i < r->nnames; i++)
		free((char *)r->names[i].name);
	for (i = 0; i < r->naddrs; i++)
		free((char *)r->addrs[i].addr);
	free(r->names);
	free(r->addrs);
}


static sqlite3_stmt *
suggest_prepare(sqlite3 *db, const char *sql, const char *sandbox,
    int64_t since_us)
{
	sqlite3_stmt *st;

	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		return NULL;
	if (sqlite3_bind_text(st, 1, sandbox, -1, SQLITE_STATIC) != SQLITE_OK ||
	    (sqlite3_bind_parameter_count(st) > 1 &&
	    sqlite3_bind_int64(st, 2, since_us) != SQLITE_OK)) {
		sqlite3_finalize(st);
		return NULL;
	}
	return st;
}

/* Reads (text, port) rows of sql into names or addrs; false on error. */
static bool
suggest_read(sqlite3 *db, const char *sql, const char *sandbox,
    int64_t since_us, struct suggest_rows *r, bool addrs)
{
	sqlite3_stmt *st;
	const unsigned char *text;
	sqlite3_int64 port;
	size_t cap = 0, *n = addrs ? &r->naddrs : &r->nnames;
	void *grown;
	char *copy;
	int rc;

	if ((st = suggest_prepare(db, sql, sandbox, since_us)) == NULL)
		return false;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		text = sqlite3_column_text(st, 0);
		port = sqlite3_column_int64(st, 1);
		if (text == NULL || port < 0 || port > UINT16_MAX)
			continue;
		if (*n == cap) {
			cap = cap == 0 ? 256 : cap * 2;
			grown = addrs ?
			    reallocarray(r->addrs, cap, sizeof(*r->addrs)) :
			    reallocarray(r->names, cap, sizeof(*r->names));
			if (grown == NULL)
				break;
			if (addrs)
				r->addrs = grown;
			else
				r->names = grown;
		}
		if ((copy = strdup((const char *)text)) == NULL)
			break;
		if (addrs) {
			r->addrs[*n].addr = copy;
			r->addrs[*n].port = (uint16_t)port;
		} else {
			r->names[*n].name = copy;
			r->names[*n].port = (uint16_t)port;
		}
		(*n)++;
	}
	sqlite3_finalize(st);
	if (rc == SQLITE_ROW) {
		errno = ENOMEM;
		return false;
	}
	return rc == SQLITE_DONE;
}

/* One row of integers from sql into v[0..n); false on error. */
static bool
suggest_ints(sqlite3 *db, const char *sql, const char *sandbox,
    int64_t since_us, int64_t *v, int n)
{
	sqlite3_stmt *st;
	bool ok = false;
	int i;

	if ((st = suggest_prepare(db, sql, sandbox, since_us)) == NULL)
		return false;
	if (sqlite3_step(st) == SQLITE_ROW) {
		for (i = 0; i < n; i++)
			v[i] = sqlite3_column_int64(st, i);
		ok = true;
	}
	sqlite3_finalize(st);
	return ok;
}

/* Opens the flow log read-only and checks it is one; EXIT_* code. */
static int
suggest_open(const char *path, sqlite3 **dbp)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *st = NULL;
	struct stat sb;
	int version = -1, rc;

	*dbp = NULL;
	if (stat(path, &sb) == -1) {
		log_warn("%s", path);
		return EXIT_USAGE;
	}
	if (!S_ISREG(sb.st_mode)) {
		log_warnx("%s: not a file", path);
		return EXIT_USAGE;
	}
	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) !=
	    SQLITE_OK) {
		log_warnx("%s: %s", path, db != NULL ? sqlite3_errmsg(db) :
		    "out of memory");
		sqlite3_close(db);
		return EXIT_FAILED;
	}
	sqlite3_busy_timeout(db, SUGGEST_BUSY_MS);
	rc = sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL);
	if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW)
		version = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	if (version < 0) {
		/* SQLITE_NOTADB: some other file */
		log_warnx("%s: %s", path, sqlite3_errstr(rc));
		sqlite3_close(db);
		return rc == SQLITE_NOTADB ? EXIT_USAGE : EXIT_FAILED;
	}
	if (version == 0) {
		log_warnx("%s: not a sluice flow log", path);
		sqlite3_close(db);
		return EXIT_USAGE;
	}
	if (version < SUGGEST_SCHEMA_MIN) {
		log_warnx("%s: flow log schema version %d, this needs %d or "
		    "later (sluiced upgrades the file when it opens it)",
		    path, version, SUGGEST_SCHEMA_MIN);
		sqlite3_close(db);
		return EXIT_USAGE;
	}
	*dbp = db;
	return EXIT_OK;
}

static int
suggest_write(const char *out, const char *json)
{
	FILE *f;

	if (out == NULL) {
		/* main() checks that stdout was written */
		fputs(json, stdout);
		return EXIT_OK;
	}
	if ((f = fopen(out, "w")) == NULL) {
		log_warn("%s", out);
		return EXIT_FAILED;
	}
	if (fputs(json, f) == EOF || fflush(f) == EOF || ferror(f)) {
		log_warn("%s", out);
		fclose(f);
		unlink(out);
		return EXIT_FAILED;
	}
	if (fclose(f) == EOF) {
		log_warn("%s", out);
		unlink(out);
		return EXIT_FAILED;
	}
	return EXIT_OK;
}

static int
policy_suggest(int argc, char **argv, const struct cli *cli)
{
	enum { OPT_SANDBOX = 256, OPT_SINCE, OPT_DB, OPT_STRICT };
	static const struct option longopts[] = {
		{ "sandbox", required_argument, NULL, OPT_SANDBOX },
		{ "since", required_argument, NULL, OPT_SINCE },
		{ "db", required_argument, NULL, OPT_DB },
		{ "output", required_argument, NULL, 'o' },
		{ "strict", no_argument, NULL, OPT_STRICT },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static const char optstring[] = "-:o:h";
	const char *sandbox = NULL, *dbpath = NULL, *out = NULL, *since = NULL;
	const char *env;
	struct suggest_rows rows = { NULL, 0, NULL, 0 };
	struct suggestion *s = NULL;
	struct timespec now;
	sqlite3 *db = NULL;
	int64_t since_us = 0, left_out[2], known = 0;
	bool strict = false;
	size_t i;
	int c, rc;

	optind = 0;
	while ((c = getopt_long(argc, argv, optstring, longopts, NULL)) != -1) {
		switch (c) {
		case OPT_SANDBOX:
			sandbox = optarg;
			break;
		case OPT_SINCE:
			since = optarg;
			break;
		case OPT_DB:
			dbpath = optarg;
			break;
		case 'o':
			out = optarg;
			break;
		case OPT_STRICT:
			strict = true;
			break;
		default:
			if ((rc = cli_opt_default(cli, c, argv, optstring,
			    NULL, 0, NULL)) != -1)
				return rc;
		}
	}
	if ((rc = cli_opt_operands(cli, argc, argv, NULL, 0, NULL)) != -1)
		return rc;
	if (sandbox == NULL)
		return cli_usage_error(cli, "missing --sandbox NAME");
	if (!cli_name_ok(sandbox))
		return EXIT_USAGE;
	if (since != NULL) {
		/* the log's ts is wall-clock time; one --since grammar for
		 * `log` and `policy suggest` */
		clock_gettime(CLOCK_REALTIME, &now);
		if (cli_log_parse_since(since, (int64_t)now.tv_sec * 1000000 +
		    now.tv_nsec / 1000, &since_us) == -1)
			return cli_usage_error(cli, "--since '%s': not a "
			    "duration (30s, 10m, 2h, 7d) or a UTC time "
			    "(YYYY-MM-DD[THH:MM[:SS]])", since);
	}
	if (dbpath != NULL && dbpath[0] == '\0')
		return cli_usage_error(cli, "--db needs a file");
	if (out != NULL && out[0] == '\0')
		return cli_usage_error(cli, "-o needs a file");
	if (dbpath == NULL) {
		env = getenv("SLUICE_DB");
		dbpath = env != NULL && env[0] != '\0' ? env :
		    SUGGEST_DB_DEFAULT;
	}

	if ((rc = suggest_open(dbpath, &db)) != EXIT_OK)
		return rc;
	rc = EXIT_FAILED;
	errno = 0;
	if (!suggest_ints(db, suggest_known_sql, sandbox, 0, &known, 1) ||
	    !suggest_read(db, suggest_names_sql, sandbox, since_us, &rows,
	    false) ||
	    !suggest_read(db, suggest_addrs_sql, sandbox, since_us, &rows,
	    true) ||
	    !suggest_ints(db, suggest_left_out_sql, sandbox, since_us,
	    left_out, 2)) {
		if (errno == ENOMEM)
			log_warnx("out of memory");
		else
			log_warnx("%s: %s", dbpath, sqlite3_errmsg(db));
		goto cleanup;
	}
	if (!known && rows.nnames == 0 && rows.naddrs == 0 &&
	    left_out[0] == 0 && left_out[1] == 0) {
		log_warnx("%s: no sandbox named %s was ever recorded",
		    dbpath, sandbox);
		rc = EXIT_USAGE;
		goto cleanup;
	}

	if ((s = suggest_policy(rows.names, rows.nnames, rows.addrs,
	    rows.naddrs, strict)) == NULL) {
		if (errno == E2BIG)
			log_warnx("more than %d entries in a list: narrow it "
			    "down with --since", POLICY_MAX_ENTRIES);
		else
			log_warnx("out of memory");
		goto cleanup;
	}
	for (i = 0; i < s->nwarnings; i++)
		log_warnx("warning: %s", s->warnings[i]);
	if (left_out[0] > 0)
		log_warnx("note: %" PRId64 " UDP or ICMP attempt%s left out: "
		    "policies allow TCP only", left_out[0],
		    left_out[0] == 1 ? "" : "s");
	if (left_out[1] > 0)
		log_warnx("note: %" PRId64 " attempt%s to reach the gateway, "
		    "other sandboxes or the sandbox pool left out: no policy "
		    "allows them", left_out[1], left_out[1] == 1 ? "" : "s");
	if (rows.nnames == 0 && rows.naddrs == 0)
		log_warnx("note: nothing recorded for sandbox %s%s%s: the "
		    "suggested policy allows nothing", sandbox,
		    since != NULL ? " in the last " : "",
		    since != NULL ? since : "");
	rc = suggest_write(out, s->json);
cleanup:
	suggest_free(s);
	suggest_rows_free(&rows);
	sqlite3_close(db);
	return rc;
}
