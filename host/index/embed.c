/* SPDX-License-Identifier: MIT */
#include "embed.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "embed_hash.h"
#include "embed_openai.h"
#include "config/settings.h"
#include "strtab.h"

#define EMBED_LOG "index.vector"

/* The built-in embedders, by index.vector.embedder.type. */
static const embed_builtin *const builtins[] = {
	&embed_hash_builtin,
	&embed_openai_builtin,
};

struct embedder {
	const embed_builtin *b;
	void *inst;
	uint32_t batch;
	/* Written once, before known is set (release); read after it is seen
	 * set (acquire). learn_lock serializes the learning. */
	uint32_t dim;
	char identity[EMBED_IDENTITY_MAX + 1];
	char *model; /* index.vector.embedder.model, or NULL */
	pthread_mutex_t learn_lock;
	atomic_int known;
};

#define HASH_HEX_MASK 0xffffffffu

static void make_identity(embedder *e)
{
	const char *model = e->model;
	char rev[16] = "";
	size_t n;

	if (e->b->revision)
		snprintf(rev, sizeof(rev), "r%u", e->b->revision);
	n = (size_t)snprintf(e->identity, sizeof(e->identity), "%.24s%s-%u", e->b->type, rev, e->dim);
	if (model && n < sizeof(e->identity))
		snprintf(e->identity + n, sizeof(e->identity) - n, "-%08x",
			 (unsigned)(strtab_hash(model, strlen(model)) & HASH_HEX_MASK));
	for (char *c = e->identity; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '-'))
			*c = '-';
}

static int32_t read_int(const config_node *node, const char *key, int64_t dflt, int64_t min,
			int64_t max, int64_t *ret, memd_error *err)
{
	const config_node *v = node ? config_map_get(node, key) : NULL;
	int64_t x = dflt;
	if (v && config_as_int(v, &x) < 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "%s:%u: index.vector.embedder.%s: not an integer",
				      config_node_file(v), config_node_line(v), key);
	if (x < min || x > max)
		return memd_error_set(err, MEMD_EINVAL, 0, "index.vector.embedder.%s: must be %lld..%lld",
				      key, (long long)min, (long long)max);
	*ret = x;
	return 0;
}

int32_t embedder_open(const config_node *node, hostsvc *svc, embedder **ret, memd_error *err)
{
	const config_node *tn = node ? config_map_get(node, "type") : NULL;
	const char *type = tn && config_scalar(tn) ? config_scalar(tn) : SETTINGS_EMBEDDER_TYPE_DEFAULT;
	const config_node *mn = node ? config_map_get(node, "model") : NULL;
	const embed_builtin *b = NULL;
	memd_error derr = { 0 };
	int64_t batch = SETTINGS_EMBEDDER_BATCH_DEFAULT;
	embedder *e;
	int32_t r;

	for (size_t i = 0; i < sizeof(builtins) / sizeof(builtins[0]); i++)
		if (strcmp(builtins[i]->type, type) == 0)
			b = builtins[i];
	if (!b)
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "index.vector.embedder.type: '%.64s' is not built into this memd", type);
	if ((r = read_int(node, "batch", SETTINGS_EMBEDDER_BATCH_DEFAULT, 1, UINT32_MAX, &batch, err)) < 0)
		return r;
	e = calloc(1, sizeof(*e));
	if (!e)
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	e->b = b;
	e->batch = (uint32_t)batch;
	pthread_mutex_init(&e->learn_lock, NULL);
	atomic_init(&e->known, 0);
	if (mn && config_scalar(mn) && !(e->model = strdup(config_scalar(mn)))) {
		embedder_free(e);
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	}
	if ((r = b->create(node, svc, &e->inst, err)) < 0) {
		embedder_free(e);
		return r;
	}
	if ((r = embedder_learn_dim(e, &derr)) < 0) {
		if (!(derr.flags & MEMD_ERROR_RETRYABLE) && r != MEMD_EUNAVAIL) {
			embedder_free(e);
			return memd_error_set(err, r, derr.flags, "%s", derr.msg);
		}
		hostsvc_log(svc, MEMD_LOG_WARN, EMBED_LOG,
			    "%s; vector indexing waits for the endpoint and starts by itself when it answers",
			    derr.msg);
	}
	*ret = e;
	return 0;
}

int32_t embedder_learn_dim(embedder *e, memd_error *err)
{
	memd_error derr = { 0 };
	uint32_t dim = 0;
	int32_t r = 0;

	if (atomic_load_explicit(&e->known, memory_order_acquire))
		return 0;
	pthread_mutex_lock(&e->learn_lock);
	if (!atomic_load_explicit(&e->known, memory_order_relaxed)) {
		r = e->b->ops->dimension(e->inst, &dim, &derr);
		if (r == 0 && dim == 0)
			r = memd_error_set(&derr, MEMD_EINTERNAL, 0, "it reported 0 dimensions");
		if (r < 0) {
			r = memd_error_set(err, r, derr.flags, "embedder %s: no dimension: %s", e->b->type,
					   derr.msg);
		} else {
			e->dim = dim;
			make_identity(e);
			atomic_store_explicit(&e->known, 1, memory_order_release);
		}
	}
	pthread_mutex_unlock(&e->learn_lock);
	return r;
}

int embedder_dim_known(const embedder *e)
{
	return atomic_load_explicit(&((embedder *)e)->known, memory_order_acquire);
}

void embedder_free(embedder *e)
{
	if (!e)
		return;
	if (e->inst)
		e->b->destroy(e->inst);
	pthread_mutex_destroy(&e->learn_lock);
	free(e->model);
	free(e);
}

const char *embedder_type(const embedder *e)
{
	return e->b->type;
}

const char *embedder_identity(const embedder *e)
{
	return embedder_dim_known(e) ? e->identity : "";
}

uint32_t embedder_dim(const embedder *e)
{
	return embedder_dim_known(e) ? e->dim : 0;
}

uint32_t embedder_batch(const embedder *e)
{
	return e->batch;
}

int32_t embedder_embed(embedder *e, const memd_call *call, const char *const *texts, uint32_t n,
		       float *ret_vectors, memd_error *err)
{
	int32_t r;

	if (!embedder_dim_known(e))
		return memd_error_set(err, MEMD_EUNAVAIL, MEMD_ERROR_RETRYABLE,
				      "embedder %s: the dimension is not known yet (its endpoint has "
				      "not answered)", e->b->type);
	r = e->b->ops->embed(e->inst, call, texts, n, ret_vectors, err);
	if (r < 0 && err && err->code != r)
		memd_error_set(err, r, 0, "embedder %s: failed (error %d)", e->b->type, (int)r);
	return r;
}
