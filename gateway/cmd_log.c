/* cmd_log.c: `sluice log`: the flow log, read straight from sluiced's database. */
#include <sys/ioctl.h>
#include <sys/stat.h>

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "gateway/cli.h"
#include "gateway/ctl.h"
#include "gateway/log.h"
#include "store/store.h"

#define LOG_DB_DEFAULT	"/var/lib/sluice/flows.db"
/* Version 3 brought flows.sni and flows.http_host, which --name reads;
 * sluiced upgrades an older file when it opens it. */
#define LOG_SCHEMA_MIN	3
#define LOG_DEFAULT_ROWS 50	/* without --last and --since */
#define LOG_LAST_MAX	1000000000UL
/*
 * In WAL mode a reader waits only in the moments the WAL index is being
 * rebuilt or reset; a second is plenty. (Readers never block sluiced's
 * writer.)
 */
#define LOG_BUSY_MS	1000
#define FOLLOW_POLL_MS	250
/* Rows read per statement: each page is one short read transaction,
 * ended before anything is printed, so a slow terminal or a full pipe
 * never keeps the WAL from being checkpointed. */
#define PAGE_ROWS	256
#define SINCE_MAX_S	(100LL * 366 * 86400)	/* --since 100 years at most */

#define TERM_WIDTH_DEFAULT 100
#define CELL_MAX	512	/* a destination: a 253-byte name and an address */
#define NCOLS_MAX	8
#define COL_GAP		2
#define ELASTIC_MIN	16	/* the elastic column shrinks to this, no less */

static int log_run(int, char **, const struct cli *);

static const struct cli_action log_actions[] = {
	{ NULL, log_run,
	    /* continued under the first option of "usage: sluice log" */
	    "[--db FILE] [--sandbox NAME] [--verdict allow|deny|audit]\n"
	    "                  [--reason R] [--name NAME] [--since DURATION]\n"
	    "                  [--last N] [-f] [-j] [--dns]",
	    "show the flow log (reads the database: no daemon needed)",
	    "  --db FILE      sluiced's database, opened read-only (default: "
	    "SLUICE_DB from\n"
	    "                 the environment, else " LOG_DB_DEFAULT ")\n"
	    "  --sandbox NAME only this sandbox's rows; every filter given "
	    "must match\n"
	    "  --verdict V    only rows with this verdict: allow, deny or "
	    "audit\n"
	    "  --reason R     only rows with this reason, e.g. "
	    "not_allowlisted\n"
	    "  --name NAME    only flows whose DNS name, TLS SNI or HTTP Host "
	    "is NAME (with\n"
	    "                 --dns: queries for NAME); case does not "
	    "matter\n"
	    "  --since DURATION\n"
	    "                 only rows from the last DURATION (30s, 10m, 2h, "
	    "7d; a bare\n"
	    "                 number is seconds), or since a UTC time "
	    "YYYY-MM-DD[THH:MM[:SS]]\n"
	    "  --last N       only the newest N rows, still oldest first; "
	    "without --last\n"
	    "                 and --since: the last 50\n"
	    "  -f, --follow   then print new rows as they come, until "
	    "interrupted or the\n"
	    "                 output is closed\n"
	    "  -j, --json     one JSON object a row (NDJSON), members named as "
	    "the table's\n"
	    "                 columns, plus \"time\" (UTC, as in the table "
	    "too)\n"
	    "  --dns          the DNS queries (dns_queries), not the flows\n",
	    true },
};

const struct cli_command cmd_log = {
	"log", log_actions, 1,
};

struct log_opts {
	const char	*db_path;
	const char	*sandbox;
	const char	*verdict;
	const char	*reason;
	const char	*name;
	bool		 has_since;
	int64_t		 since_us;
	bool		 has_last;
	unsigned long	 last;
	bool		 follow;
	bool		 json;
	bool		 dns;
};

/* ------------------------------------------------------------ pure parts */

/* Reads exactly n decimal digits. */
static const char *
read_digits(const char *s, int n, int *out)
{
	int v = 0;

	for (; n > 0; n--, s++) {
		if (!isdigit((unsigned char)*s))
			return NULL;
		v = v * 10 + (*s - '0');
	}
	*out = v;
	return s;
}

/* "30s", "10m", "2h", "7d", or "600" seconds as `policy suggest` takes
 * them: seconds, or -1. */
static int64_t
parse_duration(const char *arg)
{
	unsigned long long n;
	int64_t unit;
	char *end;

	if (!isdigit((unsigned char)arg[0]))
		return -1;
	errno = 0;
	n = strtoull(arg, &end, 10);
	if (errno != 0 || (end[0] != '\0' && end[1] != '\0'))
		return -1;
	switch (end[0]) {
	case '\0':
	case 's':
		unit = 1;
		break;
	case 'm':
		unit = 60;
		break;
	case 'h':
		unit = 3600;
		break;
	case 'd':
		unit = 86400;
		break;
	default:
		return -1;
	}
	if (n > (unsigned long long)(SINCE_MAX_S / unit))
		return -1;
	return (int64_t)n * unit;
}

/* "YYYY-MM-DD[THH:MM[:SS[.ffffff]]][Z]" ('T' or ' '), UTC: unix µs, or -1. */
static int
parse_utc(const char *arg, int64_t *us)
{
	struct tm tm, back;
	const char *s = arg;
	int year, mon, day, hour = 0, min = 0, sec = 0, digits = 0;
	int64_t frac = 0;
	time_t t;

	if ((s = read_digits(s, 4, &year)) == NULL || *s++ != '-' ||
	    (s = read_digits(s, 2, &mon)) == NULL || *s++ != '-' ||
	    (s = read_digits(s, 2, &day)) == NULL)
		return -1;
	if (*s == 'T' || *s == ' ') {
		s++;
		if ((s = read_digits(s, 2, &hour)) == NULL || *s++ != ':' ||
		    (s = read_digits(s, 2, &min)) == NULL)
			return -1;
		if (*s == ':') {
			if ((s = read_digits(s + 1, 2, &sec)) == NULL)
				return -1;
			/* the table's times carry milliseconds: take them */
			if (*s == '.') {
				for (s++; isdigit((unsigned char)*s); s++) {
					if (++digits > 6)
						return -1;
					frac = frac * 10 + (*s - '0');
				}
				if (digits == 0)
					return -1;
				for (; digits < 6; digits++)
					frac *= 10;
			}
		}
		if (*s == 'Z')
			s++;
	}
	if (*s != '\0' || year < 1970)
		return -1;

	memset(&tm, 0, sizeof(tm));
	tm.tm_year = year - 1900;
	tm.tm_mon = mon - 1;
	tm.tm_mday = day;
	tm.tm_hour = hour;
	tm.tm_min = min;
	tm.tm_sec = sec;
	t = timegm(&tm);
	/* timegm normalises "02-30" into March: a round trip catches it */
	if (t == (time_t)-1 || gmtime_r(&t, &back) == NULL ||
	    back.tm_year != year - 1900 || back.tm_mon != mon - 1 ||
	    back.tm_mday != day || back.tm_hour != hour ||
	    back.tm_min != min || back.tm_sec != sec)
		return -1;
	*us = (int64_t)t * 1000000 + frac;
	return 0;
}

int
cli_log_parse_since(const char *arg, int64_t now_us, int64_t *since_us)
{
	int64_t s;

	if (arg == NULL || arg[0] == '\0')
		return -1;
	if ((s = parse_duration(arg)) >= 0) {
		*since_us = now_us - s * 1000000;
		return 0;
	}
	return parse_utc(arg, since_us);
}

void
cli_log_destination(char *buf, size_t len, const char *label, const char *ip,
    int64_t port)
{
	char addr[CELL_MAX];
	bool v6 = strchr(ip, ':') != NULL;

	if (port < 0)
		snprintf(addr, sizeof(addr), "%s", ip);
	else
		snprintf(addr, sizeof(addr), "%s%s%s:%" PRId64, v6 ? "[" : "",
		    ip, v6 ? "]" : "", port);
	if (label != NULL && label[0] != '\0')
		snprintf(buf, len, "%s (%s)", label, addr);
	else
		snprintf(buf, len, "%s", addr);
}

void
cli_log_cell(char *dst, size_t dstlen, const char *src, size_t width)
{
	size_t i, n;

	if (dstlen == 0)
		return;
	n = strlen(src);
	if (n > dstlen - 1)
		n = dstlen - 1;
	if (width > 0 && n > width)
		n = width;
	/*
	 * Names and SNIs come from the sandboxes: no byte of them may reach
	 * the terminal as a control. Non-ASCII goes too, which also keeps
	 * one byte one column.
	 */
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)src[i];

		dst[i] = (c < 0x20 || c >= 0x7f) ? '?' : (char)c;
	}
	if (width > 0 && n == width && strlen(src) > width)
		dst[n - 1] = '~';
	dst[n] = '\0';
}

/* ------------------------------------------------------------ the database */

/*
 * The schema version; EXIT_OK if this CLI reads it, else EXIT_FAILED with
 * why in err and what SQLite said in *sqlite_rc (SQLITE_OK if it was the
 * version itself).
 */
static int
check_version(sqlite3 *db, const char *path, int *sqlite_rc, char *err,
    size_t errlen)
{
	sqlite3_stmt *st;
	int64_t version = 0;
	int rc;

	*sqlite_rc = SQLITE_OK;
	if ((rc = sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st,
	    NULL)) != SQLITE_OK)
		goto fail;
	if ((rc = sqlite3_step(st)) == SQLITE_ROW)
		version = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	if (rc != SQLITE_ROW)
		goto fail;
	if (version == 0) {
		snprintf(err, errlen, "%s: not a sluice database (no schema "
		    "version)", path);
		return EXIT_FAILED;
	}
	if (version > STORE_SCHEMA_VERSION) {
		snprintf(err, errlen, "%s: schema version %" PRId64 " is newer "
		    "than this sluice reads (%d to %d): update sluice", path,
		    version, LOG_SCHEMA_MIN, STORE_SCHEMA_VERSION);
		return EXIT_FAILED;
	}
	if (version < LOG_SCHEMA_MIN) {
		snprintf(err, errlen, "%s: schema version %" PRId64 " is older "
		    "than this sluice reads (%d to %d); sluiced upgrades it "
		    "when it opens it", path, version, LOG_SCHEMA_MIN,
		    STORE_SCHEMA_VERSION);
		return EXIT_FAILED;
	}
	return EXIT_OK;

fail:
	*sqlite_rc = rc;
	if ((rc & 0xff) == SQLITE_NOTADB)
		snprintf(err, errlen, "%s: not a sluice database (%s)", path,
		    sqlite3_errmsg(db));
	else
		snprintf(err, errlen, "%s: %s", path, sqlite3_errmsg(db));
	return EXIT_FAILED;
}

int
cli_log_open(const char *path, struct sqlite3 **dbp, char *err, size_t errlen)
{
	struct stat sb;
	sqlite3 *db = NULL;
	int rc;

	*dbp = NULL;
	if (stat(path, &sb) == -1) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return errno == ENOENT || errno == ENOTDIR ? EXIT_USAGE :
		    EXIT_FAILED;
	}
	if (!S_ISREG(sb.st_mode)) {
		snprintf(err, errlen, "%s: not a regular file", path);
		return EXIT_USAGE;
	}
	/*
	 * READONLY: this connection can never write or take the write lock.
	 * (SQLite may still create the -wal and -shm files beside it: a WAL
	 * reader needs the shared index.) EXRESCODE: say which error.
	 */
	rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY |
	    SQLITE_OPEN_EXRESCODE, NULL);
	if (rc != SQLITE_OK) {
		if (db != NULL && sqlite3_system_errno(db) != 0)
			snprintf(err, errlen, "%s: %s: %s", path,
			    sqlite3_errmsg(db),
			    strerror(sqlite3_system_errno(db)));
		else
			snprintf(err, errlen, "%s: %s", path, db != NULL ?
			    sqlite3_errmsg(db) : sqlite3_errstr(rc));
		sqlite3_close(db);
		return EXIT_FAILED;
	}
	sqlite3_busy_timeout(db, LOG_BUSY_MS);
	if (check_version(db, path, &rc, err, errlen) != EXIT_OK) {
		sqlite3_close(db);
		return EXIT_FAILED;
	}
	*dbp = db;
	return EXIT_OK;
}

/*
 * The statements of one run. All of them read committed rows by id, the
 * INTEGER PRIMARY KEY: sluiced's single writer appends in commit order, so
 * every row up to a max(id) seen is there to be read.
 */
struct reader {
	sqlite3			*db;
	const struct log_opts	*o;
	const char		*table;
	sqlite3_stmt		*upper;		/* max(id) */
	sqlite3_stmt		*nth;		/* the id of the Nth newest match */
	sqlite3_stmt		*page;		/* matches in (after, upper] */
	int64_t			 cursor;	/* every id up to it was read */
	bool			 started;	/* the cursor was placed */
};

static void
reader_finalize(struct reader *r)
{
	sqlite3_finalize(r->upper);
	sqlite3_finalize(r->nth);
	sqlite3_finalize(r->page);
	r->upper = r->nth = r->page = NULL;
}

/* The filters as SQL, with parameters only: no user text is pasted. */
static void
append_filters(char *sql, size_t len, const struct log_opts *o)
{
	size_t n = strlen(sql);

	if (o->sandbox != NULL)
		n += snprintf(sql + n, len - n, " AND sandbox = :sandbox");
	if (o->verdict != NULL)
		n += snprintf(sql + n, len - n, " AND verdict = :verdict");
	if (o->reason != NULL)
		n += snprintf(sql + n, len - n, " AND reason = :reason");
	if (o->name != NULL && o->dns)
		n += snprintf(sql + n, len - n,
		    " AND qname = :name COLLATE NOCASE");
	else if (o->name != NULL)
		n += snprintf(sql + n, len - n,
		    " AND (name = :name COLLATE NOCASE"
		    " OR sni = :name COLLATE NOCASE"
		    " OR http_host = :name COLLATE NOCASE)");
	if (o->has_since)
		snprintf(sql + n, len - n, " AND ts >= :since");
}

static int
bind_text(sqlite3_stmt *st, const char *param, const char *value)
{
	int i;

	if (value == NULL || (i = sqlite3_bind_parameter_index(st, param)) == 0)
		return SQLITE_OK;
	return sqlite3_bind_text(st, i, value, -1, SQLITE_STATIC);
}

static int
bind_int(sqlite3_stmt *st, const char *param, int64_t value)
{
	int i;

	if ((i = sqlite3_bind_parameter_index(st, param)) == 0)
		return SQLITE_OK;
	return sqlite3_bind_int64(st, i, value);
}

/* The filters' values stay bound across resets. */
static int
bind_filters(sqlite3_stmt *st, const struct log_opts *o)
{
	int rc;

	if ((rc = bind_text(st, ":sandbox", o->sandbox)) != SQLITE_OK ||
	    (rc = bind_text(st, ":verdict", o->verdict)) != SQLITE_OK ||
	    (rc = bind_text(st, ":reason", o->reason)) != SQLITE_OK ||
	    (rc = bind_text(st, ":name", o->name)) != SQLITE_OK)
		return rc;
	if (o->has_since)
		return bind_int(st, ":since", o->since_us);
	return SQLITE_OK;
}

static int
reader_prepare(struct reader *r)
{
	char sql[1024];
	int rc;

	reader_finalize(r);
	snprintf(sql, sizeof(sql), "SELECT ifnull(max(id), 0) FROM %s",
	    r->table);
	if ((rc = sqlite3_prepare_v2(r->db, sql, -1, &r->upper, NULL)) !=
	    SQLITE_OK)
		return rc;

	snprintf(sql, sizeof(sql), "SELECT id FROM %s WHERE id <= :upper",
	    r->table);
	append_filters(sql, sizeof(sql), r->o);
	strncat(sql, " ORDER BY id DESC LIMIT 1 OFFSET :skip",
	    sizeof(sql) - strlen(sql) - 1);
	if ((rc = sqlite3_prepare_v2(r->db, sql, -1, &r->nth, NULL)) !=
	    SQLITE_OK || (rc = bind_filters(r->nth, r->o)) != SQLITE_OK)
		return rc;

	/*
	 * "time" last, so that every column of the table comes as it is, new
	 * ones included; the row's object puts it after ts. NOT INDEXED: a
	 * page walks the rowid from the cursor. With an index on a filter
	 * (sandbox, verdict...) SQLite would collect and sort every match of
	 * the whole range for each page of 256, which grows with the square
	 * of the rows.
	 */
	snprintf(sql, sizeof(sql), "SELECT *, strftime('%%Y-%%m-%%dT%%H:%%M:"
	    "%%fZ', ts / 1000000.0, 'unixepoch') FROM %s NOT INDEXED"
	    " WHERE id > :after AND id <= :upper", r->table);
	append_filters(sql, sizeof(sql), r->o);
	strncat(sql, " ORDER BY id LIMIT :limit",
	    sizeof(sql) - strlen(sql) - 1);
	if ((rc = sqlite3_prepare_v2(r->db, sql, -1, &r->page, NULL)) !=
	    SQLITE_OK || (rc = bind_filters(r->page, r->o)) != SQLITE_OK)
		return rc;
	return SQLITE_OK;
}

/* Runs a statement that yields one integer (default if no row); the reset
 * ends its read transaction. */
static int
step_int(sqlite3_stmt *st, int64_t dflt, int64_t *out)
{
	int rc;

	*out = dflt;
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		*out = sqlite3_column_int64(st, 0);
	if (rc == SQLITE_ROW || rc == SQLITE_DONE)
		rc = SQLITE_OK;
	sqlite3_reset(st);
	return rc;
}

/* A text as a JSON string; bytes that are not UTF-8 become '?'. */
static json_t *
text_json(const unsigned char *s, size_t len)
{
	json_t *j;
	char *copy;
	size_t i;

	if ((j = json_stringn((const char *)s, len)) != NULL)
		return j;
	if ((copy = malloc(len + 1)) == NULL)
		return NULL;
	for (i = 0; i < len; i++)
		copy[i] = (s[i] >= 0x80 || s[i] == 0) ? '?' : (char)s[i];
	j = json_stringn(copy, len);
	free(copy);
	return j;
}

static json_t *
column_json(sqlite3_stmt *st, int i)
{
	const unsigned char *b, *text;
	char *hex;
	json_t *j;
	int k, n;

	switch (sqlite3_column_type(st, i)) {
	case SQLITE_INTEGER:
		return json_integer(sqlite3_column_int64(st, i));
	case SQLITE_FLOAT:
		return json_real(sqlite3_column_double(st, i));
	case SQLITE_TEXT:
		/* text first, then its length (SQLite's order) */
		text = sqlite3_column_text(st, i);
		n = sqlite3_column_bytes(st, i);
		return text != NULL ? text_json(text, (size_t)n) : NULL;
	case SQLITE_BLOB:
		/* no column is a BLOB today; hex keeps a future one readable */
		b = sqlite3_column_blob(st, i);
		n = sqlite3_column_bytes(st, i);
		if ((hex = malloc((size_t)n * 2 + 1)) == NULL)
			return NULL;
		for (k = 0; k < n; k++)
			snprintf(hex + 2 * k, 3, "%02x", b[k]);
		hex[2 * n] = '\0';
		j = json_string(hex);
		free(hex);
		return j;
	default:
		return json_null();
	}
}

/* The current row as an object: each column by its name, in the table's
 * order, with "time" after "ts". */
static json_t *
row_json(sqlite3_stmt *st)
{
	json_t *row, *v;
	const char *name;
	int i, ncols = sqlite3_column_count(st);

	if ((row = json_object()) == NULL)
		return NULL;
	for (i = 0; i < ncols - 1; i++) {
		name = sqlite3_column_name(st, i);
		if (name == NULL || (v = column_json(st, i)) == NULL ||
		    json_object_set_new(row, name, v) == -1)
			goto fail;
		if (strcmp(name, "ts") == 0 &&
		    ((v = column_json(st, ncols - 1)) == NULL ||
		    json_object_set_new(row, "time", v) == -1))
			goto fail;
	}
	return row;
fail:
	json_decref(row);
	return NULL;
}

/*
 * Reads the next page of matches after r->cursor up to upper into page.
 * Sets *more if the page is full (there may be more), and moves the
 * cursor past what was read. Returns an SQLite code: SQLITE_OK, or the
 * error; SQLITE_NOMEM if a row could not be made.
 */
static int
reader_page(struct reader *r, int64_t upper, json_t *page, bool *more)
{
	sqlite3_stmt *st = r->page;
	json_t *row;
	int64_t last = r->cursor;
	size_t n = 0;
	int rc;

	*more = false;
	if ((rc = bind_int(st, ":after", r->cursor)) != SQLITE_OK ||
	    (rc = bind_int(st, ":upper", upper)) != SQLITE_OK ||
	    (rc = bind_int(st, ":limit", PAGE_ROWS)) != SQLITE_OK)
		return rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if ((row = row_json(st)) == NULL ||
		    json_array_append_new(page, row) == -1) {
			rc = SQLITE_NOMEM;
			break;
		}
		last = sqlite3_column_int64(st, 0);	/* id is the first */
		n++;
	}
	sqlite3_reset(st);
	if (rc != SQLITE_DONE)
		return rc;
	if (n == PAGE_ROWS) {
		*more = true;
		r->cursor = last;
	} else
		r->cursor = upper;
	return SQLITE_OK;
}

/* ------------------------------------------------------------ output */

struct column {
	const char	*header;
	size_t		 max;		/* 0: elastic, takes what is left */
	size_t		 follow_min;	/* room kept for rows yet to come */
	size_t		 shrink_min;	/* gives room to the elastic one down
					 * to this; 0: never */
	bool		 cut;		/* false: never cut, may overflow */
};

static const struct column flow_columns[] = {
	{ "TIME", 23, 0, 0, false },
	{ "SANDBOX", 24, 12, 8, true },
	{ "PROTO", 5, 0, 0, true },
	{ "DESTINATION", 0, 40, 0, true },
	{ "VERDICT", 7, 0, 0, true },
	{ "REASON", 21, 15, 0, true },
};
static const struct column dns_columns[] = {
	{ "TIME", 23, 0, 0, false },
	{ "SANDBOX", 24, 12, 8, true },
	{ "QTYPE", 8, 5, 0, true },
	{ "QNAME", 0, 30, 0, true },
	{ "RCODE", 8, 8, 0, true },
	{ "VERDICT", 7, 0, 0, true },
	{ "REASON", 16, 15, 0, true },
};

struct printer {
	bool			 json;
	bool			 follow;
	const struct column	*cols;
	int			 ncols;
	size_t			 term_width;
	bool			 laid_out;	/* widths set, header printed */
	size_t			 width[NCOLS_MAX];
	char			 today[16];	/* "YYYY-MM-DD", UTC */
};

static size_t
terminal_width(void)
{
	struct winsize ws;
	unsigned long n;
	const char *env;
	char *end;

	if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
		return ws.ws_col;
	if ((env = getenv("COLUMNS")) != NULL && isdigit((unsigned char)*env)) {
		errno = 0;
		n = strtoul(env, &end, 10);
		if (errno == 0 && *end == '\0' && n >= 20 && n <= 10000)
			return n;
	}
	return TERM_WIDTH_DEFAULT;
}

static const char *
member(const json_t *row, const char *key)
{
	const char *s = ctl_client_string(row, key);

	return s != NULL ? s : "-";
}

static const char *
member_or_null(const json_t *row, const char *key)
{
	const char *s = ctl_client_string(row, key);

	return s != NULL && s[0] != '\0' ? s : NULL;
}

/* "HH:MM:SS.mmm" today, "YYYY-MM-DD HH:MM:SS.mmm" before. */
static void
time_cell(char *cell, const char *iso, const char *today)
{
	size_t n;

	if (strlen(iso) > 11 && strncmp(iso, today, 10) == 0)
		snprintf(cell, CELL_MAX, "%s", iso + 11);
	else {
		snprintf(cell, CELL_MAX, "%s", iso);
		if (strlen(cell) > 10 && cell[10] == 'T')
			cell[10] = ' ';
	}
	n = strlen(cell);
	if (n > 0 && cell[n - 1] == 'Z')
		cell[n - 1] = '\0';
}

/* One row's cells, unfiltered: cli_log_cell() cleans them when printed. */
static void
row_cells(const struct printer *p, const json_t *row,
    char cell[NCOLS_MAX][CELL_MAX])
{
	const char *label;
	json_t *port;

	time_cell(cell[0], member(row, "time"), p->today);
	snprintf(cell[1], CELL_MAX, "%s", member(row, "sandbox"));
	if (p->cols == dns_columns) {
		snprintf(cell[2], CELL_MAX, "%s", member(row, "qtype"));
		snprintf(cell[3], CELL_MAX, "%s", member(row, "qname"));
		snprintf(cell[4], CELL_MAX, "%s", member(row, "rcode"));
		snprintf(cell[5], CELL_MAX, "%s", member(row, "verdict"));
		snprintf(cell[6], CELL_MAX, "%s", member(row, "reason"));
		return;
	}
	snprintf(cell[2], CELL_MAX, "%s", member(row, "proto"));
	/*
	 * What the client itself named (SNI, Host) before the binding's name:
	 * they agree on an allowed flow, and on a refused one the claim is
	 * what was refused.
	 */
	if ((label = member_or_null(row, "sni")) == NULL &&
	    (label = member_or_null(row, "http_host")) == NULL)
		label = member_or_null(row, "name");
	port = json_object_get(row, "dst_port");
	cli_log_destination(cell[3], CELL_MAX, label, member(row, "dst_ip"),
	    json_is_integer(port) ? json_integer_value(port) : -1);
	snprintf(cell[4], CELL_MAX, "%s", member(row, "verdict"));
	snprintf(cell[5], CELL_MAX, "%s", member(row, "reason"));
}

static void
print_cells(const struct printer *p, char cell[NCOLS_MAX][CELL_MAX])
{
	char out[CELL_MAX];
	size_t len;
	int i;

	for (i = 0; i < p->ncols; i++) {
		cli_log_cell(out, sizeof(out), cell[i],
		    p->cols[i].cut ? p->width[i] : 0);
		len = strlen(out);
		if (i == p->ncols - 1)
			printf("%s\n", out);
		else
			printf("%s%*s", out, len < p->width[i] ?
			    (int)(p->width[i] - len + COL_GAP) : COL_GAP, "");
	}
}

/*
 * Widths from the first rows seen. The elastic column (the destination or
 * the name) gets what the terminal has left, first taken from the
 * shrinkable ones (the sandbox), so that lines do not wrap.
 */
static void
layout(struct printer *p, const json_t *page)
{
	char cell[NCOLS_MAX][CELL_MAX];
	const json_t *row;
	size_t i, used = 0, avail = 0, want, take;
	int c, elastic = -1;

	for (c = 0; c < p->ncols; c++)
		p->width[c] = strlen(p->cols[c].header);
	json_array_foreach(page, i, row) {
		row_cells(p, row, cell);
		for (c = 0; c < p->ncols; c++)
			if (strlen(cell[c]) > p->width[c])
				p->width[c] = strlen(cell[c]);
	}
	for (c = 0; c < p->ncols; c++) {
		if (p->follow && p->width[c] < p->cols[c].follow_min)
			p->width[c] = p->cols[c].follow_min;
		if (p->cols[c].max == 0) {
			elastic = c;
			continue;
		}
		if (p->width[c] > p->cols[c].max)
			p->width[c] = p->cols[c].max;
		used += p->width[c] + COL_GAP;
	}
	if (elastic < 0)
		return;
	want = p->width[elastic];
	if (p->term_width > used)
		avail = p->term_width - used;
	for (c = 0; c < p->ncols && avail < want; c++) {
		if (p->cols[c].shrink_min == 0 ||
		    p->width[c] <= p->cols[c].shrink_min)
			continue;
		take = p->width[c] - p->cols[c].shrink_min;
		if (take > want - avail)
			take = want - avail;
		p->width[c] -= take;
		avail += take;
	}
	p->width[elastic] = want < avail ? want : avail;
	if (p->width[elastic] < ELASTIC_MIN)
		p->width[elastic] = ELASTIC_MIN;
}

static void
print_header(const struct printer *p)
{
	char cell[NCOLS_MAX][CELL_MAX];
	int c;

	for (c = 0; c < p->ncols; c++)
		snprintf(cell[c], CELL_MAX, "%s", p->cols[c].header);
	print_cells(p, cell);
}

/* Prints a page; false if stdout failed (errno says how). */
static bool
print_page(struct printer *p, const json_t *page)
{
	char cell[NCOLS_MAX][CELL_MAX];
	const json_t *row;
	struct tm tm;
	time_t now;
	size_t i;

	if (json_array_size(page) == 0)
		return true;
	if (p->json) {
		json_array_foreach(page, i, row)
			cli_print_json(row);
	} else {
		now = time(NULL);
		if (gmtime_r(&now, &tm) != NULL)
			strftime(p->today, sizeof(p->today), "%Y-%m-%d", &tm);
		if (!p->laid_out) {
			layout(p, page);
			print_header(p);
			p->laid_out = true;
		}
		json_array_foreach(page, i, row) {
			row_cells(p, row, cell);
			print_cells(p, cell);
		}
	}
	return fflush(stdout) != EOF && !ferror(stdout);
}

/* ------------------------------------------------------------ the command */

static volatile sig_atomic_t stop_signal;

static void
on_stop_signal(int sig)
{
	stop_signal = sig;
}

/*
 * The reader of stdout went away (that ends the command, successfully) or
 * writing failed and was reported. The CLI's final flush must not fail on
 * what is still buffered, so fd 1 is pointed at /dev/null and the
 * stream's error cleared.
 */
static void
stdout_gone(void)
{
	int fd;

	if ((fd = open("/dev/null", O_WRONLY | O_CLOEXEC)) != -1) {
		dup2(fd, STDOUT_FILENO);
		close(fd);
	}
	clearerr(stdout);
}

/*
 * Waits up to ms for the next poll. Returns false when the wait should
 * end the command: a signal, or stdout's reader is gone (a pipe's write
 * end reports POLLERR, a terminal POLLHUP) even though nothing was written.
 */
static bool
follow_wait(int ms)
{
	struct pollfd pfd = { .fd = STDOUT_FILENO, .events = 0 };

	if (stop_signal)
		return false;
	if (poll(&pfd, 1, ms) > 0 &&
	    (pfd.revents & (POLLERR | POLLHUP | POLLNVAL)) != 0) {
		stdout_gone();
		return false;
	}
	return !stop_signal;
}

/*
 * Worth another try later: busy beyond the timeout, or the schema changed
 * under a statement (an upgrade) more often than SQLite re-prepares.
 */
static bool
transient(int rc)
{
	rc &= 0xff;	/* the primary code of an extended one */
	return rc == SQLITE_BUSY || rc == SQLITE_LOCKED || rc == SQLITE_SCHEMA;
}

enum { READ_OK, READ_RETRY, READ_STDOUT_GONE, READ_FAILED };

/* Says what went wrong unless another try may do better. */
static int
read_error(const struct reader *r, int rc)
{
	if (transient(rc))
		return READ_RETRY;
	if (rc == SQLITE_NOMEM)
		log_warnx("out of memory");
	else
		log_warnx("%s: %s", r->o->db_path, sqlite3_errmsg(r->db));
	return READ_FAILED;
}

/* Places the cursor before the rows to show first: the newest --last N
 * (or the default 50) of the matches, or all since --since. */
static int
reader_start(struct reader *r, int64_t upper)
{
	unsigned long last;
	int64_t nth;
	int rc;

	r->cursor = 0;
	if (r->o->has_since && !r->o->has_last)
		return SQLITE_OK;
	last = r->o->has_last ? r->o->last : LOG_DEFAULT_ROWS;
	if (last == 0) {
		r->cursor = upper;
		return SQLITE_OK;
	}
	if ((rc = bind_int(r->nth, ":upper", upper)) != SQLITE_OK ||
	    (rc = bind_int(r->nth, ":skip", (int64_t)last - 1)) != SQLITE_OK ||
	    (rc = step_int(r->nth, 1, &nth)) != SQLITE_OK)
		return rc;
	/* no Nth match (fewer than N): nth is 1 and all are shown */
	r->cursor = nth - 1;
	return SQLITE_OK;
}

/*
 * One round: reads the matches up to the newest row committed now and
 * prints them, a page at a time. The cursor only ever moves past rows
 * printed or skipped, so a round that fails can simply be run again.
 */
static int
read_round(struct reader *r, struct printer *p)
{
	char err[512];
	json_t *page;
	int64_t upper;
	bool more = true, printed;
	int rc, saved_errno;

	/* a sluiced of another version may have upgraded the file */
	if (check_version(r->db, r->o->db_path, &rc, err, sizeof(err)) !=
	    EXIT_OK) {
		if (transient(rc))
			return READ_RETRY;
		log_warnx("%s", err);
		return READ_FAILED;
	}
	if ((rc = step_int(r->upper, 0, &upper)) != SQLITE_OK)
		return read_error(r, rc);
	if (!r->started) {
		if ((rc = reader_start(r, upper)) != SQLITE_OK)
			return read_error(r, rc);
		r->started = true;
	}
	while (more) {
		if ((page = json_array()) == NULL)
			return read_error(r, SQLITE_NOMEM);
		if ((rc = reader_page(r, upper, page, &more)) != SQLITE_OK) {
			json_decref(page);
			return read_error(r, rc);
		}
		errno = 0;
		printed = print_page(p, page);
		saved_errno = errno;
		json_decref(page);
		if (printed)
			continue;
		if (saved_errno != EPIPE) {
			errno = saved_errno;
			log_warn("writing the output");
		}
		/* said once: the CLI's final flush is not to say it again */
		stdout_gone();
		return saved_errno == EPIPE ? READ_STDOUT_GONE : READ_FAILED;
	}
	return READ_OK;
}

static int
parse_args(int argc, char **argv, const struct cli *cli, struct log_opts *o)
{
	enum { OPT_DB = 256, OPT_SANDBOX, OPT_VERDICT, OPT_REASON, OPT_NAME,
	    OPT_SINCE, OPT_LAST, OPT_DNS };
	static const struct option longopts[] = {
		{ "db", required_argument, NULL, OPT_DB },
		{ "sandbox", required_argument, NULL, OPT_SANDBOX },
		{ "verdict", required_argument, NULL, OPT_VERDICT },
		{ "reason", required_argument, NULL, OPT_REASON },
		{ "name", required_argument, NULL, OPT_NAME },
		{ "since", required_argument, NULL, OPT_SINCE },
		{ "last", required_argument, NULL, OPT_LAST },
		{ "follow", no_argument, NULL, 'f' },
		{ "json", no_argument, NULL, 'j' },
		{ "dns", no_argument, NULL, OPT_DNS },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static const char optstring[] = "-:fjh";
	const char *since = NULL, *env;
	struct timespec now;
	char *end;
	int c, rc;

	memset(o, 0, sizeof(*o));
	optind = 0;
	while ((c = getopt_long(argc, argv, optstring, longopts, NULL)) != -1) {
		switch (c) {
		case OPT_DB:
			o->db_path = optarg;
			break;
		case OPT_SANDBOX:
			o->sandbox = optarg;
			break;
		case OPT_VERDICT:
			o->verdict = optarg;
			break;
		case OPT_REASON:
			o->reason = optarg;
			break;
		case OPT_NAME:
			o->name = optarg;
			break;
		case OPT_SINCE:
			since = optarg;
			break;
		case OPT_LAST:
			errno = 0;
			o->last = strtoul(optarg, &end, 10);
			if (!isdigit((unsigned char)optarg[0]) || *end != '\0' ||
			    errno != 0 || o->last > LOG_LAST_MAX)
				return cli_usage_error(cli, "--last needs a "
				    "number from 0 to %lu, not '%s'",
				    LOG_LAST_MAX, optarg);
			o->has_last = true;
			break;
		case 'f':
			o->follow = true;
			break;
		case 'j':
			o->json = true;
			break;
		case OPT_DNS:
			o->dns = true;
			break;
		default:
			if ((rc = cli_opt_default(cli, c, argv, optstring,
			    NULL, 0, NULL)) != -1)
				return rc;
		}
	}
	if ((rc = cli_opt_operands(cli, argc, argv, NULL, 0, NULL)) != -1)
		return rc;

	if (o->db_path == NULL) {
		env = getenv("SLUICE_DB");
		o->db_path = env != NULL && env[0] != '\0' ? env :
		    LOG_DB_DEFAULT;
	}
	if (o->db_path[0] == '\0')
		return cli_usage_error(cli, "--db needs a file name");
	if ((o->sandbox != NULL && o->sandbox[0] == '\0') ||
	    (o->reason != NULL && o->reason[0] == '\0') ||
	    (o->name != NULL && o->name[0] == '\0'))
		return cli_usage_error(cli, "an empty filter matches nothing");
	if (o->verdict != NULL && strcmp(o->verdict, "allow") != 0 &&
	    strcmp(o->verdict, "deny") != 0 && strcmp(o->verdict, "audit") != 0)
		return cli_usage_error(cli, "--verdict is allow, deny or audit, "
		    "not '%s'", o->verdict);
	if (since != NULL) {
		clock_gettime(CLOCK_REALTIME, &now);
		if (cli_log_parse_since(since, (int64_t)now.tv_sec * 1000000 +
		    now.tv_nsec / 1000, &o->since_us) == -1)
			return cli_usage_error(cli, "--since needs a duration "
			    "(600, 30s, 10m, 2h, 7d) or a UTC time "
			    "YYYY-MM-DD[THH:MM[:SS]], not '%s'", since);
		o->has_since = true;
	}
	return -1;
}

#define RETRY_QUIET	4	/* busy rounds in a row before saying so */

static int
log_run(int argc, char **argv, const struct cli *cli)
{
	struct log_opts o;
	struct reader r;
	struct printer p;
	struct sigaction sa;
	char err[1024];
	int rc, res, retries = 0;

	if ((rc = parse_args(argc, argv, cli, &o)) != -1)
		return rc;

	memset(&r, 0, sizeof(r));
	memset(&p, 0, sizeof(p));
	r.o = &o;
	r.table = o.dns ? "dns_queries" : "flows";
	p.json = o.json;
	p.follow = o.follow;
	p.cols = o.dns ? dns_columns : flow_columns;
	p.ncols = o.dns ? (int)(sizeof(dns_columns) / sizeof(dns_columns[0])) :
	    (int)(sizeof(flow_columns) / sizeof(flow_columns[0]));
	p.term_width = terminal_width();

	if ((rc = cli_log_open(o.db_path, &r.db, err, sizeof(err))) !=
	    EXIT_OK) {
		log_warnx("%s", err);
		return rc;
	}
	/* A closed pipe is the reader's way of saying "enough": EPIPE, not
	 * death by SIGPIPE. */
	signal(SIGPIPE, SIG_IGN);
	if (o.follow) {
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_stop_signal;	/* no SA_RESTART: poll wakes */
		sigemptyset(&sa.sa_mask);
		sigaction(SIGINT, &sa, NULL);
		sigaction(SIGTERM, &sa, NULL);
	}

	for (;;) {
		if (r.page == NULL && (res = reader_prepare(&r)) != SQLITE_OK)
			res = read_error(&r, res);
		else
			res = read_round(&r, &p);
		if (res == READ_FAILED) {
			rc = EXIT_FAILED;
			break;
		}
		if (res == READ_STDOUT_GONE)
			break;
		if (res == READ_RETRY) {
			/* statements are made again: an upgrade may have
			 * changed the tables' columns */
			snprintf(err, sizeof(err), "%s", sqlite3_errmsg(r.db));
			reader_finalize(&r);
			if (++retries == RETRY_QUIET) {
				log_warnx("%s: %s%s", o.db_path, err,
				    o.follow ? ", still trying" : "");
				if (!o.follow) {
					rc = EXIT_FAILED;
					break;
				}
			}
		} else {
			retries = 0;
			if (!o.follow)
				break;
		}
		if (!follow_wait(FOLLOW_POLL_MS))
			break;
	}
	reader_finalize(&r);
	sqlite3_close(r.db);
	return rc;
}
