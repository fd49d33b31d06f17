/* SPDX-License-Identifier: MIT */
/*
 * config + settings: parsing YAML/JSON with lines, ${VAR} expansion, the
 * things the parser refuses, JSON rendering, plugin key checks, and memd's
 * schema (every problem reported, defaults, cross references, config/).
 */
#include <criterion/criterion.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/config.h"
#include "config/settings.h"

static config_node *parse_ok(const char *text)
{
	config_node *root = NULL;
	memd_error err = {0};
	int32_t rc = config_parse_string(text, strlen(text), "t.yaml", &root, &err);
	cr_assert_eq(rc, 0, "parse failed: %s", err.msg);
	cr_assert_not_null(root);
	return root;
}

/* Parse text expecting failure; returns the message (static buffer). */
static const char *parse_fail(const char *text)
{
	static memd_error err;
	config_node *root = NULL;
	memset(&err, 0, sizeof(err));
	int32_t rc = config_parse_string(text, strlen(text), "t.yaml", &root, &err);
	cr_assert_eq(rc, MEMD_EINVAL, "expected EINVAL, got %d for:\n%s", rc, text);
	cr_assert_null(root);
	cr_assert_eq(err.code, MEMD_EINVAL);
	return err.msg;
}

static int has_line(const config_diag *d, const char *line)
{
	for (size_t i = 0; i < d->n; i++)
		if (strcmp(d->lines[i], line) == 0)
			return 1;
	return 0;
}

static int has_prefix(const config_diag *d, const char *prefix)
{
	for (size_t i = 0; i < d->n; i++)
		if (strncmp(d->lines[i], prefix, strlen(prefix)) == 0)
			return 1;
	return 0;
}

static char *diag_text(const config_diag *d)
{
	size_t len = 1;
	for (size_t i = 0; i < d->n; i++)
		len += strlen(d->lines[i]) + 1;
	char *out = calloc(1, len);
	for (size_t i = 0; i < d->n; i++) {
		strcat(out, d->lines[i]);
		strcat(out, "\n");
	}
	return out;
}

#define assert_line(d, line)                                                          \
	do {                                                                          \
		char *all_ = diag_text(d);                                            \
		cr_assert(has_line(d, line), "missing line:\n  %s\ngot:\n%s", line, all_); \
		free(all_);                                                           \
	} while (0)

#define assert_prefix(d, prefix)                                                      \
	do {                                                                          \
		char *all_ = diag_text(d);                                            \
		cr_assert(has_prefix(d, prefix), "no line starts with:\n  %s\ngot:\n%s", \
			  prefix, all_);                                              \
		free(all_);                                                           \
	} while (0)

/* settings_load on YAML text named t.yaml. */
/* API keys of the length memd asks for (SETTINGS_API_KEY_MIN). */
#define KEY_R "config-test-read-key-0123456789abcdef"
#define KEY_W "config-test-write-key-0123456789abcdef"
#define KEY_A "config-test-admin-key-0123456789abcdef"
#define KEY_D "config-test-default-key-0123456789abcdef"

static int32_t load(const char *text, settings *s, config_diag *d)
{
	return settings_load(parse_ok(text), s, d);
}

/* ---- parsing ----------------------------------------------------------- */

Test(config, yaml_nodes_know_file_and_line)
{
	config_node *root = parse_ok("# comment\n"
				     "server:\n"
				     "  listen: 127.0.0.1:1\n"
				     "  list:\n"
				     "    - a\n"
				     "    - {x: 1}\n"
				     "empty:\n"
				     "quoted: \"5\"\n");
	cr_assert_eq(config_node_type(root), CONFIG_MAP);
	cr_assert_str_eq(config_node_file(root), "t.yaml");
	cr_assert_eq(config_len(root), 3);
	cr_assert_str_eq(config_map_key_at(root, 0), "server");
	cr_assert_eq(config_node_line(config_map_key_node_at(root, 0)), 2);
	const config_node *server = config_map_get(root, "server");
	cr_assert_eq(config_node_type(server), CONFIG_MAP);
	cr_assert_eq(config_node_line(server), 3);
	const config_node *listen = config_map_get(server, "listen");
	cr_assert_str_eq(config_scalar(listen), "127.0.0.1:1");
	cr_assert_eq(config_node_line(listen), 3);
	cr_assert_not(config_scalar_quoted(listen));
	const config_node *list = config_map_get(server, "list");
	cr_assert_eq(config_node_type(list), CONFIG_SEQ);
	cr_assert_eq(config_len(list), 2);
	cr_assert_eq(config_node_line(config_seq_at(list, 0)), 5);
	const config_node *x = config_map_get(config_seq_at(list, 1), "x");
	cr_assert_eq(config_node_line(x), 6);
	cr_assert_null(config_seq_at(list, 2));
	cr_assert_eq(config_node_type(config_map_get(root, "empty")), CONFIG_NULL);
	cr_assert_null(config_scalar(config_map_get(root, "empty")));
	const config_node *quoted = config_map_get(root, "quoted");
	cr_assert(config_scalar_quoted(quoted));
	cr_assert_str_eq(config_scalar(quoted), "5");
	cr_assert_null(config_map_get(root, "nope"));
	cr_assert_null(config_map_get(list, "x"));
	config_free(root);
}

Test(config, json_is_read_with_lines)
{
	config_node *root = parse_ok("{\n"
				     "\t\"server\": {\n"
				     "\t\t\"threads\": 4,\n"
				     "\t\t\"api_keys\": [{\"key\": \"k\", \"scope\": \"admin\"}]\n"
				     "\t},\n"
				     "\t\"on\": true, \"off\": null\n"
				     "}\n");
	const config_node *server = config_map_get(root, "server");
	const config_node *threads = config_map_get(server, "threads");
	cr_assert_eq(config_node_line(threads), 3);
	int64_t v = 0;
	cr_assert_eq(config_as_int(threads, &v), 0);
	cr_assert_eq(v, 4);
	const config_node *keys = config_map_get(server, "api_keys");
	cr_assert_eq(config_node_line(config_map_get(config_seq_at(keys, 0), "scope")), 4);
	int32_t b = 0;
	cr_assert_eq(config_as_bool(config_map_get(root, "on"), &b), 0);
	cr_assert_eq(b, 1);
	cr_assert_eq(config_node_line(config_map_get(root, "off")), 6);
	cr_assert_eq(config_node_type(config_map_get(root, "off")), CONFIG_NULL);
	config_free(root);
}

Test(config, parse_file_and_missing_file)
{
	char path[] = "/tmp/memd-config-test-XXXXXX";
	int fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	const char text[] = "a:\n  b: 2\n";
	cr_assert_eq(write(fd, text, sizeof(text) - 1), (ssize_t)(sizeof(text) - 1));
	close(fd);
	config_node *root = NULL;
	memd_error err = {0};
	cr_assert_eq(config_parse_file(path, &root, &err), 0, "%s", err.msg);
	const config_node *b = config_map_get(config_map_get(root, "a"), "b");
	cr_assert_str_eq(config_node_file(b), path);
	cr_assert_eq(config_node_line(b), 2);
	config_free(root);
	unlink(path);

	root = NULL;
	cr_assert_eq(config_parse_file(path, &root, &err), MEMD_EIO);
	cr_assert_null(root);
	cr_assert(strstr(err.msg, path), "%s", err.msg);
}

Test(config, empty_document_is_null)
{
	config_node *root = parse_ok("# only a comment\n");
	cr_assert_eq(config_node_type(root), CONFIG_NULL);
	config_free(root);
}

Test(config, env_expansion)
{
	setenv("MEMD_TEST_SET", "from-env", 1);
	setenv("MEMD_TEST_EMPTY", "", 1);
	unsetenv("MEMD_TEST_UNSET");
	config_node *root = parse_ok("a: ${MEMD_TEST_SET}\n"
				     "b: x-${MEMD_TEST_SET}-${MEMD_TEST_SET}\n"
				     "c: ${MEMD_TEST_UNSET:-fallback}\n"
				     "d: ${MEMD_TEST_SET:-fallback}\n"
				     "e: ${MEMD_TEST_EMPTY:-used-when-empty}\n"
				     "f: \"${MEMD_TEST_EMPTY}\"\n"
				     "g: ${MEMD_TEST_UNSET:-}\n"
				     "${MEMD_TEST_SET}: keys are not expanded\n");
	cr_assert_str_eq(config_scalar(config_map_get(root, "a")), "from-env");
	cr_assert_str_eq(config_scalar(config_map_get(root, "b")), "x-from-env-from-env");
	cr_assert_str_eq(config_scalar(config_map_get(root, "c")), "fallback");
	cr_assert_str_eq(config_scalar(config_map_get(root, "d")), "from-env");
	cr_assert_str_eq(config_scalar(config_map_get(root, "e")), "used-when-empty");
	cr_assert_str_eq(config_scalar(config_map_get(root, "f")), "");
	cr_assert_str_eq(config_scalar(config_map_get(root, "g")), "");
	cr_assert_not_null(config_map_get(root, "${MEMD_TEST_SET}"));
	config_free(root);
}

Test(config, env_missing_variable_is_an_error)
{
	unsetenv("MEMD_TEST_UNSET");
	const char *msg = parse_fail("server:\n  listen: ${MEMD_TEST_UNSET}\n");
	cr_assert_str_eq(msg, "t.yaml:2: environment variable MEMD_TEST_UNSET is not set");
	msg = parse_fail("a: ${MEMD_TEST_SET\n");
	cr_assert(strstr(msg, "t.yaml:1: unterminated ${"), "%s", msg);
	msg = parse_fail("a: x\nb: ${9bad}\n");
	cr_assert(strstr(msg, "t.yaml:2: bad variable reference \"${9bad}\""), "%s", msg);
	msg = parse_fail("a: ${A-B}\n");
	cr_assert(strstr(msg, "bad variable reference"), "%s", msg);
}

Test(config, double_dollar_is_a_literal_dollar)
{
	setenv("MEMD_TEST_SET", "v", 1);
	unsetenv("MEMD_TEST_UNSET");
	config_node *root = parse_ok("a: price $$5\n"
				     "b: $${MEMD_TEST_SET}\n"
				     "c: $HOME stays\n"
				     "d: ${MEMD_TEST_UNSET:-x$$y}\n"
				     "e: $$$$\n");
	cr_assert_str_eq(config_scalar(config_map_get(root, "a")), "price $5");
	cr_assert_str_eq(config_scalar(config_map_get(root, "b")), "${MEMD_TEST_SET}");
	cr_assert_str_eq(config_scalar(config_map_get(root, "c")), "$HOME stays");
	cr_assert_str_eq(config_scalar(config_map_get(root, "d")), "x$y");
	cr_assert_str_eq(config_scalar(config_map_get(root, "e")), "$$");
	config_free(root);
}

Test(config, duplicate_keys_are_refused)
{
	const char *msg = parse_fail("a: 1\nb:\n  x: 1\n  x: 2\n");
	cr_assert_str_eq(msg, "t.yaml:4:3: duplicate key \"x\" (first at line 3)");
	msg = parse_fail("{\"a\": 1,\n \"a\": 2}");
	cr_assert_str_eq(msg, "t.yaml:2:2: duplicate key \"a\" (first at line 1)");
}

Test(config, anchors_and_aliases_are_refused)
{
	const char *msg = parse_fail("a: &x 1\nb: *x\n");
	cr_assert(strstr(msg, "t.yaml:1:4: anchors and aliases are not supported (&x)"), "%s", msg);
	msg = parse_fail("base: &b {k: 1}\n");
	cr_assert(strstr(msg, "t.yaml:1:7: anchors and aliases are not supported"), "%s", msg);
	msg = parse_fail("a:\n  - *nothing\n");
	cr_assert(strstr(msg, "t.yaml:2:5: "), "%s", msg);
}

Test(config, syntax_errors_have_file_line_col)
{
	const char *msg = parse_fail("a: 1\nb: [1, 2\nc: 3\n");
	unsigned line = 0, col = 0;
	char rest[256] = "";
	cr_assert_eq(sscanf(msg, "t.yaml:%u:%u: %255[^\n]", &line, &col, rest), 3, "%s", msg);
	cr_assert_geq(line, 2, "%s", msg);
	cr_assert_gt(col, 0);
	cr_assert_gt(strlen(rest), 0);

	msg = parse_fail("a: b: c\n");
	cr_assert_str_eq(msg, "t.yaml:1:5: mapping values are not allowed in this context");
}

Test(config, other_refusals)
{
	const char *msg = parse_fail("x: 1\n? [a, b]\n: 1\n");
	cr_assert_str_eq(msg, "t.yaml:2:3: map keys must be scalars");
	msg = parse_fail("--- {a: 1}\n--- {b: 2}\n");
	cr_assert(strstr(msg, "t.yaml:2:1: multiple documents are not supported"), "%s", msg);
	msg = parse_fail("a: !!int 5\n");
	cr_assert(strstr(msg, "t.yaml:1:4: tag !!int is not supported"), "%s", msg);
	msg = parse_fail("a: \"x\\0y\"\n");
	cr_assert(strstr(msg, "NUL"), "%s", msg);
}

Test(config, typed_reads)
{
	config_node *root = parse_ok("i: 42\nn: -7\nbig: 99999999999999999999\nd: 0.5\ne: 1e3\n"
				     "t: yes\nf: Off\nw: maybe\ns: \"12\"\nm: {a: 1}\nz:\n"
				     "inf: .inf\nsp: \" 5\"\n");
	int64_t i = 0;
	double d = 0;
	int32_t b = -1;
	cr_assert_eq(config_as_int(config_map_get(root, "i"), &i), 0);
	cr_assert_eq(i, 42);
	cr_assert_eq(config_as_int(config_map_get(root, "n"), &i), 0);
	cr_assert_eq(i, -7);
	cr_assert_eq(config_as_int(config_map_get(root, "s"), &i), 0);
	cr_assert_eq(i, 12);
	i = 123;
	cr_assert_eq(config_as_int(config_map_get(root, "big"), &i), MEMD_EINVAL);
	cr_assert_eq(config_as_int(config_map_get(root, "d"), &i), MEMD_EINVAL);
	cr_assert_eq(config_as_int(config_map_get(root, "m"), &i), MEMD_EINVAL);
	cr_assert_eq(config_as_int(config_map_get(root, "z"), &i), MEMD_EINVAL);
	cr_assert_eq(config_as_int(config_map_get(root, "sp"), &i), MEMD_EINVAL);
	cr_assert_eq(config_as_int(NULL, &i), MEMD_EINVAL);
	cr_assert_eq(i, 123, "failed reads must not write");
	cr_assert_eq(config_as_double(config_map_get(root, "d"), &d), 0);
	cr_assert_float_eq(d, 0.5, 1e-12);
	cr_assert_eq(config_as_double(config_map_get(root, "e"), &d), 0);
	cr_assert_float_eq(d, 1000.0, 1e-9);
	cr_assert_eq(config_as_double(config_map_get(root, "i"), &d), 0);
	cr_assert_float_eq(d, 42.0, 1e-12);
	cr_assert_eq(config_as_double(config_map_get(root, "inf"), &d), MEMD_EINVAL);
	cr_assert_eq(config_as_double(config_map_get(root, "w"), &d), MEMD_EINVAL);
	cr_assert_eq(config_as_bool(config_map_get(root, "t"), &b), 0);
	cr_assert_eq(b, 1);
	cr_assert_eq(config_as_bool(config_map_get(root, "f"), &b), 0);
	cr_assert_eq(b, 0);
	cr_assert_eq(config_as_bool(config_map_get(root, "w"), &b), MEMD_EINVAL);
	cr_assert_eq(config_as_bool(config_map_get(root, "i"), &b), MEMD_EINVAL);
	config_free(root);
}

Test(config, to_json_keeps_plain_versus_quoted)
{
	setenv("MEMD_TEST_NUM", "8", 1);
	config_node *root = parse_ok("n: 1\n"
				     "q: \"1\"\n"
				     "t: true\n"
				     "tq: 'true'\n"
				     "nul: ~\n"
				     "f: -2.5e-3\n"
				     "notnum: 01\n"
				     "word: hello\n"
				     "env: ${MEMD_TEST_NUM}\n"
				     "esc: \"a\\\"b\\\\c\\nd\\te\\x01\"\n"
				     "list: [1, two, {k: false}]\n"
				     "empty: {}\n"
				     "str: !!str 5\n");
	char *json = config_to_json(root);
	cr_assert_str_eq(json, "{\"n\":1,\"q\":\"1\",\"t\":true,\"tq\":\"true\",\"nul\":null,"
			       "\"f\":-2.5e-3,\"notnum\":\"01\",\"word\":\"hello\",\"env\":8,"
			       "\"esc\":\"a\\\"b\\\\c\\nd\\te\\u0001\","
			       "\"list\":[1,\"two\",{\"k\":false}],\"empty\":{},\"str\":\"5\"}");
	free(json);
	json = config_to_json(config_map_get(root, "list"));
	cr_assert_str_eq(json, "[1,\"two\",{\"k\":false}]");
	free(json);
	json = config_to_json(NULL);
	cr_assert_str_eq(json, "null");
	free(json);
	config_free(root);
}

/* ---- plugin keys ------------------------------------------------------- */

static const memd_config_key key_path = {sizeof(memd_config_key), MEMD_CONFIG_STRING,
					 MEMD_CONFIG_REQUIRED, 0, "path", NULL, "file", NULL};
static const memd_config_key key_sync = {sizeof(memd_config_key), MEMD_CONFIG_BOOL, 0, 0,
					 "synchronous", "true", "fsync", NULL};
static const memd_config_key key_pool = {sizeof(memd_config_key), MEMD_CONFIG_INT, 0, 0, "pool",
					 "4", "connections", NULL};
static const memd_config_key key_ratio = {sizeof(memd_config_key), MEMD_CONFIG_DOUBLE, 0, 0,
					  "ratio", NULL, "a fraction", NULL};
static const memd_config_key key_extra = {sizeof(memd_config_key), MEMD_CONFIG_JSON, 0, 0,
					  "extra", NULL, "anything", NULL};
static const memd_config_key key_secret = {sizeof(memd_config_key), MEMD_CONFIG_INT,
					   MEMD_CONFIG_SECRET, 0, "pin", NULL, "secret", NULL};
static const memd_config_key *const test_keys[] = {&key_path, &key_sync, &key_pool, &key_ratio,
						   &key_extra, &key_secret, NULL};

static const char *const mode_choices[] = {"full", "normal", NULL};
static const memd_config_key key_mode = {sizeof(memd_config_key), MEMD_CONFIG_STRING, 0, 0,
					 "mode", "full", "full or normal", mode_choices};
static const memd_config_key *const choice_keys[] = {&key_mode, NULL};

/* A STRING key with choices takes only those values (memd config check
 * refuses what the plugin's init would). */
Test(config, check_plugin_refuses_a_value_not_among_the_choices)
{
	config_node *root = parse_ok("good: {mode: normal}\n"
				     "bad: {mode: maybe}\n"
				     "quoted: {mode: \"full\"}\n");
	config_diag d = {0};
	cr_assert_eq(config_check_plugin(config_map_get(root, "good"), "good", NULL, choice_keys, &d), 0);
	cr_assert_eq(config_check_plugin(config_map_get(root, "quoted"), "quoted", NULL, choice_keys,
					 &d), 0);
	cr_assert_eq(config_check_plugin(config_map_get(root, "bad"), "bad", NULL, choice_keys, &d), 1);
	cr_assert_eq(d.n, 1);
	assert_line(&d, "t.yaml:2: bad.mode: expected one of full, normal, got \"maybe\"");
	config_diag_clear(&d);
	config_free(root);
}

Test(config, check_plugin_accepts_a_good_node)
{
	config_node *root = parse_ok("stores:\n"
				     "  main:\n"
				     "    plugin: sqlite\n"
				     "    path: x.db\n"
				     "    synchronous: off\n"
				     "    pool: 16\n"
				     "    ratio: 0.25\n"
				     "    extra: {any: [thing]}\n"
				     "    pin: 1234\n");
	config_diag d = {0};
	const config_node *main = config_map_get(config_map_get(root, "stores"), "main");
	cr_assert_eq(config_check_plugin(main, "stores.main", "plugin", test_keys, &d), 0);
	cr_assert_eq(d.n, 0);
	config_free(root);
}

Test(config, check_plugin_reports_every_problem)
{
	config_node *root = parse_ok("stores:\n"
				     "  main:\n"
				     "    plugin: sqlite\n"
				     "    pathh: x.db\n"
				     "    synchronous: sometimes\n"
				     "    pool: many\n"
				     "    ratio: [1]\n"
				     "    extra: 5\n"
				     "    pin: hunter2\n");
	config_diag d = {0};
	const config_node *main = config_map_get(config_map_get(root, "stores"), "main");
	cr_assert_eq(config_check_plugin(main, "stores.main", "plugin", test_keys, &d), 6);
	cr_assert_eq(d.n, 6);
	assert_line(&d, "t.yaml:4: stores.main.pathh: unknown key "
			"(known: path, synchronous, pool, ratio, extra, pin)");
	assert_line(&d, "t.yaml:5: stores.main.synchronous: expected a boolean (true/false), got \"sometimes\"");
	assert_line(&d, "t.yaml:6: stores.main.pool: expected an integer, got \"many\"");
	assert_line(&d, "t.yaml:7: stores.main.ratio: expected a number, got a sequence");
	/* a secret's value is never echoed */
	assert_line(&d, "t.yaml:9: stores.main.pin: expected an integer, got a scalar");
	assert_line(&d, "t.yaml:3: stores.main.path: required key is missing");
	config_diag_clear(&d);
	cr_assert_eq(d.n, 0);

	/* without a skip key, "plugin" is unknown too; a non-map is one problem */
	cr_assert_eq(config_check_plugin(main, "x", NULL, test_keys, &d), 7);
	config_diag_clear(&d);
	cr_assert_eq(config_check_plugin(config_map_get(main, "pool"), "x", NULL, test_keys, &d), 1);
	assert_line(&d, "t.yaml:6: x: expected a map, got a scalar");
	config_diag_clear(&d);
	/* no schema: every key is unknown */
	cr_assert_eq(config_check_plugin(main, "s", "plugin", NULL, &d), 6);
	assert_line(&d, "t.yaml:4: s.pathh: unknown key (this plugin takes no keys)");
	config_diag_clear(&d);
	config_free(root);
}

Test(config, check_plugin_null_counts_as_absent)
{
	config_node *root = parse_ok("a:\n  path:\n  pool: ~\n");
	config_diag d = {0};
	cr_assert_eq(config_check_plugin(config_map_get(root, "a"), "a", NULL, test_keys, &d), 1);
	assert_line(&d, "t.yaml:2: a.path: required key is missing");
	config_diag_clear(&d);
	cr_assert_eq(config_check_plugin(NULL, "b", NULL, test_keys, &d), 1);
	assert_line(&d, "b.path: required key is missing");
	config_diag_clear(&d);
	config_free(root);
}

/* ---- settings ---------------------------------------------------------- */

Test(settings, connection_limits_out_of_range)
{
	settings s;
	config_diag d = {0};
	int32_t rc = load("server:\n"                                /* 1 */
			  "  header_timeout_s: 0\n"                 /* 2 */
			  "  max_connections: 0\n"                  /* 3 */
			  "  max_connections_per_ip: -1\n",         /* 4 */
			  &s, &d);
	cr_assert_eq(rc, MEMD_EINVAL);
	assert_line(&d, "t.yaml:2: server.header_timeout_s: must be between 1 and 3600, got 0");
	assert_line(&d, "t.yaml:3: server.max_connections: must be between 1 and 1000000, got 0");
	assert_line(&d, "t.yaml:4: server.max_connections_per_ip: must be between 0 and 1000000, got -1");
	config_diag_clear(&d);
}

Test(settings, zero_config_defaults)
{
	settings s;
	config_diag d = {0};
	cr_assert_eq(settings_load(NULL, &s, &d), 0);
	cr_assert_eq(d.n, 0);
	cr_assert_str_eq(s.listen, SETTINGS_LISTEN_DEFAULT);
	cr_assert_eq(s.n_api_keys, 0);
	cr_assert_eq(s.threads, 0);
	cr_assert_eq(s.max_body_bytes, 8388608);
	cr_assert_eq(s.max_batch_events, 1000);
	cr_assert_eq(s.max_header_bytes, 16384);
	cr_assert_eq(s.request_timeout_ms, 30000);
	cr_assert_eq(s.header_timeout_s, 10);
	cr_assert_eq(s.max_connections, 4096);
	cr_assert_eq(s.max_connections_per_ip, 256);
	cr_assert_eq(s.log_level, MEMD_LOG_INFO);
	cr_assert_not_null(s.plugin_path);
	cr_assert_null(s.plugin_path[0]);
	cr_assert_eq(s.n_stores, 1);
	cr_assert_str_eq(s.stores[0].name, "main");
	cr_assert_str_eq(s.stores[0].plugin, "sqlite");
	cr_assert_str_eq(config_node_file(s.stores[0].node), "<defaults>");
	cr_assert_gt(config_node_line(s.stores[0].node), 0);
	cr_assert_str_eq(config_scalar(config_map_get(s.stores[0].node, "path")), "./data/memd.db");
	cr_assert_str_eq(s.sessions_store, "main");
	cr_assert_eq(s.keyword_enabled, 1);
	cr_assert_float_eq(s.keyword_k1, 1.2, 1e-12);
	cr_assert_float_eq(s.keyword_b, SETTINGS_KEYWORD_B_DEFAULT, 1e-12);
	cr_assert_float_eq(s.keyword_b, 0.3, 1e-12);
	cr_assert_eq(s.vector_enabled, 0);
	cr_assert_null(s.vector_store);
	cr_assert_null(s.embedder);
	cr_assert_str_eq(s.search_mode_default, "keyword");
	cr_assert_null(s.summarizer);
	cr_assert_null(s.tokenizer);
	cr_assert_eq(s.temp_ttl_seconds, 3600);
	cr_assert_eq(s.n_apps, 1);
	const settings_app *app = settings_app_for(&s, "anything");
	cr_assert_not_null(app);
	cr_assert_str_eq(app->name, "*");
	cr_assert_str_eq(app->strategy, "buffer_window");
	int64_t n = 0;
	cr_assert_eq(config_as_int(config_map_get(app->node, "max_messages"), &n), 0);
	cr_assert_eq(n, SETTINGS_WINDOW_DEFAULT);
	cr_assert_not_null(settings_store_get(&s, "main"));
	cr_assert_null(settings_store_get(&s, "other"));
	settings_clear(&s);
	settings_clear(&s); /* cleared settings may be cleared again */
	settings_clear(NULL);
}

Test(settings, empty_file_is_zero_config)
{
	settings s;
	config_diag d = {0};
	cr_assert_eq(load("# nothing\n", &s, &d), 0);
	cr_assert_eq(d.n, 0);
	cr_assert_str_eq(s.stores[0].plugin, "sqlite");
	cr_assert_str_eq(settings_app_for(&s, NULL)->strategy, "buffer_window");
	settings_clear(&s);
}

Test(settings, full_config_is_read)
{
	settings s;
	config_diag d = {0};
	int32_t rc = load("server:\n"
			  "  listen: \"[::1]:9000\"\n"
			  "  api_keys:\n"
			  "    - {key: " KEY_R ", scope: read}\n"
			  "    - {key: " KEY_W ", scope: write}\n"
			  "    - key: " KEY_A "\n"
			  "      scope: admin\n"
			  "    - key: " KEY_D "\n"
			  "  threads: 8\n"
			  "  max_body_bytes: 100\n"
			  "  max_batch_events: 5\n"
			  "  max_header_bytes: 200\n"
			  "  request_timeout_ms: 10\n"
			  "  log_level: debug\n"
			  "plugins: {path: [/a, /b]}\n"
			  "stores:\n"
			  "  db: {plugin: memory}\n"
			  "  vec: {plugin: filevec, path: /tmp/v}\n"
			  "sessions: {store: db}\n"
			  "index:\n"
			  "  keyword: {enabled: on, k1: 2, b: 1}\n"
			  "  vector:\n"
			  "    enabled: true\n"
			  "    store: vec\n"
			  "    embedder: {type: openai, url: 'http://x', model: m, dim: 3}\n"
			  "  default_mode: hybrid\n"
			  "summarizer: {type: openai, url: u, model: m, retries: 0}\n"
			  "tokenizer: {type: bpe, ranks: /r, encoding: o200k_base}\n"
			  "state: {temp_ttl_seconds: 5}\n"
			  "apps:\n"
			  "  bot: {working_memory: {strategy: all}}\n",
			  &s, &d);
	char *all = diag_text(&d);
	cr_assert_eq(rc, 0, "%s", all);
	free(all);
	cr_assert_str_eq(s.listen, "[::1]:9000");
	cr_assert_eq(s.n_api_keys, 4);
	cr_assert_str_eq(s.api_keys[0].key, KEY_R);
	cr_assert_eq(s.api_keys[0].scope, SETTINGS_SCOPE_READ);
	cr_assert_eq(s.api_keys[1].scope, SETTINGS_SCOPE_WRITE);
	cr_assert_eq(s.api_keys[2].scope, SETTINGS_SCOPE_ADMIN);
	cr_assert_eq(s.api_keys[3].scope, SETTINGS_SCOPE_READ);
	cr_assert_eq(s.threads, 8);
	cr_assert_eq(s.max_body_bytes, 100);
	cr_assert_eq(s.max_batch_events, 5);
	cr_assert_eq(s.max_header_bytes, 200);
	cr_assert_eq(s.request_timeout_ms, 10);
	cr_assert_eq(s.log_level, MEMD_LOG_DEBUG);
	cr_assert_str_eq(s.plugin_path[0], "/a");
	cr_assert_str_eq(s.plugin_path[1], "/b");
	cr_assert_null(s.plugin_path[2]);
	cr_assert_eq(s.n_stores, 2);
	cr_assert_str_eq(settings_store_get(&s, "vec")->plugin, "filevec");
	cr_assert_str_eq(s.sessions_store, "db");
	cr_assert_eq(s.keyword_enabled, 1);
	cr_assert_float_eq(s.keyword_k1, 2.0, 1e-12);
	cr_assert_float_eq(s.keyword_b, 1.0, 1e-12);
	cr_assert_eq(s.vector_enabled, 1);
	cr_assert_str_eq(s.vector_store, "vec");
	cr_assert_str_eq(config_scalar(config_map_get(s.embedder, "type")), "openai");
	cr_assert_str_eq(s.search_mode_default, "hybrid");
	cr_assert_str_eq(config_scalar(config_map_get(s.summarizer, "type")), "openai");
	cr_assert_str_eq(config_scalar(config_map_get(s.tokenizer, "ranks")), "/r");
	cr_assert_eq(s.temp_ttl_seconds, 5);
	/* "*" was added from the defaults, after the configured app */
	cr_assert_eq(s.n_apps, 2);
	cr_assert_str_eq(settings_app_for(&s, "bot")->strategy, "all");
	cr_assert_str_eq(settings_app_for(&s, "other")->name, "*");
	cr_assert_str_eq(config_node_file(settings_app_for(&s, "other")->node), "<defaults>");
	settings_clear(&s);
}

Test(settings, plugin_path_may_be_one_string)
{
	settings s;
	config_diag d = {0};
	cr_assert_eq(load("plugins: {path: /only}\n", &s, &d), 0);
	cr_assert_str_eq(s.plugin_path[0], "/only");
	cr_assert_null(s.plugin_path[1]);
	settings_clear(&s);
}

Test(settings, unknown_keys_at_every_level_in_one_run)
{
	settings s;
	memset(&s, 0xA5, sizeof(s));
	settings before = s;
	config_diag d = {0};
	int32_t rc = load("servr: {}\n"                           /* 1 */
			  "server:\n"                             /* 2 */
			  "  listen: 127.0.0.1:1\n"               /* 3 */
			  "  treads: 4\n"                         /* 4 */
			  "  api_keys:\n"                         /* 5 */
			  "    - {key: " KEY_A ", scop: admin}\n" /* 6 */
			  "index:\n"                              /* 7 */
			  "  vector:\n"                           /* 8 */
			  "    embedder: {type: hash, dims: 3}\n" /* 9 */
			  "  keyword: {enabled: true, k2: 1}\n"   /* 10 */
			  "summarizer: {typ: extractive}\n"       /* 11 */
			  "tokenizer: {type: approx, rank: x}\n"  /* 12 */
			  "state: {ttl: 1}\n"                     /* 13 */
			  "sessions: {stor: main}\n"              /* 14 */
			  "plugins: {paths: [/x]}\n"              /* 15 */
			  "apps:\n"                               /* 16 */
			  "  a: {working_memory: {strategy: all}, extra: 1}\n", /* 17 */
			  &s, &d);
	cr_assert_eq(rc, MEMD_EINVAL);
	cr_assert_eq(memcmp(&s, &before, sizeof(s)), 0, "*ret must be untouched on failure");
	assert_prefix(&d, "t.yaml:1: servr: unknown key (known: server, plugins, stores,");
	assert_prefix(&d, "t.yaml:4: server.treads: unknown key (known: listen, api_keys,");
	assert_line(&d, "t.yaml:6: server.api_keys[0].scop: unknown key (known: key, scope, apps, user)");
	assert_prefix(&d, "t.yaml:9: index.vector.embedder.dims: unknown key (known: type, dim,");
	assert_line(&d, "t.yaml:10: index.keyword.k2: unknown key (known: enabled, k1, b, snapshot)");
	assert_prefix(&d, "t.yaml:11: summarizer.typ: unknown key");
	assert_line(&d, "t.yaml:12: tokenizer.rank: unknown key (known: type, ranks, encoding)");
	assert_line(&d, "t.yaml:13: state.ttl: unknown key (known: temp_ttl_seconds)");
	assert_line(&d, "t.yaml:14: sessions.stor: unknown key (known: store, retention_days)");
	assert_line(&d, "t.yaml:15: plugins.paths: unknown key (known: path)");
	assert_line(&d, "t.yaml:17: apps.a.extra: unknown key (known: working_memory, lanes, memory, checkpoints)");
	cr_assert_eq(d.n, 11);
	config_diag_clear(&d);
}

Test(settings, type_errors)
{
	settings s;
	config_diag d = {0};
	int32_t rc = load("server:\n"                              /* 1 */
			  "  listen: [a]\n"                        /* 2 */
			  "  threads: abc\n"                       /* 3 */
			  "  log_level: loud\n"                    /* 4 */
			  "  api_keys: {key: k}\n"                 /* 5 */
			  "  max_body_bytes: 1.5\n"                /* 6 */
			  "index:\n"                               /* 7 */
			  "  keyword: {enabled: maybe, k1: fast}\n" /* 8 */
			  "  vector: [1]\n"                        /* 9 */
			  "  default_mode: fuzzy\n"                /* 10 */
			  "stores: {main: sqlite}\n"               /* 11 */
			  "summarizer: openai\n"                   /* 12 */
			  "tokenizer: {encoding: gpt2}\n"          /* 13 */
			  "apps: {a: {working_memory: all}}\n",    /* 14 */
			  &s, &d);
	cr_assert_eq(rc, MEMD_EINVAL);
	assert_line(&d, "t.yaml:2: server.listen: expected a string, got a sequence");
	assert_line(&d, "t.yaml:3: server.threads: expected an integer, got \"abc\"");
	assert_line(&d, "t.yaml:4: server.log_level: expected one of error, warn, info, debug, got \"loud\"");
	assert_line(&d, "t.yaml:5: server.api_keys: expected a sequence of {key, scope}, got a map");
	assert_line(&d, "t.yaml:6: server.max_body_bytes: expected an integer, got \"1.5\"");
	assert_line(&d, "t.yaml:8: index.keyword.enabled: expected true or false, got \"maybe\"");
	assert_line(&d, "t.yaml:8: index.keyword.k1: expected a number, got \"fast\"");
	assert_line(&d, "t.yaml:9: index.vector: expected a map, got a sequence");
	assert_line(&d, "t.yaml:10: index.default_mode: expected one of keyword, vector, hybrid, got \"fuzzy\"");
	assert_line(&d, "t.yaml:11: stores.main: expected a map {plugin: ..., ...}, got a scalar");
	assert_line(&d, "t.yaml:12: summarizer: expected a map, got a scalar");
	assert_line(&d, "t.yaml:13: tokenizer.encoding: expected one of cl100k_base, o200k_base, got \"gpt2\"");
	assert_line(&d, "t.yaml:14: apps.a.working_memory: expected a map, got a scalar");
	cr_assert_eq(d.n, 13, "%zu lines", d.n);
	config_diag_clear(&d);
}

Test(settings, ranges)
{
	settings s;
	config_diag d = {0};
	int32_t rc = load("server:\n"                                /* 1 */
			  "  listen: 127.0.0.1:0\n"                  /* 2 */
			  "  threads: -1\n"                          /* 3 */
			  "  max_body_bytes: 0\n"                    /* 4 */
			  "  max_batch_events: -5\n"                 /* 5 */
			  "  request_timeout_ms: 0\n"                /* 6 */
			  "index:\n"                                 /* 7 */
			  "  keyword: {k1: 0, b: 1.5}\n"             /* 8 */
			  "  vector: {embedder: {dim: 0}}\n"         /* 9 */
			  "summarizer: {retries: -1, max_tokens: 0}\n" /* 10 */
			  "state: {temp_ttl_seconds: 0}\n",          /* 11 */
			  &s, &d);
	cr_assert_eq(rc, MEMD_EINVAL);
	assert_prefix(&d, "t.yaml:2: server.listen: expected host:port or [v6-address]:port");
	assert_line(&d, "t.yaml:3: server.threads: must be between 0 and 1024, got -1");
	assert_line(&d, "t.yaml:4: server.max_body_bytes: must be between 1 and 2147483647, got 0");
	assert_prefix(&d, "t.yaml:5: server.max_batch_events: must be between 1 and");
	assert_prefix(&d, "t.yaml:6: server.request_timeout_ms: must be between 1 and");
	assert_prefix(&d, "t.yaml:8: index.keyword.k1: must be > 0 ");
	assert_line(&d, "t.yaml:8: index.keyword.b: must be > 0 and <= 1, got 1.5");
	assert_prefix(&d, "t.yaml:9: index.vector.embedder.dim: must be between 1 and");
	assert_prefix(&d, "t.yaml:10: summarizer.retries: must be between 0 and");
	assert_prefix(&d, "t.yaml:10: summarizer.max_tokens: must be between 1 and");
	assert_prefix(&d, "t.yaml:11: state.temp_ttl_seconds: must be between 1 and");
	cr_assert_eq(d.n, 11);
	config_diag_clear(&d);

	rc = load("index: {keyword: {b: 0}}\n", &s, &d);
	cr_assert_eq(rc, MEMD_EINVAL);
	assert_line(&d, "t.yaml:1: index.keyword.b: must be > 0 and <= 1, got 0");
	config_diag_clear(&d);
}

Test(settings, listen_forms)
{
	static const char *const good[] = {"127.0.0.1:8700", "localhost:1", "[::1]:65535",
					   "0.0.0.0:80"};
	static const char *const bad[] = {"127.0.0.1", ":80", "[::1]", "::1:80", "h:65536",
					  "h:0", "h:8a", "[]:80", "h:"};
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		char *host = NULL;
		int32_t port = 0;
		cr_assert_eq(settings_listen_split(good[i], &host, &port), 0, "%s", good[i]);
		cr_assert_gt(port, 0);
		free(host);
	}
	char *host = NULL;
	int32_t port = 0;
	cr_assert_eq(settings_listen_split("[::1]:99", &host, &port), 0);
	cr_assert_str_eq(host, "::1");
	cr_assert_eq(port, 99);
	free(host);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		host = NULL;
		cr_assert_eq(settings_listen_split(bad[i], &host, &port), MEMD_EINVAL, "%s", bad[i]);
		cr_assert_null(host);
	}
}

Test(settings, required_keys_and_cross_references)
{
	settings s;
	config_diag d = {0};
	int32_t rc = load("server:\n"                                  /* 1 */
			  "  api_keys:\n"                              /* 2 */
			  "    - {scope: read}\n"                      /* 3 */
			  "    - {key: " KEY_D "}\n"                  /* 4 */
			  "    - {key: " KEY_D "}\n"                  /* 5 */
			  "stores:\n"                                  /* 6 */
			  "  main: {plugin: sqlite}\n"                 /* 7 */
			  "  nop: {path: x}\n"                         /* 8 */
			  "sessions: {store: mian}\n"                  /* 9 */
			  "index:\n"                                   /* 10 */
			  "  vector: {enabled: true, store: vex}\n"    /* 11 */
			  "summarizer: {type: openai, model: m}\n"     /* 12 */
			  "tokenizer: {type: bpe}\n"                   /* 13 */
			  "apps:\n"                                    /* 14 */
			  "  a: {working_memory: {max_messages: 3}}\n" /* 15 */
			  "  b: {}\n",                                 /* 16 */
			  &s, &d);
	cr_assert_eq(rc, MEMD_EINVAL);
	assert_line(&d, "t.yaml:3: server.api_keys[0].key: required");
	assert_line(&d, "t.yaml:5: server.api_keys[2].key: the same key as an earlier entry of server.api_keys");
	assert_line(&d, "t.yaml:8: stores.nop.plugin: required (the store plugin's name or .so path)");
	assert_line(&d, "t.yaml:9: sessions.store: no store named \"mian\" in stores (defined: main, nop)");
	assert_line(&d, "t.yaml:11: index.vector.store: no store named \"vex\" in stores (defined: main, nop)");
	assert_line(&d, "t.yaml:12: summarizer.url: required when type is openai");
	assert_line(&d, "t.yaml:13: tokenizer.ranks: required when type is bpe (a tiktoken ranks file)");
	assert_line(&d, "t.yaml:15: apps.a.working_memory.strategy: required (the strategy plugin's name or .so path)");
	assert_line(&d, "t.yaml:16: apps.b.working_memory: required ({strategy: ..., ...})");
	cr_assert_eq(d.n, 9);
	config_diag_clear(&d);
}

Test(settings, vector_and_mode_consistency)
{
	settings s;
	config_diag d = {0};
	int32_t rc = load("index:\n"
			  "  vector: {enabled: true}\n"
			  "  default_mode: vector\n",
			  &s, &d);
	cr_assert_eq(rc, MEMD_EINVAL);
	assert_line(&d, "t.yaml:2: index.vector.store: required when index.vector.enabled is true");
	cr_assert_eq(d.n, 1);
	config_diag_clear(&d);

	rc = load("index: {default_mode: hybrid}\n", &s, &d);
	cr_assert_eq(rc, MEMD_EINVAL);
	assert_line(&d, "t.yaml:1: index.default_mode: hybrid search needs index.vector.enabled: true");
	config_diag_clear(&d);

	rc = load("index: {keyword: {enabled: false}, default_mode: keyword}\n", &s, &d);
	cr_assert_eq(rc, MEMD_EINVAL);
	assert_line(&d, "t.yaml:1: index.default_mode: keyword search needs index.keyword.enabled: true");
	config_diag_clear(&d);

	/* a disabled vector index may name a store that is not defined (yet) */
	rc = load("index: {vector: {enabled: false, store: vec}}\n", &s, &d);
	cr_assert_eq(rc, 0);
	settings_clear(&s);

	/* without default_mode, vector is chosen when it is the only index */
	rc = load("stores: {main: {plugin: memory}, v: {plugin: filevec}}\n"
		  "index: {keyword: {enabled: false}, vector: {enabled: true, store: v}}\n",
		  &s, &d);
	cr_assert_eq(rc, 0);
	cr_assert_str_eq(s.search_mode_default, "vector");
	settings_clear(&s);
}

Test(settings, hybrid_vector_weight)
{
	settings s;
	config_diag d = {0};

	/* default by embedder type: hash (also when not given), openai */
	cr_assert_eq(load("index: {}\n", &s, &d), 0);
	cr_assert_float_eq(s.hybrid_vector_weight, SETTINGS_HYBRID_VECTOR_WEIGHT_HASH, 1e-12);
	cr_assert_str_eq(s.search_mode_default, "keyword");
	settings_clear(&s);
	cr_assert_eq(load("index: {vector: {embedder: {type: hash}}}\n", &s, &d), 0);
	cr_assert_float_eq(s.hybrid_vector_weight, 0.05, 1e-12);
	settings_clear(&s);
	cr_assert_eq(load("index: {vector: {embedder: {type: openai, url: \"http://127.0.0.1:9/v1\","
			  " model: m}}}\n",
			  &s, &d),
		     0);
	cr_assert_float_eq(s.hybrid_vector_weight, 0.15, 1e-12);
	settings_clear(&s);
	/* given */
	cr_assert_eq(load("index: {hybrid: {vector_weight: 0.7}}\n", &s, &d), 0);
	cr_assert_float_eq(s.hybrid_vector_weight, 0.7, 1e-12);
	settings_clear(&s);
	cr_assert_eq(load("index: {hybrid: {vector_weight: 0}}\n", &s, &d), 0);
	cr_assert_float_eq(s.hybrid_vector_weight, 0.0, 1e-12);
	settings_clear(&s);
	/* bad */
	cr_assert_eq(load("index:\n"
			  "  hybrid:\n"
			  "    vector_weight: 1.5\n"
			  "    rrf_k: 60\n",
			  &s, &d),
		     MEMD_EINVAL);
	assert_line(&d, "t.yaml:3: index.hybrid.vector_weight: must be >= 0 and <= 1, got 1.5");
	assert_prefix(&d, "t.yaml:4: index.hybrid.rrf_k: unknown key");
	cr_assert_eq(d.n, 2);
	config_diag_clear(&d);
	cr_assert_eq(load("index: {hybrid: 3}\n", &s, &d), MEMD_EINVAL);
	assert_line(&d, "t.yaml:1: index.hybrid: expected a map, got a scalar");
	config_diag_clear(&d);
}

Test(settings, working_memory_recall)
{
	settings s;
	config_diag d = {0};
	const settings_app *a;

	/* absent: no recall */
	cr_assert_eq(load("apps: {a: {working_memory: {strategy: all}}}\n", &s, &d), 0);
	cr_assert_eq(settings_app_for(&s, "a")->recall.enabled, 0);
	settings_clear(&s);
	/* defaults, and the strategy's node no longer has the key */
	cr_assert_eq(load("apps: {a: {working_memory: {strategy: all, recall: {}}}}\n", &s, &d), 0);
	a = settings_app_for(&s, "a");
	cr_assert_eq(a->recall.enabled, 1);
	cr_assert_eq(a->recall.k, 5);
	cr_assert_eq(a->recall.max_tokens, 1000);
	cr_assert_float_eq(a->recall.min_score, 0.0, 1e-12);
	cr_assert_eq(a->recall.sources, SETTINGS_RECALL_EVENTS | SETTINGS_RECALL_MEMORIES);
	cr_assert_null(a->recall.mode);
	cr_assert_null(config_map_get(a->node, "recall"));
	cr_assert_not_null(config_map_get(a->node, "strategy"));
	settings_clear(&s);
	/* given */
	cr_assert_eq(load("apps: {a: {working_memory: {strategy: all, recall: {k: 7, sources: [memories],"
			  " min_score: 0.5, max_tokens: 300, mode: keyword}}}}\n",
			  &s, &d),
		     0);
	a = settings_app_for(&s, "a");
	cr_assert_eq(a->recall.k, 7);
	cr_assert_eq(a->recall.sources, SETTINGS_RECALL_MEMORIES);
	cr_assert_float_eq(a->recall.min_score, 0.5, 1e-12);
	cr_assert_eq(a->recall.max_tokens, 300);
	cr_assert_str_eq(a->recall.mode, "keyword");
	settings_clear(&s);
	/* bad, each with its line */
	cr_assert_eq(load("apps:\n"
			  "  a:\n"
			  "    working_memory:\n"
			  "      strategy: all\n"
			  "      recall:\n"
			  "        k: 0\n"
			  "        sources: [memories, files]\n"
			  "        min_score: -1\n"
			  "        max_tokens: 0\n"
			  "        mode: vector\n"
			  "        colour: red\n",
			  &s, &d),
		     MEMD_EINVAL);
	assert_line(&d, "t.yaml:6: apps.a.working_memory.recall.k: must be between 1 and 100, got 0");
	assert_line(&d, "t.yaml:7: apps.a.working_memory.recall.sources: expected events or memories, got \"files\"");
	assert_line(&d, "t.yaml:8: apps.a.working_memory.recall.min_score: must be >= 0 and <= 1.79769e+308, got -1");
	assert_line(&d, "t.yaml:9: apps.a.working_memory.recall.max_tokens: must be between 1 and 2147483647, got 0");
	assert_line(&d, "t.yaml:10: apps.a.working_memory.recall.mode: vector search needs index.vector.enabled: true");
	assert_prefix(&d, "t.yaml:11: apps.a.working_memory.recall.colour: unknown key");
	config_diag_clear(&d);
	cr_assert_eq(load("apps: {a: {working_memory: {strategy: all, recall: 5}}}\n", &s, &d),
		     MEMD_EINVAL);
	assert_prefix(&d, "t.yaml:1: apps.a.working_memory.recall: expected a map");
	config_diag_clear(&d);
}

Test(settings, sessions_store_choice)
{
	settings s;
	config_diag d = {0};
	cr_assert_eq(load("stores: {only: {plugin: memory}}\n", &s, &d), 0);
	cr_assert_str_eq(s.sessions_store, "only");
	settings_clear(&s);

	cr_assert_eq(load("stores: {x: {plugin: memory}, main: {plugin: sqlite}}\n", &s, &d), 0);
	cr_assert_str_eq(s.sessions_store, "main");
	settings_clear(&s);

	cr_assert_eq(load("stores:\n  x: {plugin: memory}\n  y: {plugin: sqlite}\n", &s, &d),
		     MEMD_EINVAL);
	assert_line(&d, "t.yaml:2: sessions.store: required: there are 2 stores and none is named \"main\"");
	cr_assert_eq(d.n, 1);
	config_diag_clear(&d);

	cr_assert_eq(load("stores: {}\n", &s, &d), MEMD_EINVAL);
	assert_line(&d, "t.yaml:1: stores: no store is defined");
	cr_assert_eq(d.n, 1);
	config_diag_clear(&d);
}

Test(settings, explicit_default_app_is_used)
{
	settings s;
	config_diag d = {0};
	cr_assert_eq(load("apps:\n  \"*\": {working_memory: {strategy: all}}\n", &s, &d), 0);
	cr_assert_eq(s.n_apps, 1);
	cr_assert_str_eq(settings_app_for(&s, "x")->strategy, "all");
	cr_assert_str_eq(config_node_file(settings_app_for(&s, "x")->node), "t.yaml");
	settings_clear(&s);
}

Test(settings, top_level_must_be_a_map)
{
	settings s;
	config_diag d = {0};
	cr_assert_eq(load("- a\n- b\n", &s, &d), MEMD_EINVAL);
	assert_prefix(&d, "t.yaml:1: expected a map of sections");
	cr_assert_eq(d.n, 1);
	config_diag_clear(&d);
}

Test(settings, json_config_loads)
{
	settings s;
	config_diag d = {0};
	int32_t rc = load("{\"server\": {\"listen\": \"127.0.0.1:9\", \"threads\": 2},\n"
			  " \"stores\": {\"main\": {\"plugin\": \"memory\"}},\n"
			  " \"apps\": {\"*\": {\"working_memory\": {\"strategy\": \"all\"}}},\n"
			  " \"index\": {\"keyword\": {\"enabled\": \"yes\"}}}\n",
			  &s, &d);
	cr_assert_eq(rc, 0);
	cr_assert_eq(s.threads, 2);
	cr_assert_str_eq(s.stores[0].plugin, "memory");
	settings_clear(&s);

	rc = load("{\"server\": {\"threads\": \"x\"},\n \"bogus\": 1}\n", &s, &d);
	cr_assert_eq(rc, MEMD_EINVAL);
	assert_line(&d, "t.yaml:1: server.threads: expected an integer, got \"x\"");
	assert_prefix(&d, "t.yaml:2: bogus: unknown key");
	config_diag_clear(&d);
}

Test(settings, every_example_in_config_dir_loads)
{
	const char *root = getenv("MEMD_SOURCE_ROOT");
	cr_assert_not_null(root, "MEMD_SOURCE_ROOT is not set");
	char dir[4096];
	snprintf(dir, sizeof(dir), "%s/config", root);
	DIR *dh = opendir(dir);
	cr_assert_not_null(dh, "cannot open %s", dir);
	size_t checked = 0;
	struct dirent *e;
	unsetenv("MEMD_KEY");
	unsetenv("MEMD_ADMIN_KEY");
	while ((e = readdir(dh))) {
		size_t len = strlen(e->d_name);
		int yaml = len > 5 && strcmp(e->d_name + len - 5, ".yaml") == 0;
		int json = len > 5 && strcmp(e->d_name + len - 5, ".json") == 0;
		if (!yaml && !json)
			continue;
		char path[8192];
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		config_node *tree = NULL;
		memd_error err = {0};
		cr_assert_eq(config_parse_file(path, &tree, &err), 0, "%s", err.msg);
		settings s;
		config_diag d = {0};
		int32_t rc = settings_load(tree, &s, &d);
		char *all = diag_text(&d);
		cr_assert_eq(rc, 0, "%s:\n%s", path, all);
		cr_assert_eq(d.n, 0, "%s:\n%s", path, all);
		free(all);
		cr_assert_gt(s.n_stores, 0);
		cr_assert_not_null(settings_app_for(&s, "any"));
		/* The hash embedder's vectors only break keyword's ties: no
		 * example makes hybrid the default with them. */
		if (s.vector_enabled) {
			const config_node *t = s.embedder ? config_map_get(s.embedder, "type") : NULL;
			cr_assert(!(strcmp(s.search_mode_default, "hybrid") == 0 &&
				    (!t || strcmp(config_scalar(t), "hash") == 0)),
				  "%s: default_mode hybrid with the hash embedder", path);
		}
		/* A key in an example is a key anyone can read. */
		cr_assert_eq(s.n_api_keys, 0, "%s ships a usable API key", path);
		settings_clear(&s);
		checked++;
	}
	closedir(dh);
	cr_assert_geq(checked, 3, "expected memd.yaml, sqlite.yaml and memory.yaml in %s", dir);
}

Test(settings, memd_yaml_example_values)
{
	const char *root = getenv("MEMD_SOURCE_ROOT");
	cr_assert_not_null(root);
	char path[4096];
	snprintf(path, sizeof(path), "%s/config/memd.yaml", root);
	config_node *tree = NULL;
	memd_error err = {0};
	cr_assert_eq(config_parse_file(path, &tree, &err), 0, "%s", err.msg);
	settings s;
	config_diag d = {0};
	cr_assert_eq(settings_load(tree, &s, &d), 0);
	cr_assert_eq(s.n_api_keys, 0, "the keys are commented examples");
	cr_assert_str_eq(settings_app_for(&s, "assistant")->strategy, "all");
	cr_assert_str_eq(settings_app_for(&s, "other")->strategy, "buffer_window");
	cr_assert_str_eq(s.stores[0].plugin, "sqlite");
	cr_assert_not_null(s.summarizer);
	cr_assert_not_null(s.tokenizer);
	cr_assert_not_null(s.embedder);
	settings_clear(&s);
}

/* ---- lanes ------------------------------------------------------------- */

Test(settings, lanes_defaults)
{
	settings s;
	config_diag d = {0};
	cr_assert_eq(settings_load(NULL, &s, &d), 0);
	cr_assert_eq(s.lanes_watch_interval_s, 300);
	cr_assert_eq(s.sessions_retention_days, 0);
	const settings_lanes *l = &settings_app_for(&s, "any")->lanes;
	cr_assert_eq(l->lease_ms, 60000);
	cr_assert_eq(l->max_lease_ms, 3600000);
	cr_assert_eq(l->group_sessions_per_user, 1);
	cr_assert_eq(l->thread_sessions_per_user, 0);
	cr_assert_eq(l->prune_after_days, 0);
	cr_assert_eq(l->reset.mode, SETTINGS_LANE_RESET_BOTH);
	cr_assert_eq(l->reset.idle_minutes, 1440);
	cr_assert_eq(l->reset.at_hour, 4);
	cr_assert_str_eq(l->reset.timezone, "");
	cr_assert_null(l->reset.timezone_node);
	cr_assert_eq(l->reset.notify, 1);
	cr_assert_str_eq(l->reset.idle_notice, SETTINGS_LANES_IDLE_NOTICE_DEFAULT);
	cr_assert_str_eq(l->reset.daily_notice, SETTINGS_LANES_DAILY_NOTICE_DEFAULT);
	cr_assert_str_eq(l->reset.suspended_notice, SETTINGS_LANES_SUSPENDED_NOTICE_DEFAULT);
	cr_assert_eq(l->n_overrides, 0);
	cr_assert_str_eq(l->webhook_url, "");
	cr_assert_eq(l->webhook_timeout_ms, 5000);
	cr_assert_eq(l->webhook_retries, 3);
	cr_assert_eq(settings_lane_reset_for(l, "telegram", "dm"), &l->reset);
	settings_clear(&s);
}

/* An app's lanes keys go over the top-level ones; its overrides come
 * first, then the top-level ones, resolved over the app's reset. */
Test(settings, lanes_per_app_and_overrides)
{
	settings s;
	config_diag d = {0};
	int32_t rc = load("lanes:\n"
			  "  watch_interval_s: 60\n"
			  "  lease_ms: 1000\n"
			  "  reset: {mode: daily, at_hour: 3, timezone: Europe/Berlin, notify: false}\n"
			  "  overrides:\n"
			  "    - {platform: Telegram, chat_type: dm, reset: {mode: idle, idle_minutes: 60}}\n"
			  "    - {chat_type: thread, reset: {mode: none}}\n"
			  "  finalize: {webhook: {url: 'https://hooks.example/x', secret: s3, retries: 0}}\n"
			  "sessions: {retention_days: 30}\n"
			  "apps:\n"
			  "  bot:\n"
			  "    working_memory: {strategy: all}\n"
			  "    lanes:\n"
			  "      max_lease_ms: 5000\n"
			  "      reset: {at_hour: 6, idle_notice: 'gone'}\n"
			  "      overrides: [{platform: slack, reset: {mode: both}}]\n",
			  &s, &d);
	char *all = diag_text(&d);
	cr_assert_eq(rc, 0, "%s", all);
	free(all);
	cr_assert_eq(s.lanes_watch_interval_s, 60);
	cr_assert_eq(s.sessions_retention_days, 30);

	const settings_lanes *top = &settings_app_for(&s, "other")->lanes;
	cr_assert_eq(top->lease_ms, 1000);
	cr_assert_eq(top->max_lease_ms, 3600000);
	cr_assert_eq(top->reset.mode, SETTINGS_LANE_RESET_DAILY);
	cr_assert_eq(top->reset.at_hour, 3);
	cr_assert_str_eq(top->reset.timezone, "Europe/Berlin");
	cr_assert_eq(config_node_line(top->reset.timezone_node), 4);
	cr_assert_eq(top->reset.notify, 0);
	cr_assert_eq(top->n_overrides, 2);
	const settings_lane_reset *tg = settings_lane_reset_for(top, "TELEGRAM", "dm");
	cr_assert_eq(tg->mode, SETTINGS_LANE_RESET_IDLE);
	cr_assert_eq(tg->idle_minutes, 60);
	cr_assert_eq(tg->at_hour, 3, "an override keeps the keys it does not set");
	cr_assert_eq(settings_lane_reset_for(top, "telegram", "group"), &top->reset);
	cr_assert_eq(settings_lane_reset_for(top, "discord", "thread")->mode,
		     SETTINGS_LANE_RESET_NONE);
	cr_assert_str_eq(top->webhook_url, "https://hooks.example/x");
	cr_assert_str_eq(top->webhook_secret, "s3");
	cr_assert_eq(top->webhook_retries, 0);

	const settings_lanes *bot = &settings_app_for(&s, "bot")->lanes;
	cr_assert_eq(bot->lease_ms, 1000);
	cr_assert_eq(bot->max_lease_ms, 5000);
	cr_assert_eq(bot->reset.mode, SETTINGS_LANE_RESET_DAILY);
	cr_assert_eq(bot->reset.at_hour, 6);
	cr_assert_str_eq(bot->reset.idle_notice, "gone");
	cr_assert_str_eq(bot->webhook_url, "https://hooks.example/x");
	cr_assert_eq(bot->n_overrides, 3);
	cr_assert_eq(settings_lane_reset_for(bot, "slack", "dm")->mode, SETTINGS_LANE_RESET_BOTH);
	tg = settings_lane_reset_for(bot, "telegram", "dm");
	cr_assert_eq(tg->mode, SETTINGS_LANE_RESET_IDLE);
	cr_assert_eq(tg->at_hour, 6, "top-level overrides resolve over the app's reset");
	cr_assert_str_eq(tg->idle_notice, "gone");
	settings_clear(&s);
}

Test(settings, lanes_bad_values_reported_with_location)
{
	settings s;
	config_diag d = {0};
	int32_t rc = load("lanes:\n"                                            /* 1 */
			  "  lease_ms: 9000\n"                                  /* 2 */
			  "  max_lease_ms: 5000\n"                              /* 3 */
			  "  watch_interval_s: 0\n"                             /* 4 */
			  "  reset:\n"                                          /* 5 */
			  "    mode: weekly\n"                                  /* 6 */
			  "    at_hour: 24\n"                                   /* 7 */
			  "    idle_minutes: 0\n"                               /* 8 */
			  "    timezone: ../etc/passwd\n"                       /* 9 */
			  "    idle_notice: ''\n"                               /* 10 */
			  "  overrides:\n"                                      /* 11 */
			  "    - {platform: 'tele gram', chat_type: dms}\n"     /* 12 */
			  "    - {reset: {mode: idle}}\n"                       /* 13 */
			  "  finalize: {webhook: {url: 'ftp://x'}}\n"           /* 14 */
			  "sessions: {retention_days: -1}\n"                    /* 15 */
			  "apps:\n"                                             /* 16 */
			  "  a:\n"                                              /* 17 */
			  "    working_memory: {strategy: all}\n"               /* 18 */
			  "    lanes: {watch_interval_s: 5, reset: {notify: maybe}}\n", /* 19 */
			  &s, &d);
	cr_assert_eq(rc, MEMD_EINVAL);
	assert_line(&d, "t.yaml:2: lanes.lease_ms: lease_ms (9000) must not be over max_lease_ms (5000)");
	assert_line(&d, "t.yaml:4: lanes.watch_interval_s: must be between 1 and 2147483647, got 0");
	assert_line(&d, "t.yaml:6: lanes.reset.mode: expected one of none, idle, daily, both, got \"weekly\"");
	assert_line(&d, "t.yaml:7: lanes.reset.at_hour: must be between 0 and 23, got 24");
	assert_line(&d, "t.yaml:8: lanes.reset.idle_minutes: must be between 1 and 2147483647, got 0");
	assert_prefix(&d, "t.yaml:9: lanes.reset.timezone: expected an IANA time zone name");
	assert_line(&d, "t.yaml:10: lanes.reset.idle_notice: must not be empty");
	assert_prefix(&d, "t.yaml:12: lanes.overrides[0].platform: expected a platform name");
	assert_line(&d, "t.yaml:12: lanes.overrides[0].chat_type: expected one of dm, group, channel, thread, got \"dms\"");
	assert_line(&d, "t.yaml:13: lanes.overrides[1]: needs a platform, a chat_type or both to match");
	assert_line(&d, "t.yaml:14: lanes.finalize.webhook.url: expected an http:// or https:// URL (or \"\" for none), got \"ftp://x\"");
	assert_line(&d, "t.yaml:15: sessions.retention_days: must be between 0 and 2147483647, got -1");
	assert_prefix(&d, "t.yaml:19: apps.a.lanes.watch_interval_s: unknown key (known: lease_ms,");
	assert_line(&d, "t.yaml:19: apps.a.lanes.reset.notify: expected true or false, got \"maybe\"");
	cr_assert_eq(d.n, 14, "each problem once (the top-level overrides are not reported again "
			      "for the app)");
	config_diag_clear(&d);
}

Test(settings, allowed_hosts)
{
	settings s;
	config_diag d = {0};
	int32_t rc = load("server:\n"
			  "  allowed_hosts: [memd.internal, \"[::1]:8700\", \"LOCALHOST:1\"]\n",
			  &s, &d);
	cr_assert_eq(rc, 0);
	cr_assert_str_eq(s.allowed_hosts[0], "memd.internal");
	cr_assert_str_eq(s.allowed_hosts[1], "[::1]:8700");
	cr_assert_str_eq(s.allowed_hosts[2], "LOCALHOST:1");
	cr_assert_null(s.allowed_hosts[3]);
	settings_clear(&s);

	cr_assert_eq(load("server: {listen: 127.0.0.1:1}\n", &s, &d), 0);
	cr_assert_null(s.allowed_hosts, "not configured: the loopback names");
	settings_clear(&s);

	rc = load("server:\n"                                   /* 1 */
		  "  allowed_hosts:\n"                          /* 2 */
		  "    - ok.example\n"                          /* 3 */
		  "    - \"http://x.example\"\n"                /* 4 */
		  "    - \"a b\"\n"                             /* 5 */
		  "    - \"\"\n"                                /* 6 */
		  "    - {name: x}\n",                          /* 7 */
		  &s, &d);
	cr_assert_eq(rc, MEMD_EINVAL);
	assert_line(&d, "t.yaml:4: server.allowed_hosts[1]: expected a host name or address with an optional "
			":port (as in a Host header), got \"http://x.example\"");
	assert_line(&d, "t.yaml:5: server.allowed_hosts[2]: expected a host name or address with an optional "
			":port (as in a Host header), got \"a b\"");
	assert_line(&d, "t.yaml:6: server.allowed_hosts[3]: expected a host name or address with an optional "
			":port (as in a Host header), got \"\"");
	assert_line(&d, "t.yaml:7: server.allowed_hosts[4]: expected a host name, got a map");
	cr_assert_eq(d.n, 4);
	config_diag_clear(&d);

	cr_assert_eq(load("server: {allowed_hosts: []}\n", &s, &d), MEMD_EINVAL);
	assert_line(&d, "t.yaml:1: server.allowed_hosts: must not be empty (leave it out to answer "
			"127.0.0.1, localhost and [::1])");
	config_diag_clear(&d);
	cr_assert_eq(load("server: {allowed_hosts: memd.internal}\n", &s, &d), MEMD_EINVAL);
	assert_line(&d, "t.yaml:1: server.allowed_hosts: expected a sequence of host names, got a scalar");
	config_diag_clear(&d);
}

Test(settings, short_and_published_api_keys_are_refused)
{
	settings s;
	config_diag d = {0};
	char text[1024];
	int32_t rc;

	/* 31 bytes: one short of the minimum. */
	cr_assert_eq(strlen("0123456789abcdef0123456789abcde"), SETTINGS_API_KEY_MIN - 1);
	rc = load("server:\n"                                               /* 1 */
		  "  api_keys:\n"                                           /* 2 */
		  "    - {key: 0123456789abcdef0123456789abcde, scope: read}\n" /* 3 */
		  "    - {key: dev-only-key-change-me, scope: write}\n"      /* 4 */
		  "    - key: dev-only-admin-key-change-me\n"                /* 5 */
		  "      scope: admin\n"                                    /* 6 */
		  "    - {key: " KEY_R "}\n",                                /* 7 */
		  &s, &d);
	cr_assert_eq(rc, MEMD_EINVAL);
	assert_line(&d, "t.yaml:3: server.api_keys[0].key: too short (31 bytes): an API key needs at "
			"least 32 random bytes, e.g. from `openssl rand -hex 32`");
	assert_line(&d, "t.yaml:4: server.api_keys[1].key: this key is published in memd's example "
			"configs: anyone can use it; make your own with `openssl rand -hex 32`");
	assert_line(&d, "t.yaml:5: server.api_keys[2].key: this key is published in memd's example "
			"configs: anyone can use it; make your own with `openssl rand -hex 32`");
	cr_assert_eq(d.n, 3, "a long key is fine");
	config_diag_clear(&d);

	/* Every key an example ever shipped, however long, after ${VAR} too. */
	for (const char *const *k = settings_published_api_keys(); *k; k++) {
		setenv("MEMD_TEST_KEY", *k, 1);
		snprintf(text, sizeof(text), "server: {api_keys: [{key: \"${MEMD_TEST_KEY}\"}]}\n");
		cr_assert_eq(load(text, &s, &d), MEMD_EINVAL, "%s", *k);
		cr_assert(has_prefix(&d, "t.yaml:1: server.api_keys[0].key: this key is published"), "%s", *k);
		config_diag_clear(&d);
	}
	unsetenv("MEMD_TEST_KEY");

	cr_assert_eq(load("server: {api_keys: [{key: 0123456789abcdef0123456789abcdef}]}\n", &s, &d), 0,
		     "32 bytes are enough");
	settings_clear(&s);
}

Test(settings, api_keys_limited_to_apps)
{
	settings s;
	config_diag d = {0};
	int32_t rc = load("server:\n"
			  "  api_keys:\n"
			  "    - {key: " KEY_R ", apps: [support, \"caf\\u00e9\"]}\n"
			  "    - {key: " KEY_A ", scope: admin}\n",
			  &s, &d);
	cr_assert_eq(rc, 0);
	cr_assert_str_eq(s.api_keys[0].apps[0], "support");
	cr_assert_str_eq(s.api_keys[0].apps[1], "caf\xc3\xa9");
	cr_assert_null(s.api_keys[0].apps[2]);
	cr_assert_null(s.api_keys[1].apps, "no list: every app");
	settings_clear(&s);

	rc = load("server:\n"                                   /* 1 */
		  "  api_keys:\n"                               /* 2 */
		  "    - {key: " KEY_R ", apps: []}\n"          /* 3 */
		  "    - {key: " KEY_W ", apps: support}\n"     /* 4 */
		  "    - key: " KEY_A "\n"                      /* 5 */
		  "      apps:\n"                               /* 6 */
		  "        - ok\n"                              /* 7 */
		  "        - \"\"\n"                            /* 8 */
		  "        - {name: x}\n",                      /* 9 */
		  &s, &d);
	cr_assert_eq(rc, MEMD_EINVAL);
	assert_line(&d, "t.yaml:3: server.api_keys[0].apps: expected a non-empty sequence of app names, got an empty one");
	assert_line(&d, "t.yaml:4: server.api_keys[1].apps: expected a non-empty sequence of app names, got a scalar");
	assert_line(&d, "t.yaml:8: server.api_keys[2].apps[1]: expected an app name, got an empty string");
	assert_line(&d, "t.yaml:9: server.api_keys[2].apps[2]: expected an app name, got a map");
	cr_assert_eq(d.n, 4);
	config_diag_clear(&d);
}

/* ---- memory ------------------------------------------------------------ */

Test(settings, memory_extract_defaults_and_app_overrides)
{
	settings s;
	config_diag d = {0};
	cr_assert_eq(settings_load(NULL, &s, &d), 0);
	cr_assert_eq(s.memory_sweep_interval_s, 60);
	const settings_extract *x = &settings_app_for(&s, "any")->extract;
	cr_assert_eq(x->type, SETTINGS_EXTRACT_BUILTIN);
	cr_assert_eq(x->every_events, 20);
	cr_assert_eq(x->idle_minutes, 30);
	cr_assert_eq(x->on_finalize, 1);
	cr_assert_eq(x->batch_events, 50);
	cr_assert_eq(x->neighbours, 5);
	cr_assert_eq(x->default_ttl_days, 0);
	cr_assert_eq(x->timeout_ms, 60000);
	cr_assert_eq(x->retries, 3);
	cr_assert_null(x->url);
	cr_assert_null(x->api_key);
	settings_clear(&s);

	cr_assert_eq(load("memory:\n"
			  "  sweep_interval_s: 0\n"
			  "  extract: {type: openai, url: 'http://127.0.0.1:9/v1', model: m, every_events: 7}\n"
			  "apps:\n"
			  "  a: {working_memory: {strategy: all}, memory: {extract: {type: builtin, idle_minutes: 0}}}\n"
			  "  b: {working_memory: {strategy: all}, memory: {extract: {prompt: P}}}\n",
			  &s, &d),
		     0);
	cr_assert_eq(s.memory_sweep_interval_s, 0);
	x = &settings_app_for(&s, "a")->extract;
	cr_assert_eq(x->type, SETTINGS_EXTRACT_BUILTIN);
	cr_assert_eq(x->every_events, 7, "inherited from memory.extract");
	cr_assert_eq(x->idle_minutes, 0);
	x = &settings_app_for(&s, "b")->extract;
	cr_assert_eq(x->type, SETTINGS_EXTRACT_OPENAI);
	cr_assert_str_eq(x->model, "m");
	cr_assert_str_eq(x->prompt, "P");
	cr_assert_eq(settings_app_for(&s, "other")->extract.type, SETTINGS_EXTRACT_OPENAI);
	settings_clear(&s);
}

Test(settings, memory_extract_errors)
{
	settings s;
	config_diag d = {0};
	cr_assert_eq(load("memory:\n"                                       /* 1 */
			  "  extract:\n"                                    /* 2 */
			  "    type: magic\n"                               /* 3 */
			  "    batch_events: 0\n"                           /* 4 */
			  "    url: 'ftp://x'\n"                            /* 5 */
			  "    bogus: 1\n"                                  /* 6 */
			  "apps:\n"                                         /* 7 */
			  "  a:\n"                                          /* 8 */
			  "    working_memory: {strategy: all}\n"           /* 9 */
			  "    memory: {sweep_interval_s: 5, extract: {type: openai}}\n", /* 10 */
			  &s, &d),
		     MEMD_EINVAL);
	assert_line(&d, "t.yaml:3: memory.extract.type: expected one of builtin, openai, none, got \"magic\"");
	assert_line(&d, "t.yaml:4: memory.extract.batch_events: must be between 1 and 1000, got 0");
	assert_line(&d, "t.yaml:5: memory.extract.url: expected an http:// or https:// URL, got \"ftp://x\"");
	assert_prefix(&d, "t.yaml:6: memory.extract.bogus: unknown key (known: type,");
	assert_line(&d, "t.yaml:10: apps.a.memory.sweep_interval_s: unknown key (known: extract)");
	assert_line(&d, "t.yaml:10: apps.a.memory.extract.model: required when type is openai");
	config_diag_clear(&d);
}

/* ---- checkpoints -------------------------------------------------------- */

Test(settings, checkpoints_defaults_and_app_overrides)
{
	settings s;
	config_diag d = {0};
	cr_assert_eq(settings_load(NULL, &s, &d), 0);
	cr_assert_eq(s.checkpoints_sweep_interval_s, 60);
	const settings_checkpoints *c = &settings_app_for(&s, "any")->checkpoints;
	cr_assert_eq(c->timeout_s, 86400);
	cr_assert_eq(c->auto_resume, 1);
	cr_assert_eq(c->auto_resume_hitl, 0);
	settings_clear(&s);

	cr_assert_eq(load("checkpoints: {timeout_s: 600, auto_resume: false, sweep_interval_s: 0}\n"
			  "apps:\n"
			  "  a: {working_memory: {strategy: all}, checkpoints: {timeout_s: 0}}\n"
			  "  b: {working_memory: {strategy: all}, checkpoints: {auto_resume_hitl: true}}\n",
			  &s, &d),
		     0);
	cr_assert_eq(s.checkpoints_sweep_interval_s, 0);
	c = &settings_app_for(&s, "a")->checkpoints;
	cr_assert_eq(c->timeout_s, 0);
	cr_assert_eq(c->auto_resume, 0, "inherited from checkpoints:");
	c = &settings_app_for(&s, "b")->checkpoints;
	cr_assert_eq(c->timeout_s, 600);
	cr_assert_eq(c->auto_resume_hitl, 1);
	c = &settings_app_for(&s, "other")->checkpoints;
	cr_assert_eq(c->timeout_s, 600);
	cr_assert_eq(c->auto_resume_hitl, 0);
	settings_clear(&s);
}

Test(settings, checkpoints_errors)
{
	settings s;
	config_diag d = {0};
	cr_assert_eq(load("checkpoints:\n"                                  /* 1 */
			  "  timeout_s: -1\n"                              /* 2 */
			  "  auto_resume: maybe\n"                         /* 3 */
			  "  sweep_interval_s: x\n"                        /* 4 */
			  "  ttl: 5\n"                                     /* 5 */
			  "apps:\n"                                         /* 6 */
			  "  a:\n"                                          /* 7 */
			  "    working_memory: {strategy: all}\n"           /* 8 */
			  "    checkpoints: {sweep_interval_s: 5, auto_resume_hitl: 2}\n", /* 9 */
			  &s, &d),
		     MEMD_EINVAL);
	assert_line(&d, "t.yaml:2: checkpoints.timeout_s: must be between 0 and 2147483647, got -1");
	assert_prefix(&d, "t.yaml:3: checkpoints.auto_resume: expected true or false");
	assert_prefix(&d, "t.yaml:4: checkpoints.sweep_interval_s: expected an integer");
	assert_prefix(&d, "t.yaml:5: checkpoints.ttl: unknown key (known: timeout_s,");
	assert_prefix(&d, "t.yaml:9: apps.a.checkpoints.sweep_interval_s: unknown key (known: timeout_s,");
	assert_prefix(&d, "t.yaml:9: apps.a.checkpoints.auto_resume_hitl: expected true or false");
	config_diag_clear(&d);
}

Test(settings, api_keys_bound_to_a_user_and_mcp)
{
	settings s;
	config_diag d = {0};
	int32_t rc = load("server:\n"
			  "  api_keys:\n"
			  "    - {key: " KEY_R ", apps: [support], user: alice}\n"
			  "    - {key: " KEY_A ", scope: admin}\n",
			  &s, &d);
	cr_assert_eq(rc, 0);
	cr_assert_str_eq(s.api_keys[0].user, "alice");
	cr_assert_null(s.api_keys[1].user, "no user: not bound");
	cr_assert_eq(s.mcp_enabled, 1, "/mcp is on by default");
	settings_clear(&s);

	rc = load("server:\n"                                              /* 1 */
		  "  api_keys:\n"                                          /* 2 */
		  "    - {key: " KEY_R ", user: alice}\n"                  /* 3 */
		  "    - {key: " KEY_W ", apps: [a, b], user: alice}\n"    /* 4 */
		  "    - {key: " KEY_A ", apps: [a], user: \"x/y\"}\n"     /* 5 */
		  "  mcp: {enabled: maybe, sessions: 3}\n",                /* 6 */
		  &s, &d);
	cr_assert_eq(rc, MEMD_EINVAL);
	assert_line(&d, "t.yaml:3: server.api_keys[0].user: a key bound to a user needs apps with exactly one app (the user's)");
	assert_line(&d, "t.yaml:4: server.api_keys[1].user: a key bound to a user needs apps with exactly one app (the user's)");
	assert_prefix(&d, "t.yaml:5: server.api_keys[2].user: expected a user id");
	assert_prefix(&d, "t.yaml:6: server.mcp.enabled: ");
	assert_prefix(&d, "t.yaml:6: server.mcp.sessions: unknown key (known: enabled)");
	cr_assert_eq(d.n, 5);
	config_diag_clear(&d);

	cr_assert_eq(load("server: {mcp: {enabled: false}}\n", &s, &d), 0);
	cr_assert_eq(s.mcp_enabled, 0);
	settings_clear(&s);
}
