/* SPDX-License-Identifier: MIT */
/*
 * service_search: memd_search and memd_index_rebuild (blocking, or as a
 * background job) over the search indexes (host/index/).
 */
#include "service/service_int.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

int32_t memd_search(memd *m, const char *app, const char *user, const char *body_json,
		    char **ret_json, memd_error *err)
{
	memd_call call = service_call_for_request(m);
	memd_scope sc;
	int32_t r;

	char *out = NULL;
	size_t len;

	if ((r = service_check_scope(app, user, NULL, &sc, err)) < 0)
		return r;
	if ((r = index_search(m->index, &call, app, user, body_json, service_clock_us(m), &out,
				 err)) < 0)
		return r;
	/* At most k (1000) hits, each an event: bounded, but not by much. */
	len = strlen(out);
	if (len > (size_t)m->set.max_response_bytes) {
		free(out);
		return memd_error_set(err, MEMD_ETOOBIG, 0,
				      "the response would be over %" PRId64
				      " bytes (server.max_response_bytes); ask for fewer hits (k)",
				      m->set.max_response_bytes);
	}
	*ret_json = out;
	return 0;
}

int32_t memd_index_rebuild(memd *m, const char *app, const char *user, memd_progress_fn progress,
			   void *userdata, memd_error *err)
{
	memd_scope sc;
	int32_t r;

	if ((app || user) &&
	    (r = service_check_scope(app ? app : "", user ? user : "", NULL, &sc, err)) < 0)
		return r;
	return index_rebuild(m->index, app, user, NULL, progress, userdata, err);
}

static int32_t rebuild_progress(void *userdata, uint64_t done, uint64_t total)
{
	return job_progress(userdata, done, total);
}

/* The job: the rebuild, its progress reported to the job. */
static int32_t rebuild_job(void *userdata, job *j, const char *app, const char *user,
			   const volatile int32_t *cancel, memd_error *err)
{
	memd *m = userdata;
	return index_rebuild(m->index, app, user, cancel, rebuild_progress, j, err);
}

int32_t memd_index_rebuild_start(memd *m, const char *app, const char *user, char **ret_json,
				 int32_t *ret_existing, memd_error *err)
{
	memd_scope sc;
	int existing = 0;
	int32_t r;

	if ((app == NULL) != (user == NULL))
		return memd_error_set(err, MEMD_EINVAL, 0, "rebuild: give both app and user, or neither");
	if (app && (r = service_check_scope(app, user, NULL, &sc, err)) < 0)
		return r;
	if (!m->set.keyword_enabled && !m->set.vector_enabled)
		return memd_error_set(err, MEMD_EINVAL, 0, "no index is enabled (index.keyword, index.vector)");
	if ((r = jobs_submit(m->jobs, JOBS_KIND_INDEX_REBUILD, app, user, rebuild_job, m, ret_json,
			     &existing, err)) < 0)
		return r;
	*ret_existing = existing;
	return 0;
}
