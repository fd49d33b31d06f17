/* SPDX-License-Identifier: MIT */
/*
 * service_jobs: memd_job_get, memd_job_list and memd_job_cancel over the
 * registry of background jobs (jobs.h). The jobs are started by the
 * calls that run them (memd_index_rebuild_start).
 */
#include "service/service_int.h"

/* app, when set, must be an id; id must be one too (no job has another). */
static int32_t check(const char *app, const char *id, memd_error *err)
{
	int32_t r;
	if (app && (r = ej_check_id(app, "app", err)) < 0)
		return r;
	if (id && (r = ej_check_id(id, "job id", err)) < 0)
		return r;
	return 0;
}

int32_t memd_job_get(memd *m, const char *app, const char *id, char **ret_json, memd_error *err)
{
	int32_t r;
	if ((r = check(app, id ? id : "", err)) < 0)
		return r;
	return jobs_get(m->jobs, app, id, ret_json, err);
}

int32_t memd_job_list(memd *m, const char *app, char **ret_json, memd_error *err)
{
	int32_t r;
	if ((r = check(app, NULL, err)) < 0)
		return r;
	return jobs_list(m->jobs, app, ret_json, err);
}

int32_t memd_job_cancel(memd *m, const char *app, const char *id, char **ret_json,
			memd_error *err)
{
	int32_t r;
	if ((r = check(app, id ? id : "", err)) < 0)
		return r;
	return jobs_cancel(m->jobs, app, id, ret_json, err);
}
