#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# memd as Google ADK's services (@memd/client/adk, clients/typescript/src/adk)
# against the real @google/adk pinned in the package's lock file: builds
# the package (ts_package.sh; tsc type-checks the services against ADK's
# declarations), starts a real `memd serve` and runs the compiled node:test
# test (test/adk/adk_test.ts), which also spawns a second node process
# (test/adk/continue.ts) that continues a session from memd.
set -euo pipefail

memd="$MEMD_BUILD_ROOT/host/memd"
source "$MEMD_SOURCE_ROOT/tests/common/npm_serve.sh"
source "$MEMD_SOURCE_ROOT/tests/clients/ts_package.sh"

ts_package client-adk

work=$(mktemp -d)
# The server is stopped, and waited for, before its files go.
trap 'serve_stop; rm -rf "$work"' EXIT
unset MEMD_CONFIG

# memd serve on a free port. max_response_bytes at its minimum (64 KiB), so
# that the test can make a session larger than one answer; the built-in
# extractor of long-term memories (the default) for addSessionToMemory.
config() {
	cat <<YAML
server: {listen: "127.0.0.1:$1", max_response_bytes: 65536}
stores:
  main: {plugin: sqlite, path: $work/memd.db}
sessions: {store: main}
apps:
  '*': {working_memory: {strategy: all}}
YAML
}
serve_start "$work" config

cd "$ts_dir"
MEMD_URL="http://127.0.0.1:$port" node --test --test-reporter=spec dist/test/adk/*_test.js

# README.md's ADK wiring ("Use memd from your agent"), as written:
# type-checked against ADK's and the package's declarations (it names a
# Gemini model, which the test cannot call). The package imports itself by
# name here (its exports), as a project that installed it does.
source "$MEMD_SOURCE_ROOT/tests/common/readme_blocks.sh"
readme_blocks "$MEMD_SOURCE_ROOT/README.md" "## Use memd from your agent" ts 2 >"$work/readme_adk.ts"
grep -q "new MemdSessionService" "$work/readme_adk.ts" ||
	{ echo "FAIL: README.md has no ADK example (the second TypeScript block of \"Use memd from your agent\")" >&2; exit 1; }
cp "$work/readme_adk.ts" "$ts_dir/readme_adk.ts"
node_modules/.bin/tsc --noEmit --strict --skipLibCheck --module NodeNext --moduleResolution NodeNext \
	--target ES2022 --types node readme_adk.ts || { echo "FAIL: tsc: README.md's ADK example" >&2; exit 1; }
echo "adk_test: README.md's ADK example type-checks"
