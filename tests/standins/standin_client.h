/* SPDX-License-Identifier: MIT */
/*
 * standin_client: what C tests need to talk to the local stand-ins that
 * tests/standins/with_standins.py starts around them (their URLs come from
 * the environment): plain HTTP requests with libcurl, JSON answers parsed
 * with jansson. Every helper fails the running Criterion test on a
 * transport error or a body that is not JSON.
 */
#ifndef MEMD_TESTS_STANDIN_CLIENT_H
#define MEMD_TESTS_STANDIN_CLIENT_H

#include <jansson.h>

/* getenv(name), failing the test when it is unset or empty (the test must
 * run under with_standins.py). */
const char *sc_env(const char *name);

/* Send method to url with an optional JSON body and extra header line
 * ("Name: value", may be NULL). Returns the parsed answer (caller
 * decrefs; JSON null for an empty body) and writes the HTTP status. */
json_t *sc_request(const char *method, const char *url, const char *body, const char *header,
		   long *ret_status);
/* GET url, assert status 200, return the parsed answer. */
json_t *sc_get(const char *url);
/* POST a JSON text to url, assert status 200, return the parsed answer. */
json_t *sc_post(const char *url, const char *body);

/* A loopback TCP port nothing listens on (bound, then closed). */
int sc_closed_port(void);

#endif
