// SPDX-License-Identifier: MIT
// Writes cl100k_base.tiktoken and o200k_base.tiktoken (tiktoken's ranks
// format: "<base64 token> <rank>" per line) from the rank data the
// js-tiktoken npm package ships, so the exact tokenizer can be tested on
// this network, where only the npm registry is reachable.
//
//   node make_ranks.mjs NPM_PREFIX OUT_DIR
import { createRequire } from 'node:module';
import { writeFileSync, renameSync } from 'node:fs';
import { join } from 'node:path';

const [prefix, outDir] = process.argv.slice(2);
if (!prefix || !outDir) {
  console.error('usage: node make_ranks.mjs NPM_PREFIX OUT_DIR');
  process.exit(2);
}
const require = createRequire(join(prefix, 'node_modules', 'js-tiktoken', 'package.json'));

for (const name of ['cl100k_base', 'o200k_base']) {
  const mod = require(`js-tiktoken/ranks/${name}`);
  const data = mod.default ?? mod;
  // js-tiktoken's compressed form: lines of "<label> <first rank> <token>..."
  // with consecutive ranks (see its Tiktoken constructor).
  const lines = [];
  for (const line of data.bpe_ranks.split('\n')) {
    if (!line)
      continue;
    const [, offsetStr, ...tokens] = line.split(' ');
    const offset = Number.parseInt(offsetStr, 10);
    tokens.forEach((token, i) => lines.push(`${token} ${offset + i}`));
  }
  const path = join(outDir, `${name}.tiktoken`);
  writeFileSync(path + '.tmp', lines.join('\n') + '\n');
  renameSync(path + '.tmp', path);
  console.log(`${path}: ${lines.length} ranks`);
}
