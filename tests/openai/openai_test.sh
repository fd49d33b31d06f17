#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# memd's OpenAI messages against the openai npm package's type
# definitions: installs the pinned packages (npm ci, package-lock.json),
# type-checks the fixtures of every message shape as
# ChatCompletionMessageParam[] (tsc), runs them through a real `memd
# serve` (PUT, GET and POST messages, GET context, in the OpenAI format)
# checking each answer equals what went in, then type-checks memd's
# answers with tsc.
set -euo pipefail

memd="$MEMD_BUILD_ROOT/host/memd"
src="$MEMD_SOURCE_ROOT/tests/openai"
dir="$MEMD_BUILD_ROOT/tests/openai/work"
mkdir -p "$dir"
exec 9>"$dir/.lock"
flock 9
source "$MEMD_SOURCE_ROOT/tests/common/npm_serve.sh"

# The pinned packages, installed again only when the lock file changed.
npm_install openai_test "$dir" "$src" package.json package-lock.json tsconfig.json fixtures.ts \
	messages_test.ts

# The fixtures and the test, type-checked and compiled (nothing is
# emitted on an error).
rm -rf "$dir/out"
(cd "$dir" && "$tsc" -p tsconfig.json) || { echo "FAIL: tsc: the fixtures or the test" >&2; exit 1; }

# memd serve on a free port.
serve_sqlite "apps:
  '*': {working_memory: {strategy: all}}"

node "$dir/out/messages_test.js" "http://127.0.0.1:$port" "$dir/answers.ts"

# memd's answers against the package's types.
(cd "$dir" && "$tsc" --noEmit --strict --exactOptionalPropertyTypes --module NodeNext \
	--moduleResolution NodeNext --target ES2022 --types node answers.ts) ||
	{ echo "FAIL: tsc: memd's answers are not the openai package's types" >&2; exit 1; }
echo "openai_test: the fixtures and memd's answers type-check against openai $(node -p "require('$dir/node_modules/openai/package.json').version")"
