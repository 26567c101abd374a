/* flowlog.c: one row of the flows table, from a decision. */
#include <arpa/inet.h>
#include <linux/netfilter.h>
#include <netinet/in.h>
#include <string.h>

#include "gateway/addr.h"
#include "gateway/gw.h"
#include "gateway/log.h"
#include "gateway/verdict.h"

/*
 * What every row has, from the sandbox and the decision; then queues it.
 * Returns -1 when the log cannot take it: the caller then denies (a flow
 * that cannot be logged is not let through). Rows queued are counted by
 * verdict and reason (metrics.h), so the counters equal the rows the
 * database gets; refused ones are counted as lost by the store.
 */
static int
put_row(struct gw *gw, const struct gw_sandbox *sb, struct store_flow *f,
    const struct gw_decision *d, const char *sha256)
{
	f->ts_us = store_now_us();
	if (sb != NULL) {
		gw_strcopy(f->sandbox, sizeof(f->sandbox), sb->name);
		gw_strcopy(f->policy_sha256, sizeof(f->policy_sha256),
		    sha256 != NULL ? sha256 : sb->policy->sha256);
	}
	f->verdict = gw_verdict_name(d->verdict);
	f->reason = gw_reason_name(d->reason);
	gw_strcopy(f->rule, sizeof(f->rule), d->rule);
	gw_strcopy(f->name, sizeof(f->name), d->name);
	if (store_put_flow(gw->store, f) == -1)
		return -1;
	gw_metrics_flow(gw->metrics, d->verdict, d->reason);
	return 0;
}

int
gw_log_flow(struct gw *gw, const struct gw_sandbox *sb,
    const struct nfq_tuple *t, const struct gw_decision *d,
    const struct gw_flow_extra *x)
{
	struct store_flow f;
	bool ports = t->proto == IPPROTO_TCP || t->proto == IPPROTO_UDP;

	memset(&f, 0, sizeof(f));
	f.proto = nfq_proto_name(t->proto);
	gw_addr_str(t->saddr, f.src_ip);
	gw_addr_str(t->daddr, f.dst_ip);
	f.src_port = ports ? t->sport : -1;
	f.dst_port = ports ? t->dport : -1;
	if (x != NULL) {
		gw_strcopy(f.sni, sizeof(f.sni), x->sni);
		gw_strcopy(f.tls_version, sizeof(f.tls_version), x->tls_version);
		gw_strcopy(f.alpn, sizeof(f.alpn), x->alpn);
		gw_strcopy(f.http_method, sizeof(f.http_method), x->http_method);
		gw_strcopy(f.http_host, sizeof(f.http_host), x->http_host);
		gw_strcopy(f.http_path, sizeof(f.http_path), x->http_path);
		gw_strcopy(f.app, sizeof(f.app), x->app);
	}
	return put_row(gw, sb, &f, d, x != NULL ? x->policy_sha256 : NULL);
}

/* The row of an IPv6 attempt (ipv6.c): addresses as text, nothing read. */
int
gw_log_flow6(struct gw *gw, const struct gw_sandbox *sb,
    const struct nfq_tuple6 *t, const struct gw_decision *d)
{
	struct store_flow f;
	bool ports = t->proto == IPPROTO_TCP || t->proto == IPPROTO_UDP;

	memset(&f, 0, sizeof(f));
	f.proto = nfq_proto_name(t->proto);
	inet_ntop(AF_INET6, t->saddr, f.src_ip, sizeof(f.src_ip));
	inet_ntop(AF_INET6, t->daddr, f.dst_ip, sizeof(f.dst_ip));
	f.src_port = ports ? t->sport : -1;
	f.dst_port = ports ? t->dport : -1;
	return put_row(gw, sb, &f, d, NULL);
}

/* ---- connection ends (conntrack destroy events) ------------------------ */

void
gw_ct_flow_key(const struct gw_sandbox *sb, const struct nfq_ct_end *e,
    struct nfq_flow_key *key)
{
	memset(key, 0, sizeof(*key));
	key->ifindex = sb->ifindex;
	key->saddr = e->saddr;
	key->daddr = e->daddr;
	key->sport = e->sport;
	key->dport = e->dport;
	key->proto = IPPROTO_TCP;
}

int
gw_log_flow_end(struct gw *gw, const struct nfq_ct_end *e,
    const char *end_state)
{
	struct store_flow_end fe;
	bool ports = e->proto == IPPROTO_TCP || e->proto == IPPROTO_UDP;

	memset(&fe, 0, sizeof(fe));
	/* conntrack's own time of the end where it dates its entries: an
	 * end read after the row of a new connection on the same 5-tuple
	 * still predates that row, which is how the store tells the two
	 * apart (store.h) */
	fe.ts_us = e->stop_ns != 0 ? (int64_t)(e->stop_ns / 1000) :
	    store_now_us();
	fe.proto = nfq_proto_name(e->proto);
	gw_addr_str(e->saddr, fe.src_ip);
	gw_addr_str(e->daddr, fe.dst_ip);
	fe.src_port = ports ? e->sport : -1;
	fe.dst_port = ports ? e->dport : -1;
	fe.bytes_out = e->bytes_orig;
	fe.packets_out = e->packets_orig;
	fe.bytes_in = e->bytes_reply;
	fe.packets_in = e->packets_reply;
	fe.end_state = end_state;
	if (store_put_flow_end(gw->store, &fe) == -1) {
		gw->denied_unlogged++;
		return -1;
	}
	return 0;
}

/*
 * A connection ended: its row gets the counters, and the flow table
 * forgets its 5-tuple (synpath.c: a SYN on it now is a new connection,
 * never a retransmission of the old one's).
 */
static void
on_end(void *arg, const struct nfq_ct_end *e)
{
	struct gw *gw = arg;
	const struct gw_sandbox *sb;

	/* only the sandboxes' connections have rows (not the resolver's
	 * own queries upstream) */
	if ((e->saddr & gw->pool_mask) != gw->pool_net)
		return;
	if (e->proto == IPPROTO_TCP &&
	    (sb = gw_sandbox_by_addr(gw, e->saddr)) != NULL) {
		struct nfq_flow_key key;
		const struct nfq_flow *fl;

		gw_ct_flow_key(sb, e, &key);
		/* only an allowed SYN's entry, the one synpath.c asks about:
		 * an end read late may be an older connection's than the
		 * entry (a verified flight's, a denial's), and one that
		 * conntrack dates before the entry's SYN was decided is: the
		 * 5-tuple reopened at once, and the new SYN, which may come
		 * again, keeps its verdict */
		if ((fl = nfq_flows_lookup(gw->flows, &key,
		    gw_now_ms())) != NULL && fl->verdict == NF_ACCEPT &&
		    !fl->flight && (e->stop_ns == 0 ||
		    e->stop_ns / 1000 >= fl->since_us))
			nfq_flows_remove(gw->flows, &key);
	}
	(void)gw_log_flow_end(gw, e, nfq_ct_end_state(e));
}

/* Bounds a read of everything pending: 64 datagrams a batch. */
#define CT_READ_BATCHES	64

bool
gw_ct_read(struct gw *gw, bool all)
{
	uint64_t lost, now;
	bool drained = false;
	int i;

	if (gw->ct == NULL)
		return false;
	for (i = 0; i < (all ? CT_READ_BATCHES : 1); i++)
		if (nfq_ct_recv(gw->ct, on_end, gw) == -1 ||
		    (drained = nfq_ct_drained(gw->ct)))
			break;
	now = gw_now_ms();
	if ((lost = nfq_ct_lost(gw->ct)) != gw->ct_lost_seen) {
		gw->ct_lost_seen = lost;
		gw->ct_lost_ms = now;
	}
	return drained && (gw->ct_lost_ms == 0 ||
	    now - gw->ct_lost_ms > 2 * GW_FLOW_ALLOW_TTL_MS);
}

void
gw_log_lost_at_close(size_t n)
{
	if (n > 0)
		log_warnx("the log closed with %zu record%s not written (the "
		    "database stayed locked or unwritable for 2 s): they are "
		    "lost, and not counted in lost_records", n,
		    n == 1 ? "" : "s");
}
