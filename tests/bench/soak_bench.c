/* SPDX-License-Identifier: MIT */
/*
 * soak_bench: a mixed-load soak of `memd serve` that simulates many chats
 * for minutes, on SQLite or PostgreSQL, and checks at the end that every
 * acknowledged write is there.
 *
 * Each chat is an agent's conversation, driven in steps over HTTP
 * keep-alive by one of the workers (one connection each; a chat is driven
 * by one worker at a time, as a real conversation is sequential): two
 * chats in three open their lane with `POST /v1/apps/soak/lanes:open` at
 * every step (a gateway's entry point), the third creates its session once
 * (`POST .../sessions` with an id of its own). A step appends the user's
 * turn, reads the context, sometimes appends an assistant tool call with
 * its result, appends the assistant's answer, and sometimes reads the
 * session's newest run checkpoint (`GET .../checkpoints:latest`, as a
 * resuming LangGraph runtime does: it must be the last one acknowledged),
 * puts a run checkpoint (every other step or so: `PUT .../checkpoints/{id}`
 * with its parent, a few hundred bytes to a few KiB of opaque payload and
 * small metadata, then `POST .../checkpoints/{id}/writes` for one or two
 * tasks' pending writes, as LangGraph does after a step; ids increase per
 * chat as fixed-width numbers, so they order as bytes), searches the
 * user's memory, puts an artifact or patches the session state. Turns are a
 * few hundred bytes to a few KiB of words; which chat steps next is drawn
 * from a Zipf distribution (a few very active chats, a long tail).
 *
 * Every interval it prints each operation's requests/s and p50/p99
 * latency, and memd's RSS (VmRSS) and CPU. It records every acknowledged
 * write (each event's id and seq in its session, each artifact version,
 * each state key's last acknowledged value, each checkpoint put with its
 * parent and which of its tasks' writes were acknowledged) and, after the
 * load, reads all of it back through the API and compares it with what was
 * sent (the contents are generated again from the run's seed, not kept):
 * a session's checkpoints are listed with full=true, page by page, and each
 * acknowledged one must be there with its parent, type, payload bytes,
 * metadata and pending writes, in (task_path, task_id, idx) order.
 *
 * With --kill-at, memd is killed (SIGKILL) in the middle of the load and
 * started again on the same data and port; the run measures the time until
 * it answers again and goes on. A request that the kill cut off is sent
 * again once memd answers (with the same event ids: an append that did
 * commit is then a replay; a checkpoint put of the same id replaces it and
 * keeps its pending writes; a pending write stored already is kept), as a
 * client would; writes the kill cut off may or may not be there,
 * acknowledged ones must.
 *
 * Exit status 0 only when no request failed (any answer but the expected
 * status is an error, except a 409 to a session create sent again after a
 * kill: the first one committed), no acknowledged write is missing or
 * different and memd answered after the restart; never about speed. From a
 * build directory:
 *   tests/bench/soak_bench [-d seconds] [-c connections] [-n chats]
 *       [--store sqlite|postgres] [--kill-at seconds] [-i interval]
 *       [--zipf s] [--seed n] [--dir dir] [--keep] [--no-index]
 * postgres takes the server from MEMD_PG_DSN and MEMD_PG_PASSWORD
 * (tests/services/with-services.sh --only postgres -- ... starts one) and
 * uses a schema of its own. --no-index turns memd's keyword index off (and
 * the searches with it): the index lives in memory and grows with the
 * events, so this tells its growth from any other in memd's RSS.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_http.h"

#define APP "soak"
#define DEFAULT_SECONDS 600
#define DEFAULT_CONNS 32
#define DEFAULT_CHATS 1000
#define DEFAULT_INTERVAL_S 10
#define DEFAULT_ZIPF_S 1.0
#define DEFAULT_SEED 1
#define CHATS_PER_USER 3   /* a user has a few conversations */
#define SESSION_CHAT_EVERY 3 /* chat i creates a session when i % 3 == 2; the others open lanes */
#define PG_POOL 16          /* postgres connections of memd (config/memd.yaml's example) */

/* What a step does beyond the user turn, context and answer, in percent. */
#define P_TOOL 25
#define P_SEARCH 10
#define P_ARTIFACT 5
#define P_STATE 20
#define P_CKPT 50   /* a run checkpoint put with its tasks' pending writes */
#define P_LATEST 10 /* the newest checkpoint read back, as a resuming runtime does */
#define PERCENT 100

/* Sizes in bytes, drawn log-uniformly between min and max. */
#define USER_MIN 200
#define USER_MAX 3000
#define ANSWER_MIN 300
#define ANSWER_MAX 6000
#define CALL_TEXT_MIN 40
#define CALL_TEXT_MAX 200
#define RESULT_MIN 500
#define RESULT_MAX 8000
#define ARTIFACT_MIN 512
#define ARTIFACT_MAX 16384
#define SCRATCH_MIN 100
#define SCRATCH_MAX 1000
#define TOPIC_MIN 20
#define TOPIC_MAX 80
#define QUERY_WORDS 3
#define TAG_COUNT 3
#define SEARCH_K 10
#define SCRATCH_DELETE_EVERY 5 /* the scratch key is deleted (null) at every 5th generation */
#define CKPT_MIN 256          /* a checkpoint's opaque payload, before base64 */
#define CKPT_MAX 4096
#define WRITE_MIN 16          /* a pending write's value, before base64 */
#define WRITE_MAX 512
#define CKPT_TASKS_MAX 2      /* tasks with writes per checkpoint: 1 or 2 */
#define TASK_WRITES_MAX 2     /* writes per task: 1 or 2 */

/* Salts of seed_of() for checkpoint contents (below 256, beside the events'
 * kinds, PERCENT + 1 + key and PERCENT * 2 + artifact name). */
#define SALT_CKPT 210
#define SALT_TASKS 211
#define SALT_WRITE 212 /* + task * TASK_WRITES_MAX + idx */
#define CKPT_ID_LEN 16 /* "ck" and a 10-digit number */
#define CKPT_TYPE "msgpack" /* the serializer's tag of payloads and writes */

#define STATE_KEYS 4
#define ARTIFACT_NAMES 3
#define PICK_TRIES 8          /* Zipf draws of a busy chat before taking any free one */
#define IO_TIMEOUT_S 60       /* an answer slower than this is a transport error */
#define RESTART_WAIT_S 120    /* memd answers this soon after a restart, or the run fails */
#define POLL_MS 5
#define START_WAIT_S 60
#define STOP_WAIT_S 60
#define RSS_FLAT_TOLERANCE 0.10 /* flat: the last third's max within 10% of the second third's */
#define RSS_MIN_SAMPLES 3
#define MAX_ERROR_LINES 30
#define MAX_MISSING_LINES 20
#define VERIFY_PAGE 250 /* events per page read back: the smoke test's busiest sessions span pages */
#define VERIFY_CKPT_PAGE 50 /* checkpoints (full, with their writes) per page read back: most of
			     * the smoke test's busy sessions span pages */
#define VERIFY_THREADS_MAX 8
#define PATH_LEN 512
#define SESS_PATH_LEN (2 * PATH_LEN)
#define REQ_PATH_LEN (SESS_PATH_LEN + 128) /* a session path and what follows it */
#define PAGE_PATH_LEN (REQ_PATH_LEN + PATH_LEN) /* and a page's cursor */
#define ID_LEN 128
#define HEAD_MAX 2048
#define HTTP_NO_CONTENT 204
#define BUF_INITIAL 65536
#define NS_PER_SEC 1000000000LL
#define NS_PER_MS 1e6
#define KIB 1024.0
#define P50 0.50
#define P99 0.99

enum op { OP_OPEN, OP_CREATE, OP_APPEND, OP_CONTEXT, OP_SEARCH, OP_ARTIFACT, OP_STATE, OP_CKPT,
	  OP_WRITES, OP_LATEST, OP_COUNT };
static const char *const op_name[OP_COUNT] = { "open",   "create",   "append", "context",
					       "search", "artifact", "state",  "ckpt",
					       "writes", "latest" };

/* What an event is, which decides its role and content. */
enum kind { K_USER, K_ANSWER, K_CALL, K_RESULT };

static const char *const state_key[STATE_KEYS] = { "turns", "topic", "profile", "scratch" };
static const char *const artifact_name[ARTIFACT_NAMES] = { "notes.md", "plan.json", "output.txt" };
static const char *const artifact_type[ARTIFACT_NAMES] = { "text/markdown", "application/json",
							   "text/plain" };
static const char *const tool_name[] = { "search_web", "read_file", "run_python", "get_weather",
					 "calendar_lookup", "send_email" };
#define TOOL_COUNT (sizeof(tool_name) / sizeof(tool_name[0]))
static const char *const node_name[] = { "agent", "tools", "retrieve", "summarize" };
#define NODE_COUNT (sizeof(node_name) / sizeof(node_name[0]))
static const char *const channel_name[] = { "messages", "branch:to:tools", "next", "scratchpad" };
#define CHANNEL_COUNT (sizeof(channel_name) / sizeof(channel_name[0]))

static const char *const vocab[] = {
	"the", "a", "to", "and", "of", "in", "is", "it", "that", "for", "you", "with", "on", "this",
	"be", "can", "we", "not", "are", "have", "will", "if", "or", "but", "so", "what", "how",
	"project", "deadline", "meeting", "report", "budget", "design", "server", "database",
	"memory", "session", "context", "search", "answer", "question", "python", "function",
	"error", "timeout", "latency", "deploy", "release", "branch", "merge", "review", "test",
	"coffee", "weather", "travel", "flight", "hotel", "booking", "invoice", "customer",
	"support", "ticket", "priority", "schedule", "calendar", "weekend", "morning", "evening",
	"recipe", "garden", "music", "guitar", "piano", "novel", "chapter", "summary", "draft",
	"email", "message", "phone", "address", "contract", "lawyer", "doctor", "appointment",
	"allergy", "running", "marathon", "training", "diet", "protein", "vegetables", "budgeting",
	"savings", "mortgage", "interest", "stocks", "portfolio", "kubernetes", "container",
	"cluster", "backup", "restore", "encryption", "password", "network", "router", "printer",
	"spreadsheet", "formula", "chart", "presentation", "slides", "keynote", "conference",
	"berlin", "paris", "tokyo", "lisbon", "oslo", "quarterly", "annual", "migration",
	"postgres", "sqlite", "benchmark", "profile", "cache", "index", "query", "latest",
};
#define VOCAB_COUNT (sizeof(vocab) / sizeof(vocab[0]))

/* ---- the run ------------------------------------------------------------------------------ */

typedef struct samples {
	int64_t *v;
	size_t n, cap;
} samples;

typedef struct acked_event {
	uint32_t n;   /* the chat's event number: its id, kind and content follow */
	uint32_t seq; /* as the append answered */
	uint8_t kind;
} acked_event;

typedef struct acked_artifact {
	uint32_t gen;     /* the content's generation */
	uint32_t version; /* as the put answered */
	uint8_t name;
} acked_artifact;

/* A state key: its last acknowledged value's generation and the newest one
 * sent (a value sent after the last acknowledged one and never answered
 * may be there instead). 0: none. */
typedef struct key_mark {
	uint32_t acked, sent;
} key_mark;

/* A run checkpoint as its put was acknowledged: its number n gives its
 * id, payload, metadata and its tasks' writes (generated again from the
 * seed); parent is the number of the session's checkpoint before it (0:
 * none). Bit k of tasks_sent / tasks_acked: task k's writes were sent /
 * acknowledged (sent but never answered: they may or may not be there). */
typedef struct acked_ckpt {
	uint32_t n, parent;
	uint8_t tasks_sent, tasks_acked;
} acked_ckpt;

typedef struct sess {
	char id[ID_LEN];
	char path[SESS_PATH_LEN]; /* /v1/apps/soak/users/{user}/sessions/{id}, encoded */
	acked_event *ev;
	size_t nev, evcap;
	acked_artifact *art;
	size_t nart, artcap;
	key_mark keys[STATE_KEYS];
	acked_ckpt *ck; /* ascending n */
	size_t nck, ckcap;
	uint32_t ck_sent; /* the newest checkpoint number put (acknowledged or not); 0: none */
} sess;

typedef struct chat {
	atomic_flag busy;
	uint32_t idx;
	int lane; /* 1: opens a lane at every step; 0: creates its session once */
	char upath[PATH_LEN]; /* /v1/apps/soak/users/{user}, encoded; "" until known */
	char source[PATH_LEN]; /* the lanes:open body */
	sess **sess;           /* the sessions it wrote to; the last is current */
	size_t nsess;
	uint32_t next_n;   /* the next event number */
	uint32_t next_gen; /* the next state or artifact generation */
	uint32_t next_ck;  /* the next checkpoint number: ids increase across its sessions */
} chat;

/* One keep-alive connection to memd, with a growing answer buffer. */
typedef struct hconn {
	int fd;
	unsigned epoch; /* run.epoch when dialled */
	char *buf;      /* the last answer, head and body, NUL-terminated */
	size_t cap, len, head, body_len;
} hconn;

typedef struct worker {
	pthread_t t;
	int i;
	hconn c;
	uint64_t rng;
	pthread_mutex_t mu; /* guards cur: the reporter takes it every interval */
	samples cur[OP_COUNT];
} worker;

static struct {
	const char *store; /* "sqlite" | "postgres" */
	double seconds, kill_at, interval, zipf;
	int conns, chats, keep, no_index;
	uint64_t seed;
	char schema[64];
	chat *chat;
	double *cdf;
	worker *w;
	atomic_int stop;

	/* memd's life: epoch is odd while memd is killed and not yet answering
	 * again; a connection dialled in an older epoch spoke to a dead memd. */
	pthread_mutex_t mu;
	pthread_cond_t up;
	atomic_uint epoch;
	int restarts;
	double recovery_health_s, recovery_ready_s, recovery_first_s;
	atomic_llong kill_ns, first_after_ns;

	atomic_ullong errors[OP_COUNT], retried[OP_COUNT], conflicts_expected, replays;
	atomic_ullong events_acked;
	pthread_mutex_t print_mu;
	int error_lines;
} run = { .seconds = DEFAULT_SECONDS, .interval = DEFAULT_INTERVAL_S, .zipf = DEFAULT_ZIPF_S,
	  .conns = DEFAULT_CONNS, .chats = DEFAULT_CHATS, .seed = DEFAULT_SEED,
	  .mu = PTHREAD_MUTEX_INITIALIZER, .up = PTHREAD_COND_INITIALIZER,
	  .print_mu = PTHREAD_MUTEX_INITIALIZER };

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * NS_PER_SEC + ts.tv_nsec;
}

static void *xrealloc(void *p, size_t n)
{
	void *q = realloc(p, n ? n : 1);
	if (!q)
		bench_die("memory", "out of memory");
	return q;
}

static void add_sample(samples *s, int64_t v)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 1024;
		s->v = xrealloc(s->v, s->cap * sizeof(*s->v));
	}
	s->v[s->n++] = v;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

/* The q-quantile of sorted s in ms (0 when empty). */
static double quantile_ms(const samples *s, double q)
{
	return s->n ? (double)s->v[(size_t)((double)(s->n - 1) * q)] / NS_PER_MS : 0;
}

/* ---- deterministic content: generated again at the check ---------------------------------- */

static uint64_t splitmix(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* A generator for what (chat, number, salt) holds, the same every time. */
static uint64_t seed_of(uint32_t chat_idx, uint32_t n, uint32_t salt)
{
	uint64_t x = run.seed ^ ((uint64_t)chat_idx << 40) ^ ((uint64_t)salt << 32) ^ n;
	splitmix(&x);
	return x;
}

static double unit(uint64_t *r)
{
	return (double)(splitmix(r) >> 11) / (double)(1ULL << 53);
}

static size_t log_uniform(uint64_t *r, size_t min, size_t max)
{
	return (size_t)((double)min * exp(unit(r) * log((double)max / (double)min)));
}

/* About `len` bytes of sentences from the vocabulary, in a new string. */
static char *words(uint64_t *r, size_t len)
{
	char *s = xrealloc(NULL, len + 64);
	size_t o = 0;
	int in_sentence = 0;

	while (o < len) {
		const char *w = vocab[splitmix(r) % VOCAB_COUNT];
		size_t wl = strlen(w);
		if (o)
			s[o++] = ' ';
		memcpy(s + o, w, wl);
		if (!in_sentence && s[o] >= 'a' && s[o] <= 'z')
			s[o] = (char)(s[o] - 'a' + 'A');
		o += wl;
		in_sentence = 1;
		if (splitmix(r) % 10 == 0) { /* a sentence ends; now and then a paragraph */
			s[o++] = '.';
			if (splitmix(r) % 4 == 0)
				s[o++] = '\n';
			in_sentence = 0;
		}
	}
	s[o] = '\0';
	return s;
}

static json_t *text_part(uint64_t *r, size_t min, size_t max)
{
	char *t = words(r, log_uniform(r, min, max));
	json_t *p = json_pack("{s:s}", "text", t);
	free(t);
	return p;
}

static void event_id(const chat *c, uint32_t n, char *out, size_t cap)
{
	snprintf(out, cap, "c%u-%u", c->idx, n);
}

static const char *kind_role(int kind)
{
	return kind == K_USER ? "user" : kind == K_RESULT ? "tool" : "assistant";
}

/* The content of the chat's event n of kind, as sent and as it must read back. */
static json_t *event_content(const chat *c, uint32_t n, int kind)
{
	uint64_t r = seed_of(c->idx, n, (uint32_t)kind);
	char call_id[ID_LEN];
	json_t *parts = json_array();

	if (kind == K_USER) {
		json_array_append_new(parts, text_part(&r, USER_MIN, USER_MAX));
	} else if (kind == K_ANSWER) {
		json_array_append_new(parts, text_part(&r, ANSWER_MIN, ANSWER_MAX));
	} else if (kind == K_CALL) {
		uint64_t q = seed_of(c->idx, n, PERCENT);
		char *args = words(&q, TOPIC_MIN);
		snprintf(call_id, sizeof(call_id), "call-%u-%u", c->idx, n);
		json_array_append_new(parts, text_part(&r, CALL_TEXT_MIN, CALL_TEXT_MAX));
		json_array_append_new(parts, json_pack("{s:{s:s,s:s,s:{s:s}}}", "tool_call", "id",
						       call_id, "name",
						       tool_name[seed_of(c->idx, n, 0) % TOOL_COUNT],
						       "args", "query", args));
		free(args);
	} else { /* the result of the call that is event n - 1 */
		char *t = words(&r, log_uniform(&r, RESULT_MIN, RESULT_MAX));
		snprintf(call_id, sizeof(call_id), "call-%u-%u", c->idx, n - 1);
		json_array_append_new(parts, json_pack("{s:{s:s,s:s,s:s}}", "tool_result", "id", call_id,
						       "name",
						       tool_name[seed_of(c->idx, n - 1, 0) % TOOL_COUNT],
						       "content", t));
		free(t);
	}
	return json_pack("{s:o}", "parts", parts);
}

/* State key k's value at generation gen (a new reference; NULL: deleted). */
static json_t *state_value(const chat *c, int k, uint32_t gen)
{
	uint64_t r = seed_of(c->idx, gen, PERCENT + 1 + (uint32_t)k);
	char *t;
	json_t *v;

	switch (k) {
	case 0:
		return json_pack("{s:I,s:I}", "gen", (json_int_t)gen, "v",
				 (json_int_t)(splitmix(&r) % 1000));
	case 1:
		t = words(&r, log_uniform(&r, TOPIC_MIN, TOPIC_MAX));
		v = json_pack("{s:I,s:s}", "gen", (json_int_t)gen, "v", t);
		free(t);
		return v;
	case 2:
		v = json_pack("{s:I,s:s,s:[]}", "gen", (json_int_t)gen, "lang", "en", "tags");
		for (int i = 0; i < TAG_COUNT; i++)
			json_array_append_new(json_object_get(v, "tags"),
					      json_string(vocab[splitmix(&r) % VOCAB_COUNT]));
		return v;
	default:
		if (gen % SCRATCH_DELETE_EVERY == 0)
			return NULL;
		t = words(&r, log_uniform(&r, SCRATCH_MIN, SCRATCH_MAX));
		v = json_pack("{s:I,s:s}", "gen", (json_int_t)gen, "v", t);
		free(t);
		return v;
	}
}

/* Artifact `name` at generation gen: its bytes in a new string. */
static char *artifact_body(const chat *c, int name, uint32_t gen)
{
	uint64_t r = seed_of(c->idx, gen, PERCENT * 2 + (uint32_t)name);
	char *t = words(&r, log_uniform(&r, ARTIFACT_MIN, ARTIFACT_MAX));
	if (name == 1) { /* plan.json: a JSON document */
		json_t *j = json_pack("{s:I,s:s}", "gen", (json_int_t)gen, "plan", t);
		char *s = json_dumps(j, JSON_COMPACT);
		json_decref(j);
		free(t);
		if (!s)
			bench_die("artifact", "out of memory");
		return s;
	}
	return t;
}

/* ---- run checkpoints: generated again at the check too ------------------------------------ */

static const char b64_alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
				   "abcdefghijklmnopqrstuvwxyz0123456789+/";

/* in[0..n) as padded standard base64, in a new string. */
static char *base64(const unsigned char *in, size_t n)
{
	char *out = xrealloc(NULL, (n + 2) / 3 * 4 + 1);
	size_t o = 0;

	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < n ? (uint32_t)in[i + 1] << 8 : 0) |
			     (i + 2 < n ? in[i + 2] : 0);
		out[o++] = b64_alphabet[v >> 18 & 63];
		out[o++] = b64_alphabet[v >> 12 & 63];
		out[o++] = i + 1 < n ? b64_alphabet[v >> 6 & 63] : '=';
		out[o++] = i + 2 < n ? b64_alphabet[v & 63] : '=';
	}
	out[o] = '\0';
	return out;
}

/* min to max opaque bytes (log-uniform; any byte value) from r, as base64 in a new string. */
static char *opaque_b64(uint64_t *r, size_t min, size_t max)
{
	size_t n = log_uniform(r, min, max);
	unsigned char *b = xrealloc(NULL, n);
	char *s;

	for (size_t i = 0; i < n; i++)
		b[i] = (unsigned char)splitmix(r);
	s = base64(b, n);
	free(b);
	return s;
}

/* Checkpoint n's id: fixed width, so that ids order as bytes as their numbers do. */
static void ckpt_id(uint32_t n, char *out, size_t cap)
{
	snprintf(out, cap, "ck%010u", n);
}

/* The number of the checkpoint id s; 0 when s is not one of ckpt_id's. */
static uint32_t ckpt_number(const char *s)
{
	unsigned n;
	return s && strlen(s) == strlen("ck") + 10 && sscanf(s, "ck%10u", &n) == 1 ? n : 0;
}

/* Checkpoint n of chat c's payload, as base64 in a new string. */
static char *ckpt_payload(const chat *c, uint32_t n)
{
	uint64_t r = seed_of(c->idx, n, SALT_CKPT);
	return opaque_b64(&r, CKPT_MIN, CKPT_MAX);
}

static json_t *ckpt_metadata(uint32_t n)
{
	return json_pack("{s:I,s:s}", "step", (json_int_t)n, "source", "loop");
}

/* Checkpoint n of chat c's pending writes as LangGraph sends them after
 * its put: a new array of one or two tasks' writes request bodies
 * ({task_id, task_path, writes: one or two of {idx, channel, type, value}}). */
static json_t *ckpt_writes(const chat *c, uint32_t n)
{
	uint64_t r = seed_of(c->idx, n, SALT_TASKS);
	int ntasks = 1 + (int)(splitmix(&r) % CKPT_TASKS_MAX);
	json_t *tasks = json_array();

	for (int k = 0; k < ntasks; k++) {
		int nw = 1 + (int)(splitmix(&r) % TASK_WRITES_MAX);
		char tid[ID_LEN], tpath[ID_LEN];
		json_t *ws = json_array();

		snprintf(tid, sizeof(tid), "task-c%u-%u-%d", c->idx, n, k);
		snprintf(tpath, sizeof(tpath), "~__pregel_pull, %s",
			 node_name[splitmix(&r) % NODE_COUNT]);
		for (int i = 0; i < nw; i++) {
			uint64_t q = seed_of(c->idx, n, SALT_WRITE + (uint32_t)(k * TASK_WRITES_MAX + i));
			const char *ch = channel_name[splitmix(&q) % CHANNEL_COUNT];
			char *v = opaque_b64(&q, WRITE_MIN, WRITE_MAX);
			json_array_append_new(ws, json_pack("{s:i,s:s,s:s,s:s}", "idx", i, "channel", ch,
							    "type", CKPT_TYPE, "value", v));
			free(v);
		}
		json_array_append_new(tasks, json_pack("{s:s,s:s,s:o}", "task_id", tid, "task_path",
						       tpath, "writes", ws));
	}
	return tasks;
}

static const char *jstr(json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key)) ?: "";
}

/* Pending writes a and b in the order memd answers them: (task_path,
 * task_id, idx), strings by code point (bytes, in UTF-8). */
static int write_order(json_t *a, json_t *b)
{
	int d = strcmp(jstr(a, "task_path"), jstr(b, "task_path"));
	json_int_t x, y;

	if (d || (d = strcmp(jstr(a, "task_id"), jstr(b, "task_id"))))
		return d;
	x = json_integer_value(json_object_get(a, "idx"));
	y = json_integer_value(json_object_get(b, "idx"));
	return (x > y) - (x < y);
}

/* Whether pending writes pw are those of checkpoint a (tasks its ckpt_writes())
 * as acknowledged: NULL, or what differs (*ret_missing = 1 when an
 * acknowledged write is not there). A write sent and never answered may
 * be there or not. *ret_checked: the acknowledged writes. */
static const char *writes_differ(const acked_ckpt *a, json_t *tasks, json_t *pw, int *ret_missing,
				 size_t *ret_checked)
{
	int seen[CKPT_TASKS_MAX][TASK_WRITES_MAX] = { { 0 } };
	json_t *prev = NULL, *g, *t;
	size_t i, k, checked = 0;

	json_array_foreach(pw, i, g) {
		json_int_t idx = json_integer_value(json_object_get(g, "idx"));
		json_t *want = NULL;
		json_array_foreach(tasks, k, t) {
			if (strcmp(jstr(g, "task_id"), jstr(t, "task_id")) == 0 &&
			    (a->tasks_sent & (1u << k)) && idx >= 0 &&
			    (size_t)idx < json_array_size(json_object_get(t, "writes"))) {
				want = json_array_get(json_object_get(t, "writes"), (size_t)idx);
				seen[k][idx] = 1;
				break;
			}
		}
		if (!want)
			return "a pending write that was never sent";
		if (prev && write_order(prev, g) >= 0)
			return "pending writes out of (task_path, task_id, idx) order";
		if (strcmp(jstr(g, "task_path"), jstr(t, "task_path")) != 0 ||
		    strcmp(jstr(g, "channel"), jstr(want, "channel")) != 0 ||
		    strcmp(jstr(g, "type"), jstr(want, "type")) != 0 ||
		    strcmp(jstr(g, "value"), jstr(want, "value")) != 0)
			return "a pending write with another task path, channel, type or value";
		prev = g;
	}
	json_array_foreach(tasks, k, t) {
		if (!(a->tasks_acked & (1u << k)))
			continue;
		for (i = 0; i < json_array_size(json_object_get(t, "writes")); i++, checked++) {
			if (!seen[k][i]) {
				*ret_missing = 1;
				return "an acknowledged pending write is missing";
			}
		}
	}
	*ret_checked = checked;
	return NULL;
}

/* Whether checkpoint tuple tp is chat c's checkpoint a as acknowledged:
 * NULL, or what differs (*ret_missing, *ret_checked: as writes_differ's). */
static const char *ckpt_differs(const chat *c, const acked_ckpt *a, json_t *tp, int *ret_missing,
				size_t *ret_checked)
{
	char id[CKPT_ID_LEN], pid[CKPT_ID_LEN], *payload = ckpt_payload(c, a->n);
	json_t *meta = ckpt_metadata(a->n), *tasks = ckpt_writes(c, a->n);
	json_t *par = json_object_get(tp, "parent_checkpoint_id"),
	       *pw = json_object_get(tp, "pending_writes");
	const char *why = NULL;

	ckpt_id(a->n, id, sizeof(id));
	ckpt_id(a->parent, pid, sizeof(pid));
	if (strcmp(jstr(tp, "checkpoint_id"), id) != 0)
		why = "another checkpoint id";
	else if (a->parent ? strcmp(json_string_value(par) ?: "", pid) != 0 : !json_is_null(par))
		why = "another parent_checkpoint_id";
	else if (strcmp(jstr(tp, "type"), CKPT_TYPE) != 0)
		why = "another type";
	else if (strcmp(jstr(tp, "checkpoint"), payload) != 0)
		why = "other payload bytes";
	else if (!json_equal(json_object_get(tp, "metadata"), meta))
		why = "other metadata";
	else if (!json_is_array(pw))
		why = "no pending_writes";
	else
		why = writes_differ(a, tasks, pw, ret_missing, ret_checked);
	free(payload);
	json_decref(meta);
	json_decref(tasks);
	return why;
}

/* ---- HTTP: keep-alive connections that survive memd's restart ------------------------------ */

static void conn_close(hconn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
}

static int dial(hconn *c)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)bench.port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct timeval tv = { .tv_sec = IO_TIMEOUT_S };
	int one = 1;

	c->epoch = atomic_load(&run.epoch);
	c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
		conn_close(c);
		return -1;
	}
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	return 0;
}

static int send_all(int fd, struct iovec *iov, int n)
{
	while (n > 0) {
		struct msghdr m = { .msg_iov = iov, .msg_iovlen = (size_t)n };
		ssize_t w = sendmsg(fd, &m, MSG_NOSIGNAL);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		while (n > 0 && (size_t)w >= iov->iov_len) {
			w -= (ssize_t)iov->iov_len;
			iov++;
			n--;
		}
		if (n > 0) {
			iov->iov_base = (char *)iov->iov_base + w;
			iov->iov_len -= (size_t)w;
		}
	}
	return 0;
}

/* Send one request on c (dialling first if needed) and read its whole
 * answer into c->buf: its status, or -1 on a transport error (c closed). */
static int http_do(hconn *c, const char *method, const char *path, const char *ctype,
		   const char *body, size_t blen)
{
	char head[HEAD_MAX];
	struct iovec iov[2];
	size_t need = 0;
	int n, status = -1;

	if (c->fd < 0 && dial(c) < 0)
		return -1;
	if (body)
		n = snprintf(head, sizeof(head),
			     "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: %s\r\n"
			     "Content-Length: %zu\r\n\r\n", method, path, ctype, blen);
	else
		n = snprintf(head, sizeof(head), "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", method,
			     path);
	if (n < 0 || (size_t)n >= sizeof(head))
		bench_die("request", "path too long");
	iov[0] = (struct iovec){ head, (size_t)n };
	iov[1] = (struct iovec){ (void *)body, body ? blen : 0 };
	if (send_all(c->fd, iov, body ? 2 : 1) < 0)
		goto reset;
	c->len = 0;
	for (;;) {
		ssize_t r;
		char *end;
		if (c->cap - c->len < BUF_INITIAL / 2) {
			c->cap = c->cap ? c->cap * 2 : BUF_INITIAL;
			c->buf = xrealloc(c->buf, c->cap);
		}
		r = recv(c->fd, c->buf + c->len, c->cap - 1 - c->len, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			goto reset;
		c->len += (size_t)r;
		c->buf[c->len] = '\0';
		if (!need && (end = strstr(c->buf, "\r\n\r\n"))) {
			char *cl = strcasestr(c->buf, "\r\nContent-Length:");
			c->head = (size_t)(end + 4 - c->buf);
			if (sscanf(c->buf, "HTTP/1.%*d %d", &status) != 1)
				goto reset;
			if (cl && cl < end)
				c->body_len = strtoul(cl + strlen("\r\nContent-Length:"), NULL, 10);
			else if (status == HTTP_NO_CONTENT) /* no body, no Content-Length */
				c->body_len = 0;
			else
				goto reset;
			need = c->head + c->body_len;
		}
		if (need && c->len >= need)
			break;
	}
	if (strcasestr(c->buf, "\r\nConnection: close"))
		conn_close(c);
	return status;
reset:
	conn_close(c);
	return -1;
}

static const char *body_of(const hconn *c)
{
	return c->buf + c->head;
}

static json_t *body_json(const hconn *c)
{
	return json_loadb(body_of(c), c->body_len, 0, NULL);
}

/* A header's value in c's answer (up to the line's end) into out. */
static int header(const hconn *c, const char *name, char *out, size_t cap)
{
	char pat[64];
	const char *h, *e;
	snprintf(pat, sizeof(pat), "\r\n%s:", name);
	h = strcasestr(c->buf, pat);
	if (!h || (size_t)(h - c->buf) >= c->head)
		return -1;
	h += strlen(pat);
	while (*h == ' ')
		h++;
	e = strstr(h, "\r\n");
	snprintf(out, cap, "%.*s", (int)(e - h), h);
	return 0;
}

/* Wait (bounded) until memd answers again after a kill: 0, or -1. */
static int wait_up(void)
{
	struct timespec until;
	int r = 0;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += RESTART_WAIT_S;
	pthread_mutex_lock(&run.mu);
	while (atomic_load(&run.epoch) % 2 == 1 && r == 0)
		r = pthread_cond_timedwait(&run.up, &run.mu, &until);
	pthread_mutex_unlock(&run.mu);
	return atomic_load(&run.epoch) % 2 == 1 ? -1 : 0;
}

static void report_error(int op, const char *method, const char *path, const char *what)
{
	atomic_fetch_add(&run.errors[op], 1);
	pthread_mutex_lock(&run.print_mu);
	if (run.error_lines++ < MAX_ERROR_LINES)
		fprintf(stderr, "soak_bench: error: %s %s %s: %s\n", op_name[op], method, path, what);
	pthread_mutex_unlock(&run.print_mu);
}

/* A request of operation op, timed into the worker's samples: its status
 * (the answer in w->c), or -1 after counting a transport error. A request
 * that a kill of memd cut off (its connection was dialled before the kill,
 * or it was sent while memd was down) waits until memd answers again and
 * is sent again; *retried is set then. */
static int call(worker *w, int op, const char *method, const char *path, const char *ctype,
		const char *body, size_t blen, int *retried)
{
	for (;;) {
		unsigned e0 = w->c.fd >= 0 ? w->c.epoch : atomic_load(&run.epoch);
		int64_t t0 = now_ns(), t1;
		int st = http_do(&w->c, method, path, ctype, body, blen);
		if (st >= 0) {
			t1 = now_ns();
			pthread_mutex_lock(&w->mu);
			add_sample(&w->cur[op], t1 - t0);
			pthread_mutex_unlock(&w->mu);
			/* The first answer of the restarted memd (a connection
			 * dialled after the kill began). */
			if (e0 >= 1 && st / 100 == 2) {
				long long zero = 0;
				atomic_compare_exchange_strong(&run.first_after_ns, &zero, t1);
			}
			return st;
		}
		if (e0 % 2 == 0 && atomic_load(&run.epoch) == e0) {
			report_error(op, method, path, "transport error (no answer)");
			return -1;
		}
		if (wait_up() < 0) {
			report_error(op, method, path, "memd did not answer again after the kill");
			return -1;
		}
		atomic_fetch_add(&run.retried[op], 1);
		*retried = 1;
	}
}

/* call() wanting status want: 0, or -1 after counting an error. */
static int call_want(worker *w, int op, const char *method, const char *path, const char *ctype,
		     const char *body, size_t blen, int want, int *retried)
{
	int st = call(w, op, method, path, ctype, body, blen, retried);
	char what[256];

	if (st < 0)
		return -1;
	if (st == want)
		return 0;
	snprintf(what, sizeof(what), "status %d, want %d: %.160s", st, want, body_of(&w->c));
	report_error(op, method, path, what);
	return -1;
}

static char *dump(json_t *j)
{
	char *s = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	if (!s)
		bench_die("json", "out of memory");
	return s;
}

/* ---- a chat's step ------------------------------------------------------------------------- */

static sess *current(chat *c)
{
	return c->nsess ? c->sess[c->nsess - 1] : NULL;
}

static sess *add_sess(chat *c, const char *user, const char *id)
{
	char u[ID_LEN * 3], s[ID_LEN * 3];
	sess *x = calloc(1, sizeof(*x));
	if (!x)
		bench_die("memory", "out of memory");
	bench_encode_segment(user, u, sizeof(u));
	bench_encode_segment(id, s, sizeof(s));
	snprintf(c->upath, sizeof(c->upath), "/v1/apps/" APP "/users/%s", u);
	snprintf(x->id, sizeof(x->id), "%s", id);
	snprintf(x->path, sizeof(x->path), "%s/sessions/%s", c->upath, s);
	c->sess = xrealloc(c->sess, (c->nsess + 1) * sizeof(*c->sess));
	c->sess[c->nsess++] = x;
	return x;
}

/* Open the chat's lane; follow its session if the lane started a new one. */
static int do_open(worker *w, chat *c)
{
	int retried = 0;
	json_t *o;
	const char *user, *sid;
	int r = -1;

	if (call_want(w, OP_OPEN, "POST", "/v1/apps/" APP "/lanes:open", "application/json",
		      c->source, strlen(c->source), 200, &retried) < 0)
		return -1;
	o = body_json(&w->c);
	user = json_string_value(json_object_get(o, "user"));
	sid = json_string_value(json_object_get(json_object_get(o, "session"), "id"));
	if (!user || !sid) {
		report_error(OP_OPEN, "POST", "lanes:open", "answer without user or session.id");
	} else {
		if (!current(c) || strcmp(current(c)->id, sid) != 0)
			add_sess(c, user, sid);
		r = 0;
	}
	json_decref(o);
	return r;
}

static int do_create(worker *w, chat *c)
{
	char user[ID_LEN], sid[ID_LEN], upath[PATH_LEN], path[REQ_PATH_LEN], *body;
	int retried = 0, st;

	snprintf(user, sizeof(user), "u%u", c->idx / CHATS_PER_USER);
	snprintf(sid, sizeof(sid), "s-c%u", c->idx);
	snprintf(upath, sizeof(upath), "/v1/apps/" APP "/users/%s", user);
	snprintf(path, sizeof(path), "%s/sessions", upath);
	body = dump(json_pack("{s:s,s:s}", "id", sid, "title", "soak"));
	st = call(w, OP_CREATE, "POST", path, "application/json", body, strlen(body), &retried);
	free(body);
	if (st < 0)
		return -1;
	if (st == 409 && retried) {
		/* The create the kill cut off did commit. */
		atomic_fetch_add(&run.conflicts_expected, 1);
	} else if (st != 201) {
		char what[256];
		snprintf(what, sizeof(what), "status %d, want 201: %.160s", st, body_of(&w->c));
		report_error(OP_CREATE, "POST", path, what);
		return -1;
	}
	add_sess(c, user, sid);
	return 0;
}

/* Append the events of kinds[0..n) as one append; record them when acknowledged. */
static int do_append(worker *w, chat *c, sess *s, const int *kinds, int n)
{
	char path[REQ_PATH_LEN], id[ID_LEN], *body;
	json_t *evs = json_array(), *o, *seqs;
	uint32_t first = c->next_n;
	int retried = 0, r = -1;

	c->next_n += (uint32_t)n;
	for (int i = 0; i < n; i++) {
		event_id(c, first + (uint32_t)i, id, sizeof(id));
		json_array_append_new(evs, json_pack("{s:s,s:s,s:o}", "id", id, "role",
						     kind_role(kinds[i]), "content",
						     event_content(c, first + (uint32_t)i, kinds[i])));
	}
	body = dump(json_pack("{s:o}", "events", evs));
	snprintf(path, sizeof(path), "%s/events", s->path);
	if (call_want(w, OP_APPEND, "POST", path, "application/json", body, strlen(body), 200,
		      &retried) < 0) {
		free(body);
		return -1;
	}
	free(body);
	o = body_json(&w->c);
	seqs = json_object_get(o, "seqs");
	if (json_array_size(seqs) != (size_t)n) {
		report_error(OP_APPEND, "POST", path, "answer without a seq per event");
	} else if (json_is_true(json_object_get(o, "replayed")) && !retried) {
		report_error(OP_APPEND, "POST", path, "replayed: true for new event ids");
	} else {
		if (json_is_true(json_object_get(o, "replayed")))
			atomic_fetch_add(&run.replays, 1); /* the append the kill cut off had committed */
		for (int i = 0; i < n; i++) {
			if (s->nev == s->evcap) {
				s->evcap = s->evcap ? s->evcap * 2 : 64;
				s->ev = xrealloc(s->ev, s->evcap * sizeof(*s->ev));
			}
			s->ev[s->nev++] = (acked_event){
				.n = first + (uint32_t)i,
				.seq = (uint32_t)json_integer_value(json_array_get(seqs, (size_t)i)),
				.kind = (uint8_t)kinds[i] };
		}
		atomic_fetch_add(&run.events_acked, (unsigned long long)n);
		r = 0;
	}
	json_decref(o);
	return r;
}

static int do_context(worker *w, sess *s)
{
	char path[REQ_PATH_LEN];
	int retried = 0;
	snprintf(path, sizeof(path), "%s/context", s->path);
	return call_want(w, OP_CONTEXT, "GET", path, NULL, NULL, 0, 200, &retried);
}

static int do_search(worker *w, chat *c, sess *s)
{
	char path[REQ_PATH_LEN], q[256] = "", *body;
	int retried = 0, r;
	json_t *req;

	for (int i = 0; i < QUERY_WORDS; i++) {
		strcat(q, i ? " " : "");
		strcat(q, vocab[splitmix(&w->rng) % VOCAB_COUNT]);
	}
	req = json_pack("{s:s,s:i}", "query", q, "k", SEARCH_K);
	if (splitmix(&w->rng) % 2) /* half within the session, half over the user's */
		json_object_set_new(req, "session_id", json_string(s->id));
	body = dump(req);
	snprintf(path, sizeof(path), "%s/search", c->upath);
	r = call_want(w, OP_SEARCH, "POST", path, "application/json", body, strlen(body), 200,
		      &retried);
	free(body);
	return r;
}

static int do_artifact(worker *w, chat *c, sess *s)
{
	int name = (int)(splitmix(&w->rng) % ARTIFACT_NAMES), retried = 0;
	uint32_t gen = ++c->next_gen;
	char path[REQ_PATH_LEN], *body = artifact_body(c, name, gen);
	json_t *o;
	json_int_t v;

	snprintf(path, sizeof(path), "%s/artifacts/%s", s->path, artifact_name[name]);
	if (call_want(w, OP_ARTIFACT, "PUT", path, artifact_type[name], body, strlen(body), 201,
		      &retried) < 0) {
		free(body);
		return -1;
	}
	free(body);
	o = body_json(&w->c);
	v = json_integer_value(json_object_get(o, "version"));
	json_decref(o);
	if (v < 1) {
		report_error(OP_ARTIFACT, "PUT", path, "answer without a version");
		return -1;
	}
	if (s->nart == s->artcap) {
		s->artcap = s->artcap ? s->artcap * 2 : 8;
		s->art = xrealloc(s->art, s->artcap * sizeof(*s->art));
	}
	s->art[s->nart++] = (acked_artifact){ .gen = gen, .version = (uint32_t)v, .name = (uint8_t)name };
	return 0;
}

static int do_state(worker *w, chat *c, sess *s)
{
	uint32_t gen = ++c->next_gen;
	int mask = (int)(splitmix(&w->rng) % ((1u << STATE_KEYS) - 1)) + 1, retried = 0, r;
	char path[REQ_PATH_LEN], *body;
	json_t *delta = json_object();

	for (int k = 0; k < STATE_KEYS; k++) {
		if (!(mask & (1 << k)))
			continue;
		json_t *v = state_value(c, k, gen);
		json_object_set_new(delta, state_key[k], v ? v : json_null());
		s->keys[k].sent = gen;
	}
	body = dump(delta);
	snprintf(path, sizeof(path), "%s/state", s->path);
	r = call_want(w, OP_STATE, "PATCH", path, "application/json", body, strlen(body), 200,
		      &retried);
	free(body);
	if (r == 0)
		for (int k = 0; k < STATE_KEYS; k++)
			if (mask & (1 << k))
				s->keys[k].acked = gen;
	return r;
}

/* Put checkpoint c->next_ck of the session (its parent the session's last
 * acknowledged one), then its tasks' pending writes, one request a task,
 * as LangGraph does after a step; record what was acknowledged. A put or
 * writes request the kill cut off is sent again as it was: a second put
 * of an id replaces it (keeping its writes), a write stored already is
 * kept. */
static int do_ckpt(worker *w, chat *c, sess *s)
{
	uint32_t n = c->next_ck++, parent = s->nck ? s->ck[s->nck - 1].n : 0;
	char id[CKPT_ID_LEN], pid[CKPT_ID_LEN], path[REQ_PATH_LEN], *payload = ckpt_payload(c, n);
	char *body;
	json_t *tasks, *o, *t;
	acked_ckpt *a;
	size_t k;
	int retried = 0, r;

	ckpt_id(n, id, sizeof(id));
	ckpt_id(parent, pid, sizeof(pid));
	body = dump(json_pack("{s:o,s:s,s:s,s:o}", "parent_checkpoint_id",
			      parent ? json_string(pid) : json_null(), "type", CKPT_TYPE, "checkpoint",
			      payload, "metadata", ckpt_metadata(n)));
	free(payload);
	snprintf(path, sizeof(path), "%s/checkpoints/%s", s->path, id);
	s->ck_sent = n;
	r = call_want(w, OP_CKPT, "PUT", path, "application/json", body, strlen(body), 200, &retried);
	free(body);
	if (r < 0)
		return -1;
	o = body_json(&w->c);
	r = strcmp(jstr(o, "checkpoint_id"), id) == 0 ? 0 : -1;
	json_decref(o);
	if (r < 0) {
		report_error(OP_CKPT, "PUT", path, "answer without the checkpoint's id");
		return -1;
	}
	if (s->nck == s->ckcap) {
		s->ckcap = s->ckcap ? s->ckcap * 2 : 16;
		s->ck = xrealloc(s->ck, s->ckcap * sizeof(*s->ck));
	}
	a = &s->ck[s->nck++];
	*a = (acked_ckpt){ .n = n, .parent = parent };
	tasks = ckpt_writes(c, n);
	snprintf(path, sizeof(path), "%s/checkpoints/%s/writes", s->path, id);
	json_array_foreach(tasks, k, t) {
		body = dump(json_incref(t));
		a->tasks_sent |= (uint8_t)(1u << k);
		r = call_want(w, OP_WRITES, "POST", path, "application/json", body, strlen(body), 204,
			      &retried);
		free(body);
		if (r < 0)
			break;
		a->tasks_acked |= (uint8_t)(1u << k);
	}
	json_decref(tasks);
	return r;
}

/* Read the session's newest checkpoint as a resuming runtime does: it
 * must be the last acknowledged put with its acknowledged writes (or one
 * put after it that was never answered). */
static int do_latest(worker *w, chat *c, sess *s)
{
	const acked_ckpt *a = &s->ck[s->nck - 1];
	char path[REQ_PATH_LEN];
	const char *why = NULL;
	int retried = 0, missing = 0;
	size_t checked;
	uint32_t got;
	json_t *o;

	snprintf(path, sizeof(path), "%s/checkpoints:latest", s->path);
	if (call_want(w, OP_LATEST, "GET", path, NULL, NULL, 0, 200, &retried) < 0)
		return -1;
	o = body_json(&w->c);
	got = ckpt_number(json_string_value(json_object_get(o, "checkpoint_id")));
	if (got < a->n || got > s->ck_sent)
		why = "not the newest acknowledged checkpoint";
	else if (got == a->n)
		why = ckpt_differs(c, a, o, &missing, &checked);
	json_decref(o);
	if (why) {
		report_error(OP_LATEST, "GET", path, why);
		return -1;
	}
	return 0;
}

static int percent(worker *w)
{
	return (int)(splitmix(&w->rng) % PERCENT);
}

/* One step of chat c: 0, or -1 when a request failed (the rest is skipped). */
static int step(worker *w, chat *c)
{
	static const int user[] = { K_USER }, answer[] = { K_ANSWER }, tool[] = { K_CALL, K_RESULT };
	sess *s;

	if (c->lane ? do_open(w, c) < 0 : !current(c) && do_create(w, c) < 0)
		return -1;
	s = current(c);
	if (do_append(w, c, s, user, 1) < 0 || do_context(w, s) < 0)
		return -1;
	if (percent(w) < P_TOOL && do_append(w, c, s, tool, 2) < 0)
		return -1;
	if (do_append(w, c, s, answer, 1) < 0)
		return -1;
	if (percent(w) < P_LATEST && s->nck && do_latest(w, c, s) < 0)
		return -1;
	if (percent(w) < P_CKPT && do_ckpt(w, c, s) < 0)
		return -1;
	if (!run.no_index && percent(w) < P_SEARCH && do_search(w, c, s) < 0)
		return -1;
	if (percent(w) < P_ARTIFACT && do_artifact(w, c, s) < 0)
		return -1;
	if (percent(w) < P_STATE && do_state(w, c, s) < 0)
		return -1;
	return 0;
}

/* A chat drawn from the Zipf distribution that no other worker drives. */
static chat *pick(worker *w)
{
	for (int t = 0; t < PICK_TRIES; t++) {
		double u = unit(&w->rng);
		int lo = 0, hi = run.chats - 1;
		while (lo < hi) {
			int mid = (lo + hi) / 2;
			if (run.cdf[mid] < u)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (!atomic_flag_test_and_set(&run.chat[lo].busy))
			return &run.chat[lo];
	}
	for (int i = (int)(splitmix(&w->rng) % (uint64_t)run.chats);; i = (i + 1) % run.chats)
		if (!atomic_flag_test_and_set(&run.chat[i].busy))
			return &run.chat[i];
}

static void *work(void *a)
{
	worker *w = a;
	while (!atomic_load(&run.stop)) {
		chat *c = pick(w);
		step(w, c);
		atomic_flag_clear(&c->busy);
	}
	conn_close(&w->c);
	return NULL;
}

/* ---- memd: start, kill, restart ------------------------------------------------------------ */

static void write_config(void)
{
	char path[PATH_MAX + 16];
	FILE *f;

	snprintf(path, sizeof(path), "%s/soak.yaml", bench.work_dir);
	f = fopen(path, "w");
	if (!f)
		bench_die(path, strerror(errno));
	/* Every connection comes from 127.0.0.1: no per-address limit. No lane
	 * resets by time: a run that passes 04:00 keeps its sessions. */
	fprintf(f, "server:\n  listen: 127.0.0.1:%d\n  log_level: warn\n  max_connections_per_ip: 0\n",
		bench.port);
	if (strcmp(run.store, "postgres") == 0)
		fprintf(f, "stores:\n  main: {plugin: postgres, dsn: \"${MEMD_PG_DSN}\", "
			   "password: \"${MEMD_PG_PASSWORD}\", schema: %s, pool: %d}\n",
			run.schema, PG_POOL);
	else
		fprintf(f, "stores:\n  main: {plugin: sqlite, path: %s/soak.db}\n", bench.work_dir);
	if (run.no_index)
		fprintf(f, "index:\n  keyword:\n    enabled: false\n");
	else
		fprintf(f, "index:\n  keyword:\n    snapshot: %s/keyword.snapshot\n", bench.work_dir);
	fprintf(f, "lanes:\n  reset: {mode: none}\n");
	fclose(f);
}

static int probe(const char *path)
{
	hconn c = { .fd = -1 };
	int st = http_do(&c, "GET", path, NULL, NULL, 0);
	conn_close(&c);
	free(c.buf);
	return st;
}

static int memd_alive(void)
{
	int st;
	return waitpid(bench.memd_pid, &st, WNOHANG) == 0;
}

/* Start memd serve on bench.port with the run's config (log appended to
 * work_dir/memd.log) and wait (bounded) until /healthz answers; then
 * *health_s (and *ready_s, until /readyz does) are the seconds since t0. */
static void start_memd(int64_t t0, double *health_s, double *ready_s)
{
	char cfg[PATH_MAX + 16], log[PATH_MAX + 16];
	pid_t parent = getpid();
	int64_t limit = now_ns() + (int64_t)START_WAIT_S * NS_PER_SEC;

	snprintf(cfg, sizeof(cfg), "%s/soak.yaml", bench.work_dir);
	snprintf(log, sizeof(log), "%s/memd.log", bench.work_dir);
	bench.memd_pid = fork();
	if (bench.memd_pid < 0)
		bench_die("fork", strerror(errno));
	if (bench.memd_pid == 0) {
		FILE *l = freopen(log, "a", stderr);
		(void)l;
		/* memd ends with this process, however it ends. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(127);
		setenv("MEMD_PLUGIN_PATH", bench.plugin_dir, 1);
		execl(bench.memd_exe, "memd", "serve", "--config", cfg, (char *)NULL);
		_exit(127);
	}
	while (probe("/healthz") != 200) {
		if (now_ns() > limit || !memd_alive())
			bench_die("memd serve did not start (see its log)", log);
		usleep(POLL_MS * 1000);
	}
	*health_s = (double)(now_ns() - t0) / NS_PER_SEC;
	while (probe("/readyz") != 200) {
		if (now_ns() > limit || !memd_alive())
			bench_die("memd serve did not become ready (see its log)", log);
		usleep(POLL_MS * 1000);
	}
	*ready_s = (double)(now_ns() - t0) / NS_PER_SEC;
}

/* SIGKILL memd under load, start it again on the same data and port. */
static void kill_and_restart(void)
{
	int64_t t0;
	int st;

	pthread_mutex_lock(&run.mu);
	atomic_fetch_add(&run.epoch, 1); /* odd: down */
	pthread_mutex_unlock(&run.mu);
	t0 = now_ns();
	atomic_store(&run.kill_ns, t0);
	kill(bench.memd_pid, SIGKILL);
	waitpid(bench.memd_pid, &st, 0);
	start_memd(t0, &run.recovery_health_s, &run.recovery_ready_s);
	run.restarts++;
	pthread_mutex_lock(&run.mu);
	atomic_fetch_add(&run.epoch, 1); /* even: up */
	pthread_cond_broadcast(&run.up);
	pthread_mutex_unlock(&run.mu);
}

/* memd's resident set (VmRSS) in KiB, 0 if unknown. */
static long rss_kib(void)
{
	char path[64], line[256];
	long v = 0;
	FILE *f;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)bench.memd_pid);
	if (!(f = fopen(path, "r")))
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld", &v) == 1)
			break;
	fclose(f);
	return v;
}

/* memd's CPU time (user + system) in seconds. */
static double cpu_s(void)
{
	char path[64], buf[1024], *p;
	unsigned long long ut = 0, st = 0;
	size_t n;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)bench.memd_pid);
	if (!(f = fopen(path, "r")))
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	p = strrchr(buf, ')');
	if (!p || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return 0;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* ---- every interval: rates, latency, RSS ----------------------------------------------------- */

typedef struct rss_row {
	double t;
	long rss_kib;
	unsigned epoch;
	unsigned long long events;
} rss_row;

static samples total[OP_COUNT];
static rss_row *rows;
static size_t nrows;

static void print_header(void)
{
	printf("%6s %8s %5s %7s", "t s", "rss MiB", "cpu%", "req/s");
	for (int op = 0; op < OP_COUNT; op++)
		printf(" | %8s/s %6s %6s", op_name[op], "p50", "p99");
	printf(" | errors\n");
}

/* Move the workers' samples so far into iv. */
static void collect(samples iv[OP_COUNT])
{
	for (int i = 0; i < run.conns; i++) {
		worker *w = &run.w[i];
		pthread_mutex_lock(&w->mu);
		for (int op = 0; op < OP_COUNT; op++) {
			for (size_t k = 0; k < w->cur[op].n; k++)
				add_sample(&iv[op], w->cur[op].v[k]);
			w->cur[op].n = 0;
		}
		pthread_mutex_unlock(&w->mu);
	}
}

/* Take the workers' samples of the last dt seconds and print their row. */
static void report(double t, double dt, double cpu_pct)
{
	samples iv[OP_COUNT] = { 0 };
	unsigned long long errs = 0;
	size_t all = 0;
	long rss = rss_kib();

	collect(iv);
	for (int op = 0; op < OP_COUNT; op++) {
		all += iv[op].n;
		errs += atomic_load(&run.errors[op]);
	}
	printf("%6.0f %8.1f %5.0f %7.0f", t, (double)rss / KIB, cpu_pct, (double)all / dt);
	for (int op = 0; op < OP_COUNT; op++) {
		if (iv[op].n)
			qsort(iv[op].v, iv[op].n, sizeof(*iv[op].v), cmp_i64);
		printf(" | %10.1f %6.2f %6.2f", (double)iv[op].n / dt, quantile_ms(&iv[op], P50),
		       quantile_ms(&iv[op], P99));
		for (size_t k = 0; k < iv[op].n; k++)
			add_sample(&total[op], iv[op].v[k]);
		free(iv[op].v);
	}
	printf(" | %llu\n", errs);
	rows = xrealloc(rows, (nrows + 1) * sizeof(*rows));
	rows[nrows++] = (rss_row){ t, rss, atomic_load(&run.epoch), atomic_load(&run.events_acked) };
}

/* Whether memd's RSS stayed flat after warm-up, over the samples of the
 * last memd process (a restart starts from nothing): warm-up is the first
 * third of its samples; flat means the last third's highest RSS is within
 * RSS_FLAT_TOLERANCE of the second third's. Returns 1 flat, 0 not, -1 too
 * few samples. */
static int rss_verdict(void)
{
	size_t first = nrows, n, a, b;
	long max2 = 0, max3 = 0;
	double growth;
	unsigned long long ev;

	while (first > 0 && rows[first - 1].epoch == rows[nrows - 1].epoch)
		first--;
	n = nrows - first;
	if (n < RSS_MIN_SAMPLES || rows[nrows - 1].rss_kib == 0) {
		printf("rss: %zu samples of the last memd process: too few to judge flatness\n", n);
		return -1;
	}
	a = first + n / 3;
	b = first + 2 * n / 3;
	for (size_t i = a; i < b; i++)
		max2 = rows[i].rss_kib > max2 ? rows[i].rss_kib : max2;
	for (size_t i = b; i < nrows; i++)
		max3 = rows[i].rss_kib > max3 ? rows[i].rss_kib : max3;
	growth = (double)(max3 - max2) / (double)max2;
	ev = rows[nrows - 1].events - rows[a].events;
	printf("rss: warm-up = the first third of the samples (until %.0f s); second third max %.1f "
	       "MiB (%.0f-%.0f s), last third max %.1f MiB (%.0f-%.0f s): %+.1f%%, %s (flat: within "
	       "+%.0f%%)\n",
	       rows[a].t, (double)max2 / KIB, rows[a].t, rows[b - 1].t, (double)max3 / KIB, rows[b].t,
	       rows[nrows - 1].t, growth * 100, growth <= RSS_FLAT_TOLERANCE ? "FLAT" : "NOT FLAT",
	       RSS_FLAT_TOLERANCE * 100);
	printf("rss: %+.1f MiB from %.0f s to the end over %llu events appended (%.2f KiB per 1,000 "
	       "events)\n",
	       (double)(rows[nrows - 1].rss_kib - rows[a].rss_kib) / KIB, rows[a].t, ev,
	       ev ? (double)(rows[nrows - 1].rss_kib - rows[a].rss_kib) / ((double)ev / 1000) : 0);
	return growth <= RSS_FLAT_TOLERANCE;
}

/* ---- reading everything back ------------------------------------------------------------------ */

static struct {
	atomic_ullong sessions, events, artifacts, keys, ckpts, writes, missing, different, extra,
		ckpt_extra, failed;
	int lines;
} ver;

static void vfail(atomic_ullong *counter, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void vfail(atomic_ullong *counter, const char *fmt, ...)
{
	va_list ap;
	atomic_fetch_add(counter, 1);
	pthread_mutex_lock(&run.print_mu);
	if (ver.lines++ < MAX_MISSING_LINES) {
		fprintf(stderr, "soak_bench: check: ");
		va_start(ap, fmt);
		vfprintf(stderr, fmt, ap);
		va_end(ap);
		fputc('\n', stderr);
	}
	pthread_mutex_unlock(&run.print_mu);
}

static int cmp_seq(const void *a, const void *b)
{
	const acked_event *x = a, *y = b;
	return (x->seq > y->seq) - (x->seq < y->seq);
}

static void check_event(const chat *c, const sess *s, const acked_event *a, json_t *e)
{
	char id[ID_LEN];
	json_t *want = event_content(c, a->n, a->kind);

	event_id(c, a->n, id, sizeof(id));
	if (strcmp(json_string_value(json_object_get(e, "id")) ?: "", id) != 0 ||
	    strcmp(json_string_value(json_object_get(e, "role")) ?: "", kind_role(a->kind)) != 0 ||
	    !json_equal(json_object_get(e, "content"), want))
		vfail(&ver.different, "%s: event seq %u is not event %s as acknowledged", s->path,
		      a->seq, id);
	json_decref(want);
}

static void check_events(hconn *h, const chat *c, sess *s)
{
	char path[REQ_PATH_LEN];
	size_t i = 0;
	json_int_t after = 0;
	int more;

	if (s->nev)
		qsort(s->ev, s->nev, sizeof(*s->ev), cmp_seq);
	for (;;) {
		json_t *page, *e, *next;
		size_t k;
		snprintf(path, sizeof(path), "%s/events?after_seq=%lld&limit=%d", s->path,
			 (long long)after, VERIFY_PAGE);
		if (http_do(h, "GET", path, NULL, NULL, 0) != 200) {
			vfail(&ver.failed, "GET %s: %.160s", path, h->buf ? body_of(h) : "no answer");
			break;
		}
		page = body_json(h);
		if (!json_is_array(json_object_get(page, "events"))) {
			vfail(&ver.failed, "GET %s: not an event page: %.160s", path, body_of(h));
			json_decref(page);
			break;
		}
		json_array_foreach(json_object_get(page, "events"), k, e) {
			uint32_t seq = (uint32_t)json_integer_value(json_object_get(e, "seq"));
			for (; i < s->nev && s->ev[i].seq < seq; i++)
				vfail(&ver.missing, "%s: acknowledged event c%u-%u (seq %u) is missing",
				      s->path, c->idx, s->ev[i].n, s->ev[i].seq);
			if (i < s->nev && s->ev[i].seq == seq) {
				check_event(c, s, &s->ev[i], e);
				atomic_fetch_add(&ver.events, 1);
				i++;
			} else {
				atomic_fetch_add(&ver.extra, 1);
			}
		}
		next = json_object_get(page, "next_after_seq");
		more = json_is_integer(next);
		after = json_integer_value(next);
		json_decref(page);
		if (!more)
			break;
	}
	for (; i < s->nev; i++)
		vfail(&ver.missing, "%s: acknowledged event c%u-%u (seq %u) is missing", s->path,
		      c->idx, s->ev[i].n, s->ev[i].seq);
}

static void check_artifacts(hconn *h, const chat *c, const sess *s)
{
	char path[REQ_PATH_LEN], got_type[128], got_version[32];

	for (size_t i = 0; i < s->nart; i++) {
		const acked_artifact *a = &s->art[i];
		char *want = artifact_body(c, a->name, a->gen);
		int st;
		snprintf(path, sizeof(path), "%s/artifacts/%s?version=%u", s->path,
			 artifact_name[a->name], a->version);
		st = http_do(h, "GET", path, NULL, NULL, 0);
		atomic_fetch_add(&ver.artifacts, 1);
		if (st == 404)
			vfail(&ver.missing, "%s: acknowledged version is missing", path);
		else if (st != 200)
			vfail(&ver.failed, "GET %s: status %d", path, st);
		else if (h->body_len != strlen(want) || memcmp(body_of(h), want, h->body_len) != 0 ||
			 header(h, "Content-Type", got_type, sizeof(got_type)) < 0 ||
			 strcmp(got_type, artifact_type[a->name]) != 0 ||
			 header(h, "X-Memd-Artifact-Version", got_version, sizeof(got_version)) < 0 ||
			 strtoul(got_version, NULL, 10) != a->version)
			vfail(&ver.different, "%s: not the bytes or type acknowledged", path);
		free(want);
	}
}

static void check_state(hconn *h, const chat *c, const sess *s)
{
	char path[REQ_PATH_LEN];
	json_t *st;

	snprintf(path, sizeof(path), "%s/state", s->path);
	if (http_do(h, "GET", path, NULL, NULL, 0) != 200) {
		vfail(&ver.failed, "GET %s: %.160s", path, h->buf ? body_of(h) : "no answer");
		return;
	}
	st = body_json(h);
	for (int k = 0; k < STATE_KEYS; k++) {
		const key_mark *m = &s->keys[k];
		json_t *got = json_object_get(st, state_key[k]), *want;
		uint32_t gen;
		if (!m->sent)
			continue;
		atomic_fetch_add(&ver.keys, 1);
		if (!got) {
			/* Absent: the acknowledged value deleted it, or one sent
			 * after it (never answered) may have. */
			json_t *a = m->acked ? state_value(c, k, m->acked) : NULL;
			if (a && m->sent == m->acked)
				vfail(&ver.missing, "%s: key %s (generation %u) is missing", path,
				      state_key[k], m->acked);
			json_decref(a);
			continue;
		}
		gen = (uint32_t)json_integer_value(json_object_get(got, "gen"));
		want = gen ? state_value(c, k, gen) : NULL;
		if (gen < m->acked || gen > m->sent || !want || !json_equal(got, want))
			vfail(&ver.different, "%s: key %s is not its acknowledged value (generation %u, "
			      "found %u)", path, state_key[k], m->acked, gen);
		json_decref(want);
	}
	json_decref(st);
}

/* Read the session's checkpoints back (newest first, full tuples, a page
 * at a time) and compare each acknowledged one and its writes. */
static void check_ckpts(hconn *h, const chat *c, const sess *s)
{
	char path[PAGE_PATH_LEN], cursor[PATH_LEN] = "";
	size_t i = s->nck;
	int more;

	if (!s->ck_sent)
		return;
	for (;;) {
		json_t *page, *tp, *next;
		size_t k;
		snprintf(path, sizeof(path), "%s/checkpoints?full=true&limit=%d%s%s", s->path,
			 VERIFY_CKPT_PAGE, *cursor ? "&cursor=" : "", cursor);
		if (http_do(h, "GET", path, NULL, NULL, 0) != 200) {
			vfail(&ver.failed, "GET %s: %.160s", path, h->buf ? body_of(h) : "no answer");
			break;
		}
		page = body_json(h);
		if (!json_is_array(json_object_get(page, "checkpoints"))) {
			vfail(&ver.failed, "GET %s: not a checkpoint page: %.160s", path, body_of(h));
			json_decref(page);
			break;
		}
		json_array_foreach(json_object_get(page, "checkpoints"), k, tp) {
			uint32_t n = ckpt_number(json_string_value(json_object_get(tp, "checkpoint_id")));
			for (; i > 0 && s->ck[i - 1].n > n; i--)
				vfail(&ver.missing, "%s: acknowledged checkpoint %u is missing", s->path,
				      s->ck[i - 1].n);
			if (i > 0 && s->ck[i - 1].n == n) {
				int missing = 0;
				size_t checked = 0;
				const char *why = ckpt_differs(c, &s->ck[i - 1], tp, &missing, &checked);
				if (why)
					vfail(missing ? &ver.missing : &ver.different,
					      "%s: checkpoint %u: %s", s->path, n, why);
				atomic_fetch_add(&ver.ckpts, 1);
				atomic_fetch_add(&ver.writes, checked);
				i--;
			} else {
				atomic_fetch_add(&ver.ckpt_extra, 1);
			}
		}
		next = json_object_get(page, "next_cursor");
		more = json_is_string(next);
		if (more)
			bench_encode_segment(json_string_value(next), cursor, sizeof(cursor));
		json_decref(page); /* next with it */
		if (!more)
			break;
	}
	for (; i > 0; i--)
		vfail(&ver.missing, "%s: acknowledged checkpoint %u is missing", s->path,
		      s->ck[i - 1].n);
}

static void *verify_work(void *a)
{
	int k = (int)(intptr_t)a, nthreads = run.conns < VERIFY_THREADS_MAX ? run.conns
									     : VERIFY_THREADS_MAX;
	hconn h = { .fd = -1 };

	for (int i = k; i < run.chats; i += nthreads) {
		chat *c = &run.chat[i];
		for (size_t j = 0; j < c->nsess; j++) {
			atomic_fetch_add(&ver.sessions, 1);
			check_events(&h, c, c->sess[j]);
			check_artifacts(&h, c, c->sess[j]);
			check_state(&h, c, c->sess[j]);
			check_ckpts(&h, c, c->sess[j]);
		}
	}
	conn_close(&h);
	free(h.buf);
	return NULL;
}

/* Read every acknowledged write back through the API: 0 when all are there. */
static int verify(void)
{
	int nthreads = run.conns < VERIFY_THREADS_MAX ? run.conns : VERIFY_THREADS_MAX;
	pthread_t t[VERIFY_THREADS_MAX];
	int64_t t0 = now_ns();

	for (int k = 0; k < nthreads; k++)
		if (pthread_create(&t[k], NULL, verify_work, (void *)(intptr_t)k) != 0)
			bench_die("pthread_create", strerror(errno));
	for (int k = 0; k < nthreads; k++)
		pthread_join(t[k], NULL);
	printf("check: read back %llu sessions in %.1f s: %llu events, %llu artifact versions, %llu "
	       "state keys, %llu checkpoints and %llu pending writes acknowledged and checked; %llu "
	       "missing, %llu different, %llu reads failed; %llu events and %llu checkpoints there "
	       "that were never acknowledged (cut off by the kill)\n",
	       atomic_load(&ver.sessions), (double)(now_ns() - t0) / NS_PER_SEC,
	       atomic_load(&ver.events), atomic_load(&ver.artifacts), atomic_load(&ver.keys),
	       atomic_load(&ver.ckpts), atomic_load(&ver.writes), atomic_load(&ver.missing),
	       atomic_load(&ver.different), atomic_load(&ver.failed), atomic_load(&ver.extra),
	       atomic_load(&ver.ckpt_extra));
	return atomic_load(&ver.missing) || atomic_load(&ver.different) || atomic_load(&ver.failed)
		       ? -1
		       : 0;
}

/* ---- main ------------------------------------------------------------------------------------ */

static void usage(void)
{
	fprintf(stderr, "usage: soak_bench [-d seconds] [-c connections] [-n chats] "
			"[--store sqlite|postgres] [--kill-at seconds] [-i interval] [--zipf s] "
			"[--seed n] [--dir dir] [--keep] [--no-index]\n");
	exit(2);
}

static void parse_args(int argc, char **argv, const char **dir)
{
	static const struct option opts[] = {
		{ "duration", required_argument, NULL, 'd' },
		{ "connections", required_argument, NULL, 'c' },
		{ "chats", required_argument, NULL, 'n' },
		{ "interval", required_argument, NULL, 'i' },
		{ "store", required_argument, NULL, 'S' },
		{ "kill-at", required_argument, NULL, 'K' },
		{ "zipf", required_argument, NULL, 'Z' },
		{ "seed", required_argument, NULL, 'R' },
		{ "dir", required_argument, NULL, 'D' },
		{ "keep", no_argument, NULL, 'k' },
		{ "no-index", no_argument, NULL, 'N' },
		{ NULL, 0, NULL, 0 },
	};
	int o;

	run.store = "sqlite";
	while ((o = getopt_long(argc, argv, "d:c:n:i:", opts, NULL)) != -1) {
		switch (o) {
		case 'd': run.seconds = atof(optarg); break;
		case 'c': run.conns = atoi(optarg); break;
		case 'n': run.chats = atoi(optarg); break;
		case 'i': run.interval = atof(optarg); break;
		case 'S': run.store = optarg; break;
		case 'K': run.kill_at = atof(optarg); break;
		case 'Z': run.zipf = atof(optarg); break;
		case 'R': run.seed = strtoull(optarg, NULL, 10); break;
		case 'D': *dir = optarg; break;
		case 'k': run.keep = 1; break;
		case 'N': run.no_index = 1; break;
		default: usage();
		}
	}
	if (optind != argc || run.seconds <= 0 || run.conns < 1 || run.conns > BENCH_MAX_CONNS ||
	    run.chats < run.conns || run.interval <= 0 || run.zipf < 0 || run.kill_at < 0 ||
	    (run.kill_at > 0 && run.kill_at >= run.seconds) ||
	    (strcmp(run.store, "sqlite") != 0 && strcmp(run.store, "postgres") != 0))
		usage();
}

static void setup_chats(void)
{
	double sum = 0, acc = 0;

	run.chat = calloc((size_t)run.chats, sizeof(*run.chat));
	run.cdf = calloc((size_t)run.chats, sizeof(*run.cdf));
	run.w = calloc((size_t)run.conns, sizeof(*run.w));
	if (!run.chat || !run.cdf || !run.w)
		bench_die("memory", "out of memory");
	/* Chat i is the (i + 1)-th most active: weight 1 / (i + 1)^s. */
	for (int i = 0; i < run.chats; i++)
		sum += pow(i + 1, -run.zipf);
	for (int i = 0; i < run.chats; i++) {
		chat *c = &run.chat[i];
		acc += pow(i + 1, -run.zipf);
		run.cdf[i] = acc / sum;
		atomic_flag_clear(&c->busy);
		c->idx = (uint32_t)i;
		c->lane = i % SESSION_CHAT_EVERY != SESSION_CHAT_EVERY - 1;
		c->next_n = 1;
		c->next_ck = 1;
		snprintf(c->source, sizeof(c->source),
			 "{\"platform\":\"soak\",\"chat_type\":\"dm\",\"chat_id\":\"c%d\","
			 "\"user_id\":\"u%d\",\"user_name\":\"User %d\"}",
			 i, i / CHATS_PER_USER, i / CHATS_PER_USER);
	}
	run.cdf[run.chats - 1] = 1.0;
}

static void free_chats(void)
{
	for (int i = 0; i < run.chats; i++) {
		chat *c = &run.chat[i];
		for (size_t j = 0; j < c->nsess; j++) {
			free(c->sess[j]->ev);
			free(c->sess[j]->art);
			free(c->sess[j]->ck);
			free(c->sess[j]);
		}
		free(c->sess);
	}
	for (int i = 0; i < run.conns; i++) {
		for (int op = 0; op < OP_COUNT; op++)
			free(run.w[i].cur[op].v);
		free(run.w[i].c.buf);
		pthread_mutex_destroy(&run.w[i].mu);
	}
	for (int op = 0; op < OP_COUNT; op++)
		free(total[op].v);
	free(rows);
	free(run.chat);
	free(run.cdf);
	free(run.w);
}

static void sleep_until(int64_t t)
{
	struct timespec ts = { .tv_sec = t / NS_PER_SEC, .tv_nsec = t % NS_PER_SEC };
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

/* Stop memd (SIGTERM) and wait, bounded: 0 when it exited cleanly. */
static int stop_memd(void)
{
	int64_t limit = now_ns() + (int64_t)STOP_WAIT_S * NS_PER_SEC;
	int st;

	kill(bench.memd_pid, SIGTERM);
	while (waitpid(bench.memd_pid, &st, WNOHANG) == 0) {
		if (now_ns() > limit) {
			kill(bench.memd_pid, SIGKILL);
			waitpid(bench.memd_pid, &st, 0);
			bench.memd_pid = 0;
			return -1;
		}
		usleep(POLL_MS * 1000);
	}
	bench.memd_pid = 0;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
	const char *dir = NULL;
	double health_s, ready_s, cpu0, t_last = 0, secs;
	int64_t t0, next, kill_t, end, tn;
	unsigned long long errors = 0, retried = 0;
	int killed = 0, failed = 0, died = 0, flat;

	parse_args(argc, argv, &dir);
	setvbuf(stdout, NULL, _IOLBF, 0);
	bench_setup("soak_bench", dir);
	if (strcmp(run.store, "postgres") == 0) {
		if (!getenv("MEMD_PG_DSN") || !getenv("MEMD_PG_PASSWORD"))
			bench_die("postgres", "MEMD_PG_DSN and MEMD_PG_PASSWORD must be set "
					      "(tests/services/with-services.sh --only postgres -- ...)");
		snprintf(run.schema, sizeof(run.schema), "soak_%d_%lld", (int)getpid(),
			 (long long)time(NULL));
	}
	setup_chats();
	bench.port = bench_free_port();
	write_config();
	start_memd(now_ns(), &health_s, &ready_s);

	printf("soak_bench: %d chats (Zipf s %.2f; 2 in 3 open a lane at every step, 1 in 3 create a "
	       "session), %d connections, %s, %.0f s%s, memd pid %d, in %s\n",
	       run.chats, run.zipf, run.conns, run.store, run.seconds,
	       run.kill_at > 0 ? ", SIGKILL and restart in the middle" : "", (int)bench.memd_pid,
	       bench.work_dir);
	printf("a step: [open | create] append(user) context [append(tool call + result) %d%%] "
	       "append(answer) [checkpoint latest %d%%] [checkpoint put + writes %d%%] [search %d%%] "
	       "[artifact put %d%%] [state patch %d%%]%s\n",
	       P_TOOL, P_LATEST, P_CKPT, run.no_index ? 0 : P_SEARCH, P_ARTIFACT, P_STATE,
	       run.no_index ? " (no keyword index, no search)" : "");
	printf("every %.0f s: requests/s and p50/p99 ms per operation, memd's RSS and CPU (100 = one "
	       "core)\n", run.interval);
	print_header();

	for (int i = 0; i < run.conns; i++) {
		worker *w = &run.w[i];
		w->i = i;
		w->c.fd = -1;
		w->rng = run.seed * 1000003u + (uint64_t)i;
		pthread_mutex_init(&w->mu, NULL);
		if (pthread_create(&w->t, NULL, work, w) != 0)
			bench_die("pthread_create", strerror(errno));
	}
	t0 = now_ns();
	cpu0 = cpu_s();
	next = t0 + (int64_t)(run.interval * NS_PER_SEC);
	kill_t = run.kill_at > 0 ? t0 + (int64_t)(run.kill_at * NS_PER_SEC) : INT64_MAX;
	end = t0 + (int64_t)(run.seconds * NS_PER_SEC);
	for (;;) {
		int64_t wake = next < end ? next : end;
		if (!killed && kill_t < wake)
			wake = kill_t;
		sleep_until(wake);
		tn = now_ns();
		if (!killed && tn >= kill_t) {
			double c = cpu_s();
			killed = 1;
			/* The row until the kill, then the restart. */
			secs = (double)(tn - t0) / NS_PER_SEC;
			report(secs, secs - t_last, (c - cpu0) / (secs - t_last) * 100);
			t_last = secs;
			kill_and_restart();
			printf("# %.1f s: killed memd (SIGKILL) under load and started it again (pid %d): "
			       "/healthz answered %.3f s after the kill, /readyz %.3f s\n",
			       secs, (int)bench.memd_pid, run.recovery_health_s, run.recovery_ready_s);
			cpu0 = cpu_s();
			t_last = (double)(now_ns() - t0) / NS_PER_SEC;
			/* The next row covers the time after the restart. */
			while (next <= now_ns())
				next += (int64_t)(run.interval * NS_PER_SEC);
			continue;
		}
		if (!memd_alive()) {
			fprintf(stderr, "soak_bench: memd serve died (see %s/memd.log)\n", bench.work_dir);
			died = 1;
			break;
		}
		if (tn >= next || tn >= end) {
			double c = cpu_s();
			secs = (double)(tn - t0) / NS_PER_SEC;
			if (secs - t_last > 0)
				report(secs, secs - t_last, (c - cpu0) / (secs - t_last) * 100);
			cpu0 = c;
			t_last = secs;
			next += (int64_t)(run.interval * NS_PER_SEC);
		}
		if (tn >= end)
			break;
	}
	atomic_store(&run.stop, 1);
	for (int i = 0; i < run.conns; i++)
		pthread_join(run.w[i].t, NULL);
	secs = (double)(now_ns() - t0) / NS_PER_SEC;
	collect(total); /* the steps that ended after the last row */

	printf("\n%-9s %10s %9s %8s %8s %8s %7s %8s\n", "operation", "requests", "per s", "p50 ms",
	       "p99 ms", "max ms", "errors", "re-sent");
	for (int op = 0; op < OP_COUNT; op++) {
		samples *s = &total[op];
		if (s->n)
			qsort(s->v, s->n, sizeof(*s->v), cmp_i64);
		printf("%-9s %10zu %9.1f %8.2f %8.2f %8.1f %7llu %8llu\n", op_name[op], s->n,
		       (double)s->n / secs, quantile_ms(s, P50), quantile_ms(s, P99),
		       s->n ? (double)s->v[s->n - 1] / NS_PER_MS : 0, atomic_load(&run.errors[op]),
		       atomic_load(&run.retried[op]));
		errors += atomic_load(&run.errors[op]);
		retried += atomic_load(&run.retried[op]);
	}
	printf("events acknowledged: %llu (%.0f/s)\n", atomic_load(&run.events_acked),
	       (double)atomic_load(&run.events_acked) / secs);
	if (run.kill_at > 0) {
		long long k = atomic_load(&run.kill_ns), f = atomic_load(&run.first_after_ns);
		printf("recovery: /healthz answered %.3f s after the SIGKILL, /readyz %.3f s; ",
		       run.recovery_health_s, run.recovery_ready_s);
		if (f)
			printf("the first request of the load %.3f s", (double)(f - k) / NS_PER_SEC);
		else
			printf("no request of the load was answered after it");
		printf("; %llu requests cut off and sent again (of them, %llu appends answered as "
		       "replays and %llu session creates with 409: the first had committed)\n", retried,
		       atomic_load(&run.replays), atomic_load(&run.conflicts_expected));
		if (!f)
			failed = 1;
	}
	flat = rss_verdict();
	(void)flat;
	if (died) {
		failed = 1;
	} else {
		if (verify() < 0)
			failed = 1;
		if (stop_memd() < 0) {
			fprintf(stderr, "soak_bench: memd serve did not exit cleanly on SIGTERM\n");
			failed = 1;
		}
	}
	printf("errors: %llu (any answer but the expected status, or no answer outside the kill)\n",
	       errors);
	if (errors)
		failed = 1;
	printf("result: %s\n", failed ? "FAILED" : "ok");
	if (!failed && !run.keep)
		bench_cleanup();
	else
		printf("kept %s (memd.log, the database)\n", bench.work_dir);
	free_chats();
	return failed ? 1 : 0;
}
