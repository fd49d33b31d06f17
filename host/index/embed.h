/* SPDX-License-Identifier: MIT */
/*
 * embed: the configured embedder (index.vector.embedder), a host built-in
 * that fills the ABI's memd_embedder_ops shape, so a built-in and an
 * embedder plugin look the same to the vector indexer. Built-ins are
 * listed in embed.c's table: "hash" (embed_hash.h) and "openai"
 * (embed_openai.h); others register the same way.
 */
#ifndef MEMD_INDEX_EMBED_H
#define MEMD_INDEX_EMBED_H

#include <memd/plugin.h>

#include "config.h"
#include "hostsvc.h"

typedef struct embedder embedder;

/* A built-in embedder: create an instance from the config node (a map,
 * or NULL for every default) and its ops. */
typedef struct embed_builtin {
	const char *type;
	int32_t (*create)(const config_node *node, hostsvc *svc, void **ret_inst, memd_error *err);
	void (*destroy)(void *inst);
	const memd_embedder_ops *ops;
	/* Bump when the same config would now give other vectors (a new
	 * algorithm): stored vectors are then re-embedded. 0 = none. */
	uint32_t revision;
} embed_builtin;

/* Longest embedder_identity(). */
#define EMBED_IDENTITY_MAX 64

/* Open the embedder the node configures (NULL: the zero-config default,
 * hash of SETTINGS_EMBEDDER_DIM_DEFAULT). MEMD_EINVAL with the key for a
 * bad value or unknown type, MEMD_ENOMEM. On success *ret owns it. */
int32_t embedder_open(const config_node *node, hostsvc *svc, embedder **ret, memd_error *err);
/* Accepts NULL. */
void embedder_free(embedder *e);
const char *embedder_type(const embedder *e);
/* What makes its vectors comparable: "<type>[r<revision>]-<dim>", plus
 * "-<8 hex digits of a hash of the model>" when the config names a
 * model. Only [a-z0-9-]; at most EMBED_IDENTITY_MAX bytes. */
const char *embedder_identity(const embedder *e);
/* Vector size; texts per embed call the indexer should use. */
uint32_t embedder_dim(const embedder *e);
uint32_t embedder_batch(const embedder *e);
/* Embed n texts into ret_vectors (n * dim floats, L2-normalized; a text
 * without features gives a zero vector). Thread-safe. */
int32_t embedder_embed(embedder *e, const memd_call *call, const char *const *texts, uint32_t n,
		       float *ret_vectors, memd_error *err);

#endif
