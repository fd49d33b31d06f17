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

command -v node >/dev/null || { echo "FAIL: node is not installed (scripts/deps.sh test)" >&2; exit 1; }
if ! command -v npm >/dev/null; then
	# Debian's nodejs comes without npm (as in tests/tokens/setup.sh).
	sudo=()
	[[ $(id -u) -eq 0 ]] || sudo=(sudo)
	echo "sdk_test: installing npm" >&2
	DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends npm >&2 ||
		{ echo "FAIL: npm is missing and could not be installed" >&2; exit 1; }
fi

# The pinned packages, installed again only when the lock file changed.
cp "$src/package.json" "$src/package-lock.json" "$src/tsconfig.json" "$src/sdk_test.ts" "$dir/"
stamp="$dir/node_modules/.memd-lock-$(sha256sum "$src/package-lock.json" | cut -c1-16)"
if [[ ! -f "$stamp" ]]; then
	(cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >npm-ci.log 2>&1) ||
		{ cat "$dir/npm-ci.log" >&2; echo "FAIL: npm ci" >&2; exit 1; }
	touch "$stamp"
fi
tsc="$dir/node_modules/.bin/tsc"

# The test, type-checked against the SDK's types and compiled (nothing is
# emitted on an error).
rm -rf "$dir/out"
(cd "$dir" && "$tsc" -p tsconfig.json) || { echo "FAIL: tsc: the test" >&2; exit 1; }

work=$(mktemp -d)
serve_pid=
# The server is stopped, and waited for, before its files go: it writes
# (a keyword snapshot, the database's last pages) until it has exited.
trap 'if [[ -n "$serve_pid" ]]; then kill "$serve_pid" 2>/dev/null; wait "$serve_pid" 2>/dev/null || true; fi; rm -rf "$work"' EXIT
unset MEMD_CONFIG

key() { head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n'; }
MCP_KEY_BOUND=$(key)
MCP_KEY_UNBOUND=$(key)
MCP_KEY_READ=$(key)
export MCP_KEY_BOUND MCP_KEY_UNBOUND MCP_KEY_READ

# memd serve on a free port (another taker between the probe and serve's
# bind is a retry with another port).
for ((try = 0; try < 20; try++)); do
	port=$((20000 + RANDOM % 12000))
	(exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && continue
	cat >"$work/memd.yaml" <<YAML
server:
  listen: "127.0.0.1:$port"
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
	"$memd" --config "$work/memd.yaml" serve 2>"$work/serve.err" &
	serve_pid=$!
	for ((i = 0; i < 600; i++)); do # bounded: until it listens or exits
		grep -q '"listening"' "$work/serve.err" && break
		kill -0 "$serve_pid" 2>/dev/null || break
		sleep 0.1
	done
	grep -q '"listening"' "$work/serve.err" && break
	wait "$serve_pid" || true
	serve_pid=
	grep -q "Address already in use" "$work/serve.err" || break
done
grep -q '"listening"' "$work/serve.err" || { echo "FAIL: serve did not start: $(cat "$work/serve.err")" >&2; exit 1; }

mkdir "$work/stdio"
node "$dir/out/sdk_test.js" "http://127.0.0.1:$port" "$memd" "$work/stdio"
echo "sdk_test: memd's MCP server works with @modelcontextprotocol/sdk $(node -p "require('$dir/node_modules/@modelcontextprotocol/sdk/package.json').version")"
