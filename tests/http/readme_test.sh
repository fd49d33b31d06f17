#!/usr/bin/env bash
# README.md's examples as written: every ```sh block of the sections
# "Running a chat gateway on memd" and "Undo, retry and compress in a chat
# UI" and "Run checkpoints" and "A2A tasks" and of the subsections "Writing and reading
# memories" and "Extraction", in order, run
# by bash against a real `memd serve` (SQLite), and what they print
# checked. A README example that no longer works fails
# here.
set -uo pipefail

memd="$MEMD_BUILD_ROOT/host/memd"
readme="$MEMD_SOURCE_ROOT/README.md"
for tool in curl jq; do
	command -v "$tool" >/dev/null || { echo "SKIP: the README's example needs $tool"; exit 77; }
done
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
contains() { # HAYSTACK NEEDLE DESCRIPTION
	if [[ "$1" == *"$2"* ]]; then ok; else fail "$3: '$2' not in: $1"; fi
}

# section TITLE FILE: the shell blocks of README.md's section, in order,
# into FILE; prints how many.
source "$MEMD_SOURCE_ROOT/tests/common/readme_blocks.sh"
section() {
	readme_blocks "$readme" "$1" sh >"$2"
	grep -c '^# ---- end of block' "$2"
}
blocks=$(section "## Running a chat gateway on memd" example.sh)
[[ $blocks -ge 2 ]] && ok || fail "the README's section has $blocks shell blocks, want the loop and the restart"
blocks=$(section "## Undo, retry and compress in a chat UI" chat.sh)
[[ $blocks -ge 1 ]] && ok || fail "the README's chat UI section has no shell block"
blocks=$(section "### Writing and reading memories" memories.sh)
[[ $blocks -ge 1 ]] && ok || fail "the README's memories subsection has no shell block"
blocks=$(section "### Extraction" extraction.sh)
[[ $blocks -ge 1 ]] && ok || fail "the README's extraction subsection has no shell block"
blocks=$(section "## Run checkpoints" checkpoints.sh)
[[ $blocks -ge 1 ]] && ok || fail "the README's run checkpoints section has no shell block"
blocks=$(section "## A2A tasks" tasks.sh)
[[ $blocks -ge 1 ]] && ok || fail "the README's A2A tasks section has no shell block"

# memd serve on a free port (a port below the ephemeral range; another
# taker between the probe and serve's bind is a retry with another port).
for ((try = 0; try < 20; try++)); do
	port=$((20000 + RANDOM % 12000))
	(exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && continue
	cat >memd.yaml <<YAML
server: {listen: "127.0.0.1:$port"}
stores:
  main: {plugin: sqlite, path: ./memd.db}
sessions: {store: main}
# No automatic reset: a daily boundary passing during the example would
# start a new session under it.
lanes: {reset: {mode: none}}
YAML
	"$memd" --config memd.yaml serve 2>serve.err &
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

MEMD="http://127.0.0.1:$port" bash -euo pipefail example.sh >out.txt 2>err.txt
rc=$?
out=$(cat out.txt)
[[ $rc -eq 0 ]] && ok || fail "the README's example failed (exit $rc): $(cat err.txt) after: $out"

# What the loop printed: the inbox put, the context, the item taken, the
# lane's usage (the append's and the turn end's summed).
contains "$out" '"depth":1' "the inbox put answered its depth"
contains "$out" '"tokens":' "the context was read"
contains "$out" '"and book a table for two"' "the turn holder took the queued message"
contains "$out" '"input_tokens": 852' "the lane's usage sums the append's and the end's"
contains "$out" '"last_prompt_tokens": 852' "the lane's usage has the last prompt's tokens"
# The restart: pending, listed, resumed on the same session, cleared.
contains "$out" $'telegram:42\ttelegram:dm:42\t' "the pending lane was listed"
contains "$out" $'\tshutdown_timeout' "with its reason"
contains "$out" '"resumed": true' "open resumed the lane"
[[ $(tail -n 1 out.txt) == false ]] && ok || fail "the last turn cleared resume_pending: $(tail -n 1 out.txt)"
base="http://127.0.0.1:$port/v1/apps/bot"
pending=$(curl -sf "$base/lanes?resume_pending=true" | jq '.lanes | length')
[[ $pending == 0 ]] && ok || fail "no lane is pending after the example: $pending"
sid=$(curl -sf "$base/users/telegram%3A42/lanes/telegram%3Adm%3A42" | jq -r .session_id)
events=$(curl -sf "$base/users/telegram%3A42/sessions/$sid?events=0" | jq '.events | length')
[[ $events == 2 ]] && ok || fail "the lane's session has the two appended events: $events"

# The chat UI's undo, retry, compress and clear.
MEMD="http://127.0.0.1:$port" bash -euo pipefail chat.sh >chat.txt 2>chat.err
rc=$?
out=$(cat chat.txt)
[[ $rc -eq 0 ]] && ok || fail "the README's chat UI example failed (exit $rc): $(cat chat.err) after: $out"
contains "$out" '{"created":true,' "PUT messages created the session"
contains "$out" '{"rewound_count":2,"target_text":"Something longer"}' "the rewind hid the turn and gave its text"
contains "$out" '{"unhidden_count":2}' "the undo brought the turn back"
contains "$out" '["Suggest a name for a cat","Miso","Something longer","Duchess Whiskerton"]' "the retried context"
contains "$out" '{"hidden_count":4}' "the compress hid the four visible events"
contains "$out" 'rewrite rewind undo rewind rewrite' "the operations, newest first"
[[ $(sed -n 7p chat.txt) == 6 ]] && ok || fail "six hidden events kept for the audit trail: $(sed -n 7p chat.txt)"
contains "$out" '{"hidden_count":2}' "the clear hid the compressed transcript"
contains "$out" '{"id":"c1","title":"Suggest a name for a cat","message_count":0}' "the cleared session is listed"

# Long-term memories: create, retry-safe id, If-Match, a filter, delete,
# the history.
MEMD="http://127.0.0.1:$port" bash -euo pipefail memories.sh >mem.txt 2>mem.err
rc=$?
out=$(cat mem.txt)
[[ $rc -eq 0 ]] && ok || fail "the README's memories example failed (exit $rc): $(cat mem.err) after: $out"
contains "$out" '{"id":"seat","kind":"preference","version":1}' "the memory was created"
contains "$out" '{"kind":"episode","expires":true}' "the memory with a ttl expires"
contains "$out" '{"text":"Prefers aisle seats","version":2}' "If-Match with the version changed it"
[[ $(sed -n 4p mem.txt) == "Prefers aisle seats" ]] && ok || fail "the topic filter listed it: $(sed -n 4p mem.txt)"
contains "$out" 'add by api, update by api, delete by api' "the history outlived the delete"

# Extraction: the built-in extractor, now, then nothing twice.
MEMD="http://127.0.0.1:$port" bash -euo pipefail extraction.sh >ext.txt 2>ext.err
rc=$?
out=$(cat ext.txt)
[[ $rc -eq 0 ]] && ok || fail "the README's extraction example failed (exit $rc): $(cat ext.err) after: $out"
contains "$out" '{"from_seq":0,"to_seq":3,"added":3}' "the three facts were extracted"
contains "$out" 'User is allergic to peanuts (allergy: peanuts)' "the allergy is a memory"
contains "$out" 'User lives in Oslo (home)' "the home is a memory"
contains "$out" "User's name is Bob (name)" "the name is a memory"
contains "$out" '{"from_seq":3,"to_seq":3,"added":0}' "a second extraction found nothing unread"

# Run checkpoints: a put, its pending write, the latest tuple, and the
# thread listed for an automatic resume.
MEMD="http://127.0.0.1:$port" bash -euo pipefail checkpoints.sh >ckpt.txt 2>ckpt.err
rc=$?
out=$(cat ckpt.txt)
[[ $rc -eq 0 ]] && ok || fail "the README's checkpoints example failed (exit $rc): $(cat ckpt.err) after: $out"
[[ $(sed -n 1p ckpt.txt) == '{"checkpoint_id":"0001","run_state":"running"}' ]] && ok ||
	fail "the put answered its summary: $(sed -n 1p ckpt.txt)"
[[ $(sed -n 2p ckpt.txt) == '{"checkpoint_id":"0001","writes":1}' ]] && ok ||
	fail "the latest tuple has the pending write: $(sed -n 2p ckpt.txt)"
[[ $(sed -n 3p ckpt.txt) == '"trip-42"' ]] && ok ||
	fail "the running thread is listed for an automatic resume: $(sed -n 3p ckpt.txt)"

# A2A tasks: create once, a conditional save, a terminal state kept, the
# list, and the user's delete taking the task.
MEMD="http://127.0.0.1:$port" bash -euo pipefail tasks.sh >tasks.txt 2>tasks.err
rc=$?
out=$(cat tasks.txt)
[[ $rc -eq 0 ]] && ok || fail "the README's A2A tasks example failed (exit $rc): $(cat tasks.err) after: $out"
contains "$out" '{"version":1,"user":"ann","state":"submitted"}' "the task was created for ann"
contains "$out" '{"version":2}' "If-Match with the version saved it"
contains "$out" "is completed" "leaving the terminal state was refused naming it"
contains "$out" "working" "the refusal names the state asked for"
[[ $(sed -n 4p tasks.txt) == book-1 ]] && ok || fail "the state filter listed it: $(sed -n 4p tasks.txt)"
[[ $(tail -n 1 tasks.txt) == not_found ]] && ok || fail "the user's delete took the task: $(tail -n 1 tasks.txt)"

kill "$serve_pid"
wait "$serve_pid"
serve_pid=
echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
