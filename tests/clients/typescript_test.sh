#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The TypeScript client @memd/client (clients/typescript): builds it
# (generate from api/openapi.yaml, tsc, which also type-checks the tests;
# ts_package.sh), starts a real `memd serve` and runs the compiled node:test
# tests against it (test/*_test.ts; the transport's retry, timeout and
# abort tests also start a small local HTTP server of their own for what
# memd cannot be made to do on demand).
set -euo pipefail

memd="$MEMD_BUILD_ROOT/host/memd"
source "$MEMD_SOURCE_ROOT/tests/common/npm_serve.sh"
source "$MEMD_SOURCE_ROOT/tests/clients/ts_package.sh"

ts_package client-typescript

work=$(mktemp -d)
# The server is stopped, and waited for, before its files go.
trap 'serve_stop; rm -rf "$work"' EXIT
unset MEMD_CONFIG

# memd serve on a free port.
config() {
	cat <<YAML
server: {listen: "127.0.0.1:$1"}
stores:
  main: {plugin: sqlite, path: $work/memd.db}
sessions: {store: main}
apps:
  '*': {working_memory: {strategy: all}}
YAML
}
serve_start "$work" config

cd "$ts_dir"
MEMD_URL="http://127.0.0.1:$port" MEMD_OPENAPI="$ts_dir/openapi.yaml" \
	node --test --test-reporter=spec dist/test/*_test.js
