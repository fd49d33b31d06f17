#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Exact BPE token counting speed, memd (host/tokens/bpe.c) against js-tiktoken on
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
# The whole corpus (its long pieces are slow for js-tiktoken's quadratic
# merge), then only its strings of up to SHORT_CHARS characters.
SHORT_CHARS=512
for max in 0 "$SHORT_CHARS"; do
	if [[ $max == 0 ]]; then echo "== the whole corpus"; else echo "== strings of at most $max characters"; fi
	js=$(node "$here/tokens_js.mjs" "$dir/npm" "$SEED" "$COUNT" "$dir/bench_corpus.jsonl" "$max")
	"$bin" "$dir" "$dir/bench_corpus.jsonl" "$js"
done
