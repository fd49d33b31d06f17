/* SPDX-License-Identifier: MIT */
/*
 * settings: memd's config schema. Validates a parsed config tree (or the
 * zero-config defaults) into a settings struct, reporting every problem as
 * "file:line: key: message". Plugin-specific keys (under stores.<name> and
 * apps.<app>.working_memory) are checked later against each plugin's own
 * key schema by the loader.
 */
#ifndef MEMD_HOST_SETTINGS_H
#define MEMD_HOST_SETTINGS_H

#include <stdint.h>

#include "config/config.h"

#define SETTINGS_LISTEN_DEFAULT "127.0.0.1:8700"
#define SETTINGS_SQLITE_PATH_DEFAULT "./data/memd.db"
#define SETTINGS_DEFAULT_APP "*"
#define SETTINGS_WINDOW_DEFAULT 20

/* Defaults of the keys settings_load validates; modules that read the
 * summarizer/tokenizer/embedder nodes themselves use the same values. */
#define SETTINGS_STORE_DEFAULT "main"           /* name of the zero-config store */
#define SETTINGS_STRATEGY_DEFAULT "buffer_window" /* strategy of the default app */
#define SETTINGS_THREADS_DEFAULT 0
#define SETTINGS_WORKERS_DEFAULT 0
#define SETTINGS_MAX_BODY_BYTES_DEFAULT 8388608
#define SETTINGS_MAX_BATCH_EVENTS_DEFAULT 1000
#define SETTINGS_MAX_HEADER_BYTES_DEFAULT 16384
#define SETTINGS_REQUEST_TIMEOUT_MS_DEFAULT 30000
/* A request line and headers must arrive within this many seconds of the
 * connection's start (or of its previous request's end). */
#define SETTINGS_HEADER_TIMEOUT_S_DEFAULT 10
#define SETTINGS_HEADER_TIMEOUT_S_MAX 3600
/* Open client connections, at most (lowered at start to what the process
 * may open: see host/http/server.c), and per client address (0: no
 * per-address limit). */
#define SETTINGS_MAX_CONNECTIONS_DEFAULT 4096
#define SETTINGS_MAX_CONNECTIONS_MAX 1000000
#define SETTINGS_MAX_CONNECTIONS_PER_IP_DEFAULT 256
/* Largest answer built in memory (session get with events, context,
 * search); an event page ends early at it. The minimum leaves room for
 * a session object and its error message. */
#define SETTINGS_MAX_RESPONSE_BYTES_DEFAULT 33554432
#define SETTINGS_MAX_RESPONSE_BYTES_MIN 65536
#define SETTINGS_KEYWORD_K1_DEFAULT 1.2
/* BM25's length normalisation. Conversation turns are short texts, where
 * normalising by length hurts ranking (as measured for microblog search);
 * on tests/bench/keyword_bench's 600 questions at 10k/100k/1M events
 * recall@10 is 0.928/0.903/0.908 with 0.3 against 0.920/0.897/0.902 with
 * the textbook 0.75 (FTS5: 0.912/0.890/0.903), and tests/quality is the
 * same with both. */
#define SETTINGS_KEYWORD_B_DEFAULT 0.3
/* index.keyword.snapshot: where the keyword index is saved so a restart
 * loads it instead of replaying the whole feed (host/index/kw_snapshot.h).
 * A file path (relative paths are taken from the working directory, as
 * the sqlite store's path is), true for the default, false for none.
 * The default: SETTINGS_KEYWORD_SNAPSHOT_FILE in the directory of the
 * sqlite session store's file (so ./data/keyword.snapshot with zero
 * config); SETTINGS_KEYWORD_SNAPSHOT_DEFAULT for other session stores;
 * none for the memory store, whose feed does not outlive the process. */
#define SETTINGS_KEYWORD_SNAPSHOT_FILE "keyword.snapshot"
#define SETTINGS_KEYWORD_SNAPSHOT_DEFAULT "./data/" SETTINGS_KEYWORD_SNAPSHOT_FILE
#define SETTINGS_SEARCH_MODE_DEFAULT "keyword"
#define SETTINGS_EMBEDDER_TYPE_DEFAULT "hash"
/* index.hybrid.vector_weight's default per embedder type, the vector
 * list's share of a hybrid score, measured by tests/quality (the largest
 * weight at which hybrid recall@10 is within 0.005 of the better input's
 * on both sets): the hash embedder's vectors only share words, which the
 * keyword index ranks better, so they only break ties (0.05; at 0.5
 * hybrid loses 0.005 to keyword); an openai embedder gets 0.15, the
 * largest share safe with the embeddings stand-in's bag-of-words vectors
 * (at 0.3 hybrid loses 0.006 to keyword); a strong semantic model
 * deserves more (set it after measuring on your data). */
#define SETTINGS_HYBRID_VECTOR_WEIGHT_HASH 0.05
#define SETTINGS_HYBRID_VECTOR_WEIGHT_MODEL 0.15
#define SETTINGS_EMBEDDER_DIM_DEFAULT 256
#define SETTINGS_EMBEDDER_BATCH_DEFAULT 64
#define SETTINGS_EMBEDDER_TIMEOUT_MS_DEFAULT 30000
#define SETTINGS_SUMMARIZER_TYPE_DEFAULT "extractive"
#define SETTINGS_SUMMARIZER_TIMEOUT_MS_DEFAULT 60000
#define SETTINGS_SUMMARIZER_RETRIES_DEFAULT 3
#define SETTINGS_SUMMARIZER_MAX_TOKENS_DEFAULT 1024
#define SETTINGS_TOKENIZER_TYPE_DEFAULT "approx"
#define SETTINGS_TEMP_TTL_SECONDS_DEFAULT 3600
/* lanes: (a chat gateway's conversations; api/memd/memd.h "lanes"). */
#define SETTINGS_LANES_WATCH_INTERVAL_S_DEFAULT 300   /* the watcher's pass, every 5 minutes */
#define SETTINGS_LANES_LEASE_MS_DEFAULT 60000         /* a turn's lease unless it asks */
#define SETTINGS_LANES_MAX_LEASE_MS_DEFAULT 3600000   /* the longest lease a turn may ask */
#define SETTINGS_LANES_IDLE_MINUTES_DEFAULT 1440      /* a day */
#define SETTINGS_LANES_AT_HOUR_DEFAULT 4              /* 04:00 local time */
#define SETTINGS_LANES_AT_HOUR_MAX 23
#define SETTINGS_LANES_WEBHOOK_TIMEOUT_MS_DEFAULT 5000
#define SETTINGS_LANES_WEBHOOK_RETRIES_DEFAULT 3
#define SETTINGS_LANES_IDLE_NOTICE_DEFAULT                                               \
	"Session expired due to inactivity: this is a new session."
#define SETTINGS_LANES_DAILY_NOTICE_DEFAULT                                              \
	"Session expired at the daily reset: this is a new session."
#define SETTINGS_LANES_SUSPENDED_NOTICE_DEFAULT                                          \
	"The previous session was stopped: this is a new session."
/* memory: (long-term memories; api/memd/memd.h "long-term memories"). */
#define SETTINGS_MEMORY_SWEEP_INTERVAL_S_DEFAULT 60   /* the memory worker's pass */
#define SETTINGS_EXTRACT_EVERY_EVENTS_DEFAULT 20      /* extract once this many are unread */
#define SETTINGS_EXTRACT_IDLE_MINUTES_DEFAULT 30      /* extract a session idle this long */
#define SETTINGS_EXTRACT_BATCH_EVENTS_DEFAULT 50      /* most events one extraction reads */
#define SETTINGS_EXTRACT_BATCH_EVENTS_MAX 1000
#define SETTINGS_EXTRACT_NEIGHBOURS_DEFAULT 5         /* memories shown per candidate */
#define SETTINGS_EXTRACT_NEIGHBOURS_MAX 50
#define SETTINGS_EXTRACT_TIMEOUT_MS_DEFAULT 60000
#define SETTINGS_EXTRACT_RETRIES_DEFAULT 3
/* checkpoints: (run checkpoints; api/memd/memd.h "run checkpoints"). */
#define SETTINGS_CHECKPOINTS_TIMEOUT_S_DEFAULT 86400       /* a checkpoint's life after its put */
#define SETTINGS_CHECKPOINTS_SWEEP_INTERVAL_S_DEFAULT 60   /* the expiry sweep's pass */
/* Longest platform name in an override (as lane keys take them). */
#define SETTINGS_LANES_PLATFORM_MAX 64

/* Upper bounds settings_load enforces. */
#define SETTINGS_THREADS_MAX 1024
#define SETTINGS_EMBEDDER_DIM_MAX 65536
#define SETTINGS_RETRIES_MAX 100

/* Shortest API key accepted, in bytes: 32 random bytes (or 32 hex digits,
 * 128 bits) cannot be guessed over the network. */
#define SETTINGS_API_KEY_MIN 32

#define SETTINGS_SCOPE_READ  1
#define SETTINGS_SCOPE_WRITE 2
#define SETTINGS_SCOPE_ADMIN 3

typedef struct settings_api_key {
	char *key;      /* secret: never logged */
	int32_t scope;  /* SETTINGS_SCOPE_* */
	char **apps;    /* the apps it may use, NULL-terminated; NULL: every app */
	char *user;     /* bound to this user of its one app (MCP), or NULL */
} settings_api_key;

typedef struct settings_store {
	char *name;                 /* key under stores: */
	char *plugin;               /* plugin name or path */
	const config_node *node;    /* the whole map (includes "plugin") */
} settings_store;

/* lanes.reset.mode */
#define SETTINGS_LANE_RESET_NONE  0
#define SETTINGS_LANE_RESET_IDLE  1
#define SETTINGS_LANE_RESET_DAILY 2
#define SETTINGS_LANE_RESET_BOTH  3

/* A reset policy (lanes.reset, an override's reset). Strings owned. */
typedef struct settings_lane_reset {
	int32_t mode;               /* SETTINGS_LANE_RESET_* */
	int64_t idle_minutes;       /* >= 1 */
	int64_t at_hour;            /* 0..23 */
	char *timezone;             /* IANA name; "" = the host's zone */
	/* Where timezone was set (for a problem found when the zone is
	 * loaded: memd_open, memd config check); NULL = the default. */
	const config_node *timezone_node;
	int32_t notify;             /* the next context of a reset session carries a notice */
	char *idle_notice;
	char *daily_notice;
	char *suspended_notice;
} settings_lane_reset;

/* lanes.overrides[i]: a reset policy for some platform and chat type. */
typedef struct settings_lane_override {
	char *platform;             /* lowercase; NULL = any */
	char *chat_type;            /* dm | group | channel | thread; NULL = any */
	settings_lane_reset reset;  /* the lanes' reset with this entry's reset keys over it */
	const config_node *reset_node; /* the entry's reset map, or NULL */
} settings_lane_override;

/* The lanes settings of an app: the top-level lanes: section with the
 * app's apps.<name>.lanes keys over it. */
typedef struct settings_lanes {
	int64_t lease_ms;
	int64_t max_lease_ms;       /* >= lease_ms */
	int32_t group_sessions_per_user;
	int32_t thread_sessions_per_user;
	int64_t prune_after_days;   /* 0 = never */
	settings_lane_reset reset;
	/* First match wins: an app's own overrides, then the top-level ones
	 * (resolved over the app's reset). */
	settings_lane_override *overrides;
	size_t n_overrides;
	char *webhook_url;          /* "" = no webhook */
	char *webhook_secret;       /* secret: never logged */
	int64_t webhook_timeout_ms;
	int64_t webhook_retries;
} settings_lanes;

/* memory.extract.type */
#define SETTINGS_EXTRACT_BUILTIN 0
#define SETTINGS_EXTRACT_OPENAI  1
#define SETTINGS_EXTRACT_NONE    2
/* The memory extraction settings of an app: memory.extract with the
 * app's apps.<name>.memory.extract keys over it. Strings owned; url,
 * model, api_key, prompt and consolidate_prompt NULL when not set. */
typedef struct settings_extract {
	int32_t type;               /* SETTINGS_EXTRACT_* */
	int32_t on_finalize;        /* extract when a lane's session is finalized */
	int64_t every_events;       /* 0 = off */
	int64_t idle_minutes;       /* 0 = off */
	int64_t batch_events;       /* >= 1 */
	int64_t neighbours;         /* >= 1 */
	int64_t default_ttl_days;   /* 0 = extracted memories never expire */
	int64_t timeout_ms;
	int64_t retries;
	char *url;
	char *model;
	char *api_key;              /* secret: never logged; NULL = $OPENAI_API_KEY */
	char *prompt;
	char *consolidate_prompt;
} settings_extract;
/* The run checkpoint settings of an app: checkpoints: with the app's
 * apps.<name>.checkpoints keys over it. */
typedef struct settings_checkpoints {
	int64_t timeout_s;          /* a checkpoint expires this long after its put; 0 = never */
	int32_t auto_resume;        /* running runs are resumed automatically */
	int32_t auto_resume_hitl;   /* runs waiting for a human are resumed automatically */
} settings_checkpoints;
/* apps.<name>.working_memory.recall: what memd_context recalls into the
 * "memories" section (api/memd/memd.h). The host takes the key out of the
 * working_memory node before the strategy plugin gets it. */
#define SETTINGS_RECALL_K_DEFAULT 5
#define SETTINGS_RECALL_K_MAX 100
#define SETTINGS_RECALL_MAX_TOKENS_DEFAULT 1000
#define SETTINGS_RECALL_EVENTS 0x1u
#define SETTINGS_RECALL_MEMORIES 0x2u
typedef struct settings_recall {
	int32_t enabled;            /* the key is set: recall on every context read */
	int64_t k;                  /* most items, 1..SETTINGS_RECALL_K_MAX */
	uint32_t sources;           /* SETTINGS_RECALL_* bits, never 0 */
	double min_score;           /* items scoring below are dropped; >= 0 */
	int64_t max_tokens;         /* the items' tokens, at most; >= 1 */
	char *mode;                 /* keyword | vector | hybrid; NULL = index.default_mode */
} settings_recall;

typedef struct settings_app {
	char *name;                 /* app name, or "*" */
	char *strategy;             /* plugin name or path */
	/* working_memory map (includes "strategy", the host's key; "recall"
	 * has been taken out of it) */
	const config_node *node;
	settings_recall recall;     /* working_memory.recall */
	settings_lanes lanes;       /* lanes: with apps.<name>.lanes over it */
	settings_extract extract;   /* memory.extract with apps.<name>.memory.extract over it */
	settings_checkpoints checkpoints; /* checkpoints: with apps.<name>.checkpoints over it */
} settings_app;

typedef struct settings {
	config_node *root;          /* owned; the nodes below point into it */

	/* server: */
	char *listen;               /* host:port */
	settings_api_key *api_keys;
	size_t n_api_keys;
	/* server.allowed_hosts: the Host header values answered ("name" with
	 * any port or none, "name:port" exactly), NULL-terminated; NULL when
	 * not configured (then a loopback memd without keys answers only
	 * 127.0.0.1, localhost and [::1]). */
	char **allowed_hosts;
	int64_t threads;            /* 0 = from the machine */
	int64_t workers;            /* 0 = the server's default */
	int64_t max_body_bytes;
	int64_t max_batch_events;
	int64_t max_header_bytes;
	int64_t request_timeout_ms;
	int64_t header_timeout_s;
	int64_t max_connections;
	int64_t max_connections_per_ip; /* 0 = no limit */
	int64_t max_response_bytes;
	int32_t log_level;          /* MEMD_LOG_* */
	int32_t mcp_enabled;        /* server.mcp.enabled: the /mcp route */

	/* plugins: */
	char **plugin_path;         /* NULL-terminated; empty if not configured */

	/* stores:, sessions: */
	settings_store *stores;
	size_t n_stores;
	char *sessions_store;       /* name of the session store */
	int64_t sessions_retention_days; /* delete ended sessions older than this; 0 = never */

	/* index: */
	int32_t keyword_enabled;
	double keyword_k1;
	double keyword_b;
	char *keyword_snapshot;     /* file path, or NULL: no snapshot */
	int32_t vector_enabled;
	char *vector_store;         /* name in stores:, or NULL */
	const config_node *embedder;/* index.vector.embedder map, or NULL */
	char *search_mode_default;  /* keyword | vector | hybrid */
	double hybrid_vector_weight;/* index.hybrid.vector_weight, 0..1 */

	/* summarizer:, tokenizer: */
	const config_node *summarizer; /* map with type: extractive|openai, or NULL */
	const config_node *tokenizer;  /* map with type: approx|bpe, or NULL */

	/* temp: state */
	int64_t temp_ttl_seconds;

	/* lanes: (the top-level section; each app has its own resolved copy) */
	int64_t lanes_watch_interval_s;
	settings_lanes lanes;
	/* memory: (the top-level section; each app has its own resolved copy) */
	int64_t memory_sweep_interval_s; /* 0 = no background pass */
	settings_extract extract;
	/* checkpoints: (the top-level section; each app has its own resolved copy) */
	int64_t checkpoints_sweep_interval_s; /* 0 = no background sweep */
	settings_checkpoints checkpoints;

	/* apps: ("*" always present after load) */
	settings_app *apps;
	size_t n_apps;
} settings;

/* Validate root (taking ownership of it, also on failure) into *ret.
 * root NULL = zero-config. Every problem is added to d; returns 0, or
 * MEMD_EINVAL if any problem was found (*ret untouched), or MEMD_ENOMEM. */
int32_t settings_load(config_node *root, settings *ret, config_diag *d);
/* The API keys memd refuses because its examples (or earlier versions
 * of them) published them: NULL-terminated, static storage. */
const char *const *settings_published_api_keys(void);
/* Free what settings_load filled; accepts NULL. */
void settings_clear(settings *s);
/* The app entry for app (exact name, else "*"). Never NULL after load. */
const settings_app *settings_app_for(const settings *s, const char *app);
/* The reset policy of a lane of lanes on platform with chat_type (either
 * may be NULL): the first override that matches (platform compared
 * without ASCII case), else lanes->reset. Never NULL. */
const settings_lane_reset *settings_lane_reset_for(const settings_lanes *lanes,
						   const char *platform, const char *chat_type);
/* The store entry named name, or NULL. */
const settings_store *settings_store_get(const settings *s, const char *name);
/* Split a server.listen value "host:port" or "[v6addr]:port" (port
 * 1..65535, host non-empty; brackets removed). On success *ret_host is
 * malloc'd (caller frees) and *ret_port set; MEMD_EINVAL if malformed,
 * MEMD_ENOMEM. */
int32_t settings_listen_split(const char *listen, char **ret_host, int32_t *ret_port);

#endif
