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

#include "config/config.h"
#include "plugins/hostsvc.h"

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
 * bad value or unknown type, MEMD_ENOMEM. It asks for the dimension now:
 * a non-retryable failure there is returned; a retryable one (or
 * MEMD_EUNAVAIL: an endpoint that is down) is logged once as a warning
 * and the embedder opens with the dimension unknown (embedder_dim_known
 * 0) until embedder_learn_dim succeeds. On success *ret owns it. */
int32_t embedder_open(const config_node *node, hostsvc *svc, embedder **ret, memd_error *err);
/* Learn the dimension if it is not known yet (asks the embedder; a
 * network embedder asks its endpoint): 0 once known, with
 * embedder_dim and embedder_identity final from then on; otherwise the
 * embedder's error (its flags kept: MEMD_ERROR_RETRYABLE for an outage)
 * and it stays unknown. Thread-safe; learned once. */
int32_t embedder_learn_dim(embedder *e, memd_error *err);
/* Nonzero once the dimension is known (then dim and identity are final
 * and safe to read from any thread). */
int embedder_dim_known(const embedder *e);
/* Accepts NULL. */
void embedder_free(embedder *e);
const char *embedder_type(const embedder *e);
/* What makes its vectors comparable: "<type>[r<revision>]-<dim>", plus
 * "-<8 hex digits of a hash of the model>" when the config names a
 * model. Only [a-z0-9-]; at most EMBED_IDENTITY_MAX bytes. "" while the
 * dimension is not known. */
const char *embedder_identity(const embedder *e);
/* Vector size (0 while not known); texts per embed call the indexer
 * should use. */
uint32_t embedder_dim(const embedder *e);
uint32_t embedder_batch(const embedder *e);
/* Embed n texts into ret_vectors (n * dim floats, L2-normalized; a text
 * without features gives a zero vector). Thread-safe. Only once the
 * dimension is known (MEMD_EUNAVAIL, retryable, before). */
int32_t embedder_embed(embedder *e, const memd_call *call, const char *const *texts, uint32_t n,
		       float *ret_vectors, memd_error *err);

#endif
