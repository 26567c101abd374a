/* test_store.c: the audit log against real SQLite files in a scratch directory. */
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <setjmp.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "store/store.h"

/* Version 1's schema exactly as sluice wrote it (8ffc39d:store/db.c). */
static const char v1_schema_sql[] =
	"CREATE TABLE sandboxes (id INTEGER PRIMARY KEY, name TEXT NOT NULL,"
	" ifname TEXT NOT NULL, addr TEXT NOT NULL, created_us INTEGER NOT NULL,"
	" deleted_us INTEGER) STRICT;"
	"CREATE TABLE policies (id INTEGER PRIMARY KEY, sandbox TEXT NOT NULL,"
	" ts INTEGER NOT NULL, sha256 TEXT NOT NULL, text TEXT NOT NULL) STRICT;"
	"CREATE TABLE flows (id INTEGER PRIMARY KEY, ts INTEGER NOT NULL,"
	" sandbox TEXT, proto TEXT NOT NULL, src_ip TEXT NOT NULL,"
	" src_port INTEGER, dst_ip TEXT NOT NULL, dst_port INTEGER,"
	" verdict TEXT NOT NULL CHECK (verdict IN ('allow','deny','audit')),"
	" reason TEXT NOT NULL, rule TEXT, policy_sha256 TEXT) STRICT;"
	"CREATE INDEX flows_sandbox_ts ON flows(sandbox, ts);"
	"CREATE INDEX flows_verdict_ts ON flows(verdict, ts);"
	"CREATE INDEX flows_dst ON flows(dst_ip, dst_port);"
	"CREATE INDEX policies_sandbox ON policies(sandbox, ts);"
	"CREATE VIEW flow_log AS SELECT id,"
	" strftime('%Y-%m-%dT%H:%M:%fZ', ts / 1000000.0, 'unixepoch') AS time,"
	" sandbox, proto, src_ip, src_port, dst_ip, dst_port, verdict, reason,"
	" rule, policy_sha256 FROM flows;";

/* Version 2's schema exactly as sluice wrote it (4e4fa56:store/db.c). */
static const char v2_schema_sql[] =
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
	" name TEXT) STRICT;"
	"CREATE INDEX flows_sandbox_ts ON flows(sandbox, ts);"
	"CREATE INDEX flows_verdict_ts ON flows(verdict, ts);"
	"CREATE INDEX flows_dst ON flows(dst_ip, dst_port);"
	"CREATE INDEX policies_sandbox ON policies(sandbox, ts);"
	"CREATE VIEW flow_log AS SELECT id,"
	" strftime('%Y-%m-%dT%H:%M:%fZ', ts / 1000000.0, 'unixepoch')"
	" AS time, sandbox, proto, src_ip, src_port, dst_ip, dst_port,"
	" verdict, reason, rule, policy_sha256, name FROM flows;"
	"CREATE TABLE dns_queries (id INTEGER PRIMARY KEY,"
	" ts INTEGER NOT NULL, sandbox TEXT, proto TEXT NOT NULL,"
	" src_ip TEXT NOT NULL, src_port INTEGER, qname TEXT NOT NULL,"
	" qtype TEXT NOT NULL, rcode TEXT, verdict TEXT NOT NULL"
	" CHECK (verdict IN ('allow','deny','audit')),"
	" reason TEXT NOT NULL, rule TEXT, answers TEXT, stripped TEXT,"
	" policy_sha256 TEXT) STRICT;"
	"CREATE INDEX dns_queries_sandbox_ts ON dns_queries(sandbox, ts);"
	"CREATE INDEX dns_queries_qname ON dns_queries(qname);"
	"CREATE VIEW dns_log AS SELECT id,"
	" strftime('%Y-%m-%dT%H:%M:%fZ', ts / 1000000.0, 'unixepoch')"
	" AS time, sandbox, proto, src_ip, src_port, qname, qtype, rcode,"
	" verdict, reason, rule, answers, stripped, policy_sha256"
	" FROM dns_queries;"
	"CREATE INDEX flows_name ON flows(name);";

/* The columns of flows and flow_log from version 3 on, after name. */
#define V3_COLUMNS \
	"sni,tls_version,alpn,http_method,http_host,http_path,app"

struct fixture {
	char	dir[64];
	char	path[128];	/* dir/audit.db */
};

static int
setup(void **state)
{
	struct fixture *fx;

	if ((fx = calloc(1, sizeof(*fx))) == NULL)
		return -1;
	strcpy(fx->dir, "/tmp/sluice-test-store.XXXXXX");
	if (mkdtemp(fx->dir) == NULL) {
		free(fx);
		return -1;
	}
	snprintf(fx->path, sizeof(fx->path), "%s/audit.db", fx->dir);
	*state = fx;
	return 0;
}

static int
rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(p);
}

static int
teardown(void **state)
{
	struct fixture *fx = *state;
	int rc;

	rc = nftw(fx->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	free(fx);
	return rc;
}

/* A second connection, as an operator's sqlite3 shell would be. */
static sqlite3 *
peer_open(const char *path)
{
	sqlite3 *db = NULL;

	assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE |
	    SQLITE_OPEN_CREATE, NULL), SQLITE_OK);
	return db;
}

static void
peer_exec(sqlite3 *db, const char *sql)
{
	char *msg = NULL;

	if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK)
		fail_msg("%s: %s", sql, msg ? msg : "?");
}

static int64_t
query_int(sqlite3 *db, const char *sql)
{
	sqlite3_stmt *st;
	int64_t v;

	assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL),
	    SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return v;
}

/* Copies the single text result of sql into buf ("NULL" for NULL). */
static const char *
query_text(sqlite3 *db, const char *sql, char *buf, size_t len)
{
	sqlite3_stmt *st;
	const unsigned char *t;

	assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL),
	    SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	t = sqlite3_column_text(st, 0);
	snprintf(buf, len, "%s", t ? (const char *)t : "NULL");
	sqlite3_finalize(st);
	return buf;
}

/* The column names of a table or view, comma-separated, in order. */
static const char *
columns(sqlite3 *db, const char *table, char *buf, size_t len)
{
	char sql[256];

	snprintf(sql, sizeof(sql), "SELECT group_concat(name, ',') FROM"
	    " (SELECT name FROM pragma_table_info('%s') ORDER BY cid)", table);
	return query_text(db, sql, buf, len);
}

/*
 * Every object's type, name and table, every column's name, type, NOT
 * NULL and key, every index's columns, strictness: what a migrated
 * database and a new one must agree on.
 */
static const char *
schema_shape(sqlite3 *db, char *buf, size_t len)
{
	query_text(db, "SELECT group_concat(sig, ';') FROM (SELECT m.type"
	    " || ' ' || m.name || ' ' || m.tbl_name || ' strict=' ||"
	    " coalesce((SELECT strict FROM pragma_table_list(m.name)), '-')"
	    " || ' (' || coalesce((SELECT group_concat(c.name || ' ' ||"
	    " c.type || ' ' || c.\"notnull\" || ' ' || c.pk, ',') FROM"
	    " pragma_table_info(m.name) c), (SELECT group_concat(i.name, ',')"
	    " FROM pragma_index_info(m.name) i)) || ')' AS sig FROM"
	    " sqlite_schema m WHERE m.name NOT LIKE 'sqlite_%' ORDER BY"
	    " m.name)", buf, len);
	assert_true(strlen(buf) < len - 1);	/* not cut short */
	return buf;
}

static int64_t
path_count(const char *path, const char *sql)
{
	sqlite3 *db = peer_open(path);
	int64_t n = query_int(db, sql);

	sqlite3_close(db);
	return n;
}

static void
expect_text(sqlite3_stmt *st, int col, const char *want)
{
	if (want == NULL) {
		assert_int_equal(sqlite3_column_type(st, col), SQLITE_NULL);
		return;
	}
	assert_int_equal(sqlite3_column_type(st, col), SQLITE_TEXT);
	assert_string_equal((const char *)sqlite3_column_text(st, col), want);
}

static void
expect_int(sqlite3_stmt *st, int col, int64_t want)
{
	assert_int_equal(sqlite3_column_type(st, col), SQLITE_INTEGER);
	assert_int_equal(sqlite3_column_int64(st, col), want);
}

static void
expect_null(sqlite3_stmt *st, int col)
{
	assert_int_equal(sqlite3_column_type(st, col), SQLITE_NULL);
}

static struct store *
open_ok(const char *path, const struct store_opts *opts)
{
	char err[512] = "";
	struct store *s;

	s = store_open(path, opts, err, sizeof(err));
	if (s == NULL)
		fail_msg("store_open: %s", err);
	return s;
}

static void
make_flow(struct store_flow *f, int64_t ts, int dst_port)
{
	memset(f, 0, sizeof(*f));
	f->ts_us = ts;
	strcpy(f->sandbox, "task-a");
	f->proto = "tcp";
	strcpy(f->src_ip, "10.77.0.2");
	f->src_port = 40000;
	strcpy(f->dst_ip, "192.0.2.10");
	f->dst_port = dst_port;
	f->verdict = "allow";
	f->reason = "sni-allowed";
	strcpy(f->rule, "example.com:443");
	strcpy(f->policy_sha256, "ab");
}

/* size - 1 copies of c and the NUL: a fixed string as long as it may be. */
static void
fill(char *dst, size_t size, int c)
{
	memset(dst, c, size - 1);
	dst[size - 1] = '\0';
}

static void
make_dns(struct store_dns *d, int64_t ts)
{
	memset(d, 0, sizeof(*d));
	d->ts_us = ts;
	strcpy(d->sandbox, "task-a");
	d->proto = "udp";
	strcpy(d->src_ip, "10.77.0.2");
	d->src_port = 53000;
	strcpy(d->qname, "api.example.com");
	strcpy(d->qtype, "A");
	d->rcode = "NOERROR";
	d->verdict = "allow";
	d->reason = "allowed_domain";
	strcpy(d->rule, "*.example.com");
	strcpy(d->answers, "192.0.2.10,192.0.2.11");
	strcpy(d->policy_sha256, "ab");
}

static void
wait_write_error(struct store *s)
{
	struct store_stats st;
	int i;

	for (i = 0; i < 500; i++) {
		store_stats(s, &st);
		if (st.write_errors > 0)
			return;
		usleep(10000);
	}
	fail_msg("the writer never reported a failed transaction");
}

static void
test_schema(void **state)
{
	struct fixture *fx = *state;
	char path[320], dir[256], buf[512];
	struct stat sb;
	struct store *s;
	sqlite3 *db;

	/* Two missing directory levels: both are made. */
	snprintf(dir, sizeof(dir), "%s/var/sluice", fx->dir);
	snprintf(path, sizeof(path), "%s/audit.db", dir);
	s = open_ok(path, NULL);
	assert_int_equal(stat(dir, &sb), 0);
	assert_int_equal(sb.st_mode & 07777, 0750);

	db = peer_open(path);
	assert_int_equal(query_int(db, "PRAGMA user_version"), 3);
	assert_string_equal(query_text(db, "PRAGMA journal_mode", buf,
	    sizeof(buf)), "wal");
	assert_string_equal(query_text(db, "SELECT group_concat(name, ',')"
	    " FROM (SELECT name FROM sqlite_schema WHERE name NOT LIKE"
	    " 'sqlite_%' ORDER BY name)", buf, sizeof(buf)),
	    "dns_log,dns_queries,dns_queries_qname,dns_queries_sandbox_ts,"
	    "flow_log,flows,flows_dst,flows_name,flows_sandbox_ts,flows_sni,"
	    "flows_verdict_ts,policies,policies_sandbox,sandboxes");
	assert_string_equal(query_text(db, "SELECT group_concat(name, ',')"
	    " FROM (SELECT name FROM pragma_table_list WHERE strict = 1"
	    " ORDER BY name)", buf, sizeof(buf)),
	    "dns_queries,flows,policies,sandboxes");

	assert_string_equal(columns(db, "flows", buf, sizeof(buf)),
	    "id,ts,sandbox,proto,src_ip,src_port,dst_ip,dst_port,verdict,"
	    "reason,rule,policy_sha256,name," V3_COLUMNS);
	assert_string_equal(columns(db, "flow_log", buf, sizeof(buf)),
	    "id,time,sandbox,proto,src_ip,src_port,dst_ip,dst_port,verdict,"
	    "reason,rule,policy_sha256,name," V3_COLUMNS);
	assert_string_equal(query_text(db, "SELECT group_concat(name || ' ' ||"
	    " type || ' ' || \"notnull\", ',') FROM (SELECT * FROM"
	    " pragma_table_info('flows') WHERE cid >= 12 ORDER BY cid)", buf,
	    sizeof(buf)), "name TEXT 0,sni TEXT 0,tls_version TEXT 0,"
	    "alpn TEXT 0,http_method TEXT 0,http_host TEXT 0,http_path TEXT 0,"
	    "app TEXT 0");
	assert_string_equal(columns(db, "dns_queries", buf, sizeof(buf)),
	    "id,ts,sandbox,proto,src_ip,src_port,qname,qtype,rcode,verdict,"
	    "reason,rule,answers,stripped,policy_sha256");
	assert_string_equal(columns(db, "dns_log", buf, sizeof(buf)),
	    "id,time,sandbox,proto,src_ip,src_port,qname,qtype,rcode,verdict,"
	    "reason,rule,answers,stripped,policy_sha256");
	assert_string_equal(query_text(db, "SELECT group_concat(name || ' ' ||"
	    " type || ' ' || \"notnull\", ',') FROM (SELECT * FROM"
	    " pragma_table_info('dns_queries') ORDER BY cid)", buf,
	    sizeof(buf)), "id INTEGER 0,ts INTEGER 1,sandbox TEXT 0,"
	    "proto TEXT 1,src_ip TEXT 1,src_port INTEGER 0,qname TEXT 1,"
	    "qtype TEXT 1,rcode TEXT 0,verdict TEXT 1,reason TEXT 1,"
	    "rule TEXT 0,answers TEXT 0,stripped TEXT 0,policy_sha256 TEXT 0");
	assert_string_equal(query_text(db, "SELECT group_concat(idx || ':' ||"
	    " cols, ' ') FROM (SELECT m.name AS idx, (SELECT group_concat("
	    "i.name, ',') FROM pragma_index_info(m.name) i) AS cols FROM"
	    " sqlite_schema m WHERE m.type = 'index' AND m.name IN"
	    " ('flows_name', 'flows_sni', 'dns_queries_sandbox_ts',"
	    " 'dns_queries_qname') ORDER BY m.name)", buf, sizeof(buf)),
	    "dns_queries_qname:qname dns_queries_sandbox_ts:sandbox,ts"
	    " flows_name:name flows_sni:sni");
	sqlite3_close(db);
	store_close(s);
}

static void
test_flows_round_trip(void **state)
{
	struct fixture *fx = *state;
	struct store_flow f, full;
	struct store_stats stats;
	struct store *s;
	sqlite3 *db;
	sqlite3_stmt *st;
	char longest[254];

	s = open_ok(fx->path, NULL);

	/*
	 * Every field set, each to its own value. No one flow has both a
	 * ClientHello and a request head, but the store need not know.
	 */

	memset(&f, 0, sizeof(f));
	f.ts_us = 1700000000123456;
	strcpy(f.sandbox, "task-a");
	f.proto = "tcp";
	strcpy(f.src_ip, "10.77.0.2");
	f.src_port = 51234;
	strcpy(f.dst_ip, "2001:db8::1");
	f.dst_port = 443;
	f.verdict = "deny";
	f.reason = "sni-not-allowed";
	strcpy(f.rule, "*.example.com:443");
	memset(f.policy_sha256, 'e', 64);
	strcpy(f.name, "api.example.com");
	strcpy(f.sni, "sni.example.com");
	strcpy(f.tls_version, "TLS1.3");
	strcpy(f.alpn, "h2");
	strcpy(f.http_method, "GET");
	strcpy(f.http_host, "host.example.com:8080");
	strcpy(f.http_path, "/v1/items?q=1");
	strcpy(f.app, "TLS.Google");
	assert_int_equal(store_put_flow(s, &f), 0);

	/* Every "none" maps to NULL. */
	memset(&f, 0, sizeof(f));
	f.ts_us = 1700000001000000;
	f.proto = "icmp";
	strcpy(f.src_ip, "10.77.0.6");
	f.src_port = -1;
	strcpy(f.dst_ip, "198.51.100.7");
	f.dst_port = -1;
	f.verdict = "audit";
	f.reason = "no-sandbox";
	assert_int_equal(store_put_flow(s, &f), 0);

	/* Port 0 is a port, not "none". Each string fills its array. */
	make_flow(&f, 1700000002000000, 0);
	f.src_port = 0;
	memset(longest, 'n', sizeof(longest) - 1);
	longest[sizeof(longest) - 1] = '\0';
	strcpy(f.name, longest);
	fill(f.sni, sizeof(f.sni), 's');
	fill(f.tls_version, sizeof(f.tls_version), 't');
	fill(f.alpn, sizeof(f.alpn), 'a');
	fill(f.http_method, sizeof(f.http_method), 'm');
	fill(f.http_host, sizeof(f.http_host), 'h');
	fill(f.http_path, sizeof(f.http_path), 'p');
	fill(f.app, sizeof(f.app), 'x');
	full = f;
	assert_int_equal(store_put_flow(s, &f), 0);

	/* One of the new strings at a time: each "" is NULL on its own. */
	make_flow(&f, 1700000003000000, 80);
	strcpy(f.http_method, "POST");
	assert_int_equal(store_put_flow(s, &f), 0);
	make_flow(&f, 1700000004000000, 443);
	strcpy(f.alpn, "http/1.1");
	assert_int_equal(store_put_flow(s, &f), 0);

	assert_int_equal(store_flush(s, 5000), 0);
	store_stats(s, &stats);
	assert_int_equal(stats.queued, 5);
	assert_int_equal(stats.written, 5);
	assert_int_equal(stats.depth, 0);
	assert_int_equal(stats.rejected, 0);
	assert_int_equal(stats.write_errors, 0);
	assert_true(stats.batches >= 1);

	db = peer_open(fx->path);
	assert_int_equal(sqlite3_prepare_v2(db, "SELECT id, ts, sandbox, proto,"
	    " src_ip, src_port, dst_ip, dst_port, verdict, reason, rule,"
	    " policy_sha256, name, sni, tls_version, alpn, http_method,"
	    " http_host, http_path, app FROM flows ORDER BY id", -1, &st,
	    NULL), SQLITE_OK);

	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	expect_int(st, 0, 1);
	expect_int(st, 1, 1700000000123456);
	expect_text(st, 2, "task-a");
	expect_text(st, 3, "tcp");
	expect_text(st, 4, "10.77.0.2");
	expect_int(st, 5, 51234);
	expect_text(st, 6, "2001:db8::1");
	expect_int(st, 7, 443);
	expect_text(st, 8, "deny");
	expect_text(st, 9, "sni-not-allowed");
	expect_text(st, 10, "*.example.com:443");
	expect_text(st, 11, "eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee"
	    "eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee");
	expect_text(st, 12, "api.example.com");
	expect_text(st, 13, "sni.example.com");
	expect_text(st, 14, "TLS1.3");
	expect_text(st, 15, "h2");
	expect_text(st, 16, "GET");
	expect_text(st, 17, "host.example.com:8080");
	expect_text(st, 18, "/v1/items?q=1");
	expect_text(st, 19, "TLS.Google");

	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	expect_int(st, 0, 2);
	expect_int(st, 1, 1700000001000000);
	expect_null(st, 2);
	expect_text(st, 3, "icmp");
	expect_text(st, 4, "10.77.0.6");
	expect_null(st, 5);
	expect_text(st, 6, "198.51.100.7");
	expect_null(st, 7);
	expect_text(st, 8, "audit");
	expect_text(st, 9, "no-sandbox");
	expect_null(st, 10);
	expect_null(st, 11);
	expect_null(st, 12);
	expect_null(st, 13);
	expect_null(st, 14);
	expect_null(st, 15);
	expect_null(st, 16);
	expect_null(st, 17);
	expect_null(st, 18);
	expect_null(st, 19);

	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	expect_int(st, 0, 3);
	expect_int(st, 5, 0);
	expect_int(st, 7, 0);
	expect_text(st, 8, "allow");
	expect_text(st, 12, longest);
	expect_text(st, 13, full.sni);
	expect_text(st, 14, full.tls_version);
	expect_text(st, 15, full.alpn);
	expect_text(st, 16, full.http_method);
	expect_text(st, 17, full.http_host);
	expect_text(st, 18, full.http_path);
	expect_text(st, 19, full.app);
	assert_int_equal(strlen(full.sni), 255);
	assert_int_equal(strlen(full.app), 47);

	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	expect_int(st, 0, 4);
	expect_null(st, 12);
	expect_null(st, 13);
	expect_null(st, 14);
	expect_null(st, 15);
	expect_text(st, 16, "POST");
	expect_null(st, 17);
	expect_null(st, 18);
	expect_null(st, 19);

	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	expect_int(st, 0, 5);
	expect_null(st, 13);
	expect_null(st, 14);
	expect_text(st, 15, "http/1.1");
	expect_null(st, 16);
	expect_null(st, 17);
	expect_null(st, 18);
	expect_null(st, 19);

	assert_int_equal(sqlite3_step(st), SQLITE_DONE);
	sqlite3_finalize(st);
	sqlite3_close(db);
	store_close(s);
}

static void
test_flow_log_time(void **state)
{
	struct fixture *fx = *state;
	struct store_flow f;
	struct store *s;
	sqlite3 *db;
	char buf[64];

	s = open_ok(fx->path, NULL);
	make_flow(&f, 1700000000123456, 443);
	strcpy(f.name, "example.com");
	strcpy(f.sni, "www.example.com");
	strcpy(f.tls_version, "TLS1.2");
	strcpy(f.alpn, "h2");
	strcpy(f.app, "TLS");
	assert_int_equal(store_put_flow(s, &f), 0);
	make_flow(&f, 0, 80);
	strcpy(f.http_method, "GET");
	strcpy(f.http_host, "example.com");
	strcpy(f.http_path, "/index.html");
	strcpy(f.app, "HTTP");
	assert_int_equal(store_put_flow(s, &f), 0);
	assert_int_equal(store_flush(s, 5000), 0);

	db = peer_open(fx->path);
	assert_string_equal(query_text(db, "SELECT time FROM flow_log"
	    " WHERE dst_port = 443", buf, sizeof(buf)),
	    "2023-11-14T22:13:20.123Z");
	assert_string_equal(query_text(db, "SELECT time FROM flow_log"
	    " WHERE dst_port = 80", buf, sizeof(buf)),
	    "1970-01-01T00:00:00.000Z");
	assert_string_equal(query_text(db, "SELECT sandbox || ' ' || verdict"
	    " || ' ' || reason || ' ' || name FROM flow_log WHERE"
	    " dst_port = 443", buf, sizeof(buf)),
	    "task-a allow sni-allowed example.com");
	assert_string_equal(query_text(db, "SELECT name FROM flow_log WHERE"
	    " dst_port = 80", buf, sizeof(buf)), "NULL");
	assert_string_equal(query_text(db, "SELECT sni || ' ' || tls_version"
	    " || ' ' || alpn || ' ' || coalesce(http_method, '-') || ' ' ||"
	    " coalesce(http_host, '-') || ' ' || coalesce(http_path, '-') ||"
	    " ' ' || app FROM flow_log WHERE dst_port = 443", buf,
	    sizeof(buf)), "www.example.com TLS1.2 h2 - - - TLS");
	assert_string_equal(query_text(db, "SELECT coalesce(sni, '-') || ' '"
	    " || coalesce(tls_version, '-') || ' ' || coalesce(alpn, '-') ||"
	    " ' ' || http_method || ' ' || http_host || ' ' || http_path ||"
	    " ' ' || app FROM flow_log WHERE dst_port = 80", buf,
	    sizeof(buf)),
	    "- - - GET example.com /index.html HTTP");
	sqlite3_close(db);
	store_close(s);
}

static void
test_dns_round_trip(void **state)
{
	struct fixture *fx = *state;
	struct store_dns d;
	struct store_flow f;
	struct store_stats stats;
	struct store *s;
	sqlite3 *db;
	sqlite3_stmt *st;
	char qname[254], answers[400];

	s = open_ok(fx->path, NULL);

	/* Every field set, the strings as long as they may be. */
	memset(&d, 0, sizeof(d));
	d.ts_us = 1700000000123456;
	strcpy(d.sandbox, "task-b");
	d.proto = "tcp";
	strcpy(d.src_ip, "fd00:77::2");
	d.src_port = 65535;
	memset(qname, 'q', sizeof(qname) - 1);
	qname[sizeof(qname) - 1] = '\0';
	strcpy(d.qname, qname);
	strcpy(d.qtype, "TYPE65");
	d.rcode = "NXDOMAIN";
	d.verdict = "deny";
	d.reason = "domain_denied";
	strcpy(d.rule, "ads.example.com");
	memset(answers, 'a', sizeof(answers) - 1);
	answers[sizeof(answers) - 1] = '\0';
	strcpy(d.answers, answers);
	strcpy(d.stripped, "10.0.0.1,fd00::1");
	memset(d.policy_sha256, 'f', 64);
	assert_int_equal(store_put_dns(s, &d), 0);

	/* A flow between two queries: each table keeps its own order. */
	make_flow(&f, 5, 443);
	assert_int_equal(store_put_flow(s, &f), 0);

	/* Every "none" maps to NULL; an empty qname and qtype stay "". */
	memset(&d, 0, sizeof(d));
	d.ts_us = 1700000001000000;
	d.proto = "udp";
	strcpy(d.src_ip, "10.77.0.6");
	d.src_port = -1;
	d.rcode = "";
	d.verdict = "audit";
	d.reason = "malformed_query";
	assert_int_equal(store_put_dns(s, &d), 0);

	/* Port 0 is a port. */
	make_dns(&d, 1700000002000000);
	d.src_port = 0;
	assert_int_equal(store_put_dns(s, &d), 0);

	assert_int_equal(store_flush(s, 5000), 0);
	store_stats(s, &stats);
	assert_int_equal(stats.queued, 4);
	assert_int_equal(stats.written, 4);
	assert_int_equal(stats.rejected, 0);
	assert_int_equal(stats.write_errors, 0);

	db = peer_open(fx->path);
	assert_int_equal(query_int(db, "SELECT count(*) FROM flows"), 1);
	assert_int_equal(sqlite3_prepare_v2(db, "SELECT id, ts, sandbox, proto,"
	    " src_ip, src_port, qname, qtype, rcode, verdict, reason, rule,"
	    " answers, stripped, policy_sha256 FROM dns_queries ORDER BY id",
	    -1, &st, NULL), SQLITE_OK);

	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	expect_int(st, 0, 1);
	expect_int(st, 1, 1700000000123456);
	expect_text(st, 2, "task-b");
	expect_text(st, 3, "tcp");
	expect_text(st, 4, "fd00:77::2");
	expect_int(st, 5, 65535);
	expect_text(st, 6, qname);
	expect_text(st, 7, "TYPE65");
	expect_text(st, 8, "NXDOMAIN");
	expect_text(st, 9, "deny");
	expect_text(st, 10, "domain_denied");
	expect_text(st, 11, "ads.example.com");
	expect_text(st, 12, answers);
	expect_text(st, 13, "10.0.0.1,fd00::1");
	expect_text(st, 14, "ffffffffffffffffffffffffffffffff"
	    "ffffffffffffffffffffffffffffffff");

	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	expect_int(st, 0, 2);
	expect_int(st, 1, 1700000001000000);
	expect_null(st, 2);
	expect_text(st, 3, "udp");
	expect_text(st, 4, "10.77.0.6");
	expect_null(st, 5);
	expect_text(st, 6, "");
	expect_text(st, 7, "");
	expect_null(st, 8);
	expect_text(st, 9, "audit");
	expect_text(st, 10, "malformed_query");
	expect_null(st, 11);
	expect_null(st, 12);
	expect_null(st, 13);
	expect_null(st, 14);

	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	expect_int(st, 0, 3);
	expect_int(st, 1, 1700000002000000);
	expect_text(st, 2, "task-a");
	expect_text(st, 3, "udp");
	expect_text(st, 4, "10.77.0.2");
	expect_int(st, 5, 0);
	expect_text(st, 6, "api.example.com");
	expect_text(st, 7, "A");
	expect_text(st, 8, "NOERROR");
	expect_text(st, 9, "allow");
	expect_text(st, 10, "allowed_domain");
	expect_text(st, 11, "*.example.com");
	expect_text(st, 12, "192.0.2.10,192.0.2.11");
	expect_null(st, 13);
	expect_text(st, 14, "ab");

	assert_int_equal(sqlite3_step(st), SQLITE_DONE);
	sqlite3_finalize(st);

	/* The CHECK holds for rows from elsewhere too. */
	assert_int_not_equal(sqlite3_exec(db, "INSERT INTO dns_queries (ts,"
	    " proto, src_ip, qname, qtype, verdict, reason) VALUES (1, 'udp',"
	    " 'x', 'q', 'A', 'drop', 'r')", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	store_close(s);
}

static void
test_dns_log(void **state)
{
	struct fixture *fx = *state;
	struct store_dns d;
	struct store *s;
	sqlite3 *db;
	sqlite3_stmt *st;
	char buf[64];

	s = open_ok(fx->path, NULL);
	make_dns(&d, 1700000000123456);
	assert_int_equal(store_put_dns(s, &d), 0);
	make_dns(&d, 0);
	strcpy(d.qname, "epoch.example.com");
	d.src_port = -1;
	strcpy(d.rule, "");
	assert_int_equal(store_put_dns(s, &d), 0);
	assert_int_equal(store_flush(s, 5000), 0);

	db = peer_open(fx->path);
	assert_string_equal(query_text(db, "SELECT time FROM dns_log WHERE"
	    " qname = 'epoch.example.com'", buf, sizeof(buf)),
	    "1970-01-01T00:00:00.000Z");
	assert_int_equal(sqlite3_prepare_v2(db, "SELECT * FROM dns_log"
	    " ORDER BY id", -1, &st, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_column_count(st), 15);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	expect_int(st, 0, 1);
	expect_text(st, 1, "2023-11-14T22:13:20.123Z");
	expect_text(st, 2, "task-a");
	expect_text(st, 3, "udp");
	expect_text(st, 4, "10.77.0.2");
	expect_int(st, 5, 53000);
	expect_text(st, 6, "api.example.com");
	expect_text(st, 7, "A");
	expect_text(st, 8, "NOERROR");
	expect_text(st, 9, "allow");
	expect_text(st, 10, "allowed_domain");
	expect_text(st, 11, "*.example.com");
	expect_text(st, 12, "192.0.2.10,192.0.2.11");
	expect_null(st, 13);
	expect_text(st, 14, "ab");
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	expect_int(st, 0, 2);
	expect_null(st, 5);
	expect_null(st, 11);
	assert_int_equal(sqlite3_step(st), SQLITE_DONE);
	sqlite3_finalize(st);
	sqlite3_close(db);
	store_close(s);
}

static void
test_sandboxes_and_policies(void **state)
{
	struct fixture *fx = *state;
	static const char text[] = "{\n  \"allow\": [\"example.com:443\"],\n"
	    "  \"note\": \"dns \\\"only\\\"; 'quoted'\"\n}\n";
	struct store *s;
	sqlite3 *db;
	sqlite3_stmt *st;
	char sha[65];

	s = open_ok(fx->path, NULL);
	assert_int_equal(store_put_sandbox(s, 100, "task-a", "add", "sl-task-a",
	    "10.77.0.2/30"), 0);
	assert_int_equal(store_put_sandbox(s, 200, "task-b", "add", "sl-task-b",
	    "10.77.0.6/30"), 0);
	assert_int_equal(store_put_sandbox(s, 300, "task-a", "del", NULL, NULL),
	    0);
	/* The name is reused: the next delete closes only the new row. */
	assert_int_equal(store_put_sandbox(s, 400, "task-a", "add", "sl-task-a",
	    "10.77.0.10/30"), 0);
	assert_int_equal(store_put_sandbox(s, 500, "task-a", "del", "", ""),
	    0);
	/* Nothing live by that name: no row changes, no error. */
	assert_int_equal(store_put_sandbox(s, 600, "task-a", "del", NULL, NULL),
	    0);
	assert_int_equal(store_put_sandbox(s, 600, "nobody", "del", NULL, NULL),
	    0);
	/* Two live rows of one name (say, a crash lost the "del"): the
	 * newest is closed. */
	assert_int_equal(store_put_sandbox(s, 700, "task-c", "add", "sl-task-c",
	    "10.77.0.14/30"), 0);
	assert_int_equal(store_put_sandbox(s, 710, "task-c", "add", "sl-task-c",
	    "10.77.0.18/30"), 0);
	assert_int_equal(store_put_sandbox(s, 720, "task-c", "del", NULL, NULL),
	    0);

	memset(sha, 'a', 64);
	sha[64] = '\0';
	assert_int_equal(store_put_policy(s, 150, "task-a", sha, text), 0);
	sha[0] = 'b';
	assert_int_equal(store_put_policy(s, 160, "task-b", sha, ""), 0);
	assert_int_equal(store_flush(s, 5000), 0);

	db = peer_open(fx->path);
	assert_int_equal(sqlite3_prepare_v2(db, "SELECT id, name, ifname, addr,"
	    " created_us, deleted_us FROM sandboxes ORDER BY id", -1, &st,
	    NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	expect_int(st, 0, 1);
	expect_text(st, 1, "task-a");
	expect_text(st, 2, "sl-task-a");
	expect_text(st, 3, "10.77.0.2/30");
	expect_int(st, 4, 100);
	expect_int(st, 5, 300);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	expect_int(st, 0, 2);
	expect_text(st, 1, "task-b");
	expect_text(st, 2, "sl-task-b");
	expect_text(st, 3, "10.77.0.6/30");
	expect_int(st, 4, 200);
	expect_null(st, 5);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	expect_int(st, 0, 3);
	expect_text(st, 1, "task-a");
	expect_text(st, 3, "10.77.0.10/30");
	expect_int(st, 4, 400);
	expect_int(st, 5, 500);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	expect_int(st, 0, 4);
	expect_text(st, 3, "10.77.0.14/30");
	expect_int(st, 4, 700);
	expect_null(st, 5);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	expect_int(st, 0, 5);
	expect_text(st, 3, "10.77.0.18/30");
	expect_int(st, 4, 710);
	expect_int(st, 5, 720);
	assert_int_equal(sqlite3_step(st), SQLITE_DONE);
	sqlite3_finalize(st);

	assert_int_equal(sqlite3_prepare_v2(db, "SELECT sandbox, ts, sha256,"
	    " text FROM policies ORDER BY id", -1, &st, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	expect_text(st, 0, "task-a");
	expect_int(st, 1, 150);
	sha[0] = 'a';
	expect_text(st, 2, sha);
	expect_text(st, 3, text);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	expect_text(st, 0, "task-b");
	expect_int(st, 1, 160);
	expect_text(st, 3, "");
	assert_int_equal(sqlite3_step(st), SQLITE_DONE);
	sqlite3_finalize(st);
	sqlite3_close(db);
	store_close(s);
}

static void
test_bad_records_refused(void **state)
{
	struct fixture *fx = *state;
	struct store_flow f;
	struct store_dns d;
	struct store_stats stats;
	struct store *s;
	char longname[100];

	s = open_ok(fx->path, NULL);
	make_flow(&f, 1, 443);
	f.verdict = "drop";	/* would fail the CHECK and jam the queue */
	errno = 0;
	assert_int_equal(store_put_flow(s, &f), -1);
	assert_int_equal(errno, EINVAL);
	make_flow(&f, 1, 65536);
	assert_int_equal(store_put_flow(s, &f), -1);
	assert_int_equal(errno, EINVAL);
	make_flow(&f, 1, 443);
	f.src_port = -2;
	assert_int_equal(store_put_flow(s, &f), -1);
	make_flow(&f, 1, 443);
	memset(f.rule, 'r', sizeof(f.rule));	/* not terminated */
	assert_int_equal(store_put_flow(s, &f), -1);
	assert_int_equal(errno, EINVAL);
	make_flow(&f, 1, 443);
	f.reason = NULL;
	assert_int_equal(store_put_flow(s, &f), -1);
	make_flow(&f, 1, 443);
	memset(f.name, 'n', sizeof(f.name));
	errno = 0;
	assert_int_equal(store_put_flow(s, &f), -1);
	assert_int_equal(errno, EINVAL);
	/* Each first-flight string, not terminated. */
	make_flow(&f, 1, 443);
	memset(f.sni, 'x', sizeof(f.sni));
	errno = 0;
	assert_int_equal(store_put_flow(s, &f), -1);
	assert_int_equal(errno, EINVAL);
	make_flow(&f, 1, 443);
	memset(f.tls_version, 'x', sizeof(f.tls_version));
	errno = 0;
	assert_int_equal(store_put_flow(s, &f), -1);
	assert_int_equal(errno, EINVAL);
	make_flow(&f, 1, 443);
	memset(f.alpn, 'x', sizeof(f.alpn));
	errno = 0;
	assert_int_equal(store_put_flow(s, &f), -1);
	assert_int_equal(errno, EINVAL);
	make_flow(&f, 1, 443);
	memset(f.http_method, 'x', sizeof(f.http_method));
	errno = 0;
	assert_int_equal(store_put_flow(s, &f), -1);
	assert_int_equal(errno, EINVAL);
	make_flow(&f, 1, 443);
	memset(f.http_host, 'x', sizeof(f.http_host));
	errno = 0;
	assert_int_equal(store_put_flow(s, &f), -1);
	assert_int_equal(errno, EINVAL);
	make_flow(&f, 1, 443);
	memset(f.http_path, 'x', sizeof(f.http_path));
	errno = 0;
	assert_int_equal(store_put_flow(s, &f), -1);
	assert_int_equal(errno, EINVAL);
	make_flow(&f, 1, 443);
	memset(f.app, 'x', sizeof(f.app));
	errno = 0;
	assert_int_equal(store_put_flow(s, &f), -1);
	assert_int_equal(errno, EINVAL);

	make_dns(&d, 1);
	d.verdict = "drop";
	errno = 0;
	assert_int_equal(store_put_dns(s, &d), -1);
	assert_int_equal(errno, EINVAL);
	make_dns(&d, 1);
	d.verdict = NULL;
	errno = 0;
	assert_int_equal(store_put_dns(s, &d), -1);
	assert_int_equal(errno, EINVAL);
	make_dns(&d, 1);
	d.proto = NULL;
	errno = 0;
	assert_int_equal(store_put_dns(s, &d), -1);
	assert_int_equal(errno, EINVAL);
	make_dns(&d, 1);
	d.reason = NULL;
	errno = 0;
	assert_int_equal(store_put_dns(s, &d), -1);
	assert_int_equal(errno, EINVAL);
	make_dns(&d, 1);
	d.rcode = NULL;		/* "" is the way to say none */
	errno = 0;
	assert_int_equal(store_put_dns(s, &d), -1);
	assert_int_equal(errno, EINVAL);
	make_dns(&d, 1);
	d.src_port = -2;
	errno = 0;
	assert_int_equal(store_put_dns(s, &d), -1);
	assert_int_equal(errno, EINVAL);
	make_dns(&d, 1);
	d.src_port = 65536;
	errno = 0;
	assert_int_equal(store_put_dns(s, &d), -1);
	assert_int_equal(errno, EINVAL);
	/* Each fixed string, not terminated. */
	make_dns(&d, 1);
	memset(d.sandbox, 'x', sizeof(d.sandbox));
	assert_int_equal(store_put_dns(s, &d), -1);
	make_dns(&d, 1);
	memset(d.src_ip, 'x', sizeof(d.src_ip));
	assert_int_equal(store_put_dns(s, &d), -1);
	make_dns(&d, 1);
	memset(d.qname, 'x', sizeof(d.qname));
	assert_int_equal(store_put_dns(s, &d), -1);
	make_dns(&d, 1);
	memset(d.qtype, 'x', sizeof(d.qtype));
	assert_int_equal(store_put_dns(s, &d), -1);
	make_dns(&d, 1);
	memset(d.rule, 'x', sizeof(d.rule));
	assert_int_equal(store_put_dns(s, &d), -1);
	make_dns(&d, 1);
	memset(d.answers, 'x', sizeof(d.answers));
	assert_int_equal(store_put_dns(s, &d), -1);
	make_dns(&d, 1);
	memset(d.stripped, 'x', sizeof(d.stripped));
	assert_int_equal(store_put_dns(s, &d), -1);
	make_dns(&d, 1);
	memset(d.policy_sha256, 'x', sizeof(d.policy_sha256));
	errno = 0;
	assert_int_equal(store_put_dns(s, &d), -1);
	assert_int_equal(errno, EINVAL);
	errno = 0;
	assert_int_equal(store_put_dns(s, NULL), -1);
	assert_int_equal(errno, EINVAL);
	make_dns(&d, 1);
	assert_int_equal(store_put_dns(NULL, &d), -1);

	assert_int_equal(store_put_sandbox(s, 1, "a", "rename", "x", "y"), -1);
	assert_int_equal(errno, EINVAL);
	assert_int_equal(store_put_sandbox(s, 1, "", "add", "x", "y"), -1);
	memset(longname, 'n', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	assert_int_equal(store_put_sandbox(s, 1, longname, "add", "x", "y"),
	    -1);
	assert_int_equal(errno, EINVAL);
	assert_int_equal(store_put_policy(s, 1, "a", "ab", NULL), -1);
	assert_int_equal(errno, EINVAL);
	assert_int_equal(store_put_flow(NULL, &f), -1);

	store_stats(s, &stats);
	assert_int_equal(stats.queued, 0);
	assert_int_equal(stats.rejected, 0);
	store_close(s);
	assert_int_equal(path_count(fx->path, "SELECT (SELECT count(*) FROM"
	    " flows) + (SELECT count(*) FROM sandboxes) + (SELECT count(*)"
	    " FROM dns_queries)"), 0);
}

/* A second connection holds the write lock: the queue fills, nothing is lost. */
static void
test_queue_full_then_recovers(void **state)
{
	struct fixture *fx = *state;
	struct store_opts opts = { .queue_cap = 4, .batch_max = 2,
	    .flush_ms = 5 };
	struct store_flow f;
	struct store_dns d;
	struct store_stats stats;
	struct store *s;
	sqlite3 *lock;
	int i;

	s = open_ok(fx->path, &opts);
	lock = peer_open(fx->path);
	peer_exec(lock, "BEGIN EXCLUSIVE");

	for (i = 0; i < 2; i++) {
		make_flow(&f, 1000 + i, 443);
		assert_int_equal(store_put_flow(s, &f), 0);
	}
	make_dns(&d, 1002);
	assert_int_equal(store_put_dns(s, &d), 0);
	/* Its text must survive the failed attempts (ASan watches). */
	assert_int_equal(store_put_policy(s, 1003, "task-a", "cd",
	    "policy text"), 0);
	assert_false(store_has_room(s, 1));
	assert_true(store_has_room(s, 0));

	make_flow(&f, 2000, 443);
	errno = 0;
	assert_int_equal(store_put_flow(s, &f), -1);
	assert_int_equal(errno, ENOBUFS);
	errno = 0;
	assert_int_equal(store_put_policy(s, 2001, "task-a", "cd", "x"), -1);
	assert_int_equal(errno, ENOBUFS);
	errno = 0;
	assert_int_equal(store_put_sandbox(s, 2002, "task-a", "add", "i",
	    "a"), -1);
	assert_int_equal(errno, ENOBUFS);
	make_dns(&d, 2003);
	errno = 0;
	assert_int_equal(store_put_dns(s, &d), -1);
	assert_int_equal(errno, ENOBUFS);

	wait_write_error(s);
	errno = 0;
	assert_int_equal(store_flush(s, 50), -1);
	assert_int_equal(errno, ETIMEDOUT);
	store_stats(s, &stats);
	assert_int_equal(stats.queued, 4);
	assert_int_equal(stats.rejected, 4);
	assert_int_equal(stats.written, 0);
	assert_int_equal(stats.depth, 4);
	assert_true(stats.write_errors > 0);

	peer_exec(lock, "COMMIT");
	sqlite3_close(lock);

	assert_int_equal(store_flush(s, 10000), 0);
	store_stats(s, &stats);
	assert_int_equal(stats.queued, 4);
	assert_int_equal(stats.written, 4);
	assert_int_equal(stats.depth, 0);
	assert_int_equal(stats.rejected, 4);
	assert_true(stats.write_errors > 0);
	assert_true(store_has_room(s, 4));
	assert_false(store_has_room(s, 5));

	/* And it keeps working afterwards. */
	make_flow(&f, 3000, 443);
	assert_int_equal(store_put_flow(s, &f), 0);
	assert_int_equal(store_flush(s, 10000), 0);
	store_close(s);

	assert_int_equal(path_count(fx->path, "SELECT count(*) FROM flows"), 3);
	assert_int_equal(path_count(fx->path, "SELECT sum(ts) FROM flows"),
	    1000 + 1001 + 3000);
	assert_int_equal(path_count(fx->path, "SELECT count(*) FROM"
	    " dns_queries WHERE ts = 1002 AND qname = 'api.example.com'"), 1);
	assert_int_equal(path_count(fx->path, "SELECT count(*) FROM"
	    " dns_queries"), 1);
	assert_int_equal(path_count(fx->path, "SELECT count(*) FROM policies"
	    " WHERE text = 'policy text' AND ts = 1003"), 1);
	assert_int_equal(path_count(fx->path, "SELECT count(*) FROM"
	    " sandboxes"), 0);
}

/* store_close gives up on a locked database after its grace period. */
static void
test_close_while_locked(void **state)
{
	struct fixture *fx = *state;
	struct store_opts opts = { .queue_cap = 8, .flush_ms = 5 };
	struct store_flow f;
	struct store_dns d;
	struct store *s;
	sqlite3 *lock;
	struct timespec t0, t1;
	double secs;

	s = open_ok(fx->path, &opts);
	lock = peer_open(fx->path);
	peer_exec(lock, "BEGIN EXCLUSIVE");
	make_flow(&f, 1, 443);
	assert_int_equal(store_put_flow(s, &f), 0);
	assert_int_equal(store_put_policy(s, 2, "a", "b", "lost text"), 0);
	make_dns(&d, 3);
	assert_int_equal(store_put_dns(s, &d), 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	store_close(s);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	secs = (double)(t1.tv_sec - t0.tv_sec) +
	    (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	assert_true(secs >= 1.9 && secs < 4.0);
	peer_exec(lock, "COMMIT");
	sqlite3_close(lock);
	assert_int_equal(path_count(fx->path, "SELECT (SELECT count(*) FROM"
	    " flows) + (SELECT count(*) FROM dns_queries)"), 0);
}

static void
wait_written(struct store *s, uint64_t n)
{
	struct store_stats st;
	int i;

	for (i = 0; i < 200; i++) {
		store_stats(s, &st);
		if (st.written == n)
			return;
		usleep(10000);
	}
	fail_msg("written stayed at %llu, not %llu",
	    (unsigned long long)st.written, (unsigned long long)n);
}

/* When the writer writes without being asked: flush_ms, a full batch. */
static void
test_writer_wakes(void **state)
{
	struct fixture *fx = *state;
	struct store_opts quick = { .flush_ms = 20 };
	struct store_opts slow = { .flush_ms = 600000, .batch_max = 4 };
	struct store_flow f;
	struct store *s;
	int i;

	/* A lone record goes out after flush_ms. */
	s = open_ok(fx->path, &quick);
	usleep(50000);	/* the writer is asleep on an empty queue */
	make_flow(&f, 1, 443);
	assert_int_equal(store_put_flow(s, &f), 0);
	wait_written(s, 1);
	store_close(s);

	/* A full batch goes out at once; a partial one waits... */
	s = open_ok(fx->path, &slow);
	usleep(50000);
	for (i = 0; i < 5; i++) {
		make_flow(&f, 2 + i, 443);
		assert_int_equal(store_put_flow(s, &f), 0);
	}
	wait_written(s, 4);
	usleep(100000);
	wait_written(s, 4);
	/* ...unless store_flush asks for it. */
	assert_int_equal(store_flush(s, 2000), 0);
	wait_written(s, 5);
	store_close(s);
	assert_int_equal(path_count(fx->path, "SELECT count(*) FROM flows"), 6);
}

/* WAL: a reader's open snapshot does not hold the writer up. */
static void
test_reader_does_not_block(void **state)
{
	struct fixture *fx = *state;
	struct store_flow f;
	struct store_stats stats;
	struct store *s;
	sqlite3 *rd;
	int i;

	s = open_ok(fx->path, NULL);
	make_flow(&f, 1, 443);
	assert_int_equal(store_put_flow(s, &f), 0);
	assert_int_equal(store_flush(s, 5000), 0);

	rd = peer_open(fx->path);
	peer_exec(rd, "BEGIN");
	assert_int_equal(query_int(rd, "SELECT count(*) FROM flows"), 1);

	for (i = 0; i < 1000; i++) {
		make_flow(&f, 2 + i, 443);
		assert_int_equal(store_put_flow(s, &f), 0);
	}
	assert_int_equal(store_flush(s, 5000), 0);
	store_stats(s, &stats);
	assert_int_equal(stats.written, 1001);
	assert_int_equal(stats.write_errors, 0);

	/* The reader still sees its snapshot, then the new rows. */
	assert_int_equal(query_int(rd, "SELECT count(*) FROM flows"), 1);
	peer_exec(rd, "COMMIT");
	assert_int_equal(query_int(rd, "SELECT count(*) FROM flows"), 1001);
	sqlite3_close(rd);
	store_close(s);
}

/* A version 3 database opens as it is. */
static void
test_reopen_keeps_rows(void **state)
{
	struct fixture *fx = *state;
	struct store_flow f;
	struct store_dns d;
	struct store *s;
	sqlite3 *db;
	char before[8192], after[8192];

	s = open_ok(fx->path, NULL);
	make_flow(&f, 1, 443);
	strcpy(f.sni, "example.com");
	assert_int_equal(store_put_flow(s, &f), 0);
	make_dns(&d, 1);
	assert_int_equal(store_put_dns(s, &d), 0);
	assert_int_equal(store_put_sandbox(s, 1, "task-a", "add", "sl-task-a",
	    "10.77.0.2/30"), 0);
	store_close(s);	/* flushes */
	assert_int_equal(path_count(fx->path, "SELECT count(*) FROM flows"), 1);
	db = peer_open(fx->path);
	schema_shape(db, before, sizeof(before));
	sqlite3_close(db);

	s = open_ok(fx->path, NULL);
	make_flow(&f, 2, 80);
	assert_int_equal(store_put_flow(s, &f), 0);
	make_dns(&d, 2);
	strcpy(d.qname, "second.example.com");
	assert_int_equal(store_put_dns(s, &d), 0);
	assert_int_equal(store_put_sandbox(s, 3, "task-a", "del", NULL, NULL),
	    0);
	store_close(s);

	db = peer_open(fx->path);
	assert_string_equal(schema_shape(db, after, sizeof(after)), before);
	sqlite3_close(db);
	assert_int_equal(path_count(fx->path, "SELECT count(*) FROM"
	    " dns_queries"), 2);
	assert_int_equal(path_count(fx->path, "SELECT ts FROM dns_queries"
	    " WHERE qname = 'second.example.com'"), 2);

	assert_int_equal(path_count(fx->path, "SELECT count(*) FROM flows"), 2);
	assert_int_equal(path_count(fx->path, "SELECT sum(dst_port) FROM"
	    " flows"), 443 + 80);
	assert_int_equal(path_count(fx->path, "SELECT ts FROM flows WHERE"
	    " sni = 'example.com'"), 1);
	assert_int_equal(path_count(fx->path, "SELECT deleted_us FROM"
	    " sandboxes WHERE name = 'task-a'"), 3);
	assert_int_equal(path_count(fx->path, "PRAGMA user_version"), 3);
}

/*
 * The SQL text of every object but the table flows, which an upgrade
 * ALTERs: views and indexes must read exactly as a new database's.
 */
static const char *
object_sql(sqlite3 *db, char *buf, size_t len)
{
	query_text(db, "SELECT group_concat(name || ': ' || sql, ';') FROM"
	    " (SELECT name, sql FROM sqlite_schema WHERE name NOT LIKE"
	    " 'sqlite_%' AND name != 'flows' ORDER BY name)", buf, len);
	assert_true(strlen(buf) < len - 1);	/* not cut short */
	return buf;
}

/* What a new database looks like, to compare an upgraded one with. */
static void
fresh_shape(const char *dir, char *shape, size_t shapelen, char *sql,
    size_t sqllen)
{
	char fresh[192];
	sqlite3 *db;

	snprintf(fresh, sizeof(fresh), "%s/fresh.db", dir);
	store_close(open_ok(fresh, NULL));
	db = peer_open(fresh);
	schema_shape(db, shape, shapelen);
	object_sql(db, sql, sqllen);
	sqlite3_close(db);
}

/* The first-flight columns, from column first on, are all NULL. */
static void
expect_no_first_flight(sqlite3_stmt *st, int first)
{
	int i;

	for (i = 0; i < 7; i++)
		expect_null(st, first + i);
}

/* A database as sluice version 1 left it: WAL, rows in every table. */
static void
make_v1(const char *path)
{
	sqlite3 *db = peer_open(path);
	char buf[16];

	assert_string_equal(query_text(db, "PRAGMA journal_mode = WAL", buf,
	    sizeof(buf)), "wal");
	peer_exec(db, "BEGIN");
	peer_exec(db, v1_schema_sql);
	peer_exec(db, "PRAGMA user_version = 1");
	peer_exec(db, "INSERT INTO sandboxes (name, ifname, addr, created_us)"
	    " VALUES ('task-a', 'sl-task-a', '10.77.0.2/30', 100)");
	peer_exec(db, "INSERT INTO policies (sandbox, ts, sha256, text) VALUES"
	    " ('task-a', 150, 'aa', '{}')");
	peer_exec(db, "INSERT INTO flows (ts, sandbox, proto, src_ip, src_port,"
	    " dst_ip, dst_port, verdict, reason, rule, policy_sha256) VALUES"
	    " (1700000000123456, 'task-a', 'tcp', '10.77.0.2', 40000,"
	    " '192.0.2.10', 443, 'allow', 'allowed_cidr', '192.0.2.0/24:443',"
	    " 'aa'), (1700000001000000, NULL, 'icmp', '10.77.0.6', NULL,"
	    " '198.51.100.7', NULL, 'deny', 'unknown_sandbox', NULL, NULL)");
	peer_exec(db, "COMMIT");
	sqlite3_close(db);
}

static void
test_upgrade_from_v1(void **state)
{
	struct fixture *fx = *state;
	struct store_flow f;
	struct store_dns d;
	struct store *s;
	sqlite3 *db;
	sqlite3_stmt *st;
	char buf[512], want[8192], got[8192], want_sql[8192], got_sql[8192];

	fresh_shape(fx->dir, want, sizeof(want), want_sql, sizeof(want_sql));
	make_v1(fx->path);
	s = open_ok(fx->path, NULL);

	db = peer_open(fx->path);
	assert_int_equal(query_int(db, "PRAGMA user_version"), 3);
	assert_string_equal(schema_shape(db, got, sizeof(got)), want);
	assert_string_equal(object_sql(db, got_sql, sizeof(got_sql)),
	    want_sql);
	assert_string_equal(columns(db, "flow_log", buf, sizeof(buf)),
	    "id,time,sandbox,proto,src_ip,src_port,dst_ip,dst_port,verdict,"
	    "reason,rule,policy_sha256,name," V3_COLUMNS);
	assert_int_equal(query_int(db, "SELECT count(*) FROM dns_queries"), 0);

	/* The old rows, untouched, with no name and no first flight. */
	assert_int_equal(sqlite3_prepare_v2(db, "SELECT id, ts, sandbox, proto,"
	    " src_ip, src_port, dst_ip, dst_port, verdict, reason, rule,"
	    " policy_sha256, name, sni, tls_version, alpn, http_method,"
	    " http_host, http_path, app FROM flows ORDER BY id", -1, &st,
	    NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	expect_int(st, 0, 1);
	expect_int(st, 1, 1700000000123456);
	expect_text(st, 2, "task-a");
	expect_text(st, 3, "tcp");
	expect_text(st, 4, "10.77.0.2");
	expect_int(st, 5, 40000);
	expect_text(st, 6, "192.0.2.10");
	expect_int(st, 7, 443);
	expect_text(st, 8, "allow");
	expect_text(st, 9, "allowed_cidr");
	expect_text(st, 10, "192.0.2.0/24:443");
	expect_text(st, 11, "aa");
	expect_null(st, 12);
	expect_no_first_flight(st, 13);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	expect_int(st, 0, 2);
	expect_null(st, 2);
	expect_null(st, 5);
	expect_null(st, 7);
	expect_text(st, 9, "unknown_sandbox");
	expect_null(st, 10);
	expect_null(st, 11);
	expect_null(st, 12);
	expect_no_first_flight(st, 13);
	assert_int_equal(sqlite3_step(st), SQLITE_DONE);
	sqlite3_finalize(st);
	assert_string_equal(query_text(db, "SELECT time || ' ' || verdict ||"
	    " ' ' || coalesce(name, 'NULL') || ' ' || coalesce(sni, 'NULL')"
	    " FROM flow_log WHERE id = 1", buf, sizeof(buf)),
	    "2023-11-14T22:13:20.123Z allow NULL NULL");
	assert_string_equal(query_text(db, "SELECT name || ' ' || ifname ||"
	    " ' ' || addr || ' ' || created_us FROM sandboxes", buf,
	    sizeof(buf)), "task-a sl-task-a 10.77.0.2/30 100");
	assert_string_equal(query_text(db, "SELECT sandbox || ' ' || ts ||"
	    " ' ' || sha256 || ' ' || text FROM policies", buf, sizeof(buf)),
	    "task-a 150 aa {}");
	sqlite3_close(db);

	/* New rows go on from there. */
	make_flow(&f, 3, 443);
	strcpy(f.name, "example.com");
	strcpy(f.sni, "www.example.com");
	strcpy(f.app, "TLS");
	assert_int_equal(store_put_flow(s, &f), 0);
	make_dns(&d, 4);
	assert_int_equal(store_put_dns(s, &d), 0);
	store_close(s);

	db = peer_open(fx->path);
	assert_string_equal(query_text(db, "SELECT id || ' ' || name || ' ' ||"
	    " sni || ' ' || app FROM flow_log WHERE id = 3", buf,
	    sizeof(buf)), "3 example.com www.example.com TLS");
	assert_string_equal(query_text(db, "SELECT id || ' ' || qname || ' ' ||"
	    " time FROM dns_log", buf, sizeof(buf)),
	    "1 api.example.com 1970-01-01T00:00:00.000Z");
	assert_int_equal(query_int(db, "SELECT count(*) FROM flows"), 3);
	sqlite3_close(db);

	/* And the upgraded file opens as is from then on. */
	store_close(open_ok(fx->path, NULL));
	db = peer_open(fx->path);
	assert_string_equal(schema_shape(db, got, sizeof(got)), want);
	assert_int_equal(query_int(db, "PRAGMA user_version"), 3);
	sqlite3_close(db);
}

/* A database as sluice version 2 left it: WAL, rows in every table. */
static void
make_v2(const char *path)
{
	sqlite3 *db = peer_open(path);
	char buf[16];

	assert_string_equal(query_text(db, "PRAGMA journal_mode = WAL", buf,
	    sizeof(buf)), "wal");
	peer_exec(db, "BEGIN");
	peer_exec(db, v2_schema_sql);
	peer_exec(db, "PRAGMA user_version = 2");
	peer_exec(db, "INSERT INTO sandboxes (name, ifname, addr, created_us,"
	    " deleted_us) VALUES ('task-a', 'sl-task-a', '10.77.0.2/30', 100,"
	    " 900)");
	peer_exec(db, "INSERT INTO policies (sandbox, ts, sha256, text) VALUES"
	    " ('task-a', 150, 'aa', '{}')");
	peer_exec(db, "INSERT INTO flows (ts, sandbox, proto, src_ip, src_port,"
	    " dst_ip, dst_port, verdict, reason, rule, policy_sha256, name)"
	    " VALUES (1700000000123456, 'task-a', 'tcp', '10.77.0.2', 40000,"
	    " '192.0.2.10', 443, 'allow', 'allowed_domain',"
	    " '*.example.com:443', 'aa', 'api.example.com'),"
	    " (1700000001000000, NULL, 'icmp', '10.77.0.6', NULL,"
	    " '198.51.100.7', NULL, 'deny', 'unknown_sandbox', NULL, NULL,"
	    " NULL)");
	peer_exec(db, "INSERT INTO dns_queries (ts, sandbox, proto, src_ip,"
	    " src_port, qname, qtype, rcode, verdict, reason, rule, answers,"
	    " stripped, policy_sha256) VALUES (1700000000000000, 'task-a',"
	    " 'udp', '10.77.0.2', 53000, 'api.example.com', 'A', 'NOERROR',"
	    " 'allow', 'allowed_domain', '*.example.com', '192.0.2.10', NULL,"
	    " 'aa')");
	peer_exec(db, "COMMIT");
	sqlite3_close(db);
}

static void
test_upgrade_from_v2(void **state)
{
	struct fixture *fx = *state;
	struct store_flow f;
	struct store *s;
	sqlite3 *db;
	sqlite3_stmt *st;
	char buf[512], want[8192], got[8192], want_sql[8192], got_sql[8192];

	fresh_shape(fx->dir, want, sizeof(want), want_sql, sizeof(want_sql));
	make_v2(fx->path);
	s = open_ok(fx->path, NULL);

	db = peer_open(fx->path);
	assert_int_equal(query_int(db, "PRAGMA user_version"), 3);
	assert_string_equal(schema_shape(db, got, sizeof(got)), want);
	assert_string_equal(object_sql(db, got_sql, sizeof(got_sql)),
	    want_sql);
	assert_string_equal(columns(db, "flows", buf, sizeof(buf)),
	    "id,ts,sandbox,proto,src_ip,src_port,dst_ip,dst_port,verdict,"
	    "reason,rule,policy_sha256,name," V3_COLUMNS);
	assert_string_equal(columns(db, "flow_log", buf, sizeof(buf)),
	    "id,time,sandbox,proto,src_ip,src_port,dst_ip,dst_port,verdict,"
	    "reason,rule,policy_sha256,name," V3_COLUMNS);

	/* The old rows, untouched, with no first flight. */
	assert_int_equal(sqlite3_prepare_v2(db, "SELECT * FROM flows ORDER BY"
	    " id", -1, &st, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_column_count(st), 20);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	expect_int(st, 0, 1);
	expect_int(st, 1, 1700000000123456);
	expect_text(st, 2, "task-a");
	expect_text(st, 3, "tcp");
	expect_text(st, 4, "10.77.0.2");
	expect_int(st, 5, 40000);
	expect_text(st, 6, "192.0.2.10");
	expect_int(st, 7, 443);
	expect_text(st, 8, "allow");
	expect_text(st, 9, "allowed_domain");
	expect_text(st, 10, "*.example.com:443");
	expect_text(st, 11, "aa");
	expect_text(st, 12, "api.example.com");
	expect_no_first_flight(st, 13);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	expect_int(st, 0, 2);
	expect_int(st, 1, 1700000001000000);
	expect_null(st, 2);
	expect_text(st, 3, "icmp");
	expect_null(st, 5);
	expect_null(st, 7);
	expect_text(st, 8, "deny");
	expect_null(st, 10);
	expect_null(st, 11);
	expect_null(st, 12);
	expect_no_first_flight(st, 13);
	assert_int_equal(sqlite3_step(st), SQLITE_DONE);
	sqlite3_finalize(st);

	assert_int_equal(sqlite3_prepare_v2(db, "SELECT * FROM flow_log ORDER"
	    " BY id", -1, &st, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_column_count(st), 20);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	expect_int(st, 0, 1);
	expect_text(st, 1, "2023-11-14T22:13:20.123Z");
	expect_text(st, 12, "api.example.com");
	expect_no_first_flight(st, 13);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	expect_int(st, 0, 2);
	assert_int_equal(sqlite3_step(st), SQLITE_DONE);
	sqlite3_finalize(st);

	assert_string_equal(query_text(db, "SELECT id || ' ' || time || ' ' ||"
	    " qname || ' ' || answers || ' ' || coalesce(stripped, 'NULL')"
	    " FROM dns_log", buf, sizeof(buf)), "1 2023-11-14T22:13:20.000Z"
	    " api.example.com 192.0.2.10 NULL");
	assert_string_equal(query_text(db, "SELECT name || ' ' || created_us ||"
	    " ' ' || deleted_us FROM sandboxes", buf, sizeof(buf)),
	    "task-a 100 900");
	assert_string_equal(query_text(db, "SELECT sandbox || ' ' || ts ||"
	    " ' ' || sha256 || ' ' || text FROM policies", buf, sizeof(buf)),
	    "task-a 150 aa {}");
	sqlite3_close(db);

	/* New rows go on from there, with their first flight. */
	make_flow(&f, 3, 80);
	strcpy(f.http_method, "GET");
	strcpy(f.http_host, "example.com");
	strcpy(f.http_path, "/");
	assert_int_equal(store_put_flow(s, &f), 0);
	store_close(s);

	db = peer_open(fx->path);
	assert_string_equal(query_text(db, "SELECT id || ' ' || http_method ||"
	    " ' ' || http_host || ' ' || http_path || ' ' ||"
	    " coalesce(sni, 'NULL') FROM flow_log WHERE id = 3", buf,
	    sizeof(buf)), "3 GET example.com / NULL");
	assert_int_equal(query_int(db, "SELECT count(*) FROM flows"), 3);
	assert_int_equal(query_int(db, "SELECT count(*) FROM dns_queries"), 1);
	sqlite3_close(db);

	store_close(open_ok(fx->path, NULL));
	db = peer_open(fx->path);
	assert_string_equal(schema_shape(db, got, sizeof(got)), want);
	assert_int_equal(query_int(db, "PRAGMA user_version"), 3);
	sqlite3_close(db);
}

/* Opens path expecting an upgrade failure with the message want_msg. */
static void
expect_upgrade_error(const char *path, const char *want_msg)
{
	char err[512], want[512];

	err[0] = '\0';
	assert_null(store_open(path, NULL, err, sizeof(err)));
	snprintf(want, sizeof(want), "%s: %s", path, want_msg);
	assert_string_equal(err, want);
}

/* An upgrade that fails half way leaves the old version as it was. */
static void
test_upgrade_is_one_transaction(void **state)
{
	struct fixture *fx = *state;
	char before[8192], after[8192];
	sqlite3 *db;

	make_v1(fx->path);
	/* An operator's own view by a name version 2 wants, made last. */
	db = peer_open(fx->path);
	peer_exec(db, "CREATE VIEW dns_log AS SELECT 1 AS mine");
	schema_shape(db, before, sizeof(before));
	sqlite3_close(db);

	expect_upgrade_error(fx->path, "cannot upgrade the schema from"
	    " version 1: view dns_log already exists");

	db = peer_open(fx->path);
	assert_int_equal(query_int(db, "PRAGMA user_version"), 1);
	assert_string_equal(schema_shape(db, after, sizeof(after)), before);
	assert_int_equal(query_int(db, "SELECT count(*) FROM pragma_table_info"
	    "('flows') WHERE name = 'name'"), 0);
	assert_int_equal(query_int(db, "SELECT count(*) FROM sqlite_schema"
	    " WHERE name IN ('dns_queries', 'flows_name')"), 0);
	assert_int_equal(query_int(db, "SELECT count(*) FROM flows"), 2);

	/* Once the operator moves it aside, the upgrade goes through. */
	peer_exec(db, "DROP VIEW dns_log");
	sqlite3_close(db);
	store_close(open_ok(fx->path, NULL));
	assert_int_equal(path_count(fx->path, "PRAGMA user_version"), 3);
	assert_int_equal(path_count(fx->path, "SELECT count(*) FROM flows"
	    " WHERE name IS NULL AND sni IS NULL AND app IS NULL"), 2);
}

/* Version 2 with an index by the name version 3 wants: left as it was. */
static void
test_upgrade_v2_is_one_transaction(void **state)
{
	struct fixture *fx = *state;
	char before[8192], after[8192];
	sqlite3 *db;

	make_v2(fx->path);
	db = peer_open(fx->path);
	peer_exec(db, "CREATE INDEX flows_sni ON flows(rule)");
	schema_shape(db, before, sizeof(before));
	sqlite3_close(db);

	expect_upgrade_error(fx->path, "cannot upgrade the schema from"
	    " version 2: index flows_sni already exists");

	db = peer_open(fx->path);
	assert_int_equal(query_int(db, "PRAGMA user_version"), 2);
	assert_string_equal(schema_shape(db, after, sizeof(after)), before);
	assert_int_equal(query_int(db, "SELECT count(*) FROM pragma_table_info"
	    "('flows') WHERE name IN ('sni', 'app')"), 0);
	assert_int_equal(query_int(db, "SELECT count(*) FROM pragma_table_info"
	    "('flow_log')"), 13);
	assert_int_equal(query_int(db, "SELECT count(*) FROM flows"), 2);
	peer_exec(db, "DROP INDEX flows_sni");
	sqlite3_close(db);

	store_close(open_ok(fx->path, NULL));
	assert_int_equal(path_count(fx->path, "PRAGMA user_version"), 3);
	assert_int_equal(path_count(fx->path, "SELECT count(*) FROM"
	    " pragma_index_info('flows_sni') WHERE name = 'sni'"), 1);
}

/*
 * Version 1 -> 3 is one transaction too: when the second step fails, the
 * first one, which worked, is undone with it.
 */
static void
test_upgrade_chain_is_one_transaction(void **state)
{
	struct fixture *fx = *state;
	char before[8192], after[8192];
	sqlite3 *db;

	make_v1(fx->path);
	db = peer_open(fx->path);
	peer_exec(db, "CREATE INDEX flows_sni ON flows(rule)");
	schema_shape(db, before, sizeof(before));
	sqlite3_close(db);

	expect_upgrade_error(fx->path, "cannot upgrade the schema from"
	    " version 2: index flows_sni already exists");

	db = peer_open(fx->path);
	assert_int_equal(query_int(db, "PRAGMA user_version"), 1);
	assert_string_equal(schema_shape(db, after, sizeof(after)), before);
	assert_int_equal(query_int(db, "SELECT count(*) FROM sqlite_schema"
	    " WHERE name IN ('dns_queries', 'dns_log', 'flows_name')"), 0);
	assert_int_equal(query_int(db, "SELECT count(*) FROM pragma_table_info"
	    "('flows') WHERE name = 'name'"), 0);
	assert_int_equal(query_int(db, "SELECT count(*) FROM flows"), 2);
	sqlite3_close(db);
}
static void
test_newer_schema_refused(void **state)
{
	struct fixture *fx = *state;
	char err[512], want[512], buf[32];
	sqlite3 *db;

	db = peer_open(fx->path);
	peer_exec(db, "CREATE TABLE flows (x); PRAGMA user_version = 4");
	sqlite3_close(db);

	assert_null(store_open(fx->path, NULL, err, sizeof(err)));
	snprintf(want, sizeof(want), "%s: database schema version 4 is newer"
	    " than this sluice (3)", fx->path);
	assert_string_equal(err, want);

	/* Refused before anything was changed. */
	db = peer_open(fx->path);
	assert_string_equal(query_text(db, "PRAGMA journal_mode", buf,
	    sizeof(buf)), "delete");
	assert_int_equal(query_int(db, "PRAGMA user_version"), 4);
	sqlite3_close(db);
}

static void
test_foreign_db_refused(void **state)
{
	struct fixture *fx = *state;
	char err[512], want[512];
	sqlite3 *db;

	db = peer_open(fx->path);
	peer_exec(db, "CREATE TABLE accounts (id INTEGER PRIMARY KEY)");
	sqlite3_close(db);
	assert_null(store_open(fx->path, NULL, err, sizeof(err)));
	snprintf(want, sizeof(want), "%s: not a sluice database"
	    " (user_version 0 but it has tables)", fx->path);
	assert_string_equal(err, want);
}

static void
test_not_a_database(void **state)
{
	struct fixture *fx = *state;
	char err[512], want[512], junk[4096];
	int fd;

	memset(junk, 'x', sizeof(junk));
	fd = open(fx->path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, junk, sizeof(junk)), (ssize_t)sizeof(junk));
	close(fd);

	assert_null(store_open(fx->path, NULL, err, sizeof(err)));
	snprintf(want, sizeof(want), "%s: file is not a database", fx->path);
	assert_string_equal(err, want);
}

static void
test_bad_paths(void **state)
{
	struct fixture *fx = *state;
	char err[512], path[256];
	int fd;

	/* The parent is a file. */
	snprintf(path, sizeof(path), "%s/file", fx->dir);
	fd = open(path, O_WRONLY | O_CREAT, 0600);
	assert_true(fd >= 0);
	close(fd);
	snprintf(path, sizeof(path), "%s/file/sub/audit.db", fx->dir);
	err[0] = '\0';
	assert_null(store_open(path, NULL, err, sizeof(err)));
	assert_true(strncmp(err, path, strlen(path)) == 0);
	assert_non_null(strstr(err, "Not a directory"));

	assert_null(store_open("", NULL, err, sizeof(err)));
	assert_null(store_open(NULL, NULL, NULL, 0));
	store_close(NULL);
}

static void
test_many_records(void **state)
{
	struct fixture *fx = *state;
	const int64_t n = 100000, base = 1700000000000000;
	struct store_flow f;
	struct store_dns d;
	struct store_stats stats;
	struct store *s;
	int64_t i;
	char sql[256];

	/* Every fifth record is a DNS query. */
	s = open_ok(fx->path, NULL);
	for (i = 0; i < n; i++) {
		if (i % 5 == 4) {
			make_dns(&d, base + i);
			snprintf(d.qname, sizeof(d.qname), "q%lld.example",
			    (long long)i);
		} else {
			make_flow(&f, base + i, (int)(i % 65536));
			snprintf(f.rule, sizeof(f.rule), "rule-%lld",
			    (long long)i);
		}
		/* A producer faster than the disk is refused, not blocked. */
		while ((i % 5 == 4 ? store_put_dns(s, &d) :
		    store_put_flow(s, &f)) == -1) {
			assert_int_equal(errno, ENOBUFS);
			usleep(1000);
		}
	}
	assert_int_equal(store_flush(s, 60000), 0);
	store_stats(s, &stats);
	assert_int_equal(stats.queued, n);
	assert_int_equal(stats.written, n);
	assert_int_equal(stats.depth, 0);
	assert_int_equal(stats.write_errors, 0);
	assert_true(stats.batches >= (uint64_t)(n / STORE_BATCH_DEFAULT));
	store_close(s);

	assert_int_equal(path_count(fx->path, "SELECT count(*) FROM flows"),
	    n / 5 * 4);
	assert_int_equal(path_count(fx->path, "SELECT count(*) FROM"
	    " dns_queries"), n / 5);
	assert_int_equal(path_count(fx->path, "SELECT count(DISTINCT ts) FROM"
	    " (SELECT ts FROM flows UNION ALL SELECT ts FROM dns_queries)"), n);
	snprintf(sql, sizeof(sql), "SELECT sum(ts - %lld) FROM (SELECT ts"
	    " FROM flows UNION ALL SELECT ts FROM dns_queries)",
	    (long long)base);
	assert_int_equal(path_count(fx->path, sql), n * (n - 1) / 2);
	/* Ring order is commit order: the k-th flow (from 0) was record
	 * k + k / 4, the k-th query record 5k + 4. */
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM flows WHERE"
	    " ts - %lld != (id - 1) + (id - 1) / 4 OR"
	    " rule != 'rule-' || (ts - %lld)", (long long)base,
	    (long long)base);
	assert_int_equal(path_count(fx->path, sql), 0);
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM dns_queries WHERE"
	    " ts - %lld != 5 * (id - 1) + 4 OR"
	    " qname != 'q' || (ts - %lld) || '.example'", (long long)base,
	    (long long)base);
	assert_int_equal(path_count(fx->path, sql), 0);
}

static void
test_now_us(void **state)
{
	int64_t now, t;

	(void)state;
	t = (int64_t)time(NULL) * 1000000;
	now = store_now_us();
	assert_true(now >= t && now < t + 2000000);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_schema, setup, teardown),
		cmocka_unit_test_setup_teardown(test_flows_round_trip, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_flow_log_time, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_dns_round_trip, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_dns_log, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sandboxes_and_policies,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_records_refused, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_queue_full_then_recovers,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_close_while_locked, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_writer_wakes, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_reader_does_not_block,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_reopen_keeps_rows, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_upgrade_from_v1, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_upgrade_from_v2, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_upgrade_is_one_transaction,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(
		    test_upgrade_v2_is_one_transaction, setup, teardown),
		cmocka_unit_test_setup_teardown(
		    test_upgrade_chain_is_one_transaction, setup, teardown),
		cmocka_unit_test_setup_teardown(test_newer_schema_refused,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_foreign_db_refused, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_not_a_database, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_bad_paths, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_many_records, setup,
		    teardown),
		cmocka_unit_test(test_now_us),
	};

	umask(022);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
