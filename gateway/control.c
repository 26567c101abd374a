/* control.c: the control socket — sandbox and policy requests from sluice. */
#include <arpa/inet.h>
#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <jansson.h>

#include "gateway/ctl.h"
#include "gateway/gw.h"
#include "gateway/log.h"
#include "gateway/trustdir.h"

#define CTL_GROUP	"sluice"	/* members may use the socket */
#define CTL_IO_MS	2000		/* a client gets this long to talk */

static gid_t ctl_gid;

/*
 * A non-blocking unix stream socket listening at path (shorter than
 * sun_path; the caller checked). A socket file left by a killed daemon is
 * replaced, one that still answers is not. Returns the fd or -1 with err.
 */
int
gw_unix_listen(const char *path, int backlog, char *err, size_t errlen)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int fd;

	if (strlen(path) >= sizeof(sun.sun_path)) {
		snprintf(err, errlen, "%s: path too long", path);
		return -1;
	}
	strcpy(sun.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd == -1) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		return -1;
	}
	/* stale if nobody answers */
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == 0) {
		snprintf(err, errlen, "%s: another sluiced is listening", path);
		close(fd);
		return -1;
	}
	unlink(path);
	if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1 ||
	    listen(fd, backlog) == -1) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

int
gw_control_open(struct gw *gw, char *err, size_t errlen)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	const char *path = gw->cfg.control;
	char dir[PATH_MAX], *slash;
	struct group *gr;
	int fd;

	if (strlen(path) >= sizeof(sun.sun_path)) {
		snprintf(err, errlen, "%s: path too long", path);
		return -1;
	}
	gr = getgrnam(CTL_GROUP);
	ctl_gid = gr ? gr->gr_gid : 0;
	snprintf(dir, sizeof(dir), "%s", path);
	if ((slash = strrchr(dir, '/')) != NULL && slash != dir) {
		*slash = '\0';
		/* made here: the group must be able to reach the socket in it
		 * (an existing directory is left as it is) */
		if (mkdir(dir, 0750) == 0) {
			if (chown(dir, 0, ctl_gid) == -1)
				log_warn("%s: group", dir);
		} else if (errno != EEXIST) {
			snprintf(err, errlen, "%s: %s", dir, strerror(errno));
			return -1;
		}
		/* the socket is chowned and chmodded by its path */
		if (gw_dir_trusted("--control", dir, 0750, err, errlen) == -1)
			return -1;
	}
	if ((fd = gw_unix_listen(path, 64, err, errlen)) == -1)
		return -1;
	if (chown(path, 0, ctl_gid) == -1 || chmod(path, 0660) == -1)
		log_warn("%s: permissions", path);
	gw->ctl_fd = fd;
	return 0;
}

void
gw_control_close(struct gw *gw)
{
	if (gw->ctl_fd != -1) {
		close(gw->ctl_fd);
		unlink(gw->cfg.control);
		gw->ctl_fd = -1;
	}
}

static json_t *
sandbox_json(const struct gw_sandbox *sb)
{
	char ip[INET_ADDRSTRLEN], gwip[INET_ADDRSTRLEN], cidr[INET_ADDRSTRLEN + 4];
	struct in_addr a = { .s_addr = sb->addr }, g = { .s_addr = sb->gw_addr };

	inet_ntop(AF_INET, &a, ip, sizeof(ip));
	inet_ntop(AF_INET, &g, gwip, sizeof(gwip));
	snprintf(cidr, sizeof(cidr), "%s/30", ip);
	return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:I}",
	    "name", sb->name, "ifname", sb->ifname, "addr", cidr,
	    "gateway", gwip, "netns", sb->netns_path,
	    "mode", policy_mode_name(sb->policy->mode),
	    "policy_sha256", sb->policy->sha256,
	    "created_us", (json_int_t)sb->created_us);
}

static json_t *
error_reply(const char *code, const char *msg)
{
	return json_pack("{s:b, s:s, s:s}", "ok", 0, "error", msg, "code", code);
}

/*
 * {"ok":true, ...gw_metrics_json...}, with "prometheus": the exposition
 * text when asked for (`sluice stats --prometheus`).
 */
static json_t *
stats_reply(struct gw *gw, bool prometheus)
{
	struct gw_metrics_state st;
	json_t *reply;
	char *text;
	size_t len;

	gw_metrics_gather(gw, &st);
	if ((reply = gw_metrics_json(gw->metrics, &st)) == NULL)
		return NULL;
	json_object_set_new(reply, "ok", json_true());
	if (prometheus) {
		if ((text = gw_metrics_text(gw->metrics, &st, &len)) == NULL ||
		    json_object_set_new(reply, "prometheus",
		    json_stringn(text, len)) == -1) {
			free(text);
			json_decref(reply);
			return NULL;
		}
		free(text);
	}
	return reply;
}

/* errno from the sandbox layer -> who is to blame */
static const char *
error_code(int e)
{
	return (e == EINVAL || e == EEXIST || e == ENOENT) ? "invalid" : "failed";
}

static json_t *
handle(struct gw *gw, json_t *req, uid_t peer_uid)
{
	const char *cmd = NULL, *name = NULL, *text = NULL, *origin = "policy";
	const char *netns = NULL;
	struct gw_sandbox *sb;
	char err[1024];
	json_t *list;
	unsigned i;
	int rc;

	if (json_unpack(req, "{s:s, s?:s, s?:s, s?:s, s?:s}", "cmd", &cmd,
	    "name", &name, "policy", &text, "origin", &origin,
	    "netns", &netns) == -1)
		return error_reply("invalid", "malformed request");

	if (strcmp(cmd, "sandbox.list") == 0) {
		/* with a name, that sandbox alone (or none): sluice-cni asks
		 * so, since the whole list of thousands outgrows a reply
		 * (CTL_MSG_MAX, 2 MiB, at some 6,400 sandboxes; found by
		 * review, 2026-12-03) */
		list = json_array();
		for (i = 0; i < gw->pool_slots; i++)
			if (gw->slots[i] && (name == NULL ||
			    strcmp(name, gw->slots[i]->name) == 0))
				json_array_append_new(list,
				    sandbox_json(gw->slots[i]));
		return json_pack("{s:b, s:o}", "ok", 1, "sandboxes", list);
	}
	if (strcmp(cmd, "status") == 0) {
		struct store_stats st;
		struct dns_resolver_stats ds;
		struct gw_reaper_stats rs;
		struct nfq_nflog_stats vs = { 0 };
		json_t *o;

		store_stats(gw->store, &st);
		memset(&ds, 0, sizeof(ds));
		if (gw->resolver != NULL)
			dns_resolver_stats(gw->resolver, &ds);
		gw_reaper_stats(gw, &rs);
		if (gw->vlog != NULL)
			nfq_nflog_stats(gw->vlog, &vs);
		o = json_pack("{s:b, s:s, s:I, s:s, s:I, s:{s:I, s:I, s:I, s:I, "
		    "s:I, s:I, s:I, s:I, s:I, s:I, s:I}, "
		    "s:{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:b, s:I, "
		    "s:I, s:I}, "
		    "s:{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, "
		    "s:I, s:I}}",
		    "ok", 1, "version", SLUICE_VERSION,
		    "sandboxes", (json_int_t)gw->nsandboxes,
		    "netns", gw->cfg.netns,
		    "revoked", (json_int_t)gw->revoked,
		    "queue", "packets", (json_int_t)gw->pkts,
		    "errors", (json_int_t)gw->pkt_errors,
		    "denied_unlogged", (json_int_t)gw->denied_unlogged,
		    "verify_expired", (json_int_t)gw->verify_expired,
		    "verify_copies", (json_int_t)vs.packets,
		    "verify_copies_lost", (json_int_t)vs.overruns,
		    "verify_copies_dropped", (json_int_t)vs.dropped,
		    "verify_mark_errors", (json_int_t)gw->verify_mark_errors,
		    "held_flows", (json_int_t)gw_inspect_count(gw),
		    "stale_syns", (json_int_t)gw->stale_syns,
		    "stale_refused", (json_int_t)gw->stale_refused,
		    "store", "queued", (json_int_t)st.queued,
		    "written", (json_int_t)st.written,
		    "rejected", (json_int_t)st.rejected,
		    "write_errors", (json_int_t)st.write_errors,
		    "depth", (json_int_t)st.depth,
		    "depth_bytes", (json_int_t)st.depth_bytes,
		    "capacity", (json_int_t)st.capacity,
		    "capacity_bytes", (json_int_t)st.capacity_bytes,
		    "writable", store_writable(gw->store),
		    "db_bytes", (json_int_t)st.db_bytes,
		    "wal_bytes", (json_int_t)st.wal_bytes,
		    "reopened", (json_int_t)st.reopened,
		    "dns", "queries", (json_int_t)ds.queries,
		    "answered", (json_int_t)ds.answered,
		    "forwarded", (json_int_t)ds.forwarded,
		    "upstream_timeouts", (json_int_t)ds.upstream_timeouts,
		    "malformed", (json_int_t)ds.malformed,
		    "mismatched", (json_int_t)ds.mismatched,
		    "dropped", (json_int_t)ds.dropped,
		    "tcp_conns", (json_int_t)ds.tcp_conns,
		    "cache_hits", (json_int_t)ds.cache_hits,
		    "cache_entries", (json_int_t)ds.cache_entries,
		    "paused", (json_int_t)ds.paused,
		    "bindings", (json_int_t)(gw->bindings ?
		    dns_bindings_count(gw->bindings) : 0));
		/* queries the kernel dropped unread (also in lost_records),
		 * TCP connections beyond the bound (refused, with rows) */
		if (o != NULL) {
			json_t *dns = json_object_get(o, "dns");

			json_object_set_new(dns, "kernel_dropped",
			    json_integer((json_int_t)ds.kernel_dropped));
			json_object_set_new(dns, "tcp_refused",
			    json_integer((json_int_t)ds.tcp_refused));
		}
		/* servers of connections refused after their handshake,
		 * reset; and resets that could not be sent */
		if (o != NULL) {
			json_t *q = json_object_get(o, "queue");

			json_object_set_new(q, "server_resets",
			    json_integer((json_int_t)gw->server_resets));
			json_object_set_new(q, "server_reset_errors",
			    json_integer((json_int_t)gw->server_reset_errors));
			json_object_set_new(q, "server_resets_enabled",
			    json_boolean(gw->rst_fd != -1));
			json_object_set_new(q, "hello_retries",
			    json_integer((json_int_t)gw->hello_retries));
		}
		/* TLS connections named from the classifier's cache, and
		 * those it did not hold */
		if (o != NULL && gw->classifier != NULL) {
			json_t *q = json_object_get(o, "queue");
			uint64_t hits, misses, checks, mismatches;

			nfq_class_cache_stats(gw->classifier, &hits, &misses);
			nfq_class_cache_checks(gw->classifier, &checks,
			    &mismatches);
			json_object_set_new(q, "app_cache_hits",
			    json_integer((json_int_t)hits));
			json_object_set_new(q, "app_cache_misses",
			    json_integer((json_int_t)misses));
			json_object_set_new(q, "app_cache_checks",
			    json_integer((json_int_t)checks));
			json_object_set_new(q, "app_cache_mismatches",
			    json_integer((json_int_t)mismatches));
		}
		/* first flights let out in the kernel (--kernel-sni) */
		if (o != NULL) {
			struct nfq_ksni_stats ks;

			memset(&ks, 0, sizeof(ks));
			if (gw->ksni != NULL)
				nfq_ksni_stats(gw->ksni, &ks);
			json_object_set_new(o, "kernel_sni", json_pack(
			    "{s:b, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, "
			    "s:I, s:I, s:I, s:I}",
			    "enabled", gw->ksni != NULL && gw->ksni_rules,
			    "seen", (json_int_t)ks.seen,
			    "approved", (json_int_t)ks.approved,
			    "unparsed", (json_int_t)ks.unparsed,
			    "unknown", (json_int_t)ks.unknown,
			    "lapsed", (json_int_t)ks.lapsed,
			    "lease_errors", (json_int_t)gw->ksni_lease_errors,
			    "copies", (json_int_t)gw->ksni_copies,
			    "overruled", (json_int_t)gw->ksni_overruled,
			    "unread", (json_int_t)gw->ksni_unread,
			    "learned", (json_int_t)ks.adds,
			    "learn_errors", (json_int_t)ks.add_errors,
			    "clears", (json_int_t)ks.clears));
		}
		/* the kernel's copies: read as they come, or not waited for
		 * (--copy-interval) */
		if (o != NULL) {
			struct nfq_nflog_stats ls = { 0 };

			if (gw->nflog != NULL)
				nfq_nflog_stats(gw->nflog, &ls);
			json_object_set_new(o, "copies", json_pack(
			    "{s:i, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
			    "interval_ms", (int)gw->cfg.copy_interval,
			    "woken", (json_int_t)gw->copies_woken,
			    "unwaited", (json_int_t)gw->copies_unwaited,
			    "put_off_full", (json_int_t)gw->later_full,
			    "early_kept", (json_int_t)gw->early_kept,
			    "early_used", (json_int_t)gw->early_used,
			    "early_pushed", (json_int_t)gw->early_pushed,
			    "older", (json_int_t)gw->copies_older,
			    "lost", (json_int_t)ls.dropped));
		}
		/* deleted sandboxes' veths, removed in the background */
		if (o != NULL)
			json_object_set_new(o, "reaper", json_pack(
			    "{s:I, s:I, s:I}",
			    "pending", (json_int_t)rs.pending,
			    "deleted", (json_int_t)rs.deleted,
			    "failed", (json_int_t)rs.failed));
		return o;
	}
	if (strcmp(cmd, "stats") == 0)
		return stats_reply(gw,
		    json_is_true(json_object_get(req, "prometheus")));
	if (name == NULL)
		return error_reply("invalid", "missing \"name\"");
	if (strcmp(cmd, "sandbox.add") == 0) {
		if (text == NULL)
			return error_reply("invalid", "missing \"policy\"");
		if (netns != NULL && netns[0] != '/')
			return error_reply("invalid", "--netns wants a path, "
			    "e.g. /proc/PID/ns/net or /run/netns/NAME");
		/* a user the socket admits is not root: sluiced must not
		 * open another's namespace for them (attach_netns) */
		gw->attach_uid = peer_uid;
		rc = gw_sandbox_add(gw, name, text, strlen(text), origin,
		    netns, &sb, err, sizeof(err));
		gw->attach_uid = 0;
		if (rc == -1) {
			log_warnx("sandbox add %s: %s", name, err);
			return error_reply(error_code(errno), err);
		}
		log_info("sandbox %s added (%s, policy %.12s)", name, sb->ifname,
		    sb->policy->sha256);
		return json_pack("{s:b, s:o}", "ok", 1, "sandbox",
		    sandbox_json(sb));
	}
	if (strcmp(cmd, "sandbox.del") == 0) {
		if (gw_sandbox_del(gw, name, err, sizeof(err)) == -1)
			return error_reply(error_code(errno), err);
		log_info("sandbox %s deleted", name);
		return json_pack("{s:b}", "ok", 1);
	}
	if (strcmp(cmd, "policy.set") == 0) {
		if (text == NULL)
			return error_reply("invalid", "missing \"policy\"");
		if (gw_sandbox_set_policy(gw, name, text, strlen(text), origin,
		    &sb, err, sizeof(err)) == -1) {
			log_warnx("policy set %s: %s (old policy stays)", name, err);
			return error_reply(error_code(errno), err);
		}
		log_info("sandbox %s: policy %.12s", name, sb->policy->sha256);
		return json_pack("{s:b, s:o}", "ok", 1, "sandbox",
		    sandbox_json(sb));
	}
	snprintf(err, sizeof(err), "unknown command \"%s\"", cmd);
	return error_reply("invalid", err);
}

/*
 * Clients are served inside the event loop without ever blocking it: each
 * connection is read as bytes arrive, answered when its line is complete,
 * and written as the socket takes it. A client that is slow or silent
 * costs a slot, not the gateway's time: after CTL_IO_MS it is dropped.
 */
#define CTL_CLIENTS	16

struct ctl_client {
	int		 fd;		/* -1: free */
	char		*in;
	size_t		 inlen, incap;
	char		*out;		/* the reply, once made */
	size_t		 outlen, outoff;
	uint64_t	 deadline;
	uid_t		 uid;		/* SO_PEERCRED's */
};

static struct ctl_client clients[CTL_CLIENTS];
static bool clients_ready;

static void
client_close(struct ctl_client *c)
{
	if (c->fd != -1)
		close(c->fd);
	free(c->in);
	free(c->out);
	memset(c, 0, sizeof(*c));
	c->fd = -1;
}

static void
client_reply(struct ctl_client *c, json_t *reply)
{
	char *s;

	if (reply == NULL)
		reply = error_reply("failed", "out of memory");
	s = json_dumps(reply, JSON_COMPACT);
	json_decref(reply);
	if (s == NULL) {
		client_close(c);
		return;
	}
	c->outlen = strlen(s) + 1;
	c->out = realloc(s, c->outlen + 1);
	if (c->out == NULL) {
		free(s);
		client_close(c);
		return;
	}
	c->out[c->outlen - 1] = '\n';
	c->outoff = 0;
}

static void
client_request(struct gw *gw, struct ctl_client *c)
{
	json_error_t jerr;
	json_t *req;

	if ((req = json_loadb(c->in, c->inlen, JSON_DISABLE_EOF_CHECK |
	    JSON_REJECT_DUPLICATES, &jerr)) == NULL || !json_is_object(req)) {
		json_decref(req);
		client_reply(c, error_reply("invalid",
		    "request is not a JSON object"));
		return;
	}
	client_reply(c, handle(gw, req, c->uid));
	json_decref(req);
}

static void
client_io(struct gw *gw, struct ctl_client *c, short revents)
{
	ssize_t n;

	if (c->out != NULL) {
		if (!(revents & (POLLOUT | POLLERR | POLLHUP)))
			return;
		n = write(c->fd, c->out + c->outoff, c->outlen - c->outoff);
		if (n > 0)
			c->outoff += (size_t)n;
		if ((n < 0 && errno != EAGAIN && errno != EINTR) ||
		    c->outoff == c->outlen)
			client_close(c);
		return;
	}
	if (!(revents & (POLLIN | POLLERR | POLLHUP)))
		return;
	if (c->inlen == c->incap) {
		char *nb;

		if (c->incap >= CTL_MSG_MAX) {
			client_reply(c, error_reply("invalid", "request too long"));
			return;
		}
		c->incap = c->incap ? c->incap * 2 : 4096;
		if ((nb = realloc(c->in, c->incap)) == NULL) {
			client_close(c);
			return;
		}
		c->in = nb;
	}
	n = read(c->fd, c->in + c->inlen, c->incap - c->inlen);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		if (c->inlen > 0)
			client_reply(c, error_reply("invalid",
			    "no complete request"));
		else
			client_close(c);
		return;
	}
	c->inlen += (size_t)n;
	if (memchr(c->in + c->inlen - (size_t)n, '\n', (size_t)n) != NULL)
		client_request(gw, c);
}

/*
 * root, or a member of the socket's group — as primary group, or as a
 * supplementary one, read from the peer's /proc/PID/status (SO_PEERCRED
 * carries only the primary group).
 */
static bool
peer_allowed(const struct ucred *cred)
{
	char path[64], line[1024];
	bool ok = false;
	FILE *f;

	if (cred->uid == 0 || cred->gid == ctl_gid)
		return true;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)cred->pid);
	if ((f = fopen(path, "re")) == NULL)
		return false;
	while (!ok && fgets(line, sizeof(line), f) != NULL) {
		char *p = line + 7, *end;

		if (strncmp(line, "Groups:", 7) != 0)
			continue;
		for (;;) {
			unsigned long g;

			errno = 0;
			g = strtoul(p, &end, 10);
			if (end == p || errno != 0)
				break;
			if ((gid_t)g == ctl_gid)
				ok = true;
			p = end;
		}
		break;
	}
	fclose(f);
	return ok;
}

void
gw_control_accept(struct gw *gw, uint64_t now_ms)
{
	struct ucred cred;
	socklen_t clen = sizeof(cred);
	struct ctl_client *c = NULL;
	size_t i;
	int fd;

	if (!clients_ready) {
		for (i = 0; i < CTL_CLIENTS; i++)
			clients[i].fd = -1;
		clients_ready = true;
	}
	fd = accept4(gw->ctl_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (fd == -1) {
		if (errno != EAGAIN && errno != EINTR)
			log_warn("control accept");
		return;
	}
	for (i = 0; i < CTL_CLIENTS; i++)
		if (clients[i].fd == -1) {
			c = &clients[i];
			break;
		}
	if (c == NULL) {
		/* all slots taken: busy, come back (the CLI says so) */
		close(fd);
		return;
	}
	c->fd = fd;
	c->deadline = now_ms + CTL_IO_MS;
	c->uid = (uid_t)-1;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) == -1 ||
	    (c->uid = cred.uid, !peer_allowed(&cred)))
		client_reply(c, error_reply("failed", "permission denied"));
}

size_t
gw_control_pollfds(struct pollfd *pfd, size_t max)
{
	size_t i, n = 0;

	for (i = 0; clients_ready && i < CTL_CLIENTS && n < max; i++) {
		if (clients[i].fd == -1)
			continue;
		pfd[n].fd = clients[i].fd;
		pfd[n].events = clients[i].out ? POLLOUT : POLLIN;
		pfd[n].revents = 0;
		n++;
	}
	return n;
}

void
gw_control_process(struct gw *gw, const struct pollfd *pfd, size_t n,
    uint64_t now_ms)
{
	size_t i, k;

	for (k = 0; k < n; k++) {
		if (pfd[k].revents == 0)
			continue;
		for (i = 0; i < CTL_CLIENTS; i++)
			if (clients[i].fd == pfd[k].fd) {
				client_io(gw, &clients[i], pfd[k].revents);
				break;
			}
	}
	for (i = 0; clients_ready && i < CTL_CLIENTS; i++)
		if (clients[i].fd != -1 && clients[i].deadline <= now_ms)
			client_close(&clients[i]);
}

int
gw_control_timeout(uint64_t now_ms)
{
	uint64_t next = UINT64_MAX;
	size_t i;

	for (i = 0; clients_ready && i < CTL_CLIENTS; i++)
		if (clients[i].fd != -1 && clients[i].deadline < next)
			next = clients[i].deadline;
	if (next == UINT64_MAX)
		return -1;
	return next <= now_ms ? 0 : (int)(next - now_ms);
}
