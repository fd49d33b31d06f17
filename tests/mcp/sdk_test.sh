#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# memd's MCP server against the official MCP TypeScript SDK's client:
# installs the pinned packages (npm ci, package-lock.json), type-checks and
# compiles the test (tsc), starts a real `memd serve` with three API keys
# (write bound to app "app" and user "alice", write unbound, read bound)
# and runs the test: Streamable HTTP at /mcp with each key, and stdio
# against `memd mcp` (zero-config, in a directory of its own).
set -euo pipefail

memd="$MEMD_BUILD_ROOT/host/memd"
src="$MEMD_SOURCE_ROOT/tests/mcp"
dir="$MEMD_BUILD_ROOT/tests/mcp/work"
mkdir -p "$dir"
exec 9>"$dir/.lock"
flock 9
source "$MEMD_SOURCE_ROOT/tests/common/npm_serve.sh"

# The pinned packages, installed again only when the lock file changed.
npm_install sdk_test "$dir" "$src" package.json package-lock.json tsconfig.json sdk_test.ts

# The test, type-checked against the SDK's types and compiled (nothing is
# emitted on an error).
rm -rf "$dir/out"
(cd "$dir" && "$tsc" -p tsconfig.json) || { echo "FAIL: tsc: the test" >&2; exit 1; }

work=$(mktemp -d)
# The server is stopped, and waited for, before its files go.
trap 'serve_stop; rm -rf "$work"' EXIT
unset MEMD_CONFIG

key() { head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n'; }
MCP_KEY_BOUND=$(key)
MCP_KEY_UNBOUND=$(key)
MCP_KEY_READ=$(key)
export MCP_KEY_BOUND MCP_KEY_UNBOUND MCP_KEY_READ

# memd serve on a free port, with the three keys.
config() {
	cat <<YAML
server:
  listen: "127.0.0.1:$1"
  api_keys:
    - {key: $MCP_KEY_BOUND, scope: write, apps: [app], user: alice}
    - {key: $MCP_KEY_UNBOUND, scope: write}
    - {key: $MCP_KEY_READ, scope: read, apps: [app], user: alice}
stores:
  main: {plugin: sqlite, path: $work/memd.db}
sessions: {store: main}
apps:
  '*': {working_memory: {strategy: all}}
  rec: {working_memory: {strategy: all, recall: {k: 5, sources: [memories]}}}
YAML
}
serve_start "$work" config

mkdir "$work/stdio"
node "$dir/out/sdk_test.js" "http://127.0.0.1:$port" "$memd" "$work/stdio"
echo "sdk_test: memd's MCP server works with @modelcontextprotocol/sdk $(node -p "require('$dir/node_modules/@modelcontextprotocol/sdk/package.json').version")"
