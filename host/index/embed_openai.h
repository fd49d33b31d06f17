/* SPDX-License-Identifier: MIT */
/*
 * embed_openai: the built-in "openai" embedder: any OpenAI-compatible
 * embeddings endpoint (OpenAI, Ollama, vLLM, llama.cpp server, LiteLLM...)
 * over libcurl. One POST <url>/embeddings per batch of at most `batch`
 * texts: {"model", "input": [texts]}; the answer's data[i].embedding are
 * placed by data[i].index and L2-normalized.
 *
 * Config (index.vector.embedder, validated by settings.c):
 *   url         base (".../v1"), full (".../embeddings") or bare host
 *               (then "/v1/embeddings" is appended); http:// or https://
 *   model       the model name
 *   api_key     sent as "Authorization: Bearer"; when absent,
 *               $OPENAI_API_KEY (if set) is used, like the summarizer
 *   batch       texts per request (default SETTINGS_EMBEDDER_BATCH_DEFAULT)
 *   timeout_ms  per HTTP request (default SETTINGS_EMBEDDER_TIMEOUT_MS_DEFAULT)
 *   dim         optional: the dimension the model must produce. When set,
 *               dimension() answers it without the network and every
 *               answer is checked against it; when absent, dimension()
 *               asks the endpoint once (embeds one probe text) and the
 *               answer's size is used and then checked.
 *
 * Failures: cannot connect, no answer in time, HTTP 429 or 5xx are
 * retried EMBED_OPENAI_RETRIES times with exponential backoff (or the
 * server's Retry-After), then MEMD_EUNAVAIL, RETRYABLE (the indexer pauses
 * and catches up later). HTTP 401/403: MEMD_EAUTH. Other 4xx: MEMD_EINVAL
 * with the server's message. Vectors of another size than the dimension:
 * MEMD_ECONFLICT naming both sizes. A malformed answer: MEMD_EIO. The
 * call's deadline: MEMD_ETIMEDOUT; its cancel flag: MEMD_ECANCELED.
 * Messages never contain the API key.
 *
 * Texts without any non-space character are not sent: they get a zero
 * vector (as embed.h specifies). Texts longer than
 * EMBED_OPENAI_MAX_INPUT_BYTES are cut there (at a UTF-8 character
 * boundary) so one huge event cannot stall indexing on the model's input
 * limit.
 */
#ifndef MEMD_INDEX_EMBED_OPENAI_H
#define MEMD_INDEX_EMBED_OPENAI_H

#include "embed.h"

#define EMBED_OPENAI_RETRIES 2              /* extra attempts after the first */
#define EMBED_OPENAI_BACKOFF_BASE_MS 100    /* doubled per attempt */
#define EMBED_OPENAI_BACKOFF_MAX_MS 2000    /* also caps Retry-After */
#define EMBED_OPENAI_MAX_INPUT_BYTES 16384
#define EMBED_OPENAI_RESPONSE_MAX_BYTES (64u << 20)
#define EMBED_OPENAI_PROBE_TEXT "dimension probe"

/* The "openai" entry for embed.c's table of built-ins. create() reads the
 * node described above (MEMD_EINVAL naming the key when one is missing or
 * bad; it never touches the network) and initialises libcurl
 * (process-wide, paired with destroy; main thread). */
extern const embed_builtin embed_openai_builtin;

#endif
