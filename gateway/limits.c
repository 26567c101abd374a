/* limits.c: per-sandbox fairness — new flows and DNS queries per second, held flights, and the throttled rows of what they deny. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "gateway/gw.h"
#include "gateway/limits.h"
#include "gateway/verdict.h"

/* ---- the pure part ------------------------------------------------------ */

bool
gw_bucket_take(struct gw_bucket *b, const struct gw_rate *r, uint64_t now_ms)
{
	uint64_t size, elapsed;

	if (r->rate == 0)
		return true;
	size = (uint64_t)(r->burst > 0 ? r->burst : 1) * 1000;
	if (now_ms > b->last_ms) {
		elapsed = now_ms - b->last_ms;
		/* compared before multiplying: a long pause cannot overflow */
		if (elapsed >= b->debt / r->rate + 1)
			b->debt = 0;
		else
			b->debt -= elapsed * r->rate;
		b->last_ms = now_ms;
	}
	/* a smaller burst set since (a new configuration) caps what is left */
	if (b->debt + 1000 > size)
		return false;
	b->debt += 1000;
	return true;
}

bool
gw_limit_log_admit(struct gw_limit_log *l, unsigned max_rows, uint64_t now_ms)
{
	if (l->window_ms == 0 || now_ms >= l->window_ms + GW_LIMIT_WINDOW_MS ||
	    now_ms < l->window_ms) {
		/* a count not taken yet stays, and is summarised with this
		 * second's */
		l->window_ms = now_ms > 0 ? now_ms : 1;
		l->rows = 0;
	}
	if (l->rows < max_rows) {
		l->rows++;
		return true;
	}
	l->unlogged++;
	return false;
}

uint64_t
gw_limit_log_take(struct gw_limit_log *l, uint64_t now_ms, bool force)
{
	uint64_t n = l->unlogged;

	if (n == 0 || (!force && now_ms < gw_limit_log_due(l)))
		return 0;
	l->unlogged = 0;
	return n;
}

uint64_t
gw_limit_log_due(const struct gw_limit_log *l)
{
	if (l->unlogged == 0)
		return UINT64_MAX;
	return l->window_ms + GW_LIMIT_WINDOW_MS;
}

int
gw_hold_check(unsigned used, unsigned max, unsigned sb_holds, unsigned limit)
{
	if (used >= max)
		return ENOSPC;
	if (limit == 0)
		return 0;
	if (sb_holds >= limit)
		return EBUSY;
	if (max - used <= max / 4 && sb_holds >= GW_HOLD_LIGHT)
		return EBUSY;
	return 0;
}

char *
gw_limit_rule(char *buf, size_t len, enum gw_limit_kind kind,
    const struct gw_rate *r, unsigned holds, uint64_t summarised)
{
	char what[64];

	switch (kind) {
	case GW_LIMIT_HOLDS:
		snprintf(what, sizeof(what), "limit-holds %u (%u once the "
		    "table is 3/4 full)", holds, GW_HOLD_LIGHT);
		break;
	case GW_LIMIT_DNS:
	case GW_LIMIT_CONN:
	default:
		snprintf(what, sizeof(what), "limit-%s-rate %u/s burst %u",
		    kind == GW_LIMIT_DNS ? "dns" : "conn", r->rate, r->burst);
		break;
	}
	if (summarised > 0)
		snprintf(buf, len, "%llu attempts summarised (this one the "
		    "last): %s", (unsigned long long)summarised, what);
	else
		snprintf(buf, len, "%s", what);
	return buf;
}

/* ---- the daemon's side -------------------------------------------------- */

#define LIMIT_RULE_MAX	160

static struct gw_rate
conn_rate(const struct gw *gw)
{
	return (struct gw_rate){ gw->cfg.limit_conn_rate,
	    gw->cfg.limit_conn_burst };
}

static struct gw_rate
dns_rate(const struct gw *gw)
{
	return (struct gw_rate){ gw->cfg.limit_dns_rate,
	    gw->cfg.limit_dns_burst };
}

bool
gw_limit_conn(struct gw *gw, struct gw_sandbox *sb, uint64_t now)
{
	struct gw_rate r = conn_rate(gw);

	return gw_bucket_take(&sb->limited.conn, &r, now);
}

bool
gw_limit_dns(struct gw *gw, struct gw_sandbox *sb, uint64_t now)
{
	struct gw_rate r = dns_rate(gw);

	return gw_bucket_take(&sb->limited.dns, &r, now);
}

int
gw_limit_hold(const struct gw *gw, const struct gw_sandbox *sb, size_t used)
{
	return gw_hold_check((unsigned)used, GW_HOLD_MAX, sb->holds,
	    gw->cfg.limit_holds);
}

const char *
gw_limit_rule_text(const struct gw *gw, enum gw_limit_kind kind, char *buf,
    size_t len, uint64_t summarised)
{
	struct gw_rate r = kind == GW_LIMIT_DNS ? dns_rate(gw) : conn_rate(gw);

	return gw_limit_rule(buf, len, kind, &r, gw->cfg.limit_holds,
	    summarised);
}

/* A sandbox with a count to summarise goes on gw->limited, for the timer. */
static void
list_add(struct gw *gw, struct gw_sandbox *sb)
{
	if (sb->limited.listed)
		return;
	sb->limited.listed = true;
	sb->limited.next = gw->limited;
	gw->limited = sb;
}

static void
flow_summary(struct gw *gw, struct gw_sandbox *sb, uint64_t n)
{
	struct gw_limited *lim = &sb->limited;
	struct nfq_tuple t;
	struct gw_decision d = { GW_DENY, GW_R_RATE_LIMITED, NULL, NULL, "", 0 };
	char rule[LIMIT_RULE_MAX];

	memset(&t, 0, sizeof(t));
	t.proto = lim->proto;
	t.saddr = lim->saddr;
	t.daddr = lim->daddr;
	t.sport = lim->sport;
	t.dport = lim->dport;
	d.rule = gw_limit_rule_text(gw, lim->flow_kind, rule, sizeof(rule), n);
	if (gw_log_flow(gw, sb, &t, &d, NULL) == -1) {
		/* the row stood for n attempts: each is lost */
		store_count_refused(gw->store, true, errno, n);
		gw->denied_unlogged++;
	}
}

static void
dns_summary(struct gw *gw, struct gw_sandbox *sb, uint64_t n)
{
	struct gw_limited *lim = &sb->limited;
	struct store_dns d;
	struct in_addr a = { .s_addr = sb->addr };
	char tbuf[16];

	memset(&d, 0, sizeof(d));
	d.ts_us = store_now_us();
	snprintf(d.sandbox, sizeof(d.sandbox), "%s", sb->name);
	d.proto = lim->tcp ? "tcp" : "udp";
	inet_ntop(AF_INET, &a, d.src_ip, sizeof(d.src_ip));
	d.src_port = lim->src_port;
	if (lim->parsed) {
		snprintf(d.qname, sizeof(d.qname), "%s", lim->qname);
		snprintf(d.qtype, sizeof(d.qtype), "%s",
		    dns_type_str(lim->qtype, tbuf, sizeof(tbuf)));
	}
	/* what the resolver sent the last of them */
	d.rcode = lim->parsed ? "REFUSED" : "FORMERR";
	d.verdict = "deny";
	d.reason = "rate_limited";
	gw_limit_rule_text(gw, GW_LIMIT_DNS, d.rule, sizeof(d.rule), n);
	snprintf(d.policy_sha256, sizeof(d.policy_sha256), "%s",
	    sb->policy->sha256);
	if (store_put_dns(gw->store, &d) == -1) {
		store_count_refused(gw->store, false, errno, n);
		gw->denied_unlogged++;
	}
}

/* Writes sb's summaries that are due (all of them when force). */
static void
summarise(struct gw *gw, struct gw_sandbox *sb, uint64_t now, bool force)
{
	uint64_t n;

	if ((n = gw_limit_log_take(&sb->limited.flow_log, now, force)) > 0)
		flow_summary(gw, sb, n);
	if ((n = gw_limit_log_take(&sb->limited.dns_log, now, force)) > 0)
		dns_summary(gw, sb, n);
}

int
gw_limit_log_flow(struct gw *gw, struct gw_sandbox *sb,
    const struct nfq_tuple *t, enum gw_limit_kind kind, uint64_t now)
{
	struct gw_limited *lim = &sb->limited;
	struct gw_decision d = { GW_DENY, GW_R_RATE_LIMITED, NULL, NULL, "", 0 };
	char rule[LIMIT_RULE_MAX];

	gw->limited_flows++;
	/* the last second's count first, before its last attempt is
	 * overwritten by this one */
	summarise(gw, sb, now, false);
	if (!gw_limit_log_admit(&lim->flow_log, GW_LIMIT_LOG_ROWS, now)) {
		lim->flow_kind = kind;
		lim->proto = t->proto;
		lim->saddr = t->saddr;
		lim->daddr = t->daddr;
		lim->sport = t->sport;
		lim->dport = t->dport;
		list_add(gw, sb);
		return 1;
	}
	d.rule = gw_limit_rule_text(gw, kind, rule, sizeof(rule), 0);
	if (gw_log_flow(gw, sb, t, &d, NULL) == -1) {
		gw->denied_unlogged++;
		return -1;
	}
	return 0;
}

bool
gw_limit_log_dns(struct gw *gw, struct gw_sandbox *sb,
    const struct dns_request *req, uint64_t now)
{
	struct gw_limited *lim = &sb->limited;

	gw->limited_dns++;
	summarise(gw, sb, now, false);
	if (gw_limit_log_admit(&lim->dns_log, GW_LIMIT_LOG_ROWS, now))
		return true;
	lim->parsed = req->perr == DNS_PARSE_OK;
	snprintf(lim->qname, sizeof(lim->qname), "%s",
	    lim->parsed ? req->q.qname : "");
	lim->qtype = req->q.qtype;
	lim->tcp = req->tcp;
	lim->src_port = req->src_port;
	list_add(gw, sb);
	return false;
}

void
gw_limits_expire(struct gw *gw, uint64_t now, bool force)
{
	struct gw_sandbox **pp = &gw->limited, *sb;

	while ((sb = *pp) != NULL) {
		summarise(gw, sb, now, force);
		if (sb->limited.flow_log.unlogged == 0 &&
		    sb->limited.dns_log.unlogged == 0) {
			*pp = sb->limited.next;
			sb->limited.next = NULL;
			sb->limited.listed = false;
		} else
			pp = &sb->limited.next;
	}
}

int
gw_limits_timeout(const struct gw *gw, uint64_t now)
{
	const struct gw_sandbox *sb;
	uint64_t next = UINT64_MAX, due;

	for (sb = gw->limited; sb != NULL; sb = sb->limited.next) {
		if ((due = gw_limit_log_due(&sb->limited.flow_log)) < next)
			next = due;
		if ((due = gw_limit_log_due(&sb->limited.dns_log)) < next)
			next = due;
	}
	if (next == UINT64_MAX)
		return -1;
	return next <= now ? 0 : (int)(next - now);
}

void
gw_limits_forget(struct gw *gw, uint32_t ifindex)
{
	struct gw_sandbox **pp = &gw->limited, *sb;

	while ((sb = *pp) != NULL) {
		if (sb->ifindex != ifindex) {
			pp = &sb->limited.next;
			continue;
		}
		/* the sandbox goes: its counts are written now, while its
		 * name and policy are still there */
		summarise(gw, sb, 0, true);
		*pp = sb->limited.next;
		sb->limited.next = NULL;
		sb->limited.listed = false;
	}
}
