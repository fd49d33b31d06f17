// SPDX-License-Identifier: MIT
// The reference for the exact tokenizer: writes the seeded corpus as JSON
// lines {"text": ..., "cl100k_base": [ids], "o200k_base": [ids]} with the
// token ids js-tiktoken (from npm) gives for each string. Special-token
// text counts as ordinary text (as memd counts it).
//
//   node reference.mjs NPM_PREFIX SEED COUNT OUT_FILE
import { createRequire } from 'node:module';
import { writeFileSync, renameSync } from 'node:fs';
import { join } from 'node:path';
import { makeCorpus } from './corpus.mjs';

const [prefix, seed, count, outFile] = process.argv.slice(2);
if (!outFile) {
  console.error('usage: node reference.mjs NPM_PREFIX SEED COUNT OUT_FILE');
  process.exit(2);
}
const require = createRequire(join(prefix, 'node_modules', 'js-tiktoken', 'package.json'));
const { getEncoding } = require('js-tiktoken');
const encs = { cl100k_base: getEncoding('cl100k_base'), o200k_base: getEncoding('o200k_base') };
const corpus = makeCorpus(Number(seed), Number(count));
const lines = corpus.map((text) => {
  const o = { text };
  for (const [name, enc] of Object.entries(encs))
    o[name] = enc.encode(text, [], []);
  return JSON.stringify(o);
});
writeFileSync(outFile + '.tmp', lines.join('\n') + '\n');
renameSync(outFile + '.tmp', outFile);
console.log(`${outFile}: ${corpus.length} strings`);
