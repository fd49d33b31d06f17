/* SPDX-License-Identifier: MIT */
/*
 * The loader against tests/fixtures/ (api/README.md, Entry point and
 * descriptor): every broken plugin is refused with its own message, in
 * process and in the isolated check; a crashing or hanging init only takes
 * the check's child down; files that are not plugins are refused; names
 * resolve through the search path; a good plugin's tables are copied and
 * zero-extended; the memd_host config accessors return values, defaults and
 * type errors as host.h says.
 */
#include <criterion/criterion.h>

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "config/config.h"
#include "plugins/hostsvc.h"
#include "plugins/loader.h"
#include "plugins/store.h"
#include "plugins/strategy.h"
#include "util/prom.h"

#define FIXTURE_SUBDIR "/tests/fixtures"
#define PATH_BUF 4096
#define LOG_MAX_LINES 64
#define LINE_BUF 1024
#define SHORT_TIMEOUT_MS 300
#define US_PER_S 1000000
#define CLOCK_SLACK_S 60

static char fixture_dir[PATH_BUF];

/* snprintf that fails the test instead of truncating. */
__attribute__((format(printf, 3, 4)))
static void fmt(char *buf, size_t size, const char *f, ...)
{
	va_list ap;
	va_start(ap, f);
	int n = vsnprintf(buf, size, f, ap);
	va_end(ap);
	cr_assert(n >= 0 && (size_t)n < size, "text does not fit in %zu bytes", size);
}

static void setup(void)
{
	const char *root = getenv("MEMD_BUILD_ROOT");
	cr_assert(root, "MEMD_BUILD_ROOT is not set (run through meson test)");
	fmt(fixture_dir, sizeof(fixture_dir), "%s" FIXTURE_SUBDIR, root);
}

TestSuite(loader, .init = setup);

static const char *fixture(const char *name)
{
	static char path[PATH_BUF];
	fmt(path, sizeof(path), "%s/memd-%s.so", fixture_dir, name);
	return path;
}

/* A fresh scratch directory under /tmp; caller removes it. */
static char *scratch_dir(void)
{
	char *dir = strdup("/tmp/memd-loader-test-XXXXXX");
	cr_assert(dir && mkdtemp(dir));
	return dir;
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	cr_assert(f, "cannot write %s", path);
	fputs(text, f);
	fclose(f);
}

/* Open path and expect a refusal with exactly code and message. */
static void expect_refused(const char *path, int32_t code, const char *message)
{
	memd_error err = {.struct_size = sizeof(err)};
	loader_plugin *p = NULL;
	int32_t rc = loader_open(path, NULL, &p, &err);
	cr_assert_eq(rc, code, "%s: expected %d, got %d (%s)", path, code, rc, err.msg);
	cr_assert_null(p);
	cr_assert_eq(err.code, code);
	cr_assert_str_eq(err.msg, message);
}

/* The same refusal must come out of the isolated check. */
static void expect_refused_isolated(const char *path, int32_t code, const char *message)
{
	memd_error err = {.struct_size = sizeof(err)};
	char *report = NULL;
	int32_t rc = loader_check_isolated(path, NULL, &report, &err);
	cr_assert_eq(rc, code, "%s: expected %d, got %d (%s)", path, code, rc, err.msg);
	cr_assert_null(report);
	cr_assert_str_eq(err.msg, message);
}

static void expect_both(const char *name, const char *message)
{
	expect_refused(fixture(name), MEMD_EABI, message);
	expect_refused_isolated(fixture(name), MEMD_EABI, message);
}

/* ---- each broken fixture, its own message ---------------------------- */

Test(loader, wrong_major)
{
	char msg[MEMD_ERROR_MSG_MAX];
	fmt(msg, sizeof(msg), "memd-wrong_major.so: built for ABI %d.x, host is %d.%d",
		 MEMD_ABI_MAJOR + 1, MEMD_ABI_MAJOR, MEMD_ABI_MINOR);
	expect_both("wrong_major", msg);
}

Test(loader, newer_minor)
{
	char msg[MEMD_ERROR_MSG_MAX];
	fmt(msg, sizeof(msg), "memd-newer_minor.so: needs ABI %d.%d, host is %d.%d",
		 MEMD_ABI_MAJOR, MEMD_ABI_MINOR + 3, MEMD_ABI_MAJOR, MEMD_ABI_MINOR);
	expect_both("newer_minor", msg);
}

Test(loader, no_entry)
{
	expect_both("no_entry", "memd-no_entry.so: no memd_plugin_entry_v1 (not a memd plugin?)");
}

Test(loader, truncated)
{
	char msg[MEMD_ERROR_MSG_MAX];
	fmt(msg, sizeof(msg),
		 "memd-truncated.so: truncated descriptor (struct_size %zu, need at least %zu)",
		 offsetof(memd_plugin, store), offsetof(memd_plugin, embedder) + sizeof(void *));
	expect_both("truncated", msg);
}

Test(loader, missing_op)
{
	expect_both("missing_op", "memd-missing_op.so: store op 'append' is missing");
}

Test(loader, bad_name)
{
	expect_both("bad_name",
		    "memd-bad_name.so: plugin name is missing or not [a-z0-9_]+ (at most 64 chars)");
}

Test(loader, kind_without_ops_table)
{
	expect_both("kind_no_ops",
		    "memd-kind_no_ops.so: declares kind store but has no store ops table");
}

Test(loader, default_of_wrong_type)
{
	expect_both("bad_default",
		    "memd-bad_default.so: config key 'turns': default \"three\" is not a valid int");
}

Test(loader, default_outside_its_choices)
{
	expect_both("bad_choices",
		    "memd-bad_choices.so: config key 'mode': default \"quick\" is not one of its "
		    "choices");
}

Test(loader, wrong_kind_for_slot)
{
	memd_error err = {.struct_size = sizeof(err)};
	loader_plugin *p = NULL;
	cr_assert_eq(loader_open(fixture("wrong_kind"), NULL, &p, &err), 0, "%s", err.msg);
	cr_assert_eq(loader_require_kind(p, MEMD_KIND_STRATEGY, "apps.*.working_memory", &err), 0);
	cr_assert_eq(loader_require_kind(p, MEMD_KIND_STORE, "stores.main", &err), MEMD_EABI);
	cr_assert_str_eq(err.msg,
			 "memd-wrong_kind.so: is a strategy plugin, but stores.main needs a "
			 "session store");
	cr_assert_eq(loader_require_kind(p, MEMD_KIND_EMBEDDER, "index.vector.embedder", &err),
		     MEMD_EABI);
	cr_assert_str_eq(err.msg,
			 "memd-wrong_kind.so: is a strategy plugin, but index.vector.embedder "
			 "needs an embedder");
	loader_close(p);
}

/* ---- the isolated check survives crashes and hangs ------------------- */

Test(loader, crash_in_init_is_reported_and_survived)
{
	/* The descriptor itself is valid: in process, opening succeeds (and
	 * init must never be run here). */
	memd_error err = {.struct_size = sizeof(err)};
	loader_plugin *p = NULL;
	cr_assert_eq(loader_open(fixture("crash_init"), NULL, &p, &err), 0, "%s", err.msg);
	loader_close(p);

	expect_refused_isolated(fixture("crash_init"), MEMD_EABI,
				"memd-crash_init.so: crashed in init (SIGSEGV)");
	/* Still here, and able to check another plugin. */
	char *report = NULL;
	cr_assert_eq(loader_check_isolated(fixture("good"), NULL, &report, &err), 0, "%s",
		     err.msg);
	free(report);
}

Test(loader, hang_in_init_is_killed_at_the_timeout)
{
	memd_error err = {.struct_size = sizeof(err)};
	char *report = NULL;
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	int32_t rc = loader_check_isolated_timeout(fixture("hang_init"), NULL, SHORT_TIMEOUT_MS,
						   &report, &err);
	clock_gettime(CLOCK_MONOTONIC, &b);
	cr_assert_eq(rc, MEMD_ETIMEDOUT, "%d: %s", rc, err.msg);
	cr_assert_null(report);
	cr_assert_str_eq(err.msg, "memd-hang_init.so: hung in init: no answer within 300 ms "
				  "(killed)");
	double took = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
	cr_assert_lt(took, 5.0, "the check took %.1f s", took);
}

Test(loader, isolated_check_reports_the_plugin)
{
	memd_error err = {.struct_size = sizeof(err)};
	char *report = NULL;
	char *tmp = scratch_dir();
	/* The child's scratch directory is made under TMPDIR and removed. */
	setenv("TMPDIR", tmp, 1);
	int32_t rc = loader_check_isolated(fixture("good"), NULL, &report, &err);
	unsetenv("TMPDIR");
	cr_assert_eq(rc, 0, "%s", err.msg);
	cr_assert_not_null(strstr(report, "memd-good.so: ok\n"), "%s", report);
	cr_assert_not_null(strstr(report, "  name:        good\n"), "%s", report);
	cr_assert_not_null(strstr(report, "  version:     1.2.3\n"), "%s", report);
	cr_assert_not_null(strstr(report, "  kinds:       strategy\n"), "%s", report);
	cr_assert_not_null(strstr(report, "  threads:     thread-safe\n"), "%s", report);
	cr_assert_not_null(strstr(report, "  strategy ops: context\n"), "%s", report);
	cr_assert_not_null(strstr(report, "    count: int, default 3 - an int with a default\n"),
			   "%s", report);
	cr_assert_not_null(strstr(report, "    token: string, secret - a secret, no default\n"),
			   "%s", report);
	cr_assert_not_null(strstr(report, "  init:        ok"), "%s", report);
	free(report);
	cr_assert_eq(rmdir(tmp), 0, "the check left files in its scratch directory");
	free(tmp);
}

Test(loader, isolated_check_resolves_names_and_misses)
{
	memd_error err = {.struct_size = sizeof(err)};
	char *report = NULL;
	const char *search[] = {fixture_dir, NULL};
	cr_assert_eq(loader_check_isolated("sizes", search, &report, &err), 0, "%s", err.msg);
	cr_assert_not_null(strstr(report, "memd-sizes.so: ok\n"), "%s", report);
	cr_assert_not_null(strstr(report, "  store ops: session_create"), "%s", report);
	cr_assert_null(strstr(report, " ping"), "ping lies beyond struct_size: %s", report);
	free(report);
	report = NULL;
	cr_assert_eq(loader_check_isolated("nosuch", search, &report, &err), MEMD_ENOTFOUND);
	cr_assert_null(report);
}

/* ---- files that are not plugins ------------------------------------- */

Test(loader, directories_devices_and_other_files_are_refused)
{
	char *dir = scratch_dir();
	char path[PATH_BUF], msg[MEMD_ERROR_MSG_MAX];

	fmt(msg, sizeof(msg), "%s: %s is a directory, not a regular file",
		 strrchr(dir, '/') + 1, dir);
	expect_refused(dir, MEMD_EABI, msg);
	expect_refused("/dev/null", MEMD_EABI,
		       "null: /dev/null is a character device, not a regular file");

	/* A directory and a symlink to one where a plugin is looked up. */
	fmt(path, sizeof(path), "%s/memd-adir.so", dir);
	cr_assert_eq(mkdir(path, 0700), 0);
	char link[PATH_BUF];
	fmt(link, sizeof(link), "%s/memd-alink.so", dir);
	cr_assert_eq(symlink(path, link), 0);
	const char *search[] = {dir, NULL};
	memd_error err = {.struct_size = sizeof(err)};
	loader_plugin *p = NULL;
	cr_assert_eq(loader_open("adir", search, &p, &err), MEMD_EABI);
	fmt(msg, sizeof(msg), "memd-adir.so: %s is a directory, not a regular file", path);
	cr_assert_str_eq(err.msg, msg);
	cr_assert_eq(loader_open("alink", search, &p, &err), MEMD_EABI);
	fmt(msg, sizeof(msg), "memd-alink.so: %s is a directory, not a regular file", link);
	cr_assert_str_eq(err.msg, msg);
	cr_assert_null(p);

	/* A regular file that is not a shared object: dlopen's own words. */
	char text[PATH_BUF];
	fmt(text, sizeof(text), "%s/notes.txt", dir);
	write_file(text, "not a plugin, just some notes\n");
	cr_assert_eq(loader_open(text, NULL, &p, &err), MEMD_EABI);
	cr_assert_eq(strncmp(err.msg, "notes.txt: cannot load: ", strlen("notes.txt: cannot load: ")),
		     0, "%s", err.msg);
	cr_assert_not_null(strstr(err.msg, "notes.txt"));
	/* Same with a .so name. */
	char fake[PATH_BUF];
	fmt(fake, sizeof(fake), "%s/memd-fake.so", dir);
	write_file(fake, "\x7f" "ELF but not really\n");
	cr_assert_eq(loader_open("fake", search, &p, &err), MEMD_EABI);
	cr_assert_eq(strncmp(err.msg, "memd-fake.so: cannot load: ",
			     strlen("memd-fake.so: cannot load: ")), 0, "%s", err.msg);

	unlink(fake);
	unlink(text);
	unlink(link);
	rmdir(path);
	rmdir(dir);
	free(dir);
}

Test(loader, names_and_missing_files)
{
	memd_error err = {.struct_size = sizeof(err)};
	loader_plugin *p = NULL;
	char *dir = scratch_dir();
	char msg[MEMD_ERROR_MSG_MAX];
	const char *search[] = {dir, NULL};

	cr_assert_eq(loader_open("nosuch", search, &p, &err), MEMD_ENOTFOUND);
	fmt(msg, sizeof(msg), "memd-nosuch.so: not found in %s", dir);
	cr_assert_str_eq(err.msg, msg);
	cr_assert_eq(loader_open("nosuch", NULL, &p, &err), MEMD_ENOTFOUND);
	cr_assert_not_null(strstr(err.msg, "no plugin directories"), "%s", err.msg);
	cr_assert_eq(loader_open("Bad Name", search, &p, &err), MEMD_EINVAL);
	cr_assert_not_null(strstr(err.msg, "'Bad Name'"), "%s", err.msg);
	cr_assert_eq(loader_open("", search, &p, &err), MEMD_EINVAL);
	char missing[PATH_BUF];
	fmt(missing, sizeof(missing), "%s/memd-gone.so", dir);
	cr_assert_eq(loader_open(missing, NULL, &p, &err), MEMD_ENOTFOUND);
	cr_assert_eq(strncmp(err.msg, "memd-gone.so: no such file", 26), 0, "%s", err.msg);
	cr_assert_null(p);
	rmdir(dir);
	free(dir);
}

/* ---- resolution through the search path ----------------------------- */

static int copy_file(const char *from, const char *to)
{
	FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
	char buf[LINE_BUF];
	size_t n;
	if (!in || !out)
		return -1;
	while ((n = fread(buf, 1, sizeof(buf), in)) > 0)
		fwrite(buf, 1, n, out);
	fclose(in);
	return fclose(out);
}

Test(loader, names_resolve_through_the_search_path_in_order)
{
	memd_error err = {.struct_size = sizeof(err)};
	loader_plugin *p = NULL;
	char *empty = scratch_dir(), *first = scratch_dir();
	char expect[PATH_BUF];

	/* Skips directories without the file, and empty entries. */
	const char *search[] = {"", empty, fixture_dir, NULL};
	cr_assert_eq(loader_open("good", search, &p, &err), 0, "%s", err.msg);
	fmt(expect, sizeof(expect), "%s/memd-good.so", fixture_dir);
	cr_assert_str_eq(loader_path(p), expect);
	cr_assert_str_eq(loader_descriptor(p)->name, "good");
	loader_close(p);

	/* The first directory that has the file wins. */
	char shadow[PATH_BUF];
	fmt(shadow, sizeof(shadow), "%s/memd-good.so", first);
	cr_assert_eq(copy_file(fixture("wrong_kind"), shadow), 0);
	const char *ordered[] = {first, fixture_dir, NULL};
	cr_assert_eq(loader_open("good", ordered, &p, &err), 0, "%s", err.msg);
	cr_assert_str_eq(loader_path(p), shadow);
	cr_assert_str_eq(loader_descriptor(p)->name, "wrong_kind");
	loader_close(p);

	/* A value ending in .so is a path, relative to the working dir. */
	char cwd[PATH_BUF];
	cr_assert(getcwd(cwd, sizeof(cwd)));
	cr_assert_eq(chdir(fixture_dir), 0);
	cr_assert_eq(loader_open("memd-good.so", ordered, &p, &err), 0, "%s", err.msg);
	cr_assert_str_eq(loader_path(p), "./memd-good.so");
	cr_assert_str_eq(loader_descriptor(p)->name, "good");
	loader_close(p);
	cr_assert_eq(chdir(cwd), 0);

	unlink(shadow);
	rmdir(first);
	rmdir(empty);
	free(first);
	free(empty);
}

Test(loader, real_plugins_load_from_memd_plugin_path)
{
	const char *env = getenv("MEMD_PLUGIN_PATH");
	cr_assert(env && *env, "MEMD_PLUGIN_PATH is not set (run through meson test)");
	const char *search[] = {env, NULL};
	memd_error err = {.struct_size = sizeof(err)};
	loader_plugin *p = NULL;
	cr_assert_eq(loader_open("all", search, &p, &err), 0, "%s", err.msg);
	cr_assert_str_eq(loader_descriptor(p)->name, "all");
	cr_assert_eq(loader_require_kind(p, MEMD_KIND_STRATEGY, "apps.*.working_memory", &err), 0);
	cr_assert_not_null(loader_strategy_ops(p)->context);
	loader_close(p);
}

/* ---- the host-sized copies ------------------------------------------ */

Test(loader, good_plugin_tables_are_copied)
{
	memd_error err = {.struct_size = sizeof(err)};
	loader_plugin *p = NULL;
	cr_assert_eq(loader_open(fixture("good"), NULL, &p, &err), 0, "%s", err.msg);
	const memd_plugin *d = loader_descriptor(p);
	cr_assert_eq(d->struct_size, sizeof(memd_plugin));
	cr_assert_eq(loader_descriptor_size(p), sizeof(memd_plugin));
	cr_assert_eq(d->abi_major, MEMD_ABI_MAJOR);
	cr_assert_eq(d->kind, MEMD_KIND_STRATEGY);
	cr_assert_eq(d->flags, MEMD_PLUGIN_THREADSAFE);
	cr_assert_str_eq(d->version, "1.2.3");
	cr_assert_null(loader_store_ops(p));
	cr_assert_null(loader_vector_ops(p));
	cr_assert_null(loader_embedder_ops(p));
	const memd_strategy_ops *s = loader_strategy_ops(p);
	cr_assert_eq(d->strategy, s);
	cr_assert_eq(s->struct_size, sizeof(memd_strategy_ops));
	cr_assert_not_null(s->context);
	cr_assert_null(s->after_append);
	size_t n = 0;
	while (d->config_keys[n])
		n++;
	cr_assert_eq(n, 8);
	cr_assert_str_eq(d->config_keys[0]->name, "count");
	cr_assert_eq(d->config_keys[0]->struct_size, sizeof(memd_config_key));
	cr_assert_str_eq(d->config_keys[6]->name, "token");
	cr_assert_eq(d->config_keys[6]->flags, MEMD_CONFIG_SECRET);
	cr_assert_null(d->config_keys[6]->default_value);
	loader_close(p);
}

Test(loader, tables_are_zero_extended_and_never_overread)
{
	memd_error err = {.struct_size = sizeof(err)};
	loader_plugin *p = NULL;
	cr_assert_eq(loader_open(fixture("sizes"), NULL, &p, &err), 0, "%s", err.msg);
	const memd_plugin *d = loader_descriptor(p);
	/* A larger descriptor is accepted; only the host's part is copied. */
	cr_assert_gt(loader_descriptor_size(p), sizeof(memd_plugin));
	cr_assert_eq(d->struct_size, sizeof(memd_plugin));
	cr_assert_str_eq(d->version, "");
	cr_assert_str_eq(d->description, "");
	cr_assert_null(d->config_keys[0]);
	/* The store table stopped before ping: the copy's ping is NULL even
	 * though the plugin's memory there holds a pointer. */
	const memd_store_ops *s = loader_store_ops(p);
	cr_assert_eq(s->struct_size, sizeof(memd_store_ops));
	cr_assert_not_null(s->append);
	cr_assert_not_null(s->cursor_set);
	cr_assert_null(s->feed_head);
	cr_assert_null(s->artifact_put);
	cr_assert_null(s->ping);
	cr_assert_eq(loader_require_kind(p, MEMD_KIND_STORE, "stores.main", &err), 0);
	cr_assert_eq(loader_require_kind(p, MEMD_KIND_VECTOR, "index.vector.store", &err), MEMD_EABI);
	cr_assert_str_eq(err.msg, "memd-sizes.so: is a session store plugin, but "
				  "index.vector.store needs a vector store");
	loader_close(p);
}

/* A strategy built for 1.1 loads; its table ended before
 * on_session_finalize, so the host's copy has none (though the plugin's
 * memory there holds a pointer) and the host's finalize answers ENOTSUP
 * without calling anything. */
Test(loader, strategy_of_an_older_minor_has_no_finalize)
{
	memd_error err = {.struct_size = sizeof(err)};
	loader_plugin *p = NULL;
	loader_instance *inst = NULL;
	strategy *st = NULL;
	cr_assert_eq(loader_open(fixture("old_strategy"), NULL, &p, &err), 0, "%s", err.msg);
	const memd_strategy_ops *ops = loader_strategy_ops(p);
	cr_assert_eq(ops->struct_size, sizeof(memd_strategy_ops));
	cr_assert_not_null(ops->context);
	cr_assert_null(ops->on_session_finalize);
	cr_assert_eq(loader_instance_create(p, "apps.*.working_memory", NULL, "strategy", NULL,
					    &inst, &err), 0, "%s", err.msg);
	cr_assert_eq(strategy_new(inst, &st, &err), 0, "%s", err.msg);
	cr_assert_not(strategy_has_on_session_finalize(st));
	memd_scope sc = {.struct_size = sizeof(sc), .app = "a", .user = "u", .session = "s"};
	memd_call call = {.struct_size = sizeof(call)};
	memd_event_sink persist = {.struct_size = sizeof(persist)};
	cr_assert_eq(strategy_on_session_finalize(st, NULL, &call, &sc, &persist, &err), MEMD_ENOTSUP);
	cr_assert_not_null(strstr(err.msg, "has no on_session_finalize"), "%s", err.msg);
	strategy_free(st);
	loader_close(p);
}

/* ---- a store of an older minor behind the host's wrappers ------------ */

static int32_t keep_session(void *ud, const memd_session *s)
{
	memcpy(ud, s, sizeof(*s));
	return 0;
}

static int32_t keep_event(void *ud, const memd_event *e)
{
	memcpy(ud, e, sizeof(*e));
	return 0;
}

/* A 1.1 store under a 1.2 host: its short session records reach the
 * host's sinks zero-extended (the 1.2 members NULL/0, not the bytes
 * after its record), the lane ops it lacks answer MEMD_ENOTSUP naming it
 * and the op (so do the memory ops of 1.3), the ones it has are named in the metrics, and a lane write
 * that fails for a full disk marks its storage degraded. */
Test(loader, older_store_records_are_zero_extended_and_lane_ops_named)
{
	memd_error err = {.struct_size = sizeof(err)};
	loader_plugin *p = NULL;
	loader_instance *inst = NULL;
	store *st = NULL;
	memd_scope sc = {.struct_size = sizeof(sc), .app = "a", .user = "u", .session = "s1"};
	memd_call call = {.struct_size = sizeof(call)};
	memd_session got;
	memd_session_sink sink = {sizeof(sink), &got, keep_session};
	memd_inbox_item item = {.struct_size = sizeof(item), .id = "i1", .body_json = "{}"};
	store_health_report health;
	prom_buf b = {0};
	uint32_t depth = 0;

	cr_assert_eq(loader_open(fixture("old_store"), NULL, &p, &err), 0, "%s", err.msg);
	cr_assert_eq(loader_instance_create(p, "stores.old", NULL, "plugin", NULL, &inst, &err), 0,
		     "%s", err.msg);
	cr_assert_eq(store_new(inst, &st, &err), 0, "%s", err.msg);
	cr_assert_eq(store_minor(st), 1);

	memset(&got, 0x5A, sizeof(got));
	cr_assert_eq(store_session_get(st, &call, &sc, &sink, &err), 0, "%s", err.msg);
	cr_assert_eq(got.struct_size, sizeof(memd_session));
	cr_assert_str_eq(got.id, "s1");
	cr_assert_eq(got.last_seq, 4);
	cr_assert_null(got.lane_key);
	cr_assert_null(got.origin_json);
	cr_assert_null(got.end_reason);
	cr_assert_eq(got.ended_us, 0);
	cr_assert_eq(got.input_tokens, 0);
	cr_assert_eq(got.last_prompt_tokens, 0);

	cr_assert_eq(store_lane_write(st, &call, &(memd_lane_write){.struct_size = 1}, NULL, &err),
		     MEMD_ENOTSUP);
	cr_assert_str_eq(err.msg, "stores.old: does not support lane_write");
	cr_assert_eq(store_inbox_take(st, &call, &sc, "k", "t", 0, NULL, &depth, &err),
		     MEMD_ENOTSUP);
	cr_assert_str_eq(err.msg, "stores.old: does not support inbox_take");
	cr_assert_eq(store_session_list_ended(st, &call, 0, 1, &sink, &err), MEMD_ENOTSUP);
	cr_assert_str_eq(err.msg, "stores.old: does not support session_list_ended");

	cr_assert_eq(store_lane_get(st, &call, &sc, "k", NULL, NULL, &err), MEMD_ENOTFOUND);
	cr_assert_str_eq(err.msg, "stores.old: no lane 'k'");
	cr_assert_eq(store_health(st, &health), 0);
	cr_assert_eq(store_inbox_put(st, &call, &sc, "k", &item, &depth, &err), MEMD_EIO);
	cr_assert_eq(store_health(st, &health), 1, "inbox_put counts as a write");
	cr_assert_eq(health.flags, MEMD_ERROR_STORAGE_FULL);

	/* Transcripts: short events read as visible, appended by no
	 * operation; an op never reaches the store; the ops are named. */
	{
		memd_event ev;
		memd_event_query q = {.struct_size = sizeof(q)};
		memd_event_sink es = {sizeof(es), &ev, keep_event};
		memd_transcript_op op = {.struct_size = sizeof(op), .kind = MEMD_OP_CLEAR, .id = "op1",
					 .hide_from_seq = 1};
		memd_append a = {.struct_size = sizeof(a), .now_us = 1};
		int64_t seqs[1];
		memd_append_result res = {.struct_size = sizeof(res), .seqs = seqs};

		memset(&ev, 0x5A, sizeof(ev));
		cr_assert_eq(store_events_load(st, &call, &sc, &q, &es, &err), 0, "%s", err.msg);
		cr_assert_eq(ev.struct_size, sizeof(memd_event));
		cr_assert_str_eq(ev.id, "e1");
		cr_assert_eq(ev.tokens, 1);
		cr_assert_eq(ev.hidden_us, 0);
		cr_assert_null(ev.hidden_by);
		cr_assert_eq(ev.hidden_kind, 0);
		cr_assert_null(ev.operation);
		a.op = &op;
		cr_assert_eq(store_append(st, &call, &sc, &a, &res, &err), MEMD_ENOTSUP);
		cr_assert_not_null(strstr(err.msg, "does not support transcript operations"), "%s",
				   err.msg);
		a.op = NULL;
		cr_assert_eq(store_append(st, &call, &sc, &a, &res, &err), MEMD_EIO);
		cr_assert_str_eq(err.msg, "stores.old: append reached the store");
		cr_assert_eq(store_operation_list(st, &call, &sc, 0, NULL, &err), MEMD_ENOTSUP);
		cr_assert_str_eq(err.msg, "stores.old: does not support operation_list");
		cr_assert_eq(store_state_history(st, &call, &sc, NULL, NULL, &err), MEMD_ENOTSUP);
		cr_assert_str_eq(err.msg, "stores.old: does not support state_history");
	}

	/* Memories (1.3): every op is absent from a 1.1 store; the host names
	 * the store and the op. */
	{
		memd_memory_commit mc = {.struct_size = sizeof(mc), .now_us = 1};
		memd_memory_query mq = {.struct_size = sizeof(mq), .limit = 1};
		memd_pending_query pq = {.struct_size = sizeof(pq), .limit = 1, .updated_before_us = 1};
		uint32_t count = 0;

		cr_assert_eq(store_memory_commit(st, &call, &sc, &mc, NULL, &err), MEMD_ENOTSUP);
		cr_assert_str_eq(err.msg, "stores.old: does not support memory_commit");
		cr_assert_eq(store_memory_get(st, &call, &sc, "m1", 1, NULL, &err), MEMD_ENOTSUP);
		cr_assert_str_eq(err.msg, "stores.old: does not support memory_get");
		cr_assert_eq(store_memory_list(st, &call, &sc, &mq, NULL, &err), MEMD_ENOTSUP);
		cr_assert_str_eq(err.msg, "stores.old: does not support memory_list");
		cr_assert_eq(store_memory_history(st, &call, &sc, "m1", NULL, &err), MEMD_ENOTSUP);
		cr_assert_str_eq(err.msg, "stores.old: does not support memory_history");
		cr_assert_eq(store_memory_expire(st, &call, 1, 1, &count, &err), MEMD_ENOTSUP);
		cr_assert_str_eq(err.msg, "stores.old: does not support memory_expire");
		cr_assert_eq(store_session_list_pending(st, &call, &pq, &sink, &err), MEMD_ENOTSUP);
		cr_assert_str_eq(err.msg, "stores.old: does not support session_list_pending");
	}

	store_render_errors(st, &b);
	cr_assert_not_null(b.p);
	cr_assert_not_null(strstr(b.p, STORE_METRIC_ERRORS "{store=\"stores.old\",op=\"lane_get\","
					"code=\"not_found\"} 1\n"), "%s", b.p);
	cr_assert_not_null(strstr(b.p, STORE_METRIC_ERRORS "{store=\"stores.old\",op=\"inbox_put\","
					"code=\"storage_error\"} 1\n"), "%s", b.p);
	free(b.p);
	store_free(st);
	loader_close(p);
}

/* ---- instances and the memd_host table ------------------------------- */

typedef struct log_capture {
	char lines[LOG_MAX_LINES][LINE_BUF];
	char components[LOG_MAX_LINES][LINE_BUF];
	size_t n;
} log_capture;

static void capture(void *userdata, int32_t level, const char *component, const char *line)
{
	log_capture *c = userdata;
	(void)level;
	if (c->n < LOG_MAX_LINES) {
		fmt(c->lines[c->n], LINE_BUF, "%s", line);
		fmt(c->components[c->n], LINE_BUF, "%s", component);
		c->n++;
	}
}

static const char *logged(const log_capture *c, const char *needle, const char **component)
{
	for (size_t i = 0; i < c->n; i++)
		if (strstr(c->lines[i], needle)) {
			if (component)
				*component = c->components[i];
			return c->lines[i];
		}
	return NULL;
}

static config_node *parse(const char *yaml)
{
	memd_error err = {.struct_size = sizeof(err)};
	config_node *root = NULL;
	cr_assert_eq(config_parse_string(yaml, strlen(yaml), "test.yaml", &root, &err), 0, "%s",
		     err.msg);
	return root;
}

#define GOOD_CONFIG              \
	"plugin: good\n"         \
	"count: 7\n"             \
	"label: \"x: y\"\n"      \
	"extra: [1, two, {three: 3}]\n" \
	"token: s3cr3t-value\n"

Test(loader, host_config_accessors)
{
	memd_error err = {.struct_size = sizeof(err)};
	loader_plugin *p = NULL;
	loader_instance *inst = NULL;
	log_capture *logs = calloc(1, sizeof(*logs));
	hostsvc *svc = hostsvc_new(capture, logs, MEMD_LOG_DEBUG);
	config_node *node = parse(GOOD_CONFIG);

	cr_assert_eq(loader_open(fixture("good"), NULL, &p, &err), 0, "%s", err.msg);
	cr_assert_eq(loader_instance_create(p, "apps.x.working_memory", node, "plugin", svc, &inst,
					    &err),
		     0, "%s", err.msg);
	cr_assert_eq(loader_instance_plugin(inst), p);
	cr_assert_str_eq(loader_instance_name(inst), "apps.x.working_memory");
	cr_assert_eq(loader_instance_serialized(inst), 0);
	cr_assert_not_null(loader_instance_handle(inst));

	const memd_host *h = loader_instance_host(inst);
	cr_assert_eq(h->struct_size, sizeof(memd_host));
	cr_assert_eq(h->abi_major, MEMD_ABI_MAJOR);
	cr_assert_eq(h->abi_minor, MEMD_ABI_MINOR);

	/* Values from the node. */
	int64_t i64 = 0;
	cr_assert_eq(h->config_int(h, "count", &i64), 0);
	cr_assert_eq(i64, 7);
	const char *s = NULL;
	cr_assert_eq(h->config_string(h, "label", &s), 0);
	cr_assert_str_eq(s, "x: y");
	cr_assert_eq(h->config_string(h, "token", &s), 0);
	cr_assert_str_eq(s, "s3cr3t-value");
	const char *json = NULL, *again = NULL;
	cr_assert_eq(h->config_json(h, "extra", &json), 0);
	cr_assert_str_eq(json, "[1,\"two\",{\"three\":3}]");
	cr_assert_eq(h->config_json(h, "extra", &again), 0);
	cr_assert_eq(json, again, "config_json text is cached, not rebuilt");

	/* Defaults from the schema. */
	double dbl = 0;
	cr_assert_eq(h->config_double(h, "ratio", &dbl), 0);
	cr_assert_float_eq(dbl, 0.5, 1e-12);
	int32_t b = -1;
	cr_assert_eq(h->config_bool(h, "verbose", &b), 0);
	cr_assert_eq(b, 0);
	cr_assert_eq(h->config_json(h, "shape", &json), 0);
	cr_assert_str_eq(json, "{\"a\":1,\"b\":[\"x\",\"y\"]}");

	/* Type errors: the accessor must match the declared type. */
	i64 = 42;
	cr_assert_eq(h->config_string(h, "count", &s), MEMD_EINVAL);
	cr_assert_eq(h->config_int(h, "label", &i64), MEMD_EINVAL);
	cr_assert_eq(i64, 42, "ret is written only on success");
	cr_assert_eq(h->config_bool(h, "ratio", &b), MEMD_EINVAL);
	cr_assert_eq(h->config_double(h, "verbose", &dbl), MEMD_EINVAL);
	cr_assert_eq(h->config_json(h, "count", &json), MEMD_EINVAL);

	/* Undeclared keys, and the host's own key, are not found. */
	cr_assert_eq(h->config_int(h, "nope", &i64), MEMD_ENOTFOUND);
	cr_assert_eq(h->config_string(h, "plugin", &s), MEMD_ENOTFOUND);

	/* The other services. */
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	int64_t now = h->now_us(h);
	cr_assert_lt(llabs(now / US_PER_S - (int64_t)ts.tv_sec), CLOCK_SLACK_S);
	int64_t m1 = h->monotonic_us(h), m2 = h->monotonic_us(h);
	cr_assert_geq(m2, m1);
	char uuid[37];
	cr_assert_eq(h->uuid_v7(h, uuid), 0);
	cr_assert_eq(strlen(uuid), 36);
	cr_assert_eq(uuid[14], '7', "%s is not a v7 uuid", uuid);
	int64_t tokens = 0;
	cr_assert_eq(h->count_tokens(h, "hello there, world", 18, &tokens), 0);
	cr_assert_gt(tokens, 0);
	cr_assert_not_null(h->summarize);
	void *mem = h->alloc(16);
	cr_assert_not_null(mem);
	mem = h->realloc(mem, 64);
	cr_assert_not_null(mem);
	h->free(mem);

	/* Logs: tagged with the instance name; the secret never appears. */
	const char *component = NULL;
	cr_assert_not_null(logged(logs, "good: count=7", &component));
	cr_assert_str_eq(component, "apps.x.working_memory");
	const char *cfg = logged(logs, "config:", NULL);
	cr_assert_not_null(cfg);
	cr_assert_not_null(strstr(cfg, "count=7"), "%s", cfg);
	cr_assert_not_null(strstr(cfg, "token=(secret)"), "%s", cfg);
	for (size_t k = 0; k < logs->n; k++)
		cr_assert_null(strstr(logs->lines[k], "s3cr3t"), "secret logged: %s", logs->lines[k]);

	loader_instance_destroy(inst);
	loader_close(p);
	config_free(node);
	hostsvc_free(svc);
	free(logs);
}

Test(loader, absent_values_without_defaults_are_not_found)
{
	memd_error err = {.struct_size = sizeof(err)};
	loader_plugin *p = NULL;
	loader_instance *inst = NULL;
	cr_assert_eq(loader_open(fixture("good"), NULL, &p, &err), 0, "%s", err.msg);
	/* No node at all: an empty config, every default applies. */
	cr_assert_eq(loader_instance_create(p, "check", NULL, NULL, NULL, &inst, &err), 0, "%s",
		     err.msg);
	const memd_host *h = loader_instance_host(inst);
	const char *s = "untouched";
	cr_assert_eq(h->config_string(h, "token", &s), MEMD_ENOTFOUND);
	cr_assert_eq(h->config_json(h, "extra", &s), MEMD_ENOTFOUND);
	cr_assert_str_eq(s, "untouched");
	cr_assert_eq(h->config_string(h, "label", &s), 0);
	cr_assert_str_eq(s, "hello world");
	int64_t count = 0;
	cr_assert_eq(h->config_int(h, "count", &count), 0);
	cr_assert_eq(count, 3);
	cr_assert_null(h->summarize, "no hostsvc, no summarizer");
	loader_instance_destroy(inst);
	loader_close(p);
}

Test(loader, bad_config_lists_every_problem)
{
	memd_error err = {.struct_size = sizeof(err)};
	loader_plugin *p = NULL;
	loader_instance *inst = NULL;
	config_node *node = parse("plugin: good\ncount: many\nbogus: 1\n");
	cr_assert_eq(loader_open(fixture("good"), NULL, &p, &err), 0, "%s", err.msg);
	cr_assert_eq(loader_instance_create(p, "stores.x", node, "plugin", NULL, &inst, &err),
		     MEMD_EINVAL);
	cr_assert_null(inst);
	cr_assert_eq(strncmp(err.msg, "test.yaml:2: stores.x.count: ", 29), 0, "%s", err.msg);
	cr_assert_not_null(strstr(err.msg, "; test.yaml:3: stores.x.bogus: unknown key"), "%s",
			   err.msg);
	loader_close(p);
	config_free(node);
}

Test(loader, init_failure_keeps_code_and_flags_and_names_the_instance)
{
	memd_error err = {.struct_size = sizeof(err)};
	loader_plugin *p = NULL;
	loader_instance *inst = NULL;
	config_node *node = parse("strategy: good\nfail: true\n");
	cr_assert_eq(loader_open(fixture("good"), NULL, &p, &err), 0, "%s", err.msg);
	cr_assert_eq(loader_instance_create(p, "apps.*.working_memory", node, "strategy", NULL,
					    &inst, &err),
		     MEMD_EUNAVAIL);
	cr_assert_null(inst);
	cr_assert_eq(err.code, MEMD_EUNAVAIL);
	cr_assert_eq(err.flags, MEMD_ERROR_RETRYABLE);
	cr_assert_str_eq(err.msg, "apps.*.working_memory: asked to fail (fail: true)");
	loader_close(p);
	config_free(node);
}

Test(loader, close_waits_for_the_last_instance)
{
	memd_error err = {.struct_size = sizeof(err)};
	loader_plugin *p = NULL;
	loader_instance *a = NULL, *b = NULL;
	cr_assert_eq(loader_open(fixture("good"), NULL, &p, &err), 0, "%s", err.msg);
	cr_assert_eq(loader_instance_create(p, "a", NULL, NULL, NULL, &a, &err), 0, "%s", err.msg);
	cr_assert_eq(loader_instance_create(p, "b", NULL, NULL, NULL, &b, &err), 0, "%s", err.msg);
	loader_close(p);
	/* The plugin's code and the host's copies are still there. */
	int64_t count = 0;
	const memd_host *h = loader_instance_host(a);
	cr_assert_eq(h->config_int(h, "count", &count), 0);
	cr_assert_eq(count, 3);
	loader_instance_destroy(a);
	h = loader_instance_host(b);
	cr_assert_eq(h->config_int(h, "count", &count), 0);
	loader_instance_destroy(b); /* unloads now */
	loader_instance_destroy(NULL);
	loader_close(NULL);
}
