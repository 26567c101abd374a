/* cli.h: private to the sluice CLI (sluice.c, cmd_*.c, ctl_client.c). */
#ifndef SLUICE_CLI_H
#define SLUICE_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "gateway/policy.h"

struct cli;

/*
 * One action of a command: "add" of "sandbox". A command without actions
 * ("status") has a single action whose name is NULL. run() gets argv[0] =
 * the action's name (or the command's), parses the rest with getopt_long,
 * prints its own output and errors, and returns an EXIT_* code (ctl.h).
 */
struct cli_action {
	const char	*name;
	int		(*run)(int argc, char **argv, const struct cli *cli);
	const char	*args;		/* synopsis after the action name */
	const char	*summary;	/* one line, for `sluice --help` */
	const char	*options;	/* "  -j, --json  ...\n" lines, or NULL */
	bool		 offline;	/* needs no daemon: no [-s SOCK] */
};

struct cli_command {
	const char		*name;
	const struct cli_action	*actions;
	size_t			 nactions;
};

/* What an action runs with: the global options and where it was found. */
struct cli {
	const char			*socket;	/* control socket path */
	const struct cli_command	*command;
	const struct cli_action		*action;
};

/* cmd_sandbox.c, cmd_policy.c: the commands' tables. */
extern const struct cli_command cmd_sandbox;
extern const struct cli_command cmd_policy;
/* cmd_log.c */
extern const struct cli_command cmd_log;
/* cmd_replay.c */
extern const struct cli_command cmd_replay;
/* cmd_stats.c */
extern const struct cli_command cmd_stats;

/* sluice.c: shared by the actions. */

/* Prints the running action's synopsis, summary and options. */
void cli_action_help(FILE *f, const struct cli *cli);
/* Prints "sluice: CMD ACTION: message" and the action's synopsis on
 * stderr; returns EXIT_USAGE. */
int cli_usage_error(const struct cli *cli, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* For getopt_long's '?' and ':' (optstring, the one getopt_long got,
 * starts with ":" after any "+" or "-"): names the offending option and
 * prints the usage; returns EXIT_USAGE. */
int cli_option_error(const struct cli *cli, int c, char **argv,
    const char *optstring);
/*
 * The default case of every action's getopt_long loop (optstring "-:...",
 * so that operands come as c == 1 in their place): -h prints the help;
 * an operand goes to operand[*got] while the action takes fewer than n
 * (an action that takes none passes NULL, 0, NULL), else it is
 * "unexpected"; anything else is an option error.
 * cli_opt_operands takes what getopt_long left after "--" the same way.
 * Both return -1 to go on, or the EXIT_* code the action should return.
 */
int cli_opt_default(const struct cli *cli, int c, char **argv,
    const char *optstring, const char **operand, int n, int *got);
int cli_opt_operands(const struct cli *cli, int argc, char **argv,
    const char **operand, int n, int *got);
/*
 * Parses an action that takes exactly n operands (named what[0..n-1] in
 * errors) and no options but -h into operand[]. Returns -1 to go on, or
 * the EXIT_* code to return: EXIT_OK after printing help, EXIT_USAGE after
 * printing the error.
 */
int cli_operands(int argc, char **argv, const struct cli *cli,
    const char **operand, int n, const char *const *what);
/* The daemon's sandbox name rule (names.h), checked before any contact;
 * prints why a name is not valid. */
bool cli_name_ok(const char *name);
/* ctl_client_call() to cli->socket that prints the error, if any; returns
 * its EXIT_* code and reply. */
int cli_call(const struct cli *cli, const json_t *req, json_t **reply);

/* Parses -j/--json and -h of an action that takes nothing else: -1 to go
 * on, or the EXIT_* code to return. */
int cli_parse_json_flag(int argc, char **argv, const struct cli *cli,
    bool *json);
/* Prints json as one compact JSON document and a newline on stdout. */
void cli_print_json(const json_t *json);

/* cmd_policy.c: loads and validates a policy file; on failure prints its
 * "file:line:col: message" and returns NULL (the caller exits 1). */
struct policy *cli_policy_load(const char *path);

/* suggest.c: a policy from what a sandbox tried (`policy suggest`); pure. */

/* Distinct names directly under one parent before "*.parent" is offered. */
#define SUGGEST_WILDCARD_MIN	4

/* A name the sandbox resolved (port 0) or used with TCP port. */
struct suggest_name {
	const char	*name;		/* as recorded: any case, trailing dot */
	uint16_t	 port;
};

/* A TCP destination the sandbox reached with no name. */
struct suggest_addr {
	const char	*addr;		/* dotted-quad IPv4 */
	uint16_t	 port;
};

struct suggestion {
	char	 *json;		/* the policy, pretty-printed, ends in "\n" */
	char	**warnings;	/* lines for the operator, "NAME: why" */
	size_t	  nwarnings;
	size_t	  ndomains;	/* allowedDomains entries written */
	size_t	  ncidrs;	/* allowedCidrs entries written */
};

/*
 * Turns rows into an enforcing allowlist: names normalised (case, trailing
 * dot; invalid and non-ASCII ones left out with a warning), "name" for
 * resolution or 443/80 and "name:port" for other ports, "*.parent" once
 * SUGGEST_WILDCARD_MIN siblings were seen under a parent that is not
 * shared by unrelated owners; addresses as "a.b.c.d:port". Names of paste,
 * storage, tunnel, DoH and webhook services and non-public addresses get a
 * warning; strict leaves them out. Returns a new suggestion (free with
 * suggest_free()) or NULL with errno ENOMEM, or E2BIG when a list would
 * exceed POLICY_MAX_ENTRIES. The input is only read.
 */
struct suggestion *suggest_policy(const struct suggest_name *names,
    size_t nnames, const struct suggest_addr *addrs, size_t naddrs,
    bool strict);

/* NULL-safe. */
void suggest_free(struct suggestion *s);

/*
 * What suggest_policy() knows about names, shared with lint_policy(). A
 * name is normalised (lower case, no trailing dot); returned strings are
 * static.
 */

/* true for a top-level domain or a registry's second level ("co.uk"). */
bool suggest_public_suffix(const char *name);
/* The parent shared by unrelated owners ("github.io") that name is or is
 * under, or NULL. */
const char *suggest_shared_parent(const char *name);
/* Why name looks like a paste, storage, file drop, tunnel, DoH or webhook
 * service ("looks like a public paste service — ..."), or NULL. */
const char *suggest_flag_why(const char *name);
/* The i-th name of those services' list, NULL past its end: a name under
 * any of them is flagged too. */
const char *suggest_flagged_name(size_t i);

/* lint.c: entries that make a policy functionally open; pure. */

struct lint_warning {
	char		 path[40];	/* "network.allowedDomains[3]" */
	const char	*entry;		/* the entry as written, in the policy */
	char		*message;	/* why, one line */
};

/*
 * Looks through p's allowedDomains (wildcards over public suffixes,
 * multi-tenant hosting and relay services; names of paste, storage,
 * tunnel, DoH and webhook services) and allowedCidrs (prefixes shorter
 * than /8; private, loopback, link-local, shared and metadata space; the
 * default sandbox pool), leaving out what deniedDomains denies anyway.
 * Returns 0 with *warnings (free with lint_free(); entry points into p and
 * lives as long as it) in the lists' order, or -1 with errno ENOMEM.
 */
int lint_policy(const struct policy *p, struct lint_warning **warnings,
    size_t *nwarnings);

/* NULL-safe. */
void lint_free(struct lint_warning *warnings, size_t nwarnings);

/* cmd_log.c: the parts of `sluice log` that the unit tests reach. */

struct sqlite3;

/*
 * Parses --since: a duration back from now_us ("30s", "10m", "2h", "7d":
 * digits and one unit, or digits alone for seconds) or a UTC time
 * "YYYY-MM-DD[THH:MM[:SS[.ffffff]]]"
 * ('T' or a space; a trailing 'Z' is allowed after a time). Returns 0
 * with *since_us in unix microseconds, or -1 if arg is neither, names no
 * real date, or reaches back more than 100 years.
 */
int cli_log_parse_since(const char *arg, int64_t now_us, int64_t *since_us);

/*
 * The DESTINATION cell of a flow into buf (truncated to len): "ip:port",
 * "[ip]:port" for IPv6, "ip" if port < 0; as "label (...)" when label
 * (the flow's SNI, Host or name) is neither NULL nor empty.
 */
void cli_log_destination(char *buf, size_t len, const char *label,
    const char *ip, int64_t port);

/*
 * Copies src into dst (dstlen bytes, always terminated) as a table cell:
 * every byte that is not printable ASCII becomes '?', so one byte is one
 * column and nothing from the log can drive the terminal; a text longer
 * than width (0: no limit) is cut to width with '~' as its last character.
 */
void cli_log_cell(char *dst, size_t dstlen, const char *src, size_t width);

/*
 * Opens sluiced's database at path read-only (it never writes nor takes
 * the write lock) and checks that it is a sluice database whose schema
 * version this CLI reads. Returns EXIT_OK with *db (the caller
 * sqlite3_close()s it), or with *db NULL and a message in err: EXIT_USAGE
 * if path does not exist or is not a file, EXIT_FAILED if it cannot be
 * read or is not such a database.
 */
int cli_log_open(const char *path, struct sqlite3 **db, char *err,
    size_t errlen);

/* ctl_client.c: one request/reply exchange with sluiced (ctl.h). */

/*
 * Sends request (a JSON object) to the daemon at socket_path and waits for
 * the reply, the whole exchange bounded by CTL_TIMEOUT_MS. Returns EXIT_OK
 * and sets *reply to the {"ok":true,...} object (the caller json_decref()s
 * it), or another EXIT_* code with *reply NULL and a message in err:
 * EXIT_UNREACHABLE if the connection fails, times out or closes without a
 * reply; EXIT_USAGE for a request too large or a "code":"invalid" reply;
 * EXIT_FAILED for a "failed" reply, a reply that does not follow ctl.h, or
 * a local failure (out of memory, no sockets).
 */
int ctl_client_call(const char *socket_path, const json_t *request,
    json_t **reply, char *err, size_t errlen);

/*
 * The reply half of ctl_client_call(): classifies the bytes of one reply
 * (len bytes, the "\n" optional). Same returns and ownership.
 */
int ctl_client_parse_reply(const char *buf, size_t len, json_t **reply,
    char *err, size_t errlen);

/* The string member key of obj, or NULL if absent or not a string. Valid
 * as long as obj is. */
const char *ctl_client_string(const json_t *obj, const char *key);

/* Copies src, a string from the daemon, into dst (truncating to dstlen)
 * with control characters replaced by '?': they would reach the user's
 * terminal. */
void ctl_client_printable(char *dst, size_t dstlen, const char *src);

#endif
