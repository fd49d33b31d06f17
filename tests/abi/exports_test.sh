#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Every plugin exports exactly one dynamic symbol, the function
# memd_plugin_entry_v1 (api/README.md, Entry point and descriptor: hidden
# visibility plus the plugin version script).
#
# usage: exports_test.sh DIR|FILE...
#   DIR: every *.so under it (recursively); FILE: that .so.
# Fails if any plugin exports anything else (or not the entry point as a
# function), and if no plugin was found at all.
set -euo pipefail

NM=${NM:-nm}
ENTRY=memd_plugin_entry_v1

if [ $# -eq 0 ]; then
	echo "usage: $0 DIR|FILE..." >&2
	exit 2
fi

plugins=()
for arg in "$@"; do
	if [ -d "$arg" ]; then
		while IFS= read -r -d '' so; do
			plugins+=("$so")
		done < <(find "$arg" -name '*.so' -type f -print0 | sort -z)
	elif [ -f "$arg" ]; then
		plugins+=("$arg")
	else
		echo "FAIL: $arg: no such file or directory" >&2
		exit 1
	fi
done

if [ ${#plugins[@]} -eq 0 ]; then
	echo "FAIL: no plugin (*.so) found in: $*" >&2
	exit 1
fi

failed=0
for so in "${plugins[@]}"; do
	if ! syms=$("$NM" -D --defined-only "$so" 2>&1); then
		echo "FAIL: $so: $NM failed: $syms" >&2
		failed=1
		continue
	fi
	# Lines are "ADDRESS TYPE NAME"; keep "TYPE NAME".
	exports=$(printf '%s\n' "$syms" | awk 'NF >= 3 { print $2 " " $3 }')
	if [ "$exports" != "T $ENTRY" ]; then
		echo "FAIL: $so must export exactly the function $ENTRY; it exports:" >&2
		printf '%s\n' "${exports:-(nothing)}" | sed 's/^/    /' >&2
		failed=1
	else
		echo "ok: $(basename "$so") exports only $ENTRY"
	fi
done
exit $failed
