/* SPDX-License-Identifier: MIT */
/*
 * spec: api/openapi.yaml for the HTTP tests. Loads it with memd's own YAML
 * parser, finds the operation a request hit, and validates a response
 * (status documented, required headers present, media type, JSON body)
 * with a validator for the subset of JSON Schema the spec uses. Any schema
 * keyword outside that subset is reported as an error, never skipped.
 */
#ifndef MEMD_TEST_SPEC_H
#define MEMD_TEST_SPEC_H

#include <jansson.h>
#include <stddef.h>

#define SPEC_MSG_MAX 1024

typedef struct spec spec;

/* Load the spec (YAML). NULL on failure with the reason in msg. */
spec *spec_load(const char *yaml_path, char *msg, size_t cap);
void spec_free(spec *s);
/* The whole document (borrowed). */
json_t *spec_doc(const spec *s);
/* The spec at $MEMD_SOURCE_ROOT/api/openapi.yaml, loaded once per process
 * (aborts the test if it cannot be loaded). */
spec *spec_default(void);

/* The path template (a key of "paths") that raw_path (percent-encoded,
 * without query) matches, or NULL. */
const char *spec_match_path(const spec *s, const char *raw_path);

/* One response as received. headers: "Name: value" lines (no CRLF),
 * n_headers of them. */
typedef struct spec_response {
	unsigned status;
	const char *const *headers;
	size_t n_headers;
	const char *body;
	size_t len;
} spec_response;

/* 0 if the response to method raw_path (query allowed) is what the spec
 * documents, else -1 with why in msg. */
int spec_check_response(const spec *s, const char *method, const char *raw_path,
			const spec_response *r, char *msg, size_t cap);

/* Validate value against schema (resolving "#/..." refs in s). 0 or -1
 * with the JSON path of the first problem in msg. */
int spec_validate(const spec *s, json_t *schema, json_t *value, char *msg, size_t cap);

#endif
