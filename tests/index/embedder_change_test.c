/* SPDX-License-Identifier: MIT */
/*
 * Changing the embedder: the vector index's durable cursor belongs to the
 * embedder's identity (type, revision, dimension, model), so a new
 * embedder re-embeds every event by itself; a vector store replaced under
 * the same name and embedder needs memd_index_rebuild, which fills it.
 * On sqlite with filevec.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "index_util.h"

#define EVENTS 12

static ix_env env;

static void setup(void)
{
	ix_env_make(&env);
}

static void teardown(void)
{
	ix_env_remove(&env);
}

TestSuite(embedder_change, .init = setup, .fini = teardown, .timeout = 60);

static memd *open_with(const char *vec_dir, int dim)
{
	char yaml[IX_CONFIG_MAX];
	FILE *f = fopen(env.config_path, "w");

	cr_assert_not_null(f);
	snprintf(yaml, sizeof(yaml),
		 "stores:\n"
		 "  main: {plugin: sqlite, path: \"%s/memd.db\"}\n"
		 "  vec: {plugin: filevec, path: \"%s/%s\"}\n"
		 "index:\n"
		 "  vector: {enabled: true, store: vec, embedder: {type: hash, dim: %d}}\n",
		 env.dir, env.dir, vec_dir, dim);
	fputs(yaml, f);
	cr_assert_eq(fclose(f), 0);
	return ix_open(&env);
}

static size_t vector_hits(memd *m)
{
	json_t *res = ix_search(m, "app", "alice", "{\"query\":\"compass\",\"mode\":\"vector\",\"k\":100}");
	size_t n = json_array_size(ix_results(res));
	json_decref(res);
	return n;
}

Test(embedder_change, a_new_embedder_reembeds_and_a_new_store_is_rebuilt)
{
	memd_error err = { 0 };
	char text[64];
	memd *m = open_with("vec-a", 128);

	for (int i = 0; i < EVENTS; i++) {
		snprintf(text, sizeof(text), "compass bearing %d", i);
		free(ix_append(m, "app", "alice", "s", text, NULL, 0));
	}
	cr_assert_eq(vector_hits(m), EVENTS);
	memd_close(m);

	/* Another dimension, in a new store: filled without being asked. */
	m = open_with("vec-b", 64);
	cr_assert_eq(vector_hits(m), EVENTS, "a new embedder re-embeds every event");
	memd_close(m);

	/* The same embedder over an empty replacement store: its cursor is
	 * already at the head; a rebuild fills the store. */
	m = open_with("vec-c", 64);
	cr_assert_eq(vector_hits(m), 0);
	cr_assert_eq(memd_index_rebuild(m, NULL, NULL, NULL, NULL, &err), 0, "%s", err.msg);
	cr_assert_eq(vector_hits(m), EVENTS);
	memd_close(m);
}
