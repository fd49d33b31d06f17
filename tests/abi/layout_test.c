/* SPDX-License-Identifier: MIT */
/*
 * Golden layout of the plugin ABI (api/memd/{abi,host,store,strategy,
 * vector,plugin}.h) on x86_64 / LP64: sizeof and offsetof of every member
 * of every struct, and the value of every #define'd constant, written out
 * as literal numbers.
 *
 * If this test fails, the ABI changed. That is never an accident to paper
 * over: changing a number here is a deliberate ABI decision. The only
 * compatible change is to append members at the end of a struct (each
 * with a "since 1.N" comment) and bump MEMD_ABI_MINOR (api/memd/abi.h and
 * meson.build); then add the new members' offsets and the new sizes here,
 * and leave every existing offset as it is. Anything else (reordering,
 * resizing, removing, changing a constant's value) needs a new major:
 * a new entry symbol and a new set of headers.
 */
#include <criterion/criterion.h>

#include <stddef.h>
#include <string.h>

#include <memd/plugin.h>

#include "memd-build.h"

#define SIZE(T, n) \
	cr_expect_eq(sizeof(T), (size_t)(n), "sizeof(" #T ") is %zu, golden %zu", sizeof(T), \
		     (size_t)(n))
/* Member m of T: at offset off, size bytes wide. */
#define MEMBER(T, m, off, size)                                                             \
	do {                                                                                 \
		cr_expect_eq(offsetof(T, m), (size_t)(off),                                  \
			     "offsetof(" #T ", " #m ") is %zu, golden %zu", offsetof(T, m),  \
			     (size_t)(off));                                                 \
		cr_expect_eq(sizeof(((T *)0)->m), (size_t)(size),                            \
			     "sizeof(" #T "." #m ") is %zu, golden %zu", sizeof(((T *)0)->m), \
			     (size_t)(size));                                                \
	} while (0)
#define VAL(c, n) \
	cr_expect_eq((long long)(c), (long long)(n), #c " is %lld, golden %lld", (long long)(c), \
		     (long long)(n))

#if defined(__x86_64__) && defined(__LP64__)
#define LAYOUT_GOLDEN 1
#else
#define LAYOUT_GOLDEN 0
#endif

static void lp64_only(void)
{
	if (!LAYOUT_GOLDEN)
		cr_skip_test("the golden numbers are for x86_64 / LP64");
}

TestSuite(layout, .init = lp64_only);

Test(layout, host_implements_the_header_abi)
{
	/* meson.build's memd_abi_major/minor (the host) and abi.h agree. */
	VAL(MEMD_ABI_MAJOR, MEMD_HOST_ABI_MAJOR);
	VAL(MEMD_ABI_MINOR, MEMD_HOST_ABI_MINOR);
	cr_expect_str_eq(MEMD_PLUGIN_ENTRY_SYMBOL, "memd_plugin_entry_v1");
}


Test(layout, abi_h)
{
	SIZE(memd_error, 268);
	MEMBER(memd_error, struct_size, 0, 4);
	MEMBER(memd_error, code, 4, 4);
	MEMBER(memd_error, flags, 8, 4);
	MEMBER(memd_error, msg, 12, 256);
	SIZE(memd_call, 40);
	MEMBER(memd_call, struct_size, 0, 4);
	MEMBER(memd_call, flags, 4, 4);
	MEMBER(memd_call, deadline_us, 8, 8);
	MEMBER(memd_call, request_id, 16, 8);
	MEMBER(memd_call, cancel, 24, 8);
	MEMBER(memd_call, rows_read, 32, 8);
	SIZE(memd_scope, 32);
	MEMBER(memd_scope, struct_size, 0, 4);
	MEMBER(memd_scope, reserved, 4, 4);
	MEMBER(memd_scope, app, 8, 8);
	MEMBER(memd_scope, user, 16, 8);
	MEMBER(memd_scope, session, 24, 8);
}

Test(layout, abi_h_constants)
{
	VAL(MEMD_ABI_MAJOR, 1);
	VAL(MEMD_ABI_MINOR, 6);
	VAL(MEMD_OK, 0);
	VAL(MEMD_EINVAL, -1);
	VAL(MEMD_ENOTFOUND, -2);
	VAL(MEMD_ECONFLICT, -3);
	VAL(MEMD_ENOMEM, -4);
	VAL(MEMD_EIO, -5);
	VAL(MEMD_ENOTSUP, -6);
	VAL(MEMD_EUNAVAIL, -7);
	VAL(MEMD_ETIMEDOUT, -8);
	VAL(MEMD_ECANCELED, -9);
	VAL(MEMD_ETOOBIG, -10);
	VAL(MEMD_EABI, -11);
	VAL(MEMD_EINTERNAL, -12);
	VAL(MEMD_EAUTH, -13);
	VAL(MEMD_EFORBIDDEN, -14);
	VAL(MEMD_ERROR_RETRYABLE, 1);
	VAL(MEMD_ERROR_MSG_MAX, 256);
	VAL(MEMD_LOG_ERROR, 0);
	VAL(MEMD_LOG_WARN, 1);
	VAL(MEMD_LOG_INFO, 2);
	VAL(MEMD_LOG_DEBUG, 3);
	VAL(MEMD_ID_MAX, 255);
}

Test(layout, host_h)
{
	SIZE(memd_text_sink, 24);
	MEMBER(memd_text_sink, struct_size, 0, 4);
	MEMBER(memd_text_sink, userdata, 8, 8);
	MEMBER(memd_text_sink, text, 16, 8);
	SIZE(memd_host, 136);
	MEMBER(memd_host, struct_size, 0, 4);
	MEMBER(memd_host, abi_major, 4, 4);
	MEMBER(memd_host, abi_minor, 8, 4);
	MEMBER(memd_host, reserved, 12, 4);
	MEMBER(memd_host, host_data, 16, 8);
	MEMBER(memd_host, log, 24, 8);
	MEMBER(memd_host, alloc, 32, 8);
	MEMBER(memd_host, realloc, 40, 8);
	MEMBER(memd_host, free, 48, 8);
	MEMBER(memd_host, now_us, 56, 8);
	MEMBER(memd_host, monotonic_us, 64, 8);
	MEMBER(memd_host, config_string, 72, 8);
	MEMBER(memd_host, config_int, 80, 8);
	MEMBER(memd_host, config_double, 88, 8);
	MEMBER(memd_host, config_bool, 96, 8);
	MEMBER(memd_host, config_json, 104, 8);
	MEMBER(memd_host, count_tokens, 112, 8);
	MEMBER(memd_host, summarize, 120, 8);
	MEMBER(memd_host, uuid_v7, 128, 8);
}

Test(layout, store_h)
{
	SIZE(memd_session, 208); /* 1.2 and 1.3 grew it */
	MEMBER(memd_session, struct_size, 0, 4);
	MEMBER(memd_session, flags, 4, 4);
	MEMBER(memd_session, app, 8, 8);
	MEMBER(memd_session, user, 16, 8);
	MEMBER(memd_session, id, 24, 8);
	MEMBER(memd_session, title, 32, 8);
	MEMBER(memd_session, metadata_json, 40, 8);
	MEMBER(memd_session, created_us, 48, 8);
	MEMBER(memd_session, updated_us, 56, 8);
	MEMBER(memd_session, version, 64, 8);
	MEMBER(memd_session, last_seq, 72, 8);
	MEMBER(memd_session, summary_seq, 80, 8);
	MEMBER(memd_session, lane_key, 88, 8);
	MEMBER(memd_session, origin_json, 96, 8);
	MEMBER(memd_session, origin_platform, 104, 8);
	MEMBER(memd_session, previous_session, 112, 8);
	MEMBER(memd_session, start_reason, 120, 8);
	MEMBER(memd_session, end_reason, 128, 8);
	MEMBER(memd_session, ended_us, 136, 8);
	MEMBER(memd_session, input_tokens, 144, 8);
	MEMBER(memd_session, output_tokens, 152, 8);
	MEMBER(memd_session, cache_read_tokens, 160, 8);
	MEMBER(memd_session, cache_write_tokens, 168, 8);
	MEMBER(memd_session, cost_micro_usd, 176, 8);
	MEMBER(memd_session, last_prompt_tokens, 184, 8);
	MEMBER(memd_session, message_count, 192, 8);
	MEMBER(memd_session, memory_seq, 200, 8);
	SIZE(memd_event, 176); /* 1.2 grew it */
	MEMBER(memd_event, struct_size, 0, 4);
	MEMBER(memd_event, flags, 4, 4);
	MEMBER(memd_event, id, 8, 8);
	MEMBER(memd_event, seq, 16, 8);
	MEMBER(memd_event, invocation_id, 24, 8);
	MEMBER(memd_event, author, 32, 8);
	MEMBER(memd_event, role, 40, 8);
	MEMBER(memd_event, branch, 48, 8);
	MEMBER(memd_event, content_json, 56, 8);
	MEMBER(memd_event, actions_json, 64, 8);
	MEMBER(memd_event, metadata_json, 72, 8);
	MEMBER(memd_event, timestamp_us, 80, 8);
	MEMBER(memd_event, text, 88, 8);
	MEMBER(memd_event, tokens, 96, 8);
	MEMBER(memd_event, covers_seq, 104, 8);
	MEMBER(memd_event, position, 112, 8);
	MEMBER(memd_event, app, 120, 8);
	MEMBER(memd_event, user, 128, 8);
	MEMBER(memd_event, session, 136, 8);
	MEMBER(memd_event, hidden_us, 144, 8);
	MEMBER(memd_event, hidden_by, 152, 8);
	MEMBER(memd_event, hidden_kind, 160, 4);
	MEMBER(memd_event, reserved2, 164, 4);
	MEMBER(memd_event, operation, 168, 8);
	SIZE(memd_artifact, 56);
	MEMBER(memd_artifact, struct_size, 0, 4);
	MEMBER(memd_artifact, reserved, 4, 4);
	MEMBER(memd_artifact, name, 8, 8);
	MEMBER(memd_artifact, version, 16, 8);
	MEMBER(memd_artifact, mime_type, 24, 8);
	MEMBER(memd_artifact, data, 32, 8);
	MEMBER(memd_artifact, size, 40, 8);
	MEMBER(memd_artifact, created_us, 48, 8);
	SIZE(memd_feed_record, 56); /* 1.3 grew it */
	MEMBER(memd_feed_record, struct_size, 0, 4);
	MEMBER(memd_feed_record, kind, 4, 4);
	MEMBER(memd_feed_record, position, 8, 8);
	MEMBER(memd_feed_record, app, 16, 8);
	MEMBER(memd_feed_record, user, 24, 8);
	MEMBER(memd_feed_record, session, 32, 8);
	MEMBER(memd_feed_record, event, 40, 8);
	MEMBER(memd_feed_record, memory, 48, 8);
	SIZE(memd_session_query, 56); /* 1.2 grew it */
	MEMBER(memd_session_query, struct_size, 0, 4);
	MEMBER(memd_session_query, flags, 4, 4);
	MEMBER(memd_session_query, limit, 8, 4);
	MEMBER(memd_session_query, reserved, 12, 4);
	MEMBER(memd_session_query, before_created_us, 16, 8);
	MEMBER(memd_session_query, before_id, 24, 8);
	MEMBER(memd_session_query, origin_platform, 32, 8);
	MEMBER(memd_session_query, lane_key, 40, 8);
	MEMBER(memd_session_query, updated_after_us, 48, 8);
	SIZE(memd_event_query, 48); /* 1.2 grew it */
	MEMBER(memd_event_query, struct_size, 0, 4);
	MEMBER(memd_event_query, flags, 4, 4);
	MEMBER(memd_event_query, after_seq, 8, 8);
	MEMBER(memd_event_query, before_seq, 16, 8);
	MEMBER(memd_event_query, after_time_us, 24, 8);
	MEMBER(memd_event_query, limit, 32, 4);
	MEMBER(memd_event_query, reserved, 36, 4);
	MEMBER(memd_event_query, roles, 40, 4);
	MEMBER(memd_event_query, reserved2, 44, 4);
	SIZE(memd_session_update, 40);
	MEMBER(memd_session_update, struct_size, 0, 4);
	MEMBER(memd_session_update, fields, 4, 4);
	MEMBER(memd_session_update, title, 8, 8);
	MEMBER(memd_session_update, metadata_json, 16, 8);
	MEMBER(memd_session_update, archived, 24, 4);
	MEMBER(memd_session_update, reserved, 28, 4);
	MEMBER(memd_session_update, now_us, 32, 8);
	SIZE(memd_append, 72); /* 1.2 grew it */
	MEMBER(memd_append, struct_size, 0, 4);
	MEMBER(memd_append, flags, 4, 4);
	MEMBER(memd_append, expected_version, 8, 8);
	MEMBER(memd_append, events, 16, 8);
	MEMBER(memd_append, n_events, 24, 4);
	MEMBER(memd_append, reserved, 28, 4);
	MEMBER(memd_append, state_delta_json, 32, 8);
	MEMBER(memd_append, title_if_unset, 40, 8);
	MEMBER(memd_append, now_us, 48, 8);
	MEMBER(memd_append, usage, 56, 8);
	MEMBER(memd_append, op, 64, 8);
	SIZE(memd_append_result, 40); /* 1.2 grew it */
	MEMBER(memd_append_result, struct_size, 0, 4);
	MEMBER(memd_append_result, flags, 4, 4);
	MEMBER(memd_append_result, version, 8, 8);
	MEMBER(memd_append_result, seqs, 16, 8);
	MEMBER(memd_append_result, hidden_count, 24, 8);
	MEMBER(memd_append_result, unhidden_count, 32, 8);
	SIZE(memd_session_sink, 24);
	MEMBER(memd_session_sink, struct_size, 0, 4);
	MEMBER(memd_session_sink, userdata, 8, 8);
	MEMBER(memd_session_sink, session, 16, 8);
	SIZE(memd_event_sink, 24);
	MEMBER(memd_event_sink, struct_size, 0, 4);
	MEMBER(memd_event_sink, userdata, 8, 8);
	MEMBER(memd_event_sink, event, 16, 8);
	SIZE(memd_artifact_sink, 24);
	MEMBER(memd_artifact_sink, struct_size, 0, 4);
	MEMBER(memd_artifact_sink, userdata, 8, 8);
	MEMBER(memd_artifact_sink, artifact, 16, 8);
	SIZE(memd_feed_sink, 24);
	MEMBER(memd_feed_sink, struct_size, 0, 4);
	MEMBER(memd_feed_sink, userdata, 8, 8);
	MEMBER(memd_feed_sink, record, 16, 8);
	SIZE(memd_store_ops, 400); /* 1.2, 1.3, 1.4 and 1.5 grew it */
	MEMBER(memd_store_ops, struct_size, 0, 4);
	MEMBER(memd_store_ops, reserved, 4, 4);
	MEMBER(memd_store_ops, session_create, 8, 8);
	MEMBER(memd_store_ops, session_get, 16, 8);
	MEMBER(memd_store_ops, session_list, 24, 8);
	MEMBER(memd_store_ops, session_update, 32, 8);
	MEMBER(memd_store_ops, session_delete, 40, 8);
	MEMBER(memd_store_ops, append, 48, 8);
	MEMBER(memd_store_ops, events_load, 56, 8);
	MEMBER(memd_store_ops, state_get, 64, 8);
	MEMBER(memd_store_ops, artifact_put, 72, 8);
	MEMBER(memd_store_ops, artifact_get, 80, 8);
	MEMBER(memd_store_ops, artifact_list, 88, 8);
	MEMBER(memd_store_ops, artifact_versions, 96, 8);
	MEMBER(memd_store_ops, artifact_delete, 104, 8);
	MEMBER(memd_store_ops, user_delete, 112, 8);
	MEMBER(memd_store_ops, feed_read, 120, 8);
	MEMBER(memd_store_ops, feed_head, 128, 8);
	MEMBER(memd_store_ops, cursor_get, 136, 8);
	MEMBER(memd_store_ops, cursor_set, 144, 8);
	MEMBER(memd_store_ops, ping, 152, 8);
	MEMBER(memd_store_ops, lane_get, 160, 8);
	MEMBER(memd_store_ops, lane_write, 168, 8);
	MEMBER(memd_store_ops, lane_list, 176, 8);
	MEMBER(memd_store_ops, lane_delete, 184, 8);
	MEMBER(memd_store_ops, lane_prune, 192, 8);
	MEMBER(memd_store_ops, inbox_put, 200, 8);
	MEMBER(memd_store_ops, inbox_take, 208, 8);
	MEMBER(memd_store_ops, inbox_list, 216, 8);
	MEMBER(memd_store_ops, session_list_ended, 224, 8);
	MEMBER(memd_store_ops, operation_list, 232, 8);
	MEMBER(memd_store_ops, operation_get, 240, 8);
	MEMBER(memd_store_ops, state_history, 248, 8);
	MEMBER(memd_store_ops, memory_commit, 256, 8);
	MEMBER(memd_store_ops, memory_get, 264, 8);
	MEMBER(memd_store_ops, memory_list, 272, 8);
	MEMBER(memd_store_ops, memory_history, 280, 8);
	MEMBER(memd_store_ops, memory_expire, 288, 8);
	MEMBER(memd_store_ops, session_list_pending, 296, 8);
	MEMBER(memd_store_ops, stats, 304, 8);
	MEMBER(memd_store_ops, checkpoint_put, 312, 8);
	MEMBER(memd_store_ops, checkpoint_put_writes, 320, 8);
	MEMBER(memd_store_ops, checkpoint_get, 328, 8);
	MEMBER(memd_store_ops, checkpoint_list, 336, 8);
	MEMBER(memd_store_ops, checkpoint_delete, 344, 8);
	MEMBER(memd_store_ops, checkpoint_resumable, 352, 8);
	MEMBER(memd_store_ops, checkpoint_expire, 360, 8);
	MEMBER(memd_store_ops, task_put, 368, 8);
	MEMBER(memd_store_ops, task_get, 376, 8);
	MEMBER(memd_store_ops, task_list, 384, 8);
	MEMBER(memd_store_ops, task_delete, 392, 8);
	SIZE(memd_store_stats, 32); /* 1.4 */
	MEMBER(memd_store_stats, struct_size, 0, 4);
	MEMBER(memd_store_stats, reserved, 4, 4);
	MEMBER(memd_store_stats, write_requests, 8, 8);
	MEMBER(memd_store_stats, write_groups, 16, 8);
	MEMBER(memd_store_stats, commits, 24, 8);
	/* since 1.2: lanes */
	SIZE(memd_usage, 56);
	MEMBER(memd_usage, struct_size, 0, 4);
	MEMBER(memd_usage, reserved, 4, 4);
	MEMBER(memd_usage, input_tokens, 8, 8);
	MEMBER(memd_usage, output_tokens, 16, 8);
	MEMBER(memd_usage, cache_read_tokens, 24, 8);
	MEMBER(memd_usage, cache_write_tokens, 32, 8);
	MEMBER(memd_usage, cost_micro_usd, 40, 8);
	MEMBER(memd_usage, last_prompt_tokens, 48, 8);
	SIZE(memd_lane, 208);
	MEMBER(memd_lane, struct_size, 0, 4);
	MEMBER(memd_lane, flags, 4, 4);
	MEMBER(memd_lane, app, 8, 8);
	MEMBER(memd_lane, user, 16, 8);
	MEMBER(memd_lane, key, 24, 8);
	MEMBER(memd_lane, session, 32, 8);
	MEMBER(memd_lane, origin_json, 40, 8);
	MEMBER(memd_lane, created_us, 48, 8);
	MEMBER(memd_lane, updated_us, 56, 8);
	MEMBER(memd_lane, version, 64, 8);
	MEMBER(memd_lane, resume_reason, 72, 8);
	MEMBER(memd_lane, resume_marked_us, 80, 8);
	MEMBER(memd_lane, reset_reason, 88, 8);
	MEMBER(memd_lane, previous_session, 96, 8);
	MEMBER(memd_lane, reset_us, 104, 8);
	MEMBER(memd_lane, turn_id, 112, 8);
	MEMBER(memd_lane, turn_started_us, 120, 8);
	MEMBER(memd_lane, turn_lease_until_us, 128, 8);
	MEMBER(memd_lane, interruptions, 136, 4);
	MEMBER(memd_lane, finalize_failures, 140, 4);
	MEMBER(memd_lane, finalize_claim_until_us, 144, 8);
	MEMBER(memd_lane, input_tokens, 152, 8);
	MEMBER(memd_lane, output_tokens, 160, 8);
	MEMBER(memd_lane, cache_read_tokens, 168, 8);
	MEMBER(memd_lane, cache_write_tokens, 176, 8);
	MEMBER(memd_lane, cost_micro_usd, 184, 8);
	MEMBER(memd_lane, last_prompt_tokens, 192, 8);
	MEMBER(memd_lane, inbox_depth, 200, 4);
	MEMBER(memd_lane, reserved, 204, 4);
	SIZE(memd_inbox_item, 48);
	MEMBER(memd_inbox_item, struct_size, 0, 4);
	MEMBER(memd_inbox_item, mode, 4, 4);
	MEMBER(memd_inbox_item, id, 8, 8);
	MEMBER(memd_inbox_item, body_json, 16, 8);
	MEMBER(memd_inbox_item, created_us, 24, 8);
	MEMBER(memd_inbox_item, position, 32, 8);
	MEMBER(memd_inbox_item, in_slot, 40, 4);
	MEMBER(memd_inbox_item, reserved, 44, 4);
	SIZE(memd_lane_write, 72);
	MEMBER(memd_lane_write, struct_size, 0, 4);
	MEMBER(memd_lane_write, flags, 4, 4);
	MEMBER(memd_lane_write, expected_version, 8, 8);
	MEMBER(memd_lane_write, lane, 16, 8);
	MEMBER(memd_lane_write, create_session, 24, 8);
	MEMBER(memd_lane_write, end_session, 32, 8);
	MEMBER(memd_lane_write, end_reason, 40, 8);
	MEMBER(memd_lane_write, reopen_session, 48, 8);
	MEMBER(memd_lane_write, usage, 56, 8);
	MEMBER(memd_lane_write, now_us, 64, 8);
	SIZE(memd_lane_query, 96);
	MEMBER(memd_lane_query, struct_size, 0, 4);
	MEMBER(memd_lane_query, limit, 4, 4);
	MEMBER(memd_lane_query, app, 8, 8);
	MEMBER(memd_lane_query, user, 16, 8);
	MEMBER(memd_lane_query, flags_all, 24, 4);
	MEMBER(memd_lane_query, flags_none, 28, 4);
	MEMBER(memd_lane_query, turn, 32, 4);
	MEMBER(memd_lane_query, reserved, 36, 4);
	MEMBER(memd_lane_query, updated_after_us, 40, 8);
	MEMBER(memd_lane_query, updated_before_us, 48, 8);
	MEMBER(memd_lane_query, lease_before_us, 56, 8);
	MEMBER(memd_lane_query, before_updated_us, 64, 8);
	MEMBER(memd_lane_query, before_app, 72, 8);
	MEMBER(memd_lane_query, before_user, 80, 8);
	MEMBER(memd_lane_query, before_key, 88, 8);
	SIZE(memd_lane_sink, 24);
	MEMBER(memd_lane_sink, struct_size, 0, 4);
	MEMBER(memd_lane_sink, userdata, 8, 8);
	MEMBER(memd_lane_sink, lane, 16, 8);
	SIZE(memd_inbox_sink, 24);
	MEMBER(memd_inbox_sink, struct_size, 0, 4);
	MEMBER(memd_inbox_sink, userdata, 8, 8);
	MEMBER(memd_inbox_sink, item, 16, 8);
	/* since 1.2: transcripts */
	SIZE(memd_transcript_op, 48);
	MEMBER(memd_transcript_op, struct_size, 0, 4);
	MEMBER(memd_transcript_op, kind, 4, 4);
	MEMBER(memd_transcript_op, id, 8, 8);
	MEMBER(memd_transcript_op, hide_from_seq, 16, 8);
	MEMBER(memd_transcript_op, undo_id, 24, 8);
	MEMBER(memd_transcript_op, state_expect_json, 32, 8);
	MEMBER(memd_transcript_op, not_restored, 40, 8);
	SIZE(memd_operation, 88);
	MEMBER(memd_operation, struct_size, 0, 4);
	MEMBER(memd_operation, kind, 4, 4);
	MEMBER(memd_operation, id, 8, 8);
	MEMBER(memd_operation, created_us, 16, 8);
	MEMBER(memd_operation, version, 24, 8);
	MEMBER(memd_operation, hide_from_seq, 32, 8);
	MEMBER(memd_operation, first_seq, 40, 8);
	MEMBER(memd_operation, last_seq, 48, 8);
	MEMBER(memd_operation, hidden_count, 56, 8);
	MEMBER(memd_operation, unhidden_count, 64, 8);
	MEMBER(memd_operation, undo_of, 72, 8);
	MEMBER(memd_operation, undone_by, 80, 8);
	SIZE(memd_state_change, 64);
	MEMBER(memd_state_change, struct_size, 0, 4);
	MEMBER(memd_state_change, reserved, 4, 4);
	MEMBER(memd_state_change, version, 8, 8);
	MEMBER(memd_state_change, seq, 16, 8);
	MEMBER(memd_state_change, key, 24, 8);
	MEMBER(memd_state_change, old_json, 32, 8);
	MEMBER(memd_state_change, new_json, 40, 8);
	MEMBER(memd_state_change, at_us, 48, 8);
	MEMBER(memd_state_change, operation, 56, 8);
	SIZE(memd_state_history_query, 32);
	MEMBER(memd_state_history_query, struct_size, 0, 4);
	MEMBER(memd_state_history_query, limit, 4, 4);
	MEMBER(memd_state_history_query, after_version, 8, 8);
	MEMBER(memd_state_history_query, after_key, 16, 8);
	MEMBER(memd_state_history_query, from_seq, 24, 8);
	SIZE(memd_operation_sink, 24);
	MEMBER(memd_operation_sink, struct_size, 0, 4);
	MEMBER(memd_operation_sink, userdata, 8, 8);
	MEMBER(memd_operation_sink, operation, 16, 8);
	SIZE(memd_state_change_sink, 24);
	MEMBER(memd_state_change_sink, struct_size, 0, 4);
	MEMBER(memd_state_change_sink, userdata, 8, 8);
	MEMBER(memd_state_change_sink, change, 16, 8);
	/* 1.5: checkpoints and tasks */
	SIZE(memd_checkpoint, 112);
	MEMBER(memd_checkpoint, struct_size, 0, 4);
	MEMBER(memd_checkpoint, run_state, 4, 4);
	MEMBER(memd_checkpoint, app, 8, 8);
	MEMBER(memd_checkpoint, user, 16, 8);
	MEMBER(memd_checkpoint, session, 24, 8);
	MEMBER(memd_checkpoint, ns, 32, 8);
	MEMBER(memd_checkpoint, id, 40, 8);
	MEMBER(memd_checkpoint, parent_id, 48, 8);
	MEMBER(memd_checkpoint, type, 56, 8);
	MEMBER(memd_checkpoint, payload, 64, 8);
	MEMBER(memd_checkpoint, payload_size, 72, 8);
	MEMBER(memd_checkpoint, metadata_json, 80, 8);
	MEMBER(memd_checkpoint, created_us, 88, 8);
	MEMBER(memd_checkpoint, updated_us, 96, 8);
	MEMBER(memd_checkpoint, expires_us, 104, 8);
	SIZE(memd_checkpoint_write, 56);
	MEMBER(memd_checkpoint_write, struct_size, 0, 4);
	MEMBER(memd_checkpoint_write, flags, 4, 4);
	MEMBER(memd_checkpoint_write, task_id, 8, 8);
	MEMBER(memd_checkpoint_write, idx, 16, 8);
	MEMBER(memd_checkpoint_write, channel, 24, 8);
	MEMBER(memd_checkpoint_write, type, 32, 8);
	MEMBER(memd_checkpoint_write, value, 40, 8);
	MEMBER(memd_checkpoint_write, value_size, 48, 8);
	SIZE(memd_checkpoint_writes, 56); /* 1.6 grew it */
	MEMBER(memd_checkpoint_writes, struct_size, 0, 4);
	MEMBER(memd_checkpoint_writes, run_state, 4, 4);
	MEMBER(memd_checkpoint_writes, ns, 8, 8);
	MEMBER(memd_checkpoint_writes, checkpoint_id, 16, 8);
	MEMBER(memd_checkpoint_writes, writes, 24, 8);
	MEMBER(memd_checkpoint_writes, n_writes, 32, 4);
	MEMBER(memd_checkpoint_writes, reserved, 36, 4);
	MEMBER(memd_checkpoint_writes, now_us, 40, 8);
	MEMBER(memd_checkpoint_writes, task_paths, 48, 8); /* 1.6 */
	SIZE(memd_checkpoint_query, 56);
	MEMBER(memd_checkpoint_query, struct_size, 0, 4);
	MEMBER(memd_checkpoint_query, limit, 4, 4);
	MEMBER(memd_checkpoint_query, session, 8, 8);
	MEMBER(memd_checkpoint_query, ns, 16, 8);
	MEMBER(memd_checkpoint_query, before_id, 24, 8);
	MEMBER(memd_checkpoint_query, before_session, 32, 8);
	MEMBER(memd_checkpoint_query, before_ns, 40, 8);
	MEMBER(memd_checkpoint_query, now_us, 48, 8);
	SIZE(memd_resumable_query, 48);
	MEMBER(memd_resumable_query, struct_size, 0, 4);
	MEMBER(memd_resumable_query, limit, 4, 4);
	MEMBER(memd_resumable_query, app, 8, 8);
	MEMBER(memd_resumable_query, run_states, 16, 4);
	MEMBER(memd_resumable_query, reserved, 20, 4);
	MEMBER(memd_resumable_query, now_us, 24, 8);
	MEMBER(memd_resumable_query, after_user, 32, 8);
	MEMBER(memd_resumable_query, after_session, 40, 8);
	SIZE(memd_task, 80);
	MEMBER(memd_task, struct_size, 0, 4);
	MEMBER(memd_task, reserved, 4, 4);
	MEMBER(memd_task, app, 8, 8);
	MEMBER(memd_task, id, 16, 8);
	MEMBER(memd_task, context_id, 24, 8);
	MEMBER(memd_task, user, 32, 8);
	MEMBER(memd_task, state, 40, 8);
	MEMBER(memd_task, task_json, 48, 8);
	MEMBER(memd_task, created_us, 56, 8);
	MEMBER(memd_task, updated_us, 64, 8);
	MEMBER(memd_task, version, 72, 8);
	SIZE(memd_task_query, 56);
	MEMBER(memd_task_query, struct_size, 0, 4);
	MEMBER(memd_task_query, limit, 4, 4);
	MEMBER(memd_task_query, app, 8, 8);
	MEMBER(memd_task_query, context_id, 16, 8);
	MEMBER(memd_task_query, state, 24, 8);
	MEMBER(memd_task_query, user, 32, 8);
	MEMBER(memd_task_query, before_updated_us, 40, 8);
	MEMBER(memd_task_query, before_id, 48, 8);
	SIZE(memd_checkpoint_sink, 40); /* 1.6 grew it */
	MEMBER(memd_checkpoint_sink, struct_size, 0, 4);
	MEMBER(memd_checkpoint_sink, userdata, 8, 8);
	MEMBER(memd_checkpoint_sink, checkpoint, 16, 8);
	MEMBER(memd_checkpoint_sink, write, 24, 8);
	MEMBER(memd_checkpoint_sink, task_write, 32, 8); /* 1.6 */
	SIZE(memd_task_sink, 24);
	MEMBER(memd_task_sink, struct_size, 0, 4);
	MEMBER(memd_task_sink, userdata, 8, 8);
	MEMBER(memd_task_sink, task, 16, 8);
	/* 1.3: memories */
	SIZE(memd_memory, 128);
	MEMBER(memd_memory, struct_size, 0, 4);
	MEMBER(memd_memory, flags, 4, 4);
	MEMBER(memd_memory, app, 8, 8);
	MEMBER(memd_memory, user, 16, 8);
	MEMBER(memd_memory, id, 24, 8);
	MEMBER(memd_memory, text, 32, 8);
	MEMBER(memd_memory, kind, 40, 8);
	MEMBER(memd_memory, topics_json, 48, 8);
	MEMBER(memd_memory, entities_json, 56, 8);
	MEMBER(memd_memory, source_session, 64, 8);
	MEMBER(memd_memory, source_json, 72, 8);
	MEMBER(memd_memory, created_us, 80, 8);
	MEMBER(memd_memory, updated_us, 88, 8);
	MEMBER(memd_memory, expires_us, 96, 8);
	MEMBER(memd_memory, version, 104, 8);
	MEMBER(memd_memory, position, 112, 8);
	MEMBER(memd_memory, tokens, 120, 8);
	SIZE(memd_memory_write, 40);
	MEMBER(memd_memory_write, struct_size, 0, 4);
	MEMBER(memd_memory_write, op, 4, 4);
	MEMBER(memd_memory_write, expected_version, 8, 8);
	MEMBER(memd_memory_write, memory, 16, 8);
	MEMBER(memd_memory_write, actor, 24, 8);
	MEMBER(memd_memory_write, reason, 32, 8);
	SIZE(memd_memory_commit, 48);
	MEMBER(memd_memory_commit, struct_size, 0, 4);
	MEMBER(memd_memory_commit, n_writes, 4, 4);
	MEMBER(memd_memory_commit, writes, 8, 8);
	MEMBER(memd_memory_commit, cursor_session, 16, 8);
	MEMBER(memd_memory_commit, expected_cursor_seq, 24, 8);
	MEMBER(memd_memory_commit, new_cursor_seq, 32, 8);
	MEMBER(memd_memory_commit, now_us, 40, 8);
	SIZE(memd_memory_change, 40);
	MEMBER(memd_memory_change, struct_size, 0, 4);
	MEMBER(memd_memory_change, op, 4, 4);
	MEMBER(memd_memory_change, memory, 8, 8);
	MEMBER(memd_memory_change, actor, 16, 8);
	MEMBER(memd_memory_change, reason, 24, 8);
	MEMBER(memd_memory_change, at_us, 32, 8);
	SIZE(memd_memory_query, 64);
	MEMBER(memd_memory_query, struct_size, 0, 4);
	MEMBER(memd_memory_query, limit, 4, 4);
	MEMBER(memd_memory_query, kind, 8, 8);
	MEMBER(memd_memory_query, topic, 16, 8);
	MEMBER(memd_memory_query, entity, 24, 8);
	MEMBER(memd_memory_query, session, 32, 8);
	MEMBER(memd_memory_query, now_us, 40, 8);
	MEMBER(memd_memory_query, before_created_us, 48, 8);
	MEMBER(memd_memory_query, before_id, 56, 8);
	SIZE(memd_pending_query, 56);
	MEMBER(memd_pending_query, struct_size, 0, 4);
	MEMBER(memd_pending_query, limit, 4, 4);
	MEMBER(memd_pending_query, updated_after_us, 8, 8);
	MEMBER(memd_pending_query, updated_before_us, 16, 8);
	MEMBER(memd_pending_query, after_updated_us, 24, 8);
	MEMBER(memd_pending_query, after_app, 32, 8);
	MEMBER(memd_pending_query, after_user, 40, 8);
	MEMBER(memd_pending_query, after_id, 48, 8);
	SIZE(memd_memory_sink, 24);
	MEMBER(memd_memory_sink, struct_size, 0, 4);
	MEMBER(memd_memory_sink, userdata, 8, 8);
	MEMBER(memd_memory_sink, memory, 16, 8);
	SIZE(memd_memory_change_sink, 24);
	MEMBER(memd_memory_change_sink, struct_size, 0, 4);
	MEMBER(memd_memory_change_sink, userdata, 8, 8);
	MEMBER(memd_memory_change_sink, change, 16, 8);
}

Test(layout, store_h_constants)
{
	VAL(MEMD_SESSION_ARCHIVED, 1);
	VAL(MEMD_FEED_EVENT, 1);
	VAL(MEMD_FEED_DELETE_SESSION, 2);
	VAL(MEMD_FEED_DELETE_USER, 3);
	VAL(MEMD_SQ_INCLUDE_ARCHIVED, 1);
	VAL(MEMD_EVQ_NEWEST, 1);
	VAL(MEMD_EVQ_NO_SUMMARY, 2);
	VAL(MEMD_EVQ_ONLY_SUMMARY, 4);
	VAL(MEMD_PATCH_TITLE, 1);
	VAL(MEMD_PATCH_METADATA, 2);
	VAL(MEMD_PATCH_ARCHIVED, 4);
	VAL(MEMD_SESSION_NOTICE, 2);
	VAL(MEMD_FEED_FINALIZE, 4);
	VAL(MEMD_PATCH_CLEAR_NOTICE, 8);
	VAL(MEMD_LANE_SUSPENDED, 1);
	VAL(MEMD_LANE_RESUME_PENDING, 2);
	VAL(MEMD_LANE_FINALIZED, 4);
	VAL(MEMD_LANE_FRESH_RESET, 8);
	VAL(MEMD_LANE_RESET_HAD_ACTIVITY, 16);
	VAL(MEMD_INBOX_INTERRUPT, 1);
	VAL(MEMD_INBOX_QUEUE, 2);
	VAL(MEMD_LW_CREATE, 1);
	VAL(MEMD_LW_CLEAR_INBOX, 2);
	VAL(MEMD_LW_FEED_FINALIZE, 4);
	VAL(MEMD_LQ_TURN_ANY, 0);
	VAL(MEMD_LQ_TURN_SOME, 1);
	VAL(MEMD_LQ_TURN_NONE, 2);
	VAL(MEMD_FEED_HIDE, 5);
	VAL(MEMD_SQ_BY_ACTIVITY, 2);
	VAL(MEMD_EVQ_INCLUDE_HIDDEN, 8);
	VAL(MEMD_ROLE_USER, 1);
	VAL(MEMD_ROLE_ASSISTANT, 2);
	VAL(MEMD_ROLE_SYSTEM, 4);
	VAL(MEMD_ROLE_TOOL, 8);
	VAL(MEMD_ROLE_SUMMARY, 16);
	VAL(MEMD_OP_REWIND, 1);
	VAL(MEMD_OP_REWRITE, 2);
	VAL(MEMD_OP_CLEAR, 3);
	VAL(MEMD_OP_UNDO, 4);
	VAL(MEMD_FEED_MEMORY, 6);
	VAL(MEMD_FEED_MEMORY_DELETE, 7);
	VAL(MEMD_MEM_ADD, 1);
	VAL(MEMD_MEM_UPDATE, 2);
	VAL(MEMD_MEM_DELETE, 3);
	VAL(MEMD_MEM_EXPIRE, 4);
	VAL(MEMD_APPEND_EXPECT_VERSION, 1);
	VAL(MEMD_APPEND_REPLAYED, 1);
}

Test(layout, strategy_h)
{
	SIZE(memd_reader, 40);
	MEMBER(memd_reader, struct_size, 0, 4);
	MEMBER(memd_reader, reserved, 4, 4);
	MEMBER(memd_reader, reader_data, 8, 8);
	MEMBER(memd_reader, scope, 16, 8);
	MEMBER(memd_reader, session, 24, 8);
	MEMBER(memd_reader, events, 32, 8);
	SIZE(memd_context_sink, 32);
	MEMBER(memd_context_sink, struct_size, 0, 4);
	MEMBER(memd_context_sink, userdata, 8, 8);
	MEMBER(memd_context_sink, summary, 16, 8);
	MEMBER(memd_context_sink, event, 24, 8);
	SIZE(memd_strategy_ops, 32); /* 1.2 grew it */
	MEMBER(memd_strategy_ops, struct_size, 0, 4);
	MEMBER(memd_strategy_ops, reserved, 4, 4);
	MEMBER(memd_strategy_ops, context, 8, 8);
	MEMBER(memd_strategy_ops, after_append, 16, 8);
	MEMBER(memd_strategy_ops, on_session_finalize, 24, 8);
}

Test(layout, vector_h)
{
	SIZE(memd_vector_record, 72);
	MEMBER(memd_vector_record, struct_size, 0, 4);
	MEMBER(memd_vector_record, dim, 4, 4);
	MEMBER(memd_vector_record, app, 8, 8);
	MEMBER(memd_vector_record, user, 16, 8);
	MEMBER(memd_vector_record, session, 24, 8);
	MEMBER(memd_vector_record, event_id, 32, 8);
	MEMBER(memd_vector_record, author, 40, 8);
	MEMBER(memd_vector_record, seq, 48, 8);
	MEMBER(memd_vector_record, timestamp_us, 56, 8);
	MEMBER(memd_vector_record, vector, 64, 8);
	SIZE(memd_vector_filter, 56);
	MEMBER(memd_vector_filter, struct_size, 0, 4);
	MEMBER(memd_vector_filter, n_authors, 4, 4);
	MEMBER(memd_vector_filter, app, 8, 8);
	MEMBER(memd_vector_filter, user, 16, 8);
	MEMBER(memd_vector_filter, session, 24, 8);
	MEMBER(memd_vector_filter, authors, 32, 8);
	MEMBER(memd_vector_filter, after_us, 40, 8);
	MEMBER(memd_vector_filter, before_us, 48, 8);
	SIZE(memd_vector_hit, 64);
	MEMBER(memd_vector_hit, struct_size, 0, 4);
	MEMBER(memd_vector_hit, score, 4, 4);
	MEMBER(memd_vector_hit, app, 8, 8);
	MEMBER(memd_vector_hit, user, 16, 8);
	MEMBER(memd_vector_hit, session, 24, 8);
	MEMBER(memd_vector_hit, event_id, 32, 8);
	MEMBER(memd_vector_hit, author, 40, 8);
	MEMBER(memd_vector_hit, seq, 48, 8);
	MEMBER(memd_vector_hit, timestamp_us, 56, 8);
	SIZE(memd_vector_hit_sink, 24);
	MEMBER(memd_vector_hit_sink, struct_size, 0, 4);
	MEMBER(memd_vector_hit_sink, userdata, 8, 8);
	MEMBER(memd_vector_hit_sink, hit, 16, 8);
	SIZE(memd_vector_ops, 56); /* 1.2 grew it */
	MEMBER(memd_vector_ops, struct_size, 0, 4);
	MEMBER(memd_vector_ops, reserved, 4, 4);
	MEMBER(memd_vector_ops, upsert, 8, 8);
	MEMBER(memd_vector_ops, remove, 16, 8);
	MEMBER(memd_vector_ops, query, 24, 8);
	MEMBER(memd_vector_ops, ping, 32, 8);
	MEMBER(memd_vector_ops, prepare, 40, 8);
	MEMBER(memd_vector_ops, remove_events, 48, 8);
	SIZE(memd_embedder_ops, 24);
	MEMBER(memd_embedder_ops, struct_size, 0, 4);
	MEMBER(memd_embedder_ops, reserved, 4, 4);
	MEMBER(memd_embedder_ops, dimension, 8, 8);
	MEMBER(memd_embedder_ops, embed, 16, 8);
}

Test(layout, plugin_h)
{
	SIZE(memd_config_key, 48);
	MEMBER(memd_config_key, struct_size, 0, 4);
	MEMBER(memd_config_key, type, 4, 4);
	MEMBER(memd_config_key, flags, 8, 4);
	MEMBER(memd_config_key, reserved, 12, 4);
	MEMBER(memd_config_key, name, 16, 8);
	MEMBER(memd_config_key, default_value, 24, 8);
	MEMBER(memd_config_key, help, 32, 8);
	MEMBER(memd_config_key, choices, 40, 8);
	SIZE(memd_plugin, 104);
	MEMBER(memd_plugin, struct_size, 0, 4);
	MEMBER(memd_plugin, abi_major, 4, 4);
	MEMBER(memd_plugin, abi_minor, 8, 4);
	MEMBER(memd_plugin, kind, 12, 4);
	MEMBER(memd_plugin, flags, 16, 4);
	MEMBER(memd_plugin, reserved, 20, 4);
	MEMBER(memd_plugin, name, 24, 8);
	MEMBER(memd_plugin, version, 32, 8);
	MEMBER(memd_plugin, description, 40, 8);
	MEMBER(memd_plugin, config_keys, 48, 8);
	MEMBER(memd_plugin, init, 56, 8);
	MEMBER(memd_plugin, fini, 64, 8);
	MEMBER(memd_plugin, store, 72, 8);
	MEMBER(memd_plugin, vector, 80, 8);
	MEMBER(memd_plugin, strategy, 88, 8);
	MEMBER(memd_plugin, embedder, 96, 8);
}

Test(layout, plugin_h_constants)
{
	VAL(MEMD_KIND_STORE, 1);
	VAL(MEMD_KIND_VECTOR, 2);
	VAL(MEMD_KIND_STRATEGY, 4);
	VAL(MEMD_KIND_EMBEDDER, 8);
	VAL(MEMD_PLUGIN_THREADSAFE, 1);
	VAL(MEMD_CONFIG_STRING, 1);
	VAL(MEMD_CONFIG_INT, 2);
	VAL(MEMD_CONFIG_DOUBLE, 3);
	VAL(MEMD_CONFIG_BOOL, 4);
	VAL(MEMD_CONFIG_JSON, 5);
	VAL(MEMD_CONFIG_REQUIRED, 1);
	VAL(MEMD_CONFIG_SECRET, 2);
}
