#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The exports test can fail: it must reject a plugin that exports more
# than its entry point, one that exports nothing, and a directory without
# plugins, and accept a well-built plugin.
#
# usage: exports_selftest.sh EXPORTS_TEST FIXTURE_DIR
set -euo pipefail

check=$1
fixtures=$2
status=0

expect() {
	local want=$1
	shift
	if "$check" "$@" >/dev/null 2>&1; then got=pass; else got=fail; fi
	if [ "$got" != "$want" ]; then
		echo "FAIL: exports_test.sh $* should $want, but it did $got" >&2
		status=1
	else
		echo "ok: exports_test.sh $* ${want}s"
	fi
}

empty=$(mktemp -d "${TMPDIR:-/tmp}/memd-exports-selftest.XXXXXX")
trap 'rm -rf "$empty"' EXIT

expect fail "$fixtures/memd-leaky.so"
expect fail "$fixtures/memd-no_entry.so"
expect fail "$empty"
expect fail "$empty/missing.so"
expect pass "$fixtures/memd-good.so"
expect fail "$fixtures/memd-good.so" "$fixtures/memd-leaky.so"
exit $status
