# SPDX-License-Identifier: MIT
# Sourced by the tests that run against the TypeScript package @memd/client
# (clients/typescript): client-typescript (typescript_test.sh), the ADK
# services' test and the A2A task store's (adk_test.sh, a2a_test.sh). Needs bash with `set -euo pipefail` and
# tests/common/npm_serve.sh sourced first.
#
# ts_package NAME: builds the package from the source tree into
# $MEMD_BUILD_ROOT/tests/clients/ts (its package.json, package-lock.json,
# tsconfig.json, scripts/, src/ and test/, and api/openapi.yaml, which
# `npm run generate` reads through $MEMD_OPENAPI), installs the pinned
# packages there (npm ci, again only when the lock file changed) and runs
# `npm run build` (generate + tsc: dist/src, dist/test). Takes an
# exclusive flock on that directory's .lock, held on file descriptor 8
# until the calling script exits, so that two tests never build into it
# at once nor one rebuilds what another runs. Sets ts_dir. NAME prefixes
# what it says.
#
# The ADK services' test uses it the same way:
#   source "$MEMD_SOURCE_ROOT/tests/common/npm_serve.sh"
#   source "$MEMD_SOURCE_ROOT/tests/clients/ts_package.sh"
#   ts_package client-adk
#   ... serve_start "$work" config ...
#   MEMD_URL="http://127.0.0.1:$port" node --test "$ts_dir"/dist/test/adk/*_test.js
# (its tests in clients/typescript/test/adk/, compiled with the rest).
ts_package() {
	local name=$1 src="$MEMD_SOURCE_ROOT/clients/typescript" d
	ts_dir="$MEMD_BUILD_ROOT/tests/clients/ts"
	mkdir -p "$ts_dir"
	exec 8>"$ts_dir/.lock"
	flock 8
	npm_install "$name" "$ts_dir" "$src" package.json package-lock.json tsconfig.json
	# The trees afresh, so that a file deleted from the source is gone here
	# too (src/generated is written by generate).
	for d in scripts src test; do
		rm -rf "${ts_dir:?}/$d"
		cp -R "$src/$d" "$ts_dir/$d"
	done
	rm -rf "$ts_dir/src/generated" "$ts_dir/dist"
	cp "$MEMD_SOURCE_ROOT/api/openapi.yaml" "$ts_dir/openapi.yaml"
	(cd "$ts_dir" && MEMD_OPENAPI="$ts_dir/openapi.yaml" npm run --silent build >build.log 2>&1) ||
		{ cat "$ts_dir/build.log" >&2; echo "FAIL: $name: npm run build (generate, tsc) of @memd/client" >&2; exit 1; }
}
