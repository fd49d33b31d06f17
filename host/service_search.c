/* SPDX-License-Identifier: MIT */
/*
 * service_search: memd_search and memd_index_rebuild over the search
 * indexes (host/index/).
 */
#include "service_int.h"

int32_t memd_search(memd *m, const char *app, const char *user, const char *body_json,
		    char **ret_json, memd_error *err)
{
	memd_call call = service_call_for_request(m);
	memd_scope sc;
	int32_t r;

	if ((r = service_check_scope(app, user, NULL, &sc, err)) < 0)
		return r;
	return index_search(m->index, &call, app, user, body_json, ret_json, err);
}

int32_t memd_index_rebuild(memd *m, const char *app, const char *user, memd_progress_fn progress,
			   void *userdata, memd_error *err)
{
	memd_scope sc;
	int32_t r;

	if ((app || user) &&
	    (r = service_check_scope(app ? app : "", user ? user : "", NULL, &sc, err)) < 0)
		return r;
	return index_rebuild(m->index, app, user, progress, userdata, err);
}
