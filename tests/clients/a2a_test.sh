#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# memd as the task store of an A2A server (@memd/client/a2a,
# clients/typescript/src/a2a.ts) against the real @a2a-js/sdk pinned in the
# package's lock file: builds the package (ts_package.sh; tsc type-checks
# MemdTaskStore against the SDK's TaskStore), starts a real `memd serve`
# and runs the compiled node:test test (test/a2a/a2a_test.ts), which starts
# the SDK's request handler and JSON-RPC transport over MemdTaskStore in
# child node processes (test/a2a/server.ts), kills one and starts another.
set -euo pipefail

memd="$MEMD_BUILD_ROOT/host/memd"
source "$MEMD_SOURCE_ROOT/tests/common/npm_serve.sh"
source "$MEMD_SOURCE_ROOT/tests/clients/ts_package.sh"

ts_package client-a2a

# memd serve on a free port.
serve_sqlite

cd "$ts_dir"
MEMD_URL="http://127.0.0.1:$port" node --test --test-reporter=spec dist/test/a2a/*_test.js
