#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Exact BPE token counting speed, memd (host/bpe.c) against js-tiktoken on
# the same seeded corpus in the same run. Prints tokens/s of each and the
# ratio (target: memd >= 5x js-tiktoken). Not a pass/fail test.
#
# usage: tokens_bench.sh TOKENS_BENCH   (env: MEMD_BUILD_ROOT)
set -euo pipefail
SEED=20240521
COUNT=${TOKENS_BENCH_STRINGS:-2500}
bin=${1:?usage: tokens_bench.sh TOKENS_BENCH}
here=$(cd "$(dirname "$0")" && pwd)
: "${MEMD_BUILD_ROOT:?run through meson test --benchmark}"
dir="$MEMD_BUILD_ROOT/tests/tokens/data"
"$here/../tokens/setup.sh" "$dir"
js=$(node "$here/tokens_js.mjs" "$dir/npm" "$SEED" "$COUNT" "$dir/bench_corpus.jsonl")
exec "$bin" "$dir" "$dir/bench_corpus.jsonl" "$js"
