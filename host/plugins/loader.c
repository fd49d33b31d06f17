/* SPDX-License-Identifier: MIT */
/*
 * loader: finds, dlopens and validates plugins, and creates plugin
 * instances with their memd_host table (api/README.md).
 *
 * Nothing a plugin hands over is trusted blindly: every struct is read only
 * up to the struct_size it states, copied into a zeroed host-sized struct,
 * and checked (ABI version, name, kinds vs ops tables, required ops, the
 * config-key schema and its defaults) before the host uses it. A refusal
 * names the file and the reason. loader_check_isolated() does all of it,
 * plus init/fini, in a child process so a crashing plugin cannot take the
 * caller with it.
 */
#include "plugins/loader.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <link.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "plugins/hostsvc.h"
#include "util/uuid.h"

/* The smallest descriptor the host accepts: the ABI 1.0 layout up to and
 * including the last member the host reads (the embedder ops pointer).
 * Written as an offset so it stays fixed when memd_plugin grows. */
#define LOADER_DESCRIPTOR_MIN_SIZE \
	(offsetof(memd_plugin, embedder) + sizeof(((const memd_plugin *)0)->embedder))
/* The descriptor's leading words that say which ABI it follows
 * (struct_size, abi_major, abi_minor): read before anything else. */
#define LOADER_DESCRIPTOR_VERSION_SIZE \
	(offsetof(memd_plugin, abi_minor) + sizeof(((const memd_plugin *)0)->abi_minor))
/* An ops table must at least hold its struct_size and reserved words. */
#define LOADER_OPS_MIN_SIZE (2 * sizeof(uint32_t))
/* A config key must hold every 1.0 member (up to and including help). */
#define LOADER_CONFIG_KEY_MIN_SIZE \
	(offsetof(memd_config_key, help) + sizeof(((const memd_config_key *)0)->help))
/* No ABI struct will ever be this large: a struct_size above it is garbage. */
#define LOADER_STRUCT_MAX_SIZE 65536u
/* A plugin named "x" in config is the file "memd-x.so" (plugins/meson.build). */
#define LOADER_FILE_PREFIX "memd-"
/* Longest plugin or config-key name accepted. */
#define LOADER_NAME_MAX 64
/* A config-key list longer than this is taken as missing its NULL end. */
#define LOADER_CONFIG_KEYS_MAX 256
/* A choices list longer than this is taken as missing its NULL end. */
#define LOADER_CONFIG_CHOICES_MAX 64
/* loader_check_isolated: how often the parent looks whether the child has
 * exited while waiting for its output (the timeout is in loader.h). */
#define LOADER_CHECK_POLL_MS 50
#define LOADER_US_PER_MS 1000
#define LOADER_US_PER_S 1000000
#define LOADER_NS_PER_US 1000
/* Bytes read from the check child per read(). */
#define LOADER_CHECK_READ_CHUNK 4096
/* Exit status of a check child that reported a refusal. */
#define LOADER_CHECK_EXIT_REFUSED 1
/* Open file descriptors nftw may use while removing the check's work dir. */
#define LOADER_NFTW_FDS 16

/* Phases of loading, reported by the check child before each one so the
 * parent can say where a crash happened. */
#define PHASE_LOAD     'l'
#define PHASE_ENTRY    'e'
#define PHASE_VALIDATE 'v'
#define PHASE_INIT     'i'
#define PHASE_FINI     'f'
#define PHASE_REPORT   'r'
/* Records of the check child's pipe: 'p' + phase byte; then one final
 * 'O' + report text, or 'F' + int32 code + uint32 flags + message text. */
#define REC_PHASE 'p'
#define REC_OK    'O'
#define REC_FAIL  'F'

struct loader_plugin {
	char *path;                   /* the file as opened */
	const char *base;             /* its basename (points into path) */
	void *dl;
	memd_plugin desc;             /* host-sized copy; pointers below */
	memd_store_ops store;
	memd_vector_ops vector;
	memd_strategy_ops strategy;
	memd_embedder_ops embedder;
	memd_config_key *keys;        /* n_keys host-sized copies */
	const memd_config_key **key_ptrs; /* n_keys + 1, NULL-terminated */
	config_node **defaults;       /* n_keys parsed defaults (NULL: none or STRING) */
	size_t n_keys;
	uint32_t desc_size;           /* struct_size as the plugin stated it */
	size_t n_instances;           /* live instances */
	int close_pending;            /* loader_close() called with instances left */
	int phase_fd;                 /* check child's pipe, or -1 */
};

typedef struct json_cache {
	struct json_cache *next;
	char *key;
	char *json;
} json_cache;

struct loader_instance {
	memd_host host;               /* host.host_data points back here */
	loader_plugin *plugin;
	char *name;
	const config_node *node;      /* the instance's config map */
	config_node *own_node;        /* the empty map used when node was NULL */
	char *skip_key;
	hostsvc *svc;
	void *handle;                 /* from the plugin's init */
	pthread_mutex_t lock;         /* guards cache */
	json_cache *cache;
};

/* ---- small helpers ---------------------------------------------------- */

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');
	if (!slash)
		return path;
	if (slash[1] == '\0')
		return path; /* "dir/": name the whole thing */
	return slash + 1;
}

static int valid_name(const char *s)
{
	size_t n = 0;
	if (!s || !*s)
		return 0;
	for (; s[n]; n++) {
		char c = s[n];
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'))
			return 0;
		if (n >= LOADER_NAME_MAX)
			return 0;
	}
	return 1;
}

static int ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);
	return n >= m && strcmp(s + n - m, suffix) == 0;
}

static void phase(const loader_plugin *p, char what)
{
	char rec[2] = {REC_PHASE, what};
	if (p->phase_fd >= 0) {
		ssize_t n;
		do
			n = write(p->phase_fd, rec, sizeof(rec));
		while (n < 0 && errno == EINTR);
	}
}

static const char *file_kind(mode_t mode)
{
	if (S_ISDIR(mode))
		return "a directory";
	if (S_ISCHR(mode))
		return "a character device";
	if (S_ISBLK(mode))
		return "a block device";
	if (S_ISFIFO(mode))
		return "a FIFO";
	if (S_ISSOCK(mode))
		return "a socket";
	return "not a regular file";
}

/* One ABI kind: its bit, the words used in messages, and its ops table. */
typedef struct kind_info {
	uint32_t bit;
	const char *word;     /* "store op 'append' is missing" */
	const char *noun;     /* "is a session store plugin" */
	const char *article;  /* "a" or "an", for noun */
} kind_info;

static const kind_info kinds[] = {
	{MEMD_KIND_STORE, "store", "session store", "a"},
	{MEMD_KIND_VECTOR, "vector", "vector store", "a"},
	{MEMD_KIND_STRATEGY, "strategy", "strategy", "a"},
	{MEMD_KIND_EMBEDDER, "embedder", "embedder", "an"},
};
#define N_KINDS (sizeof(kinds) / sizeof(kinds[0]))
#define KINDS_ALL (MEMD_KIND_STORE | MEMD_KIND_VECTOR | MEMD_KIND_STRATEGY | MEMD_KIND_EMBEDDER)

/* One member of an ops table (every member: the report lists the ones a
 * plugin provides; required ones are checked). */
typedef struct op_info {
	const char *name;
	size_t offset;
	int required;
} op_info;

#define OP(type, m, req) {#m, offsetof(type, m), req}
static const op_info store_ops[] = {
	OP(memd_store_ops, session_create, 1),
	OP(memd_store_ops, session_get, 1),
	OP(memd_store_ops, session_list, 1),
	OP(memd_store_ops, session_update, 1),
	OP(memd_store_ops, session_delete, 1),
	OP(memd_store_ops, append, 1),
	OP(memd_store_ops, events_load, 1),
	OP(memd_store_ops, state_get, 1),
	OP(memd_store_ops, artifact_put, 0),
	OP(memd_store_ops, artifact_get, 0),
	OP(memd_store_ops, artifact_list, 0),
	OP(memd_store_ops, artifact_versions, 0),
	OP(memd_store_ops, artifact_delete, 0),
	OP(memd_store_ops, user_delete, 1),
	OP(memd_store_ops, feed_read, 1),
	OP(memd_store_ops, feed_head, 0),
	OP(memd_store_ops, cursor_get, 1),
	OP(memd_store_ops, cursor_set, 1),
	OP(memd_store_ops, ping, 0),
};
static const op_info vector_ops[] = {
	OP(memd_vector_ops, upsert, 1),
	OP(memd_vector_ops, remove, 1),
	OP(memd_vector_ops, query, 1),
	OP(memd_vector_ops, ping, 0),
	OP(memd_vector_ops, prepare, 0),
	OP(memd_vector_ops, remove_events, 0),
};
static const op_info strategy_ops[] = {
	OP(memd_strategy_ops, context, 1),
	OP(memd_strategy_ops, after_append, 0),
	OP(memd_strategy_ops, on_session_finalize, 0),
};
static const op_info embedder_ops[] = {
	OP(memd_embedder_ops, dimension, 1),
	OP(memd_embedder_ops, embed, 1),
};
#undef OP
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

typedef void (*any_fn)(void);

static int op_present(const void *table, size_t offset)
{
	any_fn fn;
	memcpy(&fn, (const char *)table + offset, sizeof(fn));
	return fn != NULL;
}

/* The plugin's table for kind k (as the plugin gave it) and the host copy. */
typedef struct table_slot {
	const void *theirs;
	void *ours;
	size_t host_size;
	const op_info *ops;
	size_t n_ops;
} table_slot;

static table_slot slot_for(loader_plugin *p, const memd_plugin *d, size_t k)
{
	switch (kinds[k].bit) {
	case MEMD_KIND_STORE:
		return (table_slot){d->store, &p->store, sizeof(p->store), store_ops, COUNT(store_ops)};
	case MEMD_KIND_VECTOR:
		return (table_slot){d->vector, &p->vector, sizeof(p->vector), vector_ops,
				    COUNT(vector_ops)};
	case MEMD_KIND_STRATEGY:
		return (table_slot){d->strategy, &p->strategy, sizeof(p->strategy), strategy_ops,
				    COUNT(strategy_ops)};
	default:
		return (table_slot){d->embedder, &p->embedder, sizeof(p->embedder), embedder_ops,
				    COUNT(embedder_ops)};
	}
}

static const char *config_type_word(uint32_t type)
{
	switch (type) {
	case MEMD_CONFIG_STRING: return "string";
	case MEMD_CONFIG_INT: return "int";
	case MEMD_CONFIG_DOUBLE: return "double";
	case MEMD_CONFIG_BOOL: return "bool";
	case MEMD_CONFIG_JSON: return "json";
	}
	return NULL;
}

/* Check that a parsed default fits its type. */
static int32_t default_fits(const config_node *n, uint32_t type)
{
	int64_t i;
	double d;
	int32_t b;
	switch (type) {
	case MEMD_CONFIG_INT: return config_as_int(n, &i);
	case MEMD_CONFIG_DOUBLE: return config_as_double(n, &d);
	case MEMD_CONFIG_BOOL: return config_as_bool(n, &b);
	default: return 0; /* JSON: any value */
	}
}

/* ---- resolving a name or path ----------------------------------------- */

/* A value with '/' or ending in ".so" is a path; otherwise a plugin name. */
static int is_path(const char *name_or_path)
{
	return strchr(name_or_path, '/') != NULL || ends_with(name_or_path, ".so");
}

/* stat path and accept only a regular file (symlinks are followed, so a
 * link to a directory or device is refused too). */
static int32_t check_regular(const char *path, const char *label, memd_error *err)
{
	struct stat st;
	if (stat(path, &st) != 0) {
		if (errno == ENOENT || errno == ENOTDIR)
			return memd_error_set(err, MEMD_ENOTFOUND, 0, "%s: no such file (%s)", label,
					      path);
		return memd_error_set(err, MEMD_EIO, 0, "%s: cannot stat %s: %s", label, path,
				      strerror(errno));
	}
	if (!S_ISREG(st.st_mode))
		return memd_error_set(err, MEMD_EABI, 0, "%s: %s is %s, not a regular file", label,
				      path, file_kind(st.st_mode));
	return 0;
}

static int32_t resolve(const char *name_or_path, const char *const *search, char **ret_path,
		       memd_error *err)
{
	char *path;
	int32_t rc;

	if (!name_or_path || !*name_or_path)
		return memd_error_set(err, MEMD_EINVAL, 0, "no plugin name given");
	if (is_path(name_or_path)) {
		/* dlopen() searches the library path for a name without '/'. */
		int local = strchr(name_or_path, '/') == NULL;
		if (asprintf(&path, "%s%s", local ? "./" : "", name_or_path) < 0)
			return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
		rc = check_regular(path, base_name(path), err);
		if (rc) {
			free(path);
			return rc;
		}
		*ret_path = path;
		return 0;
	}
	if (!valid_name(name_or_path))
		return memd_error_set(err, MEMD_EINVAL, 0,
				      "plugin name '%s' is not [a-z0-9_]+ (give a path to load a "
				      "file by another name)",
				      name_or_path);
	size_t searched = 0;
	for (size_t i = 0; search && search[i]; i++) {
		struct stat st;
		if (!*search[i])
			continue;
		searched++;
		if (asprintf(&path, "%s/" LOADER_FILE_PREFIX "%s.so", search[i], name_or_path) < 0)
			return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
		if (stat(path, &st) != 0 && (errno == ENOENT || errno == ENOTDIR)) {
			free(path);
			continue;
		}
		rc = check_regular(path, base_name(path), err);
		if (rc) {
			free(path);
			return rc;
		}
		*ret_path = path;
		return 0;
	}
	if (!searched)
		return memd_error_set(err, MEMD_ENOTFOUND, 0,
				      LOADER_FILE_PREFIX "%s.so: not found: no plugin directories "
				      "are configured "
				      "(plugins.path or MEMD_PLUGIN_PATH)",
				      name_or_path);
	/* List the directories searched, as much as fits. */
	char dirs[MEMD_ERROR_MSG_MAX];
	size_t used = 0;
	dirs[0] = '\0';
	for (size_t i = 0; search[i] && used < sizeof(dirs); i++) {
		if (!*search[i])
			continue;
		int n = snprintf(dirs + used, sizeof(dirs) - used, "%s%s", used ? ":" : "",
				 search[i]);
		if (n < 0)
			break;
		used += (size_t)n;
	}
	return memd_error_set(err, MEMD_ENOTFOUND, 0, LOADER_FILE_PREFIX "%s.so: not found in %s",
			      name_or_path, dirs);
}

/* ---- validating the descriptor ---------------------------------------- */

/* A key's choices (since 1.1): only on a STRING key, each a string, at
 * most LOADER_CONFIG_CHOICES_MAX, and the default (if any) among them. */
static int32_t check_choices(const loader_plugin *p, const memd_config_key *c, memd_error *err)
{
	size_t n = 0;
	int default_found = 0;

	if (!c->choices)
		return 0;
	if (c->type != MEMD_CONFIG_STRING)
		return memd_error_set(err, MEMD_EABI, 0,
				      "%s: config key '%s' has choices but is not a string", p->base,
				      c->name);
	for (; c->choices[n]; n++) {
		if (n >= LOADER_CONFIG_CHOICES_MAX)
			return memd_error_set(err, MEMD_EABI, 0,
					      "%s: config key '%s' has more than %d choices (missing "
					      "their NULL end?)",
					      p->base, c->name, LOADER_CONFIG_CHOICES_MAX);
		if (c->default_value && strcmp(c->choices[n], c->default_value) == 0)
			default_found = 1;
	}
	if (n == 0)
		return memd_error_set(err, MEMD_EABI, 0,
				      "%s: config key '%s' has an empty choices list", p->base,
				      c->name);
	if (c->default_value && !default_found)
		return memd_error_set(err, MEMD_EABI, 0,
				      "%s: config key '%s': default \"%s\" is not one of its choices",
				      p->base, c->name,
				      (c->flags & MEMD_CONFIG_SECRET) ? "(secret)" : c->default_value);
	return 0;
}

static int32_t copy_config_keys(loader_plugin *p, const memd_plugin *d, memd_error *err)
{
	const memd_config_key *const *theirs = d->config_keys;
	size_t n = 0;
	int32_t r;

	while (theirs && theirs[n]) {
		if (n >= LOADER_CONFIG_KEYS_MAX)
			return memd_error_set(err, MEMD_EABI, 0,
					      "%s: config key list has more than %d entries (missing "
					      "its NULL end?)",
					      p->base, LOADER_CONFIG_KEYS_MAX);
		n++;
	}
	p->keys = calloc(n ? n : 1, sizeof(*p->keys));
	p->key_ptrs = calloc(n + 1, sizeof(*p->key_ptrs));
	p->defaults = calloc(n ? n : 1, sizeof(*p->defaults));
	if (!p->keys || !p->key_ptrs || !p->defaults)
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	p->n_keys = n;

	for (size_t i = 0; i < n; i++) {
		const memd_config_key *k = theirs[i];
		memd_config_key *c = &p->keys[i];
		if (k->struct_size < LOADER_CONFIG_KEY_MIN_SIZE || k->struct_size > LOADER_STRUCT_MAX_SIZE)
			return memd_error_set(err, MEMD_EABI, 0,
					      "%s: config key #%zu has an implausible struct_size %u "
					      "(need %zu..%u)",
					      p->base, i + 1, k->struct_size,
					      (size_t)LOADER_CONFIG_KEY_MIN_SIZE, LOADER_STRUCT_MAX_SIZE);
		memcpy(c, k, k->struct_size < sizeof(*c) ? k->struct_size : sizeof(*c));
		c->struct_size = sizeof(*c);
		p->key_ptrs[i] = c;
		if (!valid_name(c->name))
			return memd_error_set(err, MEMD_EABI, 0,
					      "%s: config key #%zu has a name that is not [a-z0-9_]+",
					      p->base, i + 1);
		if (strcmp(c->name, "plugin") == 0 || strcmp(c->name, "strategy") == 0)
			return memd_error_set(err, MEMD_EABI, 0,
					      "%s: config key '%s' is the host's and cannot be declared",
					      p->base, c->name);
		for (size_t j = 0; j < i; j++)
			if (strcmp(p->keys[j].name, c->name) == 0)
				return memd_error_set(err, MEMD_EABI, 0,
						      "%s: config key '%s' is declared twice", p->base,
						      c->name);
		if (!config_type_word(c->type))
			return memd_error_set(err, MEMD_EABI, 0,
					      "%s: config key '%s' has unknown type %u", p->base,
					      c->name, c->type);
		if (c->flags & ~(MEMD_CONFIG_REQUIRED | MEMD_CONFIG_SECRET))
			return memd_error_set(err, MEMD_EABI, 0,
					      "%s: config key '%s' has unknown flags 0x%x", p->base,
					      c->name, c->flags);
		if (!c->help)
			c->help = "";
		if ((r = check_choices(p, c, err)) < 0)
			return r;
		if (!c->default_value)
			continue;
		if (c->flags & MEMD_CONFIG_REQUIRED)
			return memd_error_set(err, MEMD_EABI, 0,
					      "%s: config key '%s' is required but has a default",
					      p->base, c->name);
		if (c->type == MEMD_CONFIG_STRING)
			continue; /* the text is the value */
		memd_error perr = {.struct_size = sizeof(perr)};
		int32_t rc = config_parse_string(c->default_value, strlen(c->default_value),
						 c->name, &p->defaults[i], &perr);
		if (rc == MEMD_ENOMEM)
			return memd_error_set(err, rc, 0, "out of memory");
		if (rc || default_fits(p->defaults[i], c->type) != 0)
			return memd_error_set(err, MEMD_EABI, 0,
					      "%s: config key '%s': default \"%s\" is not a valid %s",
					      p->base, c->name,
					      (c->flags & MEMD_CONFIG_SECRET) ? "(secret)"
									       : c->default_value,
					      config_type_word(c->type));
	}
	p->key_ptrs[n] = NULL;
	return 0;
}

static int32_t validate(loader_plugin *p, const memd_plugin *d, memd_error *err)
{
	const char *b = p->base;

	if (!d)
		return memd_error_set(err, MEMD_EABI, 0, "%s: %s returned no descriptor", b,
				      MEMD_PLUGIN_ENTRY_SYMBOL);
	/* The version words first: a descriptor from another major may have
	 * another size and mean something else by every later member. */
	if (d->struct_size < LOADER_DESCRIPTOR_VERSION_SIZE)
		return memd_error_set(err, MEMD_EABI, 0,
				      "%s: truncated descriptor (struct_size %u, need at least %zu)",
				      b, d->struct_size, (size_t)LOADER_DESCRIPTOR_MIN_SIZE);
	if (d->abi_major != MEMD_ABI_MAJOR)
		return memd_error_set(err, MEMD_EABI, 0, "%s: built for ABI %u.x, host is %d.%d", b,
				      d->abi_major, MEMD_ABI_MAJOR, MEMD_ABI_MINOR);
	if (d->abi_minor > MEMD_ABI_MINOR)
		return memd_error_set(err, MEMD_EABI, 0, "%s: needs ABI %u.%u, host is %d.%d", b,
				      d->abi_major, d->abi_minor, MEMD_ABI_MAJOR, MEMD_ABI_MINOR);
	if (d->struct_size < LOADER_DESCRIPTOR_MIN_SIZE)
		return memd_error_set(err, MEMD_EABI, 0,
				      "%s: truncated descriptor (struct_size %u, need at least %zu)",
				      b, d->struct_size, (size_t)LOADER_DESCRIPTOR_MIN_SIZE);
	if (d->struct_size > LOADER_STRUCT_MAX_SIZE)
		return memd_error_set(err, MEMD_EABI, 0,
				      "%s: implausible descriptor struct_size %u (not a descriptor?)",
				      b, d->struct_size);

	p->desc_size = d->struct_size;
	memcpy(&p->desc, d, d->struct_size < sizeof(p->desc) ? d->struct_size : sizeof(p->desc));
	p->desc.struct_size = sizeof(p->desc);
	p->desc.store = NULL;
	p->desc.vector = NULL;
	p->desc.strategy = NULL;
	p->desc.embedder = NULL;
	p->desc.config_keys = NULL;

	if (!valid_name(p->desc.name))
		return memd_error_set(err, MEMD_EABI, 0,
				      "%s: plugin name is missing or not [a-z0-9_]+ (at most %d chars)",
				      b, LOADER_NAME_MAX);
	if (!p->desc.version)
		p->desc.version = "";
	if (!p->desc.description)
		p->desc.description = "";
	if (!p->desc.init || !p->desc.fini)
		return memd_error_set(err, MEMD_EABI, 0, "%s: descriptor has no %s", b,
				      p->desc.init ? "fini" : "init");
	if (p->desc.kind == 0)
		return memd_error_set(err, MEMD_EABI, 0, "%s: descriptor declares no kind", b);
	if (p->desc.kind & ~KINDS_ALL)
		return memd_error_set(err, MEMD_EABI, 0, "%s: unknown kind bits 0x%x", b,
				      p->desc.kind & ~KINDS_ALL);

	for (size_t k = 0; k < N_KINDS; k++) {
		table_slot s = slot_for(p, d, k);
		int has_bit = (p->desc.kind & kinds[k].bit) != 0;
		if (has_bit && !s.theirs)
			return memd_error_set(err, MEMD_EABI, 0,
					      "%s: declares kind %s but has no %s ops table", b,
					      kinds[k].word, kinds[k].word);
		if (!has_bit && s.theirs)
			return memd_error_set(err, MEMD_EABI, 0,
					      "%s: has a %s ops table but does not declare kind %s", b,
					      kinds[k].word, kinds[k].word);
		if (!has_bit)
			continue;
		uint32_t size;
		memcpy(&size, s.theirs, sizeof(size));
		if (size < LOADER_OPS_MIN_SIZE || size > LOADER_STRUCT_MAX_SIZE)
			return memd_error_set(err, MEMD_EABI, 0,
					      "%s: %s ops table has an implausible struct_size %u", b,
					      kinds[k].word, size);
		memset(s.ours, 0, s.host_size);
		memcpy(s.ours, s.theirs, size < s.host_size ? size : s.host_size);
		memcpy(s.ours, &(uint32_t){(uint32_t)s.host_size}, sizeof(uint32_t));
		for (size_t i = 0; i < s.n_ops; i++)
			if (s.ops[i].required && !op_present(s.ours, s.ops[i].offset))
				return memd_error_set(err, MEMD_EABI, 0, "%s: %s op '%s' is missing",
						      b, kinds[k].word, s.ops[i].name);
	}
	if (p->desc.kind & MEMD_KIND_STORE)
		p->desc.store = &p->store;
	if (p->desc.kind & MEMD_KIND_VECTOR)
		p->desc.vector = &p->vector;
	if (p->desc.kind & MEMD_KIND_STRATEGY)
		p->desc.strategy = &p->strategy;
	if (p->desc.kind & MEMD_KIND_EMBEDDER)
		p->desc.embedder = &p->embedder;

	int32_t rc = copy_config_keys(p, d, err);
	if (rc)
		return rc;
	p->desc.config_keys = p->key_ptrs;
	return 0;
}

/* ---- open / close ----------------------------------------------------- */

static void plugin_free(loader_plugin *p)
{
	if (!p)
		return;
	if (p->dl)
		dlclose(p->dl);
	for (size_t i = 0; p->defaults && i < p->n_keys; i++)
		config_free(p->defaults[i]);
	free(p->defaults);
	free(p->keys);
	free(p->key_ptrs);
	free(p->path);
	free(p);
}

/* Open an already resolved path; phase_fd as in loader_plugin. */
static int32_t open_path(char *path, int phase_fd, loader_plugin **ret, memd_error *err)
{
	loader_plugin *p = calloc(1, sizeof(*p));
	int32_t rc;

	if (!p) {
		free(path);
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	}
	p->path = path;
	p->base = base_name(path);
	p->phase_fd = phase_fd;

	phase(p, PHASE_LOAD);
	dlerror();
	p->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!p->dl) {
		const char *e = dlerror();
		rc = memd_error_set(err, MEMD_EABI, 0, "%s: cannot load: %s", p->base,
				    e ? e : "unknown dlopen error");
		goto fail;
	}

	/* The entry point must be the plugin's own, not one a library it
	 * links happens to export. */
	void *sym = dlsym(p->dl, MEMD_PLUGIN_ENTRY_SYMBOL);
	struct link_map *own = NULL, *where = NULL;
	Dl_info info;
	if (sym && (dlinfo(p->dl, RTLD_DI_LINKMAP, &own) != 0 ||
		    !dladdr1(sym, &info, (void **)&where, RTLD_DL_LINKMAP) || where != own))
		sym = NULL;
	if (!sym) {
		rc = memd_error_set(err, MEMD_EABI, 0, "%s: no %s (not a memd plugin?)", p->base,
				    MEMD_PLUGIN_ENTRY_SYMBOL);
		goto fail;
	}
	memd_plugin_entry_fn entry;
	memcpy(&entry, &sym, sizeof(entry));
	phase(p, PHASE_ENTRY);
	const memd_plugin *d = entry();
	phase(p, PHASE_VALIDATE);
	rc = validate(p, d, err);
	if (rc)
		goto fail;
	*ret = p;
	return 0;
fail:
	plugin_free(p);
	return rc;
}

int32_t loader_open(const char *name_or_path, const char *const *search, loader_plugin **ret,
		    memd_error *err)
{
	char *path = NULL;
	int32_t rc;

	if (!ret)
		return memd_error_set(err, MEMD_EINVAL, 0, "loader_open: no result pointer");
	rc = resolve(name_or_path, search, &path, err);
	if (rc)
		return rc;
	return open_path(path, -1, ret, err);
}

void loader_close(loader_plugin *p)
{
	if (!p)
		return;
	if (p->n_instances) {
		/* Never unload code that is still in use: the last instance's
		 * destroy finishes the close. */
		p->close_pending = 1;
		return;
	}
	plugin_free(p);
}

const memd_plugin *loader_descriptor(const loader_plugin *p)
{
	return &p->desc;
}

const memd_store_ops *loader_store_ops(const loader_plugin *p)
{
	return p->desc.store;
}

const memd_strategy_ops *loader_strategy_ops(const loader_plugin *p)
{
	return p->desc.strategy;
}

const memd_vector_ops *loader_vector_ops(const loader_plugin *p)
{
	return p->desc.vector;
}

const memd_embedder_ops *loader_embedder_ops(const loader_plugin *p)
{
	return p->desc.embedder;
}

const char *loader_path(const loader_plugin *p)
{
	return p->path;
}

uint32_t loader_descriptor_size(const loader_plugin *p)
{
	return p->desc_size;
}

/* "session store", "strategy and embedder", ... for the bits of kind. */
static void kind_words(uint32_t kind, char *buf, size_t size)
{
	size_t used = 0;
	size_t n = 0, total = 0;
	buf[0] = '\0';
	for (size_t k = 0; k < N_KINDS; k++)
		total += (kind & kinds[k].bit) != 0;
	for (size_t k = 0; k < N_KINDS && used < size; k++) {
		if (!(kind & kinds[k].bit))
			continue;
		const char *sep = n == 0 ? "" : (n + 1 == total ? " and " : ", ");
		int w = snprintf(buf + used, size - used, "%s%s", sep, kinds[k].noun);
		if (w < 0)
			break;
		used += (size_t)w;
		n++;
	}
}

static const char *kind_article(uint32_t kind)
{
	for (size_t k = 0; k < N_KINDS; k++)
		if (kind & kinds[k].bit)
			return kinds[k].article;
	return "a";
}

int32_t loader_require_kind(const loader_plugin *p, uint32_t kind, const char *slot,
			    memd_error *err)
{
	char have[MEMD_ERROR_MSG_MAX / 2], want[MEMD_ERROR_MSG_MAX / 2];

	if ((p->desc.kind & kind) == kind)
		return 0;
	kind_words(p->desc.kind, have, sizeof(have));
	kind_words(kind, want, sizeof(want));
	return memd_error_set(err, MEMD_EABI, 0, "%s: is %s %s plugin, but %s needs %s %s",
			      p->base, kind_article(p->desc.kind), have, slot ? slot : "this slot",
			      kind_article(kind), want);
}

/* ---- the memd_host table ---------------------------------------------- */

static loader_instance *inst_of(const memd_host *h)
{
	return (loader_instance *)h->host_data;
}

__attribute__((format(printf, 3, 4)))
static void host_log(const memd_host *h, int32_t level, const char *fmt, ...)
{
	loader_instance *i = inst_of(h);
	va_list ap;
	va_start(ap, fmt);
	hostsvc_logv(i->svc, level, i->name, fmt, ap);
	va_end(ap);
}

static int64_t clock_us(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (int64_t)ts.tv_sec * LOADER_US_PER_S + ts.tv_nsec / LOADER_NS_PER_US;
}

static int64_t host_now_us(const memd_host *h)
{
	(void)h;
	return clock_us(CLOCK_REALTIME);
}

static int64_t host_monotonic_us(const memd_host *h)
{
	(void)h;
	return clock_us(CLOCK_MONOTONIC);
}

/* Find key's value for an accessor of type: the node's value (ret_node),
 * or else the default (ret_node = the parsed default, or ret_text = the
 * raw text for STRING keys). MEMD_ENOTFOUND if the key is undeclared or
 * has neither; MEMD_EINVAL if the key is declared with another type. */
static int32_t lookup(const memd_host *h, const char *key, uint32_t type,
		      const config_node **ret_node, const char **ret_text)
{
	const loader_instance *i;
	const loader_plugin *p;
	const config_node *v;

	if (!h || !key)
		return MEMD_EINVAL;
	i = inst_of(h);
	p = i->plugin;
	for (size_t k = 0; k < p->n_keys; k++) {
		if (strcmp(p->keys[k].name, key) != 0)
			continue;
		if (p->keys[k].type != type)
			return MEMD_EINVAL;
		if (i->skip_key && strcmp(key, i->skip_key) == 0)
			return MEMD_ENOTFOUND;
		v = config_map_get(i->node, key);
		if (v && config_node_type(v) != CONFIG_NULL) {
			*ret_node = v;
			*ret_text = NULL;
			return 0;
		}
		if (!p->keys[k].default_value)
			return MEMD_ENOTFOUND;
		*ret_node = p->defaults[k];
		*ret_text = p->defaults[k] ? NULL : p->keys[k].default_value;
		return 0;
	}
	return MEMD_ENOTFOUND;
}

static int32_t host_config_string(const memd_host *h, const char *key, const char **ret)
{
	const config_node *n = NULL;
	const char *text = NULL;
	int32_t rc = lookup(h, key, MEMD_CONFIG_STRING, &n, &text);
	if (rc)
		return rc;
	if (!text)
		text = config_scalar(n);
	if (!text || !ret)
		return MEMD_EINVAL;
	*ret = text;
	return 0;
}

static int32_t host_config_int(const memd_host *h, const char *key, int64_t *ret)
{
	const config_node *n = NULL;
	const char *text = NULL;
	int64_t v;
	int32_t rc = lookup(h, key, MEMD_CONFIG_INT, &n, &text);
	if (rc)
		return rc;
	if (!ret || config_as_int(n, &v) != 0)
		return MEMD_EINVAL;
	*ret = v;
	return 0;
}

static int32_t host_config_double(const memd_host *h, const char *key, double *ret)
{
	const config_node *n = NULL;
	const char *text = NULL;
	double v;
	int32_t rc = lookup(h, key, MEMD_CONFIG_DOUBLE, &n, &text);
	if (rc)
		return rc;
	if (!ret || config_as_double(n, &v) != 0)
		return MEMD_EINVAL;
	*ret = v;
	return 0;
}

static int32_t host_config_bool(const memd_host *h, const char *key, int32_t *ret)
{
	const config_node *n = NULL;
	const char *text = NULL;
	int32_t v;
	int32_t rc = lookup(h, key, MEMD_CONFIG_BOOL, &n, &text);
	if (rc)
		return rc;
	if (!ret || config_as_bool(n, &v) != 0)
		return MEMD_EINVAL;
	*ret = v;
	return 0;
}

static int32_t host_config_json(const memd_host *h, const char *key, const char **ret)
{
	const config_node *n = NULL;
	const char *text = NULL;
	loader_instance *i;
	json_cache *c;
	int32_t rc = lookup(h, key, MEMD_CONFIG_JSON, &n, &text);
	if (rc)
		return rc;
	if (!ret)
		return MEMD_EINVAL;
	i = inst_of(h);
	pthread_mutex_lock(&i->lock);
	for (c = i->cache; c; c = c->next)
		if (strcmp(c->key, key) == 0)
			break;
	if (!c) {
		c = calloc(1, sizeof(*c));
		if (c) {
			c->key = strdup(key);
			c->json = config_to_json(n);
			if (!c->key || !c->json) {
				free(c->key);
				free(c->json);
				free(c);
				c = NULL;
			} else {
				c->next = i->cache;
				i->cache = c;
			}
		}
	}
	pthread_mutex_unlock(&i->lock);
	if (!c)
		return MEMD_ENOMEM;
	*ret = c->json;
	return 0;
}

static int32_t host_count_tokens(const memd_host *h, const char *text, size_t len,
				 int64_t *ret_tokens)
{
	if (!h || !ret_tokens)
		return MEMD_EINVAL;
	return hostsvc_count_tokens(inst_of(h)->svc, text, len, ret_tokens);
}

static int32_t host_summarize(const memd_host *h, const memd_call *call,
			      const char *previous_summary, const memd_event *const *events,
			      uint32_t n_events, int64_t target_tokens, const memd_text_sink *out,
			      memd_error *err)
{
	return hostsvc_summarize(inst_of(h)->svc, call, previous_summary, events, n_events,
				 target_tokens, out, err);
}

static int32_t host_uuid_v7(const memd_host *h, char buf[37])
{
	(void)h;
	if (!buf)
		return MEMD_EINVAL;
	return uuid_v7(buf);
}

/* ---- instances -------------------------------------------------------- */

#define LOADER_MORE_FMT " (+%zu more)"

/* Join the problems into err->msg, as many as fit, the first one first. */
static int32_t config_problems(const config_diag *d, memd_error *err)
{
	char msg[MEMD_ERROR_MSG_MAX];
	size_t used = 0, shown = 0;
	char more[32];

	msg[0] = '\0';
	for (size_t k = 0; k < d->n; k++) {
		const char *sep = k ? "; " : "";
		size_t need = strlen(sep) + strlen(d->lines[k]);
		snprintf(more, sizeof(more), LOADER_MORE_FMT, d->n - k - 1);
		/* Always show the first problem (truncated if need be). */
		if (k > 0 && used + need + (k + 1 < d->n ? strlen(more) : 0) >= sizeof(msg))
			break;
		used += (size_t)snprintf(msg + used, sizeof(msg) - used, "%s%s", sep, d->lines[k]);
		if (used >= sizeof(msg))
			used = sizeof(msg) - 1;
		shown++;
	}
	if (shown < d->n && used < sizeof(msg))
		snprintf(msg + used, sizeof(msg) - used, LOADER_MORE_FMT, d->n - shown);
	return memd_error_set(err, MEMD_EINVAL, 0, "%s", msg);
}

/* Log, at debug level, what the instance was created from; values of
 * SECRET keys are never shown. */
static void log_config(const loader_instance *i)
{
	const loader_plugin *p = i->plugin;
	char line[MEMD_ERROR_MSG_MAX * 2];
	size_t used = 0;

	line[0] = '\0';
	for (size_t k = 0; k < config_len(i->node) && used < sizeof(line); k++) {
		const char *key = config_map_key_at(i->node, k);
		const config_node *v = config_map_value_at(i->node, k);
		const char *shown = config_scalar(v) ? config_scalar(v) : "(structured)";
		if (i->skip_key && strcmp(key, i->skip_key) == 0)
			continue;
		for (size_t j = 0; j < p->n_keys; j++)
			if (strcmp(p->keys[j].name, key) == 0 && (p->keys[j].flags & MEMD_CONFIG_SECRET))
				shown = "(secret)";
		int n = snprintf(line + used, sizeof(line) - used, "%s%s=%s", used ? ", " : "", key,
				 shown);
		if (n < 0)
			break;
		used += (size_t)n;
	}
	hostsvc_log(i->svc, MEMD_LOG_DEBUG, i->name, "plugin %s %s from %s; config: %s",
		    p->desc.name, p->desc.version, p->path, used ? line : "(defaults)");
}

static void instance_free(loader_instance *i)
{
	json_cache *c, *next;

	if (!i)
		return;
	for (c = i->cache; c; c = next) {
		next = c->next;
		free(c->key);
		free(c->json);
		free(c);
	}
	pthread_mutex_destroy(&i->lock);
	config_free(i->own_node);
	free(i->skip_key);
	free(i->name);
	free(i);
}

int32_t loader_instance_create(loader_plugin *p, const char *name, const config_node *node,
			       const char *skip_key, struct hostsvc *svc,
			       loader_instance **ret, memd_error *err)
{
	loader_instance *i;
	config_diag d = {0};
	int32_t rc;

	if (!p || !name || !ret)
		return memd_error_set(err, MEMD_EINVAL, 0, "loader_instance_create: bad arguments");
	i = calloc(1, sizeof(*i));
	if (!i)
		return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
	pthread_mutex_init(&i->lock, NULL);
	i->plugin = p;
	i->svc = svc;
	i->name = strdup(name);
	i->skip_key = skip_key ? strdup(skip_key) : NULL;
	if (!i->name || (skip_key && !i->skip_key)) {
		rc = memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
		goto fail;
	}
	if (!node) {
		static const char empty[] = "{}";
		rc = config_parse_string(empty, sizeof(empty) - 1, name, &i->own_node, err);
		if (rc)
			goto fail;
		node = i->own_node;
	}
	i->node = node;

	if (config_check_plugin(node, name, skip_key, p->desc.config_keys, &d) > 0 || d.n > 0) {
		rc = config_problems(&d, err);
		goto fail;
	}

	i->host = (memd_host){
		.struct_size = sizeof(memd_host),
		.abi_major = MEMD_ABI_MAJOR,
		.abi_minor = MEMD_ABI_MINOR,
		.host_data = i,
		.log = host_log,
		.alloc = malloc,
		.realloc = realloc,
		.free = free,
		.now_us = host_now_us,
		.monotonic_us = host_monotonic_us,
		.config_string = host_config_string,
		.config_int = host_config_int,
		.config_double = host_config_double,
		.config_bool = host_config_bool,
		.config_json = host_config_json,
		.count_tokens = host_count_tokens,
		.summarize = svc ? host_summarize : NULL,
		.uuid_v7 = host_uuid_v7,
	};
	log_config(i);

	memd_error perr = {.struct_size = sizeof(perr)};
	void *handle = NULL;
	phase(p, PHASE_INIT);
	rc = p->desc.init(&i->host, &handle, &perr);
	if (rc != 0) {
		if (rc > 0)
			rc = MEMD_EINTERNAL;
		perr.msg[sizeof(perr.msg) - 1] = '\0';
		if (perr.msg[0])
			memd_error_set(err, rc, perr.flags & MEMD_ERROR_RETRYABLE, "%s: %s", name,
				       perr.msg);
		else
			memd_error_set(err, rc, perr.flags & MEMD_ERROR_RETRYABLE,
				       "%s: init failed (error %d)", name, rc);
		goto fail;
	}
	i->handle = handle;
	p->n_instances++;
	config_diag_clear(&d);
	*ret = i;
	return 0;
fail:
	config_diag_clear(&d);
	instance_free(i);
	return rc;
}

void loader_instance_destroy(loader_instance *i)
{
	loader_plugin *p;

	if (!i)
		return;
	p = i->plugin;
	phase(p, PHASE_FINI);
	p->desc.fini(i->handle);
	instance_free(i);
	p->n_instances--;
	if (p->n_instances == 0 && p->close_pending)
		plugin_free(p);
}

void *loader_instance_handle(const loader_instance *i)
{
	return i->handle;
}

loader_plugin *loader_instance_plugin(const loader_instance *i)
{
	return i->plugin;
}

const char *loader_instance_name(const loader_instance *i)
{
	return i->name;
}

int loader_instance_serialized(const loader_instance *i)
{
	return (i->plugin->desc.flags & MEMD_PLUGIN_THREADSAFE) == 0;
}

const memd_host *loader_instance_host(const loader_instance *i)
{
	return &i->host;
}

/* ---- the report ------------------------------------------------------- */

static void report_ops(FILE *f, const char *word, const void *table, const op_info *ops,
		       size_t n)
{
	fprintf(f, "  %s ops:", word);
	for (size_t i = 0; i < n; i++)
		if (op_present(table, ops[i].offset))
			fprintf(f, " %s", ops[i].name);
	fputc('\n', f);
}

/* The human description of p that loader_check_isolated() returns. */
static void report_plugin(FILE *f, const loader_plugin *p)
{
	const memd_plugin *d = &p->desc;
	char words[MEMD_ERROR_MSG_MAX];

	kind_words(d->kind, words, sizeof(words));
	fprintf(f, "%s: ok\n", p->base);
	fprintf(f, "  file:        %s\n", p->path);
	fprintf(f, "  name:        %s\n", d->name);
	fprintf(f, "  version:     %s\n", d->version);
	fprintf(f, "  description: %s\n", d->description);
	fprintf(f, "  kinds:       %s\n", words);
	fprintf(f, "  abi:         needs %u.%u, host is %d.%d (descriptor %u bytes)\n", d->abi_major,
		d->abi_minor, MEMD_ABI_MAJOR, MEMD_ABI_MINOR, p->desc_size);
	fprintf(f, "  threads:     %s\n",
		(d->flags & MEMD_PLUGIN_THREADSAFE) ? "thread-safe"
						    : "not thread-safe (calls are serialized)");
	if (d->store)
		report_ops(f, "store", d->store, store_ops, COUNT(store_ops));
	if (d->vector)
		report_ops(f, "vector", d->vector, vector_ops, COUNT(vector_ops));
	if (d->strategy)
		report_ops(f, "strategy", d->strategy, strategy_ops, COUNT(strategy_ops));
	if (d->embedder)
		report_ops(f, "embedder", d->embedder, embedder_ops, COUNT(embedder_ops));
	if (p->n_keys == 0)
		fprintf(f, "  config:      (no keys)\n");
	else
		fprintf(f, "  config:\n");
	for (size_t k = 0; k < p->n_keys; k++) {
		const memd_config_key *c = &p->keys[k];
		fprintf(f, "    %s: %s", c->name, config_type_word(c->type));
		if (c->flags & MEMD_CONFIG_REQUIRED)
			fprintf(f, ", required");
		if (c->flags & MEMD_CONFIG_SECRET)
			fprintf(f, ", secret");
		if (c->default_value)
			fprintf(f, ", default %s",
				(c->flags & MEMD_CONFIG_SECRET) ? "(hidden)" : c->default_value);
		for (size_t j = 0; c->choices && c->choices[j]; j++)
			fprintf(f, "%s%s", j ? "|" : ", one of ", c->choices[j]);
		if (*c->help)
			fprintf(f, " - %s", c->help);
		fputc('\n', f);
	}
}

/* ---- loader_check_isolated -------------------------------------------- */

static void write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	while (len) {
		ssize_t n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		p += n;
		len -= (size_t)n;
	}
}

static void child_fail(int fd, const memd_error *e, int32_t rc)
{
	char rec = REC_FAIL;
	int32_t code = rc;
	uint32_t flags = e->flags;
	write_all(fd, &rec, 1);
	write_all(fd, &code, sizeof(code));
	write_all(fd, &flags, sizeof(flags));
	write_all(fd, e->msg, strnlen(e->msg, sizeof(e->msg)));
}

/* In the child: open, validate, report, init with an empty config, fini.
 * Returns the exit status. */
static int check_child(int fd, char *path)
{
	memd_error e = {.struct_size = sizeof(e)};
	loader_plugin *p = NULL;
	loader_instance *inst = NULL;
	char *report = NULL;
	size_t report_len = 0;
	FILE *f;
	int32_t rc;

	rc = open_path(path, fd, &p, &e);
	if (rc) {
		child_fail(fd, &e, rc);
		return LOADER_CHECK_EXIT_REFUSED;
	}
	phase(p, PHASE_REPORT);
	f = open_memstream(&report, &report_len);
	if (!f) {
		memd_error_set(&e, MEMD_ENOMEM, 0, "out of memory");
		child_fail(fd, &e, MEMD_ENOMEM);
		loader_close(p);
		return LOADER_CHECK_EXIT_REFUSED;
	}
	report_plugin(f, p);

	/* Keys that are required and have no default cannot be filled from
	 * an empty config: then init is not tried. */
	int need = 0;
	for (size_t k = 0; k < p->n_keys; k++)
		if (p->keys[k].flags & MEMD_CONFIG_REQUIRED) {
			fprintf(f, need ? ", %s" : "  init:        not run: required keys %s",
				p->keys[k].name);
			need = 1;
		}
	if (need) {
		fputc('\n', f);
	} else {
		rc = loader_instance_create(p, p->desc.name, NULL, NULL, NULL, &inst, &e);
		if (rc && (rc == MEMD_EUNAVAIL || (e.flags & MEMD_ERROR_RETRYABLE))) {
			/* A server-backed plugin with an empty config reaches for a
			 * server that is not there: the plugin itself is sound. */
			fprintf(f, "  init:        not completed: backend unreachable with an empty config (%s)\n",
				e.msg);
			rc = 0;
		} else if (rc == MEMD_EINVAL) {
			/* It needs settings no single REQUIRED key expresses (one
			 * of dsn or host): it said so cleanly, which is what a
			 * sound plugin does. */
			fprintf(f, "  init:        not completed: needs configuration (%s)\n", e.msg);
			rc = 0;
		} else if (rc) {
			fclose(f);
			free(report);
			char msg[MEMD_ERROR_MSG_MAX];
			snprintf(msg, sizeof(msg), "%s", e.msg);
			memd_error_set(&e, rc, e.flags, "%s: init with an empty config failed: %s",
				       p->base, msg);
			child_fail(fd, &e, rc);
			loader_close(p);
			return LOADER_CHECK_EXIT_REFUSED;
		} else {
			loader_instance_destroy(inst);
			fprintf(f, "  init:        ok (init and fini with an empty config)\n");
		}
	}
	rc = fclose(f) == 0 ? 0 : MEMD_ENOMEM;
	/* Unloading runs the plugin's destructors: still a crash in the child
	 * only, reported as happening in fini. It comes before the report, so
	 * the report is the last thing the child sends. */
	phase(p, PHASE_FINI);
	loader_close(p);
	if (rc == 0) {
		char rec = REC_OK;
		write_all(fd, &rec, 1);
		write_all(fd, report, report_len);
	} else {
		memd_error_set(&e, MEMD_ENOMEM, 0, "out of memory");
		child_fail(fd, &e, MEMD_ENOMEM);
	}
	free(report);
	return rc == 0 ? 0 : LOADER_CHECK_EXIT_REFUSED;
}

static const char *signal_name(int sig, char *buf, size_t size)
{
	static const struct {
		int sig;
		const char *name;
	} names[] = {
		{SIGSEGV, "SIGSEGV"}, {SIGBUS, "SIGBUS"},   {SIGABRT, "SIGABRT"},
		{SIGFPE, "SIGFPE"},   {SIGILL, "SIGILL"},   {SIGKILL, "SIGKILL"},
		{SIGTERM, "SIGTERM"}, {SIGTRAP, "SIGTRAP"}, {SIGSYS, "SIGSYS"},
		{SIGPIPE, "SIGPIPE"}, {SIGXCPU, "SIGXCPU"}, {SIGINT, "SIGINT"},
	};
	for (size_t i = 0; i < COUNT(names); i++)
		if (names[i].sig == sig)
			return names[i].name;
	snprintf(buf, size, "signal %d", sig);
	return buf;
}

static const char *phase_words(char ph)
{
	switch (ph) {
	case PHASE_LOAD: return "while loading";
	case PHASE_ENTRY: return "in " MEMD_PLUGIN_ENTRY_SYMBOL;
	case PHASE_VALIDATE: return "while its descriptor was read";
	case PHASE_INIT: return "in init";
	case PHASE_FINI: return "in fini";
	case PHASE_REPORT: return "while its schema was read";
	}
	return "before loading";
}

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)st;
	(void)type;
	(void)ftw;
	remove(path);
	return 0;
}

static int64_t now_ms(void)
{
	return clock_us(CLOCK_MONOTONIC) / LOADER_US_PER_MS;
}

/* Read the child's records until EOF, its exit, or the deadline. Returns
 * 1 if the deadline passed. */
static int read_child(int fd, pid_t pid, int timeout_ms, char **buf, size_t *len, int *status,
		      int *reaped)
{
	int64_t deadline = now_ms() + timeout_ms;
	size_t cap = 0;
	int eof = 0;

	while (!eof) {
		int64_t left = deadline - now_ms();
		if (left <= 0)
			return !*reaped; /* after the exit, only the drain ran out */
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		int r = poll(&pfd, 1, (int)(left < LOADER_CHECK_POLL_MS ? left : LOADER_CHECK_POLL_MS));
		if (r < 0 && errno != EINTR)
			return 1;
		if (r > 0) {
			if (*len + LOADER_CHECK_READ_CHUNK > cap) {
				size_t ncap = cap ? cap * 2 : LOADER_CHECK_READ_CHUNK * 2;
				char *nb = realloc(*buf, ncap);
				if (!nb)
					return 1;
				*buf = nb;
				cap = ncap;
			}
			ssize_t n = read(fd, *buf + *len, cap - *len - 1);
			if (n < 0 && errno != EINTR && errno != EAGAIN)
				eof = 1;
			else if (n == 0)
				eof = 1;
			else if (n > 0)
				*len += (size_t)n;
			continue;
		}
		/* Nothing to read: a child that exited while something else
		 * (a grandchild) holds the pipe open is done too. */
		if (!*reaped && waitpid(pid, status, WNOHANG) == pid) {
			*reaped = 1;
			int fl = fcntl(fd, F_GETFL);
			fcntl(fd, F_SETFL, fl | O_NONBLOCK);
			/* Drain what is left, then stop. */
			deadline = now_ms() + LOADER_CHECK_POLL_MS;
		}
	}
	return 0;
}

int32_t loader_check_isolated(const char *name_or_path, const char *const *search,
			      char **ret_report, memd_error *err)
{
	return loader_check_isolated_timeout(name_or_path, search, LOADER_CHECK_TIMEOUT_MS,
					     ret_report, err);
}

int32_t loader_check_isolated_timeout(const char *name_or_path, const char *const *search,
				      int timeout_ms, char **ret_report, memd_error *err)
{
	char *path = NULL, *buf = NULL, *absolute = NULL;
	char workdir[] = "/tmp/memd-check-XXXXXX";
	const char *tmp = getenv("TMPDIR");
	char *work = NULL;
	size_t len = 0;
	int fds[2] = {-1, -1};
	int status = 0, reaped = 0, timed_out;
	char last_phase = 0;
	int32_t rc;
	pid_t pid;

	if (!ret_report || timeout_ms <= 0)
		return memd_error_set(err, MEMD_EINVAL, 0, "loader_check_isolated: bad arguments");
	rc = resolve(name_or_path, search, &path, err);
	if (rc)
		return rc;
	/* The child runs in a scratch directory (so a plugin that creates
	 * files relative to its working directory leaves nothing behind): make
	 * the path absolute first. */
	if (path[0] != '/') {
		char *cwd = getcwd(NULL, 0);
		if (!cwd || asprintf(&absolute, "%s/%s", cwd, path) < 0) {
			free(cwd);
			free(path);
			return memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
		}
		free(cwd);
		free(path);
		path = absolute;
	}
	if (tmp && *tmp && tmp[0] == '/') {
		if (asprintf(&work, "%s/memd-check-XXXXXX", tmp) < 0)
			work = NULL;
	}
	if (!work)
		work = strdup(workdir);
	if (!work || !mkdtemp(work)) {
		rc = memd_error_set(err, MEMD_EIO, 0, "%s: cannot create a scratch directory: %s",
				    base_name(path), strerror(errno));
		goto out;
	}
	if (pipe2(fds, O_CLOEXEC) != 0) {
		rc = memd_error_set(err, MEMD_EIO, 0, "%s: pipe: %s", base_name(path),
				    strerror(errno));
		goto out_dir;
	}
	pid = fork();
	if (pid < 0) {
		rc = memd_error_set(err, MEMD_EIO, 0, "%s: fork: %s", base_name(path),
				    strerror(errno));
		goto out_dir;
	}
	if (pid == 0) {
		close(fds[0]);
		if (chdir(work) != 0)
			_exit(LOADER_CHECK_EXIT_REFUSED);
		char *copy = strdup(path);
		if (!copy) {
			memd_error e = {.struct_size = sizeof(e)};
			memd_error_set(&e, MEMD_ENOMEM, 0, "out of memory");
			child_fail(fds[1], &e, MEMD_ENOMEM);
			_exit(LOADER_CHECK_EXIT_REFUSED);
		}
		_exit(check_child(fds[1], copy));
	}
	close(fds[1]);
	fds[1] = -1;

	timed_out = read_child(fds[0], pid, timeout_ms, &buf, &len, &status, &reaped);
	if (timed_out && !reaped)
		kill(pid, SIGKILL);
	if (!reaped)
		while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
			;

	/* Parse the records: phases, then at most one final record. */
	size_t at = 0;
	char final = 0;
	while (at < len) {
		char r = buf[at++];
		if (r == REC_PHASE && at < len) {
			last_phase = buf[at++];
			continue;
		}
		if (r == REC_OK || r == REC_FAIL)
			final = r;
		break;
	}
	const char *b = base_name(path);
	if (timed_out && !final) {
		rc = memd_error_set(err, MEMD_ETIMEDOUT, 0,
				    "%s: hung %s: no answer within %d ms (killed)", b,
				    phase_words(last_phase), timeout_ms);
	} else if (WIFSIGNALED(status)) {
		char tmpname[32];
		rc = memd_error_set(err, MEMD_EABI, 0, "%s: crashed %s (%s)", b,
				    phase_words(last_phase),
				    signal_name(WTERMSIG(status), tmpname, sizeof(tmpname)));
	} else if (final == REC_FAIL && len - at >= sizeof(int32_t) + sizeof(uint32_t)) {
		int32_t code;
		uint32_t flags;
		memcpy(&code, buf + at, sizeof(code));
		memcpy(&flags, buf + at + sizeof(code), sizeof(flags));
		at += sizeof(code) + sizeof(flags);
		if (code >= 0)
			code = MEMD_EINTERNAL;
		rc = memd_error_set(err, code, flags, "%.*s", (int)(len - at), buf + at);
	} else if (final == REC_OK && WIFEXITED(status)) {
		/* The report is complete once it was sent; the exit status
		 * after it is not the plugin's (a leak checker run over the
		 * forked child, say, reports the parent's inherited heap). */
		char *report = strndup(buf + at, len - at);
		if (!report) {
			rc = memd_error_set(err, MEMD_ENOMEM, 0, "out of memory");
		} else {
			*ret_report = report;
			rc = 0;
		}
	} else {
		rc = memd_error_set(err, MEMD_EABI, 0, "%s: exited with status %d %s without a report",
				    b, WIFEXITED(status) ? WEXITSTATUS(status) : -1,
				    phase_words(last_phase));
	}
out_dir:
	nftw(work, remove_entry, LOADER_NFTW_FDS, FTW_DEPTH | FTW_PHYS);
out:
	if (fds[0] >= 0)
		close(fds[0]);
	if (fds[1] >= 0)
		close(fds[1]);
	free(buf);
	free(work);
	free(path);
	return rc;
}
