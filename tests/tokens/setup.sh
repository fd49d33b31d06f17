#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Test set-up for the exact tokenizer: installs the reference tokenizer
# (js-tiktoken, pinned, from the npm registry) into DIR/npm and writes
# DIR/cl100k_base.tiktoken and DIR/o200k_base.tiktoken from the rank data
# it ships. Idempotent and safe to run from several tests at once.
#
# usage: setup.sh DIR
set -euo pipefail

JS_TIKTOKEN_VERSION=1.0.21

dir=${1:?usage: setup.sh DIR}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$dir"
exec 9>"$dir/.lock"
flock 9

stamp="$dir/.ready-$JS_TIKTOKEN_VERSION"
[[ -f "$stamp" && -f "$dir/cl100k_base.tiktoken" && -f "$dir/o200k_base.tiktoken" ]] && exit 0

command -v node >/dev/null || { echo "setup: node is not installed (scripts/deps.sh test)" >&2; exit 1; }
if ! command -v npm >/dev/null; then
	# Debian's nodejs comes without npm (NodeSource's bundles it and
	# conflicts with Debian's npm package, so deps.sh cannot list it).
	sudo=()
	[[ $(id -u) -eq 0 ]] || sudo=(sudo)
	echo "setup: installing npm" >&2
	DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends npm >&2 ||
		{ echo "setup: npm is missing and could not be installed" >&2; exit 1; }
fi
mkdir -p "$dir/npm"
if ! npm install --prefix "$dir/npm" --no-audit --no-fund --loglevel=error \
	"js-tiktoken@$JS_TIKTOKEN_VERSION" >"$dir/npm-install.log" 2>&1; then
	cat "$dir/npm-install.log" >&2
	echo "setup: npm install js-tiktoken@$JS_TIKTOKEN_VERSION failed" >&2
	exit 1
fi
node "$here/make_ranks.mjs" "$dir/npm" "$dir" >/dev/null
touch "$stamp"
