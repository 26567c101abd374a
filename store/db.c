/* db.c: the SQLite side of the audit log: open, schema, one batch per transaction. */
#include <sys/stat.h>

#include <errno.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/store.h"
#include "store/store_int.h"

/*
 * During open a busy lock is most likely another sluiced creating the same
 * schema, which is worth waiting for. Once running, the writer gives up
 * quickly and retries the whole batch later: a reader or a second process
 * holding a lock must never keep the queue from moving for long.
 */
#define OPEN_BUSY_MS	2000
#define WRITE_BUSY_MS	100

/*
 * Table and column names are a contract with operators' queries. What a
 * new database and an upgraded one share is written once, so the two
 * cannot drift apart. An upgrade step makes the flow_log of its own
 * version, not today's: the 1 -> 2 step runs before version 3's columns
 * exist.
 */
#define ISO_TIME(col)							\
	"strftime('%Y-%m-%dT%H:%M:%fZ', " col " / 1000000.0, 'unixepoch')"
#define FLOW_LOG_HEAD							\
	"CREATE VIEW flow_log AS SELECT id, " ISO_TIME("ts")		\
	" AS time, sandbox, proto, src_ip, src_port, dst_ip, dst_port,"	\
	" verdict, reason, rule, policy_sha256, name"
#define FLOW_LOG_V3_COLUMNS						\
	", sni, tls_version, alpn, http_method, http_host, http_path, app"
#define FLOW_LOG_VIEW_V2	FLOW_LOG_HEAD " FROM flows;"
#define FLOW_LOG_VIEW_V3	FLOW_LOG_HEAD FLOW_LOG_V3_COLUMNS " FROM flows;"
#define FLOW_LOG_VIEW							\
	FLOW_LOG_HEAD FLOW_LOG_V3_COLUMNS ", bytes_out, packets_out,"	\
	" bytes_in, packets_in, " ISO_TIME("end_ts") " AS end_time,"	\
	" end_state FROM flows;"

/* What version 2 added besides the column flows.name. */
#define V2_OBJECTS							\
	"CREATE TABLE dns_queries (id INTEGER PRIMARY KEY,"		\
	" ts INTEGER NOT NULL, sandbox TEXT, proto TEXT NOT NULL,"	\
	" src_ip TEXT NOT NULL, src_port INTEGER, qname TEXT NOT NULL,"	\
	" qtype TEXT NOT NULL, rcode TEXT, verdict TEXT NOT NULL"	\
	" CHECK (verdict IN ('allow','deny','audit')),"			\
	" reason TEXT NOT NULL, rule TEXT, answers TEXT, stripped TEXT," \
	" policy_sha256 TEXT) STRICT;"					\
	"CREATE INDEX dns_queries_sandbox_ts ON dns_queries(sandbox, ts);" \
	"CREATE INDEX dns_queries_qname ON dns_queries(qname);"		\
	"CREATE VIEW dns_log AS SELECT id, " ISO_TIME("ts")		\
	" AS time, sandbox, proto, src_ip, src_port, qname, qtype, rcode," \
	" verdict, reason, rule, answers, stripped, policy_sha256"	\
	" FROM dns_queries;"						\
	"CREATE INDEX flows_name ON flows(name);"

/* What version 3 added besides the first-flight columns of flows. */
#define V3_OBJECTS							\
	"CREATE INDEX flows_sni ON flows(sni);"

/*
 * What version 4 added besides the end columns of flows. flows_tuple
 * finds the row a flow's end belongs to; the ts indexes let the retention
 * purge find old rows without reading the tables. A lost_records row
 * says count records of kind were refused for reason, up to ts.
 */
#define V4_OBJECTS							\
	"CREATE INDEX flows_tuple ON flows(src_ip, src_port, dst_ip,"	\
	" dst_port);"							\
	"CREATE INDEX flows_ts ON flows(ts);"				\
	"CREATE INDEX dns_queries_ts ON dns_queries(ts);"		\
	"CREATE TABLE lost_records (id INTEGER PRIMARY KEY,"		\
	" ts INTEGER NOT NULL, kind TEXT NOT NULL, count INTEGER NOT NULL," \
	" reason TEXT NOT NULL) STRICT;"				\
	"CREATE INDEX lost_records_ts ON lost_records(ts);"		\
	"CREATE VIEW lost_log AS SELECT id, " ISO_TIME("ts")		\
	" AS time, kind, count, reason FROM lost_records;"

/*
 * What version 5 took away: the indexes on the names (the query name, the
 * binding's name, the SNI). `sluice log --name` compares without case,
 * which an index of the plain text cannot serve, so they were never read;
 * yet every row paid for them, and most for the query name, whose
 * inserts land all over the index (more than half of a DNS row's cost with
 * varied names). IF EXISTS: an operator may have dropped them already.
 */
#define V5_DROPS							\
	"DROP INDEX IF EXISTS dns_queries_qname;"			\
	"DROP INDEX IF EXISTS flows_name;"				\
	"DROP INDEX IF EXISTS flows_sni;"

/*
 * Version 6: flows_tuple holds the open flows only, the rows the two
 * queries that read it look for (a flow's end, what an open connection
 * presented; both ask end_ts IS NULL). Over all rows, each connection's
 * source port put its insert on a page of its own in an index as big as
 * the log, written to the WAL and again at the checkpoint, and its cost
 * grew with the log: flows and their ends in turns of 2,000, random
 * destinations and ports, the writer took 17.4-18.7 us a flow row over
 * 120,000 rows and 28-30 in the last fifth; over the open ones, 9.4-9.9
 * and 12.4-12.7, an end 4.4-4.9 us either way (storebench). The index
 * now holds as many rows as connections are open, not as the log.
 */
#define V6_OBJECTS							\
	"DROP INDEX IF EXISTS flows_tuple;"				\
	"CREATE INDEX flows_tuple ON flows(src_ip, src_port, dst_ip,"	\
	" dst_port) WHERE end_ts IS NULL;"

/*
 * What version 7 took away: the index on dns_queries(ts). Only the
 * retention purge read it, and a DNS row is the cheapest row and the
 * most numerous, so its share of the row's cost was the largest: 0.33 of
 * 2.09 us of the writer's CPU a row (storebench, 200,000 rows at
 * 80,000/s, three alternating runs each: 1.75-1.77 against 2.06-2.13).
 * The purge takes the oldest rows by rowid instead (purge_sql), the
 * order the queries were logged in. sluice log walks the rowid, and
 * sluice policy suggest reads dns_queries(sandbox, ts).
 */
#define V7_DROPS							\
	"DROP INDEX IF EXISTS dns_queries_ts;"

/*
 * A new database, at STORE_SCHEMA_VERSION: version 1 and what each
 * version after it added or took away, so that it reads exactly as an
 * upgraded one.
 */
static const char schema_sql[] =
	"CREATE TABLE sandboxes (id INTEGER PRIMARY KEY, name TEXT NOT NULL,"
	" ifname TEXT NOT NULL, addr TEXT NOT NULL, created_us INTEGER NOT NULL,"
	" deleted_us INTEGER) STRICT;"
	"CREATE TABLE policies (id INTEGER PRIMARY KEY, sandbox TEXT NOT NULL,"
	" ts INTEGER NOT NULL, sha256 TEXT NOT NULL, text TEXT NOT NULL) STRICT;"
	"CREATE TABLE flows (id INTEGER PRIMARY KEY, ts INTEGER NOT NULL,"
	" sandbox TEXT, proto TEXT NOT NULL, src_ip TEXT NOT NULL,"
	" src_port INTEGER, dst_ip TEXT NOT NULL, dst_port INTEGER,"
	" verdict TEXT NOT NULL CHECK (verdict IN ('allow','deny','audit')),"
	" reason TEXT NOT NULL, rule TEXT, policy_sha256 TEXT,"
	" name TEXT, sni TEXT, tls_version TEXT, alpn TEXT, http_method TEXT,"
	" http_host TEXT, http_path TEXT, app TEXT, bytes_out INTEGER,"
	" packets_out INTEGER, bytes_in INTEGER, packets_in INTEGER,"
	" end_ts INTEGER, end_state TEXT) STRICT;"
	"CREATE INDEX flows_sandbox_ts ON flows(sandbox, ts);"
	"CREATE INDEX flows_verdict_ts ON flows(verdict, ts);"
	"CREATE INDEX flows_dst ON flows(dst_ip, dst_port);"
	"CREATE INDEX policies_sandbox ON policies(sandbox, ts);"
	FLOW_LOG_VIEW
	V2_OBJECTS
	V3_OBJECTS
	V4_OBJECTS
	V5_DROPS
	V6_OBJECTS
	V7_DROPS;

/*
 * upgrade_sql[v - 1] takes a version v database to v + 1. ADD COLUMN
 * appends, which is where a new database has the column too; a view has
 * no ALTER, so flow_log is made again. Indexes on a big old flows table
 * take a while to build, once, inside the open's transaction.
 */
static const char *const upgrade_sql[] = {
	"ALTER TABLE flows ADD COLUMN name TEXT;"
	"DROP VIEW IF EXISTS flow_log;"
	FLOW_LOG_VIEW_V2
	V2_OBJECTS,

	"ALTER TABLE flows ADD COLUMN sni TEXT;"
	"ALTER TABLE flows ADD COLUMN tls_version TEXT;"
	"ALTER TABLE flows ADD COLUMN alpn TEXT;"
	"ALTER TABLE flows ADD COLUMN http_method TEXT;"
	"ALTER TABLE flows ADD COLUMN http_host TEXT;"
	"ALTER TABLE flows ADD COLUMN http_path TEXT;"
	"ALTER TABLE flows ADD COLUMN app TEXT;"
	"DROP VIEW IF EXISTS flow_log;"
	FLOW_LOG_VIEW_V3
	V3_OBJECTS,

	"ALTER TABLE flows ADD COLUMN bytes_out INTEGER;"
	"ALTER TABLE flows ADD COLUMN packets_out INTEGER;"
	"ALTER TABLE flows ADD COLUMN bytes_in INTEGER;"
	"ALTER TABLE flows ADD COLUMN packets_in INTEGER;"
	"ALTER TABLE flows ADD COLUMN end_ts INTEGER;"
	"ALTER TABLE flows ADD COLUMN end_state TEXT;"
	"DROP VIEW IF EXISTS flow_log;"
	FLOW_LOG_VIEW
	V4_OBJECTS,

	V5_DROPS,

	V6_OBJECTS,

	V7_DROPS,
};
_Static_assert(sizeof(upgrade_sql) / sizeof(upgrade_sql[0]) ==
    STORE_SCHEMA_VERSION - 1, "one upgrade per schema version");

/*
 * The inserts of flows and DNS queries, made for 1 row, MULTI_ROWS and
 * WIDE_ROWS rows at once (insert_sql): a statement's own start and end
 * cost as much as a row's insert (3.3 against 2.1 us a DNS row, one or
 * eight to a statement, measured), and the writer takes runs of records
 * of one kind in 32s, what is left of a run in eights. 32 took another
 * 0.16 us off a DNS row (storebench, 200,000 rows at 80,000/s, three
 * alternating runs each: 1.66-1.68 against 1.82-1.85 us), 64 and 128 no
 * more; a run shorter than 32 (flows between ends) still goes in eights.
 *
 * OR FAIL: with the default (ABORT) a statement of several rows must be
 * able to undo its own first rows when a later one fails, so SQLite
 * copies every page it is about to change into a statement journal, and
 * eight flows change enough pages (five indexes) for that journal to
 * spill into a temporary file: it was half of a flow row's cost (10.7
 * against 6.0 us, measured). FAIL keeps the rows before a failing one,
 * and needs no such journal; nothing is kept in the end, since any
 * failure rolls the whole batch back (finish).
 */
#define FLOW_INSERT							\
	"INSERT OR FAIL INTO flows (ts, sandbox, proto, src_ip, src_port,"	\
	" dst_ip, dst_port, verdict, reason, rule, policy_sha256, name, sni,"	\
	" tls_version, alpn, http_method, http_host, http_path, app) VALUES "
#define FLOW_PARAMS	19
#define DNS_INSERT							\
	"INSERT OR FAIL INTO dns_queries (ts, sandbox, proto, src_ip,"	\
	" src_port, qname, qtype, rcode, verdict, reason, rule, answers,"	\
	" stripped, policy_sha256) VALUES "
#define DNS_PARAMS	14
#define MULTI_ROWS	8
#define WIDE_ROWS	32
/* The longest insert's SQL: two characters a parameter, and a bracket. */
#define INSERT_SQL_MAX							\
	(sizeof(FLOW_INSERT) + WIDE_ROWS * (FLOW_PARAMS * 2 + 2))
static const char sandbox_add_sql[] =
	"INSERT INTO sandboxes (name, ifname, addr, created_us)"
	" VALUES (?1, ?2, ?3, ?4)";
/* A name can be reused after a delete; only the live row is closed. */
static const char sandbox_del_sql[] =
	"UPDATE sandboxes SET deleted_us = ?2 WHERE id = (SELECT max(id)"
	" FROM sandboxes WHERE name = ?1 AND deleted_us IS NULL)";
static const char policy_sql[] =
	"INSERT INTO policies (sandbox, ts, sha256, text)"
	" VALUES (?1, ?2, ?3, ?4)";
/*
 * The newest row of the 5-tuple still open that was logged by the end's
 * time, else the newest open one (store.h): a tuple reused after its end
 * starts a new row. No row (the flow predates the database, or was
 * purged, or its record was lost) is no error. IS: a NULL port matches
 * NULL. The search uses flows_tuple and reads the open rows of one tuple.
 */
static const char flow_end_sql[] =
	"UPDATE flows SET bytes_out = ?1, packets_out = ?2, bytes_in = ?3,"
	" packets_in = ?4, end_ts = ?5, end_state = ?6 WHERE id = (SELECT id"
	" FROM flows WHERE proto = ?7 AND src_ip = ?8 AND src_port IS ?9 AND"
	" dst_ip = ?10 AND dst_port IS ?11 AND end_ts IS NULL ORDER BY"
	" ts <= ?5 DESC, id DESC LIMIT 1)";
static const char lost_sql[] =
	"INSERT INTO lost_records (ts, kind, count, reason)"
	" VALUES (?1, ?2, ?3, ?4)";
/*
 * One chunk of the retention purge: the ts indexes find the oldest rows,
 * and the limit keeps the write lock short. Sandboxes and policies are
 * kept: they are few and small, and they are what gives an old flow's
 * sandbox name and policy hash a meaning.
 *
 * dns_queries has no ts index (V7_DROPS): a chunk looks at the first
 * rows by rowid, which is the order the queries were logged in, and
 * deletes those of them that are old; a chunk with fewer deletes ends
 * the table's round. It reads at most the chunk's rows, where a search
 * for ts < cutoff without an index would read the whole table in the
 * round's last chunk. The one difference: after the clock was set back,
 * rows logged more than a chunk after the last ones logged before wait
 * for those, so they are kept longer, by at most that step, never
 * shorter.
 */
static const char *const purge_sql[STORE_PURGE_TABLES] = {
	[STORE_PURGE_FLOWS] = "DELETE FROM flows WHERE id IN (SELECT id FROM"
	    " flows WHERE ts < ?1 LIMIT ?2)",
	[STORE_PURGE_DNS] = "DELETE FROM dns_queries WHERE id IN (SELECT id"
	    " FROM dns_queries ORDER BY id LIMIT ?2) AND ts < ?1",
	[STORE_PURGE_LOST] = "DELETE FROM lost_records WHERE id IN (SELECT id"
	    " FROM lost_records WHERE ts < ?1 LIMIT ?2)",
};

static const char *const kind_names[STORE_REC_KINDS] = {
	[STORE_REC_FLOW] = "flow",
	[STORE_REC_DNS] = "dns",
	[STORE_REC_SANDBOX] = "sandbox",
	[STORE_REC_POLICY] = "policy",
	[STORE_REC_FLOW_END] = "flow_end",
};
static const char *const reason_names[STORE_LOST_REASONS] = {
	[STORE_LOST_QUEUE_FULL] = "queue_full",
	[STORE_LOST_INVALID] = "invalid",
	[STORE_LOST_NO_MEMORY] = "no_memory",
	[STORE_LOST_KERNEL_DROPPED] = "kernel_dropped",
};

struct store_db {
	sqlite3		*db;
	sqlite3_stmt	*begin;
	sqlite3_stmt	*commit;
	sqlite3_stmt	*rollback;
	sqlite3_stmt	*flow;
	sqlite3_stmt	*dns;
	sqlite3_stmt	*flow_multi;	/* MULTI_ROWS rows */
	sqlite3_stmt	*dns_multi;
	sqlite3_stmt	*flow_wide;	/* WIDE_ROWS rows */
	sqlite3_stmt	*dns_wide;
	sqlite3_stmt	*sandbox_add;
	sqlite3_stmt	*sandbox_del;
	sqlite3_stmt	*policy;
	sqlite3_stmt	*flow_end;
	sqlite3_stmt	*lost;
	sqlite3_stmt	*purge[STORE_PURGE_TABLES];
	int		 last_rc;	/* of the last failed transaction */
};

static void __attribute__((format(printf, 4, 5)))
set_err(char *err, size_t errlen, const char *path, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	if (err == NULL || errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(err, errlen, "%s: %s", path, msg);
}

/*
 * SQLite's message, and for a damaged file what to do about it: the
 * operator moves it aside (the log then starts over in a new file).
 */
static void
db_err(sqlite3 *db, const char *path, char *err, size_t errlen)
{
	if ((sqlite3_extended_errcode(db) & 0xff) == SQLITE_CORRUPT)
		set_err(err, errlen, path, "%s: the file is damaged or"
		    " truncated; move it aside with its -wal and -shm files",
		    sqlite3_errmsg(db));
	else
		set_err(err, errlen, path, "%s", sqlite3_errmsg(db));
}

/*
 * SQLite takes a file shorter than its smallest page (512 bytes) for an
 * empty database and would write a new one over it; such a file is
 * rather the stump of a truncated one. 0: no file, empty, or long enough.
 */
static int
check_length(const char *path, char *err, size_t errlen)
{
	struct stat sb;

	if (stat(path, &sb) == -1 || !S_ISREG(sb.st_mode) ||
	    sb.st_size == 0 || sb.st_size >= 512)
		return 0;
	set_err(err, errlen, path, "only %lld bytes long, not a database"
	    " (truncated?)", (long long)sb.st_size);
	return -1;
}

/* mkdir -p of path's parent; the log holds who talked to whom, hence 0750. */
static int
make_parent(const char *path)
{
	char dir[PATH_MAX];
	char *slash, *p;

	if (strlen(path) >= sizeof(dir)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	strcpy(dir, path);
	if ((slash = strrchr(dir, '/')) == NULL || slash == dir)
		return 0;
	*slash = '\0';
	for (p = dir + 1; *p != '\0'; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(dir, 0750) == -1 && errno != EEXIST)
			return -1;
		*p = '/';
	}
	if (mkdir(dir, 0750) == -1 && errno != EEXIST)
		return -1;
	return 0;
}

/* Runs a statement that returns at most one value, an integer. */
static int
query_int(sqlite3 *db, const char *sql, int64_t *out)
{
	sqlite3_stmt *st;
	int rc;

	if ((rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL)) != SQLITE_OK)
		return rc;
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		*out = sqlite3_column_int64(st, 0);
		rc = SQLITE_OK;
	}
	sqlite3_finalize(st);
	return rc;
}

/* Switches to WAL and reads back the mode: on some filesystems it stays put. */
static int
set_wal(sqlite3 *db, const char *path, char *err, size_t errlen)
{
	sqlite3_stmt *st;
	const unsigned char *mode;
	int rc, ret = -1;

	rc = sqlite3_prepare_v2(db, "PRAGMA journal_mode = WAL", -1, &st, NULL);
	if (rc != SQLITE_OK) {
		db_err(db, path, err, errlen);
		return -1;
	}
	rc = sqlite3_step(st);
	if (rc != SQLITE_ROW)
		db_err(db, path, err, errlen);
	else if ((mode = sqlite3_column_text(st, 0)) == NULL ||
	    strcmp((const char *)mode, "wal") != 0)
		set_err(err, errlen, path, "journal_mode is '%s', not 'wal'",
		    mode ? (const char *)mode : "?");
	else
		ret = 0;
	sqlite3_finalize(st);
	return ret;
}

/* user_version says whose and which schema this is; refuse what is not ours. */
static int
check_version(sqlite3 *db, int64_t version, const char *path, char *err,
    size_t errlen)
{
	int64_t tables;

	if (version > STORE_SCHEMA_VERSION) {
		set_err(err, errlen, path, "database schema version %lld is newer"
		    " than this sluice (%d)", (long long)version,
		    STORE_SCHEMA_VERSION);
		return -1;
	}
	if (version < 0) {
		set_err(err, errlen, path, "database schema version %lld is"
		    " unknown", (long long)version);
		return -1;
	}
	if (version == 0) {
		/* Version 0 with tables: some other program's database. */
		if (query_int(db, "SELECT count(*) FROM sqlite_schema",
		    &tables) != SQLITE_OK) {
			db_err(db, path, err, errlen);
			return -1;
		}
		if (tables > 0) {
			set_err(err, errlen, path, "not a sluice database"
			    " (user_version 0 but it has tables)");
			return -1;
		}
	}
	return 0;
}

/*
 * Creates the schema if the file is new, or brings an older one up to
 * date, in one transaction: a failed upgrade leaves the file as it was.
 * The version is read again inside the write transaction: a second
 * process may have created or upgraded it meanwhile.
 */
static int
make_schema(sqlite3 *db, const char *path, char *err, size_t errlen)
{
	int64_t version, v;
	char sql[64];

	if (sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
		goto fail;
	if (query_int(db, "PRAGMA user_version", &version) != SQLITE_OK)
		goto fail;
	if (check_version(db, version, path, err, errlen) == -1)
		goto rollback;
	if (version == 0 &&
	    sqlite3_exec(db, schema_sql, NULL, NULL, NULL) != SQLITE_OK)
		goto fail;
	for (v = version; v > 0 && v < STORE_SCHEMA_VERSION; v++)
		if (sqlite3_exec(db, upgrade_sql[v - 1], NULL, NULL,
		    NULL) != SQLITE_OK) {
			set_err(err, errlen, path, "cannot upgrade the schema"
			    " from version %lld: %s", (long long)v,
			    sqlite3_errmsg(db));
			goto rollback;
		}
	if (version != STORE_SCHEMA_VERSION) {
		snprintf(sql, sizeof(sql), "PRAGMA user_version = %d",
		    STORE_SCHEMA_VERSION);
		if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK)
			goto fail;
	}
	if (sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
		goto fail;
	return 0;

fail:
	db_err(db, path, err, errlen);
rollback:
	if (!sqlite3_get_autocommit(db))
		sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
	return -1;
}

/* head, then rows groups of params placeholders each: "(?,?),(?,?)". */
static const char *
insert_sql(char *buf, size_t len, const char *head, int params, int rows)
{
	size_t n = (size_t)snprintf(buf, len, "%s", head);
	int r, p;

	for (r = 0; r < rows && n < len; r++)
		for (p = 0; p < params && n < len; p++)
			n += (size_t)snprintf(buf + n, len - n, "%s?%s",
			    p > 0 ? "," : r > 0 ? ",(" : "(",
			    p == params - 1 ? ")" : "");
	return n < len ? buf : NULL;	/* NULL: prepare fails */
}

static int
prepare(struct store_db *d)
{
	char flow1[INSERT_SQL_MAX], dns1[INSERT_SQL_MAX];
	char flowk[INSERT_SQL_MAX], dnsk[INSERT_SQL_MAX];
	char floww[INSERT_SQL_MAX], dnsw[INSERT_SQL_MAX];
	const struct {
		sqlite3_stmt	**st;
		const char	 *sql;
	} stmts[] = {
		{ &d->begin, "BEGIN IMMEDIATE" },
		{ &d->commit, "COMMIT" },
		{ &d->rollback, "ROLLBACK" },
		{ &d->flow, insert_sql(flow1, sizeof(flow1), FLOW_INSERT,
		    FLOW_PARAMS, 1) },
		{ &d->dns, insert_sql(dns1, sizeof(dns1), DNS_INSERT,
		    DNS_PARAMS, 1) },
		{ &d->flow_multi, insert_sql(flowk, sizeof(flowk), FLOW_INSERT,
		    FLOW_PARAMS, MULTI_ROWS) },
		{ &d->dns_multi, insert_sql(dnsk, sizeof(dnsk), DNS_INSERT,
		    DNS_PARAMS, MULTI_ROWS) },
		{ &d->flow_wide, insert_sql(floww, sizeof(floww), FLOW_INSERT,
		    FLOW_PARAMS, WIDE_ROWS) },
		{ &d->dns_wide, insert_sql(dnsw, sizeof(dnsw), DNS_INSERT,
		    DNS_PARAMS, WIDE_ROWS) },
		{ &d->sandbox_add, sandbox_add_sql },
		{ &d->sandbox_del, sandbox_del_sql },
		{ &d->policy, policy_sql },
		{ &d->flow_end, flow_end_sql },
		{ &d->lost, lost_sql },
		{ &d->purge[STORE_PURGE_FLOWS], purge_sql[STORE_PURGE_FLOWS] },
		{ &d->purge[STORE_PURGE_DNS], purge_sql[STORE_PURGE_DNS] },
		{ &d->purge[STORE_PURGE_LOST], purge_sql[STORE_PURGE_LOST] },
	};
	size_t i;

	/* PERSISTENT: these live as long as the connection. */
	for (i = 0; i < sizeof(stmts) / sizeof(stmts[0]); i++)
		if (stmts[i].sql == NULL ||
		    sqlite3_prepare_v3(d->db, stmts[i].sql, -1,
		    SQLITE_PREPARE_PERSISTENT, stmts[i].st, NULL) != SQLITE_OK)
			return -1;
	return 0;
}

struct store_db *
store_db_open(const char *path, char *err, size_t errlen)
{
	struct store_db *d;
	int64_t version;
	int rc;

	if (path == NULL || *path == '\0') {
		set_err(err, errlen, "(null)", "no database path");
		return NULL;
	}
	if ((d = calloc(1, sizeof(*d))) == NULL) {
		set_err(err, errlen, path, "%s", strerror(errno));
		return NULL;
	}
	if (make_parent(path) == -1) {
		set_err(err, errlen, path, "cannot create its directory: %s",
		    strerror(errno));
		goto fail;
	}
	if (check_length(path, err, errlen) == -1)
		goto fail;
	/* The writer thread uses the connection on its own from here on. */
	if (!sqlite3_threadsafe()) {
		set_err(err, errlen, path, "SQLite was built without threads");
		goto fail;
	}
	/*
	 * NOMUTEX: after open only the writer thread touches this connection
	 * (pthread_create orders open before it), so SQLite's per-connection
	 * mutex would only cost. EXRESCODE: say which I/O error it was.
	 */
	rc = sqlite3_open_v2(path, &d->db, SQLITE_OPEN_READWRITE |
	    SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE,
	    NULL);
	if (rc != SQLITE_OK) {
		set_err(err, errlen, path, "%s", d->db ? sqlite3_errmsg(d->db) :
		    sqlite3_errstr(rc));
		goto fail;
	}
	sqlite3_busy_timeout(d->db, OPEN_BUSY_MS);

	/*
	 * The first read of the file: a file that is not a database fails
	 * here, and a newer schema is refused before anything is changed.
	 */
	if (query_int(d->db, "PRAGMA user_version", &version) != SQLITE_OK) {
		db_err(d->db, path, err, errlen);
		goto fail;
	}
	if (check_version(d->db, version, path, err, errlen) == -1)
		goto fail;
	/*
	 * A new file gets pages of 16 KiB instead of SQLite's 4: the writer
	 * took 17 % less CPU a DNS row (storebench, 300,000 rows at 80,000/s,
	 * 6 runs each alternating: median 2.02 against 2.44 us), 10-20 % less
	 * a flow row, and with 1,000 sandboxes, whose rows land on a page each
	 * in the indexes by sandbox, 8.5-27 against 11.9-31 us as the log
	 * grew (log-scale.sh). Fewer pages to split, to checksum into the WAL
	 * and to copy back at the checkpoint. It is a no-op on a file that has
	 * tables: in WAL mode the page size of an existing database is fixed.
	 */
	if (sqlite3_exec(d->db, "PRAGMA page_size = 16384", NULL, NULL,
	    NULL) != SQLITE_OK) {
		db_err(d->db, path, err, errlen);
		goto fail;
	}
	if (set_wal(d->db, path, err, errlen) == -1)
		goto fail;
	/* WAL + NORMAL: a power loss may lose the last commits, never corrupt. */
	if (sqlite3_exec(d->db, "PRAGMA synchronous = NORMAL;"
	    "PRAGMA foreign_keys = OFF", NULL, NULL, NULL) != SQLITE_OK) {
		db_err(d->db, path, err, errlen);
		goto fail;
	}
	if (make_schema(d->db, path, err, errlen) == -1)
		goto fail;
	/*
	 * The schema's only CHECK, on verdict, is what store_put_* already
	 * enforces (known_verdict) before a record is queued, so on this
	 * connection it only costs: SQLite tests an IN list of three by
	 * building a temporary b-tree for every row, a fifth of a DNS row's
	 * insert (1.9 against 1.5 us, measured). Other connections (sqlite3,
	 * scripts) still get the CHECK. Set before prepare: it changes the
	 * code SQLite compiles the inserts into.
	 */
	if (sqlite3_exec(d->db, "PRAGMA ignore_check_constraints = ON", NULL,
	    NULL, NULL) != SQLITE_OK) {
		db_err(d->db, path, err, errlen);
		goto fail;
	}
	if (prepare(d) == -1) {
		db_err(d->db, path, err, errlen);
		goto fail;
	}
	sqlite3_busy_timeout(d->db, WRITE_BUSY_MS);
	return d;

fail:
	store_db_close(d);
	return NULL;
}

/* The batch outlives the statement's step, so no copies are needed. */
static void
bind_text(sqlite3_stmt *st, int col, const char *s, int empty_is_null)
{
	if (s == NULL || (empty_is_null && *s == '\0'))
		sqlite3_bind_null(st, col);
	else
		sqlite3_bind_text(st, col, s, -1, SQLITE_STATIC);
}

static void
bind_port(sqlite3_stmt *st, int col, int port)
{
	if (port < 0)
		sqlite3_bind_null(st, col);
	else
		sqlite3_bind_int(st, col, port);
}

static int
step_reset(sqlite3_stmt *st)
{
	int rc;

	rc = sqlite3_step(st);
	sqlite3_reset(st);
	return rc;
}

/* A flow's FLOW_PARAMS values, from parameter o + 1 on. */
static void
bind_flow(sqlite3_stmt *st, int o, const struct store_flow *f)
{
	sqlite3_bind_int64(st, o + 1, f->ts_us);
	bind_text(st, o + 2, f->sandbox, 1);
	bind_text(st, o + 3, f->proto, 0);
	bind_text(st, o + 4, f->src_ip, 0);
	bind_port(st, o + 5, f->src_port);
	bind_text(st, o + 6, f->dst_ip, 0);
	bind_port(st, o + 7, f->dst_port);
	bind_text(st, o + 8, f->verdict, 0);
	bind_text(st, o + 9, f->reason, 0);
	bind_text(st, o + 10, f->rule, 1);
	bind_text(st, o + 11, f->policy_sha256, 1);
	bind_text(st, o + 12, f->name, 1);
	bind_text(st, o + 13, f->sni, 1);
	bind_text(st, o + 14, f->tls_version, 1);
	bind_text(st, o + 15, f->alpn, 1);
	bind_text(st, o + 16, f->http_method, 1);
	bind_text(st, o + 17, f->http_host, 1);
	bind_text(st, o + 18, f->http_path, 1);
	bind_text(st, o + 19, f->app, 1);
}

/* A DNS query's DNS_PARAMS values, from parameter o + 1 on. */
static void
bind_dns(sqlite3_stmt *st, int o, const struct store_dns *r)
{
	sqlite3_bind_int64(st, o + 1, r->ts_us);
	bind_text(st, o + 2, r->sandbox, 1);
	bind_text(st, o + 3, r->proto, 0);
	bind_text(st, o + 4, r->src_ip, 0);
	bind_port(st, o + 5, r->src_port);
	bind_text(st, o + 6, r->qname, 0);
	bind_text(st, o + 7, r->qtype, 0);
	bind_text(st, o + 8, r->rcode, 1);
	bind_text(st, o + 9, r->verdict, 0);
	bind_text(st, o + 10, r->reason, 0);
	bind_text(st, o + 11, r->rule, 1);
	bind_text(st, o + 12, r->answers, 1);
	bind_text(st, o + 13, r->stripped, 1);
	bind_text(st, o + 14, r->policy_sha256, 1);
}

static int
write_flow(struct store_db *d, const struct store_flow *f)
{
	bind_flow(d->flow, 0, f);
	return step_reset(d->flow);
}

static int
write_dns(struct store_db *d, const struct store_dns *r)
{
	bind_dns(d->dns, 0, r);
	return step_reset(d->dns);
}

static int
write_sandbox(struct store_db *d, const struct store_sandbox_rec *r)
{
	sqlite3_stmt *st;

	if (r->deleted) {
		st = d->sandbox_del;
		bind_text(st, 1, r->name, 0);
		sqlite3_bind_int64(st, 2, r->ts_us);
	} else {
		st = d->sandbox_add;
		bind_text(st, 1, r->name, 0);
		bind_text(st, 2, r->ifname, 0);
		bind_text(st, 3, r->addr, 0);
		sqlite3_bind_int64(st, 4, r->ts_us);
	}
	return step_reset(st);
}

static int
write_policy(struct store_db *d, const struct store_policy_rec *r)
{
	sqlite3_stmt *st = d->policy;

	bind_text(st, 1, r->sandbox, 0);
	sqlite3_bind_int64(st, 2, r->ts_us);
	bind_text(st, 3, r->sha256, 0);
	bind_text(st, 4, r->text, 0);
	return step_reset(st);
}

/* Counters are 64-bit unsigned, SQLite's integers signed: saturate. */
static void
bind_count(sqlite3_stmt *st, int col, uint64_t v)
{
	sqlite3_bind_int64(st, col, v > INT64_MAX ? INT64_MAX : (int64_t)v);
}

static int
write_flow_end(struct store_db *d, const struct store_flow_end *e)
{
	sqlite3_stmt *st = d->flow_end;

	bind_count(st, 1, e->bytes_out);
	bind_count(st, 2, e->packets_out);
	bind_count(st, 3, e->bytes_in);
	bind_count(st, 4, e->packets_in);
	sqlite3_bind_int64(st, 5, e->ts_us);
	bind_text(st, 6, e->end_state, 0);
	bind_text(st, 7, e->proto, 0);
	bind_text(st, 8, e->src_ip, 0);
	bind_port(st, 9, e->src_port);
	bind_text(st, 10, e->dst_ip, 0);
	bind_port(st, 11, e->dst_port);
	return step_reset(st);
}

static int
write_lost(struct store_db *d, const struct store_lost *lost, int64_t now_us)
{
	sqlite3_stmt *st = d->lost;
	int k, r, rc = SQLITE_DONE;

	if (lost == NULL)
		return rc;
	for (k = 0; k < STORE_REC_KINDS && rc == SQLITE_DONE; k++)
		for (r = 0; r < STORE_LOST_REASONS && rc == SQLITE_DONE; r++) {
			if (lost->n[k][r] == 0)
				continue;
			sqlite3_bind_int64(st, 1, now_us);
			bind_text(st, 2, kind_names[k], 0);
			bind_count(st, 3, lost->n[k][r]);
			bind_text(st, 4, reason_names[r], 0);
			rc = step_reset(st);
		}
	return rc;
}

static int
write_rec(struct store_db *d, const struct store_rec *r)
{
	switch (r->kind) {
	case STORE_REC_FLOW:
		return write_flow(d, &r->u.flow);
	case STORE_REC_DNS:
		return write_dns(d, &r->u.dns);
	case STORE_REC_SANDBOX:
		return write_sandbox(d, &r->u.sandbox);
	case STORE_REC_POLICY:
		return write_policy(d, &r->u.policy);
	case STORE_REC_FLOW_END:
		return write_flow_end(d, &r->u.flow_end);
	case STORE_REC_KINDS:
		break;
	}
	return SQLITE_MISUSE;
}

/*
 * How many of the left records from r on go into one statement:
 * WIDE_ROWS or MULTI_ROWS flows or queries in a row, else 1.
 */
static size_t
statement_rows(const struct store_rec *r, size_t left)
{
	size_t run = 1;

	if (r->kind != STORE_REC_FLOW && r->kind != STORE_REC_DNS)
		return 1;
	while (run < left && run < WIDE_ROWS && r[run].kind == r->kind)
		run++;
	return run == WIDE_ROWS ? WIDE_ROWS : run >= MULTI_ROWS ? MULTI_ROWS :
	    1;
}

/* Writes the rows (MULTI_ROWS or WIDE_ROWS) records from r on in one
 * statement. */
static int
write_multi(struct store_db *d, const struct store_rec *r, size_t rows)
{
	sqlite3_stmt *st;
	size_t i;

	if (rows == WIDE_ROWS)
		st = r->kind == STORE_REC_FLOW ? d->flow_wide : d->dns_wide;
	else
		st = r->kind == STORE_REC_FLOW ? d->flow_multi : d->dns_multi;
	for (i = 0; i < rows; i++)
		if (r[i].kind == STORE_REC_FLOW)
			bind_flow(st, (int)i * FLOW_PARAMS, &r[i].u.flow);
		else
			bind_dns(st, (int)i * DNS_PARAMS, &r[i].u.dns);
	return step_reset(st);
}

/* IMMEDIATE: take the write lock now, not halfway through the batch. */
static int
begin(struct store_db *d)
{
	int rc;

	if ((rc = step_reset(d->begin)) != SQLITE_DONE)
		d->last_rc = rc;
	return rc;
}

/* Commits if rc says all went well, else rolls back; 0 or -1. */
static int
finish(struct store_db *d, int rc)
{
	if (rc == SQLITE_DONE && (rc = step_reset(d->commit)) == SQLITE_DONE)
		return 0;
	d->last_rc = rc;
	/* SQLite rolls back by itself after some errors (FULL, IOERR...). */
	if (!sqlite3_get_autocommit(d->db))
		step_reset(d->rollback);
	return -1;
}

int
store_db_begin(struct store_db *d)
{
	return begin(d) == SQLITE_DONE ? 0 : -1;
}

int
store_db_put(struct store_db *d, const struct store_rec *recs, size_t n)
{
	size_t i, k;
	int rc = SQLITE_DONE;

	for (i = 0; i < n && rc == SQLITE_DONE; i += k) {
		k = statement_rows(&recs[i], n - i);
		rc = k > 1 ? write_multi(d, &recs[i], k) : write_rec(d, &recs[i]);
	}
	if (rc == SQLITE_DONE)
		return 0;
	d->last_rc = rc;
	return -1;
}

int
store_db_end(struct store_db *d, bool ok, const struct store_lost *lost,
    int64_t now_us)
{
	if (!ok) {
		if (!sqlite3_get_autocommit(d->db))
			step_reset(d->rollback);
		return -1;
	}
	return finish(d, write_lost(d, lost, now_us));
}

int
store_db_write(struct store_db *d, const struct store_rec *recs, size_t n,
    const struct store_lost *lost, int64_t now_us)
{
	if (store_db_begin(d) == -1)
		return -1;
	return store_db_end(d, store_db_put(d, recs, n) == 0, lost, now_us);
}

int64_t
store_db_purge(struct store_db *d, enum store_purge_table table,
    int64_t cutoff_us, int limit, const struct store_lost *lost,
    int64_t now_us)
{
	sqlite3_stmt *st = d->purge[table];
	int64_t deleted = 0;
	int rc;

	if ((rc = begin(d)) != SQLITE_DONE)
		return -1;
	sqlite3_bind_int64(st, 1, cutoff_us);
	sqlite3_bind_int(st, 2, limit);
	if ((rc = step_reset(st)) == SQLITE_DONE) {
		deleted = sqlite3_changes(d->db);
		rc = write_lost(d, lost, now_us);
	}
	return finish(d, rc) == 0 ? deleted : -1;
}

/*
 * After a checkpoint the WAL starts over from its top, but its file keeps
 * the size it grew to: once a long read (an export, a reader's snapshot
 * held open) has held the checkpoints back, hundreds of megabytes would
 * stay on the disk for good. With a limit, the first commit after the WAL
 * starts over cuts the file back to it. Best effort: the pragma only
 * sets a number on the connection.
 */
void
store_db_wal_limit(struct store_db *d, int64_t bytes)
{
	char sql[64];

	snprintf(sql, sizeof(sql), "PRAGMA journal_size_limit = %lld",
	    (long long)bytes);
	(void)sqlite3_exec(d->db, sql, NULL, NULL, NULL);
}

void
store_db_checkpoint(struct store_db *d)
{
	/* Best effort: a reader's snapshot may hold part of it back. */
	(void)sqlite3_wal_checkpoint_v2(d->db, NULL, SQLITE_CHECKPOINT_PASSIVE,
	    NULL, NULL);
}

bool
store_db_broken(const struct store_db *d)
{
	int rc = d->last_rc & 0xff;

	return rc == SQLITE_CORRUPT || rc == SQLITE_NOTADB;
}

void
store_db_close(struct store_db *d)
{
	int i;

	if (d == NULL)
		return;
	sqlite3_finalize(d->begin);
	sqlite3_finalize(d->commit);
	sqlite3_finalize(d->rollback);
	sqlite3_finalize(d->flow);
	sqlite3_finalize(d->dns);
	sqlite3_finalize(d->flow_multi);
	sqlite3_finalize(d->dns_multi);
	sqlite3_finalize(d->flow_wide);
	sqlite3_finalize(d->dns_wide);
	sqlite3_finalize(d->sandbox_add);
	sqlite3_finalize(d->sandbox_del);
	sqlite3_finalize(d->policy);
	sqlite3_finalize(d->flow_end);
	sqlite3_finalize(d->lost);
	for (i = 0; i < STORE_PURGE_TABLES; i++)
		sqlite3_finalize(d->purge[i]);
	sqlite3_close(d->db);
	free(d);
}
