/* test_store.c: the audit log against real SQLite files in a scratch directory. */
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include <linux/fs.h>

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
#include "store/store_int.h"	/* store_set_purge_interval */

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

/* Version 3's schema exactly as sluice wrote it (561aa1c:store/db.c). */
static const char v3_schema_sql[] =
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
	" http_host TEXT, http_path TEXT, app TEXT) STRICT;"
	"CREATE INDEX flows_sandbox_ts ON flows(sandbox, ts);"
	"CREATE INDEX flows_verdict_ts ON flows(verdict, ts);"
	"CREATE INDEX flows_dst ON flows(dst_ip, dst_port);"
	"CREATE INDEX policies_sandbox ON policies(sandbox, ts);"
	"CREATE VIEW flow_log AS SELECT id,"
	" strftime('%Y-%m-%dT%H:%M:%fZ', ts / 1000000.0, 'unixepoch')"
	" AS time, sandbox, proto, src_ip, src_port, dst_ip, dst_port,"
	" verdict, reason, rule, policy_sha256, name, sni, tls_version, alpn,"
	" http_method, http_host, http_path, app FROM flows;"
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
	"CREATE INDEX flows_name ON flows(name);"
	"CREATE INDEX flows_sni ON flows(sni);";

/* The columns of flows and flow_log from version 3 on, after name. */
#define V3_COLUMNS \
	"sni,tls_version,alpn,http_method,http_host,http_path,app"
/* ... and from version 4 on, after app. */
#define V4_FLOWS_COLUMNS \
	",bytes_out,packets_out,bytes_in,packets_in,end_ts,end_state"
#define V4_FLOW_LOG_COLUMNS \
	",bytes_out,packets_out,bytes_in,packets_in,end_time,end_state"
#define FLOWS_COLUMNS							\
	"id,ts,sandbox,proto,src_ip,src_port,dst_ip,dst_port,verdict,"	\
	"reason,rule,policy_sha256,name," V3_COLUMNS V4_FLOWS_COLUMNS
#define FLOW_LOG_COLUMNS						\
	"id,time,sandbox,proto,src_ip,src_port,dst_ip,dst_port,verdict,"	\
	"reason,rule,policy_sha256,name," V3_COLUMNS V4_FLOW_LOG_COLUMNS
#define DAY_US	(86400LL * 1000000)

struct fixture {
	char	dir[64];
	char	path[128];	/* dir/audit.db */
	char	mnt[128];	/* dir/mnt, when a test mounts a tmpfs there */
	int	mounted;
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

/* Sets or clears the immutable flag (chattr +i); -1 with errno. */
static int
set_immutable(const char *path, int on)
{
	int fd, flags, rc = -1;

	if ((fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)) == -1)
		return -1;
	if (ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0) {
		flags = on ? flags | FS_IMMUTABLE_FL : flags & ~FS_IMMUTABLE_FL;
		rc = ioctl(fd, FS_IOC_SETFLAGS, &flags);
	}
	close(fd);
	return rc;
}

static int
rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)ftw;
	/* A failed read-only test may have left a file immutable. */
	if (flag == FTW_F && S_ISREG(sb->st_mode))
		(void)set_immutable(p, 0);
	return remove(p);
}

static int
teardown(void **state)
{
	struct fixture *fx = *state;
	int rc;

	if (fx->mounted && umount(fx->mnt) == -1)
		(void)umount2(fx->mnt, MNT_DETACH);
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

/* lost_records summed by kind and reason: "kind:reason=n ...", or "". */
static const char *
lost_summary(const char *path, char *buf, size_t len)
{
	sqlite3 *db = peer_open(path);

	query_text(db, "SELECT coalesce(group_concat(k, ' '), '') FROM"
	    " (SELECT kind || ':' || reason || '=' || sum(count) AS k FROM"
	    " lost_records GROUP BY kind, reason ORDER BY kind, reason)", buf,
	    len);
	sqlite3_close(db);
	return buf;
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
	assert_false(store_writable(NULL));
	s = open_ok(path, NULL);
	assert_true(store_writable(s));
	assert_int_equal(stat(dir, &sb), 0);
	assert_int_equal(sb.st_mode & 07777, 0750);

	db = peer_open(path);
	assert_int_equal(query_int(db, "PRAGMA user_version"),
	    STORE_SCHEMA_VERSION);
	assert_string_equal(query_text(db, "PRAGMA journal_mode", buf,
	    sizeof(buf)), "wal");
	assert_int_equal(query_int(db, "PRAGMA page_size"), 16384);
	assert_string_equal(query_text(db, "SELECT group_concat(name, ',')"
	    " FROM (SELECT name FROM sqlite_schema WHERE name NOT LIKE"
	    " 'sqlite_%' ORDER BY name)", buf, sizeof(buf)),
	    "dns_log,dns_queries,dns_queries_sandbox_ts,"
	    "flow_log,flows,flows_dst,"
	    "flows_sandbox_ts,flows_ts,flows_tuple,flows_verdict_ts,"
	    "lost_log,lost_records,lost_records_ts,policies,policies_sandbox,"
	    "sandboxes");
	assert_string_equal(query_text(db, "SELECT group_concat(name, ',')"
	    " FROM (SELECT name FROM pragma_table_list WHERE strict = 1"
	    " ORDER BY name)", buf, sizeof(buf)),
	    "dns_queries,flows,lost_records,policies,sandboxes");

	assert_string_equal(columns(db, "flows", buf, sizeof(buf)),
	    FLOWS_COLUMNS);
	assert_string_equal(columns(db, "flow_log", buf, sizeof(buf)),
	    FLOW_LOG_COLUMNS);
	assert_string_equal(query_text(db, "SELECT group_concat(name || ' ' ||"
	    " type || ' ' || \"notnull\", ',') FROM (SELECT * FROM"
	    " pragma_table_info('flows') WHERE cid >= 12 ORDER BY cid)", buf,
	    sizeof(buf)), "name TEXT 0,sni TEXT 0,tls_version TEXT 0,"
	    "alpn TEXT 0,http_method TEXT 0,http_host TEXT 0,http_path TEXT 0,"
	    "app TEXT 0,bytes_out INTEGER 0,packets_out INTEGER 0,"
	    "bytes_in INTEGER 0,packets_in INTEGER 0,end_ts INTEGER 0,"
	    "end_state TEXT 0");
	assert_string_equal(query_text(db, "SELECT group_concat(name || ' ' ||"
	    " type || ' ' || \"notnull\" || ' ' || pk, ',') FROM (SELECT *"
	    " FROM pragma_table_info('lost_records') ORDER BY cid)", buf,
	    sizeof(buf)), "id INTEGER 0 1,ts INTEGER 1 0,kind TEXT 1 0,"
	    "count INTEGER 1 0,reason TEXT 1 0");
	assert_string_equal(columns(db, "lost_log", buf, sizeof(buf)),
	    "id,time,kind,count,reason");
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
	    " sqlite_schema m WHERE m.type = 'index' ORDER BY m.name)", buf,
	    sizeof(buf)),
	    "dns_queries_sandbox_ts:sandbox,ts"
	    " flows_dst:dst_ip,dst_port flows_sandbox_ts:sandbox,ts"
	    " flows_ts:ts flows_tuple:src_ip,src_port,dst_ip,dst_port"
	    " flows_verdict_ts:verdict,ts lost_records_ts:ts"
	    " policies_sandbox:sandbox,ts");
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
	char longname[100], buf[256];

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
	errno = 0;
	assert_int_equal(store_put_flow(s, NULL), -1);
	assert_int_equal(errno, EINVAL);
	/* No store, nothing to count them in. */
	errno = 0;
	assert_int_equal(store_put_flow(NULL, &f), -1);
	assert_int_equal(errno, EINVAL);
	assert_int_equal(store_put_sandbox(NULL, 1, "a", "add", "x", "y"), -1);
	assert_int_equal(store_put_policy(NULL, 1, "a", "ab", "{}"), -1);

	/* Refused, and each one counted, by kind. */
	assert_int_equal(store_flush(s, 5000), 0);
	store_stats(s, &stats);
	assert_int_equal(stats.queued, 0);
	assert_int_equal(stats.written, 0);
	assert_int_equal(stats.rejected, 0);
	assert_int_equal(stats.lost_persisted, 14 + 16 + 3 + 1);
	assert_int_equal(stats.write_errors, 0);
	store_close(s);
	assert_int_equal(path_count(fx->path, "SELECT (SELECT count(*) FROM"
	    " flows) + (SELECT count(*) FROM sandboxes) + (SELECT count(*)"
	    " FROM dns_queries)"), 0);
	assert_string_equal(lost_summary(fx->path, buf, sizeof(buf)),
	    "dns:invalid=16 flow:invalid=14 policy:invalid=1"
	    " sandbox:invalid=3");
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
	char buf[256];
	int i;

	s = open_ok(fx->path, &opts);
	assert_true(store_writable(s));
	lock = peer_open(fx->path);
	peer_exec(lock, "BEGIN EXCLUSIVE");

	assert_false(store_behind(s));
	for (i = 0; i < 2; i++) {
		make_flow(&f, 1000 + i, 443);
		assert_int_equal(store_put_flow(s, &f), 0);
		/* half of 4: behind from the second record on, while the
		 * writer still waits out the lock (100 ms) and is writable */
		assert_int_equal(store_behind(s), i == 1);
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
	assert_false(store_writable(s));
	/* stopped, not behind: producers are refused, not held */
	assert_false(store_behind(s));
	errno = 0;
	assert_int_equal(store_flush(s, 50), -1);
	assert_int_equal(errno, ETIMEDOUT);
	store_stats(s, &stats);
	assert_int_equal(stats.queued, 4);
	assert_int_equal(stats.rejected, 4);
	assert_int_equal(stats.written, 0);
	assert_int_equal(stats.depth, 4);
	assert_int_equal(stats.lost_persisted, 0);
	assert_true(stats.write_errors > 0);
	assert_false(store_writable(s));

	peer_exec(lock, "COMMIT");
	sqlite3_close(lock);

	assert_int_equal(store_flush(s, 10000), 0);
	assert_true(store_writable(s));
	store_stats(s, &stats);
	assert_int_equal(stats.queued, 4);
	assert_int_equal(stats.written, 4);
	assert_int_equal(stats.depth, 0);
	assert_int_equal(stats.rejected, 4);
	assert_int_equal(stats.lost_persisted, 4);
	assert_true(stats.write_errors > 0);
	assert_true(store_has_room(s, 4));
	assert_false(store_has_room(s, 5));
	assert_false(store_behind(s));

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
	assert_string_equal(lost_summary(fx->path, buf, sizeof(buf)),
	    "dns:queue_full=1 flow:queue_full=1 policy:queue_full=1"
	    " sandbox:queue_full=1");
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
	/* the three it could not write: the caller's to report */
	assert_int_equal(store_close(s), 3);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	secs = (double)(t1.tv_sec - t0.tv_sec) +
	    (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	assert_true(secs >= 1.9 && secs < 4.0);
	peer_exec(lock, "COMMIT");
	sqlite3_close(lock);
	assert_int_equal(path_count(fx->path, "SELECT (SELECT count(*) FROM"
	    " flows) + (SELECT count(*) FROM dns_queries)"), 0);
}

/*
 * A stop that comes in the middle of the writer's wait after failures (2 s
 * by the sixth) cuts the wait short: the database, writable again, gets
 * every record. The writer used to sleep its wait out, most of the close's
 * 2 s, and a close then stopped it midway: 7,808 of 16,000 rows gone,
 * uncounted (found by review, 2026-12-03).
 */
static void
test_close_after_failures(void **state)
{
	struct fixture *fx = *state;
	struct store_opts opts = { .flush_ms = 5 };
	struct store_flow f;
	struct store_stats st;
	struct store *s;
	sqlite3 *lock;
	int i, n = 16000;

	s = open_ok(fx->path, &opts);
	lock = peer_open(fx->path);
	peer_exec(lock, "BEGIN EXCLUSIVE");
	for (i = 0; i < n; i++) {
		make_flow(&f, 1000 + i, 1 + (i % 60000));
		f.src_port = 1024 + i;
		assert_int_equal(store_put_flow(s, &f), 0);
	}
	do {
		usleep(1000);
		store_stats(s, &st);
	} while (st.write_errors < 6);
	peer_exec(lock, "COMMIT");
	sqlite3_close(lock);
	usleep(20 * 1000);
	assert_int_equal(store_close(s), 0);
	assert_int_equal(path_count(fx->path, "SELECT count(*) FROM flows"), n);
}

/*
 * The database removed under a running store (a cleanup, a rotation by
 * hand): the next transaction goes to a new file at the path. It went on
 * into the removed one, writable all along, every row from then on lost
 * (found by review, 2026-12-03).
 */
static void
test_db_removed(void **state)
{
	struct fixture *fx = *state;
	struct store_flow f;
	struct store_stats st;
	struct store *s;
	char p[PATH_MAX + 8];

	s = open_ok(fx->path, NULL);
	make_flow(&f, 1, 443);
	assert_int_equal(store_put_flow(s, &f), 0);
	assert_int_equal(store_flush(s, 5000), 0);
	assert_int_equal(unlink(fx->path), 0);
	snprintf(p, sizeof(p), "%s-wal", fx->path);
	(void)unlink(p);
	snprintf(p, sizeof(p), "%s-shm", fx->path);
	(void)unlink(p);
	make_flow(&f, 2, 443);
	assert_int_equal(store_put_flow(s, &f), 0);
	assert_int_equal(store_flush(s, 5000), 0);
	store_stats(s, &st);
	assert_int_equal(st.reopened, 1);
	assert_int_equal(store_close(s), 0);
	/* the new file has the row written after the removal */
	assert_int_equal(path_count(fx->path, "SELECT count(*) FROM flows"), 1);
	assert_int_equal(path_count(fx->path, "SELECT min(ts) FROM flows"), 2);
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

/* A version 4 database opens as it is. */
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
	assert_int_equal(path_count(fx->path, "PRAGMA user_version"),
	    STORE_SCHEMA_VERSION);
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

/*
 * The columns of versions 3 and 4, the first flight's and the end's,
 * from column first on, are all NULL.
 */
static void
expect_no_first_flight(sqlite3_stmt *st, int first)
{
	int i;

	assert_int_equal(sqlite3_column_count(st), first + 7 + 6);
	for (i = 0; i < 7 + 6; i++)
		expect_null(st, first + i);
}

/* db reads as a new database does (fresh_shape): version, objects, SQL. */
static void
expect_fresh(sqlite3 *db, const char *want, const char *want_sql)
{
	char got[8192], got_sql[8192];

	assert_int_equal(query_int(db, "PRAGMA user_version"),
	    STORE_SCHEMA_VERSION);
	assert_string_equal(schema_shape(db, got, sizeof(got)), want);
	assert_string_equal(object_sql(db, got_sql, sizeof(got_sql)),
	    want_sql);
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
	char buf[512], want[8192], got[8192], want_sql[8192];

	fresh_shape(fx->dir, want, sizeof(want), want_sql, sizeof(want_sql));
	make_v1(fx->path);
	s = open_ok(fx->path, NULL);

	db = peer_open(fx->path);
	expect_fresh(db, want, want_sql);
	/* an old file keeps its pages (fixed in WAL mode) */
	assert_int_equal(query_int(db, "PRAGMA page_size"), 4096);
	assert_string_equal(columns(db, "flow_log", buf, sizeof(buf)),
	    FLOW_LOG_COLUMNS);
	assert_int_equal(query_int(db, "SELECT count(*) FROM dns_queries"), 0);

	/* The old rows, untouched, with no name, first flight or end. */
	assert_int_equal(sqlite3_prepare_v2(db, "SELECT id, ts, sandbox, proto,"
	    " src_ip, src_port, dst_ip, dst_port, verdict, reason, rule,"
	    " policy_sha256, name, sni, tls_version, alpn, http_method,"
	    " http_host, http_path, app, bytes_out, packets_out, bytes_in,"
	    " packets_in, end_ts, end_state FROM flows ORDER BY id", -1, &st,
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
	assert_int_equal(query_int(db, "PRAGMA user_version"),
	    STORE_SCHEMA_VERSION);
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
	char buf[512], want[8192], got[8192], want_sql[8192];

	fresh_shape(fx->dir, want, sizeof(want), want_sql, sizeof(want_sql));
	make_v2(fx->path);
	s = open_ok(fx->path, NULL);

	db = peer_open(fx->path);
	expect_fresh(db, want, want_sql);
	assert_string_equal(columns(db, "flows", buf, sizeof(buf)),
	    FLOWS_COLUMNS);
	assert_string_equal(columns(db, "flow_log", buf, sizeof(buf)),
	    FLOW_LOG_COLUMNS);

	/* The old rows, untouched, with no first flight. */
	assert_int_equal(sqlite3_prepare_v2(db, "SELECT * FROM flows ORDER BY"
	    " id", -1, &st, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_column_count(st), 26);
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
	assert_int_equal(sqlite3_column_count(st), 26);
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
	assert_int_equal(query_int(db, "PRAGMA user_version"),
	    STORE_SCHEMA_VERSION);
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

/* A database as sluice version 3 left it: WAL, rows in every table. */
static void
make_v3(const char *path)
{
	sqlite3 *db = peer_open(path);
	char buf[16];

	assert_string_equal(query_text(db, "PRAGMA journal_mode = WAL", buf,
	    sizeof(buf)), "wal");
	peer_exec(db, "BEGIN");
	peer_exec(db, v3_schema_sql);
	peer_exec(db, "PRAGMA user_version = 3");
	peer_exec(db, "INSERT INTO sandboxes (name, ifname, addr, created_us)"
	    " VALUES ('task-a', 'sl-task-a', '10.77.0.2/30', 100)");
	peer_exec(db, "INSERT INTO policies (sandbox, ts, sha256, text) VALUES"
	    " ('task-a', 150, 'aa', '{}')");
	peer_exec(db, "INSERT INTO flows (ts, sandbox, proto, src_ip, src_port,"
	    " dst_ip, dst_port, verdict, reason, rule, policy_sha256, name, sni,"
	    " tls_version, alpn, http_method, http_host, http_path, app) VALUES"
	    " (1700000000123456, 'task-a', 'tcp', '10.77.0.2', 40000,"
	    " '192.0.2.10', 443, 'allow', 'sni_allowed', '*.example.com:443',"
	    " 'aa', 'api.example.com', 'api.example.com', 'TLS1.3', 'h2', NULL,"
	    " NULL, NULL, 'TLS'), (1700000001000000, NULL, 'udp', '10.77.0.6',"
	    " 5353, '198.51.100.7', 53, 'deny', 'unknown_sandbox', NULL, NULL,"
	    " NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)");
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
make_end(struct store_flow_end *e, int64_t ts, const char *proto,
    const char *src, int sport, const char *dst, int dport)
{
	memset(e, 0, sizeof(*e));
	e->ts_us = ts;
	e->proto = proto;
	strcpy(e->src_ip, src);
	e->src_port = sport;
	strcpy(e->dst_ip, dst);
	e->dst_port = dport;
	e->bytes_out = 1000;
	e->packets_out = 10;
	e->bytes_in = 20000;
	e->packets_in = 20;
	e->end_state = "closed";
}

static void
test_upgrade_from_v3(void **state)
{
	struct fixture *fx = *state;
	struct store_flow_end e;
	struct store *s;
	sqlite3 *db;
	sqlite3_stmt *st;
	char buf[512], want[8192], got[8192], want_sql[8192];
	int i;

	fresh_shape(fx->dir, want, sizeof(want), want_sql, sizeof(want_sql));
	make_v3(fx->path);
	s = open_ok(fx->path, NULL);

	db = peer_open(fx->path);
	expect_fresh(db, want, want_sql);
	assert_string_equal(columns(db, "flows", buf, sizeof(buf)),
	    FLOWS_COLUMNS);
	assert_string_equal(columns(db, "flow_log", buf, sizeof(buf)),
	    FLOW_LOG_COLUMNS);
	assert_int_equal(query_int(db, "SELECT count(*) FROM lost_records"), 0);

	/* The old rows, untouched, with no end. */
	assert_int_equal(sqlite3_prepare_v2(db, "SELECT * FROM flows ORDER BY"
	    " id", -1, &st, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_column_count(st), 26);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	expect_int(st, 0, 1);
	expect_int(st, 1, 1700000000123456);
	expect_text(st, 2, "task-a");
	expect_int(st, 5, 40000);
	expect_text(st, 9, "sni_allowed");
	expect_text(st, 12, "api.example.com");
	expect_text(st, 13, "api.example.com");
	expect_text(st, 14, "TLS1.3");
	expect_text(st, 15, "h2");
	expect_null(st, 16);
	expect_text(st, 19, "TLS");
	for (i = 20; i < 26; i++)
		expect_null(st, i);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	expect_int(st, 0, 2);
	expect_text(st, 3, "udp");
	expect_no_first_flight(st, 13);
	assert_int_equal(sqlite3_step(st), SQLITE_DONE);
	sqlite3_finalize(st);
	assert_string_equal(query_text(db, "SELECT time || ' ' || sni || ' ' ||"
	    " coalesce(end_time, 'NULL') || ' ' || coalesce(end_state, 'NULL')"
	    " FROM flow_log WHERE id = 1", buf, sizeof(buf)),
	    "2023-11-14T22:13:20.123Z api.example.com NULL NULL");
	assert_string_equal(query_text(db, "SELECT id || ' ' || time || ' ' ||"
	    " qname FROM dns_log", buf, sizeof(buf)),
	    "1 2023-11-14T22:13:20.000Z api.example.com");
	assert_string_equal(query_text(db, "SELECT name || ' ' || created_us"
	    " FROM sandboxes", buf, sizeof(buf)), "task-a 100");
	assert_string_equal(query_text(db, "SELECT sandbox || ' ' || ts ||"
	    " ' ' || sha256 || ' ' || text FROM policies", buf, sizeof(buf)),
	    "task-a 150 aa {}");
	sqlite3_close(db);

	/* A flow from before the upgrade gets its end. */
	make_end(&e, 1700000002000000, "udp", "10.77.0.6", 5353,
	    "198.51.100.7", 53);
	e.end_state = "timeout";
	assert_int_equal(store_put_flow_end(s, &e), 0);
	store_close(s);
	db = peer_open(fx->path);
	assert_string_equal(query_text(db, "SELECT group_concat(id || ' ' ||"
	    " coalesce(end_time, '-') || ' ' || coalesce(end_state, '-') ||"
	    " ' ' || coalesce(bytes_in, '-'), ';') FROM flow_log", buf,
	    sizeof(buf)), "1 - - -;2 2023-11-14T22:13:22.000Z timeout 20000");
	sqlite3_close(db);

	store_close(open_ok(fx->path, NULL));
	db = peer_open(fx->path);
	assert_string_equal(schema_shape(db, got, sizeof(got)), want);
	assert_int_equal(query_int(db, "PRAGMA user_version"),
	    STORE_SCHEMA_VERSION);
	sqlite3_close(db);
}

/* Version 3 with a table by the name version 4 wants: left as it was. */
static void
test_upgrade_v3_is_one_transaction(void **state)
{
	struct fixture *fx = *state;
	char before[8192], after[8192];
	sqlite3 *db;

	make_v3(fx->path);
	db = peer_open(fx->path);
	peer_exec(db, "CREATE TABLE lost_records (mine TEXT)");
	schema_shape(db, before, sizeof(before));
	sqlite3_close(db);

	expect_upgrade_error(fx->path, "cannot upgrade the schema from"
	    " version 3: table lost_records already exists");

	db = peer_open(fx->path);
	assert_int_equal(query_int(db, "PRAGMA user_version"), 3);
	assert_string_equal(schema_shape(db, after, sizeof(after)), before);
	assert_int_equal(query_int(db, "SELECT count(*) FROM pragma_table_info"
	    "('flows') WHERE name IN ('bytes_out', 'end_ts', 'end_state')"), 0);
	assert_int_equal(query_int(db, "SELECT count(*) FROM pragma_table_info"
	    "('flow_log')"), 20);
	assert_int_equal(query_int(db, "SELECT count(*) FROM sqlite_schema"
	    " WHERE name IN ('flows_tuple', 'flows_ts', 'lost_log')"), 0);
	assert_int_equal(query_int(db, "SELECT count(*) FROM flows"), 2);
	peer_exec(db, "DROP TABLE lost_records");
	sqlite3_close(db);

	store_close(open_ok(fx->path, NULL));
	assert_int_equal(path_count(fx->path, "PRAGMA user_version"),
	    STORE_SCHEMA_VERSION);
	assert_int_equal(path_count(fx->path, "SELECT count(*) FROM flows"
	    " WHERE end_ts IS NULL AND bytes_out IS NULL"), 2);
}

/* 1 -> 4 fails in its last step: all of it is undone. */
static void
test_upgrade_chain_to_v4_is_one_transaction(void **state)
{
	struct fixture *fx = *state;
	char before[8192], after[8192];
	sqlite3 *db;

	make_v1(fx->path);
	db = peer_open(fx->path);
	peer_exec(db, "CREATE VIEW lost_log AS SELECT 1 AS mine");
	schema_shape(db, before, sizeof(before));
	sqlite3_close(db);

	expect_upgrade_error(fx->path, "cannot upgrade the schema from"
	    " version 3: view lost_log already exists");

	db = peer_open(fx->path);
	assert_int_equal(query_int(db, "PRAGMA user_version"), 1);
	assert_string_equal(schema_shape(db, after, sizeof(after)), before);
	assert_int_equal(query_int(db, "SELECT count(*) FROM sqlite_schema"
	    " WHERE name IN ('dns_queries', 'flows_sni', 'lost_records')"), 0);
	assert_int_equal(query_int(db, "SELECT count(*) FROM flows"), 2);
	peer_exec(db, "DROP VIEW lost_log");
	sqlite3_close(db);

	store_close(open_ok(fx->path, NULL));
	assert_int_equal(path_count(fx->path, "PRAGMA user_version"),
	    STORE_SCHEMA_VERSION);
	assert_int_equal(path_count(fx->path, "SELECT count(*) FROM flows"
	    " WHERE name IS NULL AND sni IS NULL AND end_ts IS NULL"), 2);
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
	assert_int_equal(path_count(fx->path, "PRAGMA user_version"),
	    STORE_SCHEMA_VERSION);
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
	assert_int_equal(path_count(fx->path, "PRAGMA user_version"),
	    STORE_SCHEMA_VERSION);
	/* Version 3 made flows_sni, version 5 took it away again. */
	assert_int_equal(path_count(fx->path, "SELECT count(*) FROM"
	    " sqlite_schema WHERE name = 'flows_sni'"), 0);
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
/*
 * A database as sluice version 4 left it: a new one with the name indexes
 * version 5 dropped, rows in the tables. With drop_sni, an operator had
 * already dropped one of them.
 */
static void
make_v4(const char *path, bool drop_sni)
{
	char wal[192], buf[16];
	sqlite3 *db;

	/* A previous round's file and its WAL go first. */
	snprintf(wal, sizeof(wal), "%s-wal", path);
	(void)unlink(path);
	(void)unlink(wal);
	store_close(open_ok(path, NULL));
	db = peer_open(path);
	assert_string_equal(query_text(db, "PRAGMA journal_mode", buf,
	    sizeof(buf)), "wal");
	peer_exec(db, "BEGIN");
	peer_exec(db, "CREATE INDEX dns_queries_qname ON dns_queries(qname);"
	    "CREATE INDEX flows_name ON flows(name);"
	    "CREATE INDEX flows_sni ON flows(sni);"
	    "PRAGMA user_version = 4");
	if (drop_sni)
		peer_exec(db, "DROP INDEX flows_sni");
	peer_exec(db, "INSERT INTO flows (ts, sandbox, proto, src_ip, src_port,"
	    " dst_ip, dst_port, verdict, reason, name, sni) VALUES"
	    " (1700000000123456, 'task-a', 'tcp', '10.77.0.2', 40000,"
	    " '192.0.2.10', 443, 'allow', 'sni_allowed', 'api.example.com',"
	    " 'api.example.com')");
	peer_exec(db, "INSERT INTO dns_queries (ts, sandbox, proto, src_ip,"
	    " src_port, qname, qtype, verdict, reason) VALUES"
	    " (1700000000000000, 'task-a', 'udp', '10.77.0.2', 53000,"
	    " 'api.example.com', 'A', 'allow', 'allowed_domain')");
	peer_exec(db, "COMMIT");
	sqlite3_close(db);
}

/* 4 -> 5 drops the name indexes and keeps the rows, with or without them. */
static void
test_upgrade_from_v4(void **state)
{
	struct fixture *fx = *state;
	char want[8192], want_sql[8192];
	int drop_sni;
	sqlite3 *db;

	fresh_shape(fx->dir, want, sizeof(want), want_sql, sizeof(want_sql));
	for (drop_sni = 0; drop_sni <= 1; drop_sni++) {
		make_v4(fx->path, drop_sni);
		assert_int_equal(path_count(fx->path, "SELECT count(*) FROM"
		    " sqlite_schema WHERE name IN ('dns_queries_qname',"
		    " 'flows_name', 'flows_sni')"), 3 - drop_sni);
		store_close(open_ok(fx->path, NULL));

		db = peer_open(fx->path);
		expect_fresh(db, want, want_sql);
		assert_int_equal(query_int(db, "SELECT count(*) FROM flows"
		    " WHERE sni = 'api.example.com'"), 1);
		assert_int_equal(query_int(db, "SELECT count(*) FROM"
		    " dns_queries WHERE qname = 'api.example.com'"), 1);
		sqlite3_close(db);
	}
}

/*
 * A file as this sluice makes it, then taken back to an older version by
 * sql, run by a peer.
 */
static void
make_older(const char *path, const char *sql)
{
	sqlite3 *db;

	store_close(open_ok(path, NULL));
	db = peer_open(path);
	peer_exec(db, sql);
	sqlite3_close(db);
}

/*
 * 5 -> 6: flows_tuple over the open flows only. Two flows of one 5-tuple
 * in a version 5 file, the first ended: upgraded, the index holds the
 * open one, and an end still finds it.
 */
static void
test_upgrade_from_v5(void **state)
{
	struct fixture *fx = *state;
	char want[8192], want_sql[8192];
	struct store_flow_end e;
	struct store *s;
	sqlite3 *db;

	fresh_shape(fx->dir, want, sizeof(want), want_sql, sizeof(want_sql));
	make_older(fx->path, "BEGIN;"
	    "DROP INDEX flows_tuple;"
	    "CREATE INDEX flows_tuple ON flows(src_ip, src_port, dst_ip,"
	    " dst_port);"
	    "PRAGMA user_version = 5;"
	    "INSERT INTO flows (ts, sandbox, proto, src_ip, src_port, dst_ip,"
	    " dst_port, verdict, reason, end_ts, end_state) VALUES"
	    " (1700000000000000, 'task-a', 'tcp', '10.77.0.2', 40000,"
	    " '192.0.2.10', 443, 'allow', 'allowed_cidr', 1700000001000000,"
	    " 'closed'), (1700000002000000, 'task-a', 'tcp', '10.77.0.2',"
	    " 40000, '192.0.2.10', 443, 'allow', 'allowed_cidr', NULL, NULL);"
	    "COMMIT");
	assert_int_equal(path_count(fx->path, "SELECT count(*) FROM flows"
	    " INDEXED BY flows_tuple WHERE src_ip = '10.77.0.2'"), 2);

	s = open_ok(fx->path, NULL);
	db = peer_open(fx->path);
	expect_fresh(db, want, want_sql);
	assert_true(strstr(want_sql, "WHERE end_ts IS NULL") != NULL);
	assert_int_equal(query_int(db, "SELECT count(*) FROM flows INDEXED BY"
	    " flows_tuple WHERE src_ip = '10.77.0.2' AND end_ts IS NULL"), 1);

	make_end(&e, 1700000003000000, "tcp", "10.77.0.2", 40000,
	    "192.0.2.10", 443);
	assert_int_equal(store_put_flow_end(s, &e), 0);
	assert_int_equal(store_flush(s, 5000), 0);
	assert_int_equal(query_int(db, "SELECT id FROM flows WHERE end_ts ="
	    " 1700000003000000"), 2);
	assert_int_equal(query_int(db, "SELECT count(*) FROM flows INDEXED BY"
	    " flows_tuple WHERE src_ip = '10.77.0.2' AND end_ts IS NULL"), 0);
	assert_int_equal(query_int(db, "SELECT count(*) FROM flows"), 2);
	sqlite3_close(db);
	store_close(s);
}

static void wait_purged(struct store *, uint64_t);

/* Version 7 drops dns_queries(ts); the rows stay and are purged still. */
static void
test_upgrade_from_v6(void **state)
{
	struct fixture *fx = *state;
	struct store_opts retain = { .flush_ms = 5, .retain_days = 2 };
	char want[8192], want_sql[8192];
	struct store *s;
	sqlite3 *db;

	fresh_shape(fx->dir, want, sizeof(want), want_sql, sizeof(want_sql));
	make_older(fx->path, "BEGIN;"
	    "CREATE INDEX dns_queries_ts ON dns_queries(ts);"
	    "PRAGMA user_version = 6;"
	    "INSERT INTO dns_queries (ts, sandbox, proto, src_ip, qname, qtype,"
	    " verdict, reason) VALUES (1700000000000000, 'task-a', 'udp',"
	    " '10.77.0.2', 'old.example', 'A', 'allow', 'allowed_domain'),"
	    " (strftime('%s') * 1000000, 'task-a', 'udp', '10.77.0.2',"
	    " 'new.example', 'A', 'allow', 'allowed_domain');"
	    "COMMIT");

	s = open_ok(fx->path, &retain);
	wait_purged(s, 1);
	db = peer_open(fx->path);
	expect_fresh(db, want, want_sql);
	assert_true(strstr(want, "dns_queries_ts") == NULL);
	assert_int_equal(query_int(db, "SELECT count(*) FROM dns_queries"
	    " WHERE qname = 'new.example'"), 1);
	assert_int_equal(query_int(db, "SELECT count(*) FROM dns_queries"), 1);
	sqlite3_close(db);
	store_close(s);
}

static void
test_newer_schema_refused(void **state)
{
	struct fixture *fx = *state;
	char err[512], want[512], buf[32];
	sqlite3 *db;

	char sql[64];

	db = peer_open(fx->path);
	snprintf(sql, sizeof(sql), "CREATE TABLE flows (x);"
	    " PRAGMA user_version = %d", STORE_SCHEMA_VERSION + 1);
	peer_exec(db, sql);
	sqlite3_close(db);

	assert_null(store_open(fx->path, NULL, err, sizeof(err)));
	snprintf(want, sizeof(want), "%s: database schema version %d is newer"
	    " than this sluice (%d)", fx->path, STORE_SCHEMA_VERSION + 1,
	    STORE_SCHEMA_VERSION);
	assert_string_equal(err, want);

	/* Refused before anything was changed. */
	db = peer_open(fx->path);
	assert_string_equal(query_text(db, "PRAGMA journal_mode", buf,
	    sizeof(buf)), "delete");
	assert_int_equal(query_int(db, "PRAGMA user_version"),
	    STORE_SCHEMA_VERSION + 1);
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

/*
 * The writer puts runs of eight flows or eight queries into one statement
 * each and the rest one by one: whatever the runs, every row has its own
 * values (strings as long as they may be among them), rows keep the
 * order they were queued in, a flow's end finds a flow written in such a
 * run, and a small queue (37 records) fills, so batches end in the
 * middle of runs.
 */
static void
test_runs_of_one_kind(void **state)
{
	struct fixture *fx = *state;
	/* F flow, D query, E the end of the flow to port 5, S a sandbox */
	static const char kinds[] =
	    "FFFFFFFFFFFFFFFFFFFF" "DDD" "DDDDDDDD" "F" "E"
	    "DDDDDDDDDDDDDDDDD" "S" "FFFFFFFFF" "DFDFDFDFDFDFDFDF"
	    "FFFFFFFF" "DDDDDDDD" "FFFFFFFFFFFFFFFFFFFFFFFFF" "D";
	const struct store_opts opts = { .queue_cap = 37 };
	const int64_t base = 1700000000000000;
	int nf = 0, nd = 0, long_paths = 0, long_answers = 0, rc;
	struct store_flow_end e;
	struct store_flow f;
	struct store_dns d;
	struct store *s;
	char sql[512];
	size_t i;

	s = open_ok(fx->path, &opts);
	for (i = 0; kinds[i] != '\0'; i++) {
		do {
			switch (kinds[i]) {
			case 'F':
				make_flow(&f, base + (int64_t)i, (int)i);
				snprintf(f.rule, sizeof(f.rule), "rule-%zu", i);
				snprintf(f.sni, sizeof(f.sni), "sni-%zu", i);
				if (i % 3 == 0)
					fill(f.http_path, sizeof(f.http_path),
					    'a' + (int)(i % 26));
				rc = store_put_flow(s, &f);
				break;
			case 'D':
				make_dns(&d, base + (int64_t)i);
				snprintf(d.qname, sizeof(d.qname), "q%zu.example",
				    i);
				d.src_port = (int)i;
				if (i % 4 == 0)
					fill(d.answers, sizeof(d.answers),
					    'a' + (int)(i % 26));
				rc = store_put_dns(s, &d);
				break;
			case 'E':
				make_end(&e, base + (int64_t)i, "tcp",
				    "10.77.0.2", 40000, "192.0.2.10", 5);
				rc = store_put_flow_end(s, &e);
				break;
			default:
				rc = store_put_sandbox(s, base + (int64_t)i,
				    "task-r", "add", "sl-task-r", "10.77.0.6/30");
			}
			/* the small ring fills: wait for the writer */
			if (rc == -1) {
				assert_int_equal(errno, ENOBUFS);
				usleep(1000);
			}
		} while (rc == -1);
		nf += kinds[i] == 'F';
		nd += kinds[i] == 'D';
		long_paths += kinds[i] == 'F' && i % 3 == 0;
		long_answers += kinds[i] == 'D' && i % 4 == 0;
	}
	assert_int_equal(store_flush(s, 5000), 0);
	store_close(s);

	assert_int_equal(path_count(fx->path, "SELECT count(*) FROM flows"),
	    nf);
	assert_int_equal(path_count(fx->path, "SELECT count(*) FROM"
	    " dns_queries"), nd);
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM flows WHERE"
	    " dst_port = ts - %lld AND rule = 'rule-' || dst_port AND"
	    " sni = 'sni-' || dst_port AND src_ip = '10.77.0.2' AND"
	    " reason = 'sni-allowed' AND policy_sha256 = 'ab' AND"
	    " coalesce(http_path, '') = CASE WHEN dst_port %% 3 = 0 THEN"
	    " replace(printf('%%.127c', '*'), '*', char(97 + dst_port %% 26))"
	    " ELSE '' END", (long long)base);
	assert_int_equal(path_count(fx->path, sql), nf);
	assert_int_equal(path_count(fx->path, "SELECT count(*) FROM flows"
	    " WHERE length(http_path) = 127"), long_paths);
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM dns_queries WHERE"
	    " src_port = ts - %lld AND qname = 'q' || src_port || '.example'"
	    " AND qtype = 'A' AND rule = '*.example.com' AND"
	    " answers = CASE WHEN src_port %% 4 = 0 THEN"
	    " replace(printf('%%.399c', '*'), '*', char(97 + src_port %% 26))"
	    " ELSE '192.0.2.10,192.0.2.11' END", (long long)base);
	assert_int_equal(path_count(fx->path, sql), nd);
	assert_int_equal(path_count(fx->path, "SELECT count(*) FROM"
	    " dns_queries WHERE length(answers) = 399"), long_answers);
	/* in the order queued: ids rise with ts in each table */
	assert_int_equal(path_count(fx->path, "SELECT count(*) FROM flows a,"
	    " flows b WHERE a.id < b.id AND a.ts > b.ts"), 0);
	assert_int_equal(path_count(fx->path, "SELECT count(*) FROM"
	    " dns_queries a, dns_queries b WHERE a.id < b.id AND a.ts > b.ts"),
	    0);
	/* the end went to the flow to port 5, queued in a run of twenty */
	assert_int_equal(path_count(fx->path, "SELECT group_concat(dst_port)"
	    " FROM flows WHERE end_state = 'closed' AND bytes_in = 20000"), 5);
	assert_int_equal(path_count(fx->path, "SELECT count(*) FROM flows"
	    " WHERE end_ts IS NOT NULL"), 1);
	assert_int_equal(path_count(fx->path, "SELECT count(*) FROM sandboxes"
	    " WHERE name = 'task-r'"), 1);
}

/*
 * store_db_write of n recs into the database at path: refused whole while
 * *bad is NULL (no row of any table written), then written once *bad is
 * good.
 */
static void
refused_then_written(const char *path, const struct store_rec *recs,
    size_t n, const struct store_lost *lost, const char **bad,
    const char *good)
{
	struct store_db *d;
	char err[512] = "";

	if ((d = store_db_open(path, err, sizeof(err))) == NULL)
		fail_msg("store_db_open: %s", err);
	assert_null(*bad);
	assert_int_equal(store_db_write(d, recs, n, lost, 5000), -1);
	assert_int_equal(path_count(path, "SELECT count(*) FROM flows"), 0);
	assert_int_equal(path_count(path, "SELECT count(*) FROM"
	    " dns_queries"), 0);
	assert_int_equal(path_count(path, "SELECT count(*) FROM"
	    " lost_records"), 0);
	*bad = good;
	assert_int_equal(store_db_write(d, recs, n, lost, 5000), 0);
	store_db_close(d);
}

/*
 * A record that fails inside a run of eight (one multi-row INSERT, OR
 * FAIL: the run's first rows stay until the end of the statement) takes
 * the whole batch back with it, and the same batch goes in whole once it
 * can: store_db_write is all or nothing. A NULL verdict is what no
 * store_put_* lets through; the NOT NULL is the constraint left to fail.
 */
static void
test_failed_run_rolls_back(void **state)
{
	struct fixture *fx = *state;
	struct store_rec recs[24];
	struct store_lost lost;
	int i;

	memset(&lost, 0, sizeof(lost));
	lost.n[STORE_REC_DNS][STORE_LOST_QUEUE_FULL] = 3;
	for (i = 0; i < 24; i++) {
		memset(&recs[i], 0, sizeof(recs[i]));
		if (i < 8) {
			recs[i].kind = STORE_REC_FLOW;
			make_flow(&recs[i].u.flow, 1000 + i, i);
		} else {
			recs[i].kind = STORE_REC_DNS;
			make_dns(&recs[i].u.dns, 1000 + i);
			recs[i].u.dns.src_port = i;
		}
	}
	recs[13].u.dns.verdict = NULL;	/* the sixth of the run 8..15 */
	refused_then_written(fx->path, recs, 24, &lost,
	    &recs[13].u.dns.verdict, "deny");
	assert_int_equal(path_count(fx->path, "SELECT count(*) FROM flows"
	    " WHERE id = ts - 999 AND dst_port = ts - 1000"), 8);
	assert_int_equal(path_count(fx->path, "SELECT count(*) FROM"
	    " dns_queries WHERE id = ts - 1007 AND src_port = ts - 1000"), 16);
	assert_int_equal(path_count(fx->path, "SELECT src_port FROM"
	    " dns_queries WHERE verdict = 'deny'"), 13);
	assert_int_equal(path_count(fx->path, "SELECT sum(count) FROM"
	    " lost_records WHERE kind = 'dns' AND reason = 'queue_full'"), 3);
}

/*
 * Runs of 32 go into one statement each (WIDE_ROWS), what is left in
 * eights and ones: each row keeps its own values and its place, and a
 * record that fails inside a run of 32 takes the batch back.
 */
static void
test_wide_runs(void **state)
{
	struct fixture *fx = *state;
	struct store_rec recs[80];
	struct store_lost lost;
	int i;

	memset(&lost, 0, sizeof(lost));
	/* 40 queries (32 + 8), 33 flows (32 + 1), 7 queries (one by one) */
	for (i = 0; i < 80; i++) {
		memset(&recs[i], 0, sizeof(recs[i]));
		if (i >= 40 && i < 73) {
			recs[i].kind = STORE_REC_FLOW;
			make_flow(&recs[i].u.flow, 1000 + i, i);
		} else {
			recs[i].kind = STORE_REC_DNS;
			make_dns(&recs[i].u.dns, 1000 + i);
			recs[i].u.dns.src_port = i;
			snprintf(recs[i].u.dns.qname, sizeof(recs[i].u.dns.qname),
			    "q%d.example", i);
		}
	}
	recs[57].u.flow.verdict = NULL;	/* inside the flows' run of 32 */
	refused_then_written(fx->path, recs, 80, &lost,
	    &recs[57].u.flow.verdict, "allow");
	assert_int_equal(path_count(fx->path, "SELECT count(*) FROM"
	    " dns_queries WHERE src_port = ts - 1000 AND qname = 'q' ||"
	    " src_port || '.example' AND id = CASE WHEN src_port < 40 THEN"
	    " src_port + 1 ELSE src_port - 32 END"), 47);
	assert_int_equal(path_count(fx->path, "SELECT count(*) FROM flows"
	    " WHERE dst_port = ts - 1000 AND id = dst_port - 39"), 33);
}

/*
 * The same transaction in pieces (the writer unpacks a long batch 512 at
 * a time): a piece that fails takes the pieces before it back too, and
 * store_db_end commits only what it is told went well.
 */
static void
test_pieces_roll_back(void **state)
{
	struct fixture *fx = *state;
	struct store_rec recs[24];
	struct store_lost lost;
	struct store_db *d;
	char err[512] = "";
	int i;

	memset(&lost, 0, sizeof(lost));
	lost.n[STORE_REC_FLOW][STORE_LOST_QUEUE_FULL] = 2;
	for (i = 0; i < 24; i++) {
		memset(&recs[i], 0, sizeof(recs[i]));
		recs[i].kind = STORE_REC_FLOW;
		make_flow(&recs[i].u.flow, 1000 + i, i);
	}
	recs[20].u.flow.verdict = NULL;

	if ((d = store_db_open(fx->path, err, sizeof(err))) == NULL)
		fail_msg("store_db_open: %s", err);
	assert_int_equal(store_db_begin(d), 0);
	assert_int_equal(store_db_put(d, recs, 8), 0);
	assert_int_equal(store_db_put(d, recs + 8, 8), 0);
	assert_int_equal(store_db_put(d, recs + 16, 8), -1);
	assert_int_equal(store_db_end(d, false, &lost, 5000), -1);
	assert_int_equal(path_count(fx->path, "SELECT count(*) FROM flows"),
	    0);
	assert_int_equal(path_count(fx->path, "SELECT count(*) FROM"
	    " lost_records"), 0);

	/* all well, but not said so: nothing either */
	recs[20].u.flow.verdict = "allow";
	assert_int_equal(store_db_begin(d), 0);
	assert_int_equal(store_db_put(d, recs, 24), 0);
	assert_int_equal(store_db_end(d, false, &lost, 5000), -1);
	assert_int_equal(path_count(fx->path, "SELECT count(*) FROM flows"),
	    0);

	assert_int_equal(store_db_begin(d), 0);
	assert_int_equal(store_db_put(d, recs, 5), 0);
	assert_int_equal(store_db_put(d, recs + 5, 19), 0);
	assert_int_equal(store_db_end(d, true, &lost, 5000), 0);
	store_db_close(d);
	assert_int_equal(path_count(fx->path, "SELECT count(*) FROM flows"
	    " WHERE id = ts - 999 AND dst_port = ts - 1000"), 24);
	assert_int_equal(path_count(fx->path, "SELECT sum(count) FROM"
	    " lost_records WHERE kind = 'flow' AND reason = 'queue_full'"), 2);
}

/*
 * What waits when the writer comes to it goes in one transaction, up to
 * batch_max (4,096 by default), however many pieces it is unpacked in:
 * a writer behind catches up in long transactions, which cost less a
 * row. The rows come out whole and in order across the pieces' seams.
 */
static void
test_long_batch(void **state)
{
	struct fixture *fx = *state;
	struct store_opts slow = { .flush_ms = 600000 };
	struct store_stats stats;
	struct store_flow f;
	struct store *s;
	int i, n = 1300;	/* three pieces of at most 512 */

	s = open_ok(fx->path, &slow);
	usleep(50000);	/* the writer is asleep on an empty queue */
	for (i = 0; i < n; i++) {
		make_flow(&f, 1000 + i, i % 65536);
		snprintf(f.src_ip, sizeof(f.src_ip), "10.%d.%d.2", i / 256,
		    i % 256);
		assert_int_equal(store_put_flow(s, &f), 0);
	}
	usleep(100000);	/* less than a batch: it waits for flush_ms */
	store_stats(s, &stats);
	assert_int_equal(stats.written, 0);
	assert_int_equal(store_flush(s, 5000), 0);
	store_stats(s, &stats);
	assert_int_equal(stats.written, (uint64_t)n);
	assert_int_equal(stats.batches, 1);
	store_close(s);
	assert_int_equal(path_count(fx->path, "SELECT count(*) FROM flows"
	    " WHERE id = ts - 999 AND dst_port = ts - 1000 AND src_ip ="
	    " '10.' || ((ts - 1000) / 256) || '.' || ((ts - 1000) % 256) ||"
	    " '.2'"), n);
}

/* A flow with every string as long as it may be: its packed entry is the
 * largest there is. */
static void
make_big_flow(struct store_flow *f, int64_t ts, int i)
{
	make_flow(f, ts, i);
	fill(f->sandbox, sizeof(f->sandbox), 's');
	fill(f->rule, sizeof(f->rule), 'r');
	fill(f->name, sizeof(f->name), 'n');
	fill(f->sni, sizeof(f->sni), 'a' + i % 26);
	fill(f->http_host, sizeof(f->http_host), 'h');
	fill(f->http_path, sizeof(f->http_path), 'p');
	fill(f->policy_sha256, sizeof(f->policy_sha256), 'f');
	fill(f->alpn, sizeof(f->alpn), 'l');
	fill(f->app, sizeof(f->app), 'x');
}

/*
 * The ring holds packed records, so its size in bytes bounds the queue
 * as well as its count: long records fill it before queue_cap does.
 * Records of every size then wrap it many times over (each entry stays
 * in one piece, the end padded) and come out whole and in order.
 */
static void
test_ring_bytes(void **state)
{
	struct fixture *fx = *state;
	const struct store_opts opts = { .queue_cap = 2000, .batch_max = 50,
	    .flush_ms = 5 };
	const int64_t base = 1700000000000000;
	const int n = 6000;
	struct store_stats stats;
	struct store_flow f;
	struct store_dns d;
	struct store *s;
	sqlite3 *lock;
	char sql[512];
	int i, held, nf = 0, rc;
	int64_t rejected;
	bool room;

	s = open_ok(fx->path, &opts);
	lock = peer_open(fx->path);
	peer_exec(lock, "BEGIN EXCLUSIVE");
	for (held = 0; held < 2000; held++) {
		make_big_flow(&f, base + held, held);
		/* room said for one is room had, however long the record */
		room = store_has_room(s, 1);
		if (store_put_flow(s, &f) == -1)
			break;
	}
	assert_int_equal(errno, ENOBUFS);
	assert_false(room);
	/* 2,000 x 384 bytes and 64 big entries of room: about 540 of these,
	 * far fewer than the 2,000 records queue_cap allows */
	assert_in_range(held, 400, 700);
	assert_false(store_has_room(s, 1));
	assert_true(store_has_room(s, 0));
	store_stats(s, &stats);
	assert_int_equal(stats.depth, held);
	assert_int_equal(stats.rejected, 1);
	/* what stats says of the bytes: nearly all taken, by these records */
	assert_int_equal(stats.capacity, 2000);
	assert_true(stats.depth_bytes <= stats.capacity_bytes);
	assert_true(stats.capacity_bytes - stats.depth_bytes <
	    stats.capacity_bytes / (size_t)held * 2);
	assert_true(stats.depth_bytes >= (size_t)held * sizeof(f) / 2);
	/* a short record still fits where a long one did not, or not: either
	 * way it is counted, never silently dropped */
	make_dns(&d, base + held);
	rc = store_put_dns(s, &d);
	peer_exec(lock, "COMMIT");
	sqlite3_close(lock);
	assert_int_equal(store_flush(s, 20000), 0);
	store_stats(s, &stats);
	assert_int_equal(stats.written, (uint64_t)held + (rc == 0));
	assert_int_equal(stats.depth_bytes, 0);
	assert_int_equal(stats.lost_persisted, 1 + (rc == -1));
	store_close(s);
	assert_int_equal(path_count(fx->path, "SELECT count(*) FROM flows"
	    " WHERE length(sni) = 255 AND length(rule) = 299 AND"
	    " length(http_path) = 127 AND length(app) = 47 AND"
	    " substr(sni, 1, 1) = char(97 + dst_port % 26)"), held);
	peer_exec(lock = peer_open(fx->path), "DELETE FROM flows;"
	    " DELETE FROM dns_queries; DELETE FROM lost_records");
	sqlite3_close(lock);

	/* A producer faster than the writer: the ring stays full and wraps. */
	s = open_ok(fx->path, &opts);
	for (i = 0; i < n; i++) {
		if (i % 3 == 0) {
			make_dns(&d, base + i);
			snprintf(d.qname, sizeof(d.qname), "q%d.example", i);
			d.src_port = i;
		} else if (i % 3 == 1 || i % 7 == 0) {
			make_big_flow(&f, base + i, i % 65536);
			nf++;
		} else {
			make_flow(&f, base + i, i % 65536);
			snprintf(f.sni, sizeof(f.sni), "s%d", i);
			nf++;
		}
		while ((i % 3 == 0 ? store_put_dns(s, &d) :
		    store_put_flow(s, &f)) == -1) {
			assert_int_equal(errno, ENOBUFS);
			usleep(200);
		}
	}
	assert_int_equal(store_flush(s, 60000), 0);
	store_stats(s, &stats);
	assert_int_equal(stats.written, n);
	assert_int_equal(stats.depth, 0);
	rejected = (int64_t)stats.rejected;
	store_close(s);
	assert_int_equal(path_count(fx->path, "SELECT count(*) FROM flows"),
	    nf);
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM flows WHERE"
	    " dst_port = (ts - %lld) %% 65536 AND CASE"
	    " WHEN (ts - %lld) %% 3 = 1 OR (ts - %lld) %% 7 = 0 THEN"
	    " length(sni) = 255 AND length(http_host) = 255 AND"
	    " substr(sni, 255, 1) = char(97 + dst_port %% 26)"
	    " ELSE sni = 's' || (ts - %lld) AND rule = 'example.com:443' END",
	    (long long)base, (long long)base, (long long)base,
	    (long long)base);
	assert_int_equal(path_count(fx->path, sql), nf);
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM dns_queries WHERE"
	    " src_port = ts - %lld AND qname = 'q' || src_port || '.example'"
	    " AND answers = '192.0.2.10,192.0.2.11'", (long long)base);
	assert_int_equal(path_count(fx->path, sql), (n + 2) / 3);
	assert_int_equal(path_count(fx->path, "SELECT count(*) FROM flows a,"
	    " flows b WHERE a.id < b.id AND a.ts > b.ts"), 0);
	assert_int_equal(path_count(fx->path, "SELECT count(*) FROM"
	    " dns_queries a, dns_queries b WHERE a.id < b.id AND a.ts > b.ts"),
	    0);
	/* every refusal on the way is in lost_records, and nothing else */
	assert_int_equal(path_count(fx->path, "SELECT coalesce(sum(count), 0)"
	    " FROM lost_records WHERE reason = 'queue_full'"), rejected);
	assert_int_equal(path_count(fx->path, "SELECT coalesce(sum(count), 0)"
	    " FROM lost_records"), rejected);
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

/* A flow row's end: "id bytes_out packets_out bytes_in packets_in end_ts
 * end_state", "-" for NULL. */
static const char *
flow_end_row(sqlite3 *db, int64_t id, char *buf, size_t len)
{
	char sql[256];

	snprintf(sql, sizeof(sql), "SELECT id || ' ' || coalesce(bytes_out,"
	    " '-') || ' ' || coalesce(packets_out, '-') || ' ' ||"
	    " coalesce(bytes_in, '-') || ' ' || coalesce(packets_in, '-') ||"
	    " ' ' || coalesce(end_ts, '-') || ' ' || coalesce(end_state, '-')"
	    " FROM flows WHERE id = %lld", (long long)id);
	return query_text(db, sql, buf, len);
}

/* make_flow's flow at ts to port dport, queued. */
static void
put_flow_at(struct store *s, int64_t ts, int dport)
{
	struct store_flow f;

	make_flow(&f, ts, dport);
	assert_int_equal(store_put_flow(s, &f), 0);
}

/* The end of make_flow's flow to port dport at ts, bytes_out its
 * counter out (make_end's others), queued. */
static void
put_end_at(struct store *s, int64_t ts, int dport, uint64_t bytes_out)
{
	struct store_flow_end e;

	make_end(&e, ts, "tcp", "10.77.0.2", 40000, "192.0.2.10", dport);
	e.bytes_out = bytes_out;
	assert_int_equal(store_put_flow_end(s, &e), 0);
}

static void
test_flow_end(void **state)
{
	/* each row's end afterwards, by id (flow_end_row) */
	static const char *const want[] = {
		"1 60 1 0 0 6000 reset",
		"2 1000 10 20000 20 1700000000123456 closed",
		"3 1099511627776 9223372036854775807 20000 20 8000 timeout",
		"4 1000 10 20000 20 9000 timeout",
		"5 - - - - - -",
		"6 7 10 20000 20 11000 closed",
		"7 25 10 20000 20 25000 closed",
		"8 35 10 20000 20 35000 closed",
		"9 45 10 20000 20 45000 closed",
	};
	struct fixture *fx = *state;
	struct store_flow f;
	struct store_flow_end e;
	struct store_stats stats;
	struct store *s;
	sqlite3 *db;
	char buf[256];
	size_t i;

	s = open_ok(fx->path, NULL);
	/* 1, 2: one tcp 5-tuple twice; 3: the same addresses and ports in
	 * udp; 4: icmp, no ports; 5: another source port. */
	make_flow(&f, 1000, 443);
	assert_int_equal(store_put_flow(s, &f), 0);
	make_flow(&f, 2000, 443);
	assert_int_equal(store_put_flow(s, &f), 0);
	make_flow(&f, 3000, 443);
	f.proto = "udp";
	assert_int_equal(store_put_flow(s, &f), 0);
	make_flow(&f, 4000, -1);
	f.proto = "icmp";
	f.src_port = -1;
	assert_int_equal(store_put_flow(s, &f), 0);
	make_flow(&f, 4500, 443);
	f.src_port = 40001;
	assert_int_equal(store_put_flow(s, &f), 0);

	/* The newest open row of the tuple, then the one before it. */
	make_end(&e, 1700000000123456, "tcp", "10.77.0.2", 40000,
	    "192.0.2.10", 443);
	assert_int_equal(store_put_flow_end(s, &e), 0);
	make_end(&e, 6000, "tcp", "10.77.0.2", 40000, "192.0.2.10", 443);
	e.bytes_out = 60;
	e.packets_out = 1;
	e.bytes_in = 0;
	e.packets_in = 0;
	e.end_state = "reset";
	assert_int_equal(store_put_flow_end(s, &e), 0);
	/* No open row left: nothing changes, and it is no error. */
	make_end(&e, 7000, "tcp", "10.77.0.2", 40000, "192.0.2.10", 443);
	e.end_state = "late";
	assert_int_equal(store_put_flow_end(s, &e), 0);
	/* Counters beyond SQLite's integers saturate. */
	make_end(&e, 8000, "udp", "10.77.0.2", 40000, "192.0.2.10", 443);
	e.bytes_out = (uint64_t)1 << 40;
	e.packets_out = UINT64_MAX;
	e.end_state = "timeout";
	assert_int_equal(store_put_flow_end(s, &e), 0);
	make_end(&e, 9000, "icmp", "10.77.0.2", -1, "192.0.2.10", -1);
	e.end_state = "timeout";
	assert_int_equal(store_put_flow_end(s, &e), 0);
	/* No such flow; and one that differs only in a port. */
	make_end(&e, 9100, "tcp", "203.0.113.1", 40000, "192.0.2.10", 443);
	assert_int_equal(store_put_flow_end(s, &e), 0);
	make_end(&e, 9200, "tcp", "10.77.0.2", 40001, "192.0.2.10", 80);
	assert_int_equal(store_put_flow_end(s, &e), 0);
	/* A reused tuple starts a new row, which its end closes. */
	put_flow_at(s, 10000, 443);
	put_end_at(s, 11000, 443, 7);
	/* 7, 8: a 5-tuple reused at once, the old end read after the new
	 * row: it goes to the row logged by its time, and the new end to
	 * the new row. 9: a row logged after its end's time (late, or the
	 * clock set back) still gets it, there being no other. */
	put_flow_at(s, 20000, 8443);
	put_flow_at(s, 30000, 8443);
	put_end_at(s, 25000, 8443, 25);
	put_end_at(s, 35000, 8443, 35);
	put_flow_at(s, 50000, 8443);
	put_end_at(s, 45000, 8443, 45);

	assert_int_equal(store_flush(s, 5000), 0);
	store_stats(s, &stats);
	assert_int_equal(stats.queued, 20);
	assert_int_equal(stats.written, 20);
	assert_int_equal(stats.write_errors, 0);
	assert_int_equal(stats.lost_persisted, 0);

	db = peer_open(fx->path);
	for (i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		assert_string_equal(flow_end_row(db, (int64_t)i + 1, buf,
		    sizeof(buf)), want[i]);
	assert_string_equal(query_text(db, "SELECT end_time || ' ' || time"
	    " FROM flow_log WHERE id = 2", buf, sizeof(buf)),
	    "2023-11-14T22:13:20.123Z 1970-01-01T00:00:00.002Z");
	assert_string_equal(query_text(db, "SELECT coalesce(end_time, 'NULL')"
	    " FROM flow_log WHERE id = 5", buf, sizeof(buf)), "NULL");
	sqlite3_close(db);
	store_close(s);

	/* A flow from before a restart gets its end too. */
	s = open_ok(fx->path, NULL);
	make_end(&e, 12000, "tcp", "10.77.0.2", 40001, "192.0.2.10", 443);
	assert_int_equal(store_put_flow_end(s, &e), 0);
	store_close(s);
	db = peer_open(fx->path);
	assert_string_equal(flow_end_row(db, 5, buf, sizeof(buf)),
	    "5 1000 10 20000 20 12000 closed");
	sqlite3_close(db);
}

static void
test_flow_end_refused(void **state)
{
	struct fixture *fx = *state;
	struct store_flow_end e;
	struct store_stats stats;
	struct store *s;
	char buf[256];

	s = open_ok(fx->path, NULL);
	make_end(&e, 1, "tcp", "10.77.0.2", 40000, "192.0.2.10", 443);
	e.proto = NULL;
	errno = 0;
	assert_int_equal(store_put_flow_end(s, &e), -1);
	assert_int_equal(errno, EINVAL);
	make_end(&e, 1, "tcp", "10.77.0.2", 40000, "192.0.2.10", 443);
	e.end_state = NULL;
	errno = 0;
	assert_int_equal(store_put_flow_end(s, &e), -1);
	assert_int_equal(errno, EINVAL);
	make_end(&e, 1, "tcp", "10.77.0.2", -2, "192.0.2.10", 443);
	assert_int_equal(store_put_flow_end(s, &e), -1);
	make_end(&e, 1, "tcp", "10.77.0.2", 40000, "192.0.2.10", 65536);
	assert_int_equal(store_put_flow_end(s, &e), -1);
	make_end(&e, 1, "tcp", "10.77.0.2", 40000, "192.0.2.10", 443);
	memset(e.src_ip, 'x', sizeof(e.src_ip));
	assert_int_equal(store_put_flow_end(s, &e), -1);
	make_end(&e, 1, "tcp", "10.77.0.2", 40000, "192.0.2.10", 443);
	memset(e.dst_ip, 'x', sizeof(e.dst_ip));
	errno = 0;
	assert_int_equal(store_put_flow_end(s, &e), -1);
	assert_int_equal(errno, EINVAL);
	errno = 0;
	assert_int_equal(store_put_flow_end(s, NULL), -1);
	assert_int_equal(errno, EINVAL);
	make_end(&e, 1, "tcp", "10.77.0.2", 40000, "192.0.2.10", 443);
	errno = 0;
	assert_int_equal(store_put_flow_end(NULL, &e), -1);
	assert_int_equal(errno, EINVAL);
	/* The extremes are fine. */
	make_end(&e, 1, "tcp", "10.77.0.2", 65535, "192.0.2.10", 0);
	fill(e.src_ip, sizeof(e.src_ip), '1');
	assert_int_equal(store_put_flow_end(s, &e), 0);

	assert_int_equal(store_flush(s, 5000), 0);
	store_stats(s, &stats);
	assert_int_equal(stats.queued, 1);
	assert_int_equal(stats.written, 1);
	assert_int_equal(stats.rejected, 0);
	assert_int_equal(stats.lost_persisted, 7);
	store_close(s);
	assert_string_equal(lost_summary(fx->path, buf, sizeof(buf)),
	    "flow_end:invalid=7");
}

static void
wait_lost_persisted(struct store *s, uint64_t n)
{
	struct store_stats st;
	int i;

	for (i = 0; i < 500; i++) {
		store_stats(s, &st);
		if (st.lost_persisted == n)
			return;
		usleep(10000);
	}
	fail_msg("lost_persisted stayed at %llu, not %llu",
	    (unsigned long long)st.lost_persisted, (unsigned long long)n);
}

/* What the kernel dropped before sluiced read it: counted by kind, with
 * reason kernel_dropped, the writer woken for it; nothing for 0 or NULL. */
static void
test_kernel_dropped(void **state)
{
	struct fixture *fx = *state;
	struct store_opts opts = { .flush_ms = 20 };
	struct store *s;
	char buf[256];

	s = open_ok(fx->path, &opts);
	usleep(50000);	/* the writer is asleep on an empty queue */
	store_count_flows_dropped(s, 0);
	store_count_flows_dropped(NULL, 7);
	store_count_dns_dropped(NULL, 7);
	store_count_flows_dropped(s, 8199);
	store_count_flows_dropped(s, 3);
	store_count_dns_dropped(s, 5);
	wait_lost_persisted(s, 8207);
	store_close(s);
	assert_string_equal(lost_summary(fx->path, buf, sizeof(buf)),
	    "dns:kernel_dropped=5 flow:kernel_dropped=8202");
}

/* Refusals reach lost_records by themselves, add up, and outlive the store. */
static void
test_lost_records(void **state)
{
	struct fixture *fx = *state;
	struct store_opts opts = { .flush_ms = 20 };
	struct store_flow f;
	struct store_dns d;
	struct store_stats stats;
	struct store *s;
	sqlite3 *db;
	int64_t t0, t1;
	char buf[256];

	s = open_ok(fx->path, &opts);
	usleep(50000);	/* the writer is asleep on an empty queue */
	t0 = store_now_us();
	make_flow(&f, 1, 443);
	f.verdict = "drop";
	assert_int_equal(store_put_flow(s, &f), -1);
	assert_int_equal(store_put_flow(s, &f), -1);
	make_dns(&d, 1);
	d.reason = NULL;
	assert_int_equal(store_put_dns(s, &d), -1);
	/* No flush: the writer wakes for them. */
	wait_lost_persisted(s, 3);
	t1 = store_now_us();
	store_stats(s, &stats);
	assert_int_equal(stats.queued, 0);
	assert_int_equal(stats.written, 0);
	assert_int_equal(stats.batches, 1);

	db = peer_open(fx->path);
	assert_string_equal(query_text(db, "SELECT group_concat(id || ' ' ||"
	    " kind || ' ' || count || ' ' || reason, ';') FROM (SELECT * FROM"
	    " lost_records ORDER BY id)", buf, sizeof(buf)),
	    "1 flow 2 invalid;2 dns 1 invalid");
	assert_int_equal(query_int(db, "SELECT count(DISTINCT ts) FROM"
	    " lost_records"), 1);
	assert_true(query_int(db, "SELECT ts FROM lost_records") >= t0);
	assert_true(query_int(db, "SELECT ts FROM lost_records") <= t1);
	assert_int_equal(query_int(db, "SELECT count(*) FROM lost_log WHERE"
	    " time = strftime('%Y-%m-%dT%H:%M:%fZ', (SELECT ts FROM"
	    " lost_records WHERE id = 1) / 1000000.0, 'unixepoch')"), 2);
	sqlite3_close(db);

	/* Later refusals are new rows; each is counted once. */
	assert_int_equal(store_put_flow(s, &f), -1);
	make_flow(&f, 2, 443);
	assert_int_equal(store_put_flow(s, &f), 0);
	assert_int_equal(store_flush(s, 5000), 0);
	store_stats(s, &stats);
	assert_int_equal(stats.lost_persisted, 4);
	assert_int_equal(stats.written, 1);
	store_close(s);
	assert_string_equal(lost_summary(fx->path, buf, sizeof(buf)),
	    "dns:invalid=1 flow:invalid=3");
	assert_int_equal(path_count(fx->path, "SELECT count(*) FROM"
	    " lost_records"), 3);

	/* A restart starts counting from zero; the rows stay. */
	s = open_ok(fx->path, &opts);
	store_stats(s, &stats);
	assert_int_equal(stats.lost_persisted, 0);
	assert_int_equal(store_put_sandbox(s, 1, "x", "rename", "", ""), -1);
	store_close(s);
	assert_string_equal(lost_summary(fx->path, buf, sizeof(buf)),
	    "dns:invalid=1 flow:invalid=3 sandbox:invalid=1");

	/* The view, for a known time. */
	db = peer_open(fx->path);
	peer_exec(db, "INSERT INTO lost_records (ts, kind, count, reason)"
	    " VALUES (1700000000123456, 'policy', 5, 'queue_full')");
	assert_string_equal(query_text(db, "SELECT time || ' ' || kind || ' ' ||"
	    " count || ' ' || reason FROM lost_log WHERE kind = 'policy'", buf,
	    sizeof(buf)), "2023-11-14T22:13:20.123Z policy 5 queue_full");
	sqlite3_close(db);
}

/* The details of sql's query plan, each followed by '|'. */
static const char *
plan_of(sqlite3 *db, const char *sql, char *buf, size_t len)
{
	sqlite3_stmt *st;
	char q[1024];
	size_t off = 0;

	snprintf(q, sizeof(q), "EXPLAIN QUERY PLAN %s", sql);
	assert_int_equal(sqlite3_prepare_v2(db, q, -1, &st, NULL), SQLITE_OK);
	buf[0] = '\0';
	while (sqlite3_step(st) == SQLITE_ROW && off < len)
		off += (size_t)snprintf(buf + off, len - off, "%s|",
		    (const char *)sqlite3_column_text(st, 3));
	sqlite3_finalize(st);
	assert_true(off < len);
	return buf;
}

/*
 * The statements the writer runs on big tables find their rows through
 * an index (the SQL as in db.c).
 */
static void
test_query_plans(void **state)
{
	struct fixture *fx = *state;
	sqlite3 *db;
	char buf[1024];

	store_close(open_ok(fx->path, NULL));
	db = peer_open(fx->path);
	assert_string_equal(plan_of(db, "UPDATE flows SET bytes_out = ?1,"
	    " packets_out = ?2, bytes_in = ?3, packets_in = ?4, end_ts = ?5,"
	    " end_state = ?6 WHERE id = (SELECT id FROM flows WHERE proto = ?7"
	    " AND src_ip = ?8 AND src_port IS ?9 AND dst_ip = ?10 AND dst_port"
	    " IS ?11 AND end_ts IS NULL ORDER BY id DESC LIMIT 1)", buf,
	    sizeof(buf)), "SEARCH flows USING INTEGER PRIMARY KEY (rowid=?)|"
	    "SCALAR SUBQUERY 1|SEARCH flows USING INDEX flows_tuple (src_ip=?"
	    " AND src_port=? AND dst_ip=? AND dst_port=?)|");
	assert_string_equal(plan_of(db, "DELETE FROM flows WHERE id IN (SELECT"
	    " id FROM flows WHERE ts < ?1 LIMIT ?2)", buf, sizeof(buf)),
	    "SEARCH flows USING INTEGER PRIMARY KEY (rowid=?)|"
	    "LIST SUBQUERY 1|"
	    "SEARCH flows USING COVERING INDEX flows_ts (ts<?)|");
	/* no ts index: the first rows by rowid, as many as the chunk */
	assert_string_equal(plan_of(db, "DELETE FROM dns_queries WHERE id IN"
	    " (SELECT id FROM dns_queries ORDER BY id LIMIT ?2) AND ts < ?1",
	    buf, sizeof(buf)),
	    "SEARCH dns_queries USING INTEGER PRIMARY KEY (rowid=?)|"
	    "LIST SUBQUERY 1|"
	    "SCAN dns_queries|");
	assert_string_equal(plan_of(db, "DELETE FROM lost_records WHERE id IN"
	    " (SELECT id FROM lost_records WHERE ts < ?1 LIMIT ?2)", buf,
	    sizeof(buf)),
	    "SEARCH lost_records USING INTEGER PRIMARY KEY (rowid=?)|"
	    "LIST SUBQUERY 1|"
	    "SEARCH lost_records USING COVERING INDEX lost_records_ts (ts<?)|");
	/* store_reader's: what an open connection presented */
	assert_string_equal(plan_of(db, "SELECT coalesce(nullif(sni, ''),"
	    " nullif(http_host, ''), '') FROM flows WHERE src_ip = ?1 AND"
	    " src_port = ?2 AND dst_ip = ?3 AND dst_port = ?4 AND proto = 'tcp'"
	    " AND end_ts IS NULL AND verdict != 'deny' ORDER BY id DESC"
	    " LIMIT 1", buf, sizeof(buf)),
	    "SEARCH flows USING INDEX flows_tuple (src_ip=? AND src_port=?"
	    " AND dst_ip=? AND dst_port=?)|");
	sqlite3_close(db);
}

static void
wait_purged(struct store *s, uint64_t n)
{
	struct store_stats st;
	int i;

	for (i = 0; i < 1000; i++) {
		store_stats(s, &st);
		if (st.purged >= n)
			break;
		usleep(10000);
	}
	assert_int_equal(st.purged, n);
}

/*
 * DNS queries go from the oldest logged on: a chunk deletes the old ones
 * among the first rows, and one with fewer ends the round. An old row
 * logged more than a chunk after fresh ones (the clock was set back)
 * waits for them.
 */
static void
test_retention_dns_order(void **state)
{
	struct fixture *fx = *state;
	struct store_opts keep = { .flush_ms = 5 };
	struct store_opts retain = { .flush_ms = 5, .retain_days = 2 };
	struct store_dns d;
	struct store *s;
	sqlite3 *db;
	int64_t old, fresh;
	int i;

	old = store_now_us() - 2 * DAY_US - 60000000;
	fresh = store_now_us() - 2 * DAY_US + 3600000000LL;
	s = open_ok(fx->path, &keep);
	for (i = 0; i < 2501; i++) {	/* 1500 old, 1000 fresh, 1 old */
		make_dns(&d, i < 1500 ? old + i : i < 2500 ? fresh : old - 1);
		while (store_put_dns(s, &d) == -1)
			usleep(1000);
	}
	store_close(s);

	s = open_ok(fx->path, &retain);
	wait_purged(s, 1500);
	store_close(s);
	assert_int_equal(path_count(fx->path, "SELECT count(*) FROM"
	    " dns_queries"), 1001);
	assert_int_equal(path_count(fx->path, "SELECT count(*) FROM"
	    " dns_queries WHERE id = 2501"), 1);

	/* Once the fresh ones are old too, all go. */
	db = peer_open(fx->path);
	peer_exec(db, "UPDATE dns_queries SET ts = ts - 7200000000 WHERE"
	    " id <= 2500");
	sqlite3_close(db);
	s = open_ok(fx->path, &retain);
	wait_purged(s, 1001);
	store_close(s);
	assert_int_equal(path_count(fx->path, "SELECT count(*) FROM"
	    " dns_queries"), 0);
}

/* Rows older than retain_days go, in chunks; sandboxes and policies stay. */
static void
test_retention(void **state)
{
	struct fixture *fx = *state;
	struct store_opts keep = { .flush_ms = 5 };
	struct store_opts retain = { .flush_ms = 5, .retain_days = 2 };
	struct store_flow f;
	struct store_dns d;
	struct store_stats stats;
	struct store *s;
	sqlite3 *db;
	int64_t now, old, fresh;
	int i;

	now = store_now_us();
	old = now - 2 * DAY_US - 60000000;	/* a minute past the limit */
	fresh = now - 2 * DAY_US + 3600000000LL;	/* an hour inside */

	/* Written while nothing is purged: 2500 old flows are 3 chunks. */
	s = open_ok(fx->path, &keep);
	assert_int_equal(store_put_sandbox(s, old - 1, "task-a", "add",
	    "sl-task-a", "10.77.0.2/30"), 0);
	assert_int_equal(store_put_policy(s, old, "task-a", "aa", "{}"), 0);
	for (i = 0; i < 2500; i++) {
		make_flow(&f, old + i, 443);
		while (store_put_flow(s, &f) == -1)
			usleep(1000);
	}
	for (i = 0; i < 1200; i++) {
		make_dns(&d, old - i);
		while (store_put_dns(s, &d) == -1)
			usleep(1000);
	}
	make_flow(&f, fresh, 80);
	assert_int_equal(store_put_flow(s, &f), 0);
	make_flow(&f, now, 8080);
	assert_int_equal(store_put_flow(s, &f), 0);
	make_dns(&d, fresh);
	assert_int_equal(store_put_dns(s, &d), 0);
	store_close(s);
	db = peer_open(fx->path);
	peer_exec(db, "INSERT INTO lost_records (ts, kind, count, reason)"
	    " VALUES (1, 'flow', 3, 'queue_full')");
	sqlite3_close(db);
	db = peer_open(fx->path);
	peer_exec(db, "INSERT INTO lost_records (ts, kind, count, reason)"
	    " VALUES (strftime('%s') * 1000000, 'dns', 4, 'queue_full')");
	sqlite3_close(db);
	assert_int_equal(path_count(fx->path, "SELECT count(*) FROM flows"),
	    2502);

	/* The first round starts when the store does. */
	s = open_ok(fx->path, &retain);
	wait_purged(s, 2500 + 1200 + 1);
	store_stats(s, &stats);
	assert_int_equal(stats.write_errors, 0);
	assert_true(store_writable(s));
	store_close(s);

	assert_int_equal(path_count(fx->path, "SELECT count(*) FROM flows"), 2);
	assert_int_equal(path_count(fx->path, "SELECT sum(dst_port) FROM"
	    " flows"), 80 + 8080);
	assert_int_equal(path_count(fx->path, "SELECT count(*) FROM"
	    " dns_queries WHERE ts = (SELECT max(ts) FROM dns_queries)"), 1);
	assert_int_equal(path_count(fx->path, "SELECT count(*) FROM"
	    " dns_queries"), 1);
	assert_int_equal(path_count(fx->path, "SELECT count(*) FROM"
	    " lost_records WHERE kind = 'dns' AND count = 4"), 1);
	assert_int_equal(path_count(fx->path, "SELECT count(*) FROM"
	    " lost_records"), 1);
	assert_int_equal(path_count(fx->path, "SELECT count(*) FROM"
	    " sandboxes"), 1);
	assert_int_equal(path_count(fx->path, "SELECT count(*) FROM"
	    " policies"), 1);
}

static off_t
file_size(const char *path)
{
	struct stat sb;

	return stat(path, &sb) == 0 ? sb.st_size : 0;
}

/* The database file and its WAL, together. */
static off_t
db_size(const char *path)
{
	char wal[256];

	snprintf(wal, sizeof(wal), "%s-wal", path);
	return file_size(path) + file_size(wal);
}

static double
since(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)(t.tv_sec - t0->tv_sec) +
	    (double)(t.tv_nsec - t0->tv_nsec) / 1e9;
}

/*
 * What an open connection presented, read back on a reader's own
 * connection: the newest row that let it through and has no end; its
 * SNI, else its Host; 0 for a tuple with none (a denial, an ended one).
 */
static void
test_reader_presented(void **state)
{
	struct fixture *fx = *state;
	struct store_flow f;
	struct store_flow_end e;
	struct store_reader *r;
	struct store *s;
	char name[256], err[256];

	s = open_ok(fx->path, NULL);
	/* 40000 -> :443, allowed by SNI; then a later connection on the
	 * same tuple, denied */
	make_flow(&f, 1000, 443);
	strcpy(f.sni, "a.example");
	assert_int_equal(store_put_flow(s, &f), 0);
	/* 40001 -> :80, allowed by Host, no SNI */
	make_flow(&f, 1001, 80);
	f.src_port = 40001;
	strcpy(f.http_host, "h.example");
	assert_int_equal(store_put_flow(s, &f), 0);
	/* 40002 -> :443, only denied */
	make_flow(&f, 1002, 443);
	f.src_port = 40002;
	f.verdict = "deny";
	strcpy(f.sni, "evil.example");
	assert_int_equal(store_put_flow(s, &f), 0);
	/* 40003 -> :443, audited, then ended */
	make_flow(&f, 1003, 443);
	f.src_port = 40003;
	f.verdict = "audit";
	strcpy(f.sni, "gone.example");
	assert_int_equal(store_put_flow(s, &f), 0);
	make_end(&e, 1004, "tcp", "10.77.0.2", 40003, "192.0.2.10", 443);
	assert_int_equal(store_put_flow_end(s, &e), 0);
	/* 40004 -> :8443, allowed on the address alone */
	make_flow(&f, 1005, 8443);
	f.src_port = 40004;
	assert_int_equal(store_put_flow(s, &f), 0);
	assert_int_equal(store_flush(s, 5000), 0);

	r = store_reader_open(fx->path, err, sizeof(err));
	assert_non_null(r);
	assert_int_equal(store_reader_presented(r, "10.77.0.2", 40000,
	    "192.0.2.10", 443, name, sizeof(name)), 1);
	assert_string_equal(name, "a.example");
	assert_int_equal(store_reader_presented(r, "10.77.0.2", 40001,
	    "192.0.2.10", 80, name, sizeof(name)), 1);
	assert_string_equal(name, "h.example");
	assert_int_equal(store_reader_presented(r, "10.77.0.2", 40002,
	    "192.0.2.10", 443, name, sizeof(name)), 0);
	assert_int_equal(store_reader_presented(r, "10.77.0.2", 40003,
	    "192.0.2.10", 443, name, sizeof(name)), 0);
	assert_int_equal(store_reader_presented(r, "10.77.0.2", 40004,
	    "192.0.2.10", 8443, name, sizeof(name)), 1);
	assert_string_equal(name, "");
	/* the same statement again, after others: bound afresh */
	assert_int_equal(store_reader_presented(r, "10.77.0.2", 40000,
	    "192.0.2.10", 443, name, sizeof(name)), 1);
	assert_string_equal(name, "a.example");
	/* a reader sees what the writer commits after it opened */
	make_flow(&f, 1006, 443);
	f.src_port = 40005;
	strcpy(f.sni, "late.example");
	assert_int_equal(store_put_flow(s, &f), 0);
	assert_int_equal(store_flush(s, 5000), 0);
	assert_int_equal(store_reader_presented(r, "10.77.0.2", 40005,
	    "192.0.2.10", 443, name, sizeof(name)), 1);
	assert_string_equal(name, "late.example");
	store_reader_close(r);
	store_close(s);

	/* no database there: an error, not a crash */
	assert_null(store_reader_open("/nonexistent/flows.db", err,
	    sizeof(err)));
	assert_true(strstr(err, "/nonexistent/flows.db") != NULL);
	store_reader_close(NULL);
}

/*
 * Rows that expire half a second after they are written, at a steady
 * rate: once the purge keeps up, the file stops growing, since freed
 * pages are reused and the WAL starts over after each round.
 *
 * Each 20 rows wait until they are written. Unpaced, a writer stalled
 * for half a second (a checkpoint's fsync behind another test's writes,
 * the CPUs busy with the unit tests run beside it) came back to a
 * backlog of some 2,000 rows that went in before the next purge round:
 * the WAL grew by a round's worth of pages and the database by the rows
 * not yet purged, 1.3-1.7 times the size after the warm-up, in 1 run of
 * 15 under load and once in CI. That is a backlog catching up, not
 * retention failing; paced by the writer, the test sees only the latter.
 * With the checkpoints and SQLite's autocheckpoint left out, it fails
 * at 2.5 times.
 */
static void
test_retention_bounded(void **state)
{
	struct fixture *fx = *state;
	struct store_opts opts = { .retain_days = 1 };
	struct store_flow f;
	struct store_stats stats;
	struct store *s;
	struct timespec t0;
	off_t warm = 0, size, most = 0;
	int64_t put = 0, put_warm = 0, rows;
	int i;

	s = open_ok(fx->path, &opts);
	store_set_purge_interval(s, 100);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (since(&t0) < 3.5) {
		for (i = 0; i < 20; i++) {
			make_flow(&f, store_now_us() - DAY_US + 500000, 443);
			fill(f.rule, sizeof(f.rule), 'r');
			fill(f.sni, sizeof(f.sni), 's');
			if (store_put_flow(s, &f) == 0)
				put++;
		}
		assert_int_equal(store_flush(s, 10000), 0);
		usleep(5000);
		size = db_size(fx->path);
		if (warm == 0 && since(&t0) >= 1.5) {
			warm = size;
			put_warm = put;
		}
		if (warm != 0 && size > most)
			most = size;
	}
	assert_int_equal(store_flush(s, 10000), 0);
	store_stats(s, &stats);
	store_close(s);

	rows = path_count(fx->path, "SELECT count(*) FROM flows");
	assert_int_equal(stats.write_errors, 0);
	assert_int_equal((int64_t)stats.written, put);
	/* Purging may go on between store_stats and store_close. */
	assert_true(rows <= put - (int64_t)stats.purged);
	assert_true((int64_t)stats.purged > put / 2);
	/*
	 * After the warm-up, rows of over 550 bytes each went in for two
	 * seconds, several times what the file grew by, if at all.
	 */
	assert_true(warm > 0);
	if (most > warm + warm / 4 || put - put_warm < 3000 ||
	    (put - put_warm) * 550 < 4 * (most - warm))
		fail_msg("%lld rows put, %lld after the warm-up; %lld bytes"
		    " then, %lld at most", (long long)put,
		    (long long)(put - put_warm), (long long)warm,
		    (long long)most);
}

/* Puts n flows of over 550 bytes each and waits until they are in. */
static void
put_wide_flows(struct store *s, int n)
{
	struct store_flow f;
	int i;

	for (i = 0; i < n; i++) {
		make_flow(&f, store_now_us(), 443);
		fill(f.rule, sizeof(f.rule), 'r');
		fill(f.sni, sizeof(f.sni), 's');
		assert_int_equal(store_put_flow(s, &f), 0);
		if (i % 1000 == 999)
			assert_int_equal(store_flush(s, 10000), 0);
	}
	assert_int_equal(store_flush(s, 10000), 0);
}

/*
 * A reader that keeps its snapshot holds every checkpoint back, and the
 * WAL grows meanwhile; once the reader is done, the WAL starts over and
 * its file is cut back to the limit, not kept at the size it reached.
 */
static void
test_wal_limit(void **state)
{
	struct fixture *fx = *state;
	struct store_opts opts = { .wal_limit = 1 << 20 };
	struct store_stats stats;
	struct store *s;
	sqlite3 *reader;
	char wal[256];
	off_t grown;
	int round;

	snprintf(wal, sizeof(wal), "%s-wal", fx->path);
	s = open_ok(fx->path, &opts);
	put_wide_flows(s, 10);
	reader = peer_open(fx->path);
	peer_exec(reader, "BEGIN");
	assert_int_equal(query_int(reader, "SELECT count(*) FROM flows"), 10);
	put_wide_flows(s, 8000);
	grown = file_size(wal);
	store_stats(s, &stats);
	assert_int_equal(stats.wal_bytes, grown);
	assert_int_equal(stats.db_bytes, file_size(fx->path));
	if (grown < 3 << 20)
		fail_msg("the WAL grew to %lld bytes only behind the reader",
		    (long long)grown);
	peer_exec(reader, "COMMIT");
	sqlite3_close(reader);

	/* SQLite checkpoints at a commit that finds the WAL past 1,000
	 * pages (16 MB); the commit after that starts it over and cuts it. */
	for (round = 0; round < 40 && file_size(wal) > 1 << 20; round++)
		put_wide_flows(s, 500);
	if (file_size(wal) > 1 << 20)
		fail_msg("the WAL stayed at %lld bytes (%lld behind the reader;"
		    " limit %d)", (long long)file_size(wal), (long long)grown,
		    1 << 20);
	store_stats(s, &stats);
	assert_int_equal(stats.wal_bytes, file_size(wal));
	store_close(s);
	assert_int_equal(path_count(fx->path, "SELECT count(*) FROM flows"),
	    8010 + 500 * round);
}

/*
 * A fault under an open store: start provokes it, clear ends it as an
 * operator would. new_file: the store then writes to a new database at
 * the path (the old one was moved aside).
 */
struct fault {
	struct fixture	*fx;
	char		 path[192];	/* the database */
	void		(*start)(struct fault *);
	void		(*clear)(struct fault *);
	int		 new_file;
	sqlite3		*lock;
	char		 filler[192];
};

/*
 * What every fault must look like from outside: puts succeed while the
 * ring has room and are refused (and counted) after; store_writable()
 * says false and write_errors counts; once the fault clears, writable is
 * true again, everything queued is written, and lost_records holds
 * exactly the refusals.
 */
static void
ride_out_fault(struct fault *ft)
{
	struct store_opts opts = { .queue_cap = 8, .batch_max = 4,
	    .flush_ms = 5 };
	struct store_flow f;
	struct store_dns d;
	struct store_flow_end e;
	struct store_stats stats;
	struct store *s;
	char buf[512];
	int i;

	s = open_ok(ft->path, &opts);
	make_flow(&f, 1, 443);
	f.src_port = 39999;
	assert_int_equal(store_put_flow(s, &f), 0);
	assert_int_equal(store_flush(s, 5000), 0);
	assert_true(store_writable(s));

	ft->start(ft);

	for (i = 0; i < 6; i++) {
		make_flow(&f, 100 + i, 443);
		f.src_port = 41000 + i;
		fill(f.rule, sizeof(f.rule), 'a' + i);
		fill(f.http_host, sizeof(f.http_host), 'h');
		assert_int_equal(store_put_flow(s, &f), 0);
	}
	make_dns(&d, 106);
	assert_int_equal(store_put_dns(s, &d), 0);
	make_end(&e, 107, "tcp", "10.77.0.2", 41000, "192.0.2.10", 443);
	assert_int_equal(store_put_flow_end(s, &e), 0);
	wait_write_error(s);
	assert_false(store_writable(s));

	make_flow(&f, 200, 443);
	errno = 0;
	assert_int_equal(store_put_flow(s, &f), -1);
	assert_int_equal(errno, ENOBUFS);
	make_dns(&d, 201);
	errno = 0;
	assert_int_equal(store_put_dns(s, &d), -1);
	assert_int_equal(errno, ENOBUFS);
	make_end(&e, 202, "tcp", "10.77.0.2", 41001, "192.0.2.10", 443);
	errno = 0;
	assert_int_equal(store_put_flow_end(s, &e), -1);
	assert_int_equal(errno, ENOBUFS);
	errno = 0;
	assert_int_equal(store_put_policy(s, 203, "task-a", "cd", "{}"), -1);
	assert_int_equal(errno, ENOBUFS);
	f.verdict = "drop";
	errno = 0;
	assert_int_equal(store_put_flow(s, &f), -1);
	assert_int_equal(errno, EINVAL);

	errno = 0;
	assert_int_equal(store_flush(s, 300), -1);
	assert_int_equal(errno, ETIMEDOUT);
	store_stats(s, &stats);
	assert_int_equal(stats.queued, 9);
	assert_int_equal(stats.written, 1);
	assert_int_equal(stats.depth, 8);
	assert_int_equal(stats.rejected, 4);
	assert_int_equal(stats.lost_persisted, 0);
	assert_true(stats.write_errors >= 2);
	assert_false(store_writable(s));

	ft->clear(ft);

	assert_int_equal(store_flush(s, 15000), 0);
	assert_true(store_writable(s));
	store_stats(s, &stats);
	assert_int_equal(stats.queued, 9);
	assert_int_equal(stats.written, 9);
	assert_int_equal(stats.depth, 0);
	assert_int_equal(stats.rejected, 4);
	assert_int_equal(stats.lost_persisted, 5);
	store_close(s);

	assert_int_equal(path_count(ft->path, "SELECT count(*) FROM flows"),
	    ft->new_file ? 6 : 7);
	assert_int_equal(path_count(ft->path, "SELECT sum(ts) FROM flows"
	    " WHERE ts >= 100"), 100 + 101 + 102 + 103 + 104 + 105);
	assert_int_equal(path_count(ft->path, "SELECT count(*) FROM flows"
	    " WHERE ts >= 100 AND length(rule) = 299"), 6);
	assert_int_equal(path_count(ft->path, "SELECT count(*) FROM"
	    " dns_queries WHERE ts = 106"), 1);
	assert_int_equal(path_count(ft->path, "SELECT count(*) FROM"
	    " dns_queries"), 1);
	assert_int_equal(path_count(ft->path, "SELECT end_ts FROM flows WHERE"
	    " src_port = 41000"), 107);
	assert_int_equal(path_count(ft->path, "SELECT count(*) FROM flows"
	    " WHERE end_ts IS NOT NULL"), 1);
	assert_int_equal(path_count(ft->path, "SELECT count(*) FROM"
	    " policies"), 0);
	assert_string_equal(lost_summary(ft->path, buf, sizeof(buf)),
	    "dns:queue_full=1 flow:invalid=1 flow:queue_full=1"
	    " flow_end:queue_full=1 policy:queue_full=1");
}

static void
lock_start(struct fault *ft)
{
	ft->lock = peer_open(ft->path);
	peer_exec(ft->lock, "BEGIN EXCLUSIVE");
}

static void
lock_clear(struct fault *ft)
{
	peer_exec(ft->lock, "COMMIT");
	sqlite3_close(ft->lock);
	ft->lock = NULL;
}

/* Another connection holds the write lock. */
static void
test_fault_locked(void **state)
{
	struct fault ft = { .fx = *state, .start = lock_start,
	    .clear = lock_clear };

	snprintf(ft.path, sizeof(ft.path), "%s", ft.fx->path);
	ride_out_fault(&ft);
}

/*
 * Whether the file system refuses writes to an immutable file through
 * a descriptor opened before (ext4 does; tmpfs does not); skips if not.
 */
static void
need_immutable(const char *dir)
{
	char probe[256];
	int fd, refused;

	snprintf(probe, sizeof(probe), "%s/probe", dir);
	fd = open(probe, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	if (set_immutable(probe, 1) == -1) {
		print_message("skipped: chattr +i: %s\n", strerror(errno));
		close(fd);
		unlink(probe);
		skip();
	}
	refused = pwrite(fd, "x", 1, 0) == -1;
	assert_int_equal(set_immutable(probe, 0), 0);
	close(fd);
	unlink(probe);
	if (!refused) {
		print_message("skipped: this file system writes an immutable"
		    " file through an open descriptor\n");
		skip();
	}
}

static void
read_only_start(struct fault *ft)
{
	char wal[256];

	snprintf(wal, sizeof(wal), "%s-wal", ft->path);
	assert_int_equal(set_immutable(ft->path, 1), 0);
	assert_int_equal(set_immutable(wal, 1), 0);
}

static void
read_only_clear(struct fault *ft)
{
	char wal[256];

	snprintf(wal, sizeof(wal), "%s-wal", ft->path);
	assert_int_equal(set_immutable(ft->path, 0), 0);
	assert_int_equal(set_immutable(wal, 0), 0);
}

/*
 * The file cannot be written any more. Root writes a 0444 file all the
 * same, and a file system with a file open for writing cannot be
 * remounted read-only (EBUSY), so the file and its WAL are made
 * immutable instead, which ext4 enforces on open descriptors too.
 */
static void
test_fault_read_only(void **state)
{
	struct fault ft = { .fx = *state, .start = read_only_start,
	    .clear = read_only_clear };

	need_immutable(ft.fx->dir);
	snprintf(ft.path, sizeof(ft.path), "%s", ft.fx->path);
	ride_out_fault(&ft);
}

/* A tmpfs of this size at fx->mnt; skips when it cannot be mounted. */
static void
mount_tmpfs(struct fixture *fx, const char *size)
{
	char opts[64];

	snprintf(fx->mnt, sizeof(fx->mnt), "%s/mnt", fx->dir);
	assert_int_equal(mkdir(fx->mnt, 0700), 0);
	if (geteuid() != 0) {
		print_message("skipped: mounting a tmpfs needs root\n");
		skip();
	}
	snprintf(opts, sizeof(opts), "size=%s,mode=0700", size);
	if (mount("sluice-test", fx->mnt, "tmpfs", MS_NOSUID | MS_NODEV |
	    MS_NOEXEC, opts) == -1) {
		print_message("skipped: mount -t tmpfs: %s\n", strerror(errno));
		skip();
	}
	fx->mounted = 1;
}

/* Writes a file until the file system is full. */
static void
disk_full_start(struct fault *ft)
{
	char page[4096];
	ssize_t n;
	int fd;

	memset(page, 'f', sizeof(page));
	fd = open(ft->filler, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	while ((n = write(fd, page, sizeof(page))) > 0)
		;
	assert_int_equal(n, -1);
	assert_int_equal(errno, ENOSPC);
	close(fd);
}

static void
disk_full_clear(struct fault *ft)
{
	assert_int_equal(unlink(ft->filler), 0);
}

static void
test_fault_disk_full(void **state)
{
	struct fault ft = { .fx = *state, .start = disk_full_start,
	    .clear = disk_full_clear };

	mount_tmpfs(ft.fx, "2m");
	snprintf(ft.path, sizeof(ft.path), "%s/audit.db", ft.fx->mnt);
	snprintf(ft.filler, sizeof(ft.filler), "%s/filler", ft.fx->mnt);
	ride_out_fault(&ft);
}

/*
 * Garbage over the header of the database's first page, while the store
 * has it open. The writer's page cache would hide it, so another
 * connection first checkpoints everything into the file and then writes
 * a row, which makes the writer read the file again.
 */
static void
corrupt_start(struct fault *ft)
{
	char junk[100];
	sqlite3 *db;
	int fd;

	db = peer_open(ft->path);
	peer_exec(db, "PRAGMA wal_checkpoint(TRUNCATE)");
	peer_exec(db, "UPDATE flows SET rule = rule WHERE id = 1");
	sqlite3_close(db);
	memset(junk, 0x5a, sizeof(junk));
	fd = open(ft->path, O_WRONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, junk, sizeof(junk), 0),
	    (ssize_t)sizeof(junk));
	close(fd);
}

/* The operator moves the damaged file aside, with its -wal and -shm. */
static void
corrupt_clear(struct fault *ft)
{
	static const char *const suffixes[] = { "", "-wal", "-shm" };
	char from[256], to[256];
	size_t i;

	for (i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
		snprintf(from, sizeof(from), "%s%s", ft->path, suffixes[i]);
		snprintf(to, sizeof(to), "%s/damaged.db%s", ft->fx->dir,
		    suffixes[i]);
		if (rename(from, to) == -1)
			assert_int_equal(errno, ENOENT);
	}
}

/*
 * The writer keeps the records queued and counts its failures; it drops
 * the connection and opens the path again on each retry, so that once
 * the operator has moved the file aside it starts a new database there.
 */
static void
test_fault_corrupt(void **state)
{
	struct fault ft = { .fx = *state, .start = corrupt_start,
	    .clear = corrupt_clear, .new_file = 1 };
	char err[512], want[512], damaged[256];

	snprintf(ft.path, sizeof(ft.path), "%s", ft.fx->path);
	ride_out_fault(&ft);

	/* The damaged file is refused as it is. */
	snprintf(damaged, sizeof(damaged), "%s/damaged.db", ft.fx->dir);
	assert_null(store_open(damaged, NULL, err, sizeof(err)));
	snprintf(want, sizeof(want), "%s: file is not a database", damaged);
	assert_string_equal(err, want);
}

/* A database cut short is refused, with what to do about it. */
static void
test_open_truncated(void **state)
{
	struct fixture *fx = *state;
	struct store_flow f;
	struct store *s;
	char err[512], want[512];
	int i;

	s = open_ok(fx->path, NULL);
	for (i = 0; i < 500; i++) {
		make_flow(&f, i, 443);
		fill(f.rule, sizeof(f.rule), 'r');
		while (store_put_flow(s, &f) == -1)
			usleep(1000);
	}
	store_close(s);
	assert_true(file_size(fx->path) > 100000);

	assert_int_equal(truncate(fx->path, 8192), 0);
	err[0] = '\0';
	assert_null(store_open(fx->path, NULL, err, sizeof(err)));
	snprintf(want, sizeof(want), "%s: database disk image is malformed:"
	    " the file is damaged or truncated; move it aside with its -wal"
	    " and -shm files", fx->path);
	assert_string_equal(err, want);
	assert_int_equal(file_size(fx->path), 8192);

	/* Shorter than a page, SQLite would take it for an empty file. */
	assert_int_equal(truncate(fx->path, 50), 0);
	assert_null(store_open(fx->path, NULL, err, sizeof(err)));
	snprintf(want, sizeof(want), "%s: only 50 bytes long, not a database"
	    " (truncated?)", fx->path);
	assert_string_equal(err, want);
	assert_int_equal(file_size(fx->path), 50);

	/* An empty file is a new database. */
	assert_int_equal(truncate(fx->path, 0), 0);
	store_close(open_ok(fx->path, NULL));
	assert_int_equal(path_count(fx->path, "PRAGMA user_version"),
	    STORE_SCHEMA_VERSION);
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
		cmocka_unit_test_setup_teardown(test_db_removed, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_close_after_failures,
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
		cmocka_unit_test_setup_teardown(test_upgrade_from_v4, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_upgrade_from_v5, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_upgrade_from_v6, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_newer_schema_refused,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_foreign_db_refused, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_not_a_database, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_bad_paths, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_runs_of_one_kind, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_ring_bytes, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_many_records, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_upgrade_from_v3, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(
		    test_upgrade_v3_is_one_transaction, setup, teardown),
		cmocka_unit_test_setup_teardown(
		    test_upgrade_chain_to_v4_is_one_transaction, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_failed_run_rolls_back,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_wide_runs, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_pieces_roll_back,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_long_batch,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_flow_end, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_flow_end_refused, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_kernel_dropped, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_lost_records, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_query_plans, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_retention_dns_order, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_retention, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_reader_presented, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_retention_bounded, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_wal_limit, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_fault_locked, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_fault_read_only, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_fault_disk_full, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_fault_corrupt, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_open_truncated, setup,
		    teardown),
		cmocka_unit_test(test_now_us),
	};

	umask(022);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
