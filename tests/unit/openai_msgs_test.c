/* SPDX-License-Identifier: MIT */
/*
 * openai_msgs: OpenAI chat-completions messages to events and back.
 * Every message shape goes in, through the event form memd stores (the
 * client parse and the stored JSON, as an append and a read do), and
 * comes back equal; bad messages get errors naming the message and the
 * field; events of other clients (summaries, tool results in a user
 * event) map to messages a chat endpoint takes; a window that starts
 * inside a tool exchange loses its orphaned results.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "json/event_json.h"
#include "json/openai_msgs.h"

#define NOW_US 1764000000000000LL

static json_t *parse(const char *text)
{
	json_error_t je;
	json_t *v = json_loads(text, JSON_DECODE_ANY, &je);
	cr_assert(v, "bad fixture: %s: %s", je.text, text);
	return v;
}

/* Client events as memd stores and reads them back (ej_event_parse, then
 * ej_event of the stored record, seq i + 1). */
static json_t *store(json_t *events)
{
	json_t *stored = json_array(), *ev;
	size_t i;

	json_array_foreach(events, i, ev) {
		ej_event_in in;
		memd_error err = { 0 };
		json_t *s;
		cr_assert_eq(ej_event_parse(ev, i, NULL, NOW_US, NULL, &in, &err), 0, "%s", err.msg);
		in.ev.seq = (int64_t)i + 1;
		s = ej_event(&in.ev);
		cr_assert(s);
		json_array_append_new(stored, s);
		ej_event_in_clear(&in);
	}
	return stored;
}

static json_t *to_messages(json_t *stored, uint32_t flags, int64_t *dropped)
{
	json_t *out = json_array();
	memd_error err = { 0 };
	cr_assert_eq(om_events_to_messages(stored, flags, out, dropped, &err), 0, "%s", err.msg);
	return out;
}

/* messages in (text) -> events -> stored -> messages out equal to in. */
static void round_trip(const char *text)
{
	json_t *in = parse(text), *events = NULL, *stored, *out;
	memd_error err = { 0 };
	char *a, *b;

	cr_assert_eq(om_messages_to_events(in, &events, &err), 0, "%s: %s", err.msg, text);
	cr_assert_eq(json_array_size(events), json_array_size(in), "one event a message");
	stored = store(events);
	out = to_messages(stored, 0, NULL);
	a = ej_dump(in);
	b = ej_dump(out);
	cr_assert(json_equal(in, out), "round trip differs:\n in: %s\nout: %s", a, b);
	free(a);
	free(b);
	json_decref(in);
	json_decref(events);
	json_decref(stored);
	json_decref(out);
}

/* The one event text maps to. */
static json_t *event_of(const char *text)
{
	json_t *in = parse(text), *events = NULL, *ev;
	memd_error err = { 0 };
	cr_assert_eq(om_messages_to_events(in, &events, &err), 0, "%s", err.msg);
	ev = json_incref(json_array_get(events, 0));
	json_decref(events);
	json_decref(in);
	return ev;
}

Test(openai_msgs, system_and_developer)
{
	round_trip("[{\"role\":\"system\",\"content\":\"You are terse.\"}]");
	round_trip("[{\"role\":\"system\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},"
		   "{\"type\":\"text\",\"text\":\"b\"}],\"name\":\"policy\"}]");
	round_trip("[{\"role\":\"system\",\"content\":[{\"type\":\"text\",\"text\":\"one\"}]}]");
	round_trip("[{\"role\":\"developer\",\"content\":\"Answer in French.\"}]");
	round_trip("[{\"role\":\"developer\",\"content\":[{\"type\":\"text\",\"text\":\"x\"}],"
		   "\"name\":\"ops\"}]");
	round_trip("[{\"role\":\"system\",\"content\":\"\"}]");
}

Test(openai_msgs, user_text_and_parts)
{
	round_trip("[{\"role\":\"user\",\"content\":\"hello\"}]");
	round_trip("[{\"role\":\"user\",\"content\":\"hello\",\"name\":\"alice\"}]");
	round_trip("[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"only\"}]}]");
	round_trip("[{\"role\":\"user\",\"content\":[]}]");
	round_trip("[{\"role\":\"user\",\"content\":["
		   "{\"type\":\"text\",\"text\":\"What is in these?\"},"
		   "{\"type\":\"image_url\",\"image_url\":{\"url\":\"https://example.com/a.png\","
		   "\"detail\":\"high\"}},"
		   "{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:image/png;base64,iVBORw0KGgo=\"}},"
		   "{\"type\":\"input_audio\",\"input_audio\":{\"data\":\"UklGRg==\",\"format\":\"wav\"}},"
		   "{\"type\":\"file\",\"file\":{\"file_id\":\"file-abc\"}},"
		   "{\"type\":\"file\",\"file\":{\"file_data\":\"JVBERi0=\",\"filename\":\"a.pdf\"}}]}]");
	round_trip("[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\","
		   "\"image_url\":{\"url\":\"https://example.com/b.jpg\",\"detail\":\"low\"}}]}]");
	/* Where a prompt cache may break, on every kind of part that has it. */
	round_trip("[{\"role\":\"system\",\"content\":[{\"type\":\"text\",\"text\":\"long\","
		   "\"prompt_cache_breakpoint\":{\"mode\":\"explicit\",\"ttl\":\"12h\"}}]},"
		   "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\","
		   "\"prompt_cache_breakpoint\":{\"mode\":\"explicit\"}},{\"type\":\"image_url\","
		   "\"image_url\":{\"url\":\"u\",\"detail\":\"original\"},"
		   "\"prompt_cache_breakpoint\":{\"mode\":\"explicit\",\"ttl\":\"30m\"}},"
		   "{\"type\":\"input_audio\",\"input_audio\":{\"data\":\"d\",\"format\":\"mp3\"},"
		   "\"prompt_cache_breakpoint\":{\"mode\":\"explicit\"}},"
		   "{\"type\":\"file\",\"file\":{\"file_id\":\"f\"},"
		   "\"prompt_cache_breakpoint\":{\"mode\":\"explicit\"}}]},"
		   "{\"role\":\"tool\",\"tool_call_id\":\"c\",\"content\":[{\"type\":\"text\","
		   "\"text\":\"r\",\"prompt_cache_breakpoint\":{\"mode\":\"explicit\"}}]}]");
}

Test(openai_msgs, assistant_every_member)
{
	round_trip("[{\"role\":\"assistant\",\"content\":\"Hi.\"}]");
	round_trip("[{\"role\":\"assistant\",\"content\":\"Hi.\",\"name\":\"helper\"}]");
	round_trip("[{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},"
		   "{\"type\":\"refusal\",\"refusal\":\"no\"}]}]");
	round_trip("[{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"a\"}]}]");
	round_trip("[{\"role\":\"assistant\",\"content\":[]}]");
	round_trip("[{\"role\":\"assistant\",\"content\":null,\"refusal\":\"I can't help with that.\"}]");
	round_trip("[{\"role\":\"assistant\",\"content\":[{\"type\":\"refusal\",\"refusal\":\"a\"}],"
		   "\"refusal\":\"b\"}]");
	round_trip("[{\"role\":\"assistant\",\"content\":\"x\",\"refusal\":\"y\"}]");
	round_trip("[{\"role\":\"assistant\",\"content\":\"Paris.\",\"refusal\":null,"
		   "\"audio\":null,\"function_call\":null}]");
	round_trip("[{\"role\":\"assistant\",\"audio\":{\"id\":\"audio_1\"}}]");
	round_trip("[{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[]}]");
}

Test(openai_msgs, tool_calls_and_results)
{
	round_trip("[{\"role\":\"user\",\"content\":\"Weather in Paris and Rome?\"},"
		   "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":["
		   "{\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"weather\","
		   "\"arguments\":\"{\\\"city\\\":\\\"Paris\\\"}\"}},"
		   "{\"id\":\"call_2\",\"type\":\"function\",\"function\":{\"name\":\"weather\","
		   "\"arguments\":\"{\\\"city\\\": \\\"Rome\\\", \\\"unit\\\": \\\"C\\\"}\"}},"
		   "{\"id\":\"call_3\",\"type\":\"function\",\"function\":{\"name\":\"broken\","
		   "\"arguments\":\"{\\\"city\\\":\"}},"
		   "{\"id\":\"call_4\",\"type\":\"function\",\"function\":{\"name\":\"list\","
		   "\"arguments\":\"[1,2]\"}},"
		   "{\"id\":\"call_5\",\"type\":\"custom\",\"custom\":{\"name\":\"sql\","
		   "\"input\":\"SELECT 1\"}}]},"
		   "{\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"content\":\"18C\"},"
		   "{\"role\":\"tool\",\"tool_call_id\":\"call_2\",\"content\":[{\"type\":\"text\","
		   "\"text\":\"21\"},{\"type\":\"text\",\"text\":\"C\"}]},"
		   "{\"role\":\"tool\",\"tool_call_id\":\"call_3\",\"content\":\"\"},"
		   "{\"role\":\"assistant\",\"content\":\"Paris 18C, Rome 21C.\"}]");
	/* content left out beside tool calls */
	round_trip("[{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"c\",\"type\":\"function\","
		   "\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]},"
		   "{\"role\":\"tool\",\"tool_call_id\":\"c\",\"content\":[{\"type\":\"text\","
		   "\"text\":\"ok\"}]}]");
	/* content beside tool calls */
	round_trip("[{\"role\":\"assistant\",\"content\":\"Looking.\",\"tool_calls\":["
		   "{\"id\":\"c\",\"type\":\"function\",\"function\":{\"name\":\"f\","
		   "\"arguments\":\"{\\\"a\\\":{\\\"b\\\":[1,2.5,\\\"\\u00e9\\\"]}}\"}}]}]");
}

/* messages in (text) -> events -> stored -> messages out equal to want. */
static void maps_to(const char *text, const char *want_text)
{
	json_t *in = parse(text), *want = parse(want_text), *events = NULL, *stored, *out;
	memd_error err = { 0 };

	cr_assert_eq(om_messages_to_events(in, &events, &err), 0, "%s: %s", err.msg, text);
	stored = store(events);
	out = to_messages(stored, 0, NULL);
	cr_assert(json_equal(want, out), "got %s, want %s", ej_dump(out), want_text);
	json_decref(in);
	json_decref(want);
	json_decref(events);
	json_decref(stored);
	json_decref(out);
}

Test(openai_msgs, a_response_message_comes_back_as_a_request_message)
{
	/* ChatCompletionMessage, pushed into the history as it came: its
	 * annotations are no member of a request's assistant message. */
	maps_to("[{\"role\":\"assistant\",\"content\":\"see\",\"refusal\":null,\"annotations\":"
		"[{\"type\":\"url_citation\",\"url_citation\":{\"url\":\"https://e.com\","
		"\"title\":\"E\",\"start_index\":0,\"end_index\":3}}]}]",
		"[{\"role\":\"assistant\",\"content\":\"see\",\"refusal\":null}]");
	maps_to("[{\"role\":\"assistant\",\"content\":null,\"refusal\":null,\"annotations\":[],"
		"\"tool_calls\":[{\"id\":\"c\",\"type\":\"function\",\"function\":{\"name\":\"f\","
		"\"arguments\":\"{}\"}}]}]",
		"[{\"role\":\"assistant\",\"content\":null,\"refusal\":null,\"tool_calls\":"
		"[{\"id\":\"c\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":"
		"\"{}\"}}]}]");
}

Test(openai_msgs, legacy_function_call)
{
	round_trip("[{\"role\":\"assistant\",\"content\":null,\"function_call\":{\"name\":\"f\","
		   "\"arguments\":\"{\\\"x\\\":1}\"}},"
		   "{\"role\":\"function\",\"name\":\"f\",\"content\":\"done\"},"
		   "{\"role\":\"function\",\"name\":\"g\",\"content\":null}]");
}

Test(openai_msgs, events_are_the_ones_memd_has)
{
	json_t *ev = event_of("[{\"role\":\"assistant\",\"content\":\"Looking.\",\"tool_calls\":["
			      "{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"f\","
			      "\"arguments\":\"{\\\"q\\\":\\\"x\\\"}\"}}]}]");
	json_t *want = parse("{\"role\":\"assistant\",\"content\":{\"parts\":[{\"text\":\"Looking.\"},"
			     "{\"tool_call\":{\"id\":\"c1\",\"name\":\"f\",\"args\":{\"q\":\"x\"}}}]}}");
	cr_assert(json_equal(ev, want), "an assistant's tool call is memd's tool_call part, "
		  "args an object, no metadata");
	json_decref(ev);
	json_decref(want);

	ev = event_of("[{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"r\"}]");
	want = parse("{\"role\":\"tool\",\"content\":{\"parts\":[{\"tool_result\":{\"id\":\"c1\","
		     "\"content\":\"r\"}}]}}");
	cr_assert(json_equal(ev, want), "a tool message is a tool_result part");
	json_decref(ev);
	json_decref(want);

	ev = event_of("[{\"role\":\"user\",\"content\":\"hi\",\"name\":\"bob\",\"id\":\"m1\"}]");
	want = parse("{\"id\":\"m1\",\"role\":\"user\",\"author\":\"bob\",\"content\":{\"parts\":"
		     "[{\"text\":\"hi\"}]},\"metadata\":{\"openai\":{\"name\":true}}}");
	cr_assert(json_equal(ev, want), "the name is the author, the id the event's");
	json_decref(ev);
	json_decref(want);
}

static void refused(const char *text, const char *what)
{
	json_t *in = parse(text), *events = NULL;
	memd_error err = { 0 };
	cr_assert_eq(om_messages_to_events(in, &events, &err), MEMD_EINVAL, "accepted: %s", text);
	cr_assert(events == NULL);
	cr_assert(strstr(err.msg, what), "error '%s' should say '%s'", err.msg, what);
	json_decref(in);
}

Test(openai_msgs, bad_messages_name_index_and_field)
{
	refused("{\"role\":\"user\"}", "messages: must be an array");
	refused("[\"hi\"]", "messages[0]: must be an object");
	refused("[{\"content\":\"x\"}]", "messages[0].role: required");
	refused("[{\"role\":\"bot\",\"content\":\"x\"}]", "messages[0].role: must be system");
	refused("[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"user\"}]",
		"messages[1].content: required");
	refused("[{\"role\":\"user\",\"content\":5}]", "messages[0].content: must be a string");
	refused("[{\"role\":\"user\",\"content\":null}]", "messages[0].content: must be a string");
	refused("[{\"role\":\"user\",\"content\":\"a\",\"foo\":1}]",
		"messages[0]: unknown field 'foo'");
	refused("[{\"role\":\"user\",\"content\":\"a\",\"tool_calls\":[]}]",
		"messages[0]: unknown field 'tool_calls'");
	refused("[{\"role\":\"user\",\"content\":[{\"type\":\"refusal\",\"refusal\":\"x\"}]}]",
		"messages[0].content[0].type: 'refusal' is not a content part of a user message");
	refused("[{\"role\":\"assistant\",\"content\":[{\"type\":\"image_url\",\"image_url\":"
		"{\"url\":\"u\"}}]}]",
		"messages[0].content[0].type: 'image_url' is not a content part of a assistant");
	refused("[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":{}}]}]",
		"messages[0].content[0].image_url.url: required");
	refused("[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\"}]}]",
		"messages[0].content[0].image_url: required");
	refused("[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\",\"x\":1}]}]",
		"messages[0].content[0]: unknown field 'x'");
	refused("[{\"role\":\"user\",\"content\":[{\"type\":\"input_audio\",\"input_audio\":"
		"{\"data\":\"a\"}}]}]",
		"messages[0].content[0].input_audio.format: required");
	refused("[{\"role\":\"user\",\"content\":[{\"type\":\"file\",\"file\":{\"file_id\":3}}]}]",
		"messages[0].content[0].file.file_id: must be a string");
	refused("[{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"a\",\"type\":\"function\","
		"\"function\":{\"name\":\"f\",\"arguments\":{}}}]}]",
		"messages[0].tool_calls[0].function.arguments: must be a string");
	refused("[{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"a\",\"type\":\"function\","
		"\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}},{\"id\":\"a\",\"type\":"
		"\"function\",\"function\":{\"name\":\"g\",\"arguments\":\"{}\"}}]}]",
		"messages[0].tool_calls[1].id: repeats tool_calls[0].id");
	refused("[{\"role\":\"assistant\",\"tool_calls\":[{\"type\":\"function\","
		"\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]}]",
		"messages[0].tool_calls[0].id: required");
	refused("[{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"a\",\"type\":\"web\"}]}]",
		"messages[0].tool_calls[0].type: must be \"function\" or \"custom\"");
	refused("[{\"role\":\"assistant\",\"tool_calls\":{}}]",
		"messages[0].tool_calls: must be an array");
	refused("[{\"role\":\"assistant\",\"refusal\":1}]", "messages[0].refusal: must be a string or null");
	refused("[{\"role\":\"tool\",\"content\":\"x\"}]", "messages[0].tool_call_id: required");
	refused("[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\","
		"\"prompt_cache_breakpoint\":true}]}]",
		"messages[0].content[0].prompt_cache_breakpoint: must be an object");
	refused("[{\"role\":\"assistant\",\"content\":[{\"type\":\"refusal\",\"refusal\":\"a\","
		"\"prompt_cache_breakpoint\":{}}]}]",
		"messages[0].content[0]: unknown field 'prompt_cache_breakpoint'");
	refused("[{\"role\":\"tool\",\"tool_call_id\":\"\",\"content\":\"x\"}]",
		"messages[0].tool_call_id: must not be empty");
	refused("[{\"role\":\"tool\",\"tool_call_id\":\"c\",\"content\":[{\"type\":\"image_url\","
		"\"image_url\":{\"url\":\"u\"}}]}]",
		"messages[0].content[0].type: 'image_url' is not a content part of a tool message");
	refused("[{\"role\":\"tool\",\"tool_call_id\":\"c\",\"content\":\"x\",\"name\":\"n\"}]",
		"messages[0]: unknown field 'name'");
	refused("[{\"role\":\"function\",\"content\":\"x\"}]", "messages[0].name: required");
	refused("[{\"role\":\"user\",\"content\":\"x\",\"name\":\"a/b\"}]",
		"messages[0].name: contains '/'");
	refused("[{\"role\":\"user\",\"content\":\"x\",\"id\":\"\"}]", "messages[0].id: must not be empty");
	refused("[{\"role\":\"user\",\"content\":\"x\",\"id\":\"a\"},{\"role\":\"user\","
		"\"content\":\"y\",\"id\":\"b\"},{\"role\":\"user\",\"content\":\"z\",\"id\":\"a\"}]",
		"messages[2].id: repeats messages[0].id");
}

Test(openai_msgs, summary_is_a_system_message_saying_what_it_covers)
{
	json_t *events = parse("[{\"role\":\"summary\",\"seq\":9,\"covers_seq\":8,"
			       "\"timestamp\":\"2026-11-25T10:00:00.000000Z\","
			       "\"content\":{\"parts\":[{\"text\":\"Alice asked about Paris.\"}]}},"
			       "{\"role\":\"user\",\"content\":{\"parts\":[{\"text\":\"and Rome?\"}]}}]");
	json_t *out = to_messages(events, 0, NULL);
	json_t *want = parse("[{\"role\":\"system\",\"content\":\"Summary of the conversation up to "
			     "2026-11-25T10:00:00.000000Z (events 1..8):\\nAlice asked about Paris.\"},"
			     "{\"role\":\"user\",\"content\":\"and Rome?\"}]");
	cr_assert(json_equal(out, want), "%s", ej_dump(out));
	json_decref(events);
	json_decref(out);
	json_decref(want);
}

Test(openai_msgs, other_clients_events_map_to_valid_messages)
{
	/* A tool result in a user event (as some agent frameworks write it),
	 * a call without an id, a result object, an event of a role memd's
	 * chat messages do not have. */
	json_t *events = parse(
		"[{\"role\":\"assistant\",\"content\":{\"parts\":[{\"tool_call\":{\"id\":\"a\","
		"\"name\":\"f\",\"args\":{\"k\":[1]}}}]}},"
		"{\"role\":\"user\",\"content\":{\"parts\":[{\"tool_result\":{\"id\":\"a\","
		"\"result\":{\"ok\":true}}},{\"text\":\"thanks\"}]}},"
		"{\"role\":\"assistant\",\"content\":{\"parts\":[{\"tool_call\":{\"name\":\"g\"}}]}},"
		"{\"role\":\"user\",\"content\":{\"parts\":[{\"tool_result\":{\"id\":\"a\","
		"\"content\":\"again\"}}]}}]");
	json_t *out = to_messages(events, 0, NULL);
	json_t *want = parse(
		"[{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"a\",\"type\":"
		"\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"k\\\":[1]}\"}}]},"
		"{\"role\":\"tool\",\"content\":\"{\\\"ok\\\":true}\",\"tool_call_id\":\"a\"},"
		"{\"role\":\"user\",\"content\":\"thanks\"},"
		"{\"role\":\"assistant\",\"content\":null,\"function_call\":{\"name\":\"g\","
		"\"arguments\":\"{}\"}},"
		"{\"role\":\"tool\",\"content\":\"again\",\"tool_call_id\":\"a\"}]");
	cr_assert(json_equal(out, want), "%s", ej_dump(out));
	json_decref(events);
	json_decref(out);
	json_decref(want);
}

Test(openai_msgs, a_window_inside_a_tool_exchange_drops_the_orphans)
{
	/* The window starts at the second result of an exchange whose call
	 * is outside it. */
	json_t *events = parse(
		"[{\"role\":\"tool\",\"tokens\":7,\"content\":{\"parts\":[{\"tool_result\":"
		"{\"id\":\"old\",\"content\":\"r\"}}]}},"
		"{\"role\":\"function\",\"tokens\":1,\"content\":{\"parts\":[]}},"
		"{\"role\":\"tool\",\"tokens\":5,\"metadata\":{\"openai\":{\"role\":\"function\"}},"
		"\"content\":{\"parts\":[{\"tool_result\":{\"name\":\"f\",\"content\":\"r\"}}]}},"
		"{\"role\":\"user\",\"tokens\":3,\"content\":{\"parts\":[{\"text\":\"go\"}]}},"
		"{\"role\":\"assistant\",\"tokens\":4,\"content\":{\"parts\":[{\"tool_call\":"
		"{\"id\":\"new\",\"name\":\"f\",\"args\":{}}}]}},"
		"{\"role\":\"tool\",\"tokens\":2,\"content\":{\"parts\":[{\"tool_result\":"
		"{\"id\":\"new\",\"content\":\"ok\"}}]}}]");
	int64_t dropped = -1;
	json_t *out = to_messages(events, OM_DROP_ORPHAN_RESULTS, &dropped);
	json_t *all = to_messages(events, 0, NULL);

	cr_assert_eq(json_array_size(out), 3, "%s", ej_dump(out));
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(out, 0), "role")), "user");
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(out, 2), "tool_call_id")),
			 "new");
	cr_assert_eq(dropped, 12, "the orphans' tokens: %lld", (long long)dropped);
	cr_assert_eq(json_array_size(all), 5, "without the flag the orphans stay: %s", ej_dump(all));
	json_decref(events);
	json_decref(out);
	json_decref(all);
}
