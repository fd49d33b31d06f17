#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Exact token counts equal js-tiktoken's: sets up the reference (setup.sh),
# writes the seeded corpus with js-tiktoken's token ids for cl100k_base and
# o200k_base (reference.mjs), then runs the C test (BPE_TEST) against them.
#
# usage: tokens_test.sh BPE_TEST   (env: MEMD_BUILD_ROOT)
set -euo pipefail

CORPUS_SEED=20240521
CORPUS_SIZE=2500

bin=${1:?usage: tokens_test.sh BPE_TEST}
here=$(cd "$(dirname "$0")" && pwd)
: "${MEMD_BUILD_ROOT:?run through meson test}"
dir="$MEMD_BUILD_ROOT/tests/tokens/data"

"$here/setup.sh" "$dir"
node "$here/reference.mjs" "$dir/npm" "$CORPUS_SEED" "$CORPUS_SIZE" "$dir/reference.jsonl"
MEMD_TOKENS_DIR="$dir" exec "$bin"
