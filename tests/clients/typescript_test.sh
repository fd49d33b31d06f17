#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The TypeScript client @memd/client (clients/typescript): builds it
# (generate from api/openapi.yaml, tsc, which also type-checks the tests;
# ts_package.sh), starts a real `memd serve` and runs the compiled node:test
# tests against it (test/*_test.ts; the transport's retry, timeout and
# abort tests also start a small local HTTP server of their own for what
# memd cannot be made to do on demand, HTTPS with a certificate openssl
# makes, and child node processes: one that must exit by itself, one
# without process, as in a browser).
set -euo pipefail

memd="$MEMD_BUILD_ROOT/host/memd"
source "$MEMD_SOURCE_ROOT/tests/common/npm_serve.sh"
source "$MEMD_SOURCE_ROOT/tests/clients/ts_package.sh"

ts_package client-typescript

# memd serve on a free port.
serve_sqlite "apps:
  '*': {working_memory: {strategy: all}}"

cd "$ts_dir"
MEMD_URL="http://127.0.0.1:$port" MEMD_OPENAPI="$ts_dir/openapi.yaml" \
	node --test --test-reporter=spec dist/test/*_test.js

# The package as a user gets it: packed (npm pack: package.json's files and
# exports), installed into a project of its own, type-checked there by its
# .d.ts (a wrong parameter name is an error there too) and run against memd.
mkdir "$work/consumer"
(cd "$ts_dir" && npm pack --silent --pack-destination "$work" >/dev/null) ||
	{ echo "FAIL: npm pack" >&2; exit 1; }
cd "$work/consumer"
cat >package.json <<'JSON'
{"name": "consumer", "version": "1.0.0", "private": true, "type": "module"}
JSON
npm install --offline --no-audit --no-fund --loglevel=error "$work"/memd-client-*.tgz >npm.log 2>&1 ||
	{ cat npm.log >&2; echo "FAIL: npm install of the packed package" >&2; exit 1; }
cat >consumer.ts <<'TS'
import { MemdClient, MemdError, type Schemas } from '@memd/client';
const memd = new MemdClient({ baseUrl: process.argv[2] });
const s: Schemas['Session'] = await memd.createSession({ app: 'consumer', user: 'u' }, { id: 's' });
const r = await memd.appendEvents({ app: 'consumer', user: 'u', sid: s.id }, { events: [{ role: 'user', content: 'hi' }] });
try {
  await memd.getSession({ app: 'consumer', user: 'u', sid: 'none' });
} catch (e) {
  if (!(e instanceof MemdError) || e.code !== 'not_found') throw e;
}
console.log(`consumer: appended seq ${r.seqs[0]}`);
TS
cat >bad.ts <<'TS'
import { MemdClient } from '@memd/client';
await new MemdClient({ baseUrl: 'http://x' }).getSession({ app: 'a', user: 'u', sid: 's', event: 1 });
TS
flags=(--strict --module NodeNext --moduleResolution NodeNext --target ES2022 --types node --typeRoots "$ts_dir/node_modules/@types")
"$ts_dir/node_modules/.bin/tsc" "${flags[@]}" consumer.ts || { echo "FAIL: tsc: a user's program against the packed package" >&2; exit 1; }
if "$ts_dir/node_modules/.bin/tsc" "${flags[@]}" --noEmit bad.ts >bad.log 2>&1 || ! grep -q "'event' does not exist" bad.log; then
	cat bad.log >&2
	echo "FAIL: tsc took a wrong parameter name in a user's program" >&2
	exit 1
fi
node consumer.js "http://127.0.0.1:$port" | grep -qx 'consumer: appended seq 1' ||
	{ echo "FAIL: a user's program against the packed package" >&2; exit 1; }
# README.md's TypeScript example ("Use memd from your agent"), as written
# but for memd's address, in the same project against the same memd.
source "$MEMD_SOURCE_ROOT/tests/common/readme_blocks.sh"
readme_blocks "$MEMD_SOURCE_ROOT/README.md" "## Use memd from your agent" ts 1 >readme.ts
grep -q "baseUrl: 'http://127.0.0.1:8700'" readme.ts ||
	{ echo "FAIL: README.md's TypeScript example is missing or names no http://127.0.0.1:8700" >&2; exit 1; }
sed -i "s|http://127.0.0.1:8700|http://127.0.0.1:$port|" readme.ts
echo 'console.log(JSON.stringify(messages));' >>readme.ts
"$ts_dir/node_modules/.bin/tsc" "${flags[@]}" readme.ts || { echo "FAIL: tsc: README.md's TypeScript example" >&2; exit 1; }
node readme.js | grep -q '"content":"Plan a trip to Lisbon in May"' ||
	{ echo "FAIL: README.md's TypeScript example did not give the message back as context" >&2; exit 1; }
# The ./adk, ./a2a and ./langgraph entry points (their code needs
# @google/adk, @a2a-js/sdk and @langchain/langgraph-checkpoint, which this
# project does not install) resolve to files the package holds.
for sub in adk a2a langgraph; do
	entry=$(node --input-type=module -e "console.log(new URL(import.meta.resolve('@memd/client/$sub')).pathname)")
	test -f "$entry" && test -f "${entry%.js}.d.ts" ||
		{ echo "FAIL: the packed package's ./$sub entry point names no file: $entry" >&2; exit 1; }
done
echo "typescript_test: the packed @memd/client installs, type-checks and runs in a project of its own"
