// SPDX-License-Identifier: MIT
// One A2A server process for the a2a tests: the scripted agent (agent.ts)
// over a MemdTaskStore of memd at MEMD_URL, app APP. Prints one line,
// {"url": "http://127.0.0.1:PORT"}, once it listens, then serves until it
// is killed.
// Usage: node server.js MEMD_URL APP

import { MemdTaskStore } from '../../src/a2a.js';
import { startA2AServer } from './agent.js';

const [baseUrl, app] = process.argv.slice(2);
if (!baseUrl || !app) {
  console.error('usage: node server.js MEMD_URL APP');
  process.exit(2);
}
const server = await startA2AServer(new MemdTaskStore({ baseUrl, app }));
process.stdout.write(`${JSON.stringify({ url: server.url })}\n`);
