/* limits.h: per-sandbox fairness bounds — token buckets and a throttle for their log rows; pure, the caller brings the time. */
#ifndef SLUICE_LIMITS_H
#define SLUICE_LIMITS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A rate bound: rate events per second on average, at most burst at once. */
struct gw_rate {
	unsigned	rate;		/* per second; 0: unlimited */
	unsigned	burst;		/* the bucket's size, >= 1 when rate > 0 */
};

#define GW_RATE_MAX	10000000u	/* for rate and burst: keeps the
					 * arithmetic below far from overflow */

/*
 * A token bucket on a millisecond clock (CLOCK_MONOTONIC). What it holds
 * is kept as the debt below full, in thousandths of a token: a second
 * refills rate * 1000 of them, a millisecond exactly rate, so integer
 * arithmetic loses nothing however the calls fall. All zeroes is a full
 * bucket.
 */
struct gw_bucket {
	uint64_t	last_ms;	/* when the debt was last paid down */
	uint64_t	debt;		/* thousandths of a token */
};

/*
 * Takes one token at now_ms: true if there was one (or r is unlimited),
 * false if the bucket is empty (nothing is taken then). A clock that
 * seems to go back refills nothing.
 */
bool gw_bucket_take(struct gw_bucket *b, const struct gw_rate *r,
    uint64_t now_ms);

/*
 * The log of rate-limited attempts, throttled so a flood cannot fill it:
 * in each second (from the first attempt that opens it) the first
 * max_rows attempts get a row of their own and the rest are counted, and
 * the count becomes one summary row once the second is over. All zeroes
 * is a fresh throttle.
 */
#define GW_LIMIT_WINDOW_MS	1000

struct gw_limit_log {
	uint64_t	window_ms;	/* the second began; 0: none yet */
	unsigned	rows;		/* rows of their own in it */
	uint64_t	unlogged;	/* attempts in it without one */
};

/*
 * An attempt at now_ms: true if it gets a row of its own, false if it is
 * only counted. The caller takes a finished second's count first
 * (gw_limit_log_take), or it is carried into the next second.
 */
bool gw_limit_log_admit(struct gw_limit_log *l, unsigned max_rows,
    uint64_t now_ms);

/*
 * The count of the attempts without a row, for the summary row, once
 * their second is over at now_ms (any time when force); 0 when there is
 * none or it is not due yet. Resets the count it returns.
 */
uint64_t gw_limit_log_take(struct gw_limit_log *l, uint64_t now_ms,
    bool force);

/* When the count is due (the end of its second); UINT64_MAX if none. */
uint64_t gw_limit_log_due(const struct gw_limit_log *l);

/*
 * Whether a sandbox holding sb_holds flows for inspection may hold one
 * more, in a table of max slots of which used are taken: 0, ENOSPC (the
 * table is full) or EBUSY (over its bound limit; or, once only the last
 * quarter of the table is free, over GW_HOLD_LIGHT: that quarter is kept
 * for sandboxes that hold little, so that a few flooding sandboxes
 * together cannot take every slot either). limit 0: no per-sandbox bound
 * and no reserve.
 */
#define GW_HOLD_LIGHT	16
int gw_hold_check(unsigned used, unsigned max, unsigned sb_holds,
    unsigned limit);

/*
 * The text of the rule column of a rate_limited row: the bound and its
 * setting ("limit-conn-rate 2000/s burst 4000", "limit-holds 256 (16 once
 * the table is 3/4 full)"), and
 * on a summary row the count in front ("37 attempts summarised (this one
 * the last): ..."), so that CAST(rule AS INTEGER) is the number of
 * attempts the row stands for (0, read as 1, on a row of its own).
 * Returns buf.
 */
enum gw_limit_kind { GW_LIMIT_CONN, GW_LIMIT_HOLDS, GW_LIMIT_DNS };
char *gw_limit_rule(char *buf, size_t len, enum gw_limit_kind kind,
    const struct gw_rate *r, unsigned holds, uint64_t summarised);

#endif
