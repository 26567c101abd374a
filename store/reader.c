/*
 * reader.c: what sluiced reads back from its own log, on a read-only
 * connection of its own (WAL: it neither waits for the writer nor holds
 * it up). Today one thing: the name an open connection was let in with,
 * for a `policy set` to tell whether the new policy still allows it
 * (gateway/revoke.c).
 */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/store.h"

/* A reader gives up on a locked database after this: the answer is then
 * "not known", and the caller decides without it. */
#define READ_BUSY_MS	100

struct store_reader {
	sqlite3		*db;
	sqlite3_stmt	*presented;
};

/*
 * The newest row of a connection still open that was let through (its
 * verdict allow or audit), by flows_tuple: what its first flight
 * presented, the SNI, else the HTTP Host.
 */
static const char presented_sql[] =
	"SELECT coalesce(nullif(sni, ''), nullif(http_host, ''), '')"
	" FROM flows WHERE src_ip = ?1 AND src_port = ?2 AND dst_ip = ?3"
	" AND dst_port = ?4 AND proto = 'tcp' AND end_ts IS NULL"
	" AND verdict != 'deny' ORDER BY id DESC LIMIT 1";

struct store_reader *
store_reader_open(const char *path, char *err, size_t errlen)
{
	struct store_reader *r;
	int rc;

	if ((r = calloc(1, sizeof(*r))) == NULL) {
		snprintf(err, errlen, "%s: out of memory", path);
		return NULL;
	}
	rc = sqlite3_open_v2(path, &r->db, SQLITE_OPEN_READONLY |
	    SQLITE_OPEN_NOMUTEX, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_busy_timeout(r->db, READ_BUSY_MS);
	if (rc == SQLITE_OK)
		rc = sqlite3_prepare_v2(r->db, presented_sql, -1,
		    &r->presented, NULL);
	if (rc != SQLITE_OK) {
		snprintf(err, errlen, "%s: %s", path, r->db != NULL ?
		    sqlite3_errmsg(r->db) : sqlite3_errstr(rc));
		store_reader_close(r);
		return NULL;
	}
	return r;
}

int
store_reader_presented(struct store_reader *r, const char *src_ip,
    int src_port, const char *dst_ip, int dst_port, char *name, size_t len)
{
	int rc, found = 0;

	name[0] = '\0';
	if (sqlite3_bind_text(r->presented, 1, src_ip, -1, SQLITE_STATIC) !=
	    SQLITE_OK ||
	    sqlite3_bind_int(r->presented, 2, src_port) != SQLITE_OK ||
	    sqlite3_bind_text(r->presented, 3, dst_ip, -1, SQLITE_STATIC) !=
	    SQLITE_OK ||
	    sqlite3_bind_int(r->presented, 4, dst_port) != SQLITE_OK) {
		sqlite3_reset(r->presented);
		return -1;
	}
	rc = sqlite3_step(r->presented);
	if (rc == SQLITE_ROW) {
		const unsigned char *t = sqlite3_column_text(r->presented, 0);

		snprintf(name, len, "%s", t != NULL ? (const char *)t : "");
		found = 1;
	} else if (rc != SQLITE_DONE)
		found = -1;
	sqlite3_reset(r->presented);
	sqlite3_clear_bindings(r->presented);
	return found;
}

void
store_reader_close(struct store_reader *r)
{
	if (r == NULL)
		return;
	sqlite3_finalize(r->presented);
	sqlite3_close(r->db);
	free(r);
}
