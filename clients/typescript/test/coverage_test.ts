// SPDX-License-Identifier: MIT
// MemdClient against api/openapi.yaml: a method for every operationId but
// the MCP transport's (this fails when the spec gains an operation the
// client lacks), nothing the spec does not have, and a src that uses web
// APIs only (no node: modules), so that it runs in browsers.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { MemdClient, OPERATIONS } from '../src/index.js';
import { packageRoot, specText } from './helpers.js';

/** The MCP transport's operations: MCP clients speak MCP, not this client. */
const MCP_OPERATIONS = ['mcpMessage', 'mcpEndSession'];

/* operationIds by a line scan of the YAML (one `operationId: name` a line). */
function specOperations(): string[] {
  const ids: string[] = [];
  for (const line of specText().split('\n')) {
    const m = /^\s+operationId:\s*['"]?([A-Za-z0-9_]+)['"]?\s*$/.exec(line);
    if (m) ids.push(m[1]);
  }
  return ids;
}

test('every operationId of api/openapi.yaml but the MCP ones has a method', () => {
  const ids = specOperations();
  assert.ok(ids.length > 50, `only ${ids.length} operationIds found in the spec`);
  for (const mcp of MCP_OPERATIONS) assert.ok(ids.includes(mcp), `the spec has no ${mcp}`);
  const wanted = ids.filter((id) => !MCP_OPERATIONS.includes(id));
  const missing = wanted.filter(
    (id) => typeof (MemdClient.prototype as unknown as Record<string, unknown>)[id] !== 'function');
  assert.deepEqual(missing, [], `operations without a MemdClient method: ${missing.join(', ')}`);
  assert.deepEqual([...OPERATIONS].sort(), [...wanted].sort());
});

test('src imports no node: module but node_transport.js\'s, on demand (browsers and Node 18+)', () => {
  const dir = path.join(packageRoot, 'dist/src');
  const files = fs.readdirSync(dir).filter((f) => f.endsWith('.js'));
  assert.ok(files.includes('client.js'));
  for (const f of files) {
    const text = fs.readFileSync(path.join(dir, f), 'utf8');
    assert.doesNotMatch(text, /from\s+['"]node:|require\(|\bBuffer\b|\bprocess\./, `${f} uses a Node API`);
    /* The node transport loads node:http and node:https on its first
     * request, by a dynamic import a bundler leaves alone. */
    const dynamic = [...text.matchAll(/import\(([^)]*)\)/g)].map((m) => m[1]);
    assert.deepEqual(dynamic, f === 'node_transport.js'
      ? ["/* webpackIgnore: true */ /* @vite-ignore */ 'node:https'", "/* webpackIgnore: true */ /* @vite-ignore */ 'node:http'"]
      : [], `${f}'s dynamic imports`);
  }
});
