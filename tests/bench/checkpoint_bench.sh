#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# LangGraph checkpointing: MemdSaver (@memd/client/langgraph) over HTTP
# against `memd serve` on SQLite (synchronous=FULL, memd's default, and
# NORMAL), beside LangGraph's SqliteSaver on a file (as it sets itself up,
# and with synchronous=FULL), in the same run: graph runs/s and steps/s of
# the same chain graph run C at a time on distinct threads for each C of
# CONC (every thread's final state checked), raw put and getTuple loops
# (ops/s, p50, p99), the ratios, and where a MemdSaver put's time goes
# (checkpoint/checkpoint_bench.mjs). Not a pass/fail test.
#
# usage: checkpoint_bench.sh [RUNS [STEPS [OPS [CONC]]]]
#   (defaults 50 20 500 1,4,16,64; CONC: the concurrencies, comma-separated;
#   env: MEMD_BUILD_ROOT, MEMD_SOURCE_ROOT: meson test --benchmark checkpoint)
set -euo pipefail
runs=${1:-50} steps=${2:-20} ops=${3:-500} conc=${4:-1,4,16,64}
: "${MEMD_BUILD_ROOT:?run through meson test -C BUILD --benchmark checkpoint}"
: "${MEMD_SOURCE_ROOT:?run through meson test -C BUILD --benchmark checkpoint}"
memd="$MEMD_BUILD_ROOT/host/memd"
here="$MEMD_SOURCE_ROOT/tests/bench/checkpoint"
source "$MEMD_SOURCE_ROOT/tests/common/npm_serve.sh"
source "$MEMD_SOURCE_ROOT/tests/clients/ts_package.sh"

# @memd/client built from the source tree (dist/src/langgraph.js and the
# graphs of its tests), then the benchmark's own pinned packages. Its
# SqliteSaver's better-sqlite3 is compiled here (with the node headers of
# the installed node when they are there) rather than downloaded.
ts_package checkpoint-bench
bdir="$MEMD_BUILD_ROOT/tests/bench/checkpoint"
mkdir -p "$bdir"
export npm_config_build_from_source=true
[[ -f /usr/include/node/node.h ]] && export npm_config_nodedir=/usr
npm_install checkpoint-bench "$bdir" "$here" package.json package-lock.json
rm -rf "$bdir/memd-client"
cp -R "$ts_dir/dist/src" "$bdir/memd-client"
cp "$ts_dir/dist/test/langgraph/graphs.js" "$bdir/graphs.js"
cp "$here/checkpoint_bench.mjs" "$bdir/"

work=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done; rm -rf "$work"' EXIT
unset MEMD_CONFIG
# No per-address connection limit: through fetch, a client opens a
# connection for every request in flight, and at C=64 the benchmark's one
# process held more than memd's default 256 (memd then closes the new ones
# and a put fails with "other side closed"); the node transport, the
# default under Node, holds at most maxConnections (64) per client.
servers=()
for sync in full normal; do
	mkdir -p "$work/$sync"
	eval "config_$sync() { printf 'server: {listen: \"127.0.0.1:%s\", max_connections_per_ip: 0}\nstores:\n  main: {plugin: sqlite, path: %s, synchronous: %s}\nsessions: {store: main}\n' \"\$1\" \"$work/$sync/memd.db\" $sync; }"
	serve_start "$work/$sync" "config_$sync"
	pids+=("$serve_pid")
	servers+=("$sync=http://127.0.0.1:$port")
done
cd "$bdir"
node checkpoint_bench.mjs memd-client/langgraph.js graphs.js "$work/sqlite" "$runs" "$steps" "$ops" "$conc" "${servers[@]}"
