/* SPDX-License-Identifier: MIT */
/*
 * cli: the memd command line. Operator commands (version, plugins, config
 * check) and scripting commands over the libmemd facade. Results are JSON
 * on stdout; errors one line on stderr; exit codes in exit_codes.h.
 */
#include "cli.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <memd/memd.h>

#include "config/config.h"
#include "exit_codes.h"
#include "http/server.h"
#include "mcp/mcp.h"
#include "plugins/loader.h"
#include "service/service.h"

#define CLI_STDIN_MAX (256u * 1024u * 1024u)
#define CLI_EXE_PLUGIN_DIR "/../plugins"

/* The members of a lane source, each an option: "chat_type" is
 * --chat-type. */
static const char *const lane_source_members[] = {
	"platform", "chat_type", "chat_id", "chat_name", "thread_id", "user_id", "user_id_alt",
	"user_name",
};
#define LANE_SOURCE_MEMBERS (sizeof(lane_source_members) / sizeof(lane_source_members[0]))

/* Per-command options, parsed in the first (m == NULL) pass. */
typedef struct cli_opts {
	const char *id, *title, *metadata, *cursor, *type;
	uint32_t events, limit;
	int64_t after_seq, version;
	int has_events, archived;
	const char *mode, *session; /* search */
	uint32_t k;
	/* lanes: a source (--source JSON, or its members one by one), list
	 * filters, a turn's lease and end, an inbox item */
	const char *source, *src[LANE_SOURCE_MEMBERS];
	const char *suspended, *resume_pending, *outcome, *reason, *usage, *text;
	int in_turn;
	int64_t active_within, lease_ms;
	/* transcripts: a rewind's extent, a version check, a role filter,
	 * a session list's order */
	const char *turns, *to_seq, *expected_version, *roles, *order;
	/* memories: content, list filters (also --kind, --session, --text,
	 * --reason, --version above) */
	const char *kind, *topics, *entities, *topic, *entity, *ttl_seconds;
	/* A2A tasks: list filters (also --limit, --cursor above) and how
	 * much history a get shows (-1 = all) */
	const char *context_id, *state, *user;
	int64_t history_length;
	/* checkpoints: a namespace, the resumable listing's filter (also
	 * --limit, --cursor and --metadata above) */
	const char *ns, *resume, *before;
	int full;
	/* a write that answers its context (--return-context [--format openai]) */
	int return_context;
	uint32_t context_flags;
} cli_opts;

typedef struct cli {
	const char *config;
	cli_opts opts;
	int verbose;
	char exe_plugins[PATH_MAX];
	const char *extra_path[2];
	int argc;
	char **argv;
} cli;

static const char cli_usage_text[] =
	"usage: memd [--config FILE] [-v] COMMAND ...\n"
	"\n"
	"operators:\n"
	"  version                          print memd's version and plugin ABI\n"
	"  config check [FILE]              check a config as serve does, every problem\n"
	"                                   (default: --config, else zero-config)\n"
	"  plugins list                     the plugins the config names: file, kinds,\n"
	"                                   version, ABI, the slots using each, and the\n"
	"                                   search path; loads them without init (opens\n"
	"                                   no store, creates nothing)\n"
	"  plugins check NAME|FILE          validate a plugin in a child process (a NAME\n"
	"                                   is searched as the config's plugins are)\n"
	"  index rebuild [--app A --user U] rebuild the search indexes (of one user, or\n"
	"                                   all); a progress bar when stderr is a TTY\n"
	"  serve [--config FILE]            serve the REST API (api/openapi.yaml) until\n"
	"                                   SIGTERM/SIGINT; JSON log lines on stderr\n"
	"  mcp --app A --user U             serve the memory tools of user U of app A to\n"
	"                                   an MCP client over stdio (newline-delimited\n"
	"                                   JSON-RPC on stdin and stdout; logs on stderr)\n"
	"\n"
	"scripting (results are JSON on stdout):\n"
	"  session create APP USER [--id ID] [--title T] [--metadata JSON]\n"
	"  session get APP USER SID [--events N] [--after-seq N]\n"
	"  session list APP USER [--limit N] [--cursor C] [--archived]\n"
	"                                   [--order created|activity]\n"
	"                                   [--active-within SECONDS]\n"
	"  session delete APP USER SID\n"
	"  events append APP USER SID       body on stdin: {\"events\": [...], ...} or [...]\n"
	"                                   [--return-context [--format openai]]: with\n"
	"                                   the context right after the append\n"
	"  events list APP USER SID [--after-seq N] [--limit N]\n"
	"  context APP USER SID\n"
	"  state get APP USER SID\n"
	"  state set APP USER SID KEY=VALUE...   VALUE is JSON, else a string;\n"
	"                                   KEY= (empty) deletes\n"
	"  artifact put APP USER SID NAME [--type MIME] < data\n"
	"  artifact get APP USER SID NAME [--version N] > data\n"
	"  artifact list APP USER SID\n"
	"  user delete APP USER\n"
	"  search APP USER QUERY [--k N] [--mode keyword|vector|hybrid] [--session SID]\n"
	"\n"
	"transcripts (nothing is deleted: events are hidden by an operation that\n"
	"can be undone; --expected-version N refuses a session at another version):\n"
	"  session rewind APP USER SID --turns N | --to-seq N   hide the last N user\n"
	"                                   turns and what followed (a chat's undo)\n"
	"  session clear APP USER SID       hide every event; state and artifacts stay\n"
	"  session undo APP USER SID OP     reverse operation OP (rewind, rewrite, clear)\n"
	"  session operations APP USER SID  the session's operations, newest first\n"
	"  messages get APP USER SID [--roles user,assistant,...]   the transcript as\n"
	"                                   OpenAI chat-completions messages\n"
	"  messages append APP USER SID     OpenAI messages on stdin: {\"messages\":\n"
	"                                   [...]} or [...]; --return-context [--format\n"
	"                                   openai] as events append's\n"
	"  messages put APP USER SID        replace the whole transcript with the\n"
	"                                   messages on stdin (creates the session)\n"
	"  state history APP USER SID [--limit N] [--cursor C]   state changes, oldest\n"
	"                                   first\n"
	"\n"
	"lanes of a chat gateway (SOURCE: --source JSON, or --platform P\n"
	"[--chat-type dm|group|channel|thread] [--chat-id ID] [--chat-name N]\n"
	"[--thread-id ID] [--user-id ID] [--user-id-alt ID] [--user-name N]):\n"
	"  lane resolve APP SOURCE          the lane key and user of a message source\n"
	"  lane open APP SOURCE             resolve, then open (get-or-create) that lane\n"
	"  lane open APP USER KEY [SOURCE]  open a lane: its current session, created\n"
	"                                   or reset as the lane's policy says; both\n"
	"                                   opens take --return-context [--format openai]\n"
	"  lane get APP USER KEY\n"
	"  lane list APP [USER] [--limit N] [--cursor C] [--suspended true|false]\n"
	"                                   [--resume-pending true|false]\n"
	"                                   [--active-within SECONDS] [--in-turn]\n"
	"  lane reset APP USER KEY [SOURCE] a new session (a user's /new)\n"
	"  lane switch APP USER KEY SID     point the lane at another session of the\n"
	"                                   user (a user's /resume)\n"
	"  lane suspend APP USER KEY        its next open starts afresh (a user's /stop)\n"
	"  lane delete APP USER KEY         forget the lane and its inbox\n"
	"  lane sweep                       one pass of the lane watcher (expired\n"
	"                                   leases, finalize, prune, retention)\n"
	"  turn begin APP USER KEY [--lease-ms N]\n"
	"  turn heartbeat APP USER KEY TURN [--lease-ms N]\n"
	"  turn end APP USER KEY TURN --outcome ok|failed|interrupted [--reason R]\n"
	"                                   [--usage JSON]\n"
	"  inbox put APP USER KEY --mode interrupt|queue [--text T]   the event on\n"
	"                                   stdin (JSON), or a user message --text\n"
	"  inbox take APP USER KEY TURN     the turn holder takes the next item\n"
	"  inbox list APP USER KEY\n"
	"\n"
	"long-term memories of a user (durable facts, apart from any session):\n"
	"  memory add APP USER TEXT [--kind fact|preference|instruction|episode]\n"
	"                                   [--topics a,b] [--entities x,y] [--session SID]\n"
	"                                   [--ttl-seconds N] [--id ID]\n"
	"  memory list APP USER [--kind K] [--topic T] [--entity E] [--session SID]\n"
	"                                   [--limit N] [--cursor C]   newest first\n"
	"  memory get APP USER ID\n"
	"  memory update APP USER ID [--text T] [--kind K] [--topics a,b] [--entities x,y]\n"
	"                                   [--ttl-seconds N] [--expected-version N]\n"
	"                                   [--reason R]\n"
	"  memory delete APP USER ID [--expected-version N]   its history stays\n"
	"  memory history APP USER ID       every change, oldest first\n"
	"  memory extract APP USER SID      extract the session's unread events into\n"
	"                                   memories now (memory.extract config)\n"
	"  memory sweep                     one pass of the memory worker (idle\n"
	"                                   sessions, expired memories)\n"
	"\n"
	"A2A tasks of an app (written by agent servers over the REST API):\n"
	"  task get APP ID [--history-length N]   N most recent history messages\n"
	"  task list APP [--context-id C] [--state S] [--user U] [--limit N]\n"
	"                                   [--cursor C]   most recently saved first\n"
	"run checkpoints (an agent runtime's saved runs, one thread a session):\n"
	"  checkpoint list APP USER [SID] [--ns NS] [--before ID] [--metadata JSON]\n"
	"                                   [--full] [--limit N] [--cursor C]   newest\n"
	"                                   first; every namespace without --ns\n"
	"  checkpoint get APP USER SID [ID] [--ns NS]   the latest without ID, with\n"
	"                                   its payload and pending writes\n"
	"  checkpoint delete APP USER SID [--ns NS]   every namespace without --ns\n"
	"  checkpoint resumable APP [--resume automatic|approval] [--limit N]\n"
	"                                   [--cursor C]   the runs to resume\n"
	"  checkpoint sweep                 delete expired checkpoints now\n"
	"\n"
	"The config is --config, else $MEMD_CONFIG, else zero-config (SQLite in\n"
	"./data/memd.db). Plugins are searched in $MEMD_PLUGIN_PATH, next to the\n"
	"memd binary (../plugins), config's plugins.path, then the install dir.\n"
	"Global options (--config, -v) may come anywhere on the line.\n";

static void cli_usage(FILE *f)
{
	fputs(cli_usage_text, f);
	fputs("\nexit codes:\n", f);
#define CLI_EXIT_LINE(name, status, what) fprintf(f, "  %d  %s\n", status, what);
	MEMD_EXIT_CODES(CLI_EXIT_LINE)
#undef CLI_EXIT_LINE
}

/* The usage lines of one command group (`memd session` alone): the lines
 * of cli_usage_text that start with it, and their continuation lines. */
static void group_usage(FILE *f, const char *group)
{
	size_t glen = strlen(group);
	int in_group = 0;

	fprintf(f, "usage:\n");
	for (const char *line = cli_usage_text; *line;) {
		const char *end = strchr(line, '\n');
		size_t len = end ? (size_t)(end - line) + 1 : strlen(line);
		if (strncmp(line, "  ", 2) == 0 && line[2] != ' ')
			in_group = strncmp(line + 2, group, glen) == 0 && line[2 + glen] == ' ';
		else if (strncmp(line, "  ", 2) != 0)
			in_group = 0;
		if (in_group && line[2] != ' ')
			fprintf(f, "  memd %.*s", (int)(len - 2), line + 2);
		else if (in_group)
			fprintf(f, "     %.*s", (int)len, line);
		line += len;
	}
}

static int fail(const memd_error *err)
{
	fprintf(stderr, "memd: error: %s%s\n", err->msg,
		err->flags & MEMD_ERROR_RETRYABLE ? " (retry later)" : "");
	return exit_for_error(err->code);
}

/* Say that memory ran out; returns EXIT_FAIL. */
static int out_of_memory(void)
{
	fprintf(stderr, "memd: out of memory\n");
	return EXIT_FAIL;
}

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "memd: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n(see memd --help)\n");
	return EXIT_USAGE;
}

static void log_stderr(void *ud, int32_t level, const char *component, const char *line)
{
	static const char *const names[] = { "error", "warn", "info", "debug" };
	(void)ud;
	fprintf(stderr, "memd: %s: %s: %s\n",
		level >= 0 && level <= MEMD_LOG_DEBUG ? names[level] : "log", component, line);
}

/* Print a JSON result pretty, then free it. */
static int print_json(char *json)
{
	json_t *v = json_loads(json, JSON_DECODE_ANY, NULL);
	if (v) {
		json_dumpf(v, stdout, JSON_INDENT(2) | JSON_ENCODE_ANY);
		json_decref(v);
	} else {
		fputs(json, stdout);
	}
	fputc('\n', stdout);
	memd_free(json);
	return EXIT_OK;
}

static char *read_all(FILE *f, size_t *ret_len)
{
	size_t cap = 4096, n = 0;
	char *buf = malloc(cap + 1);

	while (buf) {
		size_t got;
		if (n == cap) {
			char *nb;
			if (cap >= CLI_STDIN_MAX) {
				free(buf);
				return NULL;
			}
			cap *= 2;
			nb = realloc(buf, cap + 1);
			if (!nb) {
				free(buf);
				return NULL;
			}
			buf = nb;
		}
		got = fread(buf + n, 1, cap - n, f);
		n += got;
		if (got == 0)
			break;
	}
	if (!buf || ferror(f)) {
		free(buf);
		return NULL;
	}
	buf[n] = '\0';
	*ret_len = n;
	return buf;
}

/* Option value lookup: "--name VALUE" among argv[from..]. Marks consumed
 * arguments by setting them to NULL. Returns NULL if absent. */
static const char *take_opt(cli *c, int from, const char *name, int *ret_missing)
{
	for (int i = from; i < c->argc; i++) {
		if (c->argv[i] && strcmp(c->argv[i], name) == 0) {
			if (i + 1 >= c->argc || !c->argv[i + 1]) {
				*ret_missing = 1;
				return NULL;
			}
			const char *v = c->argv[i + 1];
			c->argv[i] = c->argv[i + 1] = NULL;
			return v;
		}
	}
	return NULL;
}

static int take_flag(cli *c, int from, const char *name)
{
	for (int i = from; i < c->argc; i++)
		if (c->argv[i] && strcmp(c->argv[i], name) == 0) {
			c->argv[i] = NULL;
			return 1;
		}
	return 0;
}

/* Collect the positional arguments from argv[from..] into pos (at most
 * max). Returns how many, or -1 if an unknown option is left. */
static int positionals(cli *c, int from, const char **pos, int max)
{
	int n = 0;
	for (int i = from; i < c->argc; i++) {
		if (!c->argv[i])
			continue;
		if (c->argv[i][0] == '-' && c->argv[i][1] == '-') {
			usage_error("unknown option %s", c->argv[i]);
			return -1;
		}
		if (n == max) {
			usage_error("unexpected argument '%s'", c->argv[i]);
			return -1;
		}
		pos[n++] = c->argv[i];
	}
	return n;
}

static int parse_u32(const char *s, const char *what, uint32_t *ret)
{
	char *end;
	unsigned long long v;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *end || s[0] == '-' || v > UINT32_MAX)
		return usage_error("%s: not a number", what);
	*ret = (uint32_t)v;
	return EXIT_OK;
}

static int parse_i64(const char *s, const char *what, int64_t *ret)
{
	char *end;
	long long v;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || end == s || *end || v < 0)
		return usage_error("%s: not a non-negative number", what);
	*ret = v;
	return EXIT_OK;
}

/* take_opt of a number option: *ret gets its value when it is given and
 * is a number (parse_u32, parse_i64). Returns EXIT_USAGE (said) for a
 * value that is not one, else EXIT_OK (an absent option leaves *ret;
 * one without its value sets *ret_missing). */
static int take_u32(cli *c, int from, const char *name, int *ret_missing, uint32_t *ret)
{
	const char *v = take_opt(c, from, name, ret_missing);
	return v ? parse_u32(v, name, ret) : EXIT_OK;
}

static int take_i64(cli *c, int from, const char *name, int *ret_missing, int64_t *ret)
{
	const char *v = take_opt(c, from, name, ret_missing);
	return v ? parse_i64(v, name, ret) : EXIT_OK;
}

/* memd_open with the command line's config, plugin path and log level. */
static int32_t try_open(cli *c, uint32_t flags, memd **ret, memd_error *err)
{
	memd_options o = {
		.struct_size = sizeof(o),
		.flags = flags,
		.config_path = c->config,
		.plugin_path = c->extra_path[0] ? c->extra_path : NULL,
		.log = log_stderr,
		.log_level = c->verbose > 1 ? MEMD_LOG_DEBUG : c->verbose ? MEMD_LOG_INFO : MEMD_LOG_WARN,
	};
	return memd_open(&o, ret, err);
}

static int open_failed(const memd_error *err)
{
	fprintf(stderr, "memd: cannot start: %s\n", err->msg);
	return exit_for_start(err->code);
}

/* Whether memd_open failed on a store that another process has locked
 * (filevec: "... is locked by process N ..."): most likely the vector
 * store of a running memd serve. */
static int is_locked(const memd_error *err)
{
	return err->code == MEMD_EUNAVAIL && strstr(err->msg, " is locked by ") != NULL;
}

/* Open memd for a command; flags MEMD_OPEN_*. Prints why it failed. */
static int open_memd(cli *c, uint32_t flags, memd **ret)
{
	memd_error err = { 0 };

	if (try_open(c, flags, ret, &err) < 0)
		return open_failed(&err);
	return EXIT_OK;
}

/* ---- operator commands ---------------------------------------------------- */

/* Print a config_diag's lines and a summary; the exit code for r. */
static int report_problems(const char *path, int32_t r, config_diag *d)
{
	size_t problems = d->n;

	for (size_t i = 0; i < d->n; i++)
		fprintf(stderr, "%s\n", d->lines[i]);
	config_diag_clear(d);
	if (r == MEMD_ENOMEM)
		return out_of_memory();
	fprintf(stderr, "%s: %zu problem%s\n", path ? path : "zero-config", problems,
		problems == 1 ? "" : "s");
	return EXIT_CONFIG;
}

static int cmd_config_check(cli *c, int from)
{
	const char *pos[1] = { NULL };
	config_diag d = { 0 };
	const char *path;
	int n = positionals(c, from, pos, 1);
	int32_t r;

	if (n < 0)
		return EXIT_USAGE;
	path = n ? pos[0] : c->config;
	r = http_check_config(path, c->extra_path[0] ? c->extra_path : NULL, &d);
	if (r < 0)
		return report_problems(path, r, &d);
	config_diag_clear(&d);
	printf("%s: OK\n", path ? path : "zero-config");
	return EXIT_OK;
}

static int cmd_plugins_check(cli *c, int from)
{
	const char *pos[1];
	char *report = NULL;
	char **search;
	memd_error err = { 0 };
	int32_t r;

	if (positionals(c, from, pos, 1) != 1)
		return usage_error("%s", "plugins check needs one NAME or FILE");
	/* A name resolves as memd_open resolves the config's plugins. */
	if ((r = service_plugin_search(c->config, c->extra_path[0] ? c->extra_path : NULL, &search,
				       &err)) < 0) {
		fprintf(stderr, "memd: cannot read the config: %s\n", err.msg);
		return exit_for_start(r);
	}
	r = loader_check_isolated(pos[0], (const char *const *)search, &report, &err);
	service_free_search(search);
	if (r < 0) {
		fprintf(stderr, "memd: refused: %s\n", err.msg);
		return EXIT_CONFIG;
	}
	fputs(report, stdout);
	free(report);
	return EXIT_OK;
}

static int cmd_plugins_list(cli *c, int from)
{
	const char *pos[1];
	config_diag d = { 0 };
	char *json = NULL;
	int32_t r;

	if (positionals(c, from, pos, 0) != 0)
		return EXIT_USAGE;
	r = service_plugins_list(c->config, c->extra_path[0] ? c->extra_path : NULL, &json, &d);
	if (r < 0)
		return report_problems(c->config, r, &d);
	return print_json(json);
}

static int cmd_serve(cli *c, int from)
{
	const char *pos[1];

	if (positionals(c, from, pos, 0) != 0)
		return EXIT_USAGE;
	return exit_for_start(http_serve(c->config, c->extra_path[0] ? c->extra_path : NULL));
}

/* memd mcp: one MCP session over stdin and stdout (newline-delimited
 * JSON-RPC, as desktop clients run local servers), bound to --app and
 * --user, until stdin ends. Nothing but JSON-RPC goes to stdout. */
static int cmd_mcp(cli *c, int from)
{
	mcp_binding b = { .scope = MCP_SCOPE_WRITE };
	memd_error err = { 0 };
	const char *pos[1];
	int missing = 0;
	mcp_conn *conn = NULL;
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	memd *m;
	int rc = EXIT_OK;

	b.app = take_opt(c, from, "--app", &missing);
	b.user = take_opt(c, from, "--user", &missing);
	if (missing || positionals(c, from, pos, 0) != 0)
		return missing ? usage_error("%s", "an option is missing its value") : EXIT_USAGE;
	if (!b.app || !b.user)
		return usage_error("%s", "mcp needs --app A and --user U (whose memory the tools use)");
	/* As search: the vector store unless a running server holds it. */
	if (try_open(c, 0, &m, &err) < 0) {
		if (!is_locked(&err))
			return open_failed(&err);
		fprintf(stderr, "memd: note: %s; keyword search only\n", err.msg);
		if ((rc = open_memd(c, MEMD_OPEN_NO_VECTOR, &m)) != EXIT_OK)
			return rc;
		b.flags |= MCP_KEYWORD_ONLY;
	}
	if (mcp_conn_new(m, &b, &conn, &err) < 0) {
		memd_close(m);
		return fail(&err);
	}
	while ((len = getline(&line, &cap, stdin)) >= 0) {
		char *out = NULL;
		int kind;
		while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
			line[--len] = '\0';
		if (len == 0)
			continue;
		if (mcp_handle(conn, line, (size_t)len, &out, &kind, &err) < 0) {
			rc = fail(&err);
			break;
		}
		if (out) {
			fputs(out, stdout);
			fputc('\n', stdout);
			free(out);
			if (fflush(stdout) != 0) {
				fprintf(stderr, "memd: stdout is closed\n");
				rc = EXIT_FAIL;
				break;
			}
		}
	}
	free(line);
	mcp_conn_free(conn);
	memd_close(m);
	return rc;
}

/* ---- scripting commands ------------------------------------------------------ */

typedef int (*scripting_fn)(cli *c, memd *m, const char **pos, int from, memd_error *err,
			    char **ret_json);
/* A facade call on APP USER ID (SID, KEY) that answers JSON: the whole of
 * a command that takes no options. */
typedef int32_t (*plain_fn)(memd *m, const char *app, const char *user, const char *id,
			    char **ret_json, memd_error *err);

typedef struct command {
	const char *group, *verb;
	int npos, npos_alt;            /* positional arguments; npos_alt: another count, or 0 */
	const char *shape;
	scripting_fn fn;               /* parses the options, then runs; NULL: plain */
	plain_fn plain;                /* when fn is NULL: takes no options, calls this */
} command;

static int sc_search(cli *c, memd *m, const char **pos, int from, memd_error *err,
		     char **ret_json);

/* search opens the vector store unless --mode keyword needs none. When
 * another process (a running memd serve) holds it, a search without
 * --mode searches the keyword index and says so; a vector or hybrid
 * search is refused, pointing at that server's route. */
static int open_for_search(cli *c, const char **pos, memd **ret)
{
	memd_error err = { 0 };
	cli_opts *o = &c->opts;

	if (o->mode && strcmp(o->mode, "keyword") == 0)
		return open_memd(c, MEMD_OPEN_NO_VECTOR, ret);
	if (try_open(c, 0, ret, &err) == 0)
		return EXIT_OK;
	if (!is_locked(&err))
		return open_failed(&err);
	if (o->mode) {
		open_failed(&err);
		fprintf(stderr,
			"memd: a %s search needs the vector store: search through the server that "
			"holds it (POST /v1/apps/%s/users/%s/search)\n",
			o->mode, pos[0], pos[1]);
		return EXIT_UNAVAILABLE;
	}
	fprintf(stderr,
		"memd: note: %s; searching the keyword index only (POST /v1/apps/%s/users/%s/search "
		"on that server searches both)\n",
		err.msg, pos[0], pos[1]);
	o->mode = "keyword";
	return open_memd(c, MEMD_OPEN_NO_VECTOR, ret);
}

static int take_common(cli *c, int from, int which)
{
	int missing = 0;
	const char *v;
	cli_opts *o = &c->opts;

	memset(o, 0, sizeof(*o));
	if (which & 1) {
		o->id = take_opt(c, from, "--id", &missing);
		o->title = take_opt(c, from, "--title", &missing);
		o->metadata = take_opt(c, from, "--metadata", &missing);
	}
	if ((which & 2) && (v = take_opt(c, from, "--events", &missing))) {
		o->has_events = 1;
		if (parse_u32(v, "--events", &o->events) != EXIT_OK)
			return EXIT_USAGE;
	}
	if ((which & 4) && take_i64(c, from, "--after-seq", &missing, &o->after_seq) != EXIT_OK)
		return EXIT_USAGE;
	if ((which & 8) && take_u32(c, from, "--limit", &missing, &o->limit) != EXIT_OK)
		return EXIT_USAGE;
	if (which & 16) {
		o->cursor = take_opt(c, from, "--cursor", &missing);
		o->archived = take_flag(c, from, "--archived");
	}
	if (which & 32)
		o->type = take_opt(c, from, "--type", &missing);
	if ((which & 64) && take_i64(c, from, "--version", &missing, &o->version) != EXIT_OK)
		return EXIT_USAGE;
	if (which & 128) {
		o->mode = take_opt(c, from, "--mode", &missing);
		o->session = take_opt(c, from, "--session", &missing);
		if (take_u32(c, from, "--k", &missing, &o->k) != EXIT_OK)
			return EXIT_USAGE;
	}
	if (missing)
		return usage_error("%s", "an option is missing its value");
	return EXIT_OK;
}

/* --return-context [--format openai] of a write that may answer its
 * context (after the command's own options, which clear c->opts). */
static int take_context_opts(cli *c, int from)
{
	int missing = 0;
	const char *format;
	cli_opts *o = &c->opts;

	o->return_context = take_flag(c, from, "--return-context");
	format = take_opt(c, from, "--format", &missing);
	if (missing)
		return usage_error("%s", "--format: expected openai");
	if (format && strcmp(format, "openai") != 0)
		return usage_error("--format %s: expected openai", format);
	if (format && !o->return_context)
		return usage_error("%s", "--format openai: only with --return-context");
	o->context_flags = format ? MEMD_READ_OPENAI : 0;
	return EXIT_OK;
}

/* Turn a memd_* result into the scripting return convention. */
static int result(int32_t r)
{
	return r < 0 ? -1 : EXIT_OK;
}

/* Run cmd, a scripting command of cmd->npos positional arguments (or
 * cmd->npos_alt, when nonzero; the missing ones are NULL in pos). */
static int run_scripting(cli *c, int from, const command *cmd)
{
	const char *pos[5] = { 0 };
	memd *m;
	char *json = NULL;
	memd_error err = { 0 };
	int rc, n;

	/* Options are consumed by fn before positionals are checked, so fn
	 * parses them first with pos == NULL. A plain command takes none. */
	if (cmd->fn)
		rc = cmd->fn(c, NULL, NULL, from, &err, NULL);
	else
		rc = take_common(c, from, 0);
	if (rc != EXIT_OK)
		return rc;
	n = positionals(c, from, pos, cmd->npos);
	if (n < 0)
		return EXIT_USAGE;
	if (n != cmd->npos && (!cmd->npos_alt || n != cmd->npos_alt))
		return usage_error("expected: %s", cmd->shape);
	/* Only search needs the vector store: the other commands leave it to
	 * whoever holds it (a running memd serve indexes what they write). */
	if (cmd->fn == sc_search)
		rc = open_for_search(c, pos, &m);
	else
		rc = open_memd(c, MEMD_OPEN_NO_VECTOR, &m);
	if (rc != EXIT_OK)
		return rc;
	if (cmd->fn)
		rc = cmd->fn(c, m, pos, from, &err, &json);
	else
		rc = result(cmd->plain(m, pos[0], pos[1], pos[2], &json, &err));
	if (rc == EXIT_OK && json)
		rc = print_json(json);
	else if (rc < 0)
		rc = fail(&err);
	memd_close(m);
	return rc;
}

/* A facade call on APP USER SID (or KEY) with a JSON body. */
typedef int32_t (*body_fn)(memd *m, const char *app, const char *user, const char *id,
			   const char *body_json, char **ret_json, memd_error *err);
/* The same on APP USER SID|KEY and a fourth name (TURN, OP). */
typedef int32_t (*body4_fn)(memd *m, const char *app, const char *user, const char *id,
			    const char *name, const char *body_json, char **ret_json,
			    memd_error *err);

/* fn on pos[0..2] with body (malloc'd, NULL: none), which is freed;
 * the scripting return convention. */
static int call_body(memd *m, body_fn fn, const char **pos, char *body, memd_error *err,
		     char **ret_json)
{
	int32_t r = fn(m, pos[0], pos[1], pos[2], body, ret_json, err);

	free(body);
	return result(r);
}

/* call_body for a call on pos[0..3]. */
static int call_body4(memd *m, body4_fn fn, const char **pos, char *body, memd_error *err,
		      char **ret_json)
{
	int32_t r = fn(m, pos[0], pos[1], pos[2], pos[3], body, ret_json, err);

	free(body);
	return result(r);
}

static int sc_session_create(cli *c, memd *m, const char **pos, int from, memd_error *err,
			     char **ret_json)
{
	cli_opts *o = &c->opts;
	json_t *body;
	char *text;
	int32_t r;

	if (!m)
		return take_common(c, from, 1);
	body = json_object();
	if (o->id)
		json_object_set_new(body, "id", json_string(o->id));
	if (o->title)
		json_object_set_new(body, "title", json_string(o->title));
	if (o->metadata) {
		json_t *meta = json_loads(o->metadata, 0, NULL);
		if (!meta) {
			json_decref(body);
			return usage_error("%s", "--metadata: not a JSON object");
		}
		json_object_set_new(body, "metadata", meta);
	}
	text = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	r = memd_session_create(m, pos[0], pos[1], text, ret_json, err);
	free(text);
	return result(r);
}

static int sc_session_get(cli *c, memd *m, const char **pos, int from, memd_error *err,
			  char **ret_json)
{
	cli_opts *o = &c->opts;
	memd_get_options g = { .struct_size = sizeof(g) };

	if (!m)
		return take_common(c, from, 2 | 4);
	if (o->has_events || o->after_seq) {
		g.flags = MEMD_GET_EVENTS;
		g.events = o->events;
		g.after_seq = o->after_seq;
	}
	return result(memd_session_get(m, pos[0], pos[1], pos[2], &g, ret_json, err));
}

static int sc_session_list(cli *c, memd *m, const char **pos, int from, memd_error *err,
			   char **ret_json)
{
	cli_opts *o = &c->opts;
	memd_session_list_options l = { .struct_size = sizeof(l) };
	int missing = 0;
	int rc;

	if (!m) {
		if ((rc = take_common(c, from, 8 | 16)) != EXIT_OK)
			return rc;
		o->order = take_opt(c, from, "--order", &missing);
		if (take_i64(c, from, "--active-within", &missing, &o->active_within) != EXIT_OK)
			return EXIT_USAGE;
		if (missing)
			return usage_error("%s", "an option is missing its value");
		if (o->order && strcmp(o->order, "created") != 0 && strcmp(o->order, "activity") != 0)
			return usage_error("--order: created or activity, not '%s'", o->order);
		return EXIT_OK;
	}
	l.flags = o->archived ? MEMD_LIST_INCLUDE_ARCHIVED : 0;
	l.limit = o->limit;
	l.cursor = o->cursor;
	l.order = o->order && strcmp(o->order, "activity") == 0 ? MEMD_ORDER_ACTIVITY
								  : MEMD_ORDER_CREATED;
	l.active_within_s = o->active_within;
	return result(memd_session_list_filtered(m, pos[0], pos[1], &l, ret_json, err));
}

/* The JSON a delete prints ({"deleted": true, "app", "user", and
 * "session" unless sid is NULL): the facade returns nothing, scripts
 * still get a result to read. */
static int deleted_json(const char *app, const char *user, const char *sid, char **ret_json)
{
	json_t *o = json_pack("{s:b,s:s,s:s}", "deleted", 1, "app", app, "user", user);
	char *text;

	if (o && sid && json_object_set_new(o, "session", json_string(sid)) < 0) {
		json_decref(o);
		o = NULL;
	}
	text = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	if (!text)
		return out_of_memory();
	*ret_json = text; /* print_json frees it, as index rebuild's */
	return EXIT_OK;
}

static int sc_session_delete(cli *c, memd *m, const char **pos, int from, memd_error *err,
			     char **ret_json)
{
	if (!m)
		return take_common(c, from, 0);
	if (memd_session_delete(m, pos[0], pos[1], pos[2], err) < 0)
		return -1;
	return deleted_json(pos[0], pos[1], pos[2], ret_json);
}

static int sc_events_append(cli *c, memd *m, const char **pos, int from, memd_error *err,
			    char **ret_json)
{
	size_t len;
	char *body;
	json_t *v;

	if (!m) {
		int rc = take_common(c, from, 0);
		return rc == EXIT_OK ? take_context_opts(c, from) : rc;
	}
	body = read_all(stdin, &len);
	if (!body) {
		fprintf(stderr, "memd: cannot read the body from stdin\n");
		return EXIT_FAIL;
	}
	/* A bare array of events is the "events" of a body. */
	v = json_loads(body, 0, NULL);
	if (json_is_array(v)) {
		json_t *wrapped = json_pack("{s:O}", "events", v);
		free(body);
		body = json_dumps(wrapped, JSON_COMPACT);
		json_decref(wrapped);
	}
	json_decref(v);
	if (c->opts.return_context) {
		int32_t r = memd_events_append_context(m, pos[0], pos[1], pos[2], body,
						       c->opts.context_flags, NULL, ret_json, err);
		free(body);
		return result(r);
	}
	return call_body(m, memd_events_append, pos, body, err, ret_json);
}

static int sc_events_list(cli *c, memd *m, const char **pos, int from, memd_error *err,
			  char **ret_json)
{
	cli_opts *o = &c->opts;
	if (!m)
		return take_common(c, from, 4 | 8);
	return result(memd_events_list(m, pos[0], pos[1], pos[2], o->after_seq, o->limit, ret_json,
				       err));
}

static int sc_user_delete(cli *c, memd *m, const char **pos, int from, memd_error *err,
			  char **ret_json)
{
	if (!m)
		return take_common(c, from, 0);
	if (memd_user_delete(m, pos[0], pos[1], err) < 0)
		return -1;
	return deleted_json(pos[0], pos[1], NULL, ret_json);
}

static int sc_artifact_put(cli *c, memd *m, const char **pos, int from, memd_error *err,
			   char **ret_json)
{
	cli_opts *o = &c->opts;
	size_t len;
	char *data;
	int32_t r;

	if (!m)
		return take_common(c, from, 32);
	data = read_all(stdin, &len);
	if (!data) {
		fprintf(stderr, "memd: cannot read the artifact from stdin\n");
		return EXIT_FAIL;
	}
	r = memd_artifact_put(m, pos[0], pos[1], pos[2], pos[3], o->type, data, len, ret_json, err);
	free(data);
	return result(r);
}

static int sc_artifact_get(cli *c, memd *m, const char **pos, int from, memd_error *err,
			   char **ret_json)
{
	cli_opts *o = &c->opts;
	char *meta;
	void *data;
	size_t size;

	(void)ret_json;
	if (!m)
		return take_common(c, from, 64);
	if (memd_artifact_get(m, pos[0], pos[1], pos[2], pos[3], o->version, &meta, &data, &size,
			      err) < 0)
		return -1;
	memd_free(meta);
	if (size && fwrite(data, 1, size, stdout) != size) {
		memd_free(data);
		fprintf(stderr, "memd: cannot write the artifact to stdout\n");
		return EXIT_FAIL;
	}
	memd_free(data);
	return EXIT_OK;
}

/* state set APP USER SID KEY=VALUE...: variable arity, handled apart. */
static int cmd_state_set(cli *c, int from)
{
	json_t *delta = json_object();
	const char *pos[3];
	int n = 0, rc;
	memd *m;
	char *body, *json;
	memd_error err = { 0 };

	for (int i = from; i < c->argc; i++) {
		const char *a = c->argv[i], *eq;
		if (n < 3) {
			pos[n++] = a;
			continue;
		}
		eq = strchr(a, '=');
		if (!eq || eq == a) {
			json_decref(delta);
			return usage_error("expected KEY=VALUE, got '%s'", a);
		}
		{
			char *key = strndup(a, (size_t)(eq - a));
			json_t *v = eq[1] ? json_loads(eq + 1, JSON_DECODE_ANY, NULL) : json_null();
			if (!v)
				v = json_string(eq + 1);
			json_object_set_new(delta, key, v);
			free(key);
		}
	}
	if (n < 3 || json_object_size(delta) == 0) {
		json_decref(delta);
		return usage_error("%s", "expected: state set APP USER SID KEY=VALUE...");
	}
	body = json_dumps(delta, JSON_COMPACT);
	json_decref(delta);
	if ((rc = open_memd(c, MEMD_OPEN_NO_VECTOR, &m)) != EXIT_OK) {
		free(body);
		return rc;
	}
	if (memd_state_patch(m, pos[0], pos[1], pos[2], body, &json, &err) < 0)
		rc = fail(&err);
	else
		rc = print_json(json);
	free(body);
	memd_close(m);
	return rc;
}

/* How many rounds of memd_search's wait `memd search` waits for the
 * index to catch up after its start. */
#define CLI_SEARCH_WAIT_ROUNDS 60

static int sc_search(cli *c, memd *m, const char **pos, int from, memd_error *err,
		     char **ret_json)
{
	cli_opts *o = &c->opts;
	json_t *body;
	char *text;
	int32_t r;

	if (!m)
		return take_common(c, from, 128);
	body = json_pack("{s:s}", "query", pos[2]);
	if (o->k)
		json_object_set_new(body, "k", json_integer(o->k));
	if (o->mode)
		json_object_set_new(body, "mode", json_string(o->mode));
	if (o->session)
		json_object_set_new(body, "session_id", json_string(o->session));
	text = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	if (!text)
		return out_of_memory();
	/* A new process rebuilds its in-memory keyword index from the feed:
	 * on a large database the first search waits for that, in rounds of
	 * the facade's own wait. */
	for (int round = 0;; round++) {
		r = memd_search(m, pos[0], pos[1], text, ret_json, err);
		if (r != MEMD_ETIMEDOUT || round == CLI_SEARCH_WAIT_ROUNDS)
			break;
		if (round == 0)
			fprintf(stderr, "memd: the search index is catching up; waiting (%s)\n", err->msg);
	}
	free(text);
	return result(r);
}

/* index rebuild: a progress bar with rate and ETA on a terminal. */
#define CLI_BAR_WIDTH 30
#define CLI_NS_PER_SEC 1e9

typedef struct rebuild_progress {
	int tty;
	struct timespec start;
	uint64_t done;
} rebuild_progress;

static double elapsed_s(const struct timespec *start)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double)(now.tv_sec - start->tv_sec) +
	       (double)(now.tv_nsec - start->tv_nsec) / CLI_NS_PER_SEC;
}

static int32_t show_progress(void *ud, uint64_t done, uint64_t total)
{
	rebuild_progress *p = ud;
	double secs = elapsed_s(&p->start), rate = secs > 0 ? (double)done / secs : 0;
	char bar[CLI_BAR_WIDTH + 1];
	int fill = total ? (int)((double)done / (double)total * CLI_BAR_WIDTH) : 0;

	p->done = done;
	if (!p->tty)
		return 0;
	if (fill > CLI_BAR_WIDTH)
		fill = CLI_BAR_WIDTH;
	memset(bar, '#', (size_t)fill);
	memset(bar + fill, '.', (size_t)(CLI_BAR_WIDTH - fill));
	bar[CLI_BAR_WIDTH] = '\0';
	fprintf(stderr, "\rrebuilding [%s] %3d%%  %llu/%llu  %.0f/s", bar,
		total ? (int)((double)done * 100 / (double)total) : 0, (unsigned long long)done,
		(unsigned long long)total, rate);
	if (rate > 0 && total > done)
		fprintf(stderr, "  ETA %.0fs   ", (double)(total - done) / rate);
	else
		fputs("            ", stderr);
	fflush(stderr);
	return 0;
}

static int cmd_index_rebuild(cli *c, int from)
{
	const char *pos[1];
	const char *app, *user;
	int missing = 0, rc;
	rebuild_progress p = { .tty = isatty(STDERR_FILENO) };
	memd_error err = { 0 };
	memd *m;

	app = take_opt(c, from, "--app", &missing);
	user = take_opt(c, from, "--user", &missing);
	if (missing)
		return usage_error("%s", "an option is missing its value");
	if (positionals(c, from, pos, 0) != 0)
		return EXIT_USAGE;
	if ((app == NULL) != (user == NULL))
		return usage_error("%s", "index rebuild: give --app and --user together, or neither");
	if (try_open(c, 0, &m, &err) < 0) {
		rc = open_failed(&err);
		/* A rebuild here would rebuild this process's indexes, not the
		 * running server's: it is that server's to do. */
		if (is_locked(&err) && app)
			fprintf(stderr,
				"memd: another process (a running memd serve) holds the vector store: "
				"rebuild its indexes there with POST /v1/apps/%s/users/%s/index:rebuild, "
				"or stop it first\n",
				app, user);
		else if (is_locked(&err))
			fprintf(stderr,
				"memd: another process (a running memd serve) holds the vector store: "
				"rebuild its indexes there, one user at a time, with "
				"POST /v1/apps/APP/users/USER/index:rebuild, or stop it first\n");
		return rc;
	}
	clock_gettime(CLOCK_MONOTONIC, &p.start);
	if (memd_index_rebuild(m, app, user, show_progress, &p, &err) < 0) {
		if (p.tty)
			fputc('\n', stderr);
		rc = fail(&err);
	} else {
		json_t *o = json_pack("{s:s?,s:s?,s:I,s:f}", "app", app, "user", user, "done",
				      (json_int_t)p.done, "seconds", elapsed_s(&p.start));
		char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
		json_decref(o);
		if (p.tty)
			fputc('\n', stderr);
		if (text) {
			rc = print_json(text);
		} else {
			fprintf(stderr, "memd: out of memory\n");
			rc = EXIT_FAIL;
		}
	}
	memd_close(m);
	return rc;
}

/* ---- lanes ---------------------------------------------------------------------- */

/* Options of the lane, turn and inbox commands. which: LANE_OPT_*. */
#define LANE_OPT_SOURCE 0x1
#define LANE_OPT_FILTERS 0x2
#define LANE_OPT_LEASE 0x4
#define LANE_OPT_END 0x8
#define LANE_OPT_INBOX 0x10

static int take_lane_opts(cli *c, int from, int which)
{
	int missing = 0;
	cli_opts *o = &c->opts;

	memset(o, 0, sizeof(*o));
	if (which & LANE_OPT_SOURCE) {
		o->source = take_opt(c, from, "--source", &missing);
		for (size_t i = 0; i < LANE_SOURCE_MEMBERS; i++) {
			char name[32];
			snprintf(name, sizeof(name), "--%s", lane_source_members[i]);
			for (char *p = name; *p; p++)
				if (*p == '_')
					*p = '-';
			o->src[i] = take_opt(c, from, name, &missing);
		}
	}
	if (which & LANE_OPT_FILTERS) {
		o->cursor = take_opt(c, from, "--cursor", &missing);
		o->suspended = take_opt(c, from, "--suspended", &missing);
		o->resume_pending = take_opt(c, from, "--resume-pending", &missing);
		o->in_turn = take_flag(c, from, "--in-turn");
		if (take_u32(c, from, "--limit", &missing, &o->limit) != EXIT_OK)
			return EXIT_USAGE;
		if (take_i64(c, from, "--active-within", &missing, &o->active_within) != EXIT_OK)
			return EXIT_USAGE;
	}
	if ((which & LANE_OPT_LEASE) &&
	    take_i64(c, from, "--lease-ms", &missing, &o->lease_ms) != EXIT_OK)
		return EXIT_USAGE;
	if (which & LANE_OPT_END) {
		o->outcome = take_opt(c, from, "--outcome", &missing);
		o->reason = take_opt(c, from, "--reason", &missing);
		o->usage = take_opt(c, from, "--usage", &missing);
	}
	if (which & LANE_OPT_INBOX) {
		o->mode = take_opt(c, from, "--mode", &missing);
		o->text = take_opt(c, from, "--text", &missing);
	}
	if (missing)
		return usage_error("%s", "an option is missing its value");
	return EXIT_OK;
}

/* The source of the options as a JSON object (new reference), or NULL
 * when none was given (*ret_rc EXIT_OK) or --source is not a JSON object
 * (*ret_rc EXIT_USAGE, said). */
static json_t *source_json(const cli_opts *o, int *ret_rc)
{
	json_t *src = NULL;

	*ret_rc = EXIT_OK;
	if (o->source) {
		src = json_loads(o->source, 0, NULL);
		if (!json_is_object(src)) {
			json_decref(src);
			*ret_rc = usage_error("%s", "--source: not a JSON object");
			return NULL;
		}
	}
	for (size_t i = 0; i < LANE_SOURCE_MEMBERS; i++) {
		if (!o->src[i])
			continue;
		if (!src)
			src = json_object();
		json_object_set_new(src, lane_source_members[i], json_string(o->src[i]));
	}
	return src;
}

/* Dump o (taken) compactly; NULL o is NULL text. Prints on failure. */
static char *dump_body(json_t *o)
{
	char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	return text;
}

static int sc_lane_resolve(cli *c, memd *m, const char **pos, int from, memd_error *err,
			   char **ret_json)
{
	char *body;
	int rc;
	int32_t r;

	if (!m)
		return take_lane_opts(c, from, LANE_OPT_SOURCE);
	body = dump_body(source_json(&c->opts, &rc));
	if (rc != EXIT_OK)
		return rc;
	if (!body)
		return usage_error("%s", "lane resolve needs a source (--platform P ..., or --source JSON)");
	r = memd_lane_resolve(m, pos[0], body, ret_json, err);
	free(body);
	return result(r);
}

/* lane open APP SOURCE (resolve, then open) or lane open APP USER KEY
 * [SOURCE]; lane reset APP USER KEY [SOURCE] (reset set). */
static int open_or_reset(cli *c, memd *m, const char **pos, int reset, memd_error *err,
			 char **ret_json)
{
	json_t *src;
	char *body;
	int rc;
	int32_t r;

	src = source_json(&c->opts, &rc);
	if (rc != EXIT_OK)
		return rc;
	if (!pos[1]) {
		body = dump_body(src);
		if (!body)
			return usage_error("%s", "lane open APP needs a source (--platform P ..., or "
					   "--source JSON), or give USER and KEY");
		r = c->opts.return_context
			    ? memd_lane_open_source_context(m, pos[0], body, c->opts.context_flags,
							    NULL, ret_json, err)
			    : memd_lane_open_source(m, pos[0], body, ret_json, err);
	} else {
		body = src ? dump_body(json_pack("{s:o}", "source", src)) : NULL;
		if (!reset && c->opts.return_context)
			r = memd_lane_open_context(m, pos[0], pos[1], pos[2], body,
						   c->opts.context_flags, NULL, ret_json, err);
		else
			return call_body(m, reset ? memd_lane_reset : memd_lane_open, pos, body,
					 err, ret_json);
	}
	free(body);
	return result(r);
}

static int sc_lane_open(cli *c, memd *m, const char **pos, int from, memd_error *err,
			char **ret_json)
{
	if (!m) {
		int rc = take_lane_opts(c, from, LANE_OPT_SOURCE);
		return rc == EXIT_OK ? take_context_opts(c, from) : rc;
	}
	return open_or_reset(c, m, pos, 0, err, ret_json);
}

static int sc_lane_reset(cli *c, memd *m, const char **pos, int from, memd_error *err,
			 char **ret_json)
{
	if (!m)
		return take_lane_opts(c, from, LANE_OPT_SOURCE);
	return open_or_reset(c, m, pos, 1, err, ret_json);
}

/* A --suspended or --resume-pending value: flag_true, flag_false or an
 * error. */
static int filter_flag(const char *v, const char *what, uint32_t if_true, uint32_t if_false,
		       uint32_t *flags)
{
	if (!v)
		return EXIT_OK;
	if (strcmp(v, "true") == 0)
		*flags |= if_true;
	else if (strcmp(v, "false") == 0)
		*flags |= if_false;
	else
		return usage_error("%s: expected true or false", what);
	return EXIT_OK;
}

static int sc_lane_list(cli *c, memd *m, const char **pos, int from, memd_error *err,
			char **ret_json)
{
	cli_opts *o = &c->opts;
	memd_lane_list_options lo = { .struct_size = sizeof(lo) };
	int rc;

	if (!m) {
		rc = take_lane_opts(c, from, LANE_OPT_FILTERS);
		if (rc == EXIT_OK)
			rc = filter_flag(o->suspended, "--suspended", MEMD_LANES_SUSPENDED,
					 MEMD_LANES_NOT_SUSPENDED, &(uint32_t){ 0 });
		if (rc == EXIT_OK)
			rc = filter_flag(o->resume_pending, "--resume-pending", MEMD_LANES_RESUME_PENDING,
					 MEMD_LANES_NOT_RESUME_PENDING, &(uint32_t){ 0 });
		return rc;
	}
	filter_flag(o->suspended, "--suspended", MEMD_LANES_SUSPENDED, MEMD_LANES_NOT_SUSPENDED,
		    &lo.flags);
	filter_flag(o->resume_pending, "--resume-pending", MEMD_LANES_RESUME_PENDING,
		    MEMD_LANES_NOT_RESUME_PENDING, &lo.flags);
	if (o->in_turn)
		lo.flags |= MEMD_LANES_IN_TURN;
	lo.limit = o->limit;
	lo.cursor = o->cursor;
	lo.active_within_s = o->active_within;
	return result(memd_lane_list(m, pos[0], pos[1], &lo, ret_json, err));
}

static int sc_lane_switch(cli *c, memd *m, const char **pos, int from, memd_error *err,
			  char **ret_json)
{
	char *body;

	if (!m)
		return take_lane_opts(c, from, 0);
	body = dump_body(json_pack("{s:s}", "session_id", pos[3]));
	if (!body)
		return out_of_memory();
	return call_body(m, memd_lane_switch, pos, body, err, ret_json);
}

static int sc_lane_delete(cli *c, memd *m, const char **pos, int from, memd_error *err,
			  char **ret_json)
{
	json_t *o;

	if (!m)
		return take_lane_opts(c, from, 0);
	if (memd_lane_delete(m, pos[0], pos[1], pos[2], err) < 0)
		return -1;
	o = json_pack("{s:b,s:s,s:s,s:s}", "deleted", 1, "app", pos[0], "user", pos[1], "lane",
		      pos[2]);
	*ret_json = dump_body(o);
	if (!*ret_json)
		return out_of_memory();
	return EXIT_OK;
}

static int sc_lane_sweep(cli *c, memd *m, const char **pos, int from, memd_error *err,
			 char **ret_json)
{
	(void)pos;
	if (!m)
		return take_lane_opts(c, from, 0);
	return result(memd_lanes_sweep(m, ret_json, err));
}

/* {"lease_ms": N} when --lease-ms was given, else NULL. */
static char *lease_body(const cli_opts *o)
{
	return o->lease_ms ? dump_body(json_pack("{s:I}", "lease_ms", (json_int_t)o->lease_ms)) : NULL;
}

static int sc_turn_begin(cli *c, memd *m, const char **pos, int from, memd_error *err,
			 char **ret_json)
{
	if (!m)
		return take_lane_opts(c, from, LANE_OPT_LEASE);
	return call_body(m, memd_turn_begin, pos, lease_body(&c->opts), err, ret_json);
}

static int sc_turn_heartbeat(cli *c, memd *m, const char **pos, int from, memd_error *err,
			     char **ret_json)
{
	if (!m)
		return take_lane_opts(c, from, LANE_OPT_LEASE);
	return call_body4(m, memd_turn_heartbeat, pos, lease_body(&c->opts), err, ret_json);
}

static int sc_turn_end(cli *c, memd *m, const char **pos, int from, memd_error *err,
		       char **ret_json)
{
	cli_opts *o = &c->opts;
	json_t *body;

	if (!m) {
		int rc = take_lane_opts(c, from, LANE_OPT_END);
		if (rc == EXIT_OK && !o->outcome)
			return usage_error("%s", "turn end needs --outcome ok|failed|interrupted");
		return rc;
	}
	body = json_pack("{s:s}", "outcome", o->outcome);
	if (o->reason)
		json_object_set_new(body, "reason", json_string(o->reason));
	if (o->usage) {
		json_t *u = json_loads(o->usage, 0, NULL);
		if (!json_is_object(u)) {
			json_decref(u);
			json_decref(body);
			return usage_error("%s", "--usage: not a JSON object");
		}
		json_object_set_new(body, "usage", u);
	}
	return call_body4(m, memd_turn_end, pos, dump_body(body), err, ret_json);
}

static int sc_inbox_put(cli *c, memd *m, const char **pos, int from, memd_error *err,
			char **ret_json)
{
	cli_opts *o = &c->opts;
	json_t *event;

	if (!m) {
		int rc = take_lane_opts(c, from, LANE_OPT_INBOX);
		if (rc == EXIT_OK && !o->mode)
			return usage_error("%s", "inbox put needs --mode interrupt|queue");
		return rc;
	}
	if (o->text) {
		event = json_pack("{s:s,s:s}", "role", "user", "content", o->text);
	} else {
		size_t len;
		char *in = read_all(stdin, &len);
		if (!in) {
			fprintf(stderr, "memd: cannot read the event from stdin\n");
			return EXIT_FAIL;
		}
		event = json_loads(in, 0, NULL);
		free(in);
		if (!json_is_object(event)) {
			json_decref(event);
			return usage_error("%s", "inbox put: stdin is not a JSON event object (or use --text)");
		}
	}
	return call_body(m, memd_inbox_put, pos,
			 dump_body(json_pack("{s:s,s:o}", "mode", o->mode, "event", event)), err,
			 ret_json);
}

static int sc_inbox_take(cli *c, memd *m, const char **pos, int from, memd_error *err,
			 char **ret_json)
{
	if (!m)
		return take_lane_opts(c, from, 0);
	return call_body(m, memd_inbox_take, pos, dump_body(json_pack("{s:s}", "turn_id", pos[3])),
			 err, ret_json);
}

/* ---- transcripts ------------------------------------------------------------------ */

/* Options of the transcript commands. which: TX_OPT_*. */
#define TX_OPT_REWIND 0x1
#define TX_OPT_VERSION 0x2
#define TX_OPT_ROLES 0x4
#define TX_OPT_PAGE 0x8

static int take_tx_opts(cli *c, int from, int which)
{
	int missing = 0;
	int64_t n;
	cli_opts *o = &c->opts;

	memset(o, 0, sizeof(*o));
	if (which & TX_OPT_REWIND) {
		o->turns = take_opt(c, from, "--turns", &missing);
		o->to_seq = take_opt(c, from, "--to-seq", &missing);
		if (o->turns && parse_i64(o->turns, "--turns", &n) != EXIT_OK)
			return EXIT_USAGE;
		if (o->to_seq && parse_i64(o->to_seq, "--to-seq", &n) != EXIT_OK)
			return EXIT_USAGE;
	}
	if (which & TX_OPT_VERSION) {
		o->expected_version = take_opt(c, from, "--expected-version", &missing);
		if (o->expected_version &&
		    parse_i64(o->expected_version, "--expected-version", &n) != EXIT_OK)
			return EXIT_USAGE;
	}
	if (which & TX_OPT_ROLES)
		o->roles = take_opt(c, from, "--roles", &missing);
	if (which & TX_OPT_PAGE) {
		o->cursor = take_opt(c, from, "--cursor", &missing);
		if (take_u32(c, from, "--limit", &missing, &o->limit) != EXIT_OK)
			return EXIT_USAGE;
	}
	if (missing)
		return usage_error("%s", "an option is missing its value");
	if ((which & TX_OPT_REWIND) && !o->turns == !o->to_seq)
		return usage_error("%s", "session rewind takes --turns N or --to-seq N (one of them)");
	return EXIT_OK;
}

/* The body of a transcript call: {"expected_version": N} when given,
 * plus member name = the number text value (NULL: none). Returns the
 * JSON text (malloc'd) or NULL with EXIT_FAIL said. The numbers were
 * checked by take_tx_opts. */
static char *tx_body(const cli_opts *o, const char *name, const char *value)
{
	json_t *b = json_object();

	if (b && o->expected_version)
		json_object_set_new(b, "expected_version",
				    json_integer(strtoll(o->expected_version, NULL, 10)));
	if (b && name && value)
		json_object_set_new(b, name, json_integer(strtoll(value, NULL, 10)));
	return dump_body(b);
}

static int sc_session_rewind(cli *c, memd *m, const char **pos, int from, memd_error *err,
			     char **ret_json)
{
	cli_opts *o = &c->opts;
	char *body;

	if (!m)
		return take_tx_opts(c, from, TX_OPT_REWIND | TX_OPT_VERSION);
	body = o->turns ? tx_body(o, "turns", o->turns) : tx_body(o, "to_seq", o->to_seq);
	if (!body)
		return out_of_memory();
	return call_body(m, memd_session_rewind, pos, body, err, ret_json);
}

static int sc_session_clear(cli *c, memd *m, const char **pos, int from, memd_error *err,
			    char **ret_json)
{
	char *body;

	if (!m)
		return take_tx_opts(c, from, TX_OPT_VERSION);
	if (!(body = tx_body(&c->opts, NULL, NULL)))
		return out_of_memory();
	return call_body(m, memd_events_clear, pos, body, err, ret_json);
}

static int sc_session_undo(cli *c, memd *m, const char **pos, int from, memd_error *err,
			   char **ret_json)
{
	char *body;

	if (!m)
		return take_tx_opts(c, from, TX_OPT_VERSION);
	if (!(body = tx_body(&c->opts, NULL, NULL)))
		return out_of_memory();
	return call_body4(m, memd_operation_undo, pos, body, err, ret_json);
}

static int sc_messages_get(cli *c, memd *m, const char **pos, int from, memd_error *err,
			   char **ret_json)
{
	if (!m)
		return take_tx_opts(c, from, TX_OPT_ROLES);
	return result(memd_messages_get(m, pos[0], pos[1], pos[2], c->opts.roles, ret_json, err));
}

/* The messages body from stdin: {"messages": [...], ...} as it is, or a
 * bare array of messages wrapped as {"messages": [...]}, with
 * --expected-version added to an object; anything else is passed on as
 * it came, for the facade to refuse. NULL when stdin cannot be read
 * (said). */
static char *messages_body(const cli_opts *o)
{
	size_t len;
	char *text = read_all(stdin, &len);
	json_t *v, *body;

	if (!text) {
		fprintf(stderr, "memd: cannot read the messages from stdin\n");
		return NULL;
	}
	v = json_loads(text, 0, NULL);
	if (!json_is_array(v) && !json_is_object(v)) {
		json_decref(v);
		return text;
	}
	free(text);
	body = json_is_array(v) ? json_pack("{s:O}", "messages", v) : json_incref(v);
	json_decref(v);
	if (body && o->expected_version)
		json_object_set_new(body, "expected_version",
				    json_integer(strtoll(o->expected_version, NULL, 10)));
	if (!(text = dump_body(body)))
		fprintf(stderr, "memd: out of memory\n");
	return text;
}

static int sc_messages_write(cli *c, memd *m, const char **pos, memd_error *err, char **ret_json,
			     int replace)
{
	char *body = messages_body(&c->opts);

	if (!body)
		return EXIT_FAIL;
	if (!replace && c->opts.return_context) {
		int32_t r = memd_messages_append_context(m, pos[0], pos[1], pos[2], body,
							 c->opts.context_flags, NULL, ret_json, err);
		free(body);
		return result(r);
	}
	return call_body(m, replace ? memd_messages_put : memd_messages_append, pos, body, err,
			 ret_json);
}

static int sc_messages_append(cli *c, memd *m, const char **pos, int from, memd_error *err,
			      char **ret_json)
{
	if (!m) {
		int rc = take_tx_opts(c, from, TX_OPT_VERSION);
		return rc == EXIT_OK ? take_context_opts(c, from) : rc;
	}
	return sc_messages_write(c, m, pos, err, ret_json, 0);
}

static int sc_messages_put(cli *c, memd *m, const char **pos, int from, memd_error *err,
			   char **ret_json)
{
	if (!m)
		return take_tx_opts(c, from, TX_OPT_VERSION);
	return sc_messages_write(c, m, pos, err, ret_json, 1);
}

static int sc_state_history(cli *c, memd *m, const char **pos, int from, memd_error *err,
			    char **ret_json)
{
	if (!m)
		return take_tx_opts(c, from, TX_OPT_PAGE);
	return result(memd_state_history(m, pos[0], pos[1], pos[2], c->opts.cursor, c->opts.limit,
					 ret_json, err));
}

/* ---- long-term memories ---- */

/* Options of the memory commands. which: MEM_OPT_*. */
#define MEM_OPT_CONTENT 0x1 /* --kind, --topics, --entities, --ttl-seconds */
#define MEM_OPT_ADD 0x2     /* --id, --session */
#define MEM_OPT_UPDATE 0x4  /* --text, --expected-version, --reason */
#define MEM_OPT_LIST 0x8    /* --kind, --topic, --entity, --session, --limit, --cursor */
#define MEM_OPT_VERSION 0x10 /* --expected-version (--version is memd's own) */

static int take_memory_opts(cli *c, int from, int which)
{
	int missing = 0;
	cli_opts *o = &c->opts;

	memset(o, 0, sizeof(*o));
	if (which & (MEM_OPT_CONTENT | MEM_OPT_LIST))
		o->kind = take_opt(c, from, "--kind", &missing);
	if (which & MEM_OPT_CONTENT) {
		o->topics = take_opt(c, from, "--topics", &missing);
		o->entities = take_opt(c, from, "--entities", &missing);
		o->ttl_seconds = take_opt(c, from, "--ttl-seconds", &missing);
	}
	if (which & MEM_OPT_ADD)
		o->id = take_opt(c, from, "--id", &missing);
	if (which & (MEM_OPT_ADD | MEM_OPT_LIST))
		o->session = take_opt(c, from, "--session", &missing);
	if (which & MEM_OPT_UPDATE) {
		o->text = take_opt(c, from, "--text", &missing);
		o->reason = take_opt(c, from, "--reason", &missing);
	}
	if ((which & (MEM_OPT_UPDATE | MEM_OPT_VERSION)) &&
	    take_i64(c, from, "--expected-version", &missing, &o->version) != EXIT_OK)
		return EXIT_USAGE;
	if (which & MEM_OPT_LIST) {
		o->topic = take_opt(c, from, "--topic", &missing);
		o->entity = take_opt(c, from, "--entity", &missing);
		o->cursor = take_opt(c, from, "--cursor", &missing);
		if (take_u32(c, from, "--limit", &missing, &o->limit) != EXIT_OK)
			return EXIT_USAGE;
	}
	if (missing)
		return usage_error("%s", "an option is missing its value");
	return EXIT_OK;
}

/* "a,b,c" as a JSON array of its non-empty parts (new reference). */
static json_t *comma_list(const char *s)
{
	json_t *a = json_array();
	const char *p = s;

	while (a && *p) {
		size_t n = strcspn(p, ",");
		if (n)
			json_array_append_new(a, json_stringn(p, n));
		p += n + (p[n] == ',');
	}
	return a;
}

/* The content options into body: 0, or a usage error's exit code. */
static int memory_content(const cli_opts *o, json_t *body)
{
	if (o->kind)
		json_object_set_new(body, "kind", json_string(o->kind));
	if (o->topics)
		json_object_set_new(body, "topics", comma_list(o->topics));
	if (o->entities)
		json_object_set_new(body, "entities", comma_list(o->entities));
	if (o->ttl_seconds) {
		int64_t ttl;
		if (parse_i64(o->ttl_seconds, "--ttl-seconds", &ttl) != EXIT_OK)
			return EXIT_USAGE;
		json_object_set_new(body, "ttl_seconds", json_integer(ttl));
	}
	return EXIT_OK;
}

static int sc_memory_add(cli *c, memd *m, const char **pos, int from, memd_error *err,
			 char **ret_json)
{
	cli_opts *o = &c->opts;
	json_t *body;
	char *text;
	int rc;
	int32_t r;

	if (!m)
		return take_memory_opts(c, from, MEM_OPT_CONTENT | MEM_OPT_ADD);
	body = json_pack("{s:s}", "text", pos[2]);
	if (!body)
		return usage_error("%s", "TEXT: not valid UTF-8");
	if ((rc = memory_content(o, body)) != EXIT_OK) {
		json_decref(body);
		return rc;
	}
	if (o->id)
		json_object_set_new(body, "id", json_string(o->id));
	if (o->session)
		json_object_set_new(body, "source", json_pack("{s:s}", "session_id", o->session));
	text = dump_body(body);
	r = memd_memory_create(m, pos[0], pos[1], text, ret_json, NULL, err);
	free(text);
	return result(r);
}

static int sc_memory_list(cli *c, memd *m, const char **pos, int from, memd_error *err,
			  char **ret_json)
{
	cli_opts *o = &c->opts;
	memd_memory_list_options lo = { .struct_size = sizeof(lo) };

	if (!m)
		return take_memory_opts(c, from, MEM_OPT_LIST);
	lo.limit = o->limit;
	lo.cursor = o->cursor;
	lo.kind = o->kind;
	lo.topic = o->topic;
	lo.entity = o->entity;
	lo.session_id = o->session;
	return result(memd_memory_list(m, pos[0], pos[1], &lo, ret_json, err));
}

static int sc_memory_update(cli *c, memd *m, const char **pos, int from, memd_error *err,
			    char **ret_json)
{
	cli_opts *o = &c->opts;
	json_t *body;
	int rc;

	if (!m)
		return take_memory_opts(c, from, MEM_OPT_CONTENT | MEM_OPT_UPDATE);
	body = json_object();
	if ((rc = memory_content(o, body)) != EXIT_OK) {
		json_decref(body);
		return rc;
	}
	if (o->text)
		json_object_set_new(body, "text", json_string(o->text));
	if (o->version)
		json_object_set_new(body, "version", json_integer(o->version));
	if (o->reason)
		json_object_set_new(body, "reason", json_string(o->reason));
	return call_body(m, memd_memory_update, pos, dump_body(body), err, ret_json);
}

static int sc_memory_delete(cli *c, memd *m, const char **pos, int from, memd_error *err,
			    char **ret_json)
{
	int32_t r;

	if (!m)
		return take_memory_opts(c, from, MEM_OPT_VERSION);
	r = memd_memory_delete(m, pos[0], pos[1], pos[2], c->opts.version, err);
	if (r < 0)
		return -1;
	*ret_json = dump_body(json_pack("{s:b,s:s}", "deleted", 1, "id", pos[2]));
	return *ret_json ? EXIT_OK : out_of_memory();
}

/* memd memory sweep: one pass of the memory worker. */
static int sc_memory_sweep(cli *c, memd *m, const char **pos, int from, memd_error *err,
			   char **ret_json)
{
	(void)pos;
	if (!m)
		return take_common(c, from, 0);
	return result(memd_memories_sweep(m, ret_json, err));
}

/* ---- A2A tasks ---- */

static int sc_task_get(cli *c, memd *m, const char **pos, int from, memd_error *err,
		       char **ret_json)
{
	cli_opts *o = &c->opts;
	int missing = 0;

	if (!m) {
		memset(o, 0, sizeof(*o));
		o->history_length = -1;
		if (take_i64(c, from, "--history-length", &missing, &o->history_length) != EXIT_OK)
			return EXIT_USAGE;
		return missing ? usage_error("%s", "an option is missing its value") : EXIT_OK;
	}
	return result(memd_task_get(m, pos[0], pos[1], o->history_length, ret_json, err));
}

static int sc_task_list(cli *c, memd *m, const char **pos, int from, memd_error *err,
			char **ret_json)
{
	cli_opts *o = &c->opts;
	memd_task_list_options lo = { .struct_size = sizeof(lo) };
	int missing = 0;

	if (!m) {
		memset(o, 0, sizeof(*o));
		o->context_id = take_opt(c, from, "--context-id", &missing);
		o->state = take_opt(c, from, "--state", &missing);
		o->user = take_opt(c, from, "--user", &missing);
		o->cursor = take_opt(c, from, "--cursor", &missing);
		if (take_u32(c, from, "--limit", &missing, &o->limit) != EXIT_OK)
			return EXIT_USAGE;
		return missing ? usage_error("%s", "an option is missing its value") : EXIT_OK;
	}
	lo.limit = o->limit;
	lo.cursor = o->cursor;
	lo.context_id = o->context_id;
	lo.state = o->state;
	lo.user = o->user;
	return result(memd_task_list(m, pos[0], &lo, ret_json, err));
}

/* ---- run checkpoints ---- */

/* Options of the checkpoint commands. which: CK_OPT_*. */
#define CK_OPT_NS 0x1        /* --ns */
#define CK_OPT_LIST 0x2      /* --before, --metadata, --full, --limit, --cursor */
#define CK_OPT_RESUME 0x4    /* --resume, --limit, --cursor */

static int take_checkpoint_opts(cli *c, int from, int which)
{
	int missing = 0;
	cli_opts *o = &c->opts;

	memset(o, 0, sizeof(*o));
	if (which & (CK_OPT_NS | CK_OPT_LIST))
		o->ns = take_opt(c, from, "--ns", &missing);
	if (which & CK_OPT_LIST) {
		o->before = take_opt(c, from, "--before", &missing);
		o->metadata = take_opt(c, from, "--metadata", &missing);
		o->full = take_flag(c, from, "--full");
	}
	if (which & CK_OPT_RESUME)
		o->resume = take_opt(c, from, "--resume", &missing);
	if (which & (CK_OPT_LIST | CK_OPT_RESUME)) {
		o->cursor = take_opt(c, from, "--cursor", &missing);
		if (take_u32(c, from, "--limit", &missing, &o->limit) != EXIT_OK)
			return EXIT_USAGE;
	}
	if (missing)
		return usage_error("%s", "an option is missing its value");
	return EXIT_OK;
}

static int sc_checkpoint_list(cli *c, memd *m, const char **pos, int from, memd_error *err,
			      char **ret_json)
{
	cli_opts *o = &c->opts;
	memd_checkpoint_list_options lo = { .struct_size = sizeof(lo) };

	if (!m)
		return take_checkpoint_opts(c, from, CK_OPT_LIST);
	lo.limit = o->limit;
	lo.cursor = o->cursor;
	lo.session_id = pos[2];
	lo.ns = o->ns;
	lo.before = o->before;
	lo.metadata_json = o->metadata;
	lo.full = o->full;
	return result(memd_checkpoint_list(m, pos[0], pos[1], &lo, ret_json, err));
}

static int sc_checkpoint_get(cli *c, memd *m, const char **pos, int from, memd_error *err,
			     char **ret_json)
{
	if (!m)
		return take_checkpoint_opts(c, from, CK_OPT_NS);
	return result(memd_checkpoint_get(m, pos[0], pos[1], pos[2], c->opts.ns, pos[3], ret_json,
					  err));
}

static int sc_checkpoint_delete(cli *c, memd *m, const char **pos, int from, memd_error *err,
				char **ret_json)
{
	if (!m)
		return take_checkpoint_opts(c, from, CK_OPT_NS);
	if (memd_checkpoint_delete(m, pos[0], pos[1], pos[2], c->opts.ns, err) < 0)
		return -1;
	*ret_json = dump_body(json_pack("{s:b,s:s,s:s?}", "deleted", 1, "session_id", pos[2],
					"checkpoint_ns", c->opts.ns));
	return *ret_json ? EXIT_OK : out_of_memory();
}

static int sc_checkpoint_resumable(cli *c, memd *m, const char **pos, int from, memd_error *err,
				   char **ret_json)
{
	cli_opts *o = &c->opts;
	memd_checkpoint_resumable_options ro = { .struct_size = sizeof(ro) };

	if (!m)
		return take_checkpoint_opts(c, from, CK_OPT_RESUME);
	ro.limit = o->limit;
	ro.cursor = o->cursor;
	ro.resume = o->resume;
	return result(memd_checkpoint_resumable(m, pos[0], &ro, ret_json, err));
}

/* memd checkpoint sweep: delete the expired checkpoints now. */
static int sc_checkpoint_sweep(cli *c, memd *m, const char **pos, int from, memd_error *err,
			       char **ret_json)
{
	(void)pos;
	if (!m)
		return take_common(c, from, 0);
	return result(memd_checkpoints_sweep(m, ret_json, err));
}

static const command commands[] = {
	{ "session", "create", 2, 0, "session create APP USER", .fn = sc_session_create },
	{ "session", "get", 3, 0, "session get APP USER SID", .fn = sc_session_get },
	{ "session", "list", 2, 0, "session list APP USER", .fn = sc_session_list },
	{ "session", "delete", 3, 0, "session delete APP USER SID", .fn = sc_session_delete },
	{ "session", "rewind", 3, 0, "session rewind APP USER SID --turns N|--to-seq N",
	  .fn = sc_session_rewind },
	{ "session", "clear", 3, 0, "session clear APP USER SID", .fn = sc_session_clear },
	{ "session", "undo", 4, 0, "session undo APP USER SID OP", .fn = sc_session_undo },
	{ "session", "operations", 3, 0, "session operations APP USER SID",
	  .plain = memd_operations_list },
	{ "messages", "get", 3, 0, "messages get APP USER SID", .fn = sc_messages_get },
	{ "messages", "append", 3, 0, "messages append APP USER SID", .fn = sc_messages_append },
	{ "messages", "put", 3, 0, "messages put APP USER SID", .fn = sc_messages_put },
	{ "state", "history", 3, 0, "state history APP USER SID", .fn = sc_state_history },
	{ "events", "append", 3, 0, "events append APP USER SID", .fn = sc_events_append },
	{ "events", "list", 3, 0, "events list APP USER SID", .fn = sc_events_list },
	{ "context", NULL, 3, 0, "context APP USER SID", .plain = memd_context },
	{ "state", "get", 3, 0, "state get APP USER SID", .plain = memd_state_get },
	{ "artifact", "put", 4, 0, "artifact put APP USER SID NAME", .fn = sc_artifact_put },
	{ "artifact", "get", 4, 0, "artifact get APP USER SID NAME", .fn = sc_artifact_get },
	{ "artifact", "list", 3, 0, "artifact list APP USER SID", .plain = memd_artifact_list },
	{ "user", "delete", 2, 0, "user delete APP USER", .fn = sc_user_delete },
	{ "search", NULL, 3, 0, "search APP USER QUERY", .fn = sc_search },
	{ "lane", "resolve", 1, 0, "lane resolve APP SOURCE", .fn = sc_lane_resolve },
	{ "lane", "open", 3, 1, "lane open APP SOURCE, or lane open APP USER KEY [SOURCE]",
	  .fn = sc_lane_open },
	{ "lane", "get", 3, 0, "lane get APP USER KEY", .plain = memd_lane_get },
	{ "lane", "list", 2, 1, "lane list APP [USER]", .fn = sc_lane_list },
	{ "lane", "reset", 3, 0, "lane reset APP USER KEY", .fn = sc_lane_reset },
	{ "lane", "switch", 4, 0, "lane switch APP USER KEY SID", .fn = sc_lane_switch },
	{ "lane", "suspend", 3, 0, "lane suspend APP USER KEY", .plain = memd_lane_suspend },
	{ "lane", "delete", 3, 0, "lane delete APP USER KEY", .fn = sc_lane_delete },
	{ "lane", "sweep", 0, 0, "lane sweep", .fn = sc_lane_sweep },
	{ "turn", "begin", 3, 0, "turn begin APP USER KEY", .fn = sc_turn_begin },
	{ "turn", "heartbeat", 4, 0, "turn heartbeat APP USER KEY TURN", .fn = sc_turn_heartbeat },
	{ "turn", "end", 4, 0, "turn end APP USER KEY TURN --outcome O", .fn = sc_turn_end },
	{ "inbox", "put", 3, 0, "inbox put APP USER KEY --mode M", .fn = sc_inbox_put },
	{ "inbox", "take", 4, 0, "inbox take APP USER KEY TURN", .fn = sc_inbox_take },
	{ "inbox", "list", 3, 0, "inbox list APP USER KEY", .plain = memd_inbox_list },
	{ "memory", "add", 3, 0, "memory add APP USER TEXT", .fn = sc_memory_add },
	{ "memory", "list", 2, 0, "memory list APP USER", .fn = sc_memory_list },
	{ "memory", "get", 3, 0, "memory get APP USER ID", .plain = memd_memory_get },
	{ "memory", "update", 3, 0, "memory update APP USER ID", .fn = sc_memory_update },
	{ "memory", "delete", 3, 0, "memory delete APP USER ID", .fn = sc_memory_delete },
	{ "memory", "history", 3, 0, "memory history APP USER ID", .plain = memd_memory_history },
	{ "memory", "extract", 3, 0, "memory extract APP USER SID", .plain = memd_memory_extract },
	{ "memory", "sweep", 0, 0, "memory sweep", .fn = sc_memory_sweep },
	{ "task", "get", 2, 0, "task get APP ID", .fn = sc_task_get },
	{ "task", "list", 1, 0, "task list APP", .fn = sc_task_list },
	{ "checkpoint", "list", 3, 2, "checkpoint list APP USER [SID]", .fn = sc_checkpoint_list },
	{ "checkpoint", "get", 4, 3, "checkpoint get APP USER SID [ID]", .fn = sc_checkpoint_get },
	{ "checkpoint", "delete", 3, 0, "checkpoint delete APP USER SID",
	  .fn = sc_checkpoint_delete },
	{ "checkpoint", "resumable", 1, 0, "checkpoint resumable APP",
	  .fn = sc_checkpoint_resumable },
	{ "checkpoint", "sweep", 0, 0, "checkpoint sweep", .fn = sc_checkpoint_sweep },
};

/* ../plugins next to the executable, when it exists (build trees). */
static void find_exe_plugins(cli *c)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	char *slash;

	if (n <= 0)
		return;
	exe[n] = '\0';
	slash = strrchr(exe, '/');
	if (!slash)
		return;
	*slash = '\0';
	if ((size_t)snprintf(c->exe_plugins, sizeof(c->exe_plugins), "%s" CLI_EXE_PLUGIN_DIR, exe) >=
	    sizeof(c->exe_plugins))
		return;
	if (access(c->exe_plugins, X_OK) == 0)
		c->extra_path[0] = c->exe_plugins;
}

/* take_globals answered --help or --version: exit with EXIT_OK. */
#define CLI_ANSWERED (-1)

/* Take the global options out of argv, wherever they are (--version
 * only before the command, whose own option it is after): argv is
 * compacted to the program name and the rest, in order, and *ret_argc
 * set. Returns EXIT_OK to go on, CLI_ANSWERED, or a usage error's exit
 * code. */
static int take_globals(cli *c, int argc, char **argv, int *ret_argc)
{
	int out = 1;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (strcmp(a, "--config") == 0 || strcmp(a, "-c") == 0) {
			if (++i >= argc)
				return usage_error("%s needs a FILE", a);
			c->config = argv[i];
		} else if (strncmp(a, "--config=", strlen("--config=")) == 0) {
			c->config = a + strlen("--config=");
		} else if (strcmp(a, "-v") == 0 || strcmp(a, "--verbose") == 0) {
			c->verbose++;
		} else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			cli_usage(stdout);
			return CLI_ANSWERED;
		} else if (strcmp(a, "--version") == 0 && out == 1) {
			/* memd's own only before the command: after it, --version
			 * is the command's (artifact get --version N). */
			puts(memd_version_string());
			return CLI_ANSWERED;
		} else {
			argv[out++] = argv[i];
		}
	}
	argv[out] = NULL;
	*ret_argc = out;
	return EXIT_OK;
}

/* Command groups that take a subcommand (`memd session` alone prints
 * the session subcommands). */
static const char *const verb_groups[] = {
	"config", "plugins", "index", "session", "events", "state", "artifact", "user", "lane",
	"turn", "inbox", "messages", "memory", "task", "checkpoint",
};

int cli_main(int argc, char **argv)
{
	cli c = { 0 };
	const int i = 1;
	const char *group, *verb;
	int rc;

	c.config = getenv("MEMD_CONFIG");
	rc = take_globals(&c, argc, argv, &argc);
	if (rc == CLI_ANSWERED)
		return EXIT_OK;
	if (rc != EXIT_OK)
		return rc;
	c.argc = argc;
	c.argv = argv;
	if (i >= argc) {
		cli_usage(stderr);
		return EXIT_USAGE;
	}
	if (argv[i][0] == '-')
		return usage_error("unknown option %s", argv[i]);
	find_exe_plugins(&c);
	group = argv[i];
	verb = i + 1 < argc ? argv[i + 1] : "";

	if (strcmp(group, "version") == 0) {
		puts(memd_version_string());
		return EXIT_OK;
	}
	if (strcmp(group, "help") == 0) {
		cli_usage(stdout);
		return EXIT_OK;
	}
	if (strcmp(group, "config") == 0 && strcmp(verb, "check") == 0)
		return cmd_config_check(&c, i + 2);
	if (strcmp(group, "plugins") == 0 && strcmp(verb, "check") == 0)
		return cmd_plugins_check(&c, i + 2);
	if (strcmp(group, "plugins") == 0 && strcmp(verb, "list") == 0)
		return cmd_plugins_list(&c, i + 2);
	if (strcmp(group, "serve") == 0)
		return cmd_serve(&c, i + 1);
	if (strcmp(group, "mcp") == 0)
		return cmd_mcp(&c, i + 1);
	if (strcmp(group, "state") == 0 && strcmp(verb, "set") == 0)
		return cmd_state_set(&c, i + 2);
	if (strcmp(group, "index") == 0 && strcmp(verb, "rebuild") == 0)
		return cmd_index_rebuild(&c, i + 2);
	for (size_t k = 0; k < sizeof(commands) / sizeof(commands[0]); k++) {
		const command *cmd = &commands[k];
		if (strcmp(group, cmd->group) != 0)
			continue;
		if (!cmd->verb)
			return run_scripting(&c, i + 1, cmd);
		if (strcmp(verb, cmd->verb) == 0)
			return run_scripting(&c, i + 2, cmd);
	}
	for (size_t k = 0; k < sizeof(verb_groups) / sizeof(verb_groups[0]); k++) {
		if (strcmp(group, verb_groups[k]) != 0)
			continue;
		if (*verb)
			fprintf(stderr, "memd: unknown %s subcommand '%s'\n", group, verb);
		else
			fprintf(stderr, "memd: %s needs a subcommand\n", group);
		group_usage(stderr, group);
		return EXIT_USAGE;
	}
	return usage_error("unknown command '%s'", group);
}
