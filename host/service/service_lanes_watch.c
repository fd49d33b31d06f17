/* SPDX-License-Identifier: MIT */
/*
 * service_lanes_watch: the lane watcher, memd_lanes_sweep, and the end of
 * a lane's session.
 *
 * A pass (memd_lanes_sweep, or the watcher thread every
 * lanes.watch_interval_s; never a request's thread) does, in bounded
 * batches so that no pass holds the store for long:
 *  a. turns whose lease ran out (their holder died) are recorded as
 *     interrupted ("restart_interrupted"), WATCH_LEASE_BATCH at most;
 *  b. lanes that are not finalized, have no turn, wait for no resume (a
 *     gateway continues their session when it restarts), and whose reset
 *     policy (per app, platform and chat type) says expired are finalized,
 *     WATCH_FINALIZE_BATCH at most among WATCH_SCAN_MAX looked at: the
 *     lane is claimed first (a lane_write setting finalize_claim_until_us,
 *     which only one of several racing processes wins), then the app's
 *     strategy gets on_session_finalize (exclusive with its after_append
 *     for the session), the finalize webhook is posted when configured,
 *     and the lane is marked MEMD_LANE_FINALIZED with a MEMD_FEED_FINALIZE
 *     record in one lane_write. A failed attempt counts in
 *     finalize_failures and releases the claim: the next pass tries again;
 *     the WATCH_FINALIZE_ATTEMPTS-th failure finalizes it anyway, logged;
 *  c. lanes idle for longer than their app's prune_after_days (not
 *     suspended, no turn) are deleted, WATCH_PRUNE_BATCH at most (one
 *     lane_prune when every app has the same setting; else among
 *     WATCH_SCAN_MAX looked at, each by its app's setting);
 *  d. ended sessions past sessions.retention_days are deleted as
 *     memd_session_delete deletes them (events, state, artifacts, and
 *     through the change feed their index entries),
 *     WATCH_RETENTION_BATCH at most;
 *  e. long-term memories that have expired are deleted (history op
 *     "expire" by "retention"; through the change feed their index
 *     entries), one bounded batch (service_memories_expire); a store
 *     without memories skips this step.
 * Work beyond a batch waits for the next pass. Passes of one process run
 * one at a time; several processes share the work through the store's
 * conditional lane writes.
 */
#include "service/service_int.h"
#include "service/service_thread.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lanes/lane_policy.h"
#include "lanes/lane_webhook.h"

/* Batch sizes of one pass (see above). */
#define WATCH_LEASE_BATCH 100u
#define WATCH_FINALIZE_BATCH 50u
#define WATCH_SCAN_PAGE 200u
#define WATCH_SCAN_MAX 2000u
#define WATCH_PRUNE_BATCH 500u
#define WATCH_RETENTION_BATCH 100u
/* Finalize attempts of one lane before it is finalized without success. */
#define WATCH_FINALIZE_ATTEMPTS 3u
/* How long a claim keeps other processes off a lane being finalized: far
 * longer than a finalize takes (a summary; the webhook's attempts, each
 * with its timeout and the longest backoff, are added); a claim that ran
 * out (its process died) is taken over. */
#define WATCH_CLAIM_US (15LL * 60 * US_PER_SEC)
#define US_PER_MS 1000LL
/* Re-reads of a lane that changed under a write of the watcher. */
#define WATCH_WRITE_ATTEMPTS 3
#define US_PER_DAY (86400LL * US_PER_SEC)

struct lanes_watch {
	service_thread th;         /* the watcher; its calls give up once th.cancel */
	int webhook_ready;         /* lane_webhook_init succeeded */
	/* totals since memd_open (/metrics) */
	_Atomic uint64_t finalized, finalize_failures, leases_expired, pruned, sessions_deleted;
};

/* The counts of one pass. */
typedef struct watch_counts {
	uint32_t leases_expired, finalized, finalize_failed, pruned, sessions_deleted;
	uint32_t memories_expired;
} watch_counts;

/* A call of the watcher: no deadline (each network step has its own
 * timeout), given up once memd closes. */
static memd_call call_new(lanes_watch *w)
{
	memd_call c = { .struct_size = sizeof(c), .cancel = w ? &w->th.cancel : NULL };
	return c;
}

/* ---- the strategy's finalize ------------------------------------------------ */

/* One strategy finalize, run by worker_run_exclusive. */
typedef struct finalize_run {
	memd *m;
	strategy *st;
	int64_t now_us;
	int32_t rc;
	memd_error err;
} finalize_run;

static void finalize_fn(void *userdata, const memd_scope *sc)
{
	finalize_run *fr = userdata;
	memd_call call = call_new(fr->m->watch);
	service_persist_ctx pc = { fr->m, sc, fr->now_us };
	memd_event_sink persist = service_persist_sink(&pc);

	fr->rc = strategy_on_session_finalize(fr->st, fr->m->sessions, &call, sc, &persist,
					      &fr->err);
}

int32_t service_finalize_strategy(memd *m, const memd_scope *sc, int64_t now_us, memd_error *err)
{
	const char *app_name;
	strategy *st = service_strategy_for(m, sc->app, &app_name);
	finalize_run fr = { .m = m, .st = st, .now_us = now_us };
	int32_t r;

	if (!st || !strategy_has_on_session_finalize(st))
		return 0;
	if ((r = worker_run_exclusive(m->worker, sc, finalize_fn, &fr)) < 0)
		return memd_error_set(err, r, r == MEMD_ECANCELED ? 0 : MEMD_ERROR_RETRYABLE,
				      "the strategy's finalize did not run: %s",
				      r == MEMD_ECANCELED ? "memd is closing" : "out of memory");
	if (fr.rc == MEMD_ENOTSUP)
		return 0;
	if (fr.rc < 0)
		memcpy(err, &fr.err, sizeof(*err));
	return fr.rc;
}

int32_t service_session_finalize_strategy(memd *m, const char *app, const char *user,
					  const char *sid, memd_error *err)
{
	memd_scope sc;
	int32_t r;

	if ((r = service_check_scope(app, user, sid, &sc, err)) < 0)
		return r;
	return service_finalize_strategy(m, &sc, 0, err);
}

/* ---- lanes read in a batch ---------------------------------------------------- */

/* A lane copied out of a sink: l's strings point into owned copies. */
typedef struct wlane {
	memd_lane l;
	char *s[9];
} wlane;

typedef struct wlanes {
	wlane *v;
	size_t n, cap;
	int oom;
} wlanes;

static void wlanes_clear(wlanes *ls)
{
	for (size_t i = 0; i < ls->n; i++)
		for (size_t k = 0; k < sizeof(ls->v[i].s) / sizeof(ls->v[i].s[0]); k++)
			free(ls->v[i].s[k]);
	free(ls->v);
	memset(ls, 0, sizeof(*ls));
}

static int dup_into(const char **field, char **slot)
{
	if (!*field)
		return 0;
	if (!(*slot = strdup(*field)))
		return -1;
	*field = *slot;
	return 0;
}

static int32_t got_lane(void *userdata, const memd_lane *in)
{
	wlanes *ls = userdata;
	wlane *c;

	if (ls->n == ls->cap) {
		size_t ncap = ls->cap ? 2 * ls->cap : 16;
		wlane *grown = realloc(ls->v, ncap * sizeof(*grown));
		if (!grown) {
			ls->oom = 1;
			return MEMD_ENOMEM;
		}
		ls->v = grown;
		ls->cap = ncap;
	}
	c = &ls->v[ls->n];
	memset(c, 0, sizeof(*c));
	memcpy(&c->l, in, in->struct_size < sizeof(c->l) ? in->struct_size : sizeof(c->l));
	c->l.struct_size = sizeof(c->l);
	ls->n++; /* counted now: wlanes_clear frees what was copied */
	if (dup_into(&c->l.app, &c->s[0]) || dup_into(&c->l.user, &c->s[1]) ||
	    dup_into(&c->l.key, &c->s[2]) || dup_into(&c->l.session, &c->s[3]) ||
	    dup_into(&c->l.origin_json, &c->s[4]) || dup_into(&c->l.resume_reason, &c->s[5]) ||
	    dup_into(&c->l.reset_reason, &c->s[6]) ||
	    dup_into(&c->l.previous_session, &c->s[7]) || dup_into(&c->l.turn_id, &c->s[8])) {
		ls->oom = 1;
		return MEMD_ENOMEM;
	}
	return 0;
}

static int32_t list_lanes(memd *m, const memd_lane_query *q, wlanes *ret, memd_error *err)
{
	memd_call call = call_new(m->watch);
	memd_lane_sink sink = { sizeof(sink), ret, got_lane };
	int32_t r = store_lane_list(m->sessions, &call, q, &sink, err);
	if (ret->oom)
		return service_oom(err);
	return r;
}

/* The lane as it is now into *ret (cleared first). MEMD_ENOTFOUND if gone. */
static int32_t reread(memd *m, const memd_lane *l, wlanes *ret, memd_error *err)
{
	memd_call call = call_new(m->watch);
	memd_scope sc = { .struct_size = sizeof(sc), .app = l->app, .user = l->user };
	memd_lane_sink sink = { sizeof(sink), ret, got_lane };
	int32_t r;

	wlanes_clear(ret);
	r = store_lane_get(m->sessions, &call, &sc, l->key, &sink, NULL, err);
	if (ret->oom)
		return service_oom(err);
	if (r == 0 && ret->n != 1)
		return memd_error_set(err, MEMD_EINTERNAL, 0, "lane_get delivered %zu lanes", ret->n);
	return r;
}

/* lane_write of next (a changed copy of a lane at version expected) with
 * flags; the stored lane's version into *ret_version. */
static int32_t write_lane(memd *m, const memd_lane *next, int64_t expected, uint32_t flags,
			  int64_t now_us, int64_t *ret_version, memd_error *err)
{
	memd_call call = call_new(m->watch);
	wlanes out = { 0 };
	memd_lane_sink sink = { sizeof(sink), &out, got_lane };
	memd_lane_write w = {
		.struct_size = sizeof(w),
		.flags = flags,
		.expected_version = expected,
		.lane = next,
		.now_us = now_us,
	};
	int32_t r = store_lane_write(m->sessions, &call, &w, &sink, err);

	if (r == 0 && out.oom)
		r = service_oom(err);
	if (r == 0 && ret_version)
		*ret_version = out.n ? out.v[0].l.version : expected + 1;
	wlanes_clear(&out);
	return r;
}

/* What scan_lanes calls for each lane: < 0 stops the scan with that
 * error, 1 stops it, 0 goes on. */
typedef int32_t (*lane_visit_fn)(memd *m, const memd_lane *l, void *userdata, memd_error *err);

/* Visit the lanes q matches, newest activity first, a page of
 * WATCH_SCAN_PAGE at a time (keyset paging), at most WATCH_SCAN_MAX of
 * them. */
static int32_t scan_lanes(memd *m, memd_lane_query *q, lane_visit_fn visit, void *userdata,
			  memd_error *err)
{
	wlanes ls = { 0 };
	char *before_app = NULL, *before_user = NULL, *before_key = NULL;
	uint32_t scanned = 0;
	int32_t r = 0;

	q->limit = WATCH_SCAN_PAGE;
	while (r == 0 && scanned < WATCH_SCAN_MAX) {
		wlanes_clear(&ls);
		if ((r = list_lanes(m, q, &ls, err)) < 0 || ls.n == 0)
			break;
		scanned += (uint32_t)ls.n;
		for (size_t i = 0; r == 0 && i < ls.n; i++) {
			if (m->watch->th.cancel)
				r = memd_error_set(err, MEMD_ECANCELED, 0, "memd is closing");
			else
				r = visit(m, &ls.v[i].l, userdata, err);
		}
		if (r != 0 || ls.n < WATCH_SCAN_PAGE)
			break;
		/* the next page: strictly before the last lane of this one */
		free(before_app);
		free(before_user);
		free(before_key);
		before_app = strdup(ls.v[ls.n - 1].l.app);
		before_user = strdup(ls.v[ls.n - 1].l.user);
		before_key = strdup(ls.v[ls.n - 1].l.key);
		if (!before_app || !before_user || !before_key) {
			r = service_oom(err);
			break;
		}
		q->before_updated_us = ls.v[ls.n - 1].l.updated_us;
		q->before_app = before_app;
		q->before_user = before_user;
		q->before_key = before_key;
	}
	wlanes_clear(&ls);
	free(before_app);
	free(before_user);
	free(before_key);
	return r < 0 ? r : 0;
}

/* ---- a. leases that ran out -------------------------------------------------- */

/* Turns whose holder died, recorded as interrupted as a turn begin
 * records them (service_lane_record_expired). A lane that changed since
 * it was listed (its holder came back, another process did it) is left. */
static int32_t expire_leases(memd *m, int64_t now_us, watch_counts *c, memd_error *err)
{
	memd_call call = call_new(m->watch);
	memd_lane_query q = {
		.struct_size = sizeof(q),
		.limit = WATCH_LEASE_BATCH,
		.turn = MEMD_LQ_TURN_SOME,
		.lease_before_us = now_us + 1, /* a lease ending at now_us has ended */
	};
	wlanes ls = { 0 };
	int32_t r = list_lanes(m, &q, &ls, err);

	for (size_t i = 0; r == 0 && i < ls.n; i++) {
		memd_error e = { 0 };
		int written = 0;
		int32_t wr = service_lane_record_expired(m, &call, &ls.v[i].l, now_us, &written, &e);
		if (wr == 0)
			c->leases_expired += (uint32_t)written;
		else if (wr != MEMD_ECONFLICT && wr != MEMD_ENOTFOUND)
			r = memd_error_set(err, wr, e.flags, "%s", e.msg);
	}
	wlanes_clear(&ls);
	return r;
}

/* ---- b. finalize ----------------------------------------------------------- */

/* The webhook of the lane's app, or 0 (none configured). */
static int webhook_of(memd *m, const char *app_name, lane_webhook *ret)
{
	const settings_app *app = settings_app_for(&m->set, app_name);
	if (!app->lanes.webhook_url || !app->lanes.webhook_url[0])
		return 0;
	memset(ret, 0, sizeof(*ret));
	ret->url = app->lanes.webhook_url;
	ret->secret = app->lanes.webhook_secret ? app->lanes.webhook_secret : "";
	ret->timeout_ms = app->lanes.webhook_timeout_ms;
	ret->retries = (uint32_t)app->lanes.webhook_retries;
	return 1;
}

static json_t *time_json(int64_t us)
{
	char buf[EJ_TIME_LEN];
	ej_format_time(us, buf);
	return json_string(buf);
}

/* The webhook's body for lane l, last active at last_us, finalized for
 * reason at now_us. */
static char *webhook_body(const memd_lane *l, const char *reason, uint32_t attempt,
			  int64_t last_us, int64_t now_us)
{
	json_t *o = json_pack(
		"{s:s,s:s,s:s,s:s,s:s,s:s,s:o,s:o,s:i,s:{s:I,s:I,s:I,s:I,s:I,s:f}}", "event",
		"session.finalized", "app", l->app, "user", l->user, "lane_key", l->key,
		"session_id", l->session, "reason", reason, "last_activity", time_json(last_us),
		"finalized_at", time_json(now_us), "attempt", (int)attempt, "usage", "input_tokens",
		(json_int_t)l->input_tokens, "output_tokens", (json_int_t)l->output_tokens,
		"cache_read_tokens", (json_int_t)l->cache_read_tokens, "cache_write_tokens",
		(json_int_t)l->cache_write_tokens, "last_prompt_tokens",
		(json_int_t)l->last_prompt_tokens, "cost_usd", (double)l->cost_micro_usd / 1e6);
	char *text = o ? ej_dump(o) : NULL;
	json_decref(o);
	return text;
}

/* One finalize attempt of the claimed lane l, last active at last_us:
 * the strategy, then the webhook. 0 or the first failure. The events the
 * strategy persists are stamped last_us, so that finalizing is no
 * activity of the session (an open after it still finds it expired). */
static int32_t finalize_attempt(memd *m, const memd_lane *l, const char *reason, int64_t last_us,
				int64_t now_us, memd_error *err)
{
	memd_scope sc = { .struct_size = sizeof(sc), .app = l->app, .user = l->user,
			  .session = l->session };
	lane_webhook hook;
	memd_call call = call_new(m->watch);
	char *body;
	int32_t r;

	if ((r = service_finalize_strategy(m, &sc, last_us, err)) < 0)
		return r;
	service_memory_on_finalize(m, &sc);
	if (!webhook_of(m, l->app, &hook))
		return 0;
	if (!m->watch->webhook_ready)
		return memd_error_set(err, MEMD_EINTERNAL, 0, "the webhook's HTTP client did not start");
	if (!(body = webhook_body(l, reason, l->finalize_failures + 1, last_us, now_us)))
		return service_oom(err);
	r = lane_webhook_post(&hook, &call, body, now_us / US_PER_SEC, err);
	free(body);
	return r;
}

/* The end of an attempt on claimed lane l (at version v): finalized (ok,
 * or failed for the last time) with the feed record, or the failure
 * counted and the claim released. A lane that changed meanwhile is read
 * again: still the same session, the write is redone over it; another
 * session, it is left alone (its old session was finalized all the
 * same). */
static int32_t finish(memd *m, const memd_lane *l, int64_t v, int ok, int64_t now_us,
		      memd_error *err)
{
	memd_lane next = *l;
	wlanes cur = { 0 };
	int32_t r = 0;
	int final = ok || l->finalize_failures + 1 >= WATCH_FINALIZE_ATTEMPTS;

	for (int attempt = 0; attempt < WATCH_WRITE_ATTEMPTS; attempt++) {
		next.finalize_claim_until_us = 0;
		if (final) {
			next.flags |= MEMD_LANE_FINALIZED;
			next.finalize_failures = ok ? next.finalize_failures
						    : next.finalize_failures + 1;
		} else {
			next.finalize_failures++;
		}
		r = write_lane(m, &next, v, final ? MEMD_LW_FEED_FINALIZE : 0, now_us, NULL, err);
		if (r != MEMD_ECONFLICT)
			break;
		if ((r = reread(m, l, &cur, err)) < 0)
			break;
		if (strcmp(cur.v[0].l.session, l->session) != 0 || (cur.v[0].l.flags & MEMD_LANE_FINALIZED))
			break; /* a new session meanwhile, or finalized by a taker of our claim */
		next = cur.v[0].l;
		v = next.version;
		r = MEMD_ECONFLICT;
	}
	wlanes_clear(&cur);
	return r;
}

/* Claim, finalize and mark lane l, last active at last_us, whose policy
 * says expired for reason. The lane another process claimed first is
 * skipped (0, counts nothing). */
static int32_t finalize_lane(memd *m, const memd_lane *l, const char *reason, int64_t last_us,
			     int64_t now_us, watch_counts *c, memd_error *err)
{
	memd_lane claim = *l;
	memd_error e = { 0 };
	lane_webhook hook;
	int64_t v;
	int32_t r;
	int ok;

	claim.finalize_claim_until_us = now_us + WATCH_CLAIM_US;
	if (webhook_of(m, l->app, &hook))
		claim.finalize_claim_until_us += ((int64_t)hook.retries + 1) *
						 (hook.timeout_ms + LANE_WEBHOOK_BACKOFF_MAX_MS) *
						 US_PER_MS;
	r = write_lane(m, &claim, l->version, 0, now_us, &v, err);
	if (r == MEMD_ECONFLICT || r == MEMD_ENOTFOUND)
		return 0; /* changed, claimed or finalized by another process */
	if (r < 0)
		return r;
	claim.version = v;
	ok = finalize_attempt(m, &claim, reason, last_us, now_us, &e) == 0;
	if (!ok) {
		c->finalize_failed++;
		atomic_fetch_add(&m->watch->finalize_failures, 1);
		if (claim.finalize_failures + 1 >= WATCH_FINALIZE_ATTEMPTS)
			hostsvc_log(m->svc, MEMD_LOG_WARN, "memd",
				    "lane %s of %s/%s: session %s finalized without success after %u "
				    "attempts: %s", l->key, l->app, l->user, l->session,
				    WATCH_FINALIZE_ATTEMPTS, e.msg);
		else
			hostsvc_log(m->svc, MEMD_LOG_INFO, "memd",
				    "lane %s of %s/%s: finalize attempt %u failed (tried again on the "
				    "next pass): %s", l->key, l->app, l->user,
				    claim.finalize_failures + 1, e.msg);
	}
	if ((r = finish(m, &claim, v, ok, now_us, err)) < 0)
		return r == MEMD_ECONFLICT ? 0 : r;
	if (ok || claim.finalize_failures + 1 >= WATCH_FINALIZE_ATTEMPTS) {
		c->finalized++;
		atomic_fetch_add(&m->watch->finalized, 1);
	}
	return 0;
}

/* What a finalize scan carries. */
typedef struct finalize_scan {
	int64_t now_us;
	watch_counts *c;
} finalize_scan;

static int32_t finalize_visit(memd *m, const memd_lane *l, void *userdata, memd_error *err)
{
	finalize_scan *fs = userdata;
	memd_call call = call_new(m->watch);
	lane_reset_policy p;
	const char *reason;
	int64_t last = 0;
	int32_t r;

	if (l->finalize_claim_until_us > fs->now_us || !l->session)
		return 0;
	/* The last activity as an open judges it: the lane's or its
	 * session's (appends), whichever is later; the lane's alone first,
	 * which is enough to rule most lanes out without a read. */
	if ((r = service_lane_policy_of(m, l, &p, err)) < 0)
		return r;
	if (!lane_policy_expired(&p, l->updated_us, fs->now_us))
		return 0;
	if ((r = service_lane_last_activity(m, &call, l, &last, err)) < 0)
		return r;
	if (!(reason = lane_policy_expired(&p, last, fs->now_us)))
		return 0;
	if ((r = finalize_lane(m, l, reason, last, fs->now_us, fs->c, err)) < 0)
		return r;
	return fs->c->finalized + fs->c->finalize_failed >= WATCH_FINALIZE_BATCH;
}

static int32_t finalize_expired(memd *m, int64_t now_us, watch_counts *c, memd_error *err)
{
	memd_lane_query q = {
		.struct_size = sizeof(q),
		.flags_none = MEMD_LANE_FINALIZED | MEMD_LANE_RESUME_PENDING,
		.turn = MEMD_LQ_TURN_NONE,
		.updated_before_us = now_us,
	};
	finalize_scan fs = { now_us, c };
	return scan_lanes(m, &q, finalize_visit, &fs, err);
}

/* ---- c. prune ------------------------------------------------------------- */

/* What a prune scan carries. */
typedef struct prune_scan {
	int64_t now_us;
	watch_counts *c;
} prune_scan;

static int32_t prune_visit(memd *m, const memd_lane *l, void *userdata, memd_error *err)
{
	prune_scan *ps = userdata;
	memd_call call = call_new(m->watch);
	int64_t d = settings_app_for(&m->set, l->app)->lanes.prune_after_days;
	memd_scope sc = { .struct_size = sizeof(sc), .app = l->app, .user = l->user };
	memd_error e = { 0 };
	int32_t r;

	if (d <= 0 || l->updated_us >= ps->now_us - d * US_PER_DAY)
		return 0;
	r = store_lane_delete(m->sessions, &call, &sc, l->key, &e);
	if (r == 0)
		ps->c->pruned++;
	else if (r != MEMD_ENOTFOUND)
		return memd_error_set(err, r, e.flags, "%s", e.msg);
	return ps->c->pruned >= WATCH_PRUNE_BATCH;
}

/* The prune_after_days every app has (0 = never), or -1 when they differ. */
static int64_t prune_days_uniform(const memd *m)
{
	int64_t days = m->set.lanes.prune_after_days;
	for (size_t i = 0; i < m->set.n_apps; i++)
		if (m->set.apps[i].lanes.prune_after_days != days)
			return -1;
	return days;
}

static int32_t prune(memd *m, int64_t now_us, watch_counts *c, memd_error *err)
{
	memd_call call = call_new(m->watch);
	int64_t days = prune_days_uniform(m);
	memd_lane_query q = {
		.struct_size = sizeof(q),
		.flags_none = MEMD_LANE_SUSPENDED,
		.turn = MEMD_LQ_TURN_NONE,
	};
	prune_scan ps;
	int64_t shortest = 0;
	int32_t r;

	if (days == 0)
		return 0;
	if (days > 0) {
		uint32_t n = 0;
		/* Every app alike: one store call, atomic per lane. */
		if ((r = store_lane_prune(m->sessions, &call, now_us - days * US_PER_DAY,
					  WATCH_PRUNE_BATCH, &n, err)) < 0)
			return r;
		c->pruned += n;
		return 0;
	}
	/* Apps differ: the lanes idle past the shortest positive setting,
	 * each deleted if its own app's setting says so. Unlike lane_prune
	 * the delete is not conditional: an open racing it in the same
	 * instant loses the lane (never its sessions), and its next open
	 * makes a new one. */
	for (size_t i = 0; i < m->set.n_apps; i++) {
		int64_t d = m->set.apps[i].lanes.prune_after_days;
		if (d > 0 && (!shortest || d < shortest))
			shortest = d;
	}
	if (m->set.lanes.prune_after_days > 0 && m->set.lanes.prune_after_days < shortest)
		shortest = m->set.lanes.prune_after_days;
	if (!shortest)
		return 0;
	q.updated_before_us = now_us - shortest * US_PER_DAY;
	ps.now_us = now_us;
	ps.c = c;
	return scan_lanes(m, &q, prune_visit, &ps, err);
}

/* ---- d. retention ---------------------------------------------------------- */

typedef struct ended {
	char *app, *user, *id;
} ended;

typedef struct ended_list {
	ended v[WATCH_RETENTION_BATCH];
	size_t n;
	int oom;
} ended_list;

static int32_t got_ended(void *userdata, const memd_session *s)
{
	ended_list *el = userdata;
	ended *e;
	if (el->n == WATCH_RETENTION_BATCH)
		return 0;
	e = &el->v[el->n++];
	e->app = strdup(s->app);
	e->user = strdup(s->user);
	e->id = strdup(s->id);
	if (!e->app || !e->user || !e->id) {
		el->oom = 1;
		return MEMD_ENOMEM;
	}
	return 0;
}

static int32_t retention(memd *m, int64_t now_us, watch_counts *c, memd_error *err)
{
	memd_call call = call_new(m->watch);
	ended_list *el;
	memd_session_sink sink = { sizeof(sink), NULL, got_ended };
	int32_t r;

	if (m->set.sessions_retention_days <= 0)
		return 0;
	if (!(el = calloc(1, sizeof(*el))))
		return service_oom(err);
	sink.userdata = el;
	r = store_session_list_ended(m->sessions, &call,
				     now_us - m->set.sessions_retention_days * US_PER_DAY,
				     WATCH_RETENTION_BATCH, &sink, err);
	if (r == 0 && el->oom)
		r = service_oom(err);
	for (size_t i = 0; r == 0 && i < el->n; i++) {
		memd_error e = { 0 };
		int32_t dr;
		if (m->watch->th.cancel) {
			r = memd_error_set(err, MEMD_ECANCELED, 0, "memd is closing");
			break;
		}
		dr = memd_session_delete(m, el->v[i].app, el->v[i].user, el->v[i].id, &e);
		if (dr == 0)
			c->sessions_deleted++;
		else if (dr != MEMD_ENOTFOUND)
			r = memd_error_set(err, dr, e.flags, "%s", e.msg);
	}
	for (size_t i = 0; i < el->n; i++) {
		free(el->v[i].app);
		free(el->v[i].user);
		free(el->v[i].id);
	}
	free(el);
	return r;
}

/* ---- e. expired memories ------------------------------------------------------ */

static int32_t expire_memories(memd *m, watch_counts *c, memd_error *err)
{
	uint32_t n = 0;
	int32_t r = service_memories_expire(m, &n, err);

	if (r == MEMD_ENOTSUP)
		return 0; /* a store before 1.3 keeps no memories */
	if (r == 0)
		c->memories_expired += n;
	return r;
}

/* ---- a pass ----------------------------------------------------------------- */

/* One pass at now_us; the counts into *c. Every step runs even when one
 * before it failed; the first failure is returned. */
static int32_t pass(memd *m, int64_t now_us, watch_counts *c, memd_error *err)
{
	memd_error e[5] = { { 0 } };
	int32_t r[5];

	pthread_mutex_lock(&m->watch->th.pass);
	r[0] = expire_leases(m, now_us, c, &e[0]);
	r[1] = finalize_expired(m, now_us, c, &e[1]);
	r[2] = prune(m, now_us, c, &e[2]);
	r[3] = retention(m, now_us, c, &e[3]);
	r[4] = expire_memories(m, c, &e[4]);
	pthread_mutex_unlock(&m->watch->th.pass);
	atomic_fetch_add(&m->watch->leases_expired, c->leases_expired);
	atomic_fetch_add(&m->watch->pruned, c->pruned);
	atomic_fetch_add(&m->watch->sessions_deleted, c->sessions_deleted);
	for (int i = 0; i < 5; i++)
		if (r[i] < 0) {
			memcpy(err, &e[i], sizeof(*err));
			return r[i];
		}
	return 0;
}

int32_t memd_lanes_sweep(memd *m, char **ret_json, memd_error *err)
{
	watch_counts c = { 0 };
	int32_t r = pass(m, service_clock_us(m), &c, err);

	if (r < 0)
		return r;
	return service_finish(json_pack("{s:i,s:i,s:i,s:i,s:i,s:i}", "leases_expired",
					(int)c.leases_expired, "finalized", (int)c.finalized,
					"finalize_failed", (int)c.finalize_failed, "pruned",
					(int)c.pruned, "sessions_deleted", (int)c.sessions_deleted,
					"memories_expired", (int)c.memories_expired),
			      ret_json, err);
}

/* ---- the watcher thread ----------------------------------------------------------- */

static void *watch_main(void *arg)
{
	memd *m = arg;
	lanes_watch *w = m->watch;
	struct timespec at;

	pthread_mutex_lock(&w->th.lock);
	clock_gettime(CLOCK_MONOTONIC, &at);
	while (!w->th.stopping) {
		at.tv_sec += (time_t)m->set.lanes_watch_interval_s;
		while (!w->th.stopping &&
		       pthread_cond_timedwait(&w->th.wake, &w->th.lock, &at) != ETIMEDOUT)
			;
		if (w->th.stopping)
			break;
		pthread_mutex_unlock(&w->th.lock);
		{
			watch_counts c = { 0 };
			memd_error err = { 0 };
			if (pass(m, service_clock_us(m), &c, &err) < 0 && err.code != MEMD_ECANCELED &&
			    err.code != MEMD_ENOTSUP)
				hostsvc_log(m->svc, MEMD_LOG_WARN, "memd", "lane watcher: %s", err.msg);
		}
		pthread_mutex_lock(&w->th.lock);
		clock_gettime(CLOCK_MONOTONIC, &at);
	}
	pthread_mutex_unlock(&w->th.lock);
	return NULL;
}

/* Nonzero if some app has a finalize webhook. */
static int any_webhook(const memd *m)
{
	if (m->set.lanes.webhook_url && m->set.lanes.webhook_url[0])
		return 1;
	for (size_t i = 0; i < m->set.n_apps; i++)
		if (m->set.apps[i].lanes.webhook_url && m->set.apps[i].lanes.webhook_url[0])
			return 1;
	return 0;
}

int32_t service_watch_start(memd *m, memd_error *err)
{
	lanes_watch *w = calloc(1, sizeof(*w));
	int32_t r;

	if (!w)
		return service_oom(err);
	service_thread_init(&w->th);
	m->watch = w;
	if (any_webhook(m)) {
		if ((r = lane_webhook_init(err)) < 0)
			return r;
		w->webhook_ready = 1;
	}
	if (m->set.lanes_watch_interval_s > 0) {
		if ((r = service_thread_start(&w->th, watch_main, m, "lane watcher", err)) < 0)
			return r;
	}
	return 0;
}

void service_watch_stop(memd *m)
{
	lanes_watch *w = m->watch;

	if (!w)
		return;
	service_thread_stop(&w->th);
}

void service_watch_free(memd *m)
{
	lanes_watch *w = m->watch;

	if (!w)
		return;
	service_watch_stop(m);
	if (w->webhook_ready)
		lane_webhook_cleanup();
	service_thread_destroy(&w->th);
	free(w);
	m->watch = NULL;
}

void service_watch_metrics(memd *m, prom_buf *b)
{
	lanes_watch *w = m->watch;
	if (!w)
		return;
	prom_printf(b,
		    "# HELP memd_lanes_finalized_total Lane sessions finalized by the watcher.\n"
		    "# TYPE memd_lanes_finalized_total counter\n"
		    "memd_lanes_finalized_total %llu\n"
		    "# HELP memd_lanes_finalize_failures_total Failed finalize attempts.\n"
		    "# TYPE memd_lanes_finalize_failures_total counter\n"
		    "memd_lanes_finalize_failures_total %llu\n"
		    "# HELP memd_lanes_leases_expired_total Turns recorded as interrupted when their "
		    "lease ran out.\n"
		    "# TYPE memd_lanes_leases_expired_total counter\n"
		    "memd_lanes_leases_expired_total %llu\n"
		    "# HELP memd_lanes_pruned_total Lanes pruned after prune_after_days.\n"
		    "# TYPE memd_lanes_pruned_total counter\n"
		    "memd_lanes_pruned_total %llu\n"
		    "# HELP memd_sessions_retention_deleted_total Ended sessions deleted after "
		    "sessions.retention_days.\n"
		    "# TYPE memd_sessions_retention_deleted_total counter\n"
		    "memd_sessions_retention_deleted_total %llu\n",
		    (unsigned long long)atomic_load(&w->finalized),
		    (unsigned long long)atomic_load(&w->finalize_failures),
		    (unsigned long long)atomic_load(&w->leases_expired),
		    (unsigned long long)atomic_load(&w->pruned),
		    (unsigned long long)atomic_load(&w->sessions_deleted));
}
