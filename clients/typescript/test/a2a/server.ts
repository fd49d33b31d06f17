// SPDX-License-Identifier: MIT
// One A2A server process for the a2a tests: the scripted agent (agent.ts)
// over a MemdTaskStore of memd at MEMD_URL, app APP. Prints one line,
// {"url": "http://127.0.0.1:PORT"}, once it listens, then serves until it
// is killed. With `memd`, the request handler is MemdRequestHandler, else
// the SDK's DefaultRequestHandler.
// Usage: node server.js MEMD_URL APP [memd]

import { MemdRequestHandler, MemdTaskStore } from '../../src/a2a.js';
import { startA2AServer } from './agent.js';

const [baseUrl, app, handler] = process.argv.slice(2);
if (!baseUrl || !app) {
  console.error('usage: node server.js MEMD_URL APP [memd]');
  process.exit(2);
}
const server = await startA2AServer(new MemdTaskStore({ baseUrl, app }), handler === 'memd' ? MemdRequestHandler : undefined);
process.stdout.write(`${JSON.stringify({ url: server.url })}\n`);
