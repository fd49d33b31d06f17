/* SPDX-License-Identifier: MIT */
/*
 * service_artifacts: memd_artifact_put, _get, _list, _versions, _delete:
 * immutable versions of named blobs with a media type.
 */
#include "service/service_int.h"

#include <stdlib.h>
#include <string.h>

#include "json/event_json.h"

#define MIME_MAX 255
#define MIME_DEFAULT "application/octet-stream"

static int mime_char(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       strchr("!#$&^_.+-", c) != NULL;
}

/* type/subtype[; params] with RFC 6838 token characters. */
static int32_t check_mime(const char *mime, memd_error *err)
{
	size_t i = 0, len = strlen(mime), slash = 0;

	if (!len || len > MIME_MAX)
		goto bad;
	for (; i < len && mime[i] != ';'; i++) {
		unsigned char c = (unsigned char)mime[i];
		if (c == '/') {
			if (slash || i == 0)
				goto bad;
			slash = i;
		} else if (!mime_char(c)) {
			goto bad;
		}
	}
	if (!slash || slash + 1 >= i)
		goto bad;
	for (; i < len; i++)
		if ((unsigned char)mime[i] < 0x20 || (unsigned char)mime[i] >= 0x7f)
			goto bad;
	return 0;
bad:
	return memd_error_set(err, MEMD_EINVAL, 0, "content type '%.64s': not a media type", mime);
}

typedef struct artifact_acc {
	json_t *meta;
	json_t *list;
	void *data;
	size_t size;
	int want_data;
} artifact_acc;

static int32_t sink_artifact(void *ud, const memd_artifact *a)
{
	artifact_acc *acc = ud;
	json_t *o = ej_artifact(a);
	if (!o)
		return MEMD_ENOMEM;
	if (acc->list)
		return json_array_append_new(acc->list, o) == 0 ? 0 : MEMD_ENOMEM;
	json_decref(acc->meta);
	acc->meta = o;
	if (acc->want_data) {
		free(acc->data);
		acc->data = malloc(a->size ? a->size : 1);
		if (!acc->data)
			return MEMD_ENOMEM;
		if (a->size)
			memcpy(acc->data, a->data, a->size);
		acc->size = a->size;
	}
	return 0;
}

int32_t memd_artifact_put(memd *m, const char *app, const char *user, const char *sid,
			  const char *name, const char *mime_type, const void *data, size_t size,
			  char **ret_json, memd_error *err)
{
	memd_call call = service_call_for_request(m);
	memd_scope sc;
	memd_artifact a = { .struct_size = sizeof(a) };
	int64_t version;
	int32_t r;

	if ((r = service_check_scope(app, user, sid, &sc, err)) < 0 ||
	    (r = ej_check_name(name, err)) < 0)
		return r;
	if (!mime_type || !*mime_type)
		mime_type = MIME_DEFAULT;
	if ((r = check_mime(mime_type, err)) < 0)
		return r;
	if (!data && size)
		return memd_error_set(err, MEMD_EINVAL, 0, "artifact data missing");
	a.name = name;
	a.mime_type = mime_type;
	a.data = data ? data : "";
	a.size = size;
	a.created_us = service_now_us();
	if ((r = store_artifact_put(m->sessions, &call, &sc, &a, &version, err)) < 0)
		return r;
	a.version = version;
	return service_finish(ej_artifact(&a), ret_json, err);
}

int32_t memd_artifact_get(memd *m, const char *app, const char *user, const char *sid,
			  const char *name, int64_t version, char **ret_json, void **ret_data,
			  size_t *ret_size, memd_error *err)
{
	memd_call call = service_call_for_request(m);
	memd_scope sc;
	artifact_acc acc = { .want_data = 1 };
	memd_artifact_sink sink = { sizeof(sink), &acc, sink_artifact };
	char *meta = NULL;
	int32_t r;

	if ((r = service_check_scope(app, user, sid, &sc, err)) < 0 ||
	    (r = ej_check_name(name, err)) < 0)
		return r;
	if (version < 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "version: must not be negative (0: the latest)");
	r = store_artifact_get(m->sessions, &call, &sc, name, version, &sink, err);
	if (r == 0 && !acc.meta)
		r = memd_error_set(err, MEMD_ENOTFOUND, 0, "artifact '%.64s' not found", name);
	if (r == 0 && (r = service_finish(acc.meta, &meta, err)) == 0) {
		acc.meta = NULL;
		*ret_json = meta;
		*ret_data = acc.data;
		*ret_size = acc.size;
		return 0;
	}
	json_decref(acc.meta);
	free(acc.data);
	return r;
}

static int32_t artifact_listing(memd *m, const char *app, const char *user, const char *sid,
				const char *name, char **ret_json, memd_error *err)
{
	memd_call call = service_call_for_request(m);
	memd_scope sc;
	artifact_acc acc = { 0 };
	memd_artifact_sink sink = { sizeof(sink), &acc, sink_artifact };
	int32_t r;

	if ((r = service_check_scope(app, user, sid, &sc, err)) < 0 ||
	    (name && (r = ej_check_name(name, err)) < 0))
		return r;
	if (!(acc.list = json_array()))
		return service_oom(err);
	r = name ? store_artifact_versions(m->sessions, &call, &sc, name, &sink, err)
		 : store_artifact_list(m->sessions, &call, &sc, &sink, err);
	if (r == 0 && name && json_array_size(acc.list) == 0)
		r = memd_error_set(err, MEMD_ENOTFOUND, 0, "artifact '%.64s' not found", name);
	if (r < 0) {
		json_decref(acc.list);
		return r;
	}
	return service_finish(json_pack("{s:o}", name ? "versions" : "artifacts", acc.list),
			      ret_json, err);
}

int32_t memd_artifact_list(memd *m, const char *app, const char *user, const char *sid,
			   char **ret_json, memd_error *err)
{
	return artifact_listing(m, app, user, sid, NULL, ret_json, err);
}

int32_t memd_artifact_versions(memd *m, const char *app, const char *user, const char *sid,
			       const char *name, char **ret_json, memd_error *err)
{
	if (!name)
		return memd_error_set(err, MEMD_EINVAL, 0, "artifact name: required");
	return artifact_listing(m, app, user, sid, name, ret_json, err);
}

int32_t memd_artifact_delete(memd *m, const char *app, const char *user, const char *sid,
			     const char *name, memd_error *err)
{
	memd_call call = service_call_for_request(m);
	memd_scope sc;
	int32_t r;

	if ((r = service_check_scope(app, user, sid, &sc, err)) < 0 ||
	    (r = ej_check_name(name, err)) < 0)
		return r;
	return store_artifact_delete(m->sessions, &call, &sc, name, err);
}
