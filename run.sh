#!/usr/bin/env bash
# Set up and run memd from this checkout: installs missing Debian packages,
# builds into ./build, then runs `memd ARGS...` (zero-config: SQLite in
# ./data/memd.db unless --config or $MEMD_CONFIG names a config).
#   ./run.sh session create demo alice --title "first chat"
set -euo pipefail
root=$(cd "$(dirname "$0")" && pwd)
"$root/scripts/deps.sh" run
if [[ ! -f "$root/build/build.ninja" ]]; then
	meson setup "$root/build" "$root" -Dtests=false >/dev/null
fi
ninja -C "$root/build" >/dev/null
exec "$root/build/host/memd" "$@"
