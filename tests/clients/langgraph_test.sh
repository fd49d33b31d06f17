#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# memd as LangGraph's checkpointer (@memd/client/langgraph,
# clients/typescript/src/langgraph.ts) against the real LangGraph packages
# pinned in the package's lock file: builds the package (ts_package.sh;
# tsc type-checks MemdSaver against BaseCheckpointSaver), starts a real
# `memd serve` and runs
#  - LangGraph's checkpointer conformance suite,
#    @langchain/langgraph-checkpoint-validation, unchanged (its validate()
#    in a vitest file, test/langgraph/validation.test.ts): every test must
#    pass and none be skipped;
#  - test/langgraph/*_test.ts (node:test): a StateGraph with an
#    interrupt() resumed in a second process, a run killed with SIGKILL in
#    a step resumed in a new one, memd's resumable listing and finish()
#    (graph_test.ts); what a checkpoint stores in memd and the run states
#    (saver_test.ts);
#  - README.md's LangGraph example, as written.
set -euo pipefail

memd="$MEMD_BUILD_ROOT/host/memd"
source "$MEMD_SOURCE_ROOT/tests/common/npm_serve.sh"
source "$MEMD_SOURCE_ROOT/tests/clients/ts_package.sh"

ts_package client-langgraph

# memd serve on a free port, checkpoints on SQLite.
serve_sqlite

cd "$ts_dir"
# The conformance suite. vitest's summary line must say that every test
# passed: "Tests  N passed (N)", with no "failed" or "skipped" part.
if ! MEMD_URL="http://127.0.0.1:$port" NO_COLOR=1 node_modules/.bin/vitest run --globals \
	--root "$ts_dir/dist/test/langgraph" validation.test.js >"$work/validation.log" 2>&1; then
	cat "$work/validation.log" >&2
	echo "FAIL: @langchain/langgraph-checkpoint-validation against MemdSaver" >&2
	exit 1
fi
summary=$(grep -E '^ *Tests +' "$work/validation.log" || true)
if ! [[ $summary =~ ^\ *Tests\ +([0-9]+)\ passed\ \(([0-9]+)\)$ ]] || [[ ${BASH_REMATCH[1]} != "${BASH_REMATCH[2]}" ]] ||
	((BASH_REMATCH[1] == 0)); then
	cat "$work/validation.log" >&2
	echo "FAIL: the validation suite did not pass every test (summary: '$summary')" >&2
	exit 1
fi
echo "langgraph_test: @langchain/langgraph-checkpoint-validation: ${BASH_REMATCH[1]} of ${BASH_REMATCH[2]} tests passed, none skipped"

MEMD_URL="http://127.0.0.1:$port" node --test --test-reporter=spec dist/test/langgraph/*_test.js

# README.md's LangGraph example ("Use memd from your agent"), as written
# but for memd's address, compiled against the package's and LangGraph's
# declarations and run: the thread's last checkpoint holds the plan, and the
# run is not listed to resume. The package imports itself by name here
# (its exports), as a project that installed it does.
source "$MEMD_SOURCE_ROOT/tests/common/readme_blocks.sh"
readme_blocks "$MEMD_SOURCE_ROOT/README.md" "## Use memd from your agent" ts 3 >readme_langgraph.ts
grep -q "new MemdSaver({ baseUrl: 'http://127.0.0.1:8700'" readme_langgraph.ts ||
	{ echo "FAIL: README.md has no LangGraph example (the third TypeScript block of \"Use memd from your agent\")" >&2; exit 1; }
sed -i "s|http://127.0.0.1:8700|http://127.0.0.1:$port|" readme_langgraph.ts
cat >>readme_langgraph.ts <<'TS'
const last = await checkpointer.getTuple(config);
const listed = await checkpointer.client.listResumableRuns({ app: 'demo' });
console.log(JSON.stringify({ plan: last?.checkpoint.channel_values.plan, listed: listed.sessions.length }));
TS
node_modules/.bin/tsc --strict --skipLibCheck --module NodeNext --moduleResolution NodeNext \
	--target ES2022 --types node readme_langgraph.ts || { echo "FAIL: tsc: README.md's LangGraph example" >&2; exit 1; }
node readme_langgraph.js | grep -qx '{"plan":"three days in Lisbon","listed":0}' ||
	{ echo "FAIL: README.md's LangGraph example did not leave its plan in memd, finished" >&2; exit 1; }
rm -f readme_langgraph.ts readme_langgraph.js
echo "langgraph_test: README.md's LangGraph example runs against memd"
