#!/usr/bin/env bash
# The memd command line as an operator uses it: version, config check on
# every example and on broken configs (file:line), plugins list/check, and
# the zero-config scripting flow with its exit codes.
set -uo pipefail

memd="$MEMD_BUILD_ROOT/host/memd"
fixtures="$MEMD_BUILD_ROOT/tests/fixtures"
work=$(mktemp -d)
serve_pid=
# The server is stopped, and waited for, before its files go: it writes
# (a keyword snapshot, the database's last pages) until it has exited.
trap 'if [[ -n "$serve_pid" ]]; then kill "$serve_pid" 2>/dev/null; wait "$serve_pid" 2>/dev/null || true; fi; rm -rf "$work"' EXIT
cd "$work"
unset MEMD_CONFIG

passed=0 failed=0
ok()   { passed=$((passed + 1)); }
fail() { failed=$((failed + 1)); echo "FAIL: $*" >&2; }

# expect CODE DESCRIPTION -- command...: run it, keep stdout/stderr in $out/$errout
expect() {
	local want=$1 what=$2; shift 3
	"$@" >"$work/out" 2>"$work/err" </dev/null
	local got=$?
	out=$(cat "$work/out"); errout=$(cat "$work/err")
	if [[ $got -eq $want ]]; then ok; else fail "$what: exit $got, want $want; stderr: $errout"; fi
}
expect_in() { # CODE DESCRIPTION STDIN -- command...
	local want=$1 what=$2 input=$3; shift 4
	printf '%s' "$input" | "$@" >"$work/out" 2>"$work/err"
	local got=$?
	out=$(cat "$work/out"); errout=$(cat "$work/err")
	if [[ $got -eq $want ]]; then ok; else fail "$what: exit $got, want $want; stderr: $errout"; fi
}
contains() { # HAYSTACK NEEDLE DESCRIPTION
	if [[ "$1" == *"$2"* ]]; then ok; else fail "$3: '$2' not in: $1"; fi
}

expect 0 "version" -- "$memd" version
contains "$out" "(ABI 1." "version names the ABI"
expect 2 "no command" -- "$memd"
expect 2 "unknown command" -- "$memd" frobnicate
expect 0 "help" -- "$memd" --help

# Every example config passes config check.
for f in "$MEMD_SOURCE_ROOT"/config/*.yaml "$MEMD_SOURCE_ROOT"/config/*.json; do
	[[ -e "$f" ]] || continue
	expect 0 "config check $(basename "$f")" -- "$memd" config check "$f"
	contains "$out" "OK" "config check $(basename "$f") says OK"
done
expect 0 "zero-config check" -- "$memd" config check

# Broken configs: every problem, with file:line.
printf 'stores:\n  main: {plugin: sqlite, path: x.db, pathh: y}\nserver:\n  listen: 5\n  colour: red\n' >bad.yaml
expect 7 "config check bad.yaml" -- "$memd" config check bad.yaml
contains "$errout" "bad.yaml:2" "unknown plugin key located"
contains "$errout" "pathh" "unknown plugin key named"
contains "$errout" "bad.yaml:5" "unknown server key located"
contains "$errout" "colour" "unknown server key named"
printf 'stores:\n  main: {plugin: sqlite\n' >syntax.yaml
expect 7 "config check syntax.yaml" -- "$memd" config check syntax.yaml
contains "$errout" "syntax.yaml:" "syntax error located"
printf 'apps:\n  x: {working_memory: {strategy: sqlite}}\n' >kind.yaml
expect 7 "strategy slot given a store" -- "$memd" config check kind.yaml
contains "$errout" "apps.x.working_memory" "wrong kind names the slot"
expect 7 "missing config file" -- "$memd" config check nope.yaml
printf 'tokenizer: {type: bpe, ranks: %s/no-such.tiktoken}\n' "$work" >ranks.yaml
expect 7 "tokenizer ranks file missing" -- "$memd" config check ranks.yaml
contains "$errout" "ranks.yaml:1" "tokenizer problem located"

# config check refuses what serve refuses, and serve reports every problem
# (one validation path): a plugin value outside the key's choices, a
# non-loopback listen address without API keys.
printf 'stores:\n  main: {plugin: sqlite, path: x.db, synchronous: maybe}\n' >sync.yaml
expect 7 "config check synchronous: maybe" -- "$memd" config check sync.yaml
contains "$errout" "sync.yaml:2: stores.main.synchronous: expected one of full, normal" "bad choice located"
printf 'server:\n  listen: 0.0.0.0:8799\n' >open.yaml
expect 7 "config check non-loopback listen without keys" -- "$memd" config check open.yaml
contains "$errout" "open.yaml:2: server.listen: refusing to listen on 0.0.0.0:8799 without API keys" "listen rule located"
printf 'server:\n  listen: 0.0.0.0:8799\n  colour: red\nstores:\n  main: {plugin: sqlite, path: x.db, synchronous: maybe}\n' >many.yaml
expect 7 "config check many problems" -- "$memd" config check many.yaml
contains "$errout" "many.yaml: 3 problems" "config check counts every problem"
expect 7 "serve refuses many problems" -- timeout 60 "$memd" serve --config many.yaml
for what in "server.listen: refusing" "server.colour" "stores.main.synchronous: expected one of"; do
	contains "$errout" "$what" "serve reports every problem"
done
[[ ! -e x.db && ! -e data ]] && ok || fail "a refused serve created files"

# Plugins.
expect 0 "plugins check good" -- "$memd" plugins check "$MEMD_PLUGIN_PATH/memd-buffer_window.so"
contains "$out" "buffer_window" "report names the plugin"
contains "$out" "max_messages" "report lists config keys"
[[ "$out" == *"init:        ok (init and fini with an empty config)" ]] && ok ||
	fail "plugins check report does not end with its init line: ${out: -80}"
for server in postgres mysql; do
	[[ -f "$MEMD_PLUGIN_PATH/memd-$server.so" ]] || continue
	expect 0 "plugins check $server without a server" -- "$memd" plugins check "$MEMD_PLUGIN_PATH/memd-$server.so"
	contains "$out" "init:        not completed" "$server: init not completed, plugin accepted"
done
expect 7 "plugins check crash_init" -- "$memd" plugins check "$fixtures/memd-crash_init.so"
contains "$errout" "crash" "crash reported"
expect 7 "plugins check wrong_major" -- "$memd" plugins check "$fixtures/memd-wrong_major.so"
contains "$errout" "ABI 2" "wrong major reported"

# plugins check NAME searches where the config's plugins are searched:
# MEMD_PLUGIN_PATH and plugins.path (the fixtures are in neither the build
# tree's plugin directory nor the install dir).
MEMD_PLUGIN_PATH="$fixtures" expect 0 "plugins check NAME on MEMD_PLUGIN_PATH" -- "$memd" plugins check good
contains "$out" "file:        $fixtures/memd-good.so" "NAME resolved on MEMD_PLUGIN_PATH"
printf 'plugins:\n  path: [%s]\n' "$fixtures" >ppath.yaml
expect 0 "plugins check NAME on plugins.path" -- "$memd" --config ppath.yaml plugins check good
contains "$out" "file:        $fixtures/memd-good.so" "NAME resolved on plugins.path"
expect 7 "plugins check NAME found nowhere" -- "$memd" plugins check good
contains "$errout" "memd-good.so" "the missing name's file is named"
expect 0 "plugins check shows a key's choices" -- "$memd" plugins check sqlite
contains "$out" "synchronous: string, default full, one of full|normal" "choices reported"

# plugins list: what the help says, and it creates nothing.
mkdir list && cd list
expect 0 "plugins list" -- "$memd" plugins list
contains "$out" '"sqlite"' "plugins list shows the session store"
contains "$out" '"stores.main"' "plugins list names the slot"
contains "$out" '"buffer_window"' "plugins list shows the strategy"
contains "$out" '"search_path"' "plugins list shows the search path"
[[ -z "$(ls -A)" ]] && ok || fail "plugins list created files: $(ls -A)"
cd ..
expect 0 "help" -- "$memd" --help
contains "$out" "plugins list                     the plugins the config names" "help says what plugins list lists"
contains "$out" "creates nothing" "help says plugins list creates nothing"

# Exit codes: one table (host/exit_codes.h); --help and README.md show it.
header=$(sed -n 's/^[[:space:]]*X(\([A-Z]*\), \([0-9]*\), "\(.*\)").*/\2|\1|\3/p' "$MEMD_SOURCE_ROOT/host/exit_codes.h")
readme=$(sed -n 's/^| \([0-9]*\) | `\([A-Z]*\)` | \(.*\) |$/\1|\2|\3/p' "$MEMD_SOURCE_ROOT/README.md")
[[ $(wc -l <<<"$header") -ge 8 ]] && ok || fail "exit code table not found in host/exit_codes.h"
[[ "$header" == "$readme" ]] && ok || fail "README.md's exit codes differ from host/exit_codes.h: $(diff <(echo "$header") <(echo "$readme"))"
helpcodes=$(sed -n '/^exit codes:/,$s/^  \([0-9]\)  \(.*\)/\1|\2/p' <<<"$out")
[[ "$helpcodes" == "$(sed 's/|[A-Z]*|/|/' <<<"$header")" ]] && ok || fail "--help's exit codes differ from host/exit_codes.h: $helpcodes"
expect 7 "serve with a missing config file" -- timeout 60 "$memd" serve --config nope.yaml
expect 7 "scripting with a missing config file" -- "$memd" --config nope.yaml session list demo alice
expect 7 "plugins list with a missing config file" -- "$memd" --config nope.yaml plugins list

# Global options anywhere; a group alone prints its subcommands.
expect 7 "--config after the subcommand" -- "$memd" config check --config sync.yaml
contains "$errout" "sync.yaml:2" "config check read --config given after it"
expect 0 "-v and --config after the subcommand" -- "$memd" plugins list -v --config ppath.yaml
expect 2 "session alone" -- "$memd" session
contains "$errout" "memd session create APP USER" "session alone lists session create"
contains "$errout" "memd session delete APP USER SID" "session alone lists session delete"
[[ "$errout" != *"unknown command"* ]] && ok || fail "session alone says unknown command"
expect 2 "unknown session subcommand" -- "$memd" session frob
contains "$errout" "unknown session subcommand 'frob'" "unknown subcommand named"
contains "$errout" "memd session list APP USER" "unknown subcommand lists the others"

# Zero-config scripting: SQLite in ./data/memd.db.
expect 0 "session create" -- "$memd" session create demo alice --id s1 --metadata '{"k":1}'
[[ -f data/memd.db ]] && ok || fail "zero-config did not create ./data/memd.db"
expect 5 "session create duplicate" -- "$memd" session create demo alice --id s1
expect_in 0 "events append" '[{"role":"user","content":"Plan a trip to Lisbon"},{"role":"assistant","content":"Sure"}]' -- "$memd" events append demo alice s1
contains "$out" '"version": 1' "append bumped the version"
expect_in 5 "stale expected_version" '{"expected_version":0,"events":[{"role":"user","content":"x"}]}' -- "$memd" events append demo alice s1
expect_in 3 "invalid body" '{"events":[{"role":"robot","content":"x"}]}' -- "$memd" events append demo alice s1
expect_in 3 "not JSON" 'nope' -- "$memd" events append demo alice s1
expect_in 0 "events append --return-context" '[{"role":"user","content":"And Porto?"}]' -- "$memd" events append demo alice s1 --return-context
contains "$out" '"version": 2' "append with its context bumped the version"
contains "$out" '"context": {' "append with its context prints the context"
contains "$out" "And Porto?" "the context holds the appended event"
expect_in 0 "messages append --return-context --format openai" '[{"role":"assistant","content":"Yes, Porto too."}]' -- "$memd" messages append demo alice s1 --return-context --format openai
contains "$out" '"format": "openai"' "messages append prints the OpenAI context"
contains "$out" "Yes, Porto too." "the OpenAI context holds the appended message"
expect_in 2 "--format without --return-context" '[{"role":"user","content":"x"}]' -- "$memd" events append demo alice s1 --format openai
expect_in 2 "--format other than openai" '[{"role":"user","content":"x"}]' -- "$memd" events append demo alice s1 --return-context --format xml
expect 0 "context" -- "$memd" context demo alice s1
contains "$out" '"buffer_window"' "default strategy"
contains "$out" "Plan a trip to Lisbon" "context has the event"
expect 0 "session get" -- "$memd" session get demo alice s1 --events 1
contains "$out" '"title": "Plan a trip to Lisbon"' "auto title"
expect 0 "state set" -- "$memd" state set demo alice s1 'user:lang="pt"' n=3 gone=
contains "$out" '"user:lang": "pt"' "state set user: key"
expect 0 "state get" -- "$memd" state get demo alice s1
contains "$out" '"n": 3' "state get"
expect 4 "missing session" -- "$memd" context demo alice nope
expect 3 "bad id" -- "$memd" session get demo alice 'a/b'
expect 2 "missing argument" -- "$memd" session get demo alice
expect 2 "unknown option" -- "$memd" session list demo alice --colour red
expect 0 "session list" -- "$memd" session list demo alice --limit 5
contains "$out" '"s1"' "session listed"
expect_in 0 "artifact put" 'hello artifact' -- "$memd" artifact put demo alice s1 notes.txt --type text/plain
expect 0 "artifact get" -- "$memd" artifact get demo alice s1 notes.txt
[[ "$out" == "hello artifact" ]] && ok || fail "artifact bytes differ: $out"
expect_in 0 "artifact put v2" 'second version' -- "$memd" artifact put demo alice s1 notes.txt --type text/plain
expect 0 "artifact get --version 1" -- "$memd" artifact get demo alice s1 notes.txt --version 1
[[ "$out" == "hello artifact" ]] && ok || fail "artifact get --version 1 printed: $out"
expect 0 "memd --version" -- "$memd" --version
contains "$out" "(ABI 1." "--version before the command is memd's own"
expect 0 "session create s2" -- "$memd" session create demo alice --id s2
expect 0 "session delete" -- "$memd" session delete demo alice s2
contains "$out" '"deleted": true' "session delete prints its result"
contains "$out" '"session": "s2"' "session delete names the session"
expect 4 "deleted session" -- "$memd" session get demo alice s2
expect 0 "user delete" -- "$memd" user delete demo alice
contains "$out" '"deleted": true' "user delete prints its result"
contains "$out" '"user": "alice"' "user delete names the user"
[[ "$out" != *'"session"'* ]] && ok || fail "user delete names a session: $out"
expect 4 "deleted user's session" -- "$memd" session get demo alice s1

# Lanes of a chat gateway: resolve, open, a turn with its inbox, recovery;
# on the zero-config database, without automatic resets (a daily boundary
# passing between two commands would start a new session under them).
printf 'stores:\n  main: {plugin: sqlite, path: ./data/memd.db}\nsessions: {store: main}\nlanes: {reset: {mode: none}}\n' >lanes.yaml
memd_lanes=("$memd" --config lanes.yaml)
expect 2 "lane alone" -- "${memd_lanes[@]}" lane
contains "$errout" "memd lane open APP USER KEY" "lane alone lists lane open"
expect 2 "turn alone" -- "${memd_lanes[@]}" turn
contains "$errout" "memd turn end APP USER KEY TURN --outcome" "turn alone lists turn end"
expect 2 "inbox alone" -- "${memd_lanes[@]}" inbox
contains "$errout" "memd inbox take APP USER KEY TURN" "inbox alone lists inbox take"
expect 0 "help lists the lane commands" -- "$memd" --help
contains "$out" "lane resolve APP SOURCE" "help shows lane resolve"
expect 0 "lane resolve" -- "${memd_lanes[@]}" lane resolve demo --platform telegram --chat-type dm --chat-id 42 --user-id 42
contains "$out" '"key": "telegram:dm:42"' "lane resolve derives the key"
contains "$out" '"user": "telegram:42"' "lane resolve derives the user"
expect 2 "lane resolve without a source" -- "${memd_lanes[@]}" lane resolve demo
expect 3 "lane resolve with a bad source" -- "${memd_lanes[@]}" lane resolve demo --source '{"chat_type":"dm"}'
expect 2 "lane resolve with a source that is no object" -- "${memd_lanes[@]}" lane resolve demo --source '[1]'
expect 0 "lane open by source" -- "${memd_lanes[@]}" lane open demo --platform telegram --chat-id 42 --user-id 42 --user-name Ann
contains "$out" '"created": true' "lane open created the lane"
sid=$(sed -n 's/^    "session_id": "\([^"]*\)".*/\1/p' <<<"$out")
[[ -n "$sid" ]] && ok || fail "lane open printed no session_id: $out"
expect 0 "lane open again" -- "${memd_lanes[@]}" lane open demo telegram:42 telegram:dm:42
contains "$out" '"created": false' "lane open again keeps the lane"
contains "$out" "\"session_id\": \"$sid\"" "lane open again keeps the session"
expect 0 "lane open --return-context" -- "${memd_lanes[@]}" lane open demo telegram:42 telegram:dm:42 --return-context --format openai
contains "$out" '"messages": [' "lane open prints the session's OpenAI context"
expect 0 "lane open by source --return-context" -- "${memd_lanes[@]}" lane open demo --platform telegram --chat-id 42 --user-id 42 --return-context
contains "$out" '"context": {' "lane open by source prints the context"
expect 4 "lane get unknown" -- "${memd_lanes[@]}" lane get demo telegram:42 telegram:dm:7
expect 0 "lane get" -- "${memd_lanes[@]}" lane get demo telegram:42 telegram:dm:42
contains "$out" '"inbox_depth": 0' "lane get shows the inbox depth"
expect 0 "turn begin" -- "${memd_lanes[@]}" turn begin demo telegram:42 telegram:dm:42 --lease-ms 600000
turn=$(sed -n 's/^  "turn_id": "\([^"]*\)".*/\1/p' <<<"$out")
[[ -n "$turn" ]] && ok || fail "turn begin printed no turn_id: $out"
expect 5 "a second turn begin" -- "${memd_lanes[@]}" turn begin demo telegram:42 telegram:dm:42
expect 0 "turn heartbeat" -- "${memd_lanes[@]}" turn heartbeat demo telegram:42 telegram:dm:42 "$turn" --lease-ms 300000
expect 0 "inbox put --text" -- "${memd_lanes[@]}" inbox put demo telegram:42 telegram:dm:42 --mode queue --text "one more"
contains "$out" '"depth": 1' "inbox put counts the item"
expect_in 0 "inbox put from stdin" '{"role":"user","content":"and another"}' -- "${memd_lanes[@]}" inbox put demo telegram:42 telegram:dm:42 --mode queue
contains "$out" '"depth": 2' "inbox put from stdin counts the item"
expect 2 "inbox put without --mode" -- "${memd_lanes[@]}" inbox put demo telegram:42 telegram:dm:42 --text x
expect 3 "inbox put with a bad mode" -- "${memd_lanes[@]}" inbox put demo telegram:42 telegram:dm:42 --mode shout --text x
expect 0 "inbox list" -- "${memd_lanes[@]}" inbox list demo telegram:42 telegram:dm:42
contains "$out" "one more" "inbox list shows the slot"
expect 5 "inbox take by a non-holder" -- "${memd_lanes[@]}" inbox take demo telegram:42 telegram:dm:42 not-the-turn
expect 0 "inbox take" -- "${memd_lanes[@]}" inbox take demo telegram:42 telegram:dm:42 "$turn"
contains "$out" "one more" "inbox take takes the slot first"
contains "$out" '"depth": 1' "inbox take leaves the rest"
expect 2 "turn end without --outcome" -- "${memd_lanes[@]}" turn end demo telegram:42 telegram:dm:42 "$turn"
expect 2 "turn end with bad --usage" -- "${memd_lanes[@]}" turn end demo telegram:42 telegram:dm:42 "$turn" --outcome ok --usage nope
expect 0 "turn end interrupted" -- "${memd_lanes[@]}" turn end demo telegram:42 telegram:dm:42 "$turn" --outcome interrupted --reason shutdown_timeout --usage '{"input_tokens":5}'
contains "$out" '"resume_pending": true' "an interrupted turn leaves the lane pending"
contains "$out" '"input_tokens": 5' "turn end adds the usage"
expect 5 "turn end with a stale id" -- "${memd_lanes[@]}" turn end demo telegram:42 telegram:dm:42 "$turn" --outcome ok
expect 0 "lane list --resume-pending true" -- "${memd_lanes[@]}" lane list demo --resume-pending true
contains "$out" '"key": "telegram:dm:42"' "the pending lane is listed"
expect 0 "lane list of a user --resume-pending false" -- "${memd_lanes[@]}" lane list demo telegram:42 --resume-pending false
contains "$out" '"lanes": []' "no lane that is not pending"
expect 2 "lane list --suspended maybe" -- "${memd_lanes[@]}" lane list demo --suspended maybe
expect 0 "lane reset" -- "${memd_lanes[@]}" lane reset demo telegram:42 telegram:dm:42
contains "$out" '"reason": "explicit"' "lane reset says why"
expect 0 "lane switch back" -- "${memd_lanes[@]}" lane switch demo telegram:42 telegram:dm:42 "$sid"
contains "$out" "\"session_id\": \"$sid\"" "lane switch points at the session"
expect 0 "session of another user" -- "${memd_lanes[@]}" session create demo bob --id bobs
expect 4 "lane switch to another user's session" -- "${memd_lanes[@]}" lane switch demo telegram:42 telegram:dm:42 bobs
expect 0 "lane suspend" -- "${memd_lanes[@]}" lane suspend demo telegram:42 telegram:dm:42
contains "$out" '"suspended": true' "lane suspend suspends"
expect 0 "lane list --suspended true" -- "${memd_lanes[@]}" lane list demo telegram:42 --suspended true --limit 5
contains "$out" '"key": "telegram:dm:42"' "the suspended lane is listed"
expect 0 "lane sweep" -- "${memd_lanes[@]}" lane sweep
contains "$out" '"leases_expired"' "lane sweep counts"
expect 0 "memory extract" -- "${memd_lanes[@]}" memory extract demo telegram:42 "$sid"
contains "$out" '"to_seq"' "memory extract says how far it read"
expect 4 "memory extract of an unknown session" -- "${memd_lanes[@]}" memory extract demo telegram:42 nope
expect 0 "memory sweep" -- "${memd_lanes[@]}" memory sweep
contains "$out" '"memories_expired"' "memory sweep counts"
expect 0 "lane delete" -- "${memd_lanes[@]}" lane delete demo telegram:42 telegram:dm:42
contains "$out" '"deleted": true' "lane delete prints its result"
expect 4 "deleted lane" -- "${memd_lanes[@]}" lane get demo telegram:42 telegram:dm:42

# Long-term memories: add, list with filters, get, update with a version,
# delete, the history; bad input is a usage error (2) or refused (3).
memd_mem=("$memd" --config lanes.yaml)
expect 2 "memory alone" -- "${memd_mem[@]}" memory
contains "$errout" "memd memory add APP USER TEXT" "memory alone lists memory add"
expect 0 "help lists the memory commands" -- "$memd" --help
contains "$out" "memory history APP USER ID" "help shows memory history"
expect 0 "session for a memory's source" -- "${memd_mem[@]}" session create demo dana --id trip
expect 0 "memory add" -- "${memd_mem[@]}" memory add demo dana "Prefers window seats" --kind preference --topics flights,seats --entities Dana --session trip --id seat
contains "$out" '"kind": "preference"' "memory add sets the kind"
contains "$out" '"session_id": "trip"' "memory add keeps the source"
expect 0 "memory add with a ttl" -- "${memd_mem[@]}" memory add demo dana "In Rome this week" --kind episode --ttl-seconds 3600
contains "$out" '"expires_at": "' "memory add --ttl-seconds sets an expiry"
expect 3 "memory add with a bad kind" -- "${memd_mem[@]}" memory add demo dana x --kind opinion
contains "$errout" "kind: must be fact, preference, instruction or episode" "the bad kind is named"
expect 2 "memory add with a bad ttl" -- "${memd_mem[@]}" memory add demo dana x --ttl-seconds soon
expect 2 "memory add without text" -- "${memd_mem[@]}" memory add demo dana
expect 0 "memory list --topic" -- "${memd_mem[@]}" memory list demo dana --topic seats
contains "$out" '"id": "seat"' "memory list filters by topic"
expect 0 "memory list --kind episode" -- "${memd_mem[@]}" memory list demo dana --kind episode --limit 1
contains "$out" "In Rome this week" "memory list filters by kind"
expect 0 "memory get" -- "${memd_mem[@]}" memory get demo dana seat
contains "$out" "Prefers window seats" "memory get reads it"
expect 5 "memory update at a stale version" -- "${memd_mem[@]}" memory update demo dana seat --text "Prefers aisle seats" --expected-version 2
expect 0 "memory update" -- "${memd_mem[@]}" memory update demo dana seat --text "Prefers aisle seats" --expected-version 1 --reason "said so"
contains "$out" '"version": 2' "memory update bumps the version"
expect 5 "memory delete at a stale version" -- "${memd_mem[@]}" memory delete demo dana seat --expected-version 1
expect 0 "memory delete" -- "${memd_mem[@]}" memory delete demo dana seat
contains "$out" '"deleted": true' "memory delete prints its result"
expect 4 "deleted memory" -- "${memd_mem[@]}" memory get demo dana seat
expect 0 "memory history" -- "${memd_mem[@]}" memory history demo dana seat
contains "$out" '"reason": "said so"' "memory history keeps the reason"
contains "$out" '"op": "delete"' "memory history has the delete"
expect 4 "memory history of nothing" -- "${memd_mem[@]}" memory history demo dana nope

# Transcripts: a chat UI's undo (rewind), retry, clear and undo of an
# operation, OpenAI messages in and out, the state history.
memd_tx=("$memd" --config lanes.yaml)
expect 0 "help lists the transcript commands" -- "$memd" --help
contains "$out" "session rewind APP USER SID" "help shows session rewind"
contains "$out" "messages put APP USER SID" "help shows messages put"
expect 2 "messages alone" -- "${memd_tx[@]}" messages
contains "$errout" "memd messages get APP USER SID" "messages alone lists messages get"
expect 0 "session for the transcript" -- "${memd_tx[@]}" session create demo carol --id chat
expect_in 0 "messages append" '[{"role":"user","content":"hello"},{"role":"assistant","content":"hi"},{"role":"user","content":"weather?"},{"role":"assistant","content":"sunny"}]' -- "${memd_tx[@]}" messages append demo carol chat
contains "$out" '"seqs"' "messages append prints the seqs"
expect_in 0 "state by an append" '{"events":[{"role":"user","content":"and tomorrow?"}],"state_delta":{"step":2}}' -- "${memd_tx[@]}" events append demo carol chat
expect 0 "messages get" -- "${memd_tx[@]}" messages get demo carol chat
contains "$out" '"format": "openai"' "messages get speaks openai"
contains "$out" '"content": "and tomorrow?"' "messages get has the last message"
expect 0 "messages get --roles" -- "${memd_tx[@]}" messages get demo carol chat --roles assistant
[[ "$out" != *'"user"'* ]] && ok || fail "messages get --roles assistant shows a user message: $out"
expect 3 "messages get --roles wizard" -- "${memd_tx[@]}" messages get demo carol chat --roles wizard
expect 0 "state history" -- "${memd_tx[@]}" state history demo carol chat --limit 10
contains "$out" '"key": "step"' "state history has the change"
expect 2 "session rewind without an extent" -- "${memd_tx[@]}" session rewind demo carol chat
expect 2 "session rewind with both extents" -- "${memd_tx[@]}" session rewind demo carol chat --turns 1 --to-seq 3
expect 3 "session rewind too far" -- "${memd_tx[@]}" session rewind demo carol chat --turns 9
expect 5 "session rewind at a stale version" -- "${memd_tx[@]}" session rewind demo carol chat --turns 1 --expected-version 0
expect 4 "session rewind of a missing session" -- "${memd_tx[@]}" session rewind demo carol nope --turns 1
expect 0 "session rewind" -- "${memd_tx[@]}" session rewind demo carol chat --turns 1
contains "$out" '"target_text": "and tomorrow?"' "session rewind gives the text to edit"
contains "$out" '"rewound_count": 1' "session rewind counts what it hid"
op=$(sed -n 's/^ *"id": "\([^"]*\)",*$/\1/p' "$work/out" | head -1)
[[ -n "$op" ]] && ok || fail "session rewind printed no operation id: $out"
expect 0 "state after the rewind" -- "${memd_tx[@]}" state get demo carol chat
[[ "$out" != *'"step"'* ]] && ok || fail "the rewind left the state key: $out"
expect 0 "session operations" -- "${memd_tx[@]}" session operations demo carol chat
contains "$out" "\"id\": \"$op\"" "session operations lists the rewind"
expect 0 "session undo" -- "${memd_tx[@]}" session undo demo carol chat "$op"
contains "$out" '"unhidden_count": 1' "session undo brings the turn back"
expect 5 "session undo again" -- "${memd_tx[@]}" session undo demo carol chat "$op"
expect 4 "session undo of an unknown operation" -- "${memd_tx[@]}" session undo demo carol chat nope
expect 0 "session clear" -- "${memd_tx[@]}" session clear demo carol chat
contains "$out" '"hidden_count": 5' "session clear hides every event"
expect 0 "messages after the clear" -- "${memd_tx[@]}" messages get demo carol chat
contains "$out" '"messages": []' "nothing visible after the clear"
expect_in 0 "messages put" '{"messages":[{"role":"user","content":"start over"}]}' -- "${memd_tx[@]}" messages put demo carol chat
contains "$out" '"created": false' "messages put on an existing session"
expect_in 0 "messages put creates" '[{"role":"user","content":"new chat"}]' -- "${memd_tx[@]}" messages put demo carol fresh
contains "$out" '"created": true' "messages put creates the session"
expect_in 3 "messages put, not JSON" 'nope' -- "${memd_tx[@]}" messages put demo carol chat
expect 0 "session list by activity" -- "${memd_tx[@]}" session list demo carol --order activity --active-within 3600
contains "$out" '"message_count"' "session list shows message counts"
expect 2 "session list --order by name" -- "${memd_tx[@]}" session list demo carol --order name

# A vector store that admits one process (filevec locks its directory),
# held by a running memd serve: the commands that need no vector store
# work, a search without --mode falls back to the keyword index, and what
# needs the server's indexes names the lock's holder and the route.
mkdir vec && cd vec
# A port below the ephemeral range (that one's ports may be taken by any
# outgoing connection); another taker between the probe and serve's bind
# is a retry with another port.
for ((try = 0; try < 20; try++)); do
	port=$((20000 + RANDOM % 12000))
	(exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && continue
	cat >vec.yaml <<EOF
server: {listen: "127.0.0.1:$port"}
stores:
  main: {plugin: sqlite, path: ./data/memd.db}
  vec: {plugin: filevec, path: ./data/vectors}
sessions: {store: main}
index:
  vector: {enabled: true, store: vec, embedder: {type: hash, dim: 64}}
  default_mode: hybrid
EOF
	"$memd" --config vec.yaml serve 2>serve.err &
	serve_pid=$!
	for ((i = 0; i < 600; i++)); do # bounded: until it listens or exits
		grep -q '"listening"' serve.err && break
		kill -0 "$serve_pid" 2>/dev/null || break
		sleep 0.1
	done
	grep -q '"listening"' serve.err && break
	wait "$serve_pid"
	serve_pid=
	grep -q "Address already in use" serve.err || break
done
grep -q '"listening"' serve.err && ok || fail "serve did not start: $(cat serve.err)"
v=("$memd" --config vec.yaml)
expect 0 "session create beside serve" -- "${v[@]}" session create demo bob --id v1
expect_in 0 "events append beside serve" '[{"role":"user","content":"Lisbon trams are yellow"}]' -- "${v[@]}" events append demo bob v1
expect 0 "events list beside serve" -- "${v[@]}" events list demo bob v1
contains "$out" "Lisbon trams" "events list beside serve"
expect 0 "context beside serve" -- "${v[@]}" context demo bob v1
expect 0 "state set beside serve" -- "${v[@]}" state set demo bob v1 k=1
expect 0 "state get beside serve" -- "${v[@]}" state get demo bob v1
expect_in 0 "artifact put beside serve" 'x' -- "${v[@]}" artifact put demo bob v1 a.txt
expect 0 "artifact list beside serve" -- "${v[@]}" artifact list demo bob v1
expect 0 "session list beside serve" -- "${v[@]}" session list demo bob
expect 0 "keyword search beside serve" -- "${v[@]}" search demo bob trams --mode keyword
contains "$out" '"v1"' "keyword search beside serve finds the event"
expect 0 "default search beside serve" -- "${v[@]}" search demo bob trams
contains "$errout" "searching the keyword index only" "default search says it fell back"
contains "$out" '"v1"' "default search beside serve finds the event"
expect 6 "vector search beside serve" -- "${v[@]}" search demo bob trams --mode vector
contains "$errout" "locked by process $serve_pid" "vector search names the lock holder"
contains "$errout" "POST /v1/apps/demo/users/bob/search" "vector search points at the server"
expect 6 "index rebuild of a user beside serve" -- "${v[@]}" index rebuild --app demo --user bob
contains "$errout" "./data/vectors is locked by process $serve_pid (./data/vectors/LOCK)" "rebuild names the lock holder and path"
contains "$errout" "POST /v1/apps/demo/users/bob/index:rebuild" "rebuild points at the server's route"
expect 6 "index rebuild beside serve" -- "${v[@]}" index rebuild
contains "$errout" "POST /v1/apps/APP/users/USER/index:rebuild" "rebuild of all points at the route"
# A2A tasks: saved over REST (raw HTTP on the server's port), read and
# listed by the CLI on the same database.
put_task() { # ID BODY [QUERY]: the status line of the answer in $out
	exec 3<>"/dev/tcp/127.0.0.1/$port"
	printf 'PUT /v1/apps/demo/tasks/%s%s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s' \
		"$1" "${3:-}" "${#2}" "$2" >&3
	out=$(head -n 1 <&3)
	exec 3<&-
}
task_body() { # ID CONTEXT STATE
	printf '{"kind":"task","id":"%s","contextId":"%s","status":{"state":"%s"},"history":[{"kind":"message","messageId":"m1","role":"user","parts":[{"kind":"text","text":"hi"}]},{"kind":"message","messageId":"m2","role":"agent","parts":[{"kind":"text","text":"on it"}]}]}' "$1" "$2" "$3"
}
put_task t1 "$(task_body t1 v1 working)" "?user=bob"
contains "$out" " 201 " "a task saved over REST beside the CLI"
put_task t2 "$(task_body t2 other completed)"
contains "$out" " 201 " "a second task saved"
expect 0 "task get beside serve" -- "${v[@]}" task get demo t1
contains "$out" '"state": "working"' "task get shows the task"
contains "$out" '"user": "bob"' "task get shows its user"
contains "$out" '"m1"' "task get shows the whole history"
expect 0 "task get --history-length" -- "${v[@]}" task get demo t1 --history-length 1
[[ "$out" != *'"m1"'* && "$out" == *'"m2"'* ]] && ok || fail "task get --history-length 1: $out"
expect 0 "task list beside serve" -- "${v[@]}" task list demo
contains "$out" '"t1"' "task list lists t1"
contains "$out" '"t2"' "task list lists t2"
expect 0 "task list --state" -- "${v[@]}" task list demo --state completed
[[ "$out" != *'"t1"'* && "$out" == *'"t2"'* ]] && ok || fail "task list --state completed: $out"
expect 0 "task list --user --context-id" -- "${v[@]}" task list demo --user bob --context-id v1 --limit 1
[[ "$out" == *'"t1"'* && "$out" != *'"t2"'* ]] && ok || fail "task list --user bob: $out"
expect 4 "task get of a missing task" -- "${v[@]}" task get demo nope
expect 3 "task list with a bad state" -- "${v[@]}" task list demo --state done
contains "$errout" "state" "the bad state is named"
expect 2 "task get with a bad --history-length" -- "${v[@]}" task get demo t1 --history-length many
expect 2 "task alone" -- "${v[@]}" task
contains "$errout" "memd task list APP" "task alone lists task list"
# Run checkpoints: put over REST (raw HTTP on the server's port), listed,
# read, found resumable and deleted by the CLI on the same database.
put_checkpoint() { # SID ID BODY [QUERY]: the status line of the answer in $out
	exec 3<>"/dev/tcp/127.0.0.1/$port"
	printf 'PUT /v1/apps/demo/users/bob/sessions/%s/checkpoints/%s%s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s' \
		"$1" "$2" "${4:-}" "${#3}" "$3" >&3
	out=$(head -n 1 <&3)
	exec 3<&-
}
put_checkpoint run1 0001 '{"type":"json","checkpoint":"aGk=","metadata":{"step":1}}'
contains "$out" " 200 " "a checkpoint put over REST beside the CLI"
put_checkpoint run1 0002 '{"type":"json","checkpoint":"aGk=","metadata":{"step":2},"run_state":"interrupted"}'
put_checkpoint run1 0003 '{"type":"json","checkpoint":"aGk="}' "?checkpoint_ns=sub"
put_checkpoint run2 0001 '{"type":"json","checkpoint":"aGk=","run_state":"done"}'
expect 0 "checkpoint list beside serve" -- "${v[@]}" checkpoint list demo bob
[[ "$out" == *'"0003"'*'"0002"'*'"0001"'* ]] && ok || fail "checkpoint list, newest first: $out"
expect 0 "checkpoint list of a session's root namespace" -- "${v[@]}" checkpoint list demo bob run1 --ns "" --limit 1
[[ "$out" == *'"0002"'* && "$out" != *'"0001"'* && "$out" == *'"next_cursor": "'* ]] && ok || fail "checkpoint list --ns '' --limit 1: $out"
expect 0 "checkpoint list --metadata" -- "${v[@]}" checkpoint list demo bob --metadata '{"step":1}' --full
[[ "$out" == *'"checkpoint": "aGk="'* && "$out" != *'"0002"'* ]] && ok || fail "checkpoint list --metadata --full: $out"
expect 0 "checkpoint get latest" -- "${v[@]}" checkpoint get demo bob run1
contains "$out" '"checkpoint_id": "0002"' "checkpoint get without an id is the latest"
contains "$out" '"pending_writes": []' "checkpoint get shows the tuple"
expect 0 "checkpoint get --ns" -- "${v[@]}" checkpoint get demo bob run1 0003 --ns sub
contains "$out" '"checkpoint_ns": "sub"' "checkpoint get in a namespace"
expect 0 "checkpoint resumable" -- "${v[@]}" checkpoint resumable demo
contains "$out" '"session_id": "run1"' "the interrupted run is resumable"
contains "$out" '"resume": "approval"' "an interrupted run waits for approval"
[[ "$out" != *'"run2"'* ]] && ok || fail "a done run is not resumable: $out"
expect 0 "checkpoint resumable --resume automatic" -- "${v[@]}" checkpoint resumable demo --resume automatic
contains "$out" '"sessions": []' "nothing to resume automatically"
expect 3 "checkpoint resumable with a bad filter" -- "${v[@]}" checkpoint resumable demo --resume later
contains "$errout" "resume: must be automatic or approval" "the bad filter is named"
expect 3 "checkpoint list with a bad metadata filter" -- "${v[@]}" checkpoint list demo bob --metadata '[1]'
contains "$errout" "metadata: must be a JSON object" "the bad filter is named"
expect 0 "checkpoint delete of a namespace" -- "${v[@]}" checkpoint delete demo bob run1 --ns sub
contains "$out" '"deleted": true' "checkpoint delete prints its result"
expect 4 "deleted checkpoint" -- "${v[@]}" checkpoint get demo bob run1 0003 --ns sub
expect 0 "checkpoint delete of a session" -- "${v[@]}" checkpoint delete demo bob run1
expect 4 "no checkpoint left" -- "${v[@]}" checkpoint get demo bob run1
expect 0 "checkpoint sweep" -- "${v[@]}" checkpoint sweep
contains "$out" '"checkpoints_expired": 0' "checkpoint sweep counts what it deleted"
expect 2 "checkpoint get without a session" -- "${v[@]}" checkpoint get demo bob
expect 2 "checkpoint list --limit without a number" -- "${v[@]}" checkpoint list demo bob --limit many
expect 2 "checkpoint alone" -- "${v[@]}" checkpoint
contains "$errout" "memd checkpoint list APP USER [SID]" "checkpoint alone lists checkpoint list"
expect 0 "help lists the checkpoint commands" -- "$memd" --help
contains "$out" "checkpoint resumable APP" "help shows checkpoint resumable"
# memd mcp beside serve: the tools search the keyword index, and say so
# on stderr only (stdout is the JSON-RPC stream).
mcp_in='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}
{"jsonrpc":"2.0","method":"notifications/initialized"}

{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"search_memory","arguments":{"query":"trams"}}}
'
expect_in 0 "mcp beside serve" "$mcp_in" -- "${v[@]}" mcp --app demo --user bob
contains "$errout" "keyword search only" "mcp beside serve says it fell back"
contains "$out" '\"session_id\":\"v1\"' "mcp beside serve finds the event"
if [[ $(wc -l <"$work/out") -eq 2 ]] && jq -e . "$work/out" >/dev/null 2>&1; then ok; else fail "mcp: two JSON lines on stdout: $out"; fi
expect 2 "mcp without --user" -- "${v[@]}" mcp --app demo
contains "$errout" "--app A and --user U" "mcp says what it needs"
kill "$serve_pid"
wait "$serve_pid"
serve_pid=
expect 0 "vector search after serve" -- "${v[@]}" search demo bob trams --mode vector
contains "$out" '"v1"' "what was appended beside serve is in the vector index"
expect 0 "index rebuild after serve" -- "${v[@]}" index rebuild
cd ..

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
