/* SPDX-License-Identifier: MIT */
/*
 * service_lanes_watch: the end of a lane's session. A strategy's
 * on_session_finalize runs here, exclusive with its after_append for the
 * session (the worker holds the session while it runs), its events
 * persisted as after_append's are.
 */
#include "service/service_int.h"

#include <string.h>

/* A call for background work (the watcher's): no deadline. */
static memd_call call_new(void)
{
	memd_call c = { .struct_size = sizeof(c) };
	return c;
}

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
	memd_call call = call_new();
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
