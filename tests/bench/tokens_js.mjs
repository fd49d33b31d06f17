// SPDX-License-Identifier: MIT
// Benchmark half of tokens_bench.sh: writes the seeded corpus (one JSON
// string per line) for the C side, then times js-tiktoken on it and prints
// one JSON object: {"<encoding>": {"tokens": N, "seconds": S}, ...} (the
// best of REPS runs after a warm-up).
//
//   node tokens_js.mjs NPM_PREFIX SEED COUNT CORPUS_OUT [MAX_CHARS]
// MAX_CHARS > 0 keeps only the strings of at most that many characters.
import { createRequire } from 'node:module';
import { writeFileSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const REPS = 3;
const [prefix, seed, count, out, maxChars] = process.argv.slice(2);
const here = dirname(fileURLToPath(import.meta.url));
const { makeCorpus } = await import(join(here, '..', 'tokens', 'corpus.mjs'));
const require = createRequire(join(prefix, 'node_modules', 'js-tiktoken', 'package.json'));
const { getEncoding } = require('js-tiktoken');

const limit = Number(maxChars || 0);
const corpus = makeCorpus(Number(seed), Number(count)).filter((s) => !limit || s.length <= limit);
writeFileSync(out, corpus.map((s) => JSON.stringify(s)).join('\n') + '\n');
const result = {};
for (const name of ['cl100k_base', 'o200k_base']) {
  const enc = getEncoding(name);
  let tokens = 0;
  for (const s of corpus)
    tokens += enc.encode(s, [], []).length; // warm-up
  let best = Infinity;
  for (let r = 0; r < REPS; r++) {
    const t0 = process.hrtime.bigint();
    for (const s of corpus)
      enc.encode(s, [], []);
    const secs = Number(process.hrtime.bigint() - t0) / 1e9;
    best = Math.min(best, secs);
  }
  result[name] = { tokens, seconds: best };
}
console.log(JSON.stringify(result));
