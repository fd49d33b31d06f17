/* SPDX-License-Identifier: MIT */
/*
 * openai_msgs: memd events <-> OpenAI chat-completions messages, both
 * ways (docs/architecture.md, "OpenAI chat messages", has the mapping).
 *
 * A message becomes one event in the form a client sends to
 * memd_events_append: role user/assistant/system/tool, content {"parts":
 * [...]} with memd's part kinds ("text", "tool_call", "tool_result", and
 * "image_url", "input_audio", "file", "refusal" holding the OpenAI part's
 * inner object as sent), the message's name as the author, and, in
 * metadata "openai", only what the event form cannot say by itself
 * (developer and function roles, a content sent as parts or left out,
 * members sent as null). An event becomes the messages it means:
 * usually one; a summary a system message saying what it covers; tool
 * results held by a user or assistant event tool messages of their own.
 * Messages in, messages out are equal (the round trip) for every shape
 * of a request's messages; a response message pushed back as it came
 * loses its "annotations" (no request member: the event keeps them).
 */
#ifndef MEMD_HOST_OPENAI_MSGS_H
#define MEMD_HOST_OPENAI_MSGS_H

#include <jansson.h>

#include <memd/plugin.h>

/* The metadata member that keeps what an event needs to become the very
 * message it was made from. */
#define OM_META_KEY "openai"

/* messages (a JSON array of OpenAI messages, borrowed) as a new array of
 * client event objects in *ret_events ({"id"?, "role", "author"?,
 * "content": {"parts"}, "metadata"?}), one per message, in order. A
 * message may carry "id" (memd's extension, for idempotent retries); it
 * becomes the event's id. MEMD_EINVAL naming the message and the field
 * ("messages[2].tool_calls[0].function.arguments: must be a string"),
 * MEMD_ENOMEM. *ret_events is written only on success. */
int32_t om_messages_to_events(json_t *messages, json_t **ret_events, memd_error *err);

/* om_events_to_messages: leave out tool results whose call is not among
 * the messages before them (a window that starts inside a tool exchange). */
#define OM_DROP_ORPHAN_RESULTS 0x1u

/* events (a JSON array of stored events as ej_event writes them,
 * borrowed) as OpenAI messages appended to out (an array). A role
 * "summary" event becomes a system message "Summary of the conversation
 * up to <its time> (events 1..<covers_seq>):\n<text>". With
 * OM_DROP_ORPHAN_RESULTS, tool messages answering no earlier tool call
 * are left out and *ret_dropped_tokens (may be NULL) gets the tokens of
 * the events that were left out whole. Parts a message of the role
 * cannot carry (an image in an assistant event, a tool event without a
 * tool_result) are left out. MEMD_ENOMEM (out may then hold part of the
 * messages), or MEMD_EINVAL for an event without a role or a parts array. */
int32_t om_events_to_messages(json_t *events, uint32_t flags, json_t *out,
			      int64_t *ret_dropped_tokens, memd_error *err);

#endif
